"""Unit tests for src/runner/cell/, the package airlock_cell: the runner's cell logic.

Run with Debian's interpreter (the one the runner embeds):
    /usr/bin/python3 -m pytest tests/unit/test_cell.py -q

The package is loaded from its source directory, a fresh instance per test, with a fresh __main__
module, the original builtins.__import__ restored afterwards and a private working directory, so
configure() in one test never leaks into another.
"""

import base64
import builtins
import importlib.util
import itertools
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import types

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "runner" / "cell"
MINIMAL = ["math", "statistics", "itertools", "functools", "re", "datetime", "collections",
           "json", "csv", "string", "textwrap", "decimal", "fractions", "random", "operator",
           "typing"]
KEYS = {"status", "result", "error", "exit_code", "outputs", "execution_count", "files"}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_instances = itertools.count()


def load_module():
    """A fresh instance of the package under a name of its own (its modules with it)."""
    name = f"airlock_cell_{next(_instances)}"
    spec = importlib.util.spec_from_file_location(name, SRC / "__init__.py",
                                                  submodule_search_locations=[str(SRC)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # the relative imports of its modules find it there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A new module instance, unconfigured (the runner's defaults: any import, no policy)."""
    # monkeypatch restores each of these at teardown.
    monkeypatch.setattr(builtins, "__import__", builtins.__import__)
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no __pycache__ in src/
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return load_module()


@pytest.fixture
def cell(fresh):
    fresh.configure("default", None, "none")
    return fresh


@pytest.fixture
def minimal(fresh):
    fresh.configure("minimal", MINIMAL, "none")
    return fresh


@pytest.fixture
def restricted(fresh):
    fresh.configure("minimal", MINIMAL, "restricted")
    return fresh


def run(mod, code):
    reply = mod.run_cell(code)
    assert set(reply) == KEYS
    json.dumps(reply)  # the C side turns it into JSON: every value must be plain data
    return reply


def ok(mod, code):
    reply = run(mod, code)
    assert reply["status"] == "ok", reply["error"]
    assert reply["error"] is None and reply["exit_code"] == 0
    return reply


def refused(mod, code, name):
    reply = run(mod, code)
    assert reply["status"] == "error"
    assert reply["exit_code"] == 1
    assert reply["result"] is None
    assert reply["error"]["name"] == name
    return reply["error"]


# --- notebook semantics -------------------------------------------------------------------------

def test_last_expression_value_is_its_repr(cell):
    assert ok(cell, "x = 20\nx + 22")["result"] == "42"
    assert ok(cell, "'a' * 2")["result"] == "'aa'"
    assert ok(cell, "[1, {'k': (2,)}]")["result"] == "[1, {'k': (2,)}]"


def test_none_value_gives_no_result(cell):
    assert ok(cell, "None")["result"] is None
    assert ok(cell, "print('hi')")["result"] is None


def test_statements_only_cell(cell):
    reply = ok(cell, "x = 1\nfor i in range(3):\n    x += i\n")
    assert reply["result"] is None and reply["outputs"] == [] and reply["files"] == []
    assert ok(cell, "x")["result"] == "4"


def test_empty_cell(cell):
    assert ok(cell, "")["result"] is None
    assert ok(cell, "# only a comment\n")["result"] is None


def test_trailing_semicolon_suppresses_the_value(cell):
    assert ok(cell, "1 + 1;")["result"] is None
    assert ok(cell, "1 + 1  # ; in a comment")["result"] == "2"


def test_underscore_holds_the_last_value(cell):
    ok(cell, "21 * 2")
    assert ok(cell, "_ + 1")["result"] == "43"
    ok(cell, "None")  # a None value does not replace _
    assert ok(cell, "_")["result"] == "43"


def test_variables_persist_in_main(cell):
    ok(cell, "x = 5\ndef double(v):\n    return 2 * v\n")
    assert ok(cell, "double(x)")["result"] == "10"
    assert sys.modules["__main__"].x == 5


def test_user_classes_pickle(cell):
    ok(cell, "import pickle\nclass Point:\n    def __init__(self, x):\n        self.x = x\n")
    assert ok(cell, "pickle.loads(pickle.dumps(Point(7))).x")["result"] == "7"


def test_execution_count_increments_per_call(cell):
    counts = [run(cell, c)["execution_count"] for c in ("1", "1/0", "x = (", "2")]
    assert counts == [1, 2, 3, 4]


def test_top_level_await(cell):
    reply = ok(cell, "import asyncio\nawait asyncio.sleep(0)\nasync def f():\n    return 41\n"
                     "await f() + 1")
    assert reply["result"] == "42"
    assert "_airlock_last_value" not in sys.modules["__main__"].__dict__


def test_streams_are_flushed(cell, capfd):
    ok(cell, "import sys\nsys.stdout.write('out-line')\nsys.stderr.write('err-line')")
    out, err = capfd.readouterr()
    assert "out-line" in out and "err-line" in err


# --- errors -------------------------------------------------------------------------------------

def test_exception_traceback_shows_user_lines_only(cell):
    err = refused(cell, "def f():\n    return 1 / 0\n\nf()", "ZeroDivisionError")
    assert err["value"] == "division by zero"
    tb = err["traceback"]
    assert tb.startswith("Traceback (most recent call last):\n")
    assert 'File "<cell 1>", line 4, in <module>' in tb
    assert "return 1 / 0" in tb
    assert "airlock_cell" not in tb
    assert tb.rstrip().endswith("ZeroDivisionError: division by zero")


def test_exception_traceback_keeps_library_frames(cell):
    err = refused(cell, "import json\njson.loads('{')", "JSONDecodeError")
    tb = err["traceback"]
    assert "json.loads('{')" in tb
    assert "json/decoder.py" in tb
    assert "airlock_cell" not in tb


def test_chained_exception_traceback(cell):
    err = refused(cell, "try:\n    {}['k']\nexcept KeyError as e:\n"
                        "    raise ValueError('v') from e", "ValueError")
    assert "direct cause" in err["traceback"] and "{}['k']" in err["traceback"]
    assert "airlock_cell" not in err["traceback"]


def test_exception_group_traceback(cell):
    err = refused(cell, "raise ExceptionGroup('g', [ValueError(1), KeyError(2)])",
                  "ExceptionGroup")
    assert err["traceback"].lstrip(" +").startswith("Exception Group Traceback")
    assert "ValueError: 1" in err["traceback"] and "airlock_cell" not in err["traceback"]

def test_state_survives_an_error(cell):
    run(cell, "x = 1\nraise RuntimeError('boom')\nx = 2")
    assert ok(cell, "x")["result"] == "1"


def test_syntax_error(cell):
    err = refused(cell, "y = 1\nx = (", "SyntaxError")
    assert "x = (" in err["traceback"] and "^" in err["traceback"]
    assert "SyntaxError: '(' was never closed" in err["traceback"]
    assert "airlock_cell" not in err["traceback"]
    refused(cell, "y", "NameError")  # nothing of the cell ran


def test_compile_time_errors_are_syntax_errors(cell):
    err = refused(cell, "return 5", "SyntaxError")
    assert "'return' outside function" in err["value"]


def test_system_exit_zero_is_ok(cell):
    for code in ("raise SystemExit(0)", "import sys\nsys.exit()", "raise SystemExit(None)"):
        reply = ok(cell, code)
        assert reply["result"] is None


def test_system_exit_with_status(cell):
    reply = run(cell, "x = 1\nimport sys\nsys.exit(3)")
    assert reply["status"] == "error" and reply["exit_code"] == 3
    assert reply["error"] == {"name": "SystemExit", "value": "3", "traceback": ""}
    assert run(cell, "raise SystemExit(-1)")["exit_code"] == 255  # masked like a process status
    assert ok(cell, "x")["result"] == "1"  # the session goes on


def test_system_exit_with_message(cell, capfd):
    reply = run(cell, "import sys\nsys.exit('fatal: no input')")
    assert reply["status"] == "error" and reply["exit_code"] == 1
    assert reply["error"]["name"] == "SystemExit"
    assert "fatal: no input" in capfd.readouterr().err


def test_keyboard_interrupt_raised_in_cell(cell):
    reply = run(cell, "raise KeyboardInterrupt")
    assert reply["status"] == "error" and reply["exit_code"] == 130  # 128 + SIGINT, like a shell
    assert reply["error"]["name"] == "KeyboardInterrupt"
    assert reply["error"]["traceback"].startswith("Traceback (most recent call last):")
    assert ok(cell, "1")["result"] == "1"


def refused_any_exit(mod, code, name):
    reply = run(mod, code)
    assert reply["status"] == "error" and reply["exit_code"] != 0
    assert reply["error"]["name"] == name
    return reply["error"]


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="SIGINT is delivered to the main thread")
def test_sigint_interrupts_a_running_cell(cell):
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        err = refused_any_exit(cell, "n = 0\nwhile True:\n    n += 1", "KeyboardInterrupt")
    finally:
        timer.cancel()
    assert "n += 1" in err["traceback"] or "while True" in err["traceback"]
    assert ok(cell, "n > 0")["result"] == "True"  # state kept, session usable


def test_unicode_result(cell):
    reply = ok(cell, "'héllo ☃'")
    assert reply["result"] == "'héllo ☃'"


def test_traceback_shows_source_of_older_cells(cell):
    ok(cell, "def explode():\n    raise KeyError('deep')\n")
    ok(cell, "x = 1")
    err = refused(cell, "explode()", "KeyError")
    assert 'File "<cell 1>", line 2, in explode' in err["traceback"]
    assert "raise KeyError('deep')" in err["traceback"]


def test_cell_sources_are_bounded(cell):
    import linecache
    cell.context._LINECACHE_MAX_BYTES = 100
    for i in range(10):
        ok(cell, f"x{i} = {'1' * 30}")
    assert "<cell 1>" not in linecache.cache
    assert "<cell 10>" in linecache.cache
    err = refused(cell, "1 / 0", "ZeroDivisionError")
    assert "1 / 0" in err["traceback"]


def test_lone_surrogates_are_made_encodable(cell):
    err = refused(cell, "raise ValueError('bad \\udc80 byte')", "ValueError")
    err["value"].encode("utf-8")
    err["traceback"].encode("utf-8")
    assert "\\udc80" in err["value"]


# --- import allow-list --------------------------------------------------------------------------

EXPECTED_ALLOWED = ("collections, csv, datetime, decimal, fractions, functools, itertools, json, "
                    "math, operator, random, re, statistics, string, textwrap, typing")


def test_static_import_refusal_message(minimal):
    err = refused(minimal, "import os", "ImportError")
    assert err["value"] == ("import of 'os' is not allowed by profile 'minimal'; "
                            "allowed modules: " + EXPECTED_ALLOWED)
    assert "import os" in err["traceback"] and "airlock_cell" not in err["traceback"]


@pytest.mark.parametrize("code, module", [
    ("import os.path", "os"),
    ("from os import path", "os"),
    ("import json, subprocess", "subprocess"),
    ("def f():\n    import socket\n", "socket"),
    ("from . import sibling", "."),
    ("from .pkg import thing", ".pkg"),
])
def test_static_import_refusals(minimal, code, module):
    err = refused(minimal, code, "ImportError")
    assert err["value"].startswith(f"import of '{module}' is not allowed by profile 'minimal';")


def test_static_refusal_runs_nothing(minimal):
    refused(minimal, "x = 1\nimport os", "ImportError")
    refused(minimal, "x", "NameError")


def test_allowed_imports_work(minimal):
    assert ok(minimal, "import json, collections.abc\nfrom math import sqrt\nsqrt(16)")["result"] \
        == "4.0"
    assert ok(minimal, "from __future__ import annotations\n1")["result"] == "1"


def test_dynamic_import_refused_with_policy_none(minimal):
    err = refused(minimal, "__import__('os')", "ImportError")
    assert err["value"].startswith("import of 'os' is not allowed by profile 'minimal'")
    assert "airlock_cell" not in err["traceback"]
    refused(minimal, "exec('import subprocess')", "ImportError")
    refused(minimal, "__import__('os', None, None, [])", "ImportError")
    refused(minimal, "def f():\n    return __import__('os')\nf()", "ImportError")
    reply = ok(minimal, "try:\n    __import__('socket')\nexcept ImportError as e:\n"
                        "    msg = str(e)\nmsg")
    assert "'socket' is not allowed" in reply["result"]


def test_library_internal_imports_still_work(fresh):
    fresh.configure("minimal", ["json", "random", "statistics", "datetime"], "none")
    assert ok(fresh, "import statistics\nstatistics.mean([1, 2])")["result"] == "1.5"
    # C code importing on the user's behalf (strftime imports time, strptime _strptime).
    assert ok(fresh, "import datetime\ndatetime.date(2024, 5, 1).strftime('%Y')")["result"] \
        == "'2024'"
    assert ok(fresh, "datetime.datetime.strptime('2024', '%Y').year")["result"] == "2024"


def test_guard_is_installed_once_and_removed(fresh):
    original = builtins.__import__
    fresh.configure("minimal", ["json"], "none")
    fresh.configure("minimal", ["json"], "none")
    assert builtins.__import__._airlock_original is original
    fresh.configure("default", None, "none")
    assert builtins.__import__ is original
    assert ok(fresh, "import os\nos.sep")["result"] == repr(os.sep)


def test_empty_allow_list(fresh):
    fresh.configure("locked", [], "none")
    err = refused(fresh, "import math", "ImportError")
    assert err["value"] == "import of 'math' is not allowed by profile 'locked'; " \
                           "allowed modules: (none)"


# --- restricted policy --------------------------------------------------------------------------

@pytest.mark.parametrize("code, offender", [
    ('"".__class__.__bases__[0].__subclasses__()', "__class__"),
    ("import random\nrandom._os", "_os"),
    ("from random import _os", "_os"),
    ("getattr(1, 'real')", "getattr"),
    ("def f():\n    pass\nf.__globals__", "__globals__"),
    ("def g():\n    yield 1\ng().gi_frame.f_globals", "gi_frame"),
    ("def g():\n    yield 1\nf = next\nx = g().gi_code", "gi_code"),
    ("try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame", "__traceback__"),
    ("eval('1')", "eval"),
    ("import re\nre.enum.bltns.compile", "bltns"),
    ("from re import enum\nenum.bltns", "bltns"),
    ("open('f', 'w').__class__", "__class__"),
    ("open.__self__", "__self__"),
    ("with open('f', 'w') as f:\n    f.__dict__", "__dict__"),
    ("open('f', 'w').buffer.raw.__reduce__", "__reduce__"),
    ("__builtins__", "__builtins__"),
    ("import typing\ntyping.sys.modules", "sys"),
    ("import operator\noperator.attrgetter('__class__')", "attrgetter"),
    ("import string\nstring.Formatter().get_field('0.real', [1], {})", "get_field"),
    ("'{0.__class__}'.format(1)", "__class__"),
    ("x = (1).mro", "mro"),
    ("match 'a':\n    case str(__class__=c):\n        pass", "__class__"),
])
def test_restricted_refusals(restricted, code, offender):
    err = refused(restricted, code, "PolicyError")
    assert err["value"].startswith(f"'{offender}' is not allowed by profile 'minimal' (line ")


def test_restricted_open_reads_and_writes_files(restricted, tmp_path):
    """The kernel is the boundary for files (docs/SECURITY.md): the policy lets open() be."""
    code = ("with open('data.csv', 'w') as f:\n"
            "    n = f.write('a,b\\n1,2\\n')\n"
            "import csv\n"
            "with open('data.csv', newline='') as f:\n"
            "    rows = list(csv.reader(f))\n"
            "rows")
    assert ok(restricted, code)["result"] == "[['a', 'b'], ['1', '2']]"
    assert (tmp_path / "work" / "data.csv").read_text() == "a,b\n1,2\n"
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("by path")
    assert ok(restricted, f"open({str(outside)!r}).read()")["result"] == "'by path'"
    ok(restricted, "f = open('bin', 'wb')\nf.write(bytes([0, 255]))\nf.close()")
    assert ok(restricted, "open('bin', 'rb').read()")["result"] == "b'\\x00\\xff'"


def test_restricted_open_through_io_and_pathlib(fresh):
    fresh.configure("data-science", MINIMAL + ["io", "pathlib", "time"], "restricted")
    ok(fresh, "import io, pathlib\nwith io.open('a.txt', 'w') as f:\n    f.write('x')")
    assert ok(fresh, "p = pathlib.Path('a.txt')\nwith p.open() as f:\n    t = f.read()\n"
                     "t + p.read_text()")["result"] == "'xx'"
    assert ok(fresh, "import time\ntime.sleep(0)\ntime.time() > 0")["result"] == "True"
    assert ok(fresh, "sorted(p.name for p in pathlib.Path('.').iterdir())")["result"] \
        == "['a.txt']"
    # The modules these hand out stay refused, as for every allowed module.
    for code, offender in (("pathlib.os", "os"), ("from pathlib import sys", "sys"),
                           ("pathlib.Path.__subclasses__()", "__subclasses__"),
                           ("io.open.__module__.__class__", "__class__"),
                           ("time.sleep.__self__", "__self__")):
        err = refused(fresh, code, "PolicyError")
        assert err["value"].startswith(f"'{offender}' is not allowed"), (code, err)


def test_restricted_input_reads_standard_input(restricted, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("alice\n"))
    assert ok(restricted, "name = input()\nname.upper()")["result"] == "'ALICE'"
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert refused(restricted, "input()", "EOFError")["name"] == "EOFError"


def test_restricted_message_format_and_nothing_runs(restricted):
    err = refused(restricted, 'x = 1\n"".__class__.__bases__[0].__subclasses__()', "PolicyError")
    assert err["value"] == "'__class__' is not allowed by profile 'minimal' (line 2)"
    refused(restricted, "x", "NameError")


def test_restricted_allows_ordinary_code(restricted):
    code = """
import math, statistics
from collections import Counter
class Shape:
    def __init__(self, name):
        self.name = name
class Square(Shape):
    def __init__(self, side):
        super().__init__("square")
        self.side = side
    def area(self):
        return self.side ** 2
    def __repr__(self):
        return f"{type(self).__name__}({self.side})"
squares = [Square(i) for i in range(1, 4)]
areas = {repr(s): s.area() for s in squares}
total = sum(a for a in areas.values())
words = Counter("a b a".split())
if __name__ == "__main__":
    label = f"{total:.1f} {math.sqrt(16)} {statistics.mean([1, 2, 3])} {words['a']}"
label
"""
    assert ok(restricted, code)["result"] == "'14.0 4.0 2 2'"
    assert ok(restricted, "_")["result"] == "'14.0 4.0 2 2'"


# --- rich outputs -------------------------------------------------------------------------------

HTML_CLASS = """
class Table:
    def __repr__(self):
        return 'Table()'
    def _repr_html_(self):
        return '<table><tr><td>1</td></tr></table>'
    def _repr_png_(self):
        return b'\\x89PNG\\r\\n\\x1a\\nfake'
"""


def test_rich_output_for_the_last_value(cell):
    ok(cell, HTML_CLASS)
    reply = ok(cell, "Table()")
    assert reply["result"] == "Table()"
    assert len(reply["outputs"]) == 1
    out = reply["outputs"][0]
    assert out["main"] is True
    assert out["data"]["text/plain"] == "Table()"
    assert out["data"]["text/html"] == "<table><tr><td>1</td></tr></table>"
    assert base64.b64decode(out["data"]["image/png"]).startswith(PNG_SIGNATURE)


def test_no_rich_output_for_classes_or_plain_values(cell):
    ok(cell, HTML_CLASS)
    assert ok(cell, "Table")["outputs"] == []
    assert ok(cell, "42")["outputs"] == []


def test_failing_formatter_is_skipped(cell, capfd):
    ok(cell, "class Bad:\n    def _repr_html_(self):\n        raise RuntimeError('no')\n"
             "    def _repr_markdown_(self):\n        return '**md**'\n")
    reply = ok(cell, "Bad()")
    assert reply["outputs"][0]["data"]["text/markdown"] == "**md**"
    assert "text/html" not in reply["outputs"][0]["data"]
    assert "_repr_html_ failed" in capfd.readouterr().err


def test_display(cell):
    ok(cell, HTML_CLASS)
    reply = ok(cell, "display(1, Table())\ndisplay('s')")
    assert reply["result"] is None
    assert [o["main"] for o in reply["outputs"]] == [False, False, False]
    assert reply["outputs"][0]["data"] == {"text/plain": "1"}
    assert reply["outputs"][1]["data"]["text/html"].startswith("<table>")
    assert reply["outputs"][2]["data"] == {"text/plain": "'s'"}


def test_display_outputs_kept_on_error(cell):
    reply = run(cell, "display(1)\n1 / 0")
    assert reply["status"] == "error"
    assert reply["outputs"] == [{"data": {"text/plain": "1"}, "main": False}]


@pytest.fixture
def pyplot(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    plt = pytest.importorskip("matplotlib.pyplot")
    import matplotlib
    matplotlib.use("Agg")
    plt.close("all")
    yield plt
    plt.close("all")


def png_outputs(reply):
    return [base64.b64decode(o["data"]["image/png"]) for o in reply["outputs"]
            if "image/png" in o["data"]]


def test_matplotlib_figure_becomes_png(cell, pyplot, recwarn):
    reply = ok(cell, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')")
    pngs = png_outputs(reply)
    assert len(pngs) == 1 and pngs[0].startswith(PNG_SIGNATURE)
    fig_out = [o for o in reply["outputs"] if "image/png" in o["data"]][0]
    assert fig_out["main"] is False and fig_out["data"]["text/plain"].startswith("<Figure")
    assert pyplot.get_fignums() == []  # closed after the cell
    assert png_outputs(ok(cell, "x = 1")) == []  # nothing left for the next cell


def test_plt_show_flushes_without_warning(cell, pyplot, recwarn):
    reply = ok(cell, "import matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()\n"
                     "plt.plot([2])\nplt.show()")
    assert len(png_outputs(reply)) == 2
    assert not [w for w in recwarn if "show" in str(w.message) or "GUI" in str(w.message)]
    assert pyplot.get_fignums() == []


def test_figures_are_returned_after_an_error(cell, pyplot):
    reply = run(cell, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n1 / 0")
    assert reply["status"] == "error"
    assert len(png_outputs(reply)) == 1
    assert pyplot.get_fignums() == []


def test_figure_as_last_value_is_not_duplicated(cell, pyplot):
    reply = ok(cell, "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
                     "ax.plot([1, 2])\nfig")
    pngs = png_outputs(reply)
    assert len(pngs) == 1 and pngs[0].startswith(PNG_SIGNATURE)
    assert reply["outputs"][0]["main"] is True


def test_plt_show_patched_when_pyplot_is_first_imported_in_the_cell(cell, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    matplotlib = pytest.importorskip("matplotlib")
    for name in [m for m in sys.modules if m == "matplotlib.pyplot"]:
        monkeypatch.delitem(sys.modules, name)
        # The package's attribute too: `import matplotlib.pyplot as plt` reads it, and later
        # tests must find the module sys.modules has again.
        monkeypatch.setattr(matplotlib, "pyplot", matplotlib.pyplot)
    reply = ok(cell, "import matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()\n"
                     "plt.plot([2])\nplt.show()\nlen(plt.get_fignums())")
    assert reply["result"] == "0"
    assert len(png_outputs(reply)) == 2
    # The loader wrapper must not hide the real one (tracebacks read sources through it).
    assert sys.modules["matplotlib.pyplot"].__loader__.get_source("matplotlib.pyplot")


# --- files manifest -----------------------------------------------------------------------------

def test_files_manifest(cell):
    pathlib.Path("a.txt").write_text("a")
    pathlib.Path("b.txt").write_text("b")
    pathlib.Path("keep.txt").write_text("k")
    reply = ok(cell, """
import os, pathlib
pathlib.Path('a.txt').write_text('changed!')
os.remove('b.txt')
pathlib.Path('c.txt').write_text('new')
os.makedirs('sub/deeper')
pathlib.Path('sub/deeper/d.bin').write_bytes(b'12345')
os.symlink('c.txt', 'link')
""")
    assert reply["files"] == [
        {"path": "a.txt", "size": 8, "change": "changed"},
        {"path": "b.txt", "size": 0, "change": "deleted"},
        {"path": "c.txt", "size": 3, "change": "created"},
        {"path": "link", "size": len("c.txt"), "change": "created"},
        {"path": "sub/deeper/d.bin", "size": 5, "change": "created"},
    ]
    assert ok(cell, "x = 1")["files"] == []


def test_files_manifest_sees_replaced_file(cell):
    pathlib.Path("r.txt").write_text("same")
    reply = ok(cell, "import os\nos.remove('r.txt')\nopen('tmp', 'w').write('same')\n"
                     "os.rename('tmp', 'r.txt')")
    assert reply["files"] == [{"path": "r.txt", "size": 4, "change": "changed"}]


def test_files_manifest_does_not_follow_symlinks(cell, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, "out")
    reply = ok(cell, f"open({str(outside / 'x.txt')!r}, 'w').write('x')")
    assert reply["files"] == []


def test_files_manifest_depth_bound(cell):
    cell.context._WALK_MAX_DEPTH = 1
    reply = ok(cell, "import os\nos.makedirs('a/b')\nopen('a/x', 'w').write('1')\n"
                     "open('a/b/y', 'w').write('2')")
    assert reply["files"] == [{"path": "a/x", "size": 1, "change": "created"}]


def test_files_manifest_bound_reports_no_spurious_changes(cell):
    for i in range(20):
        pathlib.Path(f"f{i:02}").write_text("x")
    cell.context._WALK_MAX_ENTRIES = 5
    assert ok(cell, "x = 1")["files"] == []


# --- configure, preload, reseed -----------------------------------------------------------------

def test_configure_rejects_unknown_policy(fresh):
    with pytest.raises(ValueError):
        fresh.configure("p", None, "strict")


def test_configure_accepts_policy_before_imports(fresh):
    fresh.configure("minimal", "none", ["json"])
    refused(fresh, "import os", "ImportError")


def test_preload(cell):
    assert cell.preload(["json", "email.utils"]) == []
    assert "email.utils" in sys.modules
    errors = cell.preload(["json", "no_such_module_xyz"])
    assert len(errors) == 1 and errors[0].startswith("no_such_module_xyz: ")
    assert "No module named" in errors[0]


def test_preload_is_not_subject_to_the_allow_list(minimal):
    assert minimal.preload(["wave"]) == []
    refused(minimal, "import wave", "ImportError")


def test_reseed_changes_random_sequence(cell):
    random.seed(1234)
    expected = [random.random() for _ in range(3)]
    random.seed(1234)
    cell.reseed()
    assert [random.random() for _ in range(3)] != expected


def test_reseed_changes_numpy_sequence(cell):
    np = pytest.importorskip("numpy")
    np.random.seed(1234)
    expected = np.random.rand(3).tolist()
    np.random.seed(1234)
    cell.reseed()
    assert np.random.rand(3).tolist() != expected


def test_import_is_light():
    code = (f"import importlib.util, sys, time\n"
            f"spec = importlib.util.spec_from_file_location('airlock_cell', "
            f"{str(SRC / '__init__.py')!r}, submodule_search_locations=[{str(SRC)!r}])\n"
            f"mod = importlib.util.module_from_spec(spec)\n"
            f"sys.modules['airlock_cell'] = mod\n"
            f"spec.loader.exec_module(mod)\n"
            f"heavy = [m for m in ('numpy', 'pandas', 'matplotlib', 'asyncio')\n"
            f"         if m in sys.modules]\n"
            f"print(heavy)\n")
    out = subprocess.run([sys.executable, "-B", "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"



# --- Code Mode: airlock_tools (the channel replaced by a recorder) ---------------------------

ECHO_INFO = {"name": "echo", "python_name": "echo", "server": "fx", "description": "Echo.",
             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                             "required": ["text"]}}


@pytest.fixture
def channel(cell):
    """cell with _channel recording each request and answering {"ok": "answer"}."""
    sent = []

    def fake(text):
        sent.append(json.loads(text))
        return json.dumps({"ok": "answer"})

    cell._channel = fake
    return sent


def test_tool_arguments_from_numpy_and_dates_are_sent_as_json(cell, channel):
    np = pytest.importorskip("numpy")
    import datetime
    assert cell.tools._tools_call("t", n=np.int64(3), xs=np.array([1.5, 2.0]), flag=np.bool_(True),
                            day=datetime.date(2025, 6, 30)) == "answer"
    assert channel == [{"op": "tool_call", "name": "t",
                        "arguments": {"n": 3, "xs": [1.5, 2.0], "flag": True,
                                      "day": "2025-06-30"}}]


@pytest.mark.parametrize("value, exc, fragment", [
    (float("nan"), ValueError, "NaN and infinity"),
    (float("-inf"), ValueError, "NaN and infinity"),
    (object(), TypeError, "an argument of type object cannot be sent to a tool"),
    ({1, 2}, TypeError, "type set"),
])
def test_tool_arguments_json_cannot_carry_are_refused_before_sending(cell, channel, value, exc,
                                                                     fragment):
    with pytest.raises(exc, match=fragment):
        cell.tools._tools_call("t", x=value)
    circular = []
    circular.append(circular)
    with pytest.raises(ValueError, match="cannot be sent as JSON: Circular reference"):
        cell.tools._tools_call("t", x=circular)
    assert channel == []


def test_tool_function_names_an_unknown_keyword(cell, channel):
    echo = cell.tools._Tool(ECHO_INFO)
    with pytest.raises(TypeError, match=r"echo\(\) got an unexpected keyword argument 'txt'; "
                                        r"its parameters: text"):
        echo(txt="x")
    with pytest.raises(TypeError, match="missing a required argument: 'text'"):
        echo()
    assert echo("positional") == "answer"
    assert channel == [{"op": "tool_call", "name": "echo", "arguments": {"text": "positional"}}]


def test_tool_function_unpickles_without_the_channel(cell, monkeypatch):
    """A stopped session's variables are loaded outside any cell, where the channel refuses."""
    import pickle

    def refuse(text):
        raise RuntimeError("airlock_tools can only be called while a cell runs")

    monkeypatch.setitem(sys.modules, cell.__name__, cell)  # pickle finds _Tool by module name
    cell._channel = refuse
    echo = pickle.loads(pickle.dumps(cell.tools._Tool(ECHO_INFO)))
    assert repr(echo) == "<airlock tool echo(text)>"
    assert "Internal tool 'echo' of server 'fx'" in echo.__doc__
    with pytest.raises(RuntimeError, match="while a cell runs"):
        echo(text="x")


# --- %pip and the session's site directory (docs/NETWORK.md, "Inside the sandbox") ----------

def test_pip_lines_become_calls_in_place(fresh):
    code = "x = 1\n%pip install a 'b>=2'\nif x:\n    %pip list  \nprint(x)\n"
    out = fresh.pip._pip_lines(code)
    assert out.splitlines() == ["x = 1", "_airlock_pip(\"install a 'b>=2'\")", "if x:",
                                "    _airlock_pip('list')", "print(x)"]
    assert fresh.pip._pip_lines("x = '%pip'\n") == "x = '%pip'\n"
    plain = "print(1)\n"
    assert fresh.pip._pip_lines(plain) is plain


def test_pip_lines_inside_a_string_stay_text(fresh):
    code = 's = """\n%pip install no\n"""\n%pip install yes\n'
    out = fresh.pip._pip_lines(code).splitlines()
    assert out[1] == "%pip install no" and out[3] == "_airlock_pip('install yes')", out


def test_pip_magic_runs_pip_and_stops_the_cell_when_it_fails(cell, monkeypatch, tmp_path):
    calls = []

    def fake_call(argv):
        calls.append(argv)
        return 0 if argv[-1] == "good" else 1

    import subprocess as sp
    monkeypatch.setattr(sp, "call", fake_call)
    monkeypatch.setenv("AIRLOCK_PIP_NO_INDEX", "profile 'p' has no package index")
    reply = cell.run_cell("a = 1\n%pip install good\na = 2\n%pip install bad\na = 3")
    assert calls == [["pip", "install", "good"], ["pip", "install", "bad"]], calls
    assert reply["status"] == "error" and reply["error"]["name"] == "PipError", reply
    assert reply["error"]["value"] == ("pip install failed (exit status 1): profile 'p' has no "
                                       "package index"), reply
    assert "%pip install bad" in reply["error"]["traceback"], reply
    assert sys.modules["__main__"].a == 2


def test_a_syntax_error_shows_the_pip_line_as_written(cell):
    reply = cell.run_cell("%pip install x\n  %pip install y\n")
    assert reply["error"]["name"] == "IndentationError", reply
    assert "%pip install y" in reply["error"]["traceback"], reply
    assert "_airlock_pip" not in reply["error"]["traceback"], reply


def test_site_dir_joins_sys_path_when_it_appears_and_is_not_a_produced_file(
        cell, monkeypatch, tmp_path):
    base = pathlib.Path.cwd() / ".local"
    monkeypatch.setenv("PYTHONUSERBASE", str(base))
    monkeypatch.setattr(sys, "path", list(sys.path))
    site = base / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    assert cell.run_cell("1")["status"] == "ok"
    assert str(site) not in sys.path

    # What pip would do from a bash cell: the next cell imports it.
    (site / "egcellpkg").mkdir(parents=True)
    (site / "egcellpkg" / "__init__.py").write_text("V = 7\n")
    (site / "extra.pth").write_text(str(tmp_path) + "\n")
    reply = cell.run_cell("import egcellpkg\negcellpkg.V")
    assert reply["result"] == "7", reply
    assert str(tmp_path) in sys.path, "the new .pth file was processed"
    system = [i for i, p in enumerate(sys.path)
              if p.startswith("/usr/") and p.endswith("-packages")]
    assert not system or sys.path.index(str(site)) < system[0], sys.path

    # Files written there are not what the cell made; the others still are.
    reply = cell.run_cell("open('.local/x.txt', 'w').write('x')\nopen('made.txt', 'w').write('m')")
    assert [f["path"] for f in reply["files"]] == ["made.txt"], reply["files"]
    sys.modules.pop("egcellpkg", None)
