/* Moving files between the host and a sandbox's /work. The daemon is privileged and the
 * workspace is controlled by user code, so every path inside it is resolved with openat2()
 * beneath the workspace's root, refusing symlinks, magic links and mount crossings: whatever
 * the code planted, nothing outside /work is ever read or written (HOSTILE.md rows 26, 27). */
#include "sandbox.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "session-internal.h"
#include "vm/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define COPY_OUT_MAX_FILES 10000
#define COPY_OUT_MAX_DEPTH 32

#define RESOLVE_STRICT                                                                             \
        (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

int workspace_openat2(int dirfd, const char *path, int flags, mode_t mode)
{
        struct open_how how = {
                .flags = (uint64_t) flags | O_CLOEXEC | O_NOFOLLOW,
                .mode = (flags & O_CREAT) ? mode : 0,
                .resolve = RESOLVE_STRICT,
        };
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

        return fd < 0 ? -errno : (int) fd;
}

/* The sandbox's /work is a tmpfs of its user namespace, where the daemon's uid 0 is not
 * mapped: the kernel refuses to create an inode owned by it (EOVERFLOW). So the creating calls
 * run as the sandbox's own host uid and gid, which also makes the new files the user's, with
 * no chown. setfsuid/setfsgid change only the calling thread; the daemon's other threads keep
 * their identity, and this one gets it back in workspace_fsid_leave(). In process mode /work is a
 * host directory: files are created as root there and handed over with chown. */

void workspace_fsid_enter(struct sandbox *sb, struct fsid *f)
{
        f->switched = !sb->workdir;
        if (!f->switched)
                return;
        (void) syscall(SYS_setfsgid, sandbox_host_uid(sb));
        (void) syscall(SYS_setfsuid, sandbox_host_uid(sb));
}

void workspace_fsid_leave(struct fsid *f)
{
        if (!f->switched)
                return;
        (void) syscall(SYS_setfsuid, 0);
        (void) syscall(SYS_setfsgid, 0);
        f->switched = false;
}

/* Gives a file created in process mode to the sandbox user. */
static int hand_over(struct sandbox *sb, const struct fsid *f, int fd)
{
        if (f->switched)
                return 0;
        return fchown(fd, sandbox_host_uid(sb), sandbox_host_uid(sb)) < 0 ? -errno : 0;
}

int workspace_make_host_dir(char **ret_path, struct airlock_error *err)
{
        char tmpl[] = "/tmp/airlock-work-XXXXXX";

        if (!mkdtemp(tmpl))
                return airlock_error_set(err, -errno, "cannot create a work directory: %m");
        *ret_path = strdup(tmpl);
        return *ret_path ? 0 : -ENOMEM;
}

/* Process and none modes: the sandbox's processes are gone by now, so nothing writes; the
 * deadline only bounds a tree too large to remove in reasonable time. */
#define HOST_DIR_REMOVE_TIME_MAX_MS 60000

int workspace_remove_host_dir(const char *path)
{
        _cleanup_free_ char *copy = strdup(path);
        _cleanup_close_ int parent = -EBADF;
        char *slash = copy ? strrchr(copy, '/') : NULL;

        if (!slash || slash == copy || !slash[1])
                return copy ? -EINVAL : -ENOMEM;
        *slash = '\0';
        parent = open(copy, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (parent < 0)
                return -errno;
        return workspace_tree_remove(NULL, parent, slash + 1,
                                     now_ns() + HOST_DIR_REMOVE_TIME_MAX_MS * 1000000ULL, NULL);
}

/* Opens the sandbox's /work as a directory fd. In namespaces mode that is reached through the
 * sandbox's root (/proc/PID/root), which we may follow because the sandbox's first process is
 * our own unreaped child, so the pid cannot be reused under us. */
int workspace_open(struct sandbox *sb, struct airlock_error *err)
{
        char path[64];
        int fd;

        /* A microVM's /work is inside the guest: /proc/<pid>/root of its "pid", QEMU, is the
         * host's root, never to be written into. Its files go over the VM's file channel (the
         * sandbox_file_* calls below); what needs a directory fd (airlock run's copies, saving
         * the workspace on stop) is refused. */
        if (sb->vm_sig_fd >= 0)
                return airlock_error_set(err, -EOPNOTSUPP,
                                         "the workspace of a microVM session is inside its VM: "
                                         "the daemon reaches its files one by one through the "
                                         "file API only");
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

int workspace_copy_fd(int in, int out, uint64_t limit, uint64_t *ret_copied)
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
        struct fsid fsid = { 0 };
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
        work = workspace_open(sb, err);
        if (work < 0)
                return work;
        workspace_fsid_enter(sb, &fsid);
        out = workspace_openat2(work, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
        workspace_fsid_leave(&fsid);
        if (out < 0)
                return airlock_error_set(err, out, "cannot create '%s' in the workspace: %s", name,
                                         strerror(-out));
        r = workspace_copy_fd(in, out, sb->profile->limits.workspace_bytes, NULL);
        if (r < 0) {
                (void) unlinkat(work, name, 0);
                return airlock_error_set(err, r, "cannot copy '%s' into the workspace: %s",
                                         host_path, strerror(-r));
        }
        /* Owned by the sandbox user, so code can change or delete what it was given. */
        r = hand_over(sb, &fsid, out);
        if (r < 0)
                return airlock_error_set(err, r, "cannot chown '%s': %s", name, strerror(-r));
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
                in = workspace_openat2(src_dir, de->d_name, O_PATH, 0);
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
                        sub = workspace_openat2(src_dir, de->d_name, O_RDONLY | O_DIRECTORY, 0);
                        if (sub < 0)
                                continue;
                        if (mkdirat(dst_dir, de->d_name, 0755) < 0 && errno != EEXIST) {
                                r = -errno;
                                break;
                        }
                        dsub = workspace_openat2(dst_dir, de->d_name, O_RDONLY | O_DIRECTORY, 0);
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
                in = workspace_openat2(src_dir, de->d_name, O_RDONLY | O_NONBLOCK, 0);
                if (in < 0)
                        continue;
                out = workspace_openat2(dst_dir, de->d_name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (out < 0) {
                        skipped_add(st->skipped, rel, "destination cannot be written safely");
                        continue;
                }
                {
                        uint64_t copied = 0;
                        r = workspace_copy_fd(in, out, st->budget, &copied);
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
        work = workspace_open(sb, err);
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

bool workspace_path_is_valid(const char *path, bool allow_empty)
{
        size_t len;
        const char *p;

        if (!path)
                return false;
        len = strlen(path);
        if (len == 0)
                return allow_empty;
        if (len >= 4096 || path[0] == '/')
                return false;
        p = path;
        for (;;) {
                const char *slash = strchr(p, '/');
                size_t n = slash ? (size_t) (slash - p) : strlen(p);
                if (n == 0 || n >= 256 || (n == 1 && p[0] == '.') ||
                    (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                if (!slash)
                        return true;
                p = slash + 1;
        }
}

static const char *errno_word(int r)
{
        switch (-r) {
        case ELOOP:
                return "a symbolic link (airlock never follows links in /work)";
        case EXDEV:
                return "outside the workspace";
        case ENOENT:
                return "no such file or directory";
        case ENOTDIR:
                return "a path component is not a directory";
        case EISDIR:
                return "a directory";
        case ENOSPC:
        case EFBIG:
        case EDQUOT:
                return "over the workspace's size limit";
        default:
                return strerror(-r);
        }
}

/* Opens the parent directory of path beneath the workspace (creating it, owned by the sandbox
 * user, when create_parents) and points *ret_name at the last component. */
static int open_parent(struct sandbox *sb, int work, const char *path, bool create_parents,
                       const char **ret_name, const struct fsid *fsid)
{
        char buf[4096];
        char *slash;
        int dir;

        (void) snprintf(buf, sizeof(buf), "%s", path);
        slash = strrchr(buf, '/');
        *ret_name = path + (slash ? (size_t) (slash - buf) + 1 : 0);
        if (!slash) {
                dir = fcntl(work, F_DUPFD_CLOEXEC, 3);
                return dir < 0 ? -errno : dir;
        }
        *slash = '\0';
        if (!create_parents)
                return workspace_openat2(work, buf, O_PATH | O_DIRECTORY, 0);

        dir = fcntl(work, F_DUPFD_CLOEXEC, 3);
        if (dir < 0)
                return -errno;
        for (char *comp = buf, *next; comp; comp = next) {
                int sub;
                next = strchr(comp, '/');
                if (next)
                        *next++ = '\0';
                if (mkdirat(dir, comp, 0755) == 0) {
                        if (!fsid->switched &&
                            fchownat(dir, comp, sandbox_host_uid(sb), sandbox_host_uid(sb),
                                     AT_SYMLINK_NOFOLLOW) < 0) {
                                (void) close(dir);
                                return -errno;
                        }
                } else if (errno != EEXIST) {
                        int r = -errno;
                        (void) close(dir);
                        return r;
                }
                sub = workspace_openat2(dir, comp, O_PATH | O_DIRECTORY, 0);
                (void) close(dir);
                if (sub < 0)
                        return sub;
                dir = sub;
        }
        return dir;
}

/* The microVM tier: the same calls over the VM's file channel (vm/files.h), served in the
 * guest beneath its /work with the same rules (no symlink followed, nothing outside /work).
 * The paths were checked by the callers; a file's errno is worded as for the namespaces tier,
 * a failure of the channel comes with its own message. */
static int vm_file_error(int r, const char *verb, const char *path, struct airlock_error *err)
{
        if (err && err->msg[0])
                return r;
        if (r == -ENXIO)
                r = -EINVAL;
        return airlock_error_set(err, r, "cannot %s '%s': %s", verb, path,
                                 r == -EINVAL ? "not a regular file" : errno_word(r));
}

static uint64_t vm_read_max(const struct sandbox *sb, uint64_t max_bytes)
{
        uint64_t work = sb->profile->limits.workspace_bytes;

        return work && work < max_bytes ? work : max_bytes;
}

static int vm_file_read(struct sandbox *sb, const char *path, size_t max_bytes, char **ret_data,
                        size_t *ret_len, struct airlock_error *err)
{
        uint64_t size = 0;
        int r;

        if (err)
                err->msg[0] = '\0';
        /* No file of /work is larger than the workspace: the guest is not asked for more. */
        r = vm_files_read(sb->vm_files, path, vm_read_max(sb, max_bytes), ret_data, ret_len, &size,
                          err);
        if (r == -EISDIR && !(err && err->msg[0]))
                return airlock_error_set(err, r, "'%s' is a directory", path);
        if (r == -EFBIG && !(err && err->msg[0]))
                return airlock_error_set(err, r, "'%s' is larger than %zu bytes", path, max_bytes);
        return r < 0 ? vm_file_error(r, "read", path, err) : 0;
}

static int vm_file_open(struct sandbox *sb, const char *path, size_t max_bytes, int *ret_fd,
                        uint64_t *ret_size, struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        uint64_t size = 0;
        int r;

        /* The content lands in a sealed memfd as it arrives (the daemon's memory, at most the
         * workspace's size), which the caller streams from. */
        fd = memfd_create("airlock-vm-file", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return airlock_error_set(err, -errno, "cannot read '%s': memfd: %m", path);
        if (err)
                err->msg[0] = '\0';
        r = vm_files_read_to_fd(sb->vm_files, path, vm_read_max(sb, max_bytes), fd, &size, err);
        if (r == -EISDIR && !(err && err->msg[0]))
                return airlock_error_set(err, r, "'%s' is a directory", path);
        if (r == -EFBIG && !(err && err->msg[0]))
                return airlock_error_set(err, r, "'%s' is larger than %zu bytes", path, max_bytes);
        if (r < 0)
                return vm_file_error(r, "read", path, err);
        if (lseek(fd, 0, SEEK_SET) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                return airlock_error_set(err, -errno, "cannot read '%s': %m", path);
        *ret_size = size;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int vm_file_write(struct sandbox *sb, const char *path, const void *data, size_t len,
                         struct airlock_error *err)
{
        int r;

        if (err)
                err->msg[0] = '\0';
        r = vm_files_write(sb->vm_files, path, data, len, err);
        if (r == -EISDIR && !(err && err->msg[0]))
                return airlock_error_set(err, r, "cannot write '%s': not a regular file", path);
        return r < 0 ? vm_file_error(r, "write", path, err) : 0;
}

static int vm_file_delete(struct sandbox *sb, const char *path, uint64_t timeout_ms,
                          struct tree_removal *ret_removal, struct airlock_error *err)
{
        struct tree_removal t = { 0 };
        int r;

        if (err)
                err->msg[0] = '\0';
        r = vm_files_delete(sb->vm_files, path, timeout_ms, &t.removed, &t.left, err);
        if (ret_removal)
                *ret_removal = t;
        if (r == -ENOTEMPTY && !(err && err->msg[0])) {
                t.why = -ETIME;
                return airlock_error_set(err, r,
                                         "partial delete of '%.200s': %llu entries were removed "
                                         "and %llu are left (the time ran out, the tree is "
                                         "deeper than %u levels, or code in the session is "
                                         "writing into it); delete it again to go on",
                                         path, (unsigned long long) t.removed,
                                         (unsigned long long) t.left, 128u);
        }
        return r < 0 ? vm_file_error(r, "delete", path, err) : 0;
}

static json_t *listing_entry(const char *name, const char *rel, const struct stat *st);

struct vm_list_ctx {
        const char *dir;
        json_t *entries;
};

static int vm_list_one(void *ctx, const char *name, uint8_t type, uint64_t size, int64_t mtime)
{
        struct vm_list_ctx *c = ctx;
        struct stat st = { 0 };
        char rel[4400];
        json_t *e;

        st.st_mode = type == 1 ? S_IFREG : type == 2 ? S_IFDIR : type == 3 ? S_IFLNK : S_IFIFO;
        st.st_size = (off_t) (size > INT64_MAX ? INT64_MAX : size);
        st.st_mtim.tv_sec = (time_t) mtime;
        (void) snprintf(rel, sizeof(rel), "%s%s%s", c->dir, *c->dir ? "/" : "", name);
        e = listing_entry(name, rel, &st);
        if (e)
                json_array_append_new(c->entries, e);
        return 0;
}

static int vm_file_list(struct sandbox *sb, const char *dir_path, json_t **ret_listing,
                        struct airlock_error *err)
{
        struct vm_list_ctx c = { .dir = dir_path, .entries = json_array() };
        _cleanup_free_ char *clean_dir = NULL;
        bool truncated = false;
        int r;

        if (!c.entries)
                return -ENOMEM;
        if (err)
                err->msg[0] = '\0';
        r = vm_files_list(sb->vm_files, dir_path, COPY_OUT_MAX_FILES, vm_list_one, &c, &truncated,
                          err);
        if (r < 0) {
                json_decref(c.entries);
                if (r == -ENOTDIR && !(err && err->msg[0]))
                        return airlock_error_set(err, r, "cannot list '%s': %s", dir_path,
                                                 errno_word(r));
                return vm_file_error(r, "list", dir_path, err);
        }
        clean_dir = utf8_sanitize(dir_path, strlen(dir_path));
        *ret_listing = json_pack("{s:s, s:o, s:b}", "dir", clean_dir ? clean_dir : "", "entries",
                                 c.entries, "truncated", truncated);
        return *ret_listing ? 0 : -ENOMEM;
}

int sandbox_file_open(struct sandbox *sb, const char *path, size_t max_bytes, int *ret_fd,
                      uint64_t *ret_size, struct airlock_error *err)
{
        _cleanup_close_ int work = -EBADF, fd = -EBADF;
        struct stat st;

        if (!workspace_path_is_valid(path, false))
                return airlock_error_set(err, -EINVAL, "'%s' is not a valid path in /work", path);
        if (sb->vm_files)
                return vm_file_open(sb, path, max_bytes, ret_fd, ret_size, err);
        work = workspace_open(sb, err);
        if (work < 0)
                return work;
        fd = workspace_openat2(work, path, O_RDONLY | O_NONBLOCK, 0);
        if (fd == -ENXIO) /* a unix socket */
                return airlock_error_set(err, -EINVAL, "'%s' is not a regular file", path);
        if (fd < 0)
                return airlock_error_set(err, fd, "cannot read '%s': %s", path, errno_word(fd));
        if (fstat(fd, &st) < 0)
                return airlock_error_set(err, -errno, "cannot read '%s': %m", path);
        if (S_ISDIR(st.st_mode))
                return airlock_error_set(err, -EISDIR, "'%s' is a directory", path);
        if (!S_ISREG(st.st_mode))
                return airlock_error_set(err, -EINVAL, "'%s' is not a regular file", path);
        if ((uint64_t) st.st_size > max_bytes)
                return airlock_error_set(err, -EFBIG, "'%s' is larger than %zu bytes", path,
                                         max_bytes);
        /* A regular file: reads no longer need to dodge a FIFO. */
        if (fcntl(fd, F_SETFL, 0) < 0)
                return airlock_error_set(err, -errno, "cannot read '%s': %m", path);
        *ret_size = (uint64_t) st.st_size;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int sandbox_file_read(struct sandbox *sb, const char *path, size_t max_bytes, char **ret_data,
                      size_t *ret_len, struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        uint64_t size = 0;
        size_t got = 0;
        int r;

        if (sb->vm_files) {
                if (!workspace_path_is_valid(path, false))
                        return airlock_error_set(err, -EINVAL, "'%s' is not a valid path in /work",
                                                 path);
                return vm_file_read(sb, path, max_bytes, ret_data, ret_len, err);
        }
        r = sandbox_file_open(sb, path, max_bytes, &fd, &size, err);
        if (r < 0)
                return r;
        buf = malloc((size_t) size + 1);
        if (!buf)
                return -ENOMEM;
        while (got < (size_t) size) {
                ssize_t n = read(fd, buf + got, (size_t) size - got);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return airlock_error_set(err, -errno, "cannot read '%s': %m", path);
                }
                if (n == 0)
                        break; /* shrank while we read: return what is there */
                got += (size_t) n;
        }
        buf[got] = '\0'; /* the data may be binary; the terminator is for text callers */
        *ret_len = got;
        *ret_data = TAKE_PTR(buf);
        return 0;
}

/* The write by the daemon itself, while the runner is busy with a cell. */
static int write_direct(struct sandbox *sb, const char *path, const void *data, size_t len,
                        struct airlock_error *err)
{
        _cleanup_close_ int work = -EBADF, dir = -EBADF, fd = -EBADF;
        struct fsid fsid = { 0 };
        const char *name;
        struct stat st;
        int r;

        work = workspace_open(sb, err);
        if (work < 0)
                return work;
        /* Directories and the file are made as the sandbox user (see fsid_enter). */
        workspace_fsid_enter(sb, &fsid);
        dir = open_parent(sb, work, path, true, &name, &fsid);
        /* O_NONBLOCK: a FIFO planted by the code must not hold this thread (and the session)
         * until someone reads it; whatever is not a regular file is refused below. */
        fd = dir < 0 ? dir : workspace_openat2(dir, name, O_WRONLY | O_CREAT | O_NONBLOCK, 0644);
        workspace_fsid_leave(&fsid);
        if (dir < 0)
                return airlock_error_set(err, dir, "cannot create the directories of '%s': %s",
                                         path, errno_word(dir));
        if (fd < 0)
                return airlock_error_set(err, fd == -ENXIO ? -EINVAL : fd, "cannot write '%s': %s",
                                         path,
                                         fd == -ENXIO ? "not a regular file" : errno_word(fd));
        if (fstat(fd, &st) < 0)
                return airlock_error_set(err, -errno, "cannot write '%s': %m", path);
        if (!S_ISREG(st.st_mode))
                return airlock_error_set(err, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
                                         "cannot write '%s': not a regular file", path);
        if (ftruncate(fd, 0) < 0 || fcntl(fd, F_SETFL, 0) < 0)
                return airlock_error_set(err, -errno, "cannot write '%s': %m", path);
        r = write_full(fd, data, len);
        if (r < 0)
                return airlock_error_set(err, r, "cannot write '%s': %s", path, errno_word(r));
        /* Owned by the sandbox user, so code can change or delete what it was given. */
        r = hand_over(sb, &fsid, fd);
        if (r < 0)
                return airlock_error_set(err, r, "cannot chown '%s': %s", path, strerror(-r));
        return 0;
}

/* Room kept for the runner itself above what the file needs: an upload must not be what drives
 * the session into its OOM killer. */
#define PUT_MEMORY_HEADROOM (16u << 20)

int sandbox_file_write(struct sandbox *sb, const char *path, const void *data, size_t len,
                       bool runner_busy, struct airlock_error *err)
{
        const uint64_t limit = sb->profile->limits.memory_bytes;
        struct cgroup_usage usage;
        int r, wr;

        if (!workspace_path_is_valid(path, false))
                return airlock_error_set(err, -EINVAL, "'%s' is not a valid path in /work", path);
        if (len > sb->profile->limits.workspace_bytes)
                return airlock_error_set(err, -EFBIG,
                                         "%zu bytes is more than the workspace holds (%llu)", len,
                                         (unsigned long long) sb->profile->limits.workspace_bytes);
        /* A microVM: the guest's file server writes it, whether or not a cell runs; its /work
         * is a tmpfs of the workspace's size in the guest's memory, which says ENOSPC when
         * full (QEMU's cgroup, which holds the guest's RAM whole, says nothing about it). */
        if (sb->vm_files)
                return vm_file_write(sb, path, data, len, err);
        /* The file's pages will count against the session's memory: refuse what cannot fit
         * rather than have the session killed for it. */
        if (limit && sandbox_usage(sb, &usage) >= 0 &&
            usage.memory_current + sb->daemon_written + len + PUT_MEMORY_HEADROOM > limit)
                return airlock_error_set(
                        err, -ENOSPC,
                        "'%s' (%zu bytes) does not fit in the session's memory: "
                        "%llu of its %llu bytes are in use (its files in /work "
                        "count too)",
                        path, len, (unsigned long long) (usage.memory_current + sb->daemon_written),
                        (unsigned long long) limit);
        /* A cell runs: its runner cannot take the file, the daemon writes it and keeps count. */
        if (runner_busy) {
                r = write_direct(sb, path, data, len, err);
                if (r >= 0)
                        sb->daemon_written += len;
                return r;
        }
        r = sandbox_put(sb, path, data, len, &wr, err);
        if (r < 0)
                return r;
        if (wr < 0)
                return airlock_error_set(err, wr, "cannot write '%s': %s", path, errno_word(wr));
        return 0;
}

int sandbox_file_delete(struct sandbox *sb, const char *path, uint64_t timeout_ms,
                        struct tree_removal *ret_removal, struct airlock_error *err)
{
        _cleanup_close_ int work = -EBADF, dir = -EBADF;
        struct tree_removal t = { 0 };
        const char *name;
        struct stat st;
        int r;

        if (ret_removal)
                *ret_removal = t;
        if (!workspace_path_is_valid(path, false))
                return airlock_error_set(err, -EINVAL, "'%s' is not a valid path in /work", path);
        if (sb->vm_files) {
                if (timeout_ms == 0 || timeout_ms > WORKSPACE_DELETE_TIME_MAX_MS)
                        timeout_ms = WORKSPACE_DELETE_TIME_MAX_MS;
                return vm_file_delete(sb, path, timeout_ms, ret_removal, err);
        }
        work = workspace_open(sb, err);
        if (work < 0)
                return work;
        dir = open_parent(sb, work, path, false, &name, &(struct fsid){ 0 });
        if (dir < 0)
                return airlock_error_set(err, dir, "cannot delete '%s': %s", path, errno_word(dir));
        /* Missing is 404; whatever it is, the removal below follows nothing (a symlink itself
         * is removed, never what it points to). */
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return airlock_error_set(err, -errno, "cannot delete '%s': %s", path,
                                         errno_word(-errno));
        if (timeout_ms == 0 || timeout_ms > WORKSPACE_DELETE_TIME_MAX_MS)
                timeout_ms = WORKSPACE_DELETE_TIME_MAX_MS;
        r = workspace_tree_remove(sb, dir, name, now_ns() + timeout_ms * 1000000ULL, &t);
        if (ret_removal)
                *ret_removal = t;
        if (r == -ENOTEMPTY)
                return airlock_error_set(err, r,
                                         "partial delete of '%.200s': %llu entries were removed "
                                         "and %llu are left, because %s",
                                         path, (unsigned long long) t.removed,
                                         (unsigned long long) t.left, workspace_tree_why(&t));
        if (r < 0)
                return airlock_error_set(err, r, "cannot delete '%s': %s", path, errno_word(r));
        return 0;
}

static const char *file_type(mode_t mode)
{
        if (S_ISREG(mode))
                return "file";
        if (S_ISDIR(mode))
                return "directory";
        if (S_ISLNK(mode))
                return "symlink";
        return "other";
}

/* A name (or path) as URL text: bytes other than unreserved ASCII and '/' as %XX. The file
 * routes percent-decode their path, so this reaches a name that is not valid UTF-8. */
static char *percent_encode(const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t n = strlen(s), o = 0;
        char *out = malloc(3 * n + 1);

        if (!out)
                return NULL;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
                        out[o++] = (char) *p;
                } else {
                        out[o++] = '%';
                        out[o++] = hex[*p >> 4];
                        out[o++] = hex[*p & 15];
                }
        }
        out[o] = '\0';
        return out;
}

/* name and path as JSON text, plus "raw_path" (percent-encoded, lossless) when the path is not
 * valid UTF-8 and so "path" had to replace bytes with U+FFFD. */
static json_t *listing_entry(const char *name, const char *rel, const struct stat *st)
{
        _cleanup_free_ char *clean_name = utf8_sanitize(name, strlen(name));
        _cleanup_free_ char *clean_rel = utf8_sanitize(rel, strlen(rel));
        char when[32];
        struct tm tm;
        json_t *o;

        if (!clean_name || !clean_rel)
                return NULL;
        (void) gmtime_r(&st->st_mtim.tv_sec, &tm);
        (void) strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        o = json_pack("{s:s, s:s, s:s, s:I, s:s}", "name", clean_name, "path", clean_rel, "type",
                      file_type(st->st_mode), "size", (json_int_t) st->st_size, "modified_at",
                      when);
        if (o && strcmp(clean_rel, rel) != 0) {
                _cleanup_free_ char *raw = percent_encode(rel);
                if (raw)
                        json_object_set_new(o, "raw_path", json_string(raw));
        }
        return o;
}

int sandbox_file_list(struct sandbox *sb, const char *dir_path, json_t **ret_listing,
                      struct airlock_error *err)
{
        _cleanup_close_ int work = -EBADF, fd = -EBADF;
        _cleanup_free_ char *clean_dir = NULL;
        json_t *entries;
        struct dirent *de;
        bool truncated = false;
        DIR *d;

        if (!dir_path)
                dir_path = "";
        if (!workspace_path_is_valid(dir_path, true))
                return airlock_error_set(err, -EINVAL, "'%s' is not a valid path in /work",
                                         dir_path);
        if (sb->vm_files)
                return vm_file_list(sb, dir_path, ret_listing, err);
        work = workspace_open(sb, err);
        if (work < 0)
                return work;
        fd = *dir_path ? workspace_openat2(work, dir_path, O_RDONLY | O_DIRECTORY, 0)
                       : fcntl(work, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return airlock_error_set(err, fd < -1 ? fd : -errno, "cannot list '%s': %s",
                                         dir_path, errno_word(fd < -1 ? fd : -errno));
        d = fdopendir(fd);
        if (!d)
                return airlock_error_set(err, -errno, "cannot list '%s': %m", dir_path);
        fd = -EBADF; /* owned by d */
        entries = json_array();
        while ((de = readdir(d))) {
                struct stat st;
                char rel[4400];
                json_t *e;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (json_array_size(entries) >= COPY_OUT_MAX_FILES) {
                        truncated = true; /* said so in the answer, never silently */
                        break;
                }
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                (void) snprintf(rel, sizeof(rel), "%s%s%s", dir_path, *dir_path ? "/" : "",
                                de->d_name);
                e = listing_entry(de->d_name, rel, &st);
                if (e)
                        json_array_append_new(entries, e);
        }
        closedir(d);
        clean_dir = utf8_sanitize(dir_path, strlen(dir_path));
        *ret_listing = json_pack("{s:s, s:o, s:b}", "dir", clean_dir ? clean_dir : "", "entries",
                                 entries, "truncated", truncated);
        return *ret_listing ? 0 : -ENOMEM;
}
