/* One connection's way out, whatever protocol asked for it: the destination checked against
 * the caps, the session's policy and the forbidden addresses; a name resolved once by the
 * proxy, every address checked, and the connection made only to a checked address; then the
 * relay, with every byte counted against the session's cap. Also the forwarders, which need
 * nothing else. */
#include "egress-internal.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Resolved addresses tried in turn (all are checked, only these many tried). */
#define DIAL_ADDRS_MAX 16u

/* What is shown of a host that is not one: printable ASCII as it is, the rest as \xNN, cut. */
static void show_bad_host(struct egress_target *t, const char *host, size_t len)
{
        size_t o = 0;

        for (size_t i = 0; i < len && o + 8 < sizeof(t->host) && o < 80; i++) {
                unsigned char c = (unsigned char) host[i];

                o += (size_t) snprintf(t->host + o, sizeof(t->host) - o,
                                       c > 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
        }
        if (len == 0)
                (void) snprintf(t->host, sizeof(t->host), "(empty)");
}

int egress_target_set(struct egress_target *t, const char *host, size_t len, uint16_t port)
{
        struct sockaddr_in *sin = (struct sockaddr_in *) &t->addr;
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &t->addr;
        char raw[EGRESS_HOST_MAX];
        bool bad = len == 0 || len >= sizeof(raw);

        *t = (struct egress_target){ .port = port };
        for (size_t i = 0; i < len && !bad; i++) {
                unsigned char c = (unsigned char) host[i];

                /* Name characters, and ':' for an IPv6 literal. */
                bad = !isalnum(c) && c != '-' && c != '_' && c != '.' && c != ':';
        }
        if (bad) {
                show_bad_host(t, host, len);
                return -EINVAL;
        }
        memcpy(raw, host, len);
        raw[len] = '\0';
        if (inet_pton(AF_INET, raw, &sin->sin_addr) == 1) {
                sin->sin_family = AF_INET;
                t->is_addr = true;
                (void) inet_ntop(AF_INET, &sin->sin_addr, t->host, sizeof(t->host));
                return 0;
        }
        if (inet_pton(AF_INET6, raw, &sin6->sin6_addr) == 1) {
                sin6->sin6_family = AF_INET6;
                t->is_addr = true;
                /* The canonical spelling: messages, usage and events agree on one. */
                (void) inet_ntop(AF_INET6, &sin6->sin6_addr, t->host, sizeof(t->host));
                return 0;
        }
        if (memchr(raw, ':', len)) {
                show_bad_host(t, host, len);
                return -EINVAL;
        }
        for (size_t i = 0; i < len; i++)
                t->host[i] = (char) tolower((unsigned char) raw[i]);
        t->host[len] = '\0';
        if (len > 1 && t->host[len - 1] == '.')
                t->host[len - 1] = '\0';
        return 0;
}

const char *egress_target_text(const struct egress_target *t, char *buf, size_t size)
{
        bool v6 = t->is_addr && t->addr.ss_family == AF_INET6;

        (void) snprintf(buf, size, v6 ? "[%s]:%u" : "%s:%u", t->host, t->port);
        return buf;
}

const char *egress_conn_profile(struct egress_conn *c, char *buf, size_t size)
{
        (void) pthread_mutex_lock(&c->s->lock);
        (void) snprintf(buf, size, "%s", c->s->info->profile);
        (void) pthread_mutex_unlock(&c->s->lock);
        return buf;
}

static bool conn_is_cut(struct egress_conn *c)
{
        bool cut;

        (void) pthread_mutex_lock(&c->s->lock);
        cut = c->cut;
        (void) pthread_mutex_unlock(&c->s->lock);
        return cut;
}

static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
        struct pollfd p = { .fd = fd, .events = events };
        uint64_t now = now_ns();
        int n;

        if (now >= deadline_ns)
                return -ETIMEDOUT;
        n = poll(&p, 1, (int) ((deadline_ns - now) / 1000000u) + 1);
        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        return 0;
}

ssize_t egress_conn_read(struct egress_conn *c, void *buf, size_t size)
{
        for (;;) {
                ssize_t n = recv(c->client, buf, size, MSG_DONTWAIT);
                int r;

                if (n >= 0)
                        return n;
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (conn_is_cut(c))
                        return -ECANCELED;
                r = wait_fd(c->client, POLLIN, c->deadline_ns);
                if (r < 0)
                        return r;
        }
}

int egress_conn_write(struct egress_conn *c, const void *buf, size_t len)
{
        uint64_t deadline = now_ns() + EGRESS_HANDSHAKE_MS * 1000000ull;
        const char *p = buf;

        while (len > 0) {
                ssize_t n = send(c->client, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                int r;

                if (n > 0) {
                        p += n;
                        len -= (size_t) n;
                        continue;
                }
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                r = wait_fd(c->client, POLLOUT, deadline);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void count(struct egress_conn *c, uint64_t connections, uint64_t refused, uint64_t bytes_in,
                  uint64_t bytes_out)
{
        struct egress_session *s = c->s;

        egress_usage_add(&s->period, c->target.host, c->target.port, connections, refused, bytes_in,
                         bytes_out);
        egress_usage_add(&s->total, c->target.host, c->target.port, connections, refused, bytes_in,
                         bytes_out);
}

void egress_conn_refuse(struct egress_conn *c, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
        va_end(ap);
        /* A reason may quote the client (a Host header): printable ASCII only, so that it is
         * valid UTF-8 in the audit log's JSON and carries no terminal escapes. */
        for (char *p = c->reason; *p; p++)
                if ((unsigned char) *p < 0x20 || (unsigned char) *p > 0x7e)
                        *p = '?';
        (void) pthread_mutex_lock(&c->s->lock);
        count(c, 0, 1, 0, 0);
        (void) pthread_mutex_unlock(&c->s->lock);
        egress_emit(c, EGRESS_EVENT_REFUSED, c->reason);
}

static bool forbidden(struct egress_conn *c, const struct sockaddr *sa, char *why, size_t size)
{
        struct egress *e = c->e;
        bool r;

        (void) pthread_mutex_lock(&e->deny_lock);
        r = egress_addr_forbidden(&e->deny, sa, c->target.port, why, size);
        (void) pthread_mutex_unlock(&e->deny_lock);
        return r;
}

/* 127.0.0.0/8, ::1 and their v4-mapped spelling: the host's own services. */
static bool is_loopback(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET)
                return (ntohl(((const struct sockaddr_in *) sa)->sin_addr.s_addr) >> 24) == 127;
        if (sa->sa_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *) sa)->sin6_addr;
                return IN6_IS_ADDR_LOOPBACK(a) ||
                       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
        }
        return false;
}

/* A name that resolves to the host's loopback reaches the host's own services (the proxy dials
 * from the host's namespace): only an address rule naming that address and port opens it, so
 * that a wildcard whose DNS someone else controls cannot point the proxy at them. */
static bool loopback_not_allowed(struct egress_conn *c, const struct sockaddr *sa)
{
        bool allowed;

        if (!is_loopback(sa))
                return false;
        (void) pthread_mutex_lock(&c->s->lock);
        allowed = egress_policy_allows_addr(c->s->policy, sa, c->target.port);
        (void) pthread_mutex_unlock(&c->s->lock);
        return !allowed;
}

static int fail(struct egress_conn *c, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int fail(struct egress_conn *c, int r, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
        va_end(ap);
        return r;
}

/* The caps and the policy, before any lookup: a name the policy does not allow is never sent
 * to the resolver. Returns 0 or -EPERM (refused). */
static int check_policy(struct egress_conn *c)
{
        struct egress_session *s = c->s;
        uint32_t max_connections;
        uint64_t max_bytes;
        bool exhausted, none, allowed;

        (void) pthread_mutex_lock(&s->lock);
        max_connections = s->policy->max_connections;
        max_bytes = s->policy->max_bytes;
        exhausted = s->bytes_exhausted;
        none = s->policy->mode != EGRESS_MODE_ALLOW;
        allowed = c->target.is_addr
                          ? egress_policy_allows_addr(
                                    s->policy, (struct sockaddr *) &c->target.addr, c->target.port)
                          : egress_policy_allows_name(s->policy, c->target.host, c->target.port);
        (void) pthread_mutex_unlock(&s->lock);

        if (c->over_cap)
                egress_conn_refuse(c, "too many connections (max %" PRIu32 ") for session",
                                   max_connections);
        else if (exhausted)
                egress_conn_refuse(c, "the session's byte limit (%" PRIu64 " bytes) is used up",
                                   max_bytes);
        else if (none)
                egress_conn_refuse(c, "the session has no network");
        else if (!allowed)
                egress_conn_refuse(c, "not in the allow-list");
        else
                return 0;
        return -EPERM;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
        if (ss->ss_family == AF_INET)
                ((struct sockaddr_in *) ss)->sin_port = htons(port);
        else
                ((struct sockaddr_in6 *) ss)->sin6_port = htons(port);
}

static const char *addr_text(const struct sockaddr_storage *ss, char *buf, size_t size)
{
        const void *a = ss->ss_family == AF_INET
                                ? (const void *) &((const struct sockaddr_in *) ss)->sin_addr
                                : (const void *) &((const struct sockaddr_in6 *) ss)->sin6_addr;

        if (!inet_ntop(ss->ss_family, a, buf, (socklen_t) size))
                (void) snprintf(buf, size, "?");
        return buf;
}

/* Resolves the target's name once and checks every address: one forbidden address refuses the
 * name (it is hostile, or misconfigured). Returns the count of addresses to try, -EPERM, or a
 * lookup failure. */
static int resolve(struct egress_conn *c, struct sockaddr_storage *out)
{
        const struct addrinfo hints = { .ai_family = AF_UNSPEC,
                                        .ai_socktype = SOCK_STREAM,
                                        .ai_protocol = IPPROTO_TCP };
        struct addrinfo *res = NULL;
        char why[EGRESS_REASON_MAX];
        int n = 0, k;

        k = getaddrinfo(c->target.host, NULL, &hints, &res);
        if (k == EAI_NONAME || k == EAI_NODATA || k == EAI_FAIL)
                return fail(c, -ENOENT, "cannot resolve '%s': %s", c->target.host, gai_strerror(k));
        if (k != 0)
                return fail(c, k == EAI_SYSTEM && errno > 0 ? -errno : -EAGAIN,
                            "cannot resolve '%s': %s", c->target.host, gai_strerror(k));
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
                    ai->ai_addrlen > sizeof(*out))
                        continue;
                if (forbidden(c, ai->ai_addr, why, sizeof(why))) {
                        freeaddrinfo(res);
                        egress_conn_refuse(c, "%s resolves to a forbidden address: %s",
                                           c->target.host, why);
                        return -EPERM;
                }
                if (loopback_not_allowed(c, ai->ai_addr)) {
                        freeaddrinfo(res);
                        egress_conn_refuse(c,
                                           "%s resolves to the host's loopback; only an address "
                                           "rule (e.g. 127.0.0.1:%u) opens the host's own services",
                                           c->target.host, (unsigned) c->target.port);
                        return -EPERM;
                }
                if ((unsigned) n < DIAL_ADDRS_MAX) {
                        memset(&out[n], 0, sizeof(out[n]));
                        memcpy(&out[n], ai->ai_addr, ai->ai_addrlen);
                        n++;
                }
        }
        freeaddrinfo(res);
        if (n == 0)
                return fail(c, -ENOENT, "cannot resolve '%s': no IPv4 or IPv6 address",
                            c->target.host);
        return n;
}

static int set_upstream(struct egress_conn *c, int fd)
{
        int old;

        (void) pthread_mutex_lock(&c->s->lock);
        if (c->cut && fd >= 0) {
                (void) pthread_mutex_unlock(&c->s->lock);
                (void) close(fd);
                return -ECANCELED;
        }
        old = c->upstream;
        c->upstream = fd;
        (void) pthread_mutex_unlock(&c->s->lock);
        (void) safe_close_fd(old);
        return 0;
}

/* A non-blocking connect, given until deadline, given up when the client goes (its socket
 * reports POLLHUP once cut or closed both ways). Returns 0 or -errno. */
static int connect_one(struct egress_conn *c, struct sockaddr_storage *ss, uint64_t deadline)
{
        socklen_t len =
                ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        int fd, r, soerr = 0;
        socklen_t soerr_len = sizeof(soerr);

        fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0)
                return -errno;
        r = set_upstream(c, fd);
        if (r < 0)
                return r;
        if (connect(fd, (struct sockaddr *) ss, len) == 0)
                return 0;
        if (errno != EINPROGRESS)
                return -errno;
        for (;;) {
                struct pollfd p[2] = { { .fd = fd, .events = POLLOUT }, { .fd = c->client } };
                uint64_t now = now_ns();
                int n;

                if (now >= deadline)
                        return -ETIMEDOUT;
                n = poll(p, 2, (int) ((deadline - now) / 1000000u) + 1);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (p[1].revents & (POLLHUP | POLLERR))
                        return -ECANCELED;
                if (p[0].revents)
                        break;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &soerr_len) < 0)
                return -errno;
        return -soerr;
}

static int connect_any(struct egress_conn *c, struct sockaddr_storage *addrs, size_t n)
{
        uint64_t deadline = now_ns() + c->e->connect_timeout_ms * 1000000ull;
        char text[INET6_ADDRSTRLEN] = "?";
        int r = -EHOSTUNREACH;

        for (size_t i = 0; i < n; i++) {
                set_port(&addrs[i], c->target.port);
                (void) addr_text(&addrs[i], text, sizeof(text));
                r = connect_one(c, &addrs[i], deadline);
                if (r == 0) {
                        (void) snprintf(c->address, sizeof(c->address), "%s", text);
                        return 0;
                }
                (void) set_upstream(c, -EBADF);
                if (r == -ECANCELED)
                        return fail(c, r, "the connection was cut");
                if (r == -ETIMEDOUT)
                        return fail(c, r, "no answer from %s within %" PRIu64 " ms", text,
                                    c->e->connect_timeout_ms);
        }
        if (r == -ECONNREFUSED)
                return fail(c, r, "%s refused the connection", text);
        return fail(c, r, "cannot connect to %s: %s", text, strerror(-r));
}

int egress_conn_dial(struct egress_conn *c)
{
        struct sockaddr_storage addrs[DIAL_ADDRS_MAX];
        char why[EGRESS_REASON_MAX];
        int one = 1, n = 1, r;

        r = check_policy(c);
        if (r < 0)
                return r;
        if (c->target.is_addr) {
                if (forbidden(c, (struct sockaddr *) &c->target.addr, why, sizeof(why))) {
                        egress_conn_refuse(c, "%s", why);
                        return -EPERM;
                }
                addrs[0] = c->target.addr;
        } else {
                n = resolve(c, addrs);
                if (n < 0)
                        return n;
        }
        r = connect_any(c, addrs, (size_t) n);
        if (r < 0)
                return r;
        /* What the client writes goes on at once: a database's small requests must not wait
         * for Nagle and a delayed ACK. */
        (void) setsockopt(c->upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        (void) setsockopt(c->client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        (void) pthread_mutex_lock(&c->s->lock);
        count(c, 1, 0, 0, 0);
        c->opened = true;
        (void) pthread_mutex_unlock(&c->s->lock);
        egress_emit(c, EGRESS_EVENT_OPEN, NULL);
        return 0;
}

static size_t conn_grant(void *ctx, enum egress_dir dir, size_t want)
{
        struct egress_conn *c = ctx;
        struct egress_session *s = c->s;
        size_t g = 0;

        (void) dir;
        (void) pthread_mutex_lock(&s->lock);
        while (!c->cut && !s->bytes_exhausted) {
                uint64_t max = s->policy->max_bytes;
                uint64_t left = max > s->bytes_used ? max - s->bytes_used : 0;

                if (left == 0 && s->bytes_reserved > 0) {
                        /* What is left is granted to reads under way, which may give some
                         * back: the limit is reached only when it is really used. */
                        s->budget_waiters++;
                        (void) pthread_cond_wait(&s->budget, &s->lock);
                        s->budget_waiters--;
                        continue;
                }
                g = left < want ? (size_t) left : want;
                s->bytes_used += g;
                s->bytes_reserved += g;
                if (g == 0) {
                        char reason[128];

                        /* Refuse new connections and cut the open ones, this one too. */
                        (void) snprintf(reason, sizeof(reason),
                                        "the session's byte limit (%" PRIu64 " bytes) was reached",
                                        max);
                        s->bytes_exhausted = true;
                        egress_session_cut_all(s, reason);
                }
                break;
        }
        (void) pthread_mutex_unlock(&s->lock);
        return g;
}

static void conn_moved(void *ctx, enum egress_dir dir, size_t granted, size_t n)
{
        struct egress_conn *c = ctx;
        struct egress_session *s = c->s;
        uint64_t in = dir == EGRESS_IN ? n : 0, out = dir == EGRESS_OUT ? n : 0;

        (void) pthread_mutex_lock(&s->lock);
        s->bytes_used -= granted - n;
        s->bytes_reserved -= granted;
        /* Any grant given back, used or not, may end a wait in conn_grant(). */
        if (granted > 0 && s->budget_waiters > 0)
                (void) pthread_cond_broadcast(&s->budget);
        count(c, 0, 0, in, out);
        c->bytes_in += in;
        c->bytes_out += out;
        (void) pthread_mutex_unlock(&s->lock);
}

static const struct egress_relay_ops conn_relay_ops = {
        .grant = conn_grant,
        .moved = conn_moved,
};

int egress_conn_relay(struct egress_conn *c, const void *to_upstream, size_t to_upstream_len,
                      egress_head_fn response_head, struct http_body *request_body,
                      uint64_t *ret_client_written)
{
        struct egress_relay r = {
                .client = c->client,
                .upstream = c->upstream,
                .to_upstream = to_upstream,
                .to_upstream_len = to_upstream_len,
                .response_head = response_head,
                .request_body = request_body,
                .ops = &conn_relay_ops,
                .ctx = c,
                .linger_ms = c->e->linger_ms > INT_MAX ? INT_MAX : (int) c->e->linger_ms,
        };
        size_t g;
        int k;

        /* What the handler read from the client and sends on (a rewritten request head, bytes
         * that came with it) counts like the rest. */
        if (to_upstream_len > 0) {
                g = conn_grant(c, EGRESS_OUT, to_upstream_len);
                conn_moved(c, EGRESS_OUT, g, g);
                if (g < to_upstream_len)
                        return -EDQUOT;
        }
        k = egress_relay_run(&r);
        if (r.lingered) {
                (void) pthread_mutex_lock(&c->s->lock);
                if (!c->cut_reason[0])
                        (void) snprintf(c->cut_reason, sizeof(c->cut_reason),
                                        "the client had gone and the upstream read nothing "
                                        "more for %d ms",
                                        r.linger_ms);
                (void) pthread_mutex_unlock(&c->s->lock);
        }
        if (ret_client_written)
                *ret_client_written = r.client_written;
        return k;
}

void egress_forward_serve(struct egress_conn *c)
{
        /* A refusal or a failure is a close at once: the client speaks its own protocol and
         * has no way to be told more; the event says why. */
        if (egress_conn_dial(c) < 0)
                return;
        (void) egress_conn_relay(c, NULL, 0, NULL, NULL, NULL);
}
