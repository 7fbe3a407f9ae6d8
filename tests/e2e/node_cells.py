"""Helpers for the tests of cells that run in a session's Node REPL (test_js_imports.py,
test_typescript.py): run a cell in a language, and check how it ended."""
import json


def cell(daemon, sid, code, language):
    """Runs code in session sid as language; returns the execution object."""
    return daemon.execute(sid, code, language=language)


def ok(out):
    """out, after checking that its status is ok (the whole object is shown when not)."""
    assert out["status"] == "ok", json.dumps(out, indent=1)
    return out


def failed(out):
    """out's error, after checking that its status is error."""
    assert out["status"] == "error", json.dumps(out, indent=1)
    return out["error"]
