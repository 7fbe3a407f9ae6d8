"""Row 44: a session whose profile allows network (through the daemon's proxy) tries to get out
some other way: raw and packet sockets -> EPERM/EAFNOSUPPORT; straight TCP/UDP to the lab's
hosts, the metadata address and the lab's DNS without the proxy -> EACCES (Landlock: not a port
the sandbox may connect to) or ENETUNREACH (no route: the sandbox has only its loopback);
listening sockets -> EACCES (Landlock refuses bind). What the lab's servers saw is checked from
the lab's side: nothing. The daemon runs inside the network lab of tests/e2e/netlab.py."""
from conftest import expect_in

RAW_DENIED = {"EPERM", "EACCES", "EAFNOSUPPORT", "EPROTONOSUPPORT", "ESOCKTNOSUPPORT", "EINVAL"}
NO_WAY_OUT = {"EACCES", "EPERM", "ENETUNREACH", "EHOSTUNREACH", "EADDRNOTAVAIL"}


def test_raw_and_packet_sockets_are_refused(egress):
    egress.lab.reset()
    r = egress.cell(r'''
        SOCK_DGRAM, SOCK_RAW, SOCK_PACKET = 2, 3, 10
        for name, args in {
                "AF_PACKET raw": (17, SOCK_RAW, 0x0300),
                "AF_PACKET dgram": (17, SOCK_DGRAM, 0x0300),
                "AF_INET SOCK_PACKET": (2, SOCK_PACKET, 0x0300),
                "AF_INET raw icmp": (2, SOCK_RAW, 1),
                "AF_INET raw tcp": (2, SOCK_RAW, 6),
                "AF_INET raw IPPROTO_RAW": (2, SOCK_RAW, 255),
                "AF_INET6 raw icmpv6": (10, SOCK_RAW, 58),
                "AF_INET6 raw IPPROTO_RAW": (10, SOCK_RAW, 255),
                "AF_INET ping": (2, SOCK_DGRAM, 1),
                "AF_INET6 ping": (10, SOCK_DGRAM, 58),
        }.items():
            try:
                s = _socket.socket(*args)
                # a ping socket may exist; what matters is that it goes nowhere
                try:
                    s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", ("10.77.0.30", 0))
                    R[name] = "SENT"
                except OSError as e:
                    R[name] = "created, send " + ename(e)
                s.close()
            except OSError as e:
                R[name] = ename(e)
    ''')
    for name, value in r.items():
        if name.endswith("ping") and value.startswith("created"):
            expect_in(value.split()[-1], {"ENETUNREACH", "EACCES", "EPERM"}, name)
        else:
            expect_in(value, RAW_DENIED, name)
    egress.quiet()


def test_straight_to_the_lab_without_the_proxy(egress):
    egress.lab.reset()
    r = egress.cell(r'''
        targets = {
            "other:80": (_socket.AF_INET, ("10.77.0.30", 80)),
            "db:5432 (an allowed port)": (_socket.AF_INET, ("10.77.0.20", 5432)),
            "db:5433": (_socket.AF_INET, ("10.77.0.20", 5433)),
            "metadata": (_socket.AF_INET, ("169.254.169.254", 80)),
            "v6": (_socket.AF_INET6, ("fd00:77::10", 80)),
            "metadata v6": (_socket.AF_INET6, ("fd00:ec2::254", 80)),
            "v4-mapped metadata": (_socket.AF_INET6, ("::ffff:169.254.169.254", 80)),
            "evil:443": (_socket.AF_INET, ("10.77.0.66", 443)),
        }
        for name, (family, addr) in targets.items():
            s = _socket.socket(family, _socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(addr)
                R["tcp " + name] = "OK"
            except OSError as e:
                R["tcp " + name] = ename(e)
            s.close()
            s = _socket.socket(family, _socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(addr)
                R["nonblocking " + name] = "OK"
            except OSError as e:
                R["nonblocking " + name] = ename(e)
            s.close()
        query = (b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
                 b"\x04meta\x08internal\x00\x00\x01\x00\x01")
        for name, addr in {"dns": ("10.77.0.53", 53),
                           "udp metadata": ("169.254.169.254", 80)}.items():
            u = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
            try:
                u.sendto(query, addr)
                R[name] = "SENT"
            except OSError as e:
                R[name] = ename(e)
            u.close()
        for name in ("evil.internal", "meta.internal", "other.internal"):
            try:
                R["getaddrinfo " + name] = sorted({a[4][0] for a in _socket.getaddrinfo(name, 80)})
            except _socket.gaierror:
                R["getaddrinfo " + name] = "gaierror"
        R["interfaces"] = [name for _, name in _socket.if_nameindex()]
    ''')
    assert r.pop("interfaces") == ["lo"], r
    # no DNS in the sandbox: only the forwarded names of its /etc/hosts resolve, to forwarders
    assert r.pop("getaddrinfo evil.internal") == "gaierror", r
    assert r.pop("getaddrinfo meta.internal") == "gaierror", r
    fwd = r.pop("getaddrinfo other.internal")
    assert len(fwd) == 1 and fwd[0].startswith("127.0.1."), fwd
    for name in ("dns", "udp metadata"):
        expect_in(r.pop(name), {"ENETUNREACH", "EACCES", "EPERM"}, name)
    for name, value in r.items():
        allowed = NO_WAY_OUT | ({"EINPROGRESS"} if name.startswith("nonblocking") else set())
        expect_in(value, allowed, name)
    egress.quiet("other", "db", "db-5433", "v6", "evil-tls")
    assert egress.lab.stats()["dns"] == {}, "the lab's DNS server got a query"


def test_listening_sockets_are_refused(egress):
    egress.lab.reset()
    r = egress.cell(r'''
        for name, (family, addr) in {
                "127.0.0.1:0": (_socket.AF_INET, ("127.0.0.1", 0)),
                "127.0.0.1:9000": (_socket.AF_INET, ("127.0.0.1", 9000)),
                "the proxy's 127.0.0.1:3128": (_socket.AF_INET, ("127.0.0.1", 3128)),
                "the SOCKS port 127.0.0.1:1080": (_socket.AF_INET, ("127.0.0.1", 1080)),
                "a forwarder's 127.0.1.1:80": (_socket.AF_INET, ("127.0.1.1", 80)),
                "a forwarder's 10.77.0.40:80": (_socket.AF_INET, ("10.77.0.40", 80)),
                "0.0.0.0:8000": (_socket.AF_INET, ("0.0.0.0", 8000)),
                "[::1]:0": (_socket.AF_INET6, ("::1", 0)),
                "[::]:8000": (_socket.AF_INET6, ("::", 8000)),
        }.items():
            s = _socket.socket(family, _socket.SOCK_STREAM)
            try:
                s.bind(addr)
                s.listen(1)
                R[name] = "LISTENING"
            except OSError as e:
                R[name] = ename(e)
            s.close()
        # the proxy still answers its own sandbox afterwards
        R["proxy"] = proxy_get("http://other.internal/")["server"]
    ''')
    assert r.pop("proxy") == "other", r
    for name, value in r.items():
        # EADDRINUSE would mean the bind got past Landlock to the port check: not allowed
        # either (Landlock refuses every bind of a sandbox, whatever the port's state).
        expect_in(value, {"EACCES", "EPERM"}, name)
    egress.quiet()
