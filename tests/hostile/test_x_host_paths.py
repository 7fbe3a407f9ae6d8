"""Extra (issue 12): no host path is visible inside a sandbox. A bind mount shows in
/proc/self/mountinfo the path of its source within the source's filesystem (the "root" field),
so a bind of the runner from its build directory showed that directory to user code. The
payload reads every view of paths it has: mountinfo, mounts and mountstats, the mapped files,
and the exe, cwd, root and fd links of every process it can see; no host-only path (the
checkout, the build directories of the CLI and the runner, this suite's directory, which holds
the daemon's state directory, the main checkout) may appear in any of them."""
import os
import pathlib

from conftest import AIRLOCK_BIN, REPO, SESSION_DIR, _runner_candidates, run_py


def host_only_paths():
    """Paths of this host that nothing in a sandbox has any business showing."""
    paths = {str(REPO), str(REPO.resolve()), "/work/main", str(SESSION_DIR)}
    for p in (AIRLOCK_BIN, os.environ.get("AIRLOCK_RUNNER"), _runner_candidates()[0]):
        if p:
            paths.add(os.path.dirname(os.path.realpath(p)))
    # A parent so short that the sandbox shares it ("/", "/work", "/tmp") says nothing.
    return sorted(p for p in paths if pathlib.PurePath(p).parts[1:] and len(p) > 6)


def test_no_host_path_in_any_view_of_the_sandbox():
    res = run_py(r'''
        views = {}
        def grab(name, fn):
            try:
                views[name] = fn()
            except OSError as e:
                views[name] = "error " + ename(e.errno)
        def mapped_files(path):
            out = set()
            with open(path) as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) == 6:
                        out.add(parts[5].strip())
            return "\n".join(sorted(out))
        for f in ("mountinfo", "mounts", "mountstats"):
            grab("self/" + f, lambda f=f: open("/proc/self/" + f).read())
        for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
            grab(pid + "/maps", lambda pid=pid: mapped_files("/proc/%s/maps" % pid))
            grab(pid + "/mountinfo", lambda pid=pid: open("/proc/%s/mountinfo" % pid).read())
            for link in ("exe", "cwd", "root"):
                grab(pid + "/" + link, lambda pid=pid, link=link:
                     os.readlink("/proc/%s/%s" % (pid, link)))
            try:
                fds = os.listdir("/proc/%s/fd" % pid)
            except OSError as e:
                views[pid + "/fd"] = "error " + ename(e.errno)
                fds = []
            for fd in fds:
                grab(pid + "/fd/" + fd, lambda pid=pid, fd=fd:
                     os.readlink("/proc/%s/fd/%s" % (pid, fd)))
        R["views"] = views
    ''')
    views = res.R["views"]
    assert "self/mountinfo" in views and "/.airlock" in views["self/mountinfo"], \
        f"the payload did not read the mount table: {views.get('self/mountinfo')!r}"
    markers = host_only_paths()
    print(f"host-only paths looked for: {markers}")
    leaks = [f"{view}: {marker!r} in {text[max(0, text.find(marker) - 80):][:240]!r}"
             for view, text in sorted(views.items()) for marker in markers if marker in text]
    assert not leaks, "host paths visible inside the sandbox:\n  " + "\n  ".join(leaks)
