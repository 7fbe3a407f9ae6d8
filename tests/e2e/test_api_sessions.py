"""The daemon end to end (docs/API.md): persistent sessions over HTTP against a real
`airlock serve` on a free loopback port. Statefulness, both languages, rich outputs, the files
manifest, streaming, timeouts with both state outcomes, interrupt, OOM, crash, busy sessions,
the one-shot /execute and 20 concurrent sessions without cross-talk."""
import base64
import concurrent.futures
import re
import threading
import time

import pytest
import requests

from airlock_daemon import cgroup_dirs_named, daemon_fixture, ndjson_events, sessions_fixture

daemon = daemon_fixture(pytest)
sessions = sessions_fixture(pytest)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SESSION_ID = re.compile(r"^s-[0-9a-f]{24}$")
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
EXECUTION_KEYS = {"status", "stdout", "stderr", "result", "outputs", "error", "exit_code",
                  "timed_out", "execution_count", "state", "files", "usage"}


def gone_within(daemon, sid, timeout=5.0):
    """True once no cgroup of session sid exists any more."""
    deadline = time.monotonic() + timeout
    while cgroup_dirs_named({f"airlock-{sid}"}):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def assert_session_404(daemon, sid, state, *words):
    """Every later call on an ended session answers 404 with the reason."""
    for method, path, kw in (("POST", f"/v1/sessions/{sid}/execute", {"json": {"code": "1"}}),
                             ("GET", f"/v1/sessions/{sid}", {}),
                             ("GET", f"/v1/sessions/{sid}/files", {})):
        r = daemon.req(method, path, **kw)
        assert r.status_code == 404, f"{method} {path}: {r.status_code} {r.text}"
        body = r.json()
        assert body.get("id") == sid and body.get("state") == state, body
        assert body.get("reason"), body
        text = body["error"].lower()
        assert sid in body["error"] and state in text, body
        for w in words:
            assert w in text, f"{w!r} not in the explanation: {body}"


class LongCell:
    """Runs a cell in a thread (its answer lands in .response) and waits until it runs."""

    def __init__(self, daemon, sid, code, **fields):
        self.daemon, self.sid = daemon, sid
        self.response = self.error = None
        self.t = threading.Thread(target=self._run, args=(code, fields), daemon=True)
        self.t.start()
        deadline = time.monotonic() + 30
        while daemon.get(f"/v1/sessions/{sid}").json().get("state") != "busy":
            assert self.t.is_alive(), \
                f"the cell ended early: {self.response and self.response.text}"
            assert time.monotonic() < deadline, "the session never became busy"
            time.sleep(0.02)
        time.sleep(0.2)     # let the interpreter enter the cell's loop or sleep

    def _run(self, code, fields):
        try:
            self.response = self.daemon.post(f"/v1/sessions/{self.sid}/execute",
                                             json={"code": code, **fields}, timeout=120)
        except requests.RequestException as e:
            self.error = e

    def join(self, timeout=60):
        self.t.join(timeout)
        assert not self.t.is_alive(), f"the cell did not end within {timeout}s"
        assert self.error is None, self.error
        return self.response


# ------------------------------------------------------------------------------------------
# Sessions: the object, create/list/get/delete
# ------------------------------------------------------------------------------------------


def test_healthz(daemon):
    r = requests.get(daemon.url + "/healthz", timeout=10)
    assert r.status_code == 200
    assert r.json()["status"] == "ok" and r.json()["isolation"] == "namespaces", r.json()
    assert r.headers.get("X-Request-Id")


def test_profiles_lists_the_stock_profiles(daemon):
    r = daemon.get("/v1/profiles")
    assert r.status_code == 200
    profiles = {p["name"]: p for p in r.json()["profiles"]}
    assert {"default", "minimal", "data-science", "visualization"} <= set(profiles), profiles
    assert "bash" in profiles["default"]["languages"]
    assert profiles["minimal"]["languages"] == ["python"]
    for p in profiles.values():
        assert {"description", "languages", "limits"} <= set(p), p


def test_session_lifecycle(daemon):
    r = daemon.post("/v1/sessions", json={})
    assert r.status_code == 201, r.text
    s = r.json()
    sid = s["id"]
    try:
        assert SESSION_ID.match(sid), sid
        assert r.headers.get("Location") == f"/v1/sessions/{sid}"
        assert s["profile"] == "default" and s["state"] == "idle", s
        assert s["execution_count"] == 0 and s["idle_timeout_s"] == 300, s
        assert TIMESTAMP.match(s["created_at"]) and TIMESTAMP.match(s["last_used_at"]), s

        listed = daemon.get("/v1/sessions").json()["sessions"]
        assert sid in [x["id"] for x in listed]

        daemon.execute(sid, "1")
        got = daemon.get(f"/v1/sessions/{sid}").json()
        assert got["id"] == sid and got["execution_count"] == 1, got
    finally:
        r = daemon.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 200 and r.json() == {"id": sid, "deleted": True}, r.text
    assert gone_within(daemon, sid), "the deleted session's cgroup is still there"
    assert_session_404(daemon, sid, "ended")
    assert sid not in [x["id"] for x in daemon.get("/v1/sessions").json()["sessions"]]
    assert daemon.delete(f"/v1/sessions/{sid}").status_code == 404


def test_session_object_usage_fields(daemon, sessions):
    """docs/API.md shows the session's usage as {cpu_ms, peak_memory_bytes,
    memory_limit_bytes}."""
    sid = sessions.new()
    daemon.execute(sid, "x = bytearray(8 << 20)")
    s = daemon.get(f"/v1/sessions/{sid}").json()
    assert {"cpu_ms", "peak_memory_bytes", "memory_limit_bytes"} <= set(s["usage"]), (
        f"the session object's usage lacks fields docs/API.md shows: {s['usage']}")
    assert s["usage"]["memory_limit_bytes"] == 2 << 30, s
    assert s["usage"]["cpu_ms"] > 0 and s["usage"]["peak_memory_bytes"] >= 8 << 20, s


def test_empty_body_creates_a_default_session(daemon, sessions):
    r = daemon.post("/v1/sessions", data=b"")
    assert r.status_code == 201, r.text
    sessions.ids.append(r.json()["id"])
    assert r.json()["profile"] == "default"


def test_session_env_reaches_both_languages(daemon, sessions):
    sid = sessions.new(env={"E2E_GREETING": "hello world", "E2E_EMPTY": ""})
    r = daemon.execute(sid, "import os; os.environ['E2E_GREETING'], os.environ['E2E_EMPTY']")
    assert r["result"] == "('hello world', '')", r
    r = daemon.execute(sid, 'echo "[$E2E_GREETING]"', language="bash")
    assert r["stdout"] == "[hello world]\n", r


def test_idle_session_stops_and_resumes(daemon):
    sid = daemon.create_session(idle_timeout_s=1)
    try:
        daemon.execute(sid, "kept = 'yes'")
        deadline = time.monotonic() + 15
        while daemon.get(f"/v1/sessions/{sid}").json()["state"] != "stopped":
            assert time.monotonic() < deadline, "idle_timeout_s 1 did not stop the session"
            time.sleep(0.2)
        res = daemon.execute(sid, "kept")
        assert res["result"] == "'yes'" and res.get("resumed") is True, res
    finally:
        daemon.delete_session(sid)


def test_random_generators_differ_between_sessions(daemon, sessions):
    code = ("import random, os, numpy\n"
            "(random.random(), os.urandom(8).hex(), float(numpy.random.random()))")
    a = daemon.execute(sessions.new(), code)["result"]
    b = daemon.execute(sessions.new(), code)["result"]
    a, b = eval(a), eval(b)     # noqa: S307 - tuples of floats and str from our own cells
    assert a[0] != b[0], "two sessions share random's sequence"
    assert a[1] != b[1], "two sessions share os.urandom"
    assert a[2] != b[2], "two sessions share numpy.random's sequence"


# ------------------------------------------------------------------------------------------
# Execution: state, languages, rich outputs, files manifest
# ------------------------------------------------------------------------------------------


def test_variables_imports_and_files_persist(daemon, sessions):
    sid = sessions.new()
    r = daemon.execute(sid, "x = 41")
    assert r["status"] == "ok" and r["result"] is None and r["execution_count"] == 1, r
    assert set(r) >= EXECUTION_KEYS, set(EXECUTION_KEYS - set(r))
    assert r["state"] == "preserved"
    r = daemon.execute(sid, "x + 1")
    assert r["result"] == "42" and r["execution_count"] == 2, r
    daemon.execute(sid, "import json as J\nopen('kept.txt', 'w').write('persisted')")
    r = daemon.execute(sid, "J.dumps([open('/work/kept.txt').read(), x])")
    assert r["status"] == "ok" and r["result"] == repr('["persisted", 41]'), r
    r = daemon.execute(sid, "def f(n):\n    return n * x\nf(2)")
    assert r["result"] == "82"
    assert daemon.execute(sid, "f(3)")["result"] == "123"
    u = r["usage"]
    assert u["wall_ms"] >= 0 and u["cpu_ms"] >= 0 and u["peak_memory_bytes"] > 0, u


def test_each_cell_reports_its_own_peak_memory(daemon, sessions):
    """usage.peak_memory_bytes is the cell's own peak: the watermark is reset before every cell
    (the daemon keeps the cgroup's usage files open between cells and resets through them)."""
    sid = sessions.new()
    big = daemon.execute(sid, "x = bytearray(200 << 20); del x")["usage"]["peak_memory_bytes"]
    small = daemon.execute(sid, "1")["usage"]["peak_memory_bytes"]
    kept = daemon.execute(sid, "y = bytearray(100 << 20)")["usage"]["peak_memory_bytes"]
    after = daemon.execute(sid, "2")["usage"]["peak_memory_bytes"]
    assert big >= 200 << 20 and small < 100 << 20, (big, small)
    assert kept >= 100 << 20 and after >= 100 << 20 and after < 200 << 20, (kept, after)


def test_exceptions_keep_the_session(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "y = 'still here'")
    r = daemon.execute(sid, "print('before')\n1 / 0")
    assert r["status"] == "error" and r["exit_code"] == 1 and r["stdout"] == "before\n", r
    assert r["error"]["name"] == "ZeroDivisionError", r
    assert "1 / 0" in r["error"]["traceback"], r
    assert r["state"] == "preserved"
    assert daemon.execute(sid, "y")["result"] == "'still here'"


def test_bash_cwd_and_exports_persist(daemon, sessions):
    sid = sessions.new()
    r = daemon.execute(sid, "pwd", language="bash")
    assert r["status"] == "ok" and r["stdout"] == "/work\n", r
    r = daemon.execute(sid, "mkdir -p /tmp/e2e-dir && cd /tmp/e2e-dir && export E2E_VAR=fortytwo",
                       language="bash")
    assert r["status"] == "ok", r
    r = daemon.execute(sid, 'pwd; echo "$E2E_VAR"; bash -c \'echo "child:$E2E_VAR"\'',
                       language="bash")
    assert r["stdout"] == "/tmp/e2e-dir\nfortytwo\nchild:fortytwo\n", r
    r = daemon.execute(sid, "false", language="bash")
    assert r["status"] == "error" and r["exit_code"] == 1, r
    r = daemon.execute(sid, "echo 'to stderr' >&2; exit 3", language="bash")
    assert r["status"] == "error" and r["exit_code"] == 3 and r["stderr"] == "to stderr\n", r
    # Python and bash share the session's sandbox and /work
    daemon.execute(sid, "open('/work/from-python.txt', 'w').write('py')")
    r = daemon.execute(sid, "cat /work/from-python.txt; echo; echo bash > /work/from-bash.txt",
                       language="bash")
    assert r["stdout"] == "py\n", r
    assert daemon.execute(sid, "open('/work/from-bash.txt').read()")["result"] == "'bash\\n'"


@pytest.mark.parametrize("low", [5, 6, 7, 8])
def test_bash_starts_whatever_fds_the_session_holds(daemon, sessions, low):
    """The session's bash gets its status pipe on fd 9 (src/runner/shell.c). Whatever fds the
    runner holds when the first bash cell starts (the cell's own files, the manifest's watch),
    the pipe's end may already sit on 9: bash must still get it, not hang the cell."""
    sid = sessions.new()
    r = daemon.execute(sid, "import os\nheld = []\nwhile True:\n"
                            "    fd = os.open('/dev/null', os.O_RDONLY)\n"
                            f"    if fd >= {low}:\n        os.close(fd)\n        break\n"
                            "    held.append(fd)\nlen(held)")
    assert r["status"] == "ok", r
    r = daemon.post(f"/v1/sessions/{sid}/execute",
                    json={"code": "echo ok", "language": "bash", "timeout": 10})
    assert r.status_code == 200, daemon.why(r)
    assert r.json()["status"] == "ok" and r.json()["stdout"] == "ok\n", r.json()


def test_matplotlib_figure_becomes_a_png(daemon, sessions):
    sid = sessions.new()
    r = daemon.execute(sid, "import matplotlib.pyplot as plt\n"
                            "plt.plot([1, 2, 3], [4, 1, 9])\nplt.title('e2e');")
    assert r["status"] == "ok", r
    pngs = [o for o in r["outputs"] if "image/png" in o["data"]]
    assert len(pngs) == 1, r["outputs"]
    data = base64.b64decode(pngs[0]["data"]["image/png"], validate=True)
    assert data.startswith(PNG_MAGIC) and len(data) > 1000, data[:16]
    assert pngs[0]["main"] is False


class_html = '''
class Rich:
    def _repr_html_(self):
        return "<b>rich</b>"
    def __repr__(self):
        return "Rich()"
'''
class_png = '''
import base64
class Pic:
    def _repr_png_(self):
        return base64.b64decode(
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9"
            "awAAAABJRU5ErkJggg==")
'''


@pytest.mark.parametrize("setup,expr,mime,check", [
    (class_html, "Rich()", "text/html", lambda v: v == "<b>rich</b>"),
    (class_png, "Pic()", "image/png", lambda v: base64.b64decode(v).startswith(PNG_MAGIC)),
], ids=["repr_html", "repr_png"])
def test_rich_repr_becomes_a_main_output(daemon, sessions, setup, expr, mime, check):
    sid = sessions.new()
    daemon.execute(sid, setup)
    r = daemon.execute(sid, expr)
    assert r["status"] == "ok", r
    mains = [o for o in r["outputs"] if o.get("main")]
    assert len(mains) == 1 and mime in mains[0]["data"], r["outputs"]
    assert check(mains[0]["data"][mime]), mains[0]


def test_files_manifest(daemon, sessions):
    sid = sessions.new()
    r = daemon.execute(sid, "import os\nopen('a.txt', 'w').write('12345')\n"
                            "open('b.txt', 'w').write('b')\nos.makedirs('sub/deeper')\n"
                            "open('sub/deeper/c.bin', 'wb').write(bytes(100))")
    files = {f["path"]: f for f in r["files"]}
    assert set(files) == {"a.txt", "b.txt", "sub/deeper/c.bin"}, r["files"]
    assert all(f["change"] == "created" for f in files.values()), r["files"]
    assert files["a.txt"]["size"] == 5 and files["sub/deeper/c.bin"]["size"] == 100, files

    r = daemon.execute(sid, "rm -r sub; echo new > n.txt", language="bash")
    changes = {f["path"]: f["change"] for f in r["files"]}
    assert changes == {"sub/deeper/c.bin": "deleted", "n.txt": "created"}, r["files"]

    r = daemon.execute(sid, "import os\nopen('a.txt', 'a').write('678')\nos.remove('b.txt')")
    modified = r["files"]
    r = daemon.execute(sid, "open('a.txt').read()")
    assert r["files"] == [] and r["result"] == "'12345678'", r

    changes = {f["path"]: f["change"] for f in modified}
    assert changes.get("b.txt") == "deleted" and "a.txt" in changes, modified
    assert {f["path"]: f["size"] for f in modified}["a.txt"] == 8, modified
    assert changes["a.txt"] == "changed", (
        f"docs/API.md: change is created|changed|deleted; got {modified}")
    assert {f["path"]: f["size"] for f in modified}["b.txt"] == 0, modified


def test_files_manifest_ignores_changes_between_cells(daemon, sessions):
    """The manifest is what a cell changed. The runner reuses the snapshot of the tree after a
    cell as the one before the next while its change watch saw nothing (src/runner/watch.h):
    whatever changes between the cells (an upload, a background process, in a directory made by
    the last cell or deeper) must make it look again, so that none of it is the next cell's."""
    sid = sessions.new()
    r = daemon.execute(sid, "import os; os.makedirs('made/deep')\nopen('made/x', 'w').write('x')")
    assert {f["path"] for f in r["files"]} == {"made/x"}, r["files"]
    assert daemon.execute(sid, "1")["files"] == []

    # An upload into the root, and into a directory the last cell made.
    for path in ("up.txt", "made/deep/up.txt"):
        assert daemon.put(f"/v1/sessions/{sid}/files/{path}", data=b"up").status_code == 200
        r = daemon.execute(sid, "1")
        assert r["files"] == [], (path, r["files"])

    # A background process that writes after its cell ended (the runner holds the interpreter
    # between cells, so a thread of the session would write during the next one): in place,
    # then a new file deeper.
    for target, change in (("made/x", "changed"), ("made/deep/bg.txt", "created")):
        r = daemon.execute(sid, "import subprocess\n"
                                "p = subprocess.Popen(['sh', '-c', "
                                f"'sleep 0.3; echo more >> {target}'])")
        assert r["files"] == [], r["files"]
        time.sleep(1.0)  # it writes between the cells
        assert daemon.execute(sid, "p.wait()")["files"] == [], (
            f"{target} {change} by a process between cells is no change of the next cell")
        r = daemon.execute(sid, f"open({target!r}, 'a').write('!')")
        assert [(f["path"], f["change"]) for f in r["files"]] == [(target, "changed")], r["files"]

    # A deletion from outside, then the cell's own changes are still seen exactly.
    assert daemon.delete(f"/v1/sessions/{sid}/files/up.txt").status_code in (200, 204)
    assert daemon.execute(sid, "1")["files"] == []
    r = daemon.execute(sid, "import os; os.remove('made/deep/up.txt')")
    assert [(f["path"], f["change"]) for f in r["files"]] == [("made/deep/up.txt", "deleted")]


# ------------------------------------------------------------------------------------------
# Streaming
# ------------------------------------------------------------------------------------------

STREAM_CELL = '''
import sys, time
print("out-1", flush=True)
sys.stderr.write("err-1\\n"); sys.stderr.flush()
time.sleep(0.2)
print("out-2", flush=True)
sys.stderr.write("err-2\\n"); sys.stderr.flush()
1 / 0
'''


def _stream(daemon, path, body):
    t0 = time.monotonic()
    r = daemon.post(path, json=body, headers={"Accept": "application/x-ndjson"}, stream=True)
    try:
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"].startswith("application/x-ndjson"), r.headers
        return t0, list(ndjson_events(r))
    finally:
        r.close()


@pytest.mark.parametrize("where", ["session", "one-shot"])
def test_streaming_events(daemon, sessions, where):
    path = f"/v1/sessions/{sessions.new()}/execute" if where == "session" else "/execute"
    _, events = _stream(daemon, path, {"code": STREAM_CELL})
    types = [e["type"] for _, e in events]
    assert types[-1] == "end" and types.count("end") == 1, types
    assert set(types) <= {"stdout", "stderr", "output", "error", "end"}, types
    assert "error" in types and types.index("error") < len(types) - 1, types
    err = next(e for _, e in events if e["type"] == "error")
    assert err["name"] == "ZeroDivisionError", err
    result = events[-1][1]["result"]
    out = "".join(e["text"] for _, e in events if e["type"] == "stdout")
    errs = "".join(e["text"] for _, e in events if e["type"] == "stderr")
    assert out == "out-1\nout-2\n" == result["stdout"], (out, result)
    assert errs == "err-1\nerr-2\n" == result["stderr"], (errs, result)
    assert result["status"] == "error" and result["error"]["name"] == "ZeroDivisionError"
    last_text = max(i for i, t in enumerate(types) if t in ("stdout", "stderr"))
    assert last_text < types.index("error"), types


def test_streaming_output_arrives_as_it_is_produced(daemon, sessions):
    sid = sessions.new()
    t0, events = _stream(daemon, f"/v1/sessions/{sid}/execute", {
        "code": "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')"})
    first = next(t for t, e in events if e["type"] == "stdout")
    end = events[-1][0]
    assert events[-1][1]["type"] == "end"
    assert first - t0 < 0.7, f"the first chunk took {first - t0:.2f}s"
    assert end - first > 0.7, (f"the first chunk arrived only {end - first:.2f}s before the end "
                               "of a cell that sleeps 1s after printing it")
    assert events[-1][1]["result"]["stdout"] == "first\nsecond\n"


def test_client_disconnect_mid_stream_interrupts_the_cell(daemon, sessions):
    """docs/API.md: a client that disconnects mid-stream gets its cell interrupted; the
    session lives. Four rounds in one session: the interrupt must end the cell, never the
    interpreter (a second SIGINT landing after the cell would)."""
    import json
    import socket
    sid = sessions.new()
    daemon.execute(sid, "kept = 'yes'")
    body = json.dumps({"code": "import time\nprint('go', flush=True)\ntime.sleep(60)"}).encode()
    for rnd in range(4):
        with socket.create_connection(("127.0.0.1", daemon.port), timeout=20) as s:
            s.sendall(f"POST /v1/sessions/{sid}/execute HTTP/1.1\r\nHost: {daemon.host}\r\n"
                      f"Authorization: Bearer {daemon.token}\r\n"
                      f"Accept: application/x-ndjson\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            got = b""
            while b'"type":"stdout"' not in got.replace(b" ", b""):
                chunk = s.recv(4096)
                assert chunk, f"the stream ended early: {got!r}"
                got += chunk
            assert got.startswith(b"HTTP/1.1 200"), got[:200]
        # the client is gone: the cell must be interrupted and the session live on
        deadline = time.monotonic() + 10
        while True:
            r = daemon.get(f"/v1/sessions/{sid}")
            assert r.status_code == 200, f"round {rnd}: the session ended: " + daemon.why(r)
            if r.json()["state"] == "idle":
                break
            assert time.monotonic() < deadline, "the cell still runs after the client went away"
            time.sleep(0.05)
        res = daemon.execute(sid, "kept")
        assert res["status"] == "ok" and res["result"] == "'yes'", (f"round {rnd}", res)


def test_streaming_rich_output_event(daemon, sessions):
    sid = sessions.new()
    _, events = _stream(daemon, f"/v1/sessions/{sid}/execute", {
        "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2]);"})
    outs = [e for _, e in events if e["type"] == "output"]
    assert len(outs) == 1 and "image/png" in outs[0]["data"], [e["type"] for _, e in events]
    assert events[-1][1]["type"] == "end"
    assert events[-1][1]["result"]["outputs"][0]["data"] == outs[0]["data"]


# ------------------------------------------------------------------------------------------
# Timeouts, interrupt, OOM, crash, busy
# ------------------------------------------------------------------------------------------


def test_timeout_with_state_preserved(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "kept = 'old value'")
    t0 = time.monotonic()
    r = daemon.execute(sid, "while True:\n    pass", timeout_s=1)
    wall = time.monotonic() - t0
    assert r["status"] == "timeout" and r["timed_out"] is True, r
    assert r["state"] == "preserved", r
    assert r["error"] and r["error"]["value"], r
    assert 0.9 < wall < 4, f"a 1s timeout took {wall:.2f}s"
    r = daemon.execute(sid, "kept")
    assert r["status"] == "ok" and r["result"] == "'old value'", r


def test_timeout_alias_field(daemon, sessions):
    sid = sessions.new()
    r = daemon.execute(sid, "import time\ntime.sleep(10)", timeout=0.5)
    assert r["status"] == "timeout" and r["state"] == "preserved", r


def test_timeout_of_a_cell_that_ignores_the_interrupt_loses_the_session(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "kept = 1")
    t0 = time.monotonic()
    r = daemon.execute(sid, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                            "while True:\n    pass", timeout_s=1)
    wall = time.monotonic() - t0
    assert r["status"] == "timeout" and r["timed_out"] is True and r["state"] == "lost", r
    assert wall < 1 + 2 + 3, f"timeout 1s + grace 2s took {wall:.2f}s"
    assert_session_404(daemon, sid, "lost", "timeout")
    assert gone_within(daemon, sid), "the lost session's cgroup is still there"


def test_bash_timeout_keeps_the_shell(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "export KEEP=yes; cd /tmp", language="bash")
    r = daemon.execute(sid, "sleep 30", language="bash", timeout_s=1)
    assert r["status"] == "timeout" and r["state"] == "preserved", r
    r = daemon.execute(sid, 'echo "$KEEP $PWD"', language="bash")
    assert r["stdout"] == "yes /tmp\n", r


def test_interrupt_a_running_cell(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "before = 'kept'")
    cell = LongCell(daemon, sid, "import time\nprint('started', flush=True)\ntime.sleep(60)")
    t0 = time.monotonic()
    r = daemon.post(f"/v1/sessions/{sid}/interrupt")
    assert r.status_code == 200 and r.json() == {"id": sid, "interrupted": True}, r.text
    resp = cell.join(30)
    assert time.monotonic() - t0 < 5
    assert resp.status_code == 200, resp.text
    res = resp.json()
    assert res["error"]["name"] == "KeyboardInterrupt", res
    assert res["status"] == "error" and res["state"] == "preserved", res
    assert res["stdout"] == "started\n", res
    assert daemon.execute(sid, "before")["result"] == "'kept'"
    r = daemon.post(f"/v1/sessions/{sid}/interrupt")
    assert r.status_code == 200 and r.json() == {"id": sid, "interrupted": False}, r.text


def test_interrupting_twice_keeps_the_session(daemon, sessions):
    """Two interrupts in a row (an impatient user, or a timeout racing an interrupt) must end
    the cell, not the interpreter: the session keeps its state."""
    sid = sessions.new()
    daemon.execute(sid, "kept = 'yes'")
    for rnd in range(5):
        cell = LongCell(daemon, sid, "import time\ntime.sleep(60)")
        a = daemon.post(f"/v1/sessions/{sid}/interrupt").json()
        b = daemon.post(f"/v1/sessions/{sid}/interrupt").json()
        res = cell.join(30).json()
        assert a["interrupted"] is True, a
        assert res["state"] == "preserved" and res["error"]["name"] == "KeyboardInterrupt", (
            f"round {rnd} (second interrupt: {b}): {res}")
        r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "kept"})
        assert r.status_code == 200 and r.json()["result"] == "'yes'", (
            f"round {rnd}: " + daemon.why(r))


def test_busy_session_answers_409(daemon, sessions):
    sid = sessions.new()
    cell = LongCell(daemon, sid, "import time\ntime.sleep(60)")
    try:
        assert daemon.get(f"/v1/sessions/{sid}").json()["state"] == "busy"
        for headers in ({}, {"Accept": "application/x-ndjson"}):
            r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "1"}, headers=headers)
            assert r.status_code == 409, r.text
            assert r.headers["Content-Type"].startswith("application/json")
            assert r.json()["id"] == sid and "running" in r.json()["error"], r.text
        # files are still reachable while a cell runs
        assert daemon.get(f"/v1/sessions/{sid}/files").status_code == 200
    finally:
        daemon.post(f"/v1/sessions/{sid}/interrupt")
        cell.join(30)
    assert daemon.execute(sid, "2 + 2")["result"] == "4"


def test_delete_a_session_while_a_cell_runs(daemon):
    sid = daemon.create_session()
    try:
        cell = LongCell(daemon, sid, "import time\ntime.sleep(60)")
        r = daemon.delete(f"/v1/sessions/{sid}")
        assert r.status_code == 200, r.text
        res = cell.join(30).json()
        assert res["status"] == "killed" and res["state"] == "lost", res
        assert gone_within(daemon, sid)
    finally:
        daemon.delete_session(sid)


def test_oom_kills_only_its_session(daemon, sessions):
    neighbour = sessions.new()
    daemon.execute(neighbour, "mine = 'intact'")
    sid = sessions.new(profile="minimal")
    t0 = time.monotonic()
    r = daemon.execute(sid, "x = bytearray(1 << 30)\nx[::4096] = b'x' * len(x[::4096])")
    assert time.monotonic() - t0 < 30
    assert r["status"] == "oom" and r["state"] == "lost", r
    assert r["error"] and "memory" in r["error"]["value"].lower(), r
    assert daemon.get("/healthz").status_code == 200
    assert daemon.execute(neighbour, "mine")["result"] == "'intact'"
    assert_session_404(daemon, sid, "lost", "memory")
    assert gone_within(daemon, sid)


def test_crash_of_the_interpreter(daemon, sessions):
    neighbour = sessions.new()
    daemon.execute(neighbour, "mine = 'intact'")
    sid = sessions.new()
    t0 = time.monotonic()
    r = daemon.execute(sid, "import ctypes\nctypes.string_at(0)", timeout_s=30)
    assert time.monotonic() - t0 < 10, "a segfault took long to report"
    assert r["status"] == "killed" and r["state"] == "lost", r
    assert r["exit_code"] == 128 + 11, r
    assert r["error"] and r["error"]["value"], r
    assert daemon.execute(neighbour, "mine")["result"] == "'intact'"
    assert_session_404(daemon, sid, "lost")
    assert gone_within(daemon, sid)


def test_exit_of_the_interpreter_is_not_a_hang(daemon, sessions):
    sid = sessions.new()
    r = daemon.execute(sid, "import os\nos._exit(7)", timeout_s=30)
    assert r["status"] in ("error", "killed"), r
    assert r["exit_code"] == 7 or r["state"] == "lost", r


# ------------------------------------------------------------------------------------------
# One-shot /execute
# ------------------------------------------------------------------------------------------


def test_one_shot_reader_shapes(daemon):
    before = {s["id"] for s in daemon.get("/v1/sessions").json()["sessions"]}
    r = daemon.post("/execute", json={"code": "print(1)\n2 + 2", "timeout": 10})
    assert r.status_code == 200, daemon.why(r)
    o = r.json()
    # readers of {stdout, stderr, result, error}
    assert (o["stdout"], o["stderr"], o["result"], o["error"]) == ("1\n", "", "4", None), o
    # readers of {stdout, stderr, exit_code, timed_out}
    assert (o["exit_code"], o["timed_out"]) == (0, False), o
    assert o["status"] == "ok" and o["execution_count"] == 1, o
    assert "state" not in o, "docs/API.md: state is absent for one-shot /execute"
    after = {s["id"] for s in daemon.get("/v1/sessions").json()["sessions"]}
    assert after <= before, f"the one-shot left a session: {after - before}"


@pytest.mark.parametrize("body,expect", [
    ({"code": "raise ValueError('bad')"},
     {"status": "error", "exit_code": 1, "timed_out": False, "error.name": "ValueError"}),
    ({"code": "import sys; sys.exit(5)"}, {"status": "error", "exit_code": 5}),
    ({"code": "while True: pass", "timeout": 1},
     {"status": "timeout", "timed_out": True}),
    ({"code": "while True: pass", "timeout_s": 0.5},
     {"status": "timeout", "timed_out": True}),
    ({"code": "echo hi; exit 3", "language": "bash"},
     {"status": "error", "exit_code": 3, "stdout": "hi\n"}),
    ({"code": "import math; math.sqrt(16)", "profile": "minimal"},
     {"status": "ok", "result": "4.0"}),
    ({"code": "import ctypes; ctypes.string_at(0)"}, {"status": "killed", "exit_code": 139}),
], ids=["exception", "sys.exit", "timeout", "timeout_s", "bash", "minimal", "segfault"])
def test_one_shot_outcomes(daemon, body, expect):
    r = daemon.post("/execute", json=body)
    assert r.status_code == 200, daemon.why(r)
    o = r.json()
    for k, v in expect.items():
        got = o["error"]["name"] if k == "error.name" else o[k]
        assert got == v, f"{k}: {got!r} != {v!r} in {o}"
    assert o["timed_out"] == (o["status"] == "timeout")


def test_zygote_survives_the_end_of_its_sessions(daemon):
    """A profile's zygote forks every session of that profile; sessions ending (here one-shots
    of `minimal`, which has no warm pool under --pool-size 1) must not take it down, or the
    next create races with its death (500 "could not fork")."""
    offset = daemon.log_size()
    for i in range(6):
        r = daemon.post("/execute", json={"code": f"{i} + 1", "profile": "minimal"})
        assert r.status_code == 200 and r.json()["result"] == str(i + 1), daemon.why(r)
        time.sleep(0.1)
    died = [ln for ln in daemon.log_since(offset).splitlines() if "zygote died" in ln]
    assert not died, f"the zygote died {len(died)} times in 6 one-shots:\n" + "\n".join(died)


# ------------------------------------------------------------------------------------------
# Concurrency
# ------------------------------------------------------------------------------------------


def test_twenty_concurrent_sessions_without_cross_talk(daemon):
    n = 20
    ids = [None] * n
    barrier = threading.Barrier(n, timeout=120)

    def worker(i):
        tag = f"tag-{i}-{time.monotonic_ns()}"
        sid = ids[i] = daemon.create_session()
        barrier.wait()
        for rnd in range(3):
            r = daemon.execute(sid, f"mine = {tag!r} + '-{rnd}'\n"
                                    f"open('/work/own-{i}.txt', 'w').write(mine)\n"
                                    "import time; time.sleep(0.05)")
            assert r["status"] == "ok", r
            r = daemon.execute(sid, "import os\n(mine, sorted(os.listdir('/work')), "
                                    f"open('/work/own-{i}.txt').read())")
            want = f"{tag}-{rnd}"
            assert r["result"] == repr((want, [f"own-{i}.txt"], want)), (i, r)
            r = daemon.execute(sid, "echo $$ > /dev/null; ls /work", language="bash")
            assert r["stdout"] == f"own-{i}.txt\n", (i, r)
        return True

    try:
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            results = list(pool.map(worker, range(n)))
        assert all(results)
        assert len(set(ids)) == n
    finally:
        for sid in ids:
            if sid:
                daemon.delete_session(sid)


def test_one_shot_timeout_does_not_claim_a_session_lives_on(daemon):
    """Issue 12: POST /execute has no session after the call; its timeout must not say 'the
    session's state is preserved'."""
    r = daemon.post("/execute", json={"code": "import time\ntime.sleep(30)", "timeout": 0.5})
    assert r.status_code == 200, daemon.why(r)
    res = r.json()
    assert res["status"] == "timeout" and res["timed_out"] is True, res
    assert "state" not in res, res
    assert "preserved" not in res["error"]["value"] and "session" not in res["error"]["value"], \
        res["error"]


def test_half_a_frame_header_then_a_hang_is_a_timeout(daemon, sessions):
    """Issue 12: user code writes 2 bytes of a frame header on fd 3 and hangs. The cell ran
    past its timeout: it says timeout (not output_limit), and that the channel broke."""
    sid = sessions.new()
    r = daemon.post(f"/v1/sessions/{sid}/execute",
                    json={"code": "import os, time\nos.write(3, b'\\x05\\x00')\ntime.sleep(30)",
                          "timeout": 1})
    assert r.status_code == 200, daemon.why(r)
    res = r.json()
    assert res["status"] == "timeout" and res["timed_out"] is True and res["exit_code"] == 124, res
    assert res["state"] == "lost", res
