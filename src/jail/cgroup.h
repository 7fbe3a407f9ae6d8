/* Resource caps for one sandbox: memory, pids and CPU, on cgroup v2 or, where the host still has
 * those controllers on v1 (a hybrid mount), on the v1 hierarchies. The daemon (or `airlock run`)
 * creates one cgroup per sandbox under a parent it owns, attaches the sandbox's first process
 * before any user code runs, reads usage from it and removes it at teardown.
 *
 * Layout chosen by cgroup_probe():
 *  - v2: <unified mount>/<parent>/<name>, where <parent> is the caller's own cgroup (from
 *    /proc/self/cgroup) when its cgroup.subtree_control already enables memory and pids, or
 *    when systemd delegated it (Delegate=yes; the caller then moves into its leaf "daemon",
 *    see cgroup_v2_delegate()), and otherwise "<unified mount>/airlock" (created, controllers
 *    enabled in the root's subtree_control as needed).
 *  - v1: one directory per controller, <controller mount>/<caller's cgroup for that
 *    controller>/<name>, for memory, pids, cpu, cpuacct and freezer (cpuacct and freezer are
 *    optional). Creating under the caller's own cgroup keeps sandboxes inside any cap that
 *    contains the caller, such as the test suite's outer cap.
 * An explicit parent path (AIRLOCK_CGROUP_PARENT, relative to each hierarchy's mount) overrides
 * the caller's cgroup. A daemon then adds a cgroup of its own below that parent
 * (cgroup_root_enter()) and makes its sandboxes there, so that sweeping its leftovers never
 * touches another daemon's sandboxes: cgroup v1 shares each controller's tree host-wide. */
#pragma once

#include "base/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_version {
        CGROUP_NONE = 0, /* no usable memory+pids controllers */
        CGROUP_V1 = 1,
        CGROUP_V2 = 2,
};

enum cgroup_v1_controller {
        CG1_MEMORY,
        CG1_PIDS,
        CG1_CPU,
        CG1_CPUACCT,
        CG1_FREEZER,
        CG1_COUNT,
};

/* Where cgroups are made. Filled by cgroup_probe(); released with cgroup_root_done(). */
struct cgroup_root {
        enum cgroup_version version;
        /* v2: absolute path of the parent directory under which sandboxes are created. */
        char *v2_parent;
        /* v1: absolute parent directory per controller; NULL where the controller is absent
         * (memory and pids are required for CGROUP_V1, the others optional). */
        char *v1_parent[CG1_COUNT];
};

struct cgroup_limits {
        uint64_t memory_max;    /* bytes; 0 = no limit. Swap is capped to 0 as well. */
        uint64_t pids_max;      /* 0 = no limit */
        uint32_t cpu_millicpus; /* 1000 = one full CPU; 0 = no limit */
};

struct cgroup_usage {
        uint64_t memory_peak; /* bytes; 0 if the kernel cannot tell */
        uint64_t memory_current;
        uint64_t cpu_usec;  /* total CPU time of every process that ran in the cgroup */
        uint64_t oom_kills; /* processes killed by the OOM killer in this cgroup */
        bool has_peak;
        bool has_cpu;
};

struct cgroup;

/* The leaf a daemon moves itself into inside a delegated cgroup v2 directory. */
#define CGROUP_V2_DAEMON_LEAF "daemon"

/* Finds the cgroup hierarchy to use. proc_root is "/proc" normally; tests pass a directory with
 * a fake "self/mountinfo" and "self/cgroup". parent_override is NULL or a path relative to each
 * hierarchy's mount. Returns 0 (with version CGROUP_NONE when no usable controllers exist),
 * or -errno with a reason in err. */
int cgroup_probe(const char *proc_root, const char *parent_override, struct cgroup_root *ret_root,
                 struct airlock_error *err);
void cgroup_root_done(struct cgroup_root *root);

/* Whether systemd marked the cgroup v2 directory dir as delegated to its unit (Delegate=yes):
 * the extended attribute trusted.delegate or user.delegate is "1" (systemd 251 and later). */
bool cgroup_v2_is_delegated(const char *dir);

/* Takes over the delegated cgroup v2 directory dir: makes dir/<leaf> (a single path
 * component), moves every process of dir/cgroup.procs into it, and enables memory, pids and,
 * where dir/cgroup.controllers offers it, cpu in dir/cgroup.subtree_control, so that cgroups
 * made in dir beside the leaf get those controllers. v2 allows that only once no process lives
 * in dir itself ("no internal processes"). Returns 0; -EOPNOTSUPP when dir/cgroup.controllers
 * lacks memory or pids; -EINVAL for a bad leaf name; or -errno, each with err set. Processes
 * moved before a failure stay in the leaf. Takes a path so that tests can pass a fake tree. */
int cgroup_v2_delegate(const char *dir, const char *leaf, struct airlock_error *err);

/* Makes the cgroup `name` (a single path component) below each of base's parent directories,
 * or reuses it where it exists, and fills ret_scoped with a root whose parents are those
 * cgroups (on v2 with memory, pids and, where offered, cpu enabled for its children). A daemon
 * creates its sandboxes through such a root, so that what it makes, and what
 * cgroup_reap_stale() on that root sees, is its own alone. Returns 0, -EINVAL for a bad name,
 * -EOPNOTSUPP without a hierarchy, or -errno with err set. Release with cgroup_root_done(). */
int cgroup_root_enter(const struct cgroup_root *base, const char *name,
                      struct cgroup_root *ret_scoped, struct airlock_error *err);

/* Removes the parent directories of a root made by cgroup_root_enter(), each only if it is
 * empty (the kernel refuses otherwise). Returns 0 (also when they are gone already), or the
 * first -errno (-EBUSY or -ENOTEMPTY while cgroups are left in one). */
int cgroup_root_remove(const struct cgroup_root *scoped);

/* Creates the cgroup `name` (a single path component) under root and applies limits.
 * Returns 0, -EEXIST if it exists already, -EINVAL for a bad name, or -errno with err set.
 * Caller frees with cgroup_free() after cgroup_destroy(). */
int cgroup_create(const struct cgroup_root *root, const char *name,
                  const struct cgroup_limits *limits, struct cgroup **ret_cg,
                  struct airlock_error *err);

/* Writes limits into an already existing cgroup directory (one per v1 controller, or the one
 * v2 directory). dirfds are indexed like enum cgroup_v1_controller for v1 (-EBADF where
 * absent); for v2 only dirfds[0] is used. Exposed for unit tests against a fake tree. */
int cgroup_apply_limits(enum cgroup_version version, const int dirfds[CG1_COUNT],
                        const struct cgroup_limits *limits, struct airlock_error *err);

/* Moves pid into the cgroup (every v1 controller). Returns 0 or -errno. */
int cgroup_attach(struct cgroup *cg, pid_t pid);

/* Reads usage; fields the kernel does not offer stay 0 with has_* false. Returns 0 or -errno. */
int cgroup_read_usage(struct cgroup *cg, struct cgroup_usage *ret_usage);

/* Reads the counters alone (cpu_usec and has_cpu, oom_kills; the memory fields stay 0 with
 * has_peak false): what an execution's usage is the difference of, read before it. Half the
 * reads of cgroup_read_usage(). Returns 0 or -errno. */
int cgroup_read_counters(struct cgroup *cg, struct cgroup_usage *ret_usage);

/* Parses usage out of control files of an existing directory, as cgroup_read_usage() does.
 * Exposed for unit tests against a fake tree. */
int cgroup_read_usage_at(enum cgroup_version version, const int dirfds[CG1_COUNT],
                         struct cgroup_usage *ret_usage);

/* Resets the peak-memory watermark so that the next read reports the peak since now
 * (v1 memory.max_usage_in_bytes, v2 memory.peak on kernels that allow the reset). Returns 0,
 * or -EOPNOTSUPP when the kernel cannot reset it. */
int cgroup_reset_peak(struct cgroup *cg);

/* Kills every process in the cgroup: cgroup.kill on v2 when available, otherwise freeze (v1
 * freezer if present), SIGKILL each listed pid until the list is empty, thaw. Returns 0 or
 * -errno. */
int cgroup_kill_all(struct cgroup *cg);

/* Removes the cgroup directories, retrying briefly while the kernel still reports tasks
 * (-EBUSY). Returns 0 or -errno; safe to call twice. */
int cgroup_destroy(struct cgroup *cg);

/* Frees the handle (does not remove the directories). Accepts NULL, returns NULL. */
struct cgroup *cgroup_free(struct cgroup *cg);

/* Human-readable description of the layout, e.g. "v1 (memory, pids, cpu, cpuacct, freezer)". */
const char *cgroup_version_name(enum cgroup_version version);

/* Kills every process in the cgroups below root whose names start with prefix and removes
 * those cgroups, in every hierarchy: what a crashed daemon left, whose sandboxes may not have
 * died yet. Call it only on a root of one's own (see cgroup_root_enter()) that no other live
 * process uses, never on a parent shared with other daemons or CLIs. Returns how many were
 * removed and, in *ret_left (may be NULL), how many could not be; or -errno. */
int cgroup_reap_stale(const struct cgroup_root *root, const char *prefix, unsigned *ret_left);

/* ---- CPU weights (docs/PERFORMANCE.md, "Fairness under load") ----
 * Weights are given on cgroup v2's scale: 1-10000, default 100 (cpu.weight). On v1 they become
 * cpu.shares, 100 -> 1024 (the default of both), clamped to the kernel's 2-262144. Both rank a
 * cgroup only against its siblings. */
#define CGROUP_WEIGHT_MIN 1
#define CGROUP_WEIGHT_DEFAULT 100
#define CGROUP_WEIGHT_MAX 10000
/* An interrupted cell's session until the cell ends: ten sessions' weight, to stop in time. */
#define CGROUP_WEIGHT_INTERRUPTED 1000
#define CGROUP_SHARES_MIN 2
#define CGROUP_SHARES_MAX 262144
/* The v1 cpu cgroup the daemon's own threads move into: "<scope>.daemon", beside its scope. */
#define CGROUP_DAEMON_CPU_SUFFIX ".daemon"

/* weight (v2 scale) as v1 cpu.shares. */
uint64_t cgroup_weight_to_shares(uint32_t weight);

/* Writes the CPU weight of an existing cgroup (v2 cpu.weight in dirfds[0], v1 cpu.shares in
 * dirfds[CG1_CPU]). Returns 0, -EINVAL for a weight outside 1-10000, -ENOENT without a cpu
 * controller there, or -errno. Exposed for unit tests against a fake tree. */
int cgroup_set_cpu_weight_at(enum cgroup_version version, const int dirfds[CG1_COUNT],
                             uint32_t weight);
/* The same on a sandbox's cgroup. */
int cgroup_set_cpu_weight(struct cgroup *cg, uint32_t weight);

/* The CPU time used so far by every process that ran in the cgroup, through the same cached
 * fd as cgroup_read_usage() (one pread). Returns 0, -ENOENT without cpu accounting, or -errno. */
int cgroup_read_cpu_usec(struct cgroup *cg, uint64_t *ret_usec);

/* How many threads of the cgroup are runnable now (state R in /proc/<tid>/stat): they want a
 * CPU, and a cell that does not stop while they wait was not given one. Returns the count or
 * -errno. */
int cgroup_runnable_tasks(struct cgroup *cg);

/* Writes the CPU weight of a scope made by cgroup_root_enter() (its cpu directory). */
int cgroup_root_set_cpu_weight(const struct cgroup_root *scoped, uint32_t weight);

/* The daemon's own CPU weight against its sessions. */
struct cgroup_daemon {
        char *v1_leaf; /* v1: <scope's cpu dir>.daemon, which the daemon moved into; or NULL */
        char *v1_home; /* v1: where it goes back to at exit (the scope's parent) */
        pid_t pid;
        uint32_t weight; /* 0: not applied */
};

/* Ranks the daemon (process pid) against the sessions of the scope scoped: on v1 it moves the
 * daemon's threads into the cpu cgroup <scope>.daemon, the scope's sibling, with cpu.shares of
 * weight; on v2 it writes cpu.weight in the daemon's own cgroup own_v2_dir when
 * that is the scope's sibling (the delegated layout), and otherwise returns -EOPNOTSUPP saying
 * why (v2 lets no process live beside the sessions' cgroups inside the scope, and moving the
 * daemon would move its memory charge). Returns 0 or -errno with err set. */
int cgroup_daemon_weigh(const struct cgroup_root *scoped, const char *own_v2_dir, uint32_t weight,
                        pid_t pid, struct cgroup_daemon *ret, struct airlock_error *err);
/* Moves the daemon back (v1) and removes its leaf. Idempotent. */
void cgroup_daemon_done(struct cgroup_daemon *d);
