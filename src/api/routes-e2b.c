/* The E2B SDK's surface (docs/E2B.md): its control plane under /e2b/api and its in-sandbox
 * daemons (envd's /files and Connect-RPC services, the code interpreter's /execute and
 * /contexts) under /e2b/sandbox, mapped onto sessions with e2b/e2b.h. Errors are E2B's shapes:
 * {"code": <status>, "message"} for the HTTP routes, Connect's {"code": "<name>", "message"} for
 * the RPC ones, so the SDK raises its own typed errors. The control plane takes the airlock
 * token in X-API-KEY; every sandbox route takes the sandbox's access token (X-Access-Token, or
 * E2B-Traffic-Access-Token, which the code interpreter's context calls send instead). Replies
 * are made whole, then sent: an execution's events arrive when it ends. */
#include "api-internal.h"
#include "cluster-list.h"

#include "json-body.h"

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/utf8.h"
#include "e2b/e2b.h"
#include "exec-stream.h"
#include "session/session.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define E2B_CMD_MAX (256u * 1024u) /* a command line built for commands.run */
#define E2B_TIMEOUT_MAX_S 86400u   /* E2B's own longest sandbox */

/* {"code": status, "message": msg}: E2B's API and envd answer errors so. */
static int e2b_reply(struct api_request *req, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int e2b_reply(struct api_request *req, unsigned status, const char *fmt, ...)
{
        _cleanup_free_ char *clean = NULL;
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        clean = utf8_sanitize(msg, strlen(msg));
        if (!clean)
                return -ENOMEM;
        /* A 503 (the session limit, a draining node) may be tried again, or elsewhere. */
        return api_reply_json_header(
                req, status, json_pack("{s:i, s:s}", "code", (int) status, "message", clean),
                status == MHD_HTTP_SERVICE_UNAVAILABLE ? "Retry-After" : NULL, "5");
}

/* The X-API-KEY of a control-plane call. Returns 1 when it is the airlock token, 0 when a 401
 * was queued. */
static int check_api_key(struct api_request *req)
{
        const char *key = api_header(req, "X-API-KEY");
        int r;

        if (!req->srv->e2b) {
                r = e2b_reply(req, MHD_HTTP_NOT_FOUND, "the E2B surface is off");
                return r < 0 ? r : 0;
        }
        /* A tenant's key works as E2B_API_KEY too: the sandboxes are then that tenant's. */
        if (!req->tenant && key && api_key_tenant(req->srv, key, strlen(key), &req->tenant) >= 0) {
                tenant_scope_set(req->tenant);
                req->audit_scope.tenant = req->tenant->name;
        }
        if (req->tenant)
                return 1;
        api_audit_auth_failure(req, key ? "invalid" : "missing");
        r = e2b_reply(req, MHD_HTTP_UNAUTHORIZED,
                      "missing or invalid X-API-KEY: set E2B_API_KEY to an airlock token");
        return r < 0 ? r : 0;
}

/* A control-plane call on the route's {id}: its X-API-KEY checked, the session named. Returns
 * 1, or 0 when a 401 or 404 was queued. */
static int route_session(struct api_request *req, char session[SESSION_ID_MAX + 1])
{
        int r;

        r = check_api_key(req);
        if (r <= 0)
                return r;
        if (e2b_session_id(req->params.id, session) >= 0)
                return 1;
        r = e2b_reply(req, MHD_HTTP_NOT_FOUND, "sandbox '%.64s' not found", req->params.id);
        return r < 0 ? r : 0;
}

/* The status of a failure to make a sandbox live: a tenant's quota is 429 and a profile outside
 * its list 403 (docs/TENANTS.md), as on /v1/sessions. */
static unsigned session_error_status(int r)
{
        switch (-r) {
        case EINVAL:
                return MHD_HTTP_BAD_REQUEST;
        case EXFULL:
                return MHD_HTTP_TOO_MANY_REQUESTS;
        case EACCES:
                return MHD_HTTP_FORBIDDEN;
        case EUSERS:
        case EAGAIN:
        case EMFILE:
        case ESHUTDOWN:
                return MHD_HTTP_SERVICE_UNAVAILABLE;
        default:
                return MHD_HTTP_INTERNAL_SERVER_ERROR;
        }
}

static int reply_no_sandbox(struct api_request *req)
{
        return e2b_reply(req, MHD_HTTP_NOT_FOUND, "sandbox '%.64s' not found", req->params.id);
}

static void rfc3339(time_t t, char out[32])
{
        struct tm tm;

        (void) gmtime_r(&t, &tm);
        (void) strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* E2B's sandbox object (ListedSandbox / SandboxDetail) from a session's description. */
static json_t *sandbox_json(struct api_request *req, const json_t *desc)
{
        const char *sid = json_string_value(json_object_get(desc, "id"));
        const char *state = json_string_value(json_object_get(desc, "state"));
        const char *created = json_string_value(json_object_get(desc, "created_at"));
        const char *stops_at = json_string_value(json_object_get(desc, "stops_at"));
        const json_t *limit = json_object_get(json_object_get(desc, "usage"), "memory_limit_bytes");
        json_t *metadata = json_object_get(desc, "metadata");
        char id[E2B_SANDBOX_ID_MAX + 1], tmpl[64], end[32];

        if (!sid || e2b_sandbox_id(sid, id) < 0)
                return NULL;
        e2b_template_of(req->srv->e2b, sid, tmpl);
        /* E2B's endAt: when the sandbox stops, its lifetime (E2B's timeout), or else when it
         * would stop unless used again (idle for stop_after_s). */
        rfc3339(time(NULL) + json_integer_value(json_object_get(desc, "stop_after_s")), end);
        if (stops_at)
                (void) snprintf(end, sizeof(end), "%s", stops_at);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:o, s:s}", "sandboxID", id,
                         "templateID", tmpl, "alias", tmpl, "clientID", E2B_CLIENT_ID, "startedAt",
                         created ? created : end, "endAt", end, "state",
                         state && strcmp(state, "stopped") == 0 ? "paused" : "running", "cpuCount",
                         1, "memoryMB", (json_int_t) (json_integer_value(limit) >> 20), "metadata",
                         json_is_object(metadata) ? json_incref(metadata) : json_object(),
                         "envdVersion", E2B_ENVD_VERSION);
}

/* The answer of create and connect: the sandbox and its access token. */
static int reply_sandbox_created(struct api_request *req, unsigned status, const char *session,
                                 const char *template_id)
{
        char id[E2B_SANDBOX_ID_MAX + 1], token[E2B_TOKEN_LEN + 1], tmpl[64];
        json_t *body;
        int r;

        r = e2b_sandbox_id(session, id);
        if (r >= 0)
                r = e2b_token_issue(req->srv->e2b, session, template_id, token, tmpl);
        if (r < 0)
                return e2b_reply(req, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                 "cannot issue the sandbox's access token: %s", strerror(-r));
        body = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:n}", "sandboxID", id, "templateID",
                         tmpl, "alias", tmpl, "clientID", E2B_CLIENT_ID, "envdVersion",
                         E2B_ENVD_VERSION, "envdAccessToken", token, "trafficAccessToken", token,
                         "domain");
        explicit_bzero(token, sizeof(token));
        return api_reply_json(req, status, body);
}

/* envVars {"NAME": "value"} as "NAME=value" strings. Returns 1, or 0 when a 400 was queued. */
static int env_of(struct api_request *req, json_t *vars, char ***ret_env)
{
        const char *name;
        json_t *value;
        size_t n = 0;
        char **env;
        int r;

        if (!vars || json_is_null(vars))
                return 1;
        if (!json_is_object(vars)) {
                r = e2b_reply(req, MHD_HTTP_BAD_REQUEST, "envVars must be an object");
                return r < 0 ? r : 0;
        }
        env = calloc(json_object_size(vars) + 1, sizeof(char *));
        if (!env)
                return -ENOMEM;
        json_object_foreach (vars, name, value) {
                if (!json_is_string(value) ||
                    asprintf(&env[n], "%s=%s", name, json_string_value(value)) < 0) {
                        env[n] = NULL;
                        for (size_t i = 0; i < n; i++)
                                free(env[i]);
                        free(env);
                        r = e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                                      "envVars: the value of '%.64s' must be a string", name);
                        return r < 0 ? r : 0;
                }
                n++;
        }
        *ret_env = env;
        return 1;
}

static void env_free(char **env)
{
        for (size_t i = 0; env && env[i]; i++)
                free(env[i]);
        free(env);
}

/* E2B's timeout (seconds; NULL or null: none) as the session's lifetime: E2B ends a sandbox
 * that long from now whatever its activity; airlock stops it (its state saved, as pause does)
 * and, so that it does not stop earlier for being idle, makes its idle stop as long. Returns
 * 1, or 0 when a 400 was queued. */
static int timeout_of(struct api_request *req, const json_t *v, uint64_t *ret_s)
{
        int r;

        if (!v || json_is_null(v))
                return 1;
        if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
            json_integer_value(v) > E2B_TIMEOUT_MAX_S) {
                r = e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                              "timeout must be a number of seconds, 1 to %u (24 hours)",
                              E2B_TIMEOUT_MAX_S);
                return r < 0 ? r : 0;
        }
        *ret_s = (uint64_t) json_integer_value(v);
        return 1;
}

int api_handle_e2b_create(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        json_t *root = NULL, *tmpl_v, *metadata;
        const char *tmpl = "base";
        struct session *s = NULL;
        char **env = NULL;
        uint64_t lifetime_s = 0;
        char session[SESSION_ID_MAX + 1];
        int r;

        r = check_api_key(req);
        if (r <= 0)
                return r;
        root = json_loadb(req->body ? req->body : "{}", req->body ? req->body_len : 2, 0, NULL);
        if (!json_is_object(root)) {
                json_decref(root);
                return e2b_reply(req, MHD_HTTP_BAD_REQUEST, "the body must be a JSON object");
        }
        tmpl_v = json_object_get(root, "templateID");
        if (tmpl_v && !json_is_string(tmpl_v)) {
                json_decref(root);
                return e2b_reply(req, MHD_HTTP_BAD_REQUEST, "templateID must be a string");
        }
        if (tmpl_v)
                tmpl = json_string_value(tmpl_v);
        r = timeout_of(req, json_object_get(root, "timeout"), &lifetime_s);
        if (r <= 0) {
                json_decref(root);
                return r;
        }
        metadata = json_object_get(root, "metadata");
        if (json_is_null(metadata))
                metadata = NULL;
        r = env_of(req, json_object_get(root, "envVars"), &env);
        if (r <= 0) {
                json_decref(root);
                return r;
        }
        r = session_create(req->srv->mgr,
                           &(struct session_create_options){ .profile = e2b_template_profile(tmpl),
                                                             .stop_after_ms = lifetime_s * 1000u,
                                                             .lifetime_s = lifetime_s,
                                                             .metadata = metadata,
                                                             .env = env,
                                                             .home = "/home/user" },
                           &s, &err);
        env_free(env);
        if (r == -ENOENT) {
                r = e2b_reply(req, MHD_HTTP_NOT_FOUND,
                              "template '%.64s' not found: airlock's templates are its profiles "
                              "(GET /v1/profiles), and 'base' and 'code-interpreter-v1' are the "
                              "default one",
                              tmpl);
                json_decref(root);
                return r;
        }
        if (r < 0) {
                r = e2b_reply(req, session_error_status(r), "cannot create the sandbox: %s",
                              err.msg[0] ? err.msg : strerror(-r));
                json_decref(root);
                return r;
        }
        (void) snprintf(session, sizeof(session), "%s", session_id(s));
        session_unref(s);
        r = reply_sandbox_created(req, MHD_HTTP_CREATED, session, tmpl);
        json_decref(root);
        return r;
}

int api_handle_e2b_get(struct api_request *req)
{
        char session[SESSION_ID_MAX + 1];
        json_t *desc, *obj;
        int r;

        r = route_session(req, session);
        if (r <= 0)
                return r;
        desc = session_describe_id(req->srv->mgr, session);
        if (!desc)
                return reply_no_sandbox(req);
        obj = sandbox_json(req, desc);
        json_decref(desc);
        return obj ? api_reply_json(req, MHD_HTTP_OK, obj) : -ENOMEM;
}

/* The query of a listing: state (repeated, or comma-separated: "running", "paused") and
 * metadata, which the SDK sends as one argument holding "k=v&k2=v2", keys and values
 * percent-encoded twice (encodeURIComponent, then URLSearchParams), as E2B's API decodes it. */
struct list_query {
        bool running, paused, any_state;
        json_t *metadata; /* the filter, NULL = none */
        const char *bad;  /* why the query is refused (static) */
        struct body_error berr;
};

/* Decodes src (len bytes) twice into dst. Returns 0 or -EINVAL. */
static int decode_twice(const char *src, size_t len, char *dst, size_t size)
{
        char once[2048];

        if (percent_decode(src, len, true, once, sizeof(once)) < 0)
                return -EINVAL;
        return percent_decode(once, strlen(once), true, dst, size);
}

static int list_metadata(struct list_query *q, const char *raw)
{
        char text[4096], k[256], v[2048];
        const char *p = text;

        if (percent_decode(raw, strlen(raw), true, text, sizeof(text)) < 0)
                return -EINVAL;
        while (*p) {
                size_t n = strcspn(p, "&");
                const char *eq = memchr(p, '=', n);

                if (n > 0 && (!eq || decode_twice(p, (size_t) (eq - p), k, sizeof(k)) < 0 ||
                              decode_twice(eq + 1, n - (size_t) (eq - p) - 1, v, sizeof(v)) < 0 ||
                              body_metadata_filter_add(&q->metadata, k, v, &q->berr) < 0))
                        return -EINVAL;
                p += n + (p[n] == '&');
        }
        return 0;
}

static enum MHD_Result scan_list_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
        struct list_query *q = cls;
        char st[64];

        (void) kind;
        if (!key || !value)
                return MHD_YES;
        if (strcmp(key, "metadata") == 0 && list_metadata(q, value) < 0) {
                q->bad = q->berr.msg[0] ? q->berr.msg
                                        : "metadata: a malformed filter (the SDK's "
                                          "query.metadata: an object of strings)";
                return MHD_NO;
        }
        if (strcmp(key, "state") == 0) {
                if (percent_decode(value, strlen(value), true, st, sizeof(st)) < 0) {
                        q->bad = "state: a malformed escape";
                        return MHD_NO;
                }
                q->any_state = true;
                q->running |= strstr(st, "running") != NULL;
                q->paused |= strstr(st, "paused") != NULL;
        }
        return MHD_YES;
}

int api_handle_e2b_list(struct api_request *req)
{
        struct list_query q = { 0 };
        json_t *all, *out, *desc;
        size_t i;
        int r;

        r = check_api_key(req);
        if (r <= 0)
                return r;
        (void) MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, scan_list_arg, &q);
        if (q.bad) {
                json_decref(q.metadata);
                return e2b_reply(req, MHD_HTTP_BAD_REQUEST, "%s", q.bad);
        }
        all = session_list_filtered(req->srv->mgr, NULL, q.metadata);
        json_decref(q.metadata);
        out = json_array();
        if (!all || !out) {
                json_decref(all);
                json_decref(out);
                return -ENOMEM;
        }
        json_array_foreach (all, i, desc) {
                json_t *obj = sandbox_json(req, desc);
                const char *st = json_string_value(json_object_get(obj, "state"));
                bool paused = st && strcmp(st, "paused") == 0;

                /* state=running&state=paused (the SDK's query.state), or none: both. */
                if (obj && (!q.any_state || (paused ? q.paused : q.running)))
                        (void) json_array_append(out, obj);
                json_decref(obj);
        }
        json_decref(all);
        return api_reply_cluster_list(req, out, CLUSTER_LIST_E2B);
}

int api_handle_e2b_kill(struct api_request *req)
{
        char session[SESSION_ID_MAX + 1];
        int r;

        r = route_session(req, session);
        if (r <= 0)
                return r;
        r = session_destroy(req->srv->mgr, session);
        if (r == -ENOENT)
                return reply_no_sandbox(req);
        if (r < 0)
                return e2b_reply(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot kill: %s",
                                 strerror(-r));
        e2b_forget(req->srv->e2b, session);
        return api_reply_json(req, MHD_HTTP_NO_CONTENT, NULL);
}

static int set_lifetime(struct api_request *req, const char *session, uint64_t lifetime_s,
                        struct airlock_error *err)
{
        return session_update(req->srv->mgr, session,
                              &(struct session_patch){ .has_lifetime = true,
                                                       .lifetime_s = lifetime_s,
                                                       .has_stop_after = true,
                                                       .stop_after_ms = lifetime_s * 1000u },
                              NULL, err);
}

/* setTimeout: the sandbox's lifetime (and idle stop) from now, as at create. A paused one is
 * changed without resuming it. */
int api_handle_e2b_timeout(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        uint64_t lifetime_s = 0;
        char session[SESSION_ID_MAX + 1];
        json_t *root;
        int r;

        r = route_session(req, session);
        if (r <= 0)
                return r;
        root = json_loadb(req->body ? req->body : "", req->body_len, 0, NULL);
        if (!json_is_object(root) || !json_object_get(root, "timeout")) {
                json_decref(root);
                return e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                                 "the body must be {\"timeout\": <seconds>}");
        }
        r = timeout_of(req, json_object_get(root, "timeout"), &lifetime_s);
        json_decref(root);
        if (r <= 0)
                return r;
        r = set_lifetime(req, session, lifetime_s, &err);
        if (r == -ENOENT)
                return reply_no_sandbox(req);
        if (r < 0)
                return e2b_reply(
                        req, r == -EINVAL ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_INTERNAL_SERVER_ERROR,
                        "cannot set the timeout: %s", err.msg[0] ? err.msg : strerror(-r));
        return api_reply_json(req, MHD_HTTP_NO_CONTENT, NULL);
}

int api_handle_e2b_pause(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        const char *state;
        char session[SESSION_ID_MAX + 1];
        json_t *desc;
        int r;

        r = route_session(req, session);
        if (r <= 0)
                return r;
        desc = session_describe_id(req->srv->mgr, session);
        if (!desc)
                return reply_no_sandbox(req);
        state = json_string_value(json_object_get(desc, "state"));
        if (state && strcmp(state, "stopped") == 0) {
                json_decref(desc);
                return e2b_reply(req, MHD_HTTP_CONFLICT, "sandbox '%s' is already paused",
                                 req->params.id);
        }
        json_decref(desc);
        r = session_stop(req->srv->mgr, session, NULL, &err);
        if (r == -ENOENT)
                return reply_no_sandbox(req);
        if (r < 0)
                return e2b_reply(req,
                                 r == -EBUSY        ? MHD_HTTP_CONFLICT
                                 : r == -EOPNOTSUPP ? MHD_HTTP_NOT_IMPLEMENTED
                                                    : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                 "cannot pause: %s",
                                 r == -EOPNOTSUPP ? "the daemon has no state directory"
                                 : err.msg[0]     ? err.msg
                                                  : strerror(-r));
        return api_reply_json(req, MHD_HTTP_NO_CONTENT, NULL);
}

int api_handle_e2b_connect(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        char session[SESSION_ID_MAX + 1];
        json_t *desc = NULL, *root;
        uint64_t lifetime_s = 0;
        bool resumed;
        int r;

        r = route_session(req, session);
        if (r <= 0)
                return r;
        /* connect's timeout (the SDK's timeoutMs) sets the lifetime from now, as setTimeout. */
        root = json_loadb(req->body ? req->body : "{}", req->body ? req->body_len : 2, 0, NULL);
        r = timeout_of(req, json_object_get(root, "timeout"), &lifetime_s);
        json_decref(root);
        if (r <= 0)
                return r;
        r = session_resume(req->srv->mgr, session, &desc, &err);
        resumed = r >= 0 && json_is_true(json_object_get(desc, "resumed"));
        json_decref(desc);
        if (r >= 0 && lifetime_s)
                r = set_lifetime(req, session, lifetime_s, &err);
        if (r == -ENOENT)
                return reply_no_sandbox(req);
        if (r < 0)
                return e2b_reply(req, session_error_status(r), "cannot resume: %s",
                                 err.msg[0] ? err.msg : strerror(-r));
        /* E2B: 201 when a paused sandbox was resumed, 200 when it ran already. */
        return reply_sandbox_created(req, resumed ? MHD_HTTP_CREATED : MHD_HTTP_OK, session, NULL);
}

int api_handle_e2b_api_other(struct api_request *req)
{
        int r = check_api_key(req);

        if (r <= 0)
                return r;
        return e2b_reply(req, MHD_HTTP_NOT_IMPLEMENTED,
                         "airlock does not offer %s %.200s of E2B's API (docs/E2B.md lists what "
                         "it offers)",
                         req->method, req->raw_path);
}

/* ---- the sandbox routes ---- */

/* The sandbox a sandbox route is for (E2b-Sandbox-Id) and its access token. Returns 1 with
 * session set and a reference in *ret_s (when ret_s is not NULL: resumed if stopped), or 0
 * when an error reply was queued: 401 for a wrong or missing token, 404 for no such sandbox
 * (502 with health, which the SDK reads as "not running"). */
static int sandbox_auth(struct api_request *req, char session[SESSION_ID_MAX + 1],
                        struct session **ret_s, bool health)
{
        const char *id = api_header(req, "E2b-Sandbox-Id");
        const char *token = api_header(req, "X-Access-Token");
        struct airlock_error err = { { 0 } };
        json_t *desc;
        int r;

        if (!token)
                token = api_header(req, "E2B-Traffic-Access-Token");
        if (!req->srv->e2b) {
                r = e2b_reply(req, MHD_HTTP_NOT_FOUND, "the E2B surface is off");
                return r < 0 ? r : 0;
        }
        if (!id || e2b_session_id(id, session) < 0) {
                r = e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                              "the E2b-Sandbox-Id header must name a sandbox");
                return r < 0 ? r : 0;
        }
        r = e2b_token_check(req->srv->e2b, session, token);
        if (r == -ENOENT) {
                desc = session_describe_id(req->srv->mgr, session);
                json_decref(desc);
                if (desc)
                        r = e2b_reply(req, MHD_HTTP_UNAUTHORIZED,
                                      "sandbox '%.64s' has no access token yet: connect to it "
                                      "(Sandbox.connect) first",
                                      id);
                else
                        r = e2b_reply(req, health ? MHD_HTTP_BAD_GATEWAY : MHD_HTTP_NOT_FOUND,
                                      "sandbox '%.64s' not found", id);
                return r < 0 ? r : 0;
        }
        if (r < 0) {
                r = e2b_reply(req, MHD_HTTP_UNAUTHORIZED,
                              "missing or invalid access token for sandbox '%.64s' "
                              "(X-Access-Token)",
                              id);
                return r < 0 ? r : 0;
        }
        if (!ret_s)
                return 1;
        r = session_lookup(req->srv->mgr, session, ret_s, &err);
        if (r == -ENOENT) {
                r = e2b_reply(req, health ? MHD_HTTP_BAD_GATEWAY : MHD_HTTP_NOT_FOUND,
                              "sandbox '%.64s' is not running any more", id);
                return r < 0 ? r : 0;
        }
        if (r < 0) {
                r = e2b_reply(req, MHD_HTTP_SERVICE_UNAVAILABLE, "cannot reach sandbox: %s",
                              err.msg[0] ? err.msg : strerror(-r));
                return r < 0 ? r : 0;
        }
        return 1;
}

int api_handle_e2b_health(struct api_request *req)
{
        struct session *s = NULL;
        char session[SESSION_ID_MAX + 1];
        int r;

        r = sandbox_auth(req, session, &s, true);
        if (r <= 0)
                return r;
        session_unref(s);
        return api_reply_json(req, MHD_HTTP_NO_CONTENT, NULL);
}

/* A decoded query argument, or NULL when absent; *ret_bad on a malformed escape. */
static const char *query(struct api_request *req, const char *name, char *buf, size_t size,
                         bool *ret_bad)
{
        const char *raw = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);

        if (!raw)
                return NULL;
        if (percent_decode(raw, strlen(raw), true, buf, size) < 0) {
                *ret_bad = true;
                return NULL;
        }
        return buf;
}

/* The path argument of /files as a path below /work. Returns 1, or 0 when a 400 was queued. */
static int files_path(struct api_request *req, const char *path, char *ret, size_t size)
{
        const char *why = NULL;
        int r;

        r = e2b_work_path(path, ret, size, &why);
        if (r < 0) {
                r = e2b_reply(req, MHD_HTTP_BAD_REQUEST, "path '%.200s': %s", path,
                              why ? why : "too long");
                return r < 0 ? r : 0;
        }
        return 1;
}

static int reply_file_errno(struct api_request *req, int r, const char *path,
                            const struct airlock_error *err)
{
        unsigned status = r == -ENOENT                   ? MHD_HTTP_NOT_FOUND
                          : r == -EFBIG || r == -E2BIG   ? MHD_HTTP_CONTENT_TOO_LARGE
                          : r == -ENOSPC || r == -EDQUOT ? MHD_HTTP_INSUFFICIENT_STORAGE
                          : r == -EBUSY                  ? MHD_HTTP_CONFLICT
                          : r == -EINVAL || r == -EISDIR || r == -ENOTDIR || r == -ELOOP
                                  ? MHD_HTTP_BAD_REQUEST
                                  : MHD_HTTP_INTERNAL_SERVER_ERROR;

        return e2b_reply(req, status, "%.200s: %s", path,
                         err && err->msg[0] ? err->msg : strerror(-r));
}

int api_handle_e2b_file_get(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        char pbuf[ROUTE_PATH_MAX + 1], rel[ROUTE_PATH_MAX + 1], session[SESSION_ID_MAX + 1];
        struct session *s = NULL;
        const char *path;
        bool bad = false;
        uint64_t size;
        int fd, r;

        r = sandbox_auth(req, session, &s, false);
        if (r <= 0)
                return r;
        path = query(req, "path", pbuf, sizeof(pbuf), &bad);
        r = files_path(req, bad || !path ? "" : path, rel, sizeof(rel));
        if (r <= 0 || bad || !path || !rel[0]) {
                session_unref(s);
                if (r <= 0)
                        return r;
                return e2b_reply(req, MHD_HTTP_BAD_REQUEST, "path must name a file");
        }
        r = session_file_open(s, rel, UINT64_MAX, &fd, &size, &err);
        session_unref(s);
        if (r < 0)
                return reply_file_errno(req, r, path, &err);
        return api_reply_fd(req, MHD_HTTP_OK, fd, size, "application/octet-stream");
}

/* One part of a multipart/form-data body. */
struct part {
        const char *filename; /* NUL-terminated copy, or NULL */
        const char *data;
        size_t len;
};

/* The boundary parameter of a Content-Type, into out. Returns 0 or -EINVAL. */
static int multipart_boundary(const char *ctype, char *out, size_t size)
{
        const char *b = ctype ? strcasestr(ctype, "boundary=") : NULL;
        size_t n;

        if (!b)
                return -EINVAL;
        b += strlen("boundary=");
        if (*b == '"')
                b++;
        n = strcspn(b, "\";");
        if (n == 0 || n + 3 > size)
                return -EINVAL;
        (void) snprintf(out, size, "--%.*s", (int) n, b);
        return 0;
}

/* Splits body at the boundary into up to max parts, each part's filename copied into names
 * (max rows of 256 bytes). Returns the number of parts or -EINVAL. */
static int multipart_split(const char *body, size_t len, const char *boundary, struct part *parts,
                           size_t max, char (*names)[ROUTE_PATH_MAX + 1])
{
        size_t blen = strlen(boundary), n = 0;
        const char *p = memmem(body, len, boundary, blen), *end = body + len;

        while (p) {
                const char *head = p + blen, *data, *next, *fn, *hend;

                if (head + 2 <= end && head[0] == '-' && head[1] == '-')
                        break; /* the closing boundary */
                if (head + 2 > end || head[0] != '\r' || head[1] != '\n')
                        return -EINVAL;
                head += 2;
                hend = memmem(head, (size_t) (end - head), "\r\n\r\n", 4);
                if (!hend)
                        return -EINVAL;
                data = hend + 4;
                next = memmem(data, (size_t) (end - data), boundary, blen);
                if (!next || next - data < 2)
                        return -EINVAL;
                if (n >= max)
                        return -E2BIG;
                parts[n].data = data;
                parts[n].len = (size_t) (next - data) - 2; /* the CRLF before the boundary */
                parts[n].filename = NULL;
                fn = memmem(head, (size_t) (hend - head), "filename=\"", 10);
                if (fn) {
                        const char *q;
                        fn += 10;
                        q = memchr(fn, '"', (size_t) (hend - fn));
                        if (!q || (size_t) (q - fn) > ROUTE_PATH_MAX)
                                return -EINVAL;
                        memcpy(names[n], fn, (size_t) (q - fn));
                        names[n][q - fn] = '\0';
                        parts[n].filename = names[n];
                }
                n++;
                p = next;
        }
        return (int) n;
}

#define FILES_PER_UPLOAD 64

int api_handle_e2b_file_post(struct api_request *req)
{
        const char *ctype = api_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
        struct airlock_error err = { { 0 } };
        char pbuf[ROUTE_PATH_MAX + 1], rel[ROUTE_PATH_MAX + 1], session[SESSION_ID_MAX + 1],
                boundary[256];
        _cleanup_free_ char(*names)[ROUTE_PATH_MAX + 1] = NULL;
        struct part parts[FILES_PER_UPLOAD];
        struct session *s = NULL;
        const char *path;
        json_t *out = NULL;
        bool bad = false;
        int r, n;

        r = sandbox_auth(req, session, &s, false);
        if (r <= 0)
                return r;
        path = query(req, "path", pbuf, sizeof(pbuf), &bad);
        if (bad) {
                session_unref(s);
                return e2b_reply(req, MHD_HTTP_BAD_REQUEST, "path: a malformed escape");
        }
        if (ctype && strncasecmp(ctype, "multipart/form-data", 19) == 0) {
                names = calloc(FILES_PER_UPLOAD, sizeof(*names));
                if (!names) {
                        session_unref(s);
                        return -ENOMEM;
                }
                n = multipart_boundary(ctype, boundary, sizeof(boundary));
                if (n >= 0)
                        n = multipart_split(req->body ? req->body : "", req->body_len, boundary,
                                            parts, FILES_PER_UPLOAD, names);
                if (n <= 0) {
                        session_unref(s);
                        return e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                                         n == -E2BIG ? "at most 64 files in one upload"
                                                     : "a malformed multipart/form-data body");
                }
        } else {
                parts[0] = (struct part){ NULL, req->body ? req->body : "", req->body_len };
                n = 1;
        }

        out = json_array();
        for (int i = 0; out && i < n; i++) {
                const char *target = path ? path : parts[i].filename;

                if (!target) {
                        r = e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                                      "a file needs a path (the path argument or its filename)");
                        goto done;
                }
                r = files_path(req, target, rel, sizeof(rel));
                if (r <= 0)
                        goto done;
                if (!rel[0]) {
                        r = e2b_reply(req, MHD_HTTP_BAD_REQUEST, "path must name a file");
                        goto done;
                }
                r = session_file_write(s, rel, parts[i].data, parts[i].len, &err);
                if (r < 0) {
                        r = reply_file_errno(req, r, target, &err);
                        goto done;
                }
                (void) json_array_append_new(
                        out, json_pack("{s:s, s:s, s:s+}", "name",
                                       strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel, "type",
                                       "file", "path", "/home/user/", rel));
        }
        session_unref(s);
        return out ? api_reply_json(req, MHD_HTTP_OK, out) : -ENOMEM;
done:
        json_decref(out);
        session_unref(s);
        return r;
}

/* Runs a cell in the session and hands back its execution object. Returns 0, or -errno with
 * err set (-EBUSY while another one runs). */
static int run_cell(struct session *s, const char *language, const char *code, json_t **ret,
                    struct airlock_error *err)
{
        return session_execute(s, &(struct exec_request){ .language = language, .code = code }, ret,
                               err);
}

static int reply_buf(struct api_request *req, unsigned status, struct buf *b,
                     const char *content_type)
{
        struct MHD_Response *resp;

        resp = MHD_create_response_from_buffer(b->len, b->data ? b->data : (char *) "",
                                               b->data ? MHD_RESPMEM_MUST_FREE
                                                       : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                buf_done(b);
                return -ENOMEM;
        }
        b->data = NULL; /* the response owns it now */
        b->len = b->size = 0;
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        return api_reply_response(req, status, resp);
}

/* What a streamed cell keeps of its request: the body (which owns the code and the env) and
 * the cwd. */
struct cell_data {
        json_t *root;
        char cwd[ROUTE_PATH_MAX + 8];
        struct buf partial[2]; /* the code interpreter's unfinished lines */
        bool started;          /* the process service's start event went out */
        json_int_t pid;        /* the number it gives the command */
        char context[40];      /* a created python context's id, or "" */
};

static void cell_data_free(void *data)
{
        struct cell_data *d = data;

        if (!d)
                return;
        json_decref(d->root);
        buf_done(&d->partial[0]);
        buf_done(&d->partial[1]);
        free(d);
}

/* A cwd as the SDK names it, for a cell: below /home/user (or /work, or relative) it is that
 * place in /home/user, the workspace's mount that E2B's code expects to find itself in;
 * another absolute path is taken as it is (the cell refuses one that is not a directory in
 * the sandbox). Returns 0, or -EINVAL with *ret_why (static). */
static int cell_cwd(const char *cwd, char *ret, size_t size, const char **ret_why)
{
        char rel[ROUTE_PATH_MAX + 1];

        if (e2b_work_path(cwd, rel, sizeof(rel), ret_why) >= 0) {
                if ((size_t) snprintf(ret, size, "/home/user%s%s", rel[0] ? "/" : "", rel) >= size)
                        return -EINVAL;
                return 0;
        }
        if (cwd[0] != '/' || strlen(cwd) >= size)
                return -EINVAL;
        (void) snprintf(ret, size, "%s", cwd);
        return 0;
}

/* The code interpreter's answer as its events (ndjson): stdout and stderr as the cell prints
 * them, a line at a time as a Jupyter kernel sends them (print() writes "x" and "\n"
 * apart, and the SDK's logs hold one entry per event), then its results, error, count and
 * end. A partial line waits for its newline, the end of the cell, or E2B_LINE_MAX bytes. */
#define E2B_LINE_MAX 65536u

static void interp_flush_locked(struct exec_stream *st, int stream)
{
        struct cell_data *d = exec_stream_data(st);
        struct buf *b = &d->partial[stream == 1 ? 0 : 1];

        if (!b->len)
                return;
        exec_stream_push_line_locked(st, json_pack("{s:s, s:s%}", "type",
                                                   stream == 1 ? "stdout" : "stderr", "text",
                                                   b->data, b->len));
        b->len = 0;
}

static void interp_output(struct exec_stream *st, int stream, const char *text)
{
        struct cell_data *d = exec_stream_data(st);
        struct buf *b = &d->partial[stream == 1 ? 0 : 1];
        const char *nl = strrchr(text, '\n');
        size_t n = strlen(text);

        if (nl) {
                (void) buf_append(b, text, (size_t) (nl - text) + 1, SIZE_MAX);
                interp_flush_locked(st, stream);
                text = nl + 1;
                n = strlen(text);
        }
        if (n && buf_append(b, text, n, SIZE_MAX) < 0)
                return;
        if (b->len >= E2B_LINE_MAX)
                interp_flush_locked(st, stream);
}

static void interp_end(struct exec_stream *st, int r, json_t *result,
                       const struct airlock_error *err)
{
        json_t *events, *ev;
        size_t i;

        interp_flush_locked(st, 1);
        interp_flush_locked(st, 2);
        if (exec_stream_session_gone_locked(st)) {
                /* Killed (or timed out) while the cell ran: E2B's sandbox would be gone, and
                 * the connection with it. The SDK's runCode rejects on a cut connection, asks
                 * isRunning() (false now) and throws its "sandbox was killed" error. */
                exec_stream_cut_locked(st);
                return;
        }
        if (r < 0) {
                /* Past the start the status is sent: the failure is the execution's error. */
                exec_stream_push_line_locked(st, json_pack("{s:s, s:s, s:s, s:s}", "type", "error",
                                                           "name", "AirlockError", "value",
                                                           err->msg[0] ? err->msg : strerror(-r),
                                                           "traceback", ""));
                exec_stream_push_line_locked(st, json_pack("{s:s}", "type", "end_of_execution"));
                return;
        }
        events = e2b_execution_events(result, exec_stream_outputs_shown(st));
        json_array_foreach (events, i, ev)
                exec_stream_push_line_locked(st, json_incref(ev));
        json_decref(events);
}

/* Why a cell could not run. Borrowed from err or static. */
static const char *cell_failure_text(int r, const struct airlock_error *err)
{
        if (r == -EBUSY)
                return "the sandbox is running another execution (airlock runs one at a time "
                       "per sandbox)";
        return err->msg[0] ? err->msg : strerror(-r);
}

static int interp_failure(struct api_request *req, int r, const struct airlock_error *err,
                          const char *session)
{
        (void) session;
        return e2b_reply(req,
                         r == -EBUSY    ? MHD_HTTP_CONFLICT
                         : r == -ENOENT ? MHD_HTTP_NOT_FOUND
                                        : (r == -EINVAL || r == -EOPNOTSUPP
                                                   ? MHD_HTTP_BAD_REQUEST
                                                   : MHD_HTTP_INTERNAL_SERVER_ERROR),
                         "%s", cell_failure_text(r, err));
}

/* A display as the cell makes it: a "result" event, which the SDK hands to onResult at once
 * (an update_display is a result of its own: E2B's events have no update). */
static void interp_display(struct exec_stream *st, const json_t *output)
{
        json_t *ev = e2b_result_event(json_object_get(output, "data"), false);

        interp_flush_locked(st, 1);
        interp_flush_locked(st, 2);
        if (ev)
                exec_stream_push_line_locked(st, ev);
}

static const struct exec_stream_format interp_format = {
        .content_type = "application/x-ndjson",
        .output = interp_output,
        .display = interp_display,
        .end = interp_end,
        .reply_failure = interp_failure,
};

/* Streams a cell of s with fmt. Takes over s and root (which owns code and env). */
static int cell_stream(struct api_request *req, const struct exec_stream_format *fmt,
                       struct session *s, json_t *root, const char *language, const char *code,
                       const json_t *env, const char *cwd, const char *context, json_int_t pid)
{
        struct cell_data *d = calloc(1, sizeof(*d));

        if (!d) {
                session_unref(s);
                json_decref(root);
                return -ENOMEM;
        }
        d->root = root;
        d->pid = pid;
        (void) snprintf(d->cwd, sizeof(d->cwd), "%s", cwd ? cwd : "");
        (void) snprintf(d->context, sizeof(d->context), "%s", context ? context : "");
        return exec_stream_start(req, &(struct exec_stream_spec){
                                              .format = fmt,
                                              .session = s,
                                              .req = { .language = language,
                                                       .code = code,
                                                       .env = env,
                                                       .cwd = d->cwd[0] ? d->cwd : NULL,
                                                       .context = d->context[0] ? d->context : NULL,
                                                       .context_create = true },
                                              .data = d,
                                              .data_free = cell_data_free });
}

/* The language of a runCode or a context: E2B's names, airlock's. Returns NULL when airlock
 * has none by that name. */
static const char *cell_language(const char *language)
{
        if (!language || strcmp(language, "python") == 0)
                return "python";
        if (strcmp(language, "bash") == 0)
                return "bash";
        if (strcmp(language, "javascript") == 0 || strcmp(language, "js") == 0)
                return "javascript";
        if (strcmp(language, "typescript") == 0 || strcmp(language, "ts") == 0)
                return "typescript";
        if (strcmp(language, "r") == 0)
                return "r";
        return NULL;
}

/* The default contexts: one per language, named after it. */
static const char *const default_contexts[] = { "python", "bash", "javascript", "typescript", "r" };

/* The language of a default context by its id (each language's is named after it), or NULL. */
static const char *default_context(const char *id)
{
        for (size_t i = 0; i < ELEMENTSOF(default_contexts); i++)
                if (strcmp(id, default_contexts[i]) == 0)
                        return default_contexts[i];
        return NULL;
}

/* A python context's interpreter op in the session's runner (runner.c, "Code contexts"). */
static int context_runner_op(struct api_request *req, const char *session, const char *op,
                             const char *id, struct airlock_error *err)
{
        struct session *s = NULL;
        int r;

        r = session_lookup(req->srv->mgr, session, &s, err);
        if (r < 0)
                return r;
        r = session_context(s, op, id, NULL, err);
        session_unref(s);
        return r;
}

int api_handle_e2b_execute(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        json_t *root = NULL, *env;
        const char *code, *language = NULL, *ctx_id, *why = NULL, *context = NULL;
        char session[SESSION_ID_MAX + 1], cwd[ROUTE_PATH_MAX + 8] = "";
        struct e2b_context ctx;
        struct session *s = NULL;
        int r;

        r = sandbox_auth(req, session, NULL, false);
        if (r <= 0)
                return r;
        root = json_loadb(req->body ? req->body : "", req->body_len, 0, NULL);
        code = json_string_value(json_object_get(root, "code"));
        if (!json_is_object(root) || !code) {
                json_decref(root);
                return e2b_reply(req, MHD_HTTP_BAD_REQUEST, "code must be a string");
        }
        env = json_object_get(root, "env_vars");
        if (env && !json_is_null(env) && !json_is_object(env)) {
                json_decref(root);
                return e2b_reply(req, MHD_HTTP_BAD_REQUEST, "env_vars must be an object");
        }
        ctx_id = json_string_value(json_object_get(root, "context_id"));
        language = json_string_value(json_object_get(root, "language"));
        if (ctx_id && default_context(ctx_id)) {
                language = default_context(ctx_id);
        } else if (ctx_id) {
                if (e2b_context_get(req->srv->e2b, session, ctx_id, &ctx) < 0) {
                        r = e2b_reply(req, MHD_HTTP_NOT_FOUND, "context '%.64s' not found", ctx_id);
                        json_decref(root); /* after the reply: ctx_id is in it */
                        return r;
                }
                language = ctx.language;
                if (cell_cwd(ctx.cwd, cwd, sizeof(cwd), &why) < 0)
                        cwd[0] = '\0';
                /* A python context is its own interpreter (docs/E2B.md, contexts). */
                if (strcmp(ctx.language, "python") == 0)
                        context = ctx.id;
        }
        if (!cell_language(language)) {
                r = e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                              "airlock does not offer the language '%.32s': python, bash, "
                              "javascript (js), typescript (ts) and r, where the sandbox's "
                              "profile allows them, are offered",
                              language);
                json_decref(root);
                return r;
        }
        r = session_lookup(req->srv->mgr, session, &s, &err);
        if (r < 0) {
                json_decref(root);
                return interp_failure(req, r, &err, session);
        }
        return cell_stream(req, &interp_format, s, root, cell_language(language), code,
                           json_is_object(env) ? env : NULL, cwd, context, 0);
}

/* Whether the profile of session allows language (python is always there). Returns 1, or 0
 * with the profile's languages in langs. */
static int profile_allows(struct api_request *req, const char *session, const char *language,
                          char *langs, size_t size)
{
        json_t *desc = session_describe_id(req->srv->mgr, session), *all, *p, *l;
        const char *profile = json_string_value(json_object_get(desc, "profile"));
        size_t i, j, n = 0;
        int allowed = 0;

        langs[0] = '\0';
        all = profile ? session_manager_profiles(req->srv->mgr) : NULL;
        json_array_foreach (all, i, p) {
                if (strcmp(json_string_value(json_object_get(p, "name")) ?: "", profile) != 0)
                        continue;
                json_array_foreach (json_object_get(p, "languages"), j, l) {
                        const char *name = json_string_value(l) ?: "";
                        allowed |= strcmp(name, language) == 0;
                        n += (size_t) snprintf(langs + n, n < size ? size - n : 0, "%s%s",
                                               j ? ", " : "", name);
                        if (n >= size)
                                n = size - 1;
                }
        }
        json_decref(all);
        json_decref(desc);
        return allowed;
}

int api_handle_e2b_context_create(struct api_request *req)
{
        const char *language, *cwd, *why = NULL;
        char session[SESSION_ID_MAX + 1], dir[ROUTE_PATH_MAX + 8], langs[128];
        struct e2b_context c;
        json_t *root = NULL;
        int r;

        r = sandbox_auth(req, session, NULL, false);
        if (r <= 0)
                return r;
        root = json_loadb(req->body ? req->body : "{}", req->body ? req->body_len : 2, 0, NULL);
        language = json_string_value(json_object_get(root, "language"));
        cwd = json_string_value(json_object_get(root, "cwd"));
        if (!cwd)
                cwd = "/home/user";
        if (!cell_language(language)) {
                r = e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                              "airlock does not offer contexts of the language '%.32s': python, "
                              "bash, javascript (js), typescript (ts) and r are offered",
                              language);
                json_decref(root);
                return r;
        }
        language = cell_language(language);
        if (!profile_allows(req, session, language, langs, sizeof(langs))) {
                r = e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                              "the sandbox's profile does not allow %s (its languages: %s)",
                              language, langs[0] ? langs : "unknown");
                json_decref(root);
                return r;
        }
        if (cell_cwd(cwd, dir, sizeof(dir), &why) < 0 || strlen(cwd) >= sizeof(c.cwd)) {
                r = e2b_reply(req, MHD_HTTP_BAD_REQUEST, "cwd '%.200s': %s", cwd,
                              why ? why : "an absolute path of at most 255 bytes is needed");
                json_decref(root);
                return r;
        }
        r = e2b_context_add(req->srv->e2b, session, language, cwd, &c);
        json_decref(root);
        if (r < 0)
                return e2b_reply(req,
                                 r == -EUSERS ? MHD_HTTP_CONFLICT : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                 "cannot create a context: %s",
                                 r == -EUSERS ? "at most 16 contexts per sandbox" : strerror(-r));
        if (strcmp(c.language, "python") == 0) {
                struct airlock_error err = { { 0 } };
                r = context_runner_op(req, session, "ctx_new", c.id, &err);
                if (r < 0) {
                        (void) e2b_context_remove(req->srv->e2b, session, c.id);
                        return e2b_reply(req,
                                         r == -EBUSY    ? MHD_HTTP_CONFLICT
                                         : r == -EUSERS ? MHD_HTTP_CONFLICT
                                         : r == -EINVAL ? MHD_HTTP_BAD_REQUEST
                                                        : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                         "cannot create a context: %s",
                                         err.msg[0] ? err.msg : strerror(-r));
                }
        }
        return api_reply_json(
                req, MHD_HTTP_OK,
                json_pack("{s:s, s:s, s:s}", "id", c.id, "language", c.language, "cwd", c.cwd));
}

int api_handle_e2b_context_list(struct api_request *req)
{
        char session[SESSION_ID_MAX + 1];
        json_t *list;
        int r;

        r = sandbox_auth(req, session, NULL, false);
        if (r <= 0)
                return r;
        list = e2b_context_list(req->srv->e2b, session);
        if (!list)
                return -ENOMEM;
        /* Each language's default context first, as E2B's server lists them. */
        for (size_t i = 0, at = 0; i < ELEMENTSOF(default_contexts); i++) {
                const char *name = default_contexts[i];
                char langs[128];
                if (i > 0 && !profile_allows(req, session, name, langs, sizeof(langs)))
                        continue;
                (void) json_array_insert_new(list, at++,
                                             json_pack("{s:s, s:s, s:s}", "id", name, "language",
                                                       name, "cwd", "/home/user"));
        }
        return api_reply_json(req, MHD_HTTP_OK, list);
}

int api_handle_e2b_context_delete(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        struct e2b_context c;
        char session[SESSION_ID_MAX + 1];
        int r;

        r = sandbox_auth(req, session, NULL, false);
        if (r <= 0)
                return r;
        if (default_context(req->params.id))
                return e2b_reply(req, MHD_HTTP_BAD_REQUEST,
                                 "the default %s context cannot be removed (restart it instead)",
                                 default_context(req->params.id));
        if (e2b_context_get(req->srv->e2b, session, req->params.id, &c) < 0)
                return e2b_reply(req, MHD_HTTP_NOT_FOUND, "context '%.64s' not found",
                                 req->params.id);
        if (strcmp(c.language, "python") == 0) {
                /* Its process ends first (none runs when the sandbox was resumed since): a
                 * context that stays (a cell runs: 409) stays listed. */
                r = context_runner_op(req, session, "ctx_del", c.id, &err);
                if (r < 0 && r != -ENOENT)
                        return e2b_reply(req,
                                         r == -EBUSY ? MHD_HTTP_CONFLICT
                                                     : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                         "cannot remove the context's interpreter: %s",
                                         err.msg[0] ? err.msg : strerror(-r));
        }
        if (e2b_context_remove(req->srv->e2b, session, c.id) < 0)
                return e2b_reply(req, MHD_HTTP_NOT_FOUND, "context '%.64s' not found", c.id);
        return api_reply_json(req, MHD_HTTP_NO_CONTENT, NULL);
}

int api_handle_e2b_context_restart(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        const char *language = default_context(req->params.id);
        struct e2b_context c;
        char session[SESSION_ID_MAX + 1];
        int r;

        r = sandbox_auth(req, session, NULL, false);
        if (r <= 0)
                return r;
        if (!language) {
                if (e2b_context_get(req->srv->e2b, session, req->params.id, &c) < 0)
                        return e2b_reply(req, MHD_HTTP_NOT_FOUND, "context '%.64s' not found",
                                         req->params.id);
                language = c.language;
        }
        if (strcmp(language, "python") != 0)
                return e2b_reply(req, MHD_HTTP_NOT_IMPLEMENTED,
                                 "airlock does not restart %s contexts: they share the "
                                 "session's one %s",
                                 language,
                                 strcmp(language, "bash") == 0 ? "shell"
                                 : strcmp(language, "r") == 0  ? "R session"
                                                               : "Node REPL");
        /* The default one: a new __main__ in the session's interpreter; a created one: a new
         * process (made anew when the sandbox was resumed since, and had none). */
        r = context_runner_op(req, session, "ctx_restart",
                              default_context(req->params.id) ? NULL : c.id, &err);
        if (r == -ENOENT && !default_context(req->params.id))
                r = context_runner_op(req, session, "ctx_new", c.id, &err);
        if (r < 0)
                return e2b_reply(
                        req, r == -EBUSY ? MHD_HTTP_CONFLICT : MHD_HTTP_INTERNAL_SERVER_ERROR,
                        "cannot restart the context: %s", err.msg[0] ? err.msg : strerror(-r));
        return api_reply_json(req, MHD_HTTP_NO_CONTENT, NULL);
}

/* ---- Connect-RPC: filesystem.Filesystem and process.Process ---- */

static bool is_connect_stream(struct api_request *req)
{
        const char *ctype = api_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);

        return ctype && strncasecmp(ctype, "application/connect+", 20) == 0;
}

/* A Connect error: for a streaming call a 200 whose end-of-stream envelope carries it, for a
 * unary one the code's HTTP status with {"code", "message"}. */
static int connect_error(struct api_request *req, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int connect_error(struct api_request *req, const char *code, const char *fmt, ...)
{
        _cleanup_free_ char *clean = NULL, *text = NULL;
        struct buf out = { 0 };
        char msg[1024];
        char *env = NULL;
        size_t env_len = 0;
        va_list ap;
        json_t *err, *wrapped;
        int r;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        clean = utf8_sanitize(msg, strlen(msg));
        if (!clean)
                return -ENOMEM;
        err = json_pack("{s:s, s:s}", "code", code, "message", clean);
        if (!is_connect_stream(req))
                return api_reply_json(req, e2b_connect_http_status(code), err);
        wrapped = json_pack("{s:o}", "error", err);
        text = wrapped ? json_dumps(wrapped, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(wrapped);
        if (!text)
                return -ENOMEM;
        r = e2b_envelope_append(&env, &env_len, E2B_ENVELOPE_END_STREAM, text, strlen(text));
        if (r < 0)
                return r;
        out.data = env;
        out.len = env_len;
        out.size = env_len + 1;
        return reply_buf(req, MHD_HTTP_OK, &out, "application/connect+json");
}

/* The request message: the body of a unary call, the one envelope of a streaming one. */
static json_t *connect_message(struct api_request *req)
{
        const char *body = req->body ? req->body : "";
        const char *msg;
        unsigned flags;
        size_t n, used;

        if (!is_connect_stream(req))
                return json_loadb(body, req->body_len, 0, NULL);
        if (e2b_envelope_decode(body, req->body_len, &flags, &msg, &n, &used) < 0)
                return NULL;
        return json_loadb(msg, n, 0, NULL);
}

/* Sandbox auth for an RPC: its errors as Connect's. Returns 1 or 0 (a reply was queued). */
static int rpc_auth(struct api_request *req, char session[SESSION_ID_MAX + 1],
                    struct session **ret_s)
{
        const char *id = api_header(req, "E2b-Sandbox-Id");
        const char *token = api_header(req, "X-Access-Token");
        struct airlock_error err = { { 0 } };
        int r;

        if (!req->srv->e2b)
                r = connect_error(req, "not_found", "the E2B surface is off");
        else if (!id || e2b_session_id(id, session) < 0)
                r = connect_error(req, "invalid_argument",
                                  "the E2b-Sandbox-Id header must name a sandbox");
        else if ((r = e2b_token_check(req->srv->e2b, session, token)) == -EACCES)
                r = connect_error(req, "unauthenticated",
                                  "missing or invalid access token for sandbox '%.64s'", id);
        else if (r < 0)
                r = connect_error(req, "not_found", "sandbox '%.64s' not found", id);
        else if ((r = session_lookup(req->srv->mgr, session, ret_s, &err)) < 0)
                r = connect_error(req, r == -ENOENT ? "not_found" : "unavailable",
                                  "sandbox '%.64s': %s", id, err.msg[0] ? err.msg : strerror(-r));
        else
                return 1;
        return r < 0 ? r : 0;
}

static void buf_puts(struct buf *b, const char *s)
{
        (void) buf_append(b, s, strlen(s), E2B_CMD_MAX);
}

static char *shell_quote_append(struct buf *b, const char *s)
{
        (void) buf_append(b, "'", 1, E2B_CMD_MAX);
        for (const char *p = s; *p; p++) {
                if (*p == '\'')
                        (void) buf_append(b, "'\\''", 4, E2B_CMD_MAX);
                else
                        (void) buf_append(b, p, 1, E2B_CMD_MAX);
        }
        (void) buf_append(b, "' ", 2, E2B_CMD_MAX);
        return b->data;
}

/* The EntryInfo of a listing entry of airlock's files API, under the E2B path of dir. */
static json_t *entry_info(const json_t *entry, const char *dir)
{
        const char *name = json_string_value(json_object_get(entry, "name"));
        const char *type = json_string_value(json_object_get(entry, "type"));
        const char *mtime = json_string_value(json_object_get(entry, "modified_at"));
        bool is_dir = type && strcmp(type, "directory") == 0;
        char path[ROUTE_PATH_MAX + 32];

        (void) snprintf(path, sizeof(path), "/home/user%s%s/%s", dir[0] ? "/" : "", dir,
                        name ? name : "");
        return json_pack("{s:s, s:s, s:s, s:I, s:i, s:s, s:s, s:s, s:s?}", "name", name ? name : "",
                         "type",
                         is_dir                                 ? "FILE_TYPE_DIRECTORY"
                         : type && strcmp(type, "symlink") == 0 ? "FILE_TYPE_SYMLINK"
                                                                : "FILE_TYPE_FILE",
                         "path", path, "size",
                         (json_int_t) json_integer_value(json_object_get(entry, "size")), "mode",
                         is_dir ? 0755 : 0644, "permissions", is_dir ? "drwxr-xr-x" : "-rw-r--r--",
                         "owner", "user", "group", "user", "modifiedTime", mtime);
}

/* The entry of rel (below /work; "" is the home itself). Returns 0, -ENOENT or -errno. */
static int stat_entry(struct session *s, const char *rel, json_t **ret, struct airlock_error *err)
{
        char dir[ROUTE_PATH_MAX + 1];
        const char *slash = strrchr(rel, '/'), *name = slash ? slash + 1 : rel;
        json_t *listing = NULL, *entry;
        size_t i;
        int r;

        if (!rel[0]) {
                *ret = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:s}", "name", "user", "type",
                                 "FILE_TYPE_DIRECTORY", "path", "/home/user", "size", 0, "mode",
                                 0755, "permissions", "drwxr-xr-x", "owner", "user", "group",
                                 "user");
                return *ret ? 0 : -ENOMEM;
        }
        (void) snprintf(dir, sizeof(dir), "%.*s", slash ? (int) (slash - rel) : 0, rel);
        r = session_file_list(s, dir, &listing, err);
        if (r < 0)
                return r == -ENOTDIR ? -ENOENT : r;
        json_array_foreach (json_object_get(listing, "entries"), i, entry) {
                if (strcmp(json_string_value(json_object_get(entry, "name")) ?: "", name) == 0) {
                        *ret = entry_info(entry, dir);
                        json_decref(listing);
                        return *ret ? 0 : -ENOMEM;
                }
        }
        json_decref(listing);
        return -ENOENT;
}

/* Lists rel into entries, depth levels deep. */
static int list_into(struct session *s, const char *rel, unsigned depth, json_t *entries,
                     struct airlock_error *err)
{
        json_t *listing = NULL, *entry;
        size_t i;
        int r;

        r = session_file_list(s, rel, &listing, err);
        if (r < 0)
                return r;
        json_array_foreach (json_object_get(listing, "entries"), i, entry) {
                const char *type = json_string_value(json_object_get(entry, "type"));
                const char *name = json_string_value(json_object_get(entry, "name"));
                char sub[ROUTE_PATH_MAX + 1];

                if (json_array_size(entries) >= 10000)
                        break;
                (void) json_array_append_new(entries, entry_info(entry, rel));
                if (depth > 1 && type && name && strcmp(type, "directory") == 0 &&
                    (size_t) snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", name) <
                            sizeof(sub)) {
                        r = list_into(s, sub, depth - 1, entries, err);
                        if (r < 0)
                                break;
                }
        }
        json_decref(listing);
        return r < 0 ? r : 0;
}

/* Runs a bash command line for the filesystem service (mkdir, mv): the files API has no such
 * calls, and the sandbox's own tools do them beneath /work. Returns 0, or -errno with err set
 * (the command's stderr when it failed). */
static int fs_shell(struct session *s, const char *cmd, struct airlock_error *err)
{
        json_t *result = NULL;
        int r;

        r = run_cell(s, "bash", cmd, &result, err);
        if (r < 0)
                return r;
        if (json_integer_value(json_object_get(result, "exit_code")) != 0) {
                const char *e = json_string_value(json_object_get(result, "stderr"));
                r = airlock_error_set(err, -EINVAL, "%.500s", e && *e ? e : "the command failed");
        }
        json_decref(result);
        return r;
}

int api_handle_e2b_filesystem(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        char session[SESSION_ID_MAX + 1], rel[ROUTE_PATH_MAX + 1], rel2[ROUTE_PATH_MAX + 1];
        const char *method = req->params.id, *path, *why = NULL;
        json_t *msg = NULL, *entry = NULL, *entries;
        struct session *s = NULL;
        struct buf cmd = { 0 };
        int r;

        if (strcmp(method, "Stat") != 0 && strcmp(method, "ListDir") != 0 &&
            strcmp(method, "MakeDir") != 0 && strcmp(method, "Remove") != 0 &&
            strcmp(method, "Move") != 0)
                return connect_error(req, "unimplemented",
                                     "airlock does not offer filesystem.%.64s (watching "
                                     "directories is not offered)",
                                     method);
        r = rpc_auth(req, session, &s);
        if (r <= 0)
                return r;
        msg = connect_message(req);
        path = json_string_value(
                json_object_get(msg, strcmp(method, "Move") == 0 ? "source" : "path"));
        if (!json_is_object(msg) || !path) {
                r = connect_error(req, "invalid_argument", "the request needs a path");
                goto out;
        }
        if (e2b_work_path(path, rel, sizeof(rel), &why) < 0) {
                r = connect_error(req, "invalid_argument", "path '%.200s': %s", path,
                                  why ? why : "too long");
                goto out;
        }

        if (strcmp(method, "Stat") == 0) {
                r = stat_entry(s, rel, &entry, &err);
                if (r >= 0)
                        r = api_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "entry", entry));
        } else if (strcmp(method, "ListDir") == 0) {
                json_int_t depth = json_integer_value(json_object_get(msg, "depth"));
                entries = json_array();
                r = entries ? list_into(s, rel,
                                        depth < 1    ? 1
                                        : depth > 16 ? 16
                                                     : (unsigned) depth,
                                        entries, &err)
                            : -ENOMEM;
                if (r >= 0)
                        r = api_reply_json(req, MHD_HTTP_OK,
                                           json_pack("{s:O}", "entries", entries));
                json_decref(entries);
        } else if (strcmp(method, "Remove") == 0) {
                r = rel[0] ? session_file_delete(s, rel, 0, NULL, &err) : -EINVAL;
                if (r >= 0)
                        r = api_reply_json(req, MHD_HTTP_OK, json_object());
        } else if (strcmp(method, "MakeDir") == 0) {
                r = stat_entry(s, rel, &entry, &err);
                json_decref(entry);
                entry = NULL;
                if (r >= 0) {
                        r = connect_error(req, "already_exists", "'%.200s' already exists", path);
                        goto out;
                }
                buf_puts(&cmd, "mkdir -p -- /work/");
                shell_quote_append(&cmd, rel);
                r = cmd.data ? fs_shell(s, cmd.data, &err) : -ENOMEM;
                if (r >= 0)
                        r = stat_entry(s, rel, &entry, &err);
                if (r >= 0)
                        r = api_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "entry", entry));
        } else {
                const char *dst = json_string_value(json_object_get(msg, "destination"));
                if (!dst || e2b_work_path(dst, rel2, sizeof(rel2), &why) < 0 || !rel[0] ||
                    !rel2[0]) {
                        r = connect_error(req, "invalid_argument",
                                          "source and destination must be files below "
                                          "/home/user");
                        goto out;
                }
                buf_puts(&cmd, "mkdir -p -- \"$(dirname -- /work/");
                shell_quote_append(&cmd, rel2);
                buf_puts(&cmd, ")\" && mv -T -- /work/");
                shell_quote_append(&cmd, rel);
                buf_puts(&cmd, "/work/");
                shell_quote_append(&cmd, rel2);
                r = cmd.data ? fs_shell(s, cmd.data, &err) : -ENOMEM;
                if (r >= 0)
                        r = stat_entry(s, rel2, &entry, &err);
                if (r >= 0)
                        r = api_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "entry", entry));
        }
        if (r < 0 && !req->replied)
                r = connect_error(req, e2b_connect_code(r), "%.200s: %s", path,
                                  err.msg[0] ? err.msg : strerror(-r));
out:
        buf_done(&cmd);
        json_decref(msg);
        session_unref(s);
        return r;
}

/* One Connect envelope of msg (taken) into the stream. */
static void push_envelope_locked(struct exec_stream *st, unsigned flags, json_t *msg)
{
        _cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        _cleanup_free_ char *env = NULL;
        size_t env_len = 0;

        json_decref(msg);
        if (text && e2b_envelope_append(&env, &env_len, flags, text, strlen(text)) >= 0)
                exec_stream_push_locked(st, env, env_len);
}

/* The process service's stream: start, the output as data events while the command runs,
 * then end with its exit code (or Connect's error in the end-of-stream envelope). */
static void process_started_locked(struct exec_stream *st)
{
        struct cell_data *d = exec_stream_data(st);

        if (d->started)
                return;
        d->started = true;
        push_envelope_locked(st, 0, json_pack("{s:{s:{s:I}}}", "event", "start", "pid", d->pid));
}

static void process_output(struct exec_stream *st, int stream, const char *text)
{
        _cleanup_free_ char *b64 = e2b_base64_encode(text, strlen(text));

        process_started_locked(st);
        if (b64)
                push_envelope_locked(st, 0,
                                     json_pack("{s:{s:{s:s}}}", "event", "data",
                                               stream == 1 ? "stdout" : "stderr", b64));
}

static void process_end(struct exec_stream *st, int r, json_t *result,
                        const struct airlock_error *err)
{
        const char *status = json_string_value(json_object_get(result, "status"));
        json_int_t code = json_integer_value(json_object_get(result, "exit_code"));
        char st_text[64];

        if (r < 0) {
                push_envelope_locked(st, E2B_ENVELOPE_END_STREAM,
                                     json_pack("{s:{s:s, s:s}}", "error", "code",
                                               r == -EBUSY ? "unavailable" : e2b_connect_code(r),
                                               "message", cell_failure_text(r, err)));
                return;
        }
        process_started_locked(st);
        (void) snprintf(st_text, sizeof(st_text), "exit status %lld", (long long) code);
        push_envelope_locked(
                st, 0,
                json_pack("{s:{s:{s:I, s:b, s:s, s:s?}}}", "event", "end", "exitCode", code,
                          "exited", true, "status", st_text, "error",
                          status && strcmp(status, "ok") != 0 && strcmp(status, "error") != 0
                                  ? status
                                  : NULL));
        push_envelope_locked(st, E2B_ENVELOPE_END_STREAM, json_object());
}

static int process_failure(struct api_request *req, int r, const struct airlock_error *err,
                           const char *session)
{
        (void) session;
        return connect_error(req, r == -EBUSY ? "unavailable" : e2b_connect_code(r), "%s",
                             cell_failure_text(r, err));
}

static const struct exec_stream_format process_format = {
        .content_type = "application/connect+json",
        .output = process_output,
        .end = process_end,
        .reply_failure = process_failure,
};

/* Start: the command runs in the session's bash as E2B's envd runs it (the SDK sends
 * /bin/bash -l -c CMD), with this call's cwd and envs and stdin at EOF; its output streams
 * as it is produced. Takes over s. */
static int process_start(struct api_request *req, struct session *s, json_t *msg)
{
        json_t *proc = json_object_get(msg, "process"), *args, *envs, *v;
        const char *cmd = json_string_value(json_object_get(proc, "cmd"));
        const char *cwd = json_string_value(json_object_get(proc, "cwd")), *why = NULL;
        static atomic_uint next_pid = 1000;
        char dir[ROUTE_PATH_MAX + 8] = "";
        struct buf line = { 0 };
        json_t *root;
        size_t i;
        int r;

        if (json_object_get(msg, "pty"))
                r = connect_error(req, "unimplemented",
                                  "airlock does not offer PTYs (commands run without a "
                                  "terminal)");
        else if (json_is_true(json_object_get(msg, "stdin")))
                r = connect_error(req, "unimplemented", "airlock does not offer stdin to commands");
        else if (!cmd)
                r = connect_error(req, "invalid_argument", "process.cmd is required");
        else if (cwd && *cwd && cell_cwd(cwd, dir, sizeof(dir), &why) < 0)
                r = connect_error(req, "invalid_argument", "cwd '%.200s': %s", cwd,
                                  why ? why : "not an absolute path");
        else if ((envs = json_object_get(proc, "envs")) && !json_is_null(envs) &&
                 !json_is_object(envs))
                r = connect_error(req, "invalid_argument", "process.envs must be an object");
        else
                r = 1;
        if (r <= 0) {
                session_unref(s);
                return r;
        }

        shell_quote_append(&line, cmd);
        args = json_object_get(proc, "args");
        json_array_foreach (args, i, v)
                if (json_is_string(v))
                        shell_quote_append(&line, json_string_value(v));
        buf_puts(&line, "</dev/null");
        if (!line.data || line.len >= E2B_CMD_MAX - 16) {
                buf_done(&line);
                session_unref(s);
                return connect_error(req, "invalid_argument", "the command line is too long");
        }
        /* The stream's data: the line (as its code) and the envs, owned by one object. */
        root = json_pack("{s:s, s:O?}", "line", line.data, "envs",
                         json_is_object(envs) ? envs : NULL);
        buf_done(&line);
        if (!root) {
                session_unref(s);
                return -ENOMEM;
        }
        return cell_stream(req, &process_format, s, root, "bash",
                           json_string_value(json_object_get(root, "line")),
                           json_is_object(envs) ? json_object_get(root, "envs") : NULL, dir, NULL,
                           atomic_fetch_add(&next_pid, 1));
}

int api_handle_e2b_process(struct api_request *req)
{
        const char *method = req->params.id;
        struct session *s = NULL;
        char session[SESSION_ID_MAX + 1];
        json_t *msg;
        int r;

        if (strcmp(method, "Start") != 0 && strcmp(method, "List") != 0)
                return connect_error(req, "unimplemented",
                                     "airlock does not offer process.%.64s: commands run in the "
                                     "foreground, without stdin, a PTY or reconnecting",
                                     method);
        r = rpc_auth(req, session, &s);
        if (r <= 0)
                return r;
        if (strcmp(method, "List") == 0) {
                /* Nothing runs in the background: a foreground command has ended when its
                 * call answers. */
                session_unref(s);
                return api_reply_json(req, MHD_HTTP_OK, json_pack("{s:[]}", "processes"));
        }
        msg = connect_message(req);
        if (json_is_object(msg)) {
                r = process_start(req, s, msg);
        } else {
                session_unref(s);
                r = connect_error(req, "invalid_argument", "the request is not one JSON message");
        }
        json_decref(msg);
        return r;
}

int api_handle_e2b_sandbox_other(struct api_request *req)
{
        const char *p = req->raw_path + strlen("/e2b/sandbox");
        char session[SESSION_ID_MAX + 1];
        int r;

        r = sandbox_auth(req, session, NULL, false);
        if (r <= 0)
                return r;

        /* A Connect-RPC path ("/package.Service/Method") gets Connect's error shape. */
        if (p[0] == '/' && strchr(p + 1, '.') && strchr(p + 1, '/'))
                return connect_error(req, "unimplemented", "airlock does not offer %.200s", p + 1);
        return e2b_reply(req, MHD_HTTP_NOT_IMPLEMENTED,
                         "airlock does not offer %s %.200s of E2B's sandbox (docs/E2B.md lists "
                         "what it offers)",
                         req->method, p);
}
