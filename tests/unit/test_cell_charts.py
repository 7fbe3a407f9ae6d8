"""Unit tests for src/runner/cell/charts.py: a matplotlib figure's chart and a pandas
DataFrame's data as E2B gives them (result.chart, result.data), as extra MIME types of a cell's
outputs, in a profile without IPython (rich.py's display) and with it (IPython's formatters).

    /usr/bin/python3 -m pytest tests/unit/test_cell_charts.py -q
"""

import json

import pytest

from test_cell import fresh, ok  # noqa: F401 (fixture)

CHART = "application/vnd.airlock.chart+json"
DATA = "application/vnd.airlock.data+json"


@pytest.fixture(params=["plain", "ipython"])
def cell(request, fresh, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    plt = pytest.importorskip("matplotlib.pyplot", reason="Debian's python3-matplotlib")
    plt.close("all")
    if request.param == "ipython":
        pytest.importorskip("IPython", reason="Debian's python3-ipython")
        fresh.configure("default", None, "none", True)
    else:
        fresh.configure("default", None, "none")
    yield fresh
    plt.close("all")


def charts_of(reply):
    return [json.loads(o["data"][CHART]) for o in reply["outputs"] if CHART in o["data"]]


def one_chart(cell, code):
    reply = ok(cell, "import matplotlib.pyplot as plt\n" + code)
    got = charts_of(reply)
    assert len(got) == 1, reply["outputs"]
    assert all("image/png" in o["data"] for o in reply["outputs"])
    return got[0]


def test_line_chart(cell):
    chart = one_chart(cell, "plt.plot([1, 2, 3], [1, 4, 9], label='squares')\n"
                            "plt.plot([1, 2, 3], [2, 3, 4])\nplt.title('growth')\n"
                            "plt.xlabel('time (s)')\nplt.ylabel('size [m]')\nplt.show()")
    assert chart["type"] == "line" and chart["title"] == "growth"
    assert (chart["x_label"], chart["x_unit"]) == ("time (s)", "s")
    assert (chart["y_label"], chart["y_unit"]) == ("size [m]", "m")
    assert chart["x_scale"] == "linear" and chart["y_scale"] == "linear"
    assert all(isinstance(t, float) for t in chart["x_ticks"])
    assert len(chart["x_tick_labels"]) == len(chart["x_ticks"])
    assert chart["elements"][0] == {"label": "squares", "points": [[1, 1], [2, 4], [3, 9]]}
    assert chart["elements"][1]["label"] == "Line 1"


def test_scatter_chart_with_log_scale(cell):
    chart = one_chart(cell, "plt.scatter([1, 10, 100], [3, 2, 1], label='s')\nplt.xscale('log')")
    assert chart["type"] == "scatter" and chart["x_scale"] == "log"
    assert chart["elements"] == [{"label": "s", "points": [[1, 3], [10, 2], [100, 1]]}]


def test_bar_chart_categorical(cell):
    chart = one_chart(cell, "plt.bar(['a', 'b', 'c'], [3, 1, 2], label='n')\n"
                            "plt.xlabel('letter')")
    assert chart["type"] == "bar" and chart["x_label"] == "letter"
    assert chart["elements"] == [{"label": "a", "value": 3.0, "group": "n"},
                                 {"label": "b", "value": 1.0, "group": "n"},
                                 {"label": "c", "value": 2.0, "group": "n"}]


def test_horizontal_bars_swap_the_axes(cell):
    chart = one_chart(cell, "plt.barh(['a', 'b'], [5, 2])\nplt.xlabel('count')")
    assert chart["type"] == "bar" and chart["y_label"] == "count" and chart["x_label"] is None
    assert [(e["label"], e["value"]) for e in chart["elements"]] == [("a", 5.0), ("b", 2.0)]


def test_pie_chart(cell):
    chart = one_chart(cell, "plt.pie([1, 3], labels=['x', 'y'])\nplt.title('share')")
    assert chart["type"] == "pie" and chart["title"] == "share"
    assert chart["elements"] == [{"label": "x", "angle": 90.0, "radius": 1.0},
                                 {"label": "y", "angle": 270.0, "radius": 1.0}]
    # Rounded as E2B's are: 90% of a circle is 324 degrees, not matplotlib's 323.99999...
    chart = one_chart(cell, "plt.figure(); plt.pie([90, 10], startangle=90)")
    assert [e["angle"] for e in chart["elements"]] == [324.0, 36.0]


def test_box_and_whisker_chart(cell):
    chart = one_chart(cell, "plt.boxplot([[1, 2, 3, 4, 5], [2, 4, 6, 8, 10, 40]], "
                            "labels=['a', 'b'])\nplt.xlabel('group')\nplt.ylabel('v')")
    assert chart["type"] == "box_and_whisker"
    # As E2B's: a vertical box plot keeps its labels (E2B's own box-and-whisker SDK test);
    # horizontal boxes swap them, as horizontal bars do.
    assert (chart["x_label"], chart["y_label"]) == ("group", "v")
    a, b = chart["elements"]
    assert a == {"label": "a", "min": 1.0, "first_quartile": 2.0, "median": 3.0,
                 "third_quartile": 4.0, "max": 5.0, "outliers": []}
    assert b["label"] == "b" and b["outliers"] == [40.0] and b["median"] == 7.0


def test_superchart_of_two_axes_and_unknown(cell):
    chart = one_chart(cell, "fig, (a, b) = plt.subplots(1, 2)\nfig.suptitle('both')\n"
                            "a.plot([1, 2])\nb.imshow([[1, 2], [3, 4]])\nfig")
    assert chart["type"] == "superchart" and chart["title"] == "both"
    assert [e["type"] for e in chart["elements"]] == ["line", "unknown"]
    assert chart["elements"][1]["elements"] == []


def test_datetime_axis(cell):
    chart = one_chart(cell, "import datetime as dt\n"
                            "d = [dt.datetime(2024, 1, n) for n in (1, 2, 3)]\n"
                            "plt.plot(d, [1, 2, 3])")
    assert chart["x_scale"] == "datetime"
    assert chart["elements"][0]["points"][0] == ["2024-01-01T00:00:00", 1]
    assert chart["x_ticks"][0].startswith("20")


def test_empty_figure_has_no_chart(cell):
    reply = ok(cell, "import matplotlib.pyplot as plt\nfig = plt.figure()\nfig")
    assert charts_of(reply) == []


def test_a_raising_extraction_leaves_the_png(cell, capfd):
    reply = ok(cell, "import matplotlib.pyplot as plt\nfrom matplotlib.figure import Figure\n"
                     "class Weird(Figure):\n    armed = False\n"
                     "    def get_axes(self):\n"
                     "        if self.armed:\n            raise RuntimeError('nope')\n"
                     "        return super().get_axes()\n"
                     "fig = plt.figure(FigureClass=Weird)\nfig.add_subplot().plot([1, 2])\n"
                     "fig.armed = True\nplt.show()")
    assert charts_of(reply) == []
    assert [o for o in reply["outputs"] if "image/png" in o["data"]]
    assert "no chart for this figure: RuntimeError: nope" in capfd.readouterr().err


def test_too_many_points_give_no_chart(cell, capfd):
    reply = ok(cell, "import matplotlib.pyplot as plt\nplt.plot(range(10_001))\nplt.show()")
    assert charts_of(reply) == []
    assert [o for o in reply["outputs"] if "image/png" in o["data"]]
    assert "over 10000 points" in capfd.readouterr().err
    # Under the cap, a chart whose JSON would be too large (a long label, never drawn) has none
    # either.
    reply = ok(cell, "import matplotlib.pyplot as plt\n"
                     "plt.plot([1, 2], label='x' * 300_000)\nplt.show()")
    assert charts_of(reply) == [] and [o for o in reply["outputs"] if "image/png" in o["data"]]
    assert "over 262144 bytes" in capfd.readouterr().err


@pytest.fixture
def pandas():
    return pytest.importorskip("pandas", reason="Debian's python3-pandas")


def test_dataframe_data(cell, pandas):
    reply = ok(cell, "import pandas as pd, numpy as np\n"
                     "pd.DataFrame({'a': [1, 2], 'b': ['x', None], 'c': [1.5, np.nan],\n"
                     "              'd': pd.to_datetime(['2024-01-01', '2024-01-02'])})")
    main = [o for o in reply["outputs"] if o["main"]]
    assert len(main) == 1 and "text/html" in main[0]["data"]
    assert json.loads(main[0]["data"][DATA]) == {
        "a": [1, 2], "b": ["x", None], "c": [1.5, None],
        "d": ["2024-01-01T00:00:00", "2024-01-02T00:00:00"]}


def test_displayed_dataframe_has_data(cell, pandas):
    reply = ok(cell, "import pandas as pd\ndisplay(pd.DataFrame({1: [3]}))\nNone")
    assert [json.loads(o["data"][DATA]) for o in reply["outputs"]] == [{"1": [3]}]


def test_other_values_have_no_data_or_chart(cell, pandas):
    reply = ok(cell, "import pandas as pd\ndisplay(pd.Series([1]))\n[1, 2]")
    for o in reply["outputs"]:
        assert DATA not in o["data"] and CHART not in o["data"]
