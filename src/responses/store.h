/* The Responses API's store: every response made with "store": true (the default), with the
 * input items of its request and what continuing it needs (the Chat Completions history the
 * model saw, the conversation's container, the client calls it waits for), in one SQLite
 * database in the state directory, so that previous_response_id works across a restart. A
 * response is kept RESPONSES_KEEP_DAYS days (OpenAI keeps them 30), then pruned, or until
 * DELETE /v1/responses/{id}. Thread-safe.
 *
 * Each response belongs to the tenant of the thread that stored it (tenant_scope_owner()), and
 * get and delete find only the calling thread's tenant's (tenant_scope_filter()): another
 * tenant's id is -ENOENT like an unknown one, in a chain of previous_response_id too. */
#pragma once

#include "base/error.h"

#include <jansson.h>

#define RESPONSES_STORE_FILE "responses.db"
#define RESPONSES_KEEP_DAYS 30
/* The most one stored response may take (its object, input items and history as JSON text):
 * a conversation continued past this cannot be stored. */
#define RESPONSES_STORE_ROW_MAX (48u * 1024u * 1024u)

struct responses_store;

/* Opens (or creates) <state_dir>/responses.db (mode 0600), or an in-memory store when
 * state_dir is NULL, and prunes what is older than RESPONSES_KEEP_DAYS. Returns 0 or -errno
 * with err set. Free with responses_store_free(). */
int responses_store_open(const char *state_dir, struct responses_store **ret_store,
                         struct airlock_error *err);

/* Closes the store. Accepts NULL, returns NULL. */
struct responses_store *responses_store_free(struct responses_store *st);

/* Keeps one response (all borrowed): response is the Response object (outputs included),
 * input_items the request's input items (with ids), state what continuing needs ({messages,
 * container, pending, ...}, opaque here). Replaces a row of the same id. Returns 0, -E2BIG
 * when the row would pass RESPONSES_STORE_ROW_MAX, -ENOMEM or -EIO. */
int responses_store_put(struct responses_store *st, const char *id, long long created_at,
                        json_t *response, json_t *input_items, json_t *state);

/* Reads one response; each ret_ pointer may be NULL when the caller does not need that part,
 * else it gets a new reference. Returns 0, -ENOENT when there is no such response (never
 * stored, deleted, pruned), -ENOMEM or -EIO. */
int responses_store_get(struct responses_store *st, const char *id, json_t **ret_response,
                        json_t **ret_input_items, json_t **ret_state);

/* Forgets one response. Returns 0, -ENOENT or -EIO. */
int responses_store_delete(struct responses_store *st, const char *id);

/* Forgets every response created before older_than (seconds since the epoch). Returns the
 * number removed, or -EIO. */
int responses_store_prune(struct responses_store *st, long long older_than);
