"""Extra (ISOLATION.md "explicit EPERM" list): module loading, kexec, reboot, swap, accounting,
quotas, port I/O, vhangup, NUMA and obsolete calls -> EPERM (or ENOSYS). Arguments are chosen so
that even a served call could not change anything (bogus magic, missing files, level 3 I/O)."""
from conftest import expect_in, run_py


def test_admin_syscalls_denied():
    res = run_py(r'''
        R["init_module"] = syscall(175, None, 0, b"")
        R["finit_module"] = syscall(313, 0, b"", 0)
        R["delete_module"] = syscall(176, b"hostile_nonexistent", 0)
        R["kexec_load"] = syscall(246, 0, 0, None, 0)
        R["kexec_file_load"] = syscall(320, -1, -1, 0, None, 4)   # KEXEC_FILE_NO_INITRAMFS
        R["reboot bad magic"] = syscall(169, 0, 0, 0, None)
        R["swapon"] = syscall(167, b"/nonexistent-swap", 0)
        R["swapoff"] = syscall(168, b"/nonexistent-swap")
        R["acct"] = syscall(163, b"/nonexistent-acct")
        R["quotactl"] = syscall(179, 0x800001, b"/nonexistent", 0, None)  # Q_SYNC
        R["iopl 3"] = syscall(172, 3)
        R["ioperm"] = syscall(173, 0x80, 1, 1)
        R["vhangup"] = syscall(153)
        R["mbind"] = syscall(237, 0, 0, 0, None, 0, 0)
        R["set_mempolicy"] = syscall(238, 0, None, 0)
        R["migrate_pages"] = syscall(256, 0, 0, None, None)
        R["move_pages"] = syscall(279, 0, 0, None, None, None, 0)
        R["modify_ldt read"] = syscall(154, 0, None, 0)
        R["uselib"] = syscall(134, b"/nonexistent")
        R["ustat"] = syscall(136, 0, None)
        R["sysfs"] = syscall(139, 3)
        R["nfsservctl"] = syscall(180, 0, None, None)
        R["lsm_list_modules"] = syscall(461, None, None, 0)
    ''')
    for key, value in res.R.items():
        expect_in(value, {"EPERM", "ENOSYS"}, key)
