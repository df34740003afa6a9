import { describe, expect, it } from 'vitest';
import { ToldPerWindow } from './told-per-window.js';

describe('ToldPerWindow', () => {
  it('tells max events a window, counts the rest, and gives that count with the first event told after the window', () => {
    let now = 0;
    const told = new ToldPerWindow(2, 1_000, () => now);
    expect([told.take(), told.take(), told.take(), told.take()]).toEqual([0, 0, 'drop', 'drop']);
    now = 999;
    expect(told.take()).toBe('drop');
    now = 1_000;
    expect(told.take()).toBe(3);
    expect(told.take()).toBe(0);
  });

  it('drain hands over what was dropped once, for the end of a stream', () => {
    let now = 0;
    const told = new ToldPerWindow(1, 1_000, () => now);
    told.take();
    told.take();
    told.take();
    expect(told.drain()).toBe(2);
    expect(told.drain()).toBe(0);
    now = 5_000;
    expect(told.take()).toBe(0);
  });
});
