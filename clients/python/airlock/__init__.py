"""airlock: the Python client of the airlock code interpreter daemon (standard library only).

    from airlock import Sandbox
    with Sandbox() as sb:
        print(sb.run_code("1 + 1").result)

docs/CLIENTS.md in the airlock repository is the reference."""

from .aio import AsyncSandbox, arun
from .errors import (AirlockError, AuthError, BadRequestError, ConflictError, ConnectError,
                     ExecutionError, LimitError, NotFoundError, RequestTimeoutError)
from .models import CellError, Execution, FileChange, FileInfo, Output
from .sandbox import Files, Sandbox, run

__version__ = "0.1.0"

__all__ = ["Sandbox", "AsyncSandbox", "Files", "run", "arun", "Execution", "Output",
           "CellError", "FileChange", "FileInfo", "AirlockError", "BadRequestError",
           "AuthError", "NotFoundError", "ConflictError", "LimitError", "ConnectError",
           "RequestTimeoutError", "ExecutionError"]
