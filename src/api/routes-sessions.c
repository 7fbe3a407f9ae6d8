/* The session routes: create, list, inspect, change (PATCH), delete, interrupt, stop, resume and
 * fork. Thin on
 * purpose: validation is json-body.c's, lifecycle is the session module's; this file maps one
 * onto the other and each errno onto the status DESIGN.md section 4 and docs/API.md promise. */
#include "api-internal.h"
#include "cluster-list.h"

#include "base/cleanup.h"
#include "json-body.h"
#include "router.h"
#include "session/session.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The session layer's messages name the field in prose; pick it out so the reply carries it
 * as "field" too. */
static const char *field_in_message(const char *msg, const char *const *candidates)
{
        for (size_t i = 0; candidates[i]; i++)
                if (strstr(msg, candidates[i]))
                        return candidates[i];
        return NULL;
}

int api_handle_session_create(struct api_request *req)
{
        static const char *const fields[] = {
                "stop_after_s", "profile",    "env",       "code_tools", "approved_tools",
                "metadata",     "lifetime_s", "timeout_s", "network",    NULL
        };
        _cleanup_strv_free_ char **env = NULL, **code_tools = NULL, **approved = NULL;
        struct airlock_error err = { { 0 } };
        struct body_error berr = { { 0 } };
        struct session_body body;
        struct session *s = NULL;
        json_t *root = NULL, *desc;
        char location[64];
        int r;

        r = session_body_parse(req->body, req->body_len, &root, &body, &berr);
        if (r == -EINVAL)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, berr.field, "%s", berr.msg);
        if (r < 0)
                return r;
        env = body.env;
        code_tools = body.code_tools;
        approved = body.approved_tools;
        r = session_create(req->srv->mgr,
                           &(struct session_create_options){ .profile = body.profile,
                                                             .stop_after_ms = body.stop_after_ms,
                                                             .env = env,
                                                             .code_tools = code_tools,
                                                             .approved_tools = approved,
                                                             .metadata = body.metadata,
                                                             .lifetime_s = body.lifetime_s,
                                                             .timeout_ms = body.timeout_ms,
                                                             .network = body.network },
                           &s, &err);
        json_decref(root);
        if (r == -ENOENT)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "profile", "%s",
                                       err.msg[0] ? err.msg : "unknown profile");
        if (r == -EINVAL)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, field_in_message(err.msg, fields),
                                       "%s", err.msg);
        if (r == -EPERM) /* a network wider than the profile's */
                return api_reply_error(req, MHD_HTTP_FORBIDDEN, "network", "%s", err.msg);
        if (r < 0)
                return api_reply_errno(req, r, NULL, err.msg);

        (void) snprintf(location, sizeof(location), "/v1/sessions/%s", session_id(s));
        desc = session_describe(s);
        session_unref(s);
        if (!desc)
                return -ENOMEM;
        return api_reply_json_header(req, MHD_HTTP_CREATED, desc, MHD_HTTP_HEADER_LOCATION,
                                     location);
}

/* The metadata.KEY=VALUE filters of a listing, percent-decoded, gathered into an object. */
struct list_query {
        json_t *filter;
        struct body_error err;
        int r;
};

static enum MHD_Result scan_metadata_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                         const char *value)
{
        struct list_query *q = cls;
        char k[128], v[2048];

        (void) kind;
        if (q->r < 0 || !key || strncmp(key, "metadata.", 9) != 0)
                return MHD_YES;
        if (percent_decode(key + 9, strlen(key + 9), true, k, sizeof(k)) < 0 ||
            percent_decode(value ? value : "", value ? strlen(value) : 0, true, v, sizeof(v)) < 0) {
                (void) snprintf(q->err.field, sizeof(q->err.field), "metadata");
                (void) snprintf(q->err.msg, sizeof(q->err.msg),
                                "a metadata filter has a malformed percent-escape, an escaped NUL "
                                "or is too long");
                q->r = -EINVAL;
                return MHD_NO;
        }
        q->r = body_metadata_filter_add(&q->filter, k, v, &q->err);
        return q->r < 0 ? MHD_NO : MHD_YES;
}

/* ?usage=live: each live session's usage gains what its cgroup says now (memory_current_bytes,
 * cpu_total_ms), for views that poll (the dashboard's sparklines). Opt-in: it reads a few
 * kernel files per session. */
static void add_usage_now(struct session_manager *mgr, json_t *list)
{
        json_t *d;
        size_t i;

        json_array_foreach (list, i, d) {
                const char *id = json_string_value(json_object_get(d, "id"));
                json_t *usage = json_object_get(d, "usage"), *now;
                struct session *s = NULL;

                if (!id || !json_is_object(usage) || session_find(mgr, id, &s) < 0)
                        continue;
                now = session_usage_now(s);
                session_unref(s);
                if (now)
                        (void) json_object_update(usage, now);
                json_decref(now);
        }
}

int api_handle_session_list(struct api_request *req)
{
        static const char *const states[] = { "idle", "busy", "stopped", "live", NULL };
        const char *state = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "state");
        const char *usage = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "usage");
        struct list_query q = { 0 };
        json_t *list;
        bool known = !state;

        for (size_t i = 0; state && states[i]; i++)
                known |= strcmp(state, states[i]) == 0;
        if (!known)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "state",
                                       "state: expected idle, busy, stopped or live");
        if (usage && strcmp(usage, "live") != 0)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "usage",
                                       "usage: expected live (or leave it out)");
        (void) MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, scan_metadata_arg, &q);
        if (q.r < 0) {
                json_decref(q.filter);
                if (q.r != -EINVAL)
                        return q.r;
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, q.err.field, "%s", q.err.msg);
        }
        list = session_list_filtered(req->srv->mgr, state, q.filter);
        json_decref(q.filter);
        if (!list)
                return -ENOMEM;
        if (usage)
                add_usage_now(req->srv->mgr, list);
        return api_reply_cluster_list(req, json_pack("{s:o}", "sessions", list),
                                      CLUSTER_LIST_SESSIONS);
}

int api_handle_session_patch(struct api_request *req)
{
        static const char *const fields[] = { "stop_after_s", "lifetime_s", "timeout_s", "metadata",
                                              NULL };
        struct airlock_error err = { { 0 } };
        struct body_error berr = { { 0 } };
        struct session_patch_body body;
        json_t *root = NULL, *desc = NULL;
        int r;

        r = session_patch_body_parse(req->body, req->body_len, &root, &body, &berr);
        if (r == -EINVAL)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, berr.field, "%s", berr.msg);
        if (r < 0)
                return r;
        r = session_update(req->srv->mgr, req->params.id,
                           &(struct session_patch){ .has_stop_after = body.has_stop_after,
                                                    .stop_after_ms = body.stop_after_ms,
                                                    .has_lifetime = body.has_lifetime,
                                                    .lifetime_s = body.lifetime_s,
                                                    .has_timeout = body.has_timeout,
                                                    .timeout_ms = body.timeout_ms,
                                                    .metadata = body.metadata },
                           &desc, &err);
        json_decref(root);
        if (r == -ENOENT)
                return api_reply_session_gone(req, req->params.id);
        if (r == -EINVAL)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, field_in_message(err.msg, fields),
                                       "%s", err.msg);
        if (r < 0)
                return api_reply_errno(req, r, NULL, err.msg);
        return api_reply_json(req, MHD_HTTP_OK, desc);
}

int api_handle_session_get(struct api_request *req)
{
        json_t *desc = session_describe_id(req->srv->mgr, req->params.id);

        if (!desc)
                return api_reply_session_gone(req, req->params.id);
        return api_reply_json(req, MHD_HTTP_OK, desc);
}

int api_inline_session_get(struct api_request *req)
{
        json_t *desc = NULL;
        int r = session_describe_nowait(req->srv->mgr, req->params.id, &desc);

        if (r == -EAGAIN)
                return 0;
        if (r < 0)
                return r;
        r = api_reply_json(req, MHD_HTTP_OK, desc);
        return r < 0 ? r : 1;
}

int api_handle_session_delete(struct api_request *req)
{
        int r;

        r = session_destroy(req->srv->mgr, req->params.id);
        if (r == -ENOENT)
                return api_reply_session_gone(req, req->params.id);
        if (r < 0)
                return api_reply_errno(req, r, NULL, NULL);
        return api_reply_json(req, MHD_HTTP_OK,
                              json_pack("{s:s, s:b}", "id", req->params.id, "deleted", 1));
}

int api_handle_session_interrupt(struct api_request *req)
{
        struct session *s = NULL;
        const char *state;
        json_t *desc;
        bool was_busy;
        int r;

        /* Never resumes: a stopped session runs nothing to interrupt. */
        r = session_find(req->srv->mgr, req->params.id, &s);
        if (r == -ENOENT) {
                desc = session_describe_id(req->srv->mgr, req->params.id);
                if (!desc)
                        return api_reply_session_gone(req, req->params.id);
                json_decref(desc);
                return api_reply_json(
                        req, MHD_HTTP_OK,
                        json_pack("{s:s, s:b}", "id", req->params.id, "interrupted", 0));
        }
        desc = session_describe(s);
        state = json_string_value(json_object_get(desc, "state"));
        was_busy = state && strcmp(state, "busy") == 0;
        json_decref(desc);
        r = session_interrupt(s);
        session_unref(s);
        if (r == -ENOENT)
                return api_reply_session_gone(req, req->params.id);
        if (r < 0)
                return api_reply_errno(req, r, NULL, NULL);
        return api_reply_json(
                req, MHD_HTTP_OK,
                json_pack("{s:s, s:b}", "id", req->params.id, "interrupted", was_busy));
}

/* Errors of stop, resume and fork: a save that did not fit is 507 whatever the cause (the
 * disk, or the per-session bound), a daemon without a state directory 409. */
static int reply_lifecycle_error(struct api_request *req, int r, const struct airlock_error *err,
                                 const char *field)
{
        const char *msg = err->msg[0] ? err->msg : strerror(-r);

        if (r == -ENOENT)
                return api_reply_session_gone(req, req->params.id);
        if (r == -EFBIG || r == -ENOSPC || r == -EDQUOT)
                return api_reply_error(req, MHD_HTTP_INSUFFICIENT_STORAGE, NULL, "%s", msg);
        if (r == -EOPNOTSUPP)
                return api_reply_error(req, MHD_HTTP_CONFLICT, NULL, "%s", msg);
        return api_reply_errno(req, r, field, msg);
}

int api_handle_session_stop(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        json_t *desc = NULL;
        int r;

        r = session_stop(req->srv->mgr, req->params.id, &desc, &err);
        if (r < 0)
                return reply_lifecycle_error(req, r, &err, NULL);
        return api_reply_json(req, MHD_HTTP_OK, desc);
}

int api_handle_session_resume(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        json_t *desc = NULL;
        int r;

        r = session_resume(req->srv->mgr, req->params.id, &desc, &err);
        if (r < 0)
                return reply_lifecycle_error(req, r, &err, NULL);
        return api_reply_json(req, MHD_HTTP_OK, desc);
}

int api_handle_session_fork(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        json_t *root = NULL, *n_json, *children = NULL;
        json_int_t n = 1;
        int r;

        if (req->body_len > 0) {
                json_error_t jerr;
                root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
                if (!json_is_object(root)) {
                        json_decref(root);
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, NULL,
                                               "the body must be a JSON object like {\"n\": 3}");
                }
                n_json = json_object_get(root, "n");
                if (n_json && !json_is_integer(n_json)) {
                        json_decref(root);
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "n",
                                               "n: expected an integer from 1 to %d",
                                               SESSION_FORK_MAX);
                }
                if (n_json)
                        n = json_integer_value(n_json);
                json_decref(root);
        }
        if (n < 1 || n > SESSION_FORK_MAX)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "n",
                                       "n: expected an integer from 1 to %d, got %lld",
                                       SESSION_FORK_MAX, (long long) n);
        r = session_fork(req->srv->mgr, req->params.id, (unsigned) n, &children, &err);
        if (r < 0)
                return reply_lifecycle_error(req, r, &err, "n");
        return api_reply_json(req, MHD_HTTP_CREATED, json_pack("{s:o}", "sessions", children));
}
