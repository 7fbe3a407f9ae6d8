/* A reply sent while it is made: a worker thread queues chunks, libmicrohttpd's content reader
 * (on the event thread, which must never block) takes them, and when there is nothing to take
 * it suspends the connection until the next chunk, or the end, resumes it. The streamed execute
 * (ndjson) and the streamed Responses API (Server-Sent Events) are both this. The queue has no
 * lock of its own: its owner holds its lock around every call (the _locked suffix). */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct api_server;
struct reply_chunk;

struct reply_queue {
        struct reply_chunk *head, *tail, *cur;
        size_t cur_off;
        size_t queued; /* bytes waiting in head..tail (not cur) */
        struct api_server *srv;
        struct MHD_Connection *conn; /* NULL once the reply is gone */
        bool suspended;              /* the reader found nothing and suspended conn */
};

/* An empty queue for the reply on conn (borrowed; set conn to NULL when MHD lets go of it). */
void reply_queue_init(struct reply_queue *q, struct api_server *srv, struct MHD_Connection *conn);

/* Frees what was never sent. */
void reply_queue_done(struct reply_queue *q);

/* Appends the n pieces of iov as one chunk (copied) and wakes the reader. Returns 0 or
 * -ENOMEM (nothing queued; the reader is woken all the same). */
int reply_queue_push_locked(struct reply_queue *q, const struct iovec *iov, int n);

/* Resumes the connection if the reader suspended it: there is something to send, or the end. */
void reply_queue_wake_locked(struct reply_queue *q);

/* The content reader's step: copies up to max bytes to buf and returns how many; returns
 * MHD_CONTENT_READER_END_OF_STREAM when done and nothing is left, END_WITH_ERROR when closed,
 * else suspends the connection and returns 0. *ret_took is set when a chunk left the queue
 * (room for a writer that waits on queued). */
ssize_t reply_queue_read_locked(struct reply_queue *q, char *buf, size_t max, bool done,
                                bool closed, bool *ret_took);
