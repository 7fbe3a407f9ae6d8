/* The boot configuration the daemon sends to a microVM's init (src/vm/init.c) as the first bytes
 * on the control port, before any runner frame: what the runner's environment is and which
 * limits and privilege drop init applies before it runs the runner (docs/PROFILES.md,
 * "The microvm tier"). Neither side includes anything but libc, so init links it statically.
 *
 * On the wire: a 4-byte little-endian length, then that many bytes of NUL-terminated
 * "key=value" strings, each known key once except env:
 *   uid=N         the guest uid and gid the runner runs as (1 .. 65534, never 0)
 *   nofile=N      RLIMIT_NOFILE (16 .. 1048576)
 *   nproc=N       RLIMIT_NPROC (8 .. 65536)
 *   work=N        bytes of /work, a tmpfs (1 MiB .. 1 TiB)
 *   tmp=N         bytes of /tmp, a tmpfs (1 MiB .. 1 TiB)
 *   env=NAME=val  one environment variable of the runner (at most BOOTCFG_ENV_MAX)
 *   net=0|1       optional: configure the network device (vm.h: VM_GUEST_ADDR/24, the default
 *                 route via VM_GUEST_HOST); 0 when absent
 *   hosts=TEXT    optional: lines added to the guest's /etc/hosts ("10.0.3.1\tdb.internal\n"),
 *                 only letters, digits, '.', '-', '_', ':', spaces, tabs and newlines
 * Every key but env, net and hosts is required. The whole is at most BOOTCFG_MAX bytes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BOOTCFG_MAX (64u * 1024u)

/* The guest's side of QEMU's user network (net=1, vm.h): its address, and the host's, where the
 * egress proxy is (http://10.0.2.2:3128, socks5h://10.0.2.2:1080). */
#define VM_GUEST_ADDR "10.0.2.15"
#define VM_GUEST_HOST "10.0.2.2"
#define BOOTCFG_ENV_MAX 256

struct bootcfg {
        uint32_t uid;
        uint64_t nofile;
        uint64_t nproc;
        uint64_t work_bytes;
        uint64_t tmp_bytes;
        bool net;
        const char *hosts; /* into the parsed buffer, or NULL */
        /* Pointers into the parsed buffer (borrowed), NULL-terminated. */
        const char *env[BOOTCFG_ENV_MAX + 1];
        size_t n_env;
};

/* Parses payload (the bytes after the length; borrowed by *ret_cfg, which points into it).
 * Returns 0, or -EINVAL / -E2BIG with a static reason in *ret_why: a string without its NUL, an
 * unknown or repeated key, a number out of range, a bad environment name, too many variables,
 * a missing key. */
int bootcfg_parse(const char *payload, size_t len, struct bootcfg *ret_cfg, const char **ret_why);

/* Appends one "key=value" string to buf (size bytes, *pos used so far). Returns 0 or -E2BIG. */
int bootcfg_add(char *buf, size_t size, size_t *pos, const char *key, const char *value);

/* The signal port's one message from init to the daemon: when the runner ends, before init ends
 * the VM, 'X', the runner's wait status (32 bits, little-endian) and 1 when the guest's OOM
 * killer killed a process since the runner started, else 0 (vm.h, vm_exit_report()). */
#define VM_EXIT_REPORT_BYTES 6
