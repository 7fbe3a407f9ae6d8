"""Row 43: a sandbox whose profile allows network (issue 10) tries to serve and to reach ports its
profile does not name: bind() on any port, connect() to unlisted ports over IPv4, IPv6 and
v4-mapped addresses, blocking or not, and TCP Fast Open (sendto/sendmsg/sendmmsg with
MSG_FASTOPEN connect without connect(2), which Landlock does not see) -> EACCES from Landlock's
TCP rules, EOPNOTSUPP from seccomp for the fast opens. The ports the profile names stay
connectable (nothing listens on 127.0.0.1 there: ECONNREFUSED, or ENETUNREACH with the loopback
down), and a listener the test opened on the host sees nothing.

Not refused, and harmless: listen() on an unbound socket takes an ephemeral port (Landlock
checks bind(2) only), in the sandbox's own network namespace, which nothing outside can reach."""
import ctypes

import pytest

from conftest import custom_profile, expect_in, run_py

ALLOWED = [5432, 6000]
RULES = ["db.internal:5432", "10.1.2.7:6000", "pypi.internal:443"]


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(int(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))), 0)


@pytest.fixture(scope="module")
def profile():
    return custom_profile("hostile-egress-allow", network={"mode": "allow", "allow": RULES})


def test_no_bind_and_no_unlisted_port(profile, tcp_listener):
    if landlock_abi() < 4:
        pytest.skip(f"Landlock TCP rules need ABI 4 (Linux 6.7); this kernel has ABI "
                    f"{landlock_abi()}: only the network namespace isolates here")
    res = run_py(r'''
        import socket
        host_port = @PORT@
        def tcp(family=socket.AF_INET):
            return socket.socket(family, socket.SOCK_STREAM)
        for port in (0, 5432, 6000, 8080, host_port):
            R[f"bind {port}"] = attempt(tcp().bind, ("127.0.0.1", port))
            R[f"bind6 {port}"] = attempt(tcp(socket.AF_INET6).bind, ("::1", port))
        R["bind any"] = attempt(tcp().bind, ("0.0.0.0", 8081))
        for port in (host_port, 22, 80, 3128 + 1, 5433, 8080):
            R[f"connect {port}"] = attempt(tcp().connect, ("127.0.0.1", port))
            R[f"connect6 {port}"] = attempt(tcp(socket.AF_INET6).connect, ("::1", port))
            R[f"mapped {port}"] = attempt(tcp(socket.AF_INET6).connect,
                                          ("::ffff:127.0.0.1", port))
            s = tcp()
            s.setblocking(False)
            R[f"nonblocking {port}"] = attempt(s.connect, ("127.0.0.1", port))
            # Fast open asked for on the socket rather than per call goes through connect(2).
            s = tcp()
            s.setsockopt(socket.IPPROTO_TCP, 30, 1)  # TCP_FASTOPEN_CONNECT
            R[f"fastopen_connect {port}"] = attempt(s.connect, ("127.0.0.1", port))
        for port in (host_port, 5433, 5432):
            R[f"sendto fastopen {port}"] = attempt(tcp().sendto, b"x", socket.MSG_FASTOPEN,
                                                   ("127.0.0.1", port))
            R[f"sendmsg fastopen {port}"] = attempt(tcp().sendmsg, [b"x"], [],
                                                    socket.MSG_FASTOPEN, ("127.0.0.1", port))
            # sendmmsg through the raw syscall (Python has no wrapper): one message, no data.
            class sockaddr_in(_ct.Structure):
                _fields_ = [("family", _ct.c_ushort), ("port", _ct.c_ushort),
                            ("addr", _ct.c_uint32), ("zero", _ct.c_char * 8)]
            class msghdr(_ct.Structure):
                _fields_ = [("name", _ct.c_void_p), ("namelen", _ct.c_uint32),
                            ("iov", _ct.c_void_p), ("iovlen", _ct.c_size_t),
                            ("control", _ct.c_void_p), ("controllen", _ct.c_size_t),
                            ("flags", _ct.c_int), ("len", _ct.c_uint)]
            sa = sockaddr_in(socket.AF_INET, socket.htons(port), 0x0100007f)
            mh = msghdr(_ct.cast(_ct.pointer(sa), _ct.c_void_p), _ct.sizeof(sa))
            R[f"sendmmsg fastopen {port}"] = syscall(307, tcp().fileno(), _ct.byref(mh), 1,
                                                     socket.MSG_FASTOPEN)
        for port in @ALLOWED@:
            R[f"allowed {port}"] = attempt(tcp().connect, ("127.0.0.1", port))
        s = tcp()
        s.listen()
        R["listen unbound"] = [attempt(lambda: None), s.getsockname()[0]]
    '''.replace("@PORT@", str(tcp_listener.port)).replace("@ALLOWED@", str(ALLOWED)),
        profile=str(profile))
    r = dict(res.R)
    assert r.pop("listen unbound") == ["OK", "0.0.0.0"], res.R
    for port in ALLOWED:
        expect_in(r.pop(f"allowed {port}"), {"ECONNREFUSED", "ENETUNREACH"}, f"allowed {port}")
    for key, value in r.items():
        if "fastopen" in key and not key.startswith("fastopen_connect"):
            expect_in(value, {"EOPNOTSUPP", "ENOTSUP"}, key)
        elif key.startswith("nonblocking"):
            expect_in(value, {"EACCES", "EPERM"}, key)
        elif key.startswith("bind6"):
            # ::1 may be missing from a sandbox whose loopback is down.
            expect_in(value, {"EACCES", "EPERM", "EADDRNOTAVAIL"}, key)
        else:
            expect_in(value, {"EACCES", "EPERM"}, key)
    assert tcp_listener.contacts() == 0, "the host TCP listener accepted a connection"
