"""Rich outputs: display(), the _repr_*_ formatters, matplotlib figures as PNG."""

import os
import sys

from . import charts
from . import context as ctx
from .context import _flush_streams


# IPython's formatter methods, in the order a front end prefers them.
_REPR_METHODS = (
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
)
_BINARY_MIMES = ("image/png", "image/jpeg")


def _note(text):
    try:
        sys.stderr.write(f"airlock: {text}\n")
    except Exception:
        pass


def _method(obj, name):
    try:
        m = getattr(obj, name, None)
    except Exception:
        return None
    return m if callable(m) else None


def _mime_value(mime, value):
    """A formatter's return value as the string the reply carries, or None to skip it."""
    if isinstance(value, tuple) and len(value) == 2:  # (data, metadata)
        value = value[0]
    if value is None:
        return None
    if mime in _BINARY_MIMES:
        if isinstance(value, (bytes, bytearray, memoryview)):
            import binascii

            return binascii.b2a_base64(bytes(value), newline=False).decode("ascii")
        return value if isinstance(value, str) else None
    if mime == "application/json" or mime.endswith("+json"):
        if isinstance(value, str):
            return value
        import json

        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return None
    return value if isinstance(value, str) else None


def _figure_png(fig):
    import binascii
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return binascii.b2a_base64(buf.getvalue(), newline=False).decode("ascii")


def _rich_data(obj):
    """The rich representations of obj as {mime: str} (text/plain not included). Classes are
    skipped (their _repr_*_ are unbound functions); a failing formatter is skipped with a note on
    stderr, like IPython does."""
    if isinstance(obj, type):
        return {}
    data = {}
    mpl_figure = sys.modules.get("matplotlib.figure")
    if mpl_figure is not None and isinstance(obj, getattr(mpl_figure, "Figure", ())):
        try:
            data["image/png"] = _figure_png(obj)
            if ctx._cell_figures is not None:
                ctx._cell_figures.add(id(obj))
        except Exception as e:
            _note(f"cannot render figure: {type(e).__name__}: {e}")
            return data
        _add_chart(data, obj)
        return data
    bundle = _method(obj, "_repr_mimebundle_")
    if bundle is not None:
        try:
            got = bundle(include=None, exclude=None)
            if isinstance(got, tuple) and len(got) == 2:
                got = got[0]
            if isinstance(got, dict):
                for mime, value in got.items():
                    if isinstance(mime, str) and mime != "text/plain":
                        v = _mime_value(mime, value)
                        if v is not None:
                            data[mime] = v
        except Exception as e:
            _note(f"_repr_mimebundle_ failed: {type(e).__name__}: {e}")
    for meth, mime in _REPR_METHODS:
        if mime in data:
            continue
        m = _method(obj, meth)
        if m is None:
            continue
        try:
            v = _mime_value(mime, m())
        except Exception as e:
            _note(f"{meth} failed: {type(e).__name__}: {e}")
            continue
        if v is not None:
            data[mime] = v
    if "text/html" in data and charts.is_frame(obj):  # a DataFrame has HTML: ints never get here
        frame = charts.frame_data(obj)
        if frame is not None:
            data[charts.DATA_MIME] = frame
    return data


def _add_chart(data, fig):
    """E2B's chart of a figure (charts.py), beside its PNG, when it has one."""
    chart = charts.figure_chart(fig)
    if chart is not None:
        data[charts.CHART_MIME] = chart


def display(*objs):
    """Show objects as outputs of the running cell, like IPython's display(): each becomes one
    output with text/plain (its repr) and the rich formats it offers."""
    outputs = ctx._cell_outputs
    for obj in objs:
        data = {"text/plain": repr(obj)}
        data.update(_rich_data(obj))
        if outputs is not None:
            _add(outputs, {"data": data, "main": False})


display._airlock_display = True


def _add(outputs, entry):
    """Appends a display to the cell's outputs and streams it."""
    outputs.append(entry)
    _stream(entry, len(outputs) - 1, False)


def _stream(entry, index, update):
    """Sends a display to the daemon as it is made (runner.c's _display), so a streaming client
    gets it in order with stdout; index is its place among the cell's outputs, which the daemon
    uses to send only the rest at the end. The result carries every output whatever happens
    here: a display that is not sent (too large, the cell's subprocess) still arrives then."""
    send = getattr(sys.modules[__package__], "_display", None)
    if send is None or ctx._cell_outputs is None:
        return
    import json

    frame = dict(entry, index=index)
    if update:
        frame["update"] = True
    _flush_streams()
    try:
        send(json.dumps(frame))
    except (TypeError, ValueError):
        pass


def publish(data, display_id=None, update=False):
    """One display of the running cell: data is {mime: value} as IPython's formatters give it.
    An update (update_display) replaces the data of this cell's output with that display_id,
    else it is a new output. Outside a cell (a thread that outlived it) it is dropped."""
    outputs = ctx._cell_outputs
    if outputs is None or not isinstance(data, dict):
        return
    clean = {}
    for mime, value in data.items():
        if isinstance(mime, str):
            v = _mime_value(mime, value)
            if v is not None:
                clean[mime] = v
    if not clean:
        return
    if update and display_id is not None:
        for index, out in enumerate(outputs):
            if out.get("display_id") == display_id:
                out["data"] = clean
                _stream(out, index, True)
                return
    entry = {"data": clean, "main": False}
    if display_id is not None:
        entry["display_id"] = display_id
    _add(outputs, entry)


def _figure_png_for_formatter(fig):
    """IPython's image/png formatter for a matplotlib Figure (the inline backend's job): the
    figure as PNG bytes, noted as rendered so that the end of the cell does not add it again."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    if ctx._cell_figures is not None:
        ctx._cell_figures.add(id(fig))
    return buf.getvalue()


def _flush_figures(outputs):
    """Append every open pyplot figure as a PNG output, then close them all."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        nums = plt.get_fignums()
    except Exception:
        return
    rendered = ctx._cell_figures or ()
    for num in nums:
        try:
            fig = plt.figure(num)
            if id(fig) in rendered:
                continue
            data = {"image/png": _figure_png(fig), "text/plain": repr(fig)}
            _add_chart(data, fig)
            _add(outputs, {"data": data, "main": False})
        except Exception as e:
            _note(f"cannot render figure {num}: {type(e).__name__}: {e}")
    try:
        plt.close("all")
    except Exception:
        pass


def _show(*args, **kwargs):
    """plt.show() inside airlock: like Jupyter's inline backend, the open figures become outputs
    of the running cell right away and are closed, so the next plot starts on a fresh figure.
    Nothing is drawn on a screen and nothing warns."""
    if ctx._cell_outputs is not None:
        _flush_figures(ctx._cell_outputs)


def _patch_imageshow(module):
    """PIL's Image.show() displays the image as an output of the running cell (a viewer put
    before the ones that would start a program), never a window."""
    module._airlock_show = _show_image  # this package's, also when an earlier one registered
    if getattr(module, "_airlock_viewer", False):
        return

    class Viewer(module.Viewer):
        def show(self, image, **options):
            module._airlock_show(image)
            return 1

    module.register(Viewer, 0)
    module._airlock_viewer = True


def _show_image(image):
    (ctx._display or display)(image)


def _patch_image_save(module):
    """In a session that keeps E2B's conventions (ctx._save_displays: setup.home()), an image
    saved to a path is also displayed, as E2B's kernels do, before it is saved; elsewhere save()
    is PIL's. A display that fails never stops the save."""
    module._airlock_saving = _saving  # this package's, also when an earlier one patched save
    image = module.Image
    if getattr(image.save, "_airlock_save", False):
        return
    original = image.save

    def save(self, fp, format=None, **params):
        module._airlock_saving(self, fp)
        return original(self, fp, format, **params)

    save._airlock_save = True
    save.__doc__ = original.__doc__
    image.save = save


def _saving(image, fp):
    if ctx._save_displays and isinstance(fp, (str, os.PathLike)):
        try:
            _show_image(image)
        except Exception as e:
            _note(f"the saved image was not displayed: {type(e).__name__}: {e}")


def _patch_plotly(pio):
    """A plotly figure's show() gives one output: the figure's JSON
    (application/vnd.plotly.v1+json) and its HTML (a div and a script tag for plotly.js, which
    the viewer loads: inlined, plotly.js alone is over 3 MB). Never a browser, and no renderer
    activation output (plotly's notebook renderer would inline plotly.js once per session)."""
    try:
        import types

        from plotly.io import _renderers
        from plotly.io._base_renderers import HtmlRenderer

        pio.renderers["airlock"] = HtmlRenderer(connected=True, full_html=False, requirejs=False)
        pio.renderers.default = "plotly_mimetype+airlock"
        # plotly hands the bundle to IPython's display(), which prints it where the profile has
        # no IPython shell: it goes to this cell's outputs in every profile.
        _renderers.ipython_display = types.SimpleNamespace(display=_plotly_display)
    except Exception as e:  # another plotly: its own default stays
        _note(f"plotly's renderer is left as it was: {type(e).__name__}: {e}")


def _plotly_display(bundle, raw=False, **kwargs):
    publish(bundle)


def _patch_pyplot_module(module):
    module.show = _show


# What is changed in a library as soon as it is imported: module name -> patch(module).
_PATCHES = {"matplotlib.pyplot": _patch_pyplot_module, "PIL.ImageShow": _patch_imageshow,
            "PIL.Image": _patch_image_save, "plotly.io": _patch_plotly}


class _PatchingLoader:
    """Wraps the loader of a module of _PATCHES so that it is patched as soon as it has been
    executed, also when a cell imports it for the first time and uses it at once (plt.show()).
    Everything else (get_source for tracebacks, resources) goes to the real loader."""

    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)


class _PyplotHook:
    """A sys.meta_path finder that only answers for the modules of _PATCHES (it is asked only
    about modules not imported yet, so it costs one call per new module)."""

    _airlock_pyplot_hook = True

    def find_spec(self, name, path=None, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if getattr(finder, "_airlock_pyplot_hook", False):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, patch)
                return spec
        return None


def _install_pyplot_hook():
    # Replace a hook that an earlier instance of this module installed.
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "_airlock_pyplot_hook", False)]
    sys.meta_path.insert(0, _PyplotHook())


def _patch_pyplot():
    """Patches what was imported before the hook was there (preload())."""
    for name in ("PIL.ImageShow", "PIL.Image"):
        module = sys.modules.get(name)
        if module is not None:
            try:
                _PATCHES[name](module)
            except Exception:
                pass
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and getattr(plt, "show", None) is not _show:
        try:
            plt.show = _show
        except Exception:
            pass
