"""Code Mode end to end (issue 9, item 4): `import airlock_tools` in a cell of a daemon started
with --mcp-config, calling real stdio MCP servers through the runner's channel. Results as
Python data, functions with signatures, every kind of ToolError, the per-cell cap, a server
that crashes mid-call, code_tools from the profile and from the session, approval, what a
stop, a resume and a fork keep, the `minimal` profile, threads and subprocesses.

The servers: "fx", the fault fixture (tests/e2e/mcp_fixture.py, recording every message it
gets in a state file, so a test can tell what reached it); "victim", a second fixture whose
only tools are crash and pid (so it can be crashed without touching fx; both servers have
those two tools, so each is exposed as SERVER__NAME); "crm", the example CRM server
(examples/internal-tools/crm_server.py), every tool of which needs a person's approval.
One daemon for the module; every session a test makes is deleted, and the daemon is stopped
and checked for leftovers at the end, whatever happened."""
import atexit
import base64
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

import pytest

from airlock_daemon import daemon_fixture

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "e2e" / "mcp_fixture.py"
CRM = ROOT / "examples" / "internal-tools" / "crm_server.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# A profile of its own (found through AIRLOCK_PROFILES_DIR): its sessions' code may call echo
# and add, at most five calls per cell.
CAPPED_PROFILE = {
    "description": "Code Mode tests: echo and add, five tool calls per cell",
    "languages": ["python"],
    "code_tools": ["echo", "add"],
    "limits": {"tool_calls": 5},
}


# The servers' config, the profile directory and the fixture's state file: made once, when the
# module is loaded, since the daemon's arguments name them; removed when Python exits.
BASE = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-codemode-"))
atexit.register(shutil.rmtree, BASE, True)
PROFILES = BASE / "profiles"
PROFILES.mkdir()
(PROFILES / "cm-capped.json").write_text(json.dumps(CAPPED_PROFILE))
STATE_FILE = BASE / "fx-messages.txt"
CONFIG = BASE / "mcp.json"
CONFIG.write_text(json.dumps({"mcpServers": {
    "fx": {"command": sys.executable, "args": [str(FIXTURE), "--state-file", str(STATE_FILE)]},
    "victim": {"command": sys.executable, "args": [str(FIXTURE)],
               "allowed_tools": ["crash", "pid"]},
    "crm": {"command": sys.executable, "args": [str(CRM), "--db", str(BASE / "crm.sqlite")],
            "require_approval": "always"},
}}))
ENV = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
ENV["AIRLOCK_PROFILES_DIR"] = str(PROFILES)

daemon = daemon_fixture(pytest, args=("--pool-size", "1", "--mcp-config", str(CONFIG)), env=ENV)


def servers(d):
    r = d.get("/v1/tools")
    assert r.status_code == 200, d.why(r)
    return {s["name"]: s for s in r.json()["servers"]}


def wait_ready(d, name, timeout=60, not_pid=None):
    """Waits until server name is ready (with another pid than not_pid); returns its entry."""
    deadline = time.monotonic() + timeout
    while True:
        s = servers(d).get(name, {})
        if s.get("state") == "ready" and s.get("pid") != not_pid:
            return s
        assert time.monotonic() < deadline, f"server {name} not ready after {timeout}s: {s}"
        time.sleep(0.1)


@pytest.fixture(scope="module", autouse=True)
def servers_ready(daemon):
    for name in ("fx", "victim", "crm"):
        wait_ready(daemon, name)


@pytest.fixture
def sessions(daemon):
    made = []

    def new(**body):
        r = daemon.post("/v1/sessions", json=body)
        assert r.status_code == 201, "create session: " + daemon.why(r)
        made.append(r.json()["id"])
        return made[-1]

    new.made = made
    try:
        yield new
    finally:
        for sid in made:
            daemon.delete_session(sid)


def run(d, sid, code, status="ok", **fields):
    """Executes a cell, asserts its status, returns the execution object."""
    res = d.execute(sid, code, **fields)
    assert res["status"] == status, f"cell {code!r}:\n{json.dumps(res, indent=1)[:4000]}"
    return res


def lines_of(res):
    return [json.loads(line) for line in res["stdout"].splitlines()]


def fx_calls():
    """The tools/call lines the fx server received so far ("tools/call echo")."""
    try:
        text = STATE_FILE.read_text()
    except FileNotFoundError:
        return []
    return [ln for ln in text.splitlines() if ln.startswith("tools/call")]


# A cell prelude: report(expr) prints one JSON line, the value or the error it raised.
REPORT = r'''
import json
import airlock_tools as t
def report(f):
    try:
        v = f()
        print(json.dumps({"ok": v}))
    except t.ToolError as e:
        print(json.dumps({"kind": e.kind, "tool": e.tool, "error": str(e)}))
    except Exception as e:
        print(json.dumps({"exc": type(e).__name__, "error": str(e)}))
'''


# ---- results and functions ------------------------------------------------------------------

def test_results_come_back_as_python_data(daemon, sessions):
    sid = sessions(code_tools=["fx/*"])
    res = run(daemon, sid, REPORT + r'''
report(lambda: t.echo(text="plain text"))
report(lambda: t.echo(text='{"a": [1, 2], "b": null}'))
report(lambda: t.add(a=2, b=40))
report(lambda: t.structured())
report(lambda: t.big(bytes=10))
img = t.image()
print(json.dumps({"image": [sorted(i) for i in img], "type": type(img).__name__,
                  "mime": img[0]["mime_type"], "data": img[0]["data"]}))
print(json.dumps({"types": [type(t.echo(text="x")).__name__, type(t.add(a=1, b=1)).__name__]}))
''')
    out = lines_of(res)
    assert out[0] == {"ok": "plain text"}, "text that is not JSON comes back as str"
    assert out[1] == {"ok": {"a": [1, 2], "b": None}}, "JSON text comes back parsed"
    assert out[2] == {"ok": {"sum": 42}}, "structuredContent comes back as a dict"
    assert out[3]["ok"]["user"]["address"] == {"city": "Lyon", "zip": "69001"}
    assert out[3]["ok"]["scores"] == [1.5, 2, -3] and out[3]["ok"]["active"] is True
    assert out[4] == {"ok": "0123456789"}
    img = out[5]
    assert img["type"] == "list" and img["image"] == [["data", "mime_type"]], img
    assert img["mime"] == "image/png"
    assert base64.b64decode(img["data"]).startswith(PNG_SIGNATURE)
    assert out[6] == {"types": ["str", "dict"]}
    # Every call counted, each answered in measurable time.
    assert res["usage"]["tool_calls"] == 8, res["usage"]
    assert res["usage"]["tool_ms"] > 0, res["usage"]


def test_tools_are_functions_with_signatures(daemon, sessions):
    sid = sessions(code_tools=["fx/*"])
    before = len(fx_calls())
    res = run(daemon, sid, REPORT + r'''
import inspect
help(t.strict)
print(json.dumps({"sig": str(inspect.signature(t.strict)), "name": t.strict.__name__,
                  "module": t.strict.__module__, "repr": repr(t.echo)}))
report(lambda: t.strict(3, "b"))
report(lambda: t.strict(3, "a", ["x"]))
report(lambda: t.echo(txt="wrong name"))
report(lambda: t.echo())
report(lambda: t.add(1, 2, 3))
report(lambda: t.call("add", a=1, b=2))
report(lambda: t.call(echo="not a name"))
from airlock_tools import echo, ToolError
report(lambda: echo("imported"))
print(json.dumps({"dir": dir(t)}))
print(json.dumps({"list": t.list()}))
''')
    out = res["stdout"]
    assert "strict(n, mode, tags=None)" in out, out
    assert "Echo validated arguments" in out and "Internal tool 'strict' of server 'fx'" in out
    assert "mode: string" in out and "tags: array (optional)" in out, out
    lines = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    assert lines[0] == {"sig": "(n, mode, tags=None)", "name": "strict",
                        "module": "airlock_tools", "repr": "<airlock tool echo(text)>"}
    assert lines[1] == {"ok": {"n": 3, "mode": "b"}}, "positional arguments in schema order"
    assert lines[2] == {"ok": {"n": 3, "mode": "a", "tags": ["x"]}}
    assert lines[3]["exc"] == "TypeError" and "txt" in lines[3]["error"], lines[3]
    assert lines[4]["exc"] == "TypeError" and "text" in lines[4]["error"], lines[4]
    assert lines[5]["exc"] == "TypeError", lines[5]
    assert lines[6] == {"ok": {"sum": 3}}
    assert lines[7]["exc"] == "TypeError", lines[7]
    assert lines[8] == {"ok": "imported"}
    names = lines[9]["dir"]
    assert {"ToolError", "call", "list", "echo", "add", "strict", "fx__crash", "fx__pid"} <= \
        set(names), names
    assert not any(n.startswith(("victim", "get_user", "run_sql")) for n in names), names
    listed = {e["name"]: e for e in lines[10]["list"]}
    assert listed["echo"]["server"] == "fx" and listed["fx__pid"]["python_name"] == "fx__pid"
    assert listed["strict"]["parameters"]["required"] == ["n", "mode"]
    assert set(listed["echo"]) == {"name", "python_name", "server", "description",
                                   "parameters"}
    # Calls refused in Python (TypeError) never left the sandbox.
    calls = fx_calls()[before:]
    assert sorted(calls) == sorted(["tools/call strict"] * 2 + ["tools/call add",
                                                                 "tools/call echo"]), calls


# ---- errors ---------------------------------------------------------------------------------

ERROR_CASES = [
    # (call, kind, tool, fragment of the message, reaches the server)
    ("t.fail(message='the tool broke')", "tool_error", "fail", "the tool broke", True),
    ("t.rpc_error()", "tool_error", "rpc_error", "boom", True),
    ("t.strict(n=99, mode='a')", "invalid", "strict", "'n'", False),
    ("t.strict(n=1, mode='c')", "invalid", "strict", "mode", False),
    ("t.call('strict', n=1, mode='a', extra=1)", "invalid", "strict", "extra", False),
    ("t.call('no_such_tool')", "unknown", "no_such_tool",
     "there is no internal tool 'no_such_tool'", False),
    ("t.call('run_python', code='1')", "unknown", "run_python", "no internal tool", False),
    ("t.echo(text='x' * (2 << 20))", "too_large", "echo", "over the limit", False),
    # Larger than what the daemon reads as one frame of this profile's: refused in the sandbox.
    ("t.echo(text='x' * (8 << 20))", "too_large", "echo", "over the limit", False),
]


def test_every_error_kind_is_a_tool_error(daemon, sessions):
    sid = sessions(code_tools=["fx/*"])
    before = len(fx_calls())
    code = REPORT + "\n".join(f"report(lambda: {call})" for call, *_ in ERROR_CASES)
    res = run(daemon, sid, code + "\nprint(json.dumps({'after': t.echo(text='fine')}))")
    out = lines_of(res)
    for (call, kind, tool, fragment, _), got in zip(ERROR_CASES, out):
        assert got.get("kind") == kind and got.get("tool") == tool, f"{call}: {got}"
        assert fragment in got["error"], f"{call}: {got}"
    assert out[-1] == {"after": "fine"}, "the session goes on after every error"
    reached = [ln.split()[1] for ln in fx_calls()[before:]]
    assert sorted(reached) == sorted([c[2] for c in ERROR_CASES if c[4]] + ["echo"]), reached
    assert res["state"] == "preserved"


def test_calls_are_counted_in_the_metrics(daemon, sessions):
    """airlock_tool_calls_total{via="codemode"} (docs/METRICS.md) moves by outcome."""
    from prometheus_client.parser import text_string_to_metric_families

    def counts():
        r = daemon.get("/metrics")      # the API token opens /metrics too
        assert r.status_code == 200, r.text
        fam = {f.name: f for f in text_string_to_metric_families(r.text)}["airlock_tool_calls"]
        return {s.labels["outcome"]: s.value for s in fam.samples
                if s.name == "airlock_tool_calls_total" and s.labels["via"] == "codemode"}

    sid = sessions(code_tools=["fx/*"])
    before = counts()
    run(daemon, sid, REPORT + "report(lambda: t.echo(text='x'))\n"
                              "report(lambda: t.fail(message='no'))\n"
                              "report(lambda: t.strict(n=99, mode='a'))\n")
    after = counts()
    assert {k: after[k] - before[k] for k in after} == {"ok": 1, "tool_error": 1, "failed": 1}


def test_a_tool_outside_code_tools_is_not_allowed(daemon, sessions):
    sid = sessions(code_tools=["echo"])
    before = len(fx_calls())
    res = run(daemon, sid, REPORT + r'''
report(lambda: t.call("add", a=1, b=2))
report(lambda: t.add)
report(lambda: [e["name"] for e in t.list()])
report(lambda: t.echo(text="allowed"))
''')
    out = lines_of(res)
    assert out[0]["kind"] == "not_allowed" and out[0]["tool"] == "add", out[0]
    assert "code_tools" in out[0]["error"] and "'add'" in out[0]["error"], out[0]
    assert out[1]["exc"] == "AttributeError", out[1]
    assert "'add'" in out[1]["error"] and "may call: echo" in out[1]["error"], out[1]
    assert out[2] == {"ok": ["echo"]}
    assert out[3] == {"ok": "allowed"}
    assert fx_calls()[before:] == ["tools/call echo"]


def test_approval_needing_tools_only_when_approved(daemon, sessions):
    unapproved = sessions(code_tools=["*"])
    res = run(daemon, unapproved, REPORT + r'''
report(lambda: t.get_user_churn_metrics(user_id="u001"))
report(lambda: t.call("get_user_churn_metrics", user_id="u001"))
report(lambda: sorted(e["server"] for e in t.list() if e["server"] == "crm"))
''')
    out = lines_of(res)
    assert out[0]["exc"] == "AttributeError", "a tool that needs approval is not offered"
    assert out[1]["kind"] == "not_allowed", out[1]
    assert "approval" in out[1]["error"] and "approved_tools" in out[1]["error"], out[1]
    assert out[2] == {"ok": []}

    approved = sessions(code_tools=["*"], approved_tools=["get_user_churn_metrics"])
    res = run(daemon, approved, REPORT + r'''
report(lambda: t.get_user_churn_metrics(user_id="u001"))
report(lambda: t.call("run_sql", query="SELECT 1"))
''')
    out = lines_of(res)
    assert out[0]["ok"]["user_id"] == "u001" and 0 <= out[0]["ok"]["churn_risk"] <= 1, out[0]
    assert out[1]["kind"] == "not_allowed" and "approval" in out[1]["error"], out[1]

    r = daemon.post("/v1/sessions", json={"code_tools": ["*"], "approved_tools": ["*"]})
    assert r.status_code == 400 and "approved_tools" in r.text, daemon.why(r)
    if r.status_code == 201:
        sessions.made.append(r.json()["id"])


def test_a_session_without_code_tools_says_how_to_enable_them(daemon, sessions):
    sid = sessions()
    before = len(fx_calls())
    res = run(daemon, sid, REPORT + r'''
report(lambda: t.call("echo", text="x"))
report(lambda: t.echo)
report(lambda: t.list())
''')
    for got in lines_of(res):
        assert got.get("kind") == "disabled", got
        assert "Code Mode is off" in got["error"] and "code_tools" in got["error"], got
    assert fx_calls()[before:] == []
    assert res["usage"]["tool_calls"] == 0


def test_a_slow_tool_ends_as_the_cells_timeout_and_the_session_lives(daemon, sessions):
    sid = sessions(code_tools=["slow", "echo"])
    run(daemon, sid, "kept = 'still here'")
    res = run(daemon, sid, "import airlock_tools as t\nt.slow(seconds=120)", status="timeout",
              timeout_s=2)
    assert res["timed_out"] is True and res["state"] == "preserved", res
    assert "2 s" in res["error"]["value"], res["error"]
    assert res["usage"]["tool_calls"] == 1, res["usage"]
    res = run(daemon, sid, "print(kept)\nt.echo(text='after the timeout')")
    assert res["stdout"] == "still here\n" and res["result"] == "'after the timeout'", res
    # The server was told to give up on the call.
    deadline = time.monotonic() + 10
    while "notifications/cancelled" not in STATE_FILE.read_text():
        assert time.monotonic() < deadline, "the fixture never got notifications/cancelled"
        time.sleep(0.1)


def test_an_interrupt_ends_a_slow_tool_call_at_once(daemon, sessions):
    """POST /interrupt (also what a client that went away, a stop or the daemon's shutdown
    sends) must not wait for the tool: the call is cancelled and the cell ends."""
    import threading
    sid = sessions(code_tools=["slow"])
    run(daemon, sid, "kept = 'still here'")
    # Earlier tests called slow too: wait for this cell's call, not for theirs.
    before = fx_calls().count("tools/call slow")
    out = {}
    t = threading.Thread(target=lambda: out.update(res=daemon.execute(
        sid, "import airlock_tools as t\nt.slow(seconds=60)", timeout_s=100)))
    t0 = time.monotonic()
    t.start()
    deadline = time.monotonic() + 20
    while fx_calls().count("tools/call slow") == before:
        assert time.monotonic() < deadline, "the call never reached the server"
        time.sleep(0.05)
    r = daemon.post(f"/v1/sessions/{sid}/interrupt")
    assert r.status_code in (200, 202, 204), daemon.why(r)
    t.join(30)
    took = time.monotonic() - t0
    assert not t.is_alive() and took < 15, f"the interrupted cell took {took:.1f} s"
    res = out["res"]
    assert res["status"] == "error" and res["state"] == "preserved", res
    assert any(w in json.dumps(res["error"]) for w in ("KeyboardInterrupt", "interrupted")), res
    assert run(daemon, sid, "print(kept)")["stdout"] == "still here\n"


def test_a_session_deleted_during_a_tool_call_says_so(daemon, sessions):
    """Not the message for code that forges Code Mode requests and leaves their replies
    unread: the reply could not be delivered because the sandbox is gone."""
    import threading
    sid = sessions(code_tools=["slow"])
    before = fx_calls().count("tools/call slow")
    out = {}
    t = threading.Thread(target=lambda: out.update(res=daemon.execute(
        sid, "import airlock_tools as t\nt.slow(seconds=60)", timeout_s=100)))
    t.start()
    deadline = time.monotonic() + 20
    while fx_calls().count("tools/call slow") == before:
        assert time.monotonic() < deadline, "the call never reached the server"
        time.sleep(0.05)
    daemon.delete_session(sid)
    t.join(30)
    assert not t.is_alive(), "the cell of a deleted session went on"
    res = out["res"]
    assert res["status"] == "killed", res
    assert "destroyed" in res["error"]["value"], res["error"]


def test_a_profile_caps_tool_calls_per_cell(daemon, sessions):
    sid = sessions(profile="cm-capped")
    s = daemon.get(f"/v1/sessions/{sid}").json()
    assert s["code_tools"] == ["echo", "add"], "the profile's code_tools apply"
    for _ in range(2):  # the cap is per cell: the second cell has five calls again
        before = len(fx_calls())
        res = run(daemon, sid, REPORT + r'''
for i in range(6):
    report(lambda: t.echo(text=f"call {i}"))
''')
        out = lines_of(res)
        assert out[:5] == [{"ok": f"call {i}"} for i in range(5)], out
        assert out[5]["kind"] == "limit" and "5 tool calls" in out[5]["error"], out[5]
        assert "limits.tool_calls" in out[5]["error"], out[5]
        assert res["usage"]["tool_calls"] == 5, res["usage"]
        assert len(fx_calls()) - before == 5

    # The session's code_tools replace the profile's, and an empty list turns Code Mode off.
    sid = sessions(profile="cm-capped", code_tools=["add"])
    out = lines_of(run(daemon, sid, REPORT + "report(lambda: t.call('echo', text='x'))\n"
                                             "report(lambda: t.add(a=1, b=1))"))
    assert out[0]["kind"] == "not_allowed" and out[1] == {"ok": {"sum": 2}}, out
    sid = sessions(profile="cm-capped", code_tools=[])
    out = lines_of(run(daemon, sid, REPORT + "report(lambda: t.echo(text='x'))"))
    assert out[0]["kind"] == "disabled", out


def test_a_server_crashing_mid_call(daemon, sessions):
    sid = sessions(code_tools=["victim/*", "echo"])
    first = servers(daemon)["victim"]["pid"]
    res = run(daemon, sid, REPORT + r'''
report(lambda: t.victim__pid())
report(lambda: t.victim__crash())
report(lambda: t.victim__pid())
report(lambda: t.echo(text="other servers are fine"))
''')
    out = lines_of(res)
    assert out[0] == {"ok": {"pid": first}}, out
    assert out[1]["kind"] == "unavailable" and out[1]["tool"] == "victim__crash", out[1]
    assert out[2]["kind"] == "unavailable", "the server is restarted only after a backoff"
    assert "victim" in out[2]["error"], out[2]
    assert out[3] == {"ok": "other servers are fine"}
    assert res["state"] == "preserved"
    again = wait_ready(daemon, "victim", not_pid=first)
    out = lines_of(run(daemon, sid, REPORT + "report(lambda: t.victim__pid())"))
    assert out == [{"ok": {"pid": again["pid"]}}], out


# ---- persistence ----------------------------------------------------------------------------

def test_stop_resume_and_fork_keep_code_tools_and_approvals(daemon, sessions):
    body = {"code_tools": ["echo", "crm/*"], "approved_tools": ["get_user_churn_metrics"]}
    sid = sessions(**body)
    run(daemon, sid, "from airlock_tools import echo, get_user_churn_metrics\n"
                     "first = get_user_churn_metrics(user_id='u001')['user_id']")
    r = daemon.post(f"/v1/sessions/{sid}/stop", timeout=120)
    assert r.status_code == 200 and r.json()["state"] == "stopped", daemon.why(r)
    s = daemon.get(f"/v1/sessions/{sid}").json()
    assert s["code_tools"] == body["code_tools"], s
    assert s["approved_tools"] == body["approved_tools"], s
    r = daemon.post(f"/v1/sessions/{sid}/resume", timeout=120)
    assert r.status_code == 200, daemon.why(r)
    assert "echo" not in r.json().get("lost_names", []), r.json()

    check = REPORT + r'''
report(lambda: first)
report(lambda: repr(echo))
report(lambda: echo(text="the old function"))
from airlock_tools import echo as again
report(lambda: again(text="imported again"))
report(lambda: get_user_churn_metrics(user_id="u002")["user_id"])
report(lambda: t.call("add", a=1, b=2))
report(lambda: t.call("run_sql", query="SELECT 1"))
'''

    def assert_kept(out):
        # The kept function came back with its signature, not as a bare **arguments one.
        assert out[:5] == [{"ok": "u001"}, {"ok": "<airlock tool echo(text)>"},
                           {"ok": "the old function"}, {"ok": "imported again"},
                           {"ok": "u002"}], out
        assert out[5]["kind"] == "not_allowed" and "code_tools" in out[5]["error"], out[5]
        assert out[6]["kind"] == "not_allowed" and "approval" in out[6]["error"], out[6]

    assert_kept(lines_of(run(daemon, sid, check)))
    r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 2}, timeout=120)
    assert r.status_code == 201, daemon.why(r)
    children = [c["id"] for c in r.json()["sessions"]]
    sessions.made.extend(children)
    for child in children:
        s = daemon.get(f"/v1/sessions/{child}").json()
        assert s["code_tools"] == body["code_tools"], s
        assert s["approved_tools"] == body["approved_tools"], s
        assert_kept(lines_of(run(daemon, child, check)))


def test_the_minimal_profile_can_import_airlock_tools(daemon, sessions):
    sid = sessions(profile="minimal", code_tools=["echo"])
    res = run(daemon, sid, r'''
import airlock_tools
from airlock_tools import echo, ToolError
try:
    airlock_tools.call("add", a=1, b=2)
except ToolError as e:
    print(e.kind)
print(echo(text="from minimal"))
[e["name"] for e in airlock_tools.list()]
''')
    assert res["stdout"] == "not_allowed\nfrom minimal\n", res
    assert res["result"] == "['echo']", res
    # The profile's allow-list still holds for everything else.
    res = run(daemon, sid, "import os", status="error")
    assert "not allowed by profile 'minimal'" in res["error"]["value"], res["error"]


# ---- threads and processes ------------------------------------------------------------------

def test_threads_call_during_their_cell(daemon, sessions):
    sid = sessions(code_tools=["echo"])
    res = run(daemon, sid, r'''
import threading, airlock_tools as t
out = {}
def work(i):
    out[i] = t.echo(text=f"thread {i}")
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for th in threads: th.start()
for th in threads: th.join()
sorted(out.values())
''')
    assert res["result"] == repr([f"thread {i}" for i in range(4)]), res
    assert res["usage"]["tool_calls"] == 4
    # A pool made in one cell works for a later one: its calls are that cell's.
    run(daemon, sid, "from concurrent.futures import ThreadPoolExecutor\n"
                     "pool = ThreadPoolExecutor(3)")
    res = run(daemon, sid, "list(pool.map(lambda i: t.echo(text=f'{i}x'), range(6)))")
    assert res["result"] == repr([f"{i}x" for i in range(6)]), res
    assert res["usage"]["tool_calls"] == 6


def test_a_thread_calling_while_no_cell_runs_gets_runtime_error(daemon, sessions):
    """Python threads run between cells only when the runner's main thread lets them: here
    while it saves the session for a fork (the pickling of `trigger` sleeps). A call then must
    fail at once: a request written now would be read by nobody, and the thread would read the
    daemon's next request as if it were its reply."""
    sid = sessions(code_tools=["echo"])
    run(daemon, sid, r'''
import threading, time, airlock_tools as t
echo = t.echo
go = threading.Event()
outcome = []
def late():
    go.wait()
    t0 = time.monotonic()
    try:
        outcome.append(["ok", echo(text="late")])
    except Exception as e:
        outcome.append([type(e).__name__, str(e), time.monotonic() - t0])
threading.Thread(target=late, daemon=True).start()
class Trigger:
    def __reduce__(self):
        go.set()
        time.sleep(1)  # the GIL is free: the thread calls now
        return (int, ())
trigger = Trigger()
''')
    r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 1}, timeout=120)
    assert r.status_code == 201, daemon.why(r)
    sessions.made.extend(c["id"] for c in r.json()["sessions"])
    res = run(daemon, sid, "outcome")
    outcome = eval(res["result"])  # noqa: S307 - a repr of str/float lists from our own cell
    assert len(outcome) == 1 and outcome[0][0] == "RuntimeError", outcome
    assert "only be called while a cell runs" in outcome[0][1], outcome
    assert outcome[0][2] < 5, "the call failed at once, it did not wait"
    res = run(daemon, sid, "echo(text='the channel is in step')")
    assert res["result"] == "'the channel is in step'", res


def test_a_subprocess_gets_runtime_error(daemon, sessions):
    sid = sessions(code_tools=["echo"])
    res = run(daemon, sid, r'''
import os, airlock_tools as t
echo = t.echo
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        msg = "ok: " + echo(text="from the child")
    except Exception as e:
        msg = f"{type(e).__name__}: {e}"
    os.write(w, msg.encode())
    os._exit(0)
os.close(w)
print(os.read(r, 4096).decode())
os.waitpid(pid, 0)
print(echo(text="the parent goes on"))
''', timeout_s=20)
    first, second = res["stdout"].splitlines()
    assert first.startswith("RuntimeError:") and "subprocess" in first, first
    assert second == "the parent goes on"
    assert res["usage"]["tool_calls"] == 1


def test_calls_and_refusals_are_in_the_audit_log(daemon, sessions):
    """docs/AUDIT.md: a Code Mode call from a cell writes tool.call with via "code", and a
    tool outside the session's code_tools writes policy.refusal; both carry the cell's
    session and request id."""
    log = daemon.state_dir / "audit.log"
    start_at = log.stat().st_size
    sid = sessions(code_tools=["echo", "fail"])
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": REPORT + (
        "report(lambda: t.echo(text='x'))\n"
        "report(lambda: t.fail(message='no'))\n"
        "report(lambda: t.call('add', a=1, b=2))\n")})
    assert r.status_code == 200 and r.json()["status"] == "ok", daemon.why(r)
    rid = r.headers["X-Request-Id"]
    # The cell's execution line comes after its calls' lines (written in the order of events).
    lines = daemon.audit_lines(start_at=start_at, until=lambda ls: any(
        e["event"] == "execution" and e["request_id"] == rid for e in ls))
    calls = [e for e in lines if e["event"] == "tool.call" and e["session"] == sid]
    assert [(e["tool"], e["server"], e["outcome"], e["via"], e["request_id"]) for e in calls] == [
        ("echo", "fx", "ok", "code", rid), ("fail", "fx", "tool_error", "code", rid)], calls
    assert all(isinstance(e["ms"], (int, float)) and e["ms"] >= 0 for e in calls), calls
    refusals = [e for e in lines if e["event"] == "policy.refusal" and e["session"] == sid]
    assert len(refusals) == 1, refusals
    ref = refusals[0]
    assert (ref["policy"], ref["tool"], ref["request_id"]) == ("code_tools", "add", rid), ref
    assert ref["server"] == "fx" and "code_tools" in ref["reason"], ref
    assert ref["tenant"] == "default", ref
