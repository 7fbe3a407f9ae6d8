/* Internal tools on the command line: `--mcp-config FILE` for serve, chat and mcp (one loader,
 * so every command refuses a bad file the same way), and `airlock tools`, which lists the tools
 * a daemon offers (GET /v1/tools) or, with --mcp-config, what a config file gives: each tool
 * with its server, and each server's state. */
#include "cli.h"
#include "client.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "hub/hub.h"
#include "tools/tools.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long `airlock tools --mcp-config` and the in-process commands wait for the servers'
 * first start before going on without the slow ones. */
#define START_WAIT_MS 30000

/* The mcpServers file of --mcp-config, else of AIRLOCK_MCP_CONFIG; NULL for none. */
static const char *config_path(const char *path)
{
        if (!path)
                path = getenv("AIRLOCK_MCP_CONFIG");
        return path && *path ? path : NULL;
}

int cli_hub_check(const char *prog, const char *path)
{
        struct airlock_error err = { { 0 } };
        struct hub_config *cfg = NULL;
        int r;

        path = config_path(path);
        if (!path)
                return 0;
        r = hub_config_load(path, &cfg, &err);
        if (r < 0)
                fprintf(stderr, "airlock %s: --mcp-config: %s\n", prog, err.msg);
        hub_config_free(cfg);
        return r;
}

int cli_hub_start(const char *prog, const char *path, struct hub **ret_hub)
{
        struct airlock_error err = { { 0 } };
        struct hub_config *cfg = NULL;
        const char *reserved[16];
        const struct tool *const *all;
        size_t n;
        int r;

        *ret_hub = NULL;
        path = config_path(path);
        if (!path)
                return 0;
        r = hub_config_load(path, &cfg, &err);
        if (r < 0) {
                fprintf(stderr, "airlock %s: --mcp-config: %s\n", prog, err.msg);
                return r;
        }
        all = tools_all(&n);
        for (size_t i = 0; i < n && i + 1 < sizeof(reserved) / sizeof(*reserved); i++) {
                reserved[i] = all[i]->name;
                reserved[i + 1] = NULL;
        }
        r = hub_new(cfg, &(struct hub_options){ .reserved = reserved }, ret_hub);
        hub_config_free(cfg);
        if (r < 0)
                fprintf(stderr, "airlock %s: cannot start the MCP servers: %s\n", prog,
                        strerror(-r));
        return r;
}

void cli_hub_wait(struct hub *h)
{
        if (h && !hub_wait_started(h, START_WAIT_MS))
                log_warn("some MCP servers did not finish starting within %d s; their tools "
                         "come when they are ready",
                         START_WAIT_MS / 1000);
}

static const char tools_help[] =
        "usage: airlock tools [--json] [--url URL] [--state-dir DIR]\n"
        "       airlock tools --mcp-config FILE [--json]\n"
        "\n"
        "Lists the tools a model gets: airlock's own (run_python, ...) and the internal\n"
        "tools of the MCP servers behind airlock, each with its server, whether it can be\n"
        "called now (or why not) and whether it needs approval; then the servers' states.\n"
        "Without --mcp-config it asks a running daemon (GET /v1/tools); with it, it starts\n"
        "the servers of FILE itself (docs/TOOLS.md), lists them and stops them.\n"
        "\n"
        "options:\n"
        "      --mcp-config FILE  the mcpServers file to try\n"
        "      --json            print the JSON answer of GET /v1/tools instead\n"
        "      --url URL         the daemon: http://HOST:PORT or unix:/PATH; also\n"
        "                        AIRLOCK_URL; default: " CLI_DEFAULT_URL "\n"
        "      --state-dir DIR   where the daemon keeps its token (when AIRLOCK_TOKEN is\n"
        "                        not set)\n"
        "\n"
        "exit status: 0 listed; 1 the daemon could not be reached or refused, or a server\n"
        "of FILE is unavailable; 2 bad arguments or a bad FILE.\n";

static void print_listing(json_t *answer)
{
        json_t *internal = json_object_get(answer, "internal");
        json_t *servers = json_object_get(answer, "servers"), *t;
        size_t n, i;
        const struct tool *const *all = tools_all(&n);

        printf("%-32s %-16s %s\n", "TOOL", "SERVER", "STATUS");
        for (i = 0; i < n; i++)
                printf("%-32s %-16s %s\n", all[i]->name, "airlock", "ready");
        json_array_foreach (internal, i, t) {
                const char *mode = json_string_value(json_object_get(t, "require_approval"));
                printf("%-32s %-16s %s%s\n", json_string_value(json_object_get(t, "name")),
                       json_string_value(json_object_get(t, "server")),
                       json_is_true(json_object_get(t, "available")) ? "ready" : "unavailable",
                       mode && strcmp(mode, "always") == 0 ? ", needs approval" : "");
        }
        if (json_array_size(servers) == 0)
                return;
        printf("\n%-16s %-10s %-12s %-6s %s\n", "SERVER", "TRANSPORT", "STATE", "TOOLS", "REASON");
        json_array_foreach (servers, i, t) {
                const char *reason = json_string_value(json_object_get(t, "reason"));
                printf("%-16s %-10s %-12s %-6lld %s\n",
                       json_string_value(json_object_get(t, "name")),
                       json_string_value(json_object_get(t, "transport")),
                       json_string_value(json_object_get(t, "state")),
                       (long long) json_integer_value(json_object_get(t, "tools")),
                       reason ? reason : "");
        }
}

static int tools_local(const char *path, bool as_json)
{
        struct hub *h = NULL;
        json_t *answer;
        bool all_ready = true;
        size_t i;
        json_t *s;

        if (cli_hub_start("tools", path, &h) < 0)
                return EXIT_USAGE;
        cli_hub_wait(h);
        answer = json_pack("{s:o, s:o, s:o}", "tools", tools_declarations(TOOLS_FORMAT_MCP, h),
                           "internal", hub_tools(h), "servers", hub_servers(h));
        hub_free(h);
        if (!answer)
                return 1;
        json_array_foreach (json_object_get(answer, "servers"), i, s)
                all_ready = all_ready &&
                            strcmp(json_string_value(json_object_get(s, "state")), "ready") == 0;
        if (as_json) {
                char *text = json_dump_text(answer, JSON_INDENT(2), NULL);
                if (text)
                        puts(text);
                free(text);
        } else {
                print_listing(answer);
        }
        json_decref(answer);
        return all_ready ? 0 : 1;
}

int cmd_tools(int argc, char **argv)
{
        enum { OPT_JSON = 256, OPT_URL, OPT_STATE_DIR, OPT_MCP_CONFIG };
        static const struct option opts[] = {
                { "json", no_argument, NULL, OPT_JSON },
                { "url", required_argument, NULL, OPT_URL },
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "mcp-config", required_argument, NULL, OPT_MCP_CONFIG },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *url = NULL, *state_dir = NULL, *config = NULL;
        struct cli_client *c = NULL;
        struct cli_response resp = { 0 };
        bool as_json = false;
        json_t *answer;
        int opt;

        while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (opt) {
                case OPT_JSON:
                        as_json = true;
                        break;
                case OPT_URL:
                        url = optarg;
                        break;
                case OPT_STATE_DIR:
                        state_dir = optarg;
                        break;
                case OPT_MCP_CONFIG:
                        config = optarg;
                        break;
                case 'h':
                        fputs(tools_help, stdout);
                        return 0;
                default:
                        fputs(tools_help, stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "airlock tools: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (config) {
                if (url) {
                        fprintf(stderr, "airlock tools: --mcp-config and --url exclude each "
                                        "other\n");
                        return EXIT_USAGE;
                }
                return tools_local(config, as_json);
        }
        if (cli_client_new("tools", url, state_dir, &c) < 0)
                return 1;
        if (cli_client_request(c, "GET", "/v1/tools", NULL, 0, NULL, NULL, &resp) < 0) {
                cli_client_free(c);
                return 1;
        }
        if (resp.status != 200) {
                cli_client_print_error(c, &resp);
                free(resp.body);
                cli_client_free(c);
                return 1;
        }
        cli_client_free(c);
        if (as_json) {
                fputs(resp.body ? resp.body : "", stdout);
                if (resp.len == 0 || resp.body[resp.len - 1] != '\n')
                        putchar('\n');
                free(resp.body);
                return 0;
        }
        answer = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
        free(resp.body);
        if (!json_is_object(answer)) {
                fprintf(stderr, "airlock tools: the daemon's answer is not JSON\n");
                json_decref(answer);
                return 1;
        }
        print_listing(answer);
        json_decref(answer);
        return 0;
}
