/* Whole-tree copies of /work, for sessions that stop, resume and fork: a live sandbox's /work
 * to a directory of the daemon's (a stopped session's files), that directory back into a fresh
 * sandbox, or one sandbox's /work into another's. Every name is resolved beneath its directory
 * fd with openat2 (no symlink, magic link or mount crossing is followed), so whatever user code
 * planted, the daemon reads and writes only inside the two trees. */
#include "sandbox.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "session-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deeper directories are not entered (and said so in the log): a chain that deep is an
 * attack on the copy, not a user's data. */
#define TREE_DEPTH_MAX 256

struct tree_copy {
        struct sandbox *dst_sb; /* create as this sandbox's user; NULL: as the daemon */
        bool durable;
        uint64_t budget;
        uint64_t bytes;
        struct airlock_error *err;
};

/* Only permission bits and the sticky bit: a setuid file never lands on the host's disk. */
static mode_t kept_mode(mode_t mode)
{
        return mode & (0777 | S_ISVTX);
}

static int copy_data(int in, int out)
{
        for (;;) {
                ssize_t n = sendfile(out, in, NULL, 1u << 30);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EINVAL || errno == ENOSYS))
                        /* not a file sendfile can read: copy by hand, from where it stopped */
                        return workspace_copy_fd(in, out, UINT64_MAX, NULL);
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
        }
}

/* Runs a creating call as the destination sandbox's user when there is one. */
#define AS_DST(tc, expr)                                                                           \
        ({                                                                                         \
                struct fsid _f = { 0 };                                                            \
                int _r;                                                                            \
                if ((tc)->dst_sb)                                                                  \
                        workspace_fsid_enter((tc)->dst_sb, &_f);                                   \
                _r = (expr);                                                                       \
                if (_r < 0)                                                                        \
                        _r = -errno;                                                               \
                workspace_fsid_leave(&_f);                                                         \
                _r;                                                                                \
        })

static bool unchanged(int link, const char *name, const struct stat *st)
{
        struct stat old;

        return link >= 0 && fstatat(link, name, &old, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISREG(old.st_mode) && old.st_size == st->st_size &&
               old.st_mtim.tv_sec == st->st_mtim.tv_sec &&
               old.st_mtim.tv_nsec == st->st_mtim.tv_nsec &&
               kept_mode(old.st_mode) == kept_mode(st->st_mode);
}

static int copy_file(struct tree_copy *tc, int src, int dst, int link, const char *name,
                     const struct stat *st)
{
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        struct timespec times[2] = { st->st_atim, st->st_mtim };
        int r;

        tc->bytes += (uint64_t) st->st_size;
        if (tc->bytes > tc->budget)
                return -EFBIG;
        if (unchanged(link, name, st) && linkat(link, name, dst, name, 0) == 0)
                return 0;
        in = workspace_openat2(src, name, O_RDONLY | O_NONBLOCK, 0);
        if (in < 0)
                return in == -ENOENT ? 0 : in; /* deleted while we copied: nothing to keep */
        out = AS_DST(tc, workspace_openat2(dst, name, O_WRONLY | O_CREAT | O_EXCL, 0600));
        if (out < 0)
                return out;
        r = copy_data(in, out);
        if (r < 0)
                return r;
        if (fchmod(out, kept_mode(st->st_mode)) < 0 || futimens(out, times) < 0)
                return -errno;
        if (tc->durable && fsync(out) < 0)
                return -errno;
        return 0;
}

static int copy_symlink(struct tree_copy *tc, int src, int dst, const char *name,
                        const struct stat *st)
{
        struct timespec times[2] = { st->st_atim, st->st_mtim };
        char target[PATH_MAX];
        ssize_t n;
        int r;

        n = readlinkat(src, name, target, sizeof(target) - 1);
        if (n < 0)
                return errno == ENOENT ? 0 : -errno;
        target[n] = '\0';
        r = AS_DST(tc, symlinkat(target, dst, name));
        if (r < 0)
                return r;
        (void) utimensat(dst, name, times, AT_SYMLINK_NOFOLLOW);
        return 0;
}

static int copy_dir(struct tree_copy *tc, int src, int dst, int link, unsigned depth)
{
        _cleanup_close_ int iter = -EBADF;
        struct dirent *de;
        DIR *d;
        int r = 0;

        iter = fcntl(src, F_DUPFD_CLOEXEC, 3);
        if (iter < 0)
                return -errno;
        /* A dup shares the offset: rewind in case the directory was read before. */
        (void) lseek(iter, 0, SEEK_SET);
        d = fdopendir(iter);
        if (!d)
                return -errno;
        iter = -EBADF; /* owned by d */
        while (r >= 0 && (de = readdir(d))) {
                struct stat st;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                if (S_ISREG(st.st_mode)) {
                        r = copy_file(tc, src, dst, link, de->d_name, &st);
                } else if (S_ISLNK(st.st_mode)) {
                        r = copy_symlink(tc, src, dst, de->d_name, &st);
                } else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int s = -EBADF, t = -EBADF, l = -EBADF;
                        struct timespec times[2] = { st.st_atim, st.st_mtim };
                        if (depth >= TREE_DEPTH_MAX) {
                                log_warn("msg=\"workspace copy: a directory chain deeper than %d "
                                         "levels was not copied\"",
                                         TREE_DEPTH_MAX);
                                continue;
                        }
                        s = workspace_openat2(src, de->d_name, O_RDONLY | O_DIRECTORY, 0);
                        if (s < 0)
                                continue;
                        r = AS_DST(tc, mkdirat(dst, de->d_name, 0700));
                        if (r < 0)
                                break;
                        t = workspace_openat2(dst, de->d_name, O_RDONLY | O_DIRECTORY, 0);
                        if (t < 0) {
                                r = t;
                                break;
                        }
                        if (link >= 0)
                                l = workspace_openat2(link, de->d_name, O_RDONLY | O_DIRECTORY, 0);
                        r = copy_dir(tc, s, t, l >= 0 ? l : -1, depth + 1);
                        if (r < 0)
                                break;
                        /* Mode and times after the children, which would change the mtime. */
                        if (fchmod(t, kept_mode(st.st_mode)) < 0 || futimens(t, times) < 0)
                                r = -errno;
                        else if (tc->durable && fsync(t) < 0)
                                r = -errno;
                }
                /* FIFOs, sockets and devices carry no data worth keeping: skipped. */
        }
        closedir(d);
        return r;
}

/* Mode and times of the tree's root, which the walk does not visit. */
static int copy_root_attrs(int src, int dst, bool durable)
{
        struct stat st;

        if (fstat(src, &st) < 0)
                return -errno;
        if (fchmod(dst, kept_mode(st.st_mode)) < 0 ||
            futimens(dst, (struct timespec[2]){ st.st_atim, st.st_mtim }) < 0)
                return -errno;
        if (durable && fsync(dst) < 0)
                return -errno;
        return 0;
}

static const char *copy_errno_word(int r)
{
        switch (-r) {
        case EFBIG:
                return "the files are larger than a stopped session may keep";
        case ENOSPC:
        case EDQUOT:
                return "the disk is full";
        default:
                return strerror(-r);
        }
}

int workspace_save(struct sandbox *sb, int dst_dir, int link_dir, bool durable, uint64_t budget,
                   uint64_t *ret_bytes, struct airlock_error *err)
{
        _cleanup_close_ int work = -EBADF;
        struct tree_copy tc = { .durable = durable, .budget = budget, .err = err };
        int r;

        work = workspace_open(sb, err);
        if (work < 0)
                return work;
        r = copy_dir(&tc, work, dst_dir, link_dir, 0);
        if (r >= 0)
                r = copy_root_attrs(work, dst_dir, durable);
        if (r < 0)
                return airlock_error_set(err, r, "cannot save the files of /work: %s",
                                         copy_errno_word(r));
        if (ret_bytes)
                *ret_bytes = tc.bytes;
        return 0;
}

int workspace_load(struct sandbox *sb, int src_dir, struct airlock_error *err)
{
        _cleanup_close_ int work = -EBADF;
        struct tree_copy tc = { .dst_sb = sb, .budget = UINT64_MAX, .err = err };
        int r;

        work = workspace_open(sb, err);
        if (work < 0)
                return work;
        r = copy_dir(&tc, src_dir, work, -1, 0);
        if (r >= 0)
                r = copy_root_attrs(src_dir, work, false);
        if (r < 0)
                return airlock_error_set(err, r, "cannot restore the files of /work: %s",
                                         r == -ENOSPC ? "they do not fit in the workspace"
                                                      : copy_errno_word(r));
        return 0;
}

int workspace_copy(struct sandbox *from, struct sandbox *to, struct airlock_error *err)
{
        _cleanup_close_ int src = -EBADF;

        src = workspace_open(from, err);
        if (src < 0)
                return src;
        return workspace_load(to, src, err);
}
