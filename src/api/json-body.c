/* Request body validation (see json-body.h). The checks here are the API's contract with the
 * client; the session layer checks again what it relies on, so a gap here is a worse message,
 * never a hole. */
#include "json-body.h"
#include "base/json-util.h"
#include "router.h"
#include "tools/base64.h"

#include "base/cleanup.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 3, 4))) static int body_fail(struct body_error *err,
                                                           const char *field, const char *fmt, ...)
{
        va_list ap;

        (void) snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
        va_start(ap, fmt);
        (void) vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static const char *body_type_name(enum body_type t)
{
        switch (t) {
        case BODY_STRING:
                return "a string";
        case BODY_NUMBER:
                return "a number";
        case BODY_OBJECT:
                return "an object";
        case BODY_ARRAY:
                return "an array";
        case BODY_NETWORK:
                return "\"none\" or an object";
        }
        return "?";
}

static bool body_type_matches(enum body_type t, const json_t *v)
{
        switch (t) {
        case BODY_STRING:
                return json_is_string(v);
        case BODY_NUMBER:
                return json_is_number(v);
        case BODY_OBJECT:
                return json_is_object(v);
        case BODY_ARRAY:
                return json_is_array(v);
        case BODY_NETWORK:
                return json_is_object(v) || json_is_string(v);
        }
        return false;
}

/* Keys are client text: quote at most 64 bytes of one in a message. */
static void key_excerpt(const char *key, char *buf, size_t size)
{
        size_t o = 0;

        for (const char *p = key; *p && o + 2 < size && p - key < 64; p++)
                buf[o++] = (unsigned char) *p < 0x20 ? '?' : *p;
        buf[o] = '\0';
}

int body_parse_object(const char *buf, size_t len, bool empty_ok, const struct body_field *fields,
                      size_t n_fields, json_t **ret_root, struct body_error *err)
{
        json_t *root;
        json_error_t jerr;
        const char *key;
        json_t *value;
        size_t i;
        bool blank = true;

        for (i = 0; i < len && blank; i++)
                blank = isspace((unsigned char) buf[i]);
        if (blank) {
                if (!empty_ok)
                        return body_fail(err, "body",
                                         "the request body is empty; send a JSON "
                                         "object");
                root = json_object();
                if (!root)
                        return -ENOMEM;
                *ret_root = root;
                return 0;
        }

        root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root)
                return body_fail(err, "body",
                                 "the request body is not valid JSON: %s (line %d, "
                                 "column %d)",
                                 jerr.text, jerr.line, jerr.column);
        if (!json_is_object(root)) {
                body_fail(err, "body", "the request body must be a JSON object, not %s",
                          json_type_name(root));
                json_decref(root);
                return -EINVAL;
        }
        json_object_foreach (root, key, value) {
                const struct body_field *f = NULL;
                char excerpt[80];

                for (i = 0; i < n_fields; i++)
                        if (strcmp(fields[i].name, key) == 0)
                                f = &fields[i];
                if (!f) {
                        key_excerpt(key, excerpt, sizeof(excerpt));
                        body_fail(err, excerpt, "unknown field '%s'", excerpt);
                        json_decref(root);
                        return -EINVAL;
                }
                if (!body_type_matches(f->type, value)) {
                        body_fail(err, f->name, "field '%s' must be %s, not %s", f->name,
                                  body_type_name(f->type), json_type_name(value));
                        json_decref(root);
                        return -EINVAL;
                }
        }
        for (i = 0; i < n_fields; i++)
                if (fields[i].required && !json_object_get(root, fields[i].name)) {
                        body_fail(err, fields[i].name, "field '%s' is required", fields[i].name);
                        json_decref(root);
                        return -EINVAL;
                }
        *ret_root = root;
        return 0;
}

bool body_profile_name_is_valid(const char *name)
{
        size_t n = strlen(name);

        if (n == 0 || n > BODY_PROFILE_NAME_MAX)
                return false;
        if (!islower((unsigned char) name[0]) && !isdigit((unsigned char) name[0]))
                return false;
        for (size_t i = 1; i < n; i++) {
                unsigned char c = (unsigned char) name[i];
                if (!(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '_' && c != '-')
                        return false;
        }
        return true;
}

/* Seconds as a JSON number, 0 < s <= max, to milliseconds (at least 1). */
static int seconds_field(json_t *root, const char *name, double max, uint64_t *ret_ms,
                         struct body_error *err)
{
        json_t *v = json_object_get(root, name);
        double s;

        if (!v)
                return 0;
        s = json_number_value(v);
        if (!isfinite(s) || s <= 0 || s > max)
                return body_fail(err, name,
                                 "field '%s' must be a number of seconds, 0 < %s <= %.0f", name,
                                 name, max);
        *ret_ms = (uint64_t) llround(s * 1000.0);
        if (*ret_ms == 0)
                *ret_ms = 1;
        return 0;
}

static int env_check(json_t *obj, struct body_error *err);

int body_cwd_check(const char *cwd, struct body_error *err)
{
        const char *p = cwd;
        char excerpt[80];

        key_excerpt(cwd, excerpt, sizeof(excerpt));
        if (*cwd == '\0')
                return body_fail(err, "cwd",
                                 "field 'cwd' is empty; give a directory, absolute "
                                 "or relative to /work");
        if (strlen(cwd) > BODY_CWD_MAX)
                return body_fail(err, "cwd", "field 'cwd' is longer than %d bytes", BODY_CWD_MAX);
        /* A relative path stays below /work: ".." would name some other place by a detour. */
        for (;;) {
                size_t n = strcspn(p, "/");
                if (cwd[0] != '/' && n == 2 && p[0] == '.' && p[1] == '.')
                        return body_fail(err, "cwd",
                                         "cwd: '%s' leaves /work through '..'; give an absolute "
                                         "path instead",
                                         excerpt);
                if (p[n] == '\0')
                        return 0;
                p += n + 1;
        }
}

void exec_files_free(struct exec_file *files, size_t n)
{
        for (size_t i = 0; files && i < n; i++)
                free(files[i].data);
        free(files);
}

int exec_files_decode(const json_t *files, struct exec_file **ret_files, size_t *ret_n,
                      struct body_error *err)
{
        struct exec_file *out = NULL;
        const char *path;
        json_t *value;
        size_t n = 0;
        int r = 0;

        if (json_object_size(files) > BODY_FILES_MAX)
                return body_fail(err, "files", "field 'files' has more than %d files",
                                 BODY_FILES_MAX);
        out = calloc(json_object_size(files) + 1, sizeof(*out));
        if (!out)
                return -ENOMEM;
        json_object_foreach ((json_t *) files, path, value) {
                const char *why = NULL;
                char excerpt[80];

                key_excerpt(path, excerpt, sizeof(excerpt));
                if (route_check_file_path(path, false, &why) < 0) {
                        r = body_fail(err, "files", "files: '%s': %s", excerpt, why);
                        break;
                }
                if (!json_is_string(value)) {
                        r = body_fail(err, "files",
                                      "files: the content of '%s' must be a base64 string, not %s",
                                      excerpt, json_type_name(value));
                        break;
                }
                r = base64_decode(json_string_value(value), json_string_length(value), &out[n].data,
                                  &out[n].len);
                if (r == -EINVAL)
                        r = body_fail(err, "files",
                                      "files: the content of '%s' is not valid base64", excerpt);
                if (r < 0)
                        break;
                out[n++].path = path;
        }
        if (r < 0) {
                exec_files_free(out, n);
                return r;
        }
        *ret_files = out;
        *ret_n = n;
        return 0;
}

/* The fields every execute takes besides the code: stdin, env, cwd, and files (one-shot). */
static int exec_extras_parse(json_t *root, struct exec_body *out, struct body_error *err)
{
        json_t *v;
        int r;

        v = json_object_get(root, "stdin");
        if (v) {
                if (json_string_length(v) > BODY_STDIN_MAX)
                        return body_fail(err, "stdin",
                                         "field 'stdin' is %zu bytes, over the limit of %u "
                                         "bytes (send larger input as a file)",
                                         json_string_length(v), BODY_STDIN_MAX);
                out->stdin_text = json_string_value(v);
        }
        v = json_object_get(root, "env");
        if (v) {
                r = env_check(v, err);
                if (r < 0)
                        return r;
                out->env = v;
        }
        v = json_object_get(root, "cwd");
        if (v) {
                r = body_cwd_check(json_string_value(v), err);
                if (r < 0)
                        return r;
                out->cwd = json_string_value(v);
        }
        v = json_object_get(root, "context");
        if (v) {
                /* The runner checks the rest (docs/API.md, "Contexts"). */
                if (json_string_length(v) == 0 || json_string_length(v) >= 64)
                        return body_fail(err, "context",
                                         "context: a context id is 1 to 63 characters");
                if (strcmp(json_string_value(v), "default") != 0)
                        out->context = json_string_value(v);
        }
        /* Decoded by exec_files_decode() when the one-shot runs: checked once, there. */
        out->files = json_object_get(root, "files");
        return 0;
}

int exec_body_parse(const char *buf, size_t len, bool one_shot, json_t **ret_root,
                    struct exec_body *ret, struct body_error *err)
{
        static const struct body_field oneshot_fields[] = {
                { "code", BODY_STRING, true },       { "language", BODY_STRING, false },
                { "profile", BODY_STRING, false },   { "timeout", BODY_NUMBER, false },
                { "timeout_s", BODY_NUMBER, false }, { "stdin", BODY_STRING, false },
                { "env", BODY_OBJECT, false },       { "cwd", BODY_STRING, false },
                { "files", BODY_OBJECT, false },
        };
        static const struct body_field session_fields[] = {
                { "code", BODY_STRING, true },       { "language", BODY_STRING, false },
                { "timeout_s", BODY_NUMBER, false }, { "timeout", BODY_NUMBER, false },
                { "stdin", BODY_STRING, false },     { "env", BODY_OBJECT, false },
                { "cwd", BODY_STRING, false },       { "context", BODY_STRING, false },
        };
        json_t *root = NULL;
        struct exec_body out = { .language = "python" };
        json_t *v;
        int r;

        r = body_parse_object(buf, len, false, one_shot ? oneshot_fields : session_fields,
                              one_shot ? ELEMENTSOF(oneshot_fields) : ELEMENTSOF(session_fields),
                              &root, err);
        if (r < 0)
                return r;

        out.code = json_string_value(json_object_get(root, "code"));
        if (json_string_length(json_object_get(root, "code")) == 0) {
                r = body_fail(err, "code", "field 'code' is empty");
                goto fail;
        }
        v = json_object_get(root, "language");
        if (v) {
                out.language = json_string_value(v);
                if (strcmp(out.language, "ts") == 0)
                        out.language = "typescript";
                if (strcmp(out.language, "python") != 0 && strcmp(out.language, "bash") != 0 &&
                    strcmp(out.language, "javascript") != 0 &&
                    strcmp(out.language, "typescript") != 0 && strcmp(out.language, "r") != 0) {
                        char excerpt[80];
                        key_excerpt(out.language, excerpt, sizeof(excerpt));
                        r = body_fail(
                                err, "language",
                                "field 'language' must be \"python\", \"bash\", "
                                "\"javascript\", \"typescript\" (\"ts\") or \"r\", not \"%s\"",
                                excerpt);
                        goto fail;
                }
        }
        v = json_object_get(root, "profile");
        if (v) {
                out.profile = json_string_value(v);
                if (!body_profile_name_is_valid(out.profile)) {
                        char excerpt[80];
                        key_excerpt(out.profile, excerpt, sizeof(excerpt));
                        r = body_fail(err, "profile",
                                      "unknown profile '%s' (profile names are lowercase "
                                      "letters, digits, '-' and '_'; see GET /v1/profiles)",
                                      excerpt);
                        goto fail;
                }
        }
        if (json_object_get(root, "timeout") && json_object_get(root, "timeout_s")) {
                r = body_fail(err, "timeout",
                              "give one of 'timeout' and 'timeout_s' (the same thing), not both");
                goto fail;
        }
        r = seconds_field(root, "timeout", BODY_TIMEOUT_MAX_S, &out.timeout_ms, err);
        if (r >= 0)
                r = seconds_field(root, "timeout_s", BODY_TIMEOUT_MAX_S, &out.timeout_ms, err);
        if (r < 0)
                goto fail;
        r = exec_extras_parse(root, &out, err);
        if (r < 0)
                goto fail;

        *ret_root = root;
        *ret = out;
        return 0;
fail:
        json_decref(root);
        return r;
}

static bool env_name_is_valid(const char *name)
{
        size_t n = strlen(name);

        if (n == 0 || n > BODY_ENV_NAME_MAX)
                return false;
        if (!isalpha((unsigned char) name[0]) && name[0] != '_')
                return false;
        for (size_t i = 1; i < n; i++)
                if (!isalnum((unsigned char) name[i]) && name[i] != '_')
                        return false;
        return true;
}

/* The names and values of an env object, as the create call and every execute take them. */
static int env_check(json_t *obj, struct body_error *err)
{
        const char *key;
        json_t *value;

        if (json_object_size(obj) > BODY_ENV_MAX)
                return body_fail(err, "env", "field 'env' has more than %d variables",
                                 BODY_ENV_MAX);
        json_object_foreach (obj, key, value) {
                char excerpt[80];

                key_excerpt(key, excerpt, sizeof(excerpt));
                if (!env_name_is_valid(key))
                        return body_fail(
                                err, "env",
                                "env: '%s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, "
                                "at most %d characters)",
                                excerpt, BODY_ENV_NAME_MAX);
                if (strncmp(key, "LD_", 3) == 0 || strncmp(key, "PYTHON", 6) == 0)
                        return body_fail(err, "env",
                                         "env: '%s' may not be set: LD_* and PYTHON* change how "
                                         "the interpreter itself loads",
                                         excerpt);
                if (!json_is_string(value))
                        return body_fail(err, "env",
                                         "env: the value of '%s' must be a string, not %s", excerpt,
                                         json_type_name(value));
                if (json_string_length(value) > BODY_ENV_VALUE_MAX)
                        return body_fail(err, "env",
                                         "env: the value of '%s' is longer than %d bytes", excerpt,
                                         BODY_ENV_VALUE_MAX);
        }
        return 0;
}

static int env_parse(json_t *obj, char ***ret_env, struct body_error *err)
{
        _cleanup_strv_free_ char **env = NULL;
        const char *key;
        json_t *value;
        size_t n = 0;
        int r;

        r = env_check(obj, err);
        if (r < 0)
                return r;
        env = calloc(json_object_size(obj) + 1, sizeof(char *));
        if (!env)
                return -ENOMEM;
        json_object_foreach (obj, key, value) {
                if (asprintf(&env[n], "%s=%s", key, json_string_value(value)) < 0) {
                        env[n] = NULL;
                        return -ENOMEM;
                }
                n++;
        }
        *ret_env = TAKE_PTR(env);
        return 0;
}

/* An optional array of strings (tool names; their syntax is the session module's to check). */
static int names_parse(json_t *root, const char *field, char ***ret, struct body_error *err)
{
        json_t *v = json_object_get(root, field), *e;
        size_t i;
        char **out;

        *ret = NULL;
        if (!v)
                return 0;
        if (json_array_size(v) > 1024)
                return body_fail(err, field, "%s: at most 1024 names", field);
        out = calloc(json_array_size(v) + 1, sizeof(char *));
        if (!out)
                return -ENOMEM;
        json_array_foreach (v, i, e) {
                if (!json_is_string(e)) {
                        strv_free(out);
                        return body_fail(err, field, "%s[%zu]: expected a string", field, i);
                }
                out[i] = strdup(json_string_value(e));
                if (!out[i]) {
                        strv_free(out);
                        return -ENOMEM;
                }
        }
        *ret = out;
        return 0;
}

static bool metadata_key_is_valid(const char *key)
{
        size_t n = strlen(key);

        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char) key[i]) && key[i] != '_' && key[i] != '.' &&
                    key[i] != '-')
                        return false;
        return true;
}

static int metadata_check(json_t *md, bool allow_null, struct body_error *err)
{
        const char *key;
        json_t *value;

        if (!allow_null && json_object_size(md) > 64)
                return body_fail(err, "metadata", "field 'metadata' has more than 64 entries");
        if (json_object_size(md) > 1024)
                return body_fail(err, "metadata", "field 'metadata' has more than 1024 entries");
        json_object_foreach (md, key, value) {
                char excerpt[80];

                key_excerpt(key, excerpt, sizeof(excerpt));
                if (!metadata_key_is_valid(key))
                        return body_fail(err, "metadata",
                                         "metadata: '%s' is not a key (1 to 64 characters of "
                                         "A-Z a-z 0-9 _ . -)",
                                         excerpt);
                if (allow_null && json_is_null(value))
                        continue;
                if (!json_is_string(value))
                        return body_fail(err, "metadata",
                                         "metadata: the value of '%s' must be a string%s, not %s",
                                         excerpt, allow_null ? " or null" : "",
                                         json_type_name(value));
                if (json_string_length(value) > 1024)
                        return body_fail(err, "metadata",
                                         "metadata: the value of '%s' is longer than 1024 bytes",
                                         excerpt);
        }
        return 0;
}

/* metadata, lifetime_s and timeout_s, as create and PATCH take them; lifetime_s may be null
 * only in a PATCH (ret_has_lifetime not NULL), where it clears the lifetime. */
static int patchable_parse(json_t *root, bool patch, const json_t **ret_md, uint64_t *ret_lifetime,
                           bool *ret_has_lifetime, uint64_t *ret_timeout_ms, bool *ret_has_timeout,
                           struct body_error *err)
{
        json_t *v = json_object_get(root, "metadata");
        uint64_t ms = 0;
        int r;

        if (v) {
                r = metadata_check(v, patch, err);
                if (r < 0)
                        return r;
                *ret_md = v;
        }
        v = json_object_get(root, "lifetime_s");
        if (v && json_is_null(v) && patch) {
                *ret_lifetime = 0;
                *ret_has_lifetime = true;
        } else if (v) {
                double s = json_number_value(v);
                if (!json_is_number(v) || !isfinite(s) || s < 1 || s > BODY_LIFETIME_MAX_S)
                        return body_fail(err, "lifetime_s",
                                         "field 'lifetime_s' must be a number of seconds, 1 <= "
                                         "lifetime_s <= %d (30 days)%s",
                                         BODY_LIFETIME_MAX_S, patch ? ", or null to clear it" : "");
                *ret_lifetime = (uint64_t) llround(s);
                if (ret_has_lifetime)
                        *ret_has_lifetime = true;
        }
        r = seconds_field(root, "timeout_s", BODY_TIMEOUT_MAX_S, &ms, err);
        if (r < 0)
                return r;
        if (json_object_get(root, "timeout_s")) {
                *ret_timeout_ms = ms;
                if (ret_has_timeout)
                        *ret_has_timeout = true;
        }
        return 0;
}

int session_patch_body_parse(const char *buf, size_t len, json_t **ret_root,
                             struct session_patch_body *ret, struct body_error *err)
{
        static const struct body_field fields[] = {
                { "stop_after_s", BODY_NUMBER, false },
                { "lifetime_s", BODY_NUMBER, false }, /* or null: checked below */
                { "timeout_s", BODY_NUMBER, false },
                { "metadata", BODY_OBJECT, false },
        };
        struct session_patch_body out = { 0 };
        json_t *root = NULL, *lifetime = NULL;
        int r;

        /* null clears a lifetime: take it out before the type check, put it back after. */
        root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
        if (json_is_object(root) && json_is_null(json_object_get(root, "lifetime_s"))) {
                _cleanup_free_ char *text = NULL;
                (void) json_object_del(root, "lifetime_s");
                lifetime = json_null();
                text = json_dump_text(root, JSON_COMPACT, NULL);
                json_decref(root);
                root = NULL;
                if (!text)
                        return -ENOMEM;
                r = body_parse_object(text, strlen(text), false, fields, ELEMENTSOF(fields), &root,
                                      err);
        } else {
                json_decref(root);
                root = NULL;
                r = body_parse_object(buf, len, false, fields, ELEMENTSOF(fields), &root, err);
        }
        if (r < 0)
                return r;
        if (lifetime)
                (void) json_object_set_new(root, "lifetime_s", lifetime);
        if (json_object_size(root) == 0) {
                r = body_fail(err, "body",
                              "nothing to change: give stop_after_s, lifetime_s, timeout_s or "
                              "metadata");
                goto fail;
        }
        r = seconds_field(root, "stop_after_s", BODY_STOP_AFTER_MAX_S, &out.stop_after_ms, err);
        if (r < 0)
                goto fail;
        out.has_stop_after = json_object_get(root, "stop_after_s") != NULL;
        r = patchable_parse(root, true, &out.metadata, &out.lifetime_s, &out.has_lifetime,
                            &out.timeout_ms, &out.has_timeout, err);
        if (r < 0)
                goto fail;
        *ret_root = root;
        *ret = out;
        return 0;
fail:
        json_decref(root);
        return r;
}

int body_metadata_filter_add(json_t **filter, const char *key, const char *value,
                             struct body_error *err)
{
        char excerpt[80];
        json_t *v;

        key_excerpt(key, excerpt, sizeof(excerpt));
        if (!metadata_key_is_valid(key))
                return body_fail(err, "metadata",
                                 "metadata.%s: not a metadata key (1 to 64 characters of A-Z a-z "
                                 "0-9 _ . -)",
                                 excerpt);
        if (!*filter && !(*filter = json_object()))
                return -ENOMEM;
        if (json_object_get(*filter, key))
                return body_fail(err, "metadata", "metadata.%s is given twice", excerpt);
        v = json_string(value);
        if (!v)
                return body_fail(err, "metadata", "metadata.%s: the value is not UTF-8", excerpt);
        return json_object_set_new(*filter, key, v) < 0 ? -ENOMEM : 0;
}

int session_body_parse(const char *buf, size_t len, json_t **ret_root, struct session_body *ret,
                       struct body_error *err)
{
        static const struct body_field fields[] = {
                { "profile", BODY_STRING, false },
                { "stop_after_s", BODY_NUMBER, false },
                { "idle_timeout_s", BODY_NUMBER, false }, /* the old name of stop_after_s */
                { "env", BODY_OBJECT, false },
                { "code_tools", BODY_ARRAY, false },
                { "approved_tools", BODY_ARRAY, false },
                { "metadata", BODY_OBJECT, false },
                { "lifetime_s", BODY_NUMBER, false },
                { "timeout_s", BODY_NUMBER, false },
                { "network", BODY_NETWORK, false },
        };
        json_t *root = NULL;
        struct session_body out = { 0 };
        json_t *v;
        int r;

        r = body_parse_object(buf, len, true, fields, ELEMENTSOF(fields), &root, err);
        if (r < 0)
                return r;
        v = json_object_get(root, "profile");
        if (v) {
                out.profile = json_string_value(v);
                if (!body_profile_name_is_valid(out.profile)) {
                        char excerpt[80];
                        key_excerpt(out.profile, excerpt, sizeof(excerpt));
                        r = body_fail(err, "profile",
                                      "unknown profile '%s' (profile names are lowercase "
                                      "letters, digits, '-' and '_'; see GET /v1/profiles)",
                                      excerpt);
                        goto fail;
                }
        }
        if (json_object_get(root, "stop_after_s") && json_object_get(root, "idle_timeout_s")) {
                r = body_fail(err, "idle_timeout_s",
                              "idle_timeout_s is the old name of stop_after_s: give one of them");
                goto fail;
        }
        r = seconds_field(
                root, json_object_get(root, "idle_timeout_s") ? "idle_timeout_s" : "stop_after_s",
                BODY_STOP_AFTER_MAX_S, &out.stop_after_ms, err);
        if (r < 0)
                goto fail;
        v = json_object_get(root, "env");
        if (v) {
                r = env_parse(v, &out.env, err);
                if (r < 0)
                        goto fail;
        }
        r = names_parse(root, "code_tools", &out.code_tools, err);
        if (r == 0)
                r = names_parse(root, "approved_tools", &out.approved_tools, err);
        if (r == 0)
                r = patchable_parse(root, false, &out.metadata, &out.lifetime_s, NULL,
                                    &out.timeout_ms, NULL, err);
        if (r < 0)
                goto fail;
        out.network = json_object_get(root, "network");
        *ret_root = root;
        *ret = out;
        return 0;
fail:
        strv_free(out.env);
        strv_free(out.code_tools);
        strv_free(out.approved_tools);
        json_decref(root);
        return r;
}
