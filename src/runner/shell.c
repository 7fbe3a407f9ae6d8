/* The bash language: a child shell whose output goes straight to the sandbox's stdout and
 * stderr pipes. A SIGINT sent to the runner (interrupt, timeout) is passed on to the shell's
 * process group so the command stops and the runner lives. */
#include "runner.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t shell_pgid;

static void forward_sigint(int sig)
{
        if (shell_pgid > 0)
                (void) kill(-shell_pgid, sig);
}

json_t *shell_run(const char *code)
{
        struct sigaction sa = { .sa_handler = forward_sigint }, old;
        char *argv[] = { "bash", "-c", (char *) code, NULL };
        char msg[128];
        int status = 0;
        pid_t pid, p;

        pid = fork();
        if (pid < 0)
                return json_pack("{s:s, s:i, s:{s:s, s:s, s:s}}", "status", "error", "exit_code",
                                 126, "error", "name", "OSError", "value", strerror(errno),
                                 "traceback", "");
        if (pid == 0) {
                (void) setpgid(0, 0);
                (void) signal(SIGINT, SIG_DFL);
                execve("/bin/bash", argv, environ);
                _exit(127);
        }
        (void) setpgid(pid, pid);
        shell_pgid = pid;
        (void) sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, &old);
        do
                p = waitpid(pid, &status, 0);
        while (p < 0 && errno == EINTR);
        (void) sigaction(SIGINT, &old, NULL);
        shell_pgid = 0;

        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return json_pack("{s:s, s:i, s:n}", "status", "ok", "exit_code", 0, "error");
        if (WIFSIGNALED(status)) {
                (void) snprintf(msg, sizeof(msg), "bash was killed by signal %d (%s)",
                                WTERMSIG(status), strsignal(WTERMSIG(status)));
                return json_pack("{s:s, s:i, s:{s:s, s:s, s:s}}", "status", "error", "exit_code",
                                 128 + WTERMSIG(status), "error", "name",
                                 WTERMSIG(status) == SIGINT ? "KeyboardInterrupt" : "Signal",
                                 "value", msg, "traceback", "");
        }
        (void) snprintf(msg, sizeof(msg), "bash exited with status %d", WEXITSTATUS(status));
        return json_pack("{s:s, s:i, s:{s:s, s:s, s:s}}", "status", "error", "exit_code",
                         WEXITSTATUS(status), "error", "name", "ExitStatus", "value", msg,
                         "traceback", "");
}
