"""The dashboard's static routes over HTTP, without a browser (tests/ui/ drives Chromium,
docs/DASHBOARD.md): /ui and its two files need no token and carry a strict
Content-Security-Policy and the other security headers, load nothing from elsewhere and have no
inline script, style or handler; other origins and Hosts are refused, unknown files are 404."""
import re

import pytest

from airlock_daemon import daemon_fixture

daemon = daemon_fixture(pytest)

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


def test_ui_is_served_without_a_token_with_a_strict_policy(daemon):
    for path, kind in (("/ui", "text/html"), ("/ui/", "text/html"),
                       ("/ui/dashboard.js", "text/javascript"),
                       ("/ui/dashboard.css", "text/css")):
        status, headers, body = daemon.raw("GET", path, auth=False)
        assert status == 200, (path, body[:200])
        assert headers["content-type"].startswith(kind), headers
        assert headers["content-security-policy"] == CSP
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
        assert headers["x-frame-options"] == "DENY"
        assert "access-control-allow-origin" not in headers
        assert body
    _, _, html = daemon.raw("GET", "/ui", auth=False)
    # Nothing from elsewhere, and no inline script or style for the policy to have to allow.
    assert not re.search(rb"(src|href)=\"(https?:)?//", html)
    assert re.findall(rb"<script[^>]*>", html) == [b'<script src="/ui/dashboard.js" defer>']
    assert b"<style" not in html and b" style=" not in html
    assert not re.search(rb"\son[a-z]+=", html), "an inline event handler in the page"
    js = daemon.raw("GET", "/ui/dashboard.js", auth=False)[2]
    assert b"innerHTML" not in js and b"localStorage.set" not in js and b"document.cookie" not in js


def test_ui_refuses_other_origins_and_unknown_files(daemon):
    status, _, body = daemon.raw("GET", "/ui", auth=False,
                                 headers={"Origin": "http://evil.example"})
    assert status == 403 and b"Origin" in body
    status, _, body = daemon.raw("GET", "/ui", auth=False, headers={"Host": "evil.example:80"})
    assert status == 403 and b"Host" in body
    status, _, body = daemon.raw("GET", "/ui/secret.js", auth=False)
    assert status == 404 and b"no such dashboard file" in body
    status, _, _ = daemon.raw("POST", "/ui", auth=False, body=b"")
    assert status in (401, 405)
