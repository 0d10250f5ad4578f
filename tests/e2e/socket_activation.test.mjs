// Socket activation (SPEC §3 `serve`, toolwarden.socket): systemd-socket-activate listens on a
// fixed loopback port and starts `toolwarden serve` on the first connection, passing the socket
// as descriptor 3 with LISTEN_PID/LISTEN_FDS. The daemon must serve MCP on exactly that socket
// (the first request, queued before the daemon existed, is answered), write its port to
// endpoint.json, authenticate job tokens on it, and refuse a passed socket that is not a
// loopback TCP listener (exit 2) instead of serving on it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { BIN, RawConn, buildRequest, initializeMsg, run, sleep, startDaemon } from './lib/daemon.mjs';

const ACTIVATE = run('sh', ['-c', 'command -v systemd-socket-activate']).stdout?.trim();
const skip = !ACTIVATE && 'systemd-socket-activate is not installed (Debian package systemd)';

const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** A port that was free a moment ago (the kernel's choice for port 0). */
async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** Fresh runtime/state dirs and a worktree, as the daemon helper makes them. */
async function freshDirs() {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'tw-sockact-'));
  cleanups.push(() => fsp.rm(root, { recursive: true, force: true }));
  const dirs = {
    root,
    runtime: path.join(root, 'run'),
    state: path.join(root, 'state'),
    config: path.join(root, 'config.json'),
    worktree: path.join(root, 'wt'),
  };
  await fsp.mkdir(dirs.runtime, { mode: 0o700 });
  await fsp.chmod(dirs.runtime, 0o700);
  await fsp.mkdir(dirs.state, { mode: 0o700 });
  await fsp.mkdir(dirs.worktree);
  await fsp.writeFile(path.join(dirs.worktree, 'hello.txt'), 'hello world\n');
  dirs.env = {
    TOOLWARDEN_RUNTIME_DIR: dirs.runtime,
    TOOLWARDEN_STATE_DIR: dirs.state,
    TOOLWARDEN_CONFIG: dirs.config,
  };
  return dirs;
}

/** systemd-socket-activate [activateArgs] -l ADDRESS toolwarden serve [serveArgs]; resolves once
 * it listens. Its environment is only what -E passes, as under systemd. */
async function activate(dirs, address, { activateArgs = [], serveArgs = [] } = {}) {
  const args = [...activateArgs, '-l', address];
  for (const [k, v] of Object.entries(dirs.env)) args.push('-E', `${k}=${v}`);
  args.push(BIN, 'serve', ...serveArgs);
  const proc = spawn(ACTIVATE, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH } });
  const p = { proc, stderr: '', exit: null };
  proc.stderr.on('data', (b) => (p.stderr += b));
  p.exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve((p.exit = { code, signal }))));
  cleanups.push(async () => {
    if (!p.exit) {
      proc.kill('SIGKILL');
      await p.exited;
    }
  });
  const deadline = Date.now() + 10_000;
  while (!/Listening on .* as 3\./.test(p.stderr)) {
    if (p.exit) throw new Error(`systemd-socket-activate exited: ${JSON.stringify(p.exit)}\n${p.stderr}`);
    if (Date.now() > deadline) throw new Error(`systemd-socket-activate did not listen:\n${p.stderr}`);
    await sleep(20);
  }
  return p;
}

async function waitExit(p, ms = 15_000) {
  let timer;
  const timeout = new Promise((resolve) => (timer = setTimeout(resolve, ms, null)));
  const r = await Promise.race([p.exited, timeout]);
  clearTimeout(timer);
  assert.ok(r, `no exit within ${ms} ms; stderr:\n${p.stderr}`);
  return r;
}

function cli(dirs, args) {
  return run(BIN, args, { env: { ...process.env, ...dirs.env }, encoding: 'utf8' });
}

describe('socket activation through systemd-socket-activate', { skip }, () => {
  test('serves MCP on the passed socket: the first request is answered, tokens work, --listen is moot', async () => {
    const dirs = await freshDirs();
    const port = await freePort();
    // --listen 127.0.0.1:0 would pick an ephemeral port; under activation the socket wins.
    const p = await activate(dirs, `127.0.0.1:${port}`, { serveArgs: ['--listen', '127.0.0.1:0'] });
    assert.equal(fs.existsSync(path.join(dirs.runtime, 'endpoint.json')), false, 'nothing runs yet');

    // This connection starts the daemon; its request waits in the socket's backlog meanwhile.
    const c = await RawConn.open(port);
    const hostHeader = `127.0.0.1:${port}`;
    await c.write(
      buildRequest({
        headers: [
          ['Host', hostHeader],
          ['Content-Type', 'application/json'],
          ['Accept', 'application/json, text/event-stream'],
        ],
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      }),
    );
    const first = await c.readResponse(20_000);
    c.destroy();
    assert.ok(first, `no answer on the activated socket; stderr:\n${p.stderr}`);
    assert.equal(first.status, 401, 'the daemon answered, and still wants a token');
    assert.equal(first.headers['www-authenticate'], 'Bearer');

    const endpoint = JSON.parse(await fsp.readFile(path.join(dirs.runtime, 'endpoint.json'), 'utf8'));
    assert.equal(endpoint.mcp_url, `http://127.0.0.1:${port}/mcp`, 'endpoint.json names the passed port');
    assert.equal(endpoint.pid, p.proc.pid, 'systemd-socket-activate exec()s the daemon: LISTEN_PID was its pid');
    assert.match(p.stderr, /mcp\.socket_activated/);

    const created = cli(dirs, ['job', 'create', '--worktree', dirs.worktree]);
    assert.equal(created.code, 0, created.stderr);
    const job = JSON.parse(created.stdout);
    assert.equal(job.mcp_url, endpoint.mcp_url);

    const headers = [
      ['Host', hostHeader],
      ['Content-Type', 'application/json'],
      ['Accept', 'application/json, text/event-stream'],
      ['Authorization', `Bearer ${job.token}`],
    ];
    const conn = await RawConn.open(port);
    try {
      await conn.write(buildRequest({ headers, body: JSON.stringify(initializeMsg(1)) }));
      const init = await conn.readResponse();
      assert.equal(init.status, 200, init.text);
      assert.equal(init.json().result.serverInfo.name, 'toolwarden');
      const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'local_read', arguments: { path: 'hello.txt' } } };
      await conn.write(buildRequest({ headers, body: JSON.stringify(call) }));
      const res = await conn.readResponse();
      assert.equal(res.status, 200, res.text);
      const result = res.json().result;
      assert.notEqual(result.isError, true, res.text);
      assert.equal(result.structuredContent.content, 'hello world\n');
    } finally {
      conn.destroy();
    }

    p.proc.kill('SIGTERM');
    const exit = await waitExit(p);
    assert.deepEqual(exit, { code: 0, signal: null }, p.stderr);
    assert.equal(fs.existsSync(path.join(dirs.runtime, 'endpoint.json')), false, 'endpoint.json removed');
  });

  test('a passed socket on another address than 127.0.0.1 or [::1] is refused with exit 2', async () => {
    const dirs = await freshDirs();
    const port = await freePort();
    const p = await activate(dirs, `127.0.0.2:${port}`);
    const s = net.connect({ host: '127.0.0.2', port });
    s.on('error', () => {});
    const exit = await waitExit(p);
    s.destroy();
    assert.equal(exit.code, 2, p.stderr);
    assert.match(p.stderr, /refusing the socket-activated listener: .*bound to 127\.0\.0\.2/);
    assert.equal(fs.existsSync(path.join(dirs.runtime, 'endpoint.json')), false);
  });

  test('a passed datagram socket is refused with exit 2', async () => {
    const dirs = await freshDirs();
    const port = await freePort();
    const p = await activate(dirs, `127.0.0.1:${port}`, { activateArgs: ['--datagram'] });
    const u = dgram.createSocket('udp4');
    u.send('x', port, '127.0.0.1');
    const exit = await waitExit(p);
    u.close();
    assert.equal(exit.code, 2, p.stderr);
    assert.match(p.stderr, /refusing the socket-activated listener: the passed socket is not a TCP socket/);
  });
});

describe('activation variables meant for another process', () => {
  test('are ignored: the daemon opens its own listener and never touches descriptor 3', async () => {
    const d = await startDaemon({ env: { LISTEN_PID: '1', LISTEN_FDS: '1' } });
    cleanups.push(() => d.kill());
    assert.doesNotMatch(d.stderr(), /socket_activated/);
    const { token } = await d.createJob();
    await d.assertHealthy(token, 'with a foreign LISTEN_PID');
  });
});
