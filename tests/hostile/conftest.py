"""Shared machinery of the hostile suite (tests/hostile, spec: HOSTILE.md).

Every attack in this directory runs ONLY as user code inside an airlock sandbox, through
`airlock run --json`. Nothing hostile is ever executed on the host: the host side of a test only
prepares inputs (files, listeners it owns on 127.0.0.1/::1, abstract unix sockets it created)
and inspects the host afterwards.

What this file provides:
  run(code, profile="default", language="python", timeout=20, extra_args=[], ...)
      runs the CLI once with its own hard timeout and returns a Result (parsed JSON + exit
      status + raw bytes + rusage of the CLI process).
  run_py(body, ...)
      runs a Python payload with PRELUDE (syscall helpers) prepended; the payload fills the
      dict R and the prelude prints it, parsed into Result.R.
  host_guard (autouse)
      snapshots the host before each test and verifies it afterwards: hashes of host files and
      of the airlock binaries, hostname, no process left in the sandbox uid range, no leftover
      airlock-run-* cgroup, no new entries in /tmp and /dev/shm, host mount table unchanged.

Through the daemon: with AIRLOCK_HOSTILE_VIA=daemon the same attacks run through `airlock
serve` instead of `airlock run`. One daemon is started for the whole session (a free loopback
port, a private state directory, the fake secrets of SECRET_ENV in its environment, including
AIRLOCK_TOKEN, which becomes its API token), and run() sends each payload as a one-shot
POST /execute {code, language, profile, timeout}, adapting the answer to the same Result:
  json          the execution object (HTTP 200), else None and json_error = the HTTP answer
  rc            what the CLI would have exited with: the object's exit_code (124 timeout,
                125 output limit, 137 OOM, 128+N signal), or 2 when the daemon did not answer
                200 (airlock's own error)
  raw_stdout    the HTTP body; stdout_total its length; wall the request's duration
  cli_hwm_kib   how far the daemon's RSS peaked above its level before the request (VmHWM,
                reset before it, minus VmRSS then)
  cli_stderr    the daemon's log lines written during the request
  --memory M    becomes a copy of the profile with limits.memory = M (the API has no memory
                field); profile files made by custom_profile() are found by name through
                AIRLOCK_PROFILES_DIR
What only the CLI has (--input/--output, other CLI arguments, the terminal of run_on_pty)
skips with the reason. The daemon also serves internal tools (--mcp-config) from the MCP test
fixture (tests/e2e/mcp_fixture.py, as server "fx", with --name-clash), so that Code Mode's
attacks (test_x_codemode_*.py) have tools to aim at: codemode_session() makes a session whose
code may call them, and serves_others() checks that the daemon still answers everyone else. After each test the guard also checks the daemon: alive and healthy,
no live session left, and every session the test made gone with its cgroups and processes;
at the end the daemon must stop on SIGTERM with status 0 and leave nothing behind.
"""

import atexit
import dataclasses
import errno
import hashlib
import json
import os
import pathlib
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
import uuid

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
VIA = os.environ.get("AIRLOCK_HOSTILE_VIA", "cli") or "cli"
if VIA not in ("cli", "daemon"):
    raise pytest.UsageError(f"AIRLOCK_HOSTILE_VIA must be 'cli' or 'daemon', not {VIA!r}")
# The tier under attack: AIRLOCK_HOSTILE_PROFILE=microvm runs every attack of the default
# profile in a microVM session (issue 27; docs/PROFILES.md "The microvm tier"), through the
# daemon (implied: `airlock run` has no microVM tier). Without /dev/kvm the guests run under
# QEMU's software emulation (AIRLOCK_VM_ACCEL=tcg), which is slow but the same guest: each
# session is a restored copy of the profile's saved VM (shared with tests/e2e/test_microvm.py
# through vm-images/snapshots), not a boot. The guest image comes from
# AIRLOCK_HOSTILE_VM_IMAGES, else the build tree's vm-images (tests/e2e/test_microvm.py builds
# it there); without it every test skips, saying so. Attacks on a profile of their own
# (custom_profile(), --memory) skip: such a profile has no microVM image.
PROFILE_UNDER_TEST = os.environ.get("AIRLOCK_HOSTILE_PROFILE", "") or "default"
if PROFILE_UNDER_TEST not in ("default", "microvm"):
    raise pytest.UsageError("AIRLOCK_HOSTILE_PROFILE must be 'default' or 'microvm', not "
                            f"{PROFILE_UNDER_TEST!r}")
MICROVM = PROFILE_UNDER_TEST == "microvm"
if MICROVM:
    VIA = "daemon"
VIA_DAEMON = VIA == "daemon"
AIRLOCK_BIN_FROM_ENV = "AIRLOCK_BIN" in os.environ
AIRLOCK_BIN = os.environ.get("AIRLOCK_BIN") or str(REPO / "build" / "src" / "cli" / "airlock")

# Host uids that sandbox processes run as (two per sandbox), see the CLI contract.
SANDBOX_UID_BASE = 1610612736
SANDBOX_UID_COUNT = 8388608

# Exit statuses of the CLI contract.
EXIT_TIMEOUT = 124
EXIT_OUTPUT_LIMIT = 125
EXIT_OOM = 137
EXIT_AIRLOCK_FAILURE = 2
SIGSYS_EXIT = 128 + signal.SIGSYS  # 159


def _host_int80_signal():
    """How this kernel answers an i386 `int 0x80` from an unsandboxed process: None when it
    serves the call (the shellcode returns), else the signal that killed the probe. Some kernels
    (IA32 emulation off, some virtual machines) never serve it and deliver SIGSEGV: there the
    sandbox cannot be told apart from the host, and that signal is the safe outcome too."""
    import ctypes
    import mmap
    pid = os.fork()
    if pid == 0:
        try:
            buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            buf.write(bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3]))  # getpid via int 0x80
            ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))()
        finally:
            os._exit(0)
    st = os.waitpid(pid, 0)[1]
    return os.WTERMSIG(st) if os.WIFSIGNALED(st) else None


HOST_INT80_SIGNAL = _host_int80_signal()
# Signals that prove a sandboxed int 0x80 did not run: seccomp's SIGSYS, or whatever the host
# kernel itself answers when it does not serve 32-bit calls at all.
INT80_SAFE_SIGNALS = {signal.SIGSYS} | ({HOST_INT80_SIGNAL} if HOST_INT80_SIGNAL else set())
if HOST_INT80_SIGNAL:
    print(f"hostile: this kernel does not serve int 0x80 (signal {HOST_INT80_SIGNAL} outside any "
          "sandbox); int 0x80 cases accept that signal as well as SIGSYS")

# Keep at most this much of the CLI's output in memory (the flood test needs to see if the
# CLI itself caps; we keep counting beyond this but do not store).
MAX_CAPTURE = 64 << 20

# A private directory for code files, profiles, output dirs and the canary. It is excluded from
# the /tmp comparison and removed at the end of the session.
SESSION_DIR = pathlib.Path(tempfile.mkdtemp(prefix="airlock-hostile-", dir="/tmp"))
os.chmod(SESSION_DIR, 0o700)
atexit.register(shutil.rmtree, SESSION_DIR, True)
CANARY_CONTENT = ("airlock-hostile-canary-" + uuid.uuid4().hex + "\n").encode()
CANARY = SESSION_DIR / "canary.txt"
CANARY.write_bytes(CANARY_CONTENT)

# Fake secrets placed in the CLI's environment for every run: none may ever reach user code.
SECRET_ENV = {
    "AIRLOCK_HOSTILE_SECRET": "hostile-secret-" + uuid.uuid4().hex,
    "AIRLOCK_TOKEN": "hostile-token-" + uuid.uuid4().hex,
    "AWS_SECRET_ACCESS_KEY": "hostile-aws-" + uuid.uuid4().hex,
    "OPENAI_API_KEY": "hostile-openai-" + uuid.uuid4().hex,
    "GITHUB_TOKEN": "hostile-gh-" + uuid.uuid4().hex,
}

_counter = 0


def _next_name(prefix):
    global _counter
    _counter += 1
    return f"{prefix}-{os.getpid()}-{_counter}"


def errname(e):
    return errno.errorcode.get(e, f"E{e}")


# --------------------------------------------------------------------------------------------
# Running the CLI
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    argv: list
    rc: int                 # exit status of the CLI (negative: killed by that signal)
    raw_stdout: bytes       # first MAX_CAPTURE bytes of the CLI's stdout
    raw_stderr: bytes
    stdout_total: int       # bytes the CLI wrote to stdout in all
    wall: float             # seconds, CLI start to exit
    rusage: object          # resource.struct_rusage of the CLI process (from wait4)
    cli_hwm_kib: int = 0    # the CLI process's own peak RSS (VmHWM), sampled while it ran
    json: dict = None
    json_error: str = None
    R: dict = None          # run_py: the payload's result dict

    # Shorthands into the JSON object.
    def __getitem__(self, key):
        return self.json[key]

    @property
    def status(self):
        return self.json.get("status") if self.json else None

    @property
    def out(self):
        return (self.json or {}).get("stdout") or ""

    @property
    def err(self):
        return (self.json or {}).get("stderr") or ""

    @property
    def exit_code(self):
        return (self.json or {}).get("exit_code")

    @property
    def error(self):
        return (self.json or {}).get("error")

    @property
    def cli_stderr(self):
        return self.raw_stderr.decode("utf-8", "replace")

    def describe(self, limit=6000):
        """Everything needed to understand a failure, cut to a readable size."""
        if self.json is not None:
            j = dict(self.json)
            for k in ("stdout", "stderr"):
                if isinstance(j.get(k), str) and len(j[k]) > 2500:
                    j[k] = j[k][:1200] + f"...[{len(j[k])} chars]..." + j[k][-1200:]
            body = json.dumps(j, indent=1)
        else:
            body = f"(no JSON: {self.json_error}) stdout={self.raw_stdout[:2000]!r}"
        text = (f"argv={' '.join(map(str, self.argv))}\nrc={self.rc} wall={self.wall:.2f}s\n"
                f"cli stderr={self.cli_stderr[-2000:]!r}\njson={body}")
        return text[:limit]


def _code_file(code, language):
    suffix = ".py" if language == "python" else ".sh"
    path = SESSION_DIR / (_next_name("code") + suffix)
    path.write_text(code)
    return path


def airlock_argv(code_path, *, profile="default", language="python", timeout=20, memory=None,
                 inputs=(), output=None, json_mode=True, extra_args=()):
    argv = [AIRLOCK_BIN, "run"]
    if profile is not None:
        argv += ["-p", str(profile)]
    if language is not None:
        argv += ["-l", language]
    if timeout is not None:
        argv += ["--timeout", str(timeout)]
    if memory is not None:
        argv += ["--memory", str(memory)]
    if json_mode:
        argv.append("--json")
    for i in inputs:
        argv += ["--input", str(i)]
    if output is not None:
        argv += ["--output", str(output)]
    argv += list(extra_args)
    argv.append(str(code_path))
    return argv


def cli_env(extra=None):
    env = dict(os.environ)
    # Never let the caller's environment weaken or redirect the sandbox under test
    # (AIRLOCK_ISOLATION=none, AIRLOCK_SECCOMP_LOG, another runner or profile directory...).
    for k in list(env):
        if k.startswith("AIRLOCK_") and k != "AIRLOCK_LOG":
            del env[k]
    env.update(SECRET_ENV)
    if extra:
        env.update(extra)
    return env


def require_binary():
    if not os.access(AIRLOCK_BIN, os.X_OK):
        pytest.fail(f"airlock binary not found or not executable: {AIRLOCK_BIN} "
                    "(build it, or set AIRLOCK_BIN)")


def _vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def execute(argv, *, hard_timeout, env=None, stdin=subprocess.DEVNULL, popen_extra=None):
    """Runs argv, draining stdout/stderr, with a hard deadline after which the whole process
    group of the CLI (which we started, in its own session) is SIGKILLed and the test fails."""
    require_binary()
    popen_extra = dict(popen_extra or {})
    popen_extra.setdefault("start_new_session", True)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env if env is not None else cli_env(), **popen_extra)
    bufs = {p.stdout.fileno(): bytearray(), p.stderr.fileno(): bytearray()}
    totals = {p.stdout.fileno(): 0, p.stderr.fileno(): 0}
    sel = selectors.DefaultSelector()
    for f in (p.stdout, p.stderr):
        os.set_blocking(f.fileno(), False)
        sel.register(f.fileno(), selectors.EVENT_READ)
    deadline = t0 + hard_timeout
    hung = False
    hwm = 0
    while sel.get_map():
        hwm = max(hwm, _vm_hwm_kib(p.pid))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            hung = True
            break
        for key, _ in sel.select(min(remaining, 0.5)):
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(key.fd)
                continue
            totals[key.fd] += len(chunk)
            buf = bufs[key.fd]
            if len(buf) < MAX_CAPTURE:
                buf += chunk[: MAX_CAPTURE - len(buf)]
    status = rusage = None
    while not hung:
        pid, st, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            status, rusage = st, ru
            break
        if time.monotonic() > deadline:
            hung = True
            break
        time.sleep(0.02)
    if hung:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status, rusage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    sel.close()
    out_fd, err_fd = p.stdout.fileno(), p.stderr.fileno()
    res = Result(argv=argv, rc=p.returncode, raw_stdout=bytes(bufs[out_fd]),
                 raw_stderr=bytes(bufs[err_fd]), stdout_total=totals[out_fd],
                 wall=time.monotonic() - t0, rusage=rusage, cli_hwm_kib=hwm)
    p.stdout.close()
    p.stderr.close()
    if hung:
        pytest.fail(f"airlock did not finish within the hard timeout of {hard_timeout}s "
                    f"(hung sandbox or CLI); killed it.\n{res.describe()}")
    return res


def parse_json(res):
    try:
        res.json = json.loads(res.raw_stdout.decode("utf-8"))
        if not isinstance(res.json, dict):
            res.json_error = "top level is not an object"
            res.json = None
    except (UnicodeDecodeError, ValueError) as e:
        res.json_error = str(e)
    return res


def run(code, profile="default", language="python", timeout=20, extra_args=(), *, memory=None,
        inputs=(), output=None, json_mode=True, env=None, hard_timeout=None, check_json=True):
    """Runs `code` once in a fresh sandbox via the CLI (or the daemon, see the module's doc).
    Returns a Result; with --json the JSON must parse (the contract prints it whenever the code
    ran), else the test fails with the CLI's stderr."""
    if MICROVM and profile in (None, "default"):
        profile = "microvm"
        if language not in ("python", "bash"):
            pytest.skip(f"AIRLOCK_HOSTILE_PROFILE=microvm: the microvm profile allows python and "
                        f"bash, not {language} (docs/PROFILES.md)")
    if VIA_DAEMON:
        return run_via_daemon(code, profile=profile, language=language, timeout=timeout,
                              extra_args=extra_args, memory=memory, inputs=inputs,
                              output=output, json_mode=json_mode, env=env,
                              hard_timeout=hard_timeout, check_json=check_json)
    path = _code_file(code, language)
    argv = airlock_argv(path, profile=profile, language=language, timeout=timeout,
                        memory=memory, inputs=inputs, output=output, json_mode=json_mode,
                        extra_args=extra_args)
    if hard_timeout is None:
        hard_timeout = (float(timeout) if timeout is not None else 30.0) + 45.0
    res = execute(argv, hard_timeout=hard_timeout, env=cli_env(env))
    if json_mode:
        parse_json(res)
        if check_json and res.json is None:
            pytest.fail(f"airlock run --json printed no JSON object\n{res.describe()}")
    return res


# Python prelude for payloads: raw syscalls with errno names, and a result dict R that is
# printed as the last line "@@R@@{json}".
PRELUDE = r'''
import ctypes as _ct, errno as _errno, json as _json, os, sys
_libc = _ct.CDLL(None, use_errno=True)
_libc.syscall.restype = _ct.c_long
R = {}
def ename(e):
    return _errno.errorcode.get(e, "E%d" % e)
def _arg(a):
    if isinstance(a, int):
        return _ct.c_ulong(a & 0xffffffffffffffff)
    return a
def syscall(nr, *args):
    """Raw syscall: returns 'OK:<ret>' or the errno name."""
    _ct.set_errno(0)
    r = _libc.syscall(_ct.c_long(nr), *[_arg(a) for a in args])
    if r == -1:
        return ename(_ct.get_errno())
    return "OK:%d" % r
def attempt(fn, *a, **kw):
    """Calls fn: 'OK', the errno name of an OSError, or 'ExcName:message'."""
    try:
        fn(*a, **kw)
        return "OK"
    except OSError as e:
        if e.errno is not None:
            return ename(e.errno)
        return type(e).__name__ + ":" + str(e)[:200]
    except BaseException as e:
        return type(e).__name__ + ":" + str(e)[:200]
def report():
    sys.stdout.flush()
    sys.stdout.write("\n@@R@@" + _json.dumps(R, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
'''


def run_py(body, profile="default", timeout=20, extra_args=(), *, expect_ok=True, **kw):
    """Runs a Python payload (PRELUDE + body + report()). With expect_ok the run must end with
    status "ok" and a result line; Result.R holds the payload's dict."""
    code = PRELUDE + "\n" + textwrap.dedent(body) + "\nreport()\n"
    res = run(code, profile=profile, language="python", timeout=timeout, extra_args=extra_args,
              **kw)
    for line in reversed(res.out.splitlines()):
        if line.startswith("@@R@@"):
            res.R = json.loads(line[5:])
            break
    print(f"payload result: {json.dumps(res.R, sort_keys=True)[:20000]}")
    if expect_ok:
        assert res.status == "ok" and res.rc == 0 and res.R is not None, (
            "payload did not run to completion\n" + res.describe())
    return res


def expect_in(value, allowed, what):
    assert value in allowed, f"{what}: got {value!r}, expected one of {sorted(allowed)}"


def custom_profile(name, limits=None, **fields):
    """Writes a profile JSON into the session dir and returns its path (the CLI loads a path
    given to -p directly)."""
    if MICROVM:
        pytest.skip(f"AIRLOCK_HOSTILE_PROFILE=microvm: the profile {name} of this attack has "
                    "no microVM image of its own (airlock profile build)")
    doc = {"description": f"hostile suite profile {name}", "languages": ["python", "bash"]}
    if limits:
        doc["limits"] = limits
    doc.update(fields)
    d = SESSION_DIR / "profiles"
    d.mkdir(exist_ok=True)
    path = d / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


def new_dir(prefix):
    d = SESSION_DIR / _next_name(prefix)
    d.mkdir()
    return d


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# Running through the daemon (AIRLOCK_HOSTILE_VIA=daemon)
# --------------------------------------------------------------------------------------------

DAEMON = None                       # the session's airlock_daemon.Daemon, once started
DAEMON_DIR = SESSION_DIR / "daemon"
PROFILES_DIR = SESSION_DIR / "profiles"
MCP_FIXTURE = REPO / "tests" / "e2e" / "mcp_fixture.py"
# Every message the daemon's MCP fixture receives, one line each ("tools/call echo"): what
# reached the tool server, whatever the sandbox was told.
MCP_FIXTURE_LOG = SESSION_DIR / "mcp-fixture-messages.txt"


def _mcp_config():
    import sys
    path = SESSION_DIR / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"fx": {
        "command": sys.executable,
        "args": [str(MCP_FIXTURE), "--name-clash", "--state-file", str(MCP_FIXTURE_LOG)]}}}))
    return path


def _daemon_module():
    import sys
    e2e = str(REPO / "tests" / "e2e")
    if e2e not in sys.path:
        sys.path.insert(0, e2e)
    import airlock_daemon
    return airlock_daemon


def _vm_images():
    return os.environ.get("AIRLOCK_HOSTILE_VM_IMAGES") or str(
        pathlib.Path(AIRLOCK_BIN).resolve().parents[2] / "vm-images")


def _daemon_env():
    env = {"AIRLOCK_PROFILES_DIR": str(PROFILES_DIR)}
    if MICROVM:
        env["AIRLOCK_VM_IMAGES"] = _vm_images()
        env["AIRLOCK_VM_SNAPSHOTS"] = str(pathlib.Path(_vm_images()) / "snapshots")
        if not _kvm_usable():
            env["AIRLOCK_VM_ACCEL"] = "tcg"
    return env


def _kvm_usable():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
        return True
    except OSError:
        return False


def pytest_collection_modifyitems(config, items):
    """AIRLOCK_HOSTILE_PROFILE=microvm without the guest image: every test skips, saying why."""
    if not MICROVM:
        return
    why = None
    if not _kvm_usable():
        print("AIRLOCK_HOSTILE_PROFILE=microvm: no usable /dev/kvm here, so the guests run "
              "under QEMU's software emulation (TCG)")
    if not (pathlib.Path(_vm_images()) / "microvm" / "root.erofs").exists():
        why = (f"AIRLOCK_HOSTILE_PROFILE=microvm needs the guest image in {_vm_images()}/microvm "
               "(airlock profile build microvm, or run tests/e2e/test_microvm.py once)")
    if why:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=why))


def daemon():
    """The session's daemon, started on first use."""
    global DAEMON
    if DAEMON is None:
        require_binary()
        ad = _daemon_module()
        PROFILES_DIR.mkdir(exist_ok=True)
        DAEMON_DIR.mkdir(exist_ok=True)
        d = ad.Daemon(binary=AIRLOCK_BIN, workdir=DAEMON_DIR,
                      args=["--pool-size", "1", "--mcp-config", str(_mcp_config())],
                      env=cli_env(_daemon_env()),
                      token_env=SECRET_ENV["AIRLOCK_TOKEN"])
        try:
            d.start()
        except ad.DaemonStartError as e:
            d.stop()
            pytest.exit(f"cannot start the daemon for AIRLOCK_HOSTILE_VIA=daemon: {e}",
                        returncode=3)
        DAEMON = d
    return DAEMON


def _daemon_profile(profile, memory):
    """The profile name to send for the CLI's -p PROFILE [--memory M]."""
    if profile is None:
        profile = "default"
    p = pathlib.Path(str(profile))
    if "/" in str(profile):
        if p.parent.resolve() != PROFILES_DIR.resolve():
            pytest.skip(f"CLI-only: a profile file outside the daemon's profile directory "
                        f"({profile})")
        name = p.stem
    else:
        name = str(profile)
    if memory is None:
        return name
    if MICROVM:
        pytest.skip(f"AIRLOCK_HOSTILE_PROFILE=microvm: --memory {memory} makes a profile of its "
                    "own, which has no microVM image")
    # --memory M: the same profile with limits.memory = M, under a name of its own.
    src = PROFILES_DIR / f"{name}.json"
    if not src.exists():
        src = REPO / "profiles" / f"{name}.json"
    doc = json.loads(src.read_text())
    doc.setdefault("limits", {})["memory"] = str(memory)
    doc["description"] = f"{doc.get('description', name)} (hostile suite: --memory {memory})"
    new = f"hostile-{name}-mem-{str(memory).lower()}"
    path = PROFILES_DIR / f"{new}.json"
    if not path.exists():
        path.write_text(json.dumps(doc, indent=1))
    return new


def _cli_exit_status(obj):
    """What `airlock run` exits with for this execution object."""
    code = obj.get("exit_code")
    if isinstance(code, int):
        return code
    return {"timeout": EXIT_TIMEOUT, "output_limit": EXIT_OUTPUT_LIMIT,
            "oom": EXIT_OOM}.get(obj.get("status"), EXIT_AIRLOCK_FAILURE)


def run_via_daemon(code, *, profile, language, timeout, extra_args, memory, inputs, output,
                   json_mode, env, hard_timeout, check_json):
    import requests
    if extra_args:
        pytest.skip(f"CLI-only: command-line arguments {list(extra_args)}")
    if inputs or output is not None:
        pytest.skip("CLI-only: --input/--output copy host files in and out; through the daemon "
                    "that is the files API (tests/e2e/test_api_files.py)")
    if not json_mode:
        pytest.skip("CLI-only: the CLI's plain output mode")
    if env:
        pytest.skip("CLI-only: the CLI's own environment")
    d = daemon()
    body = {"code": code, "profile": _daemon_profile(profile, memory)}
    if language is not None:
        body["language"] = language
    if timeout is not None:
        body["timeout"] = float(timeout)
    if hard_timeout is None:
        hard_timeout = (float(timeout) if timeout is not None else 30.0) + 45.0
    shown = {k: v for k, v in body.items() if k != "code"}
    argv = ["POST", f"{d.url}/execute", json.dumps(shown)]
    d.reset_peak_rss()
    # The daemon's own footprint (large under AddressSanitizer) is not the attack's doing: what
    # counts is how far its memory rose above where it stood, as the CLI's cap is about growth.
    rss_before = d.vm_kib("VmRSS")
    offset = d.log_size()
    t0 = time.monotonic()
    status, content, error = None, b"", None
    try:
        r = d.post("/execute", json=body, timeout=hard_timeout)
        status, content = r.status_code, r.content
    except requests.Timeout:
        pytest.fail(f"the daemon did not answer within the hard timeout of {hard_timeout}s "
                    f"({shown})\ndaemon log:\n{d.log_since(offset)[-3000:]}")
    except requests.RequestException as e:
        error = f"{type(e).__name__}: {e}"
    wall = time.monotonic() - t0
    res = Result(argv=argv, rc=EXIT_AIRLOCK_FAILURE, raw_stdout=content[:MAX_CAPTURE],
                 raw_stderr=d.log_since(offset).encode(), stdout_total=len(content), wall=wall,
                 rusage=None, cli_hwm_kib=max(0, d.vm_kib("VmHWM") - rss_before))
    if status == 200:
        parse_json(res)
        if res.json is not None:
            res.rc = _cli_exit_status(res.json)
    else:
        res.json_error = error or f"HTTP {status}: {content[:2000]!r}"
    if check_json and res.json is None:
        pytest.fail(f"the daemon gave no execution object\n{res.describe()}")
    return res


def require_daemon(why):
    """Skips, saying why, unless the suite runs through the daemon."""
    if not VIA_DAEMON:
        pytest.skip(f"daemon-only: {why}; run with AIRLOCK_HOSTILE_VIA=daemon")
    return daemon()


class CodeModeSession:
    """A session of the suite's daemon whose code may call the fixture's tools (Code Mode), for
    one test: exec() runs a cell, and the session is deleted on the way out."""

    def __init__(self, code_tools, **body):
        self.d = require_daemon("Code Mode needs a daemon with internal tools (--mcp-config)")
        r = self.d.post("/v1/sessions", json={"code_tools": list(code_tools), **body},
                        timeout=60)
        assert r.status_code == 201, self.d.why(r)
        self.id = r.json()["id"]

    def exec(self, code, timeout=20):
        r = self.d.post(f"/v1/sessions/{self.id}/execute",
                        json={"code": code, "timeout_s": timeout}, timeout=timeout + 60)
        assert r.status_code == 200, self.d.why(r)
        return r.json()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.d.delete_session(self.id)


def codemode_session(code_tools=("*",), **body):
    return CodeModeSession(code_tools, **body)


def mcp_fixture_calls():
    """The tools/call lines the daemon's MCP fixture received so far."""
    try:
        lines = MCP_FIXTURE_LOG.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [ln for ln in lines if ln.startswith("tools/call")]


def serves_others(d):
    """Asserts that the daemon is healthy and that a new session, of its own, still runs code
    and calls a tool."""
    r = d.get("/healthz", timeout=10)
    assert r.status_code == 200, d.why(r)
    r = d.post("/v1/sessions", json={"code_tools": ["echo"]}, timeout=60)
    assert r.status_code == 201, d.why(r)
    sid = r.json()["id"]
    try:
        res = d.execute(sid, "import airlock_tools\nprint(6 * 7)\nairlock_tools.echo('still here')",
                        timeout_s=20)
        assert res["status"] == "ok", res
        assert res["stdout"] == "42\n" and res["result"] == "'still here'", res
    finally:
        d.delete_session(sid)


def daemon_problems_after(offset, live_before):
    """What a test left in the daemon: sessions still live, sessions whose cgroups or
    processes remain, a dead or unhealthy daemon."""
    d = DAEMON
    problems = []
    if not d.alive():
        return [f"the daemon died (status {d.proc.returncode if d.proc else None})\n"
                f"{d.log_since(offset)[-3000:]}"]
    try:
        r = d.get("/healthz", timeout=10)
        if r.status_code != 200:
            problems.append(f"the daemon's /healthz answered {r.status_code}")
        live = {s["id"] for s in d.get("/v1/sessions", timeout=10).json()["sessions"]}
    except Exception as e:      # noqa: BLE001 - reported as the problem it is
        return [f"the daemon does not answer: {e!r}"]
    for sid in sorted(live - live_before):
        problems.append(f"a session the test made is still live in the daemon: {sid}")
    made = d.session_ids(d.log_since(offset)) - live
    names = {f"airlock-{i}" for i in made}
    problems += [p for p in d.wait_no_leftovers(timeout=5, names=names, pids={})]
    return problems


@pytest.fixture(scope="session", autouse=True)
def hostile_daemon():
    """Through the daemon: starts it before the first test, stops and checks it at the end."""
    if not VIA_DAEMON:
        yield None
        return
    d = daemon()
    yield d
    global DAEMON
    DAEMON = None
    rc, problems = d.stop()
    if problems:
        pytest.fail("the daemon did not stop cleanly:\n  " + "\n  ".join(problems),
                    pytrace=False)


# --------------------------------------------------------------------------------------------
# Host inspection
# --------------------------------------------------------------------------------------------


def in_sandbox_range(uid):
    return SANDBOX_UID_BASE <= uid < SANDBOX_UID_BASE + SANDBOX_UID_COUNT


def _proc_status(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def _proc_uids(st):
    try:
        return [int(x) for x in st["Uid"].split()]
    except (KeyError, ValueError):
        return []


def _is_live_airlock_cli(st):
    uids = _proc_uids(st)
    name = st.get("Name", "")
    return (name.startswith("airlock") and name != "airlock-runner"
            and not any(in_sandbox_range(u) for u in uids))


def orphan_sandbox_processes():
    """Processes whose uid lies in the sandbox range and that do not belong to a sandbox whose
    CLI is still alive (someone else's run in progress). Returns {pid: description}."""
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = _proc_status(d)
        if not st or not any(in_sandbox_range(u) for u in _proc_uids(st)):
            continue
        owned = False
        p = st.get("PPid", "0")
        for _ in range(64):
            if p in ("0", ""):
                break
            pst = _proc_status(p)
            if pst is None:
                break
            if _is_live_airlock_cli(pst):
                owned = True
                break
            p = pst.get("PPid", "0")
        if not owned:
            found[int(d)] = f"pid {d} {st.get('Name')} uid {st.get('Uid')} ppid {st.get('PPid')}"
    return found


def sandbox_range_key_users():
    """uids in the sandbox range that own kernel keys (/proc/key-users)."""
    out = []
    try:
        with open("/proc/key-users") as f:
            for line in f:
                uid = int(line.split(":")[0])
                if in_sandbox_range(uid):
                    out.append(line.strip())
    except OSError:
        pass
    return out


def airlock_cgroups(max_depth=8):
    """Every directory named airlock-run-* under /sys/fs/cgroup (bounded-depth walk), mapped to
    whether it belongs to a live airlock CLI."""
    found = {}
    root = "/sys/fs/cgroup"
    base_depth = root.count("/")
    for dirpath, dirnames, _ in os.walk(root, onerror=lambda e: None):
        depth = dirpath.count("/") - base_depth
        if depth >= max_depth:
            dirnames[:] = []
        for dn in dirnames:
            if dn.startswith("airlock-run-"):
                path = os.path.join(dirpath, dn)
                pid = dn[len("airlock-run-"):].split("-")[0]
                live = False
                if pid.isdigit():
                    st = _proc_status(pid)
                    live = bool(st) and _is_live_airlock_cli(st)
                found[path] = live
    return found


# /tmp and /dev/shm are shared with everything else running on this machine (other engineers'
# builds and tests, shells), so an unknown new entry is only reported as a note. A new entry
# fails the test when it can only have come from a sandbox or from airlock: owned by a
# sandbox-range uid (whatever an escaped process creates is), or named like a payload's file
# ("hostile"), or named "airlock*" (airlock's own staging; the process/none modes' work
# directories, airlock-work-*, are made only in modes this suite never uses).
def _suspicious_new_entry(directory, name):
    path = os.path.join(directory, name)
    try:
        owner = os.lstat(path).st_uid
    except FileNotFoundError:
        return None
    if in_sandbox_range(owner):
        return f"new entry in host {directory} owned by sandbox uid {owner}: {name}"
    if "hostile" in name and path != str(SESSION_DIR):
        return f"new entry in host {directory} named like a payload's: {name}"
    if name.startswith("airlock") and not name.startswith("airlock-work-") \
            and path != str(SESSION_DIR):
        return f"new entry in host {directory} left by airlock: {name}"
    return None


def _host_mounts():
    with open("/proc/self/mountinfo") as f:
        out = set()
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            out.add((parts[4], parts[sep + 1]))
        return out


def _hostnames():
    with open("/proc/sys/kernel/hostname") as f:
        h = f.read().strip()
    with open("/proc/sys/kernel/domainname") as f:
        dn = f.read().strip()
    return (socket.gethostname(), h, dn)


def _runner_candidates():
    b = pathlib.Path(AIRLOCK_BIN)
    cands = [b.parent.parent / "runner" / "airlock-runner",
             REPO / "build" / "src" / "runner" / "airlock-runner",
             REPO / "build" / "src" / "cli" / "airlock"]
    return [str(c) for c in cands]


def hashed_files():
    """path -> strict (True: any change fails) or False (a build tree shared with other
    engineers: a change is only an attack if the file was rewritten in place, same inode)."""
    files = {
        "/etc/passwd": True, "/etc/shadow": True, "/etc/hostname": True, "/etc/hosts": True,
        os.path.realpath("/usr/bin/python3.11"): True, "/usr/lib/python3.11/os.py": True,
        str(CANARY): True,
    }
    under_test = [AIRLOCK_BIN, _runner_candidates()[0]]
    for p in under_test:
        files[p] = AIRLOCK_BIN_FROM_ENV
    for p in _runner_candidates()[1:]:
        files.setdefault(p, False)
    return files


def _hash_state():
    out = {}
    for path in hashed_files():
        try:
            st = os.stat(path)
            out[path] = (sha256_file(path), st.st_ino)
        except FileNotFoundError:
            out[path] = None
    return out


class HostState:
    def __init__(self):
        self.hashes = _hash_state()
        self.hostnames = _hostnames()
        self.tmp = set(os.listdir("/tmp"))
        self.shm = set(os.listdir("/dev/shm"))
        self.mounts = _host_mounts()
        self.cgroups = airlock_cgroups()
        self.orphans = orphan_sandbox_processes()

    def problems_after(self):
        problems = []
        strictness = hashed_files()
        after = _hash_state()
        for path, before in self.hashes.items():
            now = after.get(path)
            if before == now:
                continue
            if strictness.get(path, True) or before is None or now is None:
                if before is None and now is not None and not strictness.get(path, True):
                    continue  # appeared by a concurrent build
                if before is not None and now is None and not strictness.get(path, True):
                    continue  # removed by a concurrent build
                problems.append(f"host file changed: {path}: {before} -> {now}")
            elif before[1] == now[1]:
                problems.append(f"host file rewritten in place (same inode): {path}")
        if _hostnames() != self.hostnames:
            problems.append(f"host hostname changed: {self.hostnames} -> {_hostnames()}")

        # Processes: the CLI has exited, so every sandbox process of ours must be gone. Allow
        # a short grace period for the kernel's teardown.
        deadline = time.monotonic() + 3
        while True:
            orphans = {p: d for p, d in orphan_sandbox_processes().items()
                       if p not in self.orphans}
            if not orphans or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for d in orphans.values():
            problems.append(f"sandbox process left on the host: {d}")
        if self.orphans:
            print(f"note: sandbox-range processes present before this test: {self.orphans}")

        deadline = time.monotonic() + 3
        while True:
            cgs = {p for p, live in airlock_cgroups().items()
                   if not live and p not in self.cgroups}
            if not cgs or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for p in sorted(cgs):
            problems.append(f"leftover cgroup: {p}")

        for directory, before in (("/tmp", self.tmp), ("/dev/shm", self.shm)):
            new = sorted(set(os.listdir(directory)) - before)
            for name in new:
                problem = _suspicious_new_entry(directory, name)
                if problem:
                    problems.append(problem)
            if new:
                print(f"note: new entries in host {directory} during the test: {new}")
        if not CANARY.exists():
            problems.append("canary file vanished")

        now_mounts = _host_mounts()
        for m in sorted(now_mounts - self.mounts):
            problems.append(f"new host mount: {m}")
        for m in sorted(self.mounts - now_mounts):
            problems.append(f"host mount vanished: {m}")
        return problems


@pytest.fixture(autouse=True)
def host_guard():
    before = HostState()
    daemon_state = None
    if VIA_DAEMON and DAEMON is not None:
        daemon_state = (DAEMON.log_size(),
                        {s["id"] for s in DAEMON.get("/v1/sessions").json()["sessions"]})
    yield
    problems = before.problems_after()
    if daemon_state is not None and DAEMON is not None:
        problems += daemon_problems_after(*daemon_state)
    if problems:
        pytest.fail("host not unchanged after the test:\n  " + "\n  ".join(problems),
                    pytrace=False)


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(name="run")
def run_fixture():
    return run


@pytest.fixture(name="run_py")
def run_py_fixture():
    return run_py


class Listener:
    """A socket the test itself opened on loopback; counts what reached it."""

    def __init__(self, family, kind, addr):
        self.sock = socket.socket(family, kind)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(addr)
        if kind == socket.SOCK_STREAM:
            self.sock.listen(16)
        self.sock.setblocking(False)
        self.kind = kind
        self.port = self.sock.getsockname()[1] if family != socket.AF_UNIX else None
        self.address = self.sock.getsockname()

    def contacts(self):
        """Connections accepted or datagrams received so far (drains them)."""
        n = 0
        while True:
            try:
                if self.kind == socket.SOCK_STREAM:
                    c, _ = self.sock.accept()
                    c.close()
                else:
                    self.sock.recvfrom(65536)
                n += 1
            except (BlockingIOError, InterruptedError):
                return n

    def close(self):
        self.sock.close()


@pytest.fixture
def tcp_listener():
    lst = Listener(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
    yield lst
    lst.close()


@pytest.fixture
def udp_listener():
    lst = Listener(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
    yield lst
    lst.close()


@pytest.fixture
def tcp6_listener():
    try:
        lst = Listener(socket.AF_INET6, socket.SOCK_STREAM, ("::1", 0))
    except OSError as e:
        pytest.skip(f"this host has no IPv6 loopback to listen on (::1): {e}")
    yield lst
    lst.close()


@pytest.fixture
def host_victims():
    """Innocent host processes (as root, as host uid 1000, as nobody) that must survive
    whatever the sandbox does with kill()."""
    procs = []
    for uid in (None, 1000, 65534):
        kw = {}
        if uid is not None:
            kw = {"user": uid, "group": uid if uid != 65534 else 65534}
        procs.append(subprocess.Popen(["/usr/bin/sleep", "120"], stdin=subprocess.DEVNULL,
                                      start_new_session=True, **kw))
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def pytest_unconfigure(config):
    shutil.rmtree(SESSION_DIR, ignore_errors=True)


def run_on_pty(code, *, language="python", json_mode=False, timeout=20, hard_timeout=60):
    """Runs the CLI with a pty we create as its controlling terminal and stdin/stdout/stderr
    (raw mode: bytes in = bytes out), as a user at a terminal would. Returns (rc, bytes the
    terminal received, bytes left unread in the terminal's input queue)."""
    import fcntl
    import pty
    import select
    import termios
    import tty

    if VIA_DAEMON:
        pytest.skip("CLI-only: runs the CLI on a terminal (pty/TIOCSTI); the daemon has none")
    require_binary()
    master, slave = pty.openpty()
    tty.setraw(slave)
    argv = airlock_argv(_code_file(code, language), language=language, timeout=timeout,
                        json_mode=json_mode)

    def make_ctty():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=cli_env(),
                         start_new_session=True, preexec_fn=make_ctty)
    output = bytearray()
    deadline = time.monotonic() + hard_timeout
    try:
        while True:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                output += os.read(master, 65536)
            elif p.poll() is not None:
                break
            if time.monotonic() > deadline:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                pytest.fail(f"airlock hung on a pty; output so far {bytes(output[-2000:])!r}")
        pending = bytearray(4)
        fcntl.ioctl(slave, termios.FIONREAD, pending)
        leftover = b""
        if int.from_bytes(pending, "little"):
            os.set_blocking(slave, False)
            leftover = os.read(slave, 4096)
    finally:
        os.close(master)
        os.close(slave)
    return p.returncode, bytes(output), leftover


# --------------------------------------------------------------------------------------------
# Egress (test_44_egress_sockets.py, test_45_egress_proxy.py): a daemon in the network lab
# --------------------------------------------------------------------------------------------

# The allow-list of the egress cases: names, an address, an IPv6 literal, a database port. The
# lab's hosts are described in tests/e2e/netlab.py; nothing outside the lab is ever contacted.
EGRESS_ALLOW = ["other.internal:80", "other.internal:443", "db.internal:5432",
                "10.77.0.40:80", "[fd00:77::10]:80"]


class EgressLab:
    """The lab, its daemon (its environment holds SECRET_ENV, its token is AIRLOCK_TOKEN's)
    and cells in fresh sessions of the profile "hostile-egress" (EGRESS_ALLOW)."""

    def __init__(self, netlab, lab, daemon):
        self.netlab = netlab
        self.lab = lab
        self.d = daemon

    def cell(self, body, profile="hostile-egress", timeout=60):
        """Runs body (with netlab.CELL_HELPERS; it fills R) in a new session, deleted
        afterwards; returns R."""
        sid = self.d.create_session(profile=profile)
        try:
            r, _ = self.netlab.cell(self.d, sid, body, timeout=timeout)
            print(f"payload result: {json.dumps(r, sort_keys=True)[:20000]}")
            return r
        finally:
            self.d.delete_session(sid)

    def quiet(self, *names):
        """Asserts that the lab's servers of these names (and the metadata servers) accepted
        no connection, and that the daemon still answers."""
        servers = self.lab.stats()["servers"]
        for name in set(names) | set(self.netlab.FORBIDDEN_SERVERS):
            assert servers[name]["connections"] == 0, (name, servers[name])
        r = self.d.get("/healthz", timeout=10)
        assert r.status_code == 200, self.d.why(r)


@pytest.fixture(scope="session")
def egress():
    if VIA_DAEMON:
        pytest.skip("the egress cases run once, under the default AIRLOCK_HOSTILE_VIA=cli: "
                    "they start their own daemon inside a network lab either way")
    require_binary()
    import sys
    e2e = str(REPO / "tests" / "e2e")
    if e2e not in sys.path:
        sys.path.insert(0, e2e)
    import netlab
    why = netlab.unavailable()
    if why:
        pytest.skip(why)
    lab = netlab.Lab(parent=SESSION_DIR)
    try:
        lab.start()
        profile = {"description": "hostile suite: egress through the proxy",
                   "languages": ["python", "bash"], "preload": [],
                   "network": {"mode": "allow", "allow": EGRESS_ALLOW}}
        env = cli_env({"AIRLOCK_PROFILES_DIR": str(lab.profiles_dir)})
        d = lab.daemon({"hostile-egress": profile}, args=["--pool-size", "1"], env=env,
                       token_env=SECRET_ENV["AIRLOCK_TOKEN"])
        yield EgressLab(netlab, lab, d)
    finally:
        problems = lab.stop()
    if problems:
        pytest.fail("the egress lab's daemon did not stop cleanly:\n  " + "\n  ".join(problems),
                    pytrace=False)
