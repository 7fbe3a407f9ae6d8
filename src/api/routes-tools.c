/* GET /v1/tools?format=openai|anthropic|mcp: the tools of src/tools/ and the internal tools of
 * the daemon's hub, in the shape each API's "tools" request field takes, so an agent can paste
 * them into its own requests; plus which server each internal tool comes from and how the
 * servers are doing. */
#include "api-internal.h"

#include "hub/hub.h"
#include "tools/tools.h"

#include <errno.h>
#include <string.h>

int api_handle_tools(struct api_request *req)
{
        const char *raw = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "format");
        enum tools_format format = TOOLS_FORMAT_MCP;
        char value[32] = "";
        json_t *tools, *internal, *servers;

        if (raw && (percent_decode(raw, strlen(raw), true, value, sizeof(value)) < 0 ||
                    tools_format_from_string(value, &format) < 0))
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "format",
                                       "format must be openai, anthropic or mcp");
        tools = tools_declarations(format, req->srv->hub);
        internal = req->srv->hub ? hub_tools(req->srv->hub) : json_array();
        servers = req->srv->hub ? hub_servers(req->srv->hub) : json_array();
        if (!tools || !internal || !servers) {
                json_decref(tools);
                json_decref(internal);
                json_decref(servers);
                return -ENOMEM;
        }
        return api_reply_json(req, MHD_HTTP_OK,
                              json_pack("{s:o, s:o, s:o}", "tools", tools, "internal", internal,
                                        "servers", servers));
}
