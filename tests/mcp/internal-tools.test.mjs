// `airlock mcp --mcp-config FILE` as one MCP endpoint for airlock's tools and internal ones,
// driven by the official MCP TypeScript SDK client: the internal tools are listed beside
// run_python, calls are routed to their server (content and structuredContent as the server
// sent them), and when the server's tools change the client gets
// notifications/tools/list_changed and sees the new tool. The internal server is
// tests/e2e/mcp_fixture.py (stdio), started by airlock itself.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { connectStdio } from './lib/env.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const fixture = join(here, '..', 'e2e', 'mcp_fixture.py');

describe('airlock mcp --mcp-config: internal tools over stdio', () => {
  let dir;
  let conn;
  let changed = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'airlock-internal-tools-'));
    const config = join(dir, 'mcp.json');
    writeFileSync(
      config,
      JSON.stringify({
        mcpServers: {
          fx: { command: '/usr/bin/python3', args: [fixture, '--tools-changed-after', '1'] },
        },
      }),
    );
    conn = await connectStdio(['--mcp-config', config]);
    conn.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      changed++;
    });
  });
  after(async () => {
    await conn?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('declares that its tool list can change', () => {
    assert.equal(conn.client.getServerCapabilities().tools.listChanged, true);
  });

  test("lists the internal tools beside airlock's, naming their server", async () => {
    const { tools } = await conn.client.listTools();
    const names = tools.map((t) => t.name);
    assert.ok(names.includes('run_python'), names.join(', '));
    for (const n of ['echo', 'add', 'structured']) assert.ok(names.includes(n), n);
    const add = tools.find((t) => t.name === 'add');
    assert.match(add.description, /internal tool of 'fx'/);
    assert.equal(add.inputSchema.type, 'object');
  });

  test('routes a call to the server and returns its structured content', async () => {
    const r = await conn.client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
    assert.equal(r.isError, false);
    assert.deepEqual(r.structuredContent, { sum: 5 });
  });

  test('arguments that do not match the schema are a tool error', async () => {
    const r = await conn.client.callTool({ name: 'add', arguments: { a: 'two', b: 3 } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /argument 'a'/);
  });

  test('tools/list_changed reaches the client when the server adds a tool', async () => {
    // The fixture adds late_tool after its first call (the add above).
    const deadline = Date.now() + 15000;
    while (changed === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.ok(changed > 0, 'no notifications/tools/list_changed arrived');
    const { tools } = await conn.client.listTools();
    assert.ok(
      tools.some((t) => t.name === 'late_tool'),
      tools.map((t) => t.name).join(', '),
    );
  });
});
