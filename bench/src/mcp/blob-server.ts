/**
 * `blob-server.ts <kb>`: serves `<kb>` KB of word-like text at `/blob` on a free
 * port, printing `{"event":"ready","url":…}`. The scale point's gzip calls
 * fetch it, so the server's time goes to compressing, not to the network.
 * Text of random words: it compresses as documents do (about 2.5:1), so
 * gzip does its full work (a repeated string would compress trivially fast).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';

const kb = Math.max(1, Number(process.argv[2] ?? '512'));
const words = Array.from({ length: 4000 }, () => randomBytes(6).toString('base64url').slice(0, 3 + (randomBytes(1)[0]! % 6)));
let text = '';
while (text.length < kb * 1024) text += `${words[randomBytes(2).readUInt16BE() % words.length]!} `;
const body = Buffer.from(text.slice(0, kb * 1024));

const server = createServer((req, res) => {
  if (req.url !== '/blob') return void res.writeHead(404).end();
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length }).end(body);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ event: 'ready', url: `http://127.0.0.1:${port}/blob` })}\n`);
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
