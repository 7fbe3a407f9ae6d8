// What an execution returns, as objects over the daemon's JSON (docs/API.md, "The execution
// object"). Every object keeps the JSON it came from in `raw`; rich outputs and returned file
// contents are decoded from base64 only when they are asked for.
import { ExecutionError } from './errors.js';

const NodeBuffer = globalThis.Buffer;

/** base64 -> bytes (a Buffer in Node, which is a Uint8Array; a plain Uint8Array elsewhere). */
export function fromBase64(text) {
  if (typeof text !== 'string') return null;
  if (NodeBuffer) return NodeBuffer.from(text, 'base64');
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(text);
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** bytes -> base64. */
export function toBase64(bytes) {
  if (NodeBuffer) return NodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  if (typeof bytes.toBase64 === 'function') return bytes.toBase64();
  let bin = '';
  // String.fromCharCode takes its arguments on the stack: a slice at a time.
  for (let i = 0; i < bytes.length; i += 0x8000)
    bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

/** string | Uint8Array | ArrayBuffer | ArrayBufferView | Blob -> Uint8Array. */
export async function toBytes(data, what) {
  if (typeof data === 'string') return new TextEncoder().encode(data);
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (typeof Blob !== 'undefined' && data instanceof Blob) return new Uint8Array(await data.arrayBuffer());
  throw new TypeError(`${what} must be a string, a Uint8Array, an ArrayBuffer or a Blob`);
}

/** One rich output: a matplotlib figure, an object's _repr_html_, the cell's own value. */
export class Output {
  constructor(raw) {
    this.raw = raw;
    this.data = raw && typeof raw.data === 'object' && raw.data ? raw.data : {};
    this.main = Boolean(raw?.main);
  }

  /** The MIME types this output carries. */
  get formats() {
    return Object.keys(this.data);
  }

  get png() {
    return fromBase64(this.data['image/png']) ?? undefined;
  }

  get jpeg() {
    return fromBase64(this.data['image/jpeg']) ?? undefined;
  }

  get svg() {
    return this.data['image/svg+xml'];
  }

  get html() {
    return this.data['text/html'];
  }

  get text() {
    return this.data['text/plain'];
  }

  get markdown() {
    return this.data['text/markdown'];
  }

  get latex() {
    return this.data['text/latex'];
  }

  get json() {
    return this.data['application/json'];
  }

  get javascript() {
    return this.data['application/javascript'];
  }
}

function cellError(raw) {
  if (!raw || typeof raw !== 'object') return null;
  return { name: raw.name ?? '', value: raw.value ?? '', traceback: raw.traceback ?? '' };
}

function fileChange(raw) {
  const f = {
    path: raw.path ?? '',
    size: raw.size ?? 0,
    change: raw.change ?? '',
    content: raw.content === undefined ? undefined : fromBase64(raw.content),
  };
  if (raw.omitted !== undefined) f.omitted = raw.omitted;
  return f;
}

/** The answer of one runCode() or run(). */
export class Execution {
  constructor(raw) {
    this.raw = raw;
    this.status = raw.status ?? '';
    this.stdout = raw.stdout ?? '';
    this.stderr = raw.stderr ?? '';
    this.result = raw.result ?? null;
    this.outputs = (raw.outputs ?? []).map((o) => new Output(o));
    this.error = cellError(raw.error);
    this.files = (raw.files ?? []).map(fileChange);
    this.usage = raw.usage ?? {};
    this.executionCount = raw.execution_count ?? null;
    this.state = raw.state ?? null;
    this.exitCode = raw.exit_code ?? null;
    this.timedOut = Boolean(raw.timed_out);
  }

  /** True when the cell ended with status "ok". */
  get ok() {
    return this.status === 'ok';
  }

  /** The first PNG among the outputs (a figure), or undefined. */
  get png() {
    return this.outputs.find((o) => 'image/png' in o.data)?.png;
  }

  /** The returned content of a file a one-shot run() made or changed, or undefined. */
  file(path) {
    return this.files.find((f) => f.path === path)?.content ?? undefined;
  }

  /** Throws ExecutionError unless the status is "ok"; returns this otherwise. */
  throwIfError() {
    if (this.status !== 'ok') throw new ExecutionError(this);
    return this;
  }

  /** A short text of what happened, for a model's tool result: output, result, error and the
   * names of rich outputs and files (never their bytes). */
  forModel() {
    const parts = [`status: ${this.status}`];
    if (this.stdout) parts.push(`stdout:\n${this.stdout}`);
    if (this.stderr) parts.push(`stderr:\n${this.stderr}`);
    if (this.result !== null) parts.push(`result: ${this.result}`);
    if (this.error) parts.push(`error:\n${this.error.traceback || `${this.error.name}: ${this.error.value}`}`);
    for (const o of this.outputs) parts.push(`output: ${o.formats.join(', ')}`);
    for (const f of this.files) parts.push(`file ${f.change}: ${f.path} (${f.size} bytes)`);
    return parts.join('\n');
  }
}
