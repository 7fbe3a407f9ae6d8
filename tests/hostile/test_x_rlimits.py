"""Extra: rlimits of ISOLATION.md step 9 are in place and cannot be raised: CORE 0, NOFILE,
MEMLOCK <= 64 KiB, MSGQUEUE 0, RTPRIO 0, NPROC set, FSIZE at the quota."""
import resource

from conftest import run_py


def test_rlimits_set_and_locked():
    res = run_py(r'''
        import resource as r
        names = ["RLIMIT_CORE", "RLIMIT_NOFILE", "RLIMIT_MEMLOCK", "RLIMIT_MSGQUEUE",
                 "RLIMIT_RTPRIO", "RLIMIT_NPROC", "RLIMIT_FSIZE"]
        R["limits"] = {n: list(r.getrlimit(getattr(r, n))) for n in names}
        raised = {}
        for n in names:
            soft, hard = r.getrlimit(getattr(r, n))
            if hard != r.RLIM_INFINITY:
                raised[n] = attempt(r.setrlimit, getattr(r, n), (hard, hard + 1))
        R["raise"] = raised
        R["rt sched"] = syscall(144, 0, 1, _ct.byref(_ct.c_int(50)))  # SCHED_FIFO
        R["nice -5"] = attempt(os.nice, -5)
    ''')
    lim = res.R["limits"]
    inf = resource.RLIM_INFINITY
    assert lim["RLIMIT_CORE"] == [0, 0], lim
    assert lim["RLIMIT_NOFILE"][1] <= 65536, lim
    assert lim["RLIMIT_MEMLOCK"][1] != inf and lim["RLIMIT_MEMLOCK"][1] <= 64 << 10, lim
    assert lim["RLIMIT_MSGQUEUE"][1] == 0, lim
    assert lim["RLIMIT_RTPRIO"][1] == 0, lim
    assert lim["RLIMIT_NPROC"][1] != inf, lim
    assert lim["RLIMIT_FSIZE"][1] != inf, lim
    for n, v in res.R["raise"].items():
        assert v != "OK", f"{n} hard limit could be raised"
    assert res.R["rt sched"] in ("EPERM", "ENOSYS"), res.R
    assert res.R["nice -5"] in ("EPERM", "EACCES"), res.R
