/* How the gateway continues a turn across requests. A turn that called the client's own tools
 * (or a tool waiting for a person's approval) is suspended in the store (suspend.h) with what
 * the client never sees: the hidden rounds of the gateway's own tool calls and results, the
 * model's full assistant message with every call, and the results of the calls that ran. The
 * client's next request (its tool results, or airlock.approvals) finds the turn again by the ids
 * the gateway handed out, and the stored messages are put back in place of the client's view
 * of them, so that the model upstream sees its own conversation unchanged.
 *
 * A suspended turn, as stored (immutable JSON):
 *   {"kind": "caller"|"approval", "ids": [every id it is reachable by],
 *    "session": "s-..."|null, "profile": "..."|null,
 *    "hidden": [messages], "last_start": N,  (hidden[N:] is what the last request added)
 *    "anchor": "call_..."|null,  (the first call id of the client's assistant message from which
 *                                 hidden replaces the client's messages; null: appended)
 *    "map": {"call_<gateway id>": "<upstream id>"},      (kind caller)
 *    "approvals": {"mcpr_<id>": <index of the call in the last hidden message>}}  (approval)
 * A chain of client tool calls in one user turn keeps its anchor, so that every hidden round of
 * the chain is restored, not only the last one. */
#pragma once

#include "caller-tools.h"
#include "chat.h"
#include "suspend.h"

#include <jansson.h>
#include <stddef.h>

/* What a request continues, found by continuation_find_*(). Release with
 * continuation_done(). */
struct continuation {
        json_t *turn;             /* the stored turn (new reference), NULL = none */
        char key[SUSPEND_ID_MAX]; /* an id to take it by */
        json_t *decisions;        /* kind approval: chat_options.decisions */
        size_t last_assistant;    /* kind caller: index of the client's assistant message
                                   * whose calls the tool messages answer */
};

void continuation_done(struct continuation *c);

/* Whether c continues a turn of kind "approval" (else "caller", or nothing). */
bool continuation_is_approval(const struct continuation *c);

/* The stored turn's session and profile ("" = none), borrowed from c->turn. */
const char *continuation_session(const struct continuation *c);
const char *continuation_profile(const struct continuation *c);

/* Finds the turn whose client tool calls the request's messages answer: the last assistant
 * message's tool call ids are looked up. None known (never handed out, expired, used, or a
 * daemon restart) is not an error: *ret stays empty and the messages go upstream as they are.
 * Returns 0, or -EINVAL with err (param "messages[i]") when a call of a known turn has no tool
 * message answering it, or -ENOMEM. */
int continuation_find_results(struct suspend_store *s, json_t *messages, struct continuation *ret,
                              struct caller_tools_error *err);

/* Resolves airlock.approvals (an array of mcp_approval_response items, checked here) to the
 * turn they answer and its decisions: approved calls run, denied ones are told "the user denied
 * this call" (with the reason), and pending calls without a response count as denied. Returns
 * 0, or -EINVAL with err (param "airlock.approvals[i]") for a malformed item, an unknown or
 * expired id, a duplicate, or items of different turns; or -ENOMEM. */
int continuation_find_approvals(struct suspend_store *s, json_t *approvals,
                                struct continuation *ret, struct caller_tools_error *err);

/* The messages to send upstream: the client's (borrowed) with the stored turn put back (see
 * above), the tool messages that answer its client calls given their upstream ids. *ret_start
 * is the index at which the stored messages begin (what a turn suspended by this request will
 * keep from), *ret_anchor the anchor a turn suspended by this request inherits (borrowed from
 * messages or c->turn, NULL when the stored messages were appended). Returns 0 or -ENOMEM. */
int continuation_splice(const struct continuation *c, json_t *messages, json_t **ret_messages,
                        size_t *ret_start, const char **ret_anchor);

/* Where a request's turn stands for suspending it. */
struct continuation_point {
        size_t splice_start;  /* messages[splice_start:] are kept */
        size_t segment_start; /* where chat_run() began appending */
        const char *anchor;   /* inherited anchor (borrowed), or NULL */
        const char *session;  /* "" or NULL = none yet */
        const char *profile;  /* NULL = the default */
};

/* Suspends turn t (CHAT_CALLER_TOOLS or CHAT_NEEDS_APPROVAL) whose conversation is messages
 * (the upstream request's, as chat_run() left them) in s, under new ids (suspend_make_id()).
 * On success *ret_visible is what the client gets: for CHAT_CALLER_TOOLS the caller's calls
 * with the gateway's ids ([{id, type, function: {name, arguments}}]), for CHAT_NEEDS_APPROVAL
 * the mcp_approval_request items ([{type, id, server_label, name, arguments}]). Returns 0,
 * -E2BIG when the turn is larger than the store holds, or -errno. */
int continuation_suspend(struct suspend_store *s, const struct chat_turn *t, json_t *messages,
                         const struct continuation_point *at, json_t **ret_visible);

/* Puts a taken turn back under its ids (the continuing request failed before any tool ran, so
 * that the client can retry it). Returns 0 or -errno of suspend_store_put(). */
int continuation_put_back(struct suspend_store *s, json_t *turn);
