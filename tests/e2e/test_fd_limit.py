"""The daemon and its open-file limit. Each live session (and warm sandbox, and zygote) holds
about a dozen fds in the daemon: its pipes, control socket, pidfds and a directory per cgroup
hierarchy, so --max-sessions 1000 needs an RLIMIT_NOFILE of about 12,000. The daemon raises its
soft limit to the hard one at start and says when even that cannot cover --max-sessions; past
the limit a new session is refused with a 503 naming it. Before, the fork of the sandbox lost
its fds on the way (SCM_RIGHTS truncated) and the client got a 500 "could not fork: bad
answer", and the worker gave up refilling the warm pool for good.

The daemon here runs under `prlimit --nofile=1100:1100`, room for about 90 sessions (not
lower: each sandbox sets its own RLIMIT_NOFILE to the profile's "files", 1024, and cannot raise
it past the daemon's hard limit)."""
import atexit
import os
import shutil
import stat
import tempfile

import pytest

from airlock_daemon import AIRLOCK, daemon_fixture

LIMIT = 1100
MAX_SESSIONS = 200


def nofile_wrapper():
    """A script that runs airlock under the low limit; prlimit execs it, so the daemon keeps
    the pid the test started."""
    d = tempfile.mkdtemp(prefix="airlock-e2e-nofile-")
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    path = os.path.join(d, "airlock")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec /usr/bin/prlimit --nofile={LIMIT}:{LIMIT} -- "{AIRLOCK}" "$@"\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


daemon = daemon_fixture(pytest, args=("--max-sessions", str(MAX_SESSIONS), "--pool-size", "1"),
                        binary=nofile_wrapper())


def fds_of(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_the_start_says_the_limit_cannot_cover_max_sessions(daemon):
    warnings = [line for line in daemon.log_text().splitlines()
                if "level=warn" in line and "RLIMIT_NOFILE" in line]
    assert warnings, "no warning about the open-file limit:\n" + daemon.log_text()[-3000:]
    assert f"RLIMIT_NOFILE {LIMIT}" in warnings[0]
    assert f"--max-sessions {MAX_SESSIONS}" in warnings[0]


def test_sessions_past_the_limit_are_refused_with_a_reason(daemon):
    ids = []
    try:
        refused = None
        for _ in range(MAX_SESSIONS):
            r = daemon.post("/v1/sessions", json={})
            if r.status_code != 201:
                refused = r
                break
            ids.append(r.json()["id"])
            assert daemon.execute(ids[-1], "1")["result"] == "1"
        assert refused is not None, f"{len(ids)} sessions fit in {LIMIT} fds"
        assert refused.status_code == 503, daemon.why(refused)
        msg = refused.json()["error"]
        assert "out of file descriptors" in msg and f"RLIMIT_NOFILE {LIMIT}" in msg, msg
        assert len(ids) >= 5, f"only {len(ids)} sessions before the refusal: {msg}"
        assert fds_of(daemon.proc.pid) < LIMIT

        # A one-shot run needs a sandbox too, and says the same.
        r = daemon.post("/execute", json={"code": "print(1)"})
        assert r.status_code == 503 and "out of file descriptors" in r.json()["error"], \
            daemon.why(r)

        # Everything already open still works.
        assert daemon.get("/healthz").status_code == 200
        for sid in ids:
            assert daemon.execute(sid, "2 * 21")["result"] == "42"

        # Room again once sessions end (their fds are freed before the next create is
        # checked, and the warm pool refills from the same room): a new one opens and runs.
        for sid in ids[:5]:
            daemon.delete_session(sid)
        ids = ids[5:]
        sid = daemon.create_session()
        ids.append(sid)
        assert daemon.execute(sid, "1")["result"] == "1"

        log = daemon.log_text()
        assert "bad answer" not in log, log[-3000:]
        # The pool waited for fds instead of giving up on the profile.
        assert "cannot start a warm session" not in log, log[-3000:]
    finally:
        for sid in ids:
            daemon.delete_session(sid)


def test_a_session_holds_the_fds_the_daemon_counts_for_it(daemon):
    """The room check counts a fixed number of fds per sandbox (the log says how many); a
    sandbox must hold all of them from the start, not open some on its first cell, or the
    check admits sessions that later take the fds the daemon keeps in reserve."""
    import re
    import time
    m = re.search(r"\((\d+) each\)", daemon.log_text())
    assert m, daemon.log_text()[-3000:]
    per = int(m.group(1))
    fd_dir = f"/proc/{daemon.proc.pid}/fd"
    ids = []
    try:
        time.sleep(1)  # the warm pool (of 1) is full and idle
        assert daemon.get("/v1/profiles").status_code == 200  # our connection is open
        # The earlier tests' sessions may still be closing (their fds go in the background,
        # slower on a loaded machine): count once the number holds still for half a second.
        before, steady_since, deadline = -1, time.monotonic(), time.monotonic() + 30
        while time.monotonic() < deadline:
            n = len(os.listdir(fd_dir))
            if n != before:
                before, steady_since = n, time.monotonic()
            elif time.monotonic() - steady_since >= 0.5:
                break
            time.sleep(0.05)
        for _ in range(3):
            r = daemon.post("/v1/sessions", json={})
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        deadline = time.monotonic() + 30
        while True:  # the pool refills once: one more sandbox than the three taken from it
            grown = len(os.listdir(fd_dir)) - before
            if grown >= 3 * per or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert grown == 3 * per, f"3 sessions grew the daemon's fds by {grown}, not 3 x {per}"
        for sid in ids:  # a first cell opens nothing more
            assert daemon.execute(sid, "1")["result"] == "1"
        assert len(os.listdir(fd_dir)) - before == 3 * per
    finally:
        for sid in ids:
            daemon.delete_session(sid)
