// A daemon of its own (lib/gateway-daemon.mjs) with the official E2B SDK pointed at it the way a
// team moving its agent does (E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, nothing else), and
// one sandbox made through it. stop() kills the sandbox, then the daemon by its pid.
import { startGatewayDaemon } from './gateway-daemon.mjs';

export async function startE2bSandbox(daemonOpts = {}) {
  const daemon = await startGatewayDaemon(daemonOpts);
  process.env.E2B_API_URL = `${daemon.url}/e2b/api`;
  process.env.E2B_SANDBOX_URL = `${daemon.url}/e2b/sandbox`;
  process.env.E2B_API_KEY = daemon.token;
  let sbx;
  try {
    const { Sandbox } = await import('@e2b/code-interpreter');
    sbx = await Sandbox.create();
  } catch (e) {
    await daemon.stop().catch(() => {});
    throw e;
  }
  const stop = async () => {
    await sbx.kill().catch(() => {});
    await daemon.stop();
  };
  return { daemon, sbx, stop };
}
