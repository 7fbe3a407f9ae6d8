/* The microVM tier (docs/PROFILES.md, "The microvm tier"): a session of a profile whose
 * "isolation" is "microvm" runs its runner in a KVM guest of its own, under QEMU's `microvm`
 * machine from Debian, instead of in the namespaces sandbox of src/jail. The guest is the
 * image `airlock profile build` makes (guest-image.sh): a Debian cloud kernel, an initramfs with
 * our init (init.c) and the profile's root filesystem as a read-only EROFS disk.
 *
 * The runner speaks the same wire as in the namespaces tier. Its four channels are
 * virtio-serial ports, each a socketpair end handed to QEMU (`-chardev socket,fd=N`): the
 * control socket (init relays it to a socketpair in the guest), stdout, stderr, and a signal
 * port (a byte 'I' is SIGINT to the runner). A fifth port carries the daemon's file requests
 * to a server of init's (vm/files.h, files-proto.h). vm_start() returns them as a struct
 * jail, so the session's driver (src/session/sandbox.c) drives a VM exactly as it drives a
 * jail: the "pid" is QEMU's, whose exit ends the session, and a kill kills QEMU.
 *
 * QEMU runs in a cgroup of its own (the guest's memory plus VM_OVERHEAD_BYTES), never as
 * root (vmm.h: a uid of its own, no capabilities, the image's files passed as fds), in a network
 * namespace of its own, with its seccomp sandbox (`-sandbox on`, no spawning, no privilege
 * changes) and the guest's memory the profile's limit. Inside, init drops the runner's
 * privileges as the jail does (bootcfg.h): the guest is a second wall, not the only one.
 *
 * Network (docs/NETWORK.md, "microVM sessions"): none at all, no device, unless the profile
 * allows egress (cfg->network). Then the guest gets one virtio-net device on QEMU's user network
 * (slirp, inside QEMU): the guest is VM_GUEST_ADDR/24 with its default route and the proxy at
 * VM_GUEST_HOST, which slirp turns into 127.0.0.1 of QEMU's namespace, where the daemon's egress
 * listeners are (src/egress/egress.h, opened on QEMU's pidfd); every other address the guest
 * connects to, slirp connects to in that namespace too, which holds nothing else. */
#pragma once

#include "base/error.h"
#include "jail/jail.h"
#include "vm/bootcfg.h" /* VM_GUEST_ADDR, VM_GUEST_HOST */

#include <stdbool.h>
#include <stdint.h>

/* What QEMU itself may use above the guest's memory before its cgroup's limit. */
#define VM_OVERHEAD_BYTES (256ull << 20)

/* The device probed for KVM; tests point AIRLOCK_KVM_DEVICE elsewhere to simulate a host
 * without it. */
#define VM_KVM_DEVICE "/dev/kvm"

struct vm_config {
        const char *name;      /* cgroup name, e.g. "airlock-<id>" */
        const char *image_dir; /* vmlinuz, initrd.cpio, root.erofs (guest-image.sh) */
        uint64_t memory_bytes; /* the guest's RAM */
        uint32_t cpu_millicpus;
        uint32_t nofile, nproc;
        uint64_t work_bytes, tmp_bytes;
        char *const *envp; /* the runner's environment (NULL-terminated) */
        /* A network device on QEMU's user network (egress allowed), with these lines added to
         * the guest's /etc/hosts (the forwarded names, egress_policy_hosts_text(); may be
         * NULL). */
        bool network;
        const char *hosts_extra;
        /* Restore instead of boot (src/vm/snapshot.h): the same machine, reading the state
         * saved by vm_save() from incoming_fd (borrowed; QEMU gets a copy), and no boot
         * configuration (the guest has its own). The caller then calls vm_reseed(). */
        bool restore;
        int incoming_fd;
};

/* Whether this host can run microVM sessions: KVM at $AIRLOCK_KVM_DEVICE or /dev/kvm answers
 * KVM_GET_API_VERSION and creates a VM, and QEMU ($AIRLOCK_QEMU or qemu-system-x86_64 on
 * PATH) is there. With AIRLOCK_VM_ACCEL=tcg (development and tests on hosts without KVM)
 * QEMU's software emulation stands in for KVM: slow, and a larger attack surface (the
 * daemon's log says so). Returns 0, or -errno with err saying what is missing and what to
 * do. */
int vm_probe(struct airlock_error *err);

/* The directory of a profile's guest image: $AIRLOCK_VM_IMAGES/<profile> when set, else
 * <state_dir>/vm/<profile>. Writes into buf (size bytes). Returns 0, -ENOENT when neither is
 * known, -ENAMETOOLONG. */
int vm_image_dir(const char *state_dir, const char *profile, char *buf, size_t size);

/* Starts the guest and hands it its boot configuration (or restores it, cfg->restore). On
 * success *ret_jail is a jail whose pid and pidfd are QEMU's and whose fds are the runner's
 * channels (the runner has not answered anything yet: the caller sends "init" as to any
 * runner), *ret_sig_fd is the signal port (vm_interrupt), *ret_files_fd the file channel
 * (vm/files.h) and *ret_qmp_fd QEMU's QMP monitor (snapshot.h), all the caller's to close.
 * Returns 0 or -errno with err set (no image: built by `airlock profile build`; QEMU missing; a
 * cgroup that cannot be made). */
int vm_start(const struct jail_features *features, const struct vm_config *cfg,
             struct jail **ret_jail, int *ret_sig_fd, int *ret_files_fd, int *ret_qmp_fd,
             struct airlock_error *err);

/* Asks the guest's init to send SIGINT to the runner. Returns 0 or -errno. */
int vm_interrupt(int sig_fd);

/* When the runner ends, the guest's init writes its exit report on the signal port before it
 * ends the VM (bootcfg.h, VM_EXIT_REPORT_BYTES): QEMU's own exit status says nothing of the
 * runner's. */
struct vm_exit {
        int wait_status;
        bool oom;
};

/* Reads the exit report from the signal port, waiting up to timeout_ms for it (bytes before
 * it, late answers to a reseed, are skipped). Returns 0 with *ret filled, or -ENODATA when the
 * guest ended without one (a kernel panic, a killed QEMU), or -errno. */
int vm_exit_report(int sig_fd, int timeout_ms, struct vm_exit *ret);
