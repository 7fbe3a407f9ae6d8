/* The session manager: the table of live sessions, a warm pool per profile so that create is a
 * hand-over, the worker thread, executions and files, and the memory of sessions that ended so
 * that the next call on one can say why. Stopping, resuming, forking and checkpoints are
 * lifecycle.c's. Each session owns one sandbox (see sandbox.h); the manager's lock guards the
 * table and the pools, each session's lock guards its sandbox and phase. An execution holds a
 * reference and the session's busy flag, never the manager's lock, so a long cell blocks
 * nothing else. */
#include "session.h"

#include "audit/audit.h"
#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/util.h"
#include "pressure.h"
#include "recent.h"
#include "session-internal.h"
#include "session-table.h"
#include "snapshot.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MAX_SESSIONS 64
#define DEFAULT_STOP_AFTER_MS (5ULL * 60 * 1000)
#define DEFAULT_MAX_STOP_AFTER_MS (24ULL * 3600 * 1000)
#define DEFAULT_GRACE_MS 2000
#define DEFAULT_DELETE_AFTER_MS (5ULL * 24 * 3600 * 1000)
#define DEFAULT_MAX_STOPPED_BYTES (1ULL << 30)
#define DEFAULT_ZYGOTE_MAX_SESSIONS 256
#define DEFAULT_ZYGOTE_MAX_AGE_MS (10ULL * 60 * 1000)

/* Records of ended sessions are kept this long, so late calls still learn what happened. */
#define STORE_KEEP_S (7LL * 24 * 3600)

void session_make_id(char id[SESSION_ID_MAX + 1])
{
        unsigned char raw[12];

        if (getrandom(raw, sizeof(raw), 0) != sizeof(raw)) {
                /* getrandom() does not fail for 12 bytes once the pool is ready; be safe. */
                for (size_t i = 0; i < sizeof(raw); i++)
                        raw[i] = (unsigned char) (rand() & 0xff);
        }
        id[0] = 's', id[1] = '-';
        for (size_t i = 0; i < sizeof(raw); i++)
                (void) snprintf(id + 2 + 2 * i, 3, "%02x", raw[i]);
        /* Sized for it: SESSION_ID_MAX holds the longest node name. */
        (void) node_id_append(id, SESSION_ID_MAX + 1);
}

int session_id_parse(const char *id, char ret_node[NODE_NAME_MAX + 1])
{
        if (strncmp(id, "s-", 2) != 0 || strspn(id + 2, "0123456789abcdef") < SESSION_ID_LEN - 2)
                return -EINVAL;
        return node_id_split(id, SESSION_ID_LEN, ret_node);
}

void session_format_time(time_t t, char buf[32])
{
        struct tm tm;

        (void) gmtime_r(&t, &tm);
        (void) strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void session_remember_ended(struct session_manager *mgr, const char *id, const char *tenant,
                            bool lost, const char *reason)
{
        struct ended *e = &mgr->ended[mgr->ended_next++ % ENDED_MAX];

        (void) snprintf(e->id, sizeof(e->id), "%s", id);
        (void) snprintf(e->tenant, sizeof(e->tenant), "%s",
                        tenant && *tenant ? tenant : TENANT_DEFAULT);
        (void) snprintf(e->reason, sizeof(e->reason), "%s", reason);
        e->lost = lost;
}

/* Hands a killed sandbox to the worker; frees it here only if the list cannot grow. */
void session_bury(struct session_manager *mgr, struct sandbox *sb)
{
        struct sandbox **v;

        if (!sb)
                return;
        sandbox_kill(sb);
        pthread_mutex_lock(&mgr->grave_lock);
        if (mgr->n_grave == mgr->cap_grave) {
                unsigned cap = mgr->cap_grave ? mgr->cap_grave * 2 : 16;
                v = realloc(mgr->grave, cap * sizeof(*v));
                if (!v) {
                        pthread_mutex_unlock(&mgr->grave_lock);
                        sandbox_free(sb);
                        return;
                }
                mgr->grave = v;
                mgr->cap_grave = cap;
        }
        mgr->grave[mgr->n_grave++] = sb;
        pthread_mutex_unlock(&mgr->grave_lock);
        pthread_cond_signal(&mgr->wake);
}

/* What one sandbox holds open in the daemon: its control socket, its stdout and stderr pipes,
 * the status pipe of its init and pidfds of its init and of its Python (zygote.c, sandbox.c),
 * plus a directory per cgroup hierarchy it has a cgroup in and the four usage files read at
 * every execution (jail/cgroup.c). */
#define SANDBOX_FDS 6
#define CGROUP_USAGE_FDS 4
/* The daemon's own: listening socket, epoll, the store and its journal, the state directory,
 * the scope's cgroups. */
#define DAEMON_FDS 32

static unsigned fds_per_sandbox(const struct jail_features *f)
{
        unsigned n = SANDBOX_FDS;

        if (f->cgroups.version == CGROUP_V2)
                n += 1 + CGROUP_USAGE_FDS;
        else if (f->cgroups.version == CGROUP_V1) {
                n += CGROUP_USAGE_FDS;
                for (unsigned i = 0; i < CG1_COUNT; i++)
                        n += f->cgroups.v1_parent[i] != NULL;
        }
        return n;
}

unsigned session_manager_fds_needed(const struct session_manager *mgr, unsigned *ret_per_session)
{
        /* Zygotes: the current one per profile, and one being replaced or still serving its
         * sessions. */
        unsigned sandboxes = mgr->cfg.max_sessions + mgr->cfg.pool_size + 2;

        if (ret_per_session)
                *ret_per_session = mgr->fds_per_sandbox;
        return sandboxes * mgr->fds_per_sandbox + SESSION_FD_RESERVE + DAEMON_FDS;
}

/* Reaps every buried sandbox. Called without the manager's lock. */
static void reap_graves(struct session_manager *mgr)
{
        for (;;) {
                struct sandbox *sb = NULL;
                pthread_mutex_lock(&mgr->grave_lock);
                if (mgr->n_grave > 0)
                        sb = mgr->grave[--mgr->n_grave];
                pthread_mutex_unlock(&mgr->grave_lock);
                if (!sb)
                        return;
                sandbox_free(sb);
        }
}

/* 0, or -EMFILE / -ENFILE when the daemon could not open the fds of n more sandboxes and
 * keep SESSION_FD_RESERVE free. Any other failure of the probe counts as room: the sandbox's
 * own start then reports it. */
static int fds_short(struct session_manager *mgr, unsigned n)
{
        int r = fd_room(n * mgr->fds_per_sandbox + SESSION_FD_RESERVE);

        return r == -EMFILE || r == -ENFILE ? r : 0;
}

int session_fd_room(struct session_manager *mgr, unsigned n, struct airlock_error *err)
{
        struct rlimit rl = { 0 };
        int r;

        r = fds_short(mgr, n);
        if (r < 0) {
                /* Sandboxes of sessions that just ended may hold fds until the worker reaps
                 * them: a client that deleted a session to make room gets it at once. */
                reap_graves(mgr);
                r = fds_short(mgr, n);
        }
        if (r == 0)
                return 0;
        if (r == -ENFILE)
                return airlock_error_set(err, -EMFILE,
                                         "the machine is out of file descriptors (fs.file-max): "
                                         "no new session until some are freed");
        (void) getrlimit(RLIMIT_NOFILE, &rl);
        return airlock_error_set(err, -EMFILE,
                                 "the daemon is out of file descriptors: its open-file limit "
                                 "(RLIMIT_NOFILE %llu) has no room for %s next to the %u live "
                                 "ones (%u fds each); end or stop a session, or restart the "
                                 "daemon with a higher limit (ulimit -n, systemd LimitNOFILE=) "
                                 "or a lower --max-sessions",
                                 (unsigned long long) rl.rlim_cur,
                                 n == 1 ? "another session" : "these sessions", mgr->n_sessions,
                                 mgr->fds_per_sandbox);
}

static void session_free(struct session *s)
{
        session_bury(s->mgr, TAKE_PTR(s->sb));
        strv_free(s->env);
        free(s->home);
        strv_free(s->code_tools);
        strv_free(s->approved_tools);
        egress_policy_free(s->network);
        json_decref(s->metadata);
        json_decref(s->saved);
        json_decref(s->resume_report);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->save_lock);
        pthread_mutex_destroy(&s->lock);
        free(s);
}

void session_unref(struct session *s)
{
        if (s && atomic_fetch_sub(&s->refs, 1) == 1)
                session_free(s);
}

struct session *session_ref(struct session *s)
{
        atomic_fetch_add(&s->refs, 1);
        return s;
}

const char *session_id(const struct session *s)
{
        return s->id;
}

struct session *session_new_object(struct session_manager *mgr, const char *id,
                                   const struct profile *p)
{
        struct session *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        atomic_init(&s->refs, 1);
        (void) snprintf(s->id, sizeof(s->id), "%s", id);
        (void) snprintf(s->tenant, sizeof(s->tenant), "%s", TENANT_DEFAULT);
        s->mgr = mgr;
        s->profile = p;
        s->metrics = p ? metrics_profile(p->name) : NULL;
        s->phase = PHASE_LIVE;
        s->created_at = s->last_used_at = time(NULL);
        s->last_used_ns = now_ns();
        s->stop_after_ms = mgr->cfg.default_stop_after_ms;
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->save_lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        return s;
}

/* FNV-1a of an id: ids are random, but a lookup may bring any string a client sent. */
static size_t id_hash(const char *id)
{
        uint64_t h = 14695981039346656037ULL;

        for (; *id; id++)
                h = (h ^ (unsigned char) *id) * 1099511628211ULL;
        return (size_t) h;
}

/* Puts s into an index that has room for it. */
static void index_put(struct session **by_id, unsigned cap, struct session *s)
{
        size_t i = id_hash(s->id) & (cap - 1);

        while (by_id[i])
                i = (i + 1) & (cap - 1);
        by_id[i] = s;
}

/* Grows the index, if needed, so that n sessions leave it at most half full. */
static int index_reserve(struct session_manager *mgr, unsigned n)
{
        unsigned cap = mgr->by_id_cap ? mgr->by_id_cap : 64;
        struct session **v;

        while (cap < 2 * n)
                cap *= 2;
        if (cap == mgr->by_id_cap)
                return 0;
        v = calloc(cap, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (unsigned i = 0; i < mgr->by_id_cap; i++)
                if (mgr->by_id[i])
                        index_put(v, cap, mgr->by_id[i]);
        free(mgr->by_id);
        mgr->by_id = v;
        mgr->by_id_cap = cap;
        return 0;
}

/* Takes s out of the index. The entries after it in its run move back into the gap where
 * their home slot allows (backward-shift deletion), so that no lookup stops early at it. */
static void index_remove(struct session_manager *mgr, struct session *s)
{
        size_t mask = (size_t) mgr->by_id_cap - 1, i, j;

        if (!mgr->by_id_cap)
                return;
        for (i = id_hash(s->id) & mask; mgr->by_id[i] != s; i = (i + 1) & mask)
                if (!mgr->by_id[i])
                        return;
        mgr->by_id[i] = NULL;
        for (j = (i + 1) & mask; mgr->by_id[j]; j = (j + 1) & mask) {
                size_t home = id_hash(mgr->by_id[j]->id) & mask;

                /* j may fill the gap at i when i lies on its probe path, in [home, j). */
                if (((j - home) & mask) >= ((j - i) & mask)) {
                        mgr->by_id[i] = mgr->by_id[j];
                        mgr->by_id[j] = NULL;
                        i = j;
                }
        }
}

/* Adds s to the table, which takes a reference. Called with the manager's lock held. */
int session_table_add(struct session_manager *mgr, struct session *s)
{
        int r;

        if (mgr->n_sessions == mgr->cap_sessions) {
                unsigned cap = mgr->cap_sessions ? mgr->cap_sessions * 2 : 16;
                struct session **v = realloc(mgr->sessions, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                mgr->sessions = v;
                mgr->cap_sessions = cap;
        }
        r = index_reserve(mgr, mgr->n_sessions + 1);
        if (r < 0)
                return r;
        s->table_pos = mgr->n_sessions;
        mgr->sessions[mgr->n_sessions++] = session_ref(s);
        index_put(mgr->by_id, mgr->by_id_cap, s);
        return 0;
}

/* Removes s from the table; the caller drops the table's reference after unlocking. */
void session_table_remove(struct session_manager *mgr, struct session *s)
{
        unsigned pos = s->table_pos;

        if (pos >= mgr->n_sessions || mgr->sessions[pos] != s)
                return;
        mgr->sessions[pos] = mgr->sessions[--mgr->n_sessions];
        mgr->sessions[pos]->table_pos = pos;
        index_remove(mgr, s);
}

struct session *session_table_find(struct session_manager *mgr, const char *id)
{
        size_t mask = (size_t) mgr->by_id_cap - 1;

        if (!mgr->by_id_cap)
                return NULL;
        for (size_t i = id_hash(id) & mask; mgr->by_id[i]; i = (i + 1) & mask)
                if (strcmp(mgr->by_id[i]->id, id) == 0)
                        return mgr->by_id[i];
        return NULL;
}

static json_t *strv_json(char **v)
{
        json_t *a = json_array();

        for (; a && v && *v; v++)
                json_array_append_new(a, json_string(*v));
        return a;
}

char *session_info_json(const struct session *s)
{
        json_t *o;
        char *text;

        o = json_pack("{s:I, s:o, s:i, s:I, s:f, s:O?, s:o?, s:o?}", "stop_after_ms",
                      (json_int_t) s->stop_after_ms, "env", strv_json(s->env), "execution_count",
                      (int) s->exec_count, "last_used_at", (json_int_t) s->last_used_at, "cpu_ms",
                      s->cpu_ms, "saved", s->saved, "code_tools",
                      s->code_tools ? strv_json(s->code_tools) : NULL, "approved_tools",
                      s->approved_tools ? strv_json(s->approved_tools) : NULL);
        /* PATCH-able facts: the store row of a stopped session is their only copy. */
        if (o &&
            (json_object_set_new(o, "metadata",
                                 s->metadata ? json_incref(s->metadata) : json_object()) < 0 ||
             json_object_set_new(o, "timeout_ms", json_integer((json_int_t) s->timeout_ms)) < 0 ||
             json_object_set_new(o, "stops_at", json_integer((json_int_t) s->stops_at)) < 0 ||
             json_object_set_new(o, "tenant", json_string(s->tenant)) < 0 ||
             (s->home && json_object_set_new(o, "home", json_string(s->home)) < 0) ||
             (s->network &&
              json_object_set_new(o, "network", egress_policy_to_json(s->network)) < 0)))
                o = (json_decref(o), NULL);
        text = o ? json_dump_text(o, JSON_COMPACT, NULL) : NULL;
        json_decref(o);
        return text;
}

/* Ends s: removes it from the table, kills its sandbox, removes what was saved of it. Called
 * with the manager's lock held; the table's reference is dropped here. */
static void end_locked(struct session_manager *mgr, struct session *s, bool lost,
                       const char *reason)
{
        session_table_remove(mgr, s);
        pthread_mutex_lock(&s->lock);
        s->phase = PHASE_GONE;
        s->gone_stopped = false;
        if (s->sb)
                sandbox_kill(s->sb);
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        session_remember_ended(mgr, s->id, s->tenant, lost, reason);
        if (!s->ephemeral) {
                (void) store_session_ended(mgr->store, s->id, lost, reason);
                lifecycle_remove_saved(mgr, s->id);
        }
        log_info("session=%s profile=%s msg=\"session ended: %s\"", s->id, s->profile->name,
                 reason);
        session_unref(s);
}

/* Lets go of s as the daemon exits without a word to the store: a session that could not be
 * saved stays "live" there, and the next daemon resumes it from its last checkpoint and the
 * files already on disk, as after a crash. Lock held; drops the table's reference. */
static void abandon_locked(struct session_manager *mgr, struct session *s)
{
        if (!mgr->store || s->ephemeral) {
                end_locked(mgr, s, true, "the daemon shut down");
                return;
        }
        session_table_remove(mgr, s);
        pthread_mutex_lock(&s->lock);
        s->phase = PHASE_GONE;
        s->gone_stopped = true;
        if (s->sb)
                sandbox_kill(s->sb);
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        log_warn("session=%s msg=\"left at its last checkpoint: the daemon shut down\"", s->id);
        session_unref(s);
}

/* Takes the next session for which pred is true, with a reference; lock held. */
#define DIED_IDLE_REASON "its processes died while it was idle (killed from outside the sandbox)"

static struct session *table_pick(struct session_manager *mgr, uint64_t now,
                                  bool (*pred)(struct session_manager *, struct session *,
                                               uint64_t))
{
        for (unsigned i = 0; i < mgr->n_sessions; i++)
                if (pred(mgr, mgr->sessions[i], now))
                        return session_ref(mgr->sessions[i]);
        return NULL;
}

static bool quiet_for(struct session *s, uint64_t now, uint64_t ms)
{
        return s->phase == PHASE_LIVE && !s->busy && now - s->last_used_ns >= ms * 1000000ULL;
}

/* Its lifetime is over (lifetime_s): it stops as an idle one does once no cell runs. */
static bool lifetime_over(const struct session *s)
{
        return s->stops_at > 0 && time(NULL) >= s->stops_at && s->phase == PHASE_LIVE && !s->busy;
}

static bool due_to_stop(struct session_manager *mgr, struct session *s, uint64_t now)
{
        (void) mgr;
        return !s->ephemeral && (quiet_for(s, now, s->stop_after_ms) || lifetime_over(s));
}

/* Ends the live sessions, and drops the pool members, whose processes died while nobody was
 * running anything in them (killed from outside the sandbox, or with their zygote), so that
 * they answer 404 "lost" with the reason instead of failing every call, and the pool refills.
 * Runs on the worker, about once a second. */
static void reap_dead(struct session_manager *mgr)
{
        struct session **idle = NULL;
        struct sandbox **dead = NULL;
        unsigned n_idle = 0, n_dead = 0;

        pthread_mutex_lock(&mgr->lock);
        idle = calloc(mgr->n_sessions ? mgr->n_sessions : 1, sizeof(*idle));
        for (unsigned i = 0; idle && i < mgr->n_sessions; i++) {
                struct session *s = mgr->sessions[i];
                if (s->phase == PHASE_LIVE && !s->busy && s->sb)
                        idle[n_idle++] = session_ref(s);
        }
        for (unsigned i = 0; i < mgr->n_profiles; i++) {
                struct profile_slot *slot = mgr->profiles[i];
                for (unsigned k = 0; k < slot->pool_len;) {
                        struct sandbox **grown;
                        if (sandbox_is_alive(slot->pool[k].sb)) {
                                k++;
                                continue;
                        }
                        grown = realloc(dead, (n_dead + 1) * sizeof(*dead));
                        if (!grown)
                                break;
                        dead = grown;
                        dead[n_dead++] = slot->pool[k].sb;
                        slot->pool[k] = slot->pool[--slot->pool_len];
                        pthread_cond_signal(&mgr->wake); /* refill */
                }
        }
        pthread_mutex_unlock(&mgr->lock);

        for (unsigned i = 0; i < n_dead; i++) {
                log_warn("msg=\"a warm sandbox died in the pool (killed from outside?); "
                         "dropped\"");
                sandbox_free(dead[i]);
        }
        free(dead);
        for (unsigned i = 0; i < n_idle; i++) {
                struct session *s = idle[i];
                bool died;

                pthread_mutex_lock(&s->lock);
                died = s->phase == PHASE_LIVE && !s->busy && s->sb && !sandbox_is_alive(s->sb);
                pthread_mutex_unlock(&s->lock);
                if (died) {
                        log_warn("session=%s msg=\"%s\"", s->id, DIED_IDLE_REASON);
                        pthread_mutex_lock(&mgr->lock);
                        if (session_table_find(mgr, s->id) == s)
                                end_locked(mgr, s, true, DIED_IDLE_REASON);
                        pthread_mutex_unlock(&mgr->lock);
                }
                session_unref(s);
        }
        free(idle);
}

static bool due_for_checkpoint(struct session_manager *mgr, struct session *s, uint64_t now)
{
        return mgr->store && mgr->cfg.checkpoint_after_ms && s->dirty && !s->ephemeral &&
               quiet_for(s, now, mgr->cfg.checkpoint_after_ms);
}

/* Whether slot's pool waits before a refill or a warm-up: a session was just handed over from
 * it (slots.c, POOL_QUIET_MS), and it still holds a member for the next create; or a fork is
 * loading its children (lifecycle.c; it wakes the worker when done). Lock held. */
static bool pool_is_quiet(const struct profile_slot *slot, uint64_t now)
{
        return (slot->quiet_until_ns > now && slot->pool_len > 0) || slot->forking > 0;
}

/* The earliest end of a pool's quiet within a second from now, or now + 1 s. Lock held. */
static uint64_t pools_quiet_until(const struct session_manager *mgr, uint64_t now)
{
        uint64_t until = now + 1000000000ULL;

        for (unsigned i = 0; i < mgr->n_profiles; i++)
                if (pool_is_quiet(mgr->profiles[i], now) && !mgr->profiles[i]->forking &&
                    mgr->profiles[i]->quiet_until_ns < until)
                        until = mgr->profiles[i]->quiet_until_ns;
        return until;
}

/* Takes a cold member out of its pool, has it run a session's first-call path (sandbox_warmup:
 * its first real call then pays no first-time costs), and puts it back warm. Called with
 * the manager's lock held, which it drops while the member works. Returns whether it found
 * one. */
static bool warm_one_member(struct session_manager *mgr)
{
        struct airlock_error err = { { 0 } };
        struct profile_slot *slot = NULL;
        struct pool_member m = { 0 };
        uint64_t faults = 0;
        unsigned cells = 0;
        int r;

        for (unsigned i = 0; i < mgr->n_profiles && !slot; i++)
                for (unsigned k = 0; k < mgr->profiles[i]->pool_len; k++)
                        if (!mgr->profiles[i]->pool[k].warm &&
                            !pool_is_quiet(mgr->profiles[i], now_ns()) &&
                            session_pool_member_is_current(mgr->profiles[i],
                                                           &mgr->profiles[i]->pool[k])) {
                                slot = mgr->profiles[i];
                                m = slot->pool[k];
                                slot->pool[k] = slot->pool[--slot->pool_len];
                                break;
                        }
        if (!slot)
                return false;
        slot->warming++;
        pthread_mutex_unlock(&mgr->lock);
        r = sandbox_warmup(m.sb, &cells, &faults, &err);
        if (r == 0)
                log_debug("profile=%s cells=%u page_faults=%" PRIu64
                          " msg=\"a pool member is warm\"",
                          slot->profile->name, cells, faults);
        pthread_mutex_lock(&mgr->lock);
        slot->warming--;
        if (r < 0) {
                log_warn("profile=%s msg=\"a warm session failed its warm-up: %s\"",
                         slot->profile->name, err.msg);
                sandbox_free(m.sb);
        } else if (mgr->stopping || session_pool_current_len(slot) >= slot->pool_target ||
                   slot->pool_len == slot->pool_cap || !session_pool_member_is_current(slot, &m)) {
                sandbox_free(m.sb);
        } else {
                m.warm = true;
                slot->pool[slot->pool_len++] = m;
        }
        return true;
}

/* Buries a stale pool member (its zygote was replaced) once the pool holds enough current
 * ones, which normally took their places one by one already. Lock held. Returns whether it
 * found one. */
static bool bury_one_stale_member(struct session_manager *mgr)
{
        for (unsigned i = 0; i < mgr->n_profiles; i++) {
                struct profile_slot *slot = mgr->profiles[i];
                int k = session_pool_find_stale(slot);
                if (k >= 0 && session_pool_current_len(slot) >= slot->pool_target) {
                        session_bury(mgr, slot->pool[k].sb);
                        slot->pool[k] = slot->pool[--slot->pool_len];
                        return true;
                }
        }
        return false;
}

/* Starts one sandbox for a pool that is short of its target. Lock held, dropped while the
 * sandbox starts. Returns whether there was one to start. */
static bool refill_one_member(struct session_manager *mgr)
{
        struct airlock_error err = { { 0 } };
        struct profile_slot *todo = NULL;
        struct sandbox *sb = NULL;
        struct pool_member *m;
        char id[SESSION_ID_MAX + 1];
        int r;

        for (unsigned i = 0; i < mgr->n_profiles && !todo; i++) {
                struct profile_slot *slot = mgr->profiles[i];
                if (session_pool_current_len(slot) + slot->starting + slot->warming <
                            slot->pool_target &&
                    !pool_is_quiet(slot, now_ns()))
                        todo = slot;
        }
        if (!todo)
                return false;
        /* Out of fds, the pool waits (a second, or until a sandbox ends) rather than fail to
         * start a member and give up on the profile for good; it leaves the room of one more
         * sandbox to the clients, so that a session ended to make room makes it for them. */
        if (fds_short(mgr, 2) < 0) {
                if (!mgr->fds_short_logged)
                        log_warn("profile=%s msg=\"the warm pool is not refilled: the daemon is "
                                 "short of file descriptors (RLIMIT_NOFILE)\"",
                                 todo->profile->name);
                mgr->fds_short_logged = true;
                return false;
        }
        mgr->fds_short_logged = false;

        todo->starting++;
        session_make_id(id);
        pthread_mutex_unlock(&mgr->lock);
        r = session_start_sandbox(mgr, todo, id, &sb, &err);
        pthread_mutex_lock(&mgr->lock);
        todo->starting--;
        if (r < 0) {
                log_error("profile=%s msg=\"cannot start a warm session: %s\"", todo->profile->name,
                          err.msg);
                /* Do not spin on a profile that cannot start. */
                todo->pool_target = 0;
                todo->pool_failed = true;
                return true;
        }
        if (mgr->stopping || session_pool_current_len(todo) >= todo->pool_target ||
            sandbox_zygote_generation(sb) != atomic_load(&todo->generation) ||
            sb->layer_gen != atomic_load(&todo->layer_gen)) {
                /* Not needed, or made by a zygote or with a layer replaced meanwhile. */
                session_bury(mgr, sb);
                return true;
        }
        if (session_pool_find_stale(todo) >= 0) {
                /* A current member takes the place of a stale one. */
                m = &todo->pool[session_pool_find_stale(todo)];
                session_bury(mgr, m->sb);
        } else {
                if (todo->pool_len == todo->pool_cap) {
                        unsigned cap = todo->pool_cap ? todo->pool_cap * 2 : 4;
                        struct pool_member *v = realloc(todo->pool, cap * sizeof(*v));
                        if (!v) {
                                sandbox_free(sb);
                                return true;
                        }
                        todo->pool = v;
                        todo->pool_cap = cap;
                }
                m = &todo->pool[todo->pool_len++];
        }
        *m = (struct pool_member){ .sb = sb,
                                   .generation = sandbox_zygote_generation(sb),
                                   .layer_gen = sb->layer_gen };
        memcpy(m->id, id, sizeof(id));
        log_debug("profile=%s msg=\"warm session started\"", todo->profile->name);
        return true;
}

/* One step for the warm pools: a stale member buried, a missing one started, or a cold one
 * warmed. Lock held. Returns whether it did anything. */
static bool pool_step(struct session_manager *mgr)
{
        if (bury_one_stale_member(mgr) || refill_one_member(mgr))
                return true;
        /* The pools are full: warm their cold members, one at a time. A full pool comes
         * first, so a burst of creates gets cold members quickly rather than waiting for warm
         * ones. */
        return warm_one_member(mgr);
}

/* The worker thread: stops idle sessions, checkpoints quiet ones, deletes long-stopped ones,
 * refills the warm pools and reaps ended sandboxes. */
static void *worker_main(void *arg)
{
        struct session_manager *mgr = arg;
        bool pools_turn = true;

        pthread_mutex_lock(&mgr->lock);
        while (!mgr->stopping) {
                struct session *s;
                struct timespec until;
                bool more_graves;
                uint64_t now;

                pthread_mutex_unlock(&mgr->lock);
                reap_graves(mgr);
                pthread_mutex_lock(&mgr->lock);
                now = now_ns();

                /* The pools and the sessions' timers take turns, one step each, so that neither
                 * waits out a wave of the other: a checkpoint or a stop takes about 12 ms, and
                 * 1,000 sessions that go quiet together would otherwise keep the pools empty
                 * for 12 s (every create meanwhile forks on the request path), while a stream
                 * of creates would keep idle sessions from ever stopping. */
                if (pools_turn && pool_step(mgr)) {
                        pools_turn = false;
                        continue;
                }
                pools_turn = true;
                s = table_pick(mgr, now, due_to_stop);
                if (s) {
                        struct airlock_error err = { { 0 } };
                        bool lifetime;
                        pthread_mutex_lock(&s->lock);
                        lifetime = lifetime_over(s);
                        pthread_mutex_unlock(&s->lock);
                        pthread_mutex_unlock(&mgr->lock);
                        if (!mgr->store) {
                                /* Nowhere to keep it: idle means ended, as before stops. */
                                pthread_mutex_lock(&mgr->lock);
                                if (session_table_find(mgr, s->id) == s)
                                        end_locked(mgr, s, false,
                                                   lifetime ? "its lifetime_s ran out"
                                                            : "it was idle for longer than its "
                                                              "stop_after_s");
                                pthread_mutex_unlock(&mgr->lock);
                        } else if (lifecycle_stop(s, false, &err) < 0) {
                                log_error("session=%s msg=\"cannot stop the %s session: %s\"",
                                          s->id, lifetime ? "expired" : "idle", err.msg);
                                /* Try again after another idle period (or a minute), not in a
                                 * loop. */
                                pthread_mutex_lock(&s->lock);
                                s->last_used_ns = now_ns();
                                if (lifetime)
                                        s->stops_at = time(NULL) + 60;
                                pthread_mutex_unlock(&s->lock);
                        } else if (lifetime) {
                                log_info("session=%s msg=\"stopped: its lifetime_s ran out\"",
                                         s->id);
                        }
                        session_unref(s);
                        pthread_mutex_lock(&mgr->lock);
                        continue;
                }
                s = table_pick(mgr, now, due_for_checkpoint);
                if (s) {
                        pthread_mutex_unlock(&mgr->lock);
                        lifecycle_checkpoint(s);
                        session_unref(s);
                        pthread_mutex_lock(&mgr->lock);
                        continue;
                }
                if (now >= mgr->next_liveness_scan_ns) {
                        mgr->next_liveness_scan_ns = now + 1000000000ULL;
                        pthread_mutex_unlock(&mgr->lock);
                        reap_dead(mgr);
                        pthread_mutex_lock(&mgr->lock);
                        continue;
                }
                if (mgr->store && now >= mgr->next_deletion_scan_ns) {
                        mgr->next_deletion_scan_ns = now + 1000000000ULL;
                        pthread_mutex_unlock(&mgr->lock);
                        lifecycle_delete_due(mgr);
                        pthread_mutex_lock(&mgr->lock);
                        continue;
                }
                if (pool_step(mgr))
                        continue;
                pthread_mutex_lock(&mgr->grave_lock);
                more_graves = mgr->n_grave > 0;
                pthread_mutex_unlock(&mgr->grave_lock);
                if (more_graves)
                        continue; /* buried while we worked: reap before sleeping */
                (void) clock_gettime(CLOCK_REALTIME, &until);
                now = now_ns();
                {
                        /* A second, or until a pool's quiet after a hand-over ends. */
                        uint64_t ns =
                                (uint64_t) until.tv_nsec + (pools_quiet_until(mgr, now) - now);
                        until.tv_sec += (time_t) (ns / 1000000000ULL);
                        until.tv_nsec = (long) (ns % 1000000000ULL);
                }
                (void) pthread_cond_timedwait(&mgr->wake, &mgr->lock, &until);
        }
        pthread_mutex_unlock(&mgr->lock);
        return NULL;
}

int session_manager_new(const struct session_manager_config *cfg, struct session_manager **ret_mgr,
                        struct airlock_error *err)
{
        static const char *const default_pool[] = { "default", NULL };
        struct session_manager *mgr;
        const char *const *names;
        int r;

        mgr = calloc(1, sizeof(*mgr));
        if (!mgr)
                return -ENOMEM;
        mgr->scope.lock_fd = -EBADF;
        mgr->cfg = *cfg;
        if (!mgr->cfg.max_sessions)
                mgr->cfg.max_sessions = DEFAULT_MAX_SESSIONS;
        if (!mgr->cfg.default_stop_after_ms)
                mgr->cfg.default_stop_after_ms = DEFAULT_STOP_AFTER_MS;
        if (!mgr->cfg.max_stop_after_ms)
                mgr->cfg.max_stop_after_ms = DEFAULT_MAX_STOP_AFTER_MS;
        if (!mgr->cfg.interrupt_grace_ms)
                mgr->cfg.interrupt_grace_ms = DEFAULT_GRACE_MS;
        if (!mgr->cfg.delete_after_ms)
                mgr->cfg.delete_after_ms = DEFAULT_DELETE_AFTER_MS;
        if (!mgr->cfg.max_stopped_bytes)
                mgr->cfg.max_stopped_bytes = DEFAULT_MAX_STOPPED_BYTES;
        mgr->zygote_max_forks = !cfg->zygote_max_sessions ? DEFAULT_ZYGOTE_MAX_SESSIONS
                                : cfg->zygote_max_sessions == SESSION_ZYGOTE_NEVER
                                        ? 0
                                        : cfg->zygote_max_sessions;
        mgr->zygote_max_age_ms = !cfg->zygote_max_age_ms ? DEFAULT_ZYGOTE_MAX_AGE_MS
                                 : cfg->zygote_max_age_ms == SESSION_ZYGOTE_NEVER
                                         ? 0
                                         : cfg->zygote_max_age_ms;
        pthread_mutex_init(&mgr->lock, NULL);
        pthread_mutex_init(&mgr->grave_lock, NULL);
        pthread_cond_init(&mgr->wake, NULL);
        pthread_cond_init(&mgr->rotate_wake, NULL);
        pthread_cond_init(&mgr->fair_wake, NULL);
        mgr->runner_path = sandbox_find_runner();
        if (!mgr->runner_path) {
                free(mgr);
                return airlock_error_set(err, -ENOENT,
                                         "cannot find airlock-runner (set AIRLOCK_RUNNER)");
        }

        if (cfg->recent_executions != SESSION_RECENT_OFF) {
                r = recent_new(cfg->recent_executions ? cfg->recent_executions
                                                      : RECENT_CAPACITY_DEFAULT,
                               &mgr->recent);
                if (r < 0) {
                        session_manager_free(mgr);
                        return airlock_error_set(err, r,
                                                 "recent executions: expected 1 to %d, not %u",
                                                 RECENT_CAPACITY_MAX, cfg->recent_executions);
                }
        }

        if (cfg->state_dir) {
                r = store_open(cfg->state_dir, &mgr->store, err);
                if (r < 0) {
                        session_manager_free(mgr);
                        return r;
                }
                /* Sessions live when the daemon went away (a crash: a clean shutdown stops
                 * them) resume from their last checkpoint; their files are on disk already. */
                (void) store_recover(mgr->store, (long long) time(NULL),
                                     (long long) (mgr->cfg.delete_after_ms / 1000));
                (void) store_prune(mgr->store, STORE_KEEP_S);
        }

        /* Every sandbox's cgroup goes below a cgroup of this daemon's own, and only there
         * does it remove what a crashed daemon on the same state directory left. */
        r = scope_open(cfg->features, cfg->state_dir, &mgr->scope, err);
        if (r < 0) {
                session_manager_free(mgr);
                return r;
        }
        mgr->cfg.features = &mgr->scope.features;
        mgr->fds_per_sandbox = fds_per_sandbox(mgr->cfg.features);
        if (cfg->max_session_memory) {
                r = scope_limit_memory(&mgr->scope, cfg->max_session_memory, err);
                if (r < 0) {
                        session_manager_free(mgr);
                        return r;
                }
        }
        if (mgr->scope.features.cgroups.version != CGROUP_NONE) {
                uint32_t w = cfg->daemon_cpu_weight ? cfg->daemon_cpu_weight
                                                    : SESSION_DAEMON_CPU_WEIGHT_DEFAULT;
                struct airlock_error werr = { { 0 } };
                int n = scope_sweep(&mgr->scope);
                /* The daemon's threads serve every client: a storm of busy sessions must not
                 * starve them (docs/PERFORMANCE.md, "Fairness under load"). */
                if (scope_weigh_daemon(&mgr->scope, w, &werr) < 0)
                        log_warn("msg=\"the daemon's CPU weight is not applied: %s\"", werr.msg);
                log_info("msg=\"sandbox cgroups go below '%s'\"", mgr->scope.name);
                if (n > 0)
                        log_info("msg=\"removed %d stale cgroups left by an earlier daemon\"", n);
        }

        names = cfg->pool_profiles ? cfg->pool_profiles : default_pool;
        pthread_mutex_lock(&mgr->lock);
        for (const char *const *n = names; *n; n++) {
                struct profile_slot *slot;
                r = session_profile_slot(mgr, *n, &slot, err);
                if (r == -EOPNOTSUPP) {
                        /* A microVM profile on a host without KVM: refused, the rest served. */
                        log_error("profile=%s msg=\"%s\"", *n, err->msg);
                        err->msg[0] = '\0';
                        continue;
                }
                if (r < 0) {
                        pthread_mutex_unlock(&mgr->lock);
                        session_manager_free(mgr);
                        return r;
                }
                slot->pool_target = cfg->pool_size;
        }
        pthread_mutex_unlock(&mgr->lock);

        r = pthread_create(&mgr->worker, NULL, worker_main, mgr);
        if (r != 0) {
                session_manager_free(mgr);
                return airlock_error_set(err, -r, "cannot start the session worker");
        }
        mgr->worker_started = true;
        /* A thread of its own: the worker can spend seconds on a wave of stops, checkpoints
         * or reaped sandboxes, exactly when the load needs the weights and the memory check. */
        r = pthread_create(&mgr->fair_thread, NULL, session_fair_main, mgr);
        if (r != 0) {
                session_manager_free(mgr);
                return airlock_error_set(err, -r, "cannot start the fairness thread");
        }
        mgr->fair_started = true;
        if (mgr->cfg.mode == JAIL_NAMESPACES && (mgr->zygote_max_forks || mgr->zygote_max_age_ms)) {
                r = pthread_create(&mgr->rotator, NULL, session_rotator_main, mgr);
                if (r != 0) {
                        session_manager_free(mgr);
                        return airlock_error_set(err, -r, "cannot start the zygote rotator");
                }
                mgr->rotator_started = true;
        } else if (mgr->cfg.mode == JAIL_NAMESPACES) {
                log_warn("msg=\"zygotes are never replaced: every session of a profile shares "
                         "one address-space layout and hash secret for the daemon's life\"");
        }
        *ret_mgr = mgr;
        return 0;
}

void session_manager_shutdown(struct session_manager *mgr)
{
        struct session **all;
        unsigned n;

        pthread_mutex_lock(&mgr->lock);
        mgr->stopping = true;
        pthread_cond_broadcast(&mgr->wake);
        pthread_cond_broadcast(&mgr->rotate_wake);
        n = mgr->n_sessions;
        all = calloc(n ? n : 1, sizeof(*all));
        for (unsigned i = 0; all && i < n; i++)
                all[i] = session_ref(mgr->sessions[i]);
        pthread_mutex_unlock(&mgr->lock);
        if (all && mgr->store && n > 0)
                log_info("msg=\"stopping %u sessions so that the next daemon can resume them\"", n);
        for (unsigned i = 0; all && i < n; i++) {
                struct airlock_error err = { { 0 } };
                struct session *s = all[i];
                int r = -EOPNOTSUPP;
                if (mgr->store && !s->ephemeral)
                        r = lifecycle_stop(s, true, &err);
                if (r < 0) {
                        if (mgr->store && !s->ephemeral)
                                log_error("session=%s msg=\"cannot save it at shutdown: %s\"",
                                          s->id, err.msg);
                        pthread_mutex_lock(&mgr->lock);
                        if (session_table_find(mgr, s->id) == s)
                                abandon_locked(mgr, s);
                        pthread_mutex_unlock(&mgr->lock);
                }
                session_unref(s);
        }
        free(all);
        /* Whatever could not be collected above (out of memory) still goes. */
        pthread_mutex_lock(&mgr->lock);
        while (mgr->n_sessions > 0)
                abandon_locked(mgr, mgr->sessions[0]);
        pthread_mutex_unlock(&mgr->lock);
}

int session_manager_drain(struct session_manager *mgr, bool interrupt, json_t **ret_stopped,
                          json_t **ret_failed)
{
        _cleanup_free_ char *names = NULL;
        json_t *stopped = json_array(), *failed = json_array();
        struct session **all;
        size_t size = 0, len = 0;
        unsigned n;

        pthread_mutex_lock(&mgr->lock);
        mgr->draining = true;
        n = mgr->n_sessions;
        all = calloc(n ? n : 1, sizeof(*all));
        for (unsigned i = 0; all && i < n; i++)
                all[i] = session_ref(mgr->sessions[i]);
        pthread_mutex_unlock(&mgr->lock);
        if (!all || !stopped || !failed) {
                free(all);
                json_decref(stopped);
                json_decref(failed);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < n; i++) {
                struct airlock_error err = { { 0 } };
                struct session *s = all[i];
                int r = -EOPNOTSUPP;

                if (!mgr->store)
                        (void) airlock_error_set(&err, r, "this daemon has no state directory");
                else if (s->ephemeral)
                        (void) airlock_error_set(&err, r, "a one-shot session is never saved");
                else
                        r = lifecycle_stop(s, interrupt, &err);
                if (r >= 0) {
                        json_array_append_new(stopped, json_string(s->id));
                        /* The log names each: "s-...-n1, s-...-n1". */
                        if (len + strlen(s->id) + 3 > size) {
                                size_t want = (size ? size * 2 : 1024) + strlen(s->id);
                                char *p = realloc(names, want);
                                if (p)
                                        names = p, size = want;
                        }
                        if (len + strlen(s->id) + 3 <= size)
                                len += (size_t) snprintf(names + len, size - len, "%s%s",
                                                         len ? ", " : "", s->id);
                } else
                        json_array_append_new(
                                failed, json_pack("{s:s, s:s}", "id", s->id, "error", err.msg));
                session_unref(s);
        }
        free(all);
        log_info("msg=\"drain: %zu sessions stopped (saved)%s%s\"", json_array_size(stopped),
                 len ? ": " : "", len ? names : "");
        for (size_t i = 0; i < json_array_size(failed); i++)
                log_error("session=%s msg=\"drain: cannot save it: %s\"",
                          json_string_value(json_object_get(json_array_get(failed, i), "id")),
                          json_string_value(json_object_get(json_array_get(failed, i), "error")));
        *ret_stopped = stopped;
        *ret_failed = failed;
        return 0;
}

void session_manager_load(struct session_manager *mgr, unsigned *ret_live, unsigned *ret_max,
                          bool *ret_draining)
{
        pthread_mutex_lock(&mgr->lock);
        *ret_live = mgr->n_sessions;
        *ret_max = mgr->cfg.max_sessions;
        *ret_draining = mgr->draining || mgr->stopping;
        pthread_mutex_unlock(&mgr->lock);
}

void session_manager_free(struct session_manager *mgr)
{
        if (!mgr)
                return;
        pthread_mutex_lock(&mgr->lock);
        mgr->stopping = true;
        pthread_cond_broadcast(&mgr->wake);
        pthread_cond_broadcast(&mgr->rotate_wake);
        pthread_cond_broadcast(&mgr->fair_wake);
        pthread_mutex_unlock(&mgr->lock);
        if (mgr->fair_started)
                (void) pthread_join(mgr->fair_thread, NULL);
        if (mgr->worker_started)
                (void) pthread_join(mgr->worker, NULL);
        if (mgr->rotator_started)
                (void) pthread_join(mgr->rotator, NULL);

        pthread_mutex_lock(&mgr->lock);
        while (mgr->n_sessions > 0)
                abandon_locked(mgr, mgr->sessions[0]);
        pthread_mutex_unlock(&mgr->lock);
        reap_graves(mgr);
        for (unsigned i = 0; i < mgr->n_profiles; i++) {
                struct profile_slot *slot = mgr->profiles[i];
                for (unsigned j = 0; j < slot->pool_len; j++)
                        sandbox_free(slot->pool[j].sb);
                free(slot->pool);
                zygote_unref(slot->zygote);
                strv_free(slot->envp);
                strv_free(slot->envp_layer);
                free(slot->layer_dir);
                (void) safe_close_fd(slot->layer_fd);
                pthread_mutex_destroy(&slot->zlock);
                pthread_mutex_destroy(&slot->vmlock);
                /* Sessions still referenced elsewhere keep a pointer to the profile; the
                 * manager is freed last, after every request has finished. */
                profile_free(slot->profile);
                free(slot);
        }
        free(mgr->runner_path);
        store_close(mgr->store);
        recent_free(mgr->recent);
        scope_close(&mgr->scope);
        free(mgr->profiles);
        free(mgr->sessions);
        free(mgr->by_id);
        free(mgr->grave);
        pthread_mutex_destroy(&mgr->grave_lock);
        pthread_cond_destroy(&mgr->wake);
        pthread_cond_destroy(&mgr->rotate_wake);
        pthread_mutex_destroy(&mgr->lock);
        free(mgr);
}

/* Whether the first n bytes of entry are a variable name a client may set. */
static bool env_name_is_allowed_n(const char *entry, size_t n, struct airlock_error *err)
{
        static const char *const denied_prefixes[] = { "LD_", "PYTHON" };

        if (n == 0) {
                airlock_error_set(err, -EINVAL, "env: an empty variable name");
                return false;
        }
        for (size_t i = 0; i < n; i++) {
                char c = entry[i];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
                      (i > 0 && c >= '0' && c <= '9'))) {
                        airlock_error_set(err, -EINVAL, "env: '%.*s' is not a valid variable name",
                                          (int) (n > 40 ? 40 : n), entry);
                        return false;
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(denied_prefixes); i++)
                if (strncmp(entry, denied_prefixes[i], strlen(denied_prefixes[i])) == 0) {
                        airlock_error_set(err, -EINVAL,
                                          "env: '%.*s' may not be set: LD_* and PYTHON* change "
                                          "how the interpreter itself loads",
                                          (int) (n > 40 ? 40 : n), entry);
                        return false;
                }
        return true;
}

static bool env_name_is_allowed(const char *entry, struct airlock_error *err)
{
        const char *eq = strchr(entry, '=');

        if (!eq || eq == entry) {
                airlock_error_set(err, -EINVAL, "env: '%.40s' is not NAME=value", entry);
                return false;
        }
        return env_name_is_allowed_n(entry, (size_t) (eq - entry), err);
}

/* An execute's own stdin, env and cwd, checked again here (the API checked them first): the
 * session layer is what the runner trusts. */
static int check_call(const struct exec_request *req, struct airlock_error *err)
{
        const char *name;
        json_t *value;

        if (req->stdin_text && req->language &&
            (strcmp(req->language, "javascript") == 0 || strcmp(req->language, "typescript") == 0 ||
             strcmp(req->language, "r") == 0))
                return airlock_error_set(err, -EINVAL,
                                         "stdin: %s cells have no standard input (their "
                                         "REPL reads its cells from it); pass the text in the "
                                         "code or in a file",
                                         req->language);
        if (req->stdin_text && strlen(req->stdin_text) > EXEC_STDIN_MAX)
                return airlock_error_set(err, -EINVAL, "stdin: at most %u bytes", EXEC_STDIN_MAX);
        if (req->env && !json_is_object(req->env))
                return airlock_error_set(err, -EINVAL, "env: expected an object");
        json_object_foreach ((json_t *) req->env, name, value) {
                if (!env_name_is_allowed_n(name, strlen(name), err))
                        return -EINVAL;
                if (!json_is_string(value))
                        return airlock_error_set(err, -EINVAL,
                                                 "env: the value of '%.40s' must "
                                                 "be a string",
                                                 name);
        }
        if (req->cwd && (req->cwd[0] == '\0' || strlen(req->cwd) > 4096))
                return airlock_error_set(err, -EINVAL,
                                         "cwd: expected a directory path of 1 to 4096 bytes");
        return 0;
}

int session_apply_env(struct sandbox *sb, char *const *env, const char *home,
                      struct airlock_error *err)
{
        if ((!env || !env[0]) && !home)
                return 0;
        return sandbox_setenv(sb, env, home, err);
}

int session_create(struct session_manager *mgr, const struct session_create_options *opts,
                   struct session **ret_session, struct airlock_error *err)
{
        const char *profile = opts && opts->profile ? opts->profile : "default";
        uint64_t stop_after =
                opts && opts->stop_after_ms ? opts->stop_after_ms : mgr->cfg.default_stop_after_ms;
        struct profile_slot *slot;
        struct sandbox *sb = NULL;
        struct session *s;
        _cleanup_(egress_policy_freep) struct egress_policy *network = NULL;
        char id[SESSION_ID_MAX + 1];
        _cleanup_free_ char *info = NULL;
        uint64_t t0 = now_ns();
        int r;

        if (stop_after > mgr->cfg.max_stop_after_ms)
                return airlock_error_set(err, -EINVAL, "stop_after_s: at most %llu seconds",
                                         (unsigned long long) (mgr->cfg.max_stop_after_ms / 1000));
        for (char *const *e = opts ? opts->env : NULL; e && *e; e++)
                if (!env_name_is_allowed(*e, err))
                        return -EINVAL;
        for (char *const *t = opts ? opts->code_tools : NULL; t && *t; t++)
                if (!profile_tool_pattern_is_valid(*t))
                        return airlock_error_set(err, -EINVAL,
                                                 "code_tools: '%.100s' is not a tool name (as GET "
                                                 "/v1/tools names it), a server name followed by "
                                                 "\"/*\", or \"*\"",
                                                 *t);
        if (opts && opts->metadata && session_metadata_check(opts->metadata, false, err) < 0)
                return -EINVAL;
        if (opts && opts->lifetime_s > SESSION_LIFETIME_MAX_S)
                return airlock_error_set(err, -EINVAL, "lifetime_s: at most %u seconds (30 days)",
                                         SESSION_LIFETIME_MAX_S);
        if (opts && opts->timeout_ms > SESSION_TIMEOUT_MAX_MS)
                return airlock_error_set(err, -EINVAL, "timeout_s: 0 < timeout_s <= %u",
                                         SESSION_TIMEOUT_MAX_MS / 1000);
        for (char *const *t = opts ? opts->approved_tools : NULL; t && *t; t++)
                if (!profile_tool_pattern_is_valid(*t) || strchr(*t, '*'))
                        return airlock_error_set(err, -EINVAL,
                                                 "approved_tools: '%.100s' is not a tool name; "
                                                 "approval is given tool by tool",
                                                 *t);

        r = tenant_profile_check(tenant_scope(), profile, err);
        if (r < 0)
                return r;

        pthread_mutex_lock(&mgr->lock);
        if (mgr->stopping) {
                pthread_mutex_unlock(&mgr->lock);
                return airlock_error_set(err, -ESHUTDOWN, "the daemon is shutting down");
        }
        if (mgr->draining) {
                pthread_mutex_unlock(&mgr->lock);
                return airlock_error_set(err, -ESHUTDOWN,
                                         "this node is draining (its sessions are stopped and "
                                         "saved): create the session on another node");
        }
        if (mgr->n_sessions + mgr->reserved >= mgr->cfg.max_sessions) {
                pthread_mutex_unlock(&mgr->lock);
                return airlock_error_set(err, -EUSERS,
                                         "the daemon already runs %u sessions, its limit; stop "
                                         "or end one (POST /v1/sessions/{id}/stop, DELETE) or "
                                         "try again later",
                                         mgr->cfg.max_sessions);
        }
        r = session_pressure_check(mgr, err);
        if (r < 0) {
                pthread_mutex_unlock(&mgr->lock);
                return r;
        }
        r = session_profile_slot(mgr, profile, &slot, err);
        /* Checked again when the session joins the table: this one spares a sandbox. */
        if (r >= 0)
                r = session_quota_check_locked(mgr, slot->profile, 1, err);
        pthread_mutex_unlock(&mgr->lock);
        if (r >= 0)
                r = session_fd_room(mgr, 1, err);
        if (r < 0)
                return r;

        r = session_network_narrow(mgr, slot->profile, opts ? opts->network : NULL, &network, err);
        if (r < 0)
                return r;
        r = session_take_sandbox(mgr, slot, &sb, id, err);
        if (r < 0)
                return r;
        r = session_apply_env(sb, opts ? opts->env : NULL, opts ? opts->home : NULL, err);
        if (r < 0) {
                sandbox_free(sb);
                return r;
        }

        s = session_new_object(mgr, id, slot->profile);
        if (s)
                s->network = TAKE_PTR(network);
        if (!s || (opts && opts->env && !(s->env = strv_copy(opts->env))) ||
            (opts && opts->home && !(s->home = strdup(opts->home))) ||
            (opts && opts->code_tools && !(s->code_tools = strv_copy(opts->code_tools))) ||
            (opts && opts->approved_tools &&
             !(s->approved_tools = strv_copy(opts->approved_tools))) ||
            (opts && json_object_size(opts->metadata) > 0 &&
             !(s->metadata = json_deep_copy(opts->metadata)))) {
                sandbox_free(sb);
                session_unref(s);
                return -ENOMEM;
        }
        s->sb = sb;
        s->stop_after_ms = stop_after;
        s->ephemeral = opts && opts->ephemeral;
        if (tenant_scope())
                (void) snprintf(s->tenant, sizeof(s->tenant), "%s", tenant_scope()->name);
        session_network_bind(s, sb);
        if (opts) {
                s->timeout_ms = opts->timeout_ms;
                s->stops_at = opts->lifetime_s ? time(NULL) + (time_t) opts->lifetime_s : 0;
        }
        pthread_mutex_lock(&mgr->lock);
        r = session_quota_check_locked(mgr, s->profile, 1, err);
        if (r >= 0)
                r = session_table_add(mgr, s);
        pthread_mutex_unlock(&mgr->lock);
        if (r < 0) {
                session_unref(s);
                return r;
        }
        if (!s->ephemeral) {
                info = session_info_json(s);
                (void) store_session_created(mgr->store, s->id, s->profile->name, info);
        }
        log_info("session=%s profile=%s msg=\"session created\"", s->id, s->profile->name);
        metrics_session_created(s->metrics, now_ns() - t0);
        if (!s->ephemeral)
                audit_emit_owned(mgr->cfg.audit, "session.created", s->tenant, s->id,
                                 json_pack("{s:s}", "profile", s->profile->name));
        *ret_session = s;

        return 0;
}

void session_store_info(struct session *s)
{
        struct session_manager *mgr = s->mgr;
        _cleanup_free_ char *info = NULL;

        if (!mgr->store || s->ephemeral)
                return;
        pthread_mutex_lock(&mgr->lock);
        pthread_mutex_lock(&s->lock);
        info = session_info_json(s);
        pthread_mutex_unlock(&s->lock);
        if (info)
                (void) store_session_update(mgr->store, s->id, info);
        pthread_mutex_unlock(&mgr->lock);
}

int session_find(struct session_manager *mgr, const char *id, struct session **ret_session)
{
        struct session *s;

        pthread_mutex_lock(&mgr->lock);
        s = session_table_find(mgr, id);
        if (s && !tenant_scope_sees(s->tenant))
                s = NULL; /* another tenant's: as if there were none */
        if (s)
                *ret_session = session_ref(s);
        pthread_mutex_unlock(&mgr->lock);
        return s ? 0 : -ENOENT;
}

bool session_is_gone(struct session *s)
{
        bool gone;

        pthread_mutex_lock(&s->lock);
        gone = s->phase == PHASE_GONE;
        pthread_mutex_unlock(&s->lock);
        return gone;
}

int session_lookup(struct session_manager *mgr, const char *id, struct session **ret_session,
                   struct airlock_error *err)
{
        struct airlock_error dummy = { { 0 } };
        struct session *s = NULL;

        if (!err)
                err = &dummy;
        /* A stop can win the race against us: then the id is resumed again (a few times at
         * most; each round is a real state change). */
        for (int attempt = 0; attempt < 4; attempt++) {
                int r = session_find(mgr, id, &s);
                if (r == -ENOENT)
                        return lifecycle_resume(mgr, id, ret_session, err);
                pthread_mutex_lock(&s->lock);
                while (s->phase == PHASE_RESUMING)
                        pthread_cond_wait(&s->cond, &s->lock);
                if (s->phase != PHASE_GONE) {
                        pthread_mutex_unlock(&s->lock);
                        *ret_session = s;
                        return 0;
                }
                pthread_mutex_unlock(&s->lock);
                session_unref(s);
        }
        return airlock_error_set(err, -EAGAIN, "session %s keeps changing state; try again", id);
}

int session_destroy(struct session_manager *mgr, const char *id)
{
        struct session *s;
        json_t *row;

        pthread_mutex_lock(&mgr->lock);
        s = session_table_find(mgr, id);
        if (s && !tenant_scope_sees(s->tenant)) {
                pthread_mutex_unlock(&mgr->lock);
                return -ENOENT;
        }
        if (s) {
                bool ephemeral = s->ephemeral;
                end_locked(mgr, s, false, "it was deleted by a client");
                pthread_mutex_unlock(&mgr->lock);
                if (!ephemeral)
                        audit_emit_scoped(mgr->cfg.audit, "session.deleted", id,
                                          json_pack("{s:s}", "reason", "client"));
                return 0;
        }
        row = store_get(mgr->store, id);
        if (row && !session_row_visible(row))
                row = (json_decref(row), NULL);
        if (row) {
                session_remember_ended(
                        mgr, id,
                        json_string_value(json_object_get(json_object_get(row, "info"), "tenant")),
                        false, "it was deleted by a client");
                (void) store_session_ended(mgr->store, id, false, "it was deleted by a client");
                lifecycle_remove_saved(mgr, id);
                log_info("session=%s msg=\"stopped session deleted by a client\"", id);
        }
        pthread_mutex_unlock(&mgr->lock);
        if (row)
                audit_emit_scoped(mgr->cfg.audit, "session.deleted", id,
                                  json_pack("{s:s}", "reason", "client"));
        json_decref(row);
        return row ? 0 : -ENOENT;
}

static const char *phase_state(const struct session *s)
{
        if (s->phase == PHASE_GONE && s->gone_stopped)
                return "stopped";
        return s->busy ? "busy" : "idle";
}

void session_describe_node(json_t *o)
{
        const char *node = node_self();

        json_object_set_new(o, "node", node ? json_string(node) : json_null());
}

/* session_describe() with s->lock held. */
static json_t *describe_locked(struct session *s)
{
        char created[32], used[32];
        json_t *o, *lost, *net;

        session_format_time(s->created_at, created);
        session_format_time(s->last_used_at, used);
        lost = json_object_get(s->saved, "lost_names");
        o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:n, s:n, s:i, s:o, s:{s:f, s:I, s:I}}",
                      "id", s->id, "profile", s->profile->name, "state", phase_state(s),
                      "created_at", created, "last_used_at", used, "stop_after_s",
                      (json_int_t) (s->stop_after_ms / 1000), "idle_timeout_s",
                      (json_int_t) (s->stop_after_ms / 1000), "stopped_at", "delete_at",
                      "execution_count", (int) s->exec_count, "lost_names",
                      json_is_array(lost) ? json_incref(lost) : json_array(), "usage", "cpu_ms",
                      s->cpu_ms, "peak_memory_bytes", (json_int_t) s->peak_memory,
                      "memory_limit_bytes", (json_int_t) s->profile->limits.memory_bytes);
        if (o)
                json_object_set_new(
                        o, "code_tools",
                        strv_json(s->code_tools ? s->code_tools : s->profile->code_tools));
        if (o)
                json_object_set_new(o, "approved_tools", strv_json(s->approved_tools));
        if (o)
                json_object_set_new(o, "tenant", json_string(s->tenant));
        if (o)
                session_describe_node(o);
        net = o ? session_network_json(s) : NULL;
        if (net)
                json_object_set_new(o, "network", net);
        if (o)
                session_describe_patchable(o, s->metadata, s->timeout_ms, s->stops_at);
        return o;
}

json_t *session_describe(struct session *s)
{
        json_t *o;

        pthread_mutex_lock(&s->lock);
        o = describe_locked(s);
        pthread_mutex_unlock(&s->lock);
        return o;
}

int session_describe_nowait(struct session_manager *mgr, const char *id, json_t **ret_desc)
{
        struct session *s;
        json_t *o;

        if (pthread_mutex_trylock(&mgr->lock) != 0)
                return -EAGAIN;
        s = session_table_find(mgr, id);
        s = s && tenant_scope_sees(s->tenant) ? session_ref(s) : NULL;
        pthread_mutex_unlock(&mgr->lock);
        if (!s)
                return -EAGAIN; /* stopped (the store knows), another tenant's, or unknown */
        if (pthread_mutex_trylock(&s->lock) != 0) {
                session_unref(s);
                return -EAGAIN;
        }
        o = describe_locked(s);
        pthread_mutex_unlock(&s->lock);
        session_unref(s); /* the last reference of one just ended: buried, not waited for */
        if (!o)
                return -ENOMEM;
        *ret_desc = o;
        return 0;
}

json_t *session_usage_now(struct session *s)
{
        struct cgroup_usage u;
        int r = -ENODATA;

        pthread_mutex_lock(&s->lock);
        if (s->sb && sandbox_is_alive(s->sb))
                r = sandbox_usage(s->sb, &u);
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                return NULL;
        return json_pack(
                "{s:o, s:o}", "memory_current_bytes",
                u.memory_current ? json_integer((json_int_t) u.memory_current) : json_null(),
                "cpu_total_ms", u.has_cpu ? json_real((double) u.cpu_usec / 1000.0) : json_null());
}

json_t *session_recent_executions(struct session_manager *mgr, unsigned limit,
                                  const char *session_id)
{
        return recent_list(mgr->recent, limit, session_id);
}

void session_describe_patchable(json_t *o, const json_t *metadata, uint64_t timeout_ms,
                                time_t stops_at)
{
        char when[32];

        (void) json_object_set_new(
                o, "metadata", json_is_object(metadata) ? json_deep_copy(metadata) : json_object());
        (void) json_object_set_new(
                o, "timeout_s", timeout_ms ? json_real((double) timeout_ms / 1000.0) : json_null());
        if (stops_at > 0)
                session_format_time(stops_at, when);
        (void) json_object_set_new(o, "stops_at", stops_at > 0 ? json_string(when) : json_null());
}

int session_metadata_check(const json_t *md, bool allow_null, struct airlock_error *err)
{
        const char *key;
        json_t *value;

        if (!json_is_object(md))
                return airlock_error_set(err, -EINVAL, "metadata: expected an object of strings");
        if (!allow_null && json_object_size(md) > SESSION_METADATA_MAX)
                return airlock_error_set(err, -EINVAL, "metadata: at most %d entries",
                                         SESSION_METADATA_MAX);
        json_object_foreach ((json_t *) md, key, value) {
                size_t n = strlen(key);
                bool ok = n >= 1 && n <= SESSION_METADATA_KEY_MAX;

                for (size_t i = 0; ok && i < n; i++)
                        ok = (key[i] >= 'A' && key[i] <= 'Z') || (key[i] >= 'a' && key[i] <= 'z') ||
                             (key[i] >= '0' && key[i] <= '9') || key[i] == '_' || key[i] == '.' ||
                             key[i] == '-';
                if (!ok)
                        return airlock_error_set(err, -EINVAL,
                                                 "metadata: '%.64s' is not a key (1 to %d "
                                                 "characters of A-Z a-z 0-9 _ . -)",
                                                 key, SESSION_METADATA_KEY_MAX);
                if (json_is_null(value) && allow_null)
                        continue;
                if (!json_is_string(value))
                        return airlock_error_set(err, -EINVAL,
                                                 "metadata: the value of '%s' must be a string%s",
                                                 key, allow_null ? " (or null to remove it)" : "");
                if (json_string_length(value) > SESSION_METADATA_VALUE_MAX)
                        return airlock_error_set(err, -EINVAL,
                                                 "metadata: the value of '%s' is longer than %d "
                                                 "bytes",
                                                 key, SESSION_METADATA_VALUE_MAX);
        }
        return 0;
}

/* Merges patch into *md (a null value removes its key), checking the entry count after. */
static int metadata_merge(json_t **md, const json_t *patch, struct airlock_error *err)
{
        json_t *merged = *md ? json_deep_copy(*md) : json_object(), *value;
        const char *key;

        if (!merged)
                return -ENOMEM;
        json_object_foreach ((json_t *) patch, key, value) {
                if (json_is_null(value))
                        (void) json_object_del(merged, key);
                else if (json_object_set(merged, key, value) < 0) {
                        json_decref(merged);
                        return -ENOMEM;
                }
        }
        if (json_object_size(merged) > SESSION_METADATA_MAX) {
                json_decref(merged);
                return airlock_error_set(err, -EINVAL,
                                         "metadata: at most %d entries after the merge",
                                         SESSION_METADATA_MAX);
        }
        json_decref(*md);
        *md = merged;
        return 0;
}

static int patch_check(struct session_manager *mgr, const struct session_patch *p,
                       struct airlock_error *err)
{
        if (p->has_stop_after &&
            (p->stop_after_ms == 0 || p->stop_after_ms > mgr->cfg.max_stop_after_ms))
                return airlock_error_set(err, -EINVAL, "stop_after_s: at most %llu seconds",
                                         (unsigned long long) (mgr->cfg.max_stop_after_ms / 1000));
        if (p->has_lifetime && p->lifetime_s > SESSION_LIFETIME_MAX_S)
                return airlock_error_set(err, -EINVAL, "lifetime_s: at most %u seconds (30 days)",
                                         SESSION_LIFETIME_MAX_S);
        if (p->has_timeout && (p->timeout_ms == 0 || p->timeout_ms > SESSION_TIMEOUT_MAX_MS))
                return airlock_error_set(err, -EINVAL, "timeout_s: 0 < timeout_s <= %u",
                                         SESSION_TIMEOUT_MAX_MS / 1000);
        if (p->metadata)
                return session_metadata_check(p->metadata, true, err);
        return 0;
}

/* Applies a checked patch to the facts of a session (a live object's, or a stopped row's
 * decoded info). */
static int patch_apply(const struct session_patch *p, uint64_t *stop_after_ms, time_t *stops_at,
                       uint64_t *timeout_ms, json_t **metadata, struct airlock_error *err)
{
        if (p->metadata) {
                int r = metadata_merge(metadata, p->metadata, err);
                if (r < 0)
                        return r;
        }
        if (p->has_stop_after)
                *stop_after_ms = p->stop_after_ms;
        if (p->has_lifetime)
                *stops_at = p->lifetime_s ? time(NULL) + (time_t) p->lifetime_s : 0;
        if (p->has_timeout)
                *timeout_ms = p->timeout_ms;
        return 0;
}

/* PATCH on a stopped session: its row's info, changed in place, resuming nothing. The
 * manager's lock is held, so a resume (which reads the row under it) sees the change. */
static int update_stopped_locked(struct session_manager *mgr, const char *id,
                                 const struct session_patch *p, json_t **ret_row,
                                 struct airlock_error *err)
{
        json_t *row = store_get(mgr->store, id), *info;
        const char *state = json_string_value(json_object_get(row, "state"));
        _cleanup_free_ char *text = NULL;
        json_t *md = NULL;
        uint64_t stop_after, timeout;
        time_t stops_at;
        int r;

        if (!state || strcmp(state, "stopped") != 0 || !session_row_visible(row)) {
                json_decref(row);
                return -ENOENT;
        }
        info = json_object_get(row, "info");
        stop_after = (uint64_t) json_integer_value(json_object_get(info, "stop_after_ms"));
        timeout = (uint64_t) json_integer_value(json_object_get(info, "timeout_ms"));
        stops_at = (time_t) json_integer_value(json_object_get(info, "stops_at"));
        md = json_is_object(json_object_get(info, "metadata"))
                     ? json_incref(json_object_get(info, "metadata"))
                     : NULL;
        r = patch_apply(p, &stop_after, &stops_at, &timeout, &md, err);
        if (r >= 0 &&
            (json_object_set_new(info, "stop_after_ms", json_integer((json_int_t) stop_after)) <
                     0 ||
             json_object_set_new(info, "timeout_ms", json_integer((json_int_t) timeout)) < 0 ||
             json_object_set_new(info, "stops_at", json_integer((json_int_t) stops_at)) < 0 ||
             json_object_set_new(info, "metadata", md ? json_incref(md) : json_object()) < 0))
                r = -ENOMEM;
        json_decref(md);
        if (r >= 0)
                text = json_dump_text(info, JSON_COMPACT, NULL);
        if (r >= 0 && !text)
                r = -ENOMEM;
        if (r >= 0 && store_session_update(mgr->store, id, text) < 0)
                r = airlock_error_set(err, -EIO, "cannot write the session store");
        if (r >= 0)
                *ret_row = json_incref(row);
        json_decref(row);
        return r;
}

int session_update(struct session_manager *mgr, const char *id, const struct session_patch *p,
                   json_t **ret_desc, struct airlock_error *err)
{
        _cleanup_free_ char *info = NULL;
        struct session *s;
        int r;

        r = patch_check(mgr, p, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&mgr->lock);
        s = session_table_find(mgr, id);
        if (s && !tenant_scope_sees(s->tenant)) {
                pthread_mutex_unlock(&mgr->lock);
                return -ENOENT;
        }
        if (!s) {
                json_t *row = NULL;
                r = mgr->store ? update_stopped_locked(mgr, id, p, &row, err) : -ENOENT;
                pthread_mutex_unlock(&mgr->lock);
                /* Described without the manager's lock, which lifecycle_describe_row takes. */
                if (r >= 0 && ret_desc)
                        *ret_desc = lifecycle_describe_row(mgr, row);
                json_decref(row);
                return r;
        }
        session_ref(s);
        pthread_mutex_lock(&s->lock);
        r = patch_apply(p, &s->stop_after_ms, &s->stops_at, &s->timeout_ms, &s->metadata, err);
        if (r >= 0 && !s->ephemeral)
                info = session_info_json(s);
        pthread_mutex_unlock(&s->lock);
        /* Under the manager's lock, as a stop writes its row: the later write is the newer. */
        if (info)
                (void) store_session_update(mgr->store, s->id, info);
        pthread_mutex_unlock(&mgr->lock);
        if (r >= 0 && ret_desc)
                *ret_desc = session_describe(s);
        session_unref(s);
        return r;
}

json_t *session_describe_id(struct session_manager *mgr, const char *id)
{
        struct session *s = NULL;
        json_t *row, *o;

        if (session_find(mgr, id, &s) == 0) {
                o = session_describe(s);
                session_unref(s);
                return o;
        }
        row = store_get(mgr->store, id);
        o = row && session_row_visible(row) ? lifecycle_describe_row(mgr, row) : NULL;
        json_decref(row);
        return o;
}

static bool state_matches(const char *state, const char *filter)
{
        if (!filter)
                return true;
        if (strcmp(filter, "live") == 0)
                return strcmp(state, "idle") == 0 || strcmp(state, "busy") == 0;
        return strcmp(state, filter) == 0;
}

/* Whether a description's metadata has every key and value of filter. */
static bool metadata_matches(const json_t *desc, const json_t *filter)
{
        const json_t *md = json_object_get(desc, "metadata");
        const char *key;
        json_t *want;

        json_object_foreach ((json_t *) filter, key, want) {
                const char *have = json_string_value(json_object_get(md, key));
                if (!have || !json_is_string(want) || strcmp(have, json_string_value(want)) != 0)
                        return false;
        }
        return true;
}

json_t *session_list_filtered(struct session_manager *mgr, const char *state_filter,
                              const json_t *metadata_filter)
{
        json_t *all = session_list(mgr, state_filter), *out, *d;
        size_t i;

        if (!all || json_object_size(metadata_filter) == 0)
                return all;
        out = json_array();
        json_array_foreach (all, i, d)
                if (out && metadata_matches(d, metadata_filter))
                        (void) json_array_append(out, d);
        json_decref(all);
        return out;
}

json_t *session_list(struct session_manager *mgr, const char *state_filter)
{
        struct session **copy;
        unsigned n;
        json_t *arr = json_array(), *rows, *row;
        size_t i;

        pthread_mutex_lock(&mgr->lock);
        n = mgr->n_sessions;
        copy = calloc(n ? n : 1, sizeof(*copy));
        for (unsigned k = 0; copy && k < n; k++)
                copy[k] = session_ref(mgr->sessions[k]);
        pthread_mutex_unlock(&mgr->lock);
        for (unsigned k = 0; copy && k < n; k++) {
                json_t *d = tenant_scope_sees(copy[k]->tenant) ? session_describe(copy[k]) : NULL;
                if (d &&
                    state_matches(json_string_value(json_object_get(d, "state")), state_filter))
                        json_array_append_new(arr, d);
                else
                        json_decref(d);
                session_unref(copy[k]);
        }
        free(copy);
        if (state_filter && !state_matches("stopped", state_filter))
                return arr;
        rows = store_list_stopped(mgr->store);
        json_array_foreach (rows, i, row) {
                json_t *d = session_row_visible(row) ? lifecycle_describe_row(mgr, row) : NULL;
                if (d)
                        json_array_append_new(arr, d);
        }
        json_decref(rows);
        return arr;
}

json_t *session_manager_describe_ended(struct session_manager *mgr, const char *id)
{
        json_t *o = NULL;

        pthread_mutex_lock(&mgr->lock);
        for (unsigned i = 0; i < ENDED_MAX; i++) {
                const struct ended *e = &mgr->ended[i];
                if (e->id[0] && strcmp(e->id, id) == 0 && tenant_scope_sees(e->tenant)) {
                        o = json_pack("{s:s, s:s, s:s}", "id", e->id, "state",
                                      e->lost ? "lost" : "ended", "reason", e->reason);
                        break;
                }
        }
        pthread_mutex_unlock(&mgr->lock);
        if (!o) {
                o = store_describe_ended(mgr->store, id);
                /* The row says whose it was; nobody else learns that it existed. */
                if (o && !tenant_scope_sees(json_string_value(json_object_get(o, "tenant"))))
                        o = (json_decref(o), NULL);
                if (o)
                        (void) json_object_del(o, "tenant");
        }
        return o;
}

bool session_row_visible(json_t *row)
{
        return tenant_scope_sees(
                json_string_value(json_object_get(json_object_get(row, "info"), "tenant")));
}

int session_quota_check_locked(struct session_manager *mgr, const struct profile *p, unsigned n,
                               struct airlock_error *err)
{
        const struct tenant *t = tenant_scope();
        const struct tenant_refusal *q;
        struct tenant_usage use = { 0 }, add = { 0 };
        int r;

        /* The default tenant and tenants without quotas cost nothing here. */
        if (!t || !(t->max_sessions || t->max_memory || t->max_millicpus))
                return 0;
        for (unsigned i = 0; i < mgr->n_sessions; i++) {
                const struct session *s = mgr->sessions[i];
                if (strcmp(s->tenant, t->name) != 0)
                        continue;
                use.sessions++;
                use.memory += s->profile->limits.memory_bytes;
                use.millicpus += s->profile->limits.cpu_millicpus;
        }
        for (const struct quota_hold *h = mgr->holds; h; h = h->next) {
                if (strcmp(h->tenant, t->name) != 0)
                        continue;
                use.sessions += h->n;
                use.memory += (uint64_t) h->n * h->profile->limits.memory_bytes;
                use.millicpus += (uint64_t) h->n * h->profile->limits.cpu_millicpus;
        }
        add.sessions = n;
        add.memory = (uint64_t) n * p->limits.memory_bytes;
        add.millicpus = (uint64_t) n * p->limits.cpu_millicpus;
        r = tenant_quota_check(t, &use, &add, err);
        q = r < 0 ? tenant_scope_refusal() : NULL;
        /* Whatever route asked (sessions, OpenAI, E2B, MCP): one line per refusal. Written
         * under the manager's lock, which only a refusal pays: one O_APPEND write. */
        if (q)
                audit_emit_scoped(mgr->cfg.audit, "quota.refusal", NULL,
                                  json_pack("{s:s, s:o*, s:s, s:i}", "quota", q->quota, "limit",
                                            json_loads(q->limit, JSON_DECODE_ANY, NULL), "profile",
                                            p->name, "sessions", (int) n));
        return r;
}

int session_quota_hold_locked(struct session_manager *mgr, const struct profile *p, unsigned n,
                              const char *tenant, struct quota_hold *h, struct airlock_error *err)
{
        int r = session_quota_check_locked(mgr, p, n, err);

        if (r < 0)
                return r;
        *h = (struct quota_hold){ .next = mgr->holds, .tenant = tenant, .profile = p, .n = n };
        mgr->holds = h;
        return 0;
}

void session_quota_release_locked(struct session_manager *mgr, struct quota_hold *h)
{
        for (struct quota_hold **p = &mgr->holds; *p; p = &(*p)->next)
                if (*p == h) {
                        *p = h->next;
                        return;
                }
}

/* The state of a profile's warm pool and what creates got from it. Lock held. */
static json_t *pool_json(const struct profile_slot *slot)
{
        unsigned warm = 0, generation = atomic_load(&slot->generation);

        for (unsigned i = 0; i < slot->pool_len; i++)
                warm += slot->pool[i].warm;
        /* zygote_generation: the current zygote's number, unique in the daemon (0: none yet,
         * or a cold profile); a new one means the zygote was replaced. */
        return json_pack("{s:i, s:i, s:i, s:i, s:i, s:I, s:{s:I, s:I, s:I}}", "size",
                         (int) slot->pool_target, "ready", (int) slot->pool_len, "warm", (int) warm,
                         "starting", (int) slot->starting, "warming", (int) slot->warming,
                         "zygote_generation", (json_int_t) generation, "creates", "warm",
                         (json_int_t) slot->pool_hits_warm, "cold",
                         (json_int_t) slot->pool_hits_cold, "started_on_request",
                         (json_int_t) slot->pool_misses);
}

json_t *session_manager_profiles(struct session_manager *mgr)
{
        _cleanup_strv_free_ char **names = NULL;
        json_t *arr = json_array();

        if (profile_list(&names) < 0)
                return arr;
        pthread_mutex_lock(&mgr->lock);
        for (char **n = names; *n; n++) {
                struct profile_slot *slot;
                struct airlock_error err = { { 0 } };
                if (session_profile_slot(mgr, *n, &slot, &err) < 0) {
                        log_warn("profile=\"%s\" msg=\"%s\"", *n, err.msg);
                        continue;
                }
                json_t *o = profile_to_json(slot->profile);
                if (o) {
                        json_object_set_new(o, "pool", pool_json(slot));
                        /* The layer its new sessions get (docs/PROFILES.md), or null. */
                        json_object_set_new(o, "layer",
                                            slot->layer_id[0] ? json_string(slot->layer_id)
                                                              : json_null());
                }
                json_array_append_new(arr, o);
        }
        pthread_mutex_unlock(&mgr->lock);
        return arr;
}

/* Gets s (a reference the caller holds) ready for an execution (exclusive: marked busy) or a
 * file call (not exclusive: returned with its lock held, so it cannot stop meanwhile). Waits
 * out a resume or a save; when s was stopped meanwhile, resumes its id into *ret_live. Returns
 * 0 with *ret_live a new reference, -EBUSY (exclusive, an execution runs), -ENOENT, or -errno. */
static int acquire(struct session *s, bool exclusive, struct session **ret_live,
                   struct airlock_error *err)
{
        struct session *cur = session_ref(s);

        for (int attempt = 0; attempt < 4; attempt++) {
                struct session *next = NULL;
                int r;

                pthread_mutex_lock(&cur->lock);
                while (cur->phase == PHASE_RESUMING || cur->phase == PHASE_SAVING)
                        pthread_cond_wait(&cur->cond, &cur->lock);
                if (cur->phase == PHASE_LIVE) {
                        if (exclusive && cur->busy) {
                                pthread_mutex_unlock(&cur->lock);
                                session_unref(cur);
                                return airlock_error_set(err, -EBUSY,
                                                         "session %s is running another "
                                                         "execution; wait for it or interrupt it",
                                                         s->id);
                        }
                        if (exclusive) {
                                cur->busy = true;
                                pthread_mutex_unlock(&cur->lock);
                        }
                        *ret_live = cur;
                        return 0;
                }
                /* GONE: stopped (resume it again) or ended. */
                if (!cur->gone_stopped) {
                        pthread_mutex_unlock(&cur->lock);
                        session_unref(cur);
                        return airlock_error_set(err, -ENOENT, "session %s has ended", s->id);
                }
                pthread_mutex_unlock(&cur->lock);
                r = session_lookup(s->mgr, s->id, &next, err);
                session_unref(cur);
                if (r < 0)
                        return r;
                cur = next;
        }
        session_unref(cur);
        return airlock_error_set(err, -EAGAIN, "session %s keeps changing state; try again", s->id);
}

static void release_busy(struct session *s)
{
        pthread_mutex_lock(&s->lock);
        s->busy = false;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
}

/* Attaches the report of the resume that preceded this execution, once. */
static void attach_resume_report(struct session *s, json_t *result)
{
        json_t *report;

        pthread_mutex_lock(&s->lock);
        report = TAKE_PTR(s->resume_report);
        pthread_mutex_unlock(&s->lock);
        if (!report)
                return;
        json_object_set_new(result, "resumed", json_true());
        json_object_set(result, "lost_names", json_object_get(report, "lost_names"));
        if (json_is_string(json_object_get(report, "error")))
                json_object_set(result, "resume_error", json_object_get(report, "error"));
        json_decref(report);
}

static int execute_live(struct session *s, const struct exec_request *req, json_t **ret_result,
                        struct airlock_error *err)
{
        struct exec_request r2 = *req;
        struct exec_tools tools;
        struct session_manager *mgr = s->mgr;
        json_t *result = NULL;
        json_int_t peak;
        bool lost, first, files_changed = false;
        uint64_t t0;
        int r;

        r2.interrupt_grace_ms = mgr->cfg.interrupt_grace_ms;
        r2.tools = codemode_tools(s, &tools) ? &tools : NULL;
        if (r2.timeout_ms == 0) {
                pthread_mutex_lock(&s->lock);
                r2.timeout_ms = s->timeout_ms; /* the session's default (PATCH timeout_s) */
                pthread_mutex_unlock(&s->lock);
        }
        t0 = now_ns();
        r = sandbox_exec(s->sb, &r2, &result, err);
        if (result) {
                enum metrics_exec_status st = metrics_exec_status_from_string(
                        json_string_value(json_object_get(result, "status")));
                metrics_execution(s->metrics, st, now_ns() - t0);
                if (st == METRICS_EXEC_OOM)
                        metrics_oom_kill(s->metrics);
        }

        pthread_mutex_lock(&s->lock);
        s->exec_count++;
        s->dirty = true;
        s->last_used_at = time(NULL);
        s->last_used_ns = now_ns();
        lost = !sandbox_is_alive(s->sb);
        if (result) {
                json_t *usage = json_object_get(result, "usage");
                s->cpu_ms += json_number_value(json_object_get(usage, "cpu_ms"));
                json_object_set_new(result, "execution_count", json_integer(s->exec_count));
                files_changed = json_array_size(json_object_get(result, "files")) > 0;
        }
        /* The cell's peak, which sandbox_exec() just read: no second read of the cgroup. */
        peak = json_integer_value(
                json_object_get(json_object_get(result, "usage"), "peak_memory_bytes"));
        if (!lost && peak > 0 && (uint64_t) peak > s->peak_memory)
                s->peak_memory = (uint64_t) peak;
        /* Once per session, at its first cell: the store learns that it has variables to lose,
         * so that a crash before its first checkpoint is reported as such on resume. */
        first = s->exec_count == 1 && !s->saved && !s->ephemeral && mgr->store;
        pthread_mutex_unlock(&s->lock);
        if (first)
                session_store_info(s);

        /* Files a call made are on disk before the call returns, so a crash of the daemon
         * does not lose them (the variables wait for the next checkpoint). */
        if (!lost && files_changed)
                lifecycle_save_files(s);
        if (result) {
                attach_resume_report(s, result);
                recent_add(mgr->recent, &(struct recent_exec){ .session_id = s->id,
                                                               .tenant = s->tenant,
                                                               .profile = s->profile->name,
                                                               .language = req->language,
                                                               .code = req->code,
                                                               .one_shot = req->one_shot,
                                                               .result = result });
        }
        release_busy(s);

        if (lost) {
                const char *status =
                        result ? json_string_value(json_object_get(result, "status")) : NULL;
                char reason[160];
                (void) snprintf(reason, sizeof(reason), "%s",
                                status && strcmp(status, "timeout") == 0
                                        ? "the cell did not stop after the timeout and the "
                                          "session was killed"
                                : status && strcmp(status, "oom") == 0 ? "it ran out of memory"
                                : status && strcmp(status, "output_limit") == 0
                                        ? "the cell did not stop after the output limit"
                                : !result ? DIED_IDLE_REASON
                                          : "the interpreter died");
                pthread_mutex_lock(&mgr->lock);
                if (session_table_find(mgr, s->id) == s)
                        end_locked(mgr, s, true, reason);
                pthread_mutex_unlock(&mgr->lock);
                /* The code never ran: the session was gone already, and says why. */
                if (!result)
                        return airlock_error_set(err, -ENOENT, "session %s was lost: %s", s->id,
                                                 reason);
        }
        if (r < 0)
                return r;
        *ret_result = result;
        return 0;
}

/* What an execute request asks of the profile and of its own fields, checked before any
 * sandbox is touched (a one-shot checks it before it makes one). */
static int check_request(const struct profile *p, const struct exec_request *req,
                         struct airlock_error *err)
{
        char langs[64];

        if (req->language && strcmp(req->language, "python") != 0 &&
            strcmp(req->language, "bash") != 0 && strcmp(req->language, "javascript") != 0 &&
            strcmp(req->language, "typescript") != 0 && strcmp(req->language, "r") != 0)
                return airlock_error_set(err, -EINVAL,
                                         "language: expected python, bash, javascript, "
                                         "typescript or r");
        if (!profile_allows_language(p, req->language))
                return airlock_error_set(err, -EINVAL,
                                         "language: profile '%s' does not allow %s (its "
                                         "languages: %s)",
                                         p->name, req->language ? req->language : "python",
                                         profile_languages_text(p, langs, sizeof(langs)));
        if (req->stdin_text || req->env || req->cwd)
                return check_call(req, err);
        return 0;
}

/* The execution's audit line (docs/AUDIT.md): what ran, where, and how it ended; a call that
 * ran nothing (a busy or ended session) is written with status "failed" and the reason. */
static void audit_execution(struct session *s, const struct exec_request *req, const json_t *result,
                            int r, const struct airlock_error *err)
{
        struct audit *a = s->mgr->cfg.audit;
        json_t *f;

        if (!a)
                return;
        f = json_pack("{s:s, s:s}", "language", req->language ? req->language : "python", "profile",
                      s->profile->name);
        if (!f || audit_add_code(a, f, req->code, req->code ? strlen(req->code) : 0) < 0) {
                json_decref(f);
                audit_emit_owned(a, "execution", s->tenant, s->id, NULL);
                return;
        }
        if (req->one_shot)
                json_object_set_new(f, "one_shot", json_true());
        if (r >= 0 && result) {
                json_object_set(f, "status", json_object_get(result, "status"));
                json_object_set(f, "exit_code", json_object_get(result, "exit_code"));
                json_object_set(f, "usage", json_object_get(result, "usage"));
                if (json_is_string(json_object_get(result, "state")))
                        json_object_set(f, "state", json_object_get(result, "state"));
        } else {
                json_object_set_new(f, "status", json_string("failed"));
                json_object_set_new(f, "error",
                                    audit_string(err && err->msg[0] ? err->msg : strerror(-r)));
        }
        audit_emit_owned(a, "execution", s->tenant, s->id, f);
}

/* After check_request() refused req: a language the profile does not allow is a policy
 * refusal worth a line (session NULL for a one-shot, refused before it had one). */
static void audit_refusal(struct session_manager *mgr, const char *session, const struct profile *p,
                          const struct exec_request *req, const struct airlock_error *err)
{
        if (!mgr->cfg.audit || !req->language || profile_allows_language(p, req->language))
                return;
        audit_emit_scoped(mgr->cfg.audit, "policy.refusal", session,
                          json_pack("{s:s, s:s, s:s, s:s}", "policy", "language", "profile",
                                    p->name, "language", req->language, "reason",
                                    err ? err->msg : "not allowed"));
}

int session_execute(struct session *s, const struct exec_request *req, json_t **ret_result,
                    struct airlock_error *err)
{
        struct session *live = NULL;
        int r;

        r = check_request(s->profile, req, err);
        if (r < 0) {
                audit_refusal(s->mgr, s->id, s->profile, req, err);
                return r;
        }
        /* --audit-fail=refuse: no code runs that the log could not record. */
        r = audit_check(s->mgr->cfg.audit, err);
        if (r < 0)
                return r;
        r = acquire(s, true, &live, err);
        if (r >= 0) {
                r = execute_live(live, req, ret_result, err);
                session_unref(live);
        }
        audit_execution(s, req, r >= 0 ? *ret_result : NULL, r, err);
        return r;
}

int session_interrupt(struct session *s)
{
        int r = 0;

        pthread_mutex_lock(&s->lock);
        if (s->phase == PHASE_GONE && !s->gone_stopped)
                r = -ENOENT;
        else if (s->busy && s->sb)
                (void) sandbox_interrupt(s->sb);
        pthread_mutex_unlock(&s->lock);
        return r;
}

/* Files are reached while no execution runs or while one does: the workspace is the
 * sandbox's, and every path is resolved safely, so both are fine. The session's lock keeps the
 * sandbox from stopping underneath. A change is also copied to the session's saved files
 * before the call returns. */
static int with_sandbox(struct session *s, bool changes,
                        int (*fn)(struct sandbox *sb, bool busy, void *arg,
                                  struct airlock_error *err),
                        void *arg, struct airlock_error *err)
{
        struct session *live = NULL;
        int r;

        r = acquire(s, false, &live, err);
        if (r < 0)
                return r;
        /* acquire() returned with live's lock held. */
        if (!live->sb || !sandbox_is_alive(live->sb)) {
                r = airlock_error_set(err, -ENOENT, "session %s has ended", s->id);
        } else {
                r = fn(live->sb, live->busy, arg, err);
                if (r >= 0) {
                        live->last_used_at = time(NULL);
                        live->last_used_ns = now_ns();
                }
                if (r >= 0 && changes)
                        lifecycle_save_files(live);
        }
        pthread_mutex_unlock(&live->lock);
        session_unref(live);
        return r;
}

struct file_args {
        struct session_manager *mgr;
        const char *path;
        size_t max_bytes;
        char **ret_data;
        size_t *ret_len;
        int *ret_fd;
        uint64_t *ret_size;
        const void *data;
        size_t len;
        json_t **ret_listing;
        struct tree_removal *ret_removal;
        uint64_t timeout_ms;
};

static int do_read(struct sandbox *sb, bool busy, void *arg, struct airlock_error *err)
{
        (void) busy;
        struct file_args *a = arg;
        return sandbox_file_read(sb, a->path, a->max_bytes, a->ret_data, a->ret_len, err);
}

static int do_open(struct sandbox *sb, bool busy, void *arg, struct airlock_error *err)
{
        (void) busy;
        struct file_args *a = arg;
        return sandbox_file_open(sb, a->path, a->max_bytes, a->ret_fd, a->ret_size, err);
}

/* Headroom kept below --max-session-memory by an upload, as below a session's own limit. */
#define WRITE_SCOPE_HEADROOM (16u << 20)

static int do_write(struct sandbox *sb, bool busy, void *arg, struct airlock_error *err)
{
        struct file_args *a = arg;
        uint64_t max = a->mgr->cfg.max_session_memory, used;

        /* Every session's files and memory together: refuse rather than have the kernel pick
         * some session to kill. */
        if (max && scope_memory_usage(&a->mgr->scope, &used) >= 0 &&
            used + a->len + WRITE_SCOPE_HEADROOM > max)
                return airlock_error_set(err, -ENOSPC,
                                         "'%s' (%zu bytes) does not fit in the memory all "
                                         "sessions may use together: %llu of %llu bytes are in "
                                         "use (--max-session-memory)",
                                         a->path, a->len, (unsigned long long) used,
                                         (unsigned long long) max);
        return sandbox_file_write(sb, a->path, a->data, a->len, busy, err);
}

static int do_delete(struct sandbox *sb, bool busy, void *arg, struct airlock_error *err)
{
        (void) busy;
        struct file_args *a = arg;
        return sandbox_file_delete(sb, a->path, a->timeout_ms, a->ret_removal, err);
}

static int do_list(struct sandbox *sb, bool busy, void *arg, struct airlock_error *err)
{
        (void) busy;
        struct file_args *a = arg;
        return sandbox_file_list(sb, a->path, a->ret_listing, err);
}

struct context_args {
        const char *op, *id;
        json_t **ret_ids;
};

static int do_context(struct sandbox *sb, bool busy, void *arg, struct airlock_error *err)
{
        struct context_args *a = arg;

        if (busy)
                return airlock_error_set(err, -EBUSY,
                                         "an execution is running in this session: contexts "
                                         "change between cells");
        return sandbox_context(sb, a->op, a->id, a->ret_ids, err);
}

int session_context(struct session *s, const char *op, const char *id, json_t **ret_ids,
                    struct airlock_error *err)
{
        struct context_args a = { .op = op, .id = id, .ret_ids = ret_ids };
        return with_sandbox(s, false, do_context, &a, err);
}

/* A file transfer's audit line: the path as the client gave it, the bytes moved, and, when it
 * was refused, why (a path out of /work is worth recording too). Returns r. */
static int audit_file(struct session *s, const char *event, const char *path, uint64_t bytes, int r,
                      const struct airlock_error *err)
{
        struct audit *a = s->mgr->cfg.audit;
        json_t *f;

        if (!a)
                return r;
        f = json_pack("{s:o, s:s}", "path", audit_string(path), "outcome", r >= 0 ? "ok" : "error");
        if (f && r >= 0 && strcmp(event, "file.delete") != 0)
                json_object_set_new(f, "bytes", json_integer((json_int_t) bytes));
        if (f && r < 0)
                json_object_set_new(f, "error",
                                    audit_string(err && err->msg[0] ? err->msg : strerror(-r)));
        audit_emit_owned(a, event, s->tenant, s->id, f);
        return r;
}

int session_file_read(struct session *s, const char *path, size_t max_bytes, char **ret_data,
                      size_t *ret_len, struct airlock_error *err)
{
        struct file_args a = {
                .path = path, .max_bytes = max_bytes, .ret_data = ret_data, .ret_len = ret_len
        };
        int r = with_sandbox(s, false, do_read, &a, err);
        return audit_file(s, "file.download", path, r >= 0 ? *ret_len : 0, r, err);
}

int session_file_open(struct session *s, const char *path, size_t max_bytes, int *ret_fd,
                      uint64_t *ret_size, struct airlock_error *err)
{
        struct file_args a = {
                .path = path, .max_bytes = max_bytes, .ret_fd = ret_fd, .ret_size = ret_size
        };
        int r = with_sandbox(s, false, do_open, &a, err);
        return audit_file(s, "file.download", path, r >= 0 ? *ret_size : 0, r, err);
}

int session_file_write(struct session *s, const char *path, const void *data, size_t len,
                       struct airlock_error *err)
{
        struct file_args a = { .path = path, .data = data, .len = len, .mgr = s->mgr };
        int r = with_sandbox(s, true, do_write, &a, err);
        return audit_file(s, "file.upload", path, len, r, err);
}

int session_file_delete(struct session *s, const char *path, uint64_t timeout_ms,
                        struct tree_removal *ret_removal, struct airlock_error *err)
{
        struct file_args a = { .path = path, .ret_removal = ret_removal, .timeout_ms = timeout_ms };
        int r = with_sandbox(s, true, do_delete, &a, err);
        return audit_file(s, "file.delete", path, 0, r, err);
}

int session_file_list(struct session *s, const char *dir, json_t **ret_listing,
                      struct airlock_error *err)
{
        struct file_args a = { .path = dir, .ret_listing = ret_listing };
        return with_sandbox(s, false, do_list, &a, err);
}

/* Writes a one-shot's input files, naming the one that failed. */
static int run_once_write(struct session *s, const struct run_once_files *files,
                          struct airlock_error *err)
{
        for (size_t i = 0; i < files->n_in; i++) {
                const struct run_once_file *f = &files->in[i];
                struct airlock_error e = { { 0 } };
                int r = session_file_write(s, f->path, f->data, f->len, &e);

                if (r >= 0)
                        continue;
                if (r == -EFBIG || r == -ENOSPC || r == -EDQUOT)
                        r = -E2BIG;
                else if (r != -ENOMEM)
                        r = -EINVAL;
                return airlock_error_set(err, r, "files: '%.200s' cannot be written into /work: %s",
                                         f->path, e.msg[0] ? e.msg : strerror(-r));
        }
        return 0;
}

/* Hands the content of each file the code created or changed to files->on_file, within the
 * caps. */
static int run_once_read_back(struct session *s, const struct run_once_files *files, json_t *result)
{
        json_t *entry;
        uint64_t total = 0;
        size_t i;

        json_array_foreach (json_object_get(result, "files"), i, entry) {
                const char *change = json_string_value(json_object_get(entry, "change"));
                const char *path = json_string_value(json_object_get(entry, "path"));
                uint64_t size = (uint64_t) json_integer_value(json_object_get(entry, "size"));
                struct airlock_error e = { { 0 } };
                _cleanup_free_ char *data = NULL;
                char why[AIRLOCK_ERROR_MAX + 64];
                size_t len = 0;
                int r;

                if (!change || !path || strcmp(change, "deleted") == 0)
                        continue;
                if (size > RUN_ONCE_FILE_OUT_MAX) {
                        (void) snprintf(why, sizeof(why), "the file is larger than %u bytes",
                                        RUN_ONCE_FILE_OUT_MAX);
                } else if (total + size > RUN_ONCE_FILES_OUT_MAX) {
                        (void) snprintf(why, sizeof(why),
                                        "the files together are larger than %u bytes",
                                        RUN_ONCE_FILES_OUT_MAX);
                } else {
                        r = session_file_read(s, path, RUN_ONCE_FILE_OUT_MAX, &data, &len, &e);
                        if (r == -EFBIG)
                                (void) snprintf(why, sizeof(why),
                                                "the file is larger than %u bytes",
                                                RUN_ONCE_FILE_OUT_MAX);
                        else if (r < 0)
                                (void) snprintf(why, sizeof(why), "it cannot be read: %s",
                                                e.msg[0] ? e.msg : strerror(-r));
                        else if (total + len > RUN_ONCE_FILES_OUT_MAX)
                                (void) snprintf(why, sizeof(why),
                                                "the files together are larger than %u bytes",
                                                RUN_ONCE_FILES_OUT_MAX);
                        else
                                why[0] = '\0';
                        if (why[0]) {
                                free(data);
                                data = NULL;
                        }
                }
                if (data)
                        total += len;
                r = files->on_file(files->userdata, entry, data, len, data ? NULL : why);
                if (r < 0)
                        return r;
        }
        return 0;
}

int session_run_once(struct session_manager *mgr, const struct session_create_options *opts,
                     const struct exec_request *req, json_t **ret_result, struct airlock_error *err)
{
        return session_run_once_files(mgr, opts, req, NULL, ret_result, err);
}

int session_run_once_files(struct session_manager *mgr, const struct session_create_options *opts,
                           const struct exec_request *req, const struct run_once_files *files,
                           json_t **ret_result, struct airlock_error *err)
{
        struct session_create_options o = opts ? *opts : (struct session_create_options){ 0 };
        struct exec_request once = *req;
        struct session *s = NULL;
        struct profile_slot *slot = NULL;
        char id[SESSION_ID_MAX + 1];
        int r;

        pthread_mutex_lock(&mgr->lock);
        r = session_profile_slot(mgr, o.profile ? o.profile : "default", &slot, err);
        if (r >= 0)
                r = check_request(slot->profile, req, err);
        pthread_mutex_unlock(&mgr->lock);
        if (r < 0 && slot)
                audit_refusal(mgr, NULL, slot->profile, req, err);
        /* --audit-fail=refuse: refused before a sandbox is taken for it. */
        if (r >= 0)
                r = audit_check(mgr->cfg.audit, err);
        if (r < 0)
                return r;
        o.ephemeral = true;
        r = session_create(mgr, &o, &s, err);
        if (r < 0)
                return r;
        memcpy(id, s->id, sizeof(id));
        once.one_shot = true;
        r = files ? run_once_write(s, files, err) : 0;
        if (r >= 0)
                r = session_execute(s, &once, ret_result, err);
        if (r >= 0 && files && files->on_file) {
                int k = run_once_read_back(s, files, *ret_result);
                if (k < 0) {
                        json_decref(*ret_result);
                        *ret_result = NULL;
                        r = airlock_error_set(err, k, "cannot return the files: %s", strerror(-k));
                }
        }
        (void) session_destroy(mgr, id);
        session_unref(s);
        if (r >= 0)
                /* The session is gone by design: "state" belongs to sessions that live on. */
                json_object_del(*ret_result, "state");
        return r;
}
