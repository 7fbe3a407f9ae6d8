/* The HTTP server: binds the listen address, runs libmicrohttpd on one epoll event thread and
 * takes each request through the same gate: Host/Origin, clean headers, auth, route, body
 * limit, then the handler on a worker thread (dispatch.h) while the connection is suspended,
 * and one log line. Idle and half-sent connections cost no thread; conn-guard.h gives them
 * deadlines and makes room when they pile up. The route table below is the whole API
 * surface. */
#include "api-internal.h"

#include "audit/audit.h"
#include "base/cidr.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "conn-guard.h"
#include "forward.h"
#include "header-check.h"
#include "listen.h"
#include "mcp/http.h"
#include "metrics/metrics.h"
#include "openai/openai.h"
#include "session/session.h"
#include "tenant/tenant.h"
#include "tools/tools.h"
#include "upload.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Handlers running at once, at most (each holds a worker thread while its cell runs); more
 * wait in the dispatch queue. */
#define WORKERS_MAX 1024
#define METRICS_WORKERS_MAX 2 /* a metrics listener: scrapes are short and rare */

static const struct api_route routes[] = {
        { "GET", "/healthz", api_handle_healthz, false, API_JSON_BODY_MAX },
        /* Readiness: up and under its session limit, not draining (routes-node.c). */
        { "GET", "/readyz", api_handle_readyz, false, API_JSON_BODY_MAX },
        { "GET", "/v1/node", api_handle_node, true, API_JSON_BODY_MAX },
        { "POST", "/v1/node/drain", api_handle_node_drain, true, API_JSON_BODY_MAX },
        /* Its own token (the metrics token or the API token), checked by the handler. */
        { "GET", "/metrics", api_handle_metrics, false, API_JSON_BODY_MAX },
        { "GET", "/v1/profiles", api_handle_profiles, true, API_JSON_BODY_MAX },
        { "GET", "/v1/executions", api_handle_executions, true, API_JSON_BODY_MAX },
        /* The dashboard: static, no data in it, so no token (docs/DASHBOARD.md). */
        { "GET", "/ui", api_handle_ui, false, API_JSON_BODY_MAX },
        { "GET", "/ui/{id}", api_handle_ui_asset, false, API_JSON_BODY_MAX },
        { "POST", "/execute", api_handle_execute_once, true, API_JSON_BODY_MAX },
        { "POST", "/v1/sessions", api_handle_session_create, true, API_JSON_BODY_MAX },
        { "GET", "/v1/sessions", api_handle_session_list, true, API_JSON_BODY_MAX },
        { "GET", "/v1/sessions/{id}", api_handle_session_get, true, API_JSON_BODY_MAX, 0,
          api_inline_session_get },
        { "DELETE", "/v1/sessions/{id}", api_handle_session_delete, true, API_JSON_BODY_MAX },
        { "PATCH", "/v1/sessions/{id}", api_handle_session_patch, true, API_JSON_BODY_MAX },
        { "POST", "/v1/sessions/{id}/execute", api_handle_session_execute, true,
          API_JSON_BODY_MAX },
        { "POST", "/v1/sessions/{id}/interrupt", api_handle_session_interrupt, true,
          API_JSON_BODY_MAX },
        { "GET", "/v1/sessions/{id}/contexts", api_handle_context_list, true, API_JSON_BODY_MAX },
        { "POST", "/v1/sessions/{id}/contexts", api_handle_context_create, true,
          API_JSON_BODY_MAX },
        { "DELETE", "/v1/sessions/{id}/contexts/{sub}", api_handle_context_delete, true,
          API_JSON_BODY_MAX },
        { "POST", "/v1/sessions/{id}/contexts/{sub}/restart", api_handle_context_restart, true,
          API_JSON_BODY_MAX },
        { "POST", "/v1/sessions/{id}/stop", api_handle_session_stop, true, API_JSON_BODY_MAX },
        { "POST", "/v1/sessions/{id}/resume", api_handle_session_resume, true, API_JSON_BODY_MAX },
        { "POST", "/v1/sessions/{id}/fork", api_handle_session_fork, true, API_JSON_BODY_MAX },
        { "GET", "/v1/sessions/{id}/files/{path*}", api_handle_file_get, true, API_JSON_BODY_MAX },
        { "PUT", "/v1/sessions/{id}/files/{path*}", api_handle_file_put, true, API_FILE_BODY_MAX },
        { "DELETE", "/v1/sessions/{id}/files/{path*}", api_handle_file_delete, true,
          API_JSON_BODY_MAX },
        { "POST", "/v1/chat/completions", api_handle_chat_completions, true, API_JSON_BODY_MAX },
        { "GET", "/v1/tools", api_handle_tools, true, API_JSON_BODY_MAX },
        { "POST", "/mcp", api_handle_mcp, true, API_JSON_BODY_MAX },
        { "DELETE", "/mcp", api_handle_mcp, true, API_JSON_BODY_MAX },
        { "GET", "/mcp", api_handle_mcp, true, API_JSON_BODY_MAX },
        /* OpenAI's Responses, Files and Containers APIs (docs/RESPONSES.md). */
        { "POST", "/v1/responses", api_handle_resp_create, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "GET", "/v1/responses/{id}", api_handle_resp_get, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "DELETE", "/v1/responses/{id}", api_handle_resp_delete, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "GET", "/v1/responses/{id}/input_items", api_handle_resp_items, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "POST", "/v1/files", api_handle_ofile_create, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI | API_ROUTE_UPLOAD },
        { "GET", "/v1/files", api_handle_ofile_list, true, API_JSON_BODY_MAX, API_ROUTE_OPENAI },
        { "GET", "/v1/files/{id}", api_handle_ofile_get, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "DELETE", "/v1/files/{id}", api_handle_ofile_delete, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "GET", "/v1/files/{id}/content", api_handle_ofile_content, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "POST", "/v1/containers", api_handle_container_create, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "GET", "/v1/containers", api_handle_container_list, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "GET", "/v1/containers/{id}", api_handle_container_get, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "DELETE", "/v1/containers/{id}", api_handle_container_delete, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "POST", "/v1/containers/{id}/files", api_handle_cfile_create, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI | API_ROUTE_UPLOAD },
        { "GET", "/v1/containers/{id}/files", api_handle_cfile_list, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "GET", "/v1/containers/{id}/files/{sub}", api_handle_cfile_get, true, API_JSON_BODY_MAX,
          API_ROUTE_OPENAI },
        { "DELETE", "/v1/containers/{id}/files/{sub}", api_handle_cfile_delete, true,
          API_JSON_BODY_MAX, API_ROUTE_OPENAI },
        { "GET", "/v1/containers/{id}/files/{sub}/content", api_handle_cfile_content, true,
          API_JSON_BODY_MAX, API_ROUTE_OPENAI },
        /* The E2B SDK's control plane and sandbox daemons (docs/E2B.md): their own auth (X-API-KEY,
         * the sandbox's access token) and error shapes; what is not offered says so. */
        { "POST", "/e2b/api/sandboxes", api_handle_e2b_create, false, API_JSON_BODY_MAX },
        { "POST", "/e2b/api/v2/sandboxes", api_handle_e2b_create, false, API_JSON_BODY_MAX },
        { "GET", "/e2b/api/sandboxes", api_handle_e2b_list, false, API_JSON_BODY_MAX },
        { "GET", "/e2b/api/v2/sandboxes", api_handle_e2b_list, false, API_JSON_BODY_MAX },
        { "GET", "/e2b/api/sandboxes/{id}", api_handle_e2b_get, false, API_JSON_BODY_MAX },
        { "DELETE", "/e2b/api/sandboxes/{id}", api_handle_e2b_kill, false, API_JSON_BODY_MAX },
        { "POST", "/e2b/api/sandboxes/{id}/pause", api_handle_e2b_pause, false, API_JSON_BODY_MAX },
        { "POST", "/e2b/api/sandboxes/{id}/timeout", api_handle_e2b_timeout, false,
          API_JSON_BODY_MAX },
        { "POST", "/e2b/api/sandboxes/{id}/resume", api_handle_e2b_connect, false,
          API_JSON_BODY_MAX },
        { "POST", "/e2b/api/sandboxes/{id}/connect", api_handle_e2b_connect, false,
          API_JSON_BODY_MAX },
        { "POST", "/e2b/api/v2/sandboxes/{id}/connect", api_handle_e2b_connect, false,
          API_JSON_BODY_MAX },
        { "GET", "/e2b/sandbox/health", api_handle_e2b_health, false, API_JSON_BODY_MAX },
        { "GET", "/e2b/sandbox/files", api_handle_e2b_file_get, false, API_JSON_BODY_MAX },
        { "POST", "/e2b/sandbox/files", api_handle_e2b_file_post, false, API_FILE_BODY_MAX },
        { "POST", "/e2b/sandbox/execute", api_handle_e2b_execute, false, API_JSON_BODY_MAX },
        { "POST", "/e2b/sandbox/contexts", api_handle_e2b_context_create, false,
          API_JSON_BODY_MAX },
        { "GET", "/e2b/sandbox/contexts", api_handle_e2b_context_list, false, API_JSON_BODY_MAX },
        { "DELETE", "/e2b/sandbox/contexts/{id}", api_handle_e2b_context_delete, false,
          API_JSON_BODY_MAX },
        { "POST", "/e2b/sandbox/contexts/{id}/restart", api_handle_e2b_context_restart, false,
          API_JSON_BODY_MAX },
        { "POST", "/e2b/sandbox/filesystem.Filesystem/{id}", api_handle_e2b_filesystem, false,
          API_JSON_BODY_MAX },
        { "POST", "/e2b/sandbox/process.Process/{id}", api_handle_e2b_process, false,
          API_JSON_BODY_MAX },
        { "GET", "/e2b/api/{path*}", api_handle_e2b_api_other, false, API_JSON_BODY_MAX },
        { "POST", "/e2b/api/{path*}", api_handle_e2b_api_other, false, API_JSON_BODY_MAX },
        { "PUT", "/e2b/api/{path*}", api_handle_e2b_api_other, false, API_JSON_BODY_MAX },
        { "PATCH", "/e2b/api/{path*}", api_handle_e2b_api_other, false, API_JSON_BODY_MAX },
        { "DELETE", "/e2b/api/{path*}", api_handle_e2b_api_other, false, API_JSON_BODY_MAX },
        { "GET", "/e2b/sandbox/{path*}", api_handle_e2b_sandbox_other, false, API_JSON_BODY_MAX },
        { "POST", "/e2b/sandbox/{path*}", api_handle_e2b_sandbox_other, false, API_JSON_BODY_MAX },
        { "PUT", "/e2b/sandbox/{path*}", api_handle_e2b_sandbox_other, false, API_JSON_BODY_MAX },
        { "PATCH", "/e2b/sandbox/{path*}", api_handle_e2b_sandbox_other, false, API_JSON_BODY_MAX },
        { "DELETE", "/e2b/sandbox/{path*}", api_handle_e2b_sandbox_other, false,
          API_JSON_BODY_MAX },
};

/* A metrics listener (--metrics-listen) serves this alone: no route of it reaches a session. */
static const struct api_route metrics_routes[] = {
        { "GET", "/metrics", api_handle_metrics, false, API_JSON_BODY_MAX },
};

/* Bytes a multipart body may carry beyond its file: boundaries, part headers, small fields. */
#define UPLOAD_FRAMING_MAX (64u * 1024u)

/* Whether errors on path are in OpenAI's shape: it is below the first two segments of an
 * API_ROUTE_OPENAI route ("/v1/containers/..."), whether or not a route matches it, so that
 * an OpenAI client gets its shape for a 404 or 405 there too. */
static bool path_is_openai(const char *path)
{
        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                const char *p = routes[i].pattern, *second;
                size_t n;

                if (!(routes[i].flags & API_ROUTE_OPENAI))
                        continue;
                second = strchr(p + 1, '/');
                n = second ? (size_t) (strchrnul(second + 1, '/') - p) : strlen(p);
                if (strncmp(path, p, n) == 0 && (path[n] == '\0' || path[n] == '/'))
                        return true;
        }
        return false;
}

static struct api_request *request_free(struct api_request *req)
{
        if (!req)
                return NULL;
        tenant_unref(req->tenant);
        free(req->raw_path);
        free(req->body);
        api_upload_free(req->upload);
        free(req);
        return NULL;
}

/* The raw path for the log line: printable ASCII only, anything else as %XX, so a client
 * cannot forge log fields or lines. */
static void log_path(const char *path, char *buf, size_t size)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t o = 0;

        for (const unsigned char *p = (const unsigned char *) path; *p && o + 4 < size; p++) {
                if (*p > 0x20 && *p < 0x7f && *p != '"' && *p != '\\') {
                        buf[o++] = (char) *p;
                } else {
                        buf[o++] = '%';
                        buf[o++] = hex[*p >> 4];
                        buf[o++] = hex[*p & 15];
                }
        }
        buf[o] = '\0';
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct api_server *srv = cls;
        struct api_request *req = *con_cls;
        char path[512], method[80];

        conn_guard_idle(conn);
        if (!req)
                return;
        /* Route templates, never raw paths: an id must not become a label. */
        if (!srv->metrics_only)
                metrics_http_request(req->route ? (size_t) (req->route - srv->routes)
                                                : METRICS_HTTP_UNMATCHED,
                                     req->status);
        if (log_get_level() <= LOG_INFO) {
                log_path(req->raw_path ? req->raw_path : "", path, sizeof(path));
                log_path(req->method, method, sizeof(method));
                fprintf(stderr, "level=info req=%s method=%s path=\"%s\" status=%u ms=%.1f%s%s%s\n",
                        req->id, method, path, req->status,
                        (double) (now_ns() - req->start_ns) / 1e6, req->client[0] ? " client=" : "",
                        req->client,
                        toe == MHD_REQUEST_TERMINATED_COMPLETED_OK   ? ""
                        : toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ? " end=client-closed"
                                                                     : " end=aborted");
        }
        *con_cls = request_free(req);
        atomic_fetch_sub(&srv->in_flight, 1);
}

/* An auth failure's audit line: who (the peer address), where (method and path, escaped as in
 * the log line) and why: "missing", "malformed" or "invalid". Never the token presented, which
 * may be a real key sent to the wrong daemon. The tenant is unknown: null. */
/* The socket's peer as 16 bytes (IPv4 mapped). Returns false for a unix socket. */
static bool peer_ip(struct MHD_Connection *conn, uint8_t ip[16])
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;

        memset(ip, 0, 16);
        if (sa && sa->sa_family == AF_INET) {
                ip[10] = ip[11] = 0xff;
                memcpy(ip + 12, &((const struct sockaddr_in *) sa)->sin_addr, 4);
                return true;
        }
        if (sa && sa->sa_family == AF_INET6) {
                memcpy(ip, &((const struct sockaddr_in6 *) sa)->sin6_addr, 16);
                return true;
        }
        return false;
}

/* Behind a trusted proxy, the client is the last entry of X-Forwarded-For (the one the proxy
 * added itself; earlier ones are whatever the client claimed). Only an address is taken. */
static void trusted_client(struct api_request *req)
{
        const char *xff, *last;
        uint8_t ip[16];
        size_t n;

        if (!req->srv->n_trusted || !peer_ip(req->conn, ip) ||
            !cidr_list_match(req->srv->trusted, req->srv->n_trusted, ip))
                return;
        xff = api_header(req, "X-Forwarded-For");
        if (!xff)
                return;
        last = strrchr(xff, ',');
        last = last ? last + 1 : xff;
        last += strspn(last, " \t");
        n = strspn(last, "0123456789abcdefABCDEF.:");
        if (n == 0 || n >= sizeof(req->client) || last[n + strspn(last + n, " \t")] != '\0')
                return;
        memcpy(req->client, last, n);
        req->client[n] = '\0';
        /* An address, not merely its characters ("1.2.3", "::::" name nobody). */
        if (inet_pton(AF_INET, req->client, ip) != 1 && inet_pton(AF_INET6, req->client, ip) != 1)
                req->client[0] = '\0';
}

void api_client_address(struct api_request *req, char *buf, size_t size)
{
        const union MHD_ConnectionInfo *ci;

        (void) snprintf(buf, size, "unix");
        ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (req->client[0])
                (void) snprintf(buf, size, "%s", req->client);
        else if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
                (void) inet_ntop(AF_INET, &((const struct sockaddr_in *) ci->client_addr)->sin_addr,
                                 buf, (socklen_t) size);
        else if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET6)
                (void) inet_ntop(AF_INET6,
                                 &((const struct sockaddr_in6 *) ci->client_addr)->sin6_addr, buf,
                                 (socklen_t) size);
}

void api_audit_auth_failure(struct api_request *req, const char *reason)
{
        char addr[INET6_ADDRSTRLEN + 8], path[512];

        if (!req->srv->audit)
                return;
        api_client_address(req, addr, sizeof(addr));
        log_path(req->raw_path ? req->raw_path : "", path, sizeof(path));
        audit_emit(req->srv->audit, "auth.failure", NULL, NULL, req->id,
                   json_pack("{s:s, s:o, s:s, s:s}", "remote", addr, "method",
                             audit_string(req->method), "route", path, "reason", reason));
}

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
        unsigned *n = cls;

        (void) kind;
        (void) value;
        if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
                (*n)++;
        return MHD_YES;
}

/* 413 for a body too large to forward (API_FORWARD_BODY_MAX), naming where to send it. */
static int too_large_to_forward(struct api_request *req)
{
        return api_reply_error(req, MHD_HTTP_CONTENT_TOO_LARGE, "body",
                               "the request body is larger than %u MiB, the most a node forwards "
                               "to another (this one is for node %s): send it through the front "
                               "door, or to node %s itself",
                               API_FORWARD_BODY_MAX >> 20, req->forward->name, req->forward->name);
}

/* 400, 401, 403 and the routing errors, decided from the headers alone. mhd_method is the
 * access handler's own pointer (header-check.h needs it). Returns 1 when the request may go
 * on, 0 when a reply was queued, -errno when none could be. */
static int request_check(struct api_request *req, const char *mhd_method)
{
        struct api_server *srv = req->srv;
        const char *host, *origin, *auth, *token, *cl, *bad_header, *why;
        unsigned long long declared;
        char allow[128], *end;
        bool upload;
        unsigned n_host = 0;
        size_t token_len;
        int r;

        if (atomic_load(&srv->stopping)) {
                r = api_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, NULL,
                                    "the daemon is shutting down");
                return r < 0 ? r : 0;
        }
        trusted_client(req);

        /* A NUL hides what follows it from every check below (a token compared up to the NUL
         * would pass with junk after it); control bytes have no place in a header either. */
        if (api_headers_check(req->conn, mhd_method, &bad_header, &why) < 0) {
                r = api_reply_error_extra(req, MHD_HTTP_BAD_REQUEST, NULL,
                                          json_pack("{s:s}", "header", bad_header), "refused: %s",
                                          why);
                return r < 0 ? r : 0;
        }

        /* DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends
         * "Host: evil.example:8080"; a cross-site form or fetch sends its Origin. */
        if (srv->check_host) {
                /* Two Host headers could mean two things to two parsers (RFC 9112 3.2). */
                (void) MHD_get_connection_values(req->conn, MHD_HEADER_KIND, count_host, &n_host);
                if (n_host > 1) {
                        r = api_reply_error_extra(req, MHD_HTTP_BAD_REQUEST, NULL,
                                                  json_pack("{s:s}", "header", "Host"),
                                                  "more than one Host header");
                        return r < 0 ? r : 0;
                }
                host = api_header(req, MHD_HTTP_HEADER_HOST);
                if (!host_allow_check_host(&srv->allow, host)) {
                        r = api_reply_error_extra(
                                req, MHD_HTTP_FORBIDDEN, NULL, json_pack("{s:s}", "header", "Host"),
                                "Host '%.200s' is not allowed: use the address the daemon "
                                "listens on, or start it with --allow-host",
                                host ? host : "(missing)");
                        return r < 0 ? r : 0;
                }
                origin = api_header(req, "Origin");
                if (origin && !host_allow_check_origin(&srv->allow, origin)) {
                        r = api_reply_error_extra(req, MHD_HTTP_FORBIDDEN, NULL,
                                                  json_pack("{s:s}", "header", "Origin"),
                                                  "Origin '%.200s' is not allowed: browsers "
                                                  "may not drive this daemon from other sites",
                                                  origin);
                        return r < 0 ? r : 0;
                }
        }

        r = route_find(srv->routes, srv->n_routes, req->method, req->raw_path, &req->route,
                       &req->params, allow, sizeof(allow));
        req->openai_errors = r == 0 ? (req->route->flags & API_ROUTE_OPENAI) != 0
                                    : path_is_openai(req->raw_path);

        /* A metrics listener has no token: its one route needs none, the rest are 404. */
        if (!srv->metrics_only && !(r == 0 && !req->route->needs_auth)) {
                auth = api_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
                if (!auth || api_bearer_parse(auth, &token, &token_len) < 0 ||
                    api_key_tenant(srv, token, token_len, &req->tenant) < 0) {
                        api_audit_auth_failure(req, !auth ? "missing"
                                                    : api_bearer_parse(auth, &token, &token_len) < 0
                                                            ? "malformed"
                                                            : "invalid");
                        r = api_reply_error_header(
                                req, MHD_HTTP_UNAUTHORIZED, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"airlock\"", "missing or invalid bearer token");
                        return r < 0 ? r : 0;
                }
        }

        switch (r) {
        case 0:
                break;
        case -ENOENT:
                r = api_reply_error(req, MHD_HTTP_NOT_FOUND, NULL, "no such route: %s %.200s",
                                    req->method, req->raw_path);
                return r < 0 ? r : 0;
        case -EOPNOTSUPP:
                r = api_reply_error_header(req, MHD_HTTP_METHOD_NOT_ALLOWED, MHD_HTTP_HEADER_ALLOW,
                                           allow, "method %s is not allowed here; allowed: %s",
                                           req->method, allow);
                return r < 0 ? r : 0;
        case -E2BIG:
                r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "path",
                                    "a segment of the URL path is too long");
                return r < 0 ? r : 0;
        default:
                r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "path",
                                    "the URL path has a malformed percent-escape or an escaped "
                                    "NUL byte");
                return r < 0 ? r : 0;
        }

        /* Another node's object goes there (forward.h); its body, an upload's too, is kept
         * as it came. */
        r = api_forward_decide(req);
        if (r < 0)
                return r;
        if (r == 2)
                return 0;

        req->body_max = req->route->body_max;
        upload = (req->route->flags & API_ROUTE_UPLOAD) && srv->openai &&
                 api_upload_is_multipart(api_header(req, MHD_HTTP_HEADER_CONTENT_TYPE));
        if (upload)
                req->body_max = openai_upload_max(srv->openai) + UPLOAD_FRAMING_MAX;
        /* A forwarded body is held in memory until the peer takes it: at most a session file's
         * size, so misrouted 512 MiB uploads cannot add up on a node. The front door sends an
         * upload straight to the node it names. */
        if (req->forward) {
                upload = false;
                if (req->body_max > API_FORWARD_BODY_MAX)
                        req->body_max = API_FORWARD_BODY_MAX;
        }
        cl = api_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
        errno = 0;
        declared = cl ? strtoull(cl, &end, 10) : 0;
        if (!cl || errno != 0 || *end != '\0')
                declared = 0;
        /* Refused before a byte of the body is read: a 10 GiB upload costs nothing. */
        if (declared > req->body_max) {
                if (req->forward) {
                        r = too_large_to_forward(req);
                        return r < 0 ? r : 0;
                }
                r = upload ? api_reply_error(req, MHD_HTTP_CONTENT_TOO_LARGE, "file",
                                             "the upload (%llu bytes) is larger than the limit "
                                             "of %llu bytes (airlock serve --max-upload)",
                                             declared,
                                             (unsigned long long) openai_upload_max(srv->openai))
                           : api_reply_error(req, MHD_HTTP_CONTENT_TOO_LARGE, "body",
                                             "the request body (%llu bytes) is larger than the "
                                             "limit of %zu MiB",
                                             declared, req->body_max >> 20);
                return r < 0 ? r : 0;
        }
        if (upload) {
                r = api_upload_new(req->conn, srv->openai, openai_upload_max(srv->openai),
                                   &req->upload);
                if (r == -EINVAL) {
                        r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "file",
                                            "a multipart/form-data body needs a boundary in its "
                                            "Content-Type");
                        return r < 0 ? r : 0;
                }
                if (r < 0)
                        return log_error_errno(r, "req=%s cannot spool an upload", req->id);
        } else if (declared > 0) {
                req->body = malloc((size_t) declared + 1);
                if (!req->body)
                        return -ENOMEM;
                req->body_size = (size_t) declared + 1;
        }
        if (declared > 0)
                conn_guard_body(req->conn, declared);
        return 1;
}

/* Appends a piece of the body; past body_max the request is marked and nothing more is kept,
 * so memory never exceeds the limit whatever the client sends. */
static void request_append(struct api_request *req, const char *data, size_t len)
{
        if (req->body_too_large)
                return;
        if (len > req->body_max - req->body_len) {
                req->body_too_large = true;
                free(req->body);
                req->body = NULL;
                req->body_len = 0;
                return;
        }
        if (req->body_len + len + 1 > req->body_size) {
                size_t size = req->body_size ? req->body_size : 65536;
                char *p;

                while (size < req->body_len + len + 1)
                        size *= 2;
                if (size > req->body_max + 1)
                        size = req->body_max + 1;
                p = realloc(req->body, size);
                if (!p) {
                        /* Treated like an oversized body: refused, never half-processed. */
                        req->body_too_large = true;
                        free(req->body);
                        req->body = NULL;
                        req->body_len = 0;
                        return;
                }
                req->body = p;
                req->body_size = size;
        }
        memcpy(req->body + req->body_len, data, len);
        req->body_len += len;
        req->body[req->body_len] = '\0';
}

int api_key_tenant(struct api_server *srv, const char *key, size_t len, struct tenant **ret)
{
        /* The token first: the single-token mode costs what it always did. */
        if (api_token_equal(srv->token, key, len)) {
                *ret = tenant_ref(tenant_default());
                return 0;
        }
        return tenant_registry_resolve(srv->tenants, key, len, ret);
}

void api_scope_init(struct api_scope *s, struct api_request *req)
{
        s->srv = req->srv;
        s->tenant = tenant_ref(req->tenant);
        (void) snprintf(s->request_id, sizeof(s->request_id), "%s", req->id);
}

void api_scope_done(struct api_scope *s)
{
        s->tenant = tenant_unref(s->tenant);
}

void api_scope_enter(struct api_scope *s)
{
        s->audit = (struct audit_scope){ .audit = s->srv->audit,
                                         .tenant = s->tenant ? s->tenant->name : TENANT_DEFAULT,
                                         .request_id = s->request_id };
        tenant_scope_set(s->tenant);
        audit_scope_enter(&s->audit);
}

void api_scope_leave(void)
{
        audit_scope_leave();
        tenant_scope_set(NULL);
}

void api_suspended(struct api_server *srv)
{
        atomic_fetch_add(&srv->suspended, 1);
}

void api_resumed(struct api_server *srv)
{
        atomic_fetch_sub(&srv->suspended, 1);
}

/* The scopes a handler runs in: the session manager checks ownership and quotas against the
 * tenant (tenant.h); the audit lines of the request carry its name and request id. Left with
 * api_scope_leave(). */
static void handler_scope_enter(struct api_request *req)
{
        tenant_scope_set(req->tenant);
        req->audit_scope = (struct audit_scope){
                .audit = req->srv->audit,
                .tenant = req->tenant ? req->tenant->name : TENANT_DEFAULT,
                .request_id = req->id,
        };
        audit_scope_enter(&req->audit_scope);
}

/* On the event thread: the route's inline part (router.h), in the scopes a handler runs in.
 * Returns 1 when it replied (or failed and an error went out), 0 when it declined. */
static int run_inline(struct api_request *req)
{
        int r;

        handler_scope_enter(req);
        r = req->route->try_inline(req);
        api_scope_leave();
        if (r < 0 && !req->replied) {
                log_error_errno(r, "req=%s inline handler failed", req->id);
                (void) api_reply_error(req, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL,
                                       "internal error: %s", strerror(-r));
        }
        return r != 0 || req->replied;
}

/* On a worker: the handler, which queues its reply on the suspended connection, then the
 * resume that sends it. A handler that queued nothing has the connection closed (the access
 * handler is called again and says no). */
static void run_handler(struct dispatch_job *job)
{
        struct api_request *req =
                (struct api_request *) ((char *) job - offsetof(struct api_request, job));
        struct api_server *srv = req->srv;
        struct MHD_Connection *conn = req->conn;
        int r;

        handler_scope_enter(req);
        r = req->forward ? api_forward_run(req) : req->route->handler(req);
        api_scope_leave();
        if (r < 0 && !req->replied) {
                log_error_errno(r, "req=%s handler failed", req->id);
                (void) api_reply_error(req, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL,
                                       "internal error: %s", strerror(-r));
        }
        /* An upload's spool file is gone before a byte of the answer goes out. */
        req->upload = api_upload_free(req->upload);
        /* From here req belongs to the event thread again, which may free it at once. */
        MHD_resume_connection(conn);
        api_resumed(srv);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        struct api_server *srv = cls;
        struct api_request *req = *con_cls;
        int r;

        (void) version;
        if (!req) {
                req = calloc(1, sizeof(*req));
                if (!req)
                        return MHD_NO;
                atomic_fetch_add(&srv->in_flight, 1);
                req->srv = srv;
                req->conn = conn;
                (void) snprintf(req->method, sizeof(req->method), "%s", method);
                req->start_ns = now_ns();
                req->raw_path = strdup(url);
                (void) snprintf(req->id, sizeof(req->id), "%08" PRIx32 "%08" PRIx32,
                                srv->req_prefix, (uint32_t) atomic_fetch_add(&srv->next_req, 1));
                *con_cls = req;
                if (!req->raw_path)
                        return MHD_NO;
                conn_guard_body(conn, 0);
                r = request_check(req, method);
                return r < 0 ? MHD_NO : MHD_YES;
        }

        if (*upload_data_size > 0) {
                /* libmicrohttpd 0.9.75 cannot queue a reply before the upload is complete, so
                 * a body found too large while it streams in (chunked, no Content-Length) is
                 * read and dropped, then answered 413; a client that goes on sending past
                 * API_DRAIN_MAX more has its connection closed instead. */
                req->received += *upload_data_size;
                if (req->replied)
                        ;
                else if (!req->upload)
                        request_append(req, upload_data, *upload_data_size);
                else if (req->received > req->body_max)
                        req->body_too_large = true;
                else
                        api_upload_feed(req->upload, upload_data, *upload_data_size);
                *upload_data_size = 0;
                if (req->body_too_large && req->received - req->body_max > API_DRAIN_MAX)
                        return MHD_NO;
                if (req->upload && api_upload_drained_past(req->upload, API_DRAIN_MAX))
                        return MHD_NO;
                return MHD_YES;
        }
        if (req->replied)
                return MHD_YES;
        if (req->dispatched)
                return MHD_NO; /* resumed without a reply: nothing could be queued */
        conn_guard_active(conn);
        if (req->upload) {
                unsigned status;
                const char *why;
                char msg[512];

                if (!req->body_too_large)
                        api_upload_finish(req->upload);
                if (api_upload_failed(req->upload, &status, &why) || req->body_too_large) {
                        /* Its spool file goes before the answer does. */
                        if (!req->body_too_large)
                                (void) snprintf(msg, sizeof(msg), "%s", why);
                        req->upload = api_upload_free(req->upload);
                        if (!req->body_too_large) {
                                r = api_reply_error(req, status, "file", "%s", msg);
                                return r < 0 ? MHD_NO : MHD_YES;
                        }
                }
        }
        if (req->body_too_large) {
                r = req->forward ? too_large_to_forward(req)
                                 : api_reply_error(req, MHD_HTTP_CONTENT_TOO_LARGE, "body",
                                                   "the request body is larger than the limit "
                                                   "of %zu MiB",
                                                   req->body_max >> 20);
                return r < 0 ? MHD_NO : MHD_YES;
        }

        /* What can be answered at once is, here: no hand-off to a worker and back. */
        if (!req->forward && req->route && req->route->try_inline && run_inline(req))
                return req->replied ? MHD_YES : MHD_NO;
        req->dispatched = true;
        req->job.run = run_handler;
        api_suspended(srv);
        MHD_suspend_connection(conn);
        dispatch_submit(srv->workers, &req->job);
        return MHD_YES;
}

/* Identity: the router decodes the path itself, segment by segment (router.c), and handlers
 * decode the query values they read. */
static size_t unescape_none(void *cls, struct MHD_Connection *conn, char *s)
{
        (void) cls;
        (void) conn;
        return strlen(s);
}

/* libmicrohttpd's messages. A client that closes mid-request is routine (and a flood of them
 * is an attack the guard handles): debug level. The rest are warnings, at most
 * MHD_LOG_BURST per MHD_LOG_WINDOW_S, so that no client can flood the log through them. */
#define MHD_LOG_BURST 20
#define MHD_LOG_WINDOW_S 10

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        static uint64_t window_start;
        static unsigned in_window, suppressed;
        unsigned dropped = 0;
        bool show;
        char buf[512];
        size_t n;

        (void) cls;
        (void) vsnprintf(buf, sizeof(buf), fmt, ap);
        n = strlen(buf);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                buf[--n] = '\0';
        if (strstr(buf, "connection closure") || strstr(buf, "Connection reset") ||
            strstr(buf, "closed by remote")) {
                log_debug("libmicrohttpd: %s", buf);
                return;
        }
        pthread_mutex_lock(&lock);
        if (now_ns() - window_start > MHD_LOG_WINDOW_S * 1000000000ull) {
                window_start = now_ns();
                in_window = 0;
                dropped = suppressed;
                suppressed = 0;
        }
        show = in_window++ < MHD_LOG_BURST;
        if (!show)
                suppressed++;
        pthread_mutex_unlock(&lock);
        if (dropped)
                log_warn("libmicrohttpd: %u more messages were not logged", dropped);
        if (show)
                log_warn("libmicrohttpd: %s", buf);
}

static int bind_unix(struct api_server *srv, const char *path, struct airlock_error *err)
{
        _cleanup_free_ char *dircopy = strdup(path), *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *dir;
        struct stat st;

        if (!dircopy)
                return -ENOMEM;
        dir = dirname(dircopy);
        if (stat(dir, &st) < 0)
                return airlock_error_set(err, -errno, "--listen: cannot use directory '%s': %s",
                                         dir, strerror(errno));
        /* Whoever can write the directory can replace the socket with their own. */
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
                return airlock_error_set(err, -EPERM,
                                         "--listen: the socket's directory '%s' must be owned by "
                                         "uid %u and not writable by group or others",
                                         dir, (unsigned) geteuid());

        if (lstat(path, &st) == 0) {
                _cleanup_close_ int probe = -EBADF;

                if (!S_ISSOCK(st.st_mode))
                        return airlock_error_set(err, -EEXIST,
                                                 "--listen: '%s' exists and is not a socket", path);
                probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (probe < 0)
                        return -errno;
                strcpy(sa.sun_path, path);
                if (connect(probe, (struct sockaddr *) &sa, sizeof(sa)) == 0)
                        return airlock_error_set(err, -EADDRINUSE,
                                                 "--listen: another daemon is listening on '%s'",
                                                 path);
                if (errno != ECONNREFUSED)
                        return airlock_error_set(err, -errno, "--listen: cannot probe '%s': %s",
                                                 path, strerror(errno));
                log_info("removing the stale socket '%s' left by a daemon that is gone", path);
                if (unlink(path) < 0)
                        return airlock_error_set(err, -errno, "--listen: cannot remove '%s': %s",
                                                 path, strerror(errno));
        }

        /* Bound under a temporary name, restricted to 0600, then renamed into place: nobody can
         * connect while the socket still has the umask's permissions. */
        if (asprintf(&tmp, "%s.%d.tmp", path, (int) getpid()) < 0)
                return -ENOMEM;
        if (strlen(tmp) >= sizeof(sa.sun_path))
                return airlock_error_set(err, -ENAMETOOLONG,
                                         "--listen: the socket path '%s' is too long", path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(tmp);
        strcpy(sa.sun_path, tmp);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return airlock_error_set(err, -errno, "--listen: cannot bind '%s': %s", path,
                                         strerror(errno));
        if (chmod(tmp, 0600) < 0 || rename(tmp, path) < 0) {
                int e = errno;
                (void) unlink(tmp);
                return airlock_error_set(err, -e, "--listen: cannot create '%s': %s", path,
                                         strerror(e));
        }
        if (listen(fd, SOMAXCONN) < 0) {
                int e = errno;
                (void) unlink(path);
                return airlock_error_set(err, -e, "--listen: %s", strerror(e));
        }
        srv->unix_path = strdup(path);
        if (!srv->unix_path) {
                (void) unlink(path);
                return -ENOMEM;
        }
        srv->listen_fd = TAKE_FD(fd);
        (void) snprintf(srv->url, sizeof(srv->url), "unix:%s", path);
        return 0;
}

static int bind_tcp(struct api_server *srv, const struct api_listen *l, int *ret_family,
                    unsigned *ret_port, struct airlock_error *err)
{
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        struct addrinfo *res = NULL;
        struct sockaddr_storage ss;
        socklen_t sslen = sizeof(ss);
        char port_s[16];
        int r, e = EADDRNOTAVAIL;

        (void) snprintf(port_s, sizeof(port_s), "%u", l->port);
        r = getaddrinfo(l->host, port_s, &hints, &res);
        if (r != 0)
                return airlock_error_set(err, -EADDRNOTAVAIL, "--listen: cannot resolve '%s': %s",
                                         l->host, gai_strerror(r));
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                _cleanup_close_ int fd = -EBADF;
                int one = 1, zero = 0;

                fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
                if (fd < 0) {
                        e = errno;
                        continue;
                }
                (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                /* "[::]" serves IPv4 too (dual stack); a specific IPv6 address only itself. */
                if (ai->ai_family == AF_INET6)
                        (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
                if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
                        e = errno;
                        continue;
                }
                *ret_family = ai->ai_family;
                srv->listen_fd = TAKE_FD(fd);
                break;
        }
        freeaddrinfo(res);
        if (srv->listen_fd < 0)
                return airlock_error_set(err, -e, "--listen: cannot listen on %s:%u: %s%s", l->host,
                                         l->port, strerror(e),
                                         e == EADDRINUSE ? " (is another airlock running?)" : "");
        if (getsockname(srv->listen_fd, (struct sockaddr *) &ss, &sslen) < 0)
                return -errno;
        srv->bound = ss;
        *ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                                   : ((struct sockaddr_in *) &ss)->sin_port);
        (void) snprintf(srv->url, sizeof(srv->url), "http://%s%s%s:%u",
                        strchr(l->host, ':') ? "[" : "", l->host, strchr(l->host, ':') ? "]" : "",
                        *ret_port);
        return 0;
}

/* Gives the metrics registry the route table's templates, once per process (the table is
 * static; the two arrays of pointers into it live as long as the process). */
static int register_http_metrics(void)
{
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        static const char **methods, **patterns;
        int r = 0;

        pthread_mutex_lock(&lock);
        if (!methods) {
                methods = calloc(ELEMENTSOF(routes), sizeof(*methods));
                patterns = calloc(ELEMENTSOF(routes), sizeof(*patterns));
                if (!methods || !patterns) {
                        free(methods);
                        free(patterns);
                        methods = patterns = NULL;
                        r = -ENOMEM;
                } else {
                        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                                methods[i] = routes[i].method;
                                patterns[i] = routes[i].pattern;
                        }
                        r = metrics_http_register(methods, patterns, ELEMENTSOF(routes));
                        if (r == -EALREADY)
                                r = 0;
                }
        }
        pthread_mutex_unlock(&lock);
        return r;
}

int api_server_new(const struct api_config *cfg, struct api_server **ret_srv,
                   struct airlock_error *err)
{
        struct api_server *srv;
        struct api_listen l;
        const char *why = NULL;
        unsigned flags, port = 0, max_conns, keepalive_s;
        int r, family = AF_UNIX;

        if (!cfg->metrics_only && (!cfg->token || !*cfg->token))
                return airlock_error_set(err, -EINVAL, "no API token");
        r = api_listen_parse(cfg->listen, &l, &why);
        if (r < 0)
                return airlock_error_set(err, r, "--listen '%s': %s", cfg->listen, why);

        srv = calloc(1, sizeof(*srv));
        if (!srv)
                return -ENOMEM;
        srv->listen_fd = -EBADF;
        srv->mgr = cfg->mgr;
        srv->chat = cfg->chat;
        srv->openai = cfg->openai;
        srv->responses = cfg->responses;
        srv->hub = cfg->hub;
        srv->e2b = cfg->e2b;
        srv->tenants = cfg->tenants;
        srv->mode = cfg->mode;
        srv->trusted = cfg->trusted_proxies;
        srv->n_trusted = cfg->n_trusted_proxies;
        srv->metrics_only = cfg->metrics_only;
        srv->metrics_top_sessions = cfg->metrics_top_sessions;
        srv->routes = cfg->metrics_only ? metrics_routes : routes;
        srv->n_routes = cfg->metrics_only ? ELEMENTSOF(metrics_routes) : ELEMENTSOF(routes);
        srv->audit = cfg->audit;
        if (random_bytes(&srv->req_prefix, sizeof(srv->req_prefix), GRND_NONBLOCK) < 0)
                srv->req_prefix = (uint32_t) now_ns();
        atomic_init(&srv->next_req, 1);
        atomic_init(&srv->in_flight, 0);
        atomic_init(&srv->stopping, false);
        srv->token = cfg->token ? strdup(cfg->token) : NULL;
        srv->metrics_token = cfg->metrics_token ? strdup(cfg->metrics_token) : NULL;
        if ((cfg->token && !srv->token) || (cfg->metrics_token && !srv->metrics_token)) {
                r = -ENOMEM;
                goto fail;
        }
        if (!cfg->metrics_only) {
                r = tools_backend_local_new(cfg->mgr, &srv->tools_backend);
                if (r >= 0)
                        r = mcp_http_new(srv->tools_backend, srv->hub, &srv->mcp);
                if (r >= 0)
                        r = register_http_metrics();
                if (r < 0)
                        goto fail;
        }

        if (l.is_unix) {
                r = bind_unix(srv, l.path, err);
        } else {
                r = bind_tcp(srv, &l, &family, &port, err);
                if (r >= 0) {
                        srv->check_host = true;
                        r = host_allow_init(&srv->allow, l.host, port, cfg->allow_hosts);
                        if (r < 0)
                                airlock_error_set(err, r, "--allow-host: %s",
                                                  r == -E2BIG ? "too many values"
                                                              : "an empty value");
                }
        }
        if (r < 0)
                goto fail;

        max_conns = cfg->max_connections ? cfg->max_connections : API_DEFAULT_MAX_CONNECTIONS;
        r = dispatch_new(cfg->metrics_only ? METRICS_WORKERS_MAX : WORKERS_MAX, &srv->workers);
        if (r >= 0)
                r = conn_guard_new(
                        &(struct conn_guard_config){
                                .max_connections = max_conns,
                                .trusted = cfg->trusted_proxies,
                                .n_trusted = cfg->n_trusted_proxies,
                                .max_per_client = cfg->max_connections_per_client == UINT_MAX ? 0u
                                                  : cfg->max_connections_per_client
                                                          ? cfg->max_connections_per_client
                                                          : API_DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
                                .request_timeout_ms = cfg->request_timeout_ms
                                                              ? cfg->request_timeout_ms
                                                              : API_DEFAULT_REQUEST_TIMEOUT_MS },
                        &srv->guard);
        if (r < 0)
                goto fail;
        keepalive_s = (unsigned) ((cfg->keepalive_timeout_ms ? cfg->keepalive_timeout_ms
                                                             : API_DEFAULT_KEEPALIVE_TIMEOUT_MS) +
                                  999) /
                      1000;

        /* One epoll thread for every connection; handlers go to the workers. Suspend/resume is
         * how a handler's reply comes back to the event thread (it implies the ITC). */
        flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
        if (family == AF_INET6)
                flags |= MHD_USE_DUAL_STACK;
        /* The logger first: MHD reports problems with the options that follow through it. */
        srv->mhd = MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                MHD_OPTION_LISTEN_SOCKET, srv->listen_fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                srv, MHD_OPTION_NOTIFY_CONNECTION, conn_guard_notify, srv->guard,
                MHD_OPTION_UNESCAPE_CALLBACK, unescape_none, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
                keepalive_s, MHD_OPTION_CONNECTION_LIMIT, max_conns, MHD_OPTION_END);
        if (!srv->mhd) {
                r = airlock_error_set(err, -EIO, "cannot start the HTTP server (libmicrohttpd)");
                goto fail;
        }
        *ret_srv = srv;
        return 0;
fail:
        api_server_free(srv);
        return r;
}

bool api_server_sockaddr(const struct api_server *srv, struct sockaddr_storage *ret)
{
        if (!srv || srv->bound.ss_family == AF_UNSPEC)
                return false;
        *ret = srv->bound;
        return true;
}

const char *api_server_url(const struct api_server *srv)
{
        return srv->url;
}

void api_server_quiesce(struct api_server *srv)
{
        if (!srv || atomic_exchange(&srv->stopping, true))
                return;
        /* MHD hands the listen socket back; it is closed in api_server_free(). */
        if (srv->mhd)
                (void) MHD_quiesce_daemon(srv->mhd);
}

int api_server_drain(struct api_server *srv, unsigned timeout_ms)
{
        uint64_t deadline = now_ns() + (uint64_t) timeout_ms * 1000000u;

        while (atomic_load(&srv->in_flight) > 0) {
                if (now_ns() >= deadline)
                        return -ETIMEDOUT;
                (void) usleep(10000);
        }
        return 0;
}

struct api_server *api_server_free(struct api_server *srv)
{
        uint64_t waited_since = now_ns();
        bool quiesced;

        if (!srv)
                return NULL;
        quiesced = atomic_load(&srv->stopping);
        atomic_store(&srv->stopping, true);
        /* libmicrohttpd may not stop with a connection suspended: every handler must have
         * returned and resumed its connection, every stream have ended. They do once their
         * sessions are gone (the caller shut the session manager down first). */
        srv->workers = dispatch_free(srv->workers);
        while (atomic_load(&srv->suspended) > 0) {
                if (now_ns() - waited_since > 5000000000ull) {
                        log_warn("waiting for %u streaming replies to end",
                                 atomic_load(&srv->suspended));
                        waited_since = now_ns();
                }
                (void) usleep(10000);
        }
        if (srv->mhd)
                MHD_stop_daemon(srv->mhd);
        srv->guard = conn_guard_free(srv->guard);
        /* MHD closes the listen socket it was given, unless it was quiesced. */
        if (!srv->mhd || quiesced)
                srv->listen_fd = safe_close_fd(srv->listen_fd);
        if (srv->unix_path) {
                (void) unlink(srv->unix_path);
                free(srv->unix_path);
        }
        /* After MHD stopped: no handler uses them any more. Ends the MCP sessions' sandboxes. */
        mcp_http_free(srv->mcp);
        tools_backend_free(srv->tools_backend);
        host_allow_done(&srv->allow);
        if (srv->token) {
                explicit_bzero(srv->token, strlen(srv->token));
                free(srv->token);
        }
        if (srv->metrics_token) {
                explicit_bzero(srv->metrics_token, strlen(srv->metrics_token));
                free(srv->metrics_token);
        }
        free(srv);
        return NULL;
}
