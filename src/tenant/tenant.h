/* Tenants: who a request comes from, and what it may use (docs/TENANTS.md). A tenant is a name,
 * an API key (stored only as its SHA-256) and quotas: live sessions, the memory and CPUs of its
 * live sessions, and the profiles it may start. They live in <state>/tenants/tenants.db
 * (SQLite, WAL), written by `airlock tenants` and read by the daemon, which notices a change
 * through inotify on that directory before it resolves the next tenant key.
 *
 * Without tenants, the daemon's token is the one implicit tenant "default", with no quotas; it
 * stays "default" (and sees only the sessions of "default") once tenants exist.
 *
 * The request's tenant travels with the worker thread that runs its handler (tenant_scope_*),
 * so that the session manager checks ownership and quotas in one place whatever route, MCP
 * tool or compatibility layer reached it. Threads outside a request (the reaper, shutdown)
 * have no scope and see every session. */
#pragma once

#include "base/error.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TENANT_NAME_MAX 63
#define TENANT_DEFAULT "default"
#define TENANT_DIR "tenants" /* under the state directory, mode 0700 */
#define TENANT_DB_FILE "tenants.db"
#define TENANT_KEY_PREFIX "alk_"
#define TENANT_KEY_BYTES 32 /* random bytes, written as 64 hex characters after the prefix */
#define TENANT_KEY_LEN (sizeof(TENANT_KEY_PREFIX) - 1 + 2 * TENANT_KEY_BYTES)
#define TENANT_HASH_LEN 32 /* SHA-256 */
#define TENANT_PROFILES_MAX 64

/* One tenant as the daemon resolved it: immutable once made, shared by reference. */
struct tenant {
        atomic_int refs;
        char name[TENANT_NAME_MAX + 1];
        unsigned max_sessions;  /* live sessions (idle or busy); 0 = no quota */
        uint64_t max_memory;    /* bytes, the sum of its live sessions' memory limits; 0 = none */
        uint32_t max_millicpus; /* the sum of its live sessions' CPUs, in 1/1000; 0 = none */
        char **profiles;        /* NULL-terminated; NULL = every profile */
        unsigned char key_hash[TENANT_HASH_LEN];
};

struct tenant *tenant_ref(struct tenant *t);
/* Releases a reference. Accepts NULL, returns NULL. */
struct tenant *tenant_unref(struct tenant *t);

/* The implicit tenant of the daemon's token: "default", no quotas. Static, never freed. */
struct tenant *tenant_default(void);

/* Whether name may name a tenant: 1..TENANT_NAME_MAX characters of [a-z0-9_.-], starting
 * with a letter or digit, and not "default". Returns 0 or -EINVAL with err saying why. */
int tenant_name_check(const char *name, struct airlock_error *err);

/* A new key "alk_<64 hex>" from getrandom() and its hash. Returns 0 or -errno. */
int tenant_key_new(char ret_key[TENANT_KEY_LEN + 1], unsigned char ret_hash[TENANT_HASH_LEN]);

/* Whether key (len bytes, not NUL-terminated) has the shape of a tenant key. */
bool tenant_key_is_wellformed(const char *key, size_t len);

/* SHA-256 of the len bytes of key. */
void tenant_key_hash(const char *key, size_t len, unsigned char ret_hash[TENANT_HASH_LEN]);

/* Parses "--profiles a,b": comma-separated profile names (letters, digits, '_', '-', '.'),
 * no empty ones, at most TENANT_PROFILES_MAX. Returns 0 with a NULL-terminated array (caller
 * frees with strv_free()), or -EINVAL with err naming the bad entry. */
int tenant_profiles_parse(const char *s, char ***ret_profiles, struct airlock_error *err);

/* Parses "--max-cpu CORES": a positive decimal number of cores (0.01 .. 1024), or "0" for no
 * quota. Returns 0 with millicpus, or -EINVAL. */
int tenant_cpu_parse(const char *s, uint32_t *ret_millicpus);

/* --- the store, as `airlock tenants` uses it --- */

struct tenant_db;

/* Opens <state_dir>/tenants/tenants.db, creating the directory (0700) and the database (0600,
 * WAL) when create is true; -ENOENT when it does not exist and create is false. Returns 0 or
 * -errno with err set. */
int tenant_db_open(const char *state_dir, bool create, struct tenant_db **ret_db,
                   struct airlock_error *err);
struct tenant_db *tenant_db_close(struct tenant_db *db);

/* What `tenants add` and `tenants set` give; for set, a has_* false leaves the field alone. */
struct tenant_spec {
        bool has_max_sessions, has_max_memory, has_max_cpu, has_profiles;
        unsigned max_sessions;
        uint64_t max_memory;
        uint32_t max_millicpus;
        char **profiles; /* borrowed; NULL or empty = every profile */
};

/* Adds a tenant with a new key, written to ret_key (shown once, never stored). -EEXIST when
 * the name is taken, -EINVAL for a bad name. */
int tenant_db_add(struct tenant_db *db, const char *name, const struct tenant_spec *spec,
                  char ret_key[TENANT_KEY_LEN + 1], struct airlock_error *err);
/* Changes the quotas of a tenant; -ENOENT when there is none by that name. */
int tenant_db_set(struct tenant_db *db, const char *name, const struct tenant_spec *spec,
                  struct airlock_error *err);
/* Revokes the key (the tenant stays, with no working key, until rotate); -ENOENT. */
int tenant_db_revoke(struct tenant_db *db, const char *name, struct airlock_error *err);
/* A new key for the tenant (revoked or not); the old one stops working. -ENOENT. */
int tenant_db_rotate(struct tenant_db *db, const char *name, char ret_key[TENANT_KEY_LEN + 1],
                     struct airlock_error *err);
/* The tenants as [{name, max_sessions, max_memory_bytes, max_cpu, profiles, revoked,
 * created_at, key_changed_at}] (no key, no hash), in name order; with name, that one only
 * (-ENOENT). New reference in *ret. */
int tenant_db_list(struct tenant_db *db, const char *name, json_t **ret, struct airlock_error *err);

/* --- the daemon's view --- */

struct tenant_registry;

/* Watches <state_dir>/tenants (made 0700 when missing) and loads the tenants. Returns 0 or
 * -errno with err set. */
int tenant_registry_new(const char *state_dir, struct tenant_registry **ret_reg,
                        struct airlock_error *err);
struct tenant_registry *tenant_registry_free(struct tenant_registry *reg);

/* The tenant whose key is key (len bytes), after picking up any change to the store (one
 * non-blocking read of the inotify fd when nothing changed). Returns 0 with a new reference,
 * or -ENOENT for no such key (unknown or revoked). Thread-safe. */
int tenant_registry_resolve(struct tenant_registry *reg, const char *key, size_t len,
                            struct tenant **ret_tenant);

/* --- the request's scope --- */

/* What a quota refusal was: for the 429 body's "quota" and "limit". */
struct tenant_refusal {
        const char *quota; /* static: "max_sessions", "max_memory", "max_cpu"; NULL = none */
        char limit[32];    /* the limit as JSON text: 4, 1073741824, 2.5 */
};

/* Sets the calling thread's tenant (borrowed: the caller keeps it alive until it sets NULL).
 * NULL = no tenant: internal work that sees every session. */
void tenant_scope_set(const struct tenant *t);
const struct tenant *tenant_scope(void);
/* The owner of what the calling thread makes (a file, a stored response, an MCP session): its
 * tenant's name, or "default" without a scope. Static or the scope's tenant's (borrowed). */
const char *tenant_scope_owner(void);
/* The owner lookups on the calling thread are limited to: its tenant's name, or NULL without
 * a scope (internal work that sees everything). Borrowed. */
const char *tenant_scope_filter(void);
/* Gives table an owner column if it has none (a database made before tenants): its rows were
 * the one tenant's, "default", which the column's default gives each of them. An SQLite
 * result code; *ret_msg as sqlite3_exec() sets it. */
struct sqlite3;
int tenant_owner_column_add(struct sqlite3 *db, const char *table, char **ret_msg);
/* Whether the calling thread may see a session owned by owner (NULL or "" = "default"). */
bool tenant_scope_sees(const char *owner);
/* The last quota refusal on this thread since tenant_scope_set(), or NULL. */
const struct tenant_refusal *tenant_scope_refusal(void);

/* What a tenant has live, and what a new session would add. */
struct tenant_usage {
        unsigned sessions;
        uint64_t memory;
        uint64_t millicpus;
};

/* Whether t may have use + add live. Returns 0, or -EXFULL with err ("tenant 'a' has reached
 * its quota of 4 live sessions (max_sessions)") and the thread's refusal recorded. */
int tenant_quota_check(const struct tenant *t, const struct tenant_usage *use,
                       const struct tenant_usage *add, struct airlock_error *err);

/* Whether t may start profile. Returns 0, or -EACCES with err naming the allowed ones. */
int tenant_profile_check(const struct tenant *t, const char *profile, struct airlock_error *err);
