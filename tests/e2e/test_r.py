"""R sessions (issue 25): `language: "r"` runs in an R session embedded in a child of the
session's runner, next to its Python and bash. Variables persist across cells, the last visible
value comes back as `result` as R prints it, errors carry R's message, plots come back as PNG
outputs, a busy loop times out without losing the session, and profiles decide whether R is
allowed. One daemon for the module (with profiles from a private profile directory); every test
deletes its sessions, whatever happened."""
import base64
import json
import os
import threading
import time

import pytest

from airlock_daemon import profiles_daemon_fixture, sessions_fixture

if not os.access("/usr/lib/R/lib/libR.so", os.R_OK):
    pytest.skip("r sessions need R (/usr/lib/R/lib/libR.so): apt-get install r-base-core",
                allow_module_level=True)

NO_BASH = "r-no-bash"
NO_R = "r-not-installed"
EMPTY_ROOT = "/nonexistent/airlock-test-root"
daemon = profiles_daemon_fixture(pytest, "airlock-e2e-r-profiles-", {NO_BASH: {
    "description": "Python and R without bash (test_r.py)",
    "languages": ["python", "r"],
    "limits": {"memory": "1GiB", "pids": 64, "timeout": "30s"}},
    # A root filesystem without R: only the warning at start is looked at.
    NO_R: {"description": "R where there is none (test_r.py)", "languages": ["python", "r"],
           "rootfs": EMPTY_ROOT}})
sessions = sessions_fixture(pytest)


def r(daemon, sid, code, **fields):
    return daemon.execute(sid, code, language="r", **fields)


def ok(out):
    assert out["status"] == "ok", json.dumps(out, indent=1)
    return out


def test_variables_and_functions_persist(daemon, sessions):
    sid = sessions.new()
    assert ok(r(daemon, sid, "x <- c(1, 2, 3)\nsq <- function(v) v^2"))["result"] is None
    out = ok(r(daemon, sid, "sum(sq(x))"))
    assert out["result"] == "[1] 14", out
    assert out["state"] == "preserved"


def test_result_is_the_last_visible_value_as_r_prints_it(daemon, sessions):
    sid = sessions.new()
    out = ok(r(daemon, sid, "1 + 1\ncat('to stdout\\n')\ndata.frame(a = 1:2, b = c('x', 'y'))"))
    # The earlier visible value is printed, as R's REPL does; the last one is the result.
    assert out["stdout"] == "[1] 2\nto stdout\n", out
    assert out["result"] == "  a b\n1 1 x\n2 2 y", out
    assert ok(r(daemon, sid, "invisible(5)"))["result"] is None
    out = ok(r(daemon, sid, "message('to stderr'); print('p')"))
    assert out["stdout"] == '[1] "p"\n' and "to stderr" in out["stderr"], out
    assert out["result"] is None


def test_error_gives_r_message(daemon, sessions):
    sid = sessions.new()
    out = r(daemon, sid, "f <- function() stop('boom')\ng <- function() f()\ng()")
    assert out["status"] == "error", out
    assert out["error"]["name"] == "RError" and out["error"]["value"] == "boom", out
    assert out["error"]["traceback"] == "Error in f() : boom\nCalls: g -> f", out
    out = r(daemon, sid, "x y")
    assert out["status"] == "error" and "unexpected symbol" in out["error"]["value"], out
    # The session lives on.
    assert ok(r(daemon, sid, "exists('g')"))["result"] == "[1] TRUE"


def test_plot_comes_back_as_png(daemon, sessions):
    sid = sessions.new()
    out = ok(r(daemon, sid, "plot(1:10)\nhist(rnorm(50))\n42"))
    assert out["result"] == "[1] 42", out
    pngs = [o for o in out["outputs"] if "image/png" in o["data"]]
    assert len(pngs) == 2, out["outputs"]
    data = base64.b64decode(pngs[0]["data"]["image/png"])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    # Nothing of the plot is left for the next cell.
    assert ok(r(daemon, sid, "1"))["outputs"] == []


def test_timeout_keeps_the_session(daemon, sessions):
    sid = sessions.new()
    ok(r(daemon, sid, "keep <- 5"))
    out = r(daemon, sid, "repeat {}", timeout_s=1)
    assert out["status"] == "timeout" and out["timed_out"] is True, out
    assert out["state"] == "preserved"
    assert ok(r(daemon, sid, "keep"))["result"] == "[1] 5"


def test_languages_share_the_workspace(daemon, sessions):
    sid = sessions.new()
    ok(daemon.execute(sid, "open('/work/from_py.txt', 'w').write('py')"))
    out = ok(r(daemon, sid, "writeLines('r', '/work/from_r.txt')\n"
                            "c(readLines('from_py.txt', warn = FALSE), getwd())"))
    assert out["result"] == '[1] "py"    "/work"', out
    assert any(f["path"] == "from_r.txt" for f in out["files"]), out


def test_env_and_cwd_apply_to_one_cell(daemon, sessions):
    sid = sessions.new()
    ok(daemon.execute(sid, "mkdir -p sub", language="bash"))
    out = ok(r(daemon, sid, "c(Sys.getenv('ONLY_HERE'), basename(getwd()))",
               env={"ONLY_HERE": "yes"}, cwd="/work/sub"))
    assert out["result"] == '[1] "yes" "sub"', out
    out = ok(r(daemon, sid, "c(Sys.getenv('ONLY_HERE'), getwd())"))
    assert out["result"] == '[1] ""      "/work"', out


@pytest.mark.parametrize("profile", ["minimal", "data-science", "visualization"])
def test_python_only_profile_refuses_r(daemon, sessions, profile):
    sid = sessions.new(profile=profile)
    resp = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "1", "language": "r"})
    assert resp.status_code == 400, resp.text
    assert f"profile '{profile}' does not allow r" in resp.json()["error"], resp.text


def test_unknown_language_names_r(daemon, sessions):
    sid = sessions.new()
    resp = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "1", "language": "R"})
    assert resp.status_code == 400 and '"r"' in resp.json()["error"], resp.text


def test_profile_lists_r(daemon):
    resp = daemon.get("/v1/profiles")
    profiles = {p["name"]: p for p in resp.json()["profiles"]}
    assert "r" in profiles["default"]["languages"]
    assert "r" not in profiles["data-science"]["languages"]


def test_system_runs_where_bash_is_allowed(daemon, sessions):
    sid = sessions.new()
    out = ok(r(daemon, sid, "system('echo shell-ran', intern = TRUE)"))
    assert out["result"] == '[1] "shell-ran"', out


def test_stdin_is_refused(daemon, sessions):
    sid = sessions.new()
    resp = daemon.post(f"/v1/sessions/{sid}/execute",
                       json={"code": "1", "language": "r", "stdin": "x"})
    assert resp.status_code == 400 and "r cells have no standard input" in resp.text, resp.text


def test_without_bash_r_runs_no_program(daemon, sessions):
    """The profile allows R but not bash: the R process may execute nothing (a seccomp filter of
    its own), yet starts with its default packages and plots."""
    sid = sessions.new(profile=NO_BASH)
    out = ok(r(daemon, sid, "status <- system('echo ran')\nstatus"))
    assert out["result"] == "[1] 127" and "ran" not in out["stdout"], out
    out = ok(r(daemon, sid, "plot(1:3)\nc(unname(Sys.which('sh')), search()[2])"))
    assert out["result"] == '[1] ""              "package:stats"', out["result"]
    assert len(out["outputs"]) == 1, out["outputs"]


def test_stop_and_fork_say_r_state_is_lost(daemon, sessions):
    sid = sessions.new()
    ok(daemon.execute(sid, "kept = 7"))
    ok(r(daemon, sid, "rvar <- 1"))
    resp = daemon.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
    assert resp.status_code == 201, daemon.why(resp)
    child = resp.json()["sessions"][0]
    sessions.ids.append(child["id"])
    assert "(r state)" in child["lost_names"], child
    assert ok(r(daemon, child["id"], "exists('rvar')"))["result"] == "[1] FALSE"

    resp = daemon.post(f"/v1/sessions/{sid}/stop")
    assert resp.status_code == 200, daemon.why(resp)
    assert "(r state)" in resp.json()["lost_names"], resp.json()
    out = ok(r(daemon, sid, "exists('rvar')"))
    assert out.get("resumed") is True and out["result"] == "[1] FALSE", out
    assert ok(daemon.execute(sid, "kept"))["result"] == "7"


def test_interrupt_keeps_the_session(daemon, sessions):
    sid = sessions.new()
    ok(r(daemon, sid, "kept <- 'here'"))
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("out", r(daemon, sid, "Sys.sleep(60)")))
    t.start()
    time.sleep(1.5)
    resp = daemon.post(f"/v1/sessions/{sid}/interrupt")
    assert resp.status_code in (200, 202), daemon.why(resp)
    t.join(30)
    out = box["out"]
    assert out["status"] == "error" and out["error"]["name"] == "KeyboardInterrupt", out
    assert out["state"] == "preserved"
    assert ok(r(daemon, sid, "kept"))["result"] == '[1] "here"'


def test_start_warns_of_a_profile_without_r(daemon):
    assert (f"profile={NO_R} msg=\"the profile allows r but '{EMPTY_ROOT}/usr/lib/R/lib/libR.so' "
            "is not installed: its r cells will fail (apt-get install r-base-core)") \
        in daemon.log_text()
    assert f"profile={NO_BASH} msg=\"the profile allows r" not in daemon.log_text()
