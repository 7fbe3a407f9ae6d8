"""Row 11: /proc/self/status -> CapEff/Prm/Inh/Bnd/Amb = 0; NoNewPrivs 1; Seccomp 2."""
from conftest import run, run_py

ZERO = "0000000000000000"


def _check(fields, where):
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert fields.get(cap) == ZERO, f"{where}: {cap} = {fields.get(cap)}"
    assert fields.get("NoNewPrivs") == "1", f"{where}: NoNewPrivs = {fields.get('NoNewPrivs')}"
    assert fields.get("Seccomp") == "2", f"{where}: Seccomp = {fields.get('Seccomp')}"
    assert int(fields.get("Seccomp_filters", "0")) >= 1, where
    assert fields.get("Uid", "").split() == ["1000"] * 4, f"{where}: Uid {fields.get('Uid')}"
    assert fields.get("Gid", "").split() == ["1000"] * 4, f"{where}: Gid {fields.get('Gid')}"
    assert fields.get("Groups", "") == "", f"{where}: Groups {fields.get('Groups')!r}"


def _parse(text):
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out


def test_status_of_the_code_process():
    res = run_py(r'''
        R["status"] = open("/proc/self/status").read()
        import subprocess
        R["child"] = subprocess.run(["cat", "/proc/self/status"], capture_output=True,
                                    text=True).stdout
        R["pid1"] = attempt(lambda: open("/proc/1/status").read())
        try:
            R["pid1"] = open("/proc/1/status").read()
        except OSError:
            pass
    ''')
    _check(_parse(res.R["status"]), "code process")
    _check(_parse(res.R["child"]), "child process")
    if ":" in res.R["pid1"]:
        p1 = _parse(res.R["pid1"])
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert p1.get(cap) == ZERO, f"pid 1 (runner): {cap} = {p1.get(cap)}"
        assert p1.get("NoNewPrivs") == "1" and p1.get("Seccomp") == "2", p1


def test_status_from_bash():
    res = run("cat /proc/self/status", language="bash")
    assert res.status == "ok", res.describe()
    _check(_parse(res.out), "bash")
