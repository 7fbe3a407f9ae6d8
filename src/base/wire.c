/* Length-prefixed JSON frames; see wire.h. */
#include "wire.h"

#include "cleanup.h"
#include "util.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* write_full() that also waits on a non-blocking fd (the daemon's end of a control socket)
 * when a large frame fills the socket buffer, for at most WIRE_SEND_WAIT_MS each time the
 * peer takes nothing: a peer that stops reading ends the send with -ETIMEDOUT instead of
 * holding the sender for ever. */
#define WIRE_SEND_WAIT_MS 30000
static int write_waiting(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                        int k = poll(&pfd, 1, WIRE_SEND_WAIT_MS);
                        if (k < 0 && errno != EINTR)
                                return -errno;
                        if (k == 0)
                                return -ETIMEDOUT;
                        continue;
                }
                if (n < 0)
                        return -errno;
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

int wire_send(int fd, const json_t *obj)
{
        _cleanup_free_ char *text = NULL;
        uint32_t len_le;
        size_t len;
        ssize_t n;
        int r;

        text = json_dumps(obj, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        len = strlen(text);
        if (len > WIRE_FRAME_MAX)
                return -E2BIG;
        len_le = htole32((uint32_t) len);
        /* One writev: a frame that fits the socket buffer goes in one piece, so another writer
         * of the same socket (user code owns the runner's end, fd 3) cannot land inside it. */
        do
                n = writev(fd, (struct iovec[2]){ { &len_le, sizeof(len_le) }, { text, len } }, 2);
        while (n < 0 && errno == EINTR);
        if (n < 0 && errno == EAGAIN)
                n = 0; /* the buffer is full: wait for room below */
        else if (n < 0)
                return -errno;
        if ((size_t) n < sizeof(len_le)) {
                r = write_waiting(fd, (char *) &len_le + n, sizeof(len_le) - (size_t) n);
                if (r < 0)
                        return r;
                n = sizeof(len_le);
        }
        return write_waiting(fd, text + ((size_t) n - sizeof(len_le)),
                             len - ((size_t) n - sizeof(len_le)));
}

int wire_recv(int fd, size_t max, json_t **ret_obj)
{
        _cleanup_free_ char *buf = NULL;
        json_error_t jerr;
        uint32_t len_le;
        size_t len;
        json_t *obj;
        int r;

        /* EOF before the first byte is the peer closing between frames; EOF inside the length
         * prefix is a truncated frame. */
        r = read_full(fd, &len_le, 1);
        if (r < 0)
                return r;
        r = read_full(fd, (char *) &len_le + 1, sizeof(len_le) - 1);
        if (r < 0)
                return r == -EPIPE ? -EBADMSG : r;
        len = le32toh(len_le);
        if (len > max || len > WIRE_FRAME_MAX)
                return -E2BIG;
        buf = malloc(len + 1);
        if (!buf)
                return -ENOMEM;
        r = read_full(fd, buf, len);
        if (r < 0)
                return r == -EPIPE ? -EBADMSG : r;
        obj = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!obj)
                return -EBADMSG;
        if (!json_is_object(obj)) {
                json_decref(obj);
                return -EBADMSG;
        }
        *ret_obj = obj;
        return 0;
}

int wire_send_ex(int fd, const json_t *obj, const int *fds, size_t n_fds, bool creds)
{
        _cleanup_free_ char *text = NULL;
        union {
                char buf[CMSG_SPACE(sizeof(int) * WIRE_FDS_MAX) + CMSG_SPACE(sizeof(struct ucred))];
                struct cmsghdr align;
        } control;
        struct msghdr msg = { 0 };
        struct cmsghdr *cmsg;
        struct iovec iov[2];
        uint32_t len_le;
        size_t len, controllen = 0;
        ssize_t n;

        if (n_fds > WIRE_FDS_MAX)
                return -EINVAL;
        text = json_dumps(obj, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        len = strlen(text);
        if (len > WIRE_FRAME_MAX)
                return -E2BIG;
        len_le = htole32((uint32_t) len);
        iov[0] = (struct iovec){ .iov_base = &len_le, .iov_len = sizeof(len_le) };
        iov[1] = (struct iovec){ .iov_base = text, .iov_len = len };
        memset(&control, 0, sizeof(control));
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        cmsg = CMSG_FIRSTHDR(&msg);
        if (n_fds > 0) {
                cmsg->cmsg_level = SOL_SOCKET;
                cmsg->cmsg_type = SCM_RIGHTS;
                cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n_fds);
                controllen += CMSG_SPACE(sizeof(int) * n_fds);
                cmsg = CMSG_NXTHDR(&msg, cmsg);
        }
        if (creds) {
                struct ucred uc = { .pid = getpid(), .uid = getuid(), .gid = getgid() };
                cmsg->cmsg_level = SOL_SOCKET;
                cmsg->cmsg_type = SCM_CREDENTIALS;
                cmsg->cmsg_len = CMSG_LEN(sizeof(uc));
                memcpy(CMSG_DATA(cmsg), &uc, sizeof(uc));
                controllen += CMSG_SPACE(sizeof(uc));
        }
        msg.msg_controllen = controllen;
        if (controllen == 0)
                msg.msg_control = NULL;
        do
                n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        /* The ancillary data went with the first bytes; the rest is a plain stream. */
        if ((size_t) n < sizeof(len_le))
                return -EIO;
        return write_full(fd, text + ((size_t) n - sizeof(len_le)),
                          len - ((size_t) n - sizeof(len_le)));
}

int wire_recv_ex(int fd, size_t max, json_t **ret_obj, int *ret_fds, size_t max_fds,
                 size_t *ret_n_fds, pid_t *ret_pid)
{
        union {
                char buf[CMSG_SPACE(sizeof(int) * WIRE_FDS_MAX) + CMSG_SPACE(sizeof(struct ucred))];
                struct cmsghdr align;
        } control;
        _cleanup_free_ char *buf = NULL;
        struct msghdr msg = { 0 };
        struct iovec iov;
        uint32_t len_le;
        size_t len, n_fds = 0;
        pid_t pid = -1;
        json_t *obj;
        ssize_t n;
        int r;

        iov = (struct iovec){ .iov_base = &len_le, .iov_len = sizeof(len_le) };
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        do
                n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        int *fds = (int *) CMSG_DATA(c);
                        for (size_t i = 0; i < k; i++) {
                                if (n_fds < max_fds)
                                        ret_fds[n_fds++] = fds[i];
                                else
                                        (void) close(fds[i]);
                        }
                } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                        struct ucred uc;
                        memcpy(&uc, CMSG_DATA(c), sizeof(uc));
                        pid = uc.pid;
                }
        }
        if (ret_n_fds)
                *ret_n_fds = n_fds;
        if (ret_pid)
                *ret_pid = pid;
        r = 0;
        if (n == 0)
                r = -EPIPE;
        else if ((size_t) n < sizeof(len_le))
                r = read_full(fd, (char *) &len_le + n, sizeof(len_le) - (size_t) n);
        if (r == 0) {
                len = le32toh(len_le);
                if (len > max || len > WIRE_FRAME_MAX)
                        r = -E2BIG;
        }
        if (r == 0) {
                buf = malloc(len + 1);
                r = buf ? read_full(fd, buf, len) : -ENOMEM;
                if (r == -EPIPE)
                        r = -EBADMSG;
        }
        if (r == 0) {
                obj = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
                if (!obj || !json_is_object(obj)) {
                        json_decref(obj);
                        r = -EBADMSG;
                } else {
                        *ret_obj = obj;
                }
        }
        if (r < 0) {
                for (size_t i = 0; i < n_fds; i++)
                        (void) close(ret_fds[i]);
                if (ret_n_fds)
                        *ret_n_fds = 0;
        }
        return r;
}
