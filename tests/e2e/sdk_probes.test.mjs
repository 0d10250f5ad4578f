// Probes end to end through the official MCP TypeScript SDK client (SPEC §12): a job granted
// `probes` plans on its own worktree (captured in its scopes), runs the probe in the sandbox and
// reads it back; every call is audited with its sequence number, a run is cancellable, and a
// job never reaches another's snapshot or probe.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sleep, startDaemon } from './lib/daemon.mjs';

const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');
let d;
let job;
let client;

async function connect(token, name) {
  const transport = new StreamableHTTPClientTransport(new URL(d.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const c = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  await c.connect(transport);
  return c;
}

async function audit() {
  const r = await d.cli(['audit', '--json', '--limit', '100000']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

before(async () => {
  d = await startDaemon({
    config: { probe_policies: [{ id: 'tests', timeout_s: 60, max_output_bytes: 100000 }] },
  });
  fs.mkdirSync(path.join(d.worktree, 'src'));
  fs.writeFileSync(path.join(d.worktree, 'src', 'version.txt'), '1.4.2\n');
  fs.writeFileSync(path.join(d.worktree, 'notes.txt'), 'outside the job scope\n');
  job = await d.createJob({ tool: ['probes'], allow: ['src/**'] });
  client = await connect(job.token, 'toolwarden-e2e-probes');
});

after(async () => {
  await client?.close().catch(() => {});
  await d?.kill();
});

test('tools/list describes the three probe tools', async () => {
  assert.deepEqual(job.tools, ['probe_plan', 'probe_run', 'probe_show']);
  const { tools } = await client.listTools();
  assert.deepEqual(
    tools.map((t) => t.name),
    ['probe_plan', 'probe_run', 'probe_show'],
  );
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.equal(t.outputSchema.type, 'object', t.name);
    assert.equal(typeof t.annotations.readOnlyHint, 'boolean', t.name);
  }
  const plan = tools.find((t) => t.name === 'probe_plan');
  assert.deepEqual(plan.inputSchema.required, ['hypothesis', 'command', 'working_directory', 'oracle', 'policy_id']);
});

test('probe_plan then probe_run then probe_show', async () => {
  const planned = await client.callTool({
    name: 'probe_plan',
    arguments: {
      hypothesis: 'the version is 1.4.2 and notes.txt is not part of the snapshot',
      command: ['sh', '-c', 'cat version.txt; test ! -e ../notes.txt'],
      working_directory: 'src',
      oracle: { type: 'stdout_contains', expected: '1.4.2', source: 'user_requirement', reference: 'release notes' },
      policy_id: 'tests',
    },
  });
  assert.equal(planned.isError, false, JSON.stringify(planned));
  const p = planned.structuredContent;
  assert.match(p.probe_id, /^probe_/);
  assert.match(p.plan_sha256, /^[0-9a-f]{64}$/);
  // Captured for the job, in its scopes: src/version.txt only.
  assert.equal(p.snapshot.files, 1);
  assert.equal(p.snapshot.skipped.out_of_scope, 2); // hello.txt, notes.txt
  assert.equal(p.plan.snapshot_id, p.snapshot.snapshot_id);

  const ran = await client.callTool({ name: 'probe_run', arguments: { probe_id: p.probe_id } });
  assert.equal(ran.isError, false, JSON.stringify(ran));
  const r = ran.structuredContent;
  assert.equal(r.state, 'completed');
  assert.equal(r.verdict, 'supports', JSON.stringify(r));
  assert.equal(r.stdout, '1.4.2\n');
  assert.equal(r.stdout_sha256, sha256('1.4.2\n'));
  assert.equal(r.provenance.plan_sha256, p.plan_sha256);

  const shown = await client.callTool({ name: 'probe_show', arguments: { probe_id: p.probe_id } });
  assert.equal(shown.isError, false);
  assert.equal(shown.structuredContent.plan_sha256, p.plan_sha256);
  assert.deepEqual(
    shown.structuredContent.runs.map((x) => [x.run_id, x.verdict]),
    [[r.run_id, 'supports']],
  );

  // Audited as tool calls: the probe events carry the job and the call's sequence number.
  const events = (await audit()).filter((e) => e.job_id === job.job_id);
  const bySeq = (type) => events.filter((e) => e.type === type).map((e) => e.seq);
  assert.deepEqual(bySeq('tool.requested'), [1, 2, 3]);
  assert.deepEqual(bySeq('snapshot.captured'), [1]);
  assert.deepEqual(bySeq('probe.planned'), [1]);
  assert.deepEqual(bySeq('probe.started'), [2]);
  assert.deepEqual(bySeq('probe.completed'), [2]);
  assert.deepEqual(
    events.filter((e) => e.type === 'tool.completed').map((e) => [e.data.tool, e.data.code]),
    [
      ['probe_plan', 'OK'],
      ['probe_run', 'OK'],
      ['probe_show', 'OK'],
    ],
  );

  // A second plan may reuse the job's own snapshot.
  const reuse = await client.callTool({
    name: 'probe_plan',
    arguments: {
      snapshot_id: p.snapshot.snapshot_id,
      hypothesis: 'same',
      command: ['true'],
      working_directory: '.',
      oracle: { type: 'exit_code', expected: 0, source: 'user_requirement', reference: 'r' },
      policy_id: 'tests',
    },
  });
  assert.equal(reuse.isError, false, JSON.stringify(reuse));
  assert.equal(reuse.structuredContent.snapshot, undefined);
});

test('a job reaches neither the user\'s snapshots nor another job\'s probes', async () => {
  const snap = await d.cli(['snapshot', 'capture', '--worktree', d.worktree]);
  assert.equal(snap.code, 0, snap.stderr);
  const userSnap = JSON.parse(snap.stdout);
  const viaUser = await client.callTool({
    name: 'probe_plan',
    arguments: {
      snapshot_id: userSnap.snapshot_id,
      hypothesis: 'notes.txt can be read',
      command: ['cat', 'notes.txt'],
      working_directory: '.',
      oracle: { type: 'exit_code', expected: 0, source: 'user_requirement', reference: 'r' },
      policy_id: 'tests',
    },
  });
  assert.equal(viaUser.isError, true);
  assert.deepEqual(viaUser.structuredContent, { error: 'NOT_FOUND' });

  const other = await d.createJob({ tool: ['probes'] });
  const otherClient = await connect(other.token, 'toolwarden-e2e-other');
  try {
    const theirs = await otherClient.callTool({
      name: 'probe_plan',
      arguments: {
        hypothesis: 'x',
        command: ['true'],
        working_directory: '.',
        oracle: { type: 'exit_code', expected: 0, source: 'user_requirement', reference: 'r' },
        policy_id: 'tests',
      },
    });
    assert.equal(theirs.isError, false, JSON.stringify(theirs));
    for (const name of ['probe_run', 'probe_show']) {
      const res = await client.callTool({ name, arguments: { probe_id: theirs.structuredContent.probe_id } });
      assert.deepEqual(res.structuredContent, { error: 'NOT_FOUND' }, name);
    }
  } finally {
    await otherClient.close().catch(() => {});
  }
});

test('a probe_run is cancellable: the sandbox dies and the reservation is released', async () => {
  const planned = await client.callTool({
    name: 'probe_plan',
    arguments: {
      hypothesis: 'it takes a while',
      command: ['sleep', '59.75'],
      working_directory: '.',
      oracle: { type: 'exit_code', expected: 0, source: 'user_requirement', reference: 'r' },
      policy_id: 'tests',
    },
  });
  const probeId = planned.structuredContent.probe_id;
  const ac = new AbortController();
  const running = client.callTool({ name: 'probe_run', arguments: { probe_id: probeId } }, undefined, {
    signal: ac.signal,
  });
  running.catch(() => {});
  for (let i = 0; i < 200; i++) {
    if ((await audit()).some((e) => e.type === 'probe.started' && e.data.probe_id === probeId)) break;
    await sleep(25);
  }
  await sleep(150);
  ac.abort();
  await assert.rejects(running);
  let events = [];
  for (let i = 0; i < 200; i++) {
    events = (await audit()).filter((e) => e.data?.probe_id === probeId);
    if (events.some((e) => e.type === 'probe.abandoned')) break;
    await sleep(25);
  }
  assert.deepEqual(
    events.map((e) => e.type),
    ['probe.planned', 'probe.started', 'probe.abandoned'],
  );
  assert.equal(events[2].data.why, 'cancelled');
  const shown = await client.callTool({ name: 'probe_show', arguments: { probe_id: probeId } });
  assert.deepEqual(shown.structuredContent.running, []);
  assert.deepEqual(shown.structuredContent.runs, []);
  const verify = await d.cli(['audit', 'verify']);
  assert.equal(verify.code, 0, verify.stdout);
});
