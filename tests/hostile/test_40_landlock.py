"""Row 40: Landlock: cross-directory rename/link, truncate a read-only file, device ioctl ->
EXDEV/EACCES/EROFS. The same must hold whichever layer answers first."""
from conftest import expect_in, run_py


def test_landlock_rules():
    res = run_py(r'''
        import fcntl
        open("/work/a", "w").write("a")
        open("/tmp/b", "w").write("b")
        R["rename /work -> /tmp"] = attempt(os.rename, "/work/a", "/tmp/a")
        R["rename /tmp -> /work"] = attempt(os.rename, "/tmp/b", "/work/b")
        R["link /work -> /tmp"] = attempt(os.link, "/work/a", "/tmp/a-link")
        R["link /usr -> /work"] = attempt(os.link, "/usr/bin/python3.11", "/work/py")
        R["link /etc -> /tmp"] = attempt(os.link, "/etc/passwd", "/tmp/passwd")
        R["rename /usr -> /work"] = attempt(os.rename, "/usr/lib/python3.11/os.py", "/work/os.py")
        R["rename /etc -> /work"] = attempt(os.rename, "/etc/passwd", "/work/passwd")
        R["truncate os.py"] = attempt(os.truncate, "/usr/lib/python3.11/os.py", 0)
        R["truncate passwd"] = attempt(os.truncate, "/etc/passwd", 0)
        R["O_TRUNC passwd"] = attempt(os.open, "/etc/passwd", os.O_WRONLY | os.O_TRUNC)
        fd = os.open("/usr/lib/python3.11/os.py", os.O_RDONLY)
        R["ftruncate ro fd"] = attempt(os.ftruncate, fd, 0)
        # device ioctls on the allowed device nodes
        ufd = os.open("/dev/urandom", os.O_RDONLY)
        cnt = _ct.c_int(0)
        R["RNDGETENTCNT"] = syscall(16, ufd, 0x80045200, _ct.byref(cnt))
        R["RNDADDTOENTCNT"] = syscall(16, ufd, 0x40045201, _ct.byref(_ct.c_int(4096)))
        R["RNDCLEARPOOL"] = syscall(16, ufd, 0x5206, 0)
        nfd = os.open("/dev/null", os.O_RDWR)
        R["TCGETS /dev/null"] = syscall(16, nfd, 0x5401, _ct.byref((_ct.c_char * 64)()))
        # positive controls: same-mount rename and hard link inside /work still work
        os.mkdir("/work/d1"); os.mkdir("/work/d2")
        open("/work/d1/x", "w").write("x")
        R["ok rename within /work"] = attempt(os.rename, "/work/d1/x", "/work/d2/x")
        R["ok link within /work"] = attempt(os.link, "/work/d2/x", "/work/d1/y")
        # /mnt/data is /work under another name: the same rules, both ways
        R["rename /mnt/data -> /tmp"] = attempt(os.rename, "/mnt/data/a", "/tmp/a2")
        R["link /usr -> /mnt/data"] = attempt(os.link, "/usr/bin/python3.11", "/mnt/data/py")
        R["ok write /mnt/data"] = attempt(lambda: open("/mnt/data/m", "w").write("m"))
        R["ok read /mnt/data as /work"] = attempt(lambda: open("/work/m").read())
    ''')
    r = dict(res.R)
    for key in [k for k in r if k.startswith("ok ")]:
        assert r.pop(key) == "OK", key
    expect_in(r.pop("TCGETS /dev/null"), {"ENOTTY", "EACCES"}, "TCGETS /dev/null")
    expect_in(r.pop("RNDGETENTCNT"), {"EACCES"}, "RNDGETENTCNT on /dev/urandom (IOCTL_DEV)")
    for key in ("RNDADDTOENTCNT", "RNDCLEARPOOL"):
        expect_in(r.pop(key), {"EACCES", "EPERM"}, key)
    for key, value in r.items():
        if key.startswith(("rename", "link")):
            expect_in(value, {"EXDEV", "EACCES", "EROFS", "EPERM"}, key)
        else:
            expect_in(value, {"EACCES", "EROFS", "EINVAL", "EBADF"} if key == "ftruncate ro fd"
                      else {"EACCES", "EROFS"}, key)
