/* Unit tests for src/hub's configuration: the mcpServers file is read strictly (an unknown or
 * mistyped member is refused with its path), both transports and the policy members parse,
 * and Code Mode's Python names are valid identifiers. Connections are tested end to end
 * (tests/e2e/test_hub.py), with real servers. */
#include "hub/hub-internal.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse(const char *text, struct hub_config **ret, struct airlock_error *err)
{
        json_error_t jerr;
        json_t *root = json_loads(text, 0, &jerr);
        int r;

        cr_assert(root, "test JSON does not parse: %s", jerr.text);
        r = hub_config_parse(root, "test.json", ret, err);
        json_decref(root);
        return r;
}

static void assert_refused(const char *text, const char *needle)
{
        struct airlock_error err = { { 0 } };
        struct hub_config *cfg = NULL;

        cr_assert_eq(parse(text, &cfg, &err), -EINVAL, "accepted: %s", text);
        cr_assert_null(cfg);
        cr_assert(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
        cr_assert(strncmp(err.msg, "test.json: ", 11) == 0, "message '%s' names no file", err.msg);
}

Test(hub_config, stdio_and_http_servers)
{
        struct airlock_error err = { { 0 } };
        struct hub_config *cfg = NULL;

        cr_assert_eq(parse("{\"mcpServers\": {"
                           " \"crm\": {\"command\": \"python3\", \"args\": [\"s.py\", \"-v\"],"
                           "  \"env\": {\"DB\": \"/x\"}, \"cwd\": \"/tmp\","
                           "  \"allowed_tools\": [\"a\", \"b\"], \"timeout_ms\": 5000},"
                           " \"lake\": {\"url\": \"http://127.0.0.1:9/mcp\","
                           "  \"headers\": {\"Authorization\": \"Bearer k\"}, \"type\": \"http\","
                           "  \"require_approval\": {\"never\": {\"tool_names\": [\"list\"]}}}}}",
                           &cfg, &err),
                     0, "%s", err.msg);
        cr_assert_eq(cfg->n_servers, 2);
        cr_assert_str_eq(cfg->servers[0].name, "crm");
        cr_assert_str_eq(cfg->servers[0].command, "python3");
        cr_assert_str_eq(cfg->servers[0].args[1], "-v");
        cr_assert_str_eq(cfg->servers[0].env[0], "DB=/x");
        cr_assert_eq(cfg->servers[0].timeout_ms, 5000);
        cr_assert(server_tool_allowed(&cfg->servers[0], "b"));
        cr_assert_not(server_tool_allowed(&cfg->servers[0], "c"));
        cr_assert_eq(server_tool_approval(&cfg->servers[0], "a"), APPROVAL_NEVER);
        cr_assert_str_eq(cfg->servers[1].headers[0], "Authorization: Bearer k");
        /* The object form: listed under never, else always. */
        cr_assert_eq(server_tool_approval(&cfg->servers[1], "list"), APPROVAL_NEVER);
        cr_assert_eq(server_tool_approval(&cfg->servers[1], "drop"), APPROVAL_ALWAYS);
        cr_assert(server_tool_allowed(&cfg->servers[1], "anything"));
        hub_config_free(cfg);
}

Test(hub_config, approval_string_form)
{
        struct airlock_error err = { { 0 } };
        struct hub_config *cfg = NULL;

        cr_assert_eq(parse("{\"mcpServers\": {\"s\": {\"command\": \"x\","
                           " \"require_approval\": \"always\"}}}",
                           &cfg, &err),
                     0, "%s", err.msg);
        cr_assert_eq(server_tool_approval(&cfg->servers[0], "t"), APPROVAL_ALWAYS);
        hub_config_free(cfg);
}

Test(hub_config, refuses_what_it_does_not_know)
{
        assert_refused("[]", "expected a JSON object");
        assert_refused("{\"servers\": {}}", "servers: unknown member");
        assert_refused("{\"mcpServers\": []}", "mcpServers: expected an object");
        assert_refused("{\"mcpServers\": {\"crm\": {\"comand\": \"x\"}}}",
                       "mcpServers.crm.comand: unknown member");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\", \"allowed_tool\": []}}}",
                       "mcpServers.crm.allowed_tool: unknown member");
        assert_refused("{\"mcpServers\": {\"crm\": {}}}", "give either \"command\"");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\", \"url\": \"http://h\"}}}",
                       "give either");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": 3}}}", "mcpServers.crm.command");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\", \"args\": [1]}}}",
                       "mcpServers.crm.args[0]: expected a string");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\", \"env\": {\"A\": 1}}}}",
                       "mcpServers.crm.env.A");
        assert_refused("{\"mcpServers\": {\"crm\": {\"url\": \"ftp://h\"}}}",
                       "expected an http:// or https:// URL");
        assert_refused("{\"mcpServers\": {\"crm\": {\"url\": \"http://h\", \"args\": []}}}",
                       "are for stdio servers");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\", \"headers\": {}}}}",
                       "headers are for HTTP servers");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\", \"type\": \"sse\"}}}",
                       "SSE transport is not supported");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\", \"type\": \"http\"}}}",
                       "does not match");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\","
                       " \"require_approval\": \"sometimes\"}}}",
                       "expected \"always\", \"never\" or an object");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\","
                       " \"require_approval\": {\"always\": [\"a\"]}}}}",
                       "expected {\"tool_names\": [...]}");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\", \"timeout_ms\": 0}}}",
                       "timeout_ms: expected an integer from 1");
        assert_refused("{\"mcpServers\": {\"cr m\": {\"command\": \"x\"}}}",
                       "a server name is 1 to 48");
        assert_refused("{\"mcpServers\": {\"crm\": {\"command\": \"x\", \"cwd\": \"rel\"}}}",
                       "expected an absolute path");
        assert_refused("{\"mcpServers\": {\"crm\": {\"url\": \"http://h\","
                       " \"headers\": {\"X\": \"a\\r\\nInjected: 1\"}}}}",
                       "not a valid header");
}

Test(hub_config, file_errors_name_the_line)
{
        char path[] = "/tmp/airlock-test-hub-XXXXXX";
        struct airlock_error err = { { 0 } };
        struct hub_config *cfg = NULL;
        int fd = mkstemp(path);
        FILE *f;

        cr_assert(fd >= 0);
        f = fdopen(fd, "w");
        fputs("{\"mcpServers\": {\n  \"a\": {\"command\": \"x\",}\n}}\n", f);
        fclose(f);
        cr_assert_eq(hub_config_load(path, &cfg, &err), -EINVAL);
        cr_assert(strstr(err.msg, "line 2"), "%s", err.msg);
        unlink(path);
        cr_assert_eq(hub_config_load("/nonexistent/mcp.json", &cfg, &err), -ENOENT);
        cr_assert(strstr(err.msg, "cannot read"), "%s", err.msg);
}

Test(hub, python_names_are_identifiers)
{
        char buf[80];

        hub_python_name("get-user", buf, sizeof(buf));
        cr_assert_str_eq(buf, "get_user");
        hub_python_name("2fa", buf, sizeof(buf));
        cr_assert_str_eq(buf, "_2fa");
        hub_python_name("class", buf, sizeof(buf));
        cr_assert_str_eq(buf, "class_");
        hub_python_name("crm__run.sql", buf, sizeof(buf));
        cr_assert_str_eq(buf, "crm__run_sql");
}

/* ---- a live server: what it sends is bounded before it reaches a caller -------------------- */

/* A stdio MCP server in a few lines of Python: one tool, "odd", whose result is RESULT (a JSON
 * CallToolResult, given in the environment). */
static const char tiny_server[] =
        "import json, os, sys, time\n"
        "result = json.loads(os.environ['RESULT'])\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if 'id' not in m: continue\n"
        "    if m['method'] == 'tools/call' and os.environ.get('STALL'):\n"
        "        time.sleep(3600)  # and reads no more of its input\n"
        "    if m['method'] == 'initialize':\n"
        "        r = {'protocolVersion': '2025-06-18', 'capabilities': {'tools': {}},\n"
        "             'serverInfo': {'name': 'tiny', 'version': '1'}}\n"
        "    elif m['method'] == 'tools/list':\n"
        "        r = {'tools': [{'name': 'odd', 'inputSchema': {'type': 'object'}}]}\n"
        "    else:\n"
        "        r = result\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n";

/* Starts a hub with the tiny server answering every call with result; returns the hub. */
static struct hub *tiny_hub(const char *result, size_t max_result_bytes)
{
        struct airlock_error err = { { 0 } };
        struct hub_config *cfg = NULL;
        struct hub *h = NULL;
        json_t *root;

        root = json_pack("{s:{s:{s:s, s:[s, s], s:{s:s}, s:I}}}", "mcpServers", "tiny", "command",
                         "python3", "args", "-c", tiny_server, "env", "RESULT", result,
                         "max_result_bytes", (json_int_t) max_result_bytes);
        cr_assert(root);
        cr_assert_eq(hub_config_parse(root, "test.json", &cfg, &err), 0, "%s", err.msg);
        json_decref(root);
        cr_assert_eq(hub_new(cfg, NULL, &h), 0);
        hub_config_free(cfg);
        cr_assert(hub_wait_started(h, 30000));
        return h;
}

Test(hub_live, long_names_in_notes_are_cut, .timeout = 60)
{
        char *big = malloc(4001);
        struct airlock_error err = { { 0 } };
        struct hub_result res = { 0 };
        struct hub *h;
        char *result;
        int r;

        cr_assert(big);
        memset(big, 'x', 4000);
        big[4000] = '\0';
        /* A content type, a resource link's uri and name: what the server sends, put in the
         * note that stands for content that is not text. */
        cr_assert(asprintf(&result,
                           "{\"content\": [{\"type\": \"%s\"}, {\"type\": \"resource_link\", "
                           "\"uri\": \"https://h/%s\", \"name\": \"n\"}]}",
                           big, big) > 0);
        h = tiny_hub(result, 1024 * 1024);
        r = hub_call(h, "odd", NULL, NULL, 0, NULL, &res, &err);
        cr_assert_eq(r, 0, "%d %s", r, err.msg);
        cr_assert(strncmp(res.text, "[content of type xxx", 20) == 0, "%.60s", res.text);
        cr_assert_lt(strlen(res.text), 2 * 512, "notes of %zu bytes", strlen(res.text));
        hub_result_done(&res);
        hub_free(h);
        free(result);
        free(big);
}

Test(hub_live, structured_content_counts_against_max_result_bytes, .timeout = 60)
{
        struct airlock_error err = { { 0 } };
        struct hub_result res = { 0 };
        struct hub *h;
        char *result, *big = malloc(50001);
        int r;

        cr_assert(big);
        memset(big, 'y', 50000);
        big[50000] = '\0';
        /* A short text, and 50 kB of structured content and of audio: over a limit of 1000. */
        cr_assert(asprintf(&result,
                           "{\"content\": [{\"type\": \"text\", \"text\": \"ok\"}, {\"type\": "
                           "\"audio\", \"mimeType\": \"audio/wav\", \"data\": \"%s\"}], "
                           "\"structuredContent\": {\"blob\": \"%s\"}}",
                           big, big) > 0);
        h = tiny_hub(result, 1000);
        r = hub_call(h, "odd", NULL, NULL, 0, NULL, &res, &err);
        cr_assert_eq(r, 0, "%d %s", r, err.msg);
        cr_assert(res.cut, "a result of 100 kB was not cut at 1000 bytes");
        cr_assert_null(res.structured);
        cr_assert_null(res.content);
        cr_assert_lt(strlen(res.text), 1000 + 256);
        hub_result_done(&res);
        hub_free(h);
        free(result);
        free(big);
}

/* A caller checks its policy against one tool and calls by name: when the name came to mean
 * another tool meanwhile (another server, another approval), the call is refused. */
Test(hub_live, a_call_is_refused_when_the_name_means_another_tool, .timeout = 60)
{
        struct airlock_error err = { { 0 } };
        struct hub_result res = { 0 };
        struct hub *h =
                tiny_hub("{\"content\": [{\"type\": \"text\", \"text\": \"ok\"}]}", 1024 * 1024);
        json_t *checked = hub_tool(h, "odd");
        int r;

        cr_assert_not_null(checked);
        r = hub_call(h, "odd", checked, NULL, 0, NULL, &res, &err);
        cr_assert_eq(r, 0, "%d %s", r, err.msg);
        cr_assert_str_eq(res.text, "ok");
        hub_result_done(&res);

        json_object_set_new(checked, "server", json_string("elsewhere"));
        r = hub_call(h, "odd", checked, NULL, 0, NULL, &res, &err);
        cr_assert_eq(r, -ENOENT);
        cr_assert(strstr(err.msg, "changed while it was being called"), "%s", err.msg);
        json_object_set_new(checked, "server", json_string("tiny"));
        json_object_set_new(checked, "require_approval", json_string("always"));
        cr_assert_eq(hub_call(h, "odd", checked, NULL, 0, NULL, &res, &err), -ENOENT);
        json_decref(checked);
        hub_free(h);
}

/* A server that stopped reading its input: a large request can only be written in part before
 * its caller's deadline. The half line would be glued to the next message, so the connection
 * ends (and the supervisor starts the server again) instead of going on out of step. */
Test(hub_live, half_a_line_written_ends_the_connection, .timeout = 60)
{
        struct airlock_error err = { { 0 } };
        struct hub_result res = { 0 };
        struct hub_config *cfg = NULL;
        struct hub *h = NULL;
        char *big = malloc(2u << 20);
        json_t *root, *args, *servers;
        int r;

        cr_assert(big);
        memset(big, 'z', (2u << 20) - 1);
        big[(2u << 20) - 1] = '\0';
        root = json_pack("{s:{s:{s:s, s:[s, s], s:{s:s, s:s}, s:i}}}", "mcpServers", "tiny",
                         "command", "python3", "args", "-c", tiny_server, "env", "RESULT", "{}",
                         "STALL", "1", "timeout_ms", 1000);
        cr_assert(root);
        cr_assert_eq(hub_config_parse(root, "test.json", &cfg, &err), 0, "%s", err.msg);
        json_decref(root);
        cr_assert_eq(hub_new(cfg, NULL, &h), 0);
        hub_config_free(cfg);
        cr_assert(hub_wait_started(h, 30000));

        /* The first call stalls the server: it answers nothing and reads no more. */
        r = hub_call(h, "odd", NULL, NULL, 0, NULL, &res, &err);
        cr_assert_eq(r, -ETIMEDOUT, "%d %s", r, err.msg);
        /* 2 MiB cannot fit the pipe: part goes in, then the deadline passes. */
        args = json_pack("{s:s}", "blob", big);
        r = hub_call(h, "odd", NULL, args, 0, NULL, &res, &err);
        cr_assert_eq(r, -EHOSTDOWN, "%d %s", r, err.msg);
        cr_assert(strstr(err.msg, "cut half-way"), "%s", err.msg);
        /* The supervisor drops the connection and starts the server again. */
        for (int i = 0; i < 100; i++) {
                servers = hub_servers(h);
                r = (int) json_integer_value(
                        json_object_get(json_array_get(servers, 0), "restarts"));
                json_decref(servers);
                if (r >= 1)
                        break;
                (void) usleep(100000);
        }
        cr_assert_geq(r, 1, "the connection out of step was not dropped");
        json_decref(args);
        hub_free(h);
        free(big);
}
