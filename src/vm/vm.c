/* See vm.h. */
#include "vm.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "bootcfg.h"
#include "files-proto.h"
#include "jail/cgroup.h"
#include "vm-internal.h"
#include "vmm.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The channels, in the order of their fds in QEMU (3, 4, ...) and of their ports' names; then
 * the image's files (IMG_FD), QEMU's QMP monitor and, for a restore, the saved state. */
enum { CH_CTL, CH_OUT, CH_ERR, CH_SIG, CH_FILES, CH_COUNT };
static const char *const channel_names[CH_COUNT] = { "airlock.ctl", "airlock.out", "airlock.err",
                                                     "airlock.sig", VMF_PORT_NAME };

const char *vm_qemu_binary(void)
{
        const char *q = getenv("AIRLOCK_QEMU");

        return q && *q ? q : "qemu-system-x86_64";
}

static bool use_tcg(void)
{
        const char *a = getenv("AIRLOCK_VM_ACCEL");

        return a && strcmp(a, "tcg") == 0;
}

/* Whether name runs: a path, or found on PATH. */
static bool is_runnable(const char *name)
{
        const char *path = getenv("PATH");
        char buf[4096];

        if (strchr(name, '/'))
                return access(name, X_OK) == 0;
        if (!path)
                path = "/usr/bin:/bin";
        while (*path) {
                size_t n = strcspn(path, ":");
                if (n > 0 &&
                    (size_t) snprintf(buf, sizeof(buf), "%.*s/%s", (int) n, path, name) <
                            sizeof(buf) &&
                    access(buf, X_OK) == 0)
                        return true;
                path += n + (path[n] == ':');
        }
        return false;
}

int vm_probe(struct airlock_error *err)
{
        const char *dev = getenv("AIRLOCK_KVM_DEVICE");
        _cleanup_close_ int kvm = -EBADF;
        int version, vmfd;

        if (!dev || !*dev)
                dev = VM_KVM_DEVICE;
        if (!is_runnable(vm_qemu_binary()))
                return airlock_error_set(err, -ENOENT,
                                         "QEMU (%s) is not installed: install Debian's "
                                         "qemu-system-x86, or set AIRLOCK_QEMU",
                                         vm_qemu_binary());
        if (use_tcg())
                return 0;
        kvm = open(dev, O_RDWR | O_CLOEXEC);
        if (kvm < 0)
                return airlock_error_set(err, -errno,
                                         "KVM is not usable: %s: %s (load kvm_intel or kvm_amd, "
                                         "enable virtualisation in the firmware or, in a VM, "
                                         "nested virtualisation, and give the daemon access "
                                         "to the device)",
                                         dev, strerror(errno));
        version = ioctl(kvm, KVM_GET_API_VERSION, 0);
        if (version != KVM_API_VERSION)
                return airlock_error_set(err, -ENODEV,
                                         "KVM is not usable: %s answers API version %d, not %d",
                                         dev, version, KVM_API_VERSION);
        vmfd = ioctl(kvm, KVM_CREATE_VM, 0);
        if (vmfd < 0)
                return airlock_error_set(err, -errno,
                                         "KVM is not usable: %s cannot create a VM: %s", dev,
                                         strerror(errno));
        (void) close(vmfd);
        /* QEMU runs unprivileged (vmm.h): the device must be open to it too. */
        {
                gid_t gid;
                return vmm_kvm_access(dev, &gid, err);
        }
}

static const char *kvm_device(void)
{
        const char *dev = getenv("AIRLOCK_KVM_DEVICE");

        return dev && *dev ? dev : VM_KVM_DEVICE;
}

int vm_image_dir(const char *state_dir, const char *profile, char *buf, size_t size)
{
        const char *env = getenv("AIRLOCK_VM_IMAGES");
        int n;

        if (env && *env)
                n = snprintf(buf, size, "%s/%s", env, profile);
        else if (state_dir)
                n = snprintf(buf, size, "%s/vm/%s", state_dir, profile);
        else
                return -ENOENT;
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

/* The host's TSC in kHz, for a TCG guest that cannot calibrate it (no PIT, HPET or kvmclock
 * in the microvm machine); 0 when unknown. */
static unsigned long tsc_khz(void)
{
        FILE *f = fopen("/proc/cpuinfo", "re");
        char line[256];
        double mhz = 0;

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
                        break;
        (void) fclose(f);
        return (unsigned long) (mhz * 1000);
}

/* Where QEMU finds the image's files: after the channels; then the monitor and the state. */
#define IMG_FD(i) (3 + CH_COUNT + (i))
#define QMP_FD IMG_FD(VMM_IMAGE_FILES)
#define INCOMING_FD (QMP_FD + 1)

/* argv for QEMU. Strings live in store (each at most 512 bytes). */
#define ARGV_MAX 96
struct qemu_argv {
        char *argv[ARGV_MAX + 1];
        char store[40][512];
        size_t n, n_store;
};

static void arg(struct qemu_argv *a, const char *s)
{
        if (a->n < ARGV_MAX)
                a->argv[a->n++] = (char *) s;
}

static int argf(struct qemu_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int argf(struct qemu_argv *a, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (a->n_store >= sizeof(a->store) / sizeof(a->store[0]))
                return -E2BIG;
        va_start(ap, fmt);
        n = vsnprintf(a->store[a->n_store], sizeof(a->store[0]), fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t) n >= sizeof(a->store[0]))
                return -ENAMETOOLONG;
        arg(a, a->store[a->n_store++]);
        return 0;
}

static int build_argv(const struct vm_config *cfg, struct qemu_argv *a)
{
        bool tcg = use_tcg();
        unsigned cpus = cfg->cpu_millicpus > 1000 ? (cfg->cpu_millicpus + 999) / 1000 : 1;
        const char *console = getenv("AIRLOCK_VM_CONSOLE");
        unsigned long khz = tcg ? tsc_khz() : 0;
        char tsc[64] = "";
        int r = 0;

        if (khz)
                (void) snprintf(tsc, sizeof(tsc), " tsc_early_khz=%lu tsc=reliable", khz);
        arg(a, vm_qemu_binary());
        /* KVM: no legacy timers or interrupt controller (kvmclock and the LAPIC do); TCG
         * needs the PIT to boot. */
        arg(a, "-M");
        arg(a, tcg ? "microvm,rtc=off" : "microvm,rtc=off,pit=off,pic=off");
        arg(a, "-accel");
        arg(a, tcg ? "tcg" : "kvm");
        arg(a, "-cpu");
        arg(a, tcg ? "max" : "host");
        arg(a, "-m");
        r |= argf(a, "%llum", (unsigned long long) (cfg->memory_bytes >> 20));
        arg(a, "-smp");
        r |= argf(a, "%u", cpus);
        arg(a, "-nodefaults");
        arg(a, "-no-user-config");
        arg(a, "-display");
        arg(a, "none");
        arg(a, "-no-reboot");
        arg(a, "-serial");
        if (console && *console)
                r |= argf(a, "file:%s", console);
        else
                arg(a, "none");
        arg(a, "-sandbox");
        arg(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
        /* The image's files are fds the daemon opened (vmm.h): QEMU, unprivileged, never
         * reaches the state directory. */
        arg(a, "-kernel");
        r |= argf(a, "/proc/self/fd/%d", IMG_FD(VMM_KERNEL));
        arg(a, "-initrd");
        r |= argf(a, "/proc/self/fd/%d", IMG_FD(VMM_INITRD));
        arg(a, "-append");
        r |= argf(a, "console=ttyS0 quiet reboot=t panic=-1 random.trust_cpu=on%s", tsc);
        arg(a, "-drive");
        r |= argf(a, "id=root,file=/proc/self/fd/%d,format=raw,if=none,readonly=on",
                  IMG_FD(VMM_ROOT));
        arg(a, "-device");
        arg(a, "virtio-blk-device,drive=root");
        /* Port 0 is the bus's console: the channels are ports 1 to CH_COUNT. */
        arg(a, "-device");
        r |= argf(a, "virtio-serial-device,max_ports=%d", CH_COUNT + 1);
        for (int i = 0; i < CH_COUNT; i++) {
                arg(a, "-chardev");
                r |= argf(a, "socket,id=ch%d,fd=%d", i, 3 + i);
                arg(a, "-device");
                r |= argf(a, "virtserialport,chardev=ch%d,name=%s", i, channel_names[i]);
        }
        if (cfg->network) {
                /* QEMU's user network (vm.h): no DHCP client in the guest (init sets
                 * VM_GUEST_ADDR), no IPv6, no SMB, TFTP or forwarded host ports; restrict=off
                 * so that slirp connects out at all, in QEMU's own namespace. One MAC for every
                 * copy of a saved VM. */
                arg(a, "-netdev");
                arg(a, "user,id=n0,net=10.0.2.0/24,host=" VM_GUEST_HOST
                       ",dns=10.0.2.3,ipv4=on,ipv6=off,restrict=off");
                arg(a, "-device");
                arg(a, "virtio-net-device,netdev=n0,mac=52:54:00:12:34:56");
        }
        /* QMP, for saving the VM (snapshot.h): only the daemon holds the other end. */
        arg(a, "-chardev");
        r |= argf(a, "socket,id=qmp,fd=%d", QMP_FD);
        arg(a, "-mon");
        arg(a, "chardev=qmp,mode=control");
        if (cfg->restore) {
                arg(a, "-incoming");
                r |= argf(a, "fd:%d", INCOMING_FD);
        }
        a->argv[a->n] = NULL;
        return r ? -ENAMETOOLONG : 0;
}

/* The boot configuration's strings into buf (BOOTCFG_MAX bytes); *ret_len their length. */
static int build_bootcfg(const struct vm_config *cfg, char *buf, size_t *ret_len)
{
        size_t pos = 0;
        char num[32];
        int r = 0;

        /* The sandbox user of src/jail/mount.c's /etc/passwd, in the guest's image too. */
        r |= bootcfg_add(buf, BOOTCFG_MAX, &pos, "uid", "1000");
        (void) snprintf(num, sizeof(num), "%u", cfg->nofile);
        r |= bootcfg_add(buf, BOOTCFG_MAX, &pos, "nofile", num);
        (void) snprintf(num, sizeof(num), "%u", cfg->nproc);
        r |= bootcfg_add(buf, BOOTCFG_MAX, &pos, "nproc", num);
        (void) snprintf(num, sizeof(num), "%llu", (unsigned long long) cfg->work_bytes);
        r |= bootcfg_add(buf, BOOTCFG_MAX, &pos, "work", num);
        (void) snprintf(num, sizeof(num), "%llu", (unsigned long long) cfg->tmp_bytes);
        r |= bootcfg_add(buf, BOOTCFG_MAX, &pos, "tmp", num);
        if (cfg->network) {
                r |= bootcfg_add(buf, BOOTCFG_MAX, &pos, "net", "1");
                if (cfg->hosts_extra && *cfg->hosts_extra)
                        r |= bootcfg_add(buf, BOOTCFG_MAX, &pos, "hosts", cfg->hosts_extra);
        }
        for (char *const *e = cfg->envp; e && *e; e++)
                r |= bootcfg_add(buf, BOOTCFG_MAX, &pos, "env", *e);
        if (r)
                return -E2BIG;
        *ret_len = pos;
        return 0;
}

static int send_bootcfg(int fd, const struct vm_config *cfg)
{
        _cleanup_free_ char *buf = malloc(4 + BOOTCFG_MAX);
        size_t pos = 0;
        uint32_t len_le;
        int r;

        if (!buf)
                return -ENOMEM;
        r = build_bootcfg(cfg, buf + 4, &pos);
        if (r < 0)
                return r;
        len_le = htole32((uint32_t) pos);
        memcpy(buf, &len_le, 4);
        for (size_t off = 0; off < pos + 4;) {
                ssize_t n = send(fd, buf + off, pos + 4 - off, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                off += (size_t) n;
        }
        return 0;
}

int vm_start(const struct jail_features *features, const struct vm_config *cfg,
             struct jail **ret_jail, int *ret_sig_fd, int *ret_files_fd, int *ret_qmp_fd,
             struct airlock_error *err)
{
        int ours[CH_COUNT], theirs[CH_COUNT], go[2] = { -EBADF, -EBADF };
        int ready[2] = { -EBADF, -EBADF };
        int img[VMM_IMAGE_FILES] = { -EBADF, -EBADF, -EBADF };
        int qmp[2] = { -EBADF, -EBADF };
        gid_t kvm_gid = (gid_t) -1;
        bool private_root;
        struct cgroup *cg = NULL;
        struct qemu_argv a = { 0 };
        struct jail *j = NULL;
        char path[4096];
        pid_t pid;
        int pidfd = -EBADF, null_fd = -EBADF, r;

        for (int i = 0; i < CH_COUNT; i++)
                ours[i] = theirs[i] = -EBADF;
        if ((size_t) snprintf(path, sizeof(path), "%s/root.erofs", cfg->image_dir) >=
                    sizeof(path) ||
            access(path, R_OK) < 0)
                return airlock_error_set(err, -ENOENT,
                                         "the microVM image %s is missing: build it with "
                                         "`airlock profile build %s` (and the daemon's "
                                         "--state-dir, or AIRLOCK_VM_IMAGES)",
                                         path,
                                         strrchr(cfg->image_dir, '/')
                                                 ? strrchr(cfg->image_dir, '/') + 1
                                                 : cfg->image_dir);
        r = build_argv(cfg, &a);
        if (r < 0)
                return airlock_error_set(err, r, "the microVM's QEMU command line is too long");
        if (!use_tcg()) {
                r = vmm_kvm_access(kvm_device(), &kvm_gid, err);
                if (r < 0)
                        return r;
        }
        r = vmm_open_image(cfg->image_dir, img, err);
        if (r < 0)
                return r;
        /* QEMU from /usr (Debian's) sees only /usr, /proc and a few devices; one from
         * elsewhere (AIRLOCK_QEMU), or one writing its console to a file of the host
         * (AIRLOCK_VM_CONSOLE, for debugging), sees the host's filesystem as its uid may. */
        private_root =
                !getenv("AIRLOCK_VM_CONSOLE") &&
                (!strchr(vm_qemu_binary(), '/') || strncmp(vm_qemu_binary(), "/usr/", 5) == 0);
        for (int i = 0; i < CH_COUNT; i++) {
                int sv[2];
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                        r = airlock_error_set(err, -errno, "socketpair: %s", strerror(errno));
                        goto fail;
                }
                ours[i] = sv[0];
                theirs[i] = sv[1];
        }
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qmp) < 0) {
                r = airlock_error_set(err, -errno, "socketpair: %s", strerror(errno));
                goto fail;
        }
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0) {
                r = airlock_error_set(err, -errno, "/dev/null: %s", strerror(errno));
                goto fail;
        }
        if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0) {
                r = airlock_error_set(err, -errno, "pipe: %s", strerror(errno));
                goto fail;
        }
        if (features->cgroups.version != CGROUP_NONE) {
                struct cgroup_limits limits = {
                        .memory_max = cfg->memory_bytes + VM_OVERHEAD_BYTES,
                        .pids_max = 0, /* QEMU's threads; the guest's processes are not here */
                        .cpu_millicpus = cfg->cpu_millicpus,
                };
                r = cgroup_create(&features->cgroups, cfg->name, &limits, &cg, err);
                if (r < 0)
                        goto fail;
        }

        pid = fork();
        if (pid < 0) {
                r = airlock_error_set(err, -errno, "fork: %s", strerror(errno));
                goto fail;
        }
        if (pid == 0) {
                /* The child: wait until the parent has put it into the cgroup, put the
                 * channels at fds 3..6, close everything else, exec QEMU. */
                char b;
                int hi[CH_COUNT + VMM_IMAGE_FILES];
                sigset_t all;
                (void) sigemptyset(&all);
                (void) sigprocmask(SIG_SETMASK, &all, NULL);
                if (read(go[0], &b, 1) != 1)
                        _exit(127);
                /* Its own network namespace (vmm.h) before anything else, and the parent told
                 * so: the egress proxy may go into it as soon as vm_start() returns. */
                if (vmm_private_net() < 0)
                        _exit(124);
                if (write(ready[1], "n", 1) != 1)
                        _exit(127);
                for (int i = 0; i < CH_COUNT + VMM_IMAGE_FILES; i++) {
                        hi[i] = fcntl(i < CH_COUNT ? theirs[i] : img[i - CH_COUNT], F_DUPFD_CLOEXEC,
                                      64);
                        if (hi[i] < 0)
                                _exit(127);
                }
                {
                        int hq = fcntl(qmp[1], F_DUPFD_CLOEXEC, 64);
                        int hin = cfg->restore ? fcntl(cfg->incoming_fd, F_DUPFD_CLOEXEC, 64) : -1;
                        if (hq < 0 || (cfg->restore && hin < 0))
                                _exit(127);
                        for (int i = 0; i < CH_COUNT + VMM_IMAGE_FILES; i++)
                                if (dup2(hi[i], 3 + i) < 0)
                                        _exit(127);
                        if (dup2(hq, QMP_FD) < 0 || (cfg->restore && dup2(hin, INCOMING_FD) < 0))
                                _exit(127);
                }
                /* Nothing of the daemon's terminal: QEMU's stdin is /dev/null (its output
                 * goes to the daemon's log). */
                if (dup2(null_fd, 0) < 0)
                        _exit(127);
                (void) syscall(SYS_close_range, cfg->restore ? INCOMING_FD + 1u : QMP_FD + 1u, ~0u,
                               0u);
                (void) setpgid(0, 0);
                /* A root of its own (vmm.h), then never root: no capabilities, a uid of its
                 * own. */
                if (private_root && vmm_private_root(use_tcg() ? NULL : kvm_device()) < 0)
                        _exit(125);
                if (vmm_drop_privileges(kvm_gid) < 0)
                        _exit(126);
                execvp(a.argv[0], a.argv);
                _exit(127);
        }
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (cg && cgroup_attach(cg, pid) < 0) {
                r = airlock_error_set(err, -EIO, "cannot put QEMU into its cgroup");
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                goto fail;
        }
        if (write(go[1], "g", 1) != 1) {
                r = airlock_error_set(err, -EIO, "cannot start QEMU");
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                goto fail;
        }
        ready[1] = safe_close_fd(ready[1]);
        {
                char b = 0;
                ssize_t n;
                do
                        n = read(ready[0], &b, 1);
                while (n < 0 && errno == EINTR);
                if (n != 1) {
                        r = airlock_error_set(err, -EIO,
                                              "QEMU's process could not get a network "
                                              "namespace of its own (unshare(CLONE_NEWNET) "
                                              "needs CAP_SYS_ADMIN): the microVM is not started");
                        (void) kill(pid, SIGKILL);
                        (void) waitpid(pid, NULL, 0);
                        goto fail;
                }
        }
        for (int i = 0; i < CH_COUNT; i++)
                theirs[i] = safe_close_fd(theirs[i]);
        qmp[1] = safe_close_fd(qmp[1]);
        (void) close(go[0]);
        (void) close(go[1]);
        go[0] = go[1] = -EBADF;
        ready[0] = safe_close_fd(ready[0]);
        null_fd = safe_close_fd(null_fd);
        for (int i = 0; i < VMM_IMAGE_FILES; i++)
                img[i] = safe_close_fd(img[i]);

        /* A restored guest has its configuration already, in its memory. */
        r = cfg->restore ? 0 : send_bootcfg(ours[CH_CTL], cfg);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                r = airlock_error_set(err, r, "cannot send the guest its configuration: %s",
                                      strerror(-r));
                goto fail;
        }
        /* No host uid runs the guest's code: nobody's, should anything ask. */
        r = jail_adopt(pid, pidfd, ours[CH_CTL], ours[CH_OUT], ours[CH_ERR], 65534, cg, &j);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                goto fail;
        }
        /* QEMU is our child: jail_wait() reaps it. */
        j->adopted = false;
        j->has_pidns = false;
        *ret_sig_fd = ours[CH_SIG];
        *ret_files_fd = ours[CH_FILES];
        *ret_qmp_fd = qmp[0];
        *ret_jail = j;
        log_debug("msg=\"microVM %s\" name=%s pid=%d accel=%s",
                  cfg->restore ? "restored" : "started", cfg->name, (int) pid,
                  use_tcg() ? "tcg" : "kvm");
        return 0;

fail:
        for (int i = 0; i < VMM_IMAGE_FILES; i++)
                (void) safe_close_fd(img[i]);
        (void) safe_close_fd(pidfd);
        (void) safe_close_fd(null_fd);
        for (int i = 0; i < CH_COUNT; i++) {
                (void) safe_close_fd(ours[i]);
                (void) safe_close_fd(theirs[i]);
        }
        (void) safe_close_fd(go[0]);
        (void) safe_close_fd(go[1]);
        (void) safe_close_fd(ready[0]);
        (void) safe_close_fd(ready[1]);
        (void) safe_close_fd(qmp[0]);
        (void) safe_close_fd(qmp[1]);
        if (cg) {
                (void) cgroup_destroy(cg);
                (void) cgroup_free(cg);
        }
        return r;
}

int vm_interrupt(int sig_fd)
{
        ssize_t n;

        do
                n = send(sig_fd, "I", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        return n == 1 ? 0 : -errno;
}

int vm_exit_report(int sig_fd, int timeout_ms, struct vm_exit *ret)
{
        unsigned char rep[VM_EXIT_REPORT_BYTES];
        uint64_t deadline = now_ns() / 1000000u + (uint64_t) timeout_ms;
        size_t have = 0;

        for (;;) {
                struct pollfd pfd = { .fd = sig_fd, .events = POLLIN };
                uint64_t t = now_ns() / 1000000u;
                ssize_t n;
                int p;

                p = poll(&pfd, 1, t >= deadline ? 0 : (int) (deadline - t));
                if (p < 0 && errno == EINTR)
                        continue;
                if (p < 0)
                        return -errno;
                if (p == 0)
                        return -ENODATA;
                n = recv(sig_fd, rep + have, have ? sizeof(rep) - have : 1, MSG_DONTWAIT);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ENODATA; /* the VM ended without a report */
                if (have == 0 && rep[0] != 'X')
                        continue; /* not the report's start: skipped */
                have += (size_t) n;
                if (have == sizeof(rep)) {
                        uint32_t st;
                        memcpy(&st, rep + 1, 4);
                        ret->wait_status = (int) le32toh(st);
                        ret->oom = rep[5] != 0;
                        return 0;
                }
        }
}

int vm_machine_text(const struct vm_config *cfg, char **ret_text)
{
        _cleanup_free_ char *boot = malloc(BOOTCFG_MAX);
        struct vm_config c = *cfg;
        struct qemu_argv a = { 0 };
        size_t len = 0, blen = 0;
        char *text, *p;
        int r;

        if (!boot)
                return -ENOMEM;
        c.restore = false; /* the key is the same for the saved VM and its copies */
        r = build_argv(&c, &a);
        if (r >= 0)
                r = build_bootcfg(&c, boot, &blen);
        if (r < 0)
                return r;
        /* Not the kernel's command line: a restored guest booted long ago, and under TCG it
         * has the host's TSC frequency of the moment, which may drift. */
        for (size_t i = 0; i < a.n; i++)
                if (i == 0 || strcmp(a.argv[i - 1], "-append") != 0)
                        len += strlen(a.argv[i]) + 1;
        text = malloc(len + blen + 1);
        if (!text)
                return -ENOMEM;
        p = text;
        for (size_t i = 0; i < a.n; i++)
                if (i == 0 || strcmp(a.argv[i - 1], "-append") != 0)
                        p = stpcpy(p, a.argv[i]), *p++ = ' ';
        /* The configuration's strings, their NULs made newlines. */
        for (size_t i = 0; i < blen; i++)
                *p++ = boot[i] ? boot[i] : '\n';
        *p = '\0';
        *ret_text = text;
        return 0;
}
