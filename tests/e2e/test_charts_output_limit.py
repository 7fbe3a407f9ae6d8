"""A figure's chart never costs the figure: an output whose chart (or a frame's data) would take
it past the profile's output limit loses the chart first, and keeps its PNG (runner.c,
bound_result; docs/API.md, "Charts and data"). A profile of this module's own, with a small
output limit."""
import base64
import json

import pytest

from airlock_daemon import profiles_daemon_fixture, sessions_fixture

SMALL = "small-output-charts"
CHART = "application/vnd.airlock.chart+json"

daemon = profiles_daemon_fixture(pytest, "airlock-e2e-charts-limit-", {SMALL: {
    "description": "a small output limit (test_charts_output_limit.py)",
    "languages": ["python"],
    "limits": {"output": "48KiB", "timeout": "60s"}}})
sessions = sessions_fixture(pytest)


def test_the_chart_goes_before_the_png(daemon, sessions):
    sid = sessions.new(profile=SMALL)
    # ~1,500 points: a chart of ~40 KB beside a PNG of ~20 KB passes 48 KiB together.
    r = daemon.execute(sid, "import matplotlib\nmatplotlib.use('Agg')\n"
                            "import matplotlib.pyplot as plt\n"
                            "plt.plot([i % 97 for i in range(1500)])\nplt.show()")
    assert r["status"] == "ok", r["error"]
    outputs = r["outputs"]
    assert len(outputs) == 1, [list(o["data"]) for o in outputs]
    data = outputs[0]["data"]
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG")
    assert CHART not in data
    assert "dropped" not in json.dumps(outputs)
    # A small figure keeps its chart under the same limit.
    r = daemon.execute(sid, "plt.plot([1, 2, 3])\nplt.show()")
    assert json.loads(r["outputs"][0]["data"][CHART])["type"] == "line"
