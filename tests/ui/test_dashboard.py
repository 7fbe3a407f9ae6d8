"""The dashboard (/ui, docs/DASHBOARD.md) in a real headless Chromium (Debian's `chromium`,
driven over the DevTools protocol, see cdp.py) against a real daemon with live sessions: the
operator types the token, the sessions table fills and draws sparklines, recent executions show
what cells printed, markup included, as text (a cell printing <script> or <img onerror> runs
nothing: no dialog, no changed title, no new element), the Content-Security-Policy blocks an
inline script and a request elsewhere, the interrupt, stop and delete buttons work after their
confirm, and a screenshot with live data lands in tests/ui/artefacts/dashboard.png."""
import io
import os
import pathlib
import sys
import threading
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0] / "e2e"))
sys.path.insert(0, str(HERE))

from airlock_daemon import daemon_fixture, sessions_fixture  # noqa: E402
from cdp import CHROMIUM, Browser  # noqa: E402

ARTEFACTS = HERE / "artefacts"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

daemon = daemon_fixture(pytest)
sessions = sessions_fixture(pytest)

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = '<img src=x onerror="alert(2);document.title=\'pwned\'">'


@pytest.fixture(scope="module")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no chromium at {CHROMIUM}: apt-get install chromium (scripts/deps.sh)")
    b = Browser()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def page(browser):
    p = browser.new_page()
    p.send("Emulation.setDeviceMetricsOverride",
           {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    yield p
    p.close()


def connect(page, daemon):
    page.navigate(f"{daemon.url}/ui?interval_ms=500")
    page.wait_js("document.readyState === 'complete' && !!document.getElementById('token')")
    page.eval("document.getElementById('token').focus()")
    page.type_text(daemon.token)
    page.press_enter()
    page.wait_js("Number(document.body.dataset.polls || 0) >= 1")


def no_dialogs(page):
    return [p for p in page.events("Page.javascriptDialogOpening")]


def test_dashboard_live_data_xss_csp_actions_and_screenshot(daemon, sessions, page):
    # Live data: a session with markup in its metadata that prints markup; another one idle.
    a = sessions.new(metadata={"owner": "<b>ops</b>"})
    b = sessions.new()
    daemon.execute(a, f"print({XSS_SCRIPT!r})\nprint({XSS_IMG!r})")
    daemon.execute(b, "x = bytearray(8 << 20)\nsum(range(10**6))")

    connect(page, daemon)

    # The token is nowhere but in the script's closure: not in storage, cookies, the URL or
    # the input it was typed in.
    assert page.eval("localStorage.length + sessionStorage.length") == 0
    assert page.eval("document.cookie") == ""
    assert daemon.token not in page.eval("location.href + document.documentElement.outerHTML")

    # The sessions table fills, and after a few polls each live session has sparklines drawn.
    page.wait_js(f"[...document.querySelectorAll('#sessions tbody tr')]"
                 f".filter(r => ['{a}', '{b}'].includes(r.dataset.id)).length === 2")
    page.wait_js("Number(document.body.dataset.polls) >= 4")
    drawn = page.eval(f"""(() => {{
        const row = document.querySelector('#sessions tbody tr[data-id="{b}"]');
        return [...row.querySelectorAll('canvas.spark')].map(c => {{
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let ink = 0;
            for (let i = 3; i < d.length; i += 4) if (d[i]) ink++;
            return [Number(c.dataset.points), ink];
        }});
    }})()""")
    assert len(drawn) == 2, drawn
    for points, ink in drawn:
        assert points >= 2 and ink > 10, f"a sparkline was not drawn: {drawn}"

    # Markup from the cell and from metadata is shown as text and never becomes elements.
    page.wait_js("document.querySelectorAll('#executions tbody tr').length >= 2")
    cells = page.eval("[...document.querySelectorAll('#executions tbody pre')]"
                      ".map(e => e.textContent)")
    assert any(XSS_SCRIPT in c and XSS_IMG in c for c in cells), cells
    assert page.eval("document.querySelectorAll('body script').length") == 0
    assert page.eval("document.querySelectorAll('img, main b').length") == 0
    md = page.eval(f"document.querySelector('#sessions tr[data-id=\"{a}\"]').textContent")
    assert "owner=<b>ops</b>" in md
    time.sleep(1.0)  # an image error handler would have fired by now
    assert page.eval("document.title") == "airlock dashboard"
    assert no_dialogs(page) == [], "a cell's output opened a dialog in the operator's browser"

    # The policy is on the page, and the browser enforces it: an inline script does not run,
    # a request to another origin is refused before it leaves.
    violations = page.eval("""new Promise(resolve => {
        const seen = [];
        document.addEventListener('securitypolicyviolation',
                                  e => seen.push(e.effectiveDirective));
        const s = document.createElement('script');
        s.textContent = 'window.__inline_ran = true';
        document.body.append(s);
        fetch('http://127.0.0.2:9/x').catch(() => {}).finally(
            () => setTimeout(() => resolve(seen), 300));
    })""", await_promise=True)
    assert "script-src-elem" in violations and "connect-src" in violations, violations
    assert page.eval("window.__inline_ran === undefined")
    ui = [p for p in page.events("Network.responseReceived")
          if p["response"]["url"].endswith("/ui?interval_ms=500")]
    assert ui, "no response for /ui was seen"
    headers = {k.lower(): v for k, v in ui[-1]["response"]["headers"].items()}
    assert "default-src 'none'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"

    # A screenshot with live data, for people and for the test: a PNG that is not blank.
    ARTEFACTS.mkdir(exist_ok=True)
    png = page.screenshot()
    (ARTEFACTS / "dashboard.png").write_bytes(png)
    assert png.startswith(PNG_MAGIC)
    from PIL import Image
    img = Image.open(io.BytesIO(png)).convert("RGB")
    assert img.size[0] >= 1000 and img.size[1] >= 600, img.size
    colors = img.getcolors(maxcolors=1 << 20)
    assert colors is None or len(colors) > 20, "the screenshot is (nearly) blank"

    # Interrupt: a long cell in a ends early, and the session lives on.
    result = {}

    def long_cell():
        result["r"] = daemon.post(f"/v1/sessions/{a}/execute",
                                  json={"code": "import time\ntime.sleep(60)"}, timeout=90)

    t = threading.Thread(target=long_cell, daemon=True)
    t.start()
    page.wait_js(f"document.querySelector('#sessions tr[data-id=\"{a}\"] .state-busy') !== null")
    click_action(page, a, "interrupt")
    t.join(30)
    assert not t.is_alive(), "the interrupt button did not interrupt the cell"
    assert result["r"].status_code == 200, daemon.why(result["r"])
    assert result["r"].json()["error"]["name"] == "KeyboardInterrupt", result["r"].text
    assert daemon.get(f"/v1/sessions/{a}").json()["state"] == "idle"

    # Stop: b goes to disk and the table says so.
    click_action(page, b, "stop")
    page.wait_js(f"document.querySelector('#sessions tr[data-id=\"{b}\"] .state-stopped')"
                 " !== null")
    assert daemon.get(f"/v1/sessions/{b}").json()["state"] == "stopped"

    # Delete: a is gone, from the daemon and from the table.
    click_action(page, a, "delete")
    page.wait_js(f"document.querySelector('#sessions tr[data-id=\"{a}\"]') === null")
    assert daemon.get(f"/v1/sessions/{a}").status_code == 404
    assert no_dialogs(page) == []


def click_action(page, sid, action):
    """Clicks a session's button, then the confirm bar's Yes. The table is redrawn at every
    poll, so a click that landed between two drawings is tried again."""
    button = f"document.querySelector('#sessions tr[data-id=\"{sid}\"] button[data-action=\"{action}\"]')"
    for _ in range(5):
        page.click(button)
        try:
            page.wait_js("!document.getElementById('confirm').hidden", timeout=2)
            break
        except AssertionError:
            continue
    text = page.eval("document.getElementById('confirm-text').textContent")
    assert text == f"{action} session {sid}?", text
    page.click("document.getElementById('confirm-yes')")
    page.wait_js(f"document.getElementById('action-result').textContent"
                 f" === '{action} {sid}: done'", timeout=30)


def test_a_wrong_token_is_refused_and_forgotten(daemon, page):
    page.navigate(f"{daemon.url}/ui")
    page.wait_js("document.readyState === 'complete'")
    page.eval("document.getElementById('token').focus()")
    page.type_text("not-the-token")
    page.click("document.getElementById('connect')")
    msg = page.wait_js("document.getElementById('login-error').textContent")
    assert "refused the token" in msg, msg
    assert page.eval("document.getElementById('board').hidden") is True
    assert page.eval("document.getElementById('token').value") == ""
