// Clients that send tools/call and never read the answer (SPEC §5 limits; the quality bar: slow
// requests get a bounded cost). A 1 MiB file of '"' makes a local_read answer of 6 MiB (escaped
// once in structuredContent, twice in the text block). 40 connections of one job ask for it and
// never read. Asserted:
//   - for 4 s, no more of those calls complete than the job's max_concurrent_calls (4): a call's
//     slot is held until its answer is written, so at most 4 unread answers sit in the daemon's
//     memory. Before, all 40 completed at once and their answers stayed until the 15 s write
//     timeout (300 such connections took 1.8 GiB). The daemon's RSS is printed (in a regular
//     build: +30 MiB, before +247 MiB; ASan's quarantine adds its own);
//   - another job is served meanwhile (the slots are per job);
//   - once those connections are gone, the job answers again.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { cleanupTemps, figure, mib, mkTemp, rssKiB, sleep, startDaemon, storeQuery, writeFile } from './lib/reliability.mjs';

const HUNG = 40;
const SLOTS = 4; // SPEC §5 default max_concurrent_calls
let d;
let jobA;
let jobAId;
let jobB;
const sockets = [];

after(async () => {
  for (const s of sockets) s.destroy();
  if (d) await d.kill().catch(() => {});
  cleanupTemps();
});

before(async () => {
  const wt = mkTemp('tw-slowreader-wt-');
  writeFile(path.join(wt, 'big.txt'), '"'.repeat(1024 * 1024 - 16));
  writeFile(path.join(wt, 'a.txt'), 'hello\n');
  d = await startDaemon();
  ({ token: jobA, job_id: jobAId } = await d.createJob({ worktree: wt }));
  jobB = (await d.createJob({ worktree: wt })).token;
});

/** A raw connection that sends one local_read of big.txt for `token` and reads nothing. */
function hangingCall(token) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'local_read', arguments: { path: 'big.txt' } } });
  const req =
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const s = net.connect(d.port, '127.0.0.1', () => {
    s.pause();
    s.write(req);
  });
  s.on('error', () => {});
  sockets.push(s);
}

test('answers nobody reads hold their job slots, not unbounded memory', async () => {
  const big = await d.callTool(jobA, 'local_read', { path: 'big.txt' }, { timeout: 30000 });
  assert.equal(big.result?.isError, false, JSON.stringify(big).slice(0, 200));
  await sleep(200);
  const base = rssKiB(d.proc.pid);

  for (let i = 0; i < HUNG; i++) hangingCall(jobA);
  let peak = base;
  for (let t = 0; t < 40; t++) {
    await sleep(100);
    peak = Math.max(peak, rssKiB(d.proc.pid));
  }
  const completed = storeQuery(
    d.stateDir,
    `SELECT count(*) AS n FROM events WHERE type = 'tool.completed' AND job_id = '${jobAId}'`,
  )[0].n - 1; // less the read above
  figure(
    `slow_reader: ${HUNG} calls of one job whose 6 MiB answers nobody reads: ${completed} completed in 4 s; ` +
      `daemon RSS ${mib(base)} MiB before, peak ${mib(peak)} MiB`,
  );
  assert.ok(completed >= 1, 'the hanging calls reached the daemon (premise)');
  assert.ok(completed <= SLOTS, `${completed} calls completed while their answers went unread (at most ${SLOTS})`);

  const other = await d.callTool(jobB, 'local_read', { path: 'a.txt' }, { timeout: 10000 });
  assert.equal(other.result?.isError, false, 'another job is served meanwhile');

  for (const s of sockets.splice(0)) s.destroy();
  const again = await d.callTool(jobA, 'local_read', { path: 'a.txt' }, { timeout: 60000 });
  assert.equal(again.result?.isError, false, 'the job answers again once its readers are gone');
});
