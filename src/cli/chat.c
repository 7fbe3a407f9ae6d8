/* `airlock chat [PROMPT]`: the agent loop of src/chat/ from the command line. A model behind
 * any OpenAI-compatible Chat Completions endpoint gets airlock's tools; its code runs in one
 * sandbox session (in-process, or in a daemon with --url) created at its first tool call and
 * kept for the conversation; the files the code makes are saved to a local directory and named
 * under the answer. With PROMPT it answers once; without, it reads one message per line. */
#include "cli.h"
#include "client.h"
#include "output.h"
#include "tools-remote.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/util.h"
#include "chat/chat.h"
#include "hub/hub.h"
#include "jail/jail.h"
#include "session/session.h"
#include "tools/base64.h"
#include "tools/tools.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Exit statuses of `airlock chat` (docs/CHAT.md); EXIT_USAGE (2) for bad flags or config. */
#define EXIT_CHAT_FAILED 1
#define EXIT_CHAT_MAX_ROUNDS 3
#define EXIT_CHAT_UNREACHABLE 4
#define EXIT_CHAT_HTTP 5
#define EXIT_CHAT_TIMEOUT 6
#define EXIT_CHAT_MALFORMED 7

#define DEFAULT_OUTPUT_DIR "airlock-output"
#define SAVE_MAX (64u * 1024u * 1024u) /* largest file copied out of the sandbox */

static const char chat_help[] =
        "usage: airlock chat [OPTIONS] [PROMPT...]\n"
        "\n"
        "Talks to a model behind an OpenAI-compatible Chat Completions endpoint that can run\n"
        "code in an airlock sandbox. With PROMPT it answers once and exits; without, it reads\n"
        "one message per line from standard input until end of file.\n"
        "\n"
        "      --base-url URL      the endpoint, e.g. http://127.0.0.1:8000/v1 or\n"
        "                          http://127.0.0.1:11434/v1; also AIRLOCK_LLM_BASE_URL\n"
        "      --model NAME        the model; also AIRLOCK_LLM_MODEL\n"
        "      --api-key KEY       sent as a bearer token; prefer AIRLOCK_LLM_API_KEY (a flag\n"
        "                          is visible to other users in ps)\n"
        "      --timeout S         longest wait for one answer of the endpoint (default 120)\n"
        "      --max-rounds N      tool rounds per answer at most (default 10)\n"
        "      --approve           show each piece of code and ask on the terminal before\n"
        "                          running it (default: run without asking)\n"
        "      --output-dir DIR    where files made by the code are saved (default\n"
        "                          ./" DEFAULT_OUTPUT_DIR ")\n"
        "      --system TEXT       the system message (\"\" for none; default: a short one\n"
        "                          describing the sandbox)\n"
        "  -p, --profile NAME      profile of the sandbox session (default: default)\n"
        "      --url URL           run the code in a running daemon (`airlock serve`) instead\n"
        "                          of in-process; the token comes from AIRLOCK_TOKEN or\n"
        "                          --state-dir\n"
        "      --state-dir DIR     the daemon's state directory, to find its token\n"
        "      --isolation MODE    in-process sandboxes: namespaces (default), process or none\n"
        "      --mcp-config FILE   MCP servers whose tools the model gets too (docs/TOOLS.md);\n"
        "                          also AIRLOCK_MCP_CONFIG. They run here, beside this command\n"
        "\n"
        "exit status: 0 answered; 1 an internal failure; 2 bad usage or configuration; 3 the\n"
        "model still wanted tools after --max-rounds rounds; 4 the endpoint cannot be reached;\n"
        "5 it answered with an HTTP error; 6 it timed out; 7 its answer was not a completion.\n";

struct chat_args {
        const char *base_url, *model, *api_key;
        const char *output_dir;
        const char *system;
        const char *profile;
        const char *url, *state_dir, *isolation;
        const char *mcp_config;
        char *prompt; /* the words after the options, joined; NULL = conversation */
        uint64_t timeout_ms;
        unsigned max_rounds;
        bool approve;
};

/* The state the hooks share during one conversation. */
struct chat_cli {
        struct toolbox *tb;
        struct cli_sink sink;
        const char *output_dir;
        char *shown_dir; /* output_dir as shown to the user and the model, ending in '/' */
        json_t *saved;   /* the paths saved during the current answer, as shown */
        unsigned n_images;
        bool approve;
        struct hub *hub; /* internal tools (--mcp-config), or NULL */
};

static int parse_args(int argc, char **argv, struct chat_args *a)
{
        enum {
                OPT_BASE_URL = 256,
                OPT_MODEL,
                OPT_API_KEY,
                OPT_TIMEOUT,
                OPT_MAX_ROUNDS,
                OPT_APPROVE,
                OPT_OUTPUT_DIR,
                OPT_SYSTEM,
                OPT_URL,
                OPT_STATE_DIR,
                OPT_ISOLATION,
                OPT_MCP_CONFIG
        };
        static const struct option opts[] = {
                { "base-url", required_argument, NULL, OPT_BASE_URL },
                { "model", required_argument, NULL, OPT_MODEL },
                { "api-key", required_argument, NULL, OPT_API_KEY },
                { "timeout", required_argument, NULL, OPT_TIMEOUT },
                { "max-rounds", required_argument, NULL, OPT_MAX_ROUNDS },
                { "approve", no_argument, NULL, OPT_APPROVE },
                { "output-dir", required_argument, NULL, OPT_OUTPUT_DIR },
                { "system", required_argument, NULL, OPT_SYSTEM },
                { "profile", required_argument, NULL, 'p' },
                { "url", required_argument, NULL, OPT_URL },
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "isolation", required_argument, NULL, OPT_ISOLATION },
                { "mcp-config", required_argument, NULL, OPT_MCP_CONFIG },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        size_t len = 0;
        char *end;
        unsigned long v;
        int c;

        while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
                switch (c) {
                case OPT_BASE_URL:
                        a->base_url = optarg;
                        break;
                case OPT_MODEL:
                        a->model = optarg;
                        break;
                case OPT_API_KEY:
                        a->api_key = optarg;
                        break;
                case OPT_TIMEOUT:
                        if (parse_duration_ms(optarg, &a->timeout_ms) < 0 || a->timeout_ms == 0 ||
                            a->timeout_ms > 24ULL * 3600 * 1000) {
                                fprintf(stderr,
                                        "airlock chat: --timeout '%s' is not a duration between "
                                        "1ms and 24h (e.g. 120, 2m, 500ms)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_MAX_ROUNDS:
                        errno = 0;
                        v = strtoul(optarg, &end, 10);
                        if (!*optarg || *end || errno || optarg[0] == '-' || v < 1 ||
                            v > CHAT_MAX_ROUNDS_MAX) {
                                fprintf(stderr,
                                        "airlock chat: --max-rounds '%s' is not a number from 1 "
                                        "to %d\n",
                                        optarg, CHAT_MAX_ROUNDS_MAX);
                                return -EINVAL;
                        }
                        a->max_rounds = (unsigned) v;
                        break;
                case OPT_APPROVE:
                        a->approve = true;
                        break;
                case OPT_OUTPUT_DIR:
                        if (!*optarg) {
                                fprintf(stderr, "airlock chat: --output-dir is empty\n");
                                return -EINVAL;
                        }
                        a->output_dir = optarg;
                        break;
                case OPT_SYSTEM:
                        a->system = optarg;
                        break;
                case 'p':
                        a->profile = optarg;
                        break;
                case OPT_URL:
                        a->url = optarg;
                        break;
                case OPT_STATE_DIR:
                        a->state_dir = optarg;
                        break;
                case OPT_ISOLATION:
                        a->isolation = optarg;
                        break;
                case OPT_MCP_CONFIG:
                        a->mcp_config = optarg;
                        break;
                case 'h':
                        fputs(chat_help, stdout);
                        exit(0);
                default:
                        fputs("Try 'airlock chat --help'.\n", stderr);
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                for (int i = optind; i < argc; i++)
                        len += strlen(argv[i]) + 1;
                a->prompt = calloc(1, len);
                if (!a->prompt)
                        return -ENOMEM;
                for (int i = optind; i < argc; i++) {
                        if (i > optind)
                                strcat(a->prompt, " ");
                        strcat(a->prompt, argv[i]);
                }
                if (!a->prompt[0]) {
                        fprintf(stderr, "airlock chat: the prompt is empty\n");
                        return -EINVAL;
                }
        }
        return 0;
}

/* Writes s to f with every control character other than newline and tab shown as ^X, so that
 * code proposed by a model cannot drive the user's terminal with escape sequences. */
static void safe_fputs(const char *s, FILE *f)
{
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f) {
                        fputc('^', f);
                        fputc(*p == 0x7f ? '?' : *p + '@', f);
                } else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                        fputs("\xef\xbf\xbd", f); /* C1 controls */
                        p++;
                } else {
                        fputc(*p, f);
                }
        }
}

/* Asks about a call that needs approval: the code (run_python, run_shell), or the tool's name
 * and its arguments, is shown and the answer read on the controlling terminal, not on standard
 * input, which may carry the conversation itself. Without a terminal nothing can be approved,
 * so nothing runs. */
static enum chat_approval approve_on_tty(void *userdata, const char *tool, const char *code,
                                         json_t *args)
{
        _cleanup_fclose_ FILE *tty = NULL;
        _cleanup_free_ char *shown = NULL;
        char line[64];
        size_t n;

        (void) userdata;
        tty = fopen("/dev/tty", "r+e");
        if (!tty) {
                fprintf(stderr,
                        "airlock chat: --approve: no terminal to ask on (%m); declined "
                        "to run %s\n",
                        code ? "the code" : tool);
                return CHAT_DECLINE;
        }
        if (code) {
                fprintf(tty, "\n--- the model wants to run (%s) ---\n",
                        strcmp(tool, "run_shell") == 0        ? "shell"
                        : strcmp(tool, "run_javascript") == 0 ? "javascript or typescript"
                        : strcmp(tool, "run_r") == 0          ? "r"
                                                              : "python");
        } else {
                shown = json_dump_text(args, JSON_INDENT(2) | JSON_ENSURE_ASCII | JSON_SORT_KEYS,
                                       NULL);
                fputs("\n--- the model wants to call ", tty);
                safe_fputs(tool, tty);
                fputs(" with ---\n", tty);
                code = shown ? shown : "{}";
        }
        safe_fputs(code, tty);
        n = strlen(code);
        if (n == 0 || code[n - 1] != '\n')
                fputc('\n', tty);
        fputs("---\nRun it? [y/N] ", tty);
        fflush(tty);
        if (!fgets(line, sizeof(line), tty))
                return CHAT_DECLINE;
        if (strcasecmp(line, "y\n") == 0 || strcasecmp(line, "yes\n") == 0 ||
            strcasecmp(line, "y") == 0 || strcasecmp(line, "yes") == 0)
                return CHAT_RUN;
        fputs("declined\n", tty);
        return CHAT_DECLINE;
}

/* --approve puts code (run_python, run_shell) before the user; an internal tool whose server
 * says require_approval: always is put before the user whatever the flags (and declined when
 * there is no terminal to ask). */
static bool needs_approval(void *userdata, const char *tool)
{
        const struct chat_cli *st = userdata;

        return (st->approve && chat_tool_runs_code(tool)) || hub_tool_needs_approval(st->hub, tool);
}

/* Progress on stderr, one line per call: the tool and the first line of its code. */
static void on_call(void *userdata, const char *tool, json_t *args)
{
        struct chat_cli *st = userdata;
        const char *what = NULL;
        _cleanup_free_ char *line = NULL;

        if (args) {
                what = json_string_value(json_object_get(args, "code"));
                if (!what)
                        what = json_string_value(json_object_get(args, "command"));
                /* --approve has just shown the whole code. */
                if (what && st->approve)
                        return;
                if (!what)
                        what = json_string_value(json_object_get(args, "path"));
        }
        if (asprintf(&line, "airlock: %s%s%.*s%s\n", *tool ? tool : "(no tool)",
                     what   ? ": "
                     : args ? ""
                            : ": malformed call",
                     what ? (int) strcspn(what, "\n") > 100 ? 100 : (int) strcspn(what, "\n") : 0,
                     what ? what : "", what && strchr(what, '\n') ? " ..." : "") < 0) {
                line = NULL; /* undefined after a failure (asprintf(3)) */
                return;
        }
        cli_sink_write(&st->sink, 2, line, strlen(line));
}

/* Makes the directories of rel below dirfd (mkdir -p without following symlinks) and returns
 * an fd of the last one; rel's last component (the file name) is left alone. */
static int open_parent(int dirfd, const char *rel, const char **ret_name)
{
        _cleanup_close_ int cur = -EBADF;
        const char *p = rel, *slash;

        cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return -errno;
        while ((slash = strchr(p, '/'))) {
                char comp[256];
                size_t n = (size_t) (slash - p);
                int next;

                if (n == 0 || n >= sizeof(comp))
                        return -EINVAL;
                memcpy(comp, p, n);
                comp[n] = '\0';
                if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0)
                        return -EINVAL;
                if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
                        return -errno;
                next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0)
                        return -errno;
                (void) close(cur);
                cur = next;
                p = slash + 1;
        }
        if (!*p || strcmp(p, ".") == 0 || strcmp(p, "..") == 0)
                return -EINVAL;
        *ret_name = p;
        return TAKE_FD(cur);
}

static int open_output_dir(struct chat_cli *st)
{
        int r = cli_mkdir_p(st->output_dir), fd;

        if (r < 0)
                return r;
        fd = open(st->output_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Writes data to rel below the output directory: flags O_TRUNC to replace, O_EXCL to keep
 * what exists. The final component is never followed if it is a symlink. */
static int save_bytes(struct chat_cli *st, const char *rel, const void *data, size_t len, int flags)
{
        _cleanup_close_ int dirfd = -EBADF, parent = -EBADF, fd = -EBADF;
        const char *name;

        dirfd = open_output_dir(st);
        if (dirfd < 0)
                return dirfd;
        parent = open_parent(dirfd, rel, &name);
        if (parent < 0)
                return parent;
        fd = openat(parent, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, 0644);
        if (fd < 0)
                return -errno;
        return write_full(fd, data, len);
}

static int remember_saved(struct chat_cli *st, const char *rel)
{
        _cleanup_free_ char *shown = NULL;
        json_t *s;
        size_t i;

        if (asprintf(&shown, "%s%s", st->shown_dir, rel) < 0) {
                shown = NULL;
                return -ENOMEM;
        }
        json_array_foreach (st->saved, i, s)
                if (strcmp(json_string_value(s), shown) == 0)
                        return 0;
        return json_array_append_new(st->saved, json_string(shown));
}

static const char *image_extension(const char *mime)
{
        if (!mime || strcmp(mime, "image/png") == 0)
                return "png";
        if (strcmp(mime, "image/jpeg") == 0)
                return "jpg";
        if (strcmp(mime, "image/svg+xml") == 0)
                return "svg";
        if (strcmp(mime, "image/gif") == 0)
                return "gif";
        return "bin";
}

/* Copies the files the call created or changed, and its images, to the output directory;
 * returns a note for the model naming where the user finds them (or NULL). */
static char *on_result(void *userdata, const char *tool, json_t *args,
                       const struct tool_result *res)
{
        struct chat_cli *st = userdata;
        _cleanup_free_ char *note = NULL;
        size_t before = json_array_size(st->saved), i;
        json_t *f, *img;
        int r;

        (void) tool;
        (void) args;
        json_array_foreach (res->files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path"));
                const char *change = json_string_value(json_object_get(f, "change"));
                _cleanup_free_ char *data = NULL;
                struct airlock_error err = { { 0 } };
                size_t len = 0;

                /* "created" or "changed": anything that still exists. */
                if (!path || (change && strcmp(change, "deleted") == 0))
                        continue;
                r = toolbox_file_read(st->tb, path, SAVE_MAX, &data, &len, &err);
                if (r == -EISDIR)
                        continue;
                if (r >= 0)
                        r = save_bytes(st, path, data, len, O_TRUNC);
                if (r < 0) {
                        fprintf(stderr, "airlock chat: cannot save '%s': %s\n", path,
                                err.msg[0] ? err.msg : strerror(-r));
                        continue;
                }
                (void) remember_saved(st, path);
        }
        json_array_foreach (res->images, i, img) {
                const char *mime = json_string_value(json_object_get(img, "mime_type"));
                const char *b64 = json_string_value(json_object_get(img, "data"));
                _cleanup_free_ char *data = NULL;
                size_t len;
                char name[64];

                if (!b64 || base64_decode(b64, strlen(b64), &data, &len) < 0)
                        continue;
                do {
                        (void) snprintf(name, sizeof(name), "figure-%u.%s", ++st->n_images,
                                        image_extension(mime));
                        r = save_bytes(st, name, data, len, O_EXCL);
                } while (r == -EEXIST && st->n_images < 100000);
                if (r < 0) {
                        fprintf(stderr, "airlock chat: cannot save an image: %s\n", strerror(-r));
                        continue;
                }
                (void) remember_saved(st, name);
        }
        for (i = before; i < json_array_size(st->saved); i++) {
                const char *shown = json_string_value(json_array_get(st->saved, i));
                char *n = NULL;

                if (asprintf(&n, "%s%s%s",
                             note ? note : "saved for the user as: ", note ? ", " : "", shown) < 0)
                        return NULL;
                free(note);
                note = n;
        }
        return TAKE_PTR(note);
}

static int exit_status_for(int r)
{
        switch (r) {
        case -ECONNREFUSED:
                return EXIT_CHAT_UNREACHABLE;
        case -EPROTO:
                return EXIT_CHAT_HTTP;
        case -ETIMEDOUT:
                return EXIT_CHAT_TIMEOUT;
        case -EBADMSG:
        case -E2BIG:
                return EXIT_CHAT_MALFORMED;
        default:
                return EXIT_CHAT_FAILED;
        }
}

/* One user message through the loop: prints the answer and the files saved. Returns the exit
 * status of that answer. */
static int answer(struct chat_cli *st, struct llm_client *llm, json_t *request,
                  const struct chat_options *opts, const char *prompt)
{
        json_t *messages = json_object_get(request, "messages");
        size_t mark = json_array_size(messages);
        struct chat_turn turn = {};
        struct llm_error err = {};
        const char *content;
        json_t *s;
        size_t i;
        int r, status = 0;

        if (json_array_append_new(messages,
                                  json_pack("{s:s, s:s}", "role", "user", "content", prompt)) < 0)
                return EXIT_CHAT_FAILED;
        json_array_clear(st->saved);
        r = chat_run(llm, st->tb, request, opts, &turn, &err);
        if (r < 0) {
                if (err.msg[0])
                        fprintf(stderr, "airlock chat: %s\n", err.msg);
                else
                        fprintf(stderr, "airlock chat: %s\n", strerror(-r));
                /* The messages of a failed answer are dropped, so that the history stays a
                 * valid conversation for the next one. */
                while (json_array_size(messages) > mark)
                        (void) json_array_remove(messages, json_array_size(messages) - 1);
                return exit_status_for(r);
        }

        content = json_string_value(json_object_get(turn.message, "content"));
        switch (turn.outcome) {
        case CHAT_ANSWERED:
                if (content && *content) {
                        cli_sink_write(&st->sink, 1, content, strlen(content));
                        if (content[strlen(content) - 1] != '\n')
                                cli_sink_write(&st->sink, 1, "\n", 1);
                } else {
                        fprintf(stderr, "airlock chat: the model answered with no text\n");
                }
                break;
        case CHAT_NEEDS_APPROVAL:
        case CHAT_CALLER_TOOLS:
                /* Neither happens here (approve_on_tty answers every approval, and the CLI
                 * declares no caller tools); the unanswered calls are dropped all the same, so
                 * that the history stays valid. */
                fprintf(stderr, "airlock chat: the turn ended with calls nobody ran\n");
                while (json_array_size(messages) > mark)
                        (void) json_array_remove(messages, json_array_size(messages) - 1);
                status = EXIT_CHAT_FAILED;
                break;
        case CHAT_MAX_ROUNDS:
                fprintf(stderr,
                        "airlock chat: stopped after %u tool round%s: the model still wanted to "
                        "call tools (raise --max-rounds to allow more)\n",
                        turn.rounds, turn.rounds == 1 ? "" : "s");
                status = EXIT_CHAT_MAX_ROUNDS;
                break;
        }
        json_array_foreach (st->saved, i, s) {
                const char *p = json_string_value(s);
                cli_sink_write(&st->sink, 1, i == 0 ? "\nsaved: " : "saved: ", i == 0 ? 8 : 7);
                cli_sink_write(&st->sink, 1, p, strlen(p));
                cli_sink_write(&st->sink, 1, "\n", 1);
        }
        fflush(stdout);
        chat_turn_done(&turn);
        return status;
}

/* Without a PROMPT: one message per line until end of file (or /exit). On a terminal a failed
 * answer is reported and the conversation goes on; otherwise it ends with that status. */
static int converse(struct chat_cli *st, struct llm_client *llm, json_t *request,
                    const struct chat_options *opts)
{
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        bool tty = fd_is_tty(0);
        int status = 0;

        for (;;) {
                ssize_t n;

                if (tty) {
                        fputs("> ", stderr);
                        fflush(stderr);
                }
                n = getline(&line, &size, stdin);
                if (n < 0)
                        break;
                while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                        line[--n] = '\0';
                if (n == 0)
                        continue;
                if (strcmp(line, "/exit") == 0 || strcmp(line, "/quit") == 0)
                        break;
                status = answer(st, llm, request, opts, line);
                if (status != 0 && !tty)
                        return status;
                if (tty)
                        fputc('\n', stdout);
        }
        if (tty)
                fputc('\n', stderr);
        return tty ? 0 : status;
}

static char *default_system(const char *shown_dir)
{
        char *s;

        if (asprintf(&s,
                     "You can run code with the tools: Python (run_python, whose variables "
                     "persist between calls) and shell commands (run_shell) in a private sandbox "
                     "without network access, working directory /work. Use them whenever "
                     "computing, checking or producing a file is better than guessing. Files "
                     "you create in /work are saved for the user in %s; mention their names "
                     "in your answer.",
                     shown_dir) < 0)
                return NULL;
        return s;
}

/* The output directory as shown: "airlock-output/" for the default, else as given. */
static char *shown_output_dir(const char *dir)
{
        size_t n = strlen(dir);
        char *s;

        while (n > 1 && dir[n - 1] == '/')
                n--;
        if (strncmp(dir, "./", 2) == 0 && n > 2) {
                dir += 2;
                n -= 2;
        }
        if (asprintf(&s, "%.*s/", (int) n, dir) < 0)
                return NULL;
        return s;
}

int cmd_chat(int argc, char **argv)
{
        struct chat_args a = { .output_dir = DEFAULT_OUTPUT_DIR };
        struct chat_config cfg = {};
        struct airlock_error err = { { 0 } };
        struct chat_cli st = {};
        struct jail_features features;
        bool have_features = false;
        struct session_manager *mgr = NULL;
        struct hub *hub = NULL;
        struct cli_client *client = NULL;
        struct tools_backend *backend = NULL;
        struct llm_client *llm = NULL;
        json_t *request = NULL;
        _cleanup_free_ char *system = NULL;
        struct chat_hooks hooks = { .approve = approve_on_tty,
                                    .on_call = on_call,
                                    .on_result = on_result,
                                    .userdata = &st };
        struct chat_options opts = { .hooks = &hooks,
                                     .needs_approval = needs_approval,
                                     .policy_userdata = &st };
        enum jail_isolation mode;
        int r, status = EXIT_USAGE;

        cli_sink_init(&st.sink);
        /* The session manager's info lines (zygote ready, session created) would drown the
         * conversation; AIRLOCK_LOG=info or debug brings them back. */
        if (!getenv("AIRLOCK_LOG"))
                log_set_level(LOG_WARN);
        if (parse_args(argc, argv, &a) < 0)
                goto out;
        r = chat_config_resolve(a.base_url, a.model, a.api_key, &cfg);
        if (r < 0)
                goto out;
        if (!cfg.base_url) {
                fprintf(stderr, "airlock chat: no endpoint: give --base-url or set "
                                "AIRLOCK_LLM_BASE_URL (e.g. http://127.0.0.1:8000/v1)\n");
                goto out;
        }
        if (!cfg.model) {
                fprintf(stderr, "airlock chat: no model: give --model or set AIRLOCK_LLM_MODEL\n");
                goto out;
        }
        if (a.timeout_ms)
                cfg.timeout_ms = a.timeout_ms;
        if (a.max_rounds)
                cfg.max_rounds = a.max_rounds;
        opts.max_rounds = cfg.max_rounds;

        r = llm_client_new(&(struct llm_config){ .base_url = cfg.base_url,
                                                 .api_key = cfg.api_key,
                                                 .timeout_ms = cfg.timeout_ms },
                           &llm);
        if (r < 0) {
                fprintf(stderr, "airlock chat: cannot set up the HTTP client: %s\n", strerror(-r));
                goto out;
        }
        /* The key now lives in the client only. */
        if (cfg.api_key) {
                explicit_bzero(cfg.api_key, strlen(cfg.api_key));
                free(cfg.api_key);
                cfg.api_key = NULL;
        }
        opts.model = cfg.model;
        (void) signal(SIGPIPE, SIG_IGN);
        if (cli_hub_start("chat", a.mcp_config, &hub) < 0) {
                status = EXIT_USAGE;
                goto out;
        }
        cli_hub_wait(hub);
        st.hub = hub;

        if (a.url) {
                r = cli_client_new("chat", a.url, a.state_dir, &client);
                if (r < 0)
                        goto out;
                r = tools_backend_remote_new(client, &backend);
        } else {
                if (cli_isolation(a.isolation, &mode) < 0)
                        goto out;
                r = cli_probe_mode("chat", mode, &features);
                have_features = true;
                if (r < 0)
                        goto out;
                /* No warm pool: the sandbox starts at the model's first tool call, if any. */
                r = session_manager_new(
                        &(struct session_manager_config){ .features = &features,
                                                          .mode = mode,
                                                          .max_sessions = 4,
                                                          .pool_size = 0,
                                                          .default_stop_after_ms =
                                                                  24ULL * 3600 * 1000,
                                                          .max_stop_after_ms = 24ULL * 3600 * 1000,
                                                          .interrupt_grace_ms = 2000,
                                                          .hub = hub },
                        &mgr, &err);
                if (r < 0) {
                        fprintf(stderr, "airlock chat: cannot start sandboxes: %s\n", err.msg);
                        status = EXIT_CHAT_FAILED;
                        goto out;
                }
                r = tools_backend_local_new(mgr, &backend);
        }
        if (r < 0) {
                fprintf(stderr, "airlock chat: cannot set up the tools: %s\n", strerror(-r));
                status = EXIT_CHAT_FAILED;
                goto out;
        }
        r = toolbox_new(backend, &(struct toolbox_options){ .profile = a.profile, .hub = hub },
                        &st.tb);
        if (r < 0) {
                status = EXIT_CHAT_FAILED;
                goto out;
        }

        st.output_dir = a.output_dir;
        st.approve = a.approve;
        st.shown_dir = shown_output_dir(a.output_dir);
        st.saved = json_array();
        request = json_pack("{s:[]}", "messages");
        if (!st.shown_dir || !st.saved || !request) {
                status = EXIT_CHAT_FAILED;
                goto out;
        }
        if (!a.system) {
                system = default_system(st.shown_dir);
                if (!system) {
                        status = EXIT_CHAT_FAILED;
                        goto out;
                }
        }
        if ((system || *a.system) &&
            json_array_append_new(json_object_get(request, "messages"),
                                  json_pack("{s:s, s:s}", "role", "system", "content",
                                            system ? system : a.system)) < 0) {
                status = EXIT_CHAT_FAILED;
                goto out;
        }

        if (a.prompt)
                status = answer(&st, llm, request, &opts, a.prompt);
        else
                status = converse(&st, llm, request, &opts);
out:
        /* Ends the conversation's session (in-process or in the daemon). */
        toolbox_free(st.tb);
        tools_backend_free(backend);
        cli_client_free(client);
        session_manager_free(mgr);
        hub_free(hub);
        if (have_features)
                jail_features_done(&features);
        llm_client_free(llm);
        chat_config_done(&cfg);
        json_decref(request);
        json_decref(st.saved);
        free(st.shown_dir);
        free(a.prompt);
        return status;
}
