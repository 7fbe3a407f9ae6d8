/* Profile slots (slots.c): each profile's zygote, which the rotator replaces after
 * --zygote-max-sessions forks or --zygote-max-age, and its warm pool of sandboxes. The
 * manager's worker (session.c) refills and warms the pools; this file hands their members
 * out and starts sandboxes. */
#include "session.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "layer/layer.h"
#include "session-internal.h"
#include "session-table.h"
#include "vm/vm.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long after a hand-over the warm pools wait before they refill or warm a member, while
 * the pool still holds one: a fork and its first page faults cost tens of milliseconds of CPU
 * on a small machine, and would otherwise land on the new session's first cell
 * (docs/PERFORMANCE.md). */
#define POOL_QUIET_MS 50

/* A replacement zygote that failed to start is tried again this much later; meanwhile the
 * old one goes on serving (and the log says so). */
#define ZYGOTE_RETRY_MS 30000

/* Loads (once) and returns the profile slot for name. Called with the manager's lock held. */
int session_profile_slot(struct session_manager *mgr, const char *name,
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
        if (p->isolation == PROFILE_ISOLATION_MICROVM) {
                /* Refused, not served weaker: its sessions were promised a kernel of their own. */
                struct airlock_error verr = { { 0 } };
                r = vm_probe(&verr);
                if (r < 0) {
                        r = airlock_error_set(err, -EOPNOTSUPP,
                                              "profile '%s' runs sessions in microVMs, which "
                                              "this host cannot run: %s. The other profiles "
                                              "are served.",
                                              name, verr.msg);
                        profile_free(p);
                        return r;
                }
        }
        slot = calloc(1, sizeof(*slot));
        slots = slot ? realloc(mgr->profiles, (mgr->n_profiles + 1) * sizeof(*slots)) : NULL;
        if (!slots) {
                free(slot);
                profile_free(p);
                return -ENOMEM;
        }
        mgr->profiles = slots;
        r = sandbox_build_env(p, NULL, NULL, false, &slot->envp);
        if (r >= 0)
                r = sandbox_build_env(p, NULL, JAIL_LAYER_PATH, false, &slot->envp_layer);
        if (r < 0) {
                strv_free(slot->envp);
                free(slot);
                profile_free(p);
                return r;
        }
        slot->layer_fd = -EBADF;
        /* Its layer from the start, so that the first zygote has it (session_slot_follow_layer
         * keeps it current from then on, and says what is wrong with a broken one). */
        if (mgr->cfg.state_dir && mgr->cfg.mode == JAIL_NAMESPACES &&
            layer_hold_current(mgr->cfg.state_dir, p->name, &slot->layer_dir, &slot->layer_fd,
                               NULL) > 0)
                (void) snprintf(slot->layer_id, sizeof(slot->layer_id), "%s",
                                strrchr(slot->layer_dir, '/') + 1);
        slot->profile = p;
        pthread_mutex_init(&slot->zlock, NULL);
        pthread_mutex_init(&slot->vmlock, NULL);
        slots[mgr->n_profiles++] = slot;
        *ret_slot = slot;
        return 0;
}

/* Makes z (a reference, taken) the profile's zygote. zlock held. */
static void install_zygote(struct profile_slot *slot, struct zygote *z)
{
        slot->zygote = z;
        atomic_store(&slot->generation, zygote_generation(z));
}

/* The environment of the slot's runners with its layer or without. zlock held. */
static char *const *slot_envp(const struct profile_slot *slot)
{
        return slot->layer_dir ? slot->envp_layer : slot->envp;
}

int session_slot_follow_layer(struct session_manager *mgr, struct profile_slot *slot,
                              struct airlock_error *err)
{
        struct airlock_error lerr = { { 0 } };
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct zygote *old = NULL;
        char *was = NULL, now_id[64];
        int r;

        /* Layers are bound only by the namespaces mode's mounts. */
        if (!mgr->cfg.state_dir || mgr->cfg.mode != JAIL_NAMESPACES)
                return 0;
        pthread_mutex_lock(&slot->zlock);
        r = layer_current(mgr->cfg.state_dir, slot->profile->name, &dir, &lerr);
        if (r >= 0 && (r > 0) == (slot->layer_dir != NULL) &&
            (!dir || strcmp(dir, slot->layer_dir) == 0)) {
                pthread_mutex_unlock(&slot->zlock);
                return 0;
        }
        if (r > 0) {
                /* Again, with its lock: layer_hold_current() resolves anew when the layer is
                 * swapped and removed in between. */
                free(TAKE_PTR(dir));
                r = layer_hold_current(mgr->cfg.state_dir, slot->profile->name, &dir, &fd, &lerr);
        }
        if (r < 0) {
                pthread_mutex_unlock(&slot->zlock);
                return airlock_error_set(err, -EIO, "%s", lerr.msg);
        }
        (void) snprintf(now_id, sizeof(now_id), "%s", dir ? strrchr(dir, '/') + 1 : "none");
        was = slot->layer_dir;
        slot->layer_dir = TAKE_PTR(dir);
        (void) safe_close_fd(slot->layer_fd);
        slot->layer_fd = TAKE_FD(fd);
        atomic_fetch_add(&slot->layer_gen, 1);
        /* Its sessions keep the old zygote (and through it the old layer) until they end. */
        old = TAKE_PTR(slot->zygote);
        pthread_mutex_lock(&mgr->lock); /* zlock, then the manager's: the documented order */
        (void) snprintf(slot->layer_id, sizeof(slot->layer_id), "%s",
                        strcmp(now_id, "none") == 0 ? "" : now_id);
        pthread_cond_signal(&mgr->wake); /* the worker refills the pool with the new layer */
        pthread_mutex_unlock(&mgr->lock);
        pthread_mutex_unlock(&slot->zlock);

        log_info("profile=%s msg=\"layer changed: new sessions get layer %s\" old=\"%s\"",
                 slot->profile->name, now_id, was ? strrchr(was, '/') + 1 : "none");
        free(was);
        zygote_unref(old);
        return 1;
}

/* Returns the profile's zygote (a new reference), starting it, or replacing it when it died,
 * and the layer generation it has. A zygote that is merely due for replacement goes on
 * serving: the rotator replaces it. */
static int get_zygote(struct session_manager *mgr, struct profile_slot *slot, struct zygote **ret_z,
                      unsigned *ret_layer_gen, struct airlock_error *err)
{
        struct zygote *z = NULL;
        int r = 0;

        pthread_mutex_lock(&slot->zlock);
        if (slot->zygote && !zygote_is_alive(slot->zygote)) {
                log_warn("profile=%s msg=\"zygote died, starting a new one\"", slot->profile->name);
                metrics_zygote_restart(metrics_profile(slot->profile->name), METRICS_ZYGOTE_DIED);
                zygote_unref(slot->zygote);
                slot->zygote = NULL;
        }
        if (!slot->zygote) {
                r = zygote_start(mgr->cfg.features, slot->profile, slot_envp(slot),
                                 mgr->runner_path, slot->layer_dir, &z, err);
                if (r >= 0)
                        install_zygote(slot, z);
        }
        if (r >= 0) {
                *ret_z = zygote_ref(slot->zygote);
                *ret_layer_gen = atomic_load(&slot->layer_gen);
        }
        pthread_mutex_unlock(&slot->zlock);
        return r;
}

/* Replaces the profile's zygote when it is due, starting the new one without holding zlock,
 * so that sessions go on forking from the old one meanwhile. The old zygote is only let go
 * here: every sandbox forked from it holds a reference (its sessions live in the zygote's pid
 * namespace and die with it), so it exits when the last of them and any fork in flight are
 * done. Pool members it made become stale; the worker replaces them. Returns whether it
 * replaced one. */
static bool rotate_zygote(struct session_manager *mgr, struct profile_slot *slot)
{
        struct airlock_error err = { { 0 } };
        struct zygote *old = NULL, *z = NULL;
        _cleanup_free_ char *layer_dir = NULL;
        char *const *envp = NULL;
        uint64_t now = now_ns();
        bool due, swapped = false;
        unsigned layer_gen = 0;
        int r;

        pthread_mutex_lock(&slot->zlock);
        if (slot->zygote && now >= slot->rotate_retry_ns) {
                /* The layer as it is now; if it changes meanwhile, session_slot_follow_layer()
                 * lets old go, and the zygote started here is not installed. */
                layer_dir = slot->layer_dir ? strdup(slot->layer_dir) : NULL;
                if (!slot->layer_dir || layer_dir) {
                        old = zygote_ref(slot->zygote);
                        envp = slot_envp(slot);
                        layer_gen = atomic_load(&slot->layer_gen);
                }
        }
        pthread_mutex_unlock(&slot->zlock);
        if (!old)
                return false;
        due = zygote_is_due(old, mgr->zygote_max_forks, mgr->zygote_max_age_ms);
        if (!due) {
                zygote_unref(old);
                return false;
        }
        r = zygote_start(mgr->cfg.features, slot->profile, envp, mgr->runner_path, layer_dir, &z,
                         &err);
        pthread_mutex_lock(&slot->zlock);
        if (r < 0) {
                slot->rotate_retry_ns = now_ns() + ZYGOTE_RETRY_MS * 1000000ULL;
        } else if (slot->zygote == old && atomic_load(&slot->layer_gen) == layer_gen) {
                install_zygote(slot, TAKE_PTR(z));
                swapped = true;
        }
        pthread_mutex_unlock(&slot->zlock);
        if (r < 0)
                log_error("profile=%s msg=\"cannot replace the zygote, the old one goes on "
                          "serving: %s\" generation=%u",
                          slot->profile->name, err.msg, zygote_generation(old));
        if (swapped) {
                metrics_zygote_restart(metrics_profile(slot->profile->name),
                                       METRICS_ZYGOTE_ROTATED);
                log_info("profile=%s msg=\"zygote replaced: new sessions get a new layout and "
                         "hash secret\" generation=%u old_generation=%u",
                         slot->profile->name, atomic_load(&slot->generation),
                         zygote_generation(old));
                zygote_unref(old); /* the slot's reference */
                pthread_mutex_lock(&mgr->lock);
                pthread_cond_signal(&mgr->wake); /* the worker refreshes the pool */
                pthread_mutex_unlock(&mgr->lock);
        }
        zygote_unref(z); /* a dead zygote was replaced meanwhile (get_zygote): keep that one */
        zygote_unref(old);
        return swapped;
}

/* The rotator thread: checks every profile's zygote once a second, or when a fork made one
 * due, and replaces those that are. */
void *session_rotator_main(void *arg)
{
        struct session_manager *mgr = arg;

        pthread_mutex_lock(&mgr->lock);
        while (!mgr->stopping) {
                struct timespec until;
                bool busy = false;

                /* Slots are never freed before this thread is joined, and a slot pointer does
                 * not move when the array grows; its length is read under the lock. */
                for (unsigned i = 0; i < mgr->n_profiles && !mgr->stopping; i++) {
                        struct profile_slot *slot = mgr->profiles[i];
                        struct airlock_error err = { { 0 } };
                        pthread_mutex_unlock(&mgr->lock);
                        /* A layer built meanwhile: the pools refill from a new zygote before
                         * the next create asks. A broken one is said by that create. */
                        (void) session_slot_follow_layer(mgr, slot, &err);
                        busy |= rotate_zygote(mgr, slot);
                        pthread_mutex_lock(&mgr->lock);
                }
                if (busy || mgr->stopping)
                        continue;
                (void) clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += 1;
                (void) pthread_cond_timedwait(&mgr->rotate_wake, &mgr->lock, &until);
        }
        pthread_mutex_unlock(&mgr->lock);
        return NULL;
}

/* A fresh exec of the runner in a sandbox of its own: its own address-space layout, hash
 * secret and stack canary (profiles with "start": "cold", and the process and none modes,
 * which have no zygote). It holds the layer it gets for as long as it lives. */
static int start_cold(struct session_manager *mgr, struct profile_slot *slot, const char *name,
                      struct sandbox **ret_sb, struct airlock_error *err)
{
        _cleanup_free_ char *layer_dir = NULL;
        _cleanup_close_ int layer_fd = -EBADF;
        unsigned layer_gen;
        int r = 0;

        /* The slot's own hold keeps its layer from being removed while this one is taken. */
        pthread_mutex_lock(&slot->zlock);
        layer_gen = atomic_load(&slot->layer_gen);
        if (slot->layer_dir) {
                layer_dir = strdup(slot->layer_dir);
                r = layer_dir ? layer_hold(layer_dir, err) : -ENOMEM;
                if (r >= 0)
                        layer_fd = r;
        }
        pthread_mutex_unlock(&slot->zlock);
        if (r < 0)
                return r;
        r = sandbox_start(mgr->cfg.features,
                          &(struct sandbox_options){ .mode = mgr->cfg.mode,
                                                     .profile = slot->profile,
                                                     .name = name,
                                                     .runner_path = mgr->runner_path,
                                                     .preload = true,
                                                     .layer_dir = layer_dir },
                          ret_sb, err);
        if (r < 0)
                return r;
        (*ret_sb)->layer_gen = layer_gen;
        (*ret_sb)->layer_fd = TAKE_FD(layer_fd);
        return 0;
}

/* A new sandbox for the profile, its cgroup named "airlock-<id>": a new session takes that id,
 * so its cgroup bears its name; a resumed one keeps its own id. */
int session_start_sandbox(struct session_manager *mgr, struct profile_slot *slot, const char *id,
                          struct sandbox **ret_sb, struct airlock_error *err)
{
        const struct profile *p = slot->profile;
        char name[64];
        int r;

        (void) snprintf(name, sizeof(name), "airlock-%s", id);
        if (p->isolation == PROFILE_ISOLATION_MICROVM)
                /* A copy of the profile's saved VM (vmsnap.c), with its egress proxy. */
                return session_vm_start(mgr, slot, id, ret_sb, err);
        if (mgr->cfg.mode == JAIL_NAMESPACES && p->start != PROFILE_START_COLD) {
                struct cgroup_limits limits = {
                        .memory_max = p->limits.memory_bytes,
                        .pids_max = p->limits.pids,
                        .cpu_millicpus = p->limits.cpu_millicpus,
                };
                struct zygote *z = NULL;
                unsigned layer_gen = 0;
                r = get_zygote(mgr, slot, &z, &layer_gen, err);
                if (r < 0)
                        return r;
                r = zygote_fork(z, name, &limits, ret_sb, err);
                if (r >= 0)
                        (*ret_sb)->layer_gen = layer_gen;
                if (r >= 0 && zygote_is_due(z, mgr->zygote_max_forks, 0)) {
                        pthread_mutex_lock(&mgr->lock);
                        pthread_cond_signal(&mgr->rotate_wake);
                        pthread_mutex_unlock(&mgr->lock);
                }
                zygote_unref(z);
        } else {
                /* A fresh exec of the runner in a sandbox of its own: its own address-space
                 * layout, hash secret and stack canary (profiles with "start": "cold", and the
                 * process and none modes, which have no zygote). */
                r = session_network_check_mode(mgr, p, err);
                if (r < 0)
                        return r;
                r = start_cold(mgr, slot, name, ret_sb, err);
        }
        if (r < 0)
                return r;
        /* The egress proxy goes in now, so that handing a warm one out costs nothing more. */
        r = session_network_open(mgr, p, *ret_sb, id, err);
        if (r < 0)
                *ret_sb = sandbox_free(*ret_sb);
        return r;
}

/* Whether m was forked from the profile's current zygote (a sandbox of its own exec, of
 * generation 0, always is). */
bool session_pool_member_is_current(const struct profile_slot *slot, const struct pool_member *m)
{
        return m->generation == atomic_load(&slot->generation) &&
               m->layer_gen == atomic_load(&slot->layer_gen);
}

unsigned session_pool_current_len(const struct profile_slot *slot)
{
        unsigned n = 0;

        for (unsigned i = 0; i < slot->pool_len; i++)
                n += session_pool_member_is_current(slot, &slot->pool[i]);
        return n;
}

/* The index of a stale member of the pool, or -1. */
int session_pool_find_stale(const struct profile_slot *slot)
{
        for (unsigned i = 0; i < slot->pool_len; i++)
                if (!session_pool_member_is_current(slot, &slot->pool[i]))
                        return (int) i;
        return -1;
}

int session_take_sandbox(struct session_manager *mgr, struct profile_slot *slot,
                         struct sandbox **ret_sb, char ret_id[SESSION_ID_MAX + 1],
                         struct airlock_error *err)
{
        struct sandbox *sb = NULL;
        unsigned k = 0, best = 0;
        int r;

        /* A layer built since the last create: this session gets it (a readlink when not). */
        r = session_slot_follow_layer(mgr, slot, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&mgr->lock);
        /* Every profile in use gets a warm pool, so its next create is a hand-over; profiles
         * nobody uses cost nothing. */
        if (slot->pool_target < mgr->cfg.pool_size && !slot->pool_failed)
                slot->pool_target = mgr->cfg.pool_size;
        if (slot->pool_len > 0) {
                /* A member of the current zygote if there is one, and a warm one before a cold
                 * one. A stale member (its zygote was replaced) is handed over only while no
                 * current one is ready, for the moment the worker takes to replace it: a
                 * create never waits for a fork. */
                for (unsigned i = 0; i < slot->pool_len; i++) {
                        unsigned score =
                                1 + (session_pool_member_is_current(slot, &slot->pool[i]) ? 2 : 0) +
                                (slot->pool[i].warm ? 1 : 0);
                        /* One with another layer than the profile's current one: never. */
                        if (slot->pool[i].layer_gen != atomic_load(&slot->layer_gen))
                                score = 0;
                        if (score > best)
                                k = i, best = score;
                }
                sb = best ? slot->pool[k].sb : NULL;
        }
        if (sb) {
                if (slot->pool[k].warm)
                        slot->pool_hits_warm++;
                else
                        slot->pool_hits_cold++;
                memcpy(ret_id, slot->pool[k].id, SESSION_ID_MAX + 1);
                slot->pool[k] = slot->pool[--slot->pool_len];
                /* The session handed over runs its first cells without a fork beside it: a
                 * refill that can wait (the pool still holds a member) waits a moment. An
                 * empty pool refills at once. */
                /* A quiet already running is not extended: a burst of creates delays the
                 * refill by POOL_QUIET_MS at most. */
                if (slot->pool_len == 0)
                        slot->quiet_until_ns = 0;
                else if (slot->quiet_until_ns <= now_ns())
                        slot->quiet_until_ns = now_ns() + POOL_QUIET_MS * 1000000ULL;
                pthread_cond_signal(&mgr->wake); /* refill */
        } else
                slot->pool_misses++;
        pthread_mutex_unlock(&mgr->lock);
        if (sb) {
                *ret_sb = sb;
                return 0;
        }
        log_debug("profile=%s msg=\"the warm pool is empty: this sandbox starts on the "
                  "request\"",
                  slot->profile->name);
        session_make_id(ret_id);
        return session_start_sandbox(mgr, slot, ret_id, ret_sb, err);
}
