/* The streamed execution (exec-stream.h): the worker runs the cell and queues what the format
 * makes of it; libmicrohttpd's content reader, on the event thread, takes what is queued and,
 * when nothing is, suspends the connection until the worker queues more (it must never block:
 * every connection shares that thread). A slow client makes the worker wait (the queue is
 * bounded); a watcher thread notices a client that went away and interrupts its cell. */
#include "exec-stream.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "reply-queue.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_QUEUE_MAX (1u << 20) /* event bytes waiting for a slow client */
#define STREAM_START_WAIT_MS 100    /* how long an early failure can still be a 4xx */
#define STREAM_POLL_MS 250          /* how often a waiting reader checks the client */
#define STREAM_BLOCK_SIZE 65536

struct exec_stream {
        pthread_mutex_t lock;
        pthread_cond_t cond;      /* any change below */
        struct reply_queue q;     /* the events, the connection (q.conn: NULL once gone) */
        size_t n_output;          /* output events so far */
        size_t n_shown;           /* the result's outputs already sent by format->display */
        bool done;                /* the worker queued its last event */
        bool closed;              /* the client is gone: output is dropped */
        bool cut;                 /* the reply ends with an error, not its proper end */
        int rc;                   /* the worker's result, valid when done */
        struct airlock_error err; /* and its message */
        char carry[3][4];         /* a UTF-8 character cut between two chunks, per stream */
        size_t carry_len[3];

        struct api_server *srv;
        /* Who the request acts for (its tenant and request id), the worker's scope as it was
         * the handler's: the session manager checks ownership and quotas against it, and its
         * audit lines carry them, on whatever thread. */
        struct api_scope scope;
        const struct exec_stream_format *format;
        struct session *session; /* NULL for one-shot */
        char session_id[SESSION_ID_MAX + 1];
        struct exec_request req;
        struct exec_sink sink;
        int (*run)(void *data, const struct exec_request *req, json_t **ret_result,
                   struct airlock_error *err);
        void *data;
        void (*data_free)(void *data);
        int client_fd;
        unsigned refs; /* the reply (or the handler before it), worker, watcher */
};

static void stream_destroy(struct exec_stream *st)
{
        reply_queue_done(&st->q);
        api_scope_done(&st->scope);
        if (st->data_free)
                st->data_free(st->data);
        session_unref(st->session);
        pthread_cond_destroy(&st->cond);
        pthread_mutex_destroy(&st->lock);
        free(st);
}

static void stream_release(struct exec_stream *st)
{
        bool last;

        pthread_mutex_lock(&st->lock);
        last = --st->refs == 0;
        pthread_mutex_unlock(&st->lock);
        if (last)
                stream_destroy(st);
}

/* The reader suspended the connection for want of events: there are some now (or the end). */
static void stream_wake_locked(struct exec_stream *st)
{
        pthread_cond_broadcast(&st->cond);
        reply_queue_wake_locked(&st->q);
}

/* The reply is done with the stream (sent, or the connection closed): libmicrohttpd's free
 * callback, on the event thread, so it must not wait for the cell. */
static void stream_reply_gone(void *userdata)
{
        struct exec_stream *st = userdata;
        bool running;

        pthread_mutex_lock(&st->lock);
        st->closed = true;
        st->q.conn = NULL;
        running = !st->done;
        pthread_cond_broadcast(&st->cond);
        pthread_mutex_unlock(&st->lock);
        /* The reply ended before the cell (the client went away, or the daemon is stopping):
         * stop the cell as a timeout would. */
        if (running && st->session)
                (void) session_interrupt(st->session);
        stream_release(st);
}

void exec_stream_push_locked(struct exec_stream *st, const void *data, size_t len)
{
        (void) reply_queue_push_locked(&st->q, (struct iovec[]){ { (void *) data, len } }, 1);
        pthread_cond_broadcast(&st->cond);
}

void exec_stream_push_line_locked(struct exec_stream *st, json_t *event)
{
        char *text;

        if (!event)
                return;
        text = json_dumps(event, JSON_COMPACT | JSON_ENSURE_ASCII); /* no raw C1 controls */
        json_decref(event);
        if (text)
                (void) reply_queue_push_locked(
                        &st->q, (struct iovec[]){ { text, strlen(text) }, { (char *) "\n", 1 } },
                        2);
        free(text);
        pthread_cond_broadcast(&st->cond);
}

void *exec_stream_data(struct exec_stream *st)
{
        return st->data;
}

const char *exec_stream_session_id(const struct exec_stream *st)
{
        return st->session_id;
}

struct api_server *exec_stream_server(struct exec_stream *st)
{
        return st->srv;
}

/* The text of stream's pending bytes plus data that ends on a character boundary; the rest is
 * carried over. With flush everything goes (a cut character becomes U+FFFD). */
static char *stream_text_locked(struct exec_stream *st, int stream, const char *data, size_t len,
                                bool flush)
{
        _cleanup_free_ char *joined = NULL;
        size_t total = st->carry_len[stream] + len, complete;

        joined = malloc(total + 1);
        if (!joined)
                return NULL;
        memcpy(joined, st->carry[stream], st->carry_len[stream]);
        if (len)
                memcpy(joined + st->carry_len[stream], data, len);
        complete = flush ? total : utf8_complete_prefix(joined, total);
        st->carry_len[stream] = total - complete;
        if (st->carry_len[stream] > sizeof(st->carry[stream])) {
                /* Not a character being cut but garbage: send it, sanitised. */
                complete = total;
                st->carry_len[stream] = 0;
        }
        memcpy(st->carry[stream], joined + complete, st->carry_len[stream]);
        if (complete == 0)
                return NULL;
        return utf8_sanitize(joined, complete);
}

static void stream_on_output(void *userdata, int stream, const char *data, size_t len)
{
        struct exec_stream *st = userdata;
        _cleanup_free_ char *text = NULL;

        stream = stream == 2 ? 2 : 1;
        pthread_mutex_lock(&st->lock);
        text = st->closed ? NULL : stream_text_locked(st, stream, data, len, false);
        /* Back-pressure: the cell's output waits for the client rather than piling up. */
        while (text && st->q.queued > STREAM_QUEUE_MAX && !st->closed)
                pthread_cond_wait(&st->cond, &st->lock);
        if (text && !st->closed) {
                st->format->output(st, stream, text);
                st->n_output++;
        }
        pthread_mutex_unlock(&st->lock);
}

static void stream_on_display(void *userdata, const json_t *output, size_t index)
{
        struct exec_stream *st = userdata;

        pthread_mutex_lock(&st->lock);
        while (st->q.queued > STREAM_QUEUE_MAX && !st->closed)
                pthread_cond_wait(&st->cond, &st->lock);
        if (!st->closed) {
                st->format->display(st, output);
                if (index + 1 > st->n_shown)
                        st->n_shown = index + 1;
        }
        pthread_mutex_unlock(&st->lock);
}

size_t exec_stream_outputs_shown(const struct exec_stream *st)
{
        return st->n_shown;
}

static void *stream_worker(void *userdata)
{
        struct exec_stream *st = userdata;
        struct airlock_error err = { { 0 } };
        json_t *result = NULL;
        int r;

        api_scope_enter(&st->scope);
        if (st->session)
                r = session_execute(st->session, &st->req, &result, &err);
        else
                r = st->run(st->data, &st->req, &result, &err);
        api_scope_leave();

        pthread_mutex_lock(&st->lock);
        for (int s = 1; s <= 2; s++) {
                _cleanup_free_ char *text = NULL;
                if (st->carry_len[s] == 0 || st->closed)
                        continue;
                text = stream_text_locked(st, s, NULL, 0, true);
                if (text)
                        st->format->output(st, s, text);
        }
        st->format->end(st, r, r >= 0 ? result : NULL, &err);
        json_decref(result);
        st->rc = r;
        st->err = err;
        st->done = true;
        stream_wake_locked(st);
        pthread_mutex_unlock(&st->lock);
        stream_release(st);
        return NULL;
}

static bool client_gone(int fd)
{
        struct pollfd p = { .fd = fd, .events = POLLRDHUP };

        if (fd < 0)
                return false;
        return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void deadline_in(struct timespec *ts, unsigned ms)
{
        (void) clock_gettime(CLOCK_MONOTONIC, ts);
        ts->tv_sec += ms / 1000;
        ts->tv_nsec += (long) (ms % 1000) * 1000000L;
        if (ts->tv_nsec >= 1000000000L) {
                ts->tv_sec++;
                ts->tv_nsec -= 1000000000L;
        }
}

/* Nobody will read the rest: the watcher stops the cell now rather than at its timeout. */
static void *stream_watcher(void *userdata)
{
        struct exec_stream *st = userdata;
        struct timespec deadline;
        bool gone = false;

        pthread_mutex_lock(&st->lock);
        while (!st->done && !st->closed) {
                deadline_in(&deadline, STREAM_POLL_MS);
                /* Polled under the lock: the reply (which holds it to let go) is still there,
                 * so the connection and its descriptor are too. */
                if (pthread_cond_timedwait(&st->cond, &st->lock, &deadline) == ETIMEDOUT &&
                    st->q.conn && client_gone(st->client_fd)) {
                        st->closed = true;
                        gone = true;
                        stream_wake_locked(st);
                }
        }
        pthread_mutex_unlock(&st->lock);
        if (gone && st->session)
                (void) session_interrupt(st->session);
        stream_release(st);
        return NULL;
}

bool exec_stream_session_gone_locked(const struct exec_stream *st)
{
        return st->session && session_is_gone(st->session);
}

void exec_stream_cut_locked(struct exec_stream *st)
{
        st->cut = true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct exec_stream *st = cls;
        bool took;
        ssize_t n;

        (void) pos;
        pthread_mutex_lock(&st->lock);
        n = reply_queue_read_locked(&st->q, buf, max, st->done && !st->cut,
                                    st->closed || (st->done && st->cut), &took);
        /* Room again for a cell whose output waits on a slow client. */
        if (took)
                pthread_cond_broadcast(&st->cond);
        pthread_mutex_unlock(&st->lock);
        return n;
}

int exec_stream_start(struct api_request *req, const struct exec_stream_spec *spec)
{
        const union MHD_ConnectionInfo *ci;
        struct exec_stream *st;
        struct MHD_Response *resp;
        pthread_condattr_t attr;
        pthread_attr_t detached;
        struct timespec deadline;
        pthread_t thread;
        int r;

        st = calloc(1, sizeof(*st));
        if (!st) {
                session_unref(spec->session);
                if (spec->data_free)
                        spec->data_free(spec->data);
                return -ENOMEM;
        }
        pthread_mutex_init(&st->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&st->cond, &attr);
        pthread_condattr_destroy(&attr);
        st->srv = req->srv;
        api_scope_init(&st->scope, req);
        st->format = spec->format;
        st->session = spec->session;
        if (st->session)
                (void) snprintf(st->session_id, sizeof(st->session_id), "%s",
                                session_id(st->session));
        st->run = spec->run;
        st->data = spec->data;
        st->data_free = spec->data_free;
        st->sink.on_output = stream_on_output;
        if (st->format->display)
                st->sink.on_display = stream_on_display;
        st->sink.userdata = st;
        st->req = spec->req;
        st->req.sink = &st->sink;
        ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        st->client_fd = ci ? ci->connect_fd : -EBADF;
        reply_queue_init(&st->q, req->srv, req->conn);
        st->refs = 2; /* this handler, then the reply; the worker */

        pthread_attr_init(&detached);
        pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&thread, &detached, stream_worker, st);
        if (r < 0) {
                pthread_attr_destroy(&detached);
                st->refs = 1;
                stream_release(st);
                return r;
        }

        /* Failures the worker meets at once (busy, unknown profile, session limit) are still
         * answered with their own status; after this short wait the 200 goes out and a later
         * failure becomes the stream's last event. */
        deadline_in(&deadline, STREAM_START_WAIT_MS);
        pthread_mutex_lock(&st->lock);
        while (!st->q.head && !st->done)
                if (pthread_cond_timedwait(&st->cond, &st->lock, &deadline) == ETIMEDOUT)
                        break;
        if (st->done && st->rc < 0 && st->n_output == 0) {
                int rc = st->rc;
                struct airlock_error err = st->err;
                pthread_mutex_unlock(&st->lock);
                r = st->format->reply_failure(req, rc, &err, st->session ? st->session_id : NULL);
                pthread_attr_destroy(&detached);
                stream_release(st);
                return r;
        }
        pthread_mutex_unlock(&st->lock);

        pthread_mutex_lock(&st->lock);
        st->refs++;
        pthread_mutex_unlock(&st->lock);
        if (pthread_create(&thread, &detached, stream_watcher, st) != 0)
                stream_release(st); /* no watcher: a client that leaves waits for the timeout */
        pthread_attr_destroy(&detached);

        /* From here the reply owns the handler's reference: MHD calls stream_reply_gone() when
         * it is done with it, also when queueing fails. */
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK_SIZE, stream_read,
                                                 st, stream_reply_gone);
        if (!resp) {
                stream_reply_gone(st);
                return -ENOMEM;
        }
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                       st->format->content_type);
        (void) MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        return api_reply_response(req, MHD_HTTP_OK, resp);
}
