"""The MCP servers the Glue is tested and shown with, on their own (no airlock): the example
CRM server (examples/internal-tools/crm_server.py) over stdio and streamable HTTP. Driven by
tests/e2e/mcp_client.py."""
import contextlib
import datetime as dt
import hashlib
import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from mcp_client import PYTHON, HttpClient, HttpServer, McpError, StdioClient

ROOT = Path(__file__).resolve().parents[2]
CRM = str(ROOT / "examples" / "internal-tools" / "crm_server.py")
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


@pytest.mark.parametrize("script", [CRM])
def test_http_refuses_non_loopback_hosts(script, tmp_path):
    for listen in ("0.0.0.0:0", "192.0.2.1:8080", "example.com:80", "127.0.0.1", "[::]:0"):
        proc = subprocess.run([PYTHON, script, "--db", str(tmp_path / "x.sqlite"),
                               "--http", listen] if script == CRM else
                              [PYTHON, script, "--http", listen],
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2, listen
        assert "--http" in proc.stderr, listen
    assert not (tmp_path / "x.sqlite").exists(), "refused before touching the database"
