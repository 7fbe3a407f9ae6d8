/* Egress policy (docs/NETWORK.md): which destinations a sandbox may reach through the daemon's
 * proxy. Pure functions: parsing a profile's or a session's "network" value, narrowing a
 * profile's policy for one session, and checking a destination. No I/O, no DNS.
 *
 * A profile says
 *   "network": "none"                                  (the default: no network at all)
 *   "network": {"mode": "none" | "allow",
 *               "allow": ["pypi.internal:443", "*.corp.internal:443", "db.internal:5432",
 *                         "10.1.2.0/24:443", "10.1.2.7:5432", "[fd00::7]:5432", ...],
 *               "max_connections": 64,                 (open at once per session; default 64)
 *               "max_bytes": "1GiB"}                   (in + out per session; default 1 GiB)
 * Every rule names a port (1..65535): there is no "any port". A host is a DNS name (lowercased;
 * a leading "*." matches any name below that domain, not the domain itself), an IPv4 or IPv6
 * address ([brackets] for IPv6), or a CIDR block of either family.
 *
 * A destination is allowed when a rule matches it AND it is not forbidden. A destination asked
 * for by name matches name rules on that name and port; its resolved addresses must each pass
 * egress_addr_forbidden(), and one on the host's loopback must also match an address rule (the
 * proxy enforces both: src/egress/conn.c). A destination asked for by address (a literal) matches
 * only address and CIDR rules: naming an address that an allowed name happens to resolve to does
 * not make it allowed. */
#pragma once

#include "base/error.h"

#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum egress_mode {
        EGRESS_MODE_NONE,  /* no network: the sandbox's namespace has only its loopback */
        EGRESS_MODE_ALLOW, /* the proxy, to the destinations of the rules */
};

enum egress_rule_kind {
        EGRESS_RULE_NAME,     /* exact DNS name */
        EGRESS_RULE_WILDCARD, /* "*.suffix": names strictly below suffix */
        EGRESS_RULE_ADDR,     /* one address or a CIDR block */
};

struct egress_rule {
        enum egress_rule_kind kind;
        char *text; /* the rule as the canonical form "host:port" (lowercased, v6 bracketed) */
        char *name; /* NAME: the name; WILDCARD: the suffix without "*."; ADDR: NULL */
        int family; /* ADDR: AF_INET or AF_INET6 */
        uint8_t addr[16]; /* ADDR: network address, host bits zero (4 bytes used for v4) */
        unsigned prefix;  /* ADDR: 0..32 or 0..128; a single address has the full length */
        uint16_t port;
};

#define EGRESS_RULES_MAX 256u
#define EGRESS_DEFAULT_MAX_CONNECTIONS 64u
#define EGRESS_DEFAULT_MAX_BYTES (1ull << 30)

struct egress_policy {
        enum egress_mode mode;
        struct egress_rule *rules;
        size_t n_rules;
        uint32_t max_connections; /* 1 .. 4096 */
        uint64_t max_bytes;       /* 1 KiB .. 1 TiB */
};

/* Parses a profile's "network" value (a string "none" or an object as above; NULL = absent =
 * none). source names the file and profile in messages ("profile 'x' (profiles/x.json)").
 * Returns 0, or -EINVAL with a message naming the key, the bad rule and what was expected.
 * Free with egress_policy_free(). */
int egress_policy_parse(const json_t *network, const char *source, struct egress_policy **ret,
                        struct airlock_error *err);

/* A session's narrowing of its profile's policy: request is the "network" value of POST
 * /v1/sessions (same shape as the profile's; NULL = the profile's policy as it is). Every rule
 * asked for must be covered by one of base's rules (same port; the same name, a name under a
 * wildcard rule, or an address/CIDR inside an address rule), caps may only go down, and "allow"
 * on a "none" profile is refused: -EPERM with a message naming the rule (or cap) and
 * profile_name, e.g. "network.allow: 'db.internal:5433' is not in profile 'etl''s allow-list;
 * a session can only narrow its profile's network". -EINVAL for a malformed request. */
int egress_policy_narrow(const struct egress_policy *base, const json_t *request,
                         const char *profile_name, struct egress_policy **ret,
                         struct airlock_error *err);

struct egress_policy *egress_policy_copy(const struct egress_policy *p);
/* Accepts NULL, returns NULL. */
struct egress_policy *egress_policy_free(struct egress_policy *p);
static inline void egress_policy_freep(struct egress_policy **p)
{
        egress_policy_free(*p);
}

/* {"mode", "allow": [rule texts], "max_connections", "max_bytes"}: for GET /v1/sessions/ID,
 * `airlock profile show` and the session's saved state (parses back with
 * egress_policy_parse). */
json_t *egress_policy_to_json(const struct egress_policy *p);

/* Whether a destination asked for by name (lowercased by the caller, no trailing dot) and port
 * matches a NAME or WILDCARD rule. */
bool egress_policy_allows_name(const struct egress_policy *p, const char *name, uint16_t port);

/* Whether a destination asked for by address matches an ADDR rule. addr is a sockaddr_in or
 * sockaddr_in6 (a v4-mapped v6 address is checked as the v4 address); its port is ignored. */
bool egress_policy_allows_addr(const struct egress_policy *p, const struct sockaddr *addr,
                               uint16_t port);

/* Addresses no session may reach whatever its policy says (the daemon fills it at start). */
struct egress_denylist {
        /* The daemon's own listening sockets (API, metrics, gateway), as getsockname() gave
         * them: a wildcard address (0.0.0.0, ::) forbids its port on every address (the
         * proxy cannot tell cheaply which addresses are the host's: deny); a loopback one
         * (127.0.0.1:8080) forbids 8080 on every loopback address (127.0.0.0/8, ::1); any
         * other forbids exactly that address and port. */
        struct sockaddr_storage *listen;
        size_t n_listen;
};

/* Whether addr:port may never be reached, with the reason in why (e.g. "169.254.169.254 is the
 * cloud metadata address", "127.0.0.1:8080 is the daemon's own API"). Always forbidden:
 * unspecified (0.0.0.0, ::), multicast, broadcast, link-local 169.254.0.0/16 and fe80::/10
 * (the metadata address among them), fd00:ec2::254, the daemon's listening ports as above, and
 * the v4-mapped or NAT64-less spellings of all of these. addr may be v4 or v6. */
bool egress_addr_forbidden(const struct egress_denylist *deny, const struct sockaddr *addr,
                           uint16_t port, char *why, size_t why_size);

/* Inside the sandbox (its own network namespace, the proxy's listeners put there by the daemon):
 *   http://127.0.0.1:3128    HTTP proxy: CONNECT host:port, and absolute-URI plain HTTP
 *   socks5h://127.0.0.1:1080 SOCKS5 (no auth; CONNECT; IPv4, IPv6 and domain-name targets)
 *   forwarders: each NAME rule and each single-address IPv4 ADDR rule gets a TCP listener that
 *   forwards to it: a name's at 127.0.1.N:port (N = 1 + its index among the forwarded names,
 *   the sandbox's /etc/hosts maps the name there); an IPv4 address's at that address itself,
 *   added to the sandbox's loopback, so `connect("10.1.2.7", 5432)` and
 *   `connect("db.internal", 5432)` just work.
 * A microVM guest (src/vm/vm.h) reaches the namespace only through QEMU's user network, which
 * turns its connections to the host address 10.0.2.2 into ones to 127.0.0.1 there and makes the
 * others as they are: its 127/8 is its own, so the names' forwarders listen at 10.0.3.N instead
 * (EGRESS_FORWARD_GUEST), an address the guest routes out. */
#define EGRESS_PROXY_PORT 3128
#define EGRESS_SOCKS_PORT 1080

/* Where the named rules' forwarders listen: 127.0.1.N, or 10.0.3.N for a microVM guest. */
enum egress_forward_net {
        EGRESS_FORWARD_LOOPBACK, /* 127.0.1.N: the namespaces tier */
        EGRESS_FORWARD_GUEST,    /* 10.0.3.N: added to the namespace's loopback */
};

struct egress_forward {
        const struct egress_rule *rule; /* borrowed from the policy */
        struct sockaddr_in listen;      /* where the forwarder listens inside the sandbox */
};

/* The forwarders of a policy, in rule order (names first get their N of net in order of
 * appearance). Returns the count (at most EGRESS_RULES_MAX) and fills out (caller-sized to
 * EGRESS_RULES_MAX). Mode none: 0. */
size_t egress_policy_forwards(const struct egress_policy *p, enum egress_forward_net net,
                              struct egress_forward *out);

/* The lines the sandbox's /etc/hosts gets for the forwarded names ("127.0.1.1\tdb.internal\n"...,
 * or "10.0.3.1\t..." for EGRESS_FORWARD_GUEST), a new string ("" for none), or NULL when out of
 * memory. */
char *egress_policy_hosts_text(const struct egress_policy *p, enum egress_forward_net net);

/* The TCP ports code in the sandbox must be allowed to connect to (Landlock's
 * LANDLOCK_ACCESS_NET_CONNECT_TCP rules): 3128, 1080 and every forwarder's port, sorted, unique.
 * Returns the count; out has room for EGRESS_RULES_MAX + 2. Mode none: 0. */
size_t egress_policy_sandbox_ports(const struct egress_policy *p, uint16_t *out);
