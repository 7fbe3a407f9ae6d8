/* Code Mode's policy for one session (sandbox.h, struct exec_tools): which internal tools its
 * code may call (the session's code_tools, else its profile's), approval, and the conversion of
 * a tool's result into the Python data airlock_tools returns. The calls go to the manager's hub;
 * the channel and its caps are the sandbox driver's. */
#include "session-internal.h"
#include "session-table.h"

#include "audit/audit.h"
#include "base/cleanup.h"
#include "base/util.h"
#include "hub/hub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *const *effective_list(const struct session *s)
{
        return s->code_tools ? s->code_tools : s->profile->code_tools;
}

/* Whether pattern (a name, "SERVER/" followed by "*", or "*") covers the tool. */
static bool pattern_covers(const char *pattern, const char *name, const char *server)
{
        size_t n = strlen(pattern);

        if (strcmp(pattern, "*") == 0)
                return true;
        if (n > 2 && strcmp(pattern + n - 2, "/*") == 0)
                return strlen(server) == n - 2 && strncmp(pattern, server, n - 2) == 0;
        return strcmp(pattern, name) == 0;
}

static bool listed(char *const *list, const char *name, const char *server)
{
        for (; list && *list; list++)
                if (pattern_covers(*list, name, server))
                        return true;
        return false;
}

/* Whether code with these lists may call the tool described by t (an entry of hub_tools()). */
static bool allows(char *const *code_tools, char *const *approved, json_t *t)
{
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *server = json_string_value(json_object_get(t, "server"));
        const char *approval = json_string_value(json_object_get(t, "require_approval"));

        if (!name || !server || !listed(code_tools, name, server))
                return false;
        /* A tool that needs a person's yes is callable only when one was given for this
         * session, by name: approved_tools takes no patterns. */
        if (approval && strcmp(approval, "always") == 0) {
                for (char *const *a = approved; a && *a; a++)
                        if (strcmp(*a, name) == 0)
                                return true;
                return false;
        }
        return true;
}

static bool callable(const struct session *s, json_t *t)
{
        return allows(effective_list(s), s->approved_tools, t);
}

/* The tools of hub that code with these lists may call, as Code Mode lists them. */
static json_t *callable_list(struct hub *hub, char *const *code_tools, char *const *approved)
{
        _cleanup_(json_decrefp) json_t *all = hub_tools(hub);
        json_t *out = json_array(), *t;
        size_t i;

        if (!all || !out) {
                json_decref(out);
                return NULL;
        }
        json_array_foreach (all, i, t) {
                char py[HUB_NAME_MAX + 8];
                json_t *e;
                size_t j;
                json_t *prev;

                if (!allows(code_tools, approved, t))
                        continue;
                hub_python_name(json_string_value(json_object_get(t, "name")), py, sizeof(py));
                /* Two tools whose names become one identifier: the later one is prefixed with
                 * its server. */
                json_array_foreach (out, j, prev)
                        if (strcmp(json_string_value(json_object_get(prev, "python_name")), py) ==
                            0) {
                                char both[2 * HUB_NAME_MAX + 8];
                                (void) snprintf(both, sizeof(both), "%s_%s",
                                                json_string_value(json_object_get(t, "server")),
                                                json_string_value(json_object_get(t, "name")));
                                hub_python_name(both, py, sizeof(py));
                                break;
                        }
                e = json_pack("{s:O, s:s, s:O, s:O, s:O, s:b}", "name", json_object_get(t, "name"),
                              "python_name", py, "server", json_object_get(t, "server"),
                              "description", json_object_get(t, "description"), "inputSchema",
                              json_object_get(t, "inputSchema"), "available",
                              json_is_true(json_object_get(t, "available")));
                if (!e || json_array_append_new(out, e) < 0) {
                        json_decref(out);
                        return NULL;
                }
        }
        return out;
}

static json_t *codemode_list(void *userdata)
{
        struct session *s = userdata;

        return callable_list(s->mgr->cfg.hub, effective_list(s), s->approved_tools);
}

static json_t *reply_error(const char *kind, const char *msg)
{
        return json_pack("{s:s, s:s}", "error", msg, "kind", kind);
}

/* A tool's result as Python data: the structured content, else the text parsed as JSON, else
 * the text; a result of images only is a list of {"mime_type", "data"}. A cut result is its
 * text, with the note saying it was cut. */
static json_t *result_value(const struct hub_result *res)
{
        json_t *v;

        if (res->cut)
                return json_string(res->text);
        if (res->structured)
                return json_incref(res->structured);
        if (!res->text[0] && json_array_size(res->images) > 0)
                return json_incref(res->images);
        v = json_loads(res->text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
        return v ? v : json_string(res->text);
}

/* A call from code: which tool of which server, how it ended and how long it took; never its
 * arguments or result, which may hold the data the code works on. */
static void audit_tool_call(struct session *s, const json_t *t, int r, bool is_error, uint64_t t0)
{
        audit_emit_scoped(s->mgr->cfg.audit, "tool.call", s->id,
                          json_pack("{s:O, s:O, s:s, s:s, s:f}", "tool", json_object_get(t, "name"),
                                    "server", json_object_get(t, "server"), "via", "code",
                                    "outcome",
                                    r < 0      ? "failed"
                                    : is_error ? "tool_error"
                                               : "ok",
                                    "ms", (double) (now_ns() - t0) / 1e6));
}

static int codemode_call(void *userdata, const char *name, json_t *args, uint64_t deadline_ns,
                         const atomic_bool *cancel, json_t **ret_reply)
{
        struct session *s = userdata;
        struct hub *hub = s->mgr->cfg.hub;
        _cleanup_(json_decrefp) json_t *t = hub_tool(hub, name);
        struct airlock_error err = { { 0 } };
        struct hub_result res = { 0 };
        char msg[AIRLOCK_ERROR_MAX + 256];
        const char *kind;
        uint64_t t0;
        int r;

        if (!t || !callable(s, t)) {
                _cleanup_(json_decrefp) json_t *list = codemode_list(s);
                char names[300] = "";
                size_t i, o = 0;
                json_t *e;

                json_array_foreach (list, i, e) {
                        int w = snprintf(names + o, sizeof(names) - o, "%s%s", o ? ", " : "",
                                         json_string_value(json_object_get(e, "name")));
                        if (w < 0 || (size_t) w >= sizeof(names) - o)
                                break;
                        o += (size_t) w;
                }
                if (!t)
                        (void) snprintf(msg, sizeof(msg),
                                        "there is no internal tool '%.100s'; this session's code "
                                        "may call: %s",
                                        name, names[0] ? names : "none");
                else if (listed(effective_list(s), name,
                                json_string_value(json_object_get(t, "server"))))
                        (void) snprintf(msg, sizeof(msg),
                                        "the tool '%.100s' needs a person's approval "
                                        "(require_approval: always): code may call it only in a "
                                        "session created with it in approved_tools",
                                        name);
                else
                        (void) snprintf(msg, sizeof(msg),
                                        "the tool '%.100s' is not callable from this session's "
                                        "code: add it to the session's code_tools (POST "
                                        "/v1/sessions) or to its profile's \"code_tools\"",
                                        name);
                if (t)
                        audit_emit_scoped(s->mgr->cfg.audit, "policy.refusal", s->id,
                                          json_pack("{s:s, s:o, s:O, s:s}", "policy", "code_tools",
                                                    "tool", audit_string(name), "server",
                                                    json_object_get(t, "server"), "reason", msg));
                *ret_reply = reply_error(t ? "not_allowed" : "unknown", msg);
                return *ret_reply ? 0 : -ENOMEM;
        }
        t0 = now_ns();
        r = hub_call(hub, name, t, args, deadline_ns, cancel, &res, &err);
        metrics_tool_call(METRICS_TOOL_CODEMODE, r < 0          ? METRICS_TOOL_FAILED
                                                 : res.is_error ? METRICS_TOOL_ERROR
                                                                : METRICS_TOOL_OK);
        audit_tool_call(s, t, r, res.is_error, t0);
        switch (r) {
        case 0:
                *ret_reply = res.is_error ? reply_error("tool_error", res.text)
                                          : json_pack("{s:o}", "ok", result_value(&res));
                hub_result_done(&res);
                return *ret_reply ? 0 : -ENOMEM;
        case -ENOMEM:
                return r;
        case -ENOENT:
                kind = "unknown";
                break;
        case -EINVAL:
                kind = "invalid";
                break;
        case -EHOSTDOWN:
                kind = "unavailable";
                break;
        case -ETIMEDOUT:
                kind = "timeout";
                break;
        case -ECANCELED:
                kind = "interrupted";
                (void) snprintf(err.msg, sizeof(err.msg),
                                "the call to '%.100s' was cancelled: the cell was interrupted",
                                name);
                break;
        case -EPROTO:
                kind = "tool_error";
                break;
        default:
                kind = "failed";
                break;
        }
        *ret_reply = reply_error(kind, err.msg[0] ? err.msg : strerror(-r));
        return *ret_reply ? 0 : -ENOMEM;
}

bool codemode_tools(struct session *s, struct exec_tools *ret)
{
        char *const *list = effective_list(s);

        if (!s->mgr->cfg.hub || !list || !list[0])
                return false;
        *ret = (struct exec_tools){ .list = codemode_list,
                                    .call = codemode_call,
                                    .userdata = s,
                                    .max_calls = s->profile->limits.tool_calls };
        return true;
}

json_t *codemode_callable(struct session *s)
{
        if (!s->mgr->cfg.hub)
                return json_array();
        return codemode_list(s);
}

json_t *session_code_tools(struct session_manager *mgr, const char *id, const char *profile)
{
        struct profile_slot *slot = NULL;
        struct session *s = NULL;
        json_t *out;
        int r;

        if (!mgr->cfg.hub)
                return json_array();
        if (id && session_find(mgr, id, &s) == 0) {
                out = codemode_callable(s);
                session_unref(s);
                return out;
        }
        pthread_mutex_lock(&mgr->lock);
        r = session_profile_slot(mgr, profile ? profile : "default", &slot, NULL);
        pthread_mutex_unlock(&mgr->lock);
        if (r < 0)
                return json_array();
        return callable_list(mgr->cfg.hub, slot->profile->code_tools, NULL);
}
