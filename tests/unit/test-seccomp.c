/* Tests for the syscall policy of src/jail/seccomp.c: the PFC golden file, the compiled BPF run
 * through the user-space evaluator against tables taken from ISOLATION.md section 2 and
 * HOSTILE.md, and the filter loaded into real child processes.
 *
 * The golden file is tests/unit/seccomp-policy.pfc. After a deliberate policy change (or a
 * libseccomp upgrade), regenerate it and review the diff before committing:
 *   AIRLOCK_UPDATE_GOLDEN=1 build/tests/unit/test-seccomp --filter 'seccomp/pfc_matches_golden'
 */
#include "jail/seccomp.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

#define GOLDEN_PFC AIRLOCK_TEST_SOURCE_DIR "/tests/unit/seccomp-policy.pfc"

#define X32_BIT 0x40000000
#define ALLOW SECCOMP_RET_ALLOW
#define ERRNO(e) (SECCOMP_RET_ERRNO | (unsigned) (e))
#define KILL SECCOMP_RET_KILL_PROCESS
#define HI(v) ((unsigned long long) (v) << 32)

static void filter_freep(struct seccomp_filter **f)
{
        seccomp_filter_free(*f);
}

#define _cleanup_filter_ _cleanup_(filter_freep)

static struct seccomp_filter *filter_new_or_fail(bool log_only)
{
        struct seccomp_policy_options opts = { .log_only = log_only };
        struct seccomp_filter *f = NULL;
        int r;

        r = seccomp_filter_new(&opts, &f);
        cr_assert_eq(r, 0, "seccomp_filter_new: %s", strerror(-r));
        cr_assert_not_null(f);
        cr_assert_gt(f->prog.len, 0);
        return f;
}

static unsigned evaluate(const struct seccomp_filter *f, unsigned arch, int nr,
                         const unsigned long long args[6])
{
        unsigned action = 0;
        int r;

        r = seccomp_filter_evaluate(f, arch, nr, args, &action);
        cr_assert_eq(r, 0, "evaluate(nr=%d): %s", nr, strerror(-r));
        return action;
}

/* The x86_64 number of name; a few are written out for a libseccomp older than the kernel,
 * as the policy does. Returns -1 when unknown. */
static int nr_lookup(const char *name)
{
        static const struct {
                const char *name;
                int nr;
        } newer[] = {
                { "fchmodat2", 452 },     { "futex_wake", 454 }, { "futex_wait", 455 },
                { "futex_requeue", 456 }, { "cachestat", 451 },  { "map_shadow_stack", 453 },
        };
        int nr = seccomp_syscall_resolve_name(name);

        if (nr >= 0)
                return nr;
        for (size_t i = 0; i < ELEMENTSOF(newer); i++)
                if (strcmp(newer[i].name, name) == 0)
                        return newer[i].nr;
        return -1;
}

static int nr_of(const char *name)
{
        int nr = nr_lookup(name);

        cr_assert_geq(nr, 0, "unknown syscall '%s'", name);
        return nr;
}

/* Reads a whole regular file or memfd from offset 0. Returns a malloc'ed buffer. */
static char *read_fd_all(int fd, size_t *ret_len)
{
        struct stat st;
        char *buf;
        int r;

        cr_assert_eq(fstat(fd, &st), 0, "fstat: %s", strerror(errno));
        buf = malloc((size_t) st.st_size + 1);
        cr_assert_not_null(buf);
        cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
        r = read_full(fd, buf, (size_t) st.st_size);
        cr_assert_eq(r, 0, "read: %s", strerror(-r));
        buf[st.st_size] = '\0';
        *ret_len = (size_t) st.st_size;
        return buf;
}

/* ---- Golden PFC ---- */

Test(seccomp, pfc_matches_golden)
{
        struct seccomp_policy_options opts = { .log_only = false };
        _cleanup_free_ char *got = NULL, *want = NULL;
        _cleanup_close_ int memfd = -EBADF, golden = -EBADF;
        size_t got_len, want_len, line = 1;
        const char *update = getenv("AIRLOCK_UPDATE_GOLDEN");
        int r;

        memfd = memfd_create("test-seccomp-pfc", MFD_CLOEXEC);
        cr_assert_geq(memfd, 0, "memfd_create: %s", strerror(errno));
        r = seccomp_policy_export_pfc(&opts, memfd);
        cr_assert_eq(r, 0, "seccomp_policy_export_pfc: %s", strerror(-r));
        got = read_fd_all(memfd, &got_len);
        cr_assert_gt(got_len, 0);

        if (update && strcmp(update, "1") == 0) {
                golden = open(GOLDEN_PFC, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                cr_assert_geq(golden, 0, "open %s: %s", GOLDEN_PFC, strerror(errno));
                r = write_full(golden, got, got_len);
                cr_assert_eq(r, 0, "write %s: %s", GOLDEN_PFC, strerror(-r));
                cr_skip_test("rewrote %s: review the diff, nothing was compared", GOLDEN_PFC);
        }

        golden = open(GOLDEN_PFC, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(golden, 0, "open %s: %s (AIRLOCK_UPDATE_GOLDEN=1 creates it)", GOLDEN_PFC,
                      strerror(errno));
        want = read_fd_all(golden, &want_len);

        for (size_t i = 0; i < got_len && i < want_len; i++) {
                if (got[i] != want[i]) {
                        const char *g = got + i, *w = want + i;
                        while (g > got && g[-1] != '\n')
                                g--;
                        while (w > want && w[-1] != '\n')
                                w--;
                        cr_assert_fail("PFC differs from %s at line %zu (libseccomp %u.%u.%u)\n"
                                       "  golden: %.*s\n  policy: %.*s\n"
                                       "If the change is intended, regenerate with "
                                       "AIRLOCK_UPDATE_GOLDEN=1 and review the diff.",
                                       GOLDEN_PFC, line, seccomp_version()->major,
                                       seccomp_version()->minor, seccomp_version()->micro,
                                       (int) strcspn(w, "\n"), w, (int) strcspn(g, "\n"), g);
                }
                if (got[i] == '\n')
                        line++;
        }
        cr_assert_eq(got_len, want_len, "PFC length %zu, golden %s has %zu bytes", got_len,
                     GOLDEN_PFC, want_len);
}

Test(seccomp, pfc_export_rejects_bad_fd)
{
        cr_assert_eq(seccomp_policy_export_pfc(NULL, -1), -EBADF);
}

/* libseccomp 2.5 does not print its x32 check in the PFC, so the golden file cannot show it;
 * check the compiled prologue instead. x86_64 and x32 share AUDIT_ARCH_X86_64, so only this
 * jump keeps x32 numbers from being matched against the x86_64 table. */
Test(seccomp, bpf_prologue_kills_foreign_arch_and_x32)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);
        const struct sock_filter *p = f->prog.filter;
        const struct sock_filter *kill_arch, *kill_x32;

        cr_assert_geq(f->prog.len, 6);
        cr_assert_eq(p[0].code, BPF_LD | BPF_W | BPF_ABS);
        cr_assert_eq(p[0].k, offsetof(struct seccomp_data, arch));
        cr_assert_eq(p[1].code, BPF_JMP | BPF_JEQ | BPF_K);
        cr_assert_eq(p[1].k, AUDIT_ARCH_X86_64);
        cr_assert_eq(p[1].jt, 0);
        kill_arch = &p[2 + p[1].jf];
        cr_assert_eq(kill_arch->code, BPF_RET | BPF_K);
        cr_assert_eq(kill_arch->k, KILL);

        cr_assert_eq(p[2].code, BPF_LD | BPF_W | BPF_ABS);
        cr_assert_eq(p[2].k, offsetof(struct seccomp_data, nr));
        cr_assert_eq(p[3].code, BPF_JMP | BPF_JGE | BPF_K, "no x32 check after loading nr");
        cr_assert_eq(p[3].k, X32_BIT);
        /* Taken: nr >= 0x40000000 goes to a check that kills everything but nr == -1 (the
         * "skip this syscall" value a tracer may set). */
        cr_assert_eq(p[4 + p[3].jt].code, BPF_JMP | BPF_JEQ | BPF_K);
        cr_assert_eq(p[4 + p[3].jt].k, 0xffffffffu);
        kill_x32 = &p[4 + p[3].jt + 1 + p[4 + p[3].jt].jf];
        cr_assert_eq(kill_x32->code, BPF_RET | BPF_K);
        cr_assert_eq(kill_x32->k, KILL);
}

/* ---- Evaluating the compiled filter ---- */

/* The unconditional allow-lists of ISOLATION.md, plus what the runner was seen to need. */
static const char *const must_allow[] = {
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "preadv2", "pwritev",
        "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range", "lseek", "dup",
        "dup2", "dup3", "pipe", "pipe2", "flock", "fsync", "fdatasync", "sync_file_range",
        "ftruncate", "truncate", "fallocate", "sendfile", "splice", "tee", "copy_file_range",
        "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
        "faccessat2", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir",
        "rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat", "symlink",
        "symlinkat", "readlink", "readlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown",
        "fchown", "fchownat", "lchown", "utimensat", "utimes", "futimesat", "umask", "getxattr",
        "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr", "inotify_init1",
        "inotify_add_watch", "inotify_rm_watch", "fadvise64", "readahead", "memfd_create",
        "eventfd2", "signalfd4", "timerfd_create", "timerfd_settime", "timerfd_gettime",
        "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll",
        "select", "pselect6", "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore",
        "msync", "membarrier", "mlock", "mlock2", "munlock", "fork", "vfork", "execve", "execveat",
        "exit", "exit_group", "wait4", "waitid", "kill", "tgkill", "tkill", "rt_sigaction",
        "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending", "rt_sigtimedwait",
        "rt_sigqueueinfo", "sigaltstack", "getpid", "getppid", "gettid", "getuid", "geteuid",
        "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid", "setgid", "setresuid",
        "setresgid", "setreuid", "setregid", "setgroups", "setfsuid", "setfsgid", "setsid",
        "setpgid", "getpgid", "getpgrp", "getsid", "arch_prctl", "set_tid_address",
        "set_robust_list", "get_robust_list", "futex", "futex_waitv", "futex_wait", "futex_wake",
        "rseq", "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
        "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min", "getpriority",
        "setpriority", "getrlimit", "prlimit64", "getrusage", "times", "sysinfo", "uname",
        "getrandom", "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres",
        "gettimeofday", "time", "alarm", "setitimer", "getitimer", "timer_create", "timer_settime",
        "timer_gettime", "timer_getoverrun", "timer_delete", "pidfd_open", "pidfd_send_signal",
        "capget", "capset", "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop",
        "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
        "mq_timedreceive", "mq_notify", "mq_getsetattr", "bind", "listen", "accept", "accept4",
        "connect", "getsockname", "getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg",
        "sendmmsg", "recvmmsg", "shutdown", "setsockopt", "getsockopt",
        /* Beyond ISOLATION.md: CPython, bash and coreutils need these. */
        "fcntl", "getcpu", "restart_syscall", "rt_tgsigqueueinfo", "setrlimit", "mknodat", "syncfs"
};

/* The explicit EPERM lists of ISOLATION.md. */
static const char *const must_eperm[] = { "unshare",
                                          "setns",
                                          "mount",
                                          "umount2",
                                          "pivot_root",
                                          "chroot",
                                          "open_tree",
                                          "move_mount",
                                          "fsopen",
                                          "fsconfig",
                                          "fsmount",
                                          "fspick",
                                          "mount_setattr",
                                          "init_module",
                                          "finit_module",
                                          "delete_module",
                                          "kexec_load",
                                          "kexec_file_load",
                                          "reboot",
                                          "swapon",
                                          "swapoff",
                                          "acct",
                                          "quotactl",
                                          "quotactl_fd",
                                          "syslog",
                                          "vhangup",
                                          "iopl",
                                          "ioperm",
                                          "sethostname",
                                          "setdomainname",
                                          "settimeofday",
                                          "clock_settime",
                                          "clock_adjtime",
                                          "adjtimex",
                                          "io_uring_setup",
                                          "io_uring_enter",
                                          "io_uring_register",
                                          "bpf",
                                          "perf_event_open",
                                          "userfaultfd",
                                          "keyctl",
                                          "add_key",
                                          "request_key",
                                          "fanotify_init",
                                          "lookup_dcookie",
                                          "open_by_handle_at",
                                          "name_to_handle_at",
                                          "ptrace",
                                          "process_vm_readv",
                                          "process_vm_writev",
                                          "pidfd_getfd",
                                          "kcmp",
                                          "process_madvise",
                                          "mbind",
                                          "set_mempolicy",
                                          "set_mempolicy_home_node",
                                          "migrate_pages",
                                          "move_pages",
                                          "uselib",
                                          "ustat",
                                          "sysfs",
                                          "_sysctl",
                                          "nfsservctl",
                                          "vm86",
                                          "vm86old",
                                          "modify_ldt" };

/* Writing xattrs fails as on a filesystem without them, which copying tools tolerate. */
static const char *const must_eopnotsupp[] = { "setxattr",    "lsetxattr",    "fsetxattr",
                                               "removexattr", "lremovexattr", "fremovexattr" };

/* Left to the default on purpose: clone3 so glibc falls back to clone, the rest because
 * nothing in the runner needs them. */
static const char *const must_enosys[] = { "clone3",
                                           "sync",
                                           "vmsplice",
                                           "io_setup",
                                           "io_submit",
                                           "seccomp",
                                           "cachestat",
                                           "map_shadow_stack",
                                           "landlock_create_ruleset",
                                           "memfd_secret" };

Test(seccomp, allow_list_is_allowed)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);
        const unsigned long long args[6] = { 0 };

        for (size_t i = 0; i < ELEMENTSOF(must_allow); i++) {
                int nr = nr_of(must_allow[i]);
                unsigned action = evaluate(f, AUDIT_ARCH_X86_64, nr, args);
                cr_expect_eq(action, ALLOW, "%s (%d): action %#x, want ALLOW", must_allow[i], nr,
                             action);
        }
}

Test(seccomp, explicit_denials_are_eperm)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);
        const unsigned long long args[6] = { 0 };
        size_t checked = 0;

        for (size_t i = 0; i < ELEMENTSOF(must_eperm); i++) {
                int nr = seccomp_syscall_resolve_name(must_eperm[i]);
                unsigned action;

                /* vm86 and vm86old exist only on i386, which the arch check kills. */
                if (nr < 0)
                        continue;
                action = evaluate(f, AUDIT_ARCH_X86_64, nr, args);
                cr_expect_eq(action, ERRNO(EPERM), "%s (%d): action %#x, want EPERM", must_eperm[i],
                             nr, action);
                checked++;
        }
        cr_assert_geq(checked, ELEMENTSOF(must_eperm) - 2);
}

Test(seccomp, xattr_writes_are_eopnotsupp)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);
        const unsigned long long args[6] = { 0 };

        for (size_t i = 0; i < ELEMENTSOF(must_eopnotsupp); i++) {
                int nr = nr_of(must_eopnotsupp[i]);
                unsigned action = evaluate(f, AUDIT_ARCH_X86_64, nr, args);
                cr_expect_eq(action, ERRNO(EOPNOTSUPP), "%s (%d): action %#x, want EOPNOTSUPP",
                             must_eopnotsupp[i], nr, action);
        }
}

Test(seccomp, unlisted_syscalls_are_enosys)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);
        const unsigned long long args[6] = { 0 };
        const int numbers[] = { 1000, 511, 4095, 0x3fffffff };

        for (size_t i = 0; i < ELEMENTSOF(must_enosys); i++) {
                int nr = nr_lookup(must_enosys[i]);
                unsigned action;

                if (nr < 0)
                        continue;
                action = evaluate(f, AUDIT_ARCH_X86_64, nr, args);
                cr_expect_eq(action, ERRNO(ENOSYS), "%s (%d): action %#x, want ENOSYS",
                             must_enosys[i], nr, action);
        }
        for (size_t i = 0; i < ELEMENTSOF(numbers); i++)
                cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, numbers[i], args), ERRNO(ENOSYS),
                             "nr %d", numbers[i]);
}

struct arg_case {
        const char *syscall;
        unsigned long long args[6];
        unsigned want;
};

static const struct arg_case arg_cases[] = {
        /* socket: HOSTILE.md rows 16 and 17. */
        { "socket", { AF_UNIX, SOCK_STREAM }, ALLOW },
        { "socket", { AF_INET, SOCK_STREAM }, ALLOW },
        { "socket", { AF_INET, SOCK_DGRAM | SOCK_CLOEXEC }, ALLOW },
        { "socket", { AF_INET6, SOCK_STREAM }, ALLOW },
        { "socket", { AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE }, ALLOW },
        { "socket", { AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */ }, ERRNO(EAFNOSUPPORT) },
        { "socket", { AF_NETLINK, SOCK_RAW, NETLINK_ROUTE | HI(1) }, ERRNO(EAFNOSUPPORT) },
        { "socket", { AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT }, ERRNO(EAFNOSUPPORT) },
        { "socket", { AF_PACKET, SOCK_RAW }, ERRNO(EAFNOSUPPORT) },
        { "socket", { AF_VSOCK, SOCK_STREAM }, ERRNO(EAFNOSUPPORT) },
        { "socket", { AF_ALG, SOCK_SEQPACKET }, ERRNO(EAFNOSUPPORT) },
        { "socket", { AF_KEY, SOCK_RAW, 2 }, ERRNO(EAFNOSUPPORT) },
        { "socket", { AF_BLUETOOTH, SOCK_RAW }, ERRNO(EAFNOSUPPORT) },
        { "socket", { AF_INET | HI(1), SOCK_STREAM }, ERRNO(EAFNOSUPPORT) },
        { "socket", { AF_UNIX | HI(0xffffffff), SOCK_STREAM }, ERRNO(EAFNOSUPPORT) },
        { "socketpair", { AF_UNIX, SOCK_STREAM }, ALLOW },
        { "socketpair", { AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC }, ALLOW },
        { "socketpair", { AF_TIPC, SOCK_STREAM }, ERRNO(EAFNOSUPPORT) },
        { "socketpair", { AF_UNIX | HI(1), SOCK_STREAM }, ERRNO(EAFNOSUPPORT) },
        /* clone: HOSTILE.md row 5. Thread and fork flags as glibc passes them. */
        { "clone", { 0x3d0f00 }, ALLOW },
        { "clone", { SIGCHLD | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID }, ALLOW },
        { "clone", { CLONE_VM | CLONE_VFORK | SIGCHLD }, ALLOW },
        { "clone", { SIGCHLD | HI(1) }, ALLOW },
        { "clone", { CLONE_NEWUSER | SIGCHLD }, ERRNO(EPERM) },
        { "clone", { CLONE_NEWUSER | HI(1) }, ERRNO(EPERM) },
        { "clone", { CLONE_NEWNS }, ERRNO(EPERM) },
        { "clone", { CLONE_NEWCGROUP }, ERRNO(EPERM) },
        { "clone", { CLONE_NEWUTS }, ERRNO(EPERM) },
        { "clone", { CLONE_NEWIPC }, ERRNO(EPERM) },
        { "clone", { CLONE_NEWPID }, ERRNO(EPERM) },
        { "clone", { CLONE_NEWNET }, ERRNO(EPERM) },
        { "clone3", { 0, 88 }, ERRNO(ENOSYS) },
        /* ioctl: HOSTILE.md row 13, CVE-2019-10063 sets high bits. */
        { "ioctl", { 0, FIONREAD }, ALLOW },
        { "ioctl", { 1, TCGETS }, ALLOW },
        { "ioctl", { 1, TIOCGWINSZ }, ALLOW },
        { "ioctl", { 3, FIONBIO }, ALLOW },
        { "ioctl", { 3, FIOCLEX }, ALLOW },
        { "ioctl", { 0, TIOCSTI }, ERRNO(EPERM) },
        { "ioctl", { 0, TIOCSTI | HI(1) }, ERRNO(EPERM) },
        { "ioctl", { 0, TIOCSTI | HI(0xffffffff) }, ERRNO(EPERM) },
        { "ioctl", { 0, TIOCLINUX }, ERRNO(EPERM) },
        { "ioctl", { 0, TIOCLINUX | HI(0x80) }, ERRNO(EPERM) },
        { "ioctl", { 0, TIOCSETD }, ERRNO(EPERM) },
        { "ioctl", { 0, TIOCSETD | HI(2) }, ERRNO(EPERM) },
        /* personality. */
        { "personality", { 0 }, ALLOW },
        { "personality", { 0x8 }, ALLOW },
        { "personality", { 0x20000 }, ALLOW },
        { "personality", { 0x20008 }, ALLOW },
        { "personality", { 0xffffffff }, ALLOW },
        { "personality", { 0x0040000 /* ADDR_NO_RANDOMIZE */ }, ERRNO(EPERM) },
        { "personality", { 0x0400000 /* READ_IMPLIES_EXEC */ }, ERRNO(EPERM) },
        { "personality", { HI(1) }, ERRNO(EPERM) },
        /* prctl. */
        { "prctl", { PR_SET_NAME }, ALLOW },
        { "prctl", { PR_SET_NO_NEW_PRIVS, 1 }, ALLOW },
        { "prctl", { PR_SET_PDEATHSIG, SIGKILL }, ALLOW },
        { "prctl", { PR_SET_MM, PR_SET_MM_START_CODE }, ERRNO(EPERM) },
        { "prctl", { PR_SET_MM | HI(1) }, ERRNO(EPERM) },
        { "prctl", { PR_SET_PTRACER, 1 }, ERRNO(EPERM) },
        { "prctl", { PR_SET_PTRACER | HI(7), 1 }, ERRNO(EPERM) },
        /* fcntl stays whole: sqlite needs record locks. */
        { "fcntl", { 3, F_SETLK }, ALLOW },
        { "fcntl", { 3, F_SETFD, FD_CLOEXEC }, ALLOW },
};

Test(seccomp, argument_checks)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);

        for (size_t i = 0; i < ELEMENTSOF(arg_cases); i++) {
                const struct arg_case *c = &arg_cases[i];
                unsigned action = evaluate(f, AUDIT_ARCH_X86_64, nr_of(c->syscall), c->args);
                cr_expect_eq(action, c->want,
                             "case %zu: %s(%#llx, %#llx, %#llx): action %#x, want %#x", i,
                             c->syscall, c->args[0], c->args[1], c->args[2], action, c->want);
        }
}

Test(seccomp, foreign_arch_and_x32_are_killed)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);
        const unsigned long long args[6] = { 0 };
        /* x32 getpid, read, execve, its own rt_sigaction (512), and a number that is x86_64's
         * allowed read with only the x32 bit added. */
        const int x32[] = { X32_BIT | 39, X32_BIT | 0, X32_BIT | 59, X32_BIT | 512,
                            X32_BIT | 1000 };
        /* i386 getpid (20) and socketcall (102), reached with int 0x80. */
        const int i386[] = { 20, 102, 0 };

        for (size_t i = 0; i < ELEMENTSOF(x32); i++)
                cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, x32[i], args), KILL, "x32 nr %#x",
                             x32[i]);
        for (size_t i = 0; i < ELEMENTSOF(i386); i++)
                cr_expect_eq(evaluate(f, AUDIT_ARCH_I386, i386[i], args), KILL, "i386 nr %d",
                             i386[i]);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_AARCH64, 172, args), KILL);
        /* The same numbers on the native arch are allowed, so the kill comes from the arch. */
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, 39, args), ALLOW);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, 0, args), ALLOW);
}

Test(seccomp, log_only_logs_instead_of_denying)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(true);
        const unsigned long long none[6] = { 0 };
        const unsigned long long tiocsti[6] = { 0, TIOCSTI | HI(1) };
        const unsigned long long packet[6] = { AF_PACKET, SOCK_RAW };
        const unsigned long long inet[6] = { AF_INET, SOCK_STREAM };
        const unsigned long long newuser[6] = { CLONE_NEWUSER };
        const unsigned long long thread[6] = { 0x3d0f00 };

        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, nr_of("read"), none), ALLOW);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, nr_of("mount"), none), SECCOMP_RET_LOG);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, nr_of("ioctl"), tiocsti), SECCOMP_RET_LOG);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, nr_of("socket"), packet), SECCOMP_RET_LOG);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, nr_of("socket"), inet), ALLOW);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, nr_of("clone"), newuser), SECCOMP_RET_LOG);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, nr_of("clone"), thread), ALLOW);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, 1000, none), SECCOMP_RET_LOG);
        /* A foreign ABI is an attack, not a missing entry: it still kills. */
        cr_expect_eq(evaluate(f, AUDIT_ARCH_X86_64, X32_BIT | 39, none), KILL);
        cr_expect_eq(evaluate(f, AUDIT_ARCH_I386, 20, none), KILL);
}

/* ---- The evaluator itself, on hand-written programs ---- */

static int evaluate_program(const struct sock_filter *insns, size_t n, int nr, unsigned *ret_action)
{
        struct seccomp_filter f = {
                .prog = { .len = (unsigned short) n, .filter = (struct sock_filter *) insns },
        };
        const unsigned long long args[6] = { 0, 0x1122334455667788ULL };

        return seccomp_filter_evaluate(&f, AUDIT_ARCH_X86_64, nr, args, ret_action);
}

Test(seccomp, evaluator_runs_memory_alu_and_jumps)
{
        /* M[3] = nr; A = 7; X = M[3]; A = X & 0xff; return nr & 0xff == 42 ? ERRNO(1) :
         * (arg1.hi == 0x11223344 ? A + 0x7fff0000 - 43 (ALLOW for nr 43) : KILL). */
        const struct sock_filter prog[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_STMT(BPF_ST, 3),
                BPF_STMT(BPF_LD | BPF_IMM, 7),
                BPF_STMT(BPF_LDX | BPF_MEM, 3),
                BPF_STMT(BPF_MISC | BPF_TXA, 0),
                BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 42, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
                BPF_STMT(BPF_MISC | BPF_TAX, 0),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]) + 4),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x11223344, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
                BPF_STMT(BPF_MISC | BPF_TXA, 0),
                BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, SECCOMP_RET_ALLOW - 43),
                BPF_STMT(BPF_RET | BPF_A, 0),
        };
        unsigned action = 0;

        cr_assert_eq(evaluate_program(prog, ELEMENTSOF(prog), 42, &action), 0);
        cr_expect_eq(action, SECCOMP_RET_ERRNO | 1);
        cr_assert_eq(evaluate_program(prog, ELEMENTSOF(prog), 42 + 0x100, &action), 0);
        cr_expect_eq(action, SECCOMP_RET_ERRNO | 1);
        cr_assert_eq(evaluate_program(prog, ELEMENTSOF(prog), 43, &action), 0);
        cr_expect_eq(action, SECCOMP_RET_ALLOW);
}

Test(seccomp, evaluator_rejects_malformed_programs)
{
        const struct sock_filter ret_allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        const struct {
                const char *what;
                struct sock_filter insns[3];
                size_t n;
        } bad[] = {
                { "empty", { ret_allow }, 0 },
                { "no return at the end", { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0) }, 1 },
                { "jump past the end",
                  { BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 5, 0), ret_allow },
                  2 },
                { "ja past the end", { BPF_STMT(BPF_JMP | BPF_JA, 1), ret_allow }, 2 },
                { "unaligned load", { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2), ret_allow }, 2 },
                { "load past seccomp_data",
                  { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, sizeof(struct seccomp_data)), ret_allow },
                  2 },
                { "byte load", { BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0), ret_allow }, 2 },
                { "scratch read before write", { BPF_STMT(BPF_LD | BPF_MEM, 0), ret_allow }, 2 },
                { "scratch index out of range", { BPF_STMT(BPF_ST, 16), ret_allow }, 2 },
                { "division by constant zero",
                  { BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0), ret_allow },
                  2 },
                { "shift by 32", { BPF_STMT(BPF_ALU | BPF_LSH | BPF_K, 32), ret_allow }, 2 },
                { "modulo (not allowed by seccomp)",
                  { BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, 3), ret_allow },
                  2 },
                { "unknown opcode", { { 0xffff, 0, 0, 0 }, ret_allow }, 2 },
        };
        /* Written on one path only: the read after the join is not safe. */
        const struct sock_filter half_written[] = {
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
                BPF_STMT(BPF_ST, 0),
                BPF_STMT(BPF_LD | BPF_MEM, 0),
                ret_allow,
        };
        unsigned action = 0xdead;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                cr_expect_eq(evaluate_program(bad[i].insns, bad[i].n, 0, &action), -EINVAL,
                             "%s accepted", bad[i].what);
        cr_expect_eq(evaluate_program(half_written, ELEMENTSOF(half_written), 0, &action), -EINVAL);
        cr_expect_eq(action, 0xdead, "*ret_action written on failure");
        cr_expect_eq(evaluate_program(&ret_allow, 1, 0, &action), 0);
        cr_expect_eq(action, SECCOMP_RET_ALLOW);
}

Test(seccomp, null_arguments)
{
        cr_expect_null(seccomp_filter_free(NULL));
        cr_expect_eq(seccomp_filter_load(NULL), -EINVAL);
        cr_expect_eq(seccomp_filter_new(NULL, NULL), -EINVAL);
}

/* ---- The filter in the kernel ---- */

enum {
        PROBE_LOAD,
        PROBE_GETPID,
        PROBE_OPEN_READ,
        PROBE_SOCKET_INET,
        PROBE_THREAD,
        PROBE_FORK,
        PROBE_MOUNT,
        PROBE_UNSHARE,
        PROBE_CLONE_NEWUSER,
        PROBE_CLONE3,
        PROBE_SOCKET_PACKET,
        PROBE_SOCKET_VSOCK,
        PROBE_SOCKET_NETLINK_AUDIT,
        PROBE_TIOCSTI_HIGH,
        PROBE_KEYCTL,
        PROBE_IO_URING,
        PROBE_CLOCK_SETTIME,
        PROBE_UNKNOWN,
        _PROBE_MAX,
};

static const char *const probe_names[_PROBE_MAX] = {
        [PROBE_LOAD] = "seccomp_filter_load",
        [PROBE_GETPID] = "getpid",
        [PROBE_OPEN_READ] = "open+read /dev/null",
        [PROBE_SOCKET_INET] = "socket(AF_INET)",
        [PROBE_THREAD] = "pthread_create (clone3, then clone)",
        [PROBE_FORK] = "fork+wait",
        [PROBE_MOUNT] = "mount(tmpfs)",
        [PROBE_UNSHARE] = "unshare(CLONE_NEWUSER)",
        [PROBE_CLONE_NEWUSER] = "clone(CLONE_NEWUSER)",
        [PROBE_CLONE3] = "clone3",
        [PROBE_SOCKET_PACKET] = "socket(AF_PACKET)",
        [PROBE_SOCKET_VSOCK] = "socket(AF_VSOCK)",
        [PROBE_SOCKET_NETLINK_AUDIT] = "socket(AF_NETLINK, NETLINK_AUDIT)",
        [PROBE_TIOCSTI_HIGH] = "ioctl(TIOCSTI | 1 << 32)",
        [PROBE_KEYCTL] = "keyctl",
        [PROBE_IO_URING] = "io_uring_setup",
        [PROBE_CLOCK_SETTIME] = "clock_settime",
        [PROBE_UNKNOWN] = "syscall 1000"
};

/* 0 or -errno of a raw syscall result. */
static int result(long r)
{
        return r < 0 ? -errno : 0;
}

static void *thread_main(void *arg)
{
        return arg;
}

static void skip_unless_seccomp(void)
{
        if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0)
                cr_skip_test("seccomp unavailable: prctl(PR_GET_SECCOMP): %s", strerror(errno));
}

/* Child side: everything after the load must be allowed by the filter itself, so only raw
 * syscalls, write and _exit. A core dump of a SIGSYS child would only litter the directory. */
static int child_enter_filter(const struct seccomp_filter *f)
{
        const struct rlimit no_core = { 0, 0 };

        (void) setrlimit(RLIMIT_CORE, &no_core);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return seccomp_filter_load(f);
}

static void child_probe(const struct seccomp_filter *f, int out_fd)
{
        int res[_PROBE_MAX];
        pid_t pid = getpid();
        char buf[1];
        pthread_t t;
        void *t_ret = NULL;
        long fd;
        struct timespec ts = { .tv_sec = 0, .tv_nsec = -1 };

        for (size_t i = 0; i < ELEMENTSOF(res); i++)
                res[i] = -ECHILD;

        res[PROBE_LOAD] = child_enter_filter(f);
        if (res[PROBE_LOAD] < 0)
                goto out;

        res[PROBE_GETPID] = syscall(SYS_getpid) == pid ? 0 : -EIO;

        fd = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
        res[PROBE_OPEN_READ] = result(fd);
        if (fd >= 0) {
                res[PROBE_OPEN_READ] = result(read((int) fd, buf, sizeof(buf)));
                (void) close((int) fd);
        }

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        res[PROBE_SOCKET_INET] = result(fd);
        if (fd >= 0)
                (void) close((int) fd);

        /* glibc tries clone3 first and falls back to clone on ENOSYS: the policy relies on it. */
        res[PROBE_THREAD] = -pthread_create(&t, NULL, thread_main, &pid);
        if (res[PROBE_THREAD] == 0) {
                res[PROBE_THREAD] = -pthread_join(t, &t_ret);
                if (res[PROBE_THREAD] == 0 && t_ret != &pid)
                        res[PROBE_THREAD] = -EIO;
        }

        fd = fork();
        if (fd == 0)
                _exit(7);
        res[PROBE_FORK] = result(fd);
        if (fd > 0) {
                int status = 0;
                if (waitpid((pid_t) fd, &status, 0) < 0)
                        res[PROBE_FORK] = -errno;
                else if (!WIFEXITED(status) || WEXITSTATUS(status) != 7)
                        res[PROBE_FORK] = -EIO;
        }

        /* Arguments that fail harmlessly (an empty target) should the filter let them through:
         * the tests may run as root in the host's mount namespace. Likewise the invalid time
         * below. */
        res[PROBE_MOUNT] = result(syscall(SYS_mount, "none", "", "tmpfs", 0, NULL));
        res[PROBE_UNSHARE] = result(syscall(SYS_unshare, CLONE_NEWUSER));
        /* Had the filter let it through, the raw clone child returns 0 and must leave at once. */
        fd = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
        if (fd == 0)
                _exit(0);
        res[PROBE_CLONE_NEWUSER] = result(fd);
        if (fd > 0)
                (void) waitpid((pid_t) fd, NULL, 0);
        res[PROBE_CLONE3] = result(syscall(SYS_clone3, NULL, 0));
        res[PROBE_SOCKET_PACKET] = result(syscall(SYS_socket, AF_PACKET, SOCK_RAW, 0));
        res[PROBE_SOCKET_VSOCK] = result(syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0));
        res[PROBE_SOCKET_NETLINK_AUDIT] =
                result(syscall(SYS_socket, AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */));
        /* fd -1, not a terminal: should the filter fail, nothing is typed into anyone's shell;
         * the filter decides on the command alone. */
        res[PROBE_TIOCSTI_HIGH] =
                result(syscall(SYS_ioctl, -1, (unsigned long) TIOCSTI | (1UL << 32), buf));
        res[PROBE_KEYCTL] = result(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0));
        res[PROBE_IO_URING] = result(syscall(SYS_io_uring_setup, 1, NULL));
        res[PROBE_CLOCK_SETTIME] = result(syscall(SYS_clock_settime, CLOCK_REALTIME, &ts));
        res[PROBE_UNKNOWN] = result(syscall(1000));

out:
        (void) write_full(out_fd, res, sizeof(res));
        _exit(0);
}

Test(seccomp, kernel_enforces_policy)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);
        static const int want[_PROBE_MAX] = {
                [PROBE_MOUNT] = -EPERM,
                [PROBE_UNSHARE] = -EPERM,
                [PROBE_CLONE_NEWUSER] = -EPERM,
                [PROBE_CLONE3] = -ENOSYS,
                [PROBE_SOCKET_PACKET] = -EAFNOSUPPORT,
                [PROBE_SOCKET_VSOCK] = -EAFNOSUPPORT,
                [PROBE_SOCKET_NETLINK_AUDIT] = -EAFNOSUPPORT,
                [PROBE_TIOCSTI_HIGH] = -EPERM,
                [PROBE_KEYCTL] = -EPERM,
                [PROBE_IO_URING] = -EPERM,
                [PROBE_CLOCK_SETTIME] = -EPERM,
                [PROBE_UNKNOWN] = -ENOSYS,
        };
        _cleanup_close_ int rfd = -EBADF;
        int pipefd[2], res[_PROBE_MAX], status = 0, r;
        pid_t pid;

        skip_unless_seccomp();
        cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
        rfd = pipefd[0];

        pid = fork();
        cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
        if (pid == 0)
                child_probe(f, pipefd[1]);
        (void) close(pipefd[1]);

        r = read_full(rfd, res, sizeof(res));
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert_eq(r, 0, "no report from the child (wait status %#x)", status);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);

        if (res[PROBE_LOAD] == -ENOSYS || res[PROBE_LOAD] == -EINVAL)
                cr_skip_test("seccomp filters unavailable: %s", strerror(-res[PROBE_LOAD]));

        for (size_t i = 0; i < ELEMENTSOF(res); i++)
                cr_expect_eq(res[i], want[i], "%s: got %d (%s), want %d (%s)", probe_names[i],
                             res[i], strerror(-res[i]), want[i], strerror(-want[i]));
}

/* Runs fn in a child under the filter and returns its wait status. The child writes the load
 * result first; a load failure is a skip, not a kill. */
static int run_killed_child(const struct seccomp_filter *f, void (*fn)(void), int *ret_load)
{
        _cleanup_close_ int rfd = -EBADF;
        int pipefd[2], load = -ECHILD, status = 0, r;
        pid_t pid;

        cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
        rfd = pipefd[0];

        pid = fork();
        cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                /* The kernel's verdict, not the sanitizer's: ASan turns a SIGSEGV into exit 1. */
                (void) signal(SIGSEGV, SIG_DFL);
                load = f ? child_enter_filter(f) : 0;
                (void) write_full(pipefd[1], &load, sizeof(load));
                if (load == 0)
                        fn();
                _exit(0);
        }
        (void) close(pipefd[1]);

        r = read_full(rfd, &load, sizeof(load));
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert_eq(r, 0, "no report from the child (wait status %#x)", status);
        *ret_load = load;
        return status;
}

static void do_x32_getpid(void)
{
        (void) syscall(X32_BIT | SYS_getpid);
}

Test(seccomp, kernel_kills_x32_syscall)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);
        int status, load;

        skip_unless_seccomp();
        status = run_killed_child(f, do_x32_getpid, &load);
        if (load == -ENOSYS || load == -EINVAL)
                cr_skip_test("seccomp filters unavailable: %s", strerror(-load));
        cr_assert_eq(load, 0, "load: %s", strerror(-load));
        cr_assert(WIFSIGNALED(status), "x32 syscall survived (wait status %#x)", status);
        cr_assert_eq(WTERMSIG(status), SIGSYS, "killed by signal %d, want SIGSYS",
                     WTERMSIG(status));
}

#if defined(__x86_64__)
static void do_int80_getpid(void)
{
        long ret;

        /* i386 getpid through the compat entry; r8-r11 are clobbered on older kernels. */
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "r8", "r9", "r10", "r11", "memory");
        (void) ret;
}

Test(seccomp, kernel_kills_int80_syscall)
{
        _cleanup_filter_ struct seccomp_filter *f = filter_new_or_fail(false);
        int status, load;

        skip_unless_seccomp();
        /* Without IA32 emulation (ia32_emulation=0, or a kernel built without it) int 0x80
         * faults with SIGSEGV before seccomp sees it: nothing to test then. */
        status = run_killed_child(NULL, do_int80_getpid, &load);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                cr_skip_test("int 0x80 unavailable without a filter (wait status %#x)", status);

        status = run_killed_child(f, do_int80_getpid, &load);
        if (load == -ENOSYS || load == -EINVAL)
                cr_skip_test("seccomp filters unavailable: %s", strerror(-load));
        cr_assert_eq(load, 0, "load: %s", strerror(-load));
        cr_assert(WIFSIGNALED(status), "int 0x80 syscall survived (wait status %#x)", status);
        cr_assert_eq(WTERMSIG(status), SIGSYS, "killed by signal %d, want SIGSYS",
                     WTERMSIG(status));
}
#endif
