/* GET /v1/tools?format=openai|anthropic|mcp: the tools of src/tools/ in the shape each API's
 * "tools" request field takes, so an agent can paste them into its own requests. */
#include "api-internal.h"

#include "tools/tools.h"

#include <errno.h>
#include <string.h>

int api_handle_tools(struct api_request *req)
{
        const char *raw = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "format");
        enum tools_format format = TOOLS_FORMAT_MCP;
        char value[32] = "";
        json_t *tools;

        if (raw && (percent_decode(raw, strlen(raw), true, value, sizeof(value)) < 0 ||
                    tools_format_from_string(value, &format) < 0))
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "format",
                                       "format must be openai, anthropic or mcp");
        tools = tools_declarations(format);
        if (!tools)
                return -ENOMEM;
        return api_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "tools", tools));
}
