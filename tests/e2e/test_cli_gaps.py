"""The CLI's everyday gaps (issue 14, item 4): `airlock run`/`exec` save rich outputs as files,
`airlock sessions new` and `rm ID...`, and `airlock cp` in and out of a session, against a real
daemon (one per module), each with its bad inputs. Every test works in a temporary directory of
its own and deletes the sessions it made."""
import json
import os
import pathlib
import re
import subprocess

import pytest

from airlock_daemon import AIRLOCK, daemon_fixture, sessions_fixture

daemon = daemon_fixture(pytest)
sessions = sessions_fixture(pytest)

PNG = b"\x89PNG\r\n\x1a\n"
SESSION_ID = re.compile(r"^s-[0-9a-f]{24}$")
UNKNOWN_ID = "s-" + "0" * 23 + "1"
FIGURE = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\n"
HTML = ("class T:\n    def _repr_html_(self):\n        return '<table><td>1</td></table>'\n"
        "    def _repr_svg_(self):\n        return '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'\n"
        "T()\n")


def cli(d, *args, cwd, stdin=None, timeout=120):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRLOCK_") or k in ("AIRLOCK_LOG", "AIRLOCK_RUNNER")}
    if d is not None:
        env.update(AIRLOCK_URL=d.url, AIRLOCK_TOKEN=d.token)
    if isinstance(stdin, str):
        stdin = stdin.encode()
    p = subprocess.run([AIRLOCK, *args], input=stdin, capture_output=True, timeout=timeout,
                       env=env, cwd=cwd)
    p.text = p.stdout.decode("utf-8", "replace")
    p.err = p.stderr.decode("utf-8", "replace")
    return p


def execute(d, sid, code):
    r = d.post(f"/v1/sessions/{sid}/execute", json={"code": code})
    assert r.status_code == 200, d.why(r)
    return r.json()


def put(d, sid, path, data):
    r = d.put(f"/v1/sessions/{sid}/files/{path}", data=data)
    assert r.status_code == 200, d.why(r)


def get(d, sid, path):
    r = d.get(f"/v1/sessions/{sid}/files/{path}")
    assert r.status_code == 200, d.why(r)
    return r.content


# ------------------------------------------------------------------------------------------
# Rich outputs saved by run and exec
# ------------------------------------------------------------------------------------------


def test_exec_saves_figures_numbered_and_never_overwrites(daemon, sessions, tmp_path):
    sid = sessions.new()
    execute(daemon, sid, "x = 1")
    p = cli(daemon, "exec", "-s", sid, "-", stdin=FIGURE, cwd=tmp_path)
    assert p.returncode == 0, p.err
    saved = tmp_path / "airlock-output" / "exec-2-figure-1.png"
    assert saved.read_bytes().startswith(PNG), sorted(os.listdir(tmp_path / "airlock-output"))
    assert "saved figure to airlock-output/exec-2-figure-1.png" in p.err, p.err
    # A one-shot exec has no count of its own: the same name twice is numbered, not replaced.
    first = cli(daemon, "exec", "-", stdin=FIGURE, cwd=tmp_path)
    second = cli(daemon, "exec", "-", stdin=FIGURE, cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, first.err + second.err
    out = tmp_path / "airlock-output"
    assert (out / "exec-figure-1.png").read_bytes().startswith(PNG)
    assert (out / "exec-figure-1-2.png").read_bytes().startswith(PNG)
    assert "airlock-output/exec-figure-1-2.png" in second.err, second.err


def test_exec_saves_html_and_svg_to_output_dir(daemon, tmp_path):
    p = cli(daemon, "exec", "--output", "out/deep", "-", stdin=HTML, cwd=tmp_path)
    assert p.returncode == 0, p.err
    out = tmp_path / "out" / "deep"
    assert (out / "exec-html-1.html").read_text() == "<table><td>1</td></table>"
    assert (out / "exec-figure-1.svg").read_text().startswith("<svg")
    assert "saved html to out/deep/exec-html-1.html" in p.err, p.err
    assert not (tmp_path / "airlock-output").exists()


def test_exec_json_keeps_outputs_and_saves_nothing(daemon, tmp_path):
    p = cli(daemon, "exec", "--json", "-", stdin=FIGURE, cwd=tmp_path)
    assert p.returncode == 0, p.err
    outputs = json.loads(p.text)["outputs"]
    assert any("image/png" in o["data"] for o in outputs), outputs
    assert os.listdir(tmp_path) == [], "--json saved files"
    p = cli(daemon, "exec", "--json", "--output", "x", "-", stdin="1", cwd=tmp_path)
    assert p.returncode == 2 and "drop --output or --json" in p.err, p.err


def test_exec_refuses_a_bad_output_dir_before_running(daemon, sessions, tmp_path):
    sid = sessions.new()
    (tmp_path / "afile").write_text("keep")
    p = cli(daemon, "exec", "-s", sid, "--output", "afile", "-", stdin=FIGURE, cwd=tmp_path)
    assert p.returncode == 2, p.err
    assert "--output 'afile' is not a directory" in p.err, p.err
    p = cli(daemon, "exec", "-s", sid, "--output", "afile/sub", "-", stdin=FIGURE, cwd=tmp_path)
    assert p.returncode == 2 and "is not a directory" in p.err, p.err
    p = cli(daemon, "exec", "-s", sid, "--output", "/proc/sys/airlock-out", "-", stdin=FIGURE,
            cwd=tmp_path)
    assert p.returncode == 2 and "is not writable" in p.err, p.err
    r = daemon.get(f"/v1/sessions/{sid}")
    assert r.json()["execution_count"] == 0, "the code ran despite the bad --output"
    assert (tmp_path / "afile").read_text() == "keep"


def test_run_saves_rich_outputs_and_refuses_a_file(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("airlock's namespaces isolation needs root")
    (tmp_path / "plot.py").write_text(FIGURE + HTML)
    p = cli(None, "run", "plot.py", cwd=tmp_path)
    assert p.returncode == 0, p.err
    out = tmp_path / "airlock-output"
    assert sorted(os.listdir(out)) == ["run-figure-1.svg", "run-figure-2.png", "run-html-1.html"]
    assert (out / "run-figure-2.png").read_bytes().startswith(PNG)
    assert "saved figure to airlock-output/run-figure-2.png" in p.err, p.err
    # --output takes both the files of /work and the outputs, and is created when missing.
    p = cli(None, "run", "--output", "res/a", "-", stdin="open('t.txt', 'w').write('x')\n" + HTML,
            cwd=tmp_path)
    assert p.returncode == 0, p.err
    assert sorted(os.listdir(tmp_path / "res" / "a")) == ["run-figure-1.svg", "run-html-1.html",
                                                          "t.txt"]
    p = cli(None, "run", "--output", "plot.py", "-", stdin="print('RAN')", cwd=tmp_path)
    assert p.returncode == 2 and "--output 'plot.py' is not a directory" in p.err, p.err
    assert "RAN" not in p.text


# ------------------------------------------------------------------------------------------
# sessions new and rm
# ------------------------------------------------------------------------------------------


def test_sessions_new_prints_the_id_and_takes_profile_and_env(daemon, sessions, tmp_path):
    p = cli(daemon, "sessions", "new", "--profile", "minimal", "--env", "GREETING=hello world",
            "--env", "EMPTY=", cwd=tmp_path)
    assert p.returncode == 0, p.err
    sid = p.text.splitlines()[-1]
    assert SESSION_ID.match(sid), p.text
    sessions.ids.append(sid)
    s = daemon.get(f"/v1/sessions/{sid}").json()
    assert s["profile"] == "minimal", s
    # minimal refuses os: the environment is seen through a bash-less, os-less path.
    p = cli(daemon, "sessions", "new", "--json", "--env", "A=1", cwd=tmp_path)
    assert p.returncode == 0, p.err
    obj = json.loads(p.text)
    sessions.ids.append(obj["id"])
    assert obj["profile"] == "default" and SESSION_ID.match(obj["id"]), obj
    assert execute(daemon, obj["id"], "import os\nos.environ['A']")["result"] == "'1'"


@pytest.mark.parametrize("args, message", [
    (["--env", "NOEQUALS"], "--env 'NOEQUALS' is not KEY=VALUE"),
    (["--env", "=v"], "--env '=v' is not KEY=VALUE"),
    (["--env", "A=1", "--env", "A=2"], "--env 'A' is given twice"),
    (["--metadata", "k"], "--metadata 'k' is not KEY=VALUE"),
    (["--lifetime", "0"], "--lifetime '0' is not a duration"),
    (["--lifetime", "31d"], "--lifetime '31d' is not a duration"),
    (["--lifetime", "soon"], "--lifetime 'soon' is not a duration"),
    (["extra"], "unexpected argument 'extra'"),
])
def test_sessions_new_bad_arguments(daemon, tmp_path, args, message):
    before = len(daemon.get("/v1/sessions").json()["sessions"])
    p = cli(daemon, "sessions", "new", *args, cwd=tmp_path)
    assert p.returncode == 2, p.err
    assert message in p.err, p.err
    assert len(daemon.get("/v1/sessions").json()["sessions"]) == before


def test_sessions_new_options_belong_to_new(daemon, tmp_path):
    p = cli(daemon, "sessions", "list", "--env", "A=1", cwd=tmp_path)
    assert p.returncode == 2 and "only apply to new" in p.err, p.err
    p = cli(daemon, "sessions", "new", "--profile", "no-such-profile", cwd=tmp_path)
    assert p.returncode == 1 and "profile" in p.err, p.err


def test_sessions_new_metadata_and_lifetime(daemon, sessions, tmp_path):
    """Needs engineer D's metadata and lifetime_s on POST /v1/sessions (the shared contract)."""
    p = cli(daemon, "sessions", "new", "--json", "--metadata", "owner=ana",
            "--metadata", "run.id=7", "--lifetime", "1h", cwd=tmp_path)
    assert p.returncode == 0, p.err
    obj = json.loads(p.text)
    sessions.ids.append(obj["id"])
    assert obj["metadata"] == {"owner": "ana", "run.id": "7"}, obj
    assert obj["stops_at"], obj
    listed = daemon.get("/v1/sessions?metadata.owner=ana").json()["sessions"]
    assert [s["id"] for s in listed] == [obj["id"]], listed


def test_sessions_rm_several_and_all_stopped(daemon, tmp_path):
    ids = [daemon.create_session() for _ in range(4)]
    try:
        p = cli(daemon, "sessions", "rm", ids[0], UNKNOWN_ID, ids[1], cwd=tmp_path)
        assert p.returncode == 1, p.err
        assert p.text.splitlines() == [f"deleted {ids[0]}", f"deleted {ids[1]}"], p.text
        assert f"session {UNKNOWN_ID} not found" in p.err, p.err
        for sid in ids[:2]:
            assert daemon.get(f"/v1/sessions/{sid}").status_code == 404
        r = daemon.post(f"/v1/sessions/{ids[2]}/stop", data="")
        assert r.status_code == 200, daemon.why(r)
        p = cli(daemon, "sessions", "rm", "--all-stopped", "--json", cwd=tmp_path)
        assert p.returncode == 0, p.err
        assert [x.get("id", ids[2]) for x in json.loads(p.text)] == [ids[2]], p.text
        assert daemon.get(f"/v1/sessions/{ids[2]}").status_code == 404
        assert daemon.get(f"/v1/sessions/{ids[3]}").status_code == 200, "a live one was deleted"
        p = cli(daemon, "sessions", "rm", "--all-stopped", cwd=tmp_path)
        assert p.returncode == 0 and p.text == "no stopped sessions\n", p.text + p.err
    finally:
        for sid in ids:
            daemon.delete_session(sid)


@pytest.mark.parametrize("args, message", [
    (["rm"], "rm: missing the session ID (or --all-stopped)"),
    (["rm", "--all-stopped", "s-1"], "give session IDs or --all-stopped, not both"),
    (["rm", "../x"], "'../x' is not a session id"),
    (["stop", "--all-stopped", "s-1"], "--all-stopped only applies to rm"),
])
def test_sessions_rm_bad_arguments(daemon, tmp_path, args, message):
    p = cli(daemon, "sessions", *args, cwd=tmp_path)
    assert p.returncode == 2 and message in p.err, p.err


# ------------------------------------------------------------------------------------------
# cp
# ------------------------------------------------------------------------------------------


def test_cp_file_in_and_out(daemon, sessions, tmp_path):
    sid = sessions.new()
    data = bytes(range(256)) * 1000
    (tmp_path / "data.bin").write_bytes(data)
    p = cli(daemon, "cp", "data.bin", f"{sid}:in/data.bin", cwd=tmp_path)
    assert p.returncode == 0, p.err
    assert get(daemon, sid, "in/data.bin") == data
    # Into an existing directory, under its own name; /work/... is accepted.
    p = cli(daemon, "cp", "data.bin", f"{sid}:/work/in", cwd=tmp_path)
    assert p.returncode == 0, p.err
    assert execute(daemon, sid, "import os\nsorted(os.listdir('in'))")["result"] == \
        "['data.bin']"
    p = cli(daemon, "cp", "data.bin", f"{sid}:", cwd=tmp_path)
    assert p.returncode == 0 and get(daemon, sid, "data.bin") == data, p.err
    # Out: to a new name, then into an existing directory.
    p = cli(daemon, "cp", f"{sid}:in/data.bin", "copy.bin", cwd=tmp_path)
    assert p.returncode == 0 and (tmp_path / "copy.bin").read_bytes() == data, p.err
    (tmp_path / "dl").mkdir()
    p = cli(daemon, "cp", f"{sid}:/work/in/data.bin", "dl", cwd=tmp_path)
    assert p.returncode == 0 and (tmp_path / "dl" / "data.bin").read_bytes() == data, p.err


def test_cp_standard_input_and_output(daemon, sessions, tmp_path):
    sid = sessions.new()
    p = cli(daemon, "cp", "-", f"{sid}:notes/hello.txt", stdin="hi there\n", cwd=tmp_path)
    assert p.returncode == 0, p.err
    assert get(daemon, sid, "notes/hello.txt") == b"hi there\n"
    p = cli(daemon, "cp", f"{sid}:notes/hello.txt", "-", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == b"hi there\n", p.err
    p = cli(daemon, "cp", "-", f"{sid}:notes", stdin="x", cwd=tmp_path)
    assert p.returncode == 1 and "standard input needs a file name" in p.err, p.err
    p = cli(daemon, "cp", "-r", f"{sid}:notes", "-", cwd=tmp_path)
    assert p.returncode == 2 and "takes one file, not -r" in p.err, p.err


def test_cp_directories(daemon, sessions, tmp_path):
    sid = sessions.new()
    src = tmp_path / "results"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "a.csv").write_text("a,b\n")
    (src / "sub" / "b.txt").write_text("b")
    (src / "sub" / "deeper" / "c.txt").write_text("c")
    (src / "link").symlink_to("/etc/hostname")
    p = cli(daemon, "cp", "results", f"{sid}:results", cwd=tmp_path)
    assert p.returncode == 1 and "is a directory (copy directories with -r)" in p.err, p.err
    p = cli(daemon, "cp", "-r", "results", f"{sid}:copy", cwd=tmp_path)
    assert p.returncode == 0, p.err
    assert "skipped 'results/link': symbolic link (not followed)" in p.err, p.err
    assert get(daemon, sid, "copy/sub/deeper/c.txt") == b"c"
    # Into an existing directory: under its own name, as cp -r does.
    p = cli(daemon, "cp", "-r", "results", f"{sid}:copy", cwd=tmp_path)
    assert p.returncode == 0, p.err
    assert get(daemon, sid, "copy/results/a.csv") == b"a,b\n"

    execute(daemon, sid, "import os\nos.symlink('/etc/passwd', 'copy/planted')")
    p = cli(daemon, "cp", f"{sid}:copy", "back", cwd=tmp_path)
    assert p.returncode == 1 and "is a directory (copy directories with -r)" in p.err, p.err
    p = cli(daemon, "cp", "-r", f"{sid}:copy", "back", cwd=tmp_path)
    assert p.returncode == 0, p.err
    back = tmp_path / "back"
    assert (back / "sub" / "deeper" / "c.txt").read_text() == "c"
    assert (back / "results" / "a.csv").read_text() == "a,b\n"
    assert not (back / "planted").exists() and not (back / "planted").is_symlink()
    assert "skipped" in p.err and "planted: symbolic link (not followed)" in p.err, p.err
    # Into an existing local directory: under the remote name.
    (tmp_path / "dl").mkdir()
    p = cli(daemon, "cp", "-r", f"{sid}:copy/sub", "dl", cwd=tmp_path)
    assert p.returncode == 0 and (tmp_path / "dl" / "sub" / "b.txt").read_text() == "b", p.err
    assert (tmp_path / "dl" / "sub" / "deeper" / "c.txt").read_text() == "c"


@pytest.mark.parametrize("args, status, message", [
    (["a", "b"], 2, "one of SRC and DST must be in a session"),
    (["s-1:a", "s-2:b"], 2, "one of SRC and DST must be in a session"),
    (["a"], 2, "expected SRC and DST"),
    (["missing.txt", "SID:x"], 1, "'missing.txt': No such file or directory"),
    (["SID:missing.txt", "."], 1, "missing.txt: no such file or directory in the session"),
    (["SID:/etc/passwd", "."], 2, "a session's files are under /work"),
    (["SID:../x", "."], 2, "'..' is not a name"),
    (["x", "SID:a/./x"], 2, "'.' is not a name"),
    (["x", "SID:a//x"], 2, "empty name"),
    (["x", f"{UNKNOWN_ID}:x"], 1, UNKNOWN_ID),
    (["b@d:x", "."], 2, "is not a session id"),
])
def test_cp_bad_inputs(daemon, sessions, tmp_path, args, status, message):
    sid = sessions.new()
    (tmp_path / "x").write_text("x")
    args = [a.replace("SID", sid) for a in args]
    p = cli(daemon, "cp", *args, cwd=tmp_path)
    assert p.returncode == status, (p.returncode, p.err)
    assert message in p.err, p.err
    assert not (tmp_path / "passwd").exists()


def test_cp_file_onto_a_directory_and_directory_onto_a_file(daemon, sessions, tmp_path):
    sid = sessions.new()
    put(daemon, sid, "f.txt", b"file")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("x")
    p = cli(daemon, "cp", "-r", "d", f"{sid}:f.txt", cwd=tmp_path)
    assert p.returncode == 1 and "onto the file" in p.err, p.err
    assert get(daemon, sid, "f.txt") == b"file"


def test_cp_out_does_not_write_through_links_in_the_local_tree(daemon, sessions, tmp_path):
    """The names inside a copied tree are the session's (its code chose them): a local link of
    the same name in a directory that is copied into again is not followed, so a session
    cannot make `cp -r` write outside the directory the user named."""
    sid = sessions.new()
    put(daemon, sid, "out/f.txt", b"from the session")
    put(daemon, sid, "out/d/g.txt", b"from the session")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    outside_dir = tmp_path / "outside-dir"
    outside_dir.mkdir()
    local = tmp_path / "dl" / "out"
    local.mkdir(parents=True)
    (local / "f.txt").symlink_to(outside)
    (local / "d").symlink_to(outside_dir)
    p = cli(daemon, "cp", "-r", f"{sid}:out", "dl", cwd=tmp_path)
    assert outside.read_text() == "keep", p.err
    assert list(outside_dir.iterdir()) == [], p.err
    assert p.returncode == 1, p.err
    assert "'dl/out/f.txt': a symbolic link, not followed" in p.err, p.err
    assert "'dl/out/d': a symbolic link, not followed" in p.err, p.err
    # A name the user gave on the command line is theirs: followed, as cp does.
    p = cli(daemon, "cp", f"{sid}:out/f.txt", "dl/out/f.txt", cwd=tmp_path)
    assert p.returncode == 0 and outside.read_text() == "from the session", p.err


def test_cli_help_names_the_new_commands(tmp_path):
    p = cli(None, "--help", cwd=tmp_path)
    assert " cp " in p.text and "create" in p.text, p.text
    for args, words in ((["cp", "--help"], ["ID:PATH", "-r, --recursive", "standard input"]),
                        (["sessions", "--help"], ["sessions new", "--metadata K=V",
                                                  "--lifetime S", "--all-stopped"]),
                        (["exec", "--help"], ["--output DIR", "exec-N-figure-K.png"]),
                        (["run", "--help"], ["airlock-output", "run-figure-N.png"])):
        p = cli(None, *args, cwd=tmp_path)
        assert p.returncode == 0, p.err
        for w in words:
            assert w in p.text, (args, w)
