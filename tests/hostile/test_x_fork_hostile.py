"""Extra: a session leaves processes running in the background (a `sleep` started with `&` in
its bash, a `sleep` and a Python child started with subprocess, a sleeping Python thread), then
is forked three times (POST /v1/sessions/{id}/fork {"n": 3}). The daemon must answer, the
children must be usable, no child may see (or inherit) the parent's processes, the host must
hold exactly the parent's processes (no copies), and after every session is deleted none of
them may remain on the host."""
import json
import os
import random
import time

import pytest

import conftest
from conftest import VIA_DAEMON

pytestmark = pytest.mark.skipif(
    not VIA_DAEMON, reason="daemon-only: fork exists only in `airlock serve`; run with "
                           "AIRLOCK_HOSTILE_VIA=daemon")

SCAN = r'''
import json, os
found = []
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            c = open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "@TAG@" in c:
            found.append(c.strip())
print(json.dumps(sorted(found)))
'''


def _host_tagged(tag):
    """{pid: cmdline} of host processes whose command line carries tag."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                c = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if tag in c:
            out[int(p)] = c.strip()
    return out


def _scan(d, sid, tag):
    res = d.execute(sid, SCAN.replace("@TAG@", tag))
    assert res["status"] == "ok", res
    return json.loads(res["stdout"])


@pytest.mark.slow
def test_fork_of_a_session_with_background_processes():
    d = conftest.daemon()
    tag = str(random.randrange(10 ** 8, 10 ** 9))
    parent = d.create_session()
    ids = [parent]
    try:
        res = d.execute(parent, f"sleep 1000.{tag} </dev/null >/dev/null 2>&1 &\necho started",
                        language="bash", timeout_s=20)
        assert res["status"] == "ok" and res["stdout"] == "started\n", res
        res = d.execute(parent, f'''
import subprocess, threading, time
th = threading.Thread(target=time.sleep, args=(1000,), daemon=True)
th.start()
quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
child = subprocess.Popen(["sleep", "1001.{tag}"], **quiet)
pychild = subprocess.Popen(["python3", "-c", "import time; time.sleep(1000)",
                            "hostile-fork-{tag}"], **quiet)
deadline = time.time() + 10
import os
def tagged():
    n = 0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                n += "{tag}" in open("/proc/%s/cmdline" % p, "rb").read().decode("utf-8", "replace")
            except OSError:
                pass
    return n
while tagged() < 3 and time.time() < deadline:
    time.sleep(0.05)
tagged()
''', timeout_s=30)
        assert res["status"] == "ok" and res["result"] == "3", res
        seen_by_parent = _scan(d, parent, tag)
        assert len(seen_by_parent) == 3, seen_by_parent
        host_before = _host_tagged(tag)
        assert len(host_before) == 3, host_before

        r = d.post(f"/v1/sessions/{parent}/fork", json={"n": 3}, timeout=180)
        assert d.alive(), "the daemon died forking:\n" + d.log_text()[-3000:]
        assert r.status_code == 201, d.why(r)
        kids = [s["id"] for s in r.json()["sessions"]]
        ids += kids
        assert len(set(kids)) == 3 and parent not in kids, r.json()
        print(f"lost names of the fork: {[s.get('lost_names') for s in r.json()['sessions']]}")

        for k in kids:
            res = d.execute(k, "1 + 1")
            assert res["status"] == "ok" and res["result"] == "2", (k, res)
            assert _scan(d, k, tag) == [], f"child {k} sees the parent's processes"
            res = d.execute(k, "command -v ps >/dev/null && ps -e -o args || ls /proc",
                            language="bash")
            assert res["status"] == "ok" and tag not in res["stdout"], (k, res)
        assert _host_tagged(tag) == host_before, (
            f"the fork copied or lost background processes on the host: before "
            f"{host_before}, now {_host_tagged(tag)}")
        assert len(_scan(d, parent, tag)) == 3, "the parent lost its processes in the fork"
        assert d.get("/healthz").status_code == 200
    finally:
        for sid in ids:
            d.delete_session(sid)

    deadline = time.monotonic() + 15
    while _host_tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _host_tagged(tag), f"left on the host after DELETE: {_host_tagged(tag)}"
