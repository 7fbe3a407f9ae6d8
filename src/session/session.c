/* The session manager: the table of live sessions, a warm pool per profile so that create is a
 * hand-over, the idle reaper, and the memory of sessions that ended so that the next call on
 * one can say why. Each session owns one sandbox (see sandbox.h); the manager's lock guards the
 * table and the pools, each session's lock guards its sandbox. An execution holds a reference
 * and the session's busy flag, never the manager's lock, so a long cell blocks nothing else. */
#include "session.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "session-internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define ENDED_MAX 1024
#define DEFAULT_MAX_SESSIONS 64
#define DEFAULT_IDLE_MS (5ULL * 60 * 1000)
#define DEFAULT_MAX_IDLE_MS (24ULL * 3600 * 1000)
#define DEFAULT_GRACE_MS 2000

struct session {
        atomic_int refs;
        char id[SESSION_ID_LEN + 1];
        struct session_manager *mgr;
        const struct profile *profile; /* owned by the manager's profile cache */
        pthread_mutex_t lock;          /* guards sb, busy, the counters */
        struct sandbox *sb;
        bool busy;
        bool ended;
        uint64_t idle_timeout_ms;
        time_t created_at;
        uint64_t last_used_ns; /* monotonic */
        time_t last_used_at;
        unsigned exec_count;
        double cpu_ms;
        uint64_t peak_memory;
};

struct pool_member {
        struct sandbox *sb;
        char id[SESSION_ID_LEN + 1];
};

struct profile_slot {
        struct profile *profile;
        pthread_mutex_t zlock; /* starting or replacing the zygote */
        struct zygote *zygote; /* namespaces mode: where this profile's sessions come from */
        char **envp;           /* the environment of the profile's runners */
        unsigned pool_target;
        bool pool_failed; /* a warm session could not start: do not keep retrying */
        struct pool_member *pool;
        unsigned pool_len, pool_cap;
        unsigned starting; /* pool members being started right now */
};

struct ended {
        char id[SESSION_ID_LEN + 1];
        char reason[160];
        bool lost; /* ended by a failure rather than by a client or idleness */
};

struct session_manager {
        struct session_manager_config cfg;
        pthread_mutex_t lock;
        pthread_cond_t wake; /* pool and reaper thread */
        bool stopping;
        struct session **sessions;
        unsigned n_sessions, cap_sessions;
        struct profile_slot **profiles; /* pointers: a slot's mutex must not move */
        unsigned n_profiles;
        char *runner_path;
        struct ended ended[ENDED_MAX];
        unsigned ended_next;
        pthread_t worker;
        bool worker_started;
        struct store *store; /* NULL without a state directory */
        /* Sandboxes of ended sessions, already killed, waiting for the worker to reap them and
         * remove their cgroups: requests never wait for that. */
        pthread_mutex_t grave_lock;
        struct sandbox **grave;
        unsigned n_grave, cap_grave;
};

/* Records of ended sessions are kept this long, so late calls still learn what happened. */
#define STORE_KEEP_S (7LL * 24 * 3600)

static void make_id(char id[SESSION_ID_LEN + 1])
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
}

static void format_time(time_t t, char buf[32])
{
        struct tm tm;

        (void) gmtime_r(&t, &tm);
        (void) strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Loads (once) and returns the profile slot for name. Called with the manager's lock held. */
static int profile_slot_get(struct session_manager *mgr, const char *name,
                            struct profile_slot **ret_slot, struct airlock_error *err)
{
        struct profile_slot **slots, *slot;
        struct profile *p = NULL;
        int r;

        for (unsigned i = 0; i < mgr->n_profiles; i++)
                if (strcmp(mgr->profiles[i]->profile->name, name) == 0) {
                        *ret_slot = mgr->profiles[i];
                        return 0;
                }
        /* Only names: a client must not make the daemon read files by path. */
        if (!profile_name_is_valid(name))
                return airlock_error_set(err, -EINVAL, "'%s' is not a valid profile name", name);
        r = profile_load(name, &p, err);
        if (r < 0)
                return r;
        slot = calloc(1, sizeof(*slot));
        slots = slot ? realloc(mgr->profiles, (mgr->n_profiles + 1) * sizeof(*slots)) : NULL;
        if (!slots) {
                free(slot);
                profile_free(p);
                return -ENOMEM;
        }
        mgr->profiles = slots;
        r = sandbox_build_env(p, NULL, &slot->envp);
        if (r < 0) {
                free(slot);
                profile_free(p);
                return r;
        }
        slot->profile = p;
        pthread_mutex_init(&slot->zlock, NULL);
        slots[mgr->n_profiles++] = slot;
        *ret_slot = slot;
        return 0;
}

/* Returns the profile's zygote (a new reference), starting it, or replacing it when it died. */
static int get_zygote(struct session_manager *mgr, struct profile_slot *slot, struct zygote **ret_z,
                      struct airlock_error *err)
{
        int r = 0;

        pthread_mutex_lock(&slot->zlock);
        if (slot->zygote && !zygote_is_alive(slot->zygote)) {
                log_warn("profile=%s msg=\"zygote died, starting a new one\"", slot->profile->name);
                zygote_unref(slot->zygote);
                slot->zygote = NULL;
        }
        if (!slot->zygote)
                r = zygote_start(mgr->cfg.features, slot->profile, slot->envp, mgr->runner_path,
                                 &slot->zygote, err);
        if (r >= 0)
                *ret_z = zygote_ref(slot->zygote);
        pthread_mutex_unlock(&slot->zlock);
        return r;
}

static int start_sandbox(struct session_manager *mgr, struct profile_slot *slot, const char *id,
                         struct sandbox **ret_sb, struct airlock_error *err)
{
        const struct profile *p = slot->profile;
        char name[64];

        (void) snprintf(name, sizeof(name), "airlock-%s", id);
        if (mgr->cfg.mode == JAIL_NAMESPACES) {
                struct cgroup_limits limits = {
                        .memory_max = p->limits.memory_bytes,
                        .pids_max = p->limits.pids,
                        .cpu_millicpus = p->limits.cpu_millicpus,
                };
                struct zygote *z = NULL;
                int r = get_zygote(mgr, slot, &z, err);
                if (r < 0)
                        return r;
                r = zygote_fork(z, name, &limits, ret_sb, err);
                zygote_unref(z);
                return r;
        }
        return sandbox_start(
                mgr->cfg.features,
                &(struct sandbox_options){
                        .mode = mgr->cfg.mode, .profile = p, .name = name, .preload = true },
                ret_sb, err);
}

static void remember_ended(struct session_manager *mgr, const char *id, bool lost,
                           const char *reason)
{
        struct ended *e = &mgr->ended[mgr->ended_next++ % ENDED_MAX];

        (void) snprintf(e->id, sizeof(e->id), "%s", id);
        (void) snprintf(e->reason, sizeof(e->reason), "%s", reason);
        e->lost = lost;
}

/* Hands a killed sandbox to the worker; frees it here only if the list cannot grow. */
static void bury(struct session_manager *mgr, struct sandbox *sb)
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

static void session_free(struct session *s)
{
        bury(s->mgr, TAKE_PTR(s->sb));
        pthread_mutex_destroy(&s->lock);
        free(s);
}

void session_unref(struct session *s)
{
        if (s && atomic_fetch_sub(&s->refs, 1) == 1)
                session_free(s);
}

static struct session *session_ref(struct session *s)
{
        atomic_fetch_add(&s->refs, 1);
        return s;
}

const char *session_id(const struct session *s)
{
        return s->id;
}

/* Removes s from the table and kills its sandbox. Called with the manager's lock held; the
 * table's reference is dropped here. */
static void end_locked(struct session_manager *mgr, struct session *s, bool lost,
                       const char *reason)
{
        for (unsigned i = 0; i < mgr->n_sessions; i++) {
                if (mgr->sessions[i] != s)
                        continue;
                mgr->sessions[i] = mgr->sessions[--mgr->n_sessions];
                break;
        }
        pthread_mutex_lock(&s->lock);
        s->ended = true;
        if (s->sb)
                sandbox_kill(s->sb);
        pthread_mutex_unlock(&s->lock);
        remember_ended(mgr, s->id, lost, reason);
        (void) store_session_ended(mgr->store, s->id, lost, reason);
        log_info("session=%s profile=%s msg=\"session ended: %s\"", s->id, s->profile->name,
                 reason);
        session_unref(s);
}

/* The worker thread: refills the warm pools and ends idle sessions. */
static void *worker_main(void *arg)
{
        struct session_manager *mgr = arg;

        pthread_mutex_lock(&mgr->lock);
        while (!mgr->stopping) {
                struct profile_slot *todo = NULL;
                struct timespec until;
                bool more_graves;
                uint64_t now;

                pthread_mutex_unlock(&mgr->lock);
                reap_graves(mgr);
                pthread_mutex_lock(&mgr->lock);
                now = now_ns();

                for (unsigned i = 0; i < mgr->n_sessions;) {
                        struct session *s = mgr->sessions[i];
                        bool idle =
                                !s->busy && now - s->last_used_ns > s->idle_timeout_ms * 1000000ULL;
                        if (idle) {
                                end_locked(mgr, s, false,
                                           "it was idle for longer than its idle timeout");
                                continue;
                        }
                        i++;
                }
                for (unsigned i = 0; i < mgr->n_profiles && !todo; i++) {
                        struct profile_slot *slot = mgr->profiles[i];
                        if (slot->pool_len + slot->starting < slot->pool_target)
                                todo = slot;
                }
                if (todo) {
                        struct airlock_error err = { { 0 } };
                        struct sandbox *sb = NULL;
                        char id[SESSION_ID_LEN + 1];
                        int r;

                        todo->starting++;
                        make_id(id);
                        pthread_mutex_unlock(&mgr->lock);
                        r = start_sandbox(mgr, todo, id, &sb, &err);
                        pthread_mutex_lock(&mgr->lock);
                        todo->starting--;
                        if (r < 0) {
                                log_error("profile=%s msg=\"cannot start a warm session: %s\"",
                                          todo->profile->name, err.msg);
                                /* Do not spin on a profile that cannot start. */
                                todo->pool_target = 0;
                                todo->pool_failed = true;
                        } else if (mgr->stopping || todo->pool_len >= todo->pool_target) {
                                sandbox_free(sb);
                        } else {
                                if (todo->pool_len == todo->pool_cap) {
                                        unsigned cap = todo->pool_cap ? todo->pool_cap * 2 : 4;
                                        struct pool_member *m =
                                                realloc(todo->pool, cap * sizeof(*m));
                                        if (!m) {
                                                sandbox_free(sb);
                                                continue;
                                        }
                                        todo->pool = m;
                                        todo->pool_cap = cap;
                                }
                                todo->pool[todo->pool_len].sb = sb;
                                memcpy(todo->pool[todo->pool_len].id, id, sizeof(id));
                                todo->pool_len++;
                        }
                        continue;
                }
                pthread_mutex_lock(&mgr->grave_lock);
                more_graves = mgr->n_grave > 0;
                pthread_mutex_unlock(&mgr->grave_lock);
                if (more_graves)
                        continue; /* buried while we worked: reap before sleeping */
                (void) clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += 1;
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
        mgr->cfg = *cfg;
        if (!mgr->cfg.max_sessions)
                mgr->cfg.max_sessions = DEFAULT_MAX_SESSIONS;
        if (!mgr->cfg.default_idle_timeout_ms)
                mgr->cfg.default_idle_timeout_ms = DEFAULT_IDLE_MS;
        if (!mgr->cfg.max_idle_timeout_ms)
                mgr->cfg.max_idle_timeout_ms = DEFAULT_MAX_IDLE_MS;
        if (!mgr->cfg.interrupt_grace_ms)
                mgr->cfg.interrupt_grace_ms = DEFAULT_GRACE_MS;
        pthread_mutex_init(&mgr->lock, NULL);
        pthread_mutex_init(&mgr->grave_lock, NULL);
        pthread_cond_init(&mgr->wake, NULL);
        mgr->runner_path = sandbox_find_runner();
        if (!mgr->runner_path) {
                free(mgr);
                return airlock_error_set(err, -ENOENT,
                                         "cannot find airlock-runner (set AIRLOCK_RUNNER)");
        }

        if (cfg->state_dir) {
                r = store_open(cfg->state_dir, &mgr->store, err);
                if (r < 0) {
                        session_manager_free(mgr);
                        return r;
                }
                /* Sessions cannot outlive the daemon: whatever was live before is lost. */
                (void) store_mark_all_lost(mgr->store,
                                           "the daemon stopped while the session was live");
                (void) store_prune(mgr->store, STORE_KEEP_S);
        }

        /* Cgroups a crashed daemon left behind (empty ones only: rmdir refuses the others). */
        if (cfg->features->cgroups.version != CGROUP_NONE) {
                int n = cgroup_remove_stale(&cfg->features->cgroups, "airlock-s-");
                int m = cgroup_remove_stale(&cfg->features->cgroups, "airlock-zygote-");
                if (n > 0 || m > 0)
                        log_info("msg=\"removed %d stale cgroups left by an earlier daemon\"",
                                 (n > 0 ? n : 0) + (m > 0 ? m : 0));
        }

        names = cfg->pool_profiles ? cfg->pool_profiles : default_pool;
        pthread_mutex_lock(&mgr->lock);
        for (const char *const *n = names; *n; n++) {
                struct profile_slot *slot;
                r = profile_slot_get(mgr, *n, &slot, err);
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
        *ret_mgr = mgr;
        return 0;
}

void session_manager_shutdown(struct session_manager *mgr)
{
        pthread_mutex_lock(&mgr->lock);
        mgr->stopping = true;
        while (mgr->n_sessions > 0)
                end_locked(mgr, mgr->sessions[0], true, "the daemon shut down");
        pthread_cond_broadcast(&mgr->wake);
        pthread_mutex_unlock(&mgr->lock);
}

void session_manager_free(struct session_manager *mgr)
{
        if (!mgr)
                return;
        pthread_mutex_lock(&mgr->lock);
        mgr->stopping = true;
        pthread_cond_broadcast(&mgr->wake);
        pthread_mutex_unlock(&mgr->lock);
        if (mgr->worker_started)
                (void) pthread_join(mgr->worker, NULL);

        pthread_mutex_lock(&mgr->lock);
        while (mgr->n_sessions > 0)
                end_locked(mgr, mgr->sessions[0], true, "the daemon shut down");
        pthread_mutex_unlock(&mgr->lock);
        reap_graves(mgr);
        for (unsigned i = 0; i < mgr->n_profiles; i++) {
                struct profile_slot *slot = mgr->profiles[i];
                for (unsigned j = 0; j < slot->pool_len; j++)
                        sandbox_free(slot->pool[j].sb);
                free(slot->pool);
                zygote_unref(slot->zygote);
                strv_free(slot->envp);
                pthread_mutex_destroy(&slot->zlock);
                /* Sessions still referenced elsewhere keep a pointer to the profile; the
                 * manager is freed last, after every request has finished. */
                profile_free(slot->profile);
                free(slot);
        }
        free(mgr->runner_path);
        store_close(mgr->store);
        free(mgr->profiles);
        free(mgr->sessions);
        free(mgr->grave);
        pthread_mutex_destroy(&mgr->grave_lock);
        pthread_cond_destroy(&mgr->wake);
        pthread_mutex_destroy(&mgr->lock);
        free(mgr);
}

static bool env_name_is_allowed(const char *entry, struct airlock_error *err)
{
        static const char *const denied_prefixes[] = { "LD_", "PYTHON" };
        const char *eq = strchr(entry, '=');
        size_t n;

        if (!eq || eq == entry) {
                airlock_error_set(err, -EINVAL, "env: '%.40s' is not NAME=value", entry);
                return false;
        }
        n = (size_t) (eq - entry);
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

int session_create(struct session_manager *mgr, const struct session_create_options *opts,
                   struct session **ret_session, struct airlock_error *err)
{
        const char *profile = opts && opts->profile ? opts->profile : "default";
        uint64_t idle = opts && opts->idle_timeout_ms ? opts->idle_timeout_ms
                                                      : mgr->cfg.default_idle_timeout_ms;
        struct profile_slot *slot;
        struct sandbox *sb = NULL;
        struct session *s;
        char id[SESSION_ID_LEN + 1];
        int r;

        if (idle > mgr->cfg.max_idle_timeout_ms)
                return airlock_error_set(
                        err, -EINVAL, "idle_timeout_s: at most %llu seconds",
                        (unsigned long long) (mgr->cfg.max_idle_timeout_ms / 1000));
        for (char *const *e = opts ? opts->env : NULL; e && *e; e++)
                if (!env_name_is_allowed(*e, err))
                        return -EINVAL;

        pthread_mutex_lock(&mgr->lock);
        if (mgr->stopping) {
                pthread_mutex_unlock(&mgr->lock);
                return airlock_error_set(err, -ESHUTDOWN, "the daemon is shutting down");
        }
        if (mgr->n_sessions >= mgr->cfg.max_sessions) {
                pthread_mutex_unlock(&mgr->lock);
                return airlock_error_set(err, -EUSERS,
                                         "the daemon already runs %u sessions, its limit; end "
                                         "one (DELETE /v1/sessions/{id}) or try again later",
                                         mgr->cfg.max_sessions);
        }
        r = profile_slot_get(mgr, profile, &slot, err);
        if (r < 0) {
                pthread_mutex_unlock(&mgr->lock);
                return r;
        }
        /* Every profile in use gets a warm pool, so its next create is a hand-over; profiles
         * nobody uses cost nothing. */
        if (slot->pool_target < mgr->cfg.pool_size && !slot->pool_failed)
                slot->pool_target = mgr->cfg.pool_size;
        if (slot->pool_len > 0) {
                struct pool_member m = slot->pool[--slot->pool_len];
                sb = m.sb;
                memcpy(id, m.id, sizeof(id));
                pthread_cond_signal(&mgr->wake); /* refill */
        }
        pthread_mutex_unlock(&mgr->lock);

        if (!sb) {
                make_id(id);
                r = start_sandbox(mgr, slot, id, &sb, err);
                if (r < 0)
                        return r;
        }
        if (opts && opts->env && opts->env[0]) {
                r = sandbox_setenv(sb, opts->env, err);
                if (r < 0) {
                        sandbox_free(sb);
                        return r;
                }
        }

        s = calloc(1, sizeof(*s));
        if (!s) {
                sandbox_free(sb);
                return -ENOMEM;
        }
        atomic_init(&s->refs, 2); /* the table's and the caller's */
        memcpy(s->id, id, sizeof(id));
        s->mgr = mgr;
        s->profile = slot->profile;
        s->sb = sb;
        s->idle_timeout_ms = idle;
        s->created_at = s->last_used_at = time(NULL);
        s->last_used_ns = now_ns();
        pthread_mutex_init(&s->lock, NULL);

        pthread_mutex_lock(&mgr->lock);
        if (mgr->n_sessions == mgr->cap_sessions) {
                unsigned cap = mgr->cap_sessions ? mgr->cap_sessions * 2 : 16;
                struct session **v = realloc(mgr->sessions, cap * sizeof(*v));
                if (!v) {
                        pthread_mutex_unlock(&mgr->lock);
                        session_free(s);
                        return -ENOMEM;
                }
                mgr->sessions = v;
                mgr->cap_sessions = cap;
        }
        mgr->sessions[mgr->n_sessions++] = s;
        pthread_mutex_unlock(&mgr->lock);
        (void) store_session_created(mgr->store, s->id, s->profile->name);
        log_info("session=%s profile=%s msg=\"session created\"", s->id, s->profile->name);
        *ret_session = s;
        return 0;
}

int session_lookup(struct session_manager *mgr, const char *id, struct session **ret_session)
{
        int r = -ENOENT;

        pthread_mutex_lock(&mgr->lock);
        for (unsigned i = 0; i < mgr->n_sessions; i++)
                if (strcmp(mgr->sessions[i]->id, id) == 0) {
                        *ret_session = session_ref(mgr->sessions[i]);
                        r = 0;
                        break;
                }
        pthread_mutex_unlock(&mgr->lock);
        return r;
}

int session_destroy(struct session_manager *mgr, const char *id)
{
        int r = -ENOENT;

        pthread_mutex_lock(&mgr->lock);
        for (unsigned i = 0; i < mgr->n_sessions; i++)
                if (strcmp(mgr->sessions[i]->id, id) == 0) {
                        end_locked(mgr, mgr->sessions[i], false, "it was deleted by a client");
                        r = 0;
                        break;
                }
        pthread_mutex_unlock(&mgr->lock);
        return r;
}

json_t *session_describe(struct session *s)
{
        char created[32], used[32];
        json_t *o;

        pthread_mutex_lock(&s->lock);
        format_time(s->created_at, created);
        format_time(s->last_used_at, used);
        o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:{s:f, s:I, s:I}}", "id", s->id,
                      "profile", s->profile->name, "state", s->busy ? "busy" : "idle", "created_at",
                      created, "last_used_at", used, "idle_timeout_s",
                      (json_int_t) (s->idle_timeout_ms / 1000), "execution_count",
                      (int) s->exec_count, "usage", "cpu_ms", s->cpu_ms, "peak_memory_bytes",
                      (json_int_t) s->peak_memory, "memory_limit_bytes",
                      (json_int_t) s->profile->limits.memory_bytes);
        pthread_mutex_unlock(&s->lock);
        return o;
}

json_t *session_list(struct session_manager *mgr)
{
        struct session **copy;
        unsigned n;
        json_t *arr = json_array();

        pthread_mutex_lock(&mgr->lock);
        n = mgr->n_sessions;
        copy = calloc(n ? n : 1, sizeof(*copy));
        for (unsigned i = 0; copy && i < n; i++)
                copy[i] = session_ref(mgr->sessions[i]);
        pthread_mutex_unlock(&mgr->lock);
        for (unsigned i = 0; copy && i < n; i++) {
                json_array_append_new(arr, session_describe(copy[i]));
                session_unref(copy[i]);
        }
        free(copy);
        return arr;
}

json_t *session_manager_describe_ended(struct session_manager *mgr, const char *id)
{
        json_t *o = NULL;

        pthread_mutex_lock(&mgr->lock);
        for (unsigned i = 0; i < ENDED_MAX; i++) {
                const struct ended *e = &mgr->ended[i];
                if (e->id[0] && strcmp(e->id, id) == 0) {
                        o = json_pack("{s:s, s:s, s:s}", "id", e->id, "state",
                                      e->lost ? "lost" : "ended", "reason", e->reason);
                        break;
                }
        }
        pthread_mutex_unlock(&mgr->lock);
        return o ? o : store_describe_ended(mgr->store, id);
}

static json_t *profile_json(const struct profile *p)
{
        json_t *langs = json_array(), *preload = json_array(), *imports;

        if (p->lang_python)
                json_array_append_new(langs, json_string("python"));
        if (p->lang_bash)
                json_array_append_new(langs, json_string("bash"));
        for (char **m = p->preload; *m; m++)
                json_array_append_new(preload, json_string(*m));
        if (p->imports) {
                imports = json_array();
                for (char **m = p->imports; *m; m++)
                        json_array_append_new(imports, json_string(*m));
        } else {
                imports = json_null();
        }
        return json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:s, s:{s:I, s:f, s:i, s:f, s:I, s:I, "
                         "s:I}}",
                         "name", p->name, "description", p->description, "languages", langs,
                         "preload", preload, "imports", imports, "policy",
                         p->policy == PROFILE_POLICY_RESTRICTED ? "restricted" : "none", "network",
                         "none", "limits", "memory_bytes", (json_int_t) p->limits.memory_bytes,
                         "cpus", p->limits.cpu_millicpus / 1000.0, "pids", (int) p->limits.pids,
                         "timeout_s", p->limits.timeout_ms / 1000.0, "output_bytes",
                         (json_int_t) p->limits.output_bytes, "workspace_bytes",
                         (json_int_t) p->limits.workspace_bytes, "tmp_bytes",
                         (json_int_t) p->limits.tmp_bytes);
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
                if (profile_slot_get(mgr, *n, &slot, &err) < 0) {
                        log_warn("profile=\"%s\" msg=\"%s\"", *n, err.msg);
                        continue;
                }
                json_array_append_new(arr, profile_json(slot->profile));
        }
        pthread_mutex_unlock(&mgr->lock);
        return arr;
}

int session_execute(struct session *s, const struct exec_request *req, json_t **ret_result,
                    struct airlock_error *err)
{
        struct exec_request r2 = *req;
        struct session_manager *mgr = s->mgr;
        struct cgroup_usage u;
        json_t *result = NULL;
        bool lost;
        int r;

        if (req->language && strcmp(req->language, "python") != 0 &&
            strcmp(req->language, "bash") != 0)
                return airlock_error_set(err, -EINVAL, "language: expected python or bash");
        if ((req->language && strcmp(req->language, "bash") == 0 && !s->profile->lang_bash) ||
            ((!req->language || strcmp(req->language, "python") == 0) && !s->profile->lang_python))
                return airlock_error_set(err, -EINVAL, "language: profile '%s' does not allow %s",
                                         s->profile->name,
                                         req->language ? req->language : "python");

        pthread_mutex_lock(&s->lock);
        if (s->ended || !s->sb) {
                pthread_mutex_unlock(&s->lock);
                return airlock_error_set(err, -ENOENT, "session %s has ended", s->id);
        }
        if (s->busy) {
                pthread_mutex_unlock(&s->lock);
                return airlock_error_set(err, -EBUSY,
                                         "session %s is running another execution; wait for it "
                                         "or interrupt it",
                                         s->id);
        }
        s->busy = true;
        pthread_mutex_unlock(&s->lock);

        r2.interrupt_grace_ms = mgr->cfg.interrupt_grace_ms;
        r = sandbox_exec(s->sb, &r2, &result, err);

        pthread_mutex_lock(&s->lock);
        s->busy = false;
        s->exec_count++;
        s->last_used_at = time(NULL);
        s->last_used_ns = now_ns();
        lost = !sandbox_is_alive(s->sb);
        if (result) {
                json_t *usage = json_object_get(result, "usage");
                s->cpu_ms += json_number_value(json_object_get(usage, "cpu_ms"));
                json_object_set_new(result, "execution_count", json_integer(s->exec_count));
        }
        if (!lost && sandbox_usage(s->sb, &u) == 0 && u.has_peak && u.memory_peak > s->peak_memory)
                s->peak_memory = u.memory_peak;
        pthread_mutex_unlock(&s->lock);

        if (lost && !s->ended) {
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
                                        : "the interpreter died");
                pthread_mutex_lock(&mgr->lock);
                if (!s->ended)
                        end_locked(mgr, s, true, reason);
                pthread_mutex_unlock(&mgr->lock);
        }
        if (r < 0)
                return r;
        *ret_result = result;
        return 0;
}

int session_interrupt(struct session *s)
{
        int r = 0;

        pthread_mutex_lock(&s->lock);
        if (s->ended || !s->sb)
                r = -ENOENT;
        else if (s->busy)
                (void) sandbox_interrupt(s->sb);
        pthread_mutex_unlock(&s->lock);
        return r;
}

/* Files are reached while no execution runs or while one does: the workspace is the
 * sandbox's, and every path is resolved safely, so both are fine. The session lock only keeps
 * the sandbox from being freed underneath. */
#define WITH_SANDBOX(s, err, expr)                                                                 \
        ({                                                                                         \
                int _r;                                                                            \
                pthread_mutex_lock(&(s)->lock);                                                    \
                if ((s)->ended || !(s)->sb || !sandbox_is_alive((s)->sb))                          \
                        _r = airlock_error_set(err, -ENOENT, "session %s has ended", (s)->id);     \
                else                                                                               \
                        _r = (expr);                                                               \
                if (_r >= 0) {                                                                     \
                        (s)->last_used_at = time(NULL);                                            \
                        (s)->last_used_ns = now_ns();                                              \
                }                                                                                  \
                pthread_mutex_unlock(&(s)->lock);                                                  \
                _r;                                                                                \
        })

int session_file_read(struct session *s, const char *path, size_t max_bytes, char **ret_data,
                      size_t *ret_len, struct airlock_error *err)
{
        return WITH_SANDBOX(s, err,
                            sandbox_file_read(s->sb, path, max_bytes, ret_data, ret_len, err));
}

int session_file_write(struct session *s, const char *path, const void *data, size_t len,
                       struct airlock_error *err)
{
        return WITH_SANDBOX(s, err, sandbox_file_write(s->sb, path, data, len, err));
}

int session_file_delete(struct session *s, const char *path, struct airlock_error *err)
{
        return WITH_SANDBOX(s, err, sandbox_file_delete(s->sb, path, err));
}

int session_file_list(struct session *s, const char *dir, json_t **ret_listing,
                      struct airlock_error *err)
{
        return WITH_SANDBOX(s, err, sandbox_file_list(s->sb, dir, ret_listing, err));
}

int session_run_once(struct session_manager *mgr, const struct session_create_options *opts,
                     const struct exec_request *req, json_t **ret_result, struct airlock_error *err)
{
        struct session *s = NULL;
        char id[SESSION_ID_LEN + 1];
        int r;

        r = session_create(mgr, opts, &s, err);
        if (r < 0)
                return r;
        memcpy(id, s->id, sizeof(id));
        r = session_execute(s, req, ret_result, err);
        (void) session_destroy(mgr, id);
        session_unref(s);
        if (r >= 0)
                /* The session is gone by design: "state" belongs to sessions that live on. */
                json_object_del(*ret_result, "state");
        return r;
}
