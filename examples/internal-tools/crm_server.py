#!/usr/bin/python3
"""crm: an "internal tool" for the model, as an MCP server over stdio (or streamable HTTP on
loopback with --http). It answers from a small SQLite customer database: 200 users of a SaaS
product with their plan, revenue, logins, monthly sessions and support tickets, some of them
clearly about to churn. The database is built on first start from a fixed seed, so every
machine gets the same customers, and it is only ever opened read-only afterwards.

    /usr/bin/python3 crm_server.py                    # stdio, database next to this file
    /usr/bin/python3 crm_server.py --db /tmp/crm.sqlite --http 127.0.0.1:0

Tools: get_user_churn_metrics(user_id), run_sql(query, limit), list_tables(). See README.md.
Python 3.11 standard library only.
"""
import argparse
import datetime as dt
import math
import os
import random
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp_stdlib import (Server, Tool, ToolError, add_transport_arguments,  # noqa: E402
                        json_result, serve)

VERSION = "1.0.0"
SEED = 42
USERS = 200
# The data describe the world as of this day, so days_since_login is the same on every run.
AS_OF = dt.date(2025, 6, 30)
MONTHS = ["2025-01", "2025-02", "2025-03", "2025-04", "2025-05", "2025-06"]
PLANS = {"free": 0.0, "starter": 29.0, "pro": 99.0, "enterprise": None}  # None: 499 to 1999
QUERY_SECONDS = 10.0
MAX_ROWS = 10000

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE users (
    user_id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
    plan TEXT NOT NULL CHECK (plan IN ('free', 'starter', 'pro', 'enterprise')),
    signup_date TEXT NOT NULL, last_login TEXT NOT NULL, mrr REAL NOT NULL);
CREATE TABLE monthly_sessions (
    user_id TEXT NOT NULL REFERENCES users (user_id), month TEXT NOT NULL,
    sessions INTEGER NOT NULL, PRIMARY KEY (user_id, month));
CREATE TABLE support_tickets (
    ticket_id INTEGER PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users (user_id),
    opened_on TEXT NOT NULL, category TEXT NOT NULL, status TEXT NOT NULL,
    subject TEXT NOT NULL);
"""

# What list_tables tells a model about each table and column, so it can write SQL.
DESCRIPTIONS = {
    "meta": ("facts about the data set", {
        "key": "'as_of' (the day the data describe), 'seed', 'version'", "value": "its value"}),
    "users": ("one row per customer account", {
        "user_id": "id like 'u001'", "name": "full name", "email": "contact email",
        "plan": "free, starter, pro or enterprise", "signup_date": "YYYY-MM-DD",
        "last_login": "YYYY-MM-DD of the latest login", "mrr": "monthly recurring revenue, USD"}),
    "monthly_sessions": ("sessions per user per month, 2025-01 to 2025-06", {
        "user_id": "users.user_id", "month": "YYYY-MM", "sessions": "sessions that month"}),
    "support_tickets": ("support tickets opened in the last 180 days", {
        "ticket_id": "ticket number", "user_id": "users.user_id", "opened_on": "YYYY-MM-DD",
        "category": "billing, bug, performance, how-to or cancellation",
        "status": "open or closed", "subject": "the ticket's title"}),
}

FIRST = ["Ada", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas",
         "Kemi", "Liam", "Maya", "Noor", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara",
         "Umar", "Vera", "Wen", "Xavier", "Yara", "Zoe"]
LAST = ["Andersen", "Baptiste", "Chen", "Dubois", "Eze", "Fischer", "Garcia", "Haddad",
        "Ito", "Jensen", "Kowalski", "Lopez", "Moreau", "Nakamura", "Okafor", "Petrov",
        "Rossi", "Silva", "Tanaka", "Varga", "Weber", "Yilmaz"]
SUBJECTS = {
    "billing": ["Charged twice this month", "Invoice shows the wrong plan", "Refund request"],
    "bug": ["Export to CSV fails", "Dashboard does not load", "Sync stops after an hour"],
    "performance": ["Reports take minutes to open", "Search is very slow"],
    "how-to": ["How do I add a teammate?", "Where is the API key?", "Set up SSO"],
    "cancellation": ["How do I cancel?", "Downgrade to free", "Please close my account"],
}


# ---- the database ------------------------------------------------------------------------

def _generate(conn):
    """Fill an empty database. All randomness comes from one Random(SEED), drawn in a fixed
    order, so two machines build the same rows."""
    rng = random.Random(SEED)
    conn.executescript(SCHEMA)
    conn.executemany("INSERT INTO meta VALUES (?, ?)",
                     [("as_of", AS_OF.isoformat()), ("seed", str(SEED)), ("version", VERSION)])
    ticket_id = 1000
    for i in range(1, USERS + 1):
        uid = f"u{i:03d}"
        first, last = rng.choice(FIRST), rng.choice(LAST)
        plan = rng.choices(list(PLANS), weights=[35, 30, 25, 10])[0]
        mrr = PLANS[plan] if PLANS[plan] is not None else float(rng.randrange(499, 2000, 100))
        signup = AS_OF - dt.timedelta(days=rng.randint(200, 1100))
        kind = rng.choices(["churning", "cooling", "healthy"], weights=[14, 12, 74])[0]
        base = rng.randint(12, 70)
        if kind == "churning":
            shape = [1.0, 0.8, 0.55, 0.3, 0.1, 0.0]
            idle = rng.randint(35, 110)
            tickets, cats = rng.randint(2, 6), ["billing", "bug", "cancellation", "performance"]
        elif kind == "cooling":
            shape = [0.87 ** m for m in range(6)]
            idle = rng.randint(10, 40)
            tickets, cats = rng.randint(0, 3), ["bug", "performance", "how-to", "billing"]
        else:
            growth = rng.uniform(0.97, 1.08)
            shape = [growth ** m for m in range(6)]
            idle = rng.randint(0, 9)
            tickets, cats = rng.choices([0, 1, 2], weights=[70, 22, 8])[0], ["how-to", "bug"]
        last_login = AS_OF - dt.timedelta(days=idle)
        conn.execute("INSERT INTO users VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (uid, f"{first} {last}", f"{first}.{last}.{i}@example.com".lower(), plan,
                      signup.isoformat(), last_login.isoformat(), mrr))
        for month, factor in zip(MONTHS, shape):
            count = max(0, round(base * factor * rng.uniform(0.85, 1.15)))
            # Nobody has sessions in a month that began after their last login.
            if dt.date.fromisoformat(month + "-01") > last_login:
                count = 0
            conn.execute("INSERT INTO monthly_sessions VALUES (?, ?, ?)", (uid, month, count))
        for _ in range(tickets):
            # A churning user's tickets are recent; others' spread over half a year.
            age = rng.randint(0, 80) if kind == "churning" else rng.randint(0, 180)
            cat = rng.choice(cats)
            ticket_id += 1
            conn.execute("INSERT INTO support_tickets VALUES (?, ?, ?, ?, ?, ?)",
                         (ticket_id, uid, (AS_OF - dt.timedelta(days=age)).isoformat(), cat,
                          "open" if age < 14 else "closed", rng.choice(SUBJECTS[cat])))


def ensure_database(path):
    """Create the database at path unless it exists, then check that it is one. A new one is
    built under a temporary name and renamed into place, so a server started at the same
    moment never sees half of it."""
    if path.exists():
        try:
            conn = connect_ro(path)
            try:
                conn.execute("SELECT value FROM meta WHERE key = 'as_of'").fetchone()
                conn.execute("SELECT user_id FROM users LIMIT 1").fetchone()
            finally:
                conn.close()
        except sqlite3.Error as e:
            raise SystemExit(f"crm: {path} is not the example customer database ({e}): "
                             "remove it, or point --db / CRM_DB at a new path")
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with sqlite3.connect(tmp) as conn:
            _generate(conn)
        conn.close()
        os.replace(tmp, path)
    except (OSError, sqlite3.Error) as e:
        tmp.unlink(missing_ok=True)
        raise SystemExit(f"crm: cannot create the customer database at {path}: {e} "
                         "(choose another place with --db PATH or CRM_DB)")


def connect_ro(path):
    """A read-only connection: the file opened with mode=ro, then PRAGMA query_only."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                           check_same_thread=False)
    conn.execute("PRAGMA query_only = ON")
    return conn


# ---- churn metrics -----------------------------------------------------------------------

def churn_metrics(conn, user_id):
    row = conn.execute("SELECT plan, last_login, mrr FROM users WHERE user_id = ?",
                       (user_id,)).fetchone()
    if row is None:
        raise ToolError(f"unknown user_id '{user_id}': ids run from 'u001' to 'u{USERS:03d}' "
                        "(run_sql \"SELECT user_id, name FROM users\" lists them)")
    plan, last_login, mrr = row
    sessions = conn.execute("SELECT month, sessions FROM monthly_sessions WHERE user_id = ? "
                            "ORDER BY month", (user_id,)).fetchall()
    since = (AS_OF - dt.timedelta(days=90)).isoformat()
    tickets = conn.execute("SELECT count(*) FROM support_tickets WHERE user_id = ? AND "
                           "opened_on > ?", (user_id, since)).fetchone()[0]
    days = (AS_OF - dt.date.fromisoformat(last_login)).days
    counts = [n for _, n in sessions]
    earlier, recent = sum(counts[:3]) / 3, sum(counts[3:]) / 3
    if earlier == 0:
        trend, decline = ("inactive", 1.0) if recent == 0 else ("growing", 0.0)
    else:
        ratio = recent / earlier
        trend = "declining" if ratio < 0.75 else "growing" if ratio > 1.25 else "stable"
        decline = min(max(1.0 - ratio, 0.0), 1.0)
    # Long absence weighs most, then the fall in use, then recent support pain.
    risk = 0.5 * min(days / 60, 1.0) + 0.35 * decline + 0.15 * min(tickets / 4, 1.0)
    return {"user_id": user_id, "plan": plan, "mrr": mrr, "last_login": last_login,
            "days_since_login": days,
            "sessions_by_month": [{"month": m, "sessions": n} for m, n in sessions],
            "trend": trend, "tickets_90d": tickets, "churn_risk": round(risk, 3),
            "as_of": AS_OF.isoformat()}


# ---- read-only SQL -----------------------------------------------------------------------

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}


def _authorize(action, arg1, arg2, db_name, source):
    # Only reading: no INSERT/UPDATE/DELETE, no ATTACH (which could open or create another
    # file), no PRAGMA (which could change the connection), no schema changes.
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def _json_value(value):
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def run_sql(path, query, limit, seconds=QUERY_SECONDS):
    conn = connect_ro(path)
    try:
        conn.set_authorizer(_authorize)  # after PRAGMA query_only, which it would refuse
        deadline = time.monotonic() + seconds
        conn.set_progress_handler(lambda: time.monotonic() > deadline, 10000)
        try:
            cur = conn.execute(query)
            rows = cur.fetchmany(limit + 1)
        except sqlite3.Error as e:
            msg = str(e)
            if msg == "interrupted":
                msg = f"the query ran over {seconds:g} s and was stopped"
            elif "not authorized" in msg or "authorization denied" in msg:
                msg += (" (run_sql is read-only: one SELECT statement that reads tables; "
                        "writes, ATTACH and PRAGMA are refused)")
            raise ToolError(f"SQL error: {msg}")
        except sqlite3.Warning as e:  # e.g. "You can only execute one statement at a time."
            raise ToolError(f"SQL error: {e}")
        columns = [d[0] for d in cur.description or []]
    finally:
        conn.close()
    truncated = len(rows) > limit
    rows = [[_json_value(v) for v in row] for row in rows[:limit]]
    return {"columns": columns, "rows": rows, "row_count": len(rows), "truncated": truncated}


def list_tables(path):
    conn = connect_ro(path)
    try:
        tables = []
        names = conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' "
                             "ORDER BY name").fetchall()
        for (name,) in names:
            about, cols = DESCRIPTIONS.get(name, ("", {}))
            columns = [{"name": c[1], "type": c[2], "primary_key": bool(c[5]),
                        "description": cols.get(c[1], "")}
                       for c in conn.execute(f'PRAGMA table_info("{name}")')]
            count = conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
            tables.append({"name": name, "description": about, "row_count": count,
                           "columns": columns})
    finally:
        conn.close()
    return {"tables": tables}


# ---- the MCP server ----------------------------------------------------------------------

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
             "openWorldHint": False}

METRICS_SCHEMA = {
    "type": "object",
    "properties": {
        "user_id": {"type": "string"}, "plan": {"type": "string"}, "mrr": {"type": "number"},
        "last_login": {"type": "string"}, "days_since_login": {"type": "integer"},
        "sessions_by_month": {"type": "array", "items": {
            "type": "object", "required": ["month", "sessions"],
            "properties": {"month": {"type": "string"}, "sessions": {"type": "integer"}}}},
        "trend": {"type": "string", "enum": ["growing", "stable", "declining", "inactive"]},
        "tickets_90d": {"type": "integer"},
        "churn_risk": {"type": "number", "minimum": 0, "maximum": 1},
        "as_of": {"type": "string"},
    },
    "required": ["user_id", "plan", "days_since_login", "sessions_by_month", "trend",
                 "tickets_90d", "churn_risk"],
}

SQL_SCHEMA = {
    "type": "object",
    "properties": {
        "columns": {"type": "array", "items": {"type": "string"}},
        "rows": {"type": "array", "items": {"type": "array"}},
        "row_count": {"type": "integer"},
        "truncated": {"type": "boolean"},
    },
    "required": ["columns", "rows", "row_count", "truncated"],
}

TABLES_SCHEMA = {
    "type": "object",
    "properties": {"tables": {"type": "array", "items": {
        "type": "object", "required": ["name", "columns"],
        "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                       "row_count": {"type": "integer"},
                       "columns": {"type": "array", "items": {"type": "object"}}}}}},
    "required": ["tables"],
}


def build_server(db, query_seconds=QUERY_SECONDS):
    server = Server("crm", VERSION, title="Customer database (example)", instructions=(
        f"A customer database of {USERS} users of a SaaS product, as of {AS_OF}. "
        "get_user_churn_metrics scores one user's churn risk; run_sql runs read-only SQLite "
        "SELECT queries (list_tables shows the schema)."))
    server.add_tool(Tool(
        "get_user_churn_metrics",
        "Churn signals for one customer: plan, monthly revenue, days since the last login, "
        "sessions in each of the last 6 months and their trend, support tickets in the last 90 "
        "days, and churn_risk from 0 (healthy) to 1 (about to leave). Risk weighs a long absence "
        "most, then falling use, then recent tickets. Ids look like 'u001'.",
        {"type": "object", "properties": {"user_id": {
            "type": "string", "description": "the user's id, e.g. 'u007'", "minLength": 1}},
         "required": ["user_id"], "additionalProperties": False},
        lambda args, call: json_result(churn_metrics_at(db, args["user_id"])),
        title="Churn metrics of a user", output_schema=METRICS_SCHEMA, annotations=READ_ONLY))
    server.add_tool(Tool(
        "run_sql",
        "Run one read-only SQLite SELECT on the customer database and get the rows back as "
        "{columns, rows, row_count, truncated}. Tables: users, monthly_sessions, "
        "support_tickets, meta (call list_tables for columns). Writes, ATTACH and PRAGMA are "
        f"refused; a query is stopped after {query_seconds:g} s.",
        {"type": "object", "properties": {
            "query": {"type": "string", "minLength": 1, "description": "one SELECT statement"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_ROWS, "default": 1000,
                      "description": "the most rows to return; truncated says if there were "
                                     "more"}},
         "required": ["query"], "additionalProperties": False},
        lambda args, call: json_result(
            run_sql(db, args["query"], int(args.get("limit", 1000)), query_seconds)),
        title="Read-only SQL", output_schema=SQL_SCHEMA, annotations=READ_ONLY))
    server.add_tool(Tool(
        "list_tables",
        "The customer database's tables with their columns (name, type, description) and row "
        "counts, to write run_sql queries against.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        lambda args, call: json_result(list_tables(db)),
        title="Database schema", output_schema=TABLES_SCHEMA, annotations=READ_ONLY))
    return server


def churn_metrics_at(path, user_id):
    conn = connect_ro(path)
    try:
        return churn_metrics(conn, user_id)
    finally:
        conn.close()


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds in (0, 3600]")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="The example customer database as an MCP server (stdio by default).")
    parser.add_argument("--db", metavar="PATH", type=Path,
                        help="the SQLite database, created on first start (default: $CRM_DB, "
                             "else crm.sqlite next to this script)")
    parser.add_argument("--query-timeout", metavar="SECONDS", type=_seconds,
                        default=QUERY_SECONDS,
                        help=f"stop a run_sql query after this long (default {QUERY_SECONDS:g})")
    add_transport_arguments(parser)
    args = parser.parse_args(argv)
    db = args.db or Path(os.environ.get("CRM_DB") or Path(__file__).resolve().parent /
                         "crm.sqlite")
    ensure_database(db)
    serve(build_server(db, args.query_timeout), args.http)


if __name__ == "__main__":
    main()
