/* OpenAI's hosted code interpreter, the parts that are not HTTP: the Files API (uploads kept
 * under the state directory, their metadata in SQLite), the Containers API (a container IS an
 * airlock session: "cntr_" + the 24 hex characters of its id) and container files (every file
 * under the session's /work, which its code also sees as /mnt/data, with a stable "cfile_" id
 * and a source: "user" for what came through the API, "assistant" for what code made). The
 * routes (src/api/routes-containers.c, routes-openai-files.c) and the Responses API call this;
 * docs/RESPONSES.md "Containers and files" says what a client sees.
 *
 * Errors: every function that can fail on a client's input returns 0 or -errno and fills a
 * struct openai_error with the HTTP status, OpenAI's error type, the parameter at fault and a
 * message; openai_error_json() makes the {"error": {"message", "type", "param", "code"}} body.
 *
 * Threading: every function may be called from any thread. */
#pragma once

#include "base/error.h"
#include "base/node-id.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct openai;
struct session_manager;

#define OPENAI_CONTAINER_PREFIX "cntr_"
#define OPENAI_FILE_PREFIX "file-"
#define OPENAI_CFILE_PREFIX "cfile_"
#define OPENAI_ID_HEX 24
#define OPENAI_CONTAINER_ID_LEN (5 + OPENAI_ID_HEX) /* "cntr_" + 24 hex */
#define OPENAI_FILE_ID_LEN (5 + OPENAI_ID_HEX)      /* "file-" + 24 hex */
#define OPENAI_CFILE_ID_LEN (6 + OPENAI_ID_HEX)     /* "cfile_" + 24 hex */
/* The same with "-NODE" after (node-id.h): buffers are sized for these. */
#define OPENAI_CONTAINER_ID_MAX (OPENAI_CONTAINER_ID_LEN + NODE_SUFFIX_MAX)
#define OPENAI_FILE_ID_MAX (OPENAI_FILE_ID_LEN + NODE_SUFFIX_MAX)
#define OPENAI_CFILE_ID_MAX (OPENAI_CFILE_ID_LEN + NODE_SUFFIX_MAX)
/* Where the code sees a container's files: the same directory as /work (src/jail/mount.c). */
#define OPENAI_DATA_DIR "/mnt/data"

#define OPENAI_UPLOAD_MAX_DEFAULT (512ull << 20) /* `airlock serve --max-upload` */
#define OPENAI_EXPIRES_MINUTES_DEFAULT 20        /* OpenAI's default expires_after */
#define OPENAI_FILENAME_MAX 255

/* One error as OpenAI reports it. */
struct openai_error {
        unsigned status;  /* the HTTP status: 400, 404, 409, 413, 500, 503, 507 */
        const char *type; /* static: "invalid_request_error" (4xx) or "server_error" (5xx) */
        char param[64];   /* the request parameter at fault ("file_ids", "memory_limit"), or
                           * "" for none (null in JSON) */
        char code[32];    /* a machine-readable code ("not_found", "file_too_large"), or "" */
        char message[1024];
};

/* Fills err (when it is not NULL) and returns r (a -errno), so callers can write
 * `return openai_error_set(err, -EINVAL, 400, "name", "name must be a string");`. type follows
 * from status; param and code may be NULL. */
int openai_error_set(struct openai_error *err, int r, unsigned status, const char *param,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Sets err->code (copied) and returns r, for `return openai_error_code(err, r, "not_found");`
 * after openai_error_set(). */
int openai_error_code(struct openai_error *err, int r, const char *code);

/* {"error": {"message", "type", "param", "code"}} for err (param and code null when empty).
 * A new reference, NULL when out of memory. */
json_t *openai_error_json(const struct openai_error *err);

struct openai_config {
        struct session_manager *mgr; /* borrowed; must outlive the openai object */
        /* The daemon's state directory: uploads, the spool and openai.db go to its "openai"
         * subdirectory (made 0700), so that they survive a restart. */
        const char *state_dir;
        uint64_t upload_max; /* the largest file an upload may carry; 0 = 512 MiB */
};

/* Opens (or creates) the store under cfg->state_dir, removes what a crashed daemon left in the
 * spool, and forgets containers whose sessions are gone. Returns 0 or -errno with err set.
 * Free with openai_free(). */
int openai_new(const struct openai_config *cfg, struct openai **ret_oa, struct airlock_error *err);

/* Closes the store. Accepts NULL, returns NULL. */
struct openai *openai_free(struct openai *oa);

/* The largest file an upload may carry, in bytes. */
uint64_t openai_upload_max(const struct openai *oa);

/* ---- ids ---------------------------------------------------------------------------------- */

/* "cntr_<24 hex>" for the session id "s-<24 hex>", written to buf (NUL-terminated; size at
 * least OPENAI_CONTAINER_ID_MAX + 1). Returns 0, -EINVAL for a malformed session id, -ENOBUFS
 * when buf is too small. */
int openai_container_id(const char *session_id, char *buf, size_t size);

/* The reverse: "s-<24 hex>" for "cntr_<24 hex>" (size at least 27). Returns 0, -EINVAL for a
 * malformed container id (anything but "cntr_" and 24 lowercase hex characters), -ENOBUFS. */
int openai_session_id(const char *container_id, char *buf, size_t size);

/* ---- containers --------------------------------------------------------------------------- */

struct openai_container_options {
        const char *name; /* NULL = "" */
        char *const
                *file_ids; /* NULL-terminated "file-..." ids copied into /mnt/data; NULL = none */
        /* Idle this long (anchor "last_active_at"), the container's session stops (docs:
         * "expired"); 0 = OPENAI_EXPIRES_MINUTES_DEFAULT, capped at the daemon's longest
         * stop-after. Becomes the session's stop_after. */
        unsigned expires_after_minutes;
        /* "1g", "4g", "16g" or "64g", or NULL. Accepted when the profile's memory limit is at
         * least that much (the sandbox keeps the profile's limit), refused with 400 otherwise. */
        const char *memory_limit;
        const char *profile; /* NULL = "default" */
};

/* Makes a container: a new session of the profile, with the files of o->file_ids written to
 * /mnt/data/<filename> (source "user"). ret_id gets "cntr_...". Returns 0, or -errno with err:
 * 400 for a bad option (param names it: "name", "file_ids", "expires_after", "memory_limit";
 * an unknown profile has param "profile"), 404 for a file id that does not exist (param
 * "file_ids"), 503 at the session limit, 507 when the files do not fit. Nothing is left behind
 * on failure. */
int openai_container_create(struct openai *oa, const struct openai_container_options *o,
                            char ret_id[OPENAI_CONTAINER_ID_MAX + 1], struct openai_error *err);

/* The Container object {id, object: "container", created_at, status: "running"|"expired",
 * name, expires_after: {anchor: "last_active_at", minutes}, last_active_at, memory_limit (when
 * one was asked)} of a live or stopped container, never resuming it; NULL when there is no
 * such container (or container_id is malformed). New reference. */
json_t *openai_container_describe(struct openai *oa, const char *container_id);

/* The same, or -ENOENT with a 404 in err that says why (an unknown id, or the reason the
 * session ended), -EINVAL (404 too: a malformed id names no container). */
int openai_container_get(struct openai *oa, const char *container_id, json_t **ret_container,
                         struct openai_error *err);

/* A page of a list, as OpenAI's cursor pagination asks: at most limit items after the one
 * named by after, in created_at order (newest first unless ascending). */
struct openai_list_query {
        unsigned limit;      /* 1..100 for containers and container files, 1..10000 for files;
                              * 0 = the default (20, or 10000 for files) */
        const char *after;   /* an id of the list, or NULL */
        bool ascending;      /* order=asc */
        const char *name;    /* containers: only those with this name; NULL = all */
        const char *purpose; /* files: only those with this purpose; NULL = all */
};

/* {object: "list", data: [Container...], first_id, last_id, has_more} of the live and stopped
 * sessions. -EINVAL (400, param "after") when after names no container of the list. */
int openai_container_list(struct openai *oa, const struct openai_list_query *q, json_t **ret_list,
                          struct openai_error *err);

/* Destroys the container's session and everything recorded of it. *ret_deleted (may be NULL)
 * gets {id, object: "container.deleted", deleted: true}. Returns 0 or -ENOENT (404). */
int openai_container_delete(struct openai *oa, const char *container_id, json_t **ret_deleted,
                            struct openai_error *err);

/* ---- container files ---------------------------------------------------------------------- */
/* A container file object: {id: "cfile_...", object: "container.file", created_at, bytes,
 * container_id, path: "/mnt/data/<path in /work>", source: "user"|"assistant"}. Ids are stable:
 * a path keeps its id until the file is deleted through the API (or is gone when the container
 * is listed). Paths that are not valid UTF-8 are not listed. The calls that need the sandbox
 * resume a stopped container. */

/* Writes the file fd (size bytes from offset 0; borrowed) to /mnt/data/<filename> (replacing
 * a file of that name, which keeps its id) and records it with source "user". filename must
 * be a plain name: no '/', not "." or "..", no control characters, valid UTF-8, at most 255
 * bytes (400, param "file"). *ret_file gets the container file object. Returns 0 or -errno:
 * 404 for the container, 413 or 507 when the file does not fit. */
int openai_container_file_add(struct openai *oa, const char *container_id, const char *filename,
                              int fd, uint64_t size, json_t **ret_file, struct openai_error *err);

/* The same for a file of the Files API (copied, under its filename); 404 with param "file_id"
 * when there is no such file. */
int openai_container_file_copy(struct openai *oa, const char *container_id, const char *file_id,
                               json_t **ret_file, struct openai_error *err);

/* {object: "list", data: [container file...], first_id, last_id, has_more}: every regular file
 * under /work now, those made by code recorded on the way (source "assistant", created_at
 * their modification time). */
int openai_container_files(struct openai *oa, const char *container_id,
                           const struct openai_list_query *q, json_t **ret_list,
                           struct openai_error *err);

/* One container file object; 404 when the id is unknown or its file is gone. */
int openai_container_file_get(struct openai *oa, const char *container_id, const char *file_id,
                              json_t **ret_file, struct openai_error *err);

/* A read-only fd of the file's content (caller closes) and its size, to stream it. */
int openai_container_file_open(struct openai *oa, const char *container_id, const char *file_id,
                               int *ret_fd, uint64_t *ret_size, struct openai_error *err);

/* Deletes the file from /mnt/data and forgets its id. *ret_deleted (may be NULL) gets {id,
 * object: "container.file.deleted", deleted: true}. */
int openai_container_file_delete(struct openai *oa, const char *container_id, const char *file_id,
                                 json_t **ret_deleted, struct openai_error *err);

/* For the Responses API, after a cell ran: records the files of the execution's "files" array
 * ([{path, size, change: "created"|"modified"|"deleted"}], borrowed) and returns in
 * *ret_files a new array of the container file objects of those created or modified (a
 * path already known keeps its id and source; new ones are "assistant"), in the array's
 * order, so that an answer can cite them (container_file_citation: file_id = "id", filename =
 * the last component of "path", container_id). Deleted paths are forgotten. */
int openai_container_files_register(struct openai *oa, const char *container_id, json_t *exec_files,
                                    json_t **ret_files, struct openai_error *err);

/* ---- files (the Files API) ---------------------------------------------------------------- */
/* A File object: {id: "file-...", object: "file", bytes, created_at, filename, purpose,
 * status: "processed", expires_at: null}. */

/* The purposes OpenAI defines; anything else is refused (400, param "purpose"). */
bool openai_file_purpose_is_valid(const char *purpose);

/* Checks a client's filename (see openai_container_file_add). Returns 0, or -EINVAL with why
 * (static) set. */
int openai_filename_check(const char *name, const char **ret_why);

/* A new empty file in the store's spool (mode 0600, on the same filesystem as the store) for
 * an upload to stream into. *ret_path (caller frees) names it; the caller unlinks it when it
 * did not hand it over. Returns 0 or -errno. */
int openai_spool_new(struct openai *oa, int *ret_fd, char **ret_path);

/* Takes the spooled upload at spool_path (size bytes) into the store as a new file (it is
 * renamed: on success the path no longer exists). *ret_file gets the File object. Returns 0
 * or -errno: 400 for a bad filename (param "file") or purpose (param "purpose"), 413 over the
 * upload limit, 507 when the disk is full. */
int openai_file_create(struct openai *oa, const char *spool_path, uint64_t size,
                       const char *filename, const char *purpose, json_t **ret_file,
                       struct openai_error *err);

/* The File object; -ENOENT (404) when there is none. */
int openai_file_get(struct openai *oa, const char *file_id, json_t **ret_file,
                    struct openai_error *err);

/* A read-only fd of the file's bytes (caller closes), its size and (ret_file may be NULL) its
 * File object. */
int openai_file_open(struct openai *oa, const char *file_id, int *ret_fd, uint64_t *ret_size,
                     json_t **ret_file, struct openai_error *err);

/* Deletes the file; *ret_deleted (may be NULL) gets {id, object: "file", deleted: true}.
 * Containers that got a copy keep it. */
int openai_file_delete(struct openai *oa, const char *file_id, json_t **ret_deleted,
                       struct openai_error *err);

/* {object: "list", data: [File...], first_id, last_id, has_more}. */
int openai_file_list(struct openai *oa, const struct openai_list_query *q, json_t **ret_list,
                     struct openai_error *err);
