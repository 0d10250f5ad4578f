// Probes (SPEC §12) over the admin API and the CLI: verdicts that only an independent oracle
// decides, runs that depend on the snapshot and never on the worktree as it is now, executables
// that never come from the snapshot, overlays that never pass through a symlink, a disk budget
// that refuses before anything is written, and a crash that leaks no reservation.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import net from 'node:net';
import { cleanupTemps, Daemon, mkTemp, sleep, startDaemon, twEnv, writeFile } from './lib/harness.mjs';

const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');
/** JSON with object keys sorted at every level: what the plan digest is computed over. */
const canonical = (v) =>
  Array.isArray(v)
    ? `[${v.map(canonical).join(',')}]`
    : v && typeof v === 'object'
      ? `{${Object.keys(v)
          .sort()
          .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
          .join(',')}}`
      : JSON.stringify(v);
const daemons = [];
after(async () => {
  for (const d of daemons) await d.kill();
  cleanupTemps();
});

const BUGGY_LIB = 'add() { echo $(($1 - $2)); }\n';
const FIXED_LIB = 'add() { echo $(($1 + $2)); }\n';
const TEST_SH = '. ./lib.sh\nif [ "$(add 2 2)" = 4 ]; then echo PASS; else echo FAIL; exit 1; fi\n';

async function start(opts) {
  const d = await startDaemon(opts);
  daemons.push(d);
  return d;
}

/** The admin call's result; throws with the refusal's message. */
async function admin(d, method, params) {
  const r = await d.admin(method, params);
  if (r.error) {
    const e = new Error(r.error.message);
    e.refusal = r.error.message;
    throw e;
  }
  return r.result;
}

/** The SPEC code a refused admin call answered with ("CODE: reason"). */
async function refusal(d, method, params) {
  const r = await d.admin(method, params);
  assert.ok(r.error, `${method} was not refused: ${JSON.stringify(r.result)?.slice(0, 300)}`);
  return r.error.message.split(':')[0];
}

async function auditEvents(d) {
  const r = await d.cli(['audit', '--json', '--limit', '100000']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

function sqlite(db, sql) {
  const r = spawnSync('sqlite3', [db], { input: sql, encoding: 'utf8' });
  assert.equal(r.status, 0, `sqlite3: ${r.stderr}`);
  return r.stdout.trim();
}

const exitOracle = (expected, extra = {}) => ({
  type: 'exit_code',
  expected,
  source: 'user_requirement',
  reference: 'README: add(2, 2) is 4',
  ...extra,
});

describe('probes through the admin API', () => {
  let d;
  let wt;
  let outside;
  let snap;
  const plan = (fields) =>
    admin(d, 'probe.plan', {
      snapshot_id: snap.snapshot_id,
      hypothesis: 'add() is broken',
      command: ['sh', 'test.sh'],
      working_directory: '.',
      oracle: exitOracle(1),
      policy_id: 'default',
      ...fields,
    });
  const run = (probe) => admin(d, 'probe.run', { probe_id: probe.probe_id });

  before(async () => {
    const base = mkTemp();
    wt = path.join(base, 'wt');
    outside = path.join(base, 'outside');
    writeFile(path.join(wt, 'lib.sh'), BUGGY_LIB);
    writeFile(path.join(wt, 'test.sh'), TEST_SH, 0o755);
    writeFile(path.join(wt, 'sub', 'note.txt'), 'note\n');
    writeFile(path.join(outside, 'secret.txt'), 'TOP-SECRET-CANARY\n');
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(wt, 'link'));
    fs.symlinkSync(outside, path.join(wt, 'linkdir'));
    writeFile(path.join(wt, '.git', 'config'), '[core]\n');
    d = await start({
      base,
      config: {
        probe_policies: [
          { id: 'default', timeout_s: 20, max_output_bytes: 65536 },
          { id: 'short', timeout_s: 1, max_output_bytes: 4096 },
          { id: 'tiny', timeout_s: 10, max_output_bytes: 64 },
          { id: 'listed', allowed_executables: [path.join(wt, 'test.sh')] },
        ],
      },
    });
    const r = await d.cli(['snapshot', 'capture', '--worktree', wt]);
    assert.equal(r.code, 0, r.stderr);
    snap = JSON.parse(r.stdout);
  });

  test('a capture records the regular files and skips symlinks and sensitive names', () => {
    assert.match(snap.snapshot_id, /^snap_[0-9a-f]{16}$/);
    assert.equal(snap.files, 3);
    assert.equal(snap.skipped.symlinks, 2);
    assert.equal(snap.skipped.sensitive, 1);
    assert.equal(snap.bytes, BUGGY_LIB.length + TEST_SH.length + 'note\n'.length);
    assert.match(snap.manifest_sha256, /^[0-9a-f]{64}$/);
  });

  test('a probe supports a claim, with provenance and durable events', async () => {
    const p = await plan({ claim_id: 'claim-1' });
    assert.match(p.probe_id, /^probe_[0-9a-f]{16}$/);
    assert.equal(p.plan_sha256, sha256(canonical(p.plan)), 'the digest is over the canonical plan');
    const dash = fs.realpathSync('/bin/sh');
    assert.equal(p.plan.executable.path, dash);
    assert.equal(p.plan.executable.sha256, sha256(fs.readFileSync(dash)));
    const r = await run(p);
    assert.equal(r.state, 'completed');
    assert.equal(r.verdict, 'supports', JSON.stringify(r));
    assert.equal(r.exit_code, 1);
    assert.equal(r.stdout, 'FAIL\n');
    assert.equal(r.stdout_sha256, sha256('FAIL\n'));
    assert.equal(r.oracle.passed, true);
    assert.equal(r.plan_sha256, p.plan_sha256);
    const prov = r.provenance;
    assert.equal(prov.policy_id, 'default');
    assert.match(prov.policy_sha256, /^[0-9a-f]{64}$/);
    assert.equal(prov.plan_sha256, p.plan_sha256);
    assert.equal(prov.snapshot_sha256, snap.manifest_sha256);
    assert.deepEqual(prov.executable, p.plan.executable);
    assert.match(prov.sandbox_sha256, /^[0-9a-f]{64}$/);
    assert.equal(prov.canary.passed, true);
    const events = (await auditEvents(d)).filter((e) => e.data?.probe_id === p.probe_id);
    assert.deepEqual(
      events.map((e) => e.type),
      ['probe.planned', 'probe.started', 'probe.completed'],
    );
    assert.equal(events[2].data.verdict, 'supports');
    assert.equal(events[2].data.run_id, r.run_id);
    for (const e of events) assert.ok(!JSON.stringify(e).includes('FAIL'), 'output in the audit log');
  });

  test('a probe refutes a claim; an intervention is applied onto the snapshot', async () => {
    const p = await plan({ intervention: { 'lib.sh': FIXED_LIB } });
    const r = await run(p);
    assert.equal(r.verdict, 'refutes', JSON.stringify(r));
    assert.equal(r.exit_code, 0);
    assert.equal(r.stdout, 'PASS\n');
    // stdout_contains with swapped verdicts: "PASS" found refutes the claim.
    const q = await plan({
      intervention: { 'lib.sh': FIXED_LIB },
      oracle: {
        type: 'stdout_contains',
        expected: 'PASS',
        source: 'historical_regression',
        reference: 'passed at v1.2',
        pass_verdict: 'refutes',
        fail_verdict: 'supports',
      },
    });
    assert.equal((await run(q)).verdict, 'refutes');
  });

  test('inconclusive: the oracle source is not independent of the model', async () => {
    const p = await plan({ oracle: { type: 'exit_code', expected: 1, source: 'model_assertion' } });
    const r = await run(p);
    assert.equal(r.state, 'completed');
    assert.equal(r.oracle.passed, true, 'the oracle itself passed');
    assert.equal(r.verdict, 'inconclusive');
    assert.match(r.reason, /not independent/);
  });

  test('inconclusive: a truncated witness never passes', async () => {
    const p = await plan({
      command: ['sh', '-c', 'echo PASS; yes filler'],
      policy_id: 'tiny',
      oracle: { type: 'stdout_contains', expected: 'PASS', source: 'user_requirement', reference: 'spec' },
    });
    const r = await run(p);
    assert.equal(r.state, 'output_limit');
    assert.equal(r.truncated, true);
    assert.ok(r.stdout.startsWith('PASS'), 'the expected text is in what was kept');
    assert.equal(r.verdict, 'inconclusive');
    assert.match(r.reason, /truncated/);
  });

  test('inconclusive: a timeout kills the run', async () => {
    const p = await plan({ command: ['sleep', '30'], policy_id: 'short', oracle: exitOracle(0) });
    const t0 = Date.now();
    const r = await run(p);
    assert.equal(r.state, 'timeout');
    assert.equal(r.verdict, 'inconclusive');
    assert.ok(Date.now() - t0 < 10000, 'the 1 s policy timeout held');
  });

  test('the same probe twice gives the same verdict, and the worktree changed after capture changes nothing', async () => {
    const p = await plan({});
    const again = await plan({});
    assert.equal(again.plan_sha256, p.plan_sha256, 'the same plan, the same digest');
    assert.notEqual(again.probe_id, p.probe_id);
    const first = await run(p);
    // The worktree now says the bug is fixed, and its test is gone: the snapshot is what runs.
    fs.writeFileSync(path.join(wt, 'lib.sh'), FIXED_LIB);
    fs.rmSync(path.join(wt, 'test.sh'));
    try {
      const second = await run(p);
      assert.equal(second.verdict, first.verdict);
      assert.equal(second.verdict, 'supports');
      assert.equal(second.stdout_sha256, first.stdout_sha256);
      assert.equal(second.plan_sha256, first.plan_sha256);
      assert.equal(second.provenance.sandbox_sha256, first.provenance.sandbox_sha256);
      assert.notEqual(second.run_id, first.run_id);
      const shown = await admin(d, 'probe.get', { probe_id: p.probe_id });
      assert.deepEqual(
        shown.runs.map((r) => [r.run_id, r.verdict]),
        [
          [first.run_id, 'supports'],
          [second.run_id, 'supports'],
        ],
      );
      assert.deepEqual(shown.running, []);
    } finally {
      fs.writeFileSync(path.join(wt, 'lib.sh'), BUGGY_LIB);
      writeFile(path.join(wt, 'test.sh'), TEST_SH, 0o755);
    }
  });

  test('an executable from the snapshot is refused', async () => {
    const inside = path.join(wt, 'test.sh');
    assert.equal(await refusal(d, 'probe.plan', planParams({ command: ['./test.sh'] })), 'DENIED_COMMAND');
    assert.equal(await refusal(d, 'probe.plan', planParams({ command: [inside] })), 'DENIED_COMMAND');
    // Even a policy that lists it cannot make the worktree a source of executables.
    assert.equal(
      await refusal(d, 'probe.plan', planParams({ command: [inside], policy_id: 'listed' })),
      'DENIED_COMMAND',
    );
    // A bare name is looked up in the system directories only, never in the snapshot.
    assert.equal(await refusal(d, 'probe.plan', planParams({ command: ['test.sh'] })), 'NOT_FOUND');
    assert.equal(await refusal(d, 'probe.plan', planParams({ policy_id: 'nope' })), 'DENIED_ARGUMENTS');
  });

  test('a symlink in the worktree is not captured and never followed', async () => {
    const p = await plan({
      command: ['sh', '-c', 'cat link linkdir/secret.txt; test -e link || test -e linkdir'],
      oracle: exitOracle(1),
    });
    const r = await run(p);
    assert.equal(r.verdict, 'supports', JSON.stringify(r));
    assert.ok(!r.stdout.includes('TOP-SECRET') && !r.stderr.includes('TOP-SECRET'));
    // An intervention or working directory through a symlink of the worktree is refused.
    for (const fields of [
      { intervention: { 'linkdir/secret.txt': 'x' } },
      { intervention: { link: 'x' } },
      { working_directory: 'linkdir' },
    ]) {
      assert.equal(await refusal(d, 'probe.plan', planParams(fields)), 'DENIED_SYMLINK', JSON.stringify(fields));
    }
    assert.equal(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8'), 'TOP-SECRET-CANARY\n');
  });

  test('fixture and intervention paths follow the path policy', async () => {
    for (const [fields, code] of [
      [{ fixture: { '../escape.txt': 'x' } }, 'DENIED_PATH'],
      [{ fixture: { '/tmp/abs.txt': 'x' } }, 'DENIED_PATH'],
      [{ fixture: { '.env': 'x' } }, 'DENIED_PATH'],
      [{ intervention: { '.git/hooks/pre-commit': 'x' } }, 'DENIED_PATH'],
      [{ intervention: { 'lib.sh/x': 'x' } }, 'DENIED_FILE'],
      [{ fixture: { a: '1', 'a/b': '2' } }, 'DENIED_ARGUMENTS'],
      [{ unexpected: true }, 'DENIED_ARGUMENTS'],
    ]) {
      assert.equal(await refusal(d, 'probe.plan', planParams(fields)), code, JSON.stringify(fields));
    }
  });

  test('a fixture lands in the scratch, where a file_sha256 oracle reads without following links', async () => {
    const oracle = (expected) => ({
      type: 'file_sha256',
      expected,
      path: 'out/sum.txt',
      source: 'published_specification',
      reference: 'POSIX sh arithmetic',
    });
    const p = await plan({
      fixture: { 'in.txt': '2 2\n' },
      command: ['sh', '-c', 'read a b < /scratch/in.txt; mkdir /scratch/out; echo $((a + b)) > /scratch/out/sum.txt'],
      oracle: oracle(sha256('4\n')),
    });
    assert.equal((await run(p)).verdict, 'supports');
    const linked = await plan({
      command: ['sh', '-c', 'mkdir /scratch/out; ln -s /snapshot/lib.sh /scratch/out/sum.txt'],
      oracle: oracle(sha256(BUGGY_LIB)),
    });
    const r = await run(linked);
    assert.equal(r.verdict, 'inconclusive');
    assert.match(r.reason, /symlink/);
  });

  test('the CLI plans from a file or standard input, runs and shows', async () => {
    const body = JSON.stringify(planParams({}));
    const planned = await d.cli(['probe', 'plan', '--file', '-'], { input: body });
    assert.equal(planned.code, 0, planned.stderr);
    const p = JSON.parse(planned.stdout);
    const file = path.join(mkTemp(), 'plan.json');
    fs.writeFileSync(file, body);
    const fromFile = await d.cli(['probe', 'plan', '--file', file]);
    assert.equal(JSON.parse(fromFile.stdout).plan_sha256, p.plan_sha256);
    const ran = await d.cli(['probe', 'run', p.probe_id]);
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(JSON.parse(ran.stdout).verdict, 'supports');
    const shown = await d.cli(['probe', 'show', p.probe_id]);
    assert.equal(JSON.parse(shown.stdout).runs.length, 1);
    const missing = await d.cli(['probe', 'run', 'probe_0000000000000000']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /NOT_FOUND/);
    const usage = await d.cli(['probe', 'plan', '--file', '-'], { input: '[1]' });
    assert.equal(usage.code, 2);
    const verify = await d.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout);
  });

  // Plan params for refusal checks (the plan helper throws on refusal).
  function planParams(fields) {
    return {
      snapshot_id: snap.snapshot_id,
      hypothesis: 'add() is broken',
      command: ['sh', 'test.sh'],
      working_directory: '.',
      oracle: exitOracle(1),
      policy_id: 'default',
      ...fields,
    };
  }
});

describe('probe policies and the daemon', () => {
  test('a bad probe policy refuses the start and names the key', async () => {
    await assert.rejects(
      start({ config: { probe_policies: [{ id: 'p', timeout_s: 5 }, { id: 'q', timeout: 5 }] } }),
      (e) => {
        assert.notEqual(e.exit?.code, 0);
        assert.match(e.stderr, /probe_policies\[1\]\.timeout/);
        return true;
      },
    );
    await assert.rejects(
      start({ config: { probe_policies: [{ id: 'p', environment: { LD_PRELOAD: '/x.so' } }] } }),
      (e) => /probe_policies\[0\]\.environment\.LD_PRELOAD/.test(e.stderr),
    );
  });
});

describe('disk budget', () => {
  let mnt;
  after(() => {
    if (mnt) spawnSync('umount', ['-l', mnt]);
  });

  test('a run whose worst case does not fit is refused before anything is written', async (t) => {
    if (process.getuid() !== 0) {
      t.skip('needs root to mount a small tmpfs as the state dir');
      return;
    }
    const base = mkTemp();
    mnt = path.join(base, 'state');
    fs.mkdirSync(mnt, { mode: 0o700 });
    const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=48m,mode=0700', 'tmpfs', mnt]);
    if (m.status !== 0) {
      mnt = undefined;
      t.skip(`cannot mount a tmpfs: ${m.stderr}`);
      return;
    }
    const wt = path.join(base, 'wt');
    writeFile(path.join(wt, 'f.txt'), 'x\n');
    const d = await start({
      base,
      stateDir: mnt,
      config: {
        probe_policies: [
          { id: 'small', max_output_bytes: 65536 },
          { id: 'huge', max_output_bytes: 64 * 1024 * 1024 },
        ],
      },
    });
    const snap = await admin(d, 'snapshot.capture', { worktree: wt });
    const params = (policy_id) => ({
      snapshot_id: snap.snapshot_id,
      hypothesis: 'f.txt exists',
      command: ['test', '-f', 'f.txt'],
      working_directory: '.',
      oracle: { type: 'exit_code', expected: 0, source: 'user_requirement', reference: 'r' },
      policy_id,
    });
    const small = await admin(d, 'probe.plan', params('small'));
    assert.equal((await admin(d, 'probe.run', { probe_id: small.probe_id })).verdict, 'supports');
    const huge = await admin(d, 'probe.plan', params('huge'));
    const r = await d.admin('probe.run', { probe_id: huge.probe_id });
    assert.ok(r.error, 'a run that cannot fit was started');
    assert.match(r.error.message, /^DENIED_SIZE: .*does not fit/);
    // No half-written run: no run, no reservation, no started event, no run directory.
    const shown = await admin(d, 'probe.get', { probe_id: huge.probe_id });
    assert.deepEqual(shown.runs, []);
    assert.deepEqual(shown.running, []);
    const events = (await auditEvents(d)).filter((e) => e.data?.probe_id === huge.probe_id);
    assert.deepEqual(
      events.map((e) => e.type),
      ['probe.planned', 'probe.refused'],
    );
    assert.ok(events[1].data.needed_bytes > events[1].data.free_bytes);
    assert.deepEqual(fs.readdirSync(path.join(mnt, 'probes', 'runs')), []);
    assert.equal((await d.cli(['audit', 'verify'])).code, 0);
    await d.stop();
  });
});

describe('crash during a run', () => {
  test('kill -9 leaves probe.started and no reservation after the restart', async () => {
    const base = mkTemp();
    const wt = path.join(base, 'wt');
    writeFile(path.join(wt, 'f.txt'), 'x\n');
    const d = await start({ base, config: { probe_policies: [{ id: 'slow', timeout_s: 120 }] } });
    const snap = await admin(d, 'snapshot.capture', { worktree: wt });
    const p = await admin(d, 'probe.plan', {
      snapshot_id: snap.snapshot_id,
      hypothesis: 'it finishes',
      command: ['sleep', '97.25'],
      working_directory: '.',
      oracle: { type: 'exit_code', expected: 0, source: 'user_requirement', reference: 'r' },
      policy_id: 'slow',
    });
    const pending = d.admin('probe.run', { probe_id: p.probe_id }).catch(() => null);
    let started = null;
    for (let i = 0; i < 200 && !started; i++) {
      await sleep(50);
      started = (await auditEvents(d)).find((e) => e.type === 'probe.started' && e.data.probe_id === p.probe_id);
    }
    assert.ok(started, 'probe.started was not recorded');
    await sleep(200); // the sandbox is up
    await d.kill();
    await pending;
    // The sandbox died with the daemon (PR_SET_PDEATHSIG): no sleep of this run is left.
    for (let i = 0; i < 40; i++) {
      if (spawnSync('pgrep', ['-f', 'sleep 97.25']).status !== 0) break;
      await sleep(50);
    }
    assert.notEqual(spawnSync('pgrep', ['-f', 'sleep 97.25']).status, 0, 'a sandboxed process outlived the daemon');
    const db = path.join(d.stateDir, 'store.db');
    assert.equal(sqlite(db, 'SELECT COUNT(*) FROM probe_reservations;'), '1', 'the reservation was durable');

    await d.start();
    const shown = await admin(d, 'probe.get', { probe_id: p.probe_id });
    assert.deepEqual(shown.running, []);
    assert.deepEqual(shown.runs, []);
    assert.equal(sqlite(db, 'SELECT COUNT(*) FROM probe_reservations;'), '0');
    const events = (await auditEvents(d)).filter((e) => e.data?.probe_id === p.probe_id);
    assert.deepEqual(
      events.map((e) => e.type),
      ['probe.planned', 'probe.started', 'probe.abandoned'],
    );
    assert.equal(events[2].data.run_id, started.data.run_id);
    assert.deepEqual(fs.readdirSync(path.join(d.stateDir, 'probes', 'runs')), []);
    const verify = await d.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout);
    await d.stop();
  });
});

describe('allowed_domains', () => {
  let echo;
  after(() => echo?.close());

  test('only the listed hosts are reachable, through the CONNECT proxy, and audited', async () => {
    echo = net.createServer((sock) => sock.pipe(sock));
    await new Promise((r) => echo.listen(0, '127.0.0.1', r));
    const port = echo.address().port;
    const base = mkTemp();
    const wt = path.join(base, 'wt');
    // What the probe runs: CONNECT to the proxy for a listed and an unlisted host.
    writeFile(
      path.join(wt, 'net.py'),
      [
        'import socket',
        'def tunnel(host):',
        '    try:',
        "        s = socket.create_connection(('127.0.0.1', 3128), timeout=5)",
        '    except OSError:',
        "        return 'noproxy', None",
        "    s.sendall(f'CONNECT {host}:443 HTTP/1.1\\r\\nHost: {host}:443\\r\\n\\r\\n'.encode())",
        "    head = b''",
        "    while b'\\r\\n\\r\\n' not in head:",
        '        chunk = s.recv(1)',
        '        if not chunk:',
        '            break',
        '        head += chunk',
        "    return head.split(b' ')[1].decode() if b' ' in head else 'none', s",
        "code, s = tunnel('api.probe.test')",
        "print('allowed:' + code)",
        "if code == '200':",
        "    s.sendall(b'ping')",
        "    print('echo:' + s.recv(4).decode())",
        "print('denied:' + tunnel('evil.probe.test')[0])",
        '',
      ].join('\n'),
    );
    for (const dir of ['run', 'state']) fs.mkdirSync(path.join(base, dir), { mode: 0o700 });
    writeFile(
      path.join(base, 'config.json'),
      JSON.stringify({
        probe_policies: [
          { id: 'net', allowed_domains: ['api.probe.test'], timeout_s: 20 },
          { id: 'offline', timeout_s: 20 },
        ],
      }),
      0o600,
    );
    const env = twEnv({
      runtimeDir: path.join(base, 'run'),
      stateDir: path.join(base, 'state'),
      configPath: path.join(base, 'config.json'),
      extra: { TOOLWARDEN_EGRESS_RESOLVE: `api.probe.test=127.0.0.1:${port},evil.probe.test=127.0.0.1:${port}` },
    });
    const d = new Daemon({ base, runtimeDir: path.join(base, 'run'), stateDir: path.join(base, 'state'), configPath: path.join(base, 'config.json'), env });
    daemons.push(d);
    await d.start();
    const snap = await admin(d, 'snapshot.capture', { worktree: wt });
    const probe = (policy_id) =>
      admin(d, 'probe.plan', {
        snapshot_id: snap.snapshot_id,
        hypothesis: 'the API answers',
        command: ['python3', 'net.py'],
        working_directory: '.',
        oracle: { type: 'stdout_contains', expected: 'echo:ping', source: 'user_requirement', reference: 'r' },
        policy_id,
      });
    const online = await probe('net');
    const r = await admin(d, 'probe.run', { probe_id: online.probe_id });
    assert.equal(r.stdout, 'allowed:200\necho:ping\ndenied:403\n', r.stderr);
    assert.equal(r.verdict, 'supports');
    const events = (await auditEvents(d)).filter((e) => e.data?.probe_id === online.probe_id);
    const egress = events.filter((e) => e.type.startsWith('egress.')).map((e) => [e.type, e.data.host]);
    assert.deepEqual(egress.sort(), [
      ['egress.allowed', 'api.probe.test'],
      ['egress.denied', 'evil.probe.test'],
    ]);
    // Without allowed_domains there is no proxy and no network at all.
    const offline = await probe('offline');
    const o = await admin(d, 'probe.run', { probe_id: offline.probe_id });
    assert.equal(o.stdout, 'allowed:noproxy\ndenied:noproxy\n', o.stderr);
    assert.equal(o.verdict, 'refutes');
    await d.stop();
  });
});

describe('plans are pinned', () => {
  test('a changed policy or an edited stored plan refuses the run', async () => {
    const base = mkTemp();
    const wt = path.join(base, 'wt');
    writeFile(path.join(wt, 'f.txt'), 'x\n');
    const policy = { id: 'p', timeout_s: 20 };
    const d = await start({ base, config: { probe_policies: [policy] } });
    const snap = await admin(d, 'snapshot.capture', { worktree: wt });
    const p = await admin(d, 'probe.plan', {
      snapshot_id: snap.snapshot_id,
      hypothesis: 'f.txt exists',
      command: ['test', '-f', 'f.txt'],
      working_directory: '.',
      oracle: { type: 'exit_code', expected: 0, source: 'user_requirement', reference: 'r' },
      policy_id: 'p',
    });
    assert.equal((await admin(d, 'probe.run', { probe_id: p.probe_id })).verdict, 'supports');
    const restart = async (config) => {
      await d.stop();
      writeFile(d.configPath, JSON.stringify(config), 0o600);
      await d.start();
    };
    await restart({ probe_policies: [{ ...policy, timeout_s: 21 }] });
    assert.equal(await refusal(d, 'probe.run', { probe_id: p.probe_id }), 'DENIED_INTEGRITY');
    await restart({ probe_policies: [policy] });
    assert.equal((await admin(d, 'probe.run', { probe_id: p.probe_id })).verdict, 'supports');
    // Someone with the store file in hand drops the trigger and edits the plan.
    await d.stop();
    sqlite(
      path.join(d.stateDir, 'store.db'),
      `DROP TRIGGER probes_immutable; UPDATE probes SET plan_json = replace(plan_json, 'f.txt', 'g.txt') WHERE id = '${p.probe_id}';`,
    );
    await d.start();
    assert.equal(await refusal(d, 'probe.run', { probe_id: p.probe_id }), 'DENIED_INTEGRITY');
    const refused = (await auditEvents(d)).filter((e) => e.type === 'probe.refused' && e.data.probe_id === p.probe_id);
    assert.deepEqual(
      refused.map((e) => e.data.code),
      ['DENIED_INTEGRITY', 'DENIED_INTEGRITY'],
    );
    const shown = await admin(d, 'probe.get', { probe_id: p.probe_id });
    assert.equal(shown.runs.length, 2, 'no run was recorded for a refused one');
    await d.stop();
  });
});
