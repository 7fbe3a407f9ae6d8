/* Worker threads for request handlers (dispatch.h). One lock guards the queue and the counts;
 * a worker that finds nothing to do waits IDLE_EXIT_S and then ends, except the first, so a
 * job always has a thread to run it even when no new thread can be made. */
#include "dispatch.h"

#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IDLE_EXIT_S 30

struct dispatch {
        pthread_mutex_t lock;
        pthread_cond_t work; /* a job was queued, or the pool is ending */
        pthread_cond_t gone; /* a worker ended */
        struct dispatch_job *head, *tail;
        unsigned max_threads;
        unsigned n_threads;
        size_t n_jobs; /* queued + running */
        bool ending;
};

static void *worker(void *userdata)
{
        struct dispatch *d = userdata;
        struct timespec deadline;

        pthread_mutex_lock(&d->lock);
        for (;;) {
                struct dispatch_job *job = d->head;

                if (job) {
                        d->head = job->next;
                        if (!d->head)
                                d->tail = NULL;
                        pthread_mutex_unlock(&d->lock);
                        job->run(job); /* may free job: not touched after this */
                        pthread_mutex_lock(&d->lock);
                        d->n_jobs--;
                        continue;
                }
                if (d->ending)
                        break;
                (void) clock_gettime(CLOCK_MONOTONIC, &deadline);
                deadline.tv_sec += IDLE_EXIT_S;
                int r = pthread_cond_timedwait(&d->work, &d->lock, &deadline);
                if (r == ETIMEDOUT && !d->head && d->n_threads > 1)
                        break;
        }
        d->n_threads--;
        pthread_cond_broadcast(&d->gone);
        pthread_mutex_unlock(&d->lock);
        return NULL;
}

/* With d->lock held. */
static int spawn_locked(struct dispatch *d)
{
        pthread_attr_t attr;
        pthread_t t;
        int r;

        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&t, &attr, worker, d);
        pthread_attr_destroy(&attr);
        if (r == 0)
                d->n_threads++;
        return r;
}

int dispatch_new(unsigned max_threads, struct dispatch **ret)
{
        struct dispatch *d = calloc(1, sizeof(*d));
        pthread_condattr_t attr;
        int r;

        if (!d)
                return -ENOMEM;
        pthread_mutex_init(&d->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&d->work, &attr);
        pthread_condattr_destroy(&attr);
        pthread_cond_init(&d->gone, NULL);
        d->max_threads = max_threads ? max_threads : 1;
        pthread_mutex_lock(&d->lock);
        r = spawn_locked(d);
        pthread_mutex_unlock(&d->lock);
        if (r < 0) {
                pthread_cond_destroy(&d->gone);
                pthread_cond_destroy(&d->work);
                pthread_mutex_destroy(&d->lock);
                free(d);
                return r;
        }
        *ret = d;
        return 0;
}

void dispatch_submit(struct dispatch *d, struct dispatch_job *job)
{
        int r;

        job->next = NULL;
        pthread_mutex_lock(&d->lock);
        if (d->tail)
                d->tail->next = job;
        else
                d->head = job;
        d->tail = job;
        d->n_jobs++;
        /* A job that no thread is free for gets a new one, up to the ceiling. */
        if (d->n_jobs > d->n_threads && d->n_threads < d->max_threads) {
                r = spawn_locked(d);
                if (r < 0)
                        log_warn("cannot start a request worker (%s); the request waits for a "
                                 "busy one (%u running)",
                                 strerror(-r), d->n_threads);
        }
        pthread_cond_signal(&d->work);
        pthread_mutex_unlock(&d->lock);
}

struct dispatch *dispatch_free(struct dispatch *d)
{
        if (!d)
                return NULL;
        pthread_mutex_lock(&d->lock);
        d->ending = true;
        pthread_cond_broadcast(&d->work);
        while (d->n_threads > 0)
                pthread_cond_wait(&d->gone, &d->lock);
        pthread_mutex_unlock(&d->lock);
        pthread_cond_destroy(&d->gone);
        pthread_cond_destroy(&d->work);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return NULL;
}
