/* bench-codemode: a Code Mode tool call round trip (sandbox -> daemon -> stdio MCP server ->
 * back), against the same call made directly to the same server by a host process.
 *
 *   bench-codemode [AIRLOCK_BINARY] [ITERATIONS]     (default 2000; also $AIRLOCK_BIN)
 *
 * The MCP server is this program itself, run as `bench-codemode --mcp-echo-server`: a tiny
 * stdio server with one tool, echo(text), so that the figures are airlock's and not a slow
 * server's. Both measurements run in the same run, against that server:
 *   direct     this process starts the server, initializes it and times tools/call echo over
 *              its pipes (request line written, answer line read and parsed);
 *   Code Mode  a daemon started with --mcp-config naming the server runs one cell that times
 *              echo(text="x") with time.perf_counter_ns() around each call (the function
 *              airlock_tools gives, and airlock_tools.call("echo", ...), which skips binding
 *              the arguments to the signature).
 * It prints p50 and p99 of each and the overhead (the p50 difference). Target (issue 9): an
 * overhead under 0.3 ms p50. */
#include "bench-util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define WARMUP 200
#define TARGET_NS 300000u /* overhead p50 target: 0.3 ms */

/* ---- the MCP server ------------------------------------------------------------------------ */

static void reply(json_t *id, json_t *result)
{
        json_t *msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
        char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;

        if (text) {
                fputs(text, stdout);
                fputc('\n', stdout);
                fflush(stdout);
        }
        free(text);
        json_decref(msg);
}

/* One JSON-RPC message a line on stdin, answers on stdout (MCP's stdio transport). */
static int echo_server(void)
{
        char *line = NULL;
        size_t cap = 0;

        while (getline(&line, &cap, stdin) > 0) {
                json_t *msg = json_loads(line, 0, NULL);
                json_t *id = json_object_get(msg, "id");
                json_t *params = json_object_get(msg, "params");
                const char *method = json_string_value(json_object_get(msg, "method"));

                if (!method || !id) {
                        json_decref(msg); /* a notification, or an answer: nothing to say */
                        continue;
                }
                if (strcmp(method, "initialize") == 0) {
                        const char *v =
                                json_string_value(json_object_get(params, "protocolVersion"));
                        reply(id, json_pack("{s:s, s:{s:{}}, s:{s:s, s:s}}", "protocolVersion",
                                            v ? v : "2025-06-18", "capabilities", "tools",
                                            "serverInfo", "name", "bench-echo", "version", "1"));
                } else if (strcmp(method, "tools/list") == 0) {
                        reply(id,
                              json_pack("{s:[{s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}]}", "tools",
                                        "name", "echo", "description", "Return the text unchanged.",
                                        "inputSchema", "type", "object", "properties", "text",
                                        "type", "string", "required", "text"));
                } else if (strcmp(method, "tools/call") == 0) {
                        json_t *text =
                                json_object_get(json_object_get(params, "arguments"), "text");
                        reply(id, json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text",
                                            "text", json_string_value(text) ?: "", "isError", 0));
                } else if (strcmp(method, "ping") == 0) {
                        reply(id, json_object());
                } else {
                        json_t *e =
                                json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id,
                                          "error", "code", -32601, "message", "method not found");
                        char *t = e ? json_dumps(e, JSON_COMPACT) : NULL;
                        if (t)
                                printf("%s\n", t);
                        fflush(stdout);
                        free(t);
                        json_decref(e);
                }
                json_decref(msg);
        }
        free(line);
        return 0;
}

/* ---- the direct client ------------------------------------------------------------------- */

struct server {
        pid_t pid;
        FILE *in;  /* its stdin */
        FILE *out; /* its stdout */
        char *line;
        size_t cap;
};

static int server_start(struct server *s, const char *self)
{
        int to[2], from[2];

        memset(s, 0, sizeof(*s));
        s->pid = -1;
        if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0)
                return -1;
        s->pid = fork();
        if (s->pid < 0)
                return -1;
        if (s->pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                dup2(to[0], 0);
                dup2(from[1], 1);
                execl(self, self, "--mcp-echo-server", (char *) NULL);
                _exit(127);
        }
        close(to[0]);
        close(from[1]);
        s->in = fdopen(to[1], "w");
        s->out = fdopen(from[0], "r");
        return s->in && s->out ? 0 : -1;
}

/* Sends one request and reads its answer; returns the parsed answer or NULL. */
static json_t *server_call(struct server *s, const char *request)
{
        if (fputs(request, s->in) < 0 || fputc('\n', s->in) < 0 || fflush(s->in) != 0)
                return NULL;
        if (getline(&s->line, &s->cap, s->out) <= 0)
                return NULL;
        return json_loads(s->line, 0, NULL);
}

static void server_stop(struct server *s)
{
        if (s->in)
                fclose(s->in); /* EOF: the server ends */
        if (s->out)
                fclose(s->out);
        if (s->pid > 0)
                (void) waitpid(s->pid, NULL, 0);
        free(s->line);
        memset(s, 0, sizeof(*s));
}

/* Times n tools/call echo round trips into ns (after a warm-up); returns 0 or -1. */
static int measure_direct(const char *self, uint64_t *ns, size_t n)
{
        static const char call[] = "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"tools/call\","
                                   "\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"x\"}}}";
        struct server s;
        json_t *answer;
        char req[256];

        if (server_start(&s, self) < 0) {
                server_stop(&s);
                return -1;
        }
        answer = server_call(&s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
                                 "\"params\":{\"protocolVersion\":\"2025-06-18\","
                                 "\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\","
                                 "\"version\":\"1\"}}}");
        if (!answer) {
                server_stop(&s);
                return -1;
        }
        json_decref(answer);
        fputs("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n", s.in);
        for (size_t i = 0; i < WARMUP + n; i++) {
                uint64_t t0 = bench_now_ns();
                const char *text;

                snprintf(req, sizeof(req), call, i + 1);
                answer = server_call(&s, req);
                text = json_string_value(json_object_get(
                        json_array_get(
                                json_object_get(json_object_get(answer, "result"), "content"), 0),
                        "text"));
                if (i >= WARMUP)
                        ns[i - WARMUP] = bench_now_ns() - t0;
                if (!text || strcmp(text, "x") != 0) {
                        json_decref(answer);
                        server_stop(&s);
                        return -1;
                }
                json_decref(answer);
        }
        server_stop(&s);
        return 0;
}

/* ---- Code Mode through the daemon -------------------------------------------------------- */

static struct bench_daemon daemon_;
/* The daemon's --mcp-config file and its AIRLOCK_PROFILES_DIR, with one profile: the default
 * caps tool calls at 1,000 per cell, fewer than one cell here makes. */
static char config_dir[64];
static const char *const config_files[] = { "mcp.json", "bench-codemode.json", NULL };

static void remove_config(void)
{
        char path[128];

        if (!config_dir[0])
                return;
        for (const char *const *f = config_files; *f; f++) {
                snprintf(path, sizeof(path), "%s/%s", config_dir, *f);
                (void) unlink(path);
        }
        (void) rmdir(config_dir);
        config_dir[0] = '\0';
}

/* Writes obj (a new reference, taken) as config_dir/name; 0 or -1. */
static int write_config(const char *name, json_t *obj)
{
        char path[128];
        int r;

        snprintf(path, sizeof(path), "%s/%s", config_dir, name);
        r = obj ? json_dump_file(obj, path, 0) : -1;
        json_decref(obj);
        return r;
}

static void cleanup(void)
{
        bench_daemon_stop(&daemon_);
        remove_config();
}

static void on_signal(int sig)
{
        (void) sig;
        cleanup();
        _exit(1);
}

_Noreturn static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

_Noreturn static void die(const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        remove_config();
        bench_die(&daemon_, "%s", msg);
}

/* The cell: times each call with perf_counter_ns, prints {"fn": [...], "call": [...]}. */
static const char cell_fmt[] = "import json, time, airlock_tools as t\n"
                               "echo = t.echo\n"
                               "def timed(f, n):\n"
                               "    out = []\n"
                               "    for _ in range(n):\n"
                               "        t0 = time.perf_counter_ns()\n"
                               "        r = f()\n"
                               "        out.append(time.perf_counter_ns() - t0)\n"
                               "        assert r == 'x', r\n"
                               "    return out\n"
                               "timed(lambda: echo(text='x'), %d)\n"
                               "fn = timed(lambda: echo(text='x'), %zu)\n"
                               "call = timed(lambda: t.call('echo', text='x'), %zu)\n"
                               "print(json.dumps({'fn': fn, 'call': call}))\n";

static int copy_samples(json_t *a, uint64_t *ns, size_t n)
{
        if (json_array_size(a) != n)
                return -1;
        for (size_t i = 0; i < n; i++)
                ns[i] = (uint64_t) json_integer_value(json_array_get(a, i));
        return 0;
}

int main(int argc, char **argv)
{
        const char *extra[] = { "--pool-size", "1", "--mcp-config", NULL, NULL };
        char self[PATH_MAX], config[128], id[64], path[128], *code = NULL, *body = NULL;
        uint64_t *direct, *fn, *call, p_direct, p_fn;
        json_t *res = NULL, *cell = NULL;
        struct bench_conn c;
        const char *bin, *resp;
        int next, status = 0;
        ssize_t len;
        size_t n = 2000;

        if (argc > 1 && strcmp(argv[1], "--mcp-echo-server") == 0)
                return echo_server();
        setvbuf(stdout, NULL, _IOLBF, 0);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                n = (size_t) strtoul(argv[next], NULL, 10);
        /* The cell prints every sample: at most 20,000 keep its output under 1 MiB. */
        n = n < 10 ? 10 : n > 20000 ? 20000 : n;
        len = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (len <= 0)
                return 1;
        self[len] = '\0';
        direct = calloc(n, sizeof(*direct));
        fn = calloc(n, sizeof(*fn));
        call = calloc(n, sizeof(*call));
        if (!direct || !fn || !call)
                return 1;

        /* The direct figure first, with nothing else running. */
        if (measure_direct(self, direct, n) < 0) {
                fprintf(stderr,
                        "bench-codemode: the direct calls to %s --mcp-echo-server "
                        "failed\n",
                        self);
                return 1;
        }

        snprintf(config_dir, sizeof(config_dir), "/tmp/airlock-bench-codemode-XXXXXX");
        if (!mkdtemp(config_dir)) {
                config_dir[0] = '\0';
                return 1;
        }
        bench_catch_signals(on_signal);
        if (write_config("mcp.json", json_pack("{s:{s:{s:s, s:[s]}}}", "mcpServers", "bench",
                                               "command", self, "args", "--mcp-echo-server")) < 0 ||
            write_config("bench-codemode.json",
                         json_pack("{s:s, s:[s], s:[s], s:{s:i}}", "description",
                                   "bench-codemode: echo, no cap that one cell reaches",
                                   "languages", "python", "code_tools", "echo", "limits",
                                   "tool_calls", 100000)) < 0)
                die("cannot write the config files in %s", config_dir);
        snprintf(config, sizeof(config), "%s/mcp.json", config_dir);
        setenv("AIRLOCK_PROFILES_DIR", config_dir, 1);
        extra[3] = config;
        if (bench_daemon_start(&daemon_, bin, extra) < 0) {
                cleanup();
                return 1;
        }
        bench_conn_init(&c, &daemon_);
        if (bench_daemon_wait_log(&daemon_, "zygote ready", 20000) < 0 ||
            bench_daemon_wait_log(&daemon_, "mcp_server=bench msg=\"ready\"", 20000) < 0)
                die("the daemon's zygote or MCP server was not ready within 20 s");
        bench_sleep_ms(300); /* the warm pool fills */

        if (bench_http(&c, "POST", "/v1/sessions", "{\"profile\":\"bench-codemode\"}", &status,
                       &resp) < 0)
                die("POST /v1/sessions: %s", strerror(errno));
        if (status != 201 || bench_json_str(resp, "id", id, sizeof(id)) < 0)
                die("POST /v1/sessions answered: %s", resp);
        snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);
        if (asprintf(&code, cell_fmt, WARMUP, n, n) < 0)
                return 1;
        res = json_pack("{s:s, s:i}", "code", code, "timeout_s", 600);
        body = res ? json_dumps(res, JSON_COMPACT) : NULL;
        json_decref(res);
        if (!body)
                return 1;
        if (bench_http(&c, "POST", path, body, &status, &resp) < 0)
                die("execute: %s", strerror(errno));
        res = status == 200 ? json_loads(resp, 0, NULL) : NULL;
        cell = json_loads(json_string_value(json_object_get(res, "stdout")) ?: "", 0, NULL);
        if (!cell || copy_samples(json_object_get(cell, "fn"), fn, n) < 0 ||
            copy_samples(json_object_get(cell, "call"), call, n) < 0)
                die("the cell failed: %.400s", resp);

        p_direct = bench_report("echo, direct stdio JSON-RPC from the host", direct, n);
        p_fn = bench_report("echo, Code Mode: echo(text='x') in a cell", fn, n);
        (void) bench_report("echo, Code Mode: call('echo', text='x')", call, n);
        printf("Code Mode overhead p50 %.3f ms: target < 0.3 ms %s\n",
               ((double) p_fn - (double) p_direct) / 1e6,
               p_fn < p_direct + TARGET_NS ? "met" : "MISSED");

        snprintf(path, sizeof(path), "/v1/sessions/%s", id);
        if (bench_http(&c, "DELETE", path, NULL, &status, &resp) < 0 || status != 200)
                fprintf(stderr, "bench-codemode: DELETE %s failed (%d)\n", path, status);
        json_decref(cell);
        json_decref(res);
        free(body);
        free(code);
        bench_conn_close(&c);
        free(c.buf);
        free(c.req);
        free(c.body);
        cleanup();
        free(direct);
        free(fn);
        free(call);
        return 0;
}
