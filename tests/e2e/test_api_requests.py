"""The daemon's front door (docs/API.md "Authentication", "Host and Origin checks", "Errors",
"Limits"): bearer tokens, DNS-rebinding defences, and every malformed request we could think of,
as data tables. Each bad request must get its documented 4xx with a JSON error naming the
field, and none may run code, create a session or hurt the daemon."""
import json

import pytest
import requests

from airlock_daemon import daemon_fixture

daemon = daemon_fixture(pytest)


@pytest.fixture(scope="module")
def sid(daemon):
    """One session for the whole module (requests against it are refused before they run)."""
    s = daemon.create_session()
    yield s
    daemon.delete_session(s)


@pytest.fixture(autouse=True)
def daemon_still_healthy(daemon):
    yield
    assert daemon.alive(), "the daemon died"
    r = requests.get(daemon.url + "/healthz", timeout=10)
    assert r.status_code == 200, r.text


def json_error(r):
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    body = r.json()
    assert isinstance(body.get("error"), str) and body["error"], body
    assert r.headers.get("X-Request-Id"), "every answer carries X-Request-Id"
    return body


# ------------------------------------------------------------------------------------------
# Authentication
# ------------------------------------------------------------------------------------------

def _auth_cases():
    # (id, header value as a function of the token or None for no header, expected status)
    return [
        ("no-header", None, 401),
        ("wrong-token", lambda t: "Bearer " + "0" * 64, 401),
        ("empty-bearer", lambda t: "Bearer ", 401),
        ("bearer-only", lambda t: "Bearer", 401),
        ("token-prefix", lambda t: "Bearer " + t[:-1], 401),
        ("token-extended", lambda t: "Bearer " + t + "0", 401),
        ("token-uppercased", lambda t: "Bearer " + t.upper(), 401),
        ("basic-scheme", lambda t: "Basic " + t, 401),
        ("token-scheme", lambda t: "Token " + t, 401),
        ("no-scheme", lambda t: t, 401),
        ("bearer-lowercase", lambda t: "bearer " + t, 200),
        ("bearer-uppercase", lambda t: "BEARER " + t, 200),
        ("right", lambda t: "Bearer " + t, 200),
    ]


@pytest.mark.parametrize("case", _auth_cases(), ids=[c[0] for c in _auth_cases()])
def test_bearer_token(daemon, case):
    _, header, status = case
    headers = {} if header is None else {"Authorization": header(daemon.token)}
    r = requests.get(daemon.url + "/v1/profiles", headers=headers, timeout=10)
    assert r.status_code == status, r.text
    if status == 401:
        assert json_error(r)["error"] == "missing or invalid bearer token"
        assert r.headers.get("WWW-Authenticate") == 'Bearer realm="airlock"'


@pytest.mark.parametrize("query", ["token", "access_token", "auth"])
def test_token_in_the_query_string_is_not_accepted(daemon, query):
    r = requests.get(f"{daemon.url}/v1/profiles?{query}={daemon.token}", timeout=10)
    assert r.status_code == 401


AUTH_ENDPOINTS = [
    ("GET", "/v1/profiles", None),
    ("POST", "/execute", b'{"code": "open(\'/work/pwned\', \'w\')"}'),
    ("POST", "/v1/sessions", b"{}"),
    ("GET", "/v1/sessions", None),
    ("GET", "/v1/sessions/{sid}", None),
    ("DELETE", "/v1/sessions/{sid}", None),
    ("POST", "/v1/sessions/{sid}/execute", b'{"code": "open(\'/work/pwned\', \'w\')"}'),
    ("POST", "/v1/sessions/{sid}/interrupt", None),
    ("GET", "/v1/sessions/{sid}/files", None),
    ("GET", "/v1/sessions/{sid}/files/x", None),
    ("PUT", "/v1/sessions/{sid}/files/pwned", b"pwned"),
    ("DELETE", "/v1/sessions/{sid}/files/x", None),
]


@pytest.mark.parametrize("method,path,body", AUTH_ENDPOINTS,
                         ids=[f"{m} {p}" for m, p, _ in AUTH_ENDPOINTS])
def test_every_endpoint_needs_the_token(daemon, sid, method, path, body):
    before = len(daemon.get("/v1/sessions").json()["sessions"])
    for headers in ({}, {"Authorization": "Bearer nope"}):
        r = requests.request(method, daemon.url + path.format(sid=sid), data=body,
                             headers=headers, timeout=30)
        assert r.status_code == 401, r.text
    # nothing happened: the session lives, no file, no new session
    assert daemon.get(f"/v1/sessions/{sid}").status_code == 200
    assert daemon.get(f"/v1/sessions/{sid}/files/pwned").status_code == 404
    assert len(daemon.get("/v1/sessions").json()["sessions"]) == before


def test_healthz_needs_no_token(daemon):
    r = requests.get(daemon.url + "/healthz", timeout=10)
    assert r.status_code == 200 and r.json()["status"] == "ok"
    r = requests.get(daemon.url + "/healthz", headers={"Authorization": "Bearer wrong"},
                     timeout=10)
    assert r.status_code == 200


# ------------------------------------------------------------------------------------------
# Host and Origin (header values only: every request still goes to 127.0.0.1)
# ------------------------------------------------------------------------------------------

HOSTS = [
    ("listen-address", "127.0.0.1:{port}", True),
    ("localhost", "localhost:{port}", True),
    ("localhost-uppercase", "LOCALHOST:{port}", True),
    ("ipv6-loopback", "[::1]:{port}", True),
    ("evil", "evil.example", False),
    ("evil-with-port", "evil.example:{port}", False),
    ("localhost-without-port", "localhost", False),
    ("loopback-without-port", "127.0.0.1", False),
    ("other-port", "127.0.0.1:1", False),
    ("rebinding-suffix", "localhost.evil.example:{port}", False),
    ("rebinding-prefix", "127.0.0.1.evil.example:{port}", False),
    ("userinfo", "localhost:{port}@evil.example", False),
    ("empty", "", False),
]


@pytest.mark.parametrize("path,auth", [("/v1/profiles", True), ("/healthz", False)])
@pytest.mark.parametrize("case", HOSTS, ids=[h[0] for h in HOSTS])
def test_host_header(daemon, case, path, auth):
    _, host, allowed = case
    host = host.format(port=daemon.port)
    status, headers, body = daemon.raw("GET", path, headers={"Host": host}, host=False,
                                       auth=auth)
    if allowed:
        assert status == 200, body
    else:
        assert status == 403, (host, status, body)
        err = json.loads(body)
        assert err["header"] == "Host" and err["error"], err


@pytest.mark.parametrize("version", ["HTTP/1.0", "HTTP/1.1"])
def test_missing_host_is_refused(daemon, version):
    import socket
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
        s.sendall(f"GET /healthz {version}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1])
    # HTTP/1.1 without Host is a protocol error (400) before our check can run; HTTP/1.0 is
    # legal without it and must meet the Host check.
    assert status == 403 or (version == "HTTP/1.1" and status == 400), data[:500]


ORIGINS = [
    ("same-http", "http://127.0.0.1:{port}", True),
    ("same-localhost", "http://localhost:{port}", True),
    ("same-https", "https://localhost:{port}", True),
    ("evil", "http://evil.example", False),
    ("evil-https", "https://evil.example:{port}", False),
    ("null", "null", False),
    ("rebinding-suffix", "http://localhost:{port}.evil.example", False),
    ("no-port", "http://localhost", False),
    ("other-scheme", "ftp://localhost:{port}", False),
    ("file", "file://", False),
    ("empty", "", False),
]


@pytest.mark.parametrize("case", ORIGINS, ids=[o[0] for o in ORIGINS])
def test_origin_header(daemon, case):
    _, origin, allowed = case
    origin = origin.format(port=daemon.port)
    status, headers, body = daemon.raw("GET", "/v1/profiles", headers={"Origin": origin})
    if allowed:
        assert status == 200, body
    else:
        assert status == 403, (origin, status, body)
        assert json.loads(body)["header"] == "Origin"
    assert not any(h.startswith("access-control-") for h in headers), headers


def test_host_check_runs_before_authentication(daemon):
    r = requests.post(daemon.url + "/v1/sessions", headers={"Host": "evil.example"},
                      timeout=10)
    assert r.status_code == 403 and json_error(r)["header"] == "Host"
    r = requests.post(daemon.url + "/execute", headers={"Origin": "http://evil.example"},
                      data=b'{"code": "1"}', timeout=10)
    assert r.status_code == 403 and json_error(r)["header"] == "Origin"


def test_cors_preflight_gets_no_cors_headers(daemon):
    r = requests.options(daemon.url + "/execute", timeout=10, headers={
        "Origin": f"http://localhost:{daemon.port}", "Access-Control-Request-Method": "POST",
        "Authorization": f"Bearer {daemon.token}"})
    assert r.status_code >= 400, r.status_code
    assert not any(k.lower().startswith("access-control-") for k in r.headers), r.headers


# ------------------------------------------------------------------------------------------
# Malformed requests, as a table
# ------------------------------------------------------------------------------------------

# POST /v1/sessions/{sid}/execute, POST /execute, POST /v1/sessions
E, O, C = "execute", "one-shot", "create"


def _j(obj):
    return json.dumps(obj).encode()


BAD = [
    # (endpoint, body bytes, field named in the answer; "body" = the body as a whole)
    (E, b"{", "body"),
    (E, b"[]", "body"),
    (E, b'[{"code": "1"}]', "body"),
    (E, b'"code"', "body"),
    (E, b"null", "body"),
    (E, b"42", "body"),
    (E, b"", ("body", "code")),
    (E, b"   ", "body"),
    (E, b'{"code": "1"} trailing', "body"),
    (E, b'{"code": "1"}{"code": "2"}', "body"),
    (E, b'{"code": "1", "code": "2"}', ("body", "code")),
    (E, b'{"code": "1\\u0000"}', ("body", "code")),
    (E, b'{"code": "\xff\xfe"}', "body"),
    (E, b'{"code": "1", "timeout_s": NaN}', ("body", "timeout_s")),
    (E, b'{"code": "1", "timeout_s": Infinity}', ("body", "timeout_s")),
    (E, b'{"code": "1", "timeout_s": 1e999}', ("body", "timeout_s")),
    (E, b"{'code': '1'}", "body"),
    (E, _j({}), "code"),
    (E, _j({"code": ""}), "code"),
    (E, _j({"code": 1}), "code"),
    (E, _j({"code": None}), "code"),
    (E, _j({"code": ["print(1)"]}), "code"),
    (E, _j({"code": {"src": "1"}}), "code"),
    (E, _j({"code": True}), "code"),
    (E, _j({"code": "1", "language": 1}), "language"),
    (E, _j({"code": "1", "language": "ruby"}), "language"),
    (E, _j({"code": "1", "language": "Python"}), "language"),
    (E, _j({"code": "1", "language": ""}), "language"),
    (E, _j({"code": "1", "language": ["python"]}), "language"),
    (E, _j({"code": "1", "timeout_s": 0}), "timeout_s"),
    (E, _j({"code": "1", "timeout_s": -1}), "timeout_s"),
    (E, _j({"code": "1", "timeout_s": 3600.5}), "timeout_s"),
    (E, _j({"code": "1", "timeout_s": 10 ** 12}), "timeout_s"),
    (E, _j({"code": "1", "timeout_s": "5"}), "timeout_s"),
    (E, _j({"code": "1", "timeout_s": True}), "timeout_s"),
    (E, _j({"code": "1", "timeout_s": [5]}), "timeout_s"),
    (E, _j({"code": "1", "timeout": 0}), "timeout"),
    (E, _j({"code": "1", "timeout": -0.5}), "timeout"),
    (E, _j({"code": "1", "timeout": "1s"}), "timeout"),
    (E, _j({"code": "1", "timeout": 5, "timeout_s": 5}), ("timeout", "timeout_s")),
    (E, _j({"code": "1", "foo": 1}), "foo"),
    (E, _j({"code": "1", "Code": "2"}), "Code"),
    (E, _j({"code": "1", "profile": "default"}), "profile"),
    (E, _j({"code": "1", "env": {"LD_PRELOAD": "x"}}), "env"),
    (E, _j({"code": "1", "env": []}), "env"),
    (E, _j({"code": "1", "stdin": None}), "stdin"),
    (E, _j({"code": "1", "cwd": "../x"}), "cwd"),
    (E, _j({"code": "1", "files": {}}), "files"),
    (E, _j({"code": "1", "idle_timeout_s": 5}), "idle_timeout_s"),

    (O, b"{", "body"),
    (O, b"[]", "body"),
    (O, b"", ("body", "code")),
    (O, _j({"code": ""}), "code"),
    (O, _j({"code": 5}), "code"),
    (O, _j({"language": "python"}), "code"),
    (O, _j({"code": "1", "language": "perl"}), "language"),
    (O, _j({"code": "1", "profile": "nope"}), "profile"),
    (O, _j({"code": "1", "profile": 1}), "profile"),
    (O, _j({"code": "1", "profile": ""}), "profile"),
    (O, _j({"code": "1", "profile": "../profiles/minimal"}), "profile"),
    (O, _j({"code": "1", "profile": "/etc/passwd"}), "profile"),
    (O, _j({"code": "1", "profile": "profiles/default.json"}), "profile"),
    (O, _j({"code": "1", "profile": "minimal\u0000"}), ("body", "profile")),
    (O, _j({"code": "echo hi", "language": "bash", "profile": "minimal"}), "language"),
    (O, _j({"code": "1", "timeout": 0}), "timeout"),
    (O, _j({"code": "1", "timeout": -5}), "timeout"),
    (O, _j({"code": "1", "timeout": 3601}), "timeout"),
    (O, _j({"code": "1", "timeout": "10"}), "timeout"),
    (O, _j({"code": "1", "timeout": None}), "timeout"),
    (O, _j({"code": "1", "timeout_s": 0}), "timeout_s"),
    (O, _j({"code": "1", "timeout": 1, "timeout_s": 1}), ("timeout", "timeout_s")),
    (O, _j({"code": "1", "idle_timeout_s": 5}), "idle_timeout_s"),
    (O, _j({"code": "1", "env": {"A": 1}}), "env"),
    (O, _j({"code": "1", "files": {"../a": "aGk="}}), "files"),
    (O, _j({"code": "1", "files": {"a": "%%%"}}), "files"),
    (O, _j({"code": "1", "session": "s-0"}), "session"),

    (C, b"{", "body"),
    (C, b"[]", "body"),
    (C, b'"default"', "body"),
    (C, _j({"profile": "nope"}), "profile"),
    (C, _j({"profile": 5}), "profile"),
    (C, _j({"profile": ""}), "profile"),
    (C, _j({"profile": "../minimal"}), "profile"),
    (C, _j({"profile": "/work/main/profiles/minimal.json"}), "profile"),
    (C, _j({"idle_timeout_s": 0}), "idle_timeout_s"),
    (C, _j({"idle_timeout_s": -1}), "idle_timeout_s"),
    (C, _j({"idle_timeout_s": 86401}), "idle_timeout_s"),
    (C, _j({"idle_timeout_s": "60"}), "idle_timeout_s"),
    (C, _j({"idle_timeout_s": True}), "idle_timeout_s"),
    (C, _j({"idle_timeout_s": None}), "idle_timeout_s"),
    (C, _j({"env": []}), "env"),
    (C, _j({"env": "A=1"}), "env"),
    (C, _j({"env": {"A": 1}}), "env"),
    (C, _j({"env": {"A": None}}), "env"),
    (C, _j({"env": {"A": ["x"]}}), "env"),
    (C, _j({"env": {"1A": "x"}}), "env"),
    (C, _j({"env": {"A-B": "x"}}), "env"),
    (C, _j({"env": {"A=B": "x"}}), "env"),
    (C, _j({"env": {"": "x"}}), "env"),
    (C, _j({"env": {"A B": "x"}}), "env"),
    (C, _j({"env": {"A": "x\u0000y"}}), ("body", "env")),
    (C, _j({"env": {"X" * 257: "x"}}), "env"),
    (C, _j({"env": {"A": "x" * (64 * 1024 + 1)}}), "env"),
    (C, _j({"env": {f"V{i}": "x" for i in range(257)}}), "env"),
    (C, _j({"env": {"LD_PRELOAD": "/work/evil.so"}}), "env"),
    (C, _j({"env": {"LD_LIBRARY_PATH": "/work"}}), "env"),
    (C, _j({"env": {"LD_AUDIT": "/work/evil.so"}}), "env"),
    (C, _j({"foo": 1}), "foo"),
    (C, _j({"code": "1"}), "code"),
]


def _path(endpoint, sid):
    return {E: f"/v1/sessions/{sid}/execute", O: "/execute", C: "/v1/sessions"}[endpoint]


def _bad_id(case):
    endpoint, body, _ = case
    text = body.decode("utf-8", "backslashreplace")
    return f"{endpoint}:{text[:60]}" if len(text) <= 60 else f"{endpoint}:{text[:50]}..{len(text)}"


@pytest.mark.parametrize("case", BAD, ids=[_bad_id(c) for c in BAD])
def test_malformed_request_is_400_naming_the_field(daemon, sid, case):
    endpoint, body, field = case
    before = {s["id"] for s in daemon.get("/v1/sessions").json()["sessions"]}
    r = daemon.post(_path(endpoint, sid), data=body,
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 400, daemon.why(r)
    err = json_error(r)
    fields = field if isinstance(field, tuple) else (field,)
    assert err.get("field") in fields, f"field {err.get('field')!r}, expected {fields}: {err}"
    after = {s["id"] for s in daemon.get("/v1/sessions").json()["sessions"]}
    assert after == before, "a refused request created or ended a session"


GOOD = [
    (E, _j({"code": "1", "timeout_s": 3600}), 200),
    (E, _j({"code": "1", "timeout": 0.25}), 200),
    (E, _j({"code": "1", "language": "python"}), 200),
    (O, _j({"code": "1", "timeout": 3600}), 200),
    (C, b"", 201),
    (C, _j({"idle_timeout_s": 86400}), 201),
    (C, _j({"idle_timeout_s": 0.5}), 201),
    (C, _j({"env": {"X" * 256: "x"}}), 201),
    (C, _j({"env": {"A": "x" * (64 * 1024)}}), 201),
    (C, _j({"env": {f"V{i}": "x" for i in range(256)}}), 201),
    (C, _j({"env": {"_under": "", "PATH2": "ok"}}), 201),
]


@pytest.mark.parametrize("case", GOOD, ids=[_bad_id(c) for c in GOOD])
def test_boundary_values_are_accepted(daemon, sid, case):
    endpoint, body, status = case
    r = daemon.post(_path(endpoint, sid), data=body)
    try:
        assert r.status_code == status, daemon.why(r)
    finally:
        if endpoint == C and r.status_code == 201:
            daemon.delete_session(r.json()["id"])


def test_content_type_is_ignored(daemon, sid):
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        r = daemon.post(f"/v1/sessions/{sid}/execute", data=_j({"code": "6 * 7"}),
                        headers={"Content-Type": ctype})
        assert r.status_code == 200 and r.json()["result"] == "42", daemon.why(r)


# ------------------------------------------------------------------------------------------
# Limits: bodies over 16 MiB
# ------------------------------------------------------------------------------------------

def test_huge_body_with_content_length_is_413(daemon, sid):
    body = b'{"code": "' + b"#" * (17 << 20) + b'"}'
    for path in (f"/v1/sessions/{sid}/execute", "/execute", "/v1/sessions"):
        try:
            r = daemon.post(path, data=body)
        except requests.ConnectionError:
            continue    # refused as soon as Content-Length passed the limit, body unread
        assert r.status_code == 413, daemon.why(r)
        json_error(r)


def test_huge_chunked_body_is_413(daemon, sid):
    def gen():
        yield b'{"code": "'
        for _ in range(20):
            yield b"#" * (1 << 20)
        yield b'"}'
    try:
        r = daemon.post(f"/v1/sessions/{sid}/execute", data=gen())
    except requests.ConnectionError:
        return      # the daemon closed the connection once the bytes passed the limit
    assert r.status_code == 413, daemon.why(r)


def test_header_content_length_over_the_limit_without_a_body(daemon, sid):
    status, _, body = daemon.raw("POST", f"/v1/sessions/{sid}/execute",
                                 headers={"Content-Length": str(1 << 40)}, body=None,
                                 timeout=20)
    assert status == 413, body


# ------------------------------------------------------------------------------------------
# Routes, methods, ids and URL encoding
# ------------------------------------------------------------------------------------------

NOT_FOUND = ["/", "/v1", "/v1/", "/v2/sessions", "/v1/nope", "/execute/extra",
             "/v1/sessions/s-000000000000000000000000", "/v1/sessions/xyz",
             "/v1/sessions/{sid}/nope", "/v1/sessions/{sid}/execute/more",
             "/v1/sessions/s-000000000000000000000000/files/a",
             "/V1/SESSIONS", "/healthz/x"]


@pytest.mark.parametrize("path", NOT_FOUND)
def test_unknown_route_or_session_is_404(daemon, sid, path):
    status, _, body = daemon.raw("GET", path.format(sid=sid))
    assert status == 404, body
    assert json.loads(body)["error"]


def test_unknown_session_on_every_session_route(daemon):
    ghost = "s-" + "0" * 24
    for method, path, data in (("GET", "", None), ("DELETE", "", None),
                               ("POST", "/execute", b'{"code": "1"}'),
                               ("POST", "/interrupt", None), ("GET", "/files", None),
                               ("PUT", "/files/a", b"x"), ("DELETE", "/files/a", None)):
        r = daemon.req(method, f"/v1/sessions/{ghost}{path}", data=data)
        assert r.status_code == 404, (method, path, r.text)
        assert ghost in json_error(r)["error"]
    r = daemon.post(f"/v1/sessions/{ghost}/execute", data=b'{"code": "1"}',
                    headers={"Accept": "application/x-ndjson"})
    assert r.status_code == 404 and r.headers["Content-Type"].startswith("application/json")


WRONG_METHOD = [
    ("POST", "/healthz"), ("DELETE", "/healthz"), ("PUT", "/v1/profiles"),
    ("GET", "/execute"), ("DELETE", "/execute"), ("PUT", "/v1/sessions"),
    ("DELETE", "/v1/sessions"), ("PATCH", "/v1/sessions"), ("POST", "/v1/sessions/{sid}"),
    ("PUT", "/v1/sessions/{sid}"), ("GET", "/v1/sessions/{sid}/execute"),
    ("PUT", "/v1/sessions/{sid}/execute"), ("GET", "/v1/sessions/{sid}/interrupt"),
    ("POST", "/v1/sessions/{sid}/files/a"), ("PATCH", "/v1/sessions/{sid}/files/a"),
    ("TRACE", "/v1/sessions"), ("FOO", "/v1/sessions"),
]


@pytest.mark.parametrize("method,path", WRONG_METHOD, ids=[f"{m} {p}" for m, p in WRONG_METHOD])
def test_wrong_method_is_405_with_allow(daemon, sid, method, path):
    status, headers, body = daemon.raw(method, path.format(sid=sid), body=b"")
    assert status in (405, 501) if method in ("TRACE", "FOO") else status == 405, body
    if status == 405:
        assert headers.get("allow"), headers
        assert method not in [m.strip() for m in headers["allow"].split(",")]
        if path == "/v1/sessions/{sid}":
            assert "PATCH" in headers["allow"], headers
    assert daemon.get(f"/v1/sessions/{sid}").status_code == 200


def test_trailing_slash_and_head(daemon, sid):
    assert daemon.get("/v1/sessions/").status_code == 200
    assert daemon.get(f"/v1/sessions/{sid}/").status_code == 200
    r = daemon.req("HEAD", "/v1/sessions")
    assert r.status_code == 200 and r.content == b""
    r = daemon.req("HEAD", "/healthz")
    assert r.status_code == 200 and r.content == b""


BAD_ESCAPES = ["/v1/sessions/%zz", "/v1/sessions/%4", "/v1/sessions/%00",
               "/v1/sessions/s-%zz/execute", "/v1/%zz", "/v1/sessions/{sid}%00",
               "/v1/sessions/{sid}/files/%zz", "/v1/sessions/{sid}/files/a%00b"]


@pytest.mark.parametrize("path", BAD_ESCAPES)
def test_malformed_percent_escapes_are_400(daemon, sid, path):
    status, _, body = daemon.raw("GET", path.format(sid=sid))
    assert status == 400, f"{path}: {status} {body!r}"


def test_percent_encoded_session_id_is_decoded(daemon, sid):
    encoded = "".join(f"%{ord(c):02x}" for c in sid)
    status, _, body = daemon.raw("GET", f"/v1/sessions/{encoded}")
    assert status == 200 and json.loads(body)["id"] == sid, body


@pytest.mark.parametrize("target", ["*", "http://evil.example/v1/profiles",
                                    "/v1/profiles#frag", "/v1/../v1/profiles",
                                    "/v1/./profiles", "//v1/profiles"])
def test_odd_request_targets_do_not_crash(daemon, target):
    status, _, body = daemon.raw("GET", target)
    assert 200 <= status < 500, (target, status, body)


def test_garbage_on_the_socket_does_not_hurt(daemon):
    import socket
    for junk in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 100,
                 b"GET / HTTP/9.9\r\n\r\n", b"\r\n\r\n\r\n", b"A" * 70000 + b"\r\n\r\n",
                 b"GET /healthz HTTP/1.1\r\nHost: " + b"h" * 100000 + b"\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                s.recv(65536)
            except OSError:
                pass
