"""The audit log (issue 11, item 2; docs/AUDIT.md), checked line by line after real calls over
the HTTP API, /mcp and the OpenAI routes: each event with its fields, the request id that the
answer's X-Request-Id carried, the code's SHA-256 and --audit-code=off, rotation under
concurrent executions (no line lost, none split), every line of a burst written by a SIGTERM
that came right after it, a full disk with --audit-fail=continue and =refuse, and no token or
key anywhere in the log. The daemon writes lines from a queue within 10 ms of their events: a
test waits for the line it expects (Daemon.audit_lines, barrier()), never for a fixed time.
Loopback traffic only; every daemon is stopped and checked for leftovers, and every temporary
directory removed, whatever happens."""
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from airlock_daemon import AIRLOCK, Daemon  # noqa: E402
from fake_llm import answer, last_tool, tool_call  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

TOKEN = "audit-test-token-0123456789abcdef"
LLM_KEY = "sk-audit-test-llm-key-never-logged-0123"
TIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


def start(args, **kw):
    d = Daemon(args=["--pool-size", "1", *args], token_env=TOKEN, **kw)
    try:
        d.start()
    except Exception:
        d.stop(timeout=10)
        raise
    return d


def stop(d):
    rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


def read_lines(path):
    """Every line of the file as JSON: a line that does not parse fails the test."""
    text = Path(path).read_text()
    assert text == "" or text.endswith("\n"), "the last line is cut"
    return [json.loads(line) for line in text.splitlines()]


def events(lines, event, **match):
    return [e for e in lines if e["event"] == event
            and all(e.get(k) == v for k, v in match.items())]


def one(lines, event, **match):
    found = events(lines, event, **match)
    assert len(found) == 1, f"{event} {match}: {found}"
    return found[0]


@pytest.fixture(scope="module")
def daemon(fake):
    d = start(["--llm-base-url", fake.base_url, "--llm-model", "fake-model"],
              env={**{k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")},
                   "AIRLOCK_LLM_API_KEY": LLM_KEY})
    try:
        yield d
    finally:
        stop(d)


def rid(r):
    v = r.headers.get("X-Request-Id")
    assert v and re.fullmatch(r"[0-9a-f]{16}", v), v
    return v


def barrier(d, path=None):
    """Where the log ends once every line of the calls answered so far is in it. Lines are
    written in the order of their events, so once the line of a call made now is in the file,
    every earlier one is too. The call: a GET without a token, whose auth.failure line is all
    it changes. Returns the byte offset just past that line."""
    path = path or d.state_dir / "audit.log"
    r = d.client().get(f"{d.url}/v1/sessions", timeout=30)
    assert r.status_code == 401, r.text
    mark = rid(r)
    d.audit_lines(path=path, until=lambda lines: any(e["request_id"] == mark for e in lines))
    data = Path(path).read_bytes()
    return data.index(b"\n", data.index(f'"request_id":"{mark}"'.encode())) + 1


@pytest.fixture
def audit(daemon):
    """Reads the lines of the calls the test made: from a barrier() before it to one after (the
    barriers' own lines left out)."""
    path = daemon.state_dir / "audit.log"
    start_at = barrier(daemon)

    def lines():
        end = barrier(daemon)
        with open(path, "rb") as f:
            f.seek(start_at)
            text = f.read(end - start_at).decode()
        return [json.loads(line) for line in text.splitlines()][:-1]
    return lines


def test_the_file_is_0600_and_every_line_has_the_common_fields(daemon, audit):
    r = daemon.post("/v1/sessions", json={})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    daemon.delete(f"/v1/sessions/{sid}")
    path = daemon.state_dir / "audit.log"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = audit()
    assert lines, "nothing written"
    for e in lines:
        assert list(e)[:5] == ["time", "event", "tenant", "session", "request_id"], e
        assert TIME_RE.fullmatch(e["time"]), e
        assert e["tenant"] == "default"


def test_session_lifecycle_execution_and_files(daemon, audit):
    r = daemon.post("/v1/sessions", json={})
    assert r.status_code == 201, r.text
    sid, create_rid = r.json()["id"], rid(r)
    code = "x = 6 * 7\nprint(x)"
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": code})
    assert r.status_code == 200, r.text
    exec_rid = rid(r)
    r = daemon.put(f"/v1/sessions/{sid}/files/data/in.txt", data=b"hello audit")
    assert r.status_code in (200, 201), r.text
    put_rid = rid(r)
    r = daemon.get(f"/v1/sessions/{sid}/files/data/in.txt")
    assert r.status_code == 200 and r.content == b"hello audit"
    get_rid = rid(r)
    r = daemon.get(f"/v1/sessions/{sid}/files/..%2Fetc%2Fpasswd")
    assert r.status_code >= 400
    r = daemon.delete(f"/v1/sessions/{sid}/files/data/in.txt")
    assert r.status_code in (200, 204), r.text
    del_rid = rid(r)
    r = daemon.post(f"/v1/sessions/{sid}/stop")
    assert r.status_code == 200, r.text
    stop_rid = rid(r)
    r = daemon.post(f"/v1/sessions/{sid}/resume")
    assert r.status_code == 200, r.text
    resume_rid = rid(r)
    r = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
    assert r.status_code in (200, 201), r.text
    fork_rid = rid(r)
    child = r.json()["sessions"][0]["id"]
    for s in (child, sid):
        r = daemon.delete(f"/v1/sessions/{s}")
        assert r.status_code in (200, 204), r.text
    lines = audit()

    e = one(lines, "session.created", session=sid)
    assert e["request_id"] == create_rid and e["profile"] == "default"
    e = one(lines, "execution", session=sid)
    assert e["request_id"] == exec_rid
    assert e["code"] == code and e["code_sha256"] == hashlib.sha256(code.encode()).hexdigest()
    assert e["language"] == "python" and e["profile"] == "default"
    assert e["status"] == "ok" and e["exit_code"] == 0
    assert e["usage"]["wall_ms"] > 0 and "cpu_ms" in e["usage"]
    e = one(lines, "file.upload", session=sid)
    assert (e["request_id"], e["path"], e["bytes"], e["outcome"]) == \
        (put_rid, "data/in.txt", 11, "ok")
    e = one(lines, "file.download", session=sid, outcome="ok")
    assert (e["request_id"], e["path"], e["bytes"]) == (get_rid, "data/in.txt", 11)
    e = one(lines, "file.delete", session=sid)
    assert (e["request_id"], e["path"], e["outcome"]) == (del_rid, "data/in.txt", "ok")
    e = one(lines, "session.stopped", session=sid)
    assert (e["request_id"], e["reason"]) == (stop_rid, "client")
    e = one(lines, "session.resumed", session=sid)
    assert e["request_id"] == resume_rid and e["state_lost"] is False
    e = one(lines, "session.forked", session=sid)
    assert e["request_id"] == fork_rid and e["children"] == [child]
    assert one(lines, "session.deleted", session=sid)["reason"] == "client"
    assert one(lines, "session.deleted", session=child)["reason"] == "client"


def test_one_shot_execute_and_a_policy_refusal(daemon, audit):
    r = daemon.post("/execute", json={"code": "echo one-shot", "language": "bash"})
    assert r.status_code == 200, r.text
    once_rid = rid(r)
    r = daemon.post("/v1/sessions", json={"profile": "minimal"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "ls", "language": "bash"})
    assert r.status_code == 400, r.text
    refused_rid = rid(r)
    daemon.delete(f"/v1/sessions/{sid}")
    lines = audit()
    e = one(lines, "execution", request_id=once_rid)
    assert e["one_shot"] is True and e["language"] == "bash" and e["status"] == "ok"
    assert not events(lines, "session.created", session=e["session"]), \
        "a one-shot run's sandbox is not a session of its own in the log"
    e = one(lines, "policy.refusal", request_id=refused_rid)
    assert (e["session"], e["policy"], e["profile"], e["language"]) == \
        (sid, "language", "minimal", "bash")
    assert "does not allow bash" in e["reason"]
    assert not events(lines, "execution", session=sid), "nothing ran"


@pytest.mark.parametrize("header,reason", [
    (None, "missing"),
    ("Basic Zm9vOmJhcg==", "malformed"),
    ("Bearer wrong-token-that-must-not-be-logged-42", "invalid"),
])
def test_auth_failures_name_address_route_and_reason_never_the_token(daemon, audit, header,
                                                                     reason):
    headers = {"Authorization": header} if header else {}
    c = daemon.client()
    r = c.get(f"{daemon.url}/v1/sessions?x=1", headers=headers, timeout=30)
    assert r.status_code == 401
    e = one(audit(), "auth.failure", request_id=rid(r))
    assert (e["remote"], e["method"], e["route"], e["reason"]) == \
        ("127.0.0.1", "GET", "/v1/sessions", reason)     # the query is not the route
    assert e["tenant"] is None and e["session"] is None
    assert "wrong-token" not in json.dumps(e) and "Zm9v" not in json.dumps(e)


def mcp_post(d, msg, sid=None):
    headers = dict(MCP_HEADERS)
    if sid:
        headers["Mcp-Session-Id"] = sid
    return d.post("/mcp", data=json.dumps(msg), headers=headers, timeout=120)


def test_mcp_tool_call_and_its_execution(daemon, audit):
    r = mcp_post(daemon, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "audit-test", "version": "1"}}})
    assert r.status_code == 200, r.text
    msid = r.headers["Mcp-Session-Id"]
    mcp_post(daemon, {"jsonrpc": "2.0", "method": "notifications/initialized"}, msid)
    code = "print('via mcp')"
    r = mcp_post(daemon, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "run_python", "arguments": {"code": code}}}, msid)
    assert r.status_code == 200 and "via mcp" in r.text, r.text
    call_rid = rid(r)
    r = daemon.delete("/mcp", headers={"Mcp-Session-Id": msid})
    lines = audit()
    t = one(lines, "tool.call", request_id=call_rid)
    assert (t["tool"], t["server"], t["outcome"]) == ("run_python", "airlock", "ok")
    assert t["ms"] > 0 and t["session"]
    e = one(lines, "execution", request_id=call_rid)
    assert e["session"] == t["session"] and e["code"] == code


def test_openai_routes(daemon, audit, fake):
    fake.script.clear()
    fake.requests.clear()
    code = "print(6*7)"

    def second(req):
        assert "42" in last_tool(req)
        return answer("It is 42.")
    fake.add(tool_call("run_python", {"code": code}), second)
    r = daemon.post("/v1/responses", json={
        "input": "6*7?", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]})
    assert r.status_code == 200, r.text
    resp_rid = rid(r)
    container = [o for o in r.json()["output"] if o["type"] == "code_interpreter_call"][0]
    cid = container["container_id"]
    r = daemon.post(f"/v1/containers/{cid}/files",
                    files={"file": ("report.csv", b"a,b\n1,2\n", "text/csv")})
    assert r.status_code == 200, r.text
    up_rid, fid = rid(r), r.json()["id"]
    r = daemon.get(f"/v1/containers/{cid}/files/{fid}/content")
    assert r.status_code == 200 and r.content == b"a,b\n1,2\n"
    down_rid = rid(r)
    daemon.delete(f"/v1/containers/{cid}")
    lines = audit()
    e = one(lines, "execution", request_id=resp_rid)
    assert e["code"] == code and e["status"] == "ok"
    t = one(lines, "tool.call", request_id=resp_rid)
    assert (t["tool"], t["server"], t["outcome"]) == ("run_python", "airlock", "ok")
    up = one(lines, "file.upload", request_id=up_rid)
    assert up["bytes"] == 8 and up["path"].endswith("report.csv") and up["session"]
    down = one(lines, "file.download", request_id=down_rid)
    assert down["bytes"] == 8 and down["session"] == up["session"]


def test_no_token_or_key_is_ever_written(daemon):
    text = (daemon.state_dir / "audit.log").read_text()
    assert text, "the other tests wrote lines"
    assert TOKEN not in text and LLM_KEY not in text
    assert "wrong-token-that-must-not-be-logged" not in text


# ---- --audit-code=off and rotation ----------------------------------------------------------

def test_code_off_and_rotation_under_concurrent_executions():
    work = Path(tempfile.mkdtemp(prefix="airlock-e2e-audit-rot-"))
    log = work / "audit" / "log.jsonl"
    log.parent.mkdir()
    d = None
    try:
        d = start(["--audit-log", str(log), "--audit-code", "off", "--audit-max-size", "8K",
                   "--audit-keep", "100"])
        sids = []
        for _ in range(4):
            r = d.post("/v1/sessions", json={})
            assert r.status_code == 201, r.text
            sids.append(r.json()["id"])
        codes = {f"print({i}, 'rotation')" for i in range(160)}
        per = sorted(codes)
        failures = []

        def worker(k):
            for c in per[k::4]:
                r = d.post(f"/v1/sessions/{sids[k]}/execute", json={"code": c})
                if r.status_code != 200:
                    failures.append(r.text)
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures[:3]
        for s in sids:
            d.delete(f"/v1/sessions/{s}")
        stop(d)     # writes what is still queued
        d = None
        files = sorted(log.parent.iterdir())
        assert len(files) > 3, f"rotated: {files}"
        lines = []
        for f in files:
            assert f.stat().st_size <= 8192, f
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
            lines += read_lines(f)      # every line whole, in one file
        execs = [e for e in lines if e["event"] == "execution"]
        assert all("code" not in e for e in execs), "--audit-code off"
        hashes = sorted(e["code_sha256"] for e in execs)
        assert hashes == sorted(hashlib.sha256(c.encode()).hexdigest() for c in codes), \
            "each execution exactly once"
    finally:
        if d:
            stop(d)
        shutil.rmtree(work, ignore_errors=True)


# ---- a full disk ----------------------------------------------------------------------------

def tmpfs_wrapper(work):
    """An `airlock` that runs in a mount namespace of its own with a 64 KiB tmpfs at
    work/small: a disk that the test can fill up and free again through /proc/PID/root."""
    small = work / "small"
    small.mkdir()
    script = work / "airlock-in-tmpfs"
    script.write_text("#!/bin/sh\n"
                      f"exec unshare --mount --propagation private sh -c 'mount -t tmpfs -o "
                      f"size=64k,mode=0700 tmpfs {small} && exec {AIRLOCK} \"$@\"' airlock \"$@\"\n")
    script.chmod(0o700)
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            f"mount -t tmpfs -o size=64k tmpfs {small}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a new mount namespace: {probe.stderr.strip()}")
    return script, small


def fill(path):
    """Writes path until the disk is full (unbuffered: nothing is left to flush)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 512)
    except OSError as e:
        assert e.errno == 28, e
    finally:
        os.close(fd)


def failures_counted(d):
    """airlock_audit_write_failures_total of /metrics (docs/METRICS.md)."""
    r = d.get("/metrics")
    assert r.status_code == 200, r.text
    counted = [ln for ln in r.text.splitlines()
               if ln.startswith("airlock_audit_write_failures_total ")]
    assert counted, r.text[-2000:]
    return float(counted[0].split()[1])


def wait_for(what, check, timeout=10):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("mode", ["continue", "refuse"])
def test_a_full_disk(mode):
    work = Path(tempfile.mkdtemp(prefix="airlock-e2e-audit-full-"))
    d = None
    try:
        script, small = tmpfs_wrapper(work)
        d = start(["--audit-log", str(small / "audit.log"), "--audit-fail", mode],
                  binary=str(script))
        inside = Path(f"/proc/{d.proc.pid}/root") / str(small).lstrip("/")
        log = inside / "audit.log"
        r = d.post("/v1/sessions", json={})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        # Its line is written before the disk fills up.
        d.audit_lines(path=log, until=lambda ls: events(ls, "session.created", session=sid))
        fill(inside / "filler")
        before = d.log_size()
        # The log's last page may still take a line or two: run cells until a write fails.
        # Each cell's line is written or lost before the next cell runs.
        for i in range(40):
            r = d.post(f"/v1/sessions/{sid}/execute", json={"code": f"print({i})"})
            assert r.status_code == 200, r.text     # the cell whose line was lost still ran
            cell = rid(r)
            wait_for(f"the line of cell {i} written or lost", lambda: (
                "audit: cannot write to" in d.log_since(before)
                or events(d.audit_lines(path=log), "execution", request_id=cell)))
            if "audit: cannot write to" in d.log_since(before):
                break
        else:
            pytest.fail("no audit write failed on a full disk")
        assert failures_counted(d) == 1
        for i in range(2):
            r = d.post(f"/v1/sessions/{sid}/execute", json={"code": f"print('after {i}')"})
            assert r.status_code == (200 if mode == "continue" else 503), r.text
        if mode == "refuse":
            msg = r.json()["error"]
            assert "audit log" in msg and "--audit-fail=refuse" in msg, msg
        # continue: the first line that failed and two more; refuse: the first only, as the
        # two cells after it never ran. The disk is freed only once they were tried.
        lost = 3 if mode == "continue" else 1
        wait_for(f"{lost} lines counted as lost", lambda: failures_counted(d) == lost)
        said = d.log_since(before)
        assert said.count("audit: cannot write to") == 1, "once per change of state:\n" + said
        assert "No space left on device" in said
        (inside / "filler").unlink()
        r = d.post(f"/v1/sessions/{sid}/execute", json={"code": "print('back')"})
        assert r.status_code == 200, r.text
        back_rid = rid(r)
        # no half line was left by the full disk: every line parses
        lines = d.audit_lines(path=log, until=lambda ls: events(ls, "execution",
                                                                request_id=back_rid))
        assert Path(log).read_text().endswith("\n")
        assert "audit: writing to" in d.log_since(before)
        resumed = events(lines, "audit.resumed")
        assert len(resumed) == 1
        assert resumed[0]["lost"] == lost
        # The failures are counted where a platform team watches (docs/METRICS.md).
        assert failures_counted(d) == lost
        assert one(lines, "execution", request_id=back_rid)["code"] == "print('back')"
        d.delete(f"/v1/sessions/{sid}")
    finally:
        if d:
            stop(d)
        shutil.rmtree(work, ignore_errors=True)


def test_bad_audit_flags_are_refused_with_a_reason():
    for args, words in [(["--audit-fail", "maybe"], "continue or refuse"),
                        (["--audit-code", "yes"], "on or off"),
                        (["--audit-syslog", "kern2"], "not a facility"),
                        (["--audit-max-size", "10"], "at least 4K"),
                        (["--audit-keep", "-1"], "from 0 to 1000"),
                        (["--audit-log", "/nonexistent-dir/x/audit.log"], "cannot open")]:
        work = tempfile.mkdtemp(prefix="airlock-e2e-audit-flags-")
        try:
            p = subprocess.run([AIRLOCK, "serve", "--state-dir", work, "--listen",
                                "127.0.0.1:0", *args], capture_output=True, text=True,
                               timeout=30, env={"PATH": os.environ.get("PATH", "")})
        finally:
            shutil.rmtree(work, ignore_errors=True)
        assert p.returncode == 2, (args, p.stderr)
        assert words in p.stderr, (args, p.stderr)


def devlog_wrapper(work, sock):
    """An `airlock` that runs in a mount namespace of its own where /dev/log is the unix
    socket sock, which the test made and reads. Where the host has no /dev/log (no syslog
    daemon), the namespace gets a /dev of its own: a tmpfs holding binds of every entry of
    the host's /dev, plus log; the host's /dev is never touched."""
    newdev = work / "dev"
    newdev.mkdir()
    setup = ("set -e\n"
             "if [ -e /dev/log ]; then mount --bind \"$SOCK\" /dev/log; else\n"
             "  mount -t tmpfs -o mode=0755 tmpfs \"$NEWDEV\"\n"
             "  for e in /dev/* /dev/.[!.]*; do\n"
             "    [ -e \"$e\" ] || [ -L \"$e\" ] || continue\n"
             "    n=\"$NEWDEV/${e##*/}\"\n"
             "    if [ -L \"$e\" ]; then cp -P \"$e\" \"$n\"\n"
             "    elif [ -d \"$e\" ]; then mkdir \"$n\" && mount --rbind \"$e\" \"$n\"\n"
             "    else : > \"$n\" && mount --bind \"$e\" \"$n\"; fi\n"
             "  done\n"
             "  : > \"$NEWDEV/log\" && mount --bind \"$SOCK\" \"$NEWDEV/log\"\n"
             "  mount --move \"$NEWDEV\" /dev\n"
             "fi\n")
    (work / "setup.sh").write_text(setup)
    script = work / "airlock-with-devlog"
    script.write_text("#!/bin/sh\n"
                      f"export SOCK='{sock}' NEWDEV='{newdev}'\n"
                      f"exec unshare --mount --propagation private sh -c '. {work}/setup.sh && "
                      f"exec {AIRLOCK} \"$@\"' airlock \"$@\"\n")
    script.chmod(0o700)
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            f"export SOCK='{sock}' NEWDEV='{newdev}'; . {work}/setup.sh && "
                            "test -S /dev/log"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot put a socket at /dev/log in a new mount namespace: "
                    f"{probe.stderr.strip()}")
    return script


SYSLOG_RE = re.compile(r"<(\d+)>.*? airlock-audit\[(\d+)\]: (\{.*\})\n?$", re.S)


def test_syslog_gets_every_line_with_the_facility_and_ident():
    work = Path(tempfile.mkdtemp(prefix="airlock-e2e-audit-syslog-"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    d = None
    try:
        sock.bind(str(work / "log.sock"))
        sock.settimeout(0.2)
        script = devlog_wrapper(work, work / "log.sock")
        d = start(["--audit-syslog", "local3"], binary=str(script))
        r = d.post("/v1/sessions", json={})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        r = d.post(f"/v1/sessions/{sid}/execute", json={"code": "print(1)"})
        assert r.status_code == 200, r.text
        exec_rid = rid(r)
        got, deadline = [], time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                e["event"] == "execution" and e["request_id"] == exec_rid for e in got):
            try:
                msg = sock.recv(65536).decode()
            except socket.timeout:
                continue
            m = SYSLOG_RE.match(msg)
            assert m, f"not a syslog line of airlock-audit: {msg!r}"
            # local3 (19) * 8 + info (6); the pid is the daemon's.
            assert (int(m.group(1)), int(m.group(2))) == (19 * 8 + 6, d.proc.pid), msg
            got.append(json.loads(m.group(3)))
        one(got, "session.created", session=sid)
        assert one(got, "execution", request_id=exec_rid)["code"] == "print(1)"
        # The same lines as the file's (the writer writes the file first, then syslog).
        inside = Path(f"/proc/{d.proc.pid}/root") / str(d.state_dir).lstrip("/")
        file_lines = d.audit_lines(path=inside / "audit.log")
        assert all(e in file_lines for e in got), (got, file_lines)
        d.delete(f"/v1/sessions/{sid}")
    finally:
        if d:
            stop(d)
        sock.close()
        shutil.rmtree(work, ignore_errors=True)


def test_sighup_reopens_the_log_at_its_path():
    """logrotate without copytruncate: rename the file, SIGHUP, new lines in a new file."""
    d = start([])
    try:
        log = d.state_dir / "audit.log"
        r = d.post("/v1/sessions", json={})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        rotated = d.state_dir / "audit.log.rotated"
        os.rename(log, rotated)
        r = d.post(f"/v1/sessions/{sid}/execute", json={"code": "print('before')"})
        before_rid = rid(r)
        os.kill(d.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while True:
            # Until the daemon handled the signal, a cell's line goes to the renamed file.
            r = d.post(f"/v1/sessions/{sid}/execute", json={"code": "print('after')"})
            assert r.status_code == 200, r.text
            after_rid = rid(r)

            def holder():
                return [f for f in (log, rotated) if f.exists() and events(
                    d.audit_lines(path=f), "execution", request_id=after_rid)]
            wait_for(f"the line of cell {after_rid} in a file", holder)
            if holder() == [log]:
                break
            assert time.monotonic() < deadline, "no new audit.log after SIGHUP"
            time.sleep(0.1)
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        old = read_lines(rotated)
        one(old, "session.created", session=sid)
        # Until the signal, the renamed file (the daemon's open descriptor) took the lines.
        one(old, "execution", request_id=before_rid)
        assert not events(old, "execution", request_id=after_rid)
        d.delete(f"/v1/sessions/{sid}")
        d.audit_lines(path=log, until=lambda ls: events(ls, "session.deleted", session=sid))
    finally:
        stop(d)


def test_a_burst_is_written_whole_by_a_sigterm_right_after_it():
    """The writer drains its queue when the daemon stops: every line of calls answered before
    SIGTERM is in the file, none cut or mixed with another (four threads upload files while a
    fifth runs cells), each once, in the order of the calls of one thread."""
    work = Path(tempfile.mkdtemp(prefix="airlock-e2e-audit-burst-"))
    log = work / "audit.log"
    d = None
    try:
        d = start(["--audit-log", str(log)])
        sid, files_sid = [d.create_session() for _ in range(2)]
        rids, failures = [], []

        def worker(k):
            c = d.client(token=TOKEN)
            for i in range(40):
                r = c.put(f"{d.url}/v1/sessions/{files_sid}/files/t{k}/{i}.txt",
                          data=b"x" * (i * 50),
                          timeout=30)
                if r.status_code not in (200, 201):
                    failures.append(r.text)
            c.close()
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for i in range(60):
            r = d.post(f"/v1/sessions/{sid}/execute", json={"code": f"{i}"})
            assert r.status_code == 200, r.text
            rids.append(rid(r))
        for t in threads:
            t.join()
        assert not failures, failures[:3]
        stop(d)     # SIGTERM at once: lines still queued are written before the daemon exits
        d = None
        lines = read_lines(log)     # every line whole and alone on its line
        execs = [e for e in lines if e["event"] == "execution"]
        assert [e["request_id"] for e in execs] == rids
        uploads = sorted(e["path"] for e in lines if e["event"] == "file.upload")
        assert uploads == sorted(f"t{k}/{i}.txt" for k in range(4) for i in range(40))
    finally:
        if d:
            stop(d)
        shutil.rmtree(work, ignore_errors=True)
