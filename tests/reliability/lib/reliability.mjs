// Helpers for the reliability suites (fault, load and abuse): a daemon started with a raised
// open-file limit, the store read with the sqlite3 CLI, /proc figures of the daemon (RSS, open
// descriptors) and latency percentiles. Builds on ../../security/lib/harness.mjs (daemon start,
// jobs, raw HTTP).
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, Daemon, mkTemp, run, twEnv, writeFile } from '../../security/lib/harness.mjs';

export * from '../../security/lib/harness.mjs';

export const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');

/** The open-file limits of this process: {soft, hard} (Infinity for unlimited). */
export function nofileLimits() {
  const text = fs.readFileSync('/proc/self/limits', 'utf8');
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(text);
  const val = (s) => (s === 'unlimited' ? Infinity : Number(s));
  return { soft: val(m[1]), hard: val(m[2]) };
}

/**
 * The open-file limit a process started by this test can get: `want`, or null when the hard
 * limit is lower (the caller skips with that reason). Raising the soft limit up to the hard one
 * needs no privilege; `prlimit` does it for the child it execs.
 */
export function nofileFor(want) {
  const { hard } = nofileLimits();
  return hard >= want ? want : null;
}

/** argv prefix that runs a program with RLIMIT_NOFILE raised to n (prlimit execs it: same pid). */
export function withNofile(n) {
  return n ? ['prlimit', `--nofile=${n}:${n}`, '--'] : [];
}

/**
 * A Daemon (see harness.mjs) whose `serve` runs under `prlimit --nofile=N` when `nofile` is set,
 * so thousands of connections fit, and which keeps the tail of its stderr rather than the head
 * (a long run logs a line per call). Everything else (endpoint.json wait, stop, kill, CLI) is
 * the harness's.
 */
export class LimitDaemon extends Daemon {
  constructor(opts) {
    super(opts);
    this.nofile = opts.nofile;
  }

  serveArgv(args) {
    return [...withNofile(this.nofile), BIN, 'serve', ...args];
  }

  keepStderr(text) {
    this.stderr += text;
    if (this.stderr.length > 1 << 20) this.stderr = this.stderr.slice(-(1 << 19));
  }
}

/**
 * Starts a LimitDaemon in `base` (dirs run/, state/, config.json as in harness.startDaemon).
 * opts: base, stateDir, runtimeDir, config (object, written as config.json), nofile, args,
 * logLevel (default warn: a load run would otherwise log a line per call).
 */
export async function startLimitDaemon(opts = {}) {
  const base = opts.base ?? mkTemp('tw-rel-');
  const runtimeDir = opts.runtimeDir ?? path.join(base, 'run');
  const stateDir = opts.stateDir ?? path.join(base, 'state');
  const configPath = path.join(base, 'config.json');
  for (const dir of [runtimeDir, stateDir]) if (!fs.existsSync(dir)) fs.mkdirSync(dir, { mode: 0o700 });
  if (opts.config !== undefined) writeFile(configPath, JSON.stringify(opts.config), 0o600);
  const env = twEnv({ runtimeDir, stateDir, configPath });
  const d = new LimitDaemon({ base, runtimeDir, stateDir, configPath, env, nofile: opts.nofile });
  await d.start([...(opts.args ?? []), '--log-level', opts.logLevel ?? 'warn']);
  return d;
}

/** Runs SQL through the sqlite3 CLI (read-only) on a store; resolves the rows as JSON. */
export function storeQuery(stateDir, sql) {
  // A busy timeout: the reader may meet the daemon's checkpoint or the test's own lock holder.
  const r = spawnSync('sqlite3', ['-readonly', '-json', '-cmd', '.timeout 10000', path.join(stateDir, 'store.db'), sql], {
    encoding: 'utf8',
    maxBuffer: 512 * 1024 * 1024, // every event of a busy test run, as JSON
  });
  if (r.status !== 0) throw new Error(`sqlite3 ${sql}: status ${r.status} signal ${r.signal} ${r.error ?? ''} ${r.stderr}`);
  return r.stdout.trim() ? JSON.parse(r.stdout) : [];
}

/** `toolwarden audit verify` against a daemon's dirs (through it when running, else offline). */
export async function auditVerify(d) {
  const r = await run([BIN, 'audit', 'verify'], { env: d.env });
  let out;
  try {
    out = JSON.parse(r.stdout);
  } catch {
    out = null;
  }
  return { code: r.code, out, text: r.stdout + r.stderr };
}

/** VmRSS of a process in KiB. */
export function rssKiB(pid) {
  const m = /^VmRSS:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]);
}

/** Number of open descriptors of a process. */
export function fdCount(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

/** Zombie (exited, not yet reaped) children of a process. */
export function zombieChildren(pid) {
  let n = 0;
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (f[0] === 'Z' && Number(f[1]) === pid) n++;
    } catch {
      /* gone */
    }
  }
  return n;
}

export const mib = (kib) => (kib / 1024).toFixed(1);

/** Percentile (0..100) of an array of numbers (nearest rank); NaN when empty. */
export function percentile(values, p) {
  if (!values.length) return NaN;
  const s = Float64Array.from(values).sort();
  const rank = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[rank];
}

/** "p50=… p99=… max=… (n=…)" in ms with two decimals. */
export function latencySummary(values) {
  const f = (v) => (Number.isFinite(v) ? v.toFixed(2) : '-');
  return `p50=${f(percentile(values, 50))}ms p99=${f(percentile(values, 99))}ms max=${f(percentile(values, 100))}ms (n=${values.length})`;
}

/** Monotonic milliseconds (fractional). */
export const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

// Under CTest (TOOLWARDEN_BUILD_DIR set) the figures also go to <build>/reliability/<suite>.txt,
// rewritten by each run of the suite, so scripts/test.sh can print them although CTest shows
// the output of failed tests only.
let figureFile;
function figureSink() {
  if (figureFile !== undefined || !process.env.TOOLWARDEN_BUILD_DIR) return figureFile;
  const suite = path.basename(process.argv[1] ?? 'suite').replace(/\.test\.mjs$/, '');
  const dir = path.join(process.env.TOOLWARDEN_BUILD_DIR, 'reliability');
  try {
    fs.mkdirSync(dir, { recursive: true });
    figureFile = path.join(dir, `${suite}.txt`);
    fs.writeFileSync(figureFile, '');
  } catch {
    figureFile = null;
  }
  return figureFile;
}

/** Prints a figure line that the README section quotes; prefixed so it stands out in logs. */
export function figure(text) {
  process.stdout.write(`# figure: ${text}\n`);
  const file = figureSink();
  if (file) fs.appendFileSync(file, `${text}\n`);
}

// ---------------------------------------------------------------------------------------------
// Calls whose answers are checked against the store afterwards.

/** The two answers of a call the audit store could not record (SPEC §5: never unaudited). */
export const STORE_REFUSALS = new Map([
  ['the audit store cannot record the call; nothing was run', 'store-refused'], // before the tool ran
  ['the audit store cannot record the result', 'store-unrecorded'], // it ran; the result is withheld
]);

/**
 * What a tools/call answer was: 'ok', 'denied' (a tool result with isError, `code` set),
 * 'store-refused' / 'store-unrecorded' (JSON-RPC -32603 with one of the messages above),
 * 'http-STATUS', or 'other' (anything else: an error of the test).
 */
export function classify(resp) {
  if (resp?.status !== undefined && resp.status !== 200) return { kind: `http-${resp.status}`, detail: String(resp.body).slice(0, 200) };
  const j = resp?.json ?? resp;
  if (j?.error) {
    const kind = j.error.code === -32603 ? STORE_REFUSALS.get(j.error.message) : undefined;
    return { kind: kind ?? 'other', detail: JSON.stringify(j.error) };
  }
  if (j?.result?.isError === false) return { kind: 'ok' };
  if (j?.result?.isError === true) return { kind: 'denied', code: j.result.structuredContent?.error, detail: j.result.content?.[0]?.text };
  return { kind: 'other', detail: JSON.stringify(j).slice(0, 300) };
}

/**
 * Every tool.requested in the store with its tool.completed (if any), by JSON-RPC request id:
 * Map(requestId → {job, seq, code|null}). Request ids must be unique strings for this to work.
 */
export function recordedCalls(stateDir) {
  const rows = storeQuery(
    stateDir,
    "SELECT type, job_id AS job, seq, json_extract(data, '$.request_id') AS rid, json_extract(data, '$.code') AS code " +
      "FROM events WHERE type IN ('tool.requested', 'tool.completed')",
  );
  const completed = new Map();
  for (const r of rows) if (r.type === 'tool.completed') completed.set(`${r.job}|${r.seq}`, r.code);
  const out = new Map();
  for (const r of rows) {
    if (r.type !== 'tool.requested') continue;
    if (out.has(r.rid)) throw new Error(`request id ${r.rid} recorded twice`);
    out.set(r.rid, { job: r.job, seq: r.seq, code: completed.get(`${r.job}|${r.seq}`) ?? null });
  }
  return out;
}

/** Built-in tools that run without effects: both their events are committed after they ran. */
export const EFFECT_FREE = new Set(['local_read', 'local_list', 'local_search']);

/**
 * Checks answered calls against the store: every call answered with a tool result (ok or a
 * denial) has its tool.requested and tool.completed with the same code; a call refused before
 * it ran left nothing; a call whose result was withheld has no completion, and, if it has
 * effects, its tool.requested. answers: [{id, tool, kind, code?}]. Returns counts by kind.
 */
export function assertAnsweredAreRecorded(stateDir, answers, label = '') {
  const rec = recordedCalls(stateDir);
  const counts = {};
  for (const a of answers) {
    counts[a.kind] = (counts[a.kind] ?? 0) + 1;
    const r = rec.get(a.id);
    if (a.kind === 'ok' || a.kind === 'denied') {
      if (!r) throw new Error(`${label}: call ${a.id} was answered (${a.kind}) but has no tool.requested on record`);
      const want = a.kind === 'ok' ? 'OK' : a.code;
      if (r.code !== want) throw new Error(`${label}: call ${a.id} was answered ${want} but its tool.completed says ${r.code}`);
    } else if (a.kind === 'store-refused') {
      // Refused before it ran: its tool.requested was rolled back with the failed commit.
      if (r) throw new Error(`${label}: call ${a.id} was refused before it ran, yet it is on record (${JSON.stringify(r)})`);
    } else if (a.kind === 'store-unrecorded') {
      if (r && r.code !== null) throw new Error(`${label}: call ${a.id} answered ${a.kind} yet its completion (${r.code}) is on record`);
      // A tool with effects acts only once its tool.requested is durable.
      if (EFFECT_FREE.has(a.tool) === false && !r) throw new Error(`${label}: ${a.tool} call ${a.id} ran without its tool.requested on record`);
    }
  }
  return counts;
}

let callCounter = 0;
/**
 * tools/call with a unique string request id over raw HTTP; never throws. Resolves
 * {id, tool, kind, code?, detail?, ms, endedAt} (kind from classify(), or 'transport' when the
 * request failed at the socket level). endedAt is nowMs() when the answer had been read.
 */
export async function tracedCall(d, token, name, args, { agent, prefix = 'call', timeout = 60000 } = {}) {
  const id = `${prefix}-${process.pid}-${++callCounter}`;
  const t = nowMs();
  let r;
  try {
    r = await d.mcpPost(token, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }, { agent, timeout });
  } catch (e) {
    const endedAt = nowMs();
    return { id, tool: name, kind: 'transport', detail: String(e.message ?? e), ms: endedAt - t, endedAt };
  }
  const endedAt = nowMs();
  return { id, tool: name, ...classify(r), ms: endedAt - t, endedAt, status: r.status };
}
