// toolwarden(1) is generated from the --help texts at build time, so the two cannot drift:
// every command the overview lists, as `toolwarden CMD --help` prints it, must appear verbatim
// (line for line, in order) in the rendered man page, and the page must render without a
// single groff warning.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { BIN, BUILD_DIR, have, helpOf, mustRun, overviewCommands, run } from './lib/pkg.mjs';

const MAN_PAGE = path.join(BUILD_DIR, 'packaging', 'toolwarden.1');

function lines(text) {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

/** Index of `needle` as a contiguous run inside `hay`, or -1. */
function findRun(hay, needle) {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/** The first line of `needle` that breaks the run, for a readable failure. */
function firstMismatch(hay, needle) {
  let start = hay.indexOf(needle[0]);
  if (start < 0) return needle[0];
  for (let j = 0; j < needle.length; j++) if (hay[start + j] !== needle[j]) return needle[j];
  return null;
}

describe('man page toolwarden(1)', { skip: !have('man') && 'man (man-db) is not installed' }, () => {
  const env = { ...process.env, LC_ALL: 'C.UTF-8', MANWIDTH: '250', MAN_KEEP_FORMATTING: '' };
  let rendered;

  test('is built and renders', () => {
    assert.ok(fs.existsSync(MAN_PAGE), `${MAN_PAGE} missing: was the build run?`);
    rendered = lines(mustRun('man', ['-l', MAN_PAGE], { env }));
    assert.ok(rendered.length > 100, 'rendered page is too short');
    assert.ok(rendered.includes('NAME') && rendered.includes('SYNOPSIS'), 'NAME/SYNOPSIS missing');
  });

  test('renders without a groff warning', () => {
    const r = run('groff', ['-man', '-ww', '-z', MAN_PAGE], { env });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '', `groff warnings:\n${r.stderr}`);
  });

  test('names the version --version prints', () => {
    const version = mustRun(BIN, ['--version']).trim();
    assert.match(version, /^toolwarden \d+\.\d+\.\d+$/);
    assert.ok(
      rendered.some((l) => l.startsWith(version)),
      `footer with "${version}" missing`,
    );
  });

  test('holds the overview verbatim', () => {
    const overview = lines(mustRun(BIN, ['--help']).split('\nCommon options:\n')[0]);
    assert.notEqual(findRun(rendered, overview), -1, `differs at: ${firstMismatch(rendered, overview)}`);
  });

  for (const cmd of ['job', ...overviewCommands()]) {
    test(`holds \`toolwarden ${cmd} --help\` verbatim`, () => {
      const [own, common] = helpOf(cmd).split('\nCommon options:\n');
      assert.ok(common !== undefined, `${cmd} --help lacks the common options`);
      const ownLines = lines(own);
      assert.notEqual(findRun(rendered, ownLines), -1, `differs at: ${firstMismatch(rendered, ownLines)}`);
      const commonLines = lines(`Common options:\n${common}`);
      assert.notEqual(findRun(rendered, commonLines), -1, `common options differ at: ${firstMismatch(rendered, commonLines)}`);
    });
  }
});
