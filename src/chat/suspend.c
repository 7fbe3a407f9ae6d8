/* The suspended-turn store of suspend.h: a list in the order the turns were stored, so that
 * the oldest is at the head for eviction and expiry. Lookups walk it: with at most a few
 * thousand ids that costs microseconds, far below the upstream round trip each lookup saves,
 * and keeps the store simple to review. */
#include "suspend.h"

#include "base/cleanup.h"
#include "base/node-id.h"
#include "base/util.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct turn {
        struct turn *prev, *next;
        char **ids; /* n_ids copied strings */
        size_t n_ids;
        json_t *payload;
        uint64_t bytes;
        uint64_t stored_ns;
        char owner[TENANT_NAME_MAX + 1]; /* the tenant whose request suspended it */
};

struct suspend_store {
        pthread_mutex_t lock;
        struct turn *head, *tail; /* oldest first */
        size_t count;
        uint64_t bytes;
        struct suspend_limits lim;
};

static void turn_free(struct turn *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n_ids; i++)
                free(t->ids[i]);
        free(t->ids);
        json_decref(t->payload);
        free(t);
}

int suspend_store_new(const struct suspend_limits *lim, struct suspend_store **ret_store)
{
        struct suspend_store *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        if (lim)
                s->lim = *lim;
        if (!s->lim.max_turns)
                s->lim.max_turns = SUSPEND_MAX_TURNS_DEFAULT;
        if (!s->lim.ttl_ms)
                s->lim.ttl_ms = SUSPEND_TTL_MS_DEFAULT;
        if (!s->lim.bytes_max)
                s->lim.bytes_max = SUSPEND_BYTES_MAX_DEFAULT;
        pthread_mutex_init(&s->lock, NULL);
        *ret_store = s;
        return 0;
}

static void unlink_turn(struct suspend_store *s, struct turn *t)
{
        if (t->prev)
                t->prev->next = t->next;
        else
                s->head = t->next;
        if (t->next)
                t->next->prev = t->prev;
        else
                s->tail = t->prev;
        s->count--;
        s->bytes -= t->bytes;
}

struct suspend_store *suspend_store_free(struct suspend_store *s)
{
        if (!s)
                return NULL;
        while (s->head) {
                struct turn *t = s->head;

                unlink_turn(s, t);
                turn_free(t);
        }
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

/* Drops the turns older than the TTL; they sit at the head. Called with the lock held. */
static void expire(struct suspend_store *s, uint64_t now)
{
        uint64_t ttl_ns = s->lim.ttl_ms * 1000000ull;

        while (s->head && now - s->head->stored_ns >= ttl_ns) {
                struct turn *t = s->head;

                unlink_turn(s, t);
                turn_free(t);
        }
}

/* The live turn holding id that the calling thread's tenant suspended, or NULL: another
 * tenant's turn is not there for it (docs/TENANTS.md). Called with the lock held. */
static struct turn *find_own(struct suspend_store *s, const char *id)
{
        for (struct turn *t = s->head; t; t = t->next)
                for (size_t i = 0; i < t->n_ids; i++)
                        if (strcmp(t->ids[i], id) == 0)
                                return tenant_scope_sees(t->owner) ? t : NULL;
        return NULL;
}

/* The live turn holding id, or NULL. Called with the lock held. */
static struct turn *find(struct suspend_store *s, const char *id)
{
        for (struct turn *t = s->head; t; t = t->next)
                for (size_t i = 0; i < t->n_ids; i++)
                        if (strcmp(t->ids[i], id) == 0)
                                return t;
        return NULL;
}

int suspend_store_put(struct suspend_store *s, json_t *ids, json_t *payload)
{
        struct turn *t;
        json_t *v;
        size_t i, n = json_array_size(ids);
        size_t bytes = json_dumpb(payload, NULL, 0, JSON_COMPACT);
        int r = 0;

        if (n == 0 || n > SUSPEND_IDS_MAX)
                return -EINVAL;
        json_array_foreach (ids, i, v) {
                const char *id = json_string_value(v);

                if (!id || !*id || strlen(id) >= SUSPEND_ID_MAX)
                        return -EINVAL;
        }
        if (bytes == 0 || bytes > s->lim.bytes_max)
                return -E2BIG;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->ids = calloc(n, sizeof(*t->ids));
        if (!t->ids) {
                free(t);
                return -ENOMEM;
        }
        json_array_foreach (ids, i, v) {
                t->ids[i] = strdup(json_string_value(v));
                if (!t->ids[i]) {
                        turn_free(t);
                        return -ENOMEM;
                }
                t->n_ids = i + 1;
        }
        t->payload = json_incref(payload);
        t->bytes = bytes;
        (void) snprintf(t->owner, sizeof(t->owner), "%s", tenant_scope_owner());
        t->stored_ns = now_ns();

        pthread_mutex_lock(&s->lock);
        expire(s, t->stored_ns);
        for (i = 0; i < n && r == 0; i++) {
                if (find(s, t->ids[i]))
                        r = -EEXIST;
                for (size_t j = 0; j < i && r == 0; j++)
                        if (strcmp(t->ids[i], t->ids[j]) == 0)
                                r = -EEXIST;
        }
        if (r == 0) {
                while (s->head &&
                       (s->count >= s->lim.max_turns || s->bytes + t->bytes > s->lim.bytes_max)) {
                        struct turn *old = s->head;

                        unlink_turn(s, old);
                        turn_free(old);
                }
                t->prev = s->tail;
                if (s->tail)
                        s->tail->next = t;
                else
                        s->head = t;
                s->tail = t;
                s->count++;
                s->bytes += t->bytes;
        }
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                turn_free(t);
        return r;
}

json_t *suspend_store_get(struct suspend_store *s, const char *id)
{
        struct turn *t;
        json_t *out = NULL;

        if (!id)
                return NULL;
        pthread_mutex_lock(&s->lock);
        expire(s, now_ns());
        t = find_own(s, id);
        if (t)
                out = json_incref(t->payload);
        pthread_mutex_unlock(&s->lock);
        return out;
}

int suspend_store_take(struct suspend_store *s, const char *id, json_t *expected,
                       json_t **ret_payload)
{
        struct turn *t;

        if (!id)
                return -ENOENT;
        pthread_mutex_lock(&s->lock);
        expire(s, now_ns());
        t = find_own(s, id);
        if (t && (!expected || t->payload == expected))
                unlink_turn(s, t);
        else
                t = NULL;
        pthread_mutex_unlock(&s->lock);
        if (!t)
                return -ENOENT;
        if (ret_payload)
                *ret_payload = json_incref(t->payload);
        turn_free(t);
        return 0;
}

size_t suspend_store_count(struct suspend_store *s)
{
        size_t n;

        pthread_mutex_lock(&s->lock);
        expire(s, now_ns());
        n = s->count;
        pthread_mutex_unlock(&s->lock);
        return n;
}

int suspend_make_id(const char *prefix, char *buf, size_t size)
{
        size_t plen = strlen(prefix);

        int r;

        if (size < plen + 2 * 12 + 1)
                return -ENOBUFS;
        memcpy(buf, prefix, plen);
        r = random_hex(buf + plen, 12);
        if (r < 0)
                return r;
        return node_id_append(buf, size);
}
