"""Row 45: abuse of the daemon's egress proxy from inside a session whose profile allows a few
hosts (conftest.EGRESS_ALLOW): CONNECT to unlisted ports and malformed targets, IPv6 literals
(and v4-mapped spellings) of unlisted hosts, smuggled and duplicated Host headers, an absolute
URI to one host with the Host of another, request smuggling, PROXY protocol preambles, a second
request on the same proxy connection to another host, oversized and malformed requests, SOCKS5
BIND, UDP ASSOCIATE and other commands. Safe outcome: a 4xx from the proxy (or a closed
connection), never an answer from a host off the list; checked on the lab's side (the unlisted
servers and the metadata servers accepted nothing) and the daemon still answers."""
from conftest import expect_in

UNLISTED = ("evil", "evil-tls", "other-22", "other-8080", "other-8443", "v6-unlisted", "db-5433",
            "outside-cidr", "cidr-a", "cidr-b")


def answered_by(resp):
    """The lab server that answered, or None (the proxy itself did, or nobody)."""
    return resp.get("server")


def test_connect_to_unlisted_ports_and_malformed_targets(egress):
    egress.lab.reset()
    refused = ["other.internal:22", "other.internal:8080", "other.internal:8443",
               "OTHER.INTERNAL:22", "other.internal:0", "other.internal:65536",
               "other.internal:-1", "other.internal:443@evil.internal",
               "evil.internal:443#other.internal:443", ":443", "evil.internal:443",
               "10.77.0.66:443", "0x0a4d0042:443", "172818498:443", "012.0115.0.0102:443",
               "10.77.0.30:80", "[::ffff:10.77.0.30]:80", "[::ffff:169.254.169.254]:80",
               "169.254.169.254:80", "[fd00:77::20]:80", "fd00:77::20:80",
               "other.internal%00.evil.internal:443", "*.internal:443", "..:443",
               "10.77.0.40:8080"]
    # spellings a lenient parser may read as other.internal:443, a listed destination: either
    # refused or tunnelled there, never anywhere else
    lenient = ["other.internal:+443", "other.internal: 443", "other.internal", "other.internal:",
               "other.internal:443:443", "other.internal.:443", "Other.Internal:0443"]
    r = egress.cell(f'''
        R["refused"] = {{t: connect(t) for t in {refused!r}}}
        R["lenient"] = {{t: connect(t) for t in {lenient!r}}}
        R["ok"] = connect("other.internal:443", b"GET / HTTP/1.1\\r\\nHost: other.internal\\r\\n"
                          b"Connection: close\\r\\n\\r\\n", tls=True)
    ''')
    for target, resp in r["refused"].items():
        assert 400 <= resp["status"] < 500 or resp.get("error") or resp["status"] == 0, (
            target, resp)
        assert answered_by(resp) is None, (target, resp)
    for target, resp in r["lenient"].items():
        assert resp["status"] in (0, 200) or 400 <= resp["status"] < 500, (target, resp)
    assert r["ok"]["status"] == 200 and r["ok"]["reply"]["server"] == "other-tls", r["ok"]
    egress.quiet(*UNLISTED)


def test_ipv6_literals_to_unlisted_hosts(egress):
    egress.lab.reset()
    urls = ["http://[fd00:77::20]/", "http://[fd00:77:0:0:0:0:0:20]/", "http://[FD00:77::20]/",
            "http://[fd00:77::10]:8080/", "http://[::ffff:10.77.0.30]/",
            "http://[::ffff:169.254.169.254]/", "http://[::ffff:a9fe:a9fe]/",
            "http://[fd00:ec2::254]/", "http://[fe80::1%25lo]/", "http://[::1]:3128/",
            "http://[64:ff9b::a94d:1e]/", "http://[::10.77.0.66]/"]
    r = egress.cell(f'''
        R["http"] = {{u: proxy_get(u) for u in {urls!r}}}
        R["socks"] = {{h: socks5(h, 80) for h in ("fd00:77::20", "::ffff:169.254.169.254",
                                                  "::ffff:10.77.0.66", "fd00:ec2::254")}}
        R["ok"] = proxy_get("http://[fd00:77::10]/")
    ''')
    for url, resp in r["http"].items():
        expect_in(resp["status"], {400, 403}, url)
        assert answered_by(resp) is None, (url, resp)
    for host, resp in r["socks"].items():
        assert resp["rep"] not in (0, None), (host, resp)
    assert r["ok"]["server"] == "v6", r["ok"]
    egress.quiet(*UNLISTED)


SMUGGLING = [
    # (name, raw request to the proxy)
    ("absolute URI to a listed host, Host of an unlisted one",
     b"GET http://other.internal/a HTTP/1.1\r\nHost: evil.internal\r\nConnection: close\r\n\r\n"),
    ("absolute URI to an unlisted host, Host of a listed one",
     b"GET http://evil.internal/b HTTP/1.1\r\nHost: other.internal\r\nConnection: close\r\n\r\n"),
    ("two Host headers",
     b"GET http://other.internal/c HTTP/1.1\r\nHost: other.internal\r\nHost: 169.254.169.254\r\n"
     b"Connection: close\r\n\r\n"),
    ("origin-form with the Host of the metadata address",
     b"GET /latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\nConnection: close\r\n\r\n"),
    ("origin-form with the Host of an unlisted host",
     b"GET / HTTP/1.1\r\nHost: evil.internal\r\nConnection: close\r\n\r\n"),
    ("userinfo naming a listed host",
     b"GET http://other.internal@evil.internal/ HTTP/1.1\r\nHost: evil.internal\r\n"
     b"Connection: close\r\n\r\n"),
    ("userinfo with a port",
     b"GET http://other.internal:80@169.254.169.254/ HTTP/1.1\r\nHost: other.internal\r\n"
     b"Connection: close\r\n\r\n"),
    ("a backslash before the authority's end",
     b"GET http://evil.internal\\@other.internal/ HTTP/1.1\r\nHost: other.internal\r\n"
     b"Connection: close\r\n\r\n"),
    ("a fragment hiding the host",
     b"GET http://evil.internal#@other.internal/ HTTP/1.1\r\nHost: other.internal\r\n"
     b"Connection: close\r\n\r\n"),
    ("Content-Length and Transfer-Encoding together",
     b"POST http://other.internal/d HTTP/1.1\r\nHost: other.internal\r\nContent-Length: 56\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://evil.internal/ HTTP/1.1\r\n"
     b"Host: evil.internal\r\n\r\n"),
    ("an obfuscated Transfer-Encoding",
     b"POST http://other.internal/e HTTP/1.1\r\nHost: other.internal\r\nContent-Length: 4\r\n"
     b"Transfer-Encoding : chunked\r\n\r\n5c\r\nGET http://169.254.169.254/ HTTP/1.1\r\n"
     b"Host: 169.254.169.254\r\n\r\n0\r\n\r\n"),
    ("a header line folded onto the request",
     b"GET http://other.internal/f HTTP/1.1\r\nHost: other.internal\r\n evil.internal\r\n"
     b"Connection: close\r\n\r\n"),
    ("a bare LF before a second request line",
     b"GET http://other.internal/g HTTP/1.1\nGET http://evil.internal/ HTTP/1.1\r\n"
     b"Host: evil.internal\r\n\r\n"),
    ("an HTTPS absolute URI to an unlisted host",
     b"GET https://evil.internal/ HTTP/1.1\r\nHost: evil.internal\r\nConnection: close\r\n\r\n"),
    ("a PROXY protocol v1 preamble",
     b"PROXY TCP4 169.254.169.254 10.77.0.30 4444 80\r\nGET http://evil.internal/ HTTP/1.1\r\n"
     b"Host: evil.internal\r\n\r\n"),
    ("a PROXY protocol v1 preamble before an allowed request",
     b"PROXY TCP4 10.77.0.66 10.77.0.30 4444 80\r\nGET http://other.internal/h HTTP/1.1\r\n"
     b"Host: other.internal\r\nConnection: close\r\n\r\n"),
    ("a PROXY protocol v2 preamble",
     b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xa9\xfe\xa9\xfe\x0a\x4d\x00\x1e\x11\x5c\x00\x50"
     b"GET http://evil.internal/ HTTP/1.1\r\nHost: evil.internal\r\n\r\n"),
    ("an X-Forwarded-Host and Forwarded naming another host",
     b"GET http://other.internal/i HTTP/1.1\r\nHost: other.internal\r\n"
     b"X-Forwarded-Host: evil.internal\r\nForwarded: host=169.254.169.254\r\n"
     b"Connection: close\r\n\r\n"),
]


def test_smuggled_host_headers_and_preambles(egress):
    egress.lab.reset()
    r = egress.cell(f'''
        R["raw"] = {{}}
        for name, data in {SMUGGLING!r}:
            raw, err = proxy_raw(data)
            R["raw"][name] = {{"error": err, "answers": [parse_response(b"HTTP/" + part)
                for part in raw.split(b"HTTP/")[1:]]}}
        try:
            s = _socket.create_connection(SOCKS, timeout=10)
            s.sendall(b"PROXY TCP4 169.254.169.254 10.77.0.30 4444 80\\r\\n\\x05\\x01\\x00")
            R["socks preamble"] = read_until_close(s).decode("latin-1")
            s.close()
        except OSError as e:
            R["socks preamble"] = ename(e)
        # to a forwarder, a preamble is only data: the database echoes it
        R["forwarder preamble"] = tcp("db.internal", 5432, b"PROXY TCP4 169.254.169.254 "
                                      b"10.77.0.20 4444 5432\\r\\n")
    ''')
    for name, got in r["raw"].items():
        for resp in got["answers"]:
            # the listed host may answer what reached it (a smuggled request can only be data
            # for the host of the request that carried it); nothing else may answer
            assert answered_by(resp) in (None, "other"), (name, resp)
    assert not r["socks preamble"].startswith("\x05\x00"), r["socks preamble"]
    assert r["forwarder preamble"].startswith("OK: PROXY TCP4"), r["forwarder preamble"]
    egress.quiet(*UNLISTED)


def test_a_second_request_on_the_same_connection_is_checked_too(egress):
    egress.lab.reset()
    r = egress.cell(r'''
        def first_then(second, pipelined):
            one = b"GET http://other.internal/first HTTP/1.1\r\nHost: other.internal\r\n\r\n"
            two = (b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                   % (second, second.split(b"/")[2]))
            out = {}
            try:
                s = _socket.create_connection(PROXY, timeout=15)
            except OSError as e:
                return {"error": ename(e)}
            try:
                if pipelined:
                    s.sendall(one + two)
                else:
                    s.sendall(one)
                    out["first"] = read_response(s)
                    s.sendall(two)
                rest = read_until_close(s)
                out["rest"] = [parse_response(b"HTTP/" + p) for p in rest.split(b"HTTP/")[1:]]
            except OSError as e:
                out["error"] = ename(e)
            s.close()
            return out
        for second in (b"http://evil.internal/second", b"http://169.254.169.254/second",
                       b"http://db.internal:5433/second", b"http://[fd00:77::20]/second",
                       b"http://other.internal:8080/second"):
            for pipelined in (False, True):
                R["%s %s" % (second.decode(), "pipelined" if pipelined else "after")] = \
                    first_then(second, pipelined)
        # inside a CONNECT tunnel to a listed host, a proxy request is only data for that host
        R["tunnel"] = connect("other.internal:80", b"GET http://evil.internal/t HTTP/1.1\r\n"
                              b"Host: evil.internal\r\nConnection: close\r\n\r\n")
    ''')
    tunnel = r.pop("tunnel")
    assert tunnel["reply"]["server"] == "other", tunnel
    for name, out in r.items():
        if "first" in out:
            assert out["first"]["server"] == "other", (name, out)
        answers = out.get("rest", [])
        for resp in answers:
            assert answered_by(resp) in (None, "other"), (name, resp)
        seconds = [a for a in answers if a["server"] == "other" and "/second" in a["body"]]
        assert not seconds, (name, out)
    egress.quiet(*UNLISTED)


def test_oversized_and_malformed_requests_are_refused_and_the_proxy_lives_on(egress):
    egress.lab.reset()
    r = egress.cell(r'''
        big = b"a" * (64 << 10)
        cases = {
            "64 KiB request target": b"GET http://other.internal/" + big + b" HTTP/1.1\r\n"
                                     b"Host: other.internal\r\n\r\n",
            "1 MiB header": b"GET http://other.internal/ HTTP/1.1\r\nHost: other.internal\r\n"
                            b"X-Big: " + b"b" * (1 << 20) + b"\r\n\r\n",
            "5000 headers": b"GET http://other.internal/ HTTP/1.1\r\nHost: other.internal\r\n"
                            + b"X-H: v\r\n" * 5000 + b"\r\n",
            "a 300-byte label": b"GET http://" + b"x" * 300 + b".internal/ HTTP/1.1\r\n\r\n",
            "a 100 KiB CONNECT target": b"CONNECT " + b"y" * (100 << 10) + b":443 HTTP/1.1\r\n\r\n",
            "NUL in the target": b"GET http://other.internal\x00.evil.internal/ HTTP/1.1\r\n\r\n",
            "a header without a colon": b"GET http://other.internal/ HTTP/1.1\r\nNoColon\r\n\r\n",
            "HTTP/0.9": b"GET http://evil.internal/\r\n\r\n",
            "HTTP/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            "an unknown version": b"GET http://evil.internal/ HTTP/7.3\r\n\r\n",
            "binary garbage": bytes(range(256)) * 64,
            "TLS ClientHello to the HTTP port": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
                                                + b"\x00" * 500,
            "a lone CONNECT": b"CONNECT\r\n\r\n",
            "half a request, then its end": b"GET http://other.internal/ HTTP/1.1\r\nHost: o",
        }
        R["cases"] = {}
        for name, data in cases.items():
            raw, err = proxy_raw(data, timeout=10, half_close=True)
            R["cases"][name] = {"error": err, "answer": parse_response(raw) if raw else None}
        # many connections that send nothing at all, left open while the proxy is used
        idle = []
        try:
            for _ in range(32):
                idle.append(_socket.create_connection(PROXY, timeout=10))
        except OSError as e:
            R["idle"] = ename(e)
        R["after"] = proxy_get("http://other.internal/after")
        for s in idle:
            s.close()
    ''', timeout=120)
    for name, got in r["cases"].items():
        ans = got["answer"]
        if ans is not None:
            # refused by the proxy (or by the listed host it reached), never answered elsewhere
            assert answered_by(ans) in (None, "other"), (name, got)
            if answered_by(ans) is None:
                assert ans["status"] == 0 or ans["status"] >= 400, (name, got)
    assert "idle" not in r and r["after"]["server"] == "other", r
    egress.quiet(*UNLISTED)


def test_socks5_bind_udp_and_other_abuse(egress):
    egress.lab.reset()
    r = egress.cell(r'''
        R["bind"] = socks5("other.internal", 80, cmd=2)
        R["udp associate"] = socks5("10.77.0.30", 53, cmd=3)
        R["udp associate to the DNS"] = socks5("10.77.0.53", 53, cmd=3)
        R["command 9"] = socks5("other.internal", 80, cmd=9)
        R["user/password only"] = socks5("other.internal", 80, methods=b"\x02")
        R["GSSAPI only"] = socks5("other.internal", 80, methods=b"\x01")
        R["port 0"] = socks5("other.internal", 0)
        R["empty name"] = socks5("", 80)
        R["NUL in the name"] = socks5("other.internal\x00.evil.internal", 80)
        R["unlisted port"] = socks5("other.internal", 22)
        R["metadata by name"] = socks5("169.254.169.254", 80)
        raw = {
            "SOCKS4": b"\x04\x01\x00\x50\x0a\x4d\x00\x42user\x00",
            "SOCKS4a": b"\x04\x01\x00\x50\x00\x00\x00\x01\x00evil.internal\x00",
            "bad address type": b"\x05\x01\x00\x05\x01\x00\x09" + b"\x00" * 8,
            "no methods": b"\x05\x00\x05\x01\x00\x03\x0eother.internal\x00\x50",
            "a 255-byte name": b"\x05\x01\x00\x05\x01\x00\x03\xff" + b"z" * 255 + b"\x00\x50",
        }
        R["raw"] = {}
        for name, data in raw.items():
            try:
                s = _socket.create_connection(SOCKS, timeout=10)
                s.sendall(data)
                R["raw"][name] = list(read_until_close(s)[:16])
                s.close()
            except OSError as e:
                R["raw"][name] = ename(e)
        R["ok"] = socks5("other.internal", 80, b"GET / HTTP/1.0\r\n\r\n")
    ''')
    ok = r.pop("ok")
    assert ok["rep"] == 0 and ok["reply"]["server"] == "other", ok
    for name, got in r.pop("raw").items():
        if isinstance(got, list):
            # a SOCKS4 "granted" is 0x5a in the second byte; a SOCKS5 success is 05 00 05 00
            assert not (len(got) >= 2 and got[0] == 0 and got[1] == 0x5a), (name, got)
            assert not (len(got) >= 4 and got[:4] == [5, 0, 5, 0]), (name, got)
    for name in ("user/password only", "GSSAPI only"):
        assert r.pop(name)["method"] in (0xFF, None), name
    for name, got in r.items():
        assert got["rep"] not in (0, None) or got.get("error"), (name, got)
    egress.quiet(*UNLISTED, "other-22")
