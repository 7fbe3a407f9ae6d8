/* The code context routes of a session (docs/API.md, "Contexts"): list, create, delete and
 * restart its Python interpreters. Thin: the runner forks and ends them (runner.c, "Code
 * contexts"), the session layer reaches it between cells; this file maps errnos to statuses. */
#include "api-internal.h"

#include "base/util.h"
#include "router.h"
#include "session/session.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* The session's interpreter, which every session has; created contexts are "ctx-" + hex. */
#define CONTEXT_DEFAULT "default"

/* Runs a context op on the session of the route; the reply for a failure, or 0 and *ret_ids. */
static int context_op(struct api_request *req, const char *op, const char *id, json_t **ret_ids)
{
        struct airlock_error err = { { 0 } };
        struct session *s = NULL;
        int r;

        r = session_lookup(req->srv->mgr, req->params.id, &s, &err);
        if (r == -ENOENT)
                return api_reply_session_gone(req, req->params.id);
        if (r < 0)
                return api_reply_errno(req, r, NULL, err.msg);
        r = session_context(s, op, id, ret_ids, &err);
        session_unref(s);
        if (r == -EUSERS)
                return api_reply_error(req, MHD_HTTP_CONFLICT, "context", "%s", err.msg);
        if (r == -ENOENT && id)
                return api_reply_error(req, MHD_HTTP_NOT_FOUND, "context",
                                       "context '%.64s' not found in session %s", id,
                                       req->params.id);
        if (r < 0)
                return api_reply_errno(req, r, "context", err.msg);
        return 0;
}

static json_t *context_object(const char *id)
{
        return json_pack("{s:s, s:s}", "id", id, "language", "python");
}

int api_handle_context_list(struct api_request *req)
{
        json_t *ids = NULL, *list, *v;
        size_t i;
        int r;

        r = context_op(req, "ctx_list", NULL, &ids);
        if (r != 0 || !ids)
                return r ? r : -ENOMEM;
        list = json_array();
        (void) json_array_append_new(list, context_object(CONTEXT_DEFAULT));
        json_array_foreach (ids, i, v)
                (void) json_array_append_new(list, context_object(json_string_value(v)));
        json_decref(ids);
        return api_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "contexts", list));
}

int api_handle_context_create(struct api_request *req)
{
        json_t *root = NULL;
        const char *language = NULL;
        char id[4 + 16 + 1] = "ctx-";
        int r;

        if (req->body_len > 0) {
                root = json_loadb(req->body, req->body_len, 0, NULL);
                if (!json_is_object(root)) {
                        json_decref(root);
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, NULL,
                                               "the body is a JSON object: {\"language\": "
                                               "\"python\"} or empty");
                }
                language = json_string_value(json_object_get(root, "language"));
                if (json_object_get(root, "language") &&
                    (!language || strcmp(language, "python"))) {
                        json_decref(root);
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "language",
                                               "language: a created context runs python only "
                                               "(bash and javascript cells run in the session's "
                                               "own shell and REPL)");
                }
                json_decref(root);
        }
        r = random_hex(id + 4, 8);
        if (r < 0)
                return r;
        r = context_op(req, "ctx_new", id, NULL);
        if (r != 0)
                return r;
        return api_reply_json(req, MHD_HTTP_CREATED, context_object(id));
}

int api_handle_context_delete(struct api_request *req)
{
        int r;

        if (strcmp(req->params.sub, CONTEXT_DEFAULT) == 0)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "context",
                                       "the default context is the session itself: delete the "
                                       "session, or restart the context");
        r = context_op(req, "ctx_del", req->params.sub, NULL);
        return r != 0 ? r : api_reply_json(req, MHD_HTTP_NO_CONTENT, NULL);
}

int api_handle_context_restart(struct api_request *req)
{
        bool is_default = strcmp(req->params.sub, CONTEXT_DEFAULT) == 0;
        int r;

        r = context_op(req, "ctx_restart", is_default ? NULL : req->params.sub, NULL);
        if (r != 0)
                return r;
        return api_reply_json(req, MHD_HTTP_OK, context_object(req->params.sub));
}
