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


def node_daemon(name, port, peers, extra=(), workdir=None):
    args = ["--pool-size", "0", "--node", name, *extra]
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
def cluster():
    """n0 and n1, each naming the other, a node that is down ("down": a closed port) and one
    that hangs ("hang"). Stopped at the end whatever happened."""
    hang = Hang()
    p0, p1 = free_port(), free_port()
    down = closed_port()
    peers = (f"n0=127.0.0.1:{p0},n1=127.0.0.1:{p1},down=127.0.0.1:{down},"
             f"hang=127.0.0.1:{hang.port}")
    nodes = {}
    try:
        nodes["n0"] = start(node_daemon("n0", p0, peers))
        nodes["n1"] = start(node_daemon("n1", p1, peers))
        yield nodes
    finally:
        for d in nodes.values():
            d.stop()
        hang.close()


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
