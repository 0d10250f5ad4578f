// The state dir on a small tmpfs that fills up (SPEC §5, §10: a call is never answered
// unaudited; the store stays consistent). Two ways to fill it:
//   1. (8 MiB) a filler file takes the last free byte in the middle of a mixed load (reads, searches,
//      edits, local_test): calls fail with JSON-RPC -32603 "the audit store cannot record the
//      call; nothing was run" (edits, local_test: refused before they act, the file keeps its
//      content) or "... cannot record the result" (reads: the result is withheld); the daemon
//      stays up and answers ping; job create is refused with a message; `audit verify` passes;
//      deleting the filler brings service back and sequence numbers continue;
//   2. (2 MiB) the store's own WAL grows until the filesystem is full; the same answers; a restart
//      while full; growing the filesystem (remount) brings service back.
// Needs root (mount); skipped otherwise, with the reason printed.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import {
  assertAnsweredAreRecorded, auditVerify, cleanupTemps, figure, mkTemp, nowMs, sha256, sleep, startLimitDaemon, storeQuery,
  tracedCall, twEnv, writeFile,
} from './lib/reliability.mjs';

const mounts = [];
const daemons = [];
after(async () => {
  for (const d of daemons) await d.kill().catch(() => {});
  for (const m of mounts) spawnSync('umount', ['-l', m]);
  cleanupTemps();
});

// Root with CAP_SYS_ADMIN can mount a tmpfs; anything else skips with the reason.
function cannotMount() {
  if (process.getuid() !== 0) return 'needs root to mount a size-limited tmpfs (run as root to include it)';
  const probe = mkTemp('tw-rel-probe-');
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tw-rel-probe', probe], { encoding: 'utf8' });
  if (r.status !== 0) return `mount -t tmpfs failed: ${r.stderr.trim()} (no CAP_SYS_ADMIN here?)`;
  spawnSync('umount', [probe]);
  return null;
}
const skip = cannotMount();
if (skip) console.log(`# skipped: ${skip}`);

/** A fresh base dir whose state/ is a tmpfs of `size`. */
function tinyStateDir(size) {
  const base = mkTemp('tw-rel-full-');
  const stateDir = path.join(base, 'state');
  fs.mkdirSync(stateDir, { mode: 0o700 });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tw-rel-full', stateDir]);
  mounts.push(stateDir);
  return { base, stateDir };
}

/** Writes 4 KiB blocks to `file` until the filesystem refuses (ENOSPC); resolves the bytes written. */
function fill(file) {
  const fd = fs.openSync(file, 'w');
  const block = Buffer.alloc(4096, 0x5a);
  let bytes = 0;
  try {
    for (;;) bytes += fs.writeSync(fd, block);
  } catch (e) {
    if (e.code !== 'ENOSPC') throw e;
  } finally {
    fs.closeSync(fd);
  }
  return bytes;
}

/** `audit verify` by a CLI whose runtime dir has no daemon: it reads the store directly. */
function offlineVerify(d) {
  const runtimeDir = mkTemp('tw-rel-rt-');
  return auditVerify({ env: twEnv({ runtimeDir, stateDir: d.stateDir, configPath: path.join(runtimeDir, 'none.json') }) });
}

const lsState = (dir) => Object.fromEntries(fs.readdirSync(dir).map((f) => [f, fs.statSync(path.join(dir, f)).size]));
const maxSeqs = (stateDir) =>
  Object.fromEntries(storeQuery(stateDir, "SELECT job_id, max(seq) AS m FROM events WHERE type = 'tool.requested' GROUP BY job_id").map((r) => [r.job_id, r.m]));

describe('a full state filesystem', { skip: skip ?? false }, () => {
  let viaDaemonWhileFull; // `audit verify` runs through the running daemon while the disk was full
  test('a filler takes the last byte mid-load: clear -32603 answers, the daemon stays up, the store verifies, service resumes after the filler is deleted', { timeout: 60_000 }, async () => {
    // 8 MiB: room for the WAL of the calls before the fill (at 2 MiB it would fill by itself).
    const { base, stateDir } = tinyStateDir('8m');
    const wt = path.join(base, 'wt');
    writeFile(path.join(wt, 'a.txt'), 'a'.repeat(4096));
    for (let i = 0; i < 50; i++) writeFile(path.join(wt, 'data', `f${i}.txt`), `x\n${i % 7 ? '' : 'needle\n'}`);
    const editFiles = ['edit/e1.txt', 'edit/e2.txt'];
    for (const f of editFiles) writeFile(path.join(wt, f), `${f} initial\n`);
    const d = await startLimitDaemon({ base, stateDir, config: { commands: [{ id: 'quick', argv: ['/bin/true'], timeout_s: 10 }] } });
    daemons.push(d);
    const job = await d.createJob({ worktree: wt, access: 'write', commands: ['quick'] });

    // phase: 'before' → 'filling' → 'full' → 'freeing' → 'after'
    let phase = 'before';
    let stop = false;
    const answers = [];
    const editLog = new Map(editFiles.map((f) => [f, []])); // per file, in order: {content, kind}
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const loop = async (fn) => {
      for (let n = 0; !stop; n++) {
        const startedIn = phase;
        const a = await fn(n);
        answers.push({ ...a, startedIn, endedIn: phase });
        await sleep(5);
      }
    };
    const call = (name, args) => tracedCall(d, job.token, name, args, { agent, prefix: 'full' });
    const loops = [
      loop(() => call('local_read', { path: 'a.txt' })),
      loop(() => call('local_search', { path: 'data', query: 'needle' })),
      loop(() => call('local_test', { command: 'quick' })),
      ...editFiles.map((f) =>
        loop(async (n) => {
          const content = `${f} edit ${n} ${'z'.repeat(n % 5000)}\n`;
          const a = await call('local_edit', { path: f, content });
          editLog.get(f).push({ content, kind: a.kind });
          return a;
        }),
      ),
    ];

    let filled;
    let filesWhenFull;
    let seqsWhileFull;
    let freedAt;
    try {
      // Some calls first (each grows the WAL by several KiB), then the filler.
      while (answers.length < 100) await sleep(10);
      phase = 'filling';
      const filler = path.join(stateDir, 'filler');
      filled = fill(filler);
      filesWhenFull = lsState(stateDir);
      phase = 'full';
      await sleep(2000);
      // While full: the daemon answers what needs no store, refuses what does, and verifies.
      assert.ok(d.alive, 'the daemon died on a full disk');
      const ping = await d.rpc(job.token, 'ping', {});
      assert.deepEqual(ping.result, {}, 'ping while full');
      const create = await d.cli(['job', 'create', '--worktree', wt]);
      assert.equal(create.code, 1, `job create while full: exit ${create.code} ${create.stdout}${create.stderr}`);
      assert.match(create.stderr, /store cannot record the job/, 'job create while full says why');
      // The store as it is while full, read directly (a CLI with no daemon in its runtime dir),
      // and through the daemon (see the test below).
      const vOffline = await offlineVerify(d);
      assert.equal(vOffline.code, 0, `audit verify of the store while full: ${vOffline.text}`);
      // Through the daemon, 20 times while the load keeps failing commits.
      viaDaemonWhileFull = [];
      for (let i = 0; i < 20; i++) viaDaemonWhileFull.push(await auditVerify(d));
      seqsWhileFull = maxSeqs(stateDir);
      phase = 'freeing';
      fs.unlinkSync(filler);
      phase = 'after';
      freedAt = nowMs();
      await sleep(2000);
    } finally {
      stop = true;
      await Promise.all(loops);
      agent.destroy();
    }

    // Every answer is a tool result or one of the two clear store refusals.
    const odd = answers.filter((a) => !['ok', 'denied', 'store-refused', 'store-unrecorded'].includes(a.kind));
    assert.deepEqual(odd, [], 'answers other than a result or a clear store refusal');
    const denied = answers.filter((a) => a.kind === 'denied');
    assert.deepEqual(denied, [], 'no call of this load is a denial');
    const before = answers.filter((a) => a.endedIn === 'before');
    assert.ok(before.length >= 50 && before.every((a) => a.kind === 'ok'), `before the fill: ${before.length} answers, not all OK`);
    const full = answers.filter((a) => a.startedIn === 'full' && a.endedIn === 'full');
    const refused = full.filter((a) => a.kind !== 'ok');
    assert.ok(refused.length >= 10, `only ${refused.length} of ${full.length} calls were refused while full`);
    // Reads ran and their result is withheld; a tool with effects is refused before it acts,
    // or, when its tool.requested still fitted into the WAL, runs and its result is withheld.
    for (const a of refused) {
      const allowed = a.tool === 'local_read' || a.tool === 'local_search' ? ['store-unrecorded'] : ['store-refused', 'store-unrecorded'];
      assert.ok(allowed.includes(a.kind), `${a.tool} while full: ${JSON.stringify(a)}`);
    }
    const late = answers.filter((a) => a.startedIn === 'after' && a.endedAt > freedAt + 1000);
    assert.ok(late.length >= 10, `only ${late.length} calls in the last second after freeing`);
    assert.deepEqual(late.filter((a) => a.kind !== 'ok').map((a) => a.kind), [], 'service did not resume after the filler was deleted');

    // No edit refused before it ran changed its file: each file holds the last edit that ran.
    for (const f of editFiles) {
      const ran = editLog.get(f).filter((e) => e.kind === 'ok' || e.kind === 'store-unrecorded');
      const refusedEdits = editLog.get(f).filter((e) => e.kind === 'store-refused');
      assert.ok(refusedEdits.length > 0, `no edit of ${f} was refused while full`);
      assert.equal(sha256(fs.readFileSync(path.join(wt, f))), sha256(ran.at(-1).content), `${f} is not the last edit that ran`);
    }

    // The store: every answered call recorded with its code, sequences continue, chain intact.
    const counts = assertAnsweredAreRecorded(stateDir, answers, 'disk full');
    const afterSeqs = storeQuery(
      stateDir,
      `SELECT seq FROM events WHERE type = 'tool.requested' AND job_id = '${job.job_id}' AND json_extract(data, '$.request_id') IN (${late.map((a) => `'${a.id}'`).join(',')})`,
    ).map((r) => r.seq);
    assert.equal(afterSeqs.length, late.length);
    for (const s of afterSeqs) assert.ok(s > seqsWhileFull[job.job_id], `seq ${s} after freeing is not above ${seqsWhileFull[job.job_id]}`);
    assert.deepEqual(await d.stop(), { code: 0, signal: null });
    const v = await auditVerify(d);
    assert.equal(v.code, 0, v.text);
    figure(
      `disk full (filler, 8 MiB tmpfs, ${filled} bytes filled; state files ${JSON.stringify(filesWhenFull)}): ` +
        `${JSON.stringify(counts)}; while full ${refused.length}/${full.length} calls refused clearly, daemon up, verify ok; ` +
        `resumed after the filler was deleted; ${v.out.events} events verify`,
    );
  });

  test('`audit verify` through the daemon works while the disk is full', () => {
    assert.ok(viaDaemonWhileFull, 'the first test did not get that far');
    const failed = viaDaemonWhileFull.filter((v) => v.code !== 0);
    assert.deepEqual(failed, [], `${failed.length} of 20 audit verify runs through the daemon failed while full`);
  });

  test('the WAL itself fills a 2 MiB filesystem: clear answers, a restart while full, service resumes when the filesystem grows', { timeout: 60_000 }, async () => {
    const { base, stateDir } = tinyStateDir('2m');
    const wt = path.join(base, 'wt');
    writeFile(path.join(wt, 'a.txt'), 'a'.repeat(4096));
    writeFile(path.join(wt, 'e.txt'), 'initial\n');
    let d = await startLimitDaemon({ base, stateDir });
    daemons.push(d);
    const job = await d.createJob({ worktree: wt, access: 'write' });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    const answers = [];
    let okBeforeFull = 0;
    // Sequential reads until 30 in a row are refused (the WAL cannot grow any more).
    for (let i = 0, refusedInARow = 0; refusedInARow < 30; i++) {
      assert.ok(i < 5000, 'the 2 MiB filesystem never filled');
      const a = await tracedCall(d, job.token, 'local_read', { path: 'a.txt' }, { agent, prefix: 'wal' });
      answers.push(a);
      if (a.kind === 'ok') {
        assert.equal(refusedInARow, 0, 'a call succeeded between refusals: the store flapped');
        okBeforeFull++;
      } else {
        assert.equal(a.kind, 'store-unrecorded', `read on a full disk: ${JSON.stringify(a)}`);
        refusedInARow++;
      }
    }
    const filesWhenFull = lsState(stateDir);
    const edit = await tracedCall(d, job.token, 'local_edit', { path: 'e.txt', content: 'while full\n' }, { agent, prefix: 'wal' });
    answers.push(edit);
    // Refused before it acted (the file is untouched), or its smaller tool.requested transaction
    // still fitted where a failed one had written, and it ran with its result withheld.
    assert.ok(['store-refused', 'store-unrecorded'].includes(edit.kind), JSON.stringify(edit));
    assert.equal(fs.readFileSync(path.join(wt, 'e.txt'), 'utf8'), edit.kind === 'store-refused' ? 'initial\n' : 'while full\n', `after a ${edit.kind} edit`);
    const vFull = await offlineVerify(d);
    assert.equal(vFull.code, 0, vFull.text);

    // A restart while full: a clean stop, then the daemon starts (the store opens read-only
    // work) and keeps refusing clearly.
    assert.deepEqual(await d.stop(), { code: 0, signal: null }, 'graceful stop while full');
    d = await startLimitDaemon({ base, stateDir });
    daemons.push(d);
    const r2 = await tracedCall(d, job.token, 'local_read', { path: 'a.txt' }, { prefix: 'wal' });
    answers.push(r2);
    assert.equal(r2.kind, 'store-unrecorded', `after a restart while full: ${JSON.stringify(r2)}`);

    // Space returns: the filesystem grows.
    execFileSync('mount', ['-o', 'remount,size=16m', stateDir]);
    const seqsBefore = maxSeqs(stateDir);
    const resumed = [];
    for (let i = 0; i < 20; i++) resumed.push(await tracedCall(d, job.token, i % 2 ? 'local_read' : 'local_edit', i % 2 ? { path: 'a.txt' } : { path: 'e.txt', content: `after ${i}\n` }, { prefix: 'wal' }));
    answers.push(...resumed);
    assert.deepEqual(resumed.map((a) => a.kind), Array(20).fill('ok'), 'service did not resume after the filesystem grew');
    const counts = assertAnsweredAreRecorded(stateDir, answers, 'WAL full');
    const newSeqs = storeQuery(
      stateDir,
      `SELECT seq FROM events WHERE type = 'tool.requested' AND json_extract(data, '$.request_id') IN (${resumed.map((a) => `'${a.id}'`).join(',')})`,
    ).map((r) => r.seq);
    assert.equal(newSeqs.length, 20);
    for (const s of newSeqs) assert.ok(s > seqsBefore[job.job_id], `seq ${s} not above ${seqsBefore[job.job_id]}`);
    agent.destroy();
    assert.deepEqual(await d.stop(), { code: 0, signal: null });
    const v = await auditVerify(d);
    assert.equal(v.code, 0, v.text);
    figure(
      `WAL fills a 2 MiB state fs after ${okBeforeFull} sequential audited reads (files ${JSON.stringify(filesWhenFull)}); ` +
        `${JSON.stringify(counts)}; restart while full ok; resumed after remount to 16 MiB`,
    );
  });
});
