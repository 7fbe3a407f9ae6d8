/* The proxy's listeners inside a sandbox's network namespace. A socket belongs to the namespace
 * of the thread that created it, for its whole life: so a short-lived thread enters the
 * sandbox's namespace (setns(2) on its pidfd), brings the loopback up, adds the forwarders'
 * addresses to it and creates the listening sockets, then ends; the daemon's other threads
 * accept on those sockets while staying in the host's namespace, where the upstream
 * connections are made. */
#include "egress-internal.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

struct netns_job {
        int pidfd;
        const struct sockaddr_in *addrs;
        size_t n;
        int *fds;
        int r;
        struct airlock_error err;
};

/* The pid behind a pidfd (the "Pid:" line of its fdinfo; -1 once the process is gone), for
 * kernels before 5.8, whose setns(2) takes only namespace fds. */
static int pidfd_pid(int pidfd, pid_t *ret)
{
        char path[64], text[2048];
        const char *p;
        ssize_t n;
        long pid;

        (void) snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        n = read_small_file_at(AT_FDCWD, path, text, sizeof(text));
        if (n < 0)
                return (int) n;
        p = strstr(text, "\nPid:");
        if (!p)
                return -EINVAL;
        pid = strtol(p + 5, NULL, 10);
        if (pid <= 0)
                return -ESRCH;
        *ret = (pid_t) pid;
        return 0;
}

static int netns_enter(int pidfd, struct airlock_error *err)
{
        _cleanup_close_ int nsfd = -EBADF;
        char path[64];
        pid_t pid = -1, again = -1;
        int r;

        if (setns(pidfd, CLONE_NEWNET) == 0)
                return 0;
        r = -errno;
        if (r != -EINVAL)
                return airlock_error_set(err, r, "cannot enter the sandbox's network namespace: %s",
                                         strerror(-r));
        r = pidfd_pid(pidfd, &pid);
        if (r < 0)
                return airlock_error_set(err, r,
                                         "cannot find the sandbox's process behind its pidfd: %s",
                                         strerror(-r));
        (void) snprintf(path, sizeof(path), "/proc/%d/ns/net", (int) pid);
        nsfd = open(path, O_RDONLY | O_CLOEXEC);
        if (nsfd < 0)
                return airlock_error_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
        /* The pid may have been reused between the two reads: the pidfd still naming it
         * alive after the open proves the namespace is the sandbox's. */
        r = pidfd_pid(pidfd, &again);
        if (r < 0 || again != pid)
                return airlock_error_set(err, -ESRCH, "the sandbox's process exited");
        if (setns(nsfd, CLONE_NEWNET) < 0)
                return airlock_error_set(err, -errno,
                                         "cannot enter the sandbox's network namespace: %s",
                                         strerror(errno));
        return 0;
}

static int lo_up(struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        struct ifreq ifr = { 0 };

        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return airlock_error_set(err, -errno, "socket: %s", strerror(errno));
        (void) strncpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name) - 1);
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return airlock_error_set(err, -errno,
                                         "cannot read the flags of the sandbox's lo: %s",
                                         strerror(errno));
        if (ifr.ifr_flags & IFF_UP)
                return 0;
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return airlock_error_set(err, -errno, "cannot bring the sandbox's lo up: %s",
                                         strerror(errno));
        return 0;
}

static void nl_attr(struct nlmsghdr *h, unsigned short type, const void *data, size_t len)
{
        struct rtattr *a = (struct rtattr *) ((char *) h + NLMSG_ALIGN(h->nlmsg_len));

        a->rta_type = type;
        a->rta_len = (unsigned short) RTA_LENGTH(len);
        memcpy(RTA_DATA(a), data, len);
        h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* `ip addr add ADDR/32 dev lo` over rtnetlink: the forwarder of an address rule listens at the
 * address itself. One that is there already is fine. */
static int lo_add_addr(int nl, unsigned ifindex, const struct in_addr *addr, uint32_t seq)
{
        union {
                struct nlmsghdr h;
                char b[NLMSG_SPACE(sizeof(struct ifaddrmsg)) + 2 * RTA_SPACE(4) + 64];
        } req = { 0 };
        union {
                struct nlmsghdr h;
                char b[512];
        } ack;
        struct ifaddrmsg *ifa;
        ssize_t n;

        req.h.nlmsg_len = NLMSG_LENGTH(sizeof(*ifa));
        req.h.nlmsg_type = RTM_NEWADDR;
        req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        req.h.nlmsg_seq = seq;
        ifa = NLMSG_DATA(&req.h);
        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = 32;
        ifa->ifa_scope = RT_SCOPE_HOST;
        ifa->ifa_index = ifindex;
        nl_attr(&req.h, IFA_LOCAL, addr, 4);
        nl_attr(&req.h, IFA_ADDRESS, addr, 4);
        if (send(nl, &req, req.h.nlmsg_len, 0) < 0)
                return -errno;
        n = recv(nl, &ack, sizeof(ack), 0);
        if (n < 0)
                return -errno;
        if ((size_t) n < NLMSG_LENGTH(sizeof(struct nlmsgerr)) || ack.h.nlmsg_type != NLMSG_ERROR)
                return -EPROTO;
        {
                const struct nlmsgerr *e = NLMSG_DATA(&ack.h);

                return e->error == -EEXIST ? 0 : e->error;
        }
}

/* Linux 6.3's IFLA_GSO_IPV4_MAX_SIZE and IFLA_GRO_IPV4_MAX_SIZE (newer than Debian 12's
 * headers); an older kernel ignores attributes past its IFLA_MAX. */
enum { LINK_GSO_IPV4_MAX_SIZE = 63, LINK_GRO_IPV4_MAX_SIZE = 64 };
/* The largest packet loopback takes in one piece (its tso_max_size). */
#define LO_BIG_TCP_SIZE 524280u

/* BIG TCP on the sandbox's loopback, which carries only the sandbox's connections to the
 * proxy: TCP hands lo packets of up to 512 KiB instead of 64 KiB, so a download through the
 * proxy costs that hop up to eight times fewer packets, each of which costs a few interrupt
 * enables that a virtual machine pays dearly for (docs/PERFORMANCE.md, "Egress through the
 * proxy"). Best effort: a kernel without it keeps 64 KiB, and the proxy works the same. */
static void lo_big_tcp(unsigned ifindex)
{
        union {
                struct nlmsghdr h;
                char b[NLMSG_SPACE(sizeof(struct ifinfomsg)) + 2 * RTA_SPACE(4)];
        } req = { 0 };
        union {
                struct nlmsghdr h;
                char b[512];
        } ack;
        _cleanup_close_ int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        struct ifinfomsg *ifi;
        uint32_t size = LO_BIG_TCP_SIZE;

        if (nl < 0)
                return;
        req.h.nlmsg_len = NLMSG_LENGTH(sizeof(*ifi));
        req.h.nlmsg_type = RTM_NEWLINK;
        req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        ifi = NLMSG_DATA(&req.h);
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = (int) ifindex;
        nl_attr(&req.h, LINK_GSO_IPV4_MAX_SIZE, &size, sizeof(size));
        nl_attr(&req.h, LINK_GRO_IPV4_MAX_SIZE, &size, sizeof(size));
        if (send(nl, &req, req.h.nlmsg_len, 0) == (ssize_t) req.h.nlmsg_len)
                (void) !recv(nl, &ack, sizeof(ack), 0); /* the answer does not matter */
}

static int lo_add_addrs(const struct sockaddr_in *addrs, size_t n, struct airlock_error *err)
{
        _cleanup_close_ int nl = -EBADF;
        struct sockaddr_nl local = { .nl_family = AF_NETLINK };
        unsigned ifindex;
        bool any = false;

        for (size_t i = 0; i < n && !any; i++)
                any = (ntohl(addrs[i].sin_addr.s_addr) >> 24) != 127;
        if (!any)
                return 0; /* all of 127.0.0.0/8 is the loopback's already */
        ifindex = if_nametoindex("lo");
        if (ifindex == 0)
                return airlock_error_set(err, -errno, "the sandbox has no lo: %s", strerror(errno));
        nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (nl < 0 || bind(nl, (struct sockaddr *) &local, sizeof(local)) < 0)
                return airlock_error_set(err, -errno, "rtnetlink: %s", strerror(errno));
        for (size_t i = 0; i < n; i++) {
                char text[INET_ADDRSTRLEN];
                int r;

                if ((ntohl(addrs[i].sin_addr.s_addr) >> 24) == 127)
                        continue;
                r = lo_add_addr(nl, ifindex, &addrs[i].sin_addr, (uint32_t) i + 1);
                if (r < 0)
                        return airlock_error_set(
                                err, r, "cannot add %s to the sandbox's lo: %s",
                                inet_ntop(AF_INET, &addrs[i].sin_addr, text, sizeof(text)),
                                strerror(-r));
        }
        return 0;
}

static int listen_on(const struct sockaddr_in *addr, struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        char text[INET_ADDRSTRLEN];
        int one = 1;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return airlock_error_set(err, -errno, "socket: %s", strerror(errno));
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (const struct sockaddr *) addr, sizeof(*addr)) < 0 || listen(fd, 128) < 0)
                return airlock_error_set(err, -errno,
                                         "cannot listen on %s:%u in the sandbox's network "
                                         "namespace: %s",
                                         inet_ntop(AF_INET, &addr->sin_addr, text, sizeof(text)),
                                         ntohs(addr->sin_port), strerror(errno));
        return TAKE_FD(fd);
}

static int netns_ino(struct stat *st)
{
        return stat("/proc/thread-self/ns/net", st) < 0 ? -errno : 0;
}

static int netns_work(struct netns_job *j)
{
        struct stat host, sandbox;
        int r;

        r = netns_ino(&host);
        if (r < 0)
                return airlock_error_set(
                        &j->err, r, "cannot read the daemon's network namespace: %s", strerror(-r));
        r = netns_enter(j->pidfd, &j->err);
        if (r < 0)
                return r;
        r = netns_ino(&sandbox);
        if (r < 0)
                return airlock_error_set(&j->err, r,
                                         "cannot read the sandbox's network namespace: %s",
                                         strerror(-r));
        /* Listeners in the daemon's own namespace would offer the proxy to the whole host. */
        if (host.st_dev == sandbox.st_dev && host.st_ino == sandbox.st_ino)
                return airlock_error_set(&j->err, -EPERM,
                                         "the sandbox shares the daemon's network namespace; "
                                         "the egress proxy needs the sandbox in its own "
                                         "(isolation mode 'namespaces')");
        r = lo_up(&j->err);
        if (r < 0)
                return r;
        lo_big_tcp(if_nametoindex("lo"));
        r = lo_add_addrs(j->addrs, j->n, &j->err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < j->n; i++) {
                r = listen_on(&j->addrs[i], &j->err);
                if (r < 0)
                        return r;
                j->fds[i] = r;
        }
        return 0;
}

static void *netns_thread(void *arg)
{
        struct netns_job *j = arg;

        j->r = netns_work(j);
        /* The thread ends here, and its namespace with it: nothing else runs in there. */
        return NULL;
}

int egress_netns_listen(int pidfd, const struct sockaddr_in *addrs, size_t n, int *ret_fds,
                        struct airlock_error *err)
{
        struct netns_job j = { .pidfd = pidfd, .addrs = addrs, .n = n, .fds = ret_fds };
        pthread_t t;
        int r;

        for (size_t i = 0; i < n; i++)
                ret_fds[i] = -EBADF;
        r = -pthread_create(&t, NULL, netns_thread, &j);
        if (r < 0)
                return airlock_error_set(err, r, "cannot start a thread: %s", strerror(-r));
        (void) pthread_join(t, NULL);
        if (j.r < 0) {
                for (size_t i = 0; i < n; i++)
                        ret_fds[i] = safe_close_fd(ret_fds[i]);
                if (err)
                        *err = j.err;
        }
        return j.r;
}
