/* E2B compatibility's pure half and its token store: the id and path mappings, the Connect
 * envelope codec, the code interpreter's events, and tokens that a second store on the same
 * directory (a restarted daemon) still accepts. */
#include "e2b/e2b.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SID "s-0123456789abcdef01234567"

Test(e2b, ids_round_trip)
{
        char id[E2B_SANDBOX_ID_MAX + 1], back[E2B_SESSION_ID_MAX + 1];

        cr_assert_eq(e2b_sandbox_id(SID, id), 0);
        cr_assert_str_eq(id, "0123456789abcdef01234567");
        cr_assert_eq(e2b_session_id(id, back), 0);
        cr_assert_str_eq(back, SID);
        /* An older API's "<sandboxID>-<clientID>" names the same session. */
        cr_assert_eq(e2b_session_id("0123456789abcdef01234567-6532622b", back), 0);
        cr_assert_str_eq(back, SID);
}

Test(e2b, ids_refuse_anything_else)
{
        char id[E2B_SANDBOX_ID_MAX + 1], s[E2B_SESSION_ID_MAX + 1];

        cr_assert_eq(e2b_sandbox_id("0123456789abcdef01234567", id), -EINVAL);
        cr_assert_eq(e2b_sandbox_id("s-0123456789ABCDEF01234567", id), -EINVAL);
        cr_assert_eq(e2b_session_id("", s), -EINVAL);
        cr_assert_eq(e2b_session_id("0123456789abcdef0123456", s), -EINVAL);
        cr_assert_eq(e2b_session_id("0123456789abcdef012345678", s), -EINVAL);
        cr_assert_eq(e2b_session_id("s-0123456789abcdef01234567", s), -EINVAL);
        cr_assert_eq(e2b_session_id("../../v1/sessions/x/abcdef0", s), -EINVAL);
        cr_assert_eq(e2b_session_id("0123456789abcdeg01234567", s), -EINVAL);
}

/* With nodes, a sandboxID carries its node; a client's suffix is still dropped. */
Test(e2b, ids_carry_the_node)
{
        static const struct node_peer peers[] = { { "airlock-1", "h:1" }, { "n2", "h:2" } };
        char id[E2B_SANDBOX_ID_MAX + 1], back[E2B_SESSION_ID_MAX + 1];

        cr_assert_eq(node_set_self("airlock-0"), 0);
        cr_assert_eq(node_set_peers(peers, 2), 0);
        cr_assert_eq(e2b_sandbox_id(SID "-airlock-0", id), 0);
        cr_assert_str_eq(id, "0123456789abcdef01234567-airlock-0");
        cr_assert_eq(e2b_session_id(id, back), 0);
        cr_assert_str_eq(back, SID "-airlock-0");
        cr_assert_eq(e2b_session_id("0123456789abcdef01234567-airlock-1-6532622b", back), 0);
        cr_assert_str_eq(back, SID "-airlock-1");
        cr_assert_eq(e2b_session_id("0123456789abcdef01234567-n2", back), 0);
        cr_assert_str_eq(back, SID "-n2");
        /* Not a node here: the client's (and an id made before --node keeps working). */
        cr_assert_eq(e2b_session_id("0123456789abcdef01234567-6532622b", back), 0);
        cr_assert_str_eq(back, SID);
        cr_assert_eq(e2b_sandbox_id(SID "-Bad", id), -EINVAL);
        cr_assert_eq(e2b_sandbox_id(SID "-", id), -EINVAL);
        cr_assert_eq(node_set_peers(NULL, 0), 0);
        cr_assert_eq(node_set_self(NULL), 0);
}

Test(e2b, paths_map_home_to_work)
{
        static const char *const cases[][2] = {
                { "/home/user/a/b.txt", "a/b.txt" },
                { "/home/user", "" },
                { "/home/user/", "" },
                { "/work/x", "x" },
                { "/work", "" },
                { "x/y", "x/y" },
                { "", "" },
                { "~/notes.md", "notes.md" },
                { "./a//b/./c", "a/b/c" },
                { "~", "" },
        };
        char out[256];
        const char *why = NULL;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                cr_assert_eq(e2b_work_path(cases[i][0], out, sizeof(out), &why), 0, "%s",
                             cases[i][0]);
                cr_assert_str_eq(out, cases[i][1], "%s", cases[i][0]);
        }
}

Test(e2b, paths_outside_home_are_refused)
{
        static const char *const bad[] = { "/etc/passwd", "/home/userx/a", "/home/user/../x",
                                           "a/../../etc", "/tmp/x",        "/workspace/a",
                                           ".." };
        char out[256];
        const char *why = NULL;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                why = NULL;
                cr_assert_eq(e2b_work_path(bad[i], out, sizeof(out), &why), -EINVAL, "%s", bad[i]);
                cr_assert_not_null(why);
        }
        cr_assert_eq(e2b_work_path("/home/user/abcdef", out, 4, &why), -E2BIG);
}

Test(e2b, server_errors_take_e2b_shapes_under_e2b_only)
{
        bool connect = true;

        cr_assert(e2b_path_is_e2b("/e2b/api/v2/sandboxes", &connect));
        cr_assert_not(connect);
        cr_assert(e2b_path_is_e2b("/e2b/sandbox/execute", &connect));
        cr_assert_not(connect);
        cr_assert(e2b_path_is_e2b("/e2b/sandbox/filesystem.Filesystem/Stat", &connect));
        cr_assert(connect);
        cr_assert(e2b_path_is_e2b("/e2b/sandbox/process.Process/Start", NULL));
        cr_assert(e2b_path_is_e2b("/e2b/sandbox/a.b/", &connect));
        cr_assert_not(connect, "a Connect path names a method");
        cr_assert_not(e2b_path_is_e2b("/e2b", NULL));
        cr_assert_not(e2b_path_is_e2b("/e2bx/api", NULL));
        cr_assert_not(e2b_path_is_e2b("/v1/sessions", NULL));
        cr_assert_str_eq(e2b_connect_code_of_status(413), "resource_exhausted");
        cr_assert_str_eq(e2b_connect_code_of_status(401), "unauthenticated");
        cr_assert_str_eq(e2b_connect_code_of_status(503), "unavailable");
        cr_assert_str_eq(e2b_connect_code_of_status(405), "unimplemented");
        cr_assert_str_eq(e2b_connect_code_of_status(418), "unknown");
        cr_assert_str_eq(e2b_connect_code_of_status(502), "internal");
}

Test(e2b, templates_name_profiles)
{
        cr_assert_str_eq(e2b_template_profile("code-interpreter-v1"), "default");
        cr_assert_str_eq(e2b_template_profile("base"), "default");
        cr_assert_str_eq(e2b_template_profile(NULL), "default");
        cr_assert_str_eq(e2b_template_profile("minimal"), "minimal");
}

Test(e2b, envelope_round_trip)
{
        char *buf = NULL;
        size_t len = 0, used, n;
        const char *msg;
        unsigned flags;

        cr_assert_eq(e2b_envelope_append(&buf, &len, 0, "{\"a\":1}", 7), 0);
        cr_assert_eq(e2b_envelope_append(&buf, &len, E2B_ENVELOPE_END_STREAM, "{}", 2), 0);
        cr_assert_eq(len, 5 + 7 + 5 + 2);
        cr_assert_eq((unsigned char) buf[0], 0);
        cr_assert_eq((unsigned char) buf[4], 7);

        cr_assert_eq(e2b_envelope_decode(buf, len, &flags, &msg, &n, &used), 0);
        cr_assert_eq(flags, 0);
        cr_assert_eq(n, 7);
        cr_assert(memcmp(msg, "{\"a\":1}", 7) == 0);
        cr_assert_eq(used, 12);
        cr_assert_eq(e2b_envelope_decode(buf + used, len - used, &flags, &msg, &n, &used), 0);
        cr_assert_eq(flags, E2B_ENVELOPE_END_STREAM);
        cr_assert_eq(n, 2);
        free(buf);
}

Test(e2b, envelope_refuses_short_big_and_compressed)
{
        const char *msg;
        size_t n, used;
        unsigned flags;

        cr_assert_eq(e2b_envelope_decode("\0\0\0", 3, &flags, &msg, &n, &used), -EAGAIN);
        cr_assert_eq(e2b_envelope_decode("\0\0\0\0\x09{}", 7, &flags, &msg, &n, &used), -EAGAIN);
        cr_assert_eq(e2b_envelope_decode("\0\x7f\0\0\0", 5, &flags, &msg, &n, &used), -E2BIG);
        cr_assert_eq(e2b_envelope_decode("\x01\0\0\0\x02{}", 7, &flags, &msg, &n, &used),
                     -EOPNOTSUPP);
}

Test(e2b, execution_events)
{
        json_t *result = json_loads(
                "{\"result\": \"42\", \"execution_count\": 3,"
                " \"outputs\": [{\"data\": {\"image/png\": \"iVBO\", \"text/plain\": \"<Figure>\","
                " \"application/x-custom\": \"c\"}, \"main\": false}],"
                " \"error\": {\"name\": \"ZeroDivisionError\", \"value\": \"division by zero\","
                " \"traceback\": \"Traceback...\"}}",
                0, NULL);
        json_t *events = e2b_execution_events(result, 0), *ev;

        cr_assert_not_null(events);
        cr_assert_eq(json_array_size(events), 5);
        ev = json_array_get(events, 0);
        cr_assert_str_eq(json_string_value(json_object_get(ev, "type")), "result");
        cr_assert_str_eq(json_string_value(json_object_get(ev, "png")), "iVBO");
        cr_assert_str_eq(json_string_value(json_object_get(ev, "text")), "<Figure>");
        cr_assert_str_eq(json_string_value(json_object_get(ev, "application/x-custom")), "c");
        cr_assert(json_is_false(json_object_get(ev, "is_main_result")));
        ev = json_array_get(events, 1);
        cr_assert_str_eq(json_string_value(json_object_get(ev, "text")), "42");
        cr_assert(json_is_true(json_object_get(ev, "is_main_result")));
        ev = json_array_get(events, 2);
        cr_assert_str_eq(json_string_value(json_object_get(ev, "type")), "error");
        cr_assert_str_eq(json_string_value(json_object_get(ev, "name")), "ZeroDivisionError");
        cr_assert_str_eq(json_string_value(json_object_get(ev, "traceback")), "Traceback...");
        ev = json_array_get(events, 3);
        cr_assert_eq(json_integer_value(json_object_get(ev, "execution_count")), 3);
        ev = json_array_get(events, 4);
        cr_assert_str_eq(json_string_value(json_object_get(ev, "type")), "end_of_execution");
        json_decref(events);
        json_decref(result);
}

Test(e2b, chart_data_json_and_extra_as_the_sdk_parses_them)
{
        json_t *data =
                json_pack("{s:s, s:s, s:s, s:s, s:s}", "text/plain", "<Figure>", E2B_CHART_MIME,
                          "{\"type\":\"line\",\"elements\":[]}", E2B_DATA_MIME, "{\"a\":[1,2]}",
                          "application/json", "{\"k\":[true]}", "application/x-custom", "c");
        json_t *ev = e2b_result_event(data, true), *bad;

        cr_assert_not_null(ev);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ev, "chart"), "type")),
                         "line");
        cr_assert_eq(json_array_size(json_object_get(json_object_get(ev, "data"), "a")), 2);
        cr_assert(
                json_is_true(json_array_get(json_object_get(json_object_get(ev, "json"), "k"), 0)));
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ev, "extra"),
                                                           "application/x-custom")),
                         "c");
        cr_assert_str_eq(json_string_value(json_object_get(ev, "application/x-custom")), "c");
        cr_assert_null(json_object_get(ev, E2B_CHART_MIME));
        cr_assert(json_is_true(json_object_get(ev, "is_main_result")));
        json_decref(ev);

        /* Not JSON: no chart; application/json that is not JSON stays text. */
        bad = json_pack("{s:s, s:s}", E2B_CHART_MIME, "{nope", "application/json", "nope");
        ev = e2b_result_event(bad, false);
        cr_assert_null(json_object_get(ev, "chart"));
        cr_assert_str_eq(json_string_value(json_object_get(ev, "json")), "nope");
        cr_assert_eq(json_object_size(json_object_get(ev, "extra")), 0);
        json_decref(ev);
        json_decref(bad);
        json_decref(data);
}

Test(e2b, text_loses_single_quotes_as_e2bs_server_strips_them)
{
        json_t *result = json_pack("{s:s, s:[], s:n, s:i}", "result", "'/home/user'", "outputs",
                                   "error", "execution_count", 1);
        json_t *events = e2b_execution_events(result, 0), *ev;
        const char *cases[][2] = {
                { "'ab'", "ab" },           { "''", "" },  { "'", "'" }, { "\"it's\"", "\"it's\"" },
                { "'a' + 'b'", "a' + 'b" }, { "42", "42" }
        };

        cr_assert_not_null(events);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(events, 0), "text")),
                         "/home/user");
        json_decref(events);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                json_t *data =
                        json_pack("{s:s, s:s}", "text/plain", cases[i][0], "text/html", "'kept'");
                ev = e2b_result_event(data, true);
                cr_assert_str_eq(json_string_value(json_object_get(ev, "text")), cases[i][1], "%s",
                                 cases[i][0]);
                cr_assert_str_eq(json_string_value(json_object_get(ev, "html")), "'kept'");
                json_decref(ev);
                json_decref(data);
        }
        json_decref(result);
}

Test(e2b, connect_codes_and_base64)
{
        char *b;

        cr_assert_eq(e2b_connect_http_status("not_found"), 404);
        cr_assert_eq(e2b_connect_http_status("unimplemented"), 501);
        cr_assert_eq(e2b_connect_http_status("nonsense"), 500);
        cr_assert_str_eq(e2b_connect_code(-ENOENT), "not_found");
        cr_assert_str_eq(e2b_connect_code(-EOPNOTSUPP), "unimplemented");
        b = e2b_base64_encode("hello\n", 6);
        cr_assert_str_eq(b, "aGVsbG8K");
        free(b);
        b = e2b_base64_encode("ab", 2);
        cr_assert_str_eq(b, "YWI=");
        free(b);
}

Test(e2b, tokens_survive_a_new_store_and_compare_exactly)
{
        char dir[] = "/tmp/airlock-test-e2b-XXXXXX", path[64];
        struct airlock_error err = { { 0 } };
        char token[E2B_TOKEN_LEN + 1], again[E2B_TOKEN_LEN + 1], tmpl[64], wrong[E2B_TOKEN_LEN + 1];
        struct e2b *e = NULL;

        cr_assert_not_null(mkdtemp(dir));
        cr_assert_eq(e2b_new(dir, &e, &err), 0, "%s", err.msg);
        cr_assert_eq(e2b_token_check(e, SID, "x"), -ENOENT);
        cr_assert_eq(e2b_token_issue(e, SID, "code-interpreter-v1", token, tmpl), 0);
        cr_assert_eq(strlen(token), E2B_TOKEN_LEN);
        cr_assert_str_eq(tmpl, "code-interpreter-v1");
        cr_assert_eq(e2b_token_check(e, SID, token), 0);
        memcpy(wrong, token, sizeof(wrong));
        wrong[E2B_TOKEN_LEN - 1] ^= 1;
        cr_assert_eq(e2b_token_check(e, SID, wrong), -EACCES);
        cr_assert_eq(e2b_token_check(e, SID, NULL), -EACCES);
        cr_assert_eq(e2b_token_check(e, SID, ""), -EACCES);
        e = e2b_free(e);

        /* A restarted daemon: the same token for the same session, not a new one. */
        cr_assert_eq(e2b_new(dir, &e, &err), 0, "%s", err.msg);
        cr_assert_eq(e2b_token_issue(e, SID, "base", again, tmpl), 0);
        cr_assert_str_eq(again, token);
        cr_assert_str_eq(tmpl, "code-interpreter-v1");
        e2b_forget(e, SID);
        cr_assert_eq(e2b_token_check(e, SID, token), -ENOENT);
        e2b_free(e);
        (void) snprintf(path, sizeof(path), "rm -rf '%s'", dir);
        cr_assert_eq(system(path), 0);
}

Test(e2b, contexts)
{
        struct airlock_error err = { { 0 } };
        struct e2b_context c, got;
        struct e2b *e = NULL;
        json_t *list;

        cr_assert_eq(e2b_new(NULL, &e, &err), 0);
        cr_assert_eq(e2b_context_add(e, SID, "bash", "/home/user", &c), 0);
        cr_assert_eq(e2b_context_get(e, SID, c.id, &got), 0);
        cr_assert_str_eq(got.language, "bash");
        cr_assert_eq(e2b_context_get(e, "s-ffffffffffffffffffffffff", c.id, &got), -ENOENT);
        list = e2b_context_list(e, SID);
        cr_assert_eq(json_array_size(list), 1);
        json_decref(list);
        for (int i = 1; i < E2B_CONTEXTS_MAX; i++)
                cr_assert_eq(e2b_context_add(e, SID, "python", "/home/user", &got), 0);
        cr_assert_eq(e2b_context_add(e, SID, "python", "/home/user", &got), -EUSERS);
        cr_assert_eq(e2b_context_remove(e, SID, c.id), 0);
        cr_assert_eq(e2b_context_remove(e, SID, c.id), -ENOENT);
        e2b_free(e);
}
