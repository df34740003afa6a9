import { describe, expect, it } from 'vitest';
import { lazyChild } from './run-main.js';

describe('lazyChild', () => {
  it('makes the child logger only when a line at an enabled level is written', () => {
    const made: Record<string, unknown>[] = [];
    const lines: string[] = [];
    const parent = {
      isLevelEnabled: (level: string) => level !== 'debug',
      child: (bindings: Record<string, unknown>) => {
        made.push(bindings);
        return { info: (msg: string) => lines.push(`info ${msg}`), debug: (msg: string) => lines.push(`debug ${msg}`) };
      },
    };
    const log = lazyChild(parent, { callId: 'c1' });
    log.debug('skipped');
    expect(made).toEqual([]);
    log.info('written');
    log.info('again');
    expect(made).toEqual([{ callId: 'c1' }]);
    expect(lines).toEqual(['info written', 'info again']);
  });
});
