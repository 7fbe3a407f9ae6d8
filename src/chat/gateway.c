/* The gateway's request handling (see gateway.h): checks the client's request, runs chat_run()
 * against the upstream with a toolbox whose session outlives the request, and shapes the
 * answer as a chat completion, or as an error in OpenAI's shape, which is what the clients of
 * this endpoint (OpenAI SDKs) know how to read. */
#include "gateway.h"

#include "base/cleanup.h"
#include "chat.h"
#include "tools/tools.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define _cleanup_json_ _cleanup_(json_decrefp)

void chat_gateway_reply_done(struct chat_gateway_reply *reply)
{
        json_decref(reply->body);
        *reply = (struct chat_gateway_reply){};
}

static int reply_error(struct chat_gateway_reply *ret, unsigned status, const char *type,
                       const char *param, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

static int reply_error(struct chat_gateway_reply *ret, unsigned status, const char *type,
                       const char *param, const char *fmt, ...)
{
        char msg[1200];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        ret->status = status;
        ret->body = json_pack("{s:{s:s, s:s, s:s?, s:n}}", "error", "message", msg, "type", type,
                              "param", param, "code");
        return ret->body ? 0 : -ENOMEM;
}

/* The request members the gateway owns: the client may not set them. */
static const char *const refused_members[] = { "tools", "tool_choice", "functions", "function_call",
                                               "parallel_tool_calls" };

/* Checks the client's request; on success *ret_req is the request to send upstream (a copy,
 * without the gateway's own members). Returns 1, or 0 with an error reply filled. */
static int check_request(const struct chat_gateway_config *cfg, json_t *body,
                         struct chat_gateway_reply *ret, json_t **ret_req)
{
        json_t *messages = json_object_get(body, "messages"), *m, *n, *stream;
        _cleanup_json_ json_t *req = NULL;
        size_t i;

        if (!json_is_object(body))
                return reply_error(ret, 400, "invalid_request_error", NULL,
                                   "the request body must be a JSON object");
        if (!json_is_array(messages) || json_array_size(messages) == 0)
                return reply_error(ret, 400, "invalid_request_error", "messages",
                                   "'messages' must be a non-empty array of messages");
        json_array_foreach (messages, i, m)
                if (!json_is_object(m) || !json_is_string(json_object_get(m, "role")))
                        return reply_error(ret, 400, "invalid_request_error", "messages",
                                           "messages[%zu] must be an object with a 'role'", i);
        for (i = 0; i < sizeof(refused_members) / sizeof(refused_members[0]); i++)
                if (json_object_get(body, refused_members[i]))
                        return reply_error(
                                ret, 400, "invalid_request_error", refused_members[i],
                                "'%s' is not accepted: the gateway declares its own tools "
                                "(run_python, run_shell, write_file, read_file, list_files, "
                                "reset_session) and runs them itself",
                                refused_members[i]);
        n = json_object_get(body, "n");
        if (n && !json_is_null(n) && !(json_is_integer(n) && json_integer_value(n) == 1))
                return reply_error(ret, 400, "invalid_request_error", "n",
                                   "'n' must be 1: the gateway runs one conversation");
        stream = json_object_get(body, "stream");
        if (stream && !json_is_boolean(stream) && !json_is_null(stream))
                return reply_error(ret, 400, "invalid_request_error", "stream",
                                   "'stream' must be true or false");
        ret->stream = json_is_true(stream);
        if (!json_is_string(json_object_get(body, "model")) && !cfg->model)
                return reply_error(ret, 400, "invalid_request_error", "model",
                                   "no 'model' in the request and none configured "
                                   "(airlock serve --llm-model or AIRLOCK_LLM_MODEL)");

        req = json_deep_copy(body);
        if (!req)
                return -ENOMEM;
        (void) json_object_del(req, "session");
        /* The upstream answers in one piece; a streaming client gets it as events. */
        (void) json_object_del(req, "stream");
        (void) json_object_del(req, "stream_options");
        if (!json_is_string(json_object_get(req, "model")) &&
            json_object_set_new(req, "model", json_string(cfg->model)) < 0)
                return -ENOMEM;
        *ret_req = TAKE_PTR(req);
        return 1;
}

static int upstream_error(struct chat_gateway_reply *ret, int r, const struct llm_error *err)
{
        switch (r) {
        case -ECONNREFUSED:
                return reply_error(ret, 502, "upstream_unreachable", NULL, "%s", err->msg);
        case -ETIMEDOUT:
                return reply_error(ret, 504, "upstream_timeout", NULL, "%s", err->msg);
        case -EPROTO:
                /* The client's own mistakes (a bad message, too many tokens, rate limits)
                 * keep their status; the gateway's (a wrong key, a broken upstream) are 502. */
                if (err->http_status >= 400 && err->http_status < 500 && err->http_status != 401 &&
                    err->http_status != 403 && err->http_status != 404)
                        return reply_error(ret, (unsigned) err->http_status, "upstream_error", NULL,
                                           "%s", err->msg);
                return reply_error(ret, 502, "upstream_error", NULL, "%s", err->msg);
        case -EBADMSG:
        case -E2BIG:
                return reply_error(ret, 502, "upstream_malformed", NULL, "%s", err->msg);
        case -ECANCELED:
                return reply_error(ret, 503, "server_shutting_down", NULL,
                                   "the daemon is shutting down");
        case -EINVAL:
                return reply_error(ret, 400, "invalid_request_error", "messages", "%s", err->msg);
        default:
                return r == -ENOMEM ? -ENOMEM
                                    : reply_error(ret, 500, "server_error", NULL,
                                                  "the gateway failed: %s", strerror(-r));
        }
}

/* The text returned in place of an answer when the gateway may not run code. */
static char *approval_text(json_t *message, json_t *pending)
{
        const char *content = json_string_value(json_object_get(message, "content"));
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        json_t *p;
        size_t i;

        if (!f)
                return NULL;
        if (content && *content)
                fprintf(f, "%s\n\n", content);
        fputs("airlock: this gateway requires approval before running code, so nothing was "
              "run. The model proposed:\n",
              f);
        json_array_foreach (pending, i, p) {
                const char *name = json_string_value(json_object_get(p, "name"));
                json_t *args = json_object_get(p, "arguments");
                const char *code = json_string_value(json_object_get(args, "code"));
                const char *cmd = json_string_value(json_object_get(args, "command"));

                if (code)
                        fprintf(f, "\n```python\n%s\n```\n", code);
                else if (cmd)
                        fprintf(f, "\n```sh\n%s\n```\n", cmd);
                else
                        fprintf(f, "\n%s (not run)\n", name ? name : "a tool call");
        }
        if (fclose(f) != 0) {
                free(out);
                return NULL;
        }
        return out;
}

/* Drops the members of the call summaries a client does not need twice, keeping them
 * readable: the arguments, whether it failed, its output (cut), files and images. */
static json_t *airlock_member(const struct chat_turn *t, const char *session)
{
        const char *stopped = t->outcome == CHAT_MAX_ROUNDS       ? "max_rounds"
                              : t->outcome == CHAT_NEEDS_APPROVAL ? "approval_required"
                                                                  : NULL;
        json_t *a = json_pack("{s:s?, s:I, s:O, s:s?}", "session", *session ? session : NULL,
                              "rounds", (json_int_t) t->rounds, "tool_calls",
                              t->calls ? t->calls : json_array(), "stopped", stopped);

        if (a && t->pending && json_object_set(a, "pending", t->pending) < 0) {
                json_decref(a);
                return NULL;
        }
        return a;
}

static json_t *completion(const struct chat_turn *t, const char *session, const char *model)
{
        json_t *choice0 = json_array_get(json_object_get(t->response, "choices"), 0);
        const char *id = json_string_value(json_object_get(t->response, "id"));
        const char *rmodel = json_string_value(json_object_get(t->response, "model"));
        json_t *created = json_object_get(t->response, "created");
        const char *finish = json_string_value(json_object_get(choice0, "finish_reason"));
        _cleanup_free_ char *text = NULL, *made_id = NULL;
        json_t *content = json_object_get(t->message, "content"), *out, *a, *value;

        switch (t->outcome) {
        case CHAT_ANSWERED:
                if (!finish || strcmp(finish, "tool_calls") == 0)
                        finish = "stop";
                break;
        case CHAT_MAX_ROUNDS:
                if (asprintf(&text,
                             "airlock: stopped after %u tool rounds without a final answer "
                             "(the gateway's round limit)",
                             t->rounds) < 0) {
                        text = NULL; /* undefined after a failure (asprintf(3)) */
                        return NULL;
                }
                finish = "length";
                break;
        case CHAT_NEEDS_APPROVAL:
                text = approval_text(t->message, t->pending);
                if (!text)
                        return NULL;
                finish = "stop";
                break;
        }
        if (!id) {
                if (asprintf(&made_id, "chatcmpl-airlock-%lld", (long long) time(NULL)) < 0) {
                        made_id = NULL;
                        return NULL;
                }
                id = made_id;
        }
        value = text ? json_string(text) : json_incref(content ? content : json_null());
        /* "o" takes over value, also when json_pack fails. */
        out = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:{s:s, s:o}, s:s}]}", "id", id, "object",
                        "chat.completion", "created",
                        json_is_integer(created) ? json_integer_value(created)
                                                 : (json_int_t) time(NULL),
                        "model", rmodel ? rmodel : model, "choices", "index", 0, "message", "role",
                        "assistant", "content", value, "finish_reason", finish);
        if (!out)
                return NULL;
        if (t->usage && json_object_set(out, "usage", t->usage) < 0)
                goto fail;
        a = airlock_member(t, session);
        if (!a || json_object_set_new(out, "airlock", a) < 0)
                goto fail;
        return out;
fail:
        json_decref(out);
        return NULL;
}

int chat_gateway_complete(const struct chat_gateway_config *cfg, struct tools_backend *backend,
                          json_t *body, const char *session_id, const atomic_bool *cancel,
                          struct chat_gateway_reply *ret)
{
        _cleanup_json_ json_t *req = NULL;
        struct llm_client *llm = NULL;
        struct toolbox *tb = NULL;
        struct chat_turn turn = {};
        struct llm_error err = {};
        int r;

        *ret = (struct chat_gateway_reply){};
        if (session_id)
                (void) snprintf(ret->session, sizeof(ret->session), "%s", session_id);
        if (!cfg || !cfg->base_url)
                return reply_error(ret, 503, "gateway_not_configured", NULL,
                                   "the chat-completions gateway is not configured: start the "
                                   "daemon with --llm-base-url (or AIRLOCK_LLM_BASE_URL)");
        r = check_request(cfg, body, ret, &req);
        if (r <= 0)
                return r;

        r = llm_client_new(&(struct llm_config){ .base_url = cfg->base_url,
                                                 .api_key = cfg->api_key,
                                                 .timeout_ms = cfg->timeout_ms,
                                                 .cancel = cancel },
                           &llm);
        if (r < 0)
                return r == -ENOMEM ? r
                                    : reply_error(ret, 500, "server_error", NULL,
                                                  "cannot set up the upstream client");
        r = toolbox_new(backend,
                        &(struct toolbox_options){ .profile = cfg->profile,
                                                   .session_id = session_id,
                                                   .keep_session = true,
                                                   .hub = cfg->hub },
                        &tb);
        if (r < 0) {
                llm_client_free(llm);
                return r;
        }

        r = chat_run(llm, tb, req,
                     &(struct chat_options){ .max_rounds = cfg->max_rounds,
                                             .refuse_code = cfg->require_approval },
                     &turn, &err);
        /* A session the loop started (or a new one after reset_session) is the one to
         * continue with, whatever happened next. */
        if (toolbox_session_id(tb, ret->session, sizeof(ret->session)) < 0 && !session_id)
                ret->session[0] = '\0';
        if (r < 0) {
                r = upstream_error(ret, r, &err);
                if (r >= 0 && ret->body && ret->session[0])
                        (void) json_object_set_new(ret->body, "airlock",
                                                   json_pack("{s:s}", "session", ret->session));
        } else {
                ret->status = 200;
                ret->body = completion(&turn, ret->session,
                                       json_string_value(json_object_get(req, "model")));
                r = ret->body ? 0 : -ENOMEM;
        }
        chat_turn_done(&turn);
        toolbox_free(tb);
        llm_client_free(llm);
        return r;
}

static int sse_event(FILE *f, json_t *obj)
{
        _cleanup_free_ char *text = json_dumps(obj, JSON_COMPACT);

        if (!text)
                return -ENOMEM;
        fprintf(f, "data: %s\n\n", text);
        return 0;
}

char *chat_gateway_sse(json_t *c)
{
        json_t *choice0 = json_array_get(json_object_get(c, "choices"), 0);
        json_t *msg = json_object_get(choice0, "message");
        json_t *content = json_object_get(msg, "content");
        _cleanup_json_ json_t *first = NULL, *last = NULL;
        char *out = NULL;
        size_t len = 0;
        FILE *f;
        int r;

        first = json_pack("{s:O, s:s, s:O, s:O, s:[{s:i, s:{s:s, s:O}, s:n}]}", "id",
                          json_object_get(c, "id"), "object", "chat.completion.chunk", "created",
                          json_object_get(c, "created"), "model", json_object_get(c, "model"),
                          "choices", "index", 0, "delta", "role", "assistant", "content",
                          content ? content : json_null(), "finish_reason");
        last = json_pack("{s:O, s:s, s:O, s:O, s:[{s:i, s:{}, s:O}]}", "id",
                         json_object_get(c, "id"), "object", "chat.completion.chunk", "created",
                         json_object_get(c, "created"), "model", json_object_get(c, "model"),
                         "choices", "index", 0, "delta", "finish_reason",
                         json_object_get(choice0, "finish_reason"));
        if (!first || !last)
                return NULL;
        if (json_object_get(c, "usage") &&
            json_object_set(last, "usage", json_object_get(c, "usage")) < 0)
                return NULL;
        if (json_object_get(c, "airlock") &&
            json_object_set(last, "airlock", json_object_get(c, "airlock")) < 0)
                return NULL;
        f = open_memstream(&out, &len);
        if (!f)
                return NULL;
        r = sse_event(f, first);
        if (r >= 0)
                r = sse_event(f, last);
        fputs("data: [DONE]\n\n", f);
        if (fclose(f) != 0 || r < 0) {
                free(out);
                return NULL;
        }
        return out;
}
