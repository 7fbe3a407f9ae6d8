/* `airlock exec`: run code through a running daemon, in a session (-s) or one-shot, with the
 * output streamed as it is produced and the result printed and turned into an exit status
 * exactly like `airlock run` (output.c is shared). */
#include "cli.h"
#include "client.h"
#include "output.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/util.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char exec_help[] =
        "usage: airlock exec [OPTIONS] FILE|-\n"
        "\n"
        "Runs FILE (or standard input with -) through a running `airlock serve`: in the\n"
        "session given with -s, else once in a fresh sandbox. Output streams as it is\n"
        "produced; the exit status is the program's, as with `airlock run`.\n"
        "\n"
        "  -s, --session ID      run in this session (see `airlock sessions`)\n"
        "  -p, --profile NAME    profile for a one-shot run; default: default\n"
        "  -l, --language LANG   python, bash, javascript, typescript (ts) or r;\n"
        "                        default: from the file name\n"
        "                        (.sh -> bash, .js/.mjs -> javascript,\n"
        "                        .ts/.mts -> typescript), else python\n"
        "      --timeout S       wall-clock limit (e.g. 5, 1.5s, 250ms; at most 1h);\n"
        "                        default: the profile's\n"
        "      --output DIR      where rich outputs (figures, HTML) are saved; default:\n"
        "                        ./" CLI_OUTPUT_DIR_DEFAULT "/ (created when needed)\n"
        "      --json            print the execution object instead of the output (rich\n"
        "                        outputs stay in it, base64, and nothing is saved)\n"
        "      --url URL         the daemon: http://HOST:PORT or unix:/PATH; also\n"
        "                        AIRLOCK_URL; default: " CLI_DEFAULT_URL "\n"
        "      --state-dir DIR   where the daemon keeps its token (when AIRLOCK_TOKEN is\n"
        "                        not set); default: the daemon's default\n"
        "\n"
        "Without --json, rich outputs are saved as files, never replacing one: in a session\n"
        "exec-N-figure-K.png, exec-N-html-K.html... (N the session's execution count, K the\n"
        "output's position), one-shot exec-figure-K.png...; stderr says where each went.\n"
        "\n"
        "exit status: the program's (SystemExit(n) -> n, an exception -> 1); 124 timeout,\n"
        "125 output limit, 137 out of memory, 128+N killed by signal N, 2 airlock's own error\n"
        "(bad arguments, daemon not reachable, unknown session...).\n";

struct exec_args {
        const char *session;
        const char *profile;
        const char *language;
        const char *file;
        const char *url;
        const char *state_dir;
        const char *output_dir; /* NULL: CLI_OUTPUT_DIR_DEFAULT */
        uint64_t timeout_ms;
        bool json;
};

/* What the stream has told us so far. */
struct exec_stream_state {
        struct cli_sink sink;
        json_t *result; /* from the "end" event */
        char failure[512];
        bool ended;
};

static bool session_id_is_safe(const char *id)
{
        if (!*id || strlen(id) > 64)
                return false;
        return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
               strlen(id);
}

static int parse_args(int argc, char **argv, struct exec_args *a)
{
        enum { OPT_TIMEOUT = 256, OPT_JSON, OPT_URL, OPT_STATE_DIR, OPT_OUTPUT };
        static const struct option opts[] = {
                { "session", required_argument, NULL, 's' },
                { "profile", required_argument, NULL, 'p' },
                { "language", required_argument, NULL, 'l' },
                { "timeout", required_argument, NULL, OPT_TIMEOUT },
                { "json", no_argument, NULL, OPT_JSON },
                { "url", required_argument, NULL, OPT_URL },
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "output", required_argument, NULL, OPT_OUTPUT },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "+s:p:l:h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        if (!session_id_is_safe(optarg)) {
                                fprintf(stderr, "airlock exec: '%s' is not a session id\n", optarg);
                                return -EINVAL;
                        }
                        a->session = optarg;
                        break;
                case 'p':
                        a->profile = optarg;
                        break;
                case 'l':
                        if (strcmp(optarg, "python") != 0 && strcmp(optarg, "bash") != 0 &&
                            strcmp(optarg, "javascript") != 0 &&
                            strcmp(optarg, "typescript") != 0 && strcmp(optarg, "ts") != 0 &&
                            strcmp(optarg, "r") != 0) {
                                fprintf(stderr,
                                        "airlock exec: --language must be python, bash, "
                                        "javascript, typescript or r, not '%s'\n",
                                        optarg);
                                return -EINVAL;
                        }
                        a->language = strcmp(optarg, "ts") == 0 ? "typescript" : optarg;
                        break;
                case OPT_TIMEOUT:
                        if (parse_duration_ms(optarg, &a->timeout_ms) < 0 || a->timeout_ms == 0 ||
                            a->timeout_ms > 3600ULL * 1000) {
                                fprintf(stderr,
                                        "airlock exec: --timeout '%s' is not a duration between "
                                        "1ms and 1h (e.g. 5, 1.5s, 250ms)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_JSON:
                        a->json = true;
                        break;
                case OPT_URL:
                        a->url = optarg;
                        break;
                case OPT_STATE_DIR:
                        a->state_dir = optarg;
                        break;
                case OPT_OUTPUT:
                        a->output_dir = optarg;
                        break;
                case 'h':
                        fputs(exec_help, stdout);
                        exit(0);
                default:
                        fputs("Try 'airlock exec --help'.\n", stderr);
                        return -EINVAL;
                }
        }
        if (optind != argc - 1) {
                fprintf(stderr, "airlock exec: expected one FILE (or - for standard input)\n"
                                "Try 'airlock exec --help'.\n");
                return -EINVAL;
        }
        if (a->session && a->profile) {
                fprintf(stderr, "airlock exec: a session's profile is chosen when it is "
                                "created; drop -p or -s\n");
                return -EINVAL;
        }
        if (a->json && a->output_dir) {
                fprintf(stderr, "airlock exec: --json keeps rich outputs in the JSON and saves "
                                "nothing; drop --output or --json\n");
                return -EINVAL;
        }
        a->file = argv[optind];
        if (!a->language) {
                size_t n = strlen(a->file);
                a->language = (n > 3 && strcmp(a->file + n - 3, ".sh") == 0) ||
                                              (n > 5 && strcmp(a->file + n - 5, ".bash") == 0)
                                      ? "bash"
                              : (n > 3 && strcmp(a->file + n - 3, ".js") == 0) ||
                                              (n > 4 && strcmp(a->file + n - 4, ".mjs") == 0)
                                      ? "javascript"
                              : (n > 3 && strcmp(a->file + n - 3, ".ts") == 0) ||
                                              (n > 4 && strcmp(a->file + n - 4, ".mts") == 0)
                                      ? "typescript"
                                      : "python";
        }
        return 0;
}

static void on_event(void *userdata, const char *line, size_t len)
{
        struct exec_stream_state *st = userdata;
        json_t *ev = json_loadb(line, len, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *text = json_string_value(json_object_get(ev, "text"));

        if (!type) {
                json_decref(ev);
                return;
        }
        if (strcmp(type, "stdout") == 0 && text) {
                cli_sink_write(&st->sink, 1, text, strlen(text));
        } else if (strcmp(type, "stderr") == 0 && text) {
                cli_sink_write(&st->sink, 2, text, strlen(text));
        } else if (strcmp(type, "output") == 0) {
                cli_sink_display(&st->sink, ev, 0);
        } else if (strcmp(type, "end") == 0) {
                json_t *result = json_object_get(ev, "result");
                json_t *failure = json_object_get(ev, "failure");

                st->ended = true;
                if (json_is_object(result)) {
                        st->result = json_incref(result);
                } else {
                        const char *msg = json_string_value(json_object_get(failure, "error"));
                        (void) snprintf(st->failure, sizeof(st->failure), "%s",
                                        msg ? msg : "the execution failed");
                }
        }
        /* The "error" event and the rich outputs repeat what the end event's result holds:
         * they are printed and saved from there, as `airlock run` does. */
        json_decref(ev);
}

/* Rich outputs as files: "exec-N" in a session (N its execution count), "exec" one-shot. */
static void save_outputs(const struct exec_args *a, json_t *result)
{
        json_int_t n = json_integer_value(json_object_get(result, "execution_count"));
        char prefix[48];

        if (a->session && n > 0)
                (void) snprintf(prefix, sizeof(prefix), "exec-%lld", (long long) n);
        else
                (void) snprintf(prefix, sizeof(prefix), "exec");
        (void) cli_outputs_save("exec", a->output_dir, prefix, result);
}

int cmd_exec(int argc, char **argv)
{
        _cleanup_free_ char *code = NULL, *body = NULL, *path = NULL;
        struct exec_args a = { 0 };
        struct exec_stream_state st = { 0 };
        struct cli_response resp = { 0 };
        struct cli_client *c = NULL;
        json_t *req = NULL, *result = NULL;
        int r, status = EXIT_USAGE;

        cli_sink_init(&st.sink);
        if (parse_args(argc, argv, &a) < 0)
                return EXIT_USAGE;
        if (!a.output_dir)
                a.output_dir = CLI_OUTPUT_DIR_DEFAULT;
        if (!a.json && cli_output_dir_check("exec", a.output_dir) < 0)
                return EXIT_USAGE;
        r = cli_read_code(a.file, &code);
        if (r < 0) {
                fprintf(stderr, "airlock exec: cannot read '%s': %s\n", a.file,
                        r == -E2BIG     ? "larger than 16 MiB"
                        : r == -EBADMSG ? "it contains NUL bytes (not source code)"
                                        : strerror(-r));
                return EXIT_USAGE;
        }
        if (!*code) {
                fprintf(stderr, "airlock exec: '%s' is empty\n", a.file);
                return EXIT_USAGE;
        }

        req = json_pack("{s:s, s:s}", "code", code, "language", a.language);
        if (!req) {
                fprintf(stderr, "airlock exec: '%s' is not valid UTF-8 text\n", a.file);
                return EXIT_USAGE;
        }
        if (a.profile)
                json_object_set_new(req, "profile", json_string(a.profile));
        if (a.timeout_ms)
                json_object_set_new(req, a.session ? "timeout_s" : "timeout",
                                    json_real((double) a.timeout_ms / 1000.0));
        body = json_dump_text(req, JSON_COMPACT, NULL);
        json_decref(req);
        if (!body)
                return EXIT_USAGE;
        if (a.session)
                r = asprintf(&path, "/v1/sessions/%s/execute", a.session);
        else
                r = asprintf(&path, "/execute");
        if (r < 0)
                return EXIT_USAGE;

        if (cli_client_new("exec", a.url, a.state_dir, &c) < 0)
                return EXIT_USAGE;
        r = cli_client_request(c, "POST", path, body, strlen(body), a.json ? NULL : on_event, &st,
                               &resp);
        if (r < 0)
                goto out;
        if (resp.status != 200) {
                cli_client_print_error(c, &resp);
                goto out;
        }

        if (a.json) {
                char *text;

                result = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
                if (!json_is_object(result)) {
                        fprintf(stderr, "airlock exec: the daemon's reply is not JSON\n");
                        goto out;
                }
                text = json_dump_text(result, JSON_INDENT(2) | JSON_ENSURE_ASCII, NULL);
                if (text) {
                        puts(text);
                        free(text);
                }
                status = cli_exit_code(result);
                goto out;
        }
        if (!st.ended) {
                fprintf(stderr, "airlock exec: the daemon closed the stream before the cell "
                                "ended\n");
                goto out;
        }
        if (!st.result) {
                fprintf(stderr, "airlock exec: %s\n", st.failure);
                goto out;
        }
        cli_print_result(st.result);
        save_outputs(&a, st.result);
        status = cli_exit_code(st.result);
out:
        json_decref(result);
        json_decref(st.result);
        free(resp.body);
        cli_client_free(c);
        return status;
}
