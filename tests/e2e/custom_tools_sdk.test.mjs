// Custom tools end to end through the official MCP TypeScript SDK client (SPEC §11, issue 5):
// user-authored tools appear in tools/list with their inputSchema and an outputSchema, and
// callTool returns structuredContent that the SDK itself validates against that outputSchema
// (Client.callTool throws when it does not match) — for a network-less Python tool, for a
// workspace tool whose writes land in the worktree, and for a failing tool (the error shape).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { startDaemon } from './lib/daemon.mjs';

const PYTHON = '/usr/bin/python3';

const TEXT_STATS = {
  name: 'text_stats',
  description: 'Counts words and characters of a text (no network, no writes).',
  input_schema: {
    type: 'object',
    properties: {
      text: { type: 'string', maxLength: 10000, description: 'the text' },
      top: { type: 'integer', minimum: 1, maximum: 10 },
    },
    required: ['text'],
    additionalProperties: false,
  },
  run: [PYTHON, 'tool.py'],
  timeout_s: 10,
  capabilities: { filesystem_write: 'none', network: 'none', process_spawn: false },
};
const TEXT_STATS_PY = `import collections, json, os, sys
args = json.load(sys.stdin)
words = args['text'].split()
top = collections.Counter(w.lower() for w in words).most_common(args.get('top', 3))
print('counted', len(words), 'words', file=sys.stderr)
print(json.dumps({'words': len(words), 'chars': len(args['text']), 'top': [[w, n] for w, n in top],
                  'tool': os.environ['TOOLWARDEN_TOOL_NAME'], 'cwd': os.getcwd()}))
`;

const GEN_STUB = {
  name: 'gen_stub',
  description: 'Writes a Python stub module into src/ (workspace writes).',
  input_schema: {
    type: 'object',
    properties: { module: { type: 'string', minLength: 1, maxLength: 40 }, functions: { type: 'array', items: { type: 'string' }, maxItems: 5 } },
    required: ['module', 'functions'],
    additionalProperties: false,
  },
  run: [PYTHON, 'tool.py'],
  capabilities: { filesystem_write: 'workspace', process_spawn: false },
};
const GEN_STUB_PY = `import json, os, sys
args = json.load(sys.stdin)
W = os.environ['TOOLWARDEN_WORKSPACE']
body = ''.join('def %s():\\n    raise NotImplementedError\\n\\n\\n' % f for f in args['functions'])
with open(os.path.join(W, 'src', args['module'] + '.py'), 'w') as f:
    f.write(body)
with open(os.path.join(W, 'src', '__init__.py'), 'a') as f:
    f.write('from . import %s\\n' % args['module'])
print(json.dumps({'module': args['module'], 'functions': len(args['functions'])}))
`;

const BROKEN = {
  name: 'broken',
  description: 'Always fails.',
  input_schema: { type: 'object' },
  run: [PYTHON, 'tool.py'],
  capabilities: { process_spawn: false },
};
const BROKEN_PY = `import sys
sys.stderr.write('no luck today\\n')
sys.exit(4)
`;

let d;
let client;
let wsClient;
let job;

function writeTool(manifest, code) {
  const dir = path.join(d.xdgConfig, 'toolwarden', 'tools', manifest.name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tool.json'), JSON.stringify(manifest, null, 2));
  fs.writeFileSync(path.join(dir, 'tool.py'), code);
}

async function connect(token, name) {
  const transport = new StreamableHTTPClientTransport(new URL(d.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const c = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  await c.connect(transport);
  return c;
}

before(async () => {
  d = await startDaemon();
  writeTool(TEXT_STATS, TEXT_STATS_PY);
  writeTool(GEN_STUB, GEN_STUB_PY);
  writeTool(BROKEN, BROKEN_PY);
  fs.mkdirSync(path.join(d.worktree, 'src'));
  fs.writeFileSync(path.join(d.worktree, 'src', '__init__.py'), '');
  job = await d.createJob({ tool: ['text_stats', 'broken', 'local_read'] });
  client = await connect(job.token, 'toolwarden-e2e-custom');
  const wsJob = await d.createJob({ access: 'write', allow: ['src/**'], tool: ['gen_stub', 'local_read'] });
  wsClient = await connect(wsJob.token, 'toolwarden-e2e-custom-ws');
});

after(async () => {
  await client?.close().catch(() => {});
  await wsClient?.close().catch(() => {});
  await d?.kill();
});

test('listTools: the job\'s custom tools with their inputSchema, an outputSchema and annotations', async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ['broken', 'local_read', 'text_stats']);
  const t = tools.find((x) => x.name === 'text_stats');
  assert.equal(t.description, TEXT_STATS.description);
  assert.deepEqual(t.inputSchema, TEXT_STATS.input_schema);
  assert.equal(t.outputSchema.type, 'object');
  assert.equal(t.annotations.readOnlyHint, true);
  assert.equal(t.annotations.openWorldHint, false);
  const { tools: wsTools } = await wsClient.listTools();
  const g = wsTools.find((x) => x.name === 'gen_stub');
  assert.deepEqual(g.inputSchema, GEN_STUB.input_schema);
  assert.equal(g.annotations.readOnlyHint, false);
  assert.equal(g.annotations.destructiveHint, true);
});

test('callTool on a network-less Python tool: structuredContent (validated by the SDK) carries the result', async () => {
  await client.listTools(); // the SDK validates callTool results against the schemas listTools saw
  const text = 'the cat and the hat and the bat';
  const r = await client.callTool({ name: 'text_stats', arguments: { text, top: 2 } });
  assert.equal(r.isError, false, JSON.stringify(r));
  const sc = r.structuredContent;
  assert.deepEqual(sc.result, { words: 8, chars: text.length, top: [['the', 3], ['and', 2]], tool: 'text_stats', cwd: d.worktree });
  assert.equal(typeof sc.elapsed_ms, 'number');
  assert.equal(sc.stderr_tail, 'counted 8 words\n');
  assert.match(sc.stdout_sha256, /^[0-9a-f]{64}$/);
  assert.deepEqual(sc.side_effects, { workspace_writes: [] });
  assert.ok(sc.artifacts.stdout.startsWith(d.stateDir), sc.artifacts.stdout);
  const stdout = fs.readFileSync(sc.artifacts.stdout);
  assert.deepEqual(JSON.parse(stdout), sc.result);
  assert.equal(sc.stdout_sha256, crypto.createHash('sha256').update(stdout).digest('hex'));
  // the text content mirrors the structured result for clients without structuredContent
  assert.equal(r.content[0].type, 'text');
  assert.deepEqual(JSON.parse(r.content[0].text), sc);
});

test('callTool with arguments that fail the inputSchema: the SDK gets -32602 naming the path', async () => {
  await assert.rejects(
    client.callTool({ name: 'text_stats', arguments: { text: 'x', top: 'three' } }),
    (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams && /\$\.top/.test(e.message),
  );
  await assert.rejects(
    client.callTool({ name: 'text_stats', arguments: { text: 'x', extra: 1 } }),
    (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams && /\$\.extra/.test(e.message),
  );
});

test('callTool on a workspace tool: its writes are applied, reported, and readable with local_read', async () => {
  const r = await wsClient.callTool({ name: 'gen_stub', arguments: { module: 'parser', functions: ['parse', 'tokenize'] } });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.deepEqual(r.structuredContent.result, { module: 'parser', functions: 2 });
  const writes = [...r.structuredContent.side_effects.workspace_writes].sort((a, b) => (a.path < b.path ? -1 : 1));
  assert.deepEqual(writes, [
    { path: 'src/__init__.py', change: 'modified' },
    { path: 'src/parser.py', change: 'created' },
  ]);
  const expected = 'def parse():\n    raise NotImplementedError\n\n\ndef tokenize():\n    raise NotImplementedError\n\n\n';
  const read = await wsClient.callTool({ name: 'local_read', arguments: { path: 'src/parser.py' } });
  assert.equal(read.structuredContent.content, expected);
  assert.equal(fs.readFileSync(path.join(d.worktree, 'src', '__init__.py'), 'utf8'), 'from . import parser\n');
});

test('callTool on a failing tool: isError with LOCAL_TOOL_FAILED, its details, and no SDK validation error', async () => {
  await client.listTools();
  const r = await client.callTool({ name: 'broken', arguments: {} });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /^LOCAL_TOOL_FAILED: the tool exited with status 4/);
  assert.equal(r.structuredContent.error, 'LOCAL_TOOL_FAILED');
  assert.equal(r.structuredContent.exit_code, 4);
  assert.equal(r.structuredContent.stderr_tail, 'no luck today\n');
});

test('every call is audited: tool.requested / tool.completed with the codes, in sequence', async () => {
  const audit = await d.cli(['audit', '--job', job.job_id, '--json']);
  const events = JSON.parse(audit.stdout);
  const completed = events.filter((e) => e.type === 'tool.completed');
  assert.deepEqual(
    completed.map((e) => [e.data.tool, e.data.code]),
    [
      ['text_stats', 'OK'],
      ['broken', 'LOCAL_TOOL_FAILED'],
    ],
  );
  const seqs = events.filter((e) => e.type === 'tool.requested').map((e) => e.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
});
