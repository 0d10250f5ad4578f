// Hostile bytes at the MCP listener: each must be refused without harming the daemon. After each
// case a valid ping still answers 200 and the daemon process is alive.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, afterEach, before, describe, test } from 'node:test';
import { RawConn, assertRpcError, buildRequest, sleep, startDaemon } from './lib/daemon.mjs';

let d;
let token;

before(async () => {
  d = await startDaemon();
  token = (await d.createJob()).token;
});

after(async () => {
  await d?.kill();
});

afterEach(async (t) => {
  if (d) await d.assertHealthy(token, `after "${t.name}"`);
});

/** Sends raw bytes on a fresh socket; resolves {res (or null if closed without answer), closed}. */
async function sendRaw(bytes, { timeout = 5000 } = {}) {
  const c = await RawConn.open(d.port);
  try {
    await c.write(bytes);
    let res = null;
    try {
      res = await c.readResponse(timeout);
    } catch (e) {
      if (!c.isClosed) throw e;
    }
    return { res, conn: c };
  } finally {
    c.destroy();
  }
}

const mcpReq = (body, extra = {}) => buildRequest({ headers: d.mcpHeaders(token, extra), body });

describe('garbage and malformed HTTP', () => {
  test('random binary garbage gets 400 or a closed connection', async () => {
    for (let i = 0; i < 5; i++) {
      const { res } = await sendRaw(Buffer.concat([crypto.randomBytes(4096), Buffer.from('\r\n\r\n')]));
      if (res) assert.equal(res.status, 400, `garbage answered ${res.status}`);
    }
  });
  test('a garbage request line / bare newlines / NULs', async () => {
    for (const raw of [
      'GARBAGE\r\n\r\n',
      'POST /mcp HTTP/9.9\r\nHost: x\r\n\r\n',
      'POST /mcp\r\n\r\n',
      'POST  /mcp  HTTP/1.1\r\n\r\n',
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nBad Header Without Colon\r\n\r\n`,
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nX: a\0b\r\n\r\n`,
      '\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\r\n\r\n',
      '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03', // TLS ClientHello prefix
      '\r\n\r\n\r\n\r\n', // empty lines before a request line may be skipped (RFC 9112 §2.2)
    ]) {
      const { res } = await sendRaw(Buffer.from(raw, 'latin1'), { timeout: 3000 }).catch((e) => {
        // a server that neither answers nor closes quickly just waits for the header timeout;
        // that is acceptable for an incomplete head, so only a timeout on a complete head fails
        if (!raw.endsWith('\r\n\r\n') || /^(\r\n)+$/.test(raw)) return { res: null };
        throw new Error(`${JSON.stringify(raw)}: ${e.message}`);
      });
      if (res) assert.ok(res.status >= 400 && res.status < 500, `${JSON.stringify(raw)} answered ${res.status}`);
    }
  });
  test('invalid or conflicting Content-Length → 400 (or closed)', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    for (const cl of [[String(body.length), String(body.length + 5)], '-1', 'abc', '0x10', '1 2', '+41']) {
      const { res } = await sendRaw(mcpReq(body, { 'Content-Length': cl }), { timeout: 3000 });
      if (res) assert.equal(res.status, 400, `Content-Length ${JSON.stringify(cl)} answered ${res.status}`);
    }
  });
  test('Content-Length together with Transfer-Encoding: refused, or answered once and closed', async () => {
    // RFC 9112 §6.3: a server may process such a request by Transfer-Encoding alone, but MUST
    // close the connection after responding; the trailing bytes must never become a request.
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    const smuggled = buildRequest({ headers: d.mcpHeaders(token), body: JSON.stringify({ jsonrpc: '2.0', id: 'SMUGGLED', method: 'ping' }) });
    const chunked = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`), smuggled]);
    const c = await RawConn.open(d.port);
    try {
      await c.write(buildRequest({ headers: d.mcpHeaders(token, { 'Content-Length': String(chunked.length), 'Transfer-Encoding': 'chunked' }), body: chunked }));
      let res = null;
      try {
        res = await c.readResponse(3000);
      } catch (e) {
        if (!c.isClosed) throw e;
      }
      if (res && res.status === 200) {
        assert.deepEqual(res.json(), { jsonrpc: '2.0', id: 1, result: {} });
        assert.ok(await c.waitClose(2000), 'connection not closed after a CL+TE request');
        assert.equal(c.buf.length, 0, `smuggled request answered: ${c.buf.toString('latin1').slice(0, 200)}`);
      } else if (res) {
        assert.equal(res.status, 400, `CL+TE answered ${res.status}`);
        assert.ok(await c.waitClose(2000), 'connection not closed after refusing a CL+TE request');
        assert.equal(c.buf.length, 0, `smuggled request answered: ${c.buf.toString('latin1').slice(0, 200)}`);
      }
    } finally {
      c.destroy();
    }
  });
  test('header overflow: 64 KiB header line and 1 MiB of header lines', async () => {
    const big = await sendRaw(mcpReq('{}', { 'X-Big': 'a'.repeat(64 * 1024) }));
    if (big.res) assert.equal(big.res.status, 431);
    const many = {};
    for (let i = 0; i < 20000; i++) many[`X-${i}`] = 'y'.repeat(40);
    const lots = await sendRaw(mcpReq('{}', many));
    if (lots.res) assert.equal(lots.res.status, 431);
    // a header block that never ends
    const c = await RawConn.open(d.port);
    try {
      await c.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nX-Endless: `);
      for (let i = 0; i < 64; i++) if (!(await c.write('z'.repeat(1024)))) break;
      let res = null;
      try {
        res = await c.readResponse(3000);
      } catch (e) {
        if (!c.isClosed) throw e;
      }
      if (res) assert.equal(res.status, 431);
      assert.ok(c.isClosed || (await c.waitClose(2000)), 'connection kept open after header overflow');
    } finally {
      c.destroy();
    }
  });
});

describe('hostile JSON', () => {
  test('10,000-deep JSON array → 400 with -32700 or -32600', async () => {
    const { res } = await sendRaw(mcpReq('['.repeat(10000) + ']'.repeat(10000)));
    assert.ok(res, 'no answer');
    assert.equal(res.status, 400);
    const code = res.json().error?.code;
    assert.ok([-32700, -32600].includes(code), `error code ${code}`);
  });
  test('10,000-deep object inside params → 400 / -32700', async () => {
    const deep = '{"a":'.repeat(10000) + '1' + '}'.repeat(10000);
    const { res } = await sendRaw(mcpReq(`{"jsonrpc":"2.0","id":1,"method":"ping","params":${deep}}`));
    assertRpcError(res, 400, -32700, null);
  });
  test('500,000-deep array (just under 1 MiB) → 400', async () => {
    const { res } = await sendRaw(mcpReq('['.repeat(500000) + ']'.repeat(500000)), { timeout: 10000 });
    assert.ok(res, 'no answer');
    assert.equal(res.status, 400);
    assert.ok([-32700, -32600].includes(res.json().error?.code));
  });
  test('unterminated deep nesting → 400 / -32700', async () => {
    const { res } = await sendRaw(mcpReq('['.repeat(100000)));
    assertRpcError(res, 400, -32700, null);
  });
  test('invalid UTF-8 inside a JSON string → 400 / -32700', async () => {
    for (const bad of [
      Buffer.from([0xff, 0xfe]),
      Buffer.from([0xc3]), // truncated 2-byte sequence
      Buffer.from([0xc0, 0xaf]), // overlong '/'
      Buffer.from([0xed, 0xa0, 0x80]), // UTF-16 surrogate encoded in UTF-8
      Buffer.from([0xf4, 0x90, 0x80, 0x80]), // > U+10FFFF
    ]) {
      const body = Buffer.concat([
        Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"a'),
        bad,
        Buffer.from('b"}}'),
      ]);
      const { res } = await sendRaw(mcpReq(body));
      assertRpcError(res, 400, -32700, null);
    }
  });
  test('invalid UTF-8 in the method name → 400 / -32700', async () => {
    const body = Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"pi'), Buffer.from([0xff]), Buffer.from('ng"}')]);
    const { res } = await sendRaw(mcpReq(body));
    assertRpcError(res, 400, -32700, null);
  });
  test('huge numbers, long strings and many keys do not crash', async () => {
    const bodies = [
      `{"jsonrpc":"2.0","id":1e999999,"method":"ping"}`,
      `{"jsonrpc":"2.0","id":${'9'.repeat(5000)},"method":"ping"}`,
      `{"jsonrpc":"2.0","id":1,"method":"${'m'.repeat(500000)}"}`,
      `{"jsonrpc":"2.0","id":1,"method":"ping","params":{${Array.from({ length: 20000 }, (_, i) => `"k${i}":${i}`).join(',')}}}`,
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local_read","arguments":{"path":"${'a/'.repeat(100000)}x"}}}`,
      `{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`,
    ];
    for (const b of bodies) {
      const { res } = await sendRaw(mcpReq(b), { timeout: 10000 });
      assert.ok(res, 'no answer');
      assert.ok([200, 400].includes(res.status), `${b.slice(0, 60)}… answered ${res.status}`);
      // Regression (fuzz_mcp): id 1e999 was answered as `"id":Infinity`, which is not JSON.
      assert.doesNotThrow(() => JSON.parse(res.text), `${b.slice(0, 60)}… answered ${res.text.slice(0, 100)}`);
    }
  });
});

describe('framing abuse', () => {
  test('huge Content-Length with a short body → 413, no waiting for the body', async () => {
    const c = await RawConn.open(d.port);
    try {
      await c.write(buildRequest({ headers: d.mcpHeaders(token, { 'Content-Length': '999999999999' }), body: '{}' }));
      const res = await c.readResponse(3000);
      assert.ok(res, 'closed without answer');
      assert.equal(res.status, 413);
    } finally {
      c.destroy();
    }
  });
  test('Content-Length larger than the body sent, then the client goes away', async () => {
    const c = await RawConn.open(d.port);
    await c.write(buildRequest({ headers: d.mcpHeaders(token, { 'Content-Length': '5000' }), body: '{"jsonrpc":"2.0"' }));
    await sleep(300);
    c.destroy();
  });
  test('client resets mid-request', async () => {
    for (let i = 0; i < 20; i++) {
      const c = await RawConn.open(d.port);
      await c.write(buildRequest({ headers: d.mcpHeaders(token), body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'ping' }) }).subarray(0, 40 + i * 5));
      c.socket.resetAndDestroy?.() ?? c.destroy();
    }
    await sleep(200);
  });
  test('200 concurrent idle connections do not block a valid request', async () => {
    const conns = await Promise.all(Array.from({ length: 200 }, () => RawConn.open(d.port)));
    try {
      await d.assertHealthy(token, 'while 200 idle connections are open');
    } finally {
      for (const c of conns) c.destroy();
    }
  });
});

describe('timeouts', () => {
  // Headers one byte per second: the daemon must close by its 10 s header timeout (≤ 13 s).
  // Body one byte per second after complete headers: closed by the 15 s request timeout (≤ 18 s).
  // Both run in parallel, and a valid request is served meanwhile.
  test('slow-loris headers are cut at ~10 s, a slow body at ~15 s', { timeout: 40_000 }, async () => {
    const trickle = async (conn, bytes, startDelay = 0) => {
      await sleep(startDelay);
      for (const b of bytes) {
        if (conn.isClosed) return;
        if (!(await conn.write(Buffer.from([b])))) return;
        await sleep(1000);
      }
    };
    const head = Buffer.from(
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nX-Slow: ${'s'.repeat(100)}\r\n\r\n`,
    );
    const body = JSON.stringify({ jsonrpc: '2.0', id: 'slow', method: 'ping' }) + ' '.repeat(100);
    const loris = await RawConn.open(d.port);
    const slowBody = await RawConn.open(d.port);
    const t0 = Date.now();
    const tBody0 = Date.now();
    await slowBody.write(buildRequest({ headers: d.mcpHeaders(token, { 'Content-Length': String(body.length) }) }));
    trickle(loris, head);
    trickle(slowBody, Buffer.from(body));
    try {
      await sleep(3000);
      await d.assertHealthy(token, 'during slow-loris');
      const lorisClosed = await loris.waitClose(13_000 - (Date.now() - t0));
      const lorisT = (Date.now() - t0) / 1000;
      assert.ok(lorisClosed, `slow-loris connection still open after ${lorisT.toFixed(1)} s`);
      assert.ok(lorisT >= 8, `slow-loris closed after only ${lorisT.toFixed(1)} s (header timeout is 10 s)`);
      if (loris.buf.length) {
        const r = await loris.readResponse(100).catch(() => null);
        if (r) assert.ok([400, 408].includes(r.status), `slow-loris answered ${r.status}`);
      }
      const bodyClosed = await slowBody.waitClose(18_000 - (Date.now() - tBody0));
      const bodyT = (Date.now() - tBody0) / 1000;
      assert.ok(bodyClosed, `slow-body connection still open after ${bodyT.toFixed(1)} s`);
      assert.ok(bodyT >= 12, `slow body closed after only ${bodyT.toFixed(1)} s (request timeout is 15 s)`);
      if (slowBody.buf.length) {
        const r = await slowBody.readResponse(100).catch(() => null);
        if (r) assert.notEqual(r.status, 200, 'a 15 s+ request was served');
      }
    } finally {
      loris.destroy();
      slowBody.destroy();
    }
  });
});
