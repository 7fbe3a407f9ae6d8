// What the tests talk to, from the environment that run.sh sets up: the airlock binary (for
// `airlock mcp` over stdio) and a running daemon (its URL and token) for /mcp over HTTP.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const env = {
  bin: process.env.AIRLOCK_BIN,
  url: process.env.AIRLOCK_DAEMON_URL,
  token: process.env.AIRLOCK_TOKEN,
  proxyPort: Number(process.env.AIRLOCK_PROXY_PORT || 0),
};

export function requireEnv(...names) {
  const missing = names.filter((n) => !env[n]);
  if (missing.length)
    throw new Error(
      `missing ${missing.join(', ')}: run the tests through tests/mcp/run.sh, which starts a daemon`,
    );
}

function newClient() {
  return new Client({ name: 'airlock-tests', version: '1.0.0' }, { capabilities: {} });
}

// `airlock mcp [args]` as an MCP client starts it: a subprocess speaking on stdin/stdout.
// stderr is collected so a failing test can show the server's log.
export async function connectStdio(args = []) {
  requireEnv('bin');
  const transport = new StdioClientTransport({
    command: env.bin,
    args: ['mcp', ...args],
    env: { ...process.env },
    // AIRLOCK_MCP_TEST_STDERR=inherit shows the server's log while debugging.
    stderr: process.env.AIRLOCK_MCP_TEST_STDERR === 'inherit' ? 'inherit' : 'pipe',
  });
  let log = '';
  transport.stderr?.on('data', (d) => {
    log += d.toString();
  });
  const client = newClient();
  await client.connect(transport);
  return { client, transport, log: () => log, close: () => client.close() };
}

// The daemon's /mcp, with the bearer token every request needs.
export async function connectHttp() {
  requireEnv('url', 'token');
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', env.url), {
    requestInit: { headers: { Authorization: `Bearer ${env.token}` } },
  });
  const client = newClient();
  await client.connect(transport);
  return {
    client,
    transport,
    log: () => '',
    close: async () => {
      // DELETE /mcp: ends the MCP session and its sandbox session on the daemon.
      await transport.terminateSession();
      await client.close();
    },
  };
}

// The text of a tools/call result's text content blocks.
export function textOf(result) {
  return result.content
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}
