/* --node and --peers of `airlock serve`: see serve-cluster.h. */
#include "serve-cluster.h"

#include "base/log.h"
#include "base/node-id.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether name is a StatefulSet pod's hostname: "^[a-z0-9-]+-[0-9]+$". */
static bool is_statefulset_name(const char *name)
{
        const char *dash = strrchr(name, '-');

        if (!dash || dash == name || !dash[1] || strspn(dash + 1, "0123456789") != strlen(dash + 1))
                return false;
        return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(name);
}

static int choose_node(const char *flag, const char **ret_name, const char **ret_why,
                       char host[256])
{
        const char *env = getenv("AIRLOCK_NODE");

        if (flag) {
                *ret_name = flag, *ret_why = "--node";
                return 0;
        }
        if (env && *env) {
                *ret_name = env, *ret_why = "AIRLOCK_NODE";
                return 0;
        }
        *ret_name = NULL;
        if (!getenv("KUBERNETES_SERVICE_HOST") || gethostname(host, 256) < 0)
                return 0;
        host[255] = '\0';
        if (is_statefulset_name(host) && node_name_is_valid(host))
                *ret_name = host, *ret_why = "the hostname of a StatefulSet pod "
                                             "(KUBERNETES_SERVICE_HOST is set)";
        return 0;
}

static char self_addr[NODE_HOST_MAX + 1];

const char *serve_cluster_self_addr(void)
{
        return self_addr[0] ? self_addr : NULL;
}

int serve_cluster_setup(const char *node_flag, const char *peers_flag)
{
        static struct node_peer peers[NODE_PEERS_MAX];
        const char *name, *why = NULL, *spec = peers_flag;
        char host[256], msg[512];
        size_t n = 0;

        (void) choose_node(node_flag, &name, &why, host);
        if (name && !node_name_is_valid(name)) {
                fprintf(stderr,
                        "airlock serve: %s '%s' is not a node name: lowercase letters, digits "
                        "and '-' (not first or last), at most 32 characters, e.g. n1 or "
                        "airlock-0\n",
                        why, name);
                return -EINVAL;
        }
        if (!spec) {
                spec = getenv("AIRLOCK_PEERS");
                if (spec && !*spec)
                        spec = NULL;
        }
        if (spec && !name) {
                fprintf(stderr, "airlock serve: --peers needs --node (or AIRLOCK_NODE): ids name "
                                "their node, and a daemon without a name cannot be one\n");
                return -EINVAL;
        }
        if (spec && node_peers_parse(spec, name, peers, NODE_PEERS_MAX, &n, msg, sizeof(msg)) < 0) {
                fprintf(stderr, "airlock serve: %s%s\n", msg,
                        peers_flag ? "" : " (from AIRLOCK_PEERS)");
                return -EINVAL;
        }
        if (node_set_self(name) < 0 || node_set_peers(peers, n) < 0)
                return -EINVAL;
        if (spec && node_peers_self_addr(spec, name, self_addr) < 0)
                self_addr[0] = '\0';
        if (name)
                log_info("msg=\"node '%s' (from %s); %zu peer%s\"", name, why, n,
                         n == 1 ? "" : "s");
        return 0;
}
