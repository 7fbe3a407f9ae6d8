/* Steps shared by every sandboxed child, whether cloned by jail_spawn() (one-shot runs,
 * zygotes) or forked inside a zygote for a session (src/runner/zygote.c). They run before
 * user code, in a process that may have been forked from a multi-threaded parent, so they
 * neither allocate nor take locks. */
#include "jail-internal.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

void jail_child_reset_signals(void)
{
        sigset_t all;

        (void) sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        for (int sig = 1; sig < NSIG; sig++)
                (void) signal(sig, SIG_DFL);
}

int jail_child_setup_fds(int out_fd, int err_fd, int ctl_fd, int *status_fd, bool close_rest,
                         const char **ret_step)
{
        int src[4] = { out_fd, err_fd, ctl_fd, status_fd ? *status_fd : -1 };
        int hi[4] = { -1, -1, -1, -1 };
        int null_fd;

        *ret_step = "rearrange file descriptors";
        /* First lift every source above the target range, so no dup2 clobbers another. */
        for (int i = 0; i < 4; i++) {
                if (src[i] < 0)
                        continue;
                hi[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 10);
                if (hi[i] < 0)
                        return -errno;
        }
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0)
                return -errno;
        if (dup2(null_fd, 0) < 0 || dup2(hi[0], 1) < 0 || dup2(hi[1], 2) < 0 || dup2(hi[2], 3) < 0)
                return -errno;
        if (status_fd) {
                if (dup3(hi[3], 4, O_CLOEXEC) < 0)
                        return -errno;
                *status_fd = 4;
        }
        *ret_step = "close inherited file descriptors";
        /* With execve ahead, close-on-exec is enough (and keeps the status pipe usable until
         * then); a forked session has no execve, so everything else is closed now. */
        if (syscall(SYS_close_range, status_fd ? 5 : 4, ~0U, close_rest ? 0 : CLOSE_RANGE_CLOEXEC) <
            0)
                return -errno;
        return 0;
}

int jail_child_write_ns_limits(const char *proc_root)
{
        static const char *const names[] = { "user", "mnt", "pid", "net", "ipc", "uts", "cgroup" };
        char path[128];
        int r;

        /* These limits are per user namespace: zero means no namespace of any kind can be
         * created below this one, whatever a later seccomp change allows. */
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                (void) snprintf(path, sizeof(path), "%s/sys/user/max_%s_namespaces", proc_root,
                                names[i]);
                r = write_file_at(AT_FDCWD, path, "0");
                if (r < 0)
                        return r;
        }
        return 0;
}
