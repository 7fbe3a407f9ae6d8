/* The cluster flags of `airlock serve` (serve-cluster.c, docs/API.md "Cluster"): --node and
 * --peers, and their environment variables AIRLOCK_NODE and AIRLOCK_PEERS. */
#pragma once

/* Chooses this daemon's node name and peers and sets them (base/node-id.h): the flag, else the
 * environment variable; under a Kubernetes StatefulSet (KUBERNETES_SERVICE_HOST set and a
 * hostname "NAME-ORDINAL") the node name defaults to the hostname. Says which name was chosen
 * and why. Names of peers are not resolved here. Returns 0 or -EINVAL after saying on stderr
 * what is wrong and what to do. */
int serve_cluster_setup(const char *node_flag, const char *peers_flag);

/* The HOST:PORT the peers use for this node (the entry of --peers that names it), or NULL:
 * requests forwarded to it carry that Host, which it must accept. Valid for the process's
 * life. */
const char *serve_cluster_self_addr(void);
