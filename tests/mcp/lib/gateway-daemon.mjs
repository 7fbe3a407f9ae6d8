// A daemon of its own for tests of the chat-completions gateway: `airlock serve` on a free
// loopback port with a temporary state directory, a token of the test's, and --llm-base-url
// pointing at a fake model (none without llmBaseUrl: the Files and Containers tests need no
// model). stop() ends it by its pid (SIGTERM, then SIGKILL after 15 s), checks that it exited
// 0 (a sanitizer report or a failed teardown fails the test), and removes the state directory.
// `listen: 'unix'` listens on a unix socket in that directory instead (url is then
// `unix:/PATH`); `token: null` lets the daemon make its own token file in `stateDir`.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { env, requireEnv } from './env.mjs';

export async function startGatewayDaemon({
  llmBaseUrl = null,
  flags = [],
  listen = '127.0.0.1:0',
  token = 'token-of-the-openai-tools-test',
} = {}) {
  requireEnv('bin');
  const dir = mkdtempSync(join(process.env.TMPDIR || tmpdir(), 'airlock-gateway-test-'));
  const stateDir = join(dir, 'state');
  if (listen === 'unix') listen = `unix:${join(dir, 'airlock.sock')}`;
  const daemonEnv = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('AIRLOCK_') || k === 'AIRLOCK_LOG'),
  );
  const child = spawn(
    env.bin,
    ['serve', '--listen', listen, '--state-dir', stateDir, '--pool-size', '0',
      ...(llmBaseUrl ? ['--llm-base-url', llmBaseUrl, '--llm-model', 'fake-model'] : []),
      ...flags],
    { stdio: ['ignore', 'pipe', 'pipe'], env: token ? { ...daemonEnv, AIRLOCK_TOKEN: token } : daemonEnv },
  );
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
    const { code, signal } = await exited;
    if (code !== 0)
      throw new Error(`the daemon exited with ${code ?? signal}; its log:\n${log.slice(-3000)}`);
  };

  const deadline = Date.now() + 30000;
  let url;
  while (!url) {
    url = log.match(/airlock: listening on ((?:http:\/\/|unix:)\S+)/)?.[1];
    if (url) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop().catch(() => {});
      throw new Error(`the daemon did not start:\n${log.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  token ??= readFileSync(join(stateDir, 'token'), 'utf8').trim();
  return { url, token, stateDir, log: () => log, stop };
}

// The official E2B SDK pointed at daemon's /e2b surface the way a team moving its agent does
// (E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, an airlock token): its module, whose Sandbox
// then makes sandboxes there.
export async function e2bSdkFor(daemon) {
  process.env.E2B_API_URL = `${daemon.url}/e2b/api`;
  process.env.E2B_SANDBOX_URL = `${daemon.url}/e2b/sandbox`;
  process.env.E2B_API_KEY = daemon.token;
  return import('@e2b/code-interpreter');
}
