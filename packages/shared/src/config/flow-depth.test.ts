import { describe, expect, it } from 'vitest';
import { deepFlowAt } from './flow-depth.js';

const brackets = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;

describe('deepFlowAt', () => {
  it('finds the first bracket past the bound, in any value position', () => {
    expect(deepFlowAt(`a: ${brackets(5)}`, 4)).toBe(3 + 4);
    expect(deepFlowAt(`a: ${brackets(4)}`, 4)).toBeUndefined();
    expect(deepFlowAt(`- ${'{a: '.repeat(6)}1${'}'.repeat(6)}`, 5)).toBe(2 + 5 * 4);
    expect(deepFlowAt(`x:\n  y: [1, [2, [3, [4]]], {z: [5]}]`, 4)).toBeUndefined();
    expect(deepFlowAt(`x:\n  y: [1, [2, [3, [4, [5]]]]]`, 4)).toBeDefined();
    expect(deepFlowAt(`x: [\n  [\n    [\n    ]\n  ]\n]`, 2)).toBeDefined();
  });

  it('does not count brackets inside plain or quoted scalars, or comments', () => {
    expect(deepFlowAt(`pattern: ^[a-z${'['.repeat(50)}`, 4)).toBeUndefined();
    expect(deepFlowAt(`a: "${'['.repeat(50)}"\nb: '${"[''".repeat(50)}'`, 4)).toBeUndefined();
    expect(deepFlowAt(`a: "\\"${'['.repeat(50)}"`, 4)).toBeUndefined();
    expect(deepFlowAt(`a: 1 # ${'['.repeat(50)}\nb: 2`, 4)).toBeUndefined();
    expect(deepFlowAt(`a: x[1] ${']'.repeat(10)}\nb: ${brackets(3)}`, 3)).toBeUndefined();
  });

  it('reads 100,000 brackets in one pass, which the YAML parser cannot', () => {
    expect(deepFlowAt(`a: ${brackets(100_000)}`, 128)).toBe(3 + 128);
  });
});
