"""Every API surface reaches a microVM session (issue 27, "the whole API works in a VM
session"): streamed execution, rich outputs, one-shot /execute with files in and out, E2B's
sandbox API, OpenAI's containers and MCP over stdio forwarding to the daemon. Each goes through
the same session functions as for the namespaces tier; what differs is what is behind them (the
guest's runner over virtio-serial, its files over the files port), and that is what these
check. One daemon (test_microvm.py's fixtures: the shared guest image and saved VM), slow
under TCG: the checks share sessions where they can."""
import base64
import json
import os
import subprocess

import pytest

from airlock_daemon import AIRLOCK
from test_microvm import CREATE_TIMEOUT, create, execute, image, vm_daemon  # noqa: F401

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


HOST_KERNEL = os.uname().release


def in_guest(d, sid):
    """The session's kernel is the guest's, not the host's."""
    r = execute(d, sid, "import os\nos.uname().release")
    assert r["status"] == "ok", r
    assert r["result"].strip("'") != HOST_KERNEL, r


def test_streamed_execution_and_rich_outputs(vm_daemon):
    d = vm_daemon
    sid = create(d)
    try:
        in_guest(d, sid)
        code = ("import sys, time\nprint('first', flush=True)\ntime.sleep(0.5)\n"
                "from IPython.display import display, HTML\ndisplay(HTML('<b>bold</b>'))\n"
                "print('second', file=sys.stderr)\n"
                "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                "plt.plot([1, 3, 2])\nplt.show()\n6 * 7")
        r = d.post(f"/v1/sessions/{sid}/execute", json={"code": code},
                   headers={"Accept": "application/x-ndjson"}, timeout=300, stream=True)
        assert r.status_code == 200, d.why(r)
        assert r.headers["Content-Type"].startswith("application/x-ndjson")
        events = [json.loads(line) for line in r.iter_lines() if line]
        kinds = [e["type"] for e in events]
        assert kinds[-1] == "end", kinds
        # Output comes as it is made, in order with the displays.
        assert kinds.index("stdout") < kinds.index("output") < kinds.index("stderr"), kinds
        before_display = events[:kinds.index("output")]
        assert "".join(e["text"] for e in before_display if e["type"] == "stdout") == \
            "first\n", events  # print() may write its text and its newline apart
        outputs = [e for e in events if e["type"] == "output"]
        assert outputs[0]["data"]["text/html"] == "<b>bold</b>", outputs[0]
        pngs = [base64.b64decode(e["data"]["image/png"]) for e in outputs
                if "image/png" in e["data"]]
        assert pngs and all(p.startswith(PNG_MAGIC) for p in pngs), outputs
        end = events[-1]["result"]
        assert end["status"] == "ok" and end["result"] == "42", end
        assert end["stdout"] == "first\n" and end["stderr"] == "second\n", end
        chart = [o for o in end["outputs"] if "application/vnd.airlock.chart+json" in o["data"]]
        assert chart, end["outputs"]
        spec = chart[0]["data"]["application/vnd.airlock.chart+json"]
        spec = json.loads(spec) if isinstance(spec, str) else spec
        assert spec["type"] == "line", spec
    finally:
        d.delete(f"/v1/sessions/{sid}")


def test_one_shot_execute_with_files(vm_daemon):
    d = vm_daemon
    body = {"profile": "microvm",
            "files": {"in/data.csv": base64.b64encode(b"a,b\n1,2\n3,4\n").decode()},
            "code": "import os, pandas\ndf = pandas.read_csv('/work/in/data.csv')\n"
                    "df.sum().to_csv('/work/out.csv')\n"
                    "os.uname().release, int(df.b.sum())"}
    r = d.post("/execute", json=body, timeout=CREATE_TIMEOUT)
    assert r.status_code == 200, d.why(r)
    out = r.json()
    assert out["status"] == "ok", out
    assert out["result"] == repr((out["result"].split("'")[1], 6)), out
    assert HOST_KERNEL not in out["result"], out
    assert "state" not in out, "a one-shot's session is gone by design"
    made = {f["path"]: f for f in out["files"]}
    assert base64.b64decode(made["out.csv"]["content"]) == b",0\na,4\nb,6\n", made
    assert "in/data.csv" not in made, "an input file the code did not touch is not listed"


def test_e2b_sandbox_of_the_microvm_template(vm_daemon):
    d = vm_daemon
    http = d.client()  # E2B's routes take X-API-KEY and the access token, not the bearer
    r = http.post(d.url + "/e2b/api/v2/sandboxes", json={"templateID": "microvm"},
                  headers={"X-API-KEY": d.token}, timeout=CREATE_TIMEOUT)
    assert r.status_code == 201, r.text
    sb = r.json()
    try:
        h = {"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": "49999",
             "X-Access-Token": sb["envdAccessToken"]}
        r = http.post(d.url + "/e2b/sandbox/execute", headers=h, timeout=300,
                      json={"code": "import os\nprint('cwd', os.getcwd())\n"
                                    "os.uname().release"})
        assert r.status_code == 200, r.text
        events = [json.loads(line) for line in r.text.splitlines() if line]
        text = "".join(e.get("text", "") for e in events if e["type"] == "stdout")
        # E2B's sandboxes live in /home/user: the guest's /work, bound there.
        assert text == "cwd /home/user\n", events
        results = [e for e in events if e["type"] == "result"]
        assert results and HOST_KERNEL not in results[0]["text"], events
        assert events[-1]["type"] == "end_of_execution", events
        # Its files are the guest's /home/user (= /work), over the VM's files channel.
        r = http.post(d.url + "/e2b/sandbox/files?path=/home/user/hello.txt", headers=h,
                      files={"file": ("hello.txt", b"from the host")}, timeout=120)
        assert r.status_code == 200, r.text
        r = http.get(d.url + "/e2b/sandbox/files?path=/home/user/hello.txt", headers=h,
                     timeout=120)
        assert r.status_code == 200 and r.content == b"from the host", r.text
    finally:
        r = http.delete(d.url + "/e2b/api/sandboxes/" + sb["sandboxID"],
                        headers={"X-API-KEY": d.token}, timeout=120)
        assert r.status_code == 204, r.text


def test_openai_container_of_the_microvm_profile(vm_daemon):
    d = vm_daemon
    r = d.post("/v1/containers", json={"name": "vm"}, headers={"X-Airlock-Profile": "microvm"},
               timeout=CREATE_TIMEOUT)
    assert r.status_code == 200, d.why(r)
    c = r.json()
    sid = "s-" + c["id"][len("cntr_"):]
    try:
        assert d.get(f"/v1/sessions/{sid}").json()["profile"] == "microvm"
        out = execute(d, sid, "open('/mnt/data/made.txt', 'w').write('by code in a VM')")
        assert out["status"] == "ok", out
        listing = d.get(f"/v1/containers/{c['id']}/files").json()
        by_path = {x["path"]: x for x in listing["data"]}
        assert by_path["/mnt/data/made.txt"]["source"] == "assistant", listing
        r = d.get(f"/v1/containers/{c['id']}/files/{by_path['/mnt/data/made.txt']['id']}"
                  "/content")
        assert r.status_code == 200 and r.content == b"by code in a VM", r.text
    finally:
        d.delete(f"/v1/containers/{c['id']}")


def mcp_call(proc, msg):
    proc.stdin.write(json.dumps(msg) + "\n")
    proc.stdin.flush()
    if "id" not in msg:
        return None
    while True:
        line = proc.stdout.readline()
        assert line, "airlock mcp ended: " + proc.stderr.read()
        answer = json.loads(line)
        if answer.get("id") == msg["id"]:
            return answer


def test_mcp_over_stdio_runs_in_a_microvm_session(vm_daemon):
    d = vm_daemon
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    env["AIRLOCK_TOKEN"] = d.token
    proc = subprocess.Popen([AIRLOCK, "mcp", "--profile", "microvm", "--url", d.url],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        a = mcp_call(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "vm-test", "version": "1"}}})
        assert "result" in a, a
        mcp_call(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        a = mcp_call(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": "run_python",
                                       "arguments": {"code": "import os\nprint(os.uname()"
                                                             ".release)\n40 + 2"}}})
        assert a["result"]["isError"] is False, a
        text = "".join(c.get("text", "") for c in a["result"]["content"])
        assert "42" in text and HOST_KERNEL not in text, text
        sessions = d.get("/v1/sessions").json()["sessions"]
        assert any(s["profile"] == "microvm" for s in sessions), sessions
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_profiles_limits_hold_inside_the_guest(vm_daemon):
    """cpus is the VM's vCPUs, pids the runner's RLIMIT_NPROC (the guest's init sets it), and
    memory the VM's size: a cell that takes it all ends the session, saying why."""
    d = vm_daemon
    sid = create(d)
    try:
        r = execute(d, sid, "import os\nos.cpu_count()")
        assert r["result"] == "1", r
        r = execute(d, sid, "import os, errno, signal\nkids = []\n"
                            "try:\n"
                            "    while len(kids) < 1000:\n"
                            "        pid = os.fork()\n"
                            "        if pid == 0:\n"
                            "            signal.pause()\n"
                            "            os._exit(0)\n"
                            "        kids.append(pid)\n"
                            "    err = None\n"
                            "except OSError as e:\n"
                            "    err = e.errno\n"
                            "for pid in kids:\n"
                            "    os.kill(pid, signal.SIGKILL)\n"
                            "    os.waitpid(pid, 0)\n"
                            "len(kids) < 256, err == errno.EAGAIN")
        assert r["status"] == "ok" and r["result"] == "(True, True)", r
        r = execute(d, sid, "x = 1\nx")
        assert r["result"] == "1", "the session lives on after its fork bomb"
        r = execute(d, sid, "chunks = []\nwhile True:\n"
                            "    chunks.append(bytearray(64 << 20))", timeout_s=600)
        # The guest's OOM killer takes the interpreter; its init says so before the VM ends
        # (QEMU itself exits 0 when the guest powers off).
        assert (r["status"], r["state"], r["exit_code"]) == ("oom", "lost", 137), r
        assert r["error"]["name"] == "MemoryError", r
        assert "microVM ran out of memory (2048 MiB)" in r["error"]["value"], r
        body = d.get(f"/v1/sessions/{sid}").json()
        assert body["state"] == "lost" and body["reason"] == "it ran out of memory", body
    finally:
        d.delete(f"/v1/sessions/{sid}")


def test_an_interpreter_that_exits_says_how(vm_daemon):
    d = vm_daemon
    sid = create(d)
    try:
        r = execute(d, sid, "import os\nos._exit(3)")
        assert (r["status"], r["state"], r["exit_code"]) == ("error", "lost", 3), r
        assert r["error"]["value"] == "the interpreter exited with status 3", r
    finally:
        d.delete(f"/v1/sessions/{sid}")
