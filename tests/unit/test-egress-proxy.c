/* Unit tests of the egress proxy engine (src/egress/egress.h). Each test makes its own lab: the
 * test process moves into a new network and mount namespace (its "host", with an /etc/hosts of
 * its own bound over the real one), a forked child sits in a further network namespace (the
 * "sandbox"), the proxy's session is opened into it, upstream servers listen on the lab host's
 * loopback and clients connect from inside the sandbox. No traffic leaves the namespaces the
 * test made. Needs root; skipped, saying why, without it. The HTTP parser tests need nothing. */
#include "egress/egress-internal.h"
#include "egress/egress.h"
#include "egress/http-parse.h"
#include "egress/policy.h"

#include "base/cleanup.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOSTS_TEXT                                                                                 \
        "127.0.0.1 localhost\n"                                                                    \
        "10.9.8.2 db.test\n"                                                                       \
        "169.254.169.254 meta.test\n"                                                              \
        "10.9.8.3 mixed.test\n"                                                                    \
        "127.0.0.9 loop.test\n"                                                                    \
        "169.254.169.254 mixed.test\n"
#define LITERAL_ADDR "10.9.8.7"

/* ---- the lab ---- */

struct sandbox {
        pid_t pid;
        int pidfd;
};

static struct egress *lab_egress;

static void lab_require_root(void)
{
        if (geteuid() != 0)
                cr_skip_test("the egress proxy tests need root (namespaces, setns), euid %d",
                             (int) geteuid());
}

static void if_up(const char *name, const char *addr)
{
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = { 0 };

        cr_assert_geq(fd, 0);
        (void) snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
        if (addr) {
                struct sockaddr_in *sin = (struct sockaddr_in *) &ifr.ifr_addr;

                sin->sin_family = AF_INET;
                cr_assert_eq(inet_pton(AF_INET, addr, &sin->sin_addr), 1);
                cr_assert_eq(ioctl(fd, SIOCSIFADDR, &ifr), 0, "SIOCSIFADDR %s: %s", name,
                             strerror(errno));
                inet_pton(AF_INET, "255.255.255.255", &sin->sin_addr);
                cr_assert_eq(ioctl(fd, SIOCSIFNETMASK, &ifr), 0, "%s", strerror(errno));
        }
        cr_assert_eq(ioctl(fd, SIOCGIFFLAGS, &ifr), 0, "%s", strerror(errno));
        ifr.ifr_flags |= IFF_UP;
        cr_assert_eq(ioctl(fd, SIOCSIFFLAGS, &ifr), 0, "%s", strerror(errno));
}

/* The test process becomes the lab's host: its own network namespace (loopback up, and
 * LITERAL_ADDR and the named hosts' addresses on it) and its own /etc/hosts. */
static void lab_host(void)
{
        char path[] = "/tmp/egress-test-hosts-XXXXXX";
        int fd;

        lab_require_root();
        if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0)
                cr_skip_test("cannot make network and mount namespaces: %s", strerror(errno));
        cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
        fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, HOSTS_TEXT, strlen(HOSTS_TEXT)), (ssize_t) strlen(HOSTS_TEXT));
        (void) close(fd);
        cr_assert_eq(mount(path, "/etc/hosts", NULL, MS_BIND, NULL), 0, "%s", strerror(errno));
        (void) unlink(path);
        if_up("lo", NULL);
        if_up("lo:egt", LITERAL_ADDR);
        /* The named hosts: not loopback, which a name reaches only with an address rule. */
        if_up("lo:egd", "10.9.8.2");
        if_up("lo:egm", "10.9.8.3");
}

/* A child in a network namespace of its own, which does nothing until killed (or until the
 * test process dies: PR_SET_PDEATHSIG). */
static struct sandbox sandbox_start(void)
{
        int ready[2];
        struct sandbox sb;
        char c;

        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        sb.pid = fork();
        cr_assert_geq(sb.pid, 0);
        if (sb.pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (unshare(CLONE_NEWNET) < 0)
                        _exit(1);
                (void) !write(ready[1], "x", 1);
                for (;;)
                        (void) pause();
        }
        (void) close(ready[1]);
        cr_assert_eq(read(ready[0], &c, 1), 1, "the sandbox child did not start");
        (void) close(ready[0]);
        sb.pidfd = (int) syscall(SYS_pidfd_open, sb.pid, 0);
        cr_assert_geq(sb.pidfd, 0, "pidfd_open: %s", strerror(errno));
        return sb;
}

static void sandbox_stop(struct sandbox *sb)
{
        (void) syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
        (void) waitpid(sb->pid, NULL, 0);
        (void) close(sb->pidfd);
}

/* ---- events ---- */

struct seen {
        enum egress_event_type type;
        char via[16], host[256], address[64], reason[400], profile[64];
        uint16_t port;
        uint64_t bytes_in, bytes_out;
};

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seen seen[512];
static size_t n_seen;

static void on_event(void *userdata, const struct egress_event *ev)
{
        struct seen *s;

        (void) userdata;
        (void) pthread_mutex_lock(&seen_lock);
        if (n_seen < sizeof(seen) / sizeof(seen[0])) {
                s = &seen[n_seen++];
                s->type = ev->type;
                s->port = ev->port;
                s->bytes_in = ev->bytes_in;
                s->bytes_out = ev->bytes_out;
                (void) snprintf(s->via, sizeof(s->via), "%s", ev->via);
                (void) snprintf(s->host, sizeof(s->host), "%s", ev->host);
                (void) snprintf(s->address, sizeof(s->address), "%s",
                                ev->address ? ev->address : "");
                (void) snprintf(s->reason, sizeof(s->reason), "%s", ev->reason ? ev->reason : "");
                (void) snprintf(s->profile, sizeof(s->profile), "%s", ev->profile);
        }
        (void) pthread_mutex_unlock(&seen_lock);
}

/* The first event of type for host:port, copied into ret. */
static bool seen_find(enum egress_event_type type, const char *host, uint16_t port,
                      struct seen *ret)
{
        bool found = false;

        (void) pthread_mutex_lock(&seen_lock);
        for (size_t i = 0; i < n_seen && !found; i++)
                if (seen[i].type == type && strcmp(seen[i].host, host) == 0 &&
                    seen[i].port == port) {
                        *ret = seen[i];
                        found = true;
                }
        (void) pthread_mutex_unlock(&seen_lock);
        return found;
}

/* ---- upstream servers on the lab host ---- */

enum srv_kind {
        SRV_ECHO,        /* echoes until EOF, then closes */
        SRV_HTTP,        /* reads a head, keeps it, answers "hello" */
        SRV_SOURCE,      /* sends SOURCE_BYTES, then closes */
        SRV_DEAF,        /* half-closes at once and never reads */
        SRV_FLOOD,       /* reads a byte, then sends until the connection fails */
        SRV_LATE_READER, /* reads only once told (go): what, until EOF or a reset, in body */
        SRV_LATE_ANSWER, /* reads until EOF, answers REJECT_ANSWER 600 ms later and closes */
};
#define REJECT_ANSWER "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n"
#define SOURCE_BYTES (64u * 1024u)

struct srv {
        int fd;
        enum srv_kind kind;
        uint16_t port;
        pthread_mutex_t lock;
        int requests;
        size_t body;
        char head[4096];
        int go; /* an eventfd: SRV_LATE_READER reads once the test writes to it */
};

struct srv_conn {
        struct srv *srv;
        int fd;
};

/* Reads a request (its body whole, by Content-Length), answers "hello" and closes. A request
 * that came right behind it (pipelined) is counted too, as a server that would answer it. */
static void srv_http(struct srv *srv, int fd)
{
        static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                                     "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
                                     "\r\nhello";
        char buf[16384], sink[4096];
        const char *cl, *end;
        size_t len = 0, body, want;
        int requests = 0;
        ssize_t n;

        while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) {
                len += (size_t) n;
                buf[len] = '\0';
                if (strstr(buf, "\r\n\r\n"))
                        break;
        }
        buf[len] = '\0';
        cl = strcasestr(buf, "\r\nContent-Length: ");
        end = strstr(buf, "\r\n\r\n");
        body = end ? len - (size_t) (end + 4 - buf) : 0;
        want = cl ? strtoul(cl + 18, NULL, 10) : 0;
        while (body < want && (n = read(fd, sink, sizeof(sink))) > 0)
                body += (size_t) n;
        if (want == 0) {
                struct pollfd p = { .fd = fd, .events = POLLIN };

                /* Whatever else arrives soon after is read as well. */
                while (len < sizeof(buf) - 1 && poll(&p, 1, 100) == 1 &&
                       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
                        len += (size_t) n;
                buf[len] = '\0';
        }
        for (const char *p = buf; (p = strstr(p, " HTTP/1.")); p++)
                requests++;
        (void) pthread_mutex_lock(&srv->lock);
        srv->requests += requests;
        srv->body = body;
        (void) snprintf(srv->head, sizeof(srv->head), "%.*s", (int) len, buf);
        (void) pthread_mutex_unlock(&srv->lock);
        (void) !write(fd, answer, sizeof(answer) - 1);
}

static void *srv_conn_main(void *arg)
{
        struct srv_conn *sc = arg;
        struct srv *srv = sc->srv;
        char buf[16384];
        ssize_t n;

        if (srv->kind == SRV_ECHO) {
                while ((n = read(sc->fd, buf, sizeof(buf))) > 0)
                        if (write(sc->fd, buf, (size_t) n) != n)
                                break;
        } else if (srv->kind == SRV_FLOOD) {
                memset(buf, 'f', sizeof(buf));
                if (read(sc->fd, buf, 1) == 1)
                        while (send(sc->fd, buf, sizeof(buf), MSG_NOSIGNAL) > 0)
                                ;
        } else if (srv->kind == SRV_LATE_ANSWER) {
                while (read(sc->fd, buf, sizeof(buf)) > 0)
                        ;
                (void) usleep(600 * 1000);
                (void) !write(sc->fd, REJECT_ANSWER, strlen(REJECT_ANSWER));
        } else if (srv->kind == SRV_LATE_READER) {
                size_t got = 0;
                uint64_t go;

                (void) !read(srv->go, &go, sizeof(go));
                while ((n = read(sc->fd, buf, sizeof(buf))) > 0)
                        got += (size_t) n;
                (void) pthread_mutex_lock(&srv->lock);
                srv->body = got;
                srv->requests++;
                (void) pthread_mutex_unlock(&srv->lock);
        } else if (srv->kind == SRV_DEAF) {
                (void) shutdown(sc->fd, SHUT_WR);
                (void) sleep(60); /* the test's process ends first */
        } else if (srv->kind == SRV_SOURCE) {
                memset(buf, 'x', sizeof(buf));
                for (size_t sent = 0; sent < SOURCE_BYTES; sent += sizeof(buf))
                        if (send(sc->fd, buf, sizeof(buf), MSG_NOSIGNAL) < 0)
                                break;
        } else {
                srv_http(srv, sc->fd);
        }
        (void) close(sc->fd);
        free(sc);
        return NULL;
}

static void *srv_main(void *arg)
{
        struct srv *srv = arg;

        for (;;) {
                int fd = accept4(srv->fd, NULL, NULL, SOCK_CLOEXEC);
                struct srv_conn *sc;
                pthread_t t;

                if (fd < 0)
                        continue;
                sc = malloc(sizeof(*sc));
                sc->srv = srv;
                sc->fd = fd;
                if (pthread_create(&t, NULL, srv_conn_main, sc) == 0)
                        (void) pthread_detach(t);
        }
        return NULL;
}

/* A server on ip (v4 or v6) at an ephemeral port of the lab host. */
static struct srv *srv_start(const char *ip, enum srv_kind kind)
{
        struct sockaddr_storage ss = { 0 };
        socklen_t len;
        struct srv *srv = calloc(1, sizeof(*srv));
        pthread_t t;

        cr_assert_not_null(srv);
        srv->kind = kind;
        (void) pthread_mutex_init(&srv->lock, NULL);
        if (strchr(ip, ':')) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *) &ss;

                a->sin6_family = AF_INET6;
                cr_assert_eq(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
                len = sizeof(*a);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *) &ss;

                a->sin_family = AF_INET;
                cr_assert_eq(inet_pton(AF_INET, ip, &a->sin_addr), 1);
                len = sizeof(*a);
        }
        srv->go = eventfd(0, EFD_CLOEXEC);
        cr_assert_geq(srv->go, 0);
        srv->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(srv->fd, 0);
        cr_assert_eq(bind(srv->fd, (struct sockaddr *) &ss, len), 0, "bind %s: %s", ip,
                     strerror(errno));
        cr_assert_eq(listen(srv->fd, 64), 0);
        cr_assert_eq(getsockname(srv->fd, (struct sockaddr *) &ss, &len), 0);
        srv->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *) &ss)->sin_port
                                                  : ((struct sockaddr_in6 *) &ss)->sin6_port);
        cr_assert_eq(pthread_create(&t, NULL, srv_main, srv), 0);
        (void) pthread_detach(t);
        return srv;
}

/* ---- clients inside the sandbox ---- */

struct dial {
        int pidfd;
        const char *ip;
        uint16_t port;
        int fd;
        int err;
};

static void *dial_main(void *arg)
{
        struct dial *d = arg;
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(d->port) };
        struct timeval tv = { .tv_sec = 5 };

        /* This thread's namespace becomes the sandbox's; its socket stays there. */
        if (setns(d->pidfd, CLONE_NEWNET) < 0 || inet_pton(AF_INET, d->ip, &a.sin_addr) != 1) {
                d->err = errno;
                return NULL;
        }
        d->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        (void) setsockopt(d->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void) setsockopt(d->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(d->fd, (struct sockaddr *) &a, sizeof(a)) < 0) {
                d->err = errno;
                (void) close(d->fd);
                d->fd = -1;
        }
        return NULL;
}

/* An rtnetlink socket of the network namespace of pidfd (-1: the caller's own). */
static void *netlink_main(void *arg)
{
        int *fd = arg;

        if (*fd < 0 || setns(*fd, CLONE_NEWNET) == 0)
                *fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        else
                *fd = -1;
        return NULL;
}

/* The gso_ipv4_max_size of lo (ifindex 1) in the namespace of pidfd (-1: the caller's own);
 * -1 when the kernel does not have it (before Linux 6.3). */
static long lo_gso_ipv4_max_size(int pidfd)
{
        struct {
                struct nlmsghdr h;
                struct ifinfomsg ifi;
        } req = { .h = { .nlmsg_len = sizeof(req),
                         .nlmsg_type = RTM_GETLINK,
                         .nlmsg_flags = NLM_F_REQUEST },
                  .ifi = { .ifi_family = AF_UNSPEC, .ifi_index = 1 } };
        static union {
                struct nlmsghdr h;
                char b[16384];
        } answer;
        const struct nlmsghdr *h = &answer.h;
        int nl = pidfd;
        pthread_t t;
        ssize_t n;
        long size = -1;

        cr_assert_eq(pthread_create(&t, NULL, netlink_main, &nl), 0);
        (void) pthread_join(t, NULL);
        cr_assert_geq(nl, 0, "no rtnetlink socket in the namespace");
        cr_assert_eq(send(nl, &req, sizeof(req), 0), (ssize_t) sizeof(req));
        n = recv(nl, &answer, sizeof(answer), 0);
        (void) close(nl);
        cr_assert(n > 0 && NLMSG_OK(h, (size_t) n) && h->nlmsg_type == RTM_NEWLINK,
                  "no answer to RTM_GETLINK for lo");
        {
                const struct ifinfomsg *ifi = NLMSG_DATA(h);
                const struct rtattr *a = IFLA_RTA(ifi);
                int len = (int) IFLA_PAYLOAD(h);

                for (; RTA_OK(a, len); a = RTA_NEXT(a, len))
                        if (a->rta_type == 63 /* IFLA_GSO_IPV4_MAX_SIZE, Linux 6.3 */)
                                size = *(const uint32_t *) RTA_DATA(a);
        }
        return size;
}

/* A TCP connection from inside the sandbox to ip:port (in the sandbox's namespace). */
static int sb_connect(const struct sandbox *sb, const char *ip, uint16_t port)
{
        struct dial d = { .pidfd = sb->pidfd, .ip = ip, .port = port, .fd = -1 };
        pthread_t t;

        cr_assert_eq(pthread_create(&t, NULL, dial_main, &d), 0);
        (void) pthread_join(t, NULL);
        cr_assert_geq(d.fd, 0, "connect %s:%u in the sandbox: %s", ip, port, strerror(d.err));
        return d.fd;
}

/* The same, for a connection that may fail: the fd (closed here) gives 0, a failure -errno. */
static int sb_try_connect(const struct sandbox *sb, const char *ip, uint16_t port)
{
        struct dial d = { .pidfd = sb->pidfd, .ip = ip, .port = port, .fd = -1 };
        pthread_t t;

        cr_assert_eq(pthread_create(&t, NULL, dial_main, &d), 0);
        (void) pthread_join(t, NULL);
        if (d.fd < 0)
                return -d.err;
        (void) close(d.fd);
        return 0;
}

static void send_text(int fd, const char *s)
{
        cr_assert_eq(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t) strlen(s));
}

/* Reads until EOF (or size - 1 bytes, or a 5 s lull); NUL-terminates. Returns the length. */
static size_t read_all(int fd, char *buf, size_t size)
{
        size_t len = 0;
        ssize_t n;

        while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
                len += (size_t) n;
        buf[len] = '\0';
        return len;
}

/* Reads until marker has arrived. */
static void read_until(int fd, char *buf, size_t size, const char *marker)
{
        size_t len = 0;
        ssize_t n;

        buf[0] = '\0';
        while (!strstr(buf, marker) && len < size - 1) {
                n = read(fd, buf + len, size - 1 - len);
                cr_assert_gt(n, 0, "no '%s' before EOF; got '%s'", marker, buf);
                len += (size_t) n;
                buf[len] = '\0';
        }
}

/* An HTTP exchange through the proxy: the whole answer. */
static void http_exchange(const struct sandbox *sb, const char *request, char *answer, size_t size)
{
        _cleanup_close_ int fd = sb_connect(sb, "127.0.0.1", EGRESS_PROXY_PORT);

        send_text(fd, request);
        (void) read_all(fd, answer, size);
}

/* A CONNECT tunnel through the proxy, ready for bytes. */
static int tunnel(const struct sandbox *sb, const char *hostport)
{
        char req[512], answer[512];
        int fd = sb_connect(sb, "127.0.0.1", EGRESS_PROXY_PORT);

        (void) snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport,
                        hostport);
        send_text(fd, req);
        read_until(fd, answer, sizeof(answer), "\r\n\r\n");
        cr_assert(strncmp(answer, "HTTP/1.1 200 Connection established\r\n\r\n", 39) == 0,
                  "CONNECT %s: %s", hostport, answer);
        return fd;
}

static void echo_through(int fd, const char *text)
{
        char buf[256];

        send_text(fd, text);
        read_until(fd, buf, sizeof(buf), text);
        cr_assert_str_eq(buf, text);
}

/* ---- sessions ---- */

static struct egress_policy *policy_of(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static struct egress_policy *policy_of(const char *fmt, ...)
{
        char text[4096];
        va_list ap;
        json_t *v;
        json_error_t jerr;
        struct airlock_error err = { "" };
        struct egress_policy *p = NULL;

        va_start(ap, fmt);
        (void) vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        v = json_loads(text, JSON_DECODE_ANY, &jerr);
        cr_assert_not_null(v, "bad test JSON %s: %s", text, jerr.text);
        cr_assert_eq(egress_policy_parse(v, "profile 'lab'", &p, &err), 0, "%s: %s", text, err.msg);
        json_decref(v);
        return p;
}

/* The engine's linger_ms, for the tests of clients that go away (0: the engine's default). */
static uint64_t lab_linger_ms;

static struct egress *engine(const struct egress_denylist *deny, uint32_t max_total)
{
        struct egress_options o = { .on_event = on_event,
                                    .max_connections_total = max_total,
                                    .linger_ms = lab_linger_ms };
        struct airlock_error err = { "" };
        struct egress *e = NULL;

        if (deny)
                o.deny = *deny;
        cr_assert_eq(egress_new(&o, &e, &err), 0, "%s", err.msg);
        lab_egress = e;
        return e;
}

static struct egress_session *session_in(struct egress *e, const struct sandbox *sb,
                                         const struct egress_policy *layout,
                                         enum egress_forward_net net,
                                         const struct egress_policy *policy, const char *id)
{
        const struct egress_session_info info = { .session = id, .profile = "lab" };
        struct airlock_error err = { "" };
        struct egress_session *s = NULL;

        cr_assert_eq(egress_session_open(e, sb->pidfd, layout, net, policy ? policy : layout, &info,
                                         &s, &err),
                     0, "%s", err.msg);
        return s;
}

static struct egress_session *session(struct egress *e, const struct sandbox *sb,
                                      const struct egress_policy *layout,
                                      const struct egress_policy *policy, const char *id)
{
        return session_in(e, sb, layout, EGRESS_FORWARD_LOOPBACK, policy, id);
}

static json_int_t num(const json_t *o, const char *key)
{
        const json_t *v = json_object_get(o, key);

        cr_assert(json_is_integer(v), "no integer '%s'", key);
        return json_integer_value(v);
}

/* The setup most relay tests share: the lab host, a sandbox, one upstream server of kind and
 * a session whose policy allows just that server (extra: more keys of the policy, such as
 * ", \"max_bytes\": \"3MiB\"", or ""). Set lab_linger_ms first to change it. */
struct one_upstream {
        struct sandbox sb;
        struct srv *srv;
        struct egress_policy *p;
        struct egress_session *s;
        char hostport[64];
};

static void one_upstream_open(struct one_upstream *u, enum srv_kind kind, const char *extra)
{
        lab_host();
        u->sb = sandbox_start();
        u->srv = srv_start("127.0.0.1", kind);
        u->p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:%u\"]%s}", u->srv->port,
                         extra);
        u->s = session(engine(NULL, 0), &u->sb, u->p, NULL, "s-1");
        (void) snprintf(u->hostport, sizeof(u->hostport), "127.0.0.1:%u", u->srv->port);
}

static void one_upstream_close(struct one_upstream *u)
{
        (void) egress_session_close(u->s);
        (void) egress_free(lab_egress);
        egress_policy_free(u->p);
        sandbox_stop(&u->sb);
}

/* ---- tests ---- */

Test(egress_proxy, connect_relays_and_counts)
{
        struct egress_policy *p;
        struct egress_session *s;
        struct sandbox sb;
        struct srv *echo;
        struct seen ev;
        json_t *u, *d;
        char hostport[64];
        int fd;

        lab_host();
        sb = sandbox_start();
        echo = srv_start("127.0.0.1", SRV_ECHO);
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:%u\"]}", echo->port);
        s = session(engine(NULL, 0), &sb, p, NULL, "s-1");

        {
                /* The listeners are the sandbox's: the lab host has none. */
                struct sockaddr_in a = { .sin_family = AF_INET,
                                         .sin_port = htons(EGRESS_PROXY_PORT),
                                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                _cleanup_close_ int h = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

                cr_assert_lt(connect(h, (struct sockaddr *) &a, sizeof(a)), 0);
                cr_assert_eq(errno, ECONNREFUSED);
        }
        (void) snprintf(hostport, sizeof(hostport), "127.0.0.1:%u", echo->port);
        fd = tunnel(&sb, hostport);
        echo_through(fd, "hello");
        (void) shutdown(fd, SHUT_WR);
        {
                char rest[16];

                cr_assert_eq(read_all(fd, rest, sizeof(rest)), 0, "half-close: EOF passed on");
        }
        (void) close(fd);

        u = egress_session_take_usage(s);
        cr_assert_eq(num(u, "connections"), 1);
        cr_assert_eq(num(u, "refused"), 0);
        cr_assert_eq(num(u, "bytes_out"), 5);
        cr_assert_eq(num(u, "bytes_in"), 5);
        d = json_array_get(json_object_get(u, "destinations"), 0);
        cr_assert_str_eq(json_string_value(json_object_get(d, "host")), "127.0.0.1");
        cr_assert_eq(num(d, "port"), echo->port);
        cr_assert_eq(num(d, "connections"), 1);
        cr_assert_null(json_object_get(u, "destinations_omitted"));
        json_decref(u);
        /* A take resets; the totals do not. */
        u = egress_session_take_usage(s);
        cr_assert_eq(num(u, "connections"), 0);
        cr_assert_eq(json_array_size(json_object_get(u, "destinations")), 0);
        json_decref(u);
        u = egress_session_totals(s);
        cr_assert_eq(num(u, "connections"), 1);
        cr_assert_eq(num(u, "bytes_in"), 5);
        json_decref(u);

        (void) egress_session_close(s);
        cr_assert(seen_find(EGRESS_EVENT_OPEN, "127.0.0.1", echo->port, &ev));
        cr_assert_str_eq(ev.via, "connect");
        cr_assert_str_eq(ev.address, "127.0.0.1");
        cr_assert_str_eq(ev.profile, "lab");
        cr_assert(seen_find(EGRESS_EVENT_CLOSE, "127.0.0.1", echo->port, &ev));
        cr_assert_eq(ev.bytes_in, 5);
        cr_assert_eq(ev.bytes_out, 5);
        (void) egress_free(lab_egress);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

/* Bulk both ways at once (the echo server sends back what it gets while more comes): every
 * byte arrives in order, is counted, and the relay's buffers grow for it and give the memory
 * back. */
#define BULK_BYTES (8u << 20)

static uint8_t bulk_byte(size_t i)
{
        return (uint8_t) ((i * 2654435761u) >> 13);
}

/* Sends BULK_BYTES of bulk_byte(); returns how many went (criterion's asserts belong to the
 * test's own thread). */
static void *bulk_send(void *arg)
{
        int fd = (int) (intptr_t) arg;
        uint8_t *b = malloc(BULK_BYTES);
        size_t sent = 0;

        for (size_t i = 0; b && i < BULK_BYTES; i++)
                b[i] = bulk_byte(i);
        while (b && sent < BULK_BYTES) {
                ssize_t n = send(fd, b + sent, BULK_BYTES - sent, MSG_NOSIGNAL);

                if (n <= 0)
                        break;
                sent += (size_t) n;
        }
        free(b);
        return (void *) (uintptr_t) sent;
}

Test(egress_proxy, bulk_both_ways_arrives_whole)
{
        struct one_upstream up;
        _cleanup_free_ uint8_t *got = malloc(BULK_BYTES + 1);
        size_t len = 0, bad = BULK_BYTES, peak = 0;
        pthread_t sender;
        void *sent;
        ssize_t n;
        json_t *u;
        int fd;

        cr_assert_not_null(got);
        one_upstream_open(&up, SRV_ECHO, "");
        fd = tunnel(&up.sb, up.hostport);
        cr_assert_eq(pthread_create(&sender, NULL, bulk_send, (void *) (intptr_t) fd), 0);
        while (len < BULK_BYTES && (n = read(fd, got + len, BULK_BYTES - len)) > 0)
                len += (size_t) n;
        cr_assert_eq(pthread_join(sender, &sent), 0);
        cr_assert_eq((uintptr_t) sent, BULK_BYTES, "%zu bytes went", (size_t) (uintptr_t) sent);
        cr_assert_eq(len, BULK_BYTES, "%zu bytes came back instead of %u", len, BULK_BYTES);
        for (size_t i = 0; i < len && bad == BULK_BYTES; i++)
                if (got[i] != bulk_byte(i))
                        bad = i;
        cr_assert_eq(bad, BULK_BYTES, "byte %zu differs", bad);

        /* The last byte read came through the relay, so it has been counted. */
        u = egress_session_totals(up.s);
        cr_assert_eq(num(u, "bytes_out"), BULK_BYTES);
        cr_assert_eq(num(u, "bytes_in"), BULK_BYTES);
        json_decref(u);
        (void) egress_relay_grown(&peak);
        cr_assert_geq(peak, 64u * 1024u, "a bulk transfer grew the relay's buffers: %zu", peak);
        /* Quiet for longer than a second, the connection still open: the memory goes back. */
        for (int i = 0; i < 500 && egress_relay_grown(NULL) > 0; i++)
                (void) usleep(10000);
        cr_assert_eq(egress_relay_grown(NULL), 0, "an idle connection kept grown buffers for 5 s");
        (void) shutdown(fd, SHUT_WR);
        cr_assert_eq(read(fd, got, 1), 0, "the half-close came back through the echo");
        (void) close(fd);
        one_upstream_close(&up);
        cr_assert_eq(egress_relay_grown(NULL), 0, "grown buffers given back");
}

/* The CPU time this process has used, in ms. */
static long long cpu_ms(void)
{
        struct rusage ru;

        cr_assert_eq(getrusage(RUSAGE_SELF, &ru), 0);
        return (long long) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
               (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* A client resets its connection while the relay holds its bytes for an upstream that has
 * half-closed and does not read: the relay gives the upstream linger_ms, then ends (it used to
 * spin on the reset, which poll() reports whatever it is asked). */
Test(egress_proxy, reset_client_ends_relay_to_deaf_upstream)
{
        struct one_upstream up;
        static char chunk[64 * 1024];
        const struct linger abort_close = { .l_onoff = 1, .l_linger = 0 };
        struct seen ev;
        char rest[16];
        struct pollfd pf;
        size_t sent = 0;
        bool closed = false;
        long long cpu;
        int fd;

        lab_linger_ms = 200;
        one_upstream_open(&up, SRV_DEAF, "");
        fd = tunnel(&up.sb, up.hostport);
        cr_assert_eq(read_all(fd, rest, sizeof(rest)), 0, "the upstream's half-close passed on");
        /* Everything between here and the upstream fills up: nothing has moved for 1 s. */
        pf = (struct pollfd){ .fd = fd, .events = POLLOUT };
        while (sent < (512u << 20) && poll(&pf, 1, 1000) == 1) {
                ssize_t n = send(fd, chunk, sizeof(chunk), MSG_DONTWAIT | MSG_NOSIGNAL);

                cr_assert(n > 0 || errno == EAGAIN, "send: %s", strerror(errno));
                sent += n > 0 ? (size_t) n : 0;
        }
        cr_assert_lt(sent, 512u << 20, "the deaf upstream's side never filled up");
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close)), 0);
        cpu = cpu_ms();
        (void) close(fd); /* a reset, with bytes unsent */
        for (int i = 0; i < 500 && !closed; i++) {
                closed = seen_find(EGRESS_EVENT_CLOSE, "127.0.0.1", up.srv->port, &ev);
                if (!closed)
                        (void) usleep(10000);
        }
        cr_assert(closed, "the relay still runs 5 s after its client reset the connection");
        cpu = cpu_ms() - cpu;
        cr_assert_lt(cpu, 50, "the process used %lld ms of CPU while the relay lingered", cpu);
        cr_assert(strstr(ev.reason, "the client had gone and the upstream read nothing more for "
                                    "200 ms"),
                  "%s", ev.reason);
        one_upstream_close(&up);
}

/* A client fills everything between it and an upstream that does not read yet, and resets its
 * connection: every byte that had left the client's own queue (into the relay's) still reaches
 * the upstream once it reads. */
Test(egress_proxy, reset_client_bytes_reach_the_upstream)
{
        struct one_upstream up;
        static char chunk[64 * 1024];
        const struct linger abort_close = { .l_onoff = 1, .l_linger = 0 };
        const uint64_t go = 1;
        struct pollfd pf;
        size_t got = 0, sent = 0;
        int fd, done = 0, queued = 0;

        one_upstream_open(&up, SRV_LATE_READER, "");
        fd = tunnel(&up.sb, up.hostport);
        memset(chunk, 'b', sizeof(chunk));
        /* Everything fills up: nothing has moved for 1 s. */
        pf = (struct pollfd){ .fd = fd, .events = POLLOUT };
        while (sent < (512u << 20) && poll(&pf, 1, 1000) == 1) {
                ssize_t n = send(fd, chunk, sizeof(chunk), MSG_DONTWAIT | MSG_NOSIGNAL);

                cr_assert(n > 0 || errno == EAGAIN, "send: %s", strerror(errno));
                sent += n > 0 ? (size_t) n : 0;
        }
        cr_assert_lt(sent, 512u << 20, "the upstream's side never filled up");
        cr_assert_eq(ioctl(fd, SIOCOUTQ, &queued), 0, "%s", strerror(errno));
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close)), 0);
        (void) close(fd); /* a reset: what is still queued here is dropped */
        cr_assert_eq(write(up.srv->go, &go, sizeof(go)), (ssize_t) sizeof(go));
        for (int i = 0; i < 500 && !done; i++) {
                (void) pthread_mutex_lock(&up.srv->lock);
                done = up.srv->requests;
                got = up.srv->body;
                (void) pthread_mutex_unlock(&up.srv->lock);
                if (!done)
                        (void) usleep(10000);
        }
        cr_assert(done, "the upstream's connection still open 5 s after the client's reset");
        cr_assert(got >= sent - (size_t) queued && got <= sent,
                  "the upstream got %zu bytes; %zu were sent, %d of them still queued in the "
                  "client at the reset",
                  got, sent, queued);
        one_upstream_close(&up);
}

/* A client that has only closed its sending side has not gone: it waits for its answer as long
 * as the upstream takes, past the linger. */
Test(egress_proxy, half_closed_client_waits_past_linger)
{
        struct one_upstream up;
        char answer[256];
        int fd;

        lab_linger_ms = 200;
        one_upstream_open(&up, SRV_LATE_ANSWER, "");
        fd = tunnel(&up.sb, up.hostport);
        send_text(fd, "question");
        (void) shutdown(fd, SHUT_WR);
        (void) read_all(fd, answer, sizeof(answer));
        (void) close(fd);
        cr_assert_str_eq(answer, REJECT_ANSWER);
        one_upstream_close(&up);
}

/* The sandbox's loopback, which only its connections to the proxy use, takes packets of up to
 * 512 KiB (BIG TCP): an eighth of the packets for a download through the proxy. */
Test(egress_proxy, sandbox_loopback_takes_big_packets)
{
        struct egress_policy *p;
        struct egress_session *s;
        struct sandbox sb;
        long host;

        lab_host();
        host = lo_gso_ipv4_max_size(-1);
        if (host < 0)
                cr_skip_test("this kernel has no BIG TCP for IPv4 (Linux 6.3 and later): "
                             "the proxy's loopback keeps 64 KiB packets");
        sb = sandbox_start();
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:9\"]}");
        s = session(engine(NULL, 0), &sb, p, NULL, "s-1");
        cr_assert_eq(lo_gso_ipv4_max_size(sb.pidfd), 524280);
        cr_assert_eq(lo_gso_ipv4_max_size(-1), host, "the host's loopback is left alone");
        (void) egress_session_close(s);
        (void) egress_free(lab_egress);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

/* ---- the relay alone, on loopback pairs set up beforehand ---- */

/* A connected pair of TCP sockets on 127.0.0.1 of the lab host. */
static void tcp_pair(int *a, int *b)
{
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        _cleanup_close_ int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        cr_assert_eq(bind(l, (struct sockaddr *) &sa, sizeof(sa)), 0);
        cr_assert_eq(listen(l, 1), 0);
        cr_assert_eq(getsockname(l, (struct sockaddr *) &sa, &len), 0);
        *a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(connect(*a, (struct sockaddr *) &sa, sizeof(sa)), 0);
        *b = accept4(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        cr_assert_geq(*b, 0);
        cr_assert_eq(fcntl(*a, F_SETFL, O_NONBLOCK), 0);
}

static size_t grant_all(void *ctx, enum egress_dir dir, size_t want)
{
        (void) ctx;
        (void) dir;
        return want;
}

static void moved_nothing(void *ctx, enum egress_dir dir, size_t granted, size_t n)
{
        (void) ctx;
        (void) dir;
        (void) granted;
        (void) n;
}

/* The upstream answered and reset the connection under an upload (an HTTP server refusing a
 * large body): the upload cannot go on, but the answer, which came before the reset, reaches
 * the client. */
Test(egress_relay, upstream_reset_under_upload_answer_arrives)
{
        static const struct egress_relay_ops ops = { .grant = grant_all, .moved = moved_nothing };
        static char upload[1000];
        const struct linger abort_close = { .l_onoff = 1, .l_linger = 0 };
        int app, client, upstream, server;
        struct egress_relay r = { .ops = &ops, .linger_ms = 1000 };
        char answer[256];
        ssize_t n;
        size_t len = 0;

        lab_host();
        tcp_pair(&app, &client);
        tcp_pair(&upstream, &server);
        r.client = client;
        r.upstream = upstream;
        cr_assert_eq(send(app, upload, sizeof(upload), MSG_NOSIGNAL), (ssize_t) sizeof(upload));
        cr_assert_eq(send(server, REJECT_ANSWER, strlen(REJECT_ANSWER), MSG_NOSIGNAL),
                     (ssize_t) strlen(REJECT_ANSWER));
        cr_assert_eq(setsockopt(server, SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close)),
                     0);
        (void) close(server); /* a reset, behind the answer */
        (void) egress_relay_run(&r);
        (void) close(client);
        (void) close(upstream);
        cr_assert_eq(fcntl(app, F_SETFL, 0), 0);
        while (len < sizeof(answer) - 1 &&
               (n = read(app, answer + len, sizeof(answer) - 1 - len)) > 0)
                len += (size_t) n;
        answer[len] = '\0';
        (void) close(app);
        cr_assert_str_eq(answer, REJECT_ANSWER);
}

Test(egress_proxy, connect_refused_names_destination_and_profile)
{
        struct egress_policy *p;
        struct egress_session *s;
        struct sandbox sb;
        struct seen ev;
        char answer[2048];
        json_t *u;

        lab_host();
        sb = sandbox_start();
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"db.test:5432\"]}");
        s = session(engine(NULL, 0), &sb, p, NULL, "s-1");

        http_exchange(&sb, "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n", answer,
                      sizeof(answer));
        cr_assert(strstr(answer, "HTTP/1.1 403 Forbidden\r\n") == answer, "%s", answer);
        cr_assert(strstr(answer, "\r\n\r\nairlock egress: CONNECT evil.test:443 refused: not in "
                                 "the allow-list (profile 'lab')\n"),
                  "%s", answer);
        /* The port is part of the rule. */
        http_exchange(&sb, "CONNECT db.test:5433 HTTP/1.1\r\n\r\n", answer, sizeof(answer));
        cr_assert(strstr(answer, "CONNECT db.test:5433 refused: not in the allow-list"), "%s",
                  answer);
        /* An IPv6 literal is shown in brackets and matched as an address. */
        http_exchange(&sb, "CONNECT [::1]:5432 HTTP/1.1\r\n\r\n", answer, sizeof(answer));
        cr_assert(strstr(answer, "CONNECT [::1]:5432 refused: not in the allow-list"), "%s",
                  answer);

        cr_assert(seen_find(EGRESS_EVENT_REFUSED, "evil.test", 443, &ev));
        cr_assert_str_eq(ev.reason, "not in the allow-list");
        cr_assert_str_eq(ev.via, "connect");
        u = egress_session_take_usage(s);
        cr_assert_eq(num(u, "refused"), 3);
        cr_assert_eq(num(u, "connections"), 0);
        json_decref(u);

        /* Usage lists 64 destinations, sorted by host then port, and counts the rest. */
        for (int i = 69; i >= 0; i--) {
                char req[128];

                (void) snprintf(req, sizeof(req), "CONNECT n%02d.test:443 HTTP/1.1\r\n\r\n", i);
                http_exchange(&sb, req, answer, sizeof(answer));
        }
        u = egress_session_take_usage(s);
        cr_assert_eq(num(u, "refused"), 70);
        cr_assert_eq(json_array_size(json_object_get(u, "destinations")), 64);
        cr_assert_str_eq(json_string_value(json_object_get(
                                 json_array_get(json_object_get(u, "destinations"), 0), "host")),
                         "n00.test");
        cr_assert_eq(num(json_array_get(json_object_get(u, "destinations"), 63), "refused"), 1);
        cr_assert_eq(num(u, "destinations_omitted"), 6);
        json_decref(u);
        (void) egress_session_close(s);
        (void) egress_free(lab_egress);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

Test(egress_proxy, plain_http_is_forwarded_in_origin_form)
{
        struct egress_policy *p;
        struct egress_session *s;
        struct sandbox sb;
        struct srv *web, *named;
        char req[1024], answer[4096];

        lab_host();
        sb = sandbox_start();
        web = srv_start("127.0.0.1", SRV_HTTP);
        named = srv_start("10.9.8.2", SRV_HTTP);
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:%u\", \"db.test:%u\"]}",
                      web->port, named->port);
        s = session(engine(NULL, 0), &sb, p, NULL, "s-1");

        (void) snprintf(req, sizeof(req),
                        "GET http://127.0.0.1:%u/path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                        "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n"
                        "Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nUser-Agent: t\r\n\r\n",
                        web->port, web->port);
        http_exchange(&sb, req, answer, sizeof(answer));
        cr_assert(strncmp(answer, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", answer);
        cr_assert(strstr(answer, "\r\nConnection: close\r\n"), "%s", answer);
        cr_assert_null(strstr(answer, "keep-alive"), "%s", answer);
        cr_assert_null(strstr(answer, "Keep-Alive"), "%s", answer);
        cr_assert(strstr(answer, "\r\n\r\nhello"), "%s", answer);
        cr_assert_eq(web->requests, 1);
        cr_assert(strncmp(web->head, "GET /path?q=1 HTTP/1.1\r\n", 24) == 0, "%s", web->head);
        cr_assert(strstr(web->head, "\r\nConnection: close\r\n"), "%s", web->head);
        cr_assert(strstr(web->head, "\r\nUser-Agent: t\r\n"), "%s", web->head);
        cr_assert_null(strstr(web->head, "Proxy-"), "%s", web->head);
        cr_assert_null(strstr(web->head, "X-Hop"), "%s", web->head);
        cr_assert_null(strstr(web->head, "keep-alive"), "%s", web->head);

        /* A body the server reads whole before it answers: the relay carries it while the
         * answer's head is awaited. */
        {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_PROXY_PORT);
                _cleanup_free_ char *body = malloc(200000);

                memset(body, 'b', 200000);
                (void) snprintf(req, sizeof(req),
                                "POST http://127.0.0.1:%u/upload HTTP/1.1\r\n"
                                "Content-Length: 200000\r\n\r\n",
                                web->port);
                send_text(fd, req);
                cr_assert_eq(send(fd, body, 200000, MSG_NOSIGNAL), 200000);
                (void) read_all(fd, answer, sizeof(answer));
                cr_assert(strstr(answer, "\r\n\r\nhello"), "%s", answer);
                cr_assert_eq(web->body, 200000);
                cr_assert(strncmp(web->head, "POST /upload HTTP/1.1\r\n", 23) == 0, "%s",
                          web->head);
        }

        /* A second request on the connection, pipelined or sent after the answer, is not
         * forwarded: it would reach this host unchecked. */
        web->requests = 0;
        (void) snprintf(req, sizeof(req),
                        "GET http://127.0.0.1:%u/first HTTP/1.1\r\n\r\n"
                        "GET http://127.0.0.1:%u/second HTTP/1.1\r\nHost: evil.test\r\n\r\n",
                        web->port, web->port);
        http_exchange(&sb, req, answer, sizeof(answer));
        cr_assert(strstr(answer, "\r\n\r\nhello"), "%s", answer);
        cr_assert_null(strstr(strstr(answer, "hello") + 5, "HTTP/1.1"), "%s", answer);
        cr_assert_eq(web->requests, 1, "%s", web->head);
        cr_assert_null(strstr(web->head, "second"), "%s", web->head);
        {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_PROXY_PORT);

                (void) snprintf(req, sizeof(req), "GET http://127.0.0.1:%u/one HTTP/1.1\r\n\r\n",
                                web->port);
                send_text(fd, req);
                read_until(fd, answer, sizeof(answer), "hello");
                (void) snprintf(req, sizeof(req), "GET http://127.0.0.1:%u/two HTTP/1.1\r\n\r\n",
                                web->port);
                (void) send(fd, req, strlen(req), MSG_NOSIGNAL);
                cr_assert_eq(read_all(fd, answer, sizeof(answer)), 0);
                cr_assert_eq(web->requests, 2, "%s", web->head);
        }
        /* A chunked body is forwarded to its end, and nothing after it, whether it came with
         * the head or later (the pause lets the proxy read the head alone first). */
        web->requests = 0;
        {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_PROXY_PORT);

                (void) snprintf(req, sizeof(req),
                                "POST http://127.0.0.1:%u/c HTTP/1.1\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n",
                                web->port);
                send_text(fd, req);
                (void) usleep(20000);
                (void) snprintf(req, sizeof(req),
                                "3;x=1\r\nabc\r\n0\r\nT: 1\r\n\r\nGET http://127.0.0.1:%u/third "
                                "HTTP/1.1\r\n\r\n",
                                web->port);
                send_text(fd, req);
                (void) read_all(fd, answer, sizeof(answer));
        }
        cr_assert(strstr(answer, "\r\n\r\nhello"), "%s", answer);
        cr_assert_eq(web->requests, 1, "%s", web->head);
        cr_assert(strstr(web->head, "\r\n\r\n3;x=1\r\nabc\r\n0\r\nT: 1\r\n\r\n"), "%s", web->head);
        cr_assert_null(strstr(web->head, "third"), "%s", web->head);

        /* By name, resolved by the proxy; a missing Host is added from the URL. */
        (void) snprintf(req, sizeof(req), "GET http://DB.test:%u HTTP/1.0\r\n\r\n", named->port);
        http_exchange(&sb, req, answer, sizeof(answer));
        cr_assert(strstr(answer, "\r\n\r\nhello"), "%s", answer);
        cr_assert(strncmp(named->head, "GET / HTTP/1.0\r\n", 16) == 0, "%s", named->head);
        (void) snprintf(req, sizeof(req), "\r\nHost: DB.test:%u\r\n", named->port);
        cr_assert(strstr(named->head, req), "%s", named->head);

        (void) egress_session_close(s);
        (void) egress_free(lab_egress);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

/* tmpl (len bytes) with every "%u" replaced by port, into out. Returns the length. */
static size_t with_port(const char *tmpl, size_t len, uint16_t port, char *out, size_t size)
{
        size_t o = 0;

        for (size_t i = 0; i < len; i++) {
                if (tmpl[i] == '%' && i + 1 < len && tmpl[i + 1] == 'u') {
                        o += (size_t) snprintf(out + o, size - o, "%u", port);
                        i++;
                } else {
                        out[o++] = tmpl[i];
                }
                cr_assert_lt(o, size);
        }
        return o;
}

/* Requests that are refused before anything is looked up or forwarded. */
Test(egress_proxy, malformed_and_hostile_requests_refused)
{
        struct {
                const char *request;
                const char *status;
                const char *text;
        } cases[] = {
                { "GET http://127.0.0.1:%u/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", "400",
                  "the Host header ('evil.test') disagrees" },
                { "GET http://127.0.0.1:%u/ HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nHost: x\r\n\r\n",
                  "400", "more than one Host" },
                { "POST http://127.0.0.1:%u/ HTTP/1.1\r\nContent-Length: 1\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n",
                  "400", "both Content-Length and Transfer-Encoding" },
                { "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\nGET http://127.0.0.1:%u/ HTTP/1.1\r\n\r\n",
                  "400", "request refused: a PROXY protocol preamble" },
                { "\r\n\r\n\0\r\nQUIT\n", "400", "PROXY protocol v2" },
                { "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "400", "a TLS handshake" },
                { "GET / HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n", "400", "origin-form" },
                { "GET https://127.0.0.1:%u/ HTTP/1.1\r\n\r\n", "400", "tunnel them with CONNECT" },
                { "GET ftp://127.0.0.1:%u/ HTTP/1.1\r\n\r\n", "400", "the scheme 'ftp'" },
                { "GET http://user@127.0.0.1:%u/ HTTP/1.1\r\n\r\n", "400", "user info" },
                { "GET http://127.0.0.1:%u/ HTTP/1.1\r\n Folded: x\r\n\r\n", "400", "folded" },
                { "GET http://127.0.0.1:%u/ HTTP/2.0\r\n\r\n", "400", "HTTP/1.0 and HTTP/1.1" },
                { "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n", "400", "the port is missing" },
                { "CONNECT ::1:%u HTTP/1.1\r\n\r\n", "400", "needs brackets" },
                { "CONNECT 127.0.0.1:99999 HTTP/1.1\r\n\r\n", "400", "not a number" },
                { "CONNECT 127.0.0.1:%u HTTP/1.1\r\nX: \x01\r\n\r\n", "400", "control character" },
        };
        struct egress_policy *p;
        struct egress_session *s;
        struct sandbox sb;
        struct srv *web;
        char req[1024], answer[4096];
        json_t *u;

        lab_host();
        sb = sandbox_start();
        web = srv_start("127.0.0.1", SRV_HTTP);
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:%u\"]}", web->port);
        s = session(engine(NULL, 0), &sb, p, NULL, "s-1");

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_PROXY_PORT);
                /* The v2 signature has a NUL in it. */
                size_t n = cases[i].request[0] == '\r' ? 12 : strlen(cases[i].request);

                n = with_port(cases[i].request, n, web->port, req, sizeof(req));
                cr_assert_eq(send(fd, req, n, MSG_NOSIGNAL), (ssize_t) n);
                (void) read_all(fd, answer, sizeof(answer));
                cr_assert(strncmp(answer + 9, cases[i].status, 3) == 0, "case %zu: %s", i, answer);
                cr_assert(strstr(answer, "airlock egress: "), "case %zu: %s", i, answer);
                cr_assert(strstr(answer, cases[i].text), "case %zu: %s", i, answer);
                cr_assert(strstr(answer, "(profile 'lab')\n"), "case %zu: %s", i, answer);
        }
        cr_assert_eq(web->requests, 0, "nothing refused reached the server");

        /* A header block over 32 KiB: 431, never forwarded. */
        {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_PROXY_PORT);
                _cleanup_free_ char *big = malloc(40000);

                (void) snprintf(big, 40000, "GET http://127.0.0.1:%u/ HTTP/1.1\r\nX: ", web->port);
                memset(big + strlen(big), 'a', 39000 - strlen(big));
                big[39000] = '\0';
                (void) send(fd, big, strlen(big), MSG_NOSIGNAL);
                (void) read_all(fd, answer, sizeof(answer));
                cr_assert(strncmp(answer, "HTTP/1.1 431 ", 13) == 0, "%s", answer);
        }
        /* Too many header fields: 431. */
        {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_PROXY_PORT);
                char many[8192];
                size_t o = (size_t) snprintf(many, sizeof(many),
                                             "GET http://127.0.0.1:%u/ HTTP/1.1\r\n", web->port);

                for (int i = 0; i < 150; i++)
                        o += (size_t) snprintf(many + o, sizeof(many) - o, "X-%d: 1\r\n", i);
                o += (size_t) snprintf(many + o, sizeof(many) - o, "\r\n");
                send_text(fd, many);
                (void) read_all(fd, answer, sizeof(answer));
                cr_assert(strncmp(answer, "HTTP/1.1 431 ", 13) == 0, "%s", answer);
                cr_assert(strstr(answer, "more than 100 header fields"), "%s", answer);
        }
        cr_assert_eq(web->requests, 0);
        u = egress_session_take_usage(s);
        cr_assert_eq(num(u, "refused"), (json_int_t) (sizeof(cases) / sizeof(cases[0])) + 2);
        cr_assert_eq(num(u, "connections"), 0);
        json_decref(u);
        (void) egress_session_close(s);
        (void) egress_free(lab_egress);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

static void socks_greet(int fd)
{
        uint8_t r[2];

        cr_assert_eq(send(fd, "\x05\x01\x00", 3, MSG_NOSIGNAL), 3);
        cr_assert_eq(read(fd, r, 2), 2);
        cr_assert_eq(r[0], 5);
        cr_assert_eq(r[1], 0);
}

/* Sends a SOCKS5 CONNECT (atyp with addr of alen bytes) and returns the reply code. */
static int socks_connect(int fd, uint8_t atyp, const void *addr, size_t alen, uint16_t port)
{
        uint8_t req[300] = { 5, 1, 0, atyp }, rep[22];
        size_t n = 4;
        ssize_t k;

        if (atyp == 3)
                req[n++] = (uint8_t) alen;
        memcpy(req + n, addr, alen);
        n += alen;
        req[n++] = (uint8_t) (port >> 8);
        req[n++] = (uint8_t) port;
        cr_assert_eq(send(fd, req, n, MSG_NOSIGNAL), (ssize_t) n);
        k = read(fd, rep, 4);
        cr_assert_eq(k, 4);
        cr_assert_eq(rep[0], 5);
        /* The bound address follows; read it away. */
        k = read(fd, rep + 4, rep[3] == 4 ? 18 : 6);
        cr_assert_eq(k, rep[3] == 4 ? 18 : 6);
        return rep[1];
}

Test(egress_proxy, socks5)
{
        struct egress_policy *p;
        struct egress_session *s;
        struct sandbox sb;
        struct srv *echo, *echo6, *named;
        uint8_t v4[4], v6[16], r[2];
        struct seen ev;

        lab_host();
        sb = sandbox_start();
        echo = srv_start("127.0.0.1", SRV_ECHO);
        echo6 = srv_start("::1", SRV_ECHO);
        named = srv_start("10.9.8.2", SRV_ECHO);
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:%u\", \"[::1]:%u\", "
                      "\"db.test:%u\"]}",
                      echo->port, echo6->port, named->port);
        s = session(engine(NULL, 0), &sb, p, NULL, "s-1");
        (void) inet_pton(AF_INET, "127.0.0.1", v4);
        (void) inet_pton(AF_INET6, "::1", v6);

        {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_SOCKS_PORT);

                socks_greet(fd);
                {
                        int code = socks_connect(fd, 1, v4, 4, echo->port);
                        cr_assert_eq(code, 0, "code %d", code);
                }
                echo_through(fd, "over socks v4");
        }
        {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_SOCKS_PORT);

                socks_greet(fd);
                cr_assert_eq(socks_connect(fd, 4, v6, 16, echo6->port), 0);
                echo_through(fd, "over socks v6");
        }
        {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_SOCKS_PORT);

                socks_greet(fd);
                cr_assert_eq(socks_connect(fd, 3, "db.test", 7, named->port), 0);
                echo_through(fd, "over socks by name");
        }
        {
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_SOCKS_PORT);

                socks_greet(fd);
                cr_assert_eq(socks_connect(fd, 3, "evil.test", 9, 443), 2);
        }
        {
                /* An allowed address on another port, and the v6 server by its v4 rule's
                 * port: both refused. */
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_SOCKS_PORT);

                socks_greet(fd);
                cr_assert_eq(socks_connect(fd, 4, v6, 16, echo->port), 2);
        }
        {
                /* The same v6 destination through the HTTP proxy's CONNECT. */
                char hostport[64];
                int fd;

                (void) snprintf(hostport, sizeof(hostport), "[::1]:%u", echo6->port);
                fd = tunnel(&sb, hostport);
                echo_through(fd, "over CONNECT v6");
                (void) close(fd);
        }
        {
                /* BIND: command not supported. */
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_SOCKS_PORT);
                uint8_t req[10] = { 5, 2, 0, 1, 127, 0, 0, 1, 0, 80 };
                uint8_t rep[10];

                socks_greet(fd);
                cr_assert_eq(send(fd, req, sizeof(req), MSG_NOSIGNAL), 10);
                cr_assert_eq(read(fd, rep, sizeof(rep)), 10);
                cr_assert_eq(rep[1], 7);
        }
        {
                /* Only username/password offered: no acceptable method. */
                _cleanup_close_ int fd = sb_connect(&sb, "127.0.0.1", EGRESS_SOCKS_PORT);

                cr_assert_eq(send(fd, "\x05\x01\x02", 3, MSG_NOSIGNAL), 3);
                cr_assert_eq(read(fd, r, 2), 2);
                cr_assert_eq(r[1], 0xff);
        }
        (void) egress_session_close(s);
        cr_assert(seen_find(EGRESS_EVENT_REFUSED, "evil.test", 443, &ev));
        cr_assert_str_eq(ev.via, "socks5");
        cr_assert(seen_find(EGRESS_EVENT_OPEN, "::1", echo6->port, &ev));
        cr_assert(seen_find(EGRESS_EVENT_OPEN, "db.test", named->port, &ev));
        cr_assert_str_eq(ev.address, "10.9.8.2");
        (void) egress_free(lab_egress);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

/* The forwarder tests' setup: a sandbox, echo servers behind a name (db.test, 10.9.8.2) and an
 * address (LITERAL_ADDR), and a session whose layout allows both, its named forwarders on net. */
struct two_forwards {
        struct sandbox sb;
        struct srv *named, *literal;
        struct egress_policy *layout;
        struct egress_session *s;
};

static void two_forwards_open(struct two_forwards *t, enum egress_forward_net net)
{
        lab_host();
        t->sb = sandbox_start();
        t->named = srv_start("10.9.8.2", SRV_ECHO);
        t->literal = srv_start(LITERAL_ADDR, SRV_ECHO);
        t->layout = policy_of("{\"mode\": \"allow\", \"allow\": [\"db.test:%u\", \"" LITERAL_ADDR
                              ":%u\"]}",
                              t->named->port, t->literal->port);
        t->s = session_in(engine(NULL, 0), &t->sb, t->layout, net, NULL, "s-1");
}

static void two_forwards_close(struct two_forwards *t)
{
        (void) egress_session_close(t->s);
        (void) egress_free(lab_egress);
        egress_policy_free(t->layout);
        sandbox_stop(&t->sb);
}

Test(egress_proxy, forwarders_by_name_and_address)
{
        struct two_forwards t;
        struct egress_policy *narrowed;
        struct seen ev;
        char buf[64];

        two_forwards_open(&t, EGRESS_FORWARD_LOOPBACK);
        {
                /* The sandbox's /etc/hosts maps db.test to 127.0.1.1. */
                _cleanup_close_ int fd = sb_connect(&t.sb, "127.0.1.1", t.named->port);

                echo_through(fd, "by name");
        }
        {
                /* The address itself was added to the sandbox's loopback. */
                _cleanup_close_ int fd = sb_connect(&t.sb, LITERAL_ADDR, t.literal->port);

                echo_through(fd, "by address");
        }
        cr_assert(seen_find(EGRESS_EVENT_OPEN, "db.test", t.named->port, &ev));
        cr_assert_str_eq(ev.via, "forward");
        cr_assert_str_eq(ev.address, "10.9.8.2");
        cr_assert(seen_find(EGRESS_EVENT_OPEN, LITERAL_ADDR, t.literal->port, &ev));

        /* The session narrows the name away: its forwarder refuses, the other still works. */
        narrowed = policy_of("{\"mode\": \"allow\", \"allow\": [\"" LITERAL_ADDR ":%u\"]}",
                             t.literal->port);
        cr_assert_eq(egress_session_set_policy(t.s, narrowed), 0);
        {
                _cleanup_close_ int fd = sb_connect(&t.sb, "127.0.1.1", t.named->port);

                (void) send(fd, "x", 1, MSG_NOSIGNAL);
                cr_assert_eq(read_all(fd, buf, sizeof(buf)), 0, "closed at once");
        }
        {
                _cleanup_close_ int fd = sb_connect(&t.sb, LITERAL_ADDR, t.literal->port);

                echo_through(fd, "still");
        }
        (void) egress_session_close(t.s);
        t.s = NULL;
        cr_assert(seen_find(EGRESS_EVENT_REFUSED, "db.test", t.named->port, &ev));
        cr_assert_str_eq(ev.via, "forward");
        cr_assert_str_eq(ev.reason, "not in the allow-list");
        two_forwards_close(&t);
        egress_policy_free(narrowed);
}

/* A microVM guest's forwarders (EGRESS_FORWARD_GUEST): the named rule's at 10.0.3.1, added to
 * the namespace's loopback (QEMU's user network connects there for the guest), nothing at
 * 127.0.1.1; the address rule's at the address, as for any sandbox. */
Test(egress_proxy, guest_forwarders_listen_on_the_guest_net)
{
        struct two_forwards t;
        struct seen ev;

        two_forwards_open(&t, EGRESS_FORWARD_GUEST);
        {
                _cleanup_close_ int fd = sb_connect(&t.sb, "10.0.3.1", t.named->port);

                echo_through(fd, "by name, from a guest");
        }
        {
                _cleanup_close_ int fd = sb_connect(&t.sb, LITERAL_ADDR, t.literal->port);

                echo_through(fd, "by address, from a guest");
        }
        cr_assert_eq(sb_try_connect(&t.sb, "127.0.1.1", t.named->port), -ECONNREFUSED,
                     "no forwarder on the loopback's 127.0.1.N for a guest");
        cr_assert(seen_find(EGRESS_EVENT_OPEN, "db.test", t.named->port, &ev));
        cr_assert_str_eq(ev.via, "forward");
        cr_assert_str_eq(ev.address, "10.9.8.2");
        two_forwards_close(&t);
}

Test(egress_proxy, forbidden_addresses_whatever_the_rules)
{
        struct sockaddr_storage daemon_addr = { 0 };
        struct sockaddr_in *d = (struct sockaddr_in *) &daemon_addr;
        struct egress_denylist deny = { .listen = &daemon_addr, .n_listen = 1 };
        struct egress_policy *p;
        struct egress_session *s;
        struct sandbox sb;
        struct srv *daemon_srv, *mixed;
        char req[256], answer[2048];
        struct seen ev;

        lab_host();
        sb = sandbox_start();
        daemon_srv = srv_start("127.0.0.1", SRV_ECHO);
        mixed = srv_start("10.9.8.3", SRV_ECHO);
        d->sin_family = AF_INET;
        d->sin_port = htons(daemon_srv->port);
        (void) inet_pton(AF_INET, "127.0.0.1", &d->sin_addr);
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"0.0.0.0/0:80\", \"[::/0]:80\", "
                      "\"meta.test:80\", \"mixed.test:%u\", \"127.0.0.0/8:%u\", "
                      "\"loop.test:%u\"]}",
                      mixed->port, daemon_srv->port, mixed->port);
        s = session(engine(&deny, 0), &sb, p, NULL, "s-1");

        http_exchange(&sb, "CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n", answer, sizeof(answer));
        cr_assert(strstr(answer, "HTTP/1.1 403 "), "%s", answer);
        cr_assert(strstr(answer, "CONNECT 169.254.169.254:80 refused: 169.254.169.254 is the "
                                 "cloud metadata address (profile 'lab')"),
                  "%s", answer);
        http_exchange(&sb, "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n", answer,
                      sizeof(answer));
        cr_assert(strstr(answer, "GET 169.254.169.254:80 refused: 169.254.169.254 is the cloud "
                                 "metadata address"),
                  "%s", answer);
        http_exchange(&sb, "CONNECT [::ffff:169.254.169.254]:80 HTTP/1.1\r\n\r\n", answer,
                      sizeof(answer));
        cr_assert(strstr(answer, "HTTP/1.1 403 "), "%s", answer);
        /* A name that resolves to the metadata address, or to it among others. */
        http_exchange(&sb, "CONNECT meta.test:80 HTTP/1.1\r\n\r\n", answer, sizeof(answer));
        cr_assert(strstr(answer, "CONNECT meta.test:80 refused: meta.test resolves to a forbidden "
                                 "address: 169.254.169.254 is the cloud metadata address"),
                  "%s", answer);
        (void) snprintf(req, sizeof(req), "CONNECT mixed.test:%u HTTP/1.1\r\n\r\n", mixed->port);
        http_exchange(&sb, req, answer, sizeof(answer));
        cr_assert(strstr(answer, "mixed.test resolves to a forbidden address"), "%s", answer);
        /* A name rule whose name resolves to the host's loopback: no address rule opens that
         * port there, so the host's own services stay out of reach. */
        (void) snprintf(req, sizeof(req), "CONNECT loop.test:%u HTTP/1.1\r\n\r\n", mixed->port);
        http_exchange(&sb, req, answer, sizeof(answer));
        cr_assert(strstr(answer, "HTTP/1.1 403 "), "%s", answer);
        cr_assert(strstr(answer, "loop.test resolves to the host's loopback"), "%s", answer);
        /* The daemon's own port, on any loopback address. */
        (void) snprintf(req, sizeof(req), "CONNECT 127.0.0.5:%u HTTP/1.1\r\n\r\n",
                        daemon_srv->port);
        http_exchange(&sb, req, answer, sizeof(answer));
        cr_assert(strstr(answer, "HTTP/1.1 403 "), "%s", answer);
        cr_assert(strstr(answer, "daemon"), "%s", answer);

        (void) egress_session_close(s);
        cr_assert(seen_find(EGRESS_EVENT_REFUSED, "meta.test", 80, &ev));
        cr_assert(strstr(ev.reason, "metadata"), "%s", ev.reason);
        cr_assert(!seen_find(EGRESS_EVENT_OPEN, "mixed.test", mixed->port, &ev));
        (void) egress_free(lab_egress);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

Test(egress_proxy, max_connections_per_session)
{
        struct egress_policy *p;
        struct egress_session *s;
        struct sandbox sb;
        struct srv *echo;
        char hostport[64], req[256], answer[2048];
        int a, b, c = -1;
        json_t *u;

        lab_host();
        sb = sandbox_start();
        echo = srv_start("127.0.0.1", SRV_ECHO);
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:%u\"], "
                      "\"max_connections\": 2}",
                      echo->port);
        s = session(engine(NULL, 0), &sb, p, NULL, "s-1");
        (void) snprintf(hostport, sizeof(hostport), "127.0.0.1:%u", echo->port);
        (void) snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\n\r\n", hostport);

        a = tunnel(&sb, hostport);
        b = tunnel(&sb, hostport);
        http_exchange(&sb, req, answer, sizeof(answer));
        cr_assert(strstr(answer, "HTTP/1.1 403 "), "%s", answer);
        cr_assert(strstr(answer, "refused: too many connections (max 2) for session (profile "
                                 "'lab')"),
                  "%s", answer);
        echo_through(a, "a still works");
        /* Once one closes, its slot frees (when its thread has ended: try a few times). */
        (void) close(b);
        for (int i = 0; i < 200 && c < 0; i++) {
                int fd = sb_connect(&sb, "127.0.0.1", EGRESS_PROXY_PORT);

                send_text(fd, req);
                read_until(fd, answer, sizeof(answer), "\r\n\r\n");
                if (strstr(answer, " 200 ")) {
                        c = fd;
                } else {
                        (void) close(fd);
                        (void) usleep(10000);
                }
        }
        cr_assert_geq(c, 0, "a slot freed after a close");
        echo_through(c, "c works");
        u = egress_session_take_usage(s);
        cr_assert_geq(num(u, "refused"), 1);
        cr_assert_eq(num(u, "connections"), 3);
        json_decref(u);
        (void) close(a);
        (void) close(c);
        (void) egress_session_close(s);
        (void) egress_free(lab_egress);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

Test(egress_proxy, max_bytes_cuts_and_refuses)
{
        struct egress_policy *p;
        struct egress_session *s;
        struct sandbox sb;
        struct srv *source;
        char hostport[64], req[256], answer[2048];
        _cleanup_free_ char *big = malloc(SOURCE_BYTES + 1);
        struct seen ev;
        size_t got;
        int fd;
        json_t *u;

        lab_host();
        sb = sandbox_start();
        source = srv_start("127.0.0.1", SRV_SOURCE);
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:%u\"], "
                      "\"max_bytes\": \"4KiB\"}",
                      source->port);
        s = session(engine(NULL, 0), &sb, p, NULL, "s-1");
        (void) snprintf(hostport, sizeof(hostport), "127.0.0.1:%u", source->port);

        fd = tunnel(&sb, hostport);
        got = read_all(fd, big, SOURCE_BYTES + 1);
        (void) close(fd);
        cr_assert_leq(got, 4096, "no more than the cap went through: %zu", got);
        cr_assert_gt(got, 0);

        (void) snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\n\r\n", hostport);
        http_exchange(&sb, req, answer, sizeof(answer));
        cr_assert(strstr(answer, "refused: the session's byte limit (4096 bytes) is used up"), "%s",
                  answer);
        u = egress_session_totals(s);
        cr_assert_leq(num(u, "bytes_in") + num(u, "bytes_out"), 4096);
        json_decref(u);
        (void) egress_session_close(s);
        cr_assert(seen_find(EGRESS_EVENT_CLOSE, "127.0.0.1", source->port, &ev));
        cr_assert(strstr(ev.reason, "byte limit (4096 bytes) was reached"), "%s", ev.reason);
        (void) egress_free(lab_egress);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

/* Two connections download at once into a session's byte limit: it is reached when the bytes
 * moved reach it, not when one connection's read under way holds the rest of it. */
Test(egress_proxy, max_bytes_reached_exactly_by_concurrent_downloads)
{
        struct one_upstream up;
        static char sink[256 * 1024];
        struct pollfd pf[2];
        int open_fds = 2;
        json_t *u;

        one_upstream_open(&up, SRV_FLOOD, ", \"max_bytes\": \"3MiB\"");
        for (int i = 0; i < 2; i++)
                pf[i] = (struct pollfd){ .fd = tunnel(&up.sb, up.hostport), .events = POLLIN };
        for (int i = 0; i < 2; i++) /* both open: go */
                send_text(pf[i].fd, "g");
        while (open_fds > 0) {
                cr_assert_gt(poll(pf, 2, 10000), 0, "no end to the downloads within 10 s");
                for (int i = 0; i < 2; i++) {
                        if (pf[i].fd < 0 || !pf[i].revents)
                                continue;
                        if (read(pf[i].fd, sink, sizeof(sink)) <= 0) {
                                (void) close(pf[i].fd);
                                pf[i].fd = -1;
                                open_fds--;
                        }
                }
        }
        u = egress_session_totals(up.s);
        cr_assert_eq(num(u, "bytes_in") + num(u, "bytes_out"), 3 << 20,
                     "the limit was reached at %lld bytes in, %lld out",
                     (long long) num(u, "bytes_in"), (long long) num(u, "bytes_out"));
        json_decref(u);
        one_upstream_close(&up);
}

/* One session at its cap and flooding; another session's traffic still goes through. */
Test(egress_proxy, flood_in_one_session_leaves_another_alone)
{
        struct egress_policy *p;
        struct egress_session *s1, *s2;
        struct sandbox sb1, sb2;
        struct srv *echo;
        struct egress *e;
        char hostport[64];
        int held, flood[40], fd;

        lab_host();
        sb1 = sandbox_start();
        sb2 = sandbox_start();
        echo = srv_start("127.0.0.1", SRV_ECHO);
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:%u\"], "
                      "\"max_connections\": 1}",
                      echo->port);
        e = engine(NULL, 0);
        s1 = session(e, &sb1, p, NULL, "s-1");
        s2 = session(e, &sb2, p, NULL, "s-2");
        (void) snprintf(hostport, sizeof(hostport), "127.0.0.1:%u", echo->port);

        held = tunnel(&sb1, hostport);
        /* Connections that never send a byte: past the cap, a few get a thread that waits for
         * a request to refuse, the rest are closed at once. */
        for (size_t i = 0; i < sizeof(flood) / sizeof(flood[0]); i++)
                flood[i] = sb_connect(&sb1, "127.0.0.1", EGRESS_PROXY_PORT);
        fd = tunnel(&sb2, hostport);
        echo_through(fd, "the other session is served");
        (void) close(fd);
        echo_through(held, "and the held one too");

        /* Closing the session with connections open (in handshake and relaying) cuts them. */
        (void) egress_session_close(s1);
        {
                char buf[64];

                cr_assert_eq(read_all(held, buf, sizeof(buf)), 0);
        }
        for (size_t i = 0; i < sizeof(flood) / sizeof(flood[0]); i++)
                (void) close(flood[i]);
        (void) close(held);
        (void) egress_session_close(s2);
        (void) egress_free(e);
        egress_policy_free(p);
        sandbox_stop(&sb1);
        sandbox_stop(&sb2);
}

Test(egress_proxy, free_closes_open_sessions)
{
        struct egress_policy *p;
        struct sandbox sb;
        struct srv *echo;
        char hostport[64], buf[64];
        int fd, idle;

        lab_host();
        sb = sandbox_start();
        echo = srv_start("127.0.0.1", SRV_ECHO);
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"127.0.0.1:%u\"]}", echo->port);
        (void) session(engine(NULL, 0), &sb, p, NULL, "s-1");
        (void) snprintf(hostport, sizeof(hostport), "127.0.0.1:%u", echo->port);
        fd = tunnel(&sb, hostport);
        idle = sb_connect(&sb, "127.0.0.1", EGRESS_PROXY_PORT);
        send_text(idle, "CONNECT 127.0.0.1:");
        (void) egress_free(lab_egress);
        cr_assert_eq(read_all(fd, buf, sizeof(buf)), 0);
        cr_assert_eq(read_all(idle, buf, sizeof(buf)), 0);
        (void) close(fd);
        (void) close(idle);
        egress_policy_free(p);
        sandbox_stop(&sb);
}

Test(egress_proxy, open_refuses_own_namespace_and_mode_none)
{
        struct egress_policy *p, *none;
        struct egress *e;
        struct egress_session *s = NULL;
        struct airlock_error err = { "" };
        int self;

        lab_host();
        p = policy_of("{\"mode\": \"allow\", \"allow\": [\"db.test:5432\"]}");
        none = policy_of("\"none\"");
        e = engine(NULL, 0);
        self = (int) syscall(SYS_pidfd_open, getpid(), 0);
        cr_assert_geq(self, 0);
        cr_assert_eq(egress_session_open(e, self, p, EGRESS_FORWARD_LOOPBACK, p, NULL, &s, &err),
                     -EPERM);
        cr_assert(strstr(err.msg, "shares the daemon's network namespace"), "%s", err.msg);
        cr_assert_eq(
                egress_session_open(e, self, none, EGRESS_FORWARD_LOOPBACK, none, NULL, &s, &err),
                -EINVAL);
        cr_assert_null(s);
        (void) close(self);
        (void) egress_free(e);
        egress_policy_free(p);
        egress_policy_free(none);
}

/* ---- the HTTP parser (no privileges needed) ---- */

static int parse(const char *text, struct http_request *req, char *why, size_t size)
{
        size_t end = http_head_end(text, strlen(text), 0);

        cr_assert_gt(end, 0, "no head end in %s", text);
        return http_request_parse(text, end, req, why, size);
}

Test(egress_http, connect_and_absolute_targets)
{
        struct http_request req;
        char why[256] = "";

        cr_assert_eq(parse("CONNECT [fd00::7]:5432 HTTP/1.1\r\n\r\n", &req, why, sizeof(why)), 0,
                     "%s", why);
        cr_assert(req.is_connect);
        cr_assert(req.host_bracketed);
        cr_assert_eq(req.host_len, 7);
        cr_assert_eq(strncmp(req.host, "fd00::7", 7), 0);
        cr_assert_eq(req.port, 5432);
        cr_assert_eq(parse("GET HTTP://Example.com?x=1 HTTP/1.0\r\nA: b\r\n\r\n", &req, why,
                           sizeof(why)),
                     0, "%s", why);
        cr_assert(!req.is_connect);
        cr_assert_eq(req.port, 80);
        cr_assert_eq(req.path_len, 4);
        cr_assert_eq(req.n_fields, 1);
        cr_assert_eq(req.minor, 0);
        cr_assert_eq(parse("connect a:1 HTTP/1.1\r\n\r\n", &req, why, sizeof(why)), -EBADMSG,
                     "methods are case-sensitive");
        cr_assert_eq(parse("GET http://a:0/ HTTP/1.1\r\n\r\n", &req, why, sizeof(why)), -EBADMSG);
        cr_assert_eq(parse("GET http://a:080/ HTTP/1.1\r\n\r\n", &req, why, sizeof(why)), -EBADMSG);
        cr_assert_eq(parse("GET http://a/#f HTTP/1.1\r\n\r\n", &req, why, sizeof(why)), -EBADMSG);
        cr_assert_eq(parse("GET  http://a/ HTTP/1.1\r\n\r\n", &req, why, sizeof(why)), -EBADMSG);
        cr_assert_eq(parse("GET http://a/ HTTP/1.1\r\nName : v\r\n\r\n", &req, why, sizeof(why)),
                     -EBADMSG);
        cr_assert(strstr(why, "whitespace before ':'"), "%s", why);
}

Test(egress_http, forward_head_and_smuggling_checks)
{
        struct http_request req;
        struct buf out = { 0 };
        char why[256] = "";

        cr_assert_eq(parse("POST http://a.test:8080/p HTTP/1.1\r\nHost: A.TEST:8080\r\n"
                           "Connection: Keep-Alive, X-A\r\nX-A: 1\r\nTE: trailers\r\n"
                           "Upgrade: h2c\r\nProxy-Authorization: x\r\nContent-Length: 3\r\n\r\n",
                           &req, why, sizeof(why)),
                     0, "%s", why);
        cr_assert_eq(http_request_check_forward(&req, why, sizeof(why)), 0, "%s", why);
        cr_assert_eq(http_request_forward_head(&req, &out), 0);
        cr_assert_str_eq(out.data, "POST /p HTTP/1.1\r\nHost: A.TEST:8080\r\n"
                                   "Content-Length: 3\r\nConnection: close\r\n\r\n");
        buf_done(&out);

        cr_assert_eq(parse("GET http://a.test/ HTTP/1.1\r\nHost: a.test:81\r\n\r\n", &req, why,
                           sizeof(why)),
                     0);
        cr_assert_eq(http_request_check_forward(&req, why, sizeof(why)), -EBADMSG);
        cr_assert_eq(parse("GET http://a.test/ HTTP/1.1\r\nHost: a.test:80\r\n\r\n", &req, why,
                           sizeof(why)),
                     0);
        cr_assert_eq(http_request_check_forward(&req, why, sizeof(why)), 0, "%s", why);
        cr_assert_eq(parse("GET http://a.test/ HTTP/1.1\r\nConnection: Content-Length\r\n"
                           "Content-Length: 0\r\n\r\n",
                           &req, why, sizeof(why)),
                     0);
        cr_assert_eq(http_request_check_forward(&req, why, sizeof(why)), -EBADMSG);
        cr_assert(strstr(why, "framing"), "%s", why);
        cr_assert_eq(parse("GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\n"
                           "Content-Length: 1\r\n\r\n",
                           &req, why, sizeof(why)),
                     0);
        cr_assert_eq(http_request_check_forward(&req, why, sizeof(why)), -EBADMSG);
        cr_assert_eq(parse("GET http://a.test/ HTTP/1.1\r\nContent-Length: +1\r\n\r\n", &req, why,
                           sizeof(why)),
                     0);
        cr_assert_eq(http_request_check_forward(&req, why, sizeof(why)), -EBADMSG);
}

Test(egress_http, response_heads)
{
        const char *resp = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: "
                           "keep-alive, X-B\r\nX-B: 1\r\nKeep-Alive: 5\r\nContent-Length: 2\r\n"
                           "\r\nhi";
        struct buf out = { 0 };
        size_t used = 0;
        bool final = true;

        cr_assert_eq(http_response_head(resp, strlen(resp), &used, &out, &final), 0);
        cr_assert_not(final);
        cr_assert_str_eq(out.data, "HTTP/1.1 100 Continue\r\n\r\n");
        cr_assert_eq(http_response_head(resp + used, strlen(resp) - used, &used, &out, &final), 0);
        cr_assert(final);
        cr_assert_str_eq(out.data, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
                                   "Content-Length: 2\r\nConnection: close\r\n\r\n");
        buf_done(&out);
        cr_assert_eq(http_response_head("HTTP/1.1 200", 12, &used, &out, &final), -EAGAIN);
        cr_assert_eq(http_response_head("SSH-2.0-x\r\n\r\n", 13, &used, &out, &final), -EBADMSG);
        buf_done(&out);
}

Test(egress_http, request_body_framing)
{
        const char *chunked = "4\r\nwiki\r\n5;ext=1\r\npedia\r\n0\r\nX: y\r\n\r\nGET";
        struct http_body b = { .chunked = true };
        struct http_body cl = { .left = 10 };

        /* Byte by byte, as it may arrive. */
        for (size_t i = 0; i < strlen(chunked) - 3; i++) {
                cr_assert_not(b.done, "done early at %zu", i);
                cr_assert_eq(http_body_feed(&b, chunked + i, 1), 1, "at %zu", i);
        }
        cr_assert(b.done);
        cr_assert_eq(http_body_feed(&b, "GET", 3), 0);
        b = (struct http_body){ .chunked = true };
        cr_assert_eq(http_body_feed(&b, chunked, strlen(chunked)), (ssize_t) strlen(chunked) - 3);
        cr_assert_eq(http_body_feed(&cl, "0123456789GET", 13), 10);
        cr_assert(cl.done);
        b = (struct http_body){ .chunked = true };
        cr_assert_eq(http_body_feed(&b, "x\r\n", 3), -EBADMSG);
        b = (struct http_body){ .chunked = true };
        cr_assert_eq(http_body_feed(&b, "4\r\nwikiX", 8), -EBADMSG);
        b = (struct http_body){ .chunked = true };
        cr_assert_eq(http_body_feed(&b, "1111111111111111\r\n", 18), -EBADMSG, "too many digits");
}
