/* Unit tests of the chat module's parts that need no endpoint and no sandbox: the suspended-turn
 * store (bounds, expiry, use-once, threads) and the checks of the caller's function tools. */
#include "chat/caller-tools.h"
#include "chat/suspend.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

static json_t *ids_of(const char *a, const char *b)
{
        return b ? json_pack("[s, s]", a, b) : json_pack("[s]", a);
}

static struct suspend_store *store(size_t max_turns, uint64_t ttl_ms, uint64_t bytes_max)
{
        struct suspend_store *s = NULL;
        struct suspend_limits lim = { .max_turns = max_turns,
                                      .ttl_ms = ttl_ms,
                                      .bytes_max = bytes_max };

        cr_assert_eq(suspend_store_new(&lim, &s), 0);
        return s;
}

Test(suspend, a_turn_is_found_by_each_id_and_taken_once)
{
        struct suspend_store *s = store(0, 0, 0);
        json_t *ids = ids_of("call_a", "call_b"), *payload = json_pack("{s:i}", "n", 1), *got;

        cr_assert_eq(suspend_store_put(s, ids, payload), 0);
        got = suspend_store_get(s, "call_b");
        cr_assert_eq(got, payload);
        json_decref(got);
        cr_assert_null(suspend_store_get(s, "call_c"));
        cr_assert_eq(suspend_store_take(s, "call_a", payload, &got), 0);
        cr_assert_eq(got, payload);
        json_decref(got);
        /* Taking by one id forgets the others too. */
        cr_assert_null(suspend_store_get(s, "call_b"));
        cr_assert_eq(suspend_store_take(s, "call_b", NULL, NULL), -ENOENT);
        cr_assert_eq(suspend_store_count(s), 0);
        json_decref(ids);
        json_decref(payload);
        suspend_store_free(s);
}

Test(suspend, take_checks_the_payload_it_was_shown)
{
        struct suspend_store *s = store(0, 0, 0);
        json_t *ids = ids_of("mcpr_1", NULL), *payload = json_object(), *other = json_object();

        cr_assert_eq(suspend_store_put(s, ids, payload), 0);
        cr_assert_eq(suspend_store_take(s, "mcpr_1", other, NULL), -ENOENT);
        cr_assert_eq(suspend_store_count(s), 1);
        cr_assert_eq(suspend_store_take(s, "mcpr_1", payload, NULL), 0);
        json_decref(ids);
        json_decref(payload);
        json_decref(other);
        suspend_store_free(s);
}

Test(suspend, refuses_bad_and_duplicate_ids)
{
        struct suspend_store *s = store(0, 0, 0);
        json_t *payload = json_object(), *ids;
        char longid[SUSPEND_ID_MAX + 1];

        ids = json_array();
        cr_assert_eq(suspend_store_put(s, ids, payload), -EINVAL);
        json_decref(ids);
        ids = json_pack("[s]", "");
        cr_assert_eq(suspend_store_put(s, ids, payload), -EINVAL);
        json_decref(ids);
        memset(longid, 'x', SUSPEND_ID_MAX);
        longid[SUSPEND_ID_MAX] = '\0';
        ids = json_pack("[s]", longid);
        cr_assert_eq(suspend_store_put(s, ids, payload), -EINVAL);
        json_decref(ids);
        ids = ids_of("call_x", "call_x");
        cr_assert_eq(suspend_store_put(s, ids, payload), -EEXIST);
        json_decref(ids);
        ids = ids_of("call_x", NULL);
        cr_assert_eq(suspend_store_put(s, ids, payload), 0);
        cr_assert_eq(suspend_store_put(s, ids, payload), -EEXIST);
        cr_assert_eq(suspend_store_count(s), 1);
        json_decref(ids);
        json_decref(payload);
        suspend_store_free(s);
}

Test(suspend, the_oldest_turn_makes_room)
{
        struct suspend_store *s = store(3, 0, 0);
        char id[16];

        for (int i = 0; i < 5; i++) {
                json_t *ids, *p = json_pack("{s:i}", "i", i);

                (void) snprintf(id, sizeof(id), "call_%d", i);
                ids = ids_of(id, NULL);
                cr_assert_eq(suspend_store_put(s, ids, p), 0);
                json_decref(ids);
                json_decref(p);
        }
        cr_assert_eq(suspend_store_count(s), 3);
        cr_assert_null(suspend_store_get(s, "call_0"));
        cr_assert_null(suspend_store_get(s, "call_1"));
        for (int i = 2; i < 5; i++) {
                json_t *p;

                (void) snprintf(id, sizeof(id), "call_%d", i);
                p = suspend_store_get(s, id);
                cr_assert_not_null(p, "%s was evicted", id);
                cr_assert_eq(json_integer_value(json_object_get(p, "i")), i);
                json_decref(p);
        }
        suspend_store_free(s);
}

Test(suspend, bytes_are_bounded)
{
        struct suspend_store *s = store(0, 0, 100);
        /* {"t":"<50 characters>"} is 58 bytes of compact JSON. */
        json_t *small =
                json_pack("{s:s}", "t", "01234567890123456789012345678901234567890123456789");
        json_t *big;
        char text[200];
        json_t *ids;

        memset(text, 'x', sizeof(text) - 1);
        text[sizeof(text) - 1] = '\0';
        big = json_pack("{s:s}", "t", text);
        ids = ids_of("call_big", NULL);
        cr_assert_eq(suspend_store_put(s, ids, big), -E2BIG);
        json_decref(ids);
        ids = ids_of("call_1", NULL);
        cr_assert_eq(suspend_store_put(s, ids, small), 0);
        json_decref(ids);
        /* Two of 58 bytes do not fit in 100: the first goes. */
        ids = ids_of("call_2", NULL);
        cr_assert_eq(suspend_store_put(s, ids, small), 0);
        json_decref(ids);
        cr_assert_null(suspend_store_get(s, "call_1"));
        cr_assert_eq(suspend_store_count(s), 1);
        json_decref(small);
        json_decref(big);
        suspend_store_free(s);
}

Test(suspend, turns_expire)
{
        struct suspend_store *s = store(0, 20, 0);
        json_t *ids = ids_of("call_old", NULL), *p = json_object();
        struct timespec ts = { .tv_nsec = 40 * 1000 * 1000 };

        cr_assert_eq(suspend_store_put(s, ids, p), 0);
        cr_assert_eq(suspend_store_count(s), 1);
        (void) nanosleep(&ts, NULL);
        cr_assert_null(suspend_store_get(s, "call_old"));
        cr_assert_eq(suspend_store_take(s, "call_old", NULL, NULL), -ENOENT);
        cr_assert_eq(suspend_store_count(s), 0);
        json_decref(ids);
        json_decref(p);
        suspend_store_free(s);
}

struct race {
        struct suspend_store *s;
        int won;
};

static void *take_it(void *arg)
{
        struct race *r = arg;

        if (suspend_store_take(r->s, "call_race", NULL, NULL) == 0)
                __atomic_add_fetch(&r->won, 1, __ATOMIC_SEQ_CST);
        return NULL;
}

Test(suspend, one_of_many_threads_takes_a_turn)
{
        for (int round = 0; round < 50; round++) {
                struct race r = { .s = store(0, 0, 0) };
                json_t *ids = ids_of("call_race", NULL), *p = json_object();
                pthread_t t[8];

                cr_assert_eq(suspend_store_put(r.s, ids, p), 0);
                for (size_t i = 0; i < 8; i++)
                        cr_assert_eq(pthread_create(&t[i], NULL, take_it, &r), 0);
                for (size_t i = 0; i < 8; i++)
                        pthread_join(t[i], NULL);
                cr_assert_eq(r.won, 1);
                json_decref(ids);
                json_decref(p);
                suspend_store_free(r.s);
        }
}

Test(suspend, ids_are_random_hex)
{
        char a[64], b[64];

        cr_assert_eq(suspend_make_id("call_", a, sizeof(a)), 0);
        cr_assert_eq(suspend_make_id("call_", b, sizeof(b)), 0);
        cr_assert_eq(strlen(a), 5 + 24);
        cr_assert_eq(strncmp(a, "call_", 5), 0);
        cr_assert_eq(strspn(a + 5, "0123456789abcdef"), 24);
        cr_assert_str_neq(a, b);
        cr_assert_eq(suspend_make_id("mcpr_", a, 29), -ENOBUFS);
}

/* ---- caller tools ---------------------------------------------------------------------- */

static json_t *declared(void)
{
        return json_pack("[{s:s, s:{s:s}}]", "type", "function", "function", "name", "run_python");
}

static int check(const char *tools_json, struct caller_tools_error *err)
{
        json_t *tools = json_loads(tools_json, 0, NULL), *d = declared();
        int r;

        cr_assert_not_null(tools, "bad test JSON: %s", tools_json);
        r = caller_tools_check(tools, d, err);
        json_decref(tools);
        json_decref(d);
        return r;
}

Test(caller_tools, accepts_function_tools)
{
        struct caller_tools_error err = {};

        cr_assert_eq(check("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                           "\"description\": \"d\", \"parameters\": {\"type\": \"object\"}, "
                           "\"strict\": true}}, {\"type\": \"function\", \"function\": "
                           "{\"name\": \"a-b_9\"}}]",
                           &err),
                     0, "%s", err.msg);
        cr_assert_eq(check("[]", &err), 0);
        cr_assert_eq(caller_tools_check(NULL, NULL, &err), 0);
}

Test(caller_tools, refuses_what_it_cannot_pass_through)
{
        static const struct {
                const char *tools, *param, *words;
        } cases[] = {
                { "{}", "tools", "array" },
                { "[1]", "tools[0]", "must be an object" },
                { "[{\"type\": \"custom\", \"name\": \"x\"}]", "tools[0]", "'custom'" },
                { "[{\"function\": {\"name\": \"x\"}}]", "tools[0]", "no 'type'" },
                { "[{\"type\": \"function\", \"function\": {}}]", "tools[0]", "name" },
                { "[{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]", "tools[0]",
                  "name" },
                { "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"strict\": 1}}]",
                  "tools[0]", "strict" },
                { "[{\"type\": \"function\", \"function\": {\"name\": \"run_python\"}}]",
                  "tools[0]", "run_python" },
                { "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": "
                  "\"function\", \"function\": {\"name\": \"f\"}}]",
                  "tools[1]", "twice" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct caller_tools_error err = {};

                cr_assert_eq(check(cases[i].tools, &err), -EINVAL, "%s", cases[i].tools);
                cr_assert_str_eq(err.param, cases[i].param, "%s", cases[i].tools);
                cr_assert_not_null(strstr(err.msg, cases[i].words), "%s: %s", cases[i].tools,
                                   err.msg);
        }
}

Test(caller_tools, tool_choice_names_a_declared_function)
{
        json_t *tools = json_pack("[{s:s, s:{s:s}}]", "type", "function", "function", "name",
                                  "get_weather");
        json_t *d = declared();
        struct caller_tools_error err = {};
        static const char *const good[] = {
                "\"auto\"",
                "\"none\"",
                "\"required\"",
                "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}",
                "{\"type\": \"function\", \"function\": {\"name\": \"run_python\"}}",
                "{\"type\": \"allowed_tools\", \"allowed_tools\": {\"mode\": \"auto\", \"tools\": "
                "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}]}}",
        };
        static const char *const bad[] = {
                "\"sometimes\"",
                "3",
                "{\"type\": \"function\", \"function\": {\"name\": \"nope\"}}",
                "{\"type\": \"custom\", \"custom\": {\"name\": \"get_weather\"}}",
                "{\"type\": \"allowed_tools\", \"allowed_tools\": {\"mode\": \"auto\", \"tools\": "
                "[{\"type\": \"function\", \"function\": {\"name\": \"nope\"}}]}}",
        };

        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                json_t *c = json_loads(good[i], JSON_DECODE_ANY, NULL);

                cr_assert_eq(caller_tool_choice_check(c, tools, d, &err), 0, "%s: %s", good[i],
                             err.msg);
                json_decref(c);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_t *c = json_loads(bad[i], JSON_DECODE_ANY, NULL);

                cr_assert_eq(caller_tool_choice_check(c, tools, d, &err), -EINVAL, "%s", bad[i]);
                cr_assert_eq(strncmp(err.param, "tool_choice", 11), 0, "%s", err.param);
                json_decref(c);
        }
        json_decref(tools);
        json_decref(d);
}

Test(caller_tools, only_auto_and_none_are_free)
{
        json_t *req = json_string("required"), *none = json_string("none");
        json_t *forced = json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", "f");

        cr_assert(caller_tool_choice_is_free(NULL));
        cr_assert(caller_tool_choice_is_free(none));
        cr_assert_not(caller_tool_choice_is_free(req));
        cr_assert_not(caller_tool_choice_is_free(forced));
        json_decref(req);
        json_decref(none);
        json_decref(forced);
}
