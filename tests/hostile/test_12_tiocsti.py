"""Row 12: TIOCSTI on fds 0-2 and on /dev/tty -> EPERM or ENOTTY/ENOENT; nothing is injected
into the host terminal. airlock itself runs on a pty we create (its controlling terminal and
its stdin/stdout/stderr), with the host's dev.tty.legacy_tiocsti as it is."""
import json
import textwrap

from conftest import PRELUDE, expect_in, run_on_pty

PAYLOAD = r'''
import fcntl, termios
marker = bytes([101, 99, 104, 111, 32, 80, 87, 78, 69, 68, 10])  # never spelled out in source
def inject(fd):
    for b in marker:
        fcntl.ioctl(fd, termios.TIOCSTI, bytes([b]))
for fd in (0, 1, 2, 3):
    R["TIOCSTI fd %d" % fd] = attempt(inject, fd)
R["isatty"] = [os.isatty(fd) for fd in (0, 1, 2)]
R["open /dev/tty"] = attempt(os.open, "/dev/tty", os.O_RDWR | os.O_NOCTTY)
try:
    fd = os.open("/dev/tty", os.O_RDWR)
    R["TIOCSTI /dev/tty"] = attempt(inject, fd)
except OSError:
    pass
for path in ("/dev/console", "/dev/ptmx", "/dev/pts/0", "/dev/tty0", "/dev/ttyS0"):
    R["open " + path] = attempt(os.open, path, os.O_RDWR | os.O_NOCTTY)
R["stdio targets"] = [os.readlink("/proc/self/fd/%d" % fd) for fd in (0, 1, 2)]
'''


def test_tiocsti_does_not_reach_the_host_terminal():
    code = PRELUDE + "\n" + textwrap.dedent(PAYLOAD) + "\nreport()\n"
    rc, output, leftover = run_on_pty(code, json_mode=True)
    queued = len(leftover)
    assert rc == 0, output[-2000:]
    marker = bytes([101, 99, 104, 111, 32, 80, 87, 78, 69, 68, 10])
    assert queued == 0, f"bytes were injected into the host terminal's input: {leftover!r}"
    assert b"PWNED" not in output, "injected bytes appeared on the host terminal"
    text = output.decode("utf-8", "replace")
    start = text.find("{")
    assert start >= 0, f"no JSON on the terminal: {text[:2000]!r}"
    doc, _ = json.JSONDecoder().raw_decode(text[start:])
    assert doc["status"] == "ok", doc
    res_line = [l for l in doc["stdout"].splitlines() if l.startswith("@@R@@")]
    assert res_line, doc
    r = json.loads(res_line[-1][5:])
    assert r.pop("isatty") == [False, False, False], "a tty was passed into the sandbox"
    targets = r.pop("stdio targets")
    assert not any("pts" in t or "tty" in t for t in targets), targets
    for fd in (0, 1, 2, 3):
        expect_in(r.pop(f"TIOCSTI fd {fd}"), {"EPERM", "ENOTTY"}, f"TIOCSTI fd {fd}")
    expect_in(r.pop("open /dev/tty"), {"ENOENT", "ENXIO", "EPERM", "EACCES"}, "open /dev/tty")
    assert "TIOCSTI /dev/tty" not in r, "/dev/tty could be opened"
    for key, value in r.items():
        expect_in(value, {"ENOENT", "EACCES", "EPERM"}, key)
    assert marker not in output
