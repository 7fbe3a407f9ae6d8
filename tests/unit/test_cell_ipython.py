"""Unit tests for IPython's dialect in the cell package (src/runner/cell/ipython.py, and where
execute.py and rich.py use it), with Debian's IPython: what a profile that allows bash runs,
what a Python-only profile refuses, the history names, the display protocol and the frames a
display streams. The end-to-end tests (tests/e2e/test_ipython.py) drive the same through the
daemon and the clients.

    /usr/bin/python3 -m pytest tests/unit/test_cell_ipython.py -q
"""
import base64
import json

import pytest

from test_cell import MINIMAL, PNG_SIGNATURE, fresh, ok, refused, run  # noqa: F401 (fixture)

pytest.importorskip("IPython", reason="Debian's python3-ipython is not installed "
                                       "(scripts/deps.sh installs it)")


@pytest.fixture
def shell(fresh):
    fresh.configure("default", None, "none", True)
    return fresh


@pytest.fixture
def frames(shell):
    """What the cell streams: runner.c's _display, here a list."""
    sent = []

    def display(text):
        sent.append(json.loads(text))
        return True

    shell._display = display
    return sent


def test_plain_python_never_reaches_ipython(shell, monkeypatch):
    def boom(code):
        raise AssertionError(f"transformed: {code!r}")

    monkeypatch.setattr(shell.ipython, "transform", boom)
    r = ok(shell, "x = 5 % 3\ns = 'what? !not a shell %time'\n(x != 3, s)")
    assert r["result"] == "(True, 'what? !not a shell %time')"


def test_shell_escapes_run_bash_in_the_cells_directory(shell, capfd, tmp_path):
    # As in IPython, $NAME that is no Python name leaves the whole line to bash.
    r = ok(shell, "import os\nx = 6\n!echo got {x*7} $x\n!echo $HOME {x}\n!cd / && pwd\n!pwd\n"
                  "lines = !printf 'a\\nb\\n'\n!exit 3\n(lines, type(lines).__name__, _exit_code)")
    out = capfd.readouterr().out
    assert "got 42 6\n" in out and f"{__import__('os').environ['HOME']} {{x}}\n" in out
    assert out.count("\n/\n") == 1 and f"\n{tmp_path / 'work'}\n" in out  # !cd did not last
    assert r["result"] == "(['a', 'b'], 'SList', 3)"


def test_magics_are_ipythons(shell, capfd, tmp_path):
    r = ok(shell, "%%writefile made.py\nprint('ran', __name__)\nvalue = 41\n")
    assert (tmp_path / "work" / "made.py").read_text().startswith("print('ran'")
    r = ok(shell, "%run made.py\n%time total = value + 1\n%env AIRLOCK_T=yes\n"
                  "import os\n(total, os.environ['AIRLOCK_T'])")
    out = capfd.readouterr().out
    assert "ran __main__" in out and "Wall time" in out
    assert r["result"] == "(42, 'yes')"
    ok(shell, "%%capture cap\nprint('hidden')")
    assert "hidden" not in capfd.readouterr().out
    assert ok(shell, "cap.stdout")["result"] == "'hidden\\n'"
    assert ok(shell, "%%bash\necho from bash $((40 + 2))")["result"] is None
    assert "from bash 42" in capfd.readouterr().out
    ok(shell, "%matplotlib inline")


def test_help_prints_and_an_unknown_magic_is_a_usage_error(shell, capfd):
    ok(shell, "len?")
    assert "Return the number of items in a container." in capfd.readouterr().out
    r = refused(shell, "%nosuchmagic", "UsageError")
    assert r["value"] == "Line magic function `%nosuchmagic` not found."
    assert r["traceback"] == "UsageError: Line magic function `%nosuchmagic` not found.\n"


def test_indented_cells_run_in_every_profile(shell, fresh):
    assert ok(shell, "    a = 1\n    a + 1")["result"] == "2"


def test_indented_cells_in_a_python_only_profile(fresh):
    fresh.configure("minimal", MINIMAL, "restricted", False)
    assert ok(fresh, "    a = 1\n    a + 1")["result"] == "2"


@pytest.mark.parametrize("code", ["!ls", "files = !ls", "%time 1", "%%bash\necho hi", "len?",
                                  "    !ls"])
def test_a_python_only_profile_refuses_the_dialect_clearly(fresh, code):
    fresh.configure("minimal", MINIMAL, "restricted", False)
    err = refused(fresh, code, "PolicyError")
    assert "profile 'minimal' allows Python only" in err["value"]


def test_a_syntax_error_stays_one(fresh):
    fresh.configure("minimal", MINIMAL, "restricted", False)
    refused(fresh, "x = (", "SyntaxError")


def test_history_names(shell):
    ok(shell, "10")
    ok(shell, "x = 2")
    r = ok(shell, "(In[1], Out[1], _1, _i, In[3] == _i3, _ + 1)")
    assert r["result"] == "('10', 10, 10, 'x = 2', True, 11)"
    assert ok(shell, "__")["result"] is not None


def test_get_ipython_and_exit_stay_pythons(shell):
    assert ok(shell, "get_ipython().run_line_magic('pwd', '')")["result"].endswith("work'")
    r = run(shell, "exit(3)")
    assert r["error"]["name"] == "SystemExit" and r["exit_code"] == 3


def test_the_value_is_ipythons_text(shell):
    r = ok(shell, "list(range(40))")
    assert r["result"].startswith("[0,\n 1,\n 2,")
    assert ok(shell, "%precision 2\n3.14159")["result"] == "3.14"


def test_displays_are_outputs_in_order_and_stream(shell, frames, capfd):
    r = ok(shell, "from IPython.display import HTML, Markdown, JSON, display, update_display\n"
                  "print('a')\n"
                  "display(HTML('<b>1</b>'))\n"
                  "display(Markdown('# first'), display_id='m')\n"
                  "update_display(Markdown('# second'), display_id='m')\n"
                  "display(JSON({'k': 1}))\n"
                  "class R:\n"
                  "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                  "        return {'text/plain': 'R!', 'application/x-r': 'r-data'}\n"
                  "R()")
    kinds = [sorted(o["data"]) for o in r["outputs"]]
    assert kinds == [["text/html", "text/plain"], ["text/markdown", "text/plain"],
                     ["application/json", "text/plain"], ["application/x-r", "text/plain"]]
    assert r["outputs"][1]["data"]["text/markdown"] == "# second"
    assert r["outputs"][1]["display_id"] == "m"
    assert json.loads(r["outputs"][2]["data"]["application/json"]) == {"k": 1}
    assert r["outputs"][3]["main"] is True and r["result"] == "R!"
    # Streamed as made: each new display with its index, the update naming the one it replaces;
    # the cell's value is not streamed (it comes with the result).
    assert [(f["index"], f.get("update", False)) for f in frames] == \
        [(0, False), (1, False), (1, True), (2, False)]
    assert frames[2]["data"]["text/markdown"] == "# second"


def test_figures_and_pil_show_are_pngs(shell, frames):
    r = ok(shell, "import matplotlib.pyplot as plt\n"
                  "from PIL import Image\n"
                  "Image.new('RGB', (3, 2), 'red').show()\n"
                  "plt.plot([1, 2]); plt.show()\n"
                  "fig = plt.figure(); fig.gca().plot([2, 1])\n"
                  "fig")
    pngs = [base64.b64decode(o["data"]["image/png"]) for o in r["outputs"]]
    assert len(pngs) == 3 and all(p.startswith(PNG_SIGNATURE) for p in pngs)
    assert [o["main"] for o in r["outputs"]] == [False, False, True], r["outputs"]  # the figure once
    assert [f["index"] for f in frames] == [0, 1]


def test_an_image_saved_in_an_e2b_session_is_also_displayed(shell, tmp_path):
    save = ("from PIL import Image\n"
            "im = Image.new('RGB', (3, 2), 'red')\n"
            "im.save('a.png'); im.save(open('b.png', 'wb'), format='PNG')\n"
            "import pathlib; im.save(pathlib.Path('c.png'))")
    # Elsewhere save() is PIL's own: nothing displayed.
    assert ok(shell, save)["outputs"] == []
    # A session that lives in E2B's home keeps its kernels' convention: a save to a path (not
    # to a file object) displays the image too, then saves it.
    shell.home("/home/user")
    r = ok(shell, save)
    pngs = [base64.b64decode(o["data"]["image/png"]) for o in r["outputs"]]
    assert len(pngs) == 2 and all(p.startswith(PNG_SIGNATURE) for p in pngs)
    assert all((tmp_path / "work" / n).read_bytes().startswith(PNG_SIGNATURE)
               for n in ("a.png", "b.png", "c.png"))
    # A save that fails still raises PIL's error.
    r = run(shell, "im.save('x.unknown-extension')")
    assert r["error"]["name"] == "ValueError", r["error"]


def test_plotly_show_gives_its_json_and_html(shell):
    pytest.importorskip("plotly")
    r = ok(shell, "import plotly.graph_objects as go\n"
                  "go.Figure(go.Bar(x=['a', 'b'], y=[1, 2])).show()")
    assert len(r["outputs"]) == 1
    data = r["outputs"][0]["data"]
    assert json.loads(data["application/vnd.plotly.v1+json"])["data"][0]["type"] == "bar"
    assert 'class="plotly-graph-div"' in data["text/html"]


def test_a_failing_formatter_keeps_the_rest(shell):
    r = ok(shell, "class Bad:\n"
                  "    def _repr_html_(self):\n"
                  "        raise ValueError('no html')\n"
                  "    def __repr__(self):\n"
                  "        return 'Bad()'\n"
                  "display(Bad())\nprint('still here')\n7")
    assert r["outputs"][0]["data"] == {"text/plain": "Bad()"}
    assert r["result"] == "7"


def test_the_shells_names_are_not_saved(shell):
    ok(shell, "x = 1\n!true")
    state, modules, lost = shell.saved._split_namespace(
        __import__("sys").modules["__main__"].__dict__)
    assert "x" in state
    assert not {"In", "Out", "get_ipython", "_i", "_i1", "_exit_code"} & set(state) | lost


def test_the_warm_up_cells_leave_no_history(shell):
    import sys

    ok(shell, "first = 1")
    hm = shell.ipython._shell.history_manager
    shell.warmup_begin()
    for _ in range(3):
        ok(shell, "'warm-up cell'")
    # They take the history's path (so its first writes copy their pages then, not in the
    # session's first cell) ...
    assert hm.input_hist_raw[-1] == "'warm-up cell'" and len(hm.output_hist) == 3
    shell.warmup_end()
    # ... which is forgotten after, and the shell is back on the session's namespace.
    assert len(hm.input_hist_raw) == 2 and not hm.output_hist
    assert shell.ipython._shell.user_ns is sys.modules["__main__"].__dict__
    r = ok(shell, "(len(In), In[-1][:6], list(Out), _i1)")
    assert r["result"] == "(3, '(len(I', [], 'first = 1')"
