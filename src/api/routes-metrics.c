/* GET /metrics: the Prometheus text exposition format (version 0.0.4) of docs/METRICS.md. On
 * the API's listener it needs the metrics token (or the API token): a scraper gets no access
 * to sessions, and a tenant key none to metrics. On a metrics listener (--metrics-listen) it
 * needs none: that listener serves nothing else, and is loopback unless the operator says. */
#include "api-internal.h"

#include "metrics/metrics.h"
#include "session/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static bool metrics_authorized(struct api_request *req)
{
        const char *auth = api_header(req, MHD_HTTP_HEADER_AUTHORIZATION), *token;
        struct api_server *srv = req->srv;
        size_t len;

        if (srv->metrics_only)
                return true;
        if (!auth || api_bearer_parse(auth, &token, &len) < 0)
                return false;
        /* Both compared, always: the time taken does not say which one nearly matched. */
        return (srv->metrics_token && api_token_equal(srv->metrics_token, token, len)) |
               (srv->token && api_token_equal(srv->token, token, len));
}

int api_handle_metrics(struct api_request *req)
{
        struct MHD_Response *resp;
        char *text = NULL;
        size_t len = 0;
        FILE *f;
        int r;

        if (!metrics_authorized(req))
                return api_reply_error_header(req, MHD_HTTP_UNAUTHORIZED,
                                              MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                              "Bearer realm=\"airlock-metrics\"",
                                              "GET /metrics needs the metrics token (the file "
                                              "metrics-token in the state directory, or "
                                              "$AIRLOCK_METRICS_TOKEN) or the API token as a "
                                              "bearer token; or scrape the --metrics-listen "
                                              "address");
        f = open_memstream(&text, &len);
        if (!f)
                return -errno;
        metrics_write_registry(f);
        if (req->srv->mgr)
                session_manager_write_metrics(req->srv->mgr, f, req->srv->metrics_top_sessions);
        r = ferror(f) ? -ENOMEM : 0;
        if (fclose(f) != 0 && r == 0)
                r = -ENOMEM;
        if (r < 0) {
                free(text);
                return r;
        }
        resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return -ENOMEM;
        }
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT_TYPE);
        return api_reply_response(req, MHD_HTTP_OK, resp);
}
