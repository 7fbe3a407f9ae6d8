/* What a session's connections moved, per destination: the tables behind
 * egress_session_take_usage() and egress_session_totals(). A table is bounded (a session that
 * asks for a million names gets its totals counted, not a million entries) and kept sorted, which
 * is also the order the usage shows. */
#include "egress-internal.h"

#include "base/cleanup.h"

#include <stdlib.h>
#include <string.h>

/* Entries per table; past it new destinations count only in the totals and in untracked. */
#define USAGE_DESTS_MAX 1024u
/* Destinations a usage object lists; the rest are "destinations_omitted". */
#define USAGE_DESTS_SHOWN 64u

static int dest_cmp(const char *host, uint16_t port, const struct egress_dest *d)
{
        int c = strcmp(host, d->host);

        if (c != 0)
                return c;
        return (int) port - (int) d->port;
}

/* The index of host:port, or where it would go (*found false). */
static size_t dest_find(const struct egress_usage *u, const char *host, uint16_t port, bool *found)
{
        size_t lo = 0, hi = u->n_dests;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = dest_cmp(host, port, &u->dests[mid]);

                if (c == 0) {
                        *found = true;
                        return mid;
                }
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        *found = false;
        return lo;
}

static struct egress_dest *dest_get(struct egress_usage *u, const char *host, uint16_t port)
{
        _cleanup_free_ char *copy = NULL;
        bool found;
        size_t i = dest_find(u, host, port, &found);

        if (found)
                return &u->dests[i];
        if (u->n_dests >= USAGE_DESTS_MAX)
                return NULL;
        if (u->n_dests == u->size) {
                size_t size = u->size ? 2 * u->size : 8;
                struct egress_dest *d = reallocarray(u->dests, size, sizeof(*d));

                if (!d)
                        return NULL;
                u->dests = d;
                u->size = size;
        }
        copy = strdup(host);
        if (!copy)
                return NULL;
        memmove(&u->dests[i + 1], &u->dests[i], (u->n_dests - i) * sizeof(u->dests[0]));
        u->dests[i] = (struct egress_dest){ .host = TAKE_PTR(copy), .port = port };
        u->n_dests++;
        return &u->dests[i];
}

void egress_usage_add(struct egress_usage *u, const char *host, uint16_t port, uint64_t connections,
                      uint64_t refused, uint64_t bytes_in, uint64_t bytes_out)
{
        struct egress_dest *d;

        u->connections += connections;
        u->refused += refused;
        u->bytes_in += bytes_in;
        u->bytes_out += bytes_out;
        if (!host || !host[0])
                return;
        d = dest_get(u, host, port);
        if (!d) {
                bool found;

                (void) dest_find(u, host, port, &found);
                if (!found)
                        u->untracked++;
                return;
        }
        d->connections += connections;
        d->refused += refused;
        d->bytes_in += bytes_in;
        d->bytes_out += bytes_out;
}

json_t *egress_usage_to_json(const struct egress_usage *u)
{
        json_t *o = NULL, *list = NULL;
        size_t shown = u->n_dests < USAGE_DESTS_SHOWN ? u->n_dests : USAGE_DESTS_SHOWN;
        uint64_t omitted = (u->n_dests - shown) + u->untracked;

        list = json_array();
        if (!list)
                return NULL;
        for (size_t i = 0; i < shown; i++) {
                const struct egress_dest *d = &u->dests[i];

                if (json_array_append_new(list,
                                          json_pack("{s:s, s:i, s:I, s:I, s:I, s:I}", "host",
                                                    d->host, "port", (int) d->port, "connections",
                                                    (json_int_t) d->connections, "refused",
                                                    (json_int_t) d->refused, "bytes_in",
                                                    (json_int_t) d->bytes_in, "bytes_out",
                                                    (json_int_t) d->bytes_out)) < 0) {
                        json_decref(list);
                        return NULL;
                }
        }
        /* "o" hands list over to the new object, or frees it when the object cannot be made. */
        o = json_pack("{s:I, s:I, s:I, s:I, s:o}", "connections", (json_int_t) u->connections,
                      "refused", (json_int_t) u->refused, "bytes_in", (json_int_t) u->bytes_in,
                      "bytes_out", (json_int_t) u->bytes_out, "destinations", list);
        if (o && omitted > 0 &&
            json_object_set_new(o, "destinations_omitted", json_integer((json_int_t) omitted)) < 0)
                o = (json_decref(o), NULL);
        return o;
}

void egress_usage_reset(struct egress_usage *u)
{
        for (size_t i = 0; i < u->n_dests; i++)
                free(u->dests[i].host);
        free(u->dests);
        *u = (struct egress_usage){ 0 };
}
