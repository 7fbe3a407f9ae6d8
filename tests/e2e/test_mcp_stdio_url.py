"""`airlock mcp --url URL --profile NAME`: the stdio MCP server that forwards to a daemon makes
its session of the profile it was given (it used to make a `default` one whatever --profile
said, so a client that asked for a stricter profile, or for a microVM, silently got the
default sandbox). An unknown profile is the daemon's 400, said in the tool's answer."""
import json
import os
import subprocess

import pytest

from airlock_daemon import AIRLOCK, daemon_fixture

daemon = daemon_fixture(pytest)


class Stdio:
    def __init__(self, d, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
        env["AIRLOCK_TOKEN"] = d.token
        self.proc = subprocess.Popen([AIRLOCK, "mcp", "--url", d.url, *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        a = self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "e2e", "version": "1"}})
        assert "result" in a, a
        self.notify("notifications/initialized")

    def notify(self, method):
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.proc.stdin.flush()

    def call(self, method, params, _id=[0]):
        _id[0] += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": _id[0], "method": method,
                                          "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, "airlock mcp ended: " + self.proc.stderr.read()
            answer = json.loads(line)
            if answer.get("id") == _id[0]:
                return answer

    def run_python(self, code):
        a = self.call("tools/call", {"name": "run_python", "arguments": {"code": code}})
        return a["result"]["isError"], "".join(c.get("text", "") for c in a["result"]["content"])

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def profiles_of_sessions(d):
    return sorted(s["profile"] for s in d.get("/v1/sessions").json()["sessions"])


@pytest.mark.parametrize("args,profile", [((), "default"), (("--profile", "minimal"), "minimal"),
                                          (("-p", "data-science"), "data-science")])
def test_the_session_is_of_the_profile_asked_for(daemon, args, profile):
    before = profiles_of_sessions(daemon)
    s = Stdio(daemon, *args)
    try:
        error, text = s.run_python("6 * 7")
        assert not error and "42" in text, text
        after = profiles_of_sessions(daemon)
        for p in before:
            after.remove(p)
        assert after == [profile], (before, after)
    finally:
        s.close()
    assert profiles_of_sessions(daemon) == before, "the session ends with the client"


def test_a_profile_the_daemon_does_not_have_is_said_in_the_answer(daemon):
    s = Stdio(daemon, "--profile", "no-such-profile")
    try:
        error, text = s.run_python("1")
        assert error, text
        assert "no-such-profile" in text, text
    finally:
        s.close()
