"""Jupyter cells through the native API (issue 24, docs/IPYTHON.md): IPython's own input
transformer and magics in a profile that allows bash (`default`), the display protocol as
`outputs` and as ndjson `output` events, plain Python unchanged, and the Python-only profiles
refusing the dialect with a PolicyError. One daemon for the module; checks are grouped in few
cells to keep the file fast."""
import base64
import json

import pytest

from airlock_daemon import daemon_fixture, ndjson_events

daemon = daemon_fixture(pytest, args=("--pool-size", "1"))

PNG_1x1 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
           "AAAABJRU5ErkJggg==")
PY_ONLY = "allows Python only"


@pytest.fixture(scope="module")
def sid(daemon):
    """One default-profile session shared by the tests that need state across cells."""
    s = daemon.create_session()
    yield s
    daemon.delete_session(s)


def ok(daemon, sid, code, **kw):
    """Runs code; asserts it ended without error; returns the execution object."""
    o = daemon.execute(sid, code, **kw)
    assert o["status"] == "ok" and o["error"] is None, json.dumps(o, indent=1)[:4000]
    return o


def is_png(b64):
    return base64.b64decode(b64)[:8] == b"\x89PNG\r\n\x1a\n"


# ---- the input transformer ----------------------------------------------------------------

@pytest.mark.parametrize("profile", ["default", "minimal"])
def test_an_indented_cell_runs(daemon, profile):
    s = daemon.create_session(profile=profile)
    try:
        o = ok(daemon, s, "    a = 1\n    if a:\n        b = a + 1\n    b")
        assert o["result"] == "2"
    finally:
        daemon.delete_session(s)


def test_shell_escapes(daemon, sid):
    o = ok(daemon, sid, "\n".join([
        "!cd /",
        "!pwd",                                   # each escape is its own process
        "name = 'wor' + 'ld'",
        '!echo "hello {name} $name"',
        "import os; os.environ['IPY_T_VAR'] = 'env-value'",
        '!echo "env $IPY_T_VAR"',
        "!echo to-stderr >&2",
        "files = !ls /usr",
        "print(type(files).__name__, 'bin' in files, 'lib' in files.l)",
        "!exit 3",
        "print('exit', _exit_code)",
        "!true",
        "print('exit', _exit_code)",
    ]))
    assert o["stdout"] == ("/work\nhello world world\nenv env-value\nSList True True\n"
                           "exit 3\nexit 0\n"), o["stdout"]
    assert o["stderr"] == "to-stderr\n"


def test_shell_escapes_see_the_cells_cwd_and_environment(daemon, sid):
    o = ok(daemon, sid, "import os\nos.makedirs('/work/esc', exist_ok=True)\nos.chdir('/work/esc')\n"
                        "!pwd\nos.chdir('/work')\n!pwd")
    assert o["stdout"] == "/work/esc\n/work\n"


def test_line_magics(daemon, sid):
    o = ok(daemon, sid, "\n".join([
        "%time t = sum(range(1000))",
        "print('t', t)",
        "%timeit -n1 -r1 sum(range(10))",
        "%mkdir /work/mdir",
        "%cd /work/mdir",
        "print('cwd', os.getcwd())",
        "!pwd",
        "%cd /work",
        "here = %pwd",
        "print('pwd', here)",
        "%env IPY_GREETING=hola",
        "print('env', os.environ['IPY_GREETING'])",
        "!echo sh-sees-$IPY_GREETING",
        "%ls -d mdir",
        "%load_ext autoreload",
        "%autoreload 2",
        "print('loaded', get_ipython().extension_manager.loaded)",
    ]))
    out = o["stdout"]
    assert "CPU times:" in out and "Wall time:" in out and "\nt 499500\n" in out, out
    assert "per loop (mean ± std. dev. of 1 run, 1 loop each)" in out, out
    assert "cwd /work/mdir\n/work/mdir\n" in out, out
    assert "pwd /work\n" in out and "env: IPY_GREETING=hola\nenv hola\nsh-sees-hola\n" in out, out
    assert "mdir/\n" in out and "loaded {'IPython.extensions.autoreload'}\n" in out, out


def test_matplotlib_inline_is_accepted_and_figures_stay_png(daemon, sid):
    o = ok(daemon, sid, "%matplotlib inline\nimport matplotlib.pyplot as plt\n"
                        "plt.plot([1, 3, 2])\nprint('plotted')")
    assert o["stdout"] == "plotted\n"
    pngs = [x for x in o["outputs"] if "image/png" in x["data"]]
    assert len(pngs) == 1 and is_png(pngs[0]["data"]["image/png"]), o["outputs"]


def test_pip_magic_is_airlocks(daemon, sid):
    o = ok(daemon, sid, "%pip --version")
    assert o["stdout"].startswith("pip "), o["stdout"]


def test_who_lists_the_users_names_only(daemon):
    """A fresh session's %who lists what the cells defined, nothing of the runner's."""
    s = daemon.create_session()
    try:
        o = ok(daemon, s, "alpha = 1\nbeta = 'b'\n%who")
        assert o["stdout"] == "alpha\t beta\t \n", o["stdout"]
    finally:
        daemon.delete_session(s)


def test_cell_magics(daemon, sid):
    o = ok(daemon, sid, "%%time\ns = sum(range(100))\nprint('timed', s)")
    assert o["stdout"].startswith("timed 4950\nCPU times:") and "Wall time:" in o["stdout"]
    o = ok(daemon, sid, '%%bash\necho "bash $((2 + 3))"\ncd /tmp && pwd\necho "$IPY_GREETING"')
    assert o["stdout"] == "bash 5\n/tmp\nhola\n"
    o = ok(daemon, sid, "%%sh\necho sh-ran\n")
    assert o["stdout"] == "sh-ran\n"
    o = ok(daemon, sid, "%%writefile helper.py\nVALUE = 41\nprint('helper ran', VALUE + 1)\n")
    assert o["stdout"] == "Writing helper.py\n"
    assert [f["path"] for f in o["files"]] == ["helper.py"]
    r = daemon.get(f"/v1/sessions/{sid}/files/helper.py")
    assert r.status_code == 200 and r.text == "VALUE = 41\nprint('helper ran', VALUE + 1)\n"
    o = ok(daemon, sid, "%run helper.py\nVALUE + 1")
    assert o["stdout"] == "helper ran 42\n" and o["result"] == "42"
    o = ok(daemon, sid, "%%capture cap\nprint('captured text')")
    assert o["stdout"] == ""
    assert ok(daemon, sid, "cap.stdout")["result"] == repr("captured text\n")


def test_capture_takes_a_shell_escapes_output(daemon, sid):
    # As in a Jupyter kernel (whose shell escapes are IPython's system_piped, writing to
    # sys.stdout), %%capture takes a shell escape's output too: `%%capture` then `!pip install`
    # is how notebooks silence an install.
    o = ok(daemon, sid, "%%capture cap\nprint('captured text')\n!echo captured-shell")
    o2 = ok(daemon, sid, "cap.stdout")
    assert (o["stdout"], o2["result"]) == ("", repr("captured text\ncaptured-shell\n"))


def test_help_and_an_unknown_magic(daemon, sid):
    o = ok(daemon, sid, "len?")
    assert "Return the number of items in a container." in o["stdout"], o["stdout"]
    assert "Signature: len(obj, /)" in o["stdout"]
    o = daemon.execute(sid, "print('before')\n%foo\nprint('after')")
    assert o["status"] == "error"
    assert o["error"]["name"] == "UsageError"
    assert o["error"]["value"] == "Line magic function `%foo` not found."
    assert o["stdout"] == "before\n", "as in IPython, the magic fails when its line runs"


def test_get_ipython_and_the_history(daemon):
    s = daemon.create_session()
    try:
        first = ok(daemon, s, "10 * 4")
        n = first["execution_count"]
        ok(daemon, s, "'second'")
        o = ok(daemon, s, "\n".join([
            "ip = get_ipython()",
            "ip.run_line_magic('env', 'RLM=yes')",
            "ip.run_cell_magic('bash', '', 'echo cellmagic $RLM')",
            "ip.system('echo via-system')",
            f"print(repr(In[{n}]), Out[{n}], repr(_), repr(__), repr(_i{n}), _{n})",
            "'last'",
        ]))
        assert o["stdout"] == ("env: RLM=yes\ncellmagic yes\nvia-system\n"
                               "'10 * 4' 40 'second' 40 '10 * 4' 40\n"), o["stdout"]
        assert o["result"] == "'last'"
    finally:
        daemon.delete_session(s)


# ---- the display protocol -----------------------------------------------------------------

def test_ipython_display_classes_and_update_display(daemon, sid):
    o = ok(daemon, sid, "\n".join([
        "from IPython.display import (HTML, Markdown, JSON, SVG, Latex, Javascript, Image,",
        "                             display, update_display)",
        "import base64",
        "display(HTML('<b>bold-html</b>'))",
        "display(Markdown('# md-title'))",
        "display(JSON({'k': [1, 2]}))",
        "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\">"
        "<rect width=\"4\" height=\"4\"/></svg>'))",
        "display(Latex(r'$\\alpha^2$'))",
        "display(Javascript(\"console.log('js-here')\"))",
        f"display(Image(data=base64.b64decode('{PNG_1x1}')))",
        "print('between')",
        "display('first-version', display_id='d1')",
        "update_display('second-version', display_id='d1')",
    ]))
    outs = o["outputs"]
    assert o["stdout"] == "between\n" and o["result"] is None
    assert all(x["main"] is False for x in outs), outs
    rich = [{k: v for k, v in x["data"].items() if k != "text/plain"} for x in outs]
    assert rich[:6] == [{"text/html": "<b>bold-html</b>"},
                        {"text/markdown": "# md-title"},
                        {"application/json": '{"k": [1, 2]}'},
                        {"image/svg+xml": '<svg xmlns="http://www.w3.org/2000/svg" width="4" '
                                          'height="4"><rect width="4" height="4"/></svg>'},
                        {"text/latex": "$\\alpha^2$"},
                        {"application/javascript": "console.log('js-here')"}], rich
    assert list(rich[6]) == ["image/png"] and is_png(rich[6]["image/png"])
    assert base64.b64decode(rich[6]["image/png"]) == base64.b64decode(PNG_1x1)
    assert len(outs) == 8, "the update replaced the display, it added no output"
    assert outs[7]["display_id"] == "d1"
    assert outs[7]["data"] == {"text/plain": "'second-version'"}
    assert not any("first-version" in json.dumps(x) for x in outs)


def test_repr_methods_of_user_objects(daemon, sid):
    o = ok(daemon, sid, "\n".join([
        "import base64",
        "class H:",
        "    def _repr_html_(self): return '<i>h-obj</i>'",
        "class P:",
        f"    def _repr_png_(self): return base64.b64decode('{PNG_1x1}')",
        "class M:",
        "    def _repr_mimebundle_(self, include=None, exclude=None):",
        "        return {'text/plain': 'm-plain', 'application/x-custom': 'custom-data'}",
        "display(H()); display(P()); display(M())",
        "H()",
    ]))
    outs = o["outputs"]
    assert len(outs) == 4, outs
    assert outs[0]["data"]["text/html"] == "<i>h-obj</i>" and outs[0]["main"] is False
    assert is_png(outs[1]["data"]["image/png"])
    assert outs[2]["data"] == {"text/plain": "m-plain", "application/x-custom": "custom-data"}
    assert outs[3]["main"] is True and outs[3]["data"]["text/html"] == "<i>h-obj</i>"
    assert o["result"].startswith("<__main__.H at 0x") and o["result"] == \
        outs[3]["data"]["text/plain"]
    o = ok(daemon, sid, "P()")
    assert o["outputs"][-1]["main"] is True and is_png(o["outputs"][-1]["data"]["image/png"])


def test_the_last_value_is_ipythons_pretty_printer(daemon, sid):
    o = ok(daemon, sid, "list(range(40))")
    assert o["result"] == "[" + ",\n ".join(str(i) for i in range(40)) + "]"
    o = ok(daemon, sid, "{'b': 1, 'a': 2}")
    assert o["result"] == "{'b': 1, 'a': 2}"


def test_pil_show_and_plotly_show_are_outputs(daemon, sid):
    o = ok(daemon, sid, "\n".join([
        "from PIL import Image as PImage",
        "PImage.new('RGB', (3, 2), 'red').show()",
        "import plotly.graph_objects as go",
        "go.Figure(go.Bar(x=[1, 2], y=[3, 4])).show()",
        "print('after')",
    ]))
    assert o["stdout"] == "after\n"
    outs = o["outputs"]
    assert len(outs) == 2, [list(x["data"]) for x in outs]
    png = base64.b64decode(outs[0]["data"]["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[16:24] == b"\0\0\0\x03\0\0\0\x02"  # 3x2
    plot = outs[1]["data"]
    assert set(plot) >= {"application/vnd.plotly.v1+json", "text/html"}, list(plot)
    fig = json.loads(plot["application/vnd.plotly.v1+json"])
    assert fig["data"][0]["type"] == "bar" and fig["data"][0]["y"] == [3, 4]
    assert "Plotly.newPlot" in plot["text/html"]


def test_plain_python_is_unchanged(daemon, sid):
    o = ok(daemon, sid, "\n".join([
        "x = 5 % 3",
        "y = x != 3",
        "s = 'what? really! %time !ls'",
        "t = 'a ? b'",
        "d = {'k': 10 % 4}",
        "print(x, y, s, t, d['k'])",
        "(x, y)",
    ]))
    assert o["stdout"] == "2 True what? really! %time !ls a ? b 2\n"
    assert o["result"] == "(2, True)"


@pytest.mark.parametrize("profile", ["minimal", "data-science"])
def test_python_only_profiles_refuse_the_dialect(daemon, profile):
    s = daemon.create_session(profile=profile)
    try:
        for code in ["!ls", "%time 1+1", "len?", "%%bash\necho x", "files = !ls"]:
            o = daemon.execute(s, code)
            assert o["status"] == "error", (code, o)
            assert o["error"]["name"] == "PolicyError", (code, o["error"])
            assert f"profile '{profile}' {PY_ONLY}" in o["error"]["value"], (code, o["error"])
            assert o["stdout"] == "" and o["outputs"] == []
        o = ok(daemon, s, "x = 5 % 3\ny = x != 3\n'?!'\n(x, y)")
        assert o["result"] == "(2, True)"
    finally:
        daemon.delete_session(s)


# ---- streaming and one-shot ---------------------------------------------------------------

def test_the_ndjson_stream_has_output_events_in_order(daemon, sid):
    code = "\n".join([
        "from IPython.display import HTML, display, update_display",
        "print('one', flush=True)",
        "display(HTML('<b>streamed</b>'))",
        "!echo two",
        "display('v1', display_id='sd')",
        "update_display('v2', display_id='sd')",
        "print('three')",
        "HTML('<i>last</i>')",
    ])
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": code},
                    headers={"Accept": "application/x-ndjson"}, stream=True, timeout=60)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/x-ndjson")
    events = [e for _, e in ndjson_events(r)]
    seq = []
    for e in events:
        if e["type"] in ("stdout", "stderr"):
            if seq and seq[-1][0] == e["type"]:
                seq[-1] = (e["type"], seq[-1][1] + e["text"])
            else:
                seq.append((e["type"], e["text"]))
        elif e["type"] == "output":
            seq.append(("output", e["data"].get("text/html") or e["data"].get("text/plain"),
                        e.get("display_id"), e.get("update", False), e["main"]))
        else:
            seq.append((e["type"],))
    assert seq == [("stdout", "one\n"),
                   ("output", "<b>streamed</b>", None, False, False),
                   ("stdout", "two\n"),
                   ("output", "'v1'", "sd", False, False),
                   ("output", "'v2'", "sd", True, False),
                   ("stdout", "three\n"),
                   ("output", "<i>last</i>", None, False, True),
                   ("end",)], seq
    final = events[-1]["result"]
    assert final["status"] == "ok" and final["result"] == "<IPython.core.display.HTML object>"
    assert final["stdout"] == "one\ntwo\nthree\n"
    assert [x["data"].get("text/html") or x["data"]["text/plain"] for x in final["outputs"]] == \
        ["<b>streamed</b>", "'v2'", "<i>last</i>"]


def test_one_shot_execute_runs_a_jupyter_cell(daemon):
    code = ("    !echo one-shot $((40 + 2))\n"
            "    %time v = 7\n"
            "    from IPython.display import Markdown\n"
            "    display(Markdown('**md**'))\n"
            "    v * 6\n")
    r = daemon.post("/execute", json={"code": code}, timeout=120)
    assert r.status_code == 200, daemon.why(r)
    o = r.json()
    assert o["status"] == "ok" and o["error"] is None, o
    assert o["stdout"].startswith("one-shot 42\nCPU times:"), o["stdout"]
    assert o["result"] == "42"
    assert [x["data"].get("text/markdown") for x in o["outputs"] if not x["main"]] == ["**md**"]
    r = daemon.post("/execute", json={"code": "!echo no", "profile": "minimal"}, timeout=120)
    assert r.status_code == 200 and r.json()["error"]["name"] == "PolicyError", r.text


def test_each_display_says_where_it_came_in_stdout(daemon, sid):
    """stdout_offset: the bytes of stdout (UTF-8, as the answer has it) printed before each
    display made while the cell ran, also after bytes that are not UTF-8 (each became U+FFFD's
    three bytes); the cell's value has none."""
    r = ok(daemon, sid, "import sys\nfrom IPython.display import HTML, display\n"
                        "print('one', flush=True)\ndisplay(HTML('<b>1</b>'))\n"
                        "sys.stdout.buffer.write(b'\\xff\\xfe two\\n'); sys.stdout.flush()\n"
                        "display(HTML('<b>2</b>'))\nprint('three')\nHTML('<b>value</b>')")
    out = r["stdout"].encode()
    assert out == "one\n\ufffd\ufffd two\nthree\n".encode(), r["stdout"]
    places = [o.get("stdout_offset") for o in r["outputs"]]
    assert places == [4, len("one\n\ufffd\ufffd two\n".encode()), None], r["outputs"]
    assert [o["main"] for o in r["outputs"]] == [False, False, True]
