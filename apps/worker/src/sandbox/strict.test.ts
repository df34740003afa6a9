import { describe, expect, it } from 'vitest';
import type { SandboxIsolation } from './sandbox.js';
import { unenforced } from './strict.js';

const full: SandboxIsolation = { network: 'namespace', processes: 'namespace', filesystem: 'permission-model', rlimits: 'prlimit', memory: 'heap+rlimit', cgroup: 'unavailable', environment: 'empty' };

describe('unenforced isolation layers', () => {
  it('is empty when namespaces and rlimits hold (cgroup v2 is optional)', () => {
    expect(unenforced(full)).toEqual([]);
    expect(unenforced({ ...full, rlimits: 'ulimit' })).toEqual([]);
  });

  it('names each missing layer and what it leaves open', () => {
    const missing = unenforced({ ...full, network: 'none', processes: 'none', rlimits: 'none', memory: 'heap' });
    expect(missing).toHaveLength(3);
    expect(missing.join('; ')).toMatch(/network namespace.*PID namespace.*rlimits/);
  });
});
