"""Extra (issue 12, item 4): user code runs in the runner's own process, so it can make the
runner's answer say anything: frames of its own on fd 3 are dropped (they do not repeat the
request's id, see test_x_stale_frames.py), but code that patches the cell module (which builds
the answer) gets a forged files manifest and forged rich outputs sent under the right id. The
files manifest and the rich outputs that reach a client (the API, MCP, the gateway, `airlock
run --output`) are therefore rebuilt from validated entries only: a client that saves "the
files the cell made" by their paths must never be sent outside its directory (../../etc/passwd,
/etc/shadow), and no entry of another shape gets through."""
import json

from conftest import run

FORGED = r'''
import sys
cell = sys.modules["airlock_cell"]
outputs = ["not an object", 42, {"data": "x"}, {"data": {}},
           {"data": {"text/plain": 5}}, {"data": {"text/html": "<b>ok</b>"}, "main": 1},
           {"data": {"text/plain": "kept"}, "main": False, "extra": "dropped"}]
files = [{"path": "../../etc/passwd", "size": 10, "change": "created"},
         {"path": "/etc/shadow", "size": 1, "change": "created"},
         {"path": "a/../../b", "size": 1, "change": "changed"},
         {"path": "a//b", "size": 1, "change": "changed"},
         {"path": "", "size": 1, "change": "created"},
         {"path": "neg.txt", "size": -5, "change": "created"},
         {"path": "float.txt", "size": 1.5, "change": "created"},
         {"path": "odd.txt", "size": 1, "change": "exploded"},
         {"path": 7, "size": 1, "change": "created"},
         "a string", 7, None,
         {"path": "sub/good.txt", "size": 3, "change": "created", "extra": "dropped"}]
# The cell module builds the answer after this code ran: make it send what we like.
cell.context._cell_outputs.extend(outputs)
cell.execute._files_changed = lambda before, after: files
cell.execute._sanitize = lambda reply: None
'''


def test_forged_manifest_and_outputs_are_validated():
    res = run(FORGED, timeout=20)
    assert res.json is not None, res.describe()
    files, outputs = res.json["files"], res.json["outputs"]
    # A one-shot through the daemon also returns each created file's bytes, read from /work by
    # the validated path only: the forged file does not exist there, so it has none, and says so.
    for f in files:
        if "content" in f:
            assert f["content"] is None and "no such file" in f["omitted"], json.dumps(f)
    files = [{k: v for k, v in f.items() if k not in ("content", "omitted")} for f in files]
    assert files == [{"path": "sub/good.txt", "size": 3, "change": "created"}], \
        json.dumps(files)
    assert outputs == [{"data": {"text/html": "<b>ok</b>"}, "main": False},
                       {"data": {"text/plain": "kept"}, "main": False}], json.dumps(outputs)
