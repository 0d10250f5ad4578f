// An agent's everyday loop through the official MCP TypeScript SDK client: read a file, search
// the worktree, edit the file with the digest it read (and see a stale edit refused), read it
// back — every call audited with increasing sequence numbers.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startDaemon } from './lib/daemon.mjs';

let d;
let client;

before(async () => {
  d = await startDaemon();
  fs.mkdirSync(path.join(d.worktree, 'src'));
  fs.writeFileSync(path.join(d.worktree, 'src', 'greet.py'), 'def greet():\n    return "hello"\n');
  fs.writeFileSync(path.join(d.worktree, 'src', 'other.py'), 'print("nothing here")\n');
  const job = await d.createJob({ access: 'write' });
  const transport = new StreamableHTTPClientTransport(new URL(d.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${job.token}` } },
  });
  client = new Client({ name: 'toolwarden-e2e-flow', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
});

after(async () => {
  await client?.close().catch(() => {});
  await d?.kill();
});

test('read → search → edit → read through the SDK client', async () => {
  const read1 = await client.callTool({ name: 'local_read', arguments: { path: 'src/greet.py' } });
  assert.equal(read1.isError, false);
  assert.equal(read1.structuredContent.content, 'def greet():\n    return "hello"\n');
  const digest = read1.structuredContent.sha256;
  assert.match(digest, /^[0-9a-f]{64}$/);

  const search = await client.callTool({ name: 'local_search', arguments: { path: '.', query: 'return "hello"' } });
  assert.equal(search.isError, false);
  assert.deepEqual(search.structuredContent.matches, [{ path: 'src/greet.py', line: 2, text: '    return "hello"' }]);
  assert.equal(search.structuredContent.truncated, false);

  const regex = await client.callTool({ name: 'local_search', arguments: { path: 'src', query: '^def \\w+\\(', regex: true } });
  assert.deepEqual(regex.structuredContent.matches.map((m) => m.path), ['src/greet.py']);

  const next = 'def greet():\n    return "hello, world"\n';
  const edit = await client.callTool({ name: 'local_edit', arguments: { path: 'src/greet.py', content: next, expected_sha256: digest } });
  assert.equal(edit.isError, false, JSON.stringify(edit));
  assert.equal(edit.structuredContent.size, Buffer.byteLength(next));

  // The same digest is stale now: a second edit based on the first read is refused.
  const stale = await client.callTool({ name: 'local_edit', arguments: { path: 'src/greet.py', content: 'x', expected_sha256: digest } });
  assert.equal(stale.isError, true);
  assert.deepEqual(stale.structuredContent, { error: 'DENIED_CONFLICT' });
  assert.match(stale.content[0].text, /^DENIED_CONFLICT: /);

  const read2 = await client.callTool({ name: 'local_read', arguments: { path: 'src/greet.py' } });
  assert.equal(read2.structuredContent.content, next);
  assert.equal(read2.structuredContent.sha256, edit.structuredContent.sha256);
  assert.equal(fs.readFileSync(path.join(d.worktree, 'src', 'greet.py'), 'utf8'), next);

  // Six calls, six tool.requested/tool.completed pairs with strictly increasing numbers.
  const audit = await d.cli(['audit', '--json']);
  const events = JSON.parse(audit.stdout);
  const requested = events.filter((e) => e.type === 'tool.requested');
  const completed = events.filter((e) => e.type === 'tool.completed');
  assert.deepEqual(requested.map((e) => e.seq), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(completed.map((e) => e.data.code), ['OK', 'OK', 'OK', 'OK', 'DENIED_CONFLICT', 'OK']);
  for (const e of events) assert.ok(!JSON.stringify(e).includes('hello, world'), 'file contents in the audit log');
});
