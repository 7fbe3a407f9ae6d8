/* bench-scale: does the daemon slow down, or grow, with the number of idle live sessions?
 *
 *   bench-scale [AIRLOCK_BINARY] [--sessions 10,100,1000] [--creates N] [--executes N]
 *               (defaults: 10,100,1000, 50 creates and 2000 executes at each count; also
 *               $AIRLOCK_BIN)
 *
 * Starts its own `airlock serve --max-sessions MAX+8 --pool-size 2 --stop-after 24h
 * --checkpoint-after 1s` on a free loopback port: no session stops while we measure, and each
 * one is checkpointed a second after its cell, while the sessions are being opened, so that the
 * figures are those of idle sessions that are saved (as every session is 30 s after its last
 * call with the default --checkpoint-after), not of a checkpoint wave. Then, for each count N
 * in increasing order, it opens sessions (profile default) until N are live, each having run
 * one trivial cell, lets the daemon settle, and measures on one keep-alive connection:
 *  - create: POST /v1/sessions until the first result of `1` is in, then DELETE, 300 ms
 *    apart so that the warm pool refills (a pool hit, as bench-create's first series);
 *  - hot execute: `1` back-to-back in one more session;
 *  - the daemon's VmRSS, threads and open fds (/proc/PID/status, /proc/PID/fd), and the PSS
 *    of the sessions' processes (found as bench-idle-memory finds them) divided by N.
 * Last, the figures of the largest N against those of the smallest. Targets (issue 13): with
 * 1,000 idle sessions, create and execute p50 within 1.5x of the 10-session figures; PSS per
 * idle session under 3 MiB. Every session is deleted at the end, also after SIGINT. */
#include "bench-util.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNTS_MAX 16
#define SESSIONS_MAX 100000
#define WARMUP 200
#define CREATE_SPACING_MS 300
#define RATIO_TARGET 1.5
#define PSS_TARGET_MIB 3.0

struct row {
        unsigned n;
        uint64_t create_p50, create_p99, exec_p50, exec_p99;
        unsigned long long rss_kb;
        unsigned threads, fds;
        double pss_mib; /* per idle session */
        double zygote_pss_mib;
        double fill_s; /* time to open the sessions added for this count */
};

static struct bench_daemon bd;
static struct bench_conn conn;
static volatile sig_atomic_t got_signal;
static char (*ids)[64]; /* the sessions held open */
static unsigned n_ids;

static void on_signal(int sig)
{
        got_signal = sig;
}

/* Deletes every session we opened, then stops the daemon. */
static int cleanup(void)
{
        const char *resp;
        char path[128];
        int status = 0, failed = 0;

        while (n_ids > 0) {
                n_ids--;
                (void) snprintf(path, sizeof(path), "/v1/sessions/%s", ids[n_ids]);
                if (bench_http(&conn, "DELETE", path, NULL, &status, &resp) < 0 ||
                    (status != 200 && status != 404)) {
                        fprintf(stderr, "bench-scale: DELETE %s failed (%d)\n", path, status);
                        failed = 1;
                }
        }
        bench_conn_close(&conn);
        bench_daemon_stop(&bd);
        return failed;
}

static _Noreturn __attribute__((format(printf, 1, 2))) void fail(const char *fmt, ...)
{
        va_list ap;

        fflush(stdout);
        fputs("bench-scale: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        (void) cleanup();
        exit(1);
}

/* Opens a session and runs `1` in it; returns the time to the first result. */
static uint64_t open_session(char id[64])
{
        char path[128];
        const char *resp;
        int status = 0;
        uint64_t t0 = bench_now_ns();

        if (bench_http(&conn, "POST", "/v1/sessions", "{}", &status, &resp) < 0)
                fail("POST /v1/sessions: %m");
        if (status != 201 || bench_json_str(resp, "id", id, 64) < 0)
                fail("POST /v1/sessions answered %d: %s", status, resp);
        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);
        if (bench_http(&conn, "POST", path, "{\"code\":\"1\"}", &status, &resp) < 0)
                fail("POST %s: %m", path);
        if (status != 200 || !strstr(resp, "\"result\":\"1\""))
                fail("POST %s answered %d: %s", path, status, resp);
        return bench_now_ns() - t0;
}

static void delete_session(const char *id)
{
        char path[128];
        const char *resp;
        int status = 0;

        (void) snprintf(path, sizeof(path), "/v1/sessions/%s", id);
        if (bench_http(&conn, "DELETE", path, NULL, &status, &resp) < 0 || status != 200)
                fail("DELETE %s failed (%d)", path, status);
}

static int parse_counts(const char *s, unsigned *counts, size_t *n)
{
        char *end;

        *n = 0;
        for (;;) {
                unsigned long v;

                errno = 0;
                v = strtoul(s, &end, 10);
                if (errno || end == s || v < 1 || v > SESSIONS_MAX || *n == COUNTS_MAX ||
                    (*n > 0 && v <= counts[*n - 1]))
                        return -1;
                counts[(*n)++] = (unsigned) v;
                if (*end == '\0')
                        return 0;
                if (*end != ',')
                        return -1;
                s = end + 1;
        }
}

static void measure(struct row *row, size_t creates, size_t executes, uint64_t *ns)
{
        struct bench_sandbox_memory m;
        char id[64], path[128], label[64];
        const char *resp;
        int status = 0;

        /* the daemon and the sessions first, before we add any of our own */
        row->rss_kb = bench_proc_field(bd.pid, "status", "VmRSS");
        row->threads = (unsigned) bench_proc_field(bd.pid, "status", "Threads");
        row->fds = bench_proc_fds(bd.pid);
        if (bench_sandbox_memory(bd.pid, &m) < 0 || m.session_procs == 0)
                fail("found no session processes below the daemon (pid %d)", (int) bd.pid);
        row->pss_mib = (double) m.session_pss_kb / 1024.0 / row->n;
        row->zygote_pss_mib = (double) m.zygote_pss_kb / 1024.0;
        printf("%u idle sessions: daemon VmRSS %.1f MiB, %u threads, %u fds; sessions' PSS "
               "%.1f MiB in %u processes of %u session uids (N + warm pool): %.2f MiB per idle "
               "session; zygotes' PSS %.1f MiB\n",
               row->n, row->rss_kb / 1024.0, row->threads, row->fds, m.session_pss_kb / 1024.0,
               m.session_procs, m.session_uids, row->pss_mib, row->zygote_pss_mib);

        for (size_t i = 0; i < creates && !got_signal; i++) {
                bench_sleep_ms(CREATE_SPACING_MS);
                ns[i] = open_session(id);
                delete_session(id);
        }
        if (got_signal)
                return;
        (void) snprintf(label, sizeof(label), "%u: create to first result", row->n);
        row->create_p50 = bench_report(label, ns, creates);
        row->create_p99 = bench_percentile(ns, creates, 0.99);

        bench_sleep_ms(CREATE_SPACING_MS);
        (void) open_session(id);
        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);
        for (size_t i = 0; i < WARMUP + executes && !got_signal; i++) {
                uint64_t t0 = bench_now_ns();

                if (bench_http(&conn, "POST", path, "{\"code\":\"1\"}", &status, &resp) < 0)
                        fail("execute #%zu: %m", i);
                if (i >= WARMUP)
                        ns[i - WARMUP] = bench_now_ns() - t0;
                if (status != 200 || !strstr(resp, "\"result\":\"1\""))
                        fail("execute #%zu answered %d: %s", i, status, resp);
        }
        delete_session(id);
        if (got_signal)
                return;
        (void) snprintf(label, sizeof(label), "%u: hot execute of '1'", row->n);
        row->exec_p50 = bench_report(label, ns, executes);
        row->exec_p99 = bench_percentile(ns, executes, 0.99);
}

static void summary(const struct row *rows, size_t n_rows)
{
        const struct row *a = &rows[0], *b = &rows[n_rows - 1];
        double r_create, r_exec;

        printf("\n%-9s %-21s %-21s %-11s %-8s %-7s %s\n", "sessions", "create p50 / p99 ms",
               "execute p50 / p99 ms", "daemon RSS", "threads", "fds", "PSS per idle session");
        for (size_t i = 0; i < n_rows; i++)
                printf("%-9u %8.2f / %-10.2f %8.3f / %-10.3f %6.1f MiB  %-8u %-7u %.2f MiB\n",
                       rows[i].n, rows[i].create_p50 / 1e6, rows[i].create_p99 / 1e6,
                       rows[i].exec_p50 / 1e6, rows[i].exec_p99 / 1e6, rows[i].rss_kb / 1024.0,
                       rows[i].threads, rows[i].fds, rows[i].pss_mib);
        if (n_rows < 2)
                return;
        r_create = (double) b->create_p50 / (double) a->create_p50;
        r_exec = (double) b->exec_p50 / (double) a->exec_p50;
        printf("ratio %u / %u sessions: create p50 %.2fx, execute p50 %.2fx (target %.1fx: %s); "
               "daemon RSS %+.1f MiB (%.1f KiB per session), threads %+d, fds %+d (%.1f per "
               "session)\n",
               b->n, a->n, r_create, r_exec, RATIO_TARGET,
               r_create <= RATIO_TARGET && r_exec <= RATIO_TARGET ? "met" : "MISSED",
               ((double) b->rss_kb - (double) a->rss_kb) / 1024.0,
               ((double) b->rss_kb - (double) a->rss_kb) / (b->n - a->n),
               (int) b->threads - (int) a->threads, (int) b->fds - (int) a->fds,
               ((double) b->fds - (double) a->fds) / (b->n - a->n));
        printf("PSS per idle session at %u: %.2f MiB (target < %.0f MiB: %s)\n", b->n, b->pss_mib,
               PSS_TARGET_MIB, b->pss_mib < PSS_TARGET_MIB ? "met" : "MISSED");
}

int main(int argc, char **argv)
{
        unsigned counts[COUNTS_MAX] = { 10, 100, 1000 };
        size_t n_counts = 3, creates = 50, executes = 2000, n_rows = 0;
        struct row rows[COUNTS_MAX] = { 0 };
        char max_sessions[16];
        const char *extra[] = {
                "--max-sessions",     max_sessions, "--pool-size", "2", "--stop-after", "24h",
                "--checkpoint-after", "1s",         NULL
        };
        const char *bin = NULL;
        uint64_t *ns;
        int unused;

        setvbuf(stdout, NULL, _IOLBF, 0);
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--sessions") && i + 1 < argc) {
                        if (parse_counts(argv[++i], counts, &n_counts) < 0) {
                                fprintf(stderr, "bench-scale: --sessions takes increasing "
                                                "counts, e.g. 10,100,1000\n");
                                return 2;
                        }
                } else if (!strcmp(argv[i], "--creates") && i + 1 < argc) {
                        creates = strtoul(argv[++i], NULL, 10);
                } else if (!strcmp(argv[i], "--executes") && i + 1 < argc) {
                        executes = strtoul(argv[++i], NULL, 10);
                } else if (argv[i][0] != '-' && !bin) {
                        bin = argv[i];
                } else {
                        fprintf(stderr, "usage: bench-scale [AIRLOCK_BINARY] [--sessions "
                                        "10,100,1000] [--creates N] [--executes N]\n");
                        return 2;
                }
        }
        if (!bin)
                bin = bench_airlock_bin(1, argv, &unused); /* $AIRLOCK_BIN or the build tree */
        if (creates < 5)
                creates = 5;
        if (executes < 10)
                executes = 10;
        ns = calloc(creates > executes ? creates : executes, sizeof(*ns));
        ids = calloc(counts[n_counts - 1], sizeof(*ids));
        if (!ns || !ids)
                return 1;
        (void) snprintf(max_sessions, sizeof(max_sessions), "%u", counts[n_counts - 1] + 8);

        bench_catch_signals(on_signal);
        if (bench_daemon_start(&bd, bin, extra) < 0)
                return 1;
        bench_conn_init(&conn, &bd);
        if (bench_daemon_wait_log(&bd, "zygote ready", 20000) < 0)
                fail("the daemon did not log 'zygote ready' within 20 s");
        bench_sleep_ms(500); /* the warm pool fills */

        for (size_t k = 0; k < n_counts && !got_signal; k++) {
                struct row *row = &rows[k];
                uint64_t t0 = bench_now_ns();

                row->n = counts[k];
                while (n_ids < row->n && !got_signal) {
                        (void) open_session(ids[n_ids]);
                        n_ids++;
                }
                row->fill_s = (double) (bench_now_ns() - t0) / 1e9;
                if (got_signal)
                        break;
                printf("opened %u sessions (%u live) in %.1f s\n", row->n - (k ? counts[k - 1] : 0),
                       n_ids, row->fill_s);
                /* the last ones are checkpointed, the pool refills and warms */
                bench_sleep_ms(3000);
                measure(row, creates, executes, ns);
                if (!got_signal)
                        n_rows++;
        }
        if (got_signal)
                printf("interrupted by signal %d: deleting the %u sessions\n", (int) got_signal,
                       n_ids);
        else
                summary(rows, n_rows);
        free(ns);
        if (cleanup() != 0)
                return 1;
        free(ids);
        return got_signal ? 130 : 0;
}
