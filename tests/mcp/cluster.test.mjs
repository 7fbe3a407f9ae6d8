// The official E2B SDK (@e2b/code-interpreter) and the openai client against an airlock cluster's
// front door (scripts/cluster.sh; docs/KUBERNETES.md): every call after a create names an object
// of one node, and must reach that node through the one URL. Run by tests/cluster/test_cluster.py
// with AIRLOCK_DAEMON_URL (the front door) and AIRLOCK_TOKEN; not part of tests/mcp/run.sh, whose
// daemon is a single one. The nodes' ids name their node ("-n0").
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, createReadStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

const url = process.env.AIRLOCK_DAEMON_URL;
const token = process.env.AIRLOCK_TOKEN;
const NODE = '-n[0-9]+';

describe('the E2B SDK through the front door', () => {
  let Sandbox;
  const made = [];
  before(async () => {
    assert.ok(url && token, 'AIRLOCK_DAEMON_URL and AIRLOCK_TOKEN name the cluster');
    process.env.E2B_API_URL = `${url}/e2b/api`;
    process.env.E2B_SANDBOX_URL = `${url}/e2b/sandbox`;
    process.env.E2B_API_KEY = token;
    ({ Sandbox } = await import('@e2b/code-interpreter'));
  });
  after(async () => {
    for (const sbx of made) await sbx.kill().catch(() => {});
  });

  test('sandboxes on several nodes keep their state, files and contexts', async () => {
    const boxes = [];
    for (let i = 0; i < 3; i++) {
      const sbx = await Sandbox.create();
      made.push(sbx);
      assert.match(sbx.sandboxId, new RegExp(`^[0-9a-f]{24}${NODE}$`));
      boxes.push(sbx);
    }
    const nodes = new Set(boxes.map((b) => b.sandboxId.split('-')[1]));
    assert.ok(nodes.size >= 2, `three creates reached ${[...nodes]}`);
    for (const [i, sbx] of boxes.entries()) {
      await sbx.runCode(`n = ${i}`);
      await sbx.files.write('/home/user/note.txt', `box ${i}`);
    }
    for (const [i, sbx] of boxes.entries()) {
      const r = await sbx.runCode('n * 10');
      assert.equal(r.text, String(i * 10));
      assert.equal(await sbx.files.read('/home/user/note.txt'), `box ${i}`);
      let out = '';
      await sbx.runCode('print("streamed")', { onStdout: (m) => (out += m.line) });
      assert.equal(out, 'streamed\n');
      const cmd = await sbx.commands.run('echo $((6 * 7))');
      assert.equal(cmd.stdout, '42\n');
    }
    const again = await Sandbox.connect(boxes[1].sandboxId);
    assert.equal((await again.runCode('n')).text, '1');
    made.boxes = boxes;
  });

  test('Sandbox.list names the sandboxes of every node', async () => {
    const listed = (await Sandbox.list().nextItems()).map((s) => s.sandboxId);
    for (const b of made.boxes) assert.ok(listed.includes(b.sandboxId), `${b.sandboxId} in ${listed}`);
  });
});

describe('the openai client through the front door', () => {
  let client;
  let dir;
  const made = { files: [], containers: [] };
  before(() => {
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: token, maxRetries: 0 });
    dir = mkdtempSync(join(tmpdir(), 'airlock-cluster-'));
    writeFileSync(join(dir, 'sales.csv'), 'region,amount\nnorth,10\nsouth,32\n');
  });
  after(async () => {
    for (const id of made.containers) await client.containers.delete(id).catch(() => {});
    for (const id of made.files) await client.files.delete(id).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  test('files: upload, retrieve, content, list, delete', async () => {
    const f = await client.files.create({ file: createReadStream(join(dir, 'sales.csv')), purpose: 'user_data' });
    made.files.push(f.id);
    assert.match(f.id, new RegExp(`^file-[0-9a-f]{24}${NODE}$`));
    assert.equal((await client.files.retrieve(f.id)).id, f.id);
    assert.equal(await (await client.files.content(f.id)).text(), 'region,amount\nnorth,10\nsouth,32\n');
  });

  test('files.list and containers.list name every node\'s objects', async () => {
    const files = [];
    for await (const x of client.files.list()) files.push(x.id);
    for (const id of made.files) assert.ok(files.includes(id), `${id} listed`);
    const ids = [];
    for await (const x of client.containers.list()) ids.push(x.id);
    for (const id of made.containers) assert.ok(ids.includes(id), `${id} listed`);
  });

  test('containers and their files on several nodes', async () => {
    const cs = [];
    for (let i = 0; i < 3; i++) {
      const c = await client.containers.create({ name: `cluster-${i}` });
      made.containers.push(c.id);
      assert.match(c.id, new RegExp(`^cntr_[0-9a-f]{24}${NODE}$`));
      cs.push(c);
    }
    for (const c of cs) {
      assert.equal((await client.containers.retrieve(c.id)).name, c.name);
      const up = await client.containers.files.create(c.id, { file: createReadStream(join(dir, 'sales.csv')) });
      assert.match(up.id, new RegExp(`^cfile_[0-9a-f]{24}${NODE}$`));
      const back = await client.containers.files.content.retrieve(up.id, { container_id: c.id });
      assert.equal(await back.text(), 'region,amount\nnorth,10\nsouth,32\n');
    }
  });
});
