/* resources/list, resources/templates/list and resources/read: the files of the connection's
 * session as airlock://files/<path>. The list holds the files tool calls created or changed;
 * any file of the session's /work can be read by its URI. Text comes back as text, anything
 * else as a base64 blob. */
#include "mcp-internal.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "session/sandbox.h"
#include "tools/base64.h"
#include "tools/tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *mcp_mime_type(const char *path)
{
        static const struct {
                const char *ext;
                const char *mime;
        } types[] = {
                { "png", "image/png" },         { "jpg", "image/jpeg" },
                { "jpeg", "image/jpeg" },       { "gif", "image/gif" },
                { "svg", "image/svg+xml" },     { "webp", "image/webp" },
                { "pdf", "application/pdf" },   { "json", "application/json" },
                { "csv", "text/csv" },          { "tsv", "text/tab-separated-values" },
                { "txt", "text/plain" },        { "log", "text/plain" },
                { "md", "text/markdown" },      { "html", "text/html" },
                { "htm", "text/html" },         { "xml", "application/xml" },
                { "py", "text/x-python" },      { "sh", "text/x-shellscript" },
                { "zip", "application/zip" },   { "parquet", "application/vnd.apache.parquet" },
                { "yaml", "application/yaml" }, { "yml", "application/yaml" },
        };
        const char *slash = strrchr(path, '/'), *dot = strrchr(slash ? slash : path, '.');

        if (!dot || dot[1] == '\0')
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if (strcasecmp(dot + 1, types[i].ext) == 0)
                        return types[i].mime;
        return NULL;
}

char *mcp_resource_uri(const char *path)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t plen = strlen(MCP_RESOURCE_PREFIX);
        char *out = malloc(plen + strlen(path) * 3 + 1), *o;

        if (!out)
                return NULL;
        memcpy(out, MCP_RESOURCE_PREFIX, plen);
        o = out + plen;
        for (const unsigned char *p = (const unsigned char *) path; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
                        *o++ = (char) *p;
                } else {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 15];
                }
        }
        *o = '\0';
        return out;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* The /work path a URI names: the prefix, then a percent-encoded relative path. Returns a new
 * string, or NULL when the URI is not one of ours or decodes to NUL or an unsafe path. */
static char *resource_path(const char *uri)
{
        size_t plen = strlen(MCP_RESOURCE_PREFIX);
        _cleanup_free_ char *path = NULL;
        char *o;

        if (strncmp(uri, MCP_RESOURCE_PREFIX, plen) != 0)
                return NULL;
        uri += plen;
        path = malloc(strlen(uri) + 1);
        if (!path)
                return NULL;
        o = path;
        for (const char *p = uri; *p; p++) {
                if (*p == '%') {
                        int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
                        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                                return NULL;
                        *o++ = (char) (hi * 16 + lo);
                        p += 2;
                } else if (*p == '?' || *p == '#') {
                        return NULL;
                } else {
                        *o++ = *p;
                }
        }
        *o = '\0';
        if (!workspace_path_is_valid(path, false))
                return NULL;
        return TAKE_PTR(path);
}

int mcp_method_resources_list(struct mcp_conn *c, const struct mcp_request *req,
                              json_t **ret_result, struct mcp_rpc_error *e)
{
        json_t *params = req->params;
        _cleanup_(json_decrefp) json_t *list = json_array();
        const char *path;
        json_t *info;
        int r = 0;

        if (json_object_get(params, "cursor") && !json_is_null(json_object_get(params, "cursor")))
                return mcp_rpc_error_set(e, JSONRPC_INVALID_PARAMS, "invalid cursor");
        if (!list)
                return -ENOMEM;
        (void) pthread_mutex_lock(&c->lock);
        json_object_foreach (c->resources, path, info) {
                _cleanup_free_ char *uri = mcp_resource_uri(path);
                json_t *item = uri ? json_pack("{s:s, s:s, s:O}", "uri", uri, "name", path, "size",
                                               json_object_get(info, "size"))
                                   : NULL;
                if (item && mcp_mime_type(path))
                        (void) json_object_set_new(item, "mimeType",
                                                   json_string(mcp_mime_type(path)));
                if (!item || json_array_append_new(list, item) < 0) {
                        r = -ENOMEM;
                        break;
                }
        }
        (void) pthread_mutex_unlock(&c->lock);
        if (r < 0)
                return r;
        *ret_result = json_pack("{s:O}", "resources", list);
        return *ret_result ? 0 : -ENOMEM;
}

int mcp_method_resources_templates_list(struct mcp_conn *c, const struct mcp_request *req,
                                        json_t **ret_result, struct mcp_rpc_error *e)
{
        (void) c;
        (void) req;
        (void) e;
        /* RFC 6570 "{+path}": reserved expansion, so the '/' of subdirectories stays. */
        *ret_result = json_pack("{s:[{s:s, s:s, s:s, s:s}]}", "resourceTemplates", "uriTemplate",
                                MCP_RESOURCE_PREFIX "{+path}", "name", "workspace-file", "title",
                                "A file in the sandbox's /work", "description",
                                "Any file of the session's /work directory, by its path relative "
                                "to /work.");
        return *ret_result ? 0 : -ENOMEM;
}

static bool is_utf8_text(const char *data, size_t len)
{
        _cleanup_free_ char *clean = utf8_sanitize(data, len);

        return clean && strlen(clean) == len && memcmp(clean, data, len) == 0;
}

int mcp_method_resources_read(struct mcp_conn *c, const struct mcp_request *req,
                              json_t **ret_result, struct mcp_rpc_error *e)
{
        json_t *params = req->params;
        const char *uri = json_string_value(json_object_get(params, "uri"));
        _cleanup_free_ char *path = NULL, *data = NULL, *b64 = NULL;
        struct airlock_error err = { { 0 } };
        const char *mime;
        size_t len;
        int r;

        if (!uri)
                return mcp_rpc_error_set(e, JSONRPC_INVALID_PARAMS,
                                         "resources/read: params.uri must be a string");
        path = resource_path(uri);
        if (!path)
                return mcp_rpc_error_set(e, MCP_RESOURCE_NOT_FOUND,
                                         "resource not found: '%.200s' is not an "
                                         "airlock://files/<path> URI of a file in /work",
                                         uri);
        r = toolbox_file_read(c->tb, path, TOOLS_READ_MAX, &data, &len, &err);
        if (r == -ENOMEM)
                return r;
        if (r == -ESRCH || r == -ENOENT || r == -EISDIR || r == -ENOTDIR)
                return mcp_rpc_error_set(e, MCP_RESOURCE_NOT_FOUND, "resource not found: %.200s%s",
                                         uri, r == -EISDIR ? " (a directory)" : "");
        if (r < 0)
                return mcp_rpc_error_set(e, JSONRPC_INVALID_PARAMS, "cannot read %.200s: %s", uri,
                                         err.msg[0] ? err.msg : strerror(-r));

        mime = mcp_mime_type(path);
        if (is_utf8_text(data, len)) {
                *ret_result = json_pack("{s:[{s:s, s:s, s:s%}]}", "contents", "uri", uri,
                                        "mimeType", mime ? mime : "text/plain", "text", data, len);
        } else {
                b64 = base64_encode(data, len);
                if (!b64)
                        return -ENOMEM;
                *ret_result = json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType",
                                        mime ? mime : "application/octet-stream", "blob", b64);
        }
        return *ret_result ? 0 : -ENOMEM;
}
