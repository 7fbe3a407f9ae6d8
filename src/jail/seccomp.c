/* The sandbox's syscall policy as data (ISOLATION.md section 2), built with libseccomp and
 * compiled once to classic BPF, so that each session only pays for one seccomp(2) call. A small
 * interpreter runs the compiled program in user space, which lets the unit tests check the policy
 * the kernel will actually enforce rather than libseccomp's description of it. */
#include "jail/seccomp.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

/* Allowed whatever the arguments: the lists of ISOLATION.md section 2 plus what CPython, bash
 * and coreutils need besides (fcntl, getcpu, restart_syscall, mknodat for FIFOs, the legacy
 * variants of calls already allowed). fcntl is allowed whole: sqlite needs F_SETLK, and leases
 * need file ownership. clone3 is deliberately absent:
 * its flags live in a struct in memory that BPF cannot read, so it keeps the default ENOSYS and
 * glibc falls back to clone, whose flags are checked below. Left out on purpose, and so ENOSYS:
 * sync (host-wide writeback from inside a sandbox), vmsplice, the Linux AIO calls,
 * sched_setscheduler and sched_setattr, seccomp itself, and everything newer than this list. */
static const char *const allow_names[] = {
        /* Files and I/O. */
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "preadv2", "pwritev",
        "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range", "lseek", "dup",
        "dup2", "dup3", "pipe", "pipe2", "flock", "fcntl", "fsync", "fdatasync", "syncfs",
        "sync_file_range", "ftruncate", "truncate", "fallocate", "sendfile", "splice", "tee",
        "copy_file_range", "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
        "access", "faccessat", "faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
        "mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "link", "linkat", "unlink",
        "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod", "fchmod", "fchmodat",
        "fchmodat2", "chown", "fchown", "fchownat", "lchown", "utime", "utimensat", "utimes",
        "futimesat", "umask", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
        "flistxattr", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
        "fadvise64", "readahead", "memfd_create", "eventfd", "eventfd2", "signalfd", "signalfd4",
        "timerfd_create", "timerfd_settime", "timerfd_gettime", "epoll_create", "epoll_create1",
        "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select",
        "pselect6",
        /* mkfifo(3) and os.mkfifo() go through mknodat; device nodes still need CAP_MKNOD in the
         * initial user namespace, which the sandbox never has. */
        "mknod", "mknodat",
        /* Memory. */
        "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "membarrier",
        "mlock", "mlock2", "munlock",
        /* Processes, signals, time. restart_syscall is how the kernel resumes an interrupted
         * nanosleep or poll after a signal handler; denying it breaks sleeps at random. */
        "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill",
        "tgkill", "tkill", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend",
        "rt_sigpending", "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack",
        "restart_syscall", "pause", "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid",
        "getegid", "getresuid", "getresgid", "getgroups", "setuid", "setgid", "setresuid",
        "setresgid", "setreuid", "setregid", "setgroups", "setfsuid", "setfsgid", "setsid",
        "setpgid", "getpgid", "getpgrp", "getsid", "arch_prctl", "set_tid_address",
        "set_robust_list", "get_robust_list", "futex", "futex_waitv", "futex_wait", "futex_wake",
        "futex_requeue", "rseq", "sched_yield", "sched_getaffinity", "sched_setaffinity",
        "sched_getparam", "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
        "getpriority", "setpriority", "getrlimit", "setrlimit", "prlimit64", "getrusage", "times",
        "sysinfo", "uname", "getrandom", "getcpu", "nanosleep", "clock_nanosleep", "clock_gettime",
        "clock_getres", "gettimeofday", "time", "alarm", "setitimer", "getitimer", "timer_create",
        "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete", "pidfd_open",
        "pidfd_send_signal", "capget", "capset",
        /* System V and POSIX IPC, private to the session's IPC namespace. */
        "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget",
        "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
        "mq_notify", "mq_getsetattr",
        /* Sockets: the network namespace and Landlock decide where they may go; socket() and
         * socketpair() are checked below. */
        "bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername", "recvfrom",
        "recvmsg", "recvmmsg", "shutdown", "setsockopt", "getsockopt"
};

/* x86_64 numbers for allow-listed syscalls that an older libseccomp cannot name, so that a
 * library older than the kernel does not turn them into ENOSYS. Only harmless ones belong here:
 * anything missing simply stays denied. */
static const struct {
        const char *name;
        int nr;
} fallback_nrs[] = {
#if defined(__x86_64__)
        { "close_range", 436 },  { "openat2", 437 },     { "faccessat2", 439 },
        { "epoll_pwait2", 441 }, { "futex_waitv", 449 }, { "fchmodat2", 452 },
        { "futex_wake", 454 },   { "futex_wait", 455 },  { "futex_requeue", 456 },
#endif
};

/* Denied with EPERM. These are outside the allow-list anyway and would get ENOSYS; naming them
 * documents the intent, gives a distinct errno that tools do not mistake for an old kernel, and
 * makes a regression visible in the golden PFC. Names this architecture does not have (vm86,
 * vm86old) or this libseccomp does not know are skipped and keep the default ENOSYS. */
static const char *const eperm_names[] = {
        /* Namespaces and mounts. */
        "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
        "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
        /* Admin. */
        "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
        "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup", "iopl",
        "ioperm", "sethostname", "setdomainname", "settimeofday", "clock_settime", "clock_adjtime",
        "adjtimex",
        /* Attack-surface multipliers. keyctl also carries the Landlock bypass of
         * CVE-2024-42318. */
        "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "perf_event_open",
        "userfaultfd", "keyctl", "add_key", "request_key", "fanotify_init", "lookup_dcookie",
        "open_by_handle_at", "name_to_handle_at",
        /* Cross-process. */
        "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
        /* NUMA and obsolete. */
        "mbind", "set_mempolicy", "set_mempolicy_home_node", "migrate_pages", "move_pages",
        "uselib", "ustat", "sysfs", "_sysctl", "nfsservctl", "vm86", "vm86old", "modify_ldt"
};

/* Denied with EOPNOTSUPP, as on a filesystem without extended attributes: writing them
 * (security.capability from a user namespace) was the overlayfs escape CVE-2021-3493, yet
 * copying tools must keep working. shutil.copystat() ignores EOPNOTSUPP but raises on ENOSYS,
 * and cp -a falls back to chmod on EOPNOTSUPP but fails on EPERM. */
static const char *const eopnotsupp_names[] = { "setxattr",    "lsetxattr",    "fsetxattr",
                                                "removexattr", "lremovexattr", "fremovexattr" };

/* Flags clone(2) must not carry: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID and
 * NEWNET. CLONE_NEWTIME fits only in clone3 and unshare, which are both denied. */
#define CLONE_NS_FLAGS 0x7E020000ULL

/* ioctl and prctl take an int command, which the kernel truncates to 32 bits: compare only the
 * low half, or TIOCSTI | 1 << 32 slips past (CVE-2019-10063). */
#define LOW32 0xffffffffULL

#define CMP(a, o, x, y)                                                                            \
        {                                                                                          \
                .arg = (a), .op = (o), .datum_a = (x), .datum_b = (y)                              \
        }

/* Always true: datum >= 0 unsigned. libseccomp evaluates the more specific rules of a syscall
 * before such a catch-all, whereas an unconditional rule would override them all, so "deny
 * these arguments, allow the rest" is written as specific rules plus this catch-all. */
#define CATCH_ALL(a) CMP(a, SCMP_CMP_GE, 0, 0)

struct arg_rule {
        const char *syscall;
        /* 0 to allow, else the errno to fail with. */
        int error;
        /* The rule matches every value of its argument; see CATCH_ALL(). */
        bool is_catch_all;
        /* All must hold; unused entries have op 0 (_SCMP_CMP_MIN). */
        struct scmp_arg_cmp cmp[2];
};

#define ALLOW_IF(name, ...)                                                                        \
        {                                                                                          \
                .syscall = (name), .cmp = { __VA_ARGS__ }                                          \
        }
#define DENY_IF(name, err, ...)                                                                    \
        {                                                                                          \
                .syscall = (name), .error = (err), .cmp = { __VA_ARGS__ }                          \
        }
#define ALLOW_OTHERWISE(name, a)                                                                   \
        {                                                                                          \
                .syscall = (name), .is_catch_all = true, .cmp = { CATCH_ALL(a) }                   \
        }
#define DENY_OTHERWISE(name, err, a)                                                               \
        {                                                                                          \
                .syscall = (name), .error = (err), .is_catch_all = true, .cmp = { CATCH_ALL(a) }   \
        }

/* The syscalls allowed only with argument checks. Allow rules compare all 64 bits (SCMP_CMP_EQ
 * on the full register), so a value with high bits set matches no allow rule and falls through
 * to the deny; clone's mask ignores the high half because the kernel does too. */
static const struct arg_rule arg_rules[] = {
        /* AF_NETLINK only for NETLINK_ROUTE, which getaddrinfo() and `ip addr` use; the other
         * netlink families, AF_PACKET, AF_VSOCK, AF_ALG and AF_KEY work even in a fresh network
         * namespace. */
        ALLOW_IF("socket", CMP(0, SCMP_CMP_EQ, AF_UNIX, 0)),
        ALLOW_IF("socket", CMP(0, SCMP_CMP_EQ, AF_INET, 0)),
        ALLOW_IF("socket", CMP(0, SCMP_CMP_EQ, AF_INET6, 0)),
        ALLOW_IF("socket", CMP(0, SCMP_CMP_EQ, AF_NETLINK, 0),
                 CMP(2, SCMP_CMP_EQ, NETLINK_ROUTE, 0)),
        DENY_OTHERWISE("socket", EAFNOSUPPORT, 0),
        /* socketpair() also creates sockets of a family: AF_TIPC implements it, and creating a
         * TIPC socket may load the module. Only AF_UNIX is needed (Python, multiprocessing). */
        ALLOW_IF("socketpair", CMP(0, SCMP_CMP_EQ, AF_UNIX, 0)),
        DENY_OTHERWISE("socketpair", EAFNOSUPPORT, 0),

        /* TCP Fast Open: sendto(), sendmsg() and sendmmsg() with MSG_FASTOPEN make a
         * connection without connect(2), and Landlock's TCP rules are checked in connect(2)
         * only (a fast open to a port outside them reached the network on Linux 6.18). Every
         * connection goes through connect(2) and its port rules instead. */
        DENY_IF("sendto", EOPNOTSUPP, CMP(3, SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN)),
        ALLOW_OTHERWISE("sendto", 3),
        DENY_IF("sendmsg", EOPNOTSUPP, CMP(2, SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN)),
        ALLOW_OTHERWISE("sendmsg", 2),
        DENY_IF("sendmmsg", EOPNOTSUPP, CMP(3, SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, MSG_FASTOPEN)),
        ALLOW_OTHERWISE("sendmmsg", 3),

        /* No namespace flags: a nested user namespace is the door to most kernel attack
         * surface (HOSTILE.md row 5). */
        ALLOW_IF("clone", CMP(0, SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS, 0)),
        DENY_OTHERWISE("clone", EPERM, 0),

        /* Terminal injection and line-discipline loading (CVE-2017-5226, CVE-2019-10063). */
        DENY_IF("ioctl", EPERM, CMP(1, SCMP_CMP_MASKED_EQ, LOW32, TIOCSTI)),
        DENY_IF("ioctl", EPERM, CMP(1, SCMP_CMP_MASKED_EQ, LOW32, TIOCLINUX)),
        DENY_IF("ioctl", EPERM, CMP(1, SCMP_CMP_MASKED_EQ, LOW32, TIOCSETD)),
        ALLOW_OTHERWISE("ioctl", 1),

        /* The personalities Docker allows: Linux, Linux32, UNAME26 and the 0xffffffff query.
         * Anything else, READ_IMPLIES_EXEC and ADDR_NO_RANDOMIZE included, is EPERM. */
        ALLOW_IF("personality", CMP(0, SCMP_CMP_EQ, PER_LINUX, 0)),
        ALLOW_IF("personality", CMP(0, SCMP_CMP_EQ, PER_LINUX32, 0)),
        ALLOW_IF("personality", CMP(0, SCMP_CMP_EQ, UNAME26, 0)),
        ALLOW_IF("personality", CMP(0, SCMP_CMP_EQ, UNAME26 | PER_LINUX32, 0)),
        ALLOW_IF("personality", CMP(0, SCMP_CMP_EQ, 0xffffffffULL, 0)),
        DENY_OTHERWISE("personality", EPERM, 0),

        /* PR_SET_MM rewrites a process's memory map layout and PR_SET_PTRACER widens who may
         * ptrace it; everything else in prctl is per-process and harmless. */
        DENY_IF("prctl", EPERM, CMP(0, SCMP_CMP_MASKED_EQ, LOW32, PR_SET_MM)),
        DENY_IF("prctl", EPERM, CMP(0, SCMP_CMP_MASKED_EQ, LOW32, PR_SET_PTRACER)),
        ALLOW_OTHERWISE("prctl", 0),
};

static void seccomp_ctx_releasep(scmp_filter_ctx *ctx)
{
        if (*ctx)
                seccomp_release(*ctx);
}

/* The action that replaces a denial: the errno, or SCMP_ACT_LOG when only logging. */
static uint32_t deny_action(const struct seccomp_policy_options *opts, int error)
{
        return opts && opts->log_only ? SCMP_ACT_LOG : SCMP_ACT_ERRNO(error);
}

/* Returns the native syscall number for name, or -ENOENT when this libseccomp does not know it
 * or the architecture does not have it (libseccomp then returns a negative pseudo number). */
static int syscall_lookup(const char *name, bool use_fallback)
{
        int nr = seccomp_syscall_resolve_name(name);

        if (nr >= 0)
                return nr;
        if (use_fallback)
                for (size_t i = 0; i < ELEMENTSOF(fallback_nrs); i++)
                        if (strcmp(fallback_nrs[i].name, name) == 0)
                                return fallback_nrs[i].nr;
        return -ENOENT;
}

static int policy_add_names(scmp_filter_ctx ctx, const char *const *names, size_t n,
                            uint32_t action, bool use_fallback)
{
        int r;

        for (size_t i = 0; i < n; i++) {
                int nr = syscall_lookup(names[i], use_fallback);
                if (nr < 0)
                        continue;

                r = seccomp_rule_add(ctx, action, nr, 0);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int policy_add_arg_rules(scmp_filter_ctx ctx, const struct seccomp_policy_options *opts)
{
        bool log_only = opts && opts->log_only;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(arg_rules); i++) {
                const struct arg_rule *rule = &arg_rules[i];
                unsigned n_cmp;
                int nr;

                /* When only logging, the default action is already SCMP_ACT_LOG and libseccomp
                 * refuses a rule with the default action (-EACCES), so deny rules go. A catch-all
                 * allow goes too, or it would silently allow the arguments the dropped deny rules
                 * were meant to log. */
                if (log_only && (rule->error != 0 || rule->is_catch_all))
                        continue;

                /* These syscalls exist on every architecture: not knowing one is a bug. */
                nr = syscall_lookup(rule->syscall, false);
                if (nr < 0)
                        return -EINVAL;

                n_cmp = 0;
                while (n_cmp < ELEMENTSOF(rule->cmp) && rule->cmp[n_cmp].op != 0)
                        n_cmp++;

                r = seccomp_rule_add_array(
                        ctx, rule->error ? deny_action(opts, rule->error) : SCMP_ACT_ALLOW, nr,
                        n_cmp, rule->cmp);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int policy_build(const struct seccomp_policy_options *opts, scmp_filter_ctx *ret_ctx)
{
        _cleanup_(seccomp_ctx_releasep) scmp_filter_ctx ctx = NULL;
        bool log_only = opts && opts->log_only;
        int r;

        /* ENOSYS by default: an unknown syscall looks unimplemented and libc falls back to an
         * older one, where EPERM would be reported as a failure. */
        ctx = seccomp_init(deny_action(opts, ENOSYS));
        if (!ctx)
                return -ENOMEM;

        /* Raw errnos from libseccomp instead of -ECANCELED for every system error. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
        if (r < 0)
                return r;

        /* Only the native architecture is in the filter. int 0x80 (AUDIT_ARCH_I386) fails the
         * arch check, and for x86_64 libseccomp also sends numbers with the x32 bit
         * (0x40000000) to this action; both kill, even when only logging, because a
         * foreign-ABI syscall is an attack, never a missing allow-list entry. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return r;

        r = policy_add_names(ctx, allow_names, ELEMENTSOF(allow_names), SCMP_ACT_ALLOW, true);
        if (r < 0)
                return r;

        /* When only logging, these denials would become the default action, which libseccomp
         * refuses as a rule; the default logs these syscalls anyway. */
        if (!log_only) {
                r = policy_add_names(ctx, eperm_names, ELEMENTSOF(eperm_names),
                                     deny_action(opts, EPERM), false);
                if (r < 0)
                        return r;
                r = policy_add_names(ctx, eopnotsupp_names, ELEMENTSOF(eopnotsupp_names),
                                     deny_action(opts, EOPNOTSUPP), false);
                if (r < 0)
                        return r;
        }

        r = policy_add_arg_rules(ctx, opts);
        if (r < 0)
                return r;

        *ret_ctx = TAKE_PTR(ctx);
        return 0;
}

/* Checks a program the way the kernel does before it accepts a seccomp filter
 * (bpf_check_classic() and seccomp_check_filter()): only the instructions seccomp allows, loads
 * of whole aligned words inside struct seccomp_data, jumps that stay inside the program, a
 * return at the end, no division by a constant zero, and no read of scratch memory that was not
 * written on every path to it. Jumps only go forward, so one pass in order sees every
 * predecessor of an instruction before the instruction itself. */
static int bpf_check(const struct sock_filter *insns, size_t n)
{
        uint16_t mem_valid[BPF_MAXINSNS];

        if (n == 0 || n > BPF_MAXINSNS)
                return -EINVAL;

        for (size_t pc = 0; pc < n; pc++)
                mem_valid[pc] = UINT16_MAX;
        mem_valid[0] = 0;

        for (size_t pc = 0; pc < n; pc++) {
                const struct sock_filter *in = &insns[pc];
                uint16_t mem = mem_valid[pc];
                bool falls_through = true;

                switch (in->code) {
                case BPF_LD | BPF_W | BPF_ABS:
                        if (in->k % 4 != 0 || in->k >= sizeof(struct seccomp_data))
                                return -EINVAL;
                        break;
                case BPF_LD | BPF_W | BPF_LEN:
                case BPF_LDX | BPF_W | BPF_LEN:
                case BPF_LD | BPF_IMM:
                case BPF_LDX | BPF_IMM:
                case BPF_MISC | BPF_TAX:
                case BPF_MISC | BPF_TXA:
                case BPF_ALU | BPF_NEG:
                        break;
                case BPF_LD | BPF_MEM:
                case BPF_LDX | BPF_MEM:
                        if (in->k >= BPF_MEMWORDS || !(mem & (1u << in->k)))
                                return -EINVAL;
                        break;
                case BPF_ST:
                case BPF_STX:
                        if (in->k >= BPF_MEMWORDS)
                                return -EINVAL;
                        mem |= (uint16_t) (1u << in->k);
                        break;
                case BPF_ALU | BPF_DIV | BPF_K:
                        if (in->k == 0)
                                return -EINVAL;
                        break;
                case BPF_ALU | BPF_LSH | BPF_K:
                case BPF_ALU | BPF_RSH | BPF_K:
                        if (in->k >= 32)
                                return -EINVAL;
                        break;
                case BPF_ALU | BPF_ADD | BPF_K:
                case BPF_ALU | BPF_ADD | BPF_X:
                case BPF_ALU | BPF_SUB | BPF_K:
                case BPF_ALU | BPF_SUB | BPF_X:
                case BPF_ALU | BPF_MUL | BPF_K:
                case BPF_ALU | BPF_MUL | BPF_X:
                case BPF_ALU | BPF_DIV | BPF_X:
                case BPF_ALU | BPF_AND | BPF_K:
                case BPF_ALU | BPF_AND | BPF_X:
                case BPF_ALU | BPF_OR | BPF_K:
                case BPF_ALU | BPF_OR | BPF_X:
                case BPF_ALU | BPF_XOR | BPF_K:
                case BPF_ALU | BPF_XOR | BPF_X:
                case BPF_ALU | BPF_LSH | BPF_X:
                case BPF_ALU | BPF_RSH | BPF_X:
                        break;
                case BPF_JMP | BPF_JA:
                        if (in->k >= n - pc - 1)
                                return -EINVAL;
                        mem_valid[pc + 1 + in->k] &= mem;
                        falls_through = false;
                        break;
                case BPF_JMP | BPF_JEQ | BPF_K:
                case BPF_JMP | BPF_JEQ | BPF_X:
                case BPF_JMP | BPF_JGT | BPF_K:
                case BPF_JMP | BPF_JGT | BPF_X:
                case BPF_JMP | BPF_JGE | BPF_K:
                case BPF_JMP | BPF_JGE | BPF_X:
                case BPF_JMP | BPF_JSET | BPF_K:
                case BPF_JMP | BPF_JSET | BPF_X:
                        if ((size_t) in->jt >= n - pc - 1 || (size_t) in->jf >= n - pc - 1)
                                return -EINVAL;
                        mem_valid[pc + 1 + in->jt] &= mem;
                        mem_valid[pc + 1 + in->jf] &= mem;
                        falls_through = false;
                        break;
                case BPF_RET | BPF_K:
                case BPF_RET | BPF_A:
                        falls_through = false;
                        break;
                default:
                        return -EINVAL;
                }

                if (falls_through) {
                        /* Running off the end: the kernel requires a return last. */
                        if (pc + 1 >= n)
                                return -EINVAL;
                        mem_valid[pc + 1] &= mem;
                }
        }

        return 0;
}

static uint32_t bpf_alu(uint16_t op, uint32_t a, uint32_t v)
{
        switch (op) {
        case BPF_ADD:
                return a + v;
        case BPF_SUB:
                return a - v;
        case BPF_MUL:
                return a * v;
        case BPF_DIV:
                return a / v;
        case BPF_AND:
                return a & v;
        case BPF_OR:
                return a | v;
        case BPF_XOR:
                return a ^ v;
        case BPF_LSH:
                return v >= 32 ? 0 : a << v;
        case BPF_RSH:
                return v >= 32 ? 0 : a >> v;
        default:
                return 0;
        }
}

static bool bpf_jump_taken(uint16_t op, uint32_t a, uint32_t v)
{
        switch (op) {
        case BPF_JEQ:
                return a == v;
        case BPF_JGT:
                return a > v;
        case BPF_JGE:
                return a >= v;
        case BPF_JSET:
                return (a & v) != 0;
        default:
                return false;
        }
}

/* Runs a program that passed bpf_check() over data. The program counter only moves forward, so
 * the loop ends within n steps; the explicit bound keeps that true should the check ever
 * loosen. */
static int bpf_run(const struct sock_filter *insns, size_t n, const struct seccomp_data *data,
                   uint32_t *ret_action)
{
        uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
        size_t pc = 0;

        for (size_t steps = 0; steps < n && pc < n; steps++) {
                const struct sock_filter *in = &insns[pc++];
                uint32_t v;

                switch (BPF_CLASS(in->code)) {
                case BPF_LD:
                        if (BPF_MODE(in->code) == BPF_ABS)
                                memcpy(&a, (const char *) data + in->k, sizeof(a));
                        else if (BPF_MODE(in->code) == BPF_LEN)
                                a = sizeof(*data);
                        else if (BPF_MODE(in->code) == BPF_IMM)
                                a = in->k;
                        else
                                a = mem[in->k];
                        break;
                case BPF_LDX:
                        if (BPF_MODE(in->code) == BPF_LEN)
                                x = sizeof(*data);
                        else if (BPF_MODE(in->code) == BPF_IMM)
                                x = in->k;
                        else
                                x = mem[in->k];
                        break;
                case BPF_ST:
                        mem[in->k] = a;
                        break;
                case BPF_STX:
                        mem[in->k] = x;
                        break;
                case BPF_ALU:
                        if (BPF_OP(in->code) == BPF_NEG) {
                                a = -a;
                                break;
                        }
                        v = BPF_SRC(in->code) == BPF_X ? x : in->k;
                        /* Classic BPF ends the program with 0 on a division by zero. */
                        if (BPF_OP(in->code) == BPF_DIV && v == 0) {
                                *ret_action = 0;
                                return 0;
                        }
                        a = bpf_alu(BPF_OP(in->code), a, v);
                        break;
                case BPF_JMP:
                        if (BPF_OP(in->code) == BPF_JA) {
                                pc += in->k;
                                break;
                        }
                        v = BPF_SRC(in->code) == BPF_X ? x : in->k;
                        pc += bpf_jump_taken(BPF_OP(in->code), a, v) ? in->jt : in->jf;
                        break;
                case BPF_RET:
                        *ret_action = BPF_RVAL(in->code) == BPF_A ? a : in->k;
                        return 0;
                case BPF_MISC:
                        if (BPF_MISCOP(in->code) == BPF_TAX)
                                x = a;
                        else
                                a = x;
                        break;
                default:
                        return -EINVAL;
                }
        }

        return -EINVAL;
}

static int bpf_read_back(int fd, struct sock_filter **ret_insns, size_t *ret_n)
{
        _cleanup_free_ struct sock_filter *insns = NULL;
        struct stat st;
        size_t n;
        int r;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0)
                return -EIO;
        if ((size_t) st.st_size > BPF_MAXINSNS * sizeof(struct sock_filter))
                return -E2BIG;
        n = (size_t) st.st_size / sizeof(struct sock_filter);

        insns = malloc(n * sizeof(*insns));
        if (!insns)
                return -ENOMEM;

        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        r = read_full(fd, insns, n * sizeof(*insns));
        if (r < 0)
                return r;

        *ret_insns = TAKE_PTR(insns);
        *ret_n = n;
        return 0;
}

int seccomp_filter_new(const struct seccomp_policy_options *opts, struct seccomp_filter **ret)
{
        _cleanup_(seccomp_ctx_releasep) scmp_filter_ctx ctx = NULL;
        _cleanup_free_ struct seccomp_filter *f = NULL;
        _cleanup_free_ struct sock_filter *insns = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t n = 0;
        int r;

        if (!ret)
                return -EINVAL;

        r = policy_build(opts, &ctx);
        if (r < 0)
                return r;

        /* libseccomp 2.5 exports BPF only to a file descriptor; a memfd keeps it off disk. */
        fd = memfd_create("airlock-seccomp-bpf", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;

        r = bpf_read_back(fd, &insns, &n);
        if (r < 0)
                return r;

        /* What the evaluator runs must be what the kernel would accept. */
        r = bpf_check(insns, n);
        if (r < 0)
                return r;

        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->prog.len = (unsigned short) n;
        f->prog.filter = TAKE_PTR(insns);

        *ret = TAKE_PTR(f);
        return 0;
}

struct seccomp_filter *seccomp_filter_free(struct seccomp_filter *f)
{
        if (!f)
                return NULL;
        free(f->prog.filter);
        free(f);
        return NULL;
}

int seccomp_policy_export_pfc(const struct seccomp_policy_options *opts, int fd)
{
        _cleanup_(seccomp_ctx_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        if (fd < 0)
                return -EBADF;

        r = policy_build(opts, &ctx);
        if (r < 0)
                return r;

        return seccomp_export_pfc(ctx, fd);
}

int seccomp_filter_load(const struct seccomp_filter *f)
{
        /* Nothing but the syscall: this runs in a freshly cloned child, where malloc and
         * libseccomp's own loader (which also sets no_new_privs) have no business. */
        if (!f || !f->prog.filter || f->prog.len == 0)
                return -EINVAL;
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &f->prog) < 0)
                return -errno;
        return 0;
}

int seccomp_filter_evaluate(const struct seccomp_filter *f, unsigned arch, int nr,
                            const unsigned long long args[6], unsigned *ret_action)
{
        struct seccomp_data data = {
                .nr = nr,
                .arch = arch,
        };
        uint32_t action;
        int r;

        if (!f || !f->prog.filter || !ret_action)
                return -EINVAL;

        r = bpf_check(f->prog.filter, f->prog.len);
        if (r < 0)
                return r;

        if (args)
                for (size_t i = 0; i < 6; i++)
                        data.args[i] = args[i];

        r = bpf_run(f->prog.filter, f->prog.len, &data, &action);
        if (r < 0)
                return r;

        *ret_action = action;
        return 0;
}
