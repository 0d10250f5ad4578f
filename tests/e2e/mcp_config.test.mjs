// `toolwarden mcp-config` and `job create|renew --mcp-config` (README "Connecting an agent"):
// each printed set-up is read back the way its client reads it — the Claude Code command run
// through a shell against a stand-in `claude`, the JSON files parsed — and the URL and header
// it carries must then work for a real MCP tool call. The token never comes from argv.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BIN, initializeMsg, post, run, startDaemon } from './lib/daemon.mjs';

let d;
before(async () => {
  d = await startDaemon();
});
after(async () => {
  await d?.kill();
});

/** A tool call with exactly the URL and headers a client set-up names. */
async function readHelloWith(url, headers) {
  const h = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers };
  const init = await post(url, initializeMsg(1), h);
  assert.equal(init.status, 200, init.text);
  const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'local_read', arguments: { path: 'hello.txt' } } };
  const res = await post(url, call, h);
  return res;
}

async function assertWorks(url, headers) {
  const res = await readHelloWith(url, headers);
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json().result.structuredContent.content, 'hello world\n');
}

/** Runs the Claude Code command through sh with a stand-in `claude` that records its argv. */
async function runClaudeCommand(command) {
  const bin = path.join(d.root, 'fake-bin');
  await fsp.mkdir(bin, { recursive: true });
  const argvFile = path.join(d.root, 'claude-argv');
  await fsp.writeFile(path.join(bin, 'claude'), `#!/bin/sh\nprintf '%s\\0' "$@" > '${argvFile}'\n`, { mode: 0o755 });
  const r = run('sh', ['-c', command], { env: { PATH: `${bin}:/usr/bin:/bin` }, cwd: d.root });
  assert.equal(r.code, 0, r.stderr);
  const argv = (await fsp.readFile(argvFile, 'utf8')).split('\0');
  argv.pop();
  return argv;
}

function headersOf(headerArg) {
  const i = headerArg.indexOf(':');
  return { [headerArg.slice(0, i)]: headerArg.slice(i + 1).trim() };
}

describe('job create --mcp-config', () => {
  test('claude-code: `claude mcp add --transport http toolwarden URL --header ...` whose header works', async () => {
    const r = await d.cli(['job', 'create', '--worktree', d.worktree, '--mcp-config', 'claude-code']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.split('\n').filter(Boolean).length, 1, `one command line: ${r.stdout}`);
    const argv = await runClaudeCommand(r.stdout);
    assert.deepEqual(argv.slice(0, 5), ['mcp', 'add', '--transport', 'http', 'toolwarden']);
    assert.equal(argv[5], d.mcpUrl);
    assert.equal(argv[6], '--header');
    assert.match(argv[7], /^Authorization: Bearer [A-Za-z0-9_-]{43}$/);
    assert.equal(argv.length, 8);
    await assertWorks(argv[5], headersOf(argv[7]));
    // What was made goes to stderr, so stdout stays a clean command.
    const id = /job (job_[0-9a-f]+) /.exec(r.stderr)?.[1];
    assert.ok(id, `job id on stderr: ${r.stderr}`);
    assert.equal((await d.cli(['job', 'show', id])).code, 0);
  });

  test('vscode: .vscode/mcp.json with a servers entry of type http', async () => {
    const r = await d.cli(['job', 'create', '--worktree', d.worktree, '--mcp-config', 'vscode']);
    assert.equal(r.code, 0, r.stderr);
    const cfg = JSON.parse(r.stdout);
    assert.deepEqual(Object.keys(cfg), ['servers']);
    const s = cfg.servers.toolwarden;
    assert.equal(s.type, 'http');
    assert.equal(s.url, d.mcpUrl);
    assert.deepEqual(Object.keys(s.headers), ['Authorization']);
    await assertWorks(s.url, s.headers);
  });

  test('cursor: mcp.json with an mcpServers entry of url and headers', async () => {
    const r = await d.cli(['job', 'create', '--worktree', d.worktree, '--mcp-config', 'cursor']);
    assert.equal(r.code, 0, r.stderr);
    const cfg = JSON.parse(r.stdout);
    assert.deepEqual(Object.keys(cfg), ['mcpServers']);
    const s = cfg.mcpServers.toolwarden;
    assert.deepEqual(Object.keys(s).sort(), ['headers', 'url']);
    await assertWorks(s.url, s.headers);
  });

  test('json: one flat object', async () => {
    const r = await d.cli(['job', 'create', '--worktree', d.worktree, '--mcp-config', 'json']);
    assert.equal(r.code, 0, r.stderr);
    const s = JSON.parse(r.stdout);
    assert.equal(s.name, 'toolwarden');
    assert.equal(s.type, 'http');
    await assertWorks(s.url, s.headers);
  });

  test('an unknown client is bad usage (exit 2) and creates no job', async () => {
    const before = JSON.parse((await d.cli(['job', 'list', '--json'])).stdout).length;
    const r = await d.cli(['job', 'create', '--worktree', d.worktree, '--mcp-config', 'claude']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--mcp-config must be claude-code\|vscode\|cursor\|json/);
    const after = JSON.parse((await d.cli(['job', 'list', '--json'])).stdout).length;
    assert.equal(after, before);
  });
});

describe('mcp-config JOB_ID', () => {
  let job;
  before(async () => {
    job = await d.createJob();
  });

  test('job show names the mcp_url the set-up uses', async () => {
    const r = await d.cli(['job', 'show', job.job_id]);
    assert.equal(JSON.parse(r.stdout).mcp_url, d.mcpUrl);
  });

  test('takes the token from $TOOLWARDEN_TOKEN', async () => {
    const r = await d.cli(['mcp-config', job.job_id, '--client', 'vscode'], { env: { TOOLWARDEN_TOKEN: job.token } });
    assert.equal(r.code, 0, r.stderr);
    const s = JSON.parse(r.stdout).servers.toolwarden;
    assert.deepEqual(s, { type: 'http', url: job.mcp_url, headers: { Authorization: `Bearer ${job.token}` } });
    await assertWorks(s.url, s.headers);
  });

  test('takes the token from --token-file, a file or standard input', async () => {
    const file = path.join(d.root, 'token');
    await fsp.writeFile(file, `${job.token}\n`, { mode: 0o600 });
    const r = await d.cli(['mcp-config', job.job_id, '--client', 'json', '--token-file', file], { env: { TOOLWARDEN_TOKEN: '' } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).headers.Authorization, `Bearer ${job.token}`);
    const viaStdin = run('sh', ['-c', `"$BIN" mcp-config ${job.job_id} --client json --token-file - < '${file}'`], {
      env: { ...d.env, BIN },
    });
    assert.equal(viaStdin.code, 0, viaStdin.stderr);
    assert.equal(JSON.parse(viaStdin.stdout).headers.Authorization, `Bearer ${job.token}`);
  });

  test('refuses without a token, with a malformed one, and without --client (exit 2)', async () => {
    const noToken = await d.cli(['mcp-config', job.job_id, '--client', 'json'], { env: { TOOLWARDEN_TOKEN: undefined } });
    assert.equal(noToken.code, 2);
    assert.match(noToken.stderr, /no token: set \$TOOLWARDEN_TOKEN or pass --token-file/);
    const bearer = await d.cli(['mcp-config', job.job_id, '--client', 'json'], { env: { TOOLWARDEN_TOKEN: `Bearer ${job.token}` } });
    assert.equal(bearer.code, 2);
    assert.match(bearer.stderr, /not a toolwarden job token/);
    const noClient = await d.cli(['mcp-config', job.job_id], { env: { TOOLWARDEN_TOKEN: job.token } });
    assert.equal(noClient.code, 2);
    assert.match(noClient.stderr, /--client claude-code\|vscode\|cursor\|json is required/);
    const argvToken = await d.cli(['mcp-config', job.job_id, '--client', 'json', '--token', job.token]);
    assert.equal(argvToken.code, 2, 'a token on the command line is not accepted');
  });

  test('renew --mcp-config prints a working set-up; the old token dies; a revoked job is refused (exit 1)', async () => {
    const j = await d.createJob();
    const r = await d.cli(['job', 'renew', j.job_id, '--mcp-config', 'json']);
    assert.equal(r.code, 0, r.stderr);
    const s = JSON.parse(r.stdout);
    assert.notEqual(s.headers.Authorization, `Bearer ${j.token}`);
    await assertWorks(s.url, s.headers);
    const old = await post(s.url, initializeMsg(1), {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${j.token}`,
    });
    assert.equal(old.status, 401);

    await d.revokeJob(j.job_id);
    const token = s.headers.Authorization.slice('Bearer '.length);
    const refused = await d.cli(['mcp-config', j.job_id, '--client', 'json'], { env: { TOOLWARDEN_TOKEN: token } });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /is revoked/);
    assert.equal(refused.stdout, '');
  });
});
