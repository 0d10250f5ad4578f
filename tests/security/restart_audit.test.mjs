// Audit chain, sequence numbers across restarts and crashes, token lifecycle, health and
// metrics (SPEC §3-§5, §10).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BIN, cleanupTemps, mkTemp, run, sleep, startDaemon, twEnv, writeFile } from './lib/harness.mjs';

const daemons = [];
after(async () => {
  for (const d of daemons) await d.kill();
  cleanupTemps();
});

async function start(opts) {
  const d = await startDaemon(opts);
  daemons.push(d);
  return d;
}

/** Runs the CLI against a state dir with NO daemon (fresh, empty runtime dir). */
function offline(stateDir, args) {
  const rt = mkTemp('tw-sec-rt-');
  return run([BIN, ...args], { env: twEnv({ runtimeDir: rt, stateDir, configPath: path.join(rt, 'none.json') }) });
}

async function auditEvents(runner, jobId) {
  const args = ['audit', '--json', '--limit', '100000'];
  if (jobId) args.push('--job', jobId);
  const r = await runner(args);
  assert.equal(r.code, 0, `audit --json: ${r.stderr}`);
  const ev = JSON.parse(r.stdout);
  assert.ok(Array.isArray(ev));
  return ev;
}

function requestedSeqs(events, jobId) {
  return events.filter((e) => e.type === 'tool.requested' && e.job_id === jobId).map((e) => e.seq);
}

function assertStrictlyIncreasing(seqs, label) {
  for (let i = 1; i < seqs.length; i++) {
    assert.ok(seqs[i] > seqs[i - 1], `${label}: seq ${seqs[i]} after ${seqs[i - 1]} (${JSON.stringify(seqs)})`);
  }
}

async function readOk(d, token, p = 'hello.txt', agent) {
  const r = await d.callTool(token, 'local_read', { path: p }, agent ? { agent } : {});
  assert.equal(r.result?.isError, false, JSON.stringify(r));
  return r;
}

function sqlite(db, sql) {
  const r = spawnSync('sqlite3', [db], { input: sql, encoding: 'utf8' });
  assert.equal(r.status, 0, `sqlite3: ${r.stderr}`);
  return r.stdout;
}

function copyState(src) {
  const dst = mkTemp('tw-sec-st-');
  for (const f of fs.readdirSync(src)) {
    if (f.startsWith('store.db')) fs.copyFileSync(path.join(src, f), path.join(dst, f));
  }
  return dst;
}

describe('sequence numbers across a restart, and audit verify', () => {
  let base;
  let wt;
  let stateDir;
  let jobId;
  let allEvents;

  before(async () => {
    base = mkTemp('tw-sec-audit-');
    wt = path.join(base, 'wt');
    writeFile(path.join(wt, 'hello.txt'), 'hello\n');
  });

  test('calls before and after a restart get strictly increasing seq', async () => {
    const d1 = await start({ base });
    stateDir = d1.stateDir;
    const job = await d1.createJob({ worktree: wt });
    jobId = job.job_id;
    for (let i = 0; i < 5; i++) await readOk(d1, job.token);
    await d1.callTool(job.token, 'local_read', { path: '../x' }); // a denial is a call too
    assert.deepEqual(await d1.stop(), { code: 0, signal: null });

    const d2 = await start({ base });
    for (let i = 0; i < 5; i++) await readOk(d2, job.token);
    const events = await auditEvents((a) => d2.cli(a), jobId);
    const seqs = requestedSeqs(events, jobId);
    assert.equal(seqs.length, 11, JSON.stringify(seqs));
    assertStrictlyIncreasing(seqs, 'tool.requested');
    assert.ok(seqs.every(Number.isInteger));
    // every tool.completed carries the seq of its request
    const done = events.filter((e) => e.type === 'tool.completed').map((e) => e.seq);
    assert.deepEqual([...done].sort((a, b) => a - b), [...seqs].sort((a, b) => a - b));
    const v = await d2.cli(['audit', 'verify']);
    assert.equal(v.code, 0, v.stdout + v.stderr);
    const vj = JSON.parse(v.stdout);
    assert.equal(vj.ok, true);
    allEvents = await auditEvents((a) => d2.cli(a));
    assert.equal(vj.events, allEvents.length);
    // hash chain fields as documented
    for (let i = 1; i < allEvents.length; i++) assert.equal(allEvents[i].prev_hash, allEvents[i - 1].hash);
    assert.deepEqual(await d2.stop(), { code: 0, signal: null });
  });

  test('audit verify works without a daemon (reads the store directly)', async () => {
    const v = await offline(stateDir, ['audit', 'verify']);
    assert.equal(v.code, 0, v.stdout + v.stderr);
    assert.deepEqual(JSON.parse(v.stdout), { ok: true, events: allEvents.length });
  });

  const middle = () => {
    const ids = allEvents.map((e) => e.id);
    const k = ids[Math.floor(ids.length / 2)];
    assert.ok(ids.includes(k - 1) && ids.includes(k + 1));
    return k;
  };

  async function verifyBroken(st, expectId, label) {
    const v = await offline(st, ['audit', 'verify']);
    assert.equal(v.code, 1, `${label}: verify exit ${v.code}: ${v.stdout}${v.stderr}`);
    const out = JSON.parse(v.stdout);
    assert.equal(out.ok, false, label);
    if (expectId !== undefined) assert.equal(out.first_bad_event, expectId, `${label}: ${v.stdout}`);
    assert.equal(typeof out.reason, 'string');
    return out;
  }

  for (const [col, value] of [
    ['data', `'{"tool":"local_read","tampered":true}'`],
    ['ts', `'2000-01-01T00:00:00.000Z'`],
    ['seq', 'seq + 1000'],
    ['type', `'tool.completed'`],
    ['job_id', `'job_0000000000000000'`],
    ['hash', `'${'0'.repeat(64)}'`],
  ]) {
    test(`an edited row (${col}) → verify exit 1 naming that event`, async () => {
      const st = copyState(stateDir);
      const k = middle();
      sqlite(path.join(st, 'store.db'), `DROP TRIGGER events_no_update;\nUPDATE events SET ${col} = ${value} WHERE id = ${k};\n`);
      await verifyBroken(st, k, `edit ${col}`);
    });
  }

  test('an edited prev_hash → verify exit 1 naming that event', async () => {
    const st = copyState(stateDir);
    const k = middle();
    sqlite(path.join(st, 'store.db'), `DROP TRIGGER events_no_update;\nUPDATE events SET prev_hash = hash WHERE id = ${k};\n`);
    await verifyBroken(st, k, 'prev_hash edit');
  });

  test('a deleted middle row → verify exit 1 naming the row after it', async () => {
    const st = copyState(stateDir);
    const k = middle();
    sqlite(path.join(st, 'store.db'), `DROP TRIGGER events_no_delete;\nDELETE FROM events WHERE id = ${k};\n`);
    await verifyBroken(st, k + 1, 'delete');
  });

  test('a deleted first row → verify exit 1', async () => {
    const st = copyState(stateDir);
    const first = allEvents[0].id;
    sqlite(path.join(st, 'store.db'), `DROP TRIGGER events_no_delete;\nDELETE FROM events WHERE id = ${first};\n`);
    await verifyBroken(st, allEvents[1].id, 'delete first');
  });

  test('a deleted last row → verify exit 1', async () => {
    const st = copyState(stateDir);
    const last = allEvents[allEvents.length - 1].id;
    sqlite(path.join(st, 'store.db'), `DROP TRIGGER events_no_delete;\nDELETE FROM events WHERE id = ${last};\n`);
    await verifyBroken(st, undefined, 'delete last');
  });

  test('two rows swapped → verify exit 1 naming the first of them', async () => {
    const st = copyState(stateDir);
    const k = middle();
    sqlite(
      path.join(st, 'store.db'),
      `DROP TRIGGER events_no_update;\nUPDATE events SET id = -1 WHERE id = ${k};\nUPDATE events SET id = ${k} WHERE id = ${k + 1};\nUPDATE events SET id = ${k + 1} WHERE id = -1;\n`,
    );
    await verifyBroken(st, k, 'swap');
  });

  test('the untouched original still verifies', async () => {
    const v = await offline(stateDir, ['audit', 'verify']);
    assert.equal(v.code, 0, v.stdout + v.stderr);
  });
});

describe('kill -9 during a burst of calls', () => {
  test('the store verifies and sequences continue above the old high-water mark (3 crashes)', { timeout: 60000 }, async () => {
    const base = mkTemp('tw-sec-crash-');
    const wt = path.join(base, 'wt');
    writeFile(path.join(wt, 'hello.txt'), 'hello\n');
    let d = await start({ base });
    const job = await d.createJob({ worktree: wt });
    let seenBefore = 0;
    for (const killAfter of [3, 40, 150]) {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
      let answered = 0;
      const calls = Array.from({ length: 400 }, () =>
        d.callTool(job.token, 'local_read', { path: 'hello.txt' }, { agent }).then((r) => {
          answered++;
          return r;
        }),
      );
      while (answered < killAfter) await sleep(1);
      d.proc.kill('SIGKILL');
      const results = await Promise.allSettled(calls);
      agent.destroy();
      assert.equal((await d.exitPromise).signal, 'SIGKILL');
      const answeredOk = results.filter((r) => r.status === 'fulfilled').length;
      assert.ok(answeredOk >= killAfter && answeredOk < 400, `answered ${answeredOk} of 400 before the kill`);

      // offline: the store opens and verifies even with a stale endpoint.json / admin.sock around
      const vOff = await run([BIN, 'audit', 'verify'], { env: d.env });
      assert.equal(vOff.code, 0, `verify after kill -9 (#${killAfter}): ${vOff.stdout}${vOff.stderr}`);
      const before = await auditEvents((a) => run([BIN, ...a], { env: d.env }), job.job_id);
      const seqsBefore = requestedSeqs(before, job.job_id);
      assert.ok(seqsBefore.length - seenBefore >= answeredOk, `${seqsBefore.length - seenBefore} requests recorded, ${answeredOk} answered`);
      assertStrictlyIncreasing(seqsBefore, 'before restart');
      const highWater = Math.max(...seqsBefore);
      const lastSeq = Number(sqlite(path.join(d.stateDir, 'store.db'), `SELECT last_seq FROM jobs WHERE id = '${job.job_id}';`).trim());
      assert.ok(lastSeq >= highWater, `jobs.last_seq ${lastSeq} below the recorded ${highWater}`);

      d = await start({ base });
      for (let i = 0; i < 5; i++) await readOk(d, job.token);
      const afterEv = await auditEvents((a) => d.cli(a), job.job_id);
      const seqs = requestedSeqs(afterEv, job.job_id);
      assertStrictlyIncreasing(seqs, 'after restart');
      assert.equal(new Set(seqs).size, seqs.length, 'a sequence number was reused');
      const fresh = seqs.slice(seqsBefore.length);
      assert.equal(fresh.length, 5);
      for (const s of fresh) assert.ok(s > highWater, `seq ${s} not above the old high-water mark ${highWater}`);
      const v = await d.cli(['audit', 'verify']);
      assert.equal(v.code, 0, v.stdout + v.stderr);
      assert.equal(JSON.parse(v.stdout).ok, true);
      seenBefore = seqs.length;
    }
    assert.deepEqual(await d.stop(), { code: 0, signal: null });
  });
});

describe('token lifecycle, health and metrics', () => {
  let d;
  let wt;
  before(async () => {
    const base = mkTemp('tw-sec-tok-');
    wt = path.join(base, 'wt');
    writeFile(path.join(wt, 'hello.txt'), 'hello\n');
    d = await start({ base });
  });

  async function assert401(token, label) {
    for (const body of [
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'local_read', arguments: { path: 'hello.txt' } } },
    ]) {
      const r = await d.mcpPost(token, body);
      assert.equal(r.status, 401, `${label}: ${body.method} answered ${r.status} ${r.body}`);
      assert.match(r.headers['www-authenticate'] ?? '', /^Bearer\b/, `${label}: WWW-Authenticate ${r.headers['www-authenticate']}`);
      assert.ok(!r.body.includes('hello\\n'), `${label}: content leaked`);
    }
  }

  test('job revoke → the token gets 401 with WWW-Authenticate: Bearer', async () => {
    const job = await d.createJob({ worktree: wt });
    await readOk(d, job.token);
    const r = await d.cli(['job', 'revoke', job.job_id]);
    assert.equal(r.code, 0, r.stderr);
    await assert401(job.token, 'revoked');
    const show = await d.cli(['job', 'show', job.job_id]);
    assert.equal(show.code, 0, show.stderr);
    assert.notEqual(JSON.parse(show.stdout).state, 'live');
  });

  test('job renew → old token 401, new token works, generation 2', async () => {
    const job = await d.createJob({ worktree: wt });
    assert.equal(job.generation, 1);
    await readOk(d, job.token);
    const r = await d.cli(['job', 'renew', job.job_id]);
    assert.equal(r.code, 0, r.stderr);
    const renewed = JSON.parse(r.stdout);
    assert.equal(renewed.job_id, job.job_id);
    assert.equal(renewed.generation, 2);
    assert.notEqual(renewed.token, job.token);
    assert.equal(renewed.mcp_url, d.mcpUrl);
    await assert401(job.token, 'old generation');
    const ok = await readOk(d, renewed.token);
    assert.equal(ok.result.structuredContent.content, 'hello\n');
    // renewing again kills generation 2
    const r3 = JSON.parse((await d.cli(['job', 'renew', job.job_id])).stdout);
    assert.equal(r3.generation, 3);
    await assert401(renewed.token, 'generation 2 after a second renew');
    await readOk(d, r3.token);
  });

  test('expired (--ttl 1, wait 2.2 s) → 401', async () => {
    const job = await d.createJob({ worktree: wt, ttl: 1 });
    await sleep(2200);
    await assert401(job.token, 'expired');
  });

  test('tokens that were never issued, or mangled → 401', async () => {
    const job = await d.createJob({ worktree: wt });
    for (const t of ['x', job.token.slice(0, -1), `${job.token}A`, job.token.toLowerCase() === job.token ? job.token.toUpperCase() : job.token.toLowerCase()]) {
      await assert401(t, `token ${t.slice(0, 8)}…`);
    }
  });

  test('GET /healthz over admin.sock → 200 {"status":"ok"}', async () => {
    const r = await d.adminHttp('GET', '/healthz');
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(r.json, { status: 'ok' });
  });

  test('GET /metrics over admin.sock has the documented series', async () => {
    const job = await d.createJob({ worktree: wt });
    await readOk(d, job.token);
    const r = await d.adminHttp('GET', '/metrics');
    assert.equal(r.status, 200, r.body);
    assert.match(r.headers['content-type'] ?? '', /^text\/plain/);
    const val = (re) => {
      const m = r.body.match(re);
      assert.ok(m, `metrics lack ${re}:\n${r.body}`);
      return Number(m[1]);
    };
    assert.ok(val(/^toolwarden_http_requests_total\{status="200"\} (\d+(?:\.\d+)?)$/m) >= 1);
    assert.ok(val(/^toolwarden_http_requests_total\{status="401"\} (\d+(?:\.\d+)?)$/m) >= 1);
    assert.ok(val(/^toolwarden_tool_calls_total\{tool="local_read",code="OK"\} (\d+(?:\.\d+)?)$/m) >= 1);
    const live = val(/^toolwarden_jobs_live (\d+(?:\.\d+)?)$/m);
    const list = JSON.parse((await d.cli(['job', 'list', '--json'])).stdout);
    assert.equal(live, list.filter((j) => j.state === 'live').length, `jobs_live ${live} vs ${JSON.stringify(list.map((j) => j.state))}`);
  });
});
