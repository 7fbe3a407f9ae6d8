"""Whose cgroups a daemon may sweep (issue 12 item 9, docs/SECURITY.md "Cgroups of other
daemons"): a starting daemon removes the empty cgroups a crashed predecessor on the same state
directory left, and never those of another daemon on this host, even where both share a
controller's root (cgroup v1 here: pids and cpu live in each hierarchy's root).

An empty cgroup of a live daemon is real (made, not yet attached; or a session whose
processes just ended, before the daemon removed it) but short-lived, so the tests plant one:
an empty directory named like a session's cgroup, next to where the daemon's sessions' cgroups
live. Every directory a test plants is removed at the end, whatever happened."""
import os
import pathlib
import shutil
import tempfile

import pytest

from airlock_daemon import (cgroup_dirs_named, crash_daemon, reap_crashed, restart_daemon,
                            start_daemon_or_fail)

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

ARGS = ["--pool-size", "1"]


@pytest.fixture
def world():
    """Working directories, daemons and planted cgroups of one test, all undone at the end:
    live daemons stopped (and checked), crashed ones reaped, planted directories removed."""
    w = {"dirs": [], "live": [], "crashed": [], "planted": []}

    def workdir():
        d = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-cgroups-"))
        w["dirs"].append(d)
        return d

    w["workdir"] = workdir
    yield w
    # The planted cgroups first: they sit in the daemons' own, which a daemon that stops
    # removes (and the check of its stop expects gone).
    for p in sorted(w["planted"], key=len, reverse=True):
        try:
            os.rmdir(p)
        except OSError:
            pass
    problems = []
    for d in reversed(w["live"]):
        _, p = d.stop(timeout=120)
        problems += p
    for d in w["crashed"]:
        reap_crashed(d)
    for d in w["dirs"]:
        shutil.rmtree(d, ignore_errors=True)
    if problems:
        pytest.fail("a daemon did not stop cleanly:\n  " + "\n  ".join(problems), pytrace=False)


def start(w, workdir, **kw):
    d = start_daemon_or_fail(pytest, workdir=workdir, args=ARGS, **kw)
    w["live"].append(d)
    return d


def parents_of_session(sid):
    """The directories holding the cgroup(s) of session sid (one per v1 hierarchy, one on v2)."""
    dirs = cgroup_dirs_named({f"airlock-{sid}"})
    assert dirs, f"no cgroup of session {sid} found under /sys/fs/cgroup"
    return sorted({os.path.dirname(p) for p in dirs})


def plant(w, parents):
    """An empty cgroup named like a session's in each of parents; returns their paths."""
    name = "airlock-s-" + os.urandom(12).hex()
    made = []
    for parent in parents:
        path = os.path.join(parent, name)
        os.mkdir(path)
        w["planted"].append(path)
        made.append(path)
    return made


def missing(paths):
    return [p for p in paths if not os.path.isdir(p)]


def test_a_starting_daemon_leaves_another_daemons_cgroups_alone(world):
    a = start(world, world["workdir"]())
    sid = a.create_session()
    a.execute(sid, "x = 41")
    parents_a = parents_of_session(sid)
    planted_a = plant(world, parents_a)

    # b starts (its sweep runs before it listens and before its zygote is ready), then
    # restarts on its own state directory: a's empty cgroup and its session stay.
    b_dir = world["workdir"]()
    b = start(world, b_dir)
    assert not missing(planted_a), (f"a daemon with another state directory removed the "
                                    f"empty cgroup(s) {missing(planted_a)} of a live daemon")
    rc, problems = b.stop()
    world["live"].remove(b)
    assert rc == 0 and not problems, "\n".join(problems)
    assert not missing(planted_a), (f"a stopping daemon removed the empty cgroup(s) "
                                    f"{missing(planted_a)} of another live daemon")
    b = start(world, b_dir)
    assert not missing(planted_a), (f"a restarted daemon removed the empty cgroup(s) "
                                    f"{missing(planted_a)} of another live daemon")
    assert a.execute(sid, "x + 1")["result"] == "42"

    # Each daemon has a parent of its own: b's sessions never sit next to a's.
    sid_b = b.create_session()
    parents_b = parents_of_session(sid_b)
    assert not set(parents_a) & set(parents_b), (parents_a, parents_b)
    b.delete_session(sid_b)


def test_after_a_crash_the_next_daemon_sweeps_only_its_own(world):
    a_dir = world["workdir"]()
    a = start(world, a_dir)
    b = start(world, world["workdir"]())
    sid_a, sid_b = a.create_session(), b.create_session()
    a.execute(sid_a, "1")
    planted_a = plant(world, parents_of_session(sid_a))
    planted_b = plant(world, parents_of_session(sid_b))

    rec = crash_daemon(a)
    world["live"].remove(a)
    world["crashed"].append(a)
    a2 = restart_daemon(pytest, a, args=ARGS)
    world["live"].append(a2)

    # The new daemon on a's state directory removed what a left (its zygote's and sessions'
    # cgroups once their processes died, and the planted one), and nothing of b's.
    problems = a.wait_no_leftovers(timeout=20, names=rec.names, pids=rec.pids)
    assert not problems, "the restarted daemon left things of the crashed one:\n  " + \
        "\n  ".join(problems)
    assert missing(planted_a) == planted_a, f"left behind: {set(planted_a) - set(missing(planted_a))}"
    assert not missing(planted_b), f"b's empty cgroup(s) {missing(planted_b)} were removed"
    assert b.execute(sid_b, "6 * 7")["result"] == "42"
    b.delete_session(sid_b)
