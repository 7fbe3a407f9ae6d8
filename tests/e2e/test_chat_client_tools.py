"""The chat-completions gateway with the client's own function tools, approvals over HTTP and a
profile per request, against a scripted fake model (fake_llm.py) and a real daemon
(airlock_daemon.py). What the fake model receives is asserted, so that the hidden rounds the
gateway keeps across requests are checked where they matter: upstream. Loopback traffic only."""
import json
import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from airlock_daemon import Daemon  # noqa: E402
from fake_llm import _completion, answer, error, last_tool, tool_calls  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

TOKEN = "t0ken-for-the-client-tools-tests"
GW_ID = re.compile(r"call_[0-9a-f]{24}")
MCPR_ID = re.compile(r"mcpr_[0-9a-f]{24}")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
CLOCK = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}


def user(text):
    return {"role": "user", "content": text}


def start_daemon(llm, *flags):
    d = Daemon(args=["--pool-size", "0", "--llm-base-url", llm.base_url,
                     "--llm-model", "fake-model", "--chat-max-rounds", "4", *flags],
               token_env=TOKEN)
    d.start()
    return d


def stop_daemon(d):
    rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def gw(fake):
    d = start_daemon(fake)
    yield d
    stop_daemon(d)


@pytest.fixture(scope="module")
def gw_approval(fake):
    d = start_daemon(fake, "--chat-require-approval")
    yield d
    stop_daemon(d)


@pytest.fixture
def upstream(fake):
    """The fake model with an empty script; checked after the test."""
    fake.script.clear()
    fake.requests.clear()
    fake.headers.clear()
    fake.failures.clear()
    yield fake
    fake.check(all_used=False)


def chat(d, body, headers=None):
    return d.post("/v1/chat/completions", json=body, headers=headers or {}, timeout=120)


def ok(d, r):
    assert r.status_code == 200, d.why(r)
    return r.json()


def roles(req):
    return [m["role"] for m in req["messages"]]


def assistant_calls(req):
    """[(name, id)] of every tool call of every assistant message the model received."""
    return [(tc["function"]["name"], tc["id"]) for m in req["messages"]
            if m["role"] == "assistant" for tc in (m.get("tool_calls") or [])]


def results_by_id(req):
    return {m["tool_call_id"]: m["content"] for m in req["messages"] if m["role"] == "tool"}


def client_reply(reply, results):
    """What an OpenAI SDK sends back: the assistant message as received, then one tool message
    per call, in order."""
    msg = reply["choices"][0]["message"]
    out = [{k: msg[k] for k in ("role", "content", "tool_calls")}]
    for tc, text in zip(msg["tool_calls"], results):
        out.append({"role": "tool", "tool_call_id": tc["id"], "content": text})
    return out


# ---- the client's function tools ---------------------------------------------------------

def test_client_tool_round_trip_restores_the_hidden_rounds(gw, upstream):
    def declares_both(req):
        names = [t["function"]["name"] for t in req["tools"]]
        assert "run_python" in names and names[-1] == "get_weather", names
        assert "airlock" not in req and "session" not in req
        return tool_calls(("get_weather", {"city": "Paris"}))

    upstream.add(tool_calls(("run_python", {"code": "secret = 41"})), declares_both)
    first = [user("weather in Paris, and remember 41")]
    r1 = ok(gw, chat(gw, {"messages": first, "tools": [WEATHER]}))
    choice = r1["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    # Only the client's call: an SDK would otherwise try to run run_python itself.
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
    assert GW_ID.fullmatch(calls[0]["id"]) and calls[0]["type"] == "function"
    upstream_id = upstream.requests[1]["messages"][-1]["tool_call_id"]  # run_python's result
    session = r1["airlock"]["session"]
    assert session and r1["airlock"]["rounds"] == 1
    assert [c["name"] for c in r1["airlock"]["tool_calls"]] == ["run_python"]
    assert r1["airlock"]["stopped"] is None

    def restored(req):
        # The model sees its own conversation: the hidden run_python round, its full answer
        # with the upstream's id, and the client's result answering that id.
        assert roles(req) == ["user", "assistant", "tool", "assistant", "tool"], roles(req)
        (py, py_id), (weather, weather_id) = assistant_calls(req)
        assert (py, weather) == ("run_python", "get_weather")
        assert py_id == upstream_id and not GW_ID.fullmatch(weather_id)
        results = results_by_id(req)
        assert results[weather_id] == "sunny, 21 C"
        assert py_id in results
        return tool_calls(("run_python", {"code": "secret + 1"}))

    def same_session(req):
        assert "42" in last_tool(req), last_tool(req)  # secret still defined
        return answer("Sunny in Paris; 41 + 1 is 42")

    upstream.add(restored, same_session)
    body2 = {"messages": first + client_reply(r1, ["sunny, 21 C"]), "tools": [WEATHER]}
    r2 = ok(gw, chat(gw, body2))
    upstream.check()
    assert r2["choices"][0]["finish_reason"] == "stop"
    assert r2["choices"][0]["message"]["content"] == "Sunny in Paris; 41 + 1 is 42"
    assert r2["airlock"]["session"] == session  # the stored one: the request named none

    # A suspended turn is used once: the same continuation again goes upstream as it is.
    def as_sent(req):
        assert req["messages"] == body2["messages"]
        return answer("again")

    upstream.add(as_sent)
    r3 = ok(gw, chat(gw, body2))
    upstream.check()
    assert r3["airlock"]["session"] is None


def test_unknown_tool_call_id_goes_upstream_as_it_is(gw, upstream):
    messages = [user("weather?"),
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_" + "ab" * 12, "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
                {"role": "tool", "tool_call_id": "call_" + "ab" * 12, "content": "snow"}]

    def unchanged(req):
        assert req["messages"] == messages
        return answer("snow in Oslo")

    upstream.add(unchanged)
    r = ok(gw, chat(gw, {"messages": messages, "tools": [WEATHER]}))
    upstream.check()
    assert r["choices"][0]["message"]["content"] == "snow in Oslo"
    assert r["airlock"]["session"] is None  # nothing ran, no session was made


def reused_ids(*names):
    """An answer whose calls all have the id "call_0", as some servers send."""
    msg = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function",
         "function": {"name": n, "arguments": "{}"}} for n in names]}
    return {"status": 200, "body": _completion(msg, "tool_calls")}


def test_ids_are_unique_even_when_the_upstream_reuses_them(gw, upstream):
    upstream.add(reused_ids("get_time"), reused_ids("get_time"), reused_ids("get_time", "get_time"))
    replies = [ok(gw, chat(gw, {"messages": [user(f"time {i}")], "tools": [CLOCK]}))
               for i in range(3)]
    ids = [tc["id"] for r in replies for tc in r["choices"][0]["message"]["tool_calls"]]
    assert len(ids) == 4 and len(set(ids)) == 4, ids
    assert all(GW_ID.fullmatch(i) for i in ids)

    def answered_apart(req):
        # Two calls with one upstream id in one answer: each gets its own result.
        calls = assistant_calls(req)
        assert len({i for _, i in calls}) == 2, calls
        assert set(results_by_id(req)) == {i for _, i in calls}
        return answer("two times")

    upstream.add(answered_apart)
    body = {"messages": [user("time 2")] + client_reply(replies[2], ["noon", "one"]),
            "tools": [CLOCK]}
    r = ok(gw, chat(gw, body))
    upstream.check()
    assert r["choices"][0]["message"]["content"] == "two times"


def test_mixed_turn_runs_airlocks_call_and_returns_the_clients(gw, upstream):
    upstream.add(tool_calls(("run_python", {"code": "v = 7"}), ("get_weather", {"city": "Rome"}),
                            content="Let me check."))
    first = [user("mixed")]
    r1 = ok(gw, chat(gw, {"messages": first, "tools": [WEATHER]}))
    msg = r1["choices"][0]["message"]
    assert msg["content"] == "Let me check."
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather"]
    assert [c["name"] for c in r1["airlock"]["tool_calls"]] == ["run_python"]

    def whole_answer(req):
        assert roles(req) == ["user", "assistant", "tool", "tool"], roles(req)
        assert [n for n, _ in assistant_calls(req)] == ["run_python", "get_weather"]
        (_, py_id), (_, w_id) = assistant_calls(req)
        assert results_by_id(req)[w_id] == "rain"
        assert py_id in results_by_id(req)
        return tool_calls(("run_python", {"code": "v * 6"}))

    def check(req):
        assert "42" in last_tool(req)
        return answer("rain, 42")

    upstream.add(whole_answer, check)
    r2 = ok(gw, chat(gw, {"messages": first + client_reply(r1, ["rain"]), "tools": [WEATHER]}))
    upstream.check()
    assert r2["airlock"]["session"] == r1["airlock"]["session"]


def test_a_chain_of_client_calls_keeps_every_hidden_round(gw, upstream):
    upstream.add(tool_calls(("run_python", {"code": "a = 1"})),
                 tool_calls(("get_weather", {"city": "Lima"})))
    first = [user("chain")]
    r1 = ok(gw, chat(gw, {"messages": first, "tools": [WEATHER, CLOCK]}))
    history = first + client_reply(r1, ["warm"])

    upstream.add(tool_calls(("run_python", {"code": "b = a + 1"})),
                 tool_calls(("get_time", {})))
    r2 = ok(gw, chat(gw, {"messages": history, "tools": [WEATHER, CLOCK]}))
    assert [c["function"]["name"] for c in r2["choices"][0]["message"]["tool_calls"]] == \
        ["get_time"]
    history += client_reply(r2, ["noon"])

    def everything(req):
        assert [n for n, _ in assistant_calls(req)] == \
            ["run_python", "get_weather", "run_python", "get_time"], assistant_calls(req)
        assert roles(req) == ["user"] + ["assistant", "tool"] * 4, roles(req)
        assert not any(GW_ID.fullmatch(i) for _, i in assistant_calls(req))
        return tool_calls(("run_python", {"code": "a + b"}))

    def check(req):
        assert "3" in last_tool(req)
        return answer("3")

    upstream.add(everything, check)
    r3 = ok(gw, chat(gw, {"messages": history, "tools": [WEATHER, CLOCK]}))
    upstream.check()
    assert r3["choices"][0]["message"]["content"] == "3"
    assert r3["airlock"]["session"] == r1["airlock"]["session"]


def test_a_known_call_without_a_result_is_refused(gw, upstream):
    upstream.add(tool_calls(("get_weather", {"city": "Bern"})))
    first = [user("bern")]
    r1 = ok(gw, chat(gw, {"messages": first, "tools": [WEATHER]}))
    r = chat(gw, {"messages": first + client_reply(r1, [])[:1] + [user("well?")],
                  "tools": [WEATHER]})
    assert r.status_code == 400, gw.why(r)
    err = r.json()["error"]
    assert err["param"] == "messages[1]"
    assert r1["choices"][0]["message"]["tool_calls"][0]["id"] in err["message"]
    assert len(upstream.requests) == 1


def test_a_continuation_that_fails_upstream_can_be_retried(gw, upstream):
    upstream.add(tool_calls(("run_python", {"code": "z = 5"})),
                 tool_calls(("get_weather", {"city": "Kyiv"})))
    first = [user("retry")]
    r1 = ok(gw, chat(gw, {"messages": first, "tools": [WEATHER]}))
    body = {"messages": first + client_reply(r1, ["cold"]), "tools": [WEATHER]}

    upstream.add(error(500, "overloaded"))
    r = chat(gw, body)
    assert r.status_code == 502
    assert r.json()["airlock"]["session"] == r1["airlock"]["session"]

    def restored(req):
        assert [n for n, _ in assistant_calls(req)] == ["run_python", "get_weather"]
        return answer("cold")

    upstream.add(restored)
    r2 = ok(gw, chat(gw, body))  # what an OpenAI SDK does on a 502
    upstream.check()
    assert r2["airlock"]["session"] == r1["airlock"]["session"]


def test_tool_choice_and_parallel_tool_calls_pass_through(gw, upstream):
    forced = {"type": "function", "function": {"name": "get_weather"}}

    def first(req):
        assert req["tool_choice"] == forced and req["parallel_tool_calls"] is False
        return tool_calls(("get_weather", {"city": "Nice"}))

    upstream.add(first)
    r = ok(gw, chat(gw, {"messages": [user("nice")], "tools": [WEATHER],
                         "tool_choice": forced, "parallel_tool_calls": False}))
    assert r["choices"][0]["finish_reason"] == "tool_calls"

    # A choice that forces a call is sent with the first upstream request only, or the
    # gateway's own rounds could never end.
    def forced_once(req):
        assert req["tool_choice"] == "required"
        return tool_calls(("run_python", {"code": "1"}))

    def free_after(req):
        assert "tool_choice" not in req and req["parallel_tool_calls"] is True
        return answer("done")

    upstream.add(forced_once, free_after)
    r = ok(gw, chat(gw, {"messages": [user("go")], "tool_choice": "required",
                         "parallel_tool_calls": True}))
    upstream.check()
    assert r["choices"][0]["message"]["content"] == "done"


def test_a_client_call_streams_as_tool_call_deltas(gw, upstream):
    upstream.add(tool_calls(("get_weather", {"city": "Graz"})))
    r = gw.post("/v1/chat/completions", timeout=120,
                json={"messages": [user("graz")], "tools": [WEATHER], "stream": True})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    delta = chunks[0]["choices"][0]["delta"]
    assert delta["tool_calls"][0]["index"] == 0
    assert GW_ID.fullmatch(delta["tool_calls"][0]["id"])
    assert delta["tool_calls"][0]["function"]["name"] == "get_weather"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


BAD_TOOLS = [
    ({"tools": [{"type": "custom", "name": "grammar"}]}, "tools[0]", "custom"),
    ({"tools": ["get_weather"]}, "tools[0]", "must be an object"),
    ({"tools": {"type": "function"}}, "tools", "array"),
    ({"tools": [{"type": "function"}]}, "tools[0]", "function"),
    ({"tools": [{"function": {"name": "f"}}]}, "tools[0]", "type"),
    ({"tools": [{"type": "function", "function": {"name": "no spaces"}}]}, "tools[0]", "name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]},
     "tools[0]", "parameters"),
    ({"tools": [{"type": "function", "function": {"name": "run_python"}}]}, "tools[0]",
     "run_python"),
    ({"tools": [WEATHER, CLOCK, WEATHER]}, "tools[2]", "twice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice", "nope"),
    ({"tool_choice": "sometimes"}, "tool_choice", "sometimes"),
    ({"tools": [WEATHER], "tool_choice": {"type": "custom", "custom": {"name": "x"}}},
     "tool_choice", "function"),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "true or false"),
    ({"functions": [WEATHER["function"]]}, "functions", "tools"),
    ({"function_call": "auto"}, "function_call", "tools"),
]


@pytest.mark.parametrize("extra,param,words", BAD_TOOLS, ids=[b[1] + ":" + b[2] for b in BAD_TOOLS])
def test_bad_tools_are_refused(gw, upstream, extra, param, words):
    r = chat(gw, {"messages": [user("hi")], **extra})
    assert r.status_code == 400, gw.why(r)
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param, err
    assert words in err["message"], err
    assert upstream.requests == []


# ---- approvals over HTTP -----------------------------------------------------------------

def approval(item, approve, reason=None):
    out = {"type": "mcp_approval_response", "approval_request_id": item["id"], "approve": approve}
    if reason is not None:
        out["reason"] = reason
    return out


def test_approval_approve_runs_the_code(gw_approval, upstream):
    code = "open('/work/approved.txt', 'w').write('yes'); 6 * 7"
    upstream.add(tool_calls(("run_python", {"code": code}), content="Running it."))
    messages = [user("compute")]
    r1 = ok(gw_approval, chat(gw_approval, {"messages": messages}))
    assert r1["choices"][0]["finish_reason"] == "stop"
    assert r1["airlock"]["stopped"] == "approval_required"
    assert r1["airlock"]["session"] is None and r1["airlock"]["tool_calls"] == []  # nothing ran
    (item,) = r1["airlock"]["pending"]
    assert set(item) == {"type", "id", "server_label", "name", "arguments"}
    assert item["type"] == "mcp_approval_request" and MCPR_ID.fullmatch(item["id"])
    assert item["server_label"] == "airlock" and item["name"] == "run_python"
    assert json.loads(item["arguments"]) == {"code": code}
    content = r1["choices"][0]["message"]["content"]
    assert content.startswith("Running it.") and f"```python\n{code}\n```" in content

    def ran(req):
        assert [n for n, _ in assistant_calls(req)] == ["run_python"]
        assert "42" in last_tool(req), last_tool(req)
        return answer("42, and approved.txt written")

    upstream.add(ran)
    r2 = ok(gw_approval, chat(gw_approval, {"messages": messages,
                                            "airlock": {"approvals": [approval(item, True)]}}))
    upstream.check()
    assert r2["choices"][0]["message"]["content"] == "42, and approved.txt written"
    assert r2["airlock"]["stopped"] is None
    session = r2["airlock"]["session"]
    assert [c["name"] for c in r2["airlock"]["tool_calls"]] == ["run_python"]
    f = gw_approval.get(f"/v1/sessions/{session}/files/approved.txt")
    assert f.status_code == 200 and f.content == b"yes"

    # Used once: the same approval again is an unknown id.
    r3 = chat(gw_approval, {"messages": messages,
                            "airlock": {"approvals": [approval(item, True)]}})
    assert r3.status_code == 400 and r3.json()["error"]["param"] == "airlock.approvals[0]"


def test_approval_deny_and_partial(gw_approval, upstream):
    upstream.add(tool_calls(("write_file", {"path": "note.txt", "content": "hi"}),
                            ("run_shell", {"command": "rm -rf /work/*"}),
                            ("run_python", {"code": "print('second')"})))
    messages = [user("clean up")]
    r1 = ok(gw_approval, chat(gw_approval, {"messages": messages}))
    items = r1["airlock"]["pending"]
    assert [i["name"] for i in items] == ["run_shell", "run_python"]  # write_file needs none
    assert r1["airlock"]["tool_calls"] == []  # nothing of that answer ran, not even write_file

    def told(req):
        results = list(results_by_id(req).values())
        assert len(results) == 3
        assert "note.txt" in results[0]                        # ran, in the model's order
        assert results[1] == "the user denied this call: too dangerous"
        assert results[2] == ("the user denied this call: no mcp_approval_response was sent "
                              "for it")                        # not answered: denied
        return answer("I did not delete anything")

    upstream.add(told)
    r2 = ok(gw_approval, chat(gw_approval, {
        "messages": messages,
        "airlock": {"approvals": [approval(items[0], False, "too dangerous")]}}))
    upstream.check()
    assert r2["choices"][0]["message"]["content"] == "I did not delete anything"
    calls = r2["airlock"]["tool_calls"]
    assert [(c["name"], c.get("declined", False)) for c in calls] == \
        [("write_file", False), ("run_shell", True), ("run_python", True)]


def test_approval_then_client_tool(gw_approval, upstream):
    upstream.add(tool_calls(("run_python", {"code": "w = 'ok'"}), ("get_weather", {"city": "Riga"})))
    messages = [user("both")]
    r1 = ok(gw_approval, chat(gw_approval, {"messages": messages, "tools": [WEATHER]}))
    (item,) = r1["airlock"]["pending"]
    # Approved: run_python runs, then the client's call goes to the client.
    r2 = ok(gw_approval, chat(gw_approval, {"messages": messages, "tools": [WEATHER],
                                            "airlock": {"approvals": [approval(item, True)]}}))
    assert r2["choices"][0]["finish_reason"] == "tool_calls"
    assert [c["function"]["name"] for c in r2["choices"][0]["message"]["tool_calls"]] == \
        ["get_weather"]
    assert [c["name"] for c in r2["airlock"]["tool_calls"]] == ["run_python"]

    def whole(req):
        assert [n for n, _ in assistant_calls(req)] == ["run_python", "get_weather"]
        return tool_calls(("run_python", {"code": "w"}))

    upstream.add(whole)
    r3 = ok(gw_approval, chat(gw_approval, {"messages": messages + client_reply(r2, ["fog"]),
                                            "tools": [WEATHER]}))
    upstream.check()
    # The next run_python needs approval again; it belongs to the same session.
    assert r3["airlock"]["stopped"] == "approval_required"
    assert r3["airlock"]["session"] == r2["airlock"]["session"]


BAD_APPROVALS = [
    ([{"type": "mcp_approval_response", "approval_request_id": "mcpr_" + "0" * 24,
       "approve": True}], "unknown or expired"),
    ([{"type": "mcp_approval_response", "approve": True}], "approval_request_id"),
    ([{"type": "mcp_approval_request", "approval_request_id": "mcpr_x", "approve": True}],
     "mcp_approval_response"),
    ([{"type": "mcp_approval_response", "approval_request_id": "mcpr_x", "approve": "yes"}],
     "approve"),
    ([{"type": "mcp_approval_response", "approval_request_id": "mcpr_x", "approve": True,
       "extra": 1}], "extra"),
    (["mcpr_x"], "mcp_approval_response"),
]


@pytest.mark.parametrize("approvals,words", BAD_APPROVALS, ids=[b[1] for b in BAD_APPROVALS])
def test_bad_approvals_are_refused(gw_approval, upstream, approvals, words):
    r = chat(gw_approval, {"messages": [user("x")], "airlock": {"approvals": approvals}})
    assert r.status_code == 400, gw_approval.why(r)
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == "airlock.approvals[0]"
    assert words in err["message"], err
    assert upstream.requests == []


# ---- the profile, and the airlock member ---------------------------------------------------

def session_profile(d, session):
    r = d.get(f"/v1/sessions/{session}")
    assert r.status_code == 200, d.why(r)
    return r.json()["profile"]


@pytest.mark.parametrize("how", ["body", "header"])
def test_profile_per_request(gw, upstream, how):
    def forwarded(req):
        assert "airlock" not in req
        return tool_calls(("run_python", {"code": "1"}))

    upstream.add(forwarded, answer("ok"))
    body = {"messages": [user("p")]}
    headers = {}
    if how == "body":
        body["airlock"] = {"profile": "minimal"}
    else:
        headers["X-Airlock-Profile"] = "minimal"
    r = ok(gw, chat(gw, body, headers))
    upstream.check()
    session = r["airlock"]["session"]
    assert session_profile(gw, session) == "minimal"

    # airlock.session continues it like the top-level member; naming its profile is fine.
    upstream.add(tool_calls(("run_python", {"code": "2"})), answer("again"))
    r = ok(gw, chat(gw, {"messages": [user("q")],
                         "airlock": {"session": session, "profile": "minimal"}}))
    upstream.check()
    assert r["airlock"]["session"] == session


def test_profile_and_session_conflicts(gw, upstream):
    upstream.add(tool_calls(("run_python", {"code": "1"})), answer("ok"))
    r = ok(gw, chat(gw, {"messages": [user("p")], "airlock": {"profile": "minimal"}}))
    session = r["airlock"]["session"]
    upstream.requests.clear()

    r = chat(gw, {"messages": [user("x")], "airlock": {"profile": "minimal"}},
             {"X-Airlock-Profile": "default"})
    assert r.status_code == 400 and "different" in r.json()["error"]["message"]

    r = chat(gw, {"messages": [user("x")], "airlock": {"profile": "no-such-profile"}})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "airlock.profile" and "no-such-profile" in err["message"]
    assert "default" in err["message"] and "minimal" in err["message"]  # what exists

    r = chat(gw, {"messages": [user("x")], "session": session},
             {"X-Airlock-Profile": "default"})
    assert r.status_code == 409, gw.why(r)
    assert "'minimal'" in r.json()["error"]["message"]

    r = chat(gw, {"messages": [user("x")], "session": session,
                  "airlock": {"session": "s-" + "0" * 24}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "airlock.session"

    r = chat(gw, {"messages": [user("x")], "airlock": {"profile": "minimal", "temperature": 1}})
    assert r.status_code == 400 and "airlock.temperature" in r.json()["error"]["message"]

    r = chat(gw, {"messages": [user("x")], "airlock": "minimal"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "airlock"
    assert upstream.requests == []
