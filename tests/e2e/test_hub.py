"""Internal tools end to end (issue 9): one daemon started with --mcp-config on MCP servers of
every kind (the fault fixture over stdio, over streamable HTTP answering JSON and answering
event streams, and the npm reference servers everything and memory). Checked: what GET
/v1/tools, /mcp, the chat gateway and `airlock tools` show of them; that calls reach them and
come back whole (content, structuredContent, images, errors), cut or refused where the config
says; that the servers' environment holds nothing of the daemon's; and that an HTTP server
restarted under the hub is reconnected. The faults of servers that die, hang or crash are in
test_hub_faults.py."""
import base64
import json
import re
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import requests

from airlock_daemon import free_port
from fake_llm import FakeLLM, answer, last_tool, tool_call
from hub_helpers import (EVERYTHING, FIXTURE, MEMORY, OWN_TOOLS, alive, daemon_env, fixture,
                         kill_by_pid, node, npm_servers_missing, run_cli, serve_hub, serve_mcp,
                         state_lines, text_of, write_config)
from mcp_client import PYTHON

FIXTURE_TOOLS = ["echo", "add", "slow", "crash", "big", "fail", "rpc_error", "image",
                 "structured", "strict", "needs_env", "pid"]
SECRET = "fixture-secret-from-the-config"
LLM_KEY = "sk-hub-test-llm-key-never-shown-0123456789"
TOKEN = "hub-test-token-0123456789abcdef"
WEB_HEADER = ("X-Airlock-Test", "web-secret-4c1f")
MAIN_TIMEOUT_MS = 1000
MAIN_MAX_RESULT = 3000
NPM_MISSING = npm_servers_missing()
needs_npm = pytest.mark.skipif(NPM_MISSING is not None, reason=str(NPM_MISSING))


class WebFixture:
    """The fixture over streamable HTTP on a fixed loopback port, so that it can be stopped
    and started again at the same URL. Stopped by its pid."""

    def __init__(self, *flags, port=None):
        self.flags = flags
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = None
        self.err = None

    def start(self, timeout=15):
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([PYTHON, FIXTURE, *self.flags, "--http",
                                      f"127.0.0.1:{self.port}"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self.err)
        line = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if not line or b"listening on" not in line[0]:
            self.stop()
            raise RuntimeError(f"the HTTP fixture did not start: {self.stderr()}")
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            kill_by_pid(self.proc.pid, 15)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                kill_by_pid(self.proc.pid)
                self.proc.wait(5)
        self.proc.stdout.close()
        self.err.close()
        self.proc = None


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("hub")


@pytest.fixture(scope="module")
def web(work):
    with WebFixture("--require-header", f"{WEB_HEADER[0]}: {WEB_HEADER[1]}",
                    "--tools-changed-after", "1", "--state-file", str(work / "web.state")) as w:
        yield w


@pytest.fixture(scope="module")
def websse():
    with WebFixture("--sse", "--tools-changed-after", "1") as w:
        yield w


@pytest.fixture(scope="module")
def llm():
    fake = FakeLLM(api_key=LLM_KEY)
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def servers(work, web, websse):
    s = {
        "main": fixture("--state-file", str(work / "main.state"), env={"FIXTURE_SECRET": SECRET},
                        timeout_ms=MAIN_TIMEOUT_MS, max_result_bytes=MAIN_MAX_RESULT,
                        require_approval="never"),
        "paged": fixture("--page-size", "2", "--name-clash", "--tools-changed-after", "1",
                         "--state-file", str(work / "paged.state"),
                         allowed_tools=["echo", "run_python", "late_tool"],
                         require_approval="always"),
        "web": {"url": web.url, "headers": {WEB_HEADER[0]: WEB_HEADER[1]},
                "allowed_tools": ["pid", "add", "echo"], "timeout_ms": 5000,
                "require_approval": {"never": {"tool_names": ["pid"]}}},
        "web_nokey": {"type": "http", "url": web.url},
        "websse": {"url": websse.url, "allowed_tools": ["echo", "structured", "late_tool"]},
    }
    if NPM_MISSING is None:
        s["everything"] = {"command": node(), "args": [str(EVERYTHING), "stdio"],
                           "env": {"PASSED_FROM_CONFIG": "yes"},
                           "allowed_tools": ["echo", "get-sum", "get-structured-content",
                                             "get-tiny-image", "get-env"]}
        s["memory"] = {"command": node(), "args": [str(MEMORY)],
                       "env": {"MEMORY_FILE_PATH": str(work / "memory.jsonl")}}
    return s


@pytest.fixture(scope="module")
def hub(work, servers, llm):
    config = write_config(work / "mcp.json", servers)
    # The daemon holds an LLM key and a token; no server may see either.
    env = daemon_env(AIRLOCK_LLM_API_KEY=LLM_KEY, OPENAI_API_KEY=LLM_KEY)
    states = {name: "ready" for name in servers}
    states["web_nokey"] = "unavailable"
    yield from serve_hub(pytest, config, states, env=env, token_env=TOKEN,
                         args=["--llm-base-url", llm.base_url, "--llm-model", "fake-model"])


@pytest.fixture(scope="module")
def mcp(hub):
    yield from serve_mcp(hub)


@pytest.fixture
def upstream(llm):
    llm.script.clear()
    llm.requests.clear()
    llm.failures.clear()
    return llm


def call(mcp, name, args=None, timeout=30):
    return mcp.call(name, args or {}, timeout=timeout)


# ---- listing ------------------------------------------------------------------------------

def test_servers_are_listed_with_state_reason_and_pid(hub, servers):
    listed = hub.listing()["servers"]
    assert [s["name"] for s in listed] == list(servers), "config order"
    by = {s["name"]: s for s in listed}
    main = by["main"]
    assert (main["transport"], main["state"], main["tools"], main["restarts"]) == \
        ("stdio", "ready", len(FIXTURE_TOOLS), 0)
    assert "reason" not in main
    with open(f"/proc/{main['pid']}/cmdline", "rb") as f:
        assert FIXTURE.encode() in f.read(), "pid is the fixture's process"
    with open(f"/proc/{main['pid']}/stat") as f:
        assert int(f.read().rsplit(")", 1)[1].split()[1]) == hub.d.proc.pid, \
            "the daemon started it"
    assert by["web"]["transport"] == "http" and by["web"]["state"] == "ready"
    assert "pid" not in by["web"]
    nokey = by["web_nokey"]
    assert nokey["state"] == "unavailable" and nokey["tools"] == 0
    assert "HTTP 401" in nokey["reason"] and "retrying in" in nokey["reason"], nokey


def test_internal_tools_carry_server_schema_and_policy(hub):
    listing = hub.listing()
    main = hub.tools_of("main", listing)
    assert sorted(main) == sorted(FIXTURE_TOOLS)
    for t in main.values():
        assert t["server"] == "main" and t["available"] is True and "reason" not in t
        assert t["require_approval"] == "never"
        assert isinstance(t["description"], str) and t["inputSchema"]["type"] == "object"
    add = main["add"]
    assert add["inputSchema"]["required"] == ["a", "b"]
    assert add["outputSchema"]["required"] == ["sum"]
    assert main["echo"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert [t["name"] for t in listing["tools"][:len(OWN_TOOLS)]] == OWN_TOOLS
    names = [t["name"] for t in listing["internal"]]
    assert len(names) == len(set(names)), "exposed names are unique"
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in names)


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_internal_tools_in_every_format(hub, fmt):
    name = hub.name_of("main", "add")
    listing = hub.listing(fmt)
    assert {"tools", "internal", "servers"} <= set(listing)
    if fmt == "openai":
        decl = {t["function"]["name"]: t["function"] for t in listing["tools"]}
        assert all(t["type"] == "function" for t in listing["tools"])
        schema_key = "parameters"
    elif fmt == "anthropic":
        decl = {t["name"]: t for t in listing["tools"]}
        schema_key = "input_schema"
    else:
        decl = {t["name"]: t for t in listing["tools"]}
        schema_key = "inputSchema"
        assert decl[name]["outputSchema"]["required"] == ["sum"]
    assert set(OWN_TOOLS) <= set(decl)
    assert decl[name][schema_key]["required"] == ["a", "b"]
    assert decl[name]["description"].startswith("Add two numbers")
    assert "(internal tool of 'main')" in decl[name]["description"]
    assert {t["name"] for t in listing["internal"]} <= set(decl)


def test_unknown_format_is_refused(hub):
    r = hub.d.get("/v1/tools?format=gemini")
    assert r.status_code == 400 and "format" in r.json()["error"], r.text


def test_allowed_tools_and_pagination(hub, work):
    paged = hub.tools_of("paged")
    # 13 tools in pages of 2: run_python comes on the 7th page, after the ones left out.
    assert set(paged) - {"late_tool"} == {"echo", "run_python"}
    assert set(hub.tools_of("web")) == {"pid", "add", "echo"}
    assert state_lines(work / "paged.state").count("tools/list") >= 7


def test_name_clash_prefixes_with_the_server(hub, mcp, work):
    names = {(t["server"], t["tool"]): t["name"] for t in hub.listing()["internal"]}
    assert names[("main", "echo")] == "main__echo"
    assert names[("paged", "echo")] == "paged__echo"
    assert names[("web", "echo")] == "web__echo"
    assert names[("paged", "run_python")] == "paged__run_python"
    assert names[("main", "needs_env")] == "needs_env", "no clash, no prefix"
    assert "echo" not in names.values() and "run_python" not in names.values()

    r = call(mcp, "paged__run_python", {"code": "print(1)"})
    assert text_of(r).startswith("fixture run_python, not airlock's"), r
    assert call(mcp, "main__echo", {"text": "from main"})["content"] == \
        [{"type": "text", "text": "from main"}]
    assert "tools/call run_python" in state_lines(work / "paged.state")
    assert "tools/call echo" in state_lines(work / "main.state")
    own = {t["name"]: t for t in mcp.list_tools()}["run_python"]
    assert "fixture" not in own["description"], "run_python is still airlock's own"


def test_require_approval_per_server_and_tool(hub):
    listing = hub.listing()
    assert {t["require_approval"] for t in hub.tools_of("paged", listing).values()} == \
        {"always"}
    web = hub.tools_of("web", listing)
    assert {k: t["require_approval"] for k, t in web.items()} == \
        {"pid": "never", "add": "always", "echo": "always"}


def test_list_changed_refreshes_the_tools_over_stdio(hub, mcp, work):
    call(mcp, hub.name_of("paged", "echo"), {"text": "one call"})
    hub.wait(lambda ls: any(t["server"] == "paged" and t["tool"] == "late_tool"
                            for t in ls["internal"]), "late_tool of paged", timeout=15)
    r = call(mcp, hub.name_of("paged", "late_tool"))
    assert text_of(r) == "late_tool answers" and r["isError"] is False
    # Listed twice, 7 pages each time: at the start, and after list_changed.
    assert state_lines(work / "paged.state").count("tools/list") >= 14
    assert hub.server("paged")["restarts"] == 0, "refreshed without a restart"


def test_list_changed_on_an_event_stream_answer(hub, mcp):
    r = call(mcp, hub.name_of("websse", "echo"), {"text": "over sse"})
    assert r["content"] == [{"type": "text", "text": "over sse"}]
    hub.wait(lambda ls: any(t["server"] == "websse" and t["tool"] == "late_tool"
                            for t in ls["internal"]), "late_tool of websse", timeout=15)
    assert text_of(call(mcp, hub.name_of("websse", "late_tool"))) == "late_tool answers"
    sc = call(mcp, hub.name_of("websse", "structured"))["structuredContent"]
    assert sc["user"]["address"] == {"city": "Lyon", "zip": "69001"}


def test_list_changed_on_the_notification_stream(hub, mcp, work):
    """The fixture answering JSON says list_changed on the session's GET stream; the hub lists
    again, and allowed_tools still holds for the tool that came."""
    call(mcp, hub.name_of("web", "echo"), {"text": "one call"})
    deadline = time.monotonic() + 15
    while True:
        lines = state_lines(work / "web.state")
        first_call = next(i for i, line in enumerate(lines) if line.startswith("tools/call"))
        if "tools/list" in lines[first_call:]:
            break
        assert time.monotonic() < deadline, f"web was not listed again: {lines}"
        time.sleep(0.1)
    assert set(hub.tools_of("web")) == {"pid", "add", "echo"}, "late_tool is not allowed"


# ---- calls through /mcp -------------------------------------------------------------------

def test_mcp_lists_internal_tools(hub, mcp):
    tools = {t["name"]: t for t in mcp.list_tools()}
    add = tools[hub.name_of("main", "add")]
    assert add["inputSchema"]["required"] == ["a", "b"]
    assert add["outputSchema"]["required"] == ["sum"]
    assert tools[hub.name_of("main", "echo")]["annotations"]["readOnlyHint"] is True
    assert set(OWN_TOOLS) <= set(tools)


def test_call_returns_content_and_structured_content(hub, mcp):
    r = call(mcp, hub.name_of("main", "add"), {"a": 2, "b": 3.5})
    assert r["isError"] is False
    assert r["structuredContent"] == {"sum": 5.5}
    assert r["content"] == [{"type": "text", "text": '{"sum":5.5}'}]
    r = call(mcp, hub.name_of("main", "structured"))
    assert r["structuredContent"]["user"] == {"id": "u1", "name": "Ada",
                                              "tags": ["admin", "beta"],
                                              "address": {"city": "Lyon", "zip": "69001"}}
    assert r["structuredContent"]["scores"] == [1.5, 2, -3]
    assert json.loads(text_of(r)) == r["structuredContent"]
    r = call(mcp, hub.name_of("web", "add"), {"a": 1, "b": 1})
    assert r["structuredContent"] == {"sum": 2}, "over HTTP too"


def test_image_content(hub, mcp):
    r = call(mcp, hub.name_of("main", "image"))
    images = [c for c in r["content"] if c["type"] == "image"]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png", r
    assert base64.b64decode(images[0]["data"]).startswith(b"\x89PNG\r\n\x1a\n")


def test_tool_errors_and_json_rpc_errors(hub, mcp):
    r = call(mcp, hub.name_of("main", "fail"), {"message": "out of stock"})
    assert r["isError"] is True and text_of(r) == "out of stock"
    r = call(mcp, hub.name_of("main", "rpc_error"))
    assert r["isError"] is True
    assert "boom" in text_of(r) and "-32000" in text_of(r), r
    assert hub.server("main")["state"] == "ready", "an error is not a broken server"
    assert text_of(call(mcp, hub.name_of("main", "echo"), {"text": "still here"})) == \
        "still here"


def test_slow_tool_times_out_and_is_cancelled(hub, mcp, work):
    t0 = time.monotonic()
    r = call(mcp, hub.name_of("main", "slow"), {"seconds": 30})
    took = time.monotonic() - t0
    assert r["isError"] is True
    assert f"did not answer within {MAIN_TIMEOUT_MS / 1000:.1f} s" in text_of(r), r
    assert took < 5, f"the timeout is {MAIN_TIMEOUT_MS} ms, the call took {took:.1f} s"
    deadline = time.monotonic() + 5
    while "notifications/cancelled" not in state_lines(work / "main.state"):
        assert time.monotonic() < deadline, "the server was not told the call is cancelled"
        time.sleep(0.05)
    lines = state_lines(work / "main.state")
    assert lines.index("tools/call slow") < len(lines) - 1 - \
        lines[::-1].index("notifications/cancelled")
    assert hub.server("main")["state"] == "ready"
    assert text_of(call(mcp, hub.name_of("main", "echo"), {"text": "after"})) == "after"


def test_calls_run_side_by_side(hub, mcp):
    """The stdio server gets every call at once (ids tell the answers apart), so a slow call
    does not hold the others."""
    slow, echo = hub.name_of("main", "slow"), hub.name_of("main", "echo")
    t0 = time.monotonic()
    slow_ids = [mcp.start("tools/call", {"name": slow, "arguments": {"seconds": 0.5}})
                for _ in range(6)]
    echo_ids = [mcp.start("tools/call", {"name": echo, "arguments": {"text": f"n{i}"}})
                for i in range(10)]
    assert [text_of(mcp.wait_response(i, 30)) for i in echo_ids] == \
        [f"n{i}" for i in range(10)]
    assert [text_of(mcp.wait_response(i, 30)) for i in slow_ids] == ["slept 0.5 s"] * 6
    took = time.monotonic() - t0
    assert took < 2.5, f"6 calls of 0.5 s took {took:.1f} s: not side by side"


def test_results_over_max_result_bytes_are_cut(hub, mcp):
    r = call(mcp, hub.name_of("main", "big"), {"bytes": 10000})
    text = text_of(r)
    assert "was 10000 bytes, over this server's limit of 3000 (max_result_bytes): it was cut" \
        in text, text[-300:]
    assert len(text.encode()) < MAIN_MAX_RESULT + 300
    r = call(mcp, hub.name_of("main", "big"), {"bytes": 2000})
    assert len(text_of(r)) == 2000 and "cut" not in text_of(r)


@pytest.mark.parametrize("args, needle", [
    ({"n": 11, "mode": "a"}, "'n'"),
    ({"n": 1, "mode": "c"}, "'mode'"),
    ({"n": 1}, "mode"),
    ({"n": "1", "mode": "a"}, "'n'"),
    ({"n": 1, "mode": "a", "tags": [1]}, "tags"),
    ({"n": 1, "mode": "a", "extra": True}, "extra"),
])
def test_arguments_failing_the_schema_never_reach_the_server(hub, mcp, work, args, needle):
    before = state_lines(work / "main.state").count("tools/call strict")
    r = call(mcp, hub.name_of("main", "strict"), args)
    assert r["isError"] is True and needle in text_of(r), r
    assert state_lines(work / "main.state").count("tools/call strict") == before


def test_arguments_passing_the_schema_reach_the_server(hub, mcp, work):
    before = state_lines(work / "main.state").count("tools/call strict")
    args = {"n": 3, "mode": "b", "tags": ["x"]}
    r = call(mcp, hub.name_of("main", "strict"), args)
    assert r["isError"] is False and r["structuredContent"] == args
    assert state_lines(work / "main.state").count("tools/call strict") == before + 1


# ---- the chat gateway and the CLI -----------------------------------------------------------

def test_gateway_offers_and_routes_internal_tools(hub, upstream, work):
    name = hub.name_of("main", "add")
    schema = hub.tools_of("main")["add"]["inputSchema"]

    def first(req):
        tools = {t["function"]["name"]: t["function"] for t in req["tools"]}
        assert set(OWN_TOOLS) <= set(tools), sorted(tools)
        assert tools[name]["parameters"] == schema
        assert "(internal tool of 'main')" in tools[name]["description"]
        assert hub.name_of("paged", "echo") in tools
        return tool_call(name, {"a": 2, "b": 40})

    def second(req):
        assert json.loads(last_tool(req)) == {"sum": 42}, last_tool(req)
        return answer("The sum is 42.")

    upstream.add(first, second)
    r = hub.d.post("/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": "2 + 40?"}]}, timeout=60)
    upstream.check()
    assert r.status_code == 200, hub.d.why(r)
    body = r.json()
    assert body["choices"][0]["message"]["content"] == "The sum is 42."
    assert [c["name"] for c in body["airlock"]["tool_calls"]] == [name]
    assert state_lines(work / "main.state").count("tools/call add") >= 1


def _table_row(stdout, first):
    for line in stdout.splitlines():
        cols = line.split(None, 2)
        if cols and cols[0] == first:
            return cols
    raise AssertionError(f"no row {first!r} in:\n{stdout}")


def test_cli_tools_against_the_daemon(hub):
    env = daemon_env(AIRLOCK_TOKEN=TOKEN)
    p = run_cli("tools", "--url", hub.d.url, env=env)
    assert p.returncode == 0, p.stderr
    assert _table_row(p.stdout, "run_python")[1:] == ["airlock", "ready"]
    assert _table_row(p.stdout, hub.name_of("main", "add"))[1:] == ["main", "ready"]
    assert _table_row(p.stdout, "paged__echo")[1:] == ["paged", "ready, needs approval"]
    nokey = _table_row(p.stdout, "web_nokey")
    assert nokey[1] == "http" and nokey[2].startswith("unavailable") and "401" in nokey[2]

    p = run_cli("tools", "--json", "--url", hub.d.url, env=env)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert {t["name"] for t in got["internal"]} == {t["name"] for t in hub.listing()["internal"]}
    assert {s["name"]: s["state"] for s in got["servers"]}["main"] == "ready"


def test_cli_tools_with_a_config(tmp_path):
    good = write_config(tmp_path / "good.json",
                        {"one": fixture(allowed_tools=["echo", "add"])})
    p = run_cli("tools", "--json", "--mcp-config", good)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert {t["name"] for t in got["internal"]} == {"echo", "add"}
    one = got["servers"][0]
    assert (one["name"], one["state"], one["tools"]) == ("one", "ready", 2)
    assert not alive(one["pid"]), "airlock tools stops the servers it started"

    mixed = write_config(tmp_path / "mixed.json",
                         {"one": fixture(allowed_tools=["echo"]),
                          "gone": {"command": "/nonexistent/airlock-hub-test"}})
    p = run_cli("tools", "--mcp-config", mixed)
    assert p.returncode == 1, "a server that is not available is exit status 1"
    assert _table_row(p.stdout, "echo")[1:] == ["one", "ready"]
    gone = _table_row(p.stdout, "gone")
    assert gone[1] == "stdio" and "cannot run /nonexistent/airlock-hub-test" in gone[2]


def test_cli_tools_survives_a_server_that_exits_after_initialize(tmp_path):
    """The write that follows finds the server's stdin closed: an EPIPE to report, not a
    SIGPIPE that ends `airlock tools` without a word (exit status 141)."""
    answers_then_closes = (
        "import json, os, sys\n"
        "m = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {\n"
        "    'protocolVersion': '2025-06-18', 'capabilities': {'tools': {}},\n"
        "    'serverInfo': {'name': 'bye', 'version': '1'}}}), flush=True)\n"
        "os.close(0)\n"
        "os._exit(0)\n")
    config = write_config(tmp_path / "mcp.json",
                          {"one": fixture(allowed_tools=["echo"]),
                           "bye": {"command": sys.executable,
                                   "args": ["-c", answers_then_closes]}})
    p = run_cli("tools", "--mcp-config", config)
    assert p.returncode == 1, f"status {p.returncode}: {p.stderr}"
    assert _table_row(p.stdout, "echo")[1:] == ["one", "ready"]
    assert _table_row(p.stdout, "bye")[2].startswith("unavailable"), p.stdout
    # The reason is given: the failed write, or the exit, whichever the hub noticed first
    # (the server exits right after its answer, so on a busy machine either can come first).
    assert ("notifications/initialized failed" in p.stdout
            or "the server exited with status 0" in p.stdout), p.stdout


# ---- security -------------------------------------------------------------------------------

def test_stdio_server_environment_holds_nothing_of_the_daemons(hub, mcp):
    r = call(mcp, hub.name_of("main", "needs_env"))
    assert r["structuredContent"] == {"fixture_secret": SECRET, "llm_api_key_visible": False,
                                      "airlock_vars": []}
    with open(f"/proc/{hub.server('main')['pid']}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    assert env[b"FIXTURE_SECRET"] == SECRET.encode()
    assert not [k for k in env if k.startswith(b"AIRLOCK_")]
    assert not [k for k, v in env.items() if LLM_KEY.encode() in v or TOKEN.encode() in v]


@needs_npm
def test_everything_server_environment(hub, mcp):
    r = call(mcp, hub.name_of("everything", "get-env"))
    env = json.loads(text_of(r))
    assert env["PASSED_FROM_CONFIG"] == "yes"
    assert not [k for k in env if k.startswith("AIRLOCK_")], sorted(env)
    assert "OPENAI_API_KEY" not in env and LLM_KEY not in text_of(r) and TOKEN not in text_of(r)


# ---- streamable HTTP ----------------------------------------------------------------------

def test_config_headers_reach_the_http_server(hub, mcp, web, work):
    r = call(mcp, hub.name_of("web", "pid"))
    assert r["structuredContent"] == {"pid": web.proc.pid}
    assert "tools/call pid" in state_lines(work / "web.state")
    # The fixture does refuse a request without the header (what web_nokey is told).
    s = requests.Session()
    s.trust_env = False
    refused = s.post(web.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                     headers={"Accept": "application/json, text/event-stream"}, timeout=10)
    assert refused.status_code == 401
    assert hub.server("web_nokey")["state"] == "unavailable"


def test_http_server_restarted_on_the_same_port_is_reconnected(hub, mcp, web):
    before = hub.server("web")
    assert before["state"] == "ready"
    old_pid = web.proc.pid
    web.stop()
    web.start()
    # No call is made: the hub notices on its own (its notification stream) and reconnects.
    hub.wait_state("web", "ready", timeout=20,
                   pred=lambda s: s["restarts"] > before["restarts"])
    r = call(mcp, hub.name_of("web", "pid"))
    assert r["isError"] is False, r
    assert r["structuredContent"] == {"pid": web.proc.pid} != {"pid": old_pid}


# ---- the npm reference servers ------------------------------------------------------------

@needs_npm
def test_everything_server_through_mcp(hub, mcp):
    tools = hub.tools_of("everything")
    assert set(tools) == {"echo", "get-sum", "get-structured-content", "get-tiny-image",
                          "get-env"}
    assert all(t["available"] for t in tools.values())
    assert text_of(call(mcp, hub.name_of("everything", "echo"), {"message": "hello"})) == \
        "Echo: hello"
    r = call(mcp, hub.name_of("everything", "get-sum"), {"a": 2, "b": 40})
    assert "42" in text_of(r) and r["isError"] is False, r
    r = call(mcp, hub.name_of("everything", "get-structured-content"), {"location": "Chicago"})
    assert {"temperature", "conditions", "humidity"} <= set(r["structuredContent"]), r
    r = call(mcp, hub.name_of("everything", "get-tiny-image"))
    images = [c for c in r["content"] if c["type"] == "image"]
    assert images and images[0]["mimeType"] == "image/png"
    assert base64.b64decode(images[0]["data"]).startswith(b"\x89PNG")


@needs_npm
def test_memory_server_through_mcp(hub, mcp, work):
    entity = {"name": "airlock", "entityType": "project", "observations": ["runs code"]}
    r = call(mcp, hub.name_of("memory", "create_entities"), {"entities": [entity]})
    assert r["isError"] is False, r
    r = call(mcp, hub.name_of("memory", "read_graph"))
    assert entity in r["structuredContent"]["entities"], r
    assert '"airlock"' in (work / "memory.jsonl").read_text()
