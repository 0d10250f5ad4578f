// Helpers for toolwarden end-to-end tests: start a real daemon in fresh temp dirs, talk to it
// through its CLI, and speak raw HTTP/1.1 to its MCP listener (node:net, so every header and
// byte is under the test's control).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const BIN = process.env.TOOLWARDEN_BIN || '/work/main/build/daemon/toolwarden';
export const SUPPORTED_VERSIONS = ['2025-03-26', '2025-06-18', '2025-11-25'];
export const NEWEST_VERSION = '2025-11-25';
export { sleep };

// Every daemon started by this process, so a crashed test run never leaves one behind.
const liveDaemons = new Set();
process.on('exit', () => {
  for (const d of liveDaemons) {
    try {
      d.proc.kill('SIGKILL');
    } catch {}
    try {
      fs.rmSync(d.root, { recursive: true, force: true });
    } catch {}
  }
});

export function binaryExists() {
  try {
    fs.accessSync(BIN, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Starts `toolwarden serve` in fresh temp dirs and waits for endpoint.json (≤ 10 s). */
export async function startDaemon({ config, listen = '127.0.0.1:0', extraArgs = [], env = {} } = {}) {
  const d = new Daemon({ config, listen, extraArgs, env });
  await d.start();
  return d;
}

export class Daemon {
  constructor({ config, listen, extraArgs, env }) {
    this.config = config;
    this.listen = listen;
    this.extraArgs = extraArgs;
    this.extraEnv = env;
    this.stderrBuf = '';
    this.stdoutBuf = '';
    this.exitInfo = null;
  }

  async start() {
    this.root = await fsp.mkdtemp(path.join(os.tmpdir(), 'tw-e2e-'));
    this.runtimeDir = path.join(this.root, 'run');
    this.stateDir = path.join(this.root, 'state');
    this.configPath = path.join(this.root, 'config.json');
    this.worktree = path.join(this.root, 'wt');
    this.xdgConfig = path.join(this.root, 'xdg-config');
    await fsp.mkdir(this.runtimeDir, { mode: 0o700 });
    await fsp.chmod(this.runtimeDir, 0o700); // umask-proof
    await fsp.mkdir(this.stateDir, { mode: 0o700 });
    await fsp.mkdir(this.worktree, { mode: 0o755 });
    await fsp.mkdir(this.xdgConfig, { mode: 0o700 });
    await fsp.writeFile(path.join(this.worktree, 'hello.txt'), 'hello world\n');
    if (this.config !== undefined) {
      const text = typeof this.config === 'string' ? this.config : JSON.stringify(this.config, null, 2);
      await fsp.writeFile(this.configPath, text, { mode: 0o600 });
      await fsp.chmod(this.configPath, 0o600);
    }
    this.env = {
      ...process.env,
      TOOLWARDEN_RUNTIME_DIR: this.runtimeDir,
      TOOLWARDEN_STATE_DIR: this.stateDir,
      TOOLWARDEN_CONFIG: this.configPath,
      XDG_CONFIG_HOME: this.xdgConfig,
      ...this.extraEnv,
    };
    delete this.env.NOTIFY_SOCKET;
    const args = ['serve'];
    if (this.listen) args.push('--listen', this.listen);
    args.push(...this.extraArgs);
    this.proc = spawn(BIN, args, { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    liveDaemons.add(this);
    this.proc.stderr.on('data', (b) => {
      this.stderrBuf += b.toString();
      if (this.stderrBuf.length > 2_000_000) this.stderrBuf = this.stderrBuf.slice(-1_000_000);
    });
    this.proc.stdout.on('data', (b) => {
      this.stdoutBuf += b.toString();
      if (this.stdoutBuf.length > 2_000_000) this.stdoutBuf = this.stdoutBuf.slice(-1_000_000);
    });
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
      this.proc.on('error', (err) => {
        this.exitInfo = { code: null, signal: null, error: err };
        resolve(this.exitInfo);
      });
    });

    const endpointPath = path.join(this.runtimeDir, 'endpoint.json');
    this.endpointPath = endpointPath;
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (this.exitInfo) {
        liveDaemons.delete(this);
        await fsp.rm(this.root, { recursive: true, force: true }).catch(() => {});
        throw new Error(
          `toolwarden serve exited before endpoint.json appeared: ${JSON.stringify(this.exitInfo)}\nstderr:\n${this.stderrBuf}`,
        );
      }
      try {
        const text = await fsp.readFile(endpointPath, 'utf8');
        this.endpoint = JSON.parse(text);
        break;
      } catch {}
      if (Date.now() > deadline) {
        await this.kill();
        throw new Error(`endpoint.json did not appear within 10 s\nstderr:\n${this.stderrBuf}`);
      }
      await sleep(50);
    }
    this.mcpUrl = this.endpoint.mcp_url;
    const u = new URL(this.mcpUrl);
    this.host = u.hostname;
    this.port = Number(u.port);
    this.hostHeader = `127.0.0.1:${this.port}`;
    this.pid = this.proc.pid;
    return this;
  }

  stderr() {
    return this.stderrBuf;
  }

  /** True while the daemon process exists (signal 0). */
  alive() {
    if (this.exitInfo) return false;
    try {
      process.kill(this.proc.pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  /** Runs the CLI with this daemon's env; resolves {code, stdout, stderr}. */
  cli(args, { timeout = 20_000, env = {} } = {}) {
    return new Promise((resolve) => {
      const p = spawn(BIN, args, { env: { ...this.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (b) => (stdout += b));
      p.stderr.on('data', (b) => (stderr += b));
      const t = setTimeout(() => p.kill('SIGKILL'), timeout);
      p.on('error', (err) => {
        clearTimeout(t);
        resolve({ code: null, stdout, stderr: stderr + String(err) });
      });
      p.on('close', (code, signal) => {
        clearTimeout(t);
        resolve({ code, signal, stdout, stderr });
      });
    });
  }

  /** `job create`; returns the parsed JSON object. Options: worktree, access, allow[], block[],
   * command[], tool[], ttl. */
  async createJob(opts = {}) {
    const args = ['job', 'create', '--worktree', opts.worktree ?? this.worktree];
    if (opts.access) args.push('--access', opts.access);
    for (const s of opts.allow ?? []) args.push('--allow', s);
    for (const s of opts.block ?? []) args.push('--block', s);
    for (const c of opts.command ?? []) args.push('--command', c);
    for (const t of opts.tool ?? []) args.push('--tool', t);
    if (opts.ttl !== undefined) args.push('--ttl', String(opts.ttl));
    const r = await this.cli(args);
    assert.equal(r.code, 0, `job create failed (exit ${r.code}): ${r.stderr}`);
    let job;
    try {
      job = JSON.parse(r.stdout);
    } catch (e) {
      throw new Error(`job create printed no JSON object: ${JSON.stringify(r.stdout)}`);
    }
    assert.equal(typeof job.token, 'string', 'job create: token missing');
    assert.equal(typeof job.job_id, 'string', 'job create: job_id missing');
    return job;
  }

  async revokeJob(jobId) {
    const r = await this.cli(['job', 'revoke', jobId]);
    assert.equal(r.code, 0, `job revoke failed (exit ${r.code}): ${r.stderr}`);
    return r;
  }

  async renewJob(jobId) {
    const r = await this.cli(['job', 'renew', jobId]);
    assert.equal(r.code, 0, `job renew failed (exit ${r.code}): ${r.stderr}`);
    return JSON.parse(r.stdout);
  }

  /** SIGTERM, then await the exit: resolves {code, signal} (SIGKILL after `timeout`). */
  async stop(timeout = 10_000) {
    if (this.exitInfo) return this.exitInfo;
    this.proc.kill('SIGTERM');
    const t = sleep(timeout).then(() => 'timeout');
    const r = await Promise.race([this.exited, t]);
    if (r === 'timeout') {
      this.proc.kill('SIGKILL');
      await this.exited;
      return { code: null, signal: 'SIGKILL', timedOut: true };
    }
    return r;
  }

  /** Always safe: SIGKILL if still running, then remove the temp dirs. For `after` hooks. */
  async kill() {
    if (!this.exitInfo && this.proc) {
      try {
        this.proc.kill('SIGKILL');
      } catch {}
      await Promise.race([this.exited, sleep(5000)]);
    }
    liveDaemons.delete(this);
    await fsp.rm(this.root, { recursive: true, force: true }).catch(() => {});
  }

  // ---- MCP over raw HTTP ----

  /** Default headers of a well-formed MCP POST; `extra` overrides case-insensitively
   * (value null removes a header). */
  mcpHeaders(token, extra = {}) {
    const h = [
      ['Host', this.hostHeader],
      ['Content-Type', 'application/json'],
      ['Accept', 'application/json, text/event-stream'],
    ];
    if (token) h.push(['Authorization', `Bearer ${token}`]);
    return mergeHeaders(h, extra);
  }

  /** One raw request on a fresh connection; resolves the parsed response. */
  async request({ method = 'POST', path: p = '/mcp', headers = [], body, timeout = 10_000 } = {}) {
    const c = await RawConn.open(this.port);
    try {
      await c.writeGently(buildRequest({ method, path: p, headers, body }));
      const res = await c.readResponse(timeout);
      if (!res) throw new Error(`connection closed without a response (socket error: ${c.error?.code ?? 'none'})`);
      return res;
    } finally {
      c.destroy();
    }
  }

  /** POST one JSON-RPC message (object or raw string/Buffer) to /mcp with `token`. */
  rpc(token, msg, extraHeaders = {}, opts = {}) {
    const body = typeof msg === 'string' || Buffer.isBuffer(msg) ? msg : JSON.stringify(msg);
    return this.request({ headers: this.mcpHeaders(token, extraHeaders), body, ...opts });
  }

  /** ping must answer 200 {"jsonrpc":"2.0","id":..,"result":{}} and the process must be alive. */
  async assertHealthy(token, label = '') {
    assert.ok(this.alive(), `daemon process died ${label}\nstderr tail:\n${this.stderrBuf.slice(-3000)}`);
    const id = `health-${Math.random().toString(36).slice(2)}`;
    const res = await this.rpc(token, { jsonrpc: '2.0', id, method: 'ping' });
    assert.equal(res.status, 200, `ping after ${label}: status ${res.status} body ${res.text}`);
    assert.deepEqual(res.json(), { jsonrpc: '2.0', id, result: {} });
    assert.ok(this.alive(), `daemon process died ${label}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP/1.1

/** Merges header lists: `extra` is an object; a key replaces any same-named (case-insensitive)
 * header, null deletes, arrays add several lines. */
export function mergeHeaders(base, extra = {}) {
  let out = base.slice();
  for (const [k, v] of Object.entries(extra)) {
    out = out.filter(([n]) => n.toLowerCase() !== k.toLowerCase());
    if (v === null || v === undefined) continue;
    if (Array.isArray(v)) for (const vv of v) out.push([k, vv]);
    else out.push([k, String(v)]);
  }
  return out;
}

/** Serializes a request exactly as given. Adds Content-Length for a body unless the headers
 * already carry Content-Length or Transfer-Encoding. */
export function buildRequest({ method = 'POST', path: p = '/mcp', headers = [], body, version = 'HTTP/1.1' }) {
  const list = Array.isArray(headers) ? headers.slice() : Object.entries(headers);
  const bodyBuf = body === undefined ? null : Buffer.isBuffer(body) ? body : Buffer.from(body);
  const has = (n) => list.some(([k]) => k.toLowerCase() === n);
  if (bodyBuf && !has('content-length') && !has('transfer-encoding')) {
    list.push(['Content-Length', String(bodyBuf.length)]);
  }
  let head = `${method} ${p} ${version}\r\n`;
  for (const [k, v] of list) head += `${k}: ${v}\r\n`;
  head += '\r\n';
  return bodyBuf ? Buffer.concat([Buffer.from(head, 'latin1'), bodyBuf]) : Buffer.from(head, 'latin1');
}

export const allResponses = [];

/** A client socket with an incremental HTTP/1.1 response parser. */
export class RawConn {
  static open(port, host = '127.0.0.1') {
    return new Promise((resolve, reject) => {
      const s = net.connect({ port, host });
      s.once('connect', () => resolve(new RawConn(s)));
      s.once('error', reject);
    });
  }

  constructor(socket) {
    this.socket = socket;
    this.buf = Buffer.alloc(0);
    this.closed = false;
    this.error = null;
    this.waiters = new Set();
    socket.setNoDelay(true);
    socket.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      this._wake();
    });
    socket.on('error', (e) => {
      this.error = e;
    });
    socket.on('close', () => {
      this.closed = true;
      this.closedAt = Date.now();
      this._wake();
    });
    // The server half-closing counts as closed for our purposes (no more responses).
    socket.on('end', () => {
      this.ended = true;
      this._wake();
    });
  }

  _wake() {
    for (const w of [...this.waiters]) w();
  }

  _waitEvent(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.waiters.delete(f);
        resolve(false);
      }, ms);
      const f = () => {
        clearTimeout(t);
        this.waiters.delete(f);
        resolve(true);
      };
      this.waiters.add(f);
    });
  }

  /** Writes bytes; resolves true when flushed, false if the peer had closed (EPIPE/ECONNRESET). */
  write(data) {
    return new Promise((resolve) => {
      if (this.socket.destroyed || this.closed) return resolve(false);
      try {
        this.socket.write(data, (err) => resolve(!err));
      } catch {
        resolve(false);
      }
    });
  }

  /** Writes a large request so that an early answer is never lost. A server may answer a
   * request (413, 401, ...) right after its head and close without reading the body; node
   * destroys a socket whose write fails (EPIPE/ECONNRESET) before reading what the server sent.
   * So: send the head, give the server `earlyMs` to answer, then send the body in slices, with a
   * poll phase between slices, stopping as soon as an answer arrives or the peer closes. */
  async writeGently(data, { slice = 64 * 1024, earlyMs = 100 } = {}) {
    if (data.length <= slice) return this.write(data);
    const headEnd = data.indexOf('\r\n\r\n');
    let off = headEnd < 0 ? 0 : headEnd + 4;
    if (off > 0) {
      if (!(await this.write(data.subarray(0, off)))) return false;
      const deadline = Date.now() + earlyMs;
      while (this.buf.length === 0 && !this.isClosed && Date.now() < deadline) {
        await this._waitEvent(deadline - Date.now());
      }
    }
    for (; off < data.length; off += slice) {
      if (this.buf.length > 0 || this.isClosed) return false;
      if (!(await this.write(data.subarray(off, off + slice)))) return false;
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
    }
    return true;
  }

  get isClosed() {
    return this.closed || this.ended;
  }

  /** Next response: resolves the parsed response, or null when the connection closed before any
   * byte of one arrived. Throws on timeout or on a truncated response. */
  async readResponse(timeout = 10_000, { head = false } = {}) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const r = this._tryParse(head);
      if (r) return r;
      if (this.isClosed) {
        if (this.buf.length === 0) return null;
        const r2 = this._tryParse(head, true);
        if (r2) return r2;
        throw new Error(`connection closed mid-response: ${JSON.stringify(this.buf.toString('latin1').slice(0, 500))}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `timed out after ${timeout} ms waiting for a response; have ${this.buf.length} bytes: ${JSON.stringify(
            this.buf.toString('latin1').slice(0, 300),
          )}`,
        );
      }
      await this._waitEvent(left);
    }
  }

  /** Resolves true if the server closes the connection within `ms`. */
  async waitClose(ms) {
    const deadline = Date.now() + ms;
    while (!this.isClosed) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await this._waitEvent(left);
    }
    return true;
  }

  _tryParse(headOnly, atEof = false) {
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0) return null;
    const headText = this.buf.subarray(0, end).toString('latin1');
    const lines = headText.split('\r\n');
    const m = /^HTTP\/(\d\.\d) (\d{3})(?: (.*))?$/.exec(lines[0]);
    if (!m) throw new Error(`malformed status line: ${JSON.stringify(lines[0])}`);
    const status = Number(m[2]);
    const rawHeaders = [];
    const headers = {};
    for (const line of lines.slice(1)) {
      const i = line.indexOf(':');
      if (i <= 0) throw new Error(`malformed header line: ${JSON.stringify(line)}`);
      const k = line.slice(0, i).trim();
      const v = line.slice(i + 1).trim();
      rawHeaders.push([k, v]);
      const lk = k.toLowerCase();
      headers[lk] = lk in headers ? `${headers[lk]}, ${v}` : v;
    }
    let pos = end + 4;
    let body;
    const noBody = headOnly || (status >= 100 && status < 200) || status === 204 || status === 304;
    if (noBody) {
      body = Buffer.alloc(0);
    } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const chunks = [];
      for (;;) {
        const le = this.buf.indexOf('\r\n', pos);
        if (le < 0) return null;
        const size = parseInt(this.buf.subarray(pos, le).toString('latin1').split(';')[0], 16);
        if (Number.isNaN(size)) throw new Error('bad chunk size');
        pos = le + 2;
        if (size === 0) {
          // trailers until an empty line
          for (;;) {
            const te = this.buf.indexOf('\r\n', pos);
            if (te < 0) return null;
            const empty = te === pos;
            pos = te + 2;
            if (empty) break;
          }
          break;
        }
        if (this.buf.length < pos + size + 2) return null;
        chunks.push(this.buf.subarray(pos, pos + size));
        pos += size + 2;
      }
      body = Buffer.concat(chunks);
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (this.buf.length < pos + n) return null;
      body = this.buf.subarray(pos, pos + n);
      pos += n;
    } else {
      // delimited by close
      if (!atEof) return null;
      body = this.buf.subarray(pos);
      pos = this.buf.length;
    }
    this.buf = this.buf.subarray(pos);
    const res = makeResponse({ httpVersion: m[1], status, reason: m[3] ?? '', headers, rawHeaders, body });
    return res;
  }

  destroy() {
    this.socket.destroy();
  }
}

function makeResponse({ httpVersion, status, reason, headers, rawHeaders, body }) {
  const text = Buffer.from(body).toString('utf8');
  const res = {
    httpVersion,
    status,
    reason,
    headers,
    rawHeaders,
    body: Buffer.from(body),
    text,
    json() {
      try {
        return JSON.parse(text);
      } catch (e) {
        throw new Error(`response body is not JSON (status ${status}): ${JSON.stringify(text.slice(0, 500))}`);
      }
    },
  };
  allResponses.push({ status, headers });
  // SPEC §5: no Access-Control-Allow-Origin header is ever sent.
  assert.equal(
    Object.keys(headers).find((k) => k.startsWith('access-control-')),
    undefined,
    `response ${status} carries a CORS header: ${JSON.stringify(headers)}`,
  );
  return res;
}

/** Small node:http POST helper: resolves {status, headers, text, json()}. */
export function post(url, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    const req = http.request(url, { method: 'POST', headers, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        try {
          resolve(
            makeResponse({
              httpVersion: res.httpVersion,
              status: res.statusCode,
              reason: res.statusMessage,
              headers: res.headers,
              rawHeaders: pairs(res.rawHeaders),
              body: Buffer.concat(chunks),
            }),
          );
        } catch (e) {
          reject(e);
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

function pairs(flat) {
  const out = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
}

/** Parses an SSE stream body into events [{event, data, id, dataLines}]. */
export function parseSse(text) {
  const events = [];
  const blocks = text.replace(/\r\n/g, '\n').split(/\n\n/);
  for (const block of blocks) {
    if (block.trim() === '') continue;
    const ev = { event: undefined, data: undefined, id: undefined, dataLines: [], comments: [] };
    for (const line of block.split('\n')) {
      if (line === '') continue;
      if (line.startsWith(':')) {
        ev.comments.push(line);
        continue;
      }
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') ev.dataLines.push(value);
      else if (field === 'event') ev.event = value;
      else if (field === 'id') ev.id = value;
    }
    if (ev.dataLines.length) ev.data = ev.dataLines.join('\n');
    if (ev.dataLines.length || ev.event) events.push(ev);
  }
  return events;
}

/** Asserts a JSON-RPC error response: HTTP status, error code, id. */
export function assertRpcError(res, httpStatus, code, id) {
  assert.equal(res.status, httpStatus, `HTTP status (body ${res.text})`);
  assert.match(res.headers['content-type'] ?? '', /^application\/json\b/, 'error content type');
  const j = res.json();
  assert.equal(j.jsonrpc, '2.0', `jsonrpc member: ${res.text}`);
  assert.equal(typeof j.error, 'object', `no error object: ${res.text}`);
  assert.equal(j.error.code, code, `JSON-RPC error code: ${res.text}`);
  assert.equal(typeof j.error.message, 'string');
  assert.equal(j.result, undefined);
  if (id !== undefined) assert.deepEqual(j.id, id, `error id: ${res.text}`);
  return j;
}

/** Runs a program (not the daemon) synchronously; handy for one-off checks. */
export function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function initializeMsg(id, protocolVersion = NEWEST_VERSION) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'tw-e2e', version: '0.0.1' } },
  };
}
