// The chat-completions gateway driven by the real openai npm client, the way an application
// uses it with its own function tools: create() with `tools`, get finish_reason "tool_calls"
// with only the application's call, run it, push the assistant message and a tool message back
// unmodified, and get the final answer. The model is a scripted fake on loopback
// (lib/fake-llm.mjs); the daemon is this file's own (lib/gateway-daemon.mjs), so the hidden
// run_python round the gateway keeps between the two requests is checked upstream.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

import { answer, startFakeLLM, toolCalls } from './lib/fake-llm.mjs';
import { startGatewayDaemon } from './lib/gateway-daemon.mjs';

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const GATEWAY_ID = /^call_[0-9a-f]{24}$/;

const lastTool = (req) => req.messages.filter((m) => m.role === 'tool').at(-1)?.content ?? '';
const callNames = (req) =>
  req.messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []) : [])).map((c) => c.function.name);

describe('openai client against the gateway with its own function tools', () => {
  let fake;
  let daemon;
  let client;

  before(async () => {
    fake = await startFakeLLM();
    daemon = await startGatewayDaemon({ llmBaseUrl: fake.url });
    // No retries: a failure must show, not be hidden by a second attempt.
    client = new OpenAI({ baseURL: `${daemon.url}/v1`, apiKey: daemon.token, maxRetries: 0 });
  });
  after(async () => {
    await daemon?.stop();
    await fake?.close();
  });

  // The script of one conversation: a hidden run_python round, then the application's call;
  // after its result, the model uses the sandbox's state again and answers.
  function script() {
    fake.script.push(
      () => toolCalls([['run_python', { code: 'secret = 41' }]]),
      (req) => {
        assert.deepEqual(req.tools.at(-1), WEATHER, 'the application tool goes upstream as declared');
        return toolCalls([['get_weather', { city: 'Paris' }]], 'Checking the weather.');
      },
      (req) => {
        assert.deepEqual(callNames(req), ['run_python', 'get_weather'], 'the hidden round is restored');
        assert.equal(lastTool(req), 'sunny, 21 C');
        return toolCalls([['run_python', { code: 'secret + 1' }]]);
      },
      (req) => {
        assert.match(lastTool(req), /42/, 'the same sandbox session: secret is still defined');
        return answer('Sunny in Paris, and 41 + 1 is 42.');
      },
    );
  }

  async function runTool(call) {
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
    return 'sunny, 21 C';
  }

  test('create(): tool_calls with only its function, the result sent back, the final answer', async () => {
    script();
    const messages = [{ role: 'user', content: 'What is the weather in Paris? Also remember 41.' }];
    const first = await client.chat.completions.create({ model: 'fake-model', messages, tools: [WEATHER] });
    assert.equal(first.choices[0].finish_reason, 'tool_calls');
    const message = first.choices[0].message;
    assert.equal(message.content, 'Checking the weather.');
    assert.deepEqual(message.tool_calls.map((c) => c.function.name), ['get_weather']);
    assert.match(message.tool_calls[0].id, GATEWAY_ID);

    messages.push(message);
    for (const call of message.tool_calls)
      messages.push({ role: 'tool', tool_call_id: call.id, content: await runTool(call) });
    const second = await client.chat.completions.create({ model: 'fake-model', messages, tools: [WEATHER] });
    fake.check();
    assert.equal(second.choices[0].finish_reason, 'stop');
    assert.equal(second.choices[0].message.content, 'Sunny in Paris, and 41 + 1 is 42.');
    // The extension member rides along; the SDK leaves it on the object.
    assert.equal(second.airlock.session, first.airlock.session);
  });

  test('stream(): the tool call arrives as deltas the SDK assembles', async () => {
    script();
    const messages = [{ role: 'user', content: 'Same, streamed.' }];
    const stream = client.chat.completions.stream({ model: 'fake-model', messages, tools: [WEATHER] });
    const first = await stream.finalChatCompletion();
    assert.equal(first.choices[0].finish_reason, 'tool_calls');
    const message = first.choices[0].message;
    assert.deepEqual(message.tool_calls.map((c) => c.function.name), ['get_weather']);
    assert.match(message.tool_calls[0].id, GATEWAY_ID);

    messages.push(message);
    for (const call of message.tool_calls)
      messages.push({ role: 'tool', tool_call_id: call.id, content: await runTool(call) });
    const final = await client.chat.completions
      .stream({ model: 'fake-model', messages, tools: [WEATHER] })
      .finalChatCompletion();
    fake.check();
    assert.equal(final.choices[0].message.content, 'Sunny in Paris, and 41 + 1 is 42.');
  });

  test('a tool the gateway owns cannot be declared again', async () => {
    const clash = { type: 'function', function: { name: 'run_python', parameters: { type: 'object' } } };
    await assert.rejects(
      client.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'x' }], tools: [clash] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools[0]' && /run_python/.test(e.message),
    );
  });
});
