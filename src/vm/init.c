/* airlock-vm-init: PID 1 of a microVM guest (src/vm/vm.h). Linked statically and packed into the
 * guest's initramfs with the few kernel modules it loads. It:
 *   1. mounts /dev, /proc and /sys of the initramfs and loads the modules /modules.list names
 *      (virtio-mmio, virtio-blk, virtio-console, erofs, in dependency order);
 *   2. waits for the root disk /dev/vda and the virtio-serial ports "airlock.ctl" (the runner's
 *      wire), "airlock.out" and "airlock.err" (its stdout and stderr), "airlock.sig" (a byte
 *      'I' = SIGINT to the runner) and "airlock.files" (the daemon's file requests);
 *   3. reads the boot configuration (bootcfg.h) from the control port, brings lo up and, when it
 *      says net=1, loads /modules-net.list (virtio-net) and gives the network device the
 *      guest's address and default route (vm.h: QEMU's user network, where the daemon's egress
 *      proxy is the only thing to reach);
 *   4. mounts the EROFS root read-only, a fresh tmpfs /work (bound at /home/user and /mnt/data
 *      too) and /tmp sized by the configuration, /proc (no /sys: the jail has none) and a /dev
 *      of the five harmless character devices, with the configuration's hosts lines added to a
 *      read-only copy of the image's /etc/hosts bound over it, and moves into it;
 *   5. runs the runner as it runs in the namespaces tier: its own session, stdin /dev/null,
 *      stdout and stderr the output ports, fd 3 one end of a socketpair (the runner's wire
 *      needs a socket: it passes fds with SCM_RIGHTS), no capabilities in any set,
 *      no_new_privs, an unprivileged uid, RLIMIT_NOFILE/NPROC and no core dumps;
 *   5b. forks the file server (files-server.c) on "airlock.files", as root with the runner's
 *      filesystem uid, out of the runner's reach;
 *   6. relays bytes between the control port and the socketpair (two children, one each way)
 *      and turns 'I' on the signal port into SIGINT, and 'R' there (a restored copy of a
 *      saved VM, src/vm/snapshot.h) into fresh kernel randomness and the host's time;
 *   7. when the runner exits, tells the daemon how on the signal port (vm.h, VM_EXIT_REPORT:
 *      its wait status, and whether the guest's OOM killer killed anything since it started),
 *      kills what is left and reboots: QEMU runs with -no-reboot, so the VM ends, and the
 *      daemon sees its VMM exit.
 * Anything that fails before the runner runs is printed on the console and ends the VM the
 * same way. Nothing here trusts the guest's user code: it runs as another uid and cannot
 * signal or trace init or the relays. */
#include "bootcfg.h"
#include "files-proto.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/random.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NEWROOT "/newroot"
#define RUNNER_PATH "/opt/airlock/airlock-runner"
#define WAIT_DEVICES_MS 10000

static void die(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        (void) fputs("airlock-vm-init: ", stderr);
        (void) vfprintf(stderr, fmt, ap);
        (void) fputc('\n', stderr);
        va_end(ap);
        sync();
        (void) reboot(RB_AUTOBOOT);
        _exit(1);
}

static uint64_t now_ms(void)
{
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

static void load_modules(const char *list)
{
        FILE *f = fopen(list, "re");
        char line[256];

        if (!f)
                return; /* a kernel with everything built in */
        while (fgets(line, sizeof(line), f)) {
                char path[300];
                int fd;

                line[strcspn(line, "\n")] = '\0';
                if (!line[0])
                        continue;
                (void) snprintf(path, sizeof(path), "/lib/modules/%s", line);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        die("cannot open the module %s: %s", path, strerror(errno));
                if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
                        die("cannot load the module %s: %s", path, strerror(errno));
                (void) close(fd);
        }
        (void) fclose(f);
}

static void if_set(int fd, const char *ifname, unsigned long req, const char *addr)
{
        struct ifreq ifr = { 0 };
        struct sockaddr_in *sin = (struct sockaddr_in *) &ifr.ifr_addr;

        (void) snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
        sin->sin_family = AF_INET;
        if (inet_pton(AF_INET, addr, &sin->sin_addr) != 1 || ioctl(fd, req, &ifr) < 0)
                die("cannot set %s of %s: %s", addr, ifname, strerror(errno));
}

static void if_up(int fd, const char *ifname)
{
        struct ifreq ifr = { 0 };

        (void) snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                die("cannot read the flags of %s: %s", ifname, strerror(errno));
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                die("cannot bring %s up: %s", ifname, strerror(errno));
}

/* The name of the network device that is not lo, into name ("" while there is none). */
static void find_nic(char *name, size_t size)
{
        DIR *d = opendir("/sys/class/net");
        struct dirent *e;

        name[0] = '\0';
        if (!d)
                return;
        while ((e = readdir(d)))
                if (e->d_name[0] != '.' && strcmp(e->d_name, "lo") != 0) {
                        (void) snprintf(name, size, "%s", e->d_name);
                        break;
                }
        (void) closedir(d);
}

/* lo up, always; with nic, the virtio-net device too: the guest's address on QEMU's user
 * network (src/vm/vm.h) and its default route through the host address, which is the only way
 * out and leads only into QEMU's network namespace. */
static void network_up(bool nic, uint64_t deadline)
{
        char ifname[IF_NAMESIZE + 1];
        struct rtentry rt = { 0 };
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                die("socket: %s", strerror(errno));
        if_up(fd, "lo");
        if (!nic) {
                (void) close(fd);
                return;
        }
        load_modules("/modules-net.list");
        for (find_nic(ifname, sizeof(ifname)); !ifname[0]; find_nic(ifname, sizeof(ifname))) {
                if (now_ms() > deadline)
                        die("the network device did not appear");
                (void) usleep(500);
        }
        if_set(fd, ifname, SIOCSIFADDR, VM_GUEST_ADDR);
        if_set(fd, ifname, SIOCSIFNETMASK, "255.255.255.0");
        if_up(fd, ifname);
        ((struct sockaddr_in *) &rt.rt_dst)->sin_family = AF_INET;
        ((struct sockaddr_in *) &rt.rt_genmask)->sin_family = AF_INET;
        ((struct sockaddr_in *) &rt.rt_gateway)->sin_family = AF_INET;
        if (inet_pton(AF_INET, VM_GUEST_HOST, &((struct sockaddr_in *) &rt.rt_gateway)->sin_addr) !=
            1)
                die("bad gateway address");
        rt.rt_flags = RTF_UP | RTF_GATEWAY;
        if (ioctl(fd, SIOCADDRT, &rt) < 0)
                die("cannot add the default route via %s: %s", VM_GUEST_HOST, strerror(errno));
        (void) close(fd);
}

/* The image's /etc/hosts with extra appended, as a read-only file bound over it (the root is
 * read-only EROFS; the copy lives in the initramfs, which the runner never sees). */
static void hosts_add(const char *extra)
{
        static char text[BOOTCFG_MAX + 4096];
        size_t len = 0;
        int fd = open(NEWROOT "/etc/hosts", O_RDONLY | O_CLOEXEC);

        if (fd >= 0) {
                ssize_t n;
                while (len < sizeof(text) - BOOTCFG_MAX - 1 &&
                       (n = read(fd, text + len, sizeof(text) - BOOTCFG_MAX - 1 - len)) > 0)
                        len += (size_t) n;
                (void) close(fd);
        }
        if (len > 0 && text[len - 1] != '\n')
                text[len++] = '\n';
        (void) snprintf(text + len, sizeof(text) - len, "%s", extra);
        len += strlen(text + len);
        fd = open("/hosts", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, text, len) != (ssize_t) len || fchmod(fd, 0644) < 0 ||
            close(fd) < 0)
                die("cannot write the guest's hosts file: %s", strerror(errno));
        if (mount("/hosts", NEWROOT "/etc/hosts", NULL, MS_BIND, NULL) < 0 ||
            mount(NULL, NEWROOT "/etc/hosts", NULL,
                  MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                die("cannot put the hosts file in place: %s", strerror(errno));
}

/* The /dev node of the virtio-serial port called name, or "" while it is not there. */
static void find_port(const char *name, char *dev, size_t size)
{
        DIR *d = opendir("/sys/class/virtio-ports");
        struct dirent *e;

        dev[0] = '\0';
        if (!d)
                return;
        while ((e = readdir(d))) {
                char path[512], got[128] = "";
                FILE *f;

                if (e->d_name[0] == '.')
                        continue;
                (void) snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                if (fgets(got, sizeof(got), f))
                        got[strcspn(got, "\n")] = '\0';
                (void) fclose(f);
                if (strcmp(got, name) == 0) {
                        (void) snprintf(dev, size, "/dev/%s", e->d_name);
                        break;
                }
        }
        (void) closedir(d);
}

static int open_port(const char *name, int flags, uint64_t deadline)
{
        char dev[300];

        for (;;) {
                find_port(name, dev, sizeof(dev));
                if (dev[0]) {
                        int fd = open(dev, flags | O_CLOEXEC);
                        if (fd >= 0)
                                return fd;
                        if (errno != ENOENT)
                                die("cannot open the port %s (%s): %s", name, dev, strerror(errno));
                }
                if (now_ms() > deadline)
                        die("the virtio-serial port %s did not appear", name);
                (void) usleep(500);
        }
}

static void read_full(int fd, void *buf, size_t len)
{
        char *p = buf;

        while (len > 0) {
                ssize_t n = read(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        die("the control port closed before the boot configuration");
                p += n;
                len -= (size_t) n;
        }
}

static void mount_or_die(const char *src, const char *dst, const char *type, unsigned long flags,
                         const char *data)
{
        if (mkdir(dst, 0755) < 0 && errno != EEXIST && errno != EROFS)
                die("cannot make %s: %s", dst, strerror(errno));
        if (mount(src, dst, type, flags, data) < 0)
                die("cannot mount %s on %s: %s", type, dst, strerror(errno));
}

static void make_dev(void)
{
        static const struct {
                const char *name;
                unsigned minor;
        } nodes[] = {
                { "null", 3 }, { "zero", 5 }, { "full", 7 }, { "random", 8 }, { "urandom", 9 }
        };

        mount_or_die("dev", NEWROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
                     "size=64k,nr_inodes=64,mode=0755");
        for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
                char path[64];
                (void) snprintf(path, sizeof(path), NEWROOT "/dev/%s", nodes[i].name);
                if (mknod(path, S_IFCHR | 0666, makedev(1, nodes[i].minor)) < 0 ||
                    chmod(path, 0666) < 0) /* past the umask */
                        die("cannot make %s: %s", path, strerror(errno));
        }
        (void) symlink("/proc/self/fd", NEWROOT "/dev/fd");
        mount_or_die("shm", NEWROOT "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     "size=16m,mode=1777");
}

/* One direction of the control relay: blocking copies until either end closes. */
static void relay(int from, int to)
{
        char buf[65536];

        for (;;) {
                ssize_t n = read(from, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        _exit(0);
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(to, buf + off, (size_t) (n - off));
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w <= 0)
                                _exit(0);
                        off += w;
                }
        }
}

static pid_t spawn_relay(int from, int to)
{
        pid_t pid = fork();

        if (pid < 0)
                die("cannot fork a relay: %s", strerror(errno));
        if (pid == 0)
                relay(from, to);
        return pid;
}

/* A restored copy of a saved VM (src/vm/snapshot.h): its kernel's random generator is its
 * template's until it is reseeded, and its clock stopped when the template was saved. The
 * daemon's message on the signal port: 'R', SNAP_SEED_BYTES of fresh randomness, then the
 * host's CLOCK_REALTIME as a little-endian 64-bit count of nanoseconds. Init mixes the bytes
 * into the input pool, credits them (RNDADDENTROPY), forces a reseed of the generator every
 * reader draws from (RNDRESEEDCRNG: without it the kernel would go on with the old key until
 * its next periodic reseed), sets the clock and answers 'r' (or 'e' when one step failed),
 * before the daemon lets the runner reseed Python's generators from it. */
#define SNAP_SEED_BYTES 32
#define SNAP_MSG_BYTES (1 + SNAP_SEED_BYTES + 8)

static void reseed_and_set_clock(int sig, const unsigned char *msg)
{
        struct {
                struct rand_pool_info info;
                unsigned char buf[SNAP_SEED_BYTES];
        } e;
        uint64_t ns_le, ns;
        struct timespec ts;
        bool ok = true;

        e.info.entropy_count = SNAP_SEED_BYTES * 8;
        e.info.buf_size = SNAP_SEED_BYTES;
        memcpy(e.buf, msg + 1, SNAP_SEED_BYTES);
        memcpy(&ns_le, msg + 1 + SNAP_SEED_BYTES, 8);
        ns = le64toh(ns_le);
        {
                int fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
                if (fd < 0 || ioctl(fd, RNDADDENTROPY, &e.info) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0)
                        ok = false;
                if (fd >= 0)
                        (void) close(fd);
        }
        ts.tv_sec = (time_t) (ns / 1000000000u);
        ts.tv_nsec = (long) (ns % 1000000000u);
        if (ns && clock_settime(CLOCK_REALTIME, &ts) < 0)
                ok = false;
        if (!ok)
                (void) fprintf(stderr, "airlock-vm-init: cannot reseed or set the clock: %s\n",
                               strerror(errno));
        (void) write(sig, ok ? "r" : "e", 1);
}

/* The sandbox's seccomp filter, compiled by `airlock profile build` as the jail compiles it
 * (src/jail/seccomp.h) and put into the image: loaded last before the runner is executed. */
#define SECCOMP_PATH "/opt/airlock/seccomp.bpf"
#define SECCOMP_MAX_INSNS 4096
static struct sock_filter seccomp_insns[SECCOMP_MAX_INSNS];

static struct sock_fprog read_seccomp_or_die(void)
{
        struct sock_fprog prog = { 0 };
        size_t off = 0;
        int fd = open(SECCOMP_PATH, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                die("the image has no seccomp filter (%s: %s): rebuild it with `airlock profile "
                    "build`",
                    SECCOMP_PATH, strerror(errno));
        for (;;) {
                ssize_t n = read(fd, (char *) seccomp_insns + off, sizeof(seccomp_insns) - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        die("cannot read %s: %s", SECCOMP_PATH, strerror(errno));
                if (n == 0)
                        break;
                off += (size_t) n;
                if (off == sizeof(seccomp_insns))
                        die("%s is larger than %d instructions", SECCOMP_PATH, SECCOMP_MAX_INSNS);
        }
        (void) close(fd);
        if (off == 0 || off % sizeof(struct sock_filter) != 0)
                die("%s is not a compiled filter (%zu bytes)", SECCOMP_PATH, off);
        prog.len = (unsigned short) (off / sizeof(struct sock_filter));
        prog.filter = seccomp_insns;
        return prog;
}

static void drop_and_exec(const struct bootcfg *cfg, const struct sock_fprog *filter, int sock,
                          int out, int err)
{
        /* The jail's limits (src/jail/caps.c), the workspace bounding a file's size. */
        const struct {
                int resource;
                rlim_t value;
        } limits[] = {
                { RLIMIT_CORE, 0 },
                { RLIMIT_NOFILE, cfg->nofile },
                { RLIMIT_NPROC, cfg->nproc },
                { RLIMIT_FSIZE, cfg->work_bytes ? cfg->work_bytes : RLIM_INFINITY },
                { RLIMIT_MEMLOCK, 64 * 1024 },
                { RLIMIT_MSGQUEUE, 0 },
                { RLIMIT_RTPRIO, 0 },
        };
        char *argv[] = { "airlock-runner", NULL };
        int null_fd;

        if (setsid() < 0)
                _exit(120);
        null_fd = open("/dev/null", O_RDWR);
        if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 ||
            dup2(sock, 3) < 0)
                _exit(121);
        if (syscall(SYS_close_range, 4u, ~0u, 0u) < 0)
                _exit(122);
        for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
                struct rlimit rl = { limits[i].value, limits[i].value };
                if (setrlimit(limits[i].resource, &rl) < 0)
                        _exit(123);
        }
        for (int cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        _exit(124);
        if (setgroups(0, NULL) < 0 || setresgid(cfg->uid, cfg->uid, cfg->uid) < 0 ||
            setresuid(cfg->uid, cfg->uid, cfg->uid) < 0)
                _exit(125);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0) < 0)
                _exit(126);
        if (chdir("/work") < 0)
                _exit(127);
        /* Last: from here the runner lives under the jail's own syscall policy. */
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, filter) < 0)
                _exit(129);
        execve(RUNNER_PATH, argv, (char *const *) cfg->env);
        _exit(128);
}

/* The guest kernel's count of OOM kills (/proc/vmstat's oom_kill), or 0 when unreadable. */
static unsigned long long oom_kills(void)
{
        char buf[8192], *p;
        ssize_t n;
        int fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        (void) close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        p = strstr(buf, "\noom_kill ");
        return p ? strtoull(p + sizeof("\noom_kill ") - 1, NULL, 10) : 0;
}

/* How the runner ended, for the daemon (vm.h, VM_EXIT_REPORT): 'X', its wait status (32 bits,
 * little-endian), 1 when the guest's OOM killer killed something since it started. */
static void report_exit(int sig, int status, unsigned long long oom_before)
{
        unsigned char rep[VM_EXIT_REPORT_BYTES] = { 'X' };
        uint32_t st = htole32((uint32_t) status);

        memcpy(rep + 1, &st, 4);
        rep[5] = oom_kills() > oom_before;
        (void) write(sig, rep, sizeof(rep));
}

int main(void)
{
        static char cfgbuf[BOOTCFG_MAX];
        struct bootcfg cfg;
        const char *why = NULL;
        char opts[128];
        uint32_t len_le, len;
        uint64_t deadline;
        int ctl, out, err, sig, files, sv[2], sfd;
        unsigned char msg[SNAP_MSG_BYTES];
        size_t msg_len = 0;
        pid_t runner;
        sigset_t mask;
        unsigned long long oom_before;
        struct sock_fprog filter;

        (void) mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
        if (fcntl(2, F_GETFD) < 0) {
                /* The initramfs has no /dev/console of its own for the kernel to open. */
                int con = open("/dev/console", O_RDWR);
                if (con >= 0 && con <= 2) {
                        (void) dup2(con, 0);
                        (void) dup2(con, 1);
                        (void) dup2(con, 2);
                }
        }
        (void) mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        (void) mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        load_modules("/modules.list");

        deadline = now_ms() + WAIT_DEVICES_MS;
        ctl = open_port("airlock.ctl", O_RDWR, deadline);
        out = open_port("airlock.out", O_WRONLY, deadline);
        err = open_port("airlock.err", O_WRONLY, deadline);
        sig = open_port("airlock.sig", O_RDWR | O_NONBLOCK, deadline);
        files = open_port(VMF_PORT_NAME, O_RDWR, deadline);

        read_full(ctl, &len_le, sizeof(len_le));
        len = le32toh(len_le);
        if (len > sizeof(cfgbuf))
                die("the boot configuration is too large (%u bytes)", len);
        read_full(ctl, cfgbuf, len);
        if (bootcfg_parse(cfgbuf, len, &cfg, &why) < 0)
                die("bad boot configuration: %s", why);
        network_up(cfg.net, deadline);

        while (access("/dev/vda", F_OK) < 0) {
                if (now_ms() > deadline)
                        die("the root disk /dev/vda did not appear");
                (void) usleep(500);
        }
        mount_or_die("/dev/vda", NEWROOT, "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID, NULL);
        (void) snprintf(opts, sizeof(opts), "size=%llu,mode=0700,uid=%u,gid=%u",
                        (unsigned long long) cfg.work_bytes, cfg.uid, cfg.uid);
        mount_or_die("work", NEWROOT "/work", "tmpfs", MS_NOSUID | MS_NODEV, opts);
        /* E2B's and OpenAI's names for the workspace: the same directory, so that code there
         * finds itself there (as the jail binds them, src/jail/mount.c). */
        mount_or_die(NEWROOT "/work", NEWROOT "/home/user", "bind", MS_BIND, NULL);
        mount_or_die(NEWROOT "/work", NEWROOT "/mnt/data", "bind", MS_BIND, NULL);
        (void) snprintf(opts, sizeof(opts), "size=%llu,mode=1777",
                        (unsigned long long) cfg.tmp_bytes);
        mount_or_die("tmp", NEWROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts);
        mount_or_die("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     "hidepid=2");
        make_dev();
        if (cfg.hosts)
                hosts_add(cfg.hosts);
        if (chdir(NEWROOT) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
            chdir("/") < 0)
                die("cannot move into the root: %s", strerror(errno));
        filter = read_seccomp_or_die();
        /* The jail's names (src/jail/spawn.c): nothing of the host's, nor the kernel's "(none)". */
        if (sethostname("sandbox", 7) < 0 || setdomainname("sandbox", 7) < 0)
                die("cannot set the hostname: %s", strerror(errno));

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                die("socketpair: %s", strerror(errno));
        (void) sigemptyset(&mask);
        (void) sigaddset(&mask, SIGCHLD);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);
        sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                die("signalfd: %s", strerror(errno));

        /* The file server (files-proto.h): the guest's root, the runner's fsuid, in /work. */
        {
                pid_t fs = fork();
                if (fs < 0)
                        die("cannot fork the file server: %s", strerror(errno));
                if (fs == 0) {
                        (void) sigprocmask(SIG_UNBLOCK, &mask, NULL);
                        (void) close(ctl);
                        (void) close(out);
                        (void) close(err);
                        (void) close(sig);
                        (void) close(sv[0]);
                        (void) close(sv[1]);
                        vmf_serve(files, cfg.uid, "/work");
                }
                (void) close(files);
        }

        oom_before = oom_kills();
        runner = fork();
        if (runner < 0)
                die("cannot fork the runner: %s", strerror(errno));
        if (runner == 0) {
                (void) sigprocmask(SIG_UNBLOCK, &mask, NULL);
                drop_and_exec(&cfg, &filter, sv[1], out, err);
        }
        (void) close(sv[1]);
        (void) spawn_relay(ctl, sv[0]);
        (void) spawn_relay(sv[0], ctl);
        (void) close(sv[0]);

        for (;;) {
                struct pollfd pfd[2] = { { sfd, POLLIN, 0 }, { sig, POLLIN, 0 } };
                int status;
                pid_t pid;

                if (poll(pfd, 2, -1) < 0 && errno != EINTR)
                        die("poll: %s", strerror(errno));
                if (pfd[1].revents & POLLIN) {
                        unsigned char b[64];
                        ssize_t n = read(sig, b, sizeof(b));
                        for (ssize_t i = 0; i < n; i++) {
                                if (msg_len > 0) {
                                        msg[msg_len++] = b[i];
                                        if (msg_len == SNAP_MSG_BYTES) {
                                                reseed_and_set_clock(sig, msg);
                                                msg_len = 0;
                                        }
                                } else if (b[i] == 'I') {
                                        (void) kill(runner, SIGINT);
                                } else if (b[i] == 'R') {
                                        msg[msg_len++] = b[i];
                                }
                        }
                }
                if (pfd[0].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) > 0)
                                ;
                }
                while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                        if (pid != runner)
                                continue;
                        if (WIFEXITED(status))
                                (void) fprintf(stderr, "airlock-vm-init: the runner exited: %d\n",
                                               WEXITSTATUS(status));
                        else if (WIFSIGNALED(status))
                                (void) fprintf(stderr,
                                               "airlock-vm-init: the runner was killed "
                                               "by signal %d\n",
                                               WTERMSIG(status));
                        report_exit(sig, status, oom_before);
                        (void) kill(-1, SIGKILL);
                        sync();
                        (void) reboot(RB_AUTOBOOT);
                        _exit(0);
                }
        }
}
