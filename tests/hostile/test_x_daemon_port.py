"""Extra: a connection to the daemon's own port on 127.0.0.1 from inside -> refused. The one-shot
CLI has no port, so the test's own listener stands in for it; it must see no connection."""
from conftest import expect_in, run_py


def test_daemon_port_refused(tcp_listener):
    res = run_py(r'''
        import socket
        for host in ("127.0.0.1", "localhost"):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(5)
            R[host] = attempt(s.connect, (host, @PORT@))
            s.close()
    '''.replace("@PORT@", str(tcp_listener.port)))
    expect_in(res.R["127.0.0.1"], {"ECONNREFUSED", "ENETUNREACH", "EACCES", "EPERM"}, "127.0.0.1")
    # "localhost" may also fail to resolve (getaddrinfo error, negative errno)
    if not res.R["localhost"].startswith("E-"):
        expect_in(res.R["localhost"], {"ECONNREFUSED", "ENETUNREACH", "EACCES", "EPERM",
                                       "EADDRNOTAVAIL"}, "localhost")
    assert tcp_listener.contacts() == 0, "the daemon-port stand-in accepted a connection"
