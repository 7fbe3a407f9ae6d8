/* Worker threads for request handlers. The HTTP server runs its connections on one event
 * thread; a handler may block for as long as a cell runs, so each one is handed to a worker
 * here. Threads are made when every worker is busy (up to a ceiling), and end after a while
 * idle, so a thousand idle keep-alive clients cost no thread at all and a burst of long cells
 * gets a thread each. */
#pragma once

#include <stddef.h>

struct dispatch;

/* One unit of work, embedded in the caller's own object (no allocation per job). */
struct dispatch_job {
        struct dispatch_job *next;
        void (*run)(struct dispatch_job *job);
};

/* A pool that keeps up to max_threads workers (at least 1). Returns 0 or -ENOMEM. */
int dispatch_new(unsigned max_threads, struct dispatch **ret);

/* Queues job; a worker runs job->run(job) soon, in FIFO order. Never fails: when no thread can
 * be made the job waits for a busy worker to finish. */
void dispatch_submit(struct dispatch *d, struct dispatch_job *job);

/* Waits until every queued job has run and every worker has ended, then frees the pool.
 * Accepts NULL, returns NULL. */
struct dispatch *dispatch_free(struct dispatch *d);
