"""What idle sessions cost the daemon itself (issue 13, item 4: a thousand of them). A session
that once answered with a large rich output (a plot is up to the output limit, 1 MiB) kept
that answer's frame buffer in the daemon for the rest of its life: a thousand such sessions,
up to a GiB of the daemon's memory. Now the buffer goes once the answer is read.

The daemon's RSS is the measure, so its allocator must give freed memory back: under
AddressSanitizer the quarantine is turned off for this daemon."""
import os

import pytest

from airlock_daemon import daemon_fixture

SESSIONS = 24
HTML_BYTES = 700_000
BIG_ANSWER = ("class Big:\n"
              "    def _repr_html_(self):\n"
              f"        return 'x' * {HTML_BYTES}\n"
              "Big()")


def daemon_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"),
                                                 "quarantine_size_mb=0"]))
    return env


daemon = daemon_fixture(pytest, args=("--pool-size", "1", "--max-sessions", "64"),
                        env=daemon_env())


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def big_answer(daemon, sid):
    r = daemon.execute(sid, BIG_ANSWER)
    html = [o["data"]["text/html"] for o in r["outputs"] if "text/html" in o["data"]]
    assert r["status"] == "ok" and html and len(html[0]) == HTML_BYTES, str(r)[:500]


def test_a_large_answer_leaves_no_buffer_behind(daemon):
    ids = []
    try:
        # One round first, so that the allocator has the sizes it needs.
        ids.append(daemon.create_session())
        big_answer(daemon, ids[-1])
        before = rss_kib(daemon.proc.pid)
        for _ in range(SESSIONS):
            ids.append(daemon.create_session())
            big_answer(daemon, ids[-1])
        grown_kib = rss_kib(daemon.proc.pid) - before
        assert grown_kib < SESSIONS * HTML_BYTES / 1024 / 2, (
            f"the daemon grew by {grown_kib} KiB for {SESSIONS} idle sessions that each "
            f"answered {HTML_BYTES} bytes once")
    finally:
        for sid in ids:
            daemon.delete_session(sid)
