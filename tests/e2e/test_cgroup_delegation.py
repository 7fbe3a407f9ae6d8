"""cgroup v2 delegation (issue 11, "Delegate=yes for its cgroup subtree on cgroup v2";
docs/DEPLOY.md): a daemon whose cgroup systemd delegated to it moves itself into the leaf
<its cgroup>/daemon, enables memory, pids and cpu for its cgroup's children and makes its
sandboxes there, beside that leaf, instead of under /sys/fs/cgroup/airlock.

systemd's part is emulated the way systemd does it: a cgroup below the root with the root's
controllers enabled for it, marked with the trusted.delegate xattr, and the daemon started in
it. This needs a cgroup v2 (unified) host; on a v1 or hybrid host the test skips saying so.
The logic itself is tested against a fake tree in tests/unit/test-cgroup.c (suite delegate)."""
import os
import pathlib
import signal
import time
import uuid

import pytest

from airlock_daemon import AIRLOCK, Daemon

CGROUP = pathlib.Path("/sys/fs/cgroup")


def cgroup2_unavailable():
    """Why this host cannot run the test, or None."""
    if os.geteuid() != 0:
        return "making and delegating cgroups needs root"
    fstype = None
    for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == str(CGROUP):
            fstype = fields[fields.index("-") + 1]
    if fstype != "cgroup2":
        return (f"{CGROUP} is {fstype or 'not mounted'}, not cgroup2: this host has cgroup v1 "
                "(or a hybrid layout), and Delegate=yes hands out a cgroup v2 subtree only")
    controllers = (CGROUP / "cgroup.controllers").read_text().split()
    if not {"memory", "pids"} <= set(controllers):
        return f"the cgroup2 root offers no memory or pids controller: {controllers}"
    return None


pytestmark = pytest.mark.skipif(cgroup2_unavailable() is not None,
                                reason=str(cgroup2_unavailable()))


def remove_tree(path):
    """Kills what is left in the cgroup tree at path and removes it, deepest first."""
    if not path.exists():
        return
    if (path / "cgroup.kill").exists():
        try:
            (path / "cgroup.kill").write_text("1")
        except OSError:
            pass
    for d in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        for pid in (d / "cgroup.procs").read_text().split() if (d / "cgroup.procs").exists() else []:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    for d in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [path]:
        while True:
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


@pytest.fixture
def delegated(tmp_path):
    """A cgroup as systemd leaves a Delegate=yes service's: the root's memory and pids (and
    cpu when offered) enabled for it, trusted.delegate=1, nothing enabled below it."""
    root_enabled = (CGROUP / "cgroup.subtree_control").read_text().split()
    want = [c for c in ("memory", "pids", "cpu")
            if c in (CGROUP / "cgroup.controllers").read_text().split() and c not in root_enabled]
    for c in want:
        try:
            (CGROUP / "cgroup.subtree_control").write_text("+" + c)
        except OSError as e:
            if c != "cpu":
                pytest.skip(f"cannot enable {c} in {CGROUP}/cgroup.subtree_control: {e}")
    path = CGROUP / f"airlock-e2e-delegate-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    try:
        try:
            os.setxattr(path, "trusted.delegate", b"1")
        except OSError as e:
            pytest.skip(f"cannot set trusted.delegate on {path}: {e}")
        # The daemon starts inside it, as systemd starts a service's main process.
        wrapper = tmp_path / "in-cgroup"
        wrapper.write_text(f"#!/bin/sh\necho $$ > '{path}/cgroup.procs' && exec '{AIRLOCK}' \"$@\"\n")
        wrapper.chmod(0o755)
        yield path, str(wrapper)
    finally:
        remove_tree(path)


def test_daemon_puts_its_sandboxes_into_its_delegated_cgroup(delegated):
    path, wrapper = delegated
    d = Daemon(args=["--pool-size", "0"], binary=wrapper)
    try:
        d.start(wait_zygote=None)
        sid = d.post("/v1/sessions", json={}).json()["id"]
        out = d.execute(sid, "print(6 * 7)")
        assert out["stdout"] == "42\n", out
        # No process in the delegated cgroup itself; the daemon in its leaf.
        assert (path / "cgroup.procs").read_text().split() == []
        assert str(d.proc.pid) in (path / "daemon" / "cgroup.procs").read_text().split()
        enabled = (path / "cgroup.subtree_control").read_text().split()
        assert {"memory", "pids"} <= set(enabled), enabled
        # The daemon's own cgroup (airlock-d-<id>) beside the leaf, with the session's inside,
        # capped, and nothing under the fallback parent.
        mine = [p for p in path.iterdir() if p.is_dir() and p.name.startswith("airlock-d-")]
        assert len(mine) == 1, list(path.iterdir())
        sessions = [p for p in mine[0].iterdir() if p.is_dir()]
        assert sessions and all((p / "memory.max").read_text().strip() != "max"
                                for p in sessions), sessions
        assert not (CGROUP / "airlock" / mine[0].name).exists()
    finally:
        rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)
