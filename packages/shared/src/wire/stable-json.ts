/**
 * JSON with object keys sorted at every depth: equal values give equal text,
 * whatever their key order. Written out directly rather than by sorting into
 * copies and stringifying those: call signatures canonicalise every call's
 * arguments, on the dispatcher and again on the worker.
 */
export function stableStringify(value: unknown): string {
  return write(value) ?? 'null';
}

/** The text of one value, or undefined where JSON.stringify omits it (undefined, functions, symbols). */
function write(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  // Dates and the like serialise as JSON.stringify would have them (toJSON first).
  const json = (value as { toJSON?: unknown }).toJSON;
  if (typeof json === 'function') return write((json as () => unknown).call(value));
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + (write(value[i]) ?? 'null');
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  let out = '{';
  let first = true;
  for (const key of keys) {
    const text = write(record[key]);
    if (text === undefined) continue;
    out += `${first ? '' : ','}${JSON.stringify(key)}:${text}`;
    first = false;
  }
  return `${out}}`;
}
