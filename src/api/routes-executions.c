/* GET /v1/executions: the last executions the daemon ran (every session's and the one-shot
 * runs'), newest first, from the session module's bounded ring (session/recent.h). The
 * dashboard's table of recent executions and its latency histogram read it; so can a script.
 * Code and output are cut to a few hundred bytes there: this is a window, not the record. */
#include "api-internal.h"

#include "session/recent.h"
#include "session/session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EXECUTIONS_LIMIT_DEFAULT 50

/* The query: limit and session_id, each at most once; anything else is refused, so that a
 * typo (?limt=5) is not silently the default. */
struct exec_query {
        const char *limit, *session_id, *bad;
        unsigned n_limit, n_session_id;
};

static enum MHD_Result scan_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
        struct exec_query *q = cls;

        (void) kind;
        if (strcmp(key, "limit") == 0) {
                q->limit = value ? value : "";
                q->n_limit++;
        } else if (strcmp(key, "session_id") == 0) {
                q->session_id = value ? value : "";
                q->n_session_id++;
        } else if (!q->bad) {
                q->bad = key;
        }
        return MHD_YES;
}

int api_handle_executions(struct api_request *req)
{
        struct exec_query q = { 0 };
        unsigned long limit = EXECUTIONS_LIMIT_DEFAULT;
        char node[NODE_NAME_MAX + 1];
        json_t *list;
        char *end;

        (void) MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, scan_arg, &q);
        if (q.bad)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, NULL,
                                       "unknown query parameter '%.64s': expected limit or "
                                       "session_id",
                                       q.bad);
        if (q.n_limit > 1 || q.n_session_id > 1)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST,
                                       q.n_limit > 1 ? "limit" : "session_id", "%s: give it once",
                                       q.n_limit > 1 ? "limit" : "session_id");
        if (q.limit) {
                errno = 0;
                limit = strtoul(q.limit, &end, 10);
                if (!*q.limit || *end || errno || q.limit[0] == '-' || q.limit[0] == '+' ||
                    limit < 1 || limit > RECENT_CAPACITY_MAX)
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "limit",
                                               "limit: expected an integer from 1 to %d, not "
                                               "'%.32s'",
                                               RECENT_CAPACITY_MAX, q.limit);
        }
        /* Session ids are "s-", hex and maybe "-NODE": anything else matches nothing, and is
         * said so. */
        if (q.session_id && session_id_parse(q.session_id, node) < 0)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "session_id",
                                       "session_id: expected a session id (s- and 24 lowercase "
                                       "hex characters, then -NODE with a node name)");

        list = session_recent_executions(req->srv->mgr, (unsigned) limit, q.session_id);
        if (!list)
                return -ENOMEM;
        return api_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "executions", list));
}
