"""DELETE /mcp while a POST of the same MCP session runs a JSON-RPC batch (issue 12, item 5):
the delete ends the sandbox session at once, the call that ran and every item not yet run are
answered with a JSON-RPC error that says the MCP session was deleted, and the POST returns
promptly instead of running the rest. A batch is also bounded in size (docs/API.md, MCP)."""
import json
import threading
import time

import pytest

from airlock_daemon import daemon_fixture

daemon = daemon_fixture(pytest)

SLOW_S = 2.0
N = 4  # the batch would take N * SLOW_S = 8 s


def _post(d, msg, sid=None, timeout=120):
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    if sid:
        headers["Mcp-Session-Id"] = sid
    return d.post("/mcp", data=json.dumps(msg), headers=headers, timeout=timeout)


def _initialize(d):
    """An MCP session in 2025-03-26, the last version with JSON-RPC batches."""
    r = _post(d, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                             "clientInfo": {"name": "airlock-e2e-mcp-delete", "version": "1"}}})
    assert r.status_code == 200, d.why(r)
    sid = r.headers["Mcp-Session-Id"]
    r = _post(d, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    assert r.status_code in (200, 202), d.why(r)
    return sid


def _sessions(d):
    return {s["id"]: s for s in d.get("/v1/sessions").json()["sessions"]}


def test_delete_during_a_batch_ends_it_at_once(daemon):
    d = daemon
    before = set(_sessions(d))
    mcp_sid = _initialize(d)
    batch = [{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
              "params": {"name": "run_python",
                         "arguments": {"code": f"import time\ntime.sleep({SLOW_S})\n'done-{i}'"}}}
             for i in range(N)]
    box = {}

    def post_batch():
        t0 = time.monotonic()
        box["r"] = _post(d, batch, mcp_sid)
        box["end"] = time.monotonic()
        box["wall"] = box["end"] - t0

    t = threading.Thread(target=post_batch)
    t.start()
    sandbox_sid = None
    try:
        # The first call runs once the MCP session's sandbox session exists and is busy.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sandbox_sid is None:
            busy = [i for i, s in _sessions(d).items() if i not in before and s["state"] == "busy"]
            sandbox_sid = busy[0] if busy else None
            time.sleep(0.05)
        assert sandbox_sid, "the batch's first call never started"
        t_delete = time.monotonic()
        r = d.delete("/mcp", headers={"Mcp-Session-Id": mcp_sid}, timeout=30)
        assert r.status_code == 200, d.why(r)
        t.join(60)
        assert not t.is_alive(), "the POST of the batch did not return"
    finally:
        t.join(60)
        if sandbox_sid:
            d.delete_session(sandbox_sid)

    r = box["r"]
    assert r.status_code == 200, d.why(r)
    # Generous against the 8 s the batch would take, not a tight timing.
    assert box["end"] - t_delete < 3.0, \
        f"the POST went on for {box['end'] - t_delete:.1f} s after the DELETE"
    replies = r.json()
    assert [x["id"] for x in replies] == list(range(1, N + 1)), replies
    for i, x in enumerate(replies):
        assert "result" not in x and x["error"]["code"] == -32001, x
        assert "MCP session was deleted" in x["error"]["message"], x
    assert "while this request ran" in replies[0]["error"]["message"], replies[0]
    assert all("was not run" in x["error"]["message"] for x in replies[1:]), replies
    # The sandbox session is gone with its processes and cgroups, and the MCP session too.
    assert sandbox_sid not in _sessions(d)
    assert d.get(f"/v1/sessions/{sandbox_sid}").status_code == 404
    problems = d.wait_no_leftovers(timeout=10, names={f"airlock-{sandbox_sid}"}, pids={})
    assert not problems, problems
    r = _post(d, {"jsonrpc": "2.0", "id": 9, "method": "ping"}, mcp_sid)
    assert r.status_code == 404, d.why(r)


def test_batch_size_is_bounded(daemon):
    d = daemon
    sid = _initialize(d)
    try:
        ping = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(65)]
        r = _post(d, ping, sid)
        assert r.status_code == 200, d.why(r)
        body = r.json()
        assert isinstance(body, dict) and body["error"]["code"] == -32600, body
        assert "at most 64 messages" in body["error"]["message"], body
        r = _post(d, ping[:64], sid)
        assert r.status_code == 200 and len(r.json()) == 64, d.why(r)
    finally:
        d.delete("/mcp", headers={"Mcp-Session-Id": sid}, timeout=30)
