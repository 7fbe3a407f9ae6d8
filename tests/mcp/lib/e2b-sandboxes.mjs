// The official E2B SDK set up the way a team moving its agent does (E2B_API_URL, E2B_SANDBOX_URL
// and E2B_API_KEY, an airlock token, nothing else) against a daemon of the calling test file's
// own (gateway-daemon.mjs). Call it inside a describe(): it registers the before() that starts
// the daemon and imports the SDK, and the after() that kills every sandbox create() made and
// stops the daemon by its pid (which also checks it exits 0).
import { after, before } from 'node:test';

import { startGatewayDaemon } from './gateway-daemon.mjs';

export function e2bSandboxes() {
  const e2b = { daemon: null, sdk: null, Sandbox: null };
  const made = [];

  before(async () => {
    e2b.daemon = await startGatewayDaemon();
    process.env.E2B_API_URL = `${e2b.daemon.url}/e2b/api`;
    process.env.E2B_SANDBOX_URL = `${e2b.daemon.url}/e2b/sandbox`;
    process.env.E2B_API_KEY = e2b.daemon.token;
    e2b.sdk = await import('@e2b/code-interpreter');
    e2b.Sandbox = e2b.sdk.Sandbox;
  });
  after(async () => {
    for (const sbx of made) await sbx.kill().catch(() => {});
    await e2b.daemon?.stop();
  });

  // Sandbox.create(opts), killed at the end.
  e2b.create = async (opts) => {
    const sbx = await e2b.Sandbox.create(opts);
    made.push(sbx);
    return sbx;
  };
  return e2b;
}
