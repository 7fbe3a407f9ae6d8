/* The chunk queue of reply-queue.h. */
#include "reply-queue.h"

#include "api-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct reply_chunk {
        struct reply_chunk *next;
        size_t len;
        char data[];
};

void reply_queue_init(struct reply_queue *q, struct api_server *srv, struct MHD_Connection *conn)
{
        *q = (struct reply_queue){ .srv = srv, .conn = conn };
}

void reply_queue_done(struct reply_queue *q)
{
        free(q->cur);
        while (q->head) {
                struct reply_chunk *next = q->head->next;
                free(q->head);
                q->head = next;
        }
        q->cur = q->tail = NULL;
}

void reply_queue_wake_locked(struct reply_queue *q)
{
        if (q->suspended && q->conn) {
                q->suspended = false;
                MHD_resume_connection(q->conn);
                api_resumed(q->srv);
        }
}

int reply_queue_push_locked(struct reply_queue *q, const struct iovec *iov, int n)
{
        struct reply_chunk *c;
        size_t len = 0, o = 0;

        for (int i = 0; i < n; i++)
                len += iov[i].iov_len;
        c = malloc(sizeof(*c) + len);
        if (!c) {
                reply_queue_wake_locked(q);
                return -ENOMEM;
        }
        for (int i = 0; i < n; i++) {
                memcpy(c->data + o, iov[i].iov_base, iov[i].iov_len);
                o += iov[i].iov_len;
        }
        c->len = len;
        c->next = NULL;
        if (q->tail)
                q->tail->next = c;
        else
                q->head = c;
        q->tail = c;
        q->queued += len;
        reply_queue_wake_locked(q);
        return 0;
}

ssize_t reply_queue_read_locked(struct reply_queue *q, char *buf, size_t max, bool done,
                                bool closed, bool *ret_took)
{
        *ret_took = false;
        for (;;) {
                if (q->cur) {
                        size_t left = q->cur->len - q->cur_off;
                        size_t take = left < max ? left : max;

                        memcpy(buf, q->cur->data + q->cur_off, take);
                        q->cur_off += take;
                        if (q->cur_off == q->cur->len) {
                                free(q->cur);
                                q->cur = NULL;
                        }
                        return (ssize_t) take;
                }
                if (q->head) {
                        q->cur = q->head;
                        q->cur_off = 0;
                        q->head = q->head->next;
                        if (!q->head)
                                q->tail = NULL;
                        q->queued -= q->cur->len;
                        *ret_took = true;
                        continue;
                }
                if (done)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (closed)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                /* Nothing yet: the next chunk resumes the connection. */
                q->suspended = true;
                api_suspended(q->srv);
                MHD_suspend_connection(q->conn);
                return 0;
        }
}
