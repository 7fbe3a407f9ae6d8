/* The bearer token and the Host/Origin allow-list (see auth.h). The token file is the only
 * secret the daemon keeps on disk, so it is created exclusively with mode 0600 and refused
 * when anyone else could have read or replaced it. */
#include "auth.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int api_state_dir_default(char **ret_dir)
{
        const char *xdg = getenv("XDG_STATE_HOME");
        const char *home = getenv("HOME");
        char *dir = NULL;

        if (geteuid() == 0)
                dir = strdup("/var/lib/airlock");
        else if (xdg && xdg[0] == '/')
                (void) asprintf(&dir, "%s/airlock", xdg);
        else if (home && home[0] == '/')
                (void) asprintf(&dir, "%s/.local/state/airlock", home);
        else
                return -ENOENT;
        if (!dir)
                return -ENOMEM;
        *ret_dir = dir;
        return 0;
}

int api_state_dir_make(const char *dir, struct airlock_error *err)
{
        _cleanup_free_ char *copy = strdup(dir);
        struct stat st;

        if (!copy)
                return -ENOMEM;
        for (char *p = copy + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(copy, 0700) < 0 && errno != EEXIST)
                        return airlock_error_set(err, -errno, "cannot create '%s': %s", copy,
                                                 strerror(errno));
                *p = '/';
        }
        if (mkdir(copy, 0700) < 0 && errno != EEXIST)
                return airlock_error_set(err, -errno, "cannot create '%s': %s", copy,
                                         strerror(errno));
        if (stat(dir, &st) < 0)
                return airlock_error_set(err, -errno, "cannot stat '%s': %s", dir, strerror(errno));
        if (!S_ISDIR(st.st_mode))
                return airlock_error_set(err, -ENOTDIR, "'%s' is not a directory", dir);
        return 0;
}

/* Reads a token from fd: at most TOKEN_MAX bytes, trailing whitespace removed, no other
 * whitespace or control characters (a token is sent in a header). */
static int token_read_fd(int fd, const char *path, char **ret_token, struct airlock_error *err)
{
        _cleanup_free_ char *buf = malloc(TOKEN_MAX + 2);
        size_t len = 0;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = read(fd, buf + len, TOKEN_MAX + 1 - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return airlock_error_set(err, -errno, "cannot read token file '%s': %s",
                                                 path, strerror(errno));
                }
                if (n == 0)
                        break;
                len += (size_t) n;
                if (len > TOKEN_MAX)
                        return airlock_error_set(err, -E2BIG,
                                                 "token file '%s' is longer than %d bytes", path,
                                                 TOKEN_MAX);
        }
        while (len > 0 && isspace((unsigned char) buf[len - 1]))
                len--;
        buf[len] = '\0';
        if (len == 0)
                return airlock_error_set(err, -EINVAL,
                                         "token file '%s' is empty; remove it to have a new "
                                         "token generated",
                                         path);
        for (size_t i = 0; i < len; i++)
                if ((unsigned char) buf[i] <= ' ' || (unsigned char) buf[i] == 0x7f)
                        return airlock_error_set(err, -EINVAL,
                                                 "token file '%s' holds whitespace or control "
                                                 "characters",
                                                 path);
        *ret_token = TAKE_PTR(buf);
        return 0;
}

static int token_create(const char *state_dir, const char *path, char **ret_token,
                        struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF, dfd = -EBADF;
        char text[TOKEN_BYTES * 2 + 2];
        int r;

        r = random_hex(text, TOKEN_BYTES);
        if (r < 0)
                return airlock_error_set(err, r, "getrandom: %s", strerror(-r));
        text[TOKEN_BYTES * 2] = '\n';
        text[TOKEN_BYTES * 2 + 1] = '\0';

        /* O_EXCL: if two daemons start at once, one creates and the other reads. */
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return errno == EEXIST
                               ? -EEXIST
                               : airlock_error_set(err, -errno, "cannot create token file '%s': %s",
                                                   path, strerror(errno));
        r = 0;
        if (fchmod(fd, 0600) < 0 || write(fd, text, strlen(text)) != (ssize_t) strlen(text) ||
            fsync(fd) < 0)
                r = -(errno ? errno : EIO);
        if (r < 0) {
                (void) unlink(path);
                return airlock_error_set(err, r, "cannot write token file '%s': %s", path,
                                         strerror(-r));
        }
        /* The directory entry must survive a crash too, or the next start makes a new token
         * that the clients do not know. */
        dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
                (void) fsync(dfd);

        text[TOKEN_BYTES * 2] = '\0';
        *ret_token = strdup(text);
        explicit_bzero(text, sizeof(text));
        return *ret_token ? 0 : -ENOMEM;
}

int api_token_load_or_create(const char *state_dir, char **ret_token, bool *ret_created,
                             struct airlock_error *err)
{
        return api_token_file_load_or_create(state_dir, TOKEN_FILE, ret_token, ret_created, err);
}

int api_token_file_load_or_create(const char *state_dir, const char *file, char **ret_token,
                                  bool *ret_created, struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (asprintf(&path, "%s/%s", state_dir, file) < 0)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                r = token_create(state_dir, path, ret_token, err);
                if (r != -EEXIST) {
                        if (r >= 0)
                                *ret_created = true;
                        return r;
                }
                fd = open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
        }
        if (fd < 0)
                return airlock_error_set(err, -errno, "cannot open token file '%s': %s%s", path,
                                         strerror(errno),
                                         errno == ELOOP ? " (it is a symbolic link)" : "");
        if (fstat(fd, &st) < 0)
                return airlock_error_set(err, -errno, "cannot stat token file '%s': %s", path,
                                         strerror(errno));
        if (!S_ISREG(st.st_mode))
                return airlock_error_set(err, -EPERM, "token file '%s' is not a regular file",
                                         path);
        if (st.st_uid != geteuid())
                return airlock_error_set(err, -EPERM,
                                         "token file '%s' is owned by uid %u, not by us (uid "
                                         "%u); fix its owner or remove it",
                                         path, (unsigned) st.st_uid, (unsigned) geteuid());
        if (st.st_mode & 077)
                return airlock_error_set(err, -EPERM,
                                         "token file '%s' has mode %04o: others may have read "
                                         "it; run `chmod 600 %s` (and consider a new token: "
                                         "remove the file and restart)",
                                         path, (unsigned) (st.st_mode & 07777), path);
        r = token_read_fd(fd, path, ret_token, err);
        if (r < 0)
                return r;
        *ret_created = false;
        return 0;
}

int api_token_find(const char *const *dirs, char **ret_token, struct airlock_error *err)
{
        const char *env = getenv("AIRLOCK_TOKEN");
        int first_error = -ENOENT;

        if (env && *env) {
                *ret_token = strdup(env);
                return *ret_token ? 0 : -ENOMEM;
        }
        for (size_t i = 0; dirs && dirs[i]; i++) {
                _cleanup_free_ char *path = NULL;
                _cleanup_close_ int fd = -EBADF;
                struct airlock_error e = { { 0 } };
                int r;

                if (asprintf(&path, "%s/%s", dirs[i], TOKEN_FILE) < 0)
                        return -ENOMEM;
                fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
                if (fd < 0) {
                        if (errno != ENOENT && errno != ENOTDIR && first_error == -ENOENT)
                                first_error = airlock_error_set(
                                        err, -errno,
                                        "cannot read the token file '%s': %s (set "
                                        "AIRLOCK_TOKEN, or run as the daemon's user)",
                                        path, strerror(errno));
                        continue;
                }
                r = token_read_fd(fd, path, ret_token, &e);
                if (r >= 0)
                        return 0;
                if (first_error == -ENOENT)
                        first_error = airlock_error_set(err, r, "%s", e.msg);
        }
        return first_error;
}

bool api_token_equal(const char *expected, const char *given, size_t given_len)
{
        size_t n = strlen(expected);
        volatile unsigned char diff = given_len != n;

        if (n == 0)
                return false;
        /* Every byte of expected is visited whatever given holds: the time depends on the
         * expected length only, which is not secret (always 64 for generated tokens). */
        for (size_t i = 0; i < n; i++) {
                unsigned char g = i < given_len ? (unsigned char) given[i] : 0;
                diff |= (unsigned char) expected[i] ^ g;
        }
        return diff == 0;
}

int api_bearer_parse(const char *value, const char **ret_token, size_t *ret_len)
{
        const char *p = value;
        size_t len;

        while (*p == ' ' || *p == '\t')
                p++;
        if (strncasecmp(p, "bearer", 6) != 0 || (p[6] != ' ' && p[6] != '\t'))
                return -EINVAL;
        p += 6;
        while (*p == ' ' || *p == '\t')
                p++;
        len = strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
                len--;
        if (len == 0)
                return -EINVAL;
        *ret_token = p;
        *ret_len = len;
        return 0;
}

static int host_allow_add(struct host_allow *ha, const char *host, const char *port)
{
        char *v;

        if (asprintf(&v, "%s%s%s", host, port ? ":" : "", port ? port : "") < 0)
                return -ENOMEM;
        for (char *p = v; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        for (size_t i = 0; i < ha->n; i++)
                if (strcmp(ha->hosts[i], v) == 0) {
                        free(v);
                        return 0;
                }
        if (ha->n >= HOST_ALLOW_MAX) {
                free(v);
                return -E2BIG;
        }
        ha->hosts[ha->n++] = v;
        return 0;
}

/* "::1" -> "[::1]" (a bare IPv6 address has two colons or more); anything else as is. */
static int host_bracket(const char *host, char **ret)
{
        const char *colon = strchr(host, ':');

        if (colon && strchr(colon + 1, ':') && host[0] != '[')
                return asprintf(ret, "[%s]", host) < 0 ? -ENOMEM : 0;
        *ret = strdup(host);
        return *ret ? 0 : -ENOMEM;
}

/* True when v ends in ":digits" after any bracketed IPv6 part, i.e. it names a port. */
static bool host_has_port(const char *v)
{
        const char *colon = strrchr(v, ':');
        const char *bracket = strrchr(v, ']');

        if (!colon || (bracket && bracket > colon))
                return false;
        if (!bracket && strchr(v, ':') != colon)
                return false; /* a bare IPv6 address */
        if (colon[1] == '\0')
                return false;
        for (const char *p = colon + 1; *p; p++)
                if (!isdigit((unsigned char) *p))
                        return false;
        return true;
}

int host_allow_init(struct host_allow *ha, const char *listen_host, unsigned port,
                    const char *const *extra)
{
        static const char *const loopback[] = { "localhost", "127.0.0.1", "[::1]" };
        _cleanup_free_ char *lh = NULL;
        char port_s[16];
        int r;

        *ha = (struct host_allow){ .n = 0 };
        (void) snprintf(port_s, sizeof(port_s), "%u", port);
        r = host_bracket(listen_host, &lh);
        if (r < 0)
                return r;
        r = host_allow_add(ha, lh, port_s);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(loopback); i++)
                r = host_allow_add(ha, loopback[i], port_s);
        if (r >= 0 && port == 80) {
                r = host_allow_add(ha, lh, NULL);
                for (size_t i = 0; r >= 0 && i < ELEMENTSOF(loopback); i++)
                        r = host_allow_add(ha, loopback[i], NULL);
        }
        for (size_t i = 0; r >= 0 && extra && extra[i]; i++) {
                _cleanup_free_ char *e = NULL;

                if (!extra[i][0]) {
                        r = -EINVAL;
                        break;
                }
                r = host_bracket(extra[i], &e);
                if (r < 0)
                        break;
                if (host_has_port(e)) {
                        r = host_allow_add(ha, e, NULL);
                } else {
                        r = host_allow_add(ha, e, NULL);
                        if (r >= 0)
                                r = host_allow_add(ha, e, port_s);
                }
        }
        if (r < 0)
                host_allow_done(ha);
        return r;
}

void host_allow_done(struct host_allow *ha)
{
        for (size_t i = 0; i < ha->n; i++)
                free(ha->hosts[i]);
        ha->n = 0;
}

static bool host_allow_check_n(const struct host_allow *ha, const char *value, size_t len)
{
        for (size_t i = 0; i < ha->n; i++)
                if (strlen(ha->hosts[i]) == len && strncasecmp(ha->hosts[i], value, len) == 0)
                        return true;
        return false;
}

bool host_allow_check_host(const struct host_allow *ha, const char *value)
{
        if (!value)
                return false;
        return host_allow_check_n(ha, value, strlen(value));
}

bool host_allow_check_origin(const struct host_allow *ha, const char *value)
{
        const char *p;
        size_t len;

        if (!value)
                return false;
        if (strncasecmp(value, "http://", 7) == 0)
                p = value + 7;
        else if (strncasecmp(value, "https://", 8) == 0)
                p = value + 8;
        else
                return false;
        len = strlen(p);
        if (len > 0 && p[len - 1] == '/')
                len--;
        if (len == 0 || memchr(p, '/', len) || memchr(p, '@', len))
                return false;
        return host_allow_check_n(ha, p, len);
}
