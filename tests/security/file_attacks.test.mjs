// Hostile paths and hostile files against the file tools of a running daemon (SPEC §5-§7).
// A "secret" file lies OUTSIDE the worktree; its content must never appear in any response, and
// no response may name the outside directory unless the request itself did.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanupTemps, mkTemp, sleep, startDaemon, writeFile } from './lib/harness.mjs';

const SECRET = `TWSECRET${crypto.randomBytes(12).toString('hex')}`;
const NEEDLE = 'needlezebra';

let d;
let base; // parent of worktree and outside dirs
let wt; // the worktree
let outside; // a directory outside the worktree holding the secret
let outsideEdit; // outside dir that local_edit must never change
let tokR; // read job, allow **
let tokW; // write job, allow **
let tokBlock; // read job, --block secret/**
let tokAllow; // read job, --allow src/**
let sockServer;
let haveCharDev = false;
let responses = 0;

function leakCheck(resp, args, label) {
  responses++;
  const s = JSON.stringify(resp);
  assert.ok(!s.includes(SECRET), `${label}: response contains the outside secret: ${s.slice(0, 500)}`);
  if (!JSON.stringify(args ?? {}).includes(outside) && !JSON.stringify(args ?? {}).includes(outsideEdit)) {
    assert.ok(!s.includes(outside), `${label}: response names a host path outside the worktree: ${s.slice(0, 500)}`);
    assert.ok(!s.includes(outsideEdit), `${label}: response names a host path outside the worktree: ${s.slice(0, 500)}`);
  }
}

async function call(token, name, args, opts) {
  const resp = await d.callTool(token, name, args, opts);
  leakCheck(resp, args, `${name} ${JSON.stringify(args).slice(0, 200)}`);
  return resp;
}

/** Asserts the SPEC §5 denial shape with exactly `code`. */
function assertDenied(resp, code, label) {
  const ctx = `${label}: ${JSON.stringify(resp).slice(0, 400)}`;
  assert.equal(resp.error, undefined, `${ctx} (expected a tool result, got a JSON-RPC error)`);
  const r = resp.result;
  assert.ok(r, ctx);
  assert.equal(r.isError, true, ctx);
  assert.equal(r.structuredContent?.error, code, ctx);
  assert.ok(Array.isArray(r.content) && r.content.length >= 1, ctx);
  assert.equal(r.content[0].type, 'text', ctx);
  assert.ok(r.content[0].text.startsWith(`${code}:`), ctx);
}

async function expectDenied(token, name, args, code) {
  const resp = await call(token, name, args);
  assertDenied(resp, code, `${name} ${JSON.stringify(args).slice(0, 160)}`);
  return resp;
}

function assertOk(resp, label) {
  assert.equal(resp.error, undefined, `${label}: ${JSON.stringify(resp).slice(0, 400)}`);
  assert.notEqual(resp.result?.isError, true, `${label}: ${JSON.stringify(resp).slice(0, 400)}`);
  return resp.result.structuredContent;
}

// ---- sensitive names (SPEC §7) ----
const SENSITIVE_BASE = [
  '.git', '.mcp', '.mcp.json', '.mcprc', '.npmrc', '.netrc', 'id_rsa', 'id_ed25519', '.env',
  '.env.local', '.env.production', '.codex', '.claude', '.ssh', '.aws', '.config', '.toolwarden',
  'auth.json', 'auth.toml', 'auth.yaml', 'auth.yml', 'auth.json.bak', 'auth.yaml~', 'credentials',
  'credentials.yaml', 'credentials.json.old', 'agents.md', 'claude.md', 'mcp.json', 'mcp.toml',
  'mcp.yaml', 'mcp.yml', 'mcp.json.bak',
];

function caseMixes(name) {
  const alt = [...name].map((c, i) => (i % 2 ? c.toUpperCase() : c.toLowerCase())).join('');
  const title = name.replace(/(^|[._-])([a-z])/g, (m, p, c) => p + c.toUpperCase());
  return [...new Set([name.toLowerCase(), name.toUpperCase(), alt, title])];
}

/** The SPEC §7 rule, applied by the test to check listings and search results. */
function isSensitiveSegment(seg) {
  const s = seg.toLowerCase();
  return (
    ['.git', '.npmrc', '.netrc', 'id_rsa', 'id_ed25519', '.env', '.codex', '.claude', '.ssh', '.aws', '.config',
      '.toolwarden', 'agents.md', 'claude.md'].includes(s) ||
    s.startsWith('.mcp') ||
    s.startsWith('.env.') ||
    /^auth\.(json|toml|yaml|yml)/.test(s) ||
    s.startsWith('credentials') ||
    /^mcp\.(json|toml|yaml|yml)/.test(s)
  );
}

before(async () => {
  base = mkTemp('tw-sec-files-', 0o700);
  wt = path.join(base, 'wt');
  outside = path.join(base, 'outside');
  outsideEdit = path.join(base, 'outside_edit');
  fs.mkdirSync(wt);
  fs.mkdirSync(outside);
  fs.mkdirSync(outsideEdit);
  // the secret, outside the worktree
  writeFile(path.join(outside, 'secret.txt'), `the secret is ${SECRET}\n${NEEDLE}\n`);
  writeFile(path.join(outside, 'hl_secret.txt'), `hardlinked ${SECRET}\n${NEEDLE}\n`);
  writeFile(path.join(outsideEdit, 'victim.txt'), 'outside original\n');
  writeFile(path.join(outsideEdit, 'victim_hl.txt'), 'outside hardlinked original\n');

  writeFile(path.join(wt, 'hello.txt'), 'hello\n');
  writeFile(path.join(wt, 'notes.txt'), `control ${NEEDLE}\n`);
  writeFile(path.join(wt, 'a/b/deep.txt'), `deep control ${NEEDLE}\n`);
  writeFile(path.join(wt, 'a/b/c/deeper.txt'), `deeper control ${NEEDLE}\n`);
  writeFile(path.join(wt, 'a\\b.txt'), 'a file whose name holds a backslash\n');
  writeFile(path.join(wt, '.GIT/config'), `[core] ${NEEDLE}\n`);
  writeFile(path.join(wt, '.ssh/id_rsa'), `-----BEGIN ${NEEDLE}\n`);
  writeFile(path.join(wt, 'x/Credentials.yaml'), `token: ${NEEDLE}\n`);
  // sensitive names, as files and as directories, at depth 1 and 3, in several case mixes
  for (const name of SENSITIVE_BASE) {
    const v = caseMixes(name);
    const place = (rel, asDir) => {
      const p = path.join(wt, rel);
      if (fs.existsSync(p)) return;
      if (asDir) writeFile(path.join(p, 'inner.txt'), `sensitive dir ${NEEDLE}\n`);
      else writeFile(p, `sensitive file ${NEEDLE}\n`);
    };
    place(v[0], false);
    place(v[1 % v.length], true);
    place(`a/b/${v[2 % v.length]}`, false);
    place(`a/b/${v[3 % v.length]}`, true);
  }

  // symlinks
  fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(wt, 'link_final'));
  fs.symlinkSync(outside, path.join(wt, 'link_dir'));
  fs.symlinkSync('/proc/self/root', path.join(wt, 'proc_root'));
  fs.symlinkSync('hello.txt', path.join(wt, 'inner_link'));
  fs.symlinkSync('../outside/secret.txt', path.join(wt, 'rel_link'));
  fs.symlinkSync(outsideEdit, path.join(wt, 'link_edit_dir'));
  fs.symlinkSync(path.join(outsideEdit, 'victim.txt'), path.join(wt, 'victim_link'));
  // hardlinks to files outside the worktree (same filesystem)
  fs.linkSync(path.join(outside, 'hl_secret.txt'), path.join(wt, 'hard.txt'));
  fs.linkSync(path.join(outsideEdit, 'victim_hl.txt'), path.join(wt, 'hard_edit.txt'));
  // special files
  spawnSync('mkfifo', [path.join(wt, 'fifo')]);
  assert.ok(fs.statSync(path.join(wt, 'fifo')).isFIFO());
  sockServer = net.createServer();
  await new Promise((r, j) => sockServer.listen(path.join(wt, 'sock'), r).on('error', j));
  haveCharDev = spawnSync('mknod', [path.join(wt, 'nullcopy'), 'c', '1', '3']).status === 0 &&
    fs.statSync(path.join(wt, 'nullcopy')).isCharacterDevice();
  // sizes and binary
  writeFile(path.join(wt, 'big.txt'), Buffer.alloc(1024 * 1024 + 1, 'a'));
  writeFile(path.join(wt, 'exact.txt'), Buffer.alloc(1024 * 1024, 'b'));
  writeFile(path.join(wt, 'bin.dat'), Buffer.from('abc\0def\n'));
  writeFile(path.join(wt, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0xff, 0xfe, 0x0a]));
  // scopes
  writeFile(path.join(wt, 'secret/x.txt'), `blocked ${NEEDLE}\n`);
  writeFile(path.join(wt, 'src/a.txt'), 'in scope\n');
  writeFile(path.join(wt, 'src2/a.txt'), 'prefix trap\n');
  writeFile(path.join(wt, 'srcx.txt'), 'prefix trap\n');

  d = await startDaemon({ base });
  tokR = (await d.createJob({ worktree: wt })).token;
  tokW = (await d.createJob({ worktree: wt, access: 'write' })).token;
  tokBlock = (await d.createJob({ worktree: wt, block: ['secret/**'] })).token;
  tokAllow = (await d.createJob({ worktree: wt, allow: ['src/**'] })).token;
});

after(async () => {
  await d?.kill();
  await new Promise((r) => (sockServer ? sockServer.close(r) : r()));
  cleanupTemps();
});

describe('sanity', () => {
  test('a plain file reads OK', async () => {
    const sc = assertOk(await call(tokR, 'local_read', { path: 'hello.txt' }), 'hello.txt');
    assert.equal(sc.content, 'hello\n');
    assert.equal(sc.path, 'hello.txt');
    assert.equal(sc.sha256, crypto.createHash('sha256').update('hello\n').digest('hex'));
  });
});

describe('path syntax → DENIED_PATH', () => {
  const cases = [
    '..', '../outside/secret.txt', '../../etc/passwd', 'a/../../outside/secret.txt', 'a/..', 'a/b/../../..',
    './hello.txt', 'a/./b/deep.txt', 'hello.txt/..', '.', '...//..',
    '/etc/passwd', '//etc/passwd', '/', '/proc/self/root/etc/passwd',
    'hello.txt\u0000', 'hello.txt\u0000.png', '\u0000', 'a/\u0000/b',
    'a\\b.txt', '..\\outside\\secret.txt', 'a\\..\\..\\x', '\\etc\\passwd',
    '', 'a//b/deep.txt', 'a/b//deep.txt', 'hello.txt/', '/hello.txt', 'a/b/', '//', 'a///b',
    'a/'.repeat(2049) + 'x', 'x'.repeat(4097), ('\u00e9'.repeat(100) + '/').repeat(21) + 'x',
  ];
  test('local_read', async () => {
    for (const p of cases) await expectDenied(tokR, 'local_read', { path: p }, 'DENIED_PATH');
  });
  test('absolute path of the secret itself', async () => {
    for (const p of [path.join(outside, 'secret.txt'), `${wt}/../outside/secret.txt`, `${wt}/hello.txt`]) {
      await expectDenied(tokR, 'local_read', { path: p }, 'DENIED_PATH');
      await expectDenied(tokR, 'local_list', { path: path.dirname(p) }, 'DENIED_PATH');
      await expectDenied(tokR, 'local_search', { path: path.dirname(p), query: 'secret' }, 'DENIED_PATH');
    }
  });
  test('local_list and local_search', async () => {
    for (const p of cases.filter((c) => c !== '.')) {
      await expectDenied(tokR, 'local_list', { path: p }, 'DENIED_PATH');
      await expectDenied(tokR, 'local_search', { path: p, query: NEEDLE }, 'DENIED_PATH');
    }
  });
  test('local_edit (write job)', async () => {
    for (const p of cases) await expectDenied(tokW, 'local_edit', { path: p, content: 'pwned' }, 'DENIED_PATH');
    assert.equal(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8').includes(SECRET), true);
    assert.equal(fs.readFileSync(path.join(wt, 'hello.txt'), 'utf8'), 'hello\n');
  });
});

describe('sensitive names (SPEC §7) → DENIED_PATH', () => {
  test('explicit examples', async () => {
    for (const p of ['.GIT/config', 'a/b/.Env.local', 'x/Credentials.yaml', 'AUTH.json.bak', '.mcp.json', 'mcp.yml',
      'agents.md', 'CLAUDE.MD', '.ssh/id_rsa', '.git', '.Git/HEAD', 'a/.git/config', 'src/.ENV', 'a/b/c/ID_ED25519']) {
      await expectDenied(tokR, 'local_read', { path: p }, 'DENIED_PATH');
      await expectDenied(tokW, 'local_edit', { path: p, content: 'x' }, 'DENIED_PATH');
    }
  });
  test('every name, four case mixes, as final and middle segment at depth 1 and 3', async () => {
    let n = 0;
    for (const name of SENSITIVE_BASE) {
      for (const v of caseMixes(name)) {
        for (const p of [v, `a/b/${v}`, `${v}/inner.txt`, `a/b/${v}/inner.txt`, `a/${v}/c/x.txt`]) {
          await expectDenied(tokR, 'local_read', { path: p }, 'DENIED_PATH');
          n++;
        }
        await expectDenied(tokR, 'local_list', { path: v }, 'DENIED_PATH');
        await expectDenied(tokR, 'local_list', { path: `a/b/${v}` }, 'DENIED_PATH');
        await expectDenied(tokR, 'local_search', { path: `a/b/${v}`, query: NEEDLE }, 'DENIED_PATH');
        await expectDenied(tokW, 'local_edit', { path: `a/b/${v}`, content: 'x' }, 'DENIED_PATH');
      }
    }
    assert.ok(n > 500);
  });
  test('sensitive entries are left out of local_list', async () => {
    for (const dir of ['.', 'a', 'a/b', 'x']) {
      const sc = assertOk(await call(tokR, 'local_list', { path: dir }), `list ${dir}`);
      const names = sc.entries.map((e) => e.name);
      const bad = names.filter(isSensitiveSegment);
      assert.deepEqual(bad, [], `local_list ${dir} shows sensitive names`);
      if (dir === '.') for (const n of ['hello.txt', 'notes.txt', 'a', 'src']) assert.ok(names.includes(n), `list . lacks ${n}`);
      if (dir === 'a/b') for (const n of ['deep.txt', 'c']) assert.ok(names.includes(n), `list a/b lacks ${n}`);
    }
  });
  test('sensitive files are left out of local_search', async () => {
    for (const args of [
      { path: '.', query: NEEDLE },
      { path: '.', query: NEEDLE, max_results: 10000 },
      { path: 'a', query: NEEDLE },
      { path: 'a/b', query: NEEDLE },
      { path: '.', query: 'needle.ebra', regex: true },
      { path: '.', query: 'core|BEGIN|token', regex: true },
    ]) {
      const sc = assertOk(await call(tokR, 'local_search', args), `search ${JSON.stringify(args)}`);
      for (const m of sc.matches) {
        const segs = m.path.split('/');
        assert.ok(!segs.some(isSensitiveSegment), `search ${JSON.stringify(args)} returned ${m.path}`);
        assert.ok(!/sensitive|core|BEGIN|token/.test(m.text), `search returned sensitive text from ${m.path}`);
      }
      const paths = sc.matches.map((m) => m.path);
      if (args.query === NEEDLE && args.path === '.') {
        for (const c of ['notes.txt', 'a/b/deep.txt', 'a/b/c/deeper.txt']) assert.ok(paths.includes(c), `search lacks ${c}`);
      }
    }
  });
});

describe('symlinks → DENIED_SYMLINK', () => {
  test('final component to a file outside', async () => {
    await expectDenied(tokR, 'local_read', { path: 'link_final' }, 'DENIED_SYMLINK');
    await expectDenied(tokR, 'local_read', { path: 'rel_link' }, 'DENIED_SYMLINK');
  });
  test('final component to a file inside is still refused', async () => {
    await expectDenied(tokR, 'local_read', { path: 'inner_link' }, 'DENIED_SYMLINK');
  });
  test('middle component to a directory outside (local_read, local_search)', async () => {
    await expectDenied(tokR, 'local_read', { path: 'link_dir/secret.txt' }, 'DENIED_SYMLINK');
    await expectDenied(tokR, 'local_read', { path: 'link_dir/hl_secret.txt' }, 'DENIED_SYMLINK');
    await expectDenied(tokR, 'local_search', { path: 'link_dir/secret.txt', query: 'secret' }, 'DENIED_SYMLINK');
  });
  test('symlink to /proc/self/root (local_read; middle component for local_list, local_search)', async () => {
    await expectDenied(tokR, 'local_read', { path: 'proc_root' }, 'DENIED_SYMLINK');
    await expectDenied(tokR, 'local_read', { path: `proc_root${outside}/secret.txt` }, 'DENIED_SYMLINK');
    await expectDenied(tokR, 'local_read', { path: 'proc_root/etc/hostname' }, 'DENIED_SYMLINK');
    await expectDenied(tokR, 'local_search', { path: `proc_root${outside}`, query: 'secret' }, 'DENIED_SYMLINK');
    await expectDenied(tokR, 'local_list', { path: `proc_root${outside}` }, 'DENIED_SYMLINK');
  });
  test('a symlinked directory as the (final) path of local_list', async () => {
    await expectDenied(tokR, 'local_list', { path: 'link_dir' }, 'DENIED_SYMLINK');
  });
  test('a symlinked directory as the (final) path of local_search', async () => {
    await expectDenied(tokR, 'local_search', { path: 'link_dir', query: NEEDLE }, 'DENIED_SYMLINK');
  });
  test('a symlink to /proc/self/root as the (final) path of local_list and local_search', async () => {
    const r1 = await call(tokR, 'local_list', { path: 'proc_root' });
    const r2 = await call(tokR, 'local_search', { path: 'proc_root', query: 'root' });
    assertDenied(r1, 'DENIED_SYMLINK', 'local_list proc_root');
    assertDenied(r2, 'DENIED_SYMLINK', 'local_search proc_root');
  });
  test('local_list shows symlinks as symlinks; local_search does not follow them', async () => {
    const sc = assertOk(await call(tokR, 'local_list', { path: '.' }), 'list .');
    for (const n of ['link_final', 'link_dir', 'proc_root', 'inner_link']) {
      const e = sc.entries.find((x) => x.name === n);
      assert.ok(e, `list lacks ${n}`);
      assert.equal(e.type, 'symlink', `${n}: ${JSON.stringify(e)}`);
    }
    const s = assertOk(await call(tokR, 'local_search', { path: '.', query: 'secret is' }), 'search');
    assert.deepEqual(s.matches, [], 'search followed a symlink to the outside secret');
  });
});

describe('hardlinks, special files, sizes, binary', () => {
  test('hardlink to a file outside → DENIED_HARDLINK, and not searched', async () => {
    assert.equal(fs.statSync(path.join(wt, 'hard.txt')).nlink, 2);
    await expectDenied(tokR, 'local_read', { path: 'hard.txt' }, 'DENIED_HARDLINK');
    const s = assertOk(await call(tokR, 'local_search', { path: '.', query: 'hardlinked' }), 'search');
    assert.deepEqual(s.matches, []);
    const s2 = assertOk(await call(tokR, 'local_search', { path: '.', query: NEEDLE }), 'search');
    assert.ok(!s2.matches.some((m) => m.path === 'hard.txt'), 'search returned the hardlinked file');
  });
  test('FIFO → DENIED_FILE promptly', async () => {
    const t0 = Date.now();
    let resp;
    try {
      resp = await call(tokR, 'local_read', { path: 'fifo' }, { timeout: 5000 });
    } catch (e) {
      // unblock a daemon thread stuck in open(2) on the FIFO
      const fd = fs.openSync(path.join(wt, 'fifo'), fs.constants.O_RDWR | fs.constants.O_NONBLOCK);
      fs.closeSync(fd);
      throw new Error(`local_read of a FIFO did not answer within 5 s: ${e.message}`);
    }
    assertDenied(resp, 'DENIED_FILE', 'fifo');
    assert.ok(Date.now() - t0 < 3000, `FIFO read took ${Date.now() - t0} ms`);
    const t1 = Date.now();
    assertOk(await call(tokR, 'local_search', { path: '.', query: 'zzz-nothing' }, { timeout: 5000 }), 'search over a FIFO');
    assert.ok(Date.now() - t1 < 3000, `search over a tree with a FIFO took ${Date.now() - t1} ms`);
  });
  test('unix socket file → DENIED_FILE', async () => {
    assert.ok(fs.statSync(path.join(wt, 'sock')).isSocket());
    await expectDenied(tokR, 'local_read', { path: 'sock' }, 'DENIED_FILE');
  });
  test('character device → DENIED_FILE', async (t) => {
    if (!haveCharDev) return t.skip('mknod not permitted here');
    const resp = await call(tokR, 'local_read', { path: 'nullcopy' }, { timeout: 5000 });
    assertDenied(resp, 'DENIED_FILE', 'char device');
  });
  test('directory → DENIED_FILE', async () => {
    await expectDenied(tokR, 'local_read', { path: 'a' }, 'DENIED_FILE');
    await expectDenied(tokR, 'local_read', { path: 'a/b' }, 'DENIED_FILE');
  });
  test('file over 1 MiB → DENIED_SIZE; exactly 1 MiB reads', async () => {
    await expectDenied(tokR, 'local_read', { path: 'big.txt' }, 'DENIED_SIZE');
    const sc = assertOk(await call(tokR, 'local_read', { path: 'exact.txt' }), 'exact 1 MiB');
    assert.equal(sc.size, 1024 * 1024);
  });
  test('binary (NUL) → DENIED_BINARY; invalid UTF-8 → DENIED_BINARY', async () => {
    await expectDenied(tokR, 'local_read', { path: 'bin.dat' }, 'DENIED_BINARY');
    await expectDenied(tokR, 'local_read', { path: 'latin1.txt' }, 'DENIED_BINARY');
  });
  test('a missing file → NOT_FOUND', async () => {
    await expectDenied(tokR, 'local_read', { path: 'nope.txt' }, 'NOT_FOUND');
    await expectDenied(tokR, 'local_read', { path: 'a/nope/x.txt' }, 'NOT_FOUND');
  });
});

describe('scopes → DENIED_SCOPE', () => {
  test('blocked scope (--block secret/**)', async () => {
    await expectDenied(tokBlock, 'local_read', { path: 'secret/x.txt' }, 'DENIED_SCOPE');
    await expectDenied(tokBlock, 'local_list', { path: 'secret' }, 'DENIED_SCOPE');
    await expectDenied(tokBlock, 'local_search', { path: 'secret', query: NEEDLE }, 'DENIED_SCOPE');
    assertOk(await call(tokBlock, 'local_read', { path: 'hello.txt' }), 'hello under block job');
    const s = assertOk(await call(tokBlock, 'local_search', { path: '.', query: 'blocked' }), 'search');
    assert.ok(!s.matches.some((m) => m.path.startsWith('secret/')), `search returned a blocked file: ${JSON.stringify(s)}`);
  });
  test('outside the allowed scope (--allow src/**)', async () => {
    assert.equal(assertOk(await call(tokAllow, 'local_read', { path: 'src/a.txt' }), 'src/a.txt').content, 'in scope\n');
    for (const p of ['hello.txt', 'src2/a.txt', 'srcx.txt', 'a/b/deep.txt', 'secret/x.txt']) {
      await expectDenied(tokAllow, 'local_read', { path: p }, 'DENIED_SCOPE');
    }
    const s = assertOk(await call(tokAllow, 'local_search', { path: 'src', query: 'scope' }), 'search src');
    assert.deepEqual(s.matches.map((m) => m.path), ['src/a.txt']);
  });
});

describe('local_edit', () => {
  test('read-only job → DENIED_READ_ONLY, file unchanged', async () => {
    await expectDenied(tokR, 'local_edit', { path: 'hello.txt', content: 'pwned' }, 'DENIED_READ_ONLY');
    await expectDenied(tokR, 'local_edit', { path: 'new_by_readonly.txt', content: 'pwned' }, 'DENIED_READ_ONLY');
    assert.equal(fs.readFileSync(path.join(wt, 'hello.txt'), 'utf8'), 'hello\n');
    assert.ok(!fs.existsSync(path.join(wt, 'new_by_readonly.txt')));
  });
  test('write job edits a plain file (sanity)', async () => {
    const sc = assertOk(await call(tokW, 'local_edit', { path: 'edited.txt', content: 'fresh\n' }), 'edit');
    assert.equal(sc.size, 6);
    assert.equal(fs.readFileSync(path.join(wt, 'edited.txt'), 'utf8'), 'fresh\n');
  });
  test('through a symlinked parent dir → DENIED_SYMLINK, outside dir unchanged', async () => {
    const before = fs.readdirSync(outsideEdit).sort();
    const r1 = await call(tokW, 'local_edit', { path: 'link_edit_dir/victim.txt', content: 'pwned' });
    const r2 = await call(tokW, 'local_edit', { path: 'link_edit_dir/new.txt', content: 'pwned' });
    assert.deepEqual(fs.readdirSync(outsideEdit).sort(), before);
    assert.equal(fs.readFileSync(path.join(outsideEdit, 'victim.txt'), 'utf8'), 'outside original\n');
    assert.deepEqual(
      [r1, r2].map((r) => r.result?.structuredContent?.error),
      ['DENIED_SYMLINK', 'DENIED_SYMLINK'],
      `edit through a symlinked parent: ${JSON.stringify([r1, r2])}`,
    );
    assertDenied(r1, 'DENIED_SYMLINK', 'local_edit link_edit_dir/victim.txt');
    assertDenied(r2, 'DENIED_SYMLINK', 'local_edit link_edit_dir/new.txt');
  });
  test('onto a symlink name → DENIED_SYMLINK, outside file unchanged, link kept', async () => {
    await expectDenied(tokW, 'local_edit', { path: 'victim_link', content: 'pwned' }, 'DENIED_SYMLINK');
    assert.equal(fs.readFileSync(path.join(outsideEdit, 'victim.txt'), 'utf8'), 'outside original\n');
    assert.ok(fs.lstatSync(path.join(wt, 'victim_link')).isSymbolicLink());
    await expectDenied(tokW, 'local_edit', { path: 'proc_root', content: 'pwned' }, 'DENIED_SYMLINK');
    assert.ok(fs.lstatSync(path.join(wt, 'proc_root')).isSymbolicLink());
  });
  test('onto a hardlinked file → DENIED_HARDLINK, both names unchanged', async () => {
    await expectDenied(tokW, 'local_edit', { path: 'hard_edit.txt', content: 'pwned' }, 'DENIED_HARDLINK');
    assert.equal(fs.readFileSync(path.join(outsideEdit, 'victim_hl.txt'), 'utf8'), 'outside hardlinked original\n');
    assert.equal(fs.readFileSync(path.join(wt, 'hard_edit.txt'), 'utf8'), 'outside hardlinked original\n');
    assert.equal(fs.statSync(path.join(wt, 'hard_edit.txt')).nlink, 2);
  });
  test('onto a FIFO, socket or directory → DENIED_FILE, promptly', async () => {
    for (const p of ['fifo', 'sock', 'a']) {
      const t0 = Date.now();
      const resp = await call(tokW, 'local_edit', { path: p, content: 'x' }, { timeout: 5000 });
      assertDenied(resp, 'DENIED_FILE', `edit ${p}`);
      assert.ok(Date.now() - t0 < 3000);
    }
    assert.ok(fs.statSync(path.join(wt, 'fifo')).isFIFO());
    assert.ok(fs.statSync(path.join(wt, 'sock')).isSocket());
  });
});

describe('local_search queries and JSON-RPC argument errors', () => {
  test('query > 4096 chars → DENIED_QUERY; 4096 is fine', async () => {
    await expectDenied(tokR, 'local_search', { path: '.', query: 'q'.repeat(4097) }, 'DENIED_QUERY');
    await expectDenied(tokR, 'local_search', { path: '.', query: 'q'.repeat(10000), regex: true }, 'DENIED_QUERY');
    assertOk(await call(tokR, 'local_search', { path: '.', query: 'q'.repeat(4096) }), '4096-char query');
  });
  test('invalid regex → DENIED_QUERY', async () => {
    for (const q of ['(', '[a-', 'a{2,1}', '*x', '(?<', '\\']) {
      await expectDenied(tokR, 'local_search', { path: '.', query: q, regex: true }, 'DENIED_QUERY');
    }
  });
  test('unknown tool → -32602', async () => {
    for (const name of ['local_nope', 'LOCAL_READ', 'local_read ', '']) {
      const resp = await call(tokR, name, { path: 'hello.txt' });
      assert.equal(resp.error?.code, -32602, `${JSON.stringify(name)}: ${JSON.stringify(resp)}`);
      assert.equal(resp.result, undefined);
    }
  });
  test('wrong argument types → -32602', async () => {
    for (const [name, args] of [
      ['local_read', { path: 5 }],
      ['local_read', { path: ['hello.txt'] }],
      ['local_read', { path: null }],
      ['local_read', {}],
      ['local_read', { path: 'hello.txt', extra: 1 }],
      ['local_list', { path: { x: 1 } }],
      ['local_search', { path: '.', query: 7 }],
      ['local_search', { path: '.', query: 'x', regex: 'yes' }],
      ['local_edit', { path: 'hello.txt', content: 5 }],
    ]) {
      const resp = await call(name === 'local_edit' ? tokW : tokR, name, args);
      assert.equal(resp.error?.code, -32602, `${name} ${JSON.stringify(args)}: ${JSON.stringify(resp)}`);
    }
    assert.equal(fs.readFileSync(path.join(wt, 'hello.txt'), 'utf8'), 'hello\n');
  });
});

// ---- the race: d/ is swapped for a symlink to an outside dir while local_read runs ----
const SWAPPER_PY = `
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
a, b = sys.argv[1].encode(), sys.argv[2].encode()
n = 0
def stop(*_):
    print(n, flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        sys.stderr.write("renameat2 failed: %d\\n" % ctypes.get_errno())
        os._exit(3)
    n += 1
`;

// Fallback without renameat2: non-atomic rename dance (also produces NOT_FOUND windows).
const SWAPPER_JS = `
const fs = require('fs');
const [d, link, hold] = process.argv.slice(1);
let n = 0;
process.on('SIGTERM', () => { console.log(n); process.exit(0); });
console.log('ready');
(function loop() {
  for (let i = 0; i < 1000; i++) {
    fs.renameSync(d, hold); fs.renameSync(link, d); fs.renameSync(d, link); fs.renameSync(hold, d); n++;
  }
  setImmediate(loop);
})();
`;

/** Starts a child that swaps wt/<dir> with wt/<link> (a symlink) in a tight loop. */
async function startSwapper(dir, link) {
  let swapper;
  const py = spawnSync('python3', ['-c', 'import ctypes; ctypes.CDLL(None).renameat2'], { stdio: 'ignore' });
  if (py.status === 0 && !process.env.TW_SEC_NODE_SWAPPER) {
    swapper = spawn('python3', ['-c', SWAPPER_PY, path.join(wt, dir), path.join(wt, link)], { stdio: ['ignore', 'pipe', 'pipe'] });
  } else {
    swapper = spawn(process.execPath, ['-e', SWAPPER_JS, path.join(wt, dir), path.join(wt, link), path.join(wt, `${dir}.hold`)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  }
  let out = '';
  let err = '';
  swapper.stdout.setEncoding('utf8').on('data', (x) => (out += x));
  swapper.stderr.setEncoding('utf8').on('data', (x) => (err += x));
  const exited = new Promise((r) => swapper.on('exit', (code, sig) => r({ code, sig })));
  for (let i = 0; !out.includes('ready'); i++) {
    if (i >= 200) {
      swapper.kill('SIGKILL');
      throw new Error(`swapper did not start: ${err}`);
    }
    await sleep(25);
  }
  return {
    /** Stops the swapper; resolves the number of swaps (throws if it failed). */
    async stop() {
      if (swapper.exitCode === null) swapper.kill('SIGTERM');
      const ex = await exited;
      assert.equal(ex.code, 0, `swapper failed: ${err}`);
      return Number(out.replace('ready', '').trim());
    },
    kill() {
      if (swapper.exitCode === null) swapper.kill('SIGKILL');
    },
  };
}

/** Runs `total` calls over `conns` keep-alive connections; classify(resp) → outcome key. */
async function hammer(token, tool, argsFn, total, conns, classify) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: conns });
  const counts = {};
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const i = next++;
      const resp = await d.callTool(token, tool, argsFn(i), { agent });
      responses++;
      const key = classify(resp);
      counts[key] = (counts[key] ?? 0) + 1;
    }
  };
  try {
    await Promise.all(Array.from({ length: conns }, worker));
  } finally {
    agent.destroy();
  }
  return counts;
}

function outcome(resp) {
  if (resp.error) return `rpc${resp.error.code}`;
  if (resp.result?.isError) return resp.result.structuredContent?.error ?? 'isError-without-code';
  return 'OK';
}

describe('race: directory swapped for a symlink to an outside directory', () => {
  test('10,000 local_read: no response ever contains the outside secret', { timeout: 90000 }, async () => {
    const raceOut = path.join(base, 'race_outside');
    writeFile(path.join(raceOut, 'file.txt'), `race secret ${SECRET}\n`);
    writeFile(path.join(wt, 'd/file.txt'), 'inside d\n');
    fs.symlinkSync(raceOut, path.join(wt, 'dswap'));
    const job = await d.createJob({ worktree: wt });
    const sw = await startSwapper('d', 'dswap');
    try {
      const leaks = [];
      const t0 = Date.now();
      const TOTAL = 10000;
      const counts = await hammer(job.token, 'local_read', () => ({ path: 'd/file.txt' }), TOTAL, 8, (resp) => {
        const s = JSON.stringify(resp);
        const key = outcome(resp);
        if (s.includes(SECRET) || s.includes('race secret') || s.includes(raceOut)) leaks.push(s);
        else if (key === 'OK' && resp.result.structuredContent?.content !== 'inside d\n') leaks.push(s);
        return key;
      });
      const swaps = await sw.stop();
      console.log(`race: ${TOTAL} local_read of d/file.txt in ${Date.now() - t0} ms, ${swaps} swaps; outcomes ${JSON.stringify(counts)}`);
      assert.deepEqual(leaks.slice(0, 3), [], 'a response carried content from outside the worktree');
      for (const k of Object.keys(counts)) {
        assert.ok(['OK', 'DENIED_SYMLINK', 'NOT_FOUND'].includes(k), `unexpected outcome ${k} x${counts[k]}`);
      }
      assert.ok(swaps > 1000, `the swapper made only ${swaps} swaps`);
      assert.ok((counts.DENIED_SYMLINK ?? 0) > 0, 'the race never observed the symlink state');
    } finally {
      sw.kill();
    }
  });

  test('2,000 local_edit: the outside directory is never written', { timeout: 60000 }, async () => {
    const victimDir = path.join(base, 'race_edit_outside');
    writeFile(path.join(victimDir, 'file.txt'), 'outside victim\n');
    writeFile(path.join(wt, 'e/file.txt'), 'inside e\n');
    fs.symlinkSync(victimDir, path.join(wt, 'eswap'));
    const job = await d.createJob({ worktree: wt, access: 'write' });
    const sw = await startSwapper('e', 'eswap');
    let counts;
    let swaps;
    const t0 = Date.now();
    try {
      counts = await hammer(job.token, 'local_edit', (i) => ({ path: 'e/file.txt', content: `edit ${i}\n` }), 2000, 4, outcome);
      swaps = await sw.stop();
    } finally {
      sw.kill();
    }
    console.log(`race: 2000 local_edit of e/file.txt in ${Date.now() - t0} ms, ${swaps} swaps; outcomes ${JSON.stringify(counts)}`);
    assert.deepEqual(fs.readdirSync(victimDir), ['file.txt'], 'a file (temp or new) appeared in the outside dir');
    assert.equal(fs.readFileSync(path.join(victimDir, 'file.txt'), 'utf8'), 'outside victim\n');
    assert.ok((counts.OK ?? 0) > 0, 'no edit ever succeeded');
    for (const k of Object.keys(counts)) {
      assert.ok(['OK', 'DENIED_SYMLINK', 'NOT_FOUND'].includes(k), `unexpected outcome ${k} x${counts[k]}`);
    }
  });
});

describe('summary', () => {
  test('no response carried the secret', () => {
    assert.ok(responses > 10000, `only ${responses} responses checked`);
  });
});
