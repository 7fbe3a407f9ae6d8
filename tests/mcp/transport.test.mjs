// The transports' own rules, checked with raw messages: stdio framing and a clean exit at EOF,
// and the streamable HTTP session, header and auth rules of /mcp.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';

import { env, requireEnv } from './lib/env.mjs';

const init = (id = 1, version = '2025-11-25') => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

describe('stdio transport', () => {
  test('newline-delimited JSON-RPC on stdout only, clean exit at EOF', async () => {
    requireEnv('bin');
    const child = spawn(env.bin, ['mcp'], { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const lines = [
      init(1, '2024-11-05'),
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      // 2024-11-05 still has JSON-RPC batches.
      [
        { jsonrpc: '2.0', id: 2, method: 'ping' },
        { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'run_python', arguments: { code: 'print("hi")' } } },
      ],
    ];
    child.stdin.write(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    child.stdin.write('not json\n');
    child.stdin.end();
    const code = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(code, 0, err);
    const msgs = out.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(msgs.length, 3, out);
    assert.equal(msgs[0].result.protocolVersion, '2024-11-05');
    assert.ok(Array.isArray(msgs[1]) && msgs[1].length === 2, JSON.stringify(msgs[1]));
    assert.deepEqual(msgs[1][0], { jsonrpc: '2.0', id: 2, result: {} });
    assert.match(msgs[1][1].result.content[0].text, /stdout:\nhi\n/);
    assert.equal(msgs[2].error.code, -32700);
    assert.match(err, /session ended/);
  });
});

describe('streamable HTTP transport at /mcp', () => {
  const post = (body, headers = {}) =>
    fetch(new URL('/mcp', env.url), {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${env.token}`,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        ...headers,
      },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  test('session id issued at initialize, required afterwards, ended by DELETE', async () => {
    requireEnv('url', 'token');
    const r = await post(init());
    assert.equal(r.status, 200);
    const sid = r.headers.get('mcp-session-id');
    assert.match(sid, /^mcp-[0-9a-f]{32}$/);
    assert.equal((await r.json()).result.protocolVersion, '2025-11-25');

    const note = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { 'Mcp-Session-Id': sid });
    assert.equal(note.status, 202);

    const missing = await post({ jsonrpc: '2.0', id: 2, method: 'ping' });
    assert.equal(missing.status, 400);
    const unknown = await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, { 'Mcp-Session-Id': 'mcp-0' });
    assert.equal(unknown.status, 404);

    const ping = await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, {
      'Mcp-Session-Id': sid,
      'MCP-Protocol-Version': '2025-11-25',
    });
    assert.deepEqual(await ping.json(), { jsonrpc: '2.0', id: 2, result: {} });
    const badVersion = await post({ jsonrpc: '2.0', id: 3, method: 'ping' }, {
      'Mcp-Session-Id': sid,
      'MCP-Protocol-Version': '1999-01-01',
    });
    assert.equal(badVersion.status, 400);

    const del = await fetch(new URL('/mcp', env.url), {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${env.token}`, 'Mcp-Session-Id': sid },
    });
    assert.equal(del.status, 200);
    const gone = await post({ jsonrpc: '2.0', id: 4, method: 'ping' }, { 'Mcp-Session-Id': sid });
    assert.equal(gone.status, 404);
  });

  test('GET is 405 (no server-initiated stream)', async () => {
    const r = await fetch(new URL('/mcp', env.url), {
      headers: { Authorization: `Bearer ${env.token}`, Accept: 'text/event-stream' },
    });
    assert.equal(r.status, 405);
    assert.match(r.headers.get('allow'), /POST/);
  });

  test('the bearer token and the Host/Origin checks apply', async () => {
    const noToken = await fetch(new URL('/mcp', env.url), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(init()),
    });
    assert.equal(noToken.status, 401);
    const badOrigin = await post(init(), { Origin: 'http://evil.example.com' });
    assert.equal(badOrigin.status, 403);
  });

  test('parse errors and batches after 2025-06-18 are refused', async () => {
    const r = await post(init());
    const sid = r.headers.get('mcp-session-id');
    const parse = await post('{nope', { 'Mcp-Session-Id': sid });
    assert.equal(parse.status, 400);
    assert.equal((await parse.json()).error.code, -32700);
    const batch = await post([{ jsonrpc: '2.0', id: 1, method: 'ping' }], { 'Mcp-Session-Id': sid });
    assert.equal((await batch.json()).error.code, -32600);
    await fetch(new URL('/mcp', env.url), {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${env.token}`, 'Mcp-Session-Id': sid },
    });
  });
});

describe('GET /v1/tools', () => {
  const get = (query) =>
    fetch(new URL(`/v1/tools${query}`, env.url), {
      headers: { Authorization: `Bearer ${env.token}` },
    });

  test('the same seven tools in MCP, OpenAI and Anthropic shapes', async () => {
    requireEnv('url', 'token');
    const mcp = (await (await get('')).json()).tools;
    const openai = (await (await get('?format=openai')).json()).tools;
    const anthropic = (await (await get('?format=anthropic')).json()).tools;
    // The default profile allows javascript and r, so run_javascript and run_r are among them.
    assert.deepEqual(mcp.map((t) => t.name).sort(), [
      'list_files', 'read_file', 'reset_session', 'run_javascript', 'run_python', 'run_r',
      'run_shell', 'write_file',
    ]);
    assert.deepEqual(
      openai.map((t) => t.function.name),
      mcp.map((t) => t.name),
    );
    for (const [i, t] of mcp.entries()) {
      assert.equal(openai[i].type, 'function');
      assert.deepEqual(openai[i].function.parameters, t.inputSchema);
      assert.deepEqual(Object.keys(anthropic[i]).sort(), ['description', 'input_schema', 'name']);
      assert.deepEqual(anthropic[i].input_schema, t.inputSchema);
    }
  });

  test('an unknown format is 400 naming the field', async () => {
    const r = await get('?format=gemini');
    assert.equal(r.status, 400);
    assert.equal((await r.json()).field, 'format');
  });
});
