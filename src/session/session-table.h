/* The session manager's own types, shared by session.c (the table, pools, executions, files)
 * and lifecycle.c (stop, resume, fork, checkpoints, deletion). Nothing outside src/session
 * includes this. */
#pragma once

#include "session.h"

#include "fair.h"
#include "metrics/metrics.h"
#include "profile/profile.h"
#include "session-internal.h"
#include "tenant/tenant.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define ENDED_MAX 1024

/* Where a session object is in its life. Only LIVE sessions run executions; the others make
 * callers wait (RESUMING, SAVING) or look the id up again (GONE after a stop: the id lives on
 * in the store and a new object resumes it). */
enum session_phase {
        PHASE_RESUMING, /* in the table, its sandbox being prepared */
        PHASE_LIVE,
        PHASE_SAVING, /* a checkpoint, stop or fork holds its runner */
        PHASE_GONE,   /* stopped (gone_stopped) or ended; this object is finished */
};

struct session {
        atomic_int refs;
        char id[SESSION_ID_MAX + 1];
        unsigned table_pos; /* its place in mgr->sessions while it is in the table */
        struct session_manager *mgr;
        /* Its owner (docs/TENANTS.md), set at create, kept on stop, inherited by forks: other
         * tenants' calls find no session by its id. */
        char tenant[TENANT_NAME_MAX + 1];
        const struct profile *profile;   /* owned by the manager's profile cache */
        struct metrics_profile *metrics; /* its profile's counters (metrics.h) */
        pthread_mutex_t lock;            /* guards everything below */
        pthread_cond_t cond;             /* phase or busy changed */
        pthread_mutex_t save_lock;       /* one write to its saved state at a time */
        struct sandbox *sb;              /* set while LIVE or SAVING */
        enum session_phase phase;
        bool gone_stopped; /* GONE by a stop (or a failed resume): the id can be resumed */
        bool busy;         /* an execution runs */
        bool ephemeral;    /* one-shot: never saved */
        bool dirty;        /* executions since the last save */
        uint64_t stop_after_ms;
        char **env; /* given at create, applied again on resume and fork */
        char *home; /* the same: the working directory and HOME, NULL = /work */
        /* Code Mode (codemode.c), given at create, kept on stop and fork: the internal tools
         * its code may call (NULL = the profile's code_tools), and those of them that need
         * approval which a person approved for it. */
        char **code_tools;
        char **approved_tools;
        /* Its network, narrowed at create from its profile's (network.c), kept on stop and
         * fork; NULL = the profile's. */
        struct egress_policy *network;
        bool network_lost;   /* its saved network could not be read back: it gets none */
        json_t *metadata;    /* the client's labels, an object of strings; NULL = none */
        uint64_t timeout_ms; /* a call's timeout when it gives none; 0 = the profile's */
        time_t stops_at;     /* its lifetime ends then (stopped as if idle); 0 = none */
        time_t created_at;
        uint64_t last_used_ns; /* monotonic */
        time_t last_used_at;
        unsigned exec_count;
        double cpu_ms;
        uint64_t peak_memory;
        json_t *saved;         /* what the last save reported (snapshot.h meta), or NULL */
        json_t *resume_report; /* for the first execution after a resume, or NULL */
        /* Its recent CPU use and cgroup weight (fair.h); only the worker touches it. */
        struct fair_state fair;
};

struct pool_member {
        struct sandbox *sb;
        char id[SESSION_ID_MAX + 1];
        bool warm;           /* it ran the first-call path already (sandbox_warmup) */
        unsigned generation; /* of the zygote it was forked from (sandbox_zygote_generation) */
        unsigned layer_gen;  /* of the slot's layer it has mounted (sandbox's layer_gen) */
};

struct profile_slot {
        struct profile *profile;
        pthread_mutex_t zlock; /* starting or replacing the zygote; taken before mgr->lock */
        /* microVM profiles: saving the profile's VM (vmsnap.c); taken before mgr->lock, never
         * with zlock */
        pthread_mutex_t vmlock;
        struct zygote *zygote; /* namespaces mode: where this profile's sessions come from */
        /* The generation of zygote (0 before the first one, and for cold profiles): pool members
         * of another generation are stale. Written under zlock, read anywhere. */
        atomic_uint generation;
        uint64_t rotate_retry_ns; /* a replacement failed: try again from then on (zlock) */
        char **envp;              /* the environment of the profile's runners */
        char **envp_layer;        /* the same, for runners with a layer (PYTHONPATH) */
        /* The profile's layer (docs/PROFILES.md), a host directory, or NULL: bound into the
         * zygote and cold sandboxes started from now on. slots.c follows the profile's
         * `current` (layer.h) at each create and once a second: a change replaces the zygote
         * and bumps layer_gen, and pool members of another layer_gen are never handed out.
         * layer_fd is the slot's own LOCK_SH on it, so that it cannot be removed between
         * being resolved and being bound. layer_dir and layer_fd: zlock. */
        char *layer_dir;
        int layer_fd;
        atomic_uint layer_gen;
        char layer_id[64]; /* layer_dir's id for GET /v1/profiles, "" for none; mgr->lock */
        unsigned pool_target;
        bool pool_failed; /* a warm session could not start: do not keep retrying */
        struct pool_member *pool;
        unsigned pool_len, pool_cap;
        unsigned starting; /* pool members being started right now */
        unsigned warming;  /* members taken out of the pool to be warmed right now */
        /* What creates got (GET /v1/profiles, "pool"): a warm member, a member not warmed yet,
         * or nothing, so the sandbox was started on the request. */
        uint64_t pool_hits_warm, pool_hits_cold, pool_misses;
        /* No refill or warm-up of this pool before this, while it still holds a member: a
         * session was just handed over, and its first cells should not share the CPUs with a
         * fork (slots.c, POOL_QUIET_MS). */
        uint64_t quiet_until_ns;
        /* Forks loading their children from this profile's sandboxes right now: the pool is
         * neither refilled nor warmed meanwhile, so that the children's loads have the CPUs
         * (lifecycle.c); the fork wakes the worker when it is done. mgr->lock. */
        unsigned forking;
};

struct ended {
        char id[SESSION_ID_MAX + 1];
        char tenant[TENANT_NAME_MAX + 1];
        char reason[160];
        bool lost; /* ended by a failure rather than by a client or idleness */
};

struct session_manager {
        struct session_manager_config cfg;
        pthread_mutex_t lock;
        pthread_cond_t wake; /* pool and reaper thread */
        bool stopping;
        bool draining;             /* session_manager_drain(): no new sessions */
        struct session **sessions; /* live, resuming and saving sessions */
        unsigned n_sessions, cap_sessions;
        /* The same sessions by id (open addressing, linear probing, at most half full), so
         * that finding one costs the same with ten sessions or a hundred thousand. */
        struct session **by_id;
        unsigned by_id_cap; /* 0 or a power of two */
        unsigned reserved;  /* places held for forks being made */
        /* The same places by tenant and profile, so that a tenant's quota counts the children
         * of its forks being made: a create cannot slip in between (session_quota_hold()). */
        struct quota_hold *holds;
        /* fds the daemon holds per live or warm sandbox (session_manager_fds_needed()), and
         * whether the worker said already that it cannot refill the pools for want of fds */
        unsigned fds_per_sandbox;
        bool fds_short_logged;
        struct profile_slot **profiles; /* pointers: a slot's mutex must not move */
        unsigned n_profiles;
        char *runner_path;
        struct ended ended[ENDED_MAX];
        unsigned ended_next;
        pthread_t worker;
        bool worker_started;
        /* The rotator thread replaces zygotes that are due (see session_manager_config), so
         * that no request ever waits for a zygote to start. Limits of 0 mean none. */
        pthread_t rotator;
        bool rotator_started;
        pthread_cond_t rotate_wake;
        unsigned zygote_max_forks;
        uint64_t zygote_max_age_ms;
        uint64_t next_deletion_scan_ns;
        uint64_t next_liveness_scan_ns; /* reap_dead(): sessions and pool members killed idle */
        struct store *store;            /* NULL without a state directory */
        struct recent *recent;          /* the last executions; NULL when turned off */
        /* The cgroup parent of every sandbox of ours; cfg.features points at scope.features. */
        struct scope scope;
        /* Sandboxes of ended sessions, already killed, waiting for the worker to reap them and
         * remove their cgroups: requests never wait for that. */
        pthread_mutex_t grave_lock;
        struct sandbox **grave;
        unsigned n_grave, cap_grave;
        /* The fairness thread (fair.h): CPU weights and memory pressure, once a second. */
        pthread_t fair_thread;
        bool fair_started;
        pthread_cond_t fair_wake; /* session_manager_free() wakes it to stop */
        /* Memory pressure (pressure.h), measured by the fairness thread once a second. */
        atomic_bool memory_short;
        _Atomic uint64_t memory_free, memory_min;
};

/* slots.c */
int session_profile_slot(struct session_manager *mgr, const char *name,
                         struct profile_slot **ret_slot, struct airlock_error *err);
/* A sandbox for a new or resumed session: a warm one from the pool, else a fresh fork.
 * ret_id gets the id its cgroup is named after, for a new session to take. */
int session_take_sandbox(struct session_manager *mgr, struct profile_slot *slot,
                         struct sandbox **ret_sb, char ret_id[SESSION_ID_MAX + 1],
                         struct airlock_error *err);
/* A new sandbox for the profile (forked from its zygote, or a fresh exec for a cold profile
 * and the modes without zygotes), its cgroup named "airlock-<id>". */
int session_start_sandbox(struct session_manager *mgr, struct profile_slot *slot, const char *id,
                          struct sandbox **ret_sb, struct airlock_error *err);
/* The pool's members from the current zygote generation, and where a stale one is (-1: none).
 * The manager's lock held. */
bool session_pool_member_is_current(const struct profile_slot *slot, const struct pool_member *m);
unsigned session_pool_current_len(const struct profile_slot *slot);
int session_pool_find_stale(const struct profile_slot *slot);
/* The rotator thread's body (arg: the manager). */
void *session_rotator_main(void *arg);
/* Makes the slot follow its profile's current layer (a no-op without a state directory, and
 * for the process and none modes). Returns 1 when it changed (the zygote was let go and the
 * pool's members became stale), 0 when not, or -errno with err saying what is wrong with the
 * layer. Takes zlock; call without the manager's lock. */
int session_slot_follow_layer(struct session_manager *mgr, struct profile_slot *slot,
                              struct airlock_error *err);

/* vmsnap.c: microVM profiles. A new sandbox restored from the profile's saved VM (saved
 * first when missing or stale; a boot of its own without a state directory), reseeded, its
 * cgroup "airlock-<id>". Returns 0 or -errno with err set. */
int session_vm_start(struct session_manager *mgr, struct profile_slot *slot, const char *id,
                     struct sandbox **ret_sb, struct airlock_error *err);
/* A copy of the VM saved in state_fd (borrowed) for the profile, QEMU started: the caller
 * finishes it with sandbox_vm_ready(). Returns 0 or -errno with err set. */
int session_vm_spawn(struct session_manager *mgr, struct profile_slot *slot, const char *id,
                     int state_fd, struct sandbox **ret_sb, struct airlock_error *err);

/* session.c */
void session_make_id(char id[SESSION_ID_MAX + 1]);
void session_format_time(time_t t, char buf[32]);
struct session *session_ref(struct session *s);
struct session *session_new_object(struct session_manager *mgr, const char *id,
                                   const struct profile *p);
int session_table_add(struct session_manager *mgr, struct session *s);     /* lock held */
void session_table_remove(struct session_manager *mgr, struct session *s); /* lock held */
/* The session of the table with that id, or NULL (borrowed). Lock held. */
struct session *session_table_find(struct session_manager *mgr, const char *id);
void session_bury(struct session_manager *mgr, struct sandbox *sb);
/* Whether the daemon can open the fds of n more sandboxes and still keep SESSION_FD_RESERVE
 * free (reaping the sandboxes of ended sessions first if not). Called without the manager's
 * lock. Returns 0, or -EMFILE with err (may be NULL) saying which limit and what to do. */
int session_fd_room(struct session_manager *mgr, unsigned n, struct airlock_error *err);
void session_remember_ended(struct session_manager *mgr, const char *id, const char *tenant,
                            bool lost, const char *reason);
/* Whether the calling thread's tenant may see a store row (its info's "tenant"). */
bool session_row_visible(json_t *row);
/* Whether the tenant of the calling thread may have n more live sessions of profile p: 0, or
 * -EXFULL with err naming the quota (tenant_quota_check()). The manager's lock held. */
/* Places a fork holds for its children until they join the table (n counts down). */
struct quota_hold {
        struct quota_hold *next;
        const char *tenant; /* borrowed: the parent's */
        const struct profile *profile;
        unsigned n;
};

/* Checks the calling thread's tenant's quotas for n more sessions of profile p and, when they
 * allow them, holds the places in h (the caller's, kept until session_quota_release_locked()),
 * in one step under the manager's lock. Returns 0 or -EXFULL as below. */
int session_quota_hold_locked(struct session_manager *mgr, const struct profile *p, unsigned n,
                              const char *tenant, struct quota_hold *h, struct airlock_error *err);
void session_quota_release_locked(struct session_manager *mgr, struct quota_hold *h);

int session_quota_check_locked(struct session_manager *mgr, const struct profile *p, unsigned n,
                               struct airlock_error *err);
/* The facts the store keeps of a session, as JSON text (caller frees). s->lock held. */
char *session_info_json(const struct session *s);

/* Writes the session's facts to its store row as they are now. The row is computed and written
 * under the manager's lock, as PATCH and stop write theirs, so that of two writers the later
 * one always writes the newer facts. Takes the manager's lock and s->lock: call with neither. */
void session_store_info(struct session *s);
/* Sets o's "node": this daemon's node name, null without one (node-id.h). */
void session_describe_node(json_t *o);
/* Sets "metadata", "timeout_s" and "stops_at" of a session description o. */
void session_describe_patchable(json_t *o, const json_t *metadata, uint64_t timeout_ms,
                                time_t stops_at);
/* Applies a session's env and home (both may be NULL) to sb, before its code runs. */
int session_apply_env(struct sandbox *sb, char *const *env, const char *home,
                      struct airlock_error *err);

/* lifecycle.c */
/* Stops s (a reference the caller holds). shutdown: the daemon is going away. */
int lifecycle_stop(struct session *s, bool shutdown, struct airlock_error *err);
/* Resumes the stopped session id into a new object (see session_lookup). */
int lifecycle_resume(struct session_manager *mgr, const char *id, struct session **ret_s,
                     struct airlock_error *err);
/* Saves s's state in the background when it has been quiet long enough. */
void lifecycle_checkpoint(struct session *s);
/* Copies s's /work to disk after a change. The caller keeps s from stopping meanwhile (holds
 * it busy, or holds its lock). */
void lifecycle_save_files(struct session *s);
/* Deletes stopped sessions whose time has come. */
void lifecycle_delete_due(struct session_manager *mgr);
/* Removes everything saved of a session, if the manager has a state directory. */
void lifecycle_remove_saved(struct session_manager *mgr, const char *id);
/* The description of a stopped session from its store row. */
json_t *lifecycle_describe_row(struct session_manager *mgr, json_t *row);

/* The network (network.c). A profile whose network mode is "allow" needs the namespaces
 * mode and the daemon's egress proxy: -EINVAL saying so otherwise. */
int session_network_check_mode(const struct session_manager *mgr, const struct profile *p,
                               struct airlock_error *err);
/* Puts the egress proxy into a new sandbox of profile p (nothing for a profile without
 * network). Returns 0 or -errno with err set. */
int session_network_open(struct session_manager *mgr, const struct profile *p, struct sandbox *sb,
                         const char *id, struct airlock_error *err);
/* sb becomes s's: its proxy takes s's id, tenant and policy. Called before anything of the
 * session runs in sb: a restore (resume, fork) unpickles the session's values, which can run
 * code, and that code must meet the session's policy, not the wider one of the profile the
 * sandbox was opened with. */
void session_network_bind(struct session *s, struct sandbox *sb);
/* The same for a session whose object does not exist yet (a fork's child): network NULL is
 * the profile's policy. */
void session_network_bind_as(struct sandbox *sb, const char *id, const char *tenant,
                             const struct profile *p, const struct egress_policy *network);
/* The policy a create asks for (request: its "network" value, NULL = the profile's): a new
 * narrowed policy in *ret, or NULL for the profile's. Returns 0, -EPERM (a widening) or
 * -EINVAL with err set. */
int session_network_narrow(const struct session_manager *mgr, const struct profile *p,
                           const json_t *request, struct egress_policy **ret,
                           struct airlock_error *err);
/* The session's policy for its description and saved row; NULL without network. */
json_t *session_network_json(const struct session *s);
/* The policy of no network at all (static), for a session whose own was lost. */
const struct egress_policy *session_network_none(void);
/* Sets s->network from a saved row's "network" (narrowed again against the profile). */
void session_network_restore(struct session *s, const json_t *saved);

/* Code Mode (codemode.c). Fills *ret with the session's tool callbacks (userdata = s) and
 * returns true, or false when its code may call nothing (no hub, or no code_tools). */
struct exec_tools;
bool codemode_tools(struct session *s, struct exec_tools *ret);

/* The tools s's code may call now, as Code Mode lists them ({"name", "python_name", "server",
 * "description", "inputSchema", "available"}); a new array, NULL when out of memory. */
json_t *codemode_callable(struct session *s);
