/* Sessions: named, stateful sandboxes that keep Python variables, a bash shell and the files
 * of /work between executions. A session is idle, busy (an execution runs) or stopped (no
 * process, no memory: its state is on disk, see snapshot.h). The session manager owns the table
 * of live sessions, a warm pool per profile (so create is a hand-over), the worker that stops
 * idle sessions, checkpoints quiet ones and deletes long-stopped ones, and the limit on live
 * sessions. Stopped sessions live only in the store; any call that needs a sandbox resumes
 * them. The HTTP API, MCP and the CLI use only this interface.
 *
 * Threading: every function may be called from any thread. A session runs one execution at a
 * time; a second concurrent one gets -EBUSY. Objects handed out are references: release them
 * with session_unref(). */
#pragma once

#include "base/error.h"
#include "base/node-id.h"
#include "jail/jail.h"
#include "session/sandbox.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SESSION_ID_LEN 26 /* "s-" + 24 lowercase hex characters */
/* With a node (node-id.h), "-NODE" follows: the longest id, without its NUL. */
#define SESSION_ID_MAX (SESSION_ID_LEN + NODE_SUFFIX_MAX)

/* Parses a session id: "s-", 24 lowercase hex characters, and "-NODE" or nothing. Returns 0
 * (ret_node "") or 1 (ret_node the node's name) as node_id_split(), -EINVAL for anything
 * else. No allocation, no lock. */
int session_id_parse(const char *id, char ret_node[NODE_NAME_MAX + 1]);

struct audit;
struct egress;
struct session;
struct hub;
struct session_manager;

struct session_manager_config {
        const struct jail_features *features; /* borrowed; must outlive the manager */
        enum jail_isolation mode;
        unsigned max_sessions; /* live sessions, pool excluded; default 64 */
        unsigned pool_size;    /* warm sessions kept per profile once it is used; 0 = none */
        uint64_t default_stop_after_ms; /* idle this long, a session stops; default 5 minutes */
        uint64_t max_stop_after_ms;     /* largest stop_after_s a client may ask; default 24 h */
        uint64_t interrupt_grace_ms;    /* after SIGINT, wait this long before killing; 2000 */
        /* Where the session store and stopped sessions live. NULL = no store: sessions cannot
         * stop, and an idle one is ended instead. */
        const char *state_dir;
        uint64_t delete_after_ms;     /* a stopped session is deleted this long after; 5 days */
        uint64_t checkpoint_after_ms; /* checkpoint a session this long quiet; 0 = never */
        uint64_t max_stopped_bytes;   /* disk a stopped session may use; default 1 GiB */
        /* Memory of every sandbox together (their files in /work included), a kernel limit on
         * the daemon's own cgroup; an upload that would pass it is refused. 0 = none. */
        uint64_t max_session_memory;
        const char *const *pool_profiles; /* profiles warm from the start; NULL = {"default"} */
        /* Code Mode: the internal tools sessions' code may call (borrowed, must outlive the
         * manager); NULL = none, and `import airlock_tools` says Code Mode is off. */
        struct hub *hub;
        /* Namespaces mode: a profile's zygote is replaced in the background once it has forked
         * zygote_max_sessions sandboxes or is zygote_max_age_ms old, so that one address-space
         * layout and one Python hash secret serve few sessions (docs/SECURITY.md). 0 = the
         * default (256 sandboxes, 10 minutes); SESSION_ZYGOTE_NEVER = no such limit. */
        unsigned zygote_max_sessions;
        uint64_t zygote_max_age_ms;
        /* Executions kept in memory for GET /v1/executions and the dashboard (recent.h): 0 =
         * RECENT_CAPACITY_DEFAULT, SESSION_RECENT_OFF = none kept. */
        unsigned recent_executions;
        /* The audit log (audit.h; borrowed, must outlive the manager): sessions' lifecycle,
         * executions, file transfers and Code Mode's tool calls are written to it, and
         * executions are refused while it cannot be written under --audit-fail=refuse (-ESHUTDOWN,
         * err naming the audit failure). NULL = none. */
        struct audit *audit;
        /* The egress proxy (egress.h; borrowed, must outlive the manager) that sandboxes of
         * profiles with network "allow" get. NULL = none: such profiles cannot start. */
        struct egress *egress;
        /* Fairness under load (docs/PERFORMANCE.md): the daemon's own CPU weight against its
         * sessions' cgroups (cgroup v2's scale 1-10000; 0 = the default, 1000), and whether
         * the worker leaves every session's weight alone (fair_off) instead of lowering it for
         * sessions that used much CPU recently. */
        uint32_t daemon_cpu_weight;
        bool fair_off;
        /* Memory pressure: when less than this many bytes are free (MemAvailable, or what is
         * left under max_session_memory), new sessions are refused (503) and idle ones are
         * stopped and saved, oldest first, before the kernel's OOM killer has to pick. 0 = the
         * default (5% of the memory, at most 1 GiB); SESSION_MEMORY_PRESSURE_OFF = never. */
        uint64_t min_free_memory;
};

#define SESSION_MEMORY_PRESSURE_OFF UINT64_MAX
/* The daemon's threads weigh as much as all its sessions together: more, and a flood of
 * requests (which the daemon's threads serve at once) starves the sandboxes that answer them,
 * zygotes starting included (tests/e2e/test_api_daemon.py, zygotes under a storm of
 * connections: creates took over 20 s at 1000). */
#define SESSION_DAEMON_CPU_WEIGHT_DEFAULT 100
#define SESSION_RECENT_OFF UINT32_MAX /* for recent_executions */

#define SESSION_ZYGOTE_NEVER UINT32_MAX /* for zygote_max_sessions and zygote_max_age_ms */

/* Creates the manager and starts the warm pools. Returns 0 or -errno with err set. */
int session_manager_new(const struct session_manager_config *cfg, struct session_manager **ret_mgr,
                        struct airlock_error *err);

/* File descriptors kept free for connections, the store and file transfers: a new session is
 * refused (-EMFILE, HTTP 503) rather than take them. */
#define SESSION_FD_RESERVE 64

/* The open-file limit (RLIMIT_NOFILE) the manager needs to run cfg.max_sessions sessions: each
 * live session, warm sandbox and zygote holds a few fds in the daemon (its pipes, control
 * socket, pidfds and a directory per cgroup hierarchy), plus SESSION_FD_RESERVE and the
 * daemon's own. HTTP connections come on top. *ret_per_session (may be NULL) gets the count
 * per session. */
unsigned session_manager_fds_needed(const struct session_manager *mgr, unsigned *ret_per_session);

/* Refuses new sessions and stops every live one (interrupting running cells first), so that
 * the next daemon on the same state directory can resume them; sessions that cannot be saved
 * (or all of them, without a state directory) end as lost ("the daemon shut down"). The
 * manager stays valid until session_manager_free(). */
void session_manager_shutdown(struct session_manager *mgr);

/* Drains the node: from now on no session is created (-ESHUTDOWN, a 503 that sends the client
 * to another node), and every live session stops (saved, as POST /v1/sessions/{id}/stop does),
 * so that a daemon on the same state directory resumes it. *ret_stopped gets the ids stopped
 * (a JSON array), *ret_failed [{"id", "error"}] for those that could not be saved. Logs
 * "drain: N sessions stopped (saved): ids". interrupt: a running cell is interrupted (the
 * daemon is going away: SIGTERM) and its session saved after the interrupt grace; otherwise a
 * busy session is one that failed ("running an execution"). Returns 0 or -ENOMEM. */
int session_manager_drain(struct session_manager *mgr, bool interrupt, json_t **ret_stopped,
                          json_t **ret_failed);

/* Live sessions now, the limit, and whether the node drains. */
void session_manager_load(struct session_manager *mgr, unsigned *ret_live, unsigned *ret_max,
                          bool *ret_draining);

/* Kills every session and pool member, removes their cgroups and frees the manager.
 * Accepts NULL. */
void session_manager_free(struct session_manager *mgr);

struct session_create_options {
        const char *profile;    /* NULL = "default" */
        uint64_t stop_after_ms; /* 0 = the manager's default */
        char *const *env;       /* NULL or "NAME=value" strings added to the environment */
        /* The working directory and HOME of its code (NULL = /work): E2B's sandboxes have
         * "/home/user" (docs/E2B.md). An absolute directory that exists in the sandbox. */
        const char *home;
        bool ephemeral; /* a one-shot run: never saved to disk */
        /* Code Mode (docs/TOOLS.md): the internal tools the session's code may call (names,
         * "SERVER/" followed by "*", or "*"; NULL = the profile's code_tools), and those of
         * them needing approval that the caller approves for this session (NULL = none). */
        char *const *code_tools;
        char *const *approved_tools;
        /* Labels (borrowed; NULL = none), checked by session_metadata_check(); its default
         * execution timeout (0 = the profile's); and its lifetime: it stops this long after
         * create whatever its activity (0 = none; at most SESSION_LIFETIME_MAX_S). */
        const json_t *metadata;
        uint64_t timeout_ms;
        uint64_t lifetime_s;
        /* Its network (docs/NETWORK.md): the profile's narrowed, never widened (borrowed;
         * NULL = the profile's). */
        const json_t *network;
};

#define SESSION_METADATA_MAX 64
#define SESSION_METADATA_KEY_MAX 64
#define SESSION_METADATA_VALUE_MAX 1024
#define SESSION_LIFETIME_MAX_S (30u * 86400u)
#define SESSION_TIMEOUT_MAX_MS (3600u * 1000u)

/* Whether md is metadata a session may carry: an object of at most SESSION_METADATA_MAX
 * entries, keys of 1..SESSION_METADATA_KEY_MAX characters of [A-Za-z0-9_.-], values strings
 * of at most SESSION_METADATA_VALUE_MAX bytes; with allow_null, a value may be null (a PATCH
 * removing the key; the count is then checked after the merge). Returns 0 or -EINVAL with
 * err set ("metadata: ..."). */
int session_metadata_check(const json_t *md, bool allow_null, struct airlock_error *err);

/* What PATCH /v1/sessions/{id} changes; a has_* false leaves that field alone. */
struct session_patch {
        bool has_stop_after;
        uint64_t stop_after_ms; /* 0 < ms <= the manager's max_stop_after_ms */
        bool has_lifetime;
        uint64_t lifetime_s; /* from now; 0 = clear */
        bool has_timeout;
        uint64_t timeout_ms;    /* 0 < ms <= SESSION_TIMEOUT_MAX_MS */
        const json_t *metadata; /* merged in: a null value removes its key; NULL = no change */
};

/* Changes a live or stopped session without resuming it (a stopped one's store row is
 * updated). *ret_desc (may be NULL) gets its description after the change. Returns 0, -ENOENT,
 * -EINVAL (err names the field), -EOPNOTSUPP for a stopped session without a store, or
 * -errno. */
int session_update(struct session_manager *mgr, const char *id, const struct session_patch *patch,
                   json_t **ret_desc, struct airlock_error *err);

/* Code Mode: the internal tools the code of session id may call ({"name", "python_name",
 * "server", "description", "inputSchema", "available"}); when id is NULL or not live, those
 * the code of a new session of profile (NULL = default) could call. A new array (empty without
 * a hub), NULL when out of memory. */
json_t *session_code_tools(struct session_manager *mgr, const char *id, const char *profile);

/* Creates a session (taking a warm one when the pool has it). Returns 0 with a new reference
 * in *ret_session; -ENOENT for an unknown profile, -EINVAL for bad options (err names the
 * field), -EUSERS when the live-session limit is reached (err says the limit), or -errno. */
int session_create(struct session_manager *mgr, const struct session_create_options *opts,
                   struct session **ret_session, struct airlock_error *err);

/* Finds a session by id, resuming it if it is stopped (a fresh sandbox from its profile's
 * zygote, /work and the variables restored; the next execution reports it). Returns 0 with a
 * new reference; -ENOENT when no live or stopped session has that id (ended ones: see
 * session_manager_describe_ended()); -EUSERS at the live-session limit; -ESHUTDOWN; or -errno
 * with err set when the resume failed (the session stays stopped). err may be NULL. */
int session_lookup(struct session_manager *mgr, const char *id, struct session **ret_session,
                   struct airlock_error *err);

/* Finds a live session by id, never resuming one. Returns 0 with a new reference, or -ENOENT. */
int session_find(struct session_manager *mgr, const char *id, struct session **ret_session);

/* Whether s ended or stopped (killed, timed out, paused) since the reference was taken. */
bool session_is_gone(struct session *s);

/* Ends a session in any state: kills its processes, removes its cgroup, its workspace and
 * everything saved of it. Returns 0 or -ENOENT. An execution running in it ends with status
 * "killed" and state "lost". */
int session_destroy(struct session_manager *mgr, const char *id);

/* Stops a session now: saves it (see snapshot.h) and ends its processes. *ret_desc (may be
 * NULL) gets its session_describe() object. Stopping a stopped session does nothing. Returns
 * 0; -ENOENT; -EBUSY while an execution runs; -EOPNOTSUPP without a state directory; or,
 * when saving failed (-ENOSPC, -EFBIG over max_stopped_bytes, -EIO), -errno with err set and
 * the session still live. */
int session_stop(struct session_manager *mgr, const char *id, json_t **ret_desc,
                 struct airlock_error *err);

/* Resumes a stopped session (see session_lookup), or does nothing to a live one. *ret_desc is
 * its description plus "resumed" (bool), "lost_names" and, when part of the state was lost,
 * "resume_error". Returns as session_lookup(). */
int session_resume(struct session_manager *mgr, const char *id, json_t **ret_desc,
                   struct airlock_error *err);

/* Forks a session into n (1..SESSION_FORK_MAX) new ones, each a copy of its variables and /work
 * now, in a sandbox of its own, with its random generators reseeded. A stopped parent is
 * resumed first. *ret_sessions is a new array of the children's descriptions (each with its
 * "lost_names"). Returns 0; -ENOENT; -EINVAL for n out of range; -EBUSY while the parent runs
 * an execution; -EUSERS when n more sessions would pass the limit; or -errno with err set. */
#define SESSION_FORK_MAX 32
int session_fork(struct session_manager *mgr, const char *id, unsigned n, json_t **ret_sessions,
                 struct airlock_error *err);

/* The live and stopped sessions, as an array of session_describe() objects; state_filter is
 * NULL (all), "idle", "busy", "stopped" or "live" (idle and busy). New reference. */
json_t *session_list(struct session_manager *mgr, const char *state_filter);

/* session_list() of the sessions whose metadata has every key and value of metadata_filter
 * (an object of strings; NULL or empty: no filter). */
json_t *session_list_filtered(struct session_manager *mgr, const char *state_filter,
                              const json_t *metadata_filter);

/* The description of a live or stopped session (a stopped one is read from the store, not
 * resumed), or NULL when there is none by that id. */
json_t *session_describe_id(struct session_manager *mgr, const char *id);
/* session_describe_id() of a live session without waiting for anything, for the HTTP event
 * thread: -EAGAIN when it would have to (a lock another thread holds, or a session that is not
 * live, whose description is in the store), -ENOMEM; 0 with *ret_desc set. */
int session_describe_nowait(struct session_manager *mgr, const char *id, json_t **ret_desc);

/* If id names a session that ended, a new object {id, state: "lost"|"ended", reason} telling
 * why (timeout not stopped, oom, crash, idle, destroyed); else NULL. Lets the API answer the
 * next call on a lost session clearly (404 with the reason) rather than a bare not-found. */
json_t *session_manager_describe_ended(struct session_manager *mgr, const char *id);

/* The last executions of every session and one-shot run, newest first, at most limit (or only
 * session_id's, when it is not NULL): recent_list()'s array (recent.h). An empty array when
 * the manager keeps none (SESSION_RECENT_OFF); NULL on ENOMEM. */
json_t *session_recent_executions(struct session_manager *mgr, unsigned limit,
                                  const char *session_id);

/* The profiles the manager can start, as the objects GET /v1/profiles returns. */
json_t *session_manager_profiles(struct session_manager *mgr);

/* Writes the manager's gauges in the Prometheus text format (docs/METRICS.md) to f: sessions
 * by state, the live-session limit, the warm pools and zygotes and, when top_n > 0, the memory
 * and CPU of the top_n live sessions by memory, labelled by rank and profile (never by id).
 * Reads each live session's cgroup when top_n > 0; holds the manager's lock only to copy
 * references. Errors show in ferror(f). */
void session_manager_write_metrics(struct session_manager *mgr, FILE *f, unsigned top_n);

/* Releases a reference. Accepts NULL. */
void session_unref(struct session *s);

const char *session_id(const struct session *s);

/* {id, profile, state: "idle"|"busy"|"stopped", created_at, last_used_at (RFC 3339),
 *  stop_after_s, idle_timeout_s (its old name), stopped_at, delete_at (null unless stopped),
 *  metadata, timeout_s (null: the profile's), stops_at (RFC 3339 or null),
 *  execution_count, lost_names (not saved at the last stop or checkpoint),
 *  usage: {cpu_ms, peak_memory_bytes, memory_limit_bytes}}. New reference. */
json_t *session_describe(struct session *s);

/* What a live session's cgroup says now, read from the kernel (a few small files): a new
 * {memory_current_bytes, cpu_total_ms} (null where the kernel cannot tell), or NULL for a
 * session without a sandbox (stopped, ended) and on ENOMEM. For views that poll (the
 * dashboard's sparklines), not for the execute path. */
json_t *session_usage_now(struct session *s);

/* Runs one cell (req->language "python" or "bash"), resuming the session first if it stopped.
 * On success *ret_result is a new execution object of DESIGN.md section 4 including "state":
 * "preserved" or "lost"; the first one after a resume also has "resumed": true, "lost_names"
 * and, when part of the state was lost, "resume_error". A timeout first
 * interrupts the cell (KeyboardInterrupt / SIGINT to bash); if it stops within the grace period
 * the session lives ("preserved"), otherwise it is killed ("lost") and ends. Returns 0,
 * -EBUSY if another execution runs (409), -ENOENT if the session ended meanwhile, or -errno.
 * req->sink, when set, receives output as it is produced (for streaming). */
int session_execute(struct session *s, const struct exec_request *req, json_t **ret_result,
                    struct airlock_error *err);

/* A code context operation (sandbox_context(): "ctx_new", "ctx_del", "ctx_restart",
 * "ctx_list"), while no cell runs: -EBUSY otherwise. A stopped session is resumed first (its
 * created contexts do not survive a stop: docs/API.md, "Contexts"). */
int session_context(struct session *s, const char *op, const char *id, json_t **ret_ids,
                    struct airlock_error *err);

/* Interrupts the running cell as a timeout would, keeping the session when the cell stops.
 * Returns 0 (also when nothing runs, or the session stopped: then it does nothing), or
 * -ENOENT. */
int session_interrupt(struct session *s);

/* Files in the session's /work. Read data is NUL-terminated past *ret_len (it may contain NULs
 * itself), so text callers may use it as a string. Paths are relative to /work, use '/' separators,
 * and may not contain "..", empty components, NUL bytes or a leading '/'; every component is
 * resolved beneath /work without following symlinks (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so
 * nothing outside /work is ever touched. -EINVAL for a bad path, -ENOENT, -EISDIR, -ENOTDIR, -EFBIG
 * over max_bytes or the workspace size, -ELOOP when a component is a symlink. A stopped session
 * is resumed first; a write or delete is copied to the session's saved files before it
 * returns, so it outlives a crash of the daemon. */
int session_file_read(struct session *s, const char *path, size_t max_bytes, char **ret_data,
                      size_t *ret_len, struct airlock_error *err);
/* A read-only fd of the file (caller closes) and its size, to stream it with constant memory:
 * the same rules and errors as session_file_read. */
int session_file_open(struct session *s, const char *path, size_t max_bytes, int *ret_fd,
                      uint64_t *ret_size, struct airlock_error *err);
int session_file_write(struct session *s, const char *path, const void *data, size_t len,
                       struct airlock_error *err);
/* A directory is deleted with everything in it, for at most timeout_ms (0: the most,
 * WORKSPACE_DELETE_TIME_MAX_MS); -ENOTEMPTY when some of it stayed (a partial delete:
 * *ret_removal, which may be NULL, counts what went and what stayed, and err says why). */
int session_file_delete(struct session *s, const char *path, uint64_t timeout_ms,
                        struct tree_removal *ret_removal, struct airlock_error *err);
/* {"dir": path, "entries": [{"name", "path", "type": "file"|"directory"|"symlink"|"other",
 *  "size", "modified_at"}]} for the directory path ("" = /work). */
int session_file_list(struct session *s, const char *dir, json_t **ret_listing,
                      struct airlock_error *err);

/* One-shot: a fresh session for one execution, then destroyed (POST /execute). */
int session_run_once(struct session_manager *mgr, const struct session_create_options *opts,
                     const struct exec_request *req, json_t **ret_result,
                     struct airlock_error *err);

/* The files of a one-shot run (docs/API.md, "One-shot files"). */
struct run_once_file {
        const char *path; /* relative to /work, checked as session_file_write() checks it */
        const void *data;
        size_t len;
};
#define RUN_ONCE_FILE_OUT_MAX (4u << 20)   /* content returned per file */
#define RUN_ONCE_FILES_OUT_MAX (16u << 20) /* and in all */
struct run_once_files {
        const struct run_once_file *in; /* written into /work before the code runs */
        size_t n_in;
        /* Called for each file the code created or changed (entry: its object in the result's
         * "files", borrowed, for the callback to add to), with its content, or with data NULL
         * and omitted saying why it is not given (over RUN_ONCE_FILE_OUT_MAX, past
         * RUN_ONCE_FILES_OUT_MAX in all, not a regular file, unreadable). Returns 0 or -errno
         * (-ENOMEM), which fails the run. NULL: no contents are read. */
        int (*on_file)(void *userdata, json_t *entry, const char *data, size_t len,
                       const char *omitted);
        void *userdata;
};

/* session_run_once() with files in and out. An input file that cannot be written fails the
 * run before the code runs: -EINVAL ("files: ..."; a path that is not a file's) or -E2BIG (it
 * does not fit in the workspace or the session's memory), err naming the file. */
int session_run_once_files(struct session_manager *mgr, const struct session_create_options *opts,
                           const struct exec_request *req, const struct run_once_files *files,
                           json_t **ret_result, struct airlock_error *err);
