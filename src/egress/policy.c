/* The egress policy as data: turns the "network" value of a profile or of a session request into
 * rules, narrows a profile's rules for one session and answers whether a destination may be
 * reached. Pure and quiet (no I/O, no DNS, no logging), so that the profile loader, the sessions
 * API and the proxy engine (egress.c) share one reading of the rules. See policy.h and
 * docs/NETWORK.md. */
#include "policy.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/util.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 253u
#define LABEL_MAX_LEN 63u
/* A rule is at most a bracketed IPv6 CIDR or a 253-byte name, then ":65535"; anything longer is
 * not a rule, and refusing it early keeps messages and copies bounded. */
#define RULE_TEXT_MAX 300u
/* Each distinct forwarded name gets 127.0.1.N, N = 1 .. 254. */
#define FORWARD_NAMES_MAX 254u

#define MAX_CONNECTIONS_MAX 4096u
#define MAX_BYTES_MIN (UINT64_C(1) << 10)
#define MAX_BYTES_MAX (UINT64_C(1) << 40)

#define EXAMPLE_OBJECT "{\"mode\": \"allow\", \"allow\": [\"pypi.internal:443\"]}"
#define NARROW_ONLY "a session can only narrow its profile's network"

/* Where messages go and what they start with: "SOURCE: network.allow[3]: ..." (source may be
 * NULL for a session's request, whose messages start at the key). */
struct ctx {
        const char *source;
        struct airlock_error *err;
};

/* A user's value for a message, between single quotes, cut at 64 bytes, with bytes outside
 * printable ASCII written as \xNN: a rule cannot put newlines or terminal escapes into a message
 * that ends up in a log. */
#define SHOWN_BYTES 64u
struct shown {
        char s[4 * SHOWN_BYTES + 8];
};

static const char *show(struct shown *b, const char *s)
{
        size_t o = 0, i;

        b->s[o++] = '\'';
        for (i = 0; s[i] && i < SHOWN_BYTES; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
                        b->s[o++] = (char) c;
                else
                        o += (size_t) snprintf(b->s + o, 5, "\\x%02x", c);
        }
        if (s[i]) {
                memcpy(b->s + o, "...", 3);
                o += 3;
        }
        b->s[o++] = '\'';
        b->s[o] = '\0';
        return b->s;
}

static int fail(const struct ctx *ctx, int r, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static int fail(const struct ctx *ctx, int r, const char *key, const char *fmt, ...)
{
        char msg[AIRLOCK_ERROR_MAX];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (ctx->source)
                return airlock_error_set(ctx->err, r, "%s: %s: %s", ctx->source, key, msg);
        return airlock_error_set(ctx->err, r, "%s: %s", key, msg);
}

/* An address of either family; a v4-mapped IPv6 address is kept as IPv4 (ip_from_*). */
struct ip {
        int family;
        uint8_t a[16];
};

static size_t ip_len(int family)
{
        return family == AF_INET ? 4 : 16;
}

static bool ip_is_v4_mapped(const uint8_t a[16])
{
        static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
        return memcmp(a, prefix, sizeof(prefix)) == 0;
}

static void ip_set(struct ip *ip, int family, const uint8_t *a)
{
        memset(ip, 0, sizeof(*ip));
        if (family == AF_INET6 && ip_is_v4_mapped(a)) {
                ip->family = AF_INET;
                memcpy(ip->a, a + 12, 4);
                return;
        }
        ip->family = family;
        memcpy(ip->a, a, ip_len(family));
}

static bool ip_from_sockaddr(const struct sockaddr *sa, struct ip *ip)
{
        if (!sa)
                return false;
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
                ip_set(ip, AF_INET, (const uint8_t *) &in->sin_addr);
                return true;
        }
        if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
                ip_set(ip, AF_INET6, in6->sin6_addr.s6_addr);
                return true;
        }
        return false;
}

static uint16_t sockaddr_port(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET)
                return ntohs(((const struct sockaddr_in *) sa)->sin_port);
        if (sa->sa_family == AF_INET6)
                return ntohs(((const struct sockaddr_in6 *) sa)->sin6_port);
        return 0;
}

static const char *ip_text(const struct ip *ip, char *buf, size_t size)
{
        if (!inet_ntop(ip->family, ip->a, buf, (socklen_t) size))
                (void) snprintf(buf, size, "?");
        return buf;
}

/* Whether the first prefix bits of a and b are equal. */
static bool prefix_equal(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
        unsigned bytes = prefix / 8, bits = prefix % 8;

        if (memcmp(a, b, bytes) != 0)
                return false;
        if (bits == 0)
                return true;
        return ((a[bytes] ^ b[bytes]) & (uint8_t) (0xff00u >> bits)) == 0;
}

/* Whether a has any bit set after the first prefix bits (len bytes in all). */
static bool host_bits_set(const uint8_t *a, size_t len, unsigned prefix)
{
        for (size_t i = prefix / 8; i < len; i++) {
                uint8_t mask = i == prefix / 8 ? (uint8_t) (0xffu >> (prefix % 8)) : 0xff;
                if (a[i] & mask)
                        return true;
        }
        return false;
}

static void clear_host_bits(uint8_t *a, size_t len, unsigned prefix)
{
        for (size_t i = prefix / 8; i < len; i++)
                a[i] &= i == prefix / 8 ? (uint8_t) (0xff00u >> (prefix % 8)) : 0;
}

/* Addresses no destination may be, whatever a policy says; the first block that holds an
 * address names it, so the specific ones come before the blocks around them. */
struct forbidden_block {
        int family;
        uint8_t a[16];
        unsigned prefix;
        const char *what;
};

static const struct forbidden_block forbidden_blocks[] = {
        { AF_INET, { 169, 254, 169, 254 }, 32, "the cloud metadata address" },
        { AF_INET, { 0, 0, 0, 0 }, 32, "the unspecified address" },
        { AF_INET, { 0 }, 8, "in 0.0.0.0/8 (\"this network\", not a destination)" },
        { AF_INET, { 169, 254 }, 16, "link-local (169.254.0.0/16)" },
        { AF_INET, { 224 }, 4, "multicast (224.0.0.0/4)" },
        { AF_INET, { 255, 255, 255, 255 }, 32, "the broadcast address" },
        { AF_INET, { 240 }, 4, "reserved (240.0.0.0/4)" },
        { AF_INET6, { 0 }, 128, "the unspecified address" },
        { AF_INET6,
          { 0xfd, 0, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54 },
          128,
          "the cloud metadata address (IPv6)" },
        { AF_INET6, { 0xfe, 0x80 }, 10, "link-local (fe80::/10)" },
        { AF_INET6, { 0xff }, 8, "multicast (ff00::/8)" },
};

static const struct forbidden_block *forbidden_block_of(const struct ip *ip)
{
        for (size_t i = 0; i < ELEMENTSOF(forbidden_blocks); i++) {
                const struct forbidden_block *b = &forbidden_blocks[i];
                if (b->family == ip->family && prefix_equal(b->a, ip->a, b->prefix))
                        return b;
        }
        return NULL;
}

/* The IPv4 address some IPv6 spellings carry, which a host or a gateway may turn into IPv4
 * traffic: v4-compatible ::a.b.c.d (not ::, ::1 and the rest of ::/104, which are IPv6's own),
 * NAT64's 64:ff9b::/96 (RFC 6052) and 6to4's 2002:AABB:CCDD::/48 (RFC 3056). v4-mapped
 * addresses are already IPv4 here (ip_set). */
static bool ip_embedded_v4(const struct ip *ip, struct ip *ret_v4)
{
        static const uint8_t zero[12] = { 0 };
        static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b };

        if (ip->family != AF_INET6)
                return false;
        memset(ret_v4, 0, sizeof(*ret_v4));
        ret_v4->family = AF_INET;
        if ((memcmp(ip->a, zero, 12) == 0 && ip->a[12] != 0) || memcmp(ip->a, nat64, 12) == 0) {
                memcpy(ret_v4->a, ip->a + 12, 4);
                return true;
        }
        if (ip->a[0] == 0x20 && ip->a[1] == 0x02) {
                memcpy(ret_v4->a, ip->a + 2, 4);
                return true;
        }
        return false;
}

static bool ip_is_loopback(const struct ip *ip)
{
        static const uint8_t v6[16] = { [15] = 1 };

        if (ip->family == AF_INET)
                return ip->a[0] == 127;
        return memcmp(ip->a, v6, 16) == 0;
}

static bool ip_is_any(const struct ip *ip)
{
        static const uint8_t zero[16] = { 0 };
        return memcmp(ip->a, zero, ip_len(ip->family)) == 0;
}

static bool ip_equal(const struct ip *a, const struct ip *b)
{
        return a->family == b->family && memcmp(a->a, b->a, ip_len(a->family)) == 0;
}

static void set_why(char *why, size_t why_size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void set_why(char *why, size_t why_size, const char *fmt, ...)
{
        va_list ap;

        if (!why || why_size == 0)
                return;
        va_start(ap, fmt);
        (void) vsnprintf(why, why_size, fmt, ap);
        va_end(ap);
}

/* Whether the daemon listens on ip:port (deny->listen, as policy.h describes). */
static const struct sockaddr_storage *daemon_listener(const struct egress_denylist *deny,
                                                      const struct ip *ip, uint16_t port)
{
        for (size_t i = 0; deny && i < deny->n_listen; i++) {
                const struct sockaddr *sa = (const struct sockaddr *) &deny->listen[i];
                struct ip l;

                if (!ip_from_sockaddr(sa, &l) || sockaddr_port(sa) != port || port == 0)
                        continue;
                if (ip_is_any(&l) || (ip_is_loopback(&l) && ip_is_loopback(ip)) || ip_equal(&l, ip))
                        return &deny->listen[i];
        }
        return NULL;
}

static const char *sockaddr_text(const struct sockaddr *sa, char *buf, size_t size)
{
        char a[INET6_ADDRSTRLEN];
        struct ip ip;

        if (!ip_from_sockaddr(sa, &ip)) {
                (void) snprintf(buf, size, "?");
                return buf;
        }
        (void) ip_text(&ip, a, sizeof(a));
        (void) snprintf(buf, size, ip.family == AF_INET6 ? "[%s]:%u" : "%s:%u", a,
                        (unsigned) sockaddr_port(sa));
        return buf;
}

/* Checks one address: the forbidden blocks and the daemon's listeners. shown is how the caller
 * spelled it (when that differs from ip, e.g. a NAT64 address carrying ip). */
static bool ip_forbidden(const struct egress_denylist *deny, const struct ip *ip, uint16_t port,
                         const char *shown, char *why, size_t why_size)
{
        const struct forbidden_block *b = forbidden_block_of(ip);
        const struct sockaddr_storage *l;
        char a[INET6_ADDRSTRLEN], lt[INET6_ADDRSTRLEN + 16];

        (void) ip_text(ip, a, sizeof(a));
        if (b) {
                if (shown)
                        set_why(why, why_size, "%s maps to %s, %s", shown, a, b->what);
                else
                        set_why(why, why_size, "%s is %s", a, b->what);
                return true;
        }
        l = daemon_listener(deny, ip, port);
        if (l) {
                (void) sockaddr_text((const struct sockaddr *) l, lt, sizeof(lt));
                if (shown)
                        set_why(why, why_size,
                                "%s maps to %s, and port %u there is the daemon's own listening "
                                "socket (%s)",
                                shown, a, (unsigned) port, lt);
                else
                        set_why(why, why_size,
                                "%s%s%s:%u is the daemon's own listening socket (%s)",
                                ip->family == AF_INET6 ? "[" : "", a,
                                ip->family == AF_INET6 ? "]" : "", (unsigned) port, lt);
                return true;
        }
        return false;
}

bool egress_addr_forbidden(const struct egress_denylist *deny, const struct sockaddr *addr,
                           uint16_t port, char *why, size_t why_size)
{
        char shown[INET6_ADDRSTRLEN];
        struct ip ip, v4;

        if (!ip_from_sockaddr(addr, &ip)) {
                set_why(why, why_size, "not an IPv4 or IPv6 address");
                return true;
        }
        if (ip_forbidden(deny, &ip, port, NULL, why, why_size))
                return true;
        if (ip_embedded_v4(&ip, &v4))
                return ip_forbidden(deny, &v4, port, ip_text(&ip, shown, sizeof(shown)), why,
                                    why_size);
        return false;
}

/* A DNS name as rules and destinations use it: labels of [a-z0-9_-] (lowercase; '_' because
 * internal zones use it, e.g. Active Directory's service names), 1..63 bytes, not starting or
 * ending with '-'; at most 253 bytes; the last label not all digits (that is an address, or a
 * typo of one). Returns NULL when valid, else what is wrong. */
static const char *name_problem(const char *s)
{
        size_t len = strlen(s), label = 0;
        bool digits_only = true;

        if (len == 0)
                return "the name is empty";
        if (len > NAME_MAX_LEN)
                return "the name is longer than 253 characters";
        for (size_t i = 0; i <= len; i++) {
                char c = s[i];
                if (c == '.' || c == '\0') {
                        if (label == 0)
                                return "the name has an empty label (\"..\", or a leading dot)";
                        if (s[i - 1] == '-')
                                return "a label of the name ends with '-'";
                        if (c == '.') {
                                label = 0;
                                digits_only = true;
                        }
                        continue;
                }
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
                        return "a name has only letters, digits, '-', '_' and dots";
                if (c == '-' && label == 0)
                        return "a label of the name starts with '-'";
                if (c < '0' || c > '9')
                        digits_only = false;
                if (++label > LABEL_MAX_LEN)
                        return "a label of the name is longer than 63 characters";
        }
        if (digits_only)
                return "the last label is all digits: not a name (write an IPv4 address as "
                       "a.b.c.d)";
        return NULL;
}

/* Whether name is name_below_suffix: "a.b.corp" is below "corp" and "b.corp", not below "corp"
 * itself or "xcorp". */
static bool name_is_below(const char *name, const char *suffix)
{
        size_t n = strlen(name), s = strlen(suffix);

        return n > s + 1 && name[n - s - 1] == '.' && strcmp(name + n - s, suffix) == 0;
}

/* Parses a decimal number of at most max_digits digits without a sign or leading zeros. */
static bool parse_decimal(const char *s, size_t len, size_t max_digits, unsigned long *ret)
{
        unsigned long v = 0;

        if (len == 0 || len > max_digits || (s[0] == '0' && len > 1))
                return false;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (unsigned long) (s[i] - '0');
        }
        *ret = v;
        return true;
}

static void rule_done(struct egress_rule *r)
{
        free(r->text);
        free(r->name);
        memset(r, 0, sizeof(*r));
}

/* Fills r->text from the other fields. Returns 0 or -ENOMEM. */
static int rule_make_text(struct egress_rule *r)
{
        char a[INET6_ADDRSTRLEN], prefix[8] = "";
        int n;

        switch (r->kind) {
        case EGRESS_RULE_NAME:
                n = asprintf(&r->text, "%s:%u", r->name, (unsigned) r->port);
                break;
        case EGRESS_RULE_WILDCARD:
                n = asprintf(&r->text, "*.%s:%u", r->name, (unsigned) r->port);
                break;
        case EGRESS_RULE_ADDR:
        default:
                if (!inet_ntop(r->family, r->addr, a, sizeof(a)))
                        return -EINVAL;
                if (r->prefix != (r->family == AF_INET ? 32u : 128u))
                        (void) snprintf(prefix, sizeof(prefix), "/%u", r->prefix);
                if (r->family == AF_INET)
                        n = asprintf(&r->text, "%s%s:%u", a, prefix, (unsigned) r->port);
                else
                        n = asprintf(&r->text, "[%s%s]:%u", a, prefix, (unsigned) r->port);
                break;
        }
        if (n < 0) {
                r->text = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* Parses an address with an optional "/prefix" (host is a NUL-terminated copy without
 * brackets) into r. v4-mapped IPv6 rules become IPv4 rules, since destinations are matched that
 * way (policy.h). */
static int parse_addr_rule(const struct ctx *ctx, const char *key, const char *rule, char *host,
                           int family, struct egress_rule *r)
{
        struct shown q, q2;
        char *slash = strchr(host, '/');
        unsigned full = family == AF_INET ? 32 : 128;
        unsigned long prefix = full;
        uint8_t a[16] = { 0 };
        struct ip ip;

        if (slash) {
                *slash = '\0';
                if (!parse_decimal(slash + 1, strlen(slash + 1), 3, &prefix) || prefix > full)
                        return fail(ctx, -EINVAL, key,
                                    "%s: expected a prefix length 0..%u after '/', got %s",
                                    show(&q, rule), full, show(&q2, slash + 1));
        }
        if (family == AF_INET6 && strchr(host, '%'))
                return fail(ctx, -EINVAL, key,
                            "%s: an IPv6 zone index ('%%...') has no meaning here; use a global "
                            "address",
                            show(&q, rule));
        if (inet_pton(family, host, a) != 1)
                return fail(ctx, -EINVAL, key, "%s: %s is not a valid %s address", show(&q, rule),
                            show(&q2, host), family == AF_INET ? "IPv4" : "IPv6");
        if (host_bits_set(a, ip_len(family), (unsigned) prefix)) {
                char net[INET6_ADDRSTRLEN];

                clear_host_bits(a, ip_len(family), (unsigned) prefix);
                (void) inet_ntop(family, a, net, sizeof(net));
                return fail(ctx, -EINVAL, key,
                            "%s: the block has host bits set after /%lu; write its network "
                            "address, %s/%lu",
                            show(&q, rule), prefix, net, prefix);
        }
        ip_set(&ip, family, a);
        r->kind = EGRESS_RULE_ADDR;
        r->family = ip.family;
        memcpy(r->addr, ip.a, sizeof(r->addr));
        r->prefix = (unsigned) prefix;
        /* A v4-mapped block with host bits clear has a prefix of at least 96. */
        if (family == AF_INET6 && ip.family == AF_INET) {
                assert(prefix >= 96);
                r->prefix -= 96;
        }
        return 0;
}

/* Refuses a rule that can never be used: a single forbidden address (egress_addr_forbidden
 * without listeners), or a block inside a forbidden block. */
static int check_rule_reachable(const struct ctx *ctx, const char *key, const char *rule,
                                const struct egress_rule *r)
{
        unsigned full = r->family == AF_INET ? 32 : 128;
        char why[160], a[INET6_ADDRSTRLEN];
        struct shown q;

        if (r->prefix == full) {
                struct sockaddr_storage ss = { 0 };
                if (r->family == AF_INET) {
                        struct sockaddr_in *in = (struct sockaddr_in *) &ss;
                        in->sin_family = AF_INET;
                        memcpy(&in->sin_addr, r->addr, 4);
                } else {
                        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
                        in6->sin6_family = AF_INET6;
                        memcpy(&in6->sin6_addr, r->addr, 16);
                }
                if (egress_addr_forbidden(NULL, (struct sockaddr *) &ss, r->port, why, sizeof(why)))
                        return fail(ctx, -EINVAL, key, "%s can never be reached: %s",
                                    show(&q, rule), why);
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(forbidden_blocks); i++) {
                const struct forbidden_block *b = &forbidden_blocks[i];
                if (b->family == r->family && r->prefix >= b->prefix &&
                    prefix_equal(b->a, r->addr, b->prefix))
                        return fail(ctx, -EINVAL, key, "%s can never be reached: %s/%u is %s",
                                    show(&q, rule), inet_ntop(b->family, b->a, a, sizeof(a)),
                                    b->prefix, b->what);
        }
        return 0;
}

static int parse_name_rule(const struct ctx *ctx, const char *key, const char *rule, char *host,
                           struct egress_rule *r)
{
        struct shown q, q2;
        const char *problem;
        struct in_addr ignored;
        size_t len = strlen(host);

        for (char *c = host; *c; c++)
                if (*c >= 'A' && *c <= 'Z')
                        *c = (char) (*c - 'A' + 'a');
        /* A fully-qualified "name.:443" is the same name. */
        if (len > 1 && host[len - 1] == '.')
                host[len - 1] = '\0';

        r->kind = EGRESS_RULE_NAME;
        if (strncmp(host, "*.", 2) == 0) {
                r->kind = EGRESS_RULE_WILDCARD;
                memmove(host, host + 2, strlen(host + 2) + 1);
        }
        if (strchr(host, '*'))
                return fail(ctx, -EINVAL, key,
                            "%s: '*' is allowed only as the whole first label, as in "
                            "'*.corp.internal:443'",
                            show(&q, rule));
        problem = name_problem(host);
        if (problem)
                return fail(ctx, -EINVAL, key,
                            "%s: expected a DNS name, an IPv4 address, [IPv6] or a CIDR block "
                            "before ':PORT'; %s",
                            show(&q, rule), problem);
        /* inet_aton (and so getaddrinfo) reads "0x7f.1" or "2130706433" as an address. */
        if (inet_aton(host, &ignored))
                return fail(ctx, -EINVAL, key,
                            "%s: %s is an IPv4 address in an unusual spelling; write it as "
                            "a.b.c.d",
                            show(&q, rule), show(&q2, host));
        if (strcmp(host, "localhost") == 0 || name_is_below(host, "localhost"))
                return fail(ctx, -EINVAL, key,
                            "%s: inside the sandbox localhost is the sandbox itself; name the "
                            "host's address instead (127.0.0.1:PORT)",
                            show(&q, rule));
        r->name = strdup(host);
        if (!r->name)
                return -ENOMEM;
        return 0;
}

/* Parses one rule "host:port" into r (zeroed by the caller; cleared with rule_done on error). */
static int parse_rule(const struct ctx *ctx, const char *key, const char *rule,
                      struct egress_rule *r)
{
        _cleanup_free_ char *host = NULL;
        const char *port_text, *colon;
        size_t len = strlen(rule);
        unsigned long port;
        struct shown q, q2;
        int family = 0, ret;

        if (len == 0)
                return fail(ctx, -EINVAL, key,
                            "expected a rule 'host:port' such as 'pypi.internal:443', got an "
                            "empty string");
        if (len > RULE_TEXT_MAX)
                return fail(ctx, -EINVAL, key, "%s: a rule is at most %u characters",
                            show(&q, rule), RULE_TEXT_MAX);
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) rule[i];
                if (c <= 0x20 || c >= 0x7f)
                        return fail(ctx, -EINVAL, key,
                                    "%s: whitespace, control and non-ASCII characters are not "
                                    "part of a rule 'host:port' (write international names in "
                                    "their xn-- form)",
                                    show(&q, rule));
        }
        if (strstr(rule, "://"))
                return fail(ctx, -EINVAL, key,
                            "%s: a rule is 'host:port', not a URL: no scheme, no path "
                            "(e.g. 'pypi.internal:443')",
                            show(&q, rule));
        if (strchr(rule, '@'))
                return fail(ctx, -EINVAL, key,
                            "%s: a rule is 'host:port' without user info ('user@')",
                            show(&q, rule));

        if (rule[0] == '[') {
                const char *close = strchr(rule, ']');
                const char *after;

                if (!close)
                        return fail(ctx, -EINVAL, key, "%s: missing ']' after the IPv6 address",
                                    show(&q, rule));
                /* "[fd00::]/64:443" is accepted as well as the canonical "[fd00::/64]:443". */
                after = close + 1;
                if (*after == '/') {
                        colon = strchr(after, ':');
                        if (!colon)
                                colon = after + strlen(after);
                        if (asprintf(&host, "%.*s%.*s", (int) (close - rule - 1), rule + 1,
                                     (int) (colon - after), after) < 0) {
                                host = NULL;
                                return -ENOMEM;
                        }
                } else {
                        colon = after;
                        host = strndup(rule + 1, (size_t) (close - rule - 1));
                        if (!host)
                                return -ENOMEM;
                }
                family = AF_INET6;
        } else {
                colon = strrchr(rule, ':');
                if (colon && memchr(rule, ':', (size_t) (colon - rule)))
                        return fail(ctx, -EINVAL, key,
                                    "%s: an IPv6 address goes in brackets, as in "
                                    "'[fd00::7]:5432'",
                                    show(&q, rule));
                if (!colon)
                        colon = rule + len;
                host = strndup(rule, (size_t) (colon - rule));
                if (!host)
                        return -ENOMEM;
        }
        if (*colon != ':')
                return fail(ctx, -EINVAL, key,
                            "%s: missing ':PORT'; every rule names a port (1..65535), e.g. "
                            "'pypi.internal:443'",
                            show(&q, rule));
        port_text = colon + 1;
        if (!parse_decimal(port_text, strlen(port_text), 5, &port) || port < 1 || port > 65535) {
                if (strchr(port_text, '/'))
                        return fail(ctx, -EINVAL, key, "%s: a rule is 'host:port', without a path",
                                    show(&q, rule));
                return fail(ctx, -EINVAL, key, "%s: expected a port 1..65535 after ':', got %s",
                            show(&q, rule), show(&q2, port_text));
        }
        r->port = (uint16_t) port;
        if (host[0] == '\0')
                return fail(ctx, -EINVAL, key, "%s: missing the host before ':PORT'",
                            show(&q, rule));

        if (family == 0) {
                /* Digits and dots (with an optional "/n") can only be meant as IPv4. */
                bool numeric = strspn(host, "0123456789./") == strlen(host);
                char *slash = strchr(host, '/');

                if (slash && !numeric)
                        return fail(ctx, -EINVAL, key,
                                    "%s: a rule is 'host:port', without a path; a block is "
                                    "a.b.c.d/n:port",
                                    show(&q, rule));
                if (numeric)
                        family = AF_INET;
        }
        if (family != 0) {
                ret = parse_addr_rule(ctx, key, rule, host, family, r);
                if (ret < 0)
                        return ret;
                ret = check_rule_reachable(ctx, key, rule, r);
        } else {
                ret = parse_name_rule(ctx, key, rule, host, r);
        }
        if (ret < 0)
                return ret;
        return rule_make_text(r);
}

static struct egress_policy *policy_new(enum egress_mode mode)
{
        struct egress_policy *p = calloc(1, sizeof(*p));

        if (!p)
                return NULL;
        p->mode = mode;
        p->max_connections = EGRESS_DEFAULT_MAX_CONNECTIONS;
        p->max_bytes = EGRESS_DEFAULT_MAX_BYTES;
        return p;
}

struct egress_policy *egress_policy_free(struct egress_policy *p)
{
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_rules; i++)
                rule_done(&p->rules[i]);
        free(p->rules);
        free(p);
        return NULL;
}

static size_t distinct_names(const struct egress_policy *p, size_t upto)
{
        size_t n = 0;

        for (size_t i = 0; i < upto; i++) {
                bool seen = false;
                if (p->rules[i].kind != EGRESS_RULE_NAME)
                        continue;
                for (size_t j = 0; j < i && !seen; j++)
                        seen = p->rules[j].kind == EGRESS_RULE_NAME &&
                               strcmp(p->rules[j].name, p->rules[i].name) == 0;
                n += !seen;
        }
        return n;
}

static int parse_allow(const struct ctx *ctx, const json_t *v, struct egress_policy *p)
{
        char key[48];
        struct shown q;
        json_t *item;
        size_t i;
        int r;

        if (!json_is_array(v))
                return fail(ctx, -EINVAL, "network.allow",
                            "expected an array of rules 'host:port', got %s", json_type_name(v));
        if (json_array_size(v) > EGRESS_RULES_MAX)
                return fail(ctx, -EINVAL, "network.allow",
                            "%zu rules, more than the %u allowed; use wildcards ('*.corp:443') "
                            "or CIDR blocks",
                            json_array_size(v), EGRESS_RULES_MAX);
        p->rules = calloc(json_array_size(v) + 1, sizeof(*p->rules));
        if (!p->rules)
                return -ENOMEM;
        json_array_foreach (v, i, item) {
                struct egress_rule *rule = &p->rules[i];

                (void) snprintf(key, sizeof(key), "network.allow[%zu]", i);
                if (!json_is_string(item))
                        return fail(ctx, -EINVAL, key,
                                    "expected a rule 'host:port' such as 'pypi.internal:443', "
                                    "got %s",
                                    json_type_name(item));
                r = parse_rule(ctx, key, json_string_value(item), rule);
                if (r < 0) {
                        rule_done(rule);
                        return r;
                }
                p->n_rules = i + 1;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(p->rules[j].text, rule->text) == 0)
                                return fail(ctx, -EINVAL, key,
                                            "%s repeats network.allow[%zu] (%s); list each "
                                            "rule once",
                                            show(&q, json_string_value(item)), j, rule->text);
                if (rule->kind == EGRESS_RULE_NAME && distinct_names(p, i + 1) > FORWARD_NAMES_MAX)
                        return fail(ctx, -EINVAL, key,
                                    "more than %u different names; each gets its own forwarder "
                                    "address 127.0.1.N: use wildcards ('*.corp:443')",
                                    FORWARD_NAMES_MAX);
        }
        return 0;
}

static int parse_max_connections(const struct ctx *ctx, const json_t *v, uint32_t *ret)
{
        static const char *const key = "network.max_connections";

        if (!json_is_integer(v))
                return fail(ctx, -EINVAL, key,
                            "expected an integer 1..%u (connections open at once), got %s",
                            MAX_CONNECTIONS_MAX, json_type_name(v));
        if (json_integer_value(v) < 1 || json_integer_value(v) > MAX_CONNECTIONS_MAX)
                return fail(ctx, -EINVAL, key, "expected 1..%u, got %" JSON_INTEGER_FORMAT,
                            MAX_CONNECTIONS_MAX, json_integer_value(v));
        *ret = (uint32_t) json_integer_value(v);
        return 0;
}

static int parse_max_bytes(const struct ctx *ctx, const json_t *v, uint64_t *ret)
{
        static const char *const key = "network.max_bytes";
        static const char *const expected =
                "a size between 1KiB and 1TiB such as \"1GiB\", or an integer number of bytes";
        uint64_t bytes;
        struct shown q;
        int r;

        if (json_is_integer(v)) {
                if (json_integer_value(v) < 0)
                        return fail(ctx, -EINVAL, key, "expected %s, got %" JSON_INTEGER_FORMAT,
                                    expected, json_integer_value(v));
                bytes = (uint64_t) json_integer_value(v);
        } else if (json_is_string(v)) {
                r = parse_size(json_string_value(v), &bytes);
                if (r < 0)
                        return fail(ctx, -EINVAL, key, "expected %s, got %s", expected,
                                    show(&q, json_string_value(v)));
        } else {
                return fail(ctx, -EINVAL, key, "expected %s, got %s", expected, json_type_name(v));
        }
        if (bytes < MAX_BYTES_MIN || bytes > MAX_BYTES_MAX)
                return fail(ctx, -EINVAL, key, "expected %s, got %" PRIu64 " bytes", expected,
                            bytes);
        *ret = bytes;
        return 0;
}

enum {
        HAS_MODE = 1u << 0,
        HAS_ALLOW = 1u << 1,
        HAS_MAX_CONNECTIONS = 1u << 2,
        HAS_MAX_BYTES = 1u << 3,
};

/* Parses a "network" value. A profile's object must say its mode; a session's request
 * (is_request) may leave out any key, which narrowing fills from the profile: *ret_has says
 * which keys were there. */
static int parse_value(const struct ctx *ctx, const json_t *v, bool is_request,
                       struct egress_policy **ret, unsigned *ret_has)
{
        _cleanup_(egress_policy_freep) struct egress_policy *p = NULL;
        const json_t *allow = NULL;
        unsigned has = 0;
        const char *key;
        struct shown q;
        json_t *item;
        int r;

        p = policy_new(EGRESS_MODE_NONE);
        if (!p)
                return -ENOMEM;
        if (!v) {
                *ret = TAKE_PTR(p);
                *ret_has = 0;
                return 0;
        }
        if (json_is_string(v)) {
                if (strcmp(json_string_value(v), "none") != 0)
                        return fail(ctx, -EINVAL, "network",
                                    "expected \"none\" or an object such as %s, got %s",
                                    EXAMPLE_OBJECT, show(&q, json_string_value(v)));
                *ret = TAKE_PTR(p);
                *ret_has = HAS_MODE;
                return 0;
        }
        if (!json_is_object(v))
                return fail(ctx, -EINVAL, "network",
                            "expected \"none\" or an object such as %s, got %s", EXAMPLE_OBJECT,
                            json_type_name(v));

        json_object_foreach ((json_t *) v, key, item) {
                if (strcmp(key, "mode") == 0) {
                        has |= HAS_MODE;
                        if (json_is_string(item) && strcmp(json_string_value(item), "none") == 0)
                                p->mode = EGRESS_MODE_NONE;
                        else if (json_is_string(item) &&
                                 strcmp(json_string_value(item), "allow") == 0)
                                p->mode = EGRESS_MODE_ALLOW;
                        else
                                return fail(ctx, -EINVAL, "network.mode",
                                            "expected \"none\" or \"allow\", got %s",
                                            json_is_string(item) ? show(&q, json_string_value(item))
                                                                 : json_type_name(item));
                } else if (strcmp(key, "allow") == 0) {
                        has |= HAS_ALLOW;
                        allow = item;
                } else if (strcmp(key, "max_connections") == 0) {
                        has |= HAS_MAX_CONNECTIONS;
                        r = parse_max_connections(ctx, item, &p->max_connections);
                        if (r < 0)
                                return r;
                } else if (strcmp(key, "max_bytes") == 0) {
                        has |= HAS_MAX_BYTES;
                        r = parse_max_bytes(ctx, item, &p->max_bytes);
                        if (r < 0)
                                return r;
                } else {
                        return fail(ctx, -EINVAL, "network",
                                    "unknown key %s; expected mode, allow, max_connections, "
                                    "max_bytes",
                                    show(&q, key));
                }
        }
        if (allow) {
                r = parse_allow(ctx, allow, p);
                if (r < 0)
                        return r;
        }
        if (!(has & HAS_MODE)) {
                if (!is_request)
                        return fail(ctx, -EINVAL, "network.mode",
                                    "missing required key; expected \"none\" or \"allow\", as "
                                    "in %s",
                                    EXAMPLE_OBJECT);
                if (p->n_rules > 0)
                        p->mode = EGRESS_MODE_ALLOW;
        }
        if (p->mode == EGRESS_MODE_NONE && p->n_rules > 0)
                return fail(ctx, -EINVAL, "network.allow",
                            "rules need \"mode\": \"allow\" (the mode is \"none\")");
        if (p->mode == EGRESS_MODE_ALLOW && p->n_rules == 0 && (!is_request || allow))
                return fail(ctx, -EINVAL, "network.allow",
                            "mode \"allow\" needs at least one rule 'host:port'; for no network "
                            "say \"network\": \"none\"");
        *ret = TAKE_PTR(p);
        *ret_has = has;
        return 0;
}

int egress_policy_parse(const json_t *network, const char *source, struct egress_policy **ret,
                        struct airlock_error *err)
{
        const struct ctx ctx = { .source = source, .err = err };
        unsigned has;

        assert(ret);
        return parse_value(&ctx, network, false, ret, &has);
}

static bool rule_covers(const struct egress_rule *base, const struct egress_rule *r)
{
        if (base->port != r->port)
                return false;
        switch (r->kind) {
        case EGRESS_RULE_NAME:
                if (base->kind == EGRESS_RULE_NAME)
                        return strcmp(base->name, r->name) == 0;
                return base->kind == EGRESS_RULE_WILDCARD && name_is_below(r->name, base->name);
        case EGRESS_RULE_WILDCARD:
                return base->kind == EGRESS_RULE_WILDCARD &&
                       (strcmp(base->name, r->name) == 0 || name_is_below(r->name, base->name));
        case EGRESS_RULE_ADDR:
        default:
                return base->kind == EGRESS_RULE_ADDR && base->family == r->family &&
                       base->prefix <= r->prefix && prefix_equal(base->addr, r->addr, base->prefix);
        }
}

static int rules_copy(const struct egress_policy *from, struct egress_policy *to)
{
        to->rules = calloc(from->n_rules + 1, sizeof(*to->rules));
        if (!to->rules)
                return -ENOMEM;
        for (size_t i = 0; i < from->n_rules; i++) {
                struct egress_rule *r = &to->rules[i];

                *r = from->rules[i];
                r->text = NULL;
                r->name = NULL;
                to->n_rules = i + 1;
                r->text = strdup(from->rules[i].text);
                if (!r->text)
                        return -ENOMEM;
                if (from->rules[i].name) {
                        r->name = strdup(from->rules[i].name);
                        if (!r->name)
                                return -ENOMEM;
                }
        }
        return 0;
}

struct egress_policy *egress_policy_copy(const struct egress_policy *p)
{
        _cleanup_(egress_policy_freep) struct egress_policy *c = NULL;

        if (!p)
                return NULL;
        c = policy_new(p->mode);
        if (!c)
                return NULL;
        c->max_connections = p->max_connections;
        c->max_bytes = p->max_bytes;
        if (rules_copy(p, c) < 0)
                return NULL;
        return TAKE_PTR(c);
}

int egress_policy_narrow(const struct egress_policy *base, const json_t *request,
                         const char *profile_name, struct egress_policy **ret,
                         struct airlock_error *err)
{
        _cleanup_(egress_policy_freep) struct egress_policy *p = NULL;
        const struct ctx ctx = { .source = NULL, .err = err };
        const char *profile = profile_name ? profile_name : "?";
        unsigned has;
        int r;

        assert(base);
        assert(ret);
        if (!request) {
                p = egress_policy_copy(base);
                if (!p)
                        return -ENOMEM;
                *ret = TAKE_PTR(p);
                return 0;
        }
        r = parse_value(&ctx, request, true, &p, &has);
        if (r < 0)
                return r;
        if (!(has & HAS_MODE) && !(has & HAS_ALLOW))
                p->mode = base->mode;

        if (p->mode == EGRESS_MODE_ALLOW && base->mode == EGRESS_MODE_NONE)
                return fail(&ctx, -EPERM, "network",
                            "profile '%s' has no network (\"none\"); " NARROW_ONLY, profile);
        if (!(has & HAS_MAX_CONNECTIONS))
                p->max_connections = base->max_connections;
        else if (p->max_connections > base->max_connections)
                return fail(&ctx, -EPERM, "network.max_connections",
                            "%" PRIu32 " is more than profile '%s''s %" PRIu32 "; " NARROW_ONLY,
                            p->max_connections, profile, base->max_connections);
        if (!(has & HAS_MAX_BYTES))
                p->max_bytes = base->max_bytes;
        else if (p->max_bytes > base->max_bytes)
                return fail(&ctx, -EPERM, "network.max_bytes",
                            "%" PRIu64 " bytes is more than profile '%s''s %" PRIu64
                            "; " NARROW_ONLY,
                            p->max_bytes, profile, base->max_bytes);
        if (p->mode == EGRESS_MODE_NONE) {
                /* Asking for no network is always allowed. */
                *ret = TAKE_PTR(p);
                return 0;
        }
        if (!(has & HAS_ALLOW)) {
                r = rules_copy(base, p);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < p->n_rules; i++) {
                bool covered = false;
                char key[48];

                for (size_t j = 0; j < base->n_rules && !covered; j++)
                        covered = rule_covers(&base->rules[j], &p->rules[i]);
                if (covered)
                        continue;
                (void) snprintf(key, sizeof(key), "network.allow[%zu]", i);
                return fail(&ctx, -EPERM, key,
                            "'%s' is not in profile '%s''s allow-list; " NARROW_ONLY,
                            p->rules[i].text, profile);
        }
        *ret = TAKE_PTR(p);
        return 0;
}

json_t *egress_policy_to_json(const struct egress_policy *p)
{
        _cleanup_(json_decrefp) json_t *o = NULL;
        json_t *allow;

        if (!p)
                return NULL;
        allow = json_array();
        o = json_pack("{s:s, s:o, s:I, s:I}", "mode",
                      p->mode == EGRESS_MODE_ALLOW ? "allow" : "none", "allow", allow,
                      "max_connections", (json_int_t) p->max_connections, "max_bytes",
                      (json_int_t) p->max_bytes);
        if (!o)
                return NULL;
        for (size_t i = 0; i < p->n_rules; i++)
                if (json_array_append_new(allow, json_string(p->rules[i].text)) < 0)
                        return NULL;
        return TAKE_PTR(o);
}

bool egress_policy_allows_name(const struct egress_policy *p, const char *name, uint16_t port)
{
        if (!p || p->mode != EGRESS_MODE_ALLOW || !name || name_problem(name))
                return false;
        for (size_t i = 0; i < p->n_rules; i++) {
                const struct egress_rule *r = &p->rules[i];

                if (r->port != port)
                        continue;
                if (r->kind == EGRESS_RULE_NAME && strcmp(r->name, name) == 0)
                        return true;
                if (r->kind == EGRESS_RULE_WILDCARD && name_is_below(name, r->name))
                        return true;
        }
        return false;
}

bool egress_policy_allows_addr(const struct egress_policy *p, const struct sockaddr *addr,
                               uint16_t port)
{
        struct ip ip;

        if (!p || p->mode != EGRESS_MODE_ALLOW || !ip_from_sockaddr(addr, &ip))
                return false;
        for (size_t i = 0; i < p->n_rules; i++) {
                const struct egress_rule *r = &p->rules[i];

                if (r->kind == EGRESS_RULE_ADDR && r->port == port && r->family == ip.family &&
                    prefix_equal(r->addr, ip.a, r->prefix))
                        return true;
        }
        return false;
}

/* The N of 127.0.1.N for the NAME rule at index i: 1 + the index of its name among the distinct
 * names in order of first appearance. */
static unsigned forward_name_index(const struct egress_policy *p, size_t i)
{
        for (size_t j = 0; j < i; j++)
                if (p->rules[j].kind == EGRESS_RULE_NAME &&
                    strcmp(p->rules[j].name, p->rules[i].name) == 0)
                        return forward_name_index(p, j);
        return (unsigned) distinct_names(p, i) + 1;
}

/* The first three bytes of net's addresses, in host order (N is the last). */
static uint32_t forward_net_base(enum egress_forward_net net)
{
        return net == EGRESS_FORWARD_GUEST ? (10u << 24) | (3u << 8) : (127u << 24) | (1u << 8);
}

size_t egress_policy_forwards(const struct egress_policy *p, enum egress_forward_net net,
                              struct egress_forward *out)
{
        size_t n = 0;

        if (!p || p->mode != EGRESS_MODE_ALLOW)
                return 0;
        for (size_t i = 0; i < p->n_rules && n < EGRESS_RULES_MAX; i++) {
                const struct egress_rule *r = &p->rules[i];
                struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(r->port) };
                bool taken = false;

                if (r->kind == EGRESS_RULE_NAME) {
                        sin.sin_addr.s_addr =
                                htonl(forward_net_base(net) | forward_name_index(p, i));
                } else if (r->kind == EGRESS_RULE_ADDR && r->family == AF_INET && r->prefix == 32) {
                        memcpy(&sin.sin_addr, r->addr, 4);
                } else {
                        continue;
                }
                /* The proxy's own listeners and an earlier forwarder keep their address: an
                 * address rule 127.0.0.1:3128 is still reachable through the proxy. */
                if (ntohl(sin.sin_addr.s_addr) == INADDR_LOOPBACK &&
                    (r->port == EGRESS_PROXY_PORT || r->port == EGRESS_SOCKS_PORT))
                        continue;
                for (size_t j = 0; j < n && !taken; j++)
                        taken = out[j].listen.sin_addr.s_addr == sin.sin_addr.s_addr &&
                                out[j].listen.sin_port == sin.sin_port;
                if (taken)
                        continue;
                out[n].rule = r;
                out[n].listen = sin;
                n++;
        }
        return n;
}

char *egress_policy_hosts_text(const struct egress_policy *p, enum egress_forward_net net)
{
        uint32_t base = forward_net_base(net);
        char *text = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&text, &size);
        if (!f)
                return NULL;
        for (size_t i = 0; p && p->mode == EGRESS_MODE_ALLOW && i < p->n_rules; i++) {
                const struct egress_rule *r = &p->rules[i];
                bool seen = false;

                if (r->kind != EGRESS_RULE_NAME)
                        continue;
                for (size_t j = 0; j < i && !seen; j++)
                        seen = p->rules[j].kind == EGRESS_RULE_NAME &&
                               strcmp(p->rules[j].name, r->name) == 0;
                if (!seen)
                        (void) fprintf(f, "%u.%u.%u.%u\t%s\n", base >> 24, (base >> 16) & 255u,
                                       (base >> 8) & 255u, forward_name_index(p, i), r->name);
        }
        if (ferror(f)) {
                (void) fclose(f);
                free(text);
                return NULL;
        }
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

static int cmp_u16(const void *a, const void *b)
{
        return (int) *(const uint16_t *) a - (int) *(const uint16_t *) b;
}

size_t egress_policy_sandbox_ports(const struct egress_policy *p, uint16_t *out)
{
        size_t n = 0, u = 0;

        if (!p || p->mode != EGRESS_MODE_ALLOW)
                return 0;
        out[n++] = EGRESS_PROXY_PORT;
        out[n++] = EGRESS_SOCKS_PORT;
        /* The ports of the rules that get a forwarder (egress_policy_forwards): the ones it
         * skips share 3128, 1080 or an earlier forwarder's port, already listed. */
        for (size_t i = 0; i < p->n_rules; i++) {
                const struct egress_rule *r = &p->rules[i];
                if (r->kind == EGRESS_RULE_NAME ||
                    (r->kind == EGRESS_RULE_ADDR && r->family == AF_INET && r->prefix == 32))
                        out[n++] = r->port;
        }
        qsort(out, n, sizeof(*out), cmp_u16);
        for (size_t i = 0; i < n; i++)
                if (u == 0 || out[u - 1] != out[i])
                        out[u++] = out[i];
        return u;
}
