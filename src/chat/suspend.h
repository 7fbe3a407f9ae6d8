/* The gateway's suspended turns: a model turn that the gateway could not finish in one request
 * (it called the client's own function tools, or a tool that needs a person's approval) is kept
 * here, under the ids the gateway handed to the client, until the client's next request
 * continues it. The store knows nothing of chat messages: a turn is a JSON payload (immutable
 * once stored) reachable by each of its ids.
 *
 * Bounds: at most max_turns turns (the oldest is evicted to make room), at most bytes_max bytes
 * of payload (measured as compact JSON; the oldest are evicted first), and a turn older than
 * ttl_ms is gone. Memory only: a daemon restart forgets every turn. Thread-safe: one store
 * serves all the gateway's requests at once.
 *
 * A turn belongs to the tenant of the thread that stored it (tenant_scope_owner()); get and take
 * find only the calling thread's tenant's turns, so another tenant's ids are unknown ids. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define SUSPEND_MAX_TURNS_DEFAULT 1024
#define SUSPEND_TTL_MS_DEFAULT (3600ull * 1000)
#define SUSPEND_BYTES_MAX_DEFAULT (64ull * 1024 * 1024)
/* Longest id the store accepts ("call_" or "mcpr_" and 24 hex digits fit with room). */
#define SUSPEND_ID_MAX 64
/* Most ids one turn may be reached by. */
#define SUSPEND_IDS_MAX 128

struct suspend_store;

struct suspend_limits {
        size_t max_turns;   /* 0 = SUSPEND_MAX_TURNS_DEFAULT */
        uint64_t ttl_ms;    /* 0 = SUSPEND_TTL_MS_DEFAULT */
        uint64_t bytes_max; /* 0 = SUSPEND_BYTES_MAX_DEFAULT */
};

/* Creates an empty store (lim NULL = the defaults). Returns 0 or -ENOMEM. Free with
 * suspend_store_free(). */
int suspend_store_new(const struct suspend_limits *lim, struct suspend_store **ret_store);

/* Drops every turn and frees the store. Accepts NULL, returns NULL. */
struct suspend_store *suspend_store_free(struct suspend_store *s);

/* Keeps payload (takes a reference of its own; the caller must not change it afterwards)
 * under each id of ids (a non-empty array of strings, copied). Evicts the oldest turns to stay
 * within the limits. Returns 0, -EINVAL for an empty, too long (SUSPEND_ID_MAX) or too many
 * (SUSPEND_IDS_MAX) ids, -EEXIST when an id is already held, -E2BIG when payload alone is larger
 * than bytes_max, or -ENOMEM. */
int suspend_store_put(struct suspend_store *s, json_t *ids, json_t *payload);

/* The payload of the live turn reachable by id (a new reference), without taking it; NULL when
 * no live turn has that id (never stored, expired, evicted or taken). */
json_t *suspend_store_get(struct suspend_store *s, const char *id);

/* Takes the turn reachable by id out of the store, so that it is used once: every one of its
 * ids is forgotten. When expected is not NULL the turn's payload must be that very object (the
 * one suspend_store_get() returned), so that a caller that looked first takes what it looked
 * at. Returns 0 with *ret_payload (a new reference, may be NULL to just drop it), or -ENOENT
 * when there is no such live turn (or it is not expected's). */
int suspend_store_take(struct suspend_store *s, const char *id, json_t *expected,
                       json_t **ret_payload);

/* The number of live turns (for tests and the log). */
size_t suspend_store_count(struct suspend_store *s);

/* Writes prefix followed by 24 random hex digits (12 bytes of getrandom()) to buf, e.g.
 * "call_0123456789abcdef01234567", and "-NODE" with a node (node-id.h). size must hold
 * strlen(prefix) + 25 bytes, and NODE_SUFFIX_MAX more with a node (SUSPEND_ID_MAX does). Returns 0,
 * -ENOBUFS, or -errno of getrandom() (no weak fallback: an id is a capability). */
int suspend_make_id(const char *prefix, char *buf, size_t size);
