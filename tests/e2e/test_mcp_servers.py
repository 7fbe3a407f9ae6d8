"""The MCP servers the Glue is tested and shown with, on their own (no airlock): the example
CRM server (examples/internal-tools/crm_server.py) and the fault fixture
(tests/e2e/mcp_fixture.py), over stdio, streamable HTTP answering JSON, and (the fixture)
streamable HTTP answering event streams. Driven by tests/e2e/mcp_client.py."""
import base64
import contextlib
import datetime as dt
import hashlib
import http.client
import json
import os
import sqlite3
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from mcp_client import PYTHON, HttpClient, HttpServer, McpError, NoAnswer, StdioClient

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = str(ROOT / "tests" / "e2e" / "mcp_fixture.py")
CRM = str(ROOT / "examples" / "internal-tools" / "crm_server.py")
FIXTURE_TOOLS = ["echo", "add", "slow", "crash", "big", "fail", "rpc_error", "image",
                 "structured", "strict", "needs_env", "pid"]
INVALID_PARAMS = -32602


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("FIXTURE_SECRET", "CRM_DB")}
    env.update(extra)
    return env


@contextlib.contextmanager
def connect(transport, argv, env=None, initialize=True):
    """A client of argv over transport ("stdio", "http" or "sse"), initialized; .server_pid
    is the server's process. Everything started is stopped by pid on the way out."""
    if transport == "stdio":
        with StdioClient(argv, env) as client:
            client.server_pid = client.pid
            if initialize:
                client.initialize()
            yield client
        return
    extra = ["--sse"] if transport == "sse" else []
    with HttpServer(argv + extra, env) as server, HttpClient(server.url) as client:
        client.server_pid = server.pid
        client.server = server
        if initialize:
            client.initialize()
        yield client


def wait_exit(pid_owner, timeout=10):
    """The exit status of a server started by connect()."""
    proc = pid_owner.proc if hasattr(pid_owner, "proc") else pid_owner.server.proc
    return proc.wait(timeout)


def text(result):
    return "\n".join(c["text"] for c in result["content"] if c["type"] == "text")


# ---- the CRM example ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def crm_db(tmp_path_factory):
    return tmp_path_factory.mktemp("crm") / "crm.sqlite"


@pytest.fixture(params=["stdio", "http"])
def crm(request, crm_db):
    with connect(request.param, [PYTHON, CRM, "--db", str(crm_db)], _env()) as client:
        yield client


def sql(client, query, limit=None):
    args = {"query": query} if limit is None else {"query": query, "limit": limit}
    result = client.call("run_sql", args)
    assert result["isError"] is False, text(result)
    assert json.loads(text(result)) == result["structuredContent"]
    return result["structuredContent"]


def test_crm_lists_three_read_only_tools(crm):
    assert crm.init_result["serverInfo"]["name"] == "crm"
    assert "read-only" in crm.init_result["instructions"]
    tools = {t["name"]: t for t in crm.list_tools()}
    assert sorted(tools) == ["get_user_churn_metrics", "list_tables", "run_sql"]
    for tool in tools.values():
        assert tool["annotations"]["readOnlyHint"] is True
        assert tool["annotations"]["openWorldHint"] is False
        assert tool["outputSchema"]["type"] == "object"
        assert len(tool["description"]) > 60
    assert tools["get_user_churn_metrics"]["inputSchema"]["required"] == ["user_id"]
    assert tools["run_sql"]["inputSchema"]["properties"]["limit"]["default"] == 1000


def test_crm_churn_metrics_of_every_user(crm):
    users = sql(crm, "SELECT user_id, last_login FROM users ORDER BY user_id")["rows"]
    assert len(users) == 200
    metrics = {}
    for user_id, last_login in users:
        result = crm.call("get_user_churn_metrics", {"user_id": user_id})
        m = result["structuredContent"]
        assert json.loads(text(result)) == m
        assert m["user_id"] == user_id
        assert 0 <= m["churn_risk"] <= 1
        assert m["days_since_login"] == (dt.date(2025, 6, 30) -
                                         dt.date.fromisoformat(last_login)).days
        assert [s["month"] for s in m["sessions_by_month"]] == [
            f"2025-0{i}" for i in range(1, 7)]
        metrics[user_id] = m
    churning = [m for m in metrics.values() if m["churn_risk"] >= 0.6]
    healthy = [m for m in metrics.values() if m["churn_risk"] < 0.2]
    assert 10 <= len(churning) <= 60, "some users clearly churn, most do not"
    assert len(healthy) >= 100
    for m in churning:
        assert m["days_since_login"] > 30 and m["trend"] == "declining", m
        first, last = m["sessions_by_month"][0], m["sessions_by_month"][-1]
        assert last["sessions"] < first["sessions"], m
    # The numbers agree with the tables they come from.
    worst = max(churning, key=lambda m: (m["churn_risk"], m["user_id"]))
    uid = worst["user_id"]
    rows = sql(crm, f"SELECT sessions FROM monthly_sessions WHERE user_id = '{uid}' "
                    "ORDER BY month")["rows"]
    assert [r[0] for r in rows] == [s["sessions"] for s in worst["sessions_by_month"]]
    (count,) = sql(crm, f"SELECT count(*) FROM support_tickets WHERE user_id = '{uid}' "
                        "AND opened_on > '2025-04-01'")["rows"][0]
    assert count == worst["tickets_90d"]


def test_crm_unknown_user_is_a_tool_error(crm):
    result = crm.call("get_user_churn_metrics", {"user_id": "u999"})
    assert result["isError"] is True
    assert "unknown user_id 'u999'" in text(result)
    assert "structuredContent" not in result
    with pytest.raises(McpError) as err:
        crm.call("get_user_churn_metrics", {})
    assert err.value.code == INVALID_PARAMS


def test_crm_run_sql_rows_limit_and_truncation(crm):
    out = sql(crm, "SELECT plan, count(*) AS n FROM users GROUP BY plan ORDER BY plan")
    assert out["columns"] == ["plan", "n"]
    assert [r[0] for r in out["rows"]] == ["enterprise", "free", "pro", "starter"]
    assert sum(r[1] for r in out["rows"]) == 200
    assert out["row_count"] == 4 and out["truncated"] is False
    five = sql(crm, "SELECT * FROM users ORDER BY user_id", limit=5)
    assert five["row_count"] == 5 and five["truncated"] is True
    assert five["rows"][0][0] == "u001"
    assert sql(crm, "SELECT * FROM users")["row_count"] == 200
    odd = sql(crm, "SELECT x'00ff' AS b, 1e999 AS inf, NULL AS n")
    assert odd["rows"] == [["00ff", "inf", None]]
    for bad in ({"query": "SELECT 1", "limit": 0}, {"query": ""}, {"limit": 5},
                {"query": "SELECT 1", "limit": 10001}, {"query": "SELECT 1", "x": 1}):
        with pytest.raises(McpError) as err:
            crm.call("run_sql", bad)
        assert err.value.code == INVALID_PARAMS, bad


REFUSED_SQL = [
    "INSERT INTO users VALUES ('u999', 'x', 'x', 'free', '2025-01-01', '2025-01-01', 0)",
    "UPDATE users SET mrr = 0",
    "DELETE FROM users",
    "REPLACE INTO meta VALUES ('as_of', '1999-01-01')",
    "DROP TABLE users",
    "CREATE TABLE evil (x)",
    "CREATE TEMP TABLE evil (x)",
    "ALTER TABLE users ADD COLUMN evil",
    "ATTACH DATABASE '{tmp}/other.sqlite' AS other",
    "PRAGMA user_version = 7",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA query_only = OFF",
    "SELECT * FROM pragma_table_info('users')",
    "VACUUM",
    "VACUUM INTO '{tmp}/copy.sqlite'",
    "BEGIN IMMEDIATE",
    "SELECT load_extension('/tmp/evil.so')",
    "WITH x AS (SELECT 1) DELETE FROM users",
]


def test_crm_run_sql_refuses_writes(crm, crm_db, tmp_path):
    before = hashlib.sha256(crm_db.read_bytes()).hexdigest()
    for query in REFUSED_SQL:
        result = crm.call("run_sql", {"query": query.format(tmp=tmp_path)})
        assert result["isError"] is True, query
        assert "SQL error:" in text(result), query
        assert "not authorized" in text(result) or "authorization denied" in text(result), \
            (query, text(result))
        assert "read-only" in text(result), query
    assert hashlib.sha256(crm_db.read_bytes()).hexdigest() == before
    assert not list(tmp_path.iterdir()), "ATTACH / VACUUM INTO created no file"
    assert sql(crm, "SELECT count(*) FROM users")["rows"] == [[200]]


def test_crm_run_sql_reports_sqlite_errors(crm):
    for query, words in (("SELEC * FROM users", 'near "SELEC": syntax error'),
                         ("SELECT * FROM nope", "no such table: nope"),
                         ("SELECT 1; SELECT 2", "one statement at a time"),
                         ("SELECT * FROM users WHERE user_id = ?", "bindings")):
        result = crm.call("run_sql", {"query": query})
        assert result["isError"] is True, query
        assert words in text(result), (query, text(result))


def test_crm_list_tables(crm):
    out = crm.call("list_tables")["structuredContent"]
    tables = {t["name"]: t for t in out["tables"]}
    assert sorted(tables) == ["meta", "monthly_sessions", "support_tickets", "users"]
    assert tables["users"]["row_count"] == 200
    assert tables["monthly_sessions"]["row_count"] == 1200
    cols = {c["name"]: c for c in tables["users"]["columns"]}
    assert list(cols) == ["user_id", "name", "email", "plan", "signup_date", "last_login",
                          "mrr"]
    assert cols["user_id"]["primary_key"] is True
    assert "monthly recurring revenue" in cols["mrr"]["description"]


def test_crm_query_timeout(tmp_path, crm_db):
    argv = [PYTHON, CRM, "--db", str(crm_db), "--query-timeout", "0.3"]
    with connect("stdio", argv, _env()) as client:
        started = time.monotonic()
        result = client.call("run_sql", {"query": "SELECT count(*) FROM monthly_sessions a, "
                                                  "monthly_sessions b, monthly_sessions c"})
        assert time.monotonic() - started < 10
        assert result["isError"] is True
        assert "ran over 0.3 s and was stopped" in text(result)
    proc = subprocess.run([PYTHON, CRM, "--query-timeout", "0"], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2 and "seconds" in proc.stderr


def _dump(path):
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_crm_database_is_deterministic_and_placed_as_asked(tmp_path):
    a, b, c = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "c.sqlite"
    with connect("stdio", [PYTHON, CRM, "--db", str(a)], _env(CRM_DB=str(c))):
        pass
    with connect("stdio", [PYTHON, CRM], _env(CRM_DB=str(b))):
        pass
    assert a.exists() and b.exists() and not c.exists(), "--db first, then CRM_DB"
    assert _dump(a) == _dump(b)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    conn = sqlite3.connect(a)
    try:
        assert conn.execute("SELECT count(*) FROM users").fetchone() == (200,)
        assert conn.execute("SELECT value FROM meta WHERE key = 'seed'").fetchone() == ("42",)
    finally:
        conn.close()


def test_crm_refuses_a_foreign_or_unwritable_database(tmp_path):
    foreign = tmp_path / "foreign.sqlite"
    foreign.write_text("not a database at all, just text that is long enough" * 20)
    proc = subprocess.run([PYTHON, CRM, "--db", str(foreign)], capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert "is not the example customer database" in proc.stderr
    missing = tmp_path / "no" / "such" / "dir" / "crm.sqlite"
    proc = subprocess.run([PYTHON, CRM, "--db", str(missing)], capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert "cannot create the customer database" in proc.stderr
    assert not list((tmp_path).glob("**/*.tmp"))


# ---- the fixture: tools ------------------------------------------------------------------

@pytest.fixture(params=["stdio", "http", "sse"])
def transport(request):
    return request.param


@pytest.fixture
def fixture(transport):
    with connect(transport, [PYTHON, FIXTURE]) as client:
        yield client


def test_fixture_initialize_declares_tools_and_logging(fixture):
    init = fixture.init_result
    assert init["protocolVersion"] == "2025-06-18"
    assert init["serverInfo"]["name"] == "fixture"
    assert init["capabilities"]["tools"] == {"listChanged": True}
    assert "logging" in init["capabilities"]
    assert fixture.request("logging/setLevel", {"level": "debug"}) == {}
    assert fixture.ping() == {}


def test_fixture_lists_its_tools_with_schemas(fixture):
    tools = fixture.list_tools()
    assert [t["name"] for t in tools] == FIXTURE_TOOLS
    for tool in tools:
        assert tool["inputSchema"]["type"] == "object", tool["name"]
        assert len(tool["description"]) > 10, tool["name"]
    strict = next(t for t in tools if t["name"] == "strict")["inputSchema"]
    assert strict["properties"]["mode"]["enum"] == ["a", "b"]
    assert strict["required"] == ["n", "mode"]


def test_echo_add_structured_and_pid(fixture):
    assert fixture.call("echo", {"text": "héllo\nworld"})["content"] == [
        {"type": "text", "text": "héllo\nworld"}]
    added = fixture.call("add", {"a": 2, "b": 0.5})
    assert added["structuredContent"] == {"sum": 2.5}
    assert json.loads(text(added)) == {"sum": 2.5}
    nested = fixture.call("structured")
    assert nested["structuredContent"]["user"]["address"] == {"city": "Lyon", "zip": "69001"}
    assert json.loads(text(nested)) == nested["structuredContent"]
    assert fixture.call("pid")["structuredContent"] == {"pid": fixture.server_pid}


def test_image_is_a_valid_png(fixture):
    (content,) = fixture.call("image")["content"]
    assert content["type"] == "image" and content["mimeType"] == "image/png"
    png = base64.b64decode(content["data"], validate=True)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, kinds = 8, []
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + data) == crc, kind
        kinds.append(kind)
        pos += 12 + length
    assert kinds == [b"IHDR", b"IDAT", b"IEND"]


def test_big_returns_exactly_that_many_bytes(fixture):
    assert len(text(fixture.call("big", {"bytes": 300000}))) == 300000
    assert text(fixture.call("big", {"bytes": 0})) == ""
    with pytest.raises(McpError) as err:
        fixture.call("big", {"bytes": (64 << 20) + 1})
    assert err.value.code == INVALID_PARAMS


def test_fail_is_a_tool_error_and_rpc_error_a_json_rpc_error(fixture):
    failed = fixture.call("fail", {"message": "the disk is on fire"})
    assert failed["isError"] is True
    assert text(failed) == "the disk is on fire"
    with pytest.raises(McpError) as err:
        fixture.call("rpc_error")
    assert (err.value.code, err.value.message) == (-32000, "boom")
    with pytest.raises(McpError) as err:
        fixture.call("no_such_tool")
    assert err.value.code == INVALID_PARAMS and "unknown tool 'no_such_tool'" in err.value.message


STRICT_BAD = [
    ({"n": 11, "mode": "a"}, "arguments.n: 11 is above the maximum 10"),
    ({"n": -1, "mode": "a"}, "arguments.n: -1 is below the minimum 0"),
    ({"n": 1.5, "mode": "a"}, "arguments.n: expected integer, got number"),
    ({"n": True, "mode": "a"}, "arguments.n: expected integer, got boolean"),
    ({"n": 1, "mode": "c"}, 'arguments.mode: "c" is not one of ["a","b"]'),
    ({"n": 1, "mode": "a", "tags": ["x", 2]}, "arguments.tags[1]: expected string"),
    ({"n": 1, "mode": "a", "tags": "x"}, "arguments.tags: expected array"),
    ({"mode": "a"}, "missing required property 'n'"),
    ({"n": 1, "mode": "a", "extra": 1}, "unknown property 'extra'"),
]


def test_strict_validates_its_arguments(fixture):
    ok = fixture.call("strict", {"n": 10, "mode": "b", "tags": ["x", "y"]})
    assert ok["structuredContent"] == {"n": 10, "mode": "b", "tags": ["x", "y"]}
    for args, message in STRICT_BAD:
        with pytest.raises(McpError) as err:
            fixture.call("strict", args)
        assert err.value.code == INVALID_PARAMS, args
        assert "invalid arguments for tool 'strict'" in err.value.message, args
        assert message in err.value.message, (args, err.value.message)
    with pytest.raises(McpError) as err:
        fixture.request("tools/call", {"name": "strict", "arguments": [1, 2]})
    assert err.value.code == INVALID_PARAMS


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_needs_env_reports_what_the_server_sees(kind):
    env = _env(FIXTURE_SECRET="s3cret", AIRLOCK_LLM_API_KEY="sk-test")
    with connect(kind, [PYTHON, FIXTURE], env) as client:
        seen = client.call("needs_env")["structuredContent"]
    assert seen["fixture_secret"] == "s3cret"
    assert seen["llm_api_key_visible"] is True
    assert "AIRLOCK_LLM_API_KEY" in seen["airlock_vars"]
    assert "sk-test" not in json.dumps(seen), "the fixture reports names, never key values"
    with connect(kind, [PYTHON, FIXTURE], _env()) as client:
        seen = client.call("needs_env")["structuredContent"]
    assert seen["fixture_secret"] is None
    assert seen["llm_api_key_visible"] is ("AIRLOCK_LLM_API_KEY" in os.environ)


# ---- the fixture: concurrency, cancellation, crashes -------------------------------------

def test_slow_answers_and_ping_is_answered_meanwhile(fixture):
    assert text(fixture.call("slow", {"seconds": 0.2})) == "slept 0.2 s"
    slow = fixture.start("tools/call", {"name": "slow", "arguments": {"seconds": 30}})
    started = time.monotonic()
    assert fixture.ping() == {}
    assert fixture.call("echo", {"text": "meanwhile"})["content"][0]["text"] == "meanwhile"
    assert time.monotonic() - started < 10
    assert not [m for m in fixture.received if m.get("id") == slow], "slow answered early"
    fixture.cancel(slow)


def test_cancelled_call_gets_no_answer(fixture, transport):
    slow = fixture.start("tools/call", {"name": "slow", "arguments": {"seconds": 1.0}})
    time.sleep(0.2)
    fixture.cancel(slow, "the user changed their mind")
    if transport == "stdio":
        # The answer would have come after 1 s; none does.
        with pytest.raises(TimeoutError):
            fixture.wait_response(slow, timeout=2.0)
    else:
        with pytest.raises(NoAnswer):
            fixture.wait_response(slow, timeout=5.0)
        reply = fixture.reply(slow)
        if transport == "http":
            assert reply.status == 202 and reply.body == b""
        else:  # the event stream ends with its leading notification only
            assert reply.status == 200
            assert [m.get("method") for m in reply.messages] == ["notifications/message"]
    assert fixture.ping() == {}
    assert text(fixture.call("slow", {"seconds": 0})) == "slept 0 s"


def test_crash_exits_mid_call(fixture, transport):
    with pytest.raises(NoAnswer):
        fixture.call("crash", timeout=10)
    assert wait_exit(fixture) == 4


# ---- the fixture: fault flags ------------------------------------------------------------

def test_die_on_start_exits_3_with_a_message():
    for extra in ([], ["--http", "127.0.0.1:0"]):
        proc = subprocess.run([PYTHON, FIXTURE, "--die-on-start", *extra], capture_output=True,
                              text=True, timeout=30)
        assert proc.returncode == 3
        assert "--die-on-start" in proc.stderr
        assert proc.stdout == ""


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_hang_initialize_never_answers(kind):
    with connect(kind, [PYTHON, FIXTURE, "--hang-initialize"], initialize=False) as client:
        with pytest.raises(TimeoutError):
            client.initialize(timeout=1.5)
        if kind == "stdio":
            assert client.ping() == {}, "it still reads and answers everything else"
        proc = client.proc if kind == "stdio" else client.server.proc
        assert proc.poll() is None, "hanging, not dead"


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_exit_after_init_exits_once_initialized(kind):
    with connect(kind, [PYTHON, FIXTURE, "--exit-after-init"]) as client:
        assert client.init_result["serverInfo"]["name"] == "fixture"
        assert wait_exit(client) == 5


@pytest.mark.parametrize("kind", ["stdio", "http", "sse"])
def test_tools_change_after_two_calls(kind):
    with connect(kind, [PYTHON, FIXTURE, "--tools-changed-after", "2"]) as client:
        if kind == "http":
            client.open_stream()  # JSON answers: the notification comes on the GET stream
        client.call("echo", {"text": "1"})
        time.sleep(0.2)
        assert not client.notifications("notifications/tools/list_changed")
        assert "late_tool" not in [t["name"] for t in client.list_tools()]
        client.call("add", {"a": 1, "b": 1})
        client.wait_notification("notifications/tools/list_changed", timeout=10)
        assert [t["name"] for t in client.list_tools()][-1] == "late_tool"
        assert text(client.call("late_tool")) == "late_tool answers"
        time.sleep(0.2)
        assert len(client.notifications("notifications/tools/list_changed")) == 1


def test_sse_answers_with_a_notification_first():
    with connect("sse", [PYTHON, FIXTURE]) as client:
        req = client.start("tools/call", {"name": "echo", "arguments": {"text": "x"}})
        client.wait_response(req)
        reply = client.reply(req)
        assert reply.headers["content-type"].startswith("text/event-stream")
        assert [m.get("method") for m in reply.messages] == ["notifications/message", None]
        assert reply.messages[0]["params"]["level"] == "info"
        assert reply.messages[1]["result"]["content"][0]["text"] == "x"


def test_page_size_paginates_tools_list(transport):
    with connect(transport, [PYTHON, FIXTURE, "--page-size", "5", "--name-clash"]) as client:
        pages = []
        names = [t["name"] for t in client.list_tools(pages)]
        assert pages == [5, 5, 3]
        assert names == FIXTURE_TOOLS + ["run_python"]
        first = client.request("tools/list")
        assert first["nextCursor"] and len(first["tools"]) == 5
        for bad in ("nonsense", "page-99", 7):
            with pytest.raises(McpError) as err:
                client.request("tools/list", {"cursor": bad})
            assert err.value.code == INVALID_PARAMS and "invalid cursor" in err.value.message


def test_name_clash_exposes_run_python_and_echo():
    with connect("stdio", [PYTHON, FIXTURE, "--name-clash"]) as client:
        names = [t["name"] for t in client.list_tools()]
        assert "run_python" in names and "echo" in names
        assert "not airlock's" in text(client.call("run_python", {"code": "print(1)"}))
    with connect("stdio", [PYTHON, FIXTURE]) as client:
        assert "run_python" not in [t["name"] for t in client.list_tools()]


def test_state_file_records_every_method(transport, tmp_path):
    state = tmp_path / "state.log"
    with connect(transport, [PYTHON, FIXTURE, "--state-file", str(state)]) as client:
        client.list_tools()
        client.call("echo", {"text": "x"})
        slow = client.start("tools/call", {"name": "slow", "arguments": {"seconds": 30}})
        time.sleep(0.2)
        client.cancel(slow)
        client.ping()
    assert state.read_text().splitlines() == [
        "initialize", "notifications/initialized", "tools/list", "tools/call echo",
        "tools/call slow", "notifications/cancelled", "ping"]


# ---- the protocol, over stdio ------------------------------------------------------------

def test_protocol_errors_over_stdio():
    with connect("stdio", [PYTHON, FIXTURE], initialize=False) as client:
        with pytest.raises(McpError) as err:
            client.request("tools/list")
        assert err.value.code == -32600 and "initialize" in err.value.message
        assert client.ping() == {}
        init = client.initialize(version="1999-01-01")
        assert init["protocolVersion"] == "2025-06-18", "offers its own version"
        with pytest.raises(McpError) as err:
            client.initialize()
        assert "already initialized" in err.value.message
        with pytest.raises(McpError) as err:
            client.request("resources/list")
        assert err.value.code == -32601
        with pytest.raises(McpError) as err:
            client.request("tools/call", {"arguments": {}})
        assert err.value.code == INVALID_PARAMS
        with pytest.raises(McpError) as err:
            client.request("logging/setLevel", {"level": "loud"})
        assert err.value.code == INVALID_PARAMS
        client.send_raw(b"{not json\n")
        client.send_raw(b'[{"jsonrpc": "2.0", "id": 99, "method": "ping"}]\n')
        client.send_raw(b'{"jsonrpc": "1.0", "id": 98, "method": "ping"}\n')
        client.send_raw(b'{"jsonrpc": "2.0", "id": null, "method": "ping"}\n')
        assert client.ping() == {}
        errors = [m["error"] for m in client.received if m.get("id") is None and "error" in m]
        assert [e["code"] for e in errors] == [-32700, -32600, -32600, -32600]
        assert "batches" in errors[1]["message"]
        assert not [m for m in client.received if m.get("id") in (98, 99)]
        # A client's response to a request the server never sent is ignored quietly.
        client.send_raw(b'{"jsonrpc": "2.0", "id": 5, "result": {}}\n')
        assert client.ping() == {}


def test_stdio_server_exits_when_nobody_reads_stdout():
    proc = subprocess.Popen([PYTHON, FIXTURE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        proc.stdout.close()
        proc.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        proc.stdin.flush()
        assert proc.wait(10) == 0
        assert b"stdout closed" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, 9)
            proc.wait(5)
        proc.stdin.close()
        proc.stderr.close()


def test_stdio_server_exits_when_stdin_closes():
    with StdioClient([PYTHON, FIXTURE]) as client:
        client.initialize()
        client.proc.stdin.close()
        assert client.wait_exit(10) == 0
        assert "stdin closed" in client.stderr_text()


# ---- the streamable HTTP transport -------------------------------------------------------

def test_http_sessions_headers_and_refusals():
    with connect("http", [PYTHON, FIXTURE]) as client:
        init = client.reply(1)
        assert init.status == 200
        assert init.headers["content-type"] == "application/json"
        sid = client.session_id
        assert sid and sid.isascii() and len(sid) >= 16

        ping = {"jsonrpc": "2.0", "id": 1000, "method": "ping"}
        assert client.post(ping).messages == [{"jsonrpc": "2.0", "id": 1000, "result": {}}]
        cases = [
            ({"Mcp-Session-Id": None}, 400, "missing Mcp-Session-Id"),
            ({"Mcp-Session-Id": "0" * 32}, 404, "unknown or ended session"),
            ({"MCP-Protocol-Version": "2024-01-01"}, 400, "MCP-Protocol-Version"),
            ({"Origin": "http://evil.example"}, 403, "Origin"),
            ({"Origin": "null"}, 403, "Origin"),
            ({"Host": "evil.example"}, 403, "Host"),
            ({"Host": f"127.0.0.1:{client.port + 1}"}, 403, "Host"),
            ({"Accept": "application/json"}, 406, "text/event-stream"),
            ({"Accept": "text/event-stream"}, 406, "application/json"),
            ({"Content-Type": "text/plain"}, 415, "application/json"),
        ]
        for headers, status, words in cases:
            reply = client.post(ping, headers)
            assert reply.status == status, headers
            assert words in reply.messages[0]["error"]["message"], headers
        for headers in ({"Origin": f"http://localhost:{client.port}"},
                        {"Host": f"localhost:{client.port}"}, {"Accept": "*/*"}):
            assert client.post(ping, headers).status == 200, headers

        assert client.post(b"{oops").messages[0]["error"]["code"] == -32700
        batch = client.post([ping])
        assert batch.status == 400 and "batches" in batch.messages[0]["error"]["message"]
        note = client.post({"jsonrpc": "2.0", "method": "notifications/progress"})
        assert (note.status, note.body) == (202, b"")
        huge = client.post(b"{}", {"Content-Length": str((16 << 20) + 1)})
        assert huge.status == 413

        conn = http.client.HTTPConnection(client.host, client.port)
        for method, path, status in (("PUT", client.path, 405), ("GET", client.path, 406),
                                     ("POST", "/other", 404)):
            conn.request(method, path, b"{}", client.headers({"Accept": "application/json"}))
            resp = conn.getresponse()
            resp.read()
            assert resp.status == status, (method, path)
        conn.close()

        assert client.delete() == 200
        gone = client.post(ping)
        assert gone.status == 404
        assert client.delete() == 404


def test_http_caps_open_sessions():
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}}
    with connect("http", [PYTHON, FIXTURE]) as client:  # the first of 256
        raw = HttpClient(client.server.url)
        sids = [raw.post(init).headers["mcp-session-id"] for _ in range(255)]
        refused = raw.post(init)
        assert refused.status == 503
        assert "256 sessions are open" in refused.messages[0]["error"]["message"]
        raw.session_id = sids[0]
        assert raw.delete() == 200
        assert raw.post(init, {"Mcp-Session-Id": None}).status == 200
        assert client.ping() == {}


def test_http_sessions_are_separate():
    with connect("http", [PYTHON, FIXTURE]) as first:
        second = HttpClient(first.server.url)
        second.initialize()
        assert second.session_id != first.session_id
        assert first.delete() == 200
        assert second.ping() == {}, "ending one session leaves the other"


@pytest.mark.parametrize("script", [FIXTURE, CRM])
def test_http_refuses_non_loopback_hosts(script, tmp_path):
    for listen in ("0.0.0.0:0", "192.0.2.1:8080", "example.com:80", "127.0.0.1", "[::]:0"):
        proc = subprocess.run([PYTHON, script, "--db", str(tmp_path / "x.sqlite"),
                               "--http", listen] if script == CRM else
                              [PYTHON, script, "--http", listen],
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2, listen
        assert "--http" in proc.stderr, listen
    assert not (tmp_path / "x.sqlite").exists(), "refused before touching the database"


def test_http_listens_on_ipv6_loopback():
    proc = subprocess.Popen([PYTHON, FIXTURE, "--http", "[::1]:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline().decode()
        if not line:
            pytest.skip("this host cannot bind ::1 (no IPv6 loopback)")
        assert "listening on http://[::1]:" in line
        client = HttpClient(line.split("listening on ")[1].strip())
        assert client.initialize()["serverInfo"]["name"] == "fixture"
    finally:
        os.kill(proc.pid, 15)
        proc.wait(10)
        proc.stdout.close()
