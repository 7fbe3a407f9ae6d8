/* Internal tools (src/hub/) seen through the tools module: declared next to airlock's own in
 * every API shape, and called by name from a toolbox, so that the gateway, `airlock chat` and
 * /mcp route them with no code of their own. */
#include "tools-internal.h"

#include "base/cleanup.h"
#include "hub/hub.h"

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
        r = hub_call(hub, name, args, deadline_ns, NULL, &hr, &err);
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
