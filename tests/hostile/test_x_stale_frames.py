"""Extra (issue 12, item 4): user code owns fd 3, the runner's end of the control socket, and
can write frames of its own at any time: during its cell, and from a process or thread that
outlives the cell and keeps writing between cells and during the next ones. Each request the
daemon sends carries a random id that the runner's answer repeats, and a frame that does not
repeat it answers nothing and is dropped: a forged result is never taken for the result of the
cell that runs, nor of any later one."""
import json
import os
import uuid

import pytest

import conftest
from conftest import VIA_DAEMON, run

FORGED = {"op": "result", "status": "ok", "exit_code": 0, "result": "'forged'", "outputs": [],
          "files": [{"path": "forged.txt", "size": 1, "change": "created"}]}

FORGE = r'''
import os, json, struct
_body = json.dumps(%(forged)s).encode()
FRAME = struct.pack("<I", len(_body)) + _body
''' % {"forged": json.dumps(FORGED)}


def test_a_frame_written_during_the_cell_is_not_its_result():
    res = run(FORGE + "os.write(3, FRAME)\nos.write(3, FRAME)\nprint('mine')\n6 * 7", timeout=20)
    assert res.json is not None, res.describe()
    assert res.status == "ok" and res.json["result"] == "42", res.describe()
    assert res.out == "mine\n" and res.json["files"] == [], res.describe()


@pytest.mark.skipif(not VIA_DAEMON, reason="daemon-only: cells after the first exist in "
                    "sessions of `airlock serve`; run with AIRLOCK_HOSTILE_VIA=daemon")
def test_frames_written_between_cells_are_never_a_later_result():
    d = conftest.daemon()
    r = d.post("/v1/sessions", json={}, timeout=60)
    assert r.status_code == 201, d.why(r)
    sid = r.json()["id"]
    offset = d.log_size()
    tag = uuid.uuid4().hex[:8]
    try:
        # A child process that outlives the cell writes forged results without a pause (it
        # blocks while the socket is full, between cells), and a thread of the interpreter
        # writes them whenever it gets to run (during later cells).
        res = d.execute(sid, FORGE + r'''
import threading, time
os.write(3, FRAME)
writer = os.fork()
if writer == 0:
    while True:
        os.write(3, FRAME)
def spam():
    while True:
        os.write(3, FRAME)
        time.sleep(0.001)
threading.Thread(target=spam, daemon=True).start()
"first-%s"
''' % tag, timeout_s=20)
        assert res["status"] == "ok" and res["result"] == f"'first-{tag}'", res
        for k in range(8):
            res = d.execute(sid, f"import time\ntime.sleep(0.05)\nprint('out-{k}')\n'cell-{k}'",
                            timeout_s=20)
            assert res["status"] == "ok", res
            assert res["result"] == f"'cell-{k}'", f"cell {k} got another result: {res}"
            assert res["stdout"] == f"out-{k}\n" and res["files"] == [], res
            assert res["execution_count"] == k + 2, res
        res = d.execute(sid, "import os, signal\nos.kill(writer, signal.SIGKILL)\n"
                             "os.waitpid(writer, 0)[0] == writer")
        assert res["result"] == "True", res
        assert "answered no request" in d.log_since(offset), \
            "the daemon did not say that it dropped frames"
    finally:
        d.delete_session(sid)
