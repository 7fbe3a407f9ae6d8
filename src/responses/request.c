/* The checks of a POST /v1/responses request (responses-internal.h): every member OpenAI defines
 * is either honoured, passed to the upstream model, accepted and ignored (it changes nothing
 * here: docs/RESPONSES.md says so for each), or refused with a 400 naming it; a member OpenAI
 * does not define is refused too, as OpenAI does, so that a typo never passes silently. */
#include "responses-internal.h"

#include "base/cleanup.h"
#include "base/json-util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define _cleanup_json_ _cleanup_(json_decrefp)

#define METADATA_MAX 16
#define METADATA_KEY_MAX 64
#define METADATA_VALUE_MAX 512
#define FILE_IDS_MAX 100

/* Every refusal names the parameter: caller-tools.h. */
#define fail caller_tools_fail

void responses_plan_done(struct responses_plan *p)
{
        json_decref(p->upstream);
        json_decref(p->caller_tools);
        json_decref(p->tool_choice);
        json_decref(p->echo);
        *p = (struct responses_plan){};
}

/* A member given as JSON null counts as absent, as OpenAI's SDKs send unset options. */
static json_t *member(json_t *body, const char *key)
{
        json_t *v = json_object_get(body, key);

        return json_is_null(v) ? NULL : v;
}

static int want(struct caller_tools_error *err, const char *param, json_t *v, bool ok,
                const char *what)
{
        if (ok)
                return 0;
        return fail(err, param, "%s must be %s, not %s", param, what, json_type_name(v));
}

static int copy_to(json_t *dst, const char *key, json_t *v)
{
        return v && json_object_set(dst, key, v) < 0 ? -ENOMEM : 0;
}

/* The members of a request: what each one does here. */
enum how {
        HONOURED, /* read by this file */
        IGNORED,  /* accepted, changes nothing (docs/RESPONSES.md says why) */
        REFUSED,  /* anything but null/false is a 400 */
};

static const struct {
        const char *name;
        enum how how;
        const char *why; /* REFUSED: what to do instead */
} members[] = {
        { "model", HONOURED, NULL },
        { "input", HONOURED, NULL },
        { "instructions", HONOURED, NULL },
        { "tools", HONOURED, NULL },
        { "tool_choice", HONOURED, NULL },
        { "previous_response_id", HONOURED, NULL },
        { "store", HONOURED, NULL },
        { "include", HONOURED, NULL },
        { "max_output_tokens", HONOURED, NULL },
        { "max_tool_calls", HONOURED, NULL },
        { "temperature", HONOURED, NULL },
        { "top_p", HONOURED, NULL },
        { "metadata", HONOURED, NULL },
        { "stream", HONOURED, NULL },
        { "parallel_tool_calls", HONOURED, NULL },
        { "text", HONOURED, NULL },
        { "reasoning", HONOURED, NULL },
        { "user", HONOURED, NULL },
        { "truncation", HONOURED, NULL },
        { "top_logprobs", HONOURED, NULL },
        { "background", HONOURED, NULL },
        { "stream_options", IGNORED, NULL },
        { "service_tier", IGNORED, NULL },
        { "safety_identifier", IGNORED, NULL },
        { "prompt_cache_key", IGNORED, NULL },
        { "prompt_cache_retention", IGNORED, NULL },
        { "prompt_cache_options", IGNORED, NULL },
        { "conversation", REFUSED,
          "airlock keeps conversations by previous_response_id only; send the id of the "
          "response to continue as previous_response_id" },
        { "prompt", REFUSED,
          "airlock has no stored prompt templates; send the prompt's text as instructions and "
          "input" },
        { "context_management", REFUSED,
          "airlock does not compact conversations; start a new conversation when it grows too "
          "long for the model" },
        { "moderation", REFUSED, "airlock does not run moderation" },
};

static int check_members(json_t *body, struct caller_tools_error *err)
{
        const char *key;
        json_t *v;

        json_object_foreach (body, key, v) {
                size_t i;

                for (i = 0; i < ELEMENTSOF(members); i++)
                        if (strcmp(members[i].name, key) == 0)
                                break;
                if (i == ELEMENTSOF(members))
                        return fail(err, key,
                                    "unrecognized request argument supplied: %.64s (airlock "
                                    "implements the members docs/RESPONSES.md lists)",
                                    key);
                if (members[i].how == REFUSED && !json_is_null(v) && !json_is_false(v))
                        return fail(err, key, "%s is not supported: %s", key, members[i].why);
        }
        return 0;
}

/* "1g", "4g", "16g", "64g": OpenAI's container sizes. */
static bool memory_limit_is_valid(const char *s)
{
        static const char *const sizes[] = { "1g", "4g", "16g", "64g" };

        for (size_t i = 0; i < ELEMENTSOF(sizes); i++)
                if (strcmp(s, sizes[i]) == 0)
                        return true;
        return false;
}

static int parse_container(struct responses_plan *p, json_t *c, const char *param,
                           struct caller_tools_error *err)
{
        char sub[96];
        json_t *v;
        const char *key;
        size_t i;

        if (json_is_string(c)) {
                if (json_string_length(c) == 0 || json_string_length(c) > RESPONSES_NAME_MAX)
                        return fail(err, param,
                                    "%s.container must be a container id or an "
                                    "object {\"type\": \"auto\"}",
                                    param);
                (void) snprintf(p->container, sizeof(p->container), "%s", json_string_value(c));
                return 0;
        }
        if (!json_is_object(c))
                return fail(err, param,
                            "%s.container must be a container id or an object {\"type\": "
                            "\"auto\"}, not %s",
                            param, c ? json_type_name(c) : "missing");
        json_object_foreach (c, key, v) {
                (void) snprintf(sub, sizeof(sub), "%s.container.%s", param, key);
                if (strcmp(key, "type") == 0) {
                        if (!json_is_string(v) || strcmp(json_string_value(v), "auto") != 0)
                                return fail(err, sub, "%s must be \"auto\"", sub);
                } else if (strcmp(key, "file_ids") == 0) {
                        json_t *id;

                        if (json_is_null(v))
                                continue;
                        if (!json_is_array(v) || json_array_size(v) > FILE_IDS_MAX)
                                return fail(err, sub, "%s must be an array of at most %d file ids",
                                            sub, FILE_IDS_MAX);
                        json_array_foreach (v, i, id)
                                if (!json_is_string(id) || json_string_length(id) == 0 ||
                                    json_string_length(id) > RESPONSES_NAME_MAX)
                                        return fail(err, sub, "%s[%zu] must be a file id", sub, i);
                        p->file_ids = v;
                } else if (strcmp(key, "memory_limit") == 0) {
                        if (json_is_null(v))
                                continue;
                        if (!json_is_string(v) || !memory_limit_is_valid(json_string_value(v)))
                                return fail(err, sub,
                                            "%s must be \"1g\", \"4g\", \"16g\" or \"64g\"", sub);
                        p->memory_limit = json_string_value(v);
                } else if (strcmp(key, "network_policy") == 0) {
                        const char *type = json_string_value(json_object_get(v, "type"));

                        if (json_is_null(v) || (type && strcmp(type, "disabled") == 0))
                                continue;
                        return fail(err, sub,
                                    "%s: airlock's containers have no network; only {\"type\": "
                                    "\"disabled\"} is accepted (profiles set egress, see "
                                    "docs/PROFILES.md)",
                                    sub);
                } else {
                        return fail(err, sub,
                                    "%s is not supported (the container takes type, "
                                    "file_ids, memory_limit and network_policy)",
                                    sub);
                }
        }
        if (!json_object_get(c, "type"))
                return fail(err, param, "%s.container.type is required (\"auto\")", param);
        return 0;
}

/* One function tool {type: "function", name, description?, parameters?, strict?} in Chat
 * Completions' shape. */
static int function_tool(json_t *t, const char *param, json_t **ret, struct caller_tools_error *err)
{
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *desc = member(t, "description"), *params = member(t, "parameters");
        json_t *strict = member(t, "strict"), *v;
        const char *key;
        json_t *fn;

        json_object_foreach (t, key, v)
                if (strcmp(key, "type") != 0 && strcmp(key, "name") != 0 &&
                    strcmp(key, "description") != 0 && strcmp(key, "parameters") != 0 &&
                    strcmp(key, "strict") != 0 && strcmp(key, "defer_loading") != 0)
                        return fail(err, param, "%s.%.64s is not a member of a function tool",
                                    param, key);
        if (!name || !caller_tool_name_is_valid(name))
                return fail(err, param,
                            "%s.name must be 1 to %d characters of a-z, A-Z, 0-9, '_' and '-'",
                            param, CALLER_TOOL_NAME_MAX);
        if ((desc && !json_is_string(desc)) || (params && !json_is_object(params)) ||
            (strict && !json_is_boolean(strict)))
                return fail(err, param,
                            "%s: description must be a string, parameters an object (a JSON "
                            "Schema) and strict a boolean",
                            param);
        fn = json_pack("{s:s}", "name", name);
        if (!fn || copy_to(fn, "description", desc) < 0 || copy_to(fn, "parameters", params) < 0 ||
            copy_to(fn, "strict", strict) < 0) {
                json_decref(fn);
                return -ENOMEM;
        }
        *ret = json_pack("{s:s, s:o}", "type", "function", "function", fn);
        return *ret ? 0 : -ENOMEM;
}

static int parse_tools(struct responses_plan *p, json_t *tools, struct caller_tools_error *err)
{
        json_t *t;
        size_t i;
        int r;

        if (!tools)
                return 0;
        if (!json_is_array(tools))
                return want(err, "tools", tools, false, "an array");
        if (json_array_size(tools) > CALLER_TOOLS_MAX + 1)
                return fail(err, "tools", "tools has more than %d entries", CALLER_TOOLS_MAX + 1);
        json_array_foreach (tools, i, t) {
                char param[32];
                const char *type = json_string_value(json_object_get(t, "type"));

                (void) snprintf(param, sizeof(param), "tools[%zu]", i);
                if (!json_is_object(t) || !type)
                        return fail(err, param, "%s must be an object with a type", param);
                if (strcmp(type, "code_interpreter") == 0) {
                        if (p->code_interpreter)
                                return fail(err, param,
                                            "%s: only one code_interpreter tool may "
                                            "be given",
                                            param);
                        p->code_interpreter = true;
                        (void) snprintf(p->code_param, sizeof(p->code_param), "%s", param);
                        r = parse_container(p, json_object_get(t, "container"), param, err);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (strcmp(type, "function") == 0) {
                        json_t *decl = NULL;
                        const char *name;

                        r = function_tool(t, param, &decl, err);
                        if (r < 0)
                                return r;
                        name = json_string_value(
                                json_object_get(json_object_get(decl, "function"), "name"));
                        if (strcmp(name, RESPONSES_CODE_TOOL) == 0 ||
                            caller_tools_has(p->caller_tools, name)) {
                                r = fail(err, param,
                                         "%s: the name '%s' is taken (by another tool, or by "
                                         "the code interpreter's own tool)",
                                         param, name);
                                json_decref(decl);
                                return r;
                        }
                        if (!p->caller_tools)
                                p->caller_tools = json_array();
                        if (!p->caller_tools || json_array_append_new(p->caller_tools, decl) < 0)
                                return -ENOMEM;
                        continue;
                }
                return fail(err, param,
                            "%s: airlock does not run the '%.64s' tool; it runs code_interpreter "
                            "and passes function tools through to you",
                            param, type);
        }
        return 0;
}

/* One tool of tool_choice or of allowed_tools, as Chat Completions names it. */
static json_t *choice_function(struct responses_plan *p, json_t *c, const char *param,
                               struct caller_tools_error *err)
{
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *name = json_string_value(json_object_get(c, "name"));

        if (type && strcmp(type, "code_interpreter") == 0) {
                if (!p->code_interpreter) {
                        (void) fail(err, param,
                                    "%s names code_interpreter, which tools does not "
                                    "declare",
                                    param);
                        return NULL;
                }
                name = RESPONSES_CODE_TOOL;
        } else if (type && strcmp(type, "function") == 0) {
                if (!name || !caller_tools_has(p->caller_tools, name)) {
                        (void) fail(err, param,
                                    "%s names the function '%.64s', which tools does "
                                    "not declare",
                                    param, name ? name : "");
                        return NULL;
                }
        } else {
                (void) fail(err, param,
                            "%s: airlock's tools are code_interpreter and your functions, not "
                            "'%.64s'",
                            param, type ? type : "");
                return NULL;
        }
        return json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name);
}

static int parse_tool_choice(struct responses_plan *p, json_t *c, struct caller_tools_error *err)
{
        const char *s = json_string_value(c);
        const char *type = json_string_value(json_object_get(c, "type"));

        if (!c)
                return 0;
        if (s) {
                if (strcmp(s, "none") != 0 && strcmp(s, "auto") != 0 && strcmp(s, "required") != 0)
                        return fail(err, "tool_choice",
                                    "tool_choice must be \"none\", \"auto\", \"required\" or an "
                                    "object");
                p->tool_choice = json_incref(c);
                return 0;
        }
        if (!json_is_object(c) || !type)
                return want(err, "tool_choice", c, false, "a string or an object with a type");
        if (strcmp(type, "allowed_tools") == 0) {
                const char *mode = json_string_value(json_object_get(c, "mode"));
                json_t *tools = json_object_get(c, "tools"), *t, *list;
                size_t i;

                if (!mode || (strcmp(mode, "auto") != 0 && strcmp(mode, "required") != 0))
                        return fail(err, "tool_choice.mode",
                                    "tool_choice.mode must be \"auto\" or \"required\"");
                if (!json_is_array(tools) || json_array_size(tools) == 0)
                        return fail(err, "tool_choice.tools",
                                    "tool_choice.tools must be a non-empty array");
                list = json_array();
                if (!list)
                        return -ENOMEM;
                json_array_foreach (tools, i, t) {
                        char param[48];
                        json_t *f;

                        (void) snprintf(param, sizeof(param), "tool_choice.tools[%zu]", i);
                        f = choice_function(p, t, param, err);
                        if (!f || json_array_append_new(list, f) < 0) {
                                json_decref(list);
                                return err->param[0] ? -EINVAL : -ENOMEM;
                        }
                }
                p->tool_choice = json_pack("{s:s, s:{s:s, s:o}}", "type", "allowed_tools",
                                           "allowed_tools", "mode", mode, "tools", list);
                return p->tool_choice ? 0 : -ENOMEM;
        }
        p->tool_choice = choice_function(p, c, "tool_choice", err);
        if (!p->tool_choice)
                return err->param[0] ? -EINVAL : -ENOMEM;
        return 0;
}

static int parse_metadata(json_t *m, struct caller_tools_error *err)
{
        const char *key;
        json_t *v;

        if (!m)
                return 0;
        if (!json_is_object(m) || json_object_size(m) > METADATA_MAX)
                return fail(err, "metadata", "metadata must be an object of at most %d strings",
                            METADATA_MAX);
        json_object_foreach (m, key, v)
                if (strlen(key) > METADATA_KEY_MAX || !json_is_string(v) ||
                    json_string_length(v) > METADATA_VALUE_MAX)
                        return fail(err, "metadata",
                                    "metadata: keys are at most %d characters and values "
                                    "strings of at most %d ('%.64s' is not)",
                                    METADATA_KEY_MAX, METADATA_VALUE_MAX, key);
        return 0;
}

/* What OpenAI's include accepts; code_interpreter_call.outputs is the one that changes
 * anything here (the others name items airlock never makes). */
static int parse_include(struct responses_plan *p, json_t *inc, struct caller_tools_error *err)
{
        static const char *const known[] = {
                "code_interpreter_call.outputs", "file_search_call.results",
                "web_search_call.results",       "web_search_call.action.sources",
                "message.input_image.image_url", "computer_call_output.output.image_url",
                "reasoning.encrypted_content",   "message.output_text.logprobs",
        };
        json_t *v;
        size_t i;

        if (!inc)
                return 0;
        if (!json_is_array(inc))
                return want(err, "include", inc, false, "an array of strings");
        json_array_foreach (inc, i, v) {
                const char *s = json_string_value(v);
                size_t k;

                for (k = 0; s && k < ELEMENTSOF(known); k++)
                        if (strcmp(s, known[k]) == 0)
                                break;
                if (!s || k == ELEMENTSOF(known))
                        return fail(err, "include",
                                    "include[%zu] is not one of the values "
                                    "OpenAI defines (code_interpreter_call.outputs, "
                                    "...)",
                                    i);
                if (k == 0)
                        p->include_outputs = true;
        }
        return 0;
}

/* text.format as Chat Completions' response_format; text.verbosity as verbosity. */
static int parse_text(json_t *text, json_t *up, struct caller_tools_error *err)
{
        json_t *format = member(text, "format"), *verbosity = member(text, "verbosity");
        const char *type = json_string_value(json_object_get(format, "type"));
        json_t *rf = NULL;

        if (!text)
                return 0;
        if (!json_is_object(text))
                return want(err, "text", text, false, "an object");
        if (format && !type)
                return fail(err, "text.format", "text.format must be an object with a type");
        if (type && strcmp(type, "json_object") == 0) {
                rf = json_pack("{s:s}", "type", "json_object");
        } else if (type && strcmp(type, "json_schema") == 0) {
                json_t *name = json_object_get(format, "name");
                json_t *schema = json_object_get(format, "schema");

                if (!json_is_string(name) || !json_is_object(schema))
                        return fail(err, "text.format",
                                    "text.format of type json_schema needs a name (string) and "
                                    "a schema (object)");
                rf = json_pack("{s:s, s:{s:O, s:O}}", "type", "json_schema", "json_schema", "name",
                               name, "schema", schema);
                if (rf && (copy_to(json_object_get(rf, "json_schema"), "strict",
                                   member(format, "strict")) < 0 ||
                           copy_to(json_object_get(rf, "json_schema"), "description",
                                   member(format, "description")) < 0)) {
                        json_decref(rf);
                        return -ENOMEM;
                }
        } else if (type && strcmp(type, "text") != 0) {
                return fail(err, "text.format",
                            "text.format.type must be \"text\", \"json_object\" or "
                            "\"json_schema\"");
        }
        if (rf && json_object_set_new(up, "response_format", rf) < 0)
                return -ENOMEM;
        if (verbosity && !json_is_string(verbosity))
                return want(err, "text.verbosity", verbosity, false, "a string");
        return copy_to(up, "verbosity", verbosity);
}

static int parse_numbers(json_t *body, json_t *up, struct responses_plan *p,
                         struct caller_tools_error *err)
{
        json_t *max = member(body, "max_output_tokens"), *temp = member(body, "temperature");
        json_t *top_p = member(body, "top_p"), *calls = member(body, "max_tool_calls");
        json_t *logprobs = member(body, "top_logprobs");
        int r;

        if (max && (!json_is_integer(max) || json_integer_value(max) < 1))
                return fail(err, "max_output_tokens",
                            "max_output_tokens must be a positive "
                            "integer");
        if (temp &&
            (!json_is_number(temp) || json_number_value(temp) < 0 || json_number_value(temp) > 2))
                return fail(err, "temperature", "temperature must be a number from 0 to 2");
        if (top_p && (!json_is_number(top_p) || json_number_value(top_p) < 0 ||
                      json_number_value(top_p) > 1))
                return fail(err, "top_p", "top_p must be a number from 0 to 1");
        if (calls && (!json_is_integer(calls) || json_integer_value(calls) < 1 ||
                      json_integer_value(calls) > 1000))
                return fail(err, "max_tool_calls",
                            "max_tool_calls must be an integer from 1 to "
                            "1000");
        if (logprobs && (!json_is_integer(logprobs) || json_integer_value(logprobs) != 0))
                return fail(err, "top_logprobs",
                            "top_logprobs is not supported: airlock does not return log "
                            "probabilities (0 is accepted)");
        p->max_tool_calls = calls ? (unsigned) json_integer_value(calls) : 0;
        r = copy_to(up, "max_tokens", max);
        if (r >= 0)
                r = copy_to(up, "temperature", temp);
        if (r >= 0)
                r = copy_to(up, "top_p", top_p);
        return r;
}

/* reasoning.effort as Chat Completions' reasoning_effort (summary: airlock makes no reasoning
 * items). */
static int parse_reasoning(json_t *reasoning, json_t *up, struct caller_tools_error *err)
{
        json_t *effort = member(reasoning, "effort");

        if (!reasoning)
                return 0;
        if (!json_is_object(reasoning))
                return want(err, "reasoning", reasoning, false, "an object");
        if (effort && !json_is_string(effort))
                return want(err, "reasoning.effort", effort, false, "a string");
        return copy_to(up, "reasoning_effort", effort);
}

static int check_flag(json_t *body, const char *key, bool *ret, bool dflt,
                      struct caller_tools_error *err)
{
        json_t *v = member(body, key);

        if (v && !json_is_boolean(v))
                return want(err, key, v, false, "a boolean");
        *ret = v ? json_is_true(v) : dflt;
        return 0;
}

static int check_string(json_t *body, const char *key, size_t max, struct caller_tools_error *err)
{
        json_t *v = member(body, key);

        if (v && (!json_is_string(v) || json_string_length(v) > max))
                return fail(err, key, "%s must be a string of at most %zu bytes", key, max);
        return 0;
}

/* Sets e[key] to the request's member, or to dflt (a new reference, taken) when it has none. */
static int echo(json_t *e, json_t *body, const char *key, json_t *dflt)
{
        json_t *v = member(body, key);

        if (v) {
                json_decref(dflt);
                return json_object_set(e, key, v) < 0 ? -ENOMEM : 0;
        }
        return json_object_set_new(e, key, dflt) < 0 ? -ENOMEM : 0;
}

/* The members the Response object echoes (OpenAI's defaults for those not given). */
static json_t *make_echo(json_t *body, const struct responses_plan *p)
{
        _cleanup_json_ json_t *e = json_object();
        int r;

        if (!e)
                return NULL;
        r = echo(e, body, "instructions", json_null());
        if (r >= 0)
                r = echo(e, body, "max_output_tokens", json_null());
        if (r >= 0)
                r = echo(e, body, "max_tool_calls", json_null());
        if (r >= 0)
                r = echo(e, body, "metadata", json_object());
        if (r >= 0)
                r = echo(e, body, "parallel_tool_calls", json_true());
        if (r >= 0)
                r = echo(e, body, "previous_response_id", json_null());
        if (r >= 0)
                r = echo(e, body, "reasoning", json_pack("{s:n, s:n}", "effort", "summary"));
        if (r >= 0)
                r = json_object_set_new(e, "store", json_boolean(p->store));
        if (r >= 0)
                r = echo(e, body, "temperature", json_real(1.0));
        if (r >= 0)
                r = echo(e, body, "text", json_pack("{s:{s:s}}", "format", "type", "text"));
        if (r >= 0)
                r = echo(e, body, "tool_choice", json_string("auto"));
        if (r >= 0)
                r = echo(e, body, "tools", json_array());
        if (r >= 0)
                r = echo(e, body, "top_p", json_real(1.0));
        if (r >= 0)
                r = echo(e, body, "truncation", json_string("disabled"));
        if (r >= 0)
                r = echo(e, body, "user", json_null());
        return r < 0 ? NULL : TAKE_PTR(e);
}

int responses_plan_parse(json_t *body, const char *default_model, struct responses_plan *ret_plan,
                         struct caller_tools_error *err)
{
        _cleanup_(responses_plan_done) struct responses_plan p = {};
        json_t *model = member(body, "model"), *input = member(body, "input"), *v;
        json_t *instructions = member(body, "instructions"), *prev;
        const char *s;
        bool background;
        int r;

        if (!json_is_object(body))
                return fail(err, "body", "the body must be a JSON object (a Responses request)");
        r = check_members(body, err);
        if (r < 0)
                return r;

        if (model && (!json_is_string(model) || json_string_length(model) == 0 ||
                      json_string_length(model) > RESPONSES_NAME_MAX))
                return fail(err, "model", "model must be a non-empty string");
        s = model ? json_string_value(model) : default_model;
        if (!s || !*s)
                return fail(err, "model",
                            "the request names no model and the daemon has no "
                            "default (airlock serve --llm-model)");
        p.upstream = json_pack("{s:s}", "model", s);
        if (!p.upstream)
                return -ENOMEM;
        p.model = json_string_value(json_object_get(p.upstream, "model"));

        if (!input)
                return fail(err, "input", "input is required: a string or an array of items");
        if (!json_is_string(input) && !json_is_array(input))
                return want(err, "input", input, false, "a string or an array of items");
        if (json_is_array(input) && json_array_size(input) == 0 &&
            !json_is_string(member(body, "previous_response_id")))
                return fail(err, "input", "input is empty: give the model something to answer");
        if (json_is_array(input) && json_array_size(input) > RESPONSES_INPUT_MAX)
                return fail(err, "input", "input has more than %d items", RESPONSES_INPUT_MAX);
        p.input = input;
        if (instructions && !json_is_string(instructions))
                return want(err, "instructions", instructions, false, "a string");
        p.instructions = instructions;

        r = parse_tools(&p, member(body, "tools"), err);
        if (r >= 0)
                r = parse_tool_choice(&p, member(body, "tool_choice"), err);
        if (r >= 0)
                r = parse_include(&p, member(body, "include"), err);
        if (r >= 0)
                r = parse_metadata(member(body, "metadata"), err);
        if (r >= 0)
                r = parse_numbers(body, p.upstream, &p, err);
        if (r >= 0)
                r = parse_text(member(body, "text"), p.upstream, err);
        if (r >= 0)
                r = parse_reasoning(member(body, "reasoning"), p.upstream, err);
        if (r >= 0)
                r = check_flag(body, "store", &p.store, true, err);
        if (r >= 0)
                r = check_flag(body, "stream", &p.stream, false, err);
        if (r >= 0)
                r = check_flag(body, "background", &background, false, err);
        if (r >= 0 && background)
                r = fail(err, "background",
                         "background is not supported: airlock answers while the request is "
                         "open (use stream: true to see the response as it is made)");
        if (r >= 0)
                r = check_string(body, "user", RESPONSES_NAME_MAX, err);
        if (r >= 0)
                r = check_string(body, "previous_response_id", RESPONSES_NAME_MAX, err);
        if (r < 0)
                return r;
        v = member(body, "parallel_tool_calls");
        if (v && !json_is_boolean(v))
                return want(err, "parallel_tool_calls", v, false, "a boolean");
        v = member(body, "truncation");
        s = json_string_value(v);
        if (v && (!s || (strcmp(s, "auto") != 0 && strcmp(s, "disabled") != 0)))
                return fail(err, "truncation", "truncation must be \"auto\" or \"disabled\"");
        if (copy_to(p.upstream, "parallel_tool_calls", member(body, "parallel_tool_calls")) < 0 ||
            copy_to(p.upstream, "user", member(body, "user")) < 0)
                return -ENOMEM;
        prev = member(body, "previous_response_id");
        p.previous_id = json_string_value(prev);

        p.echo = make_echo(body, &p);
        if (!p.echo)
                return -ENOMEM;
        *ret_plan = p;
        p = (struct responses_plan){};
        return 0;
}
