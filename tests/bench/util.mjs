// Small helpers for tests/bench/run.sh, so the shell script needs neither jq nor curl.
//   node util.mjs freeport                          -> a free TCP port on 127.0.0.1
//   node util.mjs json FILE|- KEY[.KEY]...          -> prints one field of a JSON document
//   node util.mjs rpc URL TOKEN METHOD [PARAMS]     -> POSTs one JSON-RPC request to the MCP
//        endpoint, prints the response body; exit 1 on a non-200 status or a JSON-RPC error
//   node util.mjs metrics SOCKET                    -> GET /metrics over the admin unix socket
//   node util.mjs textfile PATH BYTES               -> writes BYTES of ASCII words (one file)
//   node util.mjs gentree DIR NFILES NEEDLE         -> a tree of NFILES ~2 KiB files of
//        pseudo-random words, three directories deep; NEEDLE is planted in a few of them.
//        Prints "files=N bytes=B needle_files=K".
//   node util.mjs fsyncprobe DIR N                  -> N × (write 4 KiB + fdatasync) in DIR;
//        prints "p50=..ms p99=..ms" (the disk latency every audited call pays)
//   node util.mjs search URL TOKEN QUERY            -> one local_search call of QUERY over ".",
//        max_results 10000; prints "ms=.. files_searched=.. matches=.. truncated=.."
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const [cmd, ...args] = process.argv.slice(2);

function die(msg) {
  process.stderr.write(`util.mjs ${cmd}: ${msg}\n`);
  process.exit(1);
}

function post(url, token, body) {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        agent: false,
        headers: {
          Authorization: `Bearer ${token}`,
          'Content-Type': 'application/json',
          Accept: 'application/json',
          'Content-Length': Buffer.byteLength(body),
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function rpc(url, token, method, params) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, ...(params ? { params } : {}) });
  const res = await post(url, token, body);
  if (res.status !== 200) die(`HTTP ${res.status}: ${res.body.slice(0, 500)}`);
  const msg = JSON.parse(res.body);
  if (msg.error) die(`JSON-RPC error: ${JSON.stringify(msg.error)}`);
  if (msg.result?.isError) die(`tool error: ${JSON.stringify(msg.result.content)}`);
  return msg;
}

// Deterministic PRNG (mulberry32), so every run searches the same tree.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function makeWords(rand, n) {
  const syll = ['ka', 'lo', 'mi', 'ne', 'ru', 'ta', 'vo', 'si', 'da', 'pe', 'gu', 'zo', 'fa', 'hi', 'be', 'wu', 'ya', 'te', 'no', 'xi'];
  const words = new Set();
  while (words.size < n) {
    const k = 1 + Math.floor(rand() * 4);
    let w = '';
    for (let i = 0; i < k; i++) w += syll[Math.floor(rand() * syll.length)];
    words.add(w);
  }
  return [...words];
}

function wordText(rand, words, bytes) {
  let out = '';
  let line = '';
  while (out.length + line.length < bytes) {
    line += (line ? ' ' : '') + words[Math.floor(rand() * words.length)];
    if (line.length > 60 + Math.floor(rand() * 30)) {
      out += line + '\n';
      line = '';
    }
  }
  out += line;
  return out.slice(0, bytes - 1) + '\n';
}

switch (cmd) {
  case 'freeport': {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => console.log(port));
    });
    break;
  }
  case 'json': {
    const [file, key] = args;
    const text = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
    let v = JSON.parse(text);
    for (const k of key.split('.')) v = v?.[k];
    if (v === undefined) die(`no field ${key}`);
    console.log(typeof v === 'object' ? JSON.stringify(v) : String(v));
    break;
  }
  case 'rpc': {
    const [url, token, method, params] = args;
    const msg = await rpc(url, token, method, params ? JSON.parse(params) : undefined);
    console.log(JSON.stringify(msg));
    break;
  }
  case 'metrics': {
    const [socketPath] = args;
    const text = await new Promise((resolve, reject) => {
      http
        .get({ socketPath, path: '/metrics', headers: { Host: 'localhost' } }, (res) => {
          let s = '';
          res.on('data', (c) => (s += c));
          res.on('end', () => (res.statusCode === 200 ? resolve(s) : reject(new Error(`HTTP ${res.statusCode}`))));
        })
        .on('error', reject);
    });
    process.stdout.write(text);
    break;
  }
  case 'textfile': {
    const [file, bytes] = args;
    const rand = prng(4096);
    fs.writeFileSync(file, wordText(rand, makeWords(rand, 500), Number(bytes)));
    break;
  }
  case 'gentree': {
    const [dir, nfilesText, needle] = args;
    const nfiles = Number(nfilesText);
    const rand = prng(20240601);
    const words = makeWords(rand, 2000);
    // Three levels of 10 directories each; files spread evenly over the 1,000 leaves.
    let bytes = 0;
    let needleFiles = 0;
    const made = new Set();
    for (let i = 0; i < nfiles; i++) {
      const leaf = i % 1000;
      const d = path.join(dir, `d${Math.floor(leaf / 100)}`, `e${Math.floor(leaf / 10) % 10}`, `f${leaf % 10}`);
      if (!made.has(d)) {
        fs.mkdirSync(d, { recursive: true });
        made.add(d);
      }
      let text = wordText(rand, words, 1800 + Math.floor(rand() * 500));
      if (i % 997 === 500) {
        // Plant the needle on one line in the middle of the file: a rare match.
        const at = text.indexOf('\n', text.length >> 1) + 1;
        text = text.slice(0, at) + `alpha ${needle} omega\n` + text.slice(at);
        needleFiles++;
      }
      fs.writeFileSync(path.join(d, `file${i}.txt`), text);
      bytes += text.length;
    }
    console.log(`files=${nfiles} bytes=${bytes} needle_files=${needleFiles}`);
    break;
  }
  case 'fsyncprobe': {
    const [dir, nText] = args;
    const n = Number(nText);
    const file = path.join(dir, `.fsyncprobe-${process.pid}`);
    const fd = fs.openSync(file, 'w');
    const block = Buffer.alloc(4096, 120);
    const ms = [];
    try {
      for (let i = 0; i < n; i++) {
        fs.writeSync(fd, block);
        const t0 = performance.now();
        fs.fdatasyncSync(fd);
        ms.push(performance.now() - t0);
      }
    } finally {
      fs.closeSync(fd);
      fs.rmSync(file, { force: true });
    }
    ms.sort((a, b) => a - b);
    const q = (p) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(2);
    console.log(`p50=${q(0.5)}ms p99=${q(0.99)}ms`);
    break;
  }
  case 'search': {
    const [url, token, query] = args;
    const t0 = performance.now();
    const msg = await rpc(url, token, 'tools/call', {
      name: 'local_search',
      arguments: { path: '.', query, max_results: 10000 },
    });
    const ms = performance.now() - t0;
    const sc = msg.result.structuredContent;
    console.log(
      `ms=${ms.toFixed(1)} files_searched=${sc.files_searched ?? 'absent'} matches=${sc.matches.length} truncated=${sc.truncated}`,
    );
    break;
  }
  default:
    die('unknown command');
}
