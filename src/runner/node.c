/* The javascript and typescript languages: one Node REPL per session, started with the first
 * javascript cell (a session that never runs JavaScript never pays for Node), in the same sandbox
 * as Python and bash, as a child of the runner in its own process group. The REPL is
 * airlock_node.js, compiled into this binary and given to `node -e`; cells go to it on its fd 3 and
 * its answers come back on its fd 4, one JSON line each, while its output goes straight to the
 * sandbox's pipes. A SIGINT to the runner (interrupt, timeout) is passed to the REPL's process
 * group; a REPL that does not answer within NODE_INTERRUPT_WAIT_MS (a busy loop after an await,
 * where Node cannot be interrupted) is killed, and only its JavaScript variables are lost. */
#include "runner.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "node-js.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define NODE_PATH "/usr/bin/node"
#define NODE_CMD_FD 3
#define NODE_REPLY_FD 4
/* How long the REPL may take to start, and to stop after a SIGINT: well inside the daemon's
 * grace period (2 s), so that the runner answers and the Python and bash state live on. */
#define NODE_START_TIMEOUT_MS 20000
#define NODE_INTERRUPT_WAIT_MS 1000

extern char **environ;

static struct {
        pid_t pid;    /* the REPL, also its process group; 0 when none runs */
        int cmd_fd;   /* cells, to the REPL's fd 3 */
        int reply_fd; /* answers, from the REPL's fd 4 */
} node = { 0, -1, -1 };

static size_t output_max = 1024 * 1024;
static uint64_t memory_bytes;
static unsigned cell_no;

static volatile sig_atomic_t node_pgid, interrupted;

static void forward_sigint(int sig)
{
        interrupted = 1;
        if (node_pgid > 0)
                (void) kill(-node_pgid, sig);
}

void node_configure(size_t max_output, uint64_t max_memory)
{
        output_max = max_output;
        memory_bytes = max_memory;
}

bool node_has_state(void)
{
        return node.pid > 0;
}

static void node_reset(void)
{
        if (node.cmd_fd >= 0)
                (void) close(node.cmd_fd);
        if (node.reply_fd >= 0)
                (void) close(node.reply_fd);
        node.cmd_fd = node.reply_fd = -1;
        node.pid = 0;
}

/* Ends the REPL for good and says how it ended (a waitpid status). */
static int node_kill(void)
{
        int wstatus = 0;

        if (node.pid > 0) {
                (void) kill(-node.pid, SIGKILL);
                while (waitpid(node.pid, &wstatus, 0) < 0 && errno == EINTR)
                        ;
        }
        node_reset();
        return wstatus;
}

static json_t *error_result(const char *name, int exit_code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static json_t *error_result(const char *name, int exit_code, const char *fmt, ...)
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

/* Reads one answer line of at most max bytes. Returns a new string (caller frees), or NULL
 * with *ret_err: -EPIPE the REPL ended, -E2BIG too long, -ETIMEDOUT no answer by deadline_ns
 * (0: none), -EINTR a SIGINT came (interrupted is set; the caller decides how long to wait). */
static char *read_line(size_t max, uint64_t deadline_ns, int *ret_err)
{
        char *buf = NULL;
        size_t len = 0, size = 0;

        for (;;) {
                struct pollfd pfd = { .fd = node.reply_fd, .events = POLLIN };
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
                got = read(node.reply_fd, buf + len, size - len);
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

static int node_start(void)
{
        _cleanup_free_ char *heap = NULL, *outmax = NULL, *ready = NULL;
        int cmd[2], reply[2], r;
        pid_t pid;

        if (access(NODE_PATH, X_OK) < 0)
                return -ENOENT;
        if (memory_bytes > 0 && asprintf(&heap, "--max-old-space-size=%llu",
                                         (unsigned long long) (memory_bytes >> 20) + 1) < 0)
                return -ENOMEM;
        if (asprintf(&outmax, "AIRLOCK_NODE_OUTPUT_MAX=%zu", output_max) < 0)
                return -ENOMEM;
        if (pipe2(cmd, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(reply, O_CLOEXEC) < 0) {
                r = -errno;
                (void) close(cmd[0]), (void) close(cmd[1]);
                return r;
        }
        pid = fork();
        if (pid < 0) {
                r = -errno;
                (void) close(cmd[0]), (void) close(cmd[1]);
                (void) close(reply[0]), (void) close(reply[1]);
                return r;
        }
        if (pid == 0) {
                /* V8's heap may grow as far as the sandbox's memory: the cgroup's OOM kill, not
                 * V8's own abort, ends a runaway allocation, as it does in Python. */
                char *argv[6] = { "node", "--expose-internals" };
                size_t argc = 2;
                int in, a, b;

                if (heap)
                        argv[argc++] = heap;
                argv[argc++] = "-e";
                argv[argc++] = (char *) node_js_source;

                (void) setpgid(0, 0);
                (void) signal(SIGINT, SIG_DFL);
                (void) signal(SIGPIPE, SIG_DFL);
                /* Above the target fds first: a pipe end may already sit on fd 3 or 4. */
                a = fcntl(cmd[0], F_DUPFD_CLOEXEC, 10);
                b = fcntl(reply[1], F_DUPFD_CLOEXEC, 10);
                in = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (a < 0 || b < 0 || in < 0 || dup2(in, 0) < 0 || dup2(a, NODE_CMD_FD) < 0 ||
                    dup2(b, NODE_REPLY_FD) < 0)
                        _exit(127);
                /* Not the runner's control socket, nor anything else of the runner's. */
                (void) syscall(SYS_close_range, NODE_REPLY_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC);
                if (putenv(outmax) < 0)
                        _exit(127);
                execve(NODE_PATH, argv, environ);
                _exit(127);
        }
        (void) setpgid(pid, pid);
        (void) close(cmd[0]);
        (void) close(reply[1]);
        node.pid = pid;
        node.cmd_fd = cmd[1];
        node.reply_fd = reply[0];
        ready = read_line(4096, now_ns() + NODE_START_TIMEOUT_MS * 1000000ULL, &r);
        if (!ready || !strstr(ready, "\"ready\"")) {
                (void) node_kill();
                return ready ? -EPROTO : r;
        }
        return 0;
}

/* The line sent for one cell: {"code", "cell", "ts"?, "env"?, "cwd"?} (ts: a typescript cell,
 * which the REPL transpiles; env and cwd, where the request has them, apply to this cell only). */
static char *cell_line(const char *code, json_t *req)
{
        _cleanup_(json_decrefp) json_t *o = NULL;
        json_t *env = json_object_get(req, "env"), *cwd = json_object_get(req, "cwd");
        char *text, *line;

        o = json_pack("{s:s, s:i}", "code", code, "cell", (int) ++cell_no);
        if (!o)
                return NULL;
        if (json_is_object(env))
                (void) json_object_set(o, "env", env);
        if (json_is_string(cwd))
                (void) json_object_set(o, "cwd", cwd);
        if (strcmp(json_string_value(json_object_get(req, "language")) ?: "", "typescript") == 0)
                (void) json_object_set(o, "ts", json_true());
        text = json_dumps(o, JSON_COMPACT);
        if (!text)
                return NULL;
        if (asprintf(&line, "%s\n", text) < 0)
                line = NULL;
        free(text);
        return line;
}

/* The REPL ended while a cell ran (process.exit(), a fatal error, V8's heap limit). */
static json_t *ended_result(int wstatus)
{
        if (WIFSIGNALED(wstatus))
                return error_result("ExitStatus", 128 + WTERMSIG(wstatus),
                                    "node was killed by signal %d; the JavaScript variables are "
                                    "lost and the next javascript cell starts a new REPL",
                                    WTERMSIG(wstatus));
        return error_result("ExitStatus", WEXITSTATUS(wstatus) ? WEXITSTATUS(wstatus) : 1,
                            "node exited with status %d; the JavaScript variables are lost and "
                            "the next javascript cell starts a new REPL",
                            WEXITSTATUS(wstatus));
}

static json_t *answer_result(const char *line)
{
        _cleanup_(json_decrefp) json_t *a = NULL;
        json_t *error;
        const char *status;

        a = json_loads(line, 0, NULL);
        status = json_string_value(json_object_get(a, "status"));
        if (!status)
                return error_result("RunnerError", 1, "the JavaScript REPL sent a bad answer");
        error = json_object_get(a, "error");
        if (strcmp(status, "ok") == 0)
                return json_pack("{s:s, s:O, s:i, s:n}", "status", "ok", "result",
                                 json_object_get(a, "result"), "exit_code", 0, "error");
        return json_pack("{s:s, s:n, s:i, s:O}", "status", "error", "result", "exit_code",
                         strcmp(json_string_value(json_object_get(error, "name")) ?: "",
                                "KeyboardInterrupt") == 0
                                 ? 130
                                 : 1,
                         "error", json_is_object(error) ? error : json_null());
}

json_t *node_run(const char *code, json_t *req)
{
        struct sigaction sa = { .sa_handler = forward_sigint }, old;
        _cleanup_free_ char *line = NULL, *reply = NULL;
        /* Every string of the answer is cut at output_max characters by the REPL; JSON may
         * spell a character in up to 12 bytes. */
        size_t max = 12 * 3 * output_max + 65536;
        int r = 0;

        line = cell_line(code, req);
        if (!line)
                return NULL;
        for (int attempt = 0; attempt < 2; attempt++) {
                if (node.pid == 0) {
                        r = node_start();
                        if (r == -ENOENT)
                                return error_result("OSError", 127,
                                                    "javascript needs Node.js (" NODE_PATH
                                                    "), which is not installed in this "
                                                    "profile's root filesystem");
                        if (r < 0)
                                return error_result("OSError", 126, "cannot start node: %s",
                                                    strerror(-r));
                }
                r = write_full(node.cmd_fd, line, strlen(line));
                if (r == 0)
                        break;
                /* The REPL died since the last cell (user code killed it): start another. */
                (void) node_kill();
        }
        if (r < 0)
                return error_result("OSError", 126, "cannot reach node: %s", strerror(-r));

        interrupted = 0;
        node_pgid = node.pid;
        (void) sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, &old);
        reply = read_line(max, 0, &r);
        if (!reply && r == -EINTR)
                reply = read_line(max, now_ns() + NODE_INTERRUPT_WAIT_MS * 1000000ULL, &r);
        (void) sigaction(SIGINT, &old, NULL);
        node_pgid = 0;

        if (reply)
                return answer_result(reply);
        if (r == -ETIMEDOUT) {
                (void) node_kill();
                return error_result("KeyboardInterrupt", 130,
                                    "the cell was interrupted, but node did not stop within %d "
                                    "ms (a busy loop after an await cannot be interrupted): the "
                                    "REPL was killed, its JavaScript variables are lost and the "
                                    "next javascript cell starts a new one; Python and bash "
                                    "are unaffected",
                                    NODE_INTERRUPT_WAIT_MS);
        }
        if (r == -E2BIG) {
                (void) node_kill();
                return error_result("OutputLimitError", 125,
                                    "the JavaScript answer was larger than %zu bytes: the REPL "
                                    "was killed and its variables are lost",
                                    max);
        }
        if (r == -ENOMEM)
                return NULL;
        return ended_result(node_kill());
}
