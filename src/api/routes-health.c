/* GET /healthz (no auth: for load balancers and `airlock serve` scripts) and GET /v1/profiles.
 * /healthz says only what a probe needs: alive, which version, which isolation mode. */
#include "api-internal.h"

#include "config.h"
#include "session/session.h"
#include <errno.h>

int api_handle_healthz(struct api_request *req)
{
        return api_reply_json(req, MHD_HTTP_OK,
                              json_pack("{s:s, s:s, s:s}", "status", "ok", "version",
                                        AIRLOCK_VERSION, "isolation",
                                        jail_isolation_to_string(req->srv->mode)));
}

int api_handle_profiles(struct api_request *req)
{
        json_t *profiles = session_manager_profiles(req->srv->mgr);

        if (!profiles)
                return -ENOMEM;
        /* The manager may hand out the array itself or an object already wrapping it. */
        if (json_is_array(profiles))
                return api_reply_json(req, MHD_HTTP_OK, json_pack("{s:o}", "profiles", profiles));
        return api_reply_json(req, MHD_HTTP_OK, profiles);
}
