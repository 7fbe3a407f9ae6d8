// The client's transport: finds the daemon and its token the way the `airlock` CLI does
// (src/cli/client.c), and sends requests with the global fetch, or, for a unix: URL (which
// fetch cannot reach), with node:http loaded on first use. It never follows redirects (the
// token must not travel to wherever one points) and bounds every exchange with a timeout.
import {
  AirlockError,
  AuthError,
  BadRequestError,
  ConnectError,
  RequestTimeoutError,
  errorFor,
} from './errors.js';

export const DEFAULT_URL = 'http://127.0.0.1:8080';
const SYSTEM_STATE_DIR = '/var/lib/airlock';
const TOKEN_MAX = 4096;
const VERSION = '0.1.0';

const nodeProcess =
  typeof globalThis.process === 'object' && globalThis.process?.versions?.node ? globalThis.process : null;

/** A variable of the environment where there is one (Node, Deno, Bun), else undefined. */
export function envVar(name) {
  try {
    const v = globalThis.process?.env?.[name];
    return typeof v === 'string' && v !== '' ? v : undefined;
  } catch {
    return undefined; // Deno without --allow-env throws: no environment then.
  }
}

/**
 * The state directories whose `token` file the CLI reads, in order: root reads
 * /var/lib/airlock; anyone else $XDG_STATE_HOME/airlock (if absolute), else
 * ~/.local/state/airlock, then /var/lib/airlock (where a daemon run by root keeps it).
 */
export function stateDirs({ euid, env } = {}) {
  const uid = euid ?? nodeProcess?.geteuid?.() ?? -1;
  const get = (n) => (env ? env[n] : envVar(n)) || '';
  if (uid === 0) return [SYSTEM_STATE_DIR];
  const dirs = [];
  const xdg = get('XDG_STATE_HOME');
  const home = get('HOME');
  if (xdg.startsWith('/')) dirs.push(`${xdg.replace(/\/+$/, '')}/airlock`);
  else if (home.startsWith('/')) dirs.push(`${home.replace(/\/+$/, '')}/.local/state/airlock`);
  dirs.push(SYSTEM_STATE_DIR);
  return dirs;
}

/**
 * The token from the first readable token file of `dirs` (Node only). Returns {token, where}
 * or {token: null, problem}: a file that exists but cannot be read, or holds whitespace or
 * control characters, is reported rather than passed over silently.
 */
export async function findTokenFile(dirs) {
  if (!nodeProcess) return { token: null, problem: 'no token: pass `token` (there is no token file to read outside Node)' };
  const { readFile } = await import('node:fs/promises');
  let problem = null;
  for (const dir of dirs) {
    const path = `${dir}/token`;
    let data;
    try {
      data = await readFile(path);
    } catch (e) {
      if (e.code === 'ENOENT' || e.code === 'ENOTDIR') continue;
      problem ??= `cannot read the token file '${path}': ${e.code ?? e.message} (set AIRLOCK_TOKEN, or run as the daemon's user)`;
      continue;
    }
    const token = data.toString('latin1').replace(/\s+$/, '');
    if (data.length > TOKEN_MAX || !token || /[\x00-\x20\x7f-\xff]/.test(token)) {
      problem ??= `the token file '${path}' is empty, too long or holds whitespace or control characters`;
      continue;
    }
    return { token, where: path };
  }
  return {
    token: null,
    problem:
      problem ??
      `no token found: set AIRLOCK_TOKEN, pass \`token\`, or run \`airlock serve\` once to create ${dirs
        .map((d) => `${d}/token`)
        .join(' or ')}`,
  };
}

/** One AbortSignal that fires when any of `signals` does (AbortSignal.any is Node 20.3+). */
function linkSignals(controller, signal) {
  if (!signal) return () => {};
  if (signal.aborted) {
    controller.abort(signal.reason);
    return () => {};
  }
  const onAbort = () => controller.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}

/** A response, whichever way it came: fetch's Response or node:http's IncomingMessage. */
class Reply {
  constructor(status, statusText, header, chunks, cancel, done) {
    this.status = status;
    this.statusText = statusText;
    this.header = header;
    this._chunks = chunks;
    this._cancel = cancel;
    this._done = done;
    this._fail = null;
  }

  /** The body's chunks (Uint8Array) as they arrive. */
  async *chunks() {
    try {
      for await (const c of this._chunks()) yield c;
    } catch (e) {
      throw this._fail(e, 'the answer was cut off');
    }
  }

  async bytes() {
    const parts = [];
    let n = 0;
    for await (const c of this.chunks()) {
      parts.push(c);
      n += c.length;
    }
    const out = new Uint8Array(n);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  async text() {
    return new TextDecoder().decode(await this.bytes());
  }

  /** Ends the exchange: drops what is left of the body and clears the timeout. */
  close() {
    try {
      this._cancel();
    } finally {
      this._done();
    }
  }
}

export class Transport {
  /**
   * @param {{url?: string, token?: string, stateDir?: string, requestTimeout?: number,
   *          fetch?: typeof fetch}} [opts]
   */
  constructor({ url, token, stateDir, requestTimeout = 300, fetch: fetchImpl } = {}) {
    const given = url || envVar('AIRLOCK_URL') || DEFAULT_URL;
    this.url = given;
    this.requestTimeout = requestTimeout;
    this._fetch = fetchImpl ?? globalThis.fetch;
    this._stateDir = stateDir;
    this._token = token || envVar('AIRLOCK_TOKEN') || null;
    this._tokenProblem = null;
    this._tokenLookup = this._token ? Promise.resolve() : null;
    this._agent = null;
    if (given.startsWith('unix:')) {
      this.socketPath = given.slice(5);
      if (!this.socketPath.startsWith('/'))
        throw new TypeError(`url '${given}': a unix socket URL is unix:/absolute/path`);
      if (!nodeProcess)
        throw new AirlockError(`url '${given}': unix sockets need Node (fetch cannot reach them); use http://HOST:PORT`);
      this.base = '';
      return;
    }
    this.socketPath = null;
    let parsed;
    try {
      parsed = new URL(given.includes('://') ? given : `http://${given}`);
    } catch {
      throw new TypeError(`url '${given}': expected http://HOST:PORT, https://HOST:PORT or unix:/PATH`);
    }
    if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || !parsed.hostname)
      throw new TypeError(`url '${given}': expected http://HOST:PORT, https://HOST:PORT or unix:/PATH`);
    if (parsed.username || parsed.password || parsed.search || parsed.hash)
      throw new TypeError(`url '${given}': no user, password, query or fragment (the token goes in \`token\`)`);
    if (typeof this._fetch !== 'function')
      throw new AirlockError('this runtime has no global fetch (Node 18 or later has it); pass `fetch`');
    this.base = `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`;
  }

  async _ensureToken() {
    this._tokenLookup ??= (async () => {
      const dirs = this._stateDir ? [this._stateDir] : stateDirs();
      const found = await findTokenFile(dirs);
      this._token = found.token;
      this._tokenProblem = found.problem ?? null;
    })();
    await this._tokenLookup;
  }

  _where() {
    return this.socketPath ? this.url : this.base;
  }

  /** The error for a failed exchange: the timeout, the caller's abort, or no daemon. */
  _failure(e, ctl, timedOut, what, timeout) {
    if (timedOut())
      return new RequestTimeoutError(`no answer from the airlock daemon at ${this._where()} within ${timeout} s`);
    if (ctl.signal.aborted) return ctl.signal.reason;
    if (e instanceof AirlockError) return e;
    const code = e?.cause?.code ?? e?.code ?? e?.cause?.message ?? e?.message;
    if (what)
      return new ConnectError(`${what} by the airlock daemon at ${this._where()} (${code})`, { cause: e });
    return new ConnectError(
      `no airlock daemon at ${this._where()} (${code}): start one with \`airlock serve\`, or set AIRLOCK_URL to where it listens`,
      { cause: e },
    );
  }

  /**
   * Sends one request; resolves to a Reply with the headers read and the body not. The caller
   * reads the body and then calls reply.close(). `timeout` (seconds) bounds the whole exchange.
   */
  async open(method, path, { body = null, headers = {}, signal, timeout } = {}) {
    await this._ensureToken();
    const seconds = timeout ?? this.requestTimeout;
    const hdrs = { ...headers };
    if (this._token) hdrs.Authorization = `Bearer ${this._token}`;
    if (nodeProcess) hdrs['User-Agent'] = `airlock-js/${VERSION}`;
    const ctl = new AbortController();
    const unlink = linkSignals(ctl, signal);
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      ctl.abort(new Error('timeout'));
    }, seconds * 1000);
    const timedOut = () => expired;
    const done = () => {
      clearTimeout(timer);
      unlink();
    };
    let reply;
    try {
      reply = this.socketPath
        ? await this._openUnix(method, path, body, hdrs, ctl.signal, done)
        : await this._openFetch(method, path, body, hdrs, ctl.signal, done);
    } catch (e) {
      done();
      throw this._failure(e, ctl, timedOut, null, seconds);
    }
    reply._fail = (e, what) => this._failure(e, ctl, timedOut, what, seconds);
    return reply;
  }

  async _openFetch(method, path, body, headers, signal, done) {
    const res = await this._fetch(this.base + path, { method, headers, body, signal, redirect: 'manual' });
    const chunks = async function* () {
      if (!res.body) return;
      const reader = res.body.getReader();
      try {
        for (;;) {
          const { value, done: end } = await reader.read();
          if (end) return;
          yield value;
        }
      } finally {
        reader.releaseLock();
      }
    };
    const cancel = () => {
      if (res.body && !res.body.locked) res.body.cancel().catch(() => {});
    };
    return new Reply(res.status, res.statusText, (n) => res.headers.get(n), chunks, cancel, done);
  }

  async _openUnix(method, path, body, headers, signal, done) {
    const http = await import('node:http');
    // Keep-alive sockets are unref'd by the agent while idle, so they never hold the process.
    this._agent ??= new http.Agent({ keepAlive: true });
    const hdrs = { ...headers, Host: 'localhost', 'Content-Length': String(body ? body.length : 0) };
    const res = await new Promise((resolve, reject) => {
      const req = http.request(
        { socketPath: this.socketPath, path, method, headers: hdrs, agent: this._agent, signal },
        resolve,
      );
      req.on('error', reject);
      req.end(body ?? undefined);
    });
    const chunks = async function* () {
      for await (const c of res) yield c;
    };
    const cancel = () => {
      if (!res.complete) res.destroy();
    };
    return new Reply(res.statusCode, res.statusMessage, (n) => {
      const v = res.headers[n.toLowerCase()];
      return Array.isArray(v) ? v.join(', ') : (v ?? null);
    }, chunks, cancel, done);
  }

  /** The error for a non-2xx answer whose body is `data` (bytes). */
  fail(method, path, reply, data) {
    const text = new TextDecoder().decode(data);
    if (reply.status >= 300 && reply.status < 400)
      return new AirlockError(
        `${method} ${path} was answered with a redirect to '${reply.header('location') ?? ''}', which is not followed (the token must not travel there)`,
        { status: reply.status },
      );
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    const err = errorFor(reply.status, body, `HTTP ${reply.status} ${reply.statusText ?? ''}: ${text.slice(0, 200)}`);
    if (err instanceof AuthError && reply.status === 401 && !this._token && this._tokenProblem)
      err.message += ` (${this._tokenProblem})`;
    return err;
  }

  /**
   * One request answered in full: resolves to the decoded JSON body (or the bytes with
   * raw: true); rejects with the AirlockError subclass of a non-2xx status.
   * @param {{json?: any, body?: Uint8Array|string|null, query?: [string, string][],
   *          raw?: boolean, timeout?: number, signal?: AbortSignal}} [opts]
   */
  async request(method, path, { json, body = null, query, raw = false, timeout, signal } = {}) {
    const headers = {};
    if (json !== undefined) {
      body = new TextEncoder().encode(JSON.stringify(json));
      headers['Content-Type'] = 'application/json';
    } else if (body !== null) {
      headers['Content-Type'] = 'application/octet-stream';
    }
    if (query && query.length) path += `?${new URLSearchParams(query)}`;
    const reply = await this.open(method, path, { body, headers, timeout, signal });
    let data;
    try {
      data = await reply.bytes();
    } finally {
      reply.close();
    }
    if (reply.status < 200 || reply.status > 299) throw this.fail(method, path, reply, data);
    if (raw) return data;
    const text = new TextDecoder().decode(data);
    try {
      return text ? JSON.parse(text) : null;
    } catch {
      throw new AirlockError(`the daemon answered ${method} ${path} with a body that is not JSON: ${text.slice(0, 200)}`, {
        status: reply.status,
      });
    }
  }

  /** Closes the idle keep-alive connections of a unix socket (fetch's pool is its own). */
  close() {
    this._agent?.destroy();
    this._agent = null;
  }
}

/**
 * A /work-relative file path as URL path segments, each percent-encoded; a leading "/work/"
 * is accepted and dropped. Empty, "." and ".." components are refused here: a URL parser
 * resolves dot segments (even percent-encoded ones) before the request is sent, so
 * "a/../.." would reach another route of the API, not a file.
 */
export function quotePath(path) {
  if (typeof path !== 'string') throw new TypeError('a file path must be a string');
  if (path.startsWith('/work/')) path = path.slice('/work/'.length);
  const parts = path.split('/');
  for (const p of parts)
    if (p === '' || p === '.' || p === '..' || p.includes('\0'))
      throw new BadRequestError(
        `bad file path ${JSON.stringify(path)}: components must not be empty, "." or ".." (paths are relative to /work and stay beneath it)`,
        { body: { error: 'bad file path', field: 'path' } },
      );
  return parts.map(encodeURIComponent).join('/');
}

/** A session id as one URL path segment ("." and ".." would be resolved away, see above). */
export function quoteId(id) {
  if (typeof id !== 'string' || !id || id === '.' || id === '..')
    throw new TypeError(`a session id must be a non-empty string like "s-0123...", not ${JSON.stringify(id)}`);
  return encodeURIComponent(id);
}
