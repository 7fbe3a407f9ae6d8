// Compiled with `tsc --noEmit --strict` by client-js.test.mjs, never run: the declarations of
// @airlock/client (clients/js/src/index.d.ts) accept what the client accepts and give the
// types it returns. Each @ts-expect-error line must be an error, so a declaration that
// loosened to `any` fails the check. No Node types here: the same file is checked with the
// DOM library alone, as a browser user would.
import {
  AirlockError,
  BadRequestError,
  ConflictError,
  Execution,
  ExecutionError,
  LimitError,
  NotFoundError,
  Output,
  Sandbox,
  run,
  type FileEntry,
  type SessionInfo,
} from '@airlock/client';

export async function everyMethod(signal: AbortSignal): Promise<void> {
  const sb: Sandbox = await Sandbox.create({
    profile: 'default',
    url: 'http://127.0.0.1:8080',
    token: 't',
    env: { A: '1' },
    metadata: { team: 'x' },
    lifetime: 60,
    stopAfter: 30,
    timeout: 10,
    persistent: false,
  });
  const id: string = sb.id;
  const info: SessionInfo = await sb.info();
  const state: 'idle' | 'busy' | 'stopped' = info.state;
  const ex: Execution = await sb.runCode('1 + 1', {
    language: 'python',
    timeout: 5,
    stdin: 'x',
    env: { B: '2' },
    cwd: 'sub',
    signal,
    onStdout: (t: string) => void t.length,
    onStderr: async (t: string) => void t.length,
    onOutput: (o: Output) => void o.png?.byteLength,
  });
  const result: string | null = ex.result;
  const png: Uint8Array | undefined = ex.outputs[0]?.png;
  const html: string | undefined = ex.outputs[0]?.html;
  const count: number | null = ex.executionCount;
  const exit: number | null = ex.exitCode;
  const status: 'ok' | 'error' | 'timeout' | 'oom' | 'killed' | 'output_limit' = ex.status;
  const wall: number = ex.usage.wall_ms;
  const errName: string | undefined = ex.error?.name;
  const text: string = ex.throwIfError().forModel();

  await sb.files.write('a.txt', 'text');
  await sb.files.write('b.bin', new Uint8Array([1, 2]));
  await sb.files.write('c.bin', new Blob(['x']));
  const s: string = await sb.files.read('a.txt');
  const t: string = await sb.files.read('a.txt', { format: 'text' });
  const b: Uint8Array = await sb.files.read('b.bin', { format: 'bytes' });
  const entries: FileEntry[] = await sb.files.list('');
  const kind: 'file' | 'directory' | 'symlink' | 'other' = entries[0].type;
  const removed: number = (await sb.files.remove('a.txt')).removed;

  const interrupted: boolean = await sb.interrupt();
  const kids: Sandbox[] = await sb.fork(2);
  const stopped: SessionInfo = await sb.stop();
  const resumed: boolean | undefined = (await sb.resume()).resumed;
  await sb.update({ lifetime: null, metadata: { team: null, owner: 'me' }, timeout: 30, stopAfter: 60 });
  await sb.delete();
  await sb[Symbol.asyncDispose]();

  const again: Sandbox = await Sandbox.connect(id, { persistent: true, timeout: 3 });
  const all: SessionInfo[] = await Sandbox.list({ state: 'live', metadata: { team: 'x' } });
  const n: number = await Sandbox.with({ profile: 'minimal', persistent: true }, async (x) => (await x.runCode('1')).executionCount ?? 0);
  const m: string = await Sandbox.with(async (x) => x.id);
  const one: Execution = await run('print(1)', { files: { 'in.csv': 'a,b\n', 'raw.bin': new Uint8Array(3) }, profile: 'default', timeout: 5 });
  const made: Uint8Array | null | undefined = one.file('out.csv');
  const content: Uint8Array | null | undefined = one.files[0]?.content;

  try {
    await again.runCode('1');
  } catch (e) {
    if (e instanceof NotFoundError || e instanceof ConflictError || e instanceof LimitError) {
      const st: number | null = e.status;
      void st;
    }
    if (e instanceof BadRequestError) {
      const field: string | null = e.field;
      void field;
    }
    if (e instanceof ExecutionError) {
      const tb: string = e.traceback;
      void tb;
    }
    if (e instanceof AirlockError) void e.body?.error;
  }

  // @ts-expect-error: read() without a format is text, not bytes.
  const wrong1: Uint8Array = await sb.files.read('a.txt');
  // @ts-expect-error: a language airlock does not run.
  await sb.runCode('puts 1', { language: 'ruby' });
  // @ts-expect-error: result is a string (a repr) or null, never a number.
  const wrong2: number = ex.result;
  // @ts-expect-error: stopAfter is seconds, a number.
  await sb.update({ stopAfter: '5m' });
  // @ts-expect-error: sessions come from create() or connect().
  new Sandbox();
  // @ts-expect-error: fork() resolves to Sandboxes, not ids.
  const wrong3: string[] = await sb.fork(1);
  // @ts-expect-error: metadata values are strings.
  await Sandbox.create({ metadata: { n: 1 } });

  void [state, result, png, html, count, exit, status, wall, errName, text, s, t, b, kind, removed];
  void [interrupted, kids, stopped, resumed, all, n, m, made, content, wrong1, wrong2, wrong3];
}
