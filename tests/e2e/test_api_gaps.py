"""The everyday API gaps of issue 14 end to end: an execute's own stdin, env and cwd (python and
bash, undone after the call), and the one-shot POST /execute's files in and out. One daemon for
the module; every session a test makes is deleted after it, whatever happened."""
import base64

import pytest

from airlock_daemon import daemon_fixture, sessions_fixture

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
