"""A matplotlib figure's chart and a pandas DataFrame's data as output fields of the native API
(issue 25, docs/API.md): application/vnd.airlock.chart+json and
application/vnd.airlock.data+json beside the PNG and the HTML, in `outputs` and in the ndjson
`output` events as the cell makes them, and in MCP's run_python structuredContent; nothing for
other values. The E2B SDK's view of the same (result.chart, result.data) is
tests/mcp/e2b-data.test.mjs."""
import json

import pytest

from airlock_daemon import daemon_fixture, ndjson_events
from hub_helpers import DaemonMcp
from test_ipython import ok, sid  # noqa: F401 (fixture)

daemon = daemon_fixture(pytest, args=("--pool-size", "1"))

CHART = "application/vnd.airlock.chart+json"
DATA = "application/vnd.airlock.data+json"


def test_a_figure_has_its_chart_beside_the_png(daemon, sid):
    o = ok(daemon, sid, "import matplotlib.pyplot as plt\n"
                        "plt.bar(['x', 'y'], [2, 5])\nplt.title('counts')\nplt.show()")
    assert len(o["outputs"]) == 1
    data = o["outputs"][0]["data"]
    assert data["image/png"] and data["text/plain"].startswith("<Figure")
    chart = json.loads(data[CHART])
    assert chart["type"] == "bar" and chart["title"] == "counts"
    assert [(e["label"], e["value"]) for e in chart["elements"]] == [("x", 2.0), ("y", 5.0)]


def test_a_dataframe_value_has_its_data(daemon, sid):
    o = ok(daemon, sid, "import pandas as pd\npd.DataFrame({'n': [1, 2], 's': ['a', 'b']})")
    (main,) = o["outputs"]
    assert main["main"] is True and "<table" in main["data"]["text/html"]
    assert json.loads(main["data"][DATA]) == {"n": [1, 2], "s": ["a", "b"]}


def test_plain_values_get_neither(daemon, sid):
    o = ok(daemon, sid, "1")
    assert o["result"] == "1" and o["outputs"] == []
    o = ok(daemon, sid, "import pandas as pd\ndisplay(pd.Series([1, 2]))\n{'a': 1}")
    assert all(DATA not in x["data"] and CHART not in x["data"] for x in o["outputs"])


def test_streamed_output_events_carry_chart_and_data(daemon, sid):
    code = ("import pandas as pd, matplotlib.pyplot as plt\n"
            "display(pd.DataFrame({'k': [3]}))\n"
            "plt.plot([1, 2], [3, 4], label='l')\nplt.show()\n"
            "print('done')")
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": code},
                    headers={"Accept": "application/x-ndjson"}, stream=True, timeout=60)
    assert r.status_code == 200
    events = [e for _, e in ndjson_events(r)]
    kinds = [e["type"] for e in events]
    assert kinds.index("output") < kinds.index("stdout"), kinds
    outs = [e for e in events if e["type"] == "output"]
    assert json.loads(outs[0]["data"][DATA]) == {"k": [3]}
    chart = json.loads(outs[1]["data"][CHART])
    assert chart["type"] == "line"
    assert chart["elements"] == [{"label": "l", "points": [[1, 3], [2, 4]]}]


def test_mcp_run_python_carries_them_in_structured_content(daemon):
    with DaemonMcp(daemon) as c:
        c.initialize()
        res = c.call("run_python", {"code": "import pandas as pd, matplotlib.pyplot as plt\n"
                                            "plt.pie([1, 3], labels=['a', 'b'])\nplt.show()\n"
                                            "pd.DataFrame({'z': [0]})"}, timeout=60)
        assert res.get("isError") is False, res
        outs = res["structuredContent"]["outputs"]
        assert [e["label"] for e in json.loads(outs[0]["data"][CHART])["elements"]] == ["a", "b"]
        assert json.loads(outs[1]["data"][DATA]) == {"z": [0]}
