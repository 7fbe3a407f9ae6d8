"""Row 15: io_uring_setup (with SQPOLL), bpf, perf_event_open, userfaultfd -> ENOSYS/EPERM.
On this host the kernel itself would allow several of these to an unprivileged user
(io_uring_disabled=0, userfaultfd with UFFD_USER_MODE_ONLY, perf for one's own task), so only
the sandbox's filter stands in the way."""
from conftest import expect_in, run_py

DENIED = {"ENOSYS", "EPERM"}


def test_attack_surface_syscalls():
    res = run_py(r'''
        params = (_ct.c_uint32 * 30)()
        params[2] = 2          # flags = IORING_SETUP_SQPOLL
        R["io_uring_setup SQPOLL"] = syscall(425, 8, _ct.byref(params))
        params = (_ct.c_uint32 * 30)()
        R["io_uring_setup"] = syscall(425, 8, _ct.byref(params))
        R["io_uring_enter"] = syscall(426, 0, 0, 0, 0, None, 0)
        R["io_uring_register"] = syscall(427, 0, 0, None, 0)
        attr = (_ct.c_uint32 * 32)(1, 4, 8, 4)  # BPF_MAP_TYPE_HASH, key 4, value 8, 4 entries
        R["bpf MAP_CREATE"] = syscall(321, 0, _ct.byref(attr), 128)
        insns = (_ct.c_uint64 * 2)(0x00000000000000b7, 0x0000000000000095)  # r0 = 0; exit
        lic = _ct.create_string_buffer(b"GPL")
        pattr = (_ct.c_uint64 * 16)()
        pattr[0] = 1 | (2 << 32)                 # SOCKET_FILTER, insn_cnt 2
        pattr[1] = _ct.addressof(insns)
        pattr[2] = _ct.addressof(lic)
        R["bpf PROG_LOAD"] = syscall(321, 5, _ct.byref(pattr), 128)
        pe = (_ct.c_uint8 * 128)()
        pe[0] = 1               # type PERF_TYPE_SOFTWARE
        pe[4] = 128             # size
        pe[40] = 0x60 | 0x01    # disabled, exclude_kernel, exclude_hv
        R["perf_event_open self"] = syscall(298, _ct.byref(pe), 0, -1, -1, 0)
        R["userfaultfd USER_MODE_ONLY"] = syscall(323, 1 | 0o2000000)
        R["userfaultfd"] = syscall(323, 0o2000000)
        R["open /dev/userfaultfd"] = attempt(os.open, "/dev/userfaultfd", os.O_RDWR)
        R["fanotify_init"] = syscall(300, 0x200, 0)   # FAN_REPORT_FID, unprivileged-capable
        R["lookup_dcookie"] = syscall(212, 0, None, 0)
    ''')
    r = dict(res.R)
    expect_in(r.pop("open /dev/userfaultfd"), {"ENOENT"}, "open /dev/userfaultfd")
    for key, value in r.items():
        expect_in(value, DENIED, key)
