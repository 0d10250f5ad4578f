// Registered-command integrity (SPEC §9) and `toolwarden doctor` (SPEC §3, §8).
// argv[0] is pinned (SHA-256 + device, inode, size, mtime) when the config is loaded, the
// listed read_paths when the job is created; both are checked right before and right after each
// run → DENIED_INTEGRITY. A group/world-writable argv[0] makes `serve` refuse the config.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BIN, cleanupTemps, mkTemp, run, sleep, startDaemon, twEnv, writeFile } from './lib/harness.mjs';
import { commandEntry, localTest } from './lib/sandbox_harness.mjs';

let base; // 0755, holds bin/ (executables the test owns, outside the worktree) and wt/
let binDir;
let wt;
let d;

const MAKEFILE = 'all:\n\ttrue\n';

/** A private copy of a system binary at bin/<name>, mode 0755. */
function tool(name, src = '/usr/bin/true') {
  const p = path.join(binDir, name);
  fs.copyFileSync(src, p);
  fs.chmodSync(p, 0o755);
  return p;
}

/** Asserts the SPEC §5 denial shape with `code` and no host path outside the worktree in it. */
function assertDenied(resp, code, label) {
  const ctx = `${label}: ${JSON.stringify(resp).slice(0, 800)}`;
  assert.equal(resp.error, undefined, ctx);
  assert.equal(resp.result?.isError, true, ctx);
  assert.equal(resp.result.structuredContent?.error, code, ctx);
  assert.ok(resp.result.content?.[0]?.text?.startsWith(`${code}:`), ctx);
  const text = JSON.stringify(resp.result);
  assert.ok(!text.includes(binDir), `${label}: the reason names a host path outside the worktree: ${text}`);
}

function assertCompleted(r, label, exitCode = 0) {
  const ctx = `${label}: ${JSON.stringify(r.resp).slice(0, 800)}`;
  assert.notEqual(r.isError, true, ctx);
  assert.equal(r.sc?.state, 'completed', ctx);
  assert.equal(r.sc.exit_code, exitCode, ctx);
}

/** Rewrites a file's bytes in place (same inode), optionally restoring its mtime afterwards. */
function rewriteInPlace(p, bytes, { keepMtime = false } = {}) {
  const st = fs.statSync(p);
  const fd = fs.openSync(p, 'r+');
  fs.ftruncateSync(fd, 0);
  fs.writeSync(fd, bytes, 0, bytes.length, 0);
  fs.closeSync(fd);
  if (keepMtime) fs.utimesSync(p, st.atime, st.mtime);
}

/** Replaces a file by rename with a new inode holding the same bytes and mode. */
function replaceSameContent(p) {
  const tmp = `${p}.new`;
  fs.copyFileSync(p, tmp);
  fs.chmodSync(tmp, fs.statSync(p).mode & 0o7777);
  fs.renameSync(tmp, p);
}

before(async () => {
  base = mkTemp('tw-integ-', 0o755);
  binDir = path.join(base, 'bin');
  fs.mkdirSync(binDir, { mode: 0o755 });
  wt = path.join(base, 'wt');
  fs.mkdirSync(wt, { mode: 0o755 });
  writeFile(path.join(wt, 'Makefile'), MAKEFILE);
  writeFile(path.join(wt, 'other.txt'), 'x\n');

  const commands = [
    commandEntry('exe_rewrite', [tool('rewrite')], { timeout_s: 10 }),
    commandEntry('exe_same_bytes_new_inode', [tool('newinode')], { timeout_s: 10 }),
    commandEntry('exe_touch', [tool('touch')], { timeout_s: 10 }),
    commandEntry('exe_rewrite_keep_mtime', [tool('keepmtime')], { timeout_s: 10 }),
    commandEntry('exe_chmod', [tool('chmod')], { timeout_s: 10 }),
    commandEntry('exe_during_run', [tool('duringrun', '/usr/bin/sleep'), '1.5'], { timeout_s: 10 }),
    commandEntry('read_make', ['/usr/bin/cat', 'Makefile'], { timeout_s: 10, read_paths: ['Makefile'] }),
    commandEntry('read_during_run', ['/bin/sh', '-c', 'cat Makefile; sleep 1.5'], { timeout_s: 10, read_paths: ['Makefile'] }),
  ];
  d = await startDaemon({ config: { commands } });
});

after(async () => {
  if (d) await d.stop().catch(() => {});
  cleanupTemps();
});

/** A fresh job granting the given commands on the shared worktree. */
const jobFor = (...commands) => d.createJob({ worktree: wt, commands });

describe('executable integrity (pinned when the config is loaded)', () => {
  test('executable rewritten in place (different bytes) → DENIED_INTEGRITY', async () => {
    const job = await jobFor('exe_rewrite');
    assertCompleted(await localTest(d, job.token, 'exe_rewrite'), 'baseline');
    rewriteInPlace(path.join(binDir, 'rewrite'), fs.readFileSync('/usr/bin/false'));
    assertDenied((await localTest(d, job.token, 'exe_rewrite')).resp, 'DENIED_INTEGRITY', 'after rewrite');
  });

  test('executable replaced by a new inode with identical bytes → DENIED_INTEGRITY (identity is pinned)', async () => {
    const job = await jobFor('exe_same_bytes_new_inode');
    assertCompleted(await localTest(d, job.token, 'exe_same_bytes_new_inode'), 'baseline');
    replaceSameContent(path.join(binDir, 'newinode'));
    assertDenied((await localTest(d, job.token, 'exe_same_bytes_new_inode')).resp, 'DENIED_INTEGRITY', 'after replace');
  });

  test('executable mtime changed, bytes unchanged → DENIED_INTEGRITY', async () => {
    const job = await jobFor('exe_touch');
    assertCompleted(await localTest(d, job.token, 'exe_touch'), 'baseline');
    const p = path.join(binDir, 'touch');
    const later = new Date(Date.now() + 60000);
    fs.utimesSync(p, later, later);
    assertDenied((await localTest(d, job.token, 'exe_touch')).resp, 'DENIED_INTEGRITY', 'after touch');
  });

  test('executable bytes changed with size and mtime restored → DENIED_INTEGRITY (SHA-256 is pinned)', async () => {
    const job = await jobFor('exe_rewrite_keep_mtime');
    assertCompleted(await localTest(d, job.token, 'exe_rewrite_keep_mtime'), 'baseline');
    const p = path.join(binDir, 'keepmtime');
    const bytes = fs.readFileSync(p);
    bytes[bytes.length - 1] ^= 0xff; // same size, different digest
    rewriteInPlace(p, bytes, { keepMtime: true });
    assert.equal(fs.statSync(p).size, bytes.length);
    assertDenied((await localTest(d, job.token, 'exe_rewrite_keep_mtime')).resp, 'DENIED_INTEGRITY', 'after rewrite');
  });

  test('executable made group-writable after load → DENIED_INTEGRITY', async () => {
    const job = await jobFor('exe_chmod');
    assertCompleted(await localTest(d, job.token, 'exe_chmod'), 'baseline');
    fs.chmodSync(path.join(binDir, 'chmod'), 0o775);
    assertDenied((await localTest(d, job.token, 'exe_chmod')).resp, 'DENIED_INTEGRITY', 'after chmod');
  });

  test('executable replaced while the command runs → the result is DENIED_INTEGRITY (checked after the run)', async () => {
    const job = await jobFor('exe_during_run');
    const call = localTest(d, job.token, 'exe_during_run');
    await sleep(500);
    replaceSameContent(path.join(binDir, 'duringrun'));
    const r = await call;
    assertDenied(r.resp, 'DENIED_INTEGRITY', 'replaced during the run');
  });
});

describe('read_paths integrity (pinned when the job is created)', () => {
  test('read path content changed after job creation → DENIED_INTEGRITY; a new job pins the new content', async () => {
    writeFile(path.join(wt, 'Makefile'), MAKEFILE);
    const job = await jobFor('read_make');
    const ok = await localTest(d, job.token, 'read_make');
    assertCompleted(ok, 'baseline');
    assert.equal(ok.sc.stdout, MAKEFILE);
    writeFile(path.join(wt, 'Makefile'), `${MAKEFILE}evil:\n\tcurl x\n`);
    assertDenied((await localTest(d, job.token, 'read_make')).resp, 'DENIED_INTEGRITY', 'after change');
    // restoring the bytes restores the pin's digest; a new job pins whatever is there now
    const job2 = await jobFor('read_make');
    assertCompleted(await localTest(d, job2.token, 'read_make'), 'new job after the change');
    writeFile(path.join(wt, 'Makefile'), MAKEFILE);
  });

  test('read path replaced by a symlink to identical content → DENIED_INTEGRITY', async () => {
    writeFile(path.join(wt, 'Makefile'), MAKEFILE);
    const job = await jobFor('read_make');
    assertCompleted(await localTest(d, job.token, 'read_make'), 'baseline');
    const copy = path.join(base, 'Makefile.copy');
    writeFile(copy, MAKEFILE);
    fs.rmSync(path.join(wt, 'Makefile'));
    fs.symlinkSync(copy, path.join(wt, 'Makefile'));
    try {
      assertDenied((await localTest(d, job.token, 'read_make')).resp, 'DENIED_INTEGRITY', 'after symlink swap');
    } finally {
      fs.rmSync(path.join(wt, 'Makefile'));
      writeFile(path.join(wt, 'Makefile'), MAKEFILE);
    }
  });

  test('read path replaced by a new inode with identical bytes → DENIED_INTEGRITY (identity is pinned)', async () => {
    writeFile(path.join(wt, 'Makefile'), MAKEFILE);
    const job = await jobFor('read_make');
    assertCompleted(await localTest(d, job.token, 'read_make'), 'baseline');
    replaceSameContent(path.join(wt, 'Makefile'));
    assertDenied((await localTest(d, job.token, 'read_make')).resp, 'DENIED_INTEGRITY', 'after replace');
  });

  test('read path mtime changed, bytes unchanged → DENIED_INTEGRITY (identity is pinned)', async () => {
    writeFile(path.join(wt, 'Makefile'), MAKEFILE);
    const job = await jobFor('read_make');
    assertCompleted(await localTest(d, job.token, 'read_make'), 'baseline');
    const later = new Date(Date.now() + 60000);
    fs.utimesSync(path.join(wt, 'Makefile'), later, later);
    assertDenied((await localTest(d, job.token, 'read_make')).resp, 'DENIED_INTEGRITY', 'after touch');
  });

  test('read path changed while the command runs → DENIED_INTEGRITY (checked after the run)', async () => {
    writeFile(path.join(wt, 'Makefile'), MAKEFILE);
    const job = await jobFor('read_during_run');
    const call = localTest(d, job.token, 'read_during_run');
    await sleep(500);
    writeFile(path.join(wt, 'Makefile'), `${MAKEFILE}# changed\n`);
    const r = await call;
    try {
      assertDenied(r.resp, 'DENIED_INTEGRITY', 'changed during the run');
    } finally {
      writeFile(path.join(wt, 'Makefile'), MAKEFILE);
    }
  });

  test('a command not granted to the job → DENIED_COMMAND', async () => {
    const job = await jobFor('read_make');
    assertDenied((await localTest(d, job.token, 'exe_touch')).resp, 'DENIED_COMMAND', 'ungranted');
    assertDenied((await localTest(d, job.token, 'no_such_command')).resp, 'DENIED_COMMAND', 'unknown');
  });

  test('a command whose executable lies inside the worktree cannot be granted (job create exits 1)', async () => {
    const inner = mkTemp('tw-integ2-', 0o755);
    const innerWt = path.join(inner, 'wt');
    fs.mkdirSync(innerWt, { mode: 0o755 });
    const exe = path.join(innerWt, 'tool');
    fs.copyFileSync('/usr/bin/true', exe);
    fs.chmodSync(exe, 0o755);
    const d2 = await startDaemon({ config: { commands: [commandEntry('inside', [exe])] } });
    try {
      const r = await d2.cli(['job', 'create', '--worktree', innerWt, '--command', 'inside']);
      assert.equal(r.code, 1, `job create with an in-worktree executable: ${r.code} ${r.stdout} ${r.stderr}`);
      assert.match(r.stderr, /inside/, r.stderr);
    } finally {
      await d2.stop();
    }
  });
});

describe('config refusal of unsafe executables (`serve` exits 1 naming the command)', () => {
  for (const [label, mode] of [
    ['group-writable', 0o775],
    ['world-writable', 0o757],
  ]) {
    test(`argv[0] ${label} → serve exits 1 naming the command`, async () => {
      const dir = mkTemp('tw-integ-cfg-', 0o755);
      const exe = path.join(dir, 'gw-tool');
      fs.copyFileSync('/usr/bin/true', exe);
      fs.chmodSync(exe, mode);
      const id = `unsafe_${mode.toString(8)}`;
      await assert.rejects(
        startDaemon({ base: dir, config: { commands: [commandEntry('fine', ['/usr/bin/true']), commandEntry(id, [exe])] } }),
        (e) => {
          assert.equal(e.exit?.code, 1, `serve exit: ${JSON.stringify(e.exit)} ${e.stderr}`);
          assert.ok(e.stderr.includes(id), `the error does not name command '${id}': ${e.stderr}`);
          return true;
        },
      );
    });
  }

  test('argv[0] relative → serve exits 1 naming the command', async () => {
    const dir = mkTemp('tw-integ-cfg-', 0o755);
    await assert.rejects(startDaemon({ base: dir, config: { commands: [commandEntry('relative_cmd', ['true'])] } }), (e) => {
      assert.equal(e.exit?.code, 1, `serve exit: ${JSON.stringify(e.exit)} ${e.stderr}`);
      assert.ok(e.stderr.includes('relative_cmd'), e.stderr);
      return true;
    });
  });
});

describe('toolwarden doctor', () => {
  const STATUS_CODE = { full: 0, degraded: 1, unavailable: 2 };
  const FEATURES = ['user_namespaces', 'landlock', 'seccomp', 'mount_api', 'cgroup_v2_delegation', 'overlayfs_in_userns', 'openat2'];
  let env;
  before(() => {
    const dir = mkTemp('tw-doctor-');
    fs.mkdirSync(path.join(dir, 'run'), { mode: 0o700 });
    fs.mkdirSync(path.join(dir, 'state'), { mode: 0o700 });
    env = twEnv({ runtimeDir: path.join(dir, 'run'), stateDir: path.join(dir, 'state'), configPath: path.join(dir, 'config.json') });
  });

  test('doctor --json: canary passed, status full|degraded, exit code matching the status', async () => {
    const r = await run([BIN, 'doctor', '--json'], { env, timeout: 60000 });
    const j = JSON.parse(r.stdout);
    assert.ok(['full', 'degraded'].includes(j.status), `status ${j.status}: ${r.stdout}`);
    assert.equal(r.code, STATUS_CODE[j.status], `exit code ${r.code} does not match status ${j.status}`);
    assert.equal(j.canary?.passed, true, r.stdout);
    const names = j.features.map((f) => f.name);
    for (const f of FEATURES) assert.ok(names.includes(f), `feature ${f} missing from doctor: ${names}`);
    const missing = j.features.filter((f) => !f.available).map((f) => f.name);
    for (const f of j.features.filter((x) => x.required)) assert.equal(f.available, true, `required feature ${f.name} unavailable yet status ${j.status}`);
    if (j.status === 'full') assert.deepEqual(missing, []);
    if (j.status === 'degraded') {
      assert.ok(missing.length > 0, 'degraded without a missing feature');
      for (const m of missing) assert.ok(String(j.missing).includes(m), `"missing" does not name ${m}: ${j.missing}`);
    }
    // this machine: cgroup v2 memory/pids controllers are not delegated
    assert.equal(j.status, 'degraded', `expected degraded on this machine: ${r.stdout}`);
    assert.equal(r.code, 1);
    assert.ok(missing.includes('cgroup_v2_delegation'), r.stdout);
  });

  test('doctor (text): canary passed, the status line and the exit code agree', async () => {
    const r = await run([BIN, 'doctor'], { env, timeout: 60000 });
    const m = /^status: (full|degraded|unavailable)\b(.*)$/m.exec(r.stdout);
    assert.ok(m, `no status line: ${r.stdout}`);
    assert.equal(r.code, STATUS_CODE[m[1]], `exit ${r.code} for status ${m[1]}`);
    assert.match(r.stdout, /^\s*canary\s+passed\b/m, r.stdout);
    assert.equal(m[1], 'degraded', r.stdout);
    assert.match(m[2], /cgroup_v2_delegation/, 'the status line names what is missing');
  });

  test('admin API doctor {} agrees with the CLI', async () => {
    const r = await d.admin('doctor', {});
    assert.equal(r.error, undefined, JSON.stringify(r));
    assert.equal(r.result.status, 'degraded', JSON.stringify(r.result));
    assert.equal(r.result.canary?.passed, true, JSON.stringify(r.result));
  });
});
