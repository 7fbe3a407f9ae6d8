/* A Responses request's input as Chat Completions messages (responses-internal.h). The
 * Responses API has items where Chat Completions has messages: a call is an item of its own
 * (function_call, code_interpreter_call), so consecutive call items become one assistant message
 * with several tool_calls, and the results of code_interpreter_calls (their logs) follow it as
 * tool messages, as the model saw them when the calls ran. */
#include "responses-internal.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "chat/suspend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define _cleanup_json_ _cleanup_(json_decrefp)

/* Every refusal names the parameter: caller-tools.h. */
#define fail caller_tools_fail

void responses_input_info_done(struct responses_input_info *info)
{
        json_decref(info->answered);
        *info = (struct responses_input_info){};
}

/* Where the conversion stands. */
struct conv {
        json_t *messages; /* borrowed: appended to */
        json_t *open;     /* the assistant message that call items join, or NULL */
        json_t *deferred; /* tool messages of code_interpreter_calls, sent after open */
        struct responses_input_info *info;
        struct caller_tools_error *err;
};

/* Sends the deferred tool messages and closes the assistant message. */
static int flush(struct conv *c)
{
        json_t *m;
        size_t i;

        json_array_foreach (c->deferred, i, m)
                if (json_array_append(c->messages, m) < 0)
                        return -ENOMEM;
        json_array_clear(c->deferred);
        c->open = NULL;
        return 0;
}

/* The assistant message that a call item joins: the open one, or a new one. */
static json_t *open_assistant(struct conv *c)
{
        json_t *m;

        if (c->open)
                return c->open;
        m = json_pack("{s:s, s:n}", "role", "assistant", "content");
        if (!m || json_array_append_new(c->messages, m) < 0)
                return NULL;
        c->open = m;
        return m;
}

static int add_tool_call(struct conv *c, const char *id, const char *name, const char *arguments)
{
        json_t *m = open_assistant(c), *calls;

        if (!m)
                return -ENOMEM;
        calls = json_object_get(m, "tool_calls");
        if (!calls) {
                calls = json_array();
                if (!calls || json_object_set_new(m, "tool_calls", calls) < 0)
                        return -ENOMEM;
        }
        return json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type",
                                                      "function", "function", "name", name,
                                                      "arguments", arguments)) < 0
                       ? -ENOMEM
                       : 0;
}

/* The text of a content array's text parts (input_text, output_text, refusal), joined; with
 * images (user messages only) the content array in Chat Completions' shape instead. */
static int convert_content(struct conv *c, json_t *content, const char *role, const char *param,
                           json_t **ret)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ json_t *parts = json_array();
        size_t len = 0, i;
        FILE *f = NULL;
        bool images = false;
        json_t *p;

        if (json_is_string(content)) {
                *ret = json_incref(content);
                return 0;
        }
        if (!json_is_array(content))
                return fail(c->err, param, "%s.content must be a string or an array of parts",
                            param);
        f = open_memstream(&text, &len);
        if (!f || !parts) {
                if (f)
                        fclose(f);
                return -ENOMEM;
        }
        json_array_foreach (content, i, p) {
                const char *type = json_string_value(json_object_get(p, "type"));
                const char *t = NULL;
                char sub[96];

                (void) snprintf(sub, sizeof(sub), "%s.content[%zu]", param, i);
                if (type && (strcmp(type, "input_text") == 0 || strcmp(type, "output_text") == 0))
                        t = json_string_value(json_object_get(p, "text"));
                else if (type && strcmp(type, "refusal") == 0)
                        t = json_string_value(json_object_get(p, "refusal"));
                if (t) {
                        fputs(t, f);
                        if (json_array_append_new(
                                    parts, json_pack("{s:s, s:s}", "type", "text", "text", t)) < 0)
                                goto nomem;
                        continue;
                }
                if (type && strcmp(type, "input_image") == 0 && strcmp(role, "user") == 0) {
                        json_t *url = json_object_get(p, "image_url");
                        json_t *detail = json_object_get(p, "detail");
                        json_t *img;

                        if (!json_is_string(url)) {
                                fclose(f);
                                return fail(c->err, sub,
                                            "%s: airlock takes images by image_url (an http(s) or "
                                            "data: URL), not by file_id",
                                            sub);
                        }
                        img = json_pack("{s:s, s:{s:O}}", "type", "image_url", "image_url", "url",
                                        url);
                        if (!img ||
                            (json_is_string(detail) &&
                             json_object_set(json_object_get(img, "image_url"), "detail", detail) <
                                     0) ||
                            json_array_append_new(parts, img) < 0)
                                goto nomem;
                        images = true;
                        continue;
                }
                fclose(f);
                if (type && strcmp(type, "input_file") == 0)
                        return fail(c->err, sub,
                                    "%s: input_file is not supported; upload the file (POST "
                                    "/v1/files) and give its id in the code_interpreter tool's "
                                    "container.file_ids, so the code can read it",
                                    sub);
                return fail(c->err, sub, "%s: a %s message cannot carry a part of type '%.64s'",
                            sub, role, type ? type : "(none)");
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        f = NULL;
        *ret = images ? json_incref(parts) : json_string(text ? text : "");
        return *ret ? 0 : -ENOMEM;
nomem:
        fclose(f);
        return -ENOMEM;
}

/* An item as GET .../input_items lists it: with an id (made up when the client sent none), a
 * message's string content as one text part. */
static int list_item(json_t *items, json_t *item, const char *type, const char *role,
                     json_t *content)
{
        _cleanup_json_ json_t *out = json_is_object(item) ? json_deep_copy(item) : json_object();
        const char *prefix = strcmp(type, "message") == 0                ? "msg_"
                             : strcmp(type, "function_call_output") == 0 ? "fco_"
                             : strcmp(type, "function_call") == 0        ? "fc_"
                                                                         : "item_";
        char id[SUSPEND_ID_MAX];
        int r;

        if (!out)
                return -ENOMEM;
        if (!json_is_string(json_object_get(out, "id"))) {
                r = suspend_make_id(prefix, id, sizeof(id));
                if (r < 0)
                        return r;
                if (json_object_set_new(out, "id", json_string(id)) < 0)
                        return -ENOMEM;
        }
        if (json_object_set_new(out, "type", json_string(type)) < 0)
                return -ENOMEM;
        if (strcmp(type, "message") == 0) {
                const char *part = strcmp(role, "assistant") == 0 ? "output_text" : "input_text";

                if (json_is_string(content) &&
                    json_object_set_new(
                            out, "content",
                            strcmp(part, "output_text") == 0
                                    ? json_pack("[{s:s, s:O, s:[]}]", "type", part, "text", content,
                                                "annotations")
                                    : json_pack("[{s:s, s:O}]", "type", part, "text", content)) < 0)
                        return -ENOMEM;
                if (json_object_set_new(out, "role", json_string(role)) < 0 ||
                    (!json_object_get(out, "status") &&
                     json_object_set_new(out, "status", json_string("completed")) < 0))
                        return -ENOMEM;
        }
        return json_array_append_new(items, TAKE_PTR(out)) < 0 ? -ENOMEM : 0;
}

static int convert_message(struct conv *c, json_t *item, const char *param, json_t *items)
{
        const char *role = json_string_value(json_object_get(item, "role"));
        json_t *content = json_object_get(item, "content"), *converted = NULL, *m;
        int r;

        if (!role || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0 &&
                      strcmp(role, "system") != 0 && strcmp(role, "developer") != 0))
                return fail(c->err, param,
                            "%s.role must be \"user\", \"assistant\", \"system\" or "
                            "\"developer\"",
                            param);
        r = convert_content(c, content, role, param, &converted);
        if (r < 0)
                return r;
        r = flush(c);
        /* Chat Completions servers that are not OpenAI know no "developer" role. */
        m = json_pack("{s:s, s:o}", "role", strcmp(role, "developer") == 0 ? "system" : role,
                      "content", converted);
        if (r < 0 || !m || json_array_append_new(c->messages, m) < 0)
                return -ENOMEM;
        /* An assistant's text and the calls that follow it are one answer. */
        if (strcmp(role, "assistant") == 0)
                c->open = m;
        return list_item(items, item, "message", role, content);
}

static int convert_function_call(struct conv *c, json_t *item, const char *param)
{
        const char *id = json_string_value(json_object_get(item, "call_id"));
        const char *name = json_string_value(json_object_get(item, "name"));
        const char *args = json_string_value(json_object_get(item, "arguments"));

        if (!id || !*id || !name || !*name || !args)
                return fail(c->err, param,
                            "%s: a function_call needs call_id, name and arguments (strings)",
                            param);
        return add_tool_call(c, id, name, args);
}

/* The text of a function_call_output's output: a string, or its text parts. */
static int convert_function_output(struct conv *c, json_t *item, const char *param)
{
        const char *id = json_string_value(json_object_get(item, "call_id"));
        json_t *output = json_object_get(item, "output"), *text = NULL, *m;
        int r;

        if (!id || !*id)
                return fail(c->err, param, "%s.call_id must be a string", param);
        if (!json_is_string(output) && !json_is_array(output))
                return fail(c->err, param, "%s.output must be a string or an array of parts",
                            param);
        r = convert_content(c, output, "tool", param, &text);
        if (r < 0)
                return r;
        r = flush(c);
        m = json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", id, "content", text);
        if (r < 0 || !m || json_array_append_new(c->messages, m) < 0 ||
            json_array_append_new(c->info->answered, json_string(id)) < 0)
                return -ENOMEM;
        return 0;
}

/* The model's view of an earlier code_interpreter_call: its code as a run_python call, its
 * logs (when the client kept them) as the tool's answer. */
static int convert_code_call(struct conv *c, json_t *item, const char *param)
{
        const char *code = json_string_value(json_object_get(item, "code"));
        const char *id = json_string_value(json_object_get(item, "id"));
        const char *container = json_string_value(json_object_get(item, "container_id"));
        json_t *outputs = json_object_get(item, "outputs"), *o;
        _cleanup_json_ json_t *a = NULL;
        _cleanup_free_ char *args = NULL, *logs = NULL;
        size_t len = 0, i;
        FILE *f;
        int r;

        if (!id || !*id || !code)
                return fail(c->err, param, "%s: a code_interpreter_call needs an id and its code",
                            param);
        a = json_pack("{s:s}", "code", code);
        args = a ? json_dump_text(a, JSON_COMPACT, NULL) : NULL;
        if (!args)
                return -ENOMEM;
        r = add_tool_call(c, id, RESPONSES_CODE_TOOL, args);
        if (r < 0)
                return r;
        f = open_memstream(&logs, &len);
        if (!f)
                return -ENOMEM;
        json_array_foreach (outputs, i, o) {
                const char *type = json_string_value(json_object_get(o, "type"));

                if (type && strcmp(type, "logs") == 0)
                        fputs(json_string_value(json_object_get(o, "logs")) ?: "", f);
                else if (type && strcmp(type, "image") == 0)
                        fputs("[an image, shown to the user]\n", f);
        }
        if (!json_is_array(outputs))
                fputs("(the output of this call was not kept)", f);
        if (fclose(f) != 0)
                return -ENOMEM;
        if (json_array_append_new(c->deferred,
                                  json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id", id,
                                            "content", logs && *logs ? logs : "(no output)")) < 0)
                return -ENOMEM;
        if (container && strlen(container) <= RESPONSES_NAME_MAX)
                (void) snprintf(c->info->container, sizeof(c->info->container), "%s", container);
        return 0;
}

/* The model's view of an earlier mcp_call (an internal tool's call, docs/TOOLS.md): the call,
 * then its output or error as the tool's answer. */
static int convert_mcp_call(struct conv *c, json_t *item, const char *param)
{
        const char *id = json_string_value(json_object_get(item, "id"));
        const char *name = json_string_value(json_object_get(item, "name"));
        const char *args = json_string_value(json_object_get(item, "arguments"));
        const char *output = json_string_value(json_object_get(item, "output"));
        const char *error = json_string_value(json_object_get(item, "error"));
        int r;

        if (!id || !*id || !name || !*name)
                return fail(c->err, param, "%s: an mcp_call needs an id and a name", param);
        r = add_tool_call(c, id, name, args ? args : "{}");
        if (r < 0)
                return r;
        if (json_array_append_new(
                    c->deferred,
                    json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id", id, "content",
                              error    ? error
                              : output ? output
                                       : "(the output of this call was not kept)")) < 0)
                return -ENOMEM;
        return 0;
}

static int convert_item(struct conv *c, json_t *item, size_t i, json_t *items)
{
        const char *type = json_string_value(json_object_get(item, "type"));
        char param[48];
        int r;

        (void) snprintf(param, sizeof(param), "input[%zu]", i);
        if (!json_is_object(item))
                return fail(c->err, param, "%s must be an object", param);
        /* OpenAI's "easy input message": {role, content} without a type. */
        if (!type && json_object_get(item, "role"))
                type = "message";
        if (!type)
                return fail(c->err, param, "%s has no type", param);
        if (strcmp(type, "message") == 0)
                return convert_message(c, item, param, items);
        if (strcmp(type, "function_call") == 0)
                r = convert_function_call(c, item, param);
        else if (strcmp(type, "function_call_output") == 0)
                r = convert_function_output(c, item, param);
        else if (strcmp(type, "code_interpreter_call") == 0)
                r = convert_code_call(c, item, param);
        else if (strcmp(type, "mcp_call") == 0)
                r = convert_mcp_call(c, item, param);
        else if (strcmp(type, "item_reference") == 0)
                return fail(c->err, param,
                            "%s: item_reference is not supported; continue a conversation with "
                            "previous_response_id, or send the items themselves",
                            param);
        else
                return fail(c->err, param,
                            "%s: airlock does not take input items of type '%.64s' (it takes "
                            "message, function_call, function_call_output, "
                            "code_interpreter_call and mcp_call)",
                            param, type);
        if (r < 0)
                return r;
        return list_item(items, item, type, NULL, NULL);
}

int responses_input_convert(json_t *input, json_t *messages, json_t *items,
                            struct responses_input_info *info, struct caller_tools_error *err)
{
        _cleanup_json_ json_t *deferred = json_array();
        struct conv c = { .messages = messages, .deferred = deferred, .info = info, .err = err };
        json_t *item;
        size_t i;
        int r;

        *info = (struct responses_input_info){ .answered = json_array() };
        if (!deferred || !info->answered)
                return -ENOMEM;
        if (json_is_string(input)) {
                json_t *m = json_pack("{s:s, s:O}", "role", "user", "content", input);

                if (!m || json_array_append_new(messages, m) < 0)
                        return -ENOMEM;
                return list_item(items, NULL, "message", "user", input);
        }
        json_array_foreach (input, i, item) {
                r = convert_item(&c, item, i, items);
                if (r < 0)
                        return r;
        }
        return flush(&c);
}
