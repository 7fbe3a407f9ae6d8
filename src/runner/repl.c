/* What the session's child REPLs (node.c's JavaScript, r.c's R) share: each is a child of the
 * runner in its own process group, started with its language's first cell, reached by a pipe
 * of cells (its fd 3) and a pipe of one-line JSON answers (its fd 4), while its output goes
 * straight to the sandbox's pipes. A SIGINT to the runner (interrupt, timeout) is passed on to
 * the REPL's group while a cell runs; a REPL that does not answer within the kind's wait is
 * killed, and only its variables are lost. */
#include "runner.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPL_CMD_FD 3
#define REPL_REPLY_FD 4
/* How long a REPL may take to start, and to stop after a SIGINT: well inside the daemon's
 * grace period (2 s), so that the runner answers and the Python and bash state live on. */
#define REPL_START_TIMEOUT_MS 20000
#define REPL_INTERRUPT_WAIT_MS 1000

static volatile sig_atomic_t repl_pgid, interrupted;

static void forward_sigint(int sig)
{
        interrupted = 1;
        if (repl_pgid > 0)
                (void) kill(-repl_pgid, sig);
}

json_t *repl_error(const char *name, int exit_code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return json_pack("{s:s, s:n, s:i, s:{s:s, s:s, s:s}}", "status", "error", "result",
                         "exit_code", exit_code, "error", "name", name, "value", msg, "traceback",
                         "");
}

/* Reads one answer line of at most max bytes from fd. Returns a new string (caller frees), or
 * NULL with *ret_err: -EPIPE the REPL ended, -E2BIG too long, -ETIMEDOUT no answer by
 * deadline_ns (0: none), -EINTR a SIGINT came (only without a deadline: the caller decides how
 * long to wait then). */
static char *read_line(int fd, size_t max, uint64_t deadline_ns, int *ret_err)
{
        char *buf = NULL;
        size_t len = 0, size = 0;

        for (;;) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                int timeout = -1, n;
                ssize_t got;

                if (deadline_ns) {
                        uint64_t now = now_ns();
                        if (now >= deadline_ns) {
                                *ret_err = -ETIMEDOUT;
                                break;
                        }
                        timeout = (int) ((deadline_ns - now) / 1000000ULL) + 1;
                }
                if (interrupted && !deadline_ns) {
                        *ret_err = -EINTR;
                        break;
                }
                n = poll(&pfd, 1, timeout);
                if (n < 0 && errno == EINTR) {
                        if (interrupted && !deadline_ns) {
                                *ret_err = -EINTR;
                                break;
                        }
                        continue;
                }
                if (n <= 0)
                        continue;
                if (size - len < 65536) {
                        char *p;
                        size = size ? size * 2 : 65536;
                        p = realloc(buf, size + 1);
                        if (!p) {
                                *ret_err = -ENOMEM;
                                break;
                        }
                        buf = p;
                }
                got = read(fd, buf + len, size - len);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got <= 0) {
                        *ret_err = -EPIPE;
                        break;
                }
                /* Reads stop at the line's end only by chance: the REPL answers once per
                 * cell and waits for the next one, so nothing follows an answer. */
                len += (size_t) got;
                if (memchr(buf + len - (size_t) got, '\n', (size_t) got)) {
                        buf[len] = '\0';
                        return buf;
                }
                if (len > max) {
                        *ret_err = -E2BIG;
                        break;
                }
        }
        free(buf);
        return NULL;
}

/* Ends the REPL for good and says how it ended (a waitpid status). */
static int repl_kill(struct repl *r)
{
        int wstatus = 0;

        if (r->pid > 0) {
                (void) kill(-r->pid, SIGKILL);
                while (waitpid(r->pid, &wstatus, 0) < 0 && errno == EINTR)
                        ;
        }
        if (r->cmd_fd >= 0)
                (void) close(r->cmd_fd);
        if (r->reply_fd >= 0)
                (void) close(r->reply_fd);
        r->cmd_fd = r->reply_fd = -1;
        r->pid = 0;
        return wstatus;
}

bool repl_is_running(const struct repl *r)
{
        return r->pid > 0;
}

/* Starts the REPL. On failure returns -errno, with what the REPL said in why (size bytes,
 * empty when it said nothing): {"status": "failed", "message"} instead of ready. */
static int repl_start(struct repl *r, void *arg, char *why, size_t size)
{
        _cleanup_free_ char *ready = NULL;
        int cmd[2], reply[2], e;
        pid_t pid;

        e = r->kind->check ? r->kind->check() : 0;
        if (e < 0)
                return e;
        if (pipe2(cmd, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(reply, O_CLOEXEC) < 0) {
                e = -errno;
                (void) close(cmd[0]), (void) close(cmd[1]);
                return e;
        }
        pid = fork();
        if (pid < 0) {
                e = -errno;
                (void) close(cmd[0]), (void) close(cmd[1]);
                (void) close(reply[0]), (void) close(reply[1]);
                return e;
        }
        if (pid == 0) {
                int in, a, b;

                (void) setpgid(0, 0);
                (void) signal(SIGINT, SIG_DFL);
                (void) signal(SIGPIPE, SIG_DFL);
                /* Above the target fds first: a pipe end may already sit on fd 3 or 4. */
                a = fcntl(cmd[0], F_DUPFD_CLOEXEC, 10);
                b = fcntl(reply[1], F_DUPFD_CLOEXEC, 10);
                in = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (a < 0 || b < 0 || in < 0 || dup2(in, 0) < 0 || dup2(a, REPL_CMD_FD) < 0 ||
                    dup2(b, REPL_REPLY_FD) < 0)
                        _exit(127);
                /* Not the runner's control socket, nor anything else of the runner's: closed,
                 * not close-on-exec, as a REPL may run without executing anything (r.c). */
                (void) syscall(SYS_close_range, REPL_REPLY_FD + 1, ~0U, 0);
                r->kind->child(arg);
                _exit(127);
        }
        (void) setpgid(pid, pid);
        (void) close(cmd[0]);
        (void) close(reply[1]);
        r->pid = pid;
        r->cmd_fd = cmd[1];
        r->reply_fd = reply[0];
        ready = read_line(r->reply_fd, 4096, now_ns() + REPL_START_TIMEOUT_MS * 1000000ULL, &e);
        if (!ready || !strstr(ready, "\"ready\"")) {
                _cleanup_(json_decrefp) json_t *said = ready ? json_loads(ready, 0, NULL) : NULL;
                const char *msg = json_string_value(json_object_get(said, "message"));

                (void) snprintf(why, size, "%s", msg ?: "");
                (void) repl_kill(r);
                return ready ? -EPROTO : e;
        }
        return 0;
}

/* The line sent for one cell: {"code", "cell", "ts"?, "env"?, "cwd"?} (ts: a typescript cell,
 * which Node's REPL transpiles; env and cwd, where the request has them, apply to this cell
 * only). */
static char *cell_line(struct repl *r, const char *code, json_t *req)
{
        _cleanup_(json_decrefp) json_t *o = NULL;
        json_t *env = json_object_get(req, "env"), *cwd = json_object_get(req, "cwd");
        _cleanup_free_ char *text = NULL;
        char *line;

        o = json_pack("{s:s, s:i}", "code", code, "cell", (int) ++r->cell_no);
        if (!o)
                return NULL;
        if (json_is_object(env))
                (void) json_object_set(o, "env", env);
        if (json_is_string(cwd))
                (void) json_object_set(o, "cwd", cwd);
        if (strcmp(json_string_value(json_object_get(req, "language")) ?: "", "typescript") == 0)
                (void) json_object_set(o, "ts", json_true());
        text = json_dumps(o, JSON_COMPACT);
        if (!text || asprintf(&line, "%s\n", text) < 0)
                return NULL;
        return line;
}

/* The REPL's answer to a cell as a result object. */
static json_t *answer_result(const struct repl_kind *k, const char *line)
{
        _cleanup_(json_decrefp) json_t *a = json_loads(line, 0, NULL), *out = NULL;
        const char *status = json_string_value(json_object_get(a, "status"));
        json_t *error = json_object_get(a, "error"), *outputs = json_object_get(a, "outputs");

        if (!status)
                return repl_error("RunnerError", 1, "the %s REPL sent a bad answer", k->vars);
        if (strcmp(status, "ok") == 0)
                out = json_pack("{s:s, s:O, s:i, s:n}", "status", "ok", "result",
                                json_object_get(a, "result") ?: json_null(), "exit_code", 0,
                                "error");
        else
                out = json_pack("{s:s, s:n, s:i, s:O}", "status", "error", "result", "exit_code",
                                strcmp(json_string_value(json_object_get(error, "name")) ?: "",
                                       "KeyboardInterrupt") == 0
                                        ? 130
                                        : 1,
                                "error", json_is_object(error) ? error : json_null());
        if (out && json_is_array(outputs) && json_object_set(out, "outputs", outputs) < 0)
                return NULL;
        return TAKE_PTR(out);
}

/* The REPL ended while a cell ran (an exit, a fatal error, a heap limit). */
static json_t *ended_result(const struct repl_kind *k, int wstatus)
{
        if (WIFSIGNALED(wstatus))
                return repl_error("ExitStatus", 128 + WTERMSIG(wstatus),
                                  "%s was killed by signal %d; the %s variables are lost and the "
                                  "next %s cell starts a new REPL",
                                  k->program, WTERMSIG(wstatus), k->vars, k->language);
        return repl_error("ExitStatus", WEXITSTATUS(wstatus) ? WEXITSTATUS(wstatus) : 1,
                          "%s exited with status %d; the %s variables are lost and the next %s "
                          "cell starts a new REPL",
                          k->program, WEXITSTATUS(wstatus), k->vars, k->language);
}

json_t *repl_run(struct repl *r, void *arg, const char *code, json_t *req, size_t max)
{
        const struct repl_kind *k = r->kind;
        struct sigaction sa = { .sa_handler = forward_sigint }, old;
        _cleanup_free_ char *line = NULL, *reply = NULL;
        int e = 0;

        line = cell_line(r, code, req);
        if (!line)
                return NULL;
        for (int attempt = 0; attempt < 2; attempt++) {
                if (r->pid == 0) {
                        char why[256] = "";

                        e = repl_start(r, arg, why, sizeof(why));
                        if (e == -ENOENT)
                                return repl_error("OSError", 127, "%s", k->missing);
                        if (e < 0)
                                return repl_error("OSError", 126, "cannot start %s: %s", k->program,
                                                  why[0] ? why : strerror(-e));
                }
                e = write_full(r->cmd_fd, line, strlen(line));
                if (e == 0)
                        break;
                /* The REPL died since the last cell (user code killed it): start another. */
                (void) repl_kill(r);
        }
        if (e < 0)
                return repl_error("OSError", 126, "cannot reach %s: %s", k->program, strerror(-e));

        interrupted = 0;
        repl_pgid = r->pid;
        (void) sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, &old);
        reply = read_line(r->reply_fd, max, 0, &e);
        if (!reply && e == -EINTR)
                reply = read_line(r->reply_fd, max, now_ns() + REPL_INTERRUPT_WAIT_MS * 1000000ULL,
                                  &e);
        (void) sigaction(SIGINT, &old, NULL);
        repl_pgid = 0;

        if (reply)
                return answer_result(k, reply);
        if (e == -ETIMEDOUT) {
                (void) repl_kill(r);
                return repl_error("KeyboardInterrupt", 130,
                                  "the cell was interrupted, but %s did not stop within %d ms%s: "
                                  "the REPL was killed, its %s variables are lost and the next "
                                  "%s cell starts a new one; Python and bash are unaffected",
                                  k->program, REPL_INTERRUPT_WAIT_MS, k->stop_hint ?: "", k->vars,
                                  k->language);
        }
        if (e == -E2BIG) {
                (void) repl_kill(r);
                return repl_error("OutputLimitError", 125,
                                  "the %s answer was larger than %zu bytes: the REPL was killed "
                                  "and its variables are lost",
                                  k->vars, max);
        }
        if (e == -ENOMEM)
                return NULL;
        return ended_result(k, repl_kill(r));
}
