/* list_files: the entries of a directory of /work. Never starts a session: before the first
 * call that made one, /work is empty. */
#include "tools-internal.h"

#include "base/cleanup.h"
#include "session/sandbox.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int list_files(struct toolbox *tb, json_t *args, struct tool_result *res)
{
        const struct tools_backend *b = toolbox_backend(tb);
        const char *dir = json_string_value(json_object_get(args, "dir"));
        _cleanup_free_ char *id = NULL;
        struct airlock_error err = { { 0 } };
        json_t *listing = NULL, *entries, *e;
        size_t i;
        int r;

        dir = tools_work_path(dir ? dir : "");
        if (!dir || !workspace_path_is_valid(dir, true))
                return tool_result_error(res,
                                         "argument 'dir' must be a directory relative to /work "
                                         "(\"\" or omitted for /work itself), without '..' or "
                                         "empty components");
        r = toolbox_session_get(tb, false, &id, res);
        if (r == -ESRCH) {
                if (*dir)
                        return tool_result_error(res, "'%s' does not exist: /work is empty", dir);
                res->execution = json_pack("{s:s, s:[]}", "dir", "", "entries");
                if (!res->execution)
                        return -ENOMEM;
                return tool_result_appendf(res, "/work is empty (no code has run yet).\n");
        }
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        r = b->ops->file_list(b->userdata, id, dir, &listing, &err);
        if (r == -ESRCH) {
                toolbox_session_forget(tb, id, err.msg[0] ? err.msg : "it ended");
                return tool_result_error(res, "the session ended, and its files with it: %s",
                                         err.msg[0] ? err.msg : "no such session");
        }
        if (r < 0)
                return tool_result_error(res, "cannot list '%s': %s", *dir ? dir : "/work",
                                         r == -ENOENT    ? "no such directory"
                                         : r == -ENOTDIR ? "not a directory"
                                                         : (err.msg[0] ? err.msg : strerror(-r)));
        res->execution = listing;
        entries = json_object_get(listing, "entries");
        r = tool_result_appendf(res, "/work%s%s: %zu entr%s\n", *dir ? "/" : "", dir,
                                json_array_size(entries),
                                json_array_size(entries) == 1 ? "y" : "ies");
        json_array_foreach (entries, i, e) {
                const char *name = json_string_value(json_object_get(e, "name"));
                const char *type = json_string_value(json_object_get(e, "type"));
                json_int_t size = json_integer_value(json_object_get(e, "size"));

                if (r < 0)
                        break;
                if (!name)
                        continue;
                if (type && strcmp(type, "directory") == 0)
                        r = tool_result_appendf(res, "  %s/\n", name);
                else if (type && strcmp(type, "file") == 0)
                        r = tool_result_appendf(res, "  %s  %lld bytes\n", name, (long long) size);
                else
                        r = tool_result_appendf(res, "  %s  (%s)\n", name, type ? type : "other");
        }
        if (r >= 0 && json_is_true(json_object_get(listing, "truncated")))
                r = tool_result_appendf(res, "(the listing stops at %zu entries; there are more)\n",
                                        json_array_size(entries));
        return r;
}

const struct tool tool_list_files = {
        .name = "list_files",
        .title = "List files",
        .description = "List the files and directories in the sandbox's /work directory (or a "
                       "subdirectory of it), with their sizes.",
        .input_schema = "{\"type\": \"object\","
                        " \"properties\": {"
                        "  \"dir\": {\"type\": \"string\","
                        "   \"description\": \"Directory relative to /work; empty or omitted "
                        "for /work itself.\"}},"
                        " \"additionalProperties\": false}",
        .annotations = { .read_only = true,
                         .destructive = false,
                         .idempotent = true,
                         .open_world = false },
        .needs_session = false,
        .handler = list_files,
};
