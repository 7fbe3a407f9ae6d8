/* Fair CPU shares among sessions: the decaying average and the weight it gives (fair.h), and
 * the fairness thread that applies them (session_fair_main). */
#include "fair.h"

#include "base/log.h"
#include "base/util.h"
#include "jail/cgroup.h"
#include "pressure.h"
#include "session-table.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double fair_sample(struct fair_state *st, uint64_t usec, uint64_t now_ns)
{
        double used, dt_s, keep;

        if (st->last_ns == 0 || now_ns <= st->last_ns || usec < st->last_usec) {
                st->last_ns = now_ns;
                st->last_usec = usec;
                return 0;
        }
        dt_s = (double) (now_ns - st->last_ns) / 1e9;
        used = (double) (usec - st->last_usec) / 1e6 / dt_s;
        /* An exponential moving average over time, whatever the interval between samples. */
        keep = exp(-dt_s * 1000.0 / FAIR_DECAY_MS);
        st->avg_cpus = st->avg_cpus * keep + used * (1.0 - keep);
        if (st->avg_cpus < 1e-6)
                st->avg_cpus = 0;
        st->last_ns = now_ns;
        st->last_usec = usec;
        return used;
}

bool fair_is_busy(double avg_cpus)
{
        return avg_cpus >= FAIR_BUSY_CPUS;
}

uint32_t fair_weight(double avg_cpus, unsigned busy_in_tenant)
{
        double w;

        /* Quiet: the whole weight back, not 98 of it while the average fades out. */
        if (!fair_is_busy(avg_cpus))
                return CGROUP_WEIGHT_DEFAULT;
        w = CGROUP_WEIGHT_DEFAULT / (1.0 + FAIR_SLOPE * avg_cpus);
        if (busy_in_tenant > 1)
                w /= busy_in_tenant;
        if (w < CGROUP_WEIGHT_MIN)
                return CGROUP_WEIGHT_MIN;
        if (w > CGROUP_WEIGHT_DEFAULT)
                return CGROUP_WEIGHT_DEFAULT;
        return (uint32_t) lround(w);
}

/* One live session's sample, gathered under the locks and used after. */
struct fair_item {
        struct session *s;
        double avg;
        bool busy;
        unsigned busy_in_tenant;
};

static int by_tenant(const void *a, const void *b)
{
        const struct fair_item *x = a, *y = b;

        return strcmp(x->s->tenant, y->s->tenant);
}

void session_fair_step(struct session_manager *mgr)
{
        struct fair_item *items;
        unsigned n = 0;
        uint64_t now;

        if (mgr->scope.features.cgroups.version == CGROUP_NONE || mgr->cfg.fair_off)
                return;
        pthread_mutex_lock(&mgr->lock);
        items = calloc(mgr->n_sessions ? mgr->n_sessions : 1, sizeof(*items));
        for (unsigned i = 0; items && i < mgr->n_sessions; i++) {
                struct session *s = mgr->sessions[i];
                if (s->phase == PHASE_LIVE && s->sb)
                        items[n++].s = session_ref(s);
        }
        pthread_mutex_unlock(&mgr->lock);
        if (!items)
                return;

        /* Sample: the sandbox stays while the session is LIVE (a stop or a checkpoint makes
         * it SAVING under its lock first), so it is read under the session's lock. */
        now = now_ns();
        for (unsigned i = 0; i < n; i++) {
                struct session *s = items[i].s;
                uint64_t usec;

                pthread_mutex_lock(&s->lock);
                if (s->phase == PHASE_LIVE && s->sb && sandbox_cpu_usec(s->sb, &usec) >= 0) {
                        if (s->fair.sandbox != s->sb) {
                                memset(&s->fair, 0, sizeof(s->fair));
                                s->fair.sandbox = s->sb;
                        }
                        (void) fair_sample(&s->fair, usec, now);
                }
                items[i].avg = s->fair.avg_cpus;
                items[i].busy = fair_is_busy(items[i].avg);
                pthread_mutex_unlock(&s->lock);
        }

        /* Count each tenant's busy sessions: sorted by tenant, one run per tenant. */
        qsort(items, n, sizeof(*items), by_tenant);
        for (unsigned i = 0; i < n;) {
                unsigned j = i, busy = 0;
                while (j < n && strcmp(items[j].s->tenant, items[i].s->tenant) == 0)
                        busy += items[j++].busy;
                for (unsigned k = i; k < j; k++)
                        items[k].busy_in_tenant = busy;
                i = j;
        }

        for (unsigned i = 0; i < n; i++) {
                struct session *s = items[i].s;
                uint32_t w = fair_weight(items[i].avg, items[i].busy_in_tenant);

                pthread_mutex_lock(&s->lock);
                if (s->phase == PHASE_LIVE && s->sb && s->fair.sandbox == s->sb) {
                        /* The daemon wrote the weight itself since (sandbox.c): ours is
                         * stale. An interrupted cell keeps the weight it got to stop. */
                        if (sandbox_weight_was_restored(s->sb))
                                s->fair.weight = FAIR_WEIGHT_UNKNOWN;
                        if (sandbox_weight_is_boosted(s->sb))
                                w = CGROUP_WEIGHT_INTERRUPTED;
                        if (w != (s->fair.weight ? s->fair.weight : CGROUP_WEIGHT_DEFAULT) &&
                            sandbox_set_cpu_weight(s->sb, w) >= 0)
                                s->fair.weight = w;
                }
                pthread_mutex_unlock(&s->lock);
                session_unref(s);
        }
        free(items);
}

void *session_fair_main(void *arg)
{
        struct session_manager *mgr = arg;

        pthread_mutex_lock(&mgr->lock);
        while (!mgr->stopping) {
                struct timespec until;

                pthread_mutex_unlock(&mgr->lock);
                session_fair_step(mgr);
                session_pressure_step(mgr);
                pthread_mutex_lock(&mgr->lock);
                if (mgr->stopping)
                        break;
                (void) clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += 1;
                (void) pthread_cond_timedwait(&mgr->fair_wake, &mgr->lock, &until);
        }
        pthread_mutex_unlock(&mgr->lock);
        return NULL;
}
