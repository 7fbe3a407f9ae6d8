/* Steps of the sandbox setup that run inside the freshly cloned child. Each returns 0 or -errno
 * and, on failure, names the failing step in *ret_step (a static string) so the parent can say
 * exactly what broke. None of them allocates: the child may come from a multi-threaded parent,
 * where another thread could have held the allocator's lock at clone time. */
#pragma once

#include "jail/jail.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdint.h>

/* Host uids: each sandbox gets H0 (its setup root) and H1 (the user code's uid), derived from the
 * child's host pid, so they are unique among live sandboxes without any shared state. */
#define JAIL_UID_BASE 0x60000000u
#define JAIL_UID_SPAN (2u * 4194304u) /* two ids for each possible pid (pid_max <= 2^22) */
#define JAIL_SANDBOX_UID 1000u
/* Zygotes' session ids start here (above the one-shot range, below 2^32 for every block). */
#define JAIL_ZYGOTE_UID_BASE 0x70000000u

/* Inside the sandbox. */
#define JAIL_RUNNER_PATH "/.airlock/runner"
#define JAIL_NEWROOT "/tmp"

/* Builds the new root under JAIL_NEWROOT, mounts proc, pivots into it and makes it read-only.
 * Must run as the mapped root of a fresh user+mount+pid namespace. */
int mount_build_root(const struct jail_features *f, const struct jail_config *cfg,
                     const char **ret_step);

/* Restricts the filesystem (ro everywhere, rw in /work, /tmp, /dev/shm), TCP and scopes at the
 * highest Landlock ABI the kernel offers: TCP bind is denied on every port, TCP connect on every
 * port but connect_ports (n_connect_ports of them; none: denied everywhere). abi 0 means
 * Landlock is absent: returns 0. */
int landlock_apply(int abi, const uint16_t *connect_ports, size_t n_connect_ports,
                   const char **ret_step);

/* Returns the Landlock ABI version the kernel offers, 0 if none. */
int landlock_abi_version(void);

/* Drops every credential: supplementary groups, bounding and ambient capabilities, locks the
 * securebits, switches to uid/gid `uid` and clears the remaining capability sets. */
int caps_drop_to(uid_t uid, gid_t gid, const char **ret_step);

/* Sets the rlimits of ISOLATION.md section 1 step 9 from cfg. */
int caps_set_rlimits(const struct jail_config *cfg, const char **ret_step);

/* Credential changes for a child made by a raw clone() of a multi-threaded parent. glibc's
 * setresuid(), setresgid() and setgroups() signal every thread glibc believes the process has
 * and wait for each to follow (POSIX per-process credentials); in such a child those threads
 * exist only in the parent, so the wrappers would wait forever. The raw syscalls change the
 * calling thread, which is the whole child. */
static inline int child_setresuid(uid_t u)
{
        return syscall(SYS_setresuid, u, u, u) < 0 ? -errno : 0;
}

static inline int child_setresgid(gid_t g)
{
        return syscall(SYS_setresgid, g, g, g) < 0 ? -errno : 0;
}

static inline int child_setgroups_none(void)
{
        return syscall(SYS_setgroups, 0, NULL) < 0 ? -errno : 0;
}

/* Unblocks every signal and restores every handler to its default. */
void jail_child_reset_signals(void);

/* Moves fds into place: 0 = /dev/null, 1/2 = out_fd/err_fd, 3 = ctl_fd and, when status_fd is
 * given, 4 = *status_fd (close-on-exec; *status_fd is updated). Every other fd is closed
 * (close_rest) or marked close-on-exec (when an execve follows). */
int jail_child_setup_fds(int out_fd, int err_fd, int ctl_fd, int *status_fd, bool close_rest,
                         const char **ret_step);

/* Writes 0 to <proc_root>/sys/user/max_*_namespaces of the caller's user namespace. */
int jail_child_write_ns_limits(const char *proc_root);
