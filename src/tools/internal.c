/* Internal tools (src/hub/) seen through the tools module: declared next to airlock's own in
 * every API shape, and called by name from a toolbox, so that the gateway, `airlock chat` and
 * /mcp route them with no code of their own. */
#include "tools-internal.h"

#include "base/cleanup.h"
#include "hub/hub.h"
#include "metrics/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the model reads for an internal tool: the server's description, with where it comes
 * from and, when it cannot be called now, why. */
static char *model_description(json_t *t)
{
        const char *desc = json_string_value(json_object_get(t, "description"));
        const char *server = json_string_value(json_object_get(t, "server"));
        const char *reason = json_string_value(json_object_get(t, "reason"));
        char *out = NULL;
        int n;

        if (json_is_true(json_object_get(t, "available")))
                n = asprintf(&out, "%s%s(internal tool of '%s')", desc ? desc : "",
                             desc && *desc ? " " : "", server);
        else
                n = asprintf(&out, "[currently unavailable: %s] %s%s(internal tool of '%s')",
                             reason ? reason : "its server is not running", desc ? desc : "",
                             desc && *desc ? " " : "", server);
        return n < 0 ? NULL : out;
}

static json_t *internal_declaration(json_t *t, enum tools_format format)
{
        _cleanup_free_ char *desc = model_description(t);
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *schema = json_object_get(t, "inputSchema"), *d = NULL;

        if (!desc)
                return NULL;
        switch (format) {
        case TOOLS_FORMAT_OPENAI:
                d = json_pack("{s:s, s:{s:s, s:s, s:O}}", "type", "function", "function", "name",
                              name, "description", desc, "parameters", schema);
                break;
        case TOOLS_FORMAT_ANTHROPIC:
                d = json_pack("{s:s, s:s, s:O}", "name", name, "description", desc, "input_schema",
                              schema);
                break;
        case TOOLS_FORMAT_MCP:
                d = json_pack("{s:s, s:s, s:O}", "name", name, "description", desc, "inputSchema",
                              schema);
                if (d && json_object_get(t, "title"))
                        json_object_set(d, "title", json_object_get(t, "title"));
                if (d && json_object_get(t, "outputSchema"))
                        json_object_set(d, "outputSchema", json_object_get(t, "outputSchema"));
                if (d && json_object_get(t, "annotations"))
                        json_object_set(d, "annotations", json_object_get(t, "annotations"));
                break;
        }
        return d;
}

int tools_internal_declare(struct hub *hub, enum tools_format format, json_t *list)
{
        _cleanup_(json_decrefp) json_t *tools = hub ? hub_tools(hub) : json_array();
        size_t i;
        json_t *t;

        if (!tools)
                return -ENOMEM;
        json_array_foreach (tools, i, t) {
                json_t *d = internal_declaration(t, format);
                if (!d || json_array_append_new(list, d) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int tools_internal_call(struct hub *hub, const char *name, json_t *args, uint64_t deadline_ns,
                        struct tool_result *res)
{
        struct airlock_error err = { { 0 } };
        struct hub_result hr = { 0 };
        _cleanup_(json_decrefp) json_t *t = hub ? hub_tool(hub, name) : NULL;
        json_t *execution;
        int r;

        if (!t)
                return -ENOENT;
        r = hub_call(hub, name, t, args, deadline_ns, NULL, &hr, &err);
        metrics_tool_call(METRICS_TOOL_INTERNAL, r < 0         ? METRICS_TOOL_FAILED
                                                 : hr.is_error ? METRICS_TOOL_ERROR
                                                               : METRICS_TOOL_OK);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_result_error(res, "%s", err.msg) < 0 ? -ENOMEM : 0;
        res->is_error = hr.is_error;
        r = tool_result_appendf(res, "%s", hr.text);
        json_array_extend(res->images, hr.images);
        execution =
                json_pack("{s:O, s:O, s:b, s:b}", "server", json_object_get(t, "server"), "tool",
                          json_object_get(t, "tool"), "is_error", hr.is_error, "cut", hr.cut);
        if (execution && hr.content)
                json_object_set(execution, "content", hr.content);
        if (execution && hr.structured)
                json_object_set(execution, "structuredContent", hr.structured);
        res->execution = execution;
        hub_result_done(&hr);
        return r < 0 || !execution ? -ENOMEM : 0;
}

bool tools_internal_needs_approval(struct hub *hub, const char *name)
{
        _cleanup_(json_decrefp) json_t *t = hub && name ? hub_tool(hub, name) : NULL;
        const char *mode = json_string_value(json_object_get(t, "require_approval"));

        return mode && strcmp(mode, "always") == 0;
}

bool tools_internal_server(struct hub *hub, const char *name, char *buf, size_t size)
{
        _cleanup_(json_decrefp) json_t *t = hub && name ? hub_tool(hub, name) : NULL;
        const char *server = json_string_value(json_object_get(t, "server"));

        if (!server)
                return false;
        (void) snprintf(buf, size, "%s", server);
        return true;
}

/* The Python type a JSON Schema type reads as, for a signature. */
static const char *python_type(json_t *prop)
{
        static const struct {
                const char *json, *py;
        } types[] = { { "string", "str" },   { "integer", "int" }, { "number", "float" },
                      { "boolean", "bool" }, { "array", "list" },  { "object", "dict" },
                      { "null", "None" } };
        const char *t = json_string_value(json_object_get(prop, "type"));

        for (size_t i = 0; t && i < sizeof(types) / sizeof(*types); i++)
                if (strcmp(t, types[i].json) == 0)
                        return types[i].py;
        return "Any";
}

static bool required_has(json_t *required, const char *name)
{
        size_t i;
        json_t *r;

        json_array_foreach (required, i, r)
                if (json_is_string(r) && strcmp(json_string_value(r), name) == 0)
                        return true;
        return false;
}

/* "name(a: str, b: int = None) - description" for one tool Code Mode lists, appended to buf.
 * The required parameters come first, as in the function airlock_tools makes. */
static int append_signature(char **buf, size_t *len, json_t *t)
{
        json_t *schema = json_object_get(t, "inputSchema");
        json_t *props = json_object_get(schema, "properties");
        json_t *required = json_object_get(schema, "required"), *p;
        const char *desc = json_string_value(json_object_get(t, "description"));
        char *line = NULL;
        size_t dlen;
        FILE *f;
        const char *k;
        bool first = true;

        f = open_memstream(&line, &dlen);
        if (!f)
                return -ENOMEM;
        fprintf(f, "\n- airlock_tools.%s(", json_string_value(json_object_get(t, "python_name")));
        for (int pass = 0; pass < 2; pass++)
                json_object_foreach (props, k, p) {
                        bool req = required_has(required, k);
                        if (req != (pass == 0))
                                continue;
                        fprintf(f, "%s%s: %s%s", first ? "" : ", ", k, python_type(p),
                                req ? "" : " = None");
                        first = false;
                }
        /* The first sentence of the description is enough to choose by. */
        dlen = desc ? strcspn(desc, "\n") : 0;
        if (dlen > 160)
                dlen = 160;
        fprintf(f, ")%s%.*s", dlen ? ": " : "", (int) dlen, desc ? desc : "");
        if (fclose(f) != 0) {
                free(line);
                return -ENOMEM;
        }
        {
                char *grown = realloc(*buf, *len + strlen(line) + 1);
                if (!grown) {
                        free(line);
                        return -ENOMEM;
                }
                memcpy(grown + *len, line, strlen(line) + 1);
                *buf = grown;
                *len += strlen(line);
        }
        free(line);
        return 0;
}

int tools_code_mode_describe(json_t *list, enum tools_format format, json_t *code)
{
        static const char intro[] =
                "\n\nCode Mode: this code can call internal tools itself, without a round trip "
                "through you: `import airlock_tools`, then call them as functions (keyword "
                "arguments; the result is Python data, a failure raises "
                "airlock_tools.ToolError). Prefer one script that calls them in a loop and "
                "analyses the results over many separate tool calls. Callable here:";
        _cleanup_free_ char *text = strdup(intro);
        size_t len = strlen(intro), i;
        json_t *d, *t;

        if (!text)
                return -ENOMEM;
        json_array_foreach (code, i, t)
                if (append_signature(&text, &len, t) < 0)
                        return -ENOMEM;
        json_array_foreach (list, i, d) {
                json_t *holder = format == TOOLS_FORMAT_OPENAI ? json_object_get(d, "function") : d;
                const char *name = json_string_value(json_object_get(holder, "name"));
                const char *desc = json_string_value(json_object_get(holder, "description"));
                char *joined = NULL;

                if (!name || strcmp(name, "run_python") != 0)
                        continue;
                if (asprintf(&joined, "%s%s", desc ? desc : "", text) < 0)
                        return -ENOMEM;
                json_object_set_new(holder, "description", json_string(joined));
                free(joined);
        }
        return 0;
}
