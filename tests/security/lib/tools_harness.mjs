// Helpers for the custom-tool security tests (custom_tools.test.mjs, SPEC §11): a daemon with
// its own XDG_CONFIG_HOME (user-scope tools), HOME (a fake ~/.ssh) and extra environment, tool
// folders written from a manifest and files, tools/call answers unpacked, the audit events of
// one call, and a loopback HTTP server that the egress proxy's resolver override points at.
// Builds on ./harness.mjs and ./sandbox_harness.mjs without changing them.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Daemon, mkTemp, twEnv, writeFile } from './harness.mjs';
import { chownR } from './sandbox_harness.mjs';

export const PYTHON = '/usr/bin/python3';
export const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');

/** A manifest with SPEC §11 defaults for the fields a test leaves out. */
export function manifest(name, over = {}) {
  return {
    name,
    description: `test tool ${name}`,
    input_schema: { type: 'object' },
    run: [PYTHON, 'tool.py'],
    ...over,
  };
}

/**
 * Writes a tool folder `dir`: tool.json (an object is serialized, a string written as is) and
 * `files` ({relpath: text | {content, mode}}). `owner` {uid, gid} chowns the folder.
 */
export function writeToolDir(dir, toolJson, files = {}, owner) {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  fs.chmodSync(dir, 0o755);
  if (toolJson !== undefined) {
    writeFile(path.join(dir, 'tool.json'), typeof toolJson === 'string' ? toolJson : JSON.stringify(toolJson, null, 2));
  }
  for (const [rel, spec] of Object.entries(files)) {
    const { content, mode } = typeof spec === 'string' ? { content: spec, mode: 0o644 } : spec;
    writeFile(path.join(dir, rel), content, mode ?? 0o644);
  }
  if (owner) chownR(dir, owner.uid, owner.gid ?? owner.uid);
}

/**
 * Fresh dirs and a daemon for custom-tool tests. Layout under `base` (0755):
 *   run/ state/ (0700)  home/ (0700, the daemon's HOME, with .ssh/id_rsa = sshSecret)
 *   xdg/ (0700, XDG_CONFIG_HOME; user tools in xdg/toolwarden/tools/)  wt/ (0755, the worktree)
 * opts: runAs {uid,gid} (everything chowned to it), env (extra daemon env), sshSecret.
 * The daemon is NOT started: add tools first (user tools are discovered at job creation, so
 * order does not really matter), then `await ctx.d.start()`.
 */
export function toolContext({ runAs, env = {}, sshSecret, prefix = 'tw-ct-' } = {}) {
  const base = mkTemp(prefix, 0o755);
  const dirs = {
    base,
    run: path.join(base, 'run'),
    state: path.join(base, 'state'),
    home: path.join(base, 'home'),
    xdg: path.join(base, 'xdg'),
    wt: path.join(base, 'wt'),
  };
  for (const k of ['run', 'state', 'home', 'xdg']) fs.mkdirSync(dirs[k], { mode: 0o700 });
  fs.mkdirSync(dirs.wt, { mode: 0o755 });
  dirs.userTools = path.join(dirs.xdg, 'toolwarden', 'tools');
  fs.mkdirSync(dirs.userTools, { recursive: true, mode: 0o700 });
  if (sshSecret !== undefined) {
    fs.mkdirSync(path.join(dirs.home, '.ssh'), { mode: 0o700 });
    writeFile(path.join(dirs.home, '.ssh', 'id_rsa'), `-----BEGIN OPENSSH PRIVATE KEY-----\n${sshSecret}\n`, 0o600);
  }
  dirs.configPath = path.join(base, 'config.json');
  const daemonEnv = twEnv({
    runtimeDir: dirs.run,
    stateDir: dirs.state,
    configPath: dirs.configPath,
    home: dirs.home,
    extra: { XDG_CONFIG_HOME: dirs.xdg, ...env },
  });
  const d = new Daemon({ base, runtimeDir: dirs.run, stateDir: dirs.state, configPath: dirs.configPath, env: daemonEnv, runAs });
  const ctx = {
    ...dirs,
    d,
    runAs,
    label: runAs ? `daemon as uid ${runAs.uid}` : 'daemon as root',
    /** Writes a user-scope tool (trusted by definition). */
    userTool(name, over = {}, files = {}) {
      const dir = path.join(dirs.userTools, name);
      writeToolDir(dir, manifest(name, over), files, runAs);
      return dir;
    },
    /** Writes a project-scope tool in `worktree` (default the context's). */
    projectTool(name, over = {}, files = {}, worktree = dirs.wt) {
      const dir = path.join(worktree, '.toolwarden', 'tools', name);
      writeToolDir(dir, manifest(name, over), files, runAs);
      if (runAs) chownR(path.join(worktree, '.toolwarden'), runAs.uid, runAs.gid);
      return dir;
    },
    /** chowns the whole base to runAs (call after writing fixtures, before starting). */
    own() {
      if (runAs) chownR(base, runAs.uid, runAs.gid);
    },
  };
  return ctx;
}

/** tools/call → {resp, r (result), sc (structuredContent), isError, code, text, elapsedMs, id}. */
export async function callTool(d, token, name, args, { timeout = 60000, id } = {}) {
  const rid = id ?? nextCallId++;
  const t0 = Date.now();
  const resp = await d.callTool(token, name, args, { timeout, id: rid });
  const r = resp.result;
  return {
    resp,
    r,
    sc: r?.structuredContent,
    isError: r?.isError,
    code: r?.isError ? r?.structuredContent?.error : r ? 'OK' : undefined,
    text: r?.content?.[0]?.text,
    elapsedMs: Date.now() - t0,
    id: rid,
    show: () => JSON.stringify(resp).slice(0, 4000),
  };
}
let nextCallId = 100000;

/** Asserts a successful custom-tool answer (SPEC §11 result shape) and returns its `result`. */
export function assertOk(c, what = '') {
  assert.ok(c.r, `${what}: not a tool result: ${c.show()}`);
  assert.equal(c.isError, false, `${what}: the call failed: ${c.show()}`);
  const sc = c.sc;
  for (const k of ['result', 'elapsed_ms', 'stdout_tail', 'stderr_tail', 'stdout_sha256', 'stderr_sha256', 'artifacts', 'side_effects']) {
    assert.ok(k in sc, `${what}: structuredContent lacks ${k}: ${c.show()}`);
  }
  assert.equal(typeof sc.elapsed_ms, 'number');
  assert.match(sc.stdout_sha256, /^[0-9a-f]{64}$/);
  assert.match(sc.stderr_sha256, /^[0-9a-f]{64}$/);
  assert.ok(Array.isArray(sc.side_effects.workspace_writes), c.show());
  return sc.result;
}

/** Asserts an isError answer with `code` (and the text "CODE: ..."); returns structuredContent. */
export function assertDenied(c, code, reason, what = '') {
  assert.ok(c.r, `${what}: not a tool result: ${c.show()}`);
  assert.equal(c.isError, true, `${what}: expected ${code}, the call succeeded: ${c.show()}`);
  assert.equal(c.sc?.error, code, `${what}: ${c.show()}`);
  assert.ok(c.text.startsWith(`${code}: `), `${what}: text "${c.text}" does not start with "${code}: "`);
  if (reason) assert.match(c.text, reason, `${what}: reason`);
  return c.sc;
}

/** Every audit event of a job (oldest first), through the CLI (as the daemon's user). */
export async function jobEvents(d, jobId) {
  const r = await d.cli(['audit', '--job', jobId, '--limit', '100000', '--json']);
  assert.equal(r.code, 0, `toolwarden audit failed: ${r.stderr}`);
  const list = JSON.parse(r.stdout);
  assert.ok(Array.isArray(list), r.stdout.slice(0, 500));
  return list.sort((a, b) => a.id - b.id);
}

/** The audit events of the tools/call whose JSON-RPC id was `requestId` (same seq). */
export async function callEvents(d, jobId, requestId) {
  const all = await jobEvents(d, jobId);
  const req = all.find((e) => e.type === 'tool.requested' && e.data?.request_id === requestId);
  if (!req) return { seq: null, events: [] };
  return { seq: req.seq, events: all.filter((e) => e.seq === req.seq) };
}

/** Files under dir (relative paths, sorted); [] when dir is missing. */
export function listFiles(dir) {
  const out = [];
  const walk = (d, rel) => {
    let ents;
    try {
      ents = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of ents) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(path.join(d, e.name), r);
      else out.push(r);
    }
  };
  walk(dir, '');
  return out.sort();
}

/** {relpath: {content(sha), mode, ino, nlink, type}} of everything below dir: to see any change. */
export function treeSnapshot(dir) {
  const out = {};
  const walk = (d, rel) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      const st = fs.lstatSync(p);
      if (st.isDirectory()) {
        out[r] = { type: 'dir', mode: st.mode };
        walk(p, r);
      } else if (st.isSymbolicLink()) {
        out[r] = { type: 'symlink', target: fs.readlinkSync(p) };
      } else {
        out[r] = { type: 'file', sha: sha256(fs.readFileSync(p)), mode: st.mode, nlink: st.nlink, mtimeMs: st.mtimeMs };
      }
    }
  };
  walk(dir, '');
  return out;
}

/**
 * A plain-HTTP echo server on 127.0.0.1:0 standing in for an HTTPS API reached through the
 * proxy's tunnel: it answers every request with JSON {method, url, host, body} and counts the
 * TCP connections it accepted (a tool that got past the proxy some other way would show here).
 */
export async function echoServer() {
  const st = { connections: 0, requests: [] };
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      st.requests.push({ method: req.method, url: req.url, host: req.headers.host, body });
      const out = JSON.stringify({ method: req.method, url: req.url, host: req.headers.host, body });
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(out), Connection: 'close' });
      res.end(out);
    });
  });
  server.on('connection', () => st.connections++);
  await new Promise((r, j) => server.listen(0, '127.0.0.1', r).on('error', j));
  st.port = server.address().port;
  st.close = () =>
    new Promise((r) => {
      server.closeAllConnections?.();
      server.close(() => r());
    });
  return st;
}

/**
 * The folder hash as policy/tool_folder.hpp documents it, computed independently: SHA-256 over
 * "toolwarden-tool-hash-v1" NUL, then per file "f X SHA256 PATH" NUL and per directory
 * "d - - PATH" NUL, ordered by PATH bytewise (X = "x" when the owner-execute bit is set).
 */
export function folderHash(dir) {
  const records = [];
  const walk = (d, rel) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      const st = fs.lstatSync(p);
      if (st.isDirectory()) {
        records.push([Buffer.from(r), `d - - ${r}\0`]);
        walk(p, r);
      } else {
        const x = st.mode & 0o100 ? 'x' : '-';
        records.push([Buffer.from(r), `f ${x} ${sha256(fs.readFileSync(p))} ${r}\0`]);
      }
    }
  };
  walk(dir, '');
  records.sort((a, b) => Buffer.compare(a[0], b[0]));
  const h = crypto.createHash('sha256');
  h.update('toolwarden-tool-hash-v1\0');
  for (const [, rec] of records) h.update(rec);
  return h.digest('hex');
}
