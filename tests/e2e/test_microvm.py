"""The microVM tier (issue 27, src/vm/vm.h): a profile with "isolation": "microvm" runs each
session's runner in a guest of its own under QEMU's microvm machine, over the same wire. Its
sessions are restored copies of the profile's saved VM (src/vm/snapshot.h), reseeded; stop,
resume and fork save and restore the whole VM.

Needs QEMU (qemu-system-x86), erofs-utils, cpio and the guest kernel unpacked by
scripts/vm-kernel.sh; without them the tests skip, saying which is missing. With /dev/kvm the
guest runs under KVM; without it, under QEMU's software emulation (AIRLOCK_VM_ACCEL=tcg, the
daemon's development switch): slow, but the same guest, init and wire. The guest image is built
once with `airlock profile build microvm` into the build tree (vm-images/), again when the
runner or the init is newer than it.

A daemon that finds no usable KVM (AIRLOCK_KVM_DEVICE pointed at a missing device, and no TCG
switch) refuses the microvm profile, saying why, and serves the others.

Code Mode works in a guest as in any sandbox: its tool calls travel on the runner's control
channel (the guest's control port); the module's daemon runs the MCP fixture server for it."""
import atexit
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from airlock_daemon import AIRLOCK, descendants, start_daemon_or_fail

BUILD = pathlib.Path(AIRLOCK).resolve().parent.parent.parent
KERNEL_DIR = pathlib.Path(os.environ.get("AIRLOCK_VM_KERNEL_DIR", "/var/cache/airlock/vm-kernel"))
IMAGES = pathlib.Path(os.environ.get("AIRLOCK_TEST_VM_IMAGES", BUILD / "vm-images"))
RUNNER = pathlib.Path(os.environ.get("AIRLOCK_RUNNER", BUILD / "src/runner/airlock-runner"))
INIT = BUILD / "src/vm/airlock-vm-init"
SNAPSHOTS = IMAGES / "snapshots"
# A cold boot, the preload's imports and the save of the profile's VM: seconds under KVM, up to
# ten minutes under TCG on a busy two-core machine.
CREATE_TIMEOUT = 900


# The MCP fixture server (tests/e2e/mcp_fixture.py: echo, add, ...) for the Code Mode test.
MCP_DIR = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-vm-mcp-"))
atexit.register(shutil.rmtree, MCP_DIR, True)
MCP_CONFIG = MCP_DIR / "mcp.json"
MCP_CONFIG.write_text(json.dumps({"mcpServers": {"fx": {
    "command": sys.executable,
    "args": [str(pathlib.Path(__file__).resolve().parent / "mcp_fixture.py")]}}}))


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
    # The profile's saved VM, shared by the test daemons (saving it boots the guest and
    # imports the preload: minutes under TCG). It is saved again when the image changes.
    env["AIRLOCK_VM_SNAPSHOTS"] = str(SNAPSHOTS)
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
    d = start_daemon_or_fail(pytest, args=("--pool-size", "1", "--mcp-config", str(MCP_CONFIG)),
                             env=env)
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


def session_qemu(d, sid):
    """The QEMU of session sid (in the cgroup named after it), or None."""
    for pid in qemu_children(d):
        try:
            if f"airlock-{sid}" in pathlib.Path(f"/proc/{pid}/cgroup").read_text():
                return pid
        except OSError:
            continue
    return None


def create(d):
    r = d.post("/v1/sessions", json={"profile": "microvm"}, timeout=CREATE_TIMEOUT)
    assert r.status_code == 201, d.why(r)
    return r.json()["id"]


def execute(d, sid, code, **kw):
    r = d.post(f"/v1/sessions/{sid}/execute", json={"code": code, **kw}, timeout=300)
    assert r.status_code == 200, d.why(r)
    return r.json()


def files_url(sid, path=""):
    return f"/v1/sessions/{sid}/files" + (f"/{path}" if path else "")


def check_files(d, sid):
    """The files API reaches the guest's /work over the VM's file channel (src/vm/files.h)."""
    # Upload: the directories on the way are made; the file is the session user's.
    r = d.put(files_url(sid, "up/dir/hello.txt"), data=b"hello, guest\n")
    assert r.status_code in (200, 201), d.why(r)
    r = execute(d, sid, "import os\nst = os.stat('/work/up/dir/hello.txt')\n"
                        "(open('/work/up/dir/hello.txt').read(), st.st_uid, "
                        "os.stat('/work/up').st_uid)")
    assert r["result"] == "('hello, guest\\n', 1000, 1000)", r

    # A file the cell makes is in its result's files, and downloads byte for byte (several
    # chunks of the channel), while a cell could be running.
    r = execute(d, sid, "import os\nblob = os.urandom(3 * 65536 + 123)\n"
                        "open('/work/out.bin', 'wb').write(blob)\n"
                        "import hashlib\nhashlib.sha256(blob).hexdigest()")
    assert r["status"] == "ok", r
    assert any(f["path"] == "out.bin" for f in r["files"]), r["files"]
    digest = r["result"].strip("'")
    r = d.get(files_url(sid, "out.bin"))
    assert r.status_code == 200, d.why(r)
    assert len(r.content) == 3 * 65536 + 123
    assert hashlib.sha256(r.content).hexdigest() == digest

    listing = d.get(files_url(sid) + "?dir=").json()
    kinds = {e["name"]: (e["type"], e["size"]) for e in listing["entries"]}
    assert kinds["up"][0] == "directory" and kinds["out.bin"] == ("file", 3 * 65536 + 123), kinds
    assert listing["truncated"] is False
    inner = d.get(files_url(sid) + "?dir=up/dir").json()
    assert [e["path"] for e in inner["entries"]] == ["up/dir/hello.txt"], inner

    # Nothing outside the guest's /work: a symlink the code planted is never followed (it
    # would point into the guest's root), and ".." is refused before the VM is asked.
    r = execute(d, sid, "import os\nos.symlink('/etc/passwd', '/work/link')\n"
                        "os.symlink('/etc', '/work/linkdir')\nos.mkfifo('/work/fifo')")
    assert r["status"] == "ok", r
    r = d.get(files_url(sid, "link"))
    assert 400 <= r.status_code < 500 and b"root:" not in r.content, d.why(r)
    assert "symbolic link" in r.text, r.text
    r = d.put(files_url(sid, "linkdir/passwd"), data=b"x")
    assert 400 <= r.status_code < 500, d.why(r)
    # As in the namespaces tier: the link is not a directory openat2() will walk through.
    assert "symbolic link" in r.text or "not a directory" in r.text, r.text
    r = d.put(files_url(sid, "link"), data=b"x")
    assert 400 <= r.status_code < 500, d.why(r)
    r = d.get(files_url(sid, "fifo"))
    assert r.status_code == 400 and "not a regular file" in r.text, d.why(r)
    r = d.get(files_url(sid) + "?dir=linkdir")
    assert 400 <= r.status_code < 500, d.why(r)
    r = d.get(files_url(sid, "up/%2E%2E/%2E%2E/etc/passwd"))
    assert r.status_code == 400 and b"root:" not in r.content, d.why(r)
    r = d.get(files_url(sid, "nope.txt"))
    assert r.status_code == 404, d.why(r)
    r = d.get(files_url(sid, "up"))
    assert r.status_code == 400 and "directory" in r.text, d.why(r)
    r = execute(d, sid, "open('/etc/passwd').read().endswith('nologin\\n'), "
                        "os.path.islink('/work/link')")
    assert r["result"] == "(True, True)", "the guest's files are untouched"

    # Over the workspace: the guest's tmpfs says so, and the session lives on.
    r = execute(d, sid, "import os\nfd = os.open('/work/filler', os.O_CREAT | os.O_WRONLY)\n"
                        "free = os.statvfs('/work').f_bavail * os.statvfs('/work').f_frsize\n"
                        "os.posix_fallocate(fd, 0, free - (1 << 20))\nos.close(fd)")
    assert r["status"] == "ok", r
    r = d.put(files_url(sid, "big.bin"), data=b"\0" * (4 << 20))
    assert 400 <= r.status_code < 600, d.why(r)
    assert "over the workspace's size limit" in r.text, r.text

    # Delete: a file, then a tree.
    for path in ("filler", "big.bin", "up"):
        r = d.delete(files_url(sid, path))
        assert r.status_code == 200 or (path == "big.bin" and r.status_code == 404), d.why(r)
    names = {e["name"] for e in d.get(files_url(sid)).json()["entries"]}
    assert not {"filler", "up"} & names, names
    assert d.delete(files_url(sid, "up")).status_code == 404
    r = execute(d, sid, "os.path.exists('/work/up'), os.path.exists('/etc/passwd')")
    assert r["result"] == "(False, True)", r

    # While a cell runs, the file server still answers (it is not the runner).
    box = {}
    t = threading.Thread(target=lambda: box.update(r=execute(
        d, sid, "import time\ntime.sleep(4)\nopen('/work/during.txt').read()")))
    t.start()
    time.sleep(1)
    r = d.put(files_url(sid, "during.txt"), data=b"written mid-cell")
    assert r.status_code in (200, 201), d.why(r)
    t.join(timeout=120)
    assert box["r"]["result"] == "'written mid-cell'", box["r"]


def check_vmm_unprivileged(pid, image):
    """QEMU is never root (src/vm/vmm.h): a uid of its own, no capabilities, no_new_privs, and
    the image's files handed over as fds, not paths into the state directory."""
    status = dict(line.split(":", 1) for line in
                  pathlib.Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    uids = status["Uid"].split()
    gids = status["Gid"].split()
    assert len(set(uids)) == 1 and int(uids[0]) == 0x58000000 + pid, status["Uid"]
    assert len(set(gids)) == 1 and int(gids[0]) == 0x58000000 + pid, status["Gid"]
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[caps], 16) == 0, (caps, status[caps])
    assert status["NoNewPrivs"].strip() == "1"
    groups = status["Groups"].split()
    assert groups in ([], [str(os.stat("/dev/kvm").st_gid)] if os.path.exists("/dev/kvm")
                      else []), groups
    cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert not any(str(image).encode() in a for a in cmdline), cmdline
    # A network namespace of its own, whose only device is a loopback, and no network device
    # for a guest whose profile has no network.
    assert os.stat(f"/proc/{pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    devices = [line.split(":")[0].strip() for line in
               pathlib.Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]]
    assert devices == ["lo"], devices
    assert not any(a.startswith(b"user,") or b"-net" in a for a in cmdline), cmdline
    assert b"/proc/self/fd/" in b" ".join(cmdline)
    # A root of its own: the host's /usr, /proc and a few devices, nothing else.
    assert sorted(os.listdir(f"/proc/{pid}/root")) == \
        ["bin", "dev", "lib", "lib64", "proc", "sbin", "tmp", "usr"]
    devs = sorted(os.listdir(f"/proc/{pid}/root/dev"))
    assert devs in (["null", "random", "urandom", "zero"],
                    ["kvm", "null", "random", "urandom", "zero"]), devs
    assert os.readlink(f"/proc/{pid}/root/lib") == "usr/lib"
    with open(f"/proc/{pid}/mountinfo") as f:
        mounts = f.read()
    assert " /usr " in mounts and "/var" not in mounts and "/work" not in mounts, mounts


def check_usage(d, sid):
    """Usage per execution: CPU and peak memory of the VMM's cgroup, wall from the daemon."""
    idle = execute(d, sid, "import time\ntime.sleep(1.5)")["usage"]
    r = execute(d, sid, "import time\nt = time.monotonic()\n"
                        "while time.monotonic() < t + 1.5:\n    pass")
    assert r["status"] == "ok", r
    u = r["usage"]
    assert u["wall_ms"] >= 1500 and idle["wall_ms"] >= 1500, (u, idle)
    # The guest's busy loop is QEMU's CPU time (how much of the 1.5 s depends on what else the
    # host runs); a guest that sleeps halts its vCPU.
    assert u["cpu_ms"] > 50 and u["cpu_ms"] > idle["cpu_ms"], (u, idle)
    # The VMM's footprint: at least the guest's memory it touched to boot and run Python.
    assert u["peak_memory_bytes"] > 64 << 20, u


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
        print(f"microVM first create to first result (the profile's VM saved first unless "
              f"{SNAPSHOTS} had it): {cold_ms:.0f} ms ({'kvm' if kvm_usable() else 'tcg'})")
        assert first["status"] == "ok", first
        assert first["result"] == "42"
        own = session_qemu(d, sid)
        assert own, "the session has a QEMU of its own, in its own cgroup"
        check_vmm_unprivileged(own, image)

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
        # No network device at all: the profile says "network": "none".
        r = execute(d, sid, "import socket\nsorted(n for _, n in socket.if_nameindex())")
        assert r["result"] == "['lo']", r
        r = execute(d, sid, "echo $HOME; id -u; ls /work", language="bash")
        assert r["status"] == "ok", r
        assert r["stdout"].splitlines()[:2] == ["/work", "1000"]

        check_files(d, sid)
        check_usage(d, sid)
        r = execute(d, sid, "x")
        assert r["result"] == "41"
    finally:
        r = d.delete(f"/v1/sessions/{sid}")
    assert r.status_code in (200, 204), d.why(r)
    deadline = time.monotonic() + 10
    while own in qemu_children(d) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert own not in qemu_children(d), "deleting the session ends its VM"


DRAWS = ("import os, random, numpy\n"
         "print(os.urandom(16).hex(), random.random(), numpy.random.random(), "
         "random.getrandbits(64))")


def test_sessions_are_copies_of_the_saved_vm_with_preload_and_their_own_randomness(vm_daemon):
    d = vm_daemon
    a = create(d)
    b = create(d)
    try:
        # The profile's VM was saved once, with its preload imported, and sessions are its
        # restored copies: the modules are there before any cell imports them.
        log = d.log_text()
        assert log.count('msg="microVM saved: sessions start from it"') <= 1, log[-3000:]
        saved = SNAPSHOTS / "microvm.state"
        assert saved.exists() and saved.stat().st_mode & 0o777 == 0o400
        assert saved.stat().st_uid == os.getuid()
        for sid in (a, b):
            r = execute(d, sid, "import sys\nprint(sorted(m for m in ('numpy', 'pandas', "
                        "'matplotlib.pyplot') if m in sys.modules))")
            assert r["stdout"] == "['matplotlib.pyplot', 'numpy', 'pandas']\n", r
        # Each copy has its own kernel and Python randomness, though both come from one
        # memory image, and the host's clock rather than the moment it was saved.
        da, db = execute(d, a, DRAWS), execute(d, b, DRAWS)
        assert da["status"] == "ok" and db["status"] == "ok", (da, db)
        va, vb = da["stdout"].split(), db["stdout"].split()
        assert len(va) == 4 and len(vb) == 4, (va, vb)
        for x, y, what in zip(va, vb, ("os.urandom", "random.random", "numpy.random",
                                       "random.getrandbits")):
            assert x != y, f"two restored sessions drew the same {what}: {x}"
        r = execute(d, a, "import time\ntime.time()")
        assert abs(float(r["result"]) - time.time()) < 30, r
        assert session_qemu(d, a) and session_qemu(d, b) and \
            session_qemu(d, a) != session_qemu(d, b)
    finally:
        d.delete(f"/v1/sessions/{a}")
        d.delete(f"/v1/sessions/{b}")


LIVE_STATE = """
import socket, threading, time
def gen():
    n = 0
    while True:
        yield n
        n += 1
g = gen()
first = next(g)
ticks = [0]
stop = threading.Event()
def tick():
    while not stop.is_set():
        ticks[0] += 1
        time.sleep(0.01)
t = threading.Thread(target=tick, daemon=True)
t.start()
left, right = socket.socketpair()
left.sendall(b"sent before the stop")
first
"""

CHECK_LIVE = """
before = ticks[0]
time.sleep(0.5)
print(next(g), t.is_alive(), ticks[0] > before, right.recv(100).decode())
right.sendall(b"pong")
print(left.recv(4).decode())
"""


def test_stop_and_resume_keep_a_generator_a_thread_and_a_socket(vm_daemon):
    d = vm_daemon
    sid = create(d)
    try:
        r = execute(d, sid, LIVE_STATE)
        assert r["status"] == "ok" and r["result"] == "0", r
        own = session_qemu(d, sid)
        r = d.post(f"/v1/sessions/{sid}/stop", timeout=300)
        assert r.status_code == 200, d.why(r)
        assert r.json()["state"] == "stopped", r.json()
        assert own not in qemu_children(d), "a stopped session has no VM running"
        saved = d.state_dir / "sessions" / sid / "vm.state"
        assert saved.exists() and saved.stat().st_mode & 0o777 == 0o400
        r = d.post(f"/v1/sessions/{sid}/resume", timeout=300)
        assert r.status_code == 200, d.why(r)
        assert r.json()["resumed"] is True and r.json()["lost_names"] == [], r.json()
        assert "resume_error" not in r.json()
        r = execute(d, sid, CHECK_LIVE)
        assert r["status"] == "ok", r
        assert r["stdout"] == "1 True True sent before the stop\npong\n", r
        # A resumed VM keeps its generators (it is the same session going on), and its clock
        # is the host's again.
        r = execute(d, sid, "import time\ntime.time()")
        assert abs(float(r["result"]) - time.time()) < 30, r
    finally:
        d.delete(f"/v1/sessions/{sid}")


def test_fork_makes_independent_copies_with_their_own_randomness(vm_daemon):
    d = vm_daemon
    parent = create(d)
    children = []
    try:
        r = execute(d, parent, "import random\nrng = random.Random(7)\nx = [1, 2]\n" + LIVE_STATE)
        assert r["status"] == "ok", r
        r = d.post(f"/v1/sessions/{parent}/fork", json={"n": 2}, timeout=600)
        assert r.status_code == 201, d.why(r)
        children = [c["id"] for c in r.json()["sessions"]]
        assert len(children) == 2
        assert all(c["lost_names"] == [] for c in r.json()["sessions"]), r.json()
        draws = []
        for i, c in enumerate(children):
            r = execute(d, c, f"x.append({i})\nprint(x, next(g), t.is_alive())")
            assert r["stdout"] == f"[1, 2, {i}] 1 True\n", r
            r = execute(d, c, DRAWS + "\nprint(rng.random())")
            assert r["status"] == "ok", r
            draws.append(r["stdout"].split())
        for x, y in zip(*draws):
            assert x != y, f"the children drew the same value {x}: {draws}"
        # The parent goes on, unchanged by its children.
        r = execute(d, parent, "print(x, next(g))")
        assert r["stdout"] == "[1, 2] 1\n", r
        pids = {session_qemu(d, s) for s in [parent, *children]}
        assert None not in pids and len(pids) == 3, "each child is a VM of its own"
    finally:
        for s in [parent, *children]:
            d.delete(f"/v1/sessions/{s}")


CODE_MODE = r'''
import json
import airlock_tools as t
def report(f):
    try:
        print(json.dumps({"ok": f()}))
    except t.ToolError as e:
        print(json.dumps({"kind": e.kind, "tool": e.tool, "error": str(e)}))
report(lambda: t.echo(text="from the guest"))
report(lambda: t.call("add", a=1, b=2))
report(lambda: [e["name"] for e in t.list()])
'''


def test_code_mode_tool_calls_from_a_microvm_cell(vm_daemon):
    d = vm_daemon
    deadline = time.monotonic() + 60
    while True:  # a wait for the MCP server to start, not a timed assertion
        fx = {s["name"]: s for s in d.get("/v1/tools").json()["servers"]}.get("fx", {})
        if fx.get("state") == "ready" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert fx.get("state") == "ready", fx
    r = d.post("/v1/sessions", json={"profile": "microvm", "code_tools": ["echo"]},
               timeout=CREATE_TIMEOUT)
    assert r.status_code == 201, d.why(r)
    sid = r.json()["id"]
    try:
        out = execute(d, sid, CODE_MODE)
        assert out["status"] == "ok", out
        lines = [json.loads(line) for line in out["stdout"].splitlines()]
        assert lines[0] == {"ok": "from the guest"}, lines
        # A tool outside the session's code_tools: refused, saying which and why.
        assert lines[1]["kind"] == "not_allowed" and lines[1]["tool"] == "add", lines[1]
        assert "code_tools" in lines[1]["error"] and "'add'" in lines[1]["error"], lines[1]
        assert lines[2] == {"ok": ["echo"]}, lines[2]
        assert out["usage"]["tool_calls"] >= 1, out["usage"]
    finally:
        d.delete(f"/v1/sessions/{sid}")


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

