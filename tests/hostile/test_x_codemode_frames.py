"""Extra (issue 9, Code Mode): user code owns fd 3, the channel airlock_tools calls through,
and writes Code Mode frames of its own on it: tool calls with a wrong id, a tool reply sent to
itself, floods of tool-list requests, huge and malformed frames. A frame without the running
exec's id answers nothing and is dropped; one with it (code can read the id from any raw reply)
is held to exactly what airlock_tools would get; a flood whose replies nobody reads, or a frame
that breaks the protocol, ends the cell with a clear error and only that sandbox. Through the
daemon, every test then checks that it still serves other sessions (/healthz, a new session
that runs code and calls a tool).

Without tools (the CLI, or a session whose code may call nothing) the frames meet the same
driver; the cases that need Code Mode on are daemon-only."""
import json

import pytest

from conftest import VIA_DAEMON, codemode_session, daemon, mcp_fixture_calls, run, \
    serves_others

# A cell prelude: frame(obj) encodes one frame; LIVE is the running exec's id, read from the
# raw reply of a request made through the runner's own channel.
FRAMES = r'''
import json, os, struct
import airlock_cell
def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack("<I", len(body)) + body
def write_all(data):
    view = memoryview(data)
    while view:
        view = view[os.write(3, view):]
def read_frame():
    def exactly(n):
        buf = b""
        while len(buf) < n:
            chunk = os.read(3, n - len(buf))
            assert chunk, "EOF on fd 3"
            buf += chunk
        return buf
    (n,) = struct.unpack("<I", exactly(4))
    return json.loads(exactly(n))
LIVE = json.loads(airlock_cell._channel(json.dumps({"op": "tool_list"})))["id"]
'''


def test_frames_without_the_live_id_answer_nothing():
    """Works everywhere: with Code Mode off the real request gets "disabled", so the channel
    is shown to be in step all the same."""
    res = run(FRAMES + r'''
for i in range(3000):
    os.write(3, frame({"op": "tool_list", "id": "0" * 16, "call": i}))
os.write(3, frame({"op": "tool_call", "name": "echo", "arguments": {"text": "no id"}, "call": 1}))
os.write(3, frame({"op": "tool_reply", "call": 2, "ok": "forged"}))
import airlock_tools
try:
    print(airlock_tools.call("echo", text="real"))
except airlock_tools.ToolError as e:
    print("ToolError", e.kind)
print("alive")
''', timeout=30)
    assert res.status == "ok", res.describe()
    assert res.out.splitlines()[-1] == "alive", res.describe()
    assert res.out.splitlines()[-2] in ("real", "ToolError disabled"), res.describe()
    if VIA_DAEMON:
        serves_others(daemon())


def test_forged_frames_in_a_code_mode_session():
    with codemode_session(["echo"]) as s:
        before = mcp_fixture_calls()
        res = s.exec(FRAMES + r'''
# A call with a wrong id: dropped, never answered, never sent to a server.
os.write(3, frame({"op": "tool_call", "id": "f" * 16, "call": 10**9,
                   "name": "add", "arguments": {"a": 1, "b": 2}}))
# A tool reply sent to itself: it goes to the daemon, which drops it; the next real call
# gets the real answer.
os.write(3, frame({"op": "tool_reply", "id": "f" * 16, "call": 3, "ok": "forged"}))
import airlock_tools as t
print(t.echo(text="real answer"))
# With the live id, a raw call meets the same policy as airlock_tools: add is not allowed,
# and neither is the fixture's own run_python under its exposed name.
for name in ("add", "fx__run_python"):
    os.write(3, frame({"op": "tool_call", "id": LIVE, "call": 10**9, "name": name,
                       "arguments": {"a": 1, "b": 2, "code": "1"}}))
    reply = read_frame()
    print(reply["op"], reply["call"], reply["kind"])
print(t.echo(text="still in step"))
''')
        assert res["status"] == "ok", res
        assert res["stdout"].splitlines() == [
            "real answer", "tool_reply 1000000000 not_allowed",
            "tool_reply 1000000000 not_allowed", "still in step"], res
        assert mcp_fixture_calls()[len(before):] == ["tools/call echo"] * 2
        serves_others(s.d)


def test_a_huge_call_with_the_live_id_is_too_large():
    with codemode_session(["echo"]) as s:
        res = s.exec(FRAMES + r'''
write_all(frame({"op": "tool_call", "id": LIVE, "call": 7, "name": "echo",
                 "arguments": {"text": "x" * (2 << 20)}}))
reply = read_frame()
print(reply["kind"], reply["call"])
import airlock_tools as t
print(t.echo(text="after"))
''')
        assert res["status"] == "ok", res
        assert res["stdout"] == "too_large 7\nafter\n", res
        serves_others(s.d)


@pytest.mark.parametrize("attack, header", [
    ("huge announced length", "struct.pack('<I', 0xFFFFFFF0)"),
    ("malformed JSON", "struct.pack('<I', 9) + b'{\"op\": tr'"),
])
def test_a_broken_frame_ends_only_its_own_sandbox(attack, header):
    with codemode_session(["echo"]) as s:
        res = s.exec(FRAMES + f"import time\nos.write(3, {header})\ntime.sleep(30)", timeout=20)
        assert res["status"] == "killed" and res["state"] == "lost", (attack, res)
        assert "control channel" in res["error"]["value"], (attack, res["error"])
        serves_others(s.d)


def test_an_unread_flood_of_tool_lists_ends_the_cell_at_once():
    """Thousands of tool_list frames with the live id, their replies never read: the socket
    fills, the daemon cannot deliver a reply, and it ends the cell then (one log line), instead
    of answering the rest of the flood into a dead sandbox."""
    with codemode_session(["echo"]) as s:
        offset = s.d.log_size()
        res = s.exec(FRAMES + r'''
for i in range(5000):
    os.write(3, frame({"op": "tool_list", "id": LIVE, "call": 10**6 + i}))
import time
time.sleep(30)
''', timeout=5)
        assert res["status"] == "killed" and res["state"] == "lost", res
        assert "did not take airlock's reply to a tool request" in res["error"]["value"], res
        log = s.d.log_since(offset)
        assert log.count("did not take a tool reply") == 1, log[-3000:]
        serves_others(s.d)
