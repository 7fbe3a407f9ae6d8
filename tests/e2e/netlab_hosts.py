"""The hosts of the egress test lab: the process that tests/e2e/netlab.py starts inside a network
and mount namespace of its own (`unshare --net --mount --propagation private`), never on the
host's network. It brings the namespace's loopback up, gives it the lab's addresses, binds the
lab's /etc/hosts and /etc/resolv.conf over the real ones (in its own mount namespace only), and
serves, each on its own address and port (netlab.SERVERS):

  a PyPI "simple" index over HTTP and HTTPS (the wheels netlab.py built), TCP echo "databases",
  HTTP servers that answer with their own name (to see where a request landed), a fake cloud
  metadata server, a bulk download endpoint, and a DNS server with rebinding names;

counting every connection each one accepts (how many, how many open at once, what was asked).
It also relays the daemon's API: it accepts on a listening socket that the test made on the
host's 127.0.0.1 (inherited as --api-fd) and connects, inside the lab, to 127.0.0.1 on the same
port, where the daemon under test listens.

The test talks to it over a unix socket in the lab's directory (line-delimited JSON: "stats",
"reset", "listen"). It exits when its stdin reaches EOF (the test ended, however it ended) or on
SIGTERM. Standard library only."""
import argparse
import http.server
import json
import os
import select
import signal
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import threading
import traceback

import netlab

CHUNK = bytes(1 << 20)


# ------------------------------------------------------------------------------------------
# Counting servers
# ------------------------------------------------------------------------------------------


class Stats:
    """What one server saw. Requests keep the first 200 (method, target, Host)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.connections = 0
            self.open = 0
            self.max_open = 0
            self.bytes_in = 0
            self.bytes_out = 0
            self.requests = []

    def opened(self):
        with self.lock:
            self.connections += 1
            self.open += 1
            self.max_open = max(self.max_open, self.open)

    def closed(self):
        with self.lock:
            self.open -= 1

    def add(self, bytes_in=0, bytes_out=0, request=None):
        with self.lock:
            self.bytes_in += bytes_in
            self.bytes_out += bytes_out
            if request is not None and len(self.requests) < 200:
                self.requests.append(request)

    def as_dict(self):
        with self.lock:
            return {"connections": self.connections, "open": self.open,
                    "max_open": self.max_open, "bytes_in": self.bytes_in,
                    "bytes_out": self.bytes_out, "requests": list(self.requests)}


class LabServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, name, addr, port, handler, tls=None, lab=None):
        self.address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        self.name = name
        self.stats = Stats()
        self.tls = tls
        self.lab = lab
        super().__init__((addr, port), handler)

    def verify_request(self, request, client_address):
        self.stats.opened()
        return True

    def shutdown_request(self, request):
        self.stats.closed()
        super().shutdown_request(request)


class WhoAmI(http.server.BaseHTTPRequestHandler):
    """Answers any method with a JSON object naming this server and what it was asked."""

    protocol_version = "HTTP/1.1"
    timeout = 30
    server_version = "airlock-netlab"

    def setup(self):
        self.request.settimeout(self.timeout)
        if self.server.tls is not None:
            self.request = self.server.tls.wrap_socket(self.request, server_side=True)
        super().setup()

    def log_message(self, fmt, *args):
        pass

    def record(self):
        host = self.headers.get_all("Host") or []
        req = {"method": self.command, "target": self.path, "host": host}
        self.server.stats.add(request=req)
        return req

    def answer(self, body, content_type="application/json", status=200):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.server.stats.add(bytes_out=len(body))

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(min(n, 1 << 20)) if n > 0 else b""
        self.server.stats.add(bytes_in=len(data))
        return data

    def handle_any(self, req=None):
        req = req or self.record()
        body = self.read_body()
        addr, port = self.server.server_address[:2]
        obj = {"server": self.server.name, "addr": addr, "port": port, "tls":
               self.server.tls is not None, "body_bytes": len(body), **req}
        if self.server.name.startswith("metadata"):
            obj["secret"] = netlab.METADATA_SECRET
        self.answer(json.dumps(obj).encode() + b"\n")

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = handle_any
    do_CONNECT = handle_any


class Index(WhoAmI):
    """The PyPI "simple" API (PEP 503) over the wheels in the lab's index directory."""

    def do_GET(self):
        req = self.record()
        index = self.server.lab.index_dir
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if parts[:1] == ["simple"]:
            wheels = sorted(os.listdir(index))
            if len(parts) == 1:
                names = sorted({netlab.wheel_project(w) for w in wheels})
                links = "".join(f'<a href="/simple/{n}/">{n}</a>\n' for n in names)
                return self.answer(f"<html><body>\n{links}</body></html>\n".encode(), "text/html")
            if len(parts) == 2:
                mine = [w for w in wheels if netlab.wheel_project(w) == parts[1].lower()]
                if not mine:
                    return self.answer(b"no such project\n", "text/plain", 404)
                links = "".join(f'<a href="/packages/{w}#sha256={netlab.sha256_file(index / w)}">'
                                f'{w}</a>\n' for w in mine)
                return self.answer(f"<html><body>\n{links}</body></html>\n".encode(), "text/html")
        if parts[:1] == ["packages"] and len(parts) == 2 and parts[1] in os.listdir(index):
            return self.answer((index / parts[1]).read_bytes(), "application/octet-stream")
        return self.handle_any(req)


class Bulk(WhoAmI):
    """GET /bytes/N: N zero bytes (at most 1 GiB), for big transfers and the byte cap."""

    def do_GET(self):
        req = self.record()
        parts = [p for p in self.path.split("/") if p]
        if len(parts) == 2 and parts[0] == "bytes" and parts[1].isdigit():
            n = min(int(parts[1]), 1 << 30)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            view = memoryview(CHUNK)
            left = n
            try:
                while left:
                    k = min(left, len(CHUNK))
                    self.wfile.write(view[:k])
                    self.server.stats.add(bytes_out=k)
                    left -= k
            except OSError:
                self.close_connection = True
            return
        return self.handle_any(req)


class Echo(socketserver.BaseRequestHandler):
    """A TCP echo "database": every byte comes back."""

    def handle(self):
        self.request.settimeout(60)
        while True:
            try:
                data = self.request.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.server.stats.add(bytes_in=len(data))
            try:
                self.request.sendall(data)
            except OSError:
                return
            self.server.stats.add(bytes_out=len(data))


HANDLERS = {"whoami": WhoAmI, "index": Index, "bulk": Bulk, "echo": Echo}


# ------------------------------------------------------------------------------------------
# DNS
# ------------------------------------------------------------------------------------------


class Dns:
    """A UDP DNS server for the lab's names (netlab.dns_records): A and AAAA, TTL 0, NXDOMAIN
    for names it does not know. A rebinding name answers its addresses in turn, one per A
    query, so that two lookups of the same name disagree."""

    def __init__(self, addr, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((addr, port))
        self.lock = threading.Lock()
        self.turn = {}
        self.queries = {}

    def resolve(self, name, qtype):
        records = netlab.dns_records(name)
        if records is None:
            return None
        with self.lock:
            self.queries[name] = self.queries.get(name, 0) + 1
            if records.get("rebind") and qtype == 1:
                k = self.turn.get(name, 0)
                self.turn[name] = k + 1
                return [records["rebind"][k % len(records["rebind"])]]
        if qtype == 1:
            return [a for a in records.get("addrs", []) if ":" not in a]
        if qtype == 28:
            return [a for a in records.get("addrs", []) if ":" in a]
        return []

    def answer(self, data):
        if len(data) < 12:
            return None
        qid, flags, qdcount = struct.unpack("!HHH", data[:6])
        if flags & 0x8000 or qdcount != 1:
            return None
        pos, labels = 12, []
        while pos < len(data):
            n = data[pos]
            pos += 1
            if n == 0:
                break
            if n > 63 or pos + n > len(data):
                return None
            labels.append(data[pos:pos + n])
            pos += n
        if pos + 4 > len(data):
            return None
        qtype, _ = struct.unpack("!HH", data[pos:pos + 4])
        question = data[12:pos + 4]
        name = b".".join(labels).decode("ascii", "replace").lower().rstrip(".")
        addrs = self.resolve(name, qtype)
        rcode = 3 if addrs is None else 0
        answers = b""
        for a in addrs or []:
            raw = socket.inet_pton(socket.AF_INET6 if ":" in a else socket.AF_INET, a)
            answers += b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 0, len(raw)) + raw
        head = struct.pack("!HHHHHH", qid, 0x8400 | (flags & 0x0100) | 0x0080 | rcode, 1,
                           len(addrs or []), 0, 0)
        return head + question + answers

    def serve(self):
        while True:
            data, peer = self.sock.recvfrom(4096)
            try:
                reply = self.answer(data)
            except Exception:       # noqa: BLE001 - a bad query is dropped, never fatal
                reply = None
            if reply:
                self.sock.sendto(reply, peer)

    def stats(self):
        with self.lock:
            return dict(self.queries)

    def reset(self):
        with self.lock:
            self.queries.clear()
            self.turn.clear()


# ------------------------------------------------------------------------------------------
# The API relay and the control socket
# ------------------------------------------------------------------------------------------


def pump(a, b):
    """Copies both ways between two sockets until either side closes."""
    socks = [a, b]
    try:
        while True:
            ready, _, _ = select.select(socks, [], [], 300)
            if not ready:
                return
            for s in ready:
                data = s.recv(1 << 16)
                other = b if s is a else a
                if not data:
                    try:
                        other.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    socks.remove(s)
                    if not socks:
                        return
                    continue
                other.sendall(data)
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def relay(listener, port):
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()


class Lab:
    def __init__(self, directory):
        self.dir = directory
        self.index_dir = directory / "index"
        self.servers = {}
        self.dns = None
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(directory / "cert.pem", directory / "key.pem")

    def listen(self, kind, name, addr, port, tls=False):
        if name in self.servers:
            raise ValueError(f"a server named {name!r} already runs")
        srv = LabServer(name, addr, port, HANDLERS[kind], self.tls if tls else None, self)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.servers[name] = srv

    def control(self, conn):
        f = conn.makefile("rwb")
        for line in f:
            try:
                req = json.loads(line)
                op = req.get("op")
                if op == "stats":
                    out = {"servers": {n: s.stats.as_dict() for n, s in self.servers.items()},
                           "dns": self.dns.stats()}
                elif op == "reset":
                    for s in self.servers.values():
                        s.stats.reset()
                    self.dns.reset()
                    out = {}
                elif op == "listen":
                    self.listen(req["kind"], req["name"], req["addr"], int(req["port"]),
                                bool(req.get("tls")))
                    out = {}
                else:
                    out = {"error": f"unknown op {op!r}"}
            except Exception as e:      # noqa: BLE001 - reported to the test
                out = {"error": f"{type(e).__name__}: {e}"}
            f.write(json.dumps(out).encode() + b"\n")
            f.flush()
        conn.close()

    def serve_control(self, s):
        while True:
            conn, _ = s.accept()
            threading.Thread(target=self.control, args=(conn,), daemon=True).start()


def sh(*argv):
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {p.stderr.strip() or p.returncode}")


def setup_namespace(directory):
    """Loopback up with the lab's addresses; the lab's hosts and resolv.conf over /etc's."""
    sh("ip", "link", "set", "lo", "up")
    for a in netlab.LAB_ADDRESSES:
        if ":" in a:
            sh("ip", "-6", "addr", "add", f"{a}/128", "dev", "lo", "nodad")
        else:
            sh("ip", "addr", "add", f"{a}/32", "dev", "lo")
    for name in ("hosts", "resolv.conf"):
        sh("mount", "--bind", str(directory / "etc" / name), f"/etc/{name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--api-fd", type=int)
    ap.add_argument("--api-port", type=int)
    args = ap.parse_args()
    directory = netlab.pathlib.Path(args.dir)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    try:
        # Only ever inside a namespace of our own: the host's network must never get these.
        if os.stat("/proc/self/ns/net").st_ino == int(os.environ.get("NETLAB_HOST_NETNS", "0")):
            raise RuntimeError("not in a network namespace of its own: refusing to run")
        setup_namespace(directory)
        lab = Lab(directory)
        for kind, name, addr, port, tls in netlab.SERVERS:
            lab.listen(kind, name, addr, port, tls)
        lab.dns = Dns(netlab.DNS_ADDR, 53)
        threading.Thread(target=lab.dns.serve, daemon=True).start()
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        control.bind(str(directory / "control.sock"))
        os.chmod(directory / "control.sock", 0o600)
        control.listen(16)
        threading.Thread(target=lab.serve_control, args=(control,), daemon=True).start()
        if args.api_fd is not None:
            listener = socket.socket(fileno=args.api_fd)
            threading.Thread(target=relay, args=(listener, args.api_port), daemon=True).start()
    except Exception:       # noqa: BLE001 - the test reads it from our stderr
        traceback.print_exc()
        print("error", flush=True)
        return 1
    print("ready", flush=True)
    # Until the test closes our stdin (or dies, which closes it too).
    while sys.stdin.buffer.read(1 << 16):
        pass
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
