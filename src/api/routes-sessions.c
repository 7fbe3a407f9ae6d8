/* The session routes: create, list, inspect, delete, interrupt. Thin on purpose: validation
 * is json-body.c's, lifecycle is session.c's; this file maps one onto the other and each errno
 * onto the status DESIGN.md section 4 promises. */
#include "api-internal.h"

#include "base/cleanup.h"
#include "json-body.h"
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
        static const char *const fields[] = { "idle_timeout_s", "profile", "env", NULL };
        _cleanup_strv_free_ char **env = NULL;
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
        r = session_create(
                req->srv->mgr,
                &(struct session_create_options){ .profile = body.profile,
                                                  .idle_timeout_ms = body.idle_timeout_ms,
                                                  .env = env },
                &s, &err);
        json_decref(root);
        if (r == -ENOENT)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "profile", "%s",
                                       err.msg[0] ? err.msg : "unknown profile");
        if (r == -EINVAL)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, field_in_message(err.msg, fields),
                                       "%s", err.msg);
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

int api_handle_session_list(struct api_request *req)
{
        json_t *list = session_list(req->srv->mgr);

        if (!list)
                return -ENOMEM;
        return api_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "sessions", list));
}

int api_handle_session_get(struct api_request *req)
{
        struct session *s = NULL;
        json_t *desc;
        int r;

        r = session_lookup(req->srv->mgr, req->params.id, &s);
        if (r == -ENOENT)
                return api_reply_session_gone(req, req->params.id);
        if (r < 0)
                return api_reply_errno(req, r, NULL, NULL);
        desc = session_describe(s);
        session_unref(s);
        if (!desc)
                return -ENOMEM;
        return api_reply_json(req, MHD_HTTP_OK, desc);
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

        r = session_lookup(req->srv->mgr, req->params.id, &s);
        if (r == -ENOENT)
                return api_reply_session_gone(req, req->params.id);
        if (r < 0)
                return api_reply_errno(req, r, NULL, NULL);
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
