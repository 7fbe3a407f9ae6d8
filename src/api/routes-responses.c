/* The Responses API's routes: POST /v1/responses, GET and DELETE /v1/responses/{id}, GET
 * /v1/responses/{id}/input_items. src/responses/ does the work; this file reads the request
 * (its body, the query, the Host that image URLs name) and answers, as JSON or, for "stream":
 * true, as Server-Sent Events sent while the tool loop runs. A streaming request runs on a
 * thread of its own that queues the events; libmicrohttpd's content reader, on the event
 * thread, takes what is queued and suspends the connection when nothing is (it must never
 * block). Until the upstream model has answered once, nothing is sent, so that a model that
 * cannot be reached is an ordinary 502, as without streaming. */
#include "api-internal.h"

#include "base/cleanup.h"
#include "forward.h"
#include "reply-queue.h"
#include "responses/responses.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SSE_BLOCK_SIZE 65536

static int reply(struct api_request *req, struct chat_gateway_reply *g)
{
        int r = api_reply_json(req, g->status, json_incref(g->body));

        chat_gateway_reply_done(g);
        return r;
}

/* 1 when the daemon serves the Responses API, else 0 once a 503 was queued (or -errno). */
static int check_on(struct api_request *req)
{
        struct chat_gateway_reply g = {};
        int r;

        if (req->srv->responses)
                return 1;
        r = chat_gateway_reply_error(&g, 503, "server_error", NULL,
                                     "this daemon does not serve the Responses API");
        return r < 0 ? r : reply(req, &g);
}

struct sse_stream {
        pthread_mutex_t lock;
        pthread_cond_t cond;  /* started or done changed */
        struct reply_queue q; /* the events, the connection (q.conn: NULL once gone) */
        bool started;         /* the model answered: the 200 goes out */
        bool done;            /* the worker finished; reply is its result */
        bool closed;          /* the reply is gone: events are dropped */
        int rc;
        struct chat_gateway_reply reply;

        struct api_server *srv;
        unsigned refs; /* the handler (then the reply), the worker */

        json_t *body;
        struct api_scope scope; /* the worker acts for the request's tenant */
        char base_url[300];
        struct responses_sink sink;
        struct responses_request rreq;
};

static void sse_release(struct sse_stream *st)
{
        bool last;

        pthread_mutex_lock(&st->lock);
        last = --st->refs == 0;
        pthread_mutex_unlock(&st->lock);
        if (!last)
                return;
        reply_queue_done(&st->q);
        chat_gateway_reply_done(&st->reply);
        json_decref(st->body);
        api_scope_done(&st->scope);
        pthread_cond_destroy(&st->cond);
        pthread_mutex_destroy(&st->lock);
        free(st);
}

static void sse_event(void *userdata, const char *type, json_t *event)
{
        struct sse_stream *st = userdata;
        _cleanup_free_ char *data = json_dumps(event, JSON_COMPACT | JSON_ENSURE_ASCII);

        if (!data)
                return;
        pthread_mutex_lock(&st->lock);
        if (!st->closed)
                (void) reply_queue_push_locked(&st->q,
                                               (struct iovec[]){ { (char *) "event: ", 7 },
                                                                 { (char *) type, strlen(type) },
                                                                 { (char *) "\ndata: ", 7 },
                                                                 { data, strlen(data) },
                                                                 { (char *) "\n\n", 2 } },
                                               5);
        pthread_mutex_unlock(&st->lock);
}

static void sse_started(void *userdata)
{
        struct sse_stream *st = userdata;

        pthread_mutex_lock(&st->lock);
        st->started = true;
        pthread_cond_broadcast(&st->cond);
        pthread_mutex_unlock(&st->lock);
}

static void *sse_worker(void *userdata)
{
        struct sse_stream *st = userdata;
        struct chat_gateway_reply g = {};
        int r;

        api_scope_enter(&st->scope);
        r = responses_create(st->srv->responses, &st->rreq, &g);
        api_scope_leave();
        pthread_mutex_lock(&st->lock);
        st->rc = r;
        st->reply = g;
        st->done = true;
        pthread_cond_broadcast(&st->cond);
        reply_queue_wake_locked(&st->q);
        pthread_mutex_unlock(&st->lock);
        sse_release(st);
        return NULL;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct sse_stream *st = cls;
        bool took;
        ssize_t n;

        (void) pos;
        pthread_mutex_lock(&st->lock);
        n = reply_queue_read_locked(&st->q, buf, max, st->done, st->closed, &took);
        pthread_mutex_unlock(&st->lock);
        return n;
}

/* libmicrohttpd is done with the reply (sent, or the client went away). The run goes on: its
 * response is stored all the same. */
static void sse_reply_gone(void *userdata)
{
        struct sse_stream *st = userdata;

        pthread_mutex_lock(&st->lock);
        st->closed = true;
        st->q.conn = NULL;
        pthread_mutex_unlock(&st->lock);
        sse_release(st);
}

/* "http://<Host>" (the Host header passed the allow-list), for the URLs of images. */
static void base_url(struct api_request *req, char *buf, size_t size)
{
        const char *host = api_header(req, MHD_HTTP_HEADER_HOST);

        if (!host || snprintf(buf, size, "http://%s", host) >= (int) size)
                buf[0] = '\0';
}

static int stream(struct api_request *req, json_t *body)
{
        struct sse_stream *st = calloc(1, sizeof(*st));
        struct MHD_Response *resp;
        pthread_attr_t detached;
        pthread_condattr_t attr;
        pthread_t thread;
        int r;

        if (!st) {
                json_decref(body);
                return -ENOMEM;
        }
        pthread_mutex_init(&st->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_cond_init(&st->cond, &attr);
        pthread_condattr_destroy(&attr);
        st->srv = req->srv;
        reply_queue_init(&st->q, req->srv, req->conn);
        st->body = body;
        api_scope_init(&st->scope, req);
        base_url(req, st->base_url, sizeof(st->base_url));
        st->sink = (struct responses_sink){ .event = sse_event,
                                            .started = sse_started,
                                            .userdata = st };
        st->rreq = (struct responses_request){ .body = body,
                                               .base_url = st->base_url,
                                               .cancel = &req->srv->stopping,
                                               .sink = &st->sink };
        st->refs = 2; /* this handler (then the reply), the worker */

        pthread_attr_init(&detached);
        pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&thread, &detached, sse_worker, st);
        pthread_attr_destroy(&detached);
        if (r < 0) {
                st->refs = 1;
                sse_release(st);
                return r;
        }

        pthread_mutex_lock(&st->lock);
        while (!st->started && !st->done)
                pthread_cond_wait(&st->cond, &st->lock);
        if (!st->started) {
                /* It ended before the model answered: an ordinary reply. */
                struct chat_gateway_reply g = st->reply;
                int rc = st->rc;

                st->reply = (struct chat_gateway_reply){};
                pthread_mutex_unlock(&st->lock);
                sse_release(st);
                return rc < 0 ? rc : reply(req, &g);
        }
        pthread_mutex_unlock(&st->lock);

        /* From here the reply owns the handler's reference: MHD calls sse_reply_gone() when it
         * is done with it, also when queueing fails. */
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK_SIZE, sse_read, st,
                                                 sse_reply_gone);
        if (!resp) {
                sse_reply_gone(st);
                return -ENOMEM;
        }
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        (void) MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        return api_reply_response(req, 200, resp);
}

int api_handle_resp_create(struct api_request *req)
{
        struct chat_gateway_reply g = {};
        char url[300];
        json_error_t jerr;
        json_t *body;
        int r;

        r = check_on(req);
        if (r <= 0)
                return r;
        body = json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(body)) {
                r = chat_gateway_reply_error(&g, 400, "invalid_request_error", NULL,
                                             "the body must be a JSON object (a Responses "
                                             "request)%s%s",
                                             body ? "" : ": ", body ? "" : jerr.text);
                json_decref(body);
                return r < 0 ? r : reply(req, &g);
        }
        /* Continuing another node's response or container: that node answers (forward.h). */
        r = api_forward_for_body(req, body);
        if (r != 0) {
                json_decref(body);
                return r < 0 ? r : 0;
        }
        if (responses_wants_stream(body))
                return stream(req, body);
        base_url(req, url, sizeof(url));
        r = responses_create(req->srv->responses,
                             &(struct responses_request){
                                     .body = body, .base_url = url, .cancel = &req->srv->stopping },
                             &g);
        json_decref(body);
        return r < 0 ? r : reply(req, &g);
}

/* ?include[]=code_interpreter_call.outputs (the SDKs' brackets), or ?include=... The query
 * reaches us still percent-encoded (server.c decodes nothing itself). */
static enum MHD_Result scan_include(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
        bool *outputs = cls;
        char k[32], v[64];

        (void) kind;
        if (!value || percent_decode(key, strlen(key), true, k, sizeof(k)) < 0 ||
            percent_decode(value, strlen(value), true, v, sizeof(v)) < 0)
                return MHD_YES;
        if ((strcmp(k, "include") == 0 || strcmp(k, "include[]") == 0) &&
            strcmp(v, "code_interpreter_call.outputs") == 0)
                *outputs = true;
        return MHD_YES;
}

static bool include_outputs(struct api_request *req)
{
        bool outputs = false;

        (void) MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, scan_include, &outputs);
        return outputs;
}

int api_handle_resp_get(struct api_request *req)
{
        const char *stream =
                MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "stream");
        struct chat_gateway_reply g = {};
        int r;

        r = check_on(req);
        if (r <= 0)
                return r;
        if (stream && strcmp(stream, "false") != 0)
                r = chat_gateway_reply_error(&g, 400, "invalid_request_error", "stream",
                                             "stream is not supported here: airlock's responses "
                                             "are complete once created");
        else
                r = responses_get(req->srv->responses, req->params.id, include_outputs(req), &g);
        return r < 0 ? r : reply(req, &g);
}

int api_handle_resp_delete(struct api_request *req)
{
        struct chat_gateway_reply g = {};
        int r;

        r = check_on(req);
        if (r <= 0)
                return r;
        r = responses_delete(req->srv->responses, req->params.id, &g);
        return r < 0 ? r : reply(req, &g);
}

int api_handle_resp_items(struct api_request *req)
{
        struct chat_gateway_reply g = {};
        struct api_list_args args;
        int r;

        r = check_on(req);
        if (r <= 0)
                return r;
        r = api_openai_list_query(req, false, false, &args);
        if (r <= 0)
                return r;
        r = responses_input_items(req->srv->responses, req->params.id, &args.q, &g);
        return r < 0 ? r : reply(req, &g);
}
