/* The openai object (its directories, its store) and what every part of src/openai shares:
 * ids, OpenAI-shaped errors, filenames, list pages, writing a stored file into a session. */
#include "openai-internal.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/utf8.h"
#include "session/session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- errors ---------------------------------------------------------------------------------- */

int openai_error_set(struct openai_error *err, int r, unsigned status, const char *param,
                     const char *fmt, ...)
{
        va_list ap;

        if (!err)
                return r;
        err->status = status;
        err->type = status >= 500 ? "server_error" : "invalid_request_error";
        (void) snprintf(err->param, sizeof(err->param), "%s", param ? param : "");
        err->code[0] = '\0';
        va_start(ap, fmt);
        (void) vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        return r;
}

int openai_error_code(struct openai_error *err, int r, const char *code)
{
        if (err)
                (void) snprintf(err->code, sizeof(err->code), "%s", code ? code : "");
        return r;
}

json_t *openai_error_json(const struct openai_error *err)
{
        /* Messages quote what clients sent (ids, names), which need not be UTF-8. */
        _cleanup_free_ char *msg = utf8_sanitize(err->message, strlen(err->message));
        _cleanup_free_ char *param = utf8_sanitize(err->param, strlen(err->param));

        if (!msg || !param)
                return NULL;
        return json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", msg, "type",
                         err->type ? err->type : "server_error", "param", *param ? param : NULL,
                         "code", err->code[0] ? err->code : NULL);
}

int openai_error_from_session(struct openai_error *err, int r, const char *container_id,
                              const char *msg)
{
        const char *m = msg && *msg ? msg : strerror(-r);

        switch (-r) {
        case ENOENT:
                return openai_error_code(err,
                                         openai_error_set(err, r, 404, NULL,
                                                          "No container found with id '%s'.",
                                                          container_id),
                                         "not_found");
        case EINVAL:
        case ENOTDIR:
        case EISDIR:
        case ELOOP:
        case ENAMETOOLONG:
                return openai_error_set(err, r, 400, NULL, "%s", m);
        case EBUSY:
                return openai_error_set(err, r, 409, NULL, "%s", m);
        case EFBIG:
        case E2BIG:
                return openai_error_set(err, r, 413, "file", "%s", m);
        case ENOSPC:
        case EDQUOT:
                return openai_error_set(err, r, 507, "file", "%s", m);
        case EXFULL:
                /* A tenant's quota (docs/TENANTS.md): OpenAI's own shape for a spent quota. */
                r = openai_error_set(err, r, 429, NULL, "%s", m);
                if (err)
                        err->type = "insufficient_quota";
                return openai_error_code(err, r, "insufficient_quota");
        case EACCES:
                /* A profile outside the tenant's list: a policy, not a quota to wait for. */
                return openai_error_code(err, openai_error_set(err, r, 403, NULL, "%s", m),
                                         "permission_denied");
        case EUSERS:
        case EMFILE:
        case EAGAIN:
        case ESHUTDOWN:
                return openai_error_set(err, r, 503, NULL, "%s", m);
        default:
                return openai_error_set(err, r, 500, NULL, "%s", m);
        }
}

/* ---- ids ------------------------------------------------------------------------------------ */

void openai_make_id(const char *prefix, char *buf)
{
        unsigned char raw[OPENAI_ID_HEX / 2];
        size_t n = strlen(prefix);

        if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
                /* Cannot fail for 12 bytes once the pool is ready; never guessable ids. */
                abort();
        memcpy(buf, prefix, n);
        for (size_t i = 0; i < sizeof(raw); i++)
                (void) snprintf(buf + n + 2 * i, 3, "%02x", raw[i]);
        (void) node_id_append(buf, n + OPENAI_ID_HEX + NODE_SUFFIX_MAX + 1);
}

static bool is_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

bool openai_id_is_valid(const char *id, const char *prefix)
{
        size_t n = strlen(prefix);

        char node[NODE_NAME_MAX + 1];

        /* The hex part, then "-NODE" or nothing (node-id.h). */
        return id && strncmp(id, prefix, n) == 0 &&
               node_id_split(id + n, OPENAI_ID_HEX, node) >= 0 && is_hex(id + n, OPENAI_ID_HEX);
}

int openai_container_id(const char *session_id, char *buf, size_t size)
{
        if (!openai_id_is_valid(session_id, "s-"))
                return -EINVAL;
        if (size < strlen(session_id) - 2 + strlen(OPENAI_CONTAINER_PREFIX) + 1)
                return -ENOBUFS;
        (void) snprintf(buf, size, OPENAI_CONTAINER_PREFIX "%s", session_id + 2);
        return 0;
}

int openai_session_id(const char *container_id, char *buf, size_t size)
{
        if (!openai_id_is_valid(container_id, OPENAI_CONTAINER_PREFIX))
                return -EINVAL;
        if (size < strlen(container_id) - strlen(OPENAI_CONTAINER_PREFIX) + 3)
                return -ENOBUFS;
        (void) snprintf(buf, size, "s-%s", container_id + strlen(OPENAI_CONTAINER_PREFIX));
        return 0;
}

long long openai_parse_time(const char *s)
{
        struct tm tm = { 0 };
        const char *end;

        if (!s)
                return 0;
        end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (!end || *end)
                return 0;
        return (long long) timegm(&tm);
}

/* ---- filenames and purposes ------------------------------------------------------------------ */

int openai_filename_check(const char *name, const char **ret_why)
{
        _cleanup_free_ char *clean = NULL;
        size_t n = name ? strlen(name) : 0;

        if (n == 0) {
                *ret_why = "the file has no name";
                return -EINVAL;
        }
        if (n > OPENAI_FILENAME_MAX) {
                *ret_why = "the file's name is longer than 255 bytes";
                return -EINVAL;
        }
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
                *ret_why = "'.' and '..' are not file names";
                return -EINVAL;
        }
        for (const unsigned char *p = (const unsigned char *) name; *p; p++) {
                if (*p == '/') {
                        *ret_why = "the file's name has a '/': give a plain name, the file goes "
                                   "to " OPENAI_DATA_DIR "/<name>";
                        return -EINVAL;
                }
                if (*p < 0x20 || *p == 0x7f) {
                        *ret_why = "the file's name has a control character";
                        return -EINVAL;
                }
        }
        clean = utf8_sanitize(name, n);
        if (!clean)
                return -ENOMEM;
        if (strcmp(clean, name) != 0) {
                *ret_why = "the file's name is not valid UTF-8";
                return -EINVAL;
        }
        return 0;
}

bool openai_file_purpose_is_valid(const char *purpose)
{
        static const char *const purposes[] = { "assistants", "batch",     "fine-tune",
                                                "vision",     "user_data", "evals" };

        for (size_t i = 0; purpose && i < ELEMENTSOF(purposes); i++)
                if (strcmp(purpose, purposes[i]) == 0)
                        return true;
        return false;
}

/* ---- list pages --------------------------------------------------------------------------------
 */

static int by_created_then_id(const void *a, const void *b)
{
        json_t *x = *(json_t *const *) a, *y = *(json_t *const *) b;
        json_int_t cx = json_integer_value(json_object_get(x, "created_at"));
        json_int_t cy = json_integer_value(json_object_get(y, "created_at"));

        if (cx != cy)
                return cx < cy ? -1 : 1;
        return strcmp(json_string_value(json_object_get(x, "id")),
                      json_string_value(json_object_get(y, "id")));
}

int openai_page(json_t *items, const struct openai_list_query *q, unsigned default_limit,
                unsigned max_limit, const char *what, json_t **ret_list, struct openai_error *err)
{
        _cleanup_free_ json_t **sorted = NULL;
        size_t n = json_array_size(items), start = 0, limit, end;
        json_t *data, *list;

        limit = q->limit ? q->limit : default_limit;
        if (limit > max_limit)
                return openai_error_set(err, -EINVAL, 400, "limit",
                                        "limit must be an integer from 1 to %u", max_limit);
        sorted = calloc(n ? n : 1, sizeof(*sorted));
        if (!sorted)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                sorted[i] = json_array_get(items, i);
        qsort(sorted, n, sizeof(*sorted), by_created_then_id);
        if (!q->ascending)
                for (size_t i = 0; i < n / 2; i++) {
                        json_t *t = sorted[i];
                        sorted[i] = sorted[n - 1 - i];
                        sorted[n - 1 - i] = t;
                }
        if (q->after) {
                while (start < n &&
                       strcmp(json_string_value(json_object_get(sorted[start], "id")), q->after))
                        start++;
                if (start == n)
                        return openai_error_set(err, -EINVAL, 400, "after",
                                                "after: '%.100s' is not the id of a %s in this "
                                                "list",
                                                q->after, what);
                start++;
        }
        end = n - start > limit ? start + limit : n;
        data = json_array();
        for (size_t i = start; data && i < end; i++)
                json_array_append(data, sorted[i]);
        list = json_pack("{s:s, s:o, s:O?, s:O?, s:b}", "object", "list", "data", data, "first_id",
                         end > start ? json_object_get(sorted[start], "id") : NULL, "last_id",
                         end > start ? json_object_get(sorted[end - 1], "id") : NULL, "has_more",
                         end < n);
        if (!list)
                return -ENOMEM;
        *ret_list = list;
        return 0;
}

int openai_check_upload(struct openai *oa, uint64_t size, struct openai_error *err)
{
        if (size <= oa->upload_max)
                return 0;
        return openai_error_code(err,
                                 openai_error_set(err, -EFBIG, 413, "file",
                                                  "the file (%llu bytes) is larger than the upload "
                                                  "limit of %llu bytes (airlock serve "
                                                  "--max-upload)",
                                                  (unsigned long long) size,
                                                  (unsigned long long) oa->upload_max),
                                 "file_too_large");
}

/* ---- files into sessions -----------------------------------------------------------------------
 */

int openai_write_to_session(struct session *s, const char *container_id, const char *path, int fd,
                            uint64_t size, struct openai_error *err)
{
        struct airlock_error aerr = { { 0 } };
        void *data = NULL;
        int r;

        /* Mapped, not read: the file's pages come from the page cache and go down the runner's
         * pipe, so a large upload costs the daemon no heap. */
        if (size > 0) {
                data = mmap(NULL, (size_t) size, PROT_READ, MAP_PRIVATE, fd, 0);
                if (data == MAP_FAILED)
                        return openai_error_set(err, -errno, 500, NULL,
                                                "cannot read the stored file: %s", strerror(errno));
        }
        r = session_file_write(s, path, data ? data : "", (size_t) size, &aerr);
        if (data)
                (void) munmap(data, (size_t) size);
        if (r == -EISDIR)
                return openai_error_set(err, r, 409, "file",
                                        "%s/%s is a directory in container %s: delete it or "
                                        "use another name",
                                        OPENAI_DATA_DIR, path, container_id);
        if (r < 0)
                return openai_error_from_session(err, r, container_id, aerr.msg);
        return 0;
}

/* ---- the object --------------------------------------------------------------------------------
 */

static int make_dir(const char *path, struct airlock_error *err)
{
        struct stat st;

        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return airlock_error_set(err, -errno, "cannot create '%s': %m", path);
        if (lstat(path, &st) < 0)
                return airlock_error_set(err, -errno, "cannot use '%s': %m", path);
        if (!S_ISDIR(st.st_mode))
                return airlock_error_set(err, -ENOTDIR, "'%s' is not a directory", path);
        return 0;
}

/* Removes the entries of dir that keep(name) refuses: a crashed daemon's partial uploads in
 * the spool, stored files whose row was never written. Only plain names, never a walk. */
static void sweep(struct openai *oa, const char *dir, bool (*keep)(struct openai *, const char *))
{
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        struct dirent *de;
        DIR *d;

        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d)
                return;
        fd = -EBADF; /* owned by d */
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (keep && keep(oa, de->d_name))
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) < 0)
                        log_warn("msg=\"cannot remove '%s/%s': %m\"", dir, de->d_name);
        }
        closedir(d);
}

static bool file_has_row(struct openai *oa, const char *name)
{
        json_t *row = db_query_one(oa, "SELECT id FROM files WHERE id = ?1", "s", name);
        bool has = row != NULL;

        json_decref(row);
        return has;
}

/* Containers whose sessions were deleted while no daemon was watching (or by another route)
 * are forgotten, so that ids and names do not pile up. */
static void forget_gone_containers(struct openai *oa)
{
        json_t *rows = db_query(oa,
                                "SELECT session_id FROM containers UNION "
                                "SELECT DISTINCT session_id FROM container_files",
                                "");
        size_t i;
        json_t *row;

        json_array_foreach (rows, i, row) {
                const char *sid = json_string_value(json_object_get(row, "session_id"));
                json_t *desc = sid ? session_describe_id(oa->mgr, sid) : NULL;

                if (sid && !desc)
                        container_forget(oa, sid);
                json_decref(desc);
        }
        json_decref(rows);
}

int openai_new(const struct openai_config *cfg, struct openai **ret_oa, struct airlock_error *err)
{
        struct openai *oa;
        int r;

        if (!cfg->mgr || !cfg->state_dir)
                return airlock_error_set(err, -EINVAL,
                                         "the openai layer needs sessions and a "
                                         "state directory");
        oa = calloc(1, sizeof(*oa));
        if (!oa)
                return -ENOMEM;
        pthread_mutex_init(&oa->db_lock, NULL);
        oa->mgr = cfg->mgr;
        oa->upload_max = cfg->upload_max ? cfg->upload_max : OPENAI_UPLOAD_MAX_DEFAULT;
        if (asprintf(&oa->dir, "%s/openai", cfg->state_dir) < 0 ||
            asprintf(&oa->files_dir, "%s/files", oa->dir) < 0 ||
            asprintf(&oa->spool_dir, "%s/spool", oa->dir) < 0) {
                openai_free(oa);
                return -ENOMEM;
        }
        r = make_dir(oa->dir, err);
        if (r >= 0)
                r = make_dir(oa->files_dir, err);
        if (r >= 0)
                r = make_dir(oa->spool_dir, err);
        if (r >= 0)
                r = db_open(oa, err);
        if (r < 0) {
                openai_free(oa);
                return r;
        }
        sweep(oa, oa->spool_dir, NULL);
        sweep(oa, oa->files_dir, file_has_row);
        forget_gone_containers(oa);
        *ret_oa = oa;
        return 0;
}

struct openai *openai_free(struct openai *oa)
{
        if (!oa)
                return NULL;
        db_close(oa);
        pthread_mutex_destroy(&oa->db_lock);
        free(oa->dir);
        free(oa->files_dir);
        free(oa->spool_dir);
        free(oa);
        return NULL;
}

uint64_t openai_upload_max(const struct openai *oa)
{
        return oa->upload_max;
}

int openai_spool_new(struct openai *oa, int *ret_fd, char **ret_path)
{
        _cleanup_free_ char *path = NULL;
        int fd;

        if (asprintf(&path, "%s/up-XXXXXX", oa->spool_dir) < 0)
                return -ENOMEM;
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        *ret_path = TAKE_PTR(path);
        return 0;
}
