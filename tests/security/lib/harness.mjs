// Small, self-contained harness for the security tests: starts toolwarden in fresh temp dirs,
// creates jobs through the CLI, talks MCP over raw HTTP (node:http) and the admin API over the
// unix socket. Independent of tests/e2e/lib on purpose.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const BIN = process.env.TOOLWARDEN_BIN || '/work/main/build/daemon/toolwarden';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const tempRoots = new Set();

/** A fresh temp dir (realpath, so worktrees are real directories). mode defaults to 0700. */
export function mkTemp(prefix = 'tw-sec-', mode = 0o700) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  fs.chmodSync(dir, mode);
  tempRoots.add(dir);
  return dir;
}

/** Removes every temp dir made by mkTemp (best effort). */
export function cleanupTemps() {
  for (const d of tempRoots) {
    try {
      fs.rmSync(d, { recursive: true, force: true });
    } catch {
      /* ignore */
    }
  }
  tempRoots.clear();
}

/** Writes a file with the given mode, creating parent dirs. */
export function writeFile(file, content, mode = 0o644) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content);
  fs.chmodSync(file, mode);
}

/** Prefix for running a program as another user with util-linux setpriv. */
export function asUser(runAs) {
  if (!runAs) return [];
  return ['setpriv', `--reuid=${runAs.uid}`, `--regid=${runAs.gid ?? runAs.uid}`, '--clear-groups', '--'];
}

/**
 * Runs a program to completion. Resolves {code, signal, stdout, stderr}. Kills it after
 * `timeout` ms (then code is null and timedOut is true).
 */
export function run(argv, { env, cwd, input, timeout = 20000, runAs } = {}) {
  const full = [...asUser(runAs), ...argv];
  return new Promise((resolve, reject) => {
    const child = spawn(full[0], full.slice(1), {
      env: env ?? process.env,
      cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (s) => (stdout += s));
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
      resolve({ code, signal, stdout, stderr, timedOut });
    });
    child.stdin.on('error', () => {}); // the program may exit without reading its input
    child.stdin.end(input ?? '');
  });
}

/** Environment for the daemon and the CLI pointing at the given dirs. */
export function twEnv({ runtimeDir, stateDir, configPath, home, extra } = {}) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('TOOLWARDEN_') && k !== 'TOOLWARDEN_BIN') delete env[k];
  delete env.XDG_RUNTIME_DIR;
  delete env.XDG_STATE_HOME;
  delete env.XDG_CONFIG_HOME;
  delete env.NOTIFY_SOCKET;
  if (runtimeDir) env.TOOLWARDEN_RUNTIME_DIR = runtimeDir;
  if (stateDir) env.TOOLWARDEN_STATE_DIR = stateDir;
  if (configPath) env.TOOLWARDEN_CONFIG = configPath;
  if (home) env.HOME = home;
  return { ...env, ...(extra ?? {}) };
}

/**
 * Starts `toolwarden serve` and resolves once it has written endpoint.json, or rejects when the
 * process exits first (the rejection carries code and stderr).
 * opts: base (parent dir; default a new temp dir), runtimeDir, stateDir, configPath,
 *       config (object → JSON file mode 0600 at configPath; string → raw), args (extra serve args),
 *       runAs {uid,gid}, home, waitMs.
 */
export async function startDaemon(opts = {}) {
  const base = opts.base ?? mkTemp();
  const runtimeDir = opts.runtimeDir ?? path.join(base, 'run');
  const stateDir = opts.stateDir ?? path.join(base, 'state');
  const configPath = opts.configPath ?? path.join(base, 'config.json');
  if (!opts.runtimeDir && !fs.existsSync(runtimeDir)) fs.mkdirSync(runtimeDir, { mode: 0o700 });
  if (!opts.stateDir && !fs.existsSync(stateDir)) fs.mkdirSync(stateDir, { mode: 0o700 });
  if (opts.config !== undefined) {
    writeFile(configPath, typeof opts.config === 'string' ? opts.config : JSON.stringify(opts.config), 0o600);
  }
  const env = twEnv({ runtimeDir, stateDir, configPath, home: opts.home });
  const d = new Daemon({ base, runtimeDir, stateDir, configPath, env, runAs: opts.runAs });
  await d.start(opts.args ?? [], opts.waitMs ?? 15000);
  return d;
}

export class Daemon {
  constructor({ base, runtimeDir, stateDir, configPath, env, runAs }) {
    Object.assign(this, { base, runtimeDir, stateDir, configPath, env, runAs });
    this.proc = null;
    this.stderr = '';
    this.exited = null; // {code, signal} once exited
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  }

  get endpointPath() {
    return path.join(this.runtimeDir, 'endpoint.json');
  }

  /** The command line that starts `toolwarden serve ARGS` (a subclass may wrap it). */
  serveArgv(args) {
    return [...asUser(this.runAs), BIN, 'serve', ...args];
  }

  /** Keeps the daemon's stderr for error messages: its first 4 MiB. */
  keepStderr(text) {
    if (this.stderr.length < 4 << 20) this.stderr += text;
  }

  async start(args = [], waitMs = 15000) {
    this.stderr = '';
    this.exited = null;
    const argv = this.serveArgv(args);
    const proc = spawn(argv[0], argv.slice(1), { env: this.env, stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc = proc;
    proc.stderr.setEncoding('utf8').on('data', (s) => this.keepStderr(s));
    this.exitPromise = new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        this.exited = { code, signal };
        resolve(this.exited);
      });
    });
    const deadline = Date.now() + waitMs;
    for (;;) {
      if (this.exited) {
        const e = new Error(`toolwarden serve exited early (${JSON.stringify(this.exited)}): ${this.stderr}`);
        e.exit = this.exited;
        e.stderr = this.stderr;
        throw e;
      }
      try {
        const ep = JSON.parse(fs.readFileSync(this.endpointPath, 'utf8'));
        if (ep.pid === proc.pid) {
          this.endpoint = ep;
          const u = new URL(ep.mcp_url);
          this.port = Number(u.port);
          this.mcpUrl = ep.mcp_url;
          this.adminSocket = ep.admin_socket;
          return this;
        }
      } catch {
        /* not yet */
      }
      if (Date.now() > deadline) {
        proc.kill('SIGKILL');
        throw new Error(`daemon did not write endpoint.json within ${waitMs} ms: ${this.stderr}`);
      }
      await sleep(25);
    }
  }

  get alive() {
    return this.proc && !this.exited;
  }

  /** SIGTERM and wait; resolves {code, signal}. SIGKILL after `ms`. */
  async stop(ms = 10000) {
    this.agent.destroy();
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    if (!this.proc || this.exited) return this.exited;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), ms);
    const r = await this.exitPromise;
    clearTimeout(t);
    return r;
  }

  /** SIGKILL (for `after` hooks and crash tests). */
  async kill() {
    this.agent.destroy();
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    if (!this.proc || this.exited) return this.exited;
    this.proc.kill('SIGKILL');
    return this.exitPromise;
  }

  /** Runs the CLI with this daemon's environment. */
  cli(args, opts = {}) {
    return run([BIN, ...args], { env: this.env, runAs: this.runAs, ...opts });
  }

  /** `job create` via the CLI; options map to flags. Resolves the parsed JSON (throws on failure). */
  async createJob({ worktree, access, allow = [], block = [], commands = [], tools = [], ttl } = {}) {
    const args = ['job', 'create', '--worktree', worktree];
    if (access) args.push('--access', access);
    for (const s of allow) args.push('--allow', s);
    for (const s of block) args.push('--block', s);
    for (const c of commands) args.push('--command', c);
    for (const t of tools) args.push('--tool', t);
    if (ttl !== undefined) args.push('--ttl', String(ttl));
    const r = await this.cli(args);
    if (r.code !== 0) throw new Error(`job create failed (${r.code}): ${r.stderr}${r.stdout}`);
    return JSON.parse(r.stdout);
  }

  /** POST /mcp with a JSON-RPC body; resolves {status, headers, body, json}. */
  mcpPost(token, body, { headers = {}, agent, timeout } = {}) {
    const h = {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...headers,
    };
    if (token) h.Authorization = `Bearer ${token}`;
    return httpRequest({
      host: '127.0.0.1',
      port: this.port,
      method: 'POST',
      path: '/mcp',
      headers: h,
      body: typeof body === 'string' ? body : JSON.stringify(body),
      agent: agent ?? this.agent,
      timeout,
    });
  }

  /** A JSON-RPC request on /mcp; resolves the parsed JSON-RPC response (throws on non-200). */
  async rpc(token, method, params, opts = {}) {
    const id = opts.id ?? nextId++;
    const r = await this.mcpPost(token, { jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) }, opts);
    if (r.status !== 200) {
      const e = new Error(`${method}: HTTP ${r.status}: ${r.body}`);
      e.response = r;
      throw e;
    }
    return r.json;
  }

  /** tools/call → the parsed JSON-RPC response ({result} or {error}). */
  callTool(token, name, args, opts = {}) {
    return this.rpc(token, 'tools/call', { name, arguments: args }, opts);
  }

  /** Raw HTTP request over admin.sock. */
  adminHttp(method, p, body, headers = {}) {
    return httpRequest({
      socketPath: this.adminSocket ?? path.join(this.runtimeDir, 'admin.sock'),
      method,
      path: p,
      headers: { Host: 'localhost', ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      agent: false,
    });
  }

  /** Admin JSON-RPC call; resolves the parsed JSON-RPC response object. */
  async admin(method, params = {}) {
    const r = await this.adminHttp('POST', '/admin', { jsonrpc: '2.0', id: nextId++, method, params });
    if (r.status !== 200) throw new Error(`admin ${method}: HTTP ${r.status}: ${r.body}`);
    return r.json;
  }
}

let nextId = 1;

/** node:http request; resolves {status, headers, body, json, socketClosed}. */
export function httpRequest({ body, timeout = 30000, ...opts }) {
  return new Promise((resolve, reject) => {
    const headers = { ...(opts.headers ?? {}) };
    if (body !== undefined) headers['Content-Length'] = Buffer.byteLength(body);
    const req = http.request({ ...opts, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, headers: res.headers, body: text, json });
      });
      res.on('error', reject);
    });
    req.setTimeout(timeout, () => req.destroy(new Error(`HTTP request timed out after ${timeout} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Sends one raw request on a fresh unix-socket connection and reports what came back and whether
 * the server closed the connection (within closeWaitMs). A server may answer (e.g. 403 to a
 * foreign peer) before reading anything and then close; a write into a closed socket makes Node
 * drop unread input, so the request is written only after `writeDelayMs` of silence or after
 * the first answer bytes arrived, and write errors are ignored.
 */
export function rawUnixExchange(socketPath, rawRequest, { closeWaitMs = 3000, writeDelayMs = 150 } = {}) {
  return new Promise((resolve, reject) => {
    const s = net.connect(socketPath);
    let data = '';
    let closedByPeer = false;
    let done = false;
    let written = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(writeTimer);
      s.destroy();
      resolve({ data, closedByPeer });
    };
    const write = () => {
      if (written || done || s.destroyed) return;
      written = true;
      s.write(rawRequest, () => {});
    };
    let writeTimer;
    const timer = setTimeout(finish, closeWaitMs);
    s.setEncoding('utf8');
    s.on('connect', () => {
      writeTimer = setTimeout(write, writeDelayMs);
    });
    s.on('data', (c) => {
      data += c;
      setImmediate(write);
    });
    s.on('end', () => {
      closedByPeer = true;
      finish();
    });
    s.on('close', () => {
      closedByPeer = true;
      finish();
    });
    s.on('error', (e) => {
      if (e.code === 'ECONNRESET' || e.code === 'EPIPE') {
        closedByPeer = true;
        finish();
      } else if (!done) {
        done = true;
        clearTimeout(timer);
        clearTimeout(writeTimer);
        reject(e);
      }
    });
  });
}

/** The denial code of a tools/call response (asserts the SPEC §5 denial shape). */
export function denialCode(resp) {
  const r = resp?.result;
  if (!r || r.isError !== true) return null;
  return r.structuredContent?.error ?? null;
}
