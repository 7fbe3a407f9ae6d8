"""`airlock chat` and the daemon's /v1/chat/completions gateway against a scripted fake Chat
Completions server (fake_llm.py): the tool loop with real sandboxes, session reuse, files saved,
malformed tool calls, endpoint errors, the round cap and approvals. Loopback traffic only."""
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_llm import (FakeLLM, answer, error, last_tool, raw, slow, tool_call,  # noqa: E402
                      tool_calls, tool_messages)

ROOT = Path(__file__).resolve().parents[2]
AIRLOCK = os.environ.get("AIRLOCK_BIN", str(ROOT / "build" / "src" / "cli" / "airlock"))
TOOL_NAMES = {"run_python", "run_shell", "run_javascript", "run_r", "write_file", "read_file",
              "list_files", "reset_session"}

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRLOCK_LLM_") and k not in ("AIRLOCK_URL", "AIRLOCK_TOKEN")}
    env.update(extra)
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Chat:
    def __init__(self, proc, elapsed):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.elapsed = elapsed


@pytest.fixture
def llm():
    fake = FakeLLM()
    yield fake
    fake.close()


@pytest.fixture
def chat(llm, tmp_path):
    """Runs `airlock chat` against the fake, in tmp_path, with tmp_path/out as output dir."""
    def run(*args, input=None, timeout=120, env=None, endpoint=True):
        argv = [AIRLOCK, "chat"]
        if endpoint:
            argv += ["--base-url", llm.base_url, "--model", "fake-model"]
        argv += ["--output-dir", str(tmp_path / "out"), *args]
        start = time.monotonic()
        proc = subprocess.run(argv, input=input, capture_output=True, text=True,
                              timeout=timeout, cwd=tmp_path, env=env or clean_env())
        return Chat(proc, time.monotonic() - start)
    return run


# ---- the loop ---------------------------------------------------------------------------

def test_prompt_runs_the_tool_and_answers(chat, llm):
    def second(req):
        msgs = tool_messages(req)
        assert len(msgs) == 1 and "42" in msgs[0]["content"]
        call = req["messages"][-2]
        assert call["role"] == "assistant"
        assert msgs[0]["tool_call_id"] == call["tool_calls"][0]["id"]
        return answer("The answer is 42")

    llm.add(tool_call("run_python", {"code": "print(6*7)"}), second)
    r = chat("What is 6 times 7?")
    llm.check()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "The answer is 42"
    first = llm.requests[0]
    assert first["model"] == "fake-model"
    assert {t["function"]["name"] for t in first["tools"]} == TOOL_NAMES
    assert all(t["type"] == "function" and "parameters" in t["function"]
               for t in first["tools"])
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": "What is 6 times 7?"}
    assert "run_python" in r.stderr  # progress line


def test_no_tool_call_means_no_sandbox(chat, llm, tmp_path):
    llm.add(answer("Hello!"))
    r = chat("say hello")
    llm.check()
    assert r.returncode == 0 and r.stdout.strip() == "Hello!"
    assert not (tmp_path / "out").exists()


def test_endpoint_from_the_environment_and_key_never_shown(chat, llm):
    key = "sk-test-secret-0123456789"
    llm.api_key = key
    llm.add(answer("ok"))
    r = chat("hi", endpoint=False, env=clean_env(AIRLOCK_LLM_BASE_URL=llm.base_url,
                                                 AIRLOCK_LLM_MODEL="env-model",
                                                 AIRLOCK_LLM_API_KEY=key))
    llm.check()
    assert r.returncode == 0, r.stderr
    assert llm.requests[0]["model"] == "env-model"
    assert llm.headers[0]["authorization"] == f"Bearer {key}"
    assert key not in r.stdout + r.stderr

    # A wrong key: the provider's message, HTTP status 5, and still no key printed.
    llm.add(answer("never"))
    r = chat("hi", "--api-key", "sk-wrong-key-42")
    assert r.returncode == 5
    assert "HTTP 401" in r.stderr and "Incorrect API key provided" in r.stderr
    assert "sk-wrong-key-42" not in r.stdout + r.stderr


def test_missing_configuration_is_a_usage_error(chat):
    r = chat("hi", endpoint=False)
    assert r.returncode == 2
    assert "AIRLOCK_LLM_BASE_URL" in r.stderr


def test_conversation_reads_lines_from_stdin(chat, llm):
    def second(req):
        contents = [m.get("content") for m in req["messages"]]
        assert contents[-3:] == ["first question", "one", "second question"]
        return answer("two")

    llm.add(answer("one"), second)
    r = chat(input="first question\n\nsecond question\n")
    llm.check()
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["one", "two"]


def test_session_is_reused_across_tool_calls_and_messages(chat, llm):
    def check_42(req):
        assert "42" in last_tool(req), last_tool(req)
        return answer("x + 1 is 42")

    llm.add(tool_call("run_python", {"code": "x = 41"}),
            answer("x is set"),
            tool_call("run_python", {"code": "x + 1"}),
            check_42)
    r = chat(input="set x\nadd one\n")
    llm.check()
    assert r.returncode == 0, r.stderr
    assert "x + 1 is 42" in r.stdout
    # The second message's request carries the first one's tool call and result.
    assert len(tool_messages(llm.requests[2])) == 1


def test_two_calls_in_one_answer_share_the_session(chat, llm):
    def check(req):
        msgs = tool_messages(req)
        assert len(msgs) == 2 and "42" in msgs[1]["content"]
        return answer("42")

    llm.add(tool_calls(("run_python", {"code": "y = 41"}), ("run_python", {"code": "y + 1"})),
            check)
    r = chat("go")
    llm.check()
    assert r.returncode == 0 and r.stdout.strip() == "42"


def test_files_made_by_the_code_are_saved_and_named(chat, llm, tmp_path):
    code = ("open('report.txt', 'w').write('hello from the sandbox')\n"
            "import os; os.makedirs('sub', exist_ok=True)\n"
            "open('sub/data.csv', 'w').write('a,b\\n1,2\\n')")

    def check(req):
        text = last_tool(req)
        assert "report.txt" in text
        return tool_call("run_python", {"code": "open('report.txt', 'a').write('!')"})

    llm.add(tool_call("run_python", {"code": code}), check,
            answer("I wrote report.txt and sub/data.csv"))
    r = chat("write a report")
    llm.check()
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    assert (out / "report.txt").read_text() == "hello from the sandbox!"  # saved again
    assert (out / "sub" / "data.csv").read_text() == "a,b\n1,2\n"
    saved = [line for line in r.stdout.splitlines() if line.startswith("saved: ")]
    assert sorted(saved) == sorted([f"saved: {out}/report.txt", f"saved: {out}/sub/data.csv"])


def test_plot_is_saved_as_an_image_and_summarised_for_the_model(chat, llm, tmp_path):
    code = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [1, 4, 9])")

    def check(req):
        text = last_tool(req)
        assert "image" in text and "figure-1.png" in text, text
        return answer("Here is the plot: figure-1.png")

    llm.add(tool_call("run_python", {"code": code}), check)
    r = chat("plot squares")
    llm.check()
    assert r.returncode == 0, r.stderr
    png = tmp_path / "out" / "figure-1.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"saved: {png}" in r.stdout


# ---- malformed tool calls: the model is told and the loop goes on -----------------------

def test_malformed_tool_calls_are_told_to_the_model(chat, llm):
    def after_bad(req):
        msgs = tool_messages(req)
        assert len(msgs) == 2
        assert "no tool named 'no_such_tool'" in msgs[0]["content"]
        assert "run_python" in msgs[0]["content"]  # the list of tools that exist
        assert "not valid JSON" in msgs[1]["content"]
        return tool_call("run_python", {"cod": "print(1)"})

    def after_missing(req):
        text = last_tool(req)
        assert "code" in text, text
        return answer("I give up")

    llm.add(tool_calls(("no_such_tool", {}), ("run_python", "{not json")), after_bad,
            after_missing)
    r = chat("try")
    llm.check()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "I give up"


# ---- endpoint failures -------------------------------------------------------------------

def test_http_error_shows_the_providers_message(chat, llm):
    llm.add(error(500, "the model is overloaded, try later"))
    r = chat("hi")
    assert r.returncode == 5
    assert "HTTP 500" in r.stderr and "the model is overloaded, try later" in r.stderr

    llm.add(error(404, "The model `nope` does not exist", "invalid_request_error"))
    r = chat("hi")
    assert r.returncode == 5 and "does not exist" in r.stderr


def test_connection_refused(chat):
    port = free_port()
    r = chat("hi", "--base-url", f"http://127.0.0.1:{port}/v1", endpoint=False,
             env=clean_env(AIRLOCK_LLM_MODEL="m"))
    assert r.returncode == 4
    assert "cannot reach" in r.stderr and str(port) in r.stderr


def test_timeout(chat, llm):
    llm.add(slow(6, answer("too late")))
    r = chat("hi", "--timeout", "1")
    assert r.returncode == 6
    assert "did not answer within 1 s" in r.stderr
    assert r.elapsed < 5


def test_answer_without_choices_or_not_json(chat, llm):
    llm.add(raw(200, '{"id": "x", "object": "chat.completion"}'))
    r = chat("hi")
    assert r.returncode == 7 and "no choices" in r.stderr

    llm.add(raw(200, "<html>gateway</html>", "text/html"))
    r = chat("hi")
    assert r.returncode == 7 and "not JSON" in r.stderr


def test_round_cap(chat, llm):
    llm.add(*[tool_call("run_python", {"code": f"{i}"}) for i in range(3)])
    r = chat("loop forever", "--max-rounds", "2")
    llm.check()
    assert r.returncode == 3
    assert "stopped after 2 tool rounds" in r.stderr
    assert len(llm.requests) == 3


# ---- approvals ---------------------------------------------------------------------------

def run_in_pty(argv, reply, env, cwd, timeout=60):
    """Runs argv with a new pseudo-terminal as its controlling terminal; answers `reply` to
    the first "[y/N]". Returns (exit status, everything shown on the terminal)."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    shown, answered = b"", False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            shown += data
            if not answered and b"[y/N]" in shown:
                os.write(fd, reply.encode() + b"\n")
                answered = True
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode("utf-8", "replace")


@pytest.mark.parametrize("reply,runs", [("n", False), ("y", True)])
def test_approve_asks_on_the_terminal(llm, tmp_path, reply, runs):
    def check(req):
        text = last_tool(req)
        if runs:
            assert "ran-it" in text, text
        else:
            assert text == "the user declined to run this code"
        return answer("done")

    llm.add(tool_call("run_python", {"code": "print('ran-it')  # \x1b[2J"}), check)
    argv = [AIRLOCK, "chat", "--base-url", llm.base_url, "--model", "m", "--approve",
            "--output-dir", str(tmp_path / "out"), "run something"]
    status, shown = run_in_pty(argv, reply, clean_env(), tmp_path)
    llm.check()
    assert status == 0, shown
    assert "print('ran-it')" in shown          # the code was shown...
    assert "\x1b[2J" not in shown and "^[[2J" in shown  # ...with escapes neutralised
    assert "done" in shown


def test_approve_without_a_terminal_runs_nothing(chat, llm):
    def check(req):
        assert last_tool(req) == "the user declined to run this code"
        return answer("ok, not run")

    llm.add(tool_call("run_shell", {"command": "echo hi"}), check)
    argv = [AIRLOCK, "chat", "--base-url", llm.base_url, "--model", "m", "--approve", "go"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=clean_env(),
                          start_new_session=True, stdin=subprocess.DEVNULL)
    llm.check()
    assert proc.returncode == 0
    assert "no terminal" in proc.stderr


# ---- the gateway -------------------------------------------------------------------------

class Daemon:
    def __init__(self, tmp, llm_url, *flags):
        self.token = "t0ken-for-the-chat-gateway-tests"
        self.tmp = tmp
        argv = [AIRLOCK, "serve", "--listen", "127.0.0.1:0", "--state-dir", str(tmp),
                "--pool-size", "0"]
        if llm_url:
            argv += ["--llm-base-url", llm_url, "--llm-model", "fake-model"]
        argv += list(flags)
        self.log = open(tmp / "daemon.log", "w+")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=clean_env(AIRLOCK_TOKEN=self.token))
        deadline = time.monotonic() + 30
        self.url = None
        while time.monotonic() < deadline and not self.url:
            self.log.seek(0)
            m = re.search(r"listening on (http://\S+)", self.log.read())
            if m:
                self.url = m.group(1)
            elif self.proc.poll() is not None:
                break
            else:
                time.sleep(0.05)
        if not self.url:
            self.close()
            self.log.seek(0)
            raise RuntimeError("the daemon did not start:\n" + self.log.read())

    def post(self, body, token=True, headers=None, timeout=120):
        h = {"Authorization": f"Bearer {self.token}"} if token else {}
        h.update(headers or {})
        return requests.post(f"{self.url}/v1/chat/completions", json=body, headers=h,
                             timeout=timeout)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def gw_llm():
    fake = FakeLLM()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def gateway(gw_llm, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("gateway"), gw_llm.base_url, "--chat-max-rounds", "3")
    yield d
    d.close()


@pytest.fixture
def upstream(gw_llm):
    """The gateway's fake upstream, with an empty script for this test."""
    gw_llm.script.clear()
    gw_llm.requests.clear()
    gw_llm.headers.clear()
    gw_llm.failures.clear()
    return gw_llm


def user(text):
    return {"role": "user", "content": text}


def test_gateway_runs_the_tool_loop(gateway, upstream):
    def second(req):
        assert "42" in last_tool(req)
        return answer("The answer is 42")

    upstream.add(tool_call("run_python", {"code": "print(6*7)"}), second)
    r = gateway.post({"model": "gpt-test", "messages": [user("6*7?")], "temperature": 0})
    upstream.check()
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "The answer is 42"}
    assert body["choices"][0]["finish_reason"] == "stop"
    session = body["airlock"]["session"]
    assert re.fullmatch(r"s-[0-9a-f]{24}", session)
    assert r.headers["X-Airlock-Session"] == session
    calls = body["airlock"]["tool_calls"]
    assert [c["name"] for c in calls] == ["run_python"]
    assert calls[0]["arguments"] == {"code": "print(6*7)"} and "42" in calls[0]["output"]
    assert body["usage"]["total_tokens"] == 30  # both rounds added up
    first = upstream.requests[0]
    assert first["model"] == "gpt-test" and first["temperature"] == 0
    assert {t["function"]["name"] for t in first["tools"]} == TOOL_NAMES
    assert "session" not in first


def test_gateway_continues_a_session(gateway, upstream):
    upstream.add(tool_call("run_python", {"code": "x = 41"}), answer("set"))
    r1 = gateway.post({"messages": [user("set x")]})
    assert r1.status_code == 200, r1.text
    session = r1.json()["airlock"]["session"]
    assert upstream.requests[0]["model"] == "fake-model"  # the configured default

    def check(req):
        assert "42" in last_tool(req), last_tool(req)
        return answer("42")

    # With the body field...
    upstream.add(tool_call("run_python", {"code": "x + 1"}), check)
    r2 = gateway.post({"messages": [user("set x"), {"role": "assistant", "content": "set"},
                                    user("x + 1?")], "session": session})
    assert r2.status_code == 200, r2.text
    assert r2.json()["airlock"]["session"] == session
    # ...and with the header.
    upstream.add(tool_call("run_python", {"code": "x + 1"}), check)
    r3 = gateway.post({"messages": [user("again")]}, headers={"X-Airlock-Session": session})
    assert r3.status_code == 200, r3.text
    assert r3.headers["X-Airlock-Session"] == session
    upstream.check()

    r = gateway.post({"messages": [user("hi")], "session": "s-000000000000000000000000"})
    assert r.status_code == 404


def test_gateway_requires_the_token(gateway, upstream):
    r = gateway.post({"messages": [user("hi")]}, token=False)
    assert r.status_code == 401
    r = gateway.post({"messages": [user("hi")]}, token=False,
                     headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    assert upstream.requests == []


def test_gateway_bad_requests(gateway, upstream):
    assert gateway.post({"messages": []}).status_code == 400
    # Legacy function calling stays refused (the client's own "tools" pass through, see
    # test_chat_client_tools.py).
    for member in ("functions", "function_call"):
        r = gateway.post({"messages": [user("hi")], member: []})
        assert r.status_code == 400 and r.json()["error"]["param"] == member
        assert "'tools'" in r.json()["error"]["message"]
    assert upstream.requests == []


def test_gateway_upstream_failures(gateway, upstream):
    upstream.add(error(500, "upstream exploded"))
    r = gateway.post({"messages": [user("hi")]})
    assert r.status_code == 502
    assert "upstream exploded" in r.json()["error"]["message"]

    upstream.add(error(400, "context too long", "invalid_request_error"))
    r = gateway.post({"messages": [user("hi")]})
    assert r.status_code == 400 and "context too long" in r.json()["error"]["message"]

    upstream.add(raw(200, '{"object": "chat.completion"}'))
    r = gateway.post({"messages": [user("hi")]})
    assert r.status_code == 502 and "no choices" in r.json()["error"]["message"]


def test_gateway_round_cap(gateway, upstream):
    upstream.add(*[tool_call("run_python", {"code": "1"}) for _ in range(4)])
    r = gateway.post({"messages": [user("loop")]})
    upstream.check()
    assert r.status_code == 200
    body = r.json()
    assert body["airlock"]["stopped"] == "max_rounds" and body["airlock"]["rounds"] == 3
    assert body["choices"][0]["finish_reason"] == "length"


def test_gateway_streams_when_asked(gateway, upstream):
    upstream.add(answer("streamed answer"))
    r = gateway.post({"messages": [user("hi")], "stream": True})
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/event-stream")
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["content"] == "streamed answer"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert upstream.requests[0].get("stream") is None


def test_gateway_approval_returns_the_code(gw_llm, upstream, tmp_path):
    d = Daemon(tmp_path, gw_llm.base_url, "--chat-require-approval")
    try:
        upstream.add(tool_call("run_python", {"code": "open('/work/ran', 'w')"}))
        r = d.post({"messages": [user("do it")]})
        upstream.check()
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["airlock"]["stopped"] == "approval_required"
        # The Responses API's mcp_approval_request: arguments as JSON text.
        pending = body["airlock"]["pending"][0]
        assert pending["type"] == "mcp_approval_request" and pending["name"] == "run_python"
        assert json.loads(pending["arguments"]) == {"code": "open('/work/ran', 'w')"}
        assert "```python\nopen('/work/ran', 'w')\n```" in body["choices"][0]["message"]["content"]
        assert body["airlock"]["tool_calls"] == [] and body["airlock"]["session"] is None
    finally:
        d.close()


def test_gateway_request_does_not_hold_up_shutdown(gw_llm, upstream, tmp_path):
    import threading
    d = Daemon(tmp_path, gw_llm.base_url)
    result = {}
    try:
        upstream.add(slow(60, answer("too late")))
        t = threading.Thread(target=lambda: result.update(r=d.post({"messages": [user("hi")]})))
        t.start()
        deadline = time.monotonic() + 10
        while not upstream.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        start = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(timeout=30) == 0
        assert time.monotonic() - start < 10
        t.join(timeout=30)
        assert result["r"].status_code == 503
        assert "shutting down" in result["r"].json()["error"]["message"]
    finally:
        d.close()


def test_gateway_not_configured(tmp_path):
    d = Daemon(tmp_path, None)
    try:
        r = d.post({"messages": [user("hi")]})
        assert r.status_code == 503
        assert "--llm-base-url" in r.json()["error"]["message"]
    finally:
        d.close()


def test_chat_runs_code_in_a_daemon_with_url(gateway, llm, tmp_path):
    def check(req):
        assert "42" in last_tool(req)
        return answer("42, computed by the daemon")

    def sessions():
        r = requests.get(f"{gateway.url}/v1/sessions",
                         headers={"Authorization": f"Bearer {gateway.token}"}, timeout=30)
        return {s["id"] for s in r.json()["sessions"]}

    before = sessions()
    llm.add(tool_call("run_python", {"code": "open('d.txt', 'w').write('x'); 6 * 7"}), check)
    proc = subprocess.run([AIRLOCK, "chat", "--url", gateway.url, "--base-url", llm.base_url,
                           "--model", "m", "--output-dir", str(tmp_path / "out"), "go"],
                          capture_output=True, text=True, timeout=120,
                          env=clean_env(AIRLOCK_TOKEN=gateway.token))
    llm.check()
    assert proc.returncode == 0, proc.stderr
    assert "42, computed by the daemon" in proc.stdout
    assert (tmp_path / "out" / "d.txt").read_text() == "x"
    assert sessions() == before  # the conversation's session ended with it
