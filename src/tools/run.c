/* What run_python and run_shell share: running a cell in the toolbox's session (starting one,
 * or a new one when the old ended) and turning the execution object into a result a model can
 * read: labelled stdout, stderr, result and error, the images apart, the files it touched. */
#include "tools-internal.h"

#include "base/cleanup.h"
#include "base/json-util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A section "label:\n<text>" with the text ending in a newline. */
static int append_section(struct tool_result *res, const char *label, const char *text)
{
        size_t len = strlen(text);

        if (len == 0)
                return 0;
        return tool_result_appendf(res, "%s:\n%s%s", label, text,
                                   text[len - 1] == '\n' ? "" : "\n");
}

/* The same for the n bytes at text. */
static int append_section_n(struct tool_result *res, const char *label, const char *text, size_t n)
{
        if (n == 0)
                return 0;
        return tool_result_appendf(res, "%s:\n%.*s%s", label, (int) n, text,
                                   text[n - 1] == '\n' ? "" : "\n");
}

/* One line per value: multi-line values (a DataFrame's repr) start on their own line. */
static int append_value(struct tool_result *res, const char *label, const char *text)
{
        if (strchr(text, '\n'))
                return append_section(res, label, text);
        return tool_result_appendf(res, "%s: %s\n", label, text);
}

static void format_size(uint64_t n, char *buf, size_t size)
{
        if (n < 1024)
                (void) snprintf(buf, size, "%" PRIu64 " bytes", n);
        else if (n < 1024 * 1024)
                (void) snprintf(buf, size, "%.1f KiB", (double) n / 1024);
        else
                (void) snprintf(buf, size, "%.1f MiB", (double) n / (1024 * 1024));
}

/* One rich output: an image goes to the images (a line says so), any other its text. */
static int add_output(json_t *out, struct tool_result *res)
{
        static const char *const image_types[] = { "image/png", "image/jpeg" };
        json_t *data = json_object_get(out, "data");
        const char *plain = json_string_value(json_object_get(data, "text/plain"));
        int r;

        for (size_t k = 0; k < ELEMENTSOF(image_types); k++) {
                const char *b64 = json_string_value(json_object_get(data, image_types[k]));
                if (!b64)
                        continue;
                r = json_array_append_new(res->images, json_pack("{s:s, s:s}", "mime_type",
                                                                 image_types[k], "data", b64));
                if (r < 0)
                        return -ENOMEM;
                return tool_result_appendf(res, "image: %s output #%zu attached%s%s\n",
                                           image_types[k], json_array_size(res->images),
                                           plain ? ", " : "", plain ? plain : "");
        }
        /* The main output is the cell's value, already shown as "result". */
        plain = json_output_text(data);
        if (!plain || json_is_true(json_object_get(out, "main")))
                return 0;
        return append_value(res, "output", plain);
}

/* stdout with the displays the cell made in their places among it (their "stdout_offset"). */
static int add_stdout_and_displays(json_t *exec, struct tool_result *res)
{
        const char *out = json_string_value(json_object_get(exec, "stdout")) ?: "";
        size_t len = strlen(out), from = 0, at, i;
        json_t *o;
        int r = 0;

        json_array_foreach (json_object_get(exec, "outputs"), i, o) {
                at = json_output_stdout_at(o, out, len, from);
                if (at > len)
                        continue;
                r = append_section_n(res, "stdout", out + from, at - from);
                if (r >= 0)
                        r = add_output(o, res);
                if (r < 0)
                        return r;
                from = at;
        }
        return append_section_n(res, "stdout", out + from, len - from);
}

/* The outputs that have no place in stdout: the cell's value, figures left open at its end. */
static int add_other_outputs(json_t *exec, struct tool_result *res)
{
        const char *out = json_string_value(json_object_get(exec, "stdout")) ?: "";
        size_t len = strlen(out), i;
        json_t *o;
        int r;

        json_array_foreach (json_object_get(exec, "outputs"), i, o) {
                if (json_output_stdout_at(o, out, len, 0) <= len)
                        continue;
                r = add_output(o, res);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_files(json_t *exec, struct tool_result *res)
{
        json_t *files = json_object_get(exec, "files"), *f;
        size_t i;
        int r;

        if (json_array_size(files) == 0)
                return 0;
        r = tool_result_appendf(res, "files changed in /work:\n");
        if (r < 0)
                return r;
        json_array_foreach (files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path"));
                const char *change = json_string_value(json_object_get(f, "change"));
                json_int_t size = json_integer_value(json_object_get(f, "size"));
                char sz[32];

                if (!path || !change)
                        continue;
                if (strcmp(change, "deleted") == 0) {
                        r = tool_result_appendf(res, "  %s (deleted)\n", path);
                } else {
                        format_size(size < 0 ? 0 : (uint64_t) size, sz, sizeof(sz));
                        r = tool_result_appendf(res, "  %s (%s, %s)\n", path, change, sz);
                        if (r >= 0)
                                r = json_array_append(res->files, f);
                }
                if (r < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Why a status other than ok/error happened, in words the model can act on. */
static const char *status_explanation(const char *status)
{
        if (strcmp(status, "timeout") == 0)
                return "the code ran longer than its time limit and was stopped; pass a larger "
                       "timeout_s or make it faster";
        if (strcmp(status, "oom") == 0)
                return "the code ran out of memory and was killed";
        if (strcmp(status, "killed") == 0)
                return "the code was killed by a signal";
        if (strcmp(status, "output_limit") == 0)
                return "the code printed more than the output limit and was stopped; print less";
        return NULL;
}

static int format_execution(struct toolbox *tb, const char *id, json_t *exec,
                            struct tool_result *res)
{
        const char *status = json_string_value(json_object_get(exec, "status"));
        const char *err = json_string_value(json_object_get(exec, "stderr"));
        const char *result = json_string_value(json_object_get(exec, "result"));
        const char *state = json_string_value(json_object_get(exec, "state"));
        json_t *error = json_object_get(exec, "error");
        json_int_t exit_code = json_integer_value(json_object_get(exec, "exit_code"));
        size_t before = strlen(res->text);
        const char *why;
        int r;

        if (!status)
                status = "error";
        r = add_stdout_and_displays(exec, res);
        if (r >= 0)
                r = append_section(res, "stderr", err ? err : "");
        if (r >= 0)
                r = add_other_outputs(exec, res);
        if (r >= 0 && result)
                r = append_value(res, "result", result);
        if (r >= 0 && json_is_object(error)) {
                const char *name = json_string_value(json_object_get(error, "name"));
                const char *value = json_string_value(json_object_get(error, "value"));
                const char *tb_text = json_string_value(json_object_get(error, "traceback"));
                r = tool_result_appendf(res, "error: %s%s%s\n", name ? name : "",
                                        name && value && *value ? ": " : "", value ? value : "");
                if (r >= 0 && tb_text && *tb_text)
                        r = append_section(res, "traceback", tb_text);
        }
        /* A Python exception says it all; a shell command's status is the only word. */
        if (r >= 0 && exit_code != 0 && !json_is_object(error))
                r = tool_result_appendf(res, "exit code: %lld\n", (long long) exit_code);
        why = status_explanation(status);
        if (r >= 0 && why)
                r = tool_result_appendf(res, "status: %s (%s)\n", status, why);
        if (r >= 0)
                r = add_files(exec, res);
        if (r >= 0 && state && strcmp(state, "lost") == 0) {
                toolbox_session_forget(tb, id, status);
                r = tool_result_appendf(res,
                                        "note: the session was lost (%s); the next call starts a "
                                        "new session without these variables and files.\n",
                                        status);
        }
        if (r >= 0 && strlen(res->text) == before)
                r = tool_result_appendf(res, "(no output)\n");
        if (r < 0)
                return -ENOMEM;
        res->is_error = strcmp(status, "ok") != 0;
        return 0;
}

int tools_run_code(struct toolbox *tb, const char *language, const char *code, uint64_t timeout_ms,
                   struct tool_result *res)
{
        const struct tools_backend *b = toolbox_backend(tb);

        /* Twice at most: a session found gone before the cell started (reaped while idle)
         * is replaced once, which is safe because nothing ran. */
        for (int attempt = 0; attempt < 2; attempt++) {
                _cleanup_free_ char *id = NULL;
                struct airlock_error err = { { 0 } };
                json_t *exec = NULL;
                int r;

                r = toolbox_session_get(tb, true, &id, res);
                if (r < 0)
                        return r == -ENOMEM ? r : 0;
                r = b->ops->execute(b->userdata, id, language, code, timeout_ms, &exec, &err);
                if (r == -ESRCH && attempt == 0) {
                        toolbox_session_forget(tb, id, err.msg[0] ? err.msg : "it ended");
                        continue;
                }
                if (r == -EBUSY)
                        return tool_result_error(res, "the session is busy running another call; "
                                                      "wait for it to finish and try again");
                if (r < 0)
                        return tool_result_error(res, "cannot run the code: %s",
                                                 err.msg[0] ? err.msg : strerror(-r));
                res->execution = exec;
                return format_execution(tb, id, exec, res);
        }
        return tool_result_error(res, "cannot run the code: the session keeps ending");
}
