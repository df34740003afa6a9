import { parseToolDefinition, RegistryError, type Tool } from '@forge-fleet/shared';
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

  /**
   * Generations whose start is refused while a generation holding another definition of a tool has not stepped aside
   * (as the catalog refuses it), or always when `elsewhere` (another worker holds the old definition); `events` says
   * what each generation did, in order.
   */
  function changingDefinitions(elsewhere: boolean): { make: (tools: readonly Tool[], id: string) => WorkerPool; generations: string[][]; events: string[] } {
    const generations: string[][] = [];
    const events: string[] = [];
    const holding = new Map<string, string>();
    const make = (tools: readonly Tool[], id: string): WorkerPool => {
      generations.push(tools.map((t) => `${t.definition.name}:${t.definition.description}`));
      const start = (): Promise<void> => {
        const clash = tools.some((t) => (elsewhere && t.definition.description === 'changed') || [...holding.values()].some((held) => held.split(',').includes(t.definition.name) && !held.split(',').includes(`${t.definition.name}:${t.definition.description}`)));
        events.push(`${id} ${clash ? 'refused' : 'started'}`);
        if (clash) return Promise.reject(new RegistryError("tool 'a' is served by another worker with another definition"));
        holding.set(id, tools.flatMap((t) => [t.definition.name, `${t.definition.name}:${t.definition.description}`]).join(','));
        return Promise.resolve();
      };
      const release = (what: string) => (): Promise<void> => {
        holding.delete(id);
        events.push(`${id} ${what}`);
        return Promise.resolve();
      };
      return { id, ready: true, start, stepAside: release('stepped aside'), stop: release('stopped') } as unknown as WorkerPool;
    };
    return { make, generations, events };
  }

  it('lets the old generation step aside for a changed definition, announces the new one, and only then stops the old one', async () => {
    const { make, events } = changingDefinitions(false);
    const pool = new ServingPool({ make, id: 'w', shutdownGraceMs: 1000, log: pino({ level: 'silent' }) });
    const before = toolsNamed('a', 'b');
    await pool.start(before);
    const changed = [{ ...before[0]!, definition: { ...before[0]!.definition, description: 'changed' } }, before[1]!];
    await pool.retool(changed);
    // Stopping the old one first would leave the tools without a worker, and the calls its queue holds would end
    // NO_WORKER; stopped after, they are re-homed to the new one.
    expect(events).toEqual(['w started', 'w.g1 refused', 'w.g1 stopped', 'w stepped aside', 'w.g1b started', 'w stopped']);
    expect(pool.tools).toBe(changed);
  });

  it('serves its previous set again when another worker holds the old definition of a tool whose definition changed here', async () => {
    const { make, generations } = changingDefinitions(true);
    const pool = new ServingPool({ make, id: 'w', shutdownGraceMs: 1000, log: pino({ level: 'silent' }) });
    const before = toolsNamed('a', 'b');
    await pool.start(before);
    const changed = [{ ...before[0]!, definition: { ...before[0]!.definition, description: 'changed' } }, before[1]!];
    await expect(pool.retool(changed)).rejects.toBeInstanceOf(RegistryError);
    // The old generation stepped aside for the new one (its own `a` would have clashed), the new one was refused
    // too, and the previous set serves again: the worker never ends up serving nothing.
    expect(generations).toEqual([['a:a', 'b:b'], ['a:changed', 'b:b'], ['a:changed', 'b:b'], ['a:a', 'b:b']]);
    expect(pool.tools).toBe(before);
    expect(pool.ready).toBe(true);
  });
});

