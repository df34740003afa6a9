import { describe, expect, it } from 'vitest';
import { CallSlots } from './call-slots.js';

describe('CallSlots', () => {
  it('runs at most its limit at once, the rest in order as slots free', async () => {
    const slots = new CallSlots(1);
    const order: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const first = slots.run(async () => { order.push('first'); await held; }, () => undefined, () => Promise.resolve());
    const second = slots.run(() => Promise.resolve(void order.push('second')), () => undefined, () => Promise.resolve());
    expect(slots.spare).toBe(-1);
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['first', 'second']);
    expect(slots.spare).toBe(1);
  });

  it('gives the calls still waiting their otherwise when drained, holding no slot, and lets the running ones finish', async () => {
    const slots = new CallSlots(1);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const running = slots.run(() => held.then(() => 'ran'), () => undefined, () => Promise.resolve('handed back'));
    const waiting = [1, 2].map(() => slots.run(() => Promise.resolve('ran'), () => undefined, () => Promise.resolve('handed back')));
    slots.drain();
    expect(await Promise.all(waiting)).toEqual(['handed back', 'handed back']);
    release();
    expect(await running).toBe('ran');
    expect(slots.spare).toBe(1);
  });
});
