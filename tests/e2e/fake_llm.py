"""A scripted fake of an OpenAI-compatible Chat Completions endpoint, for the tests of
`airlock chat` and of the daemon's /v1/chat/completions gateway.

The server listens on 127.0.0.1 on a free port. A test hands it a script: one step per request
to POST /chat/completions, in order. A step is either a response (a dict made by the helpers
below) or a function taking the request body (a dict) and returning one; a function may assert
on what the client sent (the tool messages, the tools declared...). An assertion that fails in
the server thread is kept and re-raised by check(), and the client gets a 500 so that it stops.

    llm = FakeLLM([tool_call("run_python", {"code": "print(6*7)"}),
                   lambda req: answer("The answer is 42") if "42" in last_tool(req) else ...])
    ... run airlock against llm.base_url ...
    llm.check()        # every step was used, no assertion failed
"""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ids = iter(range(1, 1 << 30))


def _completion(message, finish_reason):
    return {
        "id": f"chatcmpl-fake{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def answer(text):
    """A final assistant answer without tool calls."""
    return {"status": 200, "body": _completion({"role": "assistant", "content": text}, "stop")}


def tool_calls(*calls, content=None):
    """An assistant turn calling tools: each call is (name, arguments) where arguments is a
    dict (sent as its JSON text) or a str (sent as is, to send malformed JSON)."""
    out = []
    for name, args in calls:
        out.append({
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {"name": name,
                         "arguments": args if isinstance(args, str) else json.dumps(args)},
        })
    msg = {"role": "assistant", "content": content, "tool_calls": out}
    return {"status": 200, "body": _completion(msg, "tool_calls")}


def tool_call(name, args):
    return tool_calls((name, args))


def error(status, message, type_="server_error"):
    """An error answer in OpenAI's shape."""
    return {"status": status,
            "body": {"error": {"message": message, "type": type_, "code": None}}}


def raw(status, text, content_type="application/json"):
    """Any body, e.g. JSON without choices or not JSON at all."""
    return {"status": status, "text": text, "content_type": content_type}


def slow(seconds, then):
    """Waits before answering `then` (to make the client time out)."""
    return {"sleep": seconds, "then": then}


def tool_messages(req):
    """The role "tool" messages of a request, in order."""
    return [m for m in req["messages"] if m.get("role") == "tool"]


def last_tool(req):
    """The content of the last tool message of a request ("" if none)."""
    msgs = tool_messages(req)
    return msgs[-1]["content"] if msgs else ""


class FakeLLM:
    def __init__(self, script=(), api_key=None):
        self.script = list(script)
        self.requests = []       # request bodies received, in order
        self.headers = []        # their headers (dict, lower-case names)
        self.failures = []       # exceptions raised by script functions
        self.api_key = api_key   # when set, requests must carry "Authorization: Bearer KEY"
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # quiet
                pass

            def _send(self, status, text, content_type="application/json"):
                data = text.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                if self.path.rstrip("/") != "/v1/chat/completions" and \
                        self.path.rstrip("/") != "/chat/completions":
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
                    return
                try:
                    req = json.loads(body)
                except ValueError as e:
                    fake.failures.append(AssertionError(f"request is not JSON: {e}"))
                    self._send(400, json.dumps({"error": {"message": "bad json"}}))
                    return
                with fake._lock:
                    fake.requests.append(req)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    step = fake.script.pop(0) if fake.script else None
                if fake.api_key is not None and \
                        self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    self._send(401, json.dumps(error(401, "Incorrect API key provided")["body"]))
                    return
                if step is None:
                    fake.failures.append(AssertionError(
                        f"unexpected request #{len(fake.requests)}: the script is used up"))
                    self._send(500, json.dumps(error(500, "fake: script used up")["body"]))
                    return
                try:
                    resp = step(req) if callable(step) else step
                except Exception as e:  # an assertion of the test, reported by check()
                    fake.failures.append(e)
                    self._send(500, json.dumps(error(500, f"fake: {e!r}")["body"]))
                    return
                while "sleep" in resp:
                    time.sleep(resp["sleep"])
                    resp = resp["then"]
                if "text" in resp:
                    self._send(resp["status"], resp["text"], resp["content_type"])
                else:
                    self._send(resp["status"], json.dumps(resp["body"]))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add(self, *steps):
        with self._lock:
            self.script.extend(steps)

    def check(self, all_used=True):
        """Re-raises the first failure of a script function; checks every step was used."""
        if self.failures:
            raise self.failures[0]
        if all_used:
            assert not self.script, f"{len(self.script)} scripted steps were never requested"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
