"""A small MCP client for tests, over stdio or streamable HTTP: initialize, tools/list with
pagination, tools/call, notifications, and the raw HTTP exchange for transport checks.

    with StdioClient([PYTHON, "tests/e2e/mcp_fixture.py"]) as c:
        c.initialize()
        names = [t["name"] for t in c.list_tools()]
        assert c.call("echo", {"text": "hi"})["content"][0]["text"] == "hi"

    with HttpServer([PYTHON, "tests/e2e/mcp_fixture.py"]) as srv, HttpClient(srv.url) as c:
        ...

Answers and notifications arrive on background threads and are kept in arrival order in
client.received; request() waits for its own answer. Every process started here is stopped by
its pid when the with block ends, even when the test fails.
"""
import http.client
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2025-06-18"
PYTHON = "/usr/bin/python3"


class McpError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, error):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


class NoAnswer(Exception):
    """The exchange ended without an answer: the server exited, or HTTP said no."""


class Client:
    """What both transports share. A transport implements _send(msg) for a message it sends
    and hands every message it receives to _deliver()."""

    def __init__(self):
        self.received = []  # every message received, in order
        self.init_result = None
        self._ids = iter(range(1, 1 << 30))
        self._cond = threading.Condition()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _deliver(self, msg):
        with self._cond:
            self.received.append(msg)
            self._cond.notify_all()

    def _wait(self, pred, timeout, what, req_id=None):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for msg in self.received:
                    if pred(msg):
                        return msg
                gone = self._gone(req_id)
                if gone:
                    raise NoAnswer(f"no {what}: {gone}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {what} within {timeout} s")
                self._cond.wait(min(left, 0.1))

    def _gone(self, req_id):
        """Why no more messages can come for req_id (or at all), else None."""
        return None

    # -- messages

    def start(self, method, params=None):
        """Send a request without waiting; returns its id for wait_response()."""
        req_id = next(self._ids)
        msg = {"jsonrpc": "2.0", "id": req_id, "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)
        return req_id

    def wait_response(self, req_id, timeout=10):
        """The answer to request req_id: its result, or McpError for an error answer."""
        msg = self._wait(lambda m: m.get("id") == req_id and "method" not in m, timeout,
                         f"answer to request {req_id}", req_id)
        if "error" in msg:
            raise McpError(msg["error"])
        return msg["result"]

    def request(self, method, params=None, timeout=10):
        return self.wait_response(self.start(method, params), timeout)

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    def wait_notification(self, method, timeout=10):
        return self._wait(lambda m: m.get("method") == method and "id" not in m, timeout,
                          f"notification {method}")

    def notifications(self, method):
        with self._cond:
            return [m for m in self.received if m.get("method") == method and "id" not in m]

    # -- MCP

    def initialize(self, version=PROTOCOL_VERSION, timeout=10):
        self.init_result = self.request("initialize", {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "airlock-tests", "version": "1.0.0"}}, timeout)
        self.notify("notifications/initialized")
        return self.init_result

    def list_tools(self, pages=None):
        """Every tool, following nextCursor; pages, if a list, gets each page's size."""
        tools, cursor = [], None
        for _ in range(1000):
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools += result["tools"]
            if pages is not None:
                pages.append(len(result["tools"]))
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
        raise AssertionError("tools/list did not end after 1000 pages")

    def call(self, name, arguments=None, timeout=10):
        return self.request("tools/call", {"name": name, "arguments": arguments or {}},
                            timeout)

    def cancel(self, req_id, reason="test"):
        self.notify("notifications/cancelled", {"requestId": req_id, "reason": reason})

    def ping(self, timeout=10):
        return self.request("ping", timeout=timeout)


class _Child:
    """A server process started here: stdout piped, stderr kept in a temp file
    (stderr_text() reads it), stopped by its pid."""

    def _spawn(self, argv, env, stdin=subprocess.DEVNULL):
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=self._err, env=env)
        self.pid = self.proc.pid

    def stderr_text(self):
        self._err.seek(0)
        return self._err.read().decode("utf-8", "replace")

    def _stop(self, ask):
        """ask() asks a running process to end; past 5 s it is killed by its pid."""
        if self.proc.poll() is None:
            ask()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, 9)
                self.proc.wait(5)
        self.proc.stdout.close()
        self._err.close()


class StdioClient(Client, _Child):
    """Starts argv and speaks MCP on its stdin/stdout."""

    def __init__(self, argv, env=None):
        super().__init__()
        self._spawn(argv, env, subprocess.PIPE)
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"unparsable": line.decode("utf-8", "replace")}
            self._deliver(msg)
        with self._cond:
            self._cond.notify_all()

    def _gone(self, req_id):
        return None if self._reader.is_alive() else "the server closed its stdout"

    def _send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def send_raw(self, data):
        with self._write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def wait_exit(self, timeout=10):
        return self.proc.wait(timeout)

    def close(self):
        """Close stdin (the stdio way to stop a server); kill by pid if it lingers."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self._stop(lambda: None)


class HttpServer(_Child):
    """Starts an MCP server with --http 127.0.0.1:0 and reads the URL from its ready line."""

    def __init__(self, argv, env=None, timeout=15):
        self._spawn([*argv, "--http", "127.0.0.1:0"], env)
        self.url = None
        try:
            self.url = self._ready(timeout)
        except BaseException:
            self.close()
            raise
        parts = urlsplit(self.url)
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path

    def _ready(self, timeout):
        result = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        match = re.search(rb"listening on (http://\S+)", result[0] if result else b"")
        if not match:
            raise RuntimeError(f"the server did not print its URL within {timeout} s: "
                               f"{self.stderr_text()}")
        return match.group(1).decode()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._stop(lambda: os.kill(self.pid, 15))


class HttpReply:
    def __init__(self, status, headers, messages, body):
        self.status = status
        self.headers = headers  # lower-case names
        self.messages = messages  # the JSON-RPC messages in the body, in order
        self.body = body


class HttpClient(Client):
    """MCP over streamable HTTP: each request is a POST on a thread of its own, so slow calls
    and pings overlap like on stdio. The session id from initialize rides on every request.
    post() is the raw exchange, for tests of the transport itself."""

    def __init__(self, url, timeout=30):
        super().__init__()
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path
        self.timeout = timeout
        self.session_id = None
        self.protocol_version = None
        self.replies = {}  # request id -> HttpReply (status and headers of its POST)
        self._threads = []
        self._stream = None

    def headers(self, extra=None):
        h = {"Content-Type": "application/json",
             "Accept": "application/json, text/event-stream"}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            h["MCP-Protocol-Version"] = self.protocol_version
        h.update(extra or {})
        return {k: v for k, v in h.items() if v is not None}

    def post(self, body, headers=None, timeout=None, on_message=None, on_headers=None):
        """POST body (a message, or bytes as they are) and read the whole answer. JSON and
        event-stream bodies are parsed into messages; on_headers sees the status and headers
        first, on_message each message as it arrives."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)
        try:
            conn.request("POST", self.path, data, self.headers(headers))
            resp = conn.getresponse()
            if on_headers:
                on_headers(resp.status, {k.lower(): v for k, v in resp.getheaders()})
            return self._read_reply(resp, on_message)
        finally:
            conn.close()

    def _read_reply(self, resp, on_message):
        headers = {k.lower(): v for k, v in resp.getheaders()}
        ctype = headers.get("content-type", "").split(";")[0].strip()
        messages, raw = [], b""
        if ctype == "text/event-stream":
            for msg in _sse_messages(resp):
                messages.append(msg)
                if on_message:
                    on_message(msg)
        else:
            raw = resp.read()
            if ctype == "application/json" and raw:
                messages.append(json.loads(raw))
                if on_message:
                    on_message(messages[-1])
        return HttpReply(resp.status, headers, messages, raw)

    def _send(self, msg):
        if "id" not in msg:
            reply = self.post(msg)
            if reply.status != 202:
                raise RuntimeError(f"notification {msg['method']}: HTTP {reply.status} "
                                   f"{reply.body!r}")
            return

        def took_session(status, headers):
            # Before the answer is delivered, so the next request already carries the id.
            if msg.get("method") == "initialize" and status == 200:
                self.session_id = headers.get("mcp-session-id")

        def run():
            try:
                reply = self.post(msg, on_message=self._deliver, on_headers=took_session)
            except (OSError, http.client.HTTPException) as e:
                reply = HttpReply(None, {}, [], repr(e).encode())
            with self._cond:
                self.replies[msg["id"]] = reply
                self._cond.notify_all()

        t = threading.Thread(target=run, daemon=True)
        self._threads.append(t)
        t.start()

    def reply(self, req_id, timeout=10):
        """The HttpReply of request req_id's POST, once its body has been read."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while req_id not in self.replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the POST of request {req_id} did not end in {timeout} s")
                self._cond.wait(min(left, 0.1))
            return self.replies[req_id]

    def _gone(self, req_id):
        reply = self.replies.get(req_id)
        if reply is None:
            return None
        return f"HTTP {reply.status} {reply.headers.get('content-type')} {reply.body[:300]!r}"

    def initialize(self, version=PROTOCOL_VERSION, timeout=10):
        result = super().initialize(version, timeout)
        self.protocol_version = result["protocolVersion"]
        return result

    def open_stream(self):
        """GET the session's event stream; its notifications arrive like the others."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        conn.request("GET", self.path, headers={
            "Accept": "text/event-stream", "Mcp-Session-Id": self.session_id,
            "MCP-Protocol-Version": self.protocol_version})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"GET stream: HTTP {resp.status} {resp.read()!r}")
        self._stream = conn

        def run():
            try:
                for msg in _sse_messages(resp):
                    self._deliver(msg)
            except (OSError, ValueError):
                pass

        threading.Thread(target=run, daemon=True).start()

    def delete(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("DELETE", self.path, headers=self.headers())
            resp = conn.getresponse()
            resp.read()
            return resp.status
        finally:
            conn.close()

    def close(self):
        if self._stream is not None:
            self._stream.close()
            self._stream = None


def _sse_messages(resp):
    """The JSON data of each event in a text/event-stream body, as it arrives."""
    data = []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.rstrip(b"\r\n")
        if not line:
            if data:
                yield json.loads(b"\n".join(data))
                data = []
        elif line.startswith(b"data:"):
            data.append(line[5:].lstrip(b" "))
