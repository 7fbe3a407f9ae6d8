/* The last executions the daemon ran, in a fixed ring in memory: what GET /v1/executions and
 * the dashboard (/ui) show. Bounded at creation (capacity entries, each with its code and
 * output cut to a few hundred bytes), so a flood of cells costs no memory; nothing is written
 * to disk (the audit log is the record, this is a window). Adding an entry is a copy under one
 * mutex, no allocation: it sits on the execute path.
 *
 * Threading: every function may be called from any thread. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define RECENT_CAPACITY_DEFAULT 256
#define RECENT_CODE_MAX 1024  /* bytes of a cell's code kept, cut between characters */
#define RECENT_OUTPUT_MAX 256 /* bytes of its stdout, of its stderr and of its error kept */
#define RECENT_FILES_MAX 256  /* bytes of the names of the files it changed, ", "-joined */

struct recent;

/* What one execution was, as the session module saw it; every string is borrowed and may be
 * NULL (stored as ""). */
struct recent_exec {
        const char *session_id;
        const char *tenant; /* the session's owner; NULL or "" = "default" */
        const char *profile;
        const char *language; /* NULL: python */
        const char *code;
        bool one_shot;
        /* The execution object of DESIGN.md section 4 (borrowed): status, usage, stdout,
         * stderr, error, files and execution_count are read from it. */
        const json_t *result;
};

/* A ring of capacity entries (1..RECENT_CAPACITY_MAX). Returns 0 or -ENOMEM / -EINVAL. Caller
 * frees with recent_free(). */
#define RECENT_CAPACITY_MAX 10000
int recent_new(unsigned capacity, struct recent **ret_recent);
struct recent *recent_free(struct recent *r);

/* Records an execution that just ended, replacing the oldest entry when the ring is full.
 * Accepts a NULL ring (does nothing). */
void recent_add(struct recent *r, const struct recent_exec *e);

/* The newest entries first, at most limit of them, as a new array of
 * {seq, finished_at (RFC 3339, ms), session_id, profile, language, one_shot, status, wall_ms,
 *  cpu_ms, peak_memory_bytes, execution_count, code, code_bytes, code_truncated, stdout,
 *  stderr, error, files} (seq grows by one per execution since the daemon started; *_bytes is
 * the full size before the cut). With session_id set, only that session's. Only the
 * executions of sessions the calling thread's tenant owns (tenant_scope_sees()). NULL on
 * ENOMEM. */
json_t *recent_list(struct recent *r, unsigned limit, const char *session_id);

/* Executions recorded since the daemon started (the next seq is this plus one). */
uint64_t recent_count(struct recent *r);
