/* Pieces of a Response object that need no state (responses-internal.h): a code call's logs,
 * the citations of the files it made, the usage in the Responses API's terms. */
#include "responses-internal.h"

#include "base/cleanup.h"
#include "base/json-util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define _cleanup_json_ _cleanup_(json_decrefp)

/* n bytes of text, ending in a newline. */
static void log_part(FILE *f, const char *s, size_t n)
{
        if (n == 0)
                return;
        fwrite(s, 1, n, f);
        if (s[n - 1] != '\n')
                fputc('\n', f);
}

static void log_display(FILE *f, const json_t *out)
{
        const json_t *data = json_object_get(out, "data");
        const char *text = json_output_text(data);

        /* Images go out as image outputs; the cell's value (main) comes last as "result". */
        if (!text || json_is_true(json_object_get(out, "main")) ||
            json_object_get(data, "image/png") || json_object_get(data, "image/jpeg"))
                return;
        log_part(f, text, strlen(text));
}

/* stdout with the text of the displays (HTML, Markdown, a DataFrame's table...) in their
 * places among it, then the displays that have none (figures left open at the end). */
static void log_stdout_and_displays(FILE *f, const json_t *exec)
{
        const char *out = json_string_value(json_object_get(exec, "stdout")) ?: "";
        const json_t *outputs = json_object_get(exec, "outputs"), *o;
        size_t len = strlen(out), from = 0, at, i;

        json_array_foreach (outputs, i, o) {
                at = json_output_stdout_at(o, out, len, from);
                if (at > len)
                        continue;
                log_part(f, out + from, at - from);
                log_display(f, o);
                from = at;
        }
        log_part(f, out + from, len - from);
        json_array_foreach (outputs, i, o)
                if (json_output_stdout_at(o, out, len, 0) > len)
                        log_display(f, o);
}

char *responses_exec_logs(json_t *exec)
{
        static const char *const parts[] = { "stderr", "result" };
        json_t *error = json_object_get(exec, "error");
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);

        if (!f)
                return NULL;
        log_stdout_and_displays(f, exec);
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                const char *s = json_string_value(json_object_get(exec, parts[i]));

                log_part(f, s ? s : "", s ? strlen(s) : 0);
        }
        if (json_is_object(error)) {
                const char *tb = json_string_value(json_object_get(error, "traceback"));
                const char *name = json_string_value(json_object_get(error, "name"));
                const char *value = json_string_value(json_object_get(error, "value"));

                if (tb && *tb)
                        fprintf(f, "%s%s", tb, tb[strlen(tb) - 1] == '\n' ? "" : "\n");
                else
                        fprintf(f, "%s: %s\n", name ? name : "Error", value ? value : "");
        }
        if (fclose(f) != 0)
                return NULL;
        return out;
}

/* Characters (code points) in the first n bytes of UTF-8 text. */
static size_t chars(const char *text, size_t n)
{
        size_t c = 0;

        for (size_t i = 0; i < n; i++)
                if (((unsigned char) text[i] & 0xc0) != 0x80)
                        c++;
        return c;
}

/* Where text mentions the file: "sandbox:/mnt/data/x", "/mnt/data/x", else its name. */
static const char *find_mention(const char *text, const char *path, const char *name,
                                size_t *ret_len)
{
        char sandbox[4200];
        const char *needles[3] = { sandbox, path, name };

        (void) snprintf(sandbox, sizeof(sandbox), "sandbox:%s", path ? path : "");
        for (size_t i = 0; i < ELEMENTSOF(needles); i++) {
                const char *hit;

                if (!needles[i] || !*needles[i] || (i == 0 && !path))
                        continue;
                hit = strstr(text, needles[i]);
                if (hit) {
                        *ret_len = strlen(needles[i]);
                        return hit;
                }
        }
        return NULL;
}

json_t *responses_citations(const char *text, json_t *files)
{
        _cleanup_json_ json_t *out = json_array();
        size_t end = chars(text, strlen(text));
        json_t *f;
        size_t i;

        if (!out)
                return NULL;
        json_array_foreach (files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path"));
                const char *name = json_string_value(json_object_get(f, "filename"));
                size_t len = 0, start = end, stop = end;
                const char *hit = find_mention(text, path, name, &len);
                json_t *a;

                if (hit) {
                        start = chars(text, (size_t) (hit - text));
                        stop = start + chars(hit, len);
                }
                a = json_pack("{s:s, s:O, s:O, s:O, s:I, s:I}", "type", "container_file_citation",
                              "container_id", json_object_get(f, "container_id") ?: json_null(),
                              "file_id", json_object_get(f, "file_id") ?: json_null(), "filename",
                              json_object_get(f, "filename") ?: json_null(), "start_index",
                              (json_int_t) start, "end_index", (json_int_t) stop);
                if (!a || json_array_append_new(out, a) < 0)
                        return NULL;
        }
        return TAKE_PTR(out);
}

static json_int_t count(json_t *usage, const char *key)
{
        json_t *v = json_object_get(usage, key);

        return json_is_integer(v) ? json_integer_value(v) : 0;
}

json_t *responses_usage(json_t *u)
{
        json_int_t in = count(u, "prompt_tokens"), out = count(u, "completion_tokens");
        json_int_t total = count(u, "total_tokens");

        return json_pack("{s:I, s:{s:I, s:I}, s:I, s:{s:I}, s:I}", "input_tokens", in,
                         "input_tokens_details", "cached_tokens",
                         count(json_object_get(u, "prompt_tokens_details"), "cached_tokens"),
                         "cache_write_tokens", (json_int_t) 0, "output_tokens", out,
                         "output_tokens_details", "reasoning_tokens",
                         count(json_object_get(u, "completion_tokens_details"), "reasoning_tokens"),
                         "total_tokens", total ? total : in + out);
}
