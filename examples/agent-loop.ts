// The seed's agent loop on airlock's JavaScript client, in TypeScript (docs/CLIENTS.md; the
// twin of examples/agent-loop.py): a model asks for run_python tool calls, a Sandbox runs them,
// the results go back, until the model answers.
//
// With OPENAI_BASE_URL and OPENAI_API_KEY set (and OPENAI_MODEL, default gpt-4o-mini) it talks
// to that OpenAI-compatible endpoint with fetch; otherwise a scripted fake model asks for what a
// model would: load a CSV, fix its dates, plot it. The daemon is found as the CLI finds it
// (AIRLOCK_URL, AIRLOCK_TOKEN or the token file); the plot lands in the path given (default
// ./agent-loop-plot.png).
//
//   npm init -y && npm pkg set type=module      # an ES module: it uses top-level await
//   npm install /path/to/airlock/clients/js typescript @types/node
//   npx tsc --strict --target es2022 --module nodenext --lib es2022,esnext.disposable agent-loop.ts
//   node agent-loop.js [PLOT.png]
import { writeFile } from 'node:fs/promises';
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
      description: 'Run Python in a persistent sandbox (pandas, matplotlib); files in /work.',
      parameters: { type: 'object', properties: { code: { type: 'string' } }, required: ['code'] },
    },
  },
];

// One Chat Completions round trip to a real endpoint.
function chatCompletions(baseUrl: string, apiKey: string): Model {
  return async (messages) => {
    const res = await fetch(`${baseUrl.replace(/\/+$/, '')}/chat/completions`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Authorization: `Bearer ${apiKey}`,
      },
      body: JSON.stringify({ model: process.env.OPENAI_MODEL ?? 'gpt-4o-mini', messages, tools: TOOLS }),
    });
    if (!res.ok) throw new Error(`the model answered ${res.status}: ${await res.text()}`);
    const body = (await res.json()) as { choices: { message: Message }[] };
    return body.choices[0].message;
  };
}

// What a model would answer: the next scripted tool call, then a closing sentence.
const SCRIPT = [
  "import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf.dtypes",
  "df['date'] = df['date'].map(pd.to_datetime)\ndf = df.sort_values('date')\ndf",
  "import matplotlib.pyplot as plt\nplt.plot(df['date'], df['amount'], marker='o')\n" +
    "plt.title('amount over time'); plt.gcf().autofmt_xdate(); plt.savefig('plot.png')",
];
const fakeModel: Model = async (messages) => {
  const step = messages.filter((m) => m.role === 'tool').length;
  if (step < SCRIPT.length)
    return {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: `call_${step}`, type: 'function', function: { name: 'run_python', arguments: JSON.stringify({ code: SCRIPT[step] }) } },
      ],
    };
  return { role: 'assistant', content: 'Dates parsed, chart saved as plot.png.' };
};

const TASK =
  'sales.csv has a date column in mixed formats and an amount column. Load it, make the ' +
  'dates real dates, plot amount over time and save the chart as plot.png.';
const CSV =
  'date,amount\n2024-01-05,120\n01/12/2024,95\nJan 19 2024,143\n2024-01-26,160\n' +
  '02/02/2024,151\nFeb 9 2024,178\n';

const { OPENAI_BASE_URL, OPENAI_API_KEY } = process.env;
const model = OPENAI_BASE_URL && OPENAI_API_KEY ? chatCompletions(OPENAI_BASE_URL, OPENAI_API_KEY) : fakeModel;
const out = process.argv[2] ?? 'agent-loop-plot.png';
const messages: Message[] = [{ role: 'user', content: TASK }];

// The session is deleted when the block ends, however it ends.
await using sb = await Sandbox.create({ profile: 'visualization' });
await sb.files.write('sales.csv', CSV);
let msg: Message;
for (;;) {
  // the loop itself
  msg = await model(messages);
  messages.push(msg);
  if (!msg.tool_calls?.length) break;
  for (const call of msg.tool_calls) {
    const { code } = JSON.parse(call.function.arguments) as { code: string };
    const ex = await sb.runCode(code);
    console.log(`--- run_python:\n${code}\n>>> ${ex.forModel()}\n`);
    messages.push({ role: 'tool', tool_call_id: call.id, content: ex.forModel() });
  }
}
console.log('model:', msg.content);
await writeFile(out, await sb.files.read('plot.png', { format: 'bytes' }));
console.log('saved the plot as', out);
