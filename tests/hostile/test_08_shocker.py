"""Row 8: open_by_handle_at ("shocker") -> ENOSYS/EPERM; name_to_handle_at likewise."""
from conftest import expect_in, run_py


def test_shocker():
    res = run_py(r'''
        class FileHandle(_ct.Structure):
            _fields_ = [("handle_bytes", _ct.c_uint), ("handle_type", _ct.c_int),
                        ("f_handle", _ct.c_ubyte * 128)]
        h = FileHandle(128, 0)
        mount_id = _ct.c_int(0)
        R["name_to_handle_at /usr"] = syscall(303, -100, b"/usr", _ct.byref(h), _ct.byref(mount_id), 0)
        # the shocker handle: ext4 root inode 2, generation 0, tried against the /usr mount
        sh = FileHandle(8, 1)
        sh.f_handle[0] = 2
        fd = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
        R["open_by_handle_at inode 2"] = syscall(304, fd, _ct.byref(sh), 0)
        R["open_by_handle_at from name_to_handle"] = syscall(304, fd, _ct.byref(h), 0)
        for ino in range(2, 40):
            sh.f_handle[0] = ino
            r = syscall(304, fd, _ct.byref(sh), 0)
            if r.startswith("OK"):
                R["open_by_handle_at brute"] = r
                break
    ''')
    for key, value in res.R.items():
        expect_in(value, {"ENOSYS", "EPERM"}, key)
