"""Row 32: double fork plus setsid, ignoring SIGTERM/SIGHUP, then the cell ends -> no process
of H0 or H1 left on the host after teardown (host_guard scans every process's uids)."""
import pytest

from conftest import run, run_py

DAEMONIZE = r'''
import signal, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork():
        os._exit(0)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)
    dn = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(dn, fd)
    os.write(w, str(os.getpid()).encode())
    os.closerange(3, 1024)
    # a grandchild of its own, in a new process group
    if os.fork() == 0:
        os.setpgid(0, 0)
    while True:
        time.sleep(1)
os.waitpid(pid, 0)
R["daemon pid"] = int(os.read(r, 32))
os.kill(R["daemon pid"], 0)
R["alive at end"] = True
'''


def test_daemonized_process_is_reaped():
    res = run_py(DAEMONIZE, timeout=15)
    assert res.R["alive at end"] is True
    assert res.wall < 12, f"the CLI waited {res.wall:.1f}s for the daemonized process"
    # host_guard checks that no process in the sandbox uid range survived


@pytest.mark.slow
def test_background_job_holding_stdout():
    """bash leaves `sleep` running with the sandbox's stdout still open: the run must still
    end (ok or timeout) and leave nothing behind."""
    res = run(r'''
trap '' TERM HUP
( trap "" TERM HUP; setsid sleep 1000 & )
nohup sleep 1000 &
disown
echo started
''', language="bash", timeout=5, hard_timeout=40)
    assert res.status in ("ok", "timeout"), res.describe()
    assert "started" in res.out
