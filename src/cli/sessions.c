/* `airlock sessions`: the sessions of a running daemon, live and stopped, as a table or (--json)
 * as the objects GET /v1/sessions returns; and the lifecycle calls (new, stop, resume, rm, fork),
 * each a thin wrapper over its route (docs/API.md). The daemon decides; this file only
 * checks arguments, sends one request and words the answer. */
#include "cli.h"
#include "client.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/util.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FORK_MAX 32   /* SESSION_FORK_MAX of the daemon: checked here for a clear usage error */
#define IDS_MAX 256   /* session ids one `rm` takes */
#define PAIRS_MAX 256 /* --env and --metadata of one `new` (the API's own bound on env) */
#define LIFETIME_MAX_S (30u * 86400u) /* the API's bound on lifetime_s */

static const char sessions_help[] =
        "usage: airlock sessions [list] [--json] [--state STATE]\n"
        "       airlock sessions new [-p PROFILE] [--env K=V]... [--metadata K=V]...\n"
        "                            [--lifetime S] [--json]\n"
        "       airlock sessions stop ID [--json]\n"
        "       airlock sessions resume ID [--json]\n"
        "       airlock sessions rm ID... | --all-stopped\n"
        "       airlock sessions fork ID [-n N] [--json]\n"
        "\n"
        "Without a subcommand (or with list), lists the sessions of a running\n"
        "`airlock serve`, live and stopped: id, profile, state (idle, busy or stopped),\n"
        "number of executions, how long a live one has been idle, and when a stopped one\n"
        "stopped and how long until the daemon deletes it.\n"
        "\n"
        "subcommands:\n"
        "  new             create a session and print its id (the last line; with\n"
        "                  --json, the session object)\n"
        "  stop ID         save the session (its /work and its variables) to disk and\n"
        "                  free its sandbox; prints \"stopped ID\" and the names that\n"
        "                  could not be saved. Its next call resumes it.\n"
        "  resume ID       bring a stopped session back now; prints \"resumed ID\" (or\n"
        "                  \"ID was already live\") and what could not be restored\n"
        "  rm ID...        delete the sessions, live or stopped, and their saved state;\n"
        "                  with --all-stopped, every stopped session\n"
        "  fork ID         copy the session (variables and /work) into new sessions, each\n"
        "                  in its own sandbox, and print their ids, one per line; the\n"
        "                  session itself keeps running\n"
        "\n"
        "options (before or after the subcommand):\n"
        "      --state STATE     list only the idle, busy, stopped or live (idle and busy)\n"
        "                        sessions\n"
        "  -n N                  fork: how many new sessions, 1 to 32; default: 1\n"
        "  -p, --profile NAME    new: the profile; default: the daemon's default\n"
        "      --env K=V         new: an environment variable of the session's code\n"
        "                        (repeatable)\n"
        "      --metadata K=V    new: a label kept with the session, shown by --json and\n"
        "                        matched by GET /v1/sessions?metadata.K=V (repeatable)\n"
        "      --lifetime S      new: stop the session S from now whatever it does\n"
        "                        (e.g. 90, 30m, 2h; at most 30 days)\n"
        "      --all-stopped     rm: delete every stopped session\n"
        "      --json            print the daemon's answer instead: for the list, the\n"
        "                        session objects of GET /v1/sessions\n"
        "      --url URL         the daemon: http://HOST:PORT or unix:/PATH; also\n"
        "                        AIRLOCK_URL; default: " CLI_DEFAULT_URL "\n"
        "      --state-dir DIR   where the daemon keeps its token (when AIRLOCK_TOKEN is\n"
        "                        not set)\n"
        "\n"
        "exit status: 0 done; 1 the daemon refused (its error is printed: unknown or\n"
        "deleted session, busy session, disk full...) or could not be reached; 2 bad\n"
        "arguments.\n";

enum sessions_verb {
        VERB_LIST,
        VERB_NEW,
        VERB_STOP,
        VERB_RESUME,
        VERB_RM,
        VERB_FORK,
};

/* The call each verb makes on /v1/sessions/ID (the list: on /v1/sessions). */
struct sessions_route {
        const char *name;
        const char *method;
        const char *suffix;
};

static const struct sessions_route verbs[] = {
        [VERB_LIST] = { .name = "list", .method = "GET", .suffix = NULL },
        [VERB_NEW] = { .name = "new", .method = "POST", .suffix = NULL },
        [VERB_STOP] = { .name = "stop", .method = "POST", .suffix = "/stop" },
        [VERB_RESUME] = { .name = "resume", .method = "POST", .suffix = "/resume" },
        [VERB_RM] = { .name = "rm", .method = "DELETE", .suffix = "" },
        [VERB_FORK] = { .name = "fork", .method = "POST", .suffix = "/fork" },
};

struct sessions_args {
        enum sessions_verb verb;
        const char *id;           /* the one being acted on (messages) */
        const char *ids[IDS_MAX]; /* rm */
        size_t n_ids;
        const char *state;      /* list filter; NULL = every session */
        unsigned n;             /* fork; 0 = not given */
        const char *profile;    /* new */
        json_t *env, *metadata; /* new: objects, NULL when none given */
        double lifetime_s;      /* new; 0 = not given */
        bool all_stopped;       /* rm */
        const char *url;
        const char *state_dir;
        bool json;
};

/* Prints "airlock sessions: <why>" and the hint, for a usage error; returns -EINVAL. */
static __attribute__((format(printf, 1, 2))) int usage_error(const char *fmt, ...)
{
        va_list ap;

        fputs("airlock sessions: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs("\nTry 'airlock sessions --help'.\n", stderr);
        return -EINVAL;
}

/* Session ids go into the URL path: only the characters the daemon uses, and never "." or "..",
 * which curl would resolve into another route. */
static bool session_id_is_valid(const char *id)
{
        size_t len = strlen(id);

        if (len == 0 || len > 64 || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
                return false;
        return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
               len;
}

/* Adds "K=V" of --env or --metadata to *obj (made on first use). Returns 0 or -EINVAL after
 * printing why; the daemon checks names and values against its own rules. */
static int add_pair(json_t **obj, const char *opt, const char *arg)
{
        const char *eq = strchr(arg, '=');
        _cleanup_free_ char *key = NULL;

        if (!eq || eq == arg)
                return usage_error("%s '%s' is not KEY=VALUE", opt, arg);
        if (!*obj && !(*obj = json_object()))
                return -ENOMEM;
        if (json_object_size(*obj) >= PAIRS_MAX)
                return usage_error("at most %d %s", PAIRS_MAX, opt);
        key = strndup(arg, (size_t) (eq - arg));
        if (!key)
                return -ENOMEM;
        if (json_object_get(*obj, key))
                return usage_error("%s '%s' is given twice", opt, key);
        if (json_object_set_new(*obj, key, json_string(eq + 1)) < 0)
                return usage_error("%s '%s' is not valid UTF-8", opt, arg);
        return 0;
}

/* Returns 0, 1 when --help was printed, or -EINVAL after printing a usage error. */
static int parse_args(int argc, char **argv, struct sessions_args *a)
{
        enum {
                OPT_JSON = 256,
                OPT_STATE,
                OPT_URL,
                OPT_STATE_DIR,
                OPT_ENV,
                OPT_METADATA,
                OPT_LIFETIME,
                OPT_ALL_STOPPED,
        };
        static const struct option opts[] = {
                { "json", no_argument, NULL, OPT_JSON },
                { "state", required_argument, NULL, OPT_STATE },
                { "url", required_argument, NULL, OPT_URL },
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "profile", required_argument, NULL, 'p' },
                { "env", required_argument, NULL, OPT_ENV },
                { "metadata", required_argument, NULL, OPT_METADATA },
                { "lifetime", required_argument, NULL, OPT_LIFETIME },
                { "all-stopped", no_argument, NULL, OPT_ALL_STOPPED },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        static const char *const states[] = { "idle", "busy", "stopped", "live" };
        const char *pos[IDS_MAX + 2] = { NULL }, *n_arg = NULL, *lifetime = NULL;
        bool known, for_new = false;
        size_t n_pos = 0;
        int opt, r;

        /* The leading '-' hands over each argument that is not an option, in order, so options
         * may come before or after the subcommand even under POSIXLY_CORRECT. */
        while ((opt = getopt_long(argc, argv, "-hn:p:", opts, NULL)) != -1) {
                switch (opt) {
                case 1:
                        if (n_pos < ELEMENTSOF(pos))
                                pos[n_pos] = optarg;
                        n_pos++;
                        break;
                case 'n':
                        n_arg = optarg;
                        break;
                case 'p':
                        a->profile = optarg;
                        for_new = true;
                        break;
                case OPT_ENV:
                case OPT_METADATA:
                        r = add_pair(opt == OPT_ENV ? &a->env : &a->metadata,
                                     opt == OPT_ENV ? "--env" : "--metadata", optarg);
                        if (r < 0)
                                return r;
                        for_new = true;
                        break;
                case OPT_LIFETIME:
                        lifetime = optarg;
                        for_new = true;
                        break;
                case OPT_ALL_STOPPED:
                        a->all_stopped = true;
                        break;
                case OPT_JSON:
                        a->json = true;
                        break;
                case OPT_STATE:
                        a->state = optarg;
                        break;
                case OPT_URL:
                        a->url = optarg;
                        break;
                case OPT_STATE_DIR:
                        a->state_dir = optarg;
                        break;
                case 'h':
                        fputs(sessions_help, stdout);
                        return 1;
                default:
                        fputs("Try 'airlock sessions --help'.\n", stderr);
                        return -EINVAL;
                }
        }
        /* What follows "--". */
        for (; optind < argc; optind++) {
                if (n_pos < ELEMENTSOF(pos))
                        pos[n_pos] = argv[optind];
                n_pos++;
        }

        a->verb = VERB_LIST;
        if (n_pos > 0) {
                size_t i;

                for (i = 0; i < ELEMENTSOF(verbs); i++)
                        if (strcmp(pos[0], verbs[i].name) == 0)
                                break;
                if (i == ELEMENTSOF(verbs))
                        return usage_error("unknown subcommand '%s' (expected list, new, stop, "
                                           "resume, rm or fork)",
                                           pos[0]);
                a->verb = (enum sessions_verb) i;
        }
        if (a->verb == VERB_LIST || a->verb == VERB_NEW) {
                if (n_pos > 1)
                        return usage_error("unexpected argument '%s'", pos[1]);
        } else if (a->verb == VERB_RM) {
                if (n_pos < 2 && !a->all_stopped)
                        return usage_error("rm: missing the session ID (or --all-stopped)");
                if (n_pos > 1 && a->all_stopped)
                        return usage_error("rm: give session IDs or --all-stopped, not both");
                if (n_pos > IDS_MAX + 1)
                        return usage_error("rm: at most %d session IDs", IDS_MAX);
                for (size_t i = 1; i < n_pos; i++) {
                        if (!session_id_is_valid(pos[i]))
                                return usage_error("'%s' is not a session id", pos[i]);
                        a->ids[a->n_ids++] = pos[i];
                }
                a->id = a->n_ids ? a->ids[0] : NULL;
        } else {
                if (n_pos < 2)
                        return usage_error("%s: missing the session ID", verbs[a->verb].name);
                if (n_pos > 2)
                        return usage_error("%s: unexpected argument '%s' (one session ID only)",
                                           verbs[a->verb].name, pos[2]);
                if (!session_id_is_valid(pos[1]))
                        return usage_error("'%s' is not a session id", pos[1]);
                a->id = pos[1];
        }
        if (for_new && a->verb != VERB_NEW)
                return usage_error("--profile, --env, --metadata and --lifetime only apply to "
                                   "new, not %s",
                                   verbs[a->verb].name);
        if (a->all_stopped && a->verb != VERB_RM)
                return usage_error("--all-stopped only applies to rm");
        if (lifetime) {
                uint64_t ms;

                if (parse_duration_ms(lifetime, &ms) < 0 || ms < 1000 ||
                    ms > LIFETIME_MAX_S * 1000ULL)
                        return usage_error("--lifetime '%s' is not a duration from 1s to 30 days "
                                           "(e.g. 90, 30m, 2h)",
                                           lifetime);
                a->lifetime_s = (double) ms / 1000.0;
        }

        if (a->state) {
                if (a->verb != VERB_LIST)
                        return usage_error("--state only filters the list, not %s",
                                           verbs[a->verb].name);
                known = false;
                for (size_t i = 0; i < ELEMENTSOF(states); i++)
                        known |= strcmp(a->state, states[i]) == 0;
                if (!known)
                        return usage_error("--state must be idle, busy, stopped or live, not '%s'",
                                           a->state);
        }
        if (n_arg) {
                char *end;
                long n;

                if (a->verb != VERB_FORK)
                        return usage_error("-n only applies to fork");
                errno = 0;
                n = strtol(n_arg, &end, 10);
                if (n_arg[0] < '0' || n_arg[0] > '9' || *end || errno || n < 1 || n > FORK_MAX)
                        return usage_error("-n must be a whole number from 1 to %d, not '%s'",
                                           FORK_MAX, n_arg);
                a->n = (unsigned) n;
        }
        return 0;
}

/* Prints text from the daemon on the current line, with C0 and C1 controls (newlines too) shown
 * as ^X or U+FFFD: lost names and resume errors come from inside the sandbox and must not drive
 * the user's terminal (HOSTILE.md row 34). jansson has already checked it is valid UTF-8. */
static void put_safe(FILE *f, const char *text)
{
        const unsigned char *s = (const unsigned char *) text;

        for (; *s; s++) {
                if (*s < 0x20 || *s == 0x7f) {
                        fputc('^', f);
                        fputc(*s == 0x7f ? '?' : *s + '@', f);
                } else if (s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f) {
                        fputs("\xef\xbf\xbd", f);
                        s++;
                } else {
                        fputc(*s, f);
                }
        }
}

/* Prints "<prefix>a, b, c" for a non-empty array of strings; nothing otherwise. */
static void put_names(FILE *f, const char *prefix, json_t *names)
{
        json_t *name;
        size_t i;
        bool first = true;

        json_array_foreach (names, i, name) {
                if (!json_is_string(name))
                        continue;
                fputs(first ? prefix : ", ", f);
                put_safe(f, json_string_value(name));
                first = false;
        }
}

/* Prints why the daemon refused a call, as "airlock sessions: <its error>". A 404 on a
 * session's route says the session is not found, with the daemon's reason (unknown, deleted,
 * lost). */
static void print_refusal(struct cli_client *c, const struct cli_response *resp,
                          const struct sessions_args *a)
{
        _cleanup_(json_decrefp) json_t *obj = NULL;
        const char *msg, *reason;

        obj = resp->body ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
        msg = json_string_value(json_object_get(obj, "error"));
        reason = json_string_value(json_object_get(obj, "reason"));
        if (!msg || resp->status == 401) {
                /* Nothing of the daemon's to show, or a token problem: the client's wording,
                 * which names the URL and where the token was looked for. */
                cli_client_print_error(c, resp);
                return;
        }

        fputs("airlock sessions: ", stderr);
        if (resp->status == 404 && a->id && strncmp(msg, "no such route", 13) != 0) {
                fprintf(stderr, "session %s not found: ", a->id);
                put_safe(stderr, msg);
                if (reason && !strstr(msg, reason)) {
                        fputs(" (", stderr);
                        put_safe(stderr, reason);
                        fputc(')', stderr);
                }
        } else {
                put_safe(stderr, msg);
                if (resp->status == 404)
                        fputs(" (is the daemon older than this client?)", stderr);
                else if (resp->status == 507 && a->verb == VERB_STOP)
                        fputs(" (the session was not stopped and is still live)", stderr);
        }
        fputc('\n', stderr);
}

/* Sends one call and parses its answer. Returns 0 with *ret_reply (a JSON object; the caller
 * releases it with json_decref()), or -errno after printing why. */
static int sessions_call(struct cli_client *c, const struct sessions_args *a, const char *method,
                         const char *path, const char *body, json_t **ret_reply)
{
        struct cli_response resp = { 0 };
        json_t *reply;
        int r;

        r = cli_client_request(c, method, path, body, body ? strlen(body) : 0, NULL, NULL, &resp);
        if (r < 0)
                return r;
        if (resp.status < 200 || resp.status > 299) {
                print_refusal(c, &resp, a);
                free(resp.body);
                return -EPROTO;
        }
        reply = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
        free(resp.body);
        if (!json_is_object(reply)) {
                json_decref(reply);
                fprintf(stderr, "airlock sessions: the daemon's reply is not a JSON object\n");
                return -EBADMSG;
        }
        *ret_reply = reply;
        return 0;
}

static void print_json(json_t *v)
{
        _cleanup_free_ char *text = json_dump_text(v, JSON_INDENT(2) | JSON_ENSURE_ASCII, NULL);

        if (text)
                puts(text);
}

/* Seconds since the epoch of an RFC 3339 time ("2025-01-01T12:00:00.123Z", or with an offset
 * "+02:00"), or -1 (also for null or a missing field). */
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
        else if (s < 86400)
                (void) snprintf(buf, size, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
        else
                (void) snprintf(buf, size, "%ldd%02ldh", s / 86400, (s % 86400) / 3600);
}

static time_t time_field(json_t *s, const char *key)
{
        return parse_rfc3339(json_string_value(json_object_get(s, key)));
}

static void print_table(json_t *list)
{
        time_t now = time(NULL);
        json_t *s;
        size_t i;

        printf("%-28s %-16s %-7s %10s  %-8s  %-10s  %s\n", "ID", "PROFILE", "STATE", "EXECUTIONS",
               "IDLE FOR", "STOPPED", "DELETE IN");
        json_array_foreach (list, i, s) {
                const char *id = json_string_value(json_object_get(s, "id"));
                const char *profile = json_string_value(json_object_get(s, "profile"));
                const char *state = json_string_value(json_object_get(s, "state"));
                char idle[32] = "-", stopped[40] = "-", delete_in[32] = "-";

                if (state && strcmp(state, "stopped") == 0) {
                        time_t at = time_field(s, "stopped_at");
                        time_t del = time_field(s, "delete_at");

                        if (at >= 0) {
                                char ago[32];

                                /* A clock a little behind the daemon's is not "-". */
                                format_duration(now > at ? (long) (now - at) : 0, ago, sizeof(ago));
                                (void) snprintf(stopped, sizeof(stopped), "%s ago", ago);
                        }
                        if (del >= 0 && del <= now)
                                (void) snprintf(delete_in, sizeof(delete_in), "due");
                        else if (del >= 0)
                                format_duration((long) (del - now), delete_in, sizeof(delete_in));
                } else if (!state || strcmp(state, "busy") != 0) {
                        time_t last = time_field(s, "last_used_at");
                        format_duration(last < 0 ? -1 : (long) (now - last), idle, sizeof(idle));
                }
                printf("%-28s %-16s %-7s %10lld  %-8s  %-10s  %s\n", id ? id : "?",
                       profile ? profile : "?", state ? state : "?",
                       (long long) json_integer_value(json_object_get(s, "execution_count")), idle,
                       stopped, delete_in);
        }
}

static int sessions_list(struct cli_client *c, const struct sessions_args *a)
{
        _cleanup_(json_decrefp) json_t *reply = NULL;
        char path[64];
        json_t *list;
        int r;

        /* a->state is one of four words (parse_args): nothing to escape. */
        (void) snprintf(path, sizeof(path), "/v1/sessions%s%s", a->state ? "?state=" : "",
                        a->state ? a->state : "");
        r = sessions_call(c, a, "GET", path, NULL, &reply);
        if (r < 0)
                return r;
        list = json_object_get(reply, "sessions");
        if (!json_is_array(list)) {
                fprintf(stderr, "airlock sessions: the daemon's reply has no session list\n");
                return -EBADMSG;
        }

        if (a->json)
                print_json(list);
        else if (json_array_size(list) == 0)
                printf("no %s%ssessions\n", a->state ? a->state : "", a->state ? " " : "");
        else
                print_table(list);
        return 0;
}

/* stop, resume, rm and fork: one call on /v1/sessions/ID, then one line (fork: one id a line). */
static int sessions_act(struct cli_client *c, const struct sessions_args *a)
{
        _cleanup_(json_decrefp) json_t *reply = NULL;
        char path[128], body[32];
        const char *id, *error;
        json_t *list, *s;
        size_t i;
        int r;

        (void) snprintf(path, sizeof(path), "/v1/sessions/%s%s", a->id, verbs[a->verb].suffix);
        /* Stop and resume take no body; an empty one still sends "Content-Length: 0". */
        (void) snprintf(body, sizeof(body), "{\"n\": %u}", a->n ? a->n : 1);
        r = sessions_call(c, a, verbs[a->verb].method, path,
                          a->verb == VERB_FORK ? body
                          : a->verb == VERB_RM ? NULL
                                               : "",
                          &reply);
        if (r < 0)
                return r;
        if (a->json) {
                print_json(reply);
                return 0;
        }

        id = json_string_value(json_object_get(reply, "id"));
        if (!id)
                id = a->id;
        switch (a->verb) {
        case VERB_STOP:
                fputs("stopped ", stdout);
                put_safe(stdout, id);
                put_names(stdout, "; not saved: ", json_object_get(reply, "lost_names"));
                break;
        case VERB_RESUME:
                if (json_is_false(json_object_get(reply, "resumed"))) {
                        /* Nothing was restored, so nothing was lost: lost_names then only
                         * tells what the last checkpoint could not save (see --json). */
                        put_safe(stdout, id);
                        fputs(" was already live", stdout);
                } else {
                        fputs("resumed ", stdout);
                        put_safe(stdout, id);
                        put_names(stdout, "; not saved: ", json_object_get(reply, "lost_names"));
                }
                error = json_string_value(json_object_get(reply, "resume_error"));
                if (error) {
                        fputs("; resume error: ", stdout);
                        put_safe(stdout, error);
                }
                break;
        case VERB_RM:
                fputs("deleted ", stdout);
                put_safe(stdout, id);
                break;
        case VERB_FORK:
                list = json_object_get(reply, "sessions");
                if (!json_is_array(list) || json_array_size(list) == 0) {
                        fprintf(stderr, "airlock sessions: the daemon's reply has no new "
                                        "sessions\n");
                        return -EBADMSG;
                }
                /* The ids alone on stdout, for $(airlock sessions fork ...); what the copies
                 * lack goes to stderr, once (every copy lacks the same names). */
                json_array_foreach (list, i, s) {
                        const char *child = json_string_value(json_object_get(s, "id"));
                        put_safe(stdout, child ? child : "?");
                        fputc('\n', stdout);
                }
                s = json_object_get(json_array_get(list, 0), "lost_names");
                if (json_array_size(s) > 0) {
                        put_names(stderr, "airlock sessions: not copied: ", s);
                        fputc('\n', stderr);
                }
                return 0;
        case VERB_LIST:
        case VERB_NEW:
                break;
        }
        fputc('\n', stdout);
        return 0;
}

/* new: POST /v1/sessions; the id alone on the last line of stdout, for $(airlock sessions new). */
static int sessions_new(struct cli_client *c, const struct sessions_args *a)
{
        _cleanup_(json_decrefp) json_t *req = json_object(), *reply = NULL;
        _cleanup_free_ char *body = NULL;
        const char *id;
        int r;

        if (!req)
                return -ENOMEM;
        if (a->profile)
                (void) json_object_set_new(req, "profile", json_string(a->profile));
        if (a->env)
                (void) json_object_set(req, "env", a->env);
        if (a->metadata)
                (void) json_object_set(req, "metadata", a->metadata);
        if (a->lifetime_s > 0)
                (void) json_object_set_new(req, "lifetime_s", json_real(a->lifetime_s));
        body = json_dump_text(req, JSON_COMPACT, NULL);
        if (!body)
                return -ENOMEM;
        r = sessions_call(c, a, "POST", "/v1/sessions", body, &reply);
        if (r < 0)
                return r;
        if (a->json) {
                print_json(reply);
                return 0;
        }
        id = json_string_value(json_object_get(reply, "id"));
        if (!id) {
                fprintf(stderr, "airlock sessions: the daemon's reply has no session id\n");
                return -EBADMSG;
        }
        put_safe(stdout, id);
        fputc('\n', stdout);
        return 0;
}

/* rm: each id in turn (or every stopped session); one refusal does not stop the others. */
static int sessions_rm(struct cli_client *c, const struct sessions_args *a)
{
        _cleanup_(json_decrefp) json_t *listing = NULL, *replies = json_array();
        struct sessions_args one = *a;
        const char **ids = NULL;
        size_t n = a->n_ids;
        int r, failed = 0;

        if (!replies)
                return -ENOMEM;
        if (a->all_stopped) {
                json_t *list, *s;
                size_t i;

                r = sessions_call(c, a, "GET", "/v1/sessions?state=stopped", NULL, &listing);
                if (r < 0)
                        return r;
                list = json_object_get(listing, "sessions");
                n = json_array_size(list);
                ids = calloc(n ? n : 1, sizeof(*ids));
                if (!ids)
                        return -ENOMEM;
                json_array_foreach (list, i, s)
                        ids[i] = json_string_value(json_object_get(s, "id"));
                if (n == 0 && !a->json)
                        printf("no stopped sessions\n");
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_(json_decrefp) json_t *reply = NULL;
                char path[128];

                one.id = ids ? ids[i] : a->ids[i];
                if (!one.id || !session_id_is_valid(one.id)) {
                        failed = -EBADMSG;
                        continue;
                }
                (void) snprintf(path, sizeof(path), "/v1/sessions/%s", one.id);
                r = sessions_call(c, &one, "DELETE", path, NULL, &reply);
                if (r < 0) {
                        failed = r;
                        continue;
                }
                if (!a->json) {
                        fputs("deleted ", stdout);
                        put_safe(stdout, one.id);
                        fputc('\n', stdout);
                } else if (n == 1 && !a->all_stopped) {
                        print_json(reply);
                } else {
                        (void) json_array_append(replies, reply);
                }
        }
        free(ids);
        if (a->json && (n != 1 || a->all_stopped))
                print_json(replies);
        return failed;
}

int cmd_sessions(int argc, char **argv)
{
        struct sessions_args a = { 0 };
        struct cli_client *c = NULL;
        int r;

        r = parse_args(argc, argv, &a);
        if (r != 0) {
                json_decref(a.env);
                json_decref(a.metadata);
                return r < 0 ? EXIT_USAGE : 0;
        }
        if (cli_client_new("sessions", a.url, a.state_dir, &c) < 0)
                r = -EIO;
        else if (a.verb == VERB_LIST)
                r = sessions_list(c, &a);
        else if (a.verb == VERB_NEW)
                r = sessions_new(c, &a);
        else if (a.verb == VERB_RM)
                r = sessions_rm(c, &a);
        else
                r = sessions_act(c, &a);
        cli_client_free(c);
        json_decref(a.env);
        json_decref(a.metadata);
        return r < 0 ? EXIT_FAILURE : 0;
}
