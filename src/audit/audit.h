/* The audit log (docs/AUDIT.md): one JSON line per security-relevant event (sessions made,
 * stopped, resumed, forked and deleted, executions, file transfers, tool calls, auth failures,
 * refusals), with its time, tenant, session and the request id of the X-Request-Id header. The
 * lines go to a file, rotated by size, and optionally to syslog(3), which journald reads.
 *
 * Writing: audit_emit() copies the event (its time, strings and fields) into one allocation and
 * queues it; a writer thread makes the JSON lines and writes them in batches, one write(2) with
 * O_APPEND per batch (per file when the batch crosses a rotation), so the request that caused
 * an event pays the copy and a list append, not the JSON nor the system call. A line reaches the
 * kernel within AUDIT_FLUSH_MS of its event (unless the writer is behind a stalled disk), not
 * before audit_emit() returns: a crash of the daemon (SIGKILL, a fault) may lose the lines of its
 * last AUDIT_FLUSH_MS; a clean stop loses none (audit_free() writes every queued line), and
 * audit_flush() is a barrier. Lines are never fsync'd one by one (a power cut may lose the kernel's
 * last seconds of writeback); the file is fdatasync'd by audit_free(). Lines appear in the order of
 * their audit_emit() calls, each whole: concurrent emitters never interleave, a write cut short is
 * cut back to its last whole line, and rotation happens between lines, so no line is split
 * across files. At most 1024 lines wait; an emitter past that waits for room (said once on
 * stderr), so a stalled disk slows requests down and no line is dropped. A line that cannot
 * be written (disk full, file unwritable) is counted, said once on stderr per change of state,
 * and with AUDIT_FAIL_REFUSE makes audit_check() refuse executions until a line can be written
 * again: executions that ran before the writer met the failure keep their result.
 *
 * Threading: every function may be called from any thread (audit_free() once the others are
 * done). */
#pragma once

#include "base/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct audit;

enum audit_fail_mode {
        AUDIT_FAIL_CONTINUE, /* executions go on without their audit lines (the default) */
        AUDIT_FAIL_REFUSE,   /* executions are refused (503) while no line can be written */
};

/* The code text kept in an execution event at most; past it the text is cut and the event says
 * "code_truncated": true (code_sha256 always covers the whole code). */
#define AUDIT_CODE_MAX (64u * 1024u)

struct audit_config {
        const char *path;    /* the log file (created 0600); NULL = none */
        uint64_t max_bytes;  /* rotate before a line would take the file past this; 0 = never */
        unsigned keep;       /* rotated files kept: path.1 (newest) .. path.keep; 0 = none */
        int syslog_facility; /* LOG_DAEMON, LOG_LOCAL0, ... (syslog.h); -1 = no syslog */
        bool code;           /* the code text in execution events (--audit-code) */
        enum audit_fail_mode fail;
};

/* Opens (creates) the log file. Returns 0, or -errno with err saying which file and why. An
 * existing regular file with group or other permission bits is made 0600. Free with
 * audit_free(). */
int audit_new(const struct audit_config *cfg, struct audit **ret_audit, struct airlock_error *err);

/* A line reaches the kernel at most this long after its event, unless the disk stalls. */
#define AUDIT_FLUSH_MS 10

/* Writes every queued line, stops the writer, fdatasync's and closes the log. No other call may
 * run during or after it. Accepts NULL, returns NULL. */
struct audit *audit_free(struct audit *a);

/* Returns once every line emitted before the call is written (or counted as lost), and sent to
 * syslog. a NULL: nothing. */
void audit_flush(struct audit *a);

/* Writes one event: {"time", "event", "tenant", "session", "request_id", ...fields}. tenant,
 * session and request_id may be NULL (written as null); fields (may be NULL) is an object whose
 * members follow (none may be named as the five first), taken over (stolen) also on failure.
 * All are copied before it returns: the writer thread makes the line later. a NULL: does nothing
 * but free fields. Never fails: a line that cannot be made or written is counted
 * (audit_write_failures()). */
void audit_emit(struct audit *a, const char *event, const char *tenant, const char *session,
                const char *request_id, json_t *fields);

/* Who the current thread works for: set by the HTTP server around a request's handler, so
 * that the layers below (sessions, tools) write the right tenant and request id without
 * passing them along. Borrowed: scope and its strings must outlive the matching
 * audit_scope_leave(). */
struct audit_scope {
        struct audit *audit;
        const char *tenant;
        const char *request_id;
};
void audit_scope_enter(const struct audit_scope *scope);
void audit_scope_leave(void);
/* The current thread's scope, or NULL (a background thread: idle stops, the reaper). */
const struct audit_scope *audit_scope_current(void);

/* audit_emit() with the tenant and request id of the current thread's scope; without a scope
 * the tenant is "default" (the single-token mode's one tenant) and the request id null. */
void audit_emit_scoped(struct audit *a, const char *event, const char *session, json_t *fields);

/* audit_emit_scoped() for an event of a session owned by owner: without a scope (the manager's
 * worker stopping an idle session, expiry) the line names owner (NULL or "" = "default"). */
void audit_emit_owned(struct audit *a, const char *event, const char *owner, const char *session,
                      json_t *fields);

/* Whether an execution may run: 0, or with AUDIT_FAIL_REFUSE while lines cannot be written
 * (as the writer last found) -ESHUTDOWN (HTTP 503) with err naming the audit failure. It tries
 * the file again first, so the refusal ends as soon as the disk has room. a NULL: 0. */
int audit_check(struct audit *a, struct airlock_error *err);

/* Whether execution events carry the code text. a NULL: false. */
bool audit_wants_code(const struct audit *a);

/* Lines that could not be written since the start (for /metrics). a NULL: 0. */
uint64_t audit_write_failures(const struct audit *a);

/* Reopens the file at its path (after an outside rotation, SIGHUP): the lines queued before
 * the call go to the file open until then. Returns 0 or -errno. */
int audit_reopen(struct audit *a);

/* The execution's fields of docs/AUDIT.md into fields (an object): code_sha256, code (unless
 * --audit-code=off; cut at AUDIT_CODE_MAX), language. Returns 0 or -ENOMEM. */
int audit_add_code(const struct audit *a, json_t *fields, const char *code, size_t len);

/* A JSON string of s that is valid UTF-8 whatever s holds (a path from a URL). New reference,
 * NULL when out of memory. */
json_t *audit_string(const char *s);

/* "2024-05-01T12:00:00.123Z" for now, in buf (at least 32 bytes). */
void audit_format_time(char *buf, size_t size);
