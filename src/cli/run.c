/* `airlock run`: run code once in a fresh sandbox, no daemon needed. Output streams to the
 * terminal as it is produced (with terminal escapes neutralised), or the whole execution object
 * is printed with --json. The exit status is the program's own (see cli.h for airlock's). */
#include "cli.h"

#include "egress/egress.h"
#include "output.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"
#include "profile/profile.h"
#include "session/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INPUTS_MAX 64

static const char run_help[] =
        "usage: airlock run [OPTIONS] FILE|-\n"
        "\n"
        "Runs FILE (or standard input with -) once in a fresh sandbox and exits with the\n"
        "program's status.\n"
        "\n"
        "  -p, --profile NAME    profile (default, minimal, data-science, visualization) or a\n"
        "                        path to a profile file; default: default\n"
        "  -l, --language LANG   python, bash, javascript, typescript (ts) or r;\n"
        "                        default: from the file name\n"
        "                        (.sh -> bash, .js/.mjs -> javascript,\n"
        "                        .ts/.mts -> typescript), else python\n"
        "      --timeout S       wall-clock limit in seconds (e.g. 5, 1.5, 250ms); default:\n"
        "                        the profile's\n"
        "      --memory SIZE     memory limit (e.g. 256MiB, 2GiB); default: the profile's\n"
        "      --input PATH      copy a host file into /work before running (repeatable)\n"
        "      --output DIR      copy the files left in /work to DIR afterwards (symlinks\n"
        "                        and special files are skipped, never followed), and save\n"
        "                        rich outputs (figures, HTML) there\n"
        "      --isolation MODE  namespaces (default), process or none; also\n"
        "                        AIRLOCK_ISOLATION\n"
        "      --json            print the execution object (status, stdout, stderr, result,\n"
        "                        error, exit_code, usage...) instead of the output\n"
        "\n"
        "Without --json, rich outputs (PNG, JPEG and SVG figures, HTML) are saved as files,\n"
        "run-figure-N.png, run-html-N.html..., in --output DIR, else in ./" CLI_OUTPUT_DIR_DEFAULT
        "/\n"
        "(created when needed; an existing file is never replaced), and stderr says where.\n"
        "\n"
        "exit status: the program's (SystemExit(n) -> n, an exception -> 1); 124 timeout,\n"
        "125 output limit, 137 out of memory, 128+N killed by signal N, 2 airlock's own error.\n";

struct run_args {
        const char *profile;
        const char *language;
        const char *file;
        const char *output_dir;
        const char *isolation;
        const char *inputs[INPUTS_MAX];
        size_t n_inputs;
        uint64_t timeout_ms;
        uint64_t memory_bytes;
        bool json;
};

static int parse_args(int argc, char **argv, struct run_args *a)
{
        enum { OPT_TIMEOUT = 256, OPT_MEMORY, OPT_JSON, OPT_INPUT, OPT_OUTPUT, OPT_ISOLATION };
        static const struct option opts[] = {
                { "profile", required_argument, NULL, 'p' },
                { "language", required_argument, NULL, 'l' },
                { "timeout", required_argument, NULL, OPT_TIMEOUT },
                { "memory", required_argument, NULL, OPT_MEMORY },
                { "json", no_argument, NULL, OPT_JSON },
                { "input", required_argument, NULL, OPT_INPUT },
                { "output", required_argument, NULL, OPT_OUTPUT },
                { "isolation", required_argument, NULL, OPT_ISOLATION },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "+p:l:h", opts, NULL)) != -1) {
                switch (c) {
                case 'p':
                        a->profile = optarg;
                        break;
                case 'l':
                        if (strcmp(optarg, "python") != 0 && strcmp(optarg, "bash") != 0 &&
                            strcmp(optarg, "javascript") != 0 &&
                            strcmp(optarg, "typescript") != 0 && strcmp(optarg, "ts") != 0 &&
                            strcmp(optarg, "r") != 0) {
                                fprintf(stderr,
                                        "airlock run: --language must be python, bash, "
                                        "javascript, typescript or r, not '%s'\n",
                                        optarg);
                                return -EINVAL;
                        }
                        a->language = strcmp(optarg, "ts") == 0 ? "typescript" : optarg;
                        break;
                case OPT_TIMEOUT:
                        if (parse_duration_ms(optarg, &a->timeout_ms) < 0 || a->timeout_ms == 0 ||
                            a->timeout_ms > 24ULL * 3600 * 1000) {
                                fprintf(stderr,
                                        "airlock run: --timeout '%s' is not a duration between "
                                        "1ms and 24h (e.g. 5, 1.5s, 250ms)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_MEMORY:
                        if (parse_size(optarg, &a->memory_bytes) < 0 ||
                            a->memory_bytes < 16ULL * 1024 * 1024) {
                                fprintf(stderr,
                                        "airlock run: --memory '%s' is not a size of at least "
                                        "16MiB (e.g. 256MiB, 2GiB)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_JSON:
                        a->json = true;
                        break;
                case OPT_INPUT:
                        if (a->n_inputs >= INPUTS_MAX) {
                                fprintf(stderr, "airlock run: at most %d --input files\n",
                                        INPUTS_MAX);
                                return -EINVAL;
                        }
                        a->inputs[a->n_inputs++] = optarg;
                        break;
                case OPT_OUTPUT:
                        a->output_dir = optarg;
                        break;
                case OPT_ISOLATION:
                        a->isolation = optarg;
                        break;
                case 'h':
                        fputs(run_help, stdout);
                        exit(0);
                default:
                        fputs("Try 'airlock run --help'.\n", stderr);
                        return -EINVAL;
                }
        }
        if (optind != argc - 1) {
                fprintf(stderr, "airlock run: expected one FILE (or - for standard input)\n"
                                "Try 'airlock run --help'.\n");
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

/* A one-shot run says on stderr what the egress proxy refused. */
static void on_egress_event(void *userdata, const struct egress_event *ev)
{
        (void) userdata;
        if (ev->type == EGRESS_EVENT_REFUSED)
                fprintf(stderr, "airlock run: network: %s %s:%u refused: %s\n", ev->via, ev->host,
                        ev->port, ev->reason);
}

/* Profiles with network "allow": the run's own egress proxy in the sandbox's namespace. */
static int start_egress(const struct profile *p, enum jail_isolation mode, struct sandbox *sb,
                        struct egress **ret_egress, struct airlock_error *err)
{
        char id[32];
        int r;

        if (!p->network || p->network->mode != EGRESS_MODE_ALLOW)
                return 0;
        if (mode != JAIL_NAMESPACES)
                return airlock_error_set(err, -EINVAL,
                                         "profile '%s' allows network through the egress proxy, "
                                         "which needs the namespaces isolation mode",
                                         p->name);
        r = egress_new(&(struct egress_options){ .on_event = on_egress_event }, ret_egress, err);
        if (r < 0)
                return r;
        (void) snprintf(id, sizeof(id), "run-%d", (int) getpid());
        return sandbox_egress_open(sb, *ret_egress, id, err);
}

int cmd_run(int argc, char **argv)
{
        _cleanup_free_ char *code = NULL;
        struct run_args a = { .profile = "default" };
        struct airlock_error err = { { 0 } };
        struct jail_features features;
        struct profile *profile = NULL;
        struct sandbox *sb = NULL;
        struct egress *egress = NULL;
        json_t *result = NULL;
        enum jail_isolation mode;
        struct cli_sink sink_st;
        struct exec_sink sink = { .on_output = cli_sink_write,
                                  .on_display = cli_sink_display,
                                  .userdata = &sink_st };
        struct exec_request req = { 0 };
        char name[64];
        int r, status = EXIT_USAGE;

        cli_sink_init(&sink_st);
        if (parse_args(argc, argv, &a) < 0)
                return EXIT_USAGE;
        if (cli_isolation(a.isolation, &mode) < 0)
                return EXIT_USAGE;
        if ((a.output_dir || !a.json) &&
            cli_output_dir_check("run", a.output_dir ? a.output_dir : CLI_OUTPUT_DIR_DEFAULT) < 0)
                return EXIT_USAGE;

        r = cli_read_code(a.file, &code);
        if (r < 0) {
                fprintf(stderr, "airlock run: cannot read '%s': %s\n", a.file,
                        r == -E2BIG     ? "larger than 16 MiB"
                        : r == -EBADMSG ? "it contains NUL bytes (not source code)"
                                        : strerror(-r));
                return EXIT_USAGE;
        }

        r = profile_load(a.profile, &profile, &err);
        if (r < 0) {
                fprintf(stderr, "airlock run: %s\n", err.msg);
                return EXIT_USAGE;
        }
        if (!profile_allows_language(profile, a.language)) {
                char langs[64];
                fprintf(stderr, "airlock run: profile '%s' does not allow %s (its languages: %s)\n",
                        profile->name, a.language,
                        profile_languages_text(profile, langs, sizeof(langs)));
                profile_free(profile);
                return EXIT_USAGE;
        }

        r = cli_probe_mode("run", mode, &features);
        if (r < 0)
                goto out;

        (void) snprintf(name, sizeof(name), "airlock-run-%d", (int) getpid());
        r = sandbox_start(&features,
                          &(struct sandbox_options){ .mode = mode,
                                                     .profile = profile,
                                                     .name = name,
                                                     .memory_bytes = a.memory_bytes },
                          &sb, &err);
        if (r >= 0)
                r = start_egress(profile, mode, sb, &egress, &err);
        if (r < 0) {
                fprintf(stderr, "airlock run: %s\n", err.msg);
                goto out;
        }
        for (size_t i = 0; i < a.n_inputs; i++) {
                _cleanup_free_ char *copy = strdup(a.inputs[i]);
                if (!copy) {
                        r = -ENOMEM;
                        goto out;
                }
                r = sandbox_copy_in(sb, a.inputs[i], basename(copy), &err);
                if (r < 0) {
                        fprintf(stderr, "airlock run: --input: %s\n", err.msg);
                        goto out;
                }
        }

        req.language = a.language;
        req.code = code;
        req.timeout_ms = a.timeout_ms;
        req.sink = a.json ? NULL : &sink;
        r = sandbox_exec(sb, &req, &result, &err);
        if (r < 0) {
                fprintf(stderr, "airlock run: %s\n", err.msg);
                goto out;
        }
        /* A one-shot sandbox has no state to keep: "state" belongs to sessions. */
        json_object_del(result, "state");

        if (a.output_dir) {
                json_t *skipped = NULL;
                if (!sandbox_is_alive(sb)) {
                        fprintf(stderr,
                                "airlock run: --output: the sandbox is gone (%s), no "
                                "files to copy\n",
                                json_string_value(json_object_get(result, "status")));
                } else if ((r = cli_mkdir_p(a.output_dir)) < 0) {
                        fprintf(stderr, "airlock run: --output: cannot create '%s': %s\n",
                                a.output_dir, strerror(-r));
                } else if (sandbox_copy_out(sb, a.output_dir, &skipped, &err) < 0) {
                        fprintf(stderr, "airlock run: --output: %s\n", err.msg);
                } else {
                        size_t i;
                        json_t *s;
                        json_array_foreach (skipped, i, s)
                                fprintf(stderr, "airlock run: --output: skipped '%s': %s\n",
                                        json_string_value(json_object_get(s, "path")),
                                        json_string_value(json_object_get(s, "reason")));
                        json_object_set_new(result, "skipped_files", skipped);
                }
        }

        if (a.json) {
                char *text = json_dump_text(result, JSON_INDENT(2) | JSON_ENSURE_ASCII, NULL);
                if (text) {
                        puts(text);
                        free(text);
                }
        } else {
                cli_print_result(result);
                (void) cli_outputs_save("run", a.output_dir ? a.output_dir : CLI_OUTPUT_DIR_DEFAULT,
                                        "run", result);
        }
        status = cli_exit_code(result);
out:
        json_decref(result);
        sandbox_free(sb);
        egress_free(egress);
        profile_free(profile);
        jail_features_done(&features);
        return status;
}
