// The MCP servers the Glue is tested and shown with (examples/internal-tools/crm_server.py and
// tests/e2e/mcp_fixture.py), driven by the official TypeScript SDK client over stdio and
// streamable HTTP, so we know they speak real MCP. Needs no airlock daemon:
//   cd tests/mcp && node --test servers.test.mjs
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  LoggingMessageNotificationSchema,
  McpError,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PYTHON = '/usr/bin/python3';
const FIXTURE = join(root, 'tests', 'e2e', 'mcp_fixture.py');
const CRM = join(root, 'examples', 'internal-tools', 'crm_server.py');
const FIXTURE_TOOLS = ['echo', 'add', 'slow', 'crash', 'big', 'fail', 'rpc_error', 'image',
  'structured', 'strict', 'needs_env', 'pid'];
const T = { timeout: 60_000 };

const textOf = (result) =>
  result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// A server with --http 127.0.0.1:0: its URL comes from the ready line on stdout; stop() ends
// it by its pid.
async function startHttp(script, args) {
  const child = spawn(PYTHON, [script, ...args, '--http', '127.0.0.1:0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      process.kill(child.pid, 'SIGTERM');
      await exited;
    }
  };
  try {
    const url = await new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`no URL within 15 s: ${err}`)), 15_000);
      child.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/listening on (http:\/\/\S+)/);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      child.on('exit', (code) => reject(new Error(`the server exited (${code}): ${err}`)));
    });
    return { url, stop, log: () => err };
  } catch (e) {
    await stop();
    throw e;
  }
}

// An SDK client connected to script over kind: 'stdio', 'http' (JSON answers) or 'sse' (the
// fixture's --sse: event-stream answers). close() ends the session and stops the server.
async function connect(kind, script, args = []) {
  const client = new Client({ name: 'airlock-servers-test', version: '1.0.0' });
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
  if (kind === 'stdio') {
    const transport = new StdioClientTransport({
      command: PYTHON,
      args: [script, ...args],
      stderr: 'pipe',
    });
    await client.connect(transport);
    return { client, logs, close: () => client.close() };
  }
  const server = await startHttp(script, kind === 'sse' ? [...args, '--sse'] : args);
  try {
    const transport = new StreamableHTTPClientTransport(new URL(server.url));
    await client.connect(transport);
    return {
      client,
      logs,
      close: async () => {
        await transport.terminateSession();
        await client.close();
        await server.stop();
      },
    };
  } catch (e) {
    await server.stop();
    throw e;
  }
}

async function allTools(client) {
  const tools = [];
  let cursor;
  const pages = [];
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    pages.push(page.tools.length);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return { tools, pages };
}

async function waitFor(check, what, ms = 10_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`${what} within ${ms} ms`);
}

for (const kind of ['stdio', 'http']) {
  describe(`crm example over ${kind}`, () => {
    let dir;
    let conn;
    let client;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'airlock-crm-'));
      conn = await connect(kind, CRM, ['--db', join(dir, 'crm.sqlite')]);
      client = conn.client;
    });
    after(async () => {
      await conn?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test('initialize and the three read-only tools', T, async () => {
      assert.equal(client.getServerVersion().name, 'crm');
      assert.ok(client.getServerCapabilities().tools);
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(),
        ['get_user_churn_metrics', 'list_tables', 'run_sql']);
      for (const tool of tools) {
        assert.equal(tool.annotations.readOnlyHint, true, tool.name);
        assert.equal(tool.outputSchema.type, 'object', tool.name);
      }
    });

    test('get_user_churn_metrics: structured content the SDK validates', T, async () => {
      // listTools above cached the output schemas: callTool checks the result against them.
      await client.listTools();
      const res = await client.callTool({
        name: 'get_user_churn_metrics',
        arguments: { user_id: 'u001' },
      });
      assert.equal(res.isError, false, textOf(res));
      const m = res.structuredContent;
      assert.equal(m.user_id, 'u001');
      assert.ok(m.churn_risk >= 0 && m.churn_risk <= 1);
      assert.equal(m.sessions_by_month.length, 6);
      assert.deepEqual(JSON.parse(textOf(res)), m);
      const unknown = await client.callTool({
        name: 'get_user_churn_metrics',
        arguments: { user_id: 'nobody' },
      });
      assert.equal(unknown.isError, true);
      assert.match(textOf(unknown), /unknown user_id 'nobody'/);
    });

    test('run_sql reads and refuses writes', T, async () => {
      await client.listTools();
      const query = 'SELECT count(*) AS n FROM users';
      const res = await client.callTool({ name: 'run_sql', arguments: { query } });
      assert.deepEqual(res.structuredContent,
        { columns: ['n'], rows: [[200]], row_count: 1, truncated: false });
      const writes = [
        'DELETE FROM users',
        "ATTACH DATABASE ':memory:' AS x",
        'PRAGMA user_version = 1',
      ];
      for (const query of writes) {
        const refused = await client.callTool({ name: 'run_sql', arguments: { query } });
        assert.equal(refused.isError, true, query);
        assert.match(textOf(refused), /not authorized/, query);
      }
      const tables = await client.callTool({ name: 'list_tables', arguments: {} });
      assert.ok(tables.structuredContent.tables.some((t) => t.name === 'users'));
    });
  });
}

for (const kind of ['stdio', 'http', 'sse']) {
  describe(`fixture over ${kind}`, () => {
    let dir;
    let state;
    let conn;
    let client;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'airlock-fixture-'));
      state = join(dir, 'state.log');
      conn = await connect(kind, FIXTURE, ['--page-size', '5', '--state-file', state]);
      client = conn.client;
    });
    after(async () => {
      await conn?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test('tools/list pages, joined by nextCursor', T, async () => {
      const { tools, pages } = await allTools(client);
      assert.deepEqual(tools.map((t) => t.name), FIXTURE_TOOLS);
      assert.deepEqual(pages, [5, 5, 2]);
      await client.ping();
    });

    test('every result shape', T, async () => {
      const echo = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
      assert.deepEqual(echo.content, [{ type: 'text', text: 'hi' }]);
      const add = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
      assert.deepEqual(add.structuredContent, { sum: 5 });
      const nested = await client.callTool({ name: 'structured', arguments: {} });
      assert.equal(nested.structuredContent.user.address.city, 'Lyon');
      const image = await client.callTool({ name: 'image', arguments: {} });
      assert.equal(image.content[0].type, 'image');
      assert.ok(image.content[0].data.startsWith('iVBORw0KGgo'), 'PNG data');
      const failed = await client.callTool({ name: 'fail', arguments: { message: 'nope' } });
      assert.equal(failed.isError, true);
      assert.equal(textOf(failed), 'nope');
      const big = await client.callTool({ name: 'big', arguments: { bytes: 100_000 } });
      assert.equal(textOf(big).length, 100_000);
    });

    test('JSON-RPC errors: rpc_error and invalid arguments', T, async () => {
      await assert.rejects(client.callTool({ name: 'rpc_error', arguments: {} }),
        (e) => e instanceof McpError && e.code === -32000 && /boom/.test(e.message));
      await assert.rejects(client.callTool({ name: 'strict', arguments: { n: 11, mode: 'a' } }),
        (e) => e instanceof McpError && e.code === -32602 && /maximum 10/.test(e.message));
    });

    test('an aborted call sends notifications/cancelled, which reaches the server', T, async () => {
      const ac = new AbortController();
      const call = client.callTool({ name: 'slow', arguments: { seconds: 30 } }, undefined,
        { signal: ac.signal });
      setTimeout(() => ac.abort('test'), 300);
      await assert.rejects(call);
      await waitFor(() => readFileSync(state, 'utf8').includes('notifications/cancelled\n'),
        'notifications/cancelled recorded');
      const lines = readFileSync(state, 'utf8').split('\n');
      assert.deepEqual(lines.slice(0, 2), ['initialize', 'notifications/initialized']);
      assert.ok(lines.includes('tools/call slow'));
      await client.ping();
    });

    test(kind === 'sse' ? 'event-stream answers carry a log notification'
      : 'no log notifications without --sse', T, async () => {
      await client.callTool({ name: 'echo', arguments: { text: 'x' } });
      if (kind === 'sse') {
        await waitFor(() => conn.logs.some((l) => /answering 'tools\/call'/.test(l.data)),
          'a notifications/message');
      } else {
        assert.equal(conn.logs.length, 0);
      }
    });
  });

  describe(`fixture --tools-changed-after 2 over ${kind}`, () => {
    let conn;
    after(async () => {
      await conn?.close();
    });

    test('list_changed reaches the SDK client, then late_tool is listed', T, async () => {
      conn = await connect(kind, FIXTURE, ['--tools-changed-after', '2']);
      const { client } = conn;
      let changed = 0;
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        changed += 1;
      });
      await client.callTool({ name: 'echo', arguments: { text: '1' } });
      assert.equal(changed, 0);
      await client.callTool({ name: 'echo', arguments: { text: '2' } });
      await waitFor(() => changed === 1, 'notifications/tools/list_changed');
      const { tools } = await client.listTools();
      assert.equal(tools.at(-1).name, 'late_tool');
      const late = await client.callTool({ name: 'late_tool', arguments: {} });
      assert.equal(textOf(late), 'late_tool answers');
    });
  });
}
