// The daemon's life around its calls: SIGTERM cancels in-flight calls (they answer CANCELLED)
// and exits 0; READY=1 reaches $NOTIFY_SOCKET; kill -9 in the middle of edits leaves every file
// with its old content or its new one, never a mix, and a store that verifies and continues.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {
  BIN, Daemon, cleanupTemps, denialCode, mkTemp, run, sleep, startDaemon, twEnv, writeFile,
} from './lib/harness.mjs';

const daemons = [];
after(async () => {
  for (const d of daemons) await d.kill().catch(() => {});
  cleanupTemps();
});

describe('SIGTERM is graceful', () => {
  test('an in-flight local_test answers CANCELLED, its sandbox is gone, the daemon exits 0', async () => {
    const base = mkTemp();
    const wt = path.join(base, 'wt');
    fs.mkdirSync(wt);
    const marker = `300.${process.pid}${Date.now() % 100000}`;
    const d = await startDaemon({
      base,
      config: { commands: [{ id: 'slow', argv: ['/bin/sleep', marker], timeout_s: 60 }] },
    });
    daemons.push(d);
    const job = await d.createJob({ worktree: wt, commands: ['slow'] });
    // Its own connection: Daemon.stop() drops the shared agent's sockets.
    const agent = new http.Agent({ keepAlive: false });
    const pending = d.callTool(job.token, 'local_test', { command: 'slow' }, { timeout: 20000, agent });
    // Wait until the sandboxed sleep exists, then ask the daemon to stop.
    const deadline = Date.now() + 5000;
    while (!sandboxProcesses(marker).length && Date.now() < deadline) await sleep(20);
    assert.ok(sandboxProcesses(marker).length > 0, 'the sandboxed command never started');
    const stopped = d.stop();
    const answer = await pending;
    assert.equal(denialCode(answer), 'CANCELLED', JSON.stringify(answer));
    const exit = await stopped;
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.equal(fs.existsSync(d.endpointPath), false, 'endpoint.json must be removed');
    await sleep(200);
    assert.deepEqual(sandboxProcesses(marker), [], 'no process of the sandbox may outlive the daemon');
    // The store was flushed: the cancelled call is on record and the chain verifies.
    const verify = await run([BIN, 'audit', 'verify'], { env: d.env });
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    const audit = JSON.parse((await run([BIN, 'audit', '--json'], { env: d.env })).stdout);
    const done = audit.filter((e) => e.type === 'tool.completed' && e.data.tool === 'local_test');
    assert.equal(done.length, 1);
    assert.equal(done[0].data.code, 'CANCELLED');
  });
});

describe('systemd readiness', () => {
  test('READY=1 is sent to $NOTIFY_SOCKET once both listeners are up', async () => {
    const base = mkTemp();
    const sock = path.join(base, 'notify.sock');
    // A datagram listener (Node has none for AF_UNIX datagrams): python3 prints what it gets.
    const listener = spawn('python3', ['-c', `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(${JSON.stringify(sock)})
print("bound", flush=True)
s.settimeout(15)
print(s.recv(4096).decode(), flush=True)
`]);
    let out = '';
    listener.stdout.setEncoding('utf8').on('data', (s) => (out += s));
    const t0 = Date.now();
    while (!out.includes('bound') && Date.now() - t0 < 5000) await sleep(20);
    assert.ok(out.includes('bound'), 'the notify listener did not start');
    const runtimeDir = path.join(base, 'run');
    const stateDir = path.join(base, 'state');
    fs.mkdirSync(runtimeDir, { mode: 0o700 });
    fs.mkdirSync(stateDir, { mode: 0o700 });
    const env = twEnv({ runtimeDir, stateDir, configPath: path.join(base, 'config.json'), extra: { NOTIFY_SOCKET: sock } });
    const d = new Daemon({ base, runtimeDir, stateDir, configPath: path.join(base, 'config.json'), env });
    daemons.push(d);
    await d.start();
    const exited = new Promise((r) => listener.on('close', r));
    await Promise.race([exited, sleep(5000)]);
    assert.match(out, /READY=1/);
    // By then endpoint.json exists: readiness comes after both listeners are up.
    assert.ok(fs.existsSync(d.endpointPath));
    await d.stop();
  });
});

describe('kill -9 in the middle of edits', () => {
  test('every file holds its old content or its new one, never a mix; the store verifies', async () => {
    const base = mkTemp();
    const wt = path.join(base, 'wt');
    fs.mkdirSync(wt);
    const size = 256 * 1024;
    const contents = ['A', 'B', 'C', 'D'].map((c) => c.repeat(size));
    const files = ['one.txt', 'two.txt', 'three.txt'];
    for (const f of files) writeFile(path.join(wt, f), contents[0]);
    const runtimeDir = path.join(base, 'run');
    const stateDir = path.join(base, 'state');
    let token;
    let lastSeq = 0;
    const rounds = 25;
    for (let round = 0; round < rounds; round++) {
      const d = await startDaemon({ base, runtimeDir, stateDir });
      daemons.push(d);
      if (!token) token = (await d.createJob({ worktree: wt, access: 'write' })).token;
      // Edits keep running on several connections until the daemon dies under them.
      let stop = false;
      const writers = files.map(async (f, i) => {
        for (let n = 0; !stop; n++) {
          try {
            await d.callTool(token, 'local_edit', { path: f, content: contents[(round + n + i) % 4] }, { timeout: 5000 });
          } catch {
            return; // the daemon is gone
          }
        }
      });
      await sleep(20 + Math.floor(Math.random() * 120));
      await d.kill();
      stop = true;
      await Promise.all(writers);
      for (const f of files) {
        const text = fs.readFileSync(path.join(wt, f), 'utf8');
        assert.equal(text.length, size, `${f} has ${text.length} bytes after round ${round}`);
        assert.ok(contents.includes(text), `${f} is a mix of contents after round ${round}`);
      }
      const verify = await run([BIN, 'audit', 'verify'], { env: d.env });
      assert.equal(verify.code, 0, `round ${round}: ${verify.stdout}${verify.stderr}`);
      const audit = JSON.parse((await run([BIN, 'audit', '--json', '--limit', '100000'], { env: d.env })).stdout);
      const seqs = audit.filter((e) => e.type === 'tool.requested').map((e) => e.seq);
      const max = seqs.length ? Math.max(...seqs) : 0;
      assert.ok(max >= lastSeq, `sequence went back from ${lastSeq} to ${max}`);
      assert.equal(new Set(seqs).size, seqs.length, 'a sequence number was used twice');
      lastSeq = max;
    }
    assert.ok(lastSeq > rounds, `only ${lastSeq} edits were recorded over ${rounds} rounds`);
    // A crash can leave a named temp file (between linkat and renameat); the next edit of the
    // same file replaces it, so after one more edit of each file none is left.
    const d = await startDaemon({ base, runtimeDir, stateDir });
    daemons.push(d);
    for (const f of files) {
      const r = await d.callTool(token, 'local_edit', { path: f, content: contents[1] });
      assert.equal(r.result?.isError, false, JSON.stringify(r));
    }
    await d.stop();
    const strays = fs.readdirSync(wt).filter((n) => n.startsWith('.toolwarden-edit-'));
    assert.deepEqual(strays, [], 'temp files left after a further edit of every file');
  });

  test('failed edits leave no temp files behind', async () => {
    const base = mkTemp();
    const wt = path.join(base, 'wt');
    fs.mkdirSync(wt);
    writeFile(path.join(wt, 'f.txt'), 'old');
    // A small file size limit, so an oversized edit is refused by the tool (DENIED_SIZE) rather
    // than by the HTTP body limit.
    const d = await startDaemon({ base, config: { max_file_bytes: 1000 } });
    daemons.push(d);
    const { token } = await d.createJob({ worktree: wt, access: 'write' });
    const conflict = await d.callTool(token, 'local_edit', { path: 'f.txt', content: 'x', expected_sha256: '0'.repeat(64) });
    assert.equal(denialCode(conflict), 'DENIED_CONFLICT');
    const big = await d.callTool(token, 'local_edit', { path: 'f.txt', content: 'y'.repeat(1001) });
    assert.equal(denialCode(big), 'DENIED_SIZE', JSON.stringify(big).slice(0, 200));
    const nul = await d.callTool(token, 'local_edit', { path: 'f.txt', content: 'a\u0000b' });
    assert.equal(denialCode(nul), 'DENIED_CONTENT');
    fs.mkdirSync(path.join(wt, 'dir'));
    const onDir = await d.callTool(token, 'local_edit', { path: 'dir', content: 'z' });
    assert.equal(denialCode(onDir), 'DENIED_FILE');
    assert.equal(fs.readFileSync(path.join(wt, 'f.txt'), 'utf8'), 'old');
    assert.deepEqual(fs.readdirSync(wt).sort(), ['dir', 'f.txt']);
    await d.stop();
  });
});

// Host pids whose command line carries the marker (processes of a sandbox).
function sandboxProcesses(marker) {
  const found = [];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.includes(marker)) found.push(Number(pid));
    } catch {
      /* gone */
    }
  }
  return found;
}
