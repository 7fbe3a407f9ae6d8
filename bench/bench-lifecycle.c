/* bench-lifecycle: the session lifecycle of LIFECYCLE-API.md (fork, stop, transparent resume)
 * and what stopped sessions cost the live ones.
 *
 *   bench-lifecycle [AIRLOCK_BINARY] [-n ROUNDS] [--stopped N] [--only NAME] [--pool-size N]
 *
 * Starts its own `airlock serve --pool-size 2 --checkpoint-after 0` (no background checkpoint
 * lands inside a timed request) on a free loopback port (as root; also
 * $AIRLOCK_BIN) and prints one line per figure: p50, p99, the target and, where there is a
 * reference, the ratio to it. Every timed operation is one HTTP request on one keep-alive
 * connection; 300 ms pass (untimed) before each, 1.5 s before a fork, so the warm pool is
 * full. NAME is one of:
 *
 *   fork          POST /fork {"n":5} of a session holding a 10 MB DataFrame, until its 201
 *                 answer (all 5 children ready); the children are deleted after each round,
 *                 untimed. Target p50 < 25 ms.
 *   fork-100mb    the same with a 100 MB DataFrame. Target p50 < 200 ms.
 *   resume        POST execute `x` on a stopped session holding a few small variables: the
 *                 transparent resume plus the first result. The stop before it is untimed.
 *                 Target p50 < 20 ms.
 *   resume-100mb  the same for a session holding a 100 MB DataFrame (execute `len(df)`),
 *                 against pickle.load of the same DataFrame from a file in the page cache
 *                 (/usr/bin/python3 on the host, in-process timing). Target <= 2x.
 *   stop-100mb    POST /stop of that session, against pickle.dump(df, f, protocol=5) by
 *                 /usr/bin/python3 into a file of the daemon's --state-dir, written the way
 *                 the daemon writes its state: temporary file, fsync, rename, fsync of the
 *                 directory. Target <= 2x. (resume-100mb and stop-100mb share one loop.)
 *   stopped       create to first result (POST /v1/sessions, then execute `1`) and the hot
 *                 execute of `1`, with 0 stopped sessions, then again with N on disk (made by
 *                 create + stop each; the setup is timed and printed), the ratio, and the
 *                 daemon's VmRSS before and after the setup. Target ratio ~1.
 *
 * The daemon and its temporary state directory are removed at exit, on failure and on
 * SIGINT/SIGTERM/SIGHUP as well. */
#include "bench-util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PYTHON "/usr/bin/python3"
#define FORK_CHILDREN 5
#define ROWS_10MB (10u * 1024 * 1024 / 8 / 8)   /* 8 float64 columns: 10 MiB */
#define ROWS_100MB (100u * 1024 * 1024 / 8 / 8) /* 100 MiB */
#define DF_SEED 20240501u /* the sessions and the host reference build the same DataFrame */
#define SETTLE_MS 300     /* untimed pause before each timed request: the warm pool refills */
/* Before a fork round: the pool refills five members, each a zygote fork and a warm-up. */
#define FORK_SETTLE_MS 1500
#define HOT_WARMUP 50
#define HOT_ROUNDS 500
#define SETUP_MAX_S 1800 /* making the stopped sessions stops here, whatever N */
#define MS 1000000ull

/* Host reference for resume-100mb and stop-100mb: argv d rounds rows seed. Prints "dump NS"
 * and "load NS" lines (in-process timing, interpreter start and imports excluded), then
 * "bytes N", the size of the pickle. dump() writes as snapshot.c does: temporary file,
 * fsync, rename, fsync of the directory. */
static const char reference_py[] =
        "import os, pickle, sys, time\n"
        "import numpy as np, pandas as pd\n"
        "d, rounds, rows, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), "
        "int(sys.argv[4])\n"
        "np.random.seed(seed)\n"
        "df = pd.DataFrame(np.random.rand(rows, 8))\n"
        "os.makedirs(d, exist_ok=True)\n"
        "path, tmp = os.path.join(d, 'df.pickle'), os.path.join(d, 'df.pickle.tmp')\n"
        "def dump():\n"
        "    t = time.perf_counter_ns()\n"
        "    with open(tmp, 'wb') as f:\n"
        "        pickle.dump(df, f, protocol=5)\n"
        "        f.flush()\n"
        "        os.fsync(f.fileno())\n"
        "    os.rename(tmp, path)\n"
        "    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)\n"
        "    os.fsync(fd)\n"
        "    os.close(fd)\n"
        "    return time.perf_counter_ns() - t\n"
        "def load():\n"
        "    t = time.perf_counter_ns()\n"
        "    with open(path, 'rb') as f:\n"
        "        obj = pickle.load(f)\n"
        "    t = time.perf_counter_ns() - t\n"
        "    del obj\n"
        "    return t\n"
        "dump()\n"
        "load()\n"
        "for _ in range(rounds):\n"
        "    print('dump', dump())\n"
        "for _ in range(rounds):\n"
        "    print('load', load())\n"
        "print('bytes', os.path.getsize(path))\n"
        "os.unlink(path)\n"
        "os.rmdir(d)\n";

static struct bench_daemon bd;
static volatile sig_atomic_t got_signal;
static volatile pid_t reference_pid = -1;

struct figure {
        uint64_t p50, p99;
        size_t n;
};

struct options {
        size_t rounds;
        unsigned stopped;
        const char *only;
        const char *pool_size; /* the daemon's --pool-size */
};

static void on_signal(int sig)
{
        got_signal = sig;
        /* The request in flight then fails at once, and fail() cleans up. */
        if (bd.pid > 0)
                (void) kill(bd.pid, SIGTERM);
        if (reference_pid > 0)
                (void) kill(reference_pid, SIGTERM);
}

static _Noreturn __attribute__((format(printf, 1, 2))) void fail(const char *fmt, ...)
{
        char msg[2048];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (got_signal)
                bench_die(&bd, "interrupted by signal %d (%s)", (int) got_signal, msg);
        bench_die(&bd, "%s", msg);
}

static bool wants(const struct options *o, const char *name)
{
        return !o->only || !strcmp(o->only, name);
}

/* ---- requests ---- */

/* One request that must answer `want`; anything else ends the benchmark with the answer. */
static const char *request(struct bench_conn *c, const char *method, const char *path,
                           const char *body, int want)
{
        const char *resp;
        int status = 0;

        if (got_signal)
                fail("%s %s not sent", method, path);
        if (bench_http(c, method, path, body, &status, &resp) < 0)
                fail("%s %s: %m", method, path);
        if (status != want) {
                bool lifecycle = strstr(path, "/stop") || strstr(path, "/fork");
                int len = (int) strnlen(resp, 600);

                while (len > 0 && (resp[len - 1] == '\n' || resp[len - 1] == ' '))
                        len--;
                fail("%s %s answered %d, not %d: %.*s%s", method, path, status, want, len, resp,
                     lifecycle && (status == 404 || status == 405)
                             ? "\n(if the route itself is missing, this airlock predates the "
                               "session lifecycle of LIFECYCLE-API.md)"
                             : "");
        }
        return resp;
}

/* Whether json has "key": followed by value (a JSON literal such as true or "41"). */
static bool json_is(const char *json, const char *key, const char *value)
{
        char pat[128];
        const char *p = json;

        (void) snprintf(pat, sizeof(pat), "\"%s\":", key);
        while ((p = strstr(p, pat))) {
                p += strlen(pat);
                while (*p == ' ')
                        p++;
                if (!strncmp(p, value, strlen(value)))
                        return true;
        }
        return false;
}

/* Copies every "id" string of json (the session objects of a fork's answer) other than
 * `except` into ids. */
static size_t json_ids(const char *json, const char *except, char (*ids)[64], size_t max)
{
        size_t n = 0;
        const char *p = json;

        while (n < max && (p = strstr(p, "\"id\":"))) {
                if (bench_json_str(p, "id", ids[n], sizeof(ids[n])) == 0 &&
                    strcmp(ids[n], except) != 0)
                        n++;
                p += 5;
        }
        return n;
}

static void create_session(struct bench_conn *c, char id[64])
{
        const char *resp = request(c, "POST", "/v1/sessions", "{\"profile\":\"default\"}", 201);

        if (bench_json_str(resp, "id", id, 64) < 0)
                fail("POST /v1/sessions answered no id: %.600s", resp);
}

/* Runs code (already JSON-escaped) and checks the cell succeeded with the result `result`
 * (a JSON literal) and, if resumed, that this execution carried "resumed": true. */
static void execute(struct bench_conn *c, const char *id, const char *code, const char *result,
                    bool resumed)
{
        char path[512], *body = NULL;
        const char *resp;

        if (asprintf(&body, "{\"code\":\"%s\"}", code) < 0)
                fail("out of memory");
        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);
        resp = request(c, "POST", path, body, 200);
        free(body);
        if (!json_is(resp, "status", "\"ok\"") || (result && !json_is(resp, "result", result)))
                fail("execute in %s did not give the result %s: %.600s", id, result, resp);
        if (resumed && !json_is(resp, "resumed", "true"))
                fail("the first execute after a stop of %s has no \"resumed\": true, so it may "
                     "not have resumed anything: %.600s",
                     id, resp);
}

static void stop_session(struct bench_conn *c, const char *id)
{
        char path[512];
        const char *resp;

        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/stop", id);
        resp = request(c, "POST", path, NULL, 200);
        if (!json_is(resp, "state", "\"stopped\""))
                fail("POST %s answered 200 but not \"state\": \"stopped\": %.600s", path, resp);
}

static void delete_session(struct bench_conn *c, const char *id)
{
        char path[512];

        (void) snprintf(path, sizeof(path), "/v1/sessions/%s", id);
        (void) request(c, "DELETE", path, NULL, 200);
}

/* ---- numbers ---- */

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

static struct figure figure_of(uint64_t *ns, size_t n)
{
        qsort(ns, n, sizeof(*ns), cmp_u64);
        return (struct figure){ .p50 = bench_percentile(ns, n, 0.50),
                                .p99 = bench_percentile(ns, n, 0.99),
                                .n = n };
}

/* One line: name, p50, p99, n, then `tail` (target, ratio). */
static void print_figure(const char *name, struct figure f, const char *tail)
{
        printf("%-48s p50 %9.3f ms  p99 %9.3f ms  (n=%zu)%s%s\n", name, (double) f.p50 / 1e6,
               (double) f.p99 / 1e6, f.n, tail ? "  " : "", tail ? tail : "");
}

static const char *met(bool ok)
{
        return ok ? "met" : "MISSED";
}

static double ratio(uint64_t a, uint64_t b)
{
        return b ? (double) a / (double) b : 0.0;
}

/* VmRSS of pid in kB, 0 if unknown. */
static unsigned long long vm_rss_kb(pid_t pid)
{
        char path[64], line[256];
        unsigned long long kb = 0;
        FILE *f;

        (void) snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (!strncmp(line, "VmRSS:", 6))
                        kb = strtoull(line + 6, NULL, 10);
        fclose(f);
        return kb;
}

/* Entries of <state dir>/sessions: the sessions saved on disk. */
static long count_saved_sessions(void)
{
        char path[160];
        struct dirent *de;
        long n = 0;
        DIR *dir;

        (void) snprintf(path, sizeof(path), "%s/state/sessions", bd.dir);
        dir = opendir(path);
        if (!dir)
                return -1;
        while ((de = readdir(dir)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(dir);
        return n;
}

/* ---- the host reference ---- */

/* Runs argv with stdout into buf (at most size - 1 bytes kept, NUL-terminated), stdin on
 * /dev/null and stderr kept. Returns 0 if it exited with status 0, else -1. */
static int run_capture(char *const argv[], char *buf, size_t size)
{
        size_t len = 0;
        int fds[2], status = 0;
        pid_t pid, w;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return -1;
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0) {
                close(fds[0]);
                close(fds[1]);
                return -1;
        }
        if (pid == 0) {
                int null = open("/dev/null", O_RDONLY);

                if (null < 0 || dup2(null, 0) < 0 || dup2(fds[1], 1) < 0)
                        _exit(126);
                execv(argv[0], argv);
                dprintf(2, "bench-lifecycle: exec %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        reference_pid = pid;
        close(fds[1]);
        for (;;) {
                char scratch[4096];
                ssize_t n;

                if (len + 1 < size)
                        n = read(fds[0], buf + len, size - 1 - len);
                else
                        n = read(fds[0], scratch, sizeof(scratch)); /* drain, keep nothing */
                if (n < 0 && errno == EINTR && !got_signal)
                        continue;
                if (n <= 0)
                        break;
                if (len + 1 < size)
                        len += (size_t) n;
        }
        buf[len] = '\0';
        close(fds[0]);
        while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
                ;
        reference_pid = -1;
        if (w != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -1;
        return 0;
}

/* Fills dump[] and load[] (rounds each) from /usr/bin/python3 timing pickle.dump and
 * pickle.load of the 100 MB DataFrame in <state dir>/bench-reference; *ret_bytes gets the
 * size of the pickle. */
static void host_reference(size_t rounds, uint64_t *dump, uint64_t *load,
                           unsigned long long *ret_bytes)
{
        char dir[160], n_rounds[32], rows[32], seed[32];
        char *argv[] = { PYTHON, "-c", (char *) reference_py, dir, n_rounds, rows, seed, NULL };
        size_t cap = 64 * rounds + 256, n_dump = 0, n_load = 0;
        char *out = malloc(cap), *line, *save = NULL;

        if (!out)
                fail("out of memory");
        (void) snprintf(dir, sizeof(dir), "%s/state/bench-reference", bd.dir);
        (void) snprintf(n_rounds, sizeof(n_rounds), "%zu", rounds);
        (void) snprintf(rows, sizeof(rows), "%u", ROWS_100MB);
        (void) snprintf(seed, sizeof(seed), "%u", DF_SEED);
        if (run_capture(argv, out, cap) < 0)
                fail("the reference (%s, pickle of a 100 MB DataFrame in %s) failed; are numpy "
                     "and pandas installed for it?",
                     PYTHON, dir);
        *ret_bytes = 0;
        for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                if (!strncmp(line, "dump ", 5) && n_dump < rounds)
                        dump[n_dump++] = strtoull(line + 5, NULL, 10);
                else if (!strncmp(line, "load ", 5) && n_load < rounds)
                        load[n_load++] = strtoull(line + 5, NULL, 10);
                else if (!strncmp(line, "bytes ", 6))
                        *ret_bytes = strtoull(line + 6, NULL, 10);
        }
        free(out);
        if (n_dump != rounds || n_load != rounds)
                fail("the reference printed %zu dump and %zu load times, not %zu each", n_dump,
                     n_load, rounds);
}

/* ---- the measurements ---- */

static void bench_fork(struct bench_conn *c, size_t rounds, unsigned rows, const char *label,
                       unsigned target_ms)
{
        char parent[64], path[128], children[FORK_CHILDREN + 1][64], code[256], shape[64];
        uint64_t *ns = calloc(rounds, sizeof(*ns));
        char tail[96], name[96];
        struct figure f;

        if (!ns)
                fail("out of memory");
        (void) snprintf(code, sizeof(code),
                        "import pandas as pd, numpy as np; np.random.seed(%u); "
                        "df = pd.DataFrame(np.random.rand(%u, 8)); df.shape",
                        DF_SEED, rows);
        (void) snprintf(shape, sizeof(shape), "\"(%u, 8)\"", rows);
        create_session(c, parent);
        execute(c, parent, code, shape, false);
        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/fork", parent);

        /* round -1 is the warm-up, which also checks that a child holds the DataFrame */
        for (long i = -1; i < (long) rounds; i++) {
                const char *resp;
                uint64_t t0;
                size_t got;

                bench_sleep_ms(FORK_SETTLE_MS);
                t0 = bench_now_ns();
                resp = request(c, "POST", path, "{\"n\":5}", 201);
                if (i >= 0)
                        ns[i] = bench_now_ns() - t0;
                got = json_ids(resp, parent, children, FORK_CHILDREN + 1);
                if (got != FORK_CHILDREN) {
                        for (size_t j = 0; j < got; j++)
                                delete_session(c, children[j]);
                        fail("POST %s {\"n\":5} answered %zu session ids, not 5", path, got);
                }
                if (i < 0)
                        execute(c, children[0], "df.shape", shape, false);
                for (size_t j = 0; j < got; j++)
                        delete_session(c, children[j]);
        }
        delete_session(c, parent);

        f = figure_of(ns, rounds);
        (void) snprintf(tail, sizeof(tail), "target p50 < %u ms: %s", target_ms,
                        met(f.p50 < target_ms * MS));
        (void) snprintf(name, sizeof(name), "fork %s DataFrame into 5 (POST /fork n=5)", label);
        print_figure(name, f, tail);
        free(ns);
}

static void bench_resume_small(struct bench_conn *c, size_t rounds)
{
        uint64_t *ns = calloc(rounds, sizeof(*ns));
        char id[64], tail[96];
        struct figure f;

        if (!ns)
                fail("out of memory");
        create_session(c, id);
        execute(c, id, "x = 41; y = 'hello'; z = [1, 2.5, 'three']; w = {'a': 1}; x", "\"41\"",
                false);
        for (long i = -1; i < (long) rounds; i++) {
                uint64_t t0;

                stop_session(c, id);
                bench_sleep_ms(SETTLE_MS);
                t0 = bench_now_ns();
                execute(c, id, "x", "\"41\"", true);
                if (i >= 0)
                        ns[i] = bench_now_ns() - t0;
        }
        delete_session(c, id);

        f = figure_of(ns, rounds);
        (void) snprintf(tail, sizeof(tail), "target p50 < 20 ms: %s", met(f.p50 < 20 * MS));
        print_figure("resume small state to first result (execute x)", f, tail);
        free(ns);
}

/* resume-100mb and stop-100mb: one session stopped and resumed in turn, and the host
 * reference first, while the daemon is idle. */
static void bench_large(struct bench_conn *c, size_t rounds, bool show_resume, bool show_stop)
{
        uint64_t *stop = calloc(rounds, sizeof(uint64_t));
        uint64_t *resume = calloc(rounds, sizeof(uint64_t));
        uint64_t *dump = calloc(rounds, sizeof(uint64_t));
        uint64_t *load = calloc(rounds, sizeof(uint64_t));
        char id[64], code[256], rows[32], tail[160], path[256];
        unsigned long long ref_bytes = 0;
        struct figure f_stop, f_resume, f_dump, f_load;
        struct stat st;
        bool have_size = false;

        if (!stop || !resume || !dump || !load)
                fail("out of memory");
        host_reference(rounds, dump, load, &ref_bytes);

        (void) snprintf(code, sizeof(code),
                        "import pandas as pd, numpy as np; np.random.seed(%u); "
                        "df = pd.DataFrame(np.random.rand(%u, 8)); len(df)",
                        DF_SEED, ROWS_100MB);
        (void) snprintf(rows, sizeof(rows), "\"%u\"", ROWS_100MB);
        create_session(c, id);
        execute(c, id, code, rows, false);
        /* the size of what the daemon saved, beside the reference's */
        (void) snprintf(path, sizeof(path), "%s/state/sessions/%s/python.state", bd.dir, id);
        for (long i = -1; i < (long) rounds; i++) {
                uint64_t t0;

                bench_sleep_ms(SETTLE_MS);
                t0 = bench_now_ns();
                stop_session(c, id);
                if (i >= 0)
                        stop[i] = bench_now_ns() - t0;
                have_size = stat(path, &st) == 0;
                bench_sleep_ms(SETTLE_MS);
                t0 = bench_now_ns();
                execute(c, id, "len(df)", rows, true);
                if (i >= 0)
                        resume[i] = bench_now_ns() - t0;
        }
        delete_session(c, id);

        f_stop = figure_of(stop, rounds);
        f_resume = figure_of(resume, rounds);
        f_dump = figure_of(dump, rounds);
        f_load = figure_of(load, rounds);
        if (show_resume) {
                print_figure("reference: pickle.load 100 MB, page cache", f_load,
                             "(" PYTHON ", in-process)");
                (void) snprintf(tail, sizeof(tail), "ratio %.2fx pickle.load  target <= 2x: %s",
                                ratio(f_resume.p50, f_load.p50),
                                met(f_resume.p50 <= 2 * f_load.p50));
                print_figure("resume 100 MB DataFrame to first result", f_resume, tail);
        }
        if (show_stop) {
                print_figure("reference: pickle.dump 100 MB + fsync, state dir", f_dump,
                             "(" PYTHON ", in-process)");
                (void) snprintf(tail, sizeof(tail), "ratio %.2fx pickle.dump  target <= 2x: %s",
                                ratio(f_stop.p50, f_dump.p50), met(f_stop.p50 <= 2 * f_dump.p50));
                print_figure("stop 100 MB DataFrame session (POST /stop)", f_stop, tail);
        }
        printf("  (pickle of the reference %.1f MiB; python.state saved by the daemon %s%.1f "
               "MiB)\n",
               (double) ref_bytes / 1048576.0, have_size ? "" : "unknown, ",
               have_size ? (double) st.st_size / 1048576.0 : 0.0);
        free(stop);
        free(resume);
        free(dump);
        free(load);
}

/* Create to first result, `rounds` times (sessions deleted untimed), then the hot execute of
 * `1` in one session, HOT_ROUNDS times. */
static void create_and_hot(struct bench_conn *c, size_t rounds, struct figure *ret_create,
                           struct figure *ret_hot)
{
        uint64_t *create = calloc(rounds, sizeof(uint64_t));
        uint64_t *hot = calloc(HOT_ROUNDS, sizeof(uint64_t));
        char id[64];

        if (!create || !hot)
                fail("out of memory");
        for (long i = -1; i < (long) rounds; i++) {
                uint64_t t0;

                bench_sleep_ms(SETTLE_MS);
                t0 = bench_now_ns();
                create_session(c, id);
                execute(c, id, "1", "\"1\"", false);
                if (i >= 0)
                        create[i] = bench_now_ns() - t0;
                delete_session(c, id);
        }
        bench_sleep_ms(SETTLE_MS);
        create_session(c, id);
        for (long i = -HOT_WARMUP; i < HOT_ROUNDS; i++) {
                uint64_t t0 = bench_now_ns();

                execute(c, id, "1", "\"1\"", false);
                if (i >= 0)
                        hot[i] = bench_now_ns() - t0;
        }
        /* deleted, not kept: it would be stopped by --stop-after during a long setup */
        delete_session(c, id);
        *ret_create = figure_of(create, rounds);
        *ret_hot = figure_of(hot, HOT_ROUNDS);
        free(create);
        free(hot);
}

static void bench_stopped(struct bench_conn *c, size_t rounds, unsigned want)
{
        struct figure create0, hot0, create1, hot1;
        unsigned long long rss0, rss1;
        unsigned made = 0;
        char id[64], name[96], tail[160];
        uint64_t t0, setup;
        long saved;

        saved = count_saved_sessions();
        if (saved > 0)
                printf("  (note: %ld sessions already saved on disk before the baseline)\n", saved);
        create_and_hot(c, rounds, &create0, &hot0);
        bench_sleep_ms(1000);
        rss0 = vm_rss_kb(bd.pid);

        t0 = bench_now_ns();
        for (; made < want; made++) {
                if (bench_now_ns() - t0 > SETUP_MAX_S * 1000000000ull) {
                        printf("  (setup stopped at its bound of %d s)\n", SETUP_MAX_S);
                        break;
                }
                create_session(c, id);
                stop_session(c, id);
                if ((made + 1) % 1000 == 0)
                        fprintf(stderr, "bench-lifecycle: %u/%u stopped sessions, %.1f s\n",
                                made + 1, want, (double) (bench_now_ns() - t0) / 1e9);
        }
        setup = bench_now_ns() - t0;
        saved = count_saved_sessions();
        printf("setup: %u sessions created and stopped in %.1f s (%.2f ms each); %ld saved in "
               "%s/state/sessions\n",
               made, (double) setup / 1e9, made ? (double) setup / 1e6 / made : 0.0, saved, bd.dir);
        bench_sleep_ms(1000);
        rss1 = vm_rss_kb(bd.pid);

        create_and_hot(c, rounds, &create1, &hot1);
        print_figure("create to first result, 0 stopped sessions", create0, NULL);
        (void) snprintf(name, sizeof(name), "create to first result, %u stopped sessions", made);
        (void) snprintf(tail, sizeof(tail), "ratio %.2fx the 0-stopped p50  target ~1x",
                        ratio(create1.p50, create0.p50));
        print_figure(name, create1, tail);
        print_figure("hot execute 1, 0 stopped sessions", hot0, NULL);
        (void) snprintf(name, sizeof(name), "hot execute 1, %u stopped sessions", made);
        (void) snprintf(tail, sizeof(tail), "ratio %.2fx the 0-stopped p50  target ~1x",
                        ratio(hot1.p50, hot0.p50));
        print_figure(name, hot1, tail);
        printf("daemon VmRSS: %.1f MiB with 0 stopped sessions, %.1f MiB with %u (%+.1f MiB, "
               "%+.2f KiB per stopped session)\n",
               (double) rss0 / 1024.0, (double) rss1 / 1024.0, made,
               ((double) rss1 - (double) rss0) / 1024.0,
               made ? ((double) rss1 - (double) rss0) / made : 0.0);
}

/* ---- main ---- */

static const char usage[] =
        "usage: bench-lifecycle [AIRLOCK_BINARY] [-n ROUNDS] [--stopped N] [--only NAME]\n"
        "  -n ROUNDS     timed rounds per figure (default 20)\n"
        "  --stopped N   stopped sessions for the 'stopped' figures (default 10000)\n"
        "  --only NAME   fork, fork-100mb, resume, resume-100mb, stop-100mb or stopped\n"
        "  --pool-size N the daemon's warm pool per profile (default 2, the daemon's own\n"
        "                default; a fork of 5 takes its sandboxes from it)\n"
        "AIRLOCK_BINARY defaults to $AIRLOCK_BIN, else build/src/cli/airlock.\n";

static int parse_options(int argc, char **argv, struct options *o, const char **ret_bin)
{
        static const struct option opts[] = {
                { "rounds", required_argument, NULL, 'n' },
                { "stopped", required_argument, NULL, 's' },
                { "only", required_argument, NULL, 'o' },
                { "pool-size", required_argument, NULL, 'p' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        static const char *const names[] = { "fork",         "fork-100mb", "resume",
                                             "resume-100mb", "stop-100mb", "stopped" };
        unsigned long v;
        char *end;
        int opt, next;

        *o = (struct options){ .rounds = 20, .stopped = 10000 };
        while ((opt = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
                switch (opt) {
                case 'n':
                case 's':
                        errno = 0;
                        v = strtoul(optarg, &end, 10);
                        if (!*optarg || *end || errno || optarg[0] == '-' ||
                            v > (opt == 'n' ? 100000ul : 1000000ul) || (opt == 'n' && v < 1)) {
                                fprintf(stderr, "bench-lifecycle: bad number '%s'\n%s", optarg,
                                        usage);
                                return -EINVAL;
                        }
                        if (opt == 'n')
                                o->rounds = v;
                        else
                                o->stopped = (unsigned) v;
                        break;
                case 'o':
                        o->only = optarg;
                        break;
                case 'p':
                        o->pool_size = optarg;
                        break;
                case 'h':
                        fputs(usage, stdout);
                        exit(0);
                default:
                        fputs(usage, stderr);
                        return -EINVAL;
                }
        }
        if (o->only) {
                bool known = false;

                for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                        known = known || !strcmp(o->only, names[i]);
                if (!known) {
                        fprintf(stderr, "bench-lifecycle: unknown measurement '%s'\n%s", o->only,
                                usage);
                        return -EINVAL;
                }
        }
        if (argc - optind > 1) {
                fputs(usage, stderr);
                return -EINVAL;
        }
        *ret_bin = optind < argc ? argv[optind] : bench_airlock_bin(1, argv, &next);
        return 0;
}

int main(int argc, char **argv)
{
        const char *extra[] = { "--pool-size", "2", "--checkpoint-after", "0", NULL };
        struct options o;
        struct bench_conn c;
        const char *bin;

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (parse_options(argc, argv, &o, &bin) < 0)
                return 2;
        if (o.pool_size)
                extra[1] = o.pool_size;
        if (access(PYTHON, X_OK) < 0 && (wants(&o, "resume-100mb") || wants(&o, "stop-100mb"))) {
                fprintf(stderr, "bench-lifecycle: %s is needed for the references: %s\n", PYTHON,
                        strerror(errno));
                return 1;
        }

        bench_catch_signals(on_signal); /* a signal ends the wait in progress: fail() cleans up */

        if (bench_daemon_start(&bd, bin, extra) < 0)
                return 1;
        if (got_signal)
                fail("interrupted at start");
        bench_conn_init(&c, &bd);
        if (bench_daemon_wait_log(&bd, "zygote ready", 20000) < 0)
                fail("the daemon did not log 'zygote ready' within 20 s");
        bench_sleep_ms(SETTLE_MS);
        printf("bench-lifecycle: %zu rounds, daemon pid %d, state dir %s/state\n", o.rounds,
               (int) bd.pid, bd.dir);

        if (wants(&o, "fork"))
                bench_fork(&c, o.rounds, ROWS_10MB, "10 MB", 25);
        if (wants(&o, "fork-100mb"))
                bench_fork(&c, o.rounds, ROWS_100MB, "100 MB", 200);
        if (wants(&o, "resume"))
                bench_resume_small(&c, o.rounds);
        if (wants(&o, "resume-100mb") || wants(&o, "stop-100mb"))
                bench_large(&c, o.rounds, wants(&o, "resume-100mb"), wants(&o, "stop-100mb"));
        if (wants(&o, "stopped"))
                bench_stopped(&c, o.rounds, o.stopped);

        bench_conn_close(&c);
        bench_daemon_stop(&bd);
        return 0;
}
