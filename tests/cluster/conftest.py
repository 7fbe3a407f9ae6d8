"""A cluster of airlock nodes made by scripts/cluster.sh for the tests of this directory: three
nodes in network namespaces behind the front door (nginx) on a free loopback port, in a
temporary directory; `cluster.sh down` runs at the end even when a test failed."""
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "cluster.sh"
NODES = 3


def why_not():
    if os.geteuid() != 0:
        return "needs root (network namespaces, a bridge, airlock's sandboxes)"
    for tool, pkg in (("nginx", "nginx-light"), ("ip", "iproute2"), ("nsenter", "util-linux"),
                      ("curl", "curl"), ("setsid", "util-linux")):
        if not shutil.which(tool):
            return f"{tool} is not installed (apt-get install {pkg}; scripts/deps.sh does it)"
    if not Path("/run/netns").exists() and subprocess.run(["ip", "netns", "list"], capture_output=True).returncode:
        return "network namespaces are not available (ip netns)"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args, check=True, timeout=300):
    p = subprocess.run([str(CLUSTER), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"cluster.sh {' '.join(map(str, args))} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


class Cluster:
    def __init__(self, directory, port):
        self.dir = directory
        self.url = f"http://127.0.0.1:{port}"
        self.token = (directory / "token").read_text().strip()
        env = dict(line.split("=", 1) for line in (directory / "cluster.env").read_text().splitlines()
                   if "=" in line and not line.startswith("serve_extra"))
        self.subnet = env["subnet"]

    def node_url(self, i):
        return f"http://10.251.{self.subnet}.{i + 2}:8080"

    def cmd(self, verb, i=None, **kw):
        args = [verb, self.dir] + ([i] if i is not None else [])
        return run(*args, **kw)

    def log(self, i):
        return (self.dir / "nodes" / str(i) / "daemon.log").read_text(errors="replace")

    def access_log(self):
        return (self.dir / "frontdoor" / "run" / "access.log").read_text(errors="replace")

    def pid(self, i):
        return int((self.dir / "nodes" / str(i) / "pid").read_text().split()[0])


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    reason = why_not()
    if reason:
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("cluster")
    port = free_port()
    # Checkpoints after 1 s of quiet, so a node that is SIGKILLed has saved its sessions' state;
    # one warm sandbox per profile keeps three sanitizer-built daemons within two cores.
    p = run("up", "--nodes", NODES, "--listen", f"127.0.0.1:{port}", "--dir", directory, "--",
            "--checkpoint-after", "1s", "--pool-size", "1", check=False, timeout=600)
    try:
        if p.returncode != 0:
            raise AssertionError(f"cluster.sh up failed:\n{p.stdout}\n{p.stderr}")
        yield Cluster(directory, port)
    finally:
        down = run("down", directory, check=False, timeout=600)
        assert down.returncode == 0, down.stderr
        # A daemon that reported a sanitizer error fails the run.
        for i in range(NODES):
            log = (directory / "nodes" / str(i) / "daemon.log")
            if log.exists():
                text = log.read_text(errors="replace")
                assert "ERROR: AddressSanitizer" not in text and "runtime error:" not in text, \
                    f"node {i}: sanitizer report in {log}"
