/* The tool loop of chat.h: one request to the endpoint per round, every tool call of the answer
 * run in order in the conversation's toolbox, each result sent back as a role "tool" message.
 * The model is told about every malformed call (an unknown tool, arguments that are not a JSON
 * object or do not fit the schema) instead of the loop failing, because models do recover
 * from that; only an answer that is not a completion at all ends the loop with an error. */
#include "chat.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "tools/tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUMMARY_OUTPUT_MAX 4096
#define DECLINED_TEXT "the user declined to run this code"

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

/* The code a run_python/run_shell call would run, or NULL for the tools that run none. */
static const char *call_code(const char *name, json_t *args)
{
        if (strcmp(name, "run_python") == 0)
                return json_string_value(json_object_get(args, "code"));
        if (strcmp(name, "run_shell") == 0)
                return json_string_value(json_object_get(args, "command"));
        return NULL;
}

/* "run_python, run_shell, ..." for telling the model which tools exist. */
static void tool_names(char *buf, size_t size)
{
        size_t n, o = 0;
        const struct tool *const *all = tools_all(&n);

        buf[0] = '\0';
        for (size_t i = 0; i < n && o < size; i++) {
                int w = snprintf(buf + o, size - o, "%s%s", i ? ", " : "", all[i]->name);
                if (w < 0)
                        break;
                o += (size_t) w;
        }
}

/* One tool call of an assistant message, parsed. */
struct call {
        const char *id;     /* borrowed from the normalised message */
        const char *name;   /* NULL when the call names no function */
        json_t *args;       /* new reference: the parsed arguments, or NULL */
        json_t *raw_args;   /* borrowed: the arguments as sent (a string, or an object) */
        char problem[1024]; /* set when the call cannot be run: told to the model */
};

static void call_done(struct call *c)
{
        json_decref(c->args);
}

/* Parses the arguments of one call: OpenAI sends a JSON text; some servers an object. */
static void call_parse(struct call *c, json_t *tc, struct toolbox *tb)
{
        json_t *fn = json_object_get(tc, "function"), *a;
        json_error_t jerr;
        const struct tool *t;
        struct airlock_error aerr = { { 0 } };
        char names[256];

        c->name = json_string_value(json_object_get(fn, "name"));
        a = c->raw_args = json_object_get(fn, "arguments");
        tool_names(names, sizeof(names));
        if (!json_is_object(fn) || !c->name || !*c->name) {
                (void) snprintf(c->problem, sizeof(c->problem),
                                "error: this tool call names no function; call one of: %s", names);
                return;
        }
        t = tools_find(c->name);
        if (!t && !toolbox_has_tool(tb, c->name)) {
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

                if (!json_is_string(id) || json_string_length(id) == 0) {
                        if (asprintf(&made_id, "call_airlock_%u_%zu", round, i) < 0) {
                                made_id = NULL; /* undefined after a failure (asprintf(3)) */
                                return NULL;
                        }
                }
                if (args && !json_is_string(args))
                        args_text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
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

/* Runs one parsed call (or tells the model what is wrong with it) and appends the tool
 * message. Returns 0 or -ENOMEM. */
static int run_call(struct toolbox *tb, const struct chat_options *opts, struct call *c,
                    json_t *messages, json_t *calls)
{
        const struct chat_hooks *h = opts->hooks;
        struct tool_result res = {};
        _cleanup_free_ char *note = NULL, *text = NULL;
        const char *code;
        int r;

        if (c->problem[0]) {
                if (h && h->on_call)
                        h->on_call(h->userdata, c->name ? c->name : "", NULL);
                r = append_tool_message(messages, c->id, c->problem);
                if (r < 0)
                        return r;
                return append_summary(calls, c, NULL, c->problem, false);
        }

        code = call_code(c->name, c->args);
        if (code && h && h->approve && h->approve(h->userdata, c->name, code) != CHAT_RUN) {
                r = append_tool_message(messages, c->id, DECLINED_TEXT);
                if (r < 0)
                        return r;
                return append_summary(calls, c, NULL, DECLINED_TEXT, true);
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

/* The proposed calls of an assistant message for the gateway's approval mode. */
static json_t *pending_calls(json_t *history_msg)
{
        json_t *out = json_array(), *tc;
        size_t i;

        if (!out)
                return NULL;
        json_array_foreach (json_object_get(history_msg, "tool_calls"), i, tc) {
                struct call c = {};
                json_t *p;

                call_parse(&c, tc, NULL);
                c.id = json_string_value(json_object_get(tc, "id"));
                p = json_pack("{s:s, s:s, s:O}", "id", c.id ? c.id : "", "name",
                              c.name ? c.name : "", "arguments",
                              c.args       ? c.args
                              : c.raw_args ? c.raw_args
                                           : json_null());
                call_done(&c);
                if (!p || json_array_append_new(out, p) < 0) {
                        json_decref(out);
                        return NULL;
                }
        }
        return out;
}

static bool wants_code(json_t *history_msg)
{
        json_t *tc;
        size_t i;

        json_array_foreach (json_object_get(history_msg, "tool_calls"), i, tc) {
                const char *name =
                        json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
                if (name && (strcmp(name, "run_python") == 0 || strcmp(name, "run_shell") == 0))
                        return true;
        }
        return false;
}

int chat_run(struct llm_client *llm, struct toolbox *tb, json_t *request,
             const struct chat_options *opts, struct chat_turn *ret_turn, struct llm_error *err)
{
        _cleanup_json_ json_t *calls = json_array(), *tools = NULL, *usage = NULL;
        json_t *messages = json_object_get(request, "messages");
        unsigned max_rounds = opts->max_rounds ? opts->max_rounds : CHAT_MAX_ROUNDS_DEFAULT;
        unsigned round = 0;
        int r;

        if (!json_is_array(messages)) {
                (void) snprintf(err->msg, sizeof(err->msg), "the request has no messages");
                err->http_status = 0;
                return -EINVAL;
        }
        tools = toolbox_declarations(tb, TOOLS_FORMAT_OPENAI);
        if (!calls || !tools || json_object_set(request, "tools", tools) < 0)
                return -ENOMEM;
        if (opts->model && json_object_set_new(request, "model", json_string(opts->model)) < 0)
                return -ENOMEM;

        for (;;) {
                _cleanup_json_ json_t *resp = NULL, *history = NULL;
                json_t *msg, *tcs, *tc;
                size_t i;

                r = llm_complete(llm, request, &resp, err);
                if (r < 0)
                        return r;
                if (add_usage(&usage, resp) < 0)
                        return -ENOMEM;
                msg = json_object_get(json_array_get(json_object_get(resp, "choices"), 0),
                                      "message");
                if (!has_tool_calls(msg)) {
                        json_t *content = json_object_get(msg, "content");
                        json_t *final = json_pack("{s:s, s:O}", "role", "assistant", "content",
                                                  content ? content : json_null());
                        if (!final || json_array_append_new(messages, final) < 0)
                                return -ENOMEM;
                        *ret_turn = (struct chat_turn){ .outcome = CHAT_ANSWERED,
                                                        .response = TAKE_PTR(resp),
                                                        .message = msg,
                                                        .rounds = round,
                                                        .calls = TAKE_PTR(calls),
                                                        .usage = TAKE_PTR(usage) };
                        return 0;
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
                if (round >= max_rounds) {
                        *ret_turn = (struct chat_turn){ .outcome = CHAT_MAX_ROUNDS,
                                                        .response = TAKE_PTR(resp),
                                                        .message = msg,
                                                        .rounds = round,
                                                        .calls = TAKE_PTR(calls),
                                                        .usage = TAKE_PTR(usage) };
                        return 0;
                }
                if (opts->refuse_code && wants_code(history)) {
                        json_t *pending = pending_calls(history);
                        if (!pending)
                                return -ENOMEM;
                        *ret_turn = (struct chat_turn){ .outcome = CHAT_NEEDS_APPROVAL,
                                                        .response = TAKE_PTR(resp),
                                                        .message = msg,
                                                        .rounds = round,
                                                        .calls = TAKE_PTR(calls),
                                                        .pending = pending,
                                                        .usage = TAKE_PTR(usage) };
                        return 0;
                }

                round++;
                if (json_array_append(messages, history) < 0)
                        return -ENOMEM;
                json_array_foreach (json_object_get(history, "tool_calls"), i, tc) {
                        struct call c = {};

                        call_parse(&c, json_array_get(tcs, i), tb);
                        c.id = json_string_value(json_object_get(tc, "id"));
                        r = run_call(tb, opts, &c, messages, calls);
                        call_done(&c);
                        if (r < 0)
                                return r;
                }
        }
}
