"""The microVM tier (issue 27, src/vm/vm.h): a profile with "isolation": "microvm" runs each
session's runner in a guest of its own under QEMU's microvm machine, over the same wire.

Needs QEMU (qemu-system-x86), erofs-utils, cpio and the guest kernel unpacked by
scripts/vm-kernel.sh; without them the tests skip, saying which is missing. With /dev/kvm the
guest runs under KVM; without it, under QEMU's software emulation (AIRLOCK_VM_ACCEL=tcg, the
daemon's development switch): slow, but the same guest, init and wire. The guest image is built
once with `airlock profile build microvm` into the build tree (vm-images/), again when the
runner or the init is newer than it.

A daemon that finds no usable KVM (AIRLOCK_KVM_DEVICE pointed at a missing device, and no TCG
switch) refuses the microvm profile, saying why, and serves the others."""
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

from airlock_daemon import AIRLOCK, descendants, start_daemon_or_fail

BUILD = pathlib.Path(AIRLOCK).resolve().parent.parent.parent
KERNEL_DIR = pathlib.Path(os.environ.get("AIRLOCK_VM_KERNEL_DIR", "/var/cache/airlock/vm-kernel"))
IMAGES = pathlib.Path(os.environ.get("AIRLOCK_TEST_VM_IMAGES", BUILD / "vm-images"))
RUNNER = pathlib.Path(os.environ.get("AIRLOCK_RUNNER", BUILD / "src/runner/airlock-runner"))
INIT = BUILD / "src/vm/airlock-vm-init"
# A cold boot and the runner's start: seconds under KVM, up to a minute under TCG on a busy
# two-core machine.
CREATE_TIMEOUT = 240


def kvm_usable():
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


def missing_tools():
    why = []
    if not shutil.which("qemu-system-x86_64"):
        why.append("QEMU (apt-get install qemu-system-x86)")
    if not shutil.which("mkfs.erofs"):
        why.append("mkfs.erofs (apt-get install erofs-utils)")
    if not shutil.which("cpio"):
        why.append("cpio")
    if not list(KERNEL_DIR.glob("boot/vmlinuz-*")):
        why.append(f"the guest kernel in {KERNEL_DIR} (scripts/vm-kernel.sh)")
    return why


def base_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
    env["AIRLOCK_VM_IMAGES"] = str(IMAGES)
    return env


@pytest.fixture(scope="module")
def image():
    why = missing_tools()
    if why:
        pytest.skip("the microVM tier cannot be tested here: missing " + ", ".join(why))
    root = IMAGES / "microvm" / "root.erofs"
    stale = (not root.exists() or root.stat().st_mtime < RUNNER.stat().st_mtime
             or root.stat().st_mtime < INIT.stat().st_mtime)
    if stale:
        state = tempfile.mkdtemp(prefix="airlock-e2e-vm-")
        try:
            env = base_env()
            env["AIRLOCK_VM_KERNEL_DIR"] = str(KERNEL_DIR)
            p = subprocess.run([AIRLOCK, "profile", "build", "microvm", "--state-dir", state],
                               env=env, capture_output=True, text=True, timeout=1200)
            assert p.returncode == 0, f"profile build failed:\n{p.stdout}\n{p.stderr}"
            assert "microVM image of profile 'microvm'" in p.stdout
        finally:
            shutil.rmtree(state, ignore_errors=True)
    return IMAGES / "microvm"


@pytest.fixture(scope="module")
def vm_daemon(image):
    env = base_env()
    if not kvm_usable():
        print("no usable /dev/kvm: the guests run under QEMU's software emulation (TCG)")
        env["AIRLOCK_VM_ACCEL"] = "tcg"
    d = start_daemon_or_fail(pytest, args=("--pool-size", "1"), env=env)
    try:
        yield d
    finally:
        rc, problems = d.stop()
    assert not problems, "the daemon did not stop cleanly:\n  " + "\n  ".join(problems)


def qemu_children(d):
    out = []
    for pid in descendants(d.proc.pid):
        try:
            comm = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith("qemu-system"):
            out.append(pid)
    return out


def execute(d, sid, code, **kw):
    r = d.post(f"/v1/sessions/{sid}/execute", json={"code": code, **kw}, timeout=300)
    assert r.status_code == 200, d.why(r)
    return r.json()


def test_a_microvm_session_runs_cells_in_its_own_kernel(vm_daemon, image):
    d = vm_daemon
    release = dict(line.split("=", 1) for line in
                   (image / "manifest").read_text().splitlines())["kernel"]
    t0 = time.monotonic()
    r = d.post("/v1/sessions", json={"profile": "microvm"}, timeout=CREATE_TIMEOUT)
    assert r.status_code == 201, d.why(r)
    sid = r.json()["id"]
    try:
        first = execute(d, sid, "x = 41\nx + 1")
        cold_ms = (time.monotonic() - t0) * 1000
        print(f"microVM create to first result, cold: {cold_ms:.0f} ms "
              f"({'kvm' if kvm_usable() else 'tcg'})")
        assert first["status"] == "ok", first
        assert first["result"] == "42"
        assert len(qemu_children(d)) == 1, "one QEMU per microVM session"

        # The guest's own kernel, not the host's.
        r = execute(d, sid, "import os\nprint(os.uname().release, os.getuid())")
        assert r["status"] == "ok", r
        assert r["stdout"] == f"{release} 1000\n"
        assert os.uname().release != release

        # Variables persist between calls; output and errors come back as from any session.
        r = execute(d, sid, "print('hello from the guest', x)\nx * 2")
        assert r["status"] == "ok", r
        assert r["stdout"] == "hello from the guest 41\n"
        assert r["result"] == "82"
        # The profile's packages are in the guest's image, with the libraries they load
        # (numpy's BLAS is reached through Debian's alternatives links).
        r = execute(d, sid, "import numpy\nint(numpy.arange(4).dot(numpy.arange(4)))")
        assert r["status"] == "ok", r
        assert r["result"] == "14"
        r = execute(d, sid, "1/0")
        assert r["status"] == "error", r
        assert r["error"]["name"] == "ZeroDivisionError"
        assert "division by zero" in r["error"]["value"]
        r = execute(d, sid, "x")
        assert r["result"] == "41", "the session's state survives an error"

        # A timeout interrupts the cell through the guest's signal port (init sends the
        # runner SIGINT), and the session lives on.
        r = execute(d, sid, "while True:\n    pass", timeout_s=3)
        assert r["status"] == "timeout", r
        assert r["state"] == "preserved", r
        r = execute(d, sid, "x")
        assert r["result"] == "41", r
        r = execute(d, sid, "echo $HOME; id -u; ls /work", language="bash")
        assert r["status"] == "ok", r
        assert r["stdout"].splitlines()[:2] == ["/work", "1000"]

        # The daemon cannot reach the guest's /work yet: refused, and never the host's own
        # (QEMU's /proc/<pid>/root is the host's root).
        for path in (f"/v1/sessions/{sid}/files?dir=", f"/v1/sessions/{sid}/files/etc/passwd"):
            r = d.get(path)
            assert 400 <= r.status_code < 500, d.why(r)
            assert "microVM session" in r.text, r.text
        r = execute(d, sid, "x")
        assert r["result"] == "41"
    finally:
        r = d.delete(f"/v1/sessions/{sid}")
    assert r.status_code in (200, 204), d.why(r)
    deadline = time.monotonic() + 10
    while qemu_children(d) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not qemu_children(d), "deleting the session ends its VM"


def test_a_daemon_without_kvm_refuses_the_profile_and_serves_the_others(image):
    env = base_env()
    env["AIRLOCK_KVM_DEVICE"] = "/nonexistent/kvm"
    d = start_daemon_or_fail(pytest, args=("--pool-size", "1"), env=env)
    try:
        log = d.log_text()
        assert 'profile=microvm msg="refused: its sessions run in microVMs' in log, log[-3000:]
        assert "KVM is not usable: /nonexistent/kvm" in log
        r = d.post("/v1/sessions", json={"profile": "microvm"}, timeout=60)
        assert r.status_code == 400, d.why(r)
        msg = r.json()["error"]
        assert "profile 'microvm' runs sessions in microVMs, which this host cannot run" in msg
        assert "/nonexistent/kvm" in msg and "The other profiles are served" in msg
        assert not qemu_children(d)

        r = d.post("/v1/sessions", json={}, timeout=60)
        assert r.status_code == 201, d.why(r)
        sid = r.json()["id"]
        r = execute(d, sid, "print('still served')")
        assert r["stdout"] == "still served\n"
        d.delete(f"/v1/sessions/{sid}")
    finally:
        rc, problems = d.stop()
    assert not problems, "the daemon did not stop cleanly:\n  " + "\n  ".join(problems)


def test_a_profile_without_its_image_says_how_to_build_it(image):
    env = base_env()
    env["AIRLOCK_VM_IMAGES"] = tempfile.mkdtemp(prefix="airlock-e2e-vm-none-")
    if not kvm_usable():
        env["AIRLOCK_VM_ACCEL"] = "tcg"
    d = start_daemon_or_fail(pytest, args=("--pool-size", "1"), env=env)
    try:
        r = d.post("/v1/sessions", json={"profile": "microvm"}, timeout=60)
        assert r.status_code == 400, d.why(r)
        msg = r.json()["error"]
        assert "microVM image" in msg and "airlock profile build microvm" in msg, msg
        assert not qemu_children(d)
    finally:
        rc, problems = d.stop()
        shutil.rmtree(env["AIRLOCK_VM_IMAGES"], ignore_errors=True)
    assert not problems, "the daemon did not stop cleanly:\n  " + "\n  ".join(problems)

