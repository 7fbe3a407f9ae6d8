/* tools/list and tools/call: the tools of src/tools/ in MCP's shapes. A tool result becomes
 * content blocks (the text, each image, a resource_link per file the call made) with isError;
 * the files are remembered for resources/list. */
#include "mcp-internal.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "tools/tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mcp_method_tools_list(struct mcp_conn *c, const struct mcp_request *req, json_t **ret_result,
                          struct mcp_rpc_error *e)
{
        json_t *params = req->params;
        json_t *tools;

        /* We never hand out a cursor, so any cursor is one we did not make. */
        if (json_object_get(params, "cursor") && !json_is_null(json_object_get(params, "cursor")))
                return mcp_rpc_error_set(e, JSONRPC_INVALID_PARAMS, "invalid cursor");
        tools = toolbox_declarations(c->tb, TOOLS_FORMAT_MCP);
        if (!tools)
                return -ENOMEM;
        *ret_result = json_pack("{s:o}", "tools", tools);
        return *ret_result ? 0 : -ENOMEM;
}

/* Records the files of a result for resources/list. Files belong to one session: when the
 * toolbox moved to another (reset, or the old one was lost) the old list is dropped. */
static void remember_files(struct mcp_conn *c, const struct tool_result *res,
                           json_t *execution_files)
{
        json_t *f;
        size_t i;

        (void) pthread_mutex_lock(&c->lock);
        if (!res->session_id || !c->resources_session ||
            strcmp(res->session_id, c->resources_session) != 0) {
                json_object_clear(c->resources);
                free(c->resources_session);
                c->resources_session = res->session_id ? strdup(res->session_id) : NULL;
        }
        json_array_foreach (res->files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path"));
                if (path)
                        (void) json_object_set_new(
                                c->resources, path,
                                json_pack("{s:O}", "size", json_object_get(f, "size")));
        }
        /* Deleted files are not in res->files; forget them too. */
        json_array_foreach (execution_files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path"));
                const char *change = json_string_value(json_object_get(f, "change"));
                if (path && change && strcmp(change, "deleted") == 0)
                        (void) json_object_del(c->resources, path);
        }
        (void) pthread_mutex_unlock(&c->lock);
}

/* The execution object for structuredContent, without the images' base64 (they are image
 * content blocks already; twice would double the message). */
static json_t *structured_execution(json_t *exec)
{
        json_t *copy = json_deep_copy(exec), *out;
        size_t i;

        if (!copy)
                return NULL;
        json_array_foreach (json_object_get(copy, "outputs"), i, out) {
                json_t *data = json_object_get(out, "data");
                (void) json_object_del(data, "image/png");
                (void) json_object_del(data, "image/jpeg");
        }
        return copy;
}

/* An internal tool's result as its server sent it: the content blocks and structuredContent
 * (a tool that declares an outputSchema must return it, or MCP clients refuse the result).
 * Not when the hub cut the result (it has no content then: the text says what was cut), nor
 * for a client of a revision before 2025-06-18, which knows neither resource_link nor
 * structuredContent. Returns 1 when *ret_result was made, 0 to build it from the text. */
static int internal_result_to_mcp(const struct tool_result *res, bool modern, json_t **ret_result)
{
        json_t *content = json_object_get(res->execution, "content");
        json_t *sc = json_object_get(res->execution, "structuredContent");
        json_t *result;

        if (!modern || !json_is_array(content))
                return 0;
        result = json_pack("{s:O, s:b}", "content", content, "isError", res->is_error);
        if (!result || (sc && json_object_set(result, "structuredContent", sc) < 0)) {
                json_decref(result);
                return -ENOMEM;
        }
        *ret_result = result;
        return 1;
}

static int result_to_mcp(struct mcp_conn *c, const char *tool, struct tool_result *res,
                         json_t **ret_result)
{
        _cleanup_(json_decrefp) json_t *content = json_array(), *result = NULL;
        char version[16];
        /* resource_link content and structuredContent came with 2025-06-18. */
        bool modern;
        json_t *img, *f;
        size_t i;

        mcp_conn_version(c, version);
        modern = strcmp(version, "2025-06-18") >= 0;
        if (!content)
                return -ENOMEM;
        if (!tools_find(tool)) {
                int r = internal_result_to_mcp(res, modern, ret_result);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        if (json_array_append_new(
                    content, json_pack("{s:s, s:s}", "type", "text", "text",
                                       res->text && *res->text ? res->text : "(no output)")) < 0)
                return -ENOMEM;
        json_array_foreach (res->images, i, img)
                if (json_array_append_new(content,
                                          json_pack("{s:s, s:O, s:O}", "type", "image", "data",
                                                    json_object_get(img, "data"), "mimeType",
                                                    json_object_get(img, "mime_type"))) < 0)
                        return -ENOMEM;
        json_array_foreach (res->files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path"));
                _cleanup_free_ char *uri = NULL;
                json_t *link;

                if (!path || !modern)
                        continue;
                uri = mcp_resource_uri(path);
                link = uri ? json_pack("{s:s, s:s, s:s, s:s, s:O}", "type", "resource_link", "uri",
                                       uri, "name", path, "description",
                                       "a file in the sandbox's /work", "size",
                                       json_object_get(f, "size"))
                           : NULL;
                if (!link)
                        return -ENOMEM;
                if (mcp_mime_type(path))
                        (void) json_object_set_new(link, "mimeType",
                                                   json_string(mcp_mime_type(path)));
                if (json_array_append_new(content, link) < 0)
                        return -ENOMEM;
        }
        result = json_pack("{s:O, s:b}", "content", content, "isError", res->is_error);
        if (!result)
                return -ENOMEM;
        if (modern && res->execution &&
            (strcmp(tool, "run_python") == 0 || strcmp(tool, "run_shell") == 0)) {
                json_t *sc = structured_execution(res->execution);
                if (!sc || json_object_set_new(result, "structuredContent", sc) < 0)
                        return -ENOMEM;
        }
        *ret_result = TAKE_PTR(result);
        return 0;
}

int mcp_method_tools_call(struct mcp_conn *c, const struct mcp_request *req, json_t **ret_result,
                          struct mcp_rpc_error *e)
{
        json_t *params = req->params;
        json_t *name = json_object_get(params, "name");
        json_t *args = json_object_get(params, "arguments");
        struct tool_result res = { 0 };
        uint64_t start = now_ns();
        int r;

        if (!json_is_string(name))
                return mcp_rpc_error_set(e, JSONRPC_INVALID_PARAMS,
                                         "tools/call: params.name must be a string");
        if (args && !json_is_object(args) && !json_is_null(args))
                return mcp_rpc_error_set(e, JSONRPC_INVALID_PARAMS,
                                         "tools/call: params.arguments must be an object");
        if (json_is_null(args))
                args = NULL;

        r = toolbox_call_until(c->tb, json_string_value(name), args, req->deadline_ns, &res);
        if (r == -ENOENT) {
                /* As the official SDKs do: an unknown tool is reported to the model as a tool
                 * error it can read and correct, not as a protocol failure. */
                char buf[300];
                (void) snprintf(buf, sizeof(buf),
                                "unknown tool '%.100s'; tools/list names the tools there are",
                                json_string_value(name));
                *ret_result = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                                        buf, "isError", true);
                log_info("mcp=%s tool=%.60s unknown", c->name, json_string_value(name));
                return *ret_result ? 0 : -ENOMEM;
        }
        if (r < 0)
                return r;

        log_info("mcp=%s tool=%s session=%s error=%s ms=%.1f", c->name, json_string_value(name),
                 res.session_id ? res.session_id : "-", res.is_error ? "yes" : "no",
                 (double) (now_ns() - start) / 1e6);
        remember_files(c, &res, json_object_get(res.execution, "files"));
        r = result_to_mcp(c, json_string_value(name), &res, ret_result);
        tool_result_done(&res);
        return r;
}
