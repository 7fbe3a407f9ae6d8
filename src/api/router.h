/* Routing: the request path as the client sent it (still percent-encoded) is matched against
 * the route table's patterns, segment by segment, and the parameters are decoded on the way.
 * Pure functions, no HTTP library: unit-tested in tests/unit/test-api.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define ROUTE_PATH_MAX 4096 /* a file path parameter, decoded, in bytes */
#define ROUTE_SEGMENT_MAX 255

struct api_request;
typedef int (*api_handler_fn)(struct api_request *req);

enum api_route_flags {
        /* Every error, the server's own included (401, 405, 413...), is in OpenAI's shape
         * {"error": {"message", "type", "param", "code"}}: the OpenAI-compatible routes. */
        API_ROUTE_OPENAI = 1u << 0,
        /* A multipart/form-data body is not buffered: its "file" part streams to a spool file
         * (upload.h) up to the daemon's upload limit, which replaces body_max for it. */
        API_ROUTE_UPLOAD = 1u << 1,
};

/* A route's inline part (optional): run on the event thread before the handler would go to a
 * worker, it answers what it can without waiting for anything (no lock another thread may hold
 * for long, no disk, no sandbox) and declines the rest. Returns 1 when it replied, 0 to hand
 * the request to the handler on a worker as usual, or -errno. It saves the two thread
 * hand-offs of a worker (docs/PERFORMANCE.md, "The hot path"). */
typedef int (*api_inline_fn)(struct api_request *req);

/* One row of the route table. pattern is a path of literal segments, "{id}" (one non-empty
 * segment), "{sub}" (a second one, e.g. a file's id) and, last only, "{path*}" (the rest of
 * the path, possibly empty). */
struct api_route {
        const char *method;
        const char *pattern;
        api_handler_fn handler;
        bool needs_auth;
        size_t body_max; /* largest request body accepted, in bytes */
        unsigned flags;  /* enum api_route_flags */
        api_inline_fn try_inline;
};

/* The parameters of a matched route, decoded; both point into the struct. */
struct route_params {
        char id[ROUTE_SEGMENT_MAX + 1];
        char sub[ROUTE_SEGMENT_MAX + 1];
        char path[ROUTE_PATH_MAX + 1];
        bool has_id;
        bool has_sub;
        bool has_path;
};

/* Percent-decodes src[0..len) into dst (of dst_size bytes, NUL-terminated). With plus_space
 * (query strings) '+' decodes to a space. Returns the decoded length, -EINVAL for a malformed
 * escape or an escaped NUL byte, -E2BIG when dst is too small. */
int percent_decode(const char *src, size_t len, bool plus_space, char *dst, size_t dst_size);

/* Checks a decoded path relative to /work: '/'-separated components that are not empty, "." or
 * "..", no NUL, no leading '/', each at most 255 bytes. "" is accepted only with allow_empty
 * (the /work directory itself). Returns 0 or -EINVAL with a reason in *ret_why (static). */
int route_check_file_path(const char *path, bool allow_empty, const char **ret_why);

/* Matches one raw path (before the query string, still percent-encoded) against one pattern.
 * A single trailing slash is ignored for patterns without "{path*}". Returns 1 on a match
 * (params filled), 0 when it does not match, -EINVAL for bad percent-encoding, -E2BIG for a
 * parameter too long. */
int route_match(const char *pattern, const char *raw_path, struct route_params *ret_params);

/* Finds the route for method and raw_path in the table. HEAD is matched as GET. Returns 0 with
 * *ret_route and *ret_params; -ENOENT when no pattern matches (404); -EOPNOTSUPP when a pattern
 * matches but not the method (405), with the allowed methods, comma-separated, in allow;
 * -EINVAL or -E2BIG as route_match() (400). */
int route_find(const struct api_route *routes, size_t n_routes, const char *method,
               const char *raw_path, const struct api_route **ret_route,
               struct route_params *ret_params, char *allow, size_t allow_size);
