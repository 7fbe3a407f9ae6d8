/* See util.h. */
#include "util.h"

#include "cleanup.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int write_full(int fd, const void *buf, size_t len)
{
        const char *p = buf;

        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

int read_full(int fd, void *buf, size_t len)
{
        char *p = buf;

        while (len > 0) {
                ssize_t n = read(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EPIPE;
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

ssize_t read_small_file_at(int dirfd, const char *path, char *buf, size_t max)
{
        _cleanup_close_ int fd = -EBADF;

        if (max == 0)
                return -EINVAL;
        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return pread_small(fd, buf, max);
}

ssize_t pread_small(int fd, char *buf, size_t max)
{
        size_t got = 0;

        if (max == 0)
                return -EINVAL;
        while (got < max - 1) {
                ssize_t n = pread(fd, buf + got, max - 1 - got, (off_t) got);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                got += (size_t) n;
        }
        buf[got] = '\0';
        return (ssize_t) got;
}

int write_file_at(int dirfd, const char *path, const char *value)
{
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(value);
        ssize_t n;

        fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        n = write(fd, value, len);
        if (n < 0)
                return -errno;
        if ((size_t) n != len)
                return -EIO;
        return 0;
}

static int parse_number(const char *s, long double *ret, const char **ret_end)
{
        char *end;
        long double v;

        while (isspace((unsigned char) *s))
                s++;
        if (!isdigit((unsigned char) *s) && *s != '.')
                return -EINVAL;
        errno = 0;
        v = strtold(s, &end);
        if (errno != 0 || end == s)
                return -EINVAL;
        /* strtold() also takes hexadecimal ("0x10") and exponents ("1e3"), which the contract
         * in util.h does not promise; accept only digits with at most one decimal point. */
        if (strspn(s, "0123456789.") < (size_t) (end - s))
                return -EINVAL;
        while (isspace((unsigned char) *end))
                end++;
        *ret = v;
        *ret_end = end;
        return 0;
}

int parse_size(const char *s, uint64_t *ret_bytes)
{
        static const struct {
                const char *suffix;
                long double factor;
        } units[] = {
                { "", 1.0L },
                { "b", 1.0L },
                { "k", 1024.0L },
                { "kib", 1024.0L },
                { "kb", 1000.0L },
                { "m", 1048576.0L },
                { "mib", 1048576.0L },
                { "mb", 1e6L },
                { "g", 1073741824.0L },
                { "gib", 1073741824.0L },
                { "gb", 1e9L },
                { "t", 1099511627776.0L },
                { "tib", 1099511627776.0L },
                { "tb", 1e12L },
        };
        const char *end;
        long double v;
        int r;

        if (!s)
                return -EINVAL;
        r = parse_number(s, &v, &end);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                if (strcasecmp(end, units[i].suffix) != 0)
                        continue;
                v *= units[i].factor;
                if (v >= 18446744073709551615.0L)
                        return -ERANGE;
                if (units[i].factor == 1.0L && v != (long double) (uint64_t) v)
                        return -EINVAL; /* fractional bytes */
                *ret_bytes = (uint64_t) v;
                return 0;
        }
        return -EINVAL;
}

int parse_duration_ms(const char *s, uint64_t *ret_ms)
{
        const char *end;
        long double v;
        int r;

        if (!s)
                return -EINVAL;
        r = parse_number(s, &v, &end);
        if (r < 0)
                return r;
        if (*end == '\0' || strcasecmp(end, "s") == 0)
                v *= 1000.0L;
        else if (strcasecmp(end, "m") == 0 || strcasecmp(end, "min") == 0)
                v *= 60000.0L;
        else if (strcasecmp(end, "h") == 0)
                v *= 3600000.0L;
        else if (strcasecmp(end, "d") == 0)
                v *= 86400000.0L;
        else if (strcasecmp(end, "ms") != 0)
                return -EINVAL;
        if (v > 1e15L)
                return -ERANGE;
        *ret_ms = (uint64_t) (v + 0.5L);
        return 0;
}

int random_bytes(void *buf, size_t len, unsigned flags)
{
        unsigned char *p = buf;
        size_t got = 0;

        while (got < len) {
                ssize_t n = getrandom(p + got, len - got, flags);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                got += (size_t) n;
        }
        return 0;
}

int random_hex(char *buf, size_t n)
{
        static const char hex[] = "0123456789abcdef";
        unsigned char raw[32];
        int r;

        for (size_t done = 0; done < n;) {
                size_t k = n - done < sizeof(raw) ? n - done : sizeof(raw);

                r = random_bytes(raw, k, 0);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < k; i++, done++) {
                        buf[2 * done] = hex[raw[i] >> 4];
                        buf[2 * done + 1] = hex[raw[i] & 15];
                }
        }
        explicit_bzero(raw, sizeof(raw));
        buf[2 * n] = '\0';
        return 0;
}

uint64_t now_ns(void)
{
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* Whether the n highest fd numbers below the limit are all closed: then at least n can be
 * opened. One poll(): a closed number comes back POLLNVAL. */
static bool fd_top_is_free(rlim_t limit, unsigned n)
{
        _cleanup_free_ struct pollfd *p = calloc(n, sizeof(*p));

        if (!p)
                return false;
        for (unsigned i = 0; i < n; i++)
                p[i].fd = (int) (limit - n + i);
        if (poll(p, n, 0) != (int) n)
                return false;
        for (unsigned i = 0; i < n; i++)
                if (p[i].revents != POLLNVAL)
                        return false;
        return true;
}

int fd_room(unsigned n)
{
        _cleanup_free_ int *fds = NULL;
        struct rlimit rl;
        unsigned got = 0;
        int r = 0;

        if (n == 0)
                return 0;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return -errno;
        if (rl.rlim_cur < n)
                return -EMFILE;
        /* Fds take the lowest free numbers, so the top of the range is free until the process
         * comes near its limit: the check costs one syscall then, not 2n. */
        if (rl.rlim_cur <= INT_MAX && fd_top_is_free(rl.rlim_cur, n))
                return 0;
        fds = malloc(n * sizeof(*fds));
        if (!fds)
                return -ENOMEM;
        fds[0] = eventfd(0, EFD_CLOEXEC);
        if (fds[0] < 0)
                return -errno;
        for (got = 1; got < n; got++) {
                fds[got] = fcntl(fds[0], F_DUPFD_CLOEXEC, 0);
                if (fds[got] < 0) {
                        r = -errno;
                        break;
                }
        }
        while (got > 0)
                (void) close(fds[--got]);
        return r;
}

bool fd_is_tty(int fd)
{
        return isatty(fd) == 1;
}

char **strv_copy(char *const *v)
{
        size_t n = 0;
        char **out;

        while (v && v[n])
                n++;
        out = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; out && i < n; i++)
                if (!(out[i] = strdup(v[i]))) {
                        strv_free(out);
                        return NULL;
                }
        return out;
}
