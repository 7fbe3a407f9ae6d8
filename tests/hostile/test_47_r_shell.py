"""Row 47: the R session (language "r") is a new process in the sandbox, and R reaches a shell
in many ways: system(), system2(), pipe(), and libc's own execv through a dyn.load()ed libc.
Where the profile does not allow bash, the R process carries a seccomp filter that denies
execve to everything it runs, so none of them starts a program; a Python-only profile refuses
R cells outright; where bash is allowed R's system() runs, inside the sandbox. The host guard
checks that no process is left afterwards."""
import os

import pytest

from conftest import custom_profile, run

pytestmark = pytest.mark.skipif(
    not os.access("/usr/lib/R/lib/libR.so", os.R_OK),
    reason="no R on this host (/usr/lib/R/lib/libR.so): r cells cannot run")

SHELL_ATTEMPTS = r'''
tryit <- function(label, expr) {
  out <- tryCatch(paste(capture.output(suppressWarnings(expr)), collapse = " "),
                  error = function(e) paste("error:", conditionMessage(e)))
  cat(label, "=>", out, "\n")
}
tryit("system", system("sh -c id", intern = TRUE))
tryit("system2", system2("/bin/sh", c("-c", "id"), stdout = TRUE))
tryit("pipe", readLines(pipe("id")))
tryit("system-status", print(system("id > /work/ran-id")))
libc <- "/lib/x86_64-linux-gnu/libc.so.6"
if (file.exists(libc)) {
  dyn.load(libc)
  tryit("libc-system", print(.C("system", as.character("id > /work/ran-libc"))))
}
cat("sh-wrote:", file.exists("/work/ran-id"), file.exists("/work/ran-libc"), "\n")
cat("R-ALIVE\n")
'''


def test_r_cannot_run_a_shell_without_bash():
    profile = custom_profile("r-no-bash", languages=["python", "r"])
    res = run(SHELL_ATTEMPTS, profile=profile, language="r", timeout=60)
    assert res.status == "ok", res.describe()
    assert "R-ALIVE" in res.out, res.describe()
    assert "uid=" not in res.out, f"a shell ran from R\n{res.describe()}"
    assert "sh-wrote: FALSE FALSE" in res.out, res.describe()


def test_python_only_profile_refuses_r():
    for profile in ("data-science", "minimal"):
        res = run('system("sh -c id")\ncat("RAN\\n")', profile=profile, language="r",
                  check_json=False)
        assert res.status != "ok", res.describe()
        assert "RAN" not in res.out and "uid=" not in res.out, res.describe()
        # The CLI says it on stderr; through the daemon (AIRLOCK_HOSTILE_VIA=daemon) it is the
        # 400's body.
        said = res.cli_stderr + res.raw_stdout.decode("utf-8", "replace")
        assert f"profile '{profile}' does not allow r" in said, res.describe()


def test_r_runs_a_shell_where_bash_is_allowed_inside_the_sandbox():
    res = run('system("id -u; cat /proc/1/cmdline | tr \'\\\\0\' \' \'")', language="r")
    assert res.status == "ok", res.describe()
    uid = res.out.split()[0]
    assert uid.isdigit() and int(uid) != 0, res.describe()


def test_r_holds_no_fd_of_the_runner():
    """The R process is a fork of the session's runner that executes nothing: every fd of the
    runner's (its control socket, another REPL's pipes) is closed, not merely close-on-exec."""
    res = run('fds <- list.files("/proc/self/fd")\n'
              'links <- Sys.readlink(file.path("/proc/self/fd", fds))\n'
              'cat(paste(fds[!is.na(links) & nzchar(links)], collapse = " "), "\\n")',
              language="r")
    assert res.status == "ok", res.describe()
    held = sorted(int(fd) for fd in res.out.split())
    assert held == [0, 1, 2, 3, 4], f"the R process holds fds {held}\n{res.describe()}"
