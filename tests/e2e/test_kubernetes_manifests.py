"""The Kubernetes manifests (packaging/kubernetes, docs/KUBERNETES.md) rendered offline with
`kubectl kustomize`, and what the rendered objects promise: probes, volumes, securityContext,
the token and ConfigMaps they name, the headless Service, the NetworkPolicy and PDB, and that
the front door's nginx configuration is the very template scripts/cluster.sh renders.

KUBECTL_OLD may name a second kubectl (Debian 12's kubernetes-client 1.20, whose kustomize is
v2) to render with as well: `apt-get download kubernetes-client && dpkg -x ... /tmp/kc` then
KUBECTL_OLD=/tmp/kc/usr/bin/kubectl."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="python3-yaml is not installed (apt-get install python3-yaml)")

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "packaging" / "kubernetes"
FRONTDOOR = K8S / "base" / "frontdoor"


def kubectls():
    found = []
    if shutil.which("kubectl"):
        found.append(shutil.which("kubectl"))
    old = os.environ.get("KUBECTL_OLD")
    if old and os.access(old, os.X_OK):
        found.append(old)
    return found


KUBECTLS = kubectls() or [None]


def render(kubectl, path):
    if kubectl is None:
        pytest.skip("kubectl is not installed (apt-get install kubernetes-client): the manifests "
                    "cannot be rendered")
    p = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{kubectl} kustomize {path} failed:\n{p.stderr}"
    return [d for d in yaml.safe_load_all(p.stdout) if d]


@pytest.fixture(scope="module", params=KUBECTLS)
def base(request):
    return render(request.param, K8S)


@pytest.fixture(scope="module", params=KUBECTLS)
def overlay(request):
    return render(request.param, K8S / "overlays" / "example")


def one(objs, kind, name=None):
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"want one {kind} {name or ''}, got {[o['metadata']['name'] for o in hits]}"
    return hits[0]


def configmap(objs, prefix):
    """A generated ConfigMap, whose name carries kustomize's content hash."""
    hits = [o for o in objs if o["kind"] == "ConfigMap" and re.fullmatch(prefix + r"(-[a-z0-9]{10})?", o["metadata"]["name"])]
    assert len(hits) == 1, f"want one ConfigMap {prefix}"
    return hits[0]


def container(sts, name="airlock"):
    return next(c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def arg_after(c, flag):
    args = c["args"]
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def env(c, name):
    return next(e for e in c["env"] if e["name"] == name)


def port_number(c, port):
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in c["ports"] if p["name"] == port)


def test_statefulset_probes_ports_and_grace(base):
    sts = one(base, "StatefulSet", "airlock")
    c = container(sts)
    assert arg_after(c, "--listen") == ["0.0.0.0:8080"]
    ready, live = c["readinessProbe"]["httpGet"], c["livenessProbe"]["httpGet"]
    assert ready["path"] == "/readyz" and port_number(c, ready["port"]) == 8080
    assert live["path"] == "/healthz" and port_number(c, live["port"]) == 8080
    # The kubelet's probes carry Host: POD_IP:8080, which the daemon must accept.
    assert "$(POD_IP):8080" in arg_after(c, "--allow-host")
    assert env(c, "POD_IP")["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # Long enough for the SIGTERM drain (the systemd unit gives 180 s).
    assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 180
    assert c["resources"]["requests"]["cpu"] and c["resources"]["limits"]["memory"]


def test_statefulset_node_name_and_peers(base):
    sts = one(base, "StatefulSet", "airlock")
    c = container(sts)
    assert sts["spec"]["serviceName"] == "airlock-peers"
    assert arg_after(c, "--node") == ["$(POD_NAME)"]
    assert env(c, "POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert arg_after(c, "--peers") == ["airlock-[0-15]={node}.airlock-peers:8080"]
    # The front door looks for as many pods as --peers names.
    fd = container(one(base, "Deployment", "airlock-frontdoor"), "nginx")
    assert env(fd, "AIRLOCK_MAX_NODES")["value"] == "16"
    assert env(fd, "AIRLOCK_PEERS_SERVICE")["value"] == "airlock-peers"
    assert env(fd, "AIRLOCK_STATEFULSET")["value"] == sts["metadata"]["name"]


def test_statefulset_state_volume(base):
    sts = one(base, "StatefulSet", "airlock")
    c = container(sts)
    vct = sts["spec"]["volumeClaimTemplates"]
    assert [v["metadata"]["name"] for v in vct] == ["state"]
    assert vct[0]["spec"]["accessModes"] == ["ReadWriteOnce"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["state"] == "/var/lib/airlock"
    assert arg_after(c, "--state-dir") == ["/var/lib/airlock"]
    # Scaling down keeps the volumes, so a node's sessions come back with it.
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}


def test_statefulset_security_context(base):
    sts = one(base, "StatefulSet", "airlock")
    pod = sts["spec"]["template"]["spec"]
    sc = container(sts)["securityContext"]
    assert sc["privileged"] is True
    assert sc["runAsUser"] == 0
    assert sc["seccompProfile"] == {"type": "Unconfined"}
    assert sc["appArmorProfile"] == {"type": "Unconfined"}
    assert sc["procMount"] == "Unmasked"
    assert pod["hostUsers"] is True
    assert pod["automountServiceAccountToken"] is False
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations["container.apparmor.security.beta.kubernetes.io/airlock"] == "unconfined"


def test_prometheus_annotations_name_the_metrics_listener(base):
    sts = one(base, "StatefulSet", "airlock")
    c = container(sts)
    a = sts["spec"]["template"]["metadata"]["annotations"]
    assert a["prometheus.io/scrape"] == "true" and a["prometheus.io/path"] == "/metrics"
    listen = arg_after(c, "--metrics-listen")
    assert listen == [f"0.0.0.0:{a['prometheus.io/port']}"]
    assert "--metrics-public" in c["args"]
    assert f"$(POD_IP):{a['prometheus.io/port']}" in arg_after(c, "--allow-host")
    assert port_number(c, "metrics") == int(a["prometheus.io/port"])


def test_token_tenants_profiles_and_mcp_come_from_secrets_and_configmaps(base):
    sts = one(base, "StatefulSet", "airlock")
    c = container(sts)
    pod = sts["spec"]["template"]["spec"]
    token = env(c, "AIRLOCK_TOKEN")["valueFrom"]["secretKeyRef"]
    assert token == {"name": "airlock-token", "key": "token"}
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["tenants"]["secret"]["secretName"] == "airlock-tenants"
    init = pod["initContainers"][0]
    assert {m["name"] for m in init["volumeMounts"]} == {"state", "tenants"}
    assert "/var/lib/airlock/tenants/tenants.db" in init["command"][-1]

    names = {o["metadata"]["name"] for o in base if o["kind"] == "ConfigMap"}
    for vol in ("profiles", "mcp"):
        assert vols[vol]["configMap"]["name"] in names, f"volume {vol} names a ConfigMap that is not rendered"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert env(c, "AIRLOCK_PROFILES_DIR")["value"] == mounts["profiles"]
    mcp = arg_after(c, "--mcp-config")[0]
    cm = configmap(base, "airlock-mcp")
    assert os.path.dirname(mcp) == mounts["mcp"] and os.path.basename(mcp) in cm["data"]
    json.loads(cm["data"][os.path.basename(mcp)])
    for e in c["env"]:
        ref = e.get("valueFrom", {}).get("configMapKeyRef")
        if ref:
            assert ref["name"] in names
            settings = next(o for o in base if o["metadata"]["name"] == ref["name"])
            assert ref["key"] in settings["data"]


def test_headless_service_publishes_not_ready_pods(base):
    svc = one(base, "Service", "airlock-peers")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    pods = one(base, "StatefulSet", "airlock")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pods.items()
    front = one(base, "Service", "airlock")
    fd_pods = one(base, "Deployment", "airlock-frontdoor")["spec"]["template"]["metadata"]["labels"]
    assert front["spec"]["selector"].items() <= fd_pods.items()
    assert not front["spec"]["selector"].items() <= pods.items()


def test_network_policy(base):
    node = one(base, "NetworkPolicy", "airlock-node")
    assert set(node["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    egress = node["spec"]["egress"]
    ports = [(p.get("protocol", "TCP"), p["port"]) for rule in egress for p in rule.get("ports", [])]
    assert ("UDP", 53) in ports and ("TCP", 8080) in ports
    # Every address rule of a profile's network.allow in the ConfigMap has its egress rule.
    profiles = configmap(base, "airlock-profiles")["data"]
    blocks = {(to["ipBlock"]["cidr"], p["port"]) for rule in egress for to in rule.get("to", [])
              if "ipBlock" in to for p in rule["ports"]}
    for name, text in profiles.items():
        net = json.loads(text).get("network")
        if isinstance(net, dict):
            for rule in net.get("allow", []):
                host, port = rule.rsplit(":", 1)
                if re.fullmatch(r"[0-9./]+", host):
                    cidr = host if "/" in host else host + "/32"
                    assert (cidr, int(port)) in blocks, f"{name}: {rule} has no egress rule"
    # The metrics port only from the monitoring namespace.
    metrics = [r for r in node["spec"]["ingress"] if any(p["port"] == 9090 for p in r["ports"])]
    assert metrics and all("namespaceSelector" in f for r in metrics for f in r["from"])
    fd = one(base, "NetworkPolicy", "airlock-frontdoor")
    assert set(fd["spec"]["policyTypes"]) == {"Ingress", "Egress"}


def test_pod_disruption_budget(base):
    pdb = one(base, "PodDisruptionBudget", "airlock")
    assert pdb["spec"]["maxUnavailable"] == 1
    pods = one(base, "StatefulSet", "airlock")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pods.items()


def test_frontdoor_runs_the_configmaps_renderer_unprivileged(base):
    dep = one(base, "Deployment", "airlock-frontdoor")
    c = container(dep, "nginx")
    assert c["command"] == ["/etc/airlock-frontdoor/run"]
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    cm = configmap(base, "airlock-frontdoor")
    assert vols["config"]["configMap"]["name"] == cm["metadata"]["name"]
    assert vols["config"]["configMap"]["defaultMode"] == 0o555
    assert dep["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/frontdoor/healthz"


NODES = "n0 10.251.9.2:8080\nn1 10.251.9.3:8080\nn2 -\n"


def render_nginx(directory, tmp_path, nodes=NODES):
    p = subprocess.run(["sh", str(directory / "render"), "--listen", "127.0.0.1:18080", "--rundir",
                        str(tmp_path / "run"), "-"], input=nodes, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_configmap_carries_the_template_cluster_sh_renders(base, tmp_path):
    cm = configmap(base, "airlock-frontdoor")["data"]
    for f in ("nginx.conf.in", "render", "run"):
        assert cm[f] == (FRONTDOOR / f).read_text(), f"the ConfigMap's {f} is not {FRONTDOOR / f}"
    # The ConfigMap's files, written out and run, render what scripts/cluster.sh renders.
    cmdir = tmp_path / "cm"
    cmdir.mkdir()
    for f, text in cm.items():
        (cmdir / f).write_text(text)
    assert render_nginx(cmdir, tmp_path) == render_nginx(FRONTDOOR, tmp_path)
    cluster = (ROOT / "scripts" / "cluster.sh").read_text()
    assert "render=$root/packaging/kubernetes/base/frontdoor/render" in cluster


def test_rendered_routing(tmp_path):
    conf = render_nginx(FRONTDOOR, tmp_path)
    # Only the listed names route by id; a listed node without an address gets the 503.
    assert re.search(r"^\s+n0 airlock_node_n0;$", conf, re.M)
    assert re.search(r"^\s+n2 airlock_gone;$", conf, re.M)
    assert "default airlock_pool;" in conf
    assert "server 10.251.9.2:8080 max_fails=3 fail_timeout=5s;" in conf
    assert "least_conn;" in conf
    assert "proxy_next_upstream error timeout http_503 non_idempotent;" in conf
    assert "proxy_next_upstream_tries 2;" in conf
    assert "add_header Retry-After 5 always;" in conf
    assert "proxy_buffering off;" in conf and "proxy_request_buffering off;" in conf
    assert "proxy_read_timeout 3660s;" in conf and "proxy_read_timeout 30s;" in conf
    assert "limit_conn airlock_per_client 512;" in conf
    assert "client_max_body_size 513m;" in conf
    assert "@" not in re.sub(r"@airlock_down|#.*", "", conf)
    # No address is ever taken from a request.
    assert not re.search(r"proxy_pass http://\$(?!airlock_upstream\b)", conf)
    if shutil.which("nginx"):
        (tmp_path / "run").mkdir()
        (tmp_path / "nginx.conf").write_text(conf)
        p = subprocess.run(["nginx", "-t", "-q", "-p", str(tmp_path / "run"), "-e", str(tmp_path / "run" / "error.log"),
                            "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr


@pytest.mark.skipif(not shutil.which("nginx"), reason="no nginx to check the rendered file")
def test_nodes_named_as_the_maps_keywords_render_a_valid_config(tmp_path):
    # "default", "include", "hostnames" and "volatile" are valid node names (DNS labels) and
    # keywords of nginx's map block: as plain keys they make nginx refuse the file ("duplicate
    # default map parameter") or replace the pool as the default route
    conf = render_nginx(FRONTDOOR, tmp_path, nodes="default 10.251.9.2:8080\n"
                        "include 10.251.9.3:8080\nhostnames -\nvolatile 10.251.9.4:8080\n"
                        "n0 10.251.9.5:8080\nr1 10.251.9.6:8080\nt2 -\n")
    assert "default airlock_pool;" in conf
    # the keywords behind the backslash the map drops; every other name as it is (nginx's
    # parser would read "\n0" as a newline and "0": n0's sessions would go to the pool)
    for line in ("\\default airlock_node_default;", "\\include airlock_node_include;",
                 "\\hostnames airlock_gone;", "\\volatile airlock_node_volatile;",
                 " n0 airlock_node_n0;", " r1 airlock_node_r1;", " t2 airlock_gone;"):
        assert line in conf, (line, conf)
    (tmp_path / "run").mkdir()
    (tmp_path / "nginx.conf").write_text(conf)
    p = subprocess.run(["nginx", "-t", "-q", "-p", str(tmp_path / "run"), "-e",
                        str(tmp_path / "run" / "error.log"), "-c", str(tmp_path / "nginx.conf")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("nodes, message", [
    ("N0 1.2.3.4:8080\n", "is not a DNS label"),
    ("n0 1.2.3.4:8080\nn0 1.2.3.5:8080\n", "listed twice"),
    ("n0 1.2.3.4\n", "is not HOST:PORT"),
    ("n0 $host:80\n", "is not HOST:PORT"),
    ("n0\n", "want NAME ADDRESS"),
    ("a" * 33 + " 1.2.3.4:80\n", "at most 32"),
])
def test_renderer_refuses_bad_nodes(tmp_path, nodes, message):
    p = subprocess.run(["sh", str(FRONTDOOR / "render"), "-"], input=nodes, capture_output=True, text=True)
    assert p.returncode == 2 and message in p.stderr, p.stderr


def test_overlay(overlay):
    assert {o["metadata"].get("namespace") for o in overlay} == {"airlock-example"}
    sts = one(overlay, "StatefulSet", "airlock")
    assert sts["spec"]["replicas"] == 5
    c = container(sts)
    assert c["image"] == "registry.internal.example/platform/airlock:0.9.0"
    assert c["resources"]["requests"]["cpu"] == "8"
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "fast-ssd"
    # What the overlay did not change is still there.
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["securityContext"]["privileged"] is True
    settings = configmap(overlay, "airlock-settings")["data"]
    assert settings["public-host"] == "airlock.airlock-example.svc"
    assert settings["max-sessions"] == "128"
    ref = env(c, "AIRLOCK_PUBLIC_HOST")["valueFrom"]["configMapKeyRef"]["name"]
    assert ref == configmap(overlay, "airlock-settings")["metadata"]["name"]


def test_frontdoor_run_as_in_its_pod(tmp_path):
    """frontdoor/run as the Deployment runs it (www-data, its own run directory): nginx starts
    with every pod name unresolved, requests for their sessions answer 503 naming the node,
    the rest 503 without a node, and SIGTERM stops nginx and the loop."""
    import signal
    import socket
    import tempfile
    import time
    import urllib.error
    import urllib.request

    if os.geteuid() != 0 or not shutil.which("nginx") or not shutil.which("setpriv"):
        pytest.skip("needs root, nginx (apt-get install nginx-light) and setpriv (util-linux)")
    base = Path(tempfile.mkdtemp(prefix="airlock-frontdoor-", dir="/tmp"))
    try:
        base.chmod(0o755)
        conf = base / "etc"
        conf.mkdir()
        for f in ("nginx.conf.in", "render", "run"):
            shutil.copy(FRONTDOOR / f, conf / f)
            (conf / f).chmod(0o555)
        run_dir = base / "run"
        run_dir.mkdir()
        os.chown(run_dir, 33, 33)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, AIRLOCK_PEERS_SERVICE="airlock-peers.invalid", AIRLOCK_MAX_NODES="2",
                   FRONTDOOR_LISTEN=f"127.0.0.1:{port}", FRONTDOOR_RUNDIR=str(run_dir),
                   FRONTDOOR_INTERVAL="1", TMPDIR=str(run_dir))
        p = subprocess.Popen(["setpriv", "--reuid=33", "--regid=33", "--clear-groups", str(conf / "run")],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(100):
                try:
                    if urllib.request.urlopen(url + "/frontdoor/healthz", timeout=2).status == 200:
                        break
                except OSError:
                    time.sleep(0.1)
            else:
                why = p.stderr.read() if p.poll() is not None else "(still running)"
                raise AssertionError(f"the front door did not answer on {url}: {why}")

            def get(path):
                try:
                    urllib.request.urlopen(url + path, timeout=5)
                except urllib.error.HTTPError as e:
                    return e.code, dict(e.headers), json.loads(e.read())
                raise AssertionError(f"{path} answered 2xx")

            code, headers, body = get(f"/v1/sessions/s-{'ab' * 12}-airlock-1")
            assert code == 503 and headers["Retry-After"] == "5" and body["node"] == "airlock-1"
            code, headers, body = get(f"/v1/sessions/s-{'ab' * 12}-airlock-7")
            assert code == 503 and "node" not in body and "Airlock-Node" not in headers
            code, _, body = get("/v1/sessions")
            assert code == 503 and "no airlock node answered" in body["error"]
            assert (run_dir / "nodes").read_text() == "airlock-0 -\nairlock-1 -\n"
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                out, err = p.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                raise AssertionError("frontdoor/run did not stop on SIGTERM")
        assert p.returncode == 0, err
        assert "frontdoor: nodes:" in out
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_frontdoor_containerfile():
    """The image is not built here (no network, no container runtime): its recipe is checked
    against the Deployment and the repository instead."""
    text = (ROOT / "packaging" / "Containerfile.frontdoor").read_text()
    lines = [l for l in re.sub(r"\\\n", " ", text).splitlines() if l and not l.startswith("#")]
    assert lines[0] == "FROM docker.io/library/debian:12-slim"
    assert any("apt-get install" in l and "nginx-light" in l for l in lines)
    copy = next(l for l in lines if l.startswith("COPY "))
    src, dst = copy.split()[1:3]
    assert (ROOT / src).resolve() == FRONTDOOR.resolve() and dst == "/etc/airlock-frontdoor/"
    assert "USER www-data" in lines
    assert 'ENTRYPOINT ["/etc/airlock-frontdoor/run"]' in lines


def test_the_daemon_takes_the_statefulsets_arguments(tmp_path):
    """The StatefulSet's command line, with the pod's variables filled in, is one the daemon
    accepts: it starts, answers the probes' paths with the Host the kubelet sends, and serves
    /metrics without a token on the annotated port. Run in a network namespace of its own, so
    0.0.0.0 is that namespace's only."""
    binary = os.environ.get("AIRLOCK_BIN")
    if os.geteuid() != 0 or not binary or not shutil.which("unshare") or not shutil.which("curl"):
        pytest.skip("needs root, AIRLOCK_BIN, unshare and curl")
    base = render(KUBECTLS[0], K8S)
    sts = one(base, "StatefulSet", "airlock")
    c = container(sts)
    state = tmp_path / "state"
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "mcp.json").write_text(configmap(base, "airlock-mcp")["data"]["mcp.json"])
    values = {"POD_NAME": "airlock-0", "POD_IP": "127.0.0.1", "AIRLOCK_MAX_SESSIONS": "4",
              "AIRLOCK_PUBLIC_HOST": "airlock.airlock.svc"}
    args = []
    for a in c["args"]:
        a = re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a)
        a = a.replace("/var/lib/airlock", str(state)).replace("/etc/airlock/mcp", str(tmp_path / "mcp"))
        args.append(a)
    probe = c["readinessProbe"]["httpGet"]["path"]
    script = f"""
        set -u
        ip link set lo up
        {binary} {' '.join(f"'{a}'" for a in args)} --pool-size 0 >{tmp_path}/log 2>&1 &
        pid=$!
        code=
        for i in $(seq 300); do
                code=$(curl -s -o /dev/null -w '%{{http_code}}' -H 'Host: 127.0.0.1:8080' http://127.0.0.1:8080{probe})
                [ "$code" = 200 ] && break
                sleep 0.1
        done
        echo "probe $code"
        echo "live $(curl -s -o /dev/null -w '%{{http_code}}' -H 'Host: 127.0.0.1:8080' http://127.0.0.1:8080/healthz)"
        echo "metrics $(curl -s -o /dev/null -w '%{{http_code}}' -H 'Host: 127.0.0.1:9090' http://127.0.0.1:9090/metrics)"
        echo "frontdoor-host $(curl -s -o /dev/null -w '%{{http_code}}' -H 'Host: airlock.airlock.svc' http://127.0.0.1:8080/healthz)"
        echo "foreign-host $(curl -s -o /dev/null -w '%{{http_code}}' -H 'Host: evil.example' http://127.0.0.1:8080/healthz)"
        kill -TERM $pid
        wait $pid
        echo "exit $?"
    """
    env = dict(os.environ, AIRLOCK_TOKEN="t" * 40, AIRLOCK_PROFILES_DIR=str(tmp_path))
    p = subprocess.run(["unshare", "--net", "sh", "-c", script], env=env, capture_output=True,
                       text=True, timeout=120)
    log = (tmp_path / "log").read_text(errors="replace") if (tmp_path / "log").exists() else ""
    got = dict(l.split(" ", 1) for l in p.stdout.splitlines() if " " in l)
    assert got.get("probe") == "200", p.stdout + p.stderr + log
    assert got["live"] == "200" and got["metrics"] == "200" and got["frontdoor-host"] == "200", got
    assert got["foreign-host"] == "403", got
    assert got["exit"] == "0", log
    assert "airlock-0" in log
