/* The guest's file server (files-proto.h): a child of init serving the daemon's requests on the
 * "airlock.files" port, in /work, as the runner's filesystem uid. */
#include "files-proto.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RESOLVE_STRICT                                                                             \
        (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int work_fd = -1;
static char buf[VMF_CHUNK_MAX];

static int beneath(int dirfd, const char *path, int flags, mode_t mode)
{
        struct open_how how = {
                .flags = (uint64_t) flags | O_CLOEXEC | O_NOFOLLOW,
                .mode = (flags & O_CREAT) ? mode : 0,
                .resolve = RESOLVE_STRICT,
        };
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

        return fd < 0 ? -errno : (int) fd;
}

static uint64_t now_ms(void)
{
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* 0, or -1 when the host closed the port (the server exits). */
static int get(int port, void *p, size_t len)
{
        char *c = p;

        while (len > 0) {
                ssize_t n = read(port, c, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                c += n;
                len -= (size_t) n;
        }
        return 0;
}

static int put(int port, const void *p, size_t len)
{
        const char *c = p;

        while (len > 0) {
                ssize_t n = write(port, c, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                c += n;
                len -= (size_t) n;
        }
        return 0;
}

static int answer(int port, uint32_t seq, int status, uint64_t len, uint64_t aux, uint64_t aux2)
{
        struct vmf_resp r = {
                .magic = htole32(VMF_MAGIC),
                .seq = htole32(seq),
                .status = (int32_t) htole32((uint32_t) status),
                .len = htole64(len),
                .aux = htole64(aux),
                .aux2 = htole64(aux2),
        };

        return put(port, &r, sizeof(r));
}

/* Whether path is a relative path of components that are not empty, "." or "..". */
static int path_ok(const char *path, int allow_empty)
{
        const char *p = path;

        if (!*path)
                return allow_empty;
        if (*path == '/')
                return 0;
        for (;;) {
                const char *slash = strchr(p, '/');
                size_t n = slash ? (size_t) (slash - p) : strlen(p);
                if (n == 0 || n > VMF_NAME_MAX || (n == 1 && p[0] == '.') ||
                    (n == 2 && p[0] == '.' && p[1] == '.'))
                        return 0;
                if (!slash)
                        return 1;
                p = slash + 1;
        }
}

/* The directory of path's last component (made when create), and that component. */
static int open_parent(char *path, int create, const char **ret_name)
{
        char *slash = strrchr(path, '/');
        int dir;

        if (!slash) {
                *ret_name = path;
                dir = fcntl(work_fd, F_DUPFD_CLOEXEC, 3);
                return dir < 0 ? -errno : dir;
        }
        *slash = '\0';
        *ret_name = slash + 1;
        dir = fcntl(work_fd, F_DUPFD_CLOEXEC, 3);
        if (dir < 0)
                return -errno;
        for (char *comp = path, *next; comp; comp = next) {
                int sub;
                next = strchr(comp, '/');
                if (next)
                        *next++ = '\0';
                if (create && mkdirat(dir, comp, 0755) < 0 && errno != EEXIST) {
                        int r = -errno;
                        (void) close(dir);
                        return r;
                }
                sub = beneath(dir, comp, O_PATH | O_DIRECTORY, 0);
                (void) close(dir);
                if (sub < 0)
                        return sub;
                dir = sub;
        }
        return dir;
}

static int serve_read(int port, uint32_t seq, const char *path, uint64_t max)
{
        struct stat st = { 0 };
        uint64_t sent = 0;
        uint32_t end = 0;
        int fd;

        if (!path_ok(path, 0))
                return answer(port, seq, -EINVAL, 0, 0, 0);
        fd = beneath(work_fd, path, O_RDONLY | O_NONBLOCK, 0);
        if (fd == -ENXIO) /* a unix socket */
                return answer(port, seq, -EINVAL, 0, 0, 0);
        if (fd < 0)
                return answer(port, seq, fd, 0, 0, 0);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t) st.st_size > max ||
            fcntl(fd, F_SETFL, 0) < 0) {
                int status = S_ISDIR(st.st_mode)    ? -EISDIR
                             : !S_ISREG(st.st_mode) ? -EINVAL
                                                    : -EFBIG;
                (void) close(fd);
                return answer(port, seq, status, 0, (uint64_t) st.st_size, 0);
        }
        if (answer(port, seq, 0, 0, (uint64_t) st.st_size, 0) < 0) {
                (void) close(fd);
                return -1;
        }
        /* What is there now, within max: the code may change the file meanwhile. */
        while (sent < max) {
                size_t want = max - sent < sizeof(buf) ? (size_t) (max - sent) : sizeof(buf);
                ssize_t n = read(fd, buf, want);
                uint32_t len_le;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len_le = htole32((uint32_t) n);
                if (put(port, &len_le, 4) < 0 || put(port, buf, (size_t) n) < 0) {
                        (void) close(fd);
                        return -1;
                }
                sent += (uint64_t) n;
        }
        (void) close(fd);
        return put(port, &end, 4);
}

/* Takes len bytes of content from the port into fd (or drops them when fd < 0); returns 0,
 * the first write's -errno (the rest is still taken), or -1 when the port closed. */
static int take_content(int port, int fd, uint64_t len)
{
        int status = 0;

        while (len > 0) {
                size_t want = len < sizeof(buf) ? (size_t) len : sizeof(buf);
                if (get(port, buf, want) < 0)
                        return -1;
                len -= want;
                for (size_t off = 0; fd >= 0 && status == 0 && off < want;) {
                        ssize_t n = write(fd, buf + off, want - off);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                status = -errno;
                        else
                                off += (size_t) n;
                }
        }
        return status;
}

static int serve_write(int port, uint32_t seq, char *path, uint64_t len)
{
        const char *name;
        struct stat st;
        int dir, fd = -EINVAL, r;

        if (path_ok(path, 0)) {
                dir = open_parent(path, 1, &name);
                fd = dir < 0 ? dir : beneath(dir, name, O_WRONLY | O_CREAT | O_NONBLOCK, 0644);
                if (dir >= 0)
                        (void) close(dir);
                if (fd == -ENXIO)
                        fd = -EINVAL;
        }
        if (fd >= 0) {
                if (fstat(fd, &st) < 0)
                        r = -errno;
                else if (!S_ISREG(st.st_mode))
                        r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
                else if (ftruncate(fd, 0) < 0 || fcntl(fd, F_SETFL, 0) < 0)
                        r = -errno;
                else
                        r = 0;
                if (r < 0) {
                        (void) close(fd);
                        fd = r;
                }
        }
        r = take_content(port, fd, len);
        if (fd >= 0)
                (void) close(fd);
        if (r == -1)
                return -1;
        return answer(port, seq, fd < 0 ? fd : r, 0, 0, 0);
}

static uint8_t entry_type(mode_t mode)
{
        return S_ISREG(mode)   ? VMF_FILE
               : S_ISDIR(mode) ? VMF_DIR
               : S_ISLNK(mode) ? VMF_SYMLINK
                               : VMF_OTHER;
}

/* The listing is built in a buffer of its own (at most VMF_LIST_BYTES_MAX, 2.8 MB) so the
 * answer's length goes first. */
static int serve_list(int port, uint32_t seq, const char *path, uint64_t max)
{
        static char out[VMF_LIST_BYTES_MAX];
        size_t used = 0;
        uint64_t n = 0;
        int truncated = 0, fd;
        struct dirent *de;
        DIR *d;

        if (max > VMF_LIST_MAX)
                max = VMF_LIST_MAX;
        if (!path_ok(path, 1))
                return answer(port, seq, -EINVAL, 0, 0, 0);
        fd = *path ? beneath(work_fd, path, O_RDONLY | O_DIRECTORY, 0)
                   : openat(work_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return answer(port, seq, fd < -1 ? fd : -errno, 0, 0, 0);
        d = fdopendir(fd);
        if (!d) {
                (void) close(fd);
                return answer(port, seq, -ENOMEM, 0, 0, 0);
        }
        while ((de = readdir(d))) {
                struct vmf_entry e = { 0 };
                struct stat st;
                size_t name_len = strlen(de->d_name);
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (n >= max) {
                        truncated = 1;
                        break;
                }
                if (name_len > VMF_NAME_MAX ||
                    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                e.type = entry_type(st.st_mode);
                e.name_len = htole16((uint16_t) name_len);
                e.size = htole64((uint64_t) st.st_size);
                e.mtime = (int64_t) htole64((uint64_t) st.st_mtim.tv_sec);
                memcpy(out + used, &e, sizeof(e));
                memcpy(out + used + sizeof(e), de->d_name, name_len);
                used += sizeof(e) + name_len;
                n++;
        }
        (void) closedir(d);
        if (answer(port, seq, 0, used, (uint64_t) truncated, 0) < 0)
                return -1;
        return put(port, out, used);
}

struct removal {
        uint64_t removed, left, deadline;
        int why;
};

/* Removes name in dir (a directory with everything in it), within the depth and the time;
 * what stays is counted in left. */
static void remove_entry(int dir, const char *name, unsigned depth, struct removal *rm)
{
        struct stat st;
        struct dirent *de;
        DIR *d;
        int fd;

        if (now_ms() > rm->deadline) {
                rm->left++;
                rm->why = rm->why ? rm->why : -ETIME;
                return;
        }
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT) {
                        rm->left++;
                        rm->why = rm->why ? rm->why : -errno;
                }
                return;
        }
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dir, name, 0) == 0 || errno == ENOENT) {
                        rm->removed++;
                } else {
                        rm->left++;
                        rm->why = rm->why ? rm->why : -errno;
                }
                return;
        }
        if (depth >= VMF_DELETE_DEPTH_MAX) {
                rm->left++;
                rm->why = rm->why ? rm->why : -ELOOP;
                return;
        }
        fd = beneath(dir, name, O_RDONLY | O_DIRECTORY, 0);
        d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        (void) close(fd);
                rm->left++;
                rm->why = rm->why ? rm->why : -EACCES;
                return;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        remove_entry(dirfd(d), de->d_name, depth + 1, rm);
        (void) closedir(d);
        if (unlinkat(dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
                rm->removed++;
        } else {
                rm->left++;
                rm->why = rm->why ? rm->why : -errno;
        }
}

static int serve_delete(int port, uint32_t seq, char *path, uint64_t timeout_ms)
{
        struct removal rm = { .deadline = now_ms() + timeout_ms };
        const char *name;
        struct stat st;
        int dir;

        if (!path_ok(path, 0))
                return answer(port, seq, -EINVAL, 0, 0, 0);
        dir = open_parent(path, 0, &name);
        if (dir < 0)
                return answer(port, seq, dir, 0, 0, 0);
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                int r = -errno;
                (void) close(dir);
                return answer(port, seq, r, 0, 0, 0);
        }
        remove_entry(dir, name, 0, &rm);
        (void) close(dir);
        return answer(port, seq, rm.left ? -ENOTEMPTY : 0, 0, rm.removed, rm.left);
}

void vmf_serve(int port, uint32_t uid, const char *work)
{
        static char path[VMF_PATH_MAX + 1];

        (void) prctl(PR_SET_NAME, "airlock-files", 0, 0, 0);
        (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        /* Files as the runner's uid: its permissions, its ownership of what is made, and no
         * capability of root's over files (the kernel clears them with a nonzero fsuid). */
        (void) syscall(SYS_setfsgid, uid);
        (void) syscall(SYS_setfsuid, uid);
        (void) umask(022);
        work_fd = open(work, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (work_fd < 0)
                _exit(1);
        for (;;) {
                struct vmf_req q;
                uint32_t op, seq, path_len;
                uint64_t arg;
                int r;

                if (get(port, &q, sizeof(q)) < 0)
                        _exit(0);
                op = le32toh(q.op);
                seq = le32toh(q.seq);
                path_len = le32toh(q.path_len);
                arg = le64toh(q.arg);
                /* The daemon does not send a wrong request: if it did, the stream is lost. */
                if (le32toh(q.magic) != VMF_MAGIC || path_len > VMF_PATH_MAX)
                        _exit(2);
                if (get(port, path, path_len) < 0)
                        _exit(0);
                path[path_len] = '\0';
                if (memchr(path, '\0', path_len)) {
                        if (op == VMF_WRITE && take_content(port, -1, arg) == -1)
                                _exit(0);
                        r = answer(port, seq, -EINVAL, 0, 0, 0);
                } else if (op == VMF_READ) {
                        r = serve_read(port, seq, path, arg);
                } else if (op == VMF_WRITE) {
                        r = serve_write(port, seq, path, arg);
                } else if (op == VMF_LIST) {
                        r = serve_list(port, seq, path, arg);
                } else if (op == VMF_DELETE) {
                        r = serve_delete(port, seq, path, arg);
                } else {
                        r = answer(port, seq, -EOPNOTSUPP, 0, 0, 0);
                }
                if (r < 0)
                        _exit(0);
        }
}
