"""Row 4: classic chroot escape (chroot into a subdir, then chdir .. repeatedly) -> chroot
denied; no host root in mountinfo."""

from conftest import expect_in, run_py


def _host_root_dev():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if parts[4] == "/":
                return parts[2]
    raise AssertionError("host has no / in mountinfo")


def test_chroot_escape():
    res = run_py(r'''
        os.makedirs("/tmp/jail", exist_ok=True)
        outside = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        R["chroot"] = attempt(os.chroot, "/tmp/jail")
        R["chroot syscall"] = syscall(161, b"/tmp/jail")
        R["pivot_root"] = syscall(155, b"/tmp/jail", b"/tmp/jail")
        os.fchdir(outside)
        for _ in range(64):
            os.chdir("..")
        R["cwd"] = os.getcwd()
        st_dot, st_root = os.stat("."), os.stat("/")
        R["dot is root"] = (st_dot.st_dev, st_dot.st_ino) == (st_root.st_dev, st_root.st_ino)
        R["listing"] = sorted(os.listdir("."))
        R["home"] = sorted(os.listdir("home"))
        R["home/user"] = os.path.realpath("home/user")
        R["mountinfo"] = open("/proc/self/mountinfo").read().splitlines()
    ''')
    r = res.R
    expect_in(r["chroot"], {"EPERM"}, "chroot")
    expect_in(r["chroot syscall"], {"EPERM"}, "chroot syscall")
    expect_in(r["pivot_root"], {"EPERM", "ENOSYS"}, "pivot_root")
    assert r["cwd"] == "/" and r["dot is root"], r
    for host_only in ("root", "boot", "sys"):
        assert host_only not in r["listing"], f"/{host_only} visible after chdir ..: {r['listing']}"
    # /home is the sandbox's own, not the host's: only user, /work bound there (E2B's home).
    assert r["home"] == ["user"] and r["home/user"] == "/home/user", (r["home"], r["home/user"])
    # No mount in the sandbox is the host's root filesystem bound at its own root.
    host_dev = _host_root_dev()
    for line in r["mountinfo"]:
        parts = line.split()
        assert not (parts[2] == host_dev and parts[3] == "/"), (
            f"host root filesystem ({host_dev}) mounted whole inside the sandbox: {line}")
    # The sandbox's / is not the host's root (tmpfs root per ISOLATION.md, or at least read-only)
    root_lines = [l for l in r["mountinfo"] if l.split()[4] == "/"]
    assert root_lines, r["mountinfo"]
    top = root_lines[-1].split()
    assert "ro" in top[5].split(","), f"sandbox / is not read-only: {root_lines[-1]}"
