// Long calls as the official MCP TypeScript SDK client sees them (issue 7): a tools/call with a
// progress token streams notifications/progress (elapsed time, output bytes) before its result,
// `resetTimeoutOnProgress` keeps a 90-second run alive past the request timeout, and
// notifications/cancelled (AbortSignal) kills the call's sandbox so nothing of it runs on.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sleep, startDaemon } from './lib/daemon.mjs';

const MARKER = `tw-progress-${process.pid}-${Date.now()}`;
const LONG_S = Number(process.env.TOOLWARDEN_LONG_RUN_S || 90);

let d;
let client;

// Processes whose command line carries the marker (the sandboxed sleeper).
function markerProcs() {
  const out = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.includes(MARKER)) out.push(Number(pid));
    } catch {
      /* gone */
    }
  }
  return out;
}

before(async () => {
  d = await startDaemon({
    config: {
      commands: [
        { id: 'ticks', argv: ['/bin/sh', '-c', 'for i in 1 2 3 4; do echo tick $i; sleep 1; done'], timeout_s: 30 },
        { id: 'long', argv: ['/bin/sh', '-c', `sleep ${LONG_S}; echo done`], timeout_s: LONG_S + 60 },
        // the shell's own command line carries the marker while it waits for sleep
        { id: 'hang', argv: ['/bin/sh', '-c', `sleep 300; : ${MARKER}`], timeout_s: 600 },
      ],
    },
  });
  const job = await d.createJob({ command: ['ticks', 'long', 'hang'] });
  const transport = new StreamableHTTPClientTransport(new URL(d.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${job.token}` } },
  });
  client = new Client({ name: 'toolwarden-e2e-progress', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
});

after(async () => {
  await client?.close().catch(() => {});
  await d?.kill();
});

test('a call with onprogress streams progress notifications, then its result', async () => {
  const seen = [];
  const r = await client.callTool({ name: 'local_test', arguments: { command: 'ticks' } }, undefined, {
    onprogress: (p) => seen.push(p),
  });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r.structuredContent.stdout, 'tick 1\ntick 2\ntick 3\ntick 4\n');
  assert.ok(seen.length >= 2, `expected progress notifications, got ${JSON.stringify(seen)}`);
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, 'progress must grow');
  assert.match(seen.at(-1).message, /^running for \d+ s, \d+ bytes of output$/);
  // The output counter moves while the command prints.
  const bytes = seen.map((p) => Number(/(\d+) bytes/.exec(p.message)[1]));
  assert.ok(bytes.at(-1) > 0, `output bytes never moved: ${JSON.stringify(seen)}`);
});

test(`resetTimeoutOnProgress keeps a ${LONG_S}-second run alive past a 10-second request timeout`, async () => {
  let notes = 0;
  const started = Date.now();
  const r = await client.callTool({ name: 'local_test', arguments: { command: 'long' } }, undefined, {
    timeout: 10_000,
    resetTimeoutOnProgress: true,
    maxTotalTimeout: (LONG_S + 60) * 1000,
    onprogress: () => notes++,
  });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r.structuredContent.stdout, 'done\n');
  assert.ok(Date.now() - started >= LONG_S * 1000);
  assert.ok(notes >= LONG_S / 2, `only ${notes} progress notifications in ${LONG_S} s`);
});

test('cancelling through the SDK kills the sandbox; nothing of it is left running', async () => {
  const ctl = new AbortController();
  const call = client.callTool({ name: 'local_test', arguments: { command: 'hang' } }, undefined, {
    signal: ctl.signal,
    onprogress: () => {},
  });
  // Wait until the sandboxed sleeper exists, then cancel.
  for (let i = 0; i < 100 && markerProcs().length === 0; i++) await sleep(50);
  assert.ok(markerProcs().length > 0, 'the sandboxed process never started');
  ctl.abort('the user pressed stop');
  await assert.rejects(call);
  for (let i = 0; i < 40 && markerProcs().length > 0; i++) await sleep(50);
  assert.deepEqual(markerProcs(), [], 'a process of the cancelled sandbox is still running');
  // The call is on record as cancelled.
  const audit = await d.cli(['audit', '--json', '--limit', '50']);
  const events = JSON.parse(audit.stdout);
  const done = events.filter((e) => e.type === 'tool.completed' && e.data.tool === 'local_test');
  assert.ok(done.some((e) => e.data.code === 'CANCELLED'), JSON.stringify(done.map((e) => e.data.code)));
});
