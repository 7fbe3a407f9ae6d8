"""The everyday API gaps of issue 14 end to end: an execute's own stdin, env and cwd (python and
bash, undone after the call), and the one-shot POST /execute's files in and out. One daemon for
the module; every session a test makes is deleted after it, whatever happened."""
import base64

import pytest

from airlock_daemon import daemon_fixture, sessions_fixture, start_daemon_or_fail

daemon = daemon_fixture(pytest)
sessions = sessions_fixture(pytest)

MiB = 1 << 20


def b64(data):
    return base64.b64encode(data).decode()


def refused(d, path, body, field):
    r = d.post(path, json=body)
    assert r.status_code == 400, f"{body!r}: " + d.why(r)
    assert r.json().get("field") == field, r.text
    return r.json()["error"]


# ------------------------------------------------------------------------------------------
# stdin
# ------------------------------------------------------------------------------------------


def test_stdin_feeds_input_then_eof(daemon, sessions):
    sid = sessions.new()
    code = ("a = input()\nb = input()\nprint(a, '|', b)\n"
            "try:\n    input()\nexcept EOFError:\n    print('EOF')")
    out = daemon.execute(sid, code, stdin="hello\nworld\n")
    assert out["status"] == "ok", out
    assert out["stdout"] == "hello | world\nEOF\n"
    # The next call has no stdin: EOF at once, nothing left over from the last one.
    out = daemon.execute(sid, "import sys\nprint(repr(sys.stdin.read()))")
    assert out["stdout"] == "''\n", out


def test_stdin_reaches_subprocesses_and_bash(daemon, sessions):
    sid = sessions.new()
    out = daemon.execute(sid, "import subprocess\n"
                              "print(subprocess.run(['wc', '-c'], capture_output=True, "
                              "text=True).stdout.strip())", stdin="x" * 1000)
    assert out["stdout"] == "1000\n", out
    out = daemon.execute(sid, "read line; echo \"got $line\"; cat", language="bash",
                         stdin="one\ntwo\n")
    assert out["stdout"] == "got one\ntwo\n", out
    out = daemon.execute(sid, "cat; echo end", language="bash")
    assert out["stdout"] == "end\n", out


def test_stdin_of_a_megabyte_that_is_not_read_does_not_block(daemon, sessions):
    sid = sessions.new()
    out = daemon.execute(sid, "print('ignored')", stdin="y" * MiB, timeout_s=20)
    assert out["status"] == "ok" and out["stdout"] == "ignored\n", out
    out = daemon.execute(sid, "echo ignored", language="bash", stdin="y" * MiB, timeout_s=20)
    assert out["status"] == "ok" and out["stdout"] == "ignored\n", out


def test_stdin_bounds(daemon, sessions):
    sid = sessions.new()
    msg = refused(daemon, f"/v1/sessions/{sid}/execute",
                  {"code": "1", "stdin": "z" * (MiB + 1)}, "stdin")
    assert "1048576" in msg
    refused(daemon, f"/v1/sessions/{sid}/execute", {"code": "1", "stdin": 5}, "stdin")
    refused(daemon, "/execute", {"code": "1", "stdin": ["a"]}, "stdin")


def test_one_shot_stdin(daemon):
    r = daemon.post("/execute", json={"code": "print(input()[::-1])", "stdin": "abc\n"})
    assert r.status_code == 200, daemon.why(r)
    assert r.json()["stdout"] == "cba\n"


# ------------------------------------------------------------------------------------------
# env and cwd
# ------------------------------------------------------------------------------------------


def test_env_applies_to_the_call_only_python(daemon, sessions):
    sid = sessions.new(env={"KEEP": "session"})
    code = ("import os, subprocess\nprint(os.environ.get('FOO'), os.environ.get('KEEP'))\n"
            "print(subprocess.run(['sh', '-c', 'echo $FOO'], capture_output=True, "
            "text=True).stdout.strip())")
    out = daemon.execute(sid, code, env={"FOO": "bar baz", "KEEP": "call"})
    assert out["stdout"] == "bar baz call\nbar baz\n", out
    out = daemon.execute(sid, "import os\nprint(os.environ.get('FOO'), os.environ.get('KEEP'))")
    assert out["stdout"] == "None session\n", out


def test_env_applies_to_the_call_only_bash(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "export OLD=kept; X=1", language="bash")
    out = daemon.execute(sid, "echo \"$FOO/$OLD\"; sh -c 'echo $FOO'; Y=2",
                         language="bash", env={"FOO": "it's \"quoted\" $HOME", "OLD": "new"})
    assert out["stdout"] == "it's \"quoted\" $HOME/new\nit's \"quoted\" $HOME\n", out
    # The call's variables are gone, the shell's own are back, and what the cell set stays.
    out = daemon.execute(sid, "echo \"${FOO-unset}/$OLD/$X/$Y\"", language="bash")
    assert out["stdout"] == "unset/kept/1/2\n", out


def test_cwd_applies_to_the_call_only(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "import os\nos.makedirs('sub/dir')")
    out = daemon.execute(sid, "import os\nprint(os.getcwd())\nopen('made.txt', 'w').write('x')",
                         cwd="sub/dir")
    assert out["stdout"] == "/work/sub/dir\n", out
    out = daemon.execute(sid, "import os\nprint(os.getcwd(), os.path.exists('sub/dir/made.txt'))")
    assert out["stdout"] == "/work True\n", out
    out = daemon.execute(sid, "pwd; cd /", language="bash", cwd="/tmp")
    assert out["stdout"] == "/tmp\n", out
    out = daemon.execute(sid, "pwd", language="bash", cwd="/work/sub")
    assert out["stdout"] == "/work/sub\n", out
    out = daemon.execute(sid, "pwd", language="bash")
    assert out["stdout"] == "/work\n", out


def test_cwd_and_env_refused(daemon, sessions):
    sid = sessions.new()
    path = f"/v1/sessions/{sid}/execute"
    assert "not a directory" in refused(daemon, path, {"code": "1", "cwd": "missing"}, "cwd")
    daemon.execute(sid, "open('file.txt', 'w').write('x')")
    refused(daemon, path, {"code": "1", "cwd": "file.txt"}, "cwd")
    refused(daemon, path, {"code": "1", "cwd": ""}, "cwd")
    assert "'..'" in refused(daemon, path, {"code": "1", "cwd": "../etc"}, "cwd")
    refused(daemon, path, {"code": "1", "cwd": "/" + "a" * 5000}, "cwd")
    refused(daemon, path, {"code": "1", "env": {"LD_PRELOAD": "/x.so"}}, "env")
    refused(daemon, path, {"code": "1", "env": {"PYTHONPATH": "/x"}}, "env")
    refused(daemon, path, {"code": "1", "env": {"1BAD": "x"}}, "env")
    refused(daemon, path, {"code": "1", "env": {"A": 1}}, "env")
    refused(daemon, path, {"code": "1", "env": "A=1"}, "env")
    refused(daemon, "/execute", {"code": "1", "cwd": "missing"}, "cwd")
    # The session is still fine after all that.
    assert daemon.execute(sid, "1 + 1")["result"] == "2"


def test_cwd_in_the_process_mode_stays_below_work():
    """In the process mode /work is a host directory that a cwd is mapped onto: a '..' in an
    absolute cwd would lead out of it (to the sessions' common parent on the host), which
    docs/API.md says is refused there."""
    d = start_daemon_or_fail(pytest, args=("--pool-size", "0", "--isolation", "process"))
    try:
        sid = d.create_session()
        d.execute(sid, "import os\nos.makedirs('sub')")
        out = d.execute(sid, "import os\nprint(os.path.basename(os.getcwd()))", cwd="/work/sub")
        assert out["stdout"] == "sub\n", out
        for cwd in ("/work/..", "/work/../..", "/work/sub/../.."):
            msg = refused(d, f"/v1/sessions/{sid}/execute", {"code": "1", "cwd": cwd}, "cwd")
            assert "below /work" in msg, (cwd, msg)
        refused(d, "/execute", {"code": "1", "cwd": "/work/../.."}, "cwd")
    finally:
        _, problems = d.stop()
    assert not problems, problems


# ------------------------------------------------------------------------------------------
# One-shot files
# ------------------------------------------------------------------------------------------


def test_one_shot_files_in_and_out(daemon):
    code = ("import csv\nrows = list(csv.reader(open('data/in.csv')))\n"
            "open('out.csv', 'w').write('\\n'.join(','.join(r[::-1]) for r in rows))\n"
            "open('data/in.csv', 'a').write('3,4')\nopen('bin.dat', 'wb').write(bytes(range(256)))")
    r = daemon.post("/execute", json={"code": code,
                                      "files": {"data/in.csv": b64(b"1,2\na,b\n"),
                                                "unused.txt": b64(b"")}})
    assert r.status_code == 200, daemon.why(r)
    files = {f["path"]: f for f in r.json()["files"]}
    assert base64.b64decode(files["out.csv"]["content"]) == b"2,1\nb,a"
    assert files["out.csv"]["change"] == "created"
    assert base64.b64decode(files["bin.dat"]["content"]) == bytes(range(256))
    assert files["data/in.csv"]["change"] == "changed"
    assert base64.b64decode(files["data/in.csv"]["content"]) == b"1,2\na,b\n3,4"
    assert "unused.txt" not in files  # written before the code ran: not the code's doing


def test_one_shot_files_out_caps(daemon):
    code = ("open('big.bin', 'wb').write(b'a' * (4 * 1024 * 1024 + 1))\n"
            "for i in range(5):\n    open(f'part{i}.bin', 'wb').write(b'b' * (4 * 1024 * 1024))")
    r = daemon.post("/execute", json={"code": code}, timeout=180)
    assert r.status_code == 200, daemon.why(r)
    files = {f["path"]: f for f in r.json()["files"]}
    assert files["big.bin"]["content"] is None
    assert "4194304" in files["big.bin"]["omitted"]
    parts = [files[f"part{i}.bin"] for i in range(5)]
    given = [p for p in parts if p["content"] is not None]
    assert len(given) == 4, [p.get("omitted") for p in parts]
    assert all(len(base64.b64decode(p["content"])) == 4 * MiB for p in given)
    left = [p for p in parts if p["content"] is None]
    assert "together" in left[0]["omitted"]


def test_one_shot_files_refused(daemon):
    for bad, why in [({"../x": b64(b"a")}, "'..'"), ({"/etc/x": b64(b"a")}, "relative"),
                     ({"a//b": b64(b"a")}, "empty"), ({"x": "not base64!"}, "base64"),
                     ({"x": 3}, "base64")]:
        msg = refused(daemon, "/execute", {"code": "1", "files": bad}, "files")
        assert why in msg, msg
    refused(daemon, "/execute", {"code": "1", "files": ["x"]}, "files")
    # Only one-shot runs take files: a session has the files API.
    r = daemon.create_session()
    try:
        refused(daemon, f"/v1/sessions/{r}/execute", {"code": "1", "files": {}}, "files")
    finally:
        daemon.delete_session(r)


def test_one_shot_files_streamed(daemon):
    import json
    r = daemon.post("/execute", json={"code": "open('o.txt', 'w').write(open('i.txt').read())",
                                      "files": {"i.txt": b64(b"streamed")}},
                    headers={"Accept": "application/x-ndjson"}, stream=True)
    assert r.status_code == 200, daemon.why(r)
    events = [json.loads(line) for line in r.iter_lines() if line]
    end = events[-1]
    assert end["type"] == "end", events
    files = {f["path"]: f for f in end["result"]["files"]}
    assert base64.b64decode(files["o.txt"]["content"]) == b"streamed"


# ------------------------------------------------------------------------------------------
# Metadata, PATCH, timeout_s and lifetime_s
# ------------------------------------------------------------------------------------------


def patch(d, sid, body, expect=200):
    r = d.req("PATCH", f"/v1/sessions/{sid}", json=body)
    assert r.status_code == expect, f"PATCH {body!r}: " + d.why(r)
    return r.json()


def listed_ids(d, query):
    r = d.get("/v1/sessions" + query)
    assert r.status_code == 200, d.why(r)
    return {s["id"] for s in r.json()["sessions"]}


def wait_state(d, sid, state, timeout=20):
    import time
    end = time.monotonic() + timeout
    seen = None
    while time.monotonic() < end:
        seen = d.get(f"/v1/sessions/{sid}").json().get("state")
        if seen == state:
            return
        time.sleep(0.2)
    raise AssertionError(f"{sid} is {seen}, not {state}, after {timeout}s")


def test_metadata_shown_and_filtered(daemon, sessions):
    a = sessions.new(metadata={"user": "ann", "team": "red", "k.x-1": "a b&c"})
    b = sessions.new(metadata={"user": "bob", "team": "red"})
    c = sessions.new()
    assert daemon.get(f"/v1/sessions/{a}").json()["metadata"] == {
        "user": "ann", "team": "red", "k.x-1": "a b&c"}
    assert daemon.get(f"/v1/sessions/{c}").json()["metadata"] == {}
    mine = {a, b, c}
    assert listed_ids(daemon, "?metadata.team=red") & mine == {a, b}
    assert listed_ids(daemon, "?metadata.team=red&metadata.user=bob") & mine == {b}
    assert listed_ids(daemon, "?metadata.k.x-1=a%20b%26c") & mine == {a}
    assert listed_ids(daemon, "?metadata.team=blue") & mine == set()
    assert listed_ids(daemon, "?metadata.team=red&state=idle") & mine == {a, b}
    r = daemon.get("/v1/sessions?metadata.bad%20key=1")
    assert r.status_code == 400 and r.json()["field"] == "metadata", r.text


@pytest.mark.parametrize("body", [
    {"metadata": []}, {"metadata": {"": "x"}}, {"metadata": {"a b": "x"}},
    {"metadata": {"k" * 65: "x"}}, {"metadata": {"a": 1}}, {"metadata": {"a": None}},
    {"metadata": {"a": "v" * 1025}}, {"metadata": {f"k{i}": "v" for i in range(65)}},
])
def test_metadata_refused_at_create(daemon, body):
    r = daemon.post("/v1/sessions", json=body)
    assert r.status_code == 400 and r.json()["field"] == "metadata", r.text


@pytest.mark.parametrize("body,field", [
    ({"lifetime_s": 0}, "lifetime_s"), ({"lifetime_s": 30 * 86400 + 1}, "lifetime_s"),
    ({"lifetime_s": "60"}, "lifetime_s"), ({"timeout_s": 0}, "timeout_s"),
    ({"timeout_s": 3601}, "timeout_s"),
])
def test_lifetime_and_timeout_refused_at_create(daemon, body, field):
    r = daemon.post("/v1/sessions", json=body)
    assert r.status_code == 400 and r.json()["field"] == field, r.text


def test_patch_live_session(daemon, sessions):
    sid = sessions.new(metadata={"a": "1", "b": "2"})
    s = patch(daemon, sid, {"metadata": {"b": None, "c": "3"}, "stop_after_s": 120,
                            "timeout_s": 1, "lifetime_s": 600})
    assert s["metadata"] == {"a": "1", "c": "3"}, s
    assert s["stop_after_s"] == 120 and s["timeout_s"] == 1 and s["stops_at"], s
    assert s["state"] == "idle"
    # timeout_s is the default of calls that give none; a call's own still wins.
    out = daemon.execute(sid, "import time; time.sleep(5)")
    assert out["status"] == "timeout", out
    assert daemon.execute(sid, "import time; time.sleep(1.5); 7", timeout_s=10)["result"] == "7"
    s = patch(daemon, sid, {"lifetime_s": None})
    assert s["stops_at"] is None, s
    assert daemon.get(f"/v1/sessions/{sid}").json()["metadata"] == {"a": "1", "c": "3"}


@pytest.mark.parametrize("body,field", [
    ({}, "body"), ({"nope": 1}, "nope"), ({"stop_after_s": 0}, "stop_after_s"),
    ({"stop_after_s": 86401}, "stop_after_s"), ({"timeout_s": -1}, "timeout_s"),
    ({"timeout_s": None}, "timeout_s"), ({"lifetime_s": 31 * 86400}, "lifetime_s"),
    ({"metadata": {"x": 5}}, "metadata"), ({"metadata": "x"}, "metadata"),
    ({"metadata": {f"k{i}": "v" for i in range(65)}}, "metadata"),
])
def test_patch_refused(daemon, sessions, body, field):
    sid = sessions.new(metadata={"keep": "me"})
    r = daemon.req("PATCH", f"/v1/sessions/{sid}", json=body)
    assert r.status_code == 400 and r.json()["field"] == field, r.text
    assert daemon.get(f"/v1/sessions/{sid}").json()["metadata"] == {"keep": "me"}


def test_patch_merge_past_the_entry_limit_refused(daemon, sessions):
    sid = sessions.new(metadata={f"k{i}": "v" for i in range(64)})
    r = daemon.req("PATCH", f"/v1/sessions/{sid}", json={"metadata": {"one": "more"}})
    assert r.status_code == 400 and r.json()["field"] == "metadata", r.text
    s = patch(daemon, sid, {"metadata": {"k0": None, "one": "more"}})
    assert len(s["metadata"]) == 64 and "one" in s["metadata"]


def test_patch_unknown_session_and_allow_header(daemon):
    r = daemon.req("PATCH", "/v1/sessions/s-" + "0" * 23 + "1", json={"timeout_s": 5})
    assert r.status_code == 404, r.text
    status, headers, _ = daemon.raw("PUT", "/v1/sessions/s-" + "0" * 23 + "1")
    assert status == 405 and "PATCH" in headers.get("allow", ""), headers


def test_patch_stopped_session_does_not_resume_it(daemon, sessions):
    sid = sessions.new(metadata={"a": "1"})
    daemon.execute(sid, "x = 41")
    r = daemon.post(f"/v1/sessions/{sid}/stop", timeout=120)
    assert r.status_code == 200, daemon.why(r)
    s = patch(daemon, sid, {"metadata": {"b": "2"}, "timeout_s": 2, "stop_after_s": 90})
    assert s["state"] == "stopped", s
    assert s["metadata"] == {"a": "1", "b": "2"} and s["timeout_s"] == 2, s
    assert s["stop_after_s"] == 90
    assert daemon.get(f"/v1/sessions/{sid}").json()["state"] == "stopped"
    assert sid in listed_ids(daemon, "?metadata.b=2&state=stopped")
    # Resumed by its next call, with what the PATCH set.
    assert daemon.execute(sid, "x + 1")["result"] == "42"
    s = daemon.get(f"/v1/sessions/{sid}").json()
    assert s["metadata"] == {"a": "1", "b": "2"} and s["timeout_s"] == 2, s
    assert s["stop_after_s"] == 90, s


def test_fork_inherits_metadata(daemon, sessions):
    sid = sessions.new(metadata={"run": "r1"}, timeout_s=30)
    r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 2}, timeout=120)
    assert r.status_code == 201, daemon.why(r)
    kids = [k["id"] for k in r.json()["sessions"]]
    sessions.ids.extend(kids)
    for k in kids:
        s = daemon.get(f"/v1/sessions/{k}").json()
        assert s["metadata"] == {"run": "r1"} and s["timeout_s"] == 30, s
    assert listed_ids(daemon, "?metadata.run=r1") >= {sid, *kids}


def test_lifetime_stops_a_busy_then_idle_session(daemon, sessions):
    sid = sessions.new(lifetime_s=2)
    s = daemon.get(f"/v1/sessions/{sid}").json()
    assert s["stops_at"] is not None, s
    # Busy past its lifetime: the cell finishes, then the session stops (state saved).
    out = daemon.execute(sid, "import time\ny = 5\ntime.sleep(3.5)\n'done'")
    assert out["result"] == "'done'" and out["state"] == "preserved", out
    wait_state(daemon, sid, "stopped", timeout=15)
    assert daemon.execute(sid, "y * 2")["result"] == "10"
    # The lifetime was spent: the resumed session has none and stays.
    assert daemon.get(f"/v1/sessions/{sid}").json()["stops_at"] is None


def test_patch_persists_across_a_daemon_restart(tmp_path):
    import tempfile

    from airlock_daemon import restart_daemon, start_daemon_or_fail
    work = tempfile.mkdtemp(prefix="airlock-e2e-gaps-")
    first = start_daemon_or_fail(pytest, workdir=work, args=["--pool-size", "0"])
    second = None
    try:
        live = first.create_session(metadata={"who": "live"})
        stopped = first.create_session(metadata={"who": "stopped"})
        assert first.post(f"/v1/sessions/{stopped}/stop", timeout=120).status_code == 200
        patch(first, stopped, {"metadata": {"p": "1"}, "timeout_s": 3})
        patch(first, live, {"metadata": {"p": "2"}, "lifetime_s": 3600, "stop_after_s": 100})
        rc, problems = first.stop(timeout=120)
        assert rc == 0 and not problems, problems
        second = restart_daemon(pytest, first)
        s = second.get(f"/v1/sessions/{stopped}").json()
        assert s["state"] == "stopped" and s["metadata"] == {"who": "stopped", "p": "1"}, s
        assert s["timeout_s"] == 3, s
        s = second.get(f"/v1/sessions/{live}").json()
        assert s["state"] == "stopped", s  # saved at shutdown
        assert s["metadata"] == {"who": "live", "p": "2"} and s["stop_after_s"] == 100, s
        assert s["stops_at"] is not None, s
        assert listed_ids(second, "?metadata.p=2") == {live}
    finally:
        if second is not None:
            second.stop(timeout=120)
        elif not first.stopped:
            first.stop(timeout=120)
        import shutil
        shutil.rmtree(work, ignore_errors=True)
