/* Suspending and continuing gateway turns (continuation.h). The client is an ordinary OpenAI
 * client: it sends back its own view of the conversation (its function calls under the ids the
 * gateway made, and its tool results) and nothing airlock-specific, so everything the gateway
 * needs to continue is recovered here from those ids. */
#include "continuation.h"

#include "base/cleanup.h"
#include "base/json-util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define _cleanup_json_ _cleanup_(json_decrefp)
#define NOT_ANSWERED_REASON "no mcp_approval_response was sent for it"

static int fail(struct caller_tools_error *err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static int fail(struct caller_tools_error *err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

void continuation_done(struct continuation *c)
{
        json_decref(c->turn);
        json_decref(c->decisions);
        *c = (struct continuation){};
}

static const char *kind_of(json_t *turn)
{
        return json_string_value(json_object_get(turn, "kind"));
}

bool continuation_is_approval(const struct continuation *c)
{
        const char *k = kind_of(c->turn);

        return k && strcmp(k, "approval") == 0;
}

const char *continuation_session(const struct continuation *c)
{
        const char *s = json_string_value(json_object_get(c->turn, "session"));

        return s ? s : "";
}

const char *continuation_profile(const struct continuation *c)
{
        const char *s = json_string_value(json_object_get(c->turn, "profile"));

        return s ? s : "";
}

static const char *call_id(json_t *tc)
{
        return json_string_value(json_object_get(tc, "id"));
}

/* The index of the last message with role "assistant", or -1. */
static ssize_t last_assistant(json_t *messages)
{
        for (size_t i = json_array_size(messages); i-- > 0;) {
                const char *role =
                        json_string_value(json_object_get(json_array_get(messages, i), "role"));

                if (role && strcmp(role, "assistant") == 0)
                        return (ssize_t) i;
        }
        return -1;
}

/* Whether a role "tool" message after messages[from] answers id. */
static bool answered(json_t *messages, size_t from, const char *id)
{
        for (size_t i = from + 1; i < json_array_size(messages); i++) {
                json_t *m = json_array_get(messages, i);
                const char *role = json_string_value(json_object_get(m, "role"));
                const char *tid = json_string_value(json_object_get(m, "tool_call_id"));

                if (role && strcmp(role, "tool") == 0 && tid && strcmp(tid, id) == 0)
                        return true;
        }
        return false;
}

int continuation_find_results(struct suspend_store *s, json_t *messages, struct continuation *ret,
                              struct caller_tools_error *err)
{
        ssize_t a = last_assistant(messages);
        json_t *tc, *turn = NULL, *map;
        const char *key = NULL, *gw;
        json_t *up;
        size_t i;

        *ret = (struct continuation){};
        if (a < 0 || !s)
                return 0;
        json_array_foreach (json_object_get(json_array_get(messages, (size_t) a), "tool_calls"), i,
                            tc) {
                key = call_id(tc);
                turn = key ? suspend_store_get(s, key) : NULL;
                if (turn)
                        break;
        }
        if (!turn)
                return 0;
        if (!kind_of(turn) || strcmp(kind_of(turn), "caller") != 0) {
                /* An approval id used as a tool call id: not ours to continue this way. */
                json_decref(turn);
                return 0;
        }
        map = json_object_get(turn, "map");
        json_object_foreach (map, gw, up) {
                if (!answered(messages, (size_t) a, gw)) {
                        (void) snprintf(err->param, sizeof(err->param), "messages[%zd]", a);
                        json_decref(turn);
                        return fail(err,
                                    "messages[%zd] calls the function with id '%s', but no "
                                    "role \"tool\" message after it answers that id: send one "
                                    "result per call",
                                    a, gw);
                }
        }
        ret->turn = turn;
        ret->last_assistant = (size_t) a;
        (void) snprintf(ret->key, sizeof(ret->key), "%s", key);
        return 0;
}

/* Checks one mcp_approval_response item; returns 0 or -EINVAL with err. */
static int check_approval(json_t *item, const char *param, struct caller_tools_error *err)
{
        static const char *const known[] = { "type", "approval_request_id", "approve", "reason",
                                             "id" };
        const char *type = json_string_value(json_object_get(item, "type")), *k;
        json_t *reason = json_object_get(item, "reason"), *v;

        if (!json_is_object(item))
                return fail(err, "%s must be an mcp_approval_response object, not %s", param,
                            json_type_name(item));
        if (!type || strcmp(type, "mcp_approval_response") != 0)
                return fail(err, "%s must have \"type\": \"mcp_approval_response\"", param);
        if (!json_is_string(json_object_get(item, "approval_request_id")))
                return fail(err,
                            "%s has no 'approval_request_id' (the id of the "
                            "mcp_approval_request it answers)",
                            param);
        if (!json_is_boolean(json_object_get(item, "approve")))
                return fail(err, "%s.approve must be true or false", param);
        if (reason && !json_is_null(reason) && !json_is_string(reason))
                return fail(err, "%s.reason must be a string", param);
        json_object_foreach (item, k, v) {
                bool ok = false;

                for (size_t j = 0; j < sizeof(known) / sizeof(known[0]); j++)
                        ok = ok || strcmp(k, known[j]) == 0;
                if (!ok)
                        return fail(err,
                                    "%s has an unknown member '%.64s' (an mcp_approval_response "
                                    "has type, approval_request_id, approve and reason)",
                                    param, k);
        }
        return 0;
}

int continuation_find_approvals(struct suspend_store *s, json_t *approvals,
                                struct continuation *ret, struct caller_tools_error *err)
{
        _cleanup_json_ json_t *turn = NULL, *decisions = NULL;
        json_t *item, *hidden, *last, *pending, *idx;
        const char *first_key = NULL, *mcpr;
        size_t i;
        int r;

        *ret = (struct continuation){};
        if (!json_is_array(approvals) || json_array_size(approvals) == 0) {
                (void) snprintf(err->param, sizeof(err->param), "airlock.approvals");
                return fail(err, "airlock.approvals must be a non-empty array of "
                                 "mcp_approval_response items");
        }
        json_array_foreach (approvals, i, item) {
                const char *id;
                json_t *t;

                (void) snprintf(err->param, sizeof(err->param), "airlock.approvals[%zu]", i);
                r = check_approval(item, err->param, err);
                if (r < 0)
                        return r;
                id = json_string_value(json_object_get(item, "approval_request_id"));
                for (size_t j = 0; j < i; j++)
                        if (strcmp(id,
                                   json_string_value(json_object_get(json_array_get(approvals, j),
                                                                     "approval_request_id"))) == 0)
                                return fail(err,
                                            "%s answers '%.64s' again (also "
                                            "airlock.approvals[%zu])",
                                            err->param, id, j);
                t = s ? suspend_store_get(s, id) : NULL;
                if (!t || !kind_of(t) || strcmp(kind_of(t), "approval") != 0) {
                        json_decref(t);
                        return fail(err,
                                    "%s: unknown or expired approval request '%.64s' (pending "
                                    "approvals are kept for one hour, in memory, and each is "
                                    "answered once)",
                                    err->param, id);
                }
                if (turn && t != turn) {
                        json_decref(t);
                        return fail(err,
                                    "%s answers another turn than airlock.approvals[0]: send "
                                    "the approvals of one answer per request",
                                    err->param);
                }
                if (!turn) {
                        turn = t;
                        first_key = id;
                } else {
                        json_decref(t);
                }
        }

        hidden = json_object_get(turn, "hidden");
        last = json_array_get(hidden, json_array_size(hidden) - 1);
        decisions = json_array();
        if (!decisions)
                return -ENOMEM;
        for (i = 0; i < json_array_size(json_object_get(last, "tool_calls")); i++)
                if (json_array_append_new(decisions, json_null()) < 0)
                        return -ENOMEM;
        pending = json_object_get(turn, "approvals");
        json_object_foreach (pending, mcpr, idx) {
                json_t *d = NULL;

                json_array_foreach (approvals, i, item)
                        if (strcmp(json_string_value(json_object_get(item, "approval_request_id")),
                                   mcpr) == 0)
                                d = json_pack("{s:O, s:O?}", "approve",
                                              json_object_get(item, "approve"), "reason",
                                              json_object_get(item, "reason"));
                if (!d)
                        d = json_pack("{s:b, s:s}", "approve", 0, "reason", NOT_ANSWERED_REASON);
                if (!d || json_array_set_new(decisions, (size_t) json_integer_value(idx), d) < 0)
                        return -ENOMEM;
        }
        (void) snprintf(ret->key, sizeof(ret->key), "%s", first_key);
        ret->turn = TAKE_PTR(turn);
        ret->decisions = TAKE_PTR(decisions);
        return 0;
}

/* Appends src[from:to] to dst; with map, tool messages answering a mapped id get the id it maps
 * to. Returns 0 or -ENOMEM. */
static int append_range(json_t *dst, json_t *src, size_t from, size_t to, json_t *map)
{
        for (size_t i = from; i < to && i < json_array_size(src); i++) {
                json_t *m = json_array_get(src, i);
                json_t *up = json_object_get(
                        map, json_string_value(json_object_get(m, "tool_call_id")) ?: "");

                if (json_is_string(up)) {
                        json_t *copy = json_copy(m);

                        if (!copy || json_object_set(copy, "tool_call_id", up) < 0 ||
                            json_array_append_new(dst, copy) < 0) {
                                json_decref(copy);
                                return -ENOMEM;
                        }
                        continue;
                }
                if (json_array_append(dst, m) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* The index of the assistant message at or before `upto` with a tool call of id, or -1. */
static ssize_t find_call(json_t *messages, size_t upto, const char *id)
{
        if (!id)
                return -1;
        for (size_t i = upto + 1; i-- > 0;) {
                json_t *tc;
                size_t j;

                json_array_foreach (json_object_get(json_array_get(messages, i), "tool_calls"), j,
                                    tc) {
                        const char *cid = call_id(tc);

                        if (cid && strcmp(cid, id) == 0)
                                return (ssize_t) i;
                }
        }
        return -1;
}

int continuation_splice(const struct continuation *c, json_t *messages, json_t **ret_messages,
                        size_t *ret_start, const char **ret_anchor)
{
        _cleanup_json_ json_t *out = json_array();
        json_t *hidden = json_object_get(c->turn, "hidden");
        json_t *map = json_object_get(c->turn, "map");
        const char *anchor = json_string_value(json_object_get(c->turn, "anchor"));
        size_t n = json_array_size(messages), h = json_array_size(hidden);
        size_t last_start = (size_t) json_integer_value(json_object_get(c->turn, "last_start"));
        bool approval = continuation_is_approval(c);
        size_t end = approval ? (n ? n - 1 : 0) : c->last_assistant;
        ssize_t a = find_call(messages, end, anchor);
        size_t start;
        int r;

        if (!out)
                return -ENOMEM;
        if (last_start > h)
                last_start = h;
        if (a >= 0) {
                /* The client still has the whole chain: everything from the anchor on is
                 * replaced by what the gateway kept. */
                start = (size_t) a;
                *ret_anchor = anchor;
                r = append_range(out, messages, 0, start, NULL);
                if (r >= 0)
                        r = append_range(out, hidden, 0, h, NULL);
        } else if (!approval) {
                /* The client dropped the start of the chain: the newest segment replaces the
                 * assistant message it answers. */
                start = c->last_assistant;
                *ret_anchor = call_id(json_array_get(
                        json_object_get(json_array_get(messages, start), "tool_calls"), 0));
                r = append_range(out, messages, 0, start, NULL);
                if (r >= 0)
                        r = append_range(out, hidden, last_start, h, NULL);
        } else {
                start = n;
                *ret_anchor = NULL;
                r = append_range(out, messages, 0, n, NULL);
                if (r >= 0)
                        r = append_range(out, hidden, last_start, h, NULL);
        }
        if (r >= 0 && !approval)
                r = append_range(out, messages, c->last_assistant + 1, n, map);
        if (r < 0)
                return r;
        *ret_start = start;
        *ret_messages = TAKE_PTR(out);
        return 0;
}

/* The arguments of call index of an assistant message as JSON text, as the Responses API has
 * them in an mcp_approval_request. */
static const char *arguments_text(json_t *assistant, size_t index)
{
        json_t *fn = json_object_get(
                json_array_get(json_object_get(assistant, "tool_calls"), index), "function");
        const char *a = json_string_value(json_object_get(fn, "arguments"));

        return a ? a : "{}";
}

/* Makes a new id with prefix, adds it to ids. Returns 0 or -errno. */
static int new_id(const char *prefix, json_t *ids, char *buf, size_t size)
{
        int r = suspend_make_id(prefix, buf, size);

        if (r < 0)
                return r;
        return json_array_append_new(ids, json_string(buf)) < 0 ? -ENOMEM : 0;
}

int continuation_suspend(struct suspend_store *s, const struct chat_turn *t, json_t *messages,
                         const struct continuation_point *at, json_t **ret_visible)
{
        _cleanup_json_ json_t *ids = json_array(), *visible = json_array(), *hidden = json_array();
        _cleanup_json_ json_t *map = json_object(), *payload = NULL;
        bool approval = t->outcome == CHAT_NEEDS_APPROVAL;
        size_t n = json_array_size(messages);
        json_t *p, *assistant;
        const char *anchor = at->anchor;
        char id[SUSPEND_ID_MAX];
        size_t i;
        int r;

        if (!s)
                return -E2BIG;
        if (!ids || !visible || !hidden || !map)
                return -ENOMEM;
        if (at->splice_start > n || at->segment_start > n || at->splice_start > at->segment_start)
                return -EINVAL;
        r = append_range(hidden, messages, at->splice_start, n, NULL);
        if (r < 0)
                return r;
        /* The assistant message the pending calls belong to: the last one of the history. */
        for (assistant = NULL, i = n; i-- > 0 && !assistant;)
                if (json_object_get(json_array_get(messages, i), "tool_calls"))
                        assistant = json_array_get(messages, i);

        json_array_foreach (t->pending, i, p) {
                json_t *v;

                r = new_id(approval ? "mcpr_" : "call_", ids, id, sizeof(id));
                if (r < 0)
                        return r;
                if (approval) {
                        size_t index = (size_t) json_integer_value(json_object_get(p, "index"));

                        v = json_pack("{s:s, s:s, s:O, s:O, s:s}", "type", "mcp_approval_request",
                                      "id", id, "server_label", json_object_get(p, "server_label"),
                                      "name", json_object_get(p, "name"), "arguments",
                                      arguments_text(assistant, index));
                        if (!v || json_object_set(map, id, json_object_get(p, "index")) < 0) {
                                json_decref(v);
                                return -ENOMEM;
                        }
                } else {
                        v = json_pack("{s:s, s:s, s:O}", "id", id, "type", "function", "function",
                                      json_object_get(p, "function"));
                        if (!v || json_object_set(map, id, json_object_get(p, "id")) < 0) {
                                json_decref(v);
                                return -ENOMEM;
                        }
                        if (!anchor && i == 0)
                                anchor = json_string_value(json_array_get(ids, 0));
                }
                if (json_array_append_new(visible, v) < 0)
                        return -ENOMEM;
        }
        if (json_array_size(ids) == 0)
                return -EINVAL;

        payload = json_pack("{s:s, s:O, s:s?, s:s?, s:O, s:I, s:s?, s:O}", "kind",
                            approval ? "approval" : "caller", "ids", ids, "session",
                            at->session && *at->session ? at->session : NULL, "profile",
                            at->profile && *at->profile ? at->profile : NULL, "hidden", hidden,
                            "last_start", (json_int_t) (at->segment_start - at->splice_start),
                            "anchor", anchor, approval ? "approvals" : "map", map);
        if (!payload)
                return -ENOMEM;
        r = suspend_store_put(s, ids, payload);
        if (r < 0)
                return r;
        *ret_visible = TAKE_PTR(visible);
        return 0;
}

int continuation_put_back(struct suspend_store *s, json_t *turn)
{
        return suspend_store_put(s, json_object_get(turn, "ids"), turn);
}
