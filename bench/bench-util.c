/* Helpers of the daemon benchmarks; see bench-util.h. */
#include "bench-util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t bench_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

void bench_sleep_ms(unsigned ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

const char *bench_airlock_bin(int argc, char **argv, int *next)
{
        const char *env = getenv("AIRLOCK_BIN");

        *next = 1;
        if (argc > 1 && !isdigit((unsigned char) argv[1][0])) {
                *next = 2;
                return argv[1];
        }
        if (env && *env)
                return env;
        return "build/src/cli/airlock";
}

/* ---- the daemon ---- */

static void print_log_tail(const char *path)
{
        char buf[4096];
        ssize_t n;
        off_t size;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return;
        size = lseek(fd, 0, SEEK_END);
        if (size > (off_t) sizeof(buf) - 1)
                lseek(fd, size - (off_t) sizeof(buf) + 1, SEEK_SET);
        else
                lseek(fd, 0, SEEK_SET);
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return;
        buf[n] = '\0';
        fprintf(stderr, "---- daemon log (%s), last lines ----\n%s%s----\n", path, buf,
                buf[n - 1] == '\n' ? "" : "\n");
}

/* Returns the port once the log has the "listening on" line, 0 if not yet, -1 if malformed. */
static int find_port(const char *path)
{
        char buf[16384];
        ssize_t n;
        const char *p, *eol, *colon;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        p = strstr(buf, "listening on ");
        if (!p)
                return 0;
        eol = strchr(p, '\n');
        if (!eol)
                return 0; /* the line is not complete yet */
        colon = NULL;
        for (const char *q = p; q < eol; q++)
                if (*q == ':')
                        colon = q;
        if (!colon || atoi(colon + 1) <= 0)
                return -1;
        return atoi(colon + 1);
}

int bench_daemon_wait_log(const struct bench_daemon *d, const char *what, unsigned timeout_ms)
{
        uint64_t deadline = bench_now_ns() + (uint64_t) timeout_ms * 1000000u;

        for (;;) {
                char buf[65536];
                ssize_t n;
                int fd = open(d->log, O_RDONLY | O_CLOEXEC);

                if (fd >= 0) {
                        n = read(fd, buf, sizeof(buf) - 1);
                        close(fd);
                        if (n > 0) {
                                buf[n] = '\0';
                                if (strstr(buf, what))
                                        return 0;
                        }
                }
                if (bench_now_ns() > deadline)
                        return -1;
                bench_sleep_ms(5);
        }
}

static int read_token(const char *path, char *out, size_t size)
{
        ssize_t n;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return -1;
        n = read(fd, out, size - 1);
        close(fd);
        if (n <= 0)
                return -1;
        out[n] = '\0';
        while (n > 0 && isspace((unsigned char) out[n - 1]))
                out[--n] = '\0';
        return n > 0 ? 0 : -1;
}

unsigned bench_request_timeout_s = BENCH_REQUEST_TIMEOUT_S;

int bench_daemon_start(struct bench_daemon *d, const char *bin, const char *const *extra)
{
        char state[96], *argv[64];
        int argc = 0, port = 0, status;
        uint64_t deadline;

        memset(d, 0, sizeof(*d));
        d->pid = -1;
        snprintf(d->dir, sizeof(d->dir), "/tmp/airlock-bench-XXXXXX");
        if (!mkdtemp(d->dir)) {
                fprintf(stderr, "bench: mkdtemp: %s\n", strerror(errno));
                d->dir[0] = '\0';
                return -1;
        }
        snprintf(state, sizeof(state), "%s/state", d->dir);
        snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
        if (access(bin, X_OK) < 0) {
                fprintf(stderr,
                        "bench: cannot run the airlock binary %s (%s); give its path as the "
                        "first argument or in AIRLOCK_BIN\n",
                        bin, strerror(errno));
                bench_daemon_stop(d);
                return -1;
        }

        argv[argc++] = (char *) bin;
        argv[argc++] = "serve";
        argv[argc++] = "--listen";
        argv[argc++] = "127.0.0.1:0";
        argv[argc++] = "--state-dir";
        argv[argc++] = state;
        for (size_t i = 0; extra && extra[i] && argc < 62; i++)
                argv[argc++] = (char *) extra[i];
        argv[argc] = NULL;

        fflush(stdout);
        fflush(stderr);
        d->pid = fork();
        if (d->pid < 0) {
                fprintf(stderr, "bench: fork: %s\n", strerror(errno));
                bench_daemon_stop(d);
                return -1;
        }
        if (d->pid == 0) {
                int null = open("/dev/null", O_RDWR);
                int log = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);

                /* The daemon must not outlive the benchmark, whatever happens to it. */
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (null < 0 || log < 0)
                        _exit(126);
                dup2(null, 0);
                dup2(log, 1);
                dup2(log, 2);
                unsetenv("AIRLOCK_TOKEN"); /* use the token file of our private state dir */
                execv(bin, argv);
                dprintf(2, "bench: exec %s: %s\n", bin, strerror(errno));
                _exit(127);
        }

        deadline = bench_now_ns() + 30ull * 1000000000u;
        for (;;) {
                port = find_port(d->log);
                if (port != 0)
                        break;
                if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
                        d->pid = -1;
                        fprintf(stderr, "bench: airlock serve exited at start (status %d)%s\n",
                                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                                geteuid() != 0 ? "; the daemon's sandbox needs root" : "");
                        print_log_tail(d->log);
                        bench_daemon_stop(d);
                        return -1;
                }
                if (bench_now_ns() > deadline) {
                        fprintf(stderr, "bench: airlock serve did not say 'listening on' "
                                        "within 30 s\n");
                        print_log_tail(d->log);
                        bench_daemon_stop(d);
                        return -1;
                }
                bench_sleep_ms(5);
        }
        if (port < 0) {
                fprintf(stderr, "bench: cannot parse the port of the 'listening on' line\n");
                print_log_tail(d->log);
                bench_daemon_stop(d);
                return -1;
        }
        d->port = port;
        snprintf(state, sizeof(state), "%s/state/token", d->dir);
        if (read_token(state, d->token, sizeof(d->token)) < 0) {
                fprintf(stderr, "bench: cannot read the token from %s\n", state);
                bench_daemon_stop(d);
                return -1;
        }
        return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void) st;
        (void) ftw;
        if (flag == FTW_DP)
                rmdir(path);
        else
                unlink(path);
        return 0;
}

void bench_daemon_stop(struct bench_daemon *d)
{
        if (d->pid > 0) {
                uint64_t deadline = bench_now_ns() + 20ull * 1000000000u;
                int status = 0;
                pid_t r;

                kill(d->pid, SIGTERM);
                while ((r = waitpid(d->pid, &status, WNOHANG)) == 0 && bench_now_ns() < deadline)
                        bench_sleep_ms(10);
                if (r == 0) {
                        fprintf(stderr, "bench: the daemon did not stop within 20 s of SIGTERM; "
                                        "SIGKILL\n");
                        kill(d->pid, SIGKILL);
                        waitpid(d->pid, &status, 0);
                } else if (r == d->pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                        fprintf(stderr, "bench: note: the daemon exited with status %d\n",
                                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                        print_log_tail(d->log);
                }
                d->pid = -1;
        }
        if (d->dir[0]) {
                nftw(d->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
                d->dir[0] = '\0';
        }
}

void bench_catch_signals(void (*handler)(int))
{
        struct sigaction sa = { .sa_handler = handler };

        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGHUP, &sa, NULL);
}

void bench_die(struct bench_daemon *d, const char *fmt, ...)
{
        va_list ap;

        fflush(stdout);
        fputs("bench: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        if (d) {
                if (d->pid > 0)
                        print_log_tail(d->log);
                bench_daemon_stop(d);
        }
        exit(1);
}

/* ---- the HTTP client ---- */

void bench_conn_init(struct bench_conn *c, const struct bench_daemon *d)
{
        memset(c, 0, sizeof(*c));
        c->fd = -1;
        c->port = d->port;
        c->token = d->token;
}

void bench_conn_close(struct bench_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        c->len = c->used = 0;
}

static int conn_connect(struct bench_conn *c)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) c->port) };
        struct timeval tv = { .tv_sec = bench_request_timeout_s };
        int one = 1;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
                return -1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* a stuck daemon fails the benchmark instead of hanging it */
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(c->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int e = errno;

                bench_conn_close(c);
                errno = e;
                return -1;
        }
        c->len = c->used = 0;
        return 0;
}

static int grow(char **buf, size_t *cap, size_t need)
{
        size_t n = *cap ? *cap : 4096;
        char *p;

        if (need <= *cap)
                return 0;
        while (n < need)
                n *= 2;
        p = realloc(*buf, n);
        if (!p) {
                errno = ENOMEM;
                return -1;
        }
        *buf = p;
        *cap = n;
        return 0;
}

/* Reads until c->buf holds at least `need` bytes; -1 on EOF (errno ECONNRESET) or error. */
static int fill(struct bench_conn *c, size_t need)
{
        while (c->len < need) {
                ssize_t n;

                if (grow(&c->buf, &c->cap, c->len < 65536 ? 65536 : c->len * 2) < 0)
                        return -1;
                n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        if (n == 0)
                                errno = ECONNRESET;
                        else if (errno == EAGAIN || errno == EWOULDBLOCK)
                                errno = ETIMEDOUT; /* SO_RCVTIMEO */
                        return -1;
                }
                c->len += (size_t) n;
        }
        return 0;
}

/* The offset just past the next "\r\n" at or after pos, reading more as needed. */
static int read_line(struct bench_conn *c, size_t pos, size_t *end)
{
        for (;;) {
                char *p = c->len > pos ? memmem(c->buf + pos, c->len - pos, "\r\n", 2) : NULL;

                if (p) {
                        *end = (size_t) (p - c->buf) + 2;
                        return 0;
                }
                if (fill(c, c->len + 1) < 0)
                        return -1;
        }
}

static int body_append(struct bench_conn *c, const char *p, size_t n)
{
        if (grow(&c->body, &c->body_cap, c->body_len + n + 1) < 0)
                return -1;
        memcpy(c->body + c->body_len, p, n);
        c->body_len += n;
        c->body[c->body_len] = '\0';
        return 0;
}

static int read_response(struct bench_conn *c, const char *method, int *status)
{
        size_t hdr_end = 0, pos, line_end;
        long long content_length = -1;
        int chunked = 0, close_after = 0;

        c->body_len = 0;
        if (grow(&c->body, &c->body_cap, 1) < 0)
                return -1;
        c->body[0] = '\0';
        /* headers */
        for (;;) {
                char *p = c->len ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL;

                if (p) {
                        hdr_end = (size_t) (p - c->buf) + 4;
                        break;
                }
                if (fill(c, c->len + 1) < 0)
                        return -1;
        }
        if (hdr_end < 12 || strncmp(c->buf, "HTTP/1.", 7) != 0) {
                errno = EPROTO;
                return -1;
        }
        *status = atoi(c->buf + 9);
        pos = (size_t) ((char *) memchr(c->buf, '\n', hdr_end) - c->buf) + 1;
        while (pos < hdr_end - 2) {
                char *eol = memchr(c->buf + pos, '\n', hdr_end - pos);
                char *line = c->buf + pos, *colon, *v;
                size_t llen = (size_t) (eol - line);

                colon = memchr(line, ':', llen);
                if (colon) {
                        size_t name_len = (size_t) (colon - line);

                        v = colon + 1;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        if (name_len == 14 && !strncasecmp(line, "Content-Length", 14))
                                content_length = strtoll(v, NULL, 10);
                        else if (name_len == 17 && !strncasecmp(line, "Transfer-Encoding", 17))
                                chunked = !strncasecmp(v, "chunked", 7);
                        else if (name_len == 10 && !strncasecmp(line, "Connection", 10))
                                close_after = !strncasecmp(v, "close", 5);
                }
                pos = (size_t) (eol - c->buf) + 1;
        }
        pos = hdr_end;
        if (!strcmp(method, "HEAD") || *status == 204 || *status == 304 ||
            (*status >= 100 && *status < 200)) {
                /* no body */
        } else if (chunked) {
                for (;;) {
                        unsigned long long size;

                        if (read_line(c, pos, &line_end) < 0)
                                return -1;
                        size = strtoull(c->buf + pos, NULL, 16);
                        pos = line_end;
                        if (size == 0) {
                                /* trailers, then the empty line */
                                for (;;) {
                                        if (read_line(c, pos, &line_end) < 0)
                                                return -1;
                                        if (line_end == pos + 2) {
                                                pos = line_end;
                                                break;
                                        }
                                        pos = line_end;
                                }
                                break;
                        }
                        if (fill(c, pos + size + 2) < 0 ||
                            body_append(c, c->buf + pos, (size_t) size) < 0)
                                return -1;
                        pos += size + 2;
                }
        } else if (content_length >= 0) {
                if (fill(c, pos + (size_t) content_length) < 0 ||
                    body_append(c, c->buf + pos, (size_t) content_length) < 0)
                        return -1;
                pos += (size_t) content_length;
        } else {
                /* delimited by the end of the connection */
                for (;;) {
                        size_t before = c->len;

                        if (fill(c, c->len + 1) < 0) {
                                if (c->len == before && errno == ECONNRESET)
                                        break;
                                return -1;
                        }
                }
                if (body_append(c, c->buf + pos, c->len - pos) < 0)
                        return -1;
                pos = c->len;
                close_after = 1;
        }
        c->used = pos;
        if (close_after)
                bench_conn_close(c);
        return 0;
}

int bench_http(struct bench_conn *c, const char *method, const char *path, const char *body,
               int *status, const char **resp)
{
        return bench_http_raw(c, method, path, "application/json", body, body ? strlen(body) : 0,
                              status, resp);
}

int bench_http_raw(struct bench_conn *c, const char *method, const char *path,
                   const char *content_type, const void *body, size_t blen, int *status,
                   const char **resp)
{
        size_t need = blen + strlen(path) + strlen(content_type) + 512;
        int n, retried = 0;

        if (grow(&c->req, &c->req_cap, need) < 0)
                return -1;
        if (body)
                n = snprintf(c->req, c->req_cap,
                             "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer "
                             "%s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                             method, path, c->port, c->token, content_type, blen);
        else
                n = snprintf(c->req, c->req_cap,
                             "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer "
                             "%s\r\n\r\n",
                             method, path, c->port, c->token);
        if (n < 0 || (size_t) n + blen >= c->req_cap) {
                errno = EOVERFLOW;
                return -1;
        }
        if (blen)
                memcpy(c->req + n, body, blen);

again:
        /* drop the previous response */
        if (c->used) {
                memmove(c->buf, c->buf + c->used, c->len - c->used);
                c->len -= c->used;
                c->used = 0;
        }
        if (c->fd < 0 && conn_connect(c) < 0)
                return -1;
        for (size_t off = 0, total = (size_t) n + blen; off < total;) {
                ssize_t w = send(c->fd, c->req + off, total - off, MSG_NOSIGNAL);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        bench_conn_close(c);
                        if (!retried++ && (errno == EPIPE || errno == ECONNRESET))
                                goto again;
                        return -1;
                }
                off += (size_t) w;
        }
        if (read_response(c, method, status) < 0) {
                int e = errno;
                int nothing = c->len == 0;

                bench_conn_close(c);
                /* a keep-alive connection the server had closed: once more on a new one */
                if (!retried++ && nothing && e == ECONNRESET)
                        goto again;
                errno = e;
                return -1;
        }
        *resp = c->body;
        return 0;
}

int bench_json_str(const char *json, const char *key, char *out, size_t size)
{
        char pat[128];
        const char *p, *e;

        snprintf(pat, sizeof(pat), "\"%s\":", key);
        p = strstr(json, pat);
        if (!p)
                return -1;
        p += strlen(pat);
        while (*p == ' ')
                p++;
        if (*p != '"')
                return -1;
        p++;
        e = strchr(p, '"');
        if (!e || (size_t) (e - p) >= size)
                return -1;
        memcpy(out, p, (size_t) (e - p));
        out[e - p] = '\0';
        return 0;
}

/* ---- numbers ---- */

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

uint64_t bench_percentile(const uint64_t *sorted, size_t n, double p)
{
        size_t i;

        if (n == 0)
                return 0;
        /* nearest rank */
        i = (size_t) (p * (double) n + 0.999999);
        if (i > 0)
                i--;
        if (i >= n)
                i = n - 1;
        return sorted[i];
}

uint64_t bench_report(const char *name, uint64_t *ns, size_t n)
{
        uint64_t p50, p99;

        qsort(ns, n, sizeof(*ns), cmp_u64);
        p50 = bench_percentile(ns, n, 0.50);
        p99 = bench_percentile(ns, n, 0.99);
        printf("%-44s p50 %8.3f ms  p99 %8.3f ms  (n=%zu)\n", name, (double) p50 / 1e6,
               (double) p99 / 1e6, n);
        fflush(stdout);
        return p50;
}

uint64_t bench_time_command(char *const argv[])
{
        uint64_t t0 = bench_now_ns(), t;
        int status;
        pid_t pid;

        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0)
                return 0;
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR);

                dup2(null, 0);
                dup2(null, 1);
                execv(argv[0], argv);
                _exit(127);
        }
        if (waitpid(pid, &status, 0) < 0)
                return 0;
        t = bench_now_ns() - t0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return 0;
        return t ? t : 1;
}

int bench_pin_cpus(int ncpus, char *out, size_t size)
{
        cpu_set_t set, pin;
        int used = 0;
        size_t off = 0;

        out[0] = '\0';
        if (sched_getaffinity(0, sizeof(set), &set) < 0)
                return -1;
        CPU_ZERO(&pin);
        for (int i = 0; i < CPU_SETSIZE && used < ncpus; i++) {
                if (!CPU_ISSET(i, &set))
                        continue;
                CPU_SET(i, &pin);
                used++;
                if (off < size)
                        off += (size_t) snprintf(out + off, size - off, "%s%d", used > 1 ? "," : "",
                                                 i);
        }
        if (CPU_COUNT(&set) > ncpus && sched_setaffinity(0, sizeof(pin), &pin) < 0)
                return -1;
        return used;
}

/* ---- /proc ---- */

unsigned long long bench_proc_field(pid_t pid, const char *name, const char *field)
{
        char path[64], line[256];
        unsigned long long v = 0;
        size_t len = strlen(field);
        FILE *f;

        (void) snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, name);
        f = fopen(path, "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (!strncmp(line, field, len) && line[len] == ':') {
                        v = strtoull(line + len + 1, NULL, 10);
                        break;
                }
        fclose(f);
        return v;
}

unsigned bench_proc_fds(pid_t pid)
{
        char path[64];
        struct dirent *de;
        unsigned n = 0;
        DIR *dir;

        (void) snprintf(path, sizeof(path), "/proc/%d/fd", (int) pid);
        dir = opendir(path);
        if (!dir)
                return 0;
        while ((de = readdir(dir)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(dir);
        return n;
}

#define SESSION_UID_MIN 0x70000000u
#define SESSION_UID_MAX 0x90000000u /* exclusive */
#define ZYGOTE_UID_MIN 0x60000000u
#define ZYGOTE_UID_MAX 0x60800000u /* exclusive */

struct proc_entry {
        int pid, ppid;
        unsigned uid;
        int mine; /* 0 not known yet, 1 the daemon or a descendant, -1 neither */
};

static int cmp_proc_pid(const void *a, const void *b)
{
        int x = ((const struct proc_entry *) a)->pid, y = ((const struct proc_entry *) b)->pid;

        return x < y ? -1 : x > y;
}

static int cmp_uint(const void *a, const void *b)
{
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;

        return x < y ? -1 : x > y;
}

/* ppid and real uid from /proc/PID/status. */
static int read_ppid_uid(int pid, int *ppid, unsigned *uid)
{
        char path[64], line[256];
        FILE *f;
        int got = 0;

        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (got < 2 && fgets(line, sizeof(line), f)) {
                if (!strncmp(line, "PPid:", 5)) {
                        *ppid = atoi(line + 5);
                        got++;
                } else if (!strncmp(line, "Uid:", 4)) {
                        *uid = (unsigned) strtoul(line + 4, NULL, 10);
                        got++;
                }
        }
        fclose(f);
        return got == 2 ? 0 : -1;
}

/* PSS and RSS in kB from smaps_rollup (one read: it walks the page tables); 0 for a zombie
 * or a process gone. */
static void read_pss_rss(int pid, unsigned long long *pss, unsigned long long *rss)
{
        char path[64], line[256];
        FILE *f;

        *pss = *rss = 0;
        snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
        f = fopen(path, "re");
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                if (!strncmp(line, "Pss:", 4))
                        *pss = strtoull(line + 4, NULL, 10);
                else if (!strncmp(line, "Rss:", 4))
                        *rss = strtoull(line + 4, NULL, 10);
        }
        fclose(f);
}

/* Whether ps[i] is the daemon or one of its descendants; ps is sorted by pid. The answer is
 * remembered along the way, so the whole table costs about one walk. */
static int is_mine(struct proc_entry *ps, size_t n, size_t i)
{
        struct proc_entry key, *parent;

        if (ps[i].mine)
                return ps[i].mine;
        key.pid = ps[i].ppid;
        parent = ps[i].ppid > 1 ? bsearch(&key, ps, n, sizeof(*ps), cmp_proc_pid) : NULL;
        ps[i].mine = -1; /* no cycles in a process tree, but be safe while we recurse */
        ps[i].mine = parent ? is_mine(ps, n, (size_t) (parent - ps)) : -1;
        return ps[i].mine;
}

int bench_sandbox_memory(pid_t daemon_pid, struct bench_sandbox_memory *m)
{
        struct proc_entry *ps = NULL;
        size_t n = 0, cap = 0;
        unsigned *uids;
        DIR *dir = opendir("/proc");
        struct dirent *de;

        memset(m, 0, sizeof(*m));
        if (!dir)
                return -1;
        while ((de = readdir(dir))) {
                struct proc_entry p = { 0 };

                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                p.pid = atoi(de->d_name);
                if (read_ppid_uid(p.pid, &p.ppid, &p.uid) < 0)
                        continue;
                if (n == cap) {
                        struct proc_entry *q = realloc(ps, (cap ? cap * 2 : 1024) * sizeof(*ps));

                        if (!q) {
                                closedir(dir);
                                free(ps);
                                return -1;
                        }
                        ps = q;
                        cap = cap ? cap * 2 : 1024;
                }
                p.mine = p.pid == daemon_pid ? 1 : 0;
                ps[n++] = p;
        }
        closedir(dir);
        qsort(ps, n, sizeof(*ps), cmp_proc_pid);

        uids = calloc(n ? n : 1, sizeof(*uids));
        if (!uids) {
                free(ps);
                return -1;
        }
        for (size_t i = 0; i < n; i++) {
                unsigned long long pss = 0, rss = 0;
                bool session = ps[i].uid >= SESSION_UID_MIN && ps[i].uid < SESSION_UID_MAX;
                bool zygote = ps[i].uid >= ZYGOTE_UID_MIN && ps[i].uid < ZYGOTE_UID_MAX;

                if (is_mine(ps, n, i) < 0) {
                        if (session || zygote)
                                m->foreign_procs++;
                        continue;
                }
                if (ps[i].pid != daemon_pid && !session && !zygote)
                        continue;
                read_pss_rss(ps[i].pid, &pss, &rss);
                if (ps[i].pid == daemon_pid) {
                        m->daemon_pss_kb = pss;
                } else if (session) {
                        if (!rss)
                                continue; /* a zombie */
                        m->session_pss_kb += pss;
                        m->session_rss_kb += rss;
                        uids[m->session_procs++] = ps[i].uid;
                } else if (rss) {
                        m->zygote_pss_kb += pss;
                        m->zygote_procs++;
                }
        }
        qsort(uids, m->session_procs, sizeof(*uids), cmp_uint);
        for (unsigned i = 0; i < m->session_procs; i++)
                if (i == 0 || uids[i] != uids[i - 1])
                        m->session_uids++;
        free(uids);
        free(ps);
        return 0;
}
