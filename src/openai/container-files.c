/* Container files: the regular files under a container's /work (the code's /mnt/data), each
 * with an id that stays the same from one call to the next. A file uploaded through the API
 * is recorded when it is written (source "user"); one the code made is recorded when a listing
 * or the Responses API (openai_container_files_register) first sees it (source "assistant").
 * Every read and write goes through session.h, which resolves paths beneath /work without
 * following symlinks; nothing here touches the sandbox's filesystem itself. */
#include "openai-internal.h"

#include "base/cleanup.h"
#include "session/session.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CFILES_LIST_MAX 100u
/* A listing walks at most this many entries of /work (files and directories). */
#define WALK_ENTRIES_MAX 10000u

json_t *cfile_record(struct openai *oa, const char *session_id, const char *path,
                     const char *source, long long created_at)
{
        char id[OPENAI_CFILE_ID_MAX + 1];

        openai_make_id(OPENAI_CFILE_PREFIX, id);
        /* A path already known keeps its id; an upload makes it the user's. */
        if (db_exec(oa,
                    "INSERT INTO container_files (id, session_id, path, source, created_at) "
                    "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (session_id, path) DO UPDATE SET "
                    "source = excluded.source WHERE excluded.source = 'user'",
                    "ssssi", id, session_id, path, source, created_at) < 0)
                return NULL;
        return db_query_one(oa,
                            "SELECT id, session_id, path, source, created_at FROM "
                            "container_files WHERE session_id = ?1 AND path = ?2",
                            "ss", session_id, path);
}

json_t *cfile_object(const char *container_id, json_t *row, uint64_t bytes)
{
        char path[sizeof(OPENAI_DATA_DIR) + 4200];

        (void) snprintf(path, sizeof(path), OPENAI_DATA_DIR "/%s",
                        json_string_value(json_object_get(row, "path")));
        return json_pack("{s:O, s:s, s:O, s:I, s:s, s:s, s:O}", "id", json_object_get(row, "id"),
                         "object", "container.file", "created_at",
                         json_object_get(row, "created_at"), "bytes", (json_int_t) bytes,
                         "container_id", container_id, "path", path, "source",
                         json_object_get(row, "source"));
}

static json_t *cfile_row(struct openai *oa, const char *session_id, const char *file_id)
{
        if (!openai_id_is_valid(file_id, OPENAI_CFILE_PREFIX))
                return NULL;
        return db_query_one(oa,
                            "SELECT id, session_id, path, source, created_at FROM "
                            "container_files WHERE session_id = ?1 AND id = ?2",
                            "ss", session_id, file_id);
}

static int cfile_not_found(struct openai_error *err, const char *container_id, const char *file_id)
{
        return openai_error_code(err,
                                 openai_error_set(err, -ENOENT, 404, NULL,
                                                  "No file found with id '%.100s' in container "
                                                  "%s.",
                                                  file_id, container_id),
                                 "not_found");
}

static void cfile_forget(struct openai *oa, const char *session_id, const char *file_id)
{
        (void) db_exec(oa, "DELETE FROM container_files WHERE session_id = ?1 AND id = ?2", "ss",
                       session_id, file_id);
}

int openai_container_file_add(struct openai *oa, const char *container_id, const char *filename,
                              int fd, uint64_t size, json_t **ret_file, struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *row = NULL;
        struct session *s = NULL;
        const char *why = NULL;
        char sid[SESSION_ID_MAX + 1];
        int r;

        if (openai_filename_check(filename, &why) < 0)
                return openai_error_set(err, -EINVAL, 400, "file", "%s", why);
        r = openai_check_upload(oa, size, err);
        if (r < 0)
                return r;
        r = container_lookup(oa, container_id, &s, sid, err);
        if (r < 0)
                return r;
        r = openai_write_to_session(s, container_id, filename, fd, size, err);
        session_unref(s);
        if (r < 0)
                return r;
        row = cfile_record(oa, sid, filename, "user", (long long) time(NULL));
        if (!row)
                return openai_error_set(err, -EIO, 500, NULL, "cannot record the file");
        *ret_file = cfile_object(container_id, row, size);
        return *ret_file ? 0 : -ENOMEM;
}

int openai_container_file_copy(struct openai *oa, const char *container_id, const char *file_id,
                               json_t **ret_file, struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *row = NULL;
        _cleanup_close_ int fd = -EBADF;
        uint64_t size = 0;
        int r;

        r = file_open_row(oa, file_id, "file_id", &fd, &size, &row, err);
        if (r < 0)
                return r;
        return openai_container_file_add(oa, container_id,
                                         json_string_value(json_object_get(row, "filename")), fd,
                                         size, ret_file, err);
}

/* Every regular file under /work, as {path: {size, created_at}}; directories are walked
 * breadth first, each listed through the session. *ret_complete is false when the walk
 * stopped at WALK_ENTRIES_MAX or a directory listing was cut short. */
static int walk(struct session *s, const char *container_id, json_t **ret_files, bool *ret_complete,
                struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *files = json_object(), *dirs = json_array();
        size_t seen = 0;
        bool complete = true;

        if (!files || !dirs || json_array_append_new(dirs, json_string("")) < 0)
                return -ENOMEM;
        for (size_t d = 0; d < json_array_size(dirs); d++) {
                const char *dir = json_string_value(json_array_get(dirs, d));
                struct airlock_error aerr = { { 0 } };
                _cleanup_(json_decrefp) json_t *listing = NULL;
                json_t *e;
                size_t i;
                int r;

                r = session_file_list(s, dir, &listing, &aerr);
                if (r < 0 && d == 0)
                        return openai_error_from_session(err, r, container_id, aerr.msg);
                if (r < 0) {
                        complete = false; /* changed under us: the next listing sees it */
                        continue;
                }
                if (json_is_true(json_object_get(listing, "truncated")))
                        complete = false;
                json_array_foreach (json_object_get(listing, "entries"), i, e) {
                        const char *type = json_string_value(json_object_get(e, "type"));
                        json_t *path = json_object_get(e, "path");

                        if (++seen > WALK_ENTRIES_MAX) {
                                complete = false;
                                break;
                        }
                        /* A name that is not UTF-8 has no exact JSON path: left out. */
                        if (json_object_get(e, "raw_path") || !json_is_string(path))
                                continue;
                        if (type && strcmp(type, "directory") == 0)
                                json_array_append(dirs, path);
                        else if (type && strcmp(type, "file") == 0)
                                json_object_set_new(
                                        files, json_string_value(path),
                                        json_pack("{s:O, s:I}", "size", json_object_get(e, "size"),
                                                  "created_at",
                                                  (json_int_t) openai_parse_time(json_string_value(
                                                          json_object_get(e, "modified_at")))));
                }
                if (seen > WALK_ENTRIES_MAX)
                        break;
        }
        *ret_complete = complete;
        *ret_files = TAKE_PTR(files);
        return 0;
}

int openai_container_files(struct openai *oa, const char *container_id,
                           const struct openai_list_query *q, json_t **ret_list,
                           struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *files = NULL, *rows = NULL, *items = json_array();
        _cleanup_(json_decrefp) json_t *by_path = json_object();
        struct session *s = NULL;
        const char *path;
        bool complete = false;
        json_t *row, *f;
        char sid[SESSION_ID_MAX + 1];
        size_t i;
        int r;

        r = container_lookup(oa, container_id, &s, sid, err);
        if (r < 0)
                return r;
        r = walk(s, container_id, &files, &complete, err);
        session_unref(s);
        if (r < 0)
                return r;
        rows = db_query(oa,
                        "SELECT id, session_id, path, source, created_at FROM container_files "
                        "WHERE session_id = ?1",
                        "s", sid);
        if (!rows || !items || !by_path)
                return openai_error_set(err, -EIO, 500, NULL, "cannot read the file store");
        /* Ids of files that are gone are forgotten, once the walk saw all of /work. */
        json_array_foreach (rows, i, row) {
                const char *p = json_string_value(json_object_get(row, "path"));

                if (!p)
                        continue;
                if (json_object_get(files, p))
                        json_object_set(by_path, p, row);
                else if (complete)
                        cfile_forget(oa, sid, json_string_value(json_object_get(row, "id")));
        }
        json_object_foreach (files, path, f) {
                /* Files seen for the first time are the code's. */
                _cleanup_(json_decrefp) json_t *rec =
                        json_incref(json_object_get(by_path, path))
                                ?: cfile_record(
                                           oa, sid, path, "assistant",
                                           json_integer_value(json_object_get(f, "created_at")));

                if (rec)
                        json_array_append_new(items,
                                              cfile_object(container_id, rec,
                                                           (uint64_t) json_integer_value(
                                                                   json_object_get(f, "size"))));
        }
        return openai_page(items, q, 20, CFILES_LIST_MAX, "file", ret_list, err);
}

/* The container's session (a reference) and the row of its file file_id, or 404. */
static int cfile_find(struct openai *oa, const char *container_id, const char *file_id,
                      struct session **ret_s, char sid[SESSION_ID_MAX + 1], json_t **ret_row,
                      struct openai_error *err)
{
        struct session *s = NULL;
        json_t *row;
        int r;

        r = container_lookup(oa, container_id, &s, sid, err);
        if (r < 0)
                return r;
        row = cfile_row(oa, sid, file_id);
        if (!row) {
                session_unref(s);
                return cfile_not_found(err, container_id, file_id);
        }
        *ret_s = s;
        *ret_row = row;
        return 0;
}

/* The file's row and an fd of it; a file that is gone is forgotten (404). */
static int cfile_open(struct openai *oa, const char *container_id, const char *file_id, int *ret_fd,
                      uint64_t *ret_size, json_t **ret_row, struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *row = NULL;
        struct airlock_error aerr = { { 0 } };
        struct session *s = NULL;
        char sid[SESSION_ID_MAX + 1];
        int r;

        r = cfile_find(oa, container_id, file_id, &s, sid, &row, err);
        if (r < 0)
                return r;
        r = session_file_open(s, json_string_value(json_object_get(row, "path")), SIZE_MAX, ret_fd,
                              ret_size, &aerr);
        session_unref(s);
        if (r == -ENOENT || r == -EISDIR || r == -ELOOP || r == -ENOTDIR || r == -EINVAL) {
                /* The code deleted it, or put something that is not a file in its place. */
                cfile_forget(oa, sid, file_id);
                return cfile_not_found(err, container_id, file_id);
        }
        if (r < 0)
                return openai_error_from_session(err, r, container_id, aerr.msg);
        if (ret_row)
                *ret_row = TAKE_PTR(row);
        return 0;
}

int openai_container_file_get(struct openai *oa, const char *container_id, const char *file_id,
                              json_t **ret_file, struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *row = NULL;
        _cleanup_close_ int fd = -EBADF;
        uint64_t size = 0;
        int r;

        r = cfile_open(oa, container_id, file_id, &fd, &size, &row, err);
        if (r < 0)
                return r;
        *ret_file = cfile_object(container_id, row, size);
        return *ret_file ? 0 : -ENOMEM;
}

int openai_container_file_open(struct openai *oa, const char *container_id, const char *file_id,
                               int *ret_fd, uint64_t *ret_size, struct openai_error *err)
{
        return cfile_open(oa, container_id, file_id, ret_fd, ret_size, NULL, err);
}

int openai_container_file_delete(struct openai *oa, const char *container_id, const char *file_id,
                                 json_t **ret_deleted, struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *row = NULL;
        struct airlock_error aerr = { { 0 } };
        struct session *s = NULL;
        char sid[SESSION_ID_MAX + 1];
        int r;

        r = cfile_find(oa, container_id, file_id, &s, sid, &row, err);
        if (r < 0)
                return r;
        r = session_file_delete(s, json_string_value(json_object_get(row, "path")), 0, NULL, &aerr);
        session_unref(s);
        if (r == -ENOENT) {
                cfile_forget(oa, sid, file_id);
                return cfile_not_found(err, container_id, file_id);
        }
        if (r < 0)
                return openai_error_from_session(err, r, container_id, aerr.msg);
        cfile_forget(oa, sid, file_id);
        if (ret_deleted)
                *ret_deleted = json_pack("{s:s, s:s, s:b}", "id", file_id, "object",
                                         "container.file.deleted", "deleted", 1);
        return 0;
}

int openai_container_files_register(struct openai *oa, const char *container_id, json_t *exec_files,
                                    json_t **ret_files, struct openai_error *err)
{
        _cleanup_(json_decrefp) json_t *out = json_array();
        char sid[SESSION_ID_MAX + 1];
        size_t i;
        json_t *f;

        if (openai_session_id(container_id, sid, sizeof(sid)) < 0)
                return openai_error_from_session(err, -ENOENT, container_id, NULL);
        if (!out)
                return -ENOMEM;
        json_array_foreach (exec_files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path"));
                const char *change = json_string_value(json_object_get(f, "change"));
                _cleanup_(json_decrefp) json_t *row = NULL;

                if (!path || !change)
                        continue;
                if (strcmp(change, "deleted") == 0) {
                        (void) db_exec(oa,
                                       "DELETE FROM container_files WHERE session_id = ?1 AND "
                                       "path = ?2",
                                       "ss", sid, path);
                        continue;
                }
                row = cfile_record(oa, sid, path, "assistant", (long long) time(NULL));
                if (!row)
                        return openai_error_set(err, -EIO, 500, NULL,
                                                "cannot record the container's files");
                json_array_append_new(out, cfile_object(container_id, row,
                                                        (uint64_t) json_integer_value(
                                                                json_object_get(f, "size"))));
        }
        *ret_files = TAKE_PTR(out);
        return 0;
}
