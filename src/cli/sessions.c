/* `airlock sessions`: the live sessions of a running daemon, as a table or (--json) as the
 * objects GET /v1/sessions returns. */
#include "cli.h"
#include "client.h"

#include "base/cleanup.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char sessions_help[] =
        "usage: airlock sessions [--json] [--url URL] [--state-dir DIR]\n"
        "\n"
        "Lists the live sessions of a running `airlock serve`: id, profile, state, number\n"
        "of executions and how long each has been idle.\n"
        "\n"
        "      --json            print the session objects of GET /v1/sessions\n"
        "      --url URL         the daemon: http://HOST:PORT or unix:/PATH; also\n"
        "                        AIRLOCK_URL; default: " CLI_DEFAULT_URL "\n"
        "      --state-dir DIR   where the daemon keeps its token (when AIRLOCK_TOKEN is\n"
        "                        not set)\n";

/* Seconds since the epoch of an RFC 3339 time ("2025-01-01T12:00:00.123Z", or with an offset
 * "+02:00"), or -1. */
static time_t parse_rfc3339(const char *s)
{
        struct tm tm = { 0 };
        const char *p;
        time_t t;

        if (!s)
                return -1;
        p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!p)
                return -1;
        if (*p == '.')
                for (p++; *p >= '0' && *p <= '9'; p++)
                        ;
        t = timegm(&tm);
        if (*p == 'Z' || *p == 'z') {
                return t;
        } else if ((*p == '+' || *p == '-') && strlen(p) >= 6) {
                int h = (p[1] - '0') * 10 + (p[2] - '0');
                int m = (p[4] - '0') * 10 + (p[5] - '0');
                time_t off = (time_t) (h * 3600 + m * 60);
                return *p == '+' ? t - off : t + off;
        }
        return -1;
}

static void format_duration(long s, char *buf, size_t size)
{
        if (s < 0)
                (void) snprintf(buf, size, "-");
        else if (s < 60)
                (void) snprintf(buf, size, "%lds", s);
        else if (s < 3600)
                (void) snprintf(buf, size, "%ldm%02lds", s / 60, s % 60);
        else
                (void) snprintf(buf, size, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
}

int cmd_sessions(int argc, char **argv)
{
        enum { OPT_JSON = 256, OPT_URL, OPT_STATE_DIR };
        static const struct option opts[] = {
                { "json", no_argument, NULL, OPT_JSON },
                { "url", required_argument, NULL, OPT_URL },
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *url = NULL, *state_dir = NULL;
        struct cli_response resp = { 0 };
        struct cli_client *c = NULL;
        json_t *reply = NULL, *list, *s;
        bool as_json = false;
        int opt, status = EXIT_USAGE;
        size_t i;

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
                case 'h':
                        fputs(sessions_help, stdout);
                        return 0;
                default:
                        fputs("Try 'airlock sessions --help'.\n", stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind != argc) {
                fprintf(stderr, "airlock sessions: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }

        if (cli_client_new("sessions", url, state_dir, &c) < 0)
                return EXIT_USAGE;
        if (cli_client_request(c, "GET", "/v1/sessions", NULL, 0, NULL, NULL, &resp) < 0)
                goto out;
        if (resp.status != 200) {
                cli_client_print_error(c, &resp);
                goto out;
        }
        reply = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
        list = json_object_get(reply, "sessions");
        if (!json_is_array(list)) {
                fprintf(stderr, "airlock sessions: the daemon's reply has no session list\n");
                goto out;
        }

        if (as_json) {
                char *text = json_dumps(list, JSON_INDENT(2) | JSON_ENSURE_ASCII);
                if (text) {
                        puts(text);
                        free(text);
                }
                status = 0;
                goto out;
        }
        if (json_array_size(list) == 0) {
                printf("no sessions\n");
                status = 0;
                goto out;
        }
        printf("%-28s %-16s %-6s %10s  %s\n", "ID", "PROFILE", "STATE", "EXECUTIONS", "IDLE FOR");
        json_array_foreach (list, i, s) {
                const char *id = json_string_value(json_object_get(s, "id"));
                const char *profile = json_string_value(json_object_get(s, "profile"));
                const char *state = json_string_value(json_object_get(s, "state"));
                time_t last = parse_rfc3339(json_string_value(json_object_get(s, "last_used_at")));
                char idle[32];

                format_duration(last < 0 ? -1 : (long) (time(NULL) - last), idle, sizeof(idle));
                if (state && strcmp(state, "busy") == 0)
                        (void) snprintf(idle, sizeof(idle), "-");
                printf("%-28s %-16s %-6s %10lld  %s\n", id ? id : "?", profile ? profile : "?",
                       state ? state : "?",
                       (long long) json_integer_value(json_object_get(s, "execution_count")), idle);
        }
        status = 0;
out:
        json_decref(reply);
        free(resp.body);
        cli_client_free(c);
        return status;
}
