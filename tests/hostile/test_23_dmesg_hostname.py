"""Row 23: dmesg; hostname; uname -n -> EPERM; the hostname is "sandbox" (and the host's is
unchanged: checked by host_guard)."""
import socket

from conftest import expect_in, run, run_py


def test_syslog_and_hostname():
    res = run_py(r'''
        import socket
        buf = _ct.create_string_buffer(4096)
        R["syslog READ_ALL"] = syscall(103, 3, buf, 4096)
        R["syslog SIZE_BUFFER"] = syscall(103, 10, None, 0)
        R["syslog CONSOLE_OFF"] = syscall(103, 6, None, 0)
        R["open /dev/kmsg"] = attempt(os.open, "/dev/kmsg", os.O_RDONLY)
        R["sethostname"] = syscall(170, b"evil", 4)
        R["setdomainname"] = syscall(171, b"evil", 4)
        R["gethostname"] = socket.gethostname()
        R["uname"] = os.uname().nodename
    ''')
    r = dict(res.R)
    assert r.pop("gethostname") == "sandbox"
    assert r.pop("uname") == "sandbox"
    expect_in(r.pop("open /dev/kmsg"), {"ENOENT"}, "/dev/kmsg")
    for key, value in r.items():
        expect_in(value, {"EPERM"}, key)
    assert socket.gethostname() != "evil"


def test_dmesg_and_hostname_commands():
    res = run(r'''
dmesg >/dev/null 2>&1; echo "dmesg=$?"
hostname evil 2>/dev/null; echo "sethost=$?"
echo "hostname=$(hostname)"
echo "uname=$(uname -n)"
''', language="bash")
    assert res.status == "ok", res.describe()
    lines = dict(l.split("=", 1) for l in res.out.split())
    assert lines["dmesg"] != "0" and lines["sethost"] != "0", res.describe()
    assert lines["hostname"] == "sandbox" and lines["uname"] == "sandbox", res.describe()
