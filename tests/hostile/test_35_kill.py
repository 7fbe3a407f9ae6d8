"""Row 35: kill(-1, SIGKILL), kill(1, ...) -> only the sandbox is affected. Host victims (as
root, host uid 1000 and nobody) survive; the CLI lives and reports."""
import os

from conftest import VIA_DAEMON, EXIT_AIRLOCK_FAILURE, run, run_py


def test_kill_everything_from_a_child(host_victims):
    pids = [p.pid for p in host_victims] + [os.getpid()]
    if VIA_DAEMON:
        # In a session the interpreter is pid 2 under a small init, so a child's kill(-1)
        # takes the interpreter too (as it would a Jupyter kernel): the cell ends, killed,
        # and nothing outside the sandbox is touched.
        res = run(r'''
import os, signal
pid = os.fork()
if pid == 0:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(-1, sig)
        except OSError:
            pass
    os._exit(0)
os.waitpid(pid, 0)
print("survived")
''')
        assert res.json is not None and res.rc != EXIT_AIRLOCK_FAILURE, res.describe()
        assert res.status in ("ok", "killed"), res.describe()
        for p in host_victims:
            assert p.poll() is None, f"host process {p.pid} was killed"
        return
    res = run_py(r'''
        import signal, time
        host_pids = @PIDS@
        for pid in host_pids:
            R["kill host %d" % pid] = attempt(os.kill, pid, signal.SIGKILL) if pid > 64 else "skip"
        # a child of ours does the mass kill, so the reporting process is a bystander
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            res = []
            for sig in (signal.SIGTERM, signal.SIGKILL):
                res.append(attempt(os.kill, -1, sig))
            res.append(attempt(os.kill, 1, signal.SIGKILL))
            res.append(attempt(os.kill, 1, signal.SIGTERM))
            os.write(w, repr(res).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        R["child kills"] = os.read(r, 1000).decode()
    '''.replace("@PIDS@", repr(pids)))
    for key, value in res.R.items():
        if key.startswith("kill host"):
            assert value in ("ESRCH", "skip"), f"{key}: {value}"
    for p in host_victims:
        assert p.poll() is None, f"host process {p.pid} was killed"


def test_kill_minus_one_from_the_code_process(host_victims):
    res = run(r'''
import os, signal, subprocess
kids = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
os.kill(-1, signal.SIGKILL)
print([k.wait() for k in kids])
print("still here")
''')
    assert res.rc != EXIT_AIRLOCK_FAILURE and res.json is not None, res.describe()
    assert res.status == "ok" and "still here" in res.out, res.describe()
    assert "[-9, -9, -9]" in res.out, res.describe()
    for p in host_victims:
        assert p.poll() is None, f"host process {p.pid} was killed"


def test_kill_pid1_and_parent(host_victims):
    res = run(r'''
import os, signal
os.kill(os.getppid(), signal.SIGTERM)
os.kill(1, signal.SIGKILL)
print("still here")
''')
    assert res.rc != EXIT_AIRLOCK_FAILURE and res.json is not None, res.describe()
    assert res.status in ("ok", "killed", "error"), res.describe()
    for p in host_victims:
        assert p.poll() is None, f"host process {p.pid} was killed"
    # airlock still works
    res = run("print('next')")
    assert res.status == "ok" and res.out.strip() == "next"
