/* The egress proxy engine alone (src/egress/egress.h), without a daemon: throughput of a
 * download through a CONNECT tunnel against the same download straight from the server, and
 * what the proxy adds to a connection's first round trip. Issue 10's targets: >= 50% of the
 * direct throughput, added connect latency p50 < 1 ms.
 *
 * Needs root: the program moves into a network namespace of its own (the "host", loopback
 * only), forks a child into a further one (the "sandbox") and opens a proxy session into it;
 * the server listens on the host's 127.0.0.1. Nothing leaves these namespaces.
 *
 *   build/bench/bench-egress-engine [MIB] [ROUNDS]      (default 100 MiB, 3 rounds; 1,000
 *                                                         round trips each way) */
#include "egress/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUND_TRIPS 1000
#define CHUNK (256u * 1024u)

static uint64_t bytes_per_download;

static double now_s(void)
{
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
        fprintf(stderr, "bench-egress-engine: %s: %s\n", what, strerror(errno));
        exit(1);
}

/* The server: the first byte a client sends says what it wants: 'D' a download of
 * bytes_per_download bytes, 'P' a one-byte answer to every byte (round trips). */
static void *serve_one(void *arg)
{
        int fd = (int) (intptr_t) arg, one = 1;
        char *buf = malloc(CHUNK), c;

        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (buf && read(fd, &c, 1) == 1) {
                if (c == 'D') {
                        memset(buf, 'x', CHUNK);
                        for (uint64_t sent = 0; sent < bytes_per_download;) {
                                size_t n = bytes_per_download - sent < CHUNK
                                                   ? (size_t) (bytes_per_download - sent)
                                                   : CHUNK;
                                ssize_t k = send(fd, buf, n, MSG_NOSIGNAL);

                                if (k <= 0)
                                        break;
                                sent += (uint64_t) k;
                        }
                } else {
                        do {
                                if (write(fd, &c, 1) != 1)
                                        break;
                        } while (read(fd, &c, 1) == 1);
                }
        }
        free(buf);
        (void) close(fd);
        return NULL;
}

static void *server_main(void *arg)
{
        int lfd = (int) (intptr_t) arg;

        for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                pthread_t t;

                if (fd >= 0 && pthread_create(&t, NULL, serve_one, (void *) (intptr_t) fd) == 0)
                        (void) pthread_detach(t);
        }
        return NULL;
}

struct dial {
        int pidfd; /* -1: from the host's namespace */
        uint16_t port;
        int fd;
};

static void *dial_main(void *arg)
{
        struct dial *d = arg;
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons(d->port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int one = 1;

        if (d->pidfd >= 0 && setns(d->pidfd, CLONE_NEWNET) < 0)
                return NULL;
        d->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        (void) setsockopt(d->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(d->fd, (struct sockaddr *) &a, sizeof(a)) < 0) {
                (void) close(d->fd);
                d->fd = -1;
        }
        return NULL;
}

/* A connection to 127.0.0.1:port from the host (pidfd -1) or from inside the sandbox. */
static int dial(int pidfd, uint16_t port)
{
        struct dial d = { .pidfd = pidfd, .port = port, .fd = -1 };
        pthread_t t;

        if (pidfd < 0) {
                dial_main(&d);
        } else {
                if (pthread_create(&t, NULL, dial_main, &d) != 0)
                        die("pthread_create");
                (void) pthread_join(t, NULL);
        }
        if (d.fd < 0)
                die("connect");
        return d.fd;
}

/* Through the proxy: a CONNECT tunnel from the sandbox to the server. */
static int tunnel(int pidfd, uint16_t server_port)
{
        char req[128], answer[256];
        int fd = dial(pidfd, EGRESS_PROXY_PORT);
        size_t len = 0;
        int n = snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", server_port);

        if (write(fd, req, (size_t) n) != n)
                die("write");
        while (len < sizeof(answer) - 1) {
                ssize_t k = read(fd, answer + len, 1); /* byte by byte: nothing after the head */

                if (k <= 0)
                        die("read the CONNECT answer");
                len += (size_t) k;
                answer[len] = '\0';
                if (strstr(answer, "\r\n\r\n"))
                        break;
        }
        if (strncmp(answer, "HTTP/1.1 200 ", 13) != 0) {
                fprintf(stderr, "bench-egress-engine: CONNECT refused: %s\n", answer);
                exit(1);
        }
        return fd;
}

/* One download; returns MiB/s. */
static double download(int fd)
{
        char *buf = malloc(CHUNK);
        uint64_t got = 0;
        double t0 = now_s(), dt;
        ssize_t n;

        if (!buf || write(fd, "D", 1) != 1)
                die("write");
        while ((n = read(fd, buf, CHUNK)) > 0)
                got += (uint64_t) n;
        dt = now_s() - t0;
        free(buf);
        (void) close(fd);
        if (got != bytes_per_download) {
                fprintf(stderr, "bench-egress-engine: got %llu of %llu bytes\n",
                        (unsigned long long) got, (unsigned long long) bytes_per_download);
                exit(1);
        }
        return (double) got / (1024.0 * 1024.0) / dt;
}

/* Connection setup plus a one-byte round trip, in microseconds. */
static double round_trip(int pidfd, uint16_t port)
{
        double t0 = now_s();
        int fd = pidfd < 0 ? dial(-1, port) : tunnel(pidfd, port);
        char c = 'P';

        if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1)
                die("round trip");
        t0 = now_s() - t0;
        (void) close(fd);
        return t0 * 1e6;
}

/* CPU seconds the whole process (server, proxy and client threads) has used. */
static double cpu_s(void)
{
        struct rusage u;

        (void) getrusage(RUSAGE_SELF, &u);
        return (double) (u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
               (double) (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *) a, y = *(const double *) b;

        return x < y ? -1 : x > y;
}

static void if_lo_up(void)
{
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = { .ifr_name = "lo" };

        if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                die("lo");
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                die("lo up");
        (void) close(fd);
}

int main(int argc, char **argv)
{
        unsigned mib = argc > 1 ? (unsigned) atoi(argv[1]) : 100,
                 rounds = argc > 2 ? (unsigned) atoi(argv[2]) : 3;
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t alen = sizeof(a);
        struct egress *e = NULL;
        struct egress_session *s = NULL;
        struct egress_policy *p = NULL;
        struct airlock_error err = { "" };
        static double direct_rt[ROUND_TRIPS], proxy_rt[ROUND_TRIPS];
        double best_direct = 0, best_proxy = 0, cpu_direct = 0, cpu_proxy = 0, *ratios;
        char rule[128];
        json_t *network;
        pthread_t t;
        pid_t child;
        int lfd, pidfd, ready[2];
        char c;

        if (mib == 0 || rounds == 0) {
                fprintf(stderr, "usage: bench-egress-engine [MIB] [ROUNDS]\n");
                return 2;
        }
        bytes_per_download = (uint64_t) mib << 20;
        if (geteuid() != 0) {
                fprintf(stderr, "bench-egress-engine: needs root (network namespaces)\n");
                return 77;
        }
        if (unshare(CLONE_NEWNET) < 0)
                die("unshare");
        if_lo_up();
        if (pipe2(ready, O_CLOEXEC) < 0)
                die("pipe");
        child = fork();
        if (child == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (unshare(CLONE_NEWNET) < 0)
                        _exit(1);
                (void) !write(ready[1], "x", 1);
                for (;;)
                        (void) pause();
        }
        if (child < 0 || read(ready[0], &c, 1) != 1)
                die("sandbox child");
        pidfd = (int) syscall(SYS_pidfd_open, child, 0);
        if (pidfd < 0)
                die("pidfd_open");

        lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(lfd, 128) < 0 ||
            getsockname(lfd, (struct sockaddr *) &a, &alen) < 0)
                die("server");
        if (pthread_create(&t, NULL, server_main, (void *) (intptr_t) lfd) != 0)
                die("pthread_create");

        (void) snprintf(rule, sizeof(rule), "127.0.0.1:%u", ntohs(a.sin_port));
        network =
                json_pack("{s:s, s:[s], s:s}", "mode", "allow", "allow", rule, "max_bytes", "1TiB");
        if (egress_policy_parse(network, "bench", &p, &err) < 0 || egress_new(NULL, &e, &err) < 0 ||
            egress_session_open(e, pidfd, p, EGRESS_FORWARD_LOOPBACK, p, NULL, &s, &err) < 0) {
                fprintf(stderr, "bench-egress-engine: %s\n", err.msg);
                return 1;
        }
        json_decref(network);

        /* Rounds alternate, so that a busy moment of the machine falls on both alike; the
         * median of the rounds' ratios is the figure (the best of each is printed too). */
        ratios = calloc(rounds, sizeof(*ratios));
        if (!ratios)
                die("calloc");
        for (unsigned r = 0; r < rounds; r++) {
                double c0 = cpu_s(), d = download(dial(-1, ntohs(a.sin_port))), c1 = cpu_s();
                double x = download(tunnel(pidfd, ntohs(a.sin_port)));

                cpu_direct += c1 - c0;
                cpu_proxy += cpu_s() - c1;

                printf("round %u: direct %.0f MiB/s, through the proxy %.0f MiB/s (%.0f%%)\n",
                       r + 1, d, x, 100.0 * x / d);
                best_direct = d > best_direct ? d : best_direct;
                best_proxy = x > best_proxy ? x : best_proxy;
                ratios[r] = x / d;
        }
        qsort(ratios, rounds, sizeof(double), cmp_double);
        for (int i = 0; i < ROUND_TRIPS; i++) {
                direct_rt[i] = round_trip(-1, ntohs(a.sin_port));
                proxy_rt[i] = round_trip(pidfd, ntohs(a.sin_port));
        }
        qsort(direct_rt, ROUND_TRIPS, sizeof(double), cmp_double);
        qsort(proxy_rt, ROUND_TRIPS, sizeof(double), cmp_double);
        printf("throughput %u MiB x %u: through the proxy %.0f%% of direct (median of the "
               "rounds); best direct %.0f MiB/s, best through the proxy %.0f MiB/s\n",
               mib, rounds, 100.0 * ratios[rounds / 2], best_direct, best_proxy);
        printf("cpu per GiB (server, client and proxy together): direct %.2f s, through the "
               "proxy %.2f s\n",
               cpu_direct * 1024.0 / mib / rounds, cpu_proxy * 1024.0 / mib / rounds);
        free(ratios);
        printf("connect + 1-byte round trip: direct p50 %.0f us p99 %.0f us; through the proxy "
               "p50 %.0f us p99 %.0f us; added p50 %.0f us\n",
               direct_rt[ROUND_TRIPS / 2], direct_rt[ROUND_TRIPS * 99 / 100],
               proxy_rt[ROUND_TRIPS / 2], proxy_rt[ROUND_TRIPS * 99 / 100],
               proxy_rt[ROUND_TRIPS / 2] - direct_rt[ROUND_TRIPS / 2]);

        (void) egress_session_close(s);
        (void) egress_free(e);
        (void) egress_policy_free(p);
        (void) kill(child, SIGKILL);
        (void) waitpid(child, NULL, 0);
        return 0;
}
