/* A node of a cluster (docs/API.md "Cluster"): GET /readyz (no auth, for probes and front
 * doors), GET /v1/node, and POST /v1/node/drain (the daemon's own token only). */
#include "api-internal.h"

#include "base/node-id.h"
#include "session/session.h"
#include "tenant/tenant.h"

#include <errno.h>

static json_t *node_name_json(void)
{
        return node_self() ? json_string(node_self()) : json_null();
}

int api_handle_readyz(struct api_request *req)
{
        unsigned live, max;
        bool draining;
        json_t *o;

        session_manager_load(req->srv->mgr, &live, &max, &draining);
        o = json_pack("{s:b, s:o, s:I, s:I}", "ready", !draining && live < max, "node",
                      node_name_json(), "sessions", (json_int_t) live, "max_sessions",
                      (json_int_t) max);
        if (!o)
                return -ENOMEM;
        if (!draining && live < max)
                return api_reply_json(req, MHD_HTTP_OK, o);
        json_object_set_new(o, "reason",
                            json_string(draining ? "draining: its sessions are being stopped "
                                                   "(saved) and it takes no new ones"
                                                 : "at its session limit (--max-sessions)"));
        return api_reply_json_header(req, MHD_HTTP_SERVICE_UNAVAILABLE, o, "Retry-After", "5");
}

int api_handle_node(struct api_request *req)
{
        const struct node_peer *peers;
        size_t n = node_peers(&peers);
        unsigned live, max;
        bool draining;
        json_t *names = json_array();

        for (size_t i = 0; names && i < n; i++)
                json_array_append_new(names, json_string(peers[i].name));
        if (!names)
                return -ENOMEM;
        session_manager_load(req->srv->mgr, &live, &max, &draining);
        return api_reply_json(req, MHD_HTTP_OK,
                              json_pack("{s:o, s:o, s:b, s:I, s:I}", "node", node_name_json(),
                                        "peers", names, "draining", draining, "sessions",
                                        (json_int_t) live, "max_sessions", (json_int_t) max));
}

int api_handle_node_drain(struct api_request *req)
{
        json_t *stopped, *failed;
        int r;

        /* It stops every tenant's sessions: the operator's, never a tenant's. */
        if (req->tenant != tenant_default())
                return api_reply_error(req, MHD_HTTP_FORBIDDEN, NULL,
                                       "draining a node stops every tenant's sessions: only the "
                                       "daemon's own token may (a tenant's key may not)");
        r = session_manager_drain(req->srv->mgr, false, &stopped, &failed);
        if (r < 0)
                return r;
        return api_reply_json(req, MHD_HTTP_OK,
                              json_pack("{s:o, s:o, s:o}", "node", node_name_json(), "stopped",
                                        stopped, "failed", failed));
}
