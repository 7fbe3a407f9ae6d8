/* POST /v1/chat/completions: the chat-completions gateway. An OpenAI client pointed at the
 * daemon gets a model with a private code interpreter: src/chat/gateway.c checks the request
 * and runs the tool loop against the configured upstream; this file reads the request and its
 * headers (X-Airlock-Session, X-Airlock-Profile), checks that the conversation's session exists
 * and runs the profile asked for (or that the profile exists), and sends the answer, as JSON or,
 * for "stream": true, as Server-Sent Events. */
#include "api-internal.h"

#include "base/cleanup.h"
#include "chat/gateway.h"
#include "forward.h"
#include "profile/profile.h"
#include "session/session.h"
#include "tools/tools.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int reply_gateway(struct api_request *req, struct chat_gateway_reply *g)
{
        struct MHD_Response *resp;
        char *sse;

        if (!g->stream || g->status != 200)
                return api_reply_json_header(req, g->status, json_incref(g->body),
                                             g->session[0] ? CHAT_GATEWAY_SESSION_HEADER : NULL,
                                             g->session);
        sse = chat_gateway_sse(g->body);
        if (!sse)
                return -ENOMEM;
        resp = MHD_create_response_from_buffer(strlen(sse), sse, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(sse);
                return -ENOMEM;
        }
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        if (g->session[0])
                (void) MHD_add_response_header(resp, CHAT_GATEWAY_SESSION_HEADER, g->session);
        return api_reply_response(req, 200, resp);
}

/* Checks that profile exists; 0, or an error reply in g naming the profiles that do. */
static int check_profile_exists(const char *profile, const char *param,
                                struct chat_gateway_reply *g)
{
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_free_ char *list = NULL;
        size_t len = 0;

        if (profile_list(&names) < 0)
                return -ENOMEM;
        for (char **n = names; n && *n; n++) {
                if (strcmp(*n, profile) == 0)
                        return 0;
                len += strlen(*n) + 2;
        }
        list = calloc(1, len + 1);
        if (!list)
                return -ENOMEM;
        for (char **n = names; n && *n; n++) {
                if (n != names)
                        strcat(list, ", ");
                strcat(list, *n);
        }
        return chat_gateway_reply_error(g, 400, "invalid_request_error", param,
                                        "unknown profile '%s' (%s): the profiles are %s", profile,
                                        param, *list ? list : "(none)") < 0
                       ? -ENOMEM
                       : 1;
}

/* Checks the plan's session and profile. Returns 0 with *ret_profile (the session's, borrowed
 * from *ret_desc, or the one asked for, or NULL), 1 when a reply was sent or filled in g
 * (*ret_sent tells which), or -errno. */
static int check_session_and_profile(struct api_request *req, struct chat_gateway_plan *plan,
                                     struct chat_gateway_reply *g, json_t **ret_desc,
                                     const char **ret_profile, bool *ret_sent)
{
        const char *asked = plan->profile_param ? plan->profile : NULL, *running;
        json_t *desc;
        int r;

        *ret_sent = false;
        *ret_profile = plan->profile[0] ? plan->profile : NULL;
        if (!plan->session[0]) {
                if (!asked)
                        return 0;
                return check_profile_exists(asked, plan->profile_param, g);
        }
        /* A stopped session counts: its next tool call resumes it. */
        desc = session_describe_id(req->srv->mgr, plan->session);
        if (!desc) {
                *ret_sent = true;
                r = api_reply_session_gone(req, plan->session);
                return r < 0 ? r : 1;
        }
        *ret_desc = desc;
        running = json_string_value(json_object_get(desc, "profile"));
        if (asked && running && strcmp(asked, running) != 0) {
                r = chat_gateway_reply_error(g, 409, "invalid_request_error", plan->profile_param,
                                             "session %s runs the profile '%s', not '%s' (%s): "
                                             "a session keeps its profile; start a new "
                                             "conversation for another one",
                                             plan->session, running, asked, plan->profile_param);
                return r < 0 ? r : 1;
        }
        *ret_profile = running;
        return 0;
}

int api_handle_chat_completions(struct api_request *req)
{
        _cleanup_(chat_gateway_plan_done) struct chat_gateway_plan plan = {};
        struct chat_gateway_reply g = {};
        struct tools_backend *backend = NULL;
        const char *profile = NULL;
        json_t *desc = NULL;
        json_error_t jerr;
        bool sent = false;
        json_t *body;
        int r;

        body = json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(body)) {
                json_decref(body);
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "body",
                                       "the body must be a JSON object (a chat completions "
                                       "request)");
        }
        /* Continuing another node's session or suspended turn: that node answers (forward.h). */
        r = api_forward_for_body(req, body);
        if (r != 0) {
                json_decref(body);
                return r < 0 ? r : 0;
        }
        r = chat_gateway_prepare(req->srv->chat, body, api_header(req, CHAT_GATEWAY_SESSION_HEADER),
                                 api_header(req, CHAT_GATEWAY_PROFILE_HEADER), &plan, &g);
        if (r > 0)
                r = check_session_and_profile(req, &plan, &g, &desc, &profile, &sent);
        else if (r == 0)
                r = 1;
        if (r == 0) {
                r = tools_backend_local_new(req->srv->mgr, &backend);
                if (r >= 0)
                        r = chat_gateway_run(req->srv->chat, backend, &plan, profile,
                                             &req->srv->stopping, &g);
                tools_backend_free(backend);
        }
        json_decref(desc);
        json_decref(body);
        if (r >= 0 && !sent)
                r = reply_gateway(req, &g);
        chat_gateway_reply_done(&g);
        return r;
}
