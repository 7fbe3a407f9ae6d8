"""The egress test lab (issue 10; docs/NETWORK.md): a private network of fake hosts for the
end-to-end egress tests (tests/e2e/test_egress.py) and the hostile egress cases
(tests/hostile/test_45_egress_proxy.py). Nothing in it ever contacts an address outside the lab.

    lab = Lab()            # or the module fixture lab_fixture(pytest)
    lab.start()            # a network + mount namespace with the hosts below
    d = lab.daemon({"etl": {...profile...}})   # `airlock serve` INSIDE the lab
    ... d.post(...), lab.hits("metadata"), lab.server("db") ...
    lab.stop()             # every daemon stopped, the lab's process killed by pid, dir removed

The lab is one process (netlab_hosts.py) started with `unshare --net --mount --propagation
private`: its loopback carries the lab's addresses (10.77.0.0/24 hosts, 169.254.169.254, fd00:77::
and fd00:ec2::254), its own /etc/hosts and /etc/resolv.conf are bound over the real ones in its
mount namespace only, and it serves every host below from threads. The daemon under test runs in
the same namespaces (through `nsenter`), so the connections its egress proxy makes go to these
hosts, and names resolve through the lab's hosts file and DNS server. The daemon listens on
127.0.0.1:P inside the lab; the lab relays the host's 127.0.0.1:P to it (a listening socket the
test made before the lab started), so the test's HTTP client and airlock_daemon.Daemon work as
for any other daemon.

Hosts (HOSTS names in the lab's /etc/hosts; DNS_ONLY names only in its DNS):
  pypi.internal   10.77.0.10  PyPI "simple" index: :80 HTTP, :443 HTTPS (self-signed, made at
                              test time with the openssl CLI); wheels built here (WHEELS)
  db.internal     10.77.0.20  TCP echo "databases" on :5432 and :5433
  other.internal  10.77.0.30  whoami HTTP (answers with its name) :80 :8080 :22, HTTPS :443 :8443
  *.wild.internal 10.77.0.31  whoami :80 (DNS answers any name below wild.internal)
  (no name)       10.77.0.40  whoami :80, reached by IPv4 literal
  bulk.internal   10.77.0.50  GET /bytes/N: N bytes (the 100 MiB download, the byte cap)
  (DNS)           10.77.0.53  UDP :53
  evil.internal   10.77.0.66  whoami :80, HTTPS :443 (never in an allow-list)
  10.77.2.5, 10.77.2.6 whoami :80 (a CIDR block); 10.77.2.5 :8080; 10.77.3.5 :80 (outside it)
  v6.internal     fd00:77::10 whoami :80; fd00:77::20 :80 (an unlisted IPv6 host)
  169.254.169.254 :80, fd00:ec2::254 :80: fake cloud metadata, counting hits (must stay 0)
  127.0.0.1:9000  whoami "lab-loopback": the loopback of the daemon's own namespace
DNS-only names: meta.internal -> 169.254.169.254; meta6.internal -> fd00:ec2::254;
  mapped.internal -> ::ffff:169.254.169.254; mixed.internal -> 10.77.0.30 and 169.254.169.254;
  rebind.internal -> 10.77.0.30, 169.254.169.254, 10.77.0.30, ... (one per A query);
  rebind-lo.internal -> 10.77.0.30, 127.0.0.1, ...; lo.internal -> 127.0.0.1.
"""
import atexit
import base64
import hashlib
import json
import os
import pathlib
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
HOSTS_SCRIPT = HERE / "netlab_hosts.py"

PYPI = "10.77.0.10"
DB = "10.77.0.20"
OTHER = "10.77.0.30"
WILD = "10.77.0.31"
ADDR_HOST = "10.77.0.40"
BULK = "10.77.0.50"
DNS_ADDR = "10.77.0.53"
EVIL = "10.77.0.66"
CIDR = "10.77.2.0/24"
CIDR_A = "10.77.2.5"
CIDR_B = "10.77.2.6"
OUTSIDE_CIDR = "10.77.3.5"
V6 = "fd00:77::10"
V6_UNLISTED = "fd00:77::20"
METADATA = "169.254.169.254"
METADATA6 = "fd00:ec2::254"
LAB_LOOPBACK_PORT = 9000
METADATA_SECRET = "netlab-metadata-secret-never-to-be-seen"

LAB_ADDRESSES = [PYPI, DB, OTHER, WILD, ADDR_HOST, BULK, DNS_ADDR, EVIL, CIDR_A, CIDR_B,
                 OUTSIDE_CIDR, METADATA, V6, V6_UNLISTED, METADATA6]

HOSTS = {"pypi.internal": PYPI, "db.internal": DB, "other.internal": OTHER,
         "bulk.internal": BULK, "evil.internal": EVIL, "wild.internal": WILD,
         "v6.internal": V6}

DNS_ONLY = {
    "meta.internal": {"addrs": [METADATA]},
    "meta6.internal": {"addrs": [METADATA6]},
    "mapped.internal": {"addrs": ["::ffff:169.254.169.254"]},
    "mixed.internal": {"addrs": [OTHER, METADATA]},
    "rebind.internal": {"rebind": [OTHER, METADATA]},
    "rebind-lo.internal": {"rebind": [OTHER, "127.0.0.1"]},
    "lo.internal": {"addrs": ["127.0.0.1"]},
}

# (kind, name, address, port, tls): the servers of netlab_hosts.py; the name is what a whoami
# answers and what stats are kept under.
SERVERS = [
    ("index", "pypi", PYPI, 80, False),
    ("index", "pypi-tls", PYPI, 443, True),
    ("echo", "db", DB, 5432, False),
    ("echo", "db-5433", DB, 5433, False),
    ("whoami", "other", OTHER, 80, False),
    ("whoami", "other-tls", OTHER, 443, True),
    ("whoami", "other-8080", OTHER, 8080, False),
    ("whoami", "other-8443", OTHER, 8443, True),
    ("whoami", "other-22", OTHER, 22, False),
    ("whoami", "wild", WILD, 80, False),
    ("whoami", "ip-host", ADDR_HOST, 80, False),
    ("bulk", "bulk", BULK, 80, False),
    ("whoami", "evil", EVIL, 80, False),
    ("whoami", "evil-tls", EVIL, 443, True),
    ("whoami", "cidr-a", CIDR_A, 80, False),
    ("whoami", "cidr-b", CIDR_B, 80, False),
    ("whoami", "cidr-a-8080", CIDR_A, 8080, False),
    ("whoami", "outside-cidr", OUTSIDE_CIDR, 80, False),
    ("whoami", "v6", V6, 80, False),
    ("whoami", "v6-unlisted", V6_UNLISTED, 80, False),
    ("whoami", "metadata", METADATA, 80, False),
    ("whoami", "metadata6", METADATA6, 80, False),
    ("whoami", "lab-loopback", "127.0.0.1", LAB_LOOPBACK_PORT, False),
]
# The servers nothing may ever reach, whatever a profile says.
FORBIDDEN_SERVERS = ("metadata", "metadata6")


def dns_records(name):
    """What the lab's DNS knows of name: {"addrs": [...]} or {"rebind": [...]}, or None."""
    if name in HOSTS:
        return {"addrs": [HOSTS[name]]}
    if name.endswith(".wild.internal"):
        return {"addrs": [WILD]}
    return DNS_ONLY.get(name)


def hosts_text():
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{addr}\t{name}" for name, addr in HOSTS.items()]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------
# Wheels for the fake index (built here, never downloaded)
# ------------------------------------------------------------------------------------------

# (project, version, requirements, module source)
WHEELS = [
    ("labpkg", "1.0", (), 'VERSION = "1.0"\n'),
    ("labpkg", "2.0", ("labdep>=1.0",), 'from labdep import ANSWER\nVERSION = "2.0"\n'),
    ("labdep", "1.0", (), "ANSWER = 42\n"),
    ("labextra", "0.1", (), 'VERSION = "0.1"\n'),
]


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def build_wheel(out_dir, project, version, requires=(), source=""):
    """A pure-Python wheel with one package `project` (an __init__.py holding source): its
    METADATA, WHEEL and RECORD as the wheel spec (PEP 427) wants. Returns its path."""
    dist = f"{project}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
    meta += "Summary: a package of the airlock egress test lab\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{project}/__init__.py": source.encode(),
        f"{dist}/METADATA": meta.encode(),
        f"{dist}/WHEEL": (b"Wheel-Version: 1.0\nGenerator: airlock-netlab\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
    }
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in files.items())
    record += f"{dist}/RECORD,,\n"
    files[f"{dist}/RECORD"] = record.encode()
    path = pathlib.Path(out_dir) / f"{project}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files.items():
            z.writestr(p, d)
    return path


def wheel_project(filename):
    return filename.split("-")[0].lower().replace("_", "-")


def sha256_file(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def make_certificate(directory):
    """A self-signed certificate for the lab's HTTPS hosts (openssl CLI, EC P-256, 2 days)."""
    names = ",".join(f"DNS:{n}" for n in ("pypi.internal", "other.internal", "evil.internal"))
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                        "-subj", "/CN=pypi.internal", "-addext", f"subjectAltName={names}",
                        "-keyout", str(directory / "key.pem"), "-out",
                        str(directory / "cert.pem")], capture_output=True, text=True)
    if p.returncode != 0:
        raise LabError(f"openssl could not make the lab's certificate: {p.stderr.strip()}")


# ------------------------------------------------------------------------------------------
# The lab, from the test's side
# ------------------------------------------------------------------------------------------


class LabError(RuntimeError):
    pass


def unavailable():
    """Why this host cannot make a lab (a sentence), or None."""
    if os.geteuid() != 0:
        return "the network lab needs root (network and mount namespaces)"
    for tool in ("unshare", "nsenter", "ip", "openssl", "mount"):
        if not shutil.which(tool):
            return f"the network lab needs {tool}, which is not installed"
    p = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private", "--",
                        "ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if p.returncode != 0:
        return f"cannot make a network and mount namespace: {p.stderr.strip()}"
    p = subprocess.run(["unshare", "--net", "--", "ip", "-6", "addr", "add", f"{V6}/128",
                        "dev", "lo", "nodad"], capture_output=True, text=True)
    if p.returncode != 0:
        return f"the lab's IPv6 hosts need IPv6, which this host lacks: {p.stderr.strip()}"
    return None


_LABS = []


@atexit.register
def _stop_forgotten_labs():
    for lab in list(_LABS):
        try:
            lab.stop()
        except Exception:       # noqa: BLE001 - best effort at exit
            pass


class Lab:
    def __init__(self, parent=None):
        self.parent = parent
        self.dir = None
        self.proc = None
        self.api_port = None
        self.daemons = []

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, timeout=30):
        why = unavailable()
        if why:
            raise LabError(why)
        _LABS.append(self)
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="airlock-netlab-", dir=self.parent))
        os.chmod(self.dir, 0o755)
        (self.dir / "etc").mkdir()
        (self.dir / "etc" / "hosts").write_text(hosts_text())
        (self.dir / "etc" / "resolv.conf").write_text(
            f"nameserver {DNS_ADDR}\noptions timeout:2 attempts:2\n")
        self.index_dir = self.dir / "index"
        self.index_dir.mkdir()
        for project, version, requires, source in WHEELS:
            build_wheel(self.index_dir, project, version, requires, source)
        make_certificate(self.dir)
        self.profiles_dir = self.dir / "profiles"
        self.profiles_dir.mkdir()

        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        self.api_port = listener.getsockname()[1]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
                   NETLAB_HOST_NETNS=str(os.stat("/proc/self/ns/net").st_ino))
        log = open(self.dir / "lab.log", "wb")
        try:
            self.proc = subprocess.Popen(
                ["unshare", "--net", "--mount", "--propagation", "private", "--",
                 sys.executable, str(HOSTS_SCRIPT), "--dir", str(self.dir),
                 "--api-fd", str(listener.fileno()), "--api-port", str(self.api_port)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                pass_fds=[listener.fileno()], start_new_session=True, env=env, cwd=HERE)
        finally:
            log.close()
            listener.close()
        line = b""
        deadline = time.monotonic() + timeout
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                b = os.read(self.proc.stdout.fileno(), 64)
                if not b:
                    break
                line += b
        if line.strip() != b"ready":
            text = self.log_text()
            self.stop()
            raise LabError(f"the network lab did not start ({line.strip()!r}):\n{text[-3000:]}")
        return self

    def log_text(self):
        try:
            return (self.dir / "lab.log").read_text(errors="replace")
        except (OSError, TypeError):
            return ""

    def stop(self):
        """Stops every daemon of the lab, then the lab's process (by pid), and removes its
        directory. Returns the daemons' problems (see airlock_daemon.Daemon.stop)."""
        problems = []
        for d in self.daemons:
            try:
                _, p = d.stop()
                problems += p
            except Exception as e:      # noqa: BLE001 - reported, the lab still goes
                problems.append(f"stopping a daemon of the lab: {e!r}")
        self.daemons = []
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
            self.proc.stdout.close()
            self.proc = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        if self in _LABS:
            _LABS.remove(self)
        return problems

    # -- inside the lab -----------------------------------------------------------------

    def enter_argv(self, argv):
        """argv run in the lab's network and mount namespaces."""
        pid = self.proc.pid
        return ["nsenter", f"--net=/proc/{pid}/ns/net", f"--mount=/proc/{pid}/ns/mnt", "--",
                *map(str, argv)]

    def run(self, argv, timeout=120, **kw):
        """Runs argv inside the lab (captured output, text) and returns the CompletedProcess."""
        return subprocess.run(self.enter_argv(argv), capture_output=True, text=True,
                              timeout=timeout, **kw)

    def airlock_in_lab(self, binary=None):
        """A script that runs the airlock binary inside the lab, for airlock_daemon.Daemon's
        binary (nsenter execs, so the daemon keeps the script's pid)."""
        from airlock_daemon import AIRLOCK
        path = self.dir / "airlock-in-lab"
        argv = " ".join(f"'{a}'" for a in self.enter_argv([binary or AIRLOCK]))
        path.write_text(f"#!/bin/sh\nexec {argv} \"$@\"\n")
        path.chmod(0o755)
        return path

    def write_profiles(self, profiles):
        for name, body in profiles.items():
            (self.profiles_dir / f"{name}.json").write_text(json.dumps(body, indent=1))

    def daemon_env(self, extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("AIRLOCK_") or k == "AIRLOCK_LOG"}
        env["AIRLOCK_PROFILES_DIR"] = str(self.profiles_dir)
        env.update(extra or {})
        return env

    def daemon(self, profiles=None, args=("--pool-size", "1"), env=None, wait_zygote="default",
               **kw):
        """Starts `airlock serve` inside the lab on 127.0.0.1:api_port (its state and log in
        the lab's directory), the profiles written to AIRLOCK_PROFILES_DIR first. Returns the
        started airlock_daemon.Daemon; the lab stops it."""
        from airlock_daemon import Daemon
        assert not self.daemons, "one daemon at a time per lab (it owns the API relay's port)"
        self.write_profiles(profiles or {})
        workdir = self.dir / "daemon"
        workdir.mkdir(exist_ok=True)
        d = Daemon(binary=str(self.airlock_in_lab()), args=args, env=env or self.daemon_env(),
                   workdir=workdir, listen=f"127.0.0.1:{self.api_port}", **kw)
        self.daemons.append(d)
        d.start(wait_zygote=wait_zygote)
        return d

    # -- what the hosts saw -------------------------------------------------------------

    def control(self, **req):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(20)
            s.connect(str(self.dir / "control.sock"))
            s.sendall(json.dumps(req).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                b = s.recv(1 << 20)
                if not b:
                    break
                buf += b
        out = json.loads(buf)
        if "error" in out:
            raise LabError(f"lab control {req}: {out['error']}")
        return out

    def stats(self):
        return self.control(op="stats")

    def server(self, name):
        """{connections, open, max_open, bytes_in, bytes_out, requests} of one server."""
        return self.stats()["servers"][name]

    def hits(self, name):
        return self.server(name)["connections"]

    def forbidden_hits(self):
        """Connections the servers nothing may reach accepted, by name (all must be 0)."""
        servers = self.stats()["servers"]
        return {n: servers[n]["connections"] for n in FORBIDDEN_SERVERS}

    def reset(self):
        self.control(op="reset")

    def listen(self, kind, name, addr, port, tls=False):
        """Starts one more server in the lab (e.g. a whoami on a port chosen at test time)."""
        self.control(op="listen", kind=kind, name=name, addr=addr, port=port, tls=tls)


def lab_fixture(pytest, scope="module", parent=None):
    """A fixture giving a started Lab (skipped, saying why, where the host cannot make one),
    stopped at the end; a daemon of the lab that did not stop cleanly fails the test."""

    @pytest.fixture(scope=scope)
    def lab():
        lab = Lab(parent() if callable(parent) else parent)
        try:
            lab.start()
        except LabError as e:
            if unavailable():
                pytest.skip(str(e))
            pytest.fail(str(e), pytrace=False)
        try:
            yield lab
        finally:
            problems = lab.stop()
        if problems:
            pytest.fail("the lab's daemon did not stop cleanly:\n  " + "\n  ".join(problems),
                        pytrace=False)

    return lab


# ------------------------------------------------------------------------------------------
# Code for cells in the lab's sandboxes (standard library only)
# ------------------------------------------------------------------------------------------

CELL_HELPERS = r'''
import errno as _errno, json as _json, os as _os, socket as _socket, ssl as _ssl
R = {}
PROXY = ("127.0.0.1", 3128)
SOCKS = ("127.0.0.1", 1080)

def ename(e):
    """The errno name of an OSError, "gaierror: ..." for a failed lookup, else 'Type: message'."""
    if isinstance(e, _socket.gaierror):
        return "gaierror: %s" % e
    if isinstance(e, OSError) and e.errno:
        return _errno.errorcode.get(e.errno, "E%d" % e.errno)
    return "%s: %s" % (type(e).__name__, str(e)[:200])

def read_until_close(s, limit=1 << 20):
    out = b""
    try:
        while len(out) < limit:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    return out

def parse_response(raw):
    """{"status", "headers", "body", "server"} of the first HTTP response in raw bytes."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return {"status": 0, "headers": {}, "body": raw[:2000].decode("latin-1"), "server": None}
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = headers.get("content-length")
    if n is not None and n.isdigit():
        body = body[:int(n)]
    text = body.decode("utf-8", "replace")
    try:
        server = _json.loads(text).get("server")
    except (ValueError, AttributeError):
        server = None
    return {"status": status, "headers": headers, "body": text[:4000], "server": server}

def read_response(s):
    """One response from s: reads the head, then Content-Length bytes (or to EOF)."""
    buf = b""
    while b"\r\n\r\n" not in buf and len(buf) < (1 << 20):
        b = s.recv(65536)
        if not b:
            break
        buf += b
    head = buf.partition(b"\r\n\r\n")[0].decode("latin-1").lower()
    n = None
    for line in head.split("\r\n")[1:]:
        if line.startswith("content-length:"):
            n = int(line.split(":", 1)[1])
    if n is None:
        buf += read_until_close(s)
    else:
        while len(buf.partition(b"\r\n\r\n")[2]) < n:
            b = s.recv(65536)
            if not b:
                break
            buf += b
    return parse_response(buf)

def proxy_raw(data, timeout=15, half_close=False):
    """Raw bytes to the HTTP proxy (then our half of the connection closed, with half_close);
    everything it answers until it closes: (bytes, error)."""
    try:
        s = _socket.create_connection(PROXY, timeout=timeout)
    except OSError as e:
        return b"", ename(e)
    try:
        s.sendall(data)
        if half_close:
            s.shutdown(_socket.SHUT_WR)
        return read_until_close(s), None
    except OSError as e:
        return b"", ename(e)
    finally:
        s.close()

def proxy_get(url, host=None, method="GET", headers=(), timeout=15):
    """An absolute-URI request through the HTTP proxy: parse_response() of the answer, or
    {"error": errno} when the proxy could not be reached."""
    hostport = url.split("/")[2]
    lines = ["%s %s HTTP/1.1" % (method, url), "Host: %s" % (host or hostport),
             "Connection: close"] + list(headers)
    raw, err = proxy_raw(("\r\n".join(lines) + "\r\n\r\n").encode(), timeout)
    if err:
        return {"error": err, "status": 0, "server": None, "body": ""}
    return parse_response(raw)

def connect(target, send=None, tls=False, sni=None, timeout=15):
    """CONNECT target through the HTTP proxy. The proxy's answer (status, body), and what
    came back through the tunnel for send (over TLS when tls, certificate not checked)."""
    try:
        s = _socket.create_connection(PROXY, timeout=timeout)
    except OSError as e:
        return {"error": ename(e), "status": 0, "server": None, "body": ""}
    try:
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = s.recv(65536)
            if not b:
                break
            buf += b
        head, _, rest = buf.partition(b"\r\n\r\n")
        if not (head.startswith(b"HTTP/1.") and head[9:10] == b"2"):
            return parse_response(buf + read_until_close(s))
        out = parse_response(head + b"\r\n\r\n")
        if send is not None:
            t = s
            if tls:
                ctx = _ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = _ssl.CERT_NONE
                t = ctx.wrap_socket(s, server_hostname=sni or target.rsplit(":", 1)[0])
            t.sendall(send)
            reply = rest + read_until_close(t)
            out["reply"] = parse_response(reply) if reply.startswith(b"HTTP/") else \
                reply.decode("latin-1")
        return out
    except OSError as e:
        return {"error": ename(e), "status": 0, "server": None, "body": ""}
    finally:
        s.close()

def socks5(host, port, send=None, cmd=1, methods=b"\x00", timeout=15):
    """A SOCKS5 request by hand (RFC 1928): {"method": chosen, "rep": reply code or None,
    "reply": what came back for send}. host is a name, an IPv4 or an IPv6 literal."""
    out = {"method": None, "rep": None}
    try:
        s = _socket.create_connection(SOCKS, timeout=timeout)
    except OSError as e:
        out["error"] = ename(e)
        return out
    try:
        s.sendall(b"\x05" + bytes([len(methods)]) + methods)
        m = s.recv(2)
        out["method"] = m[1] if len(m) == 2 else None
        if out["method"] != 0:
            return out
        try:
            addr = b"\x01" + _socket.inet_pton(_socket.AF_INET, host)
        except (OSError, ValueError):  # ValueError: a NUL in the name
            try:
                addr = b"\x04" + _socket.inet_pton(_socket.AF_INET6, host)
            except (OSError, ValueError):  # ValueError: a NUL in the name
                addr = b"\x03" + bytes([len(host)]) + host.encode()
        s.sendall(b"\x05" + bytes([cmd]) + b"\x00" + addr + port.to_bytes(2, "big"))
        head = s.recv(4)
        if len(head) < 2:
            out["rep"] = "closed"
            return out
        out["rep"] = head[1]
        if out["rep"] != 0:
            return out
        kind = head[3] if len(head) > 3 else 1
        n = {1: 4, 4: 16}.get(kind)
        if n is None:
            n = s.recv(1)[0]
        _ = s.recv(n + 2)
        if send is not None:
            s.sendall(send)
            reply = read_until_close(s) if send.startswith((b"GET", b"HEAD")) else s.recv(65536)
            out["reply"] = parse_response(reply) if reply.startswith(b"HTTP/") else \
                reply.decode("latin-1")
        return out
    except OSError as e:
        out["error"] = ename(e)
        return out
    finally:
        s.close()

def tcp(host, port, send=b"SELECT 1;\n", timeout=10, family=None):
    """A plain TCP connection (a forwarder inside the sandbox, or nothing): "OK: <reply>" (an
    HTTP request's whole answer, else the first bytes back), "closed" (accepted, then closed
    without a byte: a refusing forwarder), or the errno."""
    try:
        if family is None:
            s = _socket.create_connection((host, port), timeout=timeout)
        else:
            s = _socket.socket(family, _socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect((host, port))
    except OSError as e:
        return ename(e)
    try:
        s.sendall(send)
        reply = s.recv(65536)
        if reply and send.startswith((b"GET ", b"HEAD ")):
            reply += read_until_close(s)
        return "OK: " + reply.decode("latin-1") if reply else "closed"
    except OSError as e:
        return ename(e)
    finally:
        s.close()
'''


def cell_code(body):
    return (CELL_HELPERS + "\n" + textwrap.dedent(body)
            + "\nprint('@@R@@' + _json.dumps(R, default=str))\n")


def cell_result(out):
    """The R dict a cell_code() cell printed, or None."""
    for line in reversed((out.get("stdout") or "").splitlines()):
        if line.startswith("@@R@@"):
            return json.loads(line[5:])
    return None


def cell(d, sid, body, timeout=60):
    """Runs body (with CELL_HELPERS; it fills the dict R) in session sid of daemon d. Returns
    (R, the execution object); fails the test when the cell did not run to its end."""
    out = d.execute(sid, cell_code(body), timeout_s=timeout, http_timeout=timeout + 60)
    r = cell_result(out)
    assert out.get("status") == "ok" and r is not None, (
        "the cell did not run to its end:\n" + json.dumps(out, indent=1)[:6000])
    return r, out


def is_refusal(resp, dest=None, profile=None):
    """Whether an HTTP answer is the proxy's refusal (403, "airlock egress: DEST refused: ...
    profile 'NAME'"), naming dest and profile when given."""
    body = resp.get("body") or ""
    ok = (resp.get("status") == 403 and body.startswith("airlock egress:")
          and "refused" in body)
    if dest is not None:
        ok = ok and dest in body
    if profile is not None:
        ok = ok and f"'{profile}'" in body
    return ok
