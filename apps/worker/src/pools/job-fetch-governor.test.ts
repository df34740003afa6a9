import { describe, expect, it } from 'vitest';
import { CallSlots } from './call-slots.js';
import { JobFetchGovernor } from './job-fetch-governor.js';

describe('JobFetchGovernor', () => {
  it('fetches one job when idle, and as many more as the spare call slots would fill', () => {
    const slots = new CallSlots(8);
    let limit = -1;
    const governor = new JobFetchGovernor(slots, (jobs) => (limit = jobs));
    governor.govern();
    expect(limit).toBe(1);
    // A job of 2 calls taken: 6 spare slots at ~1.2 calls per job (moving average) → 1 active + 5 more.
    governor.jobTaken(2);
    expect(limit).toBe(1 + Math.floor((8 - 2) / (0.8 + 0.4)));
    governor.jobDone();
    expect(limit).toBe(1);
  });

  it('fetches nothing more while every slot is held or promised to a taken job', async () => {
    const slots = new CallSlots(2);
    let limit = -1;
    const governor = new JobFetchGovernor(slots, (jobs) => (limit = jobs));
    governor.jobTaken(5);
    expect(limit).toBe(1);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const nothing = (): void => undefined;
    const runs = [slots.run(() => held, nothing, () => held), slots.run(() => held, nothing, () => held)];
    governor.callAsks();
    governor.callAsks();
    governor.govern();
    expect(limit).toBe(1);
    release();
    await Promise.all(runs);
  });
});
