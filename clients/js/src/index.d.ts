// Types of @airlock/client, written by hand to match src/*.js. The HTTP API they wrap is
// described in docs/API.md; session objects are the API's JSON as it comes (snake_case).

/** Where the daemon is and how to authenticate; every static method takes these. */
export interface ConnectionOptions {
  /** http://HOST:PORT, https://HOST:PORT or (Node only) unix:/PATH. Default: AIRLOCK_URL,
   * else http://127.0.0.1:8080. */
  url?: string;
  /** The bearer token. Default: AIRLOCK_TOKEN, else (Node only) the token file the CLI reads. */
  token?: string;
  /** Where to look for the token file instead of the default state directories (Node only). */
  stateDir?: string;
  /** Seconds one request may take, executions excepted (they get their cell timeout plus a
   * minute). Default 300. */
  requestTimeout?: number;
  /** A fetch to use instead of the global one. */
  fetch?: typeof globalThis.fetch;
  /** Aborts the request. */
  signal?: AbortSignal;
}

export interface CreateOptions extends ConnectionOptions {
  /** A profile of GET /v1/profiles. Default "default". */
  profile?: string;
  /** Extra environment variables for the session's code. */
  env?: Record<string, string>;
  /** User labels: keys 1..64 of [A-Za-z0-9_.-], values at most 1024 bytes, at most 64. */
  metadata?: Record<string, string>;
  /** Seconds from now after which the session stops whatever its activity. */
  lifetime?: number;
  /** Seconds without a call after which the session stops (state saved). */
  stopAfter?: number;
  /** Default timeout in seconds of this object's runCode() calls. */
  timeout?: number;
  /** Disposing of it (Sandbox.with, `await using`) stops it instead of deleting it. */
  persistent?: boolean;
}

export interface ConnectOptions extends ConnectionOptions {
  /** Default true: disposing of a connected session stops it, never deletes it. */
  persistent?: boolean;
  /** Default timeout in seconds of this object's runCode() calls. */
  timeout?: number;
}

export type SessionState = 'idle' | 'busy' | 'stopped';

export interface ListOptions extends ConnectionOptions {
  state?: SessionState | 'live';
  /** Only sessions whose metadata has every one of these key=value pairs. */
  metadata?: Record<string, string>;
}

/** The session object of the API (docs/API.md, "POST /v1/sessions"). */
export interface SessionInfo {
  id: string;
  profile: string;
  state: SessionState;
  created_at: string;
  last_used_at: string | null;
  stop_after_s: number;
  idle_timeout_s: number;
  stopped_at: string | null;
  delete_at: string | null;
  /** When the session's lifetime ends (RFC 3339), or null. */
  stops_at?: string | null;
  execution_count: number;
  lost_names: string[];
  metadata?: Record<string, string>;
  usage: { cpu_ms: number; peak_memory_bytes: number; memory_limit_bytes: number; [k: string]: unknown };
  code_tools?: string[];
  approved_tools?: string[];
  /** Answers of resume() and fork(). */
  resumed?: boolean;
  resume_error?: string;
  [k: string]: unknown;
}

export type Language = 'python' | 'bash' | 'javascript';

export interface RunCodeOptions {
  language?: Language;
  /** Seconds; 0 < timeout <= 3600. Default: the Sandbox's, else the session's. */
  timeout?: number;
  /** Fed to the cell's standard input (at most 1 MiB); without it stdin is empty. */
  stdin?: string;
  /** Extra environment for this call only. */
  env?: Record<string, string>;
  /** Directory this call runs in: absolute in the sandbox, or relative to /work. */
  cwd?: string;
  /** Called with each piece of stdout as it is printed (the answer is then streamed). */
  onStdout?: (text: string) => void | Promise<void>;
  /** Called with each piece of stderr as it is printed. */
  onStderr?: (text: string) => void | Promise<void>;
  /** Called with each rich output (a figure...) once the cell ended. */
  onOutput?: (output: Output) => void | Promise<void>;
  /** Interrupts the cell; the call then rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface RunOptions extends RunCodeOptions, Omit<ConnectionOptions, 'signal'> {
  profile?: string;
  /** Files written into /work before the code runs: relative path -> contents. */
  files?: Record<string, string | Uint8Array | ArrayBuffer | Blob>;
}

export type ExecutionStatus = 'ok' | 'error' | 'timeout' | 'oom' | 'killed' | 'output_limit';

export interface CellError {
  name: string;
  value: string;
  traceback: string;
}

export interface FileChange {
  path: string;
  size: number;
  change: 'created' | 'changed' | 'deleted';
  /** One-shot run() only: the file's bytes while they fit, else null (and `omitted` says
   * why); undefined for a session's executions. */
  content?: Uint8Array | null;
  omitted?: string;
}

export interface Usage {
  wall_ms: number;
  cpu_ms: number;
  peak_memory_bytes: number;
  tool_calls?: number;
  tool_ms?: number;
  [k: string]: unknown;
}

/** One rich output; `data` is the MIME bundle as sent, the getters decode the common types. */
export class Output {
  constructor(raw: { data?: Record<string, unknown>; main?: boolean });
  readonly raw: { data?: Record<string, unknown>; main?: boolean; [k: string]: unknown };
  readonly data: Record<string, any>;
  /** True for the cell's own value (its last expression). */
  readonly main: boolean;
  readonly formats: string[];
  readonly png: Uint8Array | undefined;
  readonly jpeg: Uint8Array | undefined;
  readonly svg: string | undefined;
  readonly html: string | undefined;
  readonly text: string | undefined;
  readonly markdown: string | undefined;
  readonly latex: string | undefined;
  readonly json: unknown;
  readonly javascript: string | undefined;
}

/** The answer of one runCode() or run(); `raw` is the API's execution object. */
export class Execution {
  constructor(raw: Record<string, any>);
  readonly raw: Record<string, any>;
  readonly status: ExecutionStatus;
  readonly stdout: string;
  readonly stderr: string;
  /** repr() of the last expression, or null. */
  readonly result: string | null;
  readonly outputs: Output[];
  readonly error: CellError | null;
  readonly files: FileChange[];
  readonly usage: Usage;
  readonly executionCount: number | null;
  /** "preserved" or "lost"; null for a one-shot run(). */
  readonly state: 'preserved' | 'lost' | null;
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  readonly ok: boolean;
  /** The first PNG among the outputs. */
  readonly png: Uint8Array | undefined;
  /** The returned content of a file a one-shot run() made or changed. */
  file(path: string): Uint8Array | null | undefined;
  /** Throws ExecutionError unless the status is "ok". */
  throwIfError(): this;
  /** A short text of what happened, for a model's tool result (never bytes). */
  forModel(): string;
}

export interface FileEntry {
  name: string;
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  modifiedAt: string | null;
  /** Set for a name that is not valid UTF-8: its bytes percent-encoded, usable as a path. */
  rawPath?: string;
}

export interface WriteInfo {
  path: string;
  size: number;
}

export interface RemoveInfo {
  path: string;
  deleted: boolean;
  removed: number;
}

/** The files of a session's /work; paths are relative to it (a leading "/work/" is dropped). */
export class Files {
  private constructor();
  write(path: string, data: string | Uint8Array | ArrayBuffer | ArrayBufferView | Blob, opts?: { signal?: AbortSignal }): Promise<WriteInfo>;
  read(path: string, opts?: { format?: 'text'; signal?: AbortSignal }): Promise<string>;
  read(path: string, opts: { format: 'bytes'; signal?: AbortSignal }): Promise<Uint8Array>;
  list(dir?: string, opts?: { signal?: AbortSignal }): Promise<FileEntry[]>;
  remove(path: string, opts?: { signal?: AbortSignal }): Promise<RemoveInfo>;
}

export interface UpdateOptions {
  /** Seconds from now; null clears it. */
  lifetime?: number | null;
  stopAfter?: number;
  /** The session's default execution timeout, 0 < t <= 3600. */
  timeout?: number;
  /** Merged into the session's; a null value removes its key. */
  metadata?: Record<string, string | null>;
}

/** A session: Python variables, a bash shell and /work that persist between runCode() calls. */
export class Sandbox {
  private constructor();
  static create(opts?: CreateOptions): Promise<Sandbox>;
  static connect(id: string, opts?: ConnectOptions): Promise<Sandbox>;
  static list(opts?: ListOptions): Promise<SessionInfo[]>;
  /** Creates a session, calls fn with it, and deletes it afterwards (stops it when persistent). */
  static with<T>(opts: CreateOptions, fn: (sb: Sandbox) => Promise<T> | T): Promise<T>;
  static with<T>(fn: (sb: Sandbox) => Promise<T> | T): Promise<T>;

  readonly id: string;
  readonly profile: string;
  readonly files: Files;
  readonly url: string;
  persistent: boolean;
  /** Default timeout (seconds) of runCode() calls on this object. */
  timeout: number | undefined;

  info(opts?: { signal?: AbortSignal }): Promise<SessionInfo>;
  runCode(code: string, opts?: RunCodeOptions): Promise<Execution>;
  interrupt(): Promise<boolean>;
  fork(n?: number): Promise<Sandbox[]>;
  stop(): Promise<SessionInfo>;
  resume(): Promise<SessionInfo>;
  update(changes: UpdateOptions): Promise<SessionInfo>;
  delete(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Runs code once in a fresh sandbox that is gone afterwards (POST /execute). */
export function run(code: string, opts?: RunOptions): Promise<Execution>;

export const DEFAULT_URL: string;

export class AirlockError extends Error {
  constructor(message: string, opts?: { status?: number | null; body?: unknown; cause?: unknown });
  /** The HTTP status, or null when there was no answer. */
  readonly status: number | null;
  /** The decoded JSON body of the answer, or null. */
  readonly body: Record<string, any> | null;
  /** The request field the daemon blamed, if any. */
  readonly field: string | null;
}
/** 400. */
export class BadRequestError extends AirlockError {}
/** 401 or 403. */
export class AuthError extends AirlockError {}
/** 404. */
export class NotFoundError extends AirlockError {}
/** 409. */
export class ConflictError extends AirlockError {}
/** 413, 429, 503, 507. */
export class LimitError extends AirlockError {}
/** No daemon at the URL, or the connection broke. */
export class ConnectError extends AirlockError {}
/** No answer within the request timeout. */
export class RequestTimeoutError extends AirlockError {}
/** Thrown by Execution.throwIfError(). */
export class ExecutionError extends AirlockError {
  constructor(execution: Execution);
  readonly execution: Execution;
  readonly errorName: string;
  readonly errorValue: string;
  readonly traceback: string;
}
