import { afterEach, vi } from 'vitest';

// A test that prints has usually hit a path it did not expect; make that loud.
const methods = ['log', 'info', 'warn', 'error', 'debug'] as const;
const spies = methods.map((m) => vi.spyOn(console, m));

afterEach(() => {
  const calls = spies.flatMap((spy, i) => spy.mock.calls.map((args) => `console.${methods[i]}(${args.map(String).join(' ')})`));
  for (const spy of spies) spy.mockClear();
  if (calls.length > 0) throw new Error(`unexpected console output during the test:\n${calls.join('\n')}`);
});
