/* The sandbox's syscall policy: an allow-list built with libseccomp, compiled once to classic
 * BPF and loaded as the last step before the runner is executed (ISOLATION.md section 2).
 *
 * Default action ERRNO(ENOSYS), so unknown syscalls look unimplemented and libc falls back;
 * explicit policy denials (mount, unshare, ptrace, bpf, keyctl, io_uring...) answer EPERM;
 * a foreign architecture (int 0x80, x32 numbers) kills the process. Arguments are checked for
 * socket (AF_UNIX, AF_INET, AF_INET6, and AF_NETLINK only with NETLINK_ROUTE; other families
 * EAFNOSUPPORT), clone (no namespace flags), clone3 (ENOSYS so libc falls back to clone),
 * ioctl (TIOCSTI, TIOCLINUX, TIOCSETD denied with the command masked to 32 bits), personality
 * and prctl (PR_SET_MM, PR_SET_PTRACER denied). */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stdio.h>

struct seccomp_policy_options {
        /* Log instead of deny (SCMP_ACT_LOG), for tuning the list; never in production. */
        bool log_only;
};

/* A compiled filter: prog.filter points into a buffer owned by the struct. */
struct seccomp_filter {
        struct sock_fprog prog;
};

/* Builds and compiles the policy. Returns 0 or -errno; free with seccomp_filter_free(). */
int seccomp_filter_new(const struct seccomp_policy_options *opts, struct seccomp_filter **ret);

/* Accepts NULL, returns NULL. */
struct seccomp_filter *seccomp_filter_free(struct seccomp_filter *f);

/* Writes libseccomp's pseudo filter code (PFC) for the policy to fd, for review and golden
 * tests. Returns 0 or -errno. */
int seccomp_policy_export_pfc(const struct seccomp_policy_options *opts, int fd);

/* Installs the compiled filter on the calling thread. no_new_privs must already be set.
 * Async-signal-safe (a single syscall), so it can run in a freshly cloned child.
 * Returns 0 or -errno. */
int seccomp_filter_load(const struct seccomp_filter *f);

/* The action the policy takes for syscall number nr with the given arguments, evaluated in user
 * space against the compiled BPF (no filter is installed). *ret_action is the raw seccomp
 * return value (SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno, SECCOMP_RET_KILL_PROCESS...).
 * arch is an AUDIT_ARCH_* value (AUDIT_ARCH_X86_64 for native). Used by unit tests to check
 * that what must be denied is denied and what must run runs. args may be NULL for all zero.
 * Returns 0, -EINVAL if the program is malformed (not what the kernel would accept), or -errno. */
int seccomp_filter_evaluate(const struct seccomp_filter *f, unsigned arch, int nr,
                            const unsigned long long args[6], unsigned *ret_action);
