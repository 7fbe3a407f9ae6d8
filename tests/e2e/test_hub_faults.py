"""Internal tools when their servers misbehave (issue 9), against a real daemon: a server that
cannot be run, exits at once, hangs on initialize, exits after it, is killed, or crashes in the
middle of a call. Its tools are marked unavailable with the reason, calls fail at once saying
why, the other servers' tools keep working, and the server is started again with backoff. A
config that is not right keeps `airlock serve` from starting; stopping the daemon stops every
server it started, also one that ignores the end of its input and SIGTERM."""
import json
import math
import re
import signal
import subprocess
import time

import pytest

from airlock_daemon import AIRLOCK, free_port
from hub_helpers import (FIXTURE, alive, daemon_env, fixture, group_members, kill_by_pid,
                         run_cli, serve_hub, serve_mcp, start_hub_daemon, start_time, text_of,
                         write_config)
from mcp_client import PYTHON

NO_SUCH_COMMAND = "/nonexistent/airlock-hub-test-server"
# A loopback port nobody listens on (it was free a moment ago).
NOWHERE = f"http://127.0.0.1:{free_port()}/mcp"
HANG_STARTUP_MS = 300
# A failure that shows within this long of a kill or a crash (the reader's 0.5 s for the exit
# status, and the daemon under the sanitizers on a busy machine).
NOTICE_S = 10


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    work = tmp_path_factory.mktemp("hub-faults")
    config = write_config(work / "mcp.json", {
        "healthy": fixture(allowed_tools=["echo"]),
        "killme": fixture(allowed_tools=["echo", "pid"]),
        "crashy": fixture(allowed_tools=["crash", "pid"]),
        "bad": {"command": NO_SUCH_COMMAND},
        "dies": fixture("--die-on-start"),
        "hangs": fixture("--hang-initialize", startup_timeout_ms=HANG_STARTUP_MS),
        "exits": fixture("--exit-after-init"),
        "nowhere": {"url": NOWHERE},
    })
    yield from serve_hub(pytest, config, {
        "healthy": "ready", "killme": "ready", "crashy": "ready", "bad": "unavailable",
        "dies": "unavailable", "hangs": "unavailable", "exits": "unavailable",
        "nowhere": "unavailable"})


@pytest.fixture(scope="module")
def mcp(hub):
    yield from serve_mcp(hub)


def call(mcp, name, args=None):
    t0 = time.monotonic()
    r = mcp.call(name, args or {}, timeout=60)
    return r, time.monotonic() - t0


def healthy_echo_works(hub, mcp, text):
    r, _ = call(mcp, hub.name_of("healthy", "echo"), {"text": text})
    assert r["content"] == [{"type": "text", "text": text}], r


@pytest.mark.parametrize("server, reason", [
    ("bad", f"cannot run {NO_SUCH_COMMAND}: No such file or directory"),
    ("dies", "the server exited with status 3"),
    ("hangs", f"the server did not answer initialize within {HANG_STARTUP_MS / 1000:.1f} s"),
    ("exits", "the server exited with status 5"),
    ("nowhere", f"cannot reach {NOWHERE}: Couldn't connect to server"),
])
def test_server_that_does_not_start_is_unavailable_with_the_reason(hub, server, reason):
    s = hub.server(server)
    assert s["state"] == "unavailable" and s["tools"] == 0, s
    assert reason in s["reason"], s
    assert re.search(r"; retrying in \d+ s$", s["reason"]), s
    assert not hub.tools_of(server), "a server that never started lists no tools"
    assert hub.server("healthy")["state"] == "ready"


def test_killed_server_is_unavailable_then_comes_back(hub, mcp):
    before = hub.server("killme")
    old_pid, old_start = before["pid"], start_time(before["pid"])
    kill_by_pid(old_pid, signal.SIGKILL)
    down = hub.wait_state("killme", "unavailable", timeout=NOTICE_S)
    assert "the server was killed by signal 9" in down["reason"], down

    # Its tools stay listed, unavailable with the reason, also in what a model reads.
    listing = hub.listing()
    tools = hub.tools_of("killme", listing)
    assert set(tools) == {"echo", "pid"}
    assert all(t["available"] is False and "signal 9" in t["reason"] for t in tools.values())
    decl = {t["name"]: t for t in listing["tools"]}[tools["echo"]["name"]]
    assert decl["description"].startswith("[currently unavailable: the server was killed")

    r, took = call(mcp, tools["echo"]["name"], {"text": "anyone?"})
    assert r["isError"] is True and took < 1.0, (r, took)
    assert f"the tool '{tools['echo']['name']}' is unavailable: its server 'killme' is not " \
           "running (the server was killed by signal 9" in text_of(r), r
    healthy_echo_works(hub, mcp, "unaffected")

    up = hub.wait_state("killme", "ready", timeout=NOTICE_S + 5,
                        pred=lambda s: s.get("pid") != old_pid)
    assert up["restarts"] >= before["restarts"] + 1 and "reason" not in up
    assert not alive(old_pid, old_start)
    r, _ = call(mcp, hub.name_of("killme", "pid"))
    assert r["structuredContent"] == {"pid": up["pid"]}


def test_server_crashing_mid_call(hub, mcp):
    before = hub.server("crashy")
    r, took = call(mcp, hub.name_of("crashy", "crash"))
    assert r["isError"] is True and took < NOTICE_S, (r, took)
    assert text_of(r) == "the tool 'crash' failed: its server 'crashy' went away (the server " \
                         "exited with status 4)", r
    healthy_echo_works(hub, mcp, "still fine")
    up = hub.wait_state("crashy", "ready", timeout=NOTICE_S + 5,
                        pred=lambda s: s["restarts"] > before["restarts"])
    r, _ = call(mcp, hub.name_of("crashy", "pid"))
    assert r["structuredContent"] == {"pid": up["pid"]} != {"pid": before["pid"]}


def test_failing_servers_back_off(hub):
    """Restarted with a delay that doubles, not in a loop: after T seconds a server that never
    starts has been tried about log2(T) times, and says when the next try comes."""
    s = hub.wait_state("bad", "unavailable", timeout=15, pred=lambda s: s["restarts"] >= 2)
    uptime = time.monotonic() - hub.started
    assert s["restarts"] <= math.log2(uptime) + 2, (s, uptime)
    delay = int(re.search(r"retrying in (\d+) s", s["reason"]).group(1))
    assert delay in (2 ** s["restarts"], 2 ** (s["restarts"] - 1)), s
    # A server that hangs is stopped before the next try: never two of them at once.
    hangs = [pid for pid in hub.d.sample() if "--hang-initialize" in _cmdline(pid)]
    assert len(hangs) <= 1, hangs


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


# ---- the config ---------------------------------------------------------------------------

BAD_CONFIGS = [
    ("syntax", '{"mcpServers": {\n  "crm": {"command": "python3",}\n}}\n',
     ["line 2", "column"]),
    ("unknown member", {"mcpServers": {"crm": {"comand": "python3"}}},
     ["mcpServers.crm.comand: unknown member", "command, args, env, cwd"]),
    ("policy typo", {"mcpServers": {"crm": {"command": "python3", "allowed_tool": ["a"]}}},
     ["mcpServers.crm.allowed_tool: unknown member"]),
    ("top level", {"servers": {}}, ["servers: unknown member"]),
    ("wrong type", {"mcpServers": {"crm": {"command": "python3", "timeout_ms": "5s"}}},
     ["mcpServers.crm.timeout_ms: expected an integer"]),
    ("neither", {"mcpServers": {"crm": {"args": ["x"]}}},
     ["mcpServers.crm: give either \"command\""]),
    ("both", {"mcpServers": {"crm": {"command": "x", "url": "http://127.0.0.1:9/mcp"}}},
     ["mcpServers.crm: give either \"command\""]),
    ("bad url", {"mcpServers": {"crm": {"url": "ftp://127.0.0.1/mcp"}}},
     ["mcpServers.crm.url: expected an http:// or https:// URL"]),
    ("missing file", None, ["cannot read"]),
]


@pytest.mark.parametrize("content, needles", [c[1:] for c in BAD_CONFIGS],
                         ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_keeps_the_daemon_from_starting(tmp_path, content, needles):
    path = tmp_path / "mcp.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    p = subprocess.run([AIRLOCK, "serve", "--listen", "127.0.0.1:0", "--state-dir",
                        str(tmp_path / "state"), "--pool-size", "0", "--mcp-config", str(path)],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                       env=daemon_env())
    assert p.returncode == 2, p.stderr
    assert "listening on" not in p.stderr
    line = [ln for ln in p.stderr.splitlines() if "--mcp-config" in ln]
    assert line and f"{path}: " in line[0], p.stderr
    for needle in needles:
        assert needle in line[0], p.stderr
    # airlock tools refuses it the same way.
    t = run_cli("tools", "--mcp-config", str(path))
    assert t.returncode == 2 and all(n in t.stderr for n in needles), t.stderr


# ---- stopping -----------------------------------------------------------------------------

def test_stopping_the_daemon_stops_every_server(tmp_path):
    """Also a server that ignores the end of its input and SIGTERM (a shell that goes on to
    sleep, with SIGTERM ignored, and a grandchild): its whole process group is killed."""
    stubborn = f"trap '' TERM; {PYTHON} {FIXTURE}; sleep 600; :"
    config = write_config(tmp_path / "mcp.json", {
        "plain": fixture(allowed_tools=["echo"]),
        "stubborn": {"command": "/bin/sh", "args": ["-c", stubborn]},
    })
    h = start_hub_daemon(pytest, config)
    try:
        h.wait_states({"plain": "ready", "stubborn": "ready"}, timeout=30)
        servers = h.servers()
        groups = {name: servers[name]["pid"] for name in ("plain", "stubborn")}
        members = {pid: start_time(pid) for g in groups.values() for pid in group_members(g)}
        assert len(group_members(groups["stubborn"])) == 2, "the shell and the fixture"
        t0 = time.monotonic()
    finally:
        rc, problems = h.d.stop()
    took = time.monotonic() - t0
    assert rc == 0 and not problems, "\n".join(problems)
    assert took < 15, f"stopping took {took:.1f} s"
    for name, pgid in groups.items():
        assert group_members(pgid) == [], f"{name}: its process group outlived the daemon"
    assert not [pid for pid, st in members.items() if alive(pid, st)]


def test_stopping_kills_a_server_that_ignores_sigterm_within_seconds(tmp_path):
    """The grace periods are bounded: stdin closed, 1 s, SIGTERM, 2 s, SIGKILL."""
    stubborn = f"trap '' TERM; exec {PYTHON} -c 'import signal, time; " \
               f"signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'"
    config = write_config(tmp_path / "mcp.json", {
        "plain": fixture(allowed_tools=["echo"]),
        "deaf": {"command": "/bin/sh", "args": ["-c", stubborn], "startup_timeout_ms": 60000},
    })
    h = start_hub_daemon(pytest, config)
    try:
        h.wait_states({"plain": "ready"}, timeout=30)
        # deaf never answers initialize: it is "starting" and its process runs.
        deaf = [pid for pid in h.d.sample() if "time.sleep(600)" in _cmdline(pid)]
        assert len(deaf) == 1, deaf
        st = start_time(deaf[0])
        t0 = time.monotonic()
    finally:
        rc, problems = h.d.stop()
    assert rc == 0 and not problems, "\n".join(problems)
    assert time.monotonic() - t0 < 10
    assert not alive(deaf[0], st)


# ---- what an HTTP server sends ------------------------------------------------------------

def test_a_long_event_stream_line_costs_little_cpu(tmp_path):
    """An HTTP server that answers initialize with an event stream of one 16 MiB line (no
    newline): reading it must cost time in proportion to its size, not to its square (it took
    half a minute of CPU, and a GET stream that sends such lines is reconnected forever)."""
    import http.server
    import socketserver
    import threading

    size = 16 << 20

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(6 + size))
            self.end_headers()
            self.wfile.write(b"data: ")
            chunk = b"x" * 65536
            for _ in range(size // len(chunk)):
                self.wfile.write(chunk)

        def do_GET(self):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_DELETE = do_GET

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    srv = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": {"long": {
            "url": f"http://127.0.0.1:{srv.server_address[1]}/mcp"}}}))
        t0 = time.monotonic()
        p = subprocess.run([AIRLOCK, "tools", "--mcp-config", str(path)], capture_output=True,
                           text=True, timeout=120, env=daemon_env())
        took = time.monotonic() - t0
    finally:
        srv.shutdown()
        srv.server_close()
    assert p.returncode == 1 and "unavailable" in p.stdout, p.stdout + p.stderr
    assert took < 10, f"reading 16 MiB took {took:.1f} s"
