// The official MCP conformance suite (@modelcontextprotocol/conformance) against a real daemon.
// The suite sends no Authorization header, so the test puts a token-adding relay in front of the
// daemon. The relay only rewrites Host/Origin values that name the relay's own loopback address
// (so the URL the suite was given maps to the daemon); attacker values pass through unchanged and
// the daemon itself must reject them. Auth is never switched off.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { startDaemon } from './lib/daemon.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const NODE22 = path.join(here, 'node_modules/.bin/node');
const CONFORMANCE = path.join(here, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];

let d;
let token;
let relay;
let outRoot;

/** Token-adding relay in front of `daemon`. Returns {server, port, seen: [{method, host, origin}]}. */
async function startRelay(daemon, tok) {
  const seen = [];
  const server = http.createServer((req, res) => {
    const relayPort = server.address().port;
    const map = new Map([
      [`127.0.0.1:${relayPort}`, `127.0.0.1:${daemon.port}`],
      [`localhost:${relayPort}`, `localhost:${daemon.port}`],
      [`[::1]:${relayPort}`, `[::1]:${daemon.port}`],
    ]);
    const headers = {};
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const k = req.rawHeaders[i];
      const lk = k.toLowerCase();
      if (['connection', 'keep-alive', 'proxy-connection', 'authorization'].includes(lk)) continue;
      headers[lk] = headers[lk] === undefined ? req.rawHeaders[i + 1] : `${headers[lk]}, ${req.rawHeaders[i + 1]}`;
    }
    if (headers.host !== undefined && map.has(headers.host.toLowerCase())) headers.host = map.get(headers.host.toLowerCase());
    if (headers.origin !== undefined) {
      const m = /^http:\/\/(.*)$/i.exec(headers.origin);
      if (m && map.has(m[1].toLowerCase())) headers.origin = `http://${map.get(m[1].toLowerCase())}`;
    }
    headers.authorization = `Bearer ${tok}`;
    seen.push({ method: req.method, host: headers.host, origin: headers.origin });
    const up = http.request(
      { host: '127.0.0.1', port: daemon.port, method: req.method, path: req.url, headers, setHost: false, agent: false },
      (ures) => {
        const out = [];
        for (let i = 0; i < ures.rawHeaders.length; i += 2) {
          const lk = ures.rawHeaders[i].toLowerCase();
          if (['connection', 'keep-alive', 'transfer-encoding'].includes(lk)) continue;
          out.push(ures.rawHeaders[i], ures.rawHeaders[i + 1]);
        }
        res.writeHead(ures.statusCode, ures.statusMessage, out);
        ures.pipe(res);
      },
    );
    up.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`relay: ${e.message}`);
    });
    req.pipe(up);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: server.address().port, seen };
}

/** Runs one conformance scenario; resolves {code, stdout, stderr, checks}. */
async function runScenario(url, scenario) {
  const outDir = path.join(outRoot, `${scenario}-${Date.now()}`);
  const args = [CONFORMANCE, 'server', '--url', url, '--scenario', scenario, '-o', outDir];
  const r = await new Promise((resolve) => {
    const p = spawn(NODE22, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (b) => (stdout += b));
    p.stderr.on('data', (b) => (stderr += b));
    const t = setTimeout(() => p.kill('SIGKILL'), 60_000);
    p.on('close', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
  });
  let checks = null;
  const found = fs.existsSync(outDir) ? findFile(outDir, 'checks.json') : null;
  if (found) checks = JSON.parse(await fsp.readFile(found, 'utf8'));
  return { ...r, checks };
}

function findFile(dir, name) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isFile() && e.name === name) return p;
    if (e.isDirectory()) {
      const f = findFile(p, name);
      if (f) return f;
    }
  }
  return null;
}

before(async () => {
  assert.ok(fs.existsSync(NODE22), `Node 22 missing at ${NODE22}`);
  outRoot = await fsp.mkdtemp(path.join(os.tmpdir(), 'tw-conformance-'));
  d = await startDaemon();
  token = (await d.createJob()).token;
  relay = await startRelay(d, token);
});

after(async () => {
  await new Promise((r) => (relay ? relay.server.close(r) : r()));
  relay?.server.closeAllConnections?.();
  await d?.kill();
  if (outRoot) await fsp.rm(outRoot, { recursive: true, force: true });
});

describe('official MCP conformance suite', () => {
  test('the suite knows the scenarios we run', async () => {
    const r = await new Promise((resolve) => {
      const p = spawn(NODE22, [CONFORMANCE, 'list', '--server'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      p.stdout.on('data', (b) => (out += b));
      p.on('close', (code) => resolve({ code, out }));
    });
    assert.equal(r.code, 0);
    for (const s of SCENARIOS) assert.match(r.out, new RegExp(`- ${s}\\b`));
  });

  for (const scenario of SCENARIOS) {
    test(`scenario ${scenario} passes through the token relay`, async () => {
      const url = `http://127.0.0.1:${relay.port}/mcp`;
      const r = await runScenario(url, scenario);
      const detail = `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
      assert.ok(Array.isArray(r.checks) && r.checks.length > 0, `no checks.json: ${detail}`);
      const failed = r.checks.filter((c) => c.status === 'FAILURE');
      assert.deepEqual(failed.map((c) => `${c.id}: ${c.errorMessage}`), [], detail);
      assert.ok(r.checks.some((c) => c.status === 'SUCCESS'), detail);
      assert.match(r.stdout, /Passed: (\d+)\/\1, 0 failed/, detail);
      assert.equal(r.code, 0, detail);
      assert.ok(d.alive());
    });
  }

  test('dns-rebinding: the attacker Host/Origin reached the daemon unchanged, and it refused them', async () => {
    const attack = relay.seen.filter((s) => /evil/.test(s.host ?? ''));
    assert.ok(attack.length >= 1, `relay saw: ${JSON.stringify(relay.seen)}`);
    for (const s of attack) assert.match(s.origin ?? '', /^http:\/\/evil/);
    // and the daemon answers exactly that request with 403 despite a valid token
    const res = await d.request({
      headers: d.mcpHeaders(token, { Host: 'evil.example.com', Origin: 'http://evil.example.com' }),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    assert.equal(res.status, 403);
  });

  test('without the relay (no token) the suite fails: auth is on', async () => {
    const r = await runScenario(d.mcpUrl, 'server-initialize');
    assert.equal(r.code, 1, `exit ${r.code}\n${r.stdout}\n${r.stderr}`);
    assert.ok(r.checks?.some((c) => c.id === 'server-initialize' && c.status === 'FAILURE'), r.stdout);
    // the daemon itself says why: 401 for the token-less initialize
    const res = await d.request({ headers: d.mcpHeaders(null), body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) });
    assert.equal(res.status, 401);
  });
});
