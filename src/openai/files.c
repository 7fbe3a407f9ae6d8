/* The Files API: an upload becomes <state>/openai/files/<id> (renamed there from the spool it
 * streamed into, never held in memory) and a row of openai.db, so that containers can be given
 * it by id ("file_ids") after a restart too. */
#include "openai-internal.h"

#include "base/cleanup.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILES_LIST_MAX 10000u

static json_t *file_object(json_t *row)
{
        return json_pack(
                "{s:O, s:s, s:O, s:O, s:O, s:O, s:s, s:n, s:n}", "id", json_object_get(row, "id"),
                "object", "file", "bytes", json_object_get(row, "bytes"), "created_at",
                json_object_get(row, "created_at"), "filename", json_object_get(row, "filename"),
                "purpose", json_object_get(row, "purpose"), "status", "processed", "expires_at",
                "status_details");
}

static int not_found(struct openai_error *err, const char *file_id, const char *param)
{
        return openai_error_code(err,
                                 openai_error_set(err, -ENOENT, 404, param,
                                                  "No such File object: '%.100s'.", file_id),
                                 "not_found");
}

/* The file's row when the calling thread's tenant owns it: another tenant's file is as
 * unknown as one nobody uploaded (docs/TENANTS.md). */
static json_t *file_row(struct openai *oa, const char *file_id)
{
        if (!openai_id_is_valid(file_id, OPENAI_FILE_PREFIX))
                return NULL;
        return db_query_one(oa,
                            "SELECT id, filename, purpose, bytes, created_at FROM files "
                            "WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)",
                            "ss", file_id, tenant_scope_filter());
}

int openai_file_create(struct openai *oa, const char *spool_path, uint64_t size,
                       const char *filename, const char *purpose, json_t **ret_file,
                       struct openai_error *err)
{
        char id[OPENAI_FILE_ID_MAX + 1], path[4096];
        const char *why = NULL;
        long long now = (long long) time(NULL);
        json_t *row;
        int r;

        if (openai_filename_check(filename, &why) < 0)
                return openai_error_set(err, -EINVAL, 400, "file", "%s", why);
        if (!purpose || !*purpose)
                return openai_error_set(err, -EINVAL, 400, "purpose",
                                        "purpose is required: one of assistants, batch, "
                                        "fine-tune, vision, user_data, evals");
        if (!openai_file_purpose_is_valid(purpose))
                return openai_error_set(err, -EINVAL, 400, "purpose",
                                        "purpose '%.64s' is not one of assistants, batch, "
                                        "fine-tune, vision, user_data, evals",
                                        purpose);
        r = openai_check_upload(oa, size, err);
        if (r < 0)
                return r;
        openai_make_id(OPENAI_FILE_PREFIX, id);
        (void) snprintf(path, sizeof(path), "%s/%s", oa->files_dir, id);
        if (rename(spool_path, path) < 0)
                return openai_error_set(err, -errno, 500, NULL, "cannot store the file: %m");
        r = db_exec(oa,
                    "INSERT INTO files (id, filename, purpose, bytes, created_at, owner) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    "sssiis", id, filename, purpose, (long long) size, now, tenant_scope_owner());
        if (r < 0) {
                (void) unlink(path);
                return openai_error_set(err, r, 500, NULL, "cannot record the file");
        }
        row = json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", id, "filename", filename, "purpose",
                        purpose, "bytes", (json_int_t) size, "created_at", (json_int_t) now);
        *ret_file = row ? file_object(row) : NULL;
        json_decref(row);
        return *ret_file ? 0 : -ENOMEM;
}

int openai_file_get(struct openai *oa, const char *file_id, json_t **ret_file,
                    struct openai_error *err)
{
        json_t *row = file_row(oa, file_id);

        if (!row)
                return not_found(err, file_id, NULL);
        *ret_file = file_object(row);
        json_decref(row);
        return *ret_file ? 0 : -ENOMEM;
}

int file_open_row(struct openai *oa, const char *file_id, const char *param, int *ret_fd,
                  uint64_t *ret_size, json_t **ret_row, struct openai_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        json_t *row = file_row(oa, file_id);
        char path[4096];
        struct stat st;

        if (!row)
                return not_found(err, file_id, param);
        (void) snprintf(path, sizeof(path), "%s/%s", oa->files_dir, file_id);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                json_decref(row);
                return openai_error_set(err, -EIO, 500, NULL,
                                        "the stored copy of %s is missing or unreadable", file_id);
        }
        *ret_fd = TAKE_FD(fd);
        *ret_size = (uint64_t) st.st_size;
        if (ret_row)
                *ret_row = row;
        else
                json_decref(row);
        return 0;
}

int openai_file_open(struct openai *oa, const char *file_id, int *ret_fd, uint64_t *ret_size,
                     json_t **ret_file, struct openai_error *err)
{
        json_t *row = NULL;
        int r;

        r = file_open_row(oa, file_id, NULL, ret_fd, ret_size, &row, err);
        if (r < 0)
                return r;
        if (ret_file)
                *ret_file = file_object(row);
        json_decref(row);
        return 0;
}

int openai_file_delete(struct openai *oa, const char *file_id, json_t **ret_deleted,
                       struct openai_error *err)
{
        json_t *row = file_row(oa, file_id);
        char path[4096];
        int r;

        if (!row)
                return not_found(err, file_id, NULL);
        json_decref(row);
        /* The row first: a crash before the unlink leaves a file without a row, which the
         * next start removes, never a row without its file. */
        r = db_exec(oa, "DELETE FROM files WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)", "ss",
                    file_id, tenant_scope_filter());
        if (r < 0)
                return openai_error_set(err, r, 500, NULL, "cannot delete the file's record");
        (void) snprintf(path, sizeof(path), "%s/%s", oa->files_dir, file_id);
        (void) unlink(path);
        if (ret_deleted)
                *ret_deleted =
                        json_pack("{s:s, s:s, s:b}", "id", file_id, "object", "file", "deleted", 1);
        return 0;
}

int openai_file_list(struct openai *oa, const struct openai_list_query *q, json_t **ret_list,
                     struct openai_error *err)
{
        /* Pages are cut in SQL, on (created_at, rowid): the rowid orders the uploads of one
         * second as they came, and a store of many files costs one page. */
        static const char *const sql[2][2] = {
                { "SELECT id, filename, purpose, bytes, created_at FROM files "
                  "WHERE (?1 IS NULL OR purpose = ?1) AND (?4 IS NULL OR owner = ?4) "
                  "ORDER BY created_at DESC, rowid DESC LIMIT ?2",
                  "SELECT id, filename, purpose, bytes, created_at FROM files "
                  "WHERE (?1 IS NULL OR purpose = ?1) AND (?4 IS NULL OR owner = ?4) "
                  "ORDER BY created_at ASC, rowid ASC LIMIT ?2" },
                { "SELECT id, filename, purpose, bytes, created_at FROM files "
                  "WHERE (?1 IS NULL OR purpose = ?1) AND (?4 IS NULL OR owner = ?4) AND "
                  "(created_at, rowid) < "
                  "(SELECT created_at, rowid FROM files WHERE id = ?3) "
                  "ORDER BY created_at DESC, rowid DESC LIMIT ?2",
                  "SELECT id, filename, purpose, bytes, created_at FROM files "
                  "WHERE (?1 IS NULL OR purpose = ?1) AND (?4 IS NULL OR owner = ?4) AND "
                  "(created_at, rowid) > "
                  "(SELECT created_at, rowid FROM files WHERE id = ?3) "
                  "ORDER BY created_at ASC, rowid ASC LIMIT ?2" },
        };
        unsigned limit = q->limit ? q->limit : FILES_LIST_MAX;
        json_t *rows, *data, *row, *after = NULL;
        size_t i, n;

        if (limit > FILES_LIST_MAX)
                return openai_error_set(err, -EINVAL, 400, "limit",
                                        "limit must be an integer from 1 to %u", FILES_LIST_MAX);
        if (q->after) {
                after = file_row(oa, q->after);
                if (!after)
                        return openai_error_set(err, -EINVAL, 400, "after",
                                                "after: '%.100s' is not the id of a file",
                                                q->after);
                rows = db_query(oa, sql[1][q->ascending], "siss", q->purpose, (long long) limit + 1,
                                q->after, tenant_scope_filter());
                json_decref(after);
        } else {
                rows = db_query(oa, sql[0][q->ascending], "siss", q->purpose, (long long) limit + 1,
                                NULL, tenant_scope_filter());
        }
        if (!rows)
                return openai_error_set(err, -EIO, 500, NULL, "cannot read the file store");
        n = json_array_size(rows) > limit ? limit : json_array_size(rows);
        data = json_array();
        json_array_foreach (rows, i, row) {
                if (i < n)
                        json_array_append_new(data, file_object(row));
        }
        *ret_list =
                json_pack("{s:s, s:o, s:O?, s:O?, s:b}", "object", "list", "data", data, "first_id",
                          n ? json_object_get(json_array_get(rows, 0), "id") : NULL, "last_id",
                          n ? json_object_get(json_array_get(rows, n - 1), "id") : NULL, "has_more",
                          json_array_size(rows) > limit);
        json_decref(rows);
        return *ret_list ? 0 : -ENOMEM;
}
