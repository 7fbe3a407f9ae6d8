"""JavaScript sessions (issue 14 item 3): `language: "javascript"` runs in a Node REPL inside the
session's own sandbox, next to its Python and bash. Variables persist across cells, top-level
await works, the last expression comes back as `result`, errors carry a stack that shows the
user's code, a busy loop can be interrupted or timed out without losing the session, profiles
decide whether JavaScript is allowed, a stop or fork says the JavaScript state is lost, and a
runaway allocation ends as status oom. One daemon for the module (with a small-memory profile
from a private profile directory); every test deletes its sessions, whatever happened."""
import json
import os
import pathlib
import shutil
import tempfile
import time

import pytest

from airlock_daemon import descendants, daemon_fixture, sessions_fixture

if not os.access("/usr/bin/node", os.X_OK):
    pytest.skip("javascript sessions need Node.js (/usr/bin/node): apt-get install nodejs",
                allow_module_level=True)

PROFILES = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-js-profiles-"))
SMALL = "js-small"
(PROFILES / f"{SMALL}.json").write_text(json.dumps({
    "description": "JavaScript with a small memory limit (test_javascript.py)",
    "languages": ["python", "bash", "javascript"],
    "limits": {"memory": "256MiB", "pids": 64, "timeout": "30s"}}))

daemon = daemon_fixture(pytest, env={
    **{k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"},
    "AIRLOCK_PROFILES_DIR": str(PROFILES)})
sessions = sessions_fixture(pytest)


@pytest.fixture(scope="module", autouse=True)
def _profiles_dir():
    try:
        yield
    finally:
        shutil.rmtree(PROFILES, ignore_errors=True)


def js(daemon, sid, code, **fields):
    return daemon.execute(sid, code, language="javascript", **fields)


def ok(out):
    assert out["status"] == "ok", json.dumps(out, indent=1)
    return out


def node_pids(daemon):
    """The node processes under the daemon (the sandboxes' REPLs)."""
    out = []
    for pid in descendants(daemon.proc.pid):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if os.path.basename(exe) == "node":
            out.append(pid)
    return out


def test_variables_functions_and_classes_persist(daemon, sessions):
    sid = sessions.new()
    assert ok(js(daemon, sid, "let a = 40; const b = 2;\nfunction add(x, y) { return x + y }\n"
                 "class Box { constructor(v) { this.v = v } }\nvar c = 'kept'"))["result"] is None
    out = ok(js(daemon, sid, "new Box(add(a, b)).v"))
    assert out["result"] == "42"
    assert ok(js(daemon, sid, "c + ' ' + typeof Box"))["result"] == "'kept function'"
    assert out["execution_count"] >= 2 and out["state"] == "preserved"


def test_result_is_inspect_form(daemon, sessions):
    sid = sessions.new()
    out = ok(js(daemon, sid, "({a: 1, b: [1, 'two', null], m: new Map([[1, 2]])})"))
    assert out["result"] == "{ a: 1, b: [ 1, 'two', null ], m: Map(1) { 1 => 2 } }"
    assert ok(js(daemon, sid, "undefined"))["result"] is None
    assert ok(js(daemon, sid, "'text'"))["result"] == "'text'"


def test_top_level_await(daemon, sessions):
    sid = sessions.new()
    out = ok(js(daemon, sid, "const t0 = Date.now();\n"
                "const v = await new Promise(r => setTimeout(() => r(21), 50));\nv * 2"))
    assert out["result"] == "42"
    # Declarations made in an awaiting cell are there for the next one.
    assert ok(js(daemon, sid, "v + 1"))["result"] == "22"
    assert ok(js(daemon, sid, "(await import('node:path')).basename('/a/b.txt')"))["result"] \
        == "'b.txt'" or pytest.skip("this Node has no import() in vm scripts (Node < 20.12)")


def test_console_goes_to_stdout_and_stderr(daemon, sessions):
    sid = sessions.new()
    out = ok(js(daemon, sid, "console.log('out', 1, {k: 2}); console.error('err!'); 7"))
    assert out["stdout"] == "out 1 { k: 2 }\n"
    assert out["stderr"] == "err!\n"
    assert out["result"] == "7"


def test_uncaught_error_has_stack_of_user_code(daemon, sessions):
    sid = sessions.new()
    ok(js(daemon, sid, "1"))
    out = js(daemon, sid, "function inner() {\n  null.x;\n}\ninner()")
    assert out["status"] == "error" and out["exit_code"] == 1, out
    err = out["error"]
    assert err["name"] == "TypeError", err
    assert "Cannot read properties of null" in err["value"], err
    assert "<cell-2>:2:" in err["traceback"] and "at inner" in err["traceback"], err
    for driver_frame in ("[eval]", "node:vm", "airlock_node"):
        assert driver_frame not in err["traceback"], err
    # The REPL lives on.
    assert ok(js(daemon, sid, "typeof inner"))["result"] == "'function'"


def test_rejected_promise_and_thrown_values(daemon, sessions):
    sid = sessions.new()
    out = js(daemon, sid, "await Promise.reject(new RangeError('nope'))")
    assert out["status"] == "error" and out["error"]["name"] == "RangeError", out
    assert out["error"]["value"] == "nope"
    out = js(daemon, sid, "throw 42")
    assert out["status"] == "error" and out["error"]["value"] == "42", out
    out = js(daemon, sid, "let = = 1")
    assert out["status"] == "error" and out["error"]["name"] == "SyntaxError", out
    # A rejection nobody awaits is reported on stderr and ends nothing.
    out = ok(js(daemon, sid, "Promise.reject(new Error('later')); 5"))
    assert out["result"] == "5"
    assert ok(js(daemon, sid, "6"))["result"] == "6"


def test_exit_ends_only_the_repl(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "x = 1")
    ok(js(daemon, sid, "let gone = 1"))
    out = js(daemon, sid, "process.exit(3)")
    assert out["status"] == "error" and out["exit_code"] == 3, out
    assert "next javascript cell starts a new REPL" in out["error"]["value"]
    assert out["state"] == "preserved"
    assert ok(js(daemon, sid, "typeof gone"))["result"] == "'undefined'"
    assert ok(daemon.execute(sid, "x"))["result"] == "1"


def test_interrupt_stops_a_busy_loop(daemon, sessions):
    import threading
    sid = sessions.new()
    ok(js(daemon, sid, "let survivor = 'here'"))
    box = {}
    t = threading.Thread(target=lambda: box.update(out=js(daemon, sid, "while (true) {}")))
    t.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st = daemon.get(f"/v1/sessions/{sid}").json()["state"]
            if st == "busy":
                break
            time.sleep(0.05)
        time.sleep(0.3)
        r = daemon.post(f"/v1/sessions/{sid}/interrupt")
        assert r.status_code == 200 and r.json()["interrupted"] is True, r.text
    finally:
        t.join(60)
    out = box["out"]
    assert out["status"] == "error" and out["error"]["name"] == "KeyboardInterrupt", out
    assert out["state"] == "preserved"
    assert ok(js(daemon, sid, "survivor"))["result"] == "'here'"


def test_timeout_keeps_the_repl(daemon, sessions):
    sid = sessions.new()
    ok(js(daemon, sid, "const keep = 5"))
    out = js(daemon, sid, "for (;;) {}", timeout_s=1)
    assert out["status"] == "timeout" and out["timed_out"] is True, out
    assert out["state"] == "preserved"
    assert ok(js(daemon, sid, "keep"))["result"] == "5"


def test_busy_loop_after_await_loses_only_javascript(daemon, sessions):
    """Node cannot interrupt a loop in a promise's continuation: the runner kills the REPL and
    the session (its Python variables) lives on."""
    sid = sessions.new()
    ok(daemon.execute(sid, "py = 'python kept'"))
    ok(js(daemon, sid, "let lost = 1"))
    out = js(daemon, sid, "await null; while (true) {}", timeout_s=1)
    assert out["status"] == "timeout", out
    assert out["state"] == "preserved", out
    assert ok(daemon.execute(sid, "py"))["result"] == "'python kept'"
    assert ok(js(daemon, sid, "typeof lost"))["result"] == "'undefined'"


def test_languages_share_the_workspace(daemon, sessions):
    sid = sessions.new()
    ok(daemon.execute(sid, "open('/work/from_py.txt', 'w').write('py')"))
    ok(daemon.execute(sid, "echo -n sh > from_sh.txt", language="bash"))
    out = ok(js(daemon, sid, "const fs = require('fs');\n"
                "fs.writeFileSync('/work/from_js.txt', 'js');\n"
                "fs.readFileSync('/work/from_py.txt', 'utf8') + fs.readFileSync('from_sh.txt', "
                "'utf8') + ' ' + process.cwd()"))
    assert out["result"] == "'pysh /work'", out
    assert [f["path"] for f in out["files"]] == ["from_js.txt"], out["files"]
    assert ok(daemon.execute(sid, "open('/work/from_js.txt').read()"))["result"] == "'js'"


def test_node_starts_with_the_first_javascript_cell(daemon, sessions):
    sid = sessions.new()
    ok(daemon.execute(sid, "1 + 1"))
    ok(daemon.execute(sid, "true", language="bash"))
    assert node_pids(daemon) == [], "node runs though no javascript cell ran"
    ok(js(daemon, sid, "1"))
    assert len(node_pids(daemon)) == 1
    daemon.delete_session(sid)
    deadline = time.monotonic() + 10
    while node_pids(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert node_pids(daemon) == [], "node outlived its session"


def test_one_shot_execute(daemon):
    r = daemon.post("/execute", json={"code": "console.log('hi'); [1, 2].map(x => x * 2)",
                                      "language": "javascript"})
    assert r.status_code == 200, daemon.why(r)
    out = r.json()
    assert out["status"] == "ok" and out["stdout"] == "hi\n" and out["result"] == "[ 2, 4 ]", out


@pytest.mark.parametrize("profile", ["minimal", "data-science", "visualization"])
def test_profile_without_javascript_refuses(daemon, sessions, profile):
    sid = sessions.new(profile=profile)
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "1", "language": "javascript"})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body.get("field") == "language", body
    assert f"profile '{profile}' does not allow javascript" in body["error"], body
    assert "(its languages: python)" in body["error"], body
    before = creates(daemon, profile)
    r = daemon.post("/execute", json={"code": "1", "language": "javascript",
                                      "profile": profile})
    assert r.status_code == 400 and "does not allow javascript" in r.text, r.text
    # The one-shot is refused before a sandbox is taken for it.
    assert creates(daemon, profile) == before


def creates(daemon, profile):
    """How many sandboxes the profile has handed to sessions and one-shots so far."""
    r = daemon.get("/v1/profiles")
    assert r.status_code == 200, r.text
    pool = next(p["pool"] for p in r.json()["profiles"] if p["name"] == profile)
    return sum(pool["creates"].values())


def test_unknown_language_names_javascript(daemon, sessions):
    sid = sessions.new()
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "1", "language": "ruby"})
    assert r.status_code == 400 and "\"javascript\"" in r.json()["error"], r.text


def test_profiles_list_javascript(daemon):
    profiles = {p["name"]: p for p in daemon.get("/v1/profiles").json()["profiles"]}
    assert profiles["default"]["languages"] == ["python", "bash", "javascript", "typescript", "r"]
    assert "javascript" not in profiles["minimal"]["languages"]


def test_stop_and_fork_say_javascript_state_is_lost(daemon, sessions):
    sid = sessions.new()
    ok(daemon.execute(sid, "kept = 7"))
    ok(js(daemon, sid, "let jsvar = 1"))
    r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
    assert r.status_code == 201, daemon.why(r)
    child = r.json()["sessions"][0]
    sessions.ids.append(child["id"])
    assert "(javascript state)" in child["lost_names"], child
    assert ok(js(daemon, child["id"], "typeof jsvar"))["result"] == "'undefined'"

    r = daemon.post(f"/v1/sessions/{sid}/stop")
    assert r.status_code == 200, daemon.why(r)
    assert "(javascript state)" in r.json()["lost_names"], r.json()
    out = ok(js(daemon, sid, "typeof jsvar"))
    assert out.get("resumed") is True and "(javascript state)" in out["lost_names"], out
    assert out["result"] == "'undefined'"
    assert ok(daemon.execute(sid, "kept"))["result"] == "7"


def test_stop_without_javascript_loses_nothing(daemon, sessions):
    sid = sessions.new()
    ok(daemon.execute(sid, "kept = 7"))
    r = daemon.post(f"/v1/sessions/{sid}/stop")
    assert r.status_code == 200, daemon.why(r)
    assert r.json()["lost_names"] == [], r.json()


def test_runaway_allocation_is_oom(daemon, sessions):
    sid = sessions.new(profile=SMALL)
    out = js(daemon, sid, "const chunks = [];\n"
             "for (;;) chunks.push(new Array(1 << 20).fill(1.5));", timeout_s=30)
    assert out["status"] == "oom" and out["exit_code"] == 137, json.dumps(out, indent=1)[:3000]
    assert out["error"]["name"] == "MemoryError", out
    peak = out["usage"]["peak_memory_bytes"]
    assert not peak or peak <= (256 << 20) * 1.1, f"peak {peak} above the 256MiB cap"
    if out["state"] == "preserved":
        # cgroup v1 kills the REPL alone: the session and its Python go on.
        assert ok(daemon.execute(sid, "'alive'"))["result"] == "'alive'"
        assert ok(js(daemon, sid, "typeof chunks"))["result"] == "'undefined'"


def _tool_names(daemon, **params):
    r = daemon.get("/v1/tools", params=params)
    assert r.status_code == 200, daemon.why(r)
    return [t["name"] for t in r.json()["tools"]]


def test_run_javascript_tool_only_where_allowed(daemon, sessions):
    assert "run_javascript" in _tool_names(daemon)
    assert "run_javascript" in _tool_names(daemon, profile="default")
    assert "run_javascript" not in _tool_names(daemon, profile="minimal")
    minimal = sessions.new(profile="minimal")
    assert "run_javascript" not in _tool_names(daemon, session=minimal)
    assert "run_python" in _tool_names(daemon, session=minimal)
    # MCP over HTTP: the default profile's tools, and run_javascript runs.
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    r = daemon.post("/mcp", json=rpc, headers={"Accept": "application/json, text/event-stream"})
    if r.status_code == 200 and "application/json" in r.headers.get("Content-Type", ""):
        names = [t["name"] for t in r.json()["result"]["tools"]]
        assert "run_javascript" in names, names


def test_call_env_and_cwd_apply_to_one_cell(daemon, sessions):
    sid = sessions.new()
    ok(daemon.execute(sid, "mkdir -p sub/dir", language="bash"))
    out = ok(js(daemon, sid, "[process.cwd(), process.env.GREETING]", cwd="sub/dir",
                env={"GREETING": "hi"}))
    assert out["result"] == "[ '/work/sub/dir', 'hi' ]", out
    out = ok(js(daemon, sid, "[process.cwd(), process.env.GREETING]"))
    assert out["result"] == "[ '/work', undefined ]", out


def test_stdin_is_refused_for_javascript(daemon, sessions):
    sid = sessions.new()
    r = daemon.post(f"/v1/sessions/{sid}/execute",
                    json={"code": "1", "language": "javascript", "stdin": "x"})
    assert r.status_code == 400, r.text
    assert "javascript cells have no standard input" in r.json()["error"], r.text
    assert r.json().get("field") == "stdin", r.text
