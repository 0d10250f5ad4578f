// Benchmark 4: the official MCP TypeScript SDK client reading one small file N times in a row,
// against toolwarden (`local_read`, Streamable HTTP with a bearer token) and against the official
// reference server @modelcontextprotocol/server-filesystem (`read_text_file`, stdio).
//   node sdk_read.mjs --url MCP_URL --token=TOKEN --dir DIR --file NAME --calls N [--warmup W]
// DIR is both the toolwarden job's worktree and the filesystem server's allowed directory.
// Prints one "key=value ..." line per server:
//   toolwarden calls=N secs=S calls_per_s=R
//   toolwarden_ping calls=N secs=S calls_per_s=R   (the SDK client's floor: MCP ping)
//   fs_server  calls=N secs=S calls_per_s=R
// Exit 1 if a server cannot be reached or a call returns other content than the file's.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const here = path.dirname(fileURLToPath(import.meta.url));

// Node's fetch (undici) adds one abort listener per request to the Streamable HTTP transport's
// long-lived AbortSignal and removes it only when the request is garbage-collected, so a long
// sequential run trips MaxListenersExceededWarning (at 1,500) once per call. It is noise here:
// print every other warning as Node would, drop that one.
process.removeAllListeners('warning');
process.on('warning', (w) => {
  if (w.name !== 'MaxListenersExceededWarning') process.stderr.write(`${w.name}: ${w.message}\n`);
});
const { values: opt } = parseArgs({
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    dir: { type: 'string' },
    file: { type: 'string' },
    calls: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '50' },
  },
});
for (const k of ['url', 'token', 'dir', 'file']) {
  if (!opt[k]) {
    process.stderr.write(`sdk_read.mjs: --${k} is required\n`);
    process.exit(2);
  }
}
const calls = Number(opt.calls);
const warmup = Number(opt.warmup);
const dir = fs.realpathSync(opt.dir);
const expected = fs.readFileSync(path.join(dir, opt.file), 'utf8');

// Runs `once` warmup times, then `calls` times sequentially, timing the latter. Every answer
// is checked, so a server that fails fast cannot look fast.
async function measure(label, once, verify = check) {
  for (let i = 0; i < warmup; i++) verify(label, await once());
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) verify(label, await once());
  const secs = (performance.now() - t0) / 1000;
  console.log(`${label} calls=${calls} secs=${secs.toFixed(3)} calls_per_s=${(calls / secs).toFixed(1)}`);
}

function check(label, text) {
  if (text !== expected) {
    throw new Error(`${label}: the content read differs from the file (${JSON.stringify(String(text).slice(0, 200))})`);
  }
}

function clientInfo() {
  return new Client({ name: 'toolwarden-bench', version: '0.0.0' });
}

async function benchToolwarden() {
  const client = clientInfo();
  const transport = new StreamableHTTPClientTransport(new URL(opt.url), {
    requestInit: { headers: { Authorization: `Bearer ${opt.token}` } },
  });
  await client.connect(transport);
  try {
    await measure('toolwarden', async () => {
      const r = await client.callTool({ name: 'local_read', arguments: { path: opt.file } });
      if (r.isError) throw new Error(`local_read failed: ${JSON.stringify(r.content)}`);
      return r.structuredContent?.content;
    });
    // The same client's floor: an MCP ping does no tool work, no store write.
    await measure('toolwarden_ping', () => client.ping(), () => {});
  } finally {
    await client.close();
  }
}

async function benchFilesystemServer() {
  const cli = path.join(here, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
  const client = clientInfo();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [cli, dir],
    stderr: 'ignore',
  });
  await client.connect(transport);
  const file = path.join(dir, opt.file);
  try {
    await measure('fs_server', async () => {
      const r = await client.callTool({ name: 'read_text_file', arguments: { path: file } });
      if (r.isError) throw new Error(`read_text_file failed: ${JSON.stringify(r.content)}`);
      return r.content?.[0]?.text;
    });
  } finally {
    await client.close();
  }
}

try {
  await benchToolwarden();
  await benchFilesystemServer();
} catch (err) {
  process.stderr.write(`sdk_read.mjs: ${err.stack ?? err}\n`);
  process.exit(1);
}
