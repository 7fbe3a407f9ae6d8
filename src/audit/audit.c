/* The audit log (see audit.h): the queue that takes lines off the request path, the writer
 * thread that turns them into JSON and writes them in batches, the file with its size-based
 * rotation and failure state, the optional syslog copy, and the per-thread scope that tells the
 * layers below the HTTP server whose request they serve. An event costs its emitter one
 * allocation, a copy of its fields and a mutex held for a list append; the JSON and the write(2)
 * are the writer's. */
#include "audit.h"

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"
#include "metrics/metrics.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* Lines waiting for the writer at most. An emitter past it waits for room (backpressure): a
 * stalled disk slows requests down as a synchronous write would, and no line is dropped. */
#define AUDIT_QUEUE_MAX 1024u
/* The writer goes at once, without waiting out AUDIT_FLUSH_MS, when this many lines wait. */
#define AUDIT_BATCH_LINES 256u

/* One event as audit_emit() took it, in one allocation; the writer makes its JSON. */
struct entry {
        struct entry *next;
        struct timespec when;
        const char *fields; /* flat (see flat_put()), into text; NULL = none */
        const char *event, *tenant, *session, *request_id; /* into text; NULL = null */
        char text[];
};

struct audit {
        /* The queue, under qlock: emitters append, the writer takes the whole list. */
        pthread_mutex_t qlock;
        pthread_cond_t wake;  /* for the writer: a first line, a full batch, a flush, the end */
        pthread_cond_t moved; /* for emitters waiting for room and flushers for their lines */
        struct entry *head, **tail;
        unsigned queued;
        uint64_t first_ns;          /* CLOCK_MONOTONIC when the oldest queued line came */
        uint64_t enqueued, handled; /* lines queued, and lines written or lost, since the start */
        uint64_t flush_to;          /* audit_flush() waits until handled reaches it */
        bool writer_idle;           /* waiting for a first line, not out a window */
        bool stopping;
        bool behind; /* an emitter waited for room: said once until the writer caught up */
        pthread_t writer;
        bool has_writer;

        /* The file, under lock: held by the writer for a batch, by audit_check() and
         * audit_reopen(). */
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

        /* The writer's own: a batch's lines, and where each ends (AUDIT_QUEUE_MAX of them). */
        struct buf out;
        size_t *ends;

        EVP_MD *sha256; /* fetched once: EVP_sha256() looks it up again at every digest */
};

static _Thread_local const struct audit_scope *current_scope;

static void *writer_main(void *userdata);

static void format_time(const struct timespec *ts, char *buf, size_t size)
{
        struct tm tm;
        char base[24];

        (void) gmtime_r(&ts->tv_sec, &tm);
        (void) strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
        (void) snprintf(buf, size, "%s.%03ldZ", base, ts->tv_nsec / 1000000);
}

void audit_format_time(char *buf, size_t size)
{
        struct timespec ts;

        (void) clock_gettime(CLOCK_REALTIME, &ts);
        format_time(&ts, buf, size);
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

/* The fields of an event cross to the writer flat, in the event's one allocation, rather than
 * as jansson values: those are freed by the thread that made them. Freed in the writer, they
 * would drain the emitting thread's malloc caches, and its next allocations would fetch memory
 * from the writer's core (measured: 3 times the cost of making them). The encoding: a type
 * byte, then for a string its length and bytes, for an integer or a real its 8 bytes, for an
 * array or an object its count and members (an object's: key length, key bytes, value);
 * lengths and counts are size_t, copied with memcpy (no alignment). */
enum {
        FLAT_NULL,
        FLAT_TRUE,
        FLAT_FALSE,
        FLAT_INT,
        FLAT_REAL,
        FLAT_STRING,
        FLAT_ARRAY,
        FLAT_OBJECT
};

static size_t flat_size(const json_t *v)
{
        size_t n = 1, i;
        json_t *m;

        switch (json_typeof(v)) {
        case JSON_INTEGER:
        case JSON_REAL:
                return n + 8;
        case JSON_STRING:
                return n + sizeof(size_t) + json_string_length(v);
        case JSON_ARRAY:
                n += sizeof(size_t);
                json_array_foreach ((json_t *) v, i, m)
                        n += flat_size(m);
                return n;
        case JSON_OBJECT:
                n += sizeof(size_t);
                for (void *it = json_object_iter((json_t *) v); it;
                     it = json_object_iter_next((json_t *) v, it))
                        n += sizeof(size_t) + json_object_iter_key_len(it) +
                             flat_size(json_object_iter_value(it));
                return n;
        case JSON_TRUE:
        case JSON_FALSE:
        case JSON_NULL:
                break;
        }
        return n;
}

static char *flat_put_bytes(char *p, const void *data, size_t len)
{
        memcpy(p, &len, sizeof(len));
        memcpy(p + sizeof(len), data, len);
        return p + sizeof(len) + len;
}

/* Writes v at p (flat_size(v) bytes); returns the end. */
static char *flat_put(char *p, const json_t *v)
{
        size_t n, i;
        json_int_t iv;
        double rv;
        json_t *m;

        switch (json_typeof(v)) {
        case JSON_INTEGER:
                *p++ = FLAT_INT;
                iv = json_integer_value(v);
                memcpy(p, &iv, 8);
                return p + 8;
        case JSON_REAL:
                *p++ = FLAT_REAL;
                rv = json_real_value(v);
                memcpy(p, &rv, 8);
                return p + 8;
        case JSON_STRING:
                *p++ = FLAT_STRING;
                return flat_put_bytes(p, json_string_value(v), json_string_length(v));
        case JSON_ARRAY:
                *p++ = FLAT_ARRAY;
                n = json_array_size(v);
                memcpy(p, &n, sizeof(n));
                p += sizeof(n);
                json_array_foreach ((json_t *) v, i, m)
                        p = flat_put(p, m);
                return p;
        case JSON_OBJECT:
                *p++ = FLAT_OBJECT;
                n = json_object_size(v);
                memcpy(p, &n, sizeof(n));
                p += sizeof(n);
                for (void *it = json_object_iter((json_t *) v); it;
                     it = json_object_iter_next((json_t *) v, it))
                        p = flat_put(flat_put_bytes(p, json_object_iter_key(it),
                                                    json_object_iter_key_len(it)),
                                     json_object_iter_value(it));
                return p;
        case JSON_TRUE:
                *p++ = FLAT_TRUE;
                return p;
        case JSON_FALSE:
                *p++ = FLAT_FALSE;
                return p;
        case JSON_NULL:
                break;
        }
        *p++ = FLAT_NULL;
        return p;
}

static size_t flat_get_size(const char **p)
{
        size_t n;

        memcpy(&n, *p, sizeof(n));
        *p += sizeof(n);
        return n;
}

/* The writer writes the lines as json_dump_text(JSON_COMPACT) does, byte for byte
 * (tests/unit/test-audit.c compares them), straight from the flat fields: no jansson values
 * are made again, nor freed. */

static int put(struct buf *b, const char *p, size_t n)
{
        return buf_append(b, p, n, SIZE_MAX);
}

/* A JSON string of s[0, len), valid UTF-8: '"', '\' and control characters escaped. */
static int put_string(struct buf *b, const char *s, size_t len)
{
        static const char hex[] = "0123456789ABCDEF", controls[] = "\b\f\n\r\t", names[] = "bfnrt";
        const char *named;
        size_t done = 0;

        if (put(b, "\"", 1) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];
                char esc[6] = { '\\', (char) c, 0 };
                size_t n = 2;

                if (c >= 0x20 && c != '"' && c != '\\')
                        continue;
                named = memchr(controls, c, sizeof(controls) - 1);
                if (named) {
                        esc[1] = names[named - controls];
                } else if (c != '"' && c != '\\') {
                        memcpy(esc, "\\u00", 4);
                        esc[4] = hex[c >> 4];
                        esc[5] = hex[c & 15];
                        n = 6;
                }
                if (put(b, s + done, i - done) < 0 || put(b, esc, n) < 0)
                        return -ENOMEM;
                done = i + 1;
        }
        return put(b, s + done, len - done) < 0 || put(b, "\"", 1) < 0 ? -ENOMEM : 0;
}

/* A string that did not come from a jansson value (a tenant name, an id): made valid UTF-8 if
 * need be. NULL: null. */
static int put_text(struct buf *b, const char *s)
{
        _cleanup_free_ char *clean = NULL;

        if (!s)
                return put(b, "null", 4);
        if (utf8_is_valid(s, strlen(s)))
                return put_string(b, s, strlen(s));
        clean = utf8_sanitize(s, strlen(s));
        return clean ? put_string(b, clean, strlen(clean)) : -ENOMEM;
}

/* A real as json_dump_text() writes it: the shortest text that reads back as v. */
static int put_real(struct buf *b, double v)
{
        char text[JSON_REAL_TEXT_MAX];
        size_t n = json_real_text(v, text);

        return put(b, text, n);
}

static int flat_dump(struct buf *b, const char **p);

/* The members of the flat object at *p as "key":value, comma-separated; with comma, the first
 * one too is preceded by a comma. */
static int flat_dump_members(struct buf *b, const char **p, bool comma)
{
        size_t n = flat_get_size(p);

        for (size_t i = 0; i < n; i++) {
                size_t len = flat_get_size(p);
                const char *key = *p;

                *p += len;
                if (((i > 0 || comma) && put(b, ",", 1) < 0) || put_string(b, key, len) < 0 ||
                    put(b, ":", 1) < 0 || flat_dump(b, p) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* The JSON text of the flat value at *p, which moves past it. */
static int flat_dump(struct buf *b, const char **p)
{
        char num[32];
        json_int_t iv;
        double rv;
        size_t n;
        int r;

        switch (*(*p)++) {
        case FLAT_TRUE:
                return put(b, "true", 4);
        case FLAT_FALSE:
                return put(b, "false", 5);
        case FLAT_INT:
                memcpy(&iv, *p, 8);
                *p += 8;
                r = snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, iv);
                return put(b, num, (size_t) r);
        case FLAT_REAL:
                memcpy(&rv, *p, 8);
                *p += 8;
                return put_real(b, rv);
        case FLAT_STRING:
                n = flat_get_size(p);
                r = put_string(b, *p, n);
                *p += n;
                return r;
        case FLAT_ARRAY:
                n = flat_get_size(p);
                if (put(b, "[", 1) < 0)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++)
                        if ((i > 0 && put(b, ",", 1) < 0) || flat_dump(b, p) < 0)
                                return -ENOMEM;
                return put(b, "]", 1);
        case FLAT_OBJECT:
                if (put(b, "{", 1) < 0 || flat_dump_members(b, p, false) < 0)
                        return -ENOMEM;
                return put(b, "}", 1);
        default:
                return put(b, "null", 4);
        }
}

/* Appends one event's line, '\n' included, to b: {"time", "event", "tenant", "session",
 * "request_id", ...the members of fields} (a flat object, or NULL). Returns 0, or -ENOMEM with
 * b as it was. */
static int line_append(struct buf *b, const struct timespec *when, const char *event,
                       const char *tenant, const char *session, const char *request_id,
                       const char *fields)
{
        static const char *const names[] = { ",\"event\":", ",\"tenant\":", ",\"session\":",
                                             ",\"request_id\":" };
        const char *values[] = { event, tenant, session, request_id };
        size_t was = b->len;
        char time[40];
        int r;

        format_time(when, time, sizeof(time));
        r = put(b, "{\"time\":", 8) < 0 || put_string(b, time, strlen(time)) < 0 ? -ENOMEM : 0;
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(names); i++)
                if (put(b, names[i], strlen(names[i])) < 0 || put_text(b, values[i]) < 0)
                        r = -ENOMEM;
        if (r == 0 && fields && *fields++ == FLAT_OBJECT)
                r = flat_dump_members(b, &fields, true);
        if (r == 0 && put(b, "}\n", 2) == 0)
                return 0;
        b->len = was;
        if (b->data)
                b->data[was] = '\0';
        return -ENOMEM;
}

/* The lines that end in data[0, len). */
static size_t count_lines(const char *data, size_t len)
{
        const char *p = data, *end = data + len;
        size_t n = 0;

        while (p < end && (p = memchr(p, '\n', (size_t) (end - p)))) {
                n++;
                p++;
        }
        return n;
}

int audit_new(const struct audit_config *cfg, struct audit **ret_audit, struct airlock_error *err)
{
        struct audit *a;
        struct stat st;
        sigset_t all, old;
        int r;

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        pthread_mutex_init(&a->qlock, NULL);
        pthread_mutex_init(&a->lock, NULL);
        pthread_cond_init(&a->wake, NULL);
        pthread_cond_init(&a->moved, NULL);
        a->tail = &a->head;
        a->fd = -EBADF;
        a->max_bytes = cfg->max_bytes;
        a->keep = cfg->keep;
        a->facility = cfg->syslog_facility;
        a->code = cfg->code;
        a->fail = cfg->fail;
        /* NULL (no default provider?) falls back to EVP_sha256() at every digest. */
        a->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
        a->ends = calloc(AUDIT_QUEUE_MAX, sizeof(*a->ends));
        if (!a->ends) {
                audit_free(a);
                return -ENOMEM;
        }
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
        /* The writer takes no signal: the daemon waits for its own in sigwait() (serve.c), and
         * a thread that could take one would steal it. */
        (void) sigfillset(&all);
        (void) pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&a->writer, NULL, writer_main, a);
        (void) pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                audit_free(a);
                return airlock_error_set(err, r, "cannot start the audit log's writer: %s",
                                         strerror(-r));
        }
        a->has_writer = true;
        (void) pthread_setname_np(a->writer, "airlock-audit");
        *ret_audit = a;
        return 0;
}

struct audit *audit_free(struct audit *a)
{
        if (!a)
                return NULL;
        if (a->has_writer) {
                /* The writer drains the queue before it ends: no line emitted before this call
                 * is lost. */
                pthread_mutex_lock(&a->qlock);
                a->stopping = true;
                pthread_cond_signal(&a->wake);
                pthread_mutex_unlock(&a->qlock);
                (void) pthread_join(a->writer, NULL);
        }
        if (a->fd >= 0) {
                /* The last lines reach the disk before the daemon says it stopped. */
                (void) fdatasync(a->fd);
                (void) close(a->fd);
        }
        if (a->facility >= 0)
                closelog();
        pthread_cond_destroy(&a->moved);
        pthread_cond_destroy(&a->wake);
        pthread_mutex_destroy(&a->lock);
        pthread_mutex_destroy(&a->qlock);
        buf_done(&a->out);
        free(a->ends);
        EVP_MD_free(a->sha256);
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

/* One write of data[0, len), whole lines, after rotating when they would take the file past
 * max_bytes. A write cut short (the disk filled up in the middle) is cut back to its last whole
 * line, so a reader never meets half a line. *ret_kept: the bytes that stay in the file.
 * Returns 0 or -errno. */
static int append_locked(struct audit *a, const char *data, size_t len, size_t *ret_kept)
{
        size_t done = 0;

        *ret_kept = 0;
        if (a->fd < 0) {
                struct airlock_error err = { { 0 } };
                struct stat st;
                int r = open_log(a->path, &a->fd, &a->regular, &err);
                if (r < 0)
                        return r;
                a->size = a->regular && fstat(a->fd, &st) == 0 ? (uint64_t) st.st_size : 0;
        }
        if (a->regular && a->max_bytes && a->size > 0 && a->size + len > a->max_bytes)
                rotate_locked(a);
        while (done < len) {
                ssize_t n = write(a->fd, data + done, len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int e = n < 0 ? errno : EIO;
                        const char *nl = done ? memrchr(data, '\n', done) : NULL;
                        size_t keep = nl ? (size_t) (nl - data) + 1 : 0;

                        if (keep < done && a->regular)
                                (void) ftruncate(a->fd, (off_t) (a->size + keep));
                        a->size += keep;
                        *ret_kept = keep;
                        return -e;
                }
                done += (size_t) n;
        }
        a->size += len;
        *ret_kept = len;
        return 0;
}

/* Free space a full disk must have again before lines are tried again: a disk that frees a few
 * bytes would otherwise take a short line, refuse the next long one, and flap. */
#define AUDIT_RESUME_ROOM (16u * 1024u)

/* While lines are being lost: a line saying how many, then data[0, len) (whole lines, may be
 * empty), in one write. The log works again once that first line is in. *ret_lines: the lines
 * of data written. Returns 0 or -errno. */
static int resume_locked(struct audit *a, const char *data, size_t len, size_t *ret_lines)
{
        _cleanup_(json_decrefp) json_t *fields = NULL;
        _cleanup_(buf_done) struct buf both = { 0 };
        char flat[64];
        struct statvfs sv;
        struct timespec now;
        size_t head, kept = 0;
        int r;

        *ret_lines = 0;
        if ((a->fail_errno == ENOSPC || a->fail_errno == EDQUOT) && a->fd >= 0 &&
            fstatvfs(a->fd, &sv) == 0 &&
            (uint64_t) sv.f_bavail * sv.f_frsize < AUDIT_RESUME_ROOM + len)
                return -a->fail_errno;
        fields = json_pack("{s:I}", "lost", (json_int_t) a->lost);
        if (!fields)
                return -ENOMEM;
        assert(flat_size(fields) <= sizeof(flat));
        (void) flat_put(flat, fields);
        (void) clock_gettime(CLOCK_REALTIME, &now);
        if (line_append(&both, &now, "audit.resumed", NULL, NULL, NULL, flat) < 0)
                return -ENOMEM;
        head = both.len;
        if (len > 0 && buf_append(&both, data, len, SIZE_MAX) < 0)
                return -ENOMEM;
        r = append_locked(a, both.data, both.len, &kept);
        if (kept < head)
                return r;
        log_warn("msg=\"audit: writing to '%s' again; %llu lines were lost\"", a->path,
                 (unsigned long long) a->lost);
        a->failing = false;
        a->lost = 0;
        atomic_store(&a->failing_hint, false);
        *ret_lines = count_lines(both.data + head, kept - head);
        return r;
}

/* n lines could not be written: counted, and said once per change of state. */
static void lost_locked(struct audit *a, size_t n, int r)
{
        if (n == 0)
                return;
        a->lost += n;
        atomic_fetch_add(&a->failures, n);
        for (size_t i = 0; i < n; i++)
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

/* A batch's n lines (line i ends at ends[i] in data) into the file: one write, or one per file
 * when the batch crosses a rotation, so that no line is split between files. */
static void write_lines_locked(struct audit *a, const char *data, const size_t *ends, size_t n)
{
        size_t i = 0;

        while (i < n) {
                size_t start = i ? ends[i - 1] : 0, j = n, kept = 0;
                int r;

                if (a->regular && a->max_bytes) {
                        /* The lines that fit into the current file, or into the next one when
                         * even the first would take the current past max_bytes. */
                        uint64_t size = a->size;

                        if (size > 0 && size + (ends[i] - start) > a->max_bytes)
                                size = 0;
                        for (j = i + 1; j < n && size + (ends[j] - start) <= a->max_bytes; j++)
                                ;
                }
                if (a->failing) {
                        r = resume_locked(a, data + start, ends[j - 1] - start, &kept);
                } else {
                        r = append_locked(a, data + start, ends[j - 1] - start, &kept);
                        kept = count_lines(data + start, kept);
                }
                if (r < 0)
                        lost_locked(a, (j - i) - kept, r);
                i = j;
        }
}

/* One batch, in the writer: the lines made, written, then sent to syslog; the entries freed. */
static void write_batch(struct audit *a, struct entry *batch)
{
        size_t n = 0, unmade = 0;

        a->out.len = 0;
        for (struct entry *e = batch, *next; e; e = next) {
                next = e->next;
                assert(n < AUDIT_QUEUE_MAX); /* a batch is at most what the queue holds */
                if (line_append(&a->out, &e->when, e->event, e->tenant, e->session, e->request_id,
                                e->fields) == 0)
                        a->ends[n++] = a->out.len;
                else
                        unmade++;
                free(e);
        }
        if (a->path) {
                pthread_mutex_lock(&a->lock);
                lost_locked(a, unmade, -ENOMEM);
                write_lines_locked(a, a->out.data, a->ends, n);
                pthread_mutex_unlock(&a->lock);
        } else {
                atomic_fetch_add(&a->failures, unmade);
                for (size_t i = 0; i < unmade; i++)
                        metrics_audit_failure();
        }
        for (size_t i = 0; a->facility >= 0 && i < n; i++) {
                size_t start = i ? a->ends[i - 1] : 0;
                syslog(LOG_INFO, "%.*s", (int) (a->ends[i] - start - 1), a->out.data + start);
        }
        /* A batch of long code texts must not keep its megabytes. */
        if (a->out.size > (1u << 20))
                buf_done(&a->out);
}

/* Waits until the monotonic time until (ns) for more lines; returns at once for a full batch,
 * a flush or the end. */
static void wait_window_locked(struct audit *a, uint64_t until)
{
        struct timespec ts = { .tv_sec = (time_t) (until / 1000000000u),
                               .tv_nsec = (long) (until % 1000000000u) };

        while (!a->stopping && a->queued < AUDIT_BATCH_LINES && a->flush_to <= a->handled)
                if (pthread_cond_clockwait(&a->wake, &a->qlock, CLOCK_MONOTONIC, &ts) == ETIMEDOUT)
                        break;
}

/* The writer gathers lines for a window of AUDIT_FLUSH_MS before it writes them, so that a
 * busy daemon pays one wake-up and one write per batch rather than per line. The window
 * starts at the first line of an idle log, whose emitter wakes the writer, or at the end of
 * the last batch: while lines keep coming, no emitter needs to wake it. */
static void *writer_main(void *userdata)
{
        struct audit *a = userdata;
        bool busy = false; /* a batch was just written: more lines are likely */

        pthread_mutex_lock(&a->qlock);
        for (;;) {
                struct entry *batch;
                unsigned n;

                while (!busy && !a->head && !a->stopping) {
                        a->writer_idle = true;
                        pthread_cond_wait(&a->wake, &a->qlock);
                }
                a->writer_idle = false;
                if (!a->head && a->stopping)
                        break; /* every line is written */
                wait_window_locked(a, (a->head ? a->first_ns : now_ns()) +
                                              AUDIT_FLUSH_MS * 1000000ull);
                busy = a->head != NULL;
                if (!busy)
                        continue; /* a window without a line: idle */
                batch = a->head;
                n = a->queued;
                a->head = NULL;
                a->tail = &a->head;
                a->queued = 0;
                pthread_cond_broadcast(&a->moved); /* room for emitters that wait */
                pthread_mutex_unlock(&a->qlock);

                write_batch(a, batch);

                pthread_mutex_lock(&a->qlock);
                a->handled += n;
                if (a->behind && !a->head) {
                        a->behind = false;
                        log_warn("msg=\"audit: the writer caught up; requests no longer wait "
                                 "for it\"");
                }
                pthread_cond_broadcast(&a->moved); /* flushers */
        }
        pthread_mutex_unlock(&a->qlock);
        return NULL;
}

/* The event in one allocation: its strings copied, its fields (borrowed) made flat. */
static struct entry *entry_new(const char *event, const char *tenant, const char *session,
                               const char *request_id, const json_t *fields)
{
        const char *src[4] = { event, tenant, session, request_id };
        size_t len[4], flat = fields ? flat_size(fields) : 0, total = flat;
        struct entry *e;
        char *p;

        for (size_t i = 0; i < 4; i++) {
                len[i] = src[i] ? strlen(src[i]) + 1 : 0;
                total += len[i];
        }
        e = malloc(sizeof(*e) + total);
        if (!e)
                return NULL;
        (void) clock_gettime(CLOCK_REALTIME, &e->when);
        e->next = NULL;
        e->fields = fields ? e->text : NULL;
        p = fields ? flat_put(e->text, fields) : e->text;
        {
                const char **dst[4] = { &e->event, &e->tenant, &e->session, &e->request_id };
                for (size_t i = 0; i < 4; i++) {
                        *dst[i] = src[i] ? memcpy(p, src[i], len[i]) : NULL;
                        p += len[i];
                }
        }
        return e;
}

void audit_emit(struct audit *a, const char *event, const char *tenant, const char *session,
                const char *request_id, json_t *fields)
{
        struct entry *e;

        if (!a) {
                json_decref(fields);
                return;
        }
        /* fields not an object is a caller's bug: no line can be made of it. */
        e = fields && !json_is_object(fields)
                    ? NULL
                    : entry_new(event, tenant, session, request_id, fields);
        json_decref(fields);
        if (!e) {
                atomic_fetch_add(&a->failures, 1);
                metrics_audit_failure();
                return;
        }
        pthread_mutex_lock(&a->qlock);
        while (a->queued >= AUDIT_QUEUE_MAX) {
                if (!a->behind) {
                        a->behind = true;
                        log_warn("msg=\"audit: %u lines wait for the writer (a slow disk?); "
                                 "requests wait for room\"",
                                 a->queued);
                }
                pthread_cond_signal(&a->wake);
                pthread_cond_wait(&a->moved, &a->qlock);
        }
        if (!a->head)
                a->first_ns = now_ns();
        *a->tail = e;
        a->tail = &e->next;
        a->queued++;
        a->enqueued++;
        /* An idle writer is woken by the first line, a busy one only by a full batch: a busy
         * daemon's emitters make no system call here. */
        if (a->writer_idle || a->queued == AUDIT_BATCH_LINES) {
                a->writer_idle = false;
                pthread_cond_signal(&a->wake);
        }
        pthread_mutex_unlock(&a->qlock);
}

void audit_flush(struct audit *a)
{
        uint64_t target;

        if (!a)
                return;
        pthread_mutex_lock(&a->qlock);
        target = a->enqueued;
        if (a->flush_to < target)
                a->flush_to = target;
        pthread_cond_signal(&a->wake);
        while (a->handled < target)
                pthread_cond_wait(&a->moved, &a->qlock);
        pthread_mutex_unlock(&a->qlock);
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
        size_t unused;
        int r = 0;

        if (!a || a->fail != AUDIT_FAIL_REFUSE || !atomic_load(&a->failing_hint))
                return 0;
        pthread_mutex_lock(&a->lock);
        if (a->failing)
                r = resume_locked(a, NULL, 0, &unused);
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
        /* The lines of events before the signal go where they went when the events happened:
         * into the file the daemon has open (renamed by logrotate already). */
        audit_flush(a);
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
        if (!EVP_Digest(code, len, md, &md_len, a && a->sha256 ? a->sha256 : EVP_sha256(), NULL))
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
