/* A streamable HTTP MCP server (hub-internal.h), on libcurl: every message is a POST to the
 * server's URL, answered with JSON or with a Server-Sent Events stream that carries the
 * response (and maybe notifications before it). After initialize, a GET stream listens for
 * what the server sends on its own (tools/list_changed), when the server offers one. The
 * configured headers (an API key...) go to that URL only: redirects are not followed. */
#include "hub-internal.h"

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/util.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CONNECT_TIMEOUT_MS 10000L
#define SESSION_ID_MAX 256
/* Idle easy handles kept for reuse: each keeps its connection to the server alive, so a call
 * does not pay for a new TCP (and TLS) connection. */
#define HANDLES_IDLE_MAX 8
/* How long a response stream may stay open after it carried our answer. */
#define STREAM_END_GRACE_NS (100u * 1000000u)

struct http_conn {
        struct conn base;
        char *name;
        char *url;
        char **headers;
        struct conn_events ev;
        pthread_mutex_t lock; /* session_id, closed, next_id */
        char session_id[SESSION_ID_MAX + 1];
        bool initialized; /* the protocol version header goes on every later request */
        char protocol[32];
        bool closed;
        int64_t next_id;
        CURL *idle[HANDLES_IDLE_MAX]; /* under lock */
        unsigned n_idle;
        /* the GET stream */
        pthread_t listener;
        bool listener_started;
        atomic_bool stop;
};

/* One exchange: the body read so far, parsed as JSON or as SSE events on the fly. */
struct exchange {
        struct http_conn *c;
        int64_t want_id;    /* the response we wait for; 0 = none (the GET stream) */
        json_t *answer;     /* the response to want_id, once it came */
        uint64_t answer_ns; /* when it came (a stream left open is cut shortly after) */
        bool sse;           /* the body is text/event-stream */
        struct buf body;    /* a JSON body, or the SSE bytes not parsed yet */
        struct buf data;    /* the data lines of the SSE event being read */
        size_t scanned;     /* bytes of body already looked at: they hold no newline */
        bool too_big;
        char session_id[SESSION_ID_MAX + 1];
        const atomic_bool *cancel; /* the caller's */
        const atomic_bool *stop;   /* the connection closing */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
        curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void mark_closed(struct http_conn *c, const char *why)
{
        bool first;

        (void) pthread_mutex_lock(&c->lock);
        first = !c->closed;
        c->closed = true;
        (void) pthread_mutex_unlock(&c->lock);
        if (first && c->ev.closed)
                c->ev.closed(c->ev.userdata, why);
}

/* A message that arrived in a body or a stream: our response, a notification, or a request of
 * the server's (which we cannot answer on this channel but ping; see rpc.c). */
static void on_message(struct exchange *x, json_t *msg)
{
        const char *method = json_string_value(json_object_get(msg, "method"));
        json_t *id = json_object_get(msg, "id");

        if (!method) {
                if (x->want_id && json_is_integer(id) && json_integer_value(id) == x->want_id &&
                    !x->answer)
                        x->answer = json_incref(msg);
                return;
        }
        if (!id && x->c->ev.notified)
                x->c->ev.notified(x->c->ev.userdata, method, json_object_get(msg, "params"));
}

static void on_event_data(struct exchange *x)
{
        json_t *msg;

        if (x->data.len == 0)
                return;
        msg = json_loadb(x->data.data, x->data.len, JSON_REJECT_DUPLICATES, NULL);
        x->data.len = 0;
        if (json_is_object(msg))
                on_message(x, msg);
        json_decref(msg);
}

/* Parses the complete lines of the SSE bytes in x->body (the spec's field parsing: data lines
 * are joined with newlines; a blank line ends an event; other fields are ignored). */
static int parse_sse(struct exchange *x)
{
        size_t start = 0;

        /* Only the new bytes: scanning the whole line again at every chunk made a long line
         * (64 MiB without a newline) cost the daemon minutes of CPU, again at every reconnect
         * of the GET stream. */
        for (size_t i = x->scanned; i < x->body.len; i++) {
                char *line = x->body.data + start;
                size_t len;

                if (x->body.data[i] != '\n')
                        continue;
                len = i - start;
                if (len > 0 && line[len - 1] == '\r')
                        len--;
                if (len == 0) {
                        on_event_data(x);
                } else if (len >= 5 && strncmp(line, "data:", 5) == 0) {
                        size_t off = len > 5 && line[5] == ' ' ? 6 : 5;
                        if ((x->data.len > 0 &&
                             buf_append(&x->data, "\n", 1, HUB_MESSAGE_MAX) < 0) ||
                            buf_append(&x->data, line + off, len - off, HUB_MESSAGE_MAX) < 0)
                                return -E2BIG;
                }
                start = i + 1;
        }
        memmove(x->body.data, x->body.data + start, x->body.len - start);
        x->body.len -= start;
        x->scanned = x->body.len;
        return 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct exchange *x = userdata;
        size_t len = size * nmemb;

        if (buf_append(&x->body, data, len, HUB_MESSAGE_MAX) < 0) {
                x->too_big = true;
                return 0;
        }
        if (x->sse) {
                if (parse_sse(x) < 0) {
                        x->too_big = true;
                        return 0;
                }
                /* Our answer came: the server should end the stream now, which keeps the
                 * connection for the next call; one that does not is cut shortly after. */
                if (x->answer && !x->answer_ns)
                        x->answer_ns = now_ns();
        }
        return len;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct exchange *x = userdata;
        size_t len = size * nmemb, n;

        if (len > 13 && strncasecmp(data, "content-type:", 13) == 0)
                x->sse = strstr(data, "text/event-stream") != NULL;
        if (len > 15 && strncasecmp(data, "mcp-session-id:", 15) == 0) {
                const char *v = data + 15;
                while (*v == ' ' || *v == '\t')
                        v++;
                n = (size_t) (data + len - v);
                while (n > 0 && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
                        n--;
                if (n <= SESSION_ID_MAX) {
                        memcpy(x->session_id, v, n);
                        x->session_id[n] = '\0';
                }
        }
        return len;
}

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
        struct exchange *x = userdata;

        (void) dltotal;
        (void) dlnow;
        (void) ultotal;
        (void) ulnow;
        if (x->answer_ns && now_ns() - x->answer_ns > STREAM_END_GRACE_NS)
                return 1;
        return (x->cancel && atomic_load(x->cancel)) || (x->stop && atomic_load(x->stop));
}

/* Sets up a request to the server's URL with its headers, ours, and the session's. */
static struct curl_slist *request_headers(struct http_conn *c, bool post)
{
        struct curl_slist *h = NULL, *n;
        char line[SESSION_ID_MAX + 64];

        n = curl_slist_append(h, post ? "Accept: application/json, text/event-stream"
                                      : "Accept: text/event-stream");
        if (!n)
                return NULL;
        h = n;
        if (post && !(n = curl_slist_append(h, "Content-Type: application/json")))
                goto fail;
        h = n;
        (void) pthread_mutex_lock(&c->lock);
        line[0] = '\0';
        if (c->session_id[0])
                (void) snprintf(line, sizeof(line), "Mcp-Session-Id: %s", c->session_id);
        (void) pthread_mutex_unlock(&c->lock);
        if (line[0] && !(n = curl_slist_append(h, line)))
                goto fail;
        h = n;
        if (c->initialized) {
                (void) snprintf(line, sizeof(line), "MCP-Protocol-Version: %s", c->protocol);
                if (!(n = curl_slist_append(h, line)))
                        goto fail;
                h = n;
        }
        for (char **p = c->headers; p && *p; p++) {
                if (!(n = curl_slist_append(h, *p)))
                        goto fail;
                h = n;
        }
        return h;
fail:
        curl_slist_free_all(h);
        return NULL;
}

static CURL *handle_take(struct http_conn *c)
{
        CURL *curl = NULL;

        (void) pthread_mutex_lock(&c->lock);
        if (c->n_idle > 0)
                curl = c->idle[--c->n_idle];
        (void) pthread_mutex_unlock(&c->lock);
        if (curl) {
                curl_easy_reset(curl); /* the options go, the connection stays */
                return curl;
        }
        return curl_easy_init();
}

static void handle_give_back(struct http_conn *c, CURL *curl)
{
        (void) pthread_mutex_lock(&c->lock);
        if (c->n_idle < HANDLES_IDLE_MAX) {
                c->idle[c->n_idle++] = curl;
                curl = NULL;
        }
        (void) pthread_mutex_unlock(&c->lock);
        if (curl)
                curl_easy_cleanup(curl);
}

/* One HTTP exchange. method NULL: the GET stream. Returns the HTTP status (>= 0) with the
 * transfer's outcome in *ret_code, or -ENOMEM. */
static long perform(struct http_conn *c, const char *body, uint64_t deadline_ns, struct exchange *x,
                    CURLcode *ret_code, const char *custom)
{
        struct curl_slist *h = request_headers(c, body != NULL);
        CURL *curl = handle_take(c);
        long status = 0;

        if (!curl || !h) {
                curl_slist_free_all(h);
                if (curl)
                        curl_easy_cleanup(curl);
                return -ENOMEM;
        }
        (void) curl_easy_setopt(curl, CURLOPT_URL, c->url);
        (void) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
        (void) curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
        (void) curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
        (void) curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
        (void) curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
        (void) curl_easy_setopt(curl, CURLOPT_WRITEDATA, x);
        (void) curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
        (void) curl_easy_setopt(curl, CURLOPT_HEADERDATA, x);
        (void) curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        (void) curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        (void) curl_easy_setopt(curl, CURLOPT_XFERINFODATA, x);
        if (body) {
                (void) curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
                (void) curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
        }
        if (custom)
                (void) curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, custom);
        if (deadline_ns) {
                uint64_t now = now_ns();
                long ms = deadline_ns > now ? (long) ((deadline_ns - now) / 1000000u) + 1 : 1;
                (void) curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, ms);
        }
        *ret_code = curl_easy_perform(curl);
        (void) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        /* A transfer cut short (our answer came in a stream that goes on, a cancel) closes
         * its connection; the handle is still fine to reuse. */
        handle_give_back(c, curl);
        curl_slist_free_all(h);
        return status;
}

static void exchange_done(struct exchange *x)
{
        json_decref(x->answer);
        buf_done(&x->body);
        buf_done(&x->data);
}

/* Sends one JSON-RPC message; for a request (id > 0), waits for its answer. */
static int send_message(struct http_conn *c, json_t *msg, int64_t id, uint64_t deadline_ns,
                        const atomic_bool *cancel, json_t **ret_answer, struct airlock_error *err)
{
        _cleanup_free_ char *body = json_dump_text(msg, JSON_COMPACT, NULL);
        struct exchange x = { .c = c, .want_id = id, .cancel = cancel, .stop = &c->stop };
        CURLcode code = CURLE_OK;
        long status;
        int r = 0;

        if (!body)
                return -ENOMEM;
        status = perform(c, body, deadline_ns, &x, &code, NULL);
        if (status < 0) {
                exchange_done(&x);
                return (int) status;
        }
        if (x.session_id[0]) {
                (void) pthread_mutex_lock(&c->lock);
                memcpy(c->session_id, x.session_id, sizeof(c->session_id));
                (void) pthread_mutex_unlock(&c->lock);
        }
        if (!x.sse && x.body.len > 0 && status >= 200 && status < 300) {
                json_t *m = json_loadb(x.body.data, x.body.len, JSON_REJECT_DUPLICATES, NULL);
                if (json_is_object(m))
                        on_message(&x, m);
                json_decref(m);
        }
        if (x.answer) {
                *ret_answer = TAKE_PTR(x.answer);
        } else if (cancel && atomic_load(cancel)) {
                r = airlock_error_set(err, -ECANCELED, "the call was cancelled");
        } else if (atomic_load(&c->stop)) {
                r = airlock_error_set(err, -EHOSTDOWN, "the connection to the server was closed");
        } else if (code == CURLE_OPERATION_TIMEDOUT) {
                r = -ETIMEDOUT;
        } else if (x.too_big) {
                r = airlock_error_set(err, -EPROTO, "the server sent a message larger than %u MiB",
                                      HUB_MESSAGE_MAX >> 20);
        } else if (code != CURLE_OK && code != CURLE_WRITE_ERROR) {
                r = airlock_error_set(err, -EHOSTDOWN, "cannot reach %s: %s", c->url,
                                      curl_easy_strerror(code));
                mark_closed(c, err ? err->msg : "the server cannot be reached");
        } else if (status == 404 && c->session_id[0]) {
                r = airlock_error_set(err, -EHOSTDOWN,
                                      "the server no longer knows our MCP session (HTTP 404)");
                mark_closed(c, err ? err->msg : "session expired");
        } else if (status < 200 || status >= 300) {
                r = airlock_error_set(err, -EHOSTDOWN, "%s answered HTTP %ld", c->url, status);
                if (id > 0 && (status == 401 || status == 403 || status >= 500))
                        mark_closed(c, err ? err->msg : "HTTP error");
        } else if (id > 0) {
                r = airlock_error_set(err, -EPROTO,
                                      "the server's answer held no response to "
                                      "our request");
        }
        exchange_done(&x);
        return r;
}

static bool is_closed(struct http_conn *c)
{
        bool closed;

        (void) pthread_mutex_lock(&c->lock);
        closed = c->closed;
        (void) pthread_mutex_unlock(&c->lock);
        return closed;
}

static int http_request(struct conn *base, const char *method, json_t *params, uint64_t deadline_ns,
                        const atomic_bool *cancel, json_t **ret_result, struct airlock_error *err)
{
        struct http_conn *c = (struct http_conn *) base;
        json_t *msg, *answer = NULL;
        int64_t id;
        int r;

        if (is_closed(c))
                return airlock_error_set(err, -EHOSTDOWN, "the connection to %s is closed", c->url);
        (void) pthread_mutex_lock(&c->lock);
        id = c->next_id++;
        (void) pthread_mutex_unlock(&c->lock);
        msg = json_pack("{s:s, s:I, s:s, s:O*}", "jsonrpc", "2.0", "id", (json_int_t) id, "method",
                        method, "params", params);
        if (!msg)
                return -ENOMEM;
        r = send_message(c, msg, id, deadline_ns, cancel, &answer, err);
        json_decref(msg);
        if (r == -ETIMEDOUT || r == -ECANCELED) {
                json_t *n =
                        json_pack("{s:s, s:s, s:{s:I, s:s}}", "jsonrpc", "2.0", "method",
                                  "notifications/cancelled", "params", "requestId", (json_int_t) id,
                                  "reason", r == -ETIMEDOUT ? "timeout" : "cancelled");
                json_t *ignored = NULL;
                if (n)
                        (void) send_message(c, n, 0, now_ns() + 2000000000ull, NULL, &ignored,
                                            NULL);
                json_decref(n);
        }
        if (r < 0)
                return r;
        if (strcmp(method, "initialize") == 0) {
                const char *v = json_string_value(
                        json_object_get(json_object_get(answer, "result"), "protocolVersion"));
                (void) snprintf(c->protocol, sizeof(c->protocol), "%s",
                                v ? v : HUB_PROTOCOL_VERSION);
        }
        r = rpc_response_result(answer, ret_result, err);
        json_decref(answer);
        return r;
}

static void *listener_main(void *userdata);

static int http_notify(struct conn *base, const char *method, json_t *params)
{
        struct http_conn *c = (struct http_conn *) base;
        json_t *msg =
                json_pack("{s:s, s:s, s:o*}", "jsonrpc", "2.0", "method", method, "params", params);
        json_t *ignored = NULL;
        int r;

        if (!msg)
                return -ENOMEM;
        r = send_message(c, msg, 0, now_ns() + 10000000000ull, NULL, &ignored, NULL);
        json_decref(msg);
        if (strcmp(method, "notifications/initialized") == 0 && r == 0) {
                c->initialized = true;
                if (pthread_create(&c->listener, NULL, listener_main, c) == 0)
                        c->listener_started = true;
        }
        return r;
}

/* The GET stream: what the server says on its own. A server without one answers 405; one that
 * drops it is asked again after a second, while the connection lives. When asking again finds
 * the server gone, or restarted (it no longer knows our session: 404), the connection is
 * closed at once, so that the hub reconnects now rather than fail the next call. */
static void *listener_main(void *userdata)
{
        struct http_conn *c = userdata;
        bool streamed = false;

        while (!atomic_load(&c->stop) && !is_closed(c)) {
                struct exchange x = { .c = c, .sse = true, .stop = &c->stop };
                CURLcode code = CURLE_OK;
                long status = perform(c, NULL, 0, &x, &code, NULL);
                char why[256];

                exchange_done(&x);
                if (atomic_load(&c->stop))
                        break;
                /* Only once a stream was open: a server that never had one (and answers 404
                 * where the spec says 405) must not be reconnected forever. */
                if (status == 404 && streamed) {
                        mark_closed(c, "the server no longer knows our MCP session (HTTP 404)");
                        break;
                }
                if (status == 0 && code == CURLE_COULDNT_CONNECT) {
                        (void) snprintf(why, sizeof(why), "cannot reach %s: %s", c->url,
                                        curl_easy_strerror(code));
                        mark_closed(c, why);
                        break;
                }
                if (status != 200) {
                        log_debug("mcp_server=%s msg=\"no notification stream (HTTP %ld)\"",
                                  c->name, status);
                        break;
                }
                streamed = true;
                for (int i = 0; i < 10 && !atomic_load(&c->stop); i++)
                        (void) usleep(100000);
        }
        return NULL;
}

static pid_t http_pid(struct conn *base)
{
        (void) base;
        return 0;
}

static void http_abort(struct conn *base, const char *why)
{
        struct http_conn *c = (struct http_conn *) base;

        atomic_store(&c->stop, true);
        mark_closed(c, why);
}

static void http_close(struct conn *base)
{
        struct http_conn *c = (struct http_conn *) base;

        if (!c)
                return;
        atomic_store(&c->stop, true);
        if (c->listener_started)
                (void) pthread_join(c->listener, NULL);
        if (c->session_id[0]) {
                /* The spec's goodbye: the server may drop our session now. */
                struct exchange x = { .c = c };
                CURLcode code;
                (void) perform(c, NULL, now_ns() + 2000000000ull, &x, &code, "DELETE");
                exchange_done(&x);
        }
        mark_closed(c, "the connection was closed");
        while (c->n_idle > 0)
                curl_easy_cleanup(c->idle[--c->n_idle]);
        free(c->name);
        free(c->url);
        strv_free(c->headers);
        (void) pthread_mutex_destroy(&c->lock);
        free(c);
}

static const struct conn_ops http_ops = {
        .request = http_request,
        .notify = http_notify,
        .pid = http_pid,
        .abort = http_abort,
        .close = http_close,
};

int conn_http_open(const struct server_config *s, const struct conn_events *ev,
                   struct conn **ret_conn, struct airlock_error *err)
{
        struct http_conn *c;
        size_t n = 0;

        (void) pthread_once(&curl_once, curl_init_once);
        if (curl_init_code != CURLE_OK)
                return airlock_error_set(err, -ENOMEM, "libcurl could not be initialised");
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->base.ops = &http_ops;
        c->ev = *ev;
        c->next_id = 1;
        (void) pthread_mutex_init(&c->lock, NULL);
        c->name = strdup(s->name);
        c->url = strdup(s->url);
        for (char **p = s->headers; p && *p; p++)
                n++;
        c->headers = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; c->headers && i < n; i++)
                if (!(c->headers[i] = strdup(s->headers[i]))) {
                        strv_free(c->headers);
                        c->headers = NULL;
                }
        if (!c->name || !c->url || !c->headers) {
                c->closed = true;
                http_close(&c->base);
                return -ENOMEM;
        }
        *ret_conn = &c->base;
        return 0;
}
