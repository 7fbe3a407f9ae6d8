"""Row 6: setns via a host /proc/<pid>/ns -> the host pid is not visible; setns is denied."""
import os

import pytest

from conftest import expect_in, run_py


def test_setns_host_and_own_namespaces():
    host_pids = sorted({os.getpid(), os.getppid()})
    host_pids = [p for p in host_pids if p > 64]
    if not host_pids:
        pytest.skip("host pids too small to tell apart from sandbox pids")
    res = run_py(r'''
        host_pids = %r
        for pid in host_pids:
            for ns in ("mnt", "net", "user", "pid"):
                R["open /proc/%%d/ns/%%s" %% (pid, ns)] = attempt(os.open, "/proc/%%d/ns/%%s" %% (pid, ns), os.O_RDONLY)
            R["pidfd_open host %%d" %% pid] = syscall(434, pid, 0)
        # setns into namespaces we can legitimately open: our own (the interpreter is pid 1 of
        # a one-shot sandbox, pid 2 under an init in a daemon's session)
        for ns in ("mnt", "net", "user", "pid", "uts", "ipc", "cgroup"):
            fd = os.open("/proc/self/ns/" + ns, os.O_RDONLY)
            R["setns own " + ns] = syscall(308, fd, 0)
            os.close(fd)
        pfd = syscall(434, os.getpid(), 0)
        R["pidfd_open self"] = pfd[:2]
        if pfd.startswith("OK:"):
            R["setns pidfd"] = syscall(308, int(pfd[3:]), 0x10000000 | 0x20000 | 0x40000000)
        R["host pid dirs"] = [p for p in host_pids if os.path.exists("/proc/%%d" %% p)]
    ''' % host_pids)
    r = dict(res.R)
    assert r.pop("host pid dirs") == [], "host pids visible in the sandbox's /proc"
    assert r.pop("pidfd_open self") == "OK"
    for key, value in r.items():
        if key.startswith("open /proc"):
            expect_in(value, {"ENOENT"}, key)
        elif key.startswith("pidfd_open host"):
            expect_in(value, {"ESRCH"}, key)
        else:
            expect_in(value, {"EPERM"}, key)
