"""A small MCP server core in the Python standard library: MCP revision 2025-06-18 over stdio
(one JSON-RPC 2.0 message per line on stdin/stdout, logs on stderr) and over streamable HTTP
(POST one message to one path, answered as application/json or text/event-stream; a session id
issued at initialize; GET opens a stream of server notifications; DELETE ends the session).

The example CRM server (crm_server.py) and the test fixture (tests/e2e/mcp_fixture.py) both
build on it: they describe their tools with Tool and hand a Server to serve().

    server = Server("crm", "1.0.0", instructions="...")
    server.add_tool(Tool("echo", "Echo the text back.", {"type": "object", ...}, handler))
    serve(server, listen=None)          # stdio; listen=("127.0.0.1", 0) for HTTP

A handler is handler(arguments, call) -> result, where arguments were validated against the
tool's inputSchema and call is the Call (call.cancelled is set by notifications/cancelled).
It returns text_result(...) / json_result(...) / a result dict, raises ToolError for a tool
failure the model should read (isError), or RpcError for a JSON-RPC error.
"""
import argparse
import ipaddress
import json
import os
import queue
import secrets
import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2025-06-18"
SUPPORTED_VERSIONS = (PROTOCOL_VERSION,)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# One message (a stdio line, an HTTP body) larger than this is refused: a client cannot make
# the server buffer without bound.
MAX_MESSAGE_BYTES = 16 << 20
# HTTP sessions alive at once; past this, initialize is refused until a client ends one.
MAX_SESSIONS = 256
# Server notifications waiting for a session's GET stream; past this the oldest are dropped.
MAX_QUEUED_NOTIFICATIONS = 1000
# After stdin closes, how long calls still running may take to answer before the server exits.
STDIN_CLOSED_GRACE_S = 2.0
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

# What a method handler returns to never answer (a fixture that hangs on initialize), and what
# dispatch returns for a request the client cancelled (no answer is sent, per the spec).
HANG = object()
DROPPED = object()


class RpcError(Exception):
    """A JSON-RPC error answer: code, message and optional data."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class ToolError(Exception):
    """A tool that ran and failed: answered as a result with isError true and this text."""


def dumps(obj):
    # ASCII-only output stays valid UTF-8 even for lone surrogates a client sent us.
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def log(name, message):
    print(f"{name}: {message}", file=sys.stderr, flush=True)


def text_result(text):
    return {"content": [{"type": "text", "text": text}], "isError": False}


def json_result(obj):
    """Structured content, and the same JSON as text for clients that read only text."""
    return {"content": [{"type": "text", "text": dumps(obj)}], "structuredContent": obj,
            "isError": False}


def error_result(text):
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _response(req_id, result):
    return {"jsonrpc": "2.0", "id": req_id, "result": result}


def _error(req_id, code, message, data=None):
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": req_id, "error": err}


def _notification(method, params=None):
    msg = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


# ---- the subset of JSON Schema that tool inputs use -------------------------------------

def _json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _has_type(value, name):
    actual = _json_type(value)
    if name == "number":
        return actual in ("integer", "number")
    if name == "integer":
        return actual == "integer" or (actual == "number" and value.is_integer())
    return actual == name


def validate(schema, value, path="arguments"):
    """Check value against schema (type, enum, const, properties, required,
    additionalProperties, items, min/maxItems, min/maxLength, minimum, maximum). Raises
    ValueError naming the first offending path; keywords outside this subset are ignored."""
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_has_type(value, t) for t in names):
            raise ValueError(f"{path}: expected {' or '.join(names)}, got {_json_type(value)}")
    if "enum" in schema and value not in schema["enum"]:
        raise ValueError(f"{path}: {dumps(value)} is not one of {dumps(schema['enum'])}")
    if "const" in schema and value != schema["const"]:
        raise ValueError(f"{path}: must be {dumps(schema['const'])}")
    kind = _json_type(value)
    if kind in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise ValueError(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ValueError(f"{path}: {value} is above the maximum {schema['maximum']}")
    elif kind == "string":
        if len(value) < schema.get("minLength", 0):
            raise ValueError(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise ValueError(f"{path}: longer than {schema['maxLength']} characters")
    elif kind == "array":
        if len(value) < schema.get("minItems", 0):
            raise ValueError(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ValueError(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                validate(schema["items"], item, f"{path}[{i}]")
    elif kind == "object":
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                raise ValueError(f"{path}: missing required property '{key}'")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                validate(props[key], item, f"{path}.{key}")
            elif extra is False:
                allowed = ", ".join(props) or "none"
                raise ValueError(f"{path}: unknown property '{key}' (allowed: {allowed})")
            elif isinstance(extra, dict):
                validate(extra, item, f"{path}.{key}")


# ---- tools, sessions and dispatch -------------------------------------------------------

class Tool:
    """One tool: what tools/list shows of it, and the handler tools/call runs."""

    def __init__(self, name, description, input_schema, handler, *, title=None,
                 output_schema=None, annotations=None):
        self.name = name
        self.description = description
        self.input_schema = input_schema
        self.handler = handler
        self.title = title
        self.output_schema = output_schema
        self.annotations = annotations

    def describe(self):
        out = {"name": self.name, "description": self.description,
               "inputSchema": self.input_schema}
        if self.title:
            out["title"] = self.title
        if self.output_schema:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        return out


class Session:
    """One client's MCP session: the stdio peer, or one Mcp-Session-Id over HTTP."""

    def __init__(self, sid):
        self.id = sid
        self.initialized = False
        self.protocol_version = None
        self.closed = threading.Event()

    def send(self, msg):
        raise NotImplementedError


class StdioSession(Session):
    def __init__(self, out):
        super().__init__("stdio")
        self._out = out
        self._lock = threading.Lock()

    def send(self, msg):
        data = (dumps(msg) + "\n").encode()
        with self._lock:
            try:
                self._out.write(data)
                self._out.flush()
            except OSError:
                # Nobody reads our answers any more: the client is gone.
                log("mcp", "stdout closed: exiting")
                os._exit(0)


class HttpSession(Session):
    """Server notifications that are not part of a request's answer wait here for the
    session's GET stream (the streamable HTTP transport's only way to reach the client)."""

    def __init__(self):
        super().__init__(secrets.token_hex(16))
        self.queue = queue.Queue(MAX_QUEUED_NOTIFICATIONS)

    def send(self, msg):
        while True:
            try:
                self.queue.put_nowait(msg)
                return
            except queue.Full:
                try:
                    self.queue.get_nowait()
                except queue.Empty:
                    pass


class Call:
    """One request in flight. cancelled is set when the client sends notifications/cancelled
    for it; notify() sends a notification on the request's own stream when it has one."""

    def __init__(self, server, session, req_id, stream):
        self.server = server
        self.session = session
        self.id = req_id
        self.stream = stream
        self.cancelled = threading.Event()

    def notify(self, method, params=None):
        (self.stream or self.session).send(_notification(method, params))


class Server:
    """The transport-independent part: initialize, ping, tools/list (optionally paginated),
    tools/call, logging/setLevel, notifications/cancelled. methods and notifications map a
    method name to handler(params, call) / handler(params, session); a server may replace or
    wrap them. on_message(msg, session) is called for every message received. Over HTTP,
    http_check(headers), when set, sees every request's headers first and returns None to let
    it through or a message to refuse it with 401 (an API key check)."""

    def __init__(self, name, version, *, title=None, instructions=None, page_size=None,
                 logging=False):
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self.page_size = page_size
        self.logging = logging
        self.on_message = None
        self.http_check = None
        self._tools = {}
        self._sessions = {}
        self._inflight = {}
        self._lock = threading.Lock()
        self._exit_code = None
        self.methods = {"initialize": self._initialize, "ping": lambda params, call: {},
                        "tools/list": self._tools_list, "tools/call": self._tools_call}
        if logging:
            self.methods["logging/setLevel"] = self._set_level
        self.notifications = {"notifications/initialized": self._initialized,
                              "notifications/cancelled": self._cancelled}

    def log(self, message):
        log(self.name, message)

    # -- tools

    def add_tool(self, tool, call=None):
        """Add (or replace) a tool. Once sessions exist, each is told with
        notifications/tools/list_changed; call, when given, is the request during which the
        tool appeared, so that session hears it on that request's own stream."""
        with self._lock:
            self._tools[tool.name] = tool
            sessions = [s for s in self._sessions.values() if s.initialized]
        msg = _notification("notifications/tools/list_changed")
        for session in sessions:
            if call is not None and call.session is session and call.stream is not None:
                call.stream.send(msg)
            else:
                session.send(msg)

    def tools(self):
        with self._lock:
            return list(self._tools.values())

    # -- sessions

    def open_session(self, session, limit=None):
        """Register session; False (and not registered) when limit sessions are open."""
        with self._lock:
            if limit is not None and len(self._sessions) >= limit:
                return False
            self._sessions[session.id] = session
            return True

    def find_session(self, sid):
        with self._lock:
            return self._sessions.get(sid)

    def close_session(self, session):
        with self._lock:
            self._sessions.pop(session.id, None)
        session.closed.set()

    def exit_after_reply(self, code):
        """Ask the transport to exit with code once the current message is answered."""
        self._exit_code = code

    def maybe_exit(self):
        if self._exit_code is not None:
            self.log(f"exiting with status {self._exit_code} as asked")
            sys.stderr.flush()
            os._exit(self._exit_code)

    # -- dispatch

    def dispatch(self, msg, session, stream=None):
        """Handle one parsed message from session. Returns the answer to send, None when there
        is none (a notification, or a client's response), HANG or DROPPED."""
        if isinstance(msg, list):
            return _error(None, INVALID_REQUEST,
                          "JSON-RPC batches are not part of MCP 2025-06-18: send one message")
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST,
                          'not a JSON-RPC 2.0 message: expected an object with "jsonrpc": "2.0"')
        req_id = msg.get("id")
        is_request = "id" in msg
        if is_request and (isinstance(req_id, bool) or not isinstance(req_id, (str, int))):
            return _error(None, INVALID_REQUEST, "a request id must be a string or an integer")
        method = msg.get("method")
        if method is None:
            if "result" in msg or "error" in msg:
                return None  # an answer to a request of ours; this server sends none
            return _error(req_id, INVALID_REQUEST, 'the message has no "method"')
        if not isinstance(method, str):
            return _error(req_id, INVALID_REQUEST, '"method" must be a string')
        if self.on_message:
            self.on_message(msg, session)
        params = msg.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _error(req_id, INVALID_PARAMS, '"params" must be an object') \
                if is_request else None
        if not is_request:
            handler = self.notifications.get(method)
            if handler:
                handler(params, session)
            return None
        handler = self.methods.get(method)
        if handler is None:
            return _error(req_id, METHOD_NOT_FOUND, f"method '{method}' is not supported")
        if not session.initialized and method not in ("initialize", "ping"):
            return _error(req_id, INVALID_REQUEST,
                          f"'{method}' before initialize: initialize the session first")
        call = Call(self, session, req_id, stream)
        key = (session.id, req_id)
        with self._lock:
            self._inflight[key] = call
        try:
            result = handler(params, call)
        except RpcError as e:
            return _error(req_id, e.code, e.message, e.data)
        except Exception as e:  # a bug in a handler must not take the server down
            self.log(f"method '{method}' failed: {traceback.format_exc()}")
            return _error(req_id, INTERNAL_ERROR, f"internal error in '{method}': {e}")
        finally:
            with self._lock:
                if self._inflight.get(key) is call:
                    del self._inflight[key]
        if result is HANG:
            return HANG
        if call.cancelled.is_set():
            return DROPPED
        return _response(req_id, result)

    def _initialize(self, params, call):
        version = params.get("protocolVersion")
        if not isinstance(version, str):
            raise RpcError(INVALID_PARAMS, 'initialize needs "protocolVersion", a string')
        session = call.session
        if session.initialized:
            raise RpcError(INVALID_REQUEST, "the session is already initialized")
        # Per the lifecycle spec: echo a version we support, else offer our newest one and
        # let the client decide whether it can speak it.
        session.protocol_version = version if version in SUPPORTED_VERSIONS else PROTOCOL_VERSION
        session.initialized = True
        capabilities = {"tools": {"listChanged": True}}
        if self.logging:
            capabilities["logging"] = {}
        info = {"name": self.name, "version": self.version}
        if self.title:
            info["title"] = self.title
        result = {"protocolVersion": session.protocol_version, "capabilities": capabilities,
                  "serverInfo": info}
        if self.instructions:
            result["instructions"] = self.instructions
        self.log(f"session {session.id} initialized, protocol {session.protocol_version}")
        return result

    def _initialized(self, params, session):
        pass

    def _cancelled(self, params, session):
        with self._lock:
            call = self._inflight.get((session.id, params.get("requestId")))
        if call is not None and call.session is session:
            call.cancelled.set()

    def _set_level(self, params, call):
        if params.get("level") not in LOG_LEVELS:
            raise RpcError(INVALID_PARAMS, f"level must be one of {', '.join(LOG_LEVELS)}")
        return {}

    def _tools_list(self, params, call):
        tools = self.tools()
        cursor = params.get("cursor")
        if not self.page_size:
            if cursor is not None:
                raise RpcError(INVALID_PARAMS, f"invalid cursor {dumps(cursor)}: not paginated")
            return {"tools": [t.describe() for t in tools]}
        start = 0
        if cursor is not None:
            if not (isinstance(cursor, str) and cursor.startswith("page-")
                    and cursor[5:].isdigit() and int(cursor[5:]) < len(tools)):
                raise RpcError(INVALID_PARAMS, f"invalid cursor {dumps(cursor)}")
            start = int(cursor[5:])
        end = start + self.page_size
        out = {"tools": [t.describe() for t in tools[start:end]]}
        if end < len(tools):
            out["nextCursor"] = f"page-{end}"
        return out

    def _tools_call(self, params, call):
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, 'tools/call needs "name", a string')
        with self._lock:
            tool = self._tools.get(name)
        if tool is None:
            raise RpcError(INVALID_PARAMS, f"unknown tool '{name}'")
        args = params.get("arguments")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise RpcError(INVALID_PARAMS, '"arguments" must be an object')
        try:
            validate(tool.input_schema, args)
        except ValueError as e:
            raise RpcError(INVALID_PARAMS, f"invalid arguments for tool '{name}': {e}")
        try:
            return tool.handler(args, call)
        except ToolError as e:
            return error_result(str(e))


# ---- stdio -------------------------------------------------------------------------------

def serve_stdio(server):
    """Serve one session on stdin/stdout until stdin ends. tools/call runs on a thread of its
    own, so ping, other calls and notifications/cancelled are read while it works."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must not corrupt the protocol stream
    session = StdioSession(out)
    server.open_session(session)
    inp = sys.stdin.buffer
    workers = []

    def answer(msg):
        reply = server.dispatch(msg, session)
        if isinstance(reply, dict):
            session.send(reply)
        server.maybe_exit()

    while True:
        line = inp.readline(MAX_MESSAGE_BYTES + 1)
        if not line:
            break
        if len(line) > MAX_MESSAGE_BYTES:
            while line and not line.endswith(b"\n"):
                line = inp.readline(MAX_MESSAGE_BYTES)
            session.send(_error(None, PARSE_ERROR,
                                f"message over {MAX_MESSAGE_BYTES} bytes: refused"))
            continue
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError as e:
            session.send(_error(None, PARSE_ERROR, f"parse error: {e}"))
            continue
        if isinstance(msg, dict) and msg.get("method") == "tools/call" and "id" in msg:
            workers = [w for w in workers if w.is_alive()]
            workers.append(threading.Thread(target=answer, args=(msg,), daemon=True))
            workers[-1].start()
        else:
            answer(msg)
    # stdin closed: the client is done. Calls still running get a short grace to answer
    # (a client may close stdin and still read stdout); a longer one is abandoned.
    deadline = time.monotonic() + STDIN_CLOSED_GRACE_S
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    server.log("stdin closed: exiting")


# ---- streamable HTTP ---------------------------------------------------------------------

def parse_listen(text):
    """'HOST:PORT' (or '[::1]:PORT') -> (host, port), for loopback hosts only: these servers
    have no authentication, so anything reachable from another machine is refused."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http wants HOST:PORT, e.g. 127.0.0.1:0, not '{text}'")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        host = "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"--http host '{host}' is not a loopback address: this server has no "
                         "authentication, so it listens only on 127.0.0.1, ::1 or localhost")
    return host, int(port)


def _accepts(header, wanted):
    types = [part.split(";")[0].strip().lower() for part in (header or "").split(",")]
    return wanted in types or "*/*" in types or wanted.split("/")[0] + "/*" in types


class _SseStream:
    """The text/event-stream answer of one POST (or the GET stream): one event per message."""

    def __init__(self, wfile):
        self._wfile = wfile
        self._lock = threading.Lock()
        self.broken = False

    def send(self, msg):
        self.write(f"event: message\ndata: {dumps(msg)}\n\n")

    def write(self, text):
        """Write an event; False once the client has gone (later writes are dropped)."""
        with self._lock:
            if self.broken:
                return False
            try:
                self._wfile.write(text.encode())
                self._wfile.flush()
                return True
            except OSError:
                self.broken = True
                return False


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mcp-stdlib"

    def log_message(self, format, *args):
        pass  # no access log; errors are logged where they are decided

    # -- answers

    def _close_before_exit(self):
        """When the server is about to exit: its answer out, then an orderly close. An exit
        with bytes of the client's still unread makes the kernel reset the connection, and a
        reset can destroy the answer before the client reads it."""
        if getattr(self.server.mcp, "_exit_code", None) is None:
            return
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(1)
            while self.connection.recv(4096):
                pass
        except OSError:
            pass

    def _send_json(self, status, obj, session=None):
        body = dumps(obj).encode() if obj is not None else b""
        self.send_response(status)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if session is not None:
            self.send_header("Mcp-Session-Id", session.id)
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, status, message, extra_headers=()):
        # The request's body may be unread: close rather than parse it as the next request.
        self.close_connection = True
        body = dumps(_error(None, INVALID_REQUEST, message)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for key, value in extra_headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _start_stream(self, session=None):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        if session is not None:
            self.send_header("Mcp-Session-Id", session.id)
        self.end_headers()
        self.close_connection = True
        return _SseStream(self.wfile)

    # -- checks shared by every method

    def _check_common(self):
        """Path, Host and Origin. Host and Origin guard against DNS rebinding: a web page
        whose name resolves to 127.0.0.1 must not drive the server."""
        if urlsplit(self.path).path != self.server.mcp_path:
            self._refuse(404, f"no MCP endpoint at {self.path}: use {self.server.mcp_path}")
            return False
        host = self.headers.get("Host", "")
        if host.startswith("["):
            name, _, rest = host[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else rest
        else:
            name, _, port = host.partition(":")
        bound_host, bound_port = self.server.server_address[:2]
        if name not in LOOPBACK_NAMES + (bound_host,) or (port and port != str(bound_port)):
            self._refuse(403, f"Host '{host}' is not this loopback server")
            return False
        origin = self.headers.get("Origin")
        if origin is not None and urlsplit(origin).hostname not in LOOPBACK_NAMES:
            self._refuse(403, f"Origin '{origin}' is not allowed: only loopback pages are")
            return False
        check = self.server.mcp.http_check
        refusal = check(self.headers) if check else None
        if refusal:
            self._refuse(401, refusal, [("WWW-Authenticate", "Bearer")])
            return False
        return True

    def _find_session(self):
        """The session named by Mcp-Session-Id, or None after answering 400/404."""
        sid = self.headers.get("Mcp-Session-Id")
        if sid is None:
            self._refuse(400, "missing Mcp-Session-Id header: initialize first, then send "
                              "the id it returned with every request")
            return None
        session = self.server.mcp.find_session(sid)
        if session is None:
            self._refuse(404, f"unknown or ended session '{sid}': initialize a new one")
            return None
        version = self.headers.get("MCP-Protocol-Version")
        if version is not None and version != session.protocol_version:
            self._refuse(400, f"MCP-Protocol-Version '{version}' is not the negotiated "
                              f"'{session.protocol_version}'")
            return None
        return session

    # -- methods

    def do_POST(self):
        mcp = self.server.mcp
        if not self._check_common():
            return
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return self._refuse(415, "POST a JSON-RPC message as Content-Type: application/json")
        accept = self.headers.get("Accept")
        if not (_accepts(accept, "application/json") and _accepts(accept, "text/event-stream")):
            return self._refuse(406, "Accept must list both application/json and "
                                     "text/event-stream (MCP streamable HTTP)")
        if self.headers.get("Transfer-Encoding"):
            return self._refuse(411, "send the body with a Content-Length, not chunked")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            return self._refuse(411, "a POST needs a Content-Length")
        if int(length) > MAX_MESSAGE_BYTES:
            return self._refuse(413, f"message over {MAX_MESSAGE_BYTES} bytes: refused")
        body = self.rfile.read(int(length))
        try:
            msg = json.loads(body)
        except ValueError as e:
            return self._send_json(400, _error(None, PARSE_ERROR, f"parse error: {e}"))
        if not isinstance(msg, dict):
            return self._send_json(400, mcp.dispatch(msg, None))
        is_request = "method" in msg and "id" in msg
        if msg.get("method") == "initialize" and is_request:
            session = HttpSession()
            if not mcp.open_session(session, MAX_SESSIONS):
                return self._refuse(503, f"{MAX_SESSIONS} sessions are open: end one with "
                                         "DELETE before initializing another")
            new_session = session
        else:
            session = self._find_session()
            if session is None:
                return
            new_session = None
        if not is_request:
            reply = mcp.dispatch(msg, session)
            if isinstance(reply, dict):
                return self._send_json(400, reply)
            self._send_json(202, None)
            self._close_before_exit()
            return mcp.maybe_exit()
        stream = None
        if self.server.sse:
            stream = self._start_stream(new_session)
            # A notification ahead of the answer, as a server that streams progress would.
            stream.send(_notification("notifications/message", {
                "level": "info", "logger": mcp.name,
                "data": f"{mcp.name}: answering '{msg.get('method')}'"}))
        try:
            reply = mcp.dispatch(msg, session, stream)
        finally:
            if new_session is not None and not new_session.initialized:
                mcp.close_session(new_session)
        if reply is HANG:
            threading.Event().wait()
        if stream is not None:
            if isinstance(reply, dict):
                stream.send(reply)
        elif reply is DROPPED:
            # Cancelled: the spec says to send no answer; 202 closes the HTTP exchange.
            self._send_json(202, None)
        else:
            # A JSON-RPC error is still an answer: 200, the error in the body.
            self._send_json(200, reply, new_session if new_session and
                            new_session.initialized else None)
        self._close_before_exit()
        mcp.maybe_exit()

    def do_GET(self):
        if not self._check_common():
            return
        if not _accepts(self.headers.get("Accept"), "text/event-stream"):
            return self._refuse(406, "GET opens an event stream: Accept: text/event-stream")
        session = self._find_session()
        if session is None:
            return
        stream = self._start_stream()
        while not session.closed.is_set() and not stream.broken:
            try:
                msg = session.queue.get(timeout=5)
            except queue.Empty:
                stream.write(": keep-alive\n\n")  # finds a client that went away
                continue
            stream.send(msg)

    def do_DELETE(self):
        if not self._check_common():
            return
        session = self._find_session()
        if session is None:
            return
        self.server.mcp.close_session(session)
        self.server.mcp.log(f"session {session.id} ended by the client")
        self._send_json(200, None)

    def _not_allowed(self):
        self._refuse(405, f"{self.command} is not an MCP method here: use POST, GET or DELETE",
                     [("Allow", "GET, POST, DELETE")])

    do_PUT = do_PATCH = do_HEAD = do_OPTIONS = _not_allowed


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _HttpServer6(_HttpServer):
    address_family = socket.AF_INET6


def serve_http(server, host, port, *, sse=False, path="/mcp"):
    """Serve streamable HTTP on host:port (port 0 picks a free one) until killed. Prints
    'NAME: listening on http://HOST:PORT/mcp' on stdout once bound, for whoever started it."""
    cls = _HttpServer6 if ":" in host else _HttpServer
    httpd = cls((host, port), _Handler)
    httpd.mcp = server
    httpd.sse = sse
    httpd.mcp_path = path
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{httpd.server_address[1]}{path}"
    print(f"{server.name}: listening on {url}", flush=True)
    server.log(f"streamable HTTP on {url}" + (" (answers as event streams)" if sse else ""))
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


def add_transport_arguments(parser):
    parser.add_argument("--http", metavar="HOST:PORT", type=_listen_arg,
                        help="serve streamable HTTP on this loopback address (port 0: any free "
                             "port, printed on stdout) instead of stdio")


def _listen_arg(text):
    try:
        return parse_listen(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def serve(server, listen=None, *, sse=False):
    """Serve over stdio, or over streamable HTTP when listen is (host, port)."""
    try:
        if listen is None:
            serve_stdio(server)
        else:
            serve_http(server, *listen, sse=sse)
    except KeyboardInterrupt:
        pass
