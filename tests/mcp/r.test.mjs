// R cells (language "r") through the real clients, unmodified: the official E2B SDK
// (runCode with { language: 'r' }: variables across calls, the printed value as text, a plot as
// png, R's error) against a daemon of this file's own, stopped by its pid; and the official MCP
// SDK client calling run_r over the shared daemon's /mcp. Skipped, saying why, without R.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { accessSync, constants } from 'node:fs';

import { connectHttp, textOf } from './lib/env.mjs';
import { e2bSdkFor, startGatewayDaemon } from './lib/gateway-daemon.mjs';

let noR = false;
try {
  accessSync('/usr/lib/R/lib/libR.so', constants.R_OK);
} catch {
  noR = 'R is not installed (/usr/lib/R/lib/libR.so): apt-get install r-base-core';
}

describe('the E2B SDK runs R cells', { skip: noR }, () => {
  let daemon;
  let sbx;

  before(async () => {
    daemon = await startGatewayDaemon({ flags: ['--pool-size', '1'] });
    const { Sandbox } = await e2bSdkFor(daemon);
    sbx = await Sandbox.create();
  });
  after(async () => {
    await sbx?.kill().catch(() => {});
    await daemon?.stop();
  });

  test('variables across calls, stdout, the value as R prints it', async () => {
    const first = await sbx.runCode('x <- c(2, 4)\ncat("hello\\n")\nmean(x)', { language: 'r' });
    assert.equal(first.error, undefined, JSON.stringify(first.error));
    assert.deepEqual(first.logs.stdout, ['hello\n']);
    assert.equal(first.text, '[1] 3');
    const second = await sbx.runCode('sum(x) * 10', { language: 'r' });
    assert.equal(second.text, '[1] 60', 'the variable lives on between calls');
  });

  test('a plot comes back as png', async () => {
    const exec = await sbx.runCode('plot(1:10, main = "r")', { language: 'r' });
    assert.equal(exec.error, undefined, JSON.stringify(exec.error));
    const png = exec.results.find((r) => r.png);
    assert.ok(png, `a png result: ${JSON.stringify(exec.results.map((r) => r.formats()))}`);
    assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG');
  });

  test('an error carries R\'s message', async () => {
    const exec = await sbx.runCode('stop("no such thing")', { language: 'r' });
    assert.equal(exec.error.name, 'RError');
    assert.equal(exec.error.value, 'no such thing');
    assert.match(exec.error.traceback, /Error: no such thing/);
  });

  test('an R context keeps its own cells in R', async () => {
    const ctx = await sbx.createCodeContext({ language: 'r' });
    assert.equal(ctx.language, 'r');
    const exec = await sbx.runCode('paste("from", "context")', { context: ctx });
    assert.equal(exec.text, '[1] "from context"');
  });
});

describe('the MCP SDK client runs R through run_r', { skip: noR }, () => {
  let conn;

  before(async () => {
    conn = await connectHttp();
  });
  after(async () => {
    await conn?.close();
  });

  test('run_r is listed, keeps variables, and returns a plot as an image', async () => {
    const { tools } = await conn.client.listTools();
    assert.ok(tools.some((t) => t.name === 'run_r'), tools.map((t) => t.name).join(' '));
    const set = await conn.client.callTool({ name: 'run_r', arguments: { code: 'y <- 21' } });
    assert.equal(set.isError ?? false, false, textOf(set));
    const res = await conn.client.callTool({
      name: 'run_r', arguments: { code: 'plot(1:3)\ny * 2' },
    });
    assert.equal(res.isError ?? false, false, textOf(res));
    assert.match(textOf(res), /\[1\] 42/);
    assert.ok(res.content.some((c) => c.type === 'image' && c.mimeType === 'image/png'),
      JSON.stringify(res.content.map((c) => c.type)));
  });

  test('an R error is the tool\'s error, with R\'s message', async () => {
    const res = await conn.client.callTool({ name: 'run_r', arguments: { code: 'log(-1:"a")' } });
    assert.match(textOf(res), /RError/);
  });
});
