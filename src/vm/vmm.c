/* See vmm.h. */
#include "vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *const vmm_image_names[VMM_IMAGE_FILES] = { "vmlinuz", "initrd.cpio", "root.erofs" };

int vmm_open_image(const char *image_dir, int fds[VMM_IMAGE_FILES], struct airlock_error *err)
{
        int r = 0;

        for (int i = 0; i < VMM_IMAGE_FILES; i++)
                fds[i] = -EBADF;
        for (int i = 0; i < VMM_IMAGE_FILES && r == 0; i++) {
                char path[4096];
                struct stat st;

                if ((size_t) snprintf(path, sizeof(path), "%s/%s", image_dir, vmm_image_names[i]) >=
                    sizeof(path)) {
                        r = airlock_error_set(err, -ENAMETOOLONG, "the image path is too long");
                        break;
                }
                fds[i] = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fds[i] < 0) {
                        r = airlock_error_set(err, -errno,
                                              "the microVM image's %s cannot be opened: %m "
                                              "(rebuild it with `airlock profile build`)",
                                              path);
                        break;
                }
                if (fstat(fds[i], &st) < 0 || !S_ISREG(st.st_mode))
                        r = airlock_error_set(err, -EINVAL,
                                              "the microVM image's %s is not a regular file", path);
                else if ((st.st_mode & S_IROTH) == 0)
                        r = airlock_error_set(err, -EACCES,
                                              "the microVM image's %s is not readable by others "
                                              "(mode %04o): QEMU runs unprivileged and reopens "
                                              "it; chmod o+r it (it holds nothing secret: the "
                                              "profile's read-only root)",
                                              path, (unsigned) (st.st_mode & 07777));
        }
        if (r < 0)
                for (int i = 0; i < VMM_IMAGE_FILES; i++)
                        if (fds[i] >= 0) {
                                (void) close(fds[i]);
                                fds[i] = -EBADF;
                        }
        return r;
}

int vmm_kvm_access(const char *dev, gid_t *ret_gid, struct airlock_error *err)
{
        struct stat st;

        *ret_gid = (gid_t) -1;
        if (stat(dev, &st) < 0)
                return airlock_error_set(err, -errno, "%s: %m", dev);
        if ((st.st_mode & (S_IROTH | S_IWOTH)) == (S_IROTH | S_IWOTH))
                return 0;
        if ((st.st_mode & (S_IRGRP | S_IWGRP)) == (S_IRGRP | S_IWGRP) && st.st_gid != 0) {
                *ret_gid = st.st_gid;
                return 0;
        }
        return airlock_error_set(err, -EACCES,
                                 "KVM is not usable by an unprivileged QEMU: %s is mode %04o, "
                                 "group %u; make it group read-write for a group other than "
                                 "root's (Debian's kvm group: chmod 0660, chgrp kvm) or "
                                 "read-write for all (Debian's udev default, 0666)",
                                 dev, (unsigned) (st.st_mode & 07777), (unsigned) st.st_gid);
}

int vmm_drop_privileges(gid_t kvm_gid)
{
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = { { 0 } };
        uid_t id = VMM_UID_BASE + (uint32_t) getpid() % VMM_UID_SPAN;
        gid_t groups[1] = { kvm_gid };

        for (int cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
                        if (errno == EINVAL)
                                break;
                        return -errno;
                }
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -errno;
        if (prctl(PR_SET_SECUREBITS,
                  SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                          SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                          SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                  0, 0, 0) < 0)
                return -errno;
        /* Raw syscalls: this is a fork of a threaded daemon (glibc's wrappers are fine after
         * fork(), but the raw ones need no reasoning). */
        if (syscall(SYS_setgroups, kvm_gid == (gid_t) -1 ? 0 : 1, groups) < 0 ||
            syscall(SYS_setresgid, id, id, id) < 0 || syscall(SYS_setresuid, id, id, id) < 0)
                return -errno;
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

int vmm_private_net(void)
{
        return unshare(CLONE_NEWNET) < 0 ? -errno : 0;
}

/* One bind mount of src onto dst (made as a file or a directory like src), read-only when
 * ro. */
static int bind_into(const char *src, const char *dst, bool dir, bool ro)
{
        if (dir ? mkdir(dst, 0755) < 0 && errno != EEXIST : mknod(dst, S_IFREG | 0644, 0) < 0)
                return -errno;
        if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                return -errno;
        if (ro && mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                        NULL) < 0)
                return -errno;
        return 0;
}

int vmm_private_root(const char *kvm_dev)
{
        static const char *const links[][2] = {
                { "usr/bin", "/" VMM_NEWROOT "/bin" },
                { "usr/sbin", "/" VMM_NEWROOT "/sbin" },
                { "usr/lib", "/" VMM_NEWROOT "/lib" },
                { "usr/lib64", "/" VMM_NEWROOT "/lib64" },
        };
        static const char *const devs[] = { "/dev/null", "/dev/zero", "/dev/urandom",
                                            "/dev/random" };
        char path[256];
        int r;

        if (unshare(CLONE_NEWNS) < 0)
                return -errno;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        /* The new root: an empty tmpfs over a directory every host has, in this namespace
         * only. */
        if (mount("airlock-vmm", "/" VMM_NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV,
                  "size=64k,nr_inodes=64,mode=0755") < 0)
                return -errno;
        r = bind_into("/usr", "/" VMM_NEWROOT "/usr", true, true);
        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
                if (symlink(links[i][0], links[i][1]) < 0)
                        return -errno;
        /* /proc for /proc/self/fd (the image's files); QEMU's own pid is the host's. */
        r = bind_into("/proc", "/" VMM_NEWROOT "/proc", true, false);
        if (r < 0)
                return r;
        if (mkdir("/" VMM_NEWROOT "/dev", 0755) < 0 || mkdir("/" VMM_NEWROOT "/tmp", 01777) < 0)
                return -errno;
        for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
                (void) snprintf(path, sizeof(path), "/" VMM_NEWROOT "%s", devs[i]);
                r = bind_into(devs[i], path, false, false);
                if (r < 0)
                        return r;
        }
        if (kvm_dev) {
                (void) snprintf(path, sizeof(path), "/" VMM_NEWROOT "/dev/kvm");
                r = bind_into(kvm_dev, path, false, false);
                if (r < 0)
                        return r;
        }
        if (mkdir("/" VMM_NEWROOT "/old", 0700) < 0)
                return -errno;
        if (syscall(SYS_pivot_root, "/" VMM_NEWROOT, "/" VMM_NEWROOT "/old") < 0)
                return -errno;
        if (chdir("/") < 0 || umount2("/old", MNT_DETACH) < 0 || rmdir("/old") < 0)
                return -errno;
        /* The root itself read-only: nothing to write into but /tmp's nothing. */
        if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
            0)
                return -errno;
        return 0;
}
