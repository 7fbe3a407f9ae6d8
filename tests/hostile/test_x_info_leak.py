"""Extra: what the sandbox can learn about the host through /proc/self: its cgroup path (must be
the namespace root), the mount table (no host workspace or test directories), the kernel's
/proc/self/net (own namespace only)."""
from conftest import SESSION_DIR, run_py


def test_no_host_paths_in_self_views():
    res = run_py(r'''
        R["cgroup"] = open("/proc/self/cgroup").read().splitlines()
        R["mountinfo"] = open("/proc/self/mountinfo").read()
        R["tcp"] = open("/proc/self/net/tcp").read().splitlines()[1:]
        R["unix"] = open("/proc/self/net/unix").read().splitlines()[1:]
    ''')
    r = res.R
    for line in r["cgroup"]:
        path = line.split(":", 2)[2]
        assert "airlock-run" not in path and "process_api" not in path, \
            f"host cgroup path visible: {line}"
    assert str(SESSION_DIR) not in r["mountinfo"], "a host test directory is mounted inside"
    assert r["tcp"] == [], f"host TCP sockets visible: {r['tcp'][:5]}"
    for line in r["unix"]:
        assert "hostile" not in line and "X11" not in line, f"host unix socket visible: {line}"
