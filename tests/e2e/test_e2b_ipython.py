"""Jupyter cells (issue 24) through the official E2B SDK, @e2b/code-interpreter from
tests/mcp/node_modules, unmodified, run by node against this module's daemon's /e2b surface
(configured as tests/mcp/e2b.test.mjs does: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY). The
node script prints what the SDK returned as JSON; the assertions are here."""
import json
import os
import subprocess

import pytest

from airlock_daemon import daemon_fixture
from hub_helpers import NODE_MODULES, node

daemon = daemon_fixture(pytest, args=("--pool-size", "1"))

SDK = NODE_MODULES / "@e2b" / "code-interpreter"

SCRIPT = r"""
const { Sandbox } = await import('@e2b/code-interpreter');
const sbx = await Sandbox.create();
const out = {};
try {
  const a = await sbx.runCode('!echo hi\n%time 1+1');
  out.a = { stdout: a.logs.stdout, error: a.error ?? null, text: a.text ?? null };
  const streamed = [];
  const b = await sbx.runCode(
    "from IPython.display import HTML, Markdown, display\n" +
    "print('before')\n" +
    "display(HTML('<b>e2b-html</b>'))\n" +
    "display(Markdown('*e2b-md*'))\n" +
    "!echo after\n" +
    "list(range(30))",
    { onResult: (r) => streamed.push({ html: r.html ?? null, markdown: r.markdown ?? null,
                                       isMain: r.isMainResult, text: r.text ?? null }) });
  out.b = { stdout: b.logs.stdout, error: b.error ?? null, text: b.text ?? null,
            results: b.results.map((r) => ({ html: r.html ?? null, markdown: r.markdown ?? null,
                                             isMain: r.isMainResult, text: r.text ?? null })),
            streamed };
  const c = await sbx.runCode('%nosuchmagic');
  out.c = { name: c.error?.name ?? null, value: c.error?.value ?? null };
} finally {
  await sbx.kill();
}
console.log(JSON.stringify(out));
"""


def test_e2b_sdk_runs_jupyter_cells(daemon):
    if not (SDK / "package.json").exists() or not node():
        pytest.skip("the E2B SDK is not installed: run tests/mcp/install.sh")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRLOCK_", "E2B_"))}
    env.update(E2B_API_URL=f"{daemon.url}/e2b/api", E2B_SANDBOX_URL=f"{daemon.url}/e2b/sandbox",
               E2B_API_KEY=daemon.token, NO_PROXY="127.0.0.1", HTTP_PROXY="", HTTPS_PROXY="")
    p = subprocess.run([node(), "--input-type=module", "-e", SCRIPT], cwd=NODE_MODULES.parent,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:] + "\n" + daemon.log_text()[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])

    a = out["a"]
    assert a["error"] is None, a
    assert a["stdout"][0] == "hi\n", a
    joined = "".join(a["stdout"])
    assert joined.startswith("hi\nCPU times:") and "Wall time:" in joined, a
    assert a["text"] == "2", a

    b = out["b"]
    assert b["error"] is None, b
    assert "".join(b["stdout"]) == "before\nafter\n", b
    html = [r["html"] for r in b["results"] if r["html"]]
    md = [r["markdown"] for r in b["results"] if r["markdown"]]
    assert html == ["<b>e2b-html</b>"] and md == ["*e2b-md*"], b["results"]
    main = [r for r in b["results"] if r["isMain"]]
    assert len(main) == 1 and main[0]["text"] == "[" + ",\n ".join(map(str, range(30))) + "]"
    assert b["text"] == main[0]["text"]
    # onResult saw the displays as they came, then the cell's value.
    assert [(r["html"], r["markdown"]) for r in b["streamed"] if not r["isMain"]] == \
        [("<b>e2b-html</b>", None), (None, "*e2b-md*")], b["streamed"]

    assert out["c"] == {"name": "UsageError",
                        "value": "Line magic function `%nosuchmagic` not found."}, out["c"]
