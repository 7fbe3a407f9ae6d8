// A scripted fake of an OpenAI-compatible Chat Completions endpoint on loopback, for tests
// that run airlock's gateway against a model that answers what the test says (the node twin of
// tests/e2e/fake_llm.py). Each POST /v1/chat/completions takes the next step of `script`: a
// function of the request body returning a completion (see answer() and toolCalls()). A step
// that throws (a failed assertion on what the gateway sent) answers 500 and is kept in
// `failures`, which check() re-throws.
import http from 'node:http';

let n = 0;

function completion(message, finishReason) {
  n += 1;
  return {
    id: `chatcmpl-fake${n}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: 'fake-model',
    choices: [{ index: 0, message, finish_reason: finishReason }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  };
}

export function answer(text) {
  return completion({ role: 'assistant', content: text }, 'stop');
}

// calls: [[name, argumentsObject], ...]
export function toolCalls(calls, content = null) {
  const out = calls.map(([name, args]) => {
    n += 1;
    return { id: `call_${n}`, type: 'function', function: { name, arguments: JSON.stringify(args) } };
  });
  return completion({ role: 'assistant', content, tool_calls: out }, 'tool_calls');
}

export async function startFakeLLM() {
  const fake = { script: [], requests: [], failures: [] };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const send = (status, obj) => {
        const text = JSON.stringify(obj);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      if (req.method !== 'POST' || req.url.replace(/\/$/, '') !== '/v1/chat/completions')
        return send(404, { error: { message: `no route ${req.url}` } });
      let parsed;
      try {
        parsed = JSON.parse(body);
      } catch (e) {
        fake.failures.push(e);
        return send(400, { error: { message: 'bad json' } });
      }
      fake.requests.push(parsed);
      const step = fake.script.shift();
      if (!step) {
        fake.failures.push(new Error(`unexpected request #${fake.requests.length}: the script is used up`));
        return send(500, { error: { message: 'fake: script used up' } });
      }
      try {
        send(200, step(parsed));
      } catch (e) {
        fake.failures.push(e);
        send(500, { error: { message: `fake: ${e.message}` } });
      }
    });
  });
  await new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  fake.url = `http://127.0.0.1:${server.address().port}/v1`;
  fake.check = () => {
    if (fake.failures.length) throw fake.failures[0];
    if (fake.script.length) throw new Error(`${fake.script.length} scripted steps were never requested`);
  };
  fake.close = () => new Promise((r) => server.close(() => r()));
  return fake;
}
