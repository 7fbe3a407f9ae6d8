"""The exceptions of the airlock client: every failure is an AirlockError carrying the API's
message, the HTTP status and the JSON body of the answer."""

import builtins


class AirlockError(Exception):
    """An answer of the daemon that is not a success, or a failure to reach it.

    message: the API's `error` sentence (or ours when there is no answer); status: the HTTP
    status or None; body: the decoded JSON body (a dict) or None; field: the request field
    the daemon blamed, if any."""

    def __init__(self, message, status=None, body=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body if isinstance(body, dict) else None
        self.field = self.body.get("field") if self.body else None

    def __str__(self):
        if self.status:
            return f"{self.message} (HTTP {self.status})"
        return self.message


class BadRequestError(AirlockError):
    """400: the request was refused; `field` names the offending field."""


class AuthError(AirlockError):
    """401 (a missing or wrong token) or 403 (a Host or Origin the daemon does not accept)."""


class NotFoundError(AirlockError):
    """404: an unknown or ended session (the body says why), or a missing file."""


class ConflictError(AirlockError):
    """409: the session is running another cell, or a partial delete."""


class LimitError(AirlockError):
    """413, 429, 503 or 507: a size, rate or session limit was reached, or the disk is full."""


class ConnectError(AirlockError, builtins.ConnectionError):
    """No daemon answers at the URL (also an instance of the builtin ConnectionError)."""


class RequestTimeoutError(AirlockError, builtins.TimeoutError):
    """The daemon did not answer within the client's request timeout."""


class ExecutionError(AirlockError):
    """Raised by Execution.raise_for_error(): the cell failed. `execution` is the Execution,
    `name`, `value` and `traceback` its error (the name is the status, such as "timeout",
    when the cell failed without an exception)."""

    def __init__(self, execution):
        err = execution.error
        self.execution = execution
        self.name = err.name if err else execution.status
        self.value = err.value if err else ""
        self.traceback = err.traceback if err else ""
        text = f"{self.name}: {self.value}" if self.value else self.name
        super().__init__(f"the cell failed with status {execution.status!r}: {text}")


_BY_STATUS = {400: BadRequestError, 401: AuthError, 403: AuthError, 404: NotFoundError,
              409: ConflictError, 413: LimitError, 429: LimitError, 503: LimitError,
              507: LimitError}


def error_for(status, body, fallback):
    """The exception for an answer with this status and decoded body (a dict or None)."""
    message = body.get("error") if isinstance(body, dict) else None
    if isinstance(message, dict):           # the OpenAI-shaped routes nest it
        message = message.get("message")
    if not isinstance(message, str) or not message:
        message = fallback
    return _BY_STATUS.get(status, AirlockError)(message, status, body)
