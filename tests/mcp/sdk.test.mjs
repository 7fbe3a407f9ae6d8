// airlock's MCP server driven by the official MCP TypeScript SDK client, over each transport:
// `airlock mcp` on stdio running sandboxes itself, `airlock mcp --url` forwarding to a daemon,
// and the daemon's /mcp over streamable HTTP. Each transport gets the same checks.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { McpError, EmptyResultSchema } from '@modelcontextprotocol/sdk/types.js';

import { connectHttp, connectStdio, env, textOf } from './lib/env.mjs';

const TOOLS = ['run_python', 'run_shell', 'run_javascript', 'run_r', 'write_file', 'read_file',
  'list_files', 'reset_session'];
const PNG_MAGIC = 'iVBORw0KGgo'; // base64 of "\x89PNG\r\n\x1a\n"

const transports = [
  { name: 'stdio: airlock mcp (in-process sandboxes)', connect: () => connectStdio() },
  {
    name: 'stdio: airlock mcp --url (forwarding to the daemon)',
    connect: () => connectStdio(['--url', env.url]),
  },
  { name: 'streamable HTTP: the daemon at /mcp', connect: () => connectHttp() },
];

for (const t of transports) {
  describe(t.name, () => {
    let conn;
    let client;

    before(async () => {
      conn = await t.connect();
      client = conn.client;
    });
    after(async () => {
      await conn?.close();
    });

    const call = (name, args) => client.callTool({ name, arguments: args });

    test('initialize negotiated the newest version and declared tools and resources', () => {
      const caps = client.getServerCapabilities();
      assert.ok(caps.tools, 'tools capability');
      assert.ok(caps.resources, 'resources capability');
      assert.equal(client.getServerVersion().name, 'airlock');
    });

    test('lists the six tools with schemas and honest annotations', async () => {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((x) => x.name).sort(), [...TOOLS].sort());
      const byName = Object.fromEntries(tools.map((x) => [x.name, x]));
      for (const tool of tools) {
        assert.equal(tool.inputSchema.type, 'object', tool.name);
        assert.ok(tool.description.length > 20, tool.name);
        assert.equal(tool.annotations.openWorldHint, false, `${tool.name}: no network`);
      }
      assert.deepEqual(byName.run_python.inputSchema.required, ['code']);
      assert.deepEqual(byName.run_shell.inputSchema.required, ['command']);
      assert.deepEqual(byName.write_file.inputSchema.required, ['path', 'content']);
      assert.equal(byName.run_python.annotations.readOnlyHint, false);
      assert.equal(byName.run_python.annotations.destructiveHint, true);
      assert.equal(byName.read_file.annotations.readOnlyHint, true);
      assert.equal(byName.list_files.annotations.readOnlyHint, true);
    });

    test('keeps Python state between calls: x = 41, then x + 1 is 42', async () => {
      const first = await call('run_python', { code: 'x = 41' });
      assert.equal(first.isError, false, textOf(first));
      const second = await call('run_python', { code: 'x + 1' });
      assert.equal(second.isError, false, textOf(second));
      assert.match(textOf(second), /result: 42/);
      assert.equal(second.structuredContent.result, '42');
    });

    test('a matplotlib plot comes back as PNG image content', async () => {
      const res = await call('run_python', {
        code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title("squares")',
        timeout_s: 60,
      });
      assert.equal(res.isError, false, textOf(res));
      const images = res.content.filter((c) => c.type === 'image');
      assert.equal(images.length, 1, JSON.stringify(res.content.map((c) => c.type)));
      assert.equal(images[0].mimeType, 'image/png');
      assert.ok(images[0].data.startsWith(PNG_MAGIC), 'PNG data');
      assert.ok(Buffer.from(images[0].data, 'base64').length > 1000);
    });

    test('a file written by code is a resource link, listed and read back', async () => {
      const res = await call('run_python', {
        code: "with open('report.csv', 'w') as f:\n    f.write('a,b\\n1,2\\n')\n"
          + "open('blob.bin', 'wb').write(bytes(range(256)))",
      });
      assert.equal(res.isError, false, textOf(res));
      const links = res.content.filter((c) => c.type === 'resource_link');
      const uris = links.map((l) => l.uri).sort();
      assert.deepEqual(uris, ['airlock://files/blob.bin', 'airlock://files/report.csv']);

      const { resources } = await client.listResources();
      assert.ok(resources.some((r) => r.uri === 'airlock://files/report.csv'));

      const text = await client.readResource({ uri: 'airlock://files/report.csv' });
      assert.equal(text.contents[0].text, 'a,b\n1,2\n');
      assert.equal(text.contents[0].mimeType, 'text/csv');

      const bin = await client.readResource({ uri: 'airlock://files/blob.bin' });
      assert.deepEqual(
        [...Buffer.from(bin.contents[0].blob, 'base64')],
        [...Array(256).keys()],
      );
    });

    test('write_file, run_shell, read_file and list_files share /work', async () => {
      const w = await call('write_file', { path: 'in.txt', content: 'hello\n' });
      assert.equal(w.isError, false, textOf(w));
      const sh = await call('run_shell', { command: 'tr a-z A-Z < in.txt > out.txt; cat out.txt' });
      assert.equal(sh.isError, false, textOf(sh));
      assert.match(textOf(sh), /HELLO/);
      const r = await call('read_file', { path: 'out.txt' });
      assert.equal(textOf(r), 'HELLO\n');
      const ls = await call('list_files', {});
      assert.match(textOf(ls), /in\.txt/);
      assert.match(textOf(ls), /out\.txt/);
    });

    test('code that raises is a tool error (isError) with the message', async () => {
      const res = await call('run_python', { code: '1 / 0' });
      assert.equal(res.isError, true);
      assert.match(textOf(res), /ZeroDivisionError/);
    });

    test('bad arguments and unknown tools are tool errors too', async () => {
      const missing = await call('run_python', {});
      assert.equal(missing.isError, true);
      assert.match(textOf(missing), /missing required argument 'code'/);
      const unknown = await call('no_such_tool', {});
      assert.equal(unknown.isError, true);
      assert.match(textOf(unknown), /unknown tool/);
    });

    test('protocol errors are JSON-RPC errors', async () => {
      await assert.rejects(
        client.request({ method: 'no/such/method', params: {} }, EmptyResultSchema),
        (err) => err instanceof McpError && err.code === -32601,
      );
      await assert.rejects(
        client.readResource({ uri: 'airlock://files/does-not-exist.txt' }),
        (err) => err instanceof McpError && err.code === -32002,
      );
    });

    test('reset_session starts over', async () => {
      const reset = await call('reset_session', {});
      assert.equal(reset.isError, false);
      const res = await call('run_python', { code: 'x' });
      assert.equal(res.isError, true);
      assert.match(textOf(res), /NameError/);
    });
  });
}

// A session the daemon stops (idle, or POST .../stop) is not lost to an MCP client: its next
// tool call resumes it with its variables.
describe('streamable HTTP: a stopped session resumes on the next tool call', () => {
  test('x = 41, the session is stopped through the REST API, then x + 1 is 42', async () => {
    const conn = await connectHttp();
    try {
      const call = (name, args) => conn.client.callTool({ name, arguments: args });
      const marker = `mcp-stop-${process.pid}-${Date.now()}.txt`;
      const first = await call('run_python', {
        code: `x = 41\nopen('/work/${marker}', 'w').write('m')`,
      });
      assert.equal(first.isError, false, textOf(first));
      const auth = { Authorization: `Bearer ${env.token}` };
      const api = (path, init = {}) =>
        fetch(new URL(path, env.url), { ...init, headers: { ...auth, ...(init.headers || {}) } });
      const { sessions } = await (await api('/v1/sessions?state=live')).json();
      let sid;
      for (const s of sessions)
        if ((await api(`/v1/sessions/${s.id}/files/${marker}`)).status === 200) sid = s.id;
      assert.ok(sid, 'the MCP connection has a session in GET /v1/sessions');
      const stop = await api(`/v1/sessions/${sid}/stop`, { method: 'POST' });
      assert.equal(stop.status, 200);
      assert.equal((await stop.json()).state, 'stopped');
      const second = await call('run_python', { code: 'x + 1' });
      assert.equal(second.isError, false, textOf(second));
      assert.equal(second.structuredContent.result, '42');
      const after = await (await api(`/v1/sessions/${sid}`)).json();
      assert.equal(after.state, 'idle', JSON.stringify(after));
    } finally {
      await conn.close();
    }
  });
});
