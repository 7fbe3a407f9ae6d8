/* GET /v1/tools?format=openai|anthropic|mcp: the tools of src/tools/ and the internal tools of
 * the daemon's hub, in the shape each API's "tools" request field takes, so an agent can paste
 * them into its own requests; plus which server each internal tool comes from and how the
 * servers are doing. */
#include "api-internal.h"

#include "hub/hub.h"
#include "session/session.h"
#include "tools/tools.h"

#include <errno.h>
#include <string.h>

int api_handle_tools(struct api_request *req)
{
        const char *raw = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "format");
        const char *session =
                MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "session");
        const char *profile =
                MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "profile");
        enum tools_format format = TOOLS_FORMAT_MCP;
        char value[32] = "";
        json_t *tools, *internal, *servers, *code;

        if (raw && (percent_decode(raw, strlen(raw), true, value, sizeof(value)) < 0 ||
                    tools_format_from_string(value, &format) < 0))
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "format",
                                       "format must be openai, anthropic or mcp");
        if (session && profile)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "profile",
                                       "give session or profile, not both");
        if (profile && !profile_name_is_valid(profile))
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "profile",
                                       "profile: not a profile name");
        {
                /* Airlock's tools as that session's (or that profile's, or the default
                 * profile's) sessions are offered them: run_javascript where it allows
                 * javascript. */
                struct airlock_error err = { { 0 } };
                struct session *s = NULL;
                const char *offered_for = profile;
                json_t *desc = NULL;

                if (session && session_lookup(req->srv->mgr, session, &s, &err) >= 0) {
                        desc = session_describe(s);
                        session_unref(s);
                        offered_for = json_string_value(json_object_get(desc, "profile"));
                }
                tools = tools_declarations_for(format, req->srv->hub, offered_for);
                json_decref(desc);
        }
        internal = req->srv->hub ? hub_tools(req->srv->hub) : json_array();
        servers = req->srv->hub ? hub_servers(req->srv->hub) : json_array();
        /* Code Mode: what the code of that session (or of a new session of that profile)
         * may call. */
        code = session_code_tools(req->srv->mgr, session, profile);
        if (!tools || !internal || !servers || !code) {
                json_decref(tools);
                json_decref(internal);
                json_decref(servers);
                json_decref(code);
                return -ENOMEM;
        }
        return api_reply_json(req, MHD_HTTP_OK,
                              json_pack("{s:o, s:o, s:o, s:o}", "tools", tools, "internal",
                                        internal, "servers", servers, "code_tools", code));
}
