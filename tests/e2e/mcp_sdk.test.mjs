// The official MCP TypeScript SDK client against a real daemon (SPEC §5).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { NEWEST_VERSION, startDaemon } from './lib/daemon.mjs';

let d;
let job;
const openClients = [];

before(async () => {
  d = await startDaemon();
  job = await d.createJob();
});

after(async () => {
  for (const c of openClients) await c.close().catch(() => {});
  await d?.kill();
});

function makeClient(token, url = d.mcpUrl) {
  const headers = token === undefined ? {} : { Authorization: `Bearer ${token}` };
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'toolwarden-e2e', version: '1.0.0' }, { capabilities: {} });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  openClients.push(client);
  return { client, transport, errors };
}

async function connected(token) {
  const c = makeClient(token);
  await c.client.connect(c.transport);
  return c;
}

describe('MCP SDK client', () => {
  test('connect (initialize) with a job token', async () => {
    const { client, transport, errors } = await connected(job.token);
    const info = client.getServerVersion();
    assert.equal(info.name, 'toolwarden');
    assert.equal(typeof info.version, 'string');
    assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false });
    // The SDK asks for the newest version it knows; the daemon supports 2025-11-25.
    assert.equal(transport.protocolVersion, NEWEST_VERSION);
    // The SDK opens the optional GET stream after initialization; a 405 is the documented
    // "not offered" answer and must not surface as a transport error.
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(errors.map(String), []);
    await client.close();
  });

  test('listTools returns the job tools with schemas', async () => {
    const { client } = await connected(job.token);
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['local_list', 'local_read', 'local_search']);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.equal(t.outputSchema?.type, 'object', t.name);
      assert.equal(typeof t.annotations, 'object', t.name);
      assert.equal(typeof t.description, 'string', t.name);
    }
    await client.close();
  });

  test('listTools follows the grant (write access adds local_edit, --tool narrows)', async () => {
    const w = await d.createJob({ access: 'write' });
    const c1 = await connected(w.token);
    assert.deepEqual((await c1.client.listTools()).tools.map((t) => t.name).sort(), [
      'local_edit',
      'local_list',
      'local_read',
      'local_search',
    ]);
    await c1.client.close();
    const n = await d.createJob({ tool: ['local_read'] });
    const c2 = await connected(n.token);
    assert.deepEqual((await c2.client.listTools()).tools.map((t) => t.name), ['local_read']);
    await c2.client.close();
  });

  test('ping', async () => {
    const { client } = await connected(job.token);
    assert.deepEqual(await client.ping(), {});
    await client.close();
  });

  test('callTool local_read (structured result)', async () => {
    const { client } = await connected(job.token);
    const r = await client.callTool({ name: 'local_read', arguments: { path: 'hello.txt' } });
    assert.notEqual(r.isError, true, JSON.stringify(r));
    const want = 'hello world\n';
    assert.deepEqual(r.structuredContent, {
      path: 'hello.txt',
      size: Buffer.byteLength(want),
      sha256: crypto.createHash('sha256').update(want).digest('hex'),
      content: want,
    });
    await client.close();
  });

  test('callTool of a denied path answers isError with a stable code', async () => {
    const { client } = await connected(job.token);
    const r = await client.callTool({ name: 'local_read', arguments: { path: '../etc/passwd' } });
    assert.equal(r.isError, true);
    assert.deepEqual(r.structuredContent, { error: 'DENIED_PATH' });
    assert.match(r.content[0].text, /^DENIED_PATH: /);
    await client.close();
  });

  test('connect without a token fails with 401', async () => {
    const { client, transport } = makeClient(undefined);
    await assert.rejects(client.connect(transport), (e) => {
      assert.equal(e.code, 401, `error: ${e}`);
      return true;
    });
  });

  test('connect with a wrong token fails with 401', async () => {
    const { client, transport } = makeClient('definitely-not-a-valid-token');
    await assert.rejects(client.connect(transport), (e) => {
      assert.equal(e.code, 401, `error: ${e}`);
      return true;
    });
  });

  test('a revoked token stops working for a connected client', async () => {
    const j = await d.createJob();
    const { client } = await connected(j.token);
    assert.deepEqual(await client.ping(), {});
    await d.revokeJob(j.job_id);
    await assert.rejects(client.ping(), (e) => {
      assert.equal(e.code, 401, `error: ${e}`);
      return true;
    });
    await client.close();
  });
});
