/* The cgroups of one session manager. Every sandbox it makes gets its cgroup below a parent of
 * the manager's own, "airlock-d-<id>", so that the sweep for the empty cgroups a crashed daemon
 * left never reaches another daemon's, even where daemons share a controller's root (cgroup v1
 * keeps one tree per controller for the whole host). The id is kept in <state-dir>/cgroup-id:
 * the next daemon on the same state directory finds and sweeps its predecessor's leftovers, a
 * daemon on any other state directory never sees them. */
#include "session-internal.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCOPE_ID_FILE "cgroup-id"
#define SCOPE_ID_BYTES 16
/* How long a lock on the id file may stay held before we conclude that another live daemon
 * uses this state directory: a killed predecessor's last children can hold it for a moment. */
#define SCOPE_LOCK_WAIT_MS 2000
/* Children of the scope the sweep may remove: the zygotes' and the sessions' cgroups. */
#define SCOPE_SWEEP_PREFIX "airlock-"

static bool id_is_valid(const char *s)
{
        size_t n = strlen(s);

        if (n != 2 * SCOPE_ID_BYTES)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static int id_random(char id[SCOPE_ID_LEN + 1])
{
        unsigned char raw[SCOPE_ID_BYTES];

        if (getrandom(raw, sizeof(raw), 0) != (ssize_t) sizeof(raw))
                return errno ? -errno : -EIO;
        for (size_t i = 0; i < sizeof(raw); i++)
                (void) snprintf(id + 2 * i, 3, "%02x", raw[i]);
        return 0;
}

/* Writes a new id to a file of its own and links it into place, so that a concurrent reader
 * sees either no file or a complete one. -EEXIST: another daemon was first. */
static int id_create(int dirfd, const char *state_dir, struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        char tmp[64], text[SCOPE_ID_LEN + 2];
        int r;

        r = id_random(text);
        if (r < 0)
                return airlock_error_set(err, r, "getrandom: %s", strerror(-r));
        strcat(text, "\n");
        (void) snprintf(tmp, sizeof(tmp), "." SCOPE_ID_FILE ".%d", (int) getpid());
        (void) unlinkat(dirfd, tmp, 0);
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return airlock_error_set(err, -errno, "cannot create '%s/%s': %s", state_dir, tmp,
                                         strerror(errno));
        r = write_full(fd, text, strlen(text));
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && linkat(dirfd, tmp, dirfd, SCOPE_ID_FILE, 0) < 0)
                r = -errno;
        (void) unlinkat(dirfd, tmp, 0);
        if (r == -EEXIST)
                return r;
        if (r < 0)
                return airlock_error_set(err, r, "cannot write '%s/" SCOPE_ID_FILE "': %s",
                                         state_dir, strerror(-r));
        (void) fsync(dirfd);
        return 0;
}

/* Opens <state_dir>/cgroup-id, making it when missing, and reads the id. The file decides which
 * cgroups this daemon may remove, so it must be ours and writable by us alone. */
static int id_load(const char *state_dir, char id[SCOPE_ID_LEN + 1], int *ret_fd,
                   struct airlock_error *err)
{
        _cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
        char text[SCOPE_ID_LEN + 8];
        struct stat st;
        ssize_t n;
        int r;

        dirfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
                return airlock_error_set(err, -errno, "cannot open the state directory '%s': %s",
                                         state_dir, strerror(errno));
        for (int attempt = 0; fd < 0; attempt++) {
                fd = openat(dirfd, SCOPE_ID_FILE, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
                if (fd >= 0)
                        break;
                if (errno != ENOENT || attempt > 0)
                        return airlock_error_set(
                                err, -errno, "cannot open '%s/" SCOPE_ID_FILE "': %s%s", state_dir,
                                strerror(errno), errno == ELOOP ? " (a symbolic link)" : "");
                r = id_create(dirfd, state_dir, err);
                if (r < 0 && r != -EEXIST)
                        return r;
        }
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
                return airlock_error_set(err, -EPERM,
                                         "'%s/" SCOPE_ID_FILE "' must be a regular file owned by "
                                         "uid %u and writable by it alone",
                                         state_dir, (unsigned) geteuid());
        n = read(fd, text, sizeof(text) - 1);
        if (n < 0)
                return -errno;
        text[n] = '\0';
        text[strcspn(text, "\n")] = '\0';
        if (!id_is_valid(text))
                return airlock_error_set(err, -EBADMSG,
                                         "'%s/" SCOPE_ID_FILE "' does not hold %d hexadecimal "
                                         "digits; remove it to get a new one (cgroups left under "
                                         "the old one then stay until removed by hand)",
                                         state_dir, SCOPE_ID_LEN);
        memcpy(id, text, SCOPE_ID_LEN + 1);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Whether we are the only daemon on this state directory: an exclusive lock on the id file,
 * held for our lifetime (the fd is close-on-exec, so no sandbox keeps it). */
static bool lock_scope(int fd)
{
        for (unsigned waited = 0;; waited += 20) {
                if (flock(fd, LOCK_EX | LOCK_NB) == 0)
                        return true;
                if (errno != EWOULDBLOCK && errno != EINTR)
                        return false;
                if (waited >= SCOPE_LOCK_WAIT_MS)
                        return false;
                (void) usleep(20000);
        }
}

int scope_open(const struct jail_features *f, const char *state_dir, struct scope *ret,
               struct airlock_error *err)
{
        char id[SCOPE_ID_LEN + 1];
        int r;

        memset(ret, 0, sizeof(*ret));
        ret->lock_fd = -EBADF;
        ret->features = *f;
        /* The copy must not share the caller's strings: ours are replaced below. */
        memset(&ret->features.cgroups, 0, sizeof(ret->features.cgroups));
        if (f->cgroups.version == CGROUP_NONE)
                return 0;

        if (state_dir) {
                r = id_load(state_dir, id, &ret->lock_fd, err);
                if (r < 0)
                        return r;
                ret->is_owner = lock_scope(ret->lock_fd);
                ret->is_lasting = true;
        } else {
                /* Nothing would find it again: a fresh id, used by this process alone. */
                r = id_random(id);
                if (r < 0)
                        return airlock_error_set(err, r, "getrandom: %s", strerror(-r));
                ret->is_owner = true;
        }
        (void) snprintf(ret->name, sizeof(ret->name), SCOPE_NAME_PREFIX "%s", id);
        r = cgroup_root_enter(&f->cgroups, ret->name, &ret->features.cgroups, err);
        if (r < 0) {
                scope_close(ret);
                return r;
        }
        return 0;
}

int scope_sweep(struct scope *s)
{
        unsigned left = 0;
        int n;

        if (s->features.cgroups.version == CGROUP_NONE || !s->is_lasting)
                return 0;
        if (!s->is_owner) {
                log_warn("msg=\"another daemon uses this state directory; not removing the "
                         "cgroups below '%s'\"",
                         s->name);
                return 0;
        }
        /* No live daemon holds the lock, so whatever is below our cgroup is a crashed one's:
         * its sandboxes die with it, but only once its exit got that far (their parent-death
         * signal), which can take seconds. Killing them now frees their cgroups at once. */
        n = cgroup_reap_stale(&s->features.cgroups, SCOPE_SWEEP_PREFIX, &left);
        if (left > 0)
                log_warn("msg=\"%u cgroups left by an earlier daemon below '%s' could not be "
                         "removed\"",
                         left, s->name);
        return n;
}

void scope_close(struct scope *s)
{
        cgroup_daemon_done(&s->daemon);
        if (s->is_owner && s->features.cgroups.version != CGROUP_NONE) {
                int r = cgroup_root_remove(&s->features.cgroups);
                if (r < 0)
                        log_warn("msg=\"cannot remove the cgroup '%s': %s\"", s->name,
                                 strerror(-r));
        }
        cgroup_root_done(&s->features.cgroups);
        s->features.cgroups.version = CGROUP_NONE;
        s->is_owner = false;
        if (s->lock_fd >= 0)
                (void) close(s->lock_fd);
        s->lock_fd = -EBADF;
}

/* The scope's directories, opened: for v1 indexed by controller (-EBADF where absent), for v2
 * in [0]. Returns 0 or -errno; close with close_fds(). */
static int open_fds(const struct scope *s, int fds[CG1_COUNT])
{
        const struct cgroup_root *root = &s->features.cgroups;

        for (int c = 0; c < CG1_COUNT; c++)
                fds[c] = -EBADF;
        if (root->version == CGROUP_V2) {
                fds[0] = open(root->v2_parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                return fds[0] < 0 ? -errno : 0;
        }
        for (int c = 0; c < CG1_COUNT; c++)
                if (root->v1_parent[c])
                        fds[c] = open(root->v1_parent[c], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fds[CG1_MEMORY] < 0 ? -ENOENT : 0;
}

static void close_fds(int fds[CG1_COUNT])
{
        for (int c = 0; c < CG1_COUNT; c++)
                fds[c] = safe_close_fd(fds[c]);
}

int scope_limit_memory(struct scope *s, uint64_t bytes, struct airlock_error *err)
{
        int fds[CG1_COUNT], r;

        if (s->features.cgroups.version == CGROUP_NONE)
                return airlock_error_set(err, -EOPNOTSUPP,
                                         "a memory limit for all sessions needs cgroups, and "
                                         "this host gives airlock none");
        r = open_fds(s, fds);
        if (r < 0) {
                close_fds(fds);
                return airlock_error_set(err, r, "cannot open the cgroup '%s': %s", s->name,
                                         strerror(-r));
        }
        r = cgroup_apply_limits(s->features.cgroups.version, fds,
                                &(struct cgroup_limits){ .memory_max = bytes }, err);
        close_fds(fds);
        return r;
}

int scope_memory_usage(struct scope *s, uint64_t *ret_bytes)
{
        struct cgroup_usage u;
        int fds[CG1_COUNT], r;

        if (s->features.cgroups.version == CGROUP_NONE)
                return -EOPNOTSUPP;
        r = open_fds(s, fds);
        if (r >= 0)
                r = cgroup_read_usage_at(s->features.cgroups.version, fds, &u);
        close_fds(fds);
        if (r < 0)
                return r;
        *ret_bytes = u.memory_current;
        return 0;
}

int scope_memory_limit(struct scope *s, uint64_t *ret_bytes)
{
        const struct cgroup_root *root = &s->features.cgroups;
        _cleanup_close_ int fd = -EBADF;
        char buf[64];
        const char *dir;
        ssize_t n;

        if (root->version == CGROUP_NONE)
                return -EOPNOTSUPP;
        dir = root->version == CGROUP_V2 ? root->v2_parent : root->v1_parent[CG1_MEMORY];
        if (!dir)
                return -ENOENT;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read_small_file_at(fd,
                               root->version == CGROUP_V2 ? "memory.max" : "memory.limit_in_bytes",
                               buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        buf[strcspn(buf, "\n")] = '\0';
        /* v2 says "max"; v1 says a huge number (PAGE_COUNTER_MAX pages) for none. */
        if (strcmp(buf, "max") == 0 || strtoull(buf, NULL, 10) >= (1ULL << 60)) {
                *ret_bytes = 0;
                return 0;
        }
        *ret_bytes = strtoull(buf, NULL, 10);
        return 0;
}

/* The daemon's own cgroup v2 directory beside the scope, when /proc/self/cgroup puts it there
 * (the delegated layout: <unit>/daemon beside <unit>/airlock-d-<id>); else NULL. */
static char *own_v2_dir_beside(const char *scope_dir)
{
        _cleanup_free_ char *line = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        size_t cap = 0;
        char *out = NULL;

        f = fopen("/proc/self/cgroup", "re");
        if (!f)
                return NULL;
        while (getline(&line, &cap, f) > 0) {
                const char *path, *base, *scope_base;
                size_t plen;

                if (strncmp(line, "0::", 3) != 0)
                        continue;
                line[strcspn(line, "\n")] = '\0';
                path = line + 3;
                base = strrchr(path, '/');
                scope_base = strrchr(scope_dir, '/');
                if (!base || base == path || !scope_base)
                        break;
                /* parent(path) must be the tail of parent(scope_dir). */
                plen = (size_t) (base - path);
                if ((size_t) (scope_base - scope_dir) < plen ||
                    strncmp(scope_base - plen, path, plen) != 0)
                        break;
                if (asprintf(&out, "%.*s%s", (int) (scope_base - scope_dir), scope_dir, base) < 0)
                        out = NULL;
                break;
        }
        return out;
}

int scope_weigh_daemon(struct scope *s, uint32_t weight, struct airlock_error *err)
{
        _cleanup_free_ char *own = NULL;

        if (s->features.cgroups.version == CGROUP_NONE)
                return airlock_error_set(err, -EOPNOTSUPP, "no cgroups");
        if (s->features.cgroups.version == CGROUP_V2)
                own = own_v2_dir_beside(s->features.cgroups.v2_parent);
        return cgroup_daemon_weigh(&s->features.cgroups, own, weight, getpid(), &s->daemon, err);
}
