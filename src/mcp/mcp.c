/* JSON-RPC 2.0 framing and the MCP lifecycle (initialize, version negotiation, ping) for one
 * connection, and the table of methods it serves. Everything a client sends is checked here
 * before a handler sees it, so handlers get a well-formed request with an object as params. */
#include "mcp.h"
#include "mcp-internal.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/util.h"
#include "config.h"
#include "tools/tools.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Newest first: the first is what a client asking for something else gets. */
static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };

static const char instructions[] =
        "airlock runs Python and bash in a sandbox on this machine, with no network access. "
        "State persists for this connection: Python variables and imports (run_python), the "
        "shell's directory and environment (run_shell), and the files in /work, shared by both. "
        "Matplotlib figures come back as PNG images. Files that calls create are linked as "
        "resources (airlock://files/<path>) and can be read with read_file or resources/read. "
        "reset_session starts over.";

bool mcp_version_is_supported(const char *version)
{
        for (size_t i = 0; version && i < ELEMENTSOF(versions); i++)
                if (strcmp(version, versions[i]) == 0)
                        return true;
        return false;
}

const char *mcp_version_negotiate(const char *requested)
{
        for (size_t i = 0; requested && i < ELEMENTSOF(versions); i++)
                if (strcmp(requested, versions[i]) == 0)
                        return versions[i];
        return MCP_PROTOCOL_LATEST;
}

bool mcp_version_allows_batch(const char *version)
{
        return version &&
               (strcmp(version, "2025-03-26") == 0 || strcmp(version, "2024-11-05") == 0);
}

int mcp_rpc_error_set(struct mcp_rpc_error *e, int code, const char *fmt, ...)
{
        va_list ap;

        e->code = code;
        va_start(ap, fmt);
        (void) vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        return -EPROTO;
}

json_t *mcp_error_reply(json_t *id, int code, const char *message)
{
        return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                         "error", "code", code, "message", message);
}

int mcp_conn_new(const struct mcp_conn_options *opts, struct mcp_conn **ret_conn)
{
        struct mcp_conn *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        (void) pthread_mutex_init(&c->lock, NULL);
        c->batch_time_max_ms =
                opts->batch_time_max_ms ? opts->batch_time_max_ms : MCP_BATCH_TIME_MAX_MS;
        c->tools_list_changes = opts->tools_list_changes && opts->hub;
        c->name = strdup(opts->name ? opts->name : "mcp");
        c->resources = json_object();
        if (!c->name || !c->resources) {
                mcp_conn_free(c);
                return -ENOMEM;
        }
        r = toolbox_new(opts->backend,
                        &(struct toolbox_options){ .profile = opts->profile, .hub = opts->hub },
                        &c->tb);
        if (r < 0) {
                mcp_conn_free(c);
                return r;
        }
        *ret_conn = c;
        return 0;
}

struct mcp_conn *mcp_conn_free(struct mcp_conn *c)
{
        if (!c)
                return NULL;
        toolbox_free(c->tb);
        json_decref(c->resources);
        free(c->resources_session);
        free(c->name);
        (void) pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
}

void mcp_conn_close(struct mcp_conn *c)
{
        (void) pthread_mutex_lock(&c->lock);
        c->closed = true;
        (void) pthread_mutex_unlock(&c->lock);
        toolbox_close(c->tb);
}

static bool is_closed(struct mcp_conn *c)
{
        bool b;

        (void) pthread_mutex_lock(&c->lock);
        b = c->closed;
        (void) pthread_mutex_unlock(&c->lock);
        return b;
}

bool mcp_conn_is_initialized(struct mcp_conn *c)
{
        bool b;

        (void) pthread_mutex_lock(&c->lock);
        b = c->initialized;
        (void) pthread_mutex_unlock(&c->lock);
        return b;
}

void mcp_conn_version(struct mcp_conn *c, char buf[16])
{
        (void) pthread_mutex_lock(&c->lock);
        memcpy(buf, c->version, 16);
        (void) pthread_mutex_unlock(&c->lock);
}

static int method_initialize(struct mcp_conn *c, const struct mcp_request *req, json_t **ret_result,
                             struct mcp_rpc_error *e)
{
        json_t *params = req->params;
        json_t *requested = json_object_get(params, "protocolVersion");
        json_t *info = json_object_get(params, "clientInfo");
        const char *version;

        if (!json_is_string(requested))
                return mcp_rpc_error_set(e, JSONRPC_INVALID_PARAMS,
                                         "initialize: params.protocolVersion must be a string");
        version = mcp_version_negotiate(json_string_value(requested));

        (void) pthread_mutex_lock(&c->lock);
        if (c->initialized) {
                (void) pthread_mutex_unlock(&c->lock);
                return mcp_rpc_error_set(e, JSONRPC_INVALID_REQUEST,
                                         "the connection is already initialized");
        }
        c->initialized = true;
        (void) snprintf(c->version, sizeof(c->version), "%s", version);
        (void) pthread_mutex_unlock(&c->lock);

        log_info("mcp=%s initialized version=%s client=%.60s", c->name, version,
                 json_is_string(json_object_get(info, "name"))
                         ? json_string_value(json_object_get(info, "name"))
                         : "?");
        /* Capabilities as they are: the tools change only with internal tools, and only a
         * transport that can tell (stdio) says so; resources support no subscriptions. */
        *ret_result = json_pack("{s:s, s:{s:{s:b}, s:{s:b, s:b}}, s:{s:s, s:s, s:s}, s:s}",
                                "protocolVersion", version, "capabilities", "tools", "listChanged",
                                c->tools_list_changes, "resources", "subscribe", false,
                                "listChanged", false, "serverInfo", "name", "airlock", "title",
                                "airlock code interpreter", "version", AIRLOCK_VERSION,
                                "instructions", instructions);
        return *ret_result ? 0 : -ENOMEM;
}

static int method_ping(struct mcp_conn *c, const struct mcp_request *req, json_t **ret_result,
                       struct mcp_rpc_error *e)
{
        (void) c;
        (void) req;
        (void) e;
        *ret_result = json_object();
        return *ret_result ? 0 : -ENOMEM;
}

struct mcp_method {
        const char *name;
        mcp_method_fn handler;
        bool before_init; /* allowed before initialize */
};

static const struct mcp_method methods[] = {
        { "initialize", method_initialize, true },
        { "ping", method_ping, true },
        { "tools/list", mcp_method_tools_list, false },
        { "tools/call", mcp_method_tools_call, false },
        { "resources/list", mcp_method_resources_list, false },
        { "resources/templates/list", mcp_method_resources_templates_list, false },
        { "resources/read", mcp_method_resources_read, false },
};

static void handle_notification(struct mcp_conn *c, const char *method)
{
        if (strcmp(method, "notifications/initialized") == 0) {
                (void) pthread_mutex_lock(&c->lock);
                c->client_ready = c->initialized;
                (void) pthread_mutex_unlock(&c->lock);
        }
        /* Others (cancelled, progress, roots/list_changed) need nothing from us: requests are
         * answered in order, and a running cell ends at its timeout. */
}

static json_t *result_reply(json_t *id, json_t *result)
{
        return json_pack("{s:s, s:O, s:O}", "jsonrpc", "2.0", "id", id, "result", result);
}

#define DELETED_BEFORE "the MCP session was deleted (DELETE /mcp); this request was not run"
#define DELETED_DURING                                                                             \
        "the MCP session was deleted (DELETE /mcp) while this request ran; its sandbox "           \
        "session was ended"

/* One message that is not a batch. in_batch: initialize may not be part of one. deadline_ns:
 * when a request must be done (its batch's), 0: never. */
static int handle_one(struct mcp_conn *c, json_t *msg, bool in_batch, uint64_t deadline_ns,
                      json_t **ret_reply)
{
        json_t *jsonrpc, *method, *id, *params;
        _cleanup_(json_decrefp) json_t *empty = NULL;
        struct mcp_rpc_error e = { 0 };
        const struct mcp_method *m = NULL;
        json_t *result = NULL;
        bool has_id;
        int r;

        *ret_reply = NULL;
        if (!json_is_object(msg)) {
                *ret_reply = mcp_error_reply(NULL, JSONRPC_INVALID_REQUEST,
                                             "invalid request: a JSON-RPC message is an object");
                return *ret_reply ? 0 : -ENOMEM;
        }
        jsonrpc = json_object_get(msg, "jsonrpc");
        method = json_object_get(msg, "method");
        id = json_object_get(msg, "id");
        params = json_object_get(msg, "params");
        has_id = id != NULL;
        /* MCP: an id is a string or an integer, never null (a null id would be unanswerable). */
        if (has_id && !json_is_string(id) && !json_is_integer(id)) {
                *ret_reply = mcp_error_reply(NULL, JSONRPC_INVALID_REQUEST,
                                             "invalid request: id must be a string or an integer");
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (!json_is_string(jsonrpc) || strcmp(json_string_value(jsonrpc), "2.0") != 0) {
                *ret_reply = mcp_error_reply(id, JSONRPC_INVALID_REQUEST,
                                             "invalid request: jsonrpc must be \"2.0\"");
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (!method) {
                /* A response to a request of ours: we send none, so there is nothing to match
                 * it with, and a response is never answered. */
                if (has_id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
                        return 0;
                *ret_reply =
                        mcp_error_reply(id, JSONRPC_INVALID_REQUEST, "invalid request: no method");
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (!json_is_string(method)) {
                *ret_reply = mcp_error_reply(id, JSONRPC_INVALID_REQUEST,
                                             "invalid request: method must be a string");
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (params && !json_is_object(params) && !json_is_array(params)) {
                if (!has_id)
                        return 0;
                *ret_reply = mcp_error_reply(id, JSONRPC_INVALID_REQUEST,
                                             "invalid request: params must be an object");
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (!has_id) {
                handle_notification(c, json_string_value(method));
                return 0;
        }

        for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                if (strcmp(methods[i].name, json_string_value(method)) == 0)
                        m = &methods[i];
        if (!m) {
                char buf[200];
                (void) snprintf(buf, sizeof(buf), "method not found: %.100s",
                                json_string_value(method));
                *ret_reply = mcp_error_reply(id, JSONRPC_METHOD_NOT_FOUND, buf);
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (json_is_array(params)) {
                *ret_reply = mcp_error_reply(id, JSONRPC_INVALID_PARAMS,
                                             "invalid params: MCP methods take an object");
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (in_batch && strcmp(m->name, "initialize") == 0) {
                *ret_reply = mcp_error_reply(id, JSONRPC_INVALID_REQUEST,
                                             "initialize must not be part of a JSON-RPC batch");
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (!m->before_init && !mcp_conn_is_initialized(c)) {
                *ret_reply = mcp_error_reply(id, JSONRPC_INVALID_REQUEST,
                                             "the connection is not initialized: send "
                                             "initialize first");
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (!params)
                params = empty = json_object();
        if (!params)
                return -ENOMEM;
        if (is_closed(c)) {
                *ret_reply = mcp_error_reply(id, MCP_SESSION_NOT_FOUND, DELETED_BEFORE);
                return *ret_reply ? 0 : -ENOMEM;
        }

        r = m->handler(c, &(struct mcp_request){ .params = params, .deadline_ns = deadline_ns },
                       &result, &e);
        if (r < 0 && r != -EPROTO) {
                json_decref(result);
                return r;
        }
        if (is_closed(c))
                /* Whatever it answered (a cell killed with its sandbox), the reason is this. */
                *ret_reply = mcp_error_reply(id, MCP_SESSION_NOT_FOUND, DELETED_DURING);
        else if (r == -EPROTO)
                *ret_reply = mcp_error_reply(id, e.code, e.message);
        else
                *ret_reply = result_reply(id, result);
        json_decref(result);
        return *ret_reply ? 0 : -ENOMEM;
}

/* The error a batch item gets without being run: none for a notification (or a response),
 * which is never answered; id null for an item too malformed to have one. */
static json_t *unrun_item_reply(json_t *item, int code, const char *message)
{
        json_t *id = json_object_get(item, "id");

        if (json_is_object(item) && (!id || !json_object_get(item, "method")))
                return NULL;
        if (id && !json_is_string(id) && !json_is_integer(id))
                id = NULL;
        return mcp_error_reply(id, code, message);
}

int mcp_conn_handle_json(struct mcp_conn *c, json_t *msg, json_t **ret_reply)
{
        _cleanup_(json_decrefp) json_t *replies = NULL;
        uint64_t deadline;
        char version[16];
        json_t *item;
        size_t i;
        int r;

        *ret_reply = NULL;
        if (!json_is_array(msg))
                return handle_one(c, msg, false, 0, ret_reply);

        mcp_conn_version(c, version);
        if (json_array_size(msg) == 0) {
                *ret_reply = mcp_error_reply(NULL, JSONRPC_INVALID_REQUEST,
                                             "invalid request: an empty batch");
                return *ret_reply ? 0 : -ENOMEM;
        }
        if (!mcp_version_allows_batch(version)) {
                char buf[200];
                (void) snprintf(buf, sizeof(buf),
                                "invalid request: JSON-RPC batches are not supported %s%s",
                                version[0] ? "in protocol version " : "before initialize", version);
                *ret_reply = mcp_error_reply(NULL, JSONRPC_INVALID_REQUEST, buf);
                return *ret_reply ? 0 : -ENOMEM;
        }

        if (json_array_size(msg) > MCP_BATCH_MAX) {
                char buf[200];
                (void) snprintf(buf, sizeof(buf),
                                "invalid request: a batch holds at most %d messages, this one has "
                                "%zu; send it in parts",
                                MCP_BATCH_MAX, json_array_size(msg));
                *ret_reply = mcp_error_reply(NULL, JSONRPC_INVALID_REQUEST, buf);
                return *ret_reply ? 0 : -ENOMEM;
        }

        replies = json_array();
        if (!replies)
                return -ENOMEM;
        deadline = now_ns() + c->batch_time_max_ms * 1000000ULL;
        json_array_foreach (msg, i, item) {
                json_t *reply = NULL;
                if (is_closed(c)) {
                        reply = unrun_item_reply(item, MCP_SESSION_NOT_FOUND, DELETED_BEFORE);
                } else if (now_ns() >= deadline) {
                        char buf[200];
                        (void) snprintf(buf, sizeof(buf),
                                        "this request was not run: its batch ran longer than "
                                        "%.3g s; send it again",
                                        (double) c->batch_time_max_ms / 1000.0);
                        reply = unrun_item_reply(item, MCP_SERVER_ERROR, buf);
                } else {
                        r = handle_one(c, item, true, deadline, &reply);
                        if (r < 0)
                                return r;
                }
                if (reply && json_array_append_new(replies, reply) < 0)
                        return -ENOMEM;
        }
        /* A batch of notifications and responses is answered with nothing at all. */
        if (json_array_size(replies) > 0)
                *ret_reply = TAKE_PTR(replies);
        return 0;
}

int mcp_conn_handle(struct mcp_conn *c, const char *text, size_t len, char **ret_reply)
{
        _cleanup_(json_decrefp) json_t *msg = NULL, *reply = NULL;
        json_error_t jerr;
        char *out;
        int r;

        *ret_reply = NULL;
        /* Duplicate keys are refused: {"method": "ping", "method": "tools/call"} would mean
         * one thing here and another to a proxy that read it first. */
        msg = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (!msg) {
                char buf[300];
                (void) snprintf(buf, sizeof(buf), "parse error: %s (at character %d)", jerr.text,
                                jerr.position);
                reply = mcp_error_reply(NULL, JSONRPC_PARSE_ERROR, buf);
        } else {
                r = mcp_conn_handle_json(c, msg, &reply);
                if (r < 0)
                        return r;
        }
        if (!reply)
                return 0;
        /* Compact output never holds a raw newline (strings escape theirs), which is what
         * newline-delimited stdio framing needs. */
        out = json_dump_text(reply, JSON_COMPACT, NULL);
        if (!out)
                return -ENOMEM;
        *ret_reply = out;
        return 0;
}
