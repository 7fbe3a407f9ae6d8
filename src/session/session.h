/* Sessions: named, stateful sandboxes that keep Python variables, a bash shell and the files
 * of /work between executions. The session manager owns the table of live sessions, a warm pool
 * per profile (so create is a hand-over), the idle reaper and the limit on live sessions. The
 * HTTP API, MCP and the CLI use only this interface.
 *
 * Threading: every function may be called from any thread. A session runs one execution at a
 * time; a second concurrent one gets -EBUSY. Objects handed out are references: release them
 * with session_unref(). */
#pragma once

#include "base/error.h"
#include "jail/jail.h"
#include "session/sandbox.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SESSION_ID_LEN 26 /* "s-" + 24 lowercase hex characters */

struct session;
struct session_manager;

struct session_manager_config {
        const struct jail_features *features; /* borrowed; must outlive the manager */
        enum jail_isolation mode;
        unsigned max_sessions; /* live sessions, pool excluded; default 64 */
        unsigned pool_size;    /* warm sessions kept per profile once it is used; 0 = none */
        uint64_t default_idle_timeout_ms; /* default 5 minutes */
        uint64_t max_idle_timeout_ms; /* largest idle_timeout_s a client may ask; default 24 h */
        uint64_t interrupt_grace_ms;  /* after SIGINT, wait this long before killing; 2000 */
        const char *state_dir;        /* where the session store lives; NULL = no store */
        const char *const *pool_profiles; /* profiles warm from the start; NULL = {"default"} */
};

/* Creates the manager and starts the warm pools. Returns 0 or -errno with err set. */
int session_manager_new(const struct session_manager_config *cfg, struct session_manager **ret_mgr,
                        struct airlock_error *err);

/* Ends every live session as lost ("the daemon shut down"), so that executions blocked in
 * them return at once, and refuses new ones. The manager stays valid until
 * session_manager_free(). */
void session_manager_shutdown(struct session_manager *mgr);

/* Kills every session and pool member, removes their cgroups and frees the manager.
 * Accepts NULL. */
void session_manager_free(struct session_manager *mgr);

struct session_create_options {
        const char *profile;      /* NULL = "default" */
        uint64_t idle_timeout_ms; /* 0 = the manager's default */
        char *const *env;         /* NULL or "NAME=value" strings added to the environment */
};

/* Creates a session (taking a warm one when the pool has it). Returns 0 with a new reference
 * in *ret_session; -ENOENT for an unknown profile, -EINVAL for bad options (err names the
 * field), -EUSERS when the live-session limit is reached (err says the limit), or -errno. */
int session_create(struct session_manager *mgr, const struct session_create_options *opts,
                   struct session **ret_session, struct airlock_error *err);

/* Finds a live session by id. Returns 0 with a new reference, or -ENOENT. Sessions that ended
 * (lost, idle, destroyed) are not found; use session_manager_describe_ended() for those. */
int session_lookup(struct session_manager *mgr, const char *id, struct session **ret_session);

/* Ends a session: kills its processes, removes its cgroup and workspace. Returns 0 or -ENOENT.
 * An execution running in it ends with status "killed" and state "lost". */
int session_destroy(struct session_manager *mgr, const char *id);

/* The live sessions, as an array of session_describe() objects. New reference. */
json_t *session_list(struct session_manager *mgr);

/* If id names a session that ended, a new object {id, state: "lost"|"ended", reason} telling
 * why (timeout not stopped, oom, crash, idle, destroyed); else NULL. Lets the API answer the
 * next call on a lost session clearly (404 with the reason) rather than a bare not-found. */
json_t *session_manager_describe_ended(struct session_manager *mgr, const char *id);

/* The profiles the manager can start, as the objects GET /v1/profiles returns. */
json_t *session_manager_profiles(struct session_manager *mgr);

/* Releases a reference. Accepts NULL. */
void session_unref(struct session *s);

const char *session_id(const struct session *s);

/* {id, profile, state: "idle"|"busy", created_at, last_used_at (RFC 3339), idle_timeout_s,
 *  execution_count, usage: {cpu_ms, peak_memory_bytes, memory_limit_bytes}}. New reference. */
json_t *session_describe(struct session *s);

/* Runs one cell (req->language "python" or "bash"). On success *ret_result is a new execution
 * object of DESIGN.md section 4 including "state": "preserved" or "lost". A timeout first
 * interrupts the cell (KeyboardInterrupt / SIGINT to bash); if it stops within the grace period
 * the session lives ("preserved"), otherwise it is killed ("lost") and ends. Returns 0,
 * -EBUSY if another execution runs (409), -ENOENT if the session ended meanwhile, or -errno.
 * req->sink, when set, receives output as it is produced (for streaming). */
int session_execute(struct session *s, const struct exec_request *req, json_t **ret_result,
                    struct airlock_error *err);

/* Interrupts the running cell as a timeout would, keeping the session when the cell stops.
 * Returns 0 (also when nothing runs: then it does nothing), or -ENOENT. */
int session_interrupt(struct session *s);

/* Files in the session's /work. Read data is NUL-terminated past *ret_len (it may contain NULs
 * itself), so text callers may use it as a string. Paths are relative to /work, use '/' separators,
 * and may not contain "..", empty components, NUL bytes or a leading '/'; every component is
 * resolved beneath /work without following symlinks (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so
 * nothing outside /work is ever touched. -EINVAL for a bad path, -ENOENT, -EISDIR, -ENOTDIR, -EFBIG
 * over max_bytes or the workspace size, -ELOOP when a component is a symlink. */
int session_file_read(struct session *s, const char *path, size_t max_bytes, char **ret_data,
                      size_t *ret_len, struct airlock_error *err);
int session_file_write(struct session *s, const char *path, const void *data, size_t len,
                       struct airlock_error *err);
int session_file_delete(struct session *s, const char *path, struct airlock_error *err);
/* {"dir": path, "entries": [{"name", "path", "type": "file"|"directory"|"symlink"|"other",
 *  "size", "modified_at"}]} for the directory path ("" = /work). */
int session_file_list(struct session *s, const char *dir, json_t **ret_listing,
                      struct airlock_error *err);

/* One-shot: a fresh session for one execution, then destroyed (POST /execute). */
int session_run_once(struct session_manager *mgr, const struct session_create_options *opts,
                     const struct exec_request *req, json_t **ret_result,
                     struct airlock_error *err);
