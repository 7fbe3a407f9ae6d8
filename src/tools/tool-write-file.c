/* write_file: puts text or base64-decoded bytes into a file of /work, creating or replacing it,
 * so a model can hand data to its code without pasting it into a cell. */
#include "tools-internal.h"

#include "base/cleanup.h"
#include "base64.h"
#include "session/sandbox.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

/* Whether path exists already, to report "created" or "changed" as executions do. */
static bool file_exists(const struct tools_backend *b, const char *id, const char *path)
{
        _cleanup_free_ char *copy = strdup(path);
        _cleanup_(json_decrefp) json_t *listing = NULL;
        struct airlock_error err = { { 0 } };
        const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
        json_t *e;
        size_t i;

        if (!copy)
                return false;
        if (slash)
                copy[slash - path] = '\0';
        else
                copy[0] = '\0';
        if (b->ops->file_list(b->userdata, id, copy, &listing, &err) < 0)
                return false;
        json_array_foreach (json_object_get(listing, "entries"), i, e) {
                const char *n = json_string_value(json_object_get(e, "name"));
                if (n && strcmp(n, name) == 0)
                        return true;
        }
        return false;
}

static int write_file(struct toolbox *tb, json_t *args, struct tool_result *res)
{
        const struct tools_backend *b = toolbox_backend(tb);
        json_t *content = json_object_get(args, "content");
        const char *encoding = json_string_value(json_object_get(args, "encoding"));
        const char *path = tools_work_path(json_string_value(json_object_get(args, "path")));
        _cleanup_free_ char *decoded = NULL;
        const char *data;
        size_t len;
        int r;

        if (!path || !workspace_path_is_valid(path, false))
                return tool_result_error(res,
                                         "argument 'path' must be a file path relative to /work "
                                         "(like \"data.csv\" or \"out/plot.png\"), without '..' "
                                         "or empty components");
        if (encoding && strcmp(encoding, "base64") == 0) {
                r = base64_decode(json_string_value(content), json_string_length(content), &decoded,
                                  &len);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return tool_result_error(res, "argument 'content' is not valid base64 "
                                                      "(encoding is \"base64\")");
                data = decoded;
        } else {
                data = json_string_value(content);
                len = json_string_length(content);
        }

        for (int attempt = 0; attempt < 2; attempt++) {
                _cleanup_free_ char *id = NULL;
                struct airlock_error err = { { 0 } };
                bool existed;

                r = toolbox_session_get(tb, true, &id, res);
                if (r < 0)
                        return r == -ENOMEM ? r : 0;
                existed = file_exists(b, id, path);
                r = b->ops->file_write(b->userdata, id, path, data, len, &err);
                if (r == -ESRCH && attempt == 0) {
                        toolbox_session_forget(tb, id, err.msg[0] ? err.msg : "it ended");
                        continue;
                }
                if (r < 0)
                        return tool_result_error(
                                res, "cannot write '%s': %s%s", path,
                                err.msg[0] ? err.msg : strerror(-r),
                                r == -ENOENT ? " (its directory does not exist: create it "
                                               "first, e.g. with run_shell mkdir -p)"
                                             : "");
                res->execution = json_pack("{s:s, s:I}", "path", path, "size", (json_int_t) len);
                r = json_array_append_new(res->files, json_pack("{s:s, s:I, s:s}", "path", path,
                                                                "size", (json_int_t) len, "change",
                                                                existed ? "changed" : "created"));
                if (!res->execution || r < 0)
                        return -ENOMEM;
                return tool_result_appendf(res, "Wrote %zu bytes to /work/%s (%s).\n", len, path,
                                           existed ? "replaced" : "created");
        }
        return tool_result_error(res, "cannot write '%s': the session keeps ending", path);
}

const struct tool tool_write_file = {
        .name = "write_file",
        .title = "Write file",
        .description = "Create or replace a file in the sandbox's /work directory, where "
                       "run_python and run_shell run. Use encoding \"base64\" for binary "
                       "content. The directory must exist.",
        .input_schema = "{\"type\": \"object\","
                        " \"properties\": {"
                        "  \"path\": {\"type\": \"string\", \"minLength\": 1,"
                        "   \"description\": \"Path relative to /work, e.g. \\\"data.csv\\\" or "
                        "\\\"in/data.json\\\".\"},"
                        "  \"content\": {\"type\": \"string\","
                        "   \"description\": \"The file content: text, or base64 when encoding "
                        "is \\\"base64\\\".\"},"
                        "  \"encoding\": {\"type\": \"string\", \"enum\": [\"utf-8\", "
                        "\"base64\"], \"default\": \"utf-8\","
                        "   \"description\": \"How content is encoded.\"}},"
                        " \"required\": [\"path\", \"content\"], \"additionalProperties\": false}",
        /* It overwrites an existing file; writing the same content twice changes nothing
         * more. */
        .annotations = { .read_only = false,
                         .destructive = true,
                         .idempotent = true,
                         .open_world = false },
        .needs_session = true,
        .handler = write_file,
};
