"""/home/user as the home of sandboxes made through /e2b/api (docs/E2B.md), over raw HTTP and the
native API: a fork of one keeps it, a native session does not have it, and in the process
isolation mode (no mount namespace) it names the session's host directory, as /work does. The
SDK's view (getcwd, pwd, HOME, files, pause and connect) is tests/mcp/e2b-data.test.mjs."""
import os

import pytest

from airlock_daemon import daemon_fixture, start_daemon_or_fail

daemon = daemon_fixture(pytest)

CHECK = "import os\nprint(os.getcwd(), os.environ['HOME'], os.environ['PWD'])"


def e2b_sandbox(d):
    r = d.client().post(d.url + "/e2b/api/v2/sandboxes", json={"templateID": "base"},
                        headers={"X-API-KEY": d.token}, timeout=60)
    assert r.status_code == 201, r.text
    return "s-" + r.json()["sandboxID"]


def test_a_fork_of_an_e2b_sandbox_keeps_its_home_a_native_session_has_none(daemon):
    sid = e2b_sandbox(daemon)
    native = daemon.create_session()
    try:
        assert daemon.execute(sid, CHECK)["stdout"] == "/home/user /home/user /home/user\n"
        r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 1}, timeout=120)
        assert r.status_code == 201, daemon.why(r)
        child = r.json()["sessions"][0]["id"]
        try:
            assert daemon.execute(child, CHECK)["stdout"] == "/home/user /home/user /home/user\n"
        finally:
            daemon.delete_session(child)
        out = daemon.execute(native, "import os\nprint(os.getcwd(), os.environ['HOME'])")
        assert out["stdout"] == "/work /work\n", out
        # Both names are one directory in every sandbox, E2B's or not.
        out = daemon.execute(native, "open('/home/user/x', 'w').write('1')\nopen('/work/x').read()")
        assert out["result"] == "'1'", out
    finally:
        daemon.delete_session(sid)
        daemon.delete_session(native)


def test_the_home_in_the_process_mode_is_the_sessions_host_directory():
    d = start_daemon_or_fail(pytest, args=("--pool-size", "0", "--isolation", "process"))
    try:
        sid = e2b_sandbox(d)
        out = d.execute(sid, "import os\nopen('here.txt', 'w').write('x')\n"
                             "print(os.getcwd() == os.environ['HOME'] == os.environ['PWD'])\n"
                             "os.getcwd()")
        assert out["stdout"] == "True\n", out
        host_dir = out["result"].strip("'")
        assert host_dir != "/home/user" and os.path.isfile(os.path.join(host_dir, "here.txt"))
        r = d.get(f"/v1/sessions/{sid}/files/here.txt")
        assert r.status_code == 200 and r.content == b"x", d.why(r)
        d.execute(sid, "import os\nos.makedirs('sub')")
        out = d.execute(sid, "os.path.basename(os.getcwd())", cwd="/home/user/sub")
        assert out["result"] == "'sub'", out
        d.delete_session(sid)
    finally:
        _, problems = d.stop()
    assert not problems, problems
