/* The gateway's request handling (see gateway.h): checks the client's request, runs chat_run()
 * against the upstream with a toolbox whose session outlives the request, suspends a turn that
 * the client must finish (its own tools, approvals) and shapes the answer as a chat completion,
 * or as an error in OpenAI's shape, which is what the clients of this endpoint (OpenAI SDKs)
 * know how to read. */
#include "gateway.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "caller-tools.h"
#include "chat.h"
#include "continuation.h"
#include "hub/hub.h"
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

void chat_gateway_plan_done(struct chat_gateway_plan *plan)
{
        json_decref(plan->req);
        json_decref(plan->caller_tools);
        json_decref(plan->tool_choice);
        if (plan->cont) {
                continuation_done(plan->cont);
                free(plan->cont);
        }
        *plan = (struct chat_gateway_plan){};
}

static int vreply_error(struct chat_gateway_reply *ret, unsigned status, const char *type,
                        const char *param, const char *fmt, va_list ap)
        __attribute__((format(printf, 5, 0)));

static int vreply_error(struct chat_gateway_reply *ret, unsigned status, const char *type,
                        const char *param, const char *fmt, va_list ap)
{
        char msg[1200];

        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        json_decref(ret->body);
        ret->status = status;
        ret->body = json_pack("{s:{s:s, s:s, s:s?, s:n}}", "error", "message", msg, "type", type,
                              "param", param, "code");
        return ret->body ? 0 : -ENOMEM;
}

int chat_gateway_reply_error(struct chat_gateway_reply *ret, unsigned status, const char *type,
                             const char *param, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vreply_error(ret, status, type, param, fmt, ap);
        va_end(ap);
        return r;
}

#define reply_error chat_gateway_reply_error

/* The members of the request's "airlock" object. */
static const char *const airlock_members[] = { "session", "profile", "approvals" };

/* Legacy function calling: refused, the client declares "tools" instead. */
static const char *const refused_members[] = { "functions", "function_call" };

/* The one value several places name (the session, the profile): each of the given ones must
 * agree. Returns 1 with *ret_value (borrowed) set or left NULL, 0 with an error reply. */
static int agree(struct chat_gateway_reply *ret, const char *what, const char *const names[],
                 const char *const values[], size_t n, const char **ret_value)
{
        const char *v = NULL, *from = NULL;

        for (size_t i = 0; i < n; i++) {
                if (!values[i])
                        continue;
                if (!*values[i] || strlen(values[i]) >= CHAT_GATEWAY_NAME_MAX)
                        return reply_error(ret, 400, "invalid_request_error", names[i],
                                           "%s must be a %s of 1 to %d characters", names[i], what,
                                           CHAT_GATEWAY_NAME_MAX - 1);
                if (v && strcmp(v, values[i]) != 0)
                        return reply_error(ret, 400, "invalid_request_error", names[i],
                                           "%s and %s name different %ss ('%s', '%s')", from,
                                           names[i], what, v, values[i]);
                if (!v) {
                        v = values[i];
                        from = names[i];
                }
        }
        *ret_value = v;
        return 1;
}

/* A string member, or NULL when absent or JSON null; *ret_ok is false when it is another type. */
static const char *string_member(json_t *obj, const char *key, bool *ret_ok)
{
        json_t *v = json_object_get(obj, key);

        *ret_ok = !v || json_is_null(v) || json_is_string(v);
        return json_string_value(v);
}

/* Checks the request's "airlock" member; fills *ret_session and *ret_profile (borrowed) from it
 * and the headers. Returns 1, or 0 with an error reply. */
static int check_airlock_member(json_t *body, const char *session_header,
                                const char *profile_header, struct chat_gateway_reply *ret,
                                const char **ret_session, const char **ret_profile,
                                const char **ret_profile_param)
{
        json_t *a = json_object_get(body, "airlock"), *v;
        const char *key,
                *session_names[3] = { "session", "airlock.session", CHAT_GATEWAY_SESSION_HEADER };
        const char *profile_names[2] = { "airlock.profile", CHAT_GATEWAY_PROFILE_HEADER };
        const char *sessions[3], *profiles[2];
        bool ok_top, ok_inner, ok_profile;
        int r;

        if (a && !json_is_null(a) && !json_is_object(a))
                return reply_error(ret, 400, "invalid_request_error", "airlock",
                                   "'airlock' must be an object with session, profile or "
                                   "approvals");
        json_object_foreach (a, key, v) {
                bool known = false;

                for (size_t i = 0; i < ELEMENTSOF(airlock_members); i++)
                        known = known || strcmp(key, airlock_members[i]) == 0;
                if (!known)
                        return reply_error(ret, 400, "invalid_request_error", "airlock",
                                           "unknown member 'airlock.%.64s': 'airlock' accepts "
                                           "session, profile and approvals",
                                           key);
        }
        sessions[0] = string_member(body, "session", &ok_top);
        sessions[1] = string_member(a, "session", &ok_inner);
        sessions[2] = session_header && *session_header ? session_header : NULL;
        if (!ok_top || !ok_inner)
                return reply_error(ret, 400, "invalid_request_error",
                                   ok_top ? "airlock.session" : "session",
                                   "field '%s' must be a session id string",
                                   ok_top ? "airlock.session" : "session");
        profiles[0] = string_member(a, "profile", &ok_profile);
        profiles[1] = profile_header && *profile_header ? profile_header : NULL;
        if (!ok_profile)
                return reply_error(ret, 400, "invalid_request_error", "airlock.profile",
                                   "field 'airlock.profile' must be a profile name string");
        r = agree(ret, "session", session_names, sessions, 3, ret_session);
        if (r <= 0)
                return r;
        r = agree(ret, "profile", profile_names, profiles, 2, ret_profile);
        if (r <= 0)
                return r;
        *ret_profile_param = profiles[0] ? profile_names[0] : profile_names[1];
        return 1;
}

/* Checks "tools", "tool_choice" and "parallel_tool_calls" (a client tool may not take the name
 * of airlock's tools nor of the internal ones). Returns 1, or 0 with an error. */
static int check_caller_tools(const struct chat_gateway_config *cfg, json_t *body,
                              struct chat_gateway_reply *ret)
{
        _cleanup_json_ json_t *declared = tools_declarations(TOOLS_FORMAT_OPENAI, cfg->hub);
        json_t *tools = json_object_get(body, "tools");
        struct caller_tools_error err = {};

        if (!declared)
                return -ENOMEM;
        if (caller_tools_check(tools, declared, &err) < 0 ||
            caller_tool_choice_check(json_object_get(body, "tool_choice"), tools, declared, &err) <
                    0 ||
            caller_parallel_check(json_object_get(body, "parallel_tool_calls"), &err) < 0)
                return reply_error(ret, 400, "invalid_request_error", err.param, "%s", err.msg);
        return 1;
}

/* Checks the parts of the request that are not the gateway's own members. Returns 1, or 0 with
 * an error reply. */
static int check_chat_request(const struct chat_gateway_config *cfg, json_t *body,
                              struct chat_gateway_reply *ret)
{
        json_t *messages = json_object_get(body, "messages"), *m, *n, *stream;
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
        for (i = 0; i < ELEMENTSOF(refused_members); i++)
                if (json_object_get(body, refused_members[i]))
                        return reply_error(
                                ret, 400, "invalid_request_error", refused_members[i],
                                "'%s' (legacy function calling) is not accepted: declare your "
                                "functions in 'tools' ({\"type\": \"function\", ...}) instead",
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
        return 1;
}

/* Finds the suspended turn the request continues: by airlock.approvals, or by the ids of the
 * tool calls its tool messages answer. Returns 1 (plan->cont set or not), or 0 with an error. */
static int find_continuation(const struct chat_gateway_config *cfg, json_t *body,
                             struct chat_gateway_plan *plan, struct chat_gateway_reply *ret)
{
        json_t *approvals = json_object_get(json_object_get(body, "airlock"), "approvals");
        struct caller_tools_error err = {};
        struct continuation *c;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        if (approvals && !json_is_null(approvals))
                r = continuation_find_approvals(cfg->suspended, approvals, c, &err);
        else
                r = continuation_find_results(cfg->suspended, json_object_get(body, "messages"), c,
                                              &err);
        if (r < 0 || !c->turn) {
                continuation_done(c);
                free(c);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return reply_error(ret, 400, "invalid_request_error", err.param, "%s",
                                           err.msg);
                return 1;
        }
        plan->cont = c;
        return 1;
}

int chat_gateway_prepare(const struct chat_gateway_config *cfg, json_t *body,
                         const char *session_header, const char *profile_header,
                         struct chat_gateway_plan *ret_plan, struct chat_gateway_reply *ret)
{
        _cleanup_(chat_gateway_plan_done) struct chat_gateway_plan plan = {};
        const char *session = NULL, *profile = NULL, *profile_param = NULL, *turn_session;
        json_t *messages;
        int r;

        *ret = (struct chat_gateway_reply){};
        if (!cfg || !cfg->base_url)
                return reply_error(ret, 503, "gateway_not_configured", NULL,
                                   "the chat-completions gateway is not configured: start the "
                                   "daemon with --llm-base-url (or AIRLOCK_LLM_BASE_URL)");
        r = check_chat_request(cfg, body, ret);
        if (r <= 0)
                return r;
        plan.stream = ret->stream;
        r = check_airlock_member(body, session_header, profile_header, ret, &session, &profile,
                                 &profile_param);
        if (r <= 0)
                return r;
        r = check_caller_tools(cfg, body, ret);
        if (r <= 0)
                return r;
        r = find_continuation(cfg, body, &plan, ret);
        if (r <= 0)
                return r;

        if (plan.cont) {
                turn_session = continuation_session(plan.cont);
                if (*turn_session && session && strcmp(session, turn_session) != 0)
                        return reply_error(ret, 409, "invalid_request_error", "session",
                                           "this request continues a turn of session '%s', but "
                                           "it names session '%s'",
                                           turn_session, session);
                if (*turn_session)
                        session = turn_session;
                if (!profile && *continuation_profile(plan.cont))
                        (void) snprintf(plan.profile, sizeof(plan.profile), "%s",
                                        continuation_profile(plan.cont));
        }
        if (session)
                (void) snprintf(plan.session, sizeof(plan.session), "%s", session);
        if (profile)
                (void) snprintf(plan.profile, sizeof(plan.profile), "%s", profile);
        plan.profile_param = profile ? profile_param : NULL;

        plan.req = json_deep_copy(body);
        if (!plan.req)
                return -ENOMEM;
        plan.caller_tools = json_incref(json_is_array(json_object_get(body, "tools"))
                                                ? json_object_get(body, "tools")
                                                : NULL);
        plan.tool_choice = json_incref(json_is_null(json_object_get(body, "tool_choice"))
                                               ? NULL
                                               : json_object_get(body, "tool_choice"));
        /* The gateway's own members, and what it sets itself, never go upstream. */
        (void) json_object_del(plan.req, "session");
        (void) json_object_del(plan.req, "airlock");
        (void) json_object_del(plan.req, "tools");
        (void) json_object_del(plan.req, "tool_choice");
        /* The upstream answers in one piece; a streaming client gets it as events. */
        (void) json_object_del(plan.req, "stream");
        (void) json_object_del(plan.req, "stream_options");
        if (!json_is_string(json_object_get(plan.req, "model")) &&
            json_object_set_new(plan.req, "model", json_string(cfg->model)) < 0)
                return -ENOMEM;
        messages = json_object_get(body, "messages");
        plan.splice_start = json_array_size(messages);
        if (plan.cont) {
                _cleanup_json_ json_t *spliced = NULL;

                r = continuation_splice(plan.cont, messages, &spliced, &plan.splice_start,
                                        &plan.anchor);
                if (r < 0)
                        return r;
                if (json_object_set(plan.req, "messages", spliced) < 0)
                        return -ENOMEM;
        }
        *ret_plan = plan;
        plan = (struct chat_gateway_plan){};
        return 1;
}

int chat_gateway_reply_upstream_error(struct chat_gateway_reply *ret, int r,
                                      const struct llm_error *err)
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

/* --chat-require-approval: code needs the client's yes; so does an internal tool whose
 * server's config says require_approval: always. */
static bool gateway_needs_approval(void *userdata, const char *tool)
{
        const struct chat_gateway_config *cfg = userdata;

        return (cfg->require_approval && chat_tool_runs_code(tool)) ||
               hub_tool_needs_approval(cfg->hub, tool);
}

static const char *gateway_server_of(void *userdata, const char *tool)
{
        const struct chat_gateway_config *cfg = userdata;

        return hub_tool_server(cfg->hub, tool);
}

/* The text returned in place of an answer when calls wait for approval: the model's text, then
 * each proposed call (code in fenced blocks, which is what clients of the first version of this
 * gateway show), then how to answer. */
static char *approval_text(json_t *message, json_t *pending, json_t *items)
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
        fputs("airlock: this gateway requires approval before running code or sensitive tools, "
              "so nothing was run. The model proposed:\n",
              f);
        json_array_foreach (pending, i, p) {
                const char *name = json_string_value(json_object_get(p, "name"));
                json_t *args = json_object_get(p, "arguments");
                const char *code = json_string_value(json_object_get(args, "code"));
                const char *cmd = json_string_value(json_object_get(args, "command"));
                const char *text =
                        json_string_value(json_object_get(json_array_get(items, i), "arguments"));

                if (code && strcmp(name, "run_python") == 0)
                        fprintf(f, "\n```python\n%s\n```\n", code);
                else if (cmd && strcmp(name, "run_shell") == 0)
                        fprintf(f, "\n```sh\n%s\n```\n", cmd);
                else if (code && strcmp(name, "run_javascript") == 0)
                        fprintf(f, "\n```javascript\n%s\n```\n", code);
                else
                        fprintf(f, "\n%s with the arguments:\n```json\n%s\n```\n", name,
                                text ? text : "{}");
        }
        fputs("\nTo continue, send the same request again with \"airlock\": {\"approvals\": "
              "[{\"type\": \"mcp_approval_response\", \"approval_request_id\": ..., \"approve\": "
              "true or false}]}, one per id of airlock.pending.\n",
              f);
        if (fclose(f) != 0) {
                free(out);
                return NULL;
        }
        return out;
}

static json_t *airlock_member(const struct chat_turn *t, const char *session, json_t *visible)
{
        const char *stopped = t->outcome == CHAT_MAX_ROUNDS       ? "max_rounds"
                              : t->outcome == CHAT_NEEDS_APPROVAL ? "approval_required"
                                                                  : NULL;
        json_t *a = json_pack("{s:s?, s:I, s:O, s:s?}", "session", *session ? session : NULL,
                              "rounds", (json_int_t) t->rounds, "tool_calls",
                              t->calls ? t->calls : json_array(), "stopped", stopped);

        if (a && t->outcome == CHAT_NEEDS_APPROVAL && json_object_set(a, "pending", visible) < 0) {
                json_decref(a);
                return NULL;
        }
        return a;
}

/* The chat completion for a turn. visible: what a suspended turn shows the client (its tool
 * calls, or the approval requests). */
static json_t *completion(const struct chat_turn *t, const char *session, const char *model,
                          json_t *visible)
{
        json_t *choice0 = json_array_get(json_object_get(t->response, "choices"), 0);
        const char *id = json_string_value(json_object_get(t->response, "id"));
        const char *rmodel = json_string_value(json_object_get(t->response, "model"));
        json_t *created = json_object_get(t->response, "created");
        const char *finish = json_string_value(json_object_get(choice0, "finish_reason"));
        _cleanup_free_ char *text = NULL, *made_id = NULL;
        json_t *content = json_object_get(t->message, "content"), *out, *a, *value, *msg;

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
                text = approval_text(t->message, t->pending, visible);
                if (!text)
                        return NULL;
                finish = "stop";
                break;
        case CHAT_CALLER_TOOLS:
                finish = "tool_calls";
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
        msg = json_object_get(json_array_get(json_object_get(out, "choices"), 0), "message");
        if (t->outcome == CHAT_CALLER_TOOLS && json_object_set(msg, "tool_calls", visible) < 0)
                goto fail;
        if (t->usage && json_object_set(out, "usage", t->usage) < 0)
                goto fail;
        a = airlock_member(t, session, visible);
        if (!a || json_object_set_new(out, "airlock", a) < 0)
                goto fail;
        return out;
fail:
        json_decref(out);
        return NULL;
}

/* Adds {"airlock": {"session"}} to an error reply, so that the client can still use the
 * sandbox. */
static void error_with_session(struct chat_gateway_reply *ret)
{
        if (ret->body && ret->session[0])
                (void) json_object_set_new(ret->body, "airlock",
                                           json_pack("{s:s}", "session", ret->session));
}

/* Shapes a finished chat_run() as the reply, suspending the turn when the client must act. */
static int reply_turn(const struct chat_gateway_config *cfg, const struct chat_gateway_plan *plan,
                      const struct chat_turn *turn, const char *profile, size_t segment_start,
                      struct chat_gateway_reply *ret)
{
        _cleanup_json_ json_t *visible = NULL;
        int r;

        if (turn->outcome == CHAT_CALLER_TOOLS || turn->outcome == CHAT_NEEDS_APPROVAL) {
                struct continuation_point at = { .splice_start = plan->splice_start,
                                                 .segment_start = segment_start,
                                                 .anchor = plan->anchor,
                                                 .session = ret->session,
                                                 .profile = profile };

                r = continuation_suspend(cfg->suspended, turn,
                                         json_object_get(plan->req, "messages"), &at, &visible);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        r = reply_error(ret, 500, "server_error", NULL,
                                        "the gateway cannot keep this turn for the request that "
                                        "would continue it (%s): at most %llu MiB of suspended "
                                        "turns are kept",
                                        strerror(-r),
                                        (unsigned long long) (SUSPEND_BYTES_MAX_DEFAULT >> 20));
                        error_with_session(ret);
                        return r;
                }
        }
        ret->status = 200;
        ret->body = completion(turn, ret->session,
                               json_string_value(json_object_get(plan->req, "model")), visible);
        return ret->body ? 0 : -ENOMEM;
}

int chat_gateway_run(const struct chat_gateway_config *cfg, struct tools_backend *backend,
                     struct chat_gateway_plan *plan, const char *profile, const atomic_bool *cancel,
                     struct chat_gateway_reply *ret)
{
        json_t *messages = json_object_get(plan->req, "messages");
        size_t segment_start = json_array_size(messages);
        struct llm_client *llm = NULL;
        struct toolbox *tb = NULL;
        struct chat_turn turn = {};
        struct llm_error err = {};
        bool taken = false;
        int r;

        *ret = (struct chat_gateway_reply){ .stream = plan->stream };
        (void) snprintf(ret->session, sizeof(ret->session), "%s", plan->session);
        if (!profile)
                profile = cfg->profile;

        r = llm_client_new(&(struct llm_config){ .base_url = cfg->base_url,
                                                 .api_key = cfg->api_key,
                                                 .timeout_ms = cfg->timeout_ms,
                                                 .cancel = cancel },
                           &llm);
        if (r < 0)
                return r == -ENOMEM ? r
                                    : reply_error(ret, 500, "server_error", NULL,
                                                  "cannot set up the upstream client");
        /* A suspended turn is used once: taken now, so that two requests cannot both run it. */
        if (plan->cont) {
                r = suspend_store_take(cfg->suspended, plan->cont->key, plan->cont->turn, NULL);
                if (r < 0) {
                        llm_client_free(llm);
                        return reply_error(ret, 409, "invalid_request_error", NULL,
                                           "another request has continued this turn meanwhile");
                }
                taken = true;
        }
        r = toolbox_new(
                backend,
                &(struct toolbox_options){ .profile = profile,
                                           .session_id = ret->session[0] ? ret->session : NULL,
                                           .keep_session = true,
                                           .hub = cfg->hub },
                &tb);
        if (r < 0) {
                if (taken)
                        (void) continuation_put_back(cfg->suspended, plan->cont->turn);
                llm_client_free(llm);
                return r;
        }

        r = chat_run(llm, tb, plan->req,
                     &(struct chat_options){
                             .max_rounds = cfg->max_rounds,
                             .needs_approval = gateway_needs_approval,
                             .server_of = gateway_server_of,
                             .policy_userdata = (void *) cfg,
                             .caller_tools = plan->caller_tools,
                             .tool_choice = plan->tool_choice,
                             .resume = plan->cont && continuation_is_approval(plan->cont),
                             .decisions = plan->cont ? plan->cont->decisions : NULL },
                     &turn, &err);
        /* A session the loop started (or a new one after reset_session) is the one to
         * continue with, whatever happened next. */
        if (toolbox_session_id(tb, ret->session, sizeof(ret->session)) < 0 && !plan->session[0])
                ret->session[0] = '\0';
        if (r < 0) {
                /* Nothing of the continued turn ran: the client may send it again (OpenAI's
                 * SDKs retry a 5xx or a timeout on their own). */
                if (taken && json_array_size(messages) == segment_start)
                        (void) continuation_put_back(cfg->suspended, plan->cont->turn);
                r = chat_gateway_reply_upstream_error(ret, r, &err);
                if (r >= 0)
                        error_with_session(ret);
        } else {
                r = reply_turn(cfg, plan, &turn, profile, segment_start, ret);
        }
        chat_turn_done(&turn);
        toolbox_free(tb);
        llm_client_free(llm);
        return r;
}

static int sse_event(FILE *f, json_t *obj)
{
        _cleanup_free_ char *text = json_dump_text(obj, JSON_COMPACT, NULL);

        if (!text)
                return -ENOMEM;
        fprintf(f, "data: %s\n\n", text);
        return 0;
}

/* The message's tool calls as stream deltas carry them: each with its "index". */
static json_t *delta_tool_calls(json_t *tool_calls)
{
        json_t *out = json_array(), *tc;
        size_t i;

        json_array_foreach (tool_calls, i, tc) {
                json_t *d = json_deep_copy(tc);

                if (!out || !d ||
                    json_object_set_new(d, "index", json_integer((json_int_t) i)) < 0 ||
                    json_array_append_new(out, d) < 0) {
                        json_decref(d);
                        json_decref(out);
                        return NULL;
                }
        }
        return out;
}

char *chat_gateway_sse(json_t *c)
{
        json_t *choice0 = json_array_get(json_object_get(c, "choices"), 0);
        json_t *msg = json_object_get(choice0, "message");
        json_t *content = json_object_get(msg, "content");
        json_t *tool_calls = json_object_get(msg, "tool_calls");
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
        if (json_is_array(tool_calls) &&
            json_object_set_new(
                    json_object_get(json_array_get(json_object_get(first, "choices"), 0), "delta"),
                    "tool_calls", delta_tool_calls(tool_calls)) < 0)
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
