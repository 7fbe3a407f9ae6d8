"""`airlock serve` itself (docs/API.md "Starting the daemon", "Authentication"): the token file
and AIRLOCK_TOKEN, port 0, --allow-host, --max-sessions, the unix socket, restarts, the log,
clean shutdown on SIGTERM/SIGINT with cells running, and zygotes started while connections
arrive. Each test starts its own short-lived daemon(s)."""
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time

import pytest
import requests

from airlock_daemon import AIRLOCK, Daemon, DaemonStartError, start_daemon_or_fail

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")


@pytest.fixture
def workdir():
    d = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-daemon-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemons():
    """Starts daemons for one test and stops (and checks) every one of them afterwards."""
    started = []

    def start(**kw):
        kw.setdefault("args", ["--pool-size", "1"])
        d = start_daemon_or_fail(pytest, **kw)
        started.append(d)
        return d

    yield start
    problems = []
    for d in started:
        _, p = d.stop()
        problems += p
    if problems:
        pytest.fail("a daemon did not stop cleanly:\n  " + "\n  ".join(problems), pytrace=False)


def stop_ok(d, **kw):
    rc, problems = d.stop(**kw)
    assert rc == 0 and not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------
# Tokens
# ------------------------------------------------------------------------------------------

def test_token_file_created_once_and_reused(workdir):
    d = start_daemon_or_fail(pytest, workdir=workdir)
    try:
        tok_path = d.state_dir / "token"
        st = os.stat(tok_path)
        assert stat.S_IMODE(st.st_mode) == 0o600 and stat.S_ISREG(st.st_mode), oct(st.st_mode)
        assert stat.S_IMODE(os.stat(d.state_dir).st_mode) == 0o700
        assert re.fullmatch(r"[0-9a-f]{64}", d.token), d.token
        log = d.log_text()
        assert f"airlock: new API token written to {tok_path}: {d.token}" in log, log
        assert d.get("/v1/profiles").status_code == 200
        sid = d.create_session()
        d.execute(sid, "print('LOG-MARKER-' + 'x' * 3)")
        line = re.compile(r'level=info req=\w+ method=POST path="/v1/sessions/s-[0-9a-f]{24}'
                          r'/execute" status=200 ms=[\d.]+')
        deadline = time.monotonic() + 5     # the line is written once the answer is sent
        while not line.search(d.log_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        log = d.log_text()
        assert line.search(log), log
        assert log.count(d.token) == 1, "the token appears in the log beyond its first print"
        assert "LOG-MARKER" not in log, "code or output reached the log"
    finally:
        stop_ok(d)
    first_token = d.token
    d2 = start_daemon_or_fail(pytest, workdir=workdir)
    try:
        assert d2.token == first_token
        assert "new API token" not in d2.log_text(), "the token was printed again"
        assert d2.get("/v1/profiles").status_code == 200
    finally:
        stop_ok(d2)


def test_airlock_token_environment_variable(workdir):
    token = "e2e-env-token-" + os.urandom(8).hex()
    d = start_daemon_or_fail(pytest, workdir=workdir, token_env=token)
    try:
        assert d.get("/v1/profiles").status_code == 200
        other = (d.state_dir / "token").read_text().strip() \
            if (d.state_dir / "token").exists() else "f" * 64
        r = requests.get(d.url + "/v1/profiles", headers={"Authorization": f"Bearer {other}"},
                         timeout=10)
        assert r.status_code == 401, "the token file still works while AIRLOCK_TOKEN is set"
        assert token not in d.log_text(), "AIRLOCK_TOKEN was printed"
    finally:
        stop_ok(d)


@pytest.mark.parametrize("kind", ["mode-0644", "mode-0640", "empty", "directory", "symlink"])
def test_unsafe_token_file_is_refused(workdir, kind):
    state = workdir / "state"
    state.mkdir(mode=0o700)
    tok = state / "token"
    if kind.startswith("mode-"):
        tok.write_text("a" * 64 + "\n")
        os.chmod(tok, int(kind[5:], 8))
    elif kind == "empty":
        tok.write_text("")
        os.chmod(tok, 0o600)
    elif kind == "directory":
        tok.mkdir(mode=0o700)
    elif kind == "symlink":
        real = workdir / "elsewhere"
        real.write_text("b" * 64)
        os.chmod(real, 0o600)
        tok.symlink_to(real)
    d = Daemon(workdir=workdir, args=["--pool-size", "0"])
    try:
        with pytest.raises(DaemonStartError) as e:
            d.start(ready_timeout=20)
        assert "token" in str(e.value), str(e.value)
    finally:
        d.stop()


# ------------------------------------------------------------------------------------------
# Listening
# ------------------------------------------------------------------------------------------

def test_port_zero_picks_a_free_port(daemons):
    d = daemons(listen="127.0.0.1:0")
    assert d.port and d.port != 0
    assert requests.get(d.url + "/healthz", timeout=10).status_code == 200


def test_a_second_daemon_on_the_same_port_fails_clearly(daemons, workdir):
    d = daemons()
    other = Daemon(workdir=workdir, listen=f"127.0.0.1:{d.port}", args=["--pool-size", "0"])
    try:
        with pytest.raises(DaemonStartError) as e:
            other.start(ready_timeout=20)
        assert str(d.port) in str(e.value), str(e.value)
    finally:
        other.stop()
    assert requests.get(d.url + "/healthz", timeout=10).status_code == 200


def test_allow_host(daemons):
    d = daemons(args=["--pool-size", "0", "--allow-host", "airlock.internal"])
    for host, ok in ((f"airlock.internal:{d.port}", True), ("airlock.internal", True),
                     ("AIRLOCK.INTERNAL", True), ("airlock.internal:1", False),
                     ("evil.internal", False), (f"localhost:{d.port}", True)):
        status, _, body = d.raw("GET", "/v1/profiles", headers={"Host": host}, host=False)
        assert (status == 200) == ok, (host, status, body)
    status, _, _ = d.raw("GET", "/v1/profiles",
                         headers={"Origin": f"http://airlock.internal:{d.port}"})
    assert status == 200


def test_unix_socket(daemons, workdir):
    sockdir = workdir / "sock"
    sockdir.mkdir(mode=0o700)
    path = sockdir / "airlock.sock"
    # a stale socket left by a dead daemon is removed
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    d = daemons(listen=f"unix:{path}", args=["--pool-size", "0"])
    assert d.unix_path == str(path)
    st = os.lstat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    status, _, body = d.raw("GET", "/healthz", auth=False)
    assert status == 200, body
    status, _, _ = d.raw("GET", "/v1/profiles", auth=False)
    assert status == 401, "authentication applies on a unix socket too"
    # no Host/Origin checks on a unix socket
    status, _, body = d.raw("GET", "/v1/profiles", headers={"Host": "evil.example",
                                                            "Origin": "http://evil.example"},
                            host=False)
    assert status == 200, body
    status, _, body = d.raw("POST", "/execute", body=b'{"code": "6 * 7"}')
    assert status == 200 and json.loads(body)["result"] == "42", body


@pytest.mark.parametrize("mode", [0o777, 0o755])
def test_unix_socket_in_an_unsafe_directory_is_refused(workdir, mode):
    sockdir = workdir / "open"
    sockdir.mkdir()
    os.chmod(sockdir, mode)
    d = Daemon(workdir=workdir, listen=f"unix:{sockdir}/a.sock", args=["--pool-size", "0"])
    try:
        if mode & 0o022:
            with pytest.raises(DaemonStartError):
                d.start(ready_timeout=20)
        else:
            d.start(ready_timeout=20)   # 0755 is not writable by group or others: fine
    finally:
        d.stop()


# ------------------------------------------------------------------------------------------
# Limits and restarts
# ------------------------------------------------------------------------------------------

def test_max_sessions_gives_503(daemons):
    d = daemons(args=["--pool-size", "1", "--max-sessions", "2"])
    a, b = d.create_session(), d.create_session()
    r = d.post("/v1/sessions", json={})
    assert r.status_code == 503, d.why(r)
    assert "2" in r.json()["error"] and "session" in r.json()["error"], r.json()
    r = d.post("/execute", json={"code": "1"})
    assert r.status_code == 503, d.why(r)
    d.delete_session(a)
    c = d.create_session()
    d.delete_session(b)
    d.delete_session(c)
    r = d.post("/execute", json={"code": "1"})
    assert r.status_code == 200, d.why(r)


def test_sessions_of_a_previous_run_are_stopped_and_resume(workdir):
    d = start_daemon_or_fail(pytest, workdir=workdir)
    try:
        sid = d.create_session()
        d.execute(sid, "x = 1")
    finally:
        stop_ok(d)
    d2 = start_daemon_or_fail(pytest, workdir=workdir)
    try:
        r = d2.get(f"/v1/sessions/{sid}")
        assert r.status_code == 200, d2.why(r)
        body = r.json()
        # SIGTERM stopped the session (docs/API.md): it is listed, and its next call resumes
        # it with its variables.
        assert body["state"] == "stopped" and body["stopped_at"] and body["delete_at"], body
        assert [s["id"] for s in d2.get("/v1/sessions").json()["sessions"]] == [sid]
        res = d2.execute(sid, "x + 1")
        assert res["result"] == "2" and res.get("resumed") is True, res
    finally:
        stop_ok(d2)


# ------------------------------------------------------------------------------------------
# Shutdown
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_shutdown_with_cells_running(workdir, sig):
    d = start_daemon_or_fail(pytest, workdir=workdir, args=["--pool-size", "2"])
    results = []
    try:
        ids = [d.create_session() for _ in range(3)]
        d.create_session(profile="minimal")
        d.execute(ids[0], "open('/work/x', 'w').write('x')")

        def long_cell(sid, code):
            try:
                r = d.post(f"/v1/sessions/{sid}/execute", json={"code": code}, timeout=60)
                results.append(r.status_code)
            except requests.RequestException as e:
                results.append(type(e).__name__)
        threads = [threading.Thread(target=long_cell, args=(ids[0], "import time\ntime.sleep(60)")),
                   threading.Thread(target=long_cell, args=(ids[1], "while True:\n    pass")),
                   threading.Thread(target=long_cell, args=(
                       ids[2], "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                               "import os\nfor _ in range(3):\n    os.fork()\n"
                               "while True:\n    pass"))]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while sum(s["state"] == "busy" for s in d.get("/v1/sessions").json()["sessions"]) < 3:
            assert time.monotonic() < deadline, "the cells never started"
            time.sleep(0.05)
        time.sleep(0.3)
        d.sample()
        t0 = time.monotonic()
        if sig != signal.SIGTERM:
            os.kill(d.proc.pid, sig)
        rc, problems = d.stop(timeout=30)
        took = time.monotonic() - t0
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "a client still waits on the dead daemon"
    finally:
        if not d.stopped:
            d.stop()
    assert rc == 0 and not problems, "\n".join(problems)
    assert took < 15, f"shutdown took {took:.1f}s"
    print("answers to the running cells:", results)


def test_zygotes_start_while_connections_arrive(workdir):
    """Zygotes are spawned (clone + set*id in the child) from a daemon whose HTTP server
    creates a thread per connection. With --pool-size 0 the zygotes of minimal, data-science
    and visualization start on the first create, here under a storm of new connections."""
    d = start_daemon_or_fail(pytest, workdir=workdir, args=["--pool-size", "0"])
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", d.port), timeout=2) as s:
                    s.sendall(f"GET /healthz HTTP/1.1\r\nHost: {d.host}\r\n"
                              "Connection: close\r\n\r\n".encode())
                    s.recv(1000)
            except OSError:
                pass

    results = {}

    def create(profile):
        try:
            r = d.post("/v1/sessions", json={"profile": profile}, timeout=20)
            results[profile] = r.status_code
        except requests.RequestException as e:
            results[profile] = f"no answer in 20s ({type(e).__name__})"

    churners = [threading.Thread(target=churn, daemon=True) for _ in range(8)]
    creators = [threading.Thread(target=create, args=(p,))
                for p in ("minimal", "data-science", "visualization", "default")]
    try:
        for t in churners + creators:
            t.start()
        for t in creators:
            t.join(30)
    finally:
        stop.set()
        for t in churners:
            t.join(10)
        rc, problems = d.stop(timeout=15)
    assert results == {p: 201 for p in ("minimal", "data-science", "visualization", "default")}, \
        results
    assert rc == 0 and not problems, "\n".join(problems)


def test_binary_exists():
    assert os.access(AIRLOCK, os.X_OK), AIRLOCK
    out = subprocess.run([AIRLOCK, "serve", "--help"], capture_output=True, text=True, timeout=10)
    assert "--listen" in out.stdout + out.stderr
