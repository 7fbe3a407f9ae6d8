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
#include <sys/random.h>
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

/* ---- removal ------------------------------------------------------------------------------ */

/* Directories a removal holds open at once. A chain deeper than this is not a reason to stop:
 * the directory one level too deep is moved up into the top of the tree and emptied from
 * there, so the walk needs neither recursion, nor memory that grows with the depth, nor "..",
 * which would lead out of /work if the code moved a directory we hold meanwhile. */
#define TREE_OPEN_MAX 32
/* Entries counted as left behind in one directory, at most. */
#define TREE_COUNT_MAX 1000000

struct tree_level {
        int fd;                  /* the directory, an open file description of our own */
        char name[NAME_MAX + 1]; /* its name in the level above; "" for the top */
        size_t pos, len;         /* the getdents64 batch in buf */
        bool progress;           /* this pass removed (or moved out) an entry */
        bool failed;             /* this pass could not remove an entry */
        bool again;              /* an entry was moved in: one more pass */
        char buf[4096] __attribute__((aligned(8)));
};

struct tree_walk {
        struct sandbox *sb; /* whose /work this is, or NULL (a directory of the daemon's) */
        struct tree_level lv[TREE_OPEN_MAX];
        unsigned depth;
        unsigned long long moved; /* temporary names handed out */
        char tag[17];             /* random, so a planted name cannot collide with ours */
        struct tree_removal st;
};

static void tree_note(struct tree_walk *w, int r)
{
        if (!w->st.why)
                w->st.why = r;
}

static void level_rewind(struct tree_level *l)
{
        (void) lseek(l->fd, 0, SEEK_SET);
        l->pos = l->len = 0;
        l->progress = l->failed = l->again = false;
}

/* The next entry of l but "." and "..": 1 with *ret_name pointing into l->buf (valid until
 * the next call on l), 0 at the end, or -errno. */
static int level_next(struct tree_level *l, const char **ret_name, unsigned char *ret_type)
{
        for (;;) {
                struct dirent64 *de;
                ssize_t n;

                if (l->pos >= l->len) {
                        n = getdents64(l->fd, l->buf, sizeof(l->buf));
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                return 0;
                        l->pos = 0;
                        l->len = (size_t) n;
                }
                de = (struct dirent64 *) (void *) (l->buf + l->pos);
                l->pos += de->d_reclen;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                *ret_name = de->d_name;
                *ret_type = de->d_type;
                return 1;
        }
}

/* Entries still in l, counted from its start (bounded). */
static uint64_t level_count(struct tree_level *l)
{
        const char *name;
        unsigned char type;
        uint64_t n = 0;

        level_rewind(l);
        while (n < TREE_COUNT_MAX && level_next(l, &name, &type) > 0)
                n++;
        return n;
}

static int rename_up(struct tree_walk *w, const char *name, const char *tmp)
{
        struct fsid f = { 0 };
        int r = 0;

        /* Creating a name in the sandbox's /work takes a uid mapped in its user namespace. */
        if (w->sb)
                workspace_fsid_enter(w->sb, &f);
        if (renameat2(w->lv[w->depth].fd, name, w->lv[0].fd, tmp, RENAME_NOREPLACE) < 0)
                r = -errno;
        workspace_fsid_leave(&f);
        return r;
}

/* Moves the directory name of the deepest level up into the top of the tree. */
static int move_up(struct tree_walk *w, const char *name)
{
        _cleanup_close_ int fd = -EBADF;
        char tmp[64];
        int r;

        (void) snprintf(tmp, sizeof(tmp), ".airlock-deep-%s-%llu", w->tag, w->moved++);
        r = rename_up(w, name, tmp);
        if (r == -EACCES || r == -EPERM) {
                /* The code took the write permission of its own directories away: give it
                 * back (they are being removed), on fds, so that nothing is followed. */
                fd = workspace_openat2(w->lv[w->depth].fd, name, O_RDONLY | O_DIRECTORY, 0);
                if (fd >= 0 && fchmod(fd, 0700) == 0 && fchmod(w->lv[w->depth].fd, 0700) == 0 &&
                    fchmod(w->lv[0].fd, 0700) == 0)
                        r = rename_up(w, name, tmp);
        }
        if (r < 0)
                return r;
        w->lv[0].again = true;
        return 0;
}

static void failed(struct tree_walk *w, struct tree_level *l, int r)
{
        tree_note(w, r);
        l->failed = true;
}

/* unlinkat(flags) of an entry of l: 0 when removed, 1 when it was gone already, or -errno. */
static int unlink_entry(struct tree_walk *w, struct tree_level *l, const char *name, int flags)
{
        if (unlinkat(l->fd, name, flags) == 0) {
                w->st.removed++;
                l->progress = true;
                return 0;
        }
        return errno == ENOENT ? 1 : -errno;
}

/* Removes one entry of the deepest level; a directory that is not empty becomes the next
 * level (or, at the deepest level the walk holds, moves up into the top). */
static void remove_entry(struct tree_walk *w, const char *name, unsigned char type)
{
        struct tree_level *l = &w->lv[w->depth], *next;
        int r, fd;

        if (type != DT_DIR && type != DT_UNKNOWN) {
                r = unlink_entry(w, l, name, 0);
                if (r != -EISDIR) { /* else: replaced by a directory meanwhile */
                        if (r < 0)
                                failed(w, l, r);
                        return;
                }
        }
        /* An empty directory (most leaves) goes without being opened. */
        r = unlink_entry(w, l, name, AT_REMOVEDIR);
        if (r == -ENOTDIR)
                r = unlink_entry(w, l, name, 0);
        if (r >= 0)
                return;
        if (r != -ENOTEMPTY && r != -EEXIST) {
                failed(w, l, r);
                return;
        }
        if (w->depth + 1 >= TREE_OPEN_MAX) {
                r = move_up(w, name);
                if (r < 0)
                        failed(w, l, r);
                else
                        l->progress = true;
                return;
        }
        fd = workspace_openat2(l->fd, name, O_RDONLY | O_DIRECTORY, 0);
        if (fd == -ELOOP || fd == -ENOTDIR) {
                /* Swapped for a symlink or a file meanwhile: that is removed, not followed. */
                r = unlink_entry(w, l, name, 0);
                if (r < 0)
                        failed(w, l, r);
                return;
        }
        if (fd < 0) {
                if (fd != -ENOENT)
                        failed(w, l, fd);
                return;
        }
        next = &w->lv[w->depth + 1];
        next->fd = fd;
        (void) snprintf(next->name, sizeof(next->name), "%s", name);
        level_rewind(next);
        w->depth++;
}

/* Empties the directory of level 0 (already open), walking down without recursion. */
static void tree_empty(struct tree_walk *w, uint64_t deadline_ns)
{
        unsigned steps = 0;

        for (;;) {
                struct tree_level *l = &w->lv[w->depth], *up;
                const char *name = NULL;
                unsigned char type = DT_UNKNOWN;
                int r;

                if (deadline_ns && (++steps & 63) == 0 && now_ns() >= deadline_ns) {
                        tree_note(w, -ETIME);
                        break;
                }
                r = level_next(l, &name, &type);
                if (r > 0) {
                        remove_entry(w, name, type);
                        continue;
                }
                if (r < 0)
                        failed(w, l, r);
                /* The end of a pass. Entries may have appeared behind us (moved up by us, or
                 * made by the code meanwhile): another pass while the last one got somewhere
                 * and nothing failed. A pass that failed is the last: retrying would not help
                 * and could go on for ever. */
                if (l->again || (l->progress && !l->failed)) {
                        level_rewind(l);
                        /* Every entry left below the top is met again in its next pass, so
                         * what is left is counted in the last pass only. */
                        if (w->depth == 0)
                                w->st.left = 0;
                        continue;
                }
                if (l->failed)
                        w->st.left += level_count(l);
                if (w->depth == 0)
                        return;
                /* This directory is as empty as it gets: back up, and remove it. */
                up = &w->lv[w->depth - 1];
                safe_close_fd(l->fd);
                l->fd = -EBADF;
                w->depth--;
                r = unlink_entry(w, up, l->name, AT_REMOVEDIR);
                if (r < 0)
                        failed(w, up, r);
        }
        /* Stopped early: every directory still open stays, with what it holds. */
        for (; w->depth > 0; w->depth--) {
                safe_close_fd(w->lv[w->depth].fd);
                w->lv[w->depth].fd = -EBADF;
                w->st.left++;
        }
        if (w->st.left == 0)
                w->st.left = level_count(&w->lv[0]);
}

int workspace_tree_remove(struct sandbox *sb, int parent, const char *name, uint64_t deadline_ns,
                          struct tree_removal *ret)
{
        _cleanup_free_ struct tree_walk *w = NULL;
        unsigned char rnd[8] = { 0 };

        if (ret)
                *ret = (struct tree_removal){ 0 };
        /* A file or a symlink (never followed), or an empty directory. */
        if (unlinkat(parent, name, 0) == 0 ||
            (errno == EISDIR && unlinkat(parent, name, AT_REMOVEDIR) == 0)) {
                if (ret)
                        ret->removed = 1;
                return 0;
        }
        if (errno == ENOENT)
                return 0;
        if (errno != ENOTEMPTY && errno != EEXIST)
                return -errno;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->sb = sb;
        (void) getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);
        for (size_t i = 0; i < sizeof(rnd); i++)
                (void) snprintf(w->tag + 2 * i, 3, "%02x", rnd[i]);
        w->lv[0].fd = workspace_openat2(parent, name, O_RDONLY | O_DIRECTORY, 0);
        if (w->lv[0].fd < 0)
                return w->lv[0].fd == -ENOENT ? 0 : w->lv[0].fd;
        /* Twice at most: entries made between the walk's end and the rmdir get one more. */
        for (int round = 0; round < 2; round++) {
                w->st.left = 0;
                level_rewind(&w->lv[0]);
                tree_empty(w, deadline_ns);
                if (w->st.left > 0) {
                        w->st.left++; /* and the directory itself */
                        break;
                }
                if (unlinkat(parent, name, AT_REMOVEDIR) == 0) {
                        w->st.removed++;
                        break;
                }
                if (errno == ENOENT) /* moved away meanwhile: not ours to chase */
                        break;
                if (errno != ENOTEMPTY && errno != EEXIST) {
                        tree_note(w, -errno);
                        w->st.left = 1; /* the directory itself */
                        break;
                }
                tree_note(w, -ENOTEMPTY);
                w->st.left = 1 + level_count(&w->lv[0]);
        }
        safe_close_fd(w->lv[0].fd);
        if (ret)
                *ret = w->st;
        return w->st.left > 0 ? -ENOTEMPTY : 0;
}

const char *workspace_tree_why(const struct tree_removal *t)
{
        switch (-t->why) {
        case 0:
                return "unknown";
        case ETIME:
                return "it took longer than the time a delete may take; delete it again to go on";
        case ENOTEMPTY:
        case EEXIST:
                return "entries kept appearing while it was deleted (code in the session is "
                       "writing into it)";
        default:
                return strerror(-t->why);
        }
}
