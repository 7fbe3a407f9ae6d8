/* bench-observability: what metrics and the audit log cost the hot execute (issue 11: with
 * both on, p50 within 5% of off, in the same run).
 *
 *   bench-observability [AIRLOCK_BINARY] [ITERATIONS]      (default 1000, 4 times; also
 * $AIRLOCK_BIN)
 *
 * 1. The audit log, end to end: two daemons, one with the audit log (the default) and one with
 *    `--audit-log off`, each on one keep-alive connection, take turns in blocks of 25
 *    executions of `1` (4 x ITERATIONS each, after a warm-up), so that the drift of a shared
 *    machine falls on both alike; p50 of each, and the ratio.
 * 2. Metrics, which cannot be switched off: what one execution records (its histogram and
 *    counter, its HTTP request), timed in this process over a million calls, as a share of
 *    the execute p50 measured in part 1. */
#include "bench-util.h"

#include "metrics/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 4
#define WARMUP 200
#define BLOCK 25
#define METRIC_CALLS 1000000u

struct side {
        const char *name;
        const char *extra[8];
        struct bench_daemon d;
        struct bench_conn c;
        char path[128];
        uint64_t *ns;
        size_t n;
};

static void side_start(struct side *s, const char *bin, size_t cap)
{
        const char *resp;
        char id[64];
        int status;

        s->ns = calloc(cap, sizeof(*s->ns));
        if (!s->ns || bench_daemon_start(&s->d, bin, s->extra) < 0)
                exit(1);
        bench_conn_init(&s->c, &s->d);
        if (bench_daemon_wait_log(&s->d, "zygote ready", 20000) < 0)
                bench_die(&s->d, "the daemon did not log 'zygote ready' within 20 s");
        bench_sleep_ms(300);
        if (bench_http(&s->c, "POST", "/v1/sessions", "{}", &status, &resp) < 0 || status != 201 ||
            bench_json_str(resp, "id", id, sizeof(id)) < 0)
                bench_die(&s->d, "POST /v1/sessions failed");
        snprintf(s->path, sizeof(s->path), "/v1/sessions/%s/execute", id);
}

static void side_run(struct side *s, size_t n, size_t warmup)
{
        const char *resp;
        int status;

        for (size_t i = 0; i < warmup + n; i++) {
                uint64_t t0 = bench_now_ns();

                if (bench_http(&s->c, "POST", s->path, "{\"code\":\"1\"}", &status, &resp) < 0)
                        bench_die(&s->d, "execute: %m");
                if (status != 200 || !strstr(resp, "\"result\":\"1\""))
                        bench_die(&s->d, "execute answered %d: %s", status, resp);
                if (i >= warmup)
                        s->ns[s->n++] = bench_now_ns() - t0;
        }
}

int main(int argc, char **argv)
{
        struct side on = { .name = "audit log on ", .extra = { "--pool-size", "1", NULL } };
        struct side off = { .name = "audit log off",
                            .extra = { "--pool-size", "1", "--audit-log", "off", NULL } };
        const char *bin;
        size_t n = 1000;
        uint64_t p50_on, p50_off, t0, per_exec_ns;
        struct metrics_profile *p;
        int next;

        setvbuf(stdout, NULL, _IOLBF, 0);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                n = (size_t) strtoul(argv[next], NULL, 10);
        if (n < 10)
                n = 10;
        side_start(&on, bin, n * ROUNDS);
        side_start(&off, bin, n * ROUNDS);
        side_run(&on, 0, WARMUP);
        side_run(&off, 0, WARMUP);
        /* Blocks of BLOCK executions on each side in turn, the order swapped at every step: a
         * shared machine's drift (other work starting and stopping) falls on both sides alike,
         * which rounds of ITERATIONS executions did not ensure, and each side stays warm within
         * a block (one execution each in turn would measure a cold daemon every time). */
        for (size_t i = 0, k = 0; i < n * ROUNDS; i += BLOCK, k++) {
                size_t m = n * ROUNDS - i < BLOCK ? n * ROUNDS - i : BLOCK;

                side_run(k % 2 ? &off : &on, m, 0);
                side_run(k % 2 ? &on : &off, m, 0);
        }
        p50_on = bench_report("execute '1', audit log on ", on.ns, on.n);
        p50_off = bench_report("execute '1', audit log off", off.ns, off.n);
        printf("audit log on / off, p50: %.3f (target <= 1.05: %s)\n",
               (double) p50_on / (double) p50_off,
               p50_on * 100 <= p50_off * 105 ? "met" : "MISSED");
        bench_daemon_stop(&on.d);
        bench_daemon_stop(&off.d);

        /* What one execution records in the metrics registry, as execute_live and the HTTP
         * server do it. */
        p = metrics_profile("bench");
        t0 = bench_now_ns();
        for (unsigned i = 0; i < METRIC_CALLS; i++) {
                metrics_execution(p, METRICS_EXEC_OK, 250000 + (i & 1023) * 100);
                metrics_http_request(METRICS_HTTP_UNMATCHED, 200);
        }
        per_exec_ns = (bench_now_ns() - t0) / METRIC_CALLS;
        printf("metrics recorded per execution: %llu ns, %.3f%% of the execute p50 (target "
               "<= 5%%: %s)\n",
               (unsigned long long) per_exec_ns, 100.0 * (double) per_exec_ns / (double) p50_off,
               per_exec_ns * 100 <= p50_off * 5 ? "met" : "MISSED");
        free(on.ns);
        free(off.ns);
        return 0;
}
