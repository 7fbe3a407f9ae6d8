/* Requests for another node's objects, forwarded to it (issue 26, docs/API.md "Cluster").
 *
 * The node of a request is taken from the id it names: the path's {id} (sessions, containers,
 * files, responses, E2B sandboxes), the E2b-Sandbox-Id header of E2B's sandbox routes, the
 * Mcp-Session-Id header of /mcp. An id of this node, or without a node, stays here: deciding
 * that costs a few comparisons, no allocation and no lock. A peer's id is forwarded: method,
 * path and query, headers (Authorization included) and the body, with "Airlock-Forwarded-By:
 * THIS NODE"; the answer is relayed as the peer sends it (ndjson, SSE and chunked bodies
 * stream). An id naming no node of the cluster is 404 and nothing connects anywhere: addresses
 * come from --peers only, never from an id. A request that was forwarded once is never
 * forwarded again (404 "not on this node"). A peer that cannot be reached (refused, no such
 * host, 2 s to connect, no answer in time) is 503 with Retry-After: 5 and a message naming the
 * node, in the error shape of the surface asked. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct api_request;
struct node_peer;

#define FORWARDED_BY_HEADER "Airlock-Forwarded-By"
#define FORWARD_CONNECT_TIMEOUT_MS 2000
#define FORWARD_RETRY_AFTER "5"

/* Decides where req goes, once its route is known (after the auth check). Returns 0: handled
 * here; 1: req->forward is set and the request goes to that peer (its body, an upload's too,
 * is buffered rather than parsed); or 2: an answer (404) was queued. Returns -errno when no
 * answer could be queued. */
int api_forward_decide(struct api_request *req);

/* Decides for an id found in a request body (previous_response_id, a container's id):
 * fixed_len is the id's length without its node. Returns 0 (here, or not an id: the handler
 * says what is wrong), 1 (forwarded: the request was answered by the peer's answer) or 2 (a
 * 404 was queued), or -errno. Call from a handler with the body still in req. */
int api_forward_for_id(struct api_request *req, const char *id, size_t fixed_len);

/* The same for any id a client sends back in a body, by its prefix: resp_, cntr_, s-, call_
 * and mcpr_ (continuations of the gateway and Code Mode), fc_. Anything else (NULL too) is 0. */
int api_forward_for_body_id(struct api_request *req, const char *id);

/* The object a JSON body continues may be another node's: a Responses request's
 * previous_response_id, the container a tool names, the call ids of function_call_output and
 * mcp_approval_response items; a chat request's X-Airlock-Session header and its tool
 * messages' tool_call_id. Returns as api_forward_for_id() for the first id that is not this
 * node's. */
int api_forward_for_body(struct api_request *req, const json_t *body);

/* The URL of req (its path and query, as sent) on the peer at addr (HOST:PORT). Returns 0 or
 * -E2BIG. */
int api_forward_url(struct api_request *req, const char *addr, char *buf, size_t size);

/* "X-Forwarded-For: ADDR" for a request this node sends a peer on a client's behalf: the
 * client as this node knows it (api_client_address()), never what the client claimed. */
void api_forward_client_header(struct api_request *req, char *buf, size_t size);

/* libcurl's global setup, once per process; any thread. */
void api_curl_init(void);

/* Sends req to req->forward and queues the peer's answer, streaming (or the 503 when the peer
 * cannot be reached). On a worker, as a handler. Returns 0 or -errno. */
int api_forward_run(struct api_request *req);
