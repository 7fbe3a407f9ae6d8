// Cells written for Jupyter (docs/IPYTHON.md: IPython's dialect and the display protocol) through
// the real clients, unmodified: the official E2B SDK (runCode, its onStdout and onResult
// callbacks in the order the cell made them), the official MCP SDK client (run_python over the
// daemon's /mcp), and the openai client's Responses API with a code interpreter (a scripted fake
// model on loopback). The E2B and Responses daemons are this file's own, stopped by their pids.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

import { connectHttp, textOf } from './lib/env.mjs';
import { answer, startFakeLLM, toolCalls } from './lib/fake-llm.mjs';
import { startE2bSandbox } from './lib/e2b-sandbox.mjs';
import { startGatewayDaemon } from './lib/gateway-daemon.mjs';

// One cell of the dialect: a shell escape with {expr} expansion, a magic, an HTML display and a
// Markdown display between prints, and a value whose text IPython's pretty printer wraps.
const CELL = [
  'n = 6',
  '!echo "bash says {n * 7}"',
  '%time total = sum(range(1000))',
  'from IPython.display import HTML, Markdown, display',
  'print("before the display", flush=True)',
  'display(HTML("<b>bold</b>"))',
  'print("after the display", flush=True)',
  'display(Markdown("**md**"))',
  'list(range(30))',
].join('\n');

describe('the E2B SDK runs IPython cells', () => {
  let env;
  let sbx;

  before(async () => {
    env = await startE2bSandbox({ flags: ['--pool-size', '1'] });
    sbx = env.sbx;
  });
  after(async () => {
    await env?.stop();
  });

  test('escapes, magics and displays, each callback in the order the cell made it', async () => {
    const events = [];
    const exec = await sbx.runCode(CELL, {
      onStdout: (m) => events.push(`stdout:${m.line}`),
      onResult: (r) => events.push(`result:${r.html ?? r.markdown ?? r.text}`),
    });
    assert.equal(exec.error, undefined, JSON.stringify(exec.error));
    const out = exec.logs.stdout.join('');
    assert.match(out, /bash says 42\n/);
    assert.match(out, /Wall time: /);
    assert.deepEqual(exec.results.map((r) => r.html ?? r.markdown ?? null).slice(0, 2),
      ['<b>bold</b>', '**md**']);
    const main = exec.results.find((r) => r.isMainResult);
    assert.ok(main.text.startsWith('[0,\n 1,\n 2,'), `IPython's text of the value: ${main.text}`);
    // The HTML display came between the two prints, as the cell made it: streamed, not at the
    // end of the cell.
    const at = (e) => events.findIndex((x) => x.startsWith(e));
    assert.ok(at('stdout:before the display') < at('result:<b>bold</b>'), events.join(' | '));
    assert.ok(at('result:<b>bold</b>') < at('stdout:after the display'), events.join(' | '));
  });

  test('x = !cmd, get_ipython(), In and Out across calls, a UsageError', async () => {
    await sbx.runCode('lines = !printf "a\\nb\\n"');
    const got = await sbx.runCode('(lines, type(lines).__name__, get_ipython().run_line_magic("pwd", "") != "")');
    assert.equal(got.text, "(['a', 'b'], 'SList', True)");
    const hist = await sbx.runCode('In[-1][:3], len(Out) > 0');
    assert.equal(hist.text, "('In[', True)");
    const bad = await sbx.runCode('%nosuchmagic');
    assert.equal(bad.error.name, 'UsageError');
    assert.equal(bad.error.value, 'Line magic function `%nosuchmagic` not found.');
  });
});

describe('the MCP SDK client runs an IPython cell through run_python', () => {
  let conn;

  before(async () => {
    conn = await connectHttp();
  });
  after(async () => {
    await conn?.close();
  });

  test('the tool result carries the shell output and what each display shows', async () => {
    const res = await conn.client.callTool({ name: 'run_python', arguments: { code: CELL } });
    assert.equal(res.isError ?? false, false, textOf(res));
    const text = textOf(res);
    assert.match(text, /bash says 42/);
    assert.match(text, /<b>bold<\/b>/, 'the HTML display reads as its HTML, not its repr');
    assert.match(text, /\*\*md\*\*/);
    assert.doesNotMatch(text, /IPython\.core\.display\.HTML object/);
    // In its place among stdout, as the cell made it.
    assert.ok(text.indexOf('before the display') < text.indexOf('<b>bold</b>'), text);
    assert.ok(text.indexOf('<b>bold</b>') < text.indexOf('after the display'), text);
  });

  test('plain Python with % and != is untouched by the dialect', async () => {
    const res = await conn.client.callTool({
      name: 'run_python', arguments: { code: 'x = 5 % 3\nx != 3' },
    });
    assert.match(textOf(res), /True/, 'plain Python with % and != is untouched');
  });
});

describe('the Responses API runs an IPython cell in its code interpreter', () => {
  let fake;
  let daemon;
  let client;

  before(async () => {
    fake = await startFakeLLM();
    daemon = await startGatewayDaemon({ llmBaseUrl: fake.url, flags: ['--pool-size', '1'] });
    client = new OpenAI({ baseURL: `${daemon.url}/v1`, apiKey: daemon.token, maxRetries: 0 });
  });
  after(async () => {
    await daemon?.stop();
    await fake?.close();
  });

  test('the model sees the escape, the magic and the displays; the call keeps them in its logs', async () => {
    let seen = '';
    fake.script.push(
      () => toolCalls([['run_python', { code: CELL }]]),
      (req) => {
        seen = req.messages.filter((m) => m.role === 'tool').at(-1)?.content ?? '';
        return answer('Done.');
      },
    );
    const resp = await client.responses.create({
      model: 'fake-model',
      input: 'Run the cell.',
      tools: [{ type: 'code_interpreter', container: { type: 'auto' } }],
      include: ['code_interpreter_call.outputs'],
    });
    assert.match(seen, /bash says 42/);
    assert.match(seen, /<b>bold<\/b>/);
    const call = resp.output.find((o) => o.type === 'code_interpreter_call');
    assert.ok(call, JSON.stringify(resp.output));
    const logs = call.outputs.filter((o) => o.type === 'logs').map((o) => o.logs).join('');
    assert.match(logs, /bash says 42/);
    // In the order the cell made them: each display among stdout, then the value.
    assert.ok(logs.indexOf('before the display') < logs.indexOf('<b>bold</b>'), logs);
    assert.ok(logs.indexOf('<b>bold</b>') < logs.indexOf('after the display'), logs);
    assert.ok(logs.indexOf('after the display') < logs.indexOf('**md**'), logs);
    assert.ok(logs.indexOf('**md**') < logs.indexOf('[0,'), logs);
    assert.equal(resp.output_text, 'Done.');
  });
});
