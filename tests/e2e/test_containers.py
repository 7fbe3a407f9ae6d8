"""OpenAI's Files and Containers APIs on `airlock serve` (docs/RESPONSES.md, "Containers and
files"): every route, every refusal in OpenAI's error shape, /mnt/data being /work inside the
sandbox, container files made by code, expiry mapped onto the session lifecycle, records that
survive a restart, and uploads that stream to disk instead of the daemon's memory.

A container is a session: "cntr_<hex>" names "s-<hex>", so the tests also look at the session
through /v1/sessions to check what the container API says about it."""
import io
import os
import shutil
import tempfile

import pytest

from airlock_daemon import Daemon, daemon_fixture

KiB = 1 << 10
MiB = 1 << 20
UPLOAD_MAX = 256 * KiB

daemon = daemon_fixture(pytest, args=("--pool-size", "1", "--max-upload", "256K"))


def sid_of(cid):
    assert cid.startswith("cntr_") and len(cid) == 29, cid
    return "s-" + cid[len("cntr_"):]


def error_of(r, status, param=None, code=None):
    """Checks an OpenAI-shaped error answer and returns its message."""
    assert r.status_code == status, f"{r.status_code} {r.text[:2000]}"
    body = r.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"], err
    assert err["type"] == ("server_error" if status >= 500 else "invalid_request_error"), err
    assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err
    return err["message"]


def upload_file(daemon, content, filename="data.csv", purpose="assistants"):
    r = daemon.post("/v1/files", files={"file": (filename, content)},
                    data={"purpose": purpose} if purpose is not None else None)
    assert r.status_code == 200, daemon.why(r)
    return r.json()


class Containers:
    """Creates containers for one test and deletes them all afterwards, whatever happened."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.ids = []

    def new(self, **body):
        body.setdefault("name", "test")
        r = self.daemon.post("/v1/containers", json=body)
        assert r.status_code == 200, self.daemon.why(r)
        self.ids.append(r.json()["id"])
        return r.json()

    def close(self):
        for cid in self.ids:
            if self.daemon.alive():
                self.daemon.delete(f"/v1/containers/{cid}")


@pytest.fixture
def containers(daemon):
    c = Containers(daemon)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def files(daemon):
    """Ids of files a test uploaded, deleted afterwards."""
    ids = []
    try:
        yield ids
    finally:
        for fid in ids:
            if daemon.alive():
                daemon.delete(f"/v1/files/{fid}")


# ------------------------------------------------------------------------------------------
# /v1/files
# ------------------------------------------------------------------------------------------


def test_a_file_is_uploaded_retrieved_listed_downloaded_and_deleted(daemon, files):
    content = b"region,sales\nnorth,10\nsouth,\xff\x00binary\n"
    f = upload_file(daemon, content, "sales.csv")
    files.append(f["id"])
    assert f["id"].startswith("file-") and len(f["id"]) == 29, f
    assert f["object"] == "file" and f["bytes"] == len(content), f
    assert f["filename"] == "sales.csv" and f["purpose"] == "assistants", f
    assert isinstance(f["created_at"], int) and f["status"] == "processed", f

    r = daemon.get(f"/v1/files/{f['id']}")
    assert r.status_code == 200 and r.json() == f, r.text
    r = daemon.get(f"/v1/files/{f['id']}/content")
    assert r.status_code == 200 and r.content == content, r.content[:100]

    other = upload_file(daemon, b"{}", "x.json", purpose="user_data")
    files.append(other["id"])
    listing = daemon.get("/v1/files").json()
    assert listing["object"] == "list" and not listing["has_more"], listing
    ids = [x["id"] for x in listing["data"]]
    assert ids.index(other["id"]) < ids.index(f["id"]), "newest first by default"
    assert listing["first_id"] == ids[0] and listing["last_id"] == ids[-1]
    only = daemon.get("/v1/files", params={"purpose": "user_data"}).json()["data"]
    assert [x["id"] for x in only] == [other["id"]], only
    page = daemon.get("/v1/files", params={"limit": 1, "order": "asc"}).json()
    assert len(page["data"]) == 1 and page["has_more"], page
    rest = daemon.get("/v1/files", params={"after": page["last_id"], "order": "asc"}).json()
    assert page["last_id"] not in [x["id"] for x in rest["data"]]
    assert {x["id"] for x in rest["data"]} | {page["last_id"]} >= {f["id"], other["id"]}

    r = daemon.delete(f"/v1/files/{f['id']}")
    assert r.status_code == 200, r.text
    assert r.json() == {"id": f["id"], "object": "file", "deleted": True}
    error_of(daemon.get(f"/v1/files/{f['id']}"), 404, code="not_found")
    error_of(daemon.get(f"/v1/files/{f['id']}/content"), 404)
    error_of(daemon.delete(f"/v1/files/{f['id']}"), 404)


def _multipart(parts, boundary="b0undary"):
    """A multipart/form-data body of (name, filename or None, bytes) parts."""
    out = io.BytesIO()
    for name, filename, data in parts:
        out.write(f"--{boundary}\r\n".encode())
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out.write(f"Content-Disposition: {disp}\r\n\r\n".encode())
        out.write(data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


UPLOAD_REFUSALS = [
    # (what, parts or raw (body, content type), status, param)
    ("no purpose", [("file", "a.csv", b"x")], 400, "purpose"),
    ("an unknown purpose", [("file", "a.csv", b"x"), ("purpose", None, b"nope")], 400, "purpose"),
    ("no file part", [("purpose", None, b"assistants")], 400, "file"),
    ("a file without a filename", [("file", None, b"x"), ("purpose", None, b"assistants")],
     400, "file"),
    ("a path as the filename", [("file", "../../etc/passwd", b"x"),
                                ("purpose", None, b"assistants")], 400, "file"),
    ("two file parts", [("file", "a", b"x"), ("file", "b", b"y"),
                        ("purpose", None, b"assistants")], 400, "file"),
    ("a file in another part", [("file", "a", b"x"), ("doc", "b", b"y"),
                                ("purpose", None, b"assistants")], 400, "file"),
    ("an unknown field", [("file", "a", b"x"), ("purpose", None, b"assistants"),
                          ("expires_after[seconds]", None, b"3600")], 400,
     "expires_after[seconds]"),
    ("a field given twice", [("file", "a", b"x"), ("purpose", None, b"assistants"),
                             ("purpose", None, b"vision")], 400, "file"),
    ("a field over 1 KiB", [("file", "a", b"x"), ("purpose", None, b"a" * 2000)], 400, "file"),
    ("a JSON body", (b'{"purpose": "assistants"}', "application/json"), 400, "file"),
    ("a truncated multipart body", (b"--b0undary\r\nContent-Disposition: form-data; "
                                    b'name="file"; filename="a"\r\n\r\nxx',
                                    "multipart/form-data; boundary=b0undary"), 400, "file"),
    ("multipart without a boundary", (b"x", "multipart/form-data"), 400, "file"),
]


@pytest.mark.parametrize("what,parts,status,param", UPLOAD_REFUSALS,
                         ids=[c[0] for c in UPLOAD_REFUSALS])
def test_a_bad_upload_is_refused_in_openai_shape(daemon, what, parts, status, param):
    body, ctype = parts if isinstance(parts, tuple) else _multipart(parts)
    before = sorted(os.listdir(daemon.state_dir / "openai" / "files"))
    r = daemon.post("/v1/files", data=body, headers={"Content-Type": ctype})
    error_of(r, status, param)
    assert sorted(os.listdir(daemon.state_dir / "openai" / "files")) == before, what
    assert os.listdir(daemon.state_dir / "openai" / "spool") == [], "the spool was not emptied"


def test_an_upload_over_the_limit_is_413_declared_or_streamed(daemon):
    big = b"x" * (UPLOAD_MAX + 1)
    r = daemon.post("/v1/files", files={"file": ("big.bin", big)}, data={"purpose": "batch"})
    msg = error_of(r, 413, "file")
    assert "--max-upload" in msg, msg

    def chunks():
        """No Content-Length: the limit is found while the body streams in."""
        body, _ = _multipart([("purpose", None, b"batch"), ("file", "big.bin", big)])
        for i in range(0, len(body), 64 * KiB):
            yield body[i:i + 64 * KiB]

    r = daemon.post("/v1/files", data=chunks(),
                    headers={"Content-Type": "multipart/form-data; boundary=b0undary"})
    msg = error_of(r, 413, "file")
    assert "--max-upload" in msg, msg
    # Exactly at the limit is fine.
    f = upload_file(daemon, b"y" * UPLOAD_MAX, "exact.bin", purpose="batch")
    assert f["bytes"] == UPLOAD_MAX
    assert daemon.delete(f"/v1/files/{f['id']}").status_code == 200
    assert os.listdir(daemon.state_dir / "openai" / "spool") == []


@pytest.mark.parametrize("query,param", [
    ({"limit": "0"}, "limit"), ({"limit": "x"}, "limit"), ({"limit": "10001"}, "limit"),
    ({"order": "up"}, "order"), ({"after": "file-000000000000000000000000"}, "after"),
])
def test_bad_list_parameters_are_400_naming_them(daemon, query, param):
    error_of(daemon.get("/v1/files", params=query), 400, param)


@pytest.mark.parametrize("path", ["/v1/files/file-000000000000000000000000", "/v1/files/nope",
                                  "/v1/files/..%2F..%2Fsessions.db",
                                  "/v1/files/file-000000000000000000000000/content"])
def test_unknown_files_are_404(daemon, path):
    error_of(daemon.get(path), 404)


# ------------------------------------------------------------------------------------------
# /v1/containers
# ------------------------------------------------------------------------------------------


def test_a_container_is_a_session_with_its_files_in_mnt_data(daemon, containers, files):
    f = upload_file(daemon, b"a,b\n1,2\n", "data.csv")
    files.append(f["id"])
    c = containers.new(name="analysis", file_ids=[f["id"]],
                       expires_after={"anchor": "last_active_at", "minutes": 3},
                       memory_limit="1g")
    assert c["object"] == "container" and c["id"].startswith("cntr_"), c
    assert c["name"] == "analysis" and c["status"] == "running", c
    assert c["expires_after"] == {"anchor": "last_active_at", "minutes": 3}, c
    assert c["memory_limit"] == "1g", c
    assert isinstance(c["created_at"], int) and isinstance(c["last_active_at"], int), c

    # The session behind it: its stop_after is the container's expiry.
    sid = sid_of(c["id"])
    s = daemon.get(f"/v1/sessions/{sid}").json()
    assert s["stop_after_s"] == 180, s
    r = daemon.get(f"/v1/containers/{c['id']}")
    assert r.status_code == 200 and r.json()["id"] == c["id"], r.text

    # Inside, /mnt/data is /work: the file is at both, and what code writes shows in both.
    out = daemon.execute(sid, "import os\n"
                              "open('/mnt/data/made.txt', 'w').write('by code')\n"
                              "print(open('/work/data.csv').read(), end='')\n"
                              "print(os.path.samefile('/work', '/mnt/data'))\n"
                              "os.makedirs('/mnt/data/out/deep')\n"
                              "open('/work/out/deep/plot.txt', 'w').write('p' * 5)")
    assert out["status"] == "ok" and out["stdout"] == "a,b\n1,2\nTrue\n", out

    listing = daemon.get(f"/v1/containers/{c['id']}/files").json()
    by_path = {x["path"]: x for x in listing["data"]}
    assert set(by_path) == {"/mnt/data/data.csv", "/mnt/data/made.txt",
                            "/mnt/data/out/deep/plot.txt"}, listing
    assert by_path["/mnt/data/data.csv"]["source"] == "user"
    assert by_path["/mnt/data/made.txt"]["source"] == "assistant"
    assert by_path["/mnt/data/out/deep/plot.txt"]["bytes"] == 5
    for x in listing["data"]:
        assert x["object"] == "container.file" and x["container_id"] == c["id"], x
        assert x["id"].startswith("cfile_"), x
    again = daemon.get(f"/v1/containers/{c['id']}/files").json()
    assert {x["id"] for x in again["data"]} == {x["id"] for x in listing["data"]}, \
        "container file ids must be stable"

    made = by_path["/mnt/data/made.txt"]
    r = daemon.get(f"/v1/containers/{c['id']}/files/{made['id']}")
    assert r.status_code == 200 and r.json() == made, r.text
    r = daemon.get(f"/v1/containers/{c['id']}/files/{made['id']}/content")
    assert r.status_code == 200 and r.content == b"by code"

    r = daemon.delete(f"/v1/containers/{c['id']}/files/{made['id']}")
    assert r.json() == {"id": made["id"], "object": "container.file.deleted", "deleted": True}
    out = daemon.execute(sid, "import os; print(os.path.exists('/work/made.txt'))")
    assert out["stdout"] == "False\n", out
    error_of(daemon.get(f"/v1/containers/{c['id']}/files/{made['id']}"), 404)

    # A file the code deletes is gone from the API too.
    plot = by_path["/mnt/data/out/deep/plot.txt"]
    daemon.execute(sid, "import os; os.remove('/mnt/data/out/deep/plot.txt')")
    error_of(daemon.get(f"/v1/containers/{c['id']}/files/{plot['id']}/content"), 404)

    r = daemon.delete(f"/v1/containers/{c['id']}")
    assert r.status_code == 200, r.text
    assert r.json() == {"id": c["id"], "object": "container.deleted", "deleted": True}
    msg = error_of(daemon.get(f"/v1/containers/{c['id']}"), 404)
    assert c["id"] in msg
    assert daemon.get(f"/v1/sessions/{sid}").status_code == 404
    error_of(daemon.get(f"/v1/containers/{c['id']}/files"), 404)
    error_of(daemon.delete(f"/v1/containers/{c['id']}"), 404)


def test_container_files_are_uploaded_copied_and_replaced(daemon, containers, files):
    c = containers.new(name="uploads")
    sid = sid_of(c["id"])
    r = daemon.post(f"/v1/containers/{c['id']}/files",
                    files={"file": ("notes.txt", b"first")})
    assert r.status_code == 200, daemon.why(r)
    up = r.json()
    assert up["path"] == "/mnt/data/notes.txt" and up["source"] == "user", up
    assert up["bytes"] == 5 and up["container_id"] == c["id"], up

    # Uploaded again under the same name: the same id, the new bytes.
    r = daemon.post(f"/v1/containers/{c['id']}/files",
                    files={"file": ("notes.txt", b"second!")})
    assert r.json()["id"] == up["id"] and r.json()["bytes"] == 7, r.text
    assert daemon.execute(sid, "print(open('/mnt/data/notes.txt').read())")["stdout"] == \
        "second!\n"

    # From the Files API by id, as JSON.
    f = upload_file(daemon, b"1,2,3", "numbers.csv")
    files.append(f["id"])
    r = daemon.post(f"/v1/containers/{c['id']}/files", json={"file_id": f["id"]})
    assert r.status_code == 200, daemon.why(r)
    assert r.json()["path"] == "/mnt/data/numbers.csv" and r.json()["bytes"] == 5
    r = daemon.get(f"/v1/containers/{c['id']}/files/{r.json()['id']}/content")
    assert r.content == b"1,2,3"

    # Code that turned a name into a directory: the upload says so.
    daemon.execute(sid, "import os; os.mkdir('/mnt/data/adir')")
    error_of(daemon.post(f"/v1/containers/{c['id']}/files", files={"file": ("adir", b"x")}),
             409, "file")

    # Pages of the container's files.
    page = daemon.get(f"/v1/containers/{c['id']}/files", params={"limit": 1}).json()
    assert len(page["data"]) == 1 and page["has_more"], page
    rest = daemon.get(f"/v1/containers/{c['id']}/files",
                      params={"limit": 100, "after": page["last_id"]}).json()
    assert len(rest["data"]) == 1 and not rest["has_more"], rest


CREATE_REFUSALS = [
    ({}, 400, "name"),
    ({"name": 7}, 400, "name"),
    ({"name": "x", "flavour": "vanilla"}, 400, "flavour"),
    ({"name": "x", "expires_after": {"anchor": "created_at", "minutes": 5}}, 400,
     "expires_after.anchor"),
    ({"name": "x", "expires_after": {"anchor": "last_active_at", "minutes": 0}}, 400,
     "expires_after.minutes"),
    ({"name": "x", "expires_after": {"anchor": "last_active_at", "minutes": 1441}}, 400,
     "expires_after.minutes"),
    ({"name": "x", "expires_after": {"anchor": "last_active_at", "minutes": "5"}}, 400,
     "expires_after.minutes"),
    ({"name": "x", "expires_after": 5}, 400, "expires_after"),
    ({"name": "x", "memory_limit": "2g"}, 400, "memory_limit"),
    ({"name": "x", "memory_limit": "64g"}, 400, "memory_limit"),
    ({"name": "x", "file_ids": "file-000000000000000000000000"}, 400, "file_ids"),
    ({"name": "x", "file_ids": [1]}, 400, "file_ids"),
    ({"name": "x", "file_ids": ["file-000000000000000000000000"]}, 404, "file_ids"),
    ({"name": "x", "file_ids": ["../../token"]}, 404, "file_ids"),
    ({"name": "x", "network_policy": {"type": "allowlist", "allowed_domains": ["a.b"]}}, 400,
     "network_policy"),
    ({"name": "x", "skills": [{"skill_id": "s"}]}, 400, "skills"),
    ({"name": "x" * 300}, 400, "name"),
]


@pytest.mark.parametrize("body,status,param", CREATE_REFUSALS,
                         ids=[str(c[2]) + "-" + str(i) for i, c in enumerate(CREATE_REFUSALS)])
def test_a_bad_container_is_refused_and_leaves_no_session(daemon, body, status, param):
    before = {s["id"] for s in daemon.get("/v1/sessions").json()["sessions"]}
    msg = error_of(daemon.post("/v1/containers", json=body), status, param)
    if body.get("memory_limit") == "64g":
        assert "default" in msg and "MiB" in msg, msg
    after = {s["id"] for s in daemon.get("/v1/sessions").json()["sessions"]}
    assert after <= before, f"sessions left behind: {after - before}"


def test_a_container_body_must_be_a_json_object(daemon):
    error_of(daemon.post("/v1/containers", data=b"not json",
                         headers={"Content-Type": "application/json"}), 400)
    error_of(daemon.post("/v1/containers", json=["name"]), 400)


def test_a_containers_profile_comes_from_the_header(daemon, containers):
    msg = error_of(daemon.post("/v1/containers", json={"name": "x"},
                               headers={"X-Airlock-Profile": "no-such-profile"}), 400, "profile")
    assert "no-such-profile" in msg
    r = daemon.post("/v1/containers", json={"name": "min"},
                    headers={"X-Airlock-Profile": "minimal"})
    assert r.status_code == 200, daemon.why(r)
    containers.ids.append(r.json()["id"])
    s = daemon.get(f"/v1/sessions/{sid_of(r.json()['id'])}").json()
    assert s["profile"] == "minimal", s


def test_containers_are_listed_filtered_and_paged(daemon, containers):
    made = [containers.new(name=n)["id"] for n in ("alpha", "beta", "alpha")]
    listing = daemon.get("/v1/containers", params={"limit": 100}).json()
    assert listing["object"] == "list", listing
    ids = [c["id"] for c in listing["data"]]
    assert set(made) <= set(ids), (made, ids)
    alphas = daemon.get("/v1/containers", params={"name": "alpha"}).json()["data"]
    assert {c["id"] for c in alphas} == {made[0], made[2]}, alphas
    first = daemon.get("/v1/containers", params={"limit": 1, "order": "asc"}).json()
    assert len(first["data"]) == 1 and first["has_more"], first
    seen = [first["last_id"]]
    after = first["last_id"]
    while True:
        page = daemon.get("/v1/containers",
                          params={"limit": 1, "order": "asc", "after": after}).json()
        seen += [c["id"] for c in page["data"]]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert sorted(seen) == sorted(ids), "paging with after must visit every container once"
    error_of(daemon.get("/v1/containers", params={"limit": 101}), 400, "limit")
    error_of(daemon.get("/v1/containers", params={"after": "cntr_000000000000000000000000"}),
             400, "after")


def test_expired_means_stopped_and_the_next_call_resumes(daemon, containers):
    c = containers.new(name="sleepy")
    sid = sid_of(c["id"])
    daemon.execute(sid, "x = 41\nopen('/mnt/data/keep.txt', 'w').write('kept')")
    r = daemon.post(f"/v1/sessions/{sid}/stop")
    assert r.status_code == 200, daemon.why(r)
    got = daemon.get(f"/v1/containers/{c['id']}").json()
    assert got["status"] == "expired", got
    listed = {x["id"]: x for x in daemon.get("/v1/containers").json()["data"]}
    assert listed[c["id"]]["status"] == "expired"
    # Its files resume it, with its variables.
    names = [x["path"] for x in daemon.get(f"/v1/containers/{c['id']}/files").json()["data"]]
    assert names == ["/mnt/data/keep.txt"], names
    assert daemon.get(f"/v1/containers/{c['id']}").json()["status"] == "running"
    assert daemon.execute(sid, "x + 1")["result"] == "42"


CONTAINER_FILE_REFUSALS = [
    ("GET", "/v1/containers/cntr_000000000000000000000000", {}, 404, None),
    ("GET", "/v1/containers/s-000000000000000000000000", {}, 404, None),
    ("DELETE", "/v1/containers/cntr_000000000000000000000000", {}, 404, None),
    ("GET", "/v1/containers/cntr_000000000000000000000000/files", {}, 404, None),
    ("POST", "/v1/containers/cntr_000000000000000000000000/files",
     {"files": {"file": ("a.txt", b"x")}}, 404, None),
    ("POST", "{c}/files", {"json": {"file_id": "file-000000000000000000000000"}}, 404, "file_id"),
    ("POST", "{c}/files", {"json": {}}, 400, "file_id"),
    ("POST", "{c}/files", {"json": {"file_id": "x", "path": "/etc"}}, 400, "path"),
    ("POST", "{c}/files", {"data": b"raw", "headers": {"Content-Type": "text/plain"}}, 400, None),
    ("POST", "{c}/files", {"files": {"file": ("a/b.txt", b"x")}}, 400, "file"),
    ("POST", "{c}/files", {"files": {"file": ("a.txt", b"x")},
                           "data": {"file_id": "file-000000000000000000000000"}}, 400, "file_id"),
    ("POST", "{c}/files", {"files": {"file": ("big.bin", b"z" * (UPLOAD_MAX + 1))}}, 413, "file"),
    ("GET", "{c}/files/cfile_000000000000000000000000", {}, 404, None),
    ("GET", "{c}/files/nope/content", {}, 404, None),
    ("DELETE", "{c}/files/cfile_000000000000000000000000", {}, 404, None),
    ("GET", "{c}/files", {"params": {"order": "sideways"}}, 400, "order"),
]


@pytest.mark.parametrize("method,path,kw,status,param", CONTAINER_FILE_REFUSALS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CONTAINER_FILE_REFUSALS)])
def test_container_refusals(daemon, containers, method, path, kw, status, param):
    if "{c}" in path:
        path = path.replace("{c}", "/v1/containers/" + containers.new(name="r")["id"])
    error_of(daemon.req(method, path, **kw), status, param)


def test_server_errors_on_openai_routes_have_openai_shape(daemon):
    r = daemon.http.request("GET", daemon.url + "/v1/containers",
                            headers={"Authorization": "Bearer wrong"})
    error_of(r, 401, code="invalid_api_key")
    assert r.headers.get("WWW-Authenticate", "").startswith("Bearer")
    r = daemon.req("PUT", "/v1/containers")
    error_of(r, 405)
    assert "POST" in r.headers.get("Allow", "")
    error_of(daemon.get("/v1/containers/cntr_000000000000000000000000/nothing-here"), 404)
    status, _, body = daemon.raw("POST", "/v1/containers",
                                 headers={"Content-Type": "application/json",
                                          "Content-Length": str(64 * MiB)}, body=b"")
    assert status == 413 and b'"type":"invalid_request_error"' in body, body
    # The airlock routes keep airlock's shape.
    r = daemon.get("/v1/sessions/s-000000000000000000000000")
    assert r.status_code == 404 and isinstance(r.json()["error"], str), r.text


# ------------------------------------------------------------------------------------------
# a restart, and a large upload
# ------------------------------------------------------------------------------------------


def test_files_and_containers_survive_a_restart():
    if os.geteuid() != 0:
        pytest.skip("airlock's namespaces isolation needs root")
    work = tempfile.mkdtemp(prefix="airlock-e2e-containers-")
    first = second = None
    try:
        first = Daemon(args=["--pool-size", "0"], workdir=work).start()
        f = upload_file(first, b"persisted", "p.txt")
        r = first.post("/v1/containers", json={"name": "lasting", "file_ids": [f["id"]]})
        assert r.status_code == 200, first.why(r)
        cid = r.json()["id"]
        before = first.get(f"/v1/containers/{cid}/files").json()["data"]
        rc, problems = first.stop()
        assert rc == 0 and not problems, problems

        second = Daemon(args=["--pool-size", "0"], workdir=work).start()
        assert second.get(f"/v1/files/{f['id']}").json() == f
        assert second.get(f"/v1/files/{f['id']}/content").content == b"persisted"
        c = second.get(f"/v1/containers/{cid}").json()
        assert c["name"] == "lasting" and c["status"] == "expired", c
        after = second.get(f"/v1/containers/{cid}/files").json()["data"]
        assert [(x["id"], x["source"]) for x in after] == \
            [(x["id"], x["source"]) for x in before], (before, after)
        assert second.delete(f"/v1/containers/{cid}").status_code == 200
        assert second.delete(f"/v1/files/{f['id']}").status_code == 200
        rc, problems = second.stop()
        assert rc == 0 and not problems, problems
    finally:
        for d in (first, second):
            if d is not None:
                d.stop()
        shutil.rmtree(work, ignore_errors=True)


def test_a_large_upload_streams_to_disk_not_memory():
    if os.geteuid() != 0:
        pytest.skip("airlock's namespaces isolation needs root")
    d = Daemon(args=["--pool-size", "0", "--max-upload", "96M"]).start(wait_zygote=None)
    try:
        size = 64 * MiB
        d.reset_peak_rss()
        base = d.vm_kib("VmRSS")

        def body():
            head, _ = _multipart([("purpose", None, b"assistants")])
            yield head[:-len(b"--b0undary--\r\n")]
            yield (b'--b0undary\r\nContent-Disposition: form-data; name="file"; '
                   b'filename="big.bin"\r\n\r\n')
            block = bytes(range(256)) * (4 * KiB)      # 1 MiB
            for _ in range(size // len(block)):
                yield block
            yield b"\r\n--b0undary--\r\n"

        r = d.post("/v1/files", data=body(), timeout=300,
                   headers={"Content-Type": "multipart/form-data; boundary=b0undary"})
        assert r.status_code == 200, d.why(r)
        grew = d.vm_kib("VmHWM") - base
        assert r.json()["bytes"] == size, r.json()
        assert grew < 24 * 1024, f"the daemon's RSS grew by {grew} KiB for a 64 MiB upload"
        stored = d.state_dir / "openai" / "files" / r.json()["id"]
        assert stored.stat().st_size == size
    finally:
        rc, problems = d.stop()
    assert rc == 0 and not problems, problems
