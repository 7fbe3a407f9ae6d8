/* JSON-RPC plumbing shared by the transports (hub-internal.h): requests waiting for their
 * answers, and the few requests a server may send us. */
#include "hub-internal.h"

#include "base/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often a wait looks at its cancel flag. */
#define CANCEL_POLL_NS (100u * 1000000u)

struct rpc_waiter {
        struct rpc_waiter *next;
        int64_t id;
        json_t *msg; /* the answer, once it came */
};

void rpc_table_init(struct rpc_table *t)
{
        pthread_condattr_t attr;

        memset(t, 0, sizeof(*t));
        (void) pthread_mutex_init(&t->lock, NULL);
        (void) pthread_condattr_init(&attr);
        (void) pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        (void) pthread_cond_init(&t->cond, &attr);
        (void) pthread_condattr_destroy(&attr);
        t->next_id = 1;
}

void rpc_table_done(struct rpc_table *t)
{
        while (t->head) {
                struct rpc_waiter *w = t->head;
                t->head = w->next;
                json_decref(w->msg);
                free(w);
        }
        free(t->closed);
        (void) pthread_cond_destroy(&t->cond);
        (void) pthread_mutex_destroy(&t->lock);
}

int64_t rpc_table_add(struct rpc_table *t)
{
        struct rpc_waiter *w = calloc(1, sizeof(*w));
        int64_t id;

        if (!w)
                return -ENOMEM;
        (void) pthread_mutex_lock(&t->lock);
        id = w->id = t->next_id++;
        w->next = t->head;
        t->head = w;
        (void) pthread_mutex_unlock(&t->lock);
        return id;
}

bool rpc_table_answer(struct rpc_table *t, json_t *msg)
{
        json_t *idv = json_object_get(msg, "id");
        bool taken = false;

        if (json_is_integer(idv)) {
                (void) pthread_mutex_lock(&t->lock);
                for (struct rpc_waiter *w = t->head; w; w = w->next)
                        if (w->id == json_integer_value(idv) && !w->msg) {
                                w->msg = msg;
                                taken = true;
                                break;
                        }
                if (taken)
                        (void) pthread_cond_broadcast(&t->cond);
                (void) pthread_mutex_unlock(&t->lock);
        }
        if (!taken)
                json_decref(msg);
        return taken;
}

static struct rpc_waiter *unlink_waiter(struct rpc_table *t, int64_t id)
{
        for (struct rpc_waiter **p = &t->head; *p; p = &(*p)->next)
                if ((*p)->id == id) {
                        struct rpc_waiter *w = *p;
                        *p = w->next;
                        return w;
                }
        return NULL;
}

int rpc_table_wait(struct rpc_table *t, int64_t id, uint64_t deadline_ns, const atomic_bool *cancel,
                   json_t **ret_msg, struct airlock_error *err)
{
        struct rpc_waiter *w = NULL;
        int r = 0;

        (void) pthread_mutex_lock(&t->lock);
        for (;;) {
                uint64_t now = now_ns(), until;
                struct timespec ts;

                for (w = t->head; w && w->id != id; w = w->next)
                        ;
                if (!w) {
                        r = airlock_error_set(err, -EHOSTDOWN, "internal error: lost request %lld",
                                              (long long) id);
                        break;
                }
                if (w->msg)
                        break;
                if (t->closed) {
                        r = airlock_error_set(err, -EHOSTDOWN, "%s", t->closed);
                        break;
                }
                if (cancel && atomic_load(cancel)) {
                        r = airlock_error_set(err, -ECANCELED, "the call was cancelled");
                        break;
                }
                if (deadline_ns && now >= deadline_ns) {
                        r = -ETIMEDOUT; /* the caller words it: it knows the timeout */
                        break;
                }
                until = now + CANCEL_POLL_NS;
                if (deadline_ns && deadline_ns < until)
                        until = deadline_ns;
                ts.tv_sec = (time_t) (until / 1000000000u);
                ts.tv_nsec = (long) (until % 1000000000u);
                (void) pthread_cond_timedwait(&t->cond, &t->lock, &ts);
        }
        w = unlink_waiter(t, id);
        (void) pthread_mutex_unlock(&t->lock);
        if (w && r == 0)
                *ret_msg = w->msg;
        else if (w)
                json_decref(w->msg);
        free(w);
        return r;
}

void rpc_table_close(struct rpc_table *t, const char *why)
{
        (void) pthread_mutex_lock(&t->lock);
        if (!t->closed)
                t->closed = strdup(why);
        (void) pthread_cond_broadcast(&t->cond);
        (void) pthread_mutex_unlock(&t->lock);
}

int rpc_response_result(json_t *msg, json_t **ret_result, struct airlock_error *err)
{
        json_t *error = json_object_get(msg, "error"), *result = json_object_get(msg, "result");

        if (error) {
                const char *m = json_string_value(json_object_get(error, "message"));
                json_t *code = json_object_get(error, "code");
                return airlock_error_set(
                        err, -EPROTO, "%s (JSON-RPC error %lld)",
                        m ? m : "the server answered an error without a message",
                        json_is_integer(code) ? (long long) json_integer_value(code) : 0LL);
        }
        if (!json_is_object(result))
                return airlock_error_set(err, -EPROTO,
                                         "the server answered without a result object");
        *ret_result = json_incref(result);
        return 0;
}

json_t *rpc_answer_server_request(json_t *msg)
{
        const char *method = json_string_value(json_object_get(msg, "method"));
        json_t *id = json_object_get(msg, "id");

        if (!method || !id)
                return NULL;
        if (strcmp(method, "ping") == 0)
                return json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id", id, "result");
        /* roots, sampling and elicitation are capabilities airlock does not declare. */
        return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                         -32601, "message", "airlock does not offer this method to MCP servers");
}
