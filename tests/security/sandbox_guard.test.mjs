// Process-tree guard (SPEC §8): no process of a sandbox outlives its run — not after the daemon
// is killed with SIGKILL while sandboxes run, not after `notifications/cancelled` (SPEC §5), not
// after `job revoke` (SPEC §3), not after SIGTERM of the daemon.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { spawn } from 'node:child_process';
import { BIN, cleanupTemps, mkTemp, sleep, startDaemon, writeFile } from './lib/harness.mjs';
import {
  commandEntry,
  descendants,
  exactArgvProcs,
  killMarker,
  markerProcs,
  runEnv,
  stillAlive,
  waitCount,
  waitEmpty,
} from './lib/sandbox_harness.mjs';

const RAND = crypto.randomBytes(3).readUIntBE(0, 3) % 1000000;
const daemons = [];
const markers = [];

/** A marker `sleep` duration unique to this run and purpose (sleep takes decimal seconds). */
function marker(n) {
  const m = `300.${RAND}${n}`;
  markers.push(m);
  return m;
}

/**
 * A registered command holding two marker sleeps (one in the background) with TERM/HUP/INT
 * ignored, so only a real tree kill ends it.
 */
function holdCommand(id, m) {
  return commandEntry(id, ['/bin/sh', '-c', `trap '' TERM HUP INT; sleep ${m} & sleep ${m}; wait`], { timeout_s: 600 });
}

const sleepers = (m) => exactArgvProcs(['sleep', m]);

/** The daemon's process tree with each process's wait channel, for failure messages. */
function describeTree(pid) {
  return descendants(pid)
    .map((p) => ({ ...p, kids: descendants(p.pid).length }))
    // sandbox inits with no payload (stuck in setup) first
    .sort((a, b) => (a.kids === 0 && a.argv[0].endsWith('toolwarden') ? 0 : 1) - (b.kids === 0 && b.argv[0].endsWith('toolwarden') ? 0 : 1))
    .map((p) => {
      let wchan = '';
      try {
        wchan = fs.readFileSync(`/proc/${p.pid}/wchan`, 'utf8');
      } catch {
        /* gone */
      }
      return `${p.pid}<${p.ppid} ${p.state} wchan=${wchan} children=${p.kids} ${p.cmdline.slice(0, 60)}`;
    })
    .join(' | ');
}

function worktree() {
  const wt = mkTemp('tw-guard-wt-', 0o755);
  writeFile(path.join(wt, 'README'), 'guard\n');
  return wt;
}

async function start(config) {
  const d = await startDaemon({ config });
  daemons.push(d);
  return d;
}

after(async () => {
  for (const d of daemons) await d.kill().catch(() => {});
  for (const m of markers) killMarker(m);
  cleanupTemps();
});

describe('sandbox process-tree guard', () => {
  test('kill -9 of the daemon with 10 sandboxes running leaves no sandbox process within 2 s', async () => {
    const m = marker(1);
    const d = await start({ max_concurrent_calls: 16, commands: [holdCommand('hold', m)] });
    const job = await d.createJob({ worktree: worktree(), commands: ['hold'] });
    const calls = [];
    const settled = [];
    for (let i = 0; i < 10; i++) {
      calls.push(
        d.callTool(job.token, 'local_test', { command: 'hold' }, { timeout: 60000 }).then(
          (r) => settled.push({ ok: true, r }) && { ok: true, r },
          (e) => settled.push({ ok: false, e: String(e) }) && { ok: false, e },
        ),
      );
    }
    // All 10 must start; a shortfall is reported at the end, after the guard itself was checked
    // on whatever did start (a sandbox stuck in setup must die with the daemon too).
    const running = await waitCount(() => sleepers(m), 20, 10000);
    const startProblem =
      running.length === 20
        ? null
        : `expected 10 sandboxes x 2 marker sleeps on the host, saw ${running.length}; calls answered meanwhile: ${JSON.stringify(settled).slice(0, 3000)}; daemon tree: ${describeTree(d.proc.pid)}`;
    const tree = descendants(d.proc.pid);
    const treeSleepers = tree.filter((p) => p.argv[0] === 'sleep' && p.argv[1] === m);
    assert.equal(treeSleepers.length, running.length, `the marker sleeps should descend from the daemon: ${tree.map((p) => p.cmdline)}`);

    const daemonPid = d.proc.pid;
    const killedAt = Date.now();
    await d.kill();
    const leftMarker = await waitEmpty(() => [...markerProcs(m), ...stillAlive(tree.filter((p) => p.cmdline.includes(m)))], 2000);
    const leftTree = await waitEmpty(() => stillAlive(tree), Math.max(0, 2000 - (Date.now() - killedAt)));
    assert.deepEqual(
      leftMarker.map((p) => `${p.pid} ppid=${p.ppid} ${p.cmdline}`),
      [],
      `sandbox processes survived kill -9 of daemon ${daemonPid} for more than 2 s`,
    );
    assert.deepEqual(
      leftTree.map((p) => `${p.pid} ${p.cmdline}`),
      [],
      `processes that descended from the killed daemon ${daemonPid} are still alive after 2 s`,
    );
    const results = await Promise.all(calls);
    for (const r of results) {
      assert.equal(r.ok && r.r?.result?.structuredContent?.state === 'completed', false, 'a call completed although its daemon was killed');
    }
    assert.equal(startProblem, null, startProblem ?? '');
  });

  test('concurrent local_test calls all start: 15 rounds of 10 parallel calls complete without a setup hang', async () => {
    const d = await start({ max_concurrent_calls: 16, commands: [commandEntry('quick', ['/bin/sh', '-c', 'echo ok'], { timeout_s: 3 })] });
    const job = await d.createJob({ worktree: worktree(), commands: ['quick'] });
    const bad = [];
    for (let round = 0; round < 15; round++) {
      const rs = await Promise.all(
        Array.from({ length: 10 }, async () => {
          const t0 = Date.now();
          const r = await d.callTool(job.token, 'local_test', { command: 'quick' }, { timeout: 30000 });
          return { ms: Date.now() - t0, sc: r.result?.structuredContent, isError: r.result?.isError };
        }),
      );
      for (const r of rs) {
        if (r.isError || r.sc?.state !== 'completed' || r.sc.stdout !== 'ok\n' || r.sc.exit_code !== 0) {
          bad.push({ round, ms: r.ms, state: r.sc?.state, limit: r.sc?.limit, elapsed_ms: r.sc?.elapsed_ms, exit_code: r.sc?.exit_code, stdout: r.sc?.stdout });
        }
      }
    }
    assert.deepEqual(bad, [], `of 150 concurrent runs of \`echo ok\`, ${bad.length} did not complete (a sandbox that never started reports a wall-clock timeout)`);
  });

  test('notifications/cancelled kills the in-flight local_test sandbox; the call answers CANCELLED', async () => {
    const m = marker(2);
    const d = await start({ commands: [holdCommand('hold', m)] });
    const job = await d.createJob({ worktree: worktree(), commands: ['hold'] });
    const id = `cancel-${RAND}`;
    const call = d.mcpPost(job.token, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'local_test', arguments: { command: 'hold' } } }, { timeout: 60000 });
    const running = await waitCount(() => sleepers(m), 2, 20000);
    assert.equal(running.length, 2, 'the sandbox did not start');
    const tree = descendants(d.proc.pid);

    const note = await d.mcpPost(job.token, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'test' } });
    assert.equal(note.status, 202, `notifications/cancelled: ${note.status} ${note.body}`);
    const sentAt = Date.now();

    const sandboxTree = tree.filter((p) => p.cmdline.includes(m));
    const left = await waitEmpty(() => [...markerProcs(m), ...stillAlive(sandboxTree)], 2000);
    assert.deepEqual(left.map((p) => `${p.pid} ${p.state} ${p.cmdline}`), [], 'the cancelled sandbox still runs after 2 s');

    const r = await call;
    assert.ok(Date.now() - sentAt < 5000, `the cancelled call answered only after ${Date.now() - sentAt} ms`);
    assert.equal(r.status, 200, `cancelled call: HTTP ${r.status} ${r.body}`);
    assert.equal(r.json?.id, id, r.body);
    assert.equal(r.json?.result?.isError, true, r.body);
    assert.equal(r.json.result.structuredContent?.error, 'CANCELLED', r.body);
    assert.ok(r.json.result.content?.[0]?.text?.startsWith('CANCELLED:'), r.body);
    assert.equal(d.alive, true, 'the daemon died');
  });

  test('job revoke during an in-flight local_test: the call answers 401 and its sandbox is gone', async () => {
    const m = marker(3);
    const d = await start({ commands: [holdCommand('hold', m)] });
    const job = await d.createJob({ worktree: worktree(), commands: ['hold'] });
    const call = d.mcpPost(job.token, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'local_test', arguments: { command: 'hold' } } }, { timeout: 60000 });
    const running = await waitCount(() => sleepers(m), 2, 20000);
    assert.equal(running.length, 2, 'the sandbox did not start');

    const sandboxTree = descendants(d.proc.pid).filter((p) => p.cmdline.includes(m));
    const rv = await d.cli(['job', 'revoke', job.job_id]);
    assert.equal(rv.code, 0, `job revoke: ${rv.stderr}`);
    const left = await waitEmpty(() => [...markerProcs(m), ...stillAlive(sandboxTree)], 2000);
    assert.deepEqual(left.map((p) => `${p.pid} ${p.state} ${p.cmdline}`), [], 'the revoked job\'s sandbox still runs after 2 s');

    const r = await call;
    assert.equal(r.status, 401, `in-flight call of a revoked job: HTTP ${r.status} ${r.body}`);
    assert.match(String(r.headers['www-authenticate'] ?? ''), /^Bearer/, 'WWW-Authenticate: Bearer');
    const again = await d.mcpPost(job.token, { jsonrpc: '2.0', id: 8, method: 'ping' });
    assert.equal(again.status, 401, 'the revoked token still works');
  });

  test('SIGTERM of the daemon cancels in-flight local_test calls (CANCELLED) and kills their sandboxes', async () => {
    const m = marker(4);
    const d = await start({ max_concurrent_calls: 8, commands: [holdCommand('hold', m)] });
    const job = await d.createJob({ worktree: worktree(), commands: ['hold'] });
    const calls = [0, 1, 2].map((i) =>
      d.mcpPost(job.token, { jsonrpc: '2.0', id: 100 + i, method: 'tools/call', params: { name: 'local_test', arguments: { command: 'hold' } } }, { timeout: 60000 }),
    );
    const running = await waitCount(() => sleepers(m), 6, 10000);
    const startProblem = running.length === 6 ? null : `3 sandboxes should run (6 marker sleeps), saw ${running.length}; daemon tree: ${describeTree(d.proc.pid)}`;
    const tree = descendants(d.proc.pid);

    d.proc.kill('SIGTERM');
    const results = await Promise.allSettled(calls);
    let timer;
    const exit = await Promise.race([d.exitPromise, new Promise((r) => (timer = setTimeout(() => r('still running'), 10000)))]);
    clearTimeout(timer);
    assert.deepEqual(exit, { code: 0, signal: null }, `daemon exit after SIGTERM: ${d.stderr.slice(-2000)}`);
    const left = await waitEmpty(() => [...markerProcs(m), ...stillAlive(tree)], 2000);
    assert.deepEqual(left.map((p) => p.cmdline), [], 'sandbox processes outlived the daemon\'s SIGTERM shutdown');
    for (const r of results) {
      assert.equal(r.status, 'fulfilled', `an in-flight call got no answer: ${r.reason}`);
      assert.equal(r.value.status, 200, r.value.body);
      assert.equal(r.value.json?.result?.isError, true, r.value.body);
      assert.equal(r.value.json.result.structuredContent?.error, 'CANCELLED', r.value.body);
    }
    assert.equal(startProblem, null, startProblem ?? '');
  });

  test('kill -9 of `toolwarden run` leaves no sandbox process within 2 s', async () => {
    const m = marker(5);
    const wt = worktree();
    const child = spawn(BIN, ['run', '--worktree', wt, '--timeout', '600', '--', '/bin/sh', '-c', `trap '' TERM HUP INT; sleep ${m} & sleep ${m}; wait`], {
      cwd: wt,
      env: runEnv(),
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    const exited = new Promise((r) => child.on('exit', (code, signal) => r({ code, signal })));
    const running = await waitCount(() => sleepers(m), 2, 10000);
    assert.equal(running.length, 2, 'the sandbox did not start');
    const tree = descendants(child.pid);
    child.kill('SIGKILL');
    await exited;
    const left = await waitEmpty(() => [...markerProcs(m), ...stillAlive(tree)], 2000);
    assert.deepEqual(left.map((p) => `${p.pid} ${p.cmdline}`), [], 'sandbox processes outlived a SIGKILLed `toolwarden run`');
  });

  test('`toolwarden run` enforces its 2 s timeout while the reader of its output stalls', async () => {
    // The payload leaves ~600 KB of output (under the 1 MB budget) to a background writer and
    // then sleeps; the caller reads nothing for 6 s. The wall clock must still end the tree at ~2 s.
    const m = marker(6);
    const wt = worktree();
    const inner = `(head -c 600000 /dev/zero &); exec sleep ${m}`;
    const pipeline = `{ ${BIN} run --worktree ${wt} --timeout 2 -- /bin/sh -c '${inner}'; echo "rc=$?" >&2; } | (sleep 6; cat >/dev/null)`;
    const t0 = Date.now();
    let stderr = '';
    const child = spawn('/bin/sh', ['-c', pipeline], { cwd: wt, env: runEnv(), stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr.setEncoding('utf8').on('data', (c) => (stderr += c));
    const exited = new Promise((r) => child.on('exit', (code, signal) => r({ code, signal })));
    const started = await waitCount(() => sleepers(m), 1, 1500);
    assert.equal(started.length, 1, 'the payload did not start');
    await sleep(Math.max(0, 3500 - (Date.now() - t0)));
    const alive = sleepers(m);
    await exited;
    assert.match(stderr, /rc=124/, `toolwarden run exit status: ${stderr}`);
    assert.deepEqual(
      alive.map((p) => `${p.pid} ${p.cmdline}`),
      [],
      'at 3.5 s the payload of a run with --timeout 2 was still alive because its output reader was slow',
    );
  });
});
