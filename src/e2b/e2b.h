/* E2B compatibility: what the E2B SDK's wire formats mean in airlock's terms, with no HTTP in
 * it. A sandbox is a session: its sandboxID is the session id without "s-"; E2B's home,
 * /home/user, is the session's /work; a template is a profile; the code interpreter's events
 * are built from an execution object; the Connect-RPC framing (5-byte envelopes) of the
 * filesystem and process services is encoded and decoded here. The per-sandbox access token
 * that the create call returns lives in the store of struct e2b (e2b.db in the state
 * directory), so that it survives a restart of the daemon for stopped sessions. The routes are
 * src/api/routes-e2b.c; docs/E2B.md is the user's side. Every function may be called from any
 * thread. */
#pragma once

#include "base/error.h"
#include "base/node-id.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define E2B_SANDBOX_ID_LEN 24 /* a session id's 24 lowercase hex digits */
/* With "-NODE" after them (node-id.h), and the session id of one ("s-" first). */
#define E2B_SANDBOX_ID_MAX (E2B_SANDBOX_ID_LEN + NODE_SUFFIX_MAX)
#define E2B_SESSION_ID_MAX (2 + E2B_SANDBOX_ID_MAX)
#define E2B_CLIENT_ID "airlock" /* the clientID of every sandbox */
#define E2B_TOKEN_LEN 48        /* an access token: 24 random bytes as hex */
#define E2B_ENVD_VERSION "0.5.7"
#define E2B_CONTEXTS_MAX 16 /* code contexts of one sandbox */

/* The sandboxID of a session id ("s-" followed by 24 lowercase hex digits, and "-NODE" with a
 * node): the id without "s-". Returns 0 or -EINVAL for anything else. */
int e2b_sandbox_id(const char *session_id, char ret_id[E2B_SANDBOX_ID_MAX + 1]);

/* The session id of a sandboxID. E2B's SDK may add "-<clientID>" after an id (older API
 * answers): that suffix is dropped, unless it is this node's or a peer's name. Returns 0, or
 * -EINVAL when id is not 24 lowercase hex digits and an optional "-NODE" (with or without such
 * a suffix). */
int e2b_session_id(const char *id, char ret_session[E2B_SESSION_ID_MAX + 1]);

/* A path as the SDK sends it, made relative to /work: "/home/user/a/b", "/work/a/b" and
 * "a/b" (relative to the home) all give "a/b"; "/home/user", "/work", "~" and "" give "".
 * "." components go, ".." is refused rather than resolved. Returns 0; -EINVAL with *ret_why
 * (static) for a path outside /home/user, a ".." or a NUL; -E2BIG when ret is too small. */
int e2b_work_path(const char *path, char *ret, size_t size, const char **ret_why);

/* The profile a template names: "code-interpreter-v1", "code-interpreter" and "base" are the
 * "default" profile; any other name is taken as a profile's name. Borrowed. */
const char *e2b_template_profile(const char *template_id);

/* The MIME types of the runner's outputs that carry E2B's chart of a matplotlib figure and a
 * DataFrame's data, as JSON text (src/runner/cell/charts.py, docs/API.md). */
#define E2B_CHART_MIME "application/vnd.airlock.chart+json"
#define E2B_DATA_MIME "application/vnd.airlock.data+json"

/* The code interpreter's events for an execution object of session.h (DESIGN.md section 4),
 * after its stdout and stderr were sent: one "result" per output (MIME types as E2B's keys:
 * text, html, markdown, svg, png, jpeg, pdf, latex, json, javascript; E2B_CHART_MIME and
 * E2B_DATA_MIME as "chart" and "data", and application/json, parsed from their JSON text;
 * others under their MIME type and in "extra", which every result has), the last expression's value
 * as the main result when no output carries it, the "error" {name, value, traceback},
 * "number_of_executions" and "end_of_execution". A new array, NULL when out of memory. */
json_t *e2b_execution_events(const json_t *result, size_t shown);
/* (shown: how many of the result's outputs were sent already, as the cell made them: their
 * "result" events are left out.) */

/* One "result" event from an output's data (MIME type -> value). New reference. */
json_t *e2b_result_event(const json_t *data, bool is_main);

/* Connect-RPC envelopes: a flags byte, a 4-byte big-endian length, the message. */
#define E2B_ENVELOPE_COMPRESSED 0x01u
#define E2B_ENVELOPE_END_STREAM 0x02u
#define E2B_ENVELOPE_MAX (4u << 20) /* a message we accept or send */

/* Decodes the envelope at the start of buf[0..len): *ret_msg points into buf (borrowed),
 * *ret_used is the envelope's whole size. Returns 0; -EAGAIN when more bytes are needed;
 * -E2BIG for a message over E2B_ENVELOPE_MAX; -EOPNOTSUPP for a compressed one (we offer no
 * compression, so a client may not send one). */
int e2b_envelope_decode(const char *buf, size_t len, unsigned *ret_flags, const char **ret_msg,
                        size_t *ret_msg_len, size_t *ret_used);

/* Appends one envelope of msg (len bytes) with flags to *buf (a malloc'd buffer of *buf_len
 * bytes, grown). Returns 0, -E2BIG over E2B_ENVELOPE_MAX, or -ENOMEM. */
int e2b_envelope_append(char **buf, size_t *buf_len, unsigned flags, const char *msg, size_t len);

/* Connect's error codes ("not_found", "invalid_argument"...) and the HTTP status that a unary
 * call answers with each (Connect protocol: not_found 404, invalid_argument 400,
 * unauthenticated 401, permission_denied 403, already_exists 409, unimplemented 501,
 * unavailable 503, internal 500...). */
unsigned e2b_connect_http_status(const char *code);

/* The Connect code whose HTTP status is status, for an error the server itself answers (413
 * resource_exhausted, 401 unauthenticated, 503 unavailable, 405 unimplemented...);
 * "unknown" for a status Connect has no code of. Static. */
const char *e2b_connect_code_of_status(unsigned status);

/* Whether path is under E2B's surface ("/e2b/..."); *ret_connect (may be NULL) is set for a
 * Connect-RPC path ("/e2b/sandbox/package.Service/Method"), whose errors are Connect's. */
bool e2b_path_is_e2b(const char *path, bool *ret_connect);

/* The Connect code for an errno of session.h: -ENOENT not_found, -EINVAL invalid_argument,
 * -EEXIST already_exists, -EBUSY unavailable, -ENOTDIR and -EISDIR invalid_argument,
 * -EFBIG/-E2BIG/-ENOSPC resource_exhausted, others internal. Static. */
const char *e2b_connect_code(int r);

/* Standard base64 of data (len bytes), NUL-terminated; caller frees. NULL when out of memory. */
char *e2b_base64_encode(const void *data, size_t len);

/* The store of access tokens and code contexts. */
struct e2b;

/* state_dir NULL: tokens are kept in memory only (sessions cannot stop without a state
 * directory anyway). Returns 0 or -errno with err set. Free with e2b_free(). */
int e2b_new(const char *state_dir, struct e2b **ret, struct airlock_error *err);

/* Accepts NULL, returns NULL. */
struct e2b *e2b_free(struct e2b *e);

/* The access token of session_id, made (random) and stored when it has none, and the template
 * it was created from (NULL = the one given now, stored with a new token). ret_token gets
 * E2B_TOKEN_LEN hex digits; ret_template (may be NULL, size 64) the stored template. Returns
 * 0, or -errno of getrandom() or the store. */
int e2b_token_issue(struct e2b *e, const char *session_id, const char *template_id,
                    char ret_token[E2B_TOKEN_LEN + 1], char ret_template[64]);

/* Whether token is session_id's (compared in constant time). Returns 0, -EACCES for a wrong
 * or missing token, -ENOENT when the session has none yet (never issued: connect first). */
int e2b_token_check(struct e2b *e, const char *session_id, const char *token);

/* The template session_id was created from, into ret (size 64); "base" when none is stored. */
void e2b_template_of(struct e2b *e, const char *session_id, char ret[64]);

/* Forgets session_id's token and contexts (the sandbox was killed). */
void e2b_forget(struct e2b *e, const char *session_id);

/* Code contexts: a language and a working directory within the sandbox, kept in memory. */
struct e2b_context {
        char id[40];
        char language[16];
        char cwd[256];
};

/* Adds a context; *ret gets it with a new random id. Returns 0, -EUSERS past
 * E2B_CONTEXTS_MAX for the session, or -ENOMEM. */
int e2b_context_add(struct e2b *e, const char *session_id, const char *language, const char *cwd,
                    struct e2b_context *ret);

/* Finds a context by id. Returns 0 or -ENOENT. */
int e2b_context_get(struct e2b *e, const char *session_id, const char *id, struct e2b_context *ret);

/* Removes one. Returns 0 or -ENOENT. */
int e2b_context_remove(struct e2b *e, const char *session_id, const char *id);

/* The session's contexts as E2B's objects [{id, language, cwd}]. New reference. */
json_t *e2b_context_list(struct e2b *e, const char *session_id);
