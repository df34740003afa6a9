/**
 * Calls `visit` with `value` and every value inside it (array items, object
 * members' values), until `visit` answers false. A walk with a stack of its
 * own, never recursion: the documents walked (a hostile server's listing, a
 * call's data) may nest deeper than the call stack goes. Order is not
 * document order; counts and sums do not need it.
 */
export function eachJsonValue(value: unknown, visit: (node: unknown) => boolean): void {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (!visit(node)) return;
    if (typeof node !== 'object' || node === null) continue;
    for (const inner of Array.isArray(node) ? node : Object.values(node)) stack.push(inner);
  }
}
