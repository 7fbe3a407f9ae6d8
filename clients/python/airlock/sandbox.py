"""Sandbox, a session of the daemon as a Python object, and run(), the one-shot call. Every
method is one HTTP request of docs/API.md; nothing is cached but the session's id."""

import base64
import json
import http.client
import urllib.parse

from ._http import Transport, quote_path
from .errors import ConnectError, NotFoundError, error_for
from .models import Execution, FileInfo, Output

_UNSET = object()
# The daemon caps a cell at 3600 s; an answer may take that long plus the interrupt's grace.
_MAX_CELL_S = 3600.0
_HTTP_MARGIN_S = 60.0


def _put(body, name, value):
    if value is not None:
        body[name] = value


def _execute(transport, path, body, timeout, on_stdout, on_stderr, on_output):
    """POSTs an execute request; streams it (ndjson) when a callback is given."""
    http_timeout = (timeout or _MAX_CELL_S) + _HTTP_MARGIN_S
    if not (on_stdout or on_stderr or on_output):
        return Execution(transport.request("POST", path, json_body=body, timeout=http_timeout))
    conn, resp = transport.open("POST", path, body=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json",
                                         "Accept": "application/x-ndjson"},
                                timeout=http_timeout)
    try:
        ctype = resp.getheader("Content-Type", "")
        if resp.status != 200 or not ctype.startswith("application/x-ndjson"):
            data = resp.read()
            transport.finish(conn, resp)
            if resp.status != 200:
                raise transport.fail(resp, data)
            return Execution(json.loads(data))
        while True:
            line = resp.readline()
            if not line:
                raise ConnectError("the execution's stream ended before its end event")
            if not line.strip():
                continue
            ev = json.loads(line)
            kind = ev.get("type")
            if kind == "stdout" and on_stdout:
                on_stdout(ev.get("text", ""))
            elif kind == "stderr" and on_stderr:
                on_stderr(ev.get("text", ""))
            elif kind == "output" and on_output:
                on_output(Output(ev))
            elif kind == "end":
                resp.read()     # the chunked stream's end, so the connection can be reused
                transport.finish(conn, resp)
                if ev.get("result") is None:
                    failure = ev.get("failure") or {}
                    raise error_for(failure.get("status"), failure,
                                    "the execution failed after its stream began")
                return Execution(ev["result"])
    except (OSError, http.client.HTTPException) as e:
        conn.close()
        raise ConnectError(f"the execution's stream was cut off: {e}") from None
    except BaseException:
        # A callback raised, or ^C: closing the connection makes the daemon interrupt the
        # cell (docs/API.md, "Streaming").
        conn.close()
        raise


def run(code, files=None, *, language="python", profile=None, timeout=None, stdin=None,
        env=None, cwd=None, url=None, token=None, on_stdout=None, on_stderr=None,
        on_output=None):
    """Runs code once in a fresh sandbox that is gone afterwards (POST /execute). files:
    {"relative/path": bytes or str} written into /work first; the Execution's `files` carry
    the content of what the code created or changed (Execution.file(path))."""
    body = {"code": code, "language": language}
    _put(body, "profile", profile)
    _put(body, "timeout", timeout)
    _put(body, "stdin", stdin)
    _put(body, "env", env)
    _put(body, "cwd", cwd)
    if files:
        body["files"] = {p: base64.b64encode(d.encode() if isinstance(d, str) else d).decode()
                         for p, d in files.items()}
    t = Transport(url, token)
    try:
        return _execute(t, "/execute", body, timeout, on_stdout, on_stderr, on_output)
    finally:
        t.close()


class Files:
    """The files of a session's /work (paths are relative to it)."""

    def __init__(self, sandbox):
        self._sb = sandbox

    def _path(self, path):
        return f"/v1/sessions/{self._sb.id}/files/{quote_path(path)}"

    def write(self, path, data):
        """Creates or replaces a file (parents are made); str is written as UTF-8. Returns
        {"path", "size"}."""
        if isinstance(data, str):
            data = data.encode()
        return self._sb._t.request("PUT", self._path(path), data=bytes(data))

    def read(self, path) -> bytes:
        return self._sb._t.request("GET", self._path(path), raw=True)

    def read_text(self, path, encoding="utf-8") -> str:
        return self.read(path).decode(encoding)

    def list(self, dir=""):
        """The entries of a directory of /work ("" is /work itself), as FileInfo."""
        reply = self._sb._t.request("GET", f"/v1/sessions/{self._sb.id}/files",
                                    query={"dir": dir} if dir else None)
        return [FileInfo(e.get("name", ""), e.get("path", ""), e.get("type", ""),
                         e.get("size", 0), e.get("modified_at"), e.get("raw_path"))
                for e in reply.get("entries", [])]

    def remove(self, path):
        """Removes a file, a symlink or a directory with everything in it. Returns the
        answer ({"path", "deleted", "removed"})."""
        return self._sb._t.request("DELETE", self._path(path))


class Sandbox:
    """A session: a sandbox whose Python variables, bash shell and /work persist between
    run_code() calls. Sandbox(...) creates one; Sandbox.connect(id) attaches to one.

    As a context manager, leaving the block deletes the session, or stops it (state saved to
    disk, resumed by the next call) when persistent=True."""

    def __init__(self, profile="default", url=None, token=None, persistent=False, env=None,
                 metadata=None, lifetime=None, stop_after=None, timeout=None, *,
                 request_timeout=300.0, _info=None, _transport=None):
        self._t = _transport or Transport(url, token, request_timeout)
        self.persistent = persistent
        self.timeout = timeout
        self.files = Files(self)
        if _info is None:
            body = {"profile": profile}
            _put(body, "env", env)
            _put(body, "metadata", metadata)
            _put(body, "lifetime_s", lifetime)
            _put(body, "stop_after_s", stop_after)
            _info = self._t.request("POST", "/v1/sessions", json_body=body)
        self._info = _info
        self.id: str = _info["id"]
        self.profile: str = _info.get("profile", profile)

    @classmethod
    def connect(cls, id, url=None, token=None, persistent=True, timeout=None):
        """Attaches to an existing session (a stopped one stays stopped until a call needs
        it). persistent=True by default: leaving a `with` block stops it, never deletes it."""
        t = Transport(url, token)
        info = t.request("GET", "/v1/sessions/" + urllib.parse.quote(id, safe=""))
        return cls(url=url, persistent=persistent, timeout=timeout, _info=info, _transport=t)

    @staticmethod
    def list(metadata=None, state=None, url=None, token=None):
        """The session objects (dicts) of the daemon's live and stopped sessions; state:
        "idle", "busy", "stopped" or "live"; metadata: {key: value}, all must match."""
        query = [("state", state)] if state else []
        query += [(f"metadata.{k}", v) for k, v in (metadata or {}).items()]
        t = Transport(url, token)
        try:
            return t.request("GET", "/v1/sessions", query=query)["sessions"]
        finally:
            t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            if self.persistent:
                self.stop()
            else:
                self.delete()
        except NotFoundError:
            pass                # it ended already (lost, deleted): nothing left to do
        finally:
            self._t.close()

    def __repr__(self):
        return f"Sandbox(id={self.id!r}, profile={self.profile!r})"

    @property
    def url(self):
        return self._t.url

    def _s(self, suffix=""):
        return f"/v1/sessions/{self.id}{suffix}"

    def info(self) -> dict:
        """The session object: state, usage, stops_at, metadata... (a stopped session is
        described, not resumed)."""
        self._info = self._t.request("GET", self._s())
        return self._info

    def run_code(self, code, language="python", timeout=None, stdin=None, env=None, cwd=None,
                 on_stdout=None, on_stderr=None, on_output=None) -> Execution:
        """Runs code (language "python", "bash" or "javascript" where the profile allows) and
        returns its Execution. With on_stdout/on_stderr (called with text) or on_output
        (called with an Output), the answer is streamed and they are called as it arrives.
        timeout: seconds for this cell (default: the Sandbox's timeout, else the session's)."""
        body = {"code": code, "language": language}
        timeout = self.timeout if timeout is None else timeout
        _put(body, "timeout_s", timeout)
        _put(body, "stdin", stdin)
        _put(body, "env", env)
        _put(body, "cwd", cwd)
        return _execute(self._t, self._s("/execute"), body, timeout, on_stdout, on_stderr,
                        on_output)

    def interrupt(self) -> bool:
        """Interrupts the running cell (as a timeout would); False if none was running."""
        return bool(self._t.request("POST", self._s("/interrupt"))["interrupted"])

    def fork(self, n=1):
        """n new sessions (1..32), each with a copy of this one's variables and /work."""
        reply = self._t.request("POST", self._s("/fork"), json_body={"n": n})
        return [Sandbox(url=self._t.url, persistent=self.persistent, timeout=self.timeout,
                        _info=info, _transport=self._t) for info in reply["sessions"]]

    def stop(self) -> dict:
        """Saves the session to disk and ends its processes; any later call resumes it.
        Returns the session object."""
        self._info = self._t.request("POST", self._s("/stop"))
        return self._info

    def resume(self) -> dict:
        """Resumes a stopped session now; the answer carries "resumed" and "lost_names"."""
        self._info = self._t.request("POST", self._s("/resume"))
        return self._info

    def update(self, *, lifetime=_UNSET, stop_after=_UNSET, timeout=_UNSET,
               metadata=_UNSET) -> dict:
        """PATCH: lifetime (seconds from now, None clears it), stop_after (idle seconds),
        timeout (the session's default cell timeout), metadata (merged; a None value removes
        the key). Works on a stopped session without resuming it."""
        body = {}
        for name, value in (("lifetime_s", lifetime), ("stop_after_s", stop_after),
                            ("timeout_s", timeout), ("metadata", metadata)):
            if value is not _UNSET:
                body[name] = value
        if not body:
            raise ValueError("update() needs at least one of lifetime, stop_after, timeout, "
                             "metadata")
        self._info = self._t.request("PATCH", self._s(), json_body=body)
        if timeout is not _UNSET:
            self.timeout = None     # the session's new default applies from now on
        return self._info

    def delete(self) -> None:
        """Deletes the session: processes, /work and everything saved of it."""
        self._t.request("DELETE", self._s())
