"""The sandbox side of egress and pip (issue 10; docs/NETWORK.md, "Inside the sandbox"): what a
session of a profile with "network": {"mode": "allow", ...} finds inside its sandbox (the
forwarded names in /etc/hosts, Landlock letting it connect to the egress ports and nothing else,
the proxy and pip variables), and pip in sessions: without an index it fails at once saying the
profile has none, and local wheels install into the session's own site directory, which is on
sys.path at once, left out of the files a cell made, counted against the workspace and kept
through stop, resume and fork.

No traffic leaves the sandbox here: every connect() goes to the sandbox's own loopback. The
proxy itself is tested with the lab (tests/e2e/test_egress_*.py of the egress engine). One
daemon for the module, with profiles of its own from a private directory; every test deletes
its sessions, whatever happened."""
import atexit
import base64
import ctypes
import hashlib
import io
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import zipfile

import pytest

from airlock_daemon import AIRLOCK, daemon_fixture, sessions_fixture

# The daemon finds these profiles through AIRLOCK_PROFILES_DIR; removed when Python exits.
PROFILES = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-egress-sandbox-"))
atexit.register(shutil.rmtree, PROFILES, True)
RULES = ["db.internal:5432", "pypi.internal:443", "10.1.2.7:6000"]
ALLOW = {"mode": "allow", "allow": RULES}
BASE = {"languages": ["python", "bash"], "limits": {"timeout": "60s"}}
PROFILE_DOCS = {
    "eg-allow": {**BASE, "description": "egress allow (test_egress_sandbox.py)", "network": ALLOW,
                 "packages": {"index_url": "https://pypi.internal/simple",
                              "trusted_host": ["pypi.internal", "10.1.2.7:6000"]}},
    # The same from a fresh exec of the runner: the jail's fields come from sandbox_start().
    "eg-allow-cold": {**BASE, "description": "egress allow, cold start", "network": ALLOW,
                      "start": "cold"},
    "eg-none": {**BASE, "description": "no network (test_egress_sandbox.py)"},
    "eg-tiny": {**BASE, "description": "a 1 MiB workspace", "limits": {"workspace": "1MiB"}},
}
for _name, _doc in PROFILE_DOCS.items():
    (PROFILES / f"{_name}.json").write_text(json.dumps(_doc))

daemon = daemon_fixture(pytest, env={
    **{k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"},
    "AIRLOCK_PROFILES_DIR": str(PROFILES)})
sessions = sessions_fixture(pytest)

HOSTS_LINES = ["127.0.1.1\tdb.internal", "127.0.1.2\tpypi.internal"]
PROXY_ENV = {
    "HTTP_PROXY": "http://127.0.0.1:3128", "HTTPS_PROXY": "http://127.0.0.1:3128",
    "http_proxy": "http://127.0.0.1:3128", "https_proxy": "http://127.0.0.1:3128",
    "ALL_PROXY": "socks5h://127.0.0.1:1080", "all_proxy": "socks5h://127.0.0.1:1080",
    "NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
}
PIP_ENV = {"PYTHONUSERBASE": "/work/.local", "PIP_BREAK_SYSTEM_PACKAGES": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_PROGRESS_BAR": "off"}
SITE = "/work/.local/lib/python3.11/site-packages"
NO_INDEX = "has no package index (packages.index_url"


def landlock_abi():
    """The kernel's Landlock ABI (the sandboxes run on this kernel), 0 when absent."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # landlock_create_ruleset
    return max(int(abi), 0)


def ok(out):
    assert out["status"] == "ok", json.dumps(out, indent=1)[:4000]
    return out


def run(daemon, sid, code, **fields):
    return daemon.execute(sid, code, http_timeout=180, **fields)


def wheel(name, files, version="1.0"):
    """A pure-Python wheel (METADATA, WHEEL, RECORD and the given files), as bytes."""
    dist = f"{name}-{version}.dist-info"
    files = dict(files)
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    files[f"{dist}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: airlock-tests\n"
                              "Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            data = data.encode() if isinstance(data, str) else data
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
            z.writestr(path, data)
        record.append(f"{dist}/RECORD,,")
        z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return buf.getvalue()


def upload(daemon, sid, path, data):
    r = daemon.put(f"/v1/sessions/{sid}/files/{path}", data=data)
    assert r.status_code == 200, daemon.why(r)


CONNECT = r'''
import errno, json, socket
out = {}
for port in PORTS:
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        out[port] = "OK"
    except OSError as e:
        out[port] = errno.errorcode.get(e.errno, str(e.errno))
    s.close()
for port in (0, 5432, 8080):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        out[f"bind {port}"] = "OK"
    except OSError as e:
        out[f"bind {port}"] = errno.errorcode.get(e.errno, str(e.errno))
    s.close()
print(json.dumps(out))
'''

ALLOWED_PORTS = [5432, 443, 6000]  # forwarders listen on 127.0.1.N and 10.1.2.7, not 127.0.0.1
DENIED_PORTS = [5433, 22, 8080, 3306]


@pytest.mark.parametrize("profile", ["eg-allow", "eg-allow-cold"])
def test_hosts_file_has_the_forwarded_names(daemon, sessions, profile):
    sid = sessions.new(profile=profile)
    hosts = ok(run(daemon, sid, "print(open('/etc/hosts').read(), end='')"))["stdout"]
    lines = hosts.splitlines()
    assert lines[:2] == ["127.0.0.1\tlocalhost sandbox",
                         "::1\tlocalhost ip6-localhost ip6-loopback"], hosts
    assert lines[2:] == HOSTS_LINES, hosts
    # The C library finds them through the sandbox's nsswitch (files only).
    res = ok(run(daemon, sid, "import socket; socket.gethostbyname('db.internal')"))
    assert res["result"] == "'127.0.1.1'", res


def test_hosts_file_of_a_profile_without_network_is_the_plain_one(daemon, sessions):
    sid = sessions.new(profile="eg-none")
    hosts = ok(run(daemon, sid, "print(open('/etc/hosts').read(), end='')"))["stdout"]
    assert "internal" not in hosts and len(hosts.splitlines()) == 2, hosts


def test_one_shot_cli_sandbox_has_the_forwarded_names():
    """`airlock run` of the same profile file: a sandbox of its own exec (sandbox_start)."""
    proc = subprocess.run([AIRLOCK, "run", "--json", "-p", str(PROFILES / "eg-allow.json"), "-"],
                          input=b"print(open('/etc/hosts').read(), end='')",
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(proc.stdout)
    assert out["stdout"].splitlines()[2:] == HOSTS_LINES, out


@pytest.mark.parametrize("profile", ["eg-allow", "eg-allow-cold"])
def test_landlock_lets_code_connect_to_the_egress_ports_only(daemon, sessions, profile):
    abi = landlock_abi()
    sid = sessions.new(profile=profile)
    got = json.loads(ok(run(daemon, sid, f"PORTS = {ALLOWED_PORTS + DENIED_PORTS}\n" + CONNECT))
                     ["stdout"])
    # Nothing listens on 127.0.0.1 at those ports in the sandbox's own namespace: the kernel
    # refuses (or the loopback is not up), Landlock does not.
    for port in ALLOWED_PORTS:
        assert got[str(port)] in ("ECONNREFUSED", "ENETUNREACH"), (port, got)
    for port in DENIED_PORTS:
        want = {"EACCES", "EPERM"} if abi >= 4 else {"ECONNREFUSED", "ENETUNREACH"}
        assert got[str(port)] in want, (port, abi, got)
    for port in (0, 5432, 8080):
        want = {"EACCES", "EPERM"} if abi >= 4 else {"OK", "EADDRNOTAVAIL"}
        assert got[f"bind {port}"] in want, (port, abi, got)


def test_landlock_denies_every_port_without_network(daemon, sessions):
    if landlock_abi() < 4:
        pytest.skip("Landlock TCP rules need ABI 4 (Linux 6.7); this kernel has "
                    f"ABI {landlock_abi()}: the network namespace alone isolates")
    sid = sessions.new(profile="eg-none")
    got = json.loads(ok(run(daemon, sid, "PORTS = [3128, 1080, 5432, 443, 6000]\n" + CONNECT))
                     ["stdout"])
    for key, value in got.items():
        assert value in ("EACCES", "EPERM"), (key, got)


ENV = "import json, os; print(json.dumps(dict(os.environ)))"


def test_proxy_and_pip_variables_of_an_allow_profile(daemon, sessions):
    sid = sessions.new(profile="eg-allow")
    env = json.loads(ok(run(daemon, sid, ENV))["stdout"])
    for name, value in {**PROXY_ENV, **PIP_ENV}.items():
        assert env.get(name) == value, (name, env.get(name))
    assert env["PIP_INDEX_URL"] == "https://pypi.internal/simple", env
    assert env["PIP_TRUSTED_HOST"] == "pypi.internal 10.1.2.7:6000", env
    assert "PIP_NO_INDEX" not in env and "AIRLOCK_PIP_NO_INDEX" not in env, env
    assert env["PATH"].split(":")[:2] == ["/opt/airlock/bin", "/work/.local/bin"], env["PATH"]
    assert "PYTHONPATH" not in env, "no layer, no PYTHONPATH"
    # bash sees the same.
    res = ok(run(daemon, sid, 'echo "$HTTPS_PROXY $ALL_PROXY $PIP_INDEX_URL"', language="bash"))
    assert res["stdout"] == ("http://127.0.0.1:3128 socks5h://127.0.0.1:1080 "
                             "https://pypi.internal/simple\n"), res


def test_no_proxy_variables_without_network(daemon, sessions):
    sid = sessions.new(profile="eg-none")
    env = json.loads(ok(run(daemon, sid, ENV))["stdout"])
    for name in PROXY_ENV:
        assert name not in env, (name, env[name])
    for name, value in PIP_ENV.items():
        assert env.get(name) == value, (name, env.get(name))
    assert env["PIP_NO_INDEX"] == "1" and "PIP_INDEX_URL" not in env, env
    assert "profile 'eg-none' " + NO_INDEX in env["AIRLOCK_PIP_NO_INDEX"], env


def test_pip_without_an_index_fails_at_once_naming_the_profile(daemon, sessions):
    sid = sessions.new(profile="eg-none")
    script = ("for cmd in pip pip3 'python3 -m pip'; do $cmd install airlock-no-such-dist; "
              "echo \"rc=$?\"; done")
    res = run(daemon, sid, script, language="bash")
    assert [l for l in res["stdout"].splitlines() if l.startswith("rc=")] == ["rc=1"] * 3, res
    err = res["stderr"]
    # pip looked at no index (PIP_NO_INDEX): no connection was tried, none retried.
    assert err.count("from versions: none") == 3, err
    assert "Retrying" not in err and "NewConnectionError" not in err, err
    # The shims say why, naming the profile; `python3 -m pip` bypasses them.
    assert err.count("airlock: profile 'eg-none' " + NO_INDEX) == 2, err

    res = run(daemon, sid, "x = 1\n%pip install airlock-no-such-dist\nx = 2")
    assert res["status"] == "error", res
    assert res["error"]["name"] == "PipError", res
    assert "profile 'eg-none' " + NO_INDEX in res["error"]["value"], res
    assert "%pip install airlock-no-such-dist" in res["error"]["traceback"], res
    assert "from versions: none" in res["stderr"], res
    assert ok(run(daemon, sid, "x"))["result"] == "1", "the cell stopped at the failed %pip"


DEMO = wheel("egdemo", {"egdemo/__init__.py": "VALUE = 41\n\nclass Thing:\n"
                                              "    def __init__(self, n):\n        self.n = n\n"})
DEMO2 = wheel("egdemo2", {"egdemo2/__init__.py": "VALUE = 'two'\n"})


def produced(res):
    return [f["path"] for f in res["files"]]


def test_local_wheel_installs_into_the_session_site_dir(daemon, sessions):
    sid = sessions.new(profile="eg-none")
    upload(daemon, sid, "egdemo-1.0-py3-none-any.whl", DEMO)
    res = ok(run(daemon, sid, "%pip install /work/egdemo-1.0-py3-none-any.whl\n"
                              "import egdemo\nthing = egdemo.Thing(egdemo.VALUE + 1)\n"
                              "(egdemo.__file__, thing.n)"))
    assert res["result"] == f"('{SITE}/egdemo/__init__.py', 42)", res
    assert "Successfully installed egdemo-1.0" in res["stdout"], res
    # The install is not among the files the cell made.
    assert produced(res) == [], res["files"]

    # pip from a bash cell: the next Python cell imports what it installed.
    upload(daemon, sid, "egdemo2-1.0-py3-none-any.whl", DEMO2)
    res = ok(run(daemon, sid, "pip install /work/egdemo2-1.0-py3-none-any.whl",
                 language="bash"))
    assert "Successfully installed egdemo2-1.0" in res["stdout"], res
    assert produced(res) == [], res["files"]
    assert ok(run(daemon, sid, "import egdemo2\negdemo2.VALUE"))["result"] == "'two'"
    # python3 started by the code sees them too (the user site of $PYTHONUSERBASE).
    res = ok(run(daemon, sid, "python3 -c 'import egdemo, egdemo2; print(egdemo.VALUE)'",
                 language="bash"))
    assert res["stdout"] == "41\n", res
    # The files API still shows the directory, like any other in /work.
    r = daemon.get(f"/v1/sessions/{sid}/files?dir=.local/lib/python3.11/site-packages")
    assert r.status_code == 200, daemon.why(r)
    assert {"egdemo", "egdemo2"} <= {e["name"] for e in r.json()["entries"]}, r.json()

    # Stopped and resumed: the packages come back with /work, and so does a value whose class
    # lives in one of them.
    r = daemon.post(f"/v1/sessions/{sid}/stop", timeout=180)
    assert r.status_code == 200, daemon.why(r)
    assert r.json()["lost_names"] == [], r.json()
    res = ok(run(daemon, sid, "(type(thing).__module__, thing.n, egdemo2.VALUE)"))
    assert res["result"] == "('egdemo', 42, 'two')", res
    assert res.get("lost_names", []) == [], res

    # Forked: every child has them, before it loads the variables.
    r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 2}, timeout=300)
    assert r.status_code == 201, daemon.why(r)
    children = [c["id"] for c in r.json()["sessions"]]
    sessions.ids.extend(children)
    for child in children:
        res = ok(run(daemon, child, "(thing.n, egdemo.VALUE, egdemo2.VALUE)"))
        assert res["result"] == "(42, 41, 'two')", res
        res = ok(run(daemon, child, "import importlib.metadata as m\nm.version('egdemo')"))
        assert res["result"] == "'1.0'", res


STATVFS = "import os; s = os.statvfs('/work'); s.f_bfree * s.f_frsize"

BUILD_IN_TMP = r'''
import base64, hashlib, os, zipfile
def build(path, name, payload):
    dist = f"{name}-1.0.dist-info"
    files = {f"{name}/__init__.py": b"", f"{name}/blob.bin": payload,
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    rec = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
           for p, d in files.items()] + [f"{dist}/RECORD,,"]
    with zipfile.ZipFile(path, "w") as z:
        for p, d in files.items():
            z.writestr(p, d)
        z.writestr(f"{dist}/RECORD", "\n".join(rec) + "\n")
build(f"/tmp/{NAME}-1.0-py3-none-any.whl", NAME, os.urandom(SIZE))
'''


def test_installs_count_against_the_workspace(daemon, sessions):
    sid = sessions.new(profile="eg-none")
    before = int(ok(run(daemon, sid, STATVFS))["result"])
    ok(run(daemon, sid, "NAME, SIZE = 'egquarter', 256 << 10\n" + BUILD_IN_TMP))
    ok(run(daemon, sid, "%pip install /tmp/egquarter-1.0-py3-none-any.whl"))
    after = int(ok(run(daemon, sid, STATVFS))["result"])
    assert before - after >= 256 << 10, (before, after)

    # A workspace of 1 MiB with 700 KiB of files in it has no room for a package of 400 KiB
    # more, wherever the wheel came from.
    sid = sessions.new(profile="eg-tiny")
    ok(run(daemon, sid, "NAME, SIZE = 'egbig', 400 << 10\n" + BUILD_IN_TMP +
           "open('/work/filler', 'wb').write(os.urandom(700 << 10))\n"))
    res = run(daemon, sid, "%pip install /tmp/egbig-1.0-py3-none-any.whl")
    assert res["status"] == "error" and res["error"]["name"] == "PipError", res
    assert "No space left on device" in res["stderr"], res["stderr"][-2000:]
