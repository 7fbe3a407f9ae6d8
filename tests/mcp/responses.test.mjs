// POST /v1/responses driven by the real clients, unmodified: the openai npm client
// (responses.create with and without streaming, previous_response_id, output_text, an image
// and a cited file downloaded with containers.files.content) and the OpenAI Agents SDK (an
// Agent with codeInterpreterTool(), pointed at airlock by base URL). The model is a scripted
// fake on loopback (lib/fake-llm.mjs) and the daemon this file's own (lib/gateway-daemon.mjs),
// so what the clients send arrives as Chat Completions upstream, where it is checked.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Agent, OpenAIProvider, Runner, codeInterpreterTool, setTracingDisabled } from '@openai/agents';

import { answer, startFakeLLM, toolCalls } from './lib/fake-llm.mjs';
import { startGatewayDaemon } from './lib/gateway-daemon.mjs';

// The Agents SDK would send traces to OpenAI: nothing may leave this machine.
setTracingDisabled(true);

const CI = { type: 'code_interpreter', container: { type: 'auto' } };
const lastTool = (req) => req.messages.filter((m) => m.role === 'tool').at(-1)?.content ?? '';
const toolNames = (req) => (req.tools ?? []).map((t) => t.function.name).sort();

describe('the Responses API against real clients', () => {
  let fake;
  let daemon;
  let client;

  before(async () => {
    fake = await startFakeLLM();
    daemon = await startGatewayDaemon({ llmBaseUrl: fake.url, flags: ['--pool-size', '1'] });
    // No retries: a failure must show, not be hidden by a second attempt.
    client = new OpenAI({ baseURL: `${daemon.url}/v1`, apiKey: daemon.token, maxRetries: 0 });
  });
  after(async () => {
    await daemon?.stop();
    await fake?.close();
  });

  test('responses.create runs the code, previous_response_id continues in the same container', async () => {
    fake.script.push(
      (req) => {
        assert.deepEqual(toolNames(req), ['run_python']);
        return toolCalls([['run_python', { code: 'secret = 41\nprint(secret)' }]]);
      },
      (req) => {
        assert.equal(lastTool(req), 'stdout:\n41\n');
        return answer('I set secret to 41.');
      },
      (req) => {
        assert.deepEqual(req.messages.at(-1), { role: 'user', content: 'Add one.' });
        return toolCalls([['run_python', { code: 'secret + 1' }]]);
      },
      (req) => {
        assert.match(lastTool(req), /result: 42/, 'the same container: secret is still defined');
        return answer('It is 42.');
      },
    );
    const first = await client.responses.create({
      model: 'fake-model',
      input: 'Set secret to 41.',
      tools: [CI],
      include: ['code_interpreter_call.outputs'],
    });
    assert.equal(first.status, 'completed');
    assert.equal(first.output_text, 'I set secret to 41.');
    const call = first.output.find((o) => o.type === 'code_interpreter_call');
    assert.match(call.id, /^ci_[0-9a-f]{24}$/);
    assert.match(call.container_id, /^cntr_[0-9a-f]{24}$/);
    assert.deepEqual(call.outputs, [{ type: 'logs', logs: '41\n' }]);

    const second = await client.responses.create({
      model: 'fake-model',
      input: 'Add one.',
      tools: [CI],
      previous_response_id: first.id,
    });
    assert.equal(second.output_text, 'It is 42.');
    const again = second.output.find((o) => o.type === 'code_interpreter_call');
    assert.equal(again.container_id, call.container_id);
    assert.equal(again.outputs, null, 'outputs only with include');
    const stored = await client.responses.retrieve(second.id);
    assert.equal(stored.output_text, 'It is 42.');
    fake.check();
  });

  test('stream: the SDK parses every event and builds the final response', async () => {
    fake.script.push(
      () => toolCalls([['run_python', { code: "print('streamed')" }]], 'Running it.'),
      () => answer('It printed streamed.'),
    );
    const stream = client.responses.stream({
      model: 'fake-model',
      input: 'Print something.',
      tools: [CI],
      include: ['code_interpreter_call.outputs'],
    });
    const types = [];
    let text = '';
    stream.on('response.output_text.delta', (e) => (text += e.delta));
    for await (const event of stream) types.push(event.type);
    const final = await stream.finalResponse();
    assert.equal(types[0], 'response.created');
    assert.equal(types.at(-1), 'response.completed');
    for (const t of [
      'response.code_interpreter_call.in_progress',
      'response.code_interpreter_call_code.delta',
      'response.code_interpreter_call_code.done',
      'response.code_interpreter_call.interpreting',
      'response.code_interpreter_call.completed',
      'response.content_part.added',
      'response.output_text.done',
    ])
      assert.ok(types.includes(t), `${t} in ${types.join(', ')}`);
    assert.ok(types.indexOf('response.code_interpreter_call.completed') < types.lastIndexOf('response.output_text.delta'));
    assert.equal(text, 'Running it.It printed streamed.');
    assert.equal(final.output_text, 'Running it.It printed streamed.');
    assert.deepEqual(final.output.map((o) => o.type), ['message', 'code_interpreter_call', 'message']);
    assert.deepEqual(final.output[1].outputs, [{ type: 'logs', logs: 'streamed\n' }]);

    // create({stream: true}) yields the same events with increasing sequence numbers.
    fake.script.push(() => answer('plain'));
    const events = [];
    for await (const e of await client.responses.create({ model: 'fake-model', input: 'hi', stream: true }))
      events.push(e);
    assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
    assert.equal(events.at(-1).response.output_text, 'plain');
    fake.check();
  });

  test('an image and a cited file download with containers.files.content', async () => {
    const code =
      "import matplotlib.pyplot as plt\nopen('/mnt/data/data.csv', 'w').write('x\\n1\\n')\nplt.plot([3, 1, 2]); plt.show()";
    fake.script.push(
      () => toolCalls([['run_python', { code }]]),
      () => answer('Here is [data.csv](sandbox:/mnt/data/data.csv) and the plot.'),
    );
    const r = await client.responses.create({
      model: 'fake-model',
      input: 'Plot and save.',
      tools: [CI],
      include: ['code_interpreter_call.outputs'],
    });
    const call = r.output.find((o) => o.type === 'code_interpreter_call');
    const image = call.outputs.find((o) => o.type === 'image');
    const [, containerId, fileId] = image.url.match(/\/v1\/containers\/([^/]+)\/files\/([^/]+)\/content$/);
    assert.equal(containerId, call.container_id);
    const png = Buffer.from(await (await client.containers.files.content.retrieve(fileId, { container_id: containerId })).arrayBuffer());
    assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);

    const [note] = r.output.at(-1).content[0].annotations;
    assert.equal(note.type, 'container_file_citation');
    assert.equal(note.filename, 'data.csv');
    const csv = await client.containers.files.content.retrieve(note.file_id, { container_id: note.container_id });
    assert.equal(await csv.text(), 'x\n1\n');
    fake.check();
  });

  test('an error keeps OpenAI’s shape and status', async () => {
    await assert.rejects(
      client.responses.create({ model: 'fake-model', input: 'x', tools: [{ type: 'web_search' }] }),
      (e) => e.status === 400 && e.param === 'tools[0]' && /web_search/.test(e.message),
    );
    await assert.rejects(client.responses.retrieve('resp_000000000000000000000000'), (e) => e.status === 404);
  });

  test('the Agents SDK runs an agent with codeInterpreterTool() against airlock', async () => {
    let sent;
    fake.script.push(
      (req) => {
        sent = req;
        return toolCalls([['run_python', { code: 'print(sum(range(10)))' }]]);
      },
      (req) => {
        assert.equal(lastTool(req), 'stdout:\n45\n');
        return answer('The sum is 45.');
      },
    );
    const provider = new OpenAIProvider({ baseURL: `${daemon.url}/v1`, apiKey: daemon.token, useResponses: true });
    const runner = new Runner({ modelProvider: provider, tracingDisabled: true });
    const agent = new Agent({
      name: 'Analyst',
      instructions: 'Use the python tool for arithmetic.',
      model: 'fake-model',
      tools: [codeInterpreterTool()],
    });
    const result = await runner.run(agent, 'What is the sum of 0..9?');
    assert.equal(result.finalOutput, 'The sum is 45.');
    assert.deepEqual(toolNames(sent), ['run_python']);
    assert.deepEqual(sent.messages[0], { role: 'system', content: 'Use the python tool for arithmetic.' });
    assert.deepEqual(sent.messages.at(-1), { role: 'user', content: 'What is the sum of 0..9?' });
    const calls = result.newItems.filter((i) => i.rawItem?.type === 'hosted_tool_call' || i.rawItem?.providerData?.type === 'code_interpreter_call');
    assert.ok(calls.length >= 1, `a code interpreter call among ${JSON.stringify(result.newItems.map((i) => i.type))}`);
    fake.check();
  });
});
