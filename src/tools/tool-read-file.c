/* read_file: returns a file of /work: text as text, images as images, other binary content as
 * base64. Never starts a session: before the first call that made one, /work is empty. */
#include "tools-internal.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base64.h"
#include "session/sandbox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Binary content larger than this is not shown as base64 in the text (the execution object
 * still has it): pages of base64 help no model. */
#define BASE64_TEXT_MAX (64u * 1024u)

static bool is_utf8_text(const char *data, size_t len)
{
        _cleanup_free_ char *clean = utf8_sanitize(data, len);

        /* Sanitizing replaces invalid sequences and NUL bytes, so an unchanged copy means
         * valid text. */
        return clean && strlen(clean) == len && memcmp(clean, data, len) == 0;
}

static const char *image_type(const char *data, size_t len)
{
        if (len >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0)
                return "image/png";
        if (len >= 3 && memcmp(data, "\xff\xd8\xff", 3) == 0)
                return "image/jpeg";
        return NULL;
}

static int read_file(struct toolbox *tb, json_t *args, struct tool_result *res)
{
        const struct tools_backend *b = toolbox_backend(tb);
        const char *path = tools_work_path(json_string_value(json_object_get(args, "path")));
        _cleanup_free_ char *id = NULL, *data = NULL, *b64 = NULL;
        struct airlock_error err = { { 0 } };
        const char *image;
        size_t len;
        int r;

        if (!path || !workspace_path_is_valid(path, false))
                return tool_result_error(res,
                                         "argument 'path' must be a file path relative to /work "
                                         "(like \"out.csv\"), without '..' or empty components");
        r = toolbox_session_get(tb, false, &id, res);
        if (r == -ESRCH)
                return tool_result_error(res,
                                         "'%s' does not exist: no code has run yet, so /work is "
                                         "empty",
                                         path);
        if (r < 0)
                return r == -ENOMEM ? r : 0;
        r = b->ops->file_read(b->userdata, id, path, TOOLS_READ_MAX, &data, &len, &err);
        if (r == -ESRCH) {
                toolbox_session_forget(tb, id, err.msg[0] ? err.msg : "it ended");
                return tool_result_error(res, "the session ended, and its files with it: %s",
                                         err.msg[0] ? err.msg : "no such session");
        }
        if (r == -EFBIG)
                return tool_result_error(res,
                                         "'%s' is larger than %u MiB; read a part of it with "
                                         "run_python instead",
                                         path, TOOLS_READ_MAX >> 20);
        if (r < 0)
                return tool_result_error(res, "cannot read '%s': %s", path,
                                         r == -ENOENT   ? "no such file"
                                         : r == -EISDIR ? "it is a directory (use list_files)"
                                                        : (err.msg[0] ? err.msg : strerror(-r)));

        if (is_utf8_text(data, len)) {
                res->execution =
                        json_pack("{s:s, s:I, s:s, s:s%}", "path", path, "size", (json_int_t) len,
                                  "encoding", "utf-8", "content", data, len);
                if (!res->execution)
                        return -ENOMEM;
                return tool_result_appendf(res, "%s", len ? data : "(the file is empty)\n");
        }

        b64 = base64_encode(data, len);
        if (!b64)
                return -ENOMEM;
        res->execution = json_pack("{s:s, s:I, s:s, s:s}", "path", path, "size", (json_int_t) len,
                                   "encoding", "base64", "content", b64);
        if (!res->execution)
                return -ENOMEM;
        image = image_type(data, len);
        if (image) {
                r = json_array_append_new(res->images,
                                          json_pack("{s:s, s:s}", "mime_type", image, "data", b64));
                if (r < 0)
                        return -ENOMEM;
                return tool_result_appendf(res, "'%s' is an %s image of %zu bytes, attached.\n",
                                           path, image, len);
        }
        if (strlen(b64) > BASE64_TEXT_MAX)
                return tool_result_appendf(res,
                                           "'%s' is a binary file of %zu bytes, too large to "
                                           "show; inspect it with run_python.\n",
                                           path, len);
        return tool_result_appendf(res, "'%s' is a binary file of %zu bytes; base64:\n%s\n", path,
                                   len, b64);
}

const struct tool tool_read_file = {
        .name = "read_file",
        .title = "Read file",
        .description = "Read a file from the sandbox's /work directory, e.g. one that code "
                       "wrote. Text files are returned as text, PNG and JPEG images as images, "
                       "other binary files as base64. At most 8 MiB.",
        .input_schema = "{\"type\": \"object\","
                        " \"properties\": {"
                        "  \"path\": {\"type\": \"string\", \"minLength\": 1,"
                        "   \"description\": \"Path relative to /work, e.g. \\\"out.csv\\\".\"}},"
                        " \"required\": [\"path\"], \"additionalProperties\": false}",
        .annotations = { .read_only = true,
                         .destructive = false,
                         .idempotent = true,
                         .open_world = false },
        .needs_session = false,
        .handler = read_file,
};
