/* The streamable HTTP transport of MCP (see http.h): a table of MCP sessions keyed by a random
 * Mcp-Session-Id, each an mcp_conn with its own sandbox session, and the header rules of the
 * transport. Entries are reference-counted so that DELETE, or dropping an idle session, while a
 * tool call of that session runs frees it only when the call returns. */
#include "http.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/node-id.h"
#include "base/util.h"
#include "mcp.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_HEADER "Mcp-Session-Id"
#define VERSION_HEADER "MCP-Protocol-Version"

struct entry {
        char id[40 + NODE_SUFFIX_MAX];   /* "mcp-", 32 hex characters, "-NODE" */
        char owner[TENANT_NAME_MAX + 1]; /* the tenant that initialized it */
        struct mcp_conn *conn;
        unsigned refs; /* requests in flight */
        uint64_t last_used_ns;
        struct entry *next;
};

struct mcp_http {
        struct tools_backend *backend; /* borrowed */
        struct hub *hub;               /* borrowed; may be NULL */
        pthread_mutex_t lock;          /* guards the list and every entry's refs/last_used */
        struct entry *entries;
        size_t n;
};

int mcp_http_new(struct tools_backend *backend, struct hub *hub, struct mcp_http **ret_http)
{
        struct mcp_http *h = calloc(1, sizeof(*h));

        if (!h)
                return -ENOMEM;
        h->backend = backend;
        h->hub = hub;
        (void) pthread_mutex_init(&h->lock, NULL);
        *ret_http = h;
        return 0;
}

static void entry_free(struct entry *e)
{
        if (!e)
                return;
        mcp_conn_free(e->conn);
        free(e);
}

struct mcp_http *mcp_http_free(struct mcp_http *h)
{
        struct entry *e, *next;

        if (!h)
                return NULL;
        for (e = h->entries; e; e = next) {
                next = e->next;
                entry_free(e);
        }
        (void) pthread_mutex_destroy(&h->lock);
        free(h);
        return NULL;
}

size_t mcp_http_sessions(struct mcp_http *h)
{
        size_t n;

        (void) pthread_mutex_lock(&h->lock);
        n = h->n;
        (void) pthread_mutex_unlock(&h->lock);
        return n;
}

/* Takes e out of the list (lock held). It is freed by whoever drops the last reference. */
static void unlink_locked(struct mcp_http *h, struct entry *e)
{
        for (struct entry **p = &h->entries; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        h->n--;
                        e->next = NULL;
                        return;
                }
}

/* The session id's entry when the calling thread's tenant made it: another tenant's id is as
 * unknown as one nobody has (docs/TENANTS.md). */
static struct entry *lookup_ref(struct mcp_http *h, const char *id)
{
        struct entry *e;

        (void) pthread_mutex_lock(&h->lock);
        for (e = h->entries; e; e = e->next)
                if (strcmp(e->id, id) == 0 && tenant_scope_sees(e->owner)) {
                        e->refs++;
                        e->last_used_ns = now_ns();
                        break;
                }
        (void) pthread_mutex_unlock(&h->lock);
        return e;
}

/* Drops a reference; with remove, also takes the entry out of the table (DELETE). */
static void entry_release(struct mcp_http *h, struct entry *e, bool remove)
{
        bool in_list = false, last;

        (void) pthread_mutex_lock(&h->lock);
        for (struct entry *i = h->entries; i; i = i->next)
                in_list |= i == e;
        if (remove && in_list) {
                unlink_locked(h, e);
                in_list = false;
        }
        e->last_used_ns = now_ns();
        last = --e->refs == 0 && !in_list;
        (void) pthread_mutex_unlock(&h->lock);
        if (last)
                entry_free(e);
}

/* Drops sessions idle longer than MCP_HTTP_IDLE_MS that no request uses. Clients that come
 * back get 404 and, as the transport says they must, initialize anew. */
static void sweep_idle(struct mcp_http *h)
{
        struct entry *dead = NULL, *e, *next;
        uint64_t now = now_ns();

        (void) pthread_mutex_lock(&h->lock);
        for (e = h->entries; e; e = next) {
                next = e->next;
                if (e->refs == 0 && now - e->last_used_ns > MCP_HTTP_IDLE_MS * 1000000ULL) {
                        unlink_locked(h, e);
                        e->next = dead;
                        dead = e;
                }
        }
        (void) pthread_mutex_unlock(&h->lock);
        for (e = dead; e; e = next) {
                next = e->next;
                log_info("mcp=%.12s dropped after being idle", e->id);
                entry_free(e);
        }
}

/* Makes a new MCP session holding one reference. Returns 0, -EUSERS when the table is full,
 * or -errno. */
static int entry_new(struct mcp_http *h, struct entry **ret_e)
{
        struct entry *e = calloc(1, sizeof(*e));
        char name[24];
        int r;

        if (!e)
                return -ENOMEM;
        /* The id ties requests to a session, with the tenant's key: unguessable, from
         * getrandom(). */
        memcpy(e->id, "mcp-", 4);
        r = random_hex(e->id + 4, 16);
        if (r >= 0)
                r = node_id_append(e->id, sizeof(e->id));
        if (r < 0) {
                free(e);
                return r;
        }
        (void) snprintf(e->owner, sizeof(e->owner), "%s", tenant_scope_owner());
        (void) snprintf(name, sizeof(name), "%.12s", e->id);
        r = mcp_conn_new(
                &(struct mcp_conn_options){ .backend = h->backend, .name = name, .hub = h->hub },
                &e->conn);
        if (r < 0) {
                free(e);
                return r;
        }
        e->refs = 1;
        e->last_used_ns = now_ns();

        (void) pthread_mutex_lock(&h->lock);
        if (h->n >= MCP_HTTP_SESSIONS_MAX) {
                (void) pthread_mutex_unlock(&h->lock);
                entry_free(e);
                return -EUSERS;
        }
        e->next = h->entries;
        h->entries = e;
        h->n++;
        (void) pthread_mutex_unlock(&h->lock);
        *ret_e = e;
        return 0;
}

void mcp_http_response_done(struct mcp_http_response *resp)
{
        free(resp->body);
        *resp = (struct mcp_http_response){ 0 };
}

static void add_header(struct mcp_http_response *resp, const char *name, const char *value)
{
        if (resp->n_headers >= MCP_HTTP_HEADERS_MAX)
                return;
        resp->headers[resp->n_headers].name = name;
        (void) snprintf(resp->headers[resp->n_headers].value,
                        sizeof(resp->headers[resp->n_headers].value), "%s", value);
        resp->n_headers++;
}

static int set_json(struct mcp_http_response *resp, unsigned status, json_t *body)
{
        resp->status = status;
        if (!body)
                return -ENOMEM;
        resp->body = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (!resp->body)
                return -ENOMEM;
        resp->body_len = strlen(resp->body);
        add_header(resp, "Content-Type", "application/json");
        return 0;
}

/* A transport-level refusal: an HTTP status with a JSON-RPC error body (id null), as the
 * official SDKs answer, so a client shows the reason. */
static int set_error(struct mcp_http_response *resp, unsigned status, int code, const char *msg)
{
        return set_json(resp, status, mcp_error_reply(NULL, code, msg));
}

static const char *header(const struct mcp_http_request *req, const char *name)
{
        return req->header ? req->header(req->userdata, name) : NULL;
}

/* Whether an Accept header admits a JSON answer. Absent: yes. */
static bool accepts_json(const char *accept)
{
        return !accept || strcasestr(accept, "application/json") || strstr(accept, "*/*") ||
               strcasestr(accept, "application/*");
}

static int handle_post(struct mcp_http *h, const struct mcp_http_request *req,
                       struct mcp_http_response *resp)
{
        _cleanup_(json_decrefp) json_t *msg = NULL, *reply = NULL;
        const char *version = header(req, VERSION_HEADER);
        const char *sid = header(req, SESSION_HEADER);
        struct entry *e = NULL;
        json_error_t jerr;
        bool is_init, created = false;
        int r;

        /* The body is parsed as JSON whatever its Content-Type says, as everywhere in the API
         * (`curl -d` sends application/x-www-form-urlencoded). */
        if (!accepts_json(header(req, "Accept")))
                return set_error(resp, 406, JSONRPC_INVALID_REQUEST,
                                 "Not Acceptable: the answer is application/json");
        if (version && !mcp_version_is_supported(version))
                return set_error(resp, 400, JSONRPC_INVALID_REQUEST,
                                 "Bad Request: unsupported MCP-Protocol-Version (supported: "
                                 "2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)");

        msg = json_loadb(req->body ? req->body : "", req->body_len,
                         JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (!msg) {
                char buf[300];
                (void) snprintf(buf, sizeof(buf), "parse error: %s", jerr.text);
                return set_error(resp, 400, JSONRPC_PARSE_ERROR, buf);
        }
        is_init = json_is_object(msg) && json_is_string(json_object_get(msg, "method")) &&
                  strcmp(json_string_value(json_object_get(msg, "method")), "initialize") == 0;

        if (!sid) {
                if (!is_init)
                        return set_error(resp, 400, -32000,
                                         "Bad Request: the Mcp-Session-Id header is required "
                                         "(send initialize first to get one)");
                sweep_idle(h);
                r = entry_new(h, &e);
                if (r == -EUSERS)
                        return set_error(resp, 503, -32000,
                                         "Service Unavailable: too many MCP sessions; end one "
                                         "with DELETE /mcp");
                if (r < 0)
                        return r;
                created = true;
        } else {
                e = lookup_ref(h, sid);
                if (!e)
                        return set_error(resp, 404, -32001,
                                         "Session not found: it ended or never existed; "
                                         "initialize a new one");
        }

        r = mcp_conn_handle_json(e->conn, msg, &reply);
        if (r < 0) {
                entry_release(h, e, created);
                return r;
        }
        if (created) {
                /* Only a successful initialize makes a session. */
                bool ok = reply && json_object_get(reply, "result");
                if (ok) {
                        add_header(resp, SESSION_HEADER, e->id);
                        log_info("mcp=%.12s session started", e->id);
                }
                entry_release(h, e, !ok);
        } else {
                entry_release(h, e, false);
        }

        if (!reply) {
                /* Notifications and responses only. */
                resp->status = 202;
                return 0;
        }
        return set_json(resp, 200, TAKE_PTR(reply));
}

static int handle_delete(struct mcp_http *h, const struct mcp_http_request *req,
                         struct mcp_http_response *resp)
{
        const char *sid = header(req, SESSION_HEADER);
        struct entry *e;

        if (!sid)
                return set_error(resp, 400, -32000,
                                 "Bad Request: the Mcp-Session-Id header is required");
        e = lookup_ref(h, sid);
        if (!e)
                return set_error(resp, 404, MCP_SESSION_NOT_FOUND, "Session not found");
        log_info("mcp=%.12s session ended by the client", e->id);
        /* Out of the table first, so that no new request finds it; then end what runs (our
         * reference keeps it alive meanwhile): a POST in flight, a batch, answers at once,
         * the call that ran and the items left with an error. */
        (void) pthread_mutex_lock(&h->lock);
        unlink_locked(h, e);
        (void) pthread_mutex_unlock(&h->lock);
        mcp_conn_close(e->conn);
        entry_release(h, e, false);
        resp->status = 200;
        return 0;
}

int mcp_http_handle(struct mcp_http *h, const struct mcp_http_request *req,
                    struct mcp_http_response *ret_resp)
{
        int r;

        *ret_resp = (struct mcp_http_response){ 0 };
        if (strcmp(req->method, "POST") == 0)
                r = handle_post(h, req, ret_resp);
        else if (strcmp(req->method, "DELETE") == 0)
                r = handle_delete(h, req, ret_resp);
        else {
                /* GET would open a stream for server-initiated messages; this server sends
                 * none, and the transport allows 405 for that. */
                r = set_error(ret_resp, 405, JSONRPC_INVALID_REQUEST,
                              "Method Not Allowed: POST a JSON-RPC message, or DELETE to end "
                              "the session");
                add_header(ret_resp, "Allow", "POST, DELETE");
        }
        if (r < 0) {
                mcp_http_response_done(ret_resp);
                return r;
        }
        return 0;
}
