"""The client's transport: finds the daemon and its token the way the `airlock` CLI does, and
sends requests over keep-alive connections (TCP, TLS or a unix socket) with http.client. It
never follows redirects (the token must not travel to wherever one points) and never uses an
HTTP proxy from the environment."""

import http.client
import json
import os
import socket
import ssl
import threading
import urllib.parse

from .errors import AirlockError, AuthError, ConnectError, RequestTimeoutError, error_for

DEFAULT_URL = "http://127.0.0.1:8080"
SYSTEM_STATE_DIR = "/var/lib/airlock"
TOKEN_MAX = 4096


def state_dirs(euid=None, environ=None):
    """The state directories whose `token` file the CLI reads, in order (src/cli/client.c):
    root: /var/lib/airlock; anyone else: $XDG_STATE_HOME/airlock (if absolute), else
    ~/.local/state/airlock, then /var/lib/airlock (where a daemon run by root keeps it)."""
    euid = os.geteuid() if euid is None else euid
    environ = os.environ if environ is None else environ
    if euid == 0:
        return [SYSTEM_STATE_DIR]
    dirs = []
    xdg, home = environ.get("XDG_STATE_HOME", ""), environ.get("HOME", "")
    if xdg.startswith("/"):
        dirs.append(os.path.join(xdg, "airlock"))
    elif home.startswith("/"):
        dirs.append(os.path.join(home, ".local", "state", "airlock"))
    dirs.append(SYSTEM_STATE_DIR)
    return dirs


def find_token(euid=None, environ=None):
    """(token, where) from AIRLOCK_TOKEN, else the first readable token file of state_dirs();
    (None, why) when there is none. A token file that exists but cannot be read, or holds
    whitespace or control characters, is reported rather than passed over silently."""
    environ = os.environ if environ is None else environ
    env = environ.get("AIRLOCK_TOKEN")
    if env:
        return env, "AIRLOCK_TOKEN"
    problem = None
    for d in state_dirs(euid, environ):
        path = os.path.join(d, "token")
        try:
            with open(path, "rb") as f:
                data = f.read(TOKEN_MAX + 1)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as e:
            problem = problem or (f"cannot read the token file {path!r}: {e.strerror} (set "
                                  f"AIRLOCK_TOKEN, or run as the daemon's user)")
            continue
        token = data.rstrip().decode("ascii", "replace")
        if len(data) > TOKEN_MAX or not token or any(c <= " " or c >= "\x7f" for c in token):
            problem = problem or f"the token file {path!r} is empty, too long or malformed"
            continue
        return token, path
    return None, problem or ("no token found: set AIRLOCK_TOKEN, or run `airlock serve` once "
                             "to create " + " or ".join(os.path.join(d, "token")
                                                        for d in state_dirs(euid, environ)))


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self.unix_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Transport:
    """One daemon at one URL with one token; safe to share between threads (each request
    takes a pooled connection of its own, so interrupt() works while run_code() waits)."""

    def __init__(self, url=None, token=None, timeout=300.0):
        url = url or os.environ.get("AIRLOCK_URL") or DEFAULT_URL
        self.url = url
        self.timeout = timeout
        if token:
            self.token, self.token_problem = token, None
        else:
            self.token, self.token_problem = find_token()
        self.unix_path = None
        self.prefix = ""
        if url.startswith("unix:"):
            self.unix_path = url[5:]
            if not self.unix_path.startswith("/"):
                raise ValueError(f"url {url!r}: a unix socket URL is unix:/absolute/path")
            self.scheme, self.netloc = "http", "localhost"
        else:
            if "://" not in url:
                url = "http://" + url
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"url {self.url!r}: expected http://HOST:PORT, "
                                 f"https://HOST:PORT or unix:/PATH")
            self.scheme, self.netloc = parts.scheme, parts.netloc
            self.host, self.port = parts.hostname, parts.port
            self.prefix = parts.path.rstrip("/")
        self._idle = []
        self._lock = threading.Lock()

    # -- connections ------------------------------------------------------------------

    def _new_connection(self, timeout):
        if self.unix_path:
            return _UnixConnection(self.unix_path, timeout)
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _take(self, timeout):
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            return self._new_connection(timeout), False
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, True

    def _give_back(self, conn, resp):
        if resp.will_close:
            conn.close()
            return
        with self._lock:
            self._idle.append(conn)

    def close(self):
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    # -- requests ---------------------------------------------------------------------

    def _where(self):
        return self.url if self.unix_path else f"{self.scheme}://{self.netloc}{self.prefix}"

    def open(self, method, path, *, body=None, headers=None, timeout=None):
        """Sends one request; returns (connection, response) with the response's headers read
        and its body not. The caller reads the body, then calls finish(). Raises ConnectError
        or RequestTimeoutError when the daemon cannot be reached."""
        timeout = self.timeout if timeout is None else timeout
        hdrs = {"Host": self.netloc, "User-Agent": "airlock-python/0.1",
                "Accept-Encoding": "identity"}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        hdrs.update(headers or {})
        for attempt in (0, 1):
            conn, reused = self._take(timeout)
            try:
                conn.request(method, self.prefix + path, body=body, headers=hdrs)
                return conn, conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                conn.close()
                # A kept-alive connection the daemon closed while it was idle: the request
                # never reached it, so it is sent once more on a new connection.
                if reused and attempt == 0:
                    continue
                raise ConnectError(f"the airlock daemon at {self._where()} closed the "
                                   f"connection: {e}") from None
            except (socket.timeout, TimeoutError):
                conn.close()
                raise RequestTimeoutError(f"no answer from the airlock daemon at "
                                          f"{self._where()} within {timeout:g} s") from None
            except OSError as e:
                conn.close()
                raise ConnectError(f"no airlock daemon at {self._where()} "
                                   f"({e.strerror or e}): start one with `airlock serve`, "
                                   f"or set AIRLOCK_URL to where it listens") from None
        raise AssertionError("unreachable")

    def finish(self, conn, resp):
        """Returns conn to the pool once resp has been read to its end (else closes it)."""
        if resp.isclosed():
            self._give_back(conn, resp)
        else:
            conn.close()

    def fail(self, resp, data):
        """The exception for a non-2xx answer whose body is data."""
        try:
            body = json.loads(data) if data else None
        except ValueError:
            body = None
        fallback = f"HTTP {resp.status} {resp.reason}: {data[:200].decode('utf-8', 'replace')}"
        err = error_for(resp.status, body, fallback)
        if isinstance(err, AuthError) and resp.status == 401 and not self.token:
            err.message += f" ({self.token_problem})"
            err.args = (err.message,)
        return err

    def request(self, method, path, *, json_body=None, data=None, query=None, timeout=None,
                raw=False):
        """One request answered in full. Returns the decoded JSON body (or the bytes with
        raw=True); raises the AirlockError subclass of a non-2xx status."""
        body, headers = data, {}
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        elif data is not None:
            headers["Content-Type"] = "application/octet-stream"
        if query:
            path += "?" + urllib.parse.urlencode(query, doseq=True)
        conn, resp = self.open(method, path, body=body, headers=headers, timeout=timeout)
        try:
            payload = resp.read()
        except (socket.timeout, TimeoutError):
            conn.close()
            raise RequestTimeoutError(f"the answer of the airlock daemon at {self._where()} "
                                      f"did not come within {conn.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectError(f"the answer of the airlock daemon at {self._where()} was cut "
                               f"off: {e}") from None
        self.finish(conn, resp)
        if not 200 <= resp.status < 300:
            raise self.fail(resp, payload)
        if raw:
            return payload
        try:
            return json.loads(payload) if payload else None
        except ValueError:
            raise AirlockError(f"the daemon answered {method} {path} with a body that is not "
                               f"JSON: {payload[:200]!r}", resp.status) from None


def quote_path(path):
    """A /work-relative file path as URL path segments (each percent-encoded); a leading
    "/work/" is accepted and dropped."""
    if path.startswith("/work/"):
        path = path[len("/work/"):]
    return "/".join(urllib.parse.quote(seg, safe="") for seg in path.split("/"))
