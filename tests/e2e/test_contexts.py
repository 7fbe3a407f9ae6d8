"""Code contexts over the native API (docs/API.md, "Contexts"): each created context is its own
Python interpreter process in the session's sandbox (independent globals, same /work), listed,
restarted (fresh globals), deleted (its process gone); the default context is the session's
own interpreter, untouched by them; a stop and resume keeps the ids but not their variables."""
import pytest

from airlock_daemon import daemon_fixture, sessions_fixture

daemon = daemon_fixture(pytest)
sessions = sessions_fixture(pytest)


def run(d, sid, code, context=None, expect=200):
    body = {"code": code}
    if context is not None:
        body["context"] = context
    r = d.post(f"/v1/sessions/{sid}/execute", json=body, timeout=120)
    assert r.status_code == expect, d.why(r)
    return r.json()


def new_context(d, sid, body=None, expect=201):
    r = d.post(f"/v1/sessions/{sid}/contexts", json=body if body is not None else {},
               timeout=60)
    assert r.status_code == expect, d.why(r)
    return r.json()


def listed(d, sid):
    r = d.get(f"/v1/sessions/{sid}/contexts")
    assert r.status_code == 200, d.why(r)
    return [c["id"] for c in r.json()["contexts"]]


def test_contexts_have_independent_globals(daemon, sessions):
    sid = sessions.new()
    run(daemon, sid, "x = 'main'")
    a, b = new_context(daemon, sid)["id"], new_context(daemon, sid)["id"]
    assert a.startswith("ctx-") and a != b
    run(daemon, sid, "x = 'a'", a)
    out = run(daemon, sid, "x", b)
    assert out["status"] == "error" and out["error"]["name"] == "NameError", out
    assert run(daemon, sid, "x", a)["result"] == "'a'"
    assert run(daemon, sid, "x")["result"] == "'main'"
    assert run(daemon, sid, "x", "default")["result"] == "'main'"
    # Their own processes, in the same sandbox and /work.
    pids = {run(daemon, sid, "import os; os.getpid()", c)["result"]
            for c in (None, a, b)}
    assert len(pids) == 3
    run(daemon, sid, "open('/work/shared.txt', 'w').write('from a')", a)
    assert run(daemon, sid, "open('/work/shared.txt').read()", b)["result"] == \
        "'from a'"
    # Output streams from a context as from any cell.
    assert run(daemon, sid, "print('hello from b')", b)["stdout"] == "hello from b\n"
    assert listed(daemon, sid) == ["default", a, b]


def test_restart_and_delete(daemon, sessions):
    sid = sessions.new()
    a = new_context(daemon, sid)["id"]
    run(daemon, sid, "y = 1; import os; pid = os.getpid()", a)
    old_pid = run(daemon, sid, "pid", a)["result"]
    r = daemon.post(f"/v1/sessions/{sid}/contexts/{a}/restart", timeout=60)
    assert r.status_code == 200, daemon.why(r)
    assert run(daemon, sid, "y", a)["error"]["name"] == "NameError"
    assert run(daemon, sid, "import os; os.getpid()", a)["result"] != old_pid
    # The default context restarts in place: new globals, same process.
    run(daemon, sid, "z = 2")
    main_pid = run(daemon, sid, "import os; os.getpid()")["result"]
    r = daemon.post(f"/v1/sessions/{sid}/contexts/default/restart", timeout=60)
    assert r.status_code == 200, daemon.why(r)
    assert run(daemon, sid, "z")["error"]["name"] == "NameError"
    assert run(daemon, sid, "import os; os.getpid()")["result"] == main_pid
    r = daemon.delete(f"/v1/sessions/{sid}/contexts/{a}")
    assert r.status_code == 204, daemon.why(r)
    assert listed(daemon, sid) == ["default"]
    out = run(daemon, sid, "1", a)
    assert out["error"]["name"] == "ContextError" and "no such context" in out["error"]["value"]
    r = daemon.delete(f"/v1/sessions/{sid}/contexts/{a}")
    assert r.status_code == 404 and a in r.json()["error"], daemon.why(r)
    r = daemon.delete(f"/v1/sessions/{sid}/contexts/default")
    assert r.status_code == 400, daemon.why(r)


def test_bad_requests(daemon, sessions):
    sid = sessions.new()
    new_context(daemon, sid, {"language": "bash"}, expect=400)
    r = daemon.post(f"/v1/sessions/{sid}/contexts/nope/restart", timeout=60)
    assert r.status_code == 404, daemon.why(r)
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "1", "context": ""})
    assert r.status_code == 400 and "context" in r.text, daemon.why(r)
    r = daemon.get("/v1/sessions/s-" + "0" * 23 + "1/contexts")
    assert r.status_code == 404


def test_a_context_that_exits_is_gone_and_the_session_lives(daemon, sessions):
    sid = sessions.new()
    a = new_context(daemon, sid)["id"]
    out = run(daemon, sid, "import os; os._exit(3)", a)
    assert out["error"]["name"] == "ContextError", out
    assert listed(daemon, sid) == ["default"]
    assert run(daemon, sid, "1 + 1")["result"] == "2"


def test_interrupt_reaches_the_context(daemon, sessions):
    sid = sessions.new()
    a = new_context(daemon, sid)["id"]
    r = daemon.post(f"/v1/sessions/{sid}/execute",
                    json={"code": "import time; time.sleep(60)", "context": a,
                          "timeout_s": 2}, timeout=120)
    assert r.status_code == 200, daemon.why(r)
    out = r.json()
    assert out["error"]["name"] == "KeyboardInterrupt" or out["status"] == "timeout", out
    assert run(daemon, sid, "40 + 2", a)["result"] == "42"
    assert run(daemon, sid, "40 + 1")["result"] == "41"


def test_stop_and_resume_keeps_no_context(daemon, sessions):
    sid = sessions.new()
    a = new_context(daemon, sid)["id"]
    run(daemon, sid, "v = 5", a)
    run(daemon, sid, "w = 6")
    r = daemon.post(f"/v1/sessions/{sid}/stop", timeout=180)
    assert r.status_code == 200, daemon.why(r)
    r = daemon.post(f"/v1/sessions/{sid}/resume", timeout=180)
    assert r.status_code == 200, daemon.why(r)
    assert run(daemon, sid, "w")["result"] == "6"
    assert listed(daemon, sid) == ["default"]
