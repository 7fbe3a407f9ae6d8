"""GET /v1/executions (the ring of recent executions, docs/API.md) and
GET /v1/sessions?usage=live against a real daemon: what the ring keeps and cuts, newest first,
every bad query refused with a message naming it, the token required, its bound and
--recent-executions 0; the live usage read from the cgroup; the zygote's generation in
/v1/profiles."""
import re

import pytest

from airlock_daemon import daemon_fixture, sessions_fixture, start_daemon_or_fail

daemon = daemon_fixture(pytest)
sessions = sessions_fixture(pytest)

ENTRY_KEYS = {"seq", "finished_at", "session_id", "profile", "language", "one_shot", "status",
              "wall_ms", "cpu_ms", "peak_memory_bytes", "execution_count", "code", "code_bytes",
              "code_truncated", "stdout", "stdout_truncated", "stderr", "stderr_truncated",
              "error", "files"}


def executions(daemon, query=""):
    r = daemon.get("/v1/executions" + query)
    assert r.status_code == 200, daemon.why(r)
    return r.json()["executions"]

def test_the_ring_records_session_and_one_shot_executions_newest_first(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "print('first')")
    daemon.execute(sid, "1/0")
    daemon.execute(sid, "echo from-bash >&2; echo x > out.txt", language="bash")
    r = daemon.post("/execute", json={"code": "print(2 + 2)"})
    assert r.status_code == 200, daemon.why(r)

    xs = executions(daemon, "?limit=4")
    assert len(xs) == 4
    assert set(xs[0]) == ENTRY_KEYS
    assert [x["seq"] for x in xs] == sorted((x["seq"] for x in xs), reverse=True)
    once, bash, err, first = xs
    assert once["one_shot"] is True and once["stdout"] == "4\n" and once["status"] == "ok"
    assert bash["session_id"] == sid and bash["language"] == "bash"
    assert bash["stderr"] == "from-bash\n" and bash["files"] == "out.txt"
    assert err["status"] == "error" and err["error"].startswith("ZeroDivisionError: ")
    assert first["code"] == "print('first')" and first["stdout"] == "first\n"
    assert first["profile"] == "default" and first["execution_count"] == 1
    assert first["wall_ms"] > 0 and not first["code_truncated"]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", first["finished_at"])

    only = executions(daemon, f"?session_id={sid}&limit=100")
    assert {x["session_id"] for x in only} == {sid} and len(only) == 3


def test_code_and_output_are_cut_between_characters(daemon, sessions):
    sid = sessions.new()
    code = "x = '" + "é" * 2000 + "'\nprint(x)"
    daemon.execute(sid, code)
    x = executions(daemon, f"?session_id={sid}&limit=1")[0]
    assert x["code_truncated"] and x["code_bytes"] == len(code.encode())
    assert len(x["code"].encode()) <= 1024 and x["code"].startswith("x = 'éé")
    assert "\ufffd" not in x["code"] and "\ufffd" not in x["stdout"]
    assert x["stdout_truncated"] and len(x["stdout"].encode()) <= 256


@pytest.mark.parametrize("query, field, words", [
    ("?limit=0", "limit", "from 1 to 10000"),
    ("?limit=10001", "limit", "from 1 to 10000"),
    ("?limit=abc", "limit", "'abc'"),
    ("?limit=-1", "limit", "integer"),
    ("?limit=", "limit", "integer"),
    ("?limit=1&limit=2", "limit", "once"),
    ("?session_id=nope", "session_id", "session id"),
    ("?limt=5", None, "unknown query parameter 'limt'"),
])
def test_bad_queries_are_refused_naming_the_parameter(daemon, query, field, words):
    r = daemon.get("/v1/executions" + query)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body.get("field") == field and words in body["error"], body


def test_executions_and_live_usage_need_the_token(daemon):
    for path in ("/v1/executions", "/v1/sessions?usage=live"):
        status, _, _ = daemon.raw("GET", path, auth=False)
        assert status == 401, path


def test_sessions_usage_live_reads_the_cgroup(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "x = bytearray(16 << 20)")
    r = daemon.get("/v1/sessions?usage=live")
    assert r.status_code == 200, daemon.why(r)
    mine = [s for s in r.json()["sessions"] if s["id"] == sid][0]
    assert mine["usage"]["memory_current_bytes"] >= 16 << 20, mine["usage"]
    assert mine["usage"]["cpu_total_ms"] > 0, mine["usage"]
    plain = [s for s in daemon.get("/v1/sessions").json()["sessions"] if s["id"] == sid][0]
    assert "memory_current_bytes" not in plain["usage"]
    r = daemon.get("/v1/sessions?usage=now")
    assert r.status_code == 400 and r.json()["field"] == "usage", r.text


def test_profiles_say_each_zygotes_generation(daemon):
    profiles = {p["name"]: p for p in daemon.get("/v1/profiles").json()["profiles"]}
    assert profiles["default"]["pool"]["zygote_generation"] >= 1


def test_the_ring_is_bounded_and_can_be_turned_off(sessions):
    small = start_daemon_or_fail(pytest, args=("--pool-size", "0", "--recent-executions", "3"))
    off = None
    try:
        for i in range(5):
            r = small.post("/execute", json={"code": f"print({i})"})
            assert r.status_code == 200, small.why(r)
        xs = executions(small, "?limit=100")
        assert [x["stdout"] for x in xs] == ["4\n", "3\n", "2\n"]
        assert xs[0]["seq"] == 5
        off = start_daemon_or_fail(pytest, args=("--pool-size", "0", "--recent-executions", "0"))
        assert off.post("/execute", json={"code": "print(1)"}).status_code == 200
        assert executions(off) == []
    finally:
        problems = small.stop()[1] + (off.stop()[1] if off else [])
    assert not problems, problems
