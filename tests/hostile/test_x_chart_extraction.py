"""Extra (issue 25): user code hands the chart and data extraction (src/runner/cell/charts.py,
E2B's result.chart and result.data) objects whose methods raise, lie about their size or
return garbage. Expected safe outcome: the cell is ok, the figure still comes back as PNG (the
frame as HTML) with no chart (no data), stderr says why, and the daemon or CLI is unharmed
(the guard checks the host after each)."""
from conftest import run

CHART = "application/vnd.airlock.chart+json"
DATA = "application/vnd.airlock.data+json"

PREFIX = "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"


def _outputs(res):
    assert res.json is not None and res.status == "ok", res.describe()
    return res.json["outputs"]


def test_a_figure_whose_methods_raise_is_a_png_without_chart():
    res = run(PREFIX + r'''
from matplotlib.figure import Figure
class Raising(Figure):
    armed = False
    def get_axes(self):
        if self.armed:
            raise RuntimeError("hostile get_axes")
        return super().get_axes()
fig = plt.figure(FigureClass=Raising)
fig.add_subplot().plot([1, 2, 3])
fig.armed = True
plt.show()
print("after")
''')
    outs = _outputs(res)
    assert len(outs) == 1 and outs[0]["data"]["image/png"], res.describe()
    assert CHART not in outs[0]["data"], res.describe()
    assert res.out == "after\n", res.describe()
    assert "no chart for this figure: RuntimeError: hostile get_axes" in res.err, res.describe()


def test_lines_that_lie_and_raise_are_a_png_without_chart():
    res = run(PREFIX + r'''
from matplotlib.lines import Line2D
class Hostile(BaseException):
    pass
class Liar(list):
    def __len__(self):
        return 2 ** 62
    def __iter__(self):
        raise MemoryError("hostile iteration")
class Bad(Line2D):
    armed = False
    def get_xdata(self, orig=True):
        return Liar([1, 2]) if self.armed else super().get_xdata(orig)
    def get_label(self):
        if self.armed:
            raise Hostile("hostile label")
        return super().get_label()
fig, ax = plt.subplots()
line = Bad([0, 1], [0, 1])
ax.add_line(line)
fig.canvas.draw()
line.armed = True
fig
''')
    outs = _outputs(res)
    assert len(outs) == 1 and outs[0]["main"] is True, res.describe()
    assert outs[0]["data"]["image/png"] and CHART not in outs[0]["data"], res.describe()
    assert "no chart for this figure: Hostile: hostile label" in res.err, res.describe()


def test_a_frame_whose_to_dict_raises_has_html_and_no_data():
    res = run(r'''
import pandas as pd
class Frame(pd.DataFrame):
    @property
    def _constructor(self):
        return Frame
    def to_dict(self, *a, **k):
        raise RuntimeError("hostile to_dict")
Frame({"a": [1, 2]})
''')
    outs = _outputs(res)
    assert len(outs) == 1 and "<table" in outs[0]["data"]["text/html"], res.describe()
    assert DATA not in outs[0]["data"], res.describe()
    assert "no data for this DataFrame: RuntimeError: hostile to_dict" in res.err, res.describe()
