"""Uploads count against the session's memory (issue 12, item 2; docs/SECURITY.md "Files put
into a session").

Before: a PUT was written into the session's tmpfs /work by a daemon thread, so its pages were
charged to the daemon's cgroup: 256 MiB went into a session capped at 192 MiB, and clients could
pin more memory than the host has. Now the session's own process writes the file (its pages are
the session's), and an upload that would not fit in the session's memory is refused with 507
instead of being written or getting the session killed."""
import json
import re
import os

import pytest
import requests

from airlock_daemon import Daemon, cgroup_dirs_named

MIB = 1 << 20


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    profiles = tmp_path_factory.mktemp("profiles")
    (profiles / "small.json").write_text(json.dumps({
        "description": "192 MiB of memory, a workspace that would hold more",
        "languages": ["python", "bash"],
        "limits": {"memory": "192MiB", "workspace": "1GiB"}}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
    env["AIRLOCK_PROFILES_DIR"] = str(profiles)
    d = Daemon(args=["--pool-size", "0"], env=env)
    d.start(wait_zygote=None)
    try:
        yield d
    finally:
        rc, problems = d.stop()
    assert not problems, problems


def memory_cgroup_bytes(sid):
    """What the session's memory cgroup holds now (v2 memory.current or v1
    memory.usage_in_bytes), or None when this host has no memory controller for it."""
    for d in cgroup_dirs_named({f"airlock-{sid}"}):
        for name in ("memory.current", "memory.usage_in_bytes"):
            try:
                with open(os.path.join(d, name)) as f:
                    return int(f.read())
            except OSError:
                continue
    return None


def test_an_upload_is_charged_to_the_session(daemon):
    sid = daemon.create_session(profile="small")
    try:
        before = memory_cgroup_bytes(sid)
        if before is None:
            pytest.skip("no memory cgroup found for the session on this host")
        r = daemon.put(f"/v1/sessions/{sid}/files/big.bin", data=b"\xab" * (48 * MIB))
        assert r.status_code in (200, 201, 204), daemon.why(r)
        after = memory_cgroup_bytes(sid)
        # The 48 MiB now sit in the session's tmpfs, charged to the session (before: to the
        # daemon, and the session's usage did not move).
        assert after - before >= 40 * MIB, (before, after)
        r = daemon.execute(sid, "import os; os.path.getsize('/work/big.bin')")
        assert r["result"] == str(48 * MIB), r
    finally:
        daemon.delete_session(sid)


def test_uploads_past_the_memory_limit_are_refused_and_the_session_lives(daemon):
    """Four 60 MiB uploads into a 192 MiB session: the ones that do not fit get 507 with a
    message that says why; the session survives and keeps what fitted."""
    sid = daemon.create_session(profile="small")
    try:
        statuses = []
        for i in range(4):
            r = daemon.put(f"/v1/sessions/{sid}/files/part{i}.bin", data=bytes([i]) * (60 * MIB))
            statuses.append(r.status_code)
            if r.status_code == 507:
                body = r.json()
                assert "does not fit in the session's memory" in body["error"], body
        assert 507 in statuses, statuses
        kept = statuses.index(507)
        assert kept >= 1, f"not even one 60 MiB file fitted in 192 MiB: {statuses}"
        r = daemon.execute(sid, "import os; sorted(os.listdir('/work'))")
        assert r["status"] == "ok", r
        assert r["result"] == repr([f"part{i}.bin" for i in range(kept)]), r
        s = daemon.get(f"/v1/sessions/{sid}").json()
        assert s["state"] in ("idle", "busy"), s
    finally:
        daemon.delete_session(sid)


def test_all_sessions_together_are_capped_by_max_session_memory(tmp_path_factory):
    """--max-session-memory 400M is the kernel limit of the daemon's own cgroup, and an upload
    that would pass it is refused (507) even though each session still has room of its own."""
    profiles = tmp_path_factory.mktemp("profiles-cap")
    (profiles / "small.json").write_text(json.dumps({
        "description": "192 MiB", "languages": ["python", "bash"],
        "limits": {"memory": "192MiB", "workspace": "1GiB"}}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
    env["AIRLOCK_PROFILES_DIR"] = str(profiles)
    d = Daemon(args=["--pool-size", "0", "--max-session-memory", "400M"], env=env)
    d.start(wait_zygote=None)
    sids = []
    try:
        m = re.search(r"sandbox cgroups go below '([^']+)'", d.log_text())
        assert m, d.log_text()[-2000:]
        scope = [p for p in cgroup_dirs_named({m.group(1)})
                 if os.path.exists(os.path.join(p, "memory.max"))
                 or os.path.exists(os.path.join(p, "memory.limit_in_bytes"))]
        if not scope:
            pytest.skip("no memory cgroup for the daemon on this host")
        limit_file = next(os.path.join(scope[0], f) for f in ("memory.max",
                                                                "memory.limit_in_bytes")
                          if os.path.exists(os.path.join(scope[0], f)))
        with open(limit_file) as f:
            assert int(f.read()) == 400 * MIB

        sids = [d.create_session(profile="small") for _ in range(3)]
        refused = None
        for i in range(9):
            sid = sids[i % 3]
            r = d.put(f"/v1/sessions/{sid}/files/f{i}.bin", data=bytes([i]) * (60 * MIB))
            if r.status_code == 507:
                refused = r.json()["error"]
                break
            assert r.status_code == 200, d.why(r)
        assert refused, "nine 60 MiB uploads passed a 400 MiB cap"
        assert "--max-session-memory" in refused, refused
        for sid in sids:
            assert d.get(f"/v1/sessions/{sid}").json()["state"] == "idle"
    finally:
        for sid in sids:
            d.delete_session(sid)
        rc, problems = d.stop()
        assert not problems, problems
