"""Egress from microVM sessions (issue 27; docs/NETWORK.md, "microVM sessions"): a profile with
"isolation": "microvm" and "network": {"mode": "allow", ...} gives its guests one network device
on QEMU's user network, whose only way out is QEMU's own network namespace, where the daemon's
egress proxy listens. From inside the guest: the proxy through the environment's variables
(urllib), SOCKS5 at the environment's ALL_PROXY, a named forwarder through the guest's
/etc/hosts, an address rule's forwarder at
the address, a refusal for a host not in the list, nothing reached around the proxy; the
execution's usage.network, the audit log and the metrics counting it; and a resumed and a
forked session keeping their narrowed network.

The daemon runs inside the egress lab (netlab.py), so the proxy's connections go to the lab's
fake hosts and nothing else; the guest image is test_microvm.py's (built once into the build
tree). Under TCG (no /dev/kvm) the profile's saved VM takes minutes to make the first time."""
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import netlab  # noqa: E402
from test_microvm import CREATE_TIMEOUT, SNAPSHOTS, image, kvm_usable, qemu_children  # noqa: E402,F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="the egress lab and the microVM's namespaces need root")

lab = netlab.lab_fixture(pytest)

PROFILE = "vmnet"
VMNET = {
    "description": "a microVM with egress to two lab hosts (test_microvm_egress.py)",
    "isolation": "microvm",
    "languages": ["python", "bash"],
    "preload": [],
    "limits": {"memory": "512MiB", "cpus": 1, "pids": 128, "timeout": "60s"},
    "network": {"mode": "allow", "allow": ["other.internal:80", "db.internal:5432",
                                           f"{netlab.ADDR_HOST}:80"]},
    "rootfs": "/",
}


@pytest.fixture(scope="module")
def daemon(lab, image):  # noqa: F811
    # The profile's image is the microvm profile's (the same root, no layer): a directory of
    # images of this module's own, linking to it.
    images = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-vmnet-"))
    try:
        (images / PROFILE).symlink_to(image)
        env = lab.daemon_env({"AIRLOCK_VM_IMAGES": str(images),
                              "AIRLOCK_VM_SNAPSHOTS": str(SNAPSHOTS)})
        if not kvm_usable():
            env["AIRLOCK_VM_ACCEL"] = "tcg"
        d = lab.daemon({PROFILE: VMNET}, args=("--pool-size", "0"), env=env,
                       wait_zygote=None)
        yield d
    finally:
        shutil.rmtree(images, ignore_errors=True)


GUEST = r'''
import json, os, socket, urllib.error, urllib.request
R = {}
R["proxy_env"] = [os.environ.get(k) for k in ("HTTP_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY")]
R["net"] = sorted(n for _, n in socket.if_nameindex())
R["hosts"] = open("/etc/hosts").read()
# Through the HTTP proxy, as any program that reads the environment's proxy finds it.
R["http"] = urllib.request.urlopen("http://other.internal/", timeout=60).read().decode()
try:
    urllib.request.urlopen("http://evil.internal/", timeout=60)
    R["evil"] = "answered"
except urllib.error.HTTPError as e:
    R["evil"] = [e.code, e.read().decode()]
# A named forwarder: db.internal is in /etc/hosts.
s = socket.create_connection(("db.internal", 5432), timeout=60)
s.sendall(b"SELECT 1;\n")
R["db"] = s.recv(100).decode()
s.close()
# An address rule's forwarder, at the address itself (in QEMU's namespace, through slirp).
s = socket.create_connection((ADDR_HOST, 80), timeout=60)
s.sendall(b"GET / HTTP/1.0\r\nHost: ip\r\n\r\n")
R["addr"] = b"".join(iter(lambda: s.recv(65536), b"")).decode()
s.close()
# SOCKS5 at the environment's ALL_PROXY (socks5h://10.0.2.2:1080), the name resolved by it.
host, port = os.environ["ALL_PROXY"].split("//")[1].split(":")
s = socket.create_connection((host, int(port)), timeout=60)
s.sendall(b"\x05\x01\x00")
assert s.recv(2) == b"\x05\x00"
s.sendall(b"\x05\x01\x00\x03\x0eother.internal\x00\x50")
reply = b""
while len(reply) < 10:
    reply += s.recv(10 - len(reply))
s.sendall(b"GET / HTTP/1.0\r\nHost: other.internal\r\n\r\n")
R["socks"] = [reply[1], b"".join(iter(lambda: s.recv(65536), b"")).decode()]
s.close()
# Around the proxy: a lab host by address, a port of the host address nothing listens on.
def dial(host, port):
    try:
        socket.create_connection((host, port), timeout=20).close()
        return "OK"
    except OSError as e:
        return type(e).__name__
R["direct"] = dial("10.77.0.30", 80)
R["host_port"] = dial("10.0.2.2", 22)
print(json.dumps(R))
'''


def test_a_microvm_session_reaches_only_its_allow_list_through_the_proxy(lab, daemon):
    d = daemon
    lab.reset()
    r = d.post("/v1/sessions", json={"profile": PROFILE}, timeout=CREATE_TIMEOUT)
    assert r.status_code == 201, d.why(r)
    sid = r.json()["id"]
    try:
        out = d.execute(sid, f"ADDR_HOST = {netlab.ADDR_HOST!r}\n" + GUEST, timeout_s=240,
                        http_timeout=400)
        assert out["status"] == "ok", json.dumps(out, indent=1)[:4000]
        got = json.loads(out["stdout"].strip().splitlines()[-1])
        assert got["proxy_env"] == ["http://10.0.2.2:3128", "http://10.0.2.2:3128",
                                    "socks5h://10.0.2.2:1080", "localhost,127.0.0.1,::1"], got
        assert got["net"] == ["eth0", "lo"], got["net"]
        # The forwarded names, at 10.0.3.N (the guest's own 127/8 never leaves it).
        assert "10.0.3.1\tother.internal\n10.0.3.2\tdb.internal\n" in got["hosts"], got["hosts"]
        assert got["hosts"].startswith("127.0.0.1\tlocalhost"), got["hosts"]
        assert json.loads(got["http"])["server"] == "other", got["http"]
        code, body = got["evil"]
        assert code == 403 and body.startswith("airlock egress:"), got["evil"]
        assert "evil.internal" in body and f"'{PROFILE}'" in body, body
        assert got["db"] == "SELECT 1;\n", got["db"]
        assert '"server": "ip-host"' in got["addr"], got["addr"]
        assert got["socks"][0] == 0 and '"server": "other"' in got["socks"][1], got["socks"]
        assert got["direct"] != "OK" and got["host_port"] != "OK", got

        # What the lab saw: the allowed hosts once each, nothing else.
        assert lab.hits("other") == 2, lab.stats()["servers"]["other"]
        assert lab.hits("ip-host") == 1, lab.stats()["servers"]["ip-host"]
        assert lab.hits("evil") == 0
        assert set(lab.forbidden_hits().values()) == {0}, lab.forbidden_hits()

        net = out["usage"]["network"]
        assert net["connections"] == 4 and net["refused"] == 1, net
        assert net["bytes_out"] >= len("SELECT 1;\n") and net["bytes_in"] > 0, net
        dests = {(x["host"], x["port"]): x for x in net["destinations"]}
        assert dests[("other.internal", 80)]["connections"] == 2, dests
        assert dests[("db.internal", 5432)]["connections"] == 1, dests
        assert dests[(netlab.ADDR_HOST, 80)]["connections"] == 1, dests
        assert dests[("evil.internal", 80)]["refused"] == 1, dests

        s = d.get(f"/v1/sessions/{sid}").json()
        assert s["network"]["allow"] == VMNET["network"]["allow"], s

        # The audit log and the metrics, as for any session with network.
        def audit(event):
            path = d.state_dir / "audit.log"
            return [e for e in map(json.loads, path.read_text().splitlines())
                    if e["event"] == event and e.get("session") == sid]
        deadline = time.monotonic() + 30
        while len(audit("egress.connection")) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)  # a wait for the closes to be logged, not a timed assertion
        conns = {(e["host"], e["via"]) for e in audit("egress.connection")}
        assert conns == {("other.internal", "http"), ("other.internal", "socks5"),
                         ("db.internal", "forward"), (netlab.ADDR_HOST, "forward")}, conns
        refusals = [(e["host"], e["profile"]) for e in audit("egress.refusal")]
        assert refusals == [("evil.internal", PROFILE)], refusals
        token = (d.state_dir / "metrics-token").read_text().strip()
        m = d.client(token).get(d.url + "/metrics", timeout=30)
        assert m.status_code == 200, m.text
        key = f'airlock_egress_connections_total{{profile="{PROFILE}",result="allowed"}} '
        values = [float(x[len(key):]) for x in m.text.splitlines() if x.startswith(key)]
        assert values == [4.0], [x for x in m.text.splitlines() if "egress" in x]
    finally:
        d.delete(f"/v1/sessions/{sid}")
    deadline = time.monotonic() + 20
    while qemu_children(d) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not qemu_children(d), "deleting the session ends its VM"


NARROWED = r'''
import json, socket, urllib.request
R = {"http": json.loads(urllib.request.urlopen("http://other.internal/", timeout=60).read())["server"]}
s = socket.create_connection(("db.internal", 5432), timeout=60)
try:
    s.sendall(b"SELECT 2;\n")
    R["db"] = s.recv(100).decode() or "closed"
except OSError as e:
    R["db"] = type(e).__name__
print(json.dumps(R))
'''


def test_a_resumed_and_a_forked_microvm_session_keep_their_narrowed_network(lab, daemon):
    """A resume and a fork's child are new QEMUs: each gets its own proxy, checking the
    session's narrowed policy (here the profile's list without db.internal) from the start."""
    d = daemon
    r = d.post("/v1/sessions", json={"profile": PROFILE, "network": {
        "mode": "allow", "allow": ["other.internal:80"]}}, timeout=CREATE_TIMEOUT)
    assert r.status_code == 201, d.why(r)
    sid = r.json()["id"]
    children = []
    try:
        def check(who):
            out = d.execute(who, NARROWED, timeout_s=240, http_timeout=400)
            assert out["status"] == "ok", json.dumps(out, indent=1)[:4000]
            got = json.loads(out["stdout"].strip().splitlines()[-1])
            # The forwarder of a rule the session narrowed away takes the connection and
            # closes it at once: an EOF, or a reset when the close found the query unread
            # (which of the two depends on timing), never the database's answer.
            assert got["http"] == "other", got
            assert got["db"] in ("closed", "ConnectionResetError"), got
            net = out["usage"]["network"]
            assert net["connections"] == 1 and net["refused"] == 1, net
        check(sid)
        r = d.post(f"/v1/sessions/{sid}/stop", timeout=600)
        assert r.status_code == 200, d.why(r)
        r = d.post(f"/v1/sessions/{sid}/resume", timeout=600)
        assert r.status_code == 200, d.why(r)
        check(sid)
        r = d.post(f"/v1/sessions/{sid}/fork", json={"n": 1}, timeout=900)
        assert r.status_code == 201, d.why(r)
        children = [c["id"] for c in r.json()["sessions"]]
        check(children[0])
        assert d.get(f"/v1/sessions/{children[0]}").json()["network"]["allow"] == \
            ["other.internal:80"]
    finally:
        for s in [sid, *children]:
            d.delete(f"/v1/sessions/{s}")
