/* Lists of a whole cluster (issue 26, docs/API.md "Cluster"): GET /v1/sessions, /v1/containers,
 * /v1/files and E2B's sandbox list on a node with peers ask every peer at once (2 s at most,
 * with the client's own Authorization or X-API-KEY, so each peer applies its own auth and a
 * tenant sees only its own) and answer the union. A peer asked this way answers only its own
 * (the Airlock-Peer-Query header) and asks nobody. A node that does not answer is named: in
 * "unreachable" ([{"node", "error"}]) of the native and OpenAI shapes, beside "nodes" (those
 * that answered, this one first), and in the Airlock-Unreachable-Nodes header of E2B's bare
 * array. */
#pragma once

#include <jansson.h>

struct api_request;

#define PEER_QUERY_HEADER "Airlock-Peer-Query"
#define UNREACHABLE_HEADER "Airlock-Unreachable-Nodes"
#define CLUSTER_LIST_TIMEOUT_MS 2000

enum cluster_list_shape {
        CLUSTER_LIST_SESSIONS, /* {"sessions": [...]} */
        CLUSTER_LIST_OPENAI,   /* {"object": "list", "data": [...], "first_id", "last_id", ...} */
        CLUSTER_LIST_E2B,      /* [...] */
};

/* Replies 200 with body (this node's list, taken over) and, on a node with peers asked by a
 * client, every peer's merged in. Returns as api_reply_json(). */
int api_reply_cluster_list(struct api_request *req, json_t *body, enum cluster_list_shape shape);
