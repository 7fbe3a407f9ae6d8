"""IPython's dialect, by IPython itself (docs/IPYTHON.md).

In a profile that allows bash, configure() makes one IPython InteractiveShell in the zygote
(sessions fork with it), and a cell that is not plain Python goes through the shell's own input
transformer: leading indentation, `!cmd`, `x = !cmd`, `%magic`, `%%cell_magic`, `obj?`, pasted
prompts. What comes out is Python that calls get_ipython(): the shell's own magics run it, with
the session's namespace as their user namespace. A plain Python cell never reaches IPython (the
compiler takes it first, and nothing IPython adds is valid Python), so it runs exactly as it did
before the dialect, at the same cost.

What airlock changes in the shell, and why:
  - system() and getoutput() (`!cmd`, `x = !cmd`, %sx) run bash in the cell's directory and
    environment, output going to the cell's stdout and stderr like any output (IPython's
    pexpect needs a terminal the sandbox does not have);
  - the display publisher appends to the running cell's outputs (display(), IPython.display,
    update_display with display_id, a plotly figure's show());
  - %matplotlib is accepted and changes nothing (figures come back as PNG as they always do),
    %pip is airlock's (the session's site directory), a UsageError reads like IPython's;
  - no history database and no files of IPython's own: the shell's profile directory is a
    path that cannot exist, its db a dict, and the /dev/null IPython keeps open is closed.

In a profile without bash, IPython is never loaded: a cell that uses the dialect is refused with a
message that says the profile allows Python only (refusal())."""

import re
import sys

from . import context as ctx
from .context import _flush_streams

_shell = None  # the InteractiveShell, in profiles that allow bash; None elsewhere
_plain_formatter = None  # its text/plain formatter

# What the dialect looks like at the start of a line, for the refusal in profiles without it
# (only asked of a cell the compiler refused): a shell escape or magic, x = !cmd or %magic, and
# help (obj?, ?obj).
_DIALECT_LINE = re.compile(r"[ \t]*(?:!|%|\?|[\w.]+[ \t]*=[ \t]*[!%]|[\w.\[\]()]+\?\??[ \t]*$)")

# The shell's own names in the user namespace: machinery, never saved with a session's state.
UNSAVED = frozenset({"get_ipython", "exit", "quit", "In", "Out", "_ih", "_oh", "_dh", "_i", "_ii",
                     "_iii", "_i00", "_exit_code"})
_INPUT_NAME = re.compile(r"_i\d+\Z")


def enable():
    """Makes the shell (in the zygote, once). Returns an error message, or None."""
    global _shell, _plain_formatter
    if _shell is not None:
        return None
    try:
        import IPython.core.interactiveshell as interactiveshell
        import IPython.utils.io
        from traitlets.config import Config
    except ImportError as e:
        return f"IPython is not installed ({e}): cells run as plain Python"
    # IPython.utils.io opens /dev/null at import and keeps it: a descriptor no session needs.
    IPython.utils.io.devnull.close()
    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "NoColor"
    config.InteractiveShell.xmode = "Plain"
    config.InteractiveShell.autocall = 0
    main = sys.modules.get("__main__")

    # Nothing on disk: no profile directory, no ~/.ipython, the shell's db (%bookmark) in memory.
    class Shell(interactiveshell.InteractiveShell):
        def init_ipython_dir(self, ipython_dir):
            # The trait's value itself: setting it runs an observer that makes the directory.
            self._trait_values["ipython_dir"] = _NOWHERE

    real_db = interactiveshell.PickleShareDB
    interactiveshell.PickleShareDB = lambda root: {}
    try:
        if interactiveshell.InteractiveShell.initialized():  # configured before, in this process
            shell = interactiveshell.InteractiveShell.instance()
        else:
            shell = Shell.instance(config=config, user_module=main,
                                   user_ns=getattr(main, "__dict__", None),
                                   profile_dir=_profile_dir())
    except Exception as e:  # an IPython this was not made for: plain Python, and say why
        return f"IPython's shell could not be made ({type(e).__name__}: {e}): cells run as " \
               f"plain Python"
    finally:
        interactiveshell.PickleShareDB = real_db
    shell.system = _system
    shell.system_piped = _system
    shell.system_raw = _system
    shell.getoutput = _getoutput
    shell.display_pub = _publisher(shell)
    shell.enable_matplotlib = _enable_matplotlib
    shell.register_magic_function(_pip_magic, "line", "pip")
    shell.register_magic_function(_matplotlib_magic, "line", "matplotlib")
    _register_figure_formatter(shell)
    _register_chart_formatters(shell)
    _plain_formatter = shell.display_formatter.formatters["text/plain"]
    for kind in _PLAIN_TYPES:
        _plain_printers[kind] = _plain_formatter.type_printers.get(kind)
    # The shell's displayhook set _ to "": a session's first cell finds no _, as before.
    if isinstance(shell.user_ns.get("_"), str) and shell.user_ns["_"] == "":
        del shell.user_ns["_"]
    _drop_exiters(shell, shell.user_ns)
    _shell = shell
    forget_history(0)  # an instance made before (another configure in this process) had some
    return None


# Where IPython's own files would go: a path that can never be made (under a file), which the
# shell is given so that it looks for nothing elsewhere.
_NOWHERE = "/dev/null/ipython"


def _profile_dir():
    """IPython's profile directory object, at _NOWHERE, made without creating anything."""
    from IPython.core.profiledir import ProfileDir

    class Nowhere(ProfileDir):
        def _mkdir(self, path, mode=None):
            return False

        def check_dirs(self):
            pass

    pd = Nowhere()
    # The trait values themselves: setting location would run its observer, which makes dirs.
    pd._trait_values["location"] = _NOWHERE
    for name in ("security_dir", "log_dir", "startup_dir", "pid_dir", "static_dir"):
        pd._trait_values[name] = f"{_NOWHERE}/{name}"
    return pd


def enabled():
    return _shell is not None


def transform(code):
    """The cell as Python: IPython's input transformer applied."""
    return _shell.transform_cell(code)


def refusal(code):
    """For a profile without the dialect: a message when the cell (which the compiler refused)
    uses IPython's syntax, else None (the compiler's error stands)."""
    for line in code.splitlines():
        if _DIALECT_LINE.match(line) and not line.lstrip().startswith("%pip"):
            return (f"profile '{ctx._profile}' allows Python only: shell escapes (!cmd), IPython "
                    f"magics (%name, %%name) and help (obj?) need a profile that allows bash, "
                    f"such as 'default'")
    return None


def begin_cell(main, ns, n, warming=False):
    """Points the shell at the session's namespace (the warm-up cells run in another one) and
    its execution count, before a cell runs."""
    shell = _shell
    if shell is None:
        return
    if shell.user_ns is not ns:
        # In, Out and the rest are in a session's namespace since the zygote made the shell on
        # it; a warm-up cell's scratch namespace needs only get_ipython. init_user_ns() only for
        # another namespace: its writes copy pages each session shares with the zygote.
        shell.user_module = main
        shell.user_ns = ns
        if "In" not in ns and not warming:
            shell.init_user_ns()
            _drop_exiters(shell, ns)
    if "get_ipython" not in ns:
        ns["get_ipython"] = shell.get_ipython
    hidden = shell.user_ns_hidden
    if hidden.get("display") is not ns.get("display"):
        hidden["display"] = ns.get("display")
    # The trait's value without its validation and observers (none of them matter here): set
    # for every cell, at the cost of a dict store.
    shell._trait_values["execution_count"] = n


def _drop_exiters(shell, ns):
    """IPython's exit and quit would only end an interactive loop: the builtins' (SystemExit)
    stay."""
    for name in ("exit", "quit"):
        if ns.get(name) is shell.exiter:
            del ns[name]


def store_input(ns, n, source):
    """IPython's input history, before the cell runs: In[n] and _iN the cell as Python, _i00
    the same, _i/_ii/_iii the three before it."""
    shell = _shell
    if shell is None:
        return
    hm = shell.history_manager
    for inputs in (hm.input_hist_parsed, hm.input_hist_raw):
        while len(inputs) <= n:
            inputs.append("")
        inputs[n] = source
    ns["_iii"], ns["_ii"], ns["_i"] = ns.get("_ii", ""), ns.get("_i", ""), ns.get("_i00", "")
    ns["_i00"] = ns[f"_i{n}"] = source


def forget_history(count):
    """The history past cell count goes (the warm pool's warm-up cells), so In and Out hold the
    session's own cells only."""
    if _shell is None:
        return
    hm = _shell.history_manager
    for inputs in (hm.input_hist_parsed, hm.input_hist_raw):
        del inputs[count + 1:]
    for n in [n for n in hm.output_hist if n > count]:
        del hm.output_hist[n]


def end_cell(ns, n, has_value, value):
    """IPython's output history, after the cell: Out[n], _N and _/__/___."""
    if _shell is None or not has_value or value is None:
        return
    out = _shell.history_manager.output_hist
    out[n] = value
    ns[f"_{n}"] = value
    # As IPython's cache: past cache_size values (1000), the oldest go (and _N with them).
    while len(out) > _OUT_MAX:
        old = next(iter(out))
        del out[old]
        ns.pop(f"_{old}", None)
    ns["___"], ns["__"] = ns.get("__", ""), ns.get("_", "")


def is_unsaved(name):
    """Whether name is the shell's (only where the profile has the dialect: elsewhere _i is as
    much the user's as any name)."""
    return _shell is not None and (name in UNSAVED or _INPUT_NAME.match(name) is not None)


# Values whose text/plain IPython prints as repr() and that have no other representation: the
# hot path (a cell answering `1`) skips the ten formatters for them.
_PLAIN_TYPES = frozenset({int, float, str, bool, bytes, complex})
_OUT_MAX = 1000  # IPython's default cache_size


_plain_printers = {}  # type -> IPython's own printer of it, which prints repr()


def format_value(value):
    """IPython's representations of a value: {mime: data}, text/plain as IPython prints it."""
    kind = type(value)
    if kind in _PLAIN_TYPES:
        plain = _plain_formatter
        if plain.type_printers.get(kind) is _plain_printers.get(kind) and \
                not (kind is float and plain.float_precision):
            return {"text/plain": repr(value)}
    data, _metadata = _shell.display_formatter.format(value)
    return data


def usage_error(e):
    """A UsageError (an unknown magic, bad magic arguments) as IPython shows it: its message,
    no traceback. None for any other exception."""
    if _shell is None:
        return None
    from IPython.core.error import UsageError

    if not isinstance(e, UsageError):
        return None
    return {"name": "UsageError", "value": str(e), "traceback": f"UsageError: {e}\n"}


# --- the shell's parts airlock replaces

def _bash_argv(cmd):
    return ["/bin/bash", "-c", cmd]


def _system(cmd):
    """`!cmd`: bash in the cell's directory and environment, its output on the cell's own
    stdout and stderr as it comes. Where sys.stdout or sys.stderr is not the cell's own
    (%%capture, contextlib.redirect_stdout), the output goes there instead, once bash ended, as
    a kernel's does. The exit status goes to _exit_code, as in IPython."""
    import subprocess

    cmd = _shell.var_expand(cmd, depth=1)
    _flush_streams()
    if sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__:
        _shell.user_ns["_exit_code"] = subprocess.call(_bash_argv(cmd))
        return
    done = subprocess.run(_bash_argv(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          check=False)
    sys.stdout.write(done.stdout.decode("utf-8", "replace"))
    sys.stderr.write(done.stderr.decode("utf-8", "replace"))
    _shell.user_ns["_exit_code"] = done.returncode


def _getoutput(cmd, split=True, depth=0):
    """`x = !cmd`: bash's stdout as an SList of lines (stderr goes to the cell's stderr)."""
    import subprocess

    from IPython.utils.text import LSString, SList

    cmd = _shell.var_expand(cmd, depth=depth + 1)
    _flush_streams()
    done = subprocess.run(_bash_argv(cmd), stdout=subprocess.PIPE, check=False)
    _shell.user_ns["_exit_code"] = done.returncode
    out = done.stdout.decode("utf-8", "replace")
    return SList(out.splitlines()) if split else LSString(out)


def _publisher(shell):
    from IPython.core.displaypub import DisplayPublisher

    from .rich import publish

    class Publisher(DisplayPublisher):
        """display() and friends: each call is an output of the running cell."""

        def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                    **kwargs):
            display_id = (transient or {}).get("display_id")
            publish(data, display_id if isinstance(display_id, str) else None, bool(update))

        def clear_output(self, wait=False):
            pass

    return Publisher(shell=shell, parent=shell)


def _enable_matplotlib(gui=None):
    from .rich import _patch_pyplot

    _patch_pyplot()
    return "agg", "module://matplotlib_inline.backend_inline"


def _matplotlib_magic(line=""):
    """%matplotlib: accepted whatever the backend asked; figures come back as PNG outputs."""
    from .rich import _patch_pyplot

    _patch_pyplot()


def _pip_magic(line=""):
    """%pip: pip with the session's environment, installs importable at once (pip.py)."""
    from .pip import _pip_magic as run

    run(line)


def _register_figure_formatter(shell):
    """A matplotlib Figure, displayed or the last value, is a PNG (as the inline backend does)."""
    from .rich import _figure_png_for_formatter

    png = shell.display_formatter.formatters["image/png"]
    figure = sys.modules.get("matplotlib.figure")
    if figure is not None:  # already imported: replace what is registered for the type
        png.for_type(figure.Figure, _figure_png_for_formatter)
    else:
        png.for_type_by_name("matplotlib.figure", "Figure", _figure_png_for_formatter)


def _register_chart_formatters(shell):
    """Two formatters of IPython's display protocol for charts.py's MIME types: a Figure's
    chart, a DataFrame's data. Registered by type name, so nothing is imported for them and a
    value of another type costs a failed lookup."""
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    from . import charts

    for mime, module, name, fn in (
            (charts.CHART_MIME, "matplotlib.figure", "Figure", charts.figure_chart),
            (charts.DATA_MIME, "pandas.core.frame", "DataFrame", charts.frame_data)):
        class Formatter(BaseFormatter):
            format_type = Unicode(mime)
            print_method = ObjectName("_repr_airlock_none_")  # no object has it
            _return_type = (str,)

        formatter = Formatter(parent=shell.display_formatter)
        loaded = sys.modules.get(module)
        if loaded is not None:
            formatter.for_type(getattr(loaded, name), fn)
        else:
            formatter.for_type_by_name(module, name, fn)
        shell.display_formatter.formatters[mime] = formatter
