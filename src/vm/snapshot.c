/* See snapshot.h. The daemon's side of QMP (QEMU's JSON monitor), just what saving needs:
 * one command at a time, its answer found among the events QEMU sends meanwhile, each line
 * bounded. Nothing QEMU says is trusted beyond "return" or "error" and the migration's status
 * string. */
#include "snapshot.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "vm-internal.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A QMP answer is small; a line past this is not one we asked for. */
#define QMP_LINE_MAX (64u * 1024u)
#define QMP_FDNAME "airlock-save"

/* Init's protocol on the signal port (init.c): 'R', the seed, the time; 'r' or 'e' back. */
#define SEED_BYTES 32

static uint64_t mono_ms(void)
{
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

struct qmp {
        int fd;
        uint64_t deadline_ms;
        char buf[QMP_LINE_MAX];
        size_t len;
};

/* Sends one command (with fd passed along by SCM_RIGHTS when >= 0). */
static int qmp_send(struct qmp *q, json_t *cmd, int fd)
{
        _cleanup_free_ char *text = NULL;
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int))];
        } u = { 0 };
        struct iovec iov;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        size_t off = 0, len;

        if (!cmd)
                return -ENOMEM;
        text = json_dumps(cmd, JSON_COMPACT);
        json_decref(cmd);
        if (!text)
                return -ENOMEM;
        len = strlen(text);
        text[len++] = '\n'; /* json_dumps' NUL becomes the line's end */
        if (fd >= 0) {
                msg.msg_control = u.b;
                msg.msg_controllen = sizeof(u.b);
                CMSG_FIRSTHDR(&msg)->cmsg_level = SOL_SOCKET;
                CMSG_FIRSTHDR(&msg)->cmsg_type = SCM_RIGHTS;
                CMSG_FIRSTHDR(&msg)->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(CMSG_FIRSTHDR(&msg)), &fd, sizeof(int));
        }
        while (off < len) {
                ssize_t n;
                iov.iov_base = text + off;
                iov.iov_len = len - off;
                n = sendmsg(q->fd, &msg, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                off += (size_t) n;
                msg.msg_control = NULL; /* the fd goes with the first byte only */
                msg.msg_controllen = 0;
        }
        return 0;
}

/* Reads lines until an answer ("return" or "error"); events and the greeting are skipped.
 * *ret gets the answer (caller decrefs). */
static int qmp_answer(struct qmp *q, json_t **ret)
{
        for (;;) {
                char *nl = memchr(q->buf, '\n', q->len);
                if (nl) {
                        size_t line = (size_t) (nl - q->buf) + 1;
                        json_t *o = json_loadb(q->buf, line, 0, NULL);
                        memmove(q->buf, q->buf + line, q->len - line);
                        q->len -= line;
                        if (json_is_object(o) &&
                            (json_object_get(o, "return") || json_object_get(o, "error"))) {
                                *ret = o;
                                return 0;
                        }
                        json_decref(o);
                        continue;
                }
                if (q->len == sizeof(q->buf))
                        return -E2BIG;
                {
                        struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
                        uint64_t now = mono_ms();
                        ssize_t n;
                        int p;
                        if (now >= q->deadline_ms)
                                return -ETIMEDOUT;
                        p = poll(&pfd, 1, (int) (q->deadline_ms - now));
                        if (p < 0 && errno == EINTR)
                                continue;
                        if (p < 0)
                                return -errno;
                        if (p == 0)
                                return -ETIMEDOUT;
                        n = recv(q->fd, q->buf + q->len, sizeof(q->buf) - q->len, 0);
                        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                return -EPIPE;
                        q->len += (size_t) n;
                }
        }
}

/* Runs one command; *ret_return (may be NULL) gets its "return" (a new reference). An "error"
 * answer is -EIO with QEMU's description in err. */
static int qmp_call(struct qmp *q, json_t *cmd, int fd, json_t **ret_return,
                    struct airlock_error *err)
{
        const char *name = json_string_value(json_object_get(cmd, "execute"));
        char what[64];
        json_t *a = NULL;
        int r;

        (void) snprintf(what, sizeof(what), "%s", name ? name : "?");
        r = qmp_send(q, cmd, fd);
        if (r >= 0)
                r = qmp_answer(q, &a);
        if (r < 0)
                return airlock_error_set(err, r, "QEMU's monitor did not answer '%s': %s", what,
                                         strerror(-r));
        if (json_object_get(a, "error")) {
                const char *desc =
                        json_string_value(json_object_get(json_object_get(a, "error"), "desc"));
                r = airlock_error_set(err, -EIO, "QEMU refused '%s': %.300s", what,
                                      desc ? desc : "(no reason)");
                json_decref(a);
                return r;
        }
        if (ret_return)
                *ret_return = json_incref(json_object_get(a, "return"));
        json_decref(a);
        return 0;
}

int vm_save(int qmp_fd, int out_fd, bool keep_running, struct airlock_error *err)
{
        _cleanup_free_ struct qmp *q = calloc(1, sizeof(*q));
        json_t *st = NULL;
        bool stopped = false;
        int r;

        if (!q)
                return -ENOMEM;
        q->fd = qmp_fd;
        q->deadline_ms = mono_ms() + VM_SNAPSHOT_TIMEOUT_MS;
        /* Leaves the capabilities negotiation; on a monitor that left it already (a second
         * save of the VM), QEMU answers with an error, which is as good. */
        (void) qmp_call(q, json_pack("{s:s}", "execute", "qmp_capabilities"), -1, NULL, err);
        r = qmp_call(q, json_pack("{s:s}", "execute", "stop"), -1, NULL, err);
        if (r < 0)
                return r;
        stopped = true;
        r = qmp_call(
                q,
                json_pack("{s:s, s:{s:s}}", "execute", "getfd", "arguments", "fdname", QMP_FDNAME),
                out_fd, NULL, err);
        if (r >= 0)
                r = qmp_call(q,
                             json_pack("{s:s, s:{s:s}}", "execute", "migrate", "arguments", "uri",
                                       "fd:" QMP_FDNAME),
                             -1, NULL, err);
        while (r >= 0) {
                const char *status;
                json_decref(st);
                st = NULL;
                r = qmp_call(q, json_pack("{s:s}", "execute", "query-migrate"), -1, &st, err);
                if (r < 0)
                        break;
                status = json_string_value(json_object_get(st, "status"));
                if (status && strcmp(status, "completed") == 0)
                        break;
                if (!status || strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0) {
                        const char *desc = json_string_value(json_object_get(st, "error-desc"));
                        r = airlock_error_set(err, -EIO, "QEMU could not save the VM: %.300s",
                                              desc     ? desc
                                              : status ? status
                                                       : "no status");
                        break;
                }
                if (mono_ms() >= q->deadline_ms) {
                        (void) qmp_call(q, json_pack("{s:s}", "execute", "migrate_cancel"), -1,
                                        NULL, err);
                        r = airlock_error_set(err, -ETIMEDOUT,
                                              "saving the VM took longer than %u s",
                                              VM_SNAPSHOT_TIMEOUT_MS / 1000);
                        break;
                }
                (void) usleep(5000);
        }
        json_decref(st);
        if (stopped && (keep_running || r < 0)) {
                /* The guest goes on, also after a failed save: its session was not lost. */
                struct airlock_error cerr = { { 0 } };
                int c = qmp_call(q, json_pack("{s:s}", "execute", "cont"), -1, NULL, &cerr);
                if (c < 0 && r >= 0)
                        r = airlock_error_set(err, c, "%s", cerr.msg);
        }
        return r;
}

int vm_continue(int qmp_fd, uint64_t timeout_ms, struct airlock_error *err)
{
        _cleanup_free_ struct qmp *q = calloc(1, sizeof(*q));
        int r;

        if (!q)
                return -ENOMEM;
        q->fd = qmp_fd;
        q->deadline_ms = mono_ms() + timeout_ms;
        (void) qmp_call(q, json_pack("{s:s}", "execute", "qmp_capabilities"), -1, NULL, err);
        for (;;) {
                json_t *st = NULL;
                const char *status;
                bool loading;

                r = qmp_call(q, json_pack("{s:s}", "execute", "query-status"), -1, &st, err);
                if (r < 0)
                        return r == -EPIPE ? airlock_error_set(err, -EPIPE,
                                                               "QEMU ended while it loaded the "
                                                               "saved VM (the daemon's log says "
                                                               "why)")
                                           : r;
                status = json_string_value(json_object_get(st, "status"));
                loading = status && strcmp(status, "inmigrate") == 0;
                if (status && strcmp(status, "running") == 0) {
                        json_decref(st);
                        return 0;
                }
                if (!loading && status &&
                    (strcmp(status, "paused") == 0 || strcmp(status, "postmigrate") == 0 ||
                     strcmp(status, "prelaunch") == 0)) {
                        json_decref(st);
                        /* The save paused the VM, and a restored one keeps the state it was
                         * saved in. */
                        return qmp_call(q, json_pack("{s:s}", "execute", "cont"), -1, NULL, err);
                }
                if (!loading) {
                        r = airlock_error_set(err, -EIO,
                                              "the restored VM is in state '%.40s', not running",
                                              status ? status : "?");
                        json_decref(st);
                        return r;
                }
                json_decref(st);
                if (mono_ms() >= q->deadline_ms)
                        return airlock_error_set(err, -ETIMEDOUT,
                                                 "QEMU did not load the saved VM within %llu ms",
                                                 (unsigned long long) timeout_ms);
                (void) usleep(2000);
        }
}

int vm_reseed(int sig_fd, uint64_t timeout_ms, struct airlock_error *err)
{
        unsigned char msg[1 + SEED_BYTES + 8];
        uint64_t deadline = mono_ms() + timeout_ms, ns_le;
        struct timespec now;
        size_t off = 0;

        msg[0] = 'R';
        if (getrandom(msg + 1, SEED_BYTES, 0) != SEED_BYTES)
                return airlock_error_set(err, -EIO, "getrandom: %m");
        (void) clock_gettime(CLOCK_REALTIME, &now);
        ns_le = htole64((uint64_t) now.tv_sec * 1000000000u + (uint64_t) now.tv_nsec);
        memcpy(msg + 1 + SEED_BYTES, &ns_le, 8);
        /* The socket buffer takes the message whole, even before the guest runs. */
        while (off < sizeof(msg)) {
                ssize_t n = send(sig_fd, msg + off, sizeof(msg) - off, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return airlock_error_set(err, errno == EPIPE ? -EPIPE : -errno,
                                                 "cannot reach the restored VM's init: %m");
                off += (size_t) n;
        }
        explicit_bzero(msg, sizeof(msg));
        for (;;) {
                struct pollfd pfd = { .fd = sig_fd, .events = POLLIN };
                uint64_t t = mono_ms();
                char b;
                ssize_t n;
                int p;

                if (t >= deadline)
                        return airlock_error_set(err, -ETIMEDOUT,
                                                 "the restored VM did not answer within %llu ms",
                                                 (unsigned long long) timeout_ms);
                p = poll(&pfd, 1, (int) (deadline - t));
                if (p < 0 && errno != EINTR)
                        return airlock_error_set(err, -errno, "poll: %m");
                if (p <= 0)
                        continue;
                n = recv(sig_fd, &b, 1, MSG_DONTWAIT);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n <= 0)
                        return airlock_error_set(err, -EPIPE,
                                                 "the restored VM ended before it ran (QEMU could "
                                                 "not load its saved state: the daemon's log "
                                                 "says why)");
                if (b == 'r')
                        return 0;
                if (b == 'e')
                        return airlock_error_set(err, -EIO,
                                                 "the restored VM could not reseed its random "
                                                 "generator or set its clock");
                /* Anything else is not init's answer: ignored. */
        }
}

static int append_stat(char **text, const char *dir, const char *name)
{
        struct stat st;
        char path[4096], *more = NULL;

        (void) snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (stat(path, &st) < 0)
                return -errno;
        if (asprintf(&more, "%s\nfile %s %lld %lld.%09ld %llu", *text, name, (long long) st.st_size,
                     (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                     (unsigned long long) st.st_ino) < 0)
                return -ENOMEM;
        free(*text);
        *text = more;
        return 0;
}

/* The file QEMU's binary is: its path, or found on PATH; "" when not found. */
static void qemu_path(char *buf, size_t size)
{
        const char *bin = vm_qemu_binary(), *path = getenv("PATH");

        buf[0] = '\0';
        if (strchr(bin, '/')) {
                (void) snprintf(buf, size, "%s", bin);
                return;
        }
        if (!path)
                path = "/usr/bin:/bin";
        while (*path) {
                size_t n = strcspn(path, ":");
                if (n > 0 && (size_t) snprintf(buf, size, "%.*s/%s", (int) n, path, bin) < size &&
                    access(buf, X_OK) == 0)
                        return;
                path += n + (path[n] == ':');
        }
        buf[0] = '\0';
}

int vm_snapshot_key(const struct vm_config *cfg, char **ret_key)
{
        _cleanup_free_ char *machine = NULL, *text = NULL;
        const char *accel = getenv("AIRLOCK_VM_ACCEL");
        int r;

        r = vm_machine_text(cfg, &machine);
        if (r < 0)
                return r;
        if (asprintf(&text, "airlock-vm-snapshot 1\naccel %s\nqemu %s", accel ? accel : "kvm",
                     machine) < 0)
                return -ENOMEM;
        {
                /* Another QEMU (an upgrade) may not load what this one saved. */
                char qemu[4096];
                struct stat st;
                char *more = NULL;
                qemu_path(qemu, sizeof(qemu));
                if (qemu[0] && stat(qemu, &st) == 0) {
                        if (asprintf(&more, "%s\nqemu-binary %s %lld %lld.%09ld", text, qemu,
                                     (long long) st.st_size, (long long) st.st_mtim.tv_sec,
                                     st.st_mtim.tv_nsec) < 0)
                                return -ENOMEM;
                        free(text);
                        text = more;
                }
        }
        r = append_stat(&text, cfg->image_dir, "vmlinuz");
        if (r >= 0)
                r = append_stat(&text, cfg->image_dir, "initrd.cpio");
        if (r >= 0)
                r = append_stat(&text, cfg->image_dir, "root.erofs");
        if (r < 0)
                return r;
        *ret_key = TAKE_PTR(text);
        return 0;
}
