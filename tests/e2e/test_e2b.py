"""The E2B surface (docs/E2B.md) over raw HTTP: what the SDK never sends wrong but a client or an
attacker may. A wrong or missing X-API-KEY, a wrong, missing or other sandbox's access token,
an unknown sandbox, a malformed id, and what airlock does not offer, each answered in E2B's own
error shape ({"code", "message"}, or Connect's for the RPC services) and never with the data."""
import pytest

from airlock_daemon import daemon_fixture

daemon = daemon_fixture(pytest)

UNKNOWN = "0123456789abcdef01234567"


@pytest.fixture(scope="module")
def http(daemon):
    return daemon.client()  # no bearer token: E2B's routes have their own auth


@pytest.fixture(scope="module")
def sandboxes(daemon, http):
    """Two sandboxes made through the E2B API, killed at the end."""
    made = []
    for _ in range(2):
        r = http.post(daemon.url + "/e2b/api/v2/sandboxes", json={"templateID": "base"},
                      headers={"X-API-KEY": daemon.token}, timeout=60)
        assert r.status_code == 201, r.text
        made.append(r.json())
    yield made
    for sb in made:
        http.delete(daemon.url + "/e2b/api/sandboxes/" + sb["sandboxID"],
                    headers={"X-API-KEY": daemon.token}, timeout=60)


def sandbox_headers(sb, token=None):
    h = {"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": "49983"}
    if token is not None:
        h["X-Access-Token"] = token
    return h


@pytest.mark.parametrize("key", [None, "", "wrong", "Bearer x"])
def test_control_plane_refuses_a_bad_api_key(daemon, http, key):
    headers = {} if key is None else {"X-API-KEY": key}
    r = http.post(daemon.url + "/e2b/api/v2/sandboxes", json={}, headers=headers)
    assert r.status_code == 401
    assert r.json()["code"] == 401 and "X-API-KEY" in r.json()["message"]
    # The airlock bearer token alone is not E2B's key either.
    r = http.get(daemon.url + "/e2b/api/v2/sandboxes",
                 headers={"Authorization": "Bearer " + daemon.token})
    assert r.status_code == 401


def test_create_answers_an_access_token_and_ids(sandboxes):
    a, b = sandboxes
    assert len(a["sandboxID"]) == 24 and a["sandboxID"] != b["sandboxID"]
    assert len(a["envdAccessToken"]) == 48 and a["envdAccessToken"] != b["envdAccessToken"]


@pytest.mark.parametrize("which", ["missing", "wrong", "other sandbox's"])
def test_sandbox_routes_refuse_a_bad_access_token(daemon, http, sandboxes, which):
    a, b = sandboxes
    token = {"missing": None, "wrong": "0" * 48,
             "other sandbox's": b["envdAccessToken"]}[which]
    h = sandbox_headers(a, token)
    for method, path, kw in [("GET", "/files?path=/home/user/x", {}),
                             ("POST", "/files?path=/home/user/x", {"data": b"x"}),
                             ("POST", "/execute", {"json": {"code": "print(1)"}}),
                             ("GET", "/contexts", {}),
                             ("GET", "/health", {})]:
        r = http.request(method, daemon.url + "/e2b/sandbox" + path, headers=h, **kw)
        assert r.status_code == 401, (path, r.text)
        assert r.json()["code"] == 401
    r = http.post(daemon.url + "/e2b/sandbox/filesystem.Filesystem/ListDir", json={"path": "/"},
                  headers=h)
    assert r.status_code == 401 and r.json()["code"] == "unauthenticated"
    # The traffic token header is checked the same way.
    r = http.get(daemon.url + "/e2b/sandbox/contexts",
                 headers={**sandbox_headers(a), "E2B-Traffic-Access-Token": "0" * 48})
    assert r.status_code == 401


def test_unknown_and_malformed_sandboxes(daemon, http, sandboxes):
    key = {"X-API-KEY": daemon.token}
    for sid in (UNKNOWN, "not-an-id", "..%2F..%2Fv1%2Fsessions"):
        r = http.get(daemon.url + "/e2b/api/sandboxes/" + sid, headers=key)
        assert r.status_code == 404 and r.json()["code"] == 404, r.text
    r = http.get(daemon.url + "/e2b/sandbox/health",
                 headers={"E2b-Sandbox-Id": UNKNOWN, "X-Access-Token": "0" * 48})
    assert r.status_code == 502  # the SDK's isRunning() reads 502 as "not running"
    r = http.get(daemon.url + "/e2b/sandbox/contexts", headers={"X-Access-Token": "0" * 48})
    assert r.status_code == 400 and "E2b-Sandbox-Id" in r.json()["message"]


def test_what_is_not_offered_says_so(daemon, http, sandboxes):
    a = sandboxes[0]
    key = {"X-API-KEY": daemon.token}
    r = http.get(daemon.url + "/e2b/api/sandboxes/%s/metrics" % a["sandboxID"], headers=key)
    assert r.status_code == 501 and "airlock does not offer" in r.json()["message"]
    r = http.post(daemon.url + "/e2b/api/templates", json={}, headers=key)
    assert r.status_code == 501
    h = sandbox_headers(a, a["envdAccessToken"])
    r = http.post(daemon.url + "/e2b/sandbox/filesystem.Filesystem/WatchDir", json={}, headers=h)
    assert r.status_code == 501 and r.json()["code"] == "unimplemented"
    r = http.post(daemon.url + "/e2b/sandbox/process.Process/SendInput", json={}, headers=h)
    assert r.json()["code"] == "unimplemented"
    # A streaming call's error is a 200 whose end-of-stream envelope (flags 2) carries it.
    r = http.post(daemon.url + "/e2b/sandbox/process.Process/Connect", data=b"\0\0\0\0\x02{}",
                  headers={**h, "Content-Type": "application/connect+json"})
    assert r.status_code == 200 and r.content[0] == 2 and b"unimplemented" in r.content
    r = http.get(daemon.url + "/e2b/sandbox/anything", headers=h)
    assert r.status_code == 501 and "airlock does not offer" in r.json()["message"]


def test_files_outside_home_are_refused(daemon, http, sandboxes):
    a = sandboxes[0]
    h = sandbox_headers(a, a["envdAccessToken"])
    for path in ("/etc/passwd", "/home/user/../../etc/passwd", "/proc/self/environ"):
        r = http.get(daemon.url + "/e2b/sandbox/files", params={"path": path}, headers=h)
        assert r.status_code == 400, r.text
        assert "root:" not in r.text


def test_the_servers_own_errors_take_e2bs_shape(daemon, http, sandboxes):
    """413, 401 and routing errors that the server answers before any E2B handler runs are
    still E2B's {"code": status, "message"}, or Connect's on the RPC paths; elsewhere they are
    airlock's {"error"}."""
    sb = sandboxes[0]
    big = b"{" + b" " * (16 << 20) + b"}"  # past API_JSON_BODY_MAX
    r = http.post(daemon.url + "/e2b/sandbox/execute", data=big,
                  headers=sandbox_headers(sb, sb["envdAccessToken"]))
    assert r.status_code == 413, r.text
    assert r.json()["code"] == 413 and "larger than the limit" in r.json()["message"], r.text
    r = http.post(daemon.url + "/e2b/sandbox/filesystem.Filesystem/Stat", data=big,
                  headers={**sandbox_headers(sb, sb["envdAccessToken"]),
                           "Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.json() == {"code": "resource_exhausted", "message": r.json()["message"]}, r.text
    # A method no route has needs the bearer token: 401, in E2B's shape under /e2b only.
    r = http.request("OPTIONS", daemon.url + "/e2b/api/v2/sandboxes")
    assert r.status_code == 401 and r.json()["code"] == 401, r.text
    assert "bearer token" in r.json()["message"], r.text
    r = http.request("OPTIONS", daemon.url + "/v1/sessions")
    assert r.status_code == 401 and "error" in r.json(), r.text
