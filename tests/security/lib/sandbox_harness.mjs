// Helpers for the sandbox security tests (sandbox_*.test.mjs): `toolwarden run` as a child
// process, `local_test` calls, host process scans (markers, descendant trees), host listeners an
// escaping payload could reach, and host "victim" processes. Builds on ./harness.mjs (which
// starts daemons, creates jobs and speaks MCP) without changing it.
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { BIN, asUser, sleep } from './harness.mjs';

export const NOBODY = { uid: 65534, gid: 65534 };

/** A clean environment for `toolwarden run` (the sandbox builds its own allowlisted env anyway). */
export function runEnv(extra = {}) {
  return { PATH: process.env.PATH || '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', ...extra };
}

/**
 * `toolwarden run [flags] -- argv...`; resolves {code, signal, stdout, stderr, stdoutBytes,
 * elapsedMs, timedOut}. stdout is kept as a Buffer too (stdoutBuf) so byte budgets can be checked.
 */
export function twRun(argv, { flags = [], cwd, runAs, timeout = 30000, env } = {}) {
  const full = [...asUser(runAs), BIN, 'run', ...flags, '--', ...argv];
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const child = spawn(full[0], full.slice(1), { env: env ?? runEnv(), cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.setEncoding('utf8').on('data', (s) => (stderr += s));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeout);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const stdoutBuf = Buffer.concat(out);
      resolve({
        code,
        signal,
        stdoutBuf,
        stdout: stdoutBuf.toString('utf8'),
        stdoutBytes: stdoutBuf.length,
        stderr,
        elapsedMs: Date.now() - t0,
        timedOut,
        pid: child.pid,
      });
    });
  });
}

/** Lines `@key=value` printed by an attack script → {key: value} (last one wins). */
export function parseKv(text) {
  const kv = {};
  for (const line of text.split('\n')) {
    const m = /^@([A-Za-z0-9_.:/-]+)=(.*)$/.exec(line);
    if (m) kv[m[1]] = m[2];
  }
  return kv;
}

/** Config `commands[]` entry for a registered command. */
export function commandEntry(id, argv, { timeout_s = 30, read_paths, env, cwd } = {}) {
  const c = { id, argv, timeout_s };
  if (read_paths) c.read_paths = read_paths;
  if (env) c.env = env;
  if (cwd) c.cwd = cwd;
  return c;
}

/**
 * tools/call local_test; resolves {resp, sc, elapsedMs}. Throws when the answer is not a
 * normal tool result.
 */
export async function localTest(d, token, command, opts = {}) {
  const t0 = Date.now();
  const resp = await d.callTool(token, 'local_test', { command }, { timeout: 120000, ...opts });
  return { resp, sc: resp?.result?.structuredContent, isError: resp?.result?.isError, elapsedMs: Date.now() - t0 };
}

// ---------------------------------------------------------------------------------------------
// Host process table

/** One process: {pid, ppid, starttime, state, argv:[...], cmdline:'a b c'} or null if gone. */
export function procInfo(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rp = stat.lastIndexOf(')');
    const f = stat.slice(rp + 2).split(' ');
    const raw = fs.readFileSync(`/proc/${pid}/cmdline`);
    const argv = raw.toString('utf8').split('\0');
    if (argv.length && argv[argv.length - 1] === '') argv.pop();
    return { pid: Number(pid), state: f[0], ppid: Number(f[1]), starttime: f[19], argv, cmdline: argv.join(' ') };
  } catch {
    return null;
  }
}

/** Every live (non-zombie) host process. */
export function listProcs({ includeZombies = false } = {}) {
  const out = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const p = procInfo(e);
    if (p && (includeZombies || p.state !== 'Z')) out.push(p);
  }
  return out;
}

/** Host processes whose command line contains `marker` (zombies excluded: they are dead). */
export function markerProcs(marker) {
  return listProcs().filter((p) => p.pid !== process.pid && p.cmdline.includes(marker));
}

/**
 * Host processes of a sandbox payload: cmdline contains any of `markers`, excluding toolwarden
 * itself (`toolwarden run` and the sandbox init carry the payload's argv in their own cmdline).
 */
export function sandboxProcs(markers) {
  return listProcs().filter(
    (p) => p.pid !== process.pid && markers.some((m) => p.cmdline.includes(m)) && path.basename(p.argv[0] ?? '') !== 'toolwarden',
  );
}

/** Samples `fn()` (→ number) every `ms` until stop(), which returns the maximum seen. */
export function sampleMax(fn, ms = 5) {
  let max = 0;
  let stopped = false;
  const tick = () => {
    if (stopped) return;
    try {
      max = Math.max(max, fn());
    } catch {
      /* ignore */
    }
    timer = setTimeout(tick, ms);
  };
  let timer = setTimeout(tick, 0);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      return max;
    },
  };
}

/** Host processes whose argv is exactly `argv` (e.g. ['sleep','1000.123']) — basename of argv[0]. */
export function exactArgvProcs(argv) {
  return listProcs().filter(
    (p) =>
      p.argv.length === argv.length &&
      path.basename(p.argv[0]) === path.basename(argv[0]) &&
      p.argv.slice(1).every((a, i) => a === argv[i + 1]),
  );
}

/** Polls `fn()` (→ array) until it is empty or `ms` elapsed; resolves the last array. */
export async function waitEmpty(fn, ms = 2000, step = 50) {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = fn();
    if (r.length === 0 || Date.now() >= deadline) return r;
    await sleep(step);
  }
}

/** Polls `fn()` (→ array) until it has at least `n` entries or `ms` elapsed. */
export async function waitCount(fn, n, ms = 10000, step = 50) {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = fn();
    if (r.length >= n || Date.now() >= deadline) return r;
    await sleep(step);
  }
}

/** All descendants of `rootPid` (not including it) as [{pid, starttime, cmdline}]. */
export function descendants(rootPid) {
  const procs = listProcs({ includeZombies: true });
  const kids = new Map();
  for (const p of procs) {
    if (!kids.has(p.ppid)) kids.set(p.ppid, []);
    kids.get(p.ppid).push(p);
  }
  const out = [];
  const stack = [...(kids.get(rootPid) ?? [])];
  while (stack.length) {
    const p = stack.pop();
    out.push(p);
    stack.push(...(kids.get(p.pid) ?? []));
  }
  return out;
}

/** Which of a snapshot of processes ({pid, starttime}) are still alive (same pid AND starttime). */
export function stillAlive(snapshot) {
  return snapshot.filter((s) => {
    const p = procInfo(s.pid);
    return p && p.starttime === s.starttime && p.state !== 'Z' && p.state !== 'X';
  });
}

/** A host `sleep 300` victim; kill() ends it. */
export function hostVictim(seconds = 300) {
  const child = spawn('sleep', [String(seconds)], { stdio: 'ignore' });
  let exited = null;
  child.on('exit', (code, signal) => (exited = { code, signal }));
  return {
    pid: child.pid,
    get alive() {
      const p = procInfo(child.pid);
      return exited === null && p !== null && p.state !== 'Z';
    },
    get exited() {
      return exited;
    },
    kill() {
      if (exited === null) child.kill('SIGKILL');
    },
  };
}

/** Kills (SIGKILL) every host process whose cmdline contains marker — cleanup only. */
export function killMarker(marker) {
  for (const p of markerProcs(marker)) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host listeners a payload must not reach. Each counts what arrived.

/** A TCP listener on host:0 (default 127.0.0.1). */
export async function tcpListener(host = '127.0.0.1') {
  const st = { connections: 0, data: '' };
  const server = net.createServer((s) => {
    st.connections++;
    s.on('data', (c) => (st.data += c));
    s.on('error', () => {});
  });
  await new Promise((r, j) => server.listen(0, host, r).on('error', j));
  st.port = server.address().port;
  st.close = () => new Promise((r) => server.close(() => r()));
  st.server = server;
  return st;
}

/** A UDP socket bound on host:0 (default 127.0.0.1). */
export async function udpListener(host = '127.0.0.1') {
  const st = { messages: 0 };
  const sock = dgram.createSocket('udp4');
  sock.on('message', () => st.messages++);
  await new Promise((r, j) => sock.bind(0, host, r).on('error', j));
  st.port = sock.address().port;
  st.close = () => new Promise((r) => sock.close(() => r()));
  return st;
}

/** A unix stream listener; `name` starting with '\0' is an abstract address. */
export async function unixListener(name) {
  const st = { connections: 0, name };
  const server = net.createServer((s) => {
    st.connections++;
    s.on('error', () => {});
  });
  await new Promise((r, j) => server.listen(name, r).on('error', j));
  st.close = () => new Promise((r) => server.close(() => r()));
  return st;
}

/** Copies a file and sets its mode (chmod after the copy so setuid bits survive umask). */
export function copyWithMode(src, dst, mode, { uid, gid } = {}) {
  fs.copyFileSync(src, dst);
  if (uid !== undefined) fs.chownSync(dst, uid, gid ?? uid);
  fs.chmodSync(dst, mode);
}

/** chown -R */
export function chownR(p, uid, gid) {
  fs.chownSync(p, uid, gid);
  if (fs.lstatSync(p).isDirectory()) for (const e of fs.readdirSync(p)) chownR(path.join(p, e), uid, gid);
}

/** Last non-empty line of a text. */
export function lastLine(text) {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  return lines.length ? lines[lines.length - 1] : '';
}
