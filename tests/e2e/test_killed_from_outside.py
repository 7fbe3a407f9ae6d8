"""Sessions whose processes are killed from outside while idle (found by bench-soak --chaos):
before, every later call answered 500 ("cannot send the code to the runner: Broken pipe") and
GET still said idle, and the warm pool could hand out a dead sandbox. Now the daemon notices
(its worker checks idle sandboxes' pidfds every second, and a failed send says the same): the
session ends as lost with the reason, and dead pool members are dropped and replaced."""
import os
import signal
import time

import pytest

from airlock_daemon import cgroup_dirs_named, cgroup_procs, daemon_fixture

daemon = daemon_fixture(pytest, args=("--pool-size", "1"))


def kill_cgroup(name):
    """SIGKILLs every process in the cgroups named name (ours: the test's daemon made them)."""
    pids = set()
    for d in cgroup_dirs_named({name}):
        pids.update(cgroup_procs(d))
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def wait_for(pred, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return pred()


@pytest.mark.parametrize("call_first", [False, True])
def test_a_session_killed_while_idle_is_lost_with_its_reason(daemon, call_first):
    sid = daemon.create_session()
    assert daemon.execute(sid, "x = 1")["status"] == "ok"
    assert kill_cgroup(f"airlock-{sid}"), "no process found in the session's cgroup"
    if call_first:
        # The next call meets the dead runner before the daemon's own check does: it is
        # refused as lost, or (when the runner was still dying as the code went out) it runs
        # into the closed channel and says the session was lost. Never a 500.
        r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "x"})
        assert (r.status_code == 404 and r.json()["state"] == "lost") or \
            (r.status_code == 200 and r.json()["state"] == "lost"), daemon.why(r)
    r = wait_for(lambda: (lambda r: r if r.status_code == 404 else None)(
        daemon.get(f"/v1/sessions/{sid}")))
    assert r is not None, "the killed session still answers as live"
    body = r.json()
    assert body["state"] == "lost", body
    if not call_first:
        assert "died while it was idle" in body["reason"], body
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "x"})
    assert r.status_code == 404 and r.json()["state"] == "lost", daemon.why(r)


def test_dead_pool_members_are_replaced(daemon):
    """Kill every sandbox that is not a live session (the warm pool member): the next session
    still starts and runs."""
    live = {f"airlock-{s['id']}" for s in daemon.get("/v1/sessions").json()["sessions"]}
    time.sleep(1)   # the pool has its member
    killed = set()
    for d in cgroup_dirs_named(daemon.known_cgroup_names() | _pool_names(daemon)):
        name = os.path.basename(d)
        if name.startswith("airlock-s-") and name not in live:
            killed |= kill_cgroup(name)
    assert killed, "no pool member found to kill"
    time.sleep(2)   # the daemon's check runs every second
    for _ in range(3):
        sid = daemon.create_session()
        assert daemon.execute(sid, "1 + 1")["result"] == "2"
        daemon.delete_session(sid)


def _pool_names(daemon):
    """Every airlock-s-* cgroup below this daemon's own cgroup."""
    names = set()
    for scope in cgroup_dirs_named({daemon.cgroup_scope()}):
        for n in os.listdir(scope):
            if n.startswith("airlock-s-"):
                names.add(n)
    return names
