"""Daemons as nodes of one cluster (issue 26, docs/API.md "Cluster"): two or three `airlock
serve --node NAME --peers ...` on loopback ports. Ids carry their node; a request sent to the
wrong node is forwarded to the right one, streaming; forged ids naming no node of the cluster
are 404 without a connection anywhere; a peer that is down or hangs is a bounded 503 naming it;
lists ask every node and name those that did not answer; readiness and drain. A single daemon
without --node keeps its ids exactly as before."""
import re
import socket
import subprocess
import threading
import time

import pytest
import requests

from airlock_daemon import AIRLOCK, Daemon, free_port, start_daemon_or_fail

TOKEN = "cluster-test-token-0123456789abcdef"
HEX24 = "[0-9a-f]{24}"


def node_daemon(name, port, peers, extra=(), workdir=None, llm=None):
    args = ["--pool-size", "0", "--node", name, *extra]
    if llm:
        args += ["--llm-base-url", llm, "--llm-model", "fake-model"]
    if peers:
        args += ["--peers", peers]
    return Daemon(args=args, token_env=TOKEN, listen_port=port, workdir=workdir)


def start(d):
    import os
    if os.geteuid() != 0:
        pytest.skip("airlock's namespaces isolation needs root")
    try:
        d.start(wait_zygote=None)
    except Exception as e:  # noqa: BLE001 - said in the failure
        d.stop(timeout=10)
        pytest.fail(f"cannot start node: {e}", pytrace=False)
    return d


class Hang:
    """A loopback socket that accepts connections and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
                self.conns.append(c)
            except OSError:
                continue

    def close(self):
        self.stop = True
        self.t.join(2)
        for c in self.conns:
            c.close()
        self.sock.close()


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def cluster(fake):
    """n0 and n1, each naming the other, a node that is down ("down": a closed port) and one
    that hangs ("hang"). Stopped at the end whatever happened."""
    hang = Hang()
    p0, p1 = free_port(), free_port()
    down = closed_port()
    peers = (f"n0=127.0.0.1:{p0},n1=127.0.0.1:{p1},down=127.0.0.1:{down},"
             f"hang=127.0.0.1:{hang.port}")
    nodes = {}
    try:
        nodes["n0"] = start(node_daemon("n0", p0, peers, llm=fake.base_url))
        nodes["n1"] = start(node_daemon("n1", p1, peers, llm=fake.base_url))
        yield nodes
    finally:
        problems = []
        for name, d in nodes.items():
            _, p = d.stop()
            problems += [f"{name}: {x}" for x in p]
        hang.close()
    if problems:
        pytest.fail("a node did not stop cleanly:\n  " + "\n  ".join(problems), pytrace=False)


def auth():
    return {"Authorization": f"Bearer {TOKEN}"}


def test_ids_carry_the_node(cluster):
    n0 = cluster["n0"]
    r = n0.post("/v1/sessions", json={})
    assert r.status_code == 201, n0.why(r)
    s = r.json()
    assert re.fullmatch(rf"s-{HEX24}-n0", s["id"]), s["id"]
    assert s["node"] == "n0"
    got = n0.get(f"/v1/sessions/{s['id']}").json()
    assert got["node"] == "n0" and got["id"] == s["id"]
    listed = n0.get("/v1/sessions").json()
    assert any(x["id"] == s["id"] and x["node"] == "n0" for x in listed["sessions"]), listed

    r = n0.post(f"/v1/sessions/{s['id']}/execute", json={"code": "x = 41\nx + 1"})
    assert r.status_code == 200 and r.json()["result"] == "42", n0.why(r)

    # E2B: the sandboxID is the session id without "s-"
    r = n0.client().post(n0.url + "/e2b/api/v2/sandboxes", json={"templateID": "base"},
                         headers={"X-API-KEY": TOKEN}, timeout=60)
    assert r.status_code == 201, r.text
    sbx = r.json()["sandboxID"]
    assert re.fullmatch(rf"{HEX24}-n0", sbx), sbx
    r = n0.client().get(n0.url + "/e2b/api/sandboxes/" + sbx, headers={"X-API-KEY": TOKEN})
    assert r.status_code == 200 and r.json()["sandboxID"] == sbx, r.text
    n0.client().delete(n0.url + "/e2b/api/sandboxes/" + sbx, headers={"X-API-KEY": TOKEN})

    # OpenAI containers and files
    r = n0.post("/v1/containers", json={"name": "c"})
    assert r.status_code in (200, 201), n0.why(r)
    cid = r.json()["id"]
    assert re.fullmatch(rf"cntr_{HEX24}-n0", cid), cid
    r = n0.post(f"/v1/containers/{cid}/files", files={"file": ("a.txt", b"hello")})
    assert r.status_code in (200, 201), n0.why(r)
    assert re.fullmatch(rf"cfile_{HEX24}-n0", r.json()["id"]), r.json()
    r = n0.post("/v1/files", files={"file": ("b.txt", b"hi")}, data={"purpose": "user_data"})
    assert r.status_code in (200, 201), n0.why(r)
    fid = r.json()["id"]
    assert re.fullmatch(rf"file-{HEX24}-n0", fid), fid
    assert n0.get(f"/v1/files/{fid}/content").content == b"hi"
    n0.delete(f"/v1/files/{fid}")
    n0.delete(f"/v1/containers/{cid}")

    # MCP over HTTP: its session id
    r = n0.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "1"}}},
                headers={"Accept": "application/json, text/event-stream"})
    assert r.status_code == 200, n0.why(r)
    mid = r.headers["Mcp-Session-Id"]
    assert re.fullmatch(r"mcp-[0-9a-f]{32}-n0", mid), mid
    n0.delete("/mcp", headers={"Mcp-Session-Id": mid})
    n0.delete(f"/v1/sessions/{s['id']}")


def test_bad_node_names_are_refused_at_start(tmp_path):
    for args, words in ((["--node", "N1"], "not a node name"),
                        (["--node", "-a"], "not a node name"),
                        (["--node", "a" * 33], "not a node name"),
                        (["--node", "n1", "--peers", "n2=h:99999"], "'n2=h:99999'"),
                        (["--node", "n1", "--peers", "n[3-1]=h:1"], "'n[3-1]=h:1'"),
                        (["--peers", "n2=h:1"], "needs --node")):
        p = subprocess.run([AIRLOCK, "serve", "--state-dir", str(tmp_path / "s"), *args],
                           capture_output=True, text=True, timeout=30,
                           env={"PATH": "/usr/bin:/bin"})
        assert p.returncode != 0, (args, p.stderr)
        assert words in p.stderr, (args, p.stderr)


def test_single_daemon_ids_stay_as_before():
    d = start_daemon_or_fail(pytest, args=("--pool-size", "0"))
    try:
        r = d.post("/v1/sessions", json={})
        assert r.status_code == 201, d.why(r)
        assert re.fullmatch(rf"s-{HEX24}", r.json()["id"]), r.json()["id"]
        assert r.json()["node"] is None
        r = d.post("/v1/containers", json={"name": "c"})
        assert re.fullmatch(rf"cntr_{HEX24}", r.json()["id"]), r.json()
    finally:
        d.stop()


# ---- forwarding ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def on_n1(cluster):
    """A session of n1, deleted at the end."""
    n1 = cluster["n1"]
    sid = n1.create_session()
    assert sid.endswith("-n1")
    yield sid
    n1.delete(f"/v1/sessions/{sid}")


def test_a_request_for_another_node_is_forwarded(cluster, on_n1):
    n0 = cluster["n0"]
    r = n0.post(f"/v1/sessions/{on_n1}/execute", json={"code": "y = 6 * 7\ny"})
    assert r.status_code == 200, n0.why(r)
    assert r.json()["result"] == "42"
    # the variable lives on n1: asked there directly, and through n0 again
    assert cluster["n1"].post(f"/v1/sessions/{on_n1}/execute",
                              json={"code": "y"}).json()["result"] == "42"
    got = n0.get(f"/v1/sessions/{on_n1}")
    assert got.status_code == 200 and got.json()["node"] == "n1", got.text
    # a query string goes along
    r = n0.get(f"/v1/sessions/{on_n1}/files/", params={"recursive": "true"})
    assert r.status_code in (200, 400), r.text


def test_forwarded_stream_arrives_as_it_is_made(cluster, on_n1):
    n0 = cluster["n0"]
    code = "import time\nprint('first', flush=True)\ntime.sleep(3)\nprint('last')"
    t0 = time.monotonic()
    with n0.http.post(n0.url + f"/v1/sessions/{on_n1}/execute", json={"code": code},
                      headers={"Accept": "application/x-ndjson"}, stream=True,
                      timeout=60) as r:
        assert r.status_code == 200, r.text
        first = None
        events = []
        for line in r.iter_lines(chunk_size=1):
            if not line:
                continue
            ev = __import__("json").loads(line)
            events.append(ev)
            if first is None and "first" in str(ev):
                first = time.monotonic() - t0
    total = time.monotonic() - t0
    assert first is not None, events
    assert first < total - 2, (first, total, events)  # not held back until the end
    assert "last" in str(events)


def test_forwarded_files_upload_and_download(cluster, on_n1):
    n0 = cluster["n0"]
    data = bytes(range(256)) * 1000
    r = n0.put(f"/v1/sessions/{on_n1}/files/data.bin", data=data)
    assert r.status_code in (200, 201), n0.why(r)
    r = n0.get(f"/v1/sessions/{on_n1}/files/data.bin")
    assert r.status_code == 200 and r.content == data
    # and it is on n1
    assert cluster["n1"].get(f"/v1/sessions/{on_n1}/files/data.bin").content == data


def test_a_misrouted_body_past_the_forward_limit_is_413_naming_the_node(cluster):
    """A node holds a body it forwards in memory: past 64 MiB it answers 413 at the headers,
    before a byte of the body, and says where to send it (the front door sends uploads to the
    node they name). The same upload sent to its own node is taken as usual."""
    n0, n1 = cluster["n0"], cluster["n1"]
    cid = n1.post("/v1/containers", json={"name": "big"}).json()["id"]
    try:
        head = (f"POST /v1/containers/{cid}/files HTTP/1.1\r\nHost: {{host}}\r\n"
                f"Authorization: Bearer {TOKEN}\r\n"
                f"Content-Type: multipart/form-data; boundary=airlock-test-boundary\r\n"
                f"Content-Length: {65 * 1024 * 1024}\r\n\r\n")
        got = _raw_exchange(n0, head.format(host=n0.host).encode())
        assert got.startswith(b"HTTP/1.1 413"), got[:300]
        assert b"node n1" in got and b"front door" in got, got
        # its own node waits for the body (512 MiB is its upload limit): no answer yet
        got = _raw_exchange(n1, head.format(host=n1.host).encode())
        assert got == b"" or got.startswith(b"HTTP/1.1 100"), got[-400:]
    finally:
        n1.delete(f"/v1/containers/{cid}")


def test_a_forwarded_query_keeps_its_plus_signs(cluster, on_n1):
    # libmicrohttpd turns a query's '+' into ' ' before airlock sees it: the forwarded URL
    # must carry it again as '+' (a space in a URL is refused, and the peer decodes it itself)
    n0, n1 = cluster["n0"], cluster["n1"]
    r = n1.put(f"/v1/sessions/{on_n1}/files/a%20b/c.txt", data=b"c")
    assert r.status_code in (200, 201), n1.why(r)
    here = n1.get(f"/v1/sessions/{on_n1}/files", params={"dir": "a b"})
    assert here.status_code == 200, n1.why(here)
    assert "+" in here.url, here.url  # requests sends the space as '+'
    there = n0.get(f"/v1/sessions/{on_n1}/files", params={"dir": "a b"})
    assert there.status_code == 200, n0.why(there)
    assert there.json() == here.json()


def _raw_exchange(d, request):
    """Sends request (bytes) on one connection; returns all it gets until 3 s of silence."""
    s = socket.create_connection(("127.0.0.1", d.port), timeout=3)
    s.sendall(request)
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    finally:
        s.close()
    return got


def test_a_forwarded_head_has_no_body_and_the_next_answer_is_intact(cluster, on_n1):
    # a HEAD's answer ends with its headers: a chunked one with its "0" chunk would put bytes
    # on the connection that the next answer (a front door's reused connection) is read from
    n0, n1 = cluster["n0"], cluster["n1"]
    status, headers, _ = n1.raw("HEAD", f"/v1/sessions/{on_n1}")
    assert status == 200
    length = headers.get("content-length")
    got = _raw_exchange(n0, (f"HEAD /v1/sessions/{on_n1} HTTP/1.1\r\nHost: {n0.host}\r\n"
                             f"Authorization: Bearer {TOKEN}\r\n\r\n"
                             f"GET /healthz HTTP/1.1\r\nHost: {n0.host}\r\n\r\n").encode())
    head, _, rest = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), got
    assert b"transfer-encoding" not in head.lower(), head
    assert rest.startswith(b"HTTP/1.1 200"), got
    assert b'"status":"ok"' in rest, got
    if length is not None:
        assert f"Content-Length: {length}".encode() in head, (head, length)


def test_forwarded_openai_container_and_file(cluster):
    n0, n1 = cluster["n0"], cluster["n1"]
    cid = n1.post("/v1/containers", json={"name": "c"}).json()["id"]
    try:
        r = n0.post(f"/v1/containers/{cid}/files", files={"file": ("a.txt", b"hello")})
        assert r.status_code in (200, 201), n0.why(r)
        cf = r.json()["id"]
        assert cf.endswith("-n1")
        r = n0.get(f"/v1/containers/{cid}/files/{cf}/content")
        assert r.status_code == 200 and r.content == b"hello"
        fid = n1.post("/v1/files", files={"file": ("b.txt", b"hi")},
                      data={"purpose": "user_data"}).json()["id"]
        assert n0.get(f"/v1/files/{fid}/content").content == b"hi"
        assert n0.delete(f"/v1/files/{fid}").status_code == 200
    finally:
        n1.delete(f"/v1/containers/{cid}")


def test_forwarded_mcp_session(cluster):
    n0, n1 = cluster["n0"], cluster["n1"]
    h = {"Accept": "application/json, text/event-stream"}
    r = n1.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "1"}}},
                headers=h)
    mid = r.headers["Mcp-Session-Id"]
    assert mid.endswith("-n1")
    hh = {**h, "Mcp-Session-Id": mid}
    n0.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=hh)
    r = n0.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                              "params": {"name": "run_python",
                                         "arguments": {"code": "print(20 + 22)"}}},
                headers=hh)
    assert r.status_code == 200, n0.why(r)
    assert "42" in r.text, r.text
    assert n0.delete("/mcp", headers=hh).status_code in (200, 204)


def test_forwarded_e2b_envd_call(cluster):
    n0, n1 = cluster["n0"], cluster["n1"]
    c = n1.client()
    r = c.post(n1.url + "/e2b/api/v2/sandboxes", json={"templateID": "base"},
               headers={"X-API-KEY": TOKEN}, timeout=60)
    assert r.status_code == 201, r.text
    sb = r.json()
    try:
        assert sb["sandboxID"].endswith("-n1")
        # the control plane through n0
        r = c.get(n0.url + "/e2b/api/sandboxes/" + sb["sandboxID"], headers={"X-API-KEY": TOKEN})
        assert r.status_code == 200 and r.json()["sandboxID"] == sb["sandboxID"], r.text
        # envd: the file API through n0, routed by E2b-Sandbox-Id
        h = {"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": "49983",
             "X-Access-Token": sb["envdAccessToken"]}
        r = c.post(n0.url + "/e2b/sandbox/files", params={"path": "/home/user/x.txt"},
                   files={"file": ("x.txt", b"via n0")}, headers=h)
        assert r.status_code == 200, r.text
        r = c.get(n0.url + "/e2b/sandbox/files", params={"path": "/home/user/x.txt"}, headers=h)
        assert r.status_code == 200 and r.content == b"via n0", r.text
    finally:
        c.delete(n1.url + "/e2b/api/sandboxes/" + sb["sandboxID"], headers={"X-API-KEY": TOKEN})


def test_forged_ids_naming_no_node_are_404_without_a_connection(cluster):
    n0 = cluster["n0"]
    before = n0.log_size()
    for path in ("/v1/sessions/s-0123456789abcdef01234567-evil/execute",
                 "/v1/sessions/s-0123456789abcdef01234567-127-0-0-1"):
        r = n0.post(path, json={"code": "1"}) if path.endswith("execute") else n0.get(path)
        assert r.status_code == 404, r.text
        assert "no node named" in r.json()["error"], r.text
    r = n0.get("/v1/containers/cntr_0123456789abcdef01234567-evil")
    assert r.status_code == 404 and "no node named" in r.json()["error"]["message"], r.text
    r = n0.client().get(n0.url + "/e2b/sandbox/files", params={"path": "/home/user/x"},
                        headers={"E2b-Sandbox-Id": "0123456789abcdef01234567-down",
                                 "X-Access-Token": "0" * 48})
    assert r.status_code == 503, r.text  # "down" is a peer: tried, and said so
    # nothing was tried for the forged names: a try that failed logs "cannot forward to node
    # NAME" (warn level; "forwarded to node" is debug and never in this log), as it did for "down"
    log = n0.log_since(before)
    assert "cannot forward to node down" in log, log
    assert "node=evil" not in log and "node=127-0-0-1" not in log, log


def test_a_peer_that_is_down_is_503_naming_it(cluster):
    n0 = cluster["n0"]
    t0 = time.monotonic()
    r = n0.get("/v1/sessions/s-0123456789abcdef01234567-down")
    assert r.status_code == 503, r.text
    assert r.headers.get("Retry-After") == "5"
    assert "node down is unreachable" in r.json()["error"], r.text
    assert time.monotonic() - t0 < 5
    # OpenAI's shape on its routes
    r = n0.get("/v1/containers/cntr_0123456789abcdef01234567-down")
    assert r.status_code == 503 and "node down is unreachable" in r.json()["error"]["message"]


def test_a_peer_that_hangs_is_a_bounded_503_and_others_go_on(cluster, on_n1):
    n0 = cluster["n0"]
    out = {}

    def call():
        t0 = time.monotonic()
        out["r"] = n0.get("/v1/sessions/s-0123456789abcdef01234567-hang", timeout=60)
        out["t"] = time.monotonic() - t0

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.5)
    # meanwhile other work is not held up
    r = n0.post(f"/v1/sessions/{on_n1}/execute", json={"code": "1 + 1"})
    assert r.status_code == 200 and r.json()["result"] == "2"
    t.join(60)
    assert out["r"].status_code == 503, out["r"].text
    assert "node hang is unreachable" in out["r"].json()["error"]
    assert out["t"] < 20, out["t"]


def test_forwarded_once_is_never_forwarded_again(cluster, on_n1):
    n0 = cluster["n0"]
    r = n0.get(f"/v1/sessions/{on_n1}", headers={"Airlock-Forwarded-By": "n1"})
    assert r.status_code == 404, r.text
    assert "not on this node" in r.json()["error"]


def test_previous_response_id_of_another_node_is_forwarded(cluster, fake):
    from fake_llm import answer
    n0, n1 = cluster["n0"], cluster["n1"]
    fake.script[:] = [answer("first"), answer("second")]
    fake.requests.clear()
    r = n1.post("/v1/responses", json={"model": "fake-model", "input": "hi"})
    assert r.status_code == 200, n1.why(r)
    first = r.json()["id"]
    assert re.fullmatch(rf"resp_{HEX24}-n1", first), first
    r = n0.post("/v1/responses", json={"model": "fake-model", "input": "again",
                                       "previous_response_id": first})
    assert r.status_code == 200, n0.why(r)
    assert r.json()["previous_response_id"] == first
    assert r.json()["id"].endswith("-n1")  # n1 made it: the conversation lives there
    # n1 sent the whole history to the model
    assert "hi" in __import__("json").dumps(fake.requests[-1])
    # a forged one names no node
    r = n0.post("/v1/responses", json={"model": "fake-model", "input": "x",
                                       "previous_response_id": f"resp_{'0' * 24}-evil"})
    assert r.status_code == 404 and "no node named" in r.json()["error"]["message"], r.text
    fake.check()


# ---- lists of the whole cluster -------------------------------------------------------------

def test_lists_ask_every_node_and_name_those_that_do_not_answer(cluster, on_n1):
    n0, n1 = cluster["n0"], cluster["n1"]
    mine = n0.create_session()
    cid = n1.post("/v1/containers", json={"name": "listed"}).json()["id"]
    try:
        t0 = time.monotonic()
        r = n0.get("/v1/sessions")
        took = time.monotonic() - t0
        assert r.status_code == 200, n0.why(r)
        body = r.json()
        by_id = {s["id"]: s["node"] for s in body["sessions"]}
        assert by_id.get(mine) == "n0" and by_id.get(on_n1) == "n1", body
        assert sorted(body["nodes"]) == ["n0", "n1"], body
        down = {u["node"]: u["error"] for u in body["unreachable"]}
        assert set(down) == {"down", "hang"}, body
        assert all(down.values()), body
        assert took < 6, took  # the peers are asked at once, 2 s each at most

        # a peer's own list only, when a node asks it
        own = n0.get("/v1/sessions", headers={"Airlock-Peer-Query": "local"}).json()
        assert on_n1 not in {s["id"] for s in own["sessions"]}
        assert "unreachable" not in own

        r = n0.get("/v1/containers")
        assert r.status_code == 200 and r.json()["object"] == "list", r.text
        assert cid in {c["id"] for c in r.json()["data"]}, r.json()
        assert {u["node"] for u in r.json()["unreachable"]} == {"down", "hang"}

        c = n0.client()
        r = c.get(n0.url + "/e2b/api/v2/sandboxes", headers={"X-API-KEY": TOKEN})
        assert r.status_code == 200 and isinstance(r.json(), list), r.text
        assert set(r.headers["Airlock-Unreachable-Nodes"].split(",")) == {"down", "hang"}
        assert on_n1[2:] in {s["sandboxID"] for s in r.json()}, r.json()

        # a wrong token is refused where it arrives; each peer applies its own auth
        r = requests.get(n0.url + "/v1/sessions", headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401
    finally:
        n0.delete(f"/v1/sessions/{mine}")
        n1.delete(f"/v1/containers/{cid}")


# ---- readiness and drain --------------------------------------------------------------------

def test_readyz_limit_drain_and_resume_on_the_same_state_dir(tmp_path):
    from airlock_daemon import restart_daemon
    wd = tmp_path / "node"
    wd.mkdir()
    d = start(node_daemon("d0", free_port(), None, extra=("--max-sessions", "1"),
                          workdir=str(wd)))
    d2 = d3 = None
    try:
        plain = requests.Session()
        r = plain.get(d.url + "/readyz")
        assert r.status_code == 200, r.text
        assert r.json() == {"ready": True, "node": "d0", "sessions": 0, "max_sessions": 1}
        sid = d.create_session()
        assert sid.endswith("-d0")
        assert d.post(f"/v1/sessions/{sid}/execute", json={"code": "x = 123"}).status_code == 200
        assert d.put(f"/v1/sessions/{sid}/files/kept.txt", data=b"kept").status_code in (200, 201)

        r = plain.get(d.url + "/readyz")
        assert r.status_code == 503 and "limit" in r.json()["reason"], r.text
        assert r.headers.get("Retry-After") == "5"
        r = d.post("/v1/sessions", json={})
        assert r.status_code == 503 and r.headers.get("Retry-After") == "5", r.text

        node = d.get("/v1/node").json()
        assert node == {"node": "d0", "peers": [], "draining": False, "sessions": 1,
                        "max_sessions": 1}, node

        r = d.post("/v1/node/drain")
        assert r.status_code == 200, d.why(r)
        assert r.json() == {"node": "d0", "stopped": [sid], "failed": []}, r.json()
        assert f"drain: 1 sessions stopped (saved): {sid}" in d.log_text()
        r = plain.get(d.url + "/readyz")
        assert r.status_code == 503 and "draining" in r.json()["reason"], r.text
        assert d.get("/v1/node").json()["draining"] is True
        r = d.post("/v1/sessions", json={})
        assert r.status_code == 503 and "draining" in r.json()["error"], r.text
        rc, problems = d.stop()
        assert not problems, problems

        # a node restarted on its state directory resumes the session: variables and files
        d2 = restart_daemon(pytest, d)
        r = d2.post(f"/v1/sessions/{sid}/execute", json={"code": "x"})
        assert r.status_code == 200 and r.json()["result"] == "123", d2.why(r)
        assert d2.get(f"/v1/sessions/{sid}/files/kept.txt").content == b"kept"
        assert d2.post(f"/v1/sessions/{sid}/execute", json={"code": "x += 1"}).status_code == 200

        # SIGTERM drains too, and says which
        rc, problems = d2.stop()
        assert not problems, problems
        assert f"drain: 1 sessions stopped (saved): {sid}" in d2.log_text()
        d3 = restart_daemon(pytest, d)
        r = d3.post(f"/v1/sessions/{sid}/execute", json={"code": "x"})
        assert r.status_code == 200 and r.json()["result"] == "124", d3.why(r)
    finally:
        for x in (d, d2, d3):
            if x:
                x.stop()


def test_sigterm_drain_saves_a_busy_session_too(tmp_path):
    """A node's SIGTERM (a pod scaled down) interrupts a running cell and saves its session, as
    the shutdown after it would: the drain names it among the stopped, not as "cannot save it",
    and the node restarted on its state directory resumes it with its variables."""
    import threading
    from airlock_daemon import restart_daemon
    wd = tmp_path / "node"
    wd.mkdir()
    d = start(node_daemon("d4", free_port(), None, workdir=str(wd)))
    d2 = None
    try:
        sid = d.create_session()
        assert d.post(f"/v1/sessions/{sid}/execute", json={"code": "x = 7"}).status_code == 200
        answers = []
        cell = threading.Thread(target=lambda: answers.append(d.post(
            f"/v1/sessions/{sid}/execute", json={"code": "import time; time.sleep(60)"})))
        cell.start()
        deadline = time.monotonic() + 30
        while d.get(f"/v1/sessions/{sid}").json()["state"] != "busy":
            assert time.monotonic() < deadline, "the cell did not start"
            time.sleep(0.1)
        rc, problems = d.stop()
        cell.join(60)
        assert not problems, problems
        log = d.log_text()
        assert f"drain: 1 sessions stopped (saved): {sid}" in log, log[-3000:]
        assert "drain: cannot save it" not in log, log[-3000:]
        d2 = restart_daemon(pytest, d)
        r = d2.post(f"/v1/sessions/{sid}/execute", json={"code": "x * 6"})
        assert r.status_code == 200 and r.json()["result"] == "42", d2.why(r)
    finally:
        for x in (d, d2):
            if x:
                x.stop()


def test_one_shot_and_e2b_create_at_the_limit_are_503_with_retry_after(tmp_path):
    d = start(node_daemon("d1", free_port(), None, extra=("--max-sessions", "1")))
    try:
        sid = d.create_session()
        r = d.post("/execute", json={"code": "1"})
        assert r.status_code == 503 and r.headers.get("Retry-After") == "5", r.text
        r = d.client().post(d.url + "/e2b/api/v2/sandboxes", json={"templateID": "base"},
                            headers={"X-API-KEY": TOKEN})
        assert r.status_code == 503 and r.headers.get("Retry-After") == "5", r.text
        assert r.json()["code"] == 503
        r = d.post("/v1/containers", json={"name": "full"})
        assert r.status_code == 503 and r.headers.get("Retry-After") == "5", r.text
        assert r.json()["error"]["message"], r.text
        d.delete(f"/v1/sessions/{sid}")
    finally:
        d.stop()


# ---- behind a proxy ---------------------------------------------------------------------------

def test_trusted_proxies_are_exempt_from_the_cap_and_name_the_client(tmp_path):
    bad = subprocess.run([AIRLOCK, "serve", "--trusted-proxies", "10.0.0.0/33"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "10.0.0.0/33" in bad.stderr, bad.stderr

    d = start(node_daemon("p0", free_port(), None,
                          extra=("--max-connections-per-client", "2",
                                 "--trusted-proxies", "127.0.0.1/32")))
    held = []
    try:
        # a front door holds many connections from one address: none is closed for a new one
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\n")  # headers not finished: a waiting client
            held.append(s)
        for _ in range(3):
            assert d.get("/healthz").status_code == 200
        time.sleep(0.5)
        for s in held:
            s.settimeout(0.2)
            try:
                assert s.recv(1) != b"", "a held connection was closed"
            except socket.timeout:
                pass  # still open
        # the proxy's X-Forwarded-For names the client in the log and the audit log
        r = requests.get(d.url + "/v1/sessions",
                         headers={"Authorization": "Bearer wrong",
                                  "X-Forwarded-For": "198.51.100.1, 203.0.113.7"})
        assert r.status_code == 401
        d.wait_log("client=203.0.113.7", 5)
        # only an address is taken: characters of one that make none are not a client
        before = d.log_size()
        r = requests.get(d.url + "/v1/sessions",
                         headers={"Authorization": "Bearer wrong", "X-Forwarded-For": "1.2.3"})
        assert r.status_code == 401
        d.wait_log(r.headers["X-Request-Id"], 5)
        line = [x for x in d.log_since(before).splitlines() if r.headers["X-Request-Id"] in x]
        assert line and "client=" not in line[-1], line
        d.audit_lines(until=lambda lines: any(
            "203.0.113.7" in __import__("json").dumps(x) for x in lines))
    finally:
        for s in held:
            s.close()
        d.stop()


def test_a_forwarded_request_names_the_client_its_node_saw_not_one_it_claimed():
    # t1 trusts its peer t0 as a proxy (as scripts/cluster.sh and the manifests do); t0 trusts
    # nobody. A client talking to t0 directly claims an address in X-Forwarded-For: t0 must not
    # pass the claim on as if it had checked it, or t1 logs the client's word as its address.
    p0, p1 = free_port(), free_port()
    peers = f"t0=127.0.0.1:{p0},t1=127.0.0.1:{p1}"
    t0 = start(node_daemon("t0", p0, peers))
    try:
        t1 = start(node_daemon("t1", p1, peers, extra=("--trusted-proxies", "127.0.0.1/32")))
    except BaseException:
        t0.stop()
        raise
    try:
        sid = t1.create_session()
        before = t1.log_size()
        r = t0.get(f"/v1/sessions/{sid}", headers={"X-Forwarded-For": "198.51.100.9"})
        assert r.status_code == 200 and r.json()["node"] == "t1", t0.why(r)
        t1.wait_log(f"path=\"/v1/sessions/{sid}\"", 5)
        lines = [x for x in t1.log_since(before).splitlines() if f"/v1/sessions/{sid}" in x]
        assert lines and all("198.51.100.9" not in x for x in lines), lines
        assert any("client=127.0.0.1" in x for x in lines), lines
        t1.delete(f"/v1/sessions/{sid}")
    finally:
        t0.stop()
        t1.stop()


def _serve_log_until(argv, env, needle, timeout=60):
    """Starts argv, returns its output once needle appears (or it exits), then ends it (by
    its pid)."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        import select
        while time.monotonic() < deadline and needle.encode() not in out:
            r, _, _ = select.select([p.stdout], [], [], 0.5)
            if r:
                chunk = p.stdout.read1(65536)
                if not chunk:
                    break
                out += chunk
    finally:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return out.decode(errors="replace")


def test_node_name_from_the_environment_and_a_statefulset_hostname(tmp_path):
    import os
    import shutil
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a hostname of its own")
    base = {"PATH": "/usr/bin:/bin", "AIRLOCK_TOKEN": TOKEN,
            **{k: v for k, v in os.environ.items() if k.startswith(("ASAN", "UBSAN"))}}
    if os.environ.get("AIRLOCK_RUNNER"):
        base["AIRLOCK_RUNNER"] = os.environ["AIRLOCK_RUNNER"]
    argv = [AIRLOCK, "serve", "--listen", "127.0.0.1:0", "--pool-size", "0"]

    out = _serve_log_until([*argv, "--state-dir", str(tmp_path / "a")],
                           {**base, "AIRLOCK_NODE": "env-node"}, "listening on")
    assert "node 'env-node' (from AIRLOCK_NODE)" in out, out

    out = _serve_log_until(["unshare", "--uts", "sh", "-c", 'hostname airlock-3 && exec "$@"',
                            "sh", *argv, "--state-dir", str(tmp_path / "b")],
                           {**base, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "listening on")
    assert "node 'airlock-3' (from the hostname of a StatefulSet pod" in out, out

    p = subprocess.run([*argv, "--state-dir", str(tmp_path / "c")],
                       env={**base, "AIRLOCK_NODE": "n1", "AIRLOCK_PEERS": "n2=h"},
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "'n2=h'" in p.stderr and "AIRLOCK_PEERS" in p.stderr, p.stderr


def test_a_client_that_hangs_up_cancels_the_forwarded_cell(cluster, on_n1):
    n0, n1 = cluster["n0"], cluster["n1"]
    code = "import time\nprint('started', flush=True)\ntime.sleep(60)"
    body = __import__("json").dumps({"code": code}).encode()
    s = socket.create_connection(("127.0.0.1", n0.port), timeout=30)
    s.sendall(f"POST /v1/sessions/{on_n1}/execute HTTP/1.1\r\nHost: {n0.host}\r\n"
              f"Authorization: Bearer {TOKEN}\r\nAccept: application/x-ndjson\r\n"
              f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
              .encode() + body)
    got = b""
    while b"started" not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    assert got.startswith(b"HTTP/1.1 200"), got
    s.close()  # the client goes away mid-cell
    deadline = time.monotonic() + 20
    state = None
    while time.monotonic() < deadline:
        state = n1.get(f"/v1/sessions/{on_n1}").json()["state"]
        if state != "busy":
            break
        time.sleep(0.25)
    assert state != "busy", "the cell on n1 still runs after its client left"
    # and the session still works
    r = n1.post(f"/v1/sessions/{on_n1}/execute", json={"code": "1 + 2"})
    assert r.status_code == 200 and r.json()["result"] == "3", n1.why(r)
