/* The session manager's gauges for GET /metrics (docs/METRICS.md): sessions by state, the warm
 * pools and zygotes, and the top sessions by memory. Read at scrape time, never on the hot
 * path: the manager's lock is held only to copy references and pool counters; each session's
 * cgroup is read under that session's own lock, one at a time. */
#include "session.h"

#include "base/cleanup.h"
#include "base/util.h"
#include "metrics/metrics.h"
#include "session-internal.h"
#include "session-table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pool_row {
        struct profile_slot *slot;
        unsigned len, target;
        uint64_t warm, cold, miss;
};

struct top_row {
        const char *profile; /* the session's profile name, owned by the manager */
        uint64_t memory;
        double cpu_s;
};

/* Keeps the n largest by memory in top (sorted, largest first); *len is how many it holds. */
static void top_insert(struct top_row *top, unsigned n, unsigned *len, const struct top_row *row)
{
        unsigned i;

        if (n == 0 || (*len == n && row->memory <= top[n - 1].memory))
                return;
        i = *len < n ? (*len)++ : n - 1;
        while (i > 0 && top[i - 1].memory < row->memory) {
                top[i] = top[i - 1];
                i--;
        }
        top[i] = *row;
}

static void write_pools(struct session_manager *mgr, FILE *f)
{
        struct pool_row *rows;
        unsigned n;

        pthread_mutex_lock(&mgr->lock);
        n = mgr->n_profiles;
        rows = calloc(n ? n : 1, sizeof(*rows));
        for (unsigned i = 0; rows && i < n; i++) {
                struct profile_slot *slot = mgr->profiles[i];

                rows[i] = (struct pool_row){ .slot = slot,
                                             .len = session_pool_current_len(slot),
                                             .target = slot->pool_target,
                                             .warm = slot->pool_hits_warm,
                                             .cold = slot->pool_hits_cold,
                                             .miss = slot->pool_misses };
        }
        pthread_mutex_unlock(&mgr->lock);
        if (!rows)
                return;

        metrics_write_family(f, "airlock_pool_sessions", "gauge",
                             "Warm sessions ready in the pool, by profile.");
        for (unsigned i = 0; i < n; i++)
                metrics_write_sample(
                        f, "airlock_pool_sessions",
                        (const char *[]){ "profile", rows[i].slot->profile->name, NULL },
                        rows[i].len);
        metrics_write_family(f, "airlock_pool_target_sessions", "gauge",
                             "Warm sessions the pool keeps, by profile (--pool-size once the "
                             "profile is used).");
        for (unsigned i = 0; i < n; i++)
                metrics_write_sample(
                        f, "airlock_pool_target_sessions",
                        (const char *[]){ "profile", rows[i].slot->profile->name, NULL },
                        rows[i].target);
        metrics_write_family(f, "airlock_pool_takes_total", "counter",
                             "Sessions created or resumed, by profile and what the pool had: a "
                             "warm member, a member not warmed yet (cold), or none (miss: a "
                             "sandbox was started on the request).");
        for (unsigned i = 0; i < n; i++) {
                const char *name = rows[i].slot->profile->name;
                metrics_write_sample(f, "airlock_pool_takes_total",
                                     (const char *[]){ "profile", name, "result", "warm", NULL },
                                     (double) rows[i].warm);
                metrics_write_sample(f, "airlock_pool_takes_total",
                                     (const char *[]){ "profile", name, "result", "cold", NULL },
                                     (double) rows[i].cold);
                metrics_write_sample(f, "airlock_pool_takes_total",
                                     (const char *[]){ "profile", name, "result", "miss", NULL },
                                     (double) rows[i].miss);
        }
        /* zlock comes before the manager's lock: taken here with the manager's lock released.
         * Slots are never freed before the manager. */
        metrics_write_family(f, "airlock_zygote_up", "gauge",
                             "1 when the profile's zygote runs (namespaces mode), else 0.");
        for (unsigned i = 0; i < n; i++) {
                struct profile_slot *slot = rows[i].slot;
                bool up;

                pthread_mutex_lock(&slot->zlock);
                up = slot->zygote && zygote_is_alive(slot->zygote);
                pthread_mutex_unlock(&slot->zlock);
                metrics_write_sample(f, "airlock_zygote_up",
                                     (const char *[]){ "profile", slot->profile->name, NULL }, up);
        }
        free(rows);
}

void session_manager_write_metrics(struct session_manager *mgr, FILE *f, unsigned top_n)
{
        static const char *const states[] = { "idle", "busy", "resuming", "saving", "stopped" };
        uint64_t by_state[5] = { 0 };
        struct session **copy;
        struct top_row *top = NULL;
        unsigned n, top_len = 0, max_sessions;
        json_t *stopped;

        if (top_n > 0)
                top = calloc(top_n, sizeof(*top));
        pthread_mutex_lock(&mgr->lock);
        n = mgr->n_sessions;
        max_sessions = mgr->cfg.max_sessions;
        copy = calloc(n ? n : 1, sizeof(*copy));
        for (unsigned k = 0; copy && k < n; k++)
                copy[k] = session_ref(mgr->sessions[k]);
        pthread_mutex_unlock(&mgr->lock);

        for (unsigned k = 0; copy && k < n; k++) {
                struct session *s = copy[k];
                struct cgroup_usage u;
                bool measured = false;

                pthread_mutex_lock(&s->lock);
                switch (s->phase) {
                case PHASE_RESUMING:
                        by_state[2]++;
                        break;
                case PHASE_LIVE:
                        by_state[s->busy ? 1 : 0]++;
                        measured = top && s->sb && sandbox_usage(s->sb, &u) == 0;
                        break;
                case PHASE_SAVING:
                        by_state[3]++;
                        break;
                case PHASE_GONE:
                        break;
                }
                pthread_mutex_unlock(&s->lock);
                if (measured)
                        top_insert(top, top_n, &top_len,
                                   &(struct top_row){ .profile = s->profile->name,
                                                      .memory = u.memory_current,
                                                      .cpu_s = u.has_cpu ? (double) u.cpu_usec / 1e6
                                                                         : 0 });
                /* The profile outlives the session (the manager's cache); the reference is
                 * dropped after the name was copied into top. */
                session_unref(s);
        }
        free(copy);
        stopped = store_list_stopped(mgr->store);
        by_state[4] = json_array_size(stopped);
        json_decref(stopped);

        metrics_write_family(f, "airlock_sessions", "gauge",
                             "Sessions by state: idle, busy (an execution runs), resuming, saving "
                             "(a checkpoint, stop or fork), stopped (on disk).");
        for (size_t i = 0; i < ELEMENTSOF(states); i++)
                metrics_write_sample(f, "airlock_sessions",
                                     (const char *[]){ "state", states[i], NULL },
                                     (double) by_state[i]);
        metrics_write_family(f, "airlock_sessions_max", "gauge",
                             "The live-session limit (--max-sessions).");
        metrics_write_sample(f, "airlock_sessions_max", NULL, max_sessions);

        write_pools(mgr, f);

        if (top_n > 0) {
                char rank[16];

                metrics_write_family(f, "airlock_session_memory_bytes", "gauge",
                                     "Memory of the live sessions that use the most, by rank (1 = "
                                     "the largest) and profile; at most --metrics-top-sessions "
                                     "series, and never a session id.");
                for (unsigned i = 0; i < top_len; i++) {
                        (void) snprintf(rank, sizeof(rank), "%u", i + 1);
                        metrics_write_sample(
                                f, "airlock_session_memory_bytes",
                                (const char *[]){ "rank", rank, "profile", top[i].profile, NULL },
                                (double) top[i].memory);
                }
                metrics_write_family(f, "airlock_session_cpu_seconds", "gauge",
                                     "CPU time used so far by the sessions of "
                                     "airlock_session_memory_bytes, by the same rank.");
                for (unsigned i = 0; i < top_len; i++) {
                        (void) snprintf(rank, sizeof(rank), "%u", i + 1);
                        metrics_write_sample(
                                f, "airlock_session_cpu_seconds",
                                (const char *[]){ "rank", rank, "profile", top[i].profile, NULL },
                                top[i].cpu_s);
                }
        }
        free(top);
}
