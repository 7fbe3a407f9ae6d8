/* Files the daemon puts into the workspace (an upload, the MCP write_file tool) are written
 * here, by the session's own process: the pages of /work's tmpfs are charged to whoever writes
 * them, and only this process is in the session's memory cgroup. The daemon reads nothing of
 * what this code says beyond success or an errno: the runner is as untrusted as the cell. */
#include "runner.h"

#include "base/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int open_beneath(int dirfd, const char *name, int flags, mode_t mode)
{
        struct open_how how = {
                .flags = (uint64_t) flags | O_CLOEXEC | O_NOFOLLOW,
                .mode = (flags & O_CREAT) ? mode : 0,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                           RESOLVE_NO_XDEV,
        };
        long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));

        return fd < 0 ? -errno : (int) fd;
}

int runner_put_file(const char *root, const char *path, int in_fd, uint64_t *ret_written,
                    const char **ret_step)
{
        _cleanup_close_ int dir = -EBADF, out = -EBADF;
        char comp[256];
        const char *p = path;
        struct stat st;
        uint64_t written = 0;
        char buf[65536];

        *ret_step = "open the workspace";
        dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        /* The directories on the way, made when missing. */
        for (;;) {
                const char *slash = strchr(p, '/');
                size_t n;
                int next;

                if (!slash)
                        break;
                n = (size_t) (slash - p);
                if (n == 0 || n >= sizeof(comp))
                        return -EINVAL;
                memcpy(comp, p, n);
                comp[n] = '\0';
                *ret_step = "create the directories";
                if (mkdirat(dir, comp, 0755) < 0 && errno != EEXIST)
                        return -errno;
                next = open_beneath(dir, comp, O_PATH | O_DIRECTORY, 0);
                if (next < 0)
                        return next;
                (void) close(dir);
                dir = next;
                p = slash + 1;
        }
        /* O_NONBLOCK: a FIFO planted by the code must not hold us; only a regular file is
         * written. */
        *ret_step = "open the file";
        out = open_beneath(dir, p, O_WRONLY | O_CREAT | O_NONBLOCK, 0644);
        if (out < 0)
                return out == -ENXIO ? -EINVAL : out;
        if (fstat(out, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        *ret_step = "write the file";
        if (ftruncate(out, 0) < 0 || fcntl(out, F_SETFL, 0) < 0)
                return -errno;
        for (;;) {
                ssize_t n = read(in_fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(out, buf + off, (size_t) (n - off));
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w < 0)
                                return -errno;
                        off += w;
                }
                written += (uint64_t) n;
        }
        *ret_written = written;
        return 0;
}
