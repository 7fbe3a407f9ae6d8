/* What QEMU (the VMM) runs as on the host (docs/SECURITY.md, "The microVM tier"): never root.
 * The daemon opens the guest's kernel, initramfs and root disk itself and hands them to QEMU
 * as fds, so QEMU needs no access to the state directory; the child that becomes QEMU then
 * drops every capability (the bounding set too), takes a uid and gid of its own, unique among
 * live VMs (VMM_UID_BASE + its pid), no supplementary groups but /dev/kvm's when the device is
 * only group-accessible, and no_new_privs, before it executes QEMU. */
#pragma once

#include "base/error.h"

#include <stdbool.h>
#include <sys/types.h>

/* Host ids of the VMMs: VMM_UID_BASE + pid, below the jail's ranges (jail-internal.h). */
#define VMM_UID_BASE 0x58000000u
#define VMM_UID_SPAN 4194304u /* pid_max <= 2^22 */

/* The guest image's files, opened read-only by the daemon. */
enum { VMM_KERNEL, VMM_INITRD, VMM_ROOT, VMM_IMAGE_FILES };
extern const char *const vmm_image_names[VMM_IMAGE_FILES];

/* Opens image_dir's vmlinuz, initrd.cpio and root.erofs into fds[] (O_RDONLY, O_CLOEXEC).
 * Each must be a regular file readable by others (QEMU reopens the kernel and the initramfs
 * through /proc/self/fd, which checks the file's own mode, never the directories above).
 * Returns 0, or -errno with err saying which file and what to do (fds[] all closed). */
int vmm_open_image(const char *image_dir, int fds[VMM_IMAGE_FILES], struct airlock_error *err);

/* Whether an unprivileged VMM can open dev read-write: 0 when others may, or when its group
 * may (*ret_gid is then the group QEMU gets; else (gid_t) -1); -EACCES otherwise, with err
 * saying what to change. */
int vmm_kvm_access(const char *dev, gid_t *ret_gid, struct airlock_error *err);

/* In the forked child about to execute QEMU: drops every capability and becomes the VMM's
 * uid for its pid, with kvm_gid (when not (gid_t) -1) as its only supplementary group.
 * Returns 0 or -errno; the child exits on failure. Async-signal-safe (no allocation). */
int vmm_drop_privileges(gid_t kvm_gid);

/* In the forked child, first: a network namespace of its own, with nothing but a loopback
 * (down until the daemon's egress proxy brings it up, src/egress/egress.h), for every VM with a
 * network device or none. A QEMU taken over by its guest finds no network of the host's there;
 * QEMU's user network (slirp, vm.h) makes its guest's connections in it, so they reach only
 * what the daemon put in it. Returns 0 or -errno. */
int vmm_private_net(void);

/* The mount point of the VMM's root while it is built, in its own mount namespace only. */
#define VMM_NEWROOT "tmp"

/* In the forked child, before vmm_drop_privileges(): a mount namespace of its own whose root
 * is an empty read-only tmpfs with the host's /usr (read-only: QEMU, its libraries, modules
 * and firmware), /proc (for /proc/self/fd), /dev/null, zero, random, urandom and, when
 * kvm_dev, /dev/kvm. Nothing else of the host: no state directory, no /etc, /home, /var or
 * /run. Returns 0 or -errno. */
int vmm_private_root(const char *kvm_dev);
