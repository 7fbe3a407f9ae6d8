/* See files.h. */
#include "files.h"

#include "base/cleanup.h"
#include "base/util.h"
#include "files-proto.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct vm_files {
        pthread_mutex_t lock;
        int fd;
        uint32_t seq;
        /* Why the channel broke ("" while it works): every later call fails with it. */
        char broken[200];
};

struct vm_files *vm_files_new(int fd)
{
        struct vm_files *vf = calloc(1, sizeof(*vf));

        if (!vf) {
                (void) close(fd);
                return NULL;
        }
        (void) pthread_mutex_init(&vf->lock, NULL);
        vf->fd = fd;
        (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        return vf;
}

struct vm_files *vm_files_free(struct vm_files *vf)
{
        if (!vf)
                return NULL;
        (void) close(vf->fd);
        (void) pthread_mutex_destroy(&vf->lock);
        free(vf);
        return NULL;
}

static int broke(struct vm_files *vf, int r, struct airlock_error *err, const char *why)
{
        (void) snprintf(vf->broken, sizeof(vf->broken), "%s", why);
        (void) shutdown(vf->fd, SHUT_RDWR);
        return airlock_error_set(err, r,
                                 "the microVM's file channel failed: %s; the session's files "
                                 "are unreachable from now on (its cells still run)",
                                 why);
}

static uint64_t deadline_for(uint64_t bytes)
{
        return now_ns() + (VM_FILES_TIMEOUT_MS + (bytes >> 20) * 1000ULL) * 1000000ULL;
}

/* Moves len bytes to or from the channel before deadline. 0, or broke() with err set. */
static int xfer(struct vm_files *vf, bool out, void *buf, size_t len, uint64_t deadline,
                struct airlock_error *err)
{
        char *p = buf;

        while (len > 0) {
                struct pollfd pfd = { .fd = vf->fd, .events = out ? POLLOUT : POLLIN };
                uint64_t now = now_ns();
                ssize_t n;
                int k;

                if (now >= deadline)
                        return broke(vf, -ETIMEDOUT, err, "the guest did not answer in time");
                k = poll(&pfd, 1, (int) ((deadline - now) / 1000000ULL) + 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return broke(vf, -errno, err, "poll failed");
                if (k == 0)
                        continue;
                n = out ? send(vf->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(vf->fd, p, len, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0)
                        return broke(vf, -EPIPE, err, "the guest closed it (the VM ended?)");
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

/* Sends a request (and, for a write, its content) and takes the answer's header. */
static int request(struct vm_files *vf, uint32_t op, const char *path, uint64_t arg,
                   const void *content, size_t content_len, uint64_t deadline,
                   struct vmf_resp *ret_resp, struct airlock_error *err)
{
        size_t path_len = strlen(path);
        struct vmf_req q = {
                .magic = htole32(VMF_MAGIC),
                .op = htole32(op),
                .seq = htole32(++vf->seq),
                .path_len = htole32((uint32_t) path_len),
                .arg = htole64(arg),
        };
        int r;

        if (vf->broken[0])
                return airlock_error_set(err, -EIO,
                                         "the microVM's file channel failed earlier (%s): the "
                                         "session's files are unreachable",
                                         vf->broken);
        if (path_len > VMF_PATH_MAX)
                return -ENAMETOOLONG;
        r = xfer(vf, true, &q, sizeof(q), deadline, err);
        if (r >= 0)
                r = xfer(vf, true, (void *) path, path_len, deadline, err);
        if (r >= 0 && content_len)
                r = xfer(vf, true, (void *) content, content_len, deadline, err);
        if (r >= 0)
                r = xfer(vf, false, ret_resp, sizeof(*ret_resp), deadline, err);
        if (r < 0)
                return r;
        ret_resp->magic = le32toh(ret_resp->magic);
        ret_resp->seq = le32toh(ret_resp->seq);
        ret_resp->status = (int32_t) le32toh((uint32_t) ret_resp->status);
        ret_resp->len = le64toh(ret_resp->len);
        ret_resp->aux = le64toh(ret_resp->aux);
        ret_resp->aux2 = le64toh(ret_resp->aux2);
        if (ret_resp->magic != VMF_MAGIC || ret_resp->seq != vf->seq)
                return broke(vf, -EIO, err,
                             "the guest's answer is not one (bad magic or sequence)");
        /* A file's errno is negative and small; anything else is no errno. */
        if (ret_resp->status > 0 || ret_resp->status < -4095)
                return broke(vf, -EIO, err, "the guest's answer has no valid status");
        if (ret_resp->status < 0 && ret_resp->len != 0)
                return broke(vf, -EIO, err, "the guest's error answer carries data");
        return 0;
}

/* READ's chunks into a growing buffer (*buf) or, when out_fd >= 0, into out_fd. The buffer
 * grows with what arrives, never with what the guest says the size is. */
static int read_chunks(struct vm_files *vf, uint64_t max, uint64_t deadline, char **buf, int out_fd,
                       uint64_t *ret_got, struct airlock_error *err)
{
        static const size_t first = 64u * 1024u;
        _cleanup_free_ char *chunk = out_fd >= 0 ? malloc(VMF_CHUNK_MAX) : NULL;
        size_t cap = 0;
        uint64_t got = 0;

        if (out_fd >= 0 && !chunk)
                return broke(vf, -ENOMEM, err, "out of memory for the file");
        for (;;) {
                uint32_t n_le, n;
                int r = xfer(vf, false, &n_le, 4, deadline, err);
                if (r < 0)
                        return r;
                n = le32toh(n_le);
                if (n == 0)
                        break;
                if (n > VMF_CHUNK_MAX || got + n > max)
                        return broke(vf, -EIO, err, "the guest sent more than was asked for");
                if (out_fd >= 0) {
                        r = xfer(vf, false, chunk, n, deadline, err);
                        if (r >= 0 && (r = write_full(out_fd, chunk, n)) < 0)
                                return broke(vf, r, err, "cannot keep the file's content");
                } else {
                        if (got + n + 1 > cap) {
                                size_t want = cap ? cap * 2 : first;
                                char *bigger;
                                while (want < got + n + 1)
                                        want *= 2;
                                bigger = realloc(*buf, want);
                                if (!bigger)
                                        return broke(vf, -ENOMEM, err,
                                                     "out of memory for the file");
                                *buf = bigger;
                                cap = want;
                        }
                        r = xfer(vf, false, *buf + got, n, deadline, err);
                }
                if (r < 0)
                        return r;
                got += n;
        }
        *ret_got = got;
        return 0;
}

static int read_file(struct vm_files *vf, const char *path, uint64_t max, char **buf, int out_fd,
                     uint64_t *ret_got, uint64_t *ret_size, struct airlock_error *err)
{
        struct vmf_resp a;
        int r;

        if (max > SIZE_MAX / 2)
                max = SIZE_MAX / 2;
        pthread_mutex_lock(&vf->lock);
        r = request(vf, VMF_READ, path, max, NULL, 0, deadline_for(0), &a, err);
        if (r >= 0 && ret_size)
                *ret_size = a.aux;
        if (r >= 0 && a.status >= 0 && a.len != 0)
                r = broke(vf, -EIO, err, "the guest's read answer is malformed");
        if (r >= 0 && a.status >= 0)
                r = read_chunks(vf, max, deadline_for(a.aux < max ? a.aux : max), buf, out_fd,
                                ret_got, err);
        pthread_mutex_unlock(&vf->lock);
        return r < 0 ? r : a.status;
}

int vm_files_read(struct vm_files *vf, const char *path, uint64_t max, char **ret_data,
                  size_t *ret_len, uint64_t *ret_size, struct airlock_error *err)
{
        _cleanup_free_ char *buf = NULL;
        uint64_t got = 0;
        int r;

        r = read_file(vf, path, max, &buf, -1, &got, ret_size, err);
        if (r < 0)
                return r;
        if (!buf && !(buf = malloc(1)))
                return -ENOMEM;
        buf[got] = '\0';
        *ret_len = (size_t) got;
        if (ret_size)
                *ret_size = got;
        *ret_data = TAKE_PTR(buf);
        return 0;
}

int vm_files_read_to_fd(struct vm_files *vf, const char *path, uint64_t max, int out_fd,
                        uint64_t *ret_size, struct airlock_error *err)
{
        uint64_t got = 0;
        int r;

        r = read_file(vf, path, max, NULL, out_fd, &got, ret_size, err);
        if (r >= 0 && ret_size)
                *ret_size = got;
        return r;
}

int vm_files_write(struct vm_files *vf, const char *path, const void *data, size_t len,
                   struct airlock_error *err)
{
        struct vmf_resp a;
        int r;

        pthread_mutex_lock(&vf->lock);
        r = request(vf, VMF_WRITE, path, len, data, len, deadline_for(len), &a, err);
        if (r >= 0 && a.len != 0)
                r = broke(vf, -EIO, err, "the guest's write answer is malformed");
        pthread_mutex_unlock(&vf->lock);
        return r < 0 ? r : a.status;
}

int vm_files_list(struct vm_files *vf, const char *dir, unsigned max,
                  int (*each)(void *ctx, const char *name, uint8_t type, uint64_t size,
                              int64_t mtime),
                  void *ctx, bool *ret_truncated, struct airlock_error *err)
{
        _cleanup_free_ char *buf = NULL;
        struct vmf_resp a;
        size_t off = 0;
        int r;

        if (max > VMF_LIST_MAX)
                max = VMF_LIST_MAX;
        pthread_mutex_lock(&vf->lock);
        r = request(vf, VMF_LIST, dir, max, NULL, 0, deadline_for(0), &a, err);
        if (r >= 0 && a.status >= 0 && a.len > VMF_LIST_BYTES_MAX)
                r = broke(vf, -EIO, err, "the guest's listing is larger than any can be");
        if (r >= 0 && a.status >= 0) {
                buf = malloc((size_t) a.len + 1);
                r = buf ? xfer(vf, false, buf, (size_t) a.len, deadline_for(a.len), err)
                        : broke(vf, -ENOMEM, err, "out of memory for the listing");
        }
        pthread_mutex_unlock(&vf->lock);
        if (r < 0)
                return r;
        if (a.status < 0)
                return a.status;
        *ret_truncated = a.aux != 0;
        for (unsigned n = 0; off < a.len; n++) {
                struct vmf_entry e;
                char name[VMF_NAME_MAX + 1];
                size_t name_len;
                if (n >= max || a.len - off < sizeof(e))
                        return airlock_error_set(err, -EIO, "the guest's listing is malformed");
                memcpy(&e, buf + off, sizeof(e));
                name_len = le16toh(e.name_len);
                off += sizeof(e);
                if (name_len == 0 || name_len > VMF_NAME_MAX || a.len - off < name_len)
                        return airlock_error_set(err, -EIO, "the guest's listing is malformed");
                memcpy(name, buf + off, name_len);
                name[name_len] = '\0';
                off += name_len;
                if (memchr(name, '\0', name_len) || strchr(name, '/') || strcmp(name, ".") == 0 ||
                    strcmp(name, "..") == 0)
                        return airlock_error_set(err, -EIO,
                                                 "the guest's listing names an impossible entry");
                r = each(ctx, name, e.type, le64toh(e.size), (int64_t) le64toh((uint64_t) e.mtime));
                if (r < 0)
                        return r;
        }
        return 0;
}

int vm_files_delete(struct vm_files *vf, const char *path, uint64_t timeout_ms,
                    uint64_t *ret_removed, uint64_t *ret_left, struct airlock_error *err)
{
        struct vmf_resp a;
        int r;

        pthread_mutex_lock(&vf->lock);
        /* The guest gets timeout_ms for the removal; the answer, the usual allowance beyond. */
        r = request(vf, VMF_DELETE, path, timeout_ms, NULL, 0,
                    deadline_for(0) + timeout_ms * 1000000ULL, &a, err);
        pthread_mutex_unlock(&vf->lock);
        if (r < 0)
                return r;
        *ret_removed = a.aux;
        *ret_left = a.aux2;
        return a.status;
}
