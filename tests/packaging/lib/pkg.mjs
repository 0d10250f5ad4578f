// Helpers for the packaging tests: where the source and build trees are, running programs,
// and reading the command list and options out of the binary's own --help texts (the tests
// compare the man page and the completion against what the binary prints, not against
// help.cpp, so a help text printed from anywhere else would be caught too).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN } from '../../e2e/lib/daemon.mjs';

export { BIN };
export const SOURCE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const BUILD_DIR = process.env.TOOLWARDEN_BUILD_DIR || path.join(SOURCE_DIR, 'build');

/** Runs a program; resolves {code, stdout, stderr}. */
export function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.error) return { code: null, stdout: '', stderr: String(r.error) };
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** Runs a program that must succeed; returns its stdout. */
export function mustRun(cmd, args, opts = {}) {
  const r = run(cmd, args, opts);
  assert.equal(r.code, 0, `${cmd} ${args.join(' ')} failed (exit ${r.code}):\n${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** True when `program` is on PATH. */
export function have(program) {
  return run('sh', ['-c', `command -v ${program}`]).code === 0;
}

/** The commands the overview (`toolwarden --help`) lists: ["serve", "job create", ...]. */
export function overviewCommands(bin = BIN) {
  const text = mustRun(bin, ['--help']);
  const lines = text.split('\n');
  const start = lines.indexOf('Commands:');
  assert.ok(start >= 0, `no "Commands:" list in toolwarden --help:\n${text}`);
  const out = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '') break;
    const m = /^ {2}(\S+(?: [a-z][a-z-]*)?) {2,}\S/.exec(line);
    assert.ok(m, `unexpected line in the command list: ${JSON.stringify(line)}`);
    if (!m[1].startsWith('-')) out.push(m[1]);
  }
  assert.ok(out.length >= 10, `too few commands parsed: ${out}`);
  return out;
}

/** `toolwarden CMD --help`, which must exit 0. */
export function helpOf(cmd, bin = BIN) {
  return mustRun(bin, [...cmd.split(' '), '--help']);
}

/** The options of `cmd` as its help's usage lines name them (prose mentions left out). */
export function usageOptions(cmd, helpText) {
  const head = helpText.split('\n\n')[0].split('\n');
  // Group the usage block into usages: one starts at "Usage: toolwarden" or "toolwarden".
  const usages = [];
  for (const line of head) {
    const t = line.trim().replace(/^Usage: /, '');
    if (t.startsWith('toolwarden ')) usages.push(t);
    else usages[usages.length - 1] += ` ${t}`;
  }
  const mine = usages.filter((u) => {
    if (!u.startsWith(`toolwarden ${cmd}`)) return false;
    const rest = u.slice(`toolwarden ${cmd}`.length);
    return rest === '' || (rest.startsWith(' ') && !/^ [a-z]/.test(rest));
  });
  assert.equal(mine.length, 1, `one usage line for "${cmd}" expected in:\n${helpText}`);
  return new Set(mine[0].match(/--[a-z][a-z-]*/g) ?? []);
}

export const COMMON_OPTIONS = ['--runtime-dir', '--state-dir', '--config', '--help'];
