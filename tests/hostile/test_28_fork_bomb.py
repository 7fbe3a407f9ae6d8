"""Row 28: fork bomb; thread bomb -> EAGAIN at pids.max; the host stays responsive; the session
is killable (host_guard: no process left afterwards)."""
import time

import pytest

from conftest import EXIT_TIMEOUT, run, run_py


@pytest.mark.slow
def test_fork_bomb_hits_pids_limit():
    res = run_py(r'''
        import time, signal
        n = 0
        err = None
        children = []
        while n < 100000:
            try:
                pid = os.fork()
            except OSError as e:
                err = ename(e.errno)
                break
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children.append(pid)
            n += 1
        R["forks"] = n
        R["errno"] = err
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        for pid in children:
            os.waitpid(pid, 0)
    ''', timeout=60)
    assert res.R["errno"] == "EAGAIN", res.R
    assert 0 < res.R["forks"] <= 256, f"forked {res.R['forks']} processes (default pids cap 256)"


@pytest.mark.slow
def test_thread_bomb_hits_pids_limit():
    res = run_py(r'''
        import threading
        stop = threading.Event()
        threads = []
        err = None
        while len(threads) < 100000:
            t = threading.Thread(target=stop.wait)
            try:
                t.start()
            except RuntimeError as e:
                err = str(e)
                break
            threads.append(t)
        R["threads"] = len(threads)
        R["error"] = err
        stop.set()
        for t in threads:
            t.join()
    ''', timeout=60)
    assert res.R["error"] and "can't start new thread" in res.R["error"], res.R
    assert 0 < res.R["threads"] <= 256, res.R


@pytest.mark.slow
def test_bash_fork_bomb_is_killable():
    t0 = time.monotonic()
    # the classic bomb, then keep the shell alive for 3 s without forking, so that the bomb has
    # time to hit the cap before the cell ends (and teardown kills whatever is left)
    res = run(":(){ :|:& };:\nSECONDS=0\nwhile (( SECONDS < 3 )); do true; done",
              language="bash", timeout=5, hard_timeout=40)
    wall = time.monotonic() - t0
    # The cell ends on its own or by the timeout; either way the pids cap (EAGAIN) is what held
    # the bomb, and teardown removed every process (host_guard).
    if res.status == "timeout":
        assert res.json["timed_out"] is True, res.describe()
        assert res.rc == EXIT_TIMEOUT and res.exit_code == EXIT_TIMEOUT, res.describe()
    else:
        assert res.status in ("ok", "error"), res.describe()
    assert "Resource temporarily unavailable" in res.err, res.describe()
    assert wall < 20, f"the fork-bombed sandbox took {wall:.1f}s to be torn down"
    # the host (and airlock) still work right after
    res = run("print(6 * 7)")
    assert res.status == "ok" and res.out.strip() == "42", res.describe()
