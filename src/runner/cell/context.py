"""What the package's modules share: the session's mutable state (the profile's policy, the
execution count, the running cell's outputs), the constants that name cells, and small helpers."""

import builtins
import os
import sys


# The directory of this package's files as their code objects name it (whatever runner.c compiled
# them as: "airlock_cell/NAME.py"): frames of these files are stripped from user-visible
# tracebacks.
_SELF = os.path.dirname((lambda: None).__code__.co_filename) + "/"

# Code compiled from a cell carries this filename prefix; it is how the import guard and the
# traceback filter recognise user code.
_CELL_PREFIX = "<cell "

_profile = "default"
# Importable whatever the profile's allow-list: airlock_tools is airlock's own (Code Mode), and
# what it may call is decided by the daemon, not by the import.
_ALWAYS_ALLOWED = frozenset({"__future__", "airlock_tools"})
_allowed = None  # frozenset of top-level module names, or None for "anything"
_allowed_text = ""
_restricted = False
_orig_import = builtins.__import__
_count = 0
_cell_outputs = None  # the outputs list of the running cell, None between cells
_cell_figures = None  # ids of matplotlib figures already rendered by the running cell
_display = None  # the display() a cell finds: IPython's where the profile has its dialect
_save_displays = False  # Image.save(path) also displays the image (E2B's kernels: setup.home())

# Cell sources stay in linecache so that tracebacks (also of functions defined in an older cell)
# show the user's lines; past this many bytes the oldest cells' sources are dropped.
_LINECACHE_MAX_BYTES = 16 << 20
_cell_sources = []  # filenames registered in linecache, oldest first
_cell_sources_bytes = 0

# Walk bounds for the files manifest, applied silently (no "truncated" entry): past the entry
# bound the walk stops and covers only what it visited (_files_changed keeps the diff honest about
# that); directories deeper than the depth bound are not entered, by either walk.
_WALK_MAX_ENTRIES = 10000
_WALK_MAX_DEPTH = 32


class PolicyError(Exception):
    """Raised (reported) when code is refused by the profile's restricted policy."""


class PipError(Exception):
    """Raised by a "%pip" line whose pip failed: the cell stops there."""


class _Refused(Exception):
    """A static refusal found before anything of the cell ran."""

    def __init__(self, name, message, line):
        super().__init__(message)
        self.name = name
        self.message = message
        self.line = line


_HIDDEN_VALUE = "_airlock_last_value"


def _source_lines(code):
    """The cell's lines as the compiler numbers them (\\n, \\r\\n and \\r end a line), each with
    its newline, for linecache."""
    text = code.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line + "\n" for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    return lines


def _flush_streams():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass


def _clean(text):
    """text as something that encodes to UTF-8: lone surrogates (str(e) of an exception built
    from undecodable bytes) would make the C side's conversion fail."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _cwd():
    try:
        return os.getcwd()
    except OSError:
        return None
