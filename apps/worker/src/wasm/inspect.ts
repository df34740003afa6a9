/** What a module's binary says about its linear memory, read without instantiating it. */
export interface MemoryLayout {
  /** Memories the module defines itself (section 5), in pages of 64 KiB. */
  readonly defined: readonly MemoryLimits[];
  /** Memories it expects the host to give it. */
  readonly imported: readonly MemoryLimits[];
}

export interface MemoryLimits {
  readonly minPages: number;
  readonly maxPages: number | undefined;
  readonly shared: boolean;
  readonly memory64: boolean;
}

/** 64 KiB, the WebAssembly page size. */
export const WASM_PAGE_BYTES = 65_536;

class Reader {
  offset = 0;
  constructor(private readonly bytes: Uint8Array) {}

  byte(): number {
    const b = this.bytes[this.offset];
    if (b === undefined) throw new Error('unexpected end of the module');
    this.offset += 1;
    return b;
  }

  /** An unsigned LEB128 number (memory64 limits can pass 2^32; a double holds them exactly up to 2^53). */
  uleb(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const b = this.byte();
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
    }
    throw new Error('malformed LEB128 number');
  }

  skip(n: number): void {
    if (this.offset + n > this.bytes.length) throw new Error('unexpected end of the module');
    this.offset += n;
  }

  limits(): MemoryLimits {
    const flags = this.byte();
    const minPages = this.uleb();
    const maxPages = (flags & 0x01) !== 0 ? this.uleb() : undefined;
    return { minPages, maxPages, shared: (flags & 0x02) !== 0, memory64: (flags & 0x04) !== 0 };
  }
}

/**
 * Reads the memory limits of a WebAssembly binary (the import and memory
 * sections). It checks only what it reads: `WebAssembly.compile` validates the rest.
 *
 * @throws Error when the bytes are not a WebAssembly binary or a section it reads is malformed.
 */
export function inspectMemory(bytes: Uint8Array): MemoryLayout {
  const magic = [0x00, 0x61, 0x73, 0x6d];
  if (bytes.length < 8 || magic.some((b, i) => bytes[i] !== b)) throw new Error('not a WebAssembly binary (bad magic number)');
  const r = new Reader(bytes);
  r.skip(8);
  const defined: MemoryLimits[] = [];
  const imported: MemoryLimits[] = [];
  while (r.offset < bytes.length) {
    const id = r.byte();
    const size = r.uleb();
    const end = r.offset + size;
    if (id === 2) {
      const count = r.uleb();
      for (let i = 0; i < count; i++) {
        r.skip(r.uleb()); // module name
        r.skip(r.uleb()); // field name
        const kind = r.byte();
        if (kind === 0) r.uleb();
        else if (kind === 1) {
          r.byte();
          r.limits();
        } else if (kind === 2) imported.push(r.limits());
        else if (kind === 3) r.skip(2);
        else if (kind === 4) {
          r.byte();
          r.uleb();
        } else throw new Error(`unknown import kind ${kind}`);
      }
    } else if (id === 5) {
      const count = r.uleb();
      for (let i = 0; i < count; i++) defined.push(r.limits());
    }
    r.offset = end;
  }
  if (r.offset !== bytes.length) throw new Error('a section runs past the end of the module');
  return { defined, imported };
}

/**
 * Why a module may not run under a memory cap, or `undefined` when it may.
 * Only modules that define one 32-bit, unshared memory with a maximum at or
 * below the cap are accepted: V8 then refuses any `memory.grow` past it.
 */
export function memoryProblem(layout: MemoryLayout, capPages: number): string | undefined {
  if (layout.imported.length > 0) return 'it imports its memory; define and export the memory in the module instead';
  const [memory, ...more] = layout.defined;
  if (memory === undefined) return 'it defines no memory; a WASI program must define and export "memory"';
  if (more.length > 0) return 'it defines several memories; only one is supported';
  if (memory.memory64) return 'it uses a 64-bit memory; only 32-bit memories are supported';
  if (memory.shared) return 'its memory is shared; shared memories are not supported';
  if (memory.maxPages === undefined) return `its memory has no maximum; declare one of at most ${capPages} pages (${(capPages * WASM_PAGE_BYTES) / 2 ** 20} MiB), e.g. (memory (export "memory") 1 ${capPages})`;
  if (memory.maxPages > capPages) return `its memory maximum is ${memory.maxPages} pages, above the cap of ${capPages} pages (${(capPages * WASM_PAGE_BYTES) / 2 ** 20} MiB)`;
  return undefined;
}
