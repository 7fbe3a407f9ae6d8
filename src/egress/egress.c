/* The egress proxy engine (egress.h): sessions and their listeners, the acceptor thread that
 * serves every session's listeners from one epoll set, the connection threads and their caps,
 * and events. The protocols are in http.c, socks5.c and conn.c (forwarders), the checks and
 * the connect in conn.c, the byte pump in relay.c.
 *
 * Lifetimes: a listener (and its session) stays valid while the acceptor may still hold an
 * epoll event for it, because egress_session_close() removes the listeners from the epoll set
 * and then waits for the acceptor to finish the batch it is in (e->pass). A connection thread
 * holds no reference it could outlive: the session waits for its threads, and a finished
 * thread is joined by the acceptor (or egress_free). */
#include "egress.h"

#include "egress-internal.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define DEFAULT_MAX_TOTAL 4096u
#define DEFAULT_CONNECT_TIMEOUT_MS 10000u
#define DEFAULT_LINGER_MS 30000u
/* Connections past a session's max_connections that still get a thread, to be told why they
 * are refused; past these, a connection is closed at once. */
#define REFUSERS_MAX 8u
/* Accepts per listener per epoll batch, so one flooding session cannot hold the acceptor. */
#define ACCEPT_BATCH 16
/* A connection thread needs little stack: buffers are on the heap. getaddrinfo() and the
 * sanitizers need some room. */
#define CONN_STACK_SIZE (512u * 1024u)

struct egress_info *egress_info_ref(struct egress_info *i)
{
        if (i)
                atomic_fetch_add(&i->refs, 1);
        return i;
}

struct egress_info *egress_info_unref(struct egress_info *i)
{
        if (i && atomic_fetch_sub(&i->refs, 1) == 1) {
                free(i->session);
                free(i->tenant);
                free(i->profile);
                free(i);
        }
        return NULL;
}

static int denylist_copy(const struct egress_denylist *from, struct egress_denylist *to)
{
        struct sockaddr_storage *l = NULL;

        if (from && from->n_listen > 0) {
                l = calloc(from->n_listen, sizeof(*l));
                if (!l)
                        return -ENOMEM;
                memcpy(l, from->listen, from->n_listen * sizeof(*l));
        }
        free(to->listen);
        to->listen = l;
        to->n_listen = l ? from->n_listen : 0;
        return 0;
}

static void emit(struct egress *e, struct egress_info *info, enum egress_event_type type,
                 const char *via, const struct egress_target *t, const char *address,
                 const char *reason, uint64_t bytes_in, uint64_t bytes_out)
{
        struct egress_event ev = {
                .type = type,
                .session = info->session,
                .tenant = info->tenant,
                .profile = info->profile,
                .via = via,
                .host = t ? t->host : "",
                .port = t ? t->port : 0,
                .address = address && address[0] ? address : NULL,
                .reason = reason && reason[0] ? reason : NULL,
                .bytes_in = bytes_in,
                .bytes_out = bytes_out,
        };

        e->on_event(e->userdata, &ev);
}

void egress_emit(struct egress_conn *c, enum egress_event_type type, const char *reason)
{
        struct egress_info *info;

        if (!c->e->on_event)
                return;
        (void) pthread_mutex_lock(&c->s->lock);
        info = egress_info_ref(c->s->info);
        (void) pthread_mutex_unlock(&c->s->lock);
        emit(c->e, info, type, c->via, &c->target, c->address, reason, c->bytes_in, c->bytes_out);
        (void) egress_info_unref(info);
}

void egress_wake(struct egress *e)
{
        uint64_t one = 1;

        (void) !write(e->wake_fd, &one, sizeof(one));
}

/* Ends a connection thread: the CLOSE event, then out of its session (which may be freed as
 * soon as the lock is let go) and onto the list the acceptor joins. */
static void conn_finish(struct egress_conn *c)
{
        struct egress_session *s = c->s;
        struct egress *e = c->e;

        if (c->opened)
                egress_emit(c, EGRESS_EVENT_CLOSE, c->cut_reason[0] ? c->cut_reason : NULL);

        (void) pthread_mutex_lock(&s->lock);
        if (c->prev)
                c->prev->next = c->next;
        else
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        if (c->over_cap)
                s->n_refusing--;
        else
                s->n_open--;
        c->client = safe_close_fd(c->client);
        c->upstream = safe_close_fd(c->upstream);
        if (s->n_open + s->n_refusing == 0)
                (void) pthread_cond_broadcast(&s->idle);
        (void) pthread_mutex_unlock(&s->lock);

        (void) pthread_mutex_lock(&e->lock);
        c->s = NULL;
        c->prev = NULL;
        c->next = e->zombies;
        e->zombies = c;
        e->n_live--;
        (void) pthread_cond_broadcast(&e->changed);
        egress_wake(e);
        (void) pthread_mutex_unlock(&e->lock);
}

static void *conn_thread(void *arg)
{
        struct egress_conn *c = arg;

        switch (c->listener->kind) {
        case EGRESS_LISTEN_HTTP:
                egress_http_serve(c);
                break;
        case EGRESS_LISTEN_SOCKS:
                egress_socks5_serve(c);
                break;
        case EGRESS_LISTEN_FORWARD:
                egress_forward_serve(c);
                break;
        }
        conn_finish(c);
        return NULL;
}

static const char *listener_via(const struct egress_listener *l)
{
        switch (l->kind) {
        case EGRESS_LISTEN_HTTP:
                return "http";
        case EGRESS_LISTEN_SOCKS:
                return "socks5";
        case EGRESS_LISTEN_FORWARD:
                return "forward";
        }
        return "?";
}

/* Starts a thread for a connection just accepted, or refuses it at once when the caps leave
 * no room even for a thread that would say why. Takes ownership of fd. */
static void conn_start(struct egress *e, struct egress_listener *l, int fd)
{
        static const char busy[] = "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n"
                                   "Connection: close\r\n\r\n";
        struct egress_session *s = l->session;
        const struct egress_target *t = l->kind == EGRESS_LISTEN_FORWARD ? &l->forward : NULL;
        struct egress_info *info = NULL;
        struct egress_conn *c = NULL;
        pthread_attr_t attr;
        char reason[160] = "";
        bool global_full, over_cap = false;

        (void) pthread_mutex_lock(&e->lock);
        if (s->closing || e->stopping) {
                (void) pthread_mutex_unlock(&e->lock);
                (void) close(fd);
                return;
        }
        global_full = e->n_live >= e->max_total;
        (void) pthread_mutex_lock(&s->lock);
        if (global_full) {
                (void) snprintf(reason, sizeof(reason),
                                "too many connections (max %u) for the daemon", e->max_total);
        } else if (s->n_open >= s->policy->max_connections) {
                over_cap = true;
                if (s->n_refusing >= REFUSERS_MAX)
                        (void) snprintf(reason, sizeof(reason),
                                        "too many connections (max %u) for session",
                                        s->policy->max_connections);
        }
        if (!reason[0]) {
                c = calloc(1, sizeof(*c));
                if (c) {
                        *c = (struct egress_conn){ .e = e,
                                                   .s = s,
                                                   .listener = l,
                                                   .over_cap = over_cap,
                                                   .client = fd,
                                                   .upstream = -EBADF,
                                                   .via = listener_via(l),
                                                   .deadline_ns = now_ns() + EGRESS_HANDSHAKE_MS *
                                                                                     1000000ull };
                        if (t)
                                c->target = *t;
                        (void) pthread_attr_init(&attr);
                        (void) pthread_attr_setstacksize(&attr, CONN_STACK_SIZE);
                        if (pthread_create(&c->thread, &attr, conn_thread, c) != 0)
                                c = (free(c), NULL);
                        (void) pthread_attr_destroy(&attr);
                }
                if (c) {
                        c->next = s->conns;
                        if (s->conns)
                                s->conns->prev = c;
                        s->conns = c;
                        if (over_cap)
                                s->n_refusing++;
                        else
                                s->n_open++;
                        e->n_live++;
                } else {
                        (void) snprintf(reason, sizeof(reason),
                                        "the daemon cannot start a thread for it");
                }
        }
        if (reason[0]) {
                egress_usage_add(&s->period, t ? t->host : NULL, t ? t->port : 0, 0, 1, 0, 0);
                egress_usage_add(&s->total, t ? t->host : NULL, t ? t->port : 0, 0, 1, 0, 0);
                info = egress_info_ref(s->info);
        }
        (void) pthread_mutex_unlock(&s->lock);
        (void) pthread_mutex_unlock(&e->lock);
        if (!reason[0])
                return;

        /* No thread to read the request: a short answer that needs none (the socket's buffer
         * is empty, so this does not block), then the event. */
        if (l->kind == EGRESS_LISTEN_HTTP) {
                char body[sizeof(reason) + 128];
                int n = snprintf(body, sizeof(body),
                                 "airlock egress: connection refused: %s (profile '%s')\n", reason,
                                 info->profile);

                if (n < 0 || (size_t) n >= sizeof(body))
                        n = (int) strlen(body);
                (void) !send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                (void) !send(fd, body, (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        (void) close(fd);
        if (e->on_event)
                emit(e, info, EGRESS_EVENT_REFUSED, listener_via(l), t, NULL, reason, 0, 0);
        (void) egress_info_unref(info);
}

static void accept_from(struct egress *e, struct egress_listener *l)
{
        bool closing;

        (void) pthread_mutex_lock(&e->lock);
        closing = l->session->closing;
        (void) pthread_mutex_unlock(&e->lock);
        if (closing)
                return;
        for (int i = 0; i < ACCEPT_BATCH; i++) {
                int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (fd >= 0) {
                        conn_start(e, l, fd);
                        continue;
                }
                if (errno == EMFILE || errno == ENFILE) {
                        /* Out of fds: drop the connection rather than let a listener that
                         * stays readable spin the acceptor. */
                        log_warn("egress: out of file descriptors; dropping a connection");
                        e->spare_fd = safe_close_fd(e->spare_fd);
                        fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
                        (void) safe_close_fd(fd);
                        e->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                        return;
                }
                if (errno != ECONNABORTED && errno != EINTR)
                        return; /* EAGAIN: nothing more waiting */
        }
}

/* Joins the threads that have finished (they are past their last touch of e->lock) and frees
 * their connections. */
static void reap(struct egress *e)
{
        struct egress_conn *z;

        (void) pthread_mutex_lock(&e->lock);
        z = TAKE_PTR(e->zombies);
        (void) pthread_mutex_unlock(&e->lock);
        while (z) {
                struct egress_conn *next = z->next;

                (void) pthread_join(z->thread, NULL);
                free(z);
                z = next;
        }
}

static void *acceptor_main(void *arg)
{
        struct egress *e = arg;
        struct epoll_event evs[32];
        bool stop = false;

        while (!stop) {
                int n = epoll_wait(e->epoll_fd, evs, (int) ELEMENTSOF(evs), -1);

                for (int i = 0; i < n; i++) {
                        if (evs[i].data.ptr) {
                                accept_from(e, evs[i].data.ptr);
                        } else {
                                uint64_t v;

                                (void) !read(e->wake_fd, &v, sizeof(v));
                        }
                }
                reap(e);
                (void) pthread_mutex_lock(&e->lock);
                e->pass++;
                stop = e->stopping;
                (void) pthread_cond_broadcast(&e->changed);
                (void) pthread_mutex_unlock(&e->lock);
        }
        (void) pthread_mutex_lock(&e->lock);
        e->acceptor_done = true;
        (void) pthread_cond_broadcast(&e->changed);
        (void) pthread_mutex_unlock(&e->lock);
        return NULL;
}

int egress_new(const struct egress_options *opts, struct egress **ret, struct airlock_error *err)
{
        struct egress *e;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
        int r;

        e = calloc(1, sizeof(*e));
        if (!e)
                return airlock_error_set(err, -ENOMEM, "out of memory");
        (void) pthread_mutex_init(&e->lock, NULL);
        (void) pthread_mutex_init(&e->deny_lock, NULL);
        (void) pthread_cond_init(&e->changed, NULL);
        e->wake_fd = e->spare_fd = -EBADF;
        e->max_total = opts && opts->max_connections_total ? opts->max_connections_total
                                                           : DEFAULT_MAX_TOTAL;
        e->connect_timeout_ms = opts && opts->connect_timeout_ms ? opts->connect_timeout_ms
                                                                 : DEFAULT_CONNECT_TIMEOUT_MS;
        e->linger_ms = opts && opts->linger_ms ? opts->linger_ms : DEFAULT_LINGER_MS;
        e->on_event = opts ? opts->on_event : NULL;
        e->userdata = opts ? opts->userdata : NULL;
        e->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (e->epoll_fd < 0) {
                r = airlock_error_set(err, -errno, "epoll_create1: %s", strerror(errno));
                goto fail;
        }
        e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        e->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (e->wake_fd < 0 || e->spare_fd < 0 ||
            epoll_ctl(e->epoll_fd, EPOLL_CTL_ADD, e->wake_fd, &ev) < 0) {
                r = airlock_error_set(err, -errno, "eventfd: %s", strerror(errno));
                goto fail;
        }
        if (denylist_copy(opts ? &opts->deny : NULL, &e->deny) < 0) {
                r = airlock_error_set(err, -ENOMEM, "out of memory");
                goto fail;
        }
        /* splice(2) into a socket whose peer has gone raises SIGPIPE (it has no MSG_NOSIGNAL);
         * the daemon ignores it already, a test program may not. */
        (void) signal(SIGPIPE, SIG_IGN);
        r = -pthread_create(&e->acceptor, NULL, acceptor_main, e);
        if (r < 0) {
                r = airlock_error_set(err, r, "cannot start the egress acceptor thread: %s",
                                      strerror(-r));
                goto fail;
        }
        e->acceptor_running = true;
        *ret = e;
        return 0;
fail:
        (void) egress_free(e);
        return r;
}

struct egress *egress_free(struct egress *e)
{
        if (!e)
                return NULL;
        for (;;) {
                struct egress_session *s;

                (void) pthread_mutex_lock(&e->lock);
                s = e->sessions;
                (void) pthread_mutex_unlock(&e->lock);
                if (!s)
                        break;
                (void) egress_session_close(s);
        }
        if (e->acceptor_running) {
                (void) pthread_mutex_lock(&e->lock);
                e->stopping = true;
                egress_wake(e);
                (void) pthread_mutex_unlock(&e->lock);
                (void) pthread_join(e->acceptor, NULL);
        }
        /* Every session is closed, so every connection thread is finishing or done. */
        (void) pthread_mutex_lock(&e->lock);
        while (e->n_live > 0)
                (void) pthread_cond_wait(&e->changed, &e->lock);
        (void) pthread_mutex_unlock(&e->lock);
        reap(e);
        (void) safe_close_fd(e->epoll_fd);
        (void) safe_close_fd(e->wake_fd);
        (void) safe_close_fd(e->spare_fd);
        free(e->deny.listen);
        (void) pthread_cond_destroy(&e->changed);
        (void) pthread_mutex_destroy(&e->deny_lock);
        (void) pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
}

int egress_set_denylist(struct egress *e, const struct egress_denylist *deny)
{
        int r;

        (void) pthread_mutex_lock(&e->deny_lock);
        r = denylist_copy(deny, &e->deny);
        (void) pthread_mutex_unlock(&e->deny_lock);
        return r;
}
