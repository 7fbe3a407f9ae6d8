/* bench-egress: what the egress proxy costs (issue 10, docs/NETWORK.md): a 100 MiB download
 * through the proxy from a local server against the same download straight from the host, and
 * the connect latency the proxy adds, in one run.
 *
 *   bench-egress [AIRLOCK_BINARY] [CONNECTS]     (default 1000; also $AIRLOCK_BIN)
 *
 * This program serves, on two 127.0.0.1 ports of its own: BULK (an HTTP/1.1 GET answered with
 * 100 MiB, then the connection closed) and GREET (one byte, "!", as soon as a connection is
 * accepted). The same Python code measures both ways, with time.perf_counter_ns():
 *   direct   run by /usr/bin/python3 on the host, connecting to 127.0.0.1:PORT;
 *   proxied  run as cells in a session of a profile allowing 127.0.0.1:BULK and 127.0.0.1:GREET
 *            (src/egress/policy.h): the same connect, which inside the sandbox reaches the
 *            proxy's forwarder at 127.0.0.1:PORT; a plain HTTP GET of the absolute URI through
 *            the HTTP proxy (127.0.0.1:3128); and a CONNECT tunnel through it.
 * A download counts from the connect to the last byte; a connect from the connect to the
 * greeting byte (so a proxied connect includes the proxy's own connect upstream). Downloads
 * go in rounds, one each way a round (a warm-up round first), so that the machine's other load
 * weighs on every way alike. It prints the median throughput of DOWNLOADS rounds each way,
 * connect p50/p99, and the targets: proxied throughput >= 50% of direct, added connect latency
 * p50 < 1 ms. */
#include "bench-util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (100u << 20)
#define DOWNLOADS 7           /* rounds: direct, then each way through the proxy, once each */
#define THROUGHPUT_TARGET 0.5 /* proxied / direct */
#define LATENCY_TARGET_NS 1000000u

/* ---- the local server ---------------------------------------------------------------------- */

static char zeros[1 << 20];

static void *serve_bulk(void *arg)
{
        int fd = (int) (intptr_t) arg;
        char head[8192], reply[128];
        size_t got = 0, left = SIZE;
        int n;

        /* the request's head, whatever it says */
        while (got < sizeof(head) - 1) {
                ssize_t r = read(fd, head + got, sizeof(head) - 1 - got);

                if (r <= 0)
                        goto out;
                got += (size_t) r;
                head[got] = '\0';
                if (strstr(head, "\r\n\r\n"))
                        break;
        }
        n = snprintf(reply, sizeof(reply),
                     "HTTP/1.1 200 OK\r\nContent-Length: %u\r\nConnection: close\r\n\r\n", SIZE);
        if (write(fd, reply, (size_t) n) != n)
                goto out;
        while (left) {
                ssize_t w = write(fd, zeros, left < sizeof(zeros) ? left : sizeof(zeros));

                if (w <= 0)
                        goto out;
                left -= (size_t) w;
        }
        (void) shutdown(fd, SHUT_WR);
        while (read(fd, head, sizeof(head)) > 0)
                ;
out:
        close(fd);
        return NULL;
}

struct listener {
        int fd;
        int port;
        void *(*serve)(void *);
};

/* GREET: one thread with epoll, no thread per connection, so that what a connect measures is
 * the network path and not this server: each accepted connection gets "!" at once and is
 * closed when its client closes. */
static void *greet_loop(void *arg)
{
        struct listener *l = arg;
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = l->fd }, evs[64];
        int ep = epoll_create1(EPOLL_CLOEXEC);
        char buf[512];

        if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l->fd, &ev) < 0)
                return NULL;
        for (;;) {
                int k = epoll_wait(ep, evs, 64, -1);

                for (int i = 0; i < k; i++) {
                        int fd = evs[i].data.fd;

                        if (fd == l->fd) {
                                int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

                                if (c < 0)
                                        continue;
                                ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = c };
                                if (write(c, "!", 1) != 1 ||
                                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) < 0)
                                        close(c);
                        } else if (read(fd, buf, sizeof(buf)) <= 0) {
                                close(fd); /* leaves the epoll set with its last reference */
                        }
                }
        }
}

static void *accept_loop(void *arg)
{
        struct listener *l = arg;

        for (;;) {
                int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
                pthread_t t;

                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
                                continue;
                        return NULL;
                }
                if (pthread_create(&t, NULL, l->serve, (void *) (intptr_t) fd) != 0) {
                        close(fd);
                        continue;
                }
                pthread_detach(t);
        }
}

static int listener_start(struct listener *l, void *(*serve)(void *) )
{
        struct sockaddr_in sa = { .sin_family = AF_INET };
        socklen_t len = sizeof(sa);
        pthread_t t;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        l->serve = serve;
        l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (l->fd < 0 || bind(l->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            listen(l->fd, 512) < 0 || getsockname(l->fd, (struct sockaddr *) &sa, &len) < 0)
                return -1;
        l->port = ntohs(sa.sin_port);
        if (pthread_create(&t, NULL, serve ? accept_loop : greet_loop, l) != 0)
                return -1;
        pthread_detach(t);
        return 0;
}

/* ---- the measuring code (the same on the host and in the sandbox) -------------------------- */

/* Python; printf arguments: BULK, GREET, SIZE, then the measurement of this run: "download"
 * MODE REPS or "connect" MODE N. Prints a JSON list of nanoseconds. */
static const char measure_fmt[] =
        "import json, socket, time\n"
        "BULK, GREET, SIZE = %d, %d, %u\n"
        "PROXY = ('127.0.0.1', 3128)\n"
        "def head(s, buf=b''):\n"
        "    while b'\\r\\n\\r\\n' not in buf:\n"
        "        b = s.recv(65536)\n"
        "        if not b:\n"
        "            raise OSError('closed before the end of the head: %%r' %% buf[:200])\n"
        "        buf += b\n"
        "    return buf.partition(b'\\r\\n\\r\\n')\n"
        "def tunnel(port):\n"
        "    s = socket.create_connection(PROXY)\n"
        "    s.sendall(b'CONNECT 127.0.0.1:%%d HTTP/1.1\\r\\nHost: 127.0.0.1:%%d\\r\\n\\r\\n' %% "
        "(port, port))\n"
        "    status, _, rest = head(s)\n"
        "    if not status.startswith((b'HTTP/1.1 200', b'HTTP/1.0 200')):\n"
        "        raise OSError('CONNECT refused: %%r' %% status[:200])\n"
        "    return s, rest\n"
        "def download(mode):\n"
        "    buf = bytearray(1 << 20)\n"
        "    t0 = time.perf_counter_ns()\n"
        "    if mode == 'http':\n"
        "        s = socket.create_connection(PROXY)\n"
        "        s.sendall(b'GET http://127.0.0.1:%%d/ HTTP/1.1\\r\\nHost: 127.0.0.1:%%d\\r\\n'\n"
        "                  b'Connection: close\\r\\n\\r\\n' %% (BULK, BULK))\n"
        "    elif mode == 'connect':\n"
        "        s, _ = tunnel(BULK)\n"
        "        s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "    else:\n"
        "        s = socket.create_connection(('127.0.0.1', BULK))\n"
        "        s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "    status, _, rest = head(s)\n"
        "    got = len(rest)\n"
        "    while True:\n"
        "        n = s.recv_into(buf)\n"
        "        if not n:\n"
        "            break\n"
        "        got += n\n"
        "    ns = time.perf_counter_ns() - t0\n"
        "    s.close()\n"
        "    if got != SIZE:\n"
        "        raise OSError('%%s: %%d bytes instead of %%d (%%r)' %% (mode, got, SIZE, "
        "status[:200]))\n"
        "    return ns\n"
        "def connect(mode):\n"
        "    t0 = time.perf_counter_ns()\n"
        "    if mode == 'connect':\n"
        "        s, rest = tunnel(GREET)\n"
        "        first = rest[:1] or s.recv(1)\n"
        "    else:\n"
        "        s = socket.create_connection(('127.0.0.1', GREET))\n"
        "        first = s.recv(1)\n"
        "    ns = time.perf_counter_ns() - t0\n"
        "    s.close()\n"
        "    if first != b'!':\n"
        "        raise OSError('%%s: no greeting (%%r)' %% (mode, first))\n"
        "    return ns\n"
        "what, mode, n = '%s', '%s', %zu\n"
        "if what == 'connect':\n"
        "    [connect(mode) for _ in range(max(n // 10, 10))]\n"
        "    print(json.dumps([connect(mode) for _ in range(n)]))\n"
        "else:\n"
        "    print(json.dumps([download(mode) for _ in range(n)]))\n";

static struct listener bulk, greet;

static char *measure_code(const char *what, const char *mode, size_t n)
{
        char *code = NULL;

        if (asprintf(&code, measure_fmt, bulk.port, greet.port, SIZE, what, mode, n) < 0)
                return NULL;
        return code;
}

/* Copies a JSON list of n integers into ns; 0 or -1. */
static int parse_samples(const char *text, uint64_t *ns, size_t n)
{
        json_t *a = json_loads(text, JSON_DECODE_ANY, NULL);
        int r = json_array_size(a) == n ? 0 : -1;

        for (size_t i = 0; r == 0 && i < n; i++)
                ns[i] = (uint64_t) json_integer_value(json_array_get(a, i));
        json_decref(a);
        return r;
}

/* Runs the code with /usr/bin/python3 on the host; its stdout into ns. 0 or -1. */
static int measure_direct(const char *what, size_t n, uint64_t *ns)
{
        static char out[1 << 20];
        char *code = measure_code(what, "direct", n);
        size_t got = 0;
        int pipefd[2], status, r = -1;
        pid_t pid;

        if (!code || pipe2(pipefd, O_CLOEXEC) < 0) {
                free(code);
                return -1;
        }
        fflush(stdout);
        pid = fork();
        if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                dup2(pipefd[1], 1);
                execl("/usr/bin/python3", "python3", "-c", code, (char *) NULL);
                _exit(127);
        }
        close(pipefd[1]);
        for (;;) {
                ssize_t k = read(pipefd[0], out + got, sizeof(out) - 1 - got);

                if (k <= 0)
                        break;
                got += (size_t) k;
                if (got == sizeof(out) - 1)
                        break;
        }
        out[got] = '\0';
        close(pipefd[0]);
        if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0)
                r = parse_samples(out, ns, n);
        if (r < 0)
                fprintf(stderr, "bench-egress: the direct %s measurement failed: %.300s\n", what,
                        out);
        free(code);
        return r;
}

/* ---- through the daemon -------------------------------------------------------------------- */

static struct bench_daemon daemon_;
static char profile_dir[64];

/* The profile's directory goes at exit (bench_die exits too). */
static void remove_profile(void)
{
        char path[128];

        if (profile_dir[0]) {
                snprintf(path, sizeof(path), "%s/bench-egress.json", profile_dir);
                (void) unlink(path);
                (void) rmdir(profile_dir);
                profile_dir[0] = '\0';
        }
}

static void on_signal(int sig)
{
        (void) sig;
        bench_daemon_stop(&daemon_);
        remove_profile();
        _exit(1);
}

static int write_profile(void)
{
        char path[128], bulk_rule[32], greet_rule[32];
        json_t *p;
        int r;

        snprintf(profile_dir, sizeof(profile_dir), "/tmp/airlock-bench-egress-XXXXXX");
        if (!mkdtemp(profile_dir)) {
                profile_dir[0] = '\0';
                return -1;
        }
        atexit(remove_profile);
        snprintf(bulk_rule, sizeof(bulk_rule), "127.0.0.1:%d", bulk.port);
        snprintf(greet_rule, sizeof(greet_rule), "127.0.0.1:%d", greet.port);
        p = json_pack("{s:s, s:[s], s:[], s:{s:i, s:s, s:s, s:s}, "
                      "s:{s:s, s:[s, s], s:i, s:s}}",
                      "description", "bench-egress: a local server through the proxy", "languages",
                      "python", "preload", "limits", "cpus", 2, "memory", "1GiB", "timeout", "600s",
                      "output", "4MiB", "network", "mode", "allow", "allow", bulk_rule, greet_rule,
                      "max_connections", 512, "max_bytes", "1TiB");
        snprintf(path, sizeof(path), "%s/bench-egress.json", profile_dir);
        r = p ? json_dump_file(p, path, 0) : -1;
        json_decref(p);
        return r;
}

/* Runs the measuring code as a cell of session id; its stdout into ns. */
static void measure_proxied(struct bench_conn *c, const char *id, const char *what,
                            const char *mode, size_t n, uint64_t *ns)
{
        char path[128], *code = measure_code(what, mode, n), *body;
        json_t *req, *res;
        const char *resp, *out;
        int status;

        req = code ? json_pack("{s:s, s:i}", "code", code, "timeout_s", 600) : NULL;
        body = req ? json_dumps(req, JSON_COMPACT) : NULL;
        json_decref(req);
        free(code);
        if (!body)
                bench_die(&daemon_, "out of memory");
        snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);
        if (bench_http(c, "POST", path, body, &status, &resp) < 0)
                bench_die(&daemon_, "execute (%s %s): %s", what, mode, strerror(errno));
        free(body);
        res = status == 200 ? json_loads(resp, 0, NULL) : NULL;
        out = json_string_value(json_object_get(res, "stdout"));
        if (!out || parse_samples(out, ns, n) < 0) {
                json_decref(res);
                bench_die(&daemon_, "the %s %s cell failed (HTTP %d): %.600s", what, mode, status,
                          resp);
        }
        json_decref(res);
}

static double mib_per_s(uint64_t ns)
{
        return (double) SIZE / (1 << 20) / ((double) ns / 1e9);
}

/* Prints the times of DOWNLOADS downloads and their median throughput, which it returns. */
static double report_download(const char *name, uint64_t *ns, double direct)
{
        double rate = mib_per_s(bench_report(name, ns, DOWNLOADS));

        if (direct > 0)
                printf("  %-42s %9.1f MiB/s  (%.0f%% of direct)\n", "", rate, 100 * rate / direct);
        else
                printf("  %-42s %9.1f MiB/s\n", "", rate);
        return rate;
}

int main(int argc, char **argv)
{
        static const char *const modes[] = { "forward", "http", "connect" };
        static const char *const mode_names[] = { "the forwarder", "plain HTTP via the proxy",
                                                  "a CONNECT tunnel" };
        const char *extra[] = { "--pool-size", "1", NULL };
        uint64_t down_direct[DOWNLOADS], down[3][DOWNLOADS], *conn_direct, *conn, p50_direct;
        double rate_direct, worst = 1e18;
        uint64_t added_worst = 0;
        char id[64], name[96], path[128];
        struct bench_conn c;
        const char *bin, *resp;
        int next, status = 0;
        size_t n = 1000;

        setvbuf(stdout, NULL, _IOLBF, 0);
        signal(SIGPIPE, SIG_IGN);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                n = (size_t) strtoul(argv[next], NULL, 10);
        n = n < 20 ? 20 : n > 20000 ? 20000 : n;
        conn_direct = calloc(n, sizeof(*conn_direct));
        conn = calloc(n, sizeof(*conn));
        if (!conn_direct || !conn)
                return 1;
        if (listener_start(&bulk, serve_bulk) < 0 || listener_start(&greet, NULL) < 0) {
                fprintf(stderr, "bench-egress: cannot listen on 127.0.0.1: %s\n", strerror(errno));
                return 1;
        }

        /* The direct connects first, with nothing else running. */
        printf("bench-egress: %u MiB downloads from 127.0.0.1:%d, connects to 127.0.0.1:%d\n",
               SIZE >> 20, bulk.port, greet.port);
        if (measure_direct("connect", n, conn_direct) < 0)
                return 1;
        p50_direct = bench_report("connect to first byte, direct", conn_direct, n);

        bench_catch_signals(on_signal);
        if (write_profile() < 0)
                bench_die(&daemon_, "cannot write the profile in %s", profile_dir);
        setenv("AIRLOCK_PROFILES_DIR", profile_dir, 1);
        if (bench_daemon_start(&daemon_, bin, extra) < 0)
                return 1;
        bench_conn_init(&c, &daemon_);
        if (bench_daemon_wait_log(&daemon_, "zygote ready", 30000) < 0)
                bench_die(&daemon_, "the daemon's zygote was not ready within 30 s");
        if (bench_http(&c, "POST", "/v1/sessions", "{\"profile\":\"bench-egress\"}", &status,
                       &resp) < 0)
                bench_die(&daemon_, "POST /v1/sessions: %s", strerror(errno));
        if (status != 201 || bench_json_str(resp, "id", id, sizeof(id)) < 0)
                bench_die(&daemon_, "POST /v1/sessions answered %d: %s", status, resp);

        /* Downloads in rounds, each way once a round, so that a noisy neighbour weighs on
         * every way alike; round 0 warms up and is not counted. */
        for (size_t round = 0; round <= DOWNLOADS; round++) {
                uint64_t ns;

                if (measure_direct("download", 1, &ns) < 0)
                        bench_die(&daemon_, "the direct download failed");
                if (round > 0)
                        down_direct[round - 1] = ns;
                for (size_t m = 0; m < 3; m++) {
                        measure_proxied(&c, id, "download", modes[m], 1, &ns);
                        if (round > 0)
                                down[m][round - 1] = ns;
                }
        }
        rate_direct = report_download("download, direct from the host", down_direct, 0);
        for (size_t m = 0; m < 3; m++) {
                double rate;

                snprintf(name, sizeof(name), "download, %s", mode_names[m]);
                rate = report_download(name, down[m], rate_direct);
                if (rate < worst)
                        worst = rate;
        }
        printf("throughput through the proxy (worst way) %.0f%% of direct: target >= %.0f%% %s\n",
               100 * worst / rate_direct, 100 * THROUGHPUT_TARGET,
               worst >= THROUGHPUT_TARGET * rate_direct ? "met" : "MISSED");

        for (size_t m = 0; m < 3; m++) {
                uint64_t p50, added;

                if (strcmp(modes[m], "http") == 0)
                        continue; /* a plain HTTP request has no connect of its own */
                measure_proxied(&c, id, "connect", modes[m], n, conn);
                snprintf(name, sizeof(name), "connect to first byte, %s", mode_names[m]);
                p50 = bench_report(name, conn, n);
                added = p50 > p50_direct ? p50 - p50_direct : 0;
                printf("  added p50 %.3f ms\n", (double) added / 1e6);
                if (added > added_worst)
                        added_worst = added;
        }
        printf("added connect latency p50 (worst way) %.3f ms: target < %.0f ms %s\n",
               (double) added_worst / 1e6, LATENCY_TARGET_NS / 1e6,
               added_worst < LATENCY_TARGET_NS ? "met" : "MISSED");

        snprintf(path, sizeof(path), "/v1/sessions/%s", id);
        if (bench_http(&c, "DELETE", path, NULL, &status, &resp) < 0 || status != 200)
                fprintf(stderr, "bench-egress: DELETE %s failed (%d)\n", path, status);
        bench_conn_close(&c);
        free(c.buf);
        free(c.req);
        free(c.body);
        bench_daemon_stop(&daemon_);
        free(conn_direct);
        free(conn);
        return 0;
}
