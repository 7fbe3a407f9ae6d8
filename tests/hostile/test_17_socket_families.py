"""Row 17: AF_ALG, AF_PACKET, AF_KEY, non-route netlink, SOCK_RAW -> EAFNOSUPPORT/EPERM.
Plus the other rarely used families that keep turning up in kernel CVEs."""
from conftest import expect_in, run_py

DENIED = {"EAFNOSUPPORT", "EPERM"}


def test_exotic_socket_families():
    res = run_py(r'''
        SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET, SOCK_PACKET = 1, 2, 3, 5, 10
        cases = {
            "AF_ALG seqpacket": (38, SOCK_SEQPACKET, 0),
            "AF_PACKET raw": (17, SOCK_RAW, 0x0300),
            "AF_PACKET dgram": (17, SOCK_DGRAM, 0x0300),
            "AF_KEY raw": (15, SOCK_RAW, 2),
            "AF_INET SOCK_PACKET": (2, SOCK_PACKET, 0x0300),
            "AF_INET raw icmp": (2, SOCK_RAW, 1),
            "AF_INET raw IPPROTO_RAW": (2, SOCK_RAW, 255),
            "AF_INET6 raw icmpv6": (10, SOCK_RAW, 58),
            "AF_NETLINK audit": (16, SOCK_RAW, 9),
            "AF_NETLINK sock_diag": (16, SOCK_RAW, 4),
            "AF_NETLINK xfrm": (16, SOCK_RAW, 6),
            "AF_NETLINK netfilter": (16, SOCK_RAW, 12),
            "AF_NETLINK kobject_uevent": (16, SOCK_DGRAM, 15),
            "AF_NETLINK generic": (16, SOCK_RAW, 16),
            "AF_NETLINK crypto": (16, SOCK_RAW, 21),
            "AF_NETLINK rdma": (16, SOCK_RAW, 20),
            "AF_BLUETOOTH": (31, SOCK_RAW, 0),
            "AF_CAN": (29, SOCK_RAW, 1),
            "AF_TIPC": (30, 4, 0),
            "AF_RDS": (21, 5, 0),
            "AF_XDP": (44, SOCK_RAW, 0),
            "AF_SMC": (43, SOCK_STREAM, 0),
            "AF_QIPCRTR": (42, SOCK_DGRAM, 0),
            "AF_PPPOX": (24, SOCK_STREAM, 0),
            "AF_LLC": (26, SOCK_DGRAM, 0),
            "AF_X25": (9, SOCK_SEQPACKET, 0),
            "AF_AX25": (3, SOCK_SEQPACKET, 0),
            "AF_APPLETALK": (5, SOCK_DGRAM, 0),
            "AF_NFC": (39, SOCK_SEQPACKET, 0),
            "AF_MCTP": (45, SOCK_DGRAM, 0),
            "AF_IUCV": (32, SOCK_STREAM, 0),
            "AF_PHONET": (35, SOCK_DGRAM, 0),
            "AF_IEEE802154": (36, SOCK_RAW, 0),
            "AF_CAIF": (37, SOCK_SEQPACKET, 0),
            "AF_KCM": (41, SOCK_DGRAM, 0),
            "family 46": (46, SOCK_DGRAM, 0),
            # AF_ALG with high bits set: the kernel truncates to int, the filter must not
            "AF_ALG with high bits": ((1 << 32) | 38, SOCK_SEQPACKET, 0),
        }
        for name, (fam, typ, proto) in cases.items():
            R[name] = syscall(41, fam, typ, proto)
            if R[name].startswith("OK:"):
                os.close(int(R[name][3:]))
    ''')
    r = dict(res.R)
    expect_in(r.pop("AF_ALG with high bits"), DENIED | {"ENOSYS"}, "AF_ALG with high bits")
    for key, value in r.items():
        expect_in(value, DENIED, key)


def test_allowed_families_still_work():
    """Positive control: AF_UNIX, AF_INET, AF_INET6 and NETLINK_ROUTE sockets are created."""
    res = run_py(r'''
        import socket
        for name, args in {"unix": (1, 1, 0), "inet tcp": (2, 1, 0), "inet udp": (2, 2, 0),
                           "inet6 tcp": (10, 1, 0), "netlink route": (16, 3, 0)}.items():
            r = syscall(41, *args)
            R[name] = r[:2]
            if r.startswith("OK:"):
                os.close(int(r[3:]))
    ''')
    assert set(res.R.values()) == {"OK"}, res.R
