/* Landlock: filesystem, TCP and scope rules that hold even if a mount is wrong. Applied at the
 * highest ABI the kernel offers (Debian 12's headers know only the first ABIs, so the constants
 * of later ones are defined here from the kernel's uapi). */
#include "jail-internal.h"

#include "base/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* LANDLOCK_RULE_NET_PORT and its attribute (ABI 4, Linux 6.7), which Debian 12's headers lack:
 * an enum value there, so it cannot be tested with #ifndef. */
#define LL_RULE_NET_PORT 2
struct ll_net_port_attr {
        uint64_t allowed_access;
        uint64_t port;
};

/* The ruleset attribute as of ABI 6; older kernels take a prefix of it (size argument). */
struct ll_ruleset_attr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
};

#define FS_RX                                                                                      \
        (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* Everything a writable directory needs; device nodes and device ioctls stay out. */
#define FS_RW                                                                                      \
        (FS_RX | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                   \
         LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR |                            \
         LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                              \
         LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER |   \
         LANDLOCK_ACCESS_FS_TRUNCATE)

int landlock_abi_version(void)
{
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

        return abi < 0 ? 0 : (int) abi;
}

static uint64_t fs_handled_for_abi(int abi)
{
        uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */

        if (abi >= 2)
                all |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                all |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        return all;
}

static int add_path_rule(int ruleset_fd, const char *path, uint64_t access, uint64_t handled)
{
        _cleanup_close_ int fd = -EBADF;
        struct landlock_path_beneath_attr rule = { 0 };

        fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        rule.allowed_access = access & handled;
        rule.parent_fd = fd;
        if (syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0)
                return -errno;
        return 0;
}

/* One rule allowing connect(2) to a TCP port (on any address: Landlock has no address rules,
 * and the sandbox's namespace holds nothing but its loopback and the egress listeners). */
static int add_connect_rule(int ruleset_fd, uint16_t port)
{
        struct ll_net_port_attr rule = { .allowed_access = LANDLOCK_ACCESS_NET_CONNECT_TCP,
                                         .port = port };

        if (syscall(SYS_landlock_add_rule, ruleset_fd, LL_RULE_NET_PORT, &rule, 0) < 0)
                return -errno;
        return 0;
}

int landlock_apply(int abi, const uint16_t *connect_ports, size_t n_connect_ports,
                   const char **ret_step)
{
        static const char *const rw_dirs[] = { "/work", "/tmp", "/dev/shm" };
        static const char *const rw_devs[] = { "/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                               "/dev/urandom" };
        _cleanup_close_ int ruleset_fd = -EBADF;
        struct ll_ruleset_attr attr = { 0 };
        size_t attr_size;
        uint64_t handled;
        int r;

        if (abi <= 0)
                return 0;

        handled = fs_handled_for_abi(abi);
        attr.handled_access_fs = handled;
        attr_size = sizeof(attr.handled_access_fs);
        if (abi >= 4) {
                /* TCP bind and connect are handled: bind gets no rule at all (denied on every
                 * port), connect only the rules of connect_ports (the egress listeners). */
                attr.handled_access_net =
                        LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
                attr_size = offsetof(struct ll_ruleset_attr, scoped);
        }
        if (abi >= 6) {
                /* No connecting to abstract unix sockets or signalling processes outside. */
                attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
                attr_size = sizeof(attr);
        }

        *ret_step = "landlock: create ruleset";
        ruleset_fd = (int) syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
        if (ruleset_fd < 0)
                return -errno;

        *ret_step = "landlock: read-only rule for /";
        r = add_path_rule(ruleset_fd, "/", FS_RX, handled);
        if (r < 0)
                return r;
        *ret_step = "landlock: read-write rule for /work, /tmp, /dev/shm";
        for (size_t i = 0; i < ELEMENTSOF(rw_dirs); i++) {
                r = add_path_rule(ruleset_fd, rw_dirs[i], FS_RW, handled);
                if (r < 0)
                        return r;
        }
        *ret_step = "landlock: rule for /dev files";
        for (size_t i = 0; i < ELEMENTSOF(rw_devs); i++) {
                r = add_path_rule(ruleset_fd, rw_devs[i],
                                  LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                          LANDLOCK_ACCESS_FS_TRUNCATE,
                                  handled);
                if (r < 0)
                        return r;
        }

        /* Below ABI 4 there is nothing to add: Landlock cannot restrict TCP there, and the
         * network namespace alone keeps the sandbox from reaching anything but its listeners. */
        if (abi >= 4) {
                *ret_step = "landlock: TCP connect rules for the egress ports";
                for (size_t i = 0; i < n_connect_ports; i++) {
                        r = add_connect_rule(ruleset_fd, connect_ports[i]);
                        if (r < 0)
                                return r;
                }
        }

        /* landlock_restrict_self() needs no_new_privs, which the child set at its start. */
        *ret_step = "landlock: restrict self";
        if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0)
                return -errno;
        return 0;
}
