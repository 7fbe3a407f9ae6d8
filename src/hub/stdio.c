/* A stdio MCP server (hub-internal.h): a child process in a session of its own (so that its
 * whole process group can be stopped: `npx` and shells start grandchildren), speaking
 * newline-delimited JSON-RPC on its stdin and stdout. Its stderr goes to the daemon's log,
 * cut and rate-limited. It gets a small environment (PATH, HOME, locale, TZ and its config's
 * env), never the daemon's own (which may hold the model's API key). */
#include "hub-internal.h"

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STDERR_LINE_MAX 400
#define STDERR_LINES_PER_MIN 120
#define STOP_GRACE_MS 1000
#define TERM_GRACE_MS 2000

/* What the server inherits from the daemon's environment; everything else is dropped. */
static const char *const inherited_env[] = { "PATH", "HOME", "LANG",    "LC_ALL", "LC_CTYPE",
                                             "TZ",   "USER", "LOGNAME", "TMPDIR", NULL };

struct stdio_conn {
        struct conn base;
        char *name;
        pid_t pid;
        int pidfd;
        int in_fd;   /* the server's stdin (non-blocking), -1 once closed */
        int out_fd;  /* its stdout */
        int err_fd;  /* its stderr */
        int stop_fd; /* eventfd: the reader thread ends */
        pthread_mutex_t write_lock;
        pthread_t reader;
        bool reader_started;
        struct rpc_table rpc;
        struct conn_events ev;
        /* stderr rate limit */
        uint64_t err_window_ns;
        unsigned err_lines;
};

static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
        for (;;) {
                struct pollfd pfd = { .fd = fd, .events = events };
                uint64_t now = now_ns();
                int timeout = -1, r;

                if (deadline_ns) {
                        if (now >= deadline_ns)
                                return -ETIMEDOUT;
                        timeout = (int) ((deadline_ns - now) / 1000000u) + 1;
                }
                r = poll(&pfd, 1, timeout);
                if (r > 0)
                        return 0;
                if (r < 0 && errno != EINTR)
                        return -errno;
        }
}

/* Waits until the server's stdin takes more, the deadline passes (-ETIMEDOUT) or the
 * connection is aborted (-EPIPE). */
static int wait_writable(struct stdio_conn *c, uint64_t deadline_ns)
{
        for (;;) {
                struct pollfd pfd[2] = { { .fd = c->in_fd, .events = POLLOUT },
                                         { .fd = c->stop_fd, .events = POLLIN } };
                uint64_t now = now_ns();
                int r;

                if (now >= deadline_ns)
                        return -ETIMEDOUT;
                r = poll(pfd, 2, (int) ((deadline_ns - now) / 1000000u) + 1);
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (r > 0 && pfd[1].revents)
                        return -EPIPE;
                if (r > 0)
                        return 0;
        }
}

/* Writes one message and its newline, within deadline_ns: a server that stops reading its
 * stdin must not hold a caller forever. */
static int send_line(struct stdio_conn *c, json_t *msg, uint64_t deadline_ns)
{
        _cleanup_free_ char *text = json_dump_text(msg, JSON_COMPACT, NULL);
        size_t len, off = 0;
        int r = 0;

        if (!text)
                return -ENOMEM;
        len = strlen(text);
        text[len] = '\n'; /* json_dumps never puts a newline inside compact JSON */
        len++;
        /* Another caller may be waiting for the server to read: wait no longer than our own
         * deadline for our turn. */
        {
                struct timespec ts = { .tv_sec = (time_t) (deadline_ns / 1000000000u),
                                       .tv_nsec = (long) (deadline_ns % 1000000000u) };
                if (pthread_mutex_clocklock(&c->write_lock, CLOCK_MONOTONIC, &ts) != 0)
                        return -ETIMEDOUT;
        }
        while (off < len) {
                ssize_t n;
                if (c->in_fd < 0) {
                        r = -EPIPE;
                        break;
                }
                n = write(c->in_fd, text + off, len - off);
                if (n > 0) {
                        off += (size_t) n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        r = wait_writable(c, deadline_ns);
                        if (r < 0)
                                break;
                        continue;
                }
                r = -errno;
                break;
        }
        (void) pthread_mutex_unlock(&c->write_lock);
        if (r < 0 && off > 0 && off < len) {
                /* Half a line went in: whatever we send next would be glued to it. The
                 * connection is over; the supervisor starts the server again. */
                uint64_t one = 1;
                rpc_table_close(&c->rpc, "a message to the server was cut half-way (it stopped "
                                         "reading its input)");
                (void) write(c->stop_fd, &one, sizeof(one));
        }
        return r;
}

static int stdio_notify(struct conn *base, const char *method, json_t *params)
{
        struct stdio_conn *c = (struct stdio_conn *) base;
        json_t *msg =
                json_pack("{s:s, s:s, s:o*}", "jsonrpc", "2.0", "method", method, "params", params);
        int r;

        if (!msg)
                return -ENOMEM;
        r = send_line(c, msg, now_ns() + 5000000000ull);
        json_decref(msg);
        return r;
}

static int stdio_request(struct conn *base, const char *method, json_t *params,
                         uint64_t deadline_ns, const atomic_bool *cancel, json_t **ret_result,
                         struct airlock_error *err)
{
        struct stdio_conn *c = (struct stdio_conn *) base;
        json_t *msg, *answer = NULL;
        int64_t id = rpc_table_add(&c->rpc);
        int r;

        if (id < 0)
                return (int) id;
        msg = json_pack("{s:s, s:I, s:s, s:O*}", "jsonrpc", "2.0", "id", (json_int_t) id, "method",
                        method, "params", params);
        r = msg ? send_line(c, msg, deadline_ns) : -ENOMEM;
        json_decref(msg);
        if (r < 0) {
                /* Not sent: the wait below ends at once with why the connection closed, or
                 * with a timeout of the write. */
                if (r != -ETIMEDOUT)
                        rpc_table_close(&c->rpc, "the server closed its input");
                deadline_ns = now_ns();
        }
        r = rpc_table_wait(&c->rpc, id, deadline_ns, cancel, &answer, err);
        if (r == -ETIMEDOUT || r == -ECANCELED)
                (void) stdio_notify(base, "notifications/cancelled",
                                    json_pack("{s:I, s:s}", "requestId", (json_int_t) id, "reason",
                                              r == -ETIMEDOUT ? "timeout" : "cancelled"));
        if (r < 0)
                return r;
        r = rpc_response_result(answer, ret_result, err);
        json_decref(answer);
        return r;
}

static pid_t stdio_pid(struct conn *base)
{
        return ((struct stdio_conn *) base)->pid;
}

static void log_stderr_line(struct stdio_conn *c, const char *line, size_t len)
{
        uint64_t now = now_ns();

        if (now - c->err_window_ns > 60000000000ull) {
                if (c->err_lines > STDERR_LINES_PER_MIN)
                        log_warn("mcp_server=%s msg=\"%u lines of its stderr were not logged "
                                 "(more than %d a minute)\"",
                                 c->name, c->err_lines - STDERR_LINES_PER_MIN,
                                 STDERR_LINES_PER_MIN);
                c->err_window_ns = now;
                c->err_lines = 0;
        }
        if (++c->err_lines > STDERR_LINES_PER_MIN)
                return;
        if (len > STDERR_LINE_MAX)
                len = STDERR_LINE_MAX;
        /* The log line is key="value": quotes and control characters would break it. */
        {
                char clean[STDERR_LINE_MAX + 1];
                for (size_t i = 0; i < len; i++)
                        clean[i] =
                                (line[i] == '"' || (unsigned char) line[i] < 0x20) ? '\'' : line[i];
                clean[len] = '\0';
                log_info("mcp_server=%s msg=\"stderr: %s\"", c->name, clean);
        }
}

static void handle_message(struct stdio_conn *c, const char *line, size_t len)
{
        json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        const char *method;

        if (!json_is_object(msg)) {
                /* Some servers print a banner on stdout: not fatal, but worth a line. */
                json_decref(msg);
                log_stderr_line(c, line, len);
                return;
        }
        method = json_string_value(json_object_get(msg, "method"));
        if (!method) {
                (void) rpc_table_answer(&c->rpc, msg); /* takes msg */
                return;
        }
        if (json_object_get(msg, "id")) {
                json_t *answer = rpc_answer_server_request(msg);
                if (answer)
                        (void) send_line(c, answer, now_ns() + 5000000000ull);
                json_decref(answer);
        } else if (c->ev.notified) {
                c->ev.notified(c->ev.userdata, method, json_object_get(msg, "params"));
        }
        json_decref(msg);
}

/* Splits what came on fd into lines and hands each to fn; returns 1 at EOF, 0, or -E2BIG. */
static int read_lines(struct stdio_conn *c, int fd, struct buf *b, size_t max,
                      void (*fn)(struct stdio_conn *, const char *, size_t))
{
        char chunk[65536];
        ssize_t n = read(fd, chunk, sizeof(chunk));
        size_t start = 0;

        if (n < 0)
                return errno == EINTR || errno == EAGAIN ? 0 : 1;
        if (n == 0) {
                if (b->len > 0)
                        fn(c, b->data, b->len);
                buf_done(b);
                return 1;
        }
        for (size_t i = 0; i < (size_t) n; i++) {
                if (chunk[i] != '\n')
                        continue;
                if (b->len > 0) {
                        if (buf_append(b, chunk + start, i - start, max) < 0)
                                return -E2BIG;
                        fn(c, b->data, b->len);
                        b->len = 0;
                } else {
                        fn(c, chunk + start, i - start);
                }
                start = i + 1;
        }
        if (start < (size_t) n && buf_append(b, chunk + start, (size_t) n - start, max) < 0)
                return -E2BIG;
        return 0;
}

static void exit_reason(struct stdio_conn *c, char *buf, size_t size)
{
        siginfo_t si = { 0 };

        if (waitid(P_PIDFD, (id_t) c->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
            si.si_pid == 0)
                (void) snprintf(buf, size, "the server closed its output");
        else if (si.si_code == CLD_EXITED)
                (void) snprintf(buf, size, "the server exited with status %d", si.si_status);
        else
                (void) snprintf(buf, size, "the server was killed by signal %d (%s)", si.si_status,
                                strsignal(si.si_status));
}

static void *reader_main(void *userdata)
{
        struct stdio_conn *c = userdata;
        struct buf out = { 0 }, errb = { 0 };
        bool out_open = true, err_open = true;
        char why[256] = "";

        while (out_open) {
                struct pollfd pfd[3] = {
                        { .fd = c->out_fd, .events = POLLIN },
                        { .fd = err_open ? c->err_fd : -1, .events = POLLIN },
                        { .fd = c->stop_fd, .events = POLLIN },
                };
                int r;

                if (poll(pfd, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        (void) snprintf(why, sizeof(why), "poll: %s", strerror(errno));
                        break;
                }
                if (pfd[2].revents) {
                        (void) snprintf(why, sizeof(why), "the connection was closed");
                        break;
                }
                if (pfd[1].revents) {
                        r = read_lines(c, c->err_fd, &errb, 64 * 1024, log_stderr_line);
                        if (r == -E2BIG) {
                                log_stderr_line(c, errb.data, errb.len);
                                errb.len = 0;
                        } else if (r == 1) {
                                err_open = false;
                        }
                }
                if (pfd[0].revents) {
                        r = read_lines(c, c->out_fd, &out, HUB_MESSAGE_MAX, handle_message);
                        if (r == -E2BIG) {
                                (void) snprintf(why, sizeof(why),
                                                "the server sent a message larger than %u MiB",
                                                HUB_MESSAGE_MAX >> 20);
                                break;
                        }
                        if (r == 1)
                                out_open = false;
                }
        }
        if (!why[0]) {
                /* stdout closed: the process is exiting; give it a moment to be reapable. */
                (void) wait_fd(c->pidfd, POLLIN, now_ns() + 500000000ull);
                exit_reason(c, why, sizeof(why));
        }
        buf_done(&out);
        buf_done(&errb);
        rpc_table_close(&c->rpc, why);
        if (c->ev.closed)
                c->ev.closed(c->ev.userdata, why);
        return NULL;
}

/* Ends the process group: stdin closed first (the MCP way to ask a stdio server to exit), then
 * SIGTERM, then SIGKILL. */
static void stop_process(struct stdio_conn *c)
{
        if (c->pid <= 0)
                return;
        (void) pthread_mutex_lock(&c->write_lock);
        if (c->in_fd >= 0) {
                (void) close(c->in_fd);
                c->in_fd = -1;
        }
        (void) pthread_mutex_unlock(&c->write_lock);
        if (wait_fd(c->pidfd, POLLIN, now_ns() + STOP_GRACE_MS * 1000000ull) < 0) {
                (void) kill(-c->pid, SIGTERM);
                if (wait_fd(c->pidfd, POLLIN, now_ns() + TERM_GRACE_MS * 1000000ull) < 0)
                        (void) kill(-c->pid, SIGKILL);
        }
        /* Grandchildren that outlive the leader go too; the group id cannot be reused before
         * the leader is reaped, below. */
        (void) kill(-c->pid, SIGKILL);
        (void) waitpid(c->pid, NULL, 0);
        c->pid = 0;
}

static void stdio_abort(struct conn *base, const char *why)
{
        struct stdio_conn *c = (struct stdio_conn *) base;
        uint64_t one = 1;

        rpc_table_close(&c->rpc, why);
        (void) write(c->stop_fd, &one, sizeof(one));
}

static void stdio_close(struct conn *base)
{
        struct stdio_conn *c = (struct stdio_conn *) base;
        uint64_t one = 1;

        if (!c)
                return;
        stop_process(c);
        if (c->reader_started) {
                (void) write(c->stop_fd, &one, sizeof(one));
                (void) pthread_join(c->reader, NULL);
        }
        if (c->in_fd >= 0)
                (void) close(c->in_fd);
        if (c->out_fd >= 0)
                (void) close(c->out_fd);
        if (c->err_fd >= 0)
                (void) close(c->err_fd);
        if (c->stop_fd >= 0)
                (void) close(c->stop_fd);
        if (c->pidfd >= 0)
                (void) close(c->pidfd);
        rpc_table_done(&c->rpc);
        (void) pthread_mutex_destroy(&c->write_lock);
        free(c->name);
        free(c);
}

static const struct conn_ops stdio_ops = {
        .request = stdio_request,
        .notify = stdio_notify,
        .pid = stdio_pid,
        .abort = stdio_abort,
        .close = stdio_close,
};

static int build_env(const struct server_config *s, char ***ret_env)
{
        size_t n = 0, cap = sizeof(inherited_env) / sizeof(*inherited_env);
        char **env;

        for (char **p = s->env; p && *p; p++)
                cap++;
        env = calloc(cap + 1, sizeof(char *));
        if (!env)
                return -ENOMEM;
        for (const char *const *k = inherited_env; *k; k++) {
                const char *v = getenv(*k);
                bool overridden = false;
                size_t klen = strlen(*k);
                for (char **p = s->env; p && *p && !overridden; p++)
                        overridden = strncmp(*p, *k, klen) == 0 && (*p)[klen] == '=';
                if (!v || overridden)
                        continue;
                if (asprintf(&env[n], "%s=%s", *k, v) < 0) {
                        env[n] = NULL;
                        strv_free(env);
                        return -ENOMEM;
                }
                n++;
        }
        for (char **p = s->env; p && *p; p++) {
                env[n] = strdup(*p);
                if (!env[n]) {
                        strv_free(env);
                        return -ENOMEM;
                }
                n++;
        }
        *ret_env = env;
        return 0;
}

/* In the child, between fork and exec: async-signal-safe calls only. */
_Noreturn static void child_exec(const struct server_config *s, char **argv, char **envp, int in_fd,
                                 int out_fd, int err_fd, int status_fd)
{
        sigset_t none;
        int e;

        (void) setsid();
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        (void) signal(SIGPIPE, SIG_DFL);
        if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
                goto fail;
        if (status_fd != 3 && dup2(status_fd, 3) < 0)
                goto fail;
        (void) fcntl(3, F_SETFD, FD_CLOEXEC);
        (void) syscall(SYS_close_range, 4, ~0u, 0);
        if (s->cwd && chdir(s->cwd) < 0)
                goto fail;
        (void) execvpe(s->command, argv, envp);
fail:
        e = errno;
        (void) write(3, &e, sizeof(e));
        _exit(127);
}

int conn_stdio_open(const struct server_config *s, const struct conn_events *ev,
                    struct conn **ret_conn, struct airlock_error *err)
{
        _cleanup_strv_free_ char **envp = NULL, **argv = NULL;
        int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 }, st[2] = { -1, -1 };
        struct stdio_conn *c;
        size_t nargs = 0;
        ssize_t n;
        int e = 0, r;

        for (char **p = s->args; p && *p; p++)
                nargs++;
        argv = calloc(nargs + 2, sizeof(char *));
        if (!argv || build_env(s, &envp) < 0)
                return -ENOMEM;
        argv[0] = strdup(s->command);
        for (size_t i = 0; i < nargs; i++)
                argv[i + 1] = strdup(s->args[i]);
        for (size_t i = 0; i <= nargs; i++)
                if (!argv[i])
                        return -ENOMEM;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->base.ops = &stdio_ops;
        c->in_fd = c->out_fd = c->err_fd = c->stop_fd = c->pidfd = -1;
        c->ev = *ev;
        c->name = strdup(s->name);
        (void) pthread_mutex_init(&c->write_lock, NULL);
        rpc_table_init(&c->rpc);
        if (!c->name) {
                stdio_close(&c->base);
                return -ENOMEM;
        }
        c->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (c->stop_fd < 0 || pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
            pipe2(errp, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0) {
                r = airlock_error_set(err, -errno, "cannot make pipes: %s", strerror(errno));
                goto fail;
        }
        c->pid = fork();
        if (c->pid < 0) {
                c->pid = 0;
                r = airlock_error_set(err, -errno, "cannot fork: %s", strerror(errno));
                goto fail;
        }
        if (c->pid == 0)
                child_exec(s, argv, envp, in[0], out[1], errp[1], st[1]);
        (void) close(in[0]);
        (void) close(out[1]);
        (void) close(errp[1]);
        (void) close(st[1]);
        in[0] = out[1] = errp[1] = st[1] = -1;
        c->in_fd = in[1];
        c->out_fd = out[0];
        c->err_fd = errp[0];
        in[1] = out[0] = errp[0] = -1;
        (void) fcntl(c->in_fd, F_SETFL, O_NONBLOCK);
        /* The status pipe closes at exec (success) or carries errno (failure). */
        do
                n = read(st[0], &e, sizeof(e));
        while (n < 0 && errno == EINTR);
        (void) close(st[0]);
        st[0] = -1;
        c->pidfd = (int) syscall(SYS_pidfd_open, c->pid, 0);
        if (n == (ssize_t) sizeof(e)) {
                r = airlock_error_set(err, -e, "cannot run %s: %s", s->command, strerror(e));
                goto fail;
        }
        if (c->pidfd < 0) {
                r = airlock_error_set(err, -errno, "pidfd_open: %s", strerror(errno));
                goto fail;
        }
        r = -pthread_create(&c->reader, NULL, reader_main, c);
        if (r < 0) {
                airlock_error_set(err, r, "cannot start a thread: %s", strerror(-r));
                goto fail;
        }
        c->reader_started = true;
        *ret_conn = &c->base;
        return 0;
fail:
        for (int i = 0; i < 2; i++) {
                if (in[i] >= 0)
                        (void) close(in[i]);
                if (out[i] >= 0)
                        (void) close(out[i]);
                if (errp[i] >= 0)
                        (void) close(errp[i]);
                if (st[i] >= 0)
                        (void) close(st[i]);
        }
        if (c->pid > 0 && c->pidfd < 0) {
                (void) kill(-c->pid, SIGKILL);
                (void) waitpid(c->pid, NULL, 0);
                c->pid = 0;
        }
        stdio_close(&c->base);
        return r;
}
