/* Moving files between the host and a sandbox's /work. The daemon is privileged and the
 * workspace is controlled by user code, so every path inside it is resolved with openat2()
 * beneath the workspace's root, refusing symlinks, magic links and mount crossings: whatever
 * the code planted, nothing outside /work is ever read or written (HOSTILE.md rows 26, 27). */
#include "sandbox.h"

#include "base/cleanup.h"
#include "base/util.h"
#include "session-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define COPY_OUT_MAX_FILES 10000
#define COPY_OUT_MAX_DEPTH 32

#define RESOLVE_STRICT                                                                             \
        (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int openat2_strict(int dirfd, const char *path, int flags, mode_t mode)
{
        struct open_how how = {
                .flags = (uint64_t) flags | O_CLOEXEC | O_NOFOLLOW,
                .mode = (flags & O_CREAT) ? mode : 0,
                .resolve = RESOLVE_STRICT,
        };
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

        return fd < 0 ? -errno : (int) fd;
}

int workspace_make_host_dir(char **ret_path, struct airlock_error *err)
{
        char tmpl[] = "/tmp/airlock-work-XXXXXX";

        if (!mkdtemp(tmpl))
                return airlock_error_set(err, -errno, "cannot create a work directory: %m");
        *ret_path = strdup(tmpl);
        return *ret_path ? 0 : -ENOMEM;
}

static int remove_tree_at(int dirfd, int depth)
{
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        struct dirent *de;

        if (depth > 64)
                return -ELOOP;
        fd = dup(dirfd);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d)
                return -errno;
        fd = -EBADF; /* owned by d now */
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (de->d_type == DT_DIR) {
                        int sub = openat(dirfd, de->d_name,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                (void) remove_tree_at(sub, depth + 1);
                                (void) close(sub);
                        }
                        (void) unlinkat(dirfd, de->d_name, AT_REMOVEDIR);
                } else {
                        (void) unlinkat(dirfd, de->d_name, 0);
                }
        }
        closedir(d);
        return 0;
}

int workspace_remove_host_dir(const char *path)
{
        _cleanup_close_ int fd = -EBADF;

        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        (void) remove_tree_at(fd, 0);
        return rmdir(path) < 0 ? -errno : 0;
}

/* Opens the sandbox's /work as a directory fd. In namespaces mode that is reached through the
 * sandbox's root (/proc/PID/root), which we may follow because the sandbox's first process is
 * our own unreaped child, so the pid cannot be reused under us. */
static int open_workspace(struct sandbox *sb, struct airlock_error *err)
{
        char path[64];
        int fd;

        if (sb->workdir)
                fd = open(sb->workdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        else {
                (void) snprintf(path, sizeof(path), "/proc/%d/root/work", (int) sb->jail->pid);
                fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0)
                return airlock_error_set(err, -errno, "cannot open the sandbox's workspace: %m");
        return fd;
}

static int copy_fd(int in, int out, uint64_t limit, uint64_t *ret_copied)
{
        char buf[65536];
        uint64_t total = 0;

        for (;;) {
                ssize_t n = read(in, buf, sizeof(buf));
                int r;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                total += (uint64_t) n;
                if (total > limit)
                        return -EFBIG;
                r = write_full(out, buf, (size_t) n);
                if (r < 0)
                        return r;
        }
        if (ret_copied)
                *ret_copied = total;
        return 0;
}

static bool name_is_component(const char *name)
{
        return name && *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
               !strchr(name, '/') && strlen(name) < 256;
}

int sandbox_copy_in(struct sandbox *sb, const char *host_path, const char *name,
                    struct airlock_error *err)
{
        _cleanup_close_ int work = -EBADF, in = -EBADF, out = -EBADF;
        struct stat st;
        int r;

        if (!name_is_component(name))
                return airlock_error_set(err, -EINVAL, "'%s' is not a valid file name", name);
        in = open(host_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (in < 0)
                return airlock_error_set(err, -errno, "cannot open '%s': %m", host_path);
        if (fstat(in, &st) < 0)
                return airlock_error_set(err, -errno, "cannot stat '%s': %m", host_path);
        if (!S_ISREG(st.st_mode))
                return airlock_error_set(err, -EINVAL, "'%s' is not a regular file", host_path);
        if ((uint64_t) st.st_size > sb->profile->limits.workspace_bytes)
                return airlock_error_set(
                        err, -EFBIG, "'%s' is larger than the workspace (%llu bytes)", host_path,
                        (unsigned long long) sb->profile->limits.workspace_bytes);
        work = open_workspace(sb, err);
        if (work < 0)
                return work;
        out = openat2_strict(work, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (out < 0)
                return airlock_error_set(err, out, "cannot create '%s' in the workspace: %s", name,
                                         strerror(-out));
        r = copy_fd(in, out, sb->profile->limits.workspace_bytes, NULL);
        if (r < 0) {
                (void) unlinkat(work, name, 0);
                return airlock_error_set(err, r, "cannot copy '%s' into the workspace: %s",
                                         host_path, strerror(-r));
        }
        /* Owned by the sandbox user, so code can change or delete what it was given. */
        if (fchown(out, sb->jail->host_uid, sb->jail->host_uid) < 0)
                return airlock_error_set(err, -errno, "cannot chown '%s': %m", name);
        return 0;
}

static void skipped_add(json_t *skipped, const char *rel, const char *reason)
{
        json_array_append_new(skipped, json_pack("{s:s, s:s}", "path", rel, "reason", reason));
}

struct copy_out_state {
        json_t *skipped;
        uint64_t budget; /* bytes left to copy */
        unsigned files;
};

static int copy_out_dir(int src_dir, int dst_dir, const char *prefix, int depth,
                        struct copy_out_state *st)
{
        _cleanup_close_ int iter_fd = -EBADF;
        DIR *d;
        struct dirent *de;
        int r = 0;

        if (depth > COPY_OUT_MAX_DEPTH) {
                skipped_add(st->skipped, prefix, "too deep");
                return 0;
        }
        iter_fd = dup(src_dir);
        if (iter_fd < 0)
                return -errno;
        d = fdopendir(iter_fd);
        if (!d)
                return -errno;
        iter_fd = -EBADF;
        while ((de = readdir(d))) {
                _cleanup_close_ int in = -EBADF, out = -EBADF;
                char rel[4096];
                struct stat stt;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                (void) snprintf(rel, sizeof(rel), "%s%s%s", prefix, *prefix ? "/" : "", de->d_name);
                if (++st->files > COPY_OUT_MAX_FILES) {
                        skipped_add(st->skipped, rel, "too many files");
                        break;
                }
                /* O_PATH first: never open a FIFO or device for reading, never follow. */
                in = openat2_strict(src_dir, de->d_name, O_PATH, 0);
                if (in < 0) {
                        skipped_add(st->skipped, rel,
                                    in == -ELOOP ? "symbolic link (not followed)"
                                                 : "cannot be opened safely");
                        continue;
                }
                if (fstat(in, &stt) < 0)
                        continue;
                if (S_ISDIR(stt.st_mode)) {
                        _cleanup_close_ int sub = -EBADF, dsub = -EBADF;
                        sub = openat2_strict(src_dir, de->d_name, O_RDONLY | O_DIRECTORY, 0);
                        if (sub < 0)
                                continue;
                        if (mkdirat(dst_dir, de->d_name, 0755) < 0 && errno != EEXIST) {
                                r = -errno;
                                break;
                        }
                        dsub = openat2_strict(dst_dir, de->d_name, O_RDONLY | O_DIRECTORY, 0);
                        if (dsub < 0) {
                                skipped_add(st->skipped, rel, "destination is not a directory");
                                continue;
                        }
                        r = copy_out_dir(sub, dsub, rel, depth + 1, st);
                        if (r < 0)
                                break;
                        continue;
                }
                if (!S_ISREG(stt.st_mode)) {
                        skipped_add(st->skipped, rel,
                                    S_ISLNK(stt.st_mode) ? "symbolic link (not followed)"
                                                         : "not a regular file");
                        continue;
                }
                safe_close_fd(TAKE_FD(in));
                in = openat2_strict(src_dir, de->d_name, O_RDONLY | O_NONBLOCK, 0);
                if (in < 0)
                        continue;
                out = openat2_strict(dst_dir, de->d_name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (out < 0) {
                        skipped_add(st->skipped, rel, "destination cannot be written safely");
                        continue;
                }
                {
                        uint64_t copied = 0;
                        r = copy_fd(in, out, st->budget, &copied);
                        if (r == -EFBIG) {
                                skipped_add(st->skipped, rel, "over the size budget");
                                r = 0;
                                continue;
                        }
                        if (r < 0)
                                break;
                        st->budget -= copied;
                }
        }
        closedir(d);
        return r;
}

int sandbox_copy_out(struct sandbox *sb, const char *host_dir, json_t **ret_skipped,
                     struct airlock_error *err)
{
        _cleanup_close_ int work = -EBADF, dst = -EBADF;
        struct copy_out_state st = { 0 };
        int r;

        if (mkdir(host_dir, 0755) < 0 && errno != EEXIST)
                return airlock_error_set(err, -errno, "cannot create '%s': %m", host_dir);
        dst = open(host_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dst < 0)
                return airlock_error_set(err, -errno, "cannot open '%s': %m", host_dir);
        work = open_workspace(sb, err);
        if (work < 0)
                return work;
        st.skipped = json_array();
        st.budget = sb->profile->limits.workspace_bytes;
        r = copy_out_dir(work, dst, "", 0, &st);
        if (r < 0) {
                json_decref(st.skipped);
                return airlock_error_set(err, r, "copying the workspace out failed: %s",
                                         strerror(-r));
        }
        *ret_skipped = st.skipped;
        return 0;
}
