"""Extra: the CLI's reporting contract under hostile endings (the statuses other cases rely on):
SystemExit n -> n, uncaught exception -> 1 with error fields, os._exit, a signal to itself."""
import signal

from conftest import run


def test_system_exit_code():
    res = run("import sys\nsys.exit(7)")
    assert res.rc == 7 and res.exit_code == 7, res.describe()


def test_uncaught_exception():
    res = run("1/0")
    assert res.rc == 1 and res.status == "error", res.describe()
    assert res.error["name"] == "ZeroDivisionError" and "division by zero" in res.error["value"]
    assert "Traceback" in res.error["traceback"] or "ZeroDivisionError" in res.error["traceback"]


def test_hard_exit_and_self_signal():
    res = run("import os\nos._exit(3)")
    assert res.rc == 3 and res.exit_code == 3, res.describe()
    res = run("import ctypes\nctypes.string_at(0)")   # a real segmentation fault
    assert res.status == "killed", res.describe()
    assert res.rc == 128 + signal.SIGSEGV and res.exit_code == 128 + signal.SIGSEGV, \
        res.describe()


def test_last_expression_result():
    res = run("x = 6\nx * 7")
    assert res.status == "ok" and res.json["result"] == "42", res.describe()
    assert res.json["execution_count"] == 1
