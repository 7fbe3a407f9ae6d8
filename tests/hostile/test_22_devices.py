"""Row 22: /sys/fs/cgroup, /dev/kvm, /dev/mem, /dev/vsock, mknod -> ENOENT/EPERM; /dev holds
only null, zero, full, random, urandom (+ shm and the fd links)."""
from conftest import expect_in, run_py

DEVICES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9)}
EXTRAS = {"shm", "fd", "stdin", "stdout", "stderr"}


def test_devices_and_mknod():
    res = run_py(r'''
        import stat
        for p in ["/sys", "/sys/fs/cgroup", "/sys/kernel", "/dev/kvm", "/dev/mem", "/dev/kmem",
                  "/dev/port", "/dev/vsock", "/dev/vda", "/dev/sda", "/dev/loop0",
                  "/dev/loop-control", "/dev/fuse", "/dev/net/tun", "/dev/console", "/dev/tty",
                  "/dev/ptmx", "/dev/kmsg", "/dev/cpu/0/msr", "/dev/hwrng", "/dev/autofs",
                  "/dev/btrfs-control", "/dev/zram0", "/dev/userfaultfd", "/dev/vga_arbiter"]:
            R["open " + p] = attempt(os.open, p, os.O_RDONLY)
        for d in ["/tmp", "/work", "/dev/shm", "/dev"]:
            R["mknod mem in " + d] = attempt(os.mknod, d + "/mem", stat.S_IFCHR | 0o666, os.makedev(1, 1))
            R["mknod vda in " + d] = attempt(os.mknod, d + "/vda", stat.S_IFBLK | 0o666, os.makedev(254, 0))
            R["mknod kvm in " + d] = attempt(os.mknod, d + "/kvm", stat.S_IFCHR | 0o666, os.makedev(10, 232))
        R["mknodat syscall"] = syscall(259, -100, b"/tmp/m2", stat.S_IFCHR | 0o666, os.makedev(1, 1))
        R["dev listing"] = sorted(os.listdir("/dev"))
        devs = {}
        for name in ["null", "zero", "full", "random", "urandom"]:
            st = os.stat("/dev/" + name)
            devs[name] = [stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev)]
        R["devs"] = devs
        R["dev null works"] = open("/dev/null", "wb").write(b"x") == 1
    ''')
    r = dict(res.R)
    listing = set(r.pop("dev listing"))
    assert set(DEVICES) <= listing, listing
    assert listing <= set(DEVICES) | EXTRAS, f"unexpected entries in /dev: {listing - set(DEVICES) - EXTRAS}"
    devs = r.pop("devs")
    for name, (maj, mnr) in DEVICES.items():
        assert devs[name] == [True, maj, mnr], (name, devs[name])
    assert r.pop("dev null works") is True
    for key, value in r.items():
        if key.startswith("open"):
            expect_in(value, {"ENOENT"}, key)
        else:
            expect_in(value, {"EPERM", "EACCES", "EROFS"}, key)
