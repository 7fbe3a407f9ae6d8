"""Extra: a stopped session's saved Python state (<state_dir>/sessions/<id>/python.state) is a
pickle, and loading a pickle runs code. Someone who can put bytes there (an attacker with
access to the state directory, or a bug that lets a session's bytes land where they should
not) plants a pickle whose load runs os.system: it writes a marker under /tmp and in a private
host directory, and copies /etc/shadow next to it. Then the session is resumed by its next
call. The payload may only ever run inside the session's sandbox: no marker may appear on the
host, the host's /etc/shadow may not come out, the daemon lives on and another session is
untouched."""
import os
import pathlib
import pickle
import uuid

import pytest

import conftest
from conftest import SESSION_DIR, VIA_DAEMON

pytestmark = pytest.mark.skipif(
    not VIA_DAEMON, reason="daemon-only: stopped sessions and their saved state exist only in "
                           "`airlock serve`; run with AIRLOCK_HOSTILE_VIA=daemon")


class _Payload:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def _pickle_start(data):
    """Where the runner's pickle starts in the saved file (its PROTO opcode), else 0."""
    starts = [i for i in (data.find(b"\x80\x04\x95"), data.find(b"\x80\x05\x95")) if i >= 0]
    return min(starts) if starts else 0


def _host_shadow_secrets():
    """The password hashes of the host's /etc/shadow (fields that are not locked markers)."""
    try:
        lines = pathlib.Path("/etc/shadow").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split(":")
        if len(parts) > 1 and len(parts[1]) > 2:
            out.append(parts[1])
    return out


def test_planted_pickle_runs_only_inside_the_sandbox():
    d = conftest.daemon()
    tag = uuid.uuid4().hex[:16]
    tmp_marker = pathlib.Path(f"/tmp/pwned-hostile-{tag}")
    host_marker = SESSION_DIR / f"pwned-{tag}"
    cmd = (f"id > {tmp_marker} 2>&1; cat /etc/shadow >> {tmp_marker} 2>&1; "
           f"id > {host_marker} 2>&1; cat /etc/shadow > {host_marker}.shadow 2>&1; "
           f"cp {tmp_marker} /work/pwned-evidence 2>/dev/null; true")
    evil = pickle.dumps(_Payload(cmd), protocol=4)

    victim = d.create_session()
    neighbour = d.create_session()
    try:
        d.execute(neighbour, "mine = 'intact'")
        res = d.execute(victim, "x = 1\npad = 'p' * 200000")
        assert res["status"] == "ok", res
        r = d.post(f"/v1/sessions/{victim}/stop", timeout=120)
        assert r.status_code == 200 and r.json()["state"] == "stopped", d.why(r)

        path = pathlib.Path(d.state_dir) / "sessions" / victim / "python.state"
        assert path.is_file(), f"no saved state at {path}"
        original = path.read_bytes()
        start = _pickle_start(original)
        planted = original[:start] + evil + original[start + len(evil):]
        path.write_bytes(planted)
        print(f"planted {len(evil)} bytes at offset {start} of {len(original)}")

        # the next call resumes the session, and whatever loads the pickle runs the payload
        r = d.post(f"/v1/sessions/{victim}/execute", json={"code": "1 + 1"}, timeout=120)
        assert d.alive(), "the daemon died loading a planted state:\n" + d.log_text()[-3000:]
        assert r.status_code == 200, d.why(r)
        res = r.json()
        print(f"first execution after the resume: status {res.get('status')}, "
              f"resume_error {res.get('resume_error')!r}")
        assert res["status"] == "ok" and res["result"] == "2", res

        for marker in (tmp_marker, host_marker, pathlib.Path(f"{host_marker}.shadow")):
            assert not marker.exists(), (f"the planted pickle ran on the host: {marker} exists: "
                                         f"{marker.read_bytes()[:300]!r}")

        # if it ran, it ran in the sandbox: its copy of /etc/shadow is not the host's
        ev = d.get(f"/v1/sessions/{victim}/files/pwned-evidence")
        if ev.status_code == 200:
            print(f"the payload ran inside the sandbox: {ev.content[:200]!r}")
            for secret in _host_shadow_secrets():
                assert secret.encode() not in ev.content, \
                    "the payload read the host's /etc/shadow"
        else:
            print(f"the payload did not run (evidence: HTTP {ev.status_code})")

        assert d.get("/healthz").status_code == 200
        res = d.execute(neighbour, "mine")
        assert res["status"] == "ok" and res["result"] == "'intact'", res
        res = d.execute(victim, "2 + 2")
        assert res["status"] == "ok" and res["result"] == "4", res
    finally:
        d.delete_session(victim)
        d.delete_session(neighbour)
        for marker in (tmp_marker, host_marker, pathlib.Path(f"{host_marker}.shadow")):
            try:
                marker.unlink()     # reported above; never left for the next test
            except FileNotFoundError:
                pass
