"""Tenants on the routes that talk to a model (docs/TENANTS.md): a stored response, its
input_items and previous_response_id, and a chat conversation's session are their tenant's.
Another tenant gets exactly what an id nobody has gets, so ids do not leak. The model is the
scripted fake of fake_llm.py on loopback."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from airlock_daemon import AIRLOCK, Daemon  # noqa: E402
from fake_llm import answer, tool_call  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

GHOST_RESP = "resp_" + "0" * 24
GHOST_SESSION = "s-" + "0" * 24


@pytest.fixture(scope="module")
def daemon(fake):
    d = Daemon(args=["--pool-size", "1", "--llm-base-url", fake.base_url,
                     "--llm-model", "fake-model"])
    d.start()
    yield d
    rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


def key_of(d, name):
    p = subprocess.run([AIRLOCK, "tenants", "add", name, "--state-dir", str(d.state_dir)],
                       capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")})
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def two(daemon):
    return [(daemon.client(key_of(daemon, name)), name) for name in ("llm-a", "llm-b")]


@pytest.fixture
def llm(fake):
    fake.script.clear()
    fake.requests.clear()
    yield fake
    fake.check()


def call(d, http, method, path, **kw):
    kw.setdefault("timeout", 60)
    return http.request(method, d.url + path, **kw)


def same_as_unknown(theirs, unknown, their_id, ghost_id):
    """Another tenant's id answers what an unknown id answers, the id itself aside."""
    assert theirs.status_code == unknown.status_code, (theirs.text, unknown.text)
    assert theirs.text.replace(their_id, ghost_id) == unknown.text, (theirs.text, unknown.text)


def test_a_stored_response_is_its_tenants(daemon, two, llm):
    (a, _), (b, _) = two
    llm.script.append(answer("hello from the model"))
    r = call(daemon, a, "POST", "/v1/responses", json={"input": "hi", "store": True})
    assert r.status_code == 200, r.text
    rid = r.json()["id"]
    for method, suffix in [("GET", ""), ("GET", "/input_items"), ("DELETE", "")]:
        theirs = call(daemon, b, method, f"/v1/responses/{rid}{suffix}")
        unknown = call(daemon, b, method, f"/v1/responses/{GHOST_RESP}{suffix}")
        assert theirs.status_code == 404, theirs.text
        same_as_unknown(theirs, unknown, rid, GHOST_RESP)
    # Continuing it is refused the same way, and the model is never asked.
    theirs = call(daemon, b, "POST", "/v1/responses",
                  json={"input": "more", "previous_response_id": rid})
    unknown = call(daemon, b, "POST", "/v1/responses",
                   json={"input": "more", "previous_response_id": GHOST_RESP})
    assert theirs.status_code in (400, 404), theirs.text
    same_as_unknown(theirs, unknown, rid, GHOST_RESP)
    # Its owner still has it, untouched by the other tenant's DELETE.
    mine = call(daemon, a, "GET", f"/v1/responses/{rid}")
    assert mine.status_code == 200 and mine.json()["id"] == rid, mine.text
    assert len(llm.requests) == 1, "another tenant's continuation reached the model"
    assert call(daemon, a, "DELETE", f"/v1/responses/{rid}").status_code == 200


def test_a_chat_conversations_session_is_its_tenants(daemon, two, llm):
    (a, _), (b, _) = two
    llm.script.extend([tool_call("run_python", {"code": "secret = 41\nsecret + 1"}),
                       answer("42")])
    r = call(daemon, a, "POST", "/v1/chat/completions",
             json={"model": "fake-model", "messages": [{"role": "user", "content": "compute"}]})
    assert r.status_code == 200, r.text
    sid = r.headers["X-Airlock-Session"]
    try:
        body = {"model": "fake-model", "messages": [{"role": "user", "content": "print secret"}]}
        theirs = call(daemon, b, "POST", "/v1/chat/completions", json=body,
                      headers={"X-Airlock-Session": sid})
        unknown = call(daemon, b, "POST", "/v1/chat/completions", json=body,
                       headers={"X-Airlock-Session": GHOST_SESSION})
        assert theirs.status_code == 404, theirs.text
        same_as_unknown(theirs, unknown, sid, GHOST_SESSION)
        assert len(llm.requests) == 2, "another tenant's turn reached the model"
        # The session is still its owner's, with its variables.
        r = call(daemon, a, "POST", f"/v1/sessions/{sid}/execute", json={"code": "secret"})
        assert r.status_code == 200 and r.json()["result"] == "41", r.text
    finally:
        try:
            call(daemon, a, "DELETE", f"/v1/sessions/{sid}")
        except requests.RequestException:
            pass
