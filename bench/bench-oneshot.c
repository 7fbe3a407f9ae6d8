/* bench-oneshot: one-shot POST /execute of print(1).
 *
 *   bench-oneshot [AIRLOCK_BINARY] [ITERATIONS]      (default 200; also $AIRLOCK_BIN)
 *
 * Starts its own `airlock serve --pool-size 2` on a free loopback port and times POST
 * /execute {"code":"print(1)"} (fresh session, run, destroy) on one keep-alive connection:
 * back-to-back, and spaced by 100 ms so the warm pool can refill between calls. For scale, the
 * same run's `python3 -c pass` (/usr/bin/python3). Target (issue 13): back-to-back p50 under
 * 5 ms, p99 under 20 ms; docs/PERFORMANCE.md says what bounds it on a given machine. */
#include "bench-util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 10

static uint64_t one(struct bench_daemon *d, struct bench_conn *c)
{
        const char *resp;
        int status = 0;
        uint64_t t0 = bench_now_ns(), t;

        if (bench_http(c, "POST", "/execute", "{\"code\":\"print(1)\"}", &status, &resp) < 0)
                bench_die(d, "POST /execute: %m");
        t = bench_now_ns() - t0;
        if (status != 200 || !strstr(resp, "\"status\":\"ok\"") ||
            !strstr(resp, "\"stdout\":\"1\\n\""))
                bench_die(d, "POST /execute answered %d: %s", status, resp);
        return t;
}

int main(int argc, char **argv)
{
        const char *extra[] = { "--pool-size", "2", NULL };
        char *py_pass[] = { "/usr/bin/python3", "-c", "pass", NULL };
        size_t n = 200, n_spaced, n_py;
        struct bench_daemon d;
        struct bench_conn c;
        uint64_t *b2b, *spaced, *py, p50_b2b, p50_spaced, p50_py;
        const char *bin;
        int next;

        setvbuf(stdout, NULL, _IOLBF, 0);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                n = (size_t) strtoul(argv[next], NULL, 10);
        if (n < 10)
                n = 10;
        n_spaced = n / 4;
        n_py = n / 4;
        b2b = calloc(n, sizeof(uint64_t));
        spaced = calloc(n_spaced, sizeof(uint64_t));
        py = calloc(n_py, sizeof(uint64_t));
        if (!b2b || !spaced || !py)
                return 1;

        for (size_t i = 0; i < n_py; i++)
                if (!(py[i] = bench_time_command(py_pass))) {
                        fprintf(stderr, "bench-oneshot: /usr/bin/python3 -c pass failed\n");
                        return 1;
                }

        if (bench_daemon_start(&d, bin, extra) < 0)
                return 1;
        bench_conn_init(&c, &d);
        if (bench_daemon_wait_log(&d, "zygote ready", 20000) < 0)
                bench_die(&d, "the daemon did not log 'zygote ready' within 20 s");
        bench_sleep_ms(300); /* the warm pool fills */
        for (int i = 0; i < WARMUP; i++)
                one(&d, &c);
        for (size_t i = 0; i < n_spaced; i++) {
                bench_sleep_ms(100);
                spaced[i] = one(&d, &c);
        }
        for (size_t i = 0; i < n; i++)
                b2b[i] = one(&d, &c);

        p50_py = bench_report("python3 -c pass", py, n_py);
        p50_spaced = bench_report("POST /execute print(1), spaced 100 ms", spaced, n_spaced);
        p50_b2b = bench_report("POST /execute print(1), back-to-back", b2b, n);
        printf("ratio one-shot / python3 -c pass: spaced %.2f, back-to-back %.2f\n",
               (double) p50_spaced / (double) p50_py, (double) p50_b2b / (double) p50_py);
        printf("target p50 < 5 ms (back-to-back): %s\n", p50_b2b < 5000000 ? "met" : "MISSED");

        bench_conn_close(&c);
        bench_daemon_stop(&d);
        return 0;
}
