/* See http-parse.h (the body framing is in http-body.c). RFC 9112 (HTTP/1.1 syntax) and RFC 9110
 * (semantics), read narrowly: only CRLF line ends, no obs-fold, no whitespace before a field's
 * colon, no leading empty lines, HTTP/1.0 and HTTP/1.1 only. */
#include "http-parse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A PROXY protocol v2 header starts with this 12-byte signature (haproxy's proxy-protocol.txt). */
static const char PROXY_V2_SIG[12] = "\r\n\r\n\0\r\nQUIT\n";

static int fail(char *why, size_t why_size, int r, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t why_size, int r, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(why, why_size, fmt, ap);
        va_end(ap);
        return r;
}

static bool is_tchar(unsigned char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_host_char(unsigned char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '.' || c == '_';
}

static bool is_v6_char(unsigned char c)
{
        return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') ||
               c == ':' || c == '.';
}

/* A field value's bytes: VCHAR, SP, HTAB and obs-text. */
static bool is_value_char(unsigned char c)
{
        return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool span_eq(const char *a, size_t a_len, const char *b)
{
        return a_len == strlen(b) && strncasecmp(a, b, a_len) == 0;
}

size_t http_head_end(const char *buf, size_t len, size_t from)
{
        const char *p;

        from = from >= 3 ? from - 3 : 0;
        if (len < 4 || from > len - 4)
                return 0;
        p = memmem(buf + from, len - from, "\r\n\r\n", 4);
        return p ? (size_t) (p - buf) + 4 : 0;
}

int http_request_prefix_check(const char *buf, size_t len, const char **ret_why)
{
        if (len == 0)
                return 0;
        if (len >= 6 && memcmp(buf, "PROXY ", 6) == 0) {
                *ret_why = "a PROXY protocol preamble is not accepted here";
                return -EBADMSG;
        }
        if (buf[0] == '\r' || buf[0] == '\n') {
                size_t n = len < sizeof(PROXY_V2_SIG) ? len : sizeof(PROXY_V2_SIG);

                *ret_why = n >= 5 && memcmp(buf, PROXY_V2_SIG, n) == 0
                                   ? "a PROXY protocol v2 preamble is not accepted here"
                                   : "the request line is empty";
                return -EBADMSG;
        }
        if (buf[0] == 0x16) {
                *ret_why = "a TLS handshake sent to the plain HTTP proxy; tunnel TLS with CONNECT "
                           "(HTTPS_PROXY=http://127.0.0.1:3128)";
                return -EBADMSG;
        }
        if (buf[0] == 0x04 || buf[0] == 0x05) {
                *ret_why = "a SOCKS handshake sent to the HTTP proxy; SOCKS5 is at 127.0.0.1:1080";
                return -EBADMSG;
        }
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) buf[i];

                if (c == '\r') {
                        if (i + 1 < len && buf[i + 1] != '\n') {
                                *ret_why = "a bare CR in the request line";
                                return -EBADMSG;
                        }
                        return 0;
                }
                if (c == '\n') {
                        *ret_why = "a bare LF ends the request line (lines end with CRLF)";
                        return -EBADMSG;
                }
                if (c < 0x20 || c > 0x7e) {
                        *ret_why = "binary data where an HTTP request line should be";
                        return -EBADMSG;
                }
                if (i >= HTTP_REQUEST_LINE_MAX) {
                        *ret_why = "the request line is longer than 16 KiB";
                        return -E2BIG;
                }
        }
        return 0;
}

static int parse_port(const char *s, size_t len, uint16_t *ret)
{
        unsigned v = 0;

        if (len == 0 || len > 5 || s[0] == '0')
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        if (v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

/* host[:port] or [v6][:port]; a missing port is default_port (0: required). */
static int parse_authority(const char *s, size_t len, uint16_t default_port, const char **host,
                           size_t *host_len, bool *bracketed, uint16_t *port, char *why,
                           size_t why_size)
{
        const char *rest;
        size_t rest_len;

        if (len > 0 && s[0] == '[') {
                const char *close = memchr(s, ']', len);

                if (!close)
                        return fail(why, why_size, -EBADMSG, "an IPv6 address without its ']'");
                *host = s + 1;
                *host_len = (size_t) (close - s) - 1;
                *bracketed = true;
                for (size_t i = 0; i < *host_len; i++)
                        if (!is_v6_char((unsigned char) (*host)[i]))
                                return fail(why, why_size, -EBADMSG,
                                            "a bad character in an IPv6 address (zone indexes "
                                            "are not accepted)");
                rest = close + 1;
        } else {
                const char *colon = memchr(s, ':', len);

                if (colon && memchr(colon + 1, ':', len - (size_t) (colon - s) - 1))
                        return fail(why, why_size, -EBADMSG,
                                    "an IPv6 address needs brackets ([::1]:443)");
                *host = s;
                *host_len = colon ? (size_t) (colon - s) : len;
                *bracketed = false;
                for (size_t i = 0; i < *host_len; i++)
                        if (!is_host_char((unsigned char) s[i]))
                                return fail(why, why_size, -EBADMSG,
                                            "a bad character in the host (0x%02x)",
                                            (unsigned char) s[i]);
                rest = s + *host_len;
        }
        if (*host_len == 0)
                return fail(why, why_size, -EBADMSG, "the host is empty");
        rest_len = len - (size_t) (rest - s);
        if (rest_len == 0) {
                if (default_port == 0)
                        return fail(why, why_size, -EBADMSG, "the port is missing (host:port)");
                *port = default_port;
                return 0;
        }
        if (rest[0] != ':')
                return fail(why, why_size, -EBADMSG, "the host has junk after it");
        if (memchr(rest + 1, ':', rest_len - 1))
                return fail(why, why_size, -EBADMSG, "an IPv6 address needs brackets ([::1]:443)");
        if (parse_port(rest + 1, rest_len - 1, port) < 0)
                return fail(why, why_size, -EBADMSG, "the port is not a number 1..65535");
        return 0;
}

static int parse_target(const char *t, size_t len, struct http_request *req, char *why,
                        size_t why_size)
{
        const char *colon = memchr(t, ':', len), *end;
        size_t scheme_len;

        if (req->is_connect)
                return parse_authority(t, len, 0, &req->host, &req->host_len, &req->host_bracketed,
                                       &req->port, why, why_size);
        if (t[0] == '/')
                return fail(why, why_size, -EBADMSG,
                            "an origin-form request (%.*s /...): this is a proxy; send the "
                            "absolute URL (http://host/path), or use CONNECT",
                            (int) req->method_len, req->method);
        if (!colon || len - (size_t) (colon - t) < 3 || memcmp(colon, "://", 3) != 0)
                return fail(why, why_size, -EBADMSG,
                            "the request target is neither an absolute http:// URL nor "
                            "CONNECT's host:port");
        scheme_len = (size_t) (colon - t);
        if (span_eq(t, scheme_len, "https"))
                return fail(why, why_size, -EBADMSG,
                            "https:// URLs are not fetched by the proxy; tunnel them with "
                            "CONNECT (HTTPS_PROXY=http://127.0.0.1:3128)");
        if (!span_eq(t, scheme_len, "http"))
                return fail(why, why_size, -EBADMSG, "the scheme '%.*s' is not proxied (http only)",
                            scheme_len > 16 ? 16 : (int) scheme_len, t);
        req->authority = colon + 3;
        end = req->authority;
        while (end < t + len && *end != '/' && *end != '?' && *end != '#')
                end++;
        req->authority_len = (size_t) (end - req->authority);
        if (memchr(req->authority, '@', req->authority_len))
                return fail(why, why_size, -EBADMSG, "user info in the URL is not forwarded");
        if (memchr(end, '#', len - (size_t) (end - t)))
                return fail(why, why_size, -EBADMSG, "a fragment (#) in the request target");
        req->path = end;
        req->path_len = len - (size_t) (end - t);
        return parse_authority(req->authority, req->authority_len, 80, &req->host, &req->host_len,
                               &req->host_bracketed, &req->port, why, why_size);
}

/* The request or status line's end is the first CRLF; fields follow until the blank line.
 * Fills fields (at most max) and returns their count, -EBADMSG or -E2BIG. */
static int parse_fields(const char *buf, size_t head_len, size_t pos, struct http_field *fields,
                        size_t max, char *why, size_t why_size)
{
        size_t n = 0;

        while (pos + 2 <= head_len && !(buf[pos] == '\r' && buf[pos + 1] == '\n')) {
                const char *line = buf + pos, *eol, *colon, *v, *ve;

                eol = memmem(line, head_len - pos, "\r\n", 2);
                if (!eol)
                        return fail(why, why_size, -EBADMSG, "a header line without CRLF");
                if (line[0] == ' ' || line[0] == '\t')
                        return fail(why, why_size, -EBADMSG,
                                    "a folded header line (obs-fold) is not accepted");
                colon = memchr(line, ':', (size_t) (eol - line));
                if (!colon || colon == line)
                        return fail(why, why_size, -EBADMSG, "a header line without a name");
                for (const char *c = line; c < colon; c++)
                        if (!is_tchar((unsigned char) *c))
                                return fail(why, why_size, -EBADMSG,
                                            "a bad character in a header name (whitespace "
                                            "before ':' is not accepted)");
                v = colon + 1;
                ve = eol;
                while (v < ve && (*v == ' ' || *v == '\t'))
                        v++;
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                        ve--;
                for (const char *c = v; c < ve; c++)
                        if (!is_value_char((unsigned char) *c))
                                return fail(why, why_size, -EBADMSG,
                                            "a control character in the value of '%.*s'",
                                            (int) (colon - line) > 64 ? 64 : (int) (colon - line),
                                            line);
                if (n == max)
                        return fail(why, why_size, -E2BIG, "more than %zu header fields", max);
                fields[n++] = (struct http_field){ .name = line,
                                                   .name_len = (size_t) (colon - line),
                                                   .value = v,
                                                   .value_len = (size_t) (ve - v) };
                pos = (size_t) (eol - buf) + 2;
        }
        return (int) n;
}

int http_request_parse(const char *buf, size_t len, struct http_request *req, char *why,
                       size_t why_size)
{
        const char *eol, *sp1, *sp2;
        const char *why_prefix = NULL;
        int r;

        *req = (struct http_request){ .head_len = len };
        r = http_request_prefix_check(buf, len, &why_prefix);
        if (r < 0)
                return fail(why, why_size, r, "%s", why_prefix);
        eol = memmem(buf, len, "\r\n", 2);
        if (!eol)
                return fail(why, why_size, -EBADMSG, "the request line has no CRLF");
        sp1 = memchr(buf, ' ', (size_t) (eol - buf));
        sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t) (eol - sp1 - 1)) : NULL;
        if (!sp1 || !sp2 || memchr(sp2 + 1, ' ', (size_t) (eol - sp2 - 1)) || sp2 == sp1 + 1)
                return fail(why, why_size, -EBADMSG,
                            "the request line is not 'METHOD TARGET HTTP/1.1'");
        req->method = buf;
        req->method_len = (size_t) (sp1 - buf);
        for (size_t i = 0; i < req->method_len; i++)
                if (!is_tchar((unsigned char) buf[i]))
                        return fail(why, why_size, -EBADMSG, "a bad character in the method");
        if (req->method_len == 0 || req->method_len > 32)
                return fail(why, why_size, -EBADMSG, "the method is empty or too long");
        if (eol - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
            (sp2[8] != '0' && sp2[8] != '1'))
                return fail(why, why_size, -EBADMSG, "only HTTP/1.0 and HTTP/1.1 are spoken");
        req->minor = (unsigned) (sp2[8] - '0');
        /* Methods are case-sensitive: "connect" is not CONNECT. */
        req->is_connect = req->method_len == 7 && memcmp(req->method, "CONNECT", 7) == 0;
        r = parse_target(sp1 + 1, (size_t) (sp2 - sp1 - 1), req, why, why_size);
        if (r < 0)
                return r;
        r = parse_fields(buf, len, (size_t) (eol - buf) + 2, req->fields, HTTP_FIELDS_MAX, why,
                         why_size);
        if (r < 0)
                return r;
        req->n_fields = (size_t) r;
        return 0;
}

/* Calls fn on each comma-separated token of the Connection fields until it returns true. */
static bool connection_any(const struct http_field *f, size_t n,
                           bool (*fn)(const char *tok, size_t len, const void *arg),
                           const void *arg)
{
        for (size_t i = 0; i < n; i++) {
                const char *p, *end;

                if (!span_eq(f[i].name, f[i].name_len, "connection"))
                        continue;
                p = f[i].value;
                end = p + f[i].value_len;
                while (p < end) {
                        const char *comma = memchr(p, ',', (size_t) (end - p));
                        const char *te = comma ? comma : end;
                        const char *ts = p;

                        while (ts < te && (*ts == ' ' || *ts == '\t'))
                                ts++;
                        while (te > ts && (te[-1] == ' ' || te[-1] == '\t'))
                                te--;
                        if (te > ts && fn(ts, (size_t) (te - ts), arg))
                                return true;
                        p = comma ? comma + 1 : end;
                }
        }
        return false;
}

static bool is_framing(const char *tok, size_t len, const void *arg)
{
        (void) arg;
        return span_eq(tok, len, "host") || span_eq(tok, len, "content-length") ||
               span_eq(tok, len, "transfer-encoding");
}

static bool tok_is_field(const char *tok, size_t len, const void *arg)
{
        const struct http_field *f = arg;

        return len == f->name_len && strncasecmp(tok, f->name, len) == 0;
}

/* Fields a proxy must not pass on (RFC 9110 7.6.1), and Proxy-*: they were for us. */
static bool is_hop_by_hop(const struct http_field *f, const struct http_field *all, size_t n)
{
        static const char *const hop[] = { "connection", "keep-alive", "te",
                                           "trailer",    "upgrade",    "proxy-connection" };

        for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
                if (span_eq(f->name, f->name_len, hop[i]))
                        return true;
        if (f->name_len >= 6 && strncasecmp(f->name, "proxy-", 6) == 0)
                return true;
        return !is_framing(f->name, f->name_len, NULL) && connection_any(all, n, tok_is_field, f);
}

int http_request_check_forward(const struct http_request *req, char *why, size_t why_size)
{
        const struct http_field *host = NULL;
        size_t n_cl = 0, n_te = 0;

        for (size_t i = 0; i < req->n_fields; i++) {
                const struct http_field *f = &req->fields[i];

                if (span_eq(f->name, f->name_len, "host")) {
                        if (host)
                                return fail(why, why_size, -EBADMSG, "more than one Host header");
                        host = f;
                } else if (span_eq(f->name, f->name_len, "content-length")) {
                        if (f->value_len == 0 || f->value_len > 18 ||
                            strspn(f->value, "0123456789") < f->value_len)
                                return fail(why, why_size, -EBADMSG,
                                            "Content-Length is not a number");
                        n_cl++;
                } else if (span_eq(f->name, f->name_len, "transfer-encoding")) {
                        /* Anything else is a framing the proxy cannot follow, or a trick to
                         * make two parsers disagree. */
                        if (!span_eq(f->value, f->value_len, "chunked"))
                                return fail(why, why_size, -EBADMSG,
                                            "Transfer-Encoding other than 'chunked'");
                        n_te++;
                }
        }
        if (n_cl > 1)
                return fail(why, why_size, -EBADMSG, "more than one Content-Length");
        if (n_te > 1)
                return fail(why, why_size, -EBADMSG, "more than one Transfer-Encoding");
        if (n_cl && n_te)
                return fail(why, why_size, -EBADMSG,
                            "both Content-Length and Transfer-Encoding (request smuggling?)");
        if (connection_any(req->fields, req->n_fields, is_framing, NULL))
                return fail(why, why_size, -EBADMSG,
                            "Connection names a header the request's framing needs");
        if (host) {
                const char *h;
                size_t h_len;
                bool bracketed;
                uint16_t port;
                char ignored[128];

                if (parse_authority(host->value, host->value_len, 80, &h, &h_len, &bracketed, &port,
                                    ignored, sizeof(ignored)) < 0 ||
                    h_len != req->host_len || strncasecmp(h, req->host, h_len) != 0 ||
                    bracketed != req->host_bracketed || port != req->port)
                        return fail(why, why_size, -EBADMSG,
                                    "the Host header ('%.*s') disagrees with the URL's host "
                                    "('%.*s') (request smuggling?)",
                                    host->value_len > 100 ? 100 : (int) host->value_len,
                                    host->value,
                                    req->authority_len > 100 ? 100 : (int) req->authority_len,
                                    req->authority);
        }
        return 0;
}

static int append(struct buf *out, const char *s, size_t len)
{
        return buf_append(out, s, len, SIZE_MAX);
}

static int append_str(struct buf *out, const char *s)
{
        return append(out, s, strlen(s));
}

static int append_fields(struct buf *out, const struct http_field *f, size_t n)
{
        int r = 0;

        for (size_t i = 0; i < n && r >= 0; i++) {
                if (is_hop_by_hop(&f[i], f, n))
                        continue;
                r = append(out, f[i].name, f[i].name_len);
                if (r >= 0)
                        r = append_str(out, ": ");
                if (r >= 0)
                        r = append(out, f[i].value, f[i].value_len);
                if (r >= 0)
                        r = append_str(out, "\r\n");
        }
        if (r >= 0)
                r = append_str(out, "Connection: close\r\n\r\n");
        return r;
}

int http_request_forward_head(const struct http_request *req, struct buf *out)
{
        bool has_host = false;
        int r;

        for (size_t i = 0; i < req->n_fields; i++)
                has_host =
                        has_host || span_eq(req->fields[i].name, req->fields[i].name_len, "host");
        r = append(out, req->method, req->method_len);
        if (r >= 0)
                r = append_str(out, " ");
        if (r >= 0 && (req->path_len == 0 || req->path[0] == '?'))
                r = append_str(out, "/");
        if (r >= 0)
                r = append(out, req->path, req->path_len);
        if (r >= 0)
                r = append_str(out, req->minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");
        if (r >= 0 && !has_host) {
                r = append_str(out, "Host: ");
                if (r >= 0)
                        r = append(out, req->authority, req->authority_len);
                if (r >= 0)
                        r = append_str(out, "\r\n");
        }
        if (r >= 0)
                r = append_fields(out, req->fields, req->n_fields);
        return r < 0 ? -ENOMEM : 0;
}

int http_response_head(const char *buf, size_t len, size_t *ret_consumed, struct buf *out,
                       bool *ret_final)
{
        struct http_field fields[2 * HTTP_FIELDS_MAX];
        size_t end = http_head_end(buf, len, 0), line_len;
        const char *eol;
        char why[160];
        unsigned status;
        int n;

        if (end == 0)
                return len >= HTTP_HEAD_MAX ? -E2BIG : -EAGAIN;
        eol = memmem(buf, end, "\r\n", 2);
        line_len = (size_t) (eol - buf);
        /* HTTP/1.x SP 3DIGIT [SP reason] */
        if (line_len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ' ||
            strspn(buf + 9, "0123456789") < 3 || (line_len > 12 && buf[12] != ' '))
                return -EBADMSG;
        for (size_t i = 0; i < line_len; i++)
                if (!is_value_char((unsigned char) buf[i]))
                        return -EBADMSG;
        status = (unsigned) ((buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0'));
        n = parse_fields(buf, end, line_len + 2, fields, sizeof(fields) / sizeof(fields[0]), why,
                         sizeof(why));
        if (n < 0)
                return n;
        *ret_consumed = end;
        if (status >= 100 && status < 200) {
                /* An interim response (100 Continue) goes on as it is; the final one follows.
                 * 101 is passed on too: the request had no Upgrade, so this is the
                 * upstream's doing, and the relay carries whatever follows. */
                *ret_final = status == 101;
                return buf_append(out, buf, end, SIZE_MAX) < 0 ? -ENOMEM : 0;
        }
        *ret_final = true;
        if (append(out, buf, line_len + 2) < 0 || append_fields(out, fields, (size_t) n) < 0)
                return -ENOMEM;
        return 0;
}
