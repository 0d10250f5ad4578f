// Bash completion (packaging/toolwarden.bash, installed as
// /usr/share/bash-completion/completions/toolwarden): for every command the overview lists it
// offers exactly the options that command's --help usage names plus the common ones — so a
// new flag without completion, or a completion for a flag that is gone, fails here — and it
// completes the values that have a fixed set, and job ids from the running daemon.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startDaemon } from '../e2e/lib/daemon.mjs';
import { BIN, COMMON_OPTIONS, SOURCE_DIR, helpOf, mustRun, overviewCommands, run, usageOptions } from './lib/pkg.mjs';

const SCRIPT = path.join(SOURCE_DIR, 'packaging', 'toolwarden.bash');

/** What the completion offers for the words typed so far (the last one is being completed). */
function complete(words, env = process.env) {
  const driver = `
    set -u
    source "$SCRIPT"
    spec=$(complete -p toolwarden) || exit 3
    fn=$(sed -n 's/.*-F \\([^ ]*\\) .*/\\1/p' <<<"$spec")
    COMP_WORDS=(toolwarden "$@")
    COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 ))
    COMP_LINE="\${COMP_WORDS[*]}"
    COMP_POINT=\${#COMP_LINE}
    COMPREPLY=()
    "$fn" toolwarden "\${COMP_WORDS[COMP_CWORD]}" "\${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s\\n' "\${COMPREPLY[@]}"
  `;
  const r = run('bash', ['--noprofile', '--norc', '-c', driver, 'driver', ...words], { env: { ...env, SCRIPT } });
  assert.equal(r.code, 0, `completion of ${JSON.stringify(words)} failed: ${r.stderr}`);
  assert.equal(r.stderr, '', `completion printed to stderr: ${r.stderr}`);
  return new Set(r.stdout.split('\n').filter(Boolean));
}

const sorted = (s) => [...s].sort();

describe('bash completion', () => {
  const commands = overviewCommands();

  test('is valid bash and registers a completion function for toolwarden', () => {
    mustRun('bash', ['-n', SCRIPT]);
    const r = run('bash', ['--noprofile', '--norc', '-c', 'source "$1" && complete -p toolwarden', 'x', SCRIPT]);
    assert.match(r.stdout, /complete -F \S+ toolwarden/);
  });

  test('offers the commands of the overview (and help, version) first', () => {
    const first = new Set(commands.map((c) => c.split(' ')[0]));
    assert.deepEqual(sorted(complete([''])), sorted(new Set([...first, 'help', 'version'])));
    assert.deepEqual(sorted(complete(['-'])), ['--help', '--version']);
    assert.deepEqual(sorted(complete(['mc'])), ['mcp-config']);
  });

  test('offers the subcommands of the overview', () => {
    for (const group of new Set(commands.filter((c) => c.includes(' ')).map((c) => c.split(' ')[0]))) {
      const subs = commands.filter((c) => c.startsWith(`${group} `)).map((c) => c.slice(group.length + 1));
      assert.deepEqual(sorted(complete([group, ''])), sorted(subs), group);
    }
  });

  for (const cmd of commands) {
    test(`offers exactly the options of \`toolwarden ${cmd} --help\``, () => {
      const expected = new Set([...usageOptions(cmd, helpOf(cmd)), ...COMMON_OPTIONS]);
      const offered = complete([...cmd.split(' '), '--']);
      offered.delete('--'); // `run`'s separator before the program
      assert.deepEqual(sorted(offered), sorted(expected));
    });
  }

  test('skips option values when finding the command', () => {
    const offered = complete(['--runtime-dir', '/tmp/x', 'job', 'create', '--worktree', 'wt', '--ac']);
    assert.deepEqual(sorted(offered), ['--access']);
  });

  test('completes fixed value sets', () => {
    assert.deepEqual(sorted(complete(['job', 'create', '--access', ''])), ['read', 'write']);
    assert.deepEqual(sorted(complete(['job', 'create', '--mcp-config', ''])), ['claude-code', 'cursor', 'json', 'vscode']);
    assert.deepEqual(sorted(complete(['mcp-config', 'job_x', '--client', 'c'])), ['claude-code', 'cursor']);
    assert.deepEqual(sorted(complete(['serve', '--log-level', ''])), ['debug', 'error', 'info', 'warn']);
    assert.ok(complete(['job', 'create', '--tool', 'local_']).has('local_edit'));
  });

  test('completes the program after `run --`', () => {
    assert.ok(complete(['run', '--writable', '--', 'bas']).has('bash'));
  });
});

describe('bash completion of job ids', () => {
  let d;
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await d?.kill();
  });

  test('asks the running daemon', async () => {
    const job = await d.createJob();
    const env = { ...d.env, PATH: `${path.dirname(BIN)}:${process.env.PATH}` };
    assert.ok(complete(['job', 'revoke', ''], env).has(job.job_id));
    assert.ok(complete(['mcp-config', 'job_'], env).has(job.job_id));
    assert.deepEqual(sorted(complete(['job', 'show', job.job_id, ''], env)), [], 'one JOB_ID only');
  });
});
