"""Row 5: unshare/clone/clone3 with CLONE_NEWUSER (and the other namespace flags); unshare -Ur
-> EPERM/ENOSYS (ENOSPC if it reaches the kernel)."""
from conftest import expect_in, run, run_py

DENIED = {"EPERM", "ENOSYS", "ENOSPC"}

FLAGS = {"NEWUSER": 0x10000000, "NEWNS": 0x00020000, "NEWPID": 0x20000000,
         "NEWNET": 0x40000000, "NEWIPC": 0x08000000, "NEWUTS": 0x04000000,
         "NEWCGROUP": 0x02000000, "NEWTIME": 0x00000080}


def test_unshare_and_clone_namespaces():
    res = run_py(r'''
        FLAGS = %r
        SIGCHLD = 17
        ns_before = os.readlink("/proc/self/ns/user")
        for name, flag in FLAGS.items():
            R["unshare " + name] = syscall(272, flag)
            # raw clone(flags, stack=0): a child that somehow appears exits at once.
            # (CLONE_NEWTIME's bit lies in clone's exit-signal byte: clone3/unshare only.)
            if name != "NEWTIME":
                r = syscall(56, flag | SIGCHLD, 0, 0, 0, 0)
                if r == "OK:0":
                    os._exit(0)
                if r.startswith("OK:"):
                    os.waitpid(int(r[3:]), 0x40000000)   # __WALL
                R["clone " + name] = r
            # clone3 with struct clone_args {flags, pidfd, child_tid, parent_tid, exit_signal, ...}
            args = (_ct.c_uint64 * 11)(flag, 0, 0, 0, SIGCHLD, 0, 0, 0, 0, 0, 0)
            r = syscall(435, _ct.byref(args), 88)
            if r == "OK:0":
                os._exit(0)
            if r.startswith("OK:"):
                os.waitpid(int(r[3:]), 0x40000000)
            R["clone3 " + name] = r
        R["same user ns"] = os.readlink("/proc/self/ns/user") == ns_before
    ''' % FLAGS)
    r = dict(res.R)
    assert r.pop("same user ns") is True
    for key, value in r.items():
        if key.startswith("clone3"):
            expect_in(value, {"ENOSYS", "EPERM", "ENOSPC"}, key)
        else:
            expect_in(value, DENIED, key)


def test_plain_fork_still_works():
    """The clone filter must not break ordinary process creation (positive control)."""
    res = run_py(r'''
        import subprocess
        R["child"] = subprocess.run(["/usr/bin/true"]).returncode
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        R["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    ''')
    assert res.R == {"child": 0, "fork": 7}


def test_unshare_command():
    res = run(r'''
unshare -Ur id -u; echo "unshare-Ur=$?"
unshare -U true; echo "unshare-U=$?"
unshare -n true; echo "unshare-n=$?"
unshare -m true; echo "unshare-m=$?"
''', language="bash")
    assert res.status == "ok", res.describe()
    for tag in ("unshare-Ur", "unshare-U", "unshare-n", "unshare-m"):
        assert f"{tag}=0" not in res.out, res.describe()
        assert f"{tag}=" in res.out, res.describe()
    assert "\n0\n" not in "\n" + res.out, "unshare -Ur printed uid 0"
