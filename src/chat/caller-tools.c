/* The checks of caller-tools.h. Every refusal names the member (tools[i], tool_choice) and the
 * reason, because the client is a program whose author reads the 400 once and fixes the call. */
#include "caller-tools.h"

#include "base/json-util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define fail caller_tools_fail

int caller_tools_fail(struct caller_tools_error *err, const char *param, const char *fmt, ...)
{
        va_list ap;

        (void) snprintf(err->param, sizeof(err->param), "%s", param);
        va_start(ap, fmt);
        (void) vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

bool caller_tool_name_is_valid(const char *name)
{
        size_t n = strlen(name);

        if (n == 0 || n > CALLER_TOOL_NAME_MAX)
                return false;
        return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
               n;
}

/* The function name of a tool declaration in OpenAI's shape, or NULL. */
static const char *decl_name(json_t *decl)
{
        return json_string_value(json_object_get(json_object_get(decl, "function"), "name"));
}

static bool declares(json_t *decls, const char *name)
{
        json_t *d;
        size_t i;

        json_array_foreach (decls, i, d) {
                const char *n = decl_name(d);

                if (n && strcmp(n, name) == 0)
                        return true;
        }
        return false;
}

bool caller_tools_has(json_t *tools, const char *name)
{
        return name && json_is_array(tools) && declares(tools, name);
}

/* Checks one member of tools[i].function: absent, JSON null or of the expected kind (type
 * JSON_TRUE stands for either boolean). */
static int check_member(struct caller_tools_error *err, const char *param, json_t *fn,
                        const char *key, json_type type, const char *want)
{
        json_t *v = json_object_get(fn, key);

        if (!v || json_is_null(v) || json_typeof(v) == type ||
            (type == JSON_TRUE && json_is_boolean(v)))
                return 0;
        return fail(err, param, "%s.function.%s must be %s, not %s", param, key, want,
                    json_type_name(v));
}

int caller_tools_check(json_t *tools, json_t *declared, struct caller_tools_error *err)
{
        json_t *t;
        size_t i;

        if (!tools || json_is_null(tools))
                return 0;
        if (!json_is_array(tools))
                return fail(err, "tools", "'tools' must be an array of function tools, not %s",
                            json_type_name(tools));
        if (json_array_size(tools) > CALLER_TOOLS_MAX)
                return fail(err, "tools", "'tools' declares %zu tools; at most %d are accepted",
                            json_array_size(tools), CALLER_TOOLS_MAX);
        json_array_foreach (tools, i, t) {
                char param[32];
                const char *type = json_string_value(json_object_get(t, "type"));
                json_t *fn = json_object_get(t, "function");
                const char *name;
                int r;

                (void) snprintf(param, sizeof(param), "tools[%zu]", i);
                if (!json_is_object(t))
                        return fail(err, param,
                                    "%s must be an object {\"type\": \"function\", \"function\": "
                                    "{\"name\": ...}}, not %s",
                                    param, json_type_name(t));
                if (!type)
                        return fail(err, param,
                                    "%s has no 'type': only function tools "
                                    "({\"type\": \"function\", ...}) are accepted",
                                    param);
                if (strcmp(type, "function") != 0)
                        return fail(err, param,
                                    "%s is of type '%.40s': the gateway passes only function "
                                    "tools (type \"function\") through to the model",
                                    param, type);
                if (!json_is_object(fn))
                        return fail(err, param,
                                    "%s.function must be an object with a 'name', not %s", param,
                                    fn ? json_type_name(fn) : "missing");
                name = json_string_value(json_object_get(fn, "name"));
                if (!name || !caller_tool_name_is_valid(name))
                        return fail(err, param,
                                    "%s.function.name must be 1 to %d characters of a-z, A-Z, "
                                    "0-9, '_' and '-'",
                                    param, CALLER_TOOL_NAME_MAX);
                r = check_member(err, param, fn, "description", JSON_STRING, "a string");
                if (r >= 0)
                        r = check_member(err, param, fn, "parameters", JSON_OBJECT,
                                         "a JSON Schema object");
                if (r >= 0)
                        r = check_member(err, param, fn, "strict", JSON_TRUE, "true or false");
                if (r < 0)
                        return r;
                if (declares(declared, name))
                        return fail(err, param,
                                    "%s: the name '%s' is taken by one of the gateway's own tools; "
                                    "give your function another name",
                                    param, name);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(decl_name(json_array_get(tools, j)), name) == 0)
                                return fail(err, param,
                                            "%s: the function '%s' is declared twice (also "
                                            "tools[%zu])",
                                            param, name, j);
        }
        return 0;
}

/* Checks that a tool_choice entry {"type": "function", "function": {"name"}} names a function
 * that is declared. */
static int check_named(json_t *entry, json_t *tools, json_t *declared, const char *param,
                       struct caller_tools_error *err)
{
        const char *type = json_string_value(json_object_get(entry, "type"));
        const char *name =
                json_string_value(json_object_get(json_object_get(entry, "function"), "name"));

        if (!type || strcmp(type, "function") != 0)
                return fail(err, param,
                            "%s must be {\"type\": \"function\", \"function\": {\"name\": ...}}: "
                            "only function tools are accepted",
                            param);
        if (!name)
                return fail(err, param, "%s names no function ('function.name')", param);
        if (!caller_tools_has(tools, name) && !declares(declared, name))
                return fail(err, param,
                            "%s names the function '%.64s', which is not declared: it is "
                            "neither in 'tools' nor one of the gateway's tools",
                            param, name);
        return 0;
}

int caller_tool_choice_check(json_t *choice, json_t *tools, json_t *declared,
                             struct caller_tools_error *err)
{
        const char *s = json_string_value(choice), *type, *mode;
        json_t *allowed, *list, *e;
        size_t i;

        if (!choice || json_is_null(choice))
                return 0;
        if (s) {
                if (strcmp(s, "none") == 0 || strcmp(s, "auto") == 0 || strcmp(s, "required") == 0)
                        return 0;
                return fail(err, "tool_choice",
                            "'tool_choice' must be \"none\", \"auto\", \"required\" or an object "
                            "naming a function, not \"%.40s\"",
                            s);
        }
        if (!json_is_object(choice))
                return fail(err, "tool_choice",
                            "'tool_choice' must be a string or an object, not %s",
                            json_type_name(choice));
        type = json_string_value(json_object_get(choice, "type"));
        if (type && strcmp(type, "allowed_tools") == 0) {
                allowed = json_object_get(choice, "allowed_tools");
                mode = json_string_value(json_object_get(allowed, "mode"));
                list = json_object_get(allowed, "tools");
                if (!mode || (strcmp(mode, "auto") != 0 && strcmp(mode, "required") != 0))
                        return fail(err, "tool_choice",
                                    "tool_choice.allowed_tools.mode must be \"auto\" or "
                                    "\"required\"");
                if (!json_is_array(list) || json_array_size(list) == 0)
                        return fail(err, "tool_choice",
                                    "tool_choice.allowed_tools.tools must be a non-empty array");
                json_array_foreach (list, i, e) {
                        char param[64];
                        int r;

                        (void) snprintf(param, sizeof(param),
                                        "tool_choice.allowed_tools.tools[%zu]", i);
                        r = check_named(e, tools, declared, param, err);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        return check_named(choice, tools, declared, "tool_choice", err);
}

int caller_parallel_check(json_t *parallel, struct caller_tools_error *err)
{
        if (!parallel || json_is_null(parallel) || json_is_boolean(parallel))
                return 0;
        return fail(err, "parallel_tool_calls",
                    "'parallel_tool_calls' must be true or false, not %s",
                    json_type_name(parallel));
}

bool caller_tool_choice_is_free(json_t *choice)
{
        const char *s = json_string_value(choice);

        if (!choice || json_is_null(choice))
                return true;
        return s && (strcmp(s, "none") == 0 || strcmp(s, "auto") == 0);
}
