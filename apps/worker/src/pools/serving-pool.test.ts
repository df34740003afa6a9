import { parseToolDefinition, type Tool } from '@forge-fleet/shared';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RETOOL_MIN_INTERVAL_MS, ServingPool } from './serving-pool.js';
import type { WorkerPool } from './worker-pool.js';

/** A tool set named by its tools, each a plain in-process tool. */
function toolsNamed(...names: string[]): Tool[] {
  return names.map((name) => ({
    definition: parseToolDefinition({ name, description: name, parameters: { type: 'object' }, tier: 'host' }),
    executor: { name, execute: () => Promise.resolve({ toolCallId: 'x', name, content: '', isError: false }) },
  }));
}

/** The generations a ServingPool made, as the tool names each one served. */
function servingPool(): { pool: ServingPool; generations: string[][]; stopped: string[] } {
  const generations: string[][] = [];
  const stopped: string[] = [];
  const make = (tools: readonly Tool[], id: string): WorkerPool => {
    generations.push(tools.map((t) => t.definition.name));
    return { id, ready: true, start: () => Promise.resolve(), stop: () => (stopped.push(id), Promise.resolve()) } as unknown as WorkerPool;
  };
  return { pool: new ServingPool({ make, id: 'w', shutdownGraceMs: 1000, log: pino({ level: 'silent' }) }), generations, stopped };
}

describe('ServingPool', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('takes a change at once, then at most one per interval: changes asked for meanwhile are taken as one, the newest', async () => {
    const { pool, generations, stopped } = servingPool();
    await pool.start(toolsNamed('a'));
    await pool.retool(toolsNamed('a', 'b'));
    expect(generations).toEqual([['a'], ['a', 'b']]);
    // Three changes within the interval: none starts a pool before it has passed, then only the last does.
    const asked = [pool.retool(toolsNamed('a', 'c')), pool.retool(toolsNamed('a', 'd')), pool.retool(toolsNamed('a', 'e'))];
    await vi.advanceTimersByTimeAsync(RETOOL_MIN_INTERVAL_MS - 10);
    expect(generations).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(10);
    await Promise.all(asked);
    expect(generations).toEqual([['a'], ['a', 'b'], ['a', 'e']]);
    expect(pool.tools.map((t) => t.definition.name)).toEqual(['a', 'e']);
    // The generations it replaced were stopped (drained), the one serving now was not.
    expect(stopped).toEqual(['w', 'w.g1']);
  });

  it('takes a change that comes after a quiet interval at once', async () => {
    const { pool, generations } = servingPool();
    await pool.start(toolsNamed('a'));
    await pool.retool(toolsNamed('b'));
    await vi.advanceTimersByTimeAsync(RETOOL_MIN_INTERVAL_MS);
    await pool.retool(toolsNamed('c'));
    expect(generations).toEqual([['a'], ['b'], ['c']]);
  });

  it('stops without waiting out the interval, and takes no waiting change', async () => {
    const { pool, generations } = servingPool();
    await pool.start(toolsNamed('a'));
    await pool.retool(toolsNamed('b'));
    const waiting = pool.retool(toolsNamed('c'));
    await pool.stop();
    await waiting;
    expect(generations).toEqual([['a'], ['b']]);
  });
});
