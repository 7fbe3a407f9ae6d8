/* The HTTP/1.x the egress proxy reads and writes (pure, no I/O): a proxy request's head (CONNECT
 * host:port, or an absolute http:// URI), the head forwarded upstream for a plain request, and
 * the upstream response's head as the client gets it. Strict on purpose: a request that two
 * parsers could read two ways (request smuggling) is refused, not repaired. */
#pragma once

#include "base/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A head, up to and including its blank line; a request's request line; header fields. */
#define HTTP_HEAD_MAX (32u * 1024u)
#define HTTP_REQUEST_LINE_MAX (16u * 1024u)
#define HTTP_FIELDS_MAX 100u

struct http_field {
        const char *name, *value; /* borrowed from the parsed buffer; value without OWS */
        size_t name_len, value_len;
};

struct http_request {
        const char *method;
        size_t method_len;
        bool is_connect;
        unsigned minor; /* HTTP/1.minor */
        /* The destination: host without brackets (an IPv6 literal had them), and port. */
        const char *host;
        size_t host_len;
        bool host_bracketed;
        uint16_t port;
        /* Absolute form only: the authority as written (for Host) and path plus query
         * (path_len 0 means "/"). */
        const char *authority, *path;
        size_t authority_len, path_len;
        struct http_field fields[HTTP_FIELDS_MAX];
        size_t n_fields;
        size_t head_len; /* up to and including the blank line */
};

/* Where the head ends in buf[0..len): the length up to and including "\r\n\r\n", or 0 when it
 * has not ended yet. from: where to start looking (bytes before it were looked at already). */
size_t http_head_end(const char *buf, size_t len, size_t from);

/* Whether the first bytes of a request (its head not complete yet) can still become a request
 * line: 0, -EBADMSG with *ret_why set (binary bytes, a PROXY protocol preamble, TLS), or -E2BIG
 * when the request line is longer than HTTP_REQUEST_LINE_MAX. */
int http_request_prefix_check(const char *buf, size_t len, const char **ret_why);

/* Parses a complete request head (buf[0..len), len from http_head_end()). *req borrows buf.
 * Returns 0, -EBADMSG (400) or -E2BIG (431: too many header fields), with a reason for the
 * client in why (why_size bytes). */
int http_request_parse(const char *buf, size_t len, struct http_request *req, char *why,
                       size_t why_size);

/* The checks a plain (absolute-form) request passes before it is forwarded: one Host at most,
 * equal to the URI's authority; no Content-Length and Transfer-Encoding together, one
 * Content-Length, digits only; Transfer-Encoding, if any, exactly "chunked"; no Connection
 * option naming a framing header. Returns 0 or -EBADMSG with why. */
int http_request_check_forward(const struct http_request *req, char *why, size_t why_size);

/* Where a request's body ends (RFC 9112 section 6): after Content-Length bytes, after the last
 * chunk and trailers of a chunked body, or at once without either. The proxy forwards one
 * request per connection and nothing after it. */
struct http_body {
        bool chunked;
        bool done;
        unsigned state;  /* chunked: where in the framing */
        unsigned digits; /* of the chunk size being read */
        uint64_t left;   /* bytes of the body (or of the chunk) still to come */
};

/* Sets b up for req (which passed http_request_check_forward()). */
void http_body_init(struct http_body *b, const struct http_request *req);

/* Feeds the next len bytes the client sent. Returns how many of them belong to the request
 * (all of them, or fewer once its end was reached: b->done), or -EBADMSG for a chunked body
 * that is not one. */
ssize_t http_body_feed(struct http_body *b, const char *data, size_t len);

/* The head sent upstream for a plain request: the request line in origin form, the client's
 * fields less hop-by-hop ones (Connection and what it names, Keep-Alive, TE, Trailer, Upgrade)
 * and Proxy-*, a Host when the client sent none, and "Connection: close". Returns 0 or
 * -ENOMEM. */
int http_request_forward_head(const struct http_request *req, struct buf *out);

/* An egress_head_fn (egress-internal.h): the upstream's response heads, an interim (1xx) head
 * as it is, the final one without hop-by-hop fields and with "Connection: close". */
int http_response_head(const char *buf, size_t len, size_t *ret_consumed, struct buf *out,
                       bool *ret_final);
