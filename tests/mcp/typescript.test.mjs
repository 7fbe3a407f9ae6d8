// TypeScript cells and ESM imports (issue 25) through real clients: the official E2B SDK
// (@e2b/code-interpreter, unmodified: runCode with language "typescript" and "ts", a JavaScript
// cell with `import fs from 'node:fs'`) and the official MCP SDK client (run_javascript with
// language "typescript", over HTTP and stdio). The daemon is this file's own (lib/e2b-sandboxes.mjs), stopped by its
// pid at the end; every sandbox a test made is killed.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { e2bSandboxes } from './lib/e2b-sandboxes.mjs';
import { connectStdio, textOf } from './lib/env.mjs';

const TS = '/usr/share/nodejs/typescript/package.json';
const skip = existsSync(TS)
  ? false
  : `typescript cells need Debian's TypeScript compiler (${TS}): apt-get install node-typescript`;

describe('TypeScript cells and ESM imports', { skip }, () => {
  const e2b = e2bSandboxes();
  const create = (opts) => e2b.create(opts);

  test('E2B runCode with language typescript and ts shares the REPL with javascript', async () => {
    const sbx = await create();
    const first = await sbx.runCode(
      'interface User { name: string; age: number }\n' +
        "const user: User = { name: 'ada', age: 36 };\n" +
        'console.log(`hi ${user.name}`);\nuser.age + 1',
      { language: 'typescript' },
    );
    assert.equal(first.error, undefined, JSON.stringify(first.error));
    assert.deepEqual(first.logs.stdout, ['hi ada\n']);
    assert.equal(first.text, '37');

    const viaTs = await sbx.runCode('const older: number = user.age * 2; older', { language: 'ts' });
    assert.equal(viaTs.text, '72');
    const fromJs = await sbx.runCode('user.name + older', { language: 'js' });
    assert.equal(fromJs.text, 'ada72', 'a JavaScript cell sees the TypeScript variables');

    const typeError = await sbx.runCode("const wrong: number = 'text'; wrong", { language: 'ts' });
    assert.equal(typeError.text, 'text', 'a type error does not stop the cell');

    const bad = await sbx.runCode('let x: number = ;', { language: 'typescript' });
    assert.equal(bad.error?.name, 'SyntaxError');
    assert.match(bad.error.value, /Expression expected/);

    const ctx = await sbx.createCodeContext({ language: 'ts' });
    assert.equal(ctx.language, 'typescript');
    assert.equal((await sbx.runCode('older + 1', { context: ctx })).text, '73');
  });

  test('E2B: a JavaScript cell imports node:fs, and the binding stays', async () => {
    const sbx = await create();
    await sbx.files.write('/home/user/note.txt', 'imported');
    const read = await sbx.runCode(
      "import fs from 'node:fs';\nimport { join } from 'node:path';\n" +
        "fs.readFileSync(join(process.cwd(), 'note.txt'), 'utf8')",
      { language: 'javascript' },
    );
    assert.equal(read.error, undefined, JSON.stringify(read.error));
    assert.equal(read.text, 'imported');
    const again = await sbx.runCode("typeof fs.existsSync + ' ' + typeof join", { language: 'js' });
    assert.equal(again.text, 'function function');
  });

  test('E2B: a profile without javascript refuses typescript', async () => {
    const minimal = await create('minimal');
    // The SDK shows only the status; the message says "does not allow".
    await assert.rejects(minimal.runCode('const a: number = 1', { language: 'typescript' }), /400/);
    await assert.rejects(minimal.createCodeContext({ language: 'ts' }), /400/);
  });

  // The daemon's /mcp, and `airlock mcp` over stdio with its in-process sandboxes.
  const mcpTransports = [
    {
      name: 'streamable HTTP',
      connect: async () => {
        const transport = new StreamableHTTPClientTransport(new URL('/mcp', e2b.daemon.url), {
          requestInit: { headers: { Authorization: `Bearer ${e2b.daemon.token}` } },
        });
        const client = new Client({ name: 'airlock-tests', version: '1.0.0' }, { capabilities: {} });
        await client.connect(transport);
        return {
          client,
          close: async () => {
            await transport.terminateSession().catch(() => {});
            await client.close();
          },
        };
      },
    },
    { name: 'stdio (airlock mcp)', connect: () => connectStdio() },
  ];

  for (const t of mcpTransports) test(`MCP over ${t.name}: run_javascript with language typescript`, async () => {
    const { client, close } = await t.connect();
    try {
      const tools = (await client.listTools()).tools;
      const js = tools.find((tool) => tool.name === 'run_javascript');
      assert.deepEqual(js.inputSchema.properties.language.enum, ['javascript', 'typescript']);
      const call = (args) => client.callTool({ name: 'run_javascript', arguments: args });

      const ts = await call({
        code: "import os from 'node:os';\ntype N = number;\nconst n: N = 6 * 7;\nn",
        language: 'typescript',
      });
      assert.equal(ts.isError, false, textOf(ts));
      assert.match(textOf(ts), /42/);
      const js2 = await call({ code: 'typeof os.cpus + n' });
      assert.equal(js2.isError, false, textOf(js2));
      assert.match(textOf(js2), /function42/);
      const bad = await call({ code: 'const: number = 1', language: 'typescript' });
      assert.equal(bad.isError, true);
      assert.match(textOf(bad), /SyntaxError/);
      const wrong = await call({ code: '1', language: 'ruby' });
      assert.equal(wrong.isError, true, 'the schema allows javascript and typescript only');
    } finally {
      await close();
    }
  });
});
