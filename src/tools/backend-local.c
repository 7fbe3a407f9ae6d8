/* The tools backend on an in-process session manager: `airlock mcp` without --url, and the
 * daemon's /mcp and chat gateway. Sessions are looked up by id on every call (a hash lookup),
 * so a session that ended meanwhile shows up as -ESRCH rather than as a stale reference. */
#include "tools.h"

#include "base/cleanup.h"
#include "session/session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct local {
        struct session_manager *mgr; /* borrowed */
};

static int lookup(struct local *l, const char *id, struct session **ret_s,
                  struct airlock_error *err)
{
        _cleanup_(json_decrefp) json_t *ended = NULL;
        int r = session_lookup(l->mgr, id, ret_s, err);

        if (r != -ENOENT)
                return r;
        ended = session_manager_describe_ended(l->mgr, id);
        return airlock_error_set(err, -ESRCH, "%s",
                                 json_string_value(json_object_get(ended, "reason"))
                                         ?: "the session ended");
}

/* session.h says -ENOENT both for a missing file and for a session that ended while we held
 * it; the session table tells the two apart. */
static int file_errno(struct local *l, const char *id, int r, struct airlock_error *err)
{
        json_t *desc;

        if (r != -ENOENT)
                return r;
        desc = session_describe_id(l->mgr, id);
        if (!desc)
                return airlock_error_set(err, -ESRCH, "the session ended");
        json_decref(desc);
        return r;
}

static int local_session_create(void *userdata, const char *profile, char **ret_id,
                                struct airlock_error *err)
{
        struct local *l = userdata;
        struct session *s = NULL;
        char *id;
        int r;

        r = session_create(l->mgr, &(struct session_create_options){ .profile = profile }, &s, err);
        if (r < 0)
                return r;
        id = strdup(session_id(s));
        if (!id)
                (void) session_destroy(l->mgr, session_id(s));
        session_unref(s);
        if (!id)
                return -ENOMEM;
        *ret_id = id;
        return 0;
}

static int local_session_destroy(void *userdata, const char *id)
{
        struct local *l = userdata;
        int r = session_destroy(l->mgr, id);

        return r == -ENOENT ? -ESRCH : r;
}

static int local_execute(void *userdata, const char *id, const char *language, const char *code,
                         uint64_t timeout_ms, json_t **ret_result, struct airlock_error *err)
{
        struct local *l = userdata;
        struct session *s = NULL;
        int r;

        r = lookup(l, id, &s, err);
        if (r < 0)
                return r;
        r = session_execute(s,
                            &(struct exec_request){
                                    .language = language, .code = code, .timeout_ms = timeout_ms },
                            ret_result, err);
        session_unref(s);
        return r == -ENOENT ? -ESRCH : r;
}

static int local_file_read(void *userdata, const char *id, const char *path, size_t max_bytes,
                           char **ret_data, size_t *ret_len, struct airlock_error *err)
{
        struct local *l = userdata;
        struct session *s = NULL;
        int r;

        r = lookup(l, id, &s, err);
        if (r < 0)
                return r;
        r = session_file_read(s, path, max_bytes, ret_data, ret_len, err);
        session_unref(s);
        if (r >= 0) {
                /* session.h does not terminate the data; our callers treat text as a string. */
                char *p = realloc(*ret_data, *ret_len + 1);
                if (!p) {
                        free(*ret_data);
                        return -ENOMEM;
                }
                p[*ret_len] = '\0';
                *ret_data = p;
        }
        return file_errno(l, id, r, err);
}

static int local_file_write(void *userdata, const char *id, const char *path, const void *data,
                            size_t len, struct airlock_error *err)
{
        struct local *l = userdata;
        struct session *s = NULL;
        int r;

        r = lookup(l, id, &s, err);
        if (r < 0)
                return r;
        r = session_file_write(s, path, data, len, err);
        session_unref(s);
        return file_errno(l, id, r, err);
}

static int local_file_list(void *userdata, const char *id, const char *dir, json_t **ret_listing,
                           struct airlock_error *err)
{
        struct local *l = userdata;
        struct session *s = NULL;
        int r;

        r = lookup(l, id, &s, err);
        if (r < 0)
                return r;
        r = session_file_list(s, dir, ret_listing, err);
        session_unref(s);
        return file_errno(l, id, r, err);
}

static void local_free(void *userdata)
{
        free(userdata);
}

static json_t *local_code_tools(void *userdata, const char *id, const char *profile)
{
        struct local *l = userdata;

        return session_code_tools(l->mgr, id, profile);
}

static const struct tools_backend_ops local_ops = {
        .code_tools = local_code_tools,
        .session_create = local_session_create,
        .session_destroy = local_session_destroy,
        .execute = local_execute,
        .file_read = local_file_read,
        .file_write = local_file_write,
        .file_list = local_file_list,
        .free = local_free,
};

int tools_backend_local_new(struct session_manager *mgr, struct tools_backend **ret_backend)
{
        struct tools_backend *b = calloc(1, sizeof(*b));
        struct local *l = calloc(1, sizeof(*l));

        if (!b || !l) {
                free(b);
                free(l);
                return -ENOMEM;
        }
        l->mgr = mgr;
        b->ops = &local_ops;
        b->userdata = l;
        *ret_backend = b;
        return 0;
}
