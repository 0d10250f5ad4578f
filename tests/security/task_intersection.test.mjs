// SPEC §4: `job.create` with a `task` (what the agent's task package asks for). The effective
// grant is the intersection with the approval: scopes contained in both, write only if both say
// write, and required_commands equal to the granted commands as sets, else the job is refused
// with a message naming the mismatch. Driven through the admin API over admin.sock.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanupTemps, mkTemp, startDaemon, writeFile } from './lib/harness.mjs';

let d;
let wt;
const TRUE_BIN = fs.existsSync('/usr/bin/true') ? '/usr/bin/true' : '/bin/true';

before(async () => {
  const base = mkTemp('tw-sec-task-');
  wt = path.join(base, 'wt');
  writeFile(path.join(wt, 'top.txt'), 'top\n');
  writeFile(path.join(wt, 'src/a.txt'), 'src a\n');
  writeFile(path.join(wt, 'src/lib/x.txt'), 'src lib x\n');
  writeFile(path.join(wt, 'srcfoo/b.txt'), 'prefix trap\n');
  writeFile(path.join(wt, 'docs/b.txt'), 'docs b\n');
  d = await startDaemon({
    base,
    config: {
      commands: [
        { id: 'unit', argv: [TRUE_BIN] },
        { id: 'lint', argv: [TRUE_BIN] },
      ],
    },
  });
});

after(async () => {
  await d?.kill();
  cleanupTemps();
});

/** job.create over the admin API; resolves the JSON-RPC response object. */
function create(params) {
  return d.admin('job.create', { worktree: wt, ...params });
}

async function createOk(params) {
  const r = await create(params);
  assert.equal(r.error, undefined, `job.create ${JSON.stringify(params)} refused: ${JSON.stringify(r.error)}`);
  assert.equal(typeof r.result?.token, 'string');
  return r.result;
}

function code(resp) {
  if (resp.error) return `rpc${resp.error.code}`;
  return resp.result?.isError ? resp.result.structuredContent?.error : 'OK';
}

async function readCodes(token, paths) {
  const out = {};
  for (const p of paths) out[p] = code(await d.callTool(token, 'local_read', { path: p }));
  return out;
}

const ALL = ['top.txt', 'src/a.txt', 'src/lib/x.txt', 'srcfoo/b.txt', 'docs/b.txt'];

describe('scopes: contained in both', () => {
  test('approval ** + task src → only src readable', async () => {
    const j = await createOk({ access: 'read', allowed_paths: ['**'], task: { allowed_paths: ['src'], access: 'read', required_commands: [] } });
    assert.deepEqual(await readCodes(j.token, ALL), {
      'top.txt': 'DENIED_SCOPE',
      'src/a.txt': 'OK',
      'src/lib/x.txt': 'OK',
      'srcfoo/b.txt': 'DENIED_SCOPE',
      'docs/b.txt': 'DENIED_SCOPE',
    });
    const s = await d.callTool(j.token, 'local_search', { path: '.', query: 'b' });
    assert.notEqual(s.result?.isError, true, JSON.stringify(s));
    for (const m of s.result.structuredContent.matches) assert.ok(m.path.startsWith('src/'), `search returned ${m.path}`);
  });
  test('approval src/** + task ** → only src readable', async () => {
    const j = await createOk({ access: 'read', allowed_paths: ['src/**'], task: { allowed_paths: ['**'], access: 'read', required_commands: [] } });
    assert.deepEqual(await readCodes(j.token, ALL), {
      'top.txt': 'DENIED_SCOPE',
      'src/a.txt': 'OK',
      'src/lib/x.txt': 'OK',
      'srcfoo/b.txt': 'DENIED_SCOPE',
      'docs/b.txt': 'DENIED_SCOPE',
    });
  });
  test('approval src + task src/lib → only src/lib readable', async () => {
    const j = await createOk({ access: 'read', allowed_paths: ['src'], task: { allowed_paths: ['src/lib/'], access: 'read', required_commands: [] } });
    assert.deepEqual(await readCodes(j.token, ALL), {
      'top.txt': 'DENIED_SCOPE',
      'src/a.txt': 'DENIED_SCOPE',
      'src/lib/x.txt': 'OK',
      'srcfoo/b.txt': 'DENIED_SCOPE',
      'docs/b.txt': 'DENIED_SCOPE',
    });
  });
  test('approval src + docs, task src → docs not readable', async () => {
    const j = await createOk({ access: 'read', allowed_paths: ['src', 'docs'], task: { allowed_paths: ['src'], access: 'read', required_commands: [] } });
    const codes = await readCodes(j.token, ALL);
    assert.equal(codes['docs/b.txt'], 'DENIED_SCOPE');
    assert.equal(codes['src/a.txt'], 'OK');
  });
  test('approval exact file + task its dir → only that file', async () => {
    const j = await createOk({ access: 'read', allowed_paths: ['src/a.txt'], task: { allowed_paths: ['src/**'], access: 'read', required_commands: [] } });
    const codes = await readCodes(j.token, ALL);
    assert.deepEqual(codes, {
      'top.txt': 'DENIED_SCOPE',
      'src/a.txt': 'OK',
      'src/lib/x.txt': 'DENIED_SCOPE',
      'srcfoo/b.txt': 'DENIED_SCOPE',
      'docs/b.txt': 'DENIED_SCOPE',
    });
  });
  test('disjoint scopes → refused, or nothing readable', async () => {
    const r = await create({ access: 'read', allowed_paths: ['src'], task: { allowed_paths: ['docs'], access: 'read', required_commands: [] } });
    if (r.error) {
      assert.equal(typeof r.error.message, 'string');
    } else {
      const codes = await readCodes(r.result.token, ALL);
      for (const p of ALL) assert.equal(codes[p], 'DENIED_SCOPE', `${p} readable with disjoint scopes`);
    }
  });
  test('task scopes that are absolute, contain .. or other globs → refused', async () => {
    for (const bad of [['/etc'], ['../x'], ['src/../docs'], ['src/*.txt'], ['src/?']]) {
      const r = await create({ access: 'read', allowed_paths: ['**'], task: { allowed_paths: bad, access: 'read', required_commands: [] } });
      assert.ok(r.error, `task allowed_paths ${JSON.stringify(bad)} accepted: ${JSON.stringify(r)}`);
    }
  });
});

describe('write only if both say write', () => {
  test('approval write + task read → local_edit DENIED_READ_ONLY', async () => {
    const j = await createOk({ access: 'write', allowed_paths: ['**'], task: { allowed_paths: ['**'], access: 'read', required_commands: [] } });
    const g = await d.admin('job.get', { job_id: j.job_id });
    assert.equal(g.result?.access, 'read', `effective access: ${JSON.stringify(g)}`);
    const r = await d.callTool(j.token, 'local_edit', { path: 'src/a.txt', content: 'pwned' });
    assert.equal(r.result?.structuredContent?.error, 'DENIED_READ_ONLY', JSON.stringify(r));
    assert.equal(r.result.isError, true);
    assert.ok(r.result.content[0].text.startsWith('DENIED_READ_ONLY:'));
    assert.equal(fs.readFileSync(path.join(wt, 'src/a.txt'), 'utf8'), 'src a\n');
  });
  test('approval read + task write → local_edit DENIED_READ_ONLY', async () => {
    const j = await createOk({ access: 'read', allowed_paths: ['**'], task: { allowed_paths: ['**'], access: 'write', required_commands: [] } });
    const r = await d.callTool(j.token, 'local_edit', { path: 'src/a.txt', content: 'pwned' });
    assert.equal(r.result?.structuredContent?.error, 'DENIED_READ_ONLY', JSON.stringify(r));
    assert.equal(fs.readFileSync(path.join(wt, 'src/a.txt'), 'utf8'), 'src a\n');
  });
  test('approval write + task write → local_edit works, within the intersected scope only', async () => {
    const j = await createOk({ access: 'write', allowed_paths: ['**'], task: { allowed_paths: ['docs'], access: 'write', required_commands: [] } });
    const ok = await d.callTool(j.token, 'local_edit', { path: 'docs/new.txt', content: 'written\n' });
    assert.notEqual(ok.result?.isError, true, JSON.stringify(ok));
    assert.equal(fs.readFileSync(path.join(wt, 'docs/new.txt'), 'utf8'), 'written\n');
    const no = await d.callTool(j.token, 'local_edit', { path: 'src/a.txt', content: 'pwned' });
    assert.equal(no.result?.structuredContent?.error, 'DENIED_SCOPE', JSON.stringify(no));
    assert.equal(fs.readFileSync(path.join(wt, 'src/a.txt'), 'utf8'), 'src a\n');
  });
});

describe('required_commands must equal the granted commands (as sets)', () => {
  test('equal sets → created (order does not matter)', async () => {
    await createOk({ access: 'read', commands: ['unit'], task: { allowed_paths: ['**'], access: 'read', required_commands: ['unit'] } });
    await createOk({ access: 'read', commands: ['unit', 'lint'], task: { allowed_paths: ['**'], access: 'read', required_commands: ['lint', 'unit'] } });
    await createOk({ access: 'read', commands: [], task: { allowed_paths: ['**'], access: 'read', required_commands: [] } });
  });
  const mismatches = [
    { grant: ['unit'], req: [], names: ['unit'] },
    { grant: [], req: ['unit'], names: ['unit'] },
    { grant: ['unit'], req: ['lint'], names: ['unit', 'lint'] },
    { grant: ['unit', 'lint'], req: ['unit'], names: ['lint'] },
    { grant: ['unit'], req: ['unit', 'lint'], names: ['lint'] },
  ];
  for (const m of mismatches) {
    test(`grant ${JSON.stringify(m.grant)} vs task ${JSON.stringify(m.req)} → refused naming ${m.names.join(', ')}`, async () => {
      const before = (await d.admin('job.list', {})).result;
      const r = await create({ access: 'read', commands: m.grant, task: { allowed_paths: ['**'], access: 'read', required_commands: m.req } });
      assert.ok(r.error, `created despite the mismatch: ${JSON.stringify(r)}`);
      assert.equal(r.result, undefined);
      assert.equal(typeof r.error.code, 'number');
      for (const n of m.names) assert.ok(r.error.message.includes(n), `message does not name ${n}: ${r.error.message}`);
      const afterList = (await d.admin('job.list', {})).result;
      assert.ok(Array.isArray(before) && Array.isArray(afterList), JSON.stringify(afterList));
      assert.equal(afterList.length, before.length, 'a refused job was stored');
    });
  }
});
