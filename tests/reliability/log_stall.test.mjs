// A reader of the daemon's stderr that stops reading (journald under pressure, a paused pager,
// a terminal on Ctrl-S) must not stop the daemon. The test pauses its end of the stderr pipe
// so the pipe fills, then:
//   1. 3,000 local_read calls (16 at a time) and a ping all answer, each within its timeout;
//   2. once the reader resumes, every line on stderr is a whole log line, lines that did not fit
//      the daemon's log queue are counted in `log.dropped lines=N`, and the tool.completed lines
//      written plus the lines counted dropped account for every call;
//   3. with the pipe stalled again (and full), SIGTERM still ends the daemon with status 0: its
//      log writer gives up on stderr after its grace instead of holding the exit.
// Before the log sink had a thread of its own, the I/O thread blocked in write(2) after some
// 550 calls and the daemon stopped answering anything, ping included.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { cleanupTemps, figure, mkTemp, nowMs, sleep, startDaemon, writeFile } from './lib/reliability.mjs';

const CALLS = 3000;
const CONCURRENCY = 16;
let d;
let token;

after(async () => {
  if (d) await d.kill().catch(() => {});
  cleanupTemps();
});

before(async () => {
  const wt = mkTemp('tw-logstall-wt-');
  writeFile(path.join(wt, 'a.txt'), 'hello\n');
  d = await startDaemon();
  ({ token } = await d.createJob({ worktree: wt }));
});

/** CALLS local_read calls, CONCURRENCY at a time; resolves the answers that were not OK (it
 * stops starting calls after the first). */
async function readMany() {
  const bad = [];
  let next = 0;
  const worker = async () => {
    while (next < CALLS && bad.length === 0) {
      next++;
      try {
        const r = await d.callTool(token, 'local_read', { path: 'a.txt' }, { timeout: 15000 });
        if (r.result?.isError !== false) bad.push(JSON.stringify(r).slice(0, 200));
      } catch (e) {
        bad.push(String(e.message ?? e));
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return bad;
}

/** Stops reading the daemon's stderr: its pipe fills with what the daemon writes next. */
function stall() {
  d.proc.stderr.pause();
}

test('a stalled stderr reader costs dropped log lines, not answers', async () => {
  stall();
  const t0 = nowMs();
  const bad = await readMany();
  assert.deepEqual(bad, [], 'every call answers while nobody reads stderr');
  const ping = await d.rpc(token, 'ping', {}, { timeout: 15000 });
  assert.deepEqual(ping.result, {});
  figure(`log_stall: ${CALLS} calls with stderr stalled in ${(nowMs() - t0).toFixed(0)} ms`);

  d.proc.stderr.resume();
  const deadline = nowMs() + 15000;
  while (!/log\.dropped lines=\d+/.test(d.stderr)) {
    assert.ok(nowMs() < deadline, `no log.dropped line after the reader resumed: ${d.stderr.slice(-400)}`);
    await sleep(50);
  }
  await sleep(200); // the lines queued after the drop follow at once
  // Under ASan the sanitizer runtime writes a note of its own to the same stderr when the
  // canary's sandbox child switches stacks: three lines that are not the daemon's log.
  const asanNote =
    /==\d+==WARNING: ASan is ignoring requested __asan_handle_no_return[^\n]*\nFalse positive error reports may follow\nFor details see [^\n]*\n/g;
  const lines = d.stderr.replace(asanNote, '').split('\n');
  assert.equal(lines.pop(), '', 'stderr ends with a whole line');
  let completed = 0;
  let dropped = 0;
  for (const line of lines) {
    assert.match(line, /^\S+ (DEBUG|INFO|WARN|ERROR) [a-z_.]+( [a-z_]+=("([^"\\]|\\.)*"|[^ "]+))*$/, `a whole line: ${line.slice(0, 200)}`);
    if (/ INFO tool\.completed .*tool=local_read code=OK/.test(line)) completed++;
    const m = / WARN log\.dropped lines=(\d+) /.exec(line);
    if (m) dropped += Number(m[1]);
  }
  figure(`log_stall: ${completed} tool.completed lines written, ${dropped} lines counted dropped`);
  assert.ok(dropped > 0, 'the stall filled the queue (otherwise this test proves nothing)');
  // Dropped lines may include others (the ping's, none today); tool.completed are most of them.
  assert.ok(completed + dropped >= CALLS, `${completed} written + ${dropped} dropped < ${CALLS} calls`);
});

test('SIGTERM ends the daemon while its stderr is stalled', async () => {
  stall();
  const bad = await readMany(); // fills the pipe and the queue again
  assert.deepEqual(bad, []);
  const t0 = nowMs();
  const r = await d.stop(20000);
  figure(`log_stall: stopped in ${(nowMs() - t0).toFixed(0)} ms with stderr stalled`);
  assert.deepEqual(r, { code: 0, signal: null }, 'a clean exit, not the SIGKILL after 20 s');
  d.proc.stderr.resume();
});
