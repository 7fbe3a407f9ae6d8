/* bench-run: what one-shot `airlock run` costs, next to plain python3 in the same run.
 *
 *   bench-run [AIRLOCK_BINARY] [ITERATIONS]
 *
 * Prints p50 and p99 of: `python3 -c 'print(1)'`; `airlock run -p minimal -` of print(1) (the
 * whole CLI: probe, profile, sandbox, Python start, cell, teardown); and, measured in-process,
 * the jail's own setup (clone to exec of the runner) and a sandbox's start-exec-teardown. Compare
 * the ratios within one run, not absolute numbers across machines. */
#include "base/util.h"
#include "jail/jail.h"
#include "profile/profile.h"
#include "session/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, int n)
{
        qsort(ns, (size_t) n, sizeof(*ns), cmp_u64);
        printf("%-44s p50 %8.2f ms   p99 %8.2f ms   (n=%d)\n", what, ns[n / 2] / 1e6,
               ns[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / 1e6, n);
}

/* Runs argv with stdin from the string `input` and stdout to /dev/null; returns wall ns. */
static int time_command(char *const argv[], const char *input, uint64_t *ret_ns)
{
        int in[2], status;
        uint64_t t0 = now_ns();
        pid_t pid;

        if (pipe(in) < 0)
                return -errno;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);
                dup2(in[0], 0);
                dup2(null, 1);
                close(in[1]);
                execv(argv[0], argv);
                _exit(127);
        }
        close(in[0]);
        if (input)
                (void) !write(in[1], input, strlen(input));
        close(in[1]);
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        *ret_ns = now_ns() - t0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EIO;
        return 0;
}

int main(int argc, char **argv)
{
        const char *airlock = argc > 1 ? argv[1] : "build/src/cli/airlock";
        int n = argc > 2 ? atoi(argv[2]) : 30;
        char *py_argv[] = { "/usr/bin/python3", "-c", "print(1)", NULL };
        char *al_argv[] = { (char *) airlock, "run", "-p", "minimal", "-", NULL };
        struct airlock_error err = { { 0 } };
        struct jail_features f;
        struct profile *p = NULL;
        uint64_t *a, *b, *c, *d;
        int r;

        if (n < 3)
                n = 3;
        a = calloc((size_t) n, sizeof(*a));
        b = calloc((size_t) n, sizeof(*b));
        c = calloc((size_t) n, sizeof(*c));
        d = calloc((size_t) n, sizeof(*d));
        if (!a || !b || !c || !d)
                return 1;

        jail_probe(&f);
        r = profile_load("minimal", &p, &err);
        if (r < 0) {
                fprintf(stderr, "bench-run: %s\n", err.msg);
                return 1;
        }
        for (int i = 0; i < n; i++) {
                struct sandbox *sb = NULL;
                json_t *res = NULL;
                uint64_t t0;

                if (time_command(py_argv, NULL, &a[i]) < 0 ||
                    time_command(al_argv, "print(1)\n", &b[i]) < 0) {
                        fprintf(stderr,
                                "bench-run: a command failed (is %s built, and are we "
                                "root?)\n",
                                airlock);
                        return 1;
                }
                t0 = now_ns();
                r = sandbox_start(&f,
                                  &(struct sandbox_options){ .mode = JAIL_NAMESPACES,
                                                             .profile = p,
                                                             .name = "airlock-bench" },
                                  &sb, &err);
                if (r < 0) {
                        fprintf(stderr, "bench-run: %s\n", err.msg);
                        return 1;
                }
                r = sandbox_exec(sb,
                                 &(struct exec_request){ .language = "python", .code = "print(1)" },
                                 &res, &err);
                c[i] = sandbox_setup_ns(sb);
                json_decref(res);
                sandbox_free(sb);
                d[i] = now_ns() - t0;
                if (r < 0) {
                        fprintf(stderr, "bench-run: %s\n", err.msg);
                        return 1;
                }
        }
        report("python3 -c 'print(1)'", a, n);
        report("airlock run -p minimal (print(1)), CLI", b, n);
        report("jail setup (clone to exec of the runner)", c, n);
        report("sandbox start+exec+teardown, in-process", d, n);
        printf("ratio airlock run / python3: %.2f\n", (double) b[n / 2] / (double) a[n / 2]);
        profile_free(p);
        jail_features_done(&f);
        return 0;
}
