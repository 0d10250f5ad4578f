// Opens N raw keep-alive connections to toolwarden's MCP endpoint, sends one authenticated
// JSON-RPC ping on each, reads the response, and then keeps every socket open and idle.
//   node hold_connections.mjs MCP_URL TOKEN N
// Prints "ready open=N" once all N pings were answered (or "failed ..." and exits 1), then
// waits. On SIGTERM/SIGINT it prints "closed_by_peer=K" (sockets the daemon closed meanwhile)
// and exits 0. Used by run.sh to read the daemon's RSS with N idle connections.
import net from 'node:net';

const [url, token, nText] = process.argv.slice(2);
const n = Number(nText);
if (!url || !token || !(n > 0)) {
  process.stderr.write('usage: node hold_connections.mjs MCP_URL TOKEN N\n');
  process.exit(2);
}
const u = new URL(url);
const port = Number(u.port);
const host = u.hostname;
const body = '{"jsonrpc":"2.0","id":1,"method":"ping"}';
const request =
  `POST ${u.pathname} HTTP/1.1\r\n` +
  `Host: ${host}:${port}\r\n` +
  `Authorization: Bearer ${token}\r\n` +
  'Content-Type: application/json\r\n' +
  'Accept: application/json\r\n' +
  'Connection: keep-alive\r\n' +
  `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n` +
  body;

const sockets = [];
let ready = false;
let closedByPeer = 0;

// Resolves once the response to the ping has been read in full (status line, headers and
// Content-Length bytes of body); rejects on a non-200 status, an error or an early close.
function openOne() {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host, port });
    let buf = Buffer.alloc(0);
    let done = false;
    const fail = (err) => {
      if (done) return;
      done = true;
      s.destroy();
      reject(err);
    };
    s.setTimeout(20_000, () => fail(new Error('timeout waiting for the ping response')));
    s.on('connect', () => s.write(request));
    s.on('data', (chunk) => {
      if (done) return;
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      const status = Number(head.split(' ')[1]);
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      const len = m ? Number(m[1]) : 0;
      if (buf.length < end + 4 + len) return;
      if (status !== 200) return fail(new Error(`HTTP ${status}: ${buf.subarray(end + 4).toString()}`));
      if (/\r\nconnection:\s*close/i.test(head)) return fail(new Error('the daemon answered Connection: close'));
      done = true;
      s.setTimeout(0);
      resolve(s);
    });
    s.on('error', fail);
    s.on('close', () => {
      if (!done) fail(new Error('connection closed before the response'));
      else if (ready) closedByPeer++;
    });
  });
}

// Opens in batches so the listen backlog never overflows (an overflow costs a 1 s SYN retry).
const batch = 50;
try {
  for (let i = 0; i < n; i += batch) {
    const k = Math.min(batch, n - i);
    sockets.push(...(await Promise.all(Array.from({ length: k }, openOne))));
  }
} catch (err) {
  console.log(`failed opened=${sockets.length} error=${JSON.stringify(String(err.message ?? err))}`);
  for (const s of sockets) s.destroy();
  process.exit(1);
}
ready = true;
console.log(`ready open=${sockets.length}`);

const stop = () => {
  console.log(`closed_by_peer=${closedByPeer}`);
  for (const s of sockets) s.destroy();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
setInterval(() => {}, 1 << 30); // stay alive until signalled
