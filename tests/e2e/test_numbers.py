"""Every float the daemon writes is the shortest text that reads back as the same double, as
Python's repr writes it (issue 28, item 5): `"wall_ms": 0.714752`, not jansson's
`0.71475200000000005`. Checked on the raw bytes of the native execute answer (session and
one-shot), the ndjson stream, MCP's tools/call, /metrics and `airlock run --json` (docs/API.md)."""
import json
import re

import pytest

from airlock_daemon import daemon_fixture, sessions_fixture

daemon = daemon_fixture(pytest, args=("--pool-size", "1"))
sessions = sessions_fixture(pytest)

CELL = "sum(range(1000))"

def significant(text):
    """The significant digits and the decimal exponent of the first one, of a number's text in
    any layout ("0.000123", "1.23e-4" and Python's "0.000123" are the same)."""
    mant, _, exp = text.lstrip("-").lower().partition("e")
    whole, _, frac = mant.partition(".")
    digits = (whole + frac).lstrip("0")
    lead = len(whole.lstrip("0")) if whole.lstrip("0") else -(len(frac) - len(frac.lstrip("0")))
    return digits.rstrip("0") or "0", (int(exp) if exp else 0) + lead


def assert_shortest(token, where):
    """token reads back as a float whose repr has the same digits: no shorter text would do."""
    value = float(token)
    assert significant(token) == significant(repr(value)), \
        f"{where}: {token} is not the shortest form of {value!r}"


def reals(raw, where):
    """The text of every JSON real in raw (bytes of one JSON document), each checked: a real
    keeps a '.' or an exponent (it still parses as a float) and is the shortest form."""
    found = []

    def keep(token):
        assert "." in token or "e" in token.lower(), f"{where}: {token} reads as an integer"
        assert_shortest(token, where)
        found.append(token)
        return float(token)

    doc = json.loads(raw.decode(), parse_float=keep)
    return doc, found


def check_execution(doc, found, where):
    usage = doc["usage"]
    assert isinstance(usage["wall_ms"], float) and isinstance(usage["cpu_ms"], float), usage
    assert len(found) >= 2, f"{where}: no reals in {found}"


def test_session_execute_answer_has_shortest_floats(daemon, sessions):
    sid = sessions.new()
    for _ in range(3):  # several wall times, several chances of a long %.17g
        r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": CELL}, timeout=120)
        assert r.status_code == 200, daemon.why(r)
        doc, found = reals(r.content, "execute")
        check_execution(doc, found, "execute")
        assert doc["result"] == "499500", doc
    # The session's own object (its CPU time so far) is written the same way.
    r = daemon.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200, daemon.why(r)
    reals(r.content, "session")


def test_one_shot_execute_answer_has_shortest_floats(daemon):
    r = daemon.post("/execute", json={"code": "x = 1.5\nx * 3"}, timeout=120)
    assert r.status_code == 200, daemon.why(r)
    doc, found = reals(r.content, "/execute")
    check_execution(doc, found, "/execute")
    assert re.search(rb'"wall_ms":[0-9.e-]+', r.content), r.content


def test_ndjson_stream_has_shortest_floats(daemon, sessions):
    sid = sessions.new()
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": CELL},
                    headers={"Accept": "application/x-ndjson"}, timeout=120)
    assert r.status_code == 200, daemon.why(r)
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    lines = [line for line in r.content.split(b"\n") if line]
    all_found = []
    for line in lines:
        event, found = reals(line, "ndjson")
        all_found += found
    assert event["type"] == "end", lines[-1]
    check_execution(event["result"], all_found, "ndjson")


def _mcp(d, msg, sid=None):
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    if sid:
        headers["Mcp-Session-Id"] = sid
    return d.post("/mcp", data=json.dumps(msg), headers=headers, timeout=120)


def test_mcp_tools_call_has_shortest_floats(daemon):
    d = daemon
    r = _mcp(d, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "airlock-e2e-numbers", "version": "1"}}})
    assert r.status_code == 200, d.why(r)
    sid = r.headers["Mcp-Session-Id"]
    try:
        r = _mcp(d, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        assert r.status_code in (200, 202), d.why(r)
        r = _mcp(d, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "run_python", "arguments": {"code": CELL}}}, sid)
        assert r.status_code == 200, d.why(r)
        doc, found = reals(r.content, "mcp")
        execution = doc["result"]["structuredContent"]
        check_execution(execution, found, "mcp")
    finally:
        d.delete("/mcp", headers={"Mcp-Session-Id": sid}, timeout=30)


def test_metrics_values_are_shortest(daemon):
    # An execution first, so that the durations and CPU seconds are not all zero.
    r = daemon.post("/execute", json={"code": "sum(range(100000))"}, timeout=120)
    assert r.status_code == 200, daemon.why(r)
    token = (daemon.state_dir / "metrics-token").read_text().strip()
    r = daemon.client(token).get(daemon.url + "/metrics", timeout=30)
    assert r.status_code == 200, r.text
    fractional = 0
    for line in r.text.splitlines():
        if not line or line.startswith("#"):
            continue
        value = line.rsplit(" ", 1)[1]
        if value in ("+Inf", "-Inf", "NaN"):
            continue
        if re.fullmatch(r"-?[0-9]+", value):  # an integral value, written as one
            continue
        assert_shortest(value, line)
        fractional += 1
    assert fractional > 0, r.text


def test_cli_json_output_has_shortest_floats(run):
    """`airlock run --json` reads the execution object and writes it again: the same form."""
    r = run("sum(range(1000))")
    assert r.returncode == 0, r.stderr
    doc, found = reals(r.stdout.encode(), "airlock run --json")
    check_execution(doc, found, "airlock run --json")
