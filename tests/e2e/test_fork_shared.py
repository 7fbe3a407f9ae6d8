"""A fork's children share the parent's saved arrays until they write (docs/LIFECYCLE.md, "Fork:
one save, n loads in parallel"): the parent's runner writes its state into a memfd charged to
its own memory cgroup, the daemon seals it, and each child builds its numpy arrays (and so its
DataFrames) on a copy-on-write mapping of it. These tests check that the children hold equal
data on that mapping, that a write stays in the sandbox that made it and is charged to it, that
the shared pages are charged to the parent and freed with the last child, that a state which
does not fit the parent's memory is copied instead, and that crafted and oversized states are
refused with an error."""

import json

import pytest

from airlock_daemon import (profiles_daemon_fixture, sessions_fixture, start_daemon_or_fail)

MiB = 1 << 20
SMALL = "fork-small-memory"

daemon = profiles_daemon_fixture(pytest, "airlock-e2e-fork-shared-", {SMALL: {
    "description": "the default profile with 192 MiB of memory (test_fork_shared.py)",
    "languages": ["python"],
    "preload": ["numpy", "pandas"],
    "limits": {"memory": "192MiB", "timeout": "60s"}}})
sessions = sessions_fixture(pytest)

# Where an array's memory comes from: the shared mapping (a view of an mmap.mmap), or not.
ON_MAP = r'''
import mmap as _mmap, numpy as _np
def _on_map(a):
    while isinstance(a, _np.ndarray) and a.base is not None:
        a = a.base
    return isinstance(a, memoryview) and isinstance(a.obj, _mmap.mmap)
'''

# A 10 MiB DataFrame and a 16 MiB array, and their checksums.
SETUP = r'''
import numpy as np, pandas as pd
np.random.seed(7)
df = pd.DataFrame(np.random.rand(163840, 8))
arr = np.arange(2_000_000, dtype=np.int64)
small = [1, 2, 3]
'''
CHECK = ("import json\nprint(json.dumps([float(df.values.sum()), int(arr.sum()), small, "
         "_on_map(arr), all(_on_map(b.values) for b in df._mgr.blocks), "
         "bool(arr.flags.writeable), bool(df.values.flags.writeable)]))")


def run_ok(d, sid, code):
    res = d.execute(sid, code, http_timeout=180)
    assert res["status"] == "ok", f"cell failed: {code!r}\n{json.dumps(res, indent=1)[:3000]}"
    return res


def out(d, sid, code):
    return json.loads(run_ok(d, sid, code)["stdout"])


def fork(d, sid, n, expect=201):
    r = d.post(f"/v1/sessions/{sid}/fork", json={"n": n}, timeout=300)
    assert r.status_code == expect, f"fork {sid} n={n}: " + d.why(r)
    return r.json()


def memory_now(d):
    """{session id: memory_current_bytes} of the live sessions (their cgroups' figures)."""
    r = d.get("/v1/sessions?usage=live")
    assert r.status_code == 200, d.why(r)
    return {s["id"]: s["usage"].get("memory_current_bytes") for s in r.json()["sessions"]}


def wait_until(what, predicate, timeout=30):
    import time

    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout}s (last: {v!r})", pytrace=False)
        time.sleep(0.2)


def test_children_share_the_parents_arrays_and_writes_stay_their_own(daemon, sessions):
    parent = sessions.new()
    run_ok(daemon, parent, SETUP + ON_MAP)
    want = out(daemon, parent, CHECK)
    assert want[3:5] == [False, False], "the parent's own arrays are not on a mapping"
    kids = [s["id"] for s in fork(daemon, parent, 3)["sessions"]]
    sessions.ids.extend(kids)

    for k in kids:
        got = out(daemon, k, ON_MAP + CHECK)
        # equal data, on the shared mapping, writable (copy-on-write)
        assert got[:3] == want[:3], (k, got, want)
        assert got[3:] == [True, True, True, True], (k, got)

    # a child's writes show neither in its siblings nor in the parent
    run_ok(daemon, kids[0], "arr += 1\ndf.iloc[0, 0] = -5.0\nsmall.append(4)")
    got = out(daemon, kids[0], CHECK)
    assert got[1] == want[1] + 2_000_000 and got[2] == [1, 2, 3, 4], got
    assert float(out(daemon, kids[0], "print(float(df.iloc[0, 0]))")) == -5.0
    for s in [parent] + kids[1:]:
        assert out(daemon, s, CHECK)[:3] == want[:3], s
    # and the parent's later writes do not reach the children
    run_ok(daemon, parent, "arr[:] = 0")
    assert out(daemon, kids[1], CHECK)[1] == want[1]

    # the children outlive the parent: the pages stay as long as a mapping holds them
    daemon.delete_session(parent)
    assert out(daemon, kids[2], CHECK)[:3] == want[:3]


def test_shared_pages_are_charged_to_the_parent_a_childs_writes_to_the_child(daemon, sessions):
    parent = sessions.new()
    run_ok(daemon, parent, "import numpy as np\nbig = np.ones(8 << 20)  # 64 MiB")
    run_ok(daemon, parent, "import gc; gc.collect()")
    before = memory_now(daemon)[parent]
    assert before, "this host reports no memory usage for a session's cgroup"
    kids = [s["id"] for s in fork(daemon, parent, 2)["sessions"]]
    sessions.ids.extend(kids)
    now = memory_now(daemon)
    # the memfd holds a second copy of the 64 MiB, charged to the parent's cgroup
    assert now[parent] >= before + 56 * MiB, (before, now)
    # a child that only reads is not charged for the data; one that writes is, for its copy
    assert out(daemon, kids[0], "print(float(big.sum()))") == float(8 << 20)
    read_only = memory_now(daemon)[kids[0]]
    run_ok(daemon, kids[0], "big += 1")
    written = memory_now(daemon)[kids[0]]
    assert written >= read_only + 56 * MiB, (read_only, written)
    assert out(daemon, kids[1], "print(float(big.sum()))") == float(8 << 20)
    # once no child maps the state any more, its pages are freed and the parent's charge goes
    for k in kids:
        daemon.delete_session(k)
    wait_until("the parent's charge for the shared state to go",
               lambda: memory_now(daemon)[parent] < before + 24 * MiB)


def test_a_state_that_does_not_fit_the_parents_memory_is_copied(daemon, sessions):
    # 120 MiB of a 192 MiB limit: no room for a second copy in the parent's memory
    parent = sessions.new(profile=SMALL)
    run_ok(daemon, parent, "import numpy as np\nbig = np.full(15 << 20, 3.0)\n" + ON_MAP)
    kids = [s["id"] for s in fork(daemon, parent, 2)["sessions"]]
    sessions.ids.extend(kids)
    for k in kids:
        got = out(daemon, k, ON_MAP + "import json\n"
                  "print(json.dumps([float(big.sum()), _on_map(big)]))")
        assert got == [3.0 * (15 << 20), False], (k, got)
    assert out(daemon, parent, "import json\nprint(json.dumps(float(big.sum())))") == \
        3.0 * (15 << 20)


def saved_module_patch(body):
    """A cell that replaces the runner's saved._write_buffers with body (a function of (out,
    buffers, pickle_len, start, aligned)) for the next save of this session only."""
    return ("import sys\n"
            "_saved = sys.modules['airlock_cell.saved']\n"
            "_orig = _saved._write_buffers\n"
            f"{body}\n"
            "def _once(*a, **k):\n"
            "    _saved._write_buffers = _orig\n"
            "    return _crafted(*a, **k)\n"
            "_saved._write_buffers = _once\n")


CRAFTED_TRAILER = r'''
def _crafted(out, buffers, pickle_len, start=0, aligned=False):
    for b in buffers:
        out.write(b.raw())
    table = b"".join((1 << 40).to_bytes(8, "little") + b.raw().nbytes.to_bytes(8, "little")
                     for b in buffers)
    out.write(table + pickle_len.to_bytes(8, "little") + len(buffers).to_bytes(8, "little")
              + b"ALSTATE2")
'''

CUT_SHORT = r'''
import os
def _crafted(out, buffers, pickle_len, start=0, aligned=False):
    _orig(out, buffers, pickle_len, start, aligned)
    os.ftruncate(out.fd, 4096)
'''

KEEP_WRITABLE_MAP = r'''
import mmap
_kept = []
def _crafted(out, buffers, pickle_len, start=0, aligned=False):
    _orig(out, buffers, pickle_len, start, aligned)
    _kept.append(mmap.mmap(out.fd, 4096, flags=mmap.MAP_SHARED,
                           prot=mmap.PROT_READ | mmap.PROT_WRITE))
'''


def test_a_crafted_trailer_is_refused_by_the_children(daemon, sessions):
    parent = sessions.new()
    run_ok(daemon, parent, "import numpy as np\narr = np.arange(1 << 18)\nx = 5\n"
                           + saved_module_patch(CRAFTED_TRAILER))
    body = fork(daemon, parent, 2)
    for s in body["sessions"]:
        sessions.ids.append(s["id"])
        assert "do not fit" in s.get("resume_error", ""), s
        res = run_ok(daemon, s["id"], "'arr' in globals(), 'x' in globals()")
        assert res["result"] == "(False, False)", res
    # the parent is untouched, and its next fork (not crafted) is whole
    assert run_ok(daemon, parent, "int(arr.sum()), x")["result"] == repr(
        (sum(range(1 << 18)), 5))
    kid = fork(daemon, parent, 1)["sessions"][0]
    sessions.ids.append(kid["id"])
    assert "resume_error" not in kid, kid
    assert run_ok(daemon, kid["id"], "int(arr.sum()), x")["result"] == repr(
        (sum(range(1 << 18)), 5))


@pytest.mark.parametrize("craft,status,words", [
    (CUT_SHORT, 500, "cut short"),
    (KEEP_WRITABLE_MAP, 409, "writable mapping"),
], ids=["cut-short", "writable-mapping"])
def test_a_parent_that_tampers_with_its_shared_state_gets_an_error(daemon, sessions, craft,
                                                                    status, words):
    parent = sessions.new()
    run_ok(daemon, parent, "import numpy as np\narr = np.arange(1 << 18)\n"
                           + saved_module_patch(craft))
    before = set(memory_now(daemon))
    r = daemon.post(f"/v1/sessions/{parent}/fork", json={"n": 2}, timeout=300)
    assert r.status_code == status, daemon.why(r)
    assert words in r.json().get("error", ""), r.text
    assert set(memory_now(daemon)) <= before | {parent}, "a refused fork made sessions"
    assert run_ok(daemon, parent, "int(arr.sum())")["result"] == str(sum(range(1 << 18)))


def test_a_state_over_max_stopped_bytes_is_507_and_the_parent_lives():
    d = start_daemon_or_fail(pytest, args=["--pool-size", "0", "--max-stopped-bytes", "4M"])
    try:
        sid = d.create_session()
        run_ok(d, sid, "import numpy as np\narr = np.ones(1 << 20)  # 8 MiB")
        r = d.post(f"/v1/sessions/{sid}/fork", json={"n": 2}, timeout=300)
        assert r.status_code == 507, d.why(r)
        assert "4194304" in r.json().get("error", ""), r.text
        assert set(memory_now(d)) == {sid}, "a refused fork made sessions"
        assert run_ok(d, sid, "float(arr.sum())")["result"] == str(float(1 << 20))
    finally:
        rc, problems = d.stop()
    assert not problems, problems


def test_a_child_on_the_mapping_forks_again_stops_and_resumes(daemon, sessions):
    parent = sessions.new()
    run_ok(daemon, parent, SETUP + ON_MAP)
    want = out(daemon, parent, CHECK)
    kid = fork(daemon, parent, 1)["sessions"][0]["id"]
    sessions.ids.append(kid)
    run_ok(daemon, kid, "arr[:10] = -1")
    want_kid = out(daemon, kid, CHECK)[:3]
    assert want_kid[1] == want[1] - sum(range(10)) - 10, want_kid
    # a fork of a child (its arrays still views of the parent's state) shares the child's
    # state, written into the child's own memfd
    grandkid = fork(daemon, kid, 1)["sessions"][0]["id"]
    sessions.ids.append(grandkid)
    got = out(daemon, grandkid, ON_MAP + CHECK)
    assert got[:3] == want_kid and got[3:5] == [True, True], got
    # its arrays go to disk and come back as its own memory
    r = daemon.post(f"/v1/sessions/{kid}/stop", timeout=180)
    assert r.status_code == 200, daemon.why(r)
    got = out(daemon, kid, ON_MAP + CHECK)
    assert got[:3] == want_kid and got[3:5] == [False, False], got
    assert out(daemon, parent, CHECK)[:3] == want[:3]
