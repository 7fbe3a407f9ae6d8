/* Profiles as data: this file turns profiles/NAME.json into a struct profile and refuses anything
 * it does not understand, naming the file and the key, so that a typo in a limit can never
 * silently fall back to a default. It also finds profiles on the search path described in
 * profile.h. It sits above src/base and below the session and CLI code that start sandboxes. */
#include "profile.h"

#include "config.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/util.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Profiles are small hand-written files; anything bigger is a mistake or an attack on the
 * parser, and refusing it early bounds the memory one load can take. */
#define PROFILE_FILE_MAX (1024u * 1024u)

/* Bounds on lists and names, so that a 1 MiB file cannot make the runner import thousands of
 * modules or the environment grow without limit. */
#define PROFILE_LIST_MAX 4096u
#define PROFILE_ENV_MAX 256u
#define MODULE_NAME_MAX 255u
#define ENV_NAME_MAX 255u

#define KEY_MAX 320

static const char *const top_level_keys[] = {
        "description", "languages", "preload", "imports",    "policy",   "limits",    "network",
        "rootfs",      "env",       "start",   "code_tools", "packages", "isolation",
};

#define TOP_LEVEL_KEYS_TEXT                                                                        \
        "description, languages, preload, imports, policy, limits, network, rootfs, env, start, "  \
        "code_tools, packages, isolation"

/* The loader and the interpreter read these before the runner installs the profile's import
 * policy, so a profile that sets them could load code the policy never sees. Every LD_ variable
 * is refused, not only LD_PRELOAD and LD_LIBRARY_PATH: LD_AUDIT loads libraries as well. */
static const char *const env_refused[] = {
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
};

enum limit_kind {
        LIMIT_SIZE,
        LIMIT_COUNT,
        LIMIT_CPUS,
        LIMIT_DURATION,
};

/* One entry per key of "limits". min and max are in the field's unit (bytes, millicpus, ms,
 * count); range is the same bounds as the user writes them, for error messages. */
struct limit_spec {
        const char *key;
        enum limit_kind kind;
        size_t offset;
        size_t width;
        uint64_t min;
        uint64_t max;
        const char *range;
};

#define KIB UINT64_C(1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)
#define TIB (GIB * 1024)

#define LIMIT(k, kind, field, lo, hi, text)                                                        \
        {                                                                                          \
                k, kind, offsetof(struct profile_limits, field),                                   \
                        sizeof(((struct profile_limits *) 0)->field), lo, hi, text                 \
        }

static const struct limit_spec limit_specs[] = {
        LIMIT("memory", LIMIT_SIZE, memory_bytes, 16 * MIB, TIB, "between 16MiB and 1TiB"),
        LIMIT("cpus", LIMIT_CPUS, cpu_millicpus, 10, 1024000, "between 0.01 and 1024"),
        LIMIT("pids", LIMIT_COUNT, pids, 8, 65536, "between 8 and 65536"),
        LIMIT("timeout", LIMIT_DURATION, timeout_ms, 1, 24 * 3600 * 1000,
              "between 1ms and 86400s (24 hours)"),
        LIMIT("output", LIMIT_SIZE, output_bytes, KIB, GIB, "between 1KiB and 1GiB"),
        LIMIT("workspace", LIMIT_SIZE, workspace_bytes, MIB, TIB, "between 1MiB and 1TiB"),
        LIMIT("tmp", LIMIT_SIZE, tmp_bytes, MIB, TIB, "between 1MiB and 1TiB"),
        LIMIT("files", LIMIT_COUNT, files, 64, 65536, "between 64 and 65536"),
        LIMIT("tool_calls", LIMIT_COUNT, tool_calls, 1, 100000, "between 1 and 100000"),
};

#define LIMIT_KEYS_TEXT "memory, cpus, pids, timeout, output, workspace, tmp, files, tool_calls"

/* What every parse step needs to report an error: the file being read and where to write. */
struct parse_ctx {
        const char *source;
        struct airlock_error *err;
};

/* Room for a quoted user value in a message: long values are cut, since the message only needs
 * enough to find the value in the file. */
struct quoted {
        char s[80];
};

static void closedirp(DIR **d)
{
        if (*d)
                (void) closedir(*d);
}

static void profile_freep(struct profile **p)
{
        (void) profile_free(*p);
}

/* Renders s between double quotes with control and non-ASCII bytes escaped, so that a value
 * from the file cannot inject newlines or terminal escapes into a message that gets logged. */
static const char *quote(struct quoted *q, const char *s)
{
        size_t o = 0, room = sizeof(q->s) - 5; /* closing quote, "...", NUL */

        q->s[o++] = '"';
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                if (o + 4 > room) {
                        memcpy(q->s + o, "...", 3);
                        o += 3;
                        break;
                }
                if (c == '"' || c == '\\') {
                        q->s[o++] = '\\';
                        q->s[o++] = (char) c;
                } else if (c < 0x20 || c >= 0x7f) {
                        o += (size_t) snprintf(q->s + o, 5, "\\x%02x", c);
                } else {
                        q->s[o++] = (char) c;
                }
        }
        q->s[o++] = '"';
        q->s[o] = '\0';
        return q->s;
}

static const char *json_type_text(const json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return "an object";
        case JSON_ARRAY:
                return "an array";
        case JSON_STRING:
                return "a string";
        case JSON_INTEGER:
                return "an integer";
        case JSON_REAL:
                return "a number";
        case JSON_TRUE:
                return "true";
        case JSON_FALSE:
                return "false";
        case JSON_NULL:
                return "null";
        }
        return "an unknown value";
}

/* Sets "SOURCE: KEY: MESSAGE" and returns -EINVAL. */
static int fail(const struct parse_ctx *ctx, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int fail(const struct parse_ctx *ctx, const char *key, const char *fmt, ...)
{
        char msg[AIRLOCK_ERROR_MAX];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return airlock_error_set(ctx->err, -EINVAL, "%s: %s: %s", ctx->source, key, msg);
}

static int fail_type(const struct parse_ctx *ctx, const char *key, const char *expected,
                     const json_t *v)
{
        return fail(ctx, key, "expected %s, got %s", expected, json_type_text(v));
}

bool profile_name_is_valid(const char *name)
{
        size_t len;

        if (!name)
                return false;
        len = strlen(name);
        if (len < 1 || len > 64)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = name[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '_' && c != '-')))
                        return false;
        }
        return true;
}

static bool is_ident_start(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident_char(char c)
{
        return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* A dotted Python module name in ASCII, e.g. "matplotlib.pyplot". Non-ASCII identifiers are
 * legal Python but no module a profile would name uses them, and refusing them keeps look-alike
 * characters out of the allow-list. */
static bool module_name_is_valid(const char *s)
{
        size_t len = strlen(s);

        if (len == 0 || len > MODULE_NAME_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                bool segment_start = i == 0 || s[i - 1] == '.';
                if (segment_start ? !is_ident_start(s[i]) : !(is_ident_char(s[i]) || s[i] == '.'))
                        return false;
        }
        return s[len - 1] != '.';
}

static bool env_name_is_valid(const char *s)
{
        size_t len = strlen(s);

        if (len == 0 || len > ENV_NAME_MAX || !is_ident_start(s[0]))
                return false;
        for (size_t i = 1; i < len; i++)
                if (!is_ident_char(s[i]))
                        return false;
        return true;
}

static bool env_name_is_refused(const char *s)
{
        if (strncmp(s, "LD_", 3) == 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(env_refused); i++)
                if (strcmp(s, env_refused[i]) == 0)
                        return true;
        return false;
}

static int parse_description(const struct parse_ctx *ctx, const json_t *v, char **ret)
{
        char *s;

        if (!json_is_string(v))
                return fail_type(ctx, "description", "a non-empty string", v);
        if (json_string_length(v) == 0)
                return fail(ctx, "description", "expected a non-empty string, got an empty string");
        s = strdup(json_string_value(v));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

bool profile_allows_language(const struct profile *p, const char *language)
{
        if (!language || strcmp(language, "python") == 0)
                return p->lang_python;
        if (strcmp(language, "bash") == 0)
                return p->lang_bash;
        /* TypeScript comes with JavaScript and the other way round: the same REPL runs both,
         * and any JavaScript is a TypeScript cell, so neither could be refused alone. */
        if (strcmp(language, "javascript") == 0 || strcmp(language, "typescript") == 0)
                return p->lang_javascript;
        if (strcmp(language, "r") == 0)
                return p->lang_r;
        return false;
}

const char *profile_languages_text(const struct profile *p, char *buf, size_t size)
{
        (void) snprintf(buf, size, "%s%s%s%s%s%s%s", p->lang_python ? "python" : "",
                        p->lang_python && p->lang_bash ? ", " : "", p->lang_bash ? "bash" : "",
                        p->lang_javascript && (p->lang_python || p->lang_bash) ? ", " : "",
                        p->lang_javascript ? "javascript, typescript" : "",
                        p->lang_r && (p->lang_python || p->lang_bash || p->lang_javascript) ? ", "
                                                                                            : "",
                        p->lang_r ? "r" : "");
        return buf;
}

#define LANGUAGE_NAMES "\"python\", \"bash\", \"javascript\", \"typescript\" or \"r\""

static int parse_languages(const struct parse_ctx *ctx, const json_t *v, struct profile *p)
{
        static const char expected[] = "a non-empty array of \"python\", \"bash\", \"javascript\", "
                                       "\"typescript\" and \"r\"";
        const json_t *item;
        bool js = false, ts = false;
        size_t i;

        if (!json_is_array(v))
                return fail_type(ctx, "languages", expected, v);
        if (json_array_size(v) == 0)
                return fail(ctx, "languages", "expected %s, got an empty array", expected);
        json_array_foreach (v, i, item) {
                char key[KEY_MAX];
                struct quoted q;
                bool *flag;

                (void) snprintf(key, sizeof(key), "languages[%zu]", i);
                if (!json_is_string(item))
                        return fail_type(ctx, key, LANGUAGE_NAMES, item);
                if (strcmp(json_string_value(item), "python") == 0)
                        flag = &p->lang_python;
                else if (strcmp(json_string_value(item), "bash") == 0)
                        flag = &p->lang_bash;
                else if (strcmp(json_string_value(item), "javascript") == 0)
                        flag = &js;
                else if (strcmp(json_string_value(item), "typescript") == 0)
                        flag = &ts;
                else if (strcmp(json_string_value(item), "r") == 0)
                        flag = &p->lang_r;
                else
                        return fail(ctx, key, "expected " LANGUAGE_NAMES ", got %s",
                                    quote(&q, json_string_value(item)));
                if (*flag)
                        return fail(ctx, key, "%s is listed twice",
                                    quote(&q, json_string_value(item)));
                *flag = true;
        }
        /* Either one allows both (profile_allows_language()). */
        p->lang_javascript = js || ts;
        return 0;
}

/* Parses an array of module names into a NULL-terminated vector. */
/* What one kind of name list accepts, for parse_names(). */
struct name_kind {
        const char *plural;   /* "module names" */
        const char *singular; /* "a module name" */
        bool (*valid)(const char *s);
        const char *expected; /* what the message says a bad one should be */
};

/* An array of names of one kind, as a NULL-terminated vector. */
static int parse_names(const struct parse_ctx *ctx, const char *name, const json_t *v,
                       const struct name_kind *kind, char ***ret)
{
        _cleanup_strv_free_ char **names = NULL;
        const json_t *item;
        size_t i, n;
        char expected[64];

        (void) snprintf(expected, sizeof(expected), "an array of %s", kind->plural);
        if (!json_is_array(v))
                return fail_type(ctx, name, expected, v);
        n = json_array_size(v);
        if (n > PROFILE_LIST_MAX)
                return fail(ctx, name, "expected at most %u %s, got %zu", PROFILE_LIST_MAX,
                            kind->plural, n);
        names = calloc(n + 1, sizeof(char *));
        if (!names)
                return -ENOMEM;
        json_array_foreach (v, i, item) {
                char key[KEY_MAX];
                struct quoted q;

                (void) snprintf(key, sizeof(key), "%s[%zu]", name, i);
                if (!json_is_string(item))
                        return fail_type(ctx, key, kind->singular, item);
                if (!kind->valid(json_string_value(item)))
                        return fail(ctx, key, "expected %s, got %s", kind->expected,
                                    quote(&q, json_string_value(item)));
                names[i] = strdup(json_string_value(item));
                if (!names[i])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(names);
        return 0;
}

static const struct name_kind module_names = {
        .plural = "module names",
        .singular = "a module name",
        .valid = module_name_is_valid,
        .expected = "a dotted Python module name such as \"matplotlib.pyplot\"",
};

static int parse_modules(const struct parse_ctx *ctx, const char *name, const json_t *v,
                         char ***ret)
{
        return parse_names(ctx, name, v, &module_names, ret);
}

bool profile_tool_pattern_is_valid(const char *s)
{
        size_t n = strlen(s);
        const char *slash = strchr(s, '/');

        if (strcmp(s, "*") == 0)
                return true;
        if (slash) {
                /* a server name, "/", "*": every tool of one server */
                if (strcmp(slash, "/*") != 0 || slash == s || slash - s > 48)
                        return false;
                n = (size_t) (slash - s);
        } else if (n == 0 || n > 64) {
                return false;
        }
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' ||
                      (slash && s[i] == '.')))
                        return false;
        return true;
}

/* "code_tools": the internal tools the sessions' code may call (Code Mode). */
static const struct name_kind tool_names = {
        .plural = "tool names",
        .singular = "a tool name",
        .valid = profile_tool_pattern_is_valid,
        .expected = "a tool name (as GET /v1/tools names it), \"SERVER/*\" or \"*\"",
};

/* One of two words: 0 for the first, 1 for the second (the values of an enum of two). */
static int parse_either(const struct parse_ctx *ctx, const char *key, const json_t *v,
                        const char *first, const char *second, int *ret)
{
        char expected[64];
        struct quoted q;

        (void) snprintf(expected, sizeof(expected), "\"%s\" or \"%s\"", first, second);
        if (!json_is_string(v))
                return fail_type(ctx, key, expected, v);
        if (strcmp(json_string_value(v), first) == 0)
                *ret = 0;
        else if (strcmp(json_string_value(v), second) == 0)
                *ret = 1;
        else
                return fail(ctx, key, "expected %s, got %s", expected,
                            quote(&q, json_string_value(v)));
        return 0;
}

static int parse_policy(const struct parse_ctx *ctx, const json_t *v, enum profile_policy *ret)
{
        int which, r = parse_either(ctx, "policy", v, "none", "restricted", &which);

        if (r >= 0)
                *ret = which ? PROFILE_POLICY_RESTRICTED : PROFILE_POLICY_NONE;
        return r;
}

static int parse_isolation(const struct parse_ctx *ctx, const json_t *v,
                           enum profile_isolation *ret)
{
        int which, r = parse_either(ctx, "isolation", v, "namespaces", "microvm", &which);

        if (r >= 0)
                *ret = which ? PROFILE_ISOLATION_MICROVM : PROFILE_ISOLATION_NAMESPACES;
        return r;
}

static int parse_start(const struct parse_ctx *ctx, const json_t *v, enum profile_start *ret)
{
        int which, r = parse_either(ctx, "start", v, "zygote", "cold", &which);

        if (r >= 0)
                *ret = which ? PROFILE_START_COLD : PROFILE_START_ZYGOTE;
        return r;
}

/* An absolute directory path of the host (rootfs, packages.wheels). */
static int parse_dir_path(const struct parse_ctx *ctx, const char *key, const json_t *v, char **ret)
{
        const char *s, *c;
        struct quoted q;
        char *copy;

        if (!json_is_string(v))
                return fail_type(ctx, key, "an absolute directory path", v);
        s = json_string_value(v);
        if (s[0] != '/' || json_string_length(v) >= 4096)
                return fail(ctx, key, "expected an absolute directory path, got %s", quote(&q, s));
        /* A ".." component makes the path depend on symlinks outside it; a profile names the
         * directory it means. */
        for (c = s; (c = strstr(c, "..")); c += 2)
                if (c[-1] == '/' && (c[2] == '/' || c[2] == '\0'))
                        return fail(ctx, key,
                                    "expected an absolute path without \"..\" components, "
                                    "got %s",
                                    quote(&q, s));
        copy = strdup(s);
        if (!copy)
                return -ENOMEM;
        *ret = copy;
        return 0;
}

static int parse_rootfs(const struct parse_ctx *ctx, const json_t *v, char **ret)
{
        return parse_dir_path(ctx, "rootfs", v, ret);
}

static int parse_env(const struct parse_ctx *ctx, const json_t *v, char ***ret)
{
        _cleanup_strv_free_ char **env = NULL;
        const char *name;
        const json_t *value;
        size_t i = 0, n;

        if (!json_is_object(v))
                return fail_type(ctx, "env", "an object of \"NAME\": \"value\" strings", v);
        n = json_object_size(v);
        if (n > PROFILE_ENV_MAX)
                return fail(ctx, "env", "expected at most %u variables, got %zu", PROFILE_ENV_MAX,
                            n);
        env = calloc(n + 1, sizeof(char *));
        if (!env)
                return -ENOMEM;
        json_object_foreach ((json_t *) v, name, value) {
                char key[KEY_MAX];
                struct quoted q;

                if (!env_name_is_valid(name))
                        return fail(ctx, "env",
                                    "expected variable names matching [A-Za-z_][A-Za-z0-9_]*, "
                                    "got %s",
                                    quote(&q, name));
                (void) snprintf(key, sizeof(key), "env.%s", name);
                if (env_name_is_refused(name))
                        return fail(ctx, key,
                                    "a profile may not set %s: %s reads it before the runner "
                                    "installs the import policy, so it could load code the "
                                    "profile does not allow",
                                    name,
                                    strncmp(name, "LD_", 3) == 0 ? "the dynamic loader" : "Python");
                if (!json_is_string(value))
                        return fail_type(ctx, key, "a string", value);
                if (asprintf(&env[i], "%s=%s", name, json_string_value(value)) < 0) {
                        env[i] = NULL;
                        return -ENOMEM;
                }
                i++;
        }
        *ret = TAKE_PTR(env);
        return 0;
}

static void limit_store(const struct limit_spec *spec, struct profile_limits *l, uint64_t value)
{
        char *field = (char *) l + spec->offset;

        if (spec->width == sizeof(uint32_t)) {
                uint32_t v32 = (uint32_t) value;
                memcpy(field, &v32, sizeof(v32));
        } else {
                assert(spec->width == sizeof(uint64_t));
                memcpy(field, &value, sizeof(value));
        }
}

/* Sizes are a string with a unit ("512MiB") or an integer number of bytes. */
static int parse_limit_size(const struct parse_ctx *ctx, const char *key,
                            const struct limit_spec *spec, const json_t *v, uint64_t *ret)
{
        static const char expected[] = "a size such as \"512MiB\" or an integer number of bytes";
        struct quoted q;
        uint64_t bytes;
        int r;

        if (json_is_integer(v)) {
                if (json_integer_value(v) < 0)
                        return fail(ctx, key, "expected a size %s, got %" JSON_INTEGER_FORMAT,
                                    spec->range, json_integer_value(v));
                bytes = (uint64_t) json_integer_value(v);
        } else if (json_is_string(v)) {
                r = parse_size(json_string_value(v), &bytes);
                if (r == -ERANGE)
                        return fail(ctx, key, "expected a size %s, got %s", spec->range,
                                    quote(&q, json_string_value(v)));
                if (r < 0)
                        return fail(ctx, key, "expected %s, got %s", expected,
                                    quote(&q, json_string_value(v)));
        } else {
                return fail_type(ctx, key, expected, v);
        }
        if (bytes < spec->min || bytes > spec->max) {
                if (json_is_string(v))
                        return fail(ctx, key, "expected a size %s, got %s", spec->range,
                                    quote(&q, json_string_value(v)));
                return fail(ctx, key, "expected a size %s, got %" PRIu64 " bytes", spec->range,
                            bytes);
        }
        *ret = bytes;
        return 0;
}

static int parse_limit_count(const struct parse_ctx *ctx, const char *key,
                             const struct limit_spec *spec, const json_t *v, uint64_t *ret)
{
        json_int_t n;

        if (!json_is_integer(v))
                return fail_type(ctx, key, "an integer", v);
        n = json_integer_value(v);
        if (n < 0 || (uint64_t) n < spec->min || (uint64_t) n > spec->max)
                return fail(ctx, key, "expected an integer %s, got %" JSON_INTEGER_FORMAT,
                            spec->range, n);
        *ret = (uint64_t) n;
        return 0;
}

/* cpus is a number of CPUs, fractions allowed, stored as millicpus for cgroup cpu.max. */
static int parse_limit_cpus(const struct parse_ctx *ctx, const char *key,
                            const struct limit_spec *spec, const json_t *v, uint64_t *ret)
{
        double m;

        if (!json_is_number(v))
                return fail_type(ctx, key, "a number of CPUs such as 1 or 0.5", v);
        m = json_number_value(v) * 1000.0;
        /* The comparison is written so that NaN fails it; the slack absorbs binary rounding in
         * values such as 0.01. */
        if (!(m >= (double) spec->min - 1e-6 && m <= (double) spec->max + 1e-6))
                return fail(ctx, key, "expected a number of CPUs %s, got %g", spec->range,
                            json_number_value(v));
        *ret = (uint64_t) (m + 0.5);
        return 0;
}

/* timeout is a duration string ("30s", "250ms", "2m") or a number of seconds. */
static int parse_limit_duration(const struct parse_ctx *ctx, const char *key,
                                const struct limit_spec *spec, const json_t *v, uint64_t *ret)
{
        static const char expected[] = "a duration such as \"30s\", \"250ms\" or \"2m\", or a "
                                       "number of seconds";
        struct quoted q;
        uint64_t ms;
        int r;

        if (json_is_string(v)) {
                r = parse_duration_ms(json_string_value(v), &ms);
                if (r == -ERANGE)
                        ms = UINT64_MAX;
                else if (r < 0)
                        return fail(ctx, key, "expected %s, got %s", expected,
                                    quote(&q, json_string_value(v)));
                if (ms < spec->min || ms > spec->max)
                        return fail(ctx, key, "expected a duration %s, got %s", spec->range,
                                    quote(&q, json_string_value(v)));
        } else if (json_is_number(v)) {
                double m = json_number_value(v) * 1000.0;
                if (!(m >= (double) spec->min - 1e-6 && m <= (double) spec->max + 1e-6))
                        return fail(ctx, key, "expected a duration %s, got %g seconds", spec->range,
                                    json_number_value(v));
                ms = (uint64_t) (m + 0.5);
        } else {
                return fail_type(ctx, key, expected, v);
        }
        *ret = ms;
        return 0;
}

static int parse_limits(const struct parse_ctx *ctx, const json_t *v, struct profile_limits *l)
{
        const char *name;
        const json_t *value;
        int r;

        if (!json_is_object(v))
                return fail_type(ctx, "limits", "an object", v);
        json_object_foreach ((json_t *) v, name, value) {
                const struct limit_spec *spec = NULL;
                char key[KEY_MAX];
                struct quoted q;
                uint64_t n = 0;

                for (size_t i = 0; i < ELEMENTSOF(limit_specs); i++)
                        if (strcmp(name, limit_specs[i].key) == 0)
                                spec = &limit_specs[i];
                if (!spec)
                        return fail(ctx, "limits",
                                    "unknown key %s; expected one of " LIMIT_KEYS_TEXT,
                                    quote(&q, name));

                (void) snprintf(key, sizeof(key), "limits.%s", spec->key);
                switch (spec->kind) {
                case LIMIT_SIZE:
                        r = parse_limit_size(ctx, key, spec, value, &n);
                        break;
                case LIMIT_COUNT:
                        r = parse_limit_count(ctx, key, spec, value, &n);
                        break;
                case LIMIT_CPUS:
                        r = parse_limit_cpus(ctx, key, spec, value, &n);
                        break;
                case LIMIT_DURATION:
                        r = parse_limit_duration(ctx, key, spec, value, &n);
                        break;
                default:
                        assert(false);
                        return -EINVAL;
                }
                if (r < 0)
                        return r;
                limit_store(spec, l, n);
        }
        return 0;
}

void profile_limits_default(struct profile_limits *ret_limits)
{
        *ret_limits = (struct profile_limits){
                .memory_bytes = GIB,
                .cpu_millicpus = 1000,
                .pids = 256,
                .timeout_ms = 30 * 1000,
                .output_bytes = MIB,
                .workspace_bytes = 256 * MIB,
                .tmp_bytes = 64 * MIB,
                .files = 1024,
                .tool_calls = 1000,
        };
}

/* --- "packages" ------------------------------------------------------------------------- */

#define PACKAGES_KEYS_TEXT "index_url, trusted_host, install, wheels"
#define INDEX_URL_MAX 2048u
#define HOST_NAME_MAX_LEN 253u
#define REQUIREMENT_MAX 256u
#define TRUSTED_HOSTS_MAX 64u

/* A URL's or trusted_host's host: a DNS name ([A-Za-z0-9.-], no empty label at either end),
 * an IPv4 address (a name of digits and dots, checked as an address by the caller), or an
 * IPv6 address in brackets. len excludes what follows the host. */
static bool host_is_valid(const char *s, size_t len)
{
        char buf[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;

        if (len == 0)
                return false;
        if (s[0] == '[') {
                if (len < 3 || s[len - 1] != ']' || len - 2 >= sizeof(buf))
                        return false;
                memcpy(buf, s + 1, len - 2);
                buf[len - 2] = '\0';
                return inet_pton(AF_INET6, buf, &a6) == 1;
        }
        if (len > HOST_NAME_MAX_LEN || s[0] == '.' || s[0] == '-' || s[len - 1] == '-')
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
                if (!ok || (c == '.' && i + 1 < len && s[i + 1] == '.'))
                        return false;
        }
        return true;
}

/* "host" or "host:port" (port 1..65535). Sets *ret_host_len and *ret_port (0 when absent). */
static bool host_port_split(const char *s, size_t *ret_host_len, unsigned *ret_port)
{
        const char *colon = s[0] == '[' ? strstr(s, "]:") : strrchr(s, ':');
        size_t host_len = strlen(s);
        unsigned port = 0;

        if (colon) {
                const char *d = s[0] == '[' ? colon + 2 : colon + 1;
                host_len = (size_t) (d - s) - 1;
                if (!*d || strlen(d) > 5)
                        return false;
                for (; *d; d++) {
                        if (*d < '0' || *d > '9')
                                return false;
                        port = port * 10 + (unsigned) (*d - '0');
                }
                if (port < 1 || port > 65535)
                        return false;
        }
        if (!host_is_valid(s, host_len))
                return false;
        *ret_host_len = host_len;
        *ret_port = port;
        return true;
}

/* Whether the profile's network lets its sessions reach host:port through the proxy: a name
 * through its name rules, an address literal through its address rules (policy.h). host is
 * as written in the URL (an IPv6 address in brackets). */
static bool network_allows(const struct egress_policy *net, const char *host, size_t host_len,
                           uint16_t port)
{
        char name[HOST_NAME_MAX_LEN + 1];
        struct sockaddr_in sin = { .sin_family = AF_INET };
        struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };

        if (!net || net->mode != EGRESS_MODE_ALLOW || host_len > HOST_NAME_MAX_LEN)
                return false;
        if (host[0] == '[') {
                memcpy(name, host + 1, host_len - 2);
                name[host_len - 2] = '\0';
                return inet_pton(AF_INET6, name, &sin6.sin6_addr) == 1 &&
                       egress_policy_allows_addr(net, (const struct sockaddr *) &sin6, port);
        }
        for (size_t i = 0; i < host_len; i++)
                name[i] = (char) tolower((unsigned char) host[i]);
        name[host_len] = '\0';
        if (host_len > 1 && name[host_len - 1] == '.')
                name[host_len - 1] = '\0'; /* the root's dot: the same name */
        if (inet_pton(AF_INET, name, &sin.sin_addr) == 1)
                return egress_policy_allows_addr(net, (const struct sockaddr *) &sin, port);
        return egress_policy_allows_name(net, name, port);
}

/* packages.index_url: an http or https URL without credentials or whitespace, whose host and
 * port the profile's network allows when it allows any (else nothing in a session could reach
 * it); a profile without network uses it only to build its layer. */
static int parse_index_url(const struct parse_ctx *ctx, const json_t *v,
                           const struct egress_policy *net, char **ret)
{
        static const char key[] = "packages.index_url";
        const char *s, *authority, *end;
        char hostport[HOST_NAME_MAX_LEN + 16];
        size_t host_len, len;
        unsigned port;
        bool https;
        struct quoted q;

        if (!json_is_string(v))
                return fail_type(ctx, key, "an http:// or https:// URL", v);
        s = json_string_value(v);
        len = json_string_length(v);
        if (len > INDEX_URL_MAX)
                return fail(ctx, key, "expected a URL of at most %u bytes, got %zu bytes",
                            INDEX_URL_MAX, len);
        for (size_t i = 0; i < len; i++)
                if ((unsigned char) s[i] <= 0x20 || (unsigned char) s[i] >= 0x7f)
                        return fail(ctx, key,
                                    "expected a URL without spaces, control or non-ASCII "
                                    "characters (percent-encode them), got %s",
                                    quote(&q, s));
        https = strncasecmp(s, "https://", 8) == 0;
        if (!https && strncasecmp(s, "http://", 7) != 0)
                return fail(ctx, key, "expected an http:// or https:// URL, got %s", quote(&q, s));
        authority = s + (https ? 8 : 7);
        end = authority + strcspn(authority, "/?#");
        if (memchr(authority, '@', (size_t) (end - authority)))
                return fail(ctx, key,
                            "a URL with credentials (user@host) is refused: every session's code "
                            "could read them from PIP_INDEX_URL; give the mirror another way to "
                            "let the sandbox in, got %s",
                            quote(&q, s));
        if ((size_t) (end - authority) >= sizeof(hostport))
                return fail(ctx, key, "expected a URL with a valid host, got %s", quote(&q, s));
        memcpy(hostport, authority, (size_t) (end - authority));
        hostport[end - authority] = '\0';
        if (!host_port_split(hostport, &host_len, &port))
                return fail(ctx, key,
                            "expected a URL with a valid host and an optional port 1..65535, "
                            "got %s",
                            quote(&q, s));
        if (!port)
                port = https ? 443 : 80;
        /* A profile without network may name an index for `airlock profile build` alone (its
         * sessions get none); one with network must be able to reach it. */
        if (net && net->mode == EGRESS_MODE_ALLOW &&
            !network_allows(net, hostport, host_len, (uint16_t) port))
                return fail(ctx, key,
                            "%.*s:%u is not reachable from the profile's sessions: add "
                            "\"%.*s:%u\" to network.allow (with \"network\": {\"mode\": "
                            "\"allow\", ...}; docs/NETWORK.md)",
                            (int) host_len, hostport, port, (int) host_len, hostport, port);
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static bool trusted_host_is_valid(const char *s)
{
        size_t host_len;
        unsigned port;

        return host_port_split(s, &host_len, &port);
}

static const struct name_kind trusted_host_names = {
        .plural = "host names",
        .singular = "a host name",
        .valid = trusted_host_is_valid,
        .expected = "a host name or host:port such as \"pypi.internal\" or \"10.0.0.5:8080\"",
};

/* A version specifier's operator at s: its length, or 0. */
static size_t specifier_op(const char *s)
{
        static const char *const ops[] = { "===", "==", "!=", "<=", ">=", "~=", "<", ">" };

        for (size_t i = 0; i < ELEMENTSOF(ops); i++)
                if (strncmp(s, ops[i], strlen(ops[i])) == 0)
                        return strlen(ops[i]);
        return 0;
}

static bool is_name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-';
}

/* Scans a distribution name at s (PEP 508: alphanumeric at both ends); returns its length,
 * or 0. */
static size_t scan_dist_name(const char *s)
{
        size_t n = 0;

        while (is_name_char(s[n]))
                n++;
        if (n == 0 || !is_name_char(s[0]) || s[0] == '.' || s[0] == '_' || s[0] == '-' ||
            s[n - 1] == '.' || s[n - 1] == '_' || s[n - 1] == '-')
                return 0;
        return n;
}

/* Why s is not an accepted requirement, or NULL when it is one: NAME, optional [extra,...],
 * optional specifiers OP VERSION joined by commas ("rdkit==2024.3", "pandas[excel]>=2,<3").
 * Nothing else: no pip options, spaces, environment markers, URLs or shell characters, so an
 * entry can only ever name a distribution and its versions. */
static const char *requirement_refusal(const char *s)
{
        size_t n;

        if (s[0] == '-')
                return "it starts with '-': pip options are not accepted here";
        if (strlen(s) > REQUIREMENT_MAX)
                return "it is longer than 256 bytes";
        for (const char *c = s; *c; c++) {
                if ((unsigned char) *c <= 0x20 || (unsigned char) *c >= 0x7f)
                        return "it contains a space, a control or a non-ASCII character";
                if (strchr(";&|`$()\\'\"#{}?%^", *c))
                        return "it contains a shell or marker character (; & | ` $ ( ) \\ ' \" # "
                               "{ } ? % ^)";
                if (*c == '@' || *c == '/' || *c == ':')
                        return "it is a URL or a path: a direct reference bypasses the index; "
                               "put the wheel in packages.wheels instead";
        }
        n = scan_dist_name(s);
        if (n == 0)
                return "it does not start with a distribution name";
        s += n;
        if (*s == '[') {
                do {
                        s++;
                        n = scan_dist_name(s);
                        if (n == 0)
                                return "its [extras] are not names separated by commas";
                        s += n;
                } while (*s == ',');
                if (*s++ != ']')
                        return "its [extras] are not closed by ']'";
        }
        while (*s) {
                n = specifier_op(s);
                if (n == 0)
                        return "a version specifier (==, !=, <=, >=, ~=, ===, <, >) was expected "
                               "after the name";
                s += n;
                n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789."
                              "*+!_-");
                if (n == 0)
                        return "a version is missing after an operator";
                s += n;
                if (*s == ',')
                        s++;
                if (*s == '\0' && s[-1] == ',')
                        return "it ends with a comma";
        }
        return NULL;
}

static int parse_install(const struct parse_ctx *ctx, const json_t *v, char ***ret)
{
        _cleanup_strv_free_ char **reqs = NULL;
        static const char expected[] =
                "an array of requirements such as \"rdkit==2024.3\" or \"pandas>=2,<3\"";
        const json_t *item;
        size_t i, n;

        if (!json_is_array(v))
                return fail_type(ctx, "packages.install", expected, v);
        n = json_array_size(v);
        if (n > PROFILE_LIST_MAX)
                return fail(ctx, "packages.install", "expected at most %u requirements, got %zu",
                            PROFILE_LIST_MAX, n);
        reqs = calloc(n + 1, sizeof(char *));
        if (!reqs)
                return -ENOMEM;
        json_array_foreach (v, i, item) {
                char key[KEY_MAX];
                const char *why;
                struct quoted q;

                (void) snprintf(key, sizeof(key), "packages.install[%zu]", i);
                if (!json_is_string(item))
                        return fail_type(ctx, key, "a requirement such as \"rdkit==2024.3\"", item);
                why = requirement_refusal(json_string_value(item));
                if (why)
                        return fail(ctx, key,
                                    "expected a requirement such as \"rdkit==2024.3\" (a name, "
                                    "optional [extras] and version specifiers), got %s: %s",
                                    quote(&q, json_string_value(item)), why);
                reqs[i] = strdup(json_string_value(item));
                if (!reqs[i])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(reqs);
        return 0;
}

/* "packages" (profile.h). Runs after "network": an index must be reachable through it. */
static int parse_packages(const struct parse_ctx *ctx, const json_t *v, struct profile *p)
{
        struct profile_packages *pk = &p->packages;
        const char *name;
        json_t *value;
        struct quoted q;
        int r = 0;

        if (!json_is_object(v))
                return fail_type(ctx, "packages", "an object with the keys " PACKAGES_KEYS_TEXT, v);
        json_object_foreach ((json_t *) v, name, value) {
                if (strcmp(name, "index_url") == 0) {
                        r = parse_index_url(ctx, value, p->network, &pk->index_url);
                } else if (strcmp(name, "trusted_host") == 0) {
                        /* pip's own spelling: one host as a string, or a list. */
                        json_t *list = json_is_string(value) ? json_pack("[O]", value)
                                                             : json_incref(value);
                        if (!list)
                                return -ENOMEM;
                        if (json_array_size(list) > TRUSTED_HOSTS_MAX)
                                r = fail(ctx, "packages.trusted_host",
                                         "expected at most %u hosts, got %zu", TRUSTED_HOSTS_MAX,
                                         json_array_size(list));
                        else
                                r = parse_names(ctx, "packages.trusted_host", list,
                                                &trusted_host_names, &pk->trusted_hosts);
                        json_decref(list);
                } else if (strcmp(name, "install") == 0) {
                        r = parse_install(ctx, value, &pk->install);
                } else if (strcmp(name, "wheels") == 0) {
                        r = parse_dir_path(ctx, "packages.wheels", value, &pk->wheels_dir);
                } else {
                        return fail(ctx, "packages", "unknown key %s; expected one of %s",
                                    quote(&q, name), PACKAGES_KEYS_TEXT);
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

struct profile *profile_free(struct profile *p)
{
        if (!p)
                return NULL;
        free(p->packages.index_url);
        strv_free(p->packages.trusted_hosts);
        strv_free(p->packages.install);
        free(p->packages.wheels_dir);
        free(p->name);
        free(p->description);
        strv_free(p->preload);
        strv_free(p->code_tools);
        strv_free(p->imports);
        free(p->rootfs);
        strv_free(p->env);
        (void) egress_policy_free(p->network);
        free(p);
        return NULL;
}

static bool is_top_level_key(const char *name)
{
        for (size_t i = 0; i < ELEMENTSOF(top_level_keys); i++)
                if (strcmp(name, top_level_keys[i]) == 0)
                        return true;
        return false;
}

int profile_parse(const char *name, const char *source, const char *text, size_t len,
                  struct profile **ret_profile, struct airlock_error *err)
{
        _cleanup_(profile_freep) struct profile *p = NULL;
        _cleanup_(json_decrefp) json_t *root = NULL;
        const struct parse_ctx ctx = { .source = source ? source : "<profile>", .err = err };
        const char *key;
        json_error_t jerr;
        json_t *v;
        struct quoted q;
        int r;

        assert(ret_profile);
        if (!text) {
                assert(len == 0);
                text = "";
        }
        if (!profile_name_is_valid(name))
                return airlock_error_set(err, -EINVAL,
                                         "%s: invalid profile name %s: expected "
                                         "[a-z0-9][a-z0-9_-]{0,63}",
                                         ctx.source, quote(&q, name ? name : ""));
        if (len > PROFILE_FILE_MAX)
                return airlock_error_set(err, -EINVAL,
                                         "%s: profile is %zu bytes, more than the %u byte limit",
                                         ctx.source, len, PROFILE_FILE_MAX);

        /* JSON_DECODE_ANY lets a scalar document through to the check below, whose message
         * says what is wrong more plainly than the parser's. */
        root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (!root)
                return airlock_error_set(err, -EINVAL, "%s:%d:%d: invalid JSON: %s", ctx.source,
                                         jerr.line, jerr.column, jerr.text);
        if (!json_is_object(root))
                return airlock_error_set(err, -EINVAL,
                                         "%s: expected a JSON object with the keys "
                                         "description, languages, ...; got %s",
                                         ctx.source, json_type_text(root));

        json_object_foreach (root, key, v) {
                if (!is_top_level_key(key))
                        return airlock_error_set(err, -EINVAL,
                                                 "%s: unknown key %s; expected one of %s",
                                                 ctx.source, quote(&q, key), TOP_LEVEL_KEYS_TEXT);
        }

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->name = strdup(name);
        if (!p->name)
                return -ENOMEM;
        profile_limits_default(&p->limits);
        p->policy = PROFILE_POLICY_NONE;

        v = json_object_get(root, "description");
        if (!v)
                return fail(&ctx, "description", "missing required key");
        r = parse_description(&ctx, v, &p->description);
        if (r < 0)
                return r;

        v = json_object_get(root, "languages");
        if (!v)
                return fail(&ctx, "languages", "missing required key");
        r = parse_languages(&ctx, v, p);
        if (r < 0)
                return r;

        v = json_object_get(root, "preload");
        if (v) {
                r = parse_modules(&ctx, "preload", v, &p->preload);
                if (r < 0)
                        return r;
        } else {
                p->preload = calloc(1, sizeof(char *));
                if (!p->preload)
                        return -ENOMEM;
        }

        /* null means "any import"; an empty array means none at all. */
        v = json_object_get(root, "imports");
        if (v && !json_is_null(v)) {
                r = parse_modules(&ctx, "imports", v, &p->imports);
                if (r < 0)
                        return r;
        }

        v = json_object_get(root, "policy");
        if (v) {
                r = parse_policy(&ctx, v, &p->policy);
                if (r < 0)
                        return r;
        }

        v = json_object_get(root, "limits");
        if (v) {
                r = parse_limits(&ctx, v, &p->limits);
                if (r < 0)
                        return r;
        }

        /* "none" or {"mode": "allow", ...}; absent is "none" (egress/policy.h). */
        r = egress_policy_parse(json_object_get(root, "network"), ctx.source, &p->network, err);
        if (r < 0)
                return r;

        v = json_object_get(root, "rootfs");
        if (v) {
                r = parse_rootfs(&ctx, v, &p->rootfs);
                if (r < 0)
                        return r;
        } else {
                p->rootfs = strdup("/");
                if (!p->rootfs)
                        return -ENOMEM;
        }

        v = json_object_get(root, "start");
        if (v) {
                r = parse_start(&ctx, v, &p->start);
                if (r < 0)
                        return r;
        }

        v = json_object_get(root, "isolation");
        if (v) {
                r = parse_isolation(&ctx, v, &p->isolation);
                if (r < 0)
                        return r;
        }

        v = json_object_get(root, "env");
        if (v) {
                r = parse_env(&ctx, v, &p->env);
                if (r < 0)
                        return r;
        } else {
                p->env = calloc(1, sizeof(char *));
                if (!p->env)
                        return -ENOMEM;
        }

        v = json_object_get(root, "packages");
        if (v) {
                r = parse_packages(&ctx, v, p);
                if (r < 0)
                        return r;
        }

        v = json_object_get(root, "code_tools");
        if (v) {
                r = parse_names(&ctx, "code_tools", v, &tool_names, &p->code_tools);
                if (r < 0)
                        return r;
        } else {
                p->code_tools = calloc(1, sizeof(char *));
                if (!p->code_tools)
                        return -ENOMEM;
        }

        *ret_profile = TAKE_PTR(p);
        return 0;
}

/* Reads a profile file of at most PROFILE_FILE_MAX bytes. Returns -ENOENT without touching err
 * so that the search path can move on to the next directory; other failures set err. */
static int read_profile_file(const char *path, char **ret_text, size_t *ret_len,
                             struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t got = 0;

        /* O_NONBLOCK keeps a FIFO planted under a profile's name from hanging the open; the
         * S_ISREG check below then refuses it. Regular files ignore the flag. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                if (errno == ENOENT || errno == ENOTDIR)
                        return -ENOENT;
                return airlock_error_set(err, -errno, "%s: cannot open: %s", path, strerror(errno));
        }
        if (fstat(fd, &st) < 0)
                return airlock_error_set(err, -errno, "%s: cannot stat: %s", path, strerror(errno));
        if (!S_ISREG(st.st_mode))
                return airlock_error_set(err, -EINVAL, "%s: expected a regular file", path);
        if (st.st_size > (off_t) PROFILE_FILE_MAX)
                return airlock_error_set(err, -EINVAL,
                                         "%s: file is %jd bytes, more than the %u byte limit", path,
                                         (intmax_t) st.st_size, PROFILE_FILE_MAX);

        /* Read one byte past the limit to notice a file that grew after fstat(). */
        buf = malloc(PROFILE_FILE_MAX + 1);
        if (!buf)
                return -ENOMEM;
        while (got < PROFILE_FILE_MAX + 1) {
                ssize_t n = read(fd, buf + got, PROFILE_FILE_MAX + 1 - got);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return airlock_error_set(err, -errno, "%s: cannot read: %s", path,
                                                 strerror(errno));
                }
                if (n == 0)
                        break;
                got += (size_t) n;
        }
        if (got > PROFILE_FILE_MAX)
                return airlock_error_set(err, -EINVAL, "%s: file is more than the %u byte limit",
                                         path, PROFILE_FILE_MAX);

        *ret_text = TAKE_PTR(buf);
        *ret_len = got;
        return 0;
}

/* Fills dirs with the search path in order and returns how many there are. */
static size_t profile_dirs(const char *dirs[static 3])
{
        const char *env = getenv("AIRLOCK_PROFILES_DIR");
        size_t n = 0;

        if (env && env[0])
                dirs[n++] = env;
        dirs[n++] = AIRLOCK_PROFILES_DIR;
        dirs[n++] = AIRLOCK_SOURCE_DIR "/profiles";
        return n;
}

static bool is_path(const char *s)
{
        size_t len = strlen(s);

        return strchr(s, '/') || (len >= 5 && strcmp(s + len - 5, ".json") == 0);
}

static int load_path(const char *path, struct profile **ret_profile, struct airlock_error *err)
{
        _cleanup_free_ char *text = NULL, *name = NULL;
        const char *base;
        size_t len;
        int r;

        r = read_profile_file(path, &text, &len, err);
        if (r == -ENOENT)
                return airlock_error_set(err, -ENOENT, "%s: no such profile file", path);
        if (r < 0)
                return r;

        /* The profile's name is the file name without ".json"; profile_parse() checks it. */
        base = strrchr(path, '/');
        base = base ? base + 1 : path;
        name = strdup(base);
        if (!name)
                return -ENOMEM;
        if (strlen(name) >= 5 && strcmp(name + strlen(name) - 5, ".json") == 0)
                name[strlen(name) - 5] = '\0';

        return profile_parse(name, path, text, len, ret_profile, err);
}

int profile_load(const char *name_or_path, struct profile **ret_profile, struct airlock_error *err)
{
        const char *dirs[3];
        size_t n;
        struct quoted q;
        int r;

        if (!name_or_path)
                return airlock_error_set(err, -EINVAL, "no profile name given");
        if (is_path(name_or_path))
                return load_path(name_or_path, ret_profile, err);
        if (!profile_name_is_valid(name_or_path))
                return airlock_error_set(err, -EINVAL,
                                         "invalid profile name %s: expected "
                                         "[a-z0-9][a-z0-9_-]{0,63}, or a path that contains '/' "
                                         "or ends in .json",
                                         quote(&q, name_or_path));

        n = profile_dirs(dirs);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *path = NULL, *text = NULL;
                size_t len;

                if (asprintf(&path, "%s/%s.json", dirs[i], name_or_path) < 0) {
                        path = NULL;
                        return -ENOMEM;
                }
                r = read_profile_file(path, &text, &len, err);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                return profile_parse(name_or_path, path, text, len, ret_profile, err);
        }

        if (n == 3)
                return airlock_error_set(err, -ENOENT, "profile %s not found in %s, %s, %s",
                                         quote(&q, name_or_path), dirs[0], dirs[1], dirs[2]);
        return airlock_error_set(err, -ENOENT,
                                 "profile %s not found in %s, %s (set AIRLOCK_PROFILES_DIR to "
                                 "search another directory first)",
                                 quote(&q, name_or_path), dirs[0], dirs[1]);
}

static int cmp_strings(const void *a, const void *b)
{
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Appends the names of the profiles in dir to *names, which holds *n entries. A missing
 * directory is not an error: only some of the search path exists on any one machine. */
static int list_dir(const char *dir, char ***names, size_t *n, size_t *cap)
{
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        d = opendir(dir);
        if (!d) {
                if (errno == ENOENT || errno == ENOTDIR)
                        return 0;
                return -errno;
        }
        for (;;) {
                struct stat st;
                size_t len;
                char *name;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                return -errno;
                        break;
                }
                len = strlen(de->d_name);
                if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0)
                        continue;
                /* Follow symlinks, as profile_load() does, and skip what it would refuse. */
                if (fstatat(dirfd(d), de->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
                        continue;
                name = strndup(de->d_name, len - 5);
                if (!name)
                        return -ENOMEM;
                if (!profile_name_is_valid(name)) {
                        free(name);
                        continue;
                }
                /* Keep room for the terminating NULL. */
                if (*n + 2 > *cap) {
                        size_t new_cap = *cap ? *cap * 2 : 16;
                        char **v = reallocarray(*names, new_cap, sizeof(char *));
                        if (!v) {
                                free(name);
                                return -ENOMEM;
                        }
                        *names = v;
                        *cap = new_cap;
                }
                (*names)[(*n)++] = name;
                (*names)[*n] = NULL;
        }
        return 0;
}

int profile_list(char ***ret_names)
{
        _cleanup_strv_free_ char **names = NULL;
        const char *dirs[3];
        size_t n = 0, cap = 0, out = 0, ndirs;
        int r;

        assert(ret_names);
        names = calloc(1, sizeof(char *));
        if (!names)
                return -ENOMEM;
        cap = 1;

        ndirs = profile_dirs(dirs);
        for (size_t i = 0; i < ndirs; i++) {
                r = list_dir(dirs[i], &names, &n, &cap);
                if (r < 0)
                        return r;
        }

        qsort(names, n, sizeof(char *), cmp_strings);
        for (size_t i = 0; i < n; i++) {
                if (out > 0 && strcmp(names[out - 1], names[i]) == 0) {
                        free(names[i]);
                        continue;
                }
                names[out++] = names[i];
        }
        names[out] = NULL;

        *ret_names = TAKE_PTR(names);
        return 0;
}

json_t *profile_to_json(const struct profile *p)
{
        json_t *langs = json_array(), *network;

        if (!langs)
                return NULL;
        if (p->lang_python)
                json_array_append_new(langs, json_string("python"));
        if (p->lang_bash)
                json_array_append_new(langs, json_string("bash"));
        if (p->lang_javascript) {
                json_array_append_new(langs, json_string("javascript"));
                json_array_append_new(langs, json_string("typescript"));
        }
        if (p->lang_r)
                json_array_append_new(langs, json_string("r"));
        /* "none", as before there were policies, or the policy's object. */
        network = !p->network || p->network->mode == EGRESS_MODE_NONE
                          ? json_string("none")
                          : egress_policy_to_json(p->network);
        return json_pack(
                "{s:s, s:s, s:o, s:o, s:o, s:s, s:o, s:s, s:s, s:{s:I, s:f, s:i, s:f, s:I, "
                "s:I, s:I}}",
                "name", p->name, "description", p->description, "languages", langs, "preload",
                json_strv(p->preload), "imports", p->imports ? json_strv(p->imports) : json_null(),
                "policy", p->policy == PROFILE_POLICY_RESTRICTED ? "restricted" : "none", "network",
                network, "start", p->start == PROFILE_START_COLD ? "cold" : "zygote", "isolation",
                p->isolation == PROFILE_ISOLATION_MICROVM ? "microvm" : "namespaces", "limits",
                "memory_bytes", (json_int_t) p->limits.memory_bytes, "cpus",
                p->limits.cpu_millicpus / 1000.0, "pids", (int) p->limits.pids, "timeout_s",
                p->limits.timeout_ms / 1000.0, "output_bytes", (json_int_t) p->limits.output_bytes,
                "workspace_bytes", (json_int_t) p->limits.workspace_bytes, "tmp_bytes",
                (json_int_t) p->limits.tmp_bytes);
}
