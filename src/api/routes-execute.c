/* Running code: POST /execute (one-shot) and POST /v1/sessions/{id}/execute. Without
 * `Accept: application/x-ndjson` the handler runs the cell and answers with the execution
 * object. With it, a worker thread runs the cell and feeds a bounded queue of ndjson events;
 * libmicrohttpd's content reader, on the event thread, takes what is queued and, when nothing
 * is, suspends the connection until the worker queues more (it must never block: every
 * connection shares that thread). A slow client makes the worker wait (the queue is bounded);
 * a watcher thread notices a client that went away and interrupts its cell. The stream is
 * freed by whichever of the reply, the worker and the watcher lets go of it last. */
#include "api-internal.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "json-body.h"
#include "reply-queue.h"
#include "session/session.h"
#include "tools/base64.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define STREAM_QUEUE_MAX (1u << 20) /* event bytes waiting for a slow client */
#define STREAM_START_WAIT_MS 100    /* how long an early failure can still be a 4xx */
#define STREAM_POLL_MS 250          /* how often a waiting reader checks the client */
#define STREAM_BLOCK_SIZE 65536

/* What a failed execute answers, as a reply or as the stream's last event. */
struct exec_failure {
        unsigned status;
        const char *field;
        char msg[AIRLOCK_ERROR_MAX + 128];
};

static const char *field_in_message(const char *msg)
{
        static const char *const fields[] = { "timeout_s", "timeout", "language", "profile", "code",
                                              "stdin",     "env",     "cwd",      "files",   NULL };

        /* "field: why" names its field first; else the first field the prose mentions. */
        for (size_t i = 0; fields[i]; i++) {
                size_t n = strlen(fields[i]);
                if (strncmp(msg, fields[i], n) == 0 && msg[n] == ':')
                        return fields[i];
        }
        for (size_t i = 0; fields[i]; i++)
                if (strstr(msg, fields[i]))
                        return fields[i];
        return NULL;
}

/* The execute request of a body: the cell and this call's stdin, env and cwd. */
static struct exec_request exec_request_of(const struct exec_body *body)
{
        return (struct exec_request){ .language = body->language,
                                      .code = body->code,
                                      .timeout_ms = body->timeout_ms,
                                      .stdin_text = body->stdin_text,
                                      .env = body->env,
                                      .cwd = body->cwd };
}

/* A one-shot's output file for the answer: its content in base64, or null and why not. */
static int add_file_content(void *userdata, json_t *entry, const char *data, size_t len,
                            const char *omitted)
{
        _cleanup_free_ char *b64 = NULL;

        (void) userdata;
        if (!data)
                return json_object_set_new(entry, "content", json_null()) < 0 ||
                                       json_object_set_new(entry, "omitted", json_string(omitted)) <
                                               0
                               ? -ENOMEM
                               : 0;
        b64 = base64_encode(data, len);
        if (!b64 || json_object_set_new(entry, "content", json_string(b64)) < 0)
                return -ENOMEM;
        return 0;
}

/* The one-shot's files: the decoded inputs (owned) and the read-back hook. */
struct once_files {
        struct exec_file *in;
        size_t n_in;
        struct run_once_file *in_ref;
        struct run_once_files files;
};

static void once_files_done(struct once_files *of)
{
        exec_files_free(of->in, of->n_in);
        free(of->in_ref);
        *of = (struct once_files){ 0 };
}

static int once_files_init(const struct exec_body *body, struct once_files *of,
                           struct body_error *berr)
{
        int r;

        *of = (struct once_files){ 0 };
        if (body->files) {
                r = exec_files_decode(body->files, &of->in, &of->n_in, berr);
                if (r < 0)
                        return r;
                of->in_ref = calloc(of->n_in + 1, sizeof(*of->in_ref));
                if (!of->in_ref) {
                        once_files_done(of);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < of->n_in; i++)
                        of->in_ref[i] = (struct run_once_file){ .path = of->in[i].path,
                                                                .data = of->in[i].data,
                                                                .len = of->in[i].len };
        }
        of->files.in = of->in_ref;
        of->files.n_in = of->n_in;
        of->files.on_file = add_file_content;
        return 0;
}

static void exec_failure_of(struct api_server *srv, int r, const struct airlock_error *err,
                            const char *session_id, struct exec_failure *f)
{
        const char *msg = err->msg[0] ? err->msg : strerror(-r);
        json_t *ended;

        f->field = NULL;
        switch (-r) {
        case EBUSY:
                f->status = MHD_HTTP_CONFLICT;
                (void) snprintf(f->msg, sizeof(f->msg), "session %s is running another cell",
                                session_id ? session_id : "");
                break;
        case ENOENT:
                if (!session_id) {
                        f->status = MHD_HTTP_BAD_REQUEST;
                        f->field = "profile";
                        (void) snprintf(f->msg, sizeof(f->msg), "%s",
                                        err->msg[0] ? err->msg : "unknown profile");
                        break;
                }
                f->status = MHD_HTTP_NOT_FOUND;
                ended = session_manager_describe_ended(srv->mgr, session_id);
                (void) snprintf(f->msg, sizeof(f->msg), "session %s has ended: %s", session_id,
                                ended ? json_string_value(json_object_get(ended, "reason"))
                                      : "it was deleted");
                json_decref(ended);
                break;
        case EINVAL:
        case EOPNOTSUPP:
                f->status = MHD_HTTP_BAD_REQUEST;
                f->field = field_in_message(msg);
                (void) snprintf(f->msg, sizeof(f->msg), "%s", msg);
                break;
        case EUSERS:
        case EMFILE:
        case EAGAIN:
        case ESHUTDOWN:
                f->status = MHD_HTTP_SERVICE_UNAVAILABLE;
                (void) snprintf(f->msg, sizeof(f->msg), "%s", msg);
                break;
        case E2BIG:
                f->status = MHD_HTTP_CONTENT_TOO_LARGE;
                (void) snprintf(f->msg, sizeof(f->msg), "%s", msg);
                break;
        default:
                f->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
                (void) snprintf(f->msg, sizeof(f->msg), "cannot run the cell: %s", msg);
                break;
        }
}

static int reply_exec_failure(struct api_request *req, int r, const struct airlock_error *err,
                              const char *session_id)
{
        struct exec_failure f;

        if (r == -ENOENT && session_id)
                return api_reply_session_gone(req, session_id);
        exec_failure_of(req->srv, r, err, session_id, &f);
        if (r == -EBUSY)
                return api_reply_error_extra(req, f.status, NULL,
                                             json_pack("{s:s}", "id", session_id), "%s", f.msg);
        return api_reply_error(req, f.status, f.field, "%s", f.msg);
}

struct exec_stream {
        pthread_mutex_t lock;
        pthread_cond_t cond;      /* any change below */
        struct reply_queue q;     /* the events, the connection (q.conn: NULL once gone) */
        size_t n_output;          /* stdout/stderr events so far */
        bool done;                /* the worker queued its last event */
        bool closed;              /* the client is gone: output is dropped */
        int rc;                   /* the worker's result, valid when done */
        struct airlock_error err; /* and its message */
        struct api_scope scope;   /* the worker acts for the request's tenant */
        char carry[3][4];         /* a UTF-8 character cut between two chunks, per stream */
        size_t carry_len[3];

        struct api_server *srv;
        struct session *session; /* NULL for one-shot */
        char session_id[SESSION_ID_LEN + 1];
        struct session_create_options opts;
        json_t *root; /* the request body; owns the strings of req and opts */
        struct exec_request req;
        struct exec_sink sink;
        struct once_files files; /* one-shot only */
        int client_fd;
        unsigned refs; /* the reply (or the handler before it), worker, watcher */
};

static void stream_destroy(struct exec_stream *st)
{
        reply_queue_done(&st->q);
        once_files_done(&st->files);
        session_unref(st->session);
        json_decref(st->root);
        api_scope_done(&st->scope);
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

/* Appends an event (taking the reference) as one line. Called with the lock held. */
static void stream_push_locked(struct exec_stream *st, json_t *event)
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
                stream_push_locked(st, json_pack("{s:s, s:s}", "type",
                                                 stream == 1 ? "stdout" : "stderr", "text", text));
                st->n_output++;
        }
        pthread_mutex_unlock(&st->lock);
}

static void *stream_worker(void *userdata)
{
        struct exec_stream *st = userdata;
        struct airlock_error err = { { 0 } };
        json_t *result = NULL, *item, *error;
        size_t i;
        int r;

        /* The quotas and ownership of the request's tenant hold on this thread too. */
        api_scope_enter(&st->scope);
        if (st->session)
                r = session_execute(st->session, &st->req, &result, &err);
        else
                r = session_run_once_files(st->srv->mgr, &st->opts, &st->req, &st->files.files,
                                           &result, &err);
        api_scope_leave();

        pthread_mutex_lock(&st->lock);
        for (int s = 1; s <= 2; s++) {
                _cleanup_free_ char *text = NULL;
                if (st->carry_len[s] == 0 || st->closed)
                        continue;
                text = stream_text_locked(st, s, NULL, 0, true);
                if (text)
                        stream_push_locked(st,
                                           json_pack("{s:s, s:s}", "type",
                                                     s == 1 ? "stdout" : "stderr", "text", text));
        }
        if (r >= 0) {
                json_array_foreach (json_object_get(result, "outputs"), i, item) {
                        json_t *ev = json_is_object(item) ? json_copy(item) : NULL;
                        if (ev && json_object_set_new(ev, "type", json_string("output")) == 0)
                                stream_push_locked(st, ev);
                        else
                                json_decref(ev);
                }
                error = json_object_get(result, "error");
                if (json_is_object(error)) {
                        json_t *ev = json_copy(error);
                        if (ev && json_object_set_new(ev, "type", json_string("error")) == 0)
                                stream_push_locked(st, ev);
                        else
                                json_decref(ev);
                }
                stream_push_locked(st, json_pack("{s:s, s:o}", "type", "end", "result", result));
        } else {
                struct exec_failure f;

                exec_failure_of(st->srv, r, &err, st->session ? st->session_id : NULL, &f);
                stream_push_locked(st,
                                   json_pack("{s:s, s:n, s:{s:i, s:s}}", "type", "end", "result",
                                             "failure", "status", (int) f.status, "error", f.msg));
        }
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

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct exec_stream *st = cls;
        bool took;
        ssize_t n;

        (void) pos;
        pthread_mutex_lock(&st->lock);
        n = reply_queue_read_locked(&st->q, buf, max, st->done, st->closed, &took);
        /* Room again for a cell whose output waits on a slow client. */
        if (took)
                pthread_cond_broadcast(&st->cond);
        pthread_mutex_unlock(&st->lock);
        return n;
}

static bool wants_stream(struct api_request *req)
{
        const char *accept = api_header(req, MHD_HTTP_HEADER_ACCEPT);

        return accept && strcasestr(accept, "application/x-ndjson");
}

/* Starts the worker and answers: a normal error reply if it failed at once, else the 200
 * stream. Takes over session (may be NULL), root and files (one-shot, may be NULL). */
static int stream_start(struct api_request *req, struct session *session, json_t *root,
                        const struct exec_body *body, struct once_files *files)
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
                session_unref(session);
                json_decref(root);
                if (files)
                        once_files_done(files);
                return -ENOMEM;
        }
        if (files) {
                st->files = *files;
        }
        pthread_mutex_init(&st->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&st->cond, &attr);
        pthread_condattr_destroy(&attr);
        st->srv = req->srv;
        api_scope_init(&st->scope, req);
        st->session = session;
        st->root = root;
        if (session)
                (void) snprintf(st->session_id, sizeof(st->session_id), "%s", session_id(session));
        st->opts.profile = body->profile;
        st->sink.on_output = stream_on_output;
        st->sink.userdata = st;
        st->req = exec_request_of(body);
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
                r = reply_exec_failure(req, rc, &err, st->session ? st->session_id : NULL);
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
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
        (void) MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        return api_reply_response(req, MHD_HTTP_OK, resp);
}

int api_handle_execute_once(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        struct body_error berr = { { 0 } };
        struct exec_body body;
        struct once_files files;
        struct exec_request ereq;
        json_t *root = NULL, *result = NULL;
        int r;

        r = exec_body_parse(req->body, req->body_len, true, &root, &body, &berr);
        if (r >= 0) {
                r = once_files_init(&body, &files, &berr);
                if (r < 0)
                        json_decref(root);
        }
        if (r == -EINVAL)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, berr.field, "%s", berr.msg);
        if (r < 0)
                return r;
        if (wants_stream(req))
                return stream_start(req, NULL, root, &body, &files);

        ereq = exec_request_of(&body);
        r = session_run_once_files(req->srv->mgr,
                                   &(struct session_create_options){ .profile = body.profile },
                                   &ereq, &files.files, &result, &err);
        once_files_done(&files);
        json_decref(root);
        if (r < 0)
                return reply_exec_failure(req, r, &err, NULL);
        return api_reply_json(req, MHD_HTTP_OK, result);
}

int api_handle_session_execute(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        struct body_error berr = { { 0 } };
        struct exec_body body;
        struct session *s = NULL;
        struct exec_request ereq;
        json_t *root = NULL, *result = NULL, *desc;
        const char *state;
        int r;

        r = exec_body_parse(req->body, req->body_len, false, &root, &body, &berr);
        if (r == -EINVAL)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, berr.field, "%s", berr.msg);
        if (r < 0)
                return r;
        r = session_lookup(req->srv->mgr, req->params.id, &s, &err);
        if (r < 0) {
                json_decref(root);
                return r == -ENOENT ? api_reply_session_gone(req, req->params.id)
                                    : api_reply_errno(req, r, NULL, err.msg);
        }

        if (wants_stream(req)) {
                /* The common case of a busy session is answered 409 before the stream starts;
                 * the race with another request is caught by the worker's wait above. */
                desc = session_describe(s);
                state = json_string_value(json_object_get(desc, "state"));
                if (state && strcmp(state, "busy") == 0) {
                        json_decref(desc);
                        json_decref(root);
                        r = reply_exec_failure(req, -EBUSY, &err, session_id(s));
                        session_unref(s);
                        return r;
                }
                json_decref(desc);
                return stream_start(req, s, root, &body, NULL);
        }

        ereq = exec_request_of(&body);
        r = session_execute(s, &ereq, &result, &err);
        json_decref(root);
        if (r < 0) {
                char id[SESSION_ID_LEN + 1];
                (void) snprintf(id, sizeof(id), "%s", session_id(s));
                session_unref(s);
                return reply_exec_failure(req, r, &err, id);
        }
        session_unref(s);
        return api_reply_json(req, MHD_HTTP_OK, result);
}
