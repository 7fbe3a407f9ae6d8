"""Extra (issue 25, code contexts): a client floods a session with contexts, and user code in a
context fork-bombs. Each context is a process in the session's sandbox: the 17th context gets a
clear 409 ("at most 16 contexts per session"), every context process counts in the session's
pids limit (a context cannot be made while a bomb holds every pid: a clear error, not a hang),
deleting contexts ends their processes, and the session and other sessions are served
throughout."""
from conftest import daemon, serves_others

BOMB = r'''
import os, time
kids, err = [], None
while len(kids) < 100000:
    try:
        pid = os.fork()
    except OSError as e:
        err = e.strerror
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    kids.append(pid)
print(len(kids), err)
'''

COUNT_PYTHONS = r'''
import os
n = 0
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            n += "airlock-runner" in open(f"/proc/{p}/cmdline").read()
        except OSError:
            pass
n
'''


def new_context(d, sid):
    return d.post(f"/v1/sessions/{sid}/contexts", json={}, timeout=60)


def execute(d, sid, code, context=None):
    body = {"code": code, "timeout_s": 60}
    if context:
        body["context"] = context
    r = d.post(f"/v1/sessions/{sid}/execute", json=body, timeout=120)
    assert r.status_code == 200, d.why(r)
    return r.json()


def test_a_context_flood_meets_the_cap():
    d = daemon()
    sid = d.create_session()
    try:
        made = []
        for _ in range(16):
            r = new_context(d, sid)
            assert r.status_code == 201, d.why(r)
            made.append(r.json()["id"])
        for _ in range(5):
            r = new_context(d, sid)
            assert r.status_code == 409, d.why(r)
            assert "at most 16 contexts per session" in r.json()["error"], r.text
        # 16 context processes and the session's own, all in the sandbox's pid namespace.
        assert int(execute(d, sid, COUNT_PYTHONS)["result"]) >= 17
        for c in made:
            assert execute(d, sid, f"ctx = {c!r}; ctx", c)["result"] == repr(c)
        for c in made:
            r = d.delete(f"/v1/sessions/{sid}/contexts/{c}")
            assert r.status_code == 204, d.why(r)
        assert int(execute(d, sid, COUNT_PYTHONS)["result"]) < 17
        r = new_context(d, sid)
        assert r.status_code == 201, d.why(r)
        serves_others(d)
    finally:
        d.delete_session(sid)


def test_contexts_count_in_the_sessions_pids_limit():
    d = daemon()
    sid = d.create_session()
    try:
        bomber = new_context(d, sid).json()["id"]
        out = execute(d, sid, BOMB, bomber)
        assert out["status"] == "ok", out
        n, _, why = out["stdout"].strip().partition(" ")
        assert 0 < int(n) <= 256 and "Resource temporarily unavailable" in why, out
        # Every pid of the session is taken: a new context is refused with the reason.
        r = new_context(d, sid)
        assert r.status_code == 400, d.why(r)
        assert "cannot start the context's process" in r.json()["error"], r.text
        # Its children gone (the bomber's globals kept them), contexts can be made again.
        out = execute(d, sid, "import signal\nfor p in kids: os.kill(p, signal.SIGKILL)\n"
                              "for p in kids: os.waitpid(p, 0)\nlen(kids)", bomber)
        assert out["status"] == "ok" and out["result"] == n, out
        r = new_context(d, sid)
        assert r.status_code == 201, d.why(r)
        assert execute(d, sid, "6 * 7", r.json()["id"])["result"] == "42"
        r = d.delete(f"/v1/sessions/{sid}/contexts/{bomber}")
        assert r.status_code == 204, d.why(r)
        serves_others(d)
    finally:
        d.delete_session(sid)
