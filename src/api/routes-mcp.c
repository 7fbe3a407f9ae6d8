/* /mcp: MCP's streamable HTTP transport (src/mcp/http.h) behind the same gate as every route
 * (Host/Origin, bearer token, body limit). This file only translates between libmicrohttpd
 * and the transport's (method, headers, body) -> (status, headers, body). */
#include "api-internal.h"

#include "mcp/http.h"

#include <errno.h>
#include <stdlib.h>

static const char *lookup_header(void *userdata, const char *name)
{
        return api_header(userdata, name);
}

int api_handle_mcp(struct api_request *req)
{
        struct mcp_http_response resp = { 0 };
        struct MHD_Response *m;
        int r;

        r = mcp_http_handle(req->srv->mcp,
                            &(struct mcp_http_request){ .method = req->method,
                                                        .header = lookup_header,
                                                        .userdata = req,
                                                        .body = req->body,
                                                        .body_len = req->body_len },
                            &resp);
        if (r < 0)
                return r;
        /* The body moves to MHD, which frees it with the response. */
        m = MHD_create_response_from_buffer(resp.body_len, resp.body ? resp.body : (char *) "",
                                            resp.body ? MHD_RESPMEM_MUST_FREE
                                                      : MHD_RESPMEM_PERSISTENT);
        if (!m) {
                mcp_http_response_done(&resp);
                return -ENOMEM;
        }
        resp.body = NULL;
        for (size_t i = 0; i < resp.n_headers; i++)
                (void) MHD_add_response_header(m, resp.headers[i].name, resp.headers[i].value);
        r = api_reply_response(req, resp.status, m);
        mcp_http_response_done(&resp);
        return r;
}
