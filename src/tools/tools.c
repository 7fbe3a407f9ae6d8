/* The tool registry (declarations in three API shapes, argument validation against each tool's
 * own schema), tool results, and the toolbox: one conversation's backend and lazily started
 * session. The tools themselves are tool-*.c. */
#include "tools.h"
#include "base/json-util.h"
#include "tools-internal.h"

#include "audit/audit.h"
#include "base/cleanup.h"
#include "base/util.h"
#include "profile/profile.h"
#include "session/sandbox.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct tool *const all_tools[] = {
        &tool_run_python, &tool_run_shell,  &tool_run_javascript, &tool_write_file,
        &tool_read_file,  &tool_list_files, &tool_reset_session,  &tool_run_r,
};

struct toolbox {
        struct tools_backend *backend; /* borrowed */
        pthread_mutex_t lock;          /* guards session_id and ended_note */
        char *profile;
        char *session_id; /* NULL until a tool needs a session */
        char *ended_note; /* why the previous session ended, told with the next one */
        bool keep_session;
        bool closed;     /* toolbox_close(): no session starts again */
        struct hub *hub; /* internal tools; borrowed, may be NULL */
};

const struct tool *const *tools_all(size_t *ret_n)
{
        *ret_n = ELEMENTSOF(all_tools);
        return all_tools;
}

const struct tool *tools_find(const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(all_tools); i++)
                if (strcmp(all_tools[i]->name, name) == 0)
                        return all_tools[i];
        return NULL;
}

int tools_format_from_string(const char *s, enum tools_format *ret_format)
{
        static const struct {
                const char *name;
                enum tools_format format;
        } formats[] = {
                { "mcp", TOOLS_FORMAT_MCP },
                { "openai", TOOLS_FORMAT_OPENAI },
                { "anthropic", TOOLS_FORMAT_ANTHROPIC },
        };

        for (size_t i = 0; s && i < ELEMENTSOF(formats); i++)
                if (strcmp(s, formats[i].name) == 0) {
                        *ret_format = formats[i].format;
                        return 0;
                }
        return -EINVAL;
}

/* The schema as a JSON value. The schemas are constants of this program, so one that does not
 * parse is our bug, caught by the unit tests. */
static json_t *tool_schema(const struct tool *t)
{
        json_t *schema = json_loads(t->input_schema, JSON_REJECT_DUPLICATES, NULL);

        assert(schema && json_is_object(schema));
        return schema;
}

static json_t *tool_declaration(const struct tool *t, enum tools_format format)
{
        json_t *schema = tool_schema(t);

        if (!schema)
                return NULL;
        switch (format) {
        case TOOLS_FORMAT_OPENAI:
                return json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function", "function", "name",
                                 t->name, "description", t->description, "parameters", schema);
        case TOOLS_FORMAT_ANTHROPIC:
                return json_pack("{s:s, s:s, s:o}", "name", t->name, "description", t->description,
                                 "input_schema", schema);
        case TOOLS_FORMAT_MCP:
                return json_pack(
                        "{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name", t->name,
                        "title", t->title, "description", t->description, "inputSchema", schema,
                        "annotations", "title", t->title, "readOnlyHint", t->annotations.read_only,
                        "destructiveHint", t->annotations.destructive, "idempotentHint",
                        t->annotations.idempotent, "openWorldHint", t->annotations.open_world);
        }
        json_decref(schema);
        return NULL;
}

bool tools_offered(const struct tool *t, const char *profile)
{
        struct airlock_error err = { { 0 } };
        struct profile *p = NULL;
        bool allowed;

        if (!t->language)
                return true;
        /* Read from the profile's file, as a session of it would be made: only tools/list and
         * GET /v1/tools come here, never an execution. */
        if (profile_load(profile ? profile : "default", &p, &err) < 0)
                return false;
        allowed = profile_allows_language(p, t->language);
        profile_free(p);
        return allowed;
}

/* The declarations of airlock's tools (those profile is offered, unless all) and hub's. */
static json_t *declarations(enum tools_format format, struct hub *hub, bool all,
                            const char *profile)
{
        json_t *list = json_array();

        if (!list)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(all_tools); i++) {
                json_t *d;
                if (!all && !tools_offered(all_tools[i], profile))
                        continue;
                d = tool_declaration(all_tools[i], format);
                if (!d || json_array_append_new(list, d) < 0) {
                        json_decref(list);
                        return NULL;
                }
        }
        if (tools_internal_declare(hub, format, list) < 0) {
                json_decref(list);
                return NULL;
        }
        return list;
}

json_t *tools_declarations(enum tools_format format, struct hub *hub)
{
        return declarations(format, hub, true, NULL);
}

json_t *tools_declarations_for(enum tools_format format, struct hub *hub, const char *profile)
{
        return declarations(format, hub, false, profile);
}

json_t *toolbox_declarations(struct toolbox *tb, enum tools_format format)
{
        json_t *list = tools_declarations_for(format, tb->hub, tb->profile);
        _cleanup_(json_decrefp) json_t *code = NULL;
        _cleanup_free_ char *id = NULL;

        if (!list || !tb->backend->ops->code_tools)
                return list;
        (void) pthread_mutex_lock(&tb->lock);
        id = tb->session_id ? strdup(tb->session_id) : NULL;
        (void) pthread_mutex_unlock(&tb->lock);
        code = tb->backend->ops->code_tools(tb->backend->userdata, id, tb->profile);
        if (json_array_size(code) > 0 && tools_code_mode_describe(list, format, code) < 0) {
                json_decref(list);
                return NULL;
        }
        return list;
}

bool toolbox_has_tool(struct toolbox *tb, const char *name)
{
        char server[64];

        return tools_find(name) ||
               (tb && tools_internal_server(tb->hub, name, server, sizeof(server)));
}

bool toolbox_needs_approval(struct toolbox *tb, const char *name)
{
        return !tools_find(name) && tools_internal_needs_approval(tb->hub, name);
}

bool toolbox_tool_server(struct toolbox *tb, const char *name, char *buf, size_t size)
{
        return !tools_find(name) && tools_internal_server(tb->hub, name, buf, size);
}

/* ---- validation ------------------------------------------------------------------------- */

static bool type_matches(const char *type, const json_t *v)
{
        if (strcmp(type, "string") == 0)
                return json_is_string(v);
        if (strcmp(type, "number") == 0)
                return json_is_number(v);
        if (strcmp(type, "integer") == 0)
                return json_is_integer(v) ||
                       (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v));
        if (strcmp(type, "boolean") == 0)
                return json_is_boolean(v);
        if (strcmp(type, "object") == 0)
                return json_is_object(v);
        if (strcmp(type, "array") == 0)
                return json_is_array(v);
        return false;
}

/* Checks one argument against its property schema: the subset of JSON Schema our tools use
 * (type, enum, minLength, exclusiveMinimum, minimum, maximum). */
static int validate_value(const char *name, json_t *prop, json_t *v, struct airlock_error *err)
{
        const char *type = json_string_value(json_object_get(prop, "type"));
        json_t *en = json_object_get(prop, "enum"), *lim;

        if (type && !type_matches(type, v))
                return airlock_error_set(err, -EINVAL, "argument '%s' must be %s, not %s", name,
                                         strcmp(type, "integer") == 0   ? "an integer"
                                         : strcmp(type, "object") == 0  ? "an object"
                                         : strcmp(type, "array") == 0   ? "an array"
                                         : strcmp(type, "boolean") == 0 ? "a boolean"
                                         : strcmp(type, "number") == 0  ? "a number"
                                                                        : "a string",
                                         json_type_name(v));
        if (json_is_string(v)) {
                size_t len = json_string_length(v);
                /* Code and paths go to C strings; a NUL would silently cut them. */
                if (strlen(json_string_value(v)) != len)
                        return airlock_error_set(err, -EINVAL,
                                                 "argument '%s' contains a NUL character", name);
                lim = json_object_get(prop, "minLength");
                if (json_is_integer(lim) && (json_int_t) len < json_integer_value(lim))
                        return airlock_error_set(err, -EINVAL, "argument '%s' must not be empty",
                                                 name);
        }
        if (json_is_array(en)) {
                size_t i;
                json_t *e;
                json_array_foreach (en, i, e)
                        if (json_equal(e, v))
                                return 0;
                _cleanup_free_ char *allowed = json_dump_text(en, JSON_COMPACT, NULL);
                return airlock_error_set(err, -EINVAL, "argument '%s' must be one of %s", name,
                                         allowed ? allowed : "the listed values");
        }
        if (json_is_number(v)) {
                double d = json_number_value(v);
                json_t *emin = json_object_get(prop, "exclusiveMinimum");
                json_t *min = json_object_get(prop, "minimum");
                json_t *max = json_object_get(prop, "maximum");
                char lo[48] = "", hi[48] = "";

                if (json_is_number(emin))
                        (void) snprintf(lo, sizeof(lo), "%g < ", json_number_value(emin));
                else if (json_is_number(min))
                        (void) snprintf(lo, sizeof(lo), "%g <= ", json_number_value(min));
                if (json_is_number(max))
                        (void) snprintf(hi, sizeof(hi), " <= %g", json_number_value(max));
                if (!isfinite(d) || (json_is_number(emin) && !(d > json_number_value(emin))) ||
                    (json_is_number(min) && !(d >= json_number_value(min))) ||
                    (json_is_number(max) && !(d <= json_number_value(max))))
                        return airlock_error_set(err, -EINVAL,
                                                 "argument '%s' must be a number with %s%s%s", name,
                                                 lo, name, hi);
        }
        return 0;
}

int tools_validate(const struct tool *t, json_t *args, struct airlock_error *err)
{
        json_t *schema = NULL, *props, *required, *v;
        const char *key;
        size_t i;
        int r = 0;

        if (args && !json_is_object(args))
                return airlock_error_set(err, -EINVAL,
                                         "the arguments of %s must be a JSON object, not %s",
                                         t->name, json_type_name(args));
        schema = tool_schema(t);
        if (!schema)
                return -ENOMEM;
        props = json_object_get(schema, "properties");
        required = json_object_get(schema, "required");

        if (args)
                json_object_foreach (args, key, v) {
                        json_t *prop = json_object_get(props, key);
                        if (!prop) {
                                _cleanup_free_ char *known = NULL;
                                const char *k;
                                json_t *p;
                                size_t len = 0;
                                FILE *f = open_memstream(&known, &len);
                                if (f) {
                                        json_object_foreach (props, k, p)
                                                fprintf(f, "%s%s", len++ ? ", " : "", k);
                                        fclose(f);
                                }
                                r = airlock_error_set(err, -EINVAL,
                                                      "unknown argument '%.100s' for %s (%s%s)",
                                                      key, t->name,
                                                      known && *known ? "its arguments are: "
                                                                      : "it takes no arguments",
                                                      known ? known : "");
                                goto out;
                        }
                        /* Models often send null for an optional argument they leave out. */
                        if (json_is_null(v))
                                continue;
                        r = validate_value(key, prop, v, err);
                        if (r < 0)
                                goto out;
                }
        json_array_foreach (required, i, v) {
                json_t *a = json_object_get(args, json_string_value(v));
                if (!a || json_is_null(a)) {
                        r = airlock_error_set(err, -EINVAL, "missing required argument '%s' for %s",
                                              json_string_value(v), t->name);
                        goto out;
                }
        }
out:
        json_decref(schema);
        return r;
}

uint64_t tools_timeout_ms(json_t *args)
{
        json_t *v = json_object_get(args, "timeout_s");
        double ms;

        if (!json_is_number(v))
                return 0;
        ms = json_number_value(v) * 1000.0;
        /* At least 1 ms: 0 would mean "the profile's limit". */
        return ms < 1.0 ? 1 : (uint64_t) ms;
}

const char *tools_work_path(const char *path)
{
        if (strcmp(path, "/work") == 0 || strcmp(path, "/work/") == 0 || strcmp(path, ".") == 0 ||
            strcmp(path, "./") == 0)
                return path + strlen(path);
        if (strncmp(path, "/work/", 6) == 0)
                return path + 6;
        if (strncmp(path, "./", 2) == 0)
                return path + 2;
        if (path[0] == '/')
                return NULL;
        return path;
}

/* ---- results ---------------------------------------------------------------------------- */

void tool_result_done(struct tool_result *res)
{
        free(res->text);
        json_decref(res->images);
        json_decref(res->files);
        json_decref(res->execution);
        free(res->session_id);
        *res = (struct tool_result){ 0 };
}

static int result_vappendf(struct tool_result *res, const char *fmt, va_list ap)
{
        _cleanup_free_ char *add = NULL;
        size_t old = res->text ? strlen(res->text) : 0, len;
        char *p;

        if (vasprintf(&add, fmt, ap) < 0)
                return -ENOMEM;
        len = strlen(add);
        p = realloc(res->text, old + len + 1);
        if (!p)
                return -ENOMEM;
        memcpy(p + old, add, len + 1);
        res->text = p;
        return 0;
}

int tool_result_appendf(struct tool_result *res, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = result_vappendf(res, fmt, ap);
        va_end(ap);
        return r;
}

int tool_result_error(struct tool_result *res, const char *fmt, ...)
{
        va_list ap;
        int r;

        res->is_error = true;
        if (res->text && *res->text && res->text[strlen(res->text) - 1] != '\n') {
                r = tool_result_appendf(res, "\n");
                if (r < 0)
                        return r;
        }
        va_start(ap, fmt);
        r = result_vappendf(res, fmt, ap);
        va_end(ap);
        return r;
}

/* ---- toolbox ---------------------------------------------------------------------------- */

int toolbox_new(struct tools_backend *backend, const struct toolbox_options *opts,
                struct toolbox **ret_tb)
{
        struct toolbox *tb = calloc(1, sizeof(*tb));

        if (!tb)
                return -ENOMEM;
        tb->backend = backend;
        (void) pthread_mutex_init(&tb->lock, NULL);
        if (opts) {
                tb->keep_session = opts->keep_session;
                tb->hub = opts->hub;
                if ((opts->profile && !(tb->profile = strdup(opts->profile))) ||
                    (opts->session_id && !(tb->session_id = strdup(opts->session_id)))) {
                        toolbox_free(tb);
                        return -ENOMEM;
                }
        }
        *ret_tb = tb;
        return 0;
}

struct toolbox *toolbox_free(struct toolbox *tb)
{
        if (!tb)
                return NULL;
        if (tb->session_id && !tb->keep_session)
                (void) tb->backend->ops->session_destroy(tb->backend->userdata, tb->session_id);
        (void) pthread_mutex_destroy(&tb->lock);
        free(tb->profile);
        free(tb->session_id);
        free(tb->ended_note);
        free(tb);
        return NULL;
}

const struct tools_backend *toolbox_backend(struct toolbox *tb)
{
        return tb->backend;
}

int toolbox_session_get(struct toolbox *tb, bool create, char **ret_id, struct tool_result *res)
{
        struct airlock_error err = { { 0 } };
        _cleanup_free_ char *note = NULL;
        char *id = NULL;
        int r = 0;

        (void) pthread_mutex_lock(&tb->lock);
        if (tb->session_id) {
                id = strdup(tb->session_id);
                r = id ? 0 : -ENOMEM;
        } else if (!create) {
                r = -ESRCH;
        } else if (tb->closed) {
                r = -ECANCELED;
        } else {
                /* Under the lock: two first calls at once must share one new session. */
                r = tb->backend->ops->session_create(tb->backend->userdata, tb->profile,
                                                     &tb->session_id, &err);
                if (r >= 0) {
                        id = strdup(tb->session_id);
                        r = id ? 0 : -ENOMEM;
                        note = TAKE_PTR(tb->ended_note);
                }
        }
        (void) pthread_mutex_unlock(&tb->lock);

        if (r == -ESRCH)
                return r;
        if (r == -ECANCELED) {
                (void) tool_result_error(res, "the session was ended because its connection "
                                              "was closed; no new one starts");
                return r;
        }
        if (r < 0) {
                (void) tool_result_error(res, "cannot start a sandbox session: %s",
                                         err.msg[0] ? err.msg : strerror(-r));
                return r;
        }
        if (note)
                (void) tool_result_appendf(res,
                                           "note: this call runs in a new session because the "
                                           "previous one ended (%s); variables and files from "
                                           "before are gone.\n",
                                           note);
        *ret_id = id;
        return 0;
}

void toolbox_session_forget(struct toolbox *tb, const char *id, const char *why)
{
        (void) pthread_mutex_lock(&tb->lock);
        if (tb->session_id && strcmp(tb->session_id, id) == 0) {
                free(tb->session_id);
                tb->session_id = NULL;
                free(tb->ended_note);
                tb->ended_note = strdup(why ? why : "it ended");
        }
        (void) pthread_mutex_unlock(&tb->lock);
}

int toolbox_session_id(struct toolbox *tb, char *buf, size_t size)
{
        int r = 0;

        (void) pthread_mutex_lock(&tb->lock);
        if (!tb->session_id)
                r = -ESRCH;
        else if (strlen(tb->session_id) >= size)
                r = -ENOBUFS;
        else
                memcpy(buf, tb->session_id, strlen(tb->session_id) + 1);
        (void) pthread_mutex_unlock(&tb->lock);
        return r;
}

static int end_session(struct toolbox *tb, bool close)
{
        char *id;

        (void) pthread_mutex_lock(&tb->lock);
        tb->closed |= close;
        id = TAKE_PTR(tb->session_id);
        free(tb->ended_note);
        tb->ended_note = NULL;
        (void) pthread_mutex_unlock(&tb->lock);
        if (id) {
                /* -ESRCH: it had ended already, which is what was asked. */
                (void) tb->backend->ops->session_destroy(tb->backend->userdata, id);
                free(id);
        }
        return 0;
}

int toolbox_reset(struct toolbox *tb)
{
        return end_session(tb, false);
}

void toolbox_close(struct toolbox *tb)
{
        (void) end_session(tb, true);
}

int toolbox_file_read(struct toolbox *tb, const char *path, size_t max_bytes, char **ret_data,
                      size_t *ret_len, struct airlock_error *err)
{
        _cleanup_free_ char *id = NULL;
        struct tool_result scratch = { 0 };
        int r;

        r = toolbox_session_get(tb, false, &id, &scratch);
        tool_result_done(&scratch);
        if (r < 0)
                return airlock_error_set(err, r, "no session has been started yet");
        r = tb->backend->ops->file_read(tb->backend->userdata, id, path, max_bytes, ret_data,
                                        ret_len, err);
        if (r == -ESRCH)
                toolbox_session_forget(tb, id, "the session ended");
        return r;
}

/* args with its timeout_s cut to the time left before deadline_ns, for a tool that takes one:
 * a new reference (args itself, or a copy). NULL on allocation failure. */
static json_t *args_within(const struct tool *t, json_t *args, uint64_t deadline_ns)
{
        _cleanup_(json_decrefp) json_t *schema = tool_schema(t);
        json_t *given = json_object_get(args, "timeout_s"), *copy;
        uint64_t now = now_ns();
        double left_s = now < deadline_ns ? (double) (deadline_ns - now) / 1e9 : 0;

        if (left_s < 0.001)
                left_s = 0.001;
        if (!schema || !json_object_get(json_object_get(schema, "properties"), "timeout_s") ||
            !json_is_number(given) || json_number_value(given) <= left_s)
                return json_incref(args);
        copy = json_copy(args);
        if (copy && json_object_set_new(copy, "timeout_s", json_real(left_s)) < 0) {
                json_decref(copy);
                return NULL;
        }
        return copy;
}

int toolbox_call(struct toolbox *tb, const char *name, json_t *args, struct tool_result *ret_res)
{
        return toolbox_call_until(tb, name, args, 0, ret_res);
}

/* The tool call's audit line, in the daemon (a request's scope names the audit log): the tool,
 * its server ("airlock" for airlock's own), how it ended and how long it took. Not its
 * arguments: run_python's code is in its execution line, and other arguments may be data. */
static void audit_tool_call(struct toolbox *tb, const char *name, const struct tool *t,
                            const struct tool_result *res, uint64_t t0)
{
        const struct audit_scope *scope = audit_scope_current();
        char server[128] = "airlock";

        if (!scope || !scope->audit)
                return;
        if (!t && !tools_internal_server(tb->hub, name, server, sizeof(server)))
                (void) snprintf(server, sizeof(server), "unknown");
        audit_emit_scoped(scope->audit, "tool.call", res->session_id,
                          json_pack("{s:o, s:s, s:s, s:f}", "tool", audit_string(name), "server",
                                    server, "outcome", res->is_error ? "tool_error" : "ok", "ms",
                                    (double) (now_ns() - t0) / 1e6));
}

int toolbox_call_until(struct toolbox *tb, const char *name, json_t *args, uint64_t deadline_ns,
                       struct tool_result *ret_res)
{
        uint64_t t0 = now_ns();
        struct tool_result res = { 0 };
        struct airlock_error err = { { 0 } };
        const struct tool *t = tools_find(name);
        _cleanup_(json_decrefp) json_t *empty = NULL, *within = NULL;
        int r;

        res.text = strdup("");
        res.images = json_array();
        res.files = json_array();
        if (!res.text || !res.images || !res.files) {
                tool_result_done(&res);
                return -ENOMEM;
        }

        if (!t) {
                /* Not airlock's own: an internal tool, or nothing (-ENOENT). */
                r = tools_internal_call(tb->hub, name, args, deadline_ns, &res);
        } else if ((r = tools_validate(t, args, &err)) < 0) {
                r = tool_result_error(&res, "%s", err.msg);
        } else {
                if (!args)
                        args = empty = json_object();
                if (args && deadline_ns)
                        args = within = args_within(t, args, deadline_ns);
                r = args ? t->handler(tb, args, &res) : -ENOMEM;
        }
        if (r < 0) {
                tool_result_done(&res);
                return r;
        }

        (void) pthread_mutex_lock(&tb->lock);
        if (tb->session_id)
                res.session_id = strdup(tb->session_id);
        (void) pthread_mutex_unlock(&tb->lock);
        audit_tool_call(tb, name, t, &res, t0);
        *ret_res = res;
        return 0;
}

struct tools_backend *tools_backend_free(struct tools_backend *b)
{
        if (!b)
                return NULL;
        if (b->ops && b->ops->free)
                b->ops->free(b->userdata);
        free(b);
        return NULL;
}
