/* The tool loop of chat.h: one request to the endpoint per round, every tool call of the answer
 * run in order in the conversation's toolbox, each result sent back as a role "tool" message.
 * The model is told about every malformed call (an unknown tool, arguments that are not a JSON
 * object or do not fit the schema) instead of the loop failing, because models do recover
 * from that; only an answer that is not a completion at all ends the loop with an error. */
#include "chat.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/utf8.h"
#include "caller-tools.h"
#include "tools/tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUMMARY_OUTPUT_MAX 4096
#define DECLINED_TEXT "the user declined to run this code"
#define DECLINED_CALL_TEXT "the user declined this call"
#define DENIED_TEXT "the user denied this call"
#define UNAPPROVED_TEXT                                                                            \
        "error: this call needs a person's approval and none was given, so it did not run"
#define REASON_MAX 1000

/* json_decrefp() comes with jansson. */
#define _cleanup_json_ _cleanup_(json_decrefp)

int chat_config_resolve(const char *base_url, const char *model, const char *api_key,
                        struct chat_config *cfg)
{
        const char *v[3] = { base_url, model, api_key };
        static const char *const env[3] = { "AIRLOCK_LLM_BASE_URL", "AIRLOCK_LLM_MODEL",
                                            "AIRLOCK_LLM_API_KEY" };
        char **dst[3] = { &cfg->base_url, &cfg->model, &cfg->api_key };

        for (size_t i = 0; i < 3; i++) {
                const char *s = v[i] && *v[i] ? v[i] : getenv(env[i]);

                *dst[i] = NULL;
                if (!s || !*s)
                        continue;
                *dst[i] = strdup(s);
                if (!*dst[i]) {
                        chat_config_done(cfg);
                        return -ENOMEM;
                }
        }
        if (!cfg->timeout_ms)
                cfg->timeout_ms = CHAT_TIMEOUT_MS_DEFAULT;
        if (!cfg->max_rounds)
                cfg->max_rounds = CHAT_MAX_ROUNDS_DEFAULT;
        return 0;
}

void chat_config_done(struct chat_config *cfg)
{
        if (cfg->api_key)
                explicit_bzero(cfg->api_key, strlen(cfg->api_key));
        free(cfg->base_url);
        free(cfg->model);
        free(cfg->api_key);
        *cfg = (struct chat_config){};
}

void chat_turn_done(struct chat_turn *t)
{
        json_decref(t->response);
        json_decref(t->calls);
        json_decref(t->pending);
        json_decref(t->usage);
        *t = (struct chat_turn){};
}

bool chat_tool_runs_code(const char *tool)
{
        const struct tool *t = tool ? tools_find(tool) : NULL;

        return t && t->runs_code;
}

/* The code a tool call would run (run_shell's "command", the others' "code"), or NULL for the
 * tools that run none. */
static const char *call_code(const char *name, json_t *args)
{
        if (!chat_tool_runs_code(name))
                return NULL;
        return json_string_value(
                json_object_get(args, strcmp(name, "run_shell") == 0 ? "command" : "code"));
}

/* Whether opts lets the model see the toolbox's tool name (chat_options.only_tools and
 * offer_internal; tb NULL: airlock's own tools only). */
static bool tool_offered(const struct chat_options *opts, struct toolbox *tb, const char *name)
{
        char server[64];

        if (!opts->only_tools)
                return true;
        if (opts->offer_internal && tb && !tools_find(name) &&
            toolbox_tool_server(tb, name, server, sizeof(server)))
                return !toolbox_needs_approval(tb, name);
        for (const char *const *n = opts->only_tools; *n; n++)
                if (strcmp(*n, name) == 0)
                        return true;
        return false;
}

/* "run_python, run_shell, ..., the caller's tools" for telling the model which tools exist. */
static void tool_names(const struct chat_options *opts, char *buf, size_t size)
{
        size_t n, o = 0;
        const struct tool *const *all = tools_all(&n);
        json_t *t;
        size_t i;

        buf[0] = '\0';
        for (i = 0; i < n && o < size; i++) {
                int w;

                if (!tool_offered(opts, NULL, all[i]->name))
                        continue;
                w = snprintf(buf + o, size - o, "%s%s", o ? ", " : "", all[i]->name);
                if (w < 0)
                        break;
                o += (size_t) w;
        }
        json_array_foreach (opts->caller_tools, i, t) {
                const char *name =
                        json_string_value(json_object_get(json_object_get(t, "function"), "name"));
                int w;

                if (!name || o >= size)
                        break;
                w = snprintf(buf + o, size - o, "%s%s", o ? ", " : "", name);
                if (w < 0)
                        break;
                o += (size_t) w;
        }
        if (o >= size && size > 4)
                memcpy(buf + size - 4, "...", 4);
}

/* One tool call of an assistant message, parsed. */
struct call {
        const char *id;     /* borrowed from the normalised message */
        const char *name;   /* NULL when the call names no function */
        json_t *args;       /* new reference: the parsed arguments, or NULL */
        json_t *raw_args;   /* borrowed: the arguments as sent (a string, or an object) */
        bool is_caller;     /* a call of one of the caller's tools: the caller runs it */
        char problem[1024]; /* set when the call cannot be run: told to the model */
};

static void call_done(struct call *c)
{
        json_decref(c->args);
}

/* Parses the arguments of one call: OpenAI sends a JSON text; some servers an object. A call of
 * a caller tool is only recognised: its arguments are the caller's business. */
static void call_parse(struct call *c, json_t *tc, struct toolbox *tb,
                       const struct chat_options *opts)
{
        json_t *fn = json_object_get(tc, "function"), *a;
        json_error_t jerr;
        const struct tool *t;
        struct airlock_error aerr = { { 0 } };
        char names[600];

        c->name = json_string_value(json_object_get(fn, "name"));
        a = c->raw_args = json_object_get(fn, "arguments");
        if (json_is_object(fn) && c->name && caller_tools_has(opts->caller_tools, c->name)) {
                c->is_caller = true;
                return;
        }
        tool_names(opts, names, sizeof(names));
        if (!json_is_object(fn) || !c->name || !*c->name) {
                (void) snprintf(c->problem, sizeof(c->problem),
                                "error: this tool call names no function; call one of: %s", names);
                return;
        }
        t = tools_find(c->name);
        if ((!t && !toolbox_has_tool(tb, c->name)) || !tool_offered(opts, tb, c->name)) {
                (void) snprintf(c->problem, sizeof(c->problem),
                                "error: there is no tool named '%.100s'; the tools are: %s",
                                c->name, names);
                return;
        }
        if (!a || json_is_null(a) || (json_is_string(a) && json_string_length(a) == 0)) {
                c->args = json_object();
        } else if (json_is_string(a)) {
                c->args = json_loadb(json_string_value(a), json_string_length(a),
                                     JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
                if (!c->args) {
                        (void) snprintf(c->problem, sizeof(c->problem),
                                        "error: the arguments of this %s call are not valid JSON "
                                        "(%.200s at character %d); send them as one JSON object "
                                        "matching the tool's parameters",
                                        c->name, jerr.text, jerr.position);
                        return;
                }
        } else {
                c->args = json_incref(a);
        }
        if (!c->args) {
                (void) snprintf(c->problem, sizeof(c->problem), "error: out of memory");
                return;
        }
        if (!json_is_object(c->args)) {
                (void) snprintf(c->problem, sizeof(c->problem),
                                "error: the arguments of this %s call must be a JSON object, "
                                "not %s",
                                c->name,
                                json_is_array(c->args)    ? "an array"
                                : json_is_string(c->args) ? "a string"
                                                          : "a scalar");
                return;
        }
        /* An internal tool's arguments are checked by the hub, against the server's schema. */
        if (t && tools_validate(t, c->args, &aerr) < 0)
                (void) snprintf(c->problem, sizeof(c->problem), "error: %.100s: %s", c->name,
                                aerr.msg);
}

static bool id_used_before(json_t *tool_calls, size_t i)
{
        json_t *id = json_object_get(json_array_get(tool_calls, i), "id");

        for (size_t j = 0; j < i; j++)
                if (json_equal(json_object_get(json_array_get(tool_calls, j), "id"), id))
                        return true;
        return false;
}

/* The assistant message as it goes back into the history: only the members every
 * implementation accepts, and each tool call with an id (made up when the endpoint sent none,
 * so that the tool message can answer it) and its arguments as a JSON text. */
static json_t *assistant_for_history(json_t *msg, json_t *tool_calls, unsigned round)
{
        _cleanup_json_ json_t *out = json_object(), *calls = json_array();
        json_t *content = json_object_get(msg, "content"), *tc;
        size_t i;

        if (!out || !calls)
                return NULL;
        if (json_object_set_new(out, "role", json_string("assistant")) < 0 ||
            json_object_set(out, "content", content ? content : json_null()) < 0)
                return NULL;
        json_array_foreach (tool_calls, i, tc) {
                json_t *fn = json_object_get(tc, "function");
                json_t *id = json_object_get(tc, "id");
                json_t *args = json_object_get(fn, "arguments");
                const char *name = json_string_value(json_object_get(fn, "name"));
                _cleanup_free_ char *args_text = NULL, *made_id = NULL;
                json_t *c;

                /* A missing id, or one this answer already used: the tool messages must be
                 * able to answer each call on its own. */
                if (!json_is_string(id) || json_string_length(id) == 0 ||
                    id_used_before(tool_calls, i)) {
                        if (asprintf(&made_id, "call_airlock_%u_%zu", round, i) < 0) {
                                made_id = NULL; /* undefined after a failure (asprintf(3)) */
                                return NULL;
                        }
                }
                if (args && !json_is_string(args))
                        args_text = json_dump_text(args, JSON_COMPACT | JSON_ENCODE_ANY, NULL);
                c = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id",
                              made_id ? made_id : json_string_value(id), "type", "function",
                              "function", "name", name ? name : "", "arguments",
                              args_text              ? args_text
                              : json_is_string(args) ? json_string_value(args)
                                                     : "{}");
                if (!c || json_array_append_new(calls, c) < 0)
                        return NULL;
        }
        if (json_object_set(out, "tool_calls", calls) < 0)
                return NULL;
        return TAKE_PTR(out);
}

/* Cuts text to CHAT_TOOL_TEXT_MAX bytes, keeping the head and the tail (an error usually sits
 * at the end of the output), at UTF-8 character boundaries. Takes ownership of text. */
static char *cut_text(char *text)
{
        size_t len = strlen(text), head, tail_start;
        char *out;

        if (len <= CHAT_TOOL_TEXT_MAX)
                return text;
        head = utf8_complete_prefix(text, CHAT_TOOL_TEXT_MAX * 3 / 4);
        tail_start = len - CHAT_TOOL_TEXT_MAX / 4;
        while (tail_start < len && ((unsigned char) text[tail_start] & 0xc0) == 0x80)
                tail_start++;
        if (asprintf(&out, "%.*s\n[... %zu bytes cut ...]\n%s", (int) head, text, tail_start - head,
                     text + tail_start) < 0) {
                free(text);
                return NULL;
        }
        free(text);
        return out;
}

/* The tool message's text: the tool's own text, then what the model cannot see (images, as
 * chat tool messages carry text only) and the caller's note, one per line. */
static char *tool_text(const struct tool_result *res, const char *note)
{
        _cleanup_free_ char *images = NULL;
        const char *t = res->text ? res->text : "";
        size_t n_images = json_array_size(res->images), n = strlen(t);
        const char *mime =
                json_string_value(json_object_get(json_array_get(res->images, 0), "mime_type"));
        bool nl = n == 0 || t[n - 1] == '\n';
        char *text;

        if (n_images > 0 &&
            asprintf(&images,
                     "%s[%zu image%s (%s): tool messages carry text only, so you cannot see %s; "
                     "the user can]\n",
                     nl ? "" : "\n", n_images, n_images == 1 ? "" : "s", mime ? mime : "image/png",
                     n_images == 1 ? "it" : "them") < 0) {
                images = NULL;
                return NULL;
        }
        if (images)
                nl = true;
        if (asprintf(&text, "%s%s%s%s", t, images ? images : "", note && !nl ? "\n" : "",
                     note ? note : "") < 0)
                return NULL;
        return cut_text(text);
}

static int append_tool_message(json_t *messages, const char *id, const char *text)
{
        json_t *m =
                json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id", id, "content", text);

        if (!m || json_array_append_new(messages, m) < 0)
                return -ENOMEM;
        return 0;
}

/* The summary of one call for chat_turn.calls (and the gateway's "airlock" field). */
static int append_summary(json_t *calls, const struct call *c, const struct tool_result *res,
                          const char *text, bool declined)
{
        _cleanup_free_ char *output = NULL;
        json_t *s;
        size_t len = strlen(text);

        output = strndup(text, len > SUMMARY_OUTPUT_MAX
                                       ? utf8_complete_prefix(text, SUMMARY_OUTPUT_MAX)
                                       : len);
        if (!output)
                return -ENOMEM;
        s = json_pack("{s:s, s:s, s:O, s:b, s:s}", "id", c->id, "name", c->name ? c->name : "",
                      "arguments",
                      c->args       ? c->args
                      : c->raw_args ? c->raw_args
                                    : json_null(),
                      "is_error", res ? res->is_error : !declined, "output", output);
        if (!s)
                return -ENOMEM;
        if (declined && json_object_set_new(s, "declined", json_true()) < 0)
                goto fail;
        if (res && json_object_set(s, "files", res->files ? res->files : json_array()) < 0)
                goto fail;
        if (res && json_object_set(s, "images", res->images ? res->images : json_array()) < 0)
                goto fail;
        return json_array_append_new(calls, s) < 0 ? -ENOMEM : 0;
fail:
        json_decref(s);
        return -ENOMEM;
}

/* Tells the model that a call did not run, with text as its tool message. */
static int not_run(const struct call *c, const char *text, json_t *messages, json_t *calls)
{
        int r = append_tool_message(messages, c->id, text);

        if (r < 0)
                return r;
        return append_summary(calls, c, NULL, text, true);
}

/* Whether a person must say yes before this (well-formed, airlock-side) call runs. */
static bool call_needs_approval(const struct chat_options *opts, const struct call *c)
{
        return !c->problem[0] && !c->is_caller && opts->needs_approval &&
               opts->needs_approval(opts->policy_userdata, c->name);
}

/* Asks about a call that needs approval: the decision the caller brought (a resumed turn) or
 * hooks->approve. Returns 0 when it may run, 1 when it was not run (the model is told), or
 * -ENOMEM. */
static int approve_call(const struct chat_options *opts, const struct call *c, json_t *decision,
                        json_t *messages, json_t *calls)
{
        const struct chat_hooks *h = opts->hooks;
        const char *reason, *code;
        _cleanup_free_ char *text = NULL;
        int r;

        if (json_is_object(decision)) {
                if (json_is_true(json_object_get(decision, "approve")))
                        return 0;
                reason = json_string_value(json_object_get(decision, "reason"));
                if (reason && *reason) {
                        if (asprintf(&text, DENIED_TEXT ": %.*s", REASON_MAX, reason) < 0) {
                                text = NULL; /* undefined after a failure (asprintf(3)) */
                                return -ENOMEM;
                        }
                }
                r = not_run(c, text ? text : DENIED_TEXT, messages, calls);
                return r < 0 ? r : 1;
        }
        if (h && h->approve) {
                code = call_code(c->name, c->args);
                if (h->approve(h->userdata, c->name, code, c->args) == CHAT_RUN)
                        return 0;
                r = not_run(c, code ? DECLINED_TEXT : DECLINED_CALL_TEXT, messages, calls);
                return r < 0 ? r : 1;
        }
        /* Nobody was asked (a resumed turn whose policy changed meanwhile): deny. */
        r = not_run(c, UNAPPROVED_TEXT, messages, calls);
        return r < 0 ? r : 1;
}

/* Runs one parsed call (or tells the model what is wrong with it) and appends the tool
 * message. decision is the person's answer for a resumed turn (or NULL). Returns 0 or
 * -ENOMEM. */
static int run_call(struct toolbox *tb, const struct chat_options *opts, struct call *c,
                    json_t *decision, json_t *messages, json_t *calls)
{
        const struct chat_hooks *h = opts->hooks;
        struct tool_result res = {};
        _cleanup_free_ char *note = NULL, *text = NULL;
        int r;

        if (c->problem[0]) {
                if (h && h->on_call)
                        h->on_call(h->userdata, c->name ? c->name : "", NULL);
                r = append_tool_message(messages, c->id, c->problem);
                if (r < 0)
                        return r;
                return append_summary(calls, c, NULL, c->problem, false);
        }

        if (call_needs_approval(opts, c)) {
                r = approve_call(opts, c, decision, messages, calls);
                if (r != 0)
                        return r < 0 ? r : 0;
        }

        if (h && h->on_call)
                h->on_call(h->userdata, c->name, c->args);
        r = toolbox_call(tb, c->name, c->args, &res);
        if (r == -ENOENT) {
                /* call_parse() found the tool; the toolbox should too. */
                r = append_tool_message(messages, c->id, "error: unknown tool");
                if (r < 0)
                        return r;
                return append_summary(calls, c, NULL, "error: unknown tool", false);
        }
        if (r < 0)
                return r;
        if (h && h->on_result)
                note = h->on_result(h->userdata, c->name, c->args, &res);
        text = tool_text(&res, note);
        if (!text) {
                tool_result_done(&res);
                return -ENOMEM;
        }
        r = append_tool_message(messages, c->id, text);
        if (r >= 0)
                r = append_summary(calls, c, &res, text, false);
        tool_result_done(&res);
        return r;
}

/* Adds the integer members of one answer's "usage" (prompt_tokens, completion_tokens,
 * total_tokens...) to *total, so that the caller sees what the whole loop cost. */
static int add_usage(json_t **total, json_t *resp)
{
        json_t *usage = json_object_get(resp, "usage"), *v;
        const char *key;

        if (!json_is_object(usage))
                return 0;
        if (!*total) {
                *total = json_object();
                if (!*total)
                        return -ENOMEM;
        }
        json_object_foreach (usage, key, v) {
                json_t *old = json_object_get(*total, key);

                if (!json_is_integer(v))
                        continue;
                if (json_object_set_new(
                            *total, key,
                            json_integer(json_integer_value(v) +
                                         (json_is_integer(old) ? json_integer_value(old) : 0))) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static bool has_tool_calls(json_t *msg)
{
        json_t *tcs = json_object_get(msg, "tool_calls");

        return tcs && !json_is_null(tcs) && !(json_is_array(tcs) && json_array_size(tcs) == 0);
}

/* The calls of an answer (history_msg) that need a yes which nobody here can give (no
 * hooks->approve), as chat_turn.pending lists them; *ret_pending is NULL when there are none.
 * Returns 0 or -ENOMEM. */
static int approval_pending(struct toolbox *tb, const struct chat_options *opts,
                            json_t *history_msg, json_t **ret_pending)
{
        _cleanup_json_ json_t *out = NULL;
        json_t *tc;
        size_t i;

        *ret_pending = NULL;
        if (!opts->needs_approval || (opts->hooks && opts->hooks->approve))
                return 0;
        json_array_foreach (json_object_get(history_msg, "tool_calls"), i, tc) {
                struct call c = {};
                const char *server = NULL;
                json_t *p;

                call_parse(&c, tc, tb, opts);
                c.id = json_string_value(json_object_get(tc, "id"));
                if (!call_needs_approval(opts, &c)) {
                        call_done(&c);
                        continue;
                }
                if (opts->server_of)
                        server = opts->server_of(opts->policy_userdata, c.name);
                if (!out)
                        out = json_array();
                p = json_pack("{s:I, s:s, s:s, s:O, s:s}", "index", (json_int_t) i, "id",
                              c.id ? c.id : "", "name", c.name, "arguments",
                              c.args ? c.args : json_null(), "server_label",
                              server ? server : "airlock");
                call_done(&c);
                if (!out || !p || json_array_append_new(out, p) < 0) {
                        json_decref(p);
                        return -ENOMEM;
                }
        }
        *ret_pending = TAKE_PTR(out);
        return 0;
}

/* Runs the calls of one answer (history_msg, already in messages) in order, except those of
 * caller tools, which are collected in *ret_caller ({index, id, type, function}; NULL when there
 * are none). decisions: see chat_options. Returns 0 or -ENOMEM. */
static int run_round(struct toolbox *tb, const struct chat_options *opts, json_t *history_msg,
                     json_t *decisions, json_t *messages, json_t *calls, json_t **ret_caller)
{
        _cleanup_json_ json_t *caller = NULL;
        json_t *tc;
        size_t i;
        int r;

        *ret_caller = NULL;
        json_array_foreach (json_object_get(history_msg, "tool_calls"), i, tc) {
                struct call c = {};

                call_parse(&c, tc, tb, opts);
                c.id = json_string_value(json_object_get(tc, "id"));
                if (c.is_caller) {
                        json_t *cc = json_deep_copy(tc);

                        call_done(&c);
                        if (!caller)
                                caller = json_array();
                        if (!cc || !caller ||
                            json_object_set_new(cc, "index", json_integer((json_int_t) i)) < 0 ||
                            json_array_append_new(caller, cc) < 0)
                                return -ENOMEM;
                        continue;
                }
                r = run_call(tb, opts, &c, json_array_get(decisions, i), messages, calls);
                call_done(&c);
                if (r < 0)
                        return r;
        }
        *ret_caller = TAKE_PTR(caller);
        return 0;
}

/* Hands what the loop gathered over to *ret_turn (the pointers are left NULL). Returns 0. */
static int end_turn(struct chat_turn *ret_turn, enum chat_outcome outcome, json_t **resp,
                    json_t *msg, unsigned rounds, json_t **calls, json_t **pending, json_t **usage)
{
        *ret_turn = (struct chat_turn){ .outcome = outcome,
                                        .response = resp ? TAKE_PTR(*resp) : NULL,
                                        .message = msg,
                                        .rounds = rounds,
                                        .calls = TAKE_PTR(*calls),
                                        .pending = pending ? TAKE_PTR(*pending) : NULL,
                                        .usage = TAKE_PTR(*usage) };
        return 0;
}

int chat_run(struct llm_client *llm, struct toolbox *tb, json_t *request,
             const struct chat_options *opts, struct chat_turn *ret_turn, struct llm_error *err)
{
        _cleanup_json_ json_t *calls = json_array(), *tools = NULL, *usage = NULL;
        json_t *messages = json_object_get(request, "messages"), *t;
        unsigned max_rounds = opts->max_rounds ? opts->max_rounds : CHAT_MAX_ROUNDS_DEFAULT;
        unsigned round = 0;
        bool first = true;
        size_t i, before;
        int r;

        if (!json_is_array(messages)) {
                (void) snprintf(err->msg, sizeof(err->msg), "the request has no messages");
                err->http_status = 0;
                return -EINVAL;
        }
        tools = toolbox_declarations(tb, TOOLS_FORMAT_OPENAI);
        if (!calls || !tools)
                return -ENOMEM;
        for (i = json_array_size(tools); opts->only_tools && i-- > 0;) {
                json_t *fn = json_object_get(json_array_get(tools, i), "function");
                const char *name = json_string_value(json_object_get(fn, "name"));

                if ((!name || !tool_offered(opts, tb, name)) && json_array_remove(tools, i) < 0)
                        return -ENOMEM;
        }
        json_array_foreach (opts->caller_tools, i, t)
                if (json_array_append(tools, t) < 0)
                        return -ENOMEM;
        /* OpenAI refuses an empty "tools": a request that offers none sends none. */
        if (json_array_size(tools) == 0)
                (void) json_object_del(request, "tools");
        else if (json_object_set(request, "tools", tools) < 0)
                return -ENOMEM;
        if (opts->model && json_object_set_new(request, "model", json_string(opts->model)) < 0)
                return -ENOMEM;
        if (opts->tool_choice && json_object_set(request, "tool_choice", opts->tool_choice) < 0)
                return -ENOMEM;

        if (opts->resume) {
                json_t *last = json_array_get(messages, json_array_size(messages) - 1);
                _cleanup_json_ json_t *caller = NULL;

                if (!json_is_array(json_object_get(last, "tool_calls"))) {
                        (void) snprintf(err->msg, sizeof(err->msg),
                                        "no assistant message with tool calls to continue");
                        err->http_status = 0;
                        return -EINVAL;
                }
                before = json_array_size(messages);
                r = run_round(tb, opts, last, opts->decisions, messages, calls, &caller);
                if (r < 0)
                        return r;
                /* A round is one in which the gateway ran calls, not only the caller's. */
                if (json_array_size(messages) > before)
                        round++;
                if (caller)
                        return end_turn(ret_turn, CHAT_CALLER_TOOLS, NULL, last, round, &calls,
                                        &caller, &usage);
        }

        for (;;) {
                _cleanup_json_ json_t *resp = NULL, *history = NULL, *pending = NULL;
                _cleanup_json_ json_t *caller = NULL;
                json_t *msg, *tcs;

                r = llm_complete(llm, request, &resp, err);
                if (r < 0)
                        return r;
                /* A choice that forces a call holds for the first answer only: the same force
                 * after the gateway's own round would never let the model answer. */
                if (first && !caller_tool_choice_is_free(opts->tool_choice))
                        (void) json_object_del(request, "tool_choice");
                first = false;
                if (add_usage(&usage, resp) < 0)
                        return -ENOMEM;
                msg = json_object_get(json_array_get(json_object_get(resp, "choices"), 0),
                                      "message");
                if (opts->hooks && opts->hooks->on_answer)
                        opts->hooks->on_answer(opts->hooks->userdata, msg);
                if (!has_tool_calls(msg)) {
                        json_t *content = json_object_get(msg, "content");
                        json_t *final = json_pack("{s:s, s:O}", "role", "assistant", "content",
                                                  content ? content : json_null());
                        if (!final || json_array_append_new(messages, final) < 0)
                                return -ENOMEM;
                        return end_turn(ret_turn, CHAT_ANSWERED, &resp, msg, round, &calls, NULL,
                                        &usage);
                }
                tcs = json_object_get(msg, "tool_calls");
                if (!json_is_array(tcs)) {
                        (void) snprintf(err->msg, sizeof(err->msg),
                                        "the answer of %s has tool_calls that are not an array",
                                        llm_client_url(llm));
                        err->http_status = 0;
                        return -EBADMSG;
                }
                history = assistant_for_history(msg, tcs, round);
                if (!history)
                        return -ENOMEM;
                if (round >= max_rounds)
                        return end_turn(ret_turn, CHAT_MAX_ROUNDS, &resp, msg, round, &calls, NULL,
                                        &usage);
                if (approval_pending(tb, opts, history, &pending) < 0)
                        return -ENOMEM;
                if (json_array_append(messages, history) < 0)
                        return -ENOMEM;
                if (pending)
                        return end_turn(ret_turn, CHAT_NEEDS_APPROVAL, &resp, msg, round, &calls,
                                        &pending, &usage);

                before = json_array_size(messages);
                r = run_round(tb, opts, history, NULL, messages, calls, &caller);
                if (r < 0)
                        return r;
                if (json_array_size(messages) > before)
                        round++;
                if (caller)
                        return end_turn(ret_turn, CHAT_CALLER_TOOLS, &resp, msg, round, &calls,
                                        &caller, &usage);
        }
}
