// Code contexts through the official E2B SDK (@e2b/code-interpreter, unmodified): each created
// python context is its own interpreter (independent globals, as E2B's kernels), listed after
// the default contexts, restarted with fresh globals, removed; the default context is the
// sandbox's own interpreter, untouched by them. A daemon of its own (lib/gateway-daemon.mjs),
// stopped by its pid at the end; every sandbox a test made is killed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { startGatewayDaemon } from './lib/gateway-daemon.mjs';

describe('E2B code contexts against airlock', () => {
  let daemon;
  let Sandbox;
  const made = [];

  before(async () => {
    daemon = await startGatewayDaemon();
    process.env.E2B_API_URL = `${daemon.url}/e2b/api`;
    process.env.E2B_SANDBOX_URL = `${daemon.url}/e2b/sandbox`;
    process.env.E2B_API_KEY = daemon.token;
    ({ Sandbox } = await import('@e2b/code-interpreter'));
  });
  after(async () => {
    for (const sbx of made) await sbx.kill().catch(() => {});
    await daemon?.stop();
  });

  async function create() {
    const sbx = await Sandbox.create();
    made.push(sbx);
    return sbx;
  }

  test('two contexts have independent globals; the default context is unaffected', async () => {
    const sbx = await create();
    await sbx.runCode('x = "default"');
    const a = await sbx.createCodeContext();
    const b = await sbx.createCodeContext({ language: 'python' });
    assert.equal(a.language, 'python');
    assert.notEqual(a.id, b.id);
    await sbx.runCode('x = "in a"', { context: a });
    const inB = await sbx.runCode('x', { context: b });
    assert.equal(inB.error?.name, 'NameError', 'a variable of context A is NameError in B');
    assert.equal((await sbx.runCode('x', { context: a })).text, 'in a');
    assert.equal((await sbx.runCode('x')).text, 'default');
    // Each its own process, in the same sandbox: same files.
    const pids = new Set();
    for (const context of [undefined, a, b])
      pids.add((await sbx.runCode('import os; os.getpid()', { context })).text);
    assert.equal(pids.size, 3);
    await sbx.runCode('open("/work/from-a.txt", "w").write("hi")', { context: a });
    assert.equal((await sbx.runCode('open("/work/from-a.txt").read()', { context: b })).text,
      'hi');
    let streamed = '';
    await sbx.runCode('print("from b")', { context: b, onStdout: (m) => (streamed += m.line) });
    assert.equal(streamed, 'from b\n');
  });

  test('listCodeContexts lists the defaults and the created ones; removeCodeContext', async () => {
    const sbx = await create();
    const before = await sbx.listCodeContexts();
    assert.deepEqual(before.map((c) => [c.id, c.language]),
      [['python', 'python'], ['bash', 'bash'], ['javascript', 'javascript'],
        ['typescript', 'typescript'], ['r', 'r']]);
    const a = await sbx.createCodeContext({ cwd: '/home/user' });
    const listed = await sbx.listCodeContexts();
    assert.deepEqual(listed.map((c) => c.id),
      ['python', 'bash', 'javascript', 'typescript', 'r', a.id]);
    assert.equal(listed[5].cwd, '/home/user');
    // The default python context by its id is the sandbox's own interpreter.
    await sbx.runCode('d = 1');
    assert.equal((await sbx.runCode('d + 1', { context: listed[0] })).text, '2');

    await sbx.runCode('gone = 1', { context: a });
    await sbx.removeCodeContext(a);
    assert.deepEqual((await sbx.listCodeContexts()).map((c) => c.id),
      ['python', 'bash', 'javascript', 'typescript', 'r']);
    await assert.rejects(sbx.runCode('gone', { context: a }), /404|not found/);
    await assert.rejects(sbx.removeCodeContext('python'), /400/);
  });

  test('restartCodeContext clears a context\'s variables, and the default one\'s', async () => {
    const sbx = await create();
    const a = await sbx.createCodeContext();
    await sbx.runCode('v = 41', { context: a });
    await sbx.runCode('kept = True');
    await sbx.restartCodeContext(a);
    assert.equal((await sbx.runCode('v', { context: a })).error?.name, 'NameError');
    assert.equal((await sbx.runCode('v = 1; v + 1', { context: a })).text, '2', 'usable again');
    assert.equal((await sbx.runCode('kept')).text, 'True', 'the default context is unaffected');

    await sbx.restartCodeContext('python');
    assert.equal((await sbx.runCode('kept')).error?.name, 'NameError');
    assert.equal((await sbx.runCode('v', { context: a })).text, '1', 'context A is unaffected');
    await assert.rejects(sbx.restartCodeContext('no-such-context'), /404|not found/);
  });

  test('pause and connect: created contexts come back empty, the default keeps its variables', async () => {
    const sbx = await create();
    const a = await sbx.createCodeContext();
    await sbx.runCode('w = 7', { context: a });
    await sbx.runCode('u = 8');
    assert.equal(await sbx.pause(), true);
    const again = await Sandbox.connect(sbx.sandboxId);
    assert.equal((await again.runCode('u')).text, '8');
    assert.equal((await again.runCode('w', { context: a })).error?.name, 'NameError');
    assert.equal((await again.runCode('w = 9; w', { context: a })).text, '9');
    assert.equal((await again.runCode('u')).text, '8', 'still separate from the default');
  });
});
