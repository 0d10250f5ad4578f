// `toolwarden run` on a terminal keeps a status line (elapsed time, output bytes) while the
// program runs, erased before its output; piped, it adds nothing to the program's output
// (issue 7). The terminal is a real pty from util-linux `script`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { BIN } from './lib/daemon.mjs';

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
