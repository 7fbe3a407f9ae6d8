/* The audit log (see audit.h): the file writer with its size-based rotation and failure state,
 * the optional syslog copy, and the per-thread scope that tells the layers below the HTTP
 * server whose request they serve. A line costs one json_dumps() and one write(2) of a few
 * hundred bytes under a mutex; nothing waits for the disk. */
#include "audit.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/utf8.h"
#include "metrics/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

struct audit {
        pthread_mutex_t lock;
        char *path;
        int fd;             /* -EBADF while the file cannot be opened */
        bool regular;       /* a regular file: rotated; a device (/dev/null) is not */
        uint64_t size;      /* bytes in the current file */
        uint64_t max_bytes; /* 0 = no rotation */
        unsigned keep;
        int facility; /* -1 = no syslog */
        bool code;
        enum audit_fail_mode fail;
        /* Under lock: lines are being lost since the last state change, and how many. */
        bool failing;
        int fail_errno; /* of the write that started the failure */
        uint64_t lost;
        atomic_bool failing_hint; /* failing, read without the lock by audit_check() */
        atomic_uint_fast64_t failures;
};

static _Thread_local const struct audit_scope *current_scope;

void audit_format_time(char *buf, size_t size)
{
        struct timespec ts;
        struct tm tm;
        char base[24];

        (void) clock_gettime(CLOCK_REALTIME, &ts);
        (void) gmtime_r(&ts.tv_sec, &tm);
        (void) strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
        (void) snprintf(buf, size, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

/* Opens path for appending. A FIFO would block the daemon and a directory or socket cannot
 * take lines: only regular files and character devices are accepted. */
static int open_log(const char *path, int *ret_fd, bool *ret_regular, struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);
        if (fd < 0)
                return airlock_error_set(err, -errno, "cannot open the audit log '%s': %s", path,
                                         strerror(errno));
        if (fstat(fd, &st) < 0)
                return airlock_error_set(err, -errno, "cannot stat the audit log '%s': %s", path,
                                         strerror(errno));
        if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
                return airlock_error_set(err, -EINVAL,
                                         "the audit log '%s' is not a regular file or a "
                                         "character device",
                                         path);
        /* The lines name tenants, sessions and code: nobody but the daemon reads them. */
        if (S_ISREG(st.st_mode) && (st.st_mode & 077) && fchmod(fd, 0600) < 0)
                return airlock_error_set(err, -errno, "cannot make the audit log '%s' 0600: %s",
                                         path, strerror(errno));
        if (fcntl(fd, F_SETFL, O_WRONLY | O_APPEND) < 0)
                return -errno;
        *ret_regular = S_ISREG(st.st_mode);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int audit_new(const struct audit_config *cfg, struct audit **ret_audit, struct airlock_error *err)
{
        struct audit *a;
        struct stat st;
        int r;

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        pthread_mutex_init(&a->lock, NULL);
        a->fd = -EBADF;
        a->max_bytes = cfg->max_bytes;
        a->keep = cfg->keep;
        a->facility = cfg->syslog_facility;
        a->code = cfg->code;
        a->fail = cfg->fail;
        if (cfg->path) {
                a->path = strdup(cfg->path);
                if (!a->path) {
                        audit_free(a);
                        return -ENOMEM;
                }
                r = open_log(a->path, &a->fd, &a->regular, err);
                if (r < 0) {
                        audit_free(a);
                        return r;
                }
                if (a->regular && fstat(a->fd, &st) == 0)
                        a->size = (uint64_t) st.st_size;
        }
        if (a->facility >= 0)
                openlog("airlock-audit", LOG_PID | LOG_NDELAY, a->facility);
        *ret_audit = a;
        return 0;
}

struct audit *audit_free(struct audit *a)
{
        if (!a)
                return NULL;
        if (a->fd >= 0) {
                /* The last lines reach the disk before the daemon says it stopped. */
                (void) fdatasync(a->fd);
                (void) close(a->fd);
        }
        if (a->facility >= 0)
                closelog();
        pthread_mutex_destroy(&a->lock);
        free(a->path);
        free(a);
        return NULL;
}

/* path.1 .. path.keep shift up by one (the oldest drops off), path becomes path.1 and a new
 * path is opened. Under the lock, so no writer sees a moment without a file. When the new file
 * cannot be made, lines go on into the old one (now path.1) rather than being lost. */
static void rotate_locked(struct audit *a)
{
        char from[PATH_MAX], to[PATH_MAX];
        int fd;

        if (a->keep == 0) {
                (void) unlink(a->path);
        } else {
                for (unsigned i = a->keep; i >= 1; i--) {
                        if (i == 1)
                                (void) snprintf(from, sizeof(from), "%s", a->path);
                        else
                                (void) snprintf(from, sizeof(from), "%s.%u", a->path, i - 1);
                        (void) snprintf(to, sizeof(to), "%s.%u", a->path, i);
                        if (rename(from, to) < 0 && errno != ENOENT)
                                log_warn("msg=\"audit: cannot rotate '%s' to '%s': %s\"", from, to,
                                         strerror(errno));
                }
        }
        fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
        if (fd < 0) {
                log_warn("msg=\"audit: cannot start a new '%s' after rotating: %s; writing on "
                         "into the rotated file\"",
                         a->path, strerror(errno));
                return;
        }
        (void) close(a->fd);
        a->fd = fd;
        a->size = 0;
}

/* One write of the whole line, or nothing: a partial write (the disk filled up in the middle)
 * is cut off again, so a reader never meets half a line. Returns 0 or -errno. */
static int write_locked(struct audit *a, const char *line, size_t len)
{
        size_t done = 0;

        if (a->fd < 0) {
                struct airlock_error err = { { 0 } };
                int r = open_log(a->path, &a->fd, &a->regular, &err);
                if (r < 0)
                        return r;
        }
        if (a->regular && a->max_bytes && a->size > 0 && a->size + len > a->max_bytes)
                rotate_locked(a);
        while (done < len) {
                ssize_t n = write(a->fd, line + done, len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int e = n < 0 ? errno : EIO;
                        if (done > 0 && a->regular)
                                (void) ftruncate(a->fd, (off_t) a->size);
                        return -e;
                }
                done += (size_t) n;
        }
        a->size += len;
        return 0;
}

static char *line_new(const char *event, const char *tenant, const char *session,
                      const char *request_id, json_t *fields)
{
        _cleanup_(json_decrefp) json_t *o = NULL;
        char when[40];
        char *text;

        audit_format_time(when, sizeof(when));
        o = json_pack("{s:s, s:s, s:s?, s:s?, s:s?}", "time", when, "event", event, "tenant",
                      tenant, "session", session, "request_id", request_id);
        if (!o)
                return NULL;
        if (fields && json_object_update(o, fields) < 0)
                return NULL;
        text = json_dumps(o, JSON_COMPACT);
        return text;
}

/* Free space a full disk must have again before lines are tried again: a disk that frees a few
 * bytes would otherwise take a short line, refuse the next long one, and flap. */
#define AUDIT_RESUME_ROOM (16u * 1024u)

/* After lines were lost, the first write that succeeds again starts with a line saying how
 * many: that line and line (may be NULL) go in one write, both or neither. Returns 0 when the
 * log is writable again. */
static int resume_locked(struct audit *a, const char *line, size_t len)
{
        _cleanup_(json_decrefp) json_t *fields = json_pack("{s:I}", "lost", (json_int_t) a->lost);
        _cleanup_free_ char *resumed = NULL, *both = NULL;
        struct statvfs sv;
        int r, n;

        if ((a->fail_errno == ENOSPC || a->fail_errno == EDQUOT) && a->fd >= 0 &&
            fstatvfs(a->fd, &sv) == 0 &&
            (uint64_t) sv.f_bavail * sv.f_frsize < AUDIT_RESUME_ROOM + len)
                return -a->fail_errno;
        resumed = line_new("audit.resumed", NULL, NULL, NULL, fields);
        if (!resumed)
                return -ENOMEM;
        n = asprintf(&both, "%s\n%.*s", resumed, (int) len, line ? line : "");
        if (n < 0)
                return -ENOMEM;
        r = write_locked(a, both, (size_t) n);
        if (r < 0)
                return r;
        log_warn("msg=\"audit: writing to '%s' again; %llu lines were lost\"", a->path,
                 (unsigned long long) a->lost);
        a->failing = false;
        a->lost = 0;
        atomic_store(&a->failing_hint, false);
        return 0;
}

static void lost_locked(struct audit *a, int r)
{
        a->lost++;
        atomic_fetch_add(&a->failures, 1);
        metrics_audit_failure();
        if (a->failing)
                return;
        a->fail_errno = -r;
        /* Said once per change of state: a full disk must not flood stderr too. */
        a->failing = true;
        atomic_store(&a->failing_hint, true);
        log_error_errno(
                r, "audit: cannot write to '%s'; audit lines are being lost and %s", a->path,
                a->fail == AUDIT_FAIL_REFUSE ? "executions are refused until it is writable "
                                               "(--audit-fail=refuse)"
                                             : "executions continue (--audit-fail=continue)");
}

void audit_emit(struct audit *a, const char *event, const char *tenant, const char *session,
                const char *request_id, json_t *fields)
{
        _cleanup_free_ char *line = NULL;
        size_t len;
        int r;

        if (!a) {
                json_decref(fields);
                return;
        }
        line = line_new(event, tenant, session, request_id, fields);
        json_decref(fields);
        if (!line) {
                atomic_fetch_add(&a->failures, 1);
                return;
        }
        if (a->facility >= 0)
                syslog(LOG_INFO, "%s", line);
        if (!a->path)
                return;
        len = strlen(line);
        line[len] = '\n'; /* json_dumps' NUL becomes the line's end; len + 1 bytes written */
        pthread_mutex_lock(&a->lock);
        r = a->failing ? resume_locked(a, line, len + 1) : write_locked(a, line, len + 1);
        if (r < 0)
                lost_locked(a, r);
        pthread_mutex_unlock(&a->lock);
}

void audit_scope_enter(const struct audit_scope *scope)
{
        current_scope = scope;
}

void audit_scope_leave(void)
{
        current_scope = NULL;
}

const struct audit_scope *audit_scope_current(void)
{
        return current_scope;
}

void audit_emit_owned(struct audit *a, const char *event, const char *owner, const char *session,
                      json_t *fields)
{
        const struct audit_scope *s = current_scope;
        const char *tenant = owner && *owner ? owner : "default";

        if (s && s->tenant)
                tenant = s->tenant;
        audit_emit(a, event, tenant, session, s ? s->request_id : NULL, fields);
}

void audit_emit_scoped(struct audit *a, const char *event, const char *session, json_t *fields)
{
        audit_emit_owned(a, event, NULL, session, fields);
}

int audit_check(struct audit *a, struct airlock_error *err)
{
        int r = 0;

        if (!a || a->fail != AUDIT_FAIL_REFUSE || !atomic_load(&a->failing_hint))
                return 0;
        pthread_mutex_lock(&a->lock);
        if (a->failing)
                r = resume_locked(a, NULL, 0);
        pthread_mutex_unlock(&a->lock);
        if (r >= 0)
                return 0;
        return airlock_error_set(err, -ESHUTDOWN,
                                 "executions are refused: the audit log '%s' cannot be written "
                                 "(%s) and the daemon runs with --audit-fail=refuse",
                                 a->path, strerror(-r));
}

bool audit_wants_code(const struct audit *a)
{
        return a && a->code;
}

uint64_t audit_write_failures(const struct audit *a)
{
        return a ? atomic_load(&((struct audit *) a)->failures) : 0;
}

int audit_reopen(struct audit *a)
{
        struct airlock_error err = { { 0 } };
        int fd = -EBADF, r;
        bool regular = false;
        struct stat st;

        if (!a || !a->path)
                return 0;
        r = open_log(a->path, &fd, &regular, &err);
        if (r < 0)
                return log_warn_errno(r, "audit: %s", err.msg);
        pthread_mutex_lock(&a->lock);
        if (a->fd >= 0)
                (void) close(a->fd);
        a->fd = fd;
        a->regular = regular;
        a->size = regular && fstat(fd, &st) == 0 ? (uint64_t) st.st_size : 0;
        pthread_mutex_unlock(&a->lock);
        return 0;
}

json_t *audit_string(const char *s)
{
        _cleanup_free_ char *clean = NULL;
        json_t *v;

        if (!s)
                return json_null();
        v = json_string(s);
        if (v)
                return v;
        clean = utf8_sanitize(s, strlen(s));
        return clean ? json_string(clean) : NULL;
}

int audit_add_code(const struct audit *a, json_t *fields, const char *code, size_t len)
{
        static const char hex[] = "0123456789abcdef";
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;
        char sha[2 * EVP_MAX_MD_SIZE + 1];
        size_t keep = len;
        json_t *text;

        if (!code)
                code = "", len = 0;
        if (!EVP_Digest(code, len, md, &md_len, EVP_sha256(), NULL))
                return -ENOMEM;
        for (unsigned i = 0; i < md_len; i++) {
                sha[2 * i] = hex[md[i] >> 4];
                sha[2 * i + 1] = hex[md[i] & 15];
        }
        sha[2 * md_len] = '\0';
        if (json_object_set_new(fields, "code_sha256", json_string(sha)) < 0)
                return -ENOMEM;
        if (!audit_wants_code(a))
                return 0;
        if (keep > AUDIT_CODE_MAX) {
                keep = AUDIT_CODE_MAX;
                /* Cut on a character boundary, not inside a UTF-8 sequence. */
                while (keep > 0 && ((unsigned char) code[keep] & 0xC0) == 0x80)
                        keep--;
                if (json_object_set_new(fields, "code_truncated", json_true()) < 0)
                        return -ENOMEM;
        }
        text = json_stringn(code, keep);
        if (!text) {
                _cleanup_free_ char *clean = utf8_sanitize(code, keep);
                text = clean ? json_string(clean) : NULL;
        }
        return json_object_set_new(fields, "code", text) < 0 ? -ENOMEM : 0;
}
