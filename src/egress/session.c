/* One sandbox's proxy (egress.h): its listeners in the sandbox's network namespace, the policy
 * its connections are checked against, its counters, and closing it all. The acceptor and
 * the connection threads are in egress.c. */
#include "egress.h"

#include "egress-internal.h"

#include "base/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct egress_info *info_new(const struct egress_session_info *in)
{
        struct egress_info *i = calloc(1, sizeof(*i));

        if (!i)
                return NULL;
        atomic_init(&i->refs, 1);
        i->session = strdup(in && in->session ? in->session : "");
        i->tenant = strdup(in && in->tenant ? in->tenant : "default");
        i->profile = strdup(in && in->profile ? in->profile : "");
        if (!i->session || !i->tenant || !i->profile)
                return egress_info_unref(i);
        return i;
}

static struct egress_session *session_free(struct egress_session *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_listeners; i++)
                (void) safe_close_fd(s->listeners[i].fd);
        free(s->listeners);
        (void) egress_info_unref(s->info);
        (void) egress_policy_free(s->policy);
        egress_usage_reset(&s->period);
        egress_usage_reset(&s->total);
        (void) pthread_cond_destroy(&s->idle);
        (void) pthread_cond_destroy(&s->budget);
        (void) pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

static void session_freep(struct egress_session **s)
{
        (void) session_free(*s);
}

/* The listeners of a layout: the HTTP proxy, SOCKS5, then a forwarder per
 * egress_policy_forwards() entry, each with where it leads. */
static int listeners_plan(struct egress_session *s, const struct egress_policy *layout,
                          enum egress_forward_net net, struct airlock_error *err)
{
        _cleanup_free_ struct egress_forward *fw = NULL;
        size_t n_fw;

        fw = calloc(EGRESS_RULES_MAX, sizeof(*fw));
        if (!fw)
                return airlock_error_set(err, -ENOMEM, "out of memory");
        n_fw = egress_policy_forwards(layout, net, fw);
        s->listeners = calloc(2 + n_fw, sizeof(*s->listeners));
        if (!s->listeners)
                return airlock_error_set(err, -ENOMEM, "out of memory");
        s->n_listeners = 2 + n_fw;
        for (size_t i = 0; i < s->n_listeners; i++) {
                struct egress_listener *l = &s->listeners[i];

                l->session = s;
                l->fd = -EBADF;
                l->addr.sin_family = AF_INET;
                l->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        }
        s->listeners[0].kind = EGRESS_LISTEN_HTTP;
        s->listeners[0].addr.sin_port = htons(EGRESS_PROXY_PORT);
        s->listeners[1].kind = EGRESS_LISTEN_SOCKS;
        s->listeners[1].addr.sin_port = htons(EGRESS_SOCKS_PORT);
        for (size_t i = 0; i < n_fw; i++) {
                struct egress_listener *l = &s->listeners[2 + i];
                const struct egress_rule *rule = fw[i].rule;
                char text[INET_ADDRSTRLEN];
                const char *host = rule->name;

                l->kind = EGRESS_LISTEN_FORWARD;
                l->addr = fw[i].listen;
                if (rule->kind == EGRESS_RULE_ADDR)
                        host = inet_ntop(AF_INET, rule->addr, text, sizeof(text));
                if (!host || egress_target_set(&l->forward, host, strlen(host), rule->port) < 0)
                        return airlock_error_set(err, -EINVAL,
                                                 "egress: cannot forward to the rule '%s'",
                                                 rule->text);
        }
        return 0;
}

int egress_session_open(struct egress *e, int pidfd, const struct egress_policy *layout,
                        enum egress_forward_net net, const struct egress_policy *policy,
                        const struct egress_session_info *info, struct egress_session **ret,
                        struct airlock_error *err)
{
        _cleanup_(session_freep) struct egress_session *s = NULL;
        _cleanup_free_ struct sockaddr_in *addrs = NULL;
        _cleanup_free_ int *fds = NULL;
        int r;

        if (!layout || !policy || layout->mode != EGRESS_MODE_ALLOW)
                return airlock_error_set(err, -EINVAL,
                                         "egress: the profile's network is not \"allow\"; "
                                         "there is no proxy to open");
        s = calloc(1, sizeof(*s));
        if (!s)
                return airlock_error_set(err, -ENOMEM, "out of memory");
        (void) pthread_mutex_init(&s->lock, NULL);
        (void) pthread_cond_init(&s->idle, NULL);
        (void) pthread_cond_init(&s->budget, NULL);
        s->e = e;
        s->info = info_new(info);
        s->policy = egress_policy_copy(policy);
        if (!s->info || !s->policy)
                return airlock_error_set(err, -ENOMEM, "out of memory");
        r = listeners_plan(s, layout, net, err);
        if (r < 0)
                return r;
        addrs = calloc(s->n_listeners, sizeof(*addrs));
        fds = calloc(s->n_listeners, sizeof(*fds));
        if (!addrs || !fds)
                return airlock_error_set(err, -ENOMEM, "out of memory");
        for (size_t i = 0; i < s->n_listeners; i++)
                addrs[i] = s->listeners[i].addr;
        r = egress_netns_listen(pidfd, addrs, s->n_listeners, fds, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < s->n_listeners; i++)
                s->listeners[i].fd = fds[i];

        (void) pthread_mutex_lock(&e->lock);
        if (e->stopping) {
                (void) pthread_mutex_unlock(&e->lock);
                return airlock_error_set(err, -ESHUTDOWN, "egress: the proxy is shutting down");
        }
        s->next = e->sessions;
        if (e->sessions)
                e->sessions->prev = s;
        e->sessions = s;
        r = 0;
        for (size_t i = 0; i < s->n_listeners && r >= 0; i++) {
                struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->listeners[i] };

                if (epoll_ctl(e->epoll_fd, EPOLL_CTL_ADD, s->listeners[i].fd, &ev) < 0)
                        r = -errno;
        }
        (void) pthread_mutex_unlock(&e->lock);
        if (r < 0) {
                /* The acceptor may have seen the listeners that made it into the set. */
                (void) egress_session_close(TAKE_PTR(s));
                return airlock_error_set(err, r, "egress: epoll_ctl: %s", strerror(-r));
        }
        *ret = TAKE_PTR(s);
        return 0;
}

/* Under s->lock: cuts one connection (its thread sees EOF or an error and ends). */
static void conn_cut(struct egress_conn *c, const char *reason)
{
        c->cut = true;
        if (reason && !c->cut_reason[0])
                (void) snprintf(c->cut_reason, sizeof(c->cut_reason), "%s", reason);
        if (c->client >= 0)
                (void) shutdown(c->client, SHUT_RDWR);
        if (c->upstream >= 0)
                (void) shutdown(c->upstream, SHUT_RDWR);
        (void) pthread_cond_broadcast(&c->s->budget); /* a grant waiting for bytes */
}

void egress_session_cut_all(struct egress_session *s, const char *reason)
{
        for (struct egress_conn *c = s->conns; c; c = c->next)
                conn_cut(c, reason);
}

struct egress_session *egress_session_close(struct egress_session *s)
{
        struct egress *e;
        uint64_t target;

        if (!s)
                return NULL;
        e = s->e;
        (void) pthread_mutex_lock(&e->lock);
        s->closing = true;
        for (size_t i = 0; i < s->n_listeners; i++)
                (void) epoll_ctl(e->epoll_fd, EPOLL_CTL_DEL, s->listeners[i].fd, NULL);
        if (s->prev)
                s->prev->next = s->next;
        else
                e->sessions = s->next;
        if (s->next)
                s->next->prev = s->prev;
        /* The acceptor may hold an event for one of these listeners from before the removal:
         * wait until the batch it is in has ended. */
        target = e->pass + 1;
        egress_wake(e);
        while (!e->acceptor_done && e->pass < target)
                (void) pthread_cond_wait(&e->changed, &e->lock);
        (void) pthread_mutex_unlock(&e->lock);

        (void) pthread_mutex_lock(&s->lock);
        egress_session_cut_all(s, NULL);
        while (s->n_open + s->n_refusing > 0)
                (void) pthread_cond_wait(&s->idle, &s->lock);
        (void) pthread_mutex_unlock(&s->lock);
        return session_free(s);
}

int egress_session_set_info(struct egress_session *s, const struct egress_session_info *info)
{
        struct egress_info *i = info_new(info), *old;

        if (!i)
                return -ENOMEM;
        (void) pthread_mutex_lock(&s->lock);
        old = s->info;
        s->info = i;
        (void) pthread_mutex_unlock(&s->lock);
        (void) egress_info_unref(old);
        return 0;
}

int egress_session_set_policy(struct egress_session *s, const struct egress_policy *policy)
{
        struct egress_policy *p = egress_policy_copy(policy), *old;

        if (!p)
                return -ENOMEM;
        (void) pthread_mutex_lock(&s->lock);
        old = s->policy;
        s->policy = p;
        (void) pthread_cond_broadcast(&s->budget); /* max_bytes may have changed */
        (void) pthread_mutex_unlock(&s->lock);
        (void) egress_policy_free(old);
        return 0;
}

json_t *egress_session_take_usage(struct egress_session *s)
{
        json_t *j;

        (void) pthread_mutex_lock(&s->lock);
        j = egress_usage_to_json(&s->period);
        if (j)
                egress_usage_reset(&s->period);
        (void) pthread_mutex_unlock(&s->lock);
        return j;
}

json_t *egress_session_totals(struct egress_session *s)
{
        json_t *j;

        (void) pthread_mutex_lock(&s->lock);
        j = egress_usage_to_json(&s->total);
        (void) pthread_mutex_unlock(&s->lock);
        return j;
}
