"""Row 2: write /usr/bin/python3; create /usr/x, /etc/x -> EROFS/EACCES; image hash unchanged
(the autouse host_guard hashes /usr/bin/python3.11 and /usr/lib/python3.11/os.py)."""
import os
import uuid

from conftest import expect_in, run, run_py

DENIED = {"EROFS", "EACCES", "EPERM", "EBUSY"}


def test_write_and_create_in_the_image():
    name = "hostile-" + uuid.uuid4().hex[:8]
    res = run_py(r'''
        import stat
        name = %r
        R["open python3 r+b"] = attempt(lambda: open("/usr/bin/python3", "r+b"))
        R["open python3 O_WRONLY|O_TRUNC"] = attempt(os.open, "/usr/bin/python3.11",
                                                     os.O_WRONLY | os.O_TRUNC)
        R["open os.py append"] = attempt(lambda: open("/usr/lib/python3.11/os.py", "ab"))
        R["chmod python3"] = attempt(os.chmod, "/usr/bin/python3.11", 0o777)
        R["utime os.py"] = attempt(os.utime, "/usr/lib/python3.11/os.py", (0, 0))
        R["unlink os.py"] = attempt(os.unlink, "/usr/lib/python3.11/os.py")
        R["rename os.py"] = attempt(os.rename, "/usr/lib/python3.11/os.py",
                                    "/usr/lib/python3.11/os2.py")
        # /mnt holds only the mount point of /mnt/data, on the read-only root
        for d in ["/usr", "/usr/bin", "/etc", "/", "/usr/lib/python3.11", "/mnt"]:
            p = os.path.join(d, name)
            R["create " + p] = attempt(lambda: open(p, "xb"))
            R["mkdir " + p] = attempt(os.mkdir, p)
            R["symlink " + p] = attempt(os.symlink, "/work", p)
        R["passwd append"] = attempt(lambda: open("/etc/passwd", "ab"))
        R["rmdir /mnt/data"] = attempt(os.rmdir, "/mnt/data")
        R["rename /mnt/data"] = attempt(os.rename, "/mnt/data", "/mnt/" + name)
    ''' % name)
    for key, value in res.R.items():
        expect_in(value, DENIED, key)
    for d in ["/usr", "/usr/bin", "/etc", "/", "/usr/lib/python3.11"]:
        assert not os.path.lexists(os.path.join(d, name)), f"created on the host: {d}/{name}"


def test_write_image_from_bash():
    res = run(r'''
echo x > /usr/bin/python3 && echo WROTE-python3
touch /usr/x && echo CREATED-usr
touch /etc/x && echo CREATED-etc
mkdir /usr/hostile-dir && echo CREATED-dir
echo done
''', language="bash")
    assert res.status == "ok", res.describe()
    assert "WROTE" not in res.out and "CREATED" not in res.out, res.describe()
    assert res.err.count("Read-only file system") + res.err.count("Permission denied") >= 4, \
        res.describe()
    assert not os.path.exists("/usr/hostile-dir")
