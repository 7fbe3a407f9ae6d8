// OpenAI's Files and Containers APIs on airlock, driven by the real, unmodified openai npm
// client the way an application uses them: files.create from a stream, containers.create with
// file_ids, containers.files.create/list/retrieve/content/delete, auto-pagination over the
// cursor, and the SDK's typed errors for what airlock refuses. The daemon is this file's own
// (lib/gateway-daemon.mjs, no model behind it), with a small --max-upload for the 413.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

import { startGatewayDaemon } from './lib/gateway-daemon.mjs';

const CSV = 'region,sales\nnorth,10\nsouth,32\n';

describe('the openai client against the Files and Containers APIs', () => {
  let daemon;
  let client;
  let dir;
  const made = { files: [], containers: [] };

  before(async () => {
    daemon = await startGatewayDaemon({ flags: ['--max-upload', '64K'] });
    // No retries: a failure must show, not be hidden by a second attempt.
    client = new OpenAI({ baseURL: `${daemon.url}/v1`, apiKey: daemon.token, maxRetries: 0 });
    dir = mkdtempSync(join(process.env.TMPDIR || tmpdir(), 'airlock-containers-test-'));
    writeFileSync(join(dir, 'sales.csv'), CSV);
    writeFileSync(join(dir, 'notes.txt'), 'remember the south');
    writeFileSync(join(dir, 'big.bin'), Buffer.alloc(65 * 1024, 7));
  });
  after(async () => {
    // Whatever a failed test left, then the daemon (which checks it exits 0).
    for (const id of made.containers) await client?.containers.delete(id).catch(() => {});
    for (const id of made.files) await client?.files.delete(id).catch(() => {});
    await daemon?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // Runs code in the container's session through airlock's own API (a container is a session).
  async function run(containerId, code) {
    const sid = `s-${containerId.slice('cntr_'.length)}`;
    const r = await fetch(`${daemon.url}/v1/sessions/${sid}/execute`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${daemon.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ code }),
    });
    assert.equal(r.status, 200, await r.clone().text());
    return r.json();
  }

  async function upload(name, purpose = 'assistants') {
    const f = await client.files.create({ file: createReadStream(join(dir, name)), purpose });
    made.files.push(f.id);
    return f;
  }

  test('files: create from a stream, retrieve, download, list page by page, delete', async () => {
    const f = await upload('sales.csv');
    assert.match(f.id, /^file-[0-9a-f]{24}$/);
    assert.equal(f.object, 'file');
    assert.equal(f.filename, 'sales.csv');
    assert.equal(f.bytes, CSV.length);
    assert.equal(f.purpose, 'assistants');
    assert.deepEqual(await client.files.retrieve(f.id), f);

    const content = await client.files.content(f.id);
    assert.equal(Buffer.from(await content.arrayBuffer()).toString(), CSV);

    const g = await upload('notes.txt', 'user_data');
    // limit 1: the SDK follows has_more and after across pages by itself.
    const seen = [];
    for await (const x of client.files.list({ limit: 1 })) seen.push(x.id);
    assert.ok(seen.includes(f.id) && seen.includes(g.id), seen.join(' '));
    assert.equal(new Set(seen).size, seen.length, 'no file twice across pages');
    const onlyUserData = [];
    for await (const x of client.files.list({ purpose: 'user_data' })) onlyUserData.push(x.id);
    assert.deepEqual(onlyUserData, [g.id]);

    assert.deepEqual(await client.files.delete(g.id), { id: g.id, object: 'file', deleted: true });
    await assert.rejects(client.files.retrieve(g.id), (e) => e instanceof OpenAI.NotFoundError);
  });

  test('containers: create with file_ids, retrieve, list, delete', async () => {
    const f = await upload('sales.csv');
    const c = await client.containers.create({
      name: 'sdk-analysis',
      file_ids: [f.id],
      expires_after: { anchor: 'last_active_at', minutes: 5 },
      memory_limit: '1g',
    });
    made.containers.push(c.id);
    assert.match(c.id, /^cntr_[0-9a-f]{24}$/);
    assert.equal(c.object, 'container');
    assert.equal(c.name, 'sdk-analysis');
    assert.equal(c.status, 'running');
    assert.deepEqual(c.expires_after, { anchor: 'last_active_at', minutes: 5 });
    assert.equal(c.memory_limit, '1g');
    assert.equal((await client.containers.retrieve(c.id)).id, c.id);

    // The file is where code written for OpenAI's code interpreter looks.
    const out = await run(c.id, "print(open('/mnt/data/sales.csv').read().count('\\n'))");
    assert.equal(out.stdout, '3\n');

    const other = await client.containers.create({ name: 'sdk-other' });
    made.containers.push(other.id);
    const ids = [];
    for await (const x of client.containers.list({ limit: 1 })) ids.push(x.id);
    assert.ok(ids.includes(c.id) && ids.includes(other.id), ids.join(' '));
    const named = [];
    for await (const x of client.containers.list({ name: 'sdk-other' })) named.push(x.id);
    assert.deepEqual(named, [other.id]);

    await client.containers.delete(other.id);
    await assert.rejects(client.containers.retrieve(other.id), (e) => {
      assert.ok(e instanceof OpenAI.NotFoundError, String(e));
      assert.equal(e.status, 404);
      assert.equal(e.type, 'invalid_request_error');
      return true;
    });
  });

  test('container files: upload a stream, see what code made, download, delete', async () => {
    const c = await client.containers.create({ name: 'sdk-files' });
    made.containers.push(c.id);
    const up = await client.containers.files.create(c.id, {
      file: createReadStream(join(dir, 'notes.txt')),
    });
    assert.match(up.id, /^cfile_[0-9a-f]{24}$/);
    assert.equal(up.object, 'container.file');
    assert.equal(up.path, '/mnt/data/notes.txt');
    assert.equal(up.source, 'user');
    assert.equal(up.container_id, c.id);

    await run(c.id, "import os\nos.makedirs('/mnt/data/out')\nopen('/work/out/summary.txt', 'w').write('42')");
    const listed = [];
    for await (const x of client.containers.files.list(c.id, { limit: 1 })) listed.push(x);
    const byPath = Object.fromEntries(listed.map((x) => [x.path, x]));
    assert.deepEqual(Object.keys(byPath).sort(), ['/mnt/data/notes.txt', '/mnt/data/out/summary.txt']);
    assert.equal(byPath['/mnt/data/notes.txt'].id, up.id, 'an uploaded file keeps its id');
    const byCode = byPath['/mnt/data/out/summary.txt'];
    assert.equal(byCode.source, 'assistant');
    assert.equal(byCode.bytes, 2);

    const got = await client.containers.files.retrieve(byCode.id, { container_id: c.id });
    assert.deepEqual(got, byCode);
    const bytes = await client.containers.files.content.retrieve(byCode.id, { container_id: c.id });
    assert.equal(Buffer.from(await bytes.arrayBuffer()).toString(), '42');

    // A file of the Files API, copied in by id.
    const f = await upload('sales.csv');
    const copied = await client.containers.files.create(c.id, { file_id: f.id });
    assert.equal(copied.path, '/mnt/data/sales.csv');
    assert.equal(copied.bytes, CSV.length);

    await client.containers.files.delete(up.id, { container_id: c.id });
    assert.equal((await run(c.id, "import os; print(os.path.exists('/mnt/data/notes.txt'))")).stdout, 'False\n');
    await assert.rejects(
      client.containers.files.retrieve(up.id, { container_id: c.id }),
      (e) => e instanceof OpenAI.NotFoundError,
    );
  });

  test('what airlock refuses reaches the application as the SDK typed errors', async () => {
    await assert.rejects(client.containers.create({ name: 'too-big', memory_limit: '64g' }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, 'memory_limit');
      assert.match(e.message, /profile 'default' allows/);
      return true;
    });
    await assert.rejects(
      client.containers.create({ name: 'x', file_ids: ['file-000000000000000000000000'] }),
      (e) => e instanceof OpenAI.NotFoundError && e.param === 'file_ids',
    );
    await assert.rejects(client.files.create({ file: createReadStream(join(dir, 'big.bin')), purpose: 'batch' }), (e) => {
      assert.equal(e.status, 413, String(e));
      assert.match(e.message, /--max-upload/);
      return true;
    });
    await assert.rejects(
      client.files.create({ file: createReadStream(join(dir, 'notes.txt')), purpose: 'nonsense' }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'purpose',
    );
    const stranger = new OpenAI({ baseURL: `${daemon.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(stranger.containers.list(), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
      assert.equal(e.code, 'invalid_api_key');
      return true;
    });
  });
});
