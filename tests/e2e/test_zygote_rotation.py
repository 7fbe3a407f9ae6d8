"""Zygote rotation and cold profiles (issue 12, items 6 and 7; docs/SECURITY.md "What sessions
of one zygote share"): every session forked from one zygote has that zygote's address-space
layout and Python hash secret, so one session learns the others'. These tests check the
documented sharing within one zygote generation, that a replaced zygote gives new sessions a
new layout and hash secret (after --zygote-max-sessions forks, or --zygote-max-age), that
sessions of the old zygote keep running and that the old zygote is retired once they are gone,
and that a profile with "start": "cold" gives every session a layout and secret of its own.

A session's fingerprint is where libc and the runner binary are mapped (ASLR) and hash("x")
(CPython's siphash secret). Each test uses profiles of its own (no preload, so a zygote starts
in well under a second), found through AIRLOCK_PROFILES_DIR."""
import atexit
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

from airlock_daemon import AIRLOCK, cgroup_dirs_named, daemon_fixture, start_daemon_or_fail

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

FINGERPRINT = r'''
import json
_maps = open("/proc/self/maps").read().splitlines()
def _base(suffix):
    return next(l.split("-")[0] for l in _maps if l.endswith(suffix))
print(json.dumps({"libc": _base("/libc.so.6"), "runner": _base("/.airlock/runner"),
                  "hash": hash("x")}))
'''

LEAN = {
    "description": "Python without preloaded modules, for the zygote rotation tests.",
    "languages": ["python"],
    "preload": [],
    "imports": None,
    "limits": {"memory": "256MiB", "timeout": "20s"},
}
PROFILES = {
    "zr-count": LEAN,
    "zr-age": LEAN,
    "zr-cold": dict(LEAN, start="cold"),
    "zr-cold-peer": LEAN,
}


def _aslr_or_skip():
    with open("/proc/sys/kernel/randomize_va_space") as f:
        if f.read().strip() == "0":
            pytest.skip("kernel.randomize_va_space is 0 on this host: there is no layout to "
                        "tell apart")


# The daemons find these profiles through AIRLOCK_PROFILES_DIR; removed when Python exits.
PROFILES_DIR = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-zygote-profiles-"))
atexit.register(shutil.rmtree, PROFILES_DIR, True)


def _write_profiles():
    PROFILES_DIR.mkdir(exist_ok=True)
    for name, body in PROFILES.items():
        (PROFILES_DIR / f"{name}.json").write_text(json.dumps(body))


@pytest.fixture(autouse=True, scope="module")
def profiles_on_disk():
    """Written again when the module's tests start: the directory was made when the suite was
    collected, and a long suite on a shared machine may see /tmp cleaned meanwhile."""
    _write_profiles()


_write_profiles()
ENV = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
ENV["AIRLOCK_PROFILES_DIR"] = str(PROFILES_DIR)
# These tests start zygotes often. A daemon that starts removes the empty airlock-zygote-* and
# airlock-s-* cgroups it finds beside its own for up to 2 s, which includes the fresh cgroup of
# another daemon's zygote before its process is attached: a private parent keeps the other
# daemons on this machine (and those of these tests) from racing with each other.
CGROUP_PARENT = f"airlock-e2e-zygote-{os.getpid()}-{uuid.uuid4().hex[:8]}"
ENV["AIRLOCK_CGROUP_PARENT"] = CGROUP_PARENT


@atexit.register
def _remove_cgroup_parent():
    for d in sorted(cgroup_dirs_named({CGROUP_PARENT}), key=len, reverse=True):
        try:
            os.rmdir(d)
        except OSError:
            pass

# Zygotes replaced after 5 forks, never by age.
daemon = daemon_fixture(pytest, args=["--pool-size", "1", "--zygote-max-sessions", "5",
                                      "--zygote-max-age", "0"], env=ENV)


def fingerprint(d, sid):
    _aslr_or_skip()
    out = d.execute(sid, FINGERPRINT)
    assert out["status"] == "ok", out
    return json.loads(out["stdout"])


def differs_entirely(a, b):
    return all(a[k] != b[k] for k in ("libc", "runner", "hash"))


def wait_for_new_layout(d, profile, old, timeout):
    """Creates (and deletes) sessions of profile until one has a fingerprint that differs from
    old in every field; returns it, or None after timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sid = d.create_session(profile=profile)
        try:
            fp = fingerprint(d, sid)
        finally:
            d.delete_session(sid)
        if differs_entirely(fp, old):
            return fp
        time.sleep(0.3)
    return None


def first_generation(d, profile):
    m = re.search(rf'profile={profile} msg="zygote ready in [0-9.]+ ms" generation=(\d+)',
                  d.log_text())
    assert m, f"no 'zygote ready' line for {profile}:\n" + d.log_text()[-3000:]
    return m.group(1)


def wait_retired(d, profile, generation, timeout=20):
    """Waits for the log line of that zygote's exit (it outlives its last session)."""
    pattern = re.compile(rf'profile={profile} msg="zygote retired [^"]*" generation={generation}\b')
    deadline = time.monotonic() + timeout
    while not pattern.search(d.log_text()):
        assert time.monotonic() < deadline, (
            f"zygote {generation} of {profile} was not retired within {timeout} s after its "
            "last session ended\n" + d.log_text()[-3000:])
        time.sleep(0.1)


def test_rotation_after_max_sessions_gives_new_layout_and_secret(daemon):
    a = daemon.create_session(profile="zr-count")
    b = daemon.create_session(profile="zr-count")
    gen = first_generation(daemon, "zr-count")
    try:
        fa, fb = fingerprint(daemon, a), fingerprint(daemon, b)
        # Documented (docs/SECURITY.md): sessions of one zygote share its layout and secret.
        assert fa == fb, f"two sessions of one zygote generation differ: {fa} {fb}"
        new = wait_for_new_layout(daemon, "zr-count", fa, timeout=60)
        assert new is not None, (
            "no session after 5 forks had a new address-space layout and hash secret: the "
            "zygote was never replaced\n" + daemon.log_text()[-3000:])
        assert 'profile=zr-count msg="zygote replaced' in daemon.log_text()
        # Sessions already forked keep running, on their old layout.
        assert fingerprint(daemon, a) == fa
        assert fingerprint(daemon, b) == fa
    finally:
        daemon.delete_session(a)
        daemon.delete_session(b)
    # With its sessions and pool members gone, the first zygote exits.
    wait_retired(daemon, "zr-count", gen)


def test_cold_profile_sessions_share_nothing(daemon):
    r = daemon.get("/v1/profiles")
    assert r.status_code == 200, daemon.why(r)
    start = {p["name"]: p.get("start") for p in r.json()["profiles"]}
    assert start["zr-cold"] == "cold" and start["zr-cold-peer"] == "zygote", start
    sids = []
    try:
        cold = []
        for _ in range(3):
            sids.append(daemon.create_session(profile="zr-cold"))
            cold.append(fingerprint(daemon, sids[-1]))
        warm = []
        for _ in range(2):
            sids.append(daemon.create_session(profile="zr-cold-peer"))
            warm.append(fingerprint(daemon, sids[-1]))
        assert warm[0] == warm[1]  # the zygote profile next to it, for contrast
        everyone = cold + warm[:1]
        for i, x in enumerate(everyone):
            for j, y in enumerate(everyone):
                if i < j:
                    assert differs_entirely(x, y), (
                        f"a cold session shares its layout or hash secret: {x} vs {y}")
        # A cold session is a full session: state persists between calls, and across a stop
        # and resume, which gives it a new exec (a new layout) as well.
        daemon.execute(sids[0], "kept = 41")
        assert daemon.execute(sids[0], "kept + 1")["result"] == "42"
        r = daemon.post(f"/v1/sessions/{sids[0]}/stop", timeout=60)
        assert r.status_code == 200, daemon.why(r)
        assert daemon.execute(sids[0], "kept + 1")["result"] == "42"
        assert differs_entirely(fingerprint(daemon, sids[0]), cold[0])
    finally:
        for sid in sids:
            daemon.delete_session(sid)


def test_rotation_after_max_age_also_replaces_the_warm_pool():
    """--zygote-max-age: the zygote is replaced in the background while nothing happens, and
    the warm pool's member (forked from the old zygote) is replaced too, so the next session
    is a hand-over with the new layout, not the old one."""
    d = start_daemon_or_fail(pytest, args=["--pool-size", "1", "--zygote-max-sessions", "0",
                                           "--zygote-max-age", "2s"], env=ENV)
    try:
        a = d.create_session(profile="zr-age")  # the pool now holds one member of this zygote
        gen = first_generation(d, "zr-age")
        fa = fingerprint(d, a)
        d.wait_log('profile=zr-age msg="zygote replaced', 40)
        time.sleep(3)  # the worker forks a member of the new zygote in place of the old one
        b = d.create_session(profile="zr-age")
        fb = fingerprint(d, b)
        assert differs_entirely(fa, fb), (
            f"3 s after the zygote was replaced, a new session still has the old zygote's "
            f"layout or hash secret: {fa} {fb}")
        assert fingerprint(d, a) == fa  # the old session runs on
        d.delete_session(a)
        d.delete_session(b)
        wait_retired(d, "zr-age", gen)
    finally:
        rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


@pytest.mark.parametrize("args, message", [
    (["--zygote-max-sessions", "-1"], "--zygote-max-sessions '-1' is not a number"),
    (["--zygote-max-sessions", "many"], "--zygote-max-sessions 'many' is not a number"),
    (["--zygote-max-age", "500ms"], "shorter than 1s"),
    (["--zygote-max-age", "8d"], "--zygote-max-age '8d' is not a duration"),
])
def test_bad_rotation_flags_are_refused(args, message):
    proc = subprocess.run([AIRLOCK, "serve", "--listen", "127.0.0.1:0", *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr
