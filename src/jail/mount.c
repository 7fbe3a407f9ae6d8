/* The sandbox's filesystem: a small tmpfs root holding read-only binds of the image's /usr and an
 * allow-list of /etc, generated identity files, a minimal /dev, size-capped /tmp, /dev/shm and
 * /work, and a proc that shows only this pid namespace's processes. Built under JAIL_NEWROOT in
 * the child's private mount namespace, then pivoted into; the old root is detached. /work is
 * also bound at /mnt/data, where code written for OpenAI's code interpreter looks. /opt/airlock
 * holds the pip shims and, when the profile has one, its layer (read-only). */
#include "jail-internal.h"

#include "base/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#endif

/* Host /etc entries a Python, shell and R user needs: the loader cache, alternatives (BLAS,
 * pagers), fonts and TLS roots for libraries, timezone, R's Renviron (/usr/lib/R/etc links into
 * /etc/R). Identity files are generated instead, and everything else (shadow, ssh keys,
 * machine-id, the host's hostname) stays out of the tree. */
static const char *const etc_allow[] = {
        "alternatives",
        "ca-certificates",
        "ca-certificates.conf",
        "fonts",
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "localtime",
        "matplotlibrc",
        "mime.types",
        "protocols",
        "python3",
        "python3.11",
        "R",
        "services",
        "ssl",
        "timezone",
        "bash.bashrc",
        "inputrc",
        "debian_version",
        "os-release",
        "profile",
        "gai.conf",
};

static const char *const etc_generated[][2] = {
        { "passwd", "root:x:0:0:root:/root:/bin/sh\n"
                    "sandbox:x:1000:1000:sandbox:/work:/bin/bash\n"
                    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" },
        { "group", "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n" },
        { "hostname", "sandbox\n" },
        { "hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n" },
        { "nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n" },
        { "resolv.conf", "# no network in the sandbox\n" },
};

/* Bounds the names the daemon adds to /etc/hosts (EGRESS_RULES_MAX lines of a name each). */
#define HOSTS_EXTRA_MAX (128u * 1024u)

/* pip and pip3 inside the sandbox, first on its PATH (sandbox_build_env): Debian's pip, plus a
 * word when it failed in a session whose profile names no package index (the daemon then sets
 * AIRLOCK_PIP_NO_INDEX to the sentence, and PIP_NO_INDEX=1, so pip never waits on a network
 * it does not have). Local files still install: `pip install /work/pkg-1.0-py3-none-any.whl`. See
 * docs/NETWORK.md, "Inside the sandbox". */
static const char pip_shim[] =
        "#!/bin/sh\n"
        "# airlock: pip inside the sandbox (docs/NETWORK.md, \"Inside the sandbox\").\n"
        "python3 -m pip \"$@\"\n"
        "status=$?\n"
        "if [ \"$status\" -ne 0 ] && [ -n \"${AIRLOCK_PIP_NO_INDEX:-}\" ]; then\n"
        "        for arg in \"$@\"; do\n"
        "                case $arg in\n"
        "                -*) ;;\n"
        "                install|download|wheel|index) printf 'airlock: %s\\n' "
        "\"$AIRLOCK_PIP_NO_INDEX\" >&2; break ;;\n"
        "                *) break ;;\n"
        "                esac\n"
        "        done\n"
        "fi\n"
        "exit \"$status\"\n";

static const char *const dev_nodes[] = { "null", "zero", "full", "random", "urandom" };

static const char *const dev_links[][2] = {
        { "fd", "/proc/self/fd" },
        { "stdin", "/proc/self/fd/0" },
        { "stdout", "/proc/self/fd/1" },
        { "stderr", "/proc/self/fd/2" },
};

/* Top-level names that merged-/usr systems keep as symlinks into /usr, and older ones as
 * directories; both are reproduced as the image has them. */
static const char *const top_usr_links[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

#define P(buf, ...)                                                                                \
        do {                                                                                       \
                if ((size_t) snprintf(buf, sizeof(buf), __VA_ARGS__) >= sizeof(buf))               \
                        return -ENAMETOOLONG;                                                      \
        } while (0)

static int set_attr(const char *path, bool recursive, uint64_t attrs)
{
        struct mount_attr attr = { .attr_set = attrs };

        if (syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr,
                    sizeof(attr)) < 0)
                return -errno;
        return 0;
}

/* Makes the mount at path read-only, nosuid and nodev. Without mount_setattr (before 5.12) a
 * remount changes only the top mount, so recursive binds then fail instead of staying writable. */
static int make_readonly(const struct jail_features *f, const char *path, bool recursive)
{
        if (f->mount_setattr)
                return set_attr(path, recursive,
                                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (recursive)
                return -EOPNOTSUPP;
        if (mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
            0)
                return -errno;
        return 0;
}

static int bind_readonly(const struct jail_features *f, const char *src, const char *dst,
                         bool recursive)
{
        if (mount(src, dst, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL) < 0)
                return -errno;
        return make_readonly(f, dst, recursive);
}

/* Creates path with head and then tail (may be NULL) in it. */
static int write_new_file2(const char *path, const char *head, const char *tail, mode_t mode)
{
        _cleanup_close_ int fd = -EBADF;
        const char *parts[2] = { head, tail ? tail : "" };

        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                size_t len = strlen(parts[i]);
                ssize_t n = len ? write(fd, parts[i], len) : 0;
                if (n < 0)
                        return -errno;
                if ((size_t) n != len)
                        return -EIO;
        }
        return 0;
}

static int write_new_file(const char *path, const char *content, mode_t mode)
{
        return write_new_file2(path, content, NULL, mode);
}

static int touch(const char *path)
{
        return write_new_file(path, "", 0644);
}

/* Reproduces one entry of the image at dst: a symlink as the same symlink, a directory or file
 * as a read-only bind. Missing entries are skipped. */
static int copy_entry(const struct jail_features *f, const char *src, const char *dst)
{
        char target[4096];
        struct stat st;
        ssize_t n;
        int r;

        if (lstat(src, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISLNK(st.st_mode)) {
                n = readlink(src, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
                return symlink(target, dst) < 0 ? -errno : 0;
        }
        if (S_ISDIR(st.st_mode)) {
                if (mkdir(dst, 0755) < 0)
                        return -errno;
                return bind_readonly(f, src, dst, true);
        }
        if (S_ISREG(st.st_mode)) {
                r = touch(dst);
                if (r < 0)
                        return r;
                return bind_readonly(f, src, dst, false);
        }
        return 0; /* devices, fifos, sockets of the image are never exposed */
}

static int build_etc(const struct jail_features *f, const char *rootfs, const char *hosts_extra)
{
        char src[4096], dst[4096];
        int r;

        P(dst, "%s/etc", JAIL_NEWROOT);
        if (mkdir(dst, 0755) < 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(etc_allow); i++) {
                P(src, "%s/etc/%s", rootfs, etc_allow[i]);
                P(dst, "%s/etc/%s", JAIL_NEWROOT, etc_allow[i]);
                r = copy_entry(f, src, dst);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(etc_generated); i++) {
                P(dst, "%s/etc/%s", JAIL_NEWROOT, etc_generated[i][0]);
                /* The names the egress forwarders answer for follow the sandbox's own. */
                r = write_new_file2(dst, etc_generated[i][1],
                                    strcmp(etc_generated[i][0], "hosts") == 0 ? hosts_extra : NULL,
                                    0644);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Copies the runner (runner_fd, open for reading) into a tmpfs of its own at dir, as dir/runner,
 * and makes that tmpfs read-only. The copy costs one in-kernel copy of the binary (a few hundred
 * KiB) per sandbox built from the host; a zygote's sessions bind the zygote's copy instead. */
static int copy_runner(const struct jail_features *f, int runner_fd, const char *dir)
{
        _cleanup_close_ int out = -EBADF;
        char path[4096], opts[128];
        struct stat st;
        off_t offset = 0;
        int r;

        if (fstat(runner_fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EACCES;
        /* Room for the file's pages and nothing more: nothing else is ever written there. */
        P(opts, "mode=0755,size=%llu,nr_inodes=4",
          (unsigned long long) st.st_size + 4 * (unsigned long long) sysconf(_SC_PAGESIZE));
        if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return -errno;
        P(path, "%s/runner", dir);
        out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0555);
        if (out < 0)
                return -errno;
        while (offset < st.st_size) {
                ssize_t n = sendfile(out, runner_fd, &offset, (size_t) (st.st_size - offset));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO; /* the file shrank under us */
        }
        r = close(TAKE_FD(out));
        if (r < 0)
                return -errno;
        return make_readonly(f, dir, false);
}

/* /opt/airlock: bin/ with the pip shims, and layer/ with the profile's layer (layer_fd, an
 * O_PATH fd of its host directory, or -EBADF for none) bound read-only, recursively, nosuid
 * and nodev. Executables stay allowed there: a layer's C extensions are mapped executable. */
static int build_opt(const struct jail_features *f, int layer_fd)
{
        static const char *const dirs[] = { "opt", "opt/airlock", "opt/airlock/bin" };
        char src[64], dst[4096];
        int r;

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                P(dst, "%s/%s", JAIL_NEWROOT, dirs[i]);
                if (mkdir(dst, 0755) < 0)
                        return -errno;
        }
        P(dst, "%s/opt/airlock/bin/pip", JAIL_NEWROOT);
        r = write_new_file(dst, pip_shim, 0755);
        if (r < 0)
                return r;
        P(dst, "%s/opt/airlock/bin/pip3", JAIL_NEWROOT);
        if (symlink("pip", dst) < 0)
                return -errno;
        if (layer_fd < 0)
                return 0;
        P(src, "/proc/self/fd/%d", layer_fd);
        P(dst, "%s%s", JAIL_NEWROOT, JAIL_LAYER_PATH);
        if (mkdir(dst, 0755) < 0)
                return -errno;
        return bind_readonly(f, src, dst, true);
}

static int build_dev(const struct jail_config *cfg)
{
        char src[64], dst[4096], opts[128];
        int r;

        P(dst, "%s/dev", JAIL_NEWROOT);
        if (mkdir(dst, 0755) < 0)
                return -errno;
        if (mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") <
            0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(dev_nodes); i++) {
                P(src, "/dev/%s", dev_nodes[i]);
                P(dst, "%s/dev/%s", JAIL_NEWROOT, dev_nodes[i]);
                r = touch(dst);
                if (r < 0)
                        return r;
                /* The bind keeps the device usable: nodev is not set on these mounts. */
                if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                        return -errno;
                if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC, NULL) < 0)
                        return -errno;
        }
        for (size_t i = 0; i < ELEMENTSOF(dev_links); i++) {
                P(dst, "%s/dev/%s", JAIL_NEWROOT, dev_links[i][0]);
                if (symlink(dev_links[i][1], dst) < 0)
                        return -errno;
        }
        P(dst, "%s/dev/shm", JAIL_NEWROOT);
        if (mkdir(dst, 01777) < 0)
                return -errno;
        P(opts, "mode=1777,size=%llu,nr_inodes=4096", (unsigned long long) cfg->tmp_bytes);
        if (mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return -errno;
        return 0;
}

/* Binds the new root's /work at parent/dir (both made, below JAIL_NEWROOT). Mount flags are per
 * mount, so the bind is set nosuid and nodev like /work itself (a bind copies them, but this
 * does not rely on it). */
static int bind_work_at(const char *parent, const char *dir)
{
        char src[4096], dst[4096];

        P(src, "%s/work", JAIL_NEWROOT);
        P(dst, "%s/%s", JAIL_NEWROOT, parent);
        if (mkdir(dst, 0755) < 0)
                return -errno;
        P(dst, "%s/%s", JAIL_NEWROOT, dir);
        if (mkdir(dst, 0755) < 0)
                return -errno;
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                return -errno;
        if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) < 0)
                return -errno;
        return 0;
}

int mount_build_root(const struct jail_features *f, const struct jail_config *cfg,
                     const char **ret_step)
{
        char src[4096], dst[4096], opts[128], rootfs[64], runner[64];
        int r, rootfs_fd, runner_fd, layer_fd = -EBADF;

        /* Nothing we mount may propagate back to the host's namespace. */
        *ret_step = "make mounts private";
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;

        /* The image and the runner are opened before anything is mounted and reached through
         * these fds from here on: the new root's tmpfs goes over JAIL_NEWROOT (/tmp), which
         * would hide a runner or an image that lives below it, and no path can be swapped
         * underneath us either. The fds (and the profile layer's, below) are close-on-exec and
         * closed by the fd cleanup. */
        *ret_step = "open the image";
        rootfs_fd = open(cfg->rootfs && *cfg->rootfs ? cfg->rootfs : "/",
                         O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfs_fd < 0)
                return -errno;
        *ret_step = "open the runner";
        runner_fd = open(cfg->runner_path,
                         (cfg->runner_is_private ? O_PATH : O_RDONLY | O_NOCTTY) | O_CLOEXEC);
        if (runner_fd < 0)
                return -errno;
        if (cfg->layer_dir) {
                *ret_step = "open the profile layer";
                layer_fd = open(cfg->layer_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (layer_fd < 0)
                        return -errno;
        }
        *ret_step = "check the extra /etc/hosts lines";
        if (cfg->hosts_extra && strlen(cfg->hosts_extra) > HOSTS_EXTRA_MAX)
                return -E2BIG;
        P(rootfs, "/proc/self/fd/%d", rootfs_fd);
        P(runner, "/proc/self/fd/%d", runner_fd);

        *ret_step = "mount root tmpfs";
        if (mount("tmpfs", JAIL_NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV,
                  "mode=0755,size=2m,nr_inodes=4096") < 0)
                return -errno;

        *ret_step = "bind /usr read-only";
        P(src, "%s/usr", rootfs);
        P(dst, "%s/usr", JAIL_NEWROOT);
        if (mkdir(dst, 0755) < 0)
                return -errno;
        r = bind_readonly(f, src, dst, true);
        if (r < 0)
                return r;

        *ret_step = "link top-level directories";
        for (size_t i = 0; i < ELEMENTSOF(top_usr_links); i++) {
                P(src, "%s/%s", rootfs, top_usr_links[i]);
                P(dst, "%s/%s", JAIL_NEWROOT, top_usr_links[i]);
                r = copy_entry(f, src, dst);
                if (r < 0)
                        return r;
        }

        *ret_step = "build /etc";
        r = build_etc(f, rootfs, cfg->hosts_extra);
        if (r < 0)
                return r;

        *ret_step = cfg->layer_dir ? "build /opt/airlock and bind the profile layer"
                                   : "build /opt/airlock";
        r = build_opt(f, layer_fd);
        if (r < 0)
                return r;

        *ret_step = "build /dev";
        r = build_dev(cfg);
        if (r < 0)
                return r;

        *ret_step = "mount /tmp";
        P(dst, "%s/tmp", JAIL_NEWROOT);
        if (mkdir(dst, 01777) < 0)
                return -errno;
        P(opts, "mode=1777,size=%llu,nr_inodes=16384", (unsigned long long) cfg->tmp_bytes);
        if (mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return -errno;

        *ret_step = "mount /work";
        P(dst, "%s/work", JAIL_NEWROOT);
        if (mkdir(dst, 0755) < 0)
                return -errno;
        P(opts, "mode=0755,uid=%u,gid=%u,size=%llu,nr_inodes=65536", JAIL_SANDBOX_UID,
          JAIL_SANDBOX_UID, (unsigned long long) cfg->workspace_bytes);
        if (mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return -errno;

        /* OpenAI's code interpreter keeps files in /mnt/data and E2B's sandboxes in
         * /home/user, and code written for them says so: the same tmpfs, bound at both, so
         * every name is one directory with one size cap, and a process in /home/user finds
         * itself there (getcwd() says /home/user, as E2B's sandboxes do: docs/E2B.md). /home
         * holds nothing else: the host's /home is never in the tree
         * (tests/hostile/test_01_read_secrets.py). */
        *ret_step = "bind /work at /mnt/data";
        r = bind_work_at("mnt", "mnt/data");
        if (r < 0)
                return r;
        *ret_step = "bind /work at /home/user";
        r = bind_work_at("home", "home/user");
        if (r < 0)
                return r;

        *ret_step = cfg->runner_is_private ? "bind the runner" : "copy the runner";
        P(dst, "%s/.airlock", JAIL_NEWROOT);
        if (mkdir(dst, 0755) < 0)
                return -errno;
        if (cfg->runner_is_private) {
                /* The enclosing sandbox's copy: its path within that tmpfs is "/runner". */
                P(dst, "%s%s", JAIL_NEWROOT, JAIL_RUNNER_PATH);
                r = touch(dst);
                if (r < 0)
                        return r;
                r = bind_readonly(f, runner, dst, false);
        } else {
                r = copy_runner(f, runner_fd, dst);
        }
        if (r < 0)
                return r;

        /* proc is mounted while the old root is still attached: the kernel only lets a user
         * namespace mount proc where a proc is already fully visible. subset=pid leaves out
         * /proc/sys, kallsyms, kcore and the rest of the kernel's global files. */
        *ret_step = "mount /proc";
        P(dst, "%s/proc", JAIL_NEWROOT);
        if (mkdir(dst, 0555) < 0)
                return -errno;
        if (mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  f->proc_subset_pid ? "hidepid=invisible,subset=pid" : "hidepid=2") < 0)
                return -errno;

        *ret_step = "pivot_root";
        if (chdir(JAIL_NEWROOT) < 0)
                return -errno;
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return -errno;
        if (umount2(".", MNT_DETACH) < 0)
                return -errno;
        if (chdir("/") < 0)
                return -errno;

        *ret_step = "make / and /dev read-only";
        r = make_readonly(f, "/", false);
        if (r < 0)
                return r;
        r = make_readonly(f, "/dev", false);
        if (r < 0)
                return r;
        return 0;
}
