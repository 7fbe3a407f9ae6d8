"""POST /v1/responses (and GET, DELETE, input_items) against a scripted fake Chat Completions
model (fake_llm.py) and a real daemon (airlock_daemon.py): the request members, the tool loop
with code_interpreter_call items, containers made on the first call and kept by
previous_response_id (also across a restart), the client's function calls, streaming events,
citations of the files code made, and every error. What the fake model receives is asserted,
since that is where most of the mapping between the two APIs shows. Loopback traffic only."""
import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from airlock_daemon import Daemon, restart_daemon  # noqa: E402
from fake_llm import _completion, answer, error, last_tool, tool_call, tool_calls  # noqa: E402,F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

TOKEN = "t0ken-for-the-responses-tests"
RESP_ID = re.compile(r"resp_[0-9a-f]{24}")
CI_ID = re.compile(r"ci_[0-9a-f]{24}")
CNTR_ID = re.compile(r"cntr_[0-9a-f]{24}")
CI = {"type": "code_interpreter", "container": {"type": "auto"}}
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}
ROUNDS = 3


def start_daemon(llm_url, *flags, workdir=None, pool="1"):
    args = ["--pool-size", pool, "--chat-max-rounds", str(ROUNDS), *flags]
    if llm_url:
        args += ["--llm-base-url", llm_url, "--llm-model", "fake-model"]
    d = Daemon(args=args, token_env=TOKEN, workdir=workdir)
    d.start()
    return d


def stop_daemon(d):
    rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def daemon(fake):
    d = start_daemon(fake.base_url)
    yield d
    stop_daemon(d)


@pytest.fixture
def llm(fake):
    """The module's fake model with an empty script; checked after the test."""
    fake.script.clear()
    fake.requests.clear()
    fake.headers.clear()
    fake.failures.clear()
    yield fake
    fake.check()


def create(d, body, **kw):
    return d.post("/v1/responses", json=body, **kw)


def ok(d, body):
    r = create(d, body)
    assert r.status_code == 200, d.why(r)
    return r.json()


def err(r, status, param=None, words=()):
    assert r.status_code == status, r.text
    e = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"}, e
    if param is not None:
        assert e["param"] == param, e
    for w in words:
        assert w in e["message"], e
    return e


def stdout(req):
    """What the last run_python call printed, as the model was told."""
    text = last_tool(req)
    assert text.startswith("stdout:\n"), text
    return text[len("stdout:\n"):].strip()


def items(resp, type_):
    return [o for o in resp["output"] if o["type"] == type_]


def tool_names(req):
    return sorted(t["function"]["name"] for t in req.get("tools", []))


def sse(r):
    """(event, data) pairs of a text/event-stream answer."""
    out = []
    for block in r.text.split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((fields["event"], json.loads(fields["data"])))
    return out


# ---- answers without code -----------------------------------------------------------------

def test_a_plain_answer_makes_no_container(daemon, llm):
    llm.add(answer("Hello there"))
    before = daemon.get("/v1/sessions").json()
    resp = ok(daemon, {"model": "gpt-test", "input": "say hello",
                       "instructions": "Be brief.", "metadata": {"k": "v"}})
    assert RESP_ID.fullmatch(resp["id"])
    assert resp["object"] == "response" and resp["status"] == "completed"
    assert resp["model"] == "gpt-test" and resp["instructions"] == "Be brief."
    assert resp["metadata"] == {"k": "v"} and resp["error"] is None
    assert resp["incomplete_details"] is None and isinstance(resp["created_at"], int)
    [msg] = resp["output"]
    assert msg["type"] == "message" and msg["role"] == "assistant"
    assert msg["status"] == "completed" and msg["id"].startswith("msg_")
    assert msg["content"] == [{"type": "output_text", "text": "Hello there", "annotations": [],
                               "logprobs": []}]
    assert resp["output_text"] == "Hello there"
    assert resp["usage"] == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                             "input_tokens_details": {"cached_tokens": 0,
                                                      "cache_write_tokens": 0},
                             "output_tokens_details": {"reasoning_tokens": 0}}
    up = llm.requests[0]
    assert up["model"] == "gpt-test"
    assert up["messages"] == [{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": "say hello"}]
    assert "tools" not in up and "tool_choice" not in up
    assert daemon.get("/v1/sessions").json() == before      # no sandbox for "hello"


def test_request_members_go_upstream(daemon, llm):
    llm.add(answer("{}"))
    resp = ok(daemon, {"input": [{"role": "developer", "content": "dev says"},
                                 {"type": "message", "role": "user",
                                  "content": [{"type": "input_text", "text": "a"},
                                              {"type": "input_text", "text": "b"}]}],
                       "max_output_tokens": 77, "temperature": 0.5, "top_p": 0.9,
                       "parallel_tool_calls": False, "user": "u1",
                       "text": {"format": {"type": "json_schema", "name": "x",
                                           "schema": {"type": "object"}, "strict": True}},
                       "reasoning": {"effort": "low"}, "store": False,
                       "service_tier": "auto", "truncation": "auto", "prompt_cache_key": "p"})
    up = llm.requests[0]
    assert up["model"] == "fake-model"                 # the daemon's --llm-model
    assert up["max_tokens"] == 77 and up["temperature"] == 0.5 and up["top_p"] == 0.9
    assert up["parallel_tool_calls"] is False and up["user"] == "u1"
    assert up["reasoning_effort"] == "low"
    assert up["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object"}, "strict": True}}
    assert up["messages"] == [{"role": "system", "content": "dev says"},
                              {"role": "user", "content": "ab"}]
    for gone in ("service_tier", "truncation", "prompt_cache_key", "store", "input"):
        assert gone not in up
    assert resp["max_output_tokens"] == 77 and resp["temperature"] == 0.5
    assert resp["store"] is False and resp["truncation"] == "auto"


def test_the_answer_can_run_out_of_tokens(daemon, llm):
    body = _completion({"role": "assistant", "content": "cut sh"}, "length")
    llm.add({"status": 200, "body": body})
    resp = ok(daemon, {"input": "write a lot", "max_output_tokens": 3})
    assert resp["status"] == "incomplete"
    assert resp["incomplete_details"] == {"reason": "max_output_tokens"}
    assert resp["output_text"] == "cut sh"


# ---- code_interpreter ---------------------------------------------------------------------

def test_code_interpreter_runs_code_in_a_new_container(daemon, llm):
    def second(req):
        assert "42" in last_tool(req)
        return answer("It is 42.")

    llm.add(tool_call("run_python", {"code": "print(6*7)"}), second)
    resp = ok(daemon, {"input": "6*7?", "tools": [CI]})
    up = llm.requests[0]
    assert tool_names(up) == ["run_python"]             # only the code tool
    [call] = items(resp, "code_interpreter_call")
    assert CI_ID.fullmatch(call["id"]) and call["code"] == "print(6*7)"
    assert call["status"] == "completed" and CNTR_ID.fullmatch(call["container_id"])
    assert call["outputs"] is None                      # not asked for with include
    assert resp["output"][-1]["type"] == "message" and resp["output_text"] == "It is 42."
    assert resp["usage"]["total_tokens"] == 30          # both rounds
    c = daemon.get(f"/v1/containers/{call['container_id']}")
    assert c.status_code == 200, c.text
    # The stored response keeps the outputs: include asks for them.
    got = daemon.get(f"/v1/responses/{resp['id']}",
                     params={"include[]": "code_interpreter_call.outputs"}).json()
    assert items(got, "code_interpreter_call")[0]["outputs"] == [{"type": "logs",
                                                                  "logs": "42\n"}]
    assert items(daemon.get(f"/v1/responses/{resp['id']}").json(),
                 "code_interpreter_call")[0]["outputs"] is None


def test_include_outputs_and_the_text_before_a_call(daemon, llm):
    llm.add(tool_calls(("run_python", {"code": "1/0"}), content="Let me try."),
            answer("It failed."))
    resp = ok(daemon, {"input": "divide", "tools": [CI],
                       "include": ["code_interpreter_call.outputs"]})
    assert [o["type"] for o in resp["output"]] == ["message", "code_interpreter_call",
                                                   "message"]
    assert resp["output"][0]["content"][0]["text"] == "Let me try."
    [call] = items(resp, "code_interpreter_call")
    [logs] = call["outputs"]
    assert logs["type"] == "logs" and "ZeroDivisionError" in logs["logs"]
    assert resp["output_text"] == "Let me try.It failed."


def test_previous_response_id_continues_the_conversation_and_container(daemon, llm):
    llm.add(tool_call("run_python", {"code": "x = 41"}), answer("x is set"))
    first = ok(daemon, {"input": "set x", "tools": [CI], "instructions": "first rules"})
    cid = items(first, "code_interpreter_call")[0]["container_id"]

    def check(req):
        msgs = req["messages"]
        assert msgs[0] == {"role": "system", "content": "second rules"}
        assert "first rules" not in json.dumps(msgs)    # instructions are not carried over
        assert msgs[1] == {"role": "user", "content": "set x"}
        assert msgs[2]["tool_calls"][0]["function"]["name"] == "run_python"
        assert msgs[3]["role"] == "tool"
        assert msgs[4] == {"role": "assistant", "content": "x is set"}
        assert msgs[5] == {"role": "user", "content": "and now?"}
        return tool_call("run_python", {"code": "print(x + 1)"})

    llm.add(check, lambda req: answer("42") if "42" in last_tool(req) else answer("lost"))
    second = ok(daemon, {"input": "and now?", "tools": [CI], "instructions": "second rules",
                         "previous_response_id": first["id"],
                         "include": ["code_interpreter_call.outputs"]})
    assert second["previous_response_id"] == first["id"]
    call = items(second, "code_interpreter_call")[0]
    assert call["container_id"] == cid and call["outputs"][0]["logs"] == "42\n"
    assert second["output_text"] == "42"


def test_a_named_container_is_used(daemon, llm):
    c = daemon.post("/v1/containers", json={"name": "mine"})
    assert c.status_code == 200, c.text
    cid = c.json()["id"]
    llm.add(tool_call("run_python", {"code": "open('/mnt/data/mark', 'w').write('m')"}),
            answer("done"))
    resp = ok(daemon, {"input": "mark it",
                       "tools": [{"type": "code_interpreter", "container": cid}]})
    assert items(resp, "code_interpreter_call")[0]["container_id"] == cid
    files = daemon.get(f"/v1/containers/{cid}/files").json()["data"]
    assert "/mnt/data/mark" in [f["path"] for f in files]
    daemon.delete(f"/v1/containers/{cid}")


def test_file_ids_are_copied_into_the_new_container(daemon, llm):
    up = daemon.post("/v1/files", files={"file": ("sales.csv", b"q,n\n3,7\n")},
                     data={"purpose": "user_data"})
    assert up.status_code == 200, up.text
    fid = up.json()["id"]
    llm.add(tool_call("run_python", {"code": "print(open('/mnt/data/sales.csv').read())"}),
            lambda req: answer(stdout(req)))
    resp = ok(daemon, {"input": "read it", "tools": [{"type": "code_interpreter", "container": {
        "type": "auto", "file_ids": [fid]}}]})
    assert resp["output_text"] == "q,n\n3,7"
    err(create(daemon, {"input": "x", "tools": [{"type": "code_interpreter", "container": {
        "type": "auto", "file_ids": ["file-" + "0" * 24]}}]}), 404,
        "tools[0].container.file_ids")
    assert len(llm.requests) == 2                       # the unknown file: nothing upstream


def test_a_container_that_cannot_be_made_is_the_answer(daemon, llm):
    """The default profile's sandboxes have 2 GiB: a 64g container is refused when the model
    first calls the tool, and that refusal is the request's answer."""
    def told(req):
        assert "cannot create the container" in last_tool(req)
        return answer("could not run")

    llm.add(tool_call("run_python", {"code": "print(1)"}), told)
    e = err(create(daemon, {"input": "x", "tools": [{"type": "code_interpreter", "container": {
        "type": "auto", "memory_limit": "64g"}}]}), 400, "tools[0].container.memory_limit")
    assert "memory" in e["message"]


def test_files_the_code_made_are_cited_and_downloadable(daemon, llm):
    code = ("import matplotlib.pyplot as plt\n"
            "open('/mnt/data/out.csv', 'w').write('a,b\\n1,2\\n')\n"
            "plt.plot([1, 2, 3]); plt.show()")
    text = "Saved [out.csv](sandbox:/mnt/data/out.csv) and a plot."
    llm.add(tool_call("run_python", {"code": code}), answer(text))
    resp = ok(daemon, {"input": "make a csv and a plot", "tools": [CI],
                       "include": ["code_interpreter_call.outputs"]})
    [call] = items(resp, "code_interpreter_call")
    images = [o for o in call["outputs"] if o["type"] == "image"]
    assert len(images) == 1, call["outputs"]
    url = images[0]["url"]
    assert url.startswith(f"{daemon.url}/v1/containers/{call['container_id']}/files/cfile_")
    img = daemon.http.get(url, timeout=30)
    assert img.status_code == 200 and img.content.startswith(b"\x89PNG"), img.text[:200]
    msg = resp["output"][-1]
    [note] = msg["content"][0]["annotations"]
    assert note["type"] == "container_file_citation"
    assert note["container_id"] == call["container_id"] and note["filename"] == "out.csv"
    start = text.index("sandbox:/mnt/data/out.csv")
    assert (note["start_index"], note["end_index"]) == (start, start + len(
        "sandbox:/mnt/data/out.csv"))
    got = daemon.get(f"/v1/containers/{call['container_id']}/files/{note['file_id']}/content")
    assert got.status_code == 200 and got.content == b"a,b\n1,2\n"


def test_tool_choice_forces_the_code_tool_on_the_first_request_only(daemon, llm):
    llm.add(tool_call("run_python", {"code": "print(1)"}), answer("ran"))
    ok(daemon, {"input": "run", "tools": [CI], "tool_choice": {"type": "code_interpreter"}})
    assert llm.requests[0]["tool_choice"] == {"type": "function",
                                              "function": {"name": "run_python"}}
    assert "tool_choice" not in llm.requests[1]


def test_the_round_cap_makes_an_incomplete_response(daemon, llm):
    llm.add(*[tool_call("run_python", {"code": f"print({i})"}) for i in range(ROUNDS + 1)])
    resp = ok(daemon, {"input": "loop", "tools": [CI]})
    assert resp["status"] == "incomplete"
    assert resp["incomplete_details"] == {"reason": "max_tool_rounds"}
    assert len(items(resp, "code_interpreter_call")) == ROUNDS
    assert len(llm.requests) == ROUNDS + 1


def test_max_tool_calls_lowers_the_cap(daemon, llm):
    llm.add(tool_call("run_python", {"code": "print(1)"}),
            tool_call("run_python", {"code": "print(2)"}))
    resp = ok(daemon, {"input": "loop", "tools": [CI], "max_tool_calls": 1})
    assert resp["status"] == "incomplete" and len(llm.requests) == 2


def test_a_call_of_another_airlock_tool_does_not_run(daemon, llm):
    def told(req):
        assert "no tool named 'run_shell'" in last_tool(req)
        return answer("sorry")

    llm.add(tool_call("run_shell", {"command": "echo hi"}), told)
    resp = ok(daemon, {"input": "shell", "tools": [CI]})
    assert items(resp, "code_interpreter_call") == []


# ---- the client's function tools ----------------------------------------------------------

def test_function_tools_pass_through_and_continue(daemon, llm):
    def first(req):
        assert tool_names(req) == ["get_weather", "run_python"]
        return tool_calls(("run_python", {"code": "y = 2"}),
                          ("get_weather", {"city": "Paris"}))

    llm.add(first)
    resp = ok(daemon, {"input": "weather?", "tools": [CI, WEATHER]})
    assert resp["status"] == "completed"
    [fc] = items(resp, "function_call")
    assert fc["name"] == "get_weather" and json.loads(fc["arguments"]) == {"city": "Paris"}
    assert fc["id"].startswith("fc_") and fc["call_id"]
    assert [o["type"] for o in resp["output"]] == ["code_interpreter_call", "function_call"]

    missing = create(daemon, {"input": "hm", "previous_response_id": resp["id"],
                              "tools": [CI, WEATHER]})
    err(missing, 400, "input", [fc["call_id"]])

    def second(req):
        msgs = req["messages"]
        assert msgs[-1] == {"role": "tool", "tool_call_id": fc["call_id"], "content": "sunny"}
        assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool"]
        return tool_call("run_python", {"code": "print(y * 21)"})

    llm.add(second, lambda req: answer("sunny and " + stdout(req)))
    done = ok(daemon, {"previous_response_id": resp["id"], "tools": [CI, WEATHER],
                       "input": [{"type": "function_call_output", "call_id": fc["call_id"],
                                  "output": "sunny"}]})
    assert done["output_text"] == "sunny and 42"
    assert items(done, "code_interpreter_call")[0]["container_id"] == \
        items(resp, "code_interpreter_call")[0]["container_id"]


def test_a_replayed_history_goes_upstream_and_keeps_its_container(daemon, llm):
    """A client that keeps the history itself (the Agents SDK) sends earlier items back."""
    llm.add(tool_call("run_python", {"code": "z = 7"}), answer("z set"))
    first = ok(daemon, {"input": "set z", "tools": [CI], "store": False,
                        "include": ["code_interpreter_call.outputs"]})
    history = [{"role": "user", "content": "set z"}] + first["output"]

    def check(req):
        msgs = req["messages"]
        assert msgs[1]["role"] == "assistant"
        call = msgs[1]["tool_calls"][0]
        assert call["id"] == first["output"][0]["id"]
        assert json.loads(call["function"]["arguments"]) == {"code": "z = 7"}
        assert msgs[2] == {"role": "tool", "tool_call_id": call["id"], "content": "(no output)"}
        assert msgs[3] == {"role": "assistant", "content": "z set"}
        return tool_call("run_python", {"code": "print(z)"})

    llm.add(check, lambda req: answer(stdout(req)))
    second = ok(daemon, {"input": history + [{"role": "user", "content": "z?"}],
                         "tools": [CI], "store": False})
    assert second["output_text"] == "7"


# ---- stored responses ---------------------------------------------------------------------

def test_get_delete_and_input_items(daemon, llm):
    llm.add(answer("one"))
    resp = ok(daemon, {"input": [{"role": "user", "content": "a"},
                                 {"role": "assistant", "content": "b"},
                                 {"role": "user", "content": [{"type": "input_text",
                                                               "text": "c"}]}]})
    got = daemon.get(f"/v1/responses/{resp['id']}")
    assert got.status_code == 200 and got.json() == resp
    page = daemon.get(f"/v1/responses/{resp['id']}/input_items").json()
    assert page["object"] == "list" and page["has_more"] is False
    texts = [i["content"][0]["text"] for i in page["data"]]
    assert texts == ["c", "b", "a"]                     # newest first
    assert page["data"][1]["content"][0]["type"] == "output_text"
    assert all(i["id"].startswith("msg_") and i["type"] == "message" for i in page["data"])
    first = daemon.get(f"/v1/responses/{resp['id']}/input_items",
                       params={"order": "asc", "limit": 2}).json()
    assert [i["content"][0]["text"] for i in first["data"]] == ["a", "b"] and first["has_more"]
    rest = daemon.get(f"/v1/responses/{resp['id']}/input_items",
                      params={"order": "asc", "after": first["last_id"]}).json()
    assert [i["content"][0]["text"] for i in rest["data"]] == ["c"]
    err(daemon.get(f"/v1/responses/{resp['id']}/input_items", params={"after": "nope"}),
        400, "after")
    err(daemon.get(f"/v1/responses/{resp['id']}/input_items", params={"limit": "0"}),
        400, "limit")

    d = daemon.delete(f"/v1/responses/{resp['id']}")
    assert d.status_code == 200 and d.json() == {"id": resp["id"], "object": "response.deleted",
                                                 "deleted": True}
    err(daemon.get(f"/v1/responses/{resp['id']}"), 404)
    err(daemon.delete(f"/v1/responses/{resp['id']}"), 404)
    err(create(daemon, {"input": "x", "previous_response_id": resp["id"]}), 404,
        "previous_response_id")


def test_store_false_is_not_kept(daemon, llm):
    llm.add(answer("gone"))
    resp = ok(daemon, {"input": "x", "store": False})
    err(daemon.get(f"/v1/responses/{resp['id']}"), 404)
    err(create(daemon, {"input": "y", "previous_response_id": resp["id"]}), 404,
        "previous_response_id")


# ---- streaming ----------------------------------------------------------------------------

def test_stream_sends_the_events_in_order(daemon, llm):
    llm.add(tool_call("run_python", {"code": "print('hi')"}), answer("Done: hi"))
    r = create(daemon, {"input": "go", "tools": [CI], "stream": True,
                        "include": ["code_interpreter_call.outputs"]}, stream=True)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = sse(r)
    types = [t for t, _ in events]
    assert types == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    assert [d["type"] for _, d in events] == types
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert events[0][1]["response"]["status"] == "in_progress"
    assert events[4][1]["delta"] == "print('hi')" and events[5][1]["code"] == "print('hi')"
    done_call = events[8][1]["item"]
    assert done_call["status"] == "completed" and done_call["outputs"][0]["logs"] == "hi\n"
    assert events[11][1]["delta"] == "Done: hi" and events[11][1]["output_index"] == 1
    final = events[-1][1]["response"]
    assert final["status"] == "completed" and final["output_text"] == "Done: hi"
    assert daemon.get(f"/v1/responses/{final['id']}").json()["output_text"] == "Done: hi"


def test_stream_of_an_upstream_that_fails_first_is_an_error_reply(daemon, llm):
    llm.add(error(401, "bad key"))
    r = create(daemon, {"input": "go", "stream": True})
    e = err(r, 502, words=["401"])
    assert e["type"] == "upstream_error"


def test_stream_of_an_upstream_that_fails_later_ends_with_response_failed(daemon, llm):
    llm.add(tool_call("run_python", {"code": "print(1)"}), error(500, "boom"))
    r = create(daemon, {"input": "go", "tools": [CI], "stream": True})
    assert r.status_code == 200
    events = sse(r)
    assert events[-1][0] == "response.failed"
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed" and "boom" in failed["error"]["message"]


# ---- bad requests -------------------------------------------------------------------------

BAD = [
    ({"input": "x", "tools": [{"type": "web_search"}]}, 400, "tools[0]", "web_search"),
    ({"input": "x", "tools": [CI, {"type": "file_search", "vector_store_ids": []}]}, 400,
     "tools[1]", "file_search"),
    ({"input": "x", "tools": [CI, CI]}, 400, "tools[1]", "only one"),
    ({"input": "x", "tools": [{"type": "code_interpreter"}]}, 400, "tools[0]", "container"),
    ({"input": "x", "tools": [{"type": "code_interpreter",
                               "container": {"type": "auto", "memory_limit": "2g"}}]}, 400,
     "tools[0].container.memory_limit", "4g"),
    ({"input": "x", "tools": [{"type": "code_interpreter", "container": {
        "type": "auto", "network_policy": {"type": "allowlist", "allowed_domains": ["a.b"]}}}]},
     400, "tools[0].container.network_policy", "no network"),
    ({"input": "x", "tools": [{"type": "function", "name": "run_python"}]}, 400, "tools[0]",
     "taken"),
    ({"input": "x", "tools": [{"type": "function", "name": "bad name"}]}, 400, "tools[0]",
     "name"),
    ({"input": "x", "tool_choice": {"type": "function", "name": "nope"}}, 400, "tool_choice",
     "nope"),
    ({"input": "x", "tool_choice": {"type": "code_interpreter"}}, 400, "tool_choice",
     "code_interpreter"),
    ({"input": "x", "bogus": 1}, 400, "bogus", "unrecognized"),
    ({"input": "x", "conversation": "conv_1"}, 400, "conversation", "previous_response_id"),
    ({"input": "x", "background": True}, 400, "background", "stream"),
    ({"input": "x", "prompt": {"id": "pmpt_1"}}, 400, "prompt", "instructions"),
    ({"input": "x", "include": ["nonsense"]}, 400, "include", "include[0]"),
    ({"input": "x", "metadata": {"k": 1}}, 400, "metadata", "metadata"),
    ({"input": "x", "temperature": 3}, 400, "temperature", "0 to 2"),
    ({"input": "x", "max_output_tokens": 0}, 400, "max_output_tokens", "positive"),
    ({"input": "x", "top_logprobs": 3}, 400, "top_logprobs", "log probabilities"),
    ({"input": 5}, 400, "input", "string or an array"),
    ({}, 400, "input", "required"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, 400, "input[0]",
     "previous_response_id"),
    ({"input": [{"type": "reasoning", "summary": []}]}, 400, "input[0]", "reasoning"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]},
     400, "input[0].content[0]", "file_ids"),
    ({"input": [{"role": "robot", "content": "x"}]}, 400, "input[0]", "role"),
    ({"input": [{"type": "function_call_output", "output": "x"}]}, 400, "input[0]", "call_id"),
]


@pytest.mark.parametrize("body,status,param,words", BAD,
                         ids=[f"{b.get('input', '')!s:.20}-{p}" for b, _, p, _ in BAD])
def test_bad_requests_name_the_parameter(daemon, llm, body, status, param, words):
    e = err(create(daemon, body), status, param, [words])
    assert e["type"] == "invalid_request_error"
    assert llm.requests == []                           # nothing went upstream


def test_unknown_container_and_response_ids(daemon, llm):
    err(create(daemon, {"input": "x", "tools": [{"type": "code_interpreter",
                                                 "container": "cntr_" + "0" * 24}]}),
        404, "tools[0]", ["cntr_" + "0" * 24])
    err(create(daemon, {"input": "x", "tools": [{"type": "code_interpreter",
                                                 "container": "nonsense"}]}), 404, "tools[0]")
    err(create(daemon, {"input": "x", "previous_response_id": "resp_" + "0" * 24}), 404,
        "previous_response_id")
    err(daemon.get("/v1/responses/resp_nope"), 404)
    err(daemon.get("/v1/responses/resp_nope/input_items"), 404)
    assert daemon.post("/v1/responses", data=b"[1]").status_code == 400
    assert daemon.post("/v1/responses", data=b"{nope").status_code == 400


def test_the_daemons_own_errors_are_in_openais_shape(daemon, llm):
    e = err(requests.post(daemon.url + "/v1/responses", json={"input": "x"}, timeout=30), 401)
    assert e["code"] == "invalid_api_key"
    err(create(daemon, {"input": "x" * (17 << 20)}), 413)
    err(daemon.put("/v1/responses/resp_x"), 405)
    err(daemon.get("/v1/responses/resp_x/nothing"), 404)


# ---- other daemons ------------------------------------------------------------------------

def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_upstream_unreachable_is_502_and_approval_mode_refuses_code():
    d = start_daemon(f"http://127.0.0.1:{closed_port()}/v1", "--chat-require-approval",
                     pool="0")
    try:
        e = err(create(d, {"input": "hi"}), 502)
        assert e["type"] == "upstream_unreachable" and "127.0.0.1" in e["message"]
        e = err(create(d, {"input": "hi", "tools": [CI]}), 400, "tools[0]",
                ["--chat-require-approval"])
        assert d.get("/v1/sessions").json()["sessions"] == []
    finally:
        stop_daemon(d)


def test_without_an_upstream_it_is_503():
    d = start_daemon(None, pool="0")
    try:
        e = err(create(d, {"input": "hi"}), 503)
        assert e["type"] == "gateway_not_configured" and "--llm-base-url" in e["message"]
        err(d.get("/v1/responses/resp_x"), 404)         # the store is there all the same
    finally:
        stop_daemon(d)


def test_a_conversation_survives_a_restart(fake, tmp_path):
    fake.script.clear()
    fake.requests.clear()
    fake.failures.clear()
    d = start_daemon(fake.base_url, workdir=tmp_path)
    try:
        fake.add(tool_call("run_python", {"code": "kept = 'still here'"}), answer("kept"))
        first = ok(d, {"input": "keep it", "tools": [CI]})
        cid = items(first, "code_interpreter_call")[0]["container_id"]
    finally:
        stop_daemon(d)
    d = restart_daemon(pytest, d)
    try:
        def check(req):
            assert req["messages"][0] == {"role": "user", "content": "keep it"}
            return tool_call("run_python", {"code": "print(kept)"})

        fake.add(check, lambda req: answer(stdout(req)))
        second = ok(d, {"input": "what was kept?", "tools": [CI],
                        "previous_response_id": first["id"]})
        assert second["output_text"] == "still here"
        assert items(second, "code_interpreter_call")[0]["container_id"] == cid
        assert d.get(f"/v1/responses/{first['id']}").json()["output_text"] == "kept"
    finally:
        stop_daemon(d)
        fake.check()
