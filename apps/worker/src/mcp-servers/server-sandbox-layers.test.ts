import { describe, expect, it } from 'vitest';
import { assertServerSandbox, missingServerSandboxLayers, serverSandboxLayers } from './server-sandbox-layers.js';

const everything = { bubblewrap: true, unshare: true, unshareProc: true, setpriv: true, prlimit: true, shell: true };
const nothing = { bubblewrap: false, unshare: false, setpriv: false, prlimit: false, shell: false };

describe('the layers of sandboxed MCP servers', () => {
  it('are all in force with bubblewrap, setpriv and prlimit', () => {
    const layers = serverSandboxLayers(everything);
    expect(layers).toEqual({ network: 'namespace', filesystem: 'bubblewrap', processes: 'namespace', rlimits: 'prlimit', orphans: 'killed', syscalls: 'seccomp', environment: 'declared' });
    expect(missingServerSandboxLayers(layers)).toEqual([]);
    expect(assertServerSandbox(everything, true)).toEqual(layers);
  });

  it('without bubblewrap, keep unshare namespaces but miss the filesystem view and the system-call filter, which strict mode refuses', () => {
    const probe = { ...everything, bubblewrap: false };
    expect(serverSandboxLayers(probe)).toMatchObject({ network: 'namespace', filesystem: 'none', processes: 'namespace', syscalls: 'none' });
    expect(missingServerSandboxLayers(serverSandboxLayers(probe))).toEqual([expect.stringMatching(/^filesystem view \(bubblewrap\)/), expect.stringMatching(/^system-call filter .*Unix sockets to host services.*vsock/)]);
    expect(() => assertServerSandbox(probe, true)).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringContaining('filesystem view') as string }) as Error);
    expect(assertServerSandbox(probe, false).filesystem).toBe('none');
    // unshare that cannot mount a /proc of its own leaves the host's in view: named, and refused when strict.
    const hostProc = { ...probe, unshareProc: false };
    expect(serverSandboxLayers(hostProc).processes).toBe('namespace-host-proc');
    expect(missingServerSandboxLayers(serverSandboxLayers(hostProc))).toContainEqual(expect.stringMatching(/^\/proc of its own .*see the host's processes/));
  });

  it('name each missing layer and what it leaves open', () => {
    const layers = serverSandboxLayers(nothing);
    expect(layers).toMatchObject({ network: 'none', filesystem: 'none', processes: 'process-group', rlimits: 'none', orphans: 'none' });
    expect(missingServerSandboxLayers(layers).join('; ')).toMatch(/network namespace.*filesystem view.*PID namespace.*rlimits.*system-call filter.*death with the worker/);
    expect(serverSandboxLayers({ ...nothing, shell: true }).rlimits).toBe('ulimit');
    expect(() => assertServerSandbox(nothing, true)).toThrow(/cannot enforce the network namespace.*run where bubblewrap/);
  });
});
