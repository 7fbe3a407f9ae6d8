/* The lists of every node, merged: see cluster-list.h. The peers are asked in parallel with
 * one libcurl multi handle, on the handler's worker, for CLUSTER_LIST_TIMEOUT_MS at most. */
#include "cluster-list.h"

#include "api-internal.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/node-id.h"
#include "forward.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PEER_LIST_MAX (64u << 20) /* bytes of one peer's answer */

struct peer_query {
        const struct node_peer *peer;
        CURL *h;
        struct curl_slist *headers;
        struct buf answer;
        bool too_big;
        bool answered; /* its transfer ended, well or not */
        char url[NODE_HOST_MAX + ROUTE_PATH_MAX * 3 + 64];
        char err[CURL_ERROR_SIZE];
};

static size_t on_data(char *data, size_t size, size_t n, void *userdata)
{
        struct peer_query *q = userdata;
        int r = buf_append(&q->answer, data, size * n, PEER_LIST_MAX - 1);

        if (r == -E2BIG)
                q->too_big = true;
        return r < 0 ? 0 : size * n;
}

static int query_setup(struct peer_query *q, struct api_request *req)
{
        const char *copy[] = { MHD_HTTP_HEADER_AUTHORIZATION, "X-API-KEY" };
        char line[8192];
        int r;

        r = api_forward_url(req, q->peer->addr, q->url, sizeof(q->url));
        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof(copy) / sizeof(copy[0]); i++) {
                const char *v = api_header(req, copy[i]);

                if (v && (size_t) snprintf(line, sizeof(line), "%s: %s", copy[i], v) < sizeof(line))
                        q->headers = curl_slist_append(q->headers, line);
        }
        (void) snprintf(line, sizeof(line), FORWARDED_BY_HEADER ": %s", node_self());
        q->headers = curl_slist_append(q->headers, line);
        api_forward_client_header(req, line, sizeof(line));
        q->headers = curl_slist_append(q->headers, line);
        q->headers = curl_slist_append(q->headers, PEER_QUERY_HEADER ": local");
        q->headers = curl_slist_append(q->headers, "Accept: application/json");
        q->h = curl_easy_init();
        if (!q->h || !q->headers)
                return -ENOMEM;
        (void) curl_easy_setopt(q->h, CURLOPT_URL, q->url);
        (void) curl_easy_setopt(q->h, CURLOPT_PROTOCOLS_STR, "http");
        (void) curl_easy_setopt(q->h, CURLOPT_FOLLOWLOCATION, 0L);
        (void) curl_easy_setopt(q->h, CURLOPT_NOPROXY, "*");
        (void) curl_easy_setopt(q->h, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(q->h, CURLOPT_CONNECTTIMEOUT_MS, (long) CLUSTER_LIST_TIMEOUT_MS);
        (void) curl_easy_setopt(q->h, CURLOPT_TIMEOUT_MS, (long) CLUSTER_LIST_TIMEOUT_MS);
        (void) curl_easy_setopt(q->h, CURLOPT_HTTPHEADER, q->headers);
        (void) curl_easy_setopt(q->h, CURLOPT_WRITEFUNCTION, on_data);
        (void) curl_easy_setopt(q->h, CURLOPT_WRITEDATA, q);
        (void) curl_easy_setopt(q->h, CURLOPT_ERRORBUFFER, q->err);
        (void) curl_easy_setopt(q->h, CURLOPT_PRIVATE, q);
        return 0;
}

/* The list in a peer's answer, or NULL with why. */
static json_t *peer_list(struct peer_query *q, CURLcode rc, enum cluster_list_shape shape,
                         json_t **ret_answer, char *why, size_t why_size)
{
        long code = 0;
        json_t *a, *list;

        if (rc != CURLE_OK) {
                (void) snprintf(why, why_size, "%s",
                                q->too_big  ? "its list is too large"
                                : q->err[0] ? q->err
                                            : curl_easy_strerror(rc));
                return NULL;
        }
        (void) curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &code);
        a = q->answer.data ? json_loadb(q->answer.data, q->answer.len, 0, NULL) : NULL;
        if (code != 200) {
                const json_t *e = json_object_get(a, "error");
                const char *m =
                        json_string_value(json_is_object(e) ? json_object_get(e, "message") : e);
                if (!m)
                        m = json_string_value(json_object_get(a, "message"));
                (void) snprintf(why, why_size, "it answered HTTP %ld%s%s", code, m ? ": " : "",
                                m ? m : "");
                json_decref(a);
                return NULL;
        }
        list = shape == CLUSTER_LIST_E2B        ? a
               : shape == CLUSTER_LIST_SESSIONS ? json_object_get(a, "sessions")
                                                : json_object_get(a, "data");
        if (!json_is_array(list)) {
                (void) snprintf(why, why_size, "its answer is not a list");
                json_decref(a);
                return NULL;
        }
        *ret_answer = a;
        return list;
}

/* Asks every peer and merges their lists into mine; names those that did not answer. */
static void fan_out(struct api_request *req, json_t *mine, enum cluster_list_shape shape,
                    json_t *nodes, json_t *unreachable)
{
        const struct node_peer *peers;
        size_t n = node_peers(&peers);
        struct peer_query *qs = calloc(n, sizeof(*qs));
        CURLM *multi = curl_multi_init();
        bool has_more = false;
        int running = 0;
        CURLMsg *msg;
        int left;

        if (!qs || !multi)
                goto out;
        api_curl_init();
        for (size_t i = 0; i < n; i++) {
                qs[i].peer = &peers[i];
                if (query_setup(&qs[i], req) < 0 || curl_multi_add_handle(multi, qs[i].h) != 0) {
                        (void) snprintf(qs[i].err, sizeof(qs[i].err), "out of memory");
                        continue;
                }
        }
        do {
                if (curl_multi_perform(multi, &running) != CURLM_OK)
                        break;
                if (running)
                        (void) curl_multi_poll(multi, NULL, 0, 200, NULL);
        } while (running);

        /* Every transfer ended (each has its own 2 s limit): their results. */
        while ((msg = curl_multi_info_read(multi, &left))) {
                struct peer_query *q = NULL;
                json_t *answer = NULL, *list, *x;
                char why[CURL_ERROR_SIZE + 128];
                size_t k;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &q);
                if (!q)
                        continue;
                list = peer_list(q, msg->data.result, shape, &answer, why, sizeof(why));
                q->answered = true;
                if (!list) {
                        log_warn("req=%s node=%s msg=\"node %s did not list: %s\"", req->id,
                                 q->peer->name, q->peer->name, why);
                        json_array_append_new(unreachable, json_pack("{s:s, s:s}", "node",
                                                                     q->peer->name, "error", why));
                        continue;
                }
                json_array_append_new(nodes, json_string(q->peer->name));
                json_array_foreach (list, k, x)
                        json_array_append(shape == CLUSTER_LIST_E2B ? mine
                                          : shape == CLUSTER_LIST_SESSIONS
                                                  ? json_object_get(mine, "sessions")
                                                  : json_object_get(mine, "data"),
                                          x);
                if (json_is_true(json_object_get(answer, "has_more")))
                        has_more = true;
                json_decref(answer);
        }
        for (size_t i = 0; i < n; i++)
                if (!qs[i].answered)
                        json_array_append_new(unreachable,
                                              json_pack("{s:s, s:s}", "node", qs[i].peer->name,
                                                        "error",
                                                        qs[i].err[0] ? qs[i].err : "not asked"));
        if (shape == CLUSTER_LIST_OPENAI) {
                json_t *data = json_object_get(mine, "data");
                size_t m = json_array_size(data);

                json_object_set(mine, "first_id",
                                m ? json_object_get(json_array_get(data, 0), "id") : json_null());
                json_object_set(mine, "last_id",
                                m ? json_object_get(json_array_get(data, m - 1), "id")
                                  : json_null());
                if (has_more)
                        json_object_set_new(mine, "has_more", json_true());
        }
out:
        for (size_t i = 0; qs && i < n; i++) {
                if (qs[i].h) {
                        (void) curl_multi_remove_handle(multi, qs[i].h);
                        curl_easy_cleanup(qs[i].h);
                }
                curl_slist_free_all(qs[i].headers);
                buf_done(&qs[i].answer);
        }
        free(qs);
        if (multi)
                curl_multi_cleanup(multi);
}

int api_reply_cluster_list(struct api_request *req, json_t *body, enum cluster_list_shape shape)
{
        const struct node_peer *peers;
        json_t *nodes, *unreachable;
        char names[4096];
        size_t o = 0, i;
        json_t *x;

        if (!body || !node_self() || api_header(req, PEER_QUERY_HEADER))
                return api_reply_json(req, MHD_HTTP_OK, body);
        nodes = json_pack("[s]", node_self());
        unreachable = json_array();
        if (!nodes || !unreachable) {
                json_decref(nodes);
                json_decref(unreachable);
                json_decref(body);
                return -ENOMEM;
        }
        if (node_peers(&peers) > 0)
                fan_out(req, body, shape, nodes, unreachable);
        if (shape != CLUSTER_LIST_E2B) {
                json_object_set_new(body, "nodes", nodes);
                json_object_set_new(body, "unreachable", unreachable);
                return api_reply_json(req, MHD_HTTP_OK, body);
        }
        json_decref(nodes);
        names[0] = '\0';
        json_array_foreach (unreachable, i, x) {
                int k = snprintf(names + o, sizeof(names) - o, "%s%s", o ? "," : "",
                                 json_string_value(json_object_get(x, "node")));
                if (k < 0 || (size_t) k >= sizeof(names) - o)
                        break;
                o += (size_t) k;
        }
        json_decref(unreachable);
        return api_reply_json_header(req, MHD_HTTP_OK, body, o ? UNREACHABLE_HEADER : NULL,
                                     o ? names : NULL);
}
