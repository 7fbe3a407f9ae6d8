/* Shared by the API's files: the server, the per-request context, the reply helpers and the
 * handlers of each route group. */
#pragma once

#include "api.h"
#include "audit/audit.h"
#include "auth.h"
#include "dispatch.h"
#include "openai/openai.h"
#include "router.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define API_JSON_BODY_MAX (16u * 1024u * 1024u)
#define API_FILE_BODY_MAX (64u * 1024u * 1024u)
/* The largest body a node forwards to another (held in memory until the peer takes it). */
#define API_FORWARD_BODY_MAX API_FILE_BODY_MAX
#define API_DRAIN_MAX (16u * 1024u * 1024u) /* bytes read and dropped past a limit */

struct api_server {
        struct MHD_Daemon *mhd;
        struct dispatch *workers; /* the handlers run here, off the event thread */
        struct conn_guard *guard; /* request deadlines, room for new connections */
        struct session_manager *mgr;
        const struct chat_gateway_config *chat; /* borrowed; NULL = the gateway is off */
        struct openai *openai;       /* /v1/files and /v1/containers (borrowed); NULL = off */
        struct responses *responses; /* /v1/responses (borrowed); NULL = off */
        struct tools_backend *tools_backend; /* the MCP sessions' sandboxes, on mgr */
        struct hub *hub;                     /* internal tools (borrowed); NULL = none */
        struct e2b *e2b;                     /* /e2b (borrowed); NULL = those routes are off */
        struct audit *audit;                 /* the audit log (borrowed); NULL = none */
        struct mcp_http *mcp;                /* /mcp: the MCP sessions */
        struct tenant_registry *tenants;     /* borrowed; NULL = the token only */
        enum jail_isolation mode;
        char *token;
        char *metrics_token;            /* NULL = the API token only */
        unsigned metrics_top_sessions;  /* GET /metrics: top sessions by memory, 0 = none */
        bool metrics_only;              /* GET /metrics without a token, nothing else */
        const struct api_route *routes; /* the route table this server serves */
        size_t n_routes;
        struct host_allow allow;
        const struct cidr *trusted; /* --trusted-proxies (borrowed) */
        size_t n_trusted;
        bool check_host; /* false on a unix socket, which no browser can reach */
        int listen_fd;
        char *unix_path; /* the socket we created, removed at the end */
        char url[512];
        struct sockaddr_storage bound; /* the TCP address listened on (AF_UNSPEC: a unix one) */
        /* Request ids are this daemon's random prefix and a counter, so that the ids in an
         * audit log that outlives restarts stay distinct. */
        uint32_t req_prefix;
        atomic_uint_fast64_t next_req;
        atomic_uint in_flight; /* requests between their headers and their log line */
        /* Connections suspended for a handler or a stream, counted until their resume call
         * has returned: libmicrohttpd may only stop when this is 0. */
        atomic_uint suspended;
        atomic_bool stopping;
};

/* One request, from its headers to the log line written when it completes. */
struct api_request {
        struct api_server *srv;
        struct MHD_Connection *conn;
        char method[24]; /* copied: the log line is written after MHD's pool is gone */
        char *raw_path;  /* as the client sent it, for the log */
        char id[20];
        uint64_t start_ns;
        unsigned status;
        const struct api_route *route;
        struct route_params params;
        /* Who sent it (a reference), from its key: set by the auth check, or by a route
         * with an auth of its own (E2B's X-API-KEY); NULL before. The handler runs with it as
         * its thread's tenant scope (tenant.h). */
        struct tenant *tenant;
        /* The handler's audit scope (audit.h): its tenant follows req->tenant. */
        struct audit_scope audit_scope;
        char *body;
        size_t body_len, body_size, body_max;
        uint64_t received; /* body bytes seen, kept or not */
        bool body_too_large;
        /* Errors in OpenAI's shape (the route, or every route of its path, is API_ROUTE_OPENAI). */
        bool openai_errors;
        /* An API_ROUTE_UPLOAD route's multipart body, spooled to disk; NULL otherwise. */
        struct api_upload *upload;
        /* The client behind a trusted proxy (its X-Forwarded-For's last entry), "" = none. */
        char client[INET6_ADDRSTRLEN + 8];
        /* The peer the request is forwarded to (forward.h), or NULL: handled here. */
        const struct node_peer *forward;
        bool dispatched; /* handed to a worker, the connection suspended until it replies */
        bool replied;
        struct dispatch_job job;
};

/* A connection was suspended (MHD_suspend_connection) for work on another thread; and that
 * work resumed it: call after MHD_resume_connection() returned. */
void api_suspended(struct api_server *srv);
void api_resumed(struct api_server *srv);

/* Replies. Each queues a response on req->conn, records the status for the log line and
 * returns 0, or -errno when MHD refused it (the server then drops the connection). */

/* Takes ownership of body (a JSON value), NULL = no body. */
int api_reply_json(struct api_request *req, unsigned status, json_t *body);

/* The same with one more response header (Location, Allow, WWW-Authenticate), when header is
 * not NULL. */
int api_reply_json_header(struct api_request *req, unsigned status, json_t *body,
                          const char *header, const char *value);

/* {"error": <formatted>} plus, when field is set, "field": field. */
int api_reply_error(struct api_request *req, unsigned status, const char *field, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));

/* The same with one more response header (WWW-Authenticate, Allow). */
int api_reply_error_header(struct api_request *req, unsigned status, const char *header,
                           const char *value, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

/* An error of the openai layer, in OpenAI's shape with its status. */
struct openai_error;
int api_reply_openai_error(struct api_request *req, const struct openai_error *err);

/* The same with more members: extra (a JSON object, taken over) gets "error" (and "field")
 * added. */
int api_reply_error_extra(struct api_request *req, unsigned status, const char *field,
                          json_t *extra, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

/* Streams size bytes of the file fd (taken, also on failure) as the body. */
int api_reply_fd(struct api_request *req, unsigned status, int fd, uint64_t size,
                 const char *content_type);

/* Queues resp (adding the common headers) and releases our reference to it. */
int api_reply_response(struct api_request *req, unsigned status, struct MHD_Response *resp);

/* The status an errno from session.h maps to (with a readable fallback message when err has
 * none): -EINVAL 400, -ENOENT 404, -EBUSY 409, -E2BIG/-EFBIG 413,
 * -EUSERS/-EMFILE/-EAGAIN/-ESHUTDOWN 503, -EXFULL 429 (a tenant quota), -EACCES 403
 * (a tenant policy), others 500. */
int api_reply_errno(struct api_request *req, int r, const char *field, const char *msg);

/* 429 for a tenant's quota (session.h's -EXFULL): {"error": msg, "quota", "limit"} from the
 * thread's tenant_scope_refusal(). */
int api_reply_quota(struct api_request *req, const char *msg);

/* 404 for the session id: with the reason when it ended, else "unknown session". */
int api_reply_session_gone(struct api_request *req, const char *id);

/* The tenant a key names: the daemon's token is "default", a tenant's key that tenant.
 * Returns 0 with a new reference, or -ENOENT. */
int api_key_tenant(struct api_server *srv, const char *key, size_t len, struct tenant **ret);

/* Who a request acts for, kept for a thread of its own (a stream's worker) that outlives the
 * handler: the tenant (a reference) and the request id. */
struct api_scope {
        struct api_server *srv;
        struct tenant *tenant;
        char request_id[20];
        struct audit_scope audit; /* points into this struct */
};
/* Captures req's scope into s (a new tenant reference); release with api_scope_done(). */
void api_scope_init(struct api_scope *s, struct api_request *req);
void api_scope_done(struct api_scope *s);
/* Makes the calling thread act for s (tenant.h's scope, the audit scope) until
 * api_scope_leave(). s must outlive that. */
void api_scope_enter(struct api_scope *s);
void api_scope_leave(void);

/* The auth.failure audit line of req: reason "missing", "malformed" or "invalid"; the tenant
 * unknown (null), never the key presented. */
void api_audit_auth_failure(struct api_request *req, const char *reason);

/* A header of the request, or NULL. */
const char *api_header(struct api_request *req, const char *name);

/* Handlers, one file per route group. */
/* The client's address as text: the one a trusted proxy named (X-Forwarded-For), else the
 * socket's peer, "unix" on a unix socket. What a forwarded request tells its peer. */
void api_client_address(struct api_request *req, char *buf, size_t size);

int api_handle_healthz(struct api_request *req);             /* routes-health.c */
int api_handle_readyz(struct api_request *req);              /* routes-node.c */
int api_handle_node(struct api_request *req);                /* routes-node.c */
int api_handle_node_drain(struct api_request *req);          /* routes-node.c */
int api_handle_metrics(struct api_request *req);             /* routes-metrics.c */
int api_handle_profiles(struct api_request *req);            /* routes-health.c */
int api_handle_executions(struct api_request *req);          /* routes-executions.c */
int api_handle_ui(struct api_request *req);                  /* routes-ui.c */
int api_handle_ui_asset(struct api_request *req);            /* routes-ui.c */
int api_handle_execute_once(struct api_request *req);        /* routes-execute.c */
int api_handle_session_execute(struct api_request *req);     /* routes-execute.c */
int api_handle_session_create(struct api_request *req);      /* routes-sessions.c */
int api_handle_session_list(struct api_request *req);        /* routes-sessions.c */
int api_handle_session_get(struct api_request *req);         /* routes-sessions.c */
int api_inline_session_get(struct api_request *req);         /* routes-sessions.c */
int api_handle_session_patch(struct api_request *req);       /* routes-sessions.c */
int api_handle_session_delete(struct api_request *req);      /* routes-sessions.c */
int api_handle_session_interrupt(struct api_request *req);   /* routes-sessions.c */
int api_handle_context_list(struct api_request *req);        /* routes-contexts.c */
int api_handle_context_create(struct api_request *req);      /* routes-contexts.c */
int api_handle_context_delete(struct api_request *req);      /* routes-contexts.c */
int api_handle_context_restart(struct api_request *req);     /* routes-contexts.c */
int api_handle_session_stop(struct api_request *req);        /* routes-sessions.c */
int api_handle_session_resume(struct api_request *req);      /* routes-sessions.c */
int api_handle_session_fork(struct api_request *req);        /* routes-sessions.c */
int api_handle_file_get(struct api_request *req);            /* routes-files.c */
int api_handle_file_put(struct api_request *req);            /* routes-files.c */
int api_handle_file_delete(struct api_request *req);         /* routes-files.c */
int api_handle_chat_completions(struct api_request *req);    /* routes-chat.c */
int api_handle_tools(struct api_request *req);               /* routes-tools.c */
int api_handle_mcp(struct api_request *req);                 /* routes-mcp.c */
int api_handle_resp_create(struct api_request *req);         /* routes-responses.c */
int api_handle_resp_get(struct api_request *req);            /* routes-responses.c */
int api_handle_resp_delete(struct api_request *req);         /* routes-responses.c */
int api_handle_resp_items(struct api_request *req);          /* routes-responses.c */
int api_handle_container_create(struct api_request *req);    /* routes-containers.c */
int api_handle_container_list(struct api_request *req);      /* routes-containers.c */
int api_handle_container_get(struct api_request *req);       /* routes-containers.c */
int api_handle_container_delete(struct api_request *req);    /* routes-containers.c */
int api_handle_cfile_create(struct api_request *req);        /* routes-containers.c */
int api_handle_cfile_list(struct api_request *req);          /* routes-containers.c */
int api_handle_cfile_get(struct api_request *req);           /* routes-containers.c */
int api_handle_cfile_content(struct api_request *req);       /* routes-containers.c */
int api_handle_cfile_delete(struct api_request *req);        /* routes-containers.c */
int api_handle_ofile_create(struct api_request *req);        /* routes-openai-files.c */
int api_handle_ofile_list(struct api_request *req);          /* routes-openai-files.c */
int api_handle_ofile_get(struct api_request *req);           /* routes-openai-files.c */
int api_handle_ofile_content(struct api_request *req);       /* routes-openai-files.c */
int api_handle_ofile_delete(struct api_request *req);        /* routes-openai-files.c */
int api_handle_e2b_create(struct api_request *req);          /* routes-e2b.c */
int api_handle_e2b_get(struct api_request *req);             /* routes-e2b.c */
int api_handle_e2b_list(struct api_request *req);            /* routes-e2b.c */
int api_handle_e2b_kill(struct api_request *req);            /* routes-e2b.c */
int api_handle_e2b_pause(struct api_request *req);           /* routes-e2b.c */
int api_handle_e2b_timeout(struct api_request *req);         /* routes-e2b.c */
int api_handle_e2b_connect(struct api_request *req);         /* routes-e2b.c */
int api_handle_e2b_api_other(struct api_request *req);       /* routes-e2b.c */
int api_handle_e2b_health(struct api_request *req);          /* routes-e2b.c */
int api_handle_e2b_file_get(struct api_request *req);        /* routes-e2b.c */
int api_handle_e2b_file_post(struct api_request *req);       /* routes-e2b.c */
int api_handle_e2b_execute(struct api_request *req);         /* routes-e2b.c */
int api_handle_e2b_context_create(struct api_request *req);  /* routes-e2b.c */
int api_handle_e2b_context_list(struct api_request *req);    /* routes-e2b.c */
int api_handle_e2b_context_delete(struct api_request *req);  /* routes-e2b.c */
int api_handle_e2b_context_restart(struct api_request *req); /* routes-e2b.c */
int api_handle_e2b_filesystem(struct api_request *req);      /* routes-e2b.c */
int api_handle_e2b_process(struct api_request *req);         /* routes-e2b.c */
int api_handle_e2b_sandbox_other(struct api_request *req);   /* routes-e2b.c */

/* The query of an OpenAI list route (limit, after, order, and name or purpose where the route
 * has them), decoded and checked. q's strings point into the struct. */
struct api_list_args {
        struct openai_list_query q;
        char after[ROUTE_SEGMENT_MAX + 1];
        char name[ROUTE_SEGMENT_MAX + 1];
        char purpose[64];
};
/* Returns 1 with *ret filled, 0 when a 400 naming the parameter was queued, or -errno. */
int api_openai_list_query(struct api_request *req, bool with_name, bool with_purpose,
                          struct api_list_args *ret);

/* routes-openai.c: what the OpenAI-compatible routes share. */

/* 503 (OpenAI's shape) when the daemon has no openai layer; 1 when it has one, 0 when the
 * 503 was queued, or -errno. */
int api_openai_check(struct api_request *req);

/* A list route: its query checked (name for containers, purpose for files), the page
 * answered. */
enum api_openai_list {
        API_OPENAI_LIST_CONTAINERS,
        API_OPENAI_LIST_CONTAINER_FILES, /* of the route's {id} */
        API_OPENAI_LIST_FILES,
};
int api_openai_list(struct api_request *req, enum api_openai_list what);

/* 200 with obj (taken) when r >= 0, else err's answer (or r, when err says nothing). */
int api_reply_openai_result(struct api_request *req, int r, json_t *obj,
                            const struct openai_error *err);

/* The bytes of the file {id} of the Files API, or of the container file {sub} of the
 * container {id}, streamed. */
int api_openai_content(struct api_request *req, bool container_file);

/* A handler that is one call of openai.h with the route's {id} (and {sub}) and answers its
 * object or its error. */
typedef int (*api_openai_by_id_fn)(struct openai *oa, const char *id, json_t **ret,
                                   struct openai_error *err);
typedef int (*api_openai_by_ids_fn)(struct openai *oa, const char *id, const char *sub,
                                    json_t **ret, struct openai_error *err);
int api_openai_by_id(struct api_request *req, api_openai_by_id_fn fn);
int api_openai_by_ids(struct api_request *req, api_openai_by_ids_fn fn);
