/* The relay of one proxied connection, both directions in one thread: non-blocking sockets, a
 * buffer per direction, poll() only when nothing could move. Every read is granted by the
 * caller first (the session's byte cap holds exactly), and an EOF on one side becomes
 * shutdown(SHUT_WR) on the other (half-close, which database protocols and HTTP/1.0 clients
 * rely on). A reset reads like an EOF, and a side that cannot be written to any more only ends
 * its direction: what either side said before it went still reaches the other. A plain HTTP
 * response head is collected in its direction's buffer and rewritten before the client sees it.
 *
 * Why not splice(2): measured on loopback (bench/bench-egress-engine), moving pages through a
 * pipe cost more CPU per byte than two copies through the buffers (docs/NETWORK.md). */
#include "egress-internal.h"

#include "base/cleanup.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A direction's buffer starts at RELAY_BUF_MIN, which also bounds a plain HTTP response head.
 * A direction whose reads keep filling it (a bulk transfer) gets it doubled, when it is empty,
 * up to RELAY_BUF_MAX. Each wake-up then moves what the socket holds rather than a slice of
 * it: bench/bench-egress measured a 100 MiB download through the proxy's slowest way at 52-67%
 * of a direct one's rate with 512 KiB, 41-45% with 64 KiB (1 MiB was no faster, 4 MiB slower). The
 * grown part of all relays together is bounded by RELAY_GROWN_MAX, so that a flood of bulk
 * connections costs the daemon at most that much more memory. */
#define RELAY_BUF_MIN (64u * 1024u)
#define RELAY_BUF_MAX (512u * 1024u)
#define RELAY_GROWN_MAX ((size_t) 256u << 20)

static atomic_size_t relay_grown;      /* bytes of all buffers above RELAY_BUF_MIN */
static atomic_size_t relay_grown_peak; /* the most relay_grown has been */

size_t egress_relay_grown(size_t *peak)
{
        if (peak)
                *peak = atomic_load(&relay_grown_peak);
        return atomic_load(&relay_grown);
}

struct relay_dir {
        enum egress_dir dir;
        int src, dst;
        char *buf;
        size_t cap;        /* buf's size */
        size_t start, end; /* buf[start..end) waits for dst */
        bool full;         /* the last read filled buf: grow it once it is empty */
        /* Ours to send before what is in buf: the caller's bytes, or rewritten heads. */
        const char *pending;
        size_t pending_len;
        struct buf rewritten;
        /* Set while buf collects a response head (plain HTTP, upstream to client only). */
        egress_head_fn head_fn;
        /* Set while the request's end is looked for (plain HTTP, client to upstream only). */
        struct http_body *body;
        uint64_t moved;   /* bytes read and written, to tell progress */
        uint64_t drained; /* read and dropped after the request's end */
        bool eof;         /* src said EOF (or no more is read from it) */
        bool done;        /* passed on as shutdown(dst, SHUT_WR) */
};

static int relay_dir_init(struct relay_dir *d, enum egress_dir dir, int src, int dst,
                          const void *pending, size_t pending_len)
{
        *d = (struct relay_dir){
                .dir = dir, .src = src, .dst = dst, .pending = pending, .pending_len = pending_len
        };
        d->cap = RELAY_BUF_MIN;
        d->buf = malloc(d->cap);
        return d->buf ? 0 : -ENOMEM;
}

static void relay_dir_done(struct relay_dir *d)
{
        if (d->cap > RELAY_BUF_MIN)
                atomic_fetch_sub(&relay_grown, d->cap - RELAY_BUF_MIN);
        free(d->buf);
        buf_done(&d->rewritten);
}

/* Hands the complete heads at the start of buf to the rewriter; what it makes becomes pending,
 * and after the final head the rest of buf is body. Returns 0 or -errno. */
static int relay_heads(struct relay_dir *d)
{
        d->rewritten.len = 0; /* called only once what it held has been sent */
        while (d->head_fn) {
                size_t used = 0;
                bool final = false;
                int k = d->head_fn(d->buf, d->end, &used, &d->rewritten, &final);

                if (k == -EAGAIN)
                        break;
                if (k < 0)
                        return k == -ENOMEM ? k : -EPROTO;
                memmove(d->buf, d->buf + used, d->end - used);
                d->end -= used;
                if (final)
                        d->head_fn = NULL;
        }
        d->pending = d->rewritten.data;
        d->pending_len = d->rewritten.len;
        return 0;
}

/* After the request has ended: what the client sends is read (so that closing does not reset
 * the connection under an answer not yet read) and dropped, up to RELAY_DRAIN_MAX. */
#define RELAY_DRAIN_MAX (64u * 1024u)

static bool relay_draining(const struct relay_dir *d)
{
        return d->body && d->body->done;
}

static int relay_drain(struct relay_dir *d)
{
        char sink[4096];
        ssize_t n = recv(d->src, sink, sizeof(sink), MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        d->drained += n > 0 ? (uint64_t) n : 0;
        d->eof = n <= 0 || d->drained >= RELAY_DRAIN_MAX; /* an error (a reset) ends it too */
        return 0;
}

/* Doubles an empty buf whose last read filled it, within RELAY_BUF_MAX and RELAY_GROWN_MAX;
 * without the memory it stays as it is. */
static void relay_grow(struct relay_dir *d)
{
        size_t more = d->cap, grown = atomic_load(&relay_grown);
        char *b;

        d->full = false;
        if (d->cap >= RELAY_BUF_MAX || d->head_fn)
                return;
        do {
                if (grown + more > RELAY_GROWN_MAX)
                        return;
        } while (!atomic_compare_exchange_weak(&relay_grown, &grown, grown + more));
        /* Empty: nothing to keep, so a new buffer rather than realloc's copy. */
        b = malloc(d->cap + more);
        if (!b) {
                atomic_fetch_sub(&relay_grown, more);
                return;
        }
        for (size_t peak = atomic_load(&relay_grown_peak);
             peak < grown + more &&
             !atomic_compare_exchange_weak(&relay_grown_peak, &peak, grown + more);)
                ;
        free(d->buf);
        d->buf = b;
        d->cap += more;
}

/* Gives an empty grown buf back (its direction has gone quiet); keeps it without the memory
 * for a small one. */
static void relay_shrink(struct relay_dir *d)
{
        char *b;

        if (d->cap == RELAY_BUF_MIN || d->start != d->end || d->pending_len > 0)
                return;
        b = malloc(RELAY_BUF_MIN);
        if (!b)
                return;
        free(d->buf);
        atomic_fetch_sub(&relay_grown, d->cap - RELAY_BUF_MIN);
        d->buf = b;
        d->cap = RELAY_BUF_MIN;
        d->start = d->end = 0;
        d->full = false;
}

static int relay_read(struct relay_dir *d, struct egress_relay *r)
{
        size_t g, keep;
        ssize_t n;
        int k;

        if (relay_draining(d))
                return relay_drain(d);
        if (d->full && d->start == d->end)
                relay_grow(d);
        if (d->end == d->cap)
                return -EPROTO; /* a response head that never ends */
        g = r->ops->grant(r->ctx, d->dir, d->cap - d->end);
        if (g == 0)
                return -EDQUOT;
        n = recv(d->src, d->buf + d->end, g, MSG_DONTWAIT);
        if (n < 0) {
                k = -errno;
                r->ops->moved(r->ctx, d->dir, g, 0);
                if (k == -EAGAIN || k == -EINTR)
                        return 0;
                if (d->head_fn)
                        return k; /* reset before a complete head */
                /* A reset (or another error): what came before it goes on, as after an EOF. */
                d->eof = true;
                return 0;
        }
        keep = (size_t) n;
        k = 0;
        if (d->body && n > 0) {
                ssize_t b = http_body_feed(d->body, d->buf + d->end, keep);

                /* Bytes past the request's end are not forwarded, nor counted. */
                keep = b > 0 ? (size_t) b : 0;
                k = b < 0 ? -EPROTO : 0;
        }
        r->ops->moved(r->ctx, d->dir, g, keep);
        if (k < 0)
                return k;
        if (n == 0) {
                d->eof = true;
                return d->head_fn ? -EPROTO : 0; /* closed before a complete head */
        }
        n = (ssize_t) keep;
        d->end += (size_t) n;
        d->full = d->end == d->cap;
        d->moved += (uint64_t) n;
        return d->head_fn ? relay_heads(d) : 0;
}

/* Sends what is pending, then what buf holds (unless it is an unfinished head). */
static int relay_write(struct relay_dir *d, struct egress_relay *r)
{
        bool from_buf = d->pending_len == 0;
        const char *p = from_buf ? d->buf + d->start : d->pending;
        size_t len = from_buf ? d->end - d->start : d->pending_len;
        ssize_t n;

        if (len == 0 || (from_buf && d->head_fn))
                return 0;
        n = send(d->dst, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n < 0) {
                /* dst is gone (a reset): nothing more reaches it, and what waits for it is
                 * dropped; the other direction goes on (an upstream that reset under an upload
                 * may have answered first). */
                d->pending_len = 0;
                d->start = d->end = 0;
                d->head_fn = NULL;
                d->eof = d->done = true;
                return 0;
        }
        d->moved += (uint64_t) n;
        if (d->dir == EGRESS_IN)
                r->client_written += (uint64_t) n;
        if (!from_buf) {
                d->pending += n;
                d->pending_len -= (size_t) n;
        } else {
                d->start += (size_t) n;
                if (d->start == d->end)
                        d->start = d->end = 0;
        }
        return 0;
}

static bool relay_dir_empty(const struct relay_dir *d)
{
        return d->pending_len == 0 && d->start == d->end;
}

/* Whether the direction wants to read: nothing of ours waits, and buf is empty (or collects a
 * head). */
static bool relay_wants_read(const struct relay_dir *d)
{
        return !d->eof &&
               (relay_draining(d) || (d->pending_len == 0 && (d->head_fn || d->start == d->end)));
}

static int relay_dir_step(struct relay_dir *d, struct egress_relay *r)
{
        int k;

        k = relay_write(d, r);
        if (k >= 0 && relay_wants_read(d))
                k = relay_read(d, r);
        if (k >= 0)
                k = relay_write(d, r);
        if (k >= 0 && d->eof && relay_dir_empty(d) && !d->done && !relay_draining(d)) {
                /* ENOTCONN when the other side has gone already: the relay ends anyway. */
                (void) shutdown(d->dst, SHUT_WR);
                d->done = true;
        }
        return k;
}

static short relay_src_events(const struct relay_dir *d)
{
        return relay_wants_read(d) ? POLLIN : 0;
}

static short relay_dst_events(const struct relay_dir *d)
{
        return d->pending_len > 0 || (!d->head_fn && d->start < d->end) ? POLLOUT : 0;
}

/* Both ways closed; or the request has ended, all of it has gone upstream and the answer has
 * come back whole. */
static bool relay_finished(const struct relay_dir *out, const struct relay_dir *in)
{
        return in->done && (out->done || (relay_draining(out) && relay_dir_empty(out)));
}

/* A grown buffer is given back after this long without traffic either way. */
#define RELAY_IDLE_MS 1000

static bool relay_shrinkable(const struct relay_dir *d)
{
        return d->cap > RELAY_BUF_MIN && relay_dir_empty(d);
}

/* Waits for p's events (p[0] the client, p[1] the upstream). Without events poll() still
 * reports POLLHUP and POLLERR, so a side cut by egress_session_close() (shutdown) wakes the
 * relay up. But a side that has hung up or been reset would then be reported at once, again
 * and again, while the other side does not move (an upstream that does not read): a spin. So
 * such a side is noted in gone and left out of the waits that ask nothing of it; an error
 * shows when it is next read or written. Once the client has gone, the upstream gets
 * linger_ms to take what is left: then the relay ends (-ETIMEDOUT, r->lingered). While a grown
 * buffer is empty, a wait of RELAY_IDLE_MS with nothing moving gives it back. Returns 0 or
 * -errno. */
static int relay_wait(struct egress_relay *r, struct pollfd p[2], bool gone[2],
                      struct relay_dir *out, struct relay_dir *in)
{
        bool shrinkable = relay_shrinkable(out) || relay_shrinkable(in);
        int timeout = gone[0] ? r->linger_ms : shrinkable ? RELAY_IDLE_MS : -1, n;

        for (int i = 0; i < 2; i++)
                if (gone[i] && !p[i].events)
                        p[i].fd = -1;
        if (p[0].fd < 0 && p[1].fd < 0)
                return -EPIPE; /* not reached: both sides asked nothing of means finished */
        n = poll(p, 2, timeout);
        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        if (n == 0 && gone[0]) {
                r->lingered = true;
                return -ETIMEDOUT;
        }
        if (n == 0) {
                relay_shrink(out);
                relay_shrink(in);
        }
        for (int i = 0; i < 2; i++)
                if (p[i].revents & (POLLHUP | POLLERR))
                        gone[i] = true;
        return 0;
}

int egress_relay_run(struct egress_relay *r)
{
        struct relay_dir out, in;
        bool gone[2] = { false, false };
        int k;

        r->client_written = 0;
        r->lingered = false;
        k = relay_dir_init(&out, EGRESS_OUT, r->client, r->upstream, r->to_upstream,
                           r->to_upstream_len);
        if (k >= 0)
                k = relay_dir_init(&in, EGRESS_IN, r->upstream, r->client, r->to_client,
                                   r->to_client_len);
        else
                in = (struct relay_dir){ 0 };
        in.head_fn = r->response_head;
        out.body = r->request_body;

        while (k >= 0 && !relay_finished(&out, &in)) {
                struct pollfd p[2] = { { .fd = r->client }, { .fd = r->upstream } };
                uint64_t moved = out.moved + in.moved;

                k = relay_dir_step(&out, r);
                if (k >= 0)
                        k = relay_dir_step(&in, r);
                if (k < 0 || relay_finished(&out, &in))
                        break;
                /* Bytes moved: there may be more at once; poll() only once nothing moves. */
                if (out.moved + in.moved != moved)
                        continue;
                p[0].events = relay_src_events(&out) | relay_dst_events(&in);
                p[1].events = relay_src_events(&in) | relay_dst_events(&out);
                k = relay_wait(r, p, gone, &out, &in);
        }
        relay_dir_done(&out);
        relay_dir_done(&in);
        return k < 0 ? k : 0;
}
