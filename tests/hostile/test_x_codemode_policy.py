"""Extra (issue 9, Code Mode): code reaching for a tool its session may not call (by the
server's own name, by the SERVER__NAME airlock exposes it under, by a name made up to look like
a path or a pattern), and sending arguments JSON cannot carry (numpy values are converted;
other objects, NaN, infinities and cycles are refused in the sandbox). Every attempt ends with a
clear error in the cell, nothing refused reaches the tool server, and, through the daemon,
other sessions are still served."""
import json

from conftest import VIA_DAEMON, codemode_session, daemon, mcp_fixture_calls, run, serves_others

REPORT = r'''
import json
import airlock_tools as t
import airlock_cell
def report(f):
    try:
        print(json.dumps({"ok": f()}))
    except t.ToolError as e:
        print(json.dumps({"kind": e.kind, "error": str(e)}))
    except Exception as e:
        print(json.dumps({"exc": type(e).__name__, "error": str(e)}))
def raw(request):
    return json.loads(airlock_cell._channel(json.dumps(request)))
'''

# (how the cell asks, what it must get). The fixture runs with --name-clash: its own
# run_python is exposed as fx__run_python, airlock's run_python is not an internal tool.
NAMES = [
    ('t.call("add", a=1, b=2)', "not_allowed"),
    ('t.call("fx__run_python", code="1")', "not_allowed"),
    ('t.call("run_python", code="1")', "unknown"),
    ('t.call("fx__echo", text="x")', "unknown"),
    ('t.call("fx/echo", text="x")', "unknown"),
    ('t.call("fx/*", text="x")', "unknown"),
    ('t.call("*", text="x")', "unknown"),
    ('t.call("../add", a=1, b=2)', "unknown"),
    ('t.call("echo\\u0000", text="x")', "exc:ValueError"),
    ('t.call("ADD", a=1, b=2)', "unknown"),
    ('t.call("e" * 5000)', "invalid"),
    ('t.call("")', "invalid"),
    ('raw({"op": "tool_call", "name": 5})["kind"]', "ok:invalid"),
    ('raw({"op": "tool_call", "name": "echo", "arguments": ["x"]})["kind"]', "ok:invalid"),
    ('raw({"op": "tool_call"})["kind"]', "ok:invalid"),
]


def test_tools_outside_code_tools_stay_out_of_reach():
    with codemode_session(["echo"]) as s:
        before = mcp_fixture_calls()
        code = REPORT + "\n".join(f"report(lambda: {call})" for call, _ in NAMES)
        res = s.exec(code + "\nreport(lambda: t.add)\nreport(lambda: t.fx__run_python)"
                            "\nreport(lambda: t.echo(text='allowed'))")
        assert res["status"] == "ok", res
        out = [json.loads(line) for line in res["stdout"].splitlines()]
        for (call, want), got in zip(NAMES, out):
            if want.startswith("ok:"):
                assert got == {"ok": want[3:]}, (call, got)
            elif want.startswith("exc:"):
                assert got.get("exc") == want[4:], (call, got)
                assert "NUL character" in got["error"], (call, got)
            else:
                assert got.get("kind") == want, (call, got)
        not_allowed = out[0]["error"]
        assert "'add'" in not_allowed and "code_tools" in not_allowed, not_allowed
        assert "may call: echo" in out[2]["error"], out[2]
        assert out[-3]["exc"] == "AttributeError" and out[-2]["exc"] == "AttributeError", out
        assert out[-1] == {"ok": "allowed"}
        assert mcp_fixture_calls()[len(before):] == ["tools/call echo"], \
            "nothing refused reached the server"
        serves_others(s.d)


ARGUMENTS = r'''
import datetime
import numpy as np
class Opaque:
    pass
cycle = []
cycle.append(cycle)
for f in [lambda: t.call("echo", text=Opaque()),
          lambda: t.call("echo", text=float("nan")),
          lambda: t.call("echo", text=np.array([1.0, np.inf])),
          lambda: t.call("echo", text=cycle),
          lambda: t.call("echo", text={1, 2}),
          lambda: t.call("echo", text=b"bytes"),
          lambda: t.call("echo", text="a\x00b")]:
    report(f)
'''


def check_refused_arguments(out):
    assert out[0]["exc"] == "TypeError", out[0]
    assert "an argument of type Opaque cannot be sent to a tool" in out[0]["error"], out[0]
    for got in out[1:3]:
        assert got["exc"] == "ValueError" and "NaN and infinity" in got["error"], got
    assert out[3]["exc"] == "ValueError" and "Circular reference" in out[3]["error"], out[3]
    assert out[4]["exc"] == "TypeError" and "type set" in out[4]["error"], out[4]
    assert out[5]["exc"] == "TypeError" and "type bytes" in out[5]["error"], out[5]
    # JSON can carry it, the daemon's channel cannot: refused in the sandbox, with the reason.
    assert out[6]["exc"] == "ValueError" and "NUL character" in out[6]["error"], out[6]


def test_arguments_json_cannot_carry_are_refused_in_the_sandbox():
    """Works everywhere: the refusal comes before any request."""
    res = run(REPORT + ARGUMENTS + "print('alive')", timeout=30)
    assert res.status == "ok", res.describe()
    lines = res.out.splitlines()
    check_refused_arguments([json.loads(line) for line in lines[:-1]])
    assert lines[-1] == "alive"
    if VIA_DAEMON:
        serves_others(daemon())


def test_numpy_arguments_are_converted_and_bad_ones_never_sent():
    with codemode_session(["strict", "echo"]) as s:
        before = mcp_fixture_calls()
        res = s.exec(REPORT + ARGUMENTS + r'''
report(lambda: t.strict(n=np.int64(3), mode=np.str_("a"), tags=np.array(["x", "y"])))
report(lambda: t.strict(n=np.float64(2.5), mode="a"))
report(lambda: t.echo(text=datetime.date(2025, 6, 30)))
''')
        assert res["status"] == "ok", res
        out = [json.loads(line) for line in res["stdout"].splitlines()]
        check_refused_arguments(out[:7])
        assert out[7] == {"ok": {"n": 3, "mode": "a", "tags": ["x", "y"]}}, out[7]
        assert out[8]["kind"] == "invalid" and "'n'" in out[8]["error"], out[8]
        assert out[9] == {"ok": "2025-06-30"}, out[9]
        assert mcp_fixture_calls()[len(before):] == ["tools/call strict", "tools/call echo"]
        serves_others(s.d)
