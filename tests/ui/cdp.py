"""A minimal Chrome DevTools Protocol client over --remote-debugging-pipe, for driving Debian's
headless `chromium` from the tests without a browser download, a websocket library or an open
debugging port: Chromium reads commands from its fd 3 and writes answers and events to its fd 4,
one JSON message per NUL-terminated frame.

Chromium runs with --no-sandbox because the tests run as root (airlock needs root for its
namespaces and cgroups), and Chromium refuses to start as root with its own sandbox on; the
page it loads is our dashboard on loopback, not the web. Every request other than loopback goes
to a proxy address where nothing listens (--proxy-server), so a test can never send traffic off
the machine even if a page tried.
"""
import base64
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

CHROMIUM = os.environ.get("AIRLOCK_CHROMIUM", "/usr/bin/chromium")


class CDPError(RuntimeError):
    pass


def _above_9(fd):
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Browser:
    """One headless Chromium, started in its own process group (so that its helper processes,
    which it starts itself, can be ended with it), with a throw-away profile directory."""

    def __init__(self, width=1280, height=900):
        self.profile = tempfile.mkdtemp(prefix="airlock-ui-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # The child's ends above fd 9, so that putting them at 3 and 4 overwrites neither.
        to_chrome_r, from_chrome_w = (_above_9(to_chrome_r), _above_9(from_chrome_w))
        self.log_path = os.path.join(self.profile, "chromium.log")
        log = open(self.log_path, "wb")
        args = [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--no-pings", "--disable-domain-reliability",
            "--disable-client-side-phishing-detection", "--password-store=basic",
            "--proxy-server=http://127.0.0.1:9", "about:blank",
        ]
        # fd 3 and 4 are the protocol's pipe: bash (dash takes single-digit fds only) puts them
        # there, then becomes Chromium.
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} '
                         f'{to_chrome_r}<&- {from_chrome_w}>&-', *args],
            pass_fds=(to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True)
        log.close()
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._answers = {}
        self.events = []  # (method, params, sessionId), every event received
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- the pipe ----------------------------------------------------------------------

    def _read_loop(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                frame, buf = buf.split(b"\0", 1)
                msg = json.loads(frame)
                with self._cond:
                    if "id" in msg:
                        self._answers[msg["id"]] = msg
                    else:
                        self.events.append((msg.get("method"), msg.get("params", {}),
                                            msg.get("sessionId")))
                    self._cond.notify_all()

    def send(self, method, params=None, session=None, timeout=30):
        with self._cond:
            self._next_id += 1
            mid = self._next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._answers:
                if self._closed:
                    raise CDPError(f"{method}: chromium went away; its log:\n"
                                   + self.log_tail())
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CDPError(f"{method}: no answer within {timeout}s")
                self._cond.wait(left)
            answer = self._answers.pop(mid)
        if "error" in answer:
            raise CDPError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def log_tail(self, n=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def events_named(self, method):
        with self._lock:
            return [(p, s) for m, p, s in self.events if m == method]

    # -- pages -------------------------------------------------------------------------

    def new_page(self):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session, target)

    def close(self):
        """Asks Chromium to quit, then ends what is left of its process group (ours: it was
        started in a session of its own) and removes its profile."""
        try:
            if self.proc.poll() is None and not self._closed:
                self.send("Browser.close", timeout=5)
        except (CDPError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(10)
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser, session, target_id):
        self.b = browser
        self.session = session
        self.target_id = target_id
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable")

    def send(self, method, params=None, timeout=30):
        return self.b.send(method, params, session=self.session, timeout=timeout)

    def close(self):
        self.b.send("Target.closeTarget", {"targetId": self.target_id})

    def events(self, method):
        return [p for p, s in self.b.events_named(method) if s == self.session]

    def navigate(self, url, timeout=30):
        before = len(self.events("Page.loadEventFired"))
        self.send("Page.navigate", {"url": url})
        self.wait(lambda: len(self.events("Page.loadEventFired")) > before, timeout,
                  f"{url} did not load")

    def eval(self, expression, await_promise=False):
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": await_promise})
        if "exceptionDetails" in r:
            raise CDPError(f"{expression[:80]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            v = predicate()
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s: {what}")
            time.sleep(0.1)

    def wait_js(self, expression, timeout=20):
        return self.wait(lambda: self.eval(expression), timeout, expression)

    def click(self, selector_js):
        """A real mouse click (pressed and released) at the middle of the element that
        selector_js (an expression) evaluates to."""
        rect = self.eval(f"(() => {{ const e = {selector_js}; if (!e) return null; "
                         "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                         " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        if not rect:
            raise AssertionError(f"nothing to click: {selector_js}")
        x, y = rect
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                   "button": "left", "clickCount": 1})

    def type_text(self, text):
        self.send("Input.insertText", {"text": text})

    def press_enter(self):
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": "Enter", "code": "Enter",
                                                 "windowsVirtualKeyCode": 13})

    def screenshot(self):
        r = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        return base64.b64decode(r["data"])
