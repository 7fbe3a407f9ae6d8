"""Extra: user code may stack its own seccomp filter (prctl is allowed), but a permissive one
cannot loosen the sandbox's: denials and the foreign-ABI kill still apply afterwards. The
seccomp(2) syscall itself (user notification listeners, TSYNC) is outside the allow-list."""

from conftest import INT80_SAFE_SIGNALS, expect_in, run_py


def test_permissive_filter_does_not_loosen_the_sandbox():
    res = run_py(r'''
        import mmap
        class SockFilter(_ct.Structure):
            _fields_ = [("code", _ct.c_ushort), ("jt", _ct.c_ubyte), ("jf", _ct.c_ubyte),
                        ("k", _ct.c_uint)]
        class SockFprog(_ct.Structure):
            _fields_ = [("len", _ct.c_ushort), ("filter", _ct.POINTER(SockFilter))]
        allow_all = (SockFilter * 1)(SockFilter(0x06, 0, 0, 0x7FFF0000))   # RET ALLOW
        prog = SockFprog(1, allow_all)
        R["seccomp() NEW_LISTENER"] = syscall(317, 1, 8, _ct.byref(prog))
        R["seccomp() TSYNC"] = syscall(317, 1, 1, _ct.byref(prog))
        R["prctl SET_SECCOMP allow-all"] = syscall(157, 22, 2, _ct.byref(prog), 0, 0)
        R["unshare after"] = syscall(272, 0x10000000)
        R["mount after"] = syscall(165, b"none", b"/tmp", b"tmpfs", 0, None)
        R["keyctl after"] = syscall(250, 0, -3, 1)
        pid = os.fork()
        if pid == 0:
            buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            buf.write(bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3]))
            _ct.CFUNCTYPE(_ct.c_long)(_ct.addressof(_ct.c_char.from_buffer(buf)))()
            os._exit(0)
        st = os.waitpid(pid, 0)[1]
        R["int 0x80 after"] = os.WTERMSIG(st) if os.WIFSIGNALED(st) else "exit %d" % os.WEXITSTATUS(st)
    ''')
    r = dict(res.R)
    expect_in(r.pop("seccomp() NEW_LISTENER"), {"ENOSYS", "EPERM"}, "seccomp() NEW_LISTENER")
    expect_in(r.pop("seccomp() TSYNC"), {"ENOSYS", "EPERM"}, "seccomp() TSYNC")
    r.pop("prctl SET_SECCOMP allow-all")   # allowed or not: stacking can only restrict
    assert r.pop("int 0x80 after") in INT80_SAFE_SIGNALS
    for key, value in r.items():
        expect_in(value, {"EPERM"}, key)
