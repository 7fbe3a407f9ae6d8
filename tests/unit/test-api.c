/* Unit tests for the pure parts of src/api: request-body validation, the Host/Origin rules,
 * route matching on raw paths (percent-encoding, "..", double slashes), --listen parsing, the
 * token file (creation, permissions) and the token comparison. The HTTP server itself is
 * exercised end to end by tests/e2e/test_api_*.py. */
#include "api/auth.h"
#include "api/json-body.h"
#include "api/listen.h"
#include "api/router.h"

#include "base/cleanup.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- request bodies ---- */

enum body_kind { ONE_SHOT, SESSION_EXEC, SESSION_CREATE };

struct body_case {
        enum body_kind kind;
        const char *body;
        int want_r;
        const char *want_field; /* on failure */
};

static const struct body_case body_cases[] = {
        /* one-shot /execute */
        { ONE_SHOT, "{\"code\": \"print(1)\"}", 0, NULL },
        { ONE_SHOT,
          "{\"code\": \"echo\", \"language\": \"bash\", \"profile\": \"minimal\", "
          "\"timeout\": 1.5}",
          0, NULL },
        { ONE_SHOT, "{\"code\": \"1\", \"timeout_s\": 3600}", 0, NULL },
        { ONE_SHOT, "{\"code\": \"1\", \"timeout\": 0.0001}", 0, NULL },
        { ONE_SHOT, "", -EINVAL, "body" },
        { ONE_SHOT, "   ", -EINVAL, "body" },
        { ONE_SHOT, "{", -EINVAL, "body" },
        { ONE_SHOT, "[1]", -EINVAL, "body" },
        { ONE_SHOT, "\"code\"", -EINVAL, "body" },
        { ONE_SHOT, "null", -EINVAL, "body" },
        { ONE_SHOT, "{\"code\": \"a\", \"code\": \"b\"}", -EINVAL, "body" },
        { ONE_SHOT, "{\"code\": \"a\\u0000b\"}", -EINVAL, "body" },
        { ONE_SHOT, "{}", -EINVAL, "code" },
        { ONE_SHOT, "{\"code\": \"\"}", -EINVAL, "code" },
        { ONE_SHOT, "{\"code\": 1}", -EINVAL, "code" },
        { ONE_SHOT, "{\"code\": null}", -EINVAL, "code" },
        { ONE_SHOT, "{\"code\": [\"print(1)\"]}", -EINVAL, "code" },
        { ONE_SHOT, "{\"code\": \"1\", \"language\": \"ruby\"}", -EINVAL, "language" },
        { ONE_SHOT, "{\"code\": \"1\", \"language\": \"Python\"}", -EINVAL, "language" },
        { ONE_SHOT, "{\"code\": \"1\", \"language\": 3}", -EINVAL, "language" },
        { ONE_SHOT, "{\"code\": \"1\", \"profile\": \"nope!\"}", -EINVAL, "profile" },
        { ONE_SHOT, "{\"code\": \"1\", \"profile\": \"/etc/passwd\"}", -EINVAL, "profile" },
        { ONE_SHOT, "{\"code\": \"1\", \"profile\": \"../default.json\"}", -EINVAL, "profile" },
        { ONE_SHOT, "{\"code\": \"1\", \"profile\": \"\"}", -EINVAL, "profile" },
        { ONE_SHOT, "{\"code\": \"1\", \"profile\": true}", -EINVAL, "profile" },
        { ONE_SHOT, "{\"code\": \"1\", \"timeout\": 0}", -EINVAL, "timeout" },
        { ONE_SHOT, "{\"code\": \"1\", \"timeout\": -1}", -EINVAL, "timeout" },
        { ONE_SHOT, "{\"code\": \"1\", \"timeout\": 3600.5}", -EINVAL, "timeout" },
        { ONE_SHOT, "{\"code\": \"1\", \"timeout\": \"10\"}", -EINVAL, "timeout" },
        { ONE_SHOT, "{\"code\": \"1\", \"timeout\": true}", -EINVAL, "timeout" },
        { ONE_SHOT, "{\"code\": \"1\", \"timeout_s\": 0}", -EINVAL, "timeout_s" },
        { ONE_SHOT, "{\"code\": \"1\", \"timeout\": 1, \"timeout_s\": 1}", -EINVAL, "timeout" },
        { ONE_SHOT, "{\"code\": \"1\", \"cmd\": \"x\"}", -EINVAL, "cmd" },
        { ONE_SHOT, "{\"code\": \"1\", \"env\": {}}", 0, NULL },
        { ONE_SHOT, "{\"code\": \"1\", \"stdin\": \"a\\nb\", \"cwd\": \"/tmp\"}", 0, NULL },
        { ONE_SHOT, "{\"code\": \"1\", \"files\": {\"a.txt\": \"aGk=\"}}", 0, NULL },
        { ONE_SHOT, "{\"code\": \"1\", \"files\": [\"a\"]}", -EINVAL, "files" },
        { ONE_SHOT, "{\"code\": \"1\", \"stdin\": 1}", -EINVAL, "stdin" },
        { ONE_SHOT, "{\"code\": \"1\", \"env\": {\"LD_PRELOAD\": \"x\"}}", -EINVAL, "env" },
        { ONE_SHOT, "{\"code\": \"1\", \"env\": {\"PYTHONHOME\": \"x\"}}", -EINVAL, "env" },
        { SESSION_EXEC, "{\"code\": \"1\", \"env\": {\"A\": \"1\"}, \"cwd\": \"sub/dir\"}", 0,
          NULL },
        { SESSION_EXEC, "{\"code\": \"1\", \"cwd\": \"\"}", -EINVAL, "cwd" },
        { SESSION_EXEC, "{\"code\": \"1\", \"cwd\": \"a/../..\"}", -EINVAL, "cwd" },
        { SESSION_EXEC, "{\"code\": \"1\", \"cwd\": 3}", -EINVAL, "cwd" },
        { SESSION_EXEC, "{\"code\": \"1\", \"env\": {\"A\": null}}", -EINVAL, "env" },
        { SESSION_EXEC, "{\"code\": \"1\", \"files\": {}}", -EINVAL, "files" },
        /* session execute */
        { SESSION_EXEC, "{\"code\": \"x = 1\"}", 0, NULL },
        { SESSION_EXEC, "{\"code\": \"ls\", \"language\": \"bash\", \"timeout_s\": 2}", 0, NULL },
        { SESSION_EXEC, "{\"code\": \"1\", \"timeout\": 2}", 0, NULL },
        { SESSION_EXEC, "{\"code\": \"1\", \"profile\": \"default\"}", -EINVAL, "profile" },
        { SESSION_EXEC, "{\"code\": \"1\", \"timeout_s\": 1e9}", -EINVAL, "timeout_s" },
        { SESSION_EXEC, "{\"code\": \"1\", \"timeout_s\": {}}", -EINVAL, "timeout_s" },
        { SESSION_EXEC, "{\"language\": \"bash\"}", -EINVAL, "code" },
        /* session create */
        { SESSION_CREATE, "", 0, NULL },
        { SESSION_CREATE, "{}", 0, NULL },
        { SESSION_CREATE,
          "{\"profile\": \"data-science\", \"idle_timeout_s\": 60, "
          "\"env\": {\"A\": \"1\", \"_B2\": \"\"}}",
          0, NULL },
        { SESSION_CREATE, "[]", -EINVAL, "body" },
        { SESSION_CREATE, "{\"profile\": 1}", -EINVAL, "profile" },
        { SESSION_CREATE, "{\"profile\": \"a/b\"}", -EINVAL, "profile" },
        { SESSION_CREATE, "{\"idle_timeout_s\": 0}", -EINVAL, "idle_timeout_s" },
        { SESSION_CREATE, "{\"idle_timeout_s\": 86401}", -EINVAL, "idle_timeout_s" },
        { SESSION_CREATE, "{\"idle_timeout_s\": \"60\"}", -EINVAL, "idle_timeout_s" },
        { SESSION_CREATE, "{\"env\": [\"A=1\"]}", -EINVAL, "env" },
        { SESSION_CREATE, "{\"env\": {\"A\": 1}}", -EINVAL, "env" },
        { SESSION_CREATE, "{\"env\": {\"1A\": \"x\"}}", -EINVAL, "env" },
        { SESSION_CREATE, "{\"env\": {\"A=B\": \"x\"}}", -EINVAL, "env" },
        { SESSION_CREATE, "{\"env\": {\"\": \"x\"}}", -EINVAL, "env" },
        { SESSION_CREATE, "{\"code\": \"1\"}", -EINVAL, "code" },
};

Test(api, body_validation_table)
{
        for (size_t i = 0; i < ELEMENTSOF(body_cases); i++) {
                const struct body_case *c = &body_cases[i];
                struct body_error err = { { 0 } };
                json_t *root = NULL;
                int r;

                if (c->kind == SESSION_CREATE) {
                        struct session_body b;
                        r = session_body_parse(c->body, strlen(c->body), &root, &b, &err);
                        if (r >= 0)
                                strv_free(b.env);
                } else {
                        struct exec_body b;
                        r = exec_body_parse(c->body, strlen(c->body), c->kind == ONE_SHOT, &root,
                                            &b, &err);
                }
                cr_expect_eq(r, c->want_r, "case %zu (%s): r=%d, expected %d (%s)", i, c->body, r,
                             c->want_r, err.msg);
                if (r < 0 && c->want_field)
                        cr_expect_str_eq(err.field, c->want_field,
                                         "case %zu (%s): field '%s', expected '%s' (%s)", i,
                                         c->body, err.field, c->want_field, err.msg);
                if (r < 0)
                        cr_expect(err.msg[0] != '\0', "case %zu: no message", i);
                json_decref(root);
        }
}

Test(api, exec_body_values)
{
        const char *text = "{\"code\": \"print(1)\", \"timeout\": 2.5, \"profile\": \"minimal\"}";
        struct body_error err = { { 0 } };
        struct exec_body b;
        json_t *root = NULL;

        cr_assert_eq(exec_body_parse(text, strlen(text), true, &root, &b, &err), 0);
        cr_expect_str_eq(b.code, "print(1)");
        cr_expect_str_eq(b.language, "python");
        cr_expect_str_eq(b.profile, "minimal");
        cr_expect_eq(b.timeout_ms, 2500);
        json_decref(root);

        text = "{\"code\": \"x\", \"timeout_s\": 0.0001}";
        cr_assert_eq(exec_body_parse(text, strlen(text), false, &root, &b, &err), 0);
        cr_expect_eq(b.timeout_ms, 1, "a tiny timeout is rounded up to 1 ms, not 0 (= none)");
        cr_expect_null(b.profile);
        json_decref(root);
}

Test(api, session_body_env)
{
        const char *text = "{\"env\": {\"A\": \"1\", \"B\": \"x=y\"}, \"idle_timeout_s\": 1.5}";
        struct body_error err = { { 0 } };
        struct session_body b;
        json_t *root = NULL;

        cr_assert_eq(session_body_parse(text, strlen(text), &root, &b, &err), 0);
        cr_assert_not_null(b.env);
        cr_expect_str_eq(b.env[0], "A=1");
        cr_expect_str_eq(b.env[1], "B=x=y");
        cr_expect_null(b.env[2]);
        cr_expect_eq(b.stop_after_ms, 1500);
        strv_free(b.env);
        json_decref(root);
}

Test(api, unknown_field_name_is_bounded)
{
        char text[1024];
        struct body_error err = { { 0 } };
        struct exec_body b;
        json_t *root = NULL;
        char key[600];

        memset(key, 'k', sizeof(key) - 1);
        key[sizeof(key) - 1] = '\0';
        (void) snprintf(text, sizeof(text), "{\"code\": \"1\", \"%s\": 1}", key);
        cr_assert_eq(exec_body_parse(text, strlen(text), true, &root, &b, &err), -EINVAL);
        cr_expect(strlen(err.field) <= 64, "field excerpt has %zu bytes", strlen(err.field));
        cr_expect(strncmp(err.field, "kkkk", 4) == 0);
}

/* ---- Host and Origin ---- */

struct host_case {
        const char *value;
        bool is_origin;
        bool want;
};

Test(api, host_origin_table)
{
        static const char *const extra[] = { "airlock.internal", "Proxy.Example:443", "::2", NULL };
        static const struct host_case cases[] = {
                { "127.0.0.1:8080", false, true },
                { "localhost:8080", false, true },
                { "LOCALHOST:8080", false, true },
                { "[::1]:8080", false, true },
                { "airlock.internal", false, true },
                { "airlock.internal:8080", false, true },
                { "proxy.example:443", false, true },
                { "[::2]:8080", false, true },
                { "127.0.0.1", false, false },
                { "localhost", false, false },
                { "localhost:8081", false, false },
                { "evil.example:8080", false, false },
                { "127.0.0.1:8080.evil.example", false, false },
                { "127.0.0.2:8080", false, false },
                { "", false, false },
                { "proxy.example", false, false },
                { "::1:8080", false, false },
                { "http://127.0.0.1:8080", true, true },
                { "https://localhost:8080", true, true },
                { "http://localhost:8080/", true, true },
                { "HTTP://LOCALHOST:8080", true, true },
                { "http://[::1]:8080", true, true },
                { "https://airlock.internal", true, true },
                { "null", true, false },
                { "http://evil.example", true, false },
                { "http://evil.example:8080", true, false },
                { "http://localhost:8080.evil.example", true, false },
                { "http://localhost:8080/path", true, false },
                { "http://user@localhost:8080", true, false },
                { "ftp://localhost:8080", true, false },
                { "localhost:8080", true, false },
                { "http://", true, false },
                { "http://localhost", true, false },
        };
        struct host_allow ha;

        cr_assert_eq(host_allow_init(&ha, "127.0.0.1", 8080, extra), 0);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                bool got = cases[i].is_origin ? host_allow_check_origin(&ha, cases[i].value)
                                              : host_allow_check_host(&ha, cases[i].value);
                cr_expect_eq(got, cases[i].want, "%s '%s': got %d, expected %d",
                             cases[i].is_origin ? "Origin" : "Host", cases[i].value, got,
                             cases[i].want);
        }
        cr_expect_not(host_allow_check_host(&ha, NULL), "a missing Host is refused");
        host_allow_done(&ha);
}

Test(api, host_allow_listen_address_and_port_80)
{
        struct host_allow ha;

        cr_assert_eq(host_allow_init(&ha, "::1", 80, NULL), 0);
        cr_expect(host_allow_check_host(&ha, "[::1]:80"));
        cr_expect(host_allow_check_host(&ha, "[::1]"));
        cr_expect(host_allow_check_host(&ha, "localhost"));
        cr_expect(host_allow_check_origin(&ha, "http://localhost"));
        host_allow_done(&ha);

        cr_assert_eq(host_allow_init(&ha, "0.0.0.0", 9000, NULL), 0);
        cr_expect(host_allow_check_host(&ha, "0.0.0.0:9000"));
        cr_expect(host_allow_check_host(&ha, "127.0.0.1:9000"));
        cr_expect_not(host_allow_check_host(&ha, "192.168.1.5:9000"),
                      "other names need --allow-host");
        host_allow_done(&ha);

        cr_expect_eq(host_allow_init(&ha, "127.0.0.1", 1, (const char *const[]){ "", NULL }),
                     -EINVAL);
}

/* ---- routes ---- */

static int handler_a(struct api_request *req)
{
        (void) req;
        return 1;
}

static int handler_b(struct api_request *req)
{
        (void) req;
        return 2;
}

static const struct api_route test_routes[] = {
        { "GET", "/healthz", handler_a, false, 1 },
        { "POST", "/execute", handler_a, true, 1 },
        { "POST", "/v1/sessions", handler_a, true, 1 },
        { "GET", "/v1/sessions", handler_b, true, 1 },
        { "GET", "/v1/sessions/{id}", handler_a, true, 1 },
        { "DELETE", "/v1/sessions/{id}", handler_b, true, 1 },
        { "POST", "/v1/sessions/{id}/execute", handler_a, true, 1 },
        { "GET", "/v1/sessions/{id}/files/{path*}", handler_a, true, 1 },
        { "PUT", "/v1/sessions/{id}/files/{path*}", handler_b, true, 1 },
};

struct route_case {
        const char *method;
        const char *path;
        int want_r;
        const char *want_pattern;
        const char *want_id;
        const char *want_path; /* NULL: no path parameter */
};

Test(api, route_table)
{
        static const struct route_case cases[] = {
                { "GET", "/healthz", 0, "/healthz", NULL, NULL },
                { "HEAD", "/healthz", 0, "/healthz", NULL, NULL },
                { "GET", "/healthz/", 0, "/healthz", NULL, NULL },
                { "GET", "/healthz//", -ENOENT, NULL, NULL, NULL },
                { "GET", "//healthz", -ENOENT, NULL, NULL, NULL },
                { "GET", "/%68ealthz", 0, "/healthz", NULL, NULL },
                { "GET", "/healthzz", -ENOENT, NULL, NULL, NULL },
                { "GET", "/", -ENOENT, NULL, NULL, NULL },
                { "GET", "", -ENOENT, NULL, NULL, NULL },
                { "GET", "healthz", -ENOENT, NULL, NULL, NULL },
                { "POST", "/healthz", -EOPNOTSUPP, NULL, NULL, NULL },
                { "GET", "/execute", -EOPNOTSUPP, NULL, NULL, NULL },
                { "POST", "/v1/sessions", 0, "/v1/sessions", NULL, NULL },
                { "GET", "/v1/sessions/", 0, "/v1/sessions", NULL, NULL },
                { "PATCH", "/v1/sessions", -EOPNOTSUPP, NULL, NULL, NULL },
                { "GET", "/v1//sessions", -ENOENT, NULL, NULL, NULL },
                { "GET", "/v1/sessions/s-1", 0, "/v1/sessions/{id}", "s-1", NULL },
                { "DELETE", "/v1/sessions/s-1/", 0, "/v1/sessions/{id}", "s-1", NULL },
                { "GET", "/v1/sessions/s%2D1", 0, "/v1/sessions/{id}", "s-1", NULL },
                { "GET", "/v1/sessions/a%2Fb", 0, "/v1/sessions/{id}", "a/b", NULL },
                { "GET", "/v1/sessions/%00", -EINVAL, NULL, NULL, NULL },
                { "GET", "/v1/sessions/%zz", -EINVAL, NULL, NULL, NULL },
                { "GET", "/v1/sessions/%4", -EINVAL, NULL, NULL, NULL },
                { "GET", "/v1/sessions/%", -EINVAL, NULL, NULL, NULL },
                { "POST", "/v1/sessions/s-1/execute", 0, "/v1/sessions/{id}/execute", "s-1", NULL },
                { "POST", "/v1/sessions//execute", -ENOENT, NULL, NULL, NULL },
                { "GET", "/v1/sessions/s-1/files", 0, "/v1/sessions/{id}/files/{path*}", "s-1",
                  "" },
                { "GET", "/v1/sessions/s-1/files/", 0, "/v1/sessions/{id}/files/{path*}", "s-1",
                  "" },
                { "GET", "/v1/sessions/s-1/files/a/b.txt", 0, "/v1/sessions/{id}/files/{path*}",
                  "s-1", "a/b.txt" },
                { "PUT", "/v1/sessions/s-1/files/my%20file.csv", 0,
                  "/v1/sessions/{id}/files/{path*}", "s-1", "my file.csv" },
                { "GET", "/v1/sessions/s-1/files/a+b", 0, "/v1/sessions/{id}/files/{path*}", "s-1",
                  "a+b" },
                { "GET", "/v1/sessions/s-1/files/../x", 0, "/v1/sessions/{id}/files/{path*}", "s-1",
                  "../x" },
                { "GET", "/v1/sessions/s-1/files/%2e%2e/x", 0, "/v1/sessions/{id}/files/{path*}",
                  "s-1", "../x" },
                { "GET", "/v1/sessions/s-1/files/a%2Fb", 0, "/v1/sessions/{id}/files/{path*}",
                  "s-1", "a/b" },
                { "GET", "/v1/sessions/s-1/files//etc/passwd", 0, "/v1/sessions/{id}/files/{path*}",
                  "s-1", "/etc/passwd" },
                { "GET", "/v1/sessions/s-1/files/a%00b", -EINVAL, NULL, NULL, NULL },
                { "DELETE", "/v1/sessions/s-1/files/x", -EOPNOTSUPP, NULL, NULL, NULL },
                { "GET", "/v1/sessions/s-1/filesx", -ENOENT, NULL, NULL, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const struct route_case *c = &cases[i];
                const struct api_route *route = NULL;
                struct route_params p;
                char allow[64];
                int r;

                r = route_find(test_routes, ELEMENTSOF(test_routes), c->method, c->path, &route, &p,
                               allow, sizeof(allow));
                cr_expect_eq(r, c->want_r, "%s '%s': r=%d, expected %d", c->method, c->path, r,
                             c->want_r);
                if (r != 0 || c->want_r != 0)
                        continue;
                cr_expect_str_eq(route->pattern, c->want_pattern, "%s '%s'", c->method, c->path);
                if (c->want_id) {
                        cr_expect(p.has_id);
                        cr_expect_str_eq(p.id, c->want_id, "%s '%s'", c->method, c->path);
                }
                if (c->want_path) {
                        cr_expect(p.has_path, "%s '%s': no path", c->method, c->path);
                        cr_expect_str_eq(p.path, c->want_path, "%s '%s'", c->method, c->path);
                } else {
                        cr_expect_not(p.has_path, "%s '%s'", c->method, c->path);
                }
        }
}

Test(api, route_allow_list)
{
        const struct api_route *route = NULL;
        struct route_params p;
        char allow[64];

        cr_assert_eq(route_find(test_routes, ELEMENTSOF(test_routes), "PATCH", "/v1/sessions/x",
                                &route, &p, allow, sizeof(allow)),
                     -EOPNOTSUPP);
        cr_expect_str_eq(allow, "GET, HEAD, DELETE");
        cr_assert_eq(route_find(test_routes, ELEMENTSOF(test_routes), "POST", "/healthz", &route,
                                &p, allow, sizeof(allow)),
                     -EOPNOTSUPP);
        cr_expect_str_eq(allow, "GET, HEAD");
}

Test(api, route_second_segment_parameter)
{
        static const struct api_route routes[] = {
                { "GET", "/v1/containers/{id}/files/{sub}", handler_a, true, 1, 0 },
                { "GET", "/v1/containers/{id}/files/{sub}/content", handler_b, true, 1, 0 },
        };
        const struct api_route *route = NULL;
        struct route_params p;

        cr_assert_eq(route_find(routes, ELEMENTSOF(routes), "GET",
                                "/v1/containers/cntr_1/files/cfile_2/content", &route, &p, NULL, 0),
                     0);
        cr_expect_eq(route, &routes[1]);
        cr_expect_str_eq(p.id, "cntr_1");
        cr_expect(p.has_sub);
        cr_expect_str_eq(p.sub, "cfile_2");
        cr_assert_eq(route_find(routes, ELEMENTSOF(routes), "GET", "/v1/containers/c/files/a%2Fb",
                                &route, &p, NULL, 0),
                     0);
        cr_expect_eq(route, &routes[0]);
        cr_expect_str_eq(p.sub, "a/b");
        /* An empty segment names nothing. */
        cr_expect_eq(route_find(routes, ELEMENTSOF(routes), "GET",
                                "/v1/containers/c/files//content", &route, &p, NULL, 0),
                     -ENOENT);
        cr_expect_eq(route_find(routes, ELEMENTSOF(routes), "GET", "/v1/containers/c/files/%00",
                                &route, &p, NULL, 0),
                     -EINVAL);
}

Test(api, route_long_segment)
{
        char path[600] = "/v1/sessions/";
        const struct api_route *route = NULL;
        struct route_params p;

        memset(path + strlen(path), 'a', 300);
        cr_expect_eq(
                route_find(test_routes, ELEMENTSOF(test_routes), "GET", path, &route, &p, NULL, 0),
                -E2BIG);
}

Test(api, percent_decode)
{
        char out[16];

        cr_expect_eq(percent_decode("a%20b", 5, false, out, sizeof(out)), 3);
        cr_expect_str_eq(out, "a b");
        cr_expect_eq(percent_decode("a+b", 3, false, out, sizeof(out)), 3);
        cr_expect_str_eq(out, "a+b");
        cr_expect_eq(percent_decode("a+b", 3, true, out, sizeof(out)), 3);
        cr_expect_str_eq(out, "a b");
        cr_expect_eq(percent_decode("%C3%A9", 6, false, out, sizeof(out)), 2);
        cr_expect_str_eq(out, "\xc3\xa9");
        cr_expect_eq(percent_decode("%2f%2F", 6, false, out, sizeof(out)), 2);
        cr_expect_str_eq(out, "//");
        cr_expect_eq(percent_decode("", 0, false, out, sizeof(out)), 0);
        cr_expect_str_eq(out, "");
        cr_expect_eq(percent_decode("%00", 3, false, out, sizeof(out)), -EINVAL);
        cr_expect_eq(percent_decode("%g0", 3, false, out, sizeof(out)), -EINVAL);
        cr_expect_eq(percent_decode("ab%", 3, false, out, sizeof(out)), -EINVAL);
        cr_expect_eq(percent_decode("ab%4", 4, false, out, sizeof(out)), -EINVAL);
        cr_expect_eq(percent_decode("0123456789abcdef", 16, false, out, sizeof(out)), -E2BIG);
}

Test(api, file_path_check)
{
        static const struct {
                const char *path;
                bool allow_empty;
                int want;
        } cases[] = {
                { "a.txt", false, 0 },
                { "dir/sub/a.txt", false, 0 },
                { ".hidden", false, 0 },
                { "..a", false, 0 },
                { "a..", false, 0 },
                { "my file", false, 0 },
                { "", true, 0 },
                { "", false, -EINVAL },
                { "/etc/passwd", false, -EINVAL },
                { "..", false, -EINVAL },
                { "../x", false, -EINVAL },
                { "a/../../x", false, -EINVAL },
                { "a/..", false, -EINVAL },
                { ".", false, -EINVAL },
                { "./a", false, -EINVAL },
                { "a/./b", false, -EINVAL },
                { "a//b", false, -EINVAL },
                { "a/", false, -EINVAL },
                { "/", true, -EINVAL },
        };
        char long_component[300], long_path[5000];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *why = NULL;
                int r = route_check_file_path(cases[i].path, cases[i].allow_empty, &why);
                cr_expect_eq(r, cases[i].want, "'%s': r=%d, expected %d", cases[i].path, r,
                             cases[i].want);
                if (r < 0)
                        cr_expect_not_null(why);
        }
        memset(long_component, 'x', sizeof(long_component) - 1);
        long_component[sizeof(long_component) - 1] = '\0';
        cr_expect_eq(route_check_file_path(long_component, false, &(const char *){ NULL }),
                     -EINVAL);
        for (size_t i = 0; i < sizeof(long_path) - 1; i++)
                long_path[i] = i % 2 ? '/' : 'a';
        long_path[sizeof(long_path) - 2] = 'a';
        long_path[sizeof(long_path) - 1] = '\0';
        cr_expect_eq(route_check_file_path(long_path, false, &(const char *){ NULL }), -EINVAL);
}

/* ---- --listen ---- */

Test(api, listen_parse)
{
        struct api_listen l;
        const char *why = NULL;

        cr_assert_eq(api_listen_parse("127.0.0.1:8080", &l, &why), 0);
        cr_expect_str_eq(l.host, "127.0.0.1");
        cr_expect_eq(l.port, 8080);
        cr_expect_not(l.is_unix);
        cr_expect(api_listen_is_loopback(&l));

        cr_assert_eq(api_listen_parse("[::1]:0", &l, &why), 0);
        cr_expect_str_eq(l.host, "::1");
        cr_expect_eq(l.port, 0);
        cr_expect(api_listen_is_loopback(&l));

        cr_assert_eq(api_listen_parse("localhost:80", &l, &why), 0);
        cr_expect(api_listen_is_loopback(&l));
        cr_assert_eq(api_listen_parse("127.1.2.3:80", &l, &why), 0);
        cr_expect(api_listen_is_loopback(&l));
        cr_assert_eq(api_listen_parse("0.0.0.0:8080", &l, &why), 0);
        cr_expect_not(api_listen_is_loopback(&l));
        cr_assert_eq(api_listen_parse("[::]:8080", &l, &why), 0);
        cr_expect_not(api_listen_is_loopback(&l));
        cr_assert_eq(api_listen_parse("192.168.0.1:8080", &l, &why), 0);
        cr_expect_not(api_listen_is_loopback(&l));
        cr_assert_eq(api_listen_parse("[::ffff:127.0.0.1]:1", &l, &why), 0);
        cr_expect(api_listen_is_loopback(&l));
        cr_assert_eq(api_listen_parse("example.com:1", &l, &why), 0);
        cr_expect_not(api_listen_is_loopback(&l), "names other than localhost are not trusted");

        cr_assert_eq(api_listen_parse("unix:/run/airlock.sock", &l, &why), 0);
        cr_expect(l.is_unix);
        cr_expect_str_eq(l.path, "/run/airlock.sock");
        cr_expect(api_listen_is_loopback(&l));

        cr_expect_eq(api_listen_parse("unix:relative.sock", &l, &why), -EINVAL);
        cr_expect_eq(api_listen_parse("8080", &l, &why), -EINVAL);
        cr_expect_eq(api_listen_parse(":8080", &l, &why), -EINVAL);
        cr_expect_eq(api_listen_parse("127.0.0.1:", &l, &why), -EINVAL);
        cr_expect_eq(api_listen_parse("127.0.0.1:65536", &l, &why), -EINVAL);
        cr_expect_eq(api_listen_parse("127.0.0.1:-1", &l, &why), -EINVAL);
        cr_expect_eq(api_listen_parse("127.0.0.1:80x", &l, &why), -EINVAL);
        cr_expect_eq(api_listen_parse("::1:8080", &l, &why), -EINVAL);
        cr_expect_eq(api_listen_parse("[::1]8080", &l, &why), -EINVAL);
}

/* ---- tokens ---- */

static char tmpdir[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void) st;
        (void) flag;
        (void) ftw;
        return remove(path);
}

static void tmpdir_setup(void)
{
        strcpy(tmpdir, "/tmp/airlock-test-api-XXXXXX");
        cr_assert_not_null(mkdtemp(tmpdir));
        unsetenv("AIRLOCK_TOKEN");
}

static void tmpdir_teardown(void)
{
        (void) nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

        cr_assert_geq(fd, 0, "open %s: %m", path);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        cr_assert_eq(fchmod(fd, mode), 0);
        close(fd);
}

Test(api, token_created_once_0600, .init = tmpdir_setup, .fini = tmpdir_teardown)
{
        _cleanup_free_ char *t1 = NULL, *t2 = NULL;
        struct airlock_error err = { { 0 } };
        char path[128];
        struct stat st;
        bool created = false;

        cr_assert_eq(api_token_load_or_create(tmpdir, &t1, &created, &err), 0, "%s", err.msg);
        cr_expect(created);
        cr_expect_eq(strlen(t1), 64);
        cr_expect_eq(strspn(t1, "0123456789abcdef"), 64);

        (void) snprintf(path, sizeof(path), "%s/token", tmpdir);
        cr_assert_eq(stat(path, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
        cr_expect_eq(st.st_size, 65, "64 hex characters and a newline");

        cr_assert_eq(api_token_load_or_create(tmpdir, &t2, &created, &err), 0, "%s", err.msg);
        cr_expect_not(created, "the second start reads the same file");
        cr_expect_str_eq(t1, t2);
}

Test(api, tokens_differ, .init = tmpdir_setup, .fini = tmpdir_teardown)
{
        _cleanup_free_ char *t1 = NULL, *t2 = NULL;
        struct airlock_error err = { { 0 } };
        char path[128];
        bool created;

        cr_assert_eq(api_token_load_or_create(tmpdir, &t1, &created, &err), 0);
        (void) snprintf(path, sizeof(path), "%s/token", tmpdir);
        cr_assert_eq(unlink(path), 0);
        cr_assert_eq(api_token_load_or_create(tmpdir, &t2, &created, &err), 0);
        cr_expect(created);
        cr_expect_str_neq(t1, t2);
}

Test(api, token_file_refused_when_too_open, .init = tmpdir_setup, .fini = tmpdir_teardown)
{
        static const mode_t modes[] = { 0644, 0640, 0604, 0660, 0666, 0602 };
        struct airlock_error err = { { 0 } };
        char path[128];

        (void) snprintf(path, sizeof(path), "%s/token", tmpdir);
        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                char *t = NULL;
                bool created = false;

                write_file(path, "secret\n", modes[i]);
                cr_expect_eq(api_token_load_or_create(tmpdir, &t, &created, &err), -EPERM,
                             "mode %o accepted", modes[i]);
                cr_expect_null(t);
                cr_expect(strstr(err.msg, "chmod 600"), "message: %s", err.msg);
        }
        write_file(path, "secret\n", 0400);
        {
                _cleanup_free_ char *t = NULL;
                bool created = true;
                cr_expect_eq(api_token_load_or_create(tmpdir, &t, &created, &err), 0, "%s",
                             err.msg);
                cr_expect_str_eq(t, "secret", "trailing newline removed");
                cr_expect_not(created);
        }
}

Test(api, token_file_bad_content, .init = tmpdir_setup, .fini = tmpdir_teardown)
{
        struct airlock_error err = { { 0 } };
        char path[128], target[128];
        char *t = NULL;
        bool created;

        (void) snprintf(path, sizeof(path), "%s/token", tmpdir);
        write_file(path, "\n\n", 0600);
        cr_expect_eq(api_token_load_or_create(tmpdir, &t, &created, &err), -EINVAL);
        write_file(path, "two words\n", 0600);
        cr_expect_eq(api_token_load_or_create(tmpdir, &t, &created, &err), -EINVAL);

        /* A symlink planted in place of the token is not followed. */
        cr_assert_eq(unlink(path), 0);
        (void) snprintf(target, sizeof(target), "%s/elsewhere", tmpdir);
        write_file(target, "planted\n", 0600);
        cr_assert_eq(symlink(target, path), 0);
        cr_expect_lt(api_token_load_or_create(tmpdir, &t, &created, &err), 0);
        cr_expect_null(t);

        cr_assert_eq(unlink(path), 0);
        cr_assert_eq(mkdir(path, 0700), 0);
        cr_expect_eq(api_token_load_or_create(tmpdir, &t, &created, &err), -EPERM);
}

Test(api, token_find_client, .init = tmpdir_setup, .fini = tmpdir_teardown)
{
        struct airlock_error err = { { 0 } };
        const char *dirs[] = { "/nonexistent-airlock", tmpdir, NULL };
        char path[128];
        char *t = NULL;

        cr_expect_eq(api_token_find(dirs, &t, &err), -ENOENT);
        (void) snprintf(path, sizeof(path), "%s/token", tmpdir);
        write_file(path, "abc123\n", 0600);
        cr_assert_eq(api_token_find(dirs, &t, &err), 0);
        cr_expect_str_eq(t, "abc123");
        free(t);

        setenv("AIRLOCK_TOKEN", "from-env", 1);
        cr_assert_eq(api_token_find(dirs, &t, &err), 0);
        cr_expect_str_eq(t, "from-env");
        free(t);
        setenv("AIRLOCK_TOKEN", "", 1);
        cr_assert_eq(api_token_find(dirs, &t, &err), 0, "an empty AIRLOCK_TOKEN is unset");
        cr_expect_str_eq(t, "abc123");
        free(t);
        unsetenv("AIRLOCK_TOKEN");
}

Test(api, token_equal)
{
        const char *tok = "0123456789abcdef";

        cr_expect(api_token_equal(tok, "0123456789abcdef", 16));
        cr_expect_not(api_token_equal(tok, "0123456789abcdeF", 16));
        cr_expect_not(api_token_equal(tok, "1123456789abcdef", 16));
        cr_expect_not(api_token_equal(tok, "0123456789abcde", 15), "a prefix");
        cr_expect_not(api_token_equal(tok, "0123456789abcdef0", 17), "longer");
        cr_expect_not(api_token_equal(tok, "", 0));
        cr_expect(api_token_equal(tok, "0123456789abcdefXYZ", 16),
                  "only given_len bytes count (the header value is not NUL-cut)");
        cr_expect_not(api_token_equal("", "", 0), "an empty token never matches");
        cr_expect_not(api_token_equal("abc", "abc\0", 4), "an embedded NUL is a difference");
}

Test(api, bearer_parse)
{
        const char *t;
        size_t n;

        cr_assert_eq(api_bearer_parse("Bearer abc", &t, &n), 0);
        cr_expect_eq(n, 3);
        cr_expect(strncmp(t, "abc", 3) == 0);
        cr_assert_eq(api_bearer_parse("bearer  abc  ", &t, &n), 0);
        cr_expect_eq(n, 3);
        cr_assert_eq(api_bearer_parse("BEARER\tabc", &t, &n), 0);
        cr_expect_eq(n, 3);
        cr_expect_eq(api_bearer_parse("Basic YWJj", &t, &n), -EINVAL);
        cr_expect_eq(api_bearer_parse("Bearer", &t, &n), -EINVAL);
        cr_expect_eq(api_bearer_parse("Bearer   ", &t, &n), -EINVAL);
        cr_expect_eq(api_bearer_parse("Bearerabc", &t, &n), -EINVAL);
        cr_expect_eq(api_bearer_parse("abc", &t, &n), -EINVAL);
        cr_expect_eq(api_bearer_parse("", &t, &n), -EINVAL);
}

Test(api, state_dir_default)
{
        _cleanup_free_ char *dir = NULL;

        if (geteuid() == 0) {
                cr_assert_eq(api_state_dir_default(&dir), 0);
                cr_expect_str_eq(dir, "/var/lib/airlock");
                return;
        }
        setenv("XDG_STATE_HOME", "/x/state", 1);
        cr_assert_eq(api_state_dir_default(&dir), 0);
        cr_expect_str_eq(dir, "/x/state/airlock");
}

Test(api, state_dir_make, .init = tmpdir_setup, .fini = tmpdir_teardown)
{
        struct airlock_error err = { { 0 } };
        char dir[128];
        struct stat st;

        (void) snprintf(dir, sizeof(dir), "%s/a/b/c", tmpdir);
        cr_assert_eq(api_state_dir_make(dir, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(dir, &st), 0);
        cr_expect_eq(st.st_mode & 0777, 0700);
        cr_expect_eq(api_state_dir_make(dir, &err), 0, "existing is fine");
}

Test(api, exec_stdin_bound)
{
        struct body_error err = { { 0 } };
        struct exec_body b;
        json_t *root = NULL;
        size_t n = BODY_STDIN_MAX + 1;
        char *text = malloc(n + 64);
        int len;

        cr_assert(text);
        len = sprintf(text, "{\"code\": \"1\", \"stdin\": \"");
        memset(text + len, 'x', n);
        strcpy(text + len + n, "\"}");
        cr_assert_eq(exec_body_parse(text, strlen(text), false, &root, &b, &err), -EINVAL);
        cr_assert_str_eq(err.field, "stdin");
        /* One byte less fits. */
        strcpy(text + len + n - 1, "\"}");
        cr_assert_eq(exec_body_parse(text, strlen(text), false, &root, &b, &err), 0);
        cr_assert_eq(strlen(b.stdin_text), BODY_STDIN_MAX);
        json_decref(root);
        free(text);
}

Test(api, cwd_check)
{
        static const struct {
                const char *cwd;
                int want;
        } cases[] = {
                { "/tmp", 0 },     { "sub/dir", 0 },    { "/work/../etc", 0 }, { "a..b", 0 },
                { "..", -EINVAL }, { "a/..", -EINVAL }, { "../x", -EINVAL },   { "", -EINVAL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct body_error err = { { 0 } };
                cr_expect_eq(body_cwd_check(cases[i].cwd, &err), cases[i].want, "'%s'",
                             cases[i].cwd);
                if (cases[i].want)
                        cr_expect_str_eq(err.field, "cwd");
        }
}

Test(api, exec_files_decode)
{
        struct body_error err = { { 0 } };
        struct exec_file *files = NULL;
        size_t n = 0;
        json_t *ok = json_pack("{s:s, s:s}", "a.txt", "aGk=", "d/b.bin", "AAEC\n");
        static const char *const bad[] = { "{\"../a\": \"aGk=\"}", "{\"/a\": \"aGk=\"}",
                                           "{\"a//b\": \"aGk=\"}", "{\"a\": \"a$Gk=\"}",
                                           "{\"a\": 1}",           "{\"\": \"aGk=\"}" };

        cr_assert_eq(exec_files_decode(ok, &files, &n, &err), 0, "%s", err.msg);
        cr_assert_eq(n, 2);
        for (size_t i = 0; i < n; i++) {
                if (strcmp(files[i].path, "a.txt") == 0)
                        cr_expect(files[i].len == 2 && memcmp(files[i].data, "hi", 2) == 0);
                else
                        cr_expect(files[i].len == 3 && memcmp(files[i].data, "\0\1\2", 3) == 0);
        }
        exec_files_free(files, n);
        json_decref(ok);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_t *o = json_loads(bad[i], 0, NULL);
                cr_assert(o, "%s", bad[i]);
                cr_expect_eq(exec_files_decode(o, &files, &n, &err), -EINVAL, "%s", bad[i]);
                cr_expect_str_eq(err.field, "files");
                json_decref(o);
        }
}

Test(api, session_patch_body)
{
        static const struct {
                const char *body;
                int want;
                const char *field;
        } cases[] = {
                { "{\"timeout_s\": 5}", 0, NULL },
                { "{\"lifetime_s\": null}", 0, NULL },
                { "{\"lifetime_s\": 60, \"metadata\": {\"a\": null, \"b\": \"x\"}}", 0, NULL },
                { "{\"stop_after_s\": 10}", 0, NULL },
                { "{}", -EINVAL, "body" },
                { "", -EINVAL, "body" },
                { "{\"profile\": \"x\"}", -EINVAL, "profile" },
                { "{\"lifetime_s\": 0}", -EINVAL, "lifetime_s" },
                { "{\"lifetime_s\": 2592001}", -EINVAL, "lifetime_s" },
                { "{\"timeout_s\": null}", -EINVAL, "timeout_s" },
                { "{\"timeout_s\": 3601}", -EINVAL, "timeout_s" },
                { "{\"metadata\": {\"a b\": \"x\"}}", -EINVAL, "metadata" },
                { "{\"metadata\": {\"a\": 1}}", -EINVAL, "metadata" },
                { "{\"lifetime_s\": null, \"lifetime_s\": null}", -EINVAL, "body" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct body_error err = { { 0 } };
                struct session_patch_body b;
                json_t *root = NULL;
                int r = session_patch_body_parse(cases[i].body, strlen(cases[i].body), &root, &b,
                                                 &err);
                cr_expect_eq(r, cases[i].want, "%s: %d (%s)", cases[i].body, r, err.msg);
                if (r == 0)
                        json_decref(root);
                else if (cases[i].field)
                        cr_expect_str_eq(err.field, cases[i].field, "%s", cases[i].body);
        }
}

Test(api, session_patch_body_values)
{
        struct body_error err = { { 0 } };
        struct session_patch_body b;
        json_t *root = NULL;
        const char *text =
                "{\"lifetime_s\": null, \"timeout_s\": 2.5, \"metadata\": {\"k\": null}}";

        cr_assert_eq(session_patch_body_parse(text, strlen(text), &root, &b, &err), 0, "%s",
                     err.msg);
        cr_expect(b.has_lifetime && b.lifetime_s == 0);
        cr_expect(b.has_timeout && b.timeout_ms == 2500);
        cr_expect(!b.has_stop_after);
        cr_expect(json_is_null(json_object_get(b.metadata, "k")));
        json_decref(root);
}

Test(api, metadata_filter)
{
        struct body_error err = { { 0 } };
        json_t *f = NULL;

        cr_assert_eq(body_metadata_filter_add(&f, "team", "red", &err), 0);
        cr_assert_eq(body_metadata_filter_add(&f, "a.b-c_1", "x y", &err), 0);
        cr_expect_str_eq(json_string_value(json_object_get(f, "a.b-c_1")), "x y");
        cr_expect_eq(body_metadata_filter_add(&f, "team", "blue", &err), -EINVAL);
        cr_expect_str_eq(err.field, "metadata");
        cr_expect_eq(body_metadata_filter_add(&f, "bad key", "x", &err), -EINVAL);
        cr_expect_eq(body_metadata_filter_add(&f, "", "x", &err), -EINVAL);
        cr_expect_eq(body_metadata_filter_add(&f, "k", "\xff", &err), -EINVAL);
        json_decref(f);
}
