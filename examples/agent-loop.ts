// The agent loop on airlock's JavaScript client, in TypeScript: a model with one tool,
// run_python, whose calls run in one airlock session (variables and files persist between
// them); figures come back as PNG bytes and are saved to ./airlock-output/.
//
// The model is any OpenAI-compatible Chat Completions endpoint (OPENAI_BASE_URL, with
// OPENAI_API_KEY and OPENAI_MODEL); without OPENAI_BASE_URL a scripted fake model plays its
// part, so the loop runs end to end against a local daemon with nothing else.
//
//   npm init -y && npm pkg set type=module      # an ES module: it uses top-level await
//   npm install /path/to/airlock/clients/js typescript @types/node
//   npx tsc --strict --target es2022 --module nodenext --lib es2022,esnext.disposable agent-loop.ts
//   AIRLOCK_URL=http://127.0.0.1:8080 node agent-loop.js "What is the 20th Fibonacci number?"
import { mkdir, writeFile } from 'node:fs/promises';
import { Sandbox } from '@airlock/client';

interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}
interface Message {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}
type Model = (messages: Message[]) => Promise<Message>;

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'run_python',
      description:
        'Run Python in a persistent sandbox (numpy, pandas, matplotlib). Variables and files in /work persist; the last expression is returned; figures are captured.',
      parameters: {
        type: 'object',
        properties: { code: { type: 'string', description: 'the Python code' } },
        required: ['code'],
      },
    },
  },
];

// An OpenAI-compatible endpoint, by fetch: one POST per turn.
function chatCompletions(baseUrl: string): Model {
  return async (messages) => {
    const res = await fetch(`${baseUrl.replace(/\/+$/, '')}/chat/completions`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Authorization: `Bearer ${process.env.OPENAI_API_KEY ?? ''}`,
      },
      body: JSON.stringify({ model: process.env.OPENAI_MODEL ?? 'gpt-4o-mini', messages, tools: TOOLS }),
    });
    if (!res.ok) throw new Error(`the model answered ${res.status}: ${await res.text()}`);
    const body = (await res.json()) as { choices: { message: Message }[] };
    return body.choices[0].message;
  };
}

// The scripted stand-in: first a tool call, then an answer read from the tool's result.
function fakeModel(): Model {
  let turn = 0;
  return async (messages) => {
    turn += 1;
    if (turn === 1)
      return {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_1',
            type: 'function',
            function: {
              name: 'run_python',
              arguments: JSON.stringify({
                code: [
                  'import matplotlib.pyplot as plt',
                  'fib = [0, 1]',
                  'while len(fib) < 21: fib.append(fib[-1] + fib[-2])',
                  'print("first 20:", fib[1:21])',
                  'plt.plot(fib[1:21]); plt.title("Fibonacci")',
                  'fib[20]',
                ].join('\n'),
              }),
            },
          },
        ],
      };
    const tool = messages[messages.length - 1];
    const result = /^result: (.*)$/m.exec(tool.content ?? '')?.[1] ?? '(no result)';
    return { role: 'assistant', content: `The 20th Fibonacci number is ${result}.` };
  };
}

const question = process.argv[2] ?? 'What is the 20th Fibonacci number? Plot the first 20.';
const model = process.env.OPENAI_BASE_URL ? chatCompletions(process.env.OPENAI_BASE_URL) : fakeModel();
const messages: Message[] = [
  { role: 'system', content: 'Answer with the help of run_python. Be brief.' },
  { role: 'user', content: question },
];

// The session is deleted when the block ends, however it ends.
await using sb = await Sandbox.create();
let saved = 0;
for (let round = 1; round <= 10; round++) {
  const reply = await model(messages);
  messages.push(reply);
  if (!reply.tool_calls?.length) {
    console.log(reply.content);
    break;
  }
  for (const call of reply.tool_calls) {
    const { code } = JSON.parse(call.function.arguments) as { code: string };
    console.error(`airlock: ${call.function.name}: ${code.split('\n')[0]} ...`);
    const ex = await sb.runCode(code, { onStdout: (text) => void process.stderr.write(text) });
    for (const output of ex.outputs) {
      if (!output.png) continue;
      await mkdir('airlock-output', { recursive: true });
      const path = `airlock-output/figure-${++saved}.png`;
      await writeFile(path, output.png);
      console.error(`saved: ${path}`);
    }
    messages.push({ role: 'tool', tool_call_id: call.id, content: ex.forModel() });
  }
}
