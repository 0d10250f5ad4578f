// Other local users, file modes and startup refusals (SPEC §1-§4).
// The daemon runs as uid 65534 (setpriv); root, a different uid, connects to its admin.sock and
// must get 403 with the connection closed. Then the runtime dir / config refusals, --listen
// refusals and endpoint.json.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  BIN,
  cleanupTemps,
  mkTemp,
  rawUnixExchange,
  run,
  sleep,
  startDaemon,
  twEnv,
  writeFile,
} from './lib/harness.mjs';

const NOBODY = { uid: 65534, gid: 65534 };
const daemons = [];

after(async () => {
  for (const d of daemons) await d.kill();
  cleanupTemps();
});

const mode = (p) => fs.statSync(p).mode & 0o7777;

function chownR(p, uid, gid) {
  fs.lchownSync(p, uid, gid);
  if (fs.lstatSync(p).isDirectory()) for (const e of fs.readdirSync(p)) chownR(path.join(p, e), uid, gid);
}

/** Runs `toolwarden serve ARGS` expecting it to refuse; resolves {code, stderr}. */
async function serveRefused({ runtimeDir, stateDir, configPath, args = [] }) {
  const r = await run([BIN, 'serve', ...args], { env: twEnv({ runtimeDir, stateDir, configPath }), timeout: 6000 });
  assert.ok(!r.timedOut, `serve did not refuse (still running after 6 s): ${r.stderr}`);
  return r;
}

/** Fresh dirs for a root daemon: {base, rt, st, cfg}. */
function freshDirs() {
  const base = mkTemp('tw-sec-adm-');
  const rt = path.join(base, 'run');
  const st = path.join(base, 'state');
  fs.mkdirSync(rt, { mode: 0o700 });
  fs.mkdirSync(st, { mode: 0o700 });
  return { base, rt, st, cfg: path.join(base, 'config.json') };
}

describe('daemon running as uid 65534, root as the peer', () => {
  let d;
  let base;
  let wt;
  before(async () => {
    base = mkTemp('tw-sec-nobody-', 0o755);
    const rt = path.join(base, 'run');
    const st = path.join(base, 'state');
    const home = path.join(base, 'home');
    const cfgDir = path.join(base, 'cfg');
    wt = path.join(base, 'wt');
    fs.mkdirSync(rt, { mode: 0o700 });
    fs.mkdirSync(st, { mode: 0o700 });
    fs.mkdirSync(home, { mode: 0o700 });
    fs.mkdirSync(cfgDir, { mode: 0o700 });
    writeFile(path.join(wt, 'hello.txt'), 'hello from nobody\n');
    for (const p of [rt, st, home, cfgDir, wt]) chownR(p, NOBODY.uid, NOBODY.gid);
    d = await startDaemon({
      base,
      runtimeDir: rt,
      stateDir: st,
      configPath: path.join(cfgDir, 'config.json'),
      home,
      runAs: NOBODY,
    });
    daemons.push(d);
  });

  test('runtime dir 0700, admin.sock 0600, endpoint.json 0600, all owned by the daemon uid', () => {
    assert.equal(mode(d.runtimeDir), 0o700);
    const sock = path.join(d.runtimeDir, 'admin.sock');
    assert.equal(d.adminSocket, sock);
    assert.ok(fs.statSync(sock).isSocket());
    assert.equal(mode(sock), 0o600, `admin.sock mode ${mode(sock).toString(8)}`);
    assert.equal(mode(d.endpointPath), 0o600);
    for (const p of [d.runtimeDir, sock, d.endpointPath]) assert.equal(fs.statSync(p).uid, NOBODY.uid, p);
  });

  test('root (another uid) on admin.sock: GET /healthz → 403 and the connection closes', async () => {
    const r = await rawUnixExchange(d.adminSocket, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    assert.match(r.data, /^HTTP\/1\.1 403 /, `answer: ${JSON.stringify(r.data.slice(0, 200))}`);
    assert.equal(r.closedByPeer, true, 'the daemon kept the connection of a foreign peer open');
  });

  test('root on admin.sock: POST /admin job.create → 403, closed, nothing created; pipelined request ignored', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'job.create', params: { worktree: wt } });
    const req = `POST /admin HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const r = await rawUnixExchange(d.adminSocket, req + req);
    assert.match(r.data, /^HTTP\/1\.1 403 /, `answer: ${JSON.stringify(r.data.slice(0, 200))}`);
    assert.equal((r.data.match(/HTTP\/1\.1 \d{3}/g) ?? []).length, 1, `more than one answer: ${r.data}`);
    assert.ok(!r.data.includes('token'), 'a token was handed to a foreign peer');
    assert.equal(r.closedByPeer, true);
    const list = await d.cli(['job', 'list', '--json']); // as uid 65534
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(JSON.parse(list.stdout), []);
  });

  test('root on admin.sock: GET /metrics → 403', async () => {
    const r = await rawUnixExchange(d.adminSocket, 'GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n');
    assert.match(r.data, /^HTTP\/1\.1 403 /);
    assert.ok(!r.data.includes('toolwarden_'), 'metrics leaked to a foreign peer');
  });

  test('the CLI run as root against that socket is refused (exit 1)', async () => {
    const r = await run([BIN, 'job', 'create', '--worktree', wt], { env: d.env });
    assert.equal(r.code, 1, `exit ${r.code}: ${r.stdout}${r.stderr}`);
    assert.ok(!r.stdout.includes('token'));
  });

  test('the same uid: job create via the CLI, then MCP initialize / ping / local_read → 200', async () => {
    const job = await d.createJob({ worktree: wt });
    assert.equal(job.generation, 1);
    assert.equal(job.mcp_url, d.mcpUrl);
    const init = await d.mcpPost(job.token, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'sec', version: '1' } },
    });
    assert.equal(init.status, 200, init.body);
    assert.equal(init.json.result.protocolVersion, '2025-06-18');
    assert.equal(init.json.result.serverInfo.name, 'toolwarden');
    const inited = await d.mcpPost(job.token, { jsonrpc: '2.0', method: 'notifications/initialized' });
    assert.equal(inited.status, 202);
    const ping = await d.mcpPost(job.token, { jsonrpc: '2.0', id: 2, method: 'ping' });
    assert.equal(ping.status, 200, ping.body);
    assert.deepEqual(ping.json.result, {});
    const read = await d.mcpPost(job.token, {
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 'local_read', arguments: { path: 'hello.txt' } },
    });
    assert.equal(read.status, 200, read.body);
    assert.equal(read.json.result.isError, false);
    assert.equal(read.json.result.structuredContent.content, 'hello from nobody\n');
    const st = await d.stop();
    assert.deepEqual(st, { code: 0, signal: null });
    assert.ok(!fs.existsSync(d.endpointPath));
  });
});

describe('runtime dir refusals', () => {
  for (const m of [0o755, 0o750, 0o710, 0o701, 0o770, 0o777]) {
    test(`runtime dir mode ${m.toString(8)} → serve exits 1 with a message`, async () => {
      const { rt, st, cfg } = freshDirs();
      fs.chmodSync(rt, m);
      const r = await serveRefused({ runtimeDir: rt, stateDir: st, configPath: cfg });
      assert.equal(r.code, 1, `exit ${r.code}: ${r.stderr}`);
      assert.ok(r.stderr.includes(rt) || /runtime/i.test(r.stderr), `message: ${r.stderr}`);
      assert.ok(!fs.existsSync(path.join(rt, 'admin.sock')));
      assert.ok(!fs.existsSync(path.join(rt, 'endpoint.json')));
    });
  }
  test('runtime dir owned by another uid → serve exits 1', async () => {
    const { rt, st, cfg } = freshDirs();
    fs.chownSync(rt, NOBODY.uid, NOBODY.gid);
    const r = await serveRefused({ runtimeDir: rt, stateDir: st, configPath: cfg });
    assert.equal(r.code, 1, `exit ${r.code}: ${r.stderr}`);
    assert.ok(r.stderr.includes(rt) || /runtime/i.test(r.stderr), `message: ${r.stderr}`);
    assert.ok(!fs.existsSync(path.join(rt, 'admin.sock')));
  });
  test('runtime dir given as a symlink to a good dir → serve exits 1', async () => {
    const { base, rt, st, cfg } = freshDirs();
    const link = path.join(base, 'run_link');
    fs.symlinkSync(rt, link);
    const r = await run([BIN, 'serve'], { env: twEnv({ runtimeDir: link, stateDir: st, configPath: cfg }), timeout: 6000 });
    if (r.timedOut) assert.fail('serve accepted a symlinked runtime dir');
    assert.equal(r.code, 1, `exit ${r.code}: ${r.stderr}`);
  });
  test('a missing runtime dir is created 0700', async () => {
    const { base, st, cfg } = freshDirs();
    const rt = path.join(base, 'fresh_run');
    const d = await startDaemon({ base, runtimeDir: rt, stateDir: st, configPath: cfg });
    daemons.push(d);
    assert.equal(mode(rt), 0o700);
    assert.deepEqual(await d.stop(), { code: 0, signal: null });
  });
});

describe('config refusals', () => {
  test('config that is a symlink → exit 1 naming the file', async () => {
    const { base, rt, st, cfg } = freshDirs();
    const real = path.join(base, 'real.json');
    writeFile(real, '{}', 0o600);
    fs.symlinkSync(real, cfg);
    const r = await serveRefused({ runtimeDir: rt, stateDir: st, configPath: cfg });
    assert.equal(r.code, 1, `exit ${r.code}: ${r.stderr}`);
    assert.ok(r.stderr.includes(cfg), `message does not name ${cfg}: ${r.stderr}`);
  });
  for (const m of [0o620, 0o602, 0o666, 0o660]) {
    test(`config mode ${m.toString(8)} (group/world-writable) → exit 1 naming the file`, async () => {
      const { rt, st, cfg } = freshDirs();
      writeFile(cfg, '{}', m);
      const r = await serveRefused({ runtimeDir: rt, stateDir: st, configPath: cfg });
      assert.equal(r.code, 1, `exit ${r.code}: ${r.stderr}`);
      assert.ok(r.stderr.includes(cfg), `message does not name ${cfg}: ${r.stderr}`);
    });
  }
  test('config mode 0644 (readable, not writable by others) is accepted', async () => {
    const { base, rt, st, cfg } = freshDirs();
    writeFile(cfg, '{}', 0o644);
    const d = await startDaemon({ base, runtimeDir: rt, stateDir: st, configPath: cfg });
    daemons.push(d);
    assert.deepEqual(await d.stop(), { code: 0, signal: null });
  });
  test('unknown config key → exit 1 naming the key', async () => {
    const { rt, st, cfg } = freshDirs();
    writeFile(cfg, JSON.stringify({ log_level: 'info', bogus_knob_xyz: 1 }), 0o600);
    const r = await serveRefused({ runtimeDir: rt, stateDir: st, configPath: cfg });
    assert.equal(r.code, 1, `exit ${r.code}: ${r.stderr}`);
    assert.ok(r.stderr.includes('bogus_knob_xyz'), `message does not name the key: ${r.stderr}`);
  });
});

describe('--listen', () => {
  for (const addr of ['0.0.0.0:0', '192.168.1.1:8080', '[::]:0', '10.0.0.1:0']) {
    test(`--listen ${addr} → exit 2`, async () => {
      const { rt, st, cfg } = freshDirs();
      const r = await serveRefused({ runtimeDir: rt, stateDir: st, configPath: cfg, args: ['--listen', addr] });
      assert.equal(r.code, 2, `exit ${r.code}: ${r.stderr}`);
      assert.ok(!fs.existsSync(path.join(rt, 'endpoint.json')));
    });
  }
  test('--listen 127.0.0.1:0 works', async () => {
    const { base, rt, st, cfg } = freshDirs();
    const d = await startDaemon({ base, runtimeDir: rt, stateDir: st, configPath: cfg, args: ['--listen', '127.0.0.1:0'] });
    daemons.push(d);
    assert.match(d.mcpUrl, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    assert.deepEqual(await d.stop(), { code: 0, signal: null });
  });
});

describe('endpoint.json', () => {
  test('mode 0600, exactly the SPEC keys, removed after SIGTERM (exit 0)', async () => {
    const { base, rt, st, cfg } = freshDirs();
    const d = await startDaemon({ base, runtimeDir: rt, stateDir: st, configPath: cfg });
    daemons.push(d);
    const ep = JSON.parse(fs.readFileSync(d.endpointPath, 'utf8'));
    assert.equal(mode(d.endpointPath), 0o600);
    assert.deepEqual(Object.keys(ep).sort(), ['admin_socket', 'mcp_url', 'pid', 'started_at', 'version']);
    assert.equal(ep.version, 1);
    assert.equal(ep.pid, d.proc.pid);
    assert.match(ep.mcp_url, /^http:\/\/127\.0\.0\.1:[1-9]\d*\/mcp$/);
    assert.equal(ep.admin_socket, path.join(rt, 'admin.sock'));
    assert.ok(path.isAbsolute(ep.admin_socket));
    assert.match(ep.started_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/);
    assert.ok(Math.abs(Date.parse(ep.started_at) - Date.now()) < 120000);
    // the listener named there answers
    const job = await d.createJob({ worktree: base });
    const ping = await d.mcpPost(job.token, { jsonrpc: '2.0', id: 1, method: 'ping' });
    assert.equal(ping.status, 200);
    assert.deepEqual(await d.stop(), { code: 0, signal: null });
    assert.ok(!fs.existsSync(d.endpointPath), 'endpoint.json left behind after SIGTERM');
  });
  test('SIGINT also exits 0 and removes endpoint.json', async () => {
    const { base, rt, st, cfg } = freshDirs();
    const d = await startDaemon({ base, runtimeDir: rt, stateDir: st, configPath: cfg });
    daemons.push(d);
    d.proc.kill('SIGINT');
    const ex = await Promise.race([d.exitPromise, sleep(10000).then(() => null)]);
    assert.deepEqual(ex, { code: 0, signal: null });
    assert.ok(!fs.existsSync(d.endpointPath));
  });
});
