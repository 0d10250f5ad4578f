// `toolwarden run` and `toolwarden probe run` on a terminal keep a status line (elapsed time,
// output bytes) while the program runs, erased before any output; piped, they add nothing to
// what they print (issue 7). The terminal is a real pty from util-linux `script`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BIN } from './lib/daemon.mjs';
import { cleanupTemps, mkTemp, startDaemon, writeFile } from '../security/lib/harness.mjs';

const worktree = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-run-progress-'));
const program = ['/bin/sh', '-c', 'echo start; sleep 2.5; echo done'];
const quote = (a) => `'${a.replaceAll("'", "'\\''")}'`;

test('on a terminal: a status line while running, erased before the output', { skip: !fs.existsSync('/usr/bin/script') && 'util-linux script is missing' }, () => {
  const cmd = [BIN, 'run', '--worktree', worktree, '--', ...program].map(quote).join(' ');
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  const out = r.stdout;
  assert.match(out, /toolwarden run: running [12] s, 6 bytes of output/);
  // Every status line is erased ("\r\x1b[K") before the program's next output.
  const beforeDone = out.slice(0, out.indexOf('done'));
  assert.ok(beforeDone.endsWith('\r\x1b[K'), JSON.stringify(beforeDone.slice(-60)));
  assert.ok(out.indexOf('start') < out.indexOf('toolwarden run: running'));
});

test('piped: exactly the program\'s output', () => {
  const r = spawnSync(BIN, ['run', '--worktree', worktree, '--', ...program], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'start\ndone\n');
  // Under ASan the payload's start on its own stack (CLONE_VM|CLONE_VFORK) makes ASan print a
  // known stack-switch warning (google/sanitizers#189); nothing else may appear.
  const stderr = r.stderr.replace(
    /==\d+==WARNING: ASan is ignoring requested __asan_handle_no_return[^\n]*\nFalse positive error reports may follow\nFor details see [^\n]*\n/g,
    '',
  );
  assert.equal(stderr, '');
});

describe('probe run', () => {
  const noScript = !fs.existsSync('/usr/bin/script') && 'util-linux script is missing';
  let d;
  let snapshot;
  // Writes 6 bytes, then runs for 2.5 s: the status line has something to count.
  const plan = async () => {
    const body = JSON.stringify({
      snapshot_id: snapshot,
      hypothesis: 'the probe runs for a while',
      command: ['sh', '-c', 'echo start; sleep 2.5; echo done'],
      working_directory: '.',
      oracle: { type: 'stdout_contains', expected: 'done', source: 'user_requirement', reference: 'issue 7' },
      policy_id: 'slow',
    });
    const planned = await d.cli(['probe', 'plan', '--file', '-'], { input: body });
    assert.equal(planned.code, 0, planned.stderr);
    return JSON.parse(planned.stdout).probe_id;
  };
  const onTerminal = (args) => {
    const cmd = [BIN, ...args].map(quote).join(' ');
    return spawnSync('script', ['-qec', cmd, '/dev/null'], { encoding: 'utf8', timeout: 30_000, env: d.env });
  };

  before(async () => {
    const base = mkTemp();
    writeFile(path.join(base, 'wt', 'README'), 'a worktree\n');
    d = await startDaemon({ base, config: { probe_policies: [{ id: 'slow', timeout_s: 20, max_output_bytes: 65536 }] } });
    const snap = await d.cli(['snapshot', 'capture', '--worktree', path.join(base, 'wt')]);
    assert.equal(snap.code, 0, snap.stderr);
    snapshot = JSON.parse(snap.stdout).snapshot_id;
  });
  after(async () => {
    await d?.kill();
    cleanupTemps();
  });

  test('on a terminal: a status line while the probe runs, erased before the result', { skip: noScript }, async () => {
    const id = await plan();
    const r = onTerminal(['probe', 'run', id]);
    assert.equal(r.status, 0, r.stdout);
    const out = r.stdout;
    assert.match(out, /toolwarden probe run: running [12] s, 6 bytes of output/);
    // The last status line is erased ("\r\x1b[K") before the JSON result.
    const json = out.indexOf('{');
    assert.ok(json > 0 && out.slice(0, json).endsWith('\r\x1b[K'), JSON.stringify(out.slice(0, 200)));
    const result = JSON.parse(out.slice(json).replaceAll('\r\n', '\n'));
    assert.equal(result.state, 'completed');
    assert.equal(result.verdict, 'supports');
  });

  test('piped: exactly the JSON result', async () => {
    const id = await plan();
    const r = await d.cli(['probe', 'run', id]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).stdout, 'start\ndone\n');
    assert.equal(r.stderr, '');
  });

  test('probe.progress reports the run in flight, then nothing', async () => {
    const id = await plan();
    const running = d.cli(['probe', 'run', id]);
    let seen;
    for (let i = 0; i < 100 && !seen; i++) {
      await new Promise((res) => setTimeout(res, 50));
      const p = await d.admin('probe.progress', { probe_id: id });
      assert.equal(p.result?.probe_id, id, JSON.stringify(p));
      if (p.result.runs.length > 0 && p.result.runs[0].output_bytes === 6) seen = p.result.runs[0];
    }
    assert.ok(seen, 'probe.progress never showed the running probe with its 6 bytes of output');
    assert.ok(seen.elapsed_ms >= 0 && seen.elapsed_ms < 20_000, JSON.stringify(seen));
    assert.equal((await running).code, 0);
    const done = await d.admin('probe.progress', { probe_id: id });
    assert.deepEqual(done.result.runs, []);
    const bad = await d.admin('probe.progress', { probe_id: id, extra: 1 });
    assert.match(bad.error?.message ?? '', /DENIED_ARGUMENTS/);
  });
});
