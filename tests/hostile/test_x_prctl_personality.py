"""Extra: prctl PR_SET_MM / PR_SET_PTRACER and non-allow-listed personality values -> denied;
the allowed personality queries still work."""
from conftest import expect_in, run_py


def test_prctl_and_personality():
    res = run_py(r'''
        R["PR_SET_MM start_code"] = syscall(157, 35, 1, 0x400000, 0, 0)
        R["PR_SET_MM exe_file"] = syscall(157, 35, 13, 0, 0, 0)
        R["PR_SET_PTRACER any"] = syscall(157, 0x59616d61, 0xffffffffffffffff, 0, 0, 0)
        R["PR_SET_PTRACER 1"] = syscall(157, 0x59616d61, 1, 0, 0, 0)
        R["personality READ_IMPLIES_EXEC"] = syscall(135, 0x0400000)
        R["personality ADDR_NO_RANDOMIZE"] = syscall(135, 0x0040000)
        R["personality PER_SVR4"] = syscall(135, 0x04100001)
        R["query personality"] = syscall(135, 0xffffffff)
        R["PR_GET_NO_NEW_PRIVS"] = syscall(157, 39, 0, 0, 0, 0)
        R["PR_SET_NO_NEW_PRIVS 0"] = syscall(157, 38, 0, 0, 0, 0)
        R["PR_CAP_AMBIENT raise"] = syscall(157, 47, 2, 21, 0, 0)
        R["PR_SET_SECUREBITS"] = syscall(157, 28, 0, 0, 0, 0)
        R["PR_SET_DUMPABLE"] = syscall(157, 4, 1, 0, 0, 0)[:2]
        R["seccomp disable"] = syscall(157, 22, 0, 0, 0, 0)      # PR_SET_SECCOMP, mode 0
    ''')
    r = dict(res.R)
    assert r.pop("query personality").startswith("OK"), res.R
    assert r.pop("PR_GET_NO_NEW_PRIVS") == "OK:1"
    r.pop("PR_SET_DUMPABLE")
    expect_in(r.pop("PR_SET_NO_NEW_PRIVS 0"), {"EINVAL", "EPERM"}, "clearing no_new_privs")
    expect_in(r.pop("PR_CAP_AMBIENT raise"), {"EPERM"}, "PR_CAP_AMBIENT_RAISE")
    expect_in(r.pop("PR_SET_SECUREBITS"), {"EPERM"}, "PR_SET_SECUREBITS")
    expect_in(r.pop("seccomp disable"), {"EINVAL", "EPERM", "EACCES"}, "seccomp disable")
    for key, value in r.items():
        expect_in(value, {"EPERM", "ENOSYS"}, key)
