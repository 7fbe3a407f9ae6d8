"""Jupyter cells (issue 24, docs/IPYTHON.md) through the clients other than the native API:
MCP (the daemon's /mcp, the run_python tool, with tests/e2e's MCP client) and the Responses
API (the code_interpreter tool, a scripted fake model as in test_responses.py). One daemon for
the module, pointed at the fake model on loopback. The E2B SDK is test_e2b_ipython.py."""
import base64
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from airlock_daemon import Daemon  # noqa: E402
from fake_llm import answer, last_tool, tool_call  # noqa: E402
from hub_helpers import DaemonMcp, text_of  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

TOKEN = "t0ken-for-the-ipython-client-tests"
CI = {"type": "code_interpreter", "container": {"type": "auto"}}
PNG_1x1 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
           "AAAABJRU5ErkJggg==")

CELL = "\n".join([
    "    !echo shell-says-$((6 * 7))",
    "    %time v = sum(range(10))",
    "    from IPython.display import HTML, Image, display",
    "    import base64",
    "    display(HTML('<b>rich-html</b>'))",
    f"    display(Image(data=base64.b64decode('{PNG_1x1}')))",
    "    v",
])


@pytest.fixture(scope="module")
def daemon(fake):
    d = Daemon(args=["--pool-size", "1", "--llm-base-url", fake.base_url,
                     "--llm-model", "fake-model"], token_env=TOKEN)
    d.start()
    yield d
    rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


@pytest.fixture
def llm(fake):
    fake.script.clear()
    fake.requests.clear()
    fake.headers.clear()
    fake.failures.clear()
    yield fake
    fake.check()


def test_mcp_run_python_runs_a_jupyter_cell(daemon):
    with DaemonMcp(daemon) as c:
        c.initialize()
        res = c.call("run_python", {"code": CELL}, timeout=60)
        assert res.get("isError") is False, res
        text = text_of(res)
        assert "stdout:\nshell-says-42\nCPU times:" in text, text
        assert "result: 45" in text, text
        images = [b for b in res["content"] if b["type"] == "image"]
        assert len(images) == 1 and images[0]["mimeType"] == "image/png", res["content"]
        assert base64.b64decode(images[0]["data"]) == base64.b64decode(PNG_1x1)
        sc = res["structuredContent"]
        assert sc["status"] == "ok" and sc["result"] == "45"
        assert sc["stdout"].startswith("shell-says-42\nCPU times:")
        html = [o["data"]["text/html"] for o in sc["outputs"] if "text/html" in o["data"]]
        assert html == ["<b>rich-html</b>"], sc["outputs"]
        # The session lives on between calls: IPython's history too.
        res = c.call("run_python", {"code": "files = !ls /usr\nprint(type(files).__name__)\n_"},
                     timeout=60)
        assert res.get("isError") is False, res
        assert "stdout:\nSList\n" in text_of(res) and "result: 45" in text_of(res), text_of(res)
        # An unknown magic is IPython's UsageError.
        res = c.call("run_python", {"code": "%nosuchmagic"}, timeout=60)
        assert res["isError"] is True
        assert "UsageError: Line magic function `%nosuchmagic` not found." in text_of(res)


def test_responses_code_interpreter_runs_a_jupyter_cell(daemon, llm):
    def second(req):
        told = last_tool(req)
        assert "shell-says-42" in told and "CPU times:" in told, told
        return answer("The shell said 42.")

    llm.add(tool_call("run_python", {"code": CELL}), second)
    r = daemon.post("/v1/responses", json={"input": "go", "tools": [CI],
                                           "include": ["code_interpreter_call.outputs"]},
                    timeout=120)
    assert r.status_code == 200, daemon.why(r)
    resp = r.json()
    [call] = [o for o in resp["output"] if o["type"] == "code_interpreter_call"]
    assert call["status"] == "completed" and call["code"] == CELL
    logs = [o["logs"] for o in call["outputs"] if o["type"] == "logs"]
    assert len(logs) == 1 and logs[0].startswith("shell-says-42\nCPU times:"), call["outputs"]
    images = [o for o in call["outputs"] if o["type"] == "image"]
    assert len(images) == 1, call["outputs"]
    assert resp["output_text"] == "The shell said 42."


def test_responses_stream_carries_the_shell_output(daemon, llm):
    llm.add(tool_call("run_python", {"code": "!echo streamed-$((1 + 1))\n%pwd"}),
            lambda req: answer("ok") if "streamed-2" in last_tool(req) else answer("MISSING"))
    r = daemon.post("/v1/responses", json={"input": "go", "tools": [CI], "stream": True,
                                           "include": ["code_interpreter_call.outputs"]},
                    stream=True, timeout=120)
    assert r.status_code == 200, daemon.why(r)
    done = []
    for block in r.text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if fields.get("event") == "response.output_item.done":
            done.append(json.loads(fields["data"])["item"])
    [call] = [i for i in done if i["type"] == "code_interpreter_call"]
    assert call["outputs"][0]["logs"] == "streamed-2\n'/work'\n", call  # stdout, then %pwd's value
    final = [i for i in done if i["type"] == "message"]
    assert final and final[0]["content"][0]["text"] == "ok"
