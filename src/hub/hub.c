/* The hub (hub.h): one supervisor thread per server connects, initializes, lists the tools,
 * refreshes them when the server says they changed, and reconnects with backoff when the
 * connection breaks. Calls take a reference on the live connection, so that a supervisor
 * replacing it waits for them to end (they end at once: the old connection is aborted first). */
#include "hub-internal.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/jsonschema.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BACKOFF_MIN_MS 1000u
#define BACKOFF_MAX_MS 60000u
/* A connection that stayed up this long starts the backoff again from its minimum. */
#define HEALTHY_MS 60000u
#define TOOLS_MAX 1000
#define LIST_PAGES_MAX 100
#define LIST_TIMEOUT_MS 30000u
/* HTTP servers whose notification stream we cannot hear are asked again this often. */
#define HTTP_REFRESH_MS 300000u

static const char *const supported_versions[] = { "2024-11-05", "2025-03-26", "2025-06-18",
                                                  "2025-11-25", NULL };

enum server_state { STATE_STARTING, STATE_READY, STATE_UNAVAILABLE };

struct server {
        struct hub *hub;
        struct server_config cfg;
        pthread_t thread;
        bool thread_started;
        /* under hub->lock */
        enum server_state state;
        char reason[AIRLOCK_ERROR_MAX];
        json_t *tools; /* the server's tool objects that allowed_tools lets through */
        struct conn *conn;
        unsigned conn_refs;
        unsigned restarts;
        bool started; /* the first attempt finished */
        bool refresh; /* tools/list_changed came */
        bool broken;  /* the connection closed */
        char broken_why[AIRLOCK_ERROR_MAX];
};

struct hub {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stopping;
        atomic_bool cancel; /* stopping, for waits that do not hold the lock (a start) */
        struct server *servers;
        size_t n_servers;
        char **reserved;
        uint64_t generation;
        json_t *exposed; /* hub_tools()'s answer, rebuilt at every change */
};

static void cond_init_monotonic(pthread_cond_t *c)
{
        pthread_condattr_t attr;

        (void) pthread_condattr_init(&attr);
        (void) pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        (void) pthread_cond_init(c, &attr);
        (void) pthread_condattr_destroy(&attr);
}

static void wait_until(struct hub *h, uint64_t until_ns)
{
        struct timespec ts = { .tv_sec = (time_t) (until_ns / 1000000000u),
                               .tv_nsec = (long) (until_ns % 1000000000u) };

        (void) pthread_cond_timedwait(&h->cond, &h->lock, &ts);
}

/* ---- names ------------------------------------------------------------------------------ */

static bool name_char_ok(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '_' || ch == '-';
}

static bool name_valid(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > HUB_NAME_MAX)
                return false;
        for (; *s; s++)
                if (!name_char_ok(*s))
                        return false;
        return true;
}

static bool strv_contains(char **v, const char *s)
{
        for (; v && *v; v++)
                if (strcmp(*v, s) == 0)
                        return true;
        return false;
}

/* How many tools of every server carry this name (the lock is held). */
static unsigned name_count(struct hub *h, const char *name)
{
        unsigned n = 0;

        for (size_t i = 0; i < h->n_servers; i++) {
                size_t j;
                json_t *t;
                json_array_foreach (h->servers[i].tools, j, t) {
                        const char *tn = json_string_value(json_object_get(t, "name"));
                        if (tn && strcmp(tn, name) == 0)
                                n++;
                }
        }
        return n;
}

static bool exposed_taken(json_t *exposed, const char *name)
{
        size_t i;
        json_t *t;

        json_array_foreach (exposed, i, t)
                if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
                        return true;
        return false;
}

/* The tool's own name when that is valid and unique; else SERVER__TOOL, made valid. */
static void exposed_name(struct hub *h, json_t *exposed, const char *server, const char *tool,
                         char *buf, size_t size)
{
        size_t n;

        if (name_valid(tool) && name_count(h, tool) == 1 && !strv_contains(h->reserved, tool) &&
            !exposed_taken(exposed, tool)) {
                (void) snprintf(buf, size, "%s", tool);
                return;
        }
        (void) snprintf(buf, size, "%s__%s", server, tool);
        n = strlen(buf);
        if (n > HUB_NAME_MAX)
                buf[n = HUB_NAME_MAX] = '\0';
        for (size_t i = 0; i < n; i++)
                if (!name_char_ok(buf[i]))
                        buf[i] = '_';
        for (unsigned k = 2; exposed_taken(exposed, buf) && k < 1000; k++) {
                char suffix[8];
                int len = snprintf(suffix, sizeof(suffix), "_%u", k);
                if (n + (size_t) len > HUB_NAME_MAX)
                        n = HUB_NAME_MAX - (size_t) len;
                buf[n] = '\0';
                (void) snprintf(buf + n, size - n, "%s", suffix);
        }
}

void hub_python_name(const char *name, char *buf, size_t size)
{
        static const char *const keywords[] = {
                "False",   "None",     "True",     "and",    "as",   "assert", "async",  "await",
                "break",   "class",    "continue", "def",    "del",  "elif",   "else",   "except",
                "finally", "for",      "from",     "global", "if",   "import", "in",     "is",
                "lambda",  "nonlocal", "not",      "or",     "pass", "raise",  "return", "try",
                "while",   "with",     "yield",    NULL
        };
        size_t o = 0;

        if (size == 0)
                return;
        if (*name >= '0' && *name <= '9' && o + 1 < size)
                buf[o++] = '_';
        for (const char *p = name; *p && o + 1 < size; p++) {
                char ch = *p;
                bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                          (ch >= '0' && ch <= '9') || ch == '_';
                buf[o++] = ok ? ch : '_';
        }
        buf[o] = '\0';
        if (o == 0 && size > 1) {
                buf[0] = '_';
                buf[1] = '\0';
        }
        for (const char *const *k = keywords; *k; k++)
                if (strcmp(buf, *k) == 0 && strlen(buf) + 2 <= size) {
                        strcat(buf, "_");
                        break;
                }
}

/* ---- the registry ------------------------------------------------------------------------ */

static const char *state_name(enum server_state s)
{
        switch (s) {
        case STATE_STARTING:
                return "starting";
        case STATE_READY:
                return "ready";
        case STATE_UNAVAILABLE:
                return "unavailable";
        }
        return "unavailable";
}

/* Rebuilds h->exposed and bumps the generation; the lock is held. */
static void registry_changed(struct hub *h)
{
        json_t *exposed = json_array();

        for (size_t i = 0; exposed && i < h->n_servers; i++) {
                struct server *s = &h->servers[i];
                size_t j;
                json_t *t;

                json_array_foreach (s->tools, j, t) {
                        const char *tool = json_string_value(json_object_get(t, "name"));
                        char name[HUB_NAME_MAX + 1];
                        json_t *e;

                        exposed_name(h, exposed, s->cfg.name, tool, name, sizeof(name));
                        e = json_pack("{s:s, s:s, s:s, s:O, s:s, s:b}", "name", name, "server",
                                      s->cfg.name, "tool", tool, "inputSchema",
                                      json_object_get(t, "inputSchema"), "require_approval",
                                      server_tool_approval(&s->cfg, tool) == APPROVAL_ALWAYS
                                              ? "always"
                                              : "never",
                                      "available", s->state == STATE_READY);
                        if (!e)
                                continue;
                        json_object_set_new(
                                e, "description",
                                json_string(json_is_string(json_object_get(t, "description"))
                                                    ? json_string_value(
                                                              json_object_get(t, "description"))
                                                    : ""));
                        if (json_is_string(json_object_get(t, "title")))
                                json_object_set(e, "title", json_object_get(t, "title"));
                        if (json_is_object(json_object_get(t, "outputSchema")))
                                json_object_set(e, "outputSchema",
                                                json_object_get(t, "outputSchema"));
                        if (json_is_object(json_object_get(t, "annotations")))
                                json_object_set(e, "annotations",
                                                json_object_get(t, "annotations"));
                        if (s->state != STATE_READY)
                                json_object_set_new(e, "reason", json_string(s->reason));
                        json_array_append_new(exposed, e);
                }
        }
        if (exposed) {
                json_decref(h->exposed);
                h->exposed = exposed;
        }
        h->generation++;
        (void) pthread_cond_broadcast(&h->cond);
}

/* A tool object the server listed, checked enough to be shown: a name and an object schema. */
static bool tool_usable(const json_t *t)
{
        const json_t *schema = json_object_get(t, "inputSchema");

        return json_is_object(t) && json_is_string(json_object_get(t, "name")) &&
               json_string_length(json_object_get(t, "name")) > 0 && json_is_object(schema);
}

/* tools/list, every page. Returns 0 with a new array of the allowed tools, or -errno. */
static int list_tools(struct server *s, struct conn *c, json_t **ret_tools,
                      struct airlock_error *err)
{
        _cleanup_(json_decrefp) json_t *tools = json_array();
        _cleanup_(json_decrefp) json_t *cursor = NULL;

        if (!tools)
                return -ENOMEM;
        for (int page = 0; page < LIST_PAGES_MAX; page++) {
                _cleanup_(json_decrefp) json_t *result = NULL;
                json_t *params = cursor ? json_pack("{s:O}", "cursor", cursor) : NULL;
                json_t *list, *t, *next;
                size_t i;
                int r;

                r = c->ops->request(c, "tools/list", params,
                                    now_ns() + LIST_TIMEOUT_MS * 1000000ull, &s->hub->cancel,
                                    &result, err);
                json_decref(params);
                if (r == -ETIMEDOUT)
                        return airlock_error_set(err, r, "tools/list had no answer within %u s",
                                                 LIST_TIMEOUT_MS / 1000);
                if (r < 0)
                        return r;
                list = json_object_get(result, "tools");
                if (!json_is_array(list))
                        return airlock_error_set(err, -EPROTO,
                                                 "tools/list answered without a tools array");
                json_array_foreach (list, i, t) {
                        if (!tool_usable(t)) {
                                log_warn("mcp_server=%s msg=\"a tool without a name or an input "
                                         "schema was ignored\"",
                                         s->cfg.name);
                                continue;
                        }
                        if (!server_tool_allowed(&s->cfg,
                                                 json_string_value(json_object_get(t, "name"))))
                                continue;
                        if (json_array_size(tools) >= TOOLS_MAX)
                                return airlock_error_set(err, -E2BIG,
                                                         "the server lists more than %d tools",
                                                         TOOLS_MAX);
                        json_array_append(tools, t);
                }
                next = json_object_get(result, "nextCursor");
                json_decref(cursor);
                cursor = json_is_string(next) && json_string_length(next) > 0 ? json_incref(next)
                                                                              : NULL;
                if (!cursor) {
                        *ret_tools = TAKE_PTR(tools);
                        return 0;
                }
        }
        return airlock_error_set(err, -EPROTO, "tools/list went on for more than %d pages",
                                 LIST_PAGES_MAX);
}

static void on_notified(void *userdata, const char *method, json_t *params)
{
        struct server *s = userdata;

        (void) params;
        if (strcmp(method, "notifications/tools/list_changed") != 0)
                return;
        (void) pthread_mutex_lock(&s->hub->lock);
        s->refresh = true;
        (void) pthread_cond_broadcast(&s->hub->cond);
        (void) pthread_mutex_unlock(&s->hub->lock);
}

static void on_closed(void *userdata, const char *why)
{
        struct server *s = userdata;

        (void) pthread_mutex_lock(&s->hub->lock);
        if (!s->broken) {
                s->broken = true;
                (void) snprintf(s->broken_why, sizeof(s->broken_why), "%s", why);
        }
        (void) pthread_cond_broadcast(&s->hub->cond);
        (void) pthread_mutex_unlock(&s->hub->lock);
}

/* Opens the connection and runs the initialize handshake. */
static int connect_server(struct server *s, struct conn **ret_conn, struct airlock_error *err)
{
        const struct conn_events ev = { .notified = on_notified,
                                        .closed = on_closed,
                                        .userdata = s };
        _cleanup_(json_decrefp) json_t *params = NULL, *result = NULL;
        uint64_t deadline = now_ns() + s->cfg.startup_timeout_ms * 1000000ull;
        const char *version;
        struct conn *c = NULL;
        bool known = false;
        int r;

        r = s->cfg.command ? conn_stdio_open(&s->cfg, &ev, &c, err)
                           : conn_http_open(&s->cfg, &ev, &c, err);
        if (r < 0)
                return r;
        params = json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", HUB_PROTOCOL_VERSION,
                           "capabilities", "clientInfo", "name", "airlock", "version",
                           AIRLOCK_VERSION);
        r = params ? c->ops->request(c, "initialize", params, deadline, &s->hub->cancel, &result,
                                     err)
                   : -ENOMEM;
        if (r == -ETIMEDOUT)
                r = airlock_error_set(err, r, "the server did not answer initialize within %.1f s",
                                      s->cfg.startup_timeout_ms / 1000.0);
        else if ((r == -EPROTO || r == -EHOSTDOWN) && err) {
                char why[AIRLOCK_ERROR_MAX];
                (void) snprintf(why, sizeof(why), "%s", err->msg);
                r = airlock_error_set(err, r, "initialize failed: %s", why);
        }
        version = r == 0 ? json_string_value(json_object_get(result, "protocolVersion")) : NULL;
        for (const char *const *v = supported_versions; version && *v; v++)
                known = known || strcmp(*v, version) == 0;
        if (r == 0 && !known)
                r = airlock_error_set(err, -EPROTO,
                                      "the server speaks MCP revision %s, which airlock does not "
                                      "know",
                                      version ? version : "(none given)");
        if (r == 0 &&
            !json_is_object(json_object_get(json_object_get(result, "capabilities"), "tools")))
                r = airlock_error_set(err, -EPROTO, "the server offers no tools");
        if (r == 0) {
                r = c->ops->notify(c, "notifications/initialized", NULL);
                if (r < 0)
                        r = airlock_error_set(err, r,
                                              "sending notifications/initialized failed: %s",
                                              strerror(-r));
        }
        if (r < 0) {
                c->ops->abort(c, "the server failed to start");
                c->ops->close(c);
                return r;
        }
        *ret_conn = c;
        return 0;
}

/* Sets the server's state (the lock is held). */
static void set_state(struct server *s, enum server_state state, const char *reason)
{
        s->state = state;
        (void) snprintf(s->reason, sizeof(s->reason), "%s", reason ? reason : "");
        registry_changed(s->hub);
}

/* Detaches the server's connection and ends it once the calls on it returned (the lock is
 * held and released meanwhile). */
static void drop_conn(struct server *s, const char *why)
{
        struct hub *h = s->hub;
        struct conn *c = s->conn;

        if (!c)
                return;
        s->conn = NULL;
        /* Unlocked: aborting may tell on_closed(), which takes the lock. */
        (void) pthread_mutex_unlock(&h->lock);
        c->ops->abort(c, why);
        (void) pthread_mutex_lock(&h->lock);
        while (s->conn_refs > 0)
                wait_until(h, now_ns() + 100000000u);
        (void) pthread_mutex_unlock(&h->lock);
        c->ops->close(c);
        (void) pthread_mutex_lock(&h->lock);
}

/* Waits until the connection breaks, the hub stops, or the tools must be listed again; lists
 * them. The lock is held. */
static void serve_connection(struct server *s)
{
        struct hub *h = s->hub;
        uint64_t next_poll = now_ns() + HTTP_REFRESH_MS * 1000000ull;

        while (!h->stopping && !s->broken) {
                if (s->refresh || (s->cfg.url && now_ns() >= next_poll)) {
                        struct airlock_error err = { "" };
                        struct conn *c = s->conn;
                        json_t *tools = NULL;
                        int r;

                        s->refresh = false;
                        next_poll = now_ns() + HTTP_REFRESH_MS * 1000000ull;
                        s->conn_refs++;
                        (void) pthread_mutex_unlock(&h->lock);
                        r = list_tools(s, c, &tools, &err);
                        (void) pthread_mutex_lock(&h->lock);
                        s->conn_refs--;
                        if (r < 0) {
                                log_warn("mcp_server=%s msg=\"listing its tools again failed: "
                                         "%s\"",
                                         s->cfg.name, err.msg);
                                continue;
                        }
                        json_decref(s->tools);
                        s->tools = tools;
                        registry_changed(h);
                        log_info("mcp_server=%s msg=\"its tools changed\" tools=%zu", s->cfg.name,
                                 json_array_size(tools));
                        continue;
                }
                wait_until(h, s->cfg.url ? next_poll : now_ns() + 3600000000000ull);
        }
}

static void *supervise(void *userdata)
{
        struct server *s = userdata;
        struct hub *h = s->hub;
        unsigned backoff_ms = BACKOFF_MIN_MS;

        (void) pthread_mutex_lock(&h->lock);
        while (!h->stopping) {
                struct airlock_error err = { "" };
                struct conn *c = NULL;
                json_t *tools = NULL;
                uint64_t up_ns, until;
                char why[AIRLOCK_ERROR_MAX];
                int r;

                s->broken = false;
                s->refresh = false;
                (void) pthread_mutex_unlock(&h->lock);
                r = connect_server(s, &c, &err);
                if (r == 0) {
                        r = list_tools(s, c, &tools, &err);
                        if (r < 0) {
                                c->ops->abort(c, "listing the tools failed");
                                c->ops->close(c);
                        }
                }
                (void) pthread_mutex_lock(&h->lock);
                s->started = true;
                if (r == 0 && !h->stopping) {
                        s->conn = c;
                        json_decref(s->tools);
                        s->tools = tools;
                        set_state(s, STATE_READY, NULL);
                        log_info("mcp_server=%s msg=\"ready\" tools=%zu pid=%d", s->cfg.name,
                                 json_array_size(tools), (int) c->ops->pid(c));
                        up_ns = now_ns();
                        serve_connection(s);
                        (void) snprintf(why, sizeof(why), "%s",
                                        s->broken ? s->broken_why : "airlock is stopping");
                        drop_conn(s, why);
                        if (h->stopping)
                                break;
                        if (now_ns() - up_ns > HEALTHY_MS * 1000000ull)
                                backoff_ms = BACKOFF_MIN_MS;
                        (void) snprintf(err.msg, sizeof(err.msg), "%s", why);
                } else if (r == 0) {
                        (void) pthread_mutex_unlock(&h->lock);
                        c->ops->abort(c, "airlock is stopping");
                        c->ops->close(c);
                        json_decref(tools);
                        (void) pthread_mutex_lock(&h->lock);
                        break;
                }
                if (h->stopping)
                        break; /* the failure was the stop itself */
                (void) snprintf(why, sizeof(why), "%.400s; retrying in %u s", err.msg,
                                backoff_ms / 1000);
                log_warn("mcp_server=%s msg=\"unavailable: %s\"", s->cfg.name, why);
                set_state(s, STATE_UNAVAILABLE, why);
                until = now_ns() + backoff_ms * 1000000ull;
                while (!h->stopping && now_ns() < until)
                        wait_until(h, until);
                backoff_ms = backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff_ms * 2;
                s->restarts++;
        }
        (void) pthread_mutex_unlock(&h->lock);
        return NULL;
}

/* ---- the hub ---------------------------------------------------------------------------- */

int hub_new(const struct hub_config *cfg, const struct hub_options *opts, struct hub **ret_hub)
{
        struct hub *h = calloc(1, sizeof(*h));
        size_t n = 0;

        if (!h)
                return -ENOMEM;
        /* A stdio server that exits or closes its stdin makes our next write to it an EPIPE
         * to report; with SIGPIPE's default action it would end the whole process (airlock
         * tools --mcp-config did: status 141, not a word). Pipes have no MSG_NOSIGNAL. */
        (void) signal(SIGPIPE, SIG_IGN);
        (void) pthread_mutex_init(&h->lock, NULL);
        cond_init_monotonic(&h->cond);
        h->exposed = json_array();
        h->servers = calloc(cfg->n_servers + 1, sizeof(*h->servers));
        for (const char *const *p = opts ? opts->reserved : NULL; p && *p; p++)
                n++;
        h->reserved = calloc(n + 1, sizeof(char *));
        if (!h->exposed || !h->servers || !h->reserved) {
                hub_free(h);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (!(h->reserved[i] = strdup(opts->reserved[i]))) {
                        hub_free(h);
                        return -ENOMEM;
                }
        for (size_t i = 0; i < cfg->n_servers; i++) {
                struct server *s = &h->servers[h->n_servers];
                if (server_config_copy(&cfg->servers[i], &s->cfg) < 0) {
                        hub_free(h);
                        return -ENOMEM;
                }
                s->hub = h;
                h->n_servers++;
                if (s->cfg.disabled) {
                        s->started = true;
                        s->state = STATE_UNAVAILABLE;
                        (void) snprintf(s->reason, sizeof(s->reason),
                                        "disabled in the configuration");
                }
        }
        for (size_t i = 0; i < h->n_servers; i++) {
                struct server *s = &h->servers[i];
                if (s->cfg.disabled)
                        continue;
                if (pthread_create(&s->thread, NULL, supervise, s) != 0) {
                        hub_free(h);
                        return -EAGAIN;
                }
                s->thread_started = true;
        }
        *ret_hub = h;
        return 0;
}

struct hub *hub_free(struct hub *h)
{
        if (!h)
                return NULL;
        (void) pthread_mutex_lock(&h->lock);
        h->stopping = true;
        atomic_store(&h->cancel, true);
        (void) pthread_cond_broadcast(&h->cond);
        (void) pthread_mutex_unlock(&h->lock);
        for (size_t i = 0; i < h->n_servers; i++)
                if (h->servers[i].thread_started)
                        (void) pthread_join(h->servers[i].thread, NULL);
        for (size_t i = 0; i < h->n_servers; i++) {
                json_decref(h->servers[i].tools);
                server_config_done(&h->servers[i].cfg);
        }
        free(h->servers);
        strv_free(h->reserved);
        json_decref(h->exposed);
        (void) pthread_cond_destroy(&h->cond);
        (void) pthread_mutex_destroy(&h->lock);
        free(h);
        return NULL;
}

bool hub_wait_started(struct hub *h, uint64_t timeout_ms)
{
        uint64_t until = now_ns() + timeout_ms * 1000000ull;
        bool all = false;

        (void) pthread_mutex_lock(&h->lock);
        for (;;) {
                all = true;
                for (size_t i = 0; i < h->n_servers; i++)
                        all = all && h->servers[i].started;
                if (all || now_ns() >= until)
                        break;
                wait_until(h, until);
        }
        (void) pthread_mutex_unlock(&h->lock);
        return all;
}

uint64_t hub_generation(struct hub *h)
{
        uint64_t g;

        (void) pthread_mutex_lock(&h->lock);
        g = h->generation;
        (void) pthread_mutex_unlock(&h->lock);
        return g;
}

json_t *hub_tools(struct hub *h)
{
        json_t *copy;

        (void) pthread_mutex_lock(&h->lock);
        copy = json_deep_copy(h->exposed);
        (void) pthread_mutex_unlock(&h->lock);
        return copy;
}

/* The exposed entry called name (the lock is held; borrowed). */
static json_t *find_exposed(struct hub *h, const char *name)
{
        size_t i;
        json_t *t;

        json_array_foreach (h->exposed, i, t)
                if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
                        return t;
        return NULL;
}

json_t *hub_tool(struct hub *h, const char *name)
{
        json_t *t;

        (void) pthread_mutex_lock(&h->lock);
        t = find_exposed(h, name);
        t = t ? json_deep_copy(t) : NULL;
        (void) pthread_mutex_unlock(&h->lock);
        return t;
}

/* The server an exposed entry comes from (the lock is held). */
static struct server *server_of_entry(struct hub *h, json_t *e)
{
        const char *name = json_string_value(json_object_get(e, "server"));

        for (size_t i = 0; name && i < h->n_servers; i++)
                if (strcmp(h->servers[i].cfg.name, name) == 0)
                        return &h->servers[i];
        return NULL;
}

bool hub_tool_needs_approval(struct hub *h, const char *name)
{
        const char *mode;
        json_t *e;
        bool yes;

        if (!h || !name)
                return false;
        (void) pthread_mutex_lock(&h->lock);
        e = find_exposed(h, name);
        mode = e ? json_string_value(json_object_get(e, "require_approval")) : NULL;
        yes = mode && strcmp(mode, "always") == 0;
        (void) pthread_mutex_unlock(&h->lock);
        return yes;
}

const char *hub_tool_server(struct hub *h, const char *name)
{
        struct server *s = NULL;
        json_t *e;

        if (!h || !name)
                return NULL;
        (void) pthread_mutex_lock(&h->lock);
        e = find_exposed(h, name);
        if (e)
                s = server_of_entry(h, e);
        (void) pthread_mutex_unlock(&h->lock);
        return s ? s->cfg.name : NULL;
}

json_t *hub_servers(struct hub *h)
{
        json_t *out = json_array();

        (void) pthread_mutex_lock(&h->lock);
        for (size_t i = 0; out && i < h->n_servers; i++) {
                struct server *s = &h->servers[i];
                json_t *o =
                        json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", s->cfg.name, "transport",
                                  s->cfg.command ? "stdio" : "http", "state", state_name(s->state),
                                  "tools", (json_int_t) json_array_size(s->tools), "restarts",
                                  (json_int_t) s->restarts);
                if (o && s->state != STATE_READY && s->reason[0])
                        json_object_set_new(o, "reason", json_string(s->reason));
                if (o && s->conn && s->conn->ops->pid(s->conn) > 0)
                        json_object_set_new(o, "pid", json_integer(s->conn->ops->pid(s->conn)));
                json_array_append_new(out, o);
        }
        (void) pthread_mutex_unlock(&h->lock);
        return out;
}

/* ---- calls ------------------------------------------------------------------------------ */

void hub_result_done(struct hub_result *res)
{
        free(res->text);
        json_decref(res->structured);
        json_decref(res->images);
        json_decref(res->content);
        memset(res, 0, sizeof(*res));
}

static int text_add(char **text, size_t *len, const char *s, size_t n)
{
        char *p = realloc(*text, *len + n + 2);

        if (!p)
                return -ENOMEM;
        *text = p;
        if (*len > 0)
                p[(*len)++] = '\n';
        memcpy(p + *len, s, n);
        *len += n;
        p[*len] = '\0';
        return 0;
}

/* A note for content that is not text: "[WHAT A (B)...]". A and B are the server's (a type,
 * a URI): each is cut to 200 bytes, so the note fits its buffer. */
static int note_add(char **text, size_t *len, const char *what, const char *a, const char *b,
                    const char *tail)
{
        char note[512];
        int n;

        a = a ? a : "?";
        b = b ? b : "?";
        n = snprintf(note, sizeof(note), "[%s %.*s (%.*s)%s]", what,
                     (int) utf8_complete_prefix(a, strnlen(a, 200)), a,
                     (int) utf8_complete_prefix(b, strnlen(b, 200)), b, tail);
        /* snprintf() says what it would have written: never copy more than it did. */
        if (n < 0)
                n = 0;
        if ((size_t) n >= sizeof(note))
                n = (int) sizeof(note) - 1;
        return text_add(text, len, note, (size_t) n);
}

/* Turns a CallToolResult into res, cut to max bytes. */
static int convert_result(json_t *result, size_t max, struct hub_result *res)
{
        json_t *content = json_object_get(result, "content"), *item;
        json_t *structured = json_object_get(result, "structuredContent");
        size_t len = 0, images_bytes = 0, other_bytes = 0, i;
        char *text = NULL;

        memset(res, 0, sizeof(*res));
        res->is_error = json_is_true(json_object_get(result, "isError"));
        res->images = json_array();
        if (!res->images)
                return -ENOMEM;
        json_array_foreach (content, i, item) {
                const char *type = json_string_value(json_object_get(item, "type"));
                const char *mime = json_string_value(json_object_get(item, "mimeType"));
                int r = 0;

                if (!type)
                        continue;
                if (strcmp(type, "text") == 0 && json_is_string(json_object_get(item, "text"))) {
                        json_t *t = json_object_get(item, "text");
                        r = text_add(&text, &len, json_string_value(t), json_string_length(t));
                } else if (strcmp(type, "image") == 0 &&
                           json_is_string(json_object_get(item, "data"))) {
                        images_bytes += json_string_length(json_object_get(item, "data"));
                        json_array_append_new(res->images,
                                              json_pack("{s:s, s:O}", "mime_type",
                                                        mime ? mime : "image/png", "data",
                                                        json_object_get(item, "data")));
                } else if (strcmp(type, "resource") == 0) {
                        json_t *rs = json_object_get(item, "resource");
                        json_t *t = json_object_get(rs, "text");
                        /* Not in the text, but passed on with the content (/mcp). */
                        other_bytes += json_string_length(json_object_get(rs, "blob"));
                        if (json_is_string(t))
                                r = text_add(&text, &len, json_string_value(t),
                                             json_string_length(t));
                        else
                                r = note_add(&text, &len, "a binary resource",
                                             json_string_value(json_object_get(rs, "uri")),
                                             json_string_value(json_object_get(rs, "mimeType")),
                                             ", not shown");
                } else if (strcmp(type, "resource_link") == 0) {
                        r = note_add(&text, &len, "resource link:",
                                     json_string_value(json_object_get(item, "uri")),
                                     json_string_value(json_object_get(item, "name")), "");
                } else {
                        other_bytes += json_string_length(json_object_get(item, "data"));
                        r = note_add(&text, &len, "content of type", type, mime, ", not shown");
                }
                if (r < 0) {
                        free(text);
                        return r;
                }
        }
        if (structured && len > 0) {
                /* Structured content goes to the caller instead of the text (Code Mode returns
                 * it) or beside it: the larger of the two counts (usually the text is its
                 * dump). */
                size_t sbytes = json_dumpb(structured, NULL, 0, JSON_COMPACT);
                if (sbytes > len)
                        other_bytes += sbytes - len;
        } else if (structured) {
                free(text);
                text = json_dump_text(structured, JSON_COMPACT, NULL);
                len = text ? strlen(text) : 0;
        }
        if (!text && !(text = strdup("")))
                return -ENOMEM;
        res->text = text;
        if (len + images_bytes + other_bytes > max) {
                char note[256];
                size_t keep = len > max ? utf8_complete_prefix(text, max) : len;
                int n = snprintf(note, sizeof(note),
                                 "\n[airlock: the tool's result was %zu bytes, over this server's "
                                 "limit of %zu (max_result_bytes): it was cut%s]",
                                 len + images_bytes + other_bytes, max,
                                 json_array_size(res->images) ? " and its images dropped" : "");
                char *p = realloc(text, keep + (size_t) n + 1);
                if (!p)
                        return -ENOMEM;
                memcpy(p + keep, note, (size_t) n + 1);
                res->text = p;
                res->cut = true;
                json_array_clear(res->images);
                return 0;
        }
        res->structured = json_incref(structured);
        res->content = json_incref(content);
        return 0;
}

/* The names of the tools, for "no such tool" (the lock is held). */
static void names_list(struct hub *h, char *buf, size_t size)
{
        size_t i, o = 0;
        json_t *t;

        buf[0] = '\0';
        json_array_foreach (h->exposed, i, t) {
                int n = snprintf(buf + o, size - o, "%s%s", o ? ", " : "",
                                 json_string_value(json_object_get(t, "name")));
                if (n < 0 || (size_t) n >= size - o) {
                        (void) snprintf(buf + (o > size - 6 ? size - 6 : o), 6, ", ...");
                        return;
                }
                o += (size_t) n;
        }
}

/* Whether entry e is still the tool the caller decided on (same server, same tool, same
 * approval): the registry may have changed between the caller's check and the call. */
static bool still_the_same(json_t *e, const json_t *expect)
{
        static const char *const keys[] = { "server", "tool", "require_approval" };

        if (!expect)
                return true;
        for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
                if (!json_equal(json_object_get(e, keys[i]),
                                json_object_get((json_t *) expect, keys[i])))
                        return false;
        return true;
}

int hub_call(struct hub *h, const char *name, const json_t *expect, json_t *args,
             uint64_t deadline_ns, const atomic_bool *cancel, struct hub_result *ret_res,
             struct airlock_error *err)
{
        _cleanup_(json_decrefp) json_t *params = NULL, *result = NULL, *schema = NULL,
                                       *empty = json_object();
        _cleanup_free_ char *tool = NULL;
        struct server *s = NULL;
        struct conn *c = NULL;
        uint64_t timeout_ms = 0, until, t0;
        size_t max = 0;
        json_t *e;
        int r;

        (void) pthread_mutex_lock(&h->lock);
        e = find_exposed(h, name);
        if (!e) {
                char names[400];
                names_list(h, names, sizeof(names));
                (void) pthread_mutex_unlock(&h->lock);
                return airlock_error_set(err, -ENOENT, "there is no internal tool called '%s'%s%s",
                                         name, names[0] ? " (there are: " : "",
                                         names[0] ? names : "");
        }
        if (!still_the_same(e, expect)) {
                (void) pthread_mutex_unlock(&h->lock);
                return airlock_error_set(err, -ENOENT,
                                         "the internal tool '%s' changed while it was being "
                                         "called (its server's tools changed); list the tools "
                                         "again",
                                         name);
        }
        s = server_of_entry(h, e);
        tool = strdup(json_string_value(json_object_get(e, "tool")));
        schema = json_incref(json_object_get(e, "inputSchema"));
        if (s && s->state == STATE_READY && s->conn) {
                c = s->conn;
                s->conn_refs++;
                timeout_ms = s->cfg.timeout_ms;
                max = s->cfg.max_result_bytes;
        }
        if (!c) {
                char reason[AIRLOCK_ERROR_MAX];
                (void) snprintf(reason, sizeof(reason), "%s", s ? s->reason : "");
                (void) pthread_mutex_unlock(&h->lock);
                return airlock_error_set(err, -EHOSTDOWN,
                                         "the tool '%s' is unavailable: its server '%s' is not "
                                         "running (%s)",
                                         name, s ? s->cfg.name : "?", reason);
        }
        (void) pthread_mutex_unlock(&h->lock);

        r = tool && empty ? 0 : -ENOMEM;
        if (!args)
                args = empty;
        if (r == 0 && !json_is_object(args))
                r = airlock_error_set(err, -EINVAL, "the arguments must be an object, got %s",
                                      json_type_name(args));
        if (r == 0)
                r = jsonschema_validate(schema, args, err);
        t0 = now_ns();
        until = t0 + timeout_ms * 1000000ull;
        if (deadline_ns && deadline_ns < until)
                until = deadline_ns;
        if (r == 0) {
                params = json_pack("{s:s, s:O}", "name", tool, "arguments", args);
                r = params ? c->ops->request(c, "tools/call", params, until, cancel, &result, err)
                           : -ENOMEM;
        }

        (void) pthread_mutex_lock(&h->lock);
        s->conn_refs--;
        (void) pthread_cond_broadcast(&h->cond);
        (void) pthread_mutex_unlock(&h->lock);

        if (r == -ETIMEDOUT)
                return airlock_error_set(err, r, "the tool '%s' did not answer within %.1f s", name,
                                         (double) (until - t0) / 1e9);
        if (r == -EHOSTDOWN && err) {
                char why[AIRLOCK_ERROR_MAX];
                (void) snprintf(why, sizeof(why), "%s", err->msg);
                return airlock_error_set(err, r,
                                         "the tool '%s' failed: its server '%s' went away "
                                         "(%s)",
                                         name, s->cfg.name, why);
        }
        if (r < 0)
                return r;
        r = convert_result(result, max, ret_res);
        if (r < 0)
                hub_result_done(ret_res);
        return r;
}
