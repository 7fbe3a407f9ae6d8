/* Shared by the files of the egress proxy engine (egress.h): egress.c (sessions, acceptor,
 * connection threads), conn.c (checks, lookup, connect, counting), netns.c (listeners in the
 * sandbox's namespace), http.c and http-parse.c (the HTTP proxy), socks5.c, relay.c and
 * usage.c. Not for other modules. */
#pragma once

#include "base/buf.h"
#include "egress/egress.h"
#include "egress/http-parse.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A request's (or a response's) header block, up to and including its blank line. */
#define EGRESS_HEAD_MAX HTTP_HEAD_MAX
/* From accept to a complete request (HTTP) or CONNECT request (SOCKS5). */
#define EGRESS_HANDSHAKE_MS 10000u
/* A DNS name is at most 253 bytes; an address literal is shorter. */
#define EGRESS_HOST_MAX 256u
/* Room for a reason: a forbidden address's explanation with a 253-byte name in front. */
#define EGRESS_REASON_MAX 400u

enum egress_listener_kind {
        EGRESS_LISTEN_HTTP,
        EGRESS_LISTEN_SOCKS,
        EGRESS_LISTEN_FORWARD,
};

enum egress_dir {
        EGRESS_OUT, /* sandbox to upstream */
        EGRESS_IN,  /* upstream to sandbox */
};

/* Rewrites the upstream's response heads for a plain HTTP request (http-parse.c): consumes
 * one complete head at the start of buf, appending what the client gets to out. Returns 0
 * (*ret_final says whether it was the final head, after which the body follows), -EAGAIN when
 * buf holds no complete head yet, or -EBADMSG / -E2BIG / -ENOMEM. */
typedef int (*egress_head_fn)(const char *buf, size_t len, size_t *ret_consumed, struct buf *out,
                              bool *ret_final);

/* A destination as the client asked for it. */
struct egress_target {
        char host[EGRESS_HOST_MAX]; /* a lowercased name without a trailing dot, or an address
                                     * literal (IPv6 without brackets); "" until known */
        uint16_t port;
        bool is_addr;
        struct sockaddr_storage addr; /* is_addr: the literal (port 0) */
};

/* Sets t from a host as asked (len bytes, not NUL-terminated, IPv6 without brackets) and a
 * port: an IPv4 or IPv6 literal (inet_pton's strict forms only: "127.1" is not one) becomes an
 * address; anything else must look like a DNS name (letters, digits, '-', '_', '.'), which is
 * lowercased and loses one trailing dot. Returns 0, or -EINVAL with t->host set to a printable
 * rendering of what was asked (for the refusal) when the host is neither. */
int egress_target_set(struct egress_target *t, const char *host, size_t len, uint16_t port);

/* "host:port" ("[v6]:port" for an IPv6 literal) into buf. Returns buf. */
const char *egress_target_text(const struct egress_target *t, char *buf, size_t size);

/* The names and profile events carry; shared by reference so that a rename (set_info) never
 * frees strings an event in flight still points at. */
struct egress_info {
        atomic_uint refs;
        char *session;
        char *tenant;
        char *profile;
};

struct egress_info *egress_info_ref(struct egress_info *i);
struct egress_info *egress_info_unref(struct egress_info *i);

/* Traffic counters: a session keeps two, the period since the last take and the totals. */
struct egress_dest {
        char *host;
        uint16_t port;
        uint64_t connections, refused, bytes_in, bytes_out;
};

struct egress_usage {
        uint64_t connections, refused, bytes_in, bytes_out;
        struct egress_dest *dests; /* sorted by host, then port */
        size_t n_dests, size;
        uint64_t untracked; /* new destinations seen while the table was full */
};

/* Adds the counts to the totals and, when host is neither NULL nor "", to host:port's entry
 * (created when missing; a full table counts it in untracked instead). Never fails: without
 * memory, only the totals move. */
void egress_usage_add(struct egress_usage *u, const char *host, uint16_t port, uint64_t connections,
                      uint64_t refused, uint64_t bytes_in, uint64_t bytes_out);
/* The shape of egress_session_take_usage(), or NULL when out of memory. */
json_t *egress_usage_to_json(const struct egress_usage *u);
/* Frees the table and zeroes u. */
void egress_usage_reset(struct egress_usage *u);

struct egress_listener {
        struct egress_session *session;
        enum egress_listener_kind kind;
        int fd;
        struct sockaddr_in addr;      /* inside the sandbox */
        struct egress_target forward; /* FORWARD: where it leads */
};

struct egress_conn;

struct egress_session {
        struct egress *e;
        /* Under e->lock. */
        struct egress_session *prev, *next;
        bool closing;
        struct egress_listener *listeners;
        size_t n_listeners;

        pthread_mutex_t lock;
        pthread_cond_t idle; /* n_threads went to 0 */
        /* Under lock. */
        struct egress_info *info;
        struct egress_policy *policy;
        struct egress_conn *conns;
        unsigned n_open;         /* connections counted against max_connections */
        unsigned n_refusing;     /* connections past it, being refused */
        uint64_t bytes_used;     /* moved or granted, in + out, since open */
        uint64_t bytes_reserved; /* of bytes_used, granted to reads under way */
        pthread_cond_t budget;   /* bytes_reserved went down, a cut, or a new policy */
        unsigned budget_waiters;
        bool bytes_exhausted;
        struct egress_usage period, total;
};

struct egress_conn {
        struct egress *e;
        struct egress_session *s;
        const struct egress_listener *listener; /* borrowed: lives as long as s */
        struct egress_conn *prev, *next;        /* s->conns, then e->zombies */
        pthread_t thread;
        bool over_cap; /* past max_connections when accepted: refused once it names a target */
        uint64_t deadline_ns; /* the end of the handshake */

        /* The fd numbers are written under s->lock: the closer shuts them down. */
        int client;
        int upstream;
        bool cut;
        /* Why it ended early (cut, or the relay's linger ran out); the CLOSE event's reason. */
        char cut_reason[EGRESS_REASON_MAX];

        const char *via;
        struct egress_target target;
        char address[64]; /* the resolved address used, as text */
        bool opened;      /* the OPEN event went out: a CLOSE follows */
        uint64_t bytes_in, bytes_out;
        char reason[EGRESS_REASON_MAX]; /* the last refusal's or failure's reason */
};

struct egress {
        pthread_mutex_t lock;
        pthread_cond_t changed; /* pass moved on, or n_live went down */
        /* Under lock. */
        struct egress_session *sessions;
        struct egress_conn *zombies; /* finished threads the acceptor joins */
        unsigned n_live;             /* connection threads not yet finished */
        uint64_t pass;               /* acceptor batches completed */
        bool stopping;

        int epoll_fd;
        int wake_fd;  /* eventfd: zombies to join, a barrier, or stop */
        int spare_fd; /* given up to accept and drop a connection when out of fds */
        pthread_t acceptor;
        bool acceptor_running; /* started (egress_free joins it) */
        bool acceptor_done;    /* under lock: it has left its loop */

        uint32_t max_total;
        uint64_t connect_timeout_ms;
        uint64_t linger_ms;
        void (*on_event)(void *userdata, const struct egress_event *ev);
        void *userdata;

        pthread_mutex_t deny_lock;
        struct egress_denylist deny; /* under deny_lock */
};

/* conn.c: what the protocol handlers use. */

/* Reads at most size bytes from the client, waiting until c->deadline_ns. Returns the count,
 * 0 at EOF, -ETIMEDOUT, -ECANCELED when the connection was cut, or -errno. */
ssize_t egress_conn_read(struct egress_conn *c, void *buf, size_t size);
/* Writes all of buf to the client (a reply of ours), giving it EGRESS_HANDSHAKE_MS. Returns 0
 * or -errno. */
int egress_conn_write(struct egress_conn *c, const void *buf, size_t len);

/* Counts a refusal of c->target (or of no destination when c->target.host is ""), sends the
 * REFUSED event and keeps reason in c->reason. */
void egress_conn_refuse(struct egress_conn *c, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Checks c->target (caps, policy, forbidden addresses), resolves a name and connects to an
 * address it checked. Returns 0 with c->upstream connected, the OPEN event sent and the
 * connection counted; -EPERM when refused (egress_conn_refuse() was called); or another -errno
 * with c->reason saying what failed: -ENOENT (no such name), -EAGAIN (the lookup failed for
 * now), -ETIMEDOUT, -ECONNREFUSED, -EHOSTUNREACH, -ENETUNREACH, -ECANCELED (cut). */
int egress_conn_dial(struct egress_conn *c);

/* Relays c->client and c->upstream (relay.c) with every byte granted and counted against the
 * session, after sending to_upstream (counted too). response_head (http_response_head) and
 * request_body: for a plain HTTP request, else NULL. ret_client_written (may be NULL): bytes the
 * client got. Returns what egress_relay_run() does. */
int egress_conn_relay(struct egress_conn *c, const void *to_upstream, size_t to_upstream_len,
                      egress_head_fn response_head, struct http_body *request_body,
                      uint64_t *ret_client_written);

/* The profile's name (for messages) into buf. Returns buf. */
const char *egress_conn_profile(struct egress_conn *c, char *buf, size_t size);

/* relay.c */

struct egress_relay_ops {
        /* Room to move up to want bytes in dir; 0 stops the relay (a cap was reached, or the
         * connection was cut). The grant counts as moved until moved() gives the rest back. */
        size_t (*grant)(void *ctx, enum egress_dir dir, size_t want);
        void (*moved)(void *ctx, enum egress_dir dir, size_t granted, size_t n);
};

struct egress_relay {
        int client, upstream;
        /* Sent first, before anything read from the other side (already counted). */
        const void *to_upstream;
        size_t to_upstream_len;
        const void *to_client;
        size_t to_client_len;
        egress_head_fn response_head; /* NULL: bytes pass unchanged */
        /* Plain HTTP: where the request ends (to_upstream was fed to it already); what the
         * client sends after it is read and dropped. NULL: no end. */
        struct http_body *request_body;
        const struct egress_relay_ops *ops;
        void *ctx;
        /* Once the client has gone (closed or reset), how long the upstream may take to read
         * what is left before the relay ends anyway; > 0. */
        int linger_ms;
        /* Out: the relay ended because linger_ms ran out. */
        bool lingered;
        /* Out: bytes written to the client (a handler may still answer an error when 0). */
        uint64_t client_written;
};

/* Moves bytes both ways until both sides have closed (an EOF on one side is passed on as
 * shutdown(SHUT_WR) of the other), or with request_body, until the request has ended and the
 * upstream has closed. A reset reads as an EOF (what came before it goes on); a side that can
 * no longer be written to drops what waits for it while the other direction goes on. Returns
 * 0; -EDQUOT when ops->grant() said 0; -EPROTO when the upstream's response head was bad, too
 * large or missing, or the request's chunked body was not one; -ETIMEDOUT when the client had
 * gone and the upstream did not take the rest within linger_ms; or -errno (a reset before the
 * response head). */
int egress_relay_run(struct egress_relay *r);

/* The bytes by which relays' buffers have grown past their first size, now, over all relays
 * of the process; *peak (if not NULL) gets the most there has been. */
size_t egress_relay_grown(size_t *peak);

/* netns.c */

/* Enters the network namespace of the process behind pidfd from a short-lived thread, brings
 * its loopback up (with BIG TCP where the kernel has it: 512 KiB packets), adds the addresses
 * outside 127.0.0.0/8 to it, and makes a listening, non-blocking TCP socket on each of the n
 * addresses there; ret_fds gets them. Refuses (-EPERM) a namespace that is the caller's own.
 * Returns 0 or -errno with err set. */
int egress_netns_listen(int pidfd, const struct sockaddr_in *addrs, size_t n, int *ret_fds,
                        struct airlock_error *err);

/* http.c, socks5.c, conn.c: one connection's handshake and relay, in its thread. */
void egress_http_serve(struct egress_conn *c);
void egress_socks5_serve(struct egress_conn *c);
void egress_forward_serve(struct egress_conn *c);

/* egress.c */
void egress_emit(struct egress_conn *c, enum egress_event_type type, const char *reason);
/* Wakes the acceptor up (its batch ends, finished threads are joined). */
void egress_wake(struct egress *e);

/* session.c: under s->lock, cuts every connection of s (reason: for their CLOSE events, may be
 * NULL). */
void egress_session_cut_all(struct egress_session *s, const char *reason);
