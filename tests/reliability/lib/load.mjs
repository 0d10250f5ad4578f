// A closed-loop HTTP load generator for the MCP endpoint: `clients` concurrent keep-alive
// clients (one node:http Agent, maxSockets = clients), each sending its next request as soon as
// the previous one was answered, until the deadline. Every answer is classified and counted;
// latencies go to per-kind log-bucket histograms (constant memory, so a 10-minute run is fine).
import http from 'node:http';
import { nowMs } from './reliability.mjs';

/** Latency histogram: buckets 1 % wide from 10 µs up; percentiles accurate to about 1 %. */
export class Histogram {
  constructor() {
    this.counts = new Map();
    this.n = 0;
    this.max = 0;
  }

  record(ms) {
    const b = ms <= 0.01 ? 0 : Math.ceil(Math.log(ms / 0.01) / Math.log(1.01));
    this.counts.set(b, (this.counts.get(b) ?? 0) + 1);
    this.n++;
    if (ms > this.max) this.max = ms;
  }

  percentile(p) {
    if (this.n === 0) return NaN;
    const rank = Math.max(1, Math.ceil((p / 100) * this.n));
    let seen = 0;
    for (const b of [...this.counts.keys()].sort((x, y) => x - y)) {
      seen += this.counts.get(b);
      if (seen >= rank) return Math.min(this.max, 0.01 * 1.01 ** b);
    }
    return this.max;
  }

  summary() {
    const f = (v) => (Number.isFinite(v) ? v.toFixed(2) : '-');
    return `p50=${f(this.percentile(50))}ms p99=${f(this.percentile(99))}ms max=${f(this.max)}ms (n=${this.n})`;
  }
}

/**
 * Runs the load. opts:
 *   port, clients, seconds,
 *   next(client, n) → {kind, token, body}: the client's n-th request (body: a JSON-RPC object),
 *   judge(kind, status, json) → 'ok' | 'expected' | a string naming the error,
 *   onSecond(elapsedS): called about once a second (sampling RSS, fds).
 * Resolves {byKind: {kind: {hist, ok, expected}}, errors: Map(text → count), requests, elapsedS}.
 */
export async function runLoad({ port, clients, seconds, next, judge, onSecond, timeoutMs = 60000 }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients, maxFreeSockets: clients });
  const byKind = {};
  const errors = new Map();
  let requests = 0;
  const start = nowMs();
  const end = start + seconds * 1000;
  const error = (text) => errors.set(text, (errors.get(text) ?? 0) + 1);

  const send = (token, body) =>
    new Promise((resolve) => {
      const payload = JSON.stringify(body);
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/mcp',
          agent,
          headers: {
            'Content-Type': 'application/json',
            Accept: 'application/json, text/event-stream',
            Authorization: `Bearer ${token}`,
            'Content-Length': Buffer.byteLength(payload),
          },
        },
        (res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            let json;
            try {
              json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
              json = undefined;
            }
            resolve({ status: res.statusCode, json });
          });
          res.on('error', (e) => resolve({ status: 0, err: e.code ?? e.message }));
        },
      );
      req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
      req.on('error', (e) => resolve({ status: 0, err: e.code ?? e.message }));
      req.end(payload);
    });

  async function client(i) {
    for (let n = 0; nowMs() < end; n++) {
      const { kind, token, body } = next(i, n);
      const t = nowMs();
      const r = await send(token, body);
      const ms = nowMs() - t;
      requests++;
      const k = (byKind[kind] ??= { hist: new Histogram(), ok: 0, expected: 0 });
      k.hist.record(ms);
      const verdict = r.status === 0 ? `transport ${r.err}` : judge(kind, r.status, r.json);
      if (verdict === 'ok') k.ok++;
      else if (verdict === 'expected') k.expected++;
      else error(`${kind}: ${verdict}`);
    }
  }

  let ticker;
  if (onSecond) {
    ticker = setInterval(() => onSecond((nowMs() - start) / 1000), 1000);
  }
  await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
  if (ticker) clearInterval(ticker);
  const elapsedS = (nowMs() - start) / 1000;
  return { byKind, errors, requests, elapsedS, agent };
}
