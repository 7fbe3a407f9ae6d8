/* The mcpServers file (hub.h, docs/TOOLS.md): the shape MCP clients read, plus airlock's policy
 * members. Strict: an unknown member is an error that names it, since a typo in a policy
 * member (allowed_tool) would otherwise silently allow every tool. */
#include "hub-internal.h"

#include "base/cleanup.h"
#include "base/json-util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERVERS_MAX 64
#define SERVER_NAME_MAX 48
#define STRV_MAX 1024

static const char *const stdio_members = "command, args, env, cwd";
static const char *const http_members = "url, headers";
static const char *const policy_members = "type, allowed_tools, require_approval, timeout_ms, "
                                          "startup_timeout_ms, max_result_bytes, disabled";

static char **strv_new(size_t n)
{
        return calloc(n + 1, sizeof(char *));
}

static int strv_dup(char **from, char ***ret)
{
        size_t n = 0;
        char **v;

        *ret = NULL;
        if (!from)
                return 0;
        while (from[n])
                n++;
        v = strv_new(n);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                v[i] = strdup(from[i]);
                if (!v[i]) {
                        strv_free(v);
                        return -ENOMEM;
                }
        }
        *ret = v;
        return 0;
}

static bool strv_has(char **v, const char *s)
{
        for (; v && *v; v++)
                if (strcmp(*v, s) == 0)
                        return true;
        return false;
}

/* An array of strings. */
static int parse_strings(const json_t *v, const char *origin, const char *where, char ***ret,
                         struct airlock_error *err)
{
        size_t n = json_array_size(v);
        char **out;

        if (!json_is_array(v))
                return airlock_error_set(err, -EINVAL,
                                         "%s: %s: expected an array of strings, got %s", origin,
                                         where, json_type_name(v));
        if (n > STRV_MAX)
                return airlock_error_set(err, -EINVAL, "%s: %s: more than %d items", origin, where,
                                         STRV_MAX);
        out = strv_new(n);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const json_t *s = json_array_get(v, i);
                if (!json_is_string(s)) {
                        strv_free(out);
                        return airlock_error_set(err, -EINVAL,
                                                 "%s: %s[%zu]: expected a string, got %s", origin,
                                                 where, i, json_type_name(s));
                }
                out[i] = strdup(json_string_value(s));
                if (!out[i]) {
                        strv_free(out);
                        return -ENOMEM;
                }
        }
        *ret = out;
        return 0;
}

/* An object of strings, turned into "KEY<sep>VALUE" (an environment, HTTP headers). */
static int parse_pairs(const json_t *v, const char *origin, const char *where, const char *sep,
                       char ***ret, struct airlock_error *err)
{
        const char *k;
        json_t *val;
        size_t i = 0;
        char **out;

        if (!json_is_object(v))
                return airlock_error_set(err, -EINVAL,
                                         "%s: %s: expected an object of strings, got %s", origin,
                                         where, json_type_name(v));
        if (json_object_size(v) > STRV_MAX)
                return airlock_error_set(err, -EINVAL, "%s: %s: more than %d members", origin,
                                         where, STRV_MAX);
        out = strv_new(json_object_size(v));
        if (!out)
                return -ENOMEM;
        json_object_foreach ((json_t *) v, k, val) {
                if (!json_is_string(val)) {
                        strv_free(out);
                        return airlock_error_set(err, -EINVAL,
                                                 "%s: %s.%s: expected a string, got %s", origin,
                                                 where, k, json_type_name(val));
                }
                if (!*k || strpbrk(k, *sep == '=' ? "=" : ":\r\n") ||
                    strpbrk(json_string_value(val), "\r\n")) {
                        strv_free(out);
                        return airlock_error_set(err, -EINVAL, "%s: %s.%s: not a valid %s", origin,
                                                 where, k,
                                                 *sep == '=' ? "environment variable" : "header");
                }
                if (asprintf(&out[i], "%s%s%s", k, sep, json_string_value(val)) < 0) {
                        out[i] = NULL;
                        strv_free(out);
                        return -ENOMEM;
                }
                i++;
        }
        *ret = out;
        return 0;
}

static int parse_ms(const json_t *v, const char *origin, const char *where, uint64_t max,
                    uint64_t *ret, struct airlock_error *err)
{
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            (uint64_t) json_integer_value(v) > max)
                return airlock_error_set(err, -EINVAL, "%s: %s: expected an integer from 1 to %llu",
                                         origin, where, (unsigned long long) max);
        *ret = (uint64_t) json_integer_value(v);
        return 0;
}

/* OpenAI's shape: "always" | "never" | {"always": {"tool_names": [...]}, "never": {...}};
 * with the object form, a tool in neither list needs approval. */
static int parse_approval(const json_t *v, const char *origin, const char *where,
                          struct server_config *s, struct airlock_error *err)
{
        const char *k;
        json_t *val;

        if (json_is_string(v)) {
                if (strcmp(json_string_value(v), "always") == 0)
                        s->approval_default = APPROVAL_ALWAYS;
                else if (strcmp(json_string_value(v), "never") == 0)
                        s->approval_default = APPROVAL_NEVER;
                else
                        return airlock_error_set(err, -EINVAL,
                                                 "%s: %s: expected \"always\", \"never\" or an "
                                                 "object, got \"%s\"",
                                                 origin, where, json_string_value(v));
                return 0;
        }
        if (!json_is_object(v))
                return airlock_error_set(err, -EINVAL,
                                         "%s: %s: expected \"always\", \"never\" or an object, "
                                         "got %s",
                                         origin, where, json_type_name(v));
        s->approval_default = APPROVAL_ALWAYS;
        json_object_foreach ((json_t *) v, k, val) {
                char sub[256];
                json_t *names = json_object_get(val, "tool_names");
                char ***dst;
                int r;

                if (strcmp(k, "always") == 0)
                        dst = &s->approval_always;
                else if (strcmp(k, "never") == 0)
                        dst = &s->approval_never;
                else
                        return airlock_error_set(err, -EINVAL,
                                                 "%s: %s.%s: unknown member (expected always, "
                                                 "never)",
                                                 origin, where, k);
                (void) snprintf(sub, sizeof(sub), "%.200s.%.20s", where, k);
                if (!json_is_object(val) || json_object_size(val) != 1 || !names)
                        return airlock_error_set(err, -EINVAL,
                                                 "%s: %s: expected {\"tool_names\": [...]}", origin,
                                                 sub);
                (void) snprintf(sub, sizeof(sub), "%.200s.%.20s.tool_names", where, k);
                strv_free(*dst);
                *dst = NULL;
                r = parse_strings(names, origin, sub, dst, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static bool name_ok(const char *name)
{
        size_t n = strlen(name);

        if (n == 0 || n > SERVER_NAME_MAX)
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
                        return false;
        return true;
}

static bool url_ok(const char *url)
{
        return strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0;
}

static int parse_server(const char *name, const json_t *o, const char *origin,
                        struct server_config *s, struct airlock_error *err)
{
        const char *k;
        json_t *v;
        char where[256];
        const char *type = NULL;
        int r;

        s->timeout_ms = HUB_CALL_TIMEOUT_MS_DEFAULT;
        s->startup_timeout_ms = HUB_STARTUP_TIMEOUT_MS_DEFAULT;
        s->max_result_bytes = HUB_RESULT_MAX_DEFAULT;
        s->name = strdup(name);
        if (!s->name)
                return -ENOMEM;
        if (!name_ok(name))
                return airlock_error_set(err, -EINVAL,
                                         "%s: mcpServers.%s: a server name is 1 to %d letters, "
                                         "digits, '_', '-' or '.'",
                                         origin, name, SERVER_NAME_MAX);
        if (!json_is_object(o))
                return airlock_error_set(err, -EINVAL,
                                         "%s: mcpServers.%s: expected an object, got %s", origin,
                                         name, json_type_name(o));
        json_object_foreach ((json_t *) o, k, v) {
                (void) snprintf(where, sizeof(where), "mcpServers.%s.%s", name, k);
                r = 0;
                if (strcmp(k, "command") == 0) {
                        if (!json_is_string(v) || !*json_string_value(v))
                                return airlock_error_set(err, -EINVAL,
                                                         "%s: %s: expected a non-empty string",
                                                         origin, where);
                        s->command = strdup(json_string_value(v));
                        r = s->command ? 0 : -ENOMEM;
                } else if (strcmp(k, "args") == 0) {
                        r = parse_strings(v, origin, where, &s->args, err);
                } else if (strcmp(k, "env") == 0) {
                        r = parse_pairs(v, origin, where, "=", &s->env, err);
                } else if (strcmp(k, "cwd") == 0) {
                        if (!json_is_string(v) || json_string_value(v)[0] != '/')
                                return airlock_error_set(err, -EINVAL,
                                                         "%s: %s: expected an absolute path",
                                                         origin, where);
                        s->cwd = strdup(json_string_value(v));
                        r = s->cwd ? 0 : -ENOMEM;
                } else if (strcmp(k, "url") == 0) {
                        if (!json_is_string(v) || !url_ok(json_string_value(v)))
                                return airlock_error_set(err, -EINVAL,
                                                         "%s: %s: expected an http:// or "
                                                         "https:// URL",
                                                         origin, where);
                        s->url = strdup(json_string_value(v));
                        r = s->url ? 0 : -ENOMEM;
                } else if (strcmp(k, "headers") == 0) {
                        r = parse_pairs(v, origin, where, ": ", &s->headers, err);
                } else if (strcmp(k, "type") == 0) {
                        type = json_string_value(v);
                        if (!type || (strcmp(type, "stdio") != 0 && strcmp(type, "http") != 0 &&
                                      strcmp(type, "streamable-http") != 0 &&
                                      strcmp(type, "streamableHttp") != 0))
                                return airlock_error_set(err, -EINVAL,
                                                         "%s: %s: expected \"stdio\" or \"http\" "
                                                         "(streamable HTTP; the older SSE "
                                                         "transport is not supported)",
                                                         origin, where);
                } else if (strcmp(k, "allowed_tools") == 0) {
                        r = parse_strings(v, origin, where, &s->allowed_tools, err);
                } else if (strcmp(k, "require_approval") == 0) {
                        r = parse_approval(v, origin, where, s, err);
                } else if (strcmp(k, "timeout_ms") == 0) {
                        r = parse_ms(v, origin, where, 3600000, &s->timeout_ms, err);
                } else if (strcmp(k, "startup_timeout_ms") == 0) {
                        r = parse_ms(v, origin, where, 600000, &s->startup_timeout_ms, err);
                } else if (strcmp(k, "max_result_bytes") == 0) {
                        uint64_t n = 0;
                        r = parse_ms(v, origin, where, 64u * 1024u * 1024u, &n, err);
                        if (r == 0)
                                s->max_result_bytes = (size_t) n;
                } else if (strcmp(k, "disabled") == 0) {
                        if (!json_is_boolean(v))
                                return airlock_error_set(err, -EINVAL,
                                                         "%s: %s: expected true or false", origin,
                                                         where);
                        s->disabled = json_is_true(v);
                } else {
                        return airlock_error_set(err, -EINVAL,
                                                 "%s: %s: unknown member (a stdio server has %s; "
                                                 "an HTTP server has %s; both have %s)",
                                                 origin, where, stdio_members, http_members,
                                                 policy_members);
                }
                if (r < 0)
                        return r;
        }
        (void) snprintf(where, sizeof(where), "mcpServers.%s", name);
        if (!s->command == !s->url)
                return airlock_error_set(err, -EINVAL,
                                         "%s: %s: give either \"command\" (a stdio server) or "
                                         "\"url\" (a streamable HTTP server)",
                                         origin, where);
        if (s->url && (s->args || s->env || s->cwd))
                return airlock_error_set(err, -EINVAL,
                                         "%s: %s: args, env and cwd are for stdio servers, and "
                                         "this one has a url",
                                         origin, where);
        if (s->command && s->headers)
                return airlock_error_set(err, -EINVAL,
                                         "%s: %s: headers are for HTTP servers, and this one has "
                                         "a command",
                                         origin, where);
        if (type && (strcmp(type, "stdio") == 0) != !!s->command)
                return airlock_error_set(err, -EINVAL,
                                         "%s: %s.type: \"%s\" does not match a server with %s",
                                         origin, where, type, s->command ? "a command" : "a url");
        return 0;
}

int hub_config_parse(const json_t *root, const char *origin, struct hub_config **ret_cfg,
                     struct airlock_error *err)
{
        struct hub_config *cfg;
        const json_t *servers;
        const char *k;
        json_t *v;
        int r;

        if (!json_is_object(root))
                return airlock_error_set(err, -EINVAL, "%s: expected a JSON object, got %s", origin,
                                         json_type_name(root));
        json_object_foreach ((json_t *) root, k, v)
                if (strcmp(k, "mcpServers") != 0)
                        return airlock_error_set(err, -EINVAL,
                                                 "%s: %s: unknown member (the file has one "
                                                 "member, mcpServers)",
                                                 origin, k);
        servers = json_object_get(root, "mcpServers");
        if (!json_is_object(servers))
                return airlock_error_set(err, -EINVAL,
                                         "%s: mcpServers: expected an object of servers, got %s",
                                         origin, servers ? json_type_name(servers) : "nothing");
        if (json_object_size(servers) > SERVERS_MAX)
                return airlock_error_set(err, -EINVAL, "%s: mcpServers: more than %d servers",
                                         origin, SERVERS_MAX);
        cfg = calloc(1, sizeof(*cfg));
        if (cfg)
                cfg->servers = calloc(json_object_size(servers) + 1, sizeof(*cfg->servers));
        if (!cfg || !cfg->servers) {
                hub_config_free(cfg);
                return -ENOMEM;
        }
        json_object_foreach ((json_t *) servers, k, v) {
                r = parse_server(k, v, origin, &cfg->servers[cfg->n_servers++], err);
                if (r < 0) {
                        hub_config_free(cfg);
                        return r;
                }
        }
        *ret_cfg = cfg;
        return 0;
}

int hub_config_load(const char *path, struct hub_config **ret_cfg, struct airlock_error *err)
{
        json_error_t jerr;
        json_t *root;
        int r;

        root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                FILE *f = fopen(path, "re");
                if (!f)
                        return airlock_error_set(err, -errno, "%s: cannot read: %s", path,
                                                 strerror(errno));
                (void) fclose(f);
                return airlock_error_set(err, -EINVAL, "%s: line %d, column %d: %s", path,
                                         jerr.line, jerr.column, jerr.text);
        }
        r = hub_config_parse(root, path, ret_cfg, err);
        json_decref(root);
        return r;
}

void server_config_done(struct server_config *s)
{
        free(s->name);
        free(s->command);
        strv_free(s->args);
        if (s->env)
                for (char **p = s->env; *p; p++)
                        explicit_bzero(*p, strlen(*p));
        strv_free(s->env);
        free(s->cwd);
        free(s->url);
        if (s->headers)
                for (char **p = s->headers; *p; p++)
                        explicit_bzero(*p, strlen(*p));
        strv_free(s->headers);
        strv_free(s->allowed_tools);
        strv_free(s->approval_always);
        strv_free(s->approval_never);
        memset(s, 0, sizeof(*s));
}

static int str_dup(const char *from, char **to)
{
        *to = NULL;
        if (!from)
                return 0;
        *to = strdup(from);
        return *to ? 0 : -ENOMEM;
}

int server_config_copy(const struct server_config *from, struct server_config *to)
{
        memset(to, 0, sizeof(*to));
        to->approval_default = from->approval_default;
        to->timeout_ms = from->timeout_ms;
        to->startup_timeout_ms = from->startup_timeout_ms;
        to->max_result_bytes = from->max_result_bytes;
        to->disabled = from->disabled;
        if (str_dup(from->name, &to->name) < 0 || str_dup(from->command, &to->command) < 0 ||
            strv_dup(from->args, &to->args) < 0 || strv_dup(from->env, &to->env) < 0 ||
            str_dup(from->cwd, &to->cwd) < 0 || str_dup(from->url, &to->url) < 0 ||
            strv_dup(from->headers, &to->headers) < 0 ||
            strv_dup(from->allowed_tools, &to->allowed_tools) < 0 ||
            strv_dup(from->approval_always, &to->approval_always) < 0 ||
            strv_dup(from->approval_never, &to->approval_never) < 0) {
                server_config_done(to);
                return -ENOMEM;
        }
        return 0;
}

struct hub_config *hub_config_free(struct hub_config *cfg)
{
        if (!cfg)
                return NULL;
        for (size_t i = 0; i < cfg->n_servers; i++)
                server_config_done(&cfg->servers[i]);
        free(cfg->servers);
        free(cfg);
        return NULL;
}

bool server_tool_allowed(const struct server_config *s, const char *tool)
{
        return !s->allowed_tools || strv_has(s->allowed_tools, tool);
}

enum approval_mode server_tool_approval(const struct server_config *s, const char *tool)
{
        if (strv_has(s->approval_always, tool))
                return APPROVAL_ALWAYS;
        if (strv_has(s->approval_never, tool))
                return APPROVAL_NEVER;
        return s->approval_default;
}
