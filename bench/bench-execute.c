/* bench-execute: the hot execute round trip of a trivial cell over HTTP.
 *
 *   bench-execute [AIRLOCK_BINARY] [ITERATIONS [SERVE_FLAG...]]   (default 2000; also $AIRLOCK_BIN)
 *
 * SERVE_FLAGs go to `airlock serve` after the bench's own, e.g. `--audit-log off` to compare the
 * hot path with and without the audit log in one run (issue 11: within 5%).
 * Starts its own `airlock serve` on a free loopback port, creates one session (profile
 * default), warms it up, then times POST /v1/sessions/{id}/execute {"code":"1"} on one
 * keep-alive connection with a minimal HTTP/1.1 client: request written, headers and
 * Content-Length body read. Target (issue 13): p50 under 0.2 ms. */
#include "bench-util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 200

/* The number after key in an execute's answer (its "usage"), in ms; 0 when it is not there. */
static double usage_ms(const char *resp, const char *key)
{
        const char *p = strstr(resp, key);

        return p ? strtod(p + strlen(key), NULL) : 0;
}

int main(int argc, char **argv)
{
        const char *extra[48] = { "--pool-size", "2", NULL };
        struct bench_daemon d;
        struct bench_conn c;
        char id[64], path[128];
        const char *bin, *resp;
        int next, status = 0;
        size_t n = 2000;
        uint64_t *ns, *wall, *cpu, p50, t_start;

        setvbuf(stdout, NULL, _IOLBF, 0);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                n = (size_t) strtoul(argv[next], NULL, 10);
        for (int i = next + 1, k = 2; i < argc && k < (int) (sizeof(extra) / sizeof(extra[0])) - 1;
             i++)
                extra[k++] = argv[i];
        if (n < 10)
                n = 10;
        ns = calloc(n, sizeof(*ns));
        wall = calloc(n, sizeof(*wall));
        cpu = calloc(n, sizeof(*cpu));
        if (!ns || !wall || !cpu)
                return 1;
        if (bench_daemon_start(&d, bin, extra) < 0)
                return 1;
        bench_conn_init(&c, &d);
        if (bench_daemon_wait_log(&d, "zygote ready", 20000) < 0)
                bench_die(&d, "the daemon did not log 'zygote ready' within 20 s");
        bench_sleep_ms(300); /* the warm pool fills */

        if (bench_http(&c, "POST", "/v1/sessions", "{}", &status, &resp) < 0)
                bench_die(&d, "POST /v1/sessions: %m");
        if (status != 201 || bench_json_str(resp, "id", id, sizeof(id)) < 0)
                bench_die(&d, "POST /v1/sessions answered %d: %s", status, resp);
        snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);

        t_start = bench_now_ns();
        for (size_t i = 0; i < WARMUP + n; i++) {
                uint64_t t0 = bench_now_ns();

                if (bench_http(&c, "POST", path, "{\"code\":\"1\"}", &status, &resp) < 0)
                        bench_die(&d, "execute #%zu: %m", i);
                if (i >= WARMUP)
                        ns[i - WARMUP] = bench_now_ns() - t0;
                if (status != 200 || !strstr(resp, "\"status\":\"ok\"") ||
                    !strstr(resp, "\"result\":\"1\""))
                        bench_die(&d, "execute #%zu answered %d: %s", i, status, resp);
                if (i >= WARMUP) {
                        wall[i - WARMUP] = (uint64_t) (usage_ms(resp, "\"wall_ms\":") * 1e6);
                        cpu[i - WARMUP] = (uint64_t) (usage_ms(resp, "\"cpu_ms\":") * 1e6);
                }
                if (bench_now_ns() - t_start > 45ull * 1000000000u) {
                        fprintf(stderr, "bench-execute: stopping early after 45 s\n");
                        n = i >= WARMUP ? i - WARMUP + 1 : 0;
                        break;
                }
        }
        if (n == 0)
                bench_die(&d, "no measurement within the time bound");

        p50 = bench_report("execute '1', one session, keep-alive HTTP", ns, n);
        printf("target p50 < 0.2 ms: %s (%.2fx the target)\n", p50 < 200000 ? "met" : "MISSED",
               (double) p50 / 2e5);
        /* Where it goes: the sandbox's part (the daemon's send of the cell to the runner's
         * answer, and the CPU its cgroup used meanwhile), and by difference the daemon's own
         * part (HTTP, the hand-offs between its threads, the answer's JSON). */
        {
                uint64_t w = bench_report("  of which sandbox round trip (wall_ms)", wall, n);
                (void) bench_report("  sandbox CPU meanwhile (cpu_ms)", cpu, n);
                printf("  daemon: HTTP, threads, JSON (p50 rest)    %8.3f ms\n",
                       p50 > w ? (double) (p50 - w) / 1e6 : 0.0);
        }

        /* GET of the session on the same connection: answered on the daemon's event thread. */
        snprintf(path, sizeof(path), "/v1/sessions/%s", id);
        for (size_t i = 0; i < n; i++) {
                uint64_t t0 = bench_now_ns();

                if (bench_http(&c, "GET", path, NULL, &status, &resp) < 0 || status != 200)
                        bench_die(&d, "GET %s #%zu answered %d", path, i, status);
                ns[i] = bench_now_ns() - t0;
        }
        (void) bench_report("GET /v1/sessions/{id}, the same connection", ns, n);

        if (bench_http(&c, "DELETE", path, NULL, &status, &resp) < 0 || status != 200)
                fprintf(stderr, "bench-execute: DELETE %s failed (%d)\n", path, status);
        bench_conn_close(&c);
        bench_daemon_stop(&d);
        free(ns);
        free(wall);
        free(cpu);
        return 0;
}
