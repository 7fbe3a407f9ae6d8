#!/usr/bin/env python3
"""The seed's agent loop on airlock's Python client (docs/CLIENTS.md): a model asks for
run_python tool calls, a Sandbox runs them, the results go back, until the model answers.

    python3 examples/agent-loop.py [PLOT.png]

With OPENAI_BASE_URL and OPENAI_API_KEY set (and OPENAI_MODEL, default gpt-4o-mini) it talks to
that OpenAI-compatible endpoint (standard library HTTP, no openai package); otherwise a scripted
fake model asks for what a model would: load a CSV, fix its dates, plot it. The daemon is found
as the CLI finds it (AIRLOCK_URL, AIRLOCK_TOKEN or the token file); the plot lands in PLOT.png
(default ./agent-loop-plot.png)."""
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients",
                                 "python"))     # run from a checkout without pip install
from airlock import Sandbox  # noqa: E402

TOOLS = [{"type": "function", "function": {
    "name": "run_python",
    "description": "Run Python in a persistent sandbox (pandas, matplotlib); files in /work.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
                   "required": ["code"]}}}]
TASK = ("sales.csv has a date column in mixed formats and an amount column. Load it, make the "
        "dates real dates, plot amount over time and save the chart as plot.png.")
CSV = ("date,amount\n2024-01-05,120\n01/12/2024,95\nJan 19 2024,143\n2024-01-26,160\n"
       "02/02/2024,151\nFeb 9 2024,178\n")


def openai_model(messages):
    """One Chat Completions round trip to a real endpoint."""
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps({"model": os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
                         "messages": messages, "tools": TOOLS}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)["choices"][0]["message"]


SCRIPT = [
    "import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf.dtypes",
    "df['date'] = df['date'].map(pd.to_datetime)\ndf = df.sort_values('date')\ndf",
    "import matplotlib.pyplot as plt\nplt.plot(df['date'], df['amount'], marker='o')\n"
    "plt.title('amount over time'); plt.gcf().autofmt_xdate(); plt.savefig('plot.png')",
]


def fake_model(messages):
    """What a model would answer: the next scripted tool call, then a closing sentence."""
    step = sum(m["role"] == "tool" for m in messages)
    if step < len(SCRIPT):
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{step}", "type": "function", "function": {
                "name": "run_python", "arguments": json.dumps({"code": SCRIPT[step]})}}]}
    return {"role": "assistant", "content": "Dates parsed, chart saved as plot.png."}


def main():
    model = openai_model if os.environ.get("OPENAI_BASE_URL") and \
        os.environ.get("OPENAI_API_KEY") else fake_model
    out = sys.argv[1] if len(sys.argv) > 1 else "agent-loop-plot.png"
    messages = [{"role": "user", "content": TASK}]
    with Sandbox(profile="visualization") as sb:
        sb.files.write("sales.csv", CSV)
        while True:                                     # the loop itself
            msg = model(messages)
            messages.append(msg)
            if not msg.get("tool_calls"):
                break
            for call in msg["tool_calls"]:
                code = json.loads(call["function"]["arguments"])["code"]
                ex = sb.run_code(code)
                print(f"--- run_python:\n{code}\n>>> {ex.for_model()}\n")
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": ex.for_model()})
        print("model:", msg["content"])
        with open(out, "wb") as f:
            f.write(sb.files.read("plot.png"))
    print("saved the plot as", out)


if __name__ == "__main__":
    main()
