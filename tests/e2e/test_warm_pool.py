"""The warm pool (issue 13; docs/PERFORMANCE.md): before a pool member is handed over, it runs
cells through the runner's real exec path until one costs no page fault, so a session's first
cell is as fast as its tenth. These tests check what that must never change: the warm-up runs
(the daemon logs how many cells and page faults it took), and it leaves no trace a user can see
in the session it warmed: not its variables, not its execution count, not its cell sources in
tracebacks, not what it printed, not the loader variable the zygote starts with (in
os.environ)."""
import os
import re
import time

import pytest

from airlock_daemon import daemon_fixture, sessions_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

daemon = daemon_fixture(pytest, args=("--pool-size", "1"),
                        env={**{k: v for k, v in os.environ.items()
                                if not k.startswith("AIRLOCK_")}, "AIRLOCK_LOG": "debug"})
sessions = sessions_fixture(pytest)

WARM_RE = re.compile(r'profile=default cells=(\d+) page_faults=(\d+) msg="a pool member is warm"')


def new_warm_member(daemon, sessions):
    """Takes whatever the pool holds, then waits until the member made to replace it is warm;
    returns (cells, page faults) of its warm-up."""
    offset = daemon.log_size()
    sessions.new()
    deadline = time.monotonic() + 60
    while not (m := WARM_RE.search(daemon.log_since(offset))):
        assert time.monotonic() < deadline, daemon.log_text()[-3000:]
        time.sleep(0.05)
    return int(m.group(1)), int(m.group(2))


def test_the_pool_member_runs_cells_until_one_costs_no_page_fault(daemon, sessions):
    cells, faults = new_warm_member(daemon, sessions)
    # It stops after two cells without a page fault, so it ran at least three, and the first
    # cells of a freshly forked sandbox always fault (copy-on-write of the zygote's pages).
    assert 3 <= cells <= 32
    assert faults > 0
    # The default profile's zygote has one thread, so sessions are cloned straight into their
    # namespaces (the fast path); a zygote with threads would say so in the log.
    assert "the zygote has threads" not in daemon.log_text()


def test_a_warm_session_starts_clean(daemon, sessions):
    new_warm_member(daemon, sessions)
    sid = sessions.new()  # the warm member
    r = daemon.execute(sid, "import os\n"
                            "(sorted(n for n in globals() if 'airlock' in n or n == '_'),"
                            " 'LD_BIND_NOW' in os.environ)")
    assert r["status"] == "ok", r
    assert r["execution_count"] == 1
    assert r["result"] == "([], False)"
    assert r["stdout"] == "" and r["stderr"] == ""


def test_a_warm_sessions_tracebacks_show_only_its_own_cells(daemon, sessions):
    new_warm_member(daemon, sessions)
    sid = sessions.new()
    r = daemon.execute(sid, "x = 1\n1 / 0")
    assert r["status"] == "error", r
    tb = r["error"]["traceback"]
    assert "1 / 0" in tb
    assert "_airlock_warm" not in tb and "_airlock_sink" not in tb
    r = daemon.execute(sid, "import linecache\n"
                            "[k for k, v in linecache.cache.items()\n"
                            " if len(v) > 2 and 'airlock' + '_warm' in ''.join(v[2])]")
    assert r["result"] == "[]", r
    assert r["execution_count"] == 2


def pool_of(daemon, name="default"):
    r = daemon.get("/v1/profiles")
    assert r.status_code == 200, r.text
    return next(p["pool"] for p in r.json()["profiles"] if p["name"] == name)


def test_profiles_say_what_creates_got_from_the_pool(daemon, sessions):
    new_warm_member(daemon, sessions)
    before = pool_of(daemon)
    assert before["size"] == 1 and before["ready"] == 1 and before["warm"] == 1, before
    sessions.new()  # takes the warm member
    # Two more at once, before the pool refills: the one-member pool cannot serve both, so at
    # least one is started on the request (the worker may hand it a fresh cold member first).
    sessions.new()
    sessions.new()
    after = pool_of(daemon)
    got = {k: after["creates"][k] - before["creates"][k] for k in after["creates"]}
    assert got["warm"] >= 1, (before, after)
    assert sum(got.values()) == 3, (before, after)
    assert got["started_on_request"] + got["cold"] >= 1, (before, after)
