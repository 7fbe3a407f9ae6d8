"""Row 3: mount -o remount,rw /; mount a tmpfs; the new mount API (fsopen...) -> EPERM/ENOSYS."""
from conftest import expect_in, run, run_py

DENIED = {"EPERM", "ENOSYS"}

MOUNT_PAYLOAD = r'''
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
os.makedirs("/tmp/mnt", exist_ok=True)
R["remount / rw"] = syscall(165, None, b"/", None, MS_REMOUNT, None)
R["remount / rw bind"] = syscall(165, None, b"/", None, MS_REMOUNT | MS_BIND, None)
R["remount /usr rw"] = syscall(165, None, b"/usr", None, MS_REMOUNT | MS_BIND, None)
R["mount tmpfs"] = syscall(165, b"none", b"/tmp/mnt", b"tmpfs", 0, b"size=1m")
R["mount proc"] = syscall(165, b"proc", b"/tmp/mnt", b"proc", 0, None)
R["bind / to /tmp/mnt"] = syscall(165, b"/", b"/tmp/mnt", None, MS_BIND | MS_REC, None)
R["make / private"] = syscall(165, None, b"/", None, MS_REC | MS_PRIVATE, None)
R["umount2 /proc"] = syscall(166, b"/proc", 2)
R["umount2 /usr"] = syscall(166, b"/usr", 2)
R["umount2 /mnt/data"] = syscall(166, b"/mnt/data", 2)
R["remount /mnt/data suid"] = syscall(165, None, b"/mnt/data", None, MS_REMOUNT | MS_BIND, None)
R["bind / to /mnt/data"] = syscall(165, b"/", b"/mnt/data", None, MS_BIND | MS_REC, None)
# new mount API
R["fsopen tmpfs"] = syscall(430, b"tmpfs", 0)
R["fspick /"] = syscall(433, -100, b"/", 0)
R["open_tree /"] = syscall(428, -100, b"/", 1 | 0x80000)       # OPEN_TREE_CLONE|CLOEXEC
R["move_mount"] = syscall(429, -100, b"/usr", -100, b"/tmp/mnt", 0)
R["fsconfig"] = syscall(431, 3, 6, None, None, 0)               # FSCONFIG_CMD_CREATE
R["fsmount"] = syscall(432, 3, 0, 0)
attr = (_ct.c_uint64 * 4)(0, 1, 0, 0)                            # clear MOUNT_ATTR_RDONLY
R["mount_setattr / rw"] = syscall(442, -100, b"/", 0x8000, _ct.byref(attr), 32)
R["pivot_root"] = syscall(155, b"/tmp", b"/tmp/mnt")
# afterwards the root must still be read-only
R["write / after"] = attempt(lambda: open("/hostile-after-mount", "xb"))
R["/tmp/mnt empty"] = os.listdir("/tmp/mnt") == []
'''


def test_mount_syscalls_denied():
    res = run_py(MOUNT_PAYLOAD)
    r = dict(res.R)
    assert r.pop("/tmp/mnt empty") is True, res.R
    expect_in(r.pop("write / after"), {"EROFS", "EACCES"}, "write / after the attempts")
    for key, value in r.items():
        expect_in(value, DENIED, key)


def test_mount_from_bash():
    res = run(r'''
mount -o remount,rw / ; echo "remount=$?"
mkdir -p /tmp/m; mount -t tmpfs none /tmp/m; echo "tmpfs=$?"
grep -c ' /tmp/m ' /proc/self/mountinfo || true
''', language="bash")
    assert res.status == "ok", res.describe()
    lines = res.out.split()
    assert "remount=0" not in lines and "tmpfs=0" not in lines, res.describe()
    assert lines[-1] == "0", res.describe()
