// The official E2B SDK (@e2b/code-interpreter, unmodified) against airlock's /e2b surface, set up
// the way a team moving its agent does: E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (an airlock
// token), nothing else. The daemon is this file's own (lib/e2b-sandboxes.mjs), stopped by its
// pid at the end (which also checks it exits 0); every sandbox a test made is killed.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { e2bSandboxes } from './lib/e2b-sandboxes.mjs';

describe('the E2B SDK against airlock', () => {
  const e2b = e2bSandboxes();
  let Sandbox;
  let sdk;
  before(() => ({ Sandbox, sdk } = e2b));
  const create = (opts) => e2b.create(opts);

  test('create, runCode with state across calls, a chart as png, an error with traceback', async () => {
    const sbx = await create();
    assert.match(sbx.sandboxId, /^[0-9a-f]{24}$/);

    const first = await sbx.runCode('x = 20\nprint("hello")\nx + 1');
    assert.deepEqual(first.logs.stdout, ['hello\n']);
    assert.equal(first.text, '21');
    assert.equal(first.error, undefined);

    const second = await sbx.runCode('x * 2');
    assert.equal(second.text, '40', 'the variable lives on between calls');

    const chart = await sbx.runCode(
      'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()');
    const png = chart.results.find((r) => r.png);
    assert.ok(png, `a png result: ${JSON.stringify(chart.results.map((r) => r.formats()))}`);
    assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG');

    const failed = await sbx.runCode('1 / 0');
    assert.equal(failed.error.name, 'ZeroDivisionError');
    assert.equal(failed.error.value, 'division by zero');
    assert.match(failed.error.traceback, /ZeroDivisionError/);

    let streamed = '';
    await sbx.runCode('print("via callback")', { onStdout: (m) => (streamed += m.line) });
    assert.equal(streamed, 'via callback\n');
  });

  test('bash contexts and the language option', async () => {
    const sbx = await create();
    const bash = await sbx.runCode('echo $((6 * 7))', { language: 'bash' });
    assert.deepEqual(bash.logs.stdout, ['42\n']);
    const ctx = await sbx.createCodeContext({ language: 'bash' });
    assert.equal(ctx.language, 'bash');
    const inCtx = await sbx.runCode('echo from-context', { context: ctx });
    assert.deepEqual(inCtx.logs.stdout, ['from-context\n']);
    const defaults = ['python', 'bash', 'javascript', 'typescript', 'r'];
    assert.deepEqual((await sbx.listCodeContexts()).map((c) => c.id), [...defaults, ctx.id]);
    await sbx.removeCodeContext(ctx);
    assert.deepEqual((await sbx.listCodeContexts()).map((c) => c.id), defaults);
    await assert.rejects(sbx.runCode('1', { language: 'java' }), /400/);
  });

  test('files: write, read, list, exists, getInfo, makeDir, rename, remove; code sees them in /work', async () => {
    const sbx = await create();
    const info = await sbx.files.write('/home/user/data/in.csv', 'a,b\n1,2\n');
    assert.equal(info.path, '/home/user/data/in.csv');
    assert.equal(await sbx.files.read('/home/user/data/in.csv'), 'a,b\n1,2\n');
    assert.equal(await sbx.files.read('data/in.csv'), 'a,b\n1,2\n', 'relative to the home');

    // Code runs in /home/user, the workspace, also named /work.
    const seen = await sbx.runCode('open("data/in.csv").read().splitlines()[1]');
    assert.equal(seen.text, '1,2', 'code reads what files.write wrote');
    await sbx.runCode('open("/work/out.txt", "w").write("made by code")');
    assert.equal(await sbx.files.read('/home/user/out.txt'), 'made by code');
    // /home/user inside the sandbox is /work too: code written for E2B names it so.
    const byName = await sbx.runCode('open("/home/user/data/in.csv").read().splitlines()[0]');
    assert.equal(byName.text, 'a,b', 'code opens /home/user/x where files.write put it');
    await sbx.runCode('open("/home/user/home.txt", "w").write("via /home/user")');
    assert.equal(await sbx.files.read('/home/user/home.txt'), 'via /home/user');
    const ls = await sbx.commands.run('ls /home/user/data', { cwd: '/home/user' });
    assert.equal(ls.stdout, 'in.csv\n');

    const bytes = await sbx.files.read('/home/user/out.txt', { format: 'bytes' });
    assert.equal(Buffer.from(bytes).toString(), 'made by code');

    await sbx.files.write([
      { path: '/home/user/many/one.txt', data: '1' },
      { path: '/home/user/many/two.txt', data: '22' },
    ]);
    const listed = await sbx.files.list('/home/user/many');
    assert.deepEqual(listed.map((e) => [e.name, e.type, e.size]).sort(),
      [['one.txt', 'file', 1], ['two.txt', 'file', 2]]);
    assert.deepEqual(listed.map((e) => e.path).sort(),
      ['/home/user/many/one.txt', '/home/user/many/two.txt']);

    assert.equal(await sbx.files.exists('/home/user/many/one.txt'), true);
    assert.equal(await sbx.files.exists('/home/user/nope.txt'), false);
    const st = await sbx.files.getInfo('/home/user/many');
    assert.equal(st.type, 'dir');

    assert.equal(await sbx.files.makeDir('/home/user/newdir/sub'), true);
    assert.equal(await sbx.files.makeDir('/home/user/newdir/sub'), false, 'already there');
    assert.equal((await sbx.files.getInfo('/home/user/newdir/sub')).type, 'dir');

    const moved = await sbx.files.rename('/home/user/many/one.txt', '/home/user/newdir/uno.txt');
    assert.equal(moved.path, '/home/user/newdir/uno.txt');
    assert.equal(await sbx.files.read('/home/user/newdir/uno.txt'), '1');

    await sbx.files.remove('/home/user/newdir');
    assert.equal(await sbx.files.exists('/home/user/newdir'), false);

    await assert.rejects(sbx.files.read('/home/user/missing.txt'), sdk.FileNotFoundError);
    await assert.rejects(sbx.files.read('/etc/passwd'), /outside/);
    await assert.rejects(sbx.files.watchDir('/home/user', () => {}), /airlock does not offer/);
  });

  test('commands.run: output, exit code, cwd and envs; what is not offered says so', async () => {
    const sbx = await create({ envs: { GREETING: 'hi' } });
    const out = [];
    const r = await sbx.commands.run('echo "$GREETING $WHO"; pwd; echo oops >&2', {
      envs: { WHO: 'there' }, onStdout: (d) => out.push(d),
    });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, 'hi there\n/home/user\n');
    assert.equal(r.stderr, 'oops\n');
    assert.equal(out.join(''), r.stdout);

    await sbx.files.makeDir('/home/user/sub');
    const inSub = await sbx.commands.run('pwd', { cwd: '/home/user/sub' });
    assert.equal(inSub.stdout, '/home/user/sub\n');

    await assert.rejects(sbx.commands.run('exit 3'), (e) => {
      assert.ok(e instanceof sdk.CommandExitError, String(e));
      assert.equal(e.exitCode, 3);
      return true;
    });
    await assert.rejects(sbx.commands.run('sleep 1', { background: true, stdin: true }),
      /airlock does not offer stdin/);
    await assert.rejects(sbx.pty.create({ cols: 80, rows: 24, onData: () => {} }),
      /airlock does not offer/);
  });

  test('getInfo, list, pause and connect keep the state; kill ends the sandbox', async () => {
    const sbx = await create({ metadata: { app: 'e2b-test' } });
    await sbx.runCode('kept = "still here"');
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.equal(info.templateId, 'code-interpreter-v1');
    assert.equal(info.state, 'running');

    const page = await Sandbox.list().nextItems();
    assert.ok(page.some((s) => s.sandboxId === sbx.sandboxId));

    assert.equal(await sbx.pause(), true);
    assert.equal((await sbx.getInfo()).state, 'paused');
    assert.equal(await sbx.pause(), false, 'already paused');

    const again = await Sandbox.connect(sbx.sandboxId);
    assert.equal((await again.getInfo()).state, 'running');
    assert.equal((await again.runCode('kept')).text, 'still here');

    assert.equal(await sbx.isRunning(), true);
    assert.equal(await sbx.kill(), true);
    assert.equal(await sbx.isRunning(), false);
    assert.equal(await Sandbox.kill(sbx.sandboxId), false, 'gone already');
    await assert.rejects(Sandbox.connect(sbx.sandboxId), sdk.NotFoundError);
  });

  test('a sandbox killed while runCode streams makes the call reject with E2B\'s error, at once', async () => {
    const sbx = await create();
    const seen = [];
    let started;
    const printed = new Promise((resolve) => { started = resolve; });
    const running = sbx.runCode('import time\nprint("started", flush=True)\ntime.sleep(60)\n"not reached"',
      { onStdout: (m) => { seen.push(m.line ?? String(m)); started(); } });
    const outcome = running.then((e) => ({ resolved: e }), (e) => ({ rejected: e }));
    await printed;
    const killedAt = Date.now();
    assert.equal(await Sandbox.kill(sbx.sandboxId), true);
    const { resolved, rejected } = await outcome;
    const after = Date.now() - killedAt;
    assert.equal(resolved, undefined, `runCode resolved: ${JSON.stringify(resolved)}`);
    assert.ok(rejected instanceof sdk.TimeoutError, `${rejected?.name}: ${rejected?.message}`);
    assert.match(rejected.message, /sandbox was killed while the request was in progress/);
    assert.ok(after < 1000, `rejected ${after} ms after the kill`);
    assert.deepEqual(seen, ['started\n']);
  });

  test('runCode and commands.run callbacks get output as it is produced, not when the cell ends', async () => {
    const sbx = await create();
    // Each callback notes when it came; the first must come well before the call returns (a
    // second passes between the two prints), whatever the machine's speed.
    const timed = async (run) => {
      const seen = [];
      const result = await run((m) => seen.push([Date.now(), typeof m === 'string' ? m : m.line]));
      const end = Date.now();
      return { result, seen, end };
    };
    const cell = await timed((onStdout) => sbx.runCode(
      'import time\nprint("first")\ntime.sleep(1)\nprint("second")\n7', { onStdout }));
    assert.deepEqual(cell.seen.map(([, line]) => line), ['first\n', 'second\n']);
    assert.ok(cell.end - cell.seen[0][0] >= 700,
      `the first line came ${cell.end - cell.seen[0][0]} ms before the end`);
    assert.equal(cell.result.text, '7');

    const cmd = await timed((onStdout) => sbx.commands.run('echo one; sleep 1; echo two', { onStdout }));
    assert.equal(cmd.seen.map(([, data]) => data).join(''), 'one\ntwo\n');
    assert.ok(cmd.end - cmd.seen[0][0] >= 700,
      `the first output came ${cmd.end - cmd.seen[0][0]} ms before the end`);
    assert.equal(cmd.result.stdout, 'one\ntwo\n');
  });

  test('runCode envs are for that call only; contexts keep their cwd; javascript where the profile allows it', async () => {
    const sbx = await create();
    const withEnv = await sbx.runCode('import os\nos.environ["ONLY_NOW"]', { envs: { ONLY_NOW: 'yes' } });
    assert.equal(withEnv.text, 'yes');
    assert.equal((await sbx.runCode('"ONLY_NOW" in os.environ')).text, 'False', 'gone after the call');
    const bashEnv = await sbx.runCode('echo "$ONLY_NOW"', { language: 'bash', envs: { ONLY_NOW: 'b' } });
    assert.deepEqual(bashEnv.logs.stdout, ['b\n']);

    await sbx.files.makeDir('/home/user/sub');
    const ctx = await sbx.createCodeContext({ cwd: '/home/user/sub' });
    assert.equal(ctx.cwd, '/home/user/sub');
    // A python context is its own interpreter: it imports os itself.
    assert.equal((await sbx.runCode('import os\nos.getcwd()', { context: ctx })).text, '/home/user/sub');
    assert.equal((await sbx.runCode('os.getcwd()')).text, '/home/user', 'the session\'s own cwd is back');
    const inTmp = await sbx.commands.run('pwd', { cwd: '/tmp' });
    assert.equal(inTmp.stdout, '/tmp\n');

    const js = await sbx.runCode('const a = 6 * 7; console.log("from node"); a', { language: 'js' });
    assert.deepEqual(js.logs.stdout, ['from node\n']);
    assert.equal(js.text, '42');
    // A string's text loses its single quotes, as E2B's server strips them, in every language;
    // other quotes, and the native API's text, stay.
    assert.equal((await sbx.runCode("'a' + 'b'", { language: 'js' })).text, 'ab');
    assert.equal((await sbx.runCode('"it\'s"')).text, '"it\'s"');
    assert.equal((await sbx.runCode("'x'")).text, 'x');
    const jsCtx = await sbx.createCodeContext({ language: 'javascript' });
    assert.equal(jsCtx.language, 'javascript');
    assert.equal((await sbx.runCode('a + 1', { context: jsCtx })).text, '43', 'state kept');
    assert.equal((await sbx.runCode('a as number', { language: 'ts' })).text, '42', 'typescript shares it');

    const minimal = await create('minimal');
    // The SDK shows only the status ("400 Bad Request"); the message says "does not allow".
    await assert.rejects(minimal.createCodeContext({ language: 'js' }), /400/);
    assert.equal((await minimal.createCodeContext({ language: 'python' })).language, 'python');
  });

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  // endAt is about ms from now (the server's clock is this machine's; seconds are whole).
  const endsIn = (endAt, ms) => {
    const off = endAt.getTime() - (Date.now() + ms);
    assert.ok(Math.abs(off) < 5000, `endAt ${endAt.toISOString()} is ${off} ms off now + ${ms} ms`);
  };

  test('timeout is the lifetime: setTimeout moves endAt; once it runs out the sandbox is paused and connect resumes it', async () => {
    const sbx = await create({ timeoutMs: 60_000 });
    endsIn((await sbx.getInfo()).endAt, 60_000);
    await sbx.setTimeout(600_000);
    const info = await sbx.getInfo();
    endsIn(info.endAt, 600_000);
    const listed = (await Sandbox.list().nextItems()).find((s) => s.sandboxId === sbx.sandboxId);
    assert.equal(listed.endAt.getTime(), info.endAt.getTime(), 'list shows the same endAt');
    await assert.rejects(Sandbox.setTimeout('0123456789abcdef01234567', 1000), sdk.NotFoundError);

    // Busy or not, the sandbox stops when its timeout runs out; its state is kept.
    const short = await create({ timeoutMs: 2000 });
    await short.runCode('kept = 41 + 1');
    const deadline = Date.now() + 30_000;
    while ((await short.getInfo()).state !== 'paused') {
      assert.ok(Date.now() < deadline, 'the sandbox did not stop when its timeout ran out');
      await sleep(250);
    }
    const back = await Sandbox.connect(short.sandboxId, { timeoutMs: 120_000 });
    assert.equal((await back.runCode('kept')).text, '42', 'connect resumes it with its variables');
    const after = await back.getInfo();
    assert.equal(after.state, 'running');
    endsIn(after.endAt, 120_000);
  });

  test('metadata is kept across pause and connect, shown by getInfo and list, and filters list', async () => {
    const tricky = 'a b/c&d=e%f';
    const a = await create({ metadata: { app: 'e2b-meta', 'user.id': tricky } });
    const b = await create({ metadata: { app: 'e2b-other' } });
    assert.deepEqual((await a.getInfo()).metadata, { app: 'e2b-meta', 'user.id': tricky });
    const ids = async (query) =>
      (await Sandbox.list({ query }).nextItems()).map((s) => s.sandboxId).sort();
    assert.deepEqual(await ids({ metadata: { app: 'e2b-meta' } }), [a.sandboxId]);
    assert.deepEqual(await ids({ metadata: { app: 'e2b-other' } }), [b.sandboxId]);
    assert.deepEqual(await ids({ metadata: { 'user.id': tricky } }), [a.sandboxId],
      'a value with characters the query encodes');
    assert.deepEqual(await ids({ metadata: { app: 'e2b-meta', 'user.id': 'x' } }), [],
      'every pair must match');
    const listed = (await Sandbox.list({ query: { metadata: { app: 'e2b-other' } } }).nextItems())[0];
    assert.deepEqual(listed.metadata, { app: 'e2b-other' });

    await a.pause();
    assert.deepEqual(await ids({ metadata: { app: 'e2b-meta' }, state: ['paused'] }), [a.sandboxId]);
    assert.deepEqual(await ids({ metadata: { app: 'e2b-meta' }, state: ['running'] }), []);
    const again = await Sandbox.connect(a.sandboxId);
    assert.deepEqual((await again.getInfo()).metadata, { app: 'e2b-meta', 'user.id': tricky });
    await assert.rejects(create({ metadata: { 'bad key!': 'x' } }), /metadata/);
  });

  test('errors: a wrong API key, an unknown template, an unknown sandbox', async () => {
    await assert.rejects(Sandbox.create({ apiKey: 'wrong' }), sdk.AuthenticationError);
    await assert.rejects(Sandbox.create('no-such-template'), /template 'no-such-template' not found/);
    await assert.rejects(Sandbox.getInfo('0123456789abcdef01234567'), sdk.NotFoundError);
    await assert.rejects(Sandbox.getMetrics('0123456789abcdef01234567'),
      /airlock does not offer/);
  });
});
