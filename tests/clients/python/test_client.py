"""The Python client (clients/python, docs/CLIENTS.md) against a real daemon: every method of
Sandbox, Files, run() and AsyncSandbox, streaming callbacks in order, a matplotlib figure as
PNG bytes, errors as the right exception classes, token discovery as the CLI does it, a unix
socket URL, and an offline `pip install` of the package."""
import asyncio
import base64
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import airlock
from airlock import _http
from airlock_daemon import Daemon, DaemonStartError, free_port

ROOT = Path(__file__).resolve().parents[3]
CLIENT_SRC = ROOT / "clients" / "python"
PY = "/usr/bin/python3"         # Debian's Python and pip, as a user of the machine has them
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def clean_env(**extra):
    """os.environ without AIRLOCK_* (a subprocess finds the daemon only as told)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    env.update(extra)
    return env


@pytest.fixture
def tmp(tmp_path_factory):
    d = Path(tempfile.mkdtemp(prefix="airlock-pyclient-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------------------------
# Packaging
# ------------------------------------------------------------------------------------------


def test_pip_installs_it_offline_and_it_runs(daemon, tmp):
    # A copy: pip writes build/ and *.egg-info next to the sources it builds.
    src = tmp / "src"
    shutil.copytree(CLIENT_SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                   "__pycache__"))
    target = tmp / "site"
    r = subprocess.run([PY, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        "--no-cache-dir", "--disable-pip-version-check", "--target",
                        str(target), str(src)], capture_output=True, text=True, timeout=300,
                       env=clean_env(PIP_NO_INPUT="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "airlock" / "__init__.py").is_file()
    assert (target / "airlock" / "py.typed").is_file()
    code = ("import airlock, sys\n"
            "print(airlock.__file__)\n"
            "with airlock.Sandbox() as sb:\n"
            "    print(sb.run_code('6 * 7').result)\n")
    # cwd=tmp and a clean environment: only the installed copy can be imported
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp,
                       env=clean_env(PYTHONPATH=str(target), AIRLOCK_URL=daemon.url,
                                     AIRLOCK_TOKEN=daemon.token))
    assert r.returncode == 0, r.stderr
    where, result = r.stdout.split()
    assert where.startswith(str(target)), f"imported from {where}, not the installed copy"
    assert result == "42"


def test_meson_installs_the_package_for_the_system_python():
    """`meson install` ships clients/python/airlock (option python_client, on by default)."""
    airlock_bin = os.environ.get("AIRLOCK_BIN")
    build = Path(airlock_bin).parents[2] if airlock_bin else ROOT / "build"
    if not (build / "meson-info").is_dir():
        pytest.skip(f"no meson build directory at {build} to ask what it installs")
    r = subprocess.run(["meson", "introspect", "--installed", str(build)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    installed = json.loads(r.stdout)
    ours = {Path(dest).name: Path(dest) for src, dest in installed.items()
            if Path(src).parent == CLIENT_SRC / "airlock"}
    assert {"__init__.py", "sandbox.py", "_http.py", "py.typed"} <= set(ours), installed
    # and where the system Python looks: no PYTHONPATH needed after `meson install`
    site = str(ours["__init__.py"].parents[1])
    r = subprocess.run([PY, "-c", "import sys; print(sys.argv[1] in sys.path)", site],
                       capture_output=True, text=True, env=clean_env())
    assert r.stdout.strip() == "True", f"{site} is not on the sys.path of {PY}"


# ------------------------------------------------------------------------------------------
# Sandbox and Execution
# ------------------------------------------------------------------------------------------


def test_run_code_keeps_state_and_fills_the_execution(sandboxes):
    sb = sandboxes.new()
    assert sb.id.startswith("s-") and sb.profile == "default"
    ex = sb.run_code("x = 41\nprint('out')\nimport sys; print('err', file=sys.stderr)")
    assert (ex.status, ex.ok, ex.stdout, ex.stderr, ex.result) == ("ok", True, "out\n",
                                                                    "err\n", None)
    assert ex.error is None and ex.exit_code == 0 and ex.state == "preserved"
    assert ex.execution_count == 1 and ex.usage["wall_ms"] > 0
    ex = sb.run_code("x + 1")
    assert ex.result == "42" and ex.execution_count == 2 and ex.raw["result"] == "42"
    ex = sb.run_code("cd /tmp && export A=1; echo $PWD $A", language="bash")
    assert ex.stdout == "/tmp 1\n"
    assert sb.run_code("echo $PWD", language="bash").stdout == "/tmp\n"
    assert sb.run_code("import time; time.sleep(5)", timeout=0.5).status == "timeout"
    info = sb.info()
    assert info["id"] == sb.id and info["state"] == "idle", info
    # every call above went over one kept-alive connection, back in the pool now
    assert len(sb._t._idle) == 1


def test_error_and_raise_for_error(sandboxes):
    sb = sandboxes.new()
    ex = sb.run_code("def f():\n    return 1 / 0\nf()")
    assert ex.status == "error" and ex.exit_code == 1
    assert (ex.error.name, ex.error.value) == ("ZeroDivisionError", "division by zero")
    assert "return 1 / 0" in ex.error.traceback
    with pytest.raises(airlock.ExecutionError) as e:
        ex.raise_for_error()
    assert e.value.execution is ex and e.value.name == "ZeroDivisionError"
    assert "division by zero" in str(e.value) and isinstance(e.value, airlock.AirlockError)
    assert sb.run_code("1").raise_for_error().result == "1"
    assert "ZeroDivisionError" in ex.for_model() and "status: error" in ex.for_model()


def test_streaming_callbacks_are_called_in_order(sandboxes):
    sb = sandboxes.new()
    events = []
    code = ("import sys, time\n"
            "print('one', flush=True); time.sleep(0.3)\n"
            "print('two', file=sys.stderr, flush=True); time.sleep(0.3)\n"
            "print('three', flush=True)\n"
            "import matplotlib.pyplot as plt\nplt.plot([1, 2]);\n")
    ex = sb.run_code(code,
                     on_stdout=lambda t: events.append(("stdout", t, time.monotonic())),
                     on_stderr=lambda t: events.append(("stderr", t, time.monotonic())),
                     on_output=lambda o: events.append(("output", o, time.monotonic())))
    assert ex.status == "ok", ex.raw
    # text may come in several chunks (print() writes "one", then "\n"): join neighbours
    kinds = []
    for k, v, _ in events:
        if kinds and k == kinds[-1][0] and isinstance(v, str):
            kinds[-1] = (k, kinds[-1][1] + v)
        else:
            kinds.append((k, v if isinstance(v, str) else v.png[:8]))
    assert kinds == [("stdout", "one\n"), ("stderr", "two\n"), ("stdout", "three\n"),
                     ("output", PNG_MAGIC)], kinds
    # streamed: "one" arrived while the cell still ran, well before the end
    assert events[-1][2] - events[0][2] > 0.5, events
    assert ex.stdout == "one\nthree\n" and ex.stderr == "two\n" and len(ex.outputs) == 1
    # the connection is reused after a stream
    assert sb.run_code("2 + 2", on_stdout=lambda t: None).result == "4"

    # a callback that raises closes the stream: the exception reaches the caller, the daemon
    # interrupts the cell, and the session lives on
    def stop_here(text):
        raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough"):
        sb.run_code("import time\nprint('x', flush=True)\ntime.sleep(60)\nlate = 1",
                    on_stdout=stop_here)
    deadline = time.monotonic() + 20
    while sb.info()["state"] != "idle":
        assert time.monotonic() < deadline, "the cell was not interrupted"
        time.sleep(0.05)
    assert sb.run_code("'late' in dir()").result == "False"


def test_a_matplotlib_figure_arrives_as_png_bytes(sandboxes):
    sb = sandboxes.new(profile="visualization")
    ex = sb.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t');")
    assert ex.status == "ok", ex.raw
    (out,) = ex.outputs
    assert isinstance(out.png, bytes) and out.png.startswith(PNG_MAGIC) and len(out.png) > 1000
    assert ex.png == out.png and "image/png" in out.formats and out.main is False
    assert out.jpeg is None and out.svg is None
    ex = sb.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
    main = [o for o in ex.outputs if o.main]
    assert main and "<table" in main[0].html and "a" in main[0].text, ex.raw


def test_files_write_read_list_remove(sandboxes):
    sb = sandboxes.new()
    assert sb.files.write("data/in.bin", b"\x00\x01\xff") == {"path": "data/in.bin", "size": 3}
    sb.files.write("/work/notes.txt", "héllo")
    assert sb.files.read("data/in.bin") == b"\x00\x01\xff"
    assert sb.files.read_text("notes.txt") == "héllo"
    ex = sb.run_code("open('data/out.txt', 'w').write(open('notes.txt').read().upper())")
    assert [(f.path, f.change) for f in ex.files] == [("data/out.txt", "created")], ex.raw
    assert ex.files[0].content is None
    sb.files.write("odd name %?.txt", b"x")
    top = {e.name: e for e in sb.files.list()}
    assert top["data"].type == "directory" and top["notes.txt"].size == 6
    assert "odd name %?.txt" in top and sb.files.read("odd name %?.txt") == b"x"
    assert sorted(e.path for e in sb.files.list("data")) == ["data/in.bin", "data/out.txt"]
    assert sb.files.read_text("data/out.txt") == "HÉLLO"
    assert sb.files.remove("data")["deleted"] is True
    assert "data" not in {e.name for e in sb.files.list()}
    with pytest.raises(airlock.NotFoundError):
        sb.files.read("data/in.bin")
    with pytest.raises(airlock.BadRequestError) as e:
        sb.files.read("a/../b")
    assert e.value.field == "path" and e.value.status == 400


def test_interrupt(sandboxes):
    sb = sandboxes.new()
    assert sb.interrupt() is False
    box = {}
    code = ("import time\nmarker = 'set'\nopen('started', 'w').close()\n"
            "for i in range(600): time.sleep(0.1)")
    t = threading.Thread(target=lambda: box.update(ex=sb.run_code(code)), daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while "started" not in {e.name for e in sb.files.list()}:    # file calls work meanwhile
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.05)
    assert sb.info()["state"] == "busy"
    # the running cell holds one connection; interrupt() takes another
    with pytest.raises(airlock.ConflictError) as e:
        sb.run_code("1")
    assert e.value.status == 409 and sb.id in e.value.message
    assert sb.interrupt() is True
    t.join(30)
    ex = box["ex"]
    assert ex.error.name == "KeyboardInterrupt" and ex.state == "preserved", ex.raw
    assert sb.run_code("marker").result == "'set'"     # the session and its variables live


def test_fork_stop_resume(sandboxes):
    sb = sandboxes.new()
    sb.run_code("x = 'parent'")
    sb.files.write("f.txt", "parent")
    kids = sandboxes.track(sb.fork(2))
    assert len(kids) == 2 and len({k.id for k in kids} | {sb.id}) == 3
    kids[0].run_code("x = 'kid'")
    assert [k.run_code("x").result for k in kids] == ["'kid'", "'parent'"]
    assert kids[1].files.read_text("f.txt") == "parent"
    assert sb.run_code("x").result == "'parent'"
    info = sb.stop()
    assert info["state"] == "stopped" and sb.info()["state"] == "stopped"
    info = sb.resume()
    assert info["resumed"] is True and info["state"] == "idle", info
    assert sb.run_code("x").result == "'parent'"
    sb.stop()
    assert sb.run_code("x + '!'").result == "'parent!'"    # a call resumes transparently


def test_context_manager_deletes_or_stops(client_env):
    with airlock.Sandbox() as sb:
        sb.run_code("y = 1")
    with pytest.raises(airlock.NotFoundError) as e:
        airlock.Sandbox.connect(sb.id)
    assert e.value.body["id"] == sb.id and "deleted" in e.value.message

    with airlock.Sandbox(persistent=True) as sb:
        sb.run_code("y = 2")
    again = airlock.Sandbox.connect(sb.id)
    try:
        assert again.info()["state"] == "stopped"
        assert sb.id in {s["id"] for s in airlock.Sandbox.list(state="stopped")}
        assert sb.id not in {s["id"] for s in airlock.Sandbox.list(state="live")}
        assert again.run_code("y").result == "2"
        assert sb.id in {s["id"] for s in airlock.Sandbox.list(state="live")}
        # connect() is persistent by default: leaving the block stops, never deletes
        with again:
            pass
        assert again.info()["state"] == "stopped"
    finally:
        again.delete()


def test_oneshot_run(client_env):
    ex = airlock.run("print(1)\n2 + 2")
    assert (ex.status, ex.stdout, ex.result, ex.state) == ("ok", "1\n", "4", None)
    seen = []
    ex = airlock.run("echo hi; exit 3", language="bash", on_stdout=seen.append)
    assert seen == ["hi\n"] and ex.exit_code == 3 and ex.status == "error"
    ex = airlock.run("import time; time.sleep(3)", timeout=0.5, profile="default")
    assert ex.status == "timeout" and ex.timed_out


def test_async_sandbox(client_env):
    async def main():
        async with await airlock.AsyncSandbox.create() as sb:
            assert (await sb.run_code("z = 5; z * 2")).result == "10"
            await sb.files.write("a.txt", "A")
            assert await sb.files.read_text("a.txt") == "A"
            assert [e.name for e in await sb.files.list()] == ["a.txt"]
            (kid,) = await sb.fork(1)
            assert (await kid.run_code("z")).result == "5"
            await kid.delete()
            assert (await sb.info())["id"] == sb.id
            assert (await airlock.arun("3 * 3")).result == "9"
            return sb.id

    sid = asyncio.run(main())
    with pytest.raises(airlock.NotFoundError):
        airlock.Sandbox.connect(sid)


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------


def test_errors_map_to_exception_classes(daemon, client_env):
    with pytest.raises(airlock.BadRequestError) as e:
        airlock.Sandbox(profile="no-such-profile")
    assert e.value.status == 400 and e.value.field == "profile"
    assert "no-such-profile" in e.value.message and e.value.body["field"] == "profile"

    with pytest.raises(airlock.AuthError) as e:
        airlock.Sandbox(token="wrong")
    assert e.value.status == 401 and "token" in e.value.message

    with pytest.raises(airlock.NotFoundError) as e:
        airlock.Sandbox.connect("s-" + "0" * 24)
    assert e.value.status == 404

    with pytest.raises(airlock.BadRequestError) as e:
        airlock.Sandbox.list(state="sleepy")
    assert e.value.field == "state"

    with airlock.Sandbox() as sb:
        with pytest.raises(airlock.BadRequestError) as e:
            sb.fork(33)
        assert e.value.field == "n"
        with pytest.raises(airlock.BadRequestError) as e:
            sb.run_code("1", language="cobol")
        assert e.value.field == "language"

    port = free_port()
    with pytest.raises(airlock.ConnectError) as e:
        airlock.Sandbox(url=f"http://127.0.0.1:{port}")
    assert isinstance(e.value, ConnectionError) and isinstance(e.value, airlock.AirlockError)
    assert f"127.0.0.1:{port}" in str(e.value) and "airlock serve" in str(e.value)

    with pytest.raises(ValueError):
        airlock.Sandbox(url="ftp://127.0.0.1:1")


@pytest.fixture
def unix_daemon():
    """A second daemon on a unix socket, allowing one live session."""
    if os.geteuid() != 0:
        pytest.skip("airlock's namespaces isolation needs root")
    workdir = Path(tempfile.mkdtemp(prefix="airlock-pyclient-unix-"))
    sockdir = workdir / "sock"
    sockdir.mkdir(mode=0o700)
    d = Daemon(workdir=workdir, listen=f"unix:{sockdir}/a.sock",
               args=["--pool-size", "0", "--max-sessions", "1"])
    try:
        d.start(wait_zygote=None)
        yield d
    except DaemonStartError as e:
        pytest.fail(f"cannot start the daemon: {e}", pytrace=False)
    finally:
        _, problems = d.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        assert not problems, problems


def test_unix_socket_url_and_the_session_limit(unix_daemon):
    url = f"unix:{unix_daemon.unix_path}"
    with airlock.Sandbox(url=url, token=unix_daemon.token) as sb:
        assert sb.run_code("6 * 7").result == "42"
        sb.files.write("x", b"1")
        assert sb.files.read("x") == b"1"
        with pytest.raises(airlock.LimitError) as e:
            airlock.Sandbox(url=url, token=unix_daemon.token)
        assert e.value.status == 503 and "limit" in e.value.message
    assert airlock.Sandbox.list(url=url, token=unix_daemon.token) == []
    with pytest.raises(ValueError):
        airlock.Sandbox(url="unix:relative.sock")


# ------------------------------------------------------------------------------------------
# Finding the token as the CLI does
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("euid, env, dirs", [
    (0, {"XDG_STATE_HOME": "/x", "HOME": "/h"}, ["/var/lib/airlock"]),
    (1000, {"XDG_STATE_HOME": "/x", "HOME": "/h"}, ["/x/airlock", "/var/lib/airlock"]),
    (1000, {"XDG_STATE_HOME": "rel", "HOME": "/h"},
     ["/h/.local/state/airlock", "/var/lib/airlock"]),
    (1000, {"HOME": "/h"}, ["/h/.local/state/airlock", "/var/lib/airlock"]),
    (1000, {}, ["/var/lib/airlock"]),
])
def test_state_dirs_are_the_clis(euid, env, dirs):
    assert _http.state_dirs(euid, env) == dirs


def test_find_token(tmp, monkeypatch):
    monkeypatch.setattr(_http, "SYSTEM_STATE_DIR", str(tmp / "system"))
    (tmp / "airlock").mkdir()
    (tmp / "airlock" / "token").write_text("abc123\n")
    env = {"XDG_STATE_HOME": str(tmp)}
    assert _http.find_token(1000, env) == ("abc123", str(tmp / "airlock" / "token"))
    assert _http.find_token(1000, {**env, "AIRLOCK_TOKEN": "fromenv"})[0] == "fromenv"
    (tmp / "airlock" / "token").write_text("two words\n")
    token, why = _http.find_token(1000, env)
    assert token is None and "malformed" in why
    token, why = _http.find_token(1000, {"XDG_STATE_HOME": str(tmp / "none")})
    assert token is None and "AIRLOCK_TOKEN" in why and "airlock serve" in why


def test_token_found_in_the_users_state_dir(daemon, tmp):
    """A user who is not root, with the daemon's token in ~/.local/state/airlock/token, needs
    neither token= nor AIRLOCK_TOKEN (run as nobody in a subprocess)."""
    nobody = pwd.getpwnam("nobody")
    home = tmp / "home"
    state = home / ".local" / "state" / "airlock"
    state.mkdir(parents=True)
    (state / "token").write_text(daemon.token + "\n")
    (state / "token").chmod(0o600)
    pkg = tmp / "pkg"
    shutil.copytree(CLIENT_SRC / "airlock", pkg / "airlock",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for p in [tmp, *tmp.rglob("*")]:
        os.chown(p, nobody.pw_uid, nobody.pw_gid)
    code = ("import airlock\n"
            "with airlock.Sandbox() as sb: print(sb.run_code('6 * 7').result)\n")
    env = clean_env(HOME=str(home), PYTHONPATH=str(pkg), AIRLOCK_URL=daemon.url)
    env.pop("XDG_STATE_HOME", None)

    def as_nobody():
        os.setgid(nobody.pw_gid)
        os.setgroups([])
        os.setuid(nobody.pw_uid)

    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=tmp, env=env, preexec_fn=as_nobody)
    assert r.returncode == 0 and r.stdout == "42\n", r.stderr
    # without the file: a 401 that says where the token was looked for
    (state / "token").unlink()
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=tmp, env=env, preexec_fn=as_nobody)
    assert r.returncode != 0 and "AuthError" in r.stderr, r.stderr
    # (this host may have a root daemon's /var/lib/airlock/token, which nobody cannot read)
    assert "AIRLOCK_TOKEN" in r.stderr, r.stderr
    assert str(state / "token") in r.stderr or "/var/lib/airlock/token" in r.stderr, r.stderr


# ------------------------------------------------------------------------------------------
# The execute and session features of the shared API contract (engineer D's server side)
# ------------------------------------------------------------------------------------------


def test_stdin_env_and_cwd_per_call(sandboxes):
    sb = sandboxes.new()
    ex = sb.run_code("name = input(); print('hi', name)", stdin="ada\n")
    assert ex.status == "ok" and ex.stdout == "hi ada\n", ex.raw
    assert sb.run_code("read a; echo got $a", language="bash", stdin="x\n").stdout == "got x\n"
    ex = sb.run_code("import os; os.environ.get('COLOR')", env={"COLOR": "red"})
    assert ex.result == "'red'", ex.raw
    assert sb.run_code("import os; os.environ.get('COLOR')").result is None
    sb.files.write("sub/a.txt", "A")
    ex = sb.run_code("import os; os.getcwd(), open('a.txt').read()", cwd="sub")
    assert ex.result == "('/work/sub', 'A')", ex.raw
    assert sb.run_code("import os; os.getcwd()").result == "'/work'"
    with pytest.raises(airlock.BadRequestError) as e:
        sb.run_code("1", cwd="no/such/dir")
    assert e.value.field == "cwd"


def test_metadata_list_filter_and_update(sandboxes):
    tag = f"t{os.getpid()}{time.monotonic_ns()}"
    a = sandboxes.new(metadata={"team": tag, "env": "dev"})
    b = sandboxes.new(metadata={"team": tag, "env": "prod"}, lifetime=600, stop_after=120)
    assert a.info()["metadata"] == {"team": tag, "env": "dev"}
    info = b.info()
    assert info["stops_at"] and info["stop_after_s"] == 120, info
    assert {s["id"] for s in airlock.Sandbox.list(metadata={"team": tag})} == {a.id, b.id}
    assert [s["id"] for s in airlock.Sandbox.list(metadata={"team": tag, "env": "prod"})] \
        == [b.id]
    info = a.update(metadata={"env": None, "owner": "me"}, lifetime=60, stop_after=30,
                    timeout=0.5)
    assert info["metadata"] == {"team": tag, "owner": "me"} and info["stops_at"], info
    assert info["stop_after_s"] == 30
    assert a.run_code("import time; time.sleep(3)").status == "timeout"
    assert a.update(lifetime=None)["stops_at"] is None
    a.stop()
    info = a.update(metadata={"state": "kept"})       # no resume for a PATCH
    assert info["state"] == "stopped" and info["metadata"]["state"] == "kept", info
    (kid,) = sandboxes.track(b.fork(1))
    assert kid.info()["metadata"] == {"team": tag, "env": "prod"}
    with pytest.raises(airlock.BadRequestError) as e:
        a.update(metadata={"bad key!": "v"})
    assert (e.value.field or "").startswith("metadata"), e.value.body
    with pytest.raises(ValueError):
        a.update()


def test_oneshot_run_with_files(client_env):
    csv = "d,v\n2024-01-01,1\n2024-01-02,3\n"
    ex = airlock.run("import csv\nrows = list(csv.DictReader(open('in/data.csv')))\n"
                     "open('total.txt', 'w').write(str(sum(int(r['v']) for r in rows)))\n"
                     "open('blob.bin', 'wb').write(bytes(range(256)))",
                     files={"in/data.csv": csv, "raw.bin": b"\xff"})
    assert ex.status == "ok", ex.raw
    assert ex.file("total.txt") == b"4" and ex.file("blob.bin") == bytes(range(256))
    changed = {f.path: f for f in ex.files}
    assert changed["total.txt"].change == "created" and changed["total.txt"].size == 1
    raw = {f["path"]: f for f in ex.raw["files"]}       # content is base64 on the wire
    assert base64.b64decode(raw["blob.bin"]["content"]) == bytes(range(256))
    ex = airlock.run("print(input())", stdin="fed")
    assert ex.stdout == "fed\n", ex.raw
    # The one-shot takes the call's env and cwd too (the API's execute fields).
    ex = airlock.run("import os\nprint(os.getcwd(), os.environ['GREETING'])", cwd="sub",
                     env={"GREETING": "hi"}, files={"sub/x": b""})
    assert ex.stdout == "/work/sub hi\n", ex.raw
    with pytest.raises(airlock.BadRequestError) as e:
        airlock.run("1", cwd="missing")
    assert e.value.field == "cwd", e.value


# ------------------------------------------------------------------------------------------
# examples/agent-loop.py
# ------------------------------------------------------------------------------------------


def test_the_agent_loop_example_runs_end_to_end(daemon, tmp):
    out = tmp / "plot.png"
    env = clean_env(AIRLOCK_URL=daemon.url, AIRLOCK_TOKEN=daemon.token)
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        env.pop(k, None)        # the scripted fake model, never a real endpoint
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "agent-loop.py"), str(out)],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp)
    assert r.returncode == 0, r.stdout + r.stderr
    assert out.read_bytes().startswith(PNG_MAGIC) and out.stat().st_size > 1000
    assert "run_python" in r.stdout and "plot.png" in r.stdout, r.stdout
