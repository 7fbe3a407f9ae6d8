/* POST /v1/chat/completions: the chat-completions gateway. An OpenAI client pointed at the
 * daemon gets a model with a private code interpreter: src/chat/gateway.c runs the tool loop
 * against the configured upstream; this file reads the request, finds the conversation's
 * session (a "session" member or the X-Airlock-Session header) and sends the answer, as JSON
 * or, for "stream": true, as Server-Sent Events. */
#include "api-internal.h"

#include "base/cleanup.h"
#include "chat/gateway.h"
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

int api_handle_chat_completions(struct api_request *req)
{
        struct chat_gateway_reply g = {};
        struct tools_backend *backend = NULL;
        const char *header = api_header(req, CHAT_GATEWAY_SESSION_HEADER);
        const char *id = NULL;
        json_error_t jerr;
        json_t *body, *field;
        int r;

        body = json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(body)) {
                json_decref(body);
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "body",
                                       "the body must be a JSON object (a chat completions "
                                       "request)");
        }
        field = json_object_get(body, "session");
        if (field && !json_is_null(field) && !json_is_string(field)) {
                json_decref(body);
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "session",
                                       "field 'session' must be a session id string");
        }
        id = json_string_value(field);
        if (header && *header) {
                if (id && strcmp(id, header) != 0) {
                        json_decref(body);
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "session",
                                               "the 'session' field and the %s header name "
                                               "different sessions",
                                               CHAT_GATEWAY_SESSION_HEADER);
                }
                id = header;
        }
        if (id) {
                /* A stopped session counts: its next tool call resumes it. */
                json_t *desc = session_describe_id(req->srv->mgr, id);

                if (!desc) {
                        r = api_reply_session_gone(req, id);
                        json_decref(body);
                        return r;
                }
                json_decref(desc);
        }

        r = tools_backend_local_new(req->srv->mgr, &backend);
        if (r >= 0)
                r = chat_gateway_complete(req->srv->chat, backend, body, id, &req->srv->stopping,
                                          &g);
        json_decref(body);
        tools_backend_free(backend);
        if (r < 0)
                return r;
        r = reply_gateway(req, &g);
        chat_gateway_reply_done(&g);
        return r;
}
