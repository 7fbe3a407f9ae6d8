/* State shared by the session module's files. */
#pragma once

#include "base/error.h"
#include "egress/egress.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "profile/profile.h"
#include "vm/vm.h"

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
        /* Bytes the daemon itself wrote into /work while a cell ran (charged to the daemon's
         * cgroup, so the session's own usage does not show them): counted against its memory
         * limit by the next upload's check. */
        uint64_t daemon_written;
        uint64_t memory_bytes;
        struct zygote *zygote; /* forked sessions: the zygote (a reference) and our slot */
        unsigned slot;
        int runner_pidfd; /* the Python process, when it is not the first one; else -EBADF */
        int status_fd;    /* forked sessions: where their init reports how the Python ended */
        int vm_sig_fd;    /* microVM sessions: the guest's signal port (vm_interrupt); or -EBADF */
        struct vm_files *vm_files; /* microVM sessions: the file channel (vm/files.h); or NULL */
        int vm_qmp_fd;             /* microVM sessions: QEMU's QMP monitor (vm_save); or -EBADF */
        /* microVM sessions whose guest ended during a cell: how its init said the runner ended
         * (vm.h, vm_exit_report()); vm_exit_known false when it said nothing. */
        struct vm_exit vm_exit;
        bool vm_exit_known;
        bool alive;
        atomic_bool interrupted;     /* a SIGINT was sent during the current cell */
        atomic_bool weight_restored; /* the daemon wrote its CPU weight (fair.h) */
        atomic_bool weight_boosted;  /* interrupted: CGROUP_WEIGHT_INTERRUPTED until it ends */
        atomic_bool tools_cancel;    /* the cell is interrupted or the sandbox killed: a Code Mode
                                      * call under way ends now, and no new one starts */
        bool killed;                 /* killed by the driver or its owner, not dead by itself */
        int exec_count;
        /* control-socket frame being assembled */
        char *rbuf;
        size_t rlen, rsize, rwant;
        /* The id of the request waiting for its answer ("" when none): each request carries a
         * random one, and a frame that does not repeat it answers nothing and is dropped. */
        char want_id[17];
        unsigned long long dropped; /* frames dropped since the last request */
        size_t frame_max;           /* largest frame accepted from the runner */
        size_t last_frame_len;      /* the size of the frame frame_read() returned last */
        bool in_exec;               /* an exec runs: its Code Mode frames are answered */
        /* Its cgroup told an execution's CPU time and peak memory: the runner is no longer asked
         * for its own figures (getrusage), the fallback of a host without those controllers. */
        bool cgroup_usage;
        /* The profile layer it has mounted (docs/PROFILES.md): the layer generation of its
         * profile slot when it started (a pool member of another one is never handed out),
         * and, for a sandbox of its own exec, its LOCK_SH on the layer (layer.h; a forked one's
         * zygote holds that). -EBADF: none. */
        unsigned layer_gen;
        int layer_fd;
        /* Its egress proxy listeners (network "allow" profiles; sandbox_set_egress), closed
         * with it; each execution's usage gets what went through them. NULL = no network. */
        struct egress_session *egress;
};

struct sandbox *sandbox_free(struct sandbox *sb);
static inline void sandbox_freep(struct sandbox **sb)
{
        sandbox_free(*sb);
}

struct zygote;
struct cgroup_limits;

/* Zygotes (zygote.c): one per profile, forking sessions. */
/* layer_dir (may be NULL, borrowed) is the profile's layer, bound into the zygote and from
 * there into each of its sessions. */
int zygote_start(const struct jail_features *features, const struct profile *p, char *const *envp,
                 const char *runner_path, const char *layer_dir, struct zygote **ret_z,
                 struct airlock_error *err);
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

/* The session environment a profile's runner gets (caller frees with strv_free); layer_dir
 * (may be NULL) is the profile's layer, whose site-packages goes on PYTHONPATH. in_vm: for a
 * microVM guest, whose proxy variables name VM_GUEST_HOST rather than 127.0.0.1. */
int sandbox_build_env(const struct profile *p, const char *workdir, const char *layer_dir,
                      bool in_vm, char ***ret_envp);

/* What a profile's network puts into its sandboxes' jail (jail_config's hosts_extra and
 * connect_ports) or guest (vm_config's hosts_extra): the /etc/hosts lines of the forwarded
 * names (their addresses those of net, policy.h), and the TCP ports code may connect to. A NULL
 * network, or mode none, gives neither. */
struct sandbox_egress {
        char *hosts_extra; /* NULL: none */
        uint16_t ports[EGRESS_RULES_MAX + 2];
        size_t n_ports;
};
/* Fills *ret from network (borrowed). Returns 0 or -ENOMEM; release with
 * sandbox_egress_done() either way. */
int sandbox_egress_init(const struct egress_policy *network, enum egress_forward_net net,
                        struct sandbox_egress *ret);
void sandbox_egress_done(struct sandbox_egress *e);

json_t *profile_imports_json(const struct profile *p);
json_t *profile_preload_json(const struct profile *p);
int fcntl_nonblock(int fd);

/* The cgroups of one session manager (scope.c): a parent "airlock-d-<id>" of its own in each
 * hierarchy, below which every sandbox of the manager gets its cgroup. With a state directory
 * the id is kept in <state_dir>/cgroup-id, so that the next daemon there sweeps what a crashed
 * one left; without one it is random. Another daemon's cgroups are never below it. */
#define SCOPE_NAME_PREFIX "airlock-d-"
#define SCOPE_ID_LEN 32
struct scope {
        /* The caller's features with cgroups moved into the scope: pass these to the jail. */
        struct jail_features features;
        char name[sizeof(SCOPE_NAME_PREFIX) + SCOPE_ID_LEN];
        int lock_fd;     /* flock on <state_dir>/cgroup-id, held for our lifetime; or -EBADF */
        bool is_owner;   /* no other live daemon on the state directory: we sweep and remove */
        bool is_lasting; /* kept in a state directory, so leftovers of a predecessor may exist */
        struct cgroup_daemon daemon; /* the daemon's own CPU weight (scope_weigh_daemon) */
};
/* Makes (or finds) the scope and its cgroups. Returns 0 or -errno with err set (a malformed or
 * foreign id file, a cgroup that cannot be made). Release with scope_close(), also after a
 * failure. */
int scope_open(const struct jail_features *f, const char *state_dir, struct scope *ret_scope,
               struct airlock_error *err);
/* Kills what is left below the scope (a crashed predecessor's sandboxes) and removes their
 * cgroups, when no other live daemon uses the state directory. Returns how many, or -errno. */
int scope_sweep(struct scope *s);
/* Removes the scope's cgroups if they are empty and releases everything. Idempotent. */
void scope_close(struct scope *s);
/* Caps the memory of every sandbox of the scope together (the kernel's limit on the scope's
 * own cgroup: past it, the OOM killer picks within the scope). Returns 0 or -errno with err
 * set. */
int scope_limit_memory(struct scope *s, uint64_t bytes, struct airlock_error *err);
/* The memory every sandbox of the scope holds now. Returns 0 or -errno. */
int scope_memory_usage(struct scope *s, uint64_t *ret_bytes);
/* The memory limit of the scope's own cgroup (scope_limit_memory), or 0 for none. */
int scope_memory_limit(struct scope *s, uint64_t *ret_bytes);
/* Gives the daemon's own threads the CPU weight `weight` against the scope's sandboxes
 * (cgroup_daemon_weigh()). Returns 0, or -errno with err saying why it cannot. */
int scope_weigh_daemon(struct scope *s, uint32_t weight, struct airlock_error *err);

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
/* {id, state, reason, tenant} of an ended session, or NULL. */
json_t *store_describe_ended(struct store *st, const char *id);
int store_prune(struct store *st, long long older_than_s);

/* Workspace helpers shared by workspace.c and workspace-tree.c. workspace_openat2() opens path
 * beneath dirfd with RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV (and O_NOFOLLOW,
 * O_CLOEXEC); returns an fd or -errno. workspace_open() opens the sandbox's /work. Between
 * workspace_fsid_enter() and _leave() the calling thread creates files as the sandbox's user
 * (namespaces mode; see workspace.c). */
struct fsid {
        bool switched;
};
int workspace_openat2(int dirfd, const char *path, int flags, mode_t mode);
int workspace_open(struct sandbox *sb, struct airlock_error *err);
void workspace_fsid_enter(struct sandbox *sb, struct fsid *f);
void workspace_fsid_leave(struct fsid *f);
struct tree_removal;
/* Removes the entry name of parent: a file or symlink, or a directory with everything in it.
 * The walk follows nothing (each name is opened beneath its directory with openat2, no ".."),
 * needs no recursion, and holds a bounded number of directories open: one deeper than that is
 * moved up into the directory being removed, under a temporary name (as sb's user when the
 * tree is sb's /work; sb NULL: a directory of the daemon's), and emptied from there, so no
 * chain is too deep. It stops at deadline_ns (0: none). Returns 0 when name is gone (also
 * when it was not there), -ENOTEMPTY when some of it stayed, or -errno when name cannot be
 * removed at all; *ret (may be NULL) gets the counts either way. */
int workspace_tree_remove(struct sandbox *sb, int parent, const char *name, uint64_t deadline_ns,
                          struct tree_removal *ret);
/* Words for why a removal was partial, for an error message. Static string. */
const char *workspace_tree_why(const struct tree_removal *t);
/* Copies in to out with read/write, at most limit bytes (-EFBIG past it); *ret_copied (may be
 * NULL) gets the count. Returns 0 or -errno. */
int workspace_copy_fd(int in, int out, uint64_t limit, uint64_t *ret_copied);

/* process/none modes: a fresh private directory on the host to serve as /work. */
int workspace_make_host_dir(char **ret_path, struct airlock_error *err);
int workspace_remove_host_dir(const char *path);
