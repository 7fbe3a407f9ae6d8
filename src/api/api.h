/* The HTTP API of DESIGN.md section 4 on libmicrohttpd: one event thread for every connection,
 * handlers on worker threads, request deadlines, bearer auth, Host/Origin checks, JSON bodies,
 * ndjson streaming. It owns no sessions: every route calls session.h. `airlock serve` creates
 * it and stops it on SIGTERM. */
#pragma once

#include "base/error.h"
#include "jail/jail.h"

#include <stdint.h>

struct api_server;
struct audit;
struct chat_gateway_config;
struct e2b;
struct hub;
struct openai;
struct responses;
struct session_manager;

struct api_config {
        const char *listen;             /* "HOST:PORT" or "unix:/PATH" */
        const char *token;              /* required; copied */
        const char *const *allow_hosts; /* NULL-terminated extra Host values, or NULL */
        struct session_manager *mgr;    /* borrowed; must outlive the server */
        enum jail_isolation mode;       /* reported by /healthz */
        /* POST /v1/chat/completions (docs/CHAT.md); borrowed, must outlive the server;
         * NULL = the gateway is off (503). */
        const struct chat_gateway_config *chat;
        /* /v1/files and /v1/containers (docs/RESPONSES.md); borrowed, must outlive the server;
         * NULL = those routes answer 503. Its upload limit applies to their uploads. */
        struct openai *openai;
        /* POST /v1/responses and its GET, DELETE, input_items (docs/RESPONSES.md); borrowed,
         * must outlive the server; NULL = those routes answer 503. */
        struct responses *responses;
        /* Internal tools (--mcp-config), offered at /mcp and GET /v1/tools; borrowed, must
         * outlive the server; NULL = none. */
        struct hub *hub;
        /* The E2B SDK's surface under /e2b/api and /e2b/sandbox (docs/E2B.md); borrowed, must
         * outlive the server; NULL = those routes are off (404). */
        struct e2b *e2b;
        /* GET /metrics (docs/METRICS.md): the scrapers' bearer token (copied; the API token is
         * accepted too), or NULL for the API token alone; and how many sessions get memory and
         * CPU series (the largest by memory; 0 = none). */
        const char *metrics_token;
        unsigned metrics_top_sessions;
        /* A metrics listener (--metrics-listen): GET /metrics without a token and no other
         * route; token may then be NULL, and nothing of the API is reachable through it. */
        bool metrics_only;
        /* Tenants' keys and quotas (docs/TENANTS.md); borrowed, must outlive the server; NULL =
         * the token is the only key. */
        struct tenant_registry *tenants;
        /* The audit log (audit.h; borrowed, must outlive the server): auth failures are written
         * to it, and each handler runs in an audit scope with its request id. NULL = none. */
        struct audit *audit;
        /* Connections (0 = the defaults below). */
        unsigned max_connections;            /* open at once (default 4096) */
        unsigned max_connections_per_client; /* from one IP address (default 512; UINT_MAX = no cap)
                                              */
        uint64_t request_timeout_ms;         /* headers, and a body's base deadline (10 s) */
        uint64_t keepalive_timeout_ms;       /* a connection idle between requests (5 min) */
        /* --trusted-proxies (borrowed): exempt from the cap per client, and their
         * X-Forwarded-For's last entry is the client in the log and the audit log. */
        const struct cidr *trusted_proxies;
        size_t n_trusted_proxies;
};

#define API_DEFAULT_MAX_CONNECTIONS 4096u
#define API_DEFAULT_MAX_CONNECTIONS_PER_CLIENT 512u
#define API_DEFAULT_REQUEST_TIMEOUT_MS 10000u
#define API_DEFAULT_KEEPALIVE_TIMEOUT_MS 300000u

/* Binds the listen address (a unix socket is made 0600 after a stale one is removed; its
 * directory must be ours and not writable by others) and starts serving. Returns 0 or -errno
 * with err set (-EADDRINUSE when another daemon holds the address). Free with
 * api_server_free(). */
int api_server_new(const struct api_config *cfg, struct api_server **ret_srv,
                   struct airlock_error *err);

/* "http://127.0.0.1:8080" (the bound port when 0 was asked) or "unix:/PATH". Borrowed. */
const char *api_server_url(const struct api_server *srv);

/* The TCP address the server listens on (its bound port when 0 was asked), for the egress
 * proxy's denylist. False for a unix socket (and NULL). */
struct sockaddr_storage;
bool api_server_sockaddr(const struct api_server *srv, struct sockaddr_storage *ret);

/* Stops accepting connections; requests that arrive on open connections get 503. The ones in
 * progress go on. */
void api_server_quiesce(struct api_server *srv);

/* Waits until the requests in progress have been answered (their cells ended), at most
 * timeout_ms. Returns 0, or -ETIMEDOUT with requests still running. */
int api_server_drain(struct api_server *srv, unsigned timeout_ms);

/* Closes every connection, waits for the handlers to return, removes the unix socket and frees
 * the server. Accepts NULL, returns NULL. Call it before session_manager_free(). */
struct api_server *api_server_free(struct api_server *srv);
