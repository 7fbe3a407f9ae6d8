// Sandbox, a session of the daemon as an object, and run(), the one-shot call. Every method is
// one HTTP request of docs/API.md; nothing is cached but the session's id and the last
// session object seen.
import { AirlockError, ConnectError, NotFoundError } from './errors.js';
import { Execution, Output, toBase64, toBytes } from './models.js';
import { Transport, quoteId, quotePath } from './transport.js';

// The daemon caps a cell at 3600 s; its answer may take that long plus the interrupt's grace.
const MAX_CELL_S = 3600;
const HTTP_MARGIN_S = 60;
// After an abort, how long runCode() waits for the interrupted cell's answer (the daemon's
// grace is 2 s) before it drops the connection.
const ABORT_GRACE_MS = 5000;

function put(body, name, value) {
  if (value !== undefined) body[name] = value;
}

function transportOf(opts = {}) {
  return new Transport({
    url: opts.url,
    token: opts.token,
    stateDir: opts.stateDir,
    requestTimeout: opts.requestTimeout,
    fetch: opts.fetch,
  });
}

/** Reads an ndjson stream, calling the callbacks as events arrive; resolves to the `end`. */
async function readStream(reply, opts) {
  const decoder = new TextDecoder();
  let pending = '';
  const handle = async (line) => {
    if (!line.trim()) return undefined;
    let ev;
    try {
      ev = JSON.parse(line);
    } catch {
      throw new AirlockError(`the execution's stream carried a line that is not JSON: ${line.slice(0, 200)}`);
    }
    if (ev.type === 'stdout') await opts.onStdout?.(ev.text ?? '');
    else if (ev.type === 'stderr') await opts.onStderr?.(ev.text ?? '');
    else if (ev.type === 'output') await opts.onOutput?.(new Output(ev));
    else if (ev.type === 'end') return ev;
    return undefined;
  };
  for await (const chunk of reply.chunks()) {
    pending += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      const end = await handle(line);
      if (end) return end;
    }
  }
  const end = await handle(pending + decoder.decode());
  if (end) return end;
  throw new ConnectError("the execution's stream ended before its end event");
}

/**
 * POSTs an execute request; streams it (ndjson) when a callback is given. An aborted
 * `signal` calls `interrupt` (a session's), waits a moment for the cell's answer so the
 * session is idle again, then rejects with the signal's reason.
 */
async function execute(transport, path, body, opts, interrupt) {
  const { signal } = opts;
  signal?.throwIfAborted();
  const streaming = Boolean(opts.onStdout || opts.onStderr || opts.onOutput);
  const cell = body.timeout_s ?? body.timeout ?? MAX_CELL_S;
  const inner = new AbortController();
  let onAbort = null;
  let dropTimer = null;
  if (signal) {
    onAbort = () => {
      const drop = () => inner.abort(signal.reason);
      if (!interrupt) return drop();
      dropTimer = setTimeout(drop, ABORT_GRACE_MS);
      interrupt().catch(drop);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  }
  try {
    const reply = await transport.open('POST', path, {
      body: new TextEncoder().encode(JSON.stringify(body)),
      headers: {
        'Content-Type': 'application/json',
        Accept: streaming ? 'application/x-ndjson' : 'application/json',
      },
      signal: inner.signal,
      timeout: cell + HTTP_MARGIN_S,
    });
    let raw;
    try {
      const ctype = reply.header('content-type') ?? '';
      if (reply.status !== 200 || !ctype.startsWith('application/x-ndjson')) {
        const data = await reply.bytes();
        if (reply.status !== 200) throw transport.fail('POST', path, reply, data);
        raw = JSON.parse(new TextDecoder().decode(data));
      } else {
        const end = await readStream(reply, opts);
        if (!end.result) {
          const failure = end.failure ?? {};
          throw new AirlockError(failure.error ?? 'the execution failed after its stream began', {
            status: failure.status ?? null,
            body: failure,
          });
        }
        raw = end.result;
      }
    } finally {
      // On an error (a callback threw) this drops the connection, and a dropped stream makes
      // the daemon interrupt the cell (docs/API.md, "Streaming").
      reply.close();
    }
    if (signal?.aborted) throw signal.reason;
    return new Execution(raw);
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    throw e;
  } finally {
    clearTimeout(dropTimer);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

function executeBody(code, opts, timeoutField) {
  if (typeof code !== 'string' || !code) throw new TypeError('code must be a non-empty string');
  const body = { code };
  put(body, 'language', opts.language);
  put(body, timeoutField, opts.timeout);
  put(body, 'stdin', opts.stdin);
  put(body, 'env', opts.env);
  put(body, 'cwd', opts.cwd);
  return body;
}

/**
 * Runs code once in a fresh sandbox that is gone afterwards (POST /execute). `files`:
 * {"relative/path": string | Uint8Array | Blob} written into /work first; the Execution's
 * `files` carry the content of what the code created or changed (execution.file(path)).
 */
export async function run(code, opts = {}) {
  const body = executeBody(code, opts, 'timeout');
  put(body, 'profile', opts.profile);
  if (opts.files) {
    body.files = {};
    for (const [p, data] of Object.entries(opts.files))
      body.files[p] = toBase64(await toBytes(data, `files['${p}']`));
  }
  const t = transportOf(opts);
  try {
    return await execute(t, '/execute', body, opts, null);
  } finally {
    t.close();
  }
}

/** The files of a session's /work (paths are relative to it). */
export class Files {
  #sb;

  constructor(sandbox) {
    this.#sb = sandbox;
  }

  #path(path) {
    return `/v1/sessions/${quoteId(this.#sb.id)}/files/${quotePath(path)}`;
  }

  /** Creates or replaces a file (missing parents are made); a string is written as UTF-8. */
  async write(path, data, { signal } = {}) {
    const body = await toBytes(data, 'data');
    return this.#sb._t.request('PUT', this.#path(path), { body, signal });
  }

  /** The file's contents: a string (UTF-8, the default) or bytes with format "bytes". */
  async read(path, { format = 'text', signal } = {}) {
    if (format !== 'text' && format !== 'bytes')
      throw new TypeError(`format must be "text" or "bytes", not ${JSON.stringify(format)}`);
    const data = await this.#sb._t.request('GET', this.#path(path), { raw: true, signal });
    return format === 'bytes' ? data : new TextDecoder().decode(data);
  }

  /** The entries of a directory of /work ("" is /work itself). */
  async list(dir = '', { signal } = {}) {
    const query = dir ? [['dir', dir.startsWith('/work/') ? dir.slice(6) : dir]] : undefined;
    const reply = await this.#sb._t.request('GET', `/v1/sessions/${quoteId(this.#sb.id)}/files`, {
      query,
      signal,
    });
    return (reply.entries ?? []).map((e) => {
      const entry = { name: e.name, path: e.path, type: e.type, size: e.size, modifiedAt: e.modified_at ?? null };
      if (e.raw_path !== undefined) entry.rawPath = e.raw_path;
      return entry;
    });
  }

  /** Removes a file, a symlink or a directory with everything in it. */
  async remove(path, { signal } = {}) {
    return this.#sb._t.request('DELETE', this.#path(path), { signal });
  }
}

/**
 * A session: a sandbox whose Python variables, bash shell and /work persist between runCode()
 * calls. Sandbox.create() makes one, Sandbox.connect() attaches to one.
 */
export class Sandbox {
  /** @internal Use Sandbox.create() or Sandbox.connect(). */
  constructor(info, transport, { persistent = false, timeout } = {}) {
    if (!info || typeof info.id !== 'string') throw new TypeError('use Sandbox.create() or Sandbox.connect()');
    this._t = transport;
    this._info = info;
    this.id = info.id;
    this.profile = info.profile;
    this.persistent = persistent;
    this.timeout = timeout;
    this.files = new Files(this);
  }

  /** Creates a session (POST /v1/sessions). */
  static async create(opts = {}) {
    const body = {};
    put(body, 'profile', opts.profile);
    put(body, 'env', opts.env);
    put(body, 'metadata', opts.metadata);
    put(body, 'lifetime_s', opts.lifetime);
    put(body, 'stop_after_s', opts.stopAfter);
    const t = transportOf(opts);
    const info = await t.request('POST', '/v1/sessions', { json: body, signal: opts.signal });
    return new Sandbox(info, t, { persistent: opts.persistent ?? false, timeout: opts.timeout });
  }

  /** Attaches to an existing session; a stopped one stays stopped until a call needs it.
   * `persistent` defaults to true here: disposing of it stops it, never deletes it. */
  static async connect(id, opts = {}) {
    const path = `/v1/sessions/${quoteId(id)}`;
    const t = transportOf(opts);
    const info = await t.request('GET', path, { signal: opts.signal });
    return new Sandbox(info, t, { persistent: opts.persistent ?? true, timeout: opts.timeout });
  }

  /** The session objects of the daemon's live and stopped sessions. `state`: "idle", "busy",
   * "stopped" or "live"; `metadata`: {key: value}, all must match. */
  static async list(opts = {}) {
    const query = [];
    if (opts.state) query.push(['state', opts.state]);
    for (const [k, v] of Object.entries(opts.metadata ?? {})) query.push([`metadata.${k}`, String(v)]);
    const t = transportOf(opts);
    try {
      return (await t.request('GET', '/v1/sessions', { query, signal: opts.signal })).sessions;
    } finally {
      t.close();
    }
  }

  /** Creates a session, calls fn with it and, however fn ends, deletes the session (or stops
   * it with `persistent: true`). Resolves to what fn resolves to. */
  static async with(opts, fn) {
    if (typeof opts === 'function') [opts, fn] = [{}, opts];
    const sb = await Sandbox.create(opts);
    try {
      return await fn(sb);
    } finally {
      await sb.#dispose();
    }
  }

  async #dispose() {
    try {
      if (this.persistent) await this.stop();
      else await this.delete();
    } catch (e) {
      // It ended already (lost, deleted): nothing is left to clean up.
      if (!(e instanceof NotFoundError)) throw e;
    } finally {
      this._t.close();
    }
  }

  #s(suffix = '') {
    return `/v1/sessions/${quoteId(this.id)}${suffix}`;
  }

  /** The daemon's URL as given (or found in AIRLOCK_URL). */
  get url() {
    return this._t.url;
  }

  /** The session object (a stopped session is described, not resumed). */
  async info({ signal } = {}) {
    this._info = await this._t.request('GET', this.#s(), { signal });
    return this._info;
  }

  /**
   * Runs code ("python", "bash", or "javascript" where the profile allows it) and resolves to
   * its Execution. With onStdout/onStderr (called with text) or onOutput (called with an
   * Output) the answer is streamed and they are called, in order, as it arrives. An aborted
   * `signal` interrupts the cell and rejects with the signal's reason.
   */
  async runCode(code, opts = {}) {
    const body = executeBody(code, { ...opts, timeout: opts.timeout ?? this.timeout }, 'timeout_s');
    return execute(this._t, this.#s('/execute'), body, opts, () => this.interrupt());
  }

  /** Interrupts the running cell (as a timeout would); false if none was running. */
  async interrupt() {
    return Boolean((await this._t.request('POST', this.#s('/interrupt'))).interrupted);
  }

  /** n new sessions (1..32), each with a copy of this one's variables and /work. */
  async fork(n = 1) {
    const reply = await this._t.request('POST', this.#s('/fork'), { json: { n } });
    return reply.sessions.map(
      (info) => new Sandbox(info, this._t, { persistent: this.persistent, timeout: this.timeout }),
    );
  }

  /** Saves the session to disk and ends its processes; any later call resumes it. */
  async stop() {
    this._info = await this._t.request('POST', this.#s('/stop'));
    return this._info;
  }

  /** Resumes a stopped session now; the answer carries `resumed` and `lost_names`. */
  async resume() {
    this._info = await this._t.request('POST', this.#s('/resume'));
    return this._info;
  }

  /** PATCH: lifetime (seconds from now; null clears it), stopAfter (idle seconds), timeout
   * (the session's default cell timeout), metadata (merged; a null value removes the key).
   * Works on a stopped session without resuming it. */
  async update(changes = {}) {
    const body = {};
    put(body, 'lifetime_s', changes.lifetime);
    put(body, 'stop_after_s', changes.stopAfter);
    put(body, 'timeout_s', changes.timeout);
    put(body, 'metadata', changes.metadata);
    if (!Object.keys(body).length)
      throw new TypeError('update() needs at least one of lifetime, stopAfter, timeout, metadata');
    this._info = await this._t.request('PATCH', this.#s(), { json: body });
    // The session's new default applies from now on, not the one given at create.
    if (changes.timeout !== undefined) this.timeout = undefined;
    return this._info;
  }

  /** Deletes the session: its processes, /work and everything saved of it. */
  async delete() {
    await this._t.request('DELETE', this.#s());
  }

  // `await using sb = await Sandbox.create()` where the runtime has explicit resource
  // management (Node 18.18+ and 20.4+ define the symbol): the session is deleted (or stopped
  // when persistent) when the block ends.
  static {
    if (typeof Symbol.asyncDispose === 'symbol') {
      Object.defineProperty(Sandbox.prototype, Symbol.asyncDispose, {
        value: function asyncDispose() {
          return this.#dispose();
        },
        writable: true,
        configurable: true,
      });
    }
  }
}
