/* The ring of recent executions (recent.h). Entries are fixed-size structs allocated once, so
 * recording one is a few bounded copies under the mutex; the JSON is built only when someone
 * asks for the list. Strings are cut between UTF-8 characters and sanitised again when listed,
 * so whatever a cell printed can always be sent back as JSON. */
#include "recent.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "session/session.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct recent_entry {
        uint64_t seq;
        int64_t finished_ms; /* CLOCK_REALTIME */
        double wall_ms, cpu_ms;
        int64_t peak_memory, execution_count;
        uint32_t code_bytes, stdout_bytes, stderr_bytes;
        bool one_shot;
        char session_id[SESSION_ID_MAX + 1];
        char tenant[64]; /* TENANT_NAME_MAX + 1 */
        char profile[64];
        char language[16];
        char status[16];
        char code[RECENT_CODE_MAX + 1];
        char out[RECENT_OUTPUT_MAX + 1];
        char err[RECENT_OUTPUT_MAX + 1];
        char error[RECENT_OUTPUT_MAX + 1];
        char files[RECENT_FILES_MAX + 1];
};

struct recent {
        pthread_mutex_t lock;
        unsigned capacity;
        uint64_t count; /* entries ever added; the newest is at (count - 1) % capacity */
        struct recent_entry entries[];
};

int recent_new(unsigned capacity, struct recent **ret_recent)
{
        struct recent *r;

        if (capacity < 1 || capacity > RECENT_CAPACITY_MAX)
                return -EINVAL;
        r = calloc(1, sizeof(*r) + (size_t) capacity * sizeof(r->entries[0]));
        if (!r)
                return -ENOMEM;
        pthread_mutex_init(&r->lock, NULL);
        r->capacity = capacity;
        *ret_recent = r;
        return 0;
}

struct recent *recent_free(struct recent *r)
{
        if (!r)
                return NULL;
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
}

/* Copies at most size - 1 bytes of src into dst, cut so that no character is split. Returns
 * the full length of src. */
static size_t copy_cut(char *dst, size_t size, const char *src)
{
        size_t len = src ? strlen(src) : 0, n = len;

        if (n > size - 1)
                n = utf8_complete_prefix(src, size - 1);
        if (n)
                memcpy(dst, src, n);
        dst[n] = '\0';
        return len;
}

/* The names of the files the cell changed, ", "-joined, cut to fit. */
static void copy_files(char *dst, size_t size, const json_t *files)
{
        size_t used = 0, i;
        json_t *f;

        dst[0] = '\0';
        json_array_foreach ((json_t *) files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path"));
                if (!path)
                        continue;
                if (used && used + 2 < size - 1) {
                        memcpy(dst + used, ", ", 2);
                        used += 2;
                }
                if (used >= size - 1)
                        break;
                (void) copy_cut(dst + used, size - used, path);
                used += strlen(dst + used);
        }
        dst[used] = '\0';
}

void recent_add(struct recent *r, const struct recent_exec *e)
{
        const json_t *res = e->result, *usage = json_object_get(res, "usage");
        const json_t *error = json_object_get(res, "error");
        struct recent_entry *x;
        struct timespec ts;
        char errbuf[RECENT_OUTPUT_MAX + 1] = "";

        if (!r)
                return;
        if (json_is_object(error)) {
                const char *name = json_string_value(json_object_get(error, "name"));
                const char *value = json_string_value(json_object_get(error, "value"));
                (void) snprintf(errbuf, sizeof(errbuf), "%s%s%s", name ? name : "",
                                name && value ? ": " : "", value ? value : "");
        }
        (void) clock_gettime(CLOCK_REALTIME, &ts);

        pthread_mutex_lock(&r->lock);
        x = &r->entries[r->count % r->capacity];
        x->seq = ++r->count;
        x->finished_ms = (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        x->wall_ms = json_number_value(json_object_get(usage, "wall_ms"));
        x->cpu_ms = json_number_value(json_object_get(usage, "cpu_ms"));
        x->peak_memory = json_integer_value(json_object_get(usage, "peak_memory_bytes"));
        x->execution_count = json_integer_value(json_object_get(res, "execution_count"));
        x->one_shot = e->one_shot;
        (void) copy_cut(x->session_id, sizeof(x->session_id), e->session_id);
        (void) copy_cut(x->tenant, sizeof(x->tenant), e->tenant);
        (void) copy_cut(x->profile, sizeof(x->profile), e->profile);
        (void) copy_cut(x->language, sizeof(x->language), e->language ? e->language : "python");
        (void) copy_cut(x->status, sizeof(x->status),
                        json_string_value(json_object_get(res, "status")));
        x->code_bytes = (uint32_t) copy_cut(x->code, sizeof(x->code), e->code);
        x->stdout_bytes = (uint32_t) copy_cut(x->out, sizeof(x->out),
                                              json_string_value(json_object_get(res, "stdout")));
        x->stderr_bytes = (uint32_t) copy_cut(x->err, sizeof(x->err),
                                              json_string_value(json_object_get(res, "stderr")));
        (void) copy_cut(x->error, sizeof(x->error), errbuf);
        copy_files(x->files, sizeof(x->files), json_object_get(res, "files"));
        pthread_mutex_unlock(&r->lock);
}

/* A JSON string of text, whatever bytes it holds (U+FFFD for invalid ones). */
static json_t *text_json(const char *text)
{
        _cleanup_free_ char *clean = utf8_sanitize(text, strlen(text));

        return clean ? json_string(clean) : NULL;
}

static json_t *entry_json(const struct recent_entry *x)
{
        char when[64];
        struct tm tm;
        time_t secs = (time_t) (x->finished_ms / 1000);

        (void) gmtime_r(&secs, &tm);
        (void) snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                        tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                        tm.tm_sec, (int) (x->finished_ms % 1000));
        return json_pack("{s:I, s:s, s:o, s:o, s:s, s:b, s:o, s:f, s:f, s:I, s:I, s:o, s:I, s:b, "
                         "s:o, s:b, s:o, s:b, s:o, s:o}",
                         "seq", (json_int_t) x->seq, "finished_at", when, "session_id",
                         text_json(x->session_id), "profile", text_json(x->profile), "language",
                         x->language, "one_shot", x->one_shot, "status", text_json(x->status),
                         "wall_ms", x->wall_ms, "cpu_ms", x->cpu_ms, "peak_memory_bytes",
                         (json_int_t) x->peak_memory, "execution_count",
                         (json_int_t) x->execution_count, "code", text_json(x->code), "code_bytes",
                         (json_int_t) x->code_bytes, "code_truncated",
                         x->code_bytes > strlen(x->code), "stdout", text_json(x->out),
                         "stdout_truncated", x->stdout_bytes > strlen(x->out), "stderr",
                         text_json(x->err), "stderr_truncated", x->stderr_bytes > strlen(x->err),
                         "error", text_json(x->error), "files", text_json(x->files));
}

json_t *recent_list(struct recent *r, unsigned limit, const char *session_id)
{
        json_t *arr = json_array();
        uint64_t n;

        if (!arr || !r)
                return arr;
        pthread_mutex_lock(&r->lock);
        n = r->count < r->capacity ? r->count : r->capacity;
        for (uint64_t i = 0; i < n && json_array_size(arr) < limit; i++) {
                const struct recent_entry *x = &r->entries[(r->count - 1 - i) % r->capacity];
                json_t *o;

                if ((session_id && strcmp(x->session_id, session_id) != 0) ||
                    !tenant_scope_sees(x->tenant))
                        continue;
                o = entry_json(x);
                if (!o || json_array_append_new(arr, o) < 0) {
                        pthread_mutex_unlock(&r->lock);
                        json_decref(arr);
                        return NULL;
                }
        }
        pthread_mutex_unlock(&r->lock);
        return arr;
}

uint64_t recent_count(struct recent *r)
{
        uint64_t n;

        if (!r)
                return 0;
        pthread_mutex_lock(&r->lock);
        n = r->count;
        pthread_mutex_unlock(&r->lock);
        return n;
}
