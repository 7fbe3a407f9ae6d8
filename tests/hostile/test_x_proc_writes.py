"""Extra: rewrite one's own id maps, setgroups, oom_score_adj (to dodge the OOM killer) and LSM
attributes through /proc -> denied."""
from conftest import expect_in, run_py


def test_proc_self_writes():
    res = run_py(r'''
        def w(path, data):
            with open(path, "w") as f:
                f.write(data)
        R["uid_map"] = attempt(w, "/proc/self/uid_map", "0 0 4294967295\n")
        R["gid_map"] = attempt(w, "/proc/self/gid_map", "0 0 4294967295\n")
        R["setgroups"] = attempt(w, "/proc/self/setgroups", "allow\n")
        R["oom_score_adj -1000"] = attempt(w, "/proc/self/oom_score_adj", "-1000\n")
        R["oom_adj -17"] = attempt(w, "/proc/self/oom_adj", "-17\n")
        R["attr/current"] = attempt(w, "/proc/self/attr/current", "unconfined\n")
        R["pid1 oom_score_adj"] = attempt(w, "/proc/1/oom_score_adj", "-1000\n")
        R["mem of pid1"] = attempt(lambda: open("/proc/1/mem", "r+b"))
        R["oom_score_adj now"] = open("/proc/self/oom_score_adj").read().strip()
    ''')
    r = dict(res.R)
    assert int(r.pop("oom_score_adj now")) >= 0, "the sandbox lowered its OOM score"
    for key, value in r.items():
        expect_in(value, {"EPERM", "EACCES", "ENOENT", "EROFS", "EINVAL"}, key)
