import { describe, expect, it } from 'vitest';
import type { SandboxIsolation } from './sandbox.js';
import { unenforced, weakened } from './strict.js';

const full: SandboxIsolation = {
  network: 'namespace',
  processes: 'namespace',
  filesystem: 'bubblewrap+permission-model',
  orphans: 'killed',
  rlimits: 'prlimit',
  memory: 'heap+rlimit',
  cgroup: 'unavailable',
  environment: 'empty',
};

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

  it('does not require bubblewrap or a parent-death kill: those are warnings', () => {
    const partial: SandboxIsolation = { ...full, filesystem: 'permission-model', orphans: 'exit-on-channel-close' };
    expect(unenforced(partial)).toEqual([]);
    expect(weakened(full)).toEqual([]);
    expect(weakened(partial).join('; ')).toMatch(/filesystem view \(bubblewrap\).*death with the worker/);
  });
});
