"""A real `airlock serve` for end-to-end tests: started on a free loopback port with a fresh
state directory, talked to over HTTP with Debian's python3-requests, stopped with SIGTERM and
checked to leave nothing behind.

Used by tests/e2e/test_api_*.py (one daemon per module, see the `daemon` fixture) and by
tests/hostile/conftest.py when AIRLOCK_HOSTILE_VIA=daemon.

What "nothing behind" means here: the daemon exits 0 after SIGTERM; every process that was ever
seen as its descendant is gone; no cgroup directory of its sessions or zygotes remains
(airlock-s-<id> for every session id the daemon logged, airlock-* cgroups its descendants
were seen in), nor the daemon's own cgroup that holds them (airlock-d-<id>, named in its log,
see docs/SECURITY.md "Cgroups of other daemons"); the unix socket, if any, is removed. Other daemons may run on this machine at
the same time (other engineers' tests and benchmarks), so only what can be attributed to this
daemon is ever checked, and only processes this module started are ever signalled.
"""
import atexit
import http.client
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
AIRLOCK = os.environ.get("AIRLOCK_BIN") or str(ROOT / "build" / "src" / "cli" / "airlock")

LISTENING_RE = re.compile(r"airlock: listening on (?:http://(\S+):(\d+)|unix:(\S+))")
SESSION_ID_RE = re.compile(r"\bs-[0-9a-f]{24}\b")
CGROUP_SCOPE_RE = re.compile(r"sandbox cgroups go below '(airlock-d-[0-9a-f]{32})'")
CGROUP_ROOT = "/sys/fs/cgroup"


def free_port():
    """A port that was free a moment ago on 127.0.0.1 (bound to port 0, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------
# /proc and cgroup inspection (read-only)
# ------------------------------------------------------------------------------------------


def _stat(pid):
    """(ppid, starttime, comm) of pid, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    comm = s[s.index("(") + 1:s.rindex(")")]
    rest = s[s.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[19]), comm


def _proc_table():
    table = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(d)
            if st:
                table[int(d)] = st
    return table


def descendants(root_pid, table=None):
    """{pid: (starttime, comm)} of every live descendant of root_pid."""
    table = table if table is not None else _proc_table()
    children = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, list(children.get(root_pid, []))
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out[pid] = (table[pid][1], table[pid][2])
        todo.extend(children.get(pid, []))
    return out


def airlock_cgroup_names_of(pid):
    """Basenames starting with airlock- of the cgroups pid is in (any hierarchy)."""
    names = set()
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                path = line.rstrip("\n").split(":", 2)[-1]
                base = path.rsplit("/", 1)[-1]
                if base.startswith("airlock-"):
                    names.add(base)
    except OSError:
        pass
    return names


def cgroup_dirs_named(names, max_depth=8):
    """Every directory under /sys/fs/cgroup whose basename is in names."""
    if not names:
        return []
    found = []
    base_depth = CGROUP_ROOT.count("/")
    for dirpath, dirnames, _ in os.walk(CGROUP_ROOT, onerror=lambda e: None):
        if dirpath.count("/") - base_depth >= max_depth:
            dirnames[:] = []
        for dn in list(dirnames):
            if dn in names:
                found.append(os.path.join(dirpath, dn))
                dirnames.remove(dn)     # nothing of ours below a match to look for
    return sorted(found)


def cgroup_procs(path):
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


# ------------------------------------------------------------------------------------------
# The daemon
# ------------------------------------------------------------------------------------------


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


class DaemonStartError(RuntimeError):
    pass


_STARTED = []


@atexit.register
def _stop_forgotten_daemons():
    """A safety net: whatever happened to the tests, no daemon of ours outlives Python."""
    for d in _STARTED:
        if not d.stopped:
            try:
                d.stop(timeout=10)
            except Exception:       # noqa: BLE001 - best effort at exit
                pass


class Daemon:
    """One `airlock serve` process.

    token_env: None -> the daemon creates <state-dir>/token and we read it; a string -> passed
    as AIRLOCK_TOKEN in the daemon's environment (and used by the client).
    """

    def __init__(self, *, args=(), env=None, token_env=None, workdir=None, binary=None,
                 listen_port=None, listen=None):
        self.binary = binary or AIRLOCK
        self.args = list(args)
        if env is None:
            # The daemon must not inherit a token, an isolation mode or a profile directory
            # from the caller's environment by accident.
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
        self.base_env = dict(env)
        if token_env is not None:
            self.base_env["AIRLOCK_TOKEN"] = token_env
        self.token_env = token_env
        self.owns_workdir = workdir is None
        self.workdir = pathlib.Path(workdir or tempfile.mkdtemp(prefix="airlock-e2e-daemon-"))
        self.state_dir = self.workdir / "state"
        self.log_path = self.workdir / "daemon.log"
        self.listen_port = listen_port
        self.listen = listen            # e.g. "unix:/path" or "127.0.0.1:0"; default: a free port
        self.unix_path = None
        self.proc = None
        self.port = None
        self.url = None
        self.token = None
        self.http = None
        self.seen = {}              # pid -> (starttime, comm): every descendant ever sampled
        self.seen_cgroups = set()   # airlock-* cgroup basenames descendants were seen in
        self._lock = threading.Lock()
        self.stopped = False
        self.returncode = None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, ready_timeout=60, attempts=3, wait_zygote="default"):
        """Starts the daemon and waits for "listening on"; with wait_zygote, also for that
        profile's zygote to be ready (the daemon starts it in the background; the first
        requests would otherwise race with it, see test_api_daemon.py's zygote race test)."""
        if not os.access(self.binary, os.X_OK):
            raise DaemonStartError(f"airlock binary not found or not executable: "
                                   f"{self.binary} (ninja -C build, or set AIRLOCK_BIN)")
        last = None
        for _ in range(attempts):
            port = self.listen_port if self.listen_port is not None else free_port()
            try:
                self._start_once(port, ready_timeout)
                pool0 = any(a == "--pool-size" and b == "0"
                            for a, b in zip(self.args, self.args[1:]))
                if wait_zygote and not pool0:
                    self.wait_log(f'profile={wait_zygote} msg="zygote ready', ready_timeout)
                return self
            except DaemonStartError as e:
                last = e
                # Only a lost race for the port (someone took it after free_port()) is worth
                # another try; the daemon has exited then.
                if not getattr(e, "port_taken", False) or self.listen_port is not None:
                    raise
        raise last

    def _start_once(self, port, ready_timeout):
        argv = [self.binary, "serve", "--listen", self.listen or f"127.0.0.1:{port}",
                "--state-dir", str(self.state_dir), *self.args]
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.base_env,
                                         start_new_session=True)
        finally:
            log.close()
        if self not in _STARTED:
            _STARTED.append(self)
        deadline = time.monotonic() + ready_timeout
        while True:
            text = self.log_text()
            m = LISTENING_RE.search(text)
            if m:
                if m.group(3):
                    self.unix_path = m.group(3)
                else:
                    self.port = int(m.group(2))
                break
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc = None
                e = DaemonStartError(f"airlock serve exited with {rc} before listening "
                                     f"(port {port}):\n{text[-3000:]}")
                e.port_taken = ("in use" in text or "another daemon is listening" in text)
                raise e
            if time.monotonic() > deadline:
                self._kill_everything()
                raise DaemonStartError(f"airlock serve did not print 'listening on' within "
                                       f"{ready_timeout}s:\n{text[-3000:]}")
            time.sleep(0.02)
        self.host = f"127.0.0.1:{self.port}" if self.port else "localhost"
        self.url = f"http://{self.host}" if self.port else None
        if self.token_env is not None:
            self.token = self.token_env
        else:
            self.token = (self.state_dir / "token").read_text().strip()
        self.http = self.client(self.token)
        self.sample()

    def wait_log(self, needle, timeout):
        deadline = time.monotonic() + timeout
        while needle not in self.log_text():
            if not self.alive():
                raise DaemonStartError(f"the daemon exited while we waited for {needle!r}:\n"
                                       + self.log_text()[-3000:])
            if time.monotonic() > deadline:
                raise DaemonStartError(f"{needle!r} not in the daemon's log after {timeout}s; "
                                       f"its threads wait in:\n{self._thread_stacks()}\n"
                                       + self.log_text()[-3000:])
            time.sleep(0.02)

    def client(self, token=None):
        """A requests.Session against this daemon (never a proxy, never another host)."""
        s = requests.Session()
        s.trust_env = False     # no HTTP(S)_PROXY, no .netrc: 127.0.0.1 only
        if token:
            s.headers["Authorization"] = f"Bearer {token}"
        return s

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(getattr(self, "log_offset", 0))
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_size(self):
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, offset):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def audit_lines(self, until=None, path=None, start_at=0, timeout=10):
        """The audit log's whole lines from byte start_at on, parsed (a line that does not
        parse fails the test). The daemon's writer thread writes a line within 10 ms of its
        event, not before the call that caused it answers (docs/AUDIT.md): with until (a
        function of the lines) this reads again until it holds, and fails after timeout
        seconds showing the last lines it saw."""
        path = pathlib.Path(path or self.state_dir / "audit.log")
        deadline = time.monotonic() + timeout
        while True:
            with open(path, "rb") as f:
                f.seek(start_at)
                data = f.read()
            # A batch being written may show only its beginning: up to its last whole line.
            data = data[:data.rfind(b"\n") + 1]
            lines = [json.loads(ln) for ln in data.decode().splitlines()]
            if until is None or until(lines):
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the audit log {path} did not get the lines expected within {timeout} s; "
                    "its last lines:\n" + "\n".join(json.dumps(e) for e in lines[-8:]))
            time.sleep(0.01)

    def session_ids(self, text=None):
        """Every session id this daemon logged (created or ended)."""
        return set(SESSION_ID_RE.findall(self.log_text() if text is None else text))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def sample(self):
        """Records the daemon's current descendants and their airlock-* cgroups."""
        if not self.alive():
            return {}
        desc = descendants(self.proc.pid)
        with self._lock:
            for pid, v in desc.items():
                self.seen[pid] = v
                self.seen_cgroups |= airlock_cgroup_names_of(pid)
        return desc

    def vm_kib(self, field):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except (OSError, ValueError, AttributeError):
            pass
        return 0

    def reset_peak_rss(self):
        """Resets the daemon's VmHWM (our own child; /proc/PID/clear_refs '5')."""
        try:
            with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
                f.write("5")
        except (OSError, AttributeError):
            pass

    def known_cgroup_names(self):
        return ({f"airlock-{i}" for i in self.session_ids()} | set(self.seen_cgroups))

    def cgroup_scope(self):
        """The name of the cgroup below which this daemon makes its sandboxes' (one per
        hierarchy; shared with the daemons before and after it on the same state directory),
        or None if it did not say."""
        m = CGROUP_SCOPE_RE.search(self.log_text())
        return m.group(1) if m else None

    def leftovers(self, names=None, pids=None):
        """Processes and cgroups attributable to this daemon that still exist."""
        problems = []
        names = self.known_cgroup_names() if names is None else names
        pids = dict(self.seen) if pids is None else pids
        table = _proc_table()
        for pid, (start, comm) in sorted(pids.items()):
            now = table.get(pid)
            if now and now[1] == start:
                problems.append(f"process left behind: pid {pid} ({comm})")
        for pid in table:
            if pid not in pids and airlock_cgroup_names_of(pid) & names:
                problems.append(f"process left behind in a cgroup of the daemon: pid {pid} "
                                f"({table[pid][2]}) in {airlock_cgroup_names_of(pid) & names}")
        for d in cgroup_dirs_named(names):
            problems.append(f"cgroup left behind: {d} (procs {cgroup_procs(d)})")
        return problems

    def wait_no_leftovers(self, timeout=5.0, names=None, pids=None):
        deadline = time.monotonic() + timeout
        while True:
            problems = self.leftovers(names, pids)
            if not problems or time.monotonic() > deadline:
                return problems
            time.sleep(0.1)

    def stop(self, timeout=30):
        """SIGTERM, wait, check. Returns (returncode, problems). Always cleans up: a daemon
        that does not stop is SIGKILLed with everything it started (by pid), and empty
        cgroups it left are removed, after being reported."""
        problems = []
        if self.stopped:
            return self.returncode, problems
        self.stopped = True
        if self.proc is None:
            self._cleanup_dir()
            return None, problems
        if self.http is not None:
            self.http.close()
        self.sample()
        rc = self.proc.poll()
        if rc is not None:
            problems.append(f"the daemon had already exited with status {rc} before SIGTERM")
        else:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                stacks = self._thread_stacks()
                problems.append(f"the daemon did not exit within {timeout}s of SIGTERM; "
                                f"its threads were waiting in:\n{stacks}")
                self._kill_everything()
                rc = self.proc.wait()
        self.returncode = rc
        if rc != 0:
            problems.append(f"the daemon exited with status {rc} after SIGTERM (expected 0)")
        if self.unix_path and os.path.lexists(self.unix_path):
            problems.append(f"the unix socket {self.unix_path} was not removed")
        problems += self.wait_no_leftovers()
        scope = self.cgroup_scope()
        if rc == 0 and scope and not problems:
            left = self.wait_no_leftovers(names={scope}, pids={})
            problems += [f"the daemon's own {p}" for p in left]
        if problems:
            problems.append("daemon log (tail):\n" + self.log_text()[-4000:])
            self._kill_everything()
            self._remove_empty_cgroups()
        self._cleanup_dir()
        return rc, problems

    def _thread_stacks(self):
        out = []
        try:
            for tid in sorted(os.listdir(f"/proc/{self.proc.pid}/task"), key=int):
                try:
                    with open(f"/proc/{self.proc.pid}/task/{tid}/stack") as f:
                        top = [ln.split()[-1] for ln in f.read().splitlines()[:3]]
                    out.append(f"  tid {tid}: {' <- '.join(top)}")
                except OSError:
                    pass
        except OSError:
            pass
        return "\n".join(out)

    def _kill_everything(self):
        """SIGKILL the daemon and every descendant ever seen (each by pid, checked against its
        start time so a recycled pid is never hit)."""
        self.sample()
        targets = dict(self.seen)
        if self.proc is not None and self.proc.poll() is None:
            st = _stat(self.proc.pid)
            if st:
                targets[self.proc.pid] = (st[1], st[2])
        for pid, (start, _) in targets.items():
            st = _stat(pid)
            if st and st[1] == start:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def _remove_empty_cgroups(self):
        # The sandboxes' cgroups first, then the daemon's own that held them (a separate walk:
        # cgroup_dirs_named() does not look below a match).
        scope = {self.cgroup_scope()} - {None}
        for names in (self.known_cgroup_names(), scope):
            for d in sorted(cgroup_dirs_named(names), key=len, reverse=True):
                # The cpu cgroup a daemon's own threads moved into on cgroup v1, beside its
                # scope (docs/PERFORMANCE.md, "Fairness under load"), empty once it is gone.
                if names is scope:
                    try:
                        os.rmdir(d + ".daemon")
                    except OSError:
                        pass
                try:
                    os.rmdir(d)
                except OSError:
                    pass

    def _cleanup_dir(self):
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- HTTP helpers -------------------------------------------------------------------

    def req(self, method, path, *, timeout=60, **kw):
        return self.http.request(method, self.url + path, timeout=timeout, **kw)

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def post(self, path, **kw):
        return self.req("POST", path, **kw)

    def put(self, path, **kw):
        return self.req("PUT", path, **kw)

    def delete(self, path, **kw):
        return self.req("DELETE", path, **kw)

    def raw(self, method, target, *, headers=None, body=None, auth=True, host=True,
            timeout=30):
        """A request with the target sent byte-exact (no URL normalisation), via http.client.
        Returns (status, headers dict, body bytes)."""
        if self.unix_path:
            conn = UnixHTTPConnection(self.unix_path, timeout=timeout)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            hdrs = {}
            if host:
                hdrs["Host"] = self.host
            if auth:
                hdrs["Authorization"] = f"Bearer {self.token}"
            hdrs.update(headers or {})
            if body is not None:
                hdrs.setdefault("Content-Length", str(len(body)))
            for k, v in hdrs.items():
                if v is not None:
                    conn.putheader(k, v)
            conn.endheaders(body)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def why(self, r, lines=25):
        """A failed answer with the end of the daemon's log, for assertion messages."""
        tail = "\n".join(self.log_text().splitlines()[-lines:])
        return f"HTTP {r.status_code} {r.text[:3000]}\n--- daemon log (tail) ---\n{tail}"

    def create_session(self, **body):
        r = self.post("/v1/sessions", json=body)
        assert r.status_code == 201, "create session: " + self.why(r)
        return r.json()["id"]

    def delete_session(self, sid):
        """Deletes a session; 404 (already ended) is fine."""
        if not self.alive():
            return
        try:
            r = self.delete(f"/v1/sessions/{sid}", timeout=30)
            assert r.status_code in (200, 404), f"delete {sid}: {r.status_code} {r.text}"
        except requests.RequestException:
            pass

    def execute(self, sid, code, *, http_timeout=120, **fields):
        """Runs code in session sid; returns the execution object (asserting HTTP 200).
        fields are the request's other fields (language, timeout_s, timeout)."""
        r = self.post(f"/v1/sessions/{sid}/execute", json={"code": code, **fields},
                      timeout=http_timeout)
        assert r.status_code == 200, "execute: " + self.why(r)
        return r.json()


class SessionScope:
    """Creates sessions for one test and deletes them all afterwards, whatever happened."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.ids = []

    def new(self, **body):
        sid = self.daemon.create_session(**body)
        self.ids.append(sid)
        return sid

    def close(self):
        for sid in self.ids:
            self.daemon.delete_session(sid)


def start_daemon_or_fail(pytest, **kw):
    if os.geteuid() != 0:
        pytest.skip("airlock's namespaces isolation needs root")
    d = Daemon(**kw)
    try:
        d.start()
    except DaemonStartError as e:
        _, problems = d.stop(timeout=10)
        pytest.fail(f"cannot start the daemon: {e}\n" + "\n".join(problems), pytrace=False)
    return d


def daemon_fixture(pytest, args=("--pool-size", "1"), **kw):
    """A module-scoped fixture: one daemon per test module, stopped with SIGTERM at the end,
    its exit status and leftovers checked. kw goes to Daemon (env=...)."""

    @pytest.fixture(scope="module")
    def daemon():
        yield from _daemon_for_module(pytest, args, kw)

    return daemon


def _daemon_for_module(pytest, args, kw):
    d = start_daemon_or_fail(pytest, args=args, **kw)
    try:
        yield d
    finally:
        rc, problems = d.stop()
    if problems:
        pytest.fail("the daemon did not stop cleanly:\n  " + "\n  ".join(problems),
                    pytrace=False)


def profiles_daemon_fixture(pytest, prefix, profiles, args=("--pool-size", "1")):
    """daemon_fixture's daemon with profiles of the module's own (name -> profile object) in a
    private AIRLOCK_PROFILES_DIR beside the shipped ones, removed with the daemon."""

    @pytest.fixture(scope="module")
    def daemon():
        profiles_dir = tempfile.mkdtemp(prefix=prefix)
        try:
            for name, doc in profiles.items():
                with open(os.path.join(profiles_dir, f"{name}.json"), "w") as f:
                    json.dump(doc, f)
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
            env["AIRLOCK_PROFILES_DIR"] = profiles_dir
            yield from _daemon_for_module(pytest, args, {"env": env})
        finally:
            shutil.rmtree(profiles_dir, ignore_errors=True)

    return daemon


def sessions_fixture(pytest):
    @pytest.fixture
    def sessions(daemon):
        scope = SessionScope(daemon)
        try:
            yield scope
        finally:
            scope.close()

    return sessions


def ndjson_events(response):
    """(arrival time, event) for each line of a streaming answer."""
    for line in response.iter_lines(chunk_size=1):
        if line:
            yield time.monotonic(), json.loads(line)


# ------------------------------------------------------------------------------------------
# Crashes and restarts (tests/e2e/test_lifecycle.py)
# ------------------------------------------------------------------------------------------


def cmdline(pid):
    """The command line of pid as one string (arguments joined by spaces), or ""."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def host_mounts():
    """{(mount point, source)} of this process's mount namespace (the host's)."""
    out = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            out.add((parts[4], parts[sep + 2] if len(parts) > sep + 2 else ""))
    return out


class CrashRecord:
    """What a daemon killed with SIGKILL had made, for the check after a restart: every
    descendant ever seen (pid -> (starttime, comm)), those among them that were runners
    (cmdline contains airlock-runner) at the kill, and the airlock-* cgroup names it used."""

    def __init__(self, pids, runners, names):
        self.pids = pids
        self.runners = runners
        self.names = names

    def runners_alive(self):
        """Runners of the crashed daemon still running (same pid AND start time)."""
        table = _proc_table()
        return {pid: cmd for pid, (start, cmd) in self.runners.items()
                if pid in table and table[pid][1] == start}


_CRASHED = []


def crash_daemon(d):
    """kill -9 of the daemon process alone, as a crash would: its zygotes and sandboxes are
    left to themselves (the next daemon on the state directory must clean them up). Returns a
    CrashRecord. The daemon counts as stopped afterwards; reap_crashed(d) removes whatever
    of it is left, for the cleanup of a test."""
    assert d.alive(), "crash_daemon: the daemon is not running"
    desc = d.sample()
    runners = {}
    for pid, (start, _) in desc.items():
        cmd = cmdline(pid)
        if "airlock-runner" in cmd:
            runners[pid] = (start, cmd)
    names = d.known_cgroup_names()
    pids = dict(d.seen)
    os.kill(d.proc.pid, signal.SIGKILL)
    try:
        d.proc.wait(30)
    except subprocess.TimeoutExpired:
        pass
    d.stopped = True
    d.returncode = d.proc.returncode
    if d.http is not None:
        d.http.close()
    if d not in _CRASHED:
        _CRASHED.append(d)
    return CrashRecord(pids, runners, names)


def reap_crashed(d):
    """After crash_daemon(d) (and once no other daemon uses d's cgroup names): SIGKILL what is
    left of it (each pid checked against its start time) and remove its empty cgroups."""
    d._kill_everything()
    d._remove_empty_cgroups()
    if d in _CRASHED:
        _CRASHED.remove(d)


@atexit.register
def _reap_crashed_daemons():
    for d in list(_CRASHED):
        try:
            reap_crashed(d)
        except Exception:       # noqa: BLE001 - best effort at exit
            pass


def restart_daemon(pytest, old, **kw):
    """A new daemon on old's working (and state) directory, with old's flags, binary,
    environment and token unless given. old must have been given its workdir (so that
    stopping it did not remove the directory)."""
    assert not old.owns_workdir, "restart_daemon: give the first daemon a workdir of its own"
    kw.setdefault("args", old.args)
    kw.setdefault("binary", old.binary)
    kw.setdefault("env", old.base_env)
    kw.setdefault("token_env", old.token_env)
    return start_daemon_or_fail(pytest, workdir=old.workdir, **kw)
