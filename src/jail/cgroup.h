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
