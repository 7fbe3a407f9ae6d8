"""Tenants and quotas (docs/TENANTS.md): `airlock tenants` with and without a daemon, keys that
work, are revoked and rotated while the daemon runs, isolation on every route family (another
tenant's id answers exactly what an unknown id answers), lists that show only one's own, and
quotas refused with 429 bodies that name the quota. The single-token mode is covered by every
other e2e module, which runs without tenants; here the daemon token stays tenant "default"."""
import json
import os
import subprocess

import pytest
import requests

from airlock_daemon import AIRLOCK, daemon_fixture

daemon = daemon_fixture(pytest, args=("--pool-size", "1"))

GHOST = "s-" + "0" * 24  # an id nobody has


def tenants(state_dir, *args, check=True):
    p = subprocess.run([AIRLOCK, "tenants", *args, "--state-dir", str(state_dir)],
                       capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")})
    if check:
        assert p.returncode == 0, f"tenants {args}: {p.returncode} {p.stderr}"
    return p


def add(state_dir, name, *opts):
    key = tenants(state_dir, "add", name, *opts).stdout.strip().splitlines()[-1]
    assert key.startswith("alk_") and len(key) == 68, key
    return key


class Tenant:
    """A tenant's client; deletes what it created at the end."""

    def __init__(self, daemon, name, *opts):
        self.daemon = daemon
        self.name = name
        self.key = add(daemon.state_dir, name, *opts)
        self.http = daemon.client(self.key)
        self.made = []

    def req(self, method, path, **kw):
        kw.setdefault("timeout", 60)
        return self.http.request(method, self.daemon.url + path, **kw)

    def create(self, **body):
        r = self.req("POST", "/v1/sessions", json=body)
        if r.status_code == 201:
            self.made.append(r.json()["id"])
        return r

    def close(self):
        if not self.daemon.alive():
            return
        for sid in self.made:
            try:
                self.req("DELETE", f"/v1/sessions/{sid}")
            except requests.RequestException:
                pass


@pytest.fixture(scope="module")
def two(daemon):
    a = Tenant(daemon, "team-a")
    b = Tenant(daemon, "team-b")
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_add_without_a_daemon_and_the_store_holds_no_key(tmp_path):
    key = add(tmp_path, "offline", "--max-sessions", "3", "--profiles", "default,minimal")
    db = tmp_path / "tenants" / "tenants.db"
    assert db.exists() and (db.stat().st_mode & 0o077) == 0
    assert key.encode() not in db.read_bytes()
    assert key[4:].encode() not in db.read_bytes()
    shown = json.loads(tenants(tmp_path, "show", "offline").stdout)
    assert shown["max_sessions"] == 3 and shown["profiles"] == ["default", "minimal"]
    assert "key" not in json.dumps(shown).replace("key_changed_at", "")


@pytest.mark.parametrize("args, needle", [
    (["add", "default"], "default"),
    (["add", "Bad Name"], "lowercase"),
    (["add", "x", "--max-cpu", "lots"], "--max-cpu"),
    (["add", "x", "--max-memory", "big"], "--max-memory"),
    (["add", "x", "--max-sessions", "-1"], "--max-sessions"),
    (["add", "x", "--profiles", "a,,b"], "--profiles"),
    (["set", "x"], "at least one"),
    (["frobnicate", "x"], "unknown subcommand"),
])
def test_bad_arguments_exit_2_saying_why(tmp_path, args, needle):
    p = tenants(tmp_path, *args, check=False)
    assert p.returncode == 2 and needle in p.stderr, p.stderr


def test_unknown_and_duplicate_tenants_exit_1(tmp_path):
    add(tmp_path, "dup")
    p = tenants(tmp_path, "add", "dup", check=False)
    assert p.returncode == 1 and "exists already" in p.stderr
    for verb in ("show", "revoke", "rotate"):
        p = tenants(tmp_path, verb, "nobody", check=False)
        assert p.returncode == 1 and "no tenant named 'nobody'" in p.stderr, (verb, p.stderr)


def test_an_unknown_key_is_401(daemon):
    for key in ("alk_" + "0" * 64, "nonsense"):
        r = daemon.client(key).get(daemon.url + "/v1/sessions", timeout=30)
        assert r.status_code == 401, r.text


def test_a_tenant_sees_only_its_own_sessions(daemon, two):
    a, b = two
    sa = a.create().json()
    assert sa["tenant"] == "team-a"
    sb = b.create().json()["id"]
    own = daemon.create_session()
    try:
        ids_a = {s["id"] for s in a.req("GET", "/v1/sessions").json()["sessions"]}
        ids_b = {s["id"] for s in b.req("GET", "/v1/sessions").json()["sessions"]}
        ids_d = {s["id"] for s in daemon.get("/v1/sessions").json()["sessions"]}
        assert sa["id"] in ids_a and sb not in ids_a and own not in ids_a
        assert sb in ids_b and sa["id"] not in ids_b
        # The daemon token is tenant "default": it sees its own only, not every tenant's.
        assert own in ids_d and sa["id"] not in ids_d and sb not in ids_d
    finally:
        daemon.delete_session(own)


# Every session route, each with a body a real call would send.
SESSION_ROUTES = [
    ("GET", "/v1/sessions/{id}", None),
    ("PATCH", "/v1/sessions/{id}", {"metadata": {"k": "v"}}),
    ("POST", "/v1/sessions/{id}/execute", {"code": "print(1)"}),
    ("POST", "/v1/sessions/{id}/interrupt", {}),
    ("POST", "/v1/sessions/{id}/stop", {}),
    ("POST", "/v1/sessions/{id}/resume", {}),
    ("POST", "/v1/sessions/{id}/fork", {"n": 1}),
    ("GET", "/v1/sessions/{id}/files/x.txt", None),
    ("PUT", "/v1/sessions/{id}/files/x.txt", b"data"),
    ("DELETE", "/v1/sessions/{id}/files/x.txt", None),
    ("GET", "/v1/containers/cntr_{hex}", None),
    ("GET", "/v1/containers/cntr_{hex}/files", None),
    ("DELETE", "/v1/containers/cntr_{hex}", None),
    ("DELETE", "/v1/sessions/{id}", None),
]


def call(t, method, path, body, sid):
    path = path.format(id=sid, hex=sid[2:])
    if isinstance(body, bytes):
        return t.req(method, path, data=body)
    return t.req(method, path, json=body) if body is not None else t.req(method, path)


@pytest.mark.parametrize("method, path, body", SESSION_ROUTES,
                         ids=[f"{m} {p}" for m, p, _ in SESSION_ROUTES])
def test_another_tenants_id_is_an_unknown_id(daemon, two, method, path, body):
    a, b = two
    victim = a.create().json()["id"]
    a.req("PUT", f"/v1/sessions/{victim}/files/x.txt", data=b"secret")
    theirs = call(b, method, path, body, victim)
    ghost = call(b, method, path, body, GHOST)
    assert theirs.status_code == 404, theirs.text
    # The same body as for an id nobody has, the id aside: nothing says it exists.
    assert theirs.text.replace(victim[2:], "ID") == ghost.text.replace(GHOST[2:], "ID")
    # And the session is untouched for its owner.
    r = a.req("GET", f"/v1/sessions/{victim}/files/x.txt")
    assert r.status_code == 200 and r.content == b"secret", r.text
    assert a.req("GET", f"/v1/sessions/{victim}").json()["metadata"] == {}


def test_a_stopped_session_stays_its_owners(daemon, two):
    a, b = two
    sid = a.create().json()["id"]
    assert a.req("POST", f"/v1/sessions/{sid}/stop").status_code == 200
    assert b.req("POST", f"/v1/sessions/{sid}/resume").status_code == 404
    assert b.req("GET", f"/v1/sessions/{sid}").status_code == 404
    assert sid not in {s["id"] for s in b.req("GET", "/v1/sessions").json()["sessions"]}
    r = a.req("POST", f"/v1/sessions/{sid}/execute", json={"code": "print(2)"})
    assert r.status_code == 200 and r.json()["stdout"] == "2\n", r.text
    # Ended: the reason is its owner's to read; others get the unknown-id answer.
    assert a.req("DELETE", f"/v1/sessions/{sid}").status_code == 200
    assert "deleted" in a.req("GET", f"/v1/sessions/{sid}").json().get("reason", "")
    assert b.req("GET", f"/v1/sessions/{sid}").json() == \
        {"error": f"unknown session '{sid}'"}


def test_containers_and_e2b_sandboxes_are_per_tenant(daemon, two):
    a, b = two
    r = a.req("POST", "/v1/containers", json={"name": "mine"})
    assert r.status_code == 200, r.text
    cid = r.json()["id"]
    try:
        assert cid not in [c["id"] for c in b.req("GET", "/v1/containers").json()["data"]]
        assert cid in [c["id"] for c in a.req("GET", "/v1/containers").json()["data"]]
    finally:
        a.req("DELETE", f"/v1/containers/{cid}")
    # E2B_API_KEY may be a tenant's key; its sandboxes are that tenant's.
    h = daemon.client()
    r = h.post(daemon.url + "/e2b/api/v2/sandboxes", json={}, headers={"X-API-KEY": a.key},
               timeout=60)
    assert r.status_code == 201, r.text
    sbx = r.json()["sandboxID"]
    try:
        listed = h.get(daemon.url + "/e2b/api/v2/sandboxes", headers={"X-API-KEY": b.key})
        assert sbx not in [s["sandboxID"] for s in listed.json()]
        r = h.get(daemon.url + f"/e2b/api/sandboxes/{sbx}", headers={"X-API-KEY": b.key})
        assert r.status_code == 404, r.text
        r = h.delete(daemon.url + f"/e2b/api/sandboxes/{sbx}", headers={"X-API-KEY": b.key})
        assert r.status_code == 404, r.text
        r = h.get(daemon.url + f"/e2b/api/sandboxes/{sbx}", headers={"X-API-KEY": a.key})
        assert r.status_code == 200, r.text
    finally:
        h.delete(daemon.url + f"/e2b/api/sandboxes/{sbx}", headers={"X-API-KEY": a.key})


def test_quotas_are_429_naming_the_quota(daemon):
    t = Tenant(daemon, "quota-a", "--max-sessions", "2", "--profiles", "default")
    try:
        assert t.create().status_code == 201
        assert t.create().status_code == 201
        r = t.create()
        assert r.status_code == 429, r.text
        assert r.json() == {"error": "tenant 'quota-a' has reached its quota of 2 live "
                                     "sessions (max_sessions)",
                            "quota": "max_sessions", "limit": 2}
        # Forking is more live sessions too.
        r = t.req("POST", f"/v1/sessions/{t.made[0]}/fork", json={"n": 1})
        assert r.status_code == 429 and r.json()["quota"] == "max_sessions", r.text
        # A stopped session frees its place; resuming takes one again.
        assert t.req("POST", f"/v1/sessions/{t.made[0]}/stop").status_code == 200
        assert t.create().status_code == 201
        r = t.req("POST", f"/v1/sessions/{t.made[0]}/resume")
        assert r.status_code == 429 and r.json()["quota"] == "max_sessions", r.text
        # A profile outside the list is a policy refusal, not a quota.
        r = t.req("POST", "/v1/sessions", json={"profile": "minimal"})
        assert r.status_code == 403, r.text
        assert "may not use profile 'minimal'" in r.json()["error"] and "default" in \
            r.json()["error"]
        # Quotas change at once in the running daemon.
        tenants(daemon.state_dir, "set", "quota-a", "--max-sessions", "0", "--max-memory",
                "1MiB")
        r = t.create()
        assert r.status_code == 429 and r.json()["quota"] == "max_memory", r.text
        assert r.json()["limit"] == 1 << 20
        tenants(daemon.state_dir, "set", "quota-a", "--max-memory", "0", "--max-cpu", "0.5")
        r = t.create()
        assert r.status_code == 429 and r.json()["quota"] == "max_cpu", r.text
        assert r.json()["limit"] == 0.5
        # Other tenants and the daemon token are not held to it.
        other = daemon.create_session()
        daemon.delete_session(other)
    finally:
        t.close()


def test_a_streamed_execute_runs_as_its_tenant(daemon):
    """The streamed (ndjson) execute runs its cell on a worker thread: the tenant's profile
    list and ownership hold there as on the handler's."""
    t = Tenant(daemon, "stream-a", "--profiles", "default")
    try:
        nd = {"Accept": "application/x-ndjson"}
        r = t.req("POST", "/execute", json={"code": "print(1)", "profile": "minimal"},
                  headers=nd)
        assert r.status_code == 403, r.text
        assert "may not use profile 'minimal'" in r.json()["error"], r.text
        r = t.req("POST", "/execute", json={"code": "print(1)"}, headers=nd)
        assert r.status_code == 200 and '"stdout"' in r.text, r.text
        other = daemon.create_session()
        try:
            r = t.req("POST", f"/v1/sessions/{other}/execute", json={"code": "1"}, headers=nd)
            assert r.status_code == 404, r.text
        finally:
            daemon.delete_session(other)
    finally:
        t.close()


def test_revoke_and_rotate_take_effect_without_a_restart(daemon):
    t = Tenant(daemon, "rotating")
    sid = t.create().json()["id"]
    old = t.key
    try:
        tenants(daemon.state_dir, "revoke", "rotating")
        assert t.req("GET", "/v1/sessions").status_code == 401
        new = tenants(daemon.state_dir, "rotate", "rotating").stdout.strip().splitlines()[-1]
        assert new != old
        assert t.req("GET", "/v1/sessions").status_code == 401  # the old key stays dead
        t.http = daemon.client(new)
        r = t.req("GET", f"/v1/sessions/{sid}")
        assert r.status_code == 200 and r.json()["tenant"] == "rotating", r.text
    finally:
        t.close()


def test_keys_are_never_logged(daemon, two):
    a, b = two
    log = daemon.log_text()
    for key in (a.key, b.key):
        assert key not in log and key[4:20] not in log


def test_openai_files_are_per_tenant(daemon, two):
    a, b = two
    r = a.req("POST", "/v1/files", files={"file": ("a.txt", b"team a's data")},
              data={"purpose": "user_data"})
    assert r.status_code == 200, r.text
    fid = r.json()["id"]
    ghost = "file-" + "0" * len(fid[5:])
    try:
        for method, path in (("GET", "/v1/files/{}"), ("GET", "/v1/files/{}/content"),
                             ("DELETE", "/v1/files/{}")):
            theirs = b.req(method, path.format(fid))
            unknown = b.req(method, path.format(ghost))
            assert theirs.status_code == 404, theirs.text
            # The same body as an id nobody has, but for the id itself.
            assert theirs.json() == json.loads(unknown.text.replace(ghost, fid)), theirs.text
        assert fid not in [f["id"] for f in b.req("GET", "/v1/files").json()["data"]]
        assert fid in [f["id"] for f in a.req("GET", "/v1/files").json()["data"]]
        # Nor can another tenant copy it into a container of its own.
        r = b.req("POST", "/v1/containers", json={"name": "thief", "file_ids": [fid]})
        assert r.status_code == 404, r.text
        assert a.req("GET", f"/v1/files/{fid}/content").content == b"team a's data"
    finally:
        assert a.req("DELETE", f"/v1/files/{fid}").status_code == 200


MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


def mcp(t, msg, sid=None):
    h = dict(MCP_HEADERS, **({"Mcp-Session-Id": sid} if sid else {}))
    return t.req("POST", "/mcp", json=msg, headers=h)


def test_mcp_session_ids_are_per_tenant(daemon, two):
    a, b = two
    r = mcp(a, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "tenants-test", "version": "1"}}})
    assert r.status_code == 200, r.text
    sid = r.headers["Mcp-Session-Id"]
    ghost = "mcp-" + "0" * 32
    try:
        ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        theirs, unknown = mcp(b, ping, sid), mcp(b, ping, ghost)
        assert theirs.status_code == unknown.status_code == 404, theirs.text
        assert theirs.json() == unknown.json()
        theirs = b.req("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})
        unknown = b.req("DELETE", "/mcp", headers={"Mcp-Session-Id": ghost})
        assert theirs.status_code == unknown.status_code == 404, theirs.text
        assert theirs.json() == unknown.json()
        assert mcp(a, ping, sid).status_code == 200
    finally:
        a.req("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})


def test_recent_executions_and_live_usage_are_per_tenant(daemon, two):
    a, b = two
    r = a.create()
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    r = a.req("POST", f"/v1/sessions/{sid}/execute", json={"code": "print('secret-of-a')"})
    assert r.status_code == 200, r.text
    mine = a.req("GET", "/v1/executions").json()
    mine = mine["executions"]
    assert sid in [e["session_id"] for e in mine]
    theirs = b.req("GET", "/v1/executions")
    assert theirs.status_code == 200 and "secret-of-a" not in theirs.text and sid not in \
        theirs.text, theirs.text
    theirs = b.req("GET", f"/v1/executions?session_id={sid}")
    assert sid not in theirs.text and "secret-of-a" not in theirs.text
    live = b.req("GET", "/v1/sessions?usage=live")
    assert live.status_code == 200 and sid not in live.text, live.text
    assert sid in a.req("GET", "/v1/sessions?usage=live").text


def test_quota_and_profile_refusals_in_the_openai_and_e2b_shapes(daemon):
    t = Tenant(daemon, "quota-o", "--max-sessions", "1", "--profiles", "minimal")
    h = daemon.client()
    e2b = {"X-API-KEY": t.key}
    try:
        # A profile outside the list: 403, in each API's own error shape.
        r = t.req("POST", "/v1/containers", json={"name": "c"})
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "permission_denied"
        assert "may not use profile" in r.json()["error"]["message"]
        r = h.post(daemon.url + "/e2b/api/v2/sandboxes", json={}, headers=e2b, timeout=60)
        assert r.status_code == 403, r.text
        assert r.json()["code"] == 403 and "may not use profile" in r.json()["message"]
        # The quota: 429.
        tenants(daemon.state_dir, "set", "quota-o", "--profiles", "all")
        assert t.create().status_code == 201
        r = t.req("POST", "/v1/containers", json={"name": "c"})
        assert r.status_code == 429, r.text
        assert r.json()["error"]["type"] == "insufficient_quota"
        assert "max_sessions" in r.json()["error"]["message"]
        r = h.post(daemon.url + "/e2b/api/v2/sandboxes", json={}, headers=e2b, timeout=60)
        assert r.status_code == 429, r.text
        assert r.json()["code"] == 429 and "max_sessions" in r.json()["message"]
    finally:
        t.close()


def until_request(rid):
    """For Daemon.audit_lines(): until the line of the request with id rid is written, and with
    it every line of earlier calls (lines are written in the order of their events)."""
    return lambda lines: any(x["request_id"] == rid for x in lines)


def test_audit_lines_carry_quota_refusals_and_e2b_auth_failures(daemon):
    t = Tenant(daemon, "quota-u", "--max-sessions", "1")
    try:
        assert t.create().status_code == 201
        assert t.create().status_code == 429
        r = daemon.client().post(daemon.url + "/e2b/api/v2/sandboxes", json={},
                                 headers={"X-API-KEY": "alk_" + "0" * 64}, timeout=60)
        assert r.status_code == 401, r.text
        lines = daemon.audit_lines(until=until_request(r.headers["X-Request-Id"]))
        q = [x for x in lines if x["event"] == "quota.refusal" and x["tenant"] == "quota-u"]
        assert q and q[-1]["quota"] == "max_sessions" and q[-1]["limit"] == 1, lines[-5:]
        f = [x for x in lines if x["event"] == "auth.failure" and x["route"].startswith("/e2b")]
        assert f and f[-1]["tenant"] is None and f[-1]["reason"] == "invalid", lines[-5:]
        # The session's own lines name its tenant, on the E2B surface too.
        r = daemon.client().post(daemon.url + "/e2b/api/v2/sandboxes", json={},
                                 headers={"X-API-KEY": t.key}, timeout=60)
        assert r.status_code == 429, r.text
        lines = daemon.audit_lines(until=until_request(r.headers["X-Request-Id"]))
        assert lines[-1]["tenant"] == "quota-u", lines[-3:]
    finally:
        t.close()
