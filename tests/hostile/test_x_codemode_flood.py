"""Extra (issue 9, Code Mode): user code floods the channel, calling the runner's channel
function itself (airlock_cell._channel) in a loop with tool calls (allowed and refused ones) and
tool-list requests. The per-cell cap (the profile's limits.tool_calls) stops the calls, an equal
cap of its own the list requests; every request past them gets a clear "limit" error, the
server sees only the calls within the cap, the next cell has the same budget again, and other
sessions are still served."""
import concurrent.futures
import json

from conftest import codemode_session, custom_profile, mcp_fixture_calls, serves_others

FLOOD = r'''
import json
import airlock_cell
def flood(request, n):
    counts, message = {}, None
    for _ in range(n):
        r = json.loads(airlock_cell._channel(json.dumps(request)))
        key = r.get("kind") or "ok"
        counts[key] = counts.get(key, 0) + 1
        if key == "limit":
            message = r["error"]
    return counts, message
refused, _ = flood({"op": "tool_call", "name": "add", "arguments": {"a": 1, "b": 2}}, 15)
calls, call_msg = flood({"op": "tool_call", "name": "echo", "arguments": {"text": "x"}}, 300)
lists, list_msg = flood({"op": "tool_list"}, 300)
print(json.dumps({"calls": calls, "refused": refused, "lists": lists, "call_msg": call_msg,
                  "list_msg": list_msg}))
'''


def test_a_flood_of_calls_meets_the_per_cell_cap():
    custom_profile("hostile-codemode-cap", limits={"tool_calls": 40})
    with codemode_session(["echo"], profile="hostile-codemode-cap") as s:
        before = mcp_fixture_calls()
        for cell in range(2):  # the second cell has the same budget again, no more
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                # Another session is served while the flood runs, not only after it.
                bystander = pool.submit(serves_others, s.d) if cell == 0 else None
                res = s.exec(FLOOD, timeout=120)
                if bystander:
                    bystander.result(timeout=120)
            assert res["status"] == "ok", res
            out = json.loads(res["stdout"])
            # Refused calls count against the cap too: 15 of the 40 are gone.
            assert out["refused"] == {"not_allowed": 15}, out
            assert out["calls"] == {"ok": 25, "limit": 275}, out
            assert out["lists"] == {"ok": 40, "limit": 260}, out
            assert "more than 40 tool calls" in out["call_msg"], out
            assert "limits.tool_calls" in out["call_msg"], out
            assert "tool list more than 40 times" in out["list_msg"], out
            assert res["usage"]["tool_calls"] == 40, res["usage"]
        # 25 calls a cell, and the bystander's one.
        assert mcp_fixture_calls()[len(before):] == ["tools/call echo"] * 51
        serves_others(s.d)
