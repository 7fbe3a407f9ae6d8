"""Extra: `os.kill(os.getppid(), signal.SIGTERM)` and `os.kill(-1, 9)` -> the CLI (the daemon's
stand-in) lives and reports a result."""
from conftest import EXIT_AIRLOCK_FAILURE, run


def test_kill_parent_and_everything():
    res = run("import os, signal\nos.kill(os.getppid(), signal.SIGTERM)\nos.kill(-1, 9)\n"
              "print('survived')")
    assert res.json is not None and res.rc != EXIT_AIRLOCK_FAILURE, res.describe()
    assert res.rc >= 0, f"the CLI itself was killed by signal {-res.rc}"
    assert res.status in ("ok", "killed", "error"), res.describe()


def test_signal_storm_at_pid1():
    res = run("import os, signal\nfor s in range(1, 32):\n"
              "    if s not in (signal.SIGKILL, signal.SIGSTOP):\n"
              "        try:\n            os.kill(1, s)\n        except OSError:\n            pass\n"
              "print('done')")
    assert res.json is not None and res.rc != EXIT_AIRLOCK_FAILURE and res.rc >= 0, \
        res.describe()
