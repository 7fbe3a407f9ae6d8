"""Row 16: socket(AF_VSOCK, SOCK_STREAM) -> EAFNOSUPPORT. Namespaces alone allow it, and this
host is a VM whose hypervisor listens on vsock, so the payload never connects anywhere: if the
socket could be created at all, that is already the failure."""
from conftest import expect_in, run_py


def test_vsock_socket_denied():
    res = run_py(r'''
        import socket
        AF_VSOCK = 40
        for kind, name in ((socket.SOCK_STREAM, "STREAM"), (socket.SOCK_DGRAM, "DGRAM"),
                           (socket.SOCK_SEQPACKET, "SEQPACKET")):
            try:
                s = socket.socket(AF_VSOCK, kind)
                s.close()          # created: do not connect, just report
                R["socket " + name] = "OK"
            except OSError as e:
                R["socket " + name] = ename(e.errno)
        R["raw socket syscall"] = syscall(41, AF_VSOCK, 1, 0)
        R["socketpair"] = attempt(socket.socketpair, AF_VSOCK, socket.SOCK_STREAM)
        R["/dev/vsock"] = attempt(os.open, "/dev/vsock", os.O_RDWR)
    ''')
    r = dict(res.R)
    expect_in(r.pop("/dev/vsock"), {"ENOENT"}, "/dev/vsock")
    expect_in(r.pop("socketpair"), {"EAFNOSUPPORT", "EOPNOTSUPP"}, "socketpair")
    for key, value in r.items():
        expect_in(value, {"EAFNOSUPPORT"}, key)
