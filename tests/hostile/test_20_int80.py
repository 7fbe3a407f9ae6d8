"""Row 20: int 0x80 shellcode (ctypes + mmap) and an x32 syscall number -> the process is
killed by SIGSYS (foreign architecture: SECCOMP_RET_KILL_PROCESS)."""
import signal

from conftest import INT80_SAFE_SIGNALS, PRELUDE, SIGSYS_EXIT, run, run_py

SHELLCODE_HELPER = r'''
import mmap, signal
def run_shellcode(code):
    buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(code)
    addr = _ct.addressof(_ct.c_char.from_buffer(buf))
    return _ct.CFUNCTYPE(_ct.c_long)(addr)()
# i386 getpid (20) through the 32-bit entry point, then return
INT80 = bytes([0xb8, 0x14, 0x00, 0x00, 0x00, 0xcd, 0x80, 0xc3])
# i386 setuid(0) (23) for good measure
INT80_SETUID = bytes([0x31, 0xdb, 0xb8, 0x17, 0x00, 0x00, 0x00, 0xcd, 0x80, 0xc3])
X32_GETPID = 0x40000000 + 39
def in_child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        finally:
            os._exit(0)
    st = os.waitpid(pid, 0)[1]
    return ["signal", os.WTERMSIG(st)] if os.WIFSIGNALED(st) else ["exit", os.WEXITSTATUS(st)]
'''
PRELUDE_AND_HELPER = PRELUDE + SHELLCODE_HELPER


def _assert_killed_by_sigsys(res, safe=(signal.SIGSYS,)):
    assert "survived" not in res.out, "the shellcode returned: the 32-bit syscall was served"
    assert res.status == "killed", f"expected status killed (SIGSYS)\n{res.describe()}"
    codes = {128 + s for s in safe}
    assert res.exit_code in codes and res.rc in codes, res.describe()
    assert SIGSYS_EXIT in codes


def test_int80_in_children():
    res = run_py(SHELLCODE_HELPER + r'''
R["int 0x80 getpid"] = in_child(lambda: run_shellcode(INT80))
R["int 0x80 setuid"] = in_child(lambda: run_shellcode(INT80_SETUID))
R["x32 getpid"] = in_child(lambda: _libc.syscall(_ct.c_long(X32_GETPID)))
def with_handler():
    signal.signal(signal.SIGSYS, lambda *a: os._exit(42))   # cannot catch KILL_PROCESS
    run_shellcode(INT80)
R["int 0x80 with SIGSYS handler"] = in_child(with_handler)
R["after"] = os.getpid() > 0
''')
    r = res.R
    assert r.pop("after") is True
    for key, value in r.items():
        allowed = INT80_SAFE_SIGNALS if "int 0x80" in key else {signal.SIGSYS}
        assert value[0] == "signal" and value[1] in allowed, \
            f"{key}: {value} (expected killed by {sorted(allowed)})"


def test_int80_in_the_code_process():
    res = run(PRELUDE_AND_HELPER + r'''
run_shellcode(INT80)
print("survived")
''')
    _assert_killed_by_sigsys(res, INT80_SAFE_SIGNALS)


def test_x32_in_the_code_process():
    res = run(PRELUDE_AND_HELPER + r'''
_libc.syscall(_ct.c_long(X32_GETPID))
print("survived")
''')
    _assert_killed_by_sigsys(res)
