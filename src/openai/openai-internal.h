/* Shared by the files of src/openai: the object itself, its SQLite store, and the helpers the
 * containers, container files and files share. Nothing outside src/openai includes this. */
#pragma once

#include "openai.h"
#include "session/session.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct session;
struct sqlite3;

struct openai {
        struct session_manager *mgr;
        uint64_t upload_max;
        char *dir;       /* <state_dir>/openai */
        char *files_dir; /* <dir>/files: one file per upload, named by its id */
        char *spool_dir; /* <dir>/spool: uploads being received */
        pthread_mutex_t db_lock;
        struct sqlite3 *db;
};

/* ---- db.c: openai.db ------------------------------------------------------------------------ */

/* Opens <oa->dir>/openai.db and makes its tables. Returns 0 or -errno with err set. */
int db_open(struct openai *oa, struct airlock_error *err);
void db_close(struct openai *oa);

/* Runs one statement with parameters bound in order from the varargs as types says: 's' a
 * string (NULL binds null), 'i' a long long. Returns 0 or -EIO (logged). */
int db_exec(struct openai *oa, const char *sql, const char *types, ...);

/* Runs a query the same way; each row becomes an object keyed by column name (integers,
 * strings, null). A new array, NULL on failure (logged) or when out of memory. */
json_t *db_query(struct openai *oa, const char *sql, const char *types, ...);

/* The first row of db_query(), or NULL when there is none. New reference. */
json_t *db_query_one(struct openai *oa, const char *sql, const char *types, ...);

/* ---- openai.c: shared helpers ---------------------------------------------------------------- */

/* prefix + OPENAI_ID_HEX random lowercase hex characters into buf (of at least
 * strlen(prefix) + OPENAI_ID_HEX + 1 bytes). */
void openai_make_id(const char *prefix, char *buf);

/* Whether id is prefix followed by exactly OPENAI_ID_HEX lowercase hex characters. */
bool openai_id_is_valid(const char *id, const char *prefix);

/* Seconds since the epoch of an RFC 3339 UTC time "YYYY-MM-DDTHH:MM:SSZ" (what the session
 * layer reports); 0 when s is NULL or malformed. */
long long openai_parse_time(const char *s);

/* A list page of items (an array of objects with "id" and "created_at", borrowed): sorted by
 * created_at then id (ascending or newest first), the items after q->after, at most limit
 * (0 = default_limit; more than max_limit is refused). Returns 0 with {object: "list", data,
 * first_id, last_id, has_more} in *ret_list, -EINVAL (400) for a limit out of range or an
 * after that names no item (what names it in the error). */
int openai_page(json_t *items, const struct openai_list_query *q, unsigned default_limit,
                unsigned max_limit, const char *what, json_t **ret_list, struct openai_error *err);

/* 0 when an upload of size bytes is within --max-upload, else -EFBIG with a 413 in err. */
int openai_check_upload(struct openai *oa, uint64_t size, struct openai_error *err);

/* Fills err for a -errno from session.h (msg: what the session layer said, may be empty), with
 * the container's id for a 404. Returns r. */
int openai_error_from_session(struct openai_error *err, int r, const char *container_id,
                              const char *msg);

/* Writes size bytes of fd (borrowed, read from offset 0) to path in s's /work. Returns 0 or
 * -errno with err set (413 or 507 when it does not fit). */
int openai_write_to_session(struct session *s, const char *container_id, const char *path, int fd,
                            uint64_t size, struct openai_error *err);

/* ---- containers.c --------------------------------------------------------------------------- */

/* Looks the container up, resuming it when it stopped. Returns 0 with a reference in
 * *ret_session (release with session_unref()) and its session id in sid, or -errno with err
 * (404 for an unknown or ended container). */
int container_lookup(struct openai *oa, const char *container_id, struct session **ret_session,
                     char sid[SESSION_ID_MAX + 1], struct openai_error *err);

/* Forgets what is recorded of a container whose session is gone (its row, its files' ids). */
void container_forget(struct openai *oa, const char *session_id);

/* ---- container-files.c ------------------------------------------------------------------------
 */

/* Records path (relative to /work) of the container as a file with the given source, or
 * updates it: a known path keeps its id and source. Returns its row {id, session_id, path,
 * source, created_at} (new reference) or NULL. */
json_t *cfile_record(struct openai *oa, const char *session_id, const char *path,
                     const char *source, long long created_at);

/* The container file object of a row, with bytes. New reference. */
json_t *cfile_object(const char *container_id, json_t *row, uint64_t bytes);

/* ---- files.c ------------------------------------------------------------------------------ */

/* The stored copy of a file: an fd (caller closes), its size and row {id, filename, purpose,
 * bytes, created_at}. Returns 0 or -ENOENT (404, param). */
int file_open_row(struct openai *oa, const char *file_id, const char *param, int *ret_fd,
                  uint64_t *ret_size, json_t **ret_row, struct openai_error *err);
