/* A node's name and the ids that carry it (issue 26). With --node NAME every id a client keeps
 * gets "-NAME" after its fixed-length random part ("s-<24hex>-n1", "cntr_<24hex>-n1"), so the
 * node of an id is whatever follows that part after one '-'. Without a node, ids are exactly as
 * before. Also the --peers parser. Pure functions and one process-wide name, set once at start
 * before any thread runs: reading it takes no lock. Unit-tested in tests/unit/test-base.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define NODE_NAME_MAX 32 /* a DNS label, at most 32 characters */
#define NODE_SUFFIX_MAX                                                                            \
        (1 + NODE_NAME_MAX) /* "-" NAME, what an id may carry past its fixed part                  \
                             */
#define NODE_PEERS_MAX 256  /* entries of --peers, ranges expanded */
#define NODE_HOST_MAX 255   /* HOST:PORT of a peer, "{node}" replaced */

/* Whether name is a node name: ^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$ */
bool node_name_is_valid(const char *name);

/* Sets this process's node name (a copy), or none with NULL. Call once at start, before threads.
 * Returns 0 or -EINVAL for a name node_name_is_valid() refuses. */
int node_set_self(const char *name);

/* This node's name, or NULL for a single daemon. Borrowed, valid for the process's life. */
const char *node_self(void);

/* Splits an id made of fixed_len characters and optionally "-NODE". Only the shape past
 * fixed_len is checked (the caller checks its own prefix and hex). Returns 0 with ret_node ""
 * (an id without a node), 1 with the node's name in ret_node, -EINVAL when the id is shorter
 * than fixed_len or what follows it is not "-" and a node name. No allocation, no lock. */
int node_id_split(const char *id, size_t fixed_len, char ret_node[NODE_NAME_MAX + 1]);

/* Whether an id's node (from node_id_split(), "" for none) is this node's: "" always is (ids
 * made before --node was set keep working on the node that holds them). */
bool node_is_self(const char *node);

/* Appends "-NODE" of this node to the NUL-terminated id in buf (size bytes) when a node is set.
 * Returns 0 or -ENOBUFS (buf unchanged). */
int node_id_append(char *buf, size_t size);

/* One peer of --peers: its name and HOST:PORT ("{node}" already replaced). */
struct node_peer {
        char name[NODE_NAME_MAX + 1];
        char addr[NODE_HOST_MAX + 1];
};

/* Parses --peers SPEC: comma-separated NAME=HOST:PORT entries; a NAME may end with a numeric
 * range "[A-B]" (A <= B, at most NODE_PEERS_MAX names in all) and HOST may contain "{node}",
 * replaced by each name. Entries naming self (may be NULL) are left out; a name given twice is
 * refused. Fills peers (room for max) and *ret_n. Returns 0, -EINVAL with the bad entry and why
 * in why (why_size bytes), -E2BIG past max entries. Names are not resolved here. */
int node_peers_parse(const char *spec, const char *self, struct node_peer *peers, size_t max,
                     size_t *ret_n, char *why, size_t why_size);

/* HOST:PORT of the entry of a valid spec that names self: the address its peers use for it
 * (its Host check must accept it). Returns 0, or -ENOENT when no entry names self. */
int node_peers_self_addr(const char *spec, const char *self, char ret_addr[NODE_HOST_MAX + 1]);

/* Sets this process's peers (copied; at most NODE_PEERS_MAX). Call once at start, before
 * threads. Returns 0 or -E2BIG. */
int node_set_peers(const struct node_peer *peers, size_t n);

/* The peer named name, or NULL when no peer has that name (this node is not its own peer).
 * Borrowed, valid for the process's life. */
const struct node_peer *node_peer_find(const char *name);

/* All peers: the array in *ret_peers (borrowed), their number returned. */
size_t node_peers(const struct node_peer **ret_peers);
