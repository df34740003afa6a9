import { describe, expect, it } from 'vitest';
import { ANONYMOUS_OWNER, idleToReap, isolationFor, ownerOf, pickProcess, planRoom, type ProcessView, resolveAssignment } from './process-assignment.js';

interface P extends ProcessView {
  readonly id: string;
}

const proc = (id: string, owner: string | undefined, load = 0, lastUsedAt = 0, retiring = false): P => ({ id, owner, load, lastUsedAt, retiring });
const rules = { perProcess: 2, perOwner: 2 };
const needs = { needed: 0, waiting: new Set<string>(), starting: 0, warm: 1, cap: 4 };
const ids = (ps: readonly P[]): string[] => ps.map((p) => p.id);

describe('ownerOf', () => {
  it('names callers and per-call owners in separate name spaces, and every anonymous call as one caller', () => {
    let n = 0;
    const seq = () => ++n;
    expect(ownerOf('alice', 'caller', seq)).toBe('caller:alice');
    expect(ownerOf(undefined, 'caller', seq)).toBe(ANONYMOUS_OWNER);
    // The call signature reads a missing caller as '': the two must be one owner.
    expect(ownerOf('', 'caller', seq)).toBe(ANONYMOUS_OWNER);
    // A subject that spells another owner's key is still its own owner.
    expect(ownerOf('anonymous', 'caller', seq)).not.toBe(ANONYMOUS_OWNER);
    expect(ownerOf('call:1', 'caller', seq)).not.toBe(ownerOf('alice', 'call', seq));
    expect(ownerOf('alice', 'call', seq)).not.toBe(ownerOf('alice', 'call', seq));
  });
});

describe('isolationFor', () => {
  it('takes the stricter of the worker and the tool: a tool can tighten, never loosen', () => {
    expect(isolationFor('caller', undefined)).toBe('caller');
    expect(isolationFor('caller', 'call')).toBe('call');
    expect(isolationFor('call', 'caller')).toBe('call');
    expect(isolationFor('call', undefined)).toBe('call');
  });
});

describe('pickProcess', () => {
  it('never picks a process of another owner, however much room it has', () => {
    expect(pickProcess('a', [proc('b1', 'b')], rules)).toEqual({ kind: 'wait', needsProcess: true });
  });

  it("runs in the caller's own process with most room, before claiming a spare", () => {
    const ps = [proc('spare', undefined), proc('a1', 'a', 1), proc('a2', 'a', 0), proc('b1', 'b')];
    expect(pickProcess('a', ps, rules)).toMatchObject({ kind: 'run', process: { id: 'a2' } });
  });

  it("claims a spare once the caller's processes are full, up to perOwner processes", () => {
    const one = [proc('a1', 'a', 2), proc('spare', undefined)];
    expect(pickProcess('a', one, rules)).toMatchObject({ kind: 'claim', process: { id: 'spare' } });
    const two = [proc('a1', 'a', 2), proc('a2', 'a', 2), proc('spare', undefined)];
    expect(pickProcess('a', two, rules)).toEqual({ kind: 'wait', needsProcess: false });
  });

  it('skips retiring processes: their own caller waits for a new one', () => {
    const ps = [proc('a1', 'a', 0, 0, true), proc('spare', undefined, 0, 0, true)];
    expect(pickProcess('a', ps, rules)).toEqual({ kind: 'wait', needsProcess: true });
  });
});

describe('planRoom', () => {
  it('keeps `warm` spares ready and starts one per owner in need, within the cap', () => {
    expect(planRoom([proc('a1', 'a', 1)], { ...needs, needed: 0 })).toEqual({ start: 1, evict: [], drain: [] });
    expect(planRoom([proc('a1', 'a', 1)], { ...needs, needed: 2 })).toEqual({ start: 3, evict: [], drain: [] });
    expect(planRoom([proc('a1', 'a', 1), proc('s', undefined)], { ...needs, needed: 0 })).toEqual({ start: 0, evict: [], drain: [] });
    // Processes already starting count.
    expect(planRoom([proc('a1', 'a', 1)], { ...needs, needed: 1, starting: 2 })).toEqual({ start: 0, evict: [], drain: [] });
    // One place left under the cap of 4 for three owners in need: two idle processes of others make the rest.
    const full = planRoom([proc('a1', 'a'), proc('b1', 'b'), proc('c1', 'c')], { ...needs, needed: 3 });
    expect({ start: full.start, evict: ids(full.evict) }).toEqual({ start: 1, evict: ['a1', 'b1'] });
  });

  it('at the cap, stops the least recently used idle process of another caller', () => {
    const ps = [proc('a1', 'a', 0, 30), proc('b1', 'b', 0, 10), proc('c1', 'c', 3, 0), proc('d1', 'd', 0, 20)];
    expect(ids(planRoom(ps, { ...needs, needed: 1, warm: 0 }).evict)).toEqual(['b1']);
    expect(ids(planRoom(ps, { ...needs, needed: 2, warm: 0 }).evict)).toEqual(['b1', 'd1']);
  });

  it('drains a busy process when none is idle, taking from the caller holding the most, and never from owners waiting if it can help it', () => {
    const ps = [proc('a1', 'a', 1, 0), proc('b1', 'b', 1, 50), proc('b2', 'b', 1, 60), proc('c1', 'c', 1, 5)];
    expect(ids(planRoom(ps, { ...needs, needed: 1, warm: 0 }).drain)).toEqual(['b1']);
    expect(ids(planRoom(ps, { ...needs, needed: 1, warm: 0, waiting: new Set(['b']) }).drain)).toEqual(['a1']);
  });

  it('counts retiring processes as room on its way, and never touches spares or retiring ones', () => {
    const ps = [proc('a1', 'a', 1, 0, true), proc('b1', 'b', 0), proc('s', undefined), proc('c1', 'c', 1)];
    expect(planRoom(ps, { ...needs, needed: 1, warm: 0 })).toEqual({ start: 0, evict: [], drain: [] });
    expect(ids(planRoom(ps, { ...needs, needed: 2, warm: 0 }).evict)).toEqual(['b1']);
  });
});

describe('idleToReap', () => {
  it("stops owned processes idle for idleMs, never spares, busy or retiring ones", () => {
    const ps = [proc('old', 'a', 0, 0), proc('fresh', 'b', 0, 900), proc('busy', 'c', 1, 0), proc('spare', undefined, 0, 0), proc('going', 'd', 0, 0, true)];
    expect(ids(idleToReap(ps, 1000, 500))).toEqual(['old']);
  });
});

describe('resolveAssignment', () => {
  it('defaults to caller isolation with a bounded pool, and names bad options', () => {
    expect(resolveAssignment({})).toMatchObject({ isolation: 'caller', maxProcesses: 64, idleMs: 60_000 });
    expect(resolveAssignment({}).processesPerCaller).toBeGreaterThanOrEqual(2);
    expect(() => resolveAssignment({ isolation: 'process' as 'call' })).toThrow(/isolation/);
    expect(() => resolveAssignment({ maxProcesses: 0 })).toThrow(/maxProcesses/);
  });
});
