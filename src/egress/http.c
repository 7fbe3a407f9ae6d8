/* The HTTP proxy at 127.0.0.1:3128 in the sandbox: CONNECT host:port (a tunnel, for HTTPS and
 * anything else), and plain http:// requests in absolute form, one per connection, forwarded
 * with the request line in origin form and "Connection: close" both ways. Everything else is
 * answered with a 4xx whose text body says what was refused and why; nothing refused is ever
 * forwarded. */
#include "egress-internal.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const char *status_text(int status)
{
        switch (status) {
        case 400:
                return "Bad Request";
        case 403:
                return "Forbidden";
        case 408:
                return "Request Timeout";
        case 431:
                return "Request Header Fields Too Large";
        case 504:
                return "Gateway Timeout";
        default:
                return "Bad Gateway";
        }
}

/* After an answer the client may still be sending (a request body): closing with unread bytes
 * would reset the connection and could destroy the answer before it is read. So: our side
 * done, then what the client sends is read and dropped until it closes, for a second at most. */
static void linger(struct egress_conn *c)
{
        char sink[4096];

        (void) shutdown(c->client, SHUT_WR);
        c->deadline_ns = now_ns() + 1000000000ull;
        for (size_t total = 0; total < 256u * 1024u;) {
                ssize_t n = egress_conn_read(c, sink, sizeof(sink));

                if (n <= 0)
                        break;
                total += (size_t) n;
        }
}

/* Answers status with "airlock egress: WHAT refused: REASON (profile 'P')\n" (or "failed" for
 * a 5xx). what: "CONNECT host:port", "GET host:port", or NULL before a destination was read. */
static void answer(struct egress_conn *c, int status, const char *what, const char *reason)
{
        char body[EGRESS_REASON_MAX + EGRESS_HOST_MAX + 160], head[256], profile[128];
        int n, h;

        (void) egress_conn_profile(c, profile, sizeof(profile));
        n = snprintf(body, sizeof(body), "airlock egress: %s %s: %s (profile '%s')\n",
                     what ? what : "request", status >= 500 ? "failed" : "refused", reason,
                     profile);
        if (n < 0)
                return;
        if ((size_t) n >= sizeof(body))
                n = (int) sizeof(body) - 1;
        h = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %d\r\nConnection: close\r\n\r\n",
                     status, status_text(status), n);
        if (egress_conn_write(c, head, (size_t) h) >= 0 &&
            egress_conn_write(c, body, (size_t) n) >= 0)
                linger(c);
}

/* A refusal before the destination was checked (a malformed request): counted, an event, and
 * the answer. */
static void refuse(struct egress_conn *c, int status, const char *what, const char *reason)
{
        egress_conn_refuse(c, "%s", reason);
        answer(c, status, what, c->reason);
}

/* Reads the request head into buf. Returns its length, or 0 when the connection is done with
 * (answered, or gone). *ret_len gets all bytes read (the head and what followed it). */
static size_t read_head(struct egress_conn *c, char *buf, size_t *ret_len)
{
        size_t len = 0;

        for (;;) {
                const char *why = NULL;
                size_t end;
                ssize_t n;
                int r;

                if (len == EGRESS_HEAD_MAX) {
                        refuse(c, 431, NULL, "the request's header block is larger than 32 KiB");
                        return 0;
                }
                n = egress_conn_read(c, buf + len, EGRESS_HEAD_MAX - len);
                if (n == -ETIMEDOUT) {
                        refuse(c, 408, NULL, "no complete request within 10 s");
                        return 0;
                }
                if (n <= 0)
                        return 0; /* gone (or cut) before a complete request: no one to tell */
                end = http_head_end(buf, len + (size_t) n, len);
                len += (size_t) n;
                /* Junk is refused at once, not after a head's end or the timeout. */
                r = http_request_prefix_check(buf, len, &why);
                if (r < 0) {
                        refuse(c, r == -E2BIG ? 431 : 400, NULL, why);
                        return 0;
                }
                if (end > 0) {
                        *ret_len = len;
                        return end;
                }
        }
}

static void serve_connect(struct egress_conn *c, const char *rest, size_t rest_len)
{
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

        if (egress_conn_write(c, ok, sizeof(ok) - 1) < 0)
                return;
        /* Bytes the client sent right after its request (a TLS ClientHello) go first. */
        (void) egress_conn_relay(c, rest, rest_len, NULL, NULL, NULL);
}

/* One request, and nothing after it: a second request on the connection (pipelined, or sent
 * after the answer) would reach the first one's host unchecked, so it is dropped; the upstream
 * was told "Connection: close" and answers once. */
static void serve_plain(struct egress_conn *c, const struct http_request *req, const char *rest,
                        size_t rest_len, const char *what)
{
        struct buf head = { 0 };
        struct http_body body;
        uint64_t written = 0;
        ssize_t n;
        int r;

        http_body_init(&body, req);
        n = http_body_feed(&body, rest, rest_len);
        if (n < 0) {
                answer(c, 400, what, "the chunked request body is malformed");
                return;
        }
        r = http_request_forward_head(req, &head);
        if (r >= 0)
                r = buf_append(&head, rest, (size_t) n, SIZE_MAX);
        if (r < 0) {
                answer(c, 502, what, "out of memory");
                buf_done(&head);
                return;
        }
        r = egress_conn_relay(c, head.data, head.len, http_response_head, &body, &written);
        buf_done(&head);
        if (r == -EPROTO && written == 0)
                answer(c, 502, what,
                       "the upstream's answer is not an HTTP/1.x response (or its header block "
                       "is larger than 32 KiB), or the request's chunked body is malformed");
        else if (r == 0)
                linger(c);
}

void egress_http_serve(struct egress_conn *c)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_free_ struct http_request *req = NULL;
        char why[EGRESS_REASON_MAX], what[EGRESS_HOST_MAX + 64];
        size_t end, len = 0;
        int r;

        buf = malloc(EGRESS_HEAD_MAX);
        req = malloc(sizeof(*req));
        if (!buf || !req)
                return;
        end = read_head(c, buf, &len);
        if (end == 0)
                return;
        r = http_request_parse(buf, end, req, why, sizeof(why));
        if (r < 0) {
                refuse(c, r == -E2BIG ? 431 : 400, NULL, why);
                return;
        }
        c->via = req->is_connect ? "connect" : "http";
        r = egress_target_set(&c->target, req->host, req->host_len, req->port);
        (void) snprintf(what, sizeof(what), "%.*s ", (int) req->method_len, req->method);
        (void) egress_target_text(&c->target, what + strlen(what), sizeof(what) - strlen(what));
        if (r < 0) {
                refuse(c, 400, what, "the host is neither a DNS name nor an IP address");
                return;
        }
        if (req->host_bracketed != (c->target.is_addr && c->target.addr.ss_family == AF_INET6)) {
                refuse(c, 400, what, "only an IPv6 address goes in brackets");
                return;
        }
        if (!req->is_connect && http_request_check_forward(req, why, sizeof(why)) < 0) {
                refuse(c, 400, what, why);
                return;
        }
        r = egress_conn_dial(c);
        if (r == -EPERM) {
                answer(c, 403, what, c->reason);
                return;
        }
        if (r < 0) {
                if (r != -ECANCELED)
                        answer(c, r == -ETIMEDOUT ? 504 : 502, what, c->reason);
                return;
        }
        if (req->is_connect)
                serve_connect(c, buf + end, len - end);
        else
                serve_plain(c, req, buf + end, len - end, what);
}
