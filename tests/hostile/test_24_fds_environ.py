"""Row 24: list /proc/self/fd; read environ -> only fds 0-2 plus the control fd 3; no secrets;
no host paths (CVE-2024-21626 class: a leaked fd to a host directory)."""
from conftest import SECRET_ENV, SESSION_DIR, run, run_py

HOST_PATH_MARKERS = ["/work/main", "/root", "/home", str(SESSION_DIR), "/sys/fs/cgroup",
                     "build-hostile"]


def test_fds_and_environment():
    res = run_py(r'''
        import fcntl, stat
        fds = {}
        R["cloexec"] = {}
        for fd in range(0, 4096):
            try:
                flags = fcntl.fcntl(fd, fcntl.F_GETFD)
            except OSError:
                continue
            R["cloexec"][str(fd)] = bool(flags & fcntl.FD_CLOEXEC)
            st = os.fstat(fd)
            try:
                target = os.readlink("/proc/self/fd/%d" % fd)
            except OSError as e:
                target = ename(e.errno)
            kind = ("dir" if stat.S_ISDIR(st.st_mode) else "reg" if stat.S_ISREG(st.st_mode)
                    else "other")
            fds[str(fd)] = [target, kind]
        R["fds"] = fds
        R["environ"] = dict(os.environ)
        R["proc environ"] = open("/proc/self/environ", "rb").read().decode("utf-8", "replace")
        R["cwd"] = os.getcwd()
        R["cwd link"] = os.readlink("/proc/self/cwd")
        R["root link"] = os.readlink("/proc/self/root")
        import subprocess
        R["child fds"] = subprocess.run(["ls", "/proc/self/fd"], capture_output=True,
                                        text=True).stdout.split()
    ''')
    r = res.R
    fds = r["fds"]
    assert {"0", "1", "2"} <= set(fds), fds
    # Besides fd 3 (the runner's control socket), the runner's files manifest may hold one
    # inotify instance watching /work's directories (src/runner/watch.h): nothing of the host,
    # and close-on-exec, so that a subprocess does not get it.
    watch = {fd for fd, (target, _) in fds.items() if target == "anon_inode:inotify"}
    assert len(watch) <= 1 and all(r["cloexec"][fd] for fd in watch), (fds, r["cloexec"])
    assert set(fds) - watch <= {"0", "1", "2", "3"}, \
        f"unexpected open fds in the code process: {fds}"
    for fd, (target, kind) in fds.items():
        assert kind == "other" or target == "/dev/null", f"fd {fd} is a {kind}: {target}"
        for m in HOST_PATH_MARKERS:
            assert m not in target, f"fd {fd} points at a host path: {target}"
    assert r["cwd"] == "/work" and r["cwd link"] == "/work" and r["root link"] == "/", r
    # ls itself opens one fd for the directory it lists
    assert len(r["child fds"]) <= 5, r["child fds"]
    blob = repr(r["environ"]) + r["proc environ"]
    for name, value in SECRET_ENV.items():
        assert value not in blob and name not in blob, f"{name} leaked into the sandbox"
    for m in HOST_PATH_MARKERS:
        assert m not in blob, f"host path {m} in the sandbox's environment: {r['environ']}"


def test_fds_from_bash():
    res = run(r'''
for f in /proc/$$/fd/*; do
  t=$(readlink "$f") || continue
  echo "${f##*/} $t"
done
env
''', language="bash")
    assert res.status == "ok", res.describe()
    for line in res.out.splitlines():
        for m in HOST_PATH_MARKERS:
            assert m not in line, f"host path in bash's fds or environment: {line}"
    for value in SECRET_ENV.values():
        assert value not in res.out
