/* Unit tests of the Responses API's parts that need no endpoint and no sandbox: the checks of a
 * request and what goes upstream, the input items as Chat Completions messages, the citations,
 * logs and usage of a Response, and the SQLite store. */
#include "responses/responses-internal.h"
#include "responses/store.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static json_t *parse_json(const char *text)
{
        json_error_t jerr;
        json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

        cr_assert_not_null(v, "bad test JSON: %s: %s", jerr.text, text);
        return v;
}

/* Parses a request body; returns the errno, the plan or the error filled. */
/* The body of the last plan_of(): the plan borrows from it, so it lives until the next one,
 * or the end of the test (plans_done()). */
static json_t *last_body;

static int plan_of(const char *body, struct responses_plan *p, struct caller_tools_error *err)
{
        json_decref(last_body);
        last_body = parse_json(body);
        *p = (struct responses_plan){};
        *err = (struct caller_tools_error){};
        return responses_plan_parse(last_body, "default-model", p, err);
}

static void plans_done(void)
{
        json_decref(last_body);
        last_body = NULL;
}

Test(request, defaults_and_upstream_members, .fini = plans_done)
{
        struct responses_plan p;
        struct caller_tools_error err;

        cr_assert_eq(plan_of("{\"input\": \"hi\", \"max_output_tokens\": 5, \"temperature\": 0,"
                             " \"user\": \"u\", \"reasoning\": {\"effort\": \"high\"},"
                             " \"text\": {\"format\": {\"type\": \"json_object\"}}}",
                             &p, &err),
                     0, "%s: %s", err.param, err.msg);
        cr_assert_str_eq(p.model, "default-model");
        cr_assert(p.store && !p.stream && !p.code_interpreter && !p.include_outputs);
        cr_assert_eq(json_integer_value(json_object_get(p.upstream, "max_tokens")), 5);
        cr_assert_str_eq(json_string_value(json_object_get(p.upstream, "user")), "u");
        cr_assert_str_eq(json_string_value(json_object_get(p.upstream, "reasoning_effort")),
                         "high");
        cr_assert_str_eq(json_string_value(json_object_get(
                                 json_object_get(p.upstream, "response_format"), "type")),
                         "json_object");
        cr_assert_null(json_object_get(p.upstream, "input"));
        /* What the Response echoes, with OpenAI's defaults. */
        cr_assert_str_eq(json_string_value(json_object_get(p.echo, "tool_choice")), "auto");
        cr_assert_str_eq(json_string_value(json_object_get(p.echo, "truncation")), "disabled");
        cr_assert(json_is_true(json_object_get(p.echo, "parallel_tool_calls")));
        responses_plan_done(&p);
}

Test(request, tools_and_tool_choice_in_chat_shape, .fini = plans_done)
{
        struct responses_plan p;
        struct caller_tools_error err;
        json_t *fn, *choice;

        cr_assert_eq(plan_of("{\"input\": \"x\", \"include\": [\"code_interpreter_call.outputs\"],"
                             " \"tools\": [{\"type\": \"code_interpreter\", \"container\": "
                             "{\"type\": \"auto\", \"file_ids\": [\"file-1\"], \"memory_limit\":"
                             " \"4g\"}}, {\"type\": \"function\", \"name\": \"f\", "
                             "\"parameters\": {\"type\": \"object\"}, \"strict\": true}],"
                             " \"tool_choice\": {\"type\": \"allowed_tools\", \"mode\": "
                             "\"required\", \"tools\": [{\"type\": \"code_interpreter\"}, "
                             "{\"type\": \"function\", \"name\": \"f\"}]}}",
                             &p, &err),
                     0, "%s: %s", err.param, err.msg);
        cr_assert(p.code_interpreter && p.include_outputs);
        cr_assert_str_eq(p.container, "");
        cr_assert_str_eq(p.memory_limit, "4g");
        cr_assert_eq(json_array_size(p.file_ids), 1);
        cr_assert_str_eq(p.code_param, "tools[0]");
        fn = json_object_get(json_array_get(p.caller_tools, 0), "function");
        cr_assert_str_eq(json_string_value(json_object_get(fn, "name")), "f");
        cr_assert(json_is_true(json_object_get(fn, "strict")));
        choice = json_object_get(p.tool_choice, "allowed_tools");
        cr_assert_str_eq(json_string_value(json_object_get(choice, "mode")), "required");
        fn = json_object_get(json_array_get(json_object_get(choice, "tools"), 0), "function");
        cr_assert_str_eq(json_string_value(json_object_get(fn, "name")), RESPONSES_CODE_TOOL);
        responses_plan_done(&p);

        cr_assert_eq(plan_of("{\"input\": \"x\", \"tools\": [{\"type\": \"code_interpreter\","
                             " \"container\": \"cntr_abc\"}]}",
                             &p, &err),
                     0);
        cr_assert_str_eq(p.container, "cntr_abc");
        responses_plan_done(&p);
}

/* Requests refused with the parameter they name. */
Test(request, refusals_name_the_parameter, .fini = plans_done)
{
        static const struct {
                const char *body, *param, *words;
        } cases[] = {
                { "{\"input\": \"x\", \"tools\": [{\"type\": \"mcp\"}]}", "tools[0]", "'mcp'" },
                { "{\"input\": \"x\", \"tools\": [{\"type\": \"function\", \"name\": \"f\"}, "
                  "{\"type\": \"function\", \"name\": \"f\"}]}",
                  "tools[1]", "taken" },
                { "{\"input\": \"x\", \"tools\": [{\"type\": \"function\", \"name\": \"f\", "
                  "\"extra\": 1}]}",
                  "tools[0]", "extra" },
                { "{\"input\": \"x\", \"tool_choice\": \"sometimes\"}", "tool_choice", "auto" },
                { "{\"input\": \"x\", \"tool_choice\": {\"type\": \"allowed_tools\", \"mode\": "
                  "\"auto\", \"tools\": [{\"type\": \"web_search\"}]}}",
                  "tool_choice.tools[0]", "web_search" },
                { "{\"input\": \"x\", \"store\": \"yes\"}", "store", "boolean" },
                { "{\"input\": []}", "input", "empty" },
                { "{\"input\": \"x\", \"model\": \"\"}", "model", "non-empty" },
                { "{\"input\": \"x\", \"metadata\": {\"a\": \"1\", \"b\": \"2\", \"c\": \"3\", "
                  "\"d\": \"4\", \"e\": \"5\", \"f\": \"6\", \"g\": \"7\", \"h\": \"8\", \"i\": "
                  "\"9\", \"j\": \"10\", \"k\": \"11\", \"l\": \"12\", \"m\": \"13\", \"n\": "
                  "\"14\", \"o\": \"15\", \"p\": \"16\", \"q\": \"17\"}}",
                  "metadata", "16" },
                { "{\"input\": \"x\", \"truncation\": \"sometimes\"}", "truncation", "auto" },
                { "{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_schema\"}}}",
                  "text.format", "schema" },
                { "{\"input\": \"x\", \"moderation\": {}}", "moderation", "moderation" },
                { "{\"input\": \"x\", \"context_management\": [{}]}", "context_management",
                  "compact" },
                { "{\"input\": \"x\", \"max_tool_calls\": 0}", "max_tool_calls", "1 to 1000" },
                { "{\"input\": \"x\", \"tools\": [{\"type\": \"code_interpreter\", \"container\":"
                  " {\"type\": \"auto\", \"size\": 1}}]}",
                  "tools[0].container.size", "not supported" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                struct responses_plan p;
                struct caller_tools_error err;

                cr_assert_eq(plan_of(cases[i].body, &p, &err), -EINVAL, "accepted: %s",
                             cases[i].body);
                cr_assert_str_eq(err.param, cases[i].param, "%s: %s", cases[i].body, err.msg);
                cr_assert(strstr(err.msg, cases[i].words), "'%s' not in '%s'", cases[i].words,
                          err.msg);
        }
}

Test(request, no_model_anywhere_is_refused)
{
        json_t *b = parse_json("{\"input\": \"x\"}");
        struct responses_plan p = {};
        struct caller_tools_error err = {};

        cr_assert_eq(responses_plan_parse(b, NULL, &p, &err), -EINVAL);
        cr_assert_str_eq(err.param, "model");
        json_decref(b);
}

/* ---- input -------------------------------------------------------------------------------- */

static json_t *convert(const char *input, json_t **ret_items, struct responses_input_info *info,
                       int *ret_r, struct caller_tools_error *err)
{
        json_t *in = parse_json(input), *messages = json_array(), *items = json_array();

        *err = (struct caller_tools_error){};
        *ret_r = responses_input_convert(in, messages, items, info, err);
        json_decref(in);
        *ret_items = items;
        return messages;
}

Test(input, calls_join_one_assistant_message_and_results_follow)
{
        const char *input =
                "[{\"role\": \"user\", \"content\": \"go\"},"
                " {\"type\": \"message\", \"role\": \"assistant\", \"content\": [{\"type\": "
                "\"output_text\", \"text\": \"On it.\", \"annotations\": []}]},"
                " {\"type\": \"code_interpreter_call\", \"id\": \"ci_1\", \"code\": \"x=1\", "
                "\"container_id\": \"cntr_0123\", \"status\": \"completed\", \"outputs\": "
                "[{\"type\": \"logs\", \"logs\": \"ok\\n\"}, {\"type\": \"image\", \"url\": "
                "\"http://x\"}]},"
                " {\"type\": \"function_call\", \"call_id\": \"call_9\", \"name\": \"f\", "
                "\"arguments\": \"{}\"},"
                " {\"type\": \"function_call_output\", \"call_id\": \"call_9\", \"output\": "
                "\"done\"}]";
        struct responses_input_info info;
        struct caller_tools_error err;
        json_t *items, *m, *expected;
        int r;

        m = convert(input, &items, &info, &r, &err);
        cr_assert_eq(r, 0, "%s: %s", err.param, err.msg);
        expected = parse_json(
                "[{\"role\": \"user\", \"content\": \"go\"},"
                " {\"role\": \"assistant\", \"content\": \"On it.\", \"tool_calls\": ["
                "  {\"id\": \"ci_1\", \"type\": \"function\", \"function\": {\"name\": "
                "\"run_python\", \"arguments\": \"{\\\"code\\\":\\\"x=1\\\"}\"}},"
                "  {\"id\": \"call_9\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
                "\"arguments\": \"{}\"}}]},"
                " {\"role\": \"tool\", \"tool_call_id\": \"ci_1\", \"content\": \"ok\\n[an image, "
                "shown to the user]\\n\"},"
                " {\"role\": \"tool\", \"tool_call_id\": \"call_9\", \"content\": \"done\"}]");
        cr_assert(json_equal(m, expected), "got %s", json_dumps(m, JSON_INDENT(1)));
        cr_assert_str_eq(info.container, "cntr_0123");
        cr_assert_eq(json_array_size(info.answered), 1);
        cr_assert_str_eq(json_string_value(json_array_get(info.answered, 0)), "call_9");
        /* The items, listed with ids. */
        cr_assert_eq(json_array_size(items), 5);
        cr_assert(strncmp(json_string_value(json_object_get(json_array_get(items, 0), "id")),
                          "msg_", 4) == 0);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 2), "id")),
                         "ci_1");
        json_decref(expected);
        json_decref(m);
        json_decref(items);
        responses_input_info_done(&info);
}

Test(input, a_string_is_one_user_message_and_images_stay_parts)
{
        struct responses_input_info info;
        struct caller_tools_error err;
        json_t *items, *m, *c;
        int r;

        m = convert("\"hello\"", &items, &info, &r, &err);
        cr_assert_eq(r, 0);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(m, 0), "content")),
                         "hello");
        cr_assert_str_eq(
                json_string_value(json_object_get(
                        json_array_get(json_object_get(json_array_get(items, 0), "content"), 0),
                        "type")),
                "input_text");
        json_decref(m);
        json_decref(items);
        responses_input_info_done(&info);

        m = convert("[{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": "
                    "\"what is this\"}, {\"type\": \"input_image\", \"image_url\": "
                    "\"data:image/png;base64,AA==\", \"detail\": \"low\"}]}]",
                    &items, &info, &r, &err);
        cr_assert_eq(r, 0, "%s", err.msg);
        c = json_object_get(json_array_get(m, 0), "content");
        cr_assert_eq(json_array_size(c), 2);
        cr_assert_str_eq(json_string_value(json_object_get(
                                 json_object_get(json_array_get(c, 1), "image_url"), "detail")),
                         "low");
        json_decref(m);
        json_decref(items);
        responses_input_info_done(&info);
}

Test(input, refusals_name_the_item)
{
        static const struct {
                const char *input, *param;
        } cases[] = {
                { "[{\"type\": \"item_reference\", \"id\": \"x\"}]", "input[0]" },
                { "[{\"role\": \"user\", \"content\": \"a\"}, {\"type\": \"web_search_call\"}]",
                  "input[1]" },
                { "[{\"role\": \"assistant\", \"content\": [{\"type\": \"input_image\", "
                  "\"image_url\": \"x\"}]}]",
                  "input[0].content[0]" },
                { "[{\"role\": \"user\", \"content\": [{\"type\": \"input_image\", \"file_id\": "
                  "\"file-1\"}]}]",
                  "input[0].content[0]" },
                { "[{\"type\": \"function_call\", \"name\": \"f\"}]", "input[0]" },
                { "[{\"type\": \"code_interpreter_call\", \"id\": \"ci\"}]", "input[0]" },
                { "[3]", "input[0]" },
                { "[{\"content\": \"no role, no type\"}]", "input[0]" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                struct responses_input_info info;
                struct caller_tools_error err;
                json_t *items, *m;
                int r;

                m = convert(cases[i].input, &items, &info, &r, &err);
                cr_assert_eq(r, -EINVAL, "accepted: %s", cases[i].input);
                cr_assert_str_eq(err.param, cases[i].param, "%s: %s", cases[i].input, err.msg);
                json_decref(m);
                json_decref(items);
                responses_input_info_done(&info);
        }
}

/* ---- output ------------------------------------------------------------------------------ */

Test(output, citations_point_at_the_mention_in_characters)
{
        json_t *files = parse_json(
                "[{\"container_id\": \"cntr_1\", \"file_id\": \"cfile_1\", \"filename\": "
                "\"out.csv\", \"path\": \"/mnt/data/out.csv\"},"
                " {\"container_id\": \"cntr_1\", \"file_id\": \"cfile_2\", \"filename\": "
                "\"plot.png\", \"path\": \"/mnt/data/sub/plot.png\"},"
                " {\"container_id\": \"cntr_1\", \"file_id\": \"cfile_3\", \"filename\": "
                "\"quiet.txt\", \"path\": \"/mnt/data/quiet.txt\"}]");
        /* "à" is two bytes, one character. */
        const char *text = "Voilà: [csv](sandbox:/mnt/data/out.csv), see plot.png";
        json_t *a = responses_citations(text, files), *n;

        cr_assert_eq(json_array_size(a), 3);
        n = json_array_get(a, 0);
        cr_assert_str_eq(json_string_value(json_object_get(n, "type")), "container_file_citation");
        cr_assert_str_eq(json_string_value(json_object_get(n, "file_id")), "cfile_1");
        cr_assert_eq(json_integer_value(json_object_get(n, "start_index")), 13);
        cr_assert_eq(json_integer_value(json_object_get(n, "end_index")), 13 + 25);
        n = json_array_get(a, 1);
        cr_assert_eq(json_integer_value(json_object_get(n, "start_index")), 45);
        cr_assert_eq(json_integer_value(json_object_get(n, "end_index")), 53);
        /* Not mentioned: cited at the end. */
        n = json_array_get(a, 2);
        cr_assert_eq(json_integer_value(json_object_get(n, "start_index")), 53);
        cr_assert_eq(json_integer_value(json_object_get(n, "end_index")), 53);
        json_decref(a);
        json_decref(files);
}

Test(output, logs_and_usage)
{
        json_t *exec = parse_json("{\"stdout\": \"a\", \"stderr\": \"warn\\n\", \"result\": \"3\","
                                  " \"error\": {\"name\": \"E\", \"value\": \"v\", \"traceback\":"
                                  " \"Traceback...\\nE: v\"}}");
        json_t *u = parse_json("{\"prompt_tokens\": 7, \"completion_tokens\": 2, "
                               "\"prompt_tokens_details\": {\"cached_tokens\": 4}}");
        char *logs = responses_exec_logs(exec);
        json_t *usage = responses_usage(u), *none = responses_usage(NULL);

        cr_assert_str_eq(logs, "a\nwarn\n3\nTraceback...\nE: v\n");
        cr_assert_eq(json_integer_value(json_object_get(usage, "input_tokens")), 7);
        cr_assert_eq(json_integer_value(json_object_get(usage, "output_tokens")), 2);
        cr_assert_eq(json_integer_value(json_object_get(usage, "total_tokens")), 9);
        cr_assert_eq(json_integer_value(json_object_get(
                             json_object_get(usage, "input_tokens_details"), "cached_tokens")),
                     4);
        cr_assert_eq(json_integer_value(json_object_get(none, "total_tokens")), 0);
        free(logs);
        json_decref(exec);
        json_decref(u);
        json_decref(usage);
        json_decref(none);
}

Test(output, logs_carry_the_text_of_displays_in_order)
{
        /* An HTML display reads as its HTML (its text/plain is a default repr), a DataFrame as
         * its text table; an image and the cell's own value (main) are not logs. */
        json_t *exec = parse_json(
                "{\"stdout\": \"printed\\n\", \"stderr\": \"\", \"result\": \"7\", \"outputs\": ["
                "{\"data\": {\"text/plain\": \"<IPython.core.display.HTML object>\","
                " \"text/html\": \"<b>hi</b>\"}, \"main\": false},"
                "{\"data\": {\"text/plain\": \"   a\\n0  1\", \"text/html\": \"<table/>\"},"
                " \"main\": false},"
                "{\"data\": {\"image/png\": \"iVBO\", \"text/plain\": \"<Figure>\"}, \"main\": "
                "false},"
                "{\"data\": {\"text/plain\": \"7\", \"text/html\": \"<i>7</i>\"}, \"main\": "
                "true}]}");
        char *logs = responses_exec_logs(exec);

        cr_assert_str_eq(logs, "printed\n<b>hi</b>\n   a\n0  1\n7\n");
        free(logs);
        json_decref(exec);
}

Test(output, logs_put_displays_in_their_place_in_stdout)
{
        /* Offsets say how much of stdout came before each display; one that points inside a
         * UTF-8 character ("é" is 2 bytes: 3 is its second) moves back to the character's
         * start, one past the end goes to the end, and a display without one (a figure left
         * open at the end) follows stdout. */
        json_t *exec = parse_json("{\"stdout\": \"a\\n\u00e9b\\nc\\n\", \"outputs\": ["
                                  "{\"data\": {\"text/markdown\": \"**one**\"}, \"main\": false, "
                                  "\"stdout_offset\": 3},"
                                  "{\"data\": {\"text/plain\": \"two\"}, \"main\": false},"
                                  "{\"data\": {\"text/plain\": \"three\"}, \"main\": false, "
                                  "\"stdout_offset\": 99}]}");
        char *logs = responses_exec_logs(exec);

        cr_assert_str_eq(logs, "a\n**one**\n\u00e9b\nc\nthree\ntwo\n");
        free(logs);
        json_decref(exec);
}

/* ---- the store ---------------------------------------------------------------------------- */

Test(store, put_get_delete_and_survive_a_reopen)
{
        char dir[] = "/tmp/airlock-test-responses-XXXXXX";
        struct responses_store *st = NULL;
        struct airlock_error err = { { 0 } };
        json_t *resp = json_pack("{s:s}", "id", "resp_1"), *items = json_pack("[{s:s}]", "id", "m");
        json_t *state = json_pack("{s:[]}", "messages"), *got = NULL, *got_state = NULL;
        long long now = (long long) time(NULL);
        char path[128];

        cr_assert_not_null(mkdtemp(dir));
        cr_assert_eq(responses_store_open(dir, &st, &err), 0, "%s", err.msg);
        /* Opening prunes what is older than RESPONSES_KEEP_DAYS: this one is not. */
        cr_assert_eq(responses_store_put(st, "resp_1", now - 60, resp, items, state), 0);
        cr_assert_eq(responses_store_get(st, "resp_2", &got, NULL, NULL), -ENOENT);
        st = responses_store_free(st);

        cr_assert_eq(responses_store_open(dir, &st, &err), 0);
        cr_assert_eq(responses_store_get(st, "resp_1", &got, NULL, &got_state), 0);
        cr_assert(json_equal(got, resp) && json_equal(got_state, state));
        /* Older than the retention: pruned. */
        cr_assert_eq(responses_store_prune(st, now - 59), 1);
        cr_assert_eq(responses_store_get(st, "resp_1", NULL, NULL, NULL), -ENOENT);
        cr_assert_eq(responses_store_put(st, "resp_3", now, resp, items, state), 0);
        cr_assert_eq(responses_store_delete(st, "resp_3"), 0);
        cr_assert_eq(responses_store_delete(st, "resp_3"), -ENOENT);
        responses_store_free(st);

        (void) snprintf(path, sizeof(path), "%s/%s", dir, RESPONSES_STORE_FILE);
        cr_assert_eq(access(path, R_OK), 0);
        for (const char *suffix = ""; suffix; suffix = *suffix ? NULL : "-wal") {
                char p[160];
                (void) snprintf(p, sizeof(p), "%s%s", path, suffix);
                (void) unlink(p);
        }
        (void) snprintf(path, sizeof(path), "%s/%s-shm", dir, RESPONSES_STORE_FILE);
        (void) unlink(path);
        cr_assert_eq(rmdir(dir), 0);
        json_decref(resp);
        json_decref(items);
        json_decref(state);
        json_decref(got);
        json_decref(got_state);
}

Test(store, a_row_over_the_limit_is_refused)
{
        struct responses_store *st = NULL;
        struct airlock_error err = { { 0 } };
        char *big = malloc(RESPONSES_STORE_ROW_MAX + 1);
        json_t *resp;

        cr_assert_not_null(big);
        memset(big, 'x', RESPONSES_STORE_ROW_MAX);
        big[RESPONSES_STORE_ROW_MAX] = '\0';
        resp = json_pack("{s:s}", "text", big);
        cr_assert_eq(responses_store_open(NULL, &st, &err), 0);
        cr_assert_eq(responses_store_put(st, "resp_big", 1, resp, NULL, NULL), -E2BIG);
        responses_store_free(st);
        json_decref(resp);
        free(big);
}
