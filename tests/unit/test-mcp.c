/* Unit tests of src/tools/ and src/mcp/ without sandboxes: a fake backend keeps "sessions" and
 * their files in memory and answers executions from a script, so JSON-RPC framing, error codes,
 * version negotiation, the tool declarations, argument validation, the toolbox's lazy and
 * replaced sessions, and the HTTP transport's rules are all checked in milliseconds. */
#include "mcp/http.h"
#include "mcp/mcp.h"
#include "tools/base64.h"
#include "tools/tools.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- a fake backend ------------------------------------------------------------------- */

struct fake {
        int n_created;
        int n_destroyed;
        int n_exec;
        uint64_t last_timeout_ms;      /* what the last execute was given */
        struct mcp_conn *close_on_run; /* code "close": mcp_conn_close(this), as a DELETE would */
        char live[64];                 /* the one live session id, "" when none */
        json_t *files;                 /* path -> content */
        bool vanish_next;              /* the next call finds the session gone (-ESRCH) */
};

static int fake_session_create(void *userdata, const char *profile, char **ret_id,
                               struct airlock_error *err)
{
        struct fake *f = userdata;

        (void) profile;
        (void) err;
        f->n_created++;
        (void) snprintf(f->live, sizeof(f->live), "s-fake-%d", f->n_created);
        json_object_clear(f->files);
        *ret_id = strdup(f->live);
        return 0;
}

static int fake_session_destroy(void *userdata, const char *id)
{
        struct fake *f = userdata;

        if (strcmp(id, f->live) != 0)
                return -ESRCH;
        f->n_destroyed++;
        f->live[0] = '\0';
        return 0;
}

static int check_live(struct fake *f, const char *id, struct airlock_error *err)
{
        if (f->vanish_next) {
                f->vanish_next = false;
                f->live[0] = '\0';
        }
        if (strcmp(id, f->live) != 0)
                return airlock_error_set(err, -ESRCH, "it was idle too long");
        return 0;
}

/* Executions by script: the code names what should happen. */
static int fake_execute(void *userdata, const char *id, const char *language, const char *code,
                        uint64_t timeout_ms, json_t **ret_result, struct airlock_error *err)
{
        struct fake *f = userdata;
        int r = check_live(f, id, err);

        (void) language;
        if (r < 0)
                return r;
        f->n_exec++;
        f->last_timeout_ms = timeout_ms;
        if (strcmp(code, "sleep") == 0)
                (void) usleep(150 * 1000);
        if (strcmp(code, "close") == 0 && f->close_on_run)
                /* Another thread deletes the MCP session while this call runs: the sandbox
                 * session ends under it, and the cell comes back killed. */
                mcp_conn_close(f->close_on_run);
        if (strcmp(code, "busy") == 0)
                return airlock_error_set(err, -EBUSY, "busy");
        if (strcmp(code, "raise") == 0)
                *ret_result = json_pack("{s:s, s:s, s:s, s:n, s:[], s:{s:s, s:s, s:s}, s:i, "
                                        "s:s, s:[]}",
                                        "status", "error", "stdout", "", "stderr", "", "result",
                                        "outputs", "error", "name", "ValueError", "value", "bad",
                                        "traceback", "Traceback...\nValueError: bad\n", "exit_code",
                                        1, "state", "preserved", "files");
        else if (strcmp(code, "plot") == 0)
                *ret_result =
                        json_pack("{s:s, s:s, s:s, s:n, s:[{s:{s:s, s:s}, s:b}], s:n, "
                                  "s:i, s:s, s:[{s:s, s:i, s:s}, {s:s, s:i, s:s}]}",
                                  "status", "ok", "stdout", "hello\n", "stderr", "", "result",
                                  "outputs", "data", "image/png", "iVBORw0KGgo=", "text/plain",
                                  "<Figure>", "main", false, "error", "exit_code", 0, "state",
                                  "preserved", "files", "path", "out.csv", "size", 12, "change",
                                  "created", "path", "old.txt", "size", 0, "change", "deleted");
        else if (strcmp(code, "die") == 0)
                *ret_result =
                        json_pack("{s:s, s:s, s:s, s:n, s:[], s:{s:s, s:s}, s:i, s:s, "
                                  "s:[]}",
                                  "status", "oom", "stdout", "", "stderr", "", "result", "outputs",
                                  "error", "name", "MemoryError", "value", "out of memory",
                                  "exit_code", 137, "state", "lost", "files");
        else
                *ret_result = json_pack("{s:s, s:s, s:s, s:s, s:[], s:n, s:i, s:s, s:[]}", "status",
                                        "ok", "stdout", "", "stderr", "", "result", "42", "outputs",
                                        "error", "exit_code", 0, "state", "preserved", "files");
        if (strcmp(code, "die") == 0)
                f->live[0] = '\0';
        return *ret_result ? 0 : -ENOMEM;
}

static int fake_file_read(void *userdata, const char *id, const char *path, size_t max_bytes,
                          char **ret_data, size_t *ret_len, struct airlock_error *err)
{
        struct fake *f = userdata;
        json_t *v;
        int r = check_live(f, id, err);

        if (r < 0)
                return r;
        v = json_object_get(f->files, path);
        if (!v)
                return airlock_error_set(err, -ENOENT, "no such file");
        if (json_string_length(v) > max_bytes)
                return -EFBIG;
        *ret_len = json_string_length(v);
        *ret_data = malloc(*ret_len + 1);
        memcpy(*ret_data, json_string_value(v), *ret_len + 1);
        return 0;
}

static int fake_file_write(void *userdata, const char *id, const char *path, const void *data,
                           size_t len, struct airlock_error *err)
{
        struct fake *f = userdata;
        int r = check_live(f, id, err);

        if (r < 0)
                return r;
        return json_object_set_new(f->files, path, json_stringn_nocheck(data, len));
}

static int fake_file_list(void *userdata, const char *id, const char *dir, json_t **ret_listing,
                          struct airlock_error *err)
{
        struct fake *f = userdata;
        json_t *entries = json_array(), *v;
        const char *path;
        int r = check_live(f, id, err);

        if (r < 0) {
                json_decref(entries);
                return r;
        }
        json_object_foreach (f->files, path, v)
                json_array_append_new(entries, json_pack("{s:s, s:s, s:s, s:I}", "name", path,
                                                         "path", path, "type", "file", "size",
                                                         (json_int_t) json_string_length(v)));
        *ret_listing = json_pack("{s:s, s:o}", "dir", dir, "entries", entries);
        return 0;
}

static void fake_free(void *userdata)
{
        (void) userdata;
}

static const struct tools_backend_ops fake_ops = {
        .session_create = fake_session_create,
        .session_destroy = fake_session_destroy,
        .execute = fake_execute,
        .file_read = fake_file_read,
        .file_write = fake_file_write,
        .file_list = fake_file_list,
        .free = fake_free,
};

static struct fake fake;
static struct tools_backend backend = { .ops = &fake_ops, .userdata = &fake };

static void fake_setup(void)
{
        json_decref(fake.files);
        fake = (struct fake){ .files = json_object() };
}

static void fake_teardown(void)
{
        json_decref(fake.files);
        fake.files = NULL;
}

/* ---- JSON-RPC and MCP lifecycle -------------------------------------------------------- */

static struct mcp_conn *conn_new(void)
{
        struct mcp_conn *c = NULL;

        cr_assert_eq(
                mcp_conn_new(&(struct mcp_conn_options){ .backend = &backend, .name = "t" }, &c),
                0);
        return c;
}

/* Sends text, returns the parsed reply (NULL when none). */
static json_t *send(struct mcp_conn *c, const char *text)
{
        char *reply = NULL;
        json_t *v;

        cr_assert_eq(mcp_conn_handle(c, text, strlen(text), &reply), 0);
        if (!reply)
                return NULL;
        cr_assert_null(strchr(reply, '\n'), "a reply must be one line: %s", reply);
        v = json_loads(reply, JSON_DECODE_ANY, NULL);
        cr_assert_not_null(v, "reply is not JSON: %s", reply);
        free(reply);
        return v;
}

static void initialize(struct mcp_conn *c, const char *version)
{
        char buf[256];
        json_t *r;

        (void) snprintf(buf, sizeof(buf),
                        "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
                        "{\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":"
                        "{\"name\":\"t\",\"version\":\"1\"}}}",
                        version);
        r = send(c, buf);
        cr_assert_not_null(json_object_get(r, "result"));
        json_decref(r);
        cr_assert_null(send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
}

TestSuite(mcp, .init = fake_setup, .fini = fake_teardown);

Test(mcp, version_negotiation)
{
        static const struct {
                const char *asked, *answered;
        } cases[] = {
                { "2025-11-25", "2025-11-25" }, { "2025-06-18", "2025-06-18" },
                { "2025-03-26", "2025-03-26" }, { "2024-11-05", "2024-11-05" },
                { "2099-01-01", "2025-11-25" }, { "2024-10-07", "2025-11-25" },
                { "", "2025-11-25" },           { NULL, "2025-11-25" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                cr_expect_str_eq(mcp_version_negotiate(cases[i].asked), cases[i].answered,
                                 "asked %s", cases[i].asked ? cases[i].asked : "(none)");
        cr_expect(mcp_version_allows_batch("2025-03-26"));
        cr_expect(mcp_version_allows_batch("2024-11-05"));
        cr_expect_not(mcp_version_allows_batch("2025-06-18"));
        cr_expect_not(mcp_version_allows_batch("2025-11-25"));
        cr_expect_not(mcp_version_allows_batch(""));
}

Test(mcp, initialize_answers_the_negotiated_version_and_capabilities)
{
        struct mcp_conn *c = conn_new();
        json_t *r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"initialize\","
                            "\"params\":{\"protocolVersion\":\"1.0\",\"capabilities\":{}}}");
        json_t *res = json_object_get(r, "result");

        cr_assert_str_eq(json_string_value(json_object_get(r, "id")), "a");
        cr_assert_str_eq(json_string_value(json_object_get(res, "protocolVersion")),
                         MCP_PROTOCOL_LATEST);
        cr_assert(json_is_object(json_object_get(json_object_get(res, "capabilities"), "tools")));
        cr_assert(
                json_is_object(json_object_get(json_object_get(res, "capabilities"), "resources")));
        cr_assert_null(json_object_get(json_object_get(res, "capabilities"), "prompts"));
        cr_assert_str_eq(
                json_string_value(json_object_get(json_object_get(res, "serverInfo"), "name")),
                "airlock");
        json_decref(r);
        /* Twice on one connection is a protocol error. */
        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\","
                    "\"params\":{\"protocolVersion\":\"2025-06-18\"}}");
        cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
                     JSONRPC_INVALID_REQUEST);
        json_decref(r);
        mcp_conn_free(c);
}

/* One row: what the client sends, the error code expected (0 = a result; 1 = no reply at
 * all), and the id the reply must carry (NULL = null). */
struct rpc_case {
        const char *send;
        int code;
        const char *id;
};

static void run_cases(struct mcp_conn *c, const struct rpc_case *cases, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                json_t *r = send(c, cases[i].send), *id;

                if (cases[i].code == 1) {
                        cr_expect_null(r, "no reply expected to %s", cases[i].send);
                        json_decref(r);
                        continue;
                }
                cr_assert_not_null(r, "a reply expected to %s", cases[i].send);
                cr_expect_str_eq(json_string_value(json_object_get(r, "jsonrpc")), "2.0");
                if (cases[i].code == 0)
                        cr_expect_not_null(json_object_get(r, "result"), "result for %s",
                                           cases[i].send);
                else
                        cr_expect_eq(json_integer_value(
                                             json_object_get(json_object_get(r, "error"), "code")),
                                     cases[i].code, "code for %s", cases[i].send);
                id = json_object_get(r, "id");
                if (!cases[i].id) {
                        cr_expect(json_is_null(id), "null id for %s", cases[i].send);
                } else {
                        char *got = json_dumps(id, JSON_ENCODE_ANY);
                        cr_expect_str_eq(got, cases[i].id, "id for %s", cases[i].send);
                        free(got);
                }
                json_decref(r);
        }
}

Test(mcp, jsonrpc_errors_before_initialize)
{
        static const struct rpc_case cases[] = {
                { "{not json", JSONRPC_PARSE_ERROR, NULL },
                { "", JSONRPC_PARSE_ERROR, NULL },
                { "{\"a\":1,\"a\":2}", JSONRPC_PARSE_ERROR, NULL },
                { "42", JSONRPC_INVALID_REQUEST, NULL },
                { "\"ping\"", JSONRPC_INVALID_REQUEST, NULL },
                { "[]", JSONRPC_INVALID_REQUEST, NULL },
                /* Batches are refused before a version that has them is negotiated. */
                { "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", JSONRPC_INVALID_REQUEST,
                  NULL },
                { "{\"id\":1,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, "1" },
                { "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST,
                  "1" },
                { "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST,
                  NULL },
                { "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST,
                  NULL },
                { "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST,
                  NULL },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", JSONRPC_INVALID_REQUEST, "1" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1}", JSONRPC_INVALID_REQUEST, "1" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":3}",
                  JSONRPC_INVALID_REQUEST, "1" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[]}",
                  JSONRPC_INVALID_PARAMS, "1" },
                { "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"nope\"}",
                  JSONRPC_METHOD_NOT_FOUND, "\"x\"" },
                /* Only ping may come before initialize. */
                { "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}", 0, "2" },
                { "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}",
                  JSONRPC_INVALID_REQUEST, "3" },
                { "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\",\"params\":{}}",
                  JSONRPC_INVALID_PARAMS, "4" },
                /* Notifications and responses are never answered. */
                { "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", 1, NULL },
                { "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}", 1, NULL },
                { "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}", 1, NULL },
                { "{\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":1,\"message\":\"x\"}}", 1,
                  NULL },
        };
        struct mcp_conn *c = conn_new();

        run_cases(c, cases, sizeof(cases) / sizeof(cases[0]));
        mcp_conn_free(c);
}

Test(mcp, jsonrpc_errors_after_initialize)
{
        static const struct rpc_case cases[] = {
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", 0, "1" },
                { "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":"
                  "{\"cursor\":\"abc\"}}",
                  JSONRPC_INVALID_PARAMS, "2" },
                { "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{}}",
                  JSONRPC_INVALID_PARAMS, "3" },
                { "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":"
                  "{\"name\":\"run_python\",\"arguments\":[1]}}",
                  JSONRPC_INVALID_PARAMS, "4" },
                { "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/read\",\"params\":{}}",
                  JSONRPC_INVALID_PARAMS, "5" },
                { "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/read\",\"params\":"
                  "{\"uri\":\"file:///etc/passwd\"}}",
                  MCP_RESOURCE_NOT_FOUND, "6" },
                { "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"resources/read\",\"params\":"
                  "{\"uri\":\"airlock://files/../etc/passwd\"}}",
                  MCP_RESOURCE_NOT_FOUND, "7" },
                { "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"resources/read\",\"params\":"
                  "{\"uri\":\"airlock://files/a%00b\"}}",
                  MCP_RESOURCE_NOT_FOUND, "8" },
                { "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/list\"}", 0, "9" },
                { "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"resources/templates/list\"}", 0,
                  "10" },
                { "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"prompts/list\"}",
                  JSONRPC_METHOD_NOT_FOUND, "11" },
                /* 2025-11-25 has no batches. */
                { "[{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"ping\"}]", JSONRPC_INVALID_REQUEST,
                  NULL },
        };
        struct mcp_conn *c = conn_new();

        initialize(c, "2025-11-25");
        run_cases(c, cases, sizeof(cases) / sizeof(cases[0]));
        mcp_conn_free(c);
}

Test(mcp, batches_in_2025_03_26)
{
        struct mcp_conn *c = conn_new();
        json_t *r;

        initialize(c, "2025-03-26");
        r = send(c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
                    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"},"
                    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"},"
                    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":"
                    "{\"protocolVersion\":\"2025-03-26\"}},"
                    "5]");
        cr_assert(json_is_array(r));
        cr_assert_eq(json_array_size(r), 4, "one reply per request, none for notifications");
        cr_expect_not_null(json_object_get(json_array_get(r, 0), "result"));
        cr_expect_eq(json_integer_value(json_object_get(
                             json_object_get(json_array_get(r, 1), "error"), "code")),
                     JSONRPC_METHOD_NOT_FOUND);
        cr_expect_eq(json_integer_value(json_object_get(
                             json_object_get(json_array_get(r, 2), "error"), "code")),
                     JSONRPC_INVALID_REQUEST, "initialize may not be batched");
        cr_expect_eq(json_integer_value(json_object_get(
                             json_object_get(json_array_get(r, 3), "error"), "code")),
                     JSONRPC_INVALID_REQUEST);
        json_decref(r);
        cr_expect_null(send(c, "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}]"),
                       "a batch of notifications gets no reply");
        mcp_conn_free(c);
}

static int error_code(json_t *reply)
{
        return (int) json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

static const char *error_message(json_t *reply)
{
        const char *m =
                json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
        return m ? m : "";
}

/* A batch of n requests {"jsonrpc":"2.0","id":<1..n>,<rest>}, malloc()ed. */
static char *batch_of(int n, const char *rest)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        cr_assert_not_null(f);
        fputc('[', f);
        for (int i = 0; i < n; i++) {
                fprintf(f, "%s{\"jsonrpc\":\"2.0\",\"id\":%d,%s}", i ? "," : "", i + 1, rest);
        }
        fputc(']', f);
        fclose(f);
        return text;
}

Test(mcp, batch_size_is_bounded)
{
        static const char ping[] = "\"method\":\"ping\"";
        struct mcp_conn *c = conn_new();
        char *text;
        json_t *r;

        initialize(c, "2025-03-26");
        text = batch_of(MCP_BATCH_MAX, ping);
        r = send(c, text);
        free(text);
        cr_assert(json_is_array(r) && json_array_size(r) == MCP_BATCH_MAX);
        json_decref(r);

        text = batch_of(MCP_BATCH_MAX + 1, ping);
        r = send(c, text);
        free(text);
        cr_assert(json_is_object(r), "a batch over the limit is refused whole, with one error");
        cr_expect_eq(error_code(r), JSONRPC_INVALID_REQUEST);
        cr_expect(strstr(error_message(r), "at most 64 messages, this one has 65"), "%s",
                  error_message(r));
        json_decref(r);
        mcp_conn_free(c);
}

Test(mcp, batch_time_is_bounded)
{
        static const char call[] = "\"method\":\"tools/call\",\"params\":{\"name\":"
                                   "\"run_python\",\"arguments\":{\"code\":\"sleep\","
                                   "\"timeout_s\":100}}";
        struct mcp_conn *c = NULL;
        char *text = batch_of(4, call);
        json_t *r, *last;

        cr_assert_eq(mcp_conn_new(&(struct mcp_conn_options){ .backend = &backend,
                                                              .name = "t",
                                                              .batch_time_max_ms = 200 },
                                  &c),
                     0);
        initialize(c, "2025-03-26");
        r = send(c, text);
        free(text);
        cr_assert(json_is_array(r) && json_array_size(r) == 4);
        /* Each item sleeps 150 ms in a batch allowed 200: the third cannot start. */
        cr_expect(fake.n_exec >= 1 && fake.n_exec <= 2, "ran %d", fake.n_exec);
        cr_expect(fake.last_timeout_ms <= 200,
                  "an item's timeout_s of 100 s was not cut to the "
                  "batch's time left: %llu ms",
                  (unsigned long long) fake.last_timeout_ms);
        last = json_array_get(r, 3);
        cr_expect_eq(json_integer_value(json_object_get(last, "id")), 4);
        cr_expect_eq(error_code(last), MCP_SERVER_ERROR);
        cr_expect(strstr(error_message(last), "batch ran longer than 0.2 s"), "%s",
                  error_message(last));
        json_decref(r);
        mcp_conn_free(c);
}

Test(mcp, closing_ends_the_call_that_runs_and_refuses_the_rest)
{
        static const char call[] = "\"method\":\"tools/call\",\"params\":{\"name\":"
                                   "\"run_python\",\"arguments\":{\"code\":\"close\"}}";
        struct mcp_conn *c = conn_new();
        char *text = batch_of(3, call);
        json_t *r;

        initialize(c, "2025-03-26");
        fake.close_on_run = c;
        r = send(c, text);
        free(text);
        cr_assert(json_is_array(r) && json_array_size(r) == 3);
        cr_expect_eq(fake.n_exec, 1, "items after the close must not run");
        cr_expect_eq(fake.n_destroyed, 1, "the sandbox session ends with the close");
        cr_expect_eq(fake.n_created, 1, "no new session starts after the close");
        for (size_t i = 0; i < 3; i++) {
                json_t *item = json_array_get(r, i);
                cr_expect_eq(json_integer_value(json_object_get(item, "id")), (int) i + 1);
                cr_expect_eq(error_code(item), MCP_SESSION_NOT_FOUND);
                cr_expect(strstr(error_message(item), "MCP session was deleted"), "%s",
                          error_message(item));
                cr_expect(strstr(error_message(item),
                                 i == 0 ? "while this request ran" : "this request was not run"),
                          "%s", error_message(item));
        }
        json_decref(r);
        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}");
        cr_expect_eq(error_code(r), MCP_SESSION_NOT_FOUND);
        json_decref(r);
        fake.close_on_run = NULL;
        mcp_conn_free(c);
}

/* ---- tool declarations ----------------------------------------------------------------- */

/* Every tool that runs the model's code says so, so that a chat requiring approval asks before
 * each (chat_tool_runs_code()): the run_* tools, and any tool tied to a language. */
Test(tools, every_tool_that_runs_code_says_so)
{
        size_t n = 0, running = 0;
        const struct tool *const *all = tools_all(&n);

        for (size_t i = 0; i < n; i++) {
                bool named = strncmp(all[i]->name, "run_", 4) == 0;
                cr_assert_eq(all[i]->runs_code, named || all[i]->language != NULL, "%s",
                             all[i]->name);
                running += all[i]->runs_code;
        }
        cr_assert_eq(running, 4, "run_python, run_shell, run_javascript, run_r");
        cr_assert(tools_find("run_r")->runs_code);
}

/* run_javascript is offered where the profile allows javascript, and only there. */
Test(tools, run_javascript_offered_by_profile)
{
        const struct tool *t = tools_find("run_javascript");
        json_t *all = NULL, *minimal = NULL;
        size_t i;
        json_t *d;
        bool listed = false;

        cr_assert_not_null(t);
        cr_expect_str_eq(t->language, "javascript");
        cr_expect(tools_offered(t, AIRLOCK_TEST_SOURCE_DIR "/profiles/default.json"));
        cr_expect_not(tools_offered(t, AIRLOCK_TEST_SOURCE_DIR "/profiles/minimal.json"));
        cr_expect_not(tools_offered(t, "/nonexistent/profile.json"), "deny when in doubt");
        cr_expect(tools_offered(tools_find("run_python"), "/nonexistent/profile.json"));

        all = tools_declarations(TOOLS_FORMAT_MCP, NULL);
        minimal = tools_declarations_for(TOOLS_FORMAT_MCP, NULL,
                                         AIRLOCK_TEST_SOURCE_DIR "/profiles/minimal.json");
        /* run_javascript and run_r. */
        cr_expect_eq(json_array_size(minimal) + 2, json_array_size(all));
        json_array_foreach (minimal, i, d)
                listed |= strcmp(json_string_value(json_object_get(d, "name")), "run_javascript") ==
                          0;
        cr_expect_not(listed, "minimal does not allow javascript");
        json_decref(all);
        json_decref(minimal);
}

/* run_r likewise, where the profile allows r. */
Test(tools, run_r_offered_by_profile)
{
        const struct tool *t = tools_find("run_r");

        cr_assert_not_null(t);
        cr_expect_str_eq(t->language, "r");
        cr_expect(tools_offered(t, AIRLOCK_TEST_SOURCE_DIR "/profiles/default.json"));
        cr_expect_not(tools_offered(t, AIRLOCK_TEST_SOURCE_DIR "/profiles/data-science.json"));
        cr_expect_not(tools_offered(t, "/nonexistent/profile.json"), "deny when in doubt");
}

Test(tools, declarations_in_three_shapes)
{
        json_t *mcp = tools_declarations(TOOLS_FORMAT_MCP, NULL);
        json_t *openai = tools_declarations(TOOLS_FORMAT_OPENAI, NULL);
        json_t *anthropic = tools_declarations(TOOLS_FORMAT_ANTHROPIC, NULL);
        size_t n;
        const struct tool *const *all = tools_all(&n);

        cr_assert_eq(n, 8);
        cr_assert_eq(json_array_size(mcp), n);
        cr_assert_eq(json_array_size(openai), n);
        cr_assert_eq(json_array_size(anthropic), n);
        for (size_t i = 0; i < n; i++) {
                json_t *m = json_array_get(mcp, i), *o = json_array_get(openai, i),
                       *a = json_array_get(anthropic, i), *fn = json_object_get(o, "function");
                json_t *schema = json_object_get(m, "inputSchema");
                json_t *ann = json_object_get(m, "annotations");

                cr_expect_str_eq(json_string_value(json_object_get(m, "name")), all[i]->name);
                cr_expect(json_is_string(json_object_get(m, "description")));
                cr_expect(json_is_string(json_object_get(m, "title")));
                cr_expect_str_eq(json_string_value(json_object_get(schema, "type")), "object");
                cr_expect(json_is_object(json_object_get(schema, "properties")));
                cr_expect(json_is_false(json_object_get(schema, "additionalProperties")));
                cr_expect(json_is_boolean(json_object_get(ann, "readOnlyHint")));
                cr_expect(json_is_boolean(json_object_get(ann, "destructiveHint")));
                cr_expect(json_is_boolean(json_object_get(ann, "idempotentHint")));
                cr_expect(json_is_false(json_object_get(ann, "openWorldHint")),
                          "%s: no tool reaches the network", all[i]->name);

                cr_expect_str_eq(json_string_value(json_object_get(o, "type")), "function");
                cr_expect_str_eq(json_string_value(json_object_get(fn, "name")), all[i]->name);
                cr_expect(json_is_string(json_object_get(fn, "description")));
                cr_expect(json_equal(json_object_get(fn, "parameters"), schema));
                cr_expect_eq(json_object_size(o), 2);

                cr_expect_str_eq(json_string_value(json_object_get(a, "name")), all[i]->name);
                cr_expect(json_equal(json_object_get(a, "input_schema"), schema));
                cr_expect_eq(json_object_size(a), 3, "name, description, input_schema only");
        }
        /* The read-only tools say so; the ones that run code do not claim to be harmless. */
        cr_expect(json_is_true(json_object_get(
                json_object_get(json_array_get(mcp, 4), "annotations"), "readOnlyHint")));
        cr_expect(json_is_true(json_object_get(
                json_object_get(json_array_get(mcp, 0), "annotations"), "destructiveHint")));
        json_decref(mcp);
        json_decref(openai);
        json_decref(anthropic);
}

Test(tools, format_names)
{
        enum tools_format f;

        cr_expect_eq(tools_format_from_string("mcp", &f), 0);
        cr_expect_eq(f, TOOLS_FORMAT_MCP);
        cr_expect_eq(tools_format_from_string("openai", &f), 0);
        cr_expect_eq(f, TOOLS_FORMAT_OPENAI);
        cr_expect_eq(tools_format_from_string("anthropic", &f), 0);
        cr_expect_eq(f, TOOLS_FORMAT_ANTHROPIC);
        cr_expect_eq(tools_format_from_string("OpenAI", &f), -EINVAL);
        cr_expect_eq(tools_format_from_string("", &f), -EINVAL);
        cr_expect_eq(tools_format_from_string(NULL, &f), -EINVAL);
}

/* ---- argument validation of each tool -------------------------------------------------- */

Test(tools, argument_validation)
{
        static const struct {
                const char *tool, *args, *error; /* error NULL: valid */
        } cases[] = {
                { "run_python", "{\"code\": \"1\"}", NULL },
                { "run_python", "{\"code\": \"1\", \"timeout_s\": 2.5}", NULL },
                { "run_python", "{\"code\": \"1\", \"timeout_s\": null}", NULL },
                { "run_python", "{}", "missing required argument 'code'" },
                { "run_python", "{\"code\": null}", "missing required argument 'code'" },
                { "run_python", "{\"code\": \"\"}", "must not be empty" },
                { "run_python", "{\"code\": 5}", "'code' must be a string, not a number" },
                { "run_python", "{\"code\": \"1\", \"timeout_s\": 0}",
                  "'timeout_s' must be a number with 0 < timeout_s <= 3600" },
                { "run_python", "{\"code\": \"1\", \"timeout_s\": -1}", "timeout_s" },
                { "run_python", "{\"code\": \"1\", \"timeout_s\": 3601}", "timeout_s" },
                { "run_python", "{\"code\": \"1\", \"timeout_s\": \"5\"}", "must be a number" },
                { "run_python", "{\"code\": \"1\", \"language\": \"bash\"}",
                  "unknown argument 'language'" },
                { "run_python", "{\"code\": \"a\\u0000b\"}", "NUL" },
                { "run_shell", "{\"command\": \"ls\"}", NULL },
                { "run_shell", "{\"code\": \"ls\"}", "unknown argument 'code'" },
                { "run_shell", "{}", "missing required argument 'command'" },
                { "write_file", "{\"path\": \"a.txt\", \"content\": \"\"}", NULL },
                { "write_file", "{\"path\": \"a\", \"content\": \"x\", \"encoding\": \"base64\"}",
                  NULL },
                { "write_file", "{\"path\": \"a\", \"content\": \"x\", \"encoding\": \"latin1\"}",
                  "must be one of [\"utf-8\",\"base64\"]" },
                { "write_file", "{\"path\": \"a\"}", "missing required argument 'content'" },
                { "write_file", "{\"path\": \"\", \"content\": \"x\"}", "must not be empty" },
                { "read_file", "{\"path\": \"a\"}", NULL },
                { "read_file", "{\"path\": true}", "must be a string, not a boolean" },
                { "list_files", "{}", NULL },
                { "list_files", "{\"dir\": \"sub\"}", NULL },
                { "list_files", "{\"dir\": 3}", "must be a string" },
                { "reset_session", "{}", NULL },
                { "reset_session", "{\"now\": true}", "it takes no arguments" },
                { "reset_session", "[]", "must be a JSON object" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct tool *t = tools_find(cases[i].tool);
                json_t *args = json_loads(cases[i].args, JSON_ALLOW_NUL, NULL);
                struct airlock_error err = { { 0 } };
                int r;

                cr_assert_not_null(t);
                cr_assert_not_null(args, "%s", cases[i].args);
                r = tools_validate(t, args, &err);
                if (!cases[i].error)
                        cr_expect_eq(r, 0, "%s %s: %s", cases[i].tool, cases[i].args, err.msg);
                else {
                        cr_expect_eq(r, -EINVAL, "%s %s", cases[i].tool, cases[i].args);
                        cr_expect(strstr(err.msg, cases[i].error), "%s %s: '%s' lacks '%s'",
                                  cases[i].tool, cases[i].args, err.msg, cases[i].error);
                }
                json_decref(args);
        }
        cr_expect_eq(tools_validate(tools_find("list_files"), NULL, NULL), 0, "NULL is {}");
        cr_expect_null(tools_find("exec"));
}

Test(tools, base64_round_trip)
{
        static const char *const bad[] = { "a", "ab=c", "a$bc", "abcde", "ab===", "aGk=aGk=" };
        unsigned char bytes[256];
        char *enc, *dec;
        size_t len;

        for (int i = 0; i < 256; i++)
                bytes[i] = (unsigned char) i;
        for (size_t n = 0; n <= sizeof(bytes); n += 37) {
                enc = base64_encode(bytes, n);
                cr_assert_eq(base64_decode(enc, strlen(enc), &dec, &len), 0);
                cr_assert_eq(len, n);
                cr_assert_eq(memcmp(dec, bytes, n), 0);
                free(enc);
                free(dec);
        }
        /* Line breaks are skipped, as MIME-wrapped base64 has them. */
        cr_assert_eq(base64_decode("aGlo\r\naGk=", 10, &dec, &len), 0);
        cr_assert_eq(len, 5);
        cr_assert_eq(memcmp(dec, "hihhi", 5), 0);
        free(dec);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_expect_eq(base64_decode(bad[i], strlen(bad[i]), &dec, &len), -EINVAL, "%s",
                             bad[i]);
}

/* ---- the toolbox on the fake backend --------------------------------------------------- */

TestSuite(toolbox, .init = fake_setup, .fini = fake_teardown);

static struct tool_result call(struct toolbox *tb, const char *tool, const char *args)
{
        struct tool_result res = { 0 };
        json_t *a = json_loads(args, 0, NULL);

        cr_assert_eq(toolbox_call(tb, tool, a, &res), 0, "%s %s", tool, args);
        json_decref(a);
        cr_assert_not_null(res.text);
        return res;
}

Test(toolbox, session_is_lazy_reused_and_ended)
{
        struct toolbox *tb = NULL;
        struct tool_result res;
        char id[64];

        cr_assert_eq(toolbox_new(&backend, NULL, &tb), 0);
        res = call(tb, "list_files", "{}");
        cr_expect_not(res.is_error);
        cr_expect(strstr(res.text, "empty"));
        tool_result_done(&res);
        res = call(tb, "read_file", "{\"path\": \"x\"}");
        cr_expect(res.is_error);
        tool_result_done(&res);
        cr_expect_eq(fake.n_created, 0, "reading never starts a session");
        cr_expect_eq(toolbox_session_id(tb, id, sizeof(id)), -ESRCH);

        res = call(tb, "run_python", "{\"code\": \"x = 1\"}");
        cr_expect_not(res.is_error);
        cr_expect_str_eq(res.session_id, "s-fake-1");
        tool_result_done(&res);
        res = call(tb, "run_shell", "{\"command\": \"ls\"}");
        tool_result_done(&res);
        cr_expect_eq(fake.n_created, 1, "one session for every call");
        cr_expect_eq(toolbox_session_id(tb, id, sizeof(id)), 0);
        cr_expect_str_eq(id, "s-fake-1");

        res = call(tb, "reset_session", "{}");
        cr_expect_not(res.is_error);
        tool_result_done(&res);
        cr_expect_eq(fake.n_destroyed, 1);
        res = call(tb, "run_python", "{\"code\": \"1\"}");
        cr_expect_str_eq(res.session_id, "s-fake-2");
        tool_result_done(&res);
        toolbox_free(tb);
        cr_expect_eq(fake.n_destroyed, 2, "toolbox_free ends the session");
}

Test(toolbox, keep_session_and_continue)
{
        struct toolbox *tb = NULL;
        struct tool_result res;

        cr_assert_eq(toolbox_new(&backend, &(struct toolbox_options){ .keep_session = true }, &tb),
                     0);
        res = call(tb, "run_python", "{\"code\": \"1\"}");
        tool_result_done(&res);
        toolbox_free(tb);
        cr_expect_eq(fake.n_destroyed, 0);

        cr_assert_eq(
                toolbox_new(&backend, &(struct toolbox_options){ .session_id = "s-fake-1" }, &tb),
                0);
        res = call(tb, "run_python", "{\"code\": \"1\"}");
        cr_expect_str_eq(res.session_id, "s-fake-1");
        tool_result_done(&res);
        cr_expect_eq(fake.n_created, 1);
        toolbox_free(tb);
}

Test(toolbox, a_vanished_session_is_replaced_with_a_note)
{
        struct toolbox *tb = NULL;
        struct tool_result res;

        cr_assert_eq(toolbox_new(&backend, NULL, &tb), 0);
        res = call(tb, "run_python", "{\"code\": \"1\"}");
        tool_result_done(&res);
        fake.vanish_next = true;
        res = call(tb, "run_python", "{\"code\": \"1\"}");
        cr_expect_not(res.is_error, "%s", res.text);
        cr_expect_str_eq(res.session_id, "s-fake-2");
        cr_expect(strstr(res.text, "new session"), "%s", res.text);
        cr_expect(strstr(res.text, "idle too long"), "%s", res.text);
        tool_result_done(&res);

        /* A session lost by the execution itself is dropped, and the next call says so. */
        res = call(tb, "run_python", "{\"code\": \"die\"}");
        cr_expect(res.is_error);
        cr_expect(strstr(res.text, "session was lost"), "%s", res.text);
        tool_result_done(&res);
        res = call(tb, "run_python", "{\"code\": \"1\"}");
        cr_expect_str_eq(res.session_id, "s-fake-3");
        cr_expect(strstr(res.text, "previous one ended (oom)"), "%s", res.text);
        tool_result_done(&res);
        toolbox_free(tb);
}

Test(toolbox, execution_becomes_text_images_and_files)
{
        struct toolbox *tb = NULL;
        struct tool_result res;

        cr_assert_eq(toolbox_new(&backend, NULL, &tb), 0);
        res = call(tb, "run_python", "{\"code\": \"plot\"}");
        cr_expect_not(res.is_error);
        cr_expect(strstr(res.text, "stdout:\nhello\n"), "%s", res.text);
        cr_expect(strstr(res.text, "image/png"), "%s", res.text);
        cr_expect(strstr(res.text, "out.csv (created, 12 bytes)"), "%s", res.text);
        cr_expect(strstr(res.text, "old.txt (deleted)"), "%s", res.text);
        cr_assert_eq(json_array_size(res.images), 1);
        cr_expect_str_eq(
                json_string_value(json_object_get(json_array_get(res.images, 0), "mime_type")),
                "image/png");
        cr_assert_eq(json_array_size(res.files), 1, "deleted files are not in files");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(res.files, 0), "path")),
                         "out.csv");
        cr_expect(json_is_object(res.execution));
        tool_result_done(&res);

        res = call(tb, "run_python", "{\"code\": \"raise\"}");
        cr_expect(res.is_error);
        cr_expect(strstr(res.text, "error: ValueError: bad"), "%s", res.text);
        cr_expect_null(strstr(res.text, "exit code"), "%s", res.text);
        tool_result_done(&res);

        res = call(tb, "run_python", "{\"code\": \"busy\"}");
        cr_expect(res.is_error);
        cr_expect(strstr(res.text, "busy"), "%s", res.text);
        tool_result_done(&res);
        toolbox_free(tb);
}

Test(toolbox, files_round_trip_and_paths)
{
        struct toolbox *tb = NULL;
        struct tool_result res;

        cr_assert_eq(toolbox_new(&backend, NULL, &tb), 0);
        res = call(tb, "write_file", "{\"path\": \"/work/a.txt\", \"content\": \"hi\"}");
        cr_expect_not(res.is_error, "%s", res.text);
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(res.files, 0), "change")),
                         "created");
        tool_result_done(&res);
        res = call(tb, "write_file",
                   "{\"path\": \"a.txt\", \"content\": \"aGk=\", "
                   "\"encoding\": \"base64\"}");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(res.files, 0), "change")),
                         "changed");
        tool_result_done(&res);
        res = call(tb, "read_file", "{\"path\": \"./a.txt\"}");
        cr_expect_not(res.is_error, "%s", res.text);
        cr_expect_str_eq(res.text, "hi");
        tool_result_done(&res);
        res = call(tb, "write_file",
                   "{\"path\": \"b\", \"content\": \"!!\", "
                   "\"encoding\": \"base64\"}");
        cr_expect(res.is_error);
        cr_expect(strstr(res.text, "not valid base64"), "%s", res.text);
        tool_result_done(&res);

        static const char *const bad_paths[] = { "/etc/passwd", "../x",  "a/../b",
                                                 "a//b",        "/work", "." };
        for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
                char args[128];
                (void) snprintf(args, sizeof(args), "{\"path\": \"%s\"}", bad_paths[i]);
                res = call(tb, "read_file", args);
                cr_expect(res.is_error, "%s", bad_paths[i]);
                cr_expect(strstr(res.text, "relative to /work"), "%s: %s", bad_paths[i], res.text);
                tool_result_done(&res);
        }
        cr_expect_eq(toolbox_call(tb, "no_such_tool", NULL, &res), -ENOENT);
        toolbox_free(tb);
}

/* ---- MCP tools/call and resources on the fake backend ---------------------------------- */

Test(mcp, tools_call_content_and_resources)
{
        struct mcp_conn *c = conn_new();
        json_t *r, *content, *res;

        initialize(c, "2025-06-18");
        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
                    "{\"name\":\"write_file\",\"arguments\":{\"path\":\"r.csv\",\"content\":"
                    "\"a,b\\n\"}}}");
        json_decref(r);
        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
                    "{\"name\":\"run_python\",\"arguments\":{\"code\":\"plot\"}}}");
        res = json_object_get(r, "result");
        content = json_object_get(res, "content");
        cr_assert(json_is_false(json_object_get(res, "isError")));
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(content, 0), "type")),
                         "text");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "type")),
                         "image");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "mimeType")),
                         "image/png");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(content, 2), "type")),
                         "resource_link");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(content, 2), "uri")),
                         "airlock://files/out.csv");
        cr_expect(json_is_object(json_object_get(res, "structuredContent")));
        json_decref(r);

        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\"}");
        cr_expect_eq(json_array_size(json_object_get(json_object_get(r, "result"), "resources")), 2,
                     "r.csv and out.csv");
        json_decref(r);
        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/read\",\"params\":"
                    "{\"uri\":\"airlock://files/r.csv\"}}");
        content = json_array_get(json_object_get(json_object_get(r, "result"), "contents"), 0);
        cr_expect_str_eq(json_string_value(json_object_get(content, "text")), "a,b\n");
        cr_expect_str_eq(json_string_value(json_object_get(content, "mimeType")), "text/csv");
        json_decref(r);
        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/read\",\"params\":"
                    "{\"uri\":\"airlock://files/missing\"}}");
        cr_expect_eq(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
                     MCP_RESOURCE_NOT_FOUND);
        json_decref(r);

        /* An unknown tool is a tool error, as the official SDKs report it. */
        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":"
                    "{\"name\":\"nope\",\"arguments\":{}}}");
        cr_expect(json_is_true(json_object_get(json_object_get(r, "result"), "isError")));
        json_decref(r);

        /* reset_session drops the session and with it the resources. */
        json_decref(send(c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":"
                            "{\"name\":\"reset_session\"}}"));
        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"resources/list\"}");
        cr_expect_eq(json_array_size(json_object_get(json_object_get(r, "result"), "resources")),
                     0);
        json_decref(r);
        mcp_conn_free(c);
}

Test(mcp, older_versions_get_no_resource_links)
{
        struct mcp_conn *c = conn_new();
        json_t *r, *content;

        initialize(c, "2025-03-26");
        r = send(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
                    "{\"name\":\"run_python\",\"arguments\":{\"code\":\"plot\"}}}");
        content = json_object_get(json_object_get(r, "result"), "content");
        cr_expect_eq(json_array_size(content), 2, "text and image only");
        cr_expect_null(json_object_get(json_object_get(r, "result"), "structuredContent"));
        json_decref(r);
        mcp_conn_free(c);
}

/* ---- the streamable HTTP transport ----------------------------------------------------- */

struct hdrs {
        const char *names[4];
        const char *values[4];
};

static const char *get_header(void *userdata, const char *name)
{
        struct hdrs *h = userdata;

        for (size_t i = 0; i < 4 && h->names[i]; i++)
                if (strcasecmp(h->names[i], name) == 0)
                        return h->values[i];
        return NULL;
}

static const char *resp_header(const struct mcp_http_response *resp, const char *name)
{
        for (size_t i = 0; i < resp->n_headers; i++)
                if (strcasecmp(resp->headers[i].name, name) == 0)
                        return resp->headers[i].value;
        return NULL;
}

static unsigned http(struct mcp_http *h, const char *method, const char *sid, const char *body,
                     struct mcp_http_response *resp)
{
        struct hdrs hd = { { sid ? "Mcp-Session-Id" : NULL }, { sid } };

        cr_assert_eq(
                mcp_http_handle(h,
                                &(struct mcp_http_request){ .method = method,
                                                            .header = get_header,
                                                            .userdata = &hd,
                                                            .body = body,
                                                            .body_len = body ? strlen(body) : 0 },
                                resp),
                0);
        return resp->status;
}

Test(mcp, http_session_rules)
{
        static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                                   "\"params\":{\"protocolVersion\":\"2025-11-25\"}}";
        static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
        struct mcp_http *h = NULL;
        struct mcp_http_response resp;
        char sid[96];

        cr_assert_eq(mcp_http_new(&backend, NULL, &h), 0);
        cr_expect_eq(http(h, "POST", NULL, ping, &resp), 400, "no session id");
        mcp_http_response_done(&resp);
        cr_expect_eq(http(h, "POST", "mcp-nope", ping, &resp), 404, "unknown session id");
        mcp_http_response_done(&resp);
        cr_expect_eq(http(h, "POST", NULL, "{oops", &resp), 400, "parse error");
        mcp_http_response_done(&resp);
        cr_expect_eq(http(h, "POST", NULL,
                          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
                          &resp),
                     200);
        cr_expect_null(resp_header(&resp, "Mcp-Session-Id"), "a failed initialize makes none");
        mcp_http_response_done(&resp);
        cr_expect_eq(mcp_http_sessions(h), 0);

        cr_expect_eq(http(h, "POST", NULL, init, &resp), 200);
        cr_assert_not_null(resp_header(&resp, "Mcp-Session-Id"));
        (void) snprintf(sid, sizeof(sid), "%s", resp_header(&resp, "Mcp-Session-Id"));
        cr_expect_str_eq(resp_header(&resp, "Content-Type"), "application/json");
        mcp_http_response_done(&resp);
        cr_expect_eq(mcp_http_sessions(h), 1);

        cr_expect_eq(http(h, "POST", sid,
                          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &resp),
                     202);
        cr_expect_null(resp.body);
        mcp_http_response_done(&resp);
        cr_expect_eq(http(h, "POST", sid, ping, &resp), 200);
        cr_expect(strstr(resp.body, "\"result\":{}"), "%s", resp.body);
        mcp_http_response_done(&resp);
        cr_expect_eq(http(h, "GET", sid, NULL, &resp), 405);
        cr_expect_str_eq(resp_header(&resp, "Allow"), "POST, DELETE");
        mcp_http_response_done(&resp);

        cr_expect_eq(http(h, "DELETE", NULL, NULL, &resp), 400);
        mcp_http_response_done(&resp);
        cr_expect_eq(http(h, "DELETE", sid, NULL, &resp), 200);
        mcp_http_response_done(&resp);
        cr_expect_eq(mcp_http_sessions(h), 0);
        cr_expect_eq(http(h, "POST", sid, ping, &resp), 404);
        mcp_http_response_done(&resp);
        mcp_http_free(h);
}

Test(mcp, http_delete_ends_the_sandbox_session)
{
        static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                                   "\"params\":{\"protocolVersion\":\"2025-06-18\"}}";
        struct mcp_http *h = NULL;
        struct mcp_http_response resp;
        char sid[96];

        cr_assert_eq(mcp_http_new(&backend, NULL, &h), 0);
        cr_assert_eq(http(h, "POST", NULL, init, &resp), 200);
        (void) snprintf(sid, sizeof(sid), "%s", resp_header(&resp, "Mcp-Session-Id"));
        mcp_http_response_done(&resp);
        cr_assert_eq(http(h, "POST", sid,
                          "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"
                          "{\"name\":\"run_python\",\"arguments\":{\"code\":\"x\"}}}",
                          &resp),
                     200);
        mcp_http_response_done(&resp);
        cr_expect_eq(fake.n_created, 1);
        cr_expect_eq(http(h, "DELETE", sid, NULL, &resp), 200);
        mcp_http_response_done(&resp);
        cr_expect_eq(fake.n_destroyed, 1);
        mcp_http_free(h);
}
