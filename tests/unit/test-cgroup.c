/* Unit tests for src/jail/cgroup.c. Most run against fake trees in a temporary directory: fake
 * proc files for the probe, and directories with pre-made empty control files whose contents show
 * exactly what the code wrote. The "real" tests use this host's kernel and skip visibly when they
 * cannot (not root, no controllers). */
#include "jail/cgroup.h"

#include "base/cleanup.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static char tmp[128];

/* State of a real-kernel test, undone by fini even when an assertion failed. */
static struct {
        pid_t child;
        struct cgroup *cg;
        struct cgroup_root root;
        bool have_root;
        char name[64];
} real;

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void) st;
        (void) type;
        (void) ftw;
        (void) remove(path);
        return 0;
}

static void tmp_setup(void)
{
        (void) snprintf(tmp, sizeof(tmp), "/tmp/airlock-test-cgroup-XXXXXX");
        cr_assert_not_null(mkdtemp(tmp), "mkdtemp: %s", strerror(errno));
}

static void tmp_teardown(void)
{
        if (tmp[0])
                (void) nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        tmp[0] = '\0';
}

/* Returns tmp/<rel> in a static buffer (one of a few, so that two can be used in one call). */
static const char *at(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *at(const char *fmt, ...)
{
        static char bufs[4][PATH_MAX];
        static unsigned next;
        char rel[PATH_MAX - 256];
        char *buf = bufs[next++ % 4];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(rel, sizeof(rel), fmt, ap);
        va_end(ap);
        (void) snprintf(buf, PATH_MAX, "%s/%s", tmp, rel);
        return buf;
}

static void mkdir_p(const char *path)
{
        char buf[PATH_MAX];

        (void) snprintf(buf, sizeof(buf), "%s", path);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                (void) mkdir(buf, 0755);
                *p = '/';
        }
        cr_assert(mkdir(buf, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", buf, strerror(errno));
}

/* Creates path (and its parent directories) holding exactly content. */
static void put(const char *path, const char *content)
{
        char dir[PATH_MAX];
        FILE *f;

        (void) snprintf(dir, sizeof(dir), "%s", path);
        *strrchr(dir, '/') = '\0';
        mkdir_p(dir);
        f = fopen(path, "we");
        cr_assert_not_null(f, "fopen %s: %s", path, strerror(errno));
        cr_assert_eq(fputs(content, f) >= 0, true);
        cr_assert_eq(fclose(f), 0);
}

/* Returns the contents of path in a static buffer, or a marker that no control file holds if
 * it cannot be read, so that a string comparison fails cleanly. */
static const char *get(const char *path)
{
        static char buf[4096];
        FILE *f = fopen(path, "re");
        size_t n;

        if (!f)
                return "(unreadable)";
        n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        (void) fclose(f);
        return buf;
}

static bool exists(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0;
}

static int open_dir(const char *path)
{
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
        return fd;
}

static void close_dirs(int fds[CG1_COUNT])
{
        for (size_t i = 0; i < CG1_COUNT; i++)
                if (fds[i] >= 0)
                        (void) close(fds[i]);
}

static void fake_proc(const char *mountinfo, const char *cgroup)
{
        put(at("proc/self/mountinfo"), mountinfo);
        put(at("proc/self/cgroup"), cgroup);
}

static char *fmt(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *format, ...)
{
        char *s;
        va_list ap;

        va_start(ap, format);
        cr_assert_geq(vasprintf(&s, format, ap), 0);
        va_end(ap);
        return s;
}

/* Mount table of this project's CI hosts: v1 controllers, a controller-less cgroup2, systemd's
 * named hierarchy, and unrelated mounts around them. */
static char *hybrid_mountinfo(bool comount_cpu)
{
        _cleanup_free_ char *cpuacct = NULL;

        if (!comount_cpu)
                cpuacct = fmt("33 31 0:30 / %s/v1/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n",
                              tmp);
        return fmt("22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n"
                   "31 23 0:28 / %1$s/v1 rw,relatime - tmpfs tmpfs rw,mode=755\n"
                   "32 31 0:29 / %1$s/v1/cpu rw,relatime - cgroup cgroup %2$s\n"
                   "%3$s"
                   "34 31 0:31 / %1$s/v1/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
                   "35 31 0:32 / %1$s/v1/memory rw,relatime - cgroup cgroup rw,memory\n"
                   "37 31 0:34 / %1$s/v1/freezer rw,relatime - cgroup cgroup rw,freezer\n"
                   "39 31 0:36 / %1$s/v1/pids rw,relatime - cgroup cgroup rw,pids\n"
                   "40 31 0:37 / %1$s/v1/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
                   "41 31 0:38 / %1$s/unified rw,relatime - cgroup2 cgroup2 rw\n",
                   tmp, comount_cpu ? "rw,cpu,cpuacct" : "rw,cpu", cpuacct ? cpuacct : "");
}

static const char hybrid_cgroup[] = "9:name=systemd:/\n"
                                    "8:pids:/\n"
                                    "6:freezer:/\n"
                                    "4:memory:/process_api/abc\n"
                                    "3:cpuset:/\n"
                                    "2:cpuacct:/\n"
                                    "1:cpu:/\n"
                                    "0::/\n";

static char *v2_mountinfo(const char *mount_escaped)
{
        return fmt("22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n"
                   "30 23 0:26 / %s/%s rw,nosuid,nodev,noexec,relatime shared:4 master:1 - "
                   "cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
                   tmp, mount_escaped);
}

TestSuite(probe, .init = tmp_setup, .fini = tmp_teardown);

Test(probe, v2_falls_back_to_airlock_parent)
{
        _cleanup_free_ char *mi = v2_mountinfo("cg2");
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };
        int r;

        fake_proc(mi, "0::/system.slice/airlockd.service\n");
        put(at("cg2/cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n");
        put(at("cg2/cgroup.subtree_control"), "");
        put(at("cg2/system.slice/airlockd.service/cgroup.subtree_control"), "");
        /* The kernel would make this file on mkdir; the fake tree has it ready. */
        put(at("cg2/airlock/cgroup.subtree_control"), "");

        r = cgroup_probe(at("proc"), NULL, &root, &err);
        cr_assert_eq(r, 0, "probe: %d %s", r, err.msg);
        cr_assert_eq(root.version, CGROUP_V2);
        cr_assert_str_eq(root.v2_parent, at("cg2/airlock"));
        cr_assert_str_eq(get(at("cg2/cgroup.subtree_control")), "+memory +pids +cpu");
        cr_assert_str_eq(get(at("cg2/airlock/cgroup.subtree_control")), "+memory +pids +cpu");
        /* The caller's own cgroup holds processes: v2 forbids enabling controllers there. */
        cr_assert_str_eq(get(at("cg2/system.slice/airlockd.service/cgroup.subtree_control")), "");
        for (size_t i = 0; i < CG1_COUNT; i++)
                cr_assert_null(root.v1_parent[i]);
        cgroup_root_done(&root);
        cr_assert_null(root.v2_parent);
}

Test(probe, v2_uses_delegated_own_cgroup_and_unescapes_mountinfo)
{
        /* The mount point "cg 2" appears as "cg\0402" in mountinfo. */
        _cleanup_free_ char *mi = v2_mountinfo("cg\\0402");
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };
        int r;

        fake_proc(mi, "0::/user.slice/delegated\n");
        put(at("cg 2/cgroup.controllers"), "cpu memory pids\n");
        put(at("cg 2/cgroup.subtree_control"), "cpu memory pids\n");
        put(at("cg 2/user.slice/delegated/cgroup.subtree_control"), "memory pids\n");

        r = cgroup_probe(at("proc"), NULL, &root, &err);
        cr_assert_eq(r, 0, "probe: %d %s", r, err.msg);
        cr_assert_eq(root.version, CGROUP_V2);
        cr_assert_str_eq(root.v2_parent, at("cg 2/user.slice/delegated"));
        cr_assert_not(exists(at("cg 2/airlock")), "fallback parent made although not needed");
        cr_assert_str_eq(get(at("cg 2/user.slice/delegated/cgroup.subtree_control")),
                         "memory pids\n");
        cgroup_root_done(&root);
}

Test(probe, v2_parent_override)
{
        _cleanup_free_ char *mi = v2_mountinfo("cg2");
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };
        int r;

        fake_proc(mi, "0::/user.slice/delegated\n");
        put(at("cg2/cgroup.controllers"), "memory pids\n");
        put(at("cg2/cgroup.subtree_control"), "memory pids\n");
        put(at("cg2/user.slice/delegated/cgroup.subtree_control"), "memory pids\n");
        put(at("cg2/tests/cgroup.subtree_control"), "pids\n");
        put(at("cg2/tests/inner/cgroup.subtree_control"), "");

        r = cgroup_probe(at("proc"), "/tests/inner", &root, &err);
        cr_assert_eq(r, 0, "probe: %d %s", r, err.msg);
        cr_assert_eq(root.version, CGROUP_V2);
        cr_assert_str_eq(root.v2_parent, at("cg2/tests/inner"));
        /* No cpu in cgroup.controllers, so only memory and pids are asked for, and only what
         * is missing at each level. */
        cr_assert_str_eq(get(at("cg2/cgroup.subtree_control")), "memory pids\n");
        cr_assert_str_eq(get(at("cg2/tests/cgroup.subtree_control")), "+memory");
        cr_assert_str_eq(get(at("cg2/tests/inner/cgroup.subtree_control")), "+memory +pids");
        cgroup_root_done(&root);

        memset(&err, 0, sizeof(err));
        r = cgroup_probe(at("proc"), "tests/../../escape", &root, &err);
        cr_assert_eq(r, -EINVAL);
        cr_assert(strstr(err.msg, "..") != NULL, "error: %s", err.msg);
}

/* A fake of what systemd leaves for a Delegate=yes service on cgroup v2: the service's cgroup,
 * its controllers handed down by the parent, the daemon's pid in cgroup.procs, nothing enabled
 * for children yet. The leaf's cgroup.procs is pre-made (the kernel makes it on mkdir). */
static void fake_delegated(const char *dir, const char *controllers, const char *procs)
{
        put(at("%s/cgroup.controllers", dir), controllers);
        put(at("%s/cgroup.subtree_control", dir), "");
        put(at("%s/cgroup.procs", dir), procs);
        put(at("%s/daemon/cgroup.procs", dir), "");
}

/* Marks tmp/<dir> delegated as systemd does, or skips the test naming why it cannot. */
static void mark_delegated(const char *dir)
{
        if (setxattr(at("%s", dir), "trusted.delegate", "1", 1, 0) == 0 ||
            setxattr(at("%s", dir), "user.delegate", "1", 1, 0) == 0)
                return;
        cr_skip_test("cannot set the trusted.delegate or user.delegate xattr on '%s': %s",
                     at("%s", dir), strerror(errno));
}

TestSuite(delegate, .init = tmp_setup, .fini = tmp_teardown);

Test(delegate, moves_the_processes_into_the_leaf_and_enables_controllers)
{
        struct airlock_error err = { "" };
        int r;

        fake_delegated("svc", "cpuset cpu io memory pids\n", "4242\n");
        r = cgroup_v2_delegate(at("svc"), CGROUP_V2_DAEMON_LEAF, &err);
        cr_assert_eq(r, 0, "delegate: %d %s", r, err.msg);
        cr_assert_str_eq(get(at("svc/daemon/cgroup.procs")), "4242");
        cr_assert_str_eq(get(at("svc/cgroup.subtree_control")), "+memory +pids +cpu");
}

Test(delegate, without_cpu_offered_enables_memory_and_pids)
{
        struct airlock_error err = { "" };

        fake_delegated("svc", "memory pids\n", "17\n");
        cr_assert_eq(cgroup_v2_delegate(at("svc"), "daemon", &err), 0, "%s", err.msg);
        cr_assert_str_eq(get(at("svc/cgroup.subtree_control")), "+memory +pids");
}

Test(delegate, refuses_without_memory_or_pids_and_touches_nothing)
{
        struct airlock_error err = { "" };
        int r;

        fake_delegated("svc", "cpu io pids\n", "4242\n");
        r = cgroup_v2_delegate(at("svc"), "daemon", &err);
        cr_assert_eq(r, -EOPNOTSUPP);
        cr_assert(strstr(err.msg, "lacks memory or pids") != NULL, "error: %s", err.msg);
        cr_assert_str_eq(get(at("svc/daemon/cgroup.procs")), "");
        cr_assert_str_eq(get(at("svc/cgroup.subtree_control")), "");
}

Test(delegate, a_process_that_cannot_move_is_an_error_before_any_controller)
{
        struct airlock_error err = { "" };
        int r;

        fake_delegated("svc", "memory pids\n", "4242\n");
        cr_assert_eq(remove(at("svc/daemon/cgroup.procs")), 0);
        r = cgroup_v2_delegate(at("svc"), "daemon", &err);
        cr_assert_eq(r, -ENOENT);
        cr_assert(strstr(err.msg, "cannot move process 4242") != NULL, "error: %s", err.msg);
        /* Enabling controllers while the process still lives in svc would fail (EBUSY). */
        cr_assert_str_eq(get(at("svc/cgroup.subtree_control")), "");
}

Test(delegate, refuses_a_leaf_that_is_not_one_component)
{
        struct airlock_error err = { "" };

        fake_delegated("svc", "memory pids\n", "4242\n");
        cr_assert_eq(cgroup_v2_delegate(at("svc"), "../escape", &err), -EINVAL);
        cr_assert_not(exists(at("escape")));
}

Test(delegate, only_the_value_1_marks_a_cgroup_delegated)
{
        mkdir_p(at("svc"));
        cr_assert_not(cgroup_v2_is_delegated(at("svc")));
        if (setxattr(at("svc"), "user.delegate", "0", 1, 0) < 0)
                cr_skip_test("cannot set user.delegate on '%s': %s", at("svc"), strerror(errno));
        cr_assert_not(cgroup_v2_is_delegated(at("svc")));
        cr_assert_eq(setxattr(at("svc"), "user.delegate", "1", 1, 0), 0);
        cr_assert(cgroup_v2_is_delegated(at("svc")));
}

Test(probe, v2_takes_over_a_cgroup_systemd_delegated)
{
        _cleanup_free_ char *mi = v2_mountinfo("cg2");
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };
        int r;

        fake_proc(mi, "0::/system.slice/airlock.service\n");
        put(at("cg2/cgroup.controllers"), "cpu memory pids\n");
        put(at("cg2/cgroup.subtree_control"), "cpu memory pids\n");
        fake_delegated("cg2/system.slice/airlock.service", "cpu memory pids\n", "4242\n");
        mark_delegated("cg2/system.slice/airlock.service");

        r = cgroup_probe(at("proc"), NULL, &root, &err);
        cr_assert_eq(r, 0, "probe: %d %s", r, err.msg);
        cr_assert_eq(root.version, CGROUP_V2);
        cr_assert_str_eq(root.v2_parent, at("cg2/system.slice/airlock.service"));
        cr_assert_not(exists(at("cg2/airlock")), "fell back although the cgroup is delegated");
        cr_assert_str_eq(get(at("cg2/system.slice/airlock.service/daemon/cgroup.procs")), "4242");
        cr_assert_str_eq(get(at("cg2/system.slice/airlock.service/cgroup.subtree_control")),
                         "+memory +pids +cpu");
        cgroup_root_done(&root);
}

Test(probe, v2_falls_back_when_the_delegated_cgroup_lacks_controllers)
{
        _cleanup_free_ char *mi = v2_mountinfo("cg2");
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };
        int r;

        fake_proc(mi, "0::/system.slice/airlock.service\n");
        put(at("cg2/cgroup.controllers"), "cpu memory pids\n");
        put(at("cg2/cgroup.subtree_control"), "cpu memory pids\n");
        put(at("cg2/airlock/cgroup.subtree_control"), "");
        fake_delegated("cg2/system.slice/airlock.service", "cpu\n", "4242\n");
        mark_delegated("cg2/system.slice/airlock.service");

        r = cgroup_probe(at("proc"), NULL, &root, &err);
        cr_assert_eq(r, 0, "probe: %d %s", r, err.msg);
        cr_assert_str_eq(root.v2_parent, at("cg2/airlock"));
        cr_assert_str_eq(get(at("cg2/system.slice/airlock.service/daemon/cgroup.procs")), "");
        cgroup_root_done(&root);
}

Test(probe, hybrid_v1_like_ci_host)
{
        _cleanup_free_ char *mi = hybrid_mountinfo(false);
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };
        int r;

        fake_proc(mi, hybrid_cgroup);
        put(at("unified/cgroup.controllers"), "");
        mkdir_p(at("v1/memory/process_api/abc"));

        r = cgroup_probe(at("proc"), NULL, &root, &err);
        cr_assert_eq(r, 0, "probe: %d %s", r, err.msg);
        cr_assert_eq(root.version, CGROUP_V1);
        cr_assert_null(root.v2_parent);
        /* Inside the caller's own memory cgroup, so an outer cap on the caller still holds. */
        cr_assert_str_eq(root.v1_parent[CG1_MEMORY], at("v1/memory/process_api/abc"));
        cr_assert_str_eq(root.v1_parent[CG1_PIDS], at("v1/pids"));
        cr_assert_str_eq(root.v1_parent[CG1_CPU], at("v1/cpu"));
        cr_assert_str_eq(root.v1_parent[CG1_CPUACCT], at("v1/cpuacct"));
        cr_assert_str_eq(root.v1_parent[CG1_FREEZER], at("v1/freezer"));
        cgroup_root_done(&root);
}

Test(probe, v1_comounted_cpu_and_subtree_mount)
{
        _cleanup_free_ char *mi = NULL;
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };
        int r;

        /* A container view: the memory hierarchy is mounted from /docker/c1, so the caller's
         * path /docker/c1/app lives at <mount>/app; no freezer at all. */
        mi = fmt("32 31 0:29 / %1$s/v1/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
                 "35 31 0:32 /docker/c1 %1$s/v1/memory rw,relatime - cgroup cgroup rw,memory\n"
                 "39 31 0:36 / %1$s/v1/pids rw,relatime shared:9 - cgroup cgroup rw,pids\n",
                 tmp);
        fake_proc(mi, "5:pids:/\n4:memory:/docker/c1/app\n1:cpu,cpuacct:/x\n");

        r = cgroup_probe(at("proc"), NULL, &root, &err);
        cr_assert_eq(r, 0, "probe: %d %s", r, err.msg);
        cr_assert_eq(root.version, CGROUP_V1);
        cr_assert_str_eq(root.v1_parent[CG1_MEMORY], at("v1/memory/app"));
        cr_assert_str_eq(root.v1_parent[CG1_PIDS], at("v1/pids"));
        cr_assert_str_eq(root.v1_parent[CG1_CPU], at("v1/cpu,cpuacct/x"));
        cr_assert_str_eq(root.v1_parent[CG1_CPUACCT], at("v1/cpu,cpuacct/x"));
        cr_assert_null(root.v1_parent[CG1_FREEZER]);
        cgroup_root_done(&root);
}

Test(probe, v1_parent_override_creates_parents)
{
        _cleanup_free_ char *mi = hybrid_mountinfo(true);
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };
        int r;

        fake_proc(mi, hybrid_cgroup);
        put(at("unified/cgroup.controllers"), "");
        mkdir_p(at("v1/memory"));
        mkdir_p(at("v1/pids"));
        mkdir_p(at("v1/cpu"));
        mkdir_p(at("v1/freezer"));

        r = cgroup_probe(at("proc"), "airlock/tests", &root, &err);
        cr_assert_eq(r, 0, "probe: %d %s", r, err.msg);
        cr_assert_eq(root.version, CGROUP_V1);
        cr_assert_str_eq(root.v1_parent[CG1_MEMORY], at("v1/memory/airlock/tests"));
        cr_assert_str_eq(root.v1_parent[CG1_CPU], at("v1/cpu/airlock/tests"));
        cr_assert_str_eq(root.v1_parent[CG1_CPUACCT], at("v1/cpu/airlock/tests"));
        for (size_t i = 0; i < CG1_COUNT; i++) {
                struct stat st;

                cr_assert_eq(stat(root.v1_parent[i], &st), 0, "%s missing", root.v1_parent[i]);
                cr_assert(S_ISDIR(st.st_mode));
        }
        cgroup_root_done(&root);
}

Test(probe, no_controllers_is_none_with_reason)
{
        _cleanup_free_ char *mi = v2_mountinfo("cg2");
        struct cgroup_root root = { .version = CGROUP_V2 };
        struct airlock_error err = { "" };
        int r;

        fake_proc(mi, "0::/\n");
        put(at("cg2/cgroup.controllers"), "cpu io\n");

        r = cgroup_probe(at("proc"), NULL, &root, &err);
        cr_assert_eq(r, 0, "probe: %d %s", r, err.msg);
        cr_assert_eq(root.version, CGROUP_NONE);
        cr_assert_null(root.v2_parent);
        cr_assert(strstr(err.msg, "no usable cgroup controllers") != NULL, "error: %s", err.msg);
        cr_assert(strstr(err.msg, at("cg2")) != NULL, "error: %s", err.msg);
        cr_assert_not(exists(at("cg2/airlock")));
        cgroup_root_done(&root);
}

Test(probe, v1_without_pids_is_none)
{
        _cleanup_free_ char *mi = NULL;
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };

        mi = fmt("35 31 0:32 / %s/v1/memory rw,relatime - cgroup cgroup rw,memory\n", tmp);
        fake_proc(mi, "4:memory:/\n");
        cr_assert_eq(cgroup_probe(at("proc"), NULL, &root, &err), 0, "%s", err.msg);
        cr_assert_eq(root.version, CGROUP_NONE);
        cr_assert(strstr(err.msg, "no pids") != NULL, "error: %s", err.msg);
        cr_assert(strstr(err.msg, "no cgroup2 mount") != NULL, "error: %s", err.msg);
}

Test(probe, malformed_mountinfo_is_an_error)
{
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };
        int r;

        fake_proc("22 1 0:21 / /proc rw - proc proc rw\n"
                  "31 23 0:28 / /sys/fs/cgroup rw,relatime tmpfs tmpfs rw,mode=755\n",
                  "0::/\n");
        r = cgroup_probe(at("proc"), NULL, &root, &err);
        cr_assert_eq(r, -EBADMSG, "r=%d", r);
        cr_assert(strstr(err.msg, "malformed line 2") != NULL, "error: %s", err.msg);
        cr_assert(strstr(err.msg, "mountinfo") != NULL, "error: %s", err.msg);
        cr_assert_eq(root.version, CGROUP_NONE);
        cr_assert_null(root.v2_parent);

        /* A truncated last line, and a line of nothing but the separator. */
        fake_proc("22 1 0:21 / /proc", "0::/\n");
        cr_assert_eq(cgroup_probe(at("proc"), NULL, &root, &err), -EBADMSG);
        fake_proc("- - - - - - - - - -\n", "0::/\n");
        cr_assert_eq(cgroup_probe(at("proc"), NULL, &root, &err), -EBADMSG);
}

Test(probe, malformed_self_cgroup_is_an_error)
{
        _cleanup_free_ char *mi = v2_mountinfo("cg2");
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };

        fake_proc(mi, "0::/\nmemory-without-colons\n");
        cr_assert_eq(cgroup_probe(at("proc"), NULL, &root, &err), -EBADMSG);
        cr_assert(strstr(err.msg, "malformed line 2") != NULL, "error: %s", err.msg);
}

Test(probe, missing_proc_files_are_an_error)
{
        struct cgroup_root root = { 0 };
        struct airlock_error err = { "" };

        cr_assert_eq(cgroup_probe(at("nonexistent"), NULL, &root, &err), -ENOENT);
        cr_assert(strstr(err.msg, "nonexistent/self/mountinfo") != NULL, "error: %s", err.msg);
}

TestSuite(limits, .init = tmp_setup, .fini = tmp_teardown);

static void fake_v2_dir(bool with_swap, bool with_cpu)
{
        put(at("g/memory.max"), "");
        if (with_swap)
                put(at("g/memory.swap.max"), "");
        put(at("g/memory.oom.group"), "");
        put(at("g/pids.max"), "");
        if (with_cpu)
                put(at("g/cpu.max"), "");
}

Test(limits, v2_writes_every_limit)
{
        struct cgroup_limits lim = { .memory_max = 256ULL << 20,
                                     .pids_max = 64,
                                     .cpu_millicpus = 500 };
        struct airlock_error err = { "" };
        int fds[CG1_COUNT] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };
        int r;

        fake_v2_dir(true, true);
        fds[0] = open_dir(at("g"));
        r = cgroup_apply_limits(CGROUP_V2, fds, &lim, &err);
        cr_assert_eq(r, 0, "apply: %d %s", r, err.msg);
        cr_assert_str_eq(get(at("g/memory.max")), "268435456");
        cr_assert_str_eq(get(at("g/memory.swap.max")), "0");
        cr_assert_str_eq(get(at("g/memory.oom.group")), "1");
        cr_assert_str_eq(get(at("g/pids.max")), "64");
        cr_assert_str_eq(get(at("g/cpu.max")), "50000 100000");
        close_dirs(fds);
}

Test(limits, v2_zero_means_max_and_quota_has_a_floor)
{
        struct cgroup_limits lim = { 0 };
        struct airlock_error err = { "" };
        int fds[CG1_COUNT] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };

        fake_v2_dir(true, true);
        fds[0] = open_dir(at("g"));
        cr_assert_eq(cgroup_apply_limits(CGROUP_V2, fds, &lim, &err), 0, "%s", err.msg);
        cr_assert_str_eq(get(at("g/memory.max")), "max");
        cr_assert_str_eq(get(at("g/pids.max")), "max");
        cr_assert_str_eq(get(at("g/cpu.max")), "max 100000");
        cr_assert_str_eq(get(at("g/memory.swap.max")), "0");

        /* Five thousandths of a CPU would be a 500 us quota, below the kernel's 1 ms minimum;
         * 2.5 CPUs is a quota larger than the period. */
        put(at("g/cpu.max"), "");
        lim.cpu_millicpus = 5;
        cr_assert_eq(cgroup_apply_limits(CGROUP_V2, fds, &lim, &err), 0, "%s", err.msg);
        cr_assert_str_eq(get(at("g/cpu.max")), "1000 100000");
        put(at("g/cpu.max"), "");
        lim.cpu_millicpus = 2500;
        cr_assert_eq(cgroup_apply_limits(CGROUP_V2, fds, &lim, &err), 0, "%s", err.msg);
        cr_assert_str_eq(get(at("g/cpu.max")), "250000 100000");
        close_dirs(fds);
}

Test(limits, v2_tolerates_missing_swap_but_not_missing_cpu)
{
        struct cgroup_limits lim = { .memory_max = 1000000, .pids_max = 8 };
        struct airlock_error err = { "" };
        int fds[CG1_COUNT] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };
        int r;

        fake_v2_dir(false, false);
        fds[0] = open_dir(at("g"));
        r = cgroup_apply_limits(CGROUP_V2, fds, &lim, &err);
        cr_assert_eq(r, 0, "apply: %d %s", r, err.msg);
        cr_assert_str_eq(get(at("g/memory.max")), "1000000");
        cr_assert_not(exists(at("g/memory.swap.max")), "control file created");
        cr_assert_not(exists(at("g/cpu.max")), "control file created");

        lim.cpu_millicpus = 1000;
        r = cgroup_apply_limits(CGROUP_V2, fds, &lim, &err);
        cr_assert_eq(r, -EOPNOTSUPP, "r=%d", r);
        cr_assert(strstr(err.msg, "cpu") != NULL, "error: %s", err.msg);

        /* A missing memory.max means this is no memory cgroup at all. */
        cr_assert_eq(unlink(at("g/memory.max")), 0);
        r = cgroup_apply_limits(CGROUP_V2, fds, &lim, &err);
        cr_assert_eq(r, -ENOENT, "r=%d", r);
        cr_assert(strstr(err.msg, "memory.max") != NULL, "error: %s", err.msg);
        close_dirs(fds);

        fds[0] = -EBADF;
        cr_assert_eq(cgroup_apply_limits(CGROUP_V2, fds, &lim, &err), -EBADF);
}

static void fake_v1_dirs(bool with_memsw)
{
        put(at("memory/g/memory.limit_in_bytes"), "");
        if (with_memsw)
                put(at("memory/g/memory.memsw.limit_in_bytes"), "");
        put(at("pids/g/pids.max"), "");
        put(at("cpu/g/cpu.cfs_period_us"), "");
        put(at("cpu/g/cpu.cfs_quota_us"), "");
        mkdir_p(at("cpuacct/g"));
        put(at("freezer/g/freezer.state"), "THAWED\n");
}

static void open_v1_dirs(int fds[CG1_COUNT])
{
        static const char *const names[CG1_COUNT] = { "memory", "pids", "cpu", "cpuacct",
                                                      "freezer" };

        for (size_t i = 0; i < CG1_COUNT; i++)
                fds[i] = open_dir(at("%s/g", names[i]));
}

Test(limits, v1_writes_every_limit)
{
        struct cgroup_limits lim = { .memory_max = 128ULL << 20,
                                     .pids_max = 32,
                                     .cpu_millicpus = 1500 };
        struct airlock_error err = { "" };
        int fds[CG1_COUNT];
        int r;

        fake_v1_dirs(true);
        open_v1_dirs(fds);
        r = cgroup_apply_limits(CGROUP_V1, fds, &lim, &err);
        cr_assert_eq(r, 0, "apply: %d %s", r, err.msg);
        cr_assert_str_eq(get(at("memory/g/memory.limit_in_bytes")), "134217728");
        /* Memory plus swap equal to memory alone: no swap. */
        cr_assert_str_eq(get(at("memory/g/memory.memsw.limit_in_bytes")), "134217728");
        cr_assert_str_eq(get(at("pids/g/pids.max")), "32");
        cr_assert_str_eq(get(at("cpu/g/cpu.cfs_period_us")), "100000");
        cr_assert_str_eq(get(at("cpu/g/cpu.cfs_quota_us")), "150000");
        close_dirs(fds);
}

Test(limits, v1_without_memsw_or_limits)
{
        struct cgroup_limits lim = { 0 };
        struct airlock_error err = { "" };
        int fds[CG1_COUNT];
        int r;

        fake_v1_dirs(false);
        open_v1_dirs(fds);
        r = cgroup_apply_limits(CGROUP_V1, fds, &lim, &err);
        cr_assert_eq(r, 0, "apply: %d %s", r, err.msg);
        cr_assert_str_eq(get(at("memory/g/memory.limit_in_bytes")), "-1");
        cr_assert_not(exists(at("memory/g/memory.memsw.limit_in_bytes")), "control file created");
        cr_assert_str_eq(get(at("pids/g/pids.max")), "max");
        cr_assert_str_eq(get(at("cpu/g/cpu.cfs_quota_us")), "-1");

        lim.memory_max = 4096;
        r = cgroup_apply_limits(CGROUP_V1, fds, &lim, &err);
        cr_assert_eq(r, 0, "apply: %d %s", r, err.msg);
        /* The file is not truncated by the write; "4096" overwrites the start of "-1". */
        cr_assert_str_eq(get(at("memory/g/memory.limit_in_bytes")), "4096");
        close_dirs(fds);
}

Test(limits, v1_missing_controllers)
{
        struct cgroup_limits lim = { .cpu_millicpus = 250 };
        struct airlock_error err = { "" };
        int fds[CG1_COUNT];
        int r;

        fake_v1_dirs(true);
        open_v1_dirs(fds);
        (void) close(fds[CG1_CPU]);
        fds[CG1_CPU] = -EBADF;
        r = cgroup_apply_limits(CGROUP_V1, fds, &lim, &err);
        cr_assert_eq(r, -EOPNOTSUPP, "r=%d", r);
        cr_assert(strstr(err.msg, "cpu") != NULL, "error: %s", err.msg);

        /* Without a cpu limit, a missing cpu hierarchy is fine. */
        lim.cpu_millicpus = 0;
        cr_assert_eq(cgroup_apply_limits(CGROUP_V1, fds, &lim, &err), 0, "%s", err.msg);

        (void) close(fds[CG1_PIDS]);
        fds[CG1_PIDS] = -EBADF;
        cr_assert_eq(cgroup_apply_limits(CGROUP_V1, fds, &lim, &err), -EBADF);
        cr_assert(strstr(err.msg, "pids") != NULL, "error: %s", err.msg);
        close_dirs(fds);

        for (size_t i = 0; i < CG1_COUNT; i++)
                fds[i] = -EBADF;
        cr_assert_eq(cgroup_apply_limits(CGROUP_NONE, fds, &lim, &err), -EOPNOTSUPP);
}

TestSuite(usage, .init = tmp_setup, .fini = tmp_teardown);

Test(usage, v2_every_field)
{
        struct cgroup_usage u;
        int fds[CG1_COUNT] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };
        int r;

        put(at("g/memory.current"), "1234\n");
        put(at("g/memory.peak"), "567890\n");
        put(at("g/cpu.stat"), "usage_usec 4242\nuser_usec 4000\nsystem_usec 242\n"
                              "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n");
        put(at("g/memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 1\n");
        fds[0] = open_dir(at("g"));

        memset(&u, 0xff, sizeof(u));
        r = cgroup_read_usage_at(CGROUP_V2, fds, &u);
        cr_assert_eq(r, 0, "r=%d", r);
        cr_assert_eq(u.memory_current, 1234);
        cr_assert_eq(u.memory_peak, 567890);
        cr_assert(u.has_peak);
        cr_assert_eq(u.cpu_usec, 4242);
        cr_assert(u.has_cpu);
        /* "oom_kill", not "oom" nor "oom_group_kill". */
        cr_assert_eq(u.oom_kills, 2);
        close_dirs(fds);
}

Test(usage, v2_optional_files_missing)
{
        struct cgroup_usage u;
        int fds[CG1_COUNT] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };

        /* An old kernel: no memory.peak (before 5.19), and a cpu.stat without usage_usec. */
        put(at("g/memory.current"), "77\n");
        put(at("g/cpu.stat"), "nr_periods 0\n");
        fds[0] = open_dir(at("g"));
        memset(&u, 0xff, sizeof(u));
        cr_assert_eq(cgroup_read_usage_at(CGROUP_V2, fds, &u), 0);
        cr_assert_eq(u.memory_current, 77);
        cr_assert_eq(u.memory_peak, 0);
        cr_assert_not(u.has_peak);
        cr_assert_eq(u.cpu_usec, 0);
        cr_assert_not(u.has_cpu);
        cr_assert_eq(u.oom_kills, 0);
        close_dirs(fds);
}

Test(usage, v2_garbage_is_an_error)
{
        struct cgroup_usage u = { .memory_current = 99 };
        int fds[CG1_COUNT] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };

        put(at("g/memory.current"), "12abc\n");
        fds[0] = open_dir(at("g"));
        cr_assert_eq(cgroup_read_usage_at(CGROUP_V2, fds, &u), -EBADMSG);
        /* Output parameters are written only on success. */
        cr_assert_eq(u.memory_current, 99);

        put(at("g/memory.current"), "12\n");
        put(at("g/memory.events"), "oom_kill -3\n");
        cr_assert_eq(cgroup_read_usage_at(CGROUP_V2, fds, &u), -EBADMSG);

        (void) unlink(at("g/memory.events"));
        (void) unlink(at("g/memory.current"));
        cr_assert_eq(cgroup_read_usage_at(CGROUP_V2, fds, &u), -ENOENT);
        close_dirs(fds);
}

Test(usage, v1_every_field)
{
        struct cgroup_usage u;
        int fds[CG1_COUNT];

        put(at("memory/g/memory.usage_in_bytes"), "4096\n");
        put(at("memory/g/memory.max_usage_in_bytes"), "8192\n");
        put(at("memory/g/memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
        put(at("cpuacct/g/cpuacct.usage"), "5000123\n");
        mkdir_p(at("pids/g"));
        mkdir_p(at("cpu/g"));
        mkdir_p(at("freezer/g"));
        open_v1_dirs(fds);

        memset(&u, 0xff, sizeof(u));
        cr_assert_eq(cgroup_read_usage_at(CGROUP_V1, fds, &u), 0);
        cr_assert_eq(u.memory_current, 4096);
        cr_assert_eq(u.memory_peak, 8192);
        cr_assert(u.has_peak);
        /* cpuacct.usage counts nanoseconds. */
        cr_assert_eq(u.cpu_usec, 5000);
        cr_assert(u.has_cpu);
        cr_assert_eq(u.oom_kills, 3);
        close_dirs(fds);
}

Test(usage, v1_old_kernel_without_cpuacct)
{
        struct cgroup_usage u;
        int fds[CG1_COUNT] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };

        /* Before 4.13 memory.oom_control had no oom_kill field; a non-zero failcnt only says
         * that the limit was hit, not that anything was killed. */
        put(at("memory/g/memory.usage_in_bytes"), "100\n");
        put(at("memory/g/memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\n");
        put(at("memory/g/memory.failcnt"), "7\n");
        fds[CG1_MEMORY] = open_dir(at("memory/g"));

        memset(&u, 0xff, sizeof(u));
        cr_assert_eq(cgroup_read_usage_at(CGROUP_V1, fds, &u), 0);
        cr_assert_eq(u.memory_current, 100);
        cr_assert_not(u.has_peak);
        cr_assert_eq(u.memory_peak, 0);
        cr_assert_not(u.has_cpu);
        cr_assert_eq(u.cpu_usec, 0);
        cr_assert_eq(u.oom_kills, 0);
        close_dirs(fds);

        fds[CG1_MEMORY] = -EBADF;
        cr_assert_eq(cgroup_read_usage_at(CGROUP_V1, fds, &u), -EBADF);
}

TestSuite(create, .init = tmp_setup, .fini = tmp_teardown);

static size_t count_entries(const char *path)
{
        DIR *d = opendir(path);
        struct dirent *e;
        size_t n = 0;

        cr_assert_not_null(d, "opendir %s: %s", path, strerror(errno));
        while ((e = readdir(d)))
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                        n++;
        (void) closedir(d);
        return n;
}

Test(create, bad_names_are_rejected)
{
        static const char *const bad[] = {
                "",     ".",  "..",          "a/b",        "../x",  "a b",     "ok\n", "tab\tname",
                "/abs", "x/", "caf\xc3\xa9", "semi;colon", "star*", "dollar$", "a\\b", "nul?",
        };
        struct cgroup_root root = { .version = CGROUP_V2 };
        struct cgroup_limits lim = { 0 };
        struct airlock_error err = { "" };
        struct cgroup *cg = NULL;
        char name[80];
        int r;

        mkdir_p(at("parent"));
        root.v2_parent = strdup(at("parent"));
        cr_assert_not_null(root.v2_parent);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                r = cgroup_create(&root, bad[i], &lim, &cg, &err);
                cr_assert_eq(r, -EINVAL, "name '%s' gave %d", bad[i], r);
                cr_assert_null(cg);
        }
        cr_assert_eq(cgroup_create(&root, NULL, &lim, &cg, &err), -EINVAL);

        /* 65 characters are too many. */
        memset(name, 'a', 65);
        name[65] = '\0';
        cr_assert_eq(cgroup_create(&root, name, &lim, &cg, &err), -EINVAL);
        cr_assert(strstr(err.msg, "name") != NULL, "error: %s", err.msg);
        cr_assert_eq(count_entries(at("parent")), 0, "something was created");

        /* 64 characters pass the check and reach mkdir; the fake directory has no control
         * files, so applying limits fails and the directory is removed again. */
        name[64] = '\0';
        r = cgroup_create(&root, name, &lim, &cg, &err);
        cr_assert_eq(r, -ENOENT, "r=%d %s", r, err.msg);
        cr_assert_null(cg);
        cr_assert(strstr(err.msg, "memory.max") != NULL, "error: %s", err.msg);
        cr_assert_eq(count_entries(at("parent")), 0, "failed create left a directory");

        r = cgroup_create(&root, "Ok_name-1.2", &lim, &cg, &err);
        cr_assert_eq(r, -ENOENT, "r=%d %s", r, err.msg);
        cgroup_root_done(&root);
}

Test(create, v1_failure_removes_what_it_made)
{
        struct cgroup_root root = { .version = CGROUP_V1 };
        struct cgroup_limits lim = { .memory_max = 1 << 20 };
        struct airlock_error err = { "" };
        struct cgroup *cg = NULL;
        int r;

        mkdir_p(at("memory"));
        mkdir_p(at("pids"));
        mkdir_p(at("cpu,cpuacct"));
        root.v1_parent[CG1_MEMORY] = strdup(at("memory"));
        root.v1_parent[CG1_PIDS] = strdup(at("pids"));
        root.v1_parent[CG1_CPU] = strdup(at("cpu,cpuacct"));
        root.v1_parent[CG1_CPUACCT] = strdup(at("cpu,cpuacct"));

        /* mkdir succeeds everywhere (the co-mounted cpu,cpuacct only once), then the missing
         * memory.limit_in_bytes fails the create, which must remove all three directories. */
        r = cgroup_create(&root, "s1", &lim, &cg, &err);
        cr_assert_eq(r, -ENOENT, "r=%d %s", r, err.msg);
        cr_assert_null(cg);
        cr_assert_not(exists(at("memory/s1")));
        cr_assert_not(exists(at("pids/s1")));
        cr_assert_not(exists(at("cpu,cpuacct/s1")));

        /* An existing cgroup of that name is -EEXIST and stays; nothing else is left behind. */
        mkdir_p(at("pids/s2"));
        r = cgroup_create(&root, "s2", &lim, &cg, &err);
        cr_assert_eq(r, -EEXIST, "r=%d %s", r, err.msg);
        cr_assert(exists(at("pids/s2")));
        cr_assert_not(exists(at("memory/s2")));
        cr_assert_not(exists(at("cpu,cpuacct/s2")));
        cgroup_root_done(&root);

        root.version = CGROUP_NONE;
        cr_assert_eq(cgroup_create(&root, "s3", &lim, &cg, &err), -EOPNOTSUPP);
}

Test(create, version_names)
{
        cr_assert_str_eq(cgroup_version_name(CGROUP_V2), "v2");
        cr_assert_str_eq(cgroup_version_name(CGROUP_V1), "v1");
        cr_assert_str_eq(cgroup_version_name(CGROUP_NONE), "none");
        cr_assert_null(cgroup_free(NULL));
        cr_assert_eq(cgroup_destroy(NULL), 0);
}

/* Real-kernel tests. */

/* Probes this host, or skips the test visibly when it cannot manage cgroups. */
static void real_probe(void)
{
        struct airlock_error err = { "" };
        int r;

        if (geteuid() != 0)
                cr_skip_test("cgroup tests need root (euid %d)", (int) geteuid());
        r = cgroup_probe("/proc", getenv("AIRLOCK_CGROUP_PARENT"), &real.root, &err);
        cr_assert_eq(r, 0, "probe of this host failed: %d %s", r, err.msg);
        real.have_root = true;
        if (real.root.version == CGROUP_NONE)
                cr_skip_test("no usable cgroup controllers: %s", err.msg);
}

/* The directory of the sandbox cgroup for one hierarchy, or NULL. */
static char *real_dir(size_t i, const char *name)
{
        const char *parent = real.root.version == CGROUP_V2 ? (i == 0 ? real.root.v2_parent : NULL)
                                                            : real.root.v1_parent[i];

        return parent ? fmt("%s/%s", parent, name) : NULL;
}

/* Kills whatever is left in the test's cgroup by reading cgroup.procs directly, so that cleanup
 * does not depend on the code under test working, then removes the directories. */
/* Waits up to 5 s for pid to end, so that a broken kill fails the test instead of hanging it
 * (a test killed by Criterion's timeout gets no fini, and so no cleanup). Returns the pid or -1. */
static pid_t wait_bounded(pid_t pid, int *ret_status)
{
        for (int i = 0; i < 500; i++) {
                pid_t r = waitpid(pid, ret_status, WNOHANG);

                if (r != 0)
                        return r;
                (void) usleep(10000);
        }
        return -1;
}

/* A v1 freezer left at FROZEN by a failed test would keep every SIGKILL pending forever. */
static void real_thaw(void)
{
        _cleanup_free_ char *dir = NULL;
        _cleanup_free_ char *state = NULL;
        FILE *f;

        if (!real.have_root || !real.name[0] || real.root.version != CGROUP_V1)
                return;
        dir = real_dir(CG1_FREEZER, real.name);
        if (!dir)
                return;
        state = fmt("%s/freezer.state", dir);
        f = fopen(state, "we");
        if (!f)
                return;
        (void) fputs("THAWED", f);
        (void) fclose(f);
}

static void real_teardown(void)
{
        real_thaw();
        if (real.child > 0) {
                (void) kill(real.child, SIGKILL);
                (void) wait_bounded(real.child, NULL);
                real.child = 0;
        }
        if (real.cg) {
                (void) cgroup_kill_all(real.cg);
                (void) cgroup_destroy(real.cg);
                real.cg = cgroup_free(real.cg);
        }
        for (int round = 0; real.have_root && real.name[0] && round < 100; round++) {
                bool left = false;

                for (size_t i = 0; i < CG1_COUNT; i++) {
                        _cleanup_free_ char *dir = real_dir(i, real.name);
                        _cleanup_free_ char *procs = NULL;
                        FILE *f;
                        int pid;

                        if (!dir || !exists(dir))
                                continue;
                        left = true;
                        real_thaw();
                        procs = fmt("%s/cgroup.procs", dir);
                        f = fopen(procs, "re");
                        while (f && fscanf(f, "%d", &pid) == 1)
                                if (pid > 1 && pid != getpid())
                                        (void) kill(pid, SIGKILL);
                        if (f)
                                (void) fclose(f);
                        (void) rmdir(dir);
                }
                if (!left)
                        break;
                (void) usleep(20000);
        }
        real.name[0] = '\0';
        if (real.have_root)
                cgroup_root_done(&real.root);
        real.have_root = false;
}

/* Names the test's cgroup uniquely and remembers it for real_teardown(). */
static const char *real_name(const char *what)
{
        (void) snprintf(real.name, sizeof(real.name), "airlock-test-%s-%d", what, (int) getpid());
        return real.name;
}

static void real_assert_gone(const char *name)
{
        for (size_t i = 0; i < CG1_COUNT; i++) {
                _cleanup_free_ char *dir = real_dir(i, name);

                if (dir)
                        cr_assert_not(exists(dir), "%s still exists", dir);
        }
}

/* Forks a child that waits for a byte on *go, runs work(), reports its int result on *done and
 * then sleeps. It dies with us (PR_SET_PDEATHSIG) and after 30 s at the latest. */
static pid_t fork_child(int (*work)(void), int *ret_go, int *ret_done)
{
        int go[2];
        int done[2];
        pid_t pid;

        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(done, O_CLOEXEC), 0);
        pid = fork();
        cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                char c;
                int result;

                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                (void) alarm(30);
                if (read(go[0], &c, 1) != 1)
                        _exit(1);
                result = work();
                if (write(done[1], &result, sizeof(result)) != sizeof(result))
                        _exit(1);
                for (;;)
                        (void) pause();
        }
        (void) close(go[0]);
        (void) close(done[1]);
        *ret_go = go[1];
        *ret_done = done[0];
        return pid;
}

static int child_touch_memory(void)
{
        size_t len = 8 << 20;
        volatile char *p = malloc(len);
        volatile uint64_t spin = 0;

        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < len; i += 4096)
                p[i] = 1;
        /* Burn a little CPU so that the cgroup's CPU counter moves for sure. */
        for (uint64_t i = 0; i < 20000000; i++)
                spin += i;
        return 0;
}

static int child_exceed_memory(void)
{
        size_t len = 256 << 20;
        volatile char *p = malloc(len);

        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < len; i += 4096)
                p[i] = 1;
        return 1; /* not killed: the limit did not hold */
}

static int child_fork_many(void)
{
        int made = 0;

        for (int i = 0; i < 16; i++) {
                pid_t pid = fork();

                if (pid < 0)
                        break;
                if (pid == 0) {
                        /* A backstop should the test fail to kill us. */
                        (void) alarm(30);
                        for (;;)
                                (void) pause();
                }
                made++;
        }
        return made;
}

static void run_child(int go, int done, int *ret_result)
{
        ssize_t n;

        cr_assert_eq(write(go, "g", 1), 1);
        n = read(done, ret_result, sizeof(*ret_result));
        cr_assert_eq(n, (ssize_t) sizeof(*ret_result), "child died before reporting (n=%zd)", n);
}

/* Checks /proc/<pid>/cgroup: every hierarchy we use shows the sandbox cgroup. */
static void assert_in_cgroup(pid_t pid, const char *name)
{
        _cleanup_free_ char *path = fmt("/proc/%d/cgroup", (int) pid);
        _cleanup_free_ char *suffix = fmt("/%s", name);
        _cleanup_free_ char *content = NULL;
        size_t matched = 0;
        size_t want = 0;
        char *save = NULL;

        cr_assert(exists(path), "%s is missing", path);
        content = strdup(get(path));
        cr_assert_not_null(content);
        for (char *line = strtok_r(content, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                char *ctrls = strchr(line, ':') + 1;
                char *cg = strchr(ctrls, ':') + 1;
                bool ours = false;

                ctrls[-1] = '\0';
                cg[-1] = '\0';
                if (real.root.version == CGROUP_V2)
                        ours = strcmp(line, "0") == 0 && ctrls[0] == '\0';
                else
                        ours = strstr(ctrls, "memory") || strstr(ctrls, "pids") ||
                               strstr(ctrls, "freezer");
                if (!ours)
                        continue;
                matched++;
                cr_assert(strlen(cg) >= strlen(suffix) &&
                                  strcmp(cg + strlen(cg) - strlen(suffix), suffix) == 0,
                          "hierarchy '%s' shows '%s', not '.../%s'", ctrls, cg, name);
        }
        if (real.root.version == CGROUP_V2)
                want = 1;
        else
                want = 2 + (real.root.v1_parent[CG1_FREEZER] ? 1 : 0);
        cr_assert_eq(matched, want, "matched %zu hierarchies in %s", matched, path);
}

TestSuite(real, .fini = real_teardown, .timeout = 60);

Test(real, lifecycle)
{
        const char *name = real_name("life");
        struct cgroup_limits lim = { .memory_max = 64ULL << 20,
                                     .pids_max = 16,
                                     .cpu_millicpus = 500 };
        struct airlock_error err = { "" };
        struct cgroup_usage u = { 0 };
        int go, done, result, status;
        int r;

        real_probe();
        r = cgroup_create(&real.root, name, &lim, &real.cg, &err);
        cr_assert_eq(r, 0, "create: %d %s", r, err.msg);
        cr_assert_eq(cgroup_create(&real.root, name, &lim, &(struct cgroup *){ NULL }, &err),
                     -EEXIST);

        /* The limits really reached the kernel. */
        if (real.root.version == CGROUP_V2) {
                _cleanup_free_ char *dir = real_dir(0, name);
                _cleanup_free_ char *mem = fmt("%s/memory.max", dir);
                _cleanup_free_ char *cpu = fmt("%s/cpu.max", dir);
                _cleanup_free_ char *pids = fmt("%s/pids.max", dir);

                cr_assert_str_eq(get(mem), "67108864\n");
                cr_assert_str_eq(get(pids), "16\n");
                if (exists(cpu))
                        cr_assert_str_eq(get(cpu), "50000 100000\n");
        } else {
                _cleanup_free_ char *mem = real_dir(CG1_MEMORY, name);
                _cleanup_free_ char *pids = real_dir(CG1_PIDS, name);
                _cleanup_free_ char *mem_file = fmt("%s/memory.limit_in_bytes", mem);
                _cleanup_free_ char *pids_file = fmt("%s/pids.max", pids);

                cr_assert_str_eq(get(mem_file), "67108864\n");
                cr_assert_str_eq(get(pids_file), "16\n");
                if (real.root.v1_parent[CG1_CPU]) {
                        _cleanup_free_ char *cpu = real_dir(CG1_CPU, name);
                        _cleanup_free_ char *quota = fmt("%s/cpu.cfs_quota_us", cpu);

                        cr_assert_str_eq(get(quota), "50000\n");
                }
        }

        real.child = fork_child(child_touch_memory, &go, &done);
        r = cgroup_attach(real.cg, real.child);
        cr_assert_eq(r, 0, "attach: %d", r);
        assert_in_cgroup(real.child, name);
        run_child(go, done, &result);
        cr_assert_eq(result, 0);

        r = cgroup_read_usage(real.cg, &u);
        cr_assert_eq(r, 0, "read usage: %d", r);
        /* The 8 MiB were touched after the attach, so they are charged to this cgroup. */
        cr_assert_geq(u.memory_current, 8ULL << 20, "memory_current %" PRIu64, u.memory_current);
        if (u.has_peak)
                cr_assert_geq(u.memory_peak, u.memory_current);
        if (u.has_cpu)
                cr_assert_gt(u.cpu_usec, 0);
        cr_assert_eq(u.oom_kills, 0);

        r = cgroup_reset_peak(real.cg);
        cr_assert(r == 0 || r == -EOPNOTSUPP, "reset peak: %d", r);

        r = cgroup_kill_all(real.cg);
        cr_assert_eq(r, 0, "kill_all: %d", r);
        cr_assert_eq(wait_bounded(real.child, &status), real.child, "child did not die");
        real.child = 0;
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
        (void) close(go);
        (void) close(done);

        r = cgroup_destroy(real.cg);
        cr_assert_eq(r, 0, "destroy: %d", r);
        real_assert_gone(name);
        cr_assert_eq(cgroup_destroy(real.cg), 0, "second destroy");
        real.cg = cgroup_free(real.cg);
}

Test(real, memory_limit_oom_kills)
{
        const char *name = real_name("oom");
        struct cgroup_limits lim = { .memory_max = 32ULL << 20, .pids_max = 8 };
        struct airlock_error err = { "" };
        struct cgroup_usage u = { 0 };
        int go, done, result = -1, status;
        int r;

        real_probe();
        r = cgroup_create(&real.root, name, &lim, &real.cg, &err);
        cr_assert_eq(r, 0, "create: %d %s", r, err.msg);

        real.child = fork_child(child_exceed_memory, &go, &done);
        cr_assert_eq(cgroup_attach(real.cg, real.child), 0);
        cr_assert_eq(write(go, "g", 1), 1);
        /* The child must die by the OOM killer before it can report. */
        cr_assert_eq(read(done, &result, sizeof(result)), 0, "child survived 256 MiB: %d", result);
        cr_assert_eq(wait_bounded(real.child, &status), real.child, "child did not die");
        real.child = 0;
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);

        cr_assert_eq(cgroup_read_usage(real.cg, &u), 0);
        cr_assert_geq(u.oom_kills, 1, "oom_kills %" PRIu64, u.oom_kills);
        if (u.has_peak)
                cr_assert_leq(u.memory_peak, 32ULL << 20, "peak %" PRIu64, u.memory_peak);
        (void) close(go);
        (void) close(done);

        cr_assert_eq(cgroup_kill_all(real.cg), 0);
        cr_assert_eq(cgroup_destroy(real.cg), 0);
        real_assert_gone(name);
        real.cg = cgroup_free(real.cg);
}

Test(real, pids_limit_and_raising_limits)
{
        const char *name = real_name("pids");
        struct cgroup_limits lim = { .memory_max = 16ULL << 20, .pids_max = 4 };
        struct airlock_error err = { "" };
        int fds[CG1_COUNT] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };
        int go, done, result = -1, status;
        int r;

        real_probe();
        r = cgroup_create(&real.root, name, &lim, &real.cg, &err);
        cr_assert_eq(r, 0, "create: %d %s", r, err.msg);

        real.child = fork_child(child_fork_many, &go, &done);
        cr_assert_eq(cgroup_attach(real.cg, real.child), 0);
        run_child(go, done, &result);
        /* The child itself is one of the 4 tasks, so it can make exactly 3 more. */
        cr_assert_eq(result, 3, "child made %d processes under pids.max=4", result);

        /* Raising the limits of an existing cgroup: on v1 this needs memsw written before
         * memory.limit_in_bytes, or the kernel refuses with EINVAL. */
        for (size_t i = 0; i < CG1_COUNT; i++) {
                _cleanup_free_ char *dir = real_dir(i, name);

                if (dir)
                        fds[i] = open_dir(dir);
        }
        lim.memory_max = 64ULL << 20;
        r = cgroup_apply_limits(real.root.version, fds, &lim, &err);
        cr_assert_eq(r, 0, "raising limits: %d %s", r, err.msg);
        lim.memory_max = 8ULL << 20;
        r = cgroup_apply_limits(real.root.version, fds, &lim, &err);
        cr_assert_eq(r, 0, "lowering limits: %d %s", r, err.msg);
        close_dirs(fds);

        /* kill_all must reach the grandchildren too. */
        r = cgroup_kill_all(real.cg);
        cr_assert_eq(r, 0, "kill_all: %d", r);
        cr_assert_eq(wait_bounded(real.child, &status), real.child, "child did not die");
        real.child = 0;
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
        (void) close(go);
        (void) close(done);

        cr_assert_eq(cgroup_destroy(real.cg), 0);
        real_assert_gone(name);
        real.cg = cgroup_free(real.cg);
}

/* A crashed daemon's cgroups are removed; anything else stays: other prefixes, files, and
 * directories that cannot be removed (a non-empty directory stands in for one here). */
Test(cgroup, reap_stale_takes_only_matching_dirs)
{
        char tmpl[] = "/tmp/airlock-test-stale-XXXXXX";
        char *dir = mkdtemp(tmpl);
        char path[512];
        struct cgroup_root root = { .version = CGROUP_V2 };
        struct stat st;
        unsigned left = 0;
        int fd;

        cr_assert_not_null(dir);
        root.v2_parent = dir;
        (void) snprintf(path, sizeof(path), "%s/airlock-s-dead", dir);
        cr_assert_eq(mkdir(path, 0755), 0);
        (void) snprintf(path, sizeof(path), "%s/airlock-s-busy", dir);
        cr_assert_eq(mkdir(path, 0755), 0);
        (void) snprintf(path, sizeof(path), "%s/airlock-s-busy/cgroup.procs", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        close(fd);
        (void) snprintf(path, sizeof(path), "%s/airlock-run-other", dir);
        cr_assert_eq(mkdir(path, 0755), 0);
        (void) snprintf(path, sizeof(path), "%s/airlock-s-file", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        close(fd);

        cr_assert_eq(cgroup_reap_stale(&root, "airlock-s-", &left), 1);
        cr_assert_eq(left, 1, "the stand-in for a cgroup that stays counts as left");
        (void) snprintf(path, sizeof(path), "%s/airlock-s-dead", dir);
        cr_assert_eq(stat(path, &st), -1, "the empty stale cgroup must be gone");
        (void) snprintf(path, sizeof(path), "%s/airlock-s-busy", dir);
        cr_assert_eq(stat(path, &st), 0, "a busy cgroup must stay");
        (void) snprintf(path, sizeof(path), "%s/airlock-run-other", dir);
        cr_assert_eq(stat(path, &st), 0, "another prefix must stay");
        (void) snprintf(path, sizeof(path), "%s/airlock-s-file", dir);
        cr_assert_eq(stat(path, &st), 0, "a file must stay");
        cr_assert_eq(cgroup_reap_stale(&root, "", NULL), -EINVAL);

        (void) snprintf(path, sizeof(path), "rm -rf '%s'", dir);
        cr_assert_eq(system(path), 0);
}

/* A daemon's own cgroup (cgroup_root_enter): made below each hierarchy's parent, reused when it
 * exists, and the sweep through it sees its children alone, never its siblings (the cgroups of
 * other daemons next to it). */
Test(cgroup, enter_v1_scopes_every_hierarchy, .init = tmp_setup, .fini = tmp_teardown)
{
        struct cgroup_root base = { .version = CGROUP_V1 };
        struct cgroup_root scoped = { 0 };
        struct airlock_error err = { "" };
        int r;

        mkdir_p(at("v1/memory/own"));
        mkdir_p(at("v1/pids"));
        mkdir_p(at("v1/cpu,cpuacct"));
        base.v1_parent[CG1_MEMORY] = strdup(at("v1/memory/own"));
        base.v1_parent[CG1_PIDS] = strdup(at("v1/pids"));
        base.v1_parent[CG1_CPU] = strdup(at("v1/cpu,cpuacct"));
        base.v1_parent[CG1_CPUACCT] = strdup(at("v1/cpu,cpuacct"));

        r = cgroup_root_enter(&base, "airlock-d-ab12", &scoped, &err);
        cr_assert_eq(r, 0, "enter: %d %s", r, err.msg);
        cr_assert_eq(scoped.version, CGROUP_V1);
        cr_assert_str_eq(scoped.v1_parent[CG1_MEMORY], at("v1/memory/own/airlock-d-ab12"));
        cr_assert_str_eq(scoped.v1_parent[CG1_PIDS], at("v1/pids/airlock-d-ab12"));
        cr_assert_str_eq(scoped.v1_parent[CG1_CPUACCT], at("v1/cpu,cpuacct/airlock-d-ab12"));
        cr_assert_null(scoped.v1_parent[CG1_FREEZER]);
        cr_assert(exists(at("v1/pids/airlock-d-ab12")));
        cr_assert(exists(at("v1/cpu,cpuacct/airlock-d-ab12")));
        cgroup_root_done(&scoped);

        /* A restarted daemon finds its own again. */
        r = cgroup_root_enter(&base, "airlock-d-ab12", &scoped, &err);
        cr_assert_eq(r, 0, "enter again: %d %s", r, err.msg);

        /* Its leftovers go; another daemon's empty cgroup next to it stays. */
        mkdir_p(at("v1/pids/airlock-d-ab12/airlock-s-mine"));
        mkdir_p(at("v1/pids/airlock-s-theirs"));
        mkdir_p(at("v1/pids/airlock-d-cd34/airlock-s-theirs"));
        cr_assert_eq(cgroup_reap_stale(&scoped, "airlock-", NULL), 1);
        cr_assert_not(exists(at("v1/pids/airlock-d-ab12/airlock-s-mine")));
        cr_assert(exists(at("v1/pids/airlock-s-theirs")));
        cr_assert(exists(at("v1/pids/airlock-d-cd34/airlock-s-theirs")));

        /* Removed when empty, refused while a child is left. */
        mkdir_p(at("v1/pids/airlock-d-ab12/airlock-s-busy"));
        cr_assert_lt(cgroup_root_remove(&scoped), 0);
        cr_assert(exists(at("v1/pids/airlock-d-ab12")));
        cr_assert_eq(rmdir(at("v1/pids/airlock-d-ab12/airlock-s-busy")), 0);
        cr_assert_eq(cgroup_root_remove(&scoped), 0);
        cr_assert_not(exists(at("v1/pids/airlock-d-ab12")));
        cr_assert_not(exists(at("v1/memory/own/airlock-d-ab12")));
        cr_assert_not(exists(at("v1/cpu,cpuacct/airlock-d-ab12")));
        cr_assert_eq(cgroup_root_remove(&scoped), 0, "a second removal finds nothing to do");

        cgroup_root_done(&scoped);
        cgroup_root_done(&base);
}

/* On v2 the daemon's cgroup hands its children the controllers it received. */
Test(cgroup, enter_v2_enables_controllers, .init = tmp_setup, .fini = tmp_teardown)
{
        struct cgroup_root base = { .version = CGROUP_V2 };
        struct cgroup_root scoped = { 0 };
        struct airlock_error err = { "" };
        int r;

        base.v2_parent = strdup(at("unified/airlock"));
        put(at("unified/airlock/airlock-d-ab12/cgroup.controllers"), "cpu memory pids\n");
        put(at("unified/airlock/airlock-d-ab12/cgroup.subtree_control"), "");

        r = cgroup_root_enter(&base, "airlock-d-ab12", &scoped, &err);
        cr_assert_eq(r, 0, "enter: %d %s", r, err.msg);
        cr_assert_str_eq(scoped.v2_parent, at("unified/airlock/airlock-d-ab12"));
        cr_assert_str_eq(get(at("unified/airlock/airlock-d-ab12/cgroup.subtree_control")),
                         "+memory +pids +cpu");
        cgroup_root_done(&scoped);

        cr_assert_eq(cgroup_root_enter(&base, "../escape", &scoped, &err), -EINVAL);
        cr_assert_eq(cgroup_root_enter(&base, "a/b", &scoped, &err), -EINVAL);
        cr_assert_not(exists(at("unified/escape")));
        cgroup_root_done(&base);
}

/* The same against this host's kernel: a cgroup made through the daemon's own lives inside it,
 * and both are gone afterwards. */
static struct cgroup_root real_scoped;

static void real_scope_teardown(void)
{
        if (real.child > 0) {
                (void) kill(real.child, SIGKILL);
                (void) wait_bounded(real.child, NULL);
                real.child = 0;
        }
        if (real.cg) {
                (void) cgroup_kill_all(real.cg);
                (void) cgroup_destroy(real.cg);
                real.cg = cgroup_free(real.cg);
        }
        if (real_scoped.version != CGROUP_NONE) {
                (void) cgroup_reap_stale(&real_scoped, "airlock-test-", NULL);
                (void) cgroup_root_remove(&real_scoped);
        }
        cgroup_root_done(&real_scoped);
        real_teardown();
}

/* The scoped directory of hierarchy i, or NULL. */
static const char *scoped_parent(const struct cgroup_root *root, size_t i)
{
        if (root->version == CGROUP_V2)
                return i == 0 ? root->v2_parent : NULL;
        return root->v1_parent[i];
}

Test(realscope, cgroups_live_inside_the_daemons_own, .fini = real_scope_teardown, .timeout = 60)
{
        struct cgroup_limits lim = { .memory_max = 64ULL << 20, .pids_max = 16 };
        struct airlock_error err = { "" };
        char scope[64], name[64];
        int r;

        real_probe();
        (void) snprintf(scope, sizeof(scope), "airlock-d-test-%d", (int) getpid());
        (void) snprintf(name, sizeof(name), "airlock-test-scoped-%d", (int) getpid());
        r = cgroup_root_enter(&real.root, scope, &real_scoped, &err);
        cr_assert_eq(r, 0, "enter: %d %s", r, err.msg);
        r = cgroup_create(&real_scoped, name, &lim, &real.cg, &err);
        cr_assert_eq(r, 0, "create: %d %s", r, err.msg);
        for (size_t i = 0; i < CG1_COUNT; i++) {
                const char *base = scoped_parent(&real.root, i);
                const char *inside = scoped_parent(&real_scoped, i);
                _cleanup_free_ char *want = base ? fmt("%s/%s", base, scope) : NULL;
                _cleanup_free_ char *dir = inside ? fmt("%s/%s", inside, name) : NULL;

                cr_assert_eq(!inside, !base);
                if (!inside)
                        continue;
                cr_assert_str_eq(inside, want);
                cr_assert(exists(dir), "%s missing", dir);
        }
        cr_assert_lt(cgroup_root_remove(&real_scoped), 0, "removed while a cgroup is inside");
        cr_assert_eq(cgroup_destroy(real.cg), 0);
        real.cg = cgroup_free(real.cg);
        cr_assert_eq(cgroup_root_remove(&real_scoped), 0);
        for (size_t i = 0; i < CG1_COUNT; i++)
                if (scoped_parent(&real_scoped, i))
                        cr_assert_not(exists(scoped_parent(&real_scoped, i)), "%s left",
                                      scoped_parent(&real_scoped, i));
}

/* What a crashed daemon left below its cgroup, processes included, is killed and removed by the
 * next one: its sandboxes would die only once the crashed daemon's exit got that far. */
Test(realscope, reap_kills_what_a_crashed_daemon_left, .fini = real_scope_teardown, .timeout = 60)
{
        struct cgroup_limits lim = { .pids_max = 16 };
        struct airlock_error err = { "" };
        char scope[64], name[64];
        unsigned left = 99;
        int status = 0;
        int r;

        real_probe();
        (void) snprintf(scope, sizeof(scope), "airlock-d-test-%d", (int) getpid());
        (void) snprintf(name, sizeof(name), "airlock-test-left-%d", (int) getpid());
        r = cgroup_root_enter(&real.root, scope, &real_scoped, &err);
        cr_assert_eq(r, 0, "enter: %d %s", r, err.msg);
        r = cgroup_create(&real_scoped, name, &lim, &real.cg, &err);
        cr_assert_eq(r, 0, "create: %d %s", r, err.msg);
        real.child = fork();
        cr_assert_geq(real.child, 0);
        if (real.child == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                for (;;)
                        pause();
        }
        cr_assert_eq(cgroup_attach(real.cg, real.child), 0);
        /* The "crash": the handle goes, the cgroup and its process stay. */
        real.cg = cgroup_free(real.cg);

        r = cgroup_reap_stale(&real_scoped, "airlock-test-", &left);
        cr_assert_eq(r, 1, "reap: %d", r);
        cr_assert_eq(left, 0);
        cr_assert_eq(wait_bounded(real.child, &status), real.child, "the process was not killed");
        real.child = 0;
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);
        for (size_t i = 0; i < CG1_COUNT; i++) {
                _cleanup_free_ char *dir =
                        scoped_parent(&real_scoped, i)
                                ? fmt("%s/%s", scoped_parent(&real_scoped, i), name)
                                : NULL;
                if (dir)
                        cr_assert_not(exists(dir), "%s left", dir);
        }
        cr_assert_eq(cgroup_root_remove(&real_scoped), 0);
}

/* ---- CPU weights (docs/PERFORMANCE.md, "Fairness under load") ---- */

Test(weight, v1_shares_follow_the_v2_scale)
{
        cr_assert_eq(cgroup_weight_to_shares(CGROUP_WEIGHT_DEFAULT), 1024);
        cr_assert_eq(cgroup_weight_to_shares(1000), 10240);
        cr_assert_eq(cgroup_weight_to_shares(10), 102);
        cr_assert_eq(cgroup_weight_to_shares(1), 10);
        cr_assert_eq(cgroup_weight_to_shares(CGROUP_WEIGHT_MAX), 102400);
}

Test(weight, written_to_the_right_file, .init = tmp_setup, .fini = tmp_teardown)
{
        int fds[CG1_COUNT] = { -EBADF, -EBADF, -EBADF, -EBADF, -EBADF };

        put(at("g/cpu.weight"), "");
        fds[0] = open_dir(at("g"));
        cr_assert_eq(cgroup_set_cpu_weight_at(CGROUP_V2, fds, 7), 0);
        cr_assert_str_eq(get(at("g/cpu.weight")), "7");
        cr_assert_eq(cgroup_set_cpu_weight_at(CGROUP_V2, fds, 0), -EINVAL);
        cr_assert_eq(cgroup_set_cpu_weight_at(CGROUP_V2, fds, 10001), -EINVAL);
        cr_assert_str_eq(get(at("g/cpu.weight")), "7", "a refused weight wrote nothing");
        close_dirs(fds);

        put(at("v1/cpu/s/cpu.shares"), "");
        fds[CG1_CPU] = open_dir(at("v1/cpu/s"));
        cr_assert_eq(cgroup_set_cpu_weight_at(CGROUP_V1, fds, 50), 0);
        cr_assert_str_eq(get(at("v1/cpu/s/cpu.shares")), "512");
        close_dirs(fds);
        fds[CG1_CPU] = -EBADF;
        /* No cpu controller: said so, not a crash. */
        cr_assert_eq(cgroup_set_cpu_weight_at(CGROUP_V1, fds, 50), -ENOENT);
}

/* v1: the daemon's threads move into <scope>.daemon, weighted, and back at the end. */
Test(weight, v1_daemon_moves_into_its_leaf, .init = tmp_setup, .fini = tmp_teardown)
{
        struct cgroup_root scoped = { .version = CGROUP_V1 };
        struct cgroup_daemon d;
        struct airlock_error err = { "" };
        int r;

        put(at("cpu/own/airlock-d-ab.daemon/cpu.shares"), "");
        put(at("cpu/own/airlock-d-ab.daemon/cgroup.procs"), "");
        mkdir_p(at("cpu/own/airlock-d-ab"));
        put(at("cpu/own/cgroup.procs"), "");
        scoped.v1_parent[CG1_CPU] = strdup(at("cpu/own/airlock-d-ab"));
        scoped.v1_parent[CG1_MEMORY] = strdup(at("memory/own/airlock-d-ab"));
        r = cgroup_daemon_weigh(&scoped, NULL, 1000, 4242, &d, &err);
        cr_assert_eq(r, 0, "weigh: %d %s", r, err.msg);
        cr_assert_str_eq(get(at("cpu/own/airlock-d-ab.daemon/cpu.shares")), "10240");
        cr_assert_str_eq(get(at("cpu/own/airlock-d-ab.daemon/cgroup.procs")), "4242");
        cr_assert_not(exists(at("memory/own/airlock-d-ab.daemon")),
                      "only the cpu hierarchy: the daemon's memory stays charged where it was");
        cgroup_daemon_done(&d);
        cr_assert_str_eq(get(at("cpu/own/cgroup.procs")), "4242", "moved back home");
        cr_assert_null(d.v1_leaf);
        cgroup_daemon_done(&d); /* idempotent */
        cgroup_root_done(&scoped);
}

/* v2: only where the daemon's own cgroup is the scope's sibling (the delegated layout). */
Test(weight, v2_daemon_weight_only_beside_the_scope, .init = tmp_setup, .fini = tmp_teardown)
{
        struct cgroup_root scoped = { .version = CGROUP_V2 };
        struct cgroup_daemon d;
        struct airlock_error err = { "" };
        int r;

        put(at("unit/daemon/cpu.weight"), "");
        mkdir_p(at("unit/airlock-d-ab"));
        scoped.v2_parent = strdup(at("unit/airlock-d-ab"));
        r = cgroup_daemon_weigh(&scoped, at("unit/daemon"), 1000, 4242, &d, &err);
        cr_assert_eq(r, 0, "weigh: %d %s", r, err.msg);
        cr_assert_str_eq(get(at("unit/daemon/cpu.weight")), "1000");
        cgroup_daemon_done(&d);

        put(at("elsewhere/me/cpu.weight"), "");
        r = cgroup_daemon_weigh(&scoped, at("elsewhere/me"), 1000, 4242, &d, &err);
        cr_assert_eq(r, -EOPNOTSUPP);
        cr_assert_not_null(strstr(err.msg, "Delegate=yes"), "%s", err.msg);
        cr_assert_str_eq(get(at("elsewhere/me/cpu.weight")), "");
        r = cgroup_daemon_weigh(&scoped, NULL, 1000, 4242, &d, &err);
        cr_assert_eq(r, -EOPNOTSUPP);
        cr_assert_eq(cgroup_root_set_cpu_weight(&scoped, 10), -ENOENT, "no cpu.weight there");
        put(at("unit/airlock-d-ab/cpu.weight"), "");
        cr_assert_eq(cgroup_root_set_cpu_weight(&scoped, 10), 0);
        cr_assert_str_eq(get(at("unit/airlock-d-ab/cpu.weight")), "10");
        cgroup_root_done(&scoped);
}

/* Against this host's kernel: a session's cgroup takes a weight, and reads its CPU time. */
Test(realscope, weights_and_cpu_time, .fini = real_scope_teardown, .timeout = 60)
{
        struct airlock_error err = { "" };
        struct cgroup_limits lim = { .pids_max = 16 };
        const char *cpu_dir;
        char scope[64], name[64];
        uint64_t usec = 0;
        int r;

        real_probe();
        (void) snprintf(scope, sizeof(scope), "airlock-d-test-%d", (int) getpid());
        (void) snprintf(name, sizeof(name), "airlock-test-weight-%d", (int) getpid());
        r = cgroup_root_enter(&real.root, scope, &real_scoped, &err);
        cr_assert_eq(r, 0, "enter: %d %s", r, err.msg);
        r = cgroup_create(&real_scoped, name, &lim, &real.cg, &err);
        cr_assert_eq(r, 0, "create: %d %s", r, err.msg);
        cpu_dir = scoped_parent(&real_scoped, real_scoped.version == CGROUP_V2 ? 0 : CG1_CPU);
        if (!cpu_dir)
                cr_skip_test("no cpu controller on this host: CPU weights cannot be tested");
        r = cgroup_set_cpu_weight(real.cg, 10);
        if (r == -ENOENT)
                cr_skip_test("the cpu controller is not enabled here: CPU weights cannot be "
                             "tested");
        cr_assert_eq(r, 0, "set weight: %d", r);
        {
                _cleanup_free_ char *file =
                        fmt("%s/%s/%s", cpu_dir, name,
                            real_scoped.version == CGROUP_V2 ? "cpu.weight" : "cpu.shares");
                char want[32];
                (void) snprintf(want, sizeof(want), "%s\n",
                                real_scoped.version == CGROUP_V2 ? "10" : "102");
                cr_assert_str_eq(get(file), want);
        }
        r = cgroup_read_cpu_usec(real.cg, &usec);
        cr_assert(r == 0 || r == -ENOENT, "read cpu: %d", r);
        cr_assert_eq(cgroup_runnable_tasks(real.cg), 0, "nothing runs in it");
        cr_assert_eq(cgroup_destroy(real.cg), 0);
        real.cg = cgroup_free(real.cg);
        cr_assert_eq(cgroup_root_remove(&real_scoped), 0);
}
