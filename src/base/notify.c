/* sd_notify(3) in a few lines, so that `airlock serve` can be a Type=notify systemd service
 * without linking libsystemd: a datagram to $NOTIFY_SOCKET. It runs twice per daemon (ready,
 * stopping), never on a request path. */
#include "notify.h"

#include "base/cleanup.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

int notify_send(const char *state)
{
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = getenv("NOTIFY_SOCKET");
        size_t len, state_len = strlen(state);
        socklen_t sa_len;
        ssize_t n;

        if (!path || !*path)
                return 0;
        len = strlen(path);
        /* An absolute path, or "@" for the abstract namespace (a leading NUL byte). */
        if ((path[0] != '/' && path[0] != '@') || len < 2 || len >= sizeof(sa.sun_path))
                return -EINVAL;
        memcpy(sa.sun_path, path, len);
        if (path[0] == '@') {
                sa.sun_path[0] = '\0';
                sa_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len);
        } else {
                sa_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len + 1);
        }

        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        n = sendto(fd, state, state_len, MSG_NOSIGNAL, (struct sockaddr *) &sa, sa_len);
        if (n < 0)
                return -errno;
        if ((size_t) n != state_len)
                return -EIO;
        return 1;
}
