/* bench-cluster: what the front door (nginx, docs/KUBERNETES.md) costs, and throughput with
 * 1, 2 and 3 nodes of scripts/cluster.sh on this machine.
 *
 *   bench-cluster [AIRLOCK_BINARY] [SECONDS [CLIENTS]]   (default 5 s, 8; also $AIRLOCK_BIN)
 *
 * 1. A single `airlock serve` on loopback, then a one-node cluster through its front door, in
 *    the same run: the hot execute of a trivial cell on one keep-alive connection, and create
 *    to first result (POST /v1/sessions, then execute '1'), p50 and p99 each, and the front
 *    door's overhead at p50 (target: under 0.5 ms; the path adds nginx and a veth hop into
 *    the node's network namespace).
 * 2. Clusters of 1, 2 and 3 nodes: CLIENTS threads, each with its own session (spread over the
 *    nodes by the front door) and keep-alive connection, execute '1' for SECONDS. Prints
 *    executions per second, the latency, and the CPU each node used (its daemon and every
 *    process below it: zygotes and sessions, from /proc/PID/stat) and nginx's, so the figure
 *    can be read for a machine with more cores: on 2 cores it will not scale.
 * Needs root (scripts/cluster.sh). Prints; never asserts timing. Every cluster it makes is
 * taken down, also on failure or a signal. */
#include "bench-util.h"

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef BENCH_CLUSTER_SH
#define BENCH_CLUSTER_SH "scripts/cluster.sh"
#endif

#define HOT_N 1000
#define CREATE_N 40
#define WARMUP 100
#define NODES_MAX 3

static char cluster_dir[64];
static bool cluster_up;

static int run_script(const char *verb, const char *arg1, const char *arg2, const char *arg3,
                      const char *arg4)
{
        char *argv[16];
        int n = 0, status;
        pid_t pid;

        argv[n++] = (char *) BENCH_CLUSTER_SH;
        argv[n++] = (char *) verb;
        if (arg1)
                argv[n++] = (char *) arg1;
        if (arg2)
                argv[n++] = (char *) arg2;
        if (arg3)
                argv[n++] = (char *) arg3;
        if (arg4)
                argv[n++] = (char *) arg4;
        argv[n] = NULL;
        fflush(stdout);
        pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                execv(argv[0], argv);
                dprintf(2, "bench-cluster: exec %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void cluster_down(void)
{
        if (cluster_up) {
                char *argv[] = { (char *) BENCH_CLUSTER_SH, "down", cluster_dir, NULL };

                (void) bench_time_command(argv);
                cluster_up = false;
        }
}

_Noreturn static void die(struct bench_daemon *d, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static void die(struct bench_daemon *d, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        fprintf(stderr, "bench-cluster: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        cluster_down();
        if (d)
                bench_daemon_stop(d);
        if (cluster_dir[0]) {
                char *rm[] = { "/bin/rm", "-rf", cluster_dir, NULL };

                (void) bench_time_command(rm);
        }
        exit(1);
}

static void on_signal(int sig)
{
        (void) sig; /* the wait in progress ends with EINTR; the loops check their deadline */
}

static int free_port(void)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

        if (fd < 0)
                return -1;
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 &&
            getsockname(fd, (struct sockaddr *) &sa, &len) == 0)
                port = ntohs(sa.sin_port);
        close(fd);
        return port;
}

/* Brings up a cluster of n nodes; fills d (port, token) for bench_conn_init. */
static void cluster_start(unsigned n, struct bench_daemon *d)
{
        char nodes[8], listen[32], path[128];
        FILE *f;

        snprintf(cluster_dir, sizeof(cluster_dir), "/tmp/airlock-bench-cluster-XXXXXX");
        if (!mkdtemp(cluster_dir))
                die(NULL, "mkdtemp: %s", strerror(errno));
        memset(d, 0, sizeof(*d));
        d->pid = -1;
        d->port = free_port();
        if (d->port < 0)
                die(NULL, "no free loopback port");
        snprintf(nodes, sizeof(nodes), "%u", n);
        snprintf(listen, sizeof(listen), "127.0.0.1:%d", d->port);
        cluster_up = true;
        {
                char *argv[] = { (char *) BENCH_CLUSTER_SH,
                                 "up",
                                 "--nodes",
                                 nodes,
                                 "--listen",
                                 listen,
                                 "--dir",
                                 cluster_dir,
                                 "--",
                                 "--pool-size",
                                 "2",
                                 NULL };
                pid_t pid;
                int status;

                fflush(stdout);
                pid = fork();
                if (pid < 0)
                        die(NULL, "fork: %s", strerror(errno));
                if (pid == 0) {
                        execv(argv[0], argv);
                        _exit(127);
                }
                while (waitpid(pid, &status, 0) < 0)
                        if (errno != EINTR)
                                die(NULL, "waitpid: %s", strerror(errno));
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        die(NULL, "scripts/cluster.sh up --nodes %u failed (see above)", n);
        }
        snprintf(path, sizeof(path), "%s/token", cluster_dir);
        f = fopen(path, "re");
        if (!f || !fgets(d->token, sizeof(d->token), f))
                die(NULL, "cannot read %s", path);
        fclose(f);
        d->token[strcspn(d->token, "\n")] = '\0';
}

static void cluster_stop(void)
{
        char *rm[] = { "/bin/rm", "-rf", cluster_dir, NULL };

        if (run_script("down", cluster_dir, NULL, NULL, NULL) < 0)
                fprintf(stderr, "bench-cluster: scripts/cluster.sh down %s failed\n", cluster_dir);
        cluster_up = false;
        (void) bench_time_command(rm);
        cluster_dir[0] = '\0';
}

static pid_t recorded_pid(const char *rel)
{
        char path[160];
        long pid = -1;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", cluster_dir, rel);
        f = fopen(path, "re");
        if (f) {
                if (fscanf(f, "%ld", &pid) != 1)
                        pid = -1;
                fclose(f);
        }
        return (pid_t) pid;
}

/* CPU ticks (user + system) of pid and every process below it, from /proc/PID/stat. */
struct proc_cpu {
        pid_t pid, ppid;
        unsigned long long ticks;
};

static size_t read_procs(struct proc_cpu **ret)
{
        struct proc_cpu *v = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *dir = opendir("/proc");

        if (!dir)
                return 0;
        while ((de = readdir(dir))) {
                char path[300], buf[1024], *p;
                unsigned long long ut, st;
                int ppid;
                FILE *f;

                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                p = fgets(buf, sizeof(buf), f);
                fclose(f);
                if (!p || !(p = strrchr(buf, ')')))
                        continue;
                /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt
                 * cmajflt utime stime */
                if (sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ppid,
                           &ut, &st) != 3)
                        continue;
                if (n == cap) {
                        struct proc_cpu *q = realloc(v, (cap ? cap * 2 : 512) * sizeof(*v));
                        if (!q)
                                break;
                        v = q;
                        cap = cap ? cap * 2 : 512;
                }
                v[n++] = (struct proc_cpu){ atoi(de->d_name), ppid, ut + st };
        }
        closedir(dir);
        *ret = v;
        return n;
}

static unsigned long long tree_ticks(const struct proc_cpu *v, size_t n, pid_t root)
{
        unsigned long long sum = 0;

        for (size_t i = 0; i < n; i++) {
                pid_t p = v[i].pid;

                /* walk up at most 64 levels to see whether root is an ancestor */
                for (int depth = 0; depth < 64 && p > 1; depth++) {
                        if (p == root) {
                                sum += v[i].ticks;
                                break;
                        }
                        pid_t up = 0;
                        for (size_t k = 0; k < n; k++)
                                if (v[k].pid == p) {
                                        up = v[k].ppid;
                                        break;
                                }
                        p = up;
                }
        }
        return sum;
}

static void cpu_snapshot(const pid_t *pids, unsigned n, unsigned long long *ticks)
{
        struct proc_cpu *v = NULL;
        size_t np = read_procs(&v);

        for (unsigned i = 0; i < n; i++)
                ticks[i] = pids[i] > 0 ? tree_ticks(v, np, pids[i]) : 0;
        free(v);
}

static int post_ok(struct bench_conn *c, const char *path, const char *body, int want,
                   const char **resp)
{
        int status = 0;

        if (bench_http(c, "POST", path, body, &status, resp) < 0)
                return -1;
        return status == want ? 0 : -1;
}

struct latency {
        uint64_t hot_p50, create_p50;
};

/* Hot execute and create-to-first-result against what d names (a daemon or a front door). */
static struct latency latency(struct bench_daemon *d, const char *label)
{
        static uint64_t hot[HOT_N], create[CREATE_N];
        struct latency out;
        struct bench_conn c;
        char id[96], path[160], name[128];
        const char *resp;
        int status;

        bench_conn_init(&c, d);
        if (post_ok(&c, "/v1/sessions", "{}", 201, &resp) < 0 ||
            bench_json_str(resp, "id", id, sizeof(id)) < 0)
                die(d->pid > 0 ? d : NULL, "%s: POST /v1/sessions failed", label);
        snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);
        for (size_t i = 0; i < WARMUP + HOT_N; i++) {
                uint64_t t0 = bench_now_ns();

                if (post_ok(&c, path, "{\"code\":\"1\"}", 200, &resp) < 0 ||
                    !strstr(resp, "\"result\":\"1\""))
                        die(d->pid > 0 ? d : NULL, "%s: execute failed: %.200s", label, resp);
                if (i >= WARMUP)
                        hot[i - WARMUP] = bench_now_ns() - t0;
        }
        snprintf(path, sizeof(path), "/v1/sessions/%s", id);
        (void) bench_http(&c, "DELETE", path, NULL, &status, &resp);
        snprintf(name, sizeof(name), "%s: hot execute '1'", label);
        out.hot_p50 = bench_report(name, hot, HOT_N);

        for (size_t i = 0; i < CREATE_N; i++) {
                char exec[160];
                uint64_t t0 = bench_now_ns();

                if (post_ok(&c, "/v1/sessions", "{}", 201, &resp) < 0 ||
                    bench_json_str(resp, "id", id, sizeof(id)) < 0)
                        die(d->pid > 0 ? d : NULL, "%s: create #%zu failed", label, i);
                snprintf(exec, sizeof(exec), "/v1/sessions/%s/execute", id);
                if (post_ok(&c, exec, "{\"code\":\"1\"}", 200, &resp) < 0)
                        die(d->pid > 0 ? d : NULL, "%s: first execute failed", label);
                create[i] = bench_now_ns() - t0;
                snprintf(path, sizeof(path), "/v1/sessions/%s", id);
                (void) bench_http(&c, "DELETE", path, NULL, &status, &resp);
                bench_sleep_ms(50); /* the warm pool refills */
        }
        snprintf(name, sizeof(name), "%s: create to first result", label);
        out.create_p50 = bench_report(name, create, CREATE_N);
        bench_conn_close(&c);
        free(c.buf);
        free(c.req);
        free(c.body);
        return out;
}

struct client {
        pthread_t thread;
        struct bench_daemon *d;
        pthread_barrier_t *barrier;
        const volatile uint64_t *deadline;
        char path[160];
        uint64_t *ns;
        size_t n, cap;
        char error[256];
};

static void *client_main(void *arg)
{
        struct client *cl = arg;
        struct bench_conn c;
        const char *resp;
        bool failed = false;

        bench_conn_init(&c, cl->d);
        for (int i = 0; i < 20 && !failed; i++)
                failed = post_ok(&c, cl->path, "{\"code\":\"1\"}", 200, &resp) < 0;
        pthread_barrier_wait(cl->barrier);
        while (!failed && bench_now_ns() < *cl->deadline) {
                uint64_t t0 = bench_now_ns();

                if (post_ok(&c, cl->path, "{\"code\":\"1\"}", 200, &resp) < 0) {
                        snprintf(cl->error, sizeof(cl->error), "execute failed: %.200s",
                                 resp ? resp : strerror(errno));
                        break;
                }
                if (cl->n == cl->cap) {
                        uint64_t *p = realloc(cl->ns, (cl->cap ? cl->cap * 2 : 4096) * 8);
                        if (!p)
                                break;
                        cl->ns = p;
                        cl->cap = cl->cap ? cl->cap * 2 : 4096;
                }
                cl->ns[cl->n++] = bench_now_ns() - t0;
        }
        if (failed && !cl->error[0])
                snprintf(cl->error, sizeof(cl->error), "warm-up execute failed");
        bench_conn_close(&c);
        free(c.buf);
        free(c.req);
        free(c.body);
        return NULL;
}

static void throughput(unsigned nodes, unsigned seconds, unsigned nclients)
{
        struct bench_daemon d;
        struct client *cl = calloc(nclients, sizeof(*cl));
        pthread_barrier_t barrier;
        volatile uint64_t deadline = UINT64_MAX;
        pid_t pids[NODES_MAX + 1];
        unsigned long long before[NODES_MAX + 1], after[NODES_MAX + 1];
        uint64_t start, end, *all;
        size_t total = 0;
        long hz = sysconf(_SC_CLK_TCK);
        struct bench_conn c;
        const char *resp;
        char name[128], id[96];

        if (!cl)
                die(NULL, "out of memory");
        cluster_start(nodes, &d);
        bench_sleep_ms(1000); /* warm pools fill */
        bench_conn_init(&c, &d);
        for (unsigned i = 0; i < nclients; i++) {
                if (post_ok(&c, "/v1/sessions", "{}", 201, &resp) < 0 ||
                    bench_json_str(resp, "id", id, sizeof(id)) < 0)
                        die(NULL, "%u nodes: POST /v1/sessions failed", nodes);
                snprintf(cl[i].path, sizeof(cl[i].path), "/v1/sessions/%s/execute", id);
        }
        bench_conn_close(&c);
        for (unsigned i = 0; i < nodes; i++) {
                char rel[32];

                snprintf(rel, sizeof(rel), "nodes/%u/pid", i);
                pids[i] = recorded_pid(rel);
        }
        pids[nodes] = recorded_pid("frontdoor/pid");

        pthread_barrier_init(&barrier, NULL, nclients + 1);
        for (unsigned i = 0; i < nclients; i++) {
                cl[i].d = &d;
                cl[i].barrier = &barrier;
                cl[i].deadline = &deadline;
                if (pthread_create(&cl[i].thread, NULL, client_main, &cl[i]) != 0)
                        die(NULL, "pthread_create failed");
        }
        cpu_snapshot(pids, nodes + 1, before);
        start = bench_now_ns();
        deadline = start + (uint64_t) seconds * 1000000000u;
        pthread_barrier_wait(&barrier);
        for (unsigned i = 0; i < nclients; i++)
                pthread_join(cl[i].thread, NULL);
        end = bench_now_ns();
        cpu_snapshot(pids, nodes + 1, after);
        for (unsigned i = 0; i < nclients; i++) {
                if (cl[i].error[0])
                        die(NULL, "%u nodes, client %u: %s", nodes, i, cl[i].error);
                total += cl[i].n;
        }
        all = malloc((total ? total : 1) * sizeof(*all));
        if (!all)
                die(NULL, "out of memory");
        total = 0;
        for (unsigned i = 0; i < nclients; i++) {
                memcpy(all + total, cl[i].ns, cl[i].n * sizeof(*all));
                total += cl[i].n;
                free(cl[i].ns);
        }
        snprintf(name, sizeof(name), "%u node%s, %u clients: execute '1'", nodes,
                 nodes == 1 ? "" : "s", nclients);
        printf("%-44s %8.0f ops/s  (n=%zu, %.2f s)\n", name,
               (double) total * 1e9 / (double) (end - start), total, (double) (end - start) / 1e9);
        snprintf(name, sizeof(name), "%u node%s: latency under load", nodes, nodes == 1 ? "" : "s");
        bench_report(name, all, total);
        for (unsigned i = 0; i <= nodes; i++) {
                double cpu = (double) (after[i] - before[i]) / (double) hz;
                char who[16];

                if (i < nodes)
                        snprintf(who, sizeof(who), "n%u", i);
                else
                        snprintf(who, sizeof(who), "nginx");
                printf("  %-10s cpu %.2f s of %.2f s wall = %.2f cores%s\n", who, cpu,
                       (double) (end - start) / 1e9, cpu * 1e9 / (double) (end - start),
                       i < nodes ? " (daemon, zygotes, sessions)" : "");
        }
        pthread_barrier_destroy(&barrier);
        free(all);
        free(cl);
        cluster_stop();
}

int main(int argc, char **argv)
{
        const char *extra[] = { "--pool-size", "2", NULL };
        unsigned seconds = 5, nclients = 8;
        struct bench_daemon single, front;
        struct latency direct, door;
        const char *bin;
        int next;

        setvbuf(stdout, NULL, _IOLBF, 0);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                seconds = (unsigned) strtoul(argv[next], NULL, 10);
        if (argc > next + 1)
                nclients = (unsigned) strtoul(argv[next + 1], NULL, 10);
        if (seconds < 1 || seconds > 60)
                seconds = 5;
        if (nclients < 1 || nclients > 64)
                nclients = 8;
        if (geteuid() != 0) {
                fprintf(stderr, "bench-cluster: needs root (scripts/cluster.sh makes network "
                                "namespaces); skipped\n");
                return 77;
        }
        if (access(BENCH_CLUSTER_SH, X_OK) < 0) {
                fprintf(stderr, "bench-cluster: cannot run %s: %s\n", BENCH_CLUSTER_SH,
                        strerror(errno));
                return 1;
        }
        setenv("AIRLOCK_BIN", bin, 1); /* scripts/cluster.sh runs the same binary */
        bench_catch_signals(on_signal);

        if (bench_daemon_start(&single, bin, extra) < 0)
                return 1;
        if (bench_daemon_wait_log(&single, "zygote ready", 20000) < 0)
                die(&single, "the daemon did not log 'zygote ready' within 20 s");
        bench_sleep_ms(300);
        direct = latency(&single, "single daemon");
        bench_daemon_stop(&single);

        cluster_start(1, &front);
        bench_sleep_ms(1000);
        door = latency(&front, "front door, 1 node");
        cluster_stop();
        printf("front door overhead at p50: hot execute %+.3f ms, create to first result "
               "%+.3f ms (target: hot under 0.5 ms: %s)\n",
               ((double) door.hot_p50 - (double) direct.hot_p50) / 1e6,
               ((double) door.create_p50 - (double) direct.create_p50) / 1e6,
               door.hot_p50 < direct.hot_p50 + 500000 ? "met" : "MISSED");

        for (unsigned n = 1; n <= NODES_MAX; n++)
                throughput(n, seconds, nclients);
        return 0;
}
