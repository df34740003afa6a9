/**
 * The code that runs one WASI call. It is JavaScript in a string because it
 * must run in places that cannot load this package's TypeScript sources: an
 * `eval` worker thread (a thread started from a `.ts` file would need a
 * loader) and, where threads are forbidden, the sandbox bundle (see runner.ts).
 * Keep it dependency-free: it receives `WASI` from its host.
 *
 * `runCall(WASI, request)` returns the reply. Standard input, output and error
 * never reach a real file descriptor: fd_read(0) reads the request's input,
 * fd_write(1|2) collects into memory (so the output cap is exact), and every
 * other fd_* or path_* call on fds 0-2 gets EBADF. There are no preopens (so path_open
 * has no directory to resolve against) and the environment is empty.
 */
export const RUNNER_SOURCE = String.raw`
const ESUCCESS = 0, EBADF = 8, ENOTSUP = 58;
const OUTPUT_LIMIT = Symbol('output limit');
function runCall(WASI, request) {
  const { module, input, name, outputBytes } = request;
  const wasi = new WASI({ version: 'preview1', args: [name], env: {}, preopens: {}, returnOnExit: true });
  const base = wasi.getImportObject().wasi_snapshot_preview1;
  const out = [], err = [];
  let outputUsed = 0, inputOffset = 0, memory;
  const view = () => new DataView(memory.buffer);
  const imports = {};
  for (const [fn, impl] of Object.entries(base)) {
    imports[fn] = fn.startsWith('fd_') || fn.startsWith('path_') ? (fd, ...rest) => (fd >= 0 && fd <= 2 ? EBADF : impl(fd, ...rest)) : impl;
  }
  imports.fd_renumber = () => ENOTSUP;
  imports.fd_close = (fd) => (fd >= 0 && fd <= 2 ? ESUCCESS : base.fd_close(fd));
  imports.fd_fdstat_get = (fd, ptr) => {
    if (fd < 0 || fd > 2) return base.fd_fdstat_get(fd, ptr);
    // A character device with only read (fd 0) or write (fd 1, 2) rights.
    const v = view();
    v.setUint8(ptr, 2);
    v.setUint16(ptr + 2, 0, true);
    v.setBigUint64(ptr + 8, fd === 0 ? 2n : 64n, true);
    v.setBigUint64(ptr + 16, 0n, true);
    return ESUCCESS;
  };
  imports.fd_read = (fd, iovs, iovsLen, nreadPtr) => {
    if (fd !== 0) return fd <= 2 ? EBADF : base.fd_read(fd, iovs, iovsLen, nreadPtr);
    const v = view();
    let total = 0;
    for (let i = 0; i < iovsLen; i++) {
      const ptr = v.getUint32(iovs + i * 8, true), len = v.getUint32(iovs + i * 8 + 4, true);
      const n = Math.min(len, input.length - inputOffset);
      new Uint8Array(memory.buffer, ptr, n).set(input.subarray(inputOffset, inputOffset + n));
      inputOffset += n;
      total += n;
      if (n < len) break;
    }
    v.setUint32(nreadPtr, total, true);
    return ESUCCESS;
  };
  imports.fd_write = (fd, iovs, iovsLen, nwrittenPtr) => {
    if (fd !== 1 && fd !== 2) return fd === 0 ? EBADF : base.fd_write(fd, iovs, iovsLen, nwrittenPtr);
    const v = view();
    let total = 0;
    for (let i = 0; i < iovsLen; i++) {
      const ptr = v.getUint32(iovs + i * 8, true), len = v.getUint32(iovs + i * 8 + 4, true);
      outputUsed += len;
      if (outputUsed > outputBytes) throw OUTPUT_LIMIT;
      (fd === 1 ? out : err).push(new Uint8Array(memory.buffer, ptr, len).slice());
      total += len;
    }
    v.setUint32(nwrittenPtr, total, true);
    return ESUCCESS;
  };
  const join = (chunks) => {
    const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of chunks) { all.set(c, at); at += c.length; }
    return all;
  };
  const reply = (fields) => ({ ...fields, stdout: join(out), stderr: join(err), memoryBytes: memory === undefined ? 0 : memory.buffer.byteLength });
  try {
    const instance = new WebAssembly.Instance(module, { wasi_snapshot_preview1: imports });
    memory = instance.exports.memory;
    const code = wasi.start(instance);
    return reply({ kind: 'exit', code });
  } catch (error) {
    if (error === OUTPUT_LIMIT) return reply({ kind: 'output-limit' });
    const message = error instanceof Error ? error.name + ': ' + error.message : String(error);
    return reply({ kind: error instanceof RangeError ? 'range-error' : 'trap', message });
  }
}
`;

/** The worker thread: answers one request at a time, forever. */
export const THREAD_SOURCE = `${RUNNER_SOURCE}
const { parentPort } = require('node:worker_threads');
const { WASI } = require('node:wasi');
parentPort.on('message', (request) => {
  const reply = runCall(WASI, request);
  parentPort.postMessage({ id: request.id, ...reply }, [reply.stdout.buffer, reply.stderr.buffer]);
});
`;
