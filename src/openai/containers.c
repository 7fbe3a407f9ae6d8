/* Containers: a container is an airlock session under another name ("cntr_" + the hex of
 * "s-..."), so everything a session does (stop when idle, resume on the next call, its /work)
 * is what a container does. openai.db adds what OpenAI's API has and a session has not: the
 * name and the memory_limit asked for. "expired" is a stopped session: its next call resumes
 * it; one deleted (DELETE, or --delete-after after it stopped) is gone (404). */
#include "openai-internal.h"

#include "base/cleanup.h"
#include "base/util.h"
#include "session/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CONTAINER_NAME_MAX 256
#define CONTAINERS_LIST_MAX 100u
#define EXPIRES_MINUTES_MAX (24u * 60u) /* the session manager's longest stop_after */

void container_forget(struct openai *oa, const char *session_id)
{
        (void) db_exec(oa, "DELETE FROM containers WHERE session_id = ?1", "s", session_id);
        (void) db_exec(oa, "DELETE FROM container_files WHERE session_id = ?1", "s", session_id);
}

/* 404 for a container that is not there: with the reason when its session ended. */
static int container_gone(struct openai *oa, const char *container_id, struct openai_error *err)
{
        char sid[SESSION_ID_MAX + 1];
        json_t *ended = NULL;
        int r;

        if (openai_session_id(container_id, sid, sizeof(sid)) >= 0) {
                ended = session_manager_describe_ended(oa->mgr, sid);
                container_forget(oa, sid);
        }
        if (ended) {
                const char *state = json_string_value(json_object_get(ended, "state"));
                const char *reason = json_string_value(json_object_get(ended, "reason"));

                r = openai_error_set(err, -ENOENT, 404, NULL, "Container %s %s: %s.", container_id,
                                     state && strcmp(state, "lost") == 0 ? "was lost" : "has ended",
                                     reason ? reason : "no reason recorded");
                json_decref(ended);
                return openai_error_code(err, r, "not_found");
        }
        return openai_error_from_session(err, -ENOENT, container_id, NULL);
}

int container_lookup(struct openai *oa, const char *container_id, struct session **ret_session,
                     char sid[SESSION_ID_MAX + 1], struct openai_error *err)
{
        struct airlock_error aerr = { { 0 } };
        int r;

        if (openai_session_id(container_id, sid, 32) < 0)
                return container_gone(oa, container_id, err);
        r = session_lookup(oa->mgr, sid, ret_session, &aerr);
        if (r == -ENOENT)
                return container_gone(oa, container_id, err);
        if (r < 0)
                return openai_error_from_session(err, r, container_id, aerr.msg);
        return 0;
}

/* The Container object of a session's description and its row (may be NULL). */
static json_t *container_object(json_t *desc, json_t *row)
{
        const char *sid = json_string_value(json_object_get(desc, "id"));
        const char *state = json_string_value(json_object_get(desc, "state"));
        json_int_t stop_after_s = json_integer_value(json_object_get(desc, "stop_after_s"));
        const char *name = json_string_value(json_object_get(row, "name"));
        json_t *memory_limit = json_object_get(row, "memory_limit");
        char cid[OPENAI_CONTAINER_ID_MAX + 1];
        json_t *o;

        if (!sid || openai_container_id(sid, cid, sizeof(cid)) < 0)
                return NULL;
        o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:{s:s, s:I}, s:I}", "id", cid, "object",
                      "container", "created_at",
                      (json_int_t) openai_parse_time(
                              json_string_value(json_object_get(desc, "created_at"))),
                      "status", state && strcmp(state, "stopped") == 0 ? "expired" : "running",
                      "name", name ? name : "", "expires_after", "anchor", "last_active_at",
                      "minutes", (stop_after_s + 59) / 60, "last_active_at",
                      (json_int_t) openai_parse_time(
                              json_string_value(json_object_get(desc, "last_used_at"))));
        if (o && json_is_string(memory_limit))
                json_object_set(o, "memory_limit", memory_limit);
        return o;
}

static json_t *container_row(struct openai *oa, const char *sid)
{
        return db_query_one(oa,
                            "SELECT session_id, name, memory_limit, created_at FROM containers "
                            "WHERE session_id = ?1",
                            "s", sid);
}

json_t *openai_container_describe(struct openai *oa, const char *container_id)
{
        char sid[SESSION_ID_MAX + 1];
        json_t *desc, *row, *o;

        if (openai_session_id(container_id, sid, sizeof(sid)) < 0)
                return NULL;
        desc = session_describe_id(oa->mgr, sid);
        if (!desc)
                return NULL;
        row = container_row(oa, sid);
        o = container_object(desc, row);
        json_decref(row);
        json_decref(desc);
        return o;
}

int openai_container_get(struct openai *oa, const char *container_id, json_t **ret_container,
                         struct openai_error *err)
{
        json_t *o = openai_container_describe(oa, container_id);

        if (!o)
                return container_gone(oa, container_id, err);
        *ret_container = o;
        return 0;
}

/* Bytes of a memory_limit value, or 0 when it is not one of OpenAI's. */
static uint64_t memory_limit_bytes(const char *v)
{
        static const char *const values[] = { "1g", "4g", "16g", "64g" };

        for (size_t i = 0; i < ELEMENTSOF(values); i++)
                if (strcmp(v, values[i]) == 0)
                        return (uint64_t) strtoull(v, NULL, 10) << 30;
        return 0;
}

/* Checks that profile exists and that its memory limit covers memory_limit (may be NULL). */
static int check_profile(struct openai *oa, const char *profile, const char *memory_limit,
                         struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *profiles = session_manager_profiles(oa->mgr);
        uint64_t want = memory_limit ? memory_limit_bytes(memory_limit) : 0, have;
        size_t i;
        json_t *p;

        if (memory_limit && !want)
                return openai_error_set(err, -EINVAL, 400, "memory_limit",
                                        "memory_limit '%.16s' is not one of 1g, 4g, 16g, 64g",
                                        memory_limit);
        json_array_foreach (profiles, i, p) {
                if (strcmp(json_string_value(json_object_get(p, "name")), profile) != 0)
                        continue;
                have = (uint64_t) json_integer_value(
                        json_object_get(json_object_get(p, "limits"), "memory_bytes"));
                if (want > have)
                        return openai_error_set(err, -EINVAL, 400, "memory_limit",
                                                "memory_limit '%s' is more than the profile "
                                                "'%s' allows (%llu MiB): ask for less, or use a "
                                                "profile with more memory",
                                                memory_limit, profile,
                                                (unsigned long long) (have >> 20));
                return 0;
        }
        return openai_error_set(err, -EINVAL, 400, "profile",
                                "unknown profile '%.64s' (GET /v1/profiles lists them)", profile);
}

static int check_options(const struct openai_container_options *o, struct openai_error *err)
{
        const char *name = o->name ? o->name : "";

        if (strlen(name) > CONTAINER_NAME_MAX)
                return openai_error_set(err, -EINVAL, 400, "name", "name is longer than %d bytes",
                                        CONTAINER_NAME_MAX);
        if (o->expires_after_minutes > EXPIRES_MINUTES_MAX)
                return openai_error_set(err, -EINVAL, 400, "expires_after",
                                        "expires_after.minutes must be from 1 to %u (24 hours)",
                                        EXPIRES_MINUTES_MAX);
        for (char *const *f = o->file_ids; f && *f; f++)
                if (!openai_id_is_valid(*f, OPENAI_FILE_PREFIX))
                        return openai_error_code(err,
                                                 openai_error_set(err, -ENOENT, 404, "file_ids",
                                                                  "No such File object: '%.100s'.",
                                                                  *f),
                                                 "not_found");
        return 0;
}

/* Copies the files of file_ids into the new session's /work. */
static int copy_files(struct openai *oa, struct session *s, const char *cid, const char *sid,
                      char *const *file_ids, struct openai_error *err)
{
        for (char *const *f = file_ids; f && *f; f++) {
                _cleanup_close_ int fd = -EBADF;
                _cleanup_(json_decrefp) json_t *row = NULL, *rec = NULL;
                const char *filename;
                uint64_t size = 0;
                int r;

                r = file_open_row(oa, *f, "file_ids", &fd, &size, &row, err);
                if (r < 0)
                        return r;
                filename = json_string_value(json_object_get(row, "filename"));
                r = openai_write_to_session(s, cid, filename, fd, size, err);
                if (r < 0)
                        return r;
                rec = cfile_record(oa, sid, filename, "user", (long long) time(NULL));
                if (!rec)
                        return openai_error_set(err, -EIO, 500, NULL,
                                                "cannot record the container's files");
        }
        return 0;
}

int openai_container_create(struct openai *oa, const struct openai_container_options *o,
                            char ret_id[OPENAI_CONTAINER_ID_MAX + 1], struct openai_error *err)
{
        const char *profile = o->profile ? o->profile : "default";
        unsigned minutes = o->expires_after_minutes ? o->expires_after_minutes
                                                    : OPENAI_EXPIRES_MINUTES_DEFAULT;
        struct airlock_error aerr = { { 0 } };
        struct session *s = NULL;
        char sid[SESSION_ID_MAX + 1], cid[OPENAI_CONTAINER_ID_MAX + 1];
        int r;

        r = check_options(o, err);
        if (r >= 0)
                r = check_profile(oa, profile, o->memory_limit, err);
        if (r < 0)
                return r;
        for (char *const *f = o->file_ids; f && *f; f++) {
                _cleanup_(json_decrefp) json_t *file = NULL;

                r = openai_file_get(oa, *f, &file, err);
                if (r < 0) {
                        if (err)
                                (void) snprintf(err->param, sizeof(err->param), "file_ids");
                        return r;
                }
        }

        r = session_create(
                oa->mgr,
                &(struct session_create_options){ .profile = profile,
                                                  .stop_after_ms = (uint64_t) minutes * 60 * 1000 },
                &s, &aerr);
        if (r == -EINVAL)
                return openai_error_set(err, r, 400, "expires_after", "%s", aerr.msg);
        if (r < 0)
                return openai_error_from_session(err, r, "(new)", aerr.msg);
        (void) snprintf(sid, sizeof(sid), "%s", session_id(s));
        (void) openai_container_id(sid, cid, sizeof(cid));

        r = copy_files(oa, s, cid, sid, o->file_ids, err);
        if (r >= 0 && db_exec(oa,
                              "INSERT OR REPLACE INTO containers (session_id, name, memory_limit, "
                              "created_at) VALUES (?1, ?2, ?3, ?4)",
                              "sssi", sid, o->name ? o->name : "", o->memory_limit,
                              (long long) time(NULL)) < 0)
                r = openai_error_set(err, -EIO, 500, NULL, "cannot record the container");
        session_unref(s);
        if (r < 0) {
                /* Nothing half-made stays: the session and what was recorded of it go. */
                (void) session_destroy(oa->mgr, sid);
                container_forget(oa, sid);
                return r;
        }
        memcpy(ret_id, cid, sizeof(cid));
        return 0;
}

int openai_container_list(struct openai *oa, const struct openai_list_query *q, json_t **ret_list,
                          struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *sessions = session_list(oa->mgr, NULL);
        _cleanup_(json_decrefp) json_t *rows = NULL, *by_sid = json_object(), *items = json_array();
        size_t i;
        json_t *row, *desc;

        rows = db_query(oa, "SELECT session_id, name, memory_limit, created_at FROM containers",
                        "");
        if (!sessions || !rows || !by_sid || !items)
                return openai_error_set(err, -ENOMEM, 500, NULL, "cannot list the containers");
        json_array_foreach (rows, i, row) {
                json_object_set(by_sid, json_string_value(json_object_get(row, "session_id")), row);
        }
        json_array_foreach (sessions, i, desc) {
                const char *sid = json_string_value(json_object_get(desc, "id"));
                json_t *o = container_object(desc, sid ? json_object_get(by_sid, sid) : NULL);

                if (o && (!q->name ||
                          strcmp(json_string_value(json_object_get(o, "name")), q->name) == 0))
                        json_array_append(items, o);
                json_decref(o);
        }
        return openai_page(items, q, 20, CONTAINERS_LIST_MAX, "container", ret_list, err);
}

int openai_container_delete(struct openai *oa, const char *container_id, json_t **ret_deleted,
                            struct openai_error *err)
{
        char sid[SESSION_ID_MAX + 1];

        if (openai_session_id(container_id, sid, sizeof(sid)) < 0 ||
            session_destroy(oa->mgr, sid) < 0)
                return container_gone(oa, container_id, err);
        container_forget(oa, sid);
        if (ret_deleted)
                *ret_deleted = json_pack("{s:s, s:s, s:b}", "id", container_id, "object",
                                         "container.deleted", "deleted", 1);
        return 0;
}
