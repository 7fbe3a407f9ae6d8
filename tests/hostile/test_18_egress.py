"""Row 18: TCP/UDP/IPv6 egress and DNS -> ENETUNREACH/EACCES (or ECONNREFUSED inside the
sandbox's own empty network namespace). The only targets are listeners this test opened on
127.0.0.1 and ::1; each must have seen nothing."""
from conftest import expect_in, run_py

TCP_DENIED = {"ENETUNREACH", "EACCES", "ECONNREFUSED", "EPERM"}


def test_ipv4_tcp_udp_and_dns(tcp_listener, udp_listener):
    res = run_py(r'''
        import socket
        tcp_port, udp_port = @TCP@, @UDP@
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        R["tcp connect"] = attempt(s.connect, ("127.0.0.1", tcp_port))
        s.close()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        R["tcp connect nonblocking"] = attempt(s.connect, ("127.0.0.1", tcp_port))
        s.close()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        R["udp sendto"] = attempt(u.sendto, b"hostile-udp", ("127.0.0.1", udp_port))
        # a DNS query for a name, sent straight to the test's UDP listener
        query = (b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
                 b"\x07hostile\x07invalid\x00\x00\x01\x00\x01")
        R["udp dns query"] = attempt(u.sendto, query, ("127.0.0.1", udp_port))
        u.close()
        try:
            socket.getaddrinfo("airlock-hostile.invalid", 80)
            R["getaddrinfo"] = "RESOLVED"
        except socket.gaierror as e:
            R["getaddrinfo"] = "gaierror"
        R["interfaces"] = [name for _, name in socket.if_nameindex()]
        R["net dev"] = [l.split(":")[0].strip() for l in open("/proc/self/net/dev").readlines()[2:]]
    '''.replace("@TCP@", str(tcp_listener.port)).replace("@UDP@", str(udp_listener.port)))
    r = res.R
    expect_in(r["tcp connect"], TCP_DENIED, "tcp connect")
    expect_in(r["tcp connect nonblocking"], TCP_DENIED | {"EINPROGRESS"}, "tcp nonblocking")
    expect_in(r["udp sendto"], {"OK", "ENETUNREACH", "EACCES", "EPERM"}, "udp sendto")
    expect_in(r["udp dns query"], {"OK", "ENETUNREACH", "EACCES", "EPERM"}, "udp dns")
    assert r["getaddrinfo"] == "gaierror", r
    assert r["interfaces"] == ["lo"], f"network interfaces other than lo: {r['interfaces']}"
    assert r["net dev"] == ["lo"], r["net dev"]
    assert tcp_listener.contacts() == 0, "the host TCP listener accepted a connection"
    assert udp_listener.contacts() == 0, "the host UDP listener received a datagram"


def test_ipv6_tcp_udp(tcp6_listener):
    res = run_py(r'''
        import socket
        port = @PORT@
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.settimeout(5)
        R["tcp6 connect"] = attempt(s.connect, ("::1", port))
        s.close()
        u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        R["udp6 sendto"] = attempt(u.sendto, b"hostile", ("::1", port))
    '''.replace("@PORT@", str(tcp6_listener.port)))
    expect_in(res.R["tcp6 connect"], TCP_DENIED | {"EADDRNOTAVAIL"}, "tcp6 connect")
    expect_in(res.R["udp6 sendto"], {"OK", "ENETUNREACH", "EACCES", "EPERM", "EADDRNOTAVAIL"},
              "udp6 sendto")
    assert tcp6_listener.contacts() == 0, "the host ::1 listener accepted a connection"
