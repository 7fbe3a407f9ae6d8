/* bench-responses: the overhead of the Responses API (POST /v1/responses) over the execution
 * it runs.
 *
 *   bench-responses [AIRLOCK_BINARY] [ITERATIONS]      (default 500; also $AIRLOCK_BIN)
 *
 * Starts an instant fake upstream model on loopback (a thread of this program: it answers a
 * run_python call of "1" to a request without a tool message, and a final answer to one with
 * it) and its own `airlock serve` pointed at it. One container is made, then each iteration
 * times, on one keep-alive connection, a request with one code call in that container
 * (two upstream round trips, the execution, the container's bookkeeping, the stored response)
 * and a direct POST /v1/sessions/{id}/execute of the same code in the same session, and
 * reports both and their difference per iteration. Target (issue 8): p50 of the difference
 * under 5 ms. */
#include "bench-util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define WARMUP 30
#define UPSTREAM_BODY_MAX (4u << 20)

static const char tool_call[] =
        "{\"id\":\"chatcmpl-b\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\","
        "\"choices\":[{\"index\":0,\"finish_reason\":\"tool_calls\",\"message\":{\"role\":"
        "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
        "\"function\":{\"name\":\"run_python\",\"arguments\":\"{\\\"code\\\": \\\"1\\\"}\"}}]}}],"
        "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}";
static const char final_answer[] =
        "{\"id\":\"chatcmpl-c\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\","
        "\"choices\":[{\"index\":0,\"finish_reason\":\"stop\",\"message\":{\"role\":"
        "\"assistant\",\"content\":\"It is 1.\"}}],"
        "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}";

/* One connection of the daemon's model client: requests in, canned answers out, until it
 * closes. */
static void *upstream_conn(void *arg)
{
        int fd = (int) (intptr_t) arg;
        char *buf = malloc(UPSTREAM_BODY_MAX);
        size_t len = 0;

        while (buf) {
                char *end = memmem(buf, len, "\r\n\r\n", 4), *cl, head[160];
                size_t need, body_len = 0;
                const char *answer;
                ssize_t n;

                if (end) {
                        *end = '\0';
                        cl = strcasestr(buf, "content-length:");
                        body_len = cl ? strtoul(cl + 15, NULL, 10) : 0;
                        need = (size_t) (end - buf) + 4 + body_len;
                        *end = '\r';
                        if (need <= len) {
                                /* A request that carries the tool's result gets the answer. */
                                answer = memmem(end, body_len + 4, "\"role\":\"tool\"", 13)
                                                 ? final_answer
                                                 : tool_call;
                                n = snprintf(head, sizeof(head),
                                             "HTTP/1.1 200 OK\r\nContent-Type: application/json"
                                             "\r\nContent-Length: %zu\r\n\r\n",
                                             strlen(answer));
                                /* One write: two would wait out Nagle and a delayed ACK. */
                                if (writev(fd,
                                           (struct iovec[]){ { head, (size_t) n },
                                                             { (char *) answer, strlen(answer) } },
                                           2) != n + (ssize_t) strlen(answer))
                                        break;
                                memmove(buf, buf + need, len - need);
                                len -= need;
                                continue;
                        }
                }
                if (len == UPSTREAM_BODY_MAX)
                        break;
                n = read(fd, buf + len, UPSTREAM_BODY_MAX - len);
                if (n <= 0)
                        break;
                len += (size_t) n;
        }
        free(buf);
        close(fd);
        return NULL;
}

static void *upstream_accept(void *arg)
{
        int lfd = (int) (intptr_t) arg;

        for (;;) {
                pthread_t t;
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        return NULL;
                }
                if (pthread_create(&t, NULL, upstream_conn, (void *) (intptr_t) fd) != 0) {
                        close(fd);
                        continue;
                }
                pthread_detach(t);
        }
}

/* Starts the fake model on 127.0.0.1; returns its port, or -1. */
static int upstream_start(void)
{
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t alen = sizeof(a);
        pthread_t t;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
            getsockname(fd, (struct sockaddr *) &a, &alen) < 0 ||
            pthread_create(&t, NULL, upstream_accept, (void *) (intptr_t) fd) != 0)
                return -1;
        pthread_detach(t);
        return ntohs(a.sin_port);
}

int main(int argc, char **argv)
{
        struct bench_daemon d;
        struct bench_conn c;
        char url[64], cid[64], sid[64], path[128], body[256];
        const char *bin, *resp;
        const char *extra[] = { "--pool-size", "1", "--llm-base-url", url, "--llm-model",
                                "fake-model",  NULL };
        int next, status = 0, port;
        size_t n = 500;
        uint64_t *resp_ns, *exec_ns, *diff_ns, t_start, p50;

        setvbuf(stdout, NULL, _IOLBF, 0);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                n = (size_t) strtoul(argv[next], NULL, 10);
        if (n < 10)
                n = 10;
        resp_ns = calloc(n, sizeof(*resp_ns));
        exec_ns = calloc(n, sizeof(*exec_ns));
        diff_ns = calloc(n, sizeof(*diff_ns));
        if (!resp_ns || !exec_ns || !diff_ns)
                return 1;
        port = upstream_start();
        if (port < 0) {
                fprintf(stderr, "bench-responses: cannot start the fake model: %s\n",
                        strerror(errno));
                return 1;
        }
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", port);
        if (bench_daemon_start(&d, bin, extra) < 0)
                return 1;
        bench_conn_init(&c, &d);
        if (bench_daemon_wait_log(&d, "zygote ready", 20000) < 0)
                bench_die(&d, "the daemon did not log 'zygote ready' within 20 s");

        if (bench_http(&c, "POST", "/v1/containers", "{\"name\":\"bench\"}", &status, &resp) < 0)
                bench_die(&d, "POST /v1/containers: %m");
        if (status != 200 || bench_json_str(resp, "id", cid, sizeof(cid)) < 0 ||
            strncmp(cid, "cntr_", 5) != 0)
                bench_die(&d, "POST /v1/containers answered %d: %s", status, resp);
        snprintf(sid, sizeof(sid), "s-%s", cid + 5);
        snprintf(path, sizeof(path), "/v1/sessions/%s/execute", sid);
        snprintf(body, sizeof(body),
                 "{\"model\":\"fake-model\",\"input\":\"What is 1?\",\"tools\":[{\"type\":"
                 "\"code_interpreter\",\"container\":\"%s\"}]}",
                 cid);

        t_start = bench_now_ns();
        for (size_t i = 0; i < WARMUP + n; i++) {
                uint64_t t0 = bench_now_ns(), t1, t2;

                if (bench_http(&c, "POST", "/v1/responses", body, &status, &resp) < 0)
                        bench_die(&d, "response #%zu: %m", i);
                t1 = bench_now_ns();
                if (status != 200 || !strstr(resp, "\"output_text\":\"It is 1.\"") ||
                    !strstr(resp, "\"code_interpreter_call\""))
                        bench_die(&d, "response #%zu answered %d: %.2000s", i, status, resp);
                if (bench_http(&c, "POST", path, "{\"code\":\"1\"}", &status, &resp) < 0)
                        bench_die(&d, "execute #%zu: %m", i);
                t2 = bench_now_ns();
                if (status != 200 || !strstr(resp, "\"result\":\"1\""))
                        bench_die(&d, "execute #%zu answered %d: %s", i, status, resp);
                if (i >= WARMUP) {
                        resp_ns[i - WARMUP] = t1 - t0;
                        exec_ns[i - WARMUP] = t2 - t1;
                        diff_ns[i - WARMUP] = t1 - t0 > t2 - t1 ? (t1 - t0) - (t2 - t1) : 0;
                }
                if (bench_now_ns() - t_start > 120ull * 1000000000u) {
                        fprintf(stderr, "bench-responses: stopping early after 120 s\n");
                        n = i >= WARMUP ? i - WARMUP + 1 : 0;
                        break;
                }
        }
        if (n == 0)
                bench_die(&d, "no measurement within the time bound");

        bench_report("POST /v1/responses, one code call (2 upstream answers)", resp_ns, n);
        bench_report("POST /v1/sessions/{id}/execute of the same code", exec_ns, n);
        p50 = bench_report("overhead: the response minus the execute, per iteration", diff_ns, n);
        printf("target p50 < 5 ms: %s (%.2fx the target)\n", p50 < 5000000 ? "met" : "MISSED",
               (double) p50 / 5e6);

        snprintf(path, sizeof(path), "/v1/containers/%s", cid);
        if (bench_http(&c, "DELETE", path, NULL, &status, &resp) < 0 || status != 200)
                fprintf(stderr, "bench-responses: DELETE %s failed (%d)\n", path, status);
        bench_conn_close(&c);
        bench_daemon_stop(&d);
        free(resp_ns);
        free(exec_ns);
        free(diff_ns);
        return 0;
}
