/* Credentials and rlimits: the last privileged steps of the child before seccomp. After
 * caps_drop_to() the process has no capability in any set, cannot regain one through setuid
 * binaries or file capabilities (no_new_privs, locked securebits), and runs as the sandbox user. */
#include "jail-internal.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int caps_drop_to(uid_t uid, gid_t gid, const char **ret_step)
{
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = { 0 };
        int r;

        *ret_step = "setgroups";
        r = child_setgroups_none();
        if (r < 0)
                return r;

        /* Drop the bounding set while we still hold CAP_SETPCAP. Stop at the first EINVAL:
         * that is the end of the kernel's capability list. */
        *ret_step = "drop bounding capabilities";
        for (int cap = 0; cap <= 63; cap++) {
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
                        if (errno == EINVAL)
                                break;
                        return -errno;
                }
        }
        *ret_step = "clear ambient capabilities";
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -errno;

        /* Root gets no special treatment again, and nothing can undo that. */
        *ret_step = "lock securebits";
        if (prctl(PR_SET_SECUREBITS,
                  SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                          SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                          SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                  0, 0, 0) < 0)
                return -errno;

        *ret_step = "setresgid";
        r = child_setresgid(gid);
        if (r < 0)
                return r;
        *ret_step = "setresuid";
        r = child_setresuid(uid);
        if (r < 0)
                return r;

        /* The uid change already cleared the permitted and effective sets (keep-caps is off);
         * make that explicit so nothing depends on it. */
        *ret_step = "capset";
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;
        return 0;
}

int caps_set_rlimits(const struct jail_config *cfg, const char **ret_step)
{
        struct {
                int resource;
                rlim_t value;
        } limits[] = {
                { RLIMIT_CORE, 0 },
                { RLIMIT_NOFILE, cfg->files ? cfg->files : 1024 },
                { RLIMIT_FSIZE, cfg->workspace_bytes ? cfg->workspace_bytes : RLIM_INFINITY },
                { RLIMIT_MEMLOCK, 64 * 1024 },
                { RLIMIT_MSGQUEUE, 0 },
                { RLIMIT_RTPRIO, 0 },
                { RLIMIT_CPU, cfg->cpu_seconds ? cfg->cpu_seconds : RLIM_INFINITY },
                /* Meaningful because the sandbox's uid is unique on the host. */
                { RLIMIT_NPROC, cfg->pids ? cfg->pids : RLIM_INFINITY },
        };

        *ret_step = "setrlimit";
        for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
                struct rlimit rl = { limits[i].value, limits[i].value };
                if (setrlimit(limits[i].resource, &rl) < 0)
                        return -errno;
        }
        return 0;
}
