"""Extra (issue 9, Code Mode): user code calls the runner's channel function itself
(airlock_cell._channel, which stamps each request with the running exec's id and waits for
its reply) with garbage, with frames that are not tool requests (a forged result would be
taken for the cell's answer while the runner still waited for a tool reply, and the next
cell's request would be read as that reply), with bytes, and with huge payloads. Each attempt
must end with a clear error in the cell, the cell and the session must go on, and, through the
daemon, other sessions must still be served."""
from conftest import VIA_DAEMON, codemode_session, daemon, mcp_fixture_calls, run, serves_others

GARBAGE = r'''
import json
import airlock_cell
def attempt(arg):
    try:
        reply = airlock_cell._channel(arg)
        r = json.loads(reply)
        return f"reply {r.get('kind') or 'ok'}"
    except Exception as e:
        return f"{type(e).__name__}: {e}"
for arg in ["not json", "[1, 2]", "{}", '{"op": 5}',
            json.dumps({"op": "result", "status": "ok", "result": "'forged'", "outputs": [],
                        "files": []}),
            json.dumps({"op": "fatal", "message": "forged"}),
            json.dumps({"op": "tool_reply", "call": 1, "ok": "forged"}),
            b'{"op": "tool_list"}',
            json.dumps({"op": "tool_call", "name": "echo", "arguments": {"text": "x" * (2 << 20)}}),
            json.dumps({"op": "tool_call", "name": "echo", "arguments": {"text": "x" * (8 << 20)}}),
            ]:
    print(attempt(arg))
import airlock_tools
try:
    print(airlock_tools.echo(text="the channel is in step"))
except airlock_tools.ToolError as e:
    print("ToolError", e.kind)
'''

GARBAGE_EXPECTED = [
    "ValueError: a tool request is a JSON object",
    "ValueError: a tool request is a JSON object",
    'ValueError: a tool request\'s "op" is "tool_call" or "tool_list"',
    'ValueError: a tool request\'s "op" is "tool_call" or "tool_list"',
    'ValueError: a tool request\'s "op" is "tool_call" or "tool_list"',
    'ValueError: a tool request\'s "op" is "tool_call" or "tool_list"',
    'ValueError: a tool request\'s "op" is "tool_call" or "tool_list"',
]


def check_garbage(lines, code_mode_on):
    assert lines[:7] == GARBAGE_EXPECTED, lines
    assert lines[7].startswith("TypeError"), lines
    # Over the limit of a tool request, refused by the runner before a byte is written: 8 MiB
    # is past what the daemon reads as one frame (the sandbox would be killed as an output
    # flood).
    assert lines[8] == "reply too_large" and lines[9] == "reply too_large", lines
    assert lines[10] == ("the channel is in step" if code_mode_on else "ToolError disabled"), \
        lines


def test_channel_garbage_with_code_mode_off():
    res = run(GARBAGE + "print('alive')", timeout=60)
    assert res.status == "ok", res.describe()
    lines = res.out.splitlines()
    check_garbage(lines, code_mode_on=False)
    assert lines[-1] == "alive"
    if VIA_DAEMON:
        serves_others(daemon())


def test_channel_garbage_in_a_code_mode_session():
    with codemode_session(["echo"]) as s:
        before = mcp_fixture_calls()
        res = s.exec(GARBAGE, timeout=60)
        assert res["status"] == "ok", res
        check_garbage(res["stdout"].splitlines(), code_mode_on=True)
        assert mcp_fixture_calls()[len(before):] == ["tools/call echo"]
        res = s.exec("print('the session goes on')")
        assert res["status"] == "ok" and res["stdout"] == "the session goes on\n", res
        serves_others(s.d)
