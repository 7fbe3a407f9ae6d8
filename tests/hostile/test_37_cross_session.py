"""Row 37: session A leaves files in /tmp, /dev/shm and /work, SysV shm/msg/sem objects, a
POSIX message queue and an abstract unix socket; session B (concurrent, then consecutive)
looks for them -> invisible to B. The host sees none of them either."""
import concurrent.futures
import time
import uuid

import pytest

from conftest import run_py

COMMON = r'''
import socket
tag = "@TAG@"
key = @KEY@
libc = _libc
libc.shmget.restype = _ct.c_int
libc.msgget.restype = _ct.c_int
libc.semget.restype = _ct.c_int
try:
    rt = _ct.CDLL("librt.so.1", use_errno=True)
except OSError:
    rt = _libc
rt.mq_open.restype = _ct.c_int
def ipc(fn, *args):
    _ct.set_errno(0)
    r = fn(*args)
    return "OK" if r >= 0 else ename(_ct.get_errno())
'''

CREATE = COMMON + r'''
import time
for d in ("/tmp", "/dev/shm", "/work"):
    with open("%s/%s" % (d, tag), "w") as f:
        f.write("secret of A\n")
R["shmget"] = ipc(libc.shmget, key, 4096, 0o1000 | 0o666)
R["msgget"] = ipc(libc.msgget, key, 0o1000 | 0o666)
R["semget"] = ipc(libc.semget, key, 1, 0o1000 | 0o666)
R["mq_open"] = ipc(rt.mq_open, ("/" + tag).encode(), os.O_CREAT | os.O_RDWR, 0o666, None)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + tag)
s.listen(1)
R["own view"] = {
    "files": [os.path.exists("%s/%s" % (d, tag)) for d in ("/tmp", "/dev/shm", "/work")],
    "shm": ipc(libc.shmget, key, 0, 0), "msg": ipc(libc.msgget, key, 0),
    "sem": ipc(libc.semget, key, 0, 0)}
time.sleep(@HOLD@)
'''

LOOK = COMMON + r'''
R["files"] = {d: os.listdir(d) for d in ("/tmp", "/dev/shm", "/work")}
R["shm"] = ipc(libc.shmget, key, 0, 0)
R["msg"] = ipc(libc.msgget, key, 0)
R["sem"] = ipc(libc.semget, key, 0, 0)
R["mq"] = ipc(rt.mq_open, ("/" + tag).encode(), os.O_RDWR, 0, None)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
R["abstract"] = attempt(s.connect, "\0" + tag)
R["sysvipc"] = attempt(lambda: open("/proc/sysvipc/shm").read())
'''


def _host_sysv_keys():
    keys = set()
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as f:
            for line in f.readlines()[1:]:
                keys.add(int(line.split()[0]))
    return keys


def _assert_invisible(r, tag):
    for d, entries in r["files"].items():
        assert tag not in entries, f"{d}/{tag} of session A is visible to session B"
        assert entries == [], f"{d} of a fresh session is not empty: {entries}"
    for k in ("shm", "msg", "sem", "mq"):
        assert r[k] in ("ENOENT", "ENOSYS", "EPERM", "EACCES"), f"{k}: {r[k]}"
    assert r["abstract"] in ("ECONNREFUSED", "ENOENT", "EPERM"), r["abstract"]
    assert r["sysvipc"] == "ENOENT"


@pytest.mark.slow
def test_concurrent_sessions_do_not_see_each_other():
    tag = "hostile-" + uuid.uuid4().hex[:12]
    key = 0x4A000000 | (uuid.uuid4().int & 0xFFFFFF)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        a = pool.submit(run_py, CREATE.replace("@TAG@", tag).replace("@KEY@", str(key))
                        .replace("@HOLD@", "8"), timeout=30)
        time.sleep(3)
        assert key not in _host_sysv_keys(), "A's SysV object appeared in the host IPC namespace"
        b = run_py(LOOK.replace("@TAG@", tag).replace("@KEY@", str(key)))
        ra = a.result().R
    own = ra["own view"]
    assert own["files"] == [True, True, True] and own["shm"] == own["msg"] == own["sem"] == "OK", \
        f"session A could not create its objects, so the check would be empty: {ra}"
    _assert_invisible(b.R, tag)


def test_consecutive_sessions_do_not_see_each_other():
    tag = "hostile-" + uuid.uuid4().hex[:12]
    key = 0x4B000000 | (uuid.uuid4().int & 0xFFFFFF)
    a = run_py(CREATE.replace("@TAG@", tag).replace("@KEY@", str(key)).replace("@HOLD@", "0"))
    assert a.R["own view"]["files"] == [True, True, True], a.R
    b = run_py(LOOK.replace("@TAG@", tag).replace("@KEY@", str(key)))
    _assert_invisible(b.R, tag)
    assert key not in _host_sysv_keys()
