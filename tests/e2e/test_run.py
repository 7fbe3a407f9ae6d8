"""Runner semantics through `airlock run`: notebook-style results, errors, exit codes, output
handling and the limits, in a real sandbox."""
import base64
import json

import pytest


def test_last_expression_is_the_result(run):
    r = run("x = 20\nx * 2 + 2")
    assert r.returncode == 0
    assert r["status"] == "ok"
    assert r["result"] == "42"
    assert r["stdout"] == ""
    assert r["execution_count"] == 1


def test_statement_only_cell_has_no_result(run):
    r = run("x = 1\nprint('done')")
    assert r["result"] is None
    assert r["stdout"] == "done\n"


def test_none_valued_expression_has_no_result(run):
    assert run("None")["result"] is None
    assert run("print('x')")["result"] is None


def test_repr_is_used_for_the_result(run):
    assert run("'a' + 'b'")["result"] == "'ab'"
    assert run("[1, {'k': (2,)}]")["result"] == "[1, {'k': (2,)}]"


def test_exception_reports_name_value_and_user_traceback(run):
    r = run("def f(x):\n    return 1 / x\n\nf(0)\n")
    assert r.returncode == 1
    assert r["status"] == "error"
    assert r["exit_code"] == 1
    err = r["error"]
    assert err["name"] == "ZeroDivisionError"
    assert err["value"] == "division by zero"
    tb = err["traceback"]
    assert tb.startswith("Traceback (most recent call last):")
    assert "return 1 / x" in tb and "f(0)" in tb
    assert "airlock_cell" not in tb and "runner" not in tb


def test_syntax_error_is_reported_not_crashed(run):
    r = run("def broken(:\n    pass\n")
    assert r["status"] == "error"
    assert r["error"]["name"] == "SyntaxError"
    assert "airlock_cell" not in r["error"]["traceback"]


def test_output_before_an_exception_is_kept(run):
    r = run("print('before')\nraise ValueError('boom')")
    assert r["stdout"] == "before\n"
    assert r["error"]["name"] == "ValueError"
    assert r["error"]["value"] == "boom"


@pytest.mark.parametrize("code,status,exit_code", [
    ("import sys; sys.exit(0)", "ok", 0),
    ("import sys; sys.exit()", "ok", 0),
    ("raise SystemExit(3)", "error", 3),
    ("import sys; sys.exit(300)", "error", 300 & 0xFF),
])
def test_system_exit_becomes_the_exit_code(run, code, status, exit_code):
    r = run(code)
    assert r["status"] == status
    assert r["exit_code"] == exit_code
    assert r.returncode == exit_code


def test_system_exit_with_message_goes_to_stderr(run):
    r = run("import sys; sys.exit('bad input')")
    assert r["exit_code"] == 1
    assert "bad input" in r["stderr"]


def test_os_exit_is_reported_as_the_exit_status(run):
    r = run("import os\nprint('x', flush=True)\nos._exit(7)")
    assert r["stdout"] == "x\n"
    assert r["exit_code"] == 7
    assert r.returncode == 7


def test_unicode_in_output_result_and_errors(run):
    r = run("print('héllo ☃ 日本')\nraise ValueError('ünïcode ☃')\n")
    assert r["stdout"] == "héllo ☃ 日本\n"
    assert r["error"]["value"] == "ünïcode ☃"
    assert run("'☃' * 3")["result"] == "'☃☃☃'"


def test_source_with_non_ascii_identifiers_and_strings(run):
    r = run("größe = 3\nf'{größe}€'")
    assert r["result"] == "'3€'"


def test_binary_output_is_made_valid_text(run):
    r = run("import sys\nsys.stdout.buffer.write(b'ok\\xff\\xfe\\x00end\\n')")
    assert r["status"] == "ok"
    assert r["stdout"] == "ok\ufffd\ufffd\ufffdend\n"


def test_large_output_under_the_cap_is_complete(run):
    r = run("for i in range(20000): print(i)")
    assert r["status"] == "ok"
    lines = r["stdout"].splitlines()
    assert len(lines) == 20000 and lines[-1] == "19999"


def test_output_flood_is_cut_at_the_cap_and_marked(run):
    r = run("import sys\nwhile True: sys.stdout.write('x' * 100000)")
    assert r.returncode == 125
    assert r["status"] == "output_limit"
    assert r["stdout"].startswith("x" * 1000)
    assert r["stdout"].endswith("[airlock: output truncated at 1048576 bytes]\n")
    assert len(r["stdout"]) < 1048576 + 100


def test_stdin_is_closed(run):
    r = run("import sys\ndata = sys.stdin.read()\nlen(data)")
    assert r["result"] == "0"
    r = run("input('prompt? ')")
    assert r["error"]["name"] == "EOFError"


def test_stderr_is_captured_separately(run):
    r = run("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert r["stdout"] == "out\n"
    assert r["stderr"] == "err\n"


def test_output_of_child_processes_is_captured(run):
    r = run("import subprocess\nsubprocess.run(['echo', 'from a child'])\nimport os\nos.system('echo via shell >&2')")
    assert "from a child" in r["stdout"]
    assert "via shell" in r["stderr"]


def test_timeout_ends_the_cell_on_time(run):
    r = run("while True: pass", "--timeout", "1")
    assert r.returncode == 124
    assert r["status"] == "timeout"
    assert r["timed_out"] is True
    assert 900 <= r["usage"]["wall_ms"] < 5000


def test_memory_bomb_ends_as_oom(run):
    r = run("x = bytearray(2 * 1024**3)\nx[::4096] = b'y' * len(x[::4096])", "--memory", "128MiB")
    assert r.returncode == 137
    assert r["status"] == "oom"
    assert "out of memory" in r["error"]["value"]


def test_usage_is_reported(run):
    r = run("sum(i for i in range(3_000_000))")
    u = r["usage"]
    assert u["wall_ms"] > 0 and u["cpu_ms"] > 0
    assert u["peak_memory_bytes"] > 1024 * 1024


def test_files_created_in_work_are_listed(run):
    r = run("open('out.csv', 'w').write('a,b\\n1,2\\n')")
    assert r["files"] == [{"path": "out.csv", "size": 8, "change": "created"}]


def test_bash_language(run):
    r = run("echo hi from $(hostname); id -u; exit 3", "-l", "bash")
    assert r["stdout"] == "hi from sandbox\n1000\n"
    assert r["exit_code"] == 3
    assert r.returncode == 3


def test_data_science_profile_pandas_sum(run):
    r = run('import pandas as pd; pd.DataFrame({"a":[1,2]}).a.sum()', "-p", "data-science")
    assert r["status"] == "ok", r.obj
    assert r["result"] == "3"


def test_matplotlib_figure_is_returned_as_png(run):
    r = run("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])", "-p", "visualization")
    assert r["status"] == "ok", r.obj
    pngs = [o for o in r["outputs"] if "image/png" in o["data"]]
    assert len(pngs) == 1
    assert base64.b64decode(pngs[0]["data"]["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")


def test_minimal_profile_refuses_imports_outside_the_list(run):
    r = run("import os\nos.system('ls /')", "-p", "minimal")
    assert r["status"] == "error"
    assert r["error"]["name"] == "ImportError"
    assert "'os'" in r["error"]["value"] and "allowed modules: collections" in r["error"]["value"]


def test_minimal_profile_refuses_escape_dunders(run):
    r = run('"".__class__.__bases__[0].__subclasses__()', "-p", "minimal")
    assert r["error"]["name"] == "PolicyError"
    assert "__class__" in r["error"]["value"]


def test_minimal_profile_refuses_bash(run):
    r = run("echo hi", "-p", "minimal", "-l", "bash", as_json=False)
    assert r.returncode == 2
    assert "does not allow bash" in r.stderr


def test_human_output_streams_output_then_result(run):
    r = run("print('line')\n6 * 7", as_json=False)
    assert r.returncode == 0
    assert r.stdout == "line\n42\n"


def test_human_output_prints_traceback_to_stderr(run):
    r = run("1/0", as_json=False)
    assert r.returncode == 1
    assert "ZeroDivisionError: division by zero" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--timeout", "abc"], "--timeout"),
    (["--timeout", "0"], "--timeout"),
    (["--memory", "1KiB"], "--memory"),
    (["--memory", "lots"], "--memory"),
    (["-p", "no-such-profile"], "no-such-profile"),
    (["-p", "../../etc/passwd"], "passwd"),
    (["-l", "ruby"], "--language"),
    (["--isolation", "chroot"], "chroot"),
    (["--bogus"], "--bogus"),
])
def test_bad_arguments_get_a_clear_message(run, args, needle):
    r = run("print(1)", *args, as_json=False)
    assert r.returncode == 2
    assert needle in r.stderr
    assert r.stdout == ""


def test_nul_bytes_in_source_are_refused(run):
    r = run(None, as_json=False, input_bytes=b"print(1)\x00")
    assert r.returncode == 2
    assert "NUL" in r.stderr


def test_files_created_by_bash_are_listed(run):
    r = run("echo hi > out.txt; mkdir -p d; printf abc > d/y", "-l", "bash")
    assert r["status"] == "ok", r.obj
    assert r["files"] == [
        {"path": "d/y", "size": 3, "change": "created"},
        {"path": "out.txt", "size": 3, "change": "created"},
    ]


def test_process_isolation_runs_as_a_unique_unprivileged_uid_and_warns(run):
    r = run("import os, socket\n(os.getuid(), socket.gethostname() == 'sandbox')",
            "--isolation", "process")
    assert r.returncode == 0, r.stderr
    uid, in_uts_namespace = eval(r["result"])
    assert uid >= 0x60000000, "process mode must drop to a unique host uid, not stay root"
    assert in_uts_namespace is False, "process mode has no namespaces (it says so)"
    assert "not a security boundary" in r.stderr


def test_none_isolation_is_a_plain_child_and_warns(run):
    r = run("import os\nos.getuid()", "--isolation", "none")
    assert r.returncode == 0, r.stderr
    assert r["result"] == "0"
    assert "not a security boundary" in r.stderr


def test_serve_with_no_isolation_refuses_non_loopback(tmp_path):
    import subprocess
    from conftest import AIRLOCK
    p = subprocess.run([AIRLOCK, "serve", "--isolation", "none", "--listen", "0.0.0.0:18977",
                        "--state-dir", str(tmp_path / "state")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "loopback" in p.stderr
