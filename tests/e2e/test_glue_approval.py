"""require_approval on an internal tool: the gateway returns the pending call as an
mcp_approval_request naming the tool's server, and runs it only after an approving
mcp_approval_response; `airlock chat` asks on its terminal whatever its flags, and declines
without one. The fixture MCP server's state file shows what reached it. Loopback only."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from airlock_daemon import AIRLOCK, Daemon  # noqa: E402
from fake_llm import FakeLLM, answer, last_tool, tool_calls  # noqa: E402
from hub_helpers import fixture, tool_calls_of, write_config  # noqa: E402
from test_chat import clean_env, run_in_pty  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

TOKEN = "t0ken-for-the-glue-approval-tests"


def config_for(tmp, state):
    """The fixture as server fx, recording its calls in state; only echo needs no approval."""
    return write_config(tmp / "mcp.json", {"fx": fixture(
        "--state-file", str(state), require_approval={"never": {"tool_names": ["echo"]}})})


@pytest.fixture(scope="module")
def setup(fake, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("glue-approval")
    state = tmp / "state.txt"
    d = Daemon(args=["--pool-size", "0", "--llm-base-url", fake.base_url, "--llm-model",
                     "fake-model", "--mcp-config", config_for(tmp, state)],
               token_env=TOKEN)
    d.start()
    d.wait_log('mcp_server=fx msg="ready"', 60)
    yield d, state
    rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


def chat(d, body):
    r = d.post("/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, d.why(r)
    return r.json()


def approval(item, approve):
    return {"type": "mcp_approval_response", "approval_request_id": item["id"],
            "approve": approve}


@pytest.mark.parametrize("approve", [True, False])
def test_the_gateway_asks_before_an_internal_tool_runs(setup, fake, approve):
    d, state = setup
    fake.script.clear()
    fake.requests.clear()
    before = len(tool_calls_of(state))
    messages = [{"role": "user", "content": "add 2 and 3 with the internal tool"}]
    fake.script.append(tool_calls(("add", {"a": 2, "b": 3})))
    r1 = chat(d, {"messages": messages})
    assert r1["airlock"]["stopped"] == "approval_required"
    (item,) = r1["airlock"]["pending"]
    assert item["type"] == "mcp_approval_request"
    assert item["server_label"] == "fx" and item["name"] == "add"
    assert json.loads(item["arguments"]) == {"a": 2, "b": 3}
    assert tool_calls_of(state)[before:] == [], "the tool ran before the approval"

    def result(req):
        text = last_tool(req)
        if approve:
            assert '"sum": 5' in text or "5" in text, text
        else:
            assert text.startswith("the user denied this call"), text
        return answer("done")

    fake.script.append(result)
    r2 = chat(d, {"messages": messages, "airlock": {"approvals": [approval(item, approve)]}})
    fake.check()
    assert r2["choices"][0]["message"]["content"] == "done"
    assert tool_calls_of(state)[before:] == (["add"] if approve else [])


def test_a_tool_without_approval_runs_at_once(setup, fake):
    d, state = setup
    fake.script.clear()
    fake.requests.clear()
    before = len(tool_calls_of(state))
    fake.script[:] = [tool_calls(("echo", {"text": "hi"})),
                      lambda req: answer("echoed") if "hi" in last_tool(req) else
                      answer("missing: " + last_tool(req))]
    r = chat(d, {"messages": [{"role": "user", "content": "echo hi"}]})
    fake.check()
    assert r["choices"][0]["message"]["content"] == "echoed"
    assert tool_calls_of(state)[before:] == ["echo"]


@pytest.mark.parametrize("reply,runs", [("n", False), ("y", True)])
def test_airlock_chat_asks_on_the_terminal_for_an_internal_tool(tmp_path, reply, runs):
    state = tmp_path / "state.txt"
    llm = FakeLLM()
    try:
        def check(req):
            text = last_tool(req)
            if runs:
                assert "5" in text, text
            else:
                assert text.startswith("the user declined"), text
            return answer("done")

        llm.script[:] = [tool_calls(("add", {"a": 2, "b": 3})), check]
        # No --approve: a tool that needs approval is asked about anyway.
        argv = [AIRLOCK, "chat", "--base-url", llm.base_url, "--model", "m", "--mcp-config",
                config_for(tmp_path, state), "--output-dir", str(tmp_path / "out"),
                "add 2 and 3"]
        status, shown = run_in_pty(argv, reply, clean_env(), tmp_path)
        llm.check()
        assert status == 0, shown
        assert "add" in shown and '"a"' in shown, shown   # the tool and its arguments shown
        assert tool_calls_of(state) == (["add"] if runs else [])
    finally:
        llm.close()


def test_airlock_chat_without_a_terminal_declines_an_internal_tool(tmp_path):
    state = tmp_path / "state.txt"
    llm = FakeLLM()
    try:
        llm.script[:] = [tool_calls(("add", {"a": 2, "b": 3})),
                         lambda req: answer("not run") if last_tool(req).startswith(
                             "the user declined") else answer("ran: " + last_tool(req))]
        argv = [AIRLOCK, "chat", "--base-url", llm.base_url, "--model", "m", "--mcp-config",
                config_for(tmp_path, state), "add 2 and 3"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                              env=clean_env(), cwd=tmp_path, start_new_session=True,
                              stdin=subprocess.DEVNULL)
        llm.check()
        assert proc.returncode == 0, proc.stderr
        assert "not run" in proc.stdout
        assert tool_calls_of(state) == []
    finally:
        llm.close()
