/* Resource caps for sandboxes through cgroups. The probe finds a usable hierarchy once (cgroup v2,
 * or the v1 hierarchies that hybrid hosts still use for memory, pids and cpu); each sandbox then
 * gets its own cgroup with memory, pids and CPU limits, is moved into it before user code runs,
 * and has it killed and removed at teardown. Paths come only from the kernel's mount table, the
 * caller's own cgroup and the operator's parent override; the one client-influenced input, the
 * cgroup name, is checked to be a single safe path component. */
#include "jail/cgroup.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define CGROUP_NAME_MAX 64
/* The CFS period used for every quota; cpu.max and cpu.cfs_period_us both default to it. */
#define CPU_PERIOD_USEC 100000
/* The kernel refuses quotas below 1 ms (tg_set_cfs_bandwidth(): min_cfs_quota_period). */
#define CPU_QUOTA_MIN_USEC 1000
#define NSEC_PER_MSEC 1000000ULL
#define NSEC_PER_SEC 1000000000ULL
#define KILL_TIMEOUT_NS (2 * NSEC_PER_SEC)
#define FREEZE_TIMEOUT_NS (1 * NSEC_PER_SEC)
#define RMDIR_TIMEOUT_NS (1 * NSEC_PER_SEC)
#define POLL_INTERVAL_NS (10 * NSEC_PER_MSEC)
/* A mountinfo line has 10 fields plus a handful of optional propagation fields. */
#define MOUNTINFO_FIELDS_MAX 32
/* Large enough for any control file read here (cpu.stat, memory.events, memory.oom_control). */
#define CONTROL_FILE_MAX 4096

static const char *const v1_names[CG1_COUNT] = {
        [CG1_MEMORY] = "memory",   [CG1_PIDS] = "pids",       [CG1_CPU] = "cpu",
        [CG1_CPUACCT] = "cpuacct", [CG1_FREEZER] = "freezer",
};

/* The files of read_usage(), v2 and v1 names by slot. */
enum usage_file {
        USAGE_MEMORY, /* memory.current, memory.usage_in_bytes */
        USAGE_PEAK,   /* memory.peak (no reset), memory.max_usage_in_bytes */
        USAGE_CPU,    /* cpu.stat, cpuacct.usage */
        USAGE_OOM,    /* memory.events, memory.oom_control */
        USAGE_FILES,
};

struct cgroup {
        enum cgroup_version version;
        /* v2 uses index 0 only; v1 is indexed by enum cgroup_v1_controller, NULL where the
         * controller is absent. Co-mounted controllers (e.g. "cpu,cpuacct") share one path. */
        char *path[CG1_COUNT];
        int dirfd[CG1_COUNT];
        /* Index of the first controller with the same directory, so that each directory is
         * made, attached to and removed exactly once. */
        int same_as[CG1_COUNT];
        /* Directories this handle made and has not removed yet. */
        bool owned[CG1_COUNT];
        /* v2 memory.peak opened for a reset: since Linux 6.12 a reset is local to the open file
         * description, so later reads must go through this same fd. */
        int peak_fd;
        /* The control files read before and after every execution (enum usage_file), opened on
         * first use and read again with pread() at offset 0, which has the kernel generate
         * them anew: an open and a close per file per read cost ~10% of the daemon's CPU
         * under load. */
        int usage_fd[USAGE_FILES];
};

/* What the probe learned from mountinfo and /proc/self/cgroup. */
struct probe_state {
        char *v2_mount;
        char *v2_mount_root;
        char *v2_path;
        char *v1_mount[CG1_COUNT];
        char *v1_mount_root[CG1_COUNT];
        char *v1_path[CG1_COUNT];
};

static void probe_state_done(struct probe_state *st)
{
        free(st->v2_mount);
        free(st->v2_mount_root);
        free(st->v2_path);
        for (size_t i = 0; i < CG1_COUNT; i++) {
                free(st->v1_mount[i]);
                free(st->v1_mount_root[i]);
                free(st->v1_path[i]);
        }
}

static void cgroup_root_donep(struct cgroup_root *root)
{
        cgroup_root_done(root);
}

static bool streq(const char *a, const char *b)
{
        return strcmp(a, b) == 0;
}

static void sleep_ns(uint64_t ns)
{
        struct timespec ts = { .tv_sec = (time_t) (ns / NSEC_PER_SEC),
                               .tv_nsec = (long) (ns % NSEC_PER_SEC) };

        (void) nanosleep(&ts, NULL);
}

static bool name_is_valid(const char *name)
{
        size_t len;

        if (!name)
                return false;
        len = strnlen(name, CGROUP_NAME_MAX + 1);
        if (len == 0 || len > CGROUP_NAME_MAX)
                return false;
        if (streq(name, ".") || streq(name, ".."))
                return false;
        for (const char *p = name; *p; p++) {
                char c = *p;

                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-')
                        continue;
                return false;
        }
        return true;
}

/* name_is_valid(), with the rule in err when it is not. */
static int check_name(const char *name, struct airlock_error *err)
{
        if (name_is_valid(name))
                return 0;
        return airlock_error_set(err, -EINVAL,
                                 "invalid cgroup name: must be 1-%d characters of "
                                 "[A-Za-z0-9_.-], not '.' or '..'",
                                 CGROUP_NAME_MAX);
}

/* Accepts a relative path whose components are neither "." nor "..", so that joining it to a
 * mount point can never leave that mount. Leading, trailing and repeated slashes are allowed. */
static bool relpath_is_safe(const char *p)
{
        while (*p) {
                size_t n;

                while (*p == '/')
                        p++;
                n = strcspn(p, "/");
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                p += n;
        }
        return true;
}

/* Joins a directory and a relative path with exactly one slash; an empty rel yields dir. */
static char *path_join(const char *dir, const char *rel)
{
        size_t dlen = strlen(dir);
        char *s;

        while (dlen > 1 && dir[dlen - 1] == '/')
                dlen--;
        while (*rel == '/')
                rel++;
        if (*rel == '\0')
                return strndup(dir, dlen);
        if (asprintf(&s, "%.*s%s%s", (int) dlen, dir, dir[dlen - 1] == '/' ? "" : "/", rel) < 0)
                return NULL;
        dlen = strlen(s);
        while (dlen > 1 && s[dlen - 1] == '/')
                s[--dlen] = '\0';
        return s;
}

/* Whether the whitespace-separated list contains word, as in cgroup.controllers. */
static bool list_has_word(const char *list, const char *word)
{
        size_t wlen = strlen(word);
        const char *p = list;

        while (*p) {
                size_t n;

                p += strspn(p, " \t\n");
                n = strcspn(p, " \t\n");
                if (n == wlen && strncmp(p, word, n) == 0)
                        return true;
                p += n;
        }
        return false;
}

/* Undoes the octal escapes (\040 for a space, etc.) that the kernel uses in mountinfo paths. */
static void unescape_octal(char *s)
{
        char *out = s;

        while (*s) {
                if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
                    s[3] >= '0' && s[3] <= '7') {
                        *out++ = (char) (((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
                        s += 4;
                        continue;
                }
                *out++ = *s++;
        }
        *out = '\0';
}

static void strip_trailing_space(char *s)
{
        size_t n = strlen(s);

        while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t'))
                s[--n] = '\0';
}

static int parse_u64(const char *s, uint64_t *ret)
{
        char *end;
        unsigned long long v;

        if (*s < '0' || *s > '9')
                return -EBADMSG;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0)
                return -EBADMSG;
        while (*end == ' ' || *end == '\t' || *end == '\n')
                end++;
        if (*end != '\0')
                return -EBADMSG;
        *ret = (uint64_t) v;
        return 0;
}

/* cg's fd for the usage file in slot (below dirfd), opened on first use; or -errno. Two
 * threads may read the usage at once (an execution and a file upload): the first fd stored
 * wins, the other is closed. v1's peak is also reset through its fd (cgroup_reset_peak), so
 * that one is opened for writing too. */
static int usage_fd(struct cgroup *cg, enum usage_file slot, int dirfd, const char *file)
{
        int fd = __atomic_load_n(&cg->usage_fd[slot], __ATOMIC_ACQUIRE);
        int mode = cg->version == CGROUP_V1 && slot == USAGE_PEAK ? O_RDWR : O_RDONLY;
        int expected = -EBADF;

        if (fd >= 0)
                return fd;
        fd = openat(dirfd, file, mode | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 && mode == O_RDWR && (errno == EACCES || errno == EPERM || errno == EROFS))
                /* Readable still; the reset then reports EOPNOTSUPP (EBADF on write). */
                fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (!__atomic_compare_exchange_n(&cg->usage_fd[slot], &expected, fd, false,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                (void) close(fd);
                fd = expected;
        }
        return fd;
}

/* Reads file (below dirfd) into buf, NUL-terminated, through cg's cached fd for slot when cg
 * is given (opening it on first use), else with an open of its own. */
static ssize_t read_usage_file(struct cgroup *cg, enum usage_file slot, int dirfd, const char *file,
                               char *buf, size_t size)
{
        int fd;

        if (!cg)
                return read_small_file_at(dirfd, file, buf, size);
        fd = usage_fd(cg, slot, dirfd, file);
        if (fd < 0)
                return fd;
        /* These files are a few bytes to a few hundred, and the kernel answers a read of one
         * with all of it: a short read is the end, and the second read that pread_small()
         * would make to see EOF is saved (two to four of these files are read around every
         * execution). A full buffer is what pread_small() would have truncated too. */
        for (;;) {
                ssize_t n = pread(fd, buf, size - 1, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                buf[n] = '\0';
                return n;
        }
}

/* Reads a control file holding one number, e.g. memory.current. */
static int read_usage_u64(struct cgroup *cg, enum usage_file slot, int dirfd, const char *file,
                          uint64_t *ret)
{
        char buf[64];
        ssize_t n = read_usage_file(cg, slot, dirfd, file, buf, sizeof(buf));

        if (n < 0)
                return (int) n;
        return parse_u64(buf, ret);
}

/* Finds "key value" in a flat keyed file such as cpu.stat or memory.events. Returns 0,
 * -ENODATA if the key is not there, or -errno. */
static int parse_keyed_u64(const char *text, const char *key, uint64_t *ret)
{
        size_t klen = strlen(key);
        const char *p = text;

        while (*p) {
                size_t n = strcspn(p, "\n");

                if (n > klen && strncmp(p, key, klen) == 0 && p[klen] == ' ') {
                        char num[32];
                        size_t vlen = n - klen - 1;

                        if (vlen >= sizeof(num))
                                return -EBADMSG;
                        memcpy(num, p + klen + 1, vlen);
                        num[vlen] = '\0';
                        return parse_u64(num, ret);
                }
                p += n;
                if (*p == '\n')
                        p++;
        }
        return -ENODATA;
}

static int read_keyed_u64_at(int dirfd, const char *file, const char *key, uint64_t *ret)
{
        _cleanup_free_ char *buf = NULL;
        ssize_t n;

        buf = malloc(CONTROL_FILE_MAX);
        if (!buf)
                return -ENOMEM;
        n = read_small_file_at(dirfd, file, buf, CONTROL_FILE_MAX);
        if (n < 0)
                return (int) n;
        return parse_keyed_u64(buf, key, ret);
}

/* read_keyed_u64_at() through cg's cached fd for slot (cg may be NULL). The files it reads
 * (cpu.stat, memory.events, memory.oom_control) are a few hundred bytes. */
static int read_usage_keyed_u64(struct cgroup *cg, enum usage_file slot, int dirfd,
                                const char *file, const char *key, uint64_t *ret)
{
        char buf[1024];
        ssize_t n = read_usage_file(cg, slot, dirfd, file, buf, sizeof(buf));

        if (n < 0)
                return (int) n;
        return parse_keyed_u64(buf, key, ret);
}

static int parse_mountinfo(const char *proc_root, struct probe_state *st, struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ char *line = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        size_t cap = 0;
        unsigned lineno = 0;
        int r;

        if (asprintf(&path, "%s/self/mountinfo", proc_root) < 0)
                return -ENOMEM;
        f = fopen(path, "re");
        if (!f) {
                r = -errno;
                return airlock_error_set(err, r, "cannot open '%s': %s", path, strerror(-r));
        }

        for (;;) {
                char *fields[MOUNTINFO_FIELDS_MAX];
                char *save = NULL;
                char *tok;
                size_t n = 0;
                size_t sep = 0;
                const char *fstype;
                char *mount_root;
                char *mount_point;
                char *super;

                errno = 0;
                if (getline(&line, &cap, f) < 0) {
                        if (ferror(f)) {
                                r = errno > 0 ? -errno : -EIO;
                                return airlock_error_set(err, r, "cannot read '%s': %s", path,
                                                         strerror(-r));
                        }
                        break;
                }
                lineno++;
                strip_trailing_space(line);
                if (line[0] == '\0')
                        continue;

                for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
                        if (n == MOUNTINFO_FIELDS_MAX)
                                break;
                        fields[n++] = tok;
                }
                /* The optional fields end with a lone "-", followed by the filesystem type,
                 * the source and the super block options (proc_pid_mountinfo(5)). */
                for (size_t i = 6; i < n; i++)
                        if (streq(fields[i], "-")) {
                                sep = i;
                                break;
                        }
                if (sep == 0 || n != sep + 4 || fields[4][0] != '/')
                        return airlock_error_set(err, -EBADMSG,
                                                 "malformed line %u in '%s': expected 'id parent "
                                                 "dev root mountpoint options [optional...] - "
                                                 "fstype source superoptions' with an "
                                                 "absolute mount point",
                                                 lineno, path);

                fstype = fields[sep + 1];
                mount_root = fields[3];
                mount_point = fields[4];
                super = fields[sep + 3];
                unescape_octal(mount_root);
                unescape_octal(mount_point);

                if (streq(fstype, "cgroup2")) {
                        if (st->v2_mount)
                                continue;
                        st->v2_mount = strdup(mount_point);
                        st->v2_mount_root = strdup(mount_root);
                        if (!st->v2_mount || !st->v2_mount_root)
                                return -ENOMEM;
                } else if (streq(fstype, "cgroup")) {
                        char *opt_save = NULL;

                        /* A v1 hierarchy names its controllers among the super options, e.g.
                         * "rw,cpu,cpuacct"; "name=systemd" has none. */
                        for (char *opt = strtok_r(super, ",", &opt_save); opt;
                             opt = strtok_r(NULL, ",", &opt_save)) {
                                for (size_t i = 0; i < CG1_COUNT; i++) {
                                        if (!streq(opt, v1_names[i]) || st->v1_mount[i])
                                                continue;
                                        st->v1_mount[i] = strdup(mount_point);
                                        st->v1_mount_root[i] = strdup(mount_root);
                                        if (!st->v1_mount[i] || !st->v1_mount_root[i])
                                                return -ENOMEM;
                                }
                        }
                }
        }
        return 0;
}

static int parse_self_cgroup(const char *proc_root, struct probe_state *st,
                             struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ char *line = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        size_t cap = 0;
        unsigned lineno = 0;
        int r;

        if (asprintf(&path, "%s/self/cgroup", proc_root) < 0)
                return -ENOMEM;
        f = fopen(path, "re");
        if (!f) {
                r = -errno;
                return airlock_error_set(err, r, "cannot open '%s': %s", path, strerror(-r));
        }

        for (;;) {
                char *ctrls;
                char *cg_path;
                char *save = NULL;

                errno = 0;
                if (getline(&line, &cap, f) < 0) {
                        if (ferror(f)) {
                                r = errno > 0 ? -errno : -EIO;
                                return airlock_error_set(err, r, "cannot read '%s': %s", path,
                                                         strerror(-r));
                        }
                        break;
                }
                lineno++;
                /* Only the newline goes: a cgroup's name may end in a space. */
                line[strcspn(line, "\n")] = '\0';
                if (line[0] == '\0')
                        continue;

                /* "hierarchy-id:controller-list:path" (cgroups(7)); the path may itself
                 * contain colons, so only the first two separate fields. */
                ctrls = strchr(line, ':');
                cg_path = ctrls ? strchr(ctrls + 1, ':') : NULL;
                if (!cg_path || cg_path[1] != '/')
                        return airlock_error_set(err, -EBADMSG,
                                                 "malformed line %u in '%s': expected "
                                                 "'id:controllers:/path'",
                                                 lineno, path);
                *ctrls++ = '\0';
                *cg_path++ = '\0';

                if (streq(line, "0") && ctrls[0] == '\0') {
                        if (!st->v2_path) {
                                st->v2_path = strdup(cg_path);
                                if (!st->v2_path)
                                        return -ENOMEM;
                        }
                        continue;
                }
                for (char *c = strtok_r(ctrls, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
                        for (size_t i = 0; i < CG1_COUNT; i++) {
                                if (!streq(c, v1_names[i]) || st->v1_path[i])
                                        continue;
                                st->v1_path[i] = strdup(cg_path);
                                if (!st->v1_path[i])
                                        return -ENOMEM;
                        }
                }
        }
        return 0;
}

/* The caller's cgroup path is relative to the hierarchy's root, but the mount may show only a
 * subtree of it (its mountinfo root, e.g. in a container). Returns the part below the mount, or
 * -ENOENT when the caller's cgroup is not visible through this mount. */
static int path_below_mount(const char *mount_root, const char *cg_path, const char **ret_rel)
{
        size_t n;

        if (streq(mount_root, "/")) {
                *ret_rel = cg_path;
                return 0;
        }
        n = strlen(mount_root);
        if (strncmp(cg_path, mount_root, n) != 0 || (cg_path[n] != '\0' && cg_path[n] != '/'))
                return -ENOENT;
        *ret_rel = cg_path + n;
        return 0;
}

/* Creates every missing directory of rel below base, with mode 0755. */
static int mkdir_below(const char *base, const char *rel, struct airlock_error *err)
{
        _cleanup_free_ char *cur = NULL;
        const char *p = rel;

        cur = strdup(base);
        if (!cur)
                return -ENOMEM;
        while (*p) {
                _cleanup_free_ char *comp = NULL;
                char *next;
                size_t n;

                while (*p == '/')
                        p++;
                n = strcspn(p, "/");
                if (n == 0)
                        break;
                comp = strndup(p, n);
                if (!comp)
                        return -ENOMEM;
                next = path_join(cur, comp);
                if (!next)
                        return -ENOMEM;
                free(cur);
                cur = next;
                if (mkdir(cur, 0755) < 0 && errno != EEXIST) {
                        int r = -errno;
                        return airlock_error_set(err, r, "cannot create '%s': %s", cur,
                                                 strerror(-r));
                }
                p += n;
        }
        return 0;
}

/* Makes sure dir's children get the memory and pids controllers (and cpu when wanted) by
 * enabling them in dir/cgroup.subtree_control. cpu is best effort: the kernel refuses it, for
 * example, while real-time tasks run in a non-root cgroup without RT group scheduling. */
static int v2_enable_subtree(const char *dir, bool want_cpu, struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        char enabled[512];
        char missing[64] = "";
        bool need_required;
        bool adding_cpu;
        ssize_t n;
        int r;

        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                return airlock_error_set(err, r, "cannot open '%s': %s", dir, strerror(-r));
        }
        n = read_small_file_at(fd, "cgroup.subtree_control", enabled, sizeof(enabled));
        if (n < 0)
                return airlock_error_set(err, (int) n,
                                         "cannot read '%s/cgroup.subtree_control': %s", dir,
                                         strerror((int) -n));

        if (!list_has_word(enabled, "memory"))
                strcat(missing, " +memory");
        if (!list_has_word(enabled, "pids"))
                strcat(missing, " +pids");
        need_required = missing[0] != '\0';
        adding_cpu = want_cpu && !list_has_word(enabled, "cpu");
        if (adding_cpu)
                strcat(missing, " +cpu");
        if (missing[0] == '\0')
                return 0;

        r = write_file_at(fd, "cgroup.subtree_control", missing + 1);
        if (r < 0 && adding_cpu) {
                /* Sandboxes without a CPU cap beat no cgroups at all; a cpu limit asked for
                 * later then fails in cgroup_create() with -EOPNOTSUPP. */
                if (!need_required)
                        return 0;
                missing[strlen(missing) - strlen(" +cpu")] = '\0';
                r = write_file_at(fd, "cgroup.subtree_control", missing + 1);
        }
        if (r < 0)
                return airlock_error_set(err, r,
                                         "cannot enable '%s' in '%s/cgroup.subtree_control': %s "
                                         "(cgroup v2 refuses this while processes live in that "
                                         "cgroup)",
                                         missing + 1, dir, strerror(-r));
        return 0;
}

/* Creates mount/rel as needed and enables the controllers at every level from the mount down,
 * so that cgroups made inside it have memory.max, pids.max and cpu.max. */
static int v2_prepare_parent(const char *mount, const char *rel, bool want_cpu, char **ret_path,
                             struct airlock_error *err)
{
        _cleanup_free_ char *cur = NULL;
        const char *p = rel;
        int r;

        cur = path_join(mount, "");
        if (!cur)
                return -ENOMEM;
        r = v2_enable_subtree(cur, want_cpu, err);
        if (r < 0)
                return r;
        while (*p) {
                _cleanup_free_ char *comp = NULL;
                char *next;
                size_t n;

                while (*p == '/')
                        p++;
                n = strcspn(p, "/");
                if (n == 0)
                        break;
                comp = strndup(p, n);
                if (!comp)
                        return -ENOMEM;
                next = path_join(cur, comp);
                if (!next)
                        return -ENOMEM;
                free(cur);
                cur = next;
                if (mkdir(cur, 0755) < 0 && errno != EEXIST) {
                        r = -errno;
                        return airlock_error_set(err, r, "cannot create '%s': %s", cur,
                                                 strerror(-r));
                }
                r = v2_enable_subtree(cur, want_cpu, err);
                if (r < 0)
                        return r;
                p += n;
        }
        *ret_path = TAKE_PTR(cur);
        return 0;
}

bool cgroup_v2_is_delegated(const char *dir)
{
        /* systemd 251 and later mark a Delegate=yes cgroup with trusted.delegate, and (254)
         * with user.delegate where the service manager is unprivileged (systemd's
         * docs/CGROUP_DELEGATION.md). Only the value "1" counts. */
        static const char *const names[] = { "trusted.delegate", "user.delegate" };

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                char value[8];
                ssize_t n = getxattr(dir, names[i], value, sizeof(value));

                if (n == 1 && value[0] == '1')
                        return true;
        }
        return false;
}

int cgroup_v2_delegate(const char *dir, const char *leaf, struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        _cleanup_close_ int leaf_fd = -EBADF;
        _cleanup_free_ char *leaf_dir = NULL;
        _cleanup_free_ char *procs = NULL;
        char controllers[512];
        ssize_t n;
        int r;

        r = check_name(leaf, err);
        if (r < 0)
                return r;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                return airlock_error_set(err, r, "cannot open '%s': %s", dir, strerror(-r));
        }
        /* The controllers the parent hands to dir: systemd's Delegate=yes enables every one it
         * manages. Without memory and pids, sandboxes made here would have no caps. */
        n = read_small_file_at(fd, "cgroup.controllers", controllers, sizeof(controllers));
        if (n < 0)
                return airlock_error_set(err, (int) n, "cannot read '%s/cgroup.controllers': %s",
                                         dir, strerror((int) -n));
        if (!list_has_word(controllers, "memory") || !list_has_word(controllers, "pids"))
                return airlock_error_set(err, -EOPNOTSUPP,
                                         "delegated cgroup '%s' lacks memory or pids in its "
                                         "cgroup.controllers ('%s')",
                                         dir, controllers);

        leaf_dir = path_join(dir, leaf);
        if (!leaf_dir)
                return -ENOMEM;
        if (mkdir(leaf_dir, 0755) < 0 && errno != EEXIST) {
                r = -errno;
                return airlock_error_set(err, r, "cannot create '%s': %s", leaf_dir, strerror(-r));
        }
        leaf_fd = open(leaf_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (leaf_fd < 0) {
                r = -errno;
                return airlock_error_set(err, r, "cannot open '%s': %s", leaf_dir, strerror(-r));
        }

        /* cgroup v2's "no internal processes" rule: dir may enable controllers for its children
         * only once no process lives in dir itself. At startup these are the daemon alone (its
         * threads move with it); each pid moves its whole thread group. */
        procs = malloc(CONTROL_FILE_MAX);
        if (!procs)
                return -ENOMEM;
        n = read_small_file_at(fd, "cgroup.procs", procs, CONTROL_FILE_MAX);
        if (n < 0)
                return airlock_error_set(err, (int) n, "cannot read '%s/cgroup.procs': %s", dir,
                                         strerror((int) -n));
        for (char *save = NULL, *pid = strtok_r(procs, "\n", &save); pid;
             pid = strtok_r(NULL, "\n", &save)) {
                r = write_file_at(leaf_fd, "cgroup.procs", pid);
                /* A process that exited meanwhile has nothing left to move. */
                if (r < 0 && r != -ESRCH)
                        return airlock_error_set(err, r, "cannot move process %s into '%s': %s",
                                                 pid, leaf_dir, strerror(-r));
        }

        return v2_enable_subtree(dir, list_has_word(controllers, "cpu"), err);
}

static int probe_v2(const struct probe_state *st, const char *parent_override,
                    const char *controllers, struct cgroup_root *root, struct airlock_error *err)
{
        bool want_cpu = list_has_word(controllers, "cpu");
        const char *rel;
        int r;

        if (parent_override)
                return v2_prepare_parent(st->v2_mount, parent_override, want_cpu, &root->v2_parent,
                                         err);

        /* The caller's own cgroup can host sandboxes only if it already hands memory and pids
         * to its children; v2 forbids enabling them while the caller itself lives there. */
        if (st->v2_path && path_below_mount(st->v2_mount_root, st->v2_path, &rel) >= 0 &&
            relpath_is_safe(rel)) {
                _cleanup_free_ char *dir = NULL;
                _cleanup_close_ int fd = -EBADF;
                char enabled[512];

                dir = path_join(st->v2_mount, rel);
                if (!dir)
                        return -ENOMEM;
                fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd >= 0 &&
                    read_small_file_at(fd, "cgroup.subtree_control", enabled, sizeof(enabled)) >=
                            0 &&
                    list_has_word(enabled, "memory") && list_has_word(enabled, "pids")) {
                        root->v2_parent = TAKE_PTR(dir);
                        return 0;
                }
                /* A cgroup systemd delegated to us (Delegate=yes): the daemon moves into a leaf
                 * of it and its sandboxes go beside that leaf, inside the unit's accounting and
                 * limits. If that fails, the fallback below still gives working caps. */
                if (fd >= 0 && cgroup_v2_is_delegated(dir)) {
                        struct airlock_error ignored = { "" };

                        if (cgroup_v2_delegate(dir, CGROUP_V2_DAEMON_LEAF, &ignored) >= 0) {
                                root->v2_parent = TAKE_PTR(dir);
                                return 0;
                        }
                }
        }

        r = v2_prepare_parent(st->v2_mount, "airlock", want_cpu, &root->v2_parent, err);
        if (r < 0)
                return r;
        return 0;
}

static int probe_v1(const struct probe_state *st, const char *parent_override,
                    struct cgroup_root *root, struct airlock_error *err)
{
        int r;

        for (size_t i = 0; i < CG1_COUNT; i++) {
                const char *rel = parent_override;

                if (!st->v1_mount[i])
                        continue;
                if (!rel) {
                        if (!st->v1_path[i])
                                continue;
                        r = path_below_mount(st->v1_mount_root[i], st->v1_path[i], &rel);
                        if (r < 0 || !relpath_is_safe(rel))
                                return airlock_error_set(
                                        err, -ENOENT,
                                        "own %s cgroup '%s' is not visible below its mount '%s' "
                                        "(root '%s'); set AIRLOCK_CGROUP_PARENT",
                                        v1_names[i], st->v1_path[i], st->v1_mount[i],
                                        st->v1_mount_root[i]);
                } else {
                        r = mkdir_below(st->v1_mount[i], rel, err);
                        if (r < 0)
                                return r;
                }
                root->v1_parent[i] = path_join(st->v1_mount[i], rel);
                if (!root->v1_parent[i])
                        return -ENOMEM;
        }
        return 0;
}

static int probe(const char *proc_root, const char *parent_override, struct cgroup_root *ret_root,
                 struct airlock_error *err)
{
        _cleanup_(probe_state_done) struct probe_state st = { 0 };
        _cleanup_(cgroup_root_donep) struct cgroup_root root = { 0 };
        char controllers[512] = "";
        bool v1_usable;
        int r;

        if (!proc_root || !ret_root)
                return -EINVAL;
        if (parent_override) {
                while (*parent_override == '/')
                        parent_override++;
                if (!relpath_is_safe(parent_override))
                        return airlock_error_set(err, -EINVAL,
                                                 "cgroup parent '%s' must not contain '.' or '..'",
                                                 parent_override);
        }

        r = parse_mountinfo(proc_root, &st, err);
        if (r < 0)
                return r;
        r = parse_self_cgroup(proc_root, &st, err);
        if (r < 0)
                return r;

        if (st.v2_mount) {
                _cleanup_close_ int fd = open(st.v2_mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                /* An unreadable cgroup2 mount counts as one without controllers: a hybrid
                 * host may still offer them on v1. */
                if (fd < 0 || read_small_file_at(fd, "cgroup.controllers", controllers,
                                                 sizeof(controllers)) < 0)
                        controllers[0] = '\0';
                strip_trailing_space(controllers);
        }
        if (st.v2_mount && list_has_word(controllers, "memory") &&
            list_has_word(controllers, "pids")) {
                root.version = CGROUP_V2;
                r = probe_v2(&st, parent_override, controllers, &root, err);
                if (r < 0)
                        return r;
                *ret_root = root;
                memset(&root, 0, sizeof(root));
                return 0;
        }

        v1_usable = st.v1_mount[CG1_MEMORY] && st.v1_mount[CG1_PIDS] &&
                    (parent_override || (st.v1_path[CG1_MEMORY] && st.v1_path[CG1_PIDS]));
        if (v1_usable) {
                root.version = CGROUP_V1;
                r = probe_v1(&st, parent_override, &root, err);
                if (r < 0)
                        return r;
                *ret_root = root;
                memset(&root, 0, sizeof(root));
                return 0;
        }

        (void) airlock_error_set(
                err, 0,
                "no usable cgroup controllers: %s%s%s; cgroup v1 %s memory and "
                "%s pids hierarchy",
                st.v2_mount ? "cgroup2 at '" : "no cgroup2 mount", st.v2_mount ? st.v2_mount : "",
                st.v2_mount ? "' lacks memory or pids in cgroup.controllers" : "",
                st.v1_mount[CG1_MEMORY] ? "has a" : "has no", st.v1_mount[CG1_PIDS] ? "a" : "no");
        memset(ret_root, 0, sizeof(*ret_root));
        ret_root->version = CGROUP_NONE;
        return 0;
}

int cgroup_probe(const char *proc_root, const char *parent_override, struct cgroup_root *ret_root,
                 struct airlock_error *err)
{
        int r = probe(proc_root, parent_override, ret_root, err);

        /* Allocation failures are the one kind of error that the steps leave unexplained. */
        if (r == -ENOMEM)
                return airlock_error_set(err, r, "out of memory while probing cgroups");
        return r;
}

void cgroup_root_done(struct cgroup_root *root)
{
        if (!root)
                return;
        free(root->v2_parent);
        for (size_t i = 0; i < CG1_COUNT; i++)
                free(root->v1_parent[i]);
        memset(root, 0, sizeof(*root));
}

/* Writes a limit; a file that the kernel does not offer is -ENOENT, reported with its name. */
static int write_limit(int dirfd, const char *file, const char *value, struct airlock_error *err)
{
        int r = write_file_at(dirfd, file, value);

        if (r < 0)
                return airlock_error_set(err, r, "cannot write '%s' to %s: %s", value, file,
                                         strerror(-r));
        return 0;
}

static uint64_t cpu_quota_usec(uint32_t millicpus)
{
        uint64_t quota = (uint64_t) millicpus * CPU_PERIOD_USEC / 1000;

        return quota < CPU_QUOTA_MIN_USEC ? CPU_QUOTA_MIN_USEC : quota;
}

static int apply_limits_v2(int fd, const struct cgroup_limits *limits, struct airlock_error *err)
{
        char value[64];
        int r;

        if (fd < 0)
                return airlock_error_set(err, -EBADF, "no cgroup v2 directory to write limits to");

        if (limits->memory_max > 0)
                (void) snprintf(value, sizeof(value), "%" PRIu64, limits->memory_max);
        else
                (void) snprintf(value, sizeof(value), "max");
        r = write_limit(fd, "memory.max", value, err);
        if (r < 0)
                return r;

        /* A sandbox never swaps: swapped-out pages would escape memory.max. The file is absent
         * when the kernel does not account swap (no CONFIG_SWAP, or cgroup.memory=noswap). */
        r = write_file_at(fd, "memory.swap.max", "0");
        if (r < 0 && r != -ENOENT)
                return airlock_error_set(err, r, "cannot write '0' to memory.swap.max: %s",
                                         strerror(-r));

        /* On OOM, kill the whole sandbox rather than one arbitrary process of it, so that a
         * half-killed process tree never keeps running (Linux 4.19). */
        r = write_limit(fd, "memory.oom.group", "1", err);
        if (r < 0)
                return r;

        if (limits->pids_max > 0)
                (void) snprintf(value, sizeof(value), "%" PRIu64, limits->pids_max);
        else
                (void) snprintf(value, sizeof(value), "max");
        r = write_limit(fd, "pids.max", value, err);
        if (r < 0)
                return r;

        if (limits->cpu_millicpus > 0)
                (void) snprintf(value, sizeof(value), "%" PRIu64 " %d",
                                cpu_quota_usec(limits->cpu_millicpus), CPU_PERIOD_USEC);
        else
                (void) snprintf(value, sizeof(value), "max %d", CPU_PERIOD_USEC);
        r = write_file_at(fd, "cpu.max", value);
        if (r == -ENOENT && limits->cpu_millicpus == 0)
                return 0;
        if (r == -ENOENT)
                return airlock_error_set(err, -EOPNOTSUPP,
                                         "cpu limit of %" PRIu32
                                         " millicpus requested but the cpu controller is not "
                                         "enabled (no cpu.max)",
                                         limits->cpu_millicpus);
        if (r < 0)
                return airlock_error_set(err, r, "cannot write '%s' to cpu.max: %s", value,
                                         strerror(-r));
        return 0;
}

static int apply_limits_v1(const int dirfds[CG1_COUNT], const struct cgroup_limits *limits,
                           struct airlock_error *err)
{
        int mem = dirfds[CG1_MEMORY];
        int cpu = dirfds[CG1_CPU];
        char value[64];
        int r;

        if (mem < 0)
                return airlock_error_set(err, -EBADF, "no cgroup v1 memory directory");
        if (dirfds[CG1_PIDS] < 0)
                return airlock_error_set(err, -EBADF, "no cgroup v1 pids directory");

        if (limits->memory_max > 0)
                (void) snprintf(value, sizeof(value), "%" PRIu64, limits->memory_max);
        else
                (void) snprintf(value, sizeof(value), "-1");

        /* The kernel keeps memory.limit_in_bytes <= memory.memsw.limit_in_bytes at every step
         * (mem_cgroup_resize_max()). Lowering therefore writes the memory limit first, and
         * raising, which fails that way with EINVAL, writes memsw first. memsw caps memory plus
         * swap, so equal values mean no swap; the file is absent without swap accounting
         * (swapaccount=0), which is tolerated. */
        r = write_file_at(mem, "memory.limit_in_bytes", value);
        if (r == -EINVAL) {
                r = write_file_at(mem, "memory.memsw.limit_in_bytes", value);
                if (r < 0 && r != -ENOENT)
                        return airlock_error_set(
                                err, r,
                                "cannot write '%s' to memory.memsw.limit_in_bytes: "
                                "%s",
                                value, strerror(-r));
                r = write_limit(mem, "memory.limit_in_bytes", value, err);
                if (r < 0)
                        return r;
        } else if (r < 0) {
                return airlock_error_set(err, r, "cannot write '%s' to memory.limit_in_bytes: %s",
                                         value, strerror(-r));
        }
        r = write_file_at(mem, "memory.memsw.limit_in_bytes", value);
        if (r < 0 && r != -ENOENT)
                return airlock_error_set(err, r,
                                         "cannot write '%s' to memory.memsw.limit_in_bytes: %s",
                                         value, strerror(-r));

        if (limits->pids_max > 0)
                (void) snprintf(value, sizeof(value), "%" PRIu64, limits->pids_max);
        else
                (void) snprintf(value, sizeof(value), "max");
        r = write_limit(dirfds[CG1_PIDS], "pids.max", value, err);
        if (r < 0)
                return r;

        if (cpu < 0) {
                if (limits->cpu_millicpus == 0)
                        return 0;
                return airlock_error_set(err, -EOPNOTSUPP,
                                         "cpu limit of %" PRIu32
                                         " millicpus requested but there is no cgroup v1 cpu "
                                         "hierarchy",
                                         limits->cpu_millicpus);
        }
        /* The period goes first: the quota is checked against it. */
        (void) snprintf(value, sizeof(value), "%d", CPU_PERIOD_USEC);
        r = write_limit(cpu, "cpu.cfs_period_us", value, err);
        if (r < 0)
                return r;
        if (limits->cpu_millicpus > 0)
                (void) snprintf(value, sizeof(value), "%" PRIu64,
                                cpu_quota_usec(limits->cpu_millicpus));
        else
                (void) snprintf(value, sizeof(value), "-1");
        return write_limit(cpu, "cpu.cfs_quota_us", value, err);
}

int cgroup_apply_limits(enum cgroup_version version, const int dirfds[CG1_COUNT],
                        const struct cgroup_limits *limits, struct airlock_error *err)
{
        static const struct cgroup_limits unlimited = { 0 };

        if (!dirfds)
                return -EINVAL;
        if (!limits)
                limits = &unlimited;
        switch (version) {
        case CGROUP_V2:
                return apply_limits_v2(dirfds[0], limits, err);
        case CGROUP_V1:
                return apply_limits_v1(dirfds, limits, err);
        case CGROUP_NONE:
                break;
        }
        return airlock_error_set(err, -EOPNOTSUPP, "no cgroup hierarchy to apply limits to");
}

/* Reads usage; peak_fd is a v2 memory.peak fd that was reset, or negative. cg, when given,
 * keeps the files open between calls (struct cgroup, usage_fd). */
/* counters_only: CPU time and OOM kills alone (cgroup_read_counters()). */
static int read_usage(struct cgroup *cg, enum cgroup_version version, const int dirfds[CG1_COUNT],
                      int peak_fd, bool counters_only, struct cgroup_usage *ret_usage)
{
        struct cgroup_usage u = { 0 };
        uint64_t v = 0;
        int r;

        if (!dirfds || !ret_usage)
                return -EINVAL;

        if (version == CGROUP_V2) {
                int fd = dirfds[0];

                if (fd < 0)
                        return -EBADF;
                r = counters_only ? 0
                                  : read_usage_u64(cg, USAGE_MEMORY, fd, "memory.current",
                                                   &u.memory_current);
                if (r < 0)
                        return r;

                /* memory.peak appeared in Linux 5.19. */
                if (counters_only)
                        r = -ENOENT;
                else if (peak_fd >= 0) {
                        char buf[64];
                        ssize_t n = pread_small(peak_fd, buf, sizeof(buf));

                        r = n < 0 ? (int) n : parse_u64(buf, &u.memory_peak);
                } else {
                        r = read_usage_u64(cg, USAGE_PEAK, fd, "memory.peak", &u.memory_peak);
                }
                if (r >= 0)
                        u.has_peak = true;
                else if (r != -ENOENT)
                        return r;

                r = read_usage_keyed_u64(cg, USAGE_CPU, fd, "cpu.stat", "usage_usec", &u.cpu_usec);
                if (r >= 0)
                        u.has_cpu = true;
                else if (r != -ENOENT && r != -ENODATA)
                        return r;

                r = read_usage_keyed_u64(cg, USAGE_OOM, fd, "memory.events", "oom_kill",
                                         &u.oom_kills);
                if (r < 0 && r != -ENOENT && r != -ENODATA)
                        return r;
        } else if (version == CGROUP_V1) {
                int mem = dirfds[CG1_MEMORY];

                if (mem < 0)
                        return -EBADF;
                r = counters_only ? 0
                                  : read_usage_u64(cg, USAGE_MEMORY, mem, "memory.usage_in_bytes",
                                                   &u.memory_current);
                if (r < 0)
                        return r;

                r = counters_only ? -ENOENT
                                  : read_usage_u64(cg, USAGE_PEAK, mem, "memory.max_usage_in_bytes",
                                                   &u.memory_peak);
                if (r >= 0)
                        u.has_peak = true;
                else if (r != -ENOENT)
                        return r;

                /* The "oom_kill" field appeared in Linux 4.13. memory.failcnt only counts hits
                 * of the limit, which reclaim usually resolves, so it is no OOM kill count. */
                r = read_usage_keyed_u64(cg, USAGE_OOM, mem, "memory.oom_control", "oom_kill",
                                         &u.oom_kills);
                if (r < 0 && r != -ENOENT && r != -ENODATA)
                        return r;

                if (dirfds[CG1_CPUACCT] >= 0) {
                        r = read_usage_u64(cg, USAGE_CPU, dirfds[CG1_CPUACCT], "cpuacct.usage", &v);
                        if (r >= 0) {
                                u.cpu_usec = v / 1000;
                                u.has_cpu = true;
                        } else if (r != -ENOENT) {
                                return r;
                        }
                }
        } else {
                return -EOPNOTSUPP;
        }

        *ret_usage = u;
        return 0;
}

int cgroup_read_usage_at(enum cgroup_version version, const int dirfds[CG1_COUNT],
                         struct cgroup_usage *ret_usage)
{
        return read_usage(NULL, version, dirfds, -EBADF, false, ret_usage);
}

int cgroup_read_usage(struct cgroup *cg, struct cgroup_usage *ret_usage)
{
        if (!cg)
                return -EINVAL;
        return read_usage(cg, cg->version, cg->dirfd, cg->peak_fd, false, ret_usage);
}

int cgroup_read_counters(struct cgroup *cg, struct cgroup_usage *ret_usage)
{
        if (!cg)
                return -EINVAL;
        return read_usage(cg, cg->version, cg->dirfd, cg->peak_fd, true, ret_usage);
}

static void close_usage_fds(struct cgroup *cg)
{
        for (size_t i = 0; i < USAGE_FILES; i++)
                if (cg->usage_fd[i] >= 0) {
                        (void) close(cg->usage_fd[i]);
                        cg->usage_fd[i] = -EBADF;
                }
}

static struct cgroup *cgroup_alloc(enum cgroup_version version)
{
        struct cgroup *cg = calloc(1, sizeof(*cg));

        if (!cg)
                return NULL;
        cg->version = version;
        cg->peak_fd = -EBADF;
        for (size_t i = 0; i < USAGE_FILES; i++)
                cg->usage_fd[i] = -EBADF;
        for (size_t i = 0; i < CG1_COUNT; i++) {
                cg->dirfd[i] = -EBADF;
                cg->same_as[i] = (int) i;
        }
        return cg;
}

/* Undoes a half-made cgroup_create(): removes what it made and frees the handle. */
static void cgroup_abortp(struct cgroup **cgp)
{
        if (!*cgp)
                return;
        (void) cgroup_destroy(*cgp);
        *cgp = cgroup_free(*cgp);
}

static void cgroup_freep(struct cgroup **cgp)
{
        *cgp = cgroup_free(*cgp);
}

static bool cgroup_is_distinct(const struct cgroup *cg, size_t i)
{
        return cg->path[i] && cg->same_as[i] == (int) i;
}

/* The parent directory of hierarchy i (an enum cgroup_v1_controller; 0 on v2), or NULL. */
static const char *root_parent(const struct cgroup_root *root, size_t i)
{
        if (root->version == CGROUP_V2)
                return i == 0 ? root->v2_parent : NULL;
        return root->version == CGROUP_V1 ? root->v1_parent[i] : NULL;
}

/* Sets cg->path[i] to name below root's parent of hierarchy i. Returns 1 when that directory is
 * new to cg; 0 when root lacks the hierarchy, or when an earlier hierarchy of cg has the same
 * directory (co-mounted v1 controllers: same_as[i] names it, dirfd[i] duplicates its fd); or
 * -errno. */
static int cgroup_place(struct cgroup *cg, const struct cgroup_root *root, size_t i,
                        const char *name)
{
        const char *parent = root_parent(root, i);

        if (!parent)
                return 0;
        cg->path[i] = path_join(parent, name);
        if (!cg->path[i])
                return -ENOMEM;
        for (size_t j = 0; j < i; j++) {
                if (!cg->path[j] || !streq(cg->path[j], cg->path[i]))
                        continue;
                cg->same_as[i] = (int) j;
                cg->dirfd[i] = fcntl(cg->dirfd[j], F_DUPFD_CLOEXEC, 3);
                return cg->dirfd[i] < 0 ? -errno : 0;
        }
        return 1;
}

int cgroup_create(const struct cgroup_root *root, const char *name,
                  const struct cgroup_limits *limits, struct cgroup **ret_cg,
                  struct airlock_error *err)
{
        _cleanup_(cgroup_abortp) struct cgroup *cg = NULL;
        int r;

        r = check_name(name, err);
        if (r < 0)
                return r;
        if (!root || !ret_cg)
                return -EINVAL;
        if (root->version != CGROUP_V1 && root->version != CGROUP_V2)
                return airlock_error_set(err, -EOPNOTSUPP, "no usable cgroup hierarchy");
        if (root->version == CGROUP_V2 && !root->v2_parent)
                return airlock_error_set(err, -EINVAL, "cgroup v2 root has no parent directory");
        if (root->version == CGROUP_V1 &&
            (!root->v1_parent[CG1_MEMORY] || !root->v1_parent[CG1_PIDS]))
                return airlock_error_set(err, -EINVAL,
                                         "cgroup v1 root lacks the memory or pids hierarchy");

        cg = cgroup_alloc(root->version);
        if (!cg)
                return -ENOMEM;

        for (size_t i = 0; i < CG1_COUNT; i++) {
                r = cgroup_place(cg, root, i, name);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;

                if (mkdir(cg->path[i], 0755) < 0) {
                        r = -errno;
                        return airlock_error_set(err, r, "cannot create cgroup '%s': %s",
                                                 cg->path[i], strerror(-r));
                }
                cg->owned[i] = true;

                /* A real directory fd rather than O_PATH, so that it can also serve as the
                 * target of clone3(CLONE_INTO_CGROUP). */
                cg->dirfd[i] = open(cg->path[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (cg->dirfd[i] < 0) {
                        r = -errno;
                        return airlock_error_set(err, r, "cannot open cgroup '%s': %s", cg->path[i],
                                                 strerror(-r));
                }
        }

        r = cgroup_apply_limits(root->version, cg->dirfd, limits, err);
        if (r < 0)
                return r;

        /* The files every execution reads are opened now, not on first use, so that the fds
         * a sandbox holds are all there when the daemon counts its room for one more (and on
         * v2 the reset's memory.peak fd exists before any read would open a second one).
         * Whatever fails here is tried again on first use. */
        {
                struct cgroup_usage u;
                (void) cgroup_reset_peak(cg);
                (void) cgroup_read_usage(cg, &u);
        }
        *ret_cg = TAKE_PTR(cg);
        return 0;
}

int cgroup_attach(struct cgroup *cg, pid_t pid)
{
        char value[32];
        int r;

        if (!cg || pid <= 0)
                return -EINVAL;
        (void) snprintf(value, sizeof(value), "%d", (int) pid);
        for (size_t i = 0; i < CG1_COUNT; i++) {
                if (!cgroup_is_distinct(cg, i))
                        continue;
                r = write_file_at(cg->dirfd[i], "cgroup.procs", value);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cgroup_reset_peak(struct cgroup *cg)
{
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!cg)
                return -EINVAL;

        if (cg->version == CGROUP_V1) {
                /* Any write resets the v1 watermark to the current usage; the fd is the one
                 * read_usage() reads the peak through, opened for writing too. */
                int peak = usage_fd(cg, USAGE_PEAK, cg->dirfd[CG1_MEMORY],
                                    "memory.max_usage_in_bytes");
                r = peak < 0 ? peak : pwrite(peak, "0", 1, 0) == 1 ? 0 : -errno;
                if (r == -ENOENT || r == -EACCES || r == -EINVAL || r == -EBADF)
                        return -EOPNOTSUPP;
                return r;
        }
        if (cg->version != CGROUP_V2)
                return -EOPNOTSUPP;

        /* memory.peak is writable since Linux 6.12, and the reset is local to the open file
         * description; older kernels refuse to open it for writing. */
        fd = openat(cg->dirfd[0], "memory.peak", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                r = -errno;
                if (r == -ENOENT || r == -EACCES || r == -EPERM || r == -EINVAL)
                        return -EOPNOTSUPP;
                return r;
        }
        r = write_full(fd, "reset\n", strlen("reset\n"));
        if (r == -EINVAL || r == -EACCES)
                return -EOPNOTSUPP;
        if (r < 0)
                return r;
        if (cg->peak_fd >= 0)
                (void) close(cg->peak_fd);
        cg->peak_fd = TAKE_FD(fd);
        return 0;
}

/* Sends SIGKILL to every process listed in each directory's cgroup.procs. *ret_found says
 * whether any process was listed. A directory already removed counts as empty. */
static int kill_listed(struct cgroup *cg, bool *ret_found)
{
        bool found = false;
        pid_t self = getpid();

        for (size_t i = 0; i < CG1_COUNT; i++) {
                _cleanup_fclose_ FILE *f = NULL;
                int fd;
                int pid;

                if (!cgroup_is_distinct(cg, i))
                        continue;
                fd = openat(cg->dirfd[i], "cgroup.procs", O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        if (errno == ENOENT)
                                continue;
                        return -errno;
                }
                f = fdopen(fd, "r");
                if (!f) {
                        int r = -errno;
                        (void) close(fd);
                        return r;
                }
                while (fscanf(f, "%d", &pid) == 1) {
                        /* Never ourselves or init, whatever a broken file might list. */
                        if (pid <= 1 || pid == self)
                                continue;
                        found = true;
                        if (kill(pid, SIGKILL) < 0 && errno != ESRCH)
                                return -errno;
                }
        }
        *ret_found = found;
        return 0;
}

/* Kills listed processes until none are left; the kernel drops a process from cgroup.procs
 * once it has exited, even while it is a zombie. */
static int kill_until_empty(struct cgroup *cg)
{
        uint64_t deadline = now_ns() + KILL_TIMEOUT_NS;

        for (;;) {
                bool found;
                int r = kill_listed(cg, &found);

                if (r < 0)
                        return r;
                if (!found)
                        return 0;
                if (now_ns() > deadline)
                        return -ETIMEDOUT;
                sleep_ns(POLL_INTERVAL_NS);
        }
}

/* Freezes the cgroup and waits, bounded, until the kernel reports it frozen: v1 freezer.state
 * reads FROZEN, v2 cgroup.events says "frozen 1" (cgroup.freeze, Linux 5.2). A task stuck in an
 * uninterruptible sleep can delay that; the caller kills anyway. Returns -ENOENT when the cgroup
 * cannot be frozen. */
static int freeze(int fd, enum cgroup_version version)
{
        uint64_t deadline = now_ns() + FREEZE_TIMEOUT_NS;
        bool v2 = version == CGROUP_V2;
        int r;

        r = write_file_at(fd, v2 ? "cgroup.freeze" : "freezer.state", v2 ? "1" : "FROZEN");
        if (r < 0)
                return r;
        for (;;) {
                if (v2) {
                        uint64_t frozen = 0;

                        r = read_keyed_u64_at(fd, "cgroup.events", "frozen", &frozen);
                        if (r < 0)
                                return r;
                        if (frozen == 1)
                                return 0;
                } else {
                        char state[32];
                        ssize_t n = read_small_file_at(fd, "freezer.state", state, sizeof(state));

                        if (n < 0)
                                return (int) n;
                        strip_trailing_space(state);
                        if (streq(state, "FROZEN"))
                                return 0;
                }
                if (now_ns() > deadline)
                        return -ETIMEDOUT;
                sleep_ns(NSEC_PER_MSEC);
        }
}

static void thaw(int fd, enum cgroup_version version)
{
        if (version == CGROUP_V2)
                (void) write_file_at(fd, "cgroup.freeze", "0");
        else
                (void) write_file_at(fd, "freezer.state", "THAWED");
}

int cgroup_kill_all(struct cgroup *cg)
{
        int fd = -EBADF;
        bool found;
        int r;

        if (!cg)
                return -EINVAL;

        if (cg->version == CGROUP_V2) {
                /* cgroup.kill (Linux 5.14) kills every process at once, forks in flight
                 * included; what follows only waits for them to be gone. */
                r = write_file_at(cg->dirfd[0], "cgroup.kill", "1");
                if (r >= 0)
                        return kill_until_empty(cg);
                if (r != -ENOENT)
                        return r;
                fd = cg->dirfd[0];
        } else if (cg->version == CGROUP_V1) {
                fd = cg->dirfd[CG1_FREEZER];
        } else {
                return -EOPNOTSUPP;
        }

        /* Without a freezer, a process could fork between our reading cgroup.procs and the
         * kill, and the loop below has to catch the child in a later round. Frozen, no task
         * can fork, and the SIGKILLs take effect once we thaw (a frozen v1 task does not die
         * before that). */
        if (fd >= 0) {
                r = freeze(fd, cg->version);
                if (r != -ENOENT) {
                        if (r < 0 && r != -ETIMEDOUT) {
                                thaw(fd, cg->version);
                                return r;
                        }
                        r = kill_listed(cg, &found);
                        /* Thaw even on failure: frozen tasks would otherwise never die. */
                        thaw(fd, cg->version);
                        if (r < 0)
                                return r;
                }
        }
        return kill_until_empty(cg);
}

int cgroup_destroy(struct cgroup *cg)
{
        uint64_t deadline = now_ns() + RMDIR_TIMEOUT_NS;
        int ret = 0;

        if (!cg)
                return 0;
        if (cg->peak_fd >= 0) {
                (void) close(cg->peak_fd);
                cg->peak_fd = -EBADF;
        }
        close_usage_fds(cg);
        for (size_t k = CG1_COUNT; k > 0; k--) {
                size_t i = k - 1;

                if (!cg->owned[i])
                        continue;
                for (;;) {
                        if (rmdir(cg->path[i]) >= 0 || errno == ENOENT) {
                                cg->owned[i] = false;
                                break;
                        }
                        /* Tasks that were just killed leave the cgroup asynchronously. */
                        if (errno == EBUSY && now_ns() < deadline) {
                                sleep_ns(POLL_INTERVAL_NS);
                                continue;
                        }
                        if (ret == 0)
                                ret = -errno;
                        break;
                }
        }
        return ret;
}

struct cgroup *cgroup_free(struct cgroup *cg)
{
        if (!cg)
                return NULL;
        if (cg->peak_fd >= 0)
                (void) close(cg->peak_fd);
        close_usage_fds(cg);
        for (size_t i = 0; i < CG1_COUNT; i++) {
                if (cg->dirfd[i] >= 0)
                        (void) close(cg->dirfd[i]);
                free(cg->path[i]);
        }
        free(cg);
        return NULL;
}

const char *cgroup_version_name(enum cgroup_version version)
{
        switch (version) {
        case CGROUP_V2:
                return "v2";
        case CGROUP_V1:
                return "v1";
        case CGROUP_NONE:
                return "none";
        }
        return "unknown";
}

/* Creates dir (a cgroup below an existing parent) unless it exists already. */
static int mkdir_cgroup(const char *dir, struct airlock_error *err)
{
        struct stat st;
        int r;

        if (mkdir(dir, 0755) >= 0)
                return 0;
        r = -errno;
        if (r == -EEXIST && lstat(dir, &st) >= 0 && S_ISDIR(st.st_mode))
                return 0;
        return airlock_error_set(err, r, "cannot create cgroup '%s': %s", dir,
                                 r == -EEXIST ? "it exists and is not a directory" : strerror(-r));
}

int cgroup_root_enter(const struct cgroup_root *base, const char *name,
                      struct cgroup_root *ret_scoped, struct airlock_error *err)
{
        _cleanup_(cgroup_root_donep) struct cgroup_root scoped = { 0 };
        int r;

        r = check_name(name, err);
        if (r < 0)
                return r;
        if (!base || !ret_scoped)
                return -EINVAL;
        scoped.version = base->version;
        if (base->version == CGROUP_V2) {
                _cleanup_close_ int fd = -EBADF;
                char controllers[512];

                if (!base->v2_parent)
                        return airlock_error_set(err, -EINVAL,
                                                 "cgroup v2 root has no parent directory");
                scoped.v2_parent = path_join(base->v2_parent, name);
                if (!scoped.v2_parent)
                        return -ENOMEM;
                r = mkdir_cgroup(scoped.v2_parent, err);
                if (r < 0)
                        return r;
                /* The sandboxes' cgroups are made below this one, so it hands its children
                 * the controllers its parent hands it: it never holds a process itself, so
                 * v2 lets it (the "no internal processes" rule). */
                fd = open(scoped.v2_parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || read_small_file_at(fd, "cgroup.controllers", controllers,
                                                 sizeof(controllers)) < 0)
                        controllers[0] = '\0';
                r = v2_enable_subtree(scoped.v2_parent, list_has_word(controllers, "cpu"), err);
                if (r < 0)
                        return r;
        } else if (base->version == CGROUP_V1) {
                for (size_t i = 0; i < CG1_COUNT; i++) {
                        if (!base->v1_parent[i])
                                continue;
                        scoped.v1_parent[i] = path_join(base->v1_parent[i], name);
                        if (!scoped.v1_parent[i])
                                return -ENOMEM;
                        /* Co-mounted controllers ("cpu,cpuacct") share the directory. */
                        r = mkdir_cgroup(scoped.v1_parent[i], err);
                        if (r < 0)
                                return r;
                }
        } else {
                return airlock_error_set(err, -EOPNOTSUPP, "no usable cgroup hierarchy");
        }
        *ret_scoped = scoped;
        memset(&scoped, 0, sizeof(scoped));
        return 0;
}

int cgroup_root_remove(const struct cgroup_root *scoped)
{
        int ret = 0;

        if (!scoped)
                return -EINVAL;
        if (scoped->version == CGROUP_V2 && scoped->v2_parent)
                return rmdir(scoped->v2_parent) < 0 && errno != ENOENT ? -errno : 0;
        for (size_t i = 0; i < CG1_COUNT; i++) {
                if (!scoped->v1_parent[i])
                        continue;
                if (rmdir(scoped->v1_parent[i]) < 0 && errno != ENOENT && ret == 0)
                        ret = -errno;
        }
        return ret;
}

/* A handle on the existing cgroup `name` below root, in every hierarchy where it exists, that
 * cgroup_destroy() removes. Returns 0, -ENOENT where it exists nowhere, or -errno. */
static int cgroup_adopt(const struct cgroup_root *root, const char *name, struct cgroup **ret_cg)
{
        _cleanup_(cgroup_freep) struct cgroup *cg = NULL;
        bool found = false;
        int r;

        cg = cgroup_alloc(root->version);
        if (!cg)
                return -ENOMEM;
        for (size_t i = 0; i < CG1_COUNT; i++) {
                r = cgroup_place(cg, root, i, name);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                cg->dirfd[i] = open(cg->path[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cg->dirfd[i] < 0) {
                        if (errno != ENOENT)
                                return -errno;
                        /* Not in this hierarchy (a creation cut short by a crash). */
                        free(cg->path[i]);
                        cg->path[i] = NULL;
                        continue;
                }
                cg->owned[i] = true;
                found = true;
        }
        if (!found)
                return -ENOENT;
        *ret_cg = TAKE_PTR(cg);
        return 0;
}

/* Kills and removes the cgroups below parent whose names start with prefix. */
static int reap_in(const struct cgroup_root *root, const char *parent, const char *prefix,
                   unsigned *ret_left)
{
        size_t plen = strlen(prefix);
        struct dirent *de;
        int removed = 0;
        DIR *d;

        d = opendir(parent);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(d))) {
                struct cgroup *cg = NULL;

                if (de->d_type != DT_DIR || strncmp(de->d_name, prefix, plen) != 0 ||
                    !name_is_valid(de->d_name))
                        continue;
                if (cgroup_adopt(root, de->d_name, &cg) < 0)
                        continue;
                if (cgroup_kill_all(cg) >= 0 && cgroup_destroy(cg) >= 0)
                        removed++;
                else
                        (*ret_left)++;
                cg = cgroup_free(cg);
        }
        closedir(d);
        return removed;
}

int cgroup_reap_stale(const struct cgroup_root *root, const char *prefix, unsigned *ret_left)
{
        unsigned left = 0;
        int removed = 0, r;

        if (!root || !prefix || !*prefix)
                return -EINVAL;
        for (size_t i = 0; i < CG1_COUNT; i++) {
                const char *parent = root_parent(root, i);

                if (!parent)
                        continue;
                r = reap_in(root, parent, prefix, &left);
                if (r < 0)
                        return r;
                removed += r;
        }
        if (ret_left)
                *ret_left = left;
        return removed;
}

/* ---- CPU weights (docs/PERFORMANCE.md, "Fairness under load") ---- */

uint64_t cgroup_weight_to_shares(uint32_t weight)
{
        /* cpu.weight 100 is cpu.shares 1024, the default of each; the kernel maps between the
         * two the same way for v2 on top of the same scheduler (sched_weight_from_cgroup()). */
        uint64_t shares = (uint64_t) weight * 1024 / CGROUP_WEIGHT_DEFAULT;

        if (shares < CGROUP_SHARES_MIN)
                return CGROUP_SHARES_MIN;
        if (shares > CGROUP_SHARES_MAX)
                return CGROUP_SHARES_MAX;
        return shares;
}

static int check_weight(uint32_t weight)
{
        return weight >= CGROUP_WEIGHT_MIN && weight <= CGROUP_WEIGHT_MAX ? 0 : -EINVAL;
}

/* Writes the weight into dir (v2 cpu.weight, v1 cpu.shares). -ENOENT: no cpu controller. */
static int write_weight(enum cgroup_version version, int dirfd, uint32_t weight)
{
        char value[32];

        if (dirfd < 0)
                return -ENOENT;
        if (version == CGROUP_V2) {
                (void) snprintf(value, sizeof(value), "%" PRIu32, weight);
                return write_file_at(dirfd, "cpu.weight", value);
        }
        (void) snprintf(value, sizeof(value), "%" PRIu64, cgroup_weight_to_shares(weight));
        return write_file_at(dirfd, "cpu.shares", value);
}

int cgroup_set_cpu_weight_at(enum cgroup_version version, const int dirfds[CG1_COUNT],
                             uint32_t weight)
{
        if (!dirfds || check_weight(weight) < 0)
                return -EINVAL;
        if (version == CGROUP_V2)
                return write_weight(version, dirfds[0], weight);
        if (version == CGROUP_V1)
                return write_weight(version, dirfds[CG1_CPU], weight);
        return -EOPNOTSUPP;
}

int cgroup_set_cpu_weight(struct cgroup *cg, uint32_t weight)
{
        if (!cg)
                return -EINVAL;
        return cgroup_set_cpu_weight_at(cg->version, cg->dirfd, weight);
}

int cgroup_read_cpu_usec(struct cgroup *cg, uint64_t *ret_usec)
{
        uint64_t v = 0;
        int r;

        if (!cg || !ret_usec)
                return -EINVAL;
        if (cg->version == CGROUP_V2) {
                r = read_usage_keyed_u64(cg, USAGE_CPU, cg->dirfd[0], "cpu.stat", "usage_usec",
                                         ret_usec);
                return r == -ENODATA ? -ENOENT : r;
        }
        if (cg->version != CGROUP_V1)
                return -EOPNOTSUPP;
        if (cg->dirfd[CG1_CPUACCT] < 0)
                return -ENOENT;
        r = read_usage_u64(cg, USAGE_CPU, cg->dirfd[CG1_CPUACCT], "cpuacct.usage", &v);
        if (r < 0)
                return r;
        *ret_usec = v / 1000;
        return 0;
}

int cgroup_runnable_tasks(struct cgroup *cg)
{
        int dirfd, fd, n = 0;
        _cleanup_fclose_ FILE *f = NULL;
        int pid;

        if (!cg)
                return -EINVAL;
        dirfd = cg->version == CGROUP_V2 ? cg->dirfd[0] : cg->dirfd[CG1_PIDS];
        if (dirfd < 0)
                return -ENOENT;
        /* v1 "tasks" and v2 "cgroup.threads" list every thread (in a v2 domain cgroup that is
         * not threaded, cgroup.threads is readable too). */
        fd = openat(dirfd, cg->version == CGROUP_V2 ? "cgroup.threads" : "tasks",
                    O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        f = fdopen(fd, "r");
        if (!f) {
                int r = -errno;
                (void) close(fd);
                return r;
        }
        while (fscanf(f, "%d", &pid) == 1) {
                char path[64], stat[512], *close_paren;
                ssize_t len;

                if (pid <= 0)
                        continue;
                (void) snprintf(path, sizeof(path), "/proc/%d/stat", pid);
                len = read_small_file_at(AT_FDCWD, path, stat, sizeof(stat));
                if (len < 0)
                        continue; /* gone meanwhile */
                /* "pid (comm) S ...": comm may hold anything, so look after its last ')'. */
                close_paren = strrchr(stat, ')');
                if (close_paren && close_paren[1] == ' ' && close_paren[2] == 'R')
                        n++;
        }
        return n;
}

/* The cpu directory of a scope made by cgroup_root_enter(): v2's one, v1's cpu hierarchy's. */
static const char *scope_cpu_dir(const struct cgroup_root *scoped)
{
        if (scoped->version == CGROUP_V2)
                return scoped->v2_parent;
        if (scoped->version == CGROUP_V1)
                return scoped->v1_parent[CG1_CPU];
        return NULL;
}

int cgroup_root_set_cpu_weight(const struct cgroup_root *scoped, uint32_t weight)
{
        _cleanup_close_ int fd = -EBADF;
        const char *dir;

        if (!scoped || check_weight(weight) < 0)
                return -EINVAL;
        dir = scope_cpu_dir(scoped);
        if (!dir)
                return -ENOENT;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return write_weight(scoped->version, fd, weight);
}

/* Writes pid into dir/cgroup.procs (v1: every thread of the process moves). */
static int move_pid_to(const char *dir, pid_t pid)
{
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char value[32];

        if (fd < 0)
                return -errno;
        (void) snprintf(value, sizeof(value), "%d", (int) pid);
        return write_file_at(fd, "cgroup.procs", value);
}

/* dirname() of an absolute path, in a new string; "/" for a top-level entry. */
static char *parent_dir(const char *path)
{
        const char *slash = strrchr(path, '/');

        if (!slash)
                return NULL;
        if (slash == path)
                return strdup("/");
        return strndup(path, (size_t) (slash - path));
}

int cgroup_daemon_weigh(const struct cgroup_root *scoped, const char *own_v2_dir, uint32_t weight,
                        pid_t pid, struct cgroup_daemon *ret, struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *leaf = NULL;
        const char *scope;
        int r;

        if (!scoped || !ret || check_weight(weight) < 0)
                return airlock_error_set(err, -EINVAL, "the daemon's CPU weight must be %d-%d",
                                         CGROUP_WEIGHT_MIN, CGROUP_WEIGHT_MAX);
        memset(ret, 0, sizeof(*ret));
        scope = scope_cpu_dir(scoped);
        if (!scope)
                return airlock_error_set(err, -EOPNOTSUPP, "no cgroup cpu controller");

        if (scoped->version == CGROUP_V2) {
                _cleanup_free_ char *own_parent = NULL, *scope_parent = NULL;

                /* v2 lets a process live only in a leaf, and moving the daemon would move its
                 * memory charge with it; so its weight applies only where its own cgroup is
                 * the scope's sibling, as in the delegated layout (<unit>/daemon beside
                 * <unit>/airlock-d-<id>). */
                if (!own_v2_dir)
                        return airlock_error_set(err, -EOPNOTSUPP,
                                                 "the daemon's own cgroup v2 is unknown");
                own_parent = parent_dir(own_v2_dir);
                scope_parent = parent_dir(scope);
                if (!own_parent || !scope_parent)
                        return -ENOMEM;
                if (strcmp(own_parent, scope_parent) != 0)
                        return airlock_error_set(
                                err, -EOPNOTSUPP,
                                "the daemon's cgroup '%s' is not beside its sessions' '%s', so "
                                "no weight can rank them (run it under systemd with "
                                "Delegate=yes)",
                                own_v2_dir, scope);
                fd = open(own_v2_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return airlock_error_set(err, -errno, "cannot open '%s': %s", own_v2_dir,
                                                 strerror(errno));
                r = write_weight(CGROUP_V2, fd, weight);
                if (r < 0)
                        return airlock_error_set(
                                err, r, "cannot write cpu.weight in '%s': %s", own_v2_dir,
                                r == -ENOENT ? "no cpu controller there" : strerror(-r));
                ret->weight = weight;
                return 0;
        }

        /* v1: the daemon's threads go into a cpu cgroup of their own beside the scope,
         * "<scope>" CGROUP_DAEMON_CPU_SUFFIX, as in v2's delegated layout (only the cpu
         * hierarchy: its memory stays charged where it was). The sessions then weigh as one
         * cgroup against the daemon and against the other work of the daemon's own cgroup,
         * as they did before, while the daemon's threads weigh as one heavy cgroup instead of
         * one default process each. The sweep of leftovers only looks inside the scope. */
        if (asprintf(&leaf, "%s" CGROUP_DAEMON_CPU_SUFFIX, scope) < 0) {
                leaf = NULL;
                return -ENOMEM;
        }
        r = mkdir_cgroup(leaf, err);
        if (r < 0)
                return r;
        fd = open(leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return airlock_error_set(err, -errno, "cannot open '%s': %s", leaf,
                                         strerror(errno));
        r = write_weight(CGROUP_V1, fd, weight);
        if (r < 0)
                return airlock_error_set(err, r, "cannot write cpu.shares in '%s': %s", leaf,
                                         strerror(-r));
        r = move_pid_to(leaf, pid);
        if (r < 0)
                return airlock_error_set(err, r, "cannot move the daemon into '%s': %s", leaf,
                                         strerror(-r));
        ret->v1_leaf = TAKE_PTR(leaf);
        ret->v1_home = parent_dir(scope);
        ret->pid = pid;
        ret->weight = weight;
        return ret->v1_home ? 0 : -ENOMEM;
}

void cgroup_daemon_done(struct cgroup_daemon *d)
{
        if (!d)
                return;
        if (d->v1_leaf && d->v1_home && move_pid_to(d->v1_home, d->pid) >= 0) {
                /* Back where it came from, so that its leaf (and the scope) can go. The
                 * children it started since (a stdio MCP server, QEMU: only sandboxes get a
                 * cgroup of their own) are in the leaf too, and some may still be exiting: they
                 * follow it home, and the leaf goes once the kernel lets it (a second at most). */
                for (int tries = 0; tries < 100; tries++) {
                        _cleanup_close_ int fd =
                                open(d->v1_leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        char procs[4096], *p, *end;

                        if (fd >= 0 &&
                            read_small_file_at(fd, "cgroup.procs", procs, sizeof(procs)) > 0)
                                for (p = procs; *p; p = end) {
                                        long pid = strtol(p, &end, 10);
                                        if (end == p)
                                                break;
                                        if (pid > 0)
                                                (void) move_pid_to(d->v1_home, (pid_t) pid);
                                }
                        if (rmdir(d->v1_leaf) == 0 || errno != EBUSY)
                                break;
                        (void) usleep(10 * 1000);
                }
        }
        free(d->v1_leaf);
        free(d->v1_home);
        memset(d, 0, sizeof(*d));
}
