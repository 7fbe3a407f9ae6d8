"""Extra (issue 12, item 4): user code owns fd 3 and can write a result frame of its own. The
files manifest and the rich outputs that reach a client (the API, MCP, the gateway, `airlock
run --output`) are rebuilt from validated entries only: a client that saves "the files the cell
made" by their paths must never be sent outside its directory (../../etc/passwd, /etc/shadow),
and no entry of another shape gets through."""
import json

from conftest import run

FORGED = r'''
import os, json, struct, time
body = json.dumps({"op": "result", "status": "ok", "exit_code": 0, "result": "'forged'",
    "outputs": ["not an object", 42, {"data": "x"}, {"data": {}},
                {"data": {"text/plain": 5}}, {"data": {"text/html": "<b>ok</b>"}, "main": 1},
                {"data": {"text/plain": "kept"}, "main": False, "extra": "dropped"}],
    "files": [{"path": "../../etc/passwd", "size": 10, "change": "created"},
              {"path": "/etc/shadow", "size": 1, "change": "created"},
              {"path": "a/../../b", "size": 1, "change": "changed"},
              {"path": "a//b", "size": 1, "change": "changed"},
              {"path": "", "size": 1, "change": "created"},
              {"path": "neg.txt", "size": -5, "change": "created"},
              {"path": "float.txt", "size": 1.5, "change": "created"},
              {"path": "odd.txt", "size": 1, "change": "exploded"},
              {"path": 7, "size": 1, "change": "created"},
              "a string", 7, None,
              {"path": "sub/good.txt", "size": 3, "change": "created", "extra": "dropped"}]})
os.write(3, struct.pack("<I", len(body)) + body.encode())
time.sleep(30)
'''


def test_forged_manifest_and_outputs_are_validated():
    res = run(FORGED, timeout=20)
    assert res.json is not None, res.describe()
    files, outputs = res.json["files"], res.json["outputs"]
    assert files == [{"path": "sub/good.txt", "size": 3, "change": "created"}], \
        json.dumps(files)
    assert outputs == [{"data": {"text/html": "<b>ok</b>"}, "main": False},
                       {"data": {"text/plain": "kept"}, "main": False}], json.dumps(outputs)
