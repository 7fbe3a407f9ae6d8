"""A matplotlib figure's chart and a pandas DataFrame's data, in the shapes E2B's code
interpreter gives them (result.chart, result.data), as two extra outputs' MIME types:
CHART_MIME and DATA_MIME, JSON text (docs/API.md). The E2B route maps them onto the SDK's fields.

Only objects of modules already imported are looked at (sys.modules, never an import), so a
cell whose value is not a DataFrame or a Figure pays one dict lookup. An extraction that raises
(a figure no one foresaw, a user subclass whose methods raise) gives no chart or data, never a
failed cell: the figure still comes back as PNG."""

import math
import re
import sys

CHART_MIME = "application/vnd.airlock.chart+json"
DATA_MIME = "application/vnd.airlock.data+json"

# Past these a chart or data is left out (the PNG or HTML stays): its JSON shares the output with
# the PNG or HTML, and outputs larger than the profile's output limit are dropped whole
# (runner.c, bound_result), so a chart must never cost the figure. ~26 bytes a point and ~18 a
# cell keep either well under the default profile's 1 MiB; JSON_MAX bounds what a value's
# text makes of that.
POINTS_MAX = 10_000
CELLS_MAX = 10_000
JSON_MAX = 256 * 1024

_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


def _note(text):
    try:
        sys.stderr.write(f"airlock: {text}\n")
    except Exception:
        pass


def _dumps(obj):
    """obj as JSON text: NaN and infinities become null, unknown types their str(). None past
    JSON_MAX bytes (long strings in a frame's cells, long labels), said on stderr."""
    import json

    text = json.dumps(_clean(obj), allow_nan=False, default=str, separators=(",", ":"))
    if len(text) > JSON_MAX:
        _note(f"no chart or data for this output: its JSON would be over {JSON_MAX} bytes")
        return None
    return text


def _clean(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if v is None or isinstance(v, (str, bool, int)):
        return v
    iso = getattr(v, "isoformat", None)
    if callable(iso):  # datetime, date, pandas.Timestamp
        return iso()
    item = getattr(v, "item", None)
    if callable(item):  # a numpy scalar
        try:
            return _clean(item())
        except Exception:
            pass
    return str(v)


# --- DataFrames

def is_frame(obj):
    pandas = sys.modules.get("pandas")
    frame = getattr(pandas, "DataFrame", None) if pandas is not None else None
    return frame is not None and isinstance(obj, frame)


def _guarded(what, extract, obj):
    """extract(obj), or None with a note on stderr when it raises: SystemExit and the rest too,
    an extraction never ends the cell or the session."""
    try:
        return extract(obj)
    except KeyboardInterrupt:  # the daemon's interrupt or timeout: the cell stops
        raise
    except BaseException as e:
        _note(f"no {what}: {type(e).__name__}: {e}")
        return None


def frame_data(df):
    """A DataFrame's columns as {column: [values]} (E2B's data: the index is not in it), as JSON
    text; None past CELLS_MAX cells or when it cannot be had."""
    return _guarded("data for this DataFrame", _frame_data, df)


def _frame_data(df):
    if int(df.size) > CELLS_MAX:
        return None
    cols = df.to_dict(orient="list")
    return _dumps({(k if isinstance(k, str) else str(k)): v for k, v in cols.items()})


# --- matplotlib figures

def figure_chart(fig):
    """E2B's chart of a figure as JSON text: the one axes' chart, a "superchart" of each axes'
    for several, None for a figure with no data or one that cannot be read."""
    return _guarded("chart for this figure", _figure_chart, fig)


def _figure_chart(fig):
    axes = list(fig.get_axes())
    if not axes or not any(ax.has_data() for ax in axes):
        return None
    budget = [POINTS_MAX]
    if len(axes) == 1:
        chart = _axes_chart(axes[0], budget)
    else:
        chart = {"type": "superchart", "title": _suptitle(fig) or None,
                 "elements": [_axes_chart(ax, budget) for ax in axes]}
    if budget[0] < 0:
        _note(f"no chart for this figure: over {POINTS_MAX} points")
        return None
    return _dumps(chart)


def _suptitle(fig):
    if hasattr(fig, "get_suptitle"):  # matplotlib 3.8 and later
        return fig.get_suptitle()
    text = getattr(fig, "_suptitle", None)
    return text.get_text() if text is not None else ""


def _kind(ax):
    """The chart type of an axes from the artists on it."""
    from matplotlib.collections import PathCollection
    from matplotlib.patches import PathPatch, Rectangle, Wedge

    lines = [ln for ln in ax.get_lines() if not _is_rule(ln)]
    patches = list(ax.patches)
    collections = list(ax.collections)
    others = list(ax.images) + list(getattr(ax, "tables", ()))
    if others:
        return "unknown"
    if lines and not patches and not collections:
        # boxplot() without patch_artist draws each box as a closed line
        return "box_and_whisker" if any(_is_box(ln) for ln in lines) else "line"
    if patches and not collections and all(isinstance(p, PathPatch) for p in patches):
        return "box_and_whisker"
    if lines:
        return "unknown"
    if collections and not patches and all(isinstance(c, PathCollection) for c in collections):
        return "scatter"
    if patches and not collections:
        if all(isinstance(p, Wedge) for p in patches):
            return "pie"
        if all(isinstance(p, Rectangle) for p in patches):
            return "bar"
    return "unknown"


def _is_box(line):
    """A closed rectangle of five points: a box of boxplot() without patch_artist."""
    x, y = line.get_xdata(), line.get_ydata()
    return len(x) == 5 and len(y) == 5 and x[0] == x[4] and y[0] == y[4] and \
        len(set(x)) == 2 and len(set(y)) == 2


def _is_rule(line):
    """A straight horizontal or vertical two-point line (axhline, a grid line)."""
    x, y = line.get_xdata(), line.get_ydata()
    return len(x) == 2 and len(y) == 2 and (x[0] == x[1] or y[0] == y[1])


def _axes_chart(ax, budget):
    kind = _kind(ax)
    chart = {"type": kind, "title": ax.get_title() or None, "elements": []}
    if kind == "pie":
        chart["elements"] = _pie(ax)
        return chart
    if kind == "unknown":
        return chart
    chart.update(_labels(ax))
    if kind in ("line", "scatter"):
        chart.update(_axis(ax, "x"))
        chart.update(_axis(ax, "y"))
        chart["elements"] = _lines(ax, budget) if kind == "line" else _scatter(ax, budget)
    elif kind == "bar":
        chart["elements"] = _bars(ax, chart)
    else:
        chart["elements"] = _boxes(ax, chart)
    return chart


def _labels(ax):
    out = {}
    for axis in ("x", "y"):
        label = getattr(ax, f"get_{axis}label")() or None
        unit = None
        if label:
            m = _UNIT.search(label)
            if m:
                unit = m.group(1) or m.group(2)
        out[f"{axis}_label"], out[f"{axis}_unit"] = label, unit
    return out


def _swap(chart):
    """x and y's labels and units exchanged (horizontal bars and boxes: E2B's x is where the
    categories are)."""
    for key in ("label", "unit"):
        chart[f"x_{key}"], chart[f"y_{key}"] = chart[f"y_{key}"], chart[f"x_{key}"]


def _converter(axis):
    get = getattr(axis, "get_converter", None)
    return get() if callable(get) else getattr(axis, "converter", None)


def _is_dates(axis):
    return type(_converter(axis)).__module__ == "matplotlib.dates"


def _axis(ax, name):
    """x_ticks, x_tick_labels and x_scale (or y_...)."""
    axis = getattr(ax, f"{name}axis")
    ticks = list(getattr(ax, f"get_{name}ticks")())
    labels = [t.get_text() for t in getattr(ax, f"get_{name}ticklabels")()]
    if _is_dates(axis):
        from matplotlib.dates import num2date

        return {f"{name}_ticks": [num2date(t).isoformat() for t in ticks],
                f"{name}_tick_labels": labels, f"{name}_scale": "datetime"}
    scale = getattr(ax, f"get_{name}scale")()
    if scale == "linear" and type(axis.units).__module__ == "matplotlib.category":
        scale = "categorical"
    return {f"{name}_ticks": [float(t) for t in ticks], f"{name}_tick_labels": labels,
            f"{name}_scale": scale}


def _point(v, dates):
    if dates and isinstance(v, (int, float)) and not isinstance(v, bool):
        from matplotlib.dates import num2date

        return num2date(v).isoformat()
    return _clean(v)


def _lines(ax, budget):
    elements = []
    xdates = _is_dates(ax.xaxis)
    ydates = _is_dates(ax.yaxis)
    for i, line in enumerate(ln for ln in ax.get_lines() if not _is_rule(ln)):
        label = str(line.get_label())
        if label.startswith("_child"):
            label = f"Line {label[6:]}"
        elif label.startswith("_"):
            label = f"Line {i}"
        xs, ys = list(line.get_xdata()), list(line.get_ydata())
        if _over(budget, len(xs)):
            return elements
        elements.append({"label": label, "points": [[_point(x, xdates), _point(y, ydates)]
                                                    for x, y in zip(xs, ys)]})
    return elements


def _over(budget, n):
    budget[0] -= n
    return budget[0] < 0


def _scatter(ax, budget):
    elements = []
    for c in ax.collections:
        offsets = c.get_offsets()
        if _over(budget, len(offsets)):
            return elements
        elements.append({"label": str(c.get_label()),
                         "points": [[_clean(float(x)), _clean(float(y))] for x, y in offsets]})
    return elements


def _pie(ax):
    return [{"label": str(w.get_label()), "angle": _round(abs(w.theta2 - w.theta1)),
             "radius": _round(w.r)} for w in ax.patches]


def _round(v):
    """v rounded as E2B's charts are: to 8 significant digits less its power of ten (so three
    decimals in the hundreds: 108.00000000000001 is 108.0, a pie's 323.99999 degrees 324.0)."""
    import math

    v = float(v)
    if v == 0 or not math.isfinite(v):
        return v
    digits = max(1, 8 - math.floor(math.log10(abs(v))))
    return float(f"{v:.{digits}g}")


def _tick_label(ticks, labels, pos, index, width):
    """The tick label at pos (a bar's centre), else the index-th one."""
    for t, text in zip(ticks, labels):
        if abs(t - pos) <= width / 2:
            return text
    return labels[index] if index < len(labels) else f"{pos:g}"


def _bars(ax, chart):
    """E2B's bars: {label, value, group} per bar, the group being the container's label."""
    containers = [c for c in ax.containers if hasattr(c, "patches")] or [ax.patches]
    rects = [r for c in containers for r in c]
    horizontal = len(rects) > 1 and len({r.get_height() for r in rects}) == 1 and \
        len({r.get_width() for r in rects}) > 1
    if horizontal:
        _swap(chart)
    ticks = list(ax.get_yticks() if horizontal else ax.get_xticks())
    labels = [t.get_text() for t in (ax.get_yticklabels() if horizontal else ax.get_xticklabels())]
    elements = []
    for n, container in enumerate(containers):
        group = str(getattr(container, "get_label", lambda: "")() or "")
        if not group or group.startswith("_"):
            group = f"Group {n}"
        for i, r in enumerate(container):
            if horizontal:
                pos, size, value = r.get_y() + r.get_height() / 2, r.get_height(), r.get_width()
            else:
                pos, size, value = r.get_x() + r.get_width() / 2, r.get_width(), r.get_height()
            elements.append({"label": _tick_label(ticks, labels, pos, i, size),
                             "value": _clean(float(value)), "group": group})
    return elements


def _boxes(ax, chart):
    """E2B's box and whisker elements from what boxplot() draws: a box per element (first to
    third quartile: a PathPatch, or a closed line without patch_artist), two-point lines for the whiskers, caps and median, and the fliers as lines of
    markers. Vertical boxes (boxplot's default) have horizontal medians and caps."""
    segs = []
    fliers = []
    shapes = [p.get_path().vertices for p in ax.patches]
    shapes = [(list(v[:, 0]), list(v[:, 1])) for v in shapes]
    for line in ax.get_lines():
        x, y = [float(v) for v in line.get_xdata()], [float(v) for v in line.get_ydata()]
        if not ax.patches and _is_box(line):
            shapes.append((x, y))
        elif len(x) == 2 and len(y) == 2 and line.get_linestyle() not in ("None", "", " "):
            segs.append((x, y))
        elif x:
            fliers.append((x, y))
    flat = sum(1 for x, y in segs if y[0] == y[1] and x[0] != x[1])
    upright = sum(1 for x, y in segs if x[0] == x[1] and y[0] != y[1])
    vertical = flat >= upright
    if not vertical:
        _swap(chart)
    ticks = list(ax.get_xticks() if vertical else ax.get_yticks())
    labels = [t.get_text() for t in (ax.get_xticklabels() if vertical else ax.get_yticklabels())]
    elements = []
    for i, (xs, ys) in enumerate(shapes):
        pos_v, val_v = (xs, ys) if vertical else (ys, xs)
        lo, hi = float(min(pos_v)), float(max(pos_v))
        q1, q3 = float(min(val_v)), float(max(val_v))
        box = {"label": _tick_label(ticks, labels, (lo + hi) / 2, i, hi - lo), "min": q1,
               "first_quartile": q1, "median": q1, "third_quartile": q3, "max": q3,
               "outliers": []}
        for x, y in segs:
            pos, val = (x, y) if vertical else (y, x)
            if not (lo - 1e-9 <= min(pos) and max(pos) <= hi + 1e-9):
                continue
            if val[0] == val[1]:  # a median or a cap
                if q1 < val[0] < q3 or (q1 == q3 == val[0]):
                    box["median"] = val[0]
            elif pos[0] == pos[1]:  # a whisker, from a quartile out to the min or max
                if min(val) <= q1:
                    box["min"] = min(val)
                if max(val) >= q3:
                    box["max"] = max(val)
        for x, y in fliers:
            pos, val = (x, y) if vertical else (y, x)
            box["outliers"] += [v for p, v in zip(pos, val) if lo - 1e-9 <= p <= hi + 1e-9]
        box["outliers"] = [_round(v) for v in box["outliers"]]
        elements.append({k: (_round(v) if isinstance(v, float) else v) for k, v in box.items()})
    return elements
