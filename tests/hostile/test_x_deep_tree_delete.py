"""Extra (issue 12, item 10): code plants in /work what the files API must still delete. A
directory chain 2,000 levels deep (its path far longer than PATH_MAX) and a directory tens of
thousands of entries wide are removed whole by one DELETE /v1/sessions/{id}/files/{path}; the
daemon's walk holds a bounded number of directories open and never leaves /work. When the
session keeps writing into the directory while it is deleted, the answer says the delete was
partial (409, "partial": true, with counts) instead of pretending it worked; so does a delete
that runs out of time."""
import pytest

import conftest
from conftest import VIA_DAEMON

pytestmark = pytest.mark.skipif(
    not VIA_DAEMON, reason="daemon-only: the files API exists only in `airlock serve`; run with "
                           "AIRLOCK_HOSTILE_VIA=daemon")

DEPTH = 2000
WIDE = 30000

PLANT = r'''
import os
name = "n" * 60          # 2,000 levels of 61 bytes: a path of 122,000 bytes
fd = os.open("/work", os.O_RDONLY | os.O_DIRECTORY)
os.mkdir("chain", dir_fd=fd)
cur = os.open("chain", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
os.close(fd)
for i in range(%(depth)d):
    os.mkdir(name, dir_fd=cur)
    with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=cur), "w") as f:
        f.write("x")
    nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
    os.close(cur)
    cur = nxt
os.close(cur)
os.makedirs("/work/wide/sub", exist_ok=True)
for i in range(%(wide)d):
    open(f"/work/wide/{i:06d}-" + "w" * 40, "w").close()
for i in range(100):
    os.makedirs(f"/work/wide/sub/{i}/a/b/c", exist_ok=True)
os.symlink("/etc", "/work/wide/etc-link")
os.symlink("/", "/work/chain/root-link")
print("planted")
''' % {"depth": DEPTH, "wide": WIDE}

CHECK = r'''
import os
print(sorted(os.listdir("/work")))
'''


def _session(d):
    r = d.post("/v1/sessions", json={}, timeout=60)
    assert r.status_code == 201, d.why(r)
    return r.json()["id"]


def test_deep_chain_and_wide_directory_are_deleted_whole():
    d = conftest.daemon()
    sid = _session(d)
    try:
        res = d.execute(sid, PLANT, timeout_s=120, http_timeout=180)
        assert res["status"] == "ok" and "planted" in res["stdout"], res
        for path in ("chain", "wide"):
            r = d.delete(f"/v1/sessions/{sid}/files/{path}", timeout=120)
            assert r.status_code == 200, f"DELETE {path}: " + d.why(r)
            body = r.json()
            assert body["deleted"] is True and body.get("partial") is not True, body
            assert body["removed"] >= (2 * DEPTH if path == "chain" else WIDE), body
        res = d.execute(sid, CHECK)
        assert res["status"] == "ok" and res["stdout"].strip() == "[]", res
        listing = d.get(f"/v1/sessions/{sid}/files?dir=", timeout=30).json()
        assert listing["entries"] == [], listing
        # The session lives on, and the host's /etc is whole (the symlinks were not followed).
        res = d.execute(sid, "import os; os.path.isfile('/etc/passwd')")
        assert res["result"] == "True", res
    finally:
        d.delete_session(sid)


WRITER = r'''
import os, time
os.makedirs("/work/busy", exist_ok=True)
for i in range(2000):
    open(f"/work/busy/seed-{i}", "w").close()
fd = os.open("/work/busy", os.O_RDONLY | os.O_DIRECTORY)
end = time.monotonic() + %(seconds)s
kids = []
for k in range(3):             # three writers: more entries appear than one thread removes
    pid = os.fork()
    if pid == 0:
        i, code = 0, 0
        try:
            while time.monotonic() < end:
                try:
                    os.close(os.open(f"w{k}-{i}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
                    i += 1
                except FileNotFoundError:
                    code = 3   # the directory was removed under us
                    break
                except OSError:
                    time.sleep(0.01)   # the workspace's inodes ran out: wait for the delete
        finally:
            os._exit(code)
    kids.append(pid)
gone = [os.waitpid(p, 0)[1] for p in kids]
print("removed under the writers" if any(os.waitstatus_to_exitcode(g) == 3 for g in gone)
      else "the writers ran to the end")
'''


FLAT = 30000


def test_a_delete_that_runs_out_of_time_says_it_was_partial():
    """A delete that cannot finish in its time (here the client's own timeout_s, 1 ms, for a
    directory of 30,000 files) answers 409 with "partial": true and the counts, never 200; the
    directory is still there, and a second DELETE finishes the job."""
    d = conftest.daemon()
    sid = _session(d)
    try:
        res = d.execute(sid, f"""
import os
os.makedirs("/work/flat")
for i in range({FLAT}):
    open(f"/work/flat/{{i:06d}}", "w").close()
""", timeout_s=60, http_timeout=90)
        assert res["status"] == "ok", res
        r = d.delete(f"/v1/sessions/{sid}/files/flat?timeout_s=0.001", timeout=60)
        assert r.status_code == 409, d.why(r)
        body = r.json()
        assert body["partial"] is True and body["deleted"] is False, body
        assert body["path"] == "flat" and body["field"] == "path", body
        assert "partial" in body["error"] and "longer than" in body["error"], body
        assert 0 < body["removed"] < FLAT, body
        # Every entry is accounted for: the files removed, the files left and the directory.
        assert body["removed"] + body["left"] == FLAT + 1, body
        res = d.execute(sid, "len(os.listdir('/work/flat'))")
        assert res["result"] == str(body["left"] - 1), (res, body)
        r = d.delete(f"/v1/sessions/{sid}/files/flat", timeout=60)
        assert r.status_code == 200, d.why(r)
        assert r.json()["removed"] == body["left"], (r.text, body)
        assert d.get(f"/v1/sessions/{sid}/files?dir=flat", timeout=30).status_code == 404
        for bad in ("0", "-1", "abc", "11"):
            r = d.delete(f"/v1/sessions/{sid}/files/none?timeout_s={bad}", timeout=30)
            assert r.status_code == 400 and r.json()["field"] == "timeout_s", (bad, r.text)
    finally:
        d.delete_session(sid)


def test_a_delete_racing_writers_answers_honestly():
    """Three processes of the session keep creating files in the directory being deleted. The
    delete may win (the directory is gone: the writers then fail, as they write through an fd
    of the removed directory) or not (409 partial, and the directory is still there); either
    way the answer must say what happened, and the session must live on."""
    import threading
    import time

    d = conftest.daemon()
    sid = _session(d)
    try:
        box = {}

        def run_writer():
            # The writers outlast the delete (which stops after 10 s at most), so that a 200
            # can only mean the directory went while they were still writing.
            box["res"] = d.execute(sid, WRITER % {"seconds": 15}, timeout_s=60, http_timeout=100)

        t = threading.Thread(target=run_writer)
        t.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r = d.get(f"/v1/sessions/{sid}/files?dir=busy", timeout=30)
            if r.status_code == 200 and len(r.json()["entries"]) > 2000:
                break
            time.sleep(0.05)
        r = d.delete(f"/v1/sessions/{sid}/files/busy", timeout=60)
        t.join(100)
        assert not t.is_alive(), "the writer cell did not finish"
        assert box["res"]["status"] == "ok", box["res"]
        listed = d.get(f"/v1/sessions/{sid}/files?dir=busy", timeout=30)
        if r.status_code == 200:
            assert r.json()["deleted"] is True, r.text
            assert listed.status_code == 404, (r.text, listed.text)
            assert "removed under the writers" in box["res"]["stdout"], box["res"]
        else:
            assert r.status_code == 409, d.why(r)
            body = r.json()
            assert body["partial"] is True and body["removed"] > 0 and body["left"] > 0, body
            assert listed.status_code == 200, listed.text
        assert d.execute(sid, "1 + 1")["result"] == "2"
    finally:
        d.delete_session(sid)
