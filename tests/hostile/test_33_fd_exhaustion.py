"""Row 33: fd exhaustion; SCM_RIGHTS loops -> EMFILE at RLIMIT_NOFILE (1024); no host effect."""

from conftest import expect_in, run_py


def test_fd_exhaustion_and_scm_rights_loops():
    res = run_py(r'''
        import resource, socket, array
        R["nofile"] = list(resource.getrlimit(resource.RLIMIT_NOFILE))
        R["raise nofile"] = attempt(resource.setrlimit, resource.RLIMIT_NOFILE,
                                    (1 << 20, 1 << 20))
        fds = []
        err = None
        try:
            while len(fds) < 1 << 20:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            err = ename(e.errno)
        R["open loop"] = [err, len(fds)]
        for fd in fds:
            os.close(fd)
        # SCM_RIGHTS: send each socket's own fd into itself, unboundedly
        pairs, err, sent = [], None, 0
        try:
            while sent < 200000:
                a, b = socket.socketpair()
                a.setblocking(False)
                pairs.append((a, b))
                for _ in range(200):
                    a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                        array.array("i", [a.fileno(), b.fileno()]))])
                    sent += 1
        except OSError as e:
            err = ename(e.errno)
        R["scm loop"] = [err, sent]
        for a, b in pairs:
            a.close()
            b.close()
        R["after"] = len(os.listdir("/proc/self/fd"))
    ''', timeout=60)
    r = res.R
    soft, hard = r["nofile"]
    assert hard <= 65536 and soft <= hard, r["nofile"]
    expect_in(r["raise nofile"], {"EPERM", "ValueError:not allowed to raise maximum limit"},
              "raise RLIMIT_NOFILE")
    err, n = r["open loop"]
    assert err == "EMFILE" and n < soft, r["open loop"]
    err, sent = r["scm loop"]
    expect_in(err, {"ETOOMANYREFS", "EMFILE", "EAGAIN", "ENOBUFS"}, "SCM_RIGHTS loop")
    assert r["after"] <= 8, r
