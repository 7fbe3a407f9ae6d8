/* State shared by the session module's files. */
#pragma once

#include "base/error.h"
#include "jail/jail.h"
#include "profile/profile.h"

#include <jansson.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sandbox {
        const struct profile *profile;
        enum jail_isolation mode;
        struct jail *jail;
        char *runner_path;
        char **envp;
        char *workdir; /* process/none modes: the host directory used as /work */
        uint64_t memory_bytes;
        struct zygote *zygote; /* forked sessions: the zygote (a reference) and our slot */
        unsigned slot;
        int runner_pidfd; /* the Python process, when it is not the first one; else -EBADF */
        int status_fd;    /* forked sessions: where their init reports how the Python ended */
        bool alive;
        atomic_bool interrupted; /* a SIGINT was sent during the current cell */
        bool killed;             /* killed by the driver or its owner, not dead by itself */
        int exec_count;
        /* control-socket frame being assembled */
        char *rbuf;
        size_t rlen, rsize, rwant;
        size_t frame_max; /* largest frame accepted from the runner */
};

struct sandbox *sandbox_free(struct sandbox *sb);
static inline void sandbox_freep(struct sandbox **sb)
{
        sandbox_free(*sb);
}

struct zygote;
struct cgroup_limits;

/* Zygotes (zygote.c): one per profile, forking sessions. */
int zygote_start(const struct jail_features *features, const struct profile *p, char *const *envp,
                 const char *runner_path, struct zygote **ret_z, struct airlock_error *err);
int zygote_fork(struct zygote *z, const char *name, const struct cgroup_limits *limits,
                struct sandbox **ret_sb, struct airlock_error *err);
bool zygote_is_alive(struct zygote *z);
/* The zygote's number, unique among the zygotes of this daemon and never 0. */
unsigned zygote_generation(const struct zygote *z);
/* Whether the zygote has forked max_forks sandboxes or is max_age_ms old (0: no such limit),
 * so that its address-space layout and hash secret should be retired. */
bool zygote_is_due(struct zygote *z, unsigned max_forks, uint64_t max_age_ms);
struct zygote *zygote_ref(struct zygote *z);
void zygote_unref(struct zygote *z);
void zygote_release_slot(struct zygote *z, unsigned slot);

/* Wraps a session forked by a zygote (takes ownership of jail, the zygote reference and
 * runner_pidfd, also on failure). */
int sandbox_adopt(const struct profile *p, struct jail *jail, struct zygote *z, unsigned slot,
                  int runner_pidfd, int status_fd, struct sandbox **ret_sb,
                  struct airlock_error *err);

/* The generation of the zygote sb was forked from, or 0 for a sandbox of its own exec. */
unsigned sandbox_zygote_generation(const struct sandbox *sb);

/* The session environment a profile's runner gets (caller frees with strv_free). */
int sandbox_build_env(const struct profile *p, const char *workdir, char ***ret_envp);

json_t *profile_imports_json(const struct profile *p);
json_t *profile_preload_json(const struct profile *p);
int fcntl_nonblock(int fd);

/* The session store (store.c): SQLite in the state directory. Every function accepts a NULL
 * store and then does nothing (or returns NULL / an empty array). A row is the object
 * {id, profile, created_at, state: "live"|"stopped", stopped_at, delete_at, info} (times in
 * seconds since the epoch or null; info the object the session layer stored). */
struct store;
int store_open(const char *state_dir, struct store **ret_store, struct airlock_error *err);
void store_close(struct store *st);
int store_session_created(struct store *st, const char *id, const char *profile, const char *info);
int store_session_update(struct store *st, const char *id, const char *info);
int store_session_stopped(struct store *st, const char *id, long long stopped_at,
                          long long delete_at, const char *info);
int store_session_live(struct store *st, const char *id);
int store_session_ended(struct store *st, const char *id, bool lost, const char *reason);
/* Sessions that were live when the daemon went away become stopped now. */
int store_recover(struct store *st, long long now, long long delete_after_s);
json_t *store_get(struct store *st, const char *id); /* a live or stopped row, or NULL */
json_t *store_list_stopped(struct store *st);        /* an array of rows */
json_t *store_due_for_deletion(struct store *st, long long now, unsigned max);
json_t *store_describe_ended(struct store *st, const char *id);
int store_prune(struct store *st, long long older_than_s);

/* Workspace helpers shared by workspace.c and workspace-tree.c. workspace_openat2() opens path
 * beneath dirfd with RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV (and O_NOFOLLOW,
 * O_CLOEXEC); returns an fd or -errno. workspace_open() opens the sandbox's /work. Between
 * workspace_fsid_enter() and _leave() the calling thread creates files as the sandbox's user
 * (namespaces mode; see workspace.c). workspace_remove_tree_at() empties a directory. */
struct fsid {
        bool switched;
};
int workspace_openat2(int dirfd, const char *path, int flags, mode_t mode);
int workspace_open(struct sandbox *sb, struct airlock_error *err);
void workspace_fsid_enter(struct sandbox *sb, struct fsid *f);
void workspace_fsid_leave(struct fsid *f);
int workspace_remove_tree_at(int dirfd, int depth);
/* Copies in to out with read/write, at most limit bytes (-EFBIG past it); *ret_copied (may be
 * NULL) gets the count. Returns 0 or -errno. */
int workspace_copy_fd(int in, int out, uint64_t limit, uint64_t *ret_copied);

/* process/none modes: a fresh private directory on the host to serve as /work. */
int workspace_make_host_dir(char **ret_path, struct airlock_error *err);
int workspace_remove_host_dir(const char *path);
