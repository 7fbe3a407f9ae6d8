"""Row 14: keyctl, add_key, request_key, KEYCTL_SESSION_TO_PARENT -> ENOSYS (or the policy's
EPERM); nothing persists to the next session."""
import uuid

from conftest import expect_in, run_py, sandbox_range_key_users

DENIED = {"ENOSYS", "EPERM"}


def test_keyring_syscalls_denied_and_nothing_persists():
    desc = "hostile-" + uuid.uuid4().hex
    keyusers_before = sandbox_range_key_users()
    res = run_py(r'''
        desc = "@DESC@".encode()
        KEY_SPEC_SESSION, KEY_SPEC_USER, KEY_SPEC_PROCESS = -3, -4, -2
        R["add_key session"] = syscall(248, b"user", desc, b"secret", 6, KEY_SPEC_SESSION)
        R["add_key user"] = syscall(248, b"user", desc, b"secret", 6, KEY_SPEC_USER)
        R["add_key keyring"] = syscall(248, b"keyring", desc, None, 0, KEY_SPEC_PROCESS)
        R["request_key"] = syscall(249, b"user", desc, None, KEY_SPEC_SESSION)
        R["keyctl GET_KEYRING_ID"] = syscall(250, 0, KEY_SPEC_SESSION, 1)
        R["keyctl JOIN_SESSION_KEYRING"] = syscall(250, 1, desc)
        R["keyctl SESSION_TO_PARENT"] = syscall(250, 18)
        R["keyctl SEARCH"] = syscall(250, 10, KEY_SPEC_USER, b"user", desc, 0)
        R["/proc/keys"] = attempt(lambda: open("/proc/keys").read())
        R["/proc/key-users"] = attempt(lambda: open("/proc/key-users").read())
    '''.replace("@DESC@", desc))
    r = dict(res.R)
    expect_in(r.pop("/proc/keys"), {"ENOENT"}, "/proc/keys")
    expect_in(r.pop("/proc/key-users"), {"ENOENT"}, "/proc/key-users")
    for key, value in r.items():
        expect_in(value, DENIED, key)

    # The next session finds nothing.
    res2 = run_py(r'''
        R["search"] = syscall(250, 10, -4, b"user", "@DESC@".encode(), 0)
        R["request_key"] = syscall(249, b"user", "@DESC@".encode(), None, -3)
    '''.replace("@DESC@", desc))
    for key, value in res2.R.items():
        expect_in(value, DENIED | {"ENOKEY"}, key)

    # And on the host no sandbox uid owns keys.
    assert sandbox_range_key_users() == keyusers_before
    with open("/proc/keys") as f:
        assert desc not in f.read()
