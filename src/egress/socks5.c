/* SOCKS5 (RFC 1928) at 127.0.0.1:1080 in the sandbox, for clients that speak it (ALL_PROXY=
 * socks5h://...: the name goes to the proxy, which resolves it). Only what a client of an
 * allow-list needs: no authentication, the CONNECT command, IPv4, IPv6 and domain-name
 * targets. A refusal is the reply code RFC 1928 has for it (0x02, "not allowed by ruleset"). */
#include "egress-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

enum {
        SOCKS_VERSION = 5,
        SOCKS_NO_AUTH = 0x00,
        SOCKS_NO_METHOD = 0xff,
        SOCKS_CMD_CONNECT = 1,
        SOCKS_ATYP_V4 = 1,
        SOCKS_ATYP_NAME = 3,
        SOCKS_ATYP_V6 = 4,
        SOCKS_OK = 0x00,
        SOCKS_FAILURE = 0x01,
        SOCKS_NOT_ALLOWED = 0x02,
        SOCKS_NET_UNREACHABLE = 0x03,
        SOCKS_HOST_UNREACHABLE = 0x04,
        SOCKS_REFUSED = 0x05,
        SOCKS_CMD_UNSUPPORTED = 0x07,
        SOCKS_ATYP_UNSUPPORTED = 0x08,
};

/* Reads exactly n bytes of the handshake. Returns 0, or -errno (the refusal for a slow
 * handshake is counted here). */
static int read_exact(struct egress_conn *c, void *buf, size_t n)
{
        char *p = buf;

        while (n > 0) {
                ssize_t k = egress_conn_read(c, p, n);

                if (k == -ETIMEDOUT) {
                        egress_conn_refuse(c, "no complete SOCKS5 request within 10 s");
                        return -ETIMEDOUT;
                }
                if (k <= 0)
                        return k < 0 ? (int) k : -EPIPE;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

/* A reply without a bound address (a failure). */
static void reply_code(struct egress_conn *c, uint8_t code)
{
        const uint8_t r[10] = { SOCKS_VERSION, code, 0, SOCKS_ATYP_V4 };

        (void) egress_conn_write(c, r, sizeof(r));
}

static uint8_t failure_code(int r)
{
        switch (r) {
        case -EPERM:
                return SOCKS_NOT_ALLOWED;
        case -ECONNREFUSED:
                return SOCKS_REFUSED;
        case -ENETUNREACH:
                return SOCKS_NET_UNREACHABLE;
        case -EHOSTUNREACH:
        case -ENOENT:
        case -EAGAIN:
        case -ETIMEDOUT:
                return SOCKS_HOST_UNREACHABLE;
        default:
                return SOCKS_FAILURE;
        }
}

/* Success, with the address the proxy's own socket has (RFC 1928's BND.ADDR and BND.PORT). */
static int reply_ok(struct egress_conn *c)
{
        /* BND.ADDR 0.0.0.0, BND.PORT 0 (RFC 1928 allows it for CONNECT): the upstream socket's
         * own address is the host's, which the sandbox has no business knowing. */
        static const uint8_t r[10] = { SOCKS_VERSION, SOCKS_OK, 0, SOCKS_ATYP_V4 };

        return egress_conn_write(c, r, sizeof(r));
}

/* The greeting: version and the methods offered; only "no authentication" is accepted. */
static int greet(struct egress_conn *c)
{
        static const uint8_t socks4_rejected[8] = { 0, 0x5b };
        static const uint8_t no_method[2] = { SOCKS_VERSION, SOCKS_NO_METHOD };
        static const uint8_t no_auth[2] = { SOCKS_VERSION, SOCKS_NO_AUTH };
        uint8_t h[2], methods[255];
        int r;

        r = read_exact(c, h, 1);
        if (r < 0)
                return r;
        if (h[0] != SOCKS_VERSION) {
                if (h[0] == 4) {
                        egress_conn_refuse(c, "SOCKS4 is not spoken; use SOCKS5 (socks5h://)");
                        (void) egress_conn_write(c, socks4_rejected, sizeof(socks4_rejected));
                } else if (h[0] >= 'A' && h[0] <= 'Z') {
                        egress_conn_refuse(c, "an HTTP request sent to the SOCKS5 port; the HTTP "
                                              "proxy is at 127.0.0.1:3128");
                } else {
                        egress_conn_refuse(c, "not a SOCKS5 handshake");
                }
                return -EPROTO;
        }
        r = read_exact(c, h + 1, 1);
        if (r >= 0)
                r = read_exact(c, methods, h[1]);
        if (r < 0)
                return r;
        if (!memchr(methods, SOCKS_NO_AUTH, h[1])) {
                egress_conn_refuse(c, "only SOCKS5 without authentication is offered");
                (void) egress_conn_write(c, no_method, sizeof(no_method));
                return -EPROTO;
        }
        return egress_conn_write(c, no_auth, sizeof(no_auth));
}

/* The request: its destination into c->target. Returns 0, or -errno after a reply. */
static int read_request(struct egress_conn *c)
{
        uint8_t h[4], a[256], p[2];
        char text[INET6_ADDRSTRLEN];
        size_t len;
        uint16_t port;
        int r;

        r = read_exact(c, h, sizeof(h));
        if (r < 0)
                return r;
        if (h[0] != SOCKS_VERSION) {
                egress_conn_refuse(c, "not a SOCKS5 request");
                reply_code(c, SOCKS_FAILURE);
                return -EPROTO;
        }
        switch (h[3]) {
        case SOCKS_ATYP_V4:
                len = 4;
                break;
        case SOCKS_ATYP_V6:
                len = 16;
                break;
        case SOCKS_ATYP_NAME:
                r = read_exact(c, a, 1);
                if (r < 0)
                        return r;
                len = a[0];
                break;
        default:
                egress_conn_refuse(c, "the address type %u is not known", h[3]);
                reply_code(c, SOCKS_ATYP_UNSUPPORTED);
                return -EPROTO;
        }
        r = read_exact(c, a, len);
        if (r >= 0)
                r = read_exact(c, p, sizeof(p));
        if (r < 0)
                return r;
        port = (uint16_t) (p[0] << 8 | p[1]);
        if (h[3] == SOCKS_ATYP_NAME) {
                r = egress_target_set(&c->target, (const char *) a, len, port);
        } else {
                (void) inet_ntop(h[3] == SOCKS_ATYP_V4 ? AF_INET : AF_INET6, a, text, sizeof(text));
                r = egress_target_set(&c->target, text, strlen(text), port);
        }
        if (h[1] != SOCKS_CMD_CONNECT) {
                egress_conn_refuse(c, "only CONNECT is offered (not BIND or UDP ASSOCIATE)");
                reply_code(c, SOCKS_CMD_UNSUPPORTED);
                return -EPROTO;
        }
        if (r < 0) {
                egress_conn_refuse(c, "the host is neither a DNS name nor an IP address");
                reply_code(c, SOCKS_NOT_ALLOWED);
                return -EPROTO;
        }
        return 0;
}

void egress_socks5_serve(struct egress_conn *c)
{
        int r;

        r = greet(c);
        if (r >= 0)
                r = read_request(c);
        if (r < 0)
                return;
        r = egress_conn_dial(c);
        if (r < 0) {
                if (r != -ECANCELED)
                        reply_code(c, failure_code(r));
                return;
        }
        if (reply_ok(c) < 0)
                return;
        (void) egress_conn_relay(c, NULL, 0, NULL, NULL, NULL);
}
