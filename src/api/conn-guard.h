/* Keeps clients that send nothing useful from holding connections. libmicrohttpd's own timeout
 * is an inactivity timeout, which a client defeats by sending a byte now and then; here every
 * connection is tracked through the phases of a request, with a deadline where the client is
 * the one expected to act:
 *
 *   headers  a new connection has request_timeout to deliver its first request's headers;
 *   body     once the headers are in, the body gets request_timeout plus one second per MiB
 *            it declared (Content-Length), so a large upload on a slow link still fits;
 *   active   the request is being handled or its reply sent: no deadline here (the handler
 *            and libmicrohttpd's inactivity timeout bound it);
 *   idle     between complete requests on a keep-alive connection: libmicrohttpd's
 *            keep-alive timeout (long) applies.
 *
 * A connection past its deadline is shut down (the socket, so libmicrohttpd sees the close and
 * frees it). And when the open connections near the limit, each new one makes room by closing
 * the oldest connection that is idle or still sending its headers (then one still sending its
 * body): a flood of half-sent or idle connections cannot keep a real client out, whatever
 * addresses it comes from. Connections being handled are never closed.
 *
 * The cap per client address works the same way: an address past it first loses its own
 * oldest idle or half-sent connection, and only when all of its connections are being served
 * is the newcomer refused. A client is never locked out by half-sent connections from its own
 * address (every client of a loopback listener shares 127.0.0.1). Nor by connections it has
 * closed: one being served whose client has hung up (gave up waiting, or read the whole reply
 * and closed before libmicrohttpd called the request complete) no longer counts, although
 * libmicrohttpd, which does not watch a connection while its request is handled, frees it only
 * once the handler returned and the reply was written. */
#pragma once

#include <microhttpd.h>
#include <stdint.h>

struct cidr;
struct conn_guard;

struct conn_guard_config {
        unsigned max_connections;   /* libmicrohttpd's hard limit */
        unsigned max_per_client;    /* per client IP address; 0 = no cap */
        const struct cidr *trusted; /* addresses exempt from that cap (borrowed), or NULL */
        size_t n_trusted;
        uint64_t request_timeout_ms; /* headers, and the base of the body's deadline */
};

int conn_guard_new(const struct conn_guard_config *cfg, struct conn_guard **ret);

/* MHD_OPTION_NOTIFY_CONNECTION's callback, cls = the guard. */
void conn_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);

/* The phases, reported by the server as a request moves on. declared = the body's
 * Content-Length, 0 when none or unknown. */
void conn_guard_body(struct MHD_Connection *conn, uint64_t declared);
void conn_guard_active(struct MHD_Connection *conn);
void conn_guard_idle(struct MHD_Connection *conn);

/* After libmicrohttpd stopped (every connection notified closed). Accepts NULL. */
struct conn_guard *conn_guard_free(struct conn_guard *g);
