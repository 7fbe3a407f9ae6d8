"""Row 13: TIOCSTI with cmd | 1<<32 (CVE-2019-10063), TIOCLINUX, TIOCSETD -> EPERM for all,
whatever the fd (the filter masks the command to 32 bits before comparing)."""
from conftest import expect_in, run_py


def test_masked_tty_ioctls():
    res = run_py(r'''
        c = _ct.create_string_buffer(b"x")
        ldisc = _ct.c_int(0)
        sub = _ct.c_char(b"\x06")  # TIOCLINUX subcode 6 (get shift state)
        dn = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2, 3, dn):
            for hi in (0, 1 << 32, 0xffffffff << 32):
                R["TIOCSTI fd%d hi%x" % (fd, hi)] = syscall(16, fd, 0x5412 | hi, c)
                R["TIOCLINUX fd%d hi%x" % (fd, hi)] = syscall(16, fd, 0x541C | hi, _ct.byref(sub))
                R["TIOCSETD fd%d hi%x" % (fd, hi)] = syscall(16, fd, 0x5423 | hi, _ct.byref(ldisc))
    ''')
    for key, value in res.R.items():
        expect_in(value, {"EPERM"}, key)


def test_ordinary_ioctls_still_work():
    """Positive control: FIONREAD on a pipe is not caught by the TIOCSTI rule."""
    res = run_py(r'''
        import fcntl, termios, array
        rd, wr = os.pipe()
        os.write(wr, b"abc")
        buf = array.array("i", [0])
        fcntl.ioctl(rd, termios.FIONREAD, buf)
        R["fionread"] = buf[0]
        R["TCGETS on pipe"] = attempt(fcntl.ioctl, rd, termios.TCGETS, bytes(64))
    ''')
    assert res.R == {"fionread": 3, "TCGETS on pipe": "ENOTTY"}
