"""What an execution returns, as Python objects over the daemon's JSON (docs/API.md, "The
execution object"). Every object keeps the JSON it came from in `raw`."""

import base64
import dataclasses
from typing import Any, Dict, List, Optional

from .errors import ExecutionError


def _b64(value):
    return base64.b64decode(value) if isinstance(value, str) else None


class Output:
    """One rich output: a matplotlib figure, an object's _repr_html_, the cell's own value.
    `data` is the MIME dict as sent; the properties decode the common types."""

    def __init__(self, raw):
        self.raw = raw
        self.data: Dict[str, Any] = raw.get("data") or {}
        self.main: bool = bool(raw.get("main"))

    @property
    def formats(self) -> List[str]:
        return list(self.data)

    @property
    def png(self) -> Optional[bytes]:
        return _b64(self.data.get("image/png"))

    @property
    def jpeg(self) -> Optional[bytes]:
        return _b64(self.data.get("image/jpeg"))

    @property
    def svg(self) -> Optional[str]:
        return self.data.get("image/svg+xml")

    @property
    def html(self) -> Optional[str]:
        return self.data.get("text/html")

    @property
    def text(self) -> Optional[str]:
        return self.data.get("text/plain")

    @property
    def markdown(self) -> Optional[str]:
        return self.data.get("text/markdown")

    @property
    def json(self) -> Any:
        return self.data.get("application/json")

    def __repr__(self):
        return f"Output(formats={self.formats}, main={self.main})"


@dataclasses.dataclass
class CellError:
    """The exception a cell raised (traceback of the user's code only), or for a timeout, an
    OOM or a kill, a plain explanation in `value`."""
    name: str
    value: str
    traceback: str

    def __str__(self):
        return self.traceback or f"{self.name}: {self.value}"


@dataclasses.dataclass
class FileChange:
    """A file the cell created, changed or deleted in /work. `content` (bytes) is there only
    for a one-shot airlock.run() while the files fit; else None and `omitted` says why."""
    path: str
    size: int
    change: str
    content: Optional[bytes] = None
    omitted: Optional[str] = None


@dataclasses.dataclass
class FileInfo:
    """One entry of Files.list()."""
    name: str
    path: str
    type: str
    size: int
    modified_at: Optional[str] = None
    raw_path: Optional[str] = None


class Execution:
    """The answer of one run_code() or airlock.run(): status ("ok", "error", "timeout",
    "oom", "killed", "output_limit"), stdout, stderr, result (repr of the last expression or
    None), outputs (list of Output), error (CellError or None), files (list of FileChange),
    usage (dict), execution_count, state ("preserved", "lost", or None for one-shot),
    exit_code, timed_out; the whole JSON in `raw`."""

    def __init__(self, raw):
        self.raw = raw
        self.status: str = raw.get("status", "")
        self.stdout: str = raw.get("stdout") or ""
        self.stderr: str = raw.get("stderr") or ""
        self.result: Optional[str] = raw.get("result")
        self.outputs = [Output(o) for o in raw.get("outputs") or []]
        err = raw.get("error")
        self.error = (CellError(err.get("name") or "", err.get("value") or "",
                                err.get("traceback") or "") if err else None)
        self.files = [FileChange(f.get("path", ""), f.get("size", 0), f.get("change", ""),
                                 _b64(f.get("content")), f.get("omitted"))
                      for f in raw.get("files") or []]
        self.usage: Dict[str, Any] = raw.get("usage") or {}
        self.execution_count: Optional[int] = raw.get("execution_count")
        self.state: Optional[str] = raw.get("state")
        self.exit_code: Optional[int] = raw.get("exit_code")
        self.timed_out: bool = bool(raw.get("timed_out"))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def png(self) -> Optional[bytes]:
        """The first PNG among the outputs (a figure), or None."""
        return next((o.png for o in self.outputs if "image/png" in o.data), None)

    def file(self, path) -> Optional[bytes]:
        """The returned content of a file a one-shot run made, or None."""
        return next((f.content for f in self.files if f.path == path), None)

    def raise_for_error(self) -> "Execution":
        """Raises ExecutionError unless the status is "ok"; returns self otherwise."""
        if self.status != "ok":
            raise ExecutionError(self)
        return self

    def for_model(self) -> str:
        """A short text of what happened, for a model's tool result: output, result, error
        and the names of rich outputs and files (never their bytes)."""
        parts = [f"status: {self.status}"]
        if self.stdout:
            parts.append("stdout:\n" + self.stdout)
        if self.stderr:
            parts.append("stderr:\n" + self.stderr)
        if self.result is not None:
            parts.append("result: " + self.result)
        if self.error:
            parts.append("error:\n" + str(self.error))
        for o in self.outputs:
            parts.append("output: " + ", ".join(o.formats))
        for f in self.files:
            parts.append(f"file {f.change}: {f.path} ({f.size} bytes)")
        return "\n".join(parts)

    def __repr__(self):
        return (f"Execution(status={self.status!r}, result={self.result!r}, "
                f"stdout={self.stdout[:60]!r}, outputs={len(self.outputs)})")
