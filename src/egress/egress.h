/* The egress proxy (docs/NETWORK.md): the only way out of a sandbox whose profile says
 * "network": {"mode": "allow", ...}. The sandbox keeps its own network namespace with nothing
 * but a loopback; the daemon puts listening sockets into that namespace (setns from a helper
 * thread, so the sockets belong to the sandbox's namespace while the daemon accepts on them)
 * and makes every upstream connection itself, from the host's namespace, after checking the
 * destination against the session's policy (policy.h):
 *
 *   - the name is resolved by the proxy (getaddrinfo), never by the sandbox; every resolved
 *     address is checked and the connection goes to an address that was checked (no second
 *     lookup, so DNS rebinding between check and connect changes nothing);
 *   - a refusal names the destination and the profile: an HTTP 403 with a text body for the
 *     HTTP proxy, SOCKS5 reply 0x02 for SOCKS, an immediate close for a forwarder; each one is
 *     counted, logged and given to the event callback (the audit log's egress.refusal);
 *   - per session: at most max_connections open at once and max_bytes in + out in all (past it
 *     new connections are refused and open ones closed, saying so in the event), so a flood in
 *     one session does not starve another; and a global cap over all sessions.
 *
 * Threading: one acceptor thread (epoll over every session's listeners) and one thread per
 * connection (blocking handshake, lookup and connect, then a relay of both directions). All
 * functions may be called from any thread. */
#pragma once

#include "base/error.h"
#include "egress/policy.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct egress;
struct egress_session;

enum egress_event_type {
        EGRESS_EVENT_OPEN,    /* a connection to an allowed destination was made */
        EGRESS_EVENT_CLOSE,   /* it ended: bytes_in/out are its totals */
        EGRESS_EVENT_REFUSED, /* a destination was refused (reason says why) */
};

struct egress_event {
        enum egress_event_type type;
        const char *session; /* the session's id */
        const char *tenant;
        const char *profile;
        const char *via;  /* "http", "connect", "socks5" or "forward" */
        const char *host; /* as asked for: a name or an address literal; "" (and port 0)
                           * when refused before it named one (a malformed request, a
                           * connection over a cap closed at once) */
        uint16_t port;
        const char *address; /* the resolved address used (text), or NULL */
        const char *reason;  /* REFUSED (and a CLOSE cut by a cap): why, for humans */
        uint64_t bytes_in;   /* upstream to sandbox */
        uint64_t bytes_out;  /* sandbox to upstream */
};

struct egress_options {
        struct egress_denylist deny;    /* copied */
        uint32_t max_connections_total; /* over all sessions; 0 = 4096 */
        uint64_t connect_timeout_ms;    /* 0 = 10 s */
        /* Once a connection's client has gone (closed or reset), how long the upstream may
         * take to read what the client sent before it is closed anyway; 0 = 30 s. */
        uint64_t linger_ms;
        /* Called from connection threads (and the acceptor, for a connection closed at once
         * over a cap); must be quick and thread-safe, and must not close sessions or free the
         * engine. May be NULL. */
        void (*on_event)(void *userdata, const struct egress_event *ev);
        void *userdata;
};

/* Starts the acceptor thread. Sets SIGPIPE to be ignored (a peer that went away is an EPIPE,
 * not the end of the process). Returns 0 or -errno with err set. Free with egress_free(), which
 * first closes every session still open. */
int egress_new(const struct egress_options *opts, struct egress **ret, struct airlock_error *err);
struct egress *egress_free(struct egress *e);

struct egress_session_info {
        const char *session; /* id, copied */
        const char *tenant;  /* copied; NULL = "default" */
        const char *profile; /* name, copied */
};

/* Puts the proxy's listeners into the network namespace of the process behind pidfd (the
 * sandbox's init, or a microVM's QEMU; the namespace must be one the daemon may setns into, and
 * never the daemon's own) and brings its loopback up: the HTTP proxy, the SOCKS5 endpoint and
 * the forwarders. layout is the profile's policy (the sandbox's /etc/hosts and Landlock ports
 * came from it: egress_policy_forwards() numbering, with the same net, must match); net is
 * where the named rules' forwarders listen (policy.h); policy is the session's own, equal to
 * layout or narrowed (copied): every connection is checked against policy, so a forwarder of a
 * rule the session narrowed away refuses. Returns 0 or -errno with err set (e.g. "cannot enter
 * the sandbox's network namespace: ..."). */
int egress_session_open(struct egress *e, int pidfd, const struct egress_policy *layout,
                        enum egress_forward_net net, const struct egress_policy *policy,
                        const struct egress_session_info *info, struct egress_session **ret,
                        struct airlock_error *err);

/* Renames the session (a pool member gets its id when handed out). Returns 0, or -ENOMEM with
 * the old names kept. */
int egress_session_set_info(struct egress_session *s, const struct egress_session_info *info);

/* Replaces the policy connections are checked against from now on (copied): a pool member
 * opened with its profile's policy takes its session's narrowed one when handed out. The
 * layout stays. Connections already open are not re-checked. Returns 0 or -ENOMEM (the old
 * policy stays). */
int egress_session_set_policy(struct egress_session *s, const struct egress_policy *policy);

/* Replaces the addresses no session may reach (copied): the daemon knows its listening
 * addresses only once its servers are bound, after the pools started. Returns 0 or -ENOMEM. */
int egress_set_denylist(struct egress *e, const struct egress_denylist *deny);

/* What the session did since the last take, and resets it: a new object
 *   {"connections": n, "refused": n, "bytes_in": n, "bytes_out": n,
 *    "destinations": [{"host", "port", "connections", "refused", "bytes_in", "bytes_out"}...]}
 * (destinations sorted by host then port, at most 64, then "destinations_omitted": n), or NULL
 * when out of memory. Bytes of a connection that spans two takes count where they moved. */
json_t *egress_session_take_usage(struct egress_session *s);

/* Totals since open (for /metrics and GET /v1/sessions/ID): same shape, without resetting. */
json_t *egress_session_totals(struct egress_session *s);

/* Closes the listeners, cuts every open connection and waits for their threads (a name lookup
 * in progress cannot be cut: it ends within the resolver's own timeout). Accepts NULL, returns
 * NULL. */
struct egress_session *egress_session_close(struct egress_session *s);
