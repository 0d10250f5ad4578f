// Load and soak on loopback: 1,000 concurrent keep-alive clients (one node:http Agent,
// maxSockets 1000) mixing ping, local_read, local_search, local_test (/bin/true in the sandbox)
// and a read of `.env` that must be denied (DENIED_PATH, the one expected denial), spread over
// 100 jobs, for 60 s. Every response is counted: anything but a result or that denial fails the
// test. Printed: requests/s, p50/p99 per kind, the daemon's RSS and open descriptors idle,
// during and after the clients closed. Asserted: no errors; RSS after < idle + 64 MiB; the
// descriptor count returns to the idle count (± 4) once the clients are gone; every sandbox
// is reaped; the store verifies and holds a completion for every call answered.
//
// Long mode (the 10-minute soak):
//   TOOLWARDEN_SOAK_SECONDS=600 node --test tests/reliability/load_soak.test.mjs
// (TOOLWARDEN_SOAK_CLIENTS changes the 1,000.) The daemon's open-file limit is raised with
// prlimit when its soft limit is below what the clients need.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, test } from 'node:test';
import { runLoad } from './lib/load.mjs';
import {
  auditVerify, cleanupTemps, fdCount, figure, mib, mkTemp, nofileFor, nofileLimits, rssKiB, sleep, startLimitDaemon, storeQuery,
  writeFile, zombieChildren,
} from './lib/reliability.mjs';

const SECONDS = Number(process.env.TOOLWARDEN_SOAK_SECONDS ?? 60);
const CLIENTS = Number(process.env.TOOLWARDEN_SOAK_CLIENTS ?? 1000);
const JOBS = 100;

let d;
after(async () => {
  if (d) await d.kill().catch(() => {});
  cleanupTemps();
});

// The mix, in percent of requests.
const MIX = [
  ['ping', 30],
  ['local_read', 30],
  ['local_search', 20],
  ['local_test', 15],
  ['denied_read', 5],
];

test(`${CLIENTS} keep-alive clients for ${SECONDS} s: no errors, RSS and descriptors flat`, { timeout: (SECONDS + 180) * 1000 }, async () => {
  const need = CLIENTS + 512;
  const { soft } = nofileLimits();
  const nofile = soft >= need ? null : nofileFor(Math.max(need, 4096));
  if (soft < need && !nofile) {
    console.log(`# skipped: the open-file hard limit is below ${need}`);
    return;
  }
  if (nofile) console.log(`# daemon started under prlimit --nofile=${nofile} (soft limit here: ${soft})`);
  const base = mkTemp('tw-rel-load-');
  const wt = path.join(base, 'wt');
  writeFile(path.join(wt, 'a.txt'), 'a'.repeat(4095) + '\n');
  writeFile(path.join(wt, '.env'), 'SECRET=1\n');
  for (let i = 0; i < 20; i++) writeFile(path.join(wt, 'src', `m${i}.txt`), `module ${i}\n${i % 4 ? '' : 'TODO: needle\n'}${'code line\n'.repeat(50)}`);
  d = await startLimitDaemon({ base, nofile, config: { commands: [{ id: 'unit', argv: ['/bin/true'], timeout_s: 30 }] } });
  const jobs = [];
  for (let i = 0; i < JOBS; i++) {
    const r = await d.admin('job.create', { worktree: wt, commands: ['unit'] });
    jobs.push(r.result.token);
  }
  // One call of each kind first (sandbox readiness, statement caches), then the idle figures.
  for (const t of [jobs[0]]) {
    await d.callTool(t, 'local_read', { path: 'a.txt' });
    await d.callTool(t, 'local_test', { command: 'unit' });
  }
  d.agent.destroy();
  await sleep(500);
  const pid = d.proc.pid;
  const idle = { rss: rssKiB(pid), fds: fdCount(pid) };

  const bodies = {
    ping: { method: 'ping' },
    local_read: { method: 'tools/call', params: { name: 'local_read', arguments: { path: 'a.txt' } } },
    local_search: { method: 'tools/call', params: { name: 'local_search', arguments: { path: 'src', query: 'needle' } } },
    local_test: { method: 'tools/call', params: { name: 'local_test', arguments: { command: 'unit' } } },
    denied_read: { method: 'tools/call', params: { name: 'local_read', arguments: { path: '.env' } } },
  };
  const wheel = MIX.flatMap(([k, w]) => Array(w).fill(k));
  let id = 0;
  const next = (client) => {
    const kind = wheel[Math.floor(Math.random() * wheel.length)];
    return { kind, token: jobs[client % JOBS], body: { jsonrpc: '2.0', id: ++id, ...bodies[kind] } };
  };
  const judge = (kind, status, json) => {
    if (status !== 200) return `HTTP ${status}`;
    if (json?.error) return `JSON-RPC ${json.error.code} ${json.error.message}`;
    if (kind === 'ping') return json?.result && Object.keys(json.result).length === 0 ? 'ok' : `ping answered ${JSON.stringify(json).slice(0, 100)}`;
    const r = json?.result;
    if (kind === 'denied_read') return r?.isError === true && r.structuredContent?.error === 'DENIED_PATH' ? 'expected' : `.env read answered ${JSON.stringify(r).slice(0, 120)}`;
    if (r?.isError !== false) return `${r?.structuredContent?.error ?? 'no result'}: ${r?.content?.[0]?.text ?? ''}`.slice(0, 160);
    if (kind === 'local_test' && (r.structuredContent?.state !== 'completed' || r.structuredContent?.exit_code !== 0)) {
      return `local_test ${r.structuredContent?.state} exit ${r.structuredContent?.exit_code}`;
    }
    return 'ok';
  };
  const samples = [];
  let peakFds = 0;
  let peakRss = 0;
  let peakZombies = 0;
  const every = Math.max(10, Math.round(SECONDS / 10));
  const onSecond = (s) => {
    const rss = rssKiB(pid);
    const fds = fdCount(pid);
    peakRss = Math.max(peakRss, rss);
    peakFds = Math.max(peakFds, fds);
    peakZombies = Math.max(peakZombies, zombieChildren(pid));
    if (Math.round(s) % every === 0) samples.push(`${Math.round(s)}s ${mib(rss)}MiB/${fds}fds`);
  };
  const res = await runLoad({ port: d.port, clients: CLIENTS, seconds: SECONDS, next, judge, onSecond });
  const loaded = { rss: rssKiB(pid), fds: fdCount(pid) };
  res.agent.destroy();
  // The clients are gone: the daemon closes its side; wait for the count to settle.
  let closed = { rss: rssKiB(pid), fds: fdCount(pid) };
  for (let t = 0; t < 100 && closed.fds > idle.fds + 4; t++) {
    await sleep(100);
    closed = { rss: rssKiB(pid), fds: fdCount(pid) };
  }
  await sleep(500);
  closed = { rss: rssKiB(pid), fds: fdCount(pid) };
  // Every sandbox that ended has been reaped.
  let zombies = zombieChildren(pid);
  for (let t = 0; t < 50 && zombies > 0; t++) {
    await sleep(100);
    zombies = zombieChildren(pid);
  }

  const lines = [];
  lines.push(`load ${CLIENTS} clients × ${res.elapsedS.toFixed(0)} s over ${JOBS} jobs: ${res.requests} requests, ${(res.requests / res.elapsedS).toFixed(0)} req/s`);
  for (const [kind] of MIX) {
    const k = res.byKind[kind];
    if (k) lines.push(`  ${kind.padEnd(13)} ${k.hist.summary()} ok=${k.ok} expected-denials=${k.expected}`);
  }
  lines.push(`  RSS idle ${mib(idle.rss)} MiB, peak ${mib(peakRss)} MiB, end of load ${mib(loaded.rss)} MiB, after close ${mib(closed.rss)} MiB`);
  lines.push(`  fds idle ${idle.fds}, peak ${peakFds}, end of load ${loaded.fds}, after close ${closed.fds}`);
  lines.push(`  unreaped sandbox children: at most ${peakZombies} at a time during the load, ${zombies} after it`);
  lines.push(`  samples: ${samples.join(', ')}`);
  for (const l of lines) figure(l);

  assert.deepEqual([...res.errors.entries()], [], 'errors other than the expected denials');
  assert.ok(d.alive, 'the daemon died under load');
  assert.ok(peakFds >= CLIENTS, `the daemon never held ${CLIENTS} connections at once (peak ${peakFds} fds)`);
  assert.ok(closed.rss < idle.rss + 64 * 1024, `RSS grew from ${mib(idle.rss)} to ${mib(closed.rss)} MiB`);
  assert.equal(zombies, 0, 'sandbox processes left unreaped after the load');
  assert.ok(Math.abs(closed.fds - idle.fds) <= 4, `descriptors: ${idle.fds} idle, ${closed.fds} after the clients closed`);
  for (const kind of ['ping', 'local_read', 'local_search', 'local_test', 'denied_read']) {
    assert.ok((res.byKind[kind]?.hist.n ?? 0) > 0, `no ${kind} request was made`);
  }

  // Every tool call answered is on record with its code.
  const rec = Object.fromEntries(
    storeQuery(d.stateDir, "SELECT json_extract(data, '$.tool') || ':' || json_extract(data, '$.code') AS k, count(*) AS n FROM events WHERE type = 'tool.completed' GROUP BY k").map((r) => [r.k, r.n]),
  );
  const answered = {
    'local_read:OK': res.byKind.local_read.ok + 1,
    'local_search:OK': res.byKind.local_search.ok,
    'local_test:OK': res.byKind.local_test.ok + 1,
    'local_read:DENIED_PATH': res.byKind.denied_read.expected,
  };
  for (const [k, n] of Object.entries(answered)) assert.equal(rec[k] ?? 0, n, `${k}: ${n} answered, ${rec[k] ?? 0} recorded`);
  const v = await auditVerify(d);
  assert.equal(v.code, 0, v.text);
  const errorsLogged = d.stderr.split('\n').filter((l) => / ERROR /.test(l));
  assert.deepEqual(errorsLogged.slice(0, 5), [], 'the daemon logged errors');
  assert.deepEqual(await d.stop(), { code: 0, signal: null });
});
