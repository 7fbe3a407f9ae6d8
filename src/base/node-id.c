/* Node names, ids that carry them, and the --peers parser: see node-id.h. */
#include "node-id.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char self_name[NODE_NAME_MAX + 1];
static bool self_set;
static struct node_peer self_peers[NODE_PEERS_MAX];
static size_t self_n_peers;

static bool is_name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* Whether s[0..n) is a node name. */
static bool name_is_valid_n(const char *s, size_t n)
{
        if (n == 0 || n > NODE_NAME_MAX || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_name_char(s[i]))
                        return false;
        return true;
}

bool node_name_is_valid(const char *name)
{
        return name && name_is_valid_n(name, strnlen(name, NODE_NAME_MAX + 1));
}

int node_set_self(const char *name)
{
        if (!name) {
                self_set = false;
                self_name[0] = '\0';
                return 0;
        }
        if (!node_name_is_valid(name))
                return -EINVAL;
        memcpy(self_name, name, strlen(name) + 1);
        self_set = true;
        return 0;
}

const char *node_self(void)
{
        return self_set ? self_name : NULL;
}

int node_id_split(const char *id, size_t fixed_len, char ret_node[NODE_NAME_MAX + 1])
{
        size_t n;

        if (strnlen(id, fixed_len) != fixed_len)
                return -EINVAL;
        if (id[fixed_len] == '\0') {
                ret_node[0] = '\0';
                return 0;
        }
        if (id[fixed_len] != '-')
                return -EINVAL;
        id += fixed_len + 1;
        n = strnlen(id, NODE_NAME_MAX + 1);
        if (!name_is_valid_n(id, n))
                return -EINVAL;
        memcpy(ret_node, id, n + 1);
        return 1;
}

bool node_is_self(const char *node)
{
        return node[0] == '\0' || (self_set && strcmp(node, self_name) == 0);
}

int node_id_append(char *buf, size_t size)
{
        size_t n, k;

        if (!self_set)
                return 0;
        n = strlen(buf);
        k = strlen(self_name);
        if (n + 1 + k + 1 > size)
                return -ENOBUFS;
        buf[n] = '-';
        memcpy(buf + n + 1, self_name, k + 1);
        return 0;
}

int node_set_peers(const struct node_peer *peers, size_t n)
{
        if (n > NODE_PEERS_MAX)
                return -E2BIG;
        if (n)
                memcpy(self_peers, peers, n * sizeof(*peers));
        self_n_peers = n;
        return 0;
}

const struct node_peer *node_peer_find(const char *name)
{
        for (size_t i = 0; i < self_n_peers; i++)
                if (strcmp(self_peers[i].name, name) == 0)
                        return &self_peers[i];
        return NULL;
}

size_t node_peers(const struct node_peer **ret_peers)
{
        *ret_peers = self_peers;
        return self_n_peers;
}

/* ---- --peers -------------------------------------------------------------------------------- */

static int bad(char *why, size_t why_size, const char *entry, size_t len, const char *what)
{
        (void) snprintf(why, why_size, "bad --peers entry '%.*s': %s", (int) len, entry, what);
        return -EINVAL;
}

/* Parses a decimal number of s[0..n) (1 to 6 digits). */
static int parse_index(const char *s, size_t n, unsigned *ret)
{
        unsigned v = 0;

        if (n == 0 || n > 6)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        *ret = v;
        return 0;
}

/* Writes HOST:PORT of tmpl[0..n) with every "{node}" replaced by name. */
static int expand_host(const char *tmpl, size_t n, const char *name, char out[NODE_HOST_MAX + 1])
{
        size_t o = 0;

        for (size_t i = 0; i < n;) {
                const char *piece = tmpl + i;
                size_t k = 1, adv = 1;

                if (n - i >= 6 && memcmp(tmpl + i, "{node}", 6) == 0)
                        piece = name, k = strlen(name), adv = 6;
                if (o + k > NODE_HOST_MAX)
                        return -E2BIG;
                memcpy(out + o, piece, k);
                o += k;
                i += adv;
        }
        out[o] = '\0';
        return 0;
}

/* Checks an expanded HOST:PORT: a host of letters, digits, '.', '-', '_' (or an IPv6 address in
 * brackets) and a port 1..65535. */
static const char *check_addr(const char *addr)
{
        const char *colon, *host_end;
        unsigned port;

        if (addr[0] == '[') {
                host_end = strchr(addr, ']');
                if (!host_end || host_end[1] != ':')
                        return "an IPv6 address goes in brackets: [ADDR]:PORT";
                for (const char *p = addr + 1; p < host_end; p++)
                        if (!strchr("0123456789abcdefABCDEF:.", *p))
                                return "the IPv6 address has a character it cannot have";
                colon = host_end + 1;
        } else {
                colon = strrchr(addr, ':');
                if (!colon || colon == addr)
                        return "HOST:PORT expected after '='";
                for (const char *p = addr; p < colon; p++)
                        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                              (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '_'))
                                return "the host has a character a host name cannot have";
        }
        if (parse_index(colon + 1, strlen(colon + 1), &port) < 0 || port == 0 || port > 65535)
                return "the port must be a number from 1 to 65535";
        return NULL;
}

static int add_peer(const char *name, const char *tmpl, size_t tmpl_len, const char *self,
                    struct node_peer *peers, size_t max, size_t *n, const char *entry,
                    size_t entry_len, char *why, size_t why_size)
{
        const char *what;
        struct node_peer p;

        if (!node_name_is_valid(name))
                return bad(why, why_size, entry, entry_len,
                           "a node name is lowercase letters, digits and '-' (not first or last), "
                           "at most 32");
        if (expand_host(tmpl, tmpl_len, name, p.addr) < 0)
                return bad(why, why_size, entry, entry_len, "HOST:PORT is too long");
        what = check_addr(p.addr);
        if (what)
                return bad(why, why_size, entry, entry_len, what);
        if (self && strcmp(name, self) == 0)
                return 0;
        for (size_t i = 0; i < *n; i++)
                if (strcmp(peers[i].name, name) == 0)
                        return bad(why, why_size, entry, entry_len, "this node is named twice");
        if (*n >= max) {
                (void) snprintf(why, why_size, "--peers names more than %zu nodes", max);
                return -E2BIG;
        }
        memcpy(p.name, name, strlen(name) + 1);
        peers[(*n)++] = p;
        return 0;
}

static int parse_entry(const char *e, size_t len, const char *self, struct node_peer *peers,
                       size_t max, size_t *n, char *why, size_t why_size)
{
        const char *eq = memchr(e, '=', len), *host;
        char name[NODE_NAME_MAX + 1];
        size_t name_len, host_len, base_len;
        unsigned lo, hi;
        int r;

        if (!eq || eq == e)
                return bad(why, why_size, e, len, "NAME=HOST:PORT expected");
        name_len = (size_t) (eq - e);
        host = eq + 1;
        host_len = len - name_len - 1;
        if (host_len == 0)
                return bad(why, why_size, e, len, "HOST:PORT expected after '='");

        if (e[name_len - 1] != ']') {
                if (name_len > NODE_NAME_MAX)
                        return bad(why, why_size, e, len, "the node name is longer than 32");
                memcpy(name, e, name_len);
                name[name_len] = '\0';
                return add_peer(name, host, host_len, self, peers, max, n, e, len, why, why_size);
        }

        /* NAME[A-B] */
        const char *open = memchr(e, '[', name_len), *dash;
        if (!open)
                return bad(why, why_size, e, len, "a range is written [A-B]");
        dash = memchr(open, '-', (size_t) (eq - 1 - open));
        if (!dash || parse_index(open + 1, (size_t) (dash - open - 1), &lo) < 0 ||
            parse_index(dash + 1, (size_t) (eq - 1 - dash - 1), &hi) < 0)
                return bad(why, why_size, e, len, "a range is written [A-B] with numbers A and B");
        if (lo > hi)
                return bad(why, why_size, e, len, "a range [A-B] needs A <= B");
        if (hi - lo >= NODE_PEERS_MAX)
                return bad(why, why_size, e, len, "the range names too many nodes");
        base_len = (size_t) (open - e);
        if (base_len > NODE_NAME_MAX)
                return bad(why, why_size, e, len, "the node name is longer than 32");
        for (unsigned i = lo; i <= hi; i++) {
                int k = snprintf(name, sizeof(name), "%.*s%u", (int) base_len, e, i);

                if (k < 0 || (size_t) k >= sizeof(name))
                        return bad(why, why_size, e, len, "the node name is longer than 32");
                r = add_peer(name, host, host_len, self, peers, max, n, e, len, why, why_size);
                if (r < 0)
                        return r;
        }
        return 0;
}

int node_peers_self_addr(const char *spec, const char *self, char ret_addr[NODE_HOST_MAX + 1])
{
        struct node_peer *all = calloc(NODE_PEERS_MAX, sizeof(*all));
        char why[256];
        size_t n = 0;
        int r = -ENOENT;

        if (!all)
                return -ENOMEM;
        if (node_peers_parse(spec, NULL, all, NODE_PEERS_MAX, &n, why, sizeof(why)) < 0)
                n = 0;
        for (size_t i = 0; i < n && r < 0; i++)
                if (strcmp(all[i].name, self) == 0) {
                        memcpy(ret_addr, all[i].addr, strlen(all[i].addr) + 1);
                        r = 0;
                }
        free(all);
        return r;
}

int node_peers_parse(const char *spec, const char *self, struct node_peer *peers, size_t max,
                     size_t *ret_n, char *why, size_t why_size)
{
        size_t n = 0;
        int r;

        for (const char *p = spec;;) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t) (end - p) : strlen(p);

                if (len == 0)
                        return bad(why, why_size, p, 0,
                                   "an empty entry (two commas, or one at an end)");
                r = parse_entry(p, len, self, peers, max, &n, why, why_size);
                if (r < 0)
                        return r;
                if (!end)
                        break;
                p = end + 1;
        }
        *ret_n = n;
        return 0;
}
