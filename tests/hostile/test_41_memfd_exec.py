"""Row 41: memfd_create + execveat of a static ELF -> may run, but stays fully confined: same
uid, no_new_privs, seccomp filter inherited, namespaces and privileged calls still denied, the
32-bit entry point still kills, the image still read-only. The ELFs are assembled in the
sandbox by the payload itself (tiny x86-64 programs that report through their exit status)."""

from conftest import INT80_SAFE_SIGNALS, run_py

PAYLOAD = r'''
import struct
def elf(code):
    base = 0x400000
    entry = base + 64 + 56
    size = 64 + 56 + len(code)
    ident = b"\x7fELF\x02\x01\x01" + b"\x00" * 9
    eh = struct.pack("<16sHHIQQQIHHHHHH", ident, 2, 0x3E, 1, entry, 64, 0, 0, 64, 56, 1, 0, 0, 0)
    ph = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, size, size, 0x1000)
    return eh + ph + code
EXIT_EAX = bytes([0x89, 0xC7, 0xB8, 0xE7, 0, 0, 0, 0x0F, 0x05])            # exit_group(eax)
NEG_EXIT = bytes([0xF7, 0xD8]) + EXIT_EAX                                    # exit_group(-eax)
def mov_edi(v): return b"\xbf" + struct.pack("<I", v)
def mov_eax(v): return b"\xb8" + struct.pack("<I", v)
SYSCALL = b"\x0f\x05"
programs = {
    "getuid": mov_eax(102) + SYSCALL + EXIT_EAX,
    "no_new_privs": mov_edi(39) + mov_eax(157) + SYSCALL + EXIT_EAX,          # PR_GET_NO_NEW_PRIVS
    "seccomp mode": mov_edi(21) + mov_eax(157) + SYSCALL + EXIT_EAX,          # PR_GET_SECCOMP
    "unshare NEWUSER": mov_edi(0x10000000) + mov_eax(272) + SYSCALL + NEG_EXIT,
    "ptrace TRACEME": mov_edi(0) + mov_eax(101) + SYSCALL + NEG_EXIT,
    "setuid 0": mov_edi(0) + mov_eax(105) + SYSCALL + NEG_EXIT,
    "int 0x80": mov_eax(20) + b"\xcd\x80" + mov_edi(0) + mov_eax(231) + SYSCALL,
}
# open("/usr/hostile-memfd", O_CREAT|O_WRONLY, 0644): the path follows the code (rip-relative)
body = b"\xbe\x41\x00\x00\x00" + b"\xba\xa4\x01\x00\x00" + mov_eax(2) + SYSCALL + NEG_EXIT
lea_len = 7
disp = len(body)
programs["create /usr file"] = b"\x48\x8d\x3d" + struct.pack("<i", disp) + body + b"/usr/hostile-memfd\x00"

def run_memfd(image, argv=(b"x",)):
    fd = os.memfd_create("hostile", 0)
    os.write(fd, image)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        args = (_ct.c_char_p * (len(argv) + 1))(*argv, None)
        env = (_ct.c_char_p * 1)(None)
        os.dup2(w, 1)
        res = syscall(322, fd, b"", args, env, 0x1000)   # execveat(fd, "", AT_EMPTY_PATH)
        os.write(2, res.encode())
        os._exit(99)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    os.close(r)
    st = os.waitpid(pid, 0)[1]
    os.close(fd)
    if os.WIFSIGNALED(st):
        return ["signal", os.WTERMSIG(st), out.decode(errors="replace")]
    return ["exit", os.WEXITSTATUS(st), out.decode(errors="replace")]

for name, code in programs.items():
    R[name] = run_memfd(elf(code))
# a real dynamic program from the image, executed from a memfd
R["id from memfd"] = run_memfd(open("/usr/bin/id", "rb").read(), (b"id",))
'''


def test_memfd_exec_stays_confined():
    res = run_py(PAYLOAD)
    r = res.R
    assert r["getuid"][:2] == ["exit", 1000 & 0xFF], r["getuid"]
    assert r["no_new_privs"][:2] == ["exit", 1], r["no_new_privs"]
    assert r["seccomp mode"][:2] == ["exit", 2], r["seccomp mode"]
    assert r["unshare NEWUSER"][0] == "exit" and r["unshare NEWUSER"][1] in (1, 38, 28), \
        f"unshare from a memfd ELF: {r['unshare NEWUSER']} (errno expected EPERM/ENOSYS/ENOSPC)"
    assert r["ptrace TRACEME"][:2] == ["exit", 1], r["ptrace TRACEME"]
    assert r["setuid 0"][:2] == ["exit", 1], r["setuid 0"]
    assert r["int 0x80"][0] == "signal" and r["int 0x80"][1] in INT80_SAFE_SIGNALS, r["int 0x80"]
    assert r["create /usr file"][0] == "exit" and r["create /usr file"][1] in (30, 13), \
        r["create /usr file"]
    status, code, out = r["id from memfd"]
    assert (status, code) == ("exit", 0) and out.startswith("uid=1000"), r["id from memfd"]
