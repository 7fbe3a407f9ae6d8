"""POST /v1/responses with internal tools (docs/TOOLS.md): the daemon's MCP servers' tools are
offered beside run_python, a call shows as an mcp_call output item (server_label = the
server), a replayed mcp_call item is understood, and a tool that needs approval is neither
offered nor run (the Responses API has no approval flow here). The fixture MCP server's state
file shows what reached it. Loopback traffic only."""
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from airlock_daemon import Daemon  # noqa: E402
from fake_llm import answer, last_tool, tool_calls  # noqa: E402
from hub_helpers import fixture, tool_calls_of, write_config  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

TOKEN = "t0ken-for-the-responses-internal-tests"
CI = {"type": "code_interpreter", "container": {"type": "auto"}}




@pytest.fixture(scope="module")
def setup(fake, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("responses-internal")
    state = tmp / "state.txt"
    config = write_config(tmp / "mcp.json", {"fx": fixture(
        "--state-file", str(state), require_approval={"never": {"tool_names": ["echo"]}})})
    d = Daemon(args=["--pool-size", "0", "--llm-base-url", fake.base_url, "--llm-model",
                     "fake-model", "--mcp-config", str(config)], token_env=TOKEN)
    d.start()
    d.wait_log('mcp_server=fx msg="ready"', 60)
    yield d, state
    rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


@pytest.fixture
def llm(fake):
    fake.script.clear()
    fake.requests.clear()
    fake.failures.clear()
    yield fake
    fake.check()


def offered(req):
    return [t["function"]["name"] for t in req.get("tools", [])]


def test_an_internal_tool_call_is_an_mcp_call_item(setup, llm):
    d, state = setup
    before = len(tool_calls_of(state))

    def sees_it(req):
        names = offered(req)
        assert "run_python" in names and "echo" in names, names
        assert "add" not in names, "a tool that needs approval was offered"
        assert "run_shell" not in names, names
        return tool_calls(("echo", {"text": "hi from fx"}))

    def got_it(req):
        assert "hi from fx" in last_tool(req), last_tool(req)
        return answer("fx said hi")

    llm.script[:] = [sees_it, got_it]
    r = d.post("/v1/responses", json={"model": "m", "input": "say hi", "tools": [CI]})
    assert r.status_code == 200, d.why(r)
    out = r.json()["output"]
    (item,) = [o for o in out if o["type"] == "mcp_call"]
    assert item["server_label"] == "fx" and item["name"] == "echo"
    assert json.loads(item["arguments"]) == {"text": "hi from fx"}
    assert "hi from fx" in item["output"] and item["error"] is None
    assert item["status"] == "completed"
    assert out[-1]["type"] == "message"
    assert tool_calls_of(state)[before:] == ["echo"]

    # The output replayed as input (what clients without previous_response_id do).
    def replayed(req):
        roles = [m["role"] for m in req["messages"]]
        assert "tool" in roles, roles
        assert any("hi from fx" in (m.get("content") or "") for m in req["messages"]
                   if m["role"] == "tool")
        return answer("still fine")

    llm.script[:] = [replayed]
    r = d.post("/v1/responses", json={"model": "m", "tools": [CI], "input": [
        {"role": "user", "content": "say hi"}, *out, {"role": "user", "content": "again?"}]})
    assert r.status_code == 200, d.why(r)


def test_a_tool_that_needs_approval_never_runs(setup, llm):
    d, state = setup
    before = len(tool_calls_of(state))

    def refused(req):
        assert "there is no tool named 'add'" in last_tool(req), last_tool(req)
        return answer("could not add")

    llm.script[:] = [tool_calls(("add", {"a": 1, "b": 2})), refused]
    r = d.post("/v1/responses", json={"model": "m", "input": "add", "tools": [CI]})
    assert r.status_code == 200, d.why(r)
    assert tool_calls_of(state)[before:] == []
