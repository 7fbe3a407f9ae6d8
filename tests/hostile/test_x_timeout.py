"""Extra: `while True: pass` with a 1 s timeout -> status timeout within about a second; later
runs work; never a hang."""
from conftest import EXIT_TIMEOUT, run


def test_busy_loop_times_out():
    res = run("while True:\n    pass", timeout=1, hard_timeout=30)
    assert res.status == "timeout" and res.json["timed_out"] is True, res.describe()
    assert res.rc == EXIT_TIMEOUT and res.exit_code == EXIT_TIMEOUT, res.describe()
    assert res.wall < 3.5, f"a 1 s timeout took {res.wall:.2f}s"
    res = run("print('next')")
    assert res.status == "ok" and res.out == "next\n"


def test_sigterm_ignoring_loop_times_out():
    res = run("import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
              "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass",
              timeout=1, hard_timeout=30)
    assert res.status == "timeout" and res.rc == EXIT_TIMEOUT, res.describe()
    assert res.wall < 3.5, f"took {res.wall:.2f}s"


def test_sleeping_child_does_not_extend_the_timeout():
    res = run("import subprocess\nsubprocess.Popen(['sleep', '100'])\n"
              "import time\ntime.sleep(100)", timeout=1, hard_timeout=30)
    assert res.status == "timeout" and res.rc == EXIT_TIMEOUT, res.describe()
    assert res.wall < 3.5, f"took {res.wall:.2f}s"
