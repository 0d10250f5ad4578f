// store.db busy or locked by an outside process while calls run (SPEC §10: WAL, a busy
// timeout; §5: a call is never answered unaudited). The outside process is the sqlite3 CLI:
//   - a read transaction held for 3 s (`BEGIN; SELECT …`): in WAL mode it blocks no writer, so
//     every call succeeds and is on record;
//   - `BEGIN EXCLUSIVE` for 2 s, shorter than the daemon's 5 s busy timeout: calls wait behind
//     it and then succeed;
//   - `BEGIN EXCLUSIVE` for 12 s, longer than twice the busy timeout: the store's writer gives
//     up on a commit after 5 s, so the calls waiting for it fail with JSON-RPC -32603 "the audit
//     store cannot record …" (never an unaudited OK; the next batch waits anew), edits refused
//     that way leave their file untouched, and service resumes once the lock is gone.
// In every case: each call answered with a result has its tool.requested and tool.completed
// with the same code, and the chain verifies.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  assertAnsweredAreRecorded, auditVerify, cleanupTemps, figure, latencySummary, mkTemp, nowMs, sha256, sleep, startLimitDaemon,
  tracedCall, writeFile,
} from './lib/reliability.mjs';

const holders = [];
let d;
after(async () => {
  for (const h of holders) h.kill();
  if (d) await d.kill().catch(() => {});
  cleanupTemps();
});

/** A sqlite3 CLI session on a database; exec() runs SQL and resolves once it has been run. */
class SqliteSession {
  constructor(db) {
    // Its own busy timeout: the daemon holds the write lock for a moment at every commit.
    this.proc = spawn('sqlite3', ['-cmd', '.timeout 10000', db], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.out = '';
    this.err = '';
    this.n = 0;
    this.proc.stdout.setEncoding('utf8').on('data', (s) => (this.out += s));
    this.proc.stderr.setEncoding('utf8').on('data', (s) => (this.err += s));
    holders.push(this);
  }

  async exec(sql, ms = 10000) {
    const mark = `done-${++this.n}`;
    this.proc.stdin.write(`${sql}\nSELECT '${mark}';\n`);
    const deadline = Date.now() + ms;
    while (!this.out.includes(mark)) {
      if (this.err) throw new Error(`sqlite3: ${this.err}`);
      if (Date.now() > deadline) throw new Error(`sqlite3 did not run ${sql} within ${ms} ms`);
      await sleep(5);
    }
  }

  async close() {
    this.proc.stdin.end();
    await new Promise((r) => this.proc.once('exit', r));
  }

  kill() {
    if (this.proc.exitCode === null) this.proc.kill('SIGKILL');
  }
}

describe('an outside process holds store.db', () => {
  let wt;
  let job;
  const editFiles = ['edit/e1.txt', 'edit/e2.txt'];
  const viaDaemon = {}; // `audit verify` through the daemon during each lock

  before(async () => {
    const base = mkTemp('tw-rel-lock-');
    wt = path.join(base, 'wt');
    writeFile(path.join(wt, 'a.txt'), 'a'.repeat(4096));
    for (let i = 0; i < 50; i++) writeFile(path.join(wt, 'data', `f${i}.txt`), `x\n${i % 7 ? '' : 'needle\n'}`);
    for (const f of editFiles) writeFile(path.join(wt, f), `${f} initial\n`);
    d = await startLimitDaemon({ base, config: { commands: [{ id: 'quick', argv: ['/bin/true'], timeout_s: 10 }] } });
    job = await d.createJob({ worktree: wt, access: 'write', commands: ['quick'] });
  });

  /**
   * Runs a mixed load (reads, searches, local_test, two edit writers) around `during()`: 500 ms
   * before, then during(), then `tailMs` after. Resolves {answers, editLog, t0, t1} where t0/t1
   * bracket during().
   */
  async function aroundLoad(label, during, tailMs = 1500) {
    let stop = false;
    const answers = [];
    const editLog = new Map(editFiles.map((f) => [f, []]));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const loop = async (fn) => {
      for (let n = 0; !stop; n++) {
        answers.push(await fn(n));
        await sleep(5);
      }
    };
    const call = (name, args) => tracedCall(d, job.token, name, args, { agent, prefix: label, timeout: 30000 });
    const loops = [
      loop(() => call('local_read', { path: 'a.txt' })),
      loop(() => call('local_search', { path: 'data', query: 'needle' })),
      loop(() => call('local_test', { command: 'quick' })),
      ...editFiles.map((f) =>
        loop(async (n) => {
          const content = `${f} ${label} ${n}\n`;
          const a = await call('local_edit', { path: f, content });
          editLog.get(f).push({ content, kind: a.kind });
          return a;
        }),
      ),
    ];
    let t0;
    let t1;
    try {
      await sleep(500);
      t0 = nowMs();
      await during();
      t1 = nowMs();
      await sleep(tailMs);
    } finally {
      stop = true;
      await Promise.all(loops);
      agent.destroy();
    }
    const odd = answers.filter((a) => !['ok', 'store-refused', 'store-unrecorded'].includes(a.kind));
    assert.deepEqual(odd, [], `${label}: answers other than OK or a clear store refusal`);
    // Each file holds the last of its edits that ran (refused ones never touched it).
    for (const f of editFiles) {
      const ran = editLog.get(f).filter((e) => e.kind === 'ok' || e.kind === 'store-unrecorded');
      assert.equal(sha256(fs.readFileSync(path.join(wt, f))), sha256(ran.at(-1).content), `${label}: ${f} is not its last edit that ran`);
    }
    const counts = assertAnsweredAreRecorded(d.stateDir, answers, label);
    assert.ok(d.alive, `${label}: the daemon died`);
    return { answers, counts, t0, t1 };
  }

  test('a read transaction held for 3 s: every call succeeds and is on record', { timeout: 60_000 }, async () => {
    const s = new SqliteSession(path.join(d.stateDir, 'store.db'));
    const { answers, counts } = await aroundLoad('reader', async () => {
      await s.exec('BEGIN; SELECT count(*) FROM events;');
      await sleep(1000);
      viaDaemon.reader = await auditVerify(d);
      await sleep(2000);
      await s.exec('COMMIT;');
    });
    await s.close();
    assert.deepEqual(Object.keys(counts), ['ok'], `with a reader: ${JSON.stringify(counts)}`);
    assert.equal(viaDaemon.reader.code, 0, `audit verify through the daemon with a reader: ${viaDaemon.reader.text}`);
    figure(`outside read transaction 3 s: ${answers.length} calls, all OK and recorded, ${latencySummary(answers.map((a) => a.ms))}`);
  });

  test('BEGIN EXCLUSIVE for 2 s (busy timeout 5 s): calls wait and succeed, all on record', { timeout: 60_000 }, async () => {
    const s = new SqliteSession(path.join(d.stateDir, 'store.db'));
    const { answers, counts } = await aroundLoad('short-lock', async () => {
      await s.exec('BEGIN EXCLUSIVE;');
      await sleep(2000);
      await s.exec('COMMIT;');
    });
    await s.close();
    assert.deepEqual(Object.keys(counts), ['ok'], `behind a 2 s lock: ${JSON.stringify(counts)}`);
    const waited = Math.max(...answers.map((a) => a.ms));
    assert.ok(waited >= 1500, `no call waited behind the lock (longest ${waited.toFixed(0)} ms): was it held?`);
    figure(`outside BEGIN EXCLUSIVE 2 s: ${answers.length} calls, all OK and recorded, longest ${waited.toFixed(0)} ms`);
  });

  test('BEGIN EXCLUSIVE for 12 s: calls fail with a clear -32603, none answered unaudited, service resumes', { timeout: 60_000 }, async () => {
    const s = new SqliteSession(path.join(d.stateDir, 'store.db'));
    let released;
    const { answers, counts } = await aroundLoad(
      'long-lock',
      async () => {
        const start = nowMs();
        await s.exec('BEGIN EXCLUSIVE;');
        await sleep(1000);
        const verifying = auditVerify(d); // through the daemon, while the lock is held
        await sleep(Math.max(0, 12000 - (nowMs() - start)));
        await s.exec('COMMIT;');
        released = nowMs();
        viaDaemon.locked = await verifying;
      },
      3000,
    );
    await s.close();
    // Two commits gave up (at about 5 s and 10 s), each failing the calls of its batch after
    // waiting the busy timeout.
    const refused = answers.filter((a) => a.kind !== 'ok');
    assert.ok(refused.length >= 2, `only ${refused.length} calls were refused during a 12 s lock: ${JSON.stringify(counts)}`);
    for (const a of refused) assert.ok(a.ms >= 4500, `a call was refused after ${a.ms.toFixed(0)} ms, before the 5 s busy timeout`);
    // Once the lock is gone, a call that starts then succeeds (the first batch after it may
    // still be one that waited and gave up just before the release).
    const late = answers.filter((a) => a.endedAt - a.ms > released + 500);
    assert.ok(late.length >= 10, `only ${late.length} calls started after the release`);
    assert.deepEqual(late.filter((a) => a.kind !== 'ok').map((a) => a.kind), [], 'service did not resume after the lock');
    const v = await auditVerify(d);
    assert.equal(v.code, 0, v.text);
    figure(
      `outside BEGIN EXCLUSIVE 12 s: ${JSON.stringify(counts)} over ${answers.length} calls; refused calls took ` +
        `${latencySummary(refused.map((a) => a.ms))}; all OK answers recorded; resumed after release; verify ok (${v.out.events} events)`,
    );
  });

  test('`audit verify` through the daemon works while an outside process holds the write lock', () => {
    assert.ok(viaDaemon.locked, 'the lock test did not get that far');
    assert.equal(viaDaemon.locked.code, 0, viaDaemon.locked.text);
  });
});
