/* What the kernel offers, found once at start, and whether an isolation mode can run with it.
 * The daemon and `airlock doctor` print the result; jail_spawn() relies on it to pick code
 * paths (mount_setattr, proc's subset=pid, the cgroup layout, the Landlock ABI). */
#include "jail-internal.h"

#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

static bool kernel_at_least(const char *release, int major, int minor)
{
        int ma = 0, mi = 0;

        if (sscanf(release, "%d.%d", &ma, &mi) != 2)
                return false;
        return ma > major || (ma == major && mi >= minor);
}

/* Creating a user namespace in a throwaway child is the only reliable test: sysctls differ
 * between distributions (max_user_namespaces, unprivileged_userns_clone, AppArmor's
 * restrict_unprivileged_userns). */
static bool probe_userns(void)
{
        pid_t pid;
        int status;

        pid = (pid_t) syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
        if (pid < 0)
                return false;
        if (pid == 0)
                _exit(0);
        if (waitpid(pid, &status, 0) < 0)
                return false;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static bool probe_mount_setattr(void)
{
        /* An invalid flags value answers EINVAL where the syscall exists, ENOSYS where not. */
        long r = syscall(SYS_mount_setattr, -1, "", ~0u, NULL, 0);

        return r < 0 && errno != ENOSYS;
}

void jail_probe(struct jail_features *ret)
{
        struct airlock_error err = { { 0 } };
        struct utsname u;
        char path[4200];
        int r;

        memset(ret, 0, sizeof(*ret));
        if (uname(&u) == 0)
                (void) snprintf(ret->kernel, sizeof(ret->kernel), "%s %s", u.sysname, u.release);
        ret->is_root = geteuid() == 0;
        ret->userns = probe_userns();
        ret->landlock_abi = landlock_abi_version();
        ret->seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
        ret->mount_setattr = probe_mount_setattr();
        ret->proc_subset_pid = kernel_at_least(u.release, 5, 8);

        r = cgroup_probe("/proc", getenv("AIRLOCK_CGROUP_PARENT"), &ret->cgroups, &err);
        if (r < 0) {
                ret->cgroups.version = CGROUP_NONE;
                (void) snprintf(ret->cgroup_error, sizeof(ret->cgroup_error), "%s", err.msg);
        } else if (ret->cgroups.version == CGROUP_NONE) {
                (void) snprintf(ret->cgroup_error, sizeof(ret->cgroup_error), "%s",
                                err.msg[0] ? err.msg : "no memory and pids controllers found");
        }
        if (ret->cgroups.version == CGROUP_V2 && ret->cgroups.v2_parent) {
                (void) snprintf(path, sizeof(path), "%s/cgroup.kill", ret->cgroups.v2_parent);
                ret->cgroup_kill = access(path, F_OK) == 0;
        }
}

void jail_features_done(struct jail_features *f)
{
        cgroup_root_done(&f->cgroups);
}

int jail_check_mode(const struct jail_features *f, enum jail_isolation mode,
                    struct airlock_error *err)
{
        switch (mode) {
        case JAIL_NAMESPACES:
                if (!f->is_root)
                        return airlock_error_set(
                                err, -EOPNOTSUPP,
                                "isolation 'namespaces' needs root: it maps unique host uids "
                                "and manages cgroups (run as root, or choose --isolation "
                                "process)");
                if (!f->userns)
                        return airlock_error_set(err, -EOPNOTSUPP,
                                                 "isolation 'namespaces' needs user namespaces, "
                                                 "which this kernel refuses");
                if (!f->seccomp)
                        return airlock_error_set(err, -EOPNOTSUPP,
                                                 "isolation 'namespaces' needs seccomp filters");
                if (!f->mount_setattr)
                        return airlock_error_set(err, -EOPNOTSUPP,
                                                 "isolation 'namespaces' needs mount_setattr "
                                                 "(Linux 5.12) for recursive read-only mounts");
                if (f->cgroups.version == CGROUP_NONE)
                        return airlock_error_set(err, -EOPNOTSUPP,
                                                 "isolation 'namespaces' needs memory and pids "
                                                 "cgroups: %s",
                                                 f->cgroup_error);
                return 0;
        case JAIL_PROCESS:
                if (f->cgroups.version == CGROUP_NONE)
                        return airlock_error_set(err, -EOPNOTSUPP,
                                                 "isolation 'process' needs memory and pids "
                                                 "cgroups: %s",
                                                 f->cgroup_error);
                return 0;
        case JAIL_NONE:
                return 0;
        }
        return airlock_error_set(err, -EINVAL, "unknown isolation mode");
}

int jail_isolation_from_string(const char *s, enum jail_isolation *ret_mode)
{
        if (!s)
                return -EINVAL;
        if (strcmp(s, "namespaces") == 0)
                *ret_mode = JAIL_NAMESPACES;
        else if (strcmp(s, "process") == 0)
                *ret_mode = JAIL_PROCESS;
        else if (strcmp(s, "none") == 0)
                *ret_mode = JAIL_NONE;
        else
                return -EINVAL;
        return 0;
}

const char *jail_isolation_to_string(enum jail_isolation mode)
{
        switch (mode) {
        case JAIL_NAMESPACES:
                return "namespaces";
        case JAIL_PROCESS:
                return "process";
        case JAIL_NONE:
                return "none";
        }
        return "unknown";
}
