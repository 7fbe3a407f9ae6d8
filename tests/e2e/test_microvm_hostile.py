"""Hostile cases for the microVM tier's own surface (issue 27; docs/SECURITY.md, "The microVM
tier"): the runner's control channel written to from inside the guest, a guest that floods its
output, a runner that never answers, and a guest that dies (a kernel panic ends QEMU the same
way: panic=-1 and -no-reboot; here QEMU is killed from outside). Each time the session ends
(or lives on) with a reason, and the daemon lives and serves other sessions.

Here and not in tests/hostile, whose host guard must not run beside other engineers' daemons.
One daemon for the file, and one VM per case that ends its session: under QEMU's software
emulation (no /dev/kvm) each boot costs tens of seconds."""
import os
import signal
import struct
import time

import pytest

from airlock_daemon import cgroup_dirs_named, cgroup_procs, start_daemon_or_fail
from test_microvm import CREATE_TIMEOUT, base_env, execute, image, kvm_usable, qemu_children  # noqa: F401


@pytest.fixture(scope="module")
def vm_daemon(image):  # noqa: F811
    env = base_env()
    if not kvm_usable():
        env["AIRLOCK_VM_ACCEL"] = "tcg"
    d = start_daemon_or_fail(pytest, args=("--pool-size", "1"), env=env)
    try:
        yield d
    finally:
        rc, problems = d.stop()
    assert not problems, "the daemon did not stop cleanly:\n  " + "\n  ".join(problems)


def vm_session(d):
    r = d.post("/v1/sessions", json={"profile": "microvm"}, timeout=CREATE_TIMEOUT)
    assert r.status_code == 201, d.why(r)
    return r.json()["id"]


def wait_lost(d, sid, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = d.get(f"/v1/sessions/{sid}")
        if r.status_code == 404:
            return r.json()
        time.sleep(0.2)
    pytest.fail(f"session {sid} still answers as live: {d.get(f'/v1/sessions/{sid}').text}")


def still_serves(d):
    """The daemon lives and serves another session (the namespaces tier: no boot)."""
    assert d.alive(), "the daemon died"
    sid = d.create_session()
    try:
        assert d.execute(sid, "1 + 1")["result"] == "2"
    finally:
        d.delete(f"/v1/sessions/{sid}")


def session_qemu(sid):
    pids = set()
    for cg in cgroup_dirs_named({f"airlock-{sid}"}):
        pids.update(cgroup_procs(cg))
    return pids


def frame(obj_bytes):
    return struct.pack("<I", len(obj_bytes)) + obj_bytes


def test_the_channels_from_inside_the_guest(vm_daemon):
    d = vm_daemon
    sid = vm_session(d)
    try:
        # No device node of any port is in the runner's /dev: the file channel and the raw
        # control port are init's alone.
        r = execute(d, sid, "import os\nsorted(os.listdir('/dev'))")
        assert r["status"] == "ok", r
        assert not any(n.startswith(("vport", "hvc", "vd", "tty")) for n in eval(r["result"])), r

        # A well-formed frame forged on fd 3 answers nothing: dropped, the session lives.
        forged = frame(b'{"op":"result","id":"0000000000000000","result":"forged"}')
        r = execute(d, sid, f"import os\nos.write(3, {forged!r})\n'real'")
        assert r["status"] == "ok" and r["result"] == "'real'", r

        # Floods of stdout and stderr: the output limit (1 MiB) holds, the session lives.
        for stream in ("stdout", "stderr"):
            r = execute(d, sid, f"import sys\ns = 'x' * 65536\n"
                                f"for i in range(512):\n    sys.{stream}.write(s)\n'done'")
            assert r["status"] == "output_limit", {k: r[k] for k in ("status", "error")}
            assert len(r[stream]) <= 2 << 20, len(r[stream])
            assert r["state"] == "preserved", r["state"]
        assert execute(d, sid, "'alive'")["result"] == "'alive'"

        # Garbage, then a frame claiming 4 GiB: the channel is corrupt, the VM is killed and
        # the session says why; the daemon never allocates what the guest claims.
        r = execute(d, sid, "import os\nos.write(3, b'\\xff' * 3 + (0xfffffff0).to_bytes(4, "
                            "'little') + b'y' * 100000)\nimport time\ntime.sleep(30)")
        assert r["status"] == "killed", r
        assert r["state"] == "lost", r
        assert "control channel was corrupted" in r["error"]["value"], r["error"]
        body = wait_lost(d, sid)
        assert body["state"] == "lost", body
        assert not session_qemu(sid), "the session's QEMU outlived it"
    finally:
        d.delete(f"/v1/sessions/{sid}")
    still_serves(d)


def test_a_runner_that_never_answers(vm_daemon):
    d = vm_daemon
    sid = vm_session(d)
    try:
        assert execute(d, sid, "x = 1")["status"] == "ok"
        # The runner stops itself: the interrupt (SIGINT through the signal port) cannot
        # reach it, so after the timeout and the grace the VM goes.
        r = execute(d, sid, "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)",
                    timeout_s=3)
        assert r["status"] == "timeout", r
        assert r["state"] == "lost", r
        assert r["timed_out"] is True
        body = wait_lost(d, sid)
        assert body["state"] == "lost" and body.get("reason"), body
        assert not session_qemu(sid), "the session's QEMU outlived it"
    finally:
        d.delete(f"/v1/sessions/{sid}")
    still_serves(d)


def test_a_guest_that_dies_is_lost_with_a_reason(vm_daemon):
    d = vm_daemon
    sid = vm_session(d)
    try:
        assert execute(d, sid, "x = 1")["status"] == "ok"
        r = d.put(f"/v1/sessions/{sid}/files/kept.txt", data=b"before")
        assert r.status_code in (200, 201), d.why(r)
        pids = session_qemu(sid)
        assert pids, "no QEMU in the session's cgroup"
        for pid in pids:   # ours: the test's daemon started it
            os.kill(pid, signal.SIGKILL)
        body = wait_lost(d, sid)
        assert body["state"] == "lost", body
        assert body.get("reason"), body
        r = d.get(f"/v1/sessions/{sid}/files/kept.txt")
        assert r.status_code == 404, d.why(r)
        r = d.post(f"/v1/sessions/{sid}/execute", json={"code": "x"})
        assert r.status_code == 404 and r.json()["state"] == "lost", d.why(r)
    finally:
        d.delete(f"/v1/sessions/{sid}")
    still_serves(d)
    # The QEMUs left are the warm pool's (--pool-size 1), none of the dead session's. The dead
    # one is reaped by the daemon's grave thread, a moment after the session ended: until then
    # its /proc entry is there.
    assert not session_qemu(sid), "the session's QEMU outlived it"
    deadline = time.monotonic() + 30
    while len(qemu_children(d)) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(qemu_children(d)) <= 1, "a QEMU was left behind beside the warm pool's one"
