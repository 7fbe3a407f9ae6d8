/* bench-throughput: trivial executions per second with 8 concurrent clients on 2 cores.
 *
 *   bench-throughput [AIRLOCK_BINARY] [SECONDS] [CLIENTS]   (default 5 s, 8; also $AIRLOCK_BIN)
 *
 * Pins itself, and so the daemon and every sandbox it starts, to two CPUs (when the machine
 * has more), starts its own `airlock serve` on a free loopback port, creates one session per
 * client, and lets each client (a thread with its own keep-alive connection and minimal
 * HTTP/1.1 client) run POST /v1/sessions/{id}/execute {"code":"1"} in a loop for the duration.
 * Prints the executions per second and the latency p50/p99. Target (issue 13): over
 * 8,000/s. */
#include "bench-util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 50

struct client {
        pthread_t thread;
        struct bench_daemon *d;
        pthread_barrier_t *barrier;
        const uint64_t *deadline;
        char path[128];
        uint64_t *ns;
        size_t n, cap;
        uint64_t end;
        char error[512];
};

static int one(struct bench_conn *c, struct client *cl, uint64_t *ns)
{
        const char *resp;
        int status = 0;
        uint64_t t0 = bench_now_ns();

        if (bench_http(c, "POST", cl->path, "{\"code\":\"1\"}", &status, &resp) < 0) {
                snprintf(cl->error, sizeof(cl->error), "POST %s: %s", cl->path, strerror(errno));
                return -1;
        }
        *ns = bench_now_ns() - t0;
        if (status != 200 || !strstr(resp, "\"result\":\"1\"")) {
                snprintf(cl->error, sizeof(cl->error), "POST %s answered %d: %.300s", cl->path,
                         status, resp);
                return -1;
        }
        return 0;
}

static void *client_main(void *arg)
{
        struct client *cl = arg;
        struct bench_conn c;
        uint64_t t;
        int failed = 0;

        bench_conn_init(&c, cl->d);
        for (int i = 0; i < WARMUP && !failed; i++)
                failed = one(&c, cl, &t) < 0;
        pthread_barrier_wait(cl->barrier);
        while (!failed && bench_now_ns() < *cl->deadline) {
                if (cl->n == cl->cap) {
                        uint64_t *p =
                                realloc(cl->ns, (cl->cap ? cl->cap * 2 : 4096) * sizeof(uint64_t));
                        if (!p) {
                                snprintf(cl->error, sizeof(cl->error), "out of memory");
                                break;
                        }
                        cl->ns = p;
                        cl->cap = cl->cap ? cl->cap * 2 : 4096;
                }
                if (one(&c, cl, &cl->ns[cl->n]) < 0)
                        break;
                cl->n++;
        }
        cl->end = bench_now_ns();
        bench_conn_close(&c);
        free(c.buf);
        free(c.req);
        free(c.body);
        return NULL;
}

int main(int argc, char **argv)
{
        const char *extra[] = { "--pool-size", "2", NULL };
        unsigned seconds = 5, nclients = 8;
        struct bench_daemon d;
        struct bench_conn c;
        struct client *cl;
        pthread_barrier_t barrier;
        char cpus[256], id[64], name[128];
        const char *bin, *resp;
        uint64_t start, deadline, end = 0, *all;
        size_t total = 0;
        int next, ncpu, status = 0;

        setvbuf(stdout, NULL, _IOLBF, 0);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                seconds = (unsigned) strtoul(argv[next], NULL, 10);
        if (argc > next + 1)
                nclients = (unsigned) strtoul(argv[next + 1], NULL, 10);
        if (seconds < 1 || seconds > 40)
                seconds = 5;
        if (nclients < 1 || nclients > 64)
                nclients = 8;
        ncpu = bench_pin_cpus(2, cpus, sizeof(cpus));
        if (ncpu < 0) {
                perror("bench-throughput: sched_setaffinity");
                return 1;
        }
        cl = calloc(nclients, sizeof(*cl));
        if (!cl)
                return 1;

        if (bench_daemon_start(&d, bin, extra) < 0)
                return 1;
        bench_conn_init(&c, &d);
        if (bench_daemon_wait_log(&d, "zygote ready", 20000) < 0)
                bench_die(&d, "the daemon did not log 'zygote ready' within 20 s");
        bench_sleep_ms(300); /* the warm pool fills */
        for (unsigned i = 0; i < nclients; i++) {
                if (bench_http(&c, "POST", "/v1/sessions", "{}", &status, &resp) < 0)
                        bench_die(&d, "POST /v1/sessions: %m");
                if (status != 201 || bench_json_str(resp, "id", id, sizeof(id)) < 0)
                        bench_die(&d, "POST /v1/sessions answered %d: %s", status, resp);
                snprintf(cl[i].path, sizeof(cl[i].path), "/v1/sessions/%s/execute", id);
        }

        pthread_barrier_init(&barrier, NULL, nclients + 1);
        deadline = UINT64_MAX;
        for (unsigned i = 0; i < nclients; i++) {
                cl[i].d = &d;
                cl[i].barrier = &barrier;
                cl[i].deadline = &deadline;
                if (pthread_create(&cl[i].thread, NULL, client_main, &cl[i]) != 0)
                        bench_die(&d, "pthread_create failed");
        }
        /* every client has warmed up; the clock starts now */
        start = bench_now_ns();
        deadline = start + (uint64_t) seconds * 1000000000u;
        pthread_barrier_wait(&barrier);
        for (unsigned i = 0; i < nclients; i++) {
                pthread_join(cl[i].thread, NULL);
                if (cl[i].error[0])
                        bench_die(&d, "client %u: %s", i, cl[i].error);
                total += cl[i].n;
                if (cl[i].end > end)
                        end = cl[i].end;
        }
        all = malloc((total ? total : 1) * sizeof(uint64_t));
        if (!all)
                bench_die(&d, "out of memory");
        total = 0;
        for (unsigned i = 0; i < nclients; i++) {
                memcpy(all + total, cl[i].ns, cl[i].n * sizeof(uint64_t));
                total += cl[i].n;
        }

        printf("cpus: %d (%s), clients: %u, duration %.2f s\n", ncpu, cpus, nclients,
               (double) (end - start) / 1e9);
        snprintf(name, sizeof(name), "throughput, execute '1', %u clients", nclients);
        printf("%-44s %8.0f ops/s  (n=%zu)\n", name, (double) total * 1e9 / (double) (end - start),
               total);
        snprintf(name, sizeof(name), "latency under load, %u clients", nclients);
        bench_report(name, all, total);
        printf("target > 8000 ops/s: %s\n",
               (double) total * 1e9 / (double) (end - start) > 8000 ? "met" : "MISSED");

        for (unsigned i = 0; i < nclients; i++) {
                char path[128];

                snprintf(path, sizeof(path), "%.*s", (int) (strlen(cl[i].path) - 8), cl[i].path);
                if (bench_http(&c, "DELETE", path, NULL, &status, &resp) < 0 || status != 200)
                        fprintf(stderr, "bench-throughput: DELETE %s failed (%d)\n", path, status);
                free(cl[i].ns);
        }
        bench_conn_close(&c);
        bench_daemon_stop(&d);
        pthread_barrier_destroy(&barrier);
        free(all);
        free(cl);
        return 0;
}
