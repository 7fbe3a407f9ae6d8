"""Issue 9's story end to end, on one machine: "which of our users are about to churn, and plot
it", answered from an internal tool's data analysed in the sandbox, nothing leaving the host.

The daemon runs the example CRM server of examples/internal-tools (a real stdio MCP server over
a SQLite database) from its mcpServers config, with the example's `churn` profile (Code Mode on
for the crm server). A scripted fake model (fake_llm.py) plays the model through the chat
gateway and asserts what it is sent: first the classic way (the model calls the internal tool,
then run_python loads the rows into pandas and plots), then in Code Mode (one script calling the
tools in a loop). Loopback traffic only."""
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from airlock_daemon import Daemon  # noqa: E402
from fake_llm import answer, last_tool, tool_calls  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "internal-tools"
TOKEN = "t0ken-for-the-glue-story-tests"
PROFILE = {"X-Airlock-Profile": "churn"}

# The riskiest users, as the example's data makes them (fixed seed, fixed date).
RISKY_SQL = ("SELECT u.user_id, u.plan, u.mrr, u.last_login FROM users u "
             "ORDER BY u.last_login LIMIT 20")

PLOT_CODE = """
import json, pandas as pd, matplotlib.pyplot as plt
rows = json.loads(open('/work/rows.json').read())
df = pd.DataFrame(rows['rows'], columns=rows['columns'])
df['days_away'] = (pd.Timestamp('2025-06-30') - pd.to_datetime(df.last_login)).dt.days
df.plot.bar(x='user_id', y='days_away', legend=False, title='days since last login')
print(len(df), 'users;', int(df.mrr.sum()), 'USD of monthly revenue at risk')
"""

CODE_MODE = """
import airlock_tools, pandas as pd, matplotlib.pyplot as plt
ids = [r[0] for r in airlock_tools.run_sql(query="SELECT user_id FROM users")["rows"]]
df = pd.DataFrame(airlock_tools.get_user_churn_metrics(user_id=u) for u in ids)
risky = df[df.churn_risk >= 0.6].sort_values("churn_risk", ascending=False)
for _, u in risky.head(8).iterrows():
    plt.plot([m["sessions"] for m in u.sessions_by_month], label=u.user_id)
plt.legend(); plt.title("sessions per month, users most at risk")
print(len(risky), "users at risk")
"""


def user(text):
    return {"role": "user", "content": text}


@pytest.fixture(scope="module")
def daemon(fake, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("glue-story")
    config = tmp / "mcp.json"
    # The example's config with absolute paths, and the database in the test's directory.
    config.write_text(json.dumps({"mcpServers": {"crm": {
        "command": "/usr/bin/python3",
        "args": [str(EXAMPLE / "crm_server.py"), "--db", str(tmp / "crm.sqlite")],
        "require_approval": "never"}}}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
    env["AIRLOCK_PROFILES_DIR"] = str(EXAMPLE / "profiles")
    d = Daemon(args=["--pool-size", "0", "--llm-base-url", fake.base_url, "--llm-model",
                     "fake-model", "--mcp-config", str(config)],
               token_env=TOKEN, env=env)
    d.start()
    d.wait_log('mcp_server=crm msg="ready"', 60)
    yield d
    rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


@pytest.fixture
def upstream(fake):
    fake.script.clear()
    fake.requests.clear()
    fake.failures.clear()
    yield fake
    fake.check()


def chat(d, body):
    r = d.post("/v1/chat/completions", json=body, headers=PROFILE, timeout=180)
    assert r.status_code == 200, d.why(r)
    return r.json()


def tool_names(req):
    return [t["function"]["name"] for t in req["tools"]]


def test_the_model_calls_the_internal_tool_then_analyses_in_the_sandbox(daemon, upstream):
    def sees_the_crm(req):
        names = tool_names(req)
        assert {"run_python", "get_user_churn_metrics", "run_sql", "list_tables"} <= set(names)
        return tool_calls(("run_sql", {"query": RISKY_SQL}))

    def got_rows(req):
        rows = json.loads(last_tool(req))
        assert rows["columns"] == ["user_id", "plan", "mrr", "last_login"]
        assert rows["row_count"] == 20
        # The rows go into the sandbox as a file, then pandas and a plot.
        return tool_calls(("write_file", {"path": "rows.json", "content": json.dumps(rows)}),
                          ("run_python", {"code": PLOT_CODE}))

    def analysed(req):
        text = last_tool(req)
        assert "20 users;" in text and "USD of monthly revenue at risk" in text, text
        assert "image/png" in text, text
        return answer("20 users have been away longest; see the plot.")

    upstream.script[:] = [sees_the_crm, got_rows, analysed]
    reply = chat(daemon, {"messages": [user("Which of our users are about to churn? Plot it.")]})
    assert reply["choices"][0]["message"]["content"].startswith("20 users")
    calls = reply["airlock"]["tool_calls"]
    assert [c["name"] for c in calls] == ["run_sql", "write_file", "run_python"]
    assert all(not c["is_error"] for c in calls), calls
    assert calls[2]["images"] and calls[2]["images"][0]["mime_type"] == "image/png"


def test_code_mode_answers_in_one_script(daemon, upstream):
    def knows_code_mode(req):
        run_python = next(t["function"] for t in req["tools"]
                          if t["function"]["name"] == "run_python")
        desc = run_python["description"]
        assert "import airlock_tools" in desc, desc
        assert "airlock_tools.get_user_churn_metrics(user_id: str)" in desc, desc
        assert "airlock_tools.run_sql(query: str, limit: int = None)" in desc, desc
        return tool_calls(("run_python", {"code": CODE_MODE}))

    def analysed(req):
        text = last_tool(req)
        assert "21 users at risk" in text, text
        assert "image/png" in text, text
        return answer("21 users are at risk of churning; the plot shows their sessions.")

    upstream.script[:] = [knows_code_mode, analysed]
    reply = chat(daemon, {"messages": [user("Which of our users are about to churn? Plot it.")]})
    calls = reply["airlock"]["tool_calls"]
    assert [c["name"] for c in calls] == ["run_python"]
    assert not calls[0]["is_error"], calls[0]["output"]
    assert calls[0]["images"], "the plot came back"
    # One model round trip, 201 tool calls inside the sandbox.
    session = reply["airlock"]["session"]
    r = daemon.post(f"/v1/sessions/{session}/execute",
                    json={"code": "import airlock_tools\nlen(airlock_tools.list())"})
    assert r.status_code == 200, daemon.why(r)
    assert r.json()["result"] == "3"
    assert r.json()["usage"]["tool_calls"] == 0  # list() is not a call


def test_code_mode_usage_counts_the_calls(daemon):
    r = daemon.post("/v1/sessions", json={"profile": "churn"})
    assert r.status_code == 201, daemon.why(r)
    sid = r.json()["id"]
    assert r.json()["code_tools"] == ["crm/*"]
    try:
        r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": CODE_MODE}, timeout=180)
        assert r.status_code == 200, daemon.why(r)
        res = r.json()
        assert res["status"] == "ok", res["error"]
        assert "21 users at risk" in res["stdout"]
        assert res["usage"]["tool_calls"] == 201
        assert res["usage"]["tool_ms"] > 0
    finally:
        daemon.delete(f"/v1/sessions/{sid}")


def test_get_tools_says_what_code_may_call(daemon):
    r = daemon.get("/v1/tools?profile=churn")
    assert r.status_code == 200, daemon.why(r)
    code = {t["name"]: t for t in r.json()["code_tools"]}
    assert set(code) == {"get_user_churn_metrics", "run_sql", "list_tables"}
    assert code["get_user_churn_metrics"]["python_name"] == "get_user_churn_metrics"
    assert code["run_sql"]["server"] == "crm"
    # The default profile lists none; a session answers for itself.
    assert daemon.get("/v1/tools").json()["code_tools"] == []
    r = daemon.post("/v1/sessions", json={"code_tools": ["list_tables"]})
    assert r.status_code == 201, daemon.why(r)
    sid = r.json()["id"]
    try:
        names = [t["name"] for t in daemon.get(f"/v1/tools?session={sid}").json()["code_tools"]]
        assert names == ["list_tables"]
    finally:
        daemon.delete(f"/v1/sessions/{sid}")
    assert daemon.get("/v1/tools?session=s-x&profile=churn").status_code == 400


def test_airlock_chat_through_the_daemon_describes_code_mode(daemon, upstream):
    import subprocess

    from airlock_daemon import AIRLOCK

    def knows_code_mode(req):
        run_python = next(t["function"] for t in req["tools"]
                          if t["function"]["name"] == "run_python")
        assert "airlock_tools.list_tables()" in run_python["description"]
        # The model's own tools are the CLI's: the daemon's servers serve the code only.
        assert "list_tables" not in [t["function"]["name"] for t in req["tools"]]
        return tool_calls(("run_python", {"code": "import airlock_tools\n"
                                                  "len(airlock_tools.list_tables()['tables'])"}))

    def counted(req):
        assert "result: 4" in last_tool(req) or "4" in last_tool(req), last_tool(req)
        return answer("four tables")

    upstream.script[:] = [knows_code_mode, counted]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    env["AIRLOCK_TOKEN"] = TOKEN
    proc = subprocess.run([AIRLOCK, "chat", "--url", daemon.url, "-p", "churn", "--base-url",
                           upstream.base_url, "--model", "m", "how many tables?"],
                          capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.returncode == 0, proc.stderr
    assert "four tables" in proc.stdout
