"""scripts/cluster.sh itself: every bad input is refused with a message saying what to give, a
failed `up` cleans up after itself (no namespace, bridge or process left), `down` may run
twice."""
import os
import subprocess

import pytest

from conftest import CLUSTER, free_port, why_not


def sh(*args, timeout=300):
    return subprocess.run([str(CLUSTER), *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["up", "--listen", "127.0.0.1:1", "--dir", "/tmp/x"], "give --nodes N"),
    (["up", "--nodes", "0", "--listen", "127.0.0.1:1", "--dir", "/tmp/x"], "not a number from 1 to 16"),
    (["up", "--nodes", "17", "--listen", "127.0.0.1:1", "--dir", "/tmp/x"], "not a number from 1 to 16"),
    (["up", "--nodes", "08", "--listen", "127.0.0.1:1", "--dir", "/tmp/x"], "not a number from 1 to 16"),
    (["up", "--nodes", "two", "--listen", "127.0.0.1:1", "--dir", "/tmp/x"], "not a number from 1 to 16"),
    (["up", "--nodes", "2", "--dir", "/tmp/x"], "give --listen"),
    (["up", "--nodes", "2", "--listen", "0.0.0.0:8080", "--dir", "/tmp/x"], "not a loopback HOST:PORT"),
    (["up", "--nodes", "2", "--listen", "127.0.0.1:99999", "--dir", "/tmp/x"], "not 1..65535"),
    (["up", "--nodes", "2", "--listen", "127.0.0.1:8080"], "give --dir"),
    (["up", "--nodes"], "--nodes needs a value"),
    (["up", "--bogus"], "unknown argument '--bogus'"),
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["kill-node"], "give the cluster's directory"),
    (["kill-node", "/nonexistent-dir", "0"], "is not a directory"),
    (["status", "/tmp"], "holds no cluster"),
])
def test_bad_input_is_refused_saying_why(args, message):
    p = sh(*args)
    assert p.returncode == 2 and message in p.stderr, (p.returncode, p.stderr)


def test_help():
    p = sh("--help")
    assert p.returncode == 0 and "cluster.sh up --nodes N" in p.stdout and "kill-node" in p.stdout


def test_down_of_nothing_is_fine(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    p = sh("down", tmp_path)
    assert p.returncode == 0 and "nothing to stop" in p.stdout


def namespaces():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_failed_up_cleans_up(tmp_path):
    reason = why_not()
    if reason:
        pytest.skip(reason)
    before = namespaces()
    # A flag the daemon refuses: every node exits at start.
    p = sh("up", "--nodes", "2", "--listen", f"127.0.0.1:{free_port()}", "--dir", tmp_path, "--",
           "--no-such-flag")
    assert p.returncode != 0
    assert "node 0 exited before it answered" in p.stderr and "no-such-flag" in p.stderr, p.stderr
    assert "cleaning up" in p.stderr
    assert namespaces() == before
    assert not (tmp_path / "cluster.env").exists()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    tag = subprocess.run(["sha256sum"], input=str(tmp_path), capture_output=True, text=True).stdout[:6]
    assert f"albr{tag}" not in links and f"al{tag}h0" not in links
    # The node's log stays for the post-mortem.
    assert "no-such-flag" in (tmp_path / "nodes" / "0" / "daemon.log").read_text()
