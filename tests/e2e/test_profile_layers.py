"""Profile layers (issue 10, item 3; docs/PROFILES.md, "Your own libraries: layers"):
`airlock profile list/show/build/rm`, a layer built by Debian's pip from a directory of wheels
this test makes itself with zipfile (no network, no index), and a running daemon giving each new
session the profile's current layer at /opt/airlock/layer while live sessions keep theirs.

Everything happens in temporary directories: the profiles (AIRLOCK_PROFILES_DIR), the wheels
and the state directory of the layers (--state-dir)."""
import ast
import atexit
import base64
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time
import zipfile

import pytest

from airlock_daemon import AIRLOCK, daemon_fixture, sessions_fixture

ID_RE = re.compile(r"layer (\d{8}-\d{6}-[0-9a-f]{6}) of profile '([a-z0-9_-]+)': (\d+) packages")


def make_wheel(directory, name, version, requires=(), body=None):
    """A pure-Python wheel NAME-VERSION-py3-none-any.whl: the module NAME with __version__,
    and METADATA, WHEEL and RECORD as pip checks them."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": body or f"__version__ = {version!r}\n",
        f"{dist}/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in requires)),
        f"{dist}/WHEEL": ("Wheel-Version: 1.0\nGenerator: airlock-tests\nRoot-Is-Purelib: true\n"
                          "Tag: py3-none-any\n"),
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    path = pathlib.Path(directory) / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
    return path


class Lab:
    """A profiles directory, a wheels directory and a state directory, and `airlock profile`
    run against them."""

    def __init__(self, root):
        self.root = pathlib.Path(root)
        self.profiles = self.root / "profiles"
        self.wheels = self.root / "wheels"
        self.state = self.root / "state"
        for d in (self.profiles, self.wheels):
            d.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
        self.env["AIRLOCK_PROFILES_DIR"] = str(self.profiles)
        self.env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"

    def profile(self, name, **body):
        doc = {"description": f"layer test profile {name}", "languages": ["python"],
               "imports": None, "limits": {"memory": "256MiB", "timeout": "20s"}}
        doc.update(body)
        (self.profiles / f"{name}.json").write_text(json.dumps(doc))

    def run(self, *args, state=True, timeout=300):
        argv = [AIRLOCK, "profile", *args]
        if state:
            argv += ["--state-dir", str(self.state)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=self.env)

    def build(self, name):
        p = self.run("build", name)
        assert p.returncode == 0, f"build {name}: {p.returncode}\n{p.stdout}\n{p.stderr}"
        m = ID_RE.search(p.stdout)
        assert m and m.group(2) == name, p.stdout
        return m.group(1), p

    def current(self, name):
        link = self.state / "layers" / name / "current"
        return os.readlink(link) if os.path.lexists(link) else None

    def layer_dirs(self, name):
        d = self.state / "layers" / name
        return sorted(x.name for x in d.iterdir() if re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}",
                                                                  x.name)) if d.exists() else []


@pytest.fixture
def lab():
    root = tempfile.mkdtemp(prefix="airlock-e2e-layers-")
    try:
        yield Lab(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _needs_pip():
    p = subprocess.run(["/usr/bin/python3", "-I", "-m", "pip", "--version"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("Debian's pip is not installed (apt-get install python3-pip): "
                    + p.stderr.strip()[-200:])


# ------------------------------------------------------------------------------------------
# The command line, without a daemon
# ------------------------------------------------------------------------------------------

def test_build_from_wheels_show_and_list(lab):
    _needs_pip()
    make_wheel(lab.wheels, "airlockdemo", "1.0", requires=["airlockdep"])
    make_wheel(lab.wheels, "airlockdep", "0.3")
    lab.profile("lay", packages={"wheels": str(lab.wheels), "install": ["airlockdemo==1.0"]})

    layer, p = lab.build("lay")
    # pip's own output is streamed as progress, and the last line names the layer and size.
    assert "Successfully installed" in p.stderr, p.stderr
    assert p.stdout.strip().splitlines()[-1].startswith(f"layer {layer} of profile 'lay': "
                                                        "2 packages, ")
    assert lab.current("lay") == layer
    site = lab.state / "layers" / "lay" / layer / "site-packages"
    assert (site / "airlockdemo" / "__init__.py").read_text() == "__version__ = '1.0'\n"
    # Readable by a sandbox's user through the bind mount; the lock is root's alone.
    assert (site / "airlockdemo" / "__init__.py").stat().st_mode & 0o004
    assert ((lab.state / "layers" / "lay" / layer / ".lock").stat().st_mode & 0o777) == 0o600

    show = lab.run("show", "lay")
    assert show.returncode == 0, show.stderr
    doc = json.loads(show.stdout)
    assert doc["name"] == "lay" and doc["network"] == "none"
    assert doc["packages"]["install"] == ["airlockdemo==1.0"]
    assert doc["packages"]["wheels"] == str(lab.wheels)
    m = doc["layer"]
    assert m["id"] == layer and m["profile"] == "lay" and m["size"] > 0
    assert {(x["name"], x["version"]) for x in m["packages"]} == {("airlockdemo", "1.0"),
                                                                   ("airlockdep", "0.3")}
    assert all(x["size"] > 0 for x in m["packages"])
    argv = m["pip"]["argv"]
    assert argv[:4] == ["/usr/bin/python3", "-I", "-m", "pip"]
    assert "--only-binary=:all:" in argv and "--no-index" in argv
    assert argv[argv.index("--find-links") + 1] == str(lab.wheels)
    assert [x["id"] for x in doc["layers"]] == [layer] and doc["layers"][0]["current"]

    lst = lab.run("list")
    assert lst.returncode == 0, lst.stderr
    row = next(line for line in lst.stdout.splitlines() if line.startswith("lay "))
    assert layer in row and "2 pkg" in row and "python" in row and "none" in row
    default = next(line for line in lst.stdout.splitlines() if line.startswith("default "))
    assert re.search(r"\bnone\s+none\b", default), default     # network none, layer none
    rows = json.loads(lab.run("list", "--json").stdout)
    by_name = {r["name"]: r for r in rows}
    assert by_name["lay"]["layer"]["id"] == layer and by_name["lay"]["layer"]["packages"] == 2
    assert by_name["default"]["layer"] is None


def test_list_and_show_give_the_network_policy(lab):
    lab.profile("netp", network={"mode": "allow", "allow": ["pypi.internal:443",
                                                           "db.internal:5432"]},
                packages={"index_url": "https://pypi.internal/simple", "install": ["x"]})
    row = next(line for line in lab.run("list").stdout.splitlines() if line.startswith("netp "))
    assert "allow(2)" in row and "none" in row, row       # two rules; no layer yet
    doc = json.loads(lab.run("show", "netp").stdout)
    assert doc["network"]["mode"] == "allow"
    assert doc["network"]["allow"] == ["pypi.internal:443", "db.internal:5432"]
    assert doc["packages"]["index_url"] == "https://pypi.internal/simple"
    assert doc["layer"] is None and doc["layers"] == []


def test_wheels_dir_without_install_list_installs_every_wheel(lab):
    _needs_pip()
    make_wheel(lab.wheels, "airlockone", "1.0")
    make_wheel(lab.wheels, "airlocktwo", "2.0")
    lab.profile("every", packages={"wheels": str(lab.wheels)})
    layer, _ = lab.build("every")
    m = json.loads(lab.run("show", "every").stdout)["layer"]
    assert sorted(x["name"] for x in m["packages"]) == ["airlockone", "airlocktwo"]


def test_failing_build_keeps_the_old_layer_and_says_why(lab):
    _needs_pip()
    make_wheel(lab.wheels, "airlockdemo", "1.0")
    lab.profile("lay", packages={"wheels": str(lab.wheels), "install": ["airlockdemo"]})
    good, _ = lab.build("lay")

    lab.profile("lay", packages={"wheels": str(lab.wheels),
                                 "install": ["airlockdemo", "airlock-not-there==9"]})
    p = lab.run("build", "lay")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "pip exited with status 1" in p.stderr, p.stderr
    assert "airlock-not-there" in p.stderr and "No matching distribution" in p.stderr, p.stderr
    assert "check:" in p.stderr and str(lab.wheels) in p.stderr, p.stderr
    assert f"the current layer stays: " in p.stderr and good in p.stderr, p.stderr
    assert lab.current("lay") == good
    assert lab.layer_dirs("lay") == [good], "the half-built layer is removed"


def test_nothing_to_install_bad_names_and_missing_profiles(lab):
    lab.profile("empty")
    p = lab.run("build", "empty")
    assert p.returncode == 1
    assert "profile 'empty' has nothing to install" in p.stderr, p.stderr
    assert not (lab.state / "layers" / "empty").exists()

    for args in (("build", "../etc"), ("show", "Bad"), ("rm", "a/b"), ("build", "x.json")):
        p = lab.run(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert "is not a profile name" in p.stderr, p.stderr
    p = lab.run("show", "no-such-profile")
    assert p.returncode == 1 and "not found" in p.stderr, p.stderr
    p = lab.run("build", "no-such-profile")
    assert p.returncode == 1 and "not found" in p.stderr, p.stderr
    p = lab.run("rm", "no-such-profile")
    assert p.returncode == 1 and "has no layers" in p.stderr, p.stderr
    p = lab.run("frobnicate", "x")
    assert p.returncode == 2 and "unknown subcommand" in p.stderr
    p = lab.run("build")
    assert p.returncode == 2 and "needs a profile NAME" in p.stderr


def test_bad_packages_values_are_refused_naming_the_key(lab):
    lab.profile("opt", packages={"install": ["--index-url=http://evil.example/"]})
    p = lab.run("build", "opt")
    assert p.returncode == 1 and "packages.install" in p.stderr, p.stderr
    lab.profile("rel", packages={"wheels": "relative/dir"})
    p = lab.run("build", "rel")
    assert p.returncode == 1 and "packages.wheels" in p.stderr, p.stderr
    lab.profile("gone", packages={"wheels": str(lab.root / "no-such-dir")})
    p = lab.run("build", "gone")
    assert p.returncode == 1 and "no-such-dir" in p.stderr, p.stderr


def test_rm_keeps_a_layer_in_use_and_says_so(lab):
    _needs_pip()
    make_wheel(lab.wheels, "airlockdemo", "1.0")
    lab.profile("lay", packages={"wheels": str(lab.wheels), "install": ["airlockdemo"]})
    layer, _ = lab.build("lay")
    lock = lab.state / "layers" / "lay" / layer / ".lock"
    holder = hold_shared(lock)
    try:
        p = lab.run("rm", "lay")
        assert p.returncode == 0, p.stderr
        assert f"layer {layer} is no longer current" in p.stdout, p.stdout
        assert f"kept layer {layer}" in p.stdout and "live sessions" in p.stdout, p.stdout
        assert lab.current("lay") is None and lab.layer_dirs("lay") == [layer]
        lst = json.loads(lab.run("list", "--json").stdout)
        assert next(r for r in lst if r["name"] == "lay")["layer"] is None
    finally:
        end(holder)
    p = lab.run("rm", "lay")
    assert p.returncode == 0 and f"removed layer {layer}" in p.stdout, p.stdout + p.stderr
    assert not (lab.state / "layers" / "lay").exists()
    p = lab.run("rm", "lay")
    assert p.returncode == 1 and "has no layers" in p.stderr


def hold_shared(lock):
    """A process holding LOCK_SH on lock, as a daemon whose sessions use the layer does;
    returned once it holds it."""
    proc = subprocess.Popen(
        ["/usr/bin/python3", "-c",
         "import fcntl, sys, time\n"
         "f = open(sys.argv[1])\n"
         "fcntl.flock(f, fcntl.LOCK_SH)\n"
         "print('held', flush=True)\n"
         "time.sleep(600)\n", str(lock)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def end(proc):
    """Ends a process this test started, by its pid."""
    proc.kill()
    proc.wait(10)
    if proc.stdout:
        proc.stdout.close()


# ------------------------------------------------------------------------------------------
# A running daemon: new sessions get the current layer, live ones keep theirs
# ------------------------------------------------------------------------------------------

# The daemon finds its profiles in this module's own directory, made at collection time.
DAEMON_LAB = Lab(tempfile.mkdtemp(prefix="airlock-e2e-layers-daemon-"))
atexit.register(shutil.rmtree, DAEMON_LAB.root, True)

VERSION_CELL = ("import airlockdemo, sys\n"
                "(airlockdemo.__version__, airlockdemo.__file__)")
BASH_VERSION_CELL = "python3 -c 'import airlockdemo; print(airlockdemo.__version__)'"


daemon = daemon_fixture(pytest, args=("--pool-size", "1"),
                        env={**{k: v for k, v in os.environ.items()
                                if not k.startswith("AIRLOCK_")},
                             "AIRLOCK_PROFILES_DIR": str(DAEMON_LAB.profiles)})


@pytest.fixture
def dlab(daemon):
    """DAEMON_LAB, building into the daemon's own state directory."""
    DAEMON_LAB.state = daemon.state_dir
    return DAEMON_LAB


sessions = sessions_fixture(pytest)


def version_of(daemon, sid):
    r = daemon.execute(sid, VERSION_CELL)
    assert r["status"] == "ok", r
    version, path = ast.literal_eval(r["result"])
    assert path.startswith("/opt/airlock/layer/site-packages/airlockdemo/"), path
    return version


def pool_ready(daemon, profile):
    """Waits until the profile's warm pool holds a member, so that the next create could be
    handed one made before whatever comes next."""
    deadline = time.monotonic() + 120
    while True:
        p = next(x for x in daemon.get("/v1/profiles").json()["profiles"]
                 if x["name"] == profile)
        if p["pool"]["ready"] >= 1:
            return
        assert time.monotonic() < deadline, daemon.log_text()[-3000:]
        time.sleep(0.1)


def wait_unlocked(lab, profile, layer):
    """Until nobody holds the layer's lock (its last session and zygote are gone)."""
    deadline = time.monotonic() + 120
    while True:
        doc = json.loads(lab.run("show", profile).stdout)
        entry = next((x for x in doc["layers"] if x["id"] == layer), None)
        if entry is None or not entry["in_use"]:
            return
        assert time.monotonic() < deadline, f"layer {layer} is still in use: {doc['layers']}"
        time.sleep(0.2)


def test_sessions_get_the_current_layer_and_keep_theirs_across_a_rebuild(daemon, dlab, sessions):
    _needs_pip()
    lab = dlab
    wheels = lab.root / "wheels-swap"
    wheels.mkdir()
    make_wheel(wheels, "airlockdemo", "1.0")
    lab.profile("lswap", packages={"wheels": str(wheels), "install": ["airlockdemo"]},
                languages=["python", "bash"])
    first, _ = lab.build("lswap")

    old = sessions.new(profile="lswap")
    assert version_of(daemon, old) == "1.0"
    # python3 started from bash finds the layer too (PYTHONPATH).
    r = daemon.execute(old, BASH_VERSION_CELL, language="bash")
    assert r["status"] == "ok" and r["stdout"] == "1.0\n", r
    # The layer is read-only, and its lock out of the session's reach: no code in a session
    # can hold a layer forever or keep the daemon from using it.
    r = daemon.execute(old, "touch /opt/airlock/layer/site-packages/x; echo w=$?; "
                            "python3 -c 'open(\"/opt/airlock/layer/.lock\")'; echo r=$?",
                       language="bash")
    assert "w=1" in r["stdout"] and "r=1" in r["stdout"], r
    assert "Read-only file system" in r["stderr"] and "PermissionError" in r["stderr"], r
    pool_ready(daemon, "lswap")

    # Version 2, built while the daemon runs and a session uses version 1.
    (wheels / "airlockdemo-1.0-py3-none-any.whl").unlink()
    make_wheel(wheels, "airlockdemo", "2.0")
    second, p = lab.build("lswap")
    assert second != first
    assert f"old layer {first} is in use by live sessions" in p.stderr, p.stderr
    assert sorted(lab.layer_dirs("lswap")) == sorted([first, second])

    new = sessions.new(profile="lswap")
    assert version_of(daemon, new) == "2.0", "a new session gets the new layer, no restart"
    assert 'msg="layer changed: new sessions get layer ' + second in daemon.log_text()
    lswap = next(x for x in daemon.get("/v1/profiles").json()["profiles"]
                 if x["name"] == "lswap")
    assert lswap["layer"] == second, lswap
    # The session started before keeps version 1, in a new process as well, and still works.
    assert version_of(daemon, old) == "1.0"
    r = daemon.execute(old, BASH_VERSION_CELL, language="bash")
    assert r["status"] == "ok" and r["stdout"] == "1.0\n", r
    r = daemon.execute(old, "sum(range(10))")
    assert r["status"] == "ok" and r["result"] == "45", r

    # Once the old session is gone, nothing holds the old layer and a removal takes it.
    daemon.delete_session(old)
    wait_unlocked(lab, "lswap", first)
    gone = lab.run("rm", "lswap")
    assert gone.returncode == 0, gone.stderr
    assert f"removed layer {first}" in gone.stdout, gone.stdout
    # The live session of version 2 keeps its layer; new sessions get none.
    assert f"kept layer {second}" in gone.stdout, gone.stdout
    assert version_of(daemon, new) == "2.0"
    none = sessions.new(profile="lswap")
    r = daemon.execute(none, "import airlockdemo")
    assert r["status"] == "error" and r["error"]["name"] == "ModuleNotFoundError", r


def test_preload_imports_a_module_of_the_layer_in_the_zygote(daemon, dlab, sessions):
    _needs_pip()
    lab = dlab
    wheels = lab.root / "wheels-preload"
    wheels.mkdir()
    make_wheel(wheels, "airlockpre", "1.0",
               body="import os\nIMPORTED_BY = os.getpid()\n__version__ = '1.0'\n")
    lab.profile("lpre", packages={"wheels": str(wheels)}, preload=["airlockpre"])
    lab.build("lpre")
    offset = daemon.log_size()
    sid = sessions.new(profile="lpre")
    # Already imported when the session's first cell runs: the zygote did it, before the fork.
    r = daemon.execute(sid, "import sys, os\n"
                            "m = sys.modules.get('airlockpre')\n"
                            "(m is not None, m and m.IMPORTED_BY != os.getpid())")
    assert r["status"] == "ok" and r["result"] == "(True, True)", r
    assert "preload failed" not in daemon.log_since(offset), daemon.log_since(offset)[-2000:]


def test_a_broken_current_link_refuses_new_sessions_with_a_clear_message(daemon, dlab, sessions):
    lab = dlab
    lab.profile("lbroken", packages={"install": ["airlockdemo"], "wheels": str(lab.wheels)})
    pdir = pathlib.Path(lab.state) / "layers" / "lbroken"
    pdir.mkdir(parents=True)
    os.symlink("20260101-000000-abcdef", pdir / "current")
    r = daemon.post("/v1/sessions", json={"profile": "lbroken"})
    assert r.status_code >= 400, r.text
    msg = r.json()["error"]
    assert "lbroken" in msg and "missing" in msg and "airlock profile" in msg, msg
    shutil.rmtree(pdir)
