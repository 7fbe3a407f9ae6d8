/* The runner's parts, shared between runner.c (protocol loop, CPython) and shell.c (bash). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What an execute request adds around one cell, for that cell only (all optional): its stdin
 * (NULL: /dev/null), extra environment (name -> string, borrowed) and working directory
 * (absolute, checked by the driver; the previous one is restored after the cell). */
struct shell_call {
        const char *stdin_text;
        json_t *env;
        const char *cwd;
};

/* Runs code in the session's bash inside the sandbox, output going to the runner's own fds 1
 * and 2. call may be NULL. Returns a new result object {"status","exit_code","error"} (caller
 * decrefs). */
json_t *shell_run(const char *code, const struct shell_call *call);

/* The bash shell's state as a script that recreates it (its exported variables, then a cd to
 * its working directory), for a session that stops. A new string (caller frees), or NULL when
 * no shell has run. Only call between cells. */
char *shell_export_state(void);

/* Makes the next shell started source script first (a resumed session's shell state). */
void shell_set_restore(const char *script);

/* Runs code in the session's JavaScript REPL (node.c), starting one first when none runs; req
 * (borrowed) is the exec request, whose "env" and "cwd" apply to this cell only and whose
 * "language" "typescript" has the REPL transpile the code first. Output goes to
 * the runner's fds 1 and 2. Returns a new result object {"status","result","exit_code","error"}
 * (caller decrefs), or NULL when out of memory. */
json_t *node_run(const char *code, json_t *req);

/* The profile's output cap (each string of an answer is cut to it) and memory limit (V8's heap
 * may grow that far; 0 = node's own default), for REPLs started from now on. */
void node_configure(size_t output_max, uint64_t memory_bytes);

/* Whether a JavaScript REPL runs, holding variables that a snapshot cannot save. */
bool node_has_state(void);

/* Runs code in the session's R REPL (r.c), starting one first when none runs; req (borrowed)
 * is the exec request, whose "env" and "cwd" apply to this cell only. shell_allowed: the
 * profile allows bash, else the R process may execute no program at all. Returns a new result
 * object {"status","result","exit_code","error","outputs"} (caller decrefs), or NULL when out
 * of memory. */
json_t *r_run(const char *code, json_t *req, bool shell_allowed);

/* Whether an R REPL runs, holding variables that a snapshot cannot save. */
bool r_has_state(void);

/* The child REPLs' shared parts (repl.c). A kind says what differs between languages. */
struct repl_kind {
        const char *program;   /* "node", "R": for messages */
        const char *language;  /* "javascript", "r" */
        const char *vars;      /* "JavaScript", "R": whose variables a killed REPL loses */
        const char *missing;   /* the message when check() says it is not installed */
        const char *stop_hint; /* said after "did not stop within N ms", or NULL */
        /* Before the fork: 0, or -ENOENT when the language is not installed. May be NULL. */
        int (*check)(void);
        /* In the forked child, with fd 0 on /dev/null, cells on fd 3, answers to fd 4 and no
         * other fd of the runner's: runs the REPL, which first answers {"status":"ready"}, then
         * one line a cell: {"status": "ok"|"error", "result", "error", "outputs"?}. Never
         * returns. */
        void (*child)(void *arg);
};

struct repl {
        const struct repl_kind *kind;
        pid_t pid; /* the REPL, also its process group; 0 when none runs */
        int cmd_fd;
        int reply_fd;
        unsigned cell_no;
};

#define REPL_INIT(k)                                                                               \
        {                                                                                          \
                .kind = (k), .pid = 0, .cmd_fd = -1, .reply_fd = -1                                \
        }

/* Runs code in the REPL, starting one first (kind->child(arg) in the child) when none runs;
 * req (borrowed) is the exec request, whose "env" and "cwd" go with the cell. An answer longer
 * than max bytes kills the REPL. Returns a new result object (caller decrefs), or NULL when
 * out of memory. */
json_t *repl_run(struct repl *r, void *arg, const char *code, json_t *req, size_t max);

/* Whether the REPL runs, holding variables that a snapshot cannot save. */
bool repl_is_running(const struct repl *r);

/* A result object of status "error" with the error's name and a formatted value. */
json_t *repl_error(const char *name, int exit_code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Zygote mode (zygote.c). zygote_prepare() reads the kernel features from the init request and
 * compiles the seccomp filter; zygote_fork() makes a session for a fork request and returns 0 in
 * the zygote (or -errno), 1 in the session's Python process, which then serves cells on fd 3;
 * zygote_reap() collects exited children. */
int zygote_prepare(json_t *init);
int zygote_fork(json_t *req);
void zygote_reap(void);

/* Writes everything read from in_fd (until EOF) to root/path, making the directories on the
 * way (files.c). path is relative, checked by the daemon; nothing is followed out of root. On
 * failure returns -errno and *ret_step says what failed. */
int runner_put_file(const char *root, const char *path, int in_fd, uint64_t *ret_written,
                    const char **ret_step);
