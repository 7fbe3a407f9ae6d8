/* The bash language: one shell per session, started with the first bash cell, whose working
 * directory, variables and functions persist across cells like a terminal's. Each cell is
 * written to a file and sourced with stdin from /dev/null (so `cat` cannot eat the next
 * command), or from a file holding the call's stdin; the shell reports the cell's status on fd 9. A
 * SIGINT to the runner (interrupt, timeout) is passed to the shell's process group: the foreground
 * command stops, the INT trap returns 130 from the sourced cell, and the shell lives on. `exit`
 * ends the shell; the next bash cell starts a new one. Output goes straight to the sandbox's stdout
 * and stderr pipes. */
#include "runner.h"

#include "base/buf.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define SHELL_DIR "/tmp/.airlock-bash"
#define SHELL_CELL SHELL_DIR "/cell.sh"
#define SHELL_CALL SHELL_DIR "/call.sh"
#define SHELL_STDIN SHELL_DIR "/stdin"
#define SHELL_STATE SHELL_DIR "/state.sh"
#define SHELL_RESTORE SHELL_DIR "/restore.sh"
#define SHELL_STATE_MAX (1u << 20)
#define SHELL_STATUS_FD 9
/* The script around a cell: env values (at most 16 MiB in a request) quoted. */
#define SHELL_CALL_MAX (40u << 20)

extern char **environ;

static struct {
        pid_t pid;     /* the shell, also its process group; 0 when none runs */
        int cmd_fd;    /* the shell's stdin: commands */
        int status_fd; /* what the shell prints on fd 9 */
} shell = { 0, -1, -1 };

static volatile sig_atomic_t shell_pgid;

/* A saved shell state (see shell_set_restore) that the next shell started sources first. */
static char *restore_script;

static void forward_sigint(int sig)
{
        if (shell_pgid > 0)
                (void) kill(-shell_pgid, sig);
}

static int write_script(const char *path, const char *code);

static void shell_reset(void)
{
        if (shell.cmd_fd >= 0)
                (void) close(shell.cmd_fd);
        if (shell.status_fd >= 0)
                (void) close(shell.status_fd);
        shell.cmd_fd = shell.status_fd = -1;
        shell.pid = 0;
}

static int shell_start(void)
{
        static const char prologue[] = "trap 'return 130' INT\n";
        int cmd[2], status[2];
        pid_t pid;

        if (pipe2(cmd, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(status, O_CLOEXEC) < 0) {
                (void) close(cmd[0]);
                (void) close(cmd[1]);
                return -errno;
        }
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                (void) close(cmd[0]), (void) close(cmd[1]);
                (void) close(status[0]), (void) close(status[1]);
                return r;
        }
        if (pid == 0) {
                char *argv[] = { "bash", "--noprofile", "--norc", NULL };
                (void) setpgid(0, 0);
                (void) signal(SIGINT, SIG_DFL);
                (void) signal(SIGPIPE, SIG_DFL);
                /* Above the target fd first: the status pipe's end may sit on fd 9 already,
                 * where dup2() would leave it close-on-exec and bash would start without it
                 * (the runner then waits for a status that never comes). */
                int st = fcntl(status[1], F_DUPFD_CLOEXEC, SHELL_STATUS_FD + 1);
                if (st < 0 || dup2(cmd[0], 0) < 0 || dup2(st, SHELL_STATUS_FD) < 0)
                        _exit(127);
                /* Not the runner's control socket, nor anything else of the runner's. */
                (void) syscall(SYS_close_range, 3, SHELL_STATUS_FD - 1, CLOSE_RANGE_CLOEXEC);
                (void) syscall(SYS_close_range, SHELL_STATUS_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC);
                execve("/bin/bash", argv, environ);
                _exit(127);
        }
        (void) setpgid(pid, pid);
        (void) close(cmd[0]);
        (void) close(status[1]);
        shell.pid = pid;
        shell.cmd_fd = cmd[1];
        shell.status_fd = status[0];
        if (write_full(shell.cmd_fd, prologue, sizeof(prologue) - 1) < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                shell_reset();
                return -EPIPE;
        }
        if (restore_script) {
                /* A resumed session's shell: its variables and directory come back before its
                 * first cell. The script is the session's own (shell_export_state). */
                static const char source[] =
                        "builtin source " SHELL_RESTORE " </dev/null >/dev/null 2>&1; "
                        "command rm -f " SHELL_RESTORE "\n";
                if (write_script(SHELL_RESTORE, restore_script) == 0)
                        (void) write_full(shell.cmd_fd, source, sizeof(source) - 1);
                free(restore_script);
                restore_script = NULL;
        }
        return 0;
}

static int write_script(const char *path, const char *code)
{
        int fd, r;

        if (mkdir(SHELL_DIR, 0700) < 0 && errno != EEXIST)
                return -errno;
        (void) unlink(path); /* whatever user code put there, start from a new file */
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        r = write_full(fd, code, strlen(code));
        (void) close(fd);
        return r;
}

/* Reads the status line the shell prints after the cell. Returns the status, or -EPIPE when
 * the shell ended instead (exit, a fatal signal). */
static int read_status(void)
{
        char buf[32];
        size_t len = 0;

        while (len < sizeof(buf) - 1) {
                ssize_t n = read(shell.status_fd, buf + len, 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -EPIPE;
                }
                if (n == 0)
                        return -EPIPE;
                if (buf[len] == '\n')
                        break;
                len++;
        }
        buf[len] = '\0';
        return (int) strtol(buf, NULL, 10) & 0xff;
}

static json_t *status_result(int code, bool shell_ended)
{
        char msg[160];

        if (code == 0)
                return json_pack("{s:s, s:i, s:n}", "status", "ok", "exit_code", 0, "error");
        if (code == 130 && !shell_ended)
                return json_pack("{s:s, s:i, s:{s:s, s:s, s:s}}", "status", "error", "exit_code",
                                 130, "error", "name", "KeyboardInterrupt", "value",
                                 "the command was interrupted", "traceback", "");
        (void) snprintf(msg, sizeof(msg), "bash %s with status %d",
                        shell_ended ? "exited" : "cell ended", code);
        return json_pack("{s:s, s:i, s:{s:s, s:s, s:s}}", "status", "error", "exit_code", code,
                         "error", "name", "ExitStatus", "value", msg, "traceback", "");
}

static int append_str(struct buf *b, const char *text)
{
        return buf_append(b, text, strlen(text), SHELL_CALL_MAX);
}

/* Appends text to b single-quoted for bash ('it'\''s'). */
static int quote_append(struct buf *b, const char *text)
{
        int r = buf_append(b, "'", 1, SHELL_CALL_MAX);

        for (const char *p = text; r >= 0 && *p; p++)
                r = *p == '\'' ? buf_append(b, "'\\''", 4, SHELL_CALL_MAX)
                               : buf_append(b, p, 1, SHELL_CALL_MAX);
        return r < 0 ? r : buf_append(b, "'", 1, SHELL_CALL_MAX);
}

static bool env_name_ok(const char *name)
{
        if (!((*name >= 'A' && *name <= 'Z') || (*name >= 'a' && *name <= 'z') || *name == '_'))
                return false;
        for (const char *p = name + 1; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                      (*p >= '0' && *p <= '9') || *p == '_'))
                        return false;
        return true;
}

/* The script around a cell with a per-call env or cwd: `NAME=value source cell` gives the
 * cell's commands the variables and bash restores them afterwards (also a variable the cell
 * set), and the cd is undone after the cell so the session keeps its own directory. Its
 * status variable is unset by the command line after the status is printed. */
static int call_script(const struct shell_call *call, const char *redirect, struct buf *b)
{
        const char *name;
        json_t *value;
        int r = 0;

        if (call->cwd) {
                r = append_str(b, "__airlock_pwd=$PWD\nif builtin cd -- ");
                if (r >= 0)
                        r = quote_append(b, call->cwd);
                if (r >= 0)
                        r = append_str(b, "; then\n");
        }
        json_object_foreach (call->env, name, value) {
                if (r < 0)
                        break;
                if (!json_is_string(value) || !env_name_ok(name))
                        continue; /* the driver checked them: not reached */
                r = append_str(b, name);
                if (r >= 0)
                        r = append_str(b, "=");
                if (r >= 0)
                        r = quote_append(b, json_string_value(value));
                if (r >= 0)
                        r = append_str(b, " ");
        }
        if (r >= 0)
                r = append_str(b, "source " SHELL_CELL " <");
        if (r >= 0)
                r = append_str(b, redirect);
        if (r >= 0)
                r = append_str(b, "\n__airlock_status=$?\n");
        if (r >= 0 && call->cwd) {
                static const char tail[] = "builtin cd -- \"$__airlock_pwd\"\nelse\n"
                                           "__airlock_status=1\nfi\nbuiltin unset __airlock_pwd\n";
                r = append_str(b, tail);
        }
        if (r >= 0)
                r = append_str(b, "builtin return \"$__airlock_status\"\n");
        return r;
}

json_t *shell_run(const char *code, const struct shell_call *call)
{
        static const char command[] = "source " SHELL_CELL " </dev/null; printf '%d\\n' \"$?\" "
                                      ">&9\n";
        static const char command_stdin[] =
                "source " SHELL_CELL " <" SHELL_STDIN "; printf '%d\\n' \"$?\" >&9\n";
        static const char command_call[] = "source " SHELL_CALL " </dev/null; printf '%d\\n' "
                                           "\"$?\" >&9; builtin unset __airlock_status\n";
        struct sigaction sa = { .sa_handler = forward_sigint }, old;
        const char *cmd = command;
        struct buf script = { 0 };
        int r, code_status, wstatus = 0;

        r = write_script(SHELL_CELL, code);
        if (r >= 0 && call && call->stdin_text) {
                r = write_script(SHELL_STDIN, call->stdin_text);
                cmd = command_stdin;
        }
        if (r >= 0 && call && (call->cwd || json_object_size(call->env) > 0)) {
                r = call_script(call, call->stdin_text ? SHELL_STDIN : "/dev/null", &script);
                if (r >= 0)
                        r = write_script(SHELL_CALL, script.data);
                buf_done(&script);
                cmd = command_call;
        }
        if (r < 0)
                return json_pack("{s:s, s:i, s:{s:s, s:s, s:s}}", "status", "error", "exit_code",
                                 126, "error", "name", "OSError", "value",
                                 "cannot write the cell for bash", "traceback", "");
        for (int attempt = 0; attempt < 2; attempt++) {
                if (shell.pid == 0 && shell_start() < 0)
                        break;
                if (write_full(shell.cmd_fd, cmd, strlen(cmd)) == 0)
                        break;
                /* The shell died since the last cell: reap it and start another. */
                (void) kill(shell.pid, SIGKILL);
                (void) waitpid(shell.pid, NULL, 0);
                shell_reset();
        }
        if (shell.pid == 0)
                return json_pack("{s:s, s:i, s:{s:s, s:s, s:s}}", "status", "error", "exit_code",
                                 126, "error", "name", "OSError", "value", "cannot start bash",
                                 "traceback", "");

        shell_pgid = shell.pid;
        (void) sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, &old);
        code_status = read_status();
        (void) sigaction(SIGINT, &old, NULL);
        shell_pgid = 0;
        if (cmd != command) {
                /* The call's stdin and env are its own: nothing of them stays on disk. */
                (void) unlink(SHELL_STDIN);
                (void) unlink(SHELL_CALL);
        }

        if (code_status >= 0)
                return status_result(code_status, false);

        /* The shell ended: `exit n`, exec of something that exited, or a signal. */
        while (waitpid(shell.pid, &wstatus, 0) < 0 && errno == EINTR)
                ;
        shell_reset();
        if (WIFSIGNALED(wstatus))
                return status_result(128 + WTERMSIG(wstatus), true);
        return status_result(WEXITSTATUS(wstatus), true);
}

char *shell_export_state(void)
{
        /* builtins only: user code may have shadowed export or printf with functions. The
         * state is written to a file rather than the output pipes, which are the user's. */
        static const char command[] = "{ builtin export -p; builtin printf 'builtin cd -- %q\\n' "
                                      "\"$PWD\"; } >| " SHELL_STATE " 2>/dev/null </dev/null; "
                                      "builtin printf '0\\n' >&9\n";
        char *buf = NULL;
        size_t len = 0;
        int fd;

        if (shell.pid == 0)
                return restore_script ? strdup(restore_script) : NULL;
        (void) unlink(SHELL_STATE);
        if (write_full(shell.cmd_fd, command, sizeof(command) - 1) < 0 || read_status() < 0)
                return NULL;
        fd = open(SHELL_STATE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return NULL;
        buf = malloc(SHELL_STATE_MAX + 1);
        while (buf && len < SHELL_STATE_MAX) {
                ssize_t n = read(fd, buf + len, SHELL_STATE_MAX - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t) n;
        }
        (void) close(fd);
        (void) unlink(SHELL_STATE);
        if (buf)
                buf[len] = '\0';
        return buf;
}

void shell_set_restore(const char *script)
{
        free(restore_script);
        restore_script = script && *script ? strdup(script) : NULL;
}
