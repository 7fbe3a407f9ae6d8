"""GET /metrics (docs/METRICS.md): the Prometheus text format, parsed with Debian's
python3-prometheus-client, checked against executions these tests made; its token on the API's
listener; the tokenless --metrics-listen, loopback unless --metrics-public; route templates and
ranks as labels, never session ids; the top-N bound."""
import os
import re
import subprocess
import tempfile
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from airlock_daemon import AIRLOCK, SESSION_ID_RE, daemon_fixture, sessions_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="airlock's namespaces isolation needs root")

TOP_N = 2
daemon = daemon_fixture(pytest, args=("--pool-size", "1", "--metrics-listen", "127.0.0.1:0",
                                      "--metrics-top-sessions", str(TOP_N)))
sessions = sessions_fixture(pytest)

METRICS_LISTEN_RE = re.compile(r"GET /metrics without a token on http://127\.0\.0\.1:(\d+)")

# (sample family name as the parser names it, type) that every scrape has.
EXPECTED = {
    "airlock_build_info": "gauge",
    "airlock_executions": "counter",
    "airlock_execution_duration_seconds": "histogram",
    "airlock_session_create_duration_seconds": "histogram",
    "airlock_zygote_restarts": "counter",
    "airlock_sandbox_oom_kills": "counter",
    "airlock_tool_calls": "counter",
    "airlock_http_requests": "counter",
    "airlock_audit_write_failures": "counter",
    "airlock_sessions": "gauge",
    "airlock_sessions_max": "gauge",
    "airlock_pool_sessions": "gauge",
    "airlock_pool_target_sessions": "gauge",
    "airlock_pool_takes": "counter",
    "airlock_zygote_up": "gauge",
    "airlock_session_memory_bytes": "gauge",
    "airlock_session_cpu_seconds": "gauge",
    "process_cpu_seconds": "counter",
    "process_resident_memory_bytes": "gauge",
    "process_virtual_memory_bytes": "gauge",
    "process_open_fds": "gauge",
    "process_max_fds": "gauge",
    "process_start_time_seconds": "gauge",
}


def metrics_token(daemon):
    return (daemon.state_dir / "metrics-token").read_text().strip()


def scrape(daemon):
    """(text, {family name: family}) of GET /metrics with the metrics token."""
    r = daemon.client(metrics_token(daemon)).get(daemon.url + "/metrics", timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return r.text, {f.name: f for f in text_string_to_metric_families(r.text)}


def value(families, family, sample_name, **labels):
    """The value of the sample with exactly these labels (0 when there is none)."""
    for s in families[family].samples:
        if s.name == sample_name and s.labels == labels:
            return s.value
    return 0


def executions(families, status):
    return value(families, "airlock_executions", "airlock_executions_total",
                 profile="default", status=status)


def test_every_family_has_its_name_type_and_help(daemon):
    text, families = scrape(daemon)
    for name, typ in EXPECTED.items():
        assert name in families, f"{name} missing from:\n{text[:2000]}"
        assert families[name].type == typ, (name, families[name].type)
        assert families[name].documentation.strip(), f"{name} has no HELP"
    for name, f in families.items():
        assert name.startswith(("airlock_", "process_")), name
        for s in f.samples:
            if f.type == "counter":
                assert s.name.endswith(("_total", "_created")), s.name
    assert value(families, "airlock_build_info", "airlock_build_info",
                 version=families["airlock_build_info"].samples[0].labels["version"]) == 1
    assert value(families, "process_open_fds", "process_open_fds") > 0
    assert value(families, "process_resident_memory_bytes", "process_resident_memory_bytes") > 0
    start = value(families, "process_start_time_seconds", "process_start_time_seconds")
    assert time.time() - 3600 < start <= time.time() + 1


def test_counters_move_with_real_executions(daemon, sessions):
    _, before = scrape(daemon)
    sid = sessions.new()
    assert daemon.execute(sid, "1 + 1")["status"] == "ok"
    assert daemon.execute(sid, "1 / 0")["status"] == "error"
    r = daemon.execute(sid, "import time\ntime.sleep(30)", timeout_s=1)
    assert r["status"] == "timeout", r
    _, after = scrape(daemon)
    for status in ("ok", "error", "timeout"):
        assert executions(after, status) >= executions(before, status) + 1, status
        # The histogram of the same executions counts them too.
        count = value(after, "airlock_execution_duration_seconds",
                      "airlock_execution_duration_seconds_count", profile="default",
                      status=status)
        assert count == executions(after, status), status
    # The timeout's execution took at least its timeout.
    assert value(after, "airlock_execution_duration_seconds",
                 "airlock_execution_duration_seconds_sum", profile="default",
                 status="timeout") >= 1.0
    created = "airlock_session_create_duration_seconds"
    assert (value(after, created, created + "_count", profile="default")
            >= value(before, created, created + "_count", profile="default") + 1)
    route = "/v1/sessions/{id}/execute"
    assert (value(after, "airlock_http_requests", "airlock_http_requests_total",
                  method="POST", route=route, status="200")
            >= value(before, "airlock_http_requests", "airlock_http_requests_total",
                     method="POST", route=route, status="200") + 3)


def test_an_oom_is_counted_where_the_host_can_kill_for_memory(daemon, sessions):
    _, before = scrape(daemon)
    sid = sessions.new(profile="minimal")
    r = daemon.execute(sid, "x = bytearray(1 << 30)\nx[::4096] = b'x' * len(x[::4096])")
    if r["status"] != "oom":
        pytest.skip(f"this host did not OOM-kill the cell (status {r['status']}): no memory "
                    f"cgroup limit")
    _, after = scrape(daemon)
    oom = lambda f: value(f, "airlock_sandbox_oom_kills", "airlock_sandbox_oom_kills_total",
                          profile="minimal")
    assert oom(after) == oom(before) + 1
    assert (value(after, "airlock_executions", "airlock_executions_total", profile="minimal",
                  status="oom")
            == value(before, "airlock_executions", "airlock_executions_total",
                     profile="minimal", status="oom") + 1)


def test_histogram_buckets_are_cumulative_and_consistent(daemon, sessions):
    sid = sessions.new()
    for _ in range(3):
        daemon.execute(sid, "sum(range(1000))")
    _, families = scrape(daemon)
    seen = 0
    for name, f in families.items():
        if f.type != "histogram":
            continue
        series = {}
        for s in f.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            series.setdefault(key, {"buckets": []})
            if s.name.endswith("_bucket"):
                series[key]["buckets"].append((float(s.labels["le"]), s.value))
            else:
                series[key][s.name.rsplit("_", 1)[1]] = s.value
        for key, h in series.items():
            seen += 1
            les = [le for le, _ in h["buckets"]]
            counts = [c for _, c in h["buckets"]]
            assert les == sorted(les) and les[-1] == float("inf"), (name, key, les)
            assert all(a <= b for a, b in zip(counts, counts[1:])), (name, key, counts)
            assert counts[-1] == h["count"], (name, key)
            assert h["sum"] >= 0
    assert seen >= 2


def test_the_api_listener_wants_the_metrics_token_or_the_api_token(daemon):
    anon = daemon.client(None)
    anon.headers.pop("Authorization", None)
    r = anon.get(daemon.url + "/metrics", timeout=10)
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert "metrics token" in r.json()["error"]
    assert daemon.client("not-the-token").get(daemon.url + "/metrics").status_code == 401
    assert daemon.client(metrics_token(daemon)).get(daemon.url + "/metrics").status_code == 200
    assert daemon.client(daemon.token).get(daemon.url + "/metrics").status_code == 200
    # The metrics token opens /metrics and nothing else.
    r = daemon.client(metrics_token(daemon)).get(daemon.url + "/v1/sessions", timeout=10)
    assert r.status_code == 401


def metrics_port(daemon):
    m = METRICS_LISTEN_RE.search(daemon.log_text())
    assert m, daemon.log_text()[-2000:]
    return int(m.group(1))


def test_the_metrics_listener_needs_no_token_and_serves_nothing_else(daemon):
    base = f"http://127.0.0.1:{metrics_port(daemon)}"
    s = requests.Session()
    s.trust_env = False
    r = s.get(base + "/metrics", timeout=10)
    assert r.status_code == 200
    families = {f.name for f in text_string_to_metric_families(r.text)}
    assert "airlock_executions" in families
    for path in ("/v1/sessions", "/healthz", "/execute", "/mcp"):
        assert s.get(base + path, timeout=10).status_code == 404, path
    # A token for the API does not turn it into one.
    r = s.get(base + "/v1/sessions", headers={"Authorization": f"Bearer {daemon.token}"})
    assert r.status_code == 404
    # DNS rebinding: a page whose name now points at 127.0.0.1 is refused.
    r = s.get(base + "/metrics", headers={"Host": "evil.example"}, timeout=10)
    assert r.status_code == 403


def test_no_session_id_becomes_a_label(daemon, sessions):
    sid = sessions.new()
    daemon.execute(sid, "open('f.txt', 'w').write('x')")
    assert daemon.get(f"/v1/sessions/{sid}").status_code == 200
    assert daemon.get(f"/v1/sessions/{sid}/files/f.txt").status_code == 200
    assert daemon.get("/v1/sessions/s-0123456789abcdef01234567").status_code == 404
    assert daemon.get(f"/no/such/route/{sid}").status_code == 404
    text, families = scrape(daemon)
    assert not SESSION_ID_RE.search(text), SESSION_ID_RE.search(text).group(0)
    routes = {s.labels["route"] for s in families["airlock_http_requests"].samples}
    assert "/v1/sessions/{id}" in routes and "/v1/sessions/{id}/files/{path*}" in routes
    assert "unmatched" in routes
    assert all(r == "unmatched" or r.startswith("/") for r in routes)


def test_top_sessions_are_bounded_and_ranked(daemon, sessions):
    ids = [sessions.new() for _ in range(TOP_N + 1)]
    daemon.execute(ids[0], "big = bytearray(64 << 20)\nbig[::4096] = b'x' * len(big[::4096])")
    _, families = scrape(daemon)
    mem = families["airlock_session_memory_bytes"].samples
    assert len(mem) == TOP_N, mem
    assert [s.labels["rank"] for s in mem] == [str(i + 1) for i in range(TOP_N)]
    assert all(set(s.labels) == {"rank", "profile"} for s in mem)
    values = [s.value for s in mem]
    assert values == sorted(values, reverse=True)
    assert values[0] >= 64 << 20
    cpu = families["airlock_session_cpu_seconds"].samples
    assert len(cpu) == TOP_N and all(s.value >= 0 for s in cpu)
    states = {s.labels["state"]: s.value for s in families["airlock_sessions"].samples}
    assert states["idle"] + states["busy"] >= TOP_N + 1


@pytest.mark.parametrize("args, message", [
    (["--metrics-listen", "0.0.0.0:9464"], "not a loopback address"),
    (["--metrics-listen", "[::]:9464"], "not a loopback address"),
    (["--metrics-public"], "--metrics-public goes with --metrics-listen"),
    (["--metrics-listen", "nonsense"], "--metrics-listen 'nonsense'"),
    (["--metrics-top-sessions", "101"], "--metrics-top-sessions '101'"),
])
def test_bad_metrics_flags_are_refused_at_start(args, message):
    with tempfile.TemporaryDirectory(prefix="airlock-e2e-metrics-") as d:
        p = subprocess.run([AIRLOCK, "serve", "--listen", "127.0.0.1:0", "--state-dir", d, *args],
                           capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr, p.stderr
