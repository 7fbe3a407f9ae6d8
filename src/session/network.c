/* Sessions' network (docs/NETWORK.md): every sandbox of a profile whose network mode is
 * "allow" gets the daemon's egress proxy in its namespace when it starts (a warm pool member
 * too, so handing it out costs nothing more; a microVM in its QEMU's namespace, when it is
 * booted or restored), checking its profile's policy; when it becomes a session's, it takes
 * the session's id, tenant and narrowed policy. */
#include "session-internal.h"
#include "session-table.h"

#include "base/log.h"
#include "egress/egress.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <stdio.h>

static bool allows_network(const struct profile *p)
{
        return p->network && p->network->mode == EGRESS_MODE_ALLOW;
}

int session_network_check_mode(const struct session_manager *mgr, const struct profile *p,
                               struct airlock_error *err)
{
        if (!allows_network(p))
                return 0;
        /* A microVM's QEMU has a network namespace of its own whatever the daemon's mode
         * (src/vm/vmm.h). */
        if (mgr->cfg.mode != JAIL_NAMESPACES && p->isolation != PROFILE_ISOLATION_MICROVM)
                return airlock_error_set(err, -EINVAL,
                                         "profile '%s' allows network through the egress proxy, "
                                         "which needs the namespaces isolation mode; this daemon "
                                         "runs in %s mode (a sandbox of that mode would share "
                                         "the host's network)",
                                         p->name, jail_isolation_to_string(mgr->cfg.mode));
        if (!mgr->cfg.egress)
                return airlock_error_set(err, -EINVAL,
                                         "profile '%s' allows network, but this daemon runs no "
                                         "egress proxy",
                                         p->name);
        return 0;
}

int session_network_open(struct session_manager *mgr, const struct profile *p, struct sandbox *sb,
                         const char *id, struct airlock_error *err)
{
        int r;

        if (!allows_network(p))
                return 0;
        r = session_network_check_mode(mgr, p, err);
        if (r < 0)
                return r;
        return sandbox_egress_open(sb, mgr->cfg.egress, id, err);
}

void session_network_bind_as(struct sandbox *sb, const char *id, const char *tenant,
                             const struct profile *p, const struct egress_policy *network)
{
        struct egress_session *es = sb ? sandbox_egress(sb) : NULL;
        const struct egress_session_info info = { .session = id,
                                                  .tenant = tenant && tenant[0] ? tenant : NULL,
                                                  .profile = p->name };

        if (!es)
                return;
        /* Out of memory: no session may keep more than it was given, nor have its traffic
         * counted and audited under another's (a pool member's) names: no network. */
        if (egress_session_set_info(es, &info) < 0 ||
            egress_session_set_policy(es, network ? network : p->network) < 0)
                sandbox_set_egress(sb, NULL);
}

/* What a session gets when its saved network could not be read back (out of memory). */
static const struct egress_policy no_network = {
        .mode = EGRESS_MODE_NONE,
        .max_connections = 1,
        .max_bytes = 1024,
};

const struct egress_policy *session_network_none(void)
{
        return &no_network;
}

void session_network_bind(struct session *s, struct sandbox *sb)
{
        session_network_bind_as(sb, s->id, s->tenant, s->profile,
                                s->network_lost ? &no_network : s->network);
}

int session_network_narrow(const struct session_manager *mgr, const struct profile *p,
                           const json_t *request, struct egress_policy **ret,
                           struct airlock_error *err)
{
        int r;

        *ret = NULL;
        if (!request || json_is_null(request))
                return session_network_check_mode(mgr, p, err);
        r = egress_policy_narrow(p->network, request, p->name, ret, err);
        if (r < 0)
                return r;
        if ((*ret)->mode == EGRESS_MODE_ALLOW) {
                r = session_network_check_mode(mgr, p, err);
                if (r < 0)
                        *ret = egress_policy_free(*ret);
        }
        return r;
}

json_t *session_network_json(const struct session *s)
{
        if (!allows_network(s->profile))
                return NULL;
        return egress_policy_to_json(s->network ? s->network : s->profile->network);
}

void session_network_restore(struct session *s, const json_t *saved)
{
        struct airlock_error err = { { 0 } };

        if (!json_is_object(saved))
                return;
        /* Narrowed again against the profile as it is now: a profile narrowed since the stop
         * narrows the session too. What no longer fits gets no network at all. */
        if (egress_policy_narrow(s->profile->network, saved, s->profile->name, &s->network, &err) <
            0) {
                log_warn("session=%s msg=\"its network no longer fits profile '%s' (%s); it gets "
                         "none\"",
                         s->id, s->profile->name, err.msg);
                json_t *none = json_pack("{s:s}", "mode", "none");
                if (!none || egress_policy_narrow(s->profile->network, none, s->profile->name,
                                                  &s->network, &err) < 0)
                        /* Never the profile's whole policy in its place. */
                        s->network_lost = true;
                json_decref(none);
        }
}
