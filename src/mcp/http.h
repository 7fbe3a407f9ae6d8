/* MCP's streamable HTTP transport for the daemon's /mcp route, independent of the HTTP
 * library: the API server hands over (method, headers, body) and sends back (status, headers,
 * body). POST carries one JSON-RPC message and is answered with application/json (no SSE
 * stream); initialize issues an Mcp-Session-Id that every later request must carry (missing:
 * 400, unknown: 404); DELETE ends the MCP session and its sandbox session at once (a POST of
 * it in flight answers promptly, see mcp_conn_close()); GET is 405, as no
 * server-initiated stream is offered. Each MCP session has its own airlock session. Host, Origin
 * and the bearer token are checked by the API server before this is called. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct mcp_http;
struct hub;
struct tools_backend;

#define MCP_HTTP_SESSIONS_MAX 256
#define MCP_HTTP_IDLE_MS (60ULL * 60 * 1000) /* an MCP session unused this long is dropped */
#define MCP_HTTP_HEADERS_MAX 4

/* Creates the transport on backend, its sessions offering hub's internal tools too (both
 * borrowed: they must outlive the transport; hub may be NULL). Returns 0 or -ENOMEM. Free
 * with mcp_http_free(). */
int mcp_http_new(struct tools_backend *backend, struct hub *hub, struct mcp_http **ret_http);

/* Ends every MCP session (and its sandbox session) and frees the transport. Call it after the
 * HTTP server stopped calling mcp_http_handle(). Accepts NULL, returns NULL. */
struct mcp_http *mcp_http_free(struct mcp_http *h);

/* Returns the value of a request header (case-insensitive name), or NULL. */
typedef const char *(*mcp_http_header_fn)(void *userdata, const char *name);

struct mcp_http_request {
        const char *method; /* "POST", "GET", "DELETE", ... */
        mcp_http_header_fn header;
        void *userdata;
        const char *body; /* borrowed; need not be NUL-terminated */
        size_t body_len;
};

struct mcp_http_header {
        const char *name; /* static */
        char value[96];
};

struct mcp_http_response {
        unsigned status;
        char *body; /* malloc()ed, or NULL for no body */
        size_t body_len;
        struct mcp_http_header
                headers[MCP_HTTP_HEADERS_MAX]; /* Content-Type, Mcp-Session-Id, Allow */
        size_t n_headers;
};

/* Handles one request to /mcp. Always fills *ret_resp (release with
 * mcp_http_response_done()) and returns 0, or -ENOMEM. Thread-safe; a tool call blocks the
 * calling thread until it ends. */
int mcp_http_handle(struct mcp_http *h, const struct mcp_http_request *req,
                    struct mcp_http_response *ret_resp);

void mcp_http_response_done(struct mcp_http_response *resp);

/* The number of live MCP sessions (for tests and metrics). */
size_t mcp_http_sessions(struct mcp_http *h);
