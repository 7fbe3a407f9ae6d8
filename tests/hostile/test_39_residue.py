"""Row 39: residue after a session ends (files, processes, keys, cgroups, SysV objects) -> none.
host_guard checks processes, cgroups, host /tmp and /dev/shm, mounts; this adds keys, SysV and
a clean next session."""
import uuid

from conftest import run_py, sandbox_range_key_users

LITTER = r'''
import signal, time
tag = "@TAG@"
for d in ("/tmp", "/dev/shm", "/work"):
    os.makedirs("%s/%s/deep/er" % (d, tag))
    open("%s/%s/deep/er/f" % (d, tag), "w").write("x" * 4096)
_libc.shmget(@KEY@, 1 << 20, 0o1000 | 0o666)
_libc.msgget(@KEY@, 0o1000 | 0o666)
syscall(248, b"user", tag.encode(), b"k", 1, -3)   # add_key (denied, but try)
for _ in range(3):                                  # stray processes
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        dn = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(dn, fd)
        os.closerange(3, 1024)
        while True:
            time.sleep(1)
R["littered"] = True
'''

CHECK = r'''
R["files"] = {d: os.listdir(d) for d in ("/tmp", "/dev/shm", "/work")}
R["shm"] = ename(_ct.get_errno()) if _libc.shmget(@KEY@, 0, 0) < 0 else "FOUND"
R["procs"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
'''


def _host_sysv_keys():
    keys = set()
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as f:
            for line in f.readlines()[1:]:
                keys.add(int(line.split()[0]))
    return keys


def test_no_residue_after_a_session():
    tag = "hostile-" + uuid.uuid4().hex[:12]
    key = 0x4C000000 | (uuid.uuid4().int & 0xFFFFFF)
    keys_before = sandbox_range_key_users()
    sysv_before = _host_sysv_keys()
    res = run_py(LITTER.replace("@TAG@", tag).replace("@KEY@", str(key)), timeout=15)
    assert res.R["littered"] is True
    assert sandbox_range_key_users() == keys_before, "kernel keys left by a sandbox uid"
    assert _host_sysv_keys() == sysv_before, "SysV objects appeared in the host namespace"
    nxt = run_py(CHECK.replace("@KEY@", str(key)))
    r = nxt.R
    for d, entries in r["files"].items():
        assert entries == [], f"{d} of the next session is not empty: {entries}"
    assert r["shm"] == "ENOENT", r
    assert len(r["procs"]) <= 4, f"the next session starts with processes {r['procs']}"
