"""Row 9: ptrace(ATTACH, 1), PTRACE_TRACEME, process_vm_readv -> denied (seccomp EPERM)."""
from conftest import expect_in, run_py

DENIED = {"EPERM", "ENOSYS", "EACCES"}


def test_ptrace_family():
    res = run_py(r'''
        import signal, time
        PTRACE_TRACEME, PTRACE_ATTACH, PTRACE_SEIZE = 0, 16, 0x4206
        R["attach 1"] = syscall(101, PTRACE_ATTACH, 1, 0, 0)
        R["seize 1"] = syscall(101, PTRACE_SEIZE, 1, 0, 0)
        # a sibling we own: the kernel alone would allow this, so only the filter stops it
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        R["attach own child"] = syscall(101, PTRACE_ATTACH, pid, 0, 0)
        R["seize own child"] = syscall(101, PTRACE_SEIZE, pid, 0, 0)
        buf = _ct.create_string_buffer(64)
        class IoVec(_ct.Structure):
            _fields_ = [("base", _ct.c_void_p), ("len", _ct.c_size_t)]
        local = IoVec(_ct.cast(buf, _ct.c_void_p), 64)
        remote = IoVec(_ct.cast(buf, _ct.c_void_p), 64)
        R["process_vm_readv child"] = syscall(310, pid, _ct.byref(local), 1, _ct.byref(remote), 1, 0)
        R["process_vm_writev child"] = syscall(311, pid, _ct.byref(local), 1, _ct.byref(remote), 1, 0)
        R["process_vm_readv 1"] = syscall(310, 1, _ct.byref(local), 1, _ct.byref(remote), 1, 0)
        pfd = syscall(434, pid, 0)
        if pfd.startswith("OK:"):
            R["pidfd_getfd child"] = syscall(438, int(pfd[3:]), 0, 0)
        R["kcmp"] = syscall(312, os.getpid(), pid, 0, 0, 0)
        R["process_madvise"] = syscall(440, int(pfd[3:]) if pfd.startswith("OK:") else 0, _ct.byref(local), 1, 8, 0)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        # TRACEME in a fresh child, then exit
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(wr, syscall(101, PTRACE_TRACEME, 0, 0, 0).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        R["traceme"] = os.read(rd, 100).decode()
    ''')
    for key, value in res.R.items():
        expect_in(value, DENIED, key)
