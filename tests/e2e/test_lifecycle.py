"""The session lifecycle end to end (spec: LIFECYCLE-API.md, issue 7): sessions that stop
(state on disk, no process, no cgroup), resume explicitly or on their next call, fork into
independent copies, survive a restart of the daemon (SIGTERM: saved; kill -9: files and the
last checkpoint), are deleted a while after they stopped, and what the CLI, MCP and the chat
gateway make of all this.

Most tests share one daemon (default lifecycle flags); those that need other flags, a restart
or a crash start their own on a private state directory (the `fleet` fixture), and every
daemon is stopped and checked for leftovers at the end, whatever happened. No test asserts a
duration: waits are bounded polls that fail with what they saw."""
import datetime
import hashlib
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest
import requests

from airlock_daemon import (AIRLOCK, cgroup_dirs_named, crash_daemon, daemon_fixture,
                            host_mounts, reap_crashed, restart_daemon, sessions_fixture,
                            start_daemon_or_fail)

daemon = daemon_fixture(pytest)
sessions = sessions_fixture(pytest)

MiB = 1 << 20
SESSION_ID = re.compile(r"\bs-[0-9a-f]{24}\b")
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
SESSION_KEYS = {"id", "profile", "state", "created_at", "last_used_at", "stop_after_s",
                "idle_timeout_s", "stopped_at", "delete_at", "execution_count", "lost_names",
                "usage"}
UNKNOWN_ID = "s-" + "0" * 23 + "1"


# ------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------


def sha(data):
    return hashlib.sha256(data).hexdigest()


def parse_ts(s):
    return datetime.datetime.strptime(s.split(".")[0].rstrip("Z"), "%Y-%m-%dT%H:%M:%S")


def get(d, sid):
    r = d.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200, f"GET {sid}: " + d.why(r)
    return r.json()


def state_of(d, sid):
    return get(d, sid)["state"]


def listed(d, query=""):
    r = d.get("/v1/sessions" + query)
    assert r.status_code == 200, f"GET /v1/sessions{query}: " + d.why(r)
    return {s["id"]: s for s in r.json()["sessions"]}


def stop(d, sid, expect=200):
    r = d.post(f"/v1/sessions/{sid}/stop", timeout=180)
    assert r.status_code == expect, f"stop {sid}: " + d.why(r)
    return r.json()


def resume(d, sid, expect=200):
    r = d.post(f"/v1/sessions/{sid}/resume", timeout=180)
    assert r.status_code == expect, f"resume {sid}: " + d.why(r)
    return r.json()


def fork(d, sid, n=None, expect=201, body=None):
    if body is None:
        body = {} if n is None else {"n": n}
    r = d.post(f"/v1/sessions/{sid}/fork", json=body, timeout=300)
    assert r.status_code == expect, f"fork {sid} {body}: " + d.why(r)
    return r.json()


def run_ok(d, sid, code, **fields):
    """Executes a cell that must end with status ok; returns the execution object."""
    res = d.execute(sid, code, http_timeout=180, **fields)
    assert res["status"] == "ok", f"cell failed: {code!r}\n{json.dumps(res, indent=1)[:4000]}"
    return res


def assert_stopped_object(s, sid):
    assert s["id"] == sid and s["state"] == "stopped", s
    assert SESSION_KEYS <= set(s), f"missing keys {SESSION_KEYS - set(s)} in {s}"
    assert TIMESTAMP.match(s["stopped_at"] or ""), s
    assert TIMESTAMP.match(s["delete_at"] or ""), s
    assert parse_ts(s["delete_at"]) > parse_ts(s["stopped_at"]), s
    assert isinstance(s["lost_names"], list), s


def wait_for(what, predicate, timeout, interval=0.1):
    """Polls predicate() until it returns a true value (returned) or fails after timeout with
    the last value it returned."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout}s (last: {v!r})", pytrace=False)
        time.sleep(interval)


def cgroups_left(sid, timeout=10.0):
    """The cgroups of sid still there after up to timeout seconds ([] once none)."""
    deadline = time.monotonic() + timeout
    while True:
        found = cgroup_dirs_named({f"airlock-{sid}"})
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def session_dir(d, sid):
    return pathlib.Path(d.state_dir) / "sessions" / sid


def state_file(d, sid):
    return session_dir(d, sid) / "python.state"


def state_size(d, sid):
    """Size of the saved Python state on disk (0 while there is none)."""
    try:
        return state_file(d, sid).stat().st_size
    except OSError:
        return 0


def gone_text(r):
    """error + reason of a 404 on a session that is gone, lower case."""
    body = r.json()
    return f"{body.get('error', '')} {body.get('reason', '')}".lower()


class LongCell:
    """Runs a cell in a thread (answer in .response) and waits until GET shows it busy."""

    def __init__(self, d, sid, code="import time\ntime.sleep(55)"):
        self.d, self.sid = d, sid
        self.response = self.error = None
        self.t = threading.Thread(target=self._run, args=(code,), daemon=True)
        self.t.start()
        deadline = time.monotonic() + 60
        while d.get(f"/v1/sessions/{sid}").json().get("state") != "busy":
            assert self.t.is_alive(), \
                f"the cell ended early: {self.response is not None and self.response.text}"
            assert time.monotonic() < deadline, "the session never became busy"
            time.sleep(0.02)
        time.sleep(0.2)     # let the interpreter reach the sleep

    def _run(self, code):
        try:
            self.response = self.d.post(f"/v1/sessions/{self.sid}/execute",
                                        json={"code": code}, timeout=180)
        except requests.RequestException as e:
            self.error = e

    def interrupt_and_join(self):
        if self.t.is_alive() and self.d.alive():
            try:
                self.d.post(f"/v1/sessions/{self.sid}/interrupt", timeout=30)
            except requests.RequestException:
                pass
        self.t.join(60)
        assert not self.t.is_alive(), "the cell did not end within 60s of the interrupt"
        return self.response


class Fleet:
    """The daemons of one test, all on one private working (and state) directory: started,
    crashed, restarted. close() stops the live ones (their exit status and leftovers
    checked), then removes what is left of crashed ones and the directory."""

    def __init__(self):
        self.workdir = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-lifecycle-"))
        self.mounts_before = host_mounts()
        self.live = []
        self.crashed = []

    def start(self, args, **kw):
        d = start_daemon_or_fail(pytest, workdir=self.workdir, args=list(args), **kw)
        self.live.append(d)
        return d

    def crash(self, d):
        rec = crash_daemon(d)
        self.live.remove(d)
        self.crashed.append(d)
        return rec

    def restart(self, old):
        d = restart_daemon(pytest, old)
        self.live.append(d)
        return d

    def stop(self, d):
        """SIGTERM of one daemon, which must exit 0 and leave nothing."""
        self.live.remove(d)
        rc, problems = d.stop(timeout=120)
        assert rc == 0 and not problems, "\n".join(problems)

    def close(self):
        problems = []
        for d in reversed(self.live):
            _, p = d.stop(timeout=120)
            problems += p
        self.live = []
        for d in self.crashed:
            reap_crashed(d)
        shutil.rmtree(self.workdir, ignore_errors=True)
        return problems

    def new_mounts_of_ours(self):
        return sorted(m for m in host_mounts() - self.mounts_before
                      if str(self.workdir) in m[0] or str(self.workdir) in m[1])


@pytest.fixture
def fleet():
    f = Fleet()
    try:
        yield f
    finally:
        problems = f.close()
    if problems:
        pytest.fail("a daemon did not stop cleanly:\n  " + "\n  ".join(problems), pytrace=False)


# ------------------------------------------------------------------------------------------
# States and transitions
# ------------------------------------------------------------------------------------------


def test_created_session_is_idle_and_live(daemon, sessions):
    sid = sessions.new()
    s = get(daemon, sid)
    assert SESSION_KEYS <= set(s), f"missing keys {SESSION_KEYS - set(s)} in {s}"
    assert s["state"] == "idle" and s["stopped_at"] is None and s["delete_at"] is None, s
    assert s["lost_names"] == [] and s["execution_count"] == 0, s
    assert s["stop_after_s"] == s["idle_timeout_s"] == 300, s
    assert sid in listed(daemon, "?state=idle") and sid in listed(daemon, "?state=live")
    assert sid not in listed(daemon, "?state=stopped")
    assert sid not in listed(daemon, "?state=busy")
    res = run_ok(daemon, sid, "1 + 1")
    assert "resumed" not in res, f"a session that never stopped reports a resume: {res}"


@pytest.mark.parametrize("field", ["stop_after_s", "idle_timeout_s"])
def test_stop_after_at_create_and_its_alias(daemon, sessions, field):
    sid = sessions.new(**{field: 77})
    s = get(daemon, sid)
    assert s["stop_after_s"] == 77 and s["idle_timeout_s"] == 77, s


def test_unknown_state_filter_is_400(daemon):
    r = daemon.get("/v1/sessions?state=sleeping")
    assert r.status_code == 400, daemon.why(r)
    assert r.json().get("field") == "state", r.text


def test_busy_is_visible_from_another_thread(daemon, sessions):
    sid = sessions.new()
    cell = LongCell(daemon, sid)
    try:
        assert state_of(daemon, sid) == "busy"
        assert sid in listed(daemon, "?state=busy")
        assert sid in listed(daemon, "?state=live")
        assert sid not in listed(daemon, "?state=idle")
        assert sid not in listed(daemon, "?state=stopped")
    finally:
        resp = cell.interrupt_and_join()
    assert resp is not None and resp.status_code == 200, cell.error
    assert state_of(daemon, sid) == "idle"


def test_stop_describes_from_disk_and_get_does_not_resume(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, "x = 1")
    s = stop(daemon, sid)
    assert_stopped_object(s, sid)
    # default --delete-after: 5 days after the stop
    delta = parse_ts(s["delete_at"]) - parse_ts(s["stopped_at"])
    assert abs(delta.total_seconds() - 5 * 86400) <= 2, s
    assert not cgroups_left(sid), "a stopped session still has a cgroup"
    for _ in range(3):
        g = get(daemon, sid)
        assert_stopped_object(g, sid)
        assert g["stopped_at"] == s["stopped_at"] and g["execution_count"] == 1, g
    assert not cgroup_dirs_named({f"airlock-{sid}"}), "GET resumed the stopped session"
    everything = listed(daemon)
    assert everything.get(sid, {}).get("state") == "stopped", everything.get(sid)
    assert sid in listed(daemon, "?state=stopped")
    assert sid not in listed(daemon, "?state=live")
    assert sid not in listed(daemon, "?state=idle")
    assert state_of(daemon, sid) == "stopped", "listing resumed the stopped session"


def test_explicit_resume(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, "x = 'kept'")
    stop(daemon, sid)
    r = resume(daemon, sid)
    assert r["id"] == sid and r["state"] == "idle" and r["resumed"] is True, r
    assert r["lost_names"] == [] and "resume_error" not in r, r
    assert r["delete_at"] is None, r
    assert state_of(daemon, sid) == "idle"
    again = resume(daemon, sid)
    assert again["resumed"] is False and again["state"] == "idle", again
    first = run_ok(daemon, sid, "x")
    assert first["result"] == "'kept'" and first.get("resumed") is True, first
    second = run_ok(daemon, sid, "x")
    assert "resumed" not in second, second


def _resume_by_execute(d, sid):
    res = run_ok(d, sid, "x")
    assert res["result"] == "41" and res.get("resumed") is True, res
    assert res["lost_names"] == [] and "resume_error" not in res, res


def _resume_by_file_get(d, sid):
    r = d.get(f"/v1/sessions/{sid}/files/before.txt")
    assert r.status_code == 200 and r.content == b"before", d.why(r)


def _resume_by_file_put(d, sid):
    r = d.put(f"/v1/sessions/{sid}/files/put.txt", data=b"put while stopped")
    assert r.status_code == 200 and r.json() == {"path": "put.txt", "size": 17}, d.why(r)


def _resume_by_file_delete(d, sid):
    r = d.delete(f"/v1/sessions/{sid}/files/before.txt")
    assert r.status_code == 200, d.why(r)


def _resume_by_listing(d, sid):
    r = d.get(f"/v1/sessions/{sid}/files")
    assert r.status_code == 200, d.why(r)
    assert "before.txt" in [e["name"] for e in r.json()["entries"]], r.json()


def _resume_by_listing_dir(d, sid):
    r = d.get(f"/v1/sessions/{sid}/files?dir=sub")
    assert r.status_code == 200, d.why(r)
    assert [e["name"] for e in r.json()["entries"]] == ["inner.txt"], r.json()


@pytest.mark.parametrize("call", [_resume_by_execute, _resume_by_file_get, _resume_by_file_put,
                                  _resume_by_file_delete, _resume_by_listing,
                                  _resume_by_listing_dir],
                         ids=["execute", "file-GET", "file-PUT", "file-DELETE", "files-listing",
                              "files-listing-dir"])
def test_transparent_resume(daemon, sessions, call):
    sid = sessions.new()
    run_ok(daemon, sid, "x = 41\nimport os\nos.makedirs('/work/sub')\n"
                        "open('/work/before.txt', 'w').write('before')\n"
                        "open('/work/sub/inner.txt', 'w').write('inner')")
    stop(daemon, sid)
    assert state_of(daemon, sid) == "stopped"
    call(daemon, sid)
    assert state_of(daemon, sid) == "idle", f"{call.__name__} did not resume the session"
    assert sid not in listed(daemon, "?state=stopped")
    res = run_ok(daemon, sid, "x + 1")
    assert res["result"] == "42", res
    if call is not _resume_by_execute:
        # the first execution after a resume reports it, whatever caused the resume
        assert res.get("resumed") is True and res["lost_names"] == [], res
    later = run_ok(daemon, sid, "x")
    assert "resumed" not in later, later


def test_interrupt_on_a_stopped_session_does_not_resume_it(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, "x = 1")
    stop(daemon, sid)
    r = daemon.post(f"/v1/sessions/{sid}/interrupt")
    assert r.status_code == 200, daemon.why(r)
    assert r.json() == {"id": sid, "interrupted": False}, r.text
    assert state_of(daemon, sid) == "stopped"
    assert not cgroup_dirs_named({f"airlock-{sid}"}), "the interrupt started a sandbox"


def test_stop_twice_is_200(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, "x = 1")
    first = stop(daemon, sid)
    second = stop(daemon, sid)
    assert_stopped_object(second, sid)
    assert second["stopped_at"] == first["stopped_at"], (first, second)
    assert state_of(daemon, sid) == "stopped"


def test_stop_while_busy_is_409(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, "kept = 'yes'")
    cell = LongCell(daemon, sid)
    try:
        r = daemon.post(f"/v1/sessions/{sid}/stop", timeout=60)
        assert r.status_code == 409, daemon.why(r)
        assert r.json().get("error"), r.text
        assert state_of(daemon, sid) == "busy"
    finally:
        resp = cell.interrupt_and_join()
    assert resp is not None and resp.status_code == 200, cell.error
    assert resp.json()["state"] == "preserved", resp.text
    assert run_ok(daemon, sid, "kept")["result"] == "'yes'"


def test_stop_resume_fork_of_unknown_ids_are_404(daemon):
    for verb in ("stop", "resume", "fork"):
        r = daemon.post(f"/v1/sessions/{UNKNOWN_ID}/{verb}", json={})
        assert r.status_code == 404, f"{verb}: " + daemon.why(r)


def test_delete_a_stopped_session(daemon):
    sid = daemon.create_session()
    try:
        run_ok(daemon, sid, "x = 1\nopen('/work/f.txt', 'w').write('f')")
        stop(daemon, sid)
        assert session_dir(daemon, sid).is_dir(), "a stopped session has no state on disk"
        r = daemon.delete(f"/v1/sessions/{sid}")
        assert r.status_code == 200 and r.json() == {"id": sid, "deleted": True}, daemon.why(r)
        for method, path, kw in (("GET", f"/v1/sessions/{sid}", {}),
                                 ("POST", f"/v1/sessions/{sid}/execute", {"json": {"code": "1"}}),
                                 ("GET", f"/v1/sessions/{sid}/files", {}),
                                 ("POST", f"/v1/sessions/{sid}/resume", {}),
                                 ("POST", f"/v1/sessions/{sid}/stop", {})):
            r = daemon.req(method, path, **kw)
            assert r.status_code == 404, f"{method} {path}: " + daemon.why(r)
            assert "deleted" in r.json().get("error", "").lower(), r.text
            assert r.json().get("reason"), r.text
        assert sid not in listed(daemon)
        wait_for("the deleted session's directory to go", lambda: not session_dir(
            daemon, sid).exists(), 10)
        assert daemon.delete(f"/v1/sessions/{sid}").status_code == 404
    finally:
        daemon.delete_session(sid)


def test_delete_of_a_live_session_removes_its_saved_state(daemon):
    sid = daemon.create_session()
    try:
        run_ok(daemon, sid, "x = 1")
        stop(daemon, sid)
        run_ok(daemon, sid, "x")     # live again, with saved state on disk
        r = daemon.delete(f"/v1/sessions/{sid}")
        assert r.status_code == 200 and r.json() == {"id": sid, "deleted": True}, daemon.why(r)
        wait_for("the deleted session's directory to go", lambda: not session_dir(
            daemon, sid).exists(), 10)
        r = daemon.get(f"/v1/sessions/{sid}")
        assert r.status_code == 404 and "deleted" in r.json()["error"].lower(), r.text
    finally:
        daemon.delete_session(sid)


# ------------------------------------------------------------------------------------------
# What survives a stop
# ------------------------------------------------------------------------------------------

SETUP_VALUES = r'''
import numpy as np
import pandas as pd
i = 42
big = 2 ** 100
f = 3.5
s = "héllo wörld"
b = b"\x00\x01\xff"
shared = [1, 2]
d = {"a": shared, "b": shared}
l = [shared, d]
arr = np.arange(12, dtype=np.float64).reshape(3, 4)
df = pd.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"], "z": [0.5, None, 2.5]})
G = 10
def scaled(v):
    return v * G
sq = lambda v: v * v
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm2(self):
        return self.x ** 2 + self.y ** 2
p = Point(3, 4)
'''

# Runs first after the resume: no import of numpy or pandas here, np and pd must be back.
CHECK_VALUES = r'''
import json
R = {
    "i": i, "big": big == 2 ** 100, "f": f, "s": s, "b": b == b"\x00\x01\xff",
    "shared_identity": d["a"] is d["b"] is shared and l[0] is shared and l[1] is d,
    "arr": bool(np.array_equal(arr, np.arange(12, dtype=np.float64).reshape(3, 4)))
           and arr.dtype == np.float64 and arr.shape == (3, 4),
    "np_usable": float(np.ones(4).sum()),
    "scaled": scaled(2), "sq": sq(7), "norm2": p.norm2(),
    "instance": isinstance(p, Point) and type(p) is Point, "new_instance": Point(1, 2).norm2(),
}
shared.append(3)
R["shared_mutation"] = [d["b"], l[0]]
G = 11
R["scaled_reads_the_global"] = scaled(2)
print(json.dumps(R, sort_keys=True))
'''

EXPECTED_VALUES = {
    "i": 42, "big": True, "f": 3.5, "s": "héllo wörld", "b": True, "shared_identity": True,
    "arr": True, "np_usable": 4.0, "scaled": 20, "sq": 49, "norm2": 25, "instance": True,
    "new_instance": 5, "shared_mutation": [[1, 2, 3], [1, 2, 3]], "scaled_reads_the_global": 22,
}


def test_values_files_and_shell_survive_stop_and_resume(daemon, sessions):
    sid = sessions.new(env={"E2E_LIFECYCLE_ENV": "from-create"}, stop_after_s=77)
    run_ok(daemon, sid, SETUP_VALUES)
    run_ok(daemon, sid, "mkdir -p /work/sub && cd /work/sub && export FOO=bar && "
                        "printf '#!/bin/sh\\necho script-ran\\n' > /work/run.sh && "
                        "chmod 755 /work/run.sh && printf secret > /work/private.txt && "
                        "chmod 600 /work/private.txt && echo nested > /work/sub/nested.txt",
           language="bash")
    blob = os.urandom(MiB + 123)
    r = daemon.put(f"/v1/sessions/{sid}/files/data/blob.bin", data=blob)
    assert r.status_code == 200, daemon.why(r)
    count = get(daemon, sid)["execution_count"]
    assert count == 2, get(daemon, sid)

    s = stop(daemon, sid)
    assert s["execution_count"] == count and s["lost_names"] == [], s
    assert s["profile"] == "default" and s["stop_after_s"] == 77, s

    first = run_ok(daemon, sid, CHECK_VALUES)
    assert first.get("resumed") is True and first["lost_names"] == [], first
    assert "resume_error" not in first, first
    assert first["execution_count"] == count + 1, first
    assert json.loads(first["stdout"]) == EXPECTED_VALUES, first["stdout"]

    res = run_ok(daemon, sid, 'print(df.equals(pd.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"], '
                              '"z": [0.5, None, 2.5]})))')
    assert res["stdout"] == "True\n", res
    assert "resumed" not in res, res
    assert res["execution_count"] == count + 2, res

    res = run_ok(daemon, sid, 'pwd; echo "$FOO"; /work/run.sh; cat nested.txt', language="bash")
    assert res["stdout"] == "/work/sub\nbar\nscript-ran\nnested\n", res
    res = run_ok(daemon, sid, "import os\n(oct(os.stat('/work/run.sh').st_mode & 0o777), "
                              "oct(os.stat('/work/private.txt').st_mode & 0o777), "
                              "os.environ.get('E2E_LIFECYCLE_ENV'))")
    assert res["result"] == "('0o755', '0o600', 'from-create')", res
    r = daemon.get(f"/v1/sessions/{sid}/files/data/blob.bin")
    assert r.status_code == 200 and sha(r.content) == sha(blob), daemon.why(r)
    after = get(daemon, sid)
    assert after["stop_after_s"] == 77 and after["profile"] == "default", after
    assert after["execution_count"] == count + 4, after


UNSAVEABLE = r'''
import socket, threading, time
keep = "kept"
n = 7
gen = (k for k in range(10))
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
lock = threading.Lock()
th = threading.Thread(target=time.sleep, args=(3600,), daemon=True)
th.start()
fh = open("/work/open.txt", "w")
'''
LOST = {"gen", "sock", "lock", "th", "fh"}


def test_unsaveable_names_are_reported_and_the_rest_survives(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, UNSAVEABLE)
    s = stop(daemon, sid)
    assert LOST <= set(s["lost_names"]), s["lost_names"]
    assert not {"keep", "n", "socket", "threading", "time"} & set(s["lost_names"]), s
    assert LOST <= set(get(daemon, sid)["lost_names"]), get(daemon, sid)
    first = run_ok(daemon, sid, "keep, n, sorted(k for k in %r if k in globals())" % sorted(LOST))
    assert first.get("resumed") is True, first
    assert LOST <= set(first["lost_names"]), first
    assert not {"keep", "n"} & set(first["lost_names"]), first
    assert first["result"] == "('kept', 7, [])", first
    res = run_ok(daemon, sid, "time.monotonic() > 0, socket.AF_UNIX > 0")
    assert res["result"] == "(True, True)" and "resumed" not in res, res


# ------------------------------------------------------------------------------------------
# Daemon restart and crash
# ------------------------------------------------------------------------------------------

DF_CELL = ("import pandas as pd\n"
           "df = pd.DataFrame({'a': range(1000), 'b': [str(k) for k in range(1000)]})\n"
           "x = 'saved by sigterm'")
DF_CHECK = ("print(df.equals(pd.DataFrame({'a': range(1000), "
            "'b': [str(k) for k in range(1000)]})), x)")


def test_sigterm_then_a_new_daemon_resumes(fleet):
    d = fleet.start(["--pool-size", "1"])
    sid = d.create_session()
    run_ok(d, sid, DF_CELL)
    run_ok(d, sid, "echo kept > /work/kept.txt && cd /tmp && export AFTER_RESTART=yes",
           language="bash")
    earlier = d.create_session()
    run_ok(d, earlier, "y = 'stopped before the restart'")
    stop(d, earlier)
    fleet.stop(d)      # SIGTERM: exits 0, nothing left behind

    d2 = fleet.restart(d)
    everything = listed(d2)
    for s_id in (sid, earlier):
        assert everything.get(s_id, {}).get("state") == "stopped", everything.get(s_id)
        assert s_id in listed(d2, "?state=stopped")
    assert_stopped_object(get(d2, sid), sid)
    assert state_of(d2, sid) == "stopped", "GET resumed it"
    res = run_ok(d2, sid, DF_CHECK)
    assert res["stdout"] == "True saved by sigterm\n" and res.get("resumed") is True, res
    assert "resume_error" not in res, res
    res = run_ok(d2, sid, 'cat /work/kept.txt; pwd; echo "$AFTER_RESTART"', language="bash")
    assert res["stdout"] == "kept\n/tmp\nyes\n", res
    assert run_ok(d2, earlier, "y")["result"] == "'stopped before the restart'"
    for s_id in (sid, earlier):
        assert d2.delete(f"/v1/sessions/{s_id}").status_code == 200


CRASH_ARGS = ["--pool-size", "1", "--checkpoint-after", "1"]


def prepare_crash_victim(d, blob_size=2 * MiB):
    """A session with an uploaded file, a file written by a cell and a checkpointed variable;
    returns (sid, {path: sha256}, the variable's value)."""
    sid = d.create_session()
    token = os.urandom(6).hex()
    blob = os.urandom(blob_size)
    r = d.put(f"/v1/sessions/{sid}/files/up/a.bin", data=blob)
    assert r.status_code == 200, d.why(r)
    run_ok(d, sid, f"x = 'checkpointed-{token}'\n"
                   f"open('/work/c.txt', 'w').write('written by a cell {token}')\n"
                   "_ckpt_probe = (k for k in range(3))")
    files = {"up/a.bin": sha(blob), "c.txt": sha(f"written by a cell {token}".encode())}
    wait_checkpoint(d, sid)
    return sid, files, f"checkpointed-{token}"


def wait_checkpoint(d, sid, timeout=60):
    """Until the checkpoint of sid took effect: GET lists the unsaveable probe among the
    lost names of the last checkpoint, and the saved state is on disk."""
    wait_for(f"a checkpoint of {sid} (--checkpoint-after 1)",
             lambda: "_ckpt_probe" in get(d, sid)["lost_names"] and state_file(d, sid).is_file(),
             timeout, interval=0.2)


def check_after_crash(fleet, old, rec, new, sid, files, xval):
    """Nothing of the crashed daemon is left, the session is listed stopped, its files are
    intact and its checkpointed variable is back."""
    problems = old.wait_no_leftovers(timeout=20, names=rec.names, pids=rec.pids)
    assert not problems, ("the restarted daemon left things of the crashed one:\n  "
                          + "\n  ".join(problems))
    assert not rec.runners_alive(), f"runners of the crashed daemon: {rec.runners_alive()}"
    assert rec.runners, "no runner was seen before the crash: the check above would be empty"
    assert not fleet.new_mounts_of_ours(), fleet.new_mounts_of_ours()
    everything = listed(new)
    assert everything.get(sid, {}).get("state") == "stopped", everything.get(sid)
    for path, digest in files.items():
        r = new.get(f"/v1/sessions/{sid}/files/{path}", timeout=120)
        assert r.status_code == 200, f"{path}: " + new.why(r)
        assert sha(r.content) == digest, f"{path} changed across the crash"
    res = run_ok(new, sid, "x")
    assert res["result"] == repr(xval), res
    assert res.get("resumed") is True and "resume_error" not in res, res
    return res


def test_kill9_during_a_running_cell(fleet):
    d = fleet.start(CRASH_ARGS)
    sid, files, xval = prepare_crash_victim(d)
    cell = LongCell(d, sid, "x = 'changed by the cell that never ended'\n"
                            "import time\ntime.sleep(55)")
    rec = fleet.crash(d)
    cell.t.join(60)
    assert not cell.t.is_alive(), "the client still waits on the killed daemon"
    new = fleet.restart(d)
    check_after_crash(fleet, d, rec, new, sid, files, xval)


def test_kill9_before_any_checkpoint_keeps_the_files(fleet):
    """Checkpoints off: the files a call wrote are on disk when it answers, the variables are
    not. After the crash the session comes back with its files, and its first result says
    that its variables were lost; a session that never ran a cell comes back without a word."""
    d = fleet.start(["--pool-size", "1", "--checkpoint-after", "0"])
    sid = d.create_session()
    idle_sid = d.create_session()
    blob = os.urandom(MiB)
    assert d.put(f"/v1/sessions/{sid}/files/up.bin", data=blob).status_code == 200
    run_ok(d, sid, "x = 1\nopen('/work/c.txt', 'w').write('from a cell')")
    assert not state_file(d, sid).exists(), "a checkpoint ran although they are off"
    rec = fleet.crash(d)
    new = fleet.restart(d)
    problems = d.wait_no_leftovers(timeout=20, names=rec.names, pids=rec.pids)
    assert not problems, "\n".join(problems)
    assert listed(new).get(sid, {}).get("state") == "stopped"
    r = new.get(f"/v1/sessions/{sid}/files/up.bin", timeout=120)
    assert r.status_code == 200 and sha(r.content) == sha(blob), new.why(r)
    res = run_ok(new, sid, "open('/work/c.txt').read()")
    assert res["result"] == "'from a cell'" and res.get("resumed") is True, res
    assert "lost" in res.get("resume_error", "") and "variables" in res["resume_error"], res
    res = run_ok(new, sid, "'x' in globals()")
    assert res["result"] == "False", res
    res = run_ok(new, idle_sid, "1 + 1")
    assert res["result"] == "2" and res.get("resumed") is True, res
    assert "resume_error" not in res, res


def test_kill9_right_after_a_stop_request(fleet):
    d = fleet.start(CRASH_ARGS)
    # big enough that saving takes a while: the kill lands during the stop, or just after
    sid, files, xval = prepare_crash_victim(d, blob_size=40 * MiB)
    run_ok(d, sid, "import os\nbig = os.urandom(40 << 20)")
    wait_for("a checkpoint with the big variable",
             lambda: state_size(d, sid) > 40 * MiB, 120, interval=0.2)
    with socket.create_connection(("127.0.0.1", d.port), timeout=30) as s:
        s.sendall(f"POST /v1/sessions/{sid}/stop HTTP/1.1\r\nHost: {d.host}\r\n"
                  f"Authorization: Bearer {d.token}\r\nContent-Length: 0\r\n\r\n".encode())
        time.sleep(0.05)
        rec = fleet.crash(d)
    new = fleet.restart(d)
    check_after_crash(fleet, d, rec, new, sid, files, xval)
    res = run_ok(new, sid, "len(big)")
    assert res["result"] == str(40 << 20), res


def test_kill9_during_a_large_upload(fleet):
    d = fleet.start(CRASH_ARGS)
    sid, files, xval = prepare_crash_victim(d)
    total = 50 * MiB
    chunk = os.urandom(MiB)
    with socket.create_connection(("127.0.0.1", d.port), timeout=30) as s:
        s.sendall(f"PUT /v1/sessions/{sid}/files/big-upload.bin HTTP/1.1\r\n"
                  f"Host: {d.host}\r\nAuthorization: Bearer {d.token}\r\n"
                  f"Content-Type: application/octet-stream\r\n"
                  f"Content-Length: {total}\r\n\r\n".encode())
        for _ in range(25):             # half of it, slowly
            s.sendall(chunk)
            time.sleep(0.02)
        rec = fleet.crash(d)
    new = fleet.restart(d)
    check_after_crash(fleet, d, rec, new, sid, files, xval)
    r = new.get(f"/v1/sessions/{sid}/files/big-upload.bin", stream=True)
    try:
        assert r.status_code == 404, ("half an upload cut by the crash is in /work: "
                                      + f"HTTP {r.status_code} {r.headers}")
    finally:
        r.close()


# ------------------------------------------------------------------------------------------
# Stop after, delete after, max stopped bytes
# ------------------------------------------------------------------------------------------


SLOW_TO_SAVE = ("import time\n"
                "class SlowToSave:\n"
                "    def __reduce__(self):\n"
                "        time.sleep(2)\n"
                "        return (str, ('saved',))\n"
                "slow = SlowToSave()")


def test_a_wave_of_checkpoints_does_not_hold_up_the_warm_pool(fleet):
    """The worker that checkpoints quiet sessions also refills the warm pool. A checkpoint
    takes about 12 ms, so 1,000 sessions quiet at once kept the pool empty for 12 s and every
    create meanwhile paid a fork on the request path; now the pool and the checkpoints take
    turns. Here three sessions whose state takes 2 s each to save make the wave, and a create
    in its middle takes the pool's member: the pool is refilled before the wave ends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    env["AIRLOCK_LOG"] = "debug"
    d = fleet.start(["--pool-size", "1", "--checkpoint-after", "1"], env=env)
    ids = []
    try:
        for _ in range(3):
            ids.append(d.create_session())
            run_ok(d, ids[-1], SLOW_TO_SAVE)
        time.sleep(1.5)     # quiet for --checkpoint-after: the wave is under way
        mark = d.log_size()
        ids.append(d.create_session())
        wait_for("the three checkpoints",
                 lambda: d.log_text().count('msg="checkpoint saved"') >= 3, 60)
        lines = d.log_since(mark).splitlines()
        refill = [i for i, line in enumerate(lines) if 'msg="warm session started"' in line]
        saved = [i for i, line in enumerate(lines) if 'msg="checkpoint saved"' in line]
        assert refill, "the pool was not refilled after the create:\n" + "\n".join(lines)
        assert saved and saved[-1] > refill[0], (
            "the pool waited for the whole wave of checkpoints:\n" + "\n".join(lines))
    finally:
        for sid in ids:
            d.delete_session(sid)


def test_idle_session_stops_then_is_deleted(fleet):
    d = fleet.start(["--pool-size", "0", "--stop-after", "1", "--delete-after", "2"])
    sid = d.create_session()
    r = d.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200 and r.json()["stop_after_s"] == 1, d.why(r)
    run_ok(d, sid, "x = 1\nopen('/work/f.txt', 'w').write('f')")

    def stopped():
        r = d.get(f"/v1/sessions/{sid}")
        assert r.status_code == 200, "deleted before it was seen stopped: " + d.why(r)
        return r.json() if r.json()["state"] == "stopped" else None
    s = wait_for("the idle session to stop by itself", stopped, 30, interval=0.05)
    assert_stopped_object(s, sid)
    delta = (parse_ts(s["delete_at"]) - parse_ts(s["stopped_at"])).total_seconds()
    assert 1 <= delta <= 3, s

    def gone():
        r = d.get(f"/v1/sessions/{sid}")
        return [r] if r.status_code == 404 else None  # a 404 Response is falsy: wrap it
    [r] = wait_for("the stopped session to be deleted (--delete-after 2)", gone, 30, interval=0.2)
    text = gone_text(r)
    assert "deleted" in text and "stop" in text, r.text
    r = d.post(f"/v1/sessions/{sid}/execute", json={"code": "x"})
    assert r.status_code == 404 and "deleted" in gone_text(r), d.why(r)
    assert sid not in listed(d)
    wait_for("its directory under <state_dir>/sessions to go",
             lambda: not session_dir(d, sid).exists(), 10)


def test_full_disk_while_stopping_is_507_and_the_session_lives(fleet):
    """A state directory on an 8 MiB tmpfs: a 20 MiB variable cannot be saved. The stop says
    why, nothing half-written is left where a resume would read it, the session goes on."""
    state = fleet.workdir / "state"
    state.mkdir(mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(state)],
                   check=True)
    try:
        d = fleet.start(["--pool-size", "0"])
        sid = d.create_session()
        run_ok(d, sid, "import os\nblob = os.urandom(20 << 20)\nsmall = 'kept'")
        r = d.post(f"/v1/sessions/{sid}/stop", timeout=180)
        assert r.status_code == 507, d.why(r)
        assert "disk is full" in r.json().get("error", ""), r.text
        assert state_of(d, sid) == "idle"
        leftovers = [p.name for p in session_dir(d, sid).glob("*")] \
            if session_dir(d, sid).exists() else []
        assert "python.state" not in leftovers and not any(".tmp-" in n for n in leftovers), \
            leftovers
        res = run_ok(d, sid, "len(blob), small")
        assert res["result"] == "(20971520, 'kept')" and "resumed" not in res, res
        assert d.delete(f"/v1/sessions/{sid}").status_code == 200
    finally:
        # Lazily: the daemon may still hold it until the fleet stops it.
        subprocess.run(["umount", "-l", str(state)], check=False)


def test_state_over_max_stopped_bytes_is_507_and_the_session_lives(fleet):
    d = fleet.start(["--pool-size", "0", "--max-stopped-bytes", "1M"])
    sid = d.create_session()
    run_ok(d, sid, "import os\nblob = os.urandom(5 << 20)\nsmall = 'kept'")
    r = d.post(f"/v1/sessions/{sid}/stop", timeout=180)
    assert r.status_code == 507, d.why(r)
    assert r.json().get("error"), r.text
    assert state_of(d, sid) == "idle"
    assert sid in listed(d, "?state=live") and sid not in listed(d, "?state=stopped")
    res = run_ok(d, sid, "len(blob), small")
    assert res["result"] == "(5242880, 'kept')" and "resumed" not in res, res
    assert d.delete(f"/v1/sessions/{sid}").status_code == 200


# ------------------------------------------------------------------------------------------
# Fork
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 33, "x", -1, 1.5, True, "3"],
                         ids=["0", "33", "x", "-1", "1.5", "true", "str-3"])
def test_fork_n_out_of_range_is_400(daemon, sessions, n):
    sid = sessions.new()
    before = set(listed(daemon))
    r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": n})
    assert r.status_code == 400, daemon.why(r)
    assert r.json().get("field") == "n", r.text
    assert set(listed(daemon)) <= before, "a refused fork made sessions"


def test_fork_of_an_unknown_id_is_404_naming_it(daemon):
    r = daemon.post(f"/v1/sessions/{UNKNOWN_ID}/fork", json={"n": 1})
    assert r.status_code == 404, daemon.why(r)
    assert UNKNOWN_ID in r.json()["error"], r.text


def test_fork_of_a_deleted_session_is_404(daemon):
    sid = daemon.create_session()
    daemon.delete_session(sid)
    r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
    assert r.status_code == 404 and sid in r.json()["error"], daemon.why(r)


def test_fork_of_a_busy_parent_is_409(daemon, sessions):
    sid = sessions.new()
    before = set(listed(daemon))
    cell = LongCell(daemon, sid)
    try:
        r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 1}, timeout=60)
        assert r.status_code == 409, daemon.why(r)
    finally:
        cell.interrupt_and_join()
    assert set(listed(daemon)) <= before, "a refused fork made sessions"


FORK_SETUP = r'''
import random, numpy as np
x = 1
rng = np.random.default_rng()
pyrng = random.Random()
open('/work/shared.txt', 'w').write('from the parent')
'''
DRAWS = ("import json, random\n"
         "print(json.dumps([rng.random(4).tolist(), [pyrng.random() for _ in range(4)], "
         "[random.random() for _ in range(4)]]))")
UID_MAP = "print(open('/proc/self/uid_map').read())"


def host_uids(d, sid):
    res = run_ok(d, sid, UID_MAP)
    uids = {int(line.split()[1]) for line in res["stdout"].splitlines() if line.strip()}
    assert uids, res
    return uids


def test_fork_three_children_copy_then_diverge(daemon, sessions):
    parent = sessions.new()
    run_ok(daemon, parent, FORK_SETUP)
    body = fork(daemon, parent, 3)
    kids = [s["id"] for s in body["sessions"]]
    sessions.ids.extend(kids)
    assert len(kids) == 3 and len(set(kids)) == 3 and parent not in kids, body
    for s in body["sessions"]:
        assert SESSION_ID.fullmatch(s["id"]) and s["state"] == "idle", s
        assert s["profile"] == "default", s
    assert state_of(daemon, parent) == "idle", "the parent does not keep running"
    everyone = [parent] + kids

    # copies of the parent at the moment of the fork
    for k in kids:
        res = run_ok(daemon, k, "x, open('/work/shared.txt').read()")
        assert res["result"] == "(1, 'from the parent')", (k, res)

    # random generators held in variables give other sequences in every sandbox
    draws = [json.loads(run_ok(daemon, s, DRAWS)["stdout"]) for s in everyone]
    for which, name in enumerate(("numpy default_rng", "random.Random()", "random module")):
        seqs = [tuple(dr[which]) for dr in draws]
        assert len(set(seqs)) == len(seqs), f"{name}: forks share a sequence: {seqs}"

    # then they diverge: variables...
    run_ok(daemon, kids[0], "x = 100")
    run_ok(daemon, parent, "x = -1")
    got = [run_ok(daemon, s, "x")["result"] for s in everyone]
    assert got == ["-1", "100", "1", "1"], got
    # ...and files
    r = daemon.put(f"/v1/sessions/{kids[1]}/files/only-kid1.txt", data=b"mine")
    assert r.status_code == 200, daemon.why(r)
    run_ok(daemon, kids[2], "open('/work/shared.txt', 'w').write('kid 2 wrote this')")
    for s in everyone:
        want = 200 if s == kids[1] else 404
        r = daemon.get(f"/v1/sessions/{s}/files/only-kid1.txt")
        assert r.status_code == want, (s, daemon.why(r))
        res = run_ok(daemon, s, "import os\nos.path.exists('/work/only-kid1.txt'), "
                                "open('/work/shared.txt').read()")
        shared = "kid 2 wrote this" if s == kids[2] else "from the parent"
        assert res["result"] == repr((s == kids[1], shared)), (s, res)

    # each in its own sandbox: its own host uids
    uids = {s: host_uids(daemon, s) for s in everyone}
    for a in everyone:
        for b in everyone:
            if a < b:
                assert not uids[a] & uids[b], f"{a} and {b} share host uids {uids[a] & uids[b]}"


def test_fork_with_an_empty_body_of_a_stopped_parent(daemon, sessions):
    parent = sessions.new()
    run_ok(daemon, parent, "x = 5\nopen('/work/p.txt', 'w').write('p')")
    stop(daemon, parent)
    r = daemon.post(f"/v1/sessions/{parent}/fork", data=b"", timeout=300)
    assert r.status_code == 201, daemon.why(r)
    kids = [s["id"] for s in r.json()["sessions"]]
    sessions.ids.extend(kids)
    assert len(kids) == 1, r.json()
    assert state_of(daemon, parent) == "idle", "a stopped parent is resumed first"
    res = run_ok(daemon, kids[0], "x, open('/work/p.txt').read()")
    assert res["result"] == "(5, 'p')", res
    assert run_ok(daemon, parent, "x")["result"] == "5"


# ------------------------------------------------------------------------------------------
# Corrupt saved state
# ------------------------------------------------------------------------------------------


def _garbage(path):
    size = path.stat().st_size
    path.write_bytes(os.urandom(max(size, 64)))


def _truncate(path):
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)


@pytest.mark.parametrize("spoil", [_garbage, _truncate], ids=["garbage", "truncated"])
def test_corrupt_saved_state(daemon, sessions, spoil):
    sid = sessions.new()
    payload = os.urandom(256 << 10)
    r = daemon.put(f"/v1/sessions/{sid}/files/keep.bin", data=payload)
    assert r.status_code == 200, daemon.why(r)
    run_ok(daemon, sid, "import os\nx = 'lost'\nfiller = os.urandom(64 << 10)\n"
                        "open('/work/cell.txt', 'w').write('cell')")
    stop(daemon, sid)
    path = state_file(daemon, sid)
    assert path.is_file(), f"no saved state at {path}: " + str(
        sorted(p.name for p in session_dir(daemon, sid).iterdir())
        if session_dir(daemon, sid).is_dir() else "no session directory")
    spoil(path)

    res = run_ok(daemon, sid, "1 + 1")
    assert res["result"] == "2" and res.get("resumed") is True, res
    err = res.get("resume_error")
    assert isinstance(err, str) and err, f"no resume_error after a {spoil.__name__}: {res}"
    assert "python" in err.lower() or "variable" in err.lower(), err
    r = daemon.get(f"/v1/sessions/{sid}/files/keep.bin")
    assert r.status_code == 200 and sha(r.content) == sha(payload), daemon.why(r)
    res = run_ok(daemon, sid, "open('/work/cell.txt').read()")
    assert res["result"] == "'cell'" and "resumed" not in res, res
    assert daemon.get("/healthz").status_code == 200


# ------------------------------------------------------------------------------------------
# MCP and the chat gateway across a stop
# ------------------------------------------------------------------------------------------


class MCP:
    """A minimal client of the daemon's streamable HTTP MCP transport (docs/MCP.md)."""

    def __init__(self, d):
        self.d, self.sid, self.next_id = d, None, 1

    def _post(self, msg):
        headers = {"Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json"}
        if self.sid:
            headers["Mcp-Session-Id"] = self.sid
        return self.d.post("/mcp", data=json.dumps(msg), headers=headers, timeout=180)

    def request(self, method, params):
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        r = self._post(msg)
        assert r.status_code == 200, f"{method}: " + self.d.why(r)
        body = r.json()
        assert "error" not in body, body
        return r, body["result"]

    def initialize(self):
        r, result = self.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "airlock-e2e-lifecycle", "version": "1"}})
        self.sid = r.headers.get("Mcp-Session-Id")
        assert self.sid, r.headers
        r = self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert r.status_code in (200, 202, 204), self.d.why(r)

    def run_python(self, code):
        _, result = self.request("tools/call", {"name": "run_python",
                                                "arguments": {"code": code}})
        assert result.get("isError") is False, result
        return result

    def close(self):
        if self.sid and self.d.alive():
            try:
                self.d.delete("/mcp", headers={"Mcp-Session-Id": self.sid}, timeout=30)
            except requests.RequestException:
                pass


def test_mcp_keeps_working_across_a_stop(daemon):
    mcp = MCP(daemon)
    made = set()
    try:
        mcp.initialize()
        before = set(listed(daemon))
        mcp.run_python("x = 41")
        made = set(listed(daemon)) - before
        assert len(made) == 1, f"the MCP session's sandbox session? new ids: {made}"
        sid = next(iter(made))
        stop(daemon, sid)
        result = mcp.run_python("x + 1")
        sc = result.get("structuredContent")
        if sc is not None:
            assert sc["result"] == "42", sc
        text = " ".join(c.get("text", "") for c in result["content"] if c["type"] == "text")
        assert "42" in text, result
        assert state_of(daemon, sid) == "idle"
        assert set(listed(daemon)) - before == {sid}, "MCP started another session"
    finally:
        mcp.close()
        for sid in made:
            daemon.delete_session(sid)


def test_chat_gateway_continues_a_stopped_session(fleet):
    from fake_llm import FakeLLM, answer, last_tool, tool_call
    with FakeLLM() as llm:
        d = fleet.start(["--pool-size", "0", "--llm-base-url", llm.base_url,
                         "--llm-model", "fake-model"])
        llm.add(tool_call("run_python", {"code": "x = 41"}), answer("set"))
        r = d.post("/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": "set x"}]}, timeout=180)
        assert r.status_code == 200, d.why(r)
        sid = r.json()["airlock"]["session"]
        assert SESSION_ID.fullmatch(sid or ""), r.json()
        stop(d, sid)

        def check(req):
            assert "42" in last_tool(req), last_tool(req)
            return answer("42")
        llm.add(tool_call("run_python", {"code": "x + 1"}), check)
        r = d.post("/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": "x + 1?"}], "session": sid},
                   timeout=180)
        assert r.status_code == 200, d.why(r)
        llm.check()
        assert r.json()["airlock"]["session"] == sid, r.json()
        assert r.json()["choices"][0]["message"]["content"] == "42", r.json()
        assert state_of(d, sid) == "idle"


# ------------------------------------------------------------------------------------------
# The CLI
# ------------------------------------------------------------------------------------------


def cli(d, *args, stdin=None, timeout=180):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
    env.update(AIRLOCK_URL=d.url, AIRLOCK_TOKEN=d.token)
    return subprocess.run([AIRLOCK, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_cli_sessions_lists_a_stopped_session(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, "x = 1")
    stop(daemon, sid)
    p = cli(daemon, "sessions")
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if sid in ln]
    assert len(lines) == 1 and "stopped" in lines[0].split(), p.stdout
    p = cli(daemon, "sessions", "--json")
    assert p.returncode == 0, p.stderr
    states = {s["id"]: s["state"] for s in json.loads(p.stdout)}
    assert states.get(sid) == "stopped", p.stdout
    assert state_of(daemon, sid) == "stopped", "listing with the CLI resumed it"


def test_cli_sessions_stop_and_resume(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, "x = 'cli'")
    p = cli(daemon, "sessions", "stop", sid)
    assert p.returncode == 0, p.stderr
    assert state_of(daemon, sid) == "stopped"
    p = cli(daemon, "sessions", "resume", sid)
    assert p.returncode == 0, p.stderr
    assert state_of(daemon, sid) == "idle"
    assert run_ok(daemon, sid, "x")["result"] == "'cli'"


def test_cli_sessions_fork_prints_the_new_ids(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, "x = 'forked by the cli'")
    p = cli(daemon, "sessions", "fork", sid, "-n", "2")
    assert p.returncode == 0, p.stderr
    kids = set(SESSION_ID.findall(p.stdout)) - {sid}
    sessions.ids.extend(kids)
    assert len(kids) == 2, p.stdout
    for k in kids:
        assert run_ok(daemon, k, "x")["result"] == "'forked by the cli'", k


def test_cli_sessions_rm(daemon):
    sid = daemon.create_session()
    try:
        run_ok(daemon, sid, "x = 1")
        stop(daemon, sid)
        p = cli(daemon, "sessions", "rm", sid)
        assert p.returncode == 0, p.stderr
        r = daemon.get(f"/v1/sessions/{sid}")
        assert r.status_code == 404 and "deleted" in r.json()["error"].lower(), daemon.why(r)
    finally:
        daemon.delete_session(sid)


def test_cli_exec_resumes_a_stopped_session(daemon, sessions):
    sid = sessions.new()
    run_ok(daemon, sid, "x = 21")
    stop(daemon, sid)
    p = cli(daemon, "exec", "-s", sid, "-", stdin="print(x * 2)\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1:] == ["42"], p.stdout
    assert state_of(daemon, sid) == "idle"


def test_cli_sessions_stop_of_an_unknown_id_fails(daemon):
    p = cli(daemon, "sessions", "stop", UNKNOWN_ID)
    assert p.returncode != 0, p.stdout
    assert p.stderr.strip(), "no explanation on stderr"
