// The errors of the airlock client. Every failure is an AirlockError carrying the API's own
// message, the HTTP status and the decoded JSON body of the answer; a subclass per kind of
// failure lets callers catch what they can handle (a 404 of a session that ended, a 409 of a
// busy one) and let the rest through.

export class AirlockError extends Error {
  /**
   * @param {string} message the API's `error` sentence, or ours when there is no answer
   * @param {{status?: number|null, body?: any, cause?: unknown}} [opts]
   */
  constructor(message, { status = null, body = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.status = status;
    this.body = body && typeof body === 'object' && !Array.isArray(body) ? body : null;
    this.field = typeof this.body?.field === 'string' ? this.body.field : null;
  }
}

/** 400: the request was refused; `field` names the offending field. */
export class BadRequestError extends AirlockError {}

/** 401 (a missing or wrong token) or 403 (a Host or Origin the daemon does not accept). */
export class AuthError extends AirlockError {}

/** 404: an unknown or ended session (the body says why), or a missing file. */
export class NotFoundError extends AirlockError {}

/** 409: the session is running another cell, or a directory was only partly deleted. */
export class ConflictError extends AirlockError {}

/** 413, 429, 503 or 507: a size, rate or session limit was reached, or the disk is full. */
export class LimitError extends AirlockError {}

/** No daemon answers at the URL, or the connection broke before the answer was complete. */
export class ConnectError extends AirlockError {}

/** The daemon did not answer within the client's request timeout. */
export class RequestTimeoutError extends AirlockError {}

/** Thrown by Execution.throwIfError(): the cell did not end with status "ok". */
export class ExecutionError extends AirlockError {
  /** @param {import('./models.js').Execution} execution */
  constructor(execution) {
    const err = execution.error;
    const name = err ? err.name : execution.status;
    const value = err ? err.value : '';
    super(`the cell failed with status "${execution.status}": ${value ? `${name}: ${value}` : name}`);
    this.execution = execution;
    this.errorName = name;
    this.errorValue = value;
    this.traceback = err ? err.traceback : '';
  }
}

const BY_STATUS = {
  400: BadRequestError,
  401: AuthError,
  403: AuthError,
  404: NotFoundError,
  409: ConflictError,
  413: LimitError,
  429: LimitError,
  503: LimitError,
  507: LimitError,
};

/** The error for an answer with this status and decoded body (an object, or null). */
export function errorFor(status, body, fallback) {
  let message = body && typeof body === 'object' ? body.error : null;
  // The OpenAI-shaped routes nest it: {"error": {"message": ...}}.
  if (message && typeof message === 'object') message = message.message;
  if (typeof message !== 'string' || !message) message = fallback;
  const Kind = BY_STATUS[status] ?? AirlockError;
  return new Kind(message, { status, body });
}
