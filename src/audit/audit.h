/* The audit log (docs/AUDIT.md): one JSON line per security-relevant event (sessions made,
 * stopped, resumed, forked and deleted, executions, file transfers, tool calls, auth failures,
 * refusals), with its time, tenant, session and the request id of the X-Request-Id header. The
 * lines go to a file, rotated by size, and optionally to syslog(3), which journald reads.
 *
 * Writing: each line is one write(2) with O_APPEND under the log's mutex, in the thread of the
 * event: a line is in the kernel when audit_emit() returns (it survives a crash of the daemon),
 * never fsync'd per line (a power cut may lose the kernel's last seconds of writeback). The
 * mutex makes rotation atomic with respect to writers: no line is lost or split across files.
 * A failed write (disk full, file unwritable) is counted, said once on stderr per change of
 * state, and with AUDIT_FAIL_REFUSE makes audit_check() refuse executions until a line can be
 * written again.
 *
 * Threading: every function may be called from any thread. */
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

/* Closes the log. Accepts NULL, returns NULL. */
struct audit *audit_free(struct audit *a);

/* Writes one event: {"time", "event", "tenant", "session", "request_id", ...fields}. tenant,
 * session and request_id may be NULL (written as null); fields (may be NULL) is an object whose
 * members are added, taken over (stolen) also on failure. a NULL: does nothing but free fields.
 * Never fails: a line that cannot be written is counted (audit_write_failures()). */
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
 * -ESHUTDOWN (HTTP 503) with err naming the audit failure. It tries the file again first, so
 * the refusal ends as soon as the disk has room. a NULL: 0. */
int audit_check(struct audit *a, struct airlock_error *err);

/* Whether execution events carry the code text. a NULL: false. */
bool audit_wants_code(const struct audit *a);

/* Lines that could not be written since the start (for /metrics). a NULL: 0. */
uint64_t audit_write_failures(const struct audit *a);

/* Reopens the file at its path (after an outside rotation, SIGHUP). Returns 0 or -errno. */
int audit_reopen(struct audit *a);

/* The execution's fields of docs/AUDIT.md into fields (an object): code_sha256, code (unless
 * --audit-code=off; cut at AUDIT_CODE_MAX), language. Returns 0 or -ENOMEM. */
int audit_add_code(const struct audit *a, json_t *fields, const char *code, size_t len);

/* A JSON string of s that is valid UTF-8 whatever s holds (a path from a URL). New reference,
 * NULL when out of memory. */
json_t *audit_string(const char *s);

/* "2024-05-01T12:00:00.123Z" for now, in buf (at least 32 bytes). */
void audit_format_time(char *buf, size_t size);
