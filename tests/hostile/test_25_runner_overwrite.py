"""Row 25: open /proc/1/exe (the runner, pid 1 of the sandbox) or the shim for writing
(CVE-2019-5736 class) -> ETXTBSY/EROFS/EACCES; the runner's and the CLI's hashes are unchanged
(host_guard hashes the airlock binary and its runner)."""
from conftest import expect_in, run_py

DENIED = {"ETXTBSY", "EROFS", "EACCES", "EPERM"}


def test_overwrite_runner_and_interpreter():
    res = run_py(r'''
        targets = ["/proc/1/exe", "/proc/self/exe", "/.airlock/runner", "/usr/bin/python3.11",
                   "/proc/1/root/.airlock/runner"]
        for t in targets:
            R["open wb " + t] = attempt(lambda: open(t, "r+b"))
            R["O_WRONLY " + t] = attempt(os.open, t, os.O_WRONLY)
            R["O_TRUNC " + t] = attempt(os.open, t, os.O_WRONLY | os.O_TRUNC)
        # reopen a read-only fd for writing through /proc/self/fd (the runc trick)
        for t in ["/proc/1/exe", "/.airlock/runner", "/usr/bin/python3.11"]:
            try:
                fd = os.open(t, os.O_RDONLY)
            except OSError as e:
                R["reopen " + t] = "open ro: " + ename(e.errno)
                continue
            R["reopen " + t] = attempt(os.open, "/proc/self/fd/%d" % fd, os.O_WRONLY)
            try:
                pfd = os.open(t, os.O_PATH)
                R["O_PATH reopen " + t] = attempt(os.open, "/proc/self/fd/%d" % pfd, os.O_RDWR)
            except OSError as e:
                R["O_PATH reopen " + t] = "open path: " + ename(e.errno)
        R["truncate runner"] = attempt(os.truncate, "/.airlock/runner", 0)
        R["chmod runner"] = attempt(os.chmod, "/.airlock/runner", 0o777)
        R["unlink runner"] = attempt(os.unlink, "/.airlock/runner")
        R["rename over runner"] = attempt(os.rename, "/work", "/.airlock/runner")
    ''')
    for key, value in res.R.items():
        if "/proc/1/" in key and value == "ENOENT":
            # In a daemon's session pid 1 is an init the interpreter cannot see: unreachable is
            # as safe as refused. (In a one-shot sandbox pid 1 is the interpreter itself.)
            continue
        if value.startswith(("open ro: ", "open path: ")):
            value = value.split(": ", 1)[1]   # could not even open it read-only: fine
            expect_in(value, DENIED | {"ENOENT"}, key)
        elif key.startswith(("unlink", "rename")):
            expect_in(value, DENIED | {"EBUSY", "EXDEV", "ENOTDIR", "EISDIR"}, key)
        else:
            expect_in(value, DENIED, key)
