"""Row 7: cgroup v1 release_agent escape (CVE-2022-0492) -> no cgroupfs in the sandbox; mounting
one is denied; the host's release_agent files are untouched."""
import glob

from conftest import expect_in, run, run_py


def _host_release_agents():
    out = {}
    for path in glob.glob("/sys/fs/cgroup/*/release_agent"):
        with open(path) as f:
            out[path] = f.read()
    return out


def test_release_agent_escape():
    before = _host_release_agents()
    res = run_py(r'''
        R["stat /sys/fs/cgroup"] = attempt(os.stat, "/sys/fs/cgroup")
        R["stat /sys"] = attempt(os.stat, "/sys")
        os.makedirs("/tmp/cg", exist_ok=True)
        for ctrl in (b"rdma", b"memory", b"pids", b"none,name=x"):
            R["mount cgroup " + ctrl.decode()] = syscall(165, b"cgroup", b"/tmp/cg", b"cgroup", 0, ctrl)
        R["mount cgroup2"] = syscall(165, b"cgroup2", b"/tmp/cg", b"cgroup2", 0, None)
        R["mounted cgroupfs"] = [l for l in open("/proc/self/mountinfo") if " cgroup" in l]
        R["write release_agent"] = attempt(lambda: open("/tmp/cg/release_agent", "r+").write("/x"))
        R["tmp/cg listing"] = os.listdir("/tmp/cg")
    ''')
    r = dict(res.R)
    assert r.pop("mounted cgroupfs") == [], res.R
    assert r.pop("tmp/cg listing") == [], res.R
    expect_in(r.pop("stat /sys/fs/cgroup"), {"ENOENT"}, "stat /sys/fs/cgroup")
    expect_in(r.pop("stat /sys"), {"ENOENT"}, "stat /sys")
    expect_in(r.pop("write release_agent"), {"ENOENT"}, "release_agent (no cgroupfs mounted)")
    for key, value in r.items():
        expect_in(value, {"EPERM", "ENOSYS"}, key)
    assert _host_release_agents() == before


def test_release_agent_from_bash():
    res = run(r'''
ls /sys/fs/cgroup; echo "ls=$?"
mkdir -p /tmp/cgrp && mount -t cgroup -o rdma cgroup /tmp/cgrp; echo "mount=$?"
''', language="bash")
    assert res.status == "ok", res.describe()
    assert "ls=2" in res.out and "mount=0" not in res.out, res.describe()
