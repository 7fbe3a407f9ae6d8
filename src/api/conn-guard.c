/* Connection deadlines and room-making (conn-guard.h). Every open connection is an entry in one
 * list, kept in the order of its last phase change (oldest first), under one lock. A reaper
 * thread closes the overdue ones every REAP_MS; the room-making runs in the notification of a
 * new connection, so the newcomer always fits.
 *
 * Closing is shutdown(2) of the socket, never close(2): libmicrohttpd owns the descriptor, sees
 * the end of the stream, and frees the connection through its own path. It notifies
 * MHD_CONNECTION_NOTIFY_CLOSED (which takes the entry out under the lock) before it closes the
 * descriptor, so the number an entry holds is always still that connection's. */
#include "conn-guard.h"

#include "base/cidr.h"
#include "base/log.h"
#include "base/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define REAP_MS 200
#define BODY_NS_PER_MIB 1000000000ull /* a body gets one more second per MiB it declared */

enum phase { PHASE_HEADERS, PHASE_BODY, PHASE_ACTIVE, PHASE_IDLE };

static const char *const phase_what[] = {
        [PHASE_HEADERS] = "no complete request headers",
        [PHASE_BODY] = "the request body was not complete",
};

struct entry {
        struct entry *prev, *next;
        struct conn_guard *guard;
        int fd;
        bool has_ip;          /* TCP: counted against the cap per client address */
        unsigned char ip[16]; /* IPv4 as ::ffff:a.b.c.d */
        enum phase phase;
        uint64_t deadline_ns; /* 0 = none */
        bool closing;
        char addr[INET6_ADDRSTRLEN + 8];
};

struct conn_guard {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t reaper;
        bool reaper_started, ending;
        struct entry *head, *tail; /* oldest phase change first */
        unsigned n_open;
        unsigned high_water;        /* above this, a new connection makes room */
        unsigned max_per_client;    /* 0 = no cap */
        const struct cidr *trusted; /* --trusted-proxies: exempt from the cap (borrowed) */
        size_t n_trusted;
        uint64_t request_timeout_ns;
        /* What happened since the reaper last logged: one line per round, not per connection,
         * however many a flood brings. */
        unsigned late[2], evicted, refused;
        char last_addr[INET6_ADDRSTRLEN + 8];
};

static void list_unlink(struct conn_guard *g, struct entry *e)
{
        if (e->prev)
                e->prev->next = e->next;
        else
                g->head = e->next;
        if (e->next)
                e->next->prev = e->prev;
        else
                g->tail = e->prev;
        e->prev = e->next = NULL;
}

static void list_append(struct conn_guard *g, struct entry *e)
{
        e->prev = g->tail;
        e->next = NULL;
        if (g->tail)
                g->tail->next = e;
        else
                g->head = e;
        g->tail = e;
}

/* With g->lock held. */
static void close_entry(struct conn_guard *g, struct entry *e)
{
        e->closing = true;
        (void) shutdown(e->fd, SHUT_RDWR);
        (void) snprintf(g->last_addr, sizeof(g->last_addr), "%s", e->addr);
}

/* The client's address, for the log and (TCP) the cap per client. */
static void entry_set_addr(struct entry *e, struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;
        char ip[INET6_ADDRSTRLEN];

        if (sa && sa->sa_family == AF_INET) {
                const struct in_addr *a = &((const struct sockaddr_in *) sa)->sin_addr;
                e->has_ip = true;
                e->ip[10] = e->ip[11] = 0xff;
                memcpy(e->ip + 12, a, 4);
                if (inet_ntop(AF_INET, a, ip, sizeof(ip)))
                        (void) snprintf(e->addr, sizeof(e->addr), "%s", ip);
        } else if (sa && sa->sa_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *) sa)->sin6_addr;
                e->has_ip = true;
                memcpy(e->ip, a, 16);
                if (inet_ntop(AF_INET6, a, ip, sizeof(ip)))
                        (void) snprintf(e->addr, sizeof(e->addr), "[%s]", ip);
        } else {
                (void) snprintf(e->addr, sizeof(e->addr), "unix");
        }
}

static bool same_client(const struct entry *a, const struct entry *b)
{
        return a->has_ip && b->has_ip && memcmp(a->ip, b->ip, sizeof(a->ip)) == 0;
}

/* With g->lock held: closes the oldest connection (of the newcomer's own address when
 * same_addr) in one of the phases a client holds without being served (idle, or still
 * sending its headers), else the oldest still sending a body; never the newcomer itself.
 * Returns false when there was none. */
static bool make_room_locked(struct conn_guard *g, const struct entry *newcomer, bool same_addr)
{
        struct entry *body = NULL;

        for (struct entry *e = g->head; e; e = e->next) {
                if (e->closing || e == newcomer || (same_addr && !same_client(e, newcomer)))
                        continue;
                if (e->phase == PHASE_IDLE || e->phase == PHASE_HEADERS) {
                        close_entry(g, e);
                        g->evicted++;
                        return true;
                }
                if (e->phase == PHASE_BODY && !body)
                        body = e;
        }
        if (!body)
                return false;
        close_entry(g, body);
        g->evicted++;
        return true;
}

/* Whether the client closed or reset its end. POLLRDHUP is its FIN, even with unread bytes
 * before it (poll(2)). */
static bool client_gone(int fd)
{
        struct pollfd p = { .fd = fd, .events = POLLRDHUP };

        return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* With g->lock held: how many of the newcomer's address's connections being served have lost
 * their client, counting only until n - gone is below the cap. libmicrohttpd polls no
 * suspended connection, so it learns of such a hang-up only when it writes the reply; and a
 * reply can reach the client, which reads it and closes, before libmicrohttpd notifies the
 * request complete (a client that makes a request, closes and reconnects at once). Counted,
 * these would refuse the address's next connections, or make room by closing its live ones.
 * The other phases need no asking: libmicrohttpd sees their hang-ups, and they make room. */
static unsigned served_gone_locked(struct conn_guard *g, const struct entry *newcomer, unsigned n)
{
        unsigned gone = 0;

        for (struct entry *e = g->head; e && n - gone >= g->max_per_client; e = e->next)
                if (e->phase == PHASE_ACTIVE && !e->closing && same_client(e, newcomer) &&
                    client_gone(e->fd))
                        gone++;
        return gone;
}

/* With g->lock held: the newcomer's address may hold max_per_client connections. Past that,
 * its own oldest idle or half-sent one makes room (so a flood from an address does not lock
 * out a real client from the same address, such as every client of a loopback listener);
 * when all of them are being served, the newcomer is refused. The poll(2) for hang-ups runs
 * only when the cap would be hit, so a new connection below it costs no system call. */
static void cap_per_client_locked(struct conn_guard *g, struct entry *newcomer)
{
        unsigned n = 0;

        if (!g->max_per_client || !newcomer->has_ip)
                return;
        /* A front door is one address for all its clients, and limits each itself. */
        if (g->n_trusted && cidr_list_match(g->trusted, g->n_trusted, newcomer->ip))
                return;
        for (struct entry *e = g->head; e; e = e->next)
                if (e != newcomer && !e->closing && same_client(e, newcomer))
                        n++;
        if (n >= g->max_per_client)
                n -= served_gone_locked(g, newcomer, n);
        if (n < g->max_per_client || make_room_locked(g, newcomer, true))
                return;
        close_entry(g, newcomer);
        g->refused++;
}

void conn_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
        struct conn_guard *g = cls;
        struct entry *e = *socket_context;

        if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                if (!e)
                        return;
                pthread_mutex_lock(&g->lock);
                list_unlink(g, e);
                g->n_open--;
                pthread_mutex_unlock(&g->lock);
                free(e);
                *socket_context = NULL;
                return;
        }

        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        e = calloc(1, sizeof(*e));
        if (!e || !ci) {
                /* Untracked: it still has libmicrohttpd's own timeout. */
                free(e);
                return;
        }
        e->guard = g;
        e->fd = ci->connect_fd;
        e->phase = PHASE_HEADERS;
        e->deadline_ns = now_ns() + g->request_timeout_ns;
        entry_set_addr(e, conn);
        pthread_mutex_lock(&g->lock);
        list_append(g, e);
        g->n_open++;
        cap_per_client_locked(g, e);
        if (!e->closing && g->n_open > g->high_water)
                (void) make_room_locked(g, e, false);
        pthread_mutex_unlock(&g->lock);
        *socket_context = e;
}

static struct entry *entry_of(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return ci ? ci->socket_context : NULL;
}

static void set_phase(struct MHD_Connection *conn, enum phase phase, uint64_t deadline_ns)
{
        struct entry *e = entry_of(conn);
        struct conn_guard *g;

        if (!e)
                return;
        g = e->guard;
        pthread_mutex_lock(&g->lock);
        e->phase = phase;
        e->deadline_ns = deadline_ns;
        list_unlink(g, e);
        list_append(g, e);
        pthread_mutex_unlock(&g->lock);
}

void conn_guard_body(struct MHD_Connection *conn, uint64_t declared)
{
        struct entry *e = entry_of(conn);
        uint64_t allowance;

        if (!e)
                return;
        allowance = e->guard->request_timeout_ns + (declared >> 20) * BODY_NS_PER_MIB;
        set_phase(conn, PHASE_BODY, now_ns() + allowance);
}

void conn_guard_active(struct MHD_Connection *conn)
{
        set_phase(conn, PHASE_ACTIVE, 0);
}

void conn_guard_idle(struct MHD_Connection *conn)
{
        set_phase(conn, PHASE_IDLE, 0);
}

static void *reaper(void *userdata)
{
        struct conn_guard *g = userdata;
        struct timespec ts;

        pthread_mutex_lock(&g->lock);
        while (!g->ending) {
                uint64_t now = now_ns();
                unsigned late[2], evicted, refused, n_open;
                char addr[sizeof(g->last_addr)];

                for (struct entry *e = g->head; e; e = e->next)
                        if (!e->closing && e->deadline_ns && now >= e->deadline_ns &&
                            (e->phase == PHASE_HEADERS || e->phase == PHASE_BODY)) {
                                close_entry(g, e);
                                g->late[e->phase]++;
                        }
                memcpy(late, g->late, sizeof(late));
                evicted = g->evicted;
                refused = g->refused;
                n_open = g->n_open;
                memcpy(addr, g->last_addr, sizeof(addr));
                memset(g->late, 0, sizeof(g->late));
                g->evicted = g->refused = 0;
                pthread_mutex_unlock(&g->lock);

                for (int p = PHASE_HEADERS; p <= PHASE_BODY; p++)
                        if (late[p])
                                log_warn("closed %u connection%s: %s within the request timeout "
                                         "(latest from %s)",
                                         late[p], late[p] == 1 ? "" : "s", phase_what[p], addr);
                if (evicted)
                        log_warn("closed %u idle or half-sent connection%s to make room for new "
                                 "ones (%u open; latest from %s)",
                                 evicted, evicted == 1 ? "" : "s", n_open, addr);
                if (refused)
                        log_warn("refused %u connection%s from an address whose %u connections "
                                 "are all being served (--max-connections-per-client; latest "
                                 "from %s)",
                                 refused, refused == 1 ? "" : "s", g->max_per_client, addr);

                (void) clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_nsec += REAP_MS * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                pthread_mutex_lock(&g->lock);
                if (!g->ending)
                        (void) pthread_cond_timedwait(&g->wake, &g->lock, &ts);
        }
        pthread_mutex_unlock(&g->lock);
        return NULL;
}

int conn_guard_new(const struct conn_guard_config *cfg, struct conn_guard **ret)
{
        struct conn_guard *g = calloc(1, sizeof(*g));
        pthread_condattr_t attr;
        unsigned reserve;
        int r;

        if (!g)
                return -ENOMEM;
        pthread_mutex_init(&g->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&g->wake, &attr);
        pthread_condattr_destroy(&attr);
        g->request_timeout_ns = cfg->request_timeout_ms * 1000000ull;
        g->max_per_client = cfg->max_per_client;
        g->trusted = cfg->trusted;
        g->n_trusted = cfg->n_trusted;
        /* Room is made before the hard limit is reached: at the limit libmicrohttpd stops
         * accepting, and a newcomer would wait in the backlog instead. */
        reserve = cfg->max_connections / 8;
        if (reserve < 2)
                reserve = 2;
        g->high_water = cfg->max_connections > reserve ? cfg->max_connections - reserve : 1;
        r = -pthread_create(&g->reaper, NULL, reaper, g);
        if (r < 0) {
                conn_guard_free(g);
                return r;
        }
        g->reaper_started = true;
        *ret = g;
        return 0;
}

struct conn_guard *conn_guard_free(struct conn_guard *g)
{
        if (!g)
                return NULL;
        pthread_mutex_lock(&g->lock);
        g->ending = true;
        pthread_cond_broadcast(&g->wake);
        pthread_mutex_unlock(&g->lock);
        if (g->reaper_started)
                (void) pthread_join(g->reaper, NULL);
        while (g->head) {
                struct entry *e = g->head;
                list_unlink(g, e);
                free(e);
        }
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
}
