/* Forwarding a request to the node its id names: see forward.h. A thread of its own runs the
 * peer's transfer (libcurl); the handler waits for the peer's answer head, then hands the body
 * over to libmicrohttpd's content reader through a reply queue (reply-queue.h), as the streamed
 * execute does: the reader never blocks the event thread, a slow client makes the transfer wait
 * (the queue is bounded), and a client that leaves ends the transfer. */
#include "forward.h"

#include "api-internal.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/node-id.h"
#include "chat/gateway.h"
#include "e2b/e2b.h"
#include "reply-queue.h"
#include "session/session.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define FORWARD_QUEUE_MAX (1u << 20) /* answer bytes waiting for a slow client */
#define FORWARD_BLOCK_SIZE 65536
#define FORWARD_POLL_MS 250
/* How long the answer's head may take: a GET, HEAD or DELETE is answered at once; a POST may
 * run a cell first (a plain execute answers when it ends): the longest cell, and a minute. */
#define FORWARD_QUICK_MS 10000
#define FORWARD_LONG_MS (SESSION_TIMEOUT_MAX_MS + 60u * 1000u)

/* ---- where a request goes ------------------------------------------------------------------ */

/* The node named by an id with prefix and fixed_len characters of its own (the prefix
 * included). Returns 1 with node set, 0 when it is not such an id (the handler says what is
 * wrong with it) or it has no node. */
static int id_node(const char *id, const char *prefix, size_t fixed_len,
                   char node[NODE_NAME_MAX + 1])
{
        size_t n = strlen(prefix);

        if (!id || strncmp(id, prefix, n) != 0)
                return 0;
        return node_id_split(id, fixed_len, node) == 1 ? 1 : 0;
}

/* The node of an E2B sandboxID (maybe with an older SDK's "-clientID" after it). */
static int e2b_node(const char *id, char node[NODE_NAME_MAX + 1])
{
        char sid[E2B_SESSION_ID_MAX + 1];

        if (!id || e2b_session_id(id, sid) < 0)
                return 0;
        return session_id_parse(sid, node) == 1 ? 1 : 0;
}

static bool starts(const char *s, const char *prefix)
{
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The node the request's path or headers name, from what each router reads its id from. */
static int request_node(struct api_request *req, char node[NODE_NAME_MAX + 1])
{
        const char *p = req->raw_path, *id = req->params.has_id ? req->params.id : NULL;

        if (starts(p, "/v1/sessions/"))
                return id_node(id, "s-", SESSION_ID_LEN, node);
        if (starts(p, "/v1/containers/"))
                return id_node(id, OPENAI_CONTAINER_PREFIX, OPENAI_CONTAINER_ID_LEN, node);
        if (starts(p, "/v1/files/"))
                return id_node(id, OPENAI_FILE_PREFIX, OPENAI_FILE_ID_LEN, node);
        if (starts(p, "/v1/responses/"))
                return id_node(id, "resp_", 5 + OPENAI_ID_HEX, node);
        if (starts(p, "/e2b/api/"))
                return e2b_node(id, node);
        if (starts(p, "/e2b/sandbox/"))
                return e2b_node(api_header(req, "E2b-Sandbox-Id"), node);
        if (strcmp(p, "/mcp") == 0 || strcmp(p, "/mcp/") == 0)
                return id_node(api_header(req, "Mcp-Session-Id"), "mcp-", 4 + 32, node);
        return 0;
}

/* An error of forwarding in the shape of the surface asked: MCP's JSON-RPC error on /mcp, else
 * the server's own (native, OpenAI's or E2B's: reply.c decides by the path). */
static int forward_error(struct api_request *req, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int forward_error(struct api_request *req, unsigned status, const char *fmt, ...)
{
        const char *retry = status == MHD_HTTP_SERVICE_UNAVAILABLE ? FORWARD_RETRY_AFTER : NULL;
        char msg[768];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (starts(req->raw_path, "/mcp"))
                return api_reply_json_header(
                        req, status,
                        json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error",
                                  "code", status == MHD_HTTP_NOT_FOUND ? -32001 : -32000, "message",
                                  msg),
                        retry ? "Retry-After" : NULL, retry);
        return api_reply_error_header(req, status, retry ? "Retry-After" : NULL, retry, "%s", msg);
}

/* The decision for a node name found in the request. */
static int decide(struct api_request *req, const char *node)
{
        const struct node_peer *peer;
        int r;

        if (node_is_self(node))
                return 0;
        if (api_header(req, FORWARDED_BY_HEADER)) {
                /* Forwarded once already: the sender thought it was here. Never again, or two
                 * nodes with different peer lists could pass it back and forth. */
                r = forward_error(req, MHD_HTTP_NOT_FOUND,
                                  "'%s' belongs to node %s, which is not on this node (%s); a "
                                  "forwarded request is not forwarded again",
                                  req->params.has_id ? req->params.id : "the id", node,
                                  node_self());
                return r < 0 ? r : 2;
        }
        peer = node_peer_find(node);
        if (!peer) {
                /* Never an address taken from an id: only --peers says where a node is. */
                r = forward_error(req, MHD_HTTP_NOT_FOUND,
                                  "no node named '%s' is in this cluster: the id is not one this "
                                  "cluster made (its nodes are this one, %s, and those of "
                                  "--peers)",
                                  node, node_self());
                return r < 0 ? r : 2;
        }
        req->forward = peer;
        return 1;
}

int api_forward_decide(struct api_request *req)
{
        char node[NODE_NAME_MAX + 1];

        /* A single daemon, or a request with no node in its id: nothing more to do. */
        if (!node_self() || request_node(req, node) <= 0)
                return 0;
        return decide(req, node);
}

int api_forward_for_id(struct api_request *req, const char *id, size_t fixed_len)
{
        char node[NODE_NAME_MAX + 1];
        int r;

        if (!node_self() || !id || node_id_split(id, fixed_len, node) != 1)
                return 0;
        r = decide(req, node);
        if (r != 1)
                return r;
        r = api_forward_run(req);
        return r < 0 ? r : 1;
}

int api_forward_for_body_id(struct api_request *req, const char *id)
{
        static const char *const prefixes[] = { "resp_", "cntr_", "s-", "call_", "mcpr_", "fc_" };

        if (!node_self() || !id)
                return 0;
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
                if (starts(id, prefixes[i]))
                        return api_forward_for_id(req, id, strlen(prefixes[i]) + OPENAI_ID_HEX);
        return 0;
}

int api_forward_for_body(struct api_request *req, const json_t *body)
{
        static const char *const item_ids[] = { "call_id", "approval_request_id", "tool_call_id" };
        const struct node_peer *peers;
        const json_t *list, *x;
        size_t i;
        int r;

        if (!node_self() || node_peers(&peers) == 0)
                return 0;
        r = api_forward_for_body_id(
                req, json_string_value(json_object_get(body, "previous_response_id")));
        if (r == 0)
                r = api_forward_for_body_id(req, api_header(req, CHAT_GATEWAY_SESSION_HEADER));
        list = json_object_get(body, "tools");
        json_array_foreach (list, i, x) {
                if (r != 0)
                        return r;
                r = api_forward_for_body_id(req,
                                            json_string_value(json_object_get(x, "container")));
        }
        /* Responses' input items, chat's messages: the ids of calls being answered. */
        list = json_object_get(body, "input");
        if (!json_is_array(list))
                list = json_object_get(body, "messages");
        json_array_foreach (list, i, x) {
                for (size_t k = 0; k < sizeof(item_ids) / sizeof(item_ids[0]) && r == 0; k++)
                        r = api_forward_for_body_id(
                                req, json_string_value(json_object_get(x, item_ids[k])));
                if (r != 0)
                        return r;
        }
        return r;
}

/* ---- the transfer -------------------------------------------------------------------------- */

struct forward {
        pthread_mutex_t lock;
        pthread_cond_t cond;  /* any change below */
        struct reply_queue q; /* the answer's body; q.conn NULL once the reply is gone */
        bool head_done;       /* the peer's status and headers are in */
        bool done;            /* the transfer ended */
        bool closed;          /* nobody reads the answer any more: end the transfer */
        bool cut;             /* the transfer failed after the head: the reply ends in error */
        long status;
        long long length;        /* the answer's Content-Length, -1 when it has none */
        struct curl_slist *head; /* the answer's headers to pass on, "Name: value" */
        CURLcode rc;
        char errbuf[CURL_ERROR_SIZE];
        int client_fd;
        unsigned refs; /* the handler (then the reply), the transfer's thread */

        CURL *curl;
        struct curl_slist *send; /* the request's headers */
        char *body;
        size_t body_len;
        char url[NODE_HOST_MAX + ROUTE_PATH_MAX * 3 + 64];
        char node[NODE_NAME_MAX + 1];
        bool saw_accept, saw_type;
};

static void forward_release(struct forward *f)
{
        bool last;

        pthread_mutex_lock(&f->lock);
        last = --f->refs == 0;
        pthread_mutex_unlock(&f->lock);
        if (!last)
                return;
        if (f->curl)
                curl_easy_cleanup(f->curl);
        curl_slist_free_all(f->send);
        curl_slist_free_all(f->head);
        reply_queue_done(&f->q);
        free(f->body);
        pthread_cond_destroy(&f->cond);
        pthread_mutex_destroy(&f->lock);
        free(f);
}

static bool client_gone(int fd)
{
        struct pollfd p = { .fd = fd, .events = POLLRDHUP };

        if (fd < 0)
                return false;
        return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Under the lock: notices a client that went away while the reply still holds it. */
static bool closed_locked(struct forward *f)
{
        if (!f->closed && f->q.conn && client_gone(f->client_fd))
                f->closed = true;
        return f->closed;
}

static bool is_hop_header(const char *name, size_t len)
{
        static const char *const hop[] = { "Connection",
                                           "Keep-Alive",
                                           "Transfer-Encoding",
                                           "Content-Length",
                                           "Date",
                                           "Upgrade",
                                           "X-Request-Id",
                                           "Cache-Control",
                                           "Trailer",
                                           "X-Content-Type-Options",
                                           "Proxy-Connection" };

        for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
                if (strlen(hop[i]) == len && strncasecmp(name, hop[i], len) == 0)
                        return true;
        return false;
}

static size_t on_head(char *data, size_t size, size_t n, void *userdata)
{
        struct forward *f = userdata;
        size_t len = size * n, k = len;
        const char *colon;
        char line[8192];
        long code = 0;

        while (k > 0 && (data[k - 1] == '\n' || data[k - 1] == '\r'))
                k--;
        pthread_mutex_lock(&f->lock);
        if (k >= 5 && strncmp(data, "HTTP/", 5) == 0) {
                /* A new answer (after a 100 Continue): its own headers only. */
                curl_slist_free_all(f->head);
                f->head = NULL;
                f->length = -1;
        } else if (k > 15 && strncasecmp(data, "Content-Length:", 15) == 0) {
                char *end;
                long long v;

                errno = 0;
                v = strtoll(data + 15, &end, 10);
                if (errno == 0 && v >= 0 && end > data + 15)
                        f->length = v;
        } else if (k == 0) {
                (void) curl_easy_getinfo(f->curl, CURLINFO_RESPONSE_CODE, &code);
                if (code >= 200) {
                        f->status = code;
                        f->head_done = true;
                        pthread_cond_broadcast(&f->cond);
                }
        } else if ((colon = memchr(data, ':', k)) &&
                   !is_hop_header(data, (size_t) (colon - data)) && k < sizeof(line)) {
                struct curl_slist *l;

                memcpy(line, data, k);
                line[k] = '\0';
                l = curl_slist_append(f->head, line);
                if (l)
                        f->head = l;
        }
        pthread_mutex_unlock(&f->lock);
        return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
        struct forward *f = userdata;
        size_t len = size * n;
        struct timespec deadline;

        pthread_mutex_lock(&f->lock);
        /* Back-pressure: the peer's answer waits for the client rather than piling up. */
        while (f->q.queued > FORWARD_QUEUE_MAX && !closed_locked(f)) {
                (void) clock_gettime(CLOCK_MONOTONIC, &deadline);
                deadline.tv_nsec += FORWARD_POLL_MS * 1000000L;
                if (deadline.tv_nsec >= 1000000000L) {
                        deadline.tv_sec++;
                        deadline.tv_nsec -= 1000000000L;
                }
                (void) pthread_cond_timedwait(&f->cond, &f->lock, &deadline);
        }
        if (f->closed) {
                pthread_mutex_unlock(&f->lock);
                return 0; /* ends the transfer */
        }
        (void) reply_queue_push_locked(&f->q, (struct iovec[]){ { data, len } }, 1);
        pthread_mutex_unlock(&f->lock);
        return len;
}

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
        struct forward *f = userdata;
        bool stop;

        (void) dltotal, (void) dlnow, (void) ultotal, (void) ulnow;
        pthread_mutex_lock(&f->lock);
        stop = closed_locked(f);
        pthread_mutex_unlock(&f->lock);
        return stop ? 1 : 0;
}

static void *forward_thread(void *userdata)
{
        struct forward *f = userdata;
        CURLcode rc = curl_easy_perform(f->curl);

        pthread_mutex_lock(&f->lock);
        f->rc = rc;
        f->done = true;
        if (rc != CURLE_OK)
                f->cut = true;
        pthread_cond_broadcast(&f->cond);
        if (f->head_done)
                reply_queue_wake_locked(&f->q);
        pthread_mutex_unlock(&f->lock);
        forward_release(f);
        return NULL;
}

static ssize_t forward_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct forward *f = cls;
        bool took;
        ssize_t n;

        (void) pos;
        pthread_mutex_lock(&f->lock);
        n = reply_queue_read_locked(&f->q, buf, max, f->done && !f->cut,
                                    f->closed || (f->done && f->cut), &took);
        if (took)
                pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->lock);
        return n;
}

static void forward_reply_gone(void *userdata)
{
        struct forward *f = userdata;

        pthread_mutex_lock(&f->lock);
        f->closed = true;
        f->q.conn = NULL;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->lock);
        forward_release(f);
}

/* ---- the request to the peer --------------------------------------------------------------- */

static int add_send(struct forward *f, const char *line)
{
        struct curl_slist *l = curl_slist_append(f->send, line);

        if (!l)
                return -ENOMEM;
        f->send = l;
        return 0;
}

/* X-Forwarded-For is replaced by the client this node saw (forward_setup()): the peer may
 * trust this node as a proxy, and a client's own claim is not this node's word. */
static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
        static const char *const skip[] = { "Host",
                                            "Content-Length",
                                            "Transfer-Encoding",
                                            "Connection",
                                            "Keep-Alive",
                                            "Expect",
                                            "TE",
                                            "Upgrade",
                                            "Proxy-Connection",
                                            "X-Forwarded-For",
                                            FORWARDED_BY_HEADER };
        struct forward *f = cls;
        char line[8192];

        (void) kind;
        for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
                if (strcasecmp(key, skip[i]) == 0)
                        return MHD_YES;
        if (strcasecmp(key, "Accept") == 0)
                f->saw_accept = true;
        if (strcasecmp(key, "Content-Type") == 0)
                f->saw_type = true;
        if ((size_t) snprintf(line, sizeof(line), "%s: %s", key, value ? value : "") >=
            sizeof(line))
                return MHD_YES;
        return add_send(f, line) < 0 ? MHD_NO : MHD_YES;
}

struct query {
        char *buf;
        size_t size, len;
        bool overflow;
};

/* The query string again, as sent: the server does not decode values (server.c). */
static enum MHD_Result copy_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
        struct query *q = cls;
        int k;

        (void) kind;
        k = snprintf(q->buf + q->len, q->size - q->len, "%s%s%s%s", q->len ? "&" : "?", key,
                     value ? "=" : "", value ? value : "");
        if (k < 0 || (size_t) k >= q->size - q->len) {
                q->overflow = true;
                return MHD_NO;
        }
        /* libmicrohttpd turned each '+' into ' ' (an escaped one stays "%2B"): '+' again, as
         * sent. A space has no place in a URL (libcurl refuses it). */
        for (size_t i = q->len; i < q->len + (size_t) k; i++)
                if (q->buf[i] == ' ')
                        q->buf[i] = '+';
        q->len += (size_t) k;
        return MHD_YES;
}

int api_forward_url(struct api_request *req, const char *addr, char *buf, size_t size)
{
        struct query q = { .buf = (char[ROUTE_PATH_MAX * 2]){ 0 }, .size = ROUTE_PATH_MAX * 2 };
        int k;

        (void) MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, copy_arg, &q);
        if (q.overflow)
                return -E2BIG;
        k = snprintf(buf, size, "http://%s%s%s", addr, req->raw_path, q.len ? q.buf : "");
        if (k < 0 || (size_t) k >= size)
                return -E2BIG;
        return 0;
}

void api_forward_client_header(struct api_request *req, char *buf, size_t size)
{
        char addr[INET6_ADDRSTRLEN + 8];

        api_client_address(req, addr, sizeof(addr));
        (void) snprintf(buf, size, "X-Forwarded-For: %s", addr);
}

static int forward_setup(struct forward *f, struct api_request *req)
{
        char line[NODE_NAME_MAX + INET6_ADDRSTRLEN + 64];
        const char *m = req->method;
        int r;

        r = api_forward_url(req, req->forward->addr, f->url, sizeof(f->url));
        if (r < 0)
                return r;
        if (MHD_get_connection_values(req->conn, MHD_HEADER_KIND, copy_header, f) < 0 || !f->send)
                return -ENOMEM;
        (void) snprintf(line, sizeof(line), FORWARDED_BY_HEADER ": %s", node_self());
        if (add_send(f, line) < 0)
                return -ENOMEM;
        api_forward_client_header(req, line, sizeof(line));
        if (add_send(f, line) < 0 || add_send(f, "Expect:") < 0 ||
            (!f->saw_accept && add_send(f, "Accept:") < 0) ||
            (!f->saw_type && add_send(f, "Content-Type:") < 0))
                return -ENOMEM;

        f->curl = curl_easy_init();
        if (!f->curl)
                return -ENOMEM;
        (void) curl_easy_setopt(f->curl, CURLOPT_URL, f->url);
        /* Plain HTTP to an address of --peers, nothing else: no redirects, no other scheme. */
        (void) curl_easy_setopt(f->curl, CURLOPT_PROTOCOLS_STR, "http");
        (void) curl_easy_setopt(f->curl, CURLOPT_FOLLOWLOCATION, 0L);
        (void) curl_easy_setopt(f->curl, CURLOPT_NOPROXY, "*");
        (void) curl_easy_setopt(f->curl, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(f->curl, CURLOPT_CONNECTTIMEOUT_MS,
                                (long) FORWARD_CONNECT_TIMEOUT_MS);
        /* A cell may be silent for an hour, so no read timeout here: TCP keepalive finds a
         * peer whose machine went away without a word (no FIN, no RST) in about two minutes
         * instead, and the transfer ends rather than hold its client until the cell's limit. */
        (void) curl_easy_setopt(f->curl, CURLOPT_TCP_KEEPALIVE, 1L);
        (void) curl_easy_setopt(f->curl, CURLOPT_TCP_KEEPIDLE, 30L);
        (void) curl_easy_setopt(f->curl, CURLOPT_TCP_KEEPINTVL, 10L);
        (void) curl_easy_setopt(f->curl, CURLOPT_HTTPHEADER, f->send);
        (void) curl_easy_setopt(f->curl, CURLOPT_HEADERFUNCTION, on_head);
        (void) curl_easy_setopt(f->curl, CURLOPT_HEADERDATA, f);
        (void) curl_easy_setopt(f->curl, CURLOPT_WRITEFUNCTION, on_body);
        (void) curl_easy_setopt(f->curl, CURLOPT_WRITEDATA, f);
        (void) curl_easy_setopt(f->curl, CURLOPT_NOPROGRESS, 0L);
        (void) curl_easy_setopt(f->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        (void) curl_easy_setopt(f->curl, CURLOPT_XFERINFODATA, f);
        (void) curl_easy_setopt(f->curl, CURLOPT_ERRORBUFFER, f->errbuf);
        (void) curl_easy_setopt(f->curl, CURLOPT_HTTP_CONTENT_DECODING, 0L);
        (void) curl_easy_setopt(f->curl, CURLOPT_HTTP_TRANSFER_DECODING, 1L);
        if (strcmp(m, "HEAD") == 0)
                (void) curl_easy_setopt(f->curl, CURLOPT_NOBODY, 1L);
        else if (strcmp(m, "GET") != 0 || f->body_len > 0) {
                (void) curl_easy_setopt(f->curl, CURLOPT_POSTFIELDS, f->body ? f->body : "");
                (void) curl_easy_setopt(f->curl, CURLOPT_POSTFIELDSIZE_LARGE,
                                        (curl_off_t) f->body_len);
                (void) curl_easy_setopt(f->curl, CURLOPT_CUSTOMREQUEST, m);
        }
        return 0;
}

/* The 503 of a peer that cannot be reached. */
static int reply_unreachable(struct api_request *req, const char *node, const char *why)
{
        log_warn("req=%s node=%s msg=\"cannot forward to node %s: %s\"", req->id, node, node, why);
        return forward_error(req, MHD_HTTP_SERVICE_UNAVAILABLE,
                             "node %s is unreachable: %s; its sessions come back when it does",
                             node, why);
}

static void curl_init_once(void)
{
        (void) curl_global_init(CURL_GLOBAL_DEFAULT);
}

void api_curl_init(void)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;

        (void) pthread_once(&once, curl_init_once);
}

int api_forward_run(struct api_request *req)
{
        const union MHD_ConnectionInfo *ci;
        const struct curl_slist *h;
        struct MHD_Response *resp;
        struct timespec deadline;
        pthread_condattr_t attr;
        pthread_attr_t detached;
        struct forward *f;
        pthread_t thread;
        unsigned wait_ms;
        char why[CURL_ERROR_SIZE + 64];
        int r;

        api_curl_init();
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        pthread_mutex_init(&f->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&f->cond, &attr);
        pthread_condattr_destroy(&attr);
        reply_queue_init(&f->q, req->srv, req->conn);
        ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        f->client_fd = ci ? ci->connect_fd : -EBADF;
        (void) snprintf(f->node, sizeof(f->node), "%s", req->forward->name);
        /* The body goes with the transfer, which may outlive the request. */
        f->body = TAKE_PTR(req->body);
        f->body_len = req->body_len;
        req->body_len = req->body_size = 0;
        f->refs = 1;
        f->length = -1;

        r = forward_setup(f, req);
        if (r < 0) {
                forward_release(f);
                if (r == -E2BIG)
                        return api_reply_error(req, MHD_HTTP_URI_TOO_LONG, "path",
                                               "the request is too long to forward to node %s",
                                               req->forward->name);
                return r;
        }
        log_debug("req=%s msg=\"forwarded to node %s (%s)\"", req->id, f->node, req->forward->addr);

        f->refs = 2; /* this handler, then the reply; the transfer */
        pthread_attr_init(&detached);
        pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&thread, &detached, forward_thread, f);
        pthread_attr_destroy(&detached);
        if (r < 0) {
                f->refs = 1;
                forward_release(f);
                return r;
        }

        wait_ms = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0 ||
                                  strcmp(req->method, "DELETE") == 0
                          ? FORWARD_QUICK_MS
                          : FORWARD_LONG_MS;
        (void) clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += wait_ms / 1000;
        pthread_mutex_lock(&f->lock);
        while (!f->head_done && !f->done && !closed_locked(f))
                if (pthread_cond_timedwait(&f->cond, &f->lock, &deadline) == ETIMEDOUT)
                        break;
        if (!f->head_done) {
                /* No answer: this reply is the handler's own, the transfer ends. */
                bool timed_out = !f->done && !f->closed;

                f->closed = true;
                f->q.conn = NULL;
                if (timed_out)
                        (void) snprintf(why, sizeof(why), "no answer within %u s", wait_ms / 1000);
                else if (f->done)
                        (void) snprintf(why, sizeof(why), "%s",
                                        f->errbuf[0] ? f->errbuf : curl_easy_strerror(f->rc));
                else
                        (void) snprintf(why, sizeof(why), "the client went away");
                pthread_mutex_unlock(&f->lock);
                forward_release(f);
                return reply_unreachable(req, req->forward->name, why);
        }
        pthread_mutex_unlock(&f->lock);

        /* From here the reply owns the handler's reference: MHD calls forward_reply_gone()
         * when it is done with it, also when queueing fails. A HEAD's answer has a length and
         * no body: of unknown size, libmicrohttpd would send it chunked with the closing
         * "0" chunk, a body where none may be, which the next answer on the connection (a
         * front door's reused one, another client's) would be read from. */
        resp = MHD_create_response_from_callback(strcmp(req->method, "HEAD") != 0 ? MHD_SIZE_UNKNOWN
                                                 : f->length >= 0 ? (uint64_t) f->length
                                                                  : 0,
                                                 FORWARD_BLOCK_SIZE, forward_read, f,
                                                 forward_reply_gone);
        if (!resp) {
                forward_reply_gone(f);
                return -ENOMEM;
        }
        pthread_mutex_lock(&f->lock);
        for (h = f->head; h; h = h->next) {
                char name[256];
                const char *colon = strchr(h->data, ':'), *value;
                size_t n = colon ? (size_t) (colon - h->data) : 0;

                if (!colon || n >= sizeof(name))
                        continue;
                memcpy(name, h->data, n);
                name[n] = '\0';
                value = colon + 1 + strspn(colon + 1, " \t");
                (void) MHD_add_response_header(resp, name, value);
        }
        pthread_mutex_unlock(&f->lock);
        (void) MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        return api_reply_response(req, (unsigned) f->status, resp);
}
