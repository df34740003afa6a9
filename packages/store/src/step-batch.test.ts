import { describe, expect, it } from 'vitest';
import { StepBatch, type StepSender } from './step-batch.js';

/** A sender that records what it was asked and answers when told. */
function recorder<R>(answer: (keys: readonly string[], args: readonly (string | number)[]) => R) {
  const sent: { keys: readonly string[]; args: readonly (string | number)[] }[] = [];
  const pending: (() => void)[] = [];
  const send: StepSender<R> = (keys, args) => {
    sent.push({ keys, args });
    return new Promise<R>((resolve) => pending.push(() => resolve(answer(keys, args))));
  };
  return { sent, send, answerAll: () => pending.splice(0).forEach((f) => f()) };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('StepBatch', () => {
  it('sends a step that is alone at once, before the caller goes on, through `now`', () => {
    const one = recorder(() => 'one');
    const many = recorder(() => ['many']);
    const now = recorder((keys) => `now:${keys[0]}`);
    const batch = new StepBatch(one.send, many.send, now.send);
    void batch.run(['k1'], ['a', 1]);
    // Synchronously: nothing waits for the end of the turn.
    expect(now.sent).toEqual([{ keys: ['k1'], args: ['a', 1] }]);
    expect(one.sent).toEqual([]);
    expect(many.sent).toEqual([]);
  });

  it('coalesces the steps asked for while one is in flight into one batched run, each with its own reply', async () => {
    const one = recorder(() => 'one');
    const many = recorder((_keys, args) => {
      // Each step's replies in order: the batched script's reply per step (here: its first argument), one an error.
      const out: unknown[] = [];
      for (let a = 0; a < args.length; ) {
        const na = Number(args[a + 1]);
        const first = args[a + 2];
        out.push(first === 'bad' ? new Error('refused') : `r:${String(first)}`);
        a += 2 + na;
      }
      return out;
    });
    const now = recorder((keys) => `now:${keys[0]}`);
    const batch = new StepBatch(one.send, many.send, now.send);
    const first = batch.run(['k1'], ['x']);
    const second = batch.run(['k2'], ['y', 2]);
    const third = batch.run(['k3', 'k3b'], ['bad']);
    expect(now.sent).toHaveLength(1);
    expect(many.sent).toEqual([]);
    await turn();
    expect(many.sent).toEqual([{ keys: ['k2', 'k3', 'k3b'], args: [1, 2, 'y', 2, 2, 1, 'bad'] }]);
    now.answerAll();
    many.answerAll();
    await expect(first).resolves.toBe('now:k1');
    await expect(second).resolves.toBe('r:y');
    await expect(third).rejects.toThrow('refused');
  });

  it('sends at once again only when nothing is in flight or waiting', async () => {
    const one = recorder(() => 'one');
    const many = recorder(() => []);
    const now = recorder(() => 'now');
    const batch = new StepBatch(one.send, many.send, now.send);
    const first = batch.run(['k1'], []);
    const second = batch.run(['k2'], []);
    await turn();
    // The second was alone in its batch: the plain script, on the auto-pipeline.
    expect(one.sent).toEqual([{ keys: ['k2'], args: [] }]);
    now.answerAll();
    await first;
    // The second is still in flight: a third waits for the turn.
    const third = batch.run(['k3'], []);
    expect(now.sent).toHaveLength(1);
    one.answerAll();
    await second;
    await turn();
    one.answerAll();
    await third;
    // All answered: the next step is alone again.
    void batch.run(['k4'], []);
    expect(now.sent.map((s) => s.keys)).toEqual([['k1'], ['k4']]);
  });

  it('keeps counting a step that failed as settled, and hands its error to its caller', async () => {
    const failing: StepSender<string> = () => Promise.reject(new Error('Connection is closed.'));
    const now = recorder(() => 'now');
    let calls = 0;
    const batch = new StepBatch<string>(failing, () => Promise.resolve([]), (keys, args) => (calls++ === 0 ? failing(keys, args) : now.send(keys, args)));
    await expect(batch.run(['k1'], [])).rejects.toThrow('Connection is closed.');
    void batch.run(['k2'], []);
    expect(now.sent).toHaveLength(1);
  });
});
