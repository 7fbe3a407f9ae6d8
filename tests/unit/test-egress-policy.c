/* Unit tests of the egress policy (src/egress/policy.c): parsing and its messages, the
 * canonical forms of rules, matching of names and addresses, the always-forbidden addresses,
 * narrowing for a session, and the sandbox layout (forwarders, /etc/hosts lines, ports). */
#include "egress/policy.h"

#include "base/cleanup.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void policy_freep(struct egress_policy **p)
{
        (void) egress_policy_free(*p);
}

#define _cleanup_policy_ _cleanup_(policy_freep)

static json_t *load(const char *text)
{
        json_error_t jerr;
        json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

        cr_assert_not_null(v, "bad test JSON %s: %s", text, jerr.text);
        return v;
}

/* Parses a "network" value given as JSON text; fails the test when it does not parse. */
static struct egress_policy *parse_ok(const char *text)
{
        _cleanup_(json_decrefp) json_t *v = load(text);
        struct airlock_error err = { "" };
        struct egress_policy *p = NULL;
        int r = egress_policy_parse(v, "profile 'etl' (etl.json)", &p, &err);

        cr_assert_eq(r, 0, "%s: %d %s", text, r, err.msg);
        cr_assert_not_null(p);
        return p;
}

/* A policy of mode allow with the given rules (a JSON array's contents). */
static struct egress_policy *allow_ok(const char *rules)
{
        char text[8192];

        (void) snprintf(text, sizeof(text), "{\"mode\": \"allow\", \"allow\": [%s]}", rules);
        return parse_ok(text);
}

static struct sockaddr_storage addr(const char *text)
{
        struct sockaddr_storage ss = { 0 };
        struct sockaddr_in *in = (struct sockaddr_in *) &ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;

        if (inet_pton(AF_INET, text, &in->sin_addr) == 1) {
                in->sin_family = AF_INET;
                return ss;
        }
        cr_assert_eq(inet_pton(AF_INET6, text, &in6->sin6_addr), 1, "bad test address %s", text);
        in6->sin6_family = AF_INET6;
        return ss;
}

static struct sockaddr_storage addr_port(const char *text, uint16_t port)
{
        struct sockaddr_storage ss = addr(text);

        if (ss.ss_family == AF_INET)
                ((struct sockaddr_in *) &ss)->sin_port = htons(port);
        else
                ((struct sockaddr_in6 *) &ss)->sin6_port = htons(port);
        return ss;
}

/* ---- parse errors ---- */

struct bad_case {
        const char *network; /* the "network" value as JSON */
        const char *expect;  /* the message contains this (after the source) */
};

#define SOURCE_KEY "profile 'etl' (etl.json): network"
#define RULE(r) "{\"mode\": \"allow\", \"allow\": [" r "]}"

static const struct bad_case bad_cases[] = {
        { "0", "network: expected \"none\" or an object such as" },
        { "\"host\"", "network: expected \"none\" or an object such as {\"mode\": \"allow\", "
                      "\"allow\": [\"pypi.internal:443\"]}, got 'host'" },
        { "[]", "network: expected \"none\" or an object such as" },
        { "{\"allow\": [\"a.b:1\"]}", "network.mode: missing required key" },
        { "{\"mode\": \"open\"}", "network.mode: expected \"none\" or \"allow\", got 'open'" },
        { "{\"mode\": 1}", "network.mode: expected \"none\" or \"allow\", got a number" },
        { "{\"mode\": \"allow\"}", "network.allow: mode \"allow\" needs at least one rule" },
        { RULE(""), "network.allow: mode \"allow\" needs at least one rule" },
        { "{\"mode\": \"none\", \"allow\": [\"a.b:1\"]}",
          "network.allow: rules need \"mode\": \"allow\"" },
        { "{\"mode\": \"allow\", \"allow\": \"a.b:1\"}",
          "network.allow: expected an array of rules 'host:port', got a string" },
        { "{\"mode\": \"none\", \"proxy\": true}",
          "network: unknown key 'proxy'; expected mode, allow, max_connections, max_bytes" },
        { RULE("1"), "network.allow[0]: expected a rule 'host:port' such as "
                     "'pypi.internal:443', got a number" },
        { RULE("\"\""), "network.allow[0]: expected a rule 'host:port' such as "
                        "'pypi.internal:443', got an empty string" },
        { RULE("\"a.b:1\", \"pypi.internal\""),
          "network.allow[1]: 'pypi.internal': missing ':PORT'; every rule names a port" },
        { RULE("\"pypi.internal:0\""),
          "network.allow[0]: 'pypi.internal:0': expected a port 1..65535 after ':', got '0'" },
        { RULE("\"pypi.internal:65536\""), "expected a port 1..65535 after ':', got '65536'" },
        { RULE("\"pypi.internal:0443\""), "expected a port 1..65535 after ':', got '0443'" },
        { RULE("\"pypi.internal:443x\""), "expected a port 1..65535 after ':', got '443x'" },
        { RULE("\"pypi.internal:\""), "expected a port 1..65535 after ':', got ''" },
        { RULE("\"pypi.internal:-1\""), "expected a port 1..65535 after ':', got '-1'" },
        { RULE("\":443\""), "':443': missing the host before ':PORT'" },
        { RULE("\"https://pypi.internal:443\""), "a rule is 'host:port', not a URL" },
        { RULE("\"pypi.internal:443/simple\""), "a rule is 'host:port', without a path" },
        { RULE("\"pypi.internal/simple:443\""), "a rule is 'host:port', without a path" },
        { RULE("\"user@pypi.internal:443\""), "without user info ('user@')" },
        { RULE("\"pypi internal:443\""), "whitespace, control and non-ASCII characters" },
        { RULE("\"pypi.internal:443 \""), "whitespace, control and non-ASCII characters" },
        { RULE("\"pypi.internal\\n:443\""), "'pypi.internal\\x0a:443': whitespace" },
        { RULE("\"b\\u00fccher.example:443\""), "'b\\xc3\\xbccher.example:443': whitespace" },
        { RULE("\"fd00::7:5432\""), "an IPv6 address goes in brackets, as in '[fd00::7]:5432'" },
        { RULE("\"[fd00::7:5432\""), "missing ']' after the IPv6 address" },
        { RULE("\"[fd00::7]5432\""), "missing ':PORT'" },
        { RULE("\"[fd00::zz]:5432\""), "'fd00::zz' is not a valid IPv6 address" },
        { RULE("\"[10.1.2.7]:5432\""), "'10.1.2.7' is not a valid IPv6 address" },
        { RULE("\"[fe80::1%eth0]:22\""), "an IPv6 zone index" },
        { RULE("\"10.1.2.300:443\""), "'10.1.2.300' is not a valid IPv4 address" },
        { RULE("\"10.1.2:443\""), "'10.1.2' is not a valid IPv4 address" },
        { RULE("\"1.2.3.4.5:443\""), "'1.2.3.4.5' is not a valid IPv4 address" },
        { RULE("\"010.1.2.3:443\""), "'010.1.2.3' is not a valid IPv4 address" },
        { RULE("\"10.1.2.7/24:443\""),
          "'10.1.2.7/24:443': the block has host bits set after /24; write its network "
          "address, 10.1.2.0/24" },
        { RULE("\"[fd00::1/64]:443\""), "host bits set after /64; write its network address, "
                                        "fd00::/64" },
        { RULE("\"10.1.2.0/33:443\""), "expected a prefix length 0..32 after '/', got '33'" },
        { RULE("\"10.1.2.0/024:443\""), "expected a prefix length 0..32 after '/', got '024'" },
        { RULE("\"10.1.2.0/:443\""), "expected a prefix length 0..32 after '/', got ''" },
        { RULE("\"[fd00::/129]:443\""), "expected a prefix length 0..128 after '/', got '129'" },
        { RULE("\"*:443\""), "'*' is allowed only as the whole first label" },
        { RULE("\"*.:443\""), "'*' is allowed only as the whole first label" },
        { RULE("\"foo.*.corp:443\""), "'*' is allowed only as the whole first label" },
        { RULE("\"*foo.corp:443\""), "'*' is allowed only as the whole first label" },
        { RULE("\"*.*.corp:443\""), "'*' is allowed only as the whole first label" },
        { RULE("\"-db.corp:443\""), "a label of the name starts with '-'" },
        { RULE("\"db-.corp:443\""), "a label of the name ends with '-'" },
        { RULE("\"db..corp:443\""), "the name has an empty label" },
        { RULE("\".corp:443\""), "the name has an empty label" },
        { RULE("\"db$.corp:443\""), "a name has only letters, digits, '-', '_' and dots" },
        { RULE("\"db.123:443\""), "the last label is all digits" },
        { RULE("\"0x7f000001:443\""), "'0x7f000001' is an IPv4 address in an unusual spelling" },
        { RULE("\"localhost:5432\""), "inside the sandbox localhost is the sandbox itself" },
        { RULE("\"db.localhost:5432\""), "inside the sandbox localhost is the sandbox itself" },
        { RULE("\"169.254.169.254:80\""), "network.allow[0]: '169.254.169.254:80' can never be "
                                          "reached: 169.254.169.254 is the cloud metadata "
                                          "address" },
        { RULE("\"0.0.0.0:80\""), "0.0.0.0 is the unspecified address" },
        { RULE("\"0.1.2.3:80\""), "0.1.2.3 is in 0.0.0.0/8" },
        { RULE("\"169.254.1.1:80\""), "169.254.1.1 is link-local (169.254.0.0/16)" },
        { RULE("\"224.0.0.1:5000\""), "224.0.0.1 is multicast (224.0.0.0/4)" },
        { RULE("\"255.255.255.255:9\""), "255.255.255.255 is the broadcast address" },
        { RULE("\"169.254.0.0/16:80\""), "can never be reached: 169.254.0.0/16 is link-local" },
        { RULE("\"239.0.0.0/8:80\""), "can never be reached: 224.0.0.0/4 is multicast" },
        { RULE("\"[::]:80\""), ":: is the unspecified address" },
        { RULE("\"[fe80::1]:22\""), "fe80::1 is link-local (fe80::/10)" },
        { RULE("\"[ff02::1]:22\""), "ff02::1 is multicast (ff00::/8)" },
        { RULE("\"[fd00:ec2::254]:80\""), "fd00:ec2::254 is the cloud metadata address (IPv6)" },
        { RULE("\"[fe80::/64]:22\""), "fe80::/10 is link-local" },
        { RULE("\"[::ffff:169.254.169.254]:80\""), "169.254.169.254 is the cloud metadata" },
        { RULE("\"[64:ff9b::a9fe:a9fe]:80\""),
          "64:ff9b::a9fe:a9fe maps to 169.254.169.254, the cloud metadata address" },
        { RULE("\"a.b:1\", \"A.B.:1\""),
          "network.allow[1]: 'A.B.:1' repeats network.allow[0] (a.b:1); list each rule once" },
        { RULE("\"10.1.2.7/32:1\", \"10.1.2.7:1\""), "repeats network.allow[0] (10.1.2.7:1)" },
        { "{\"mode\": \"none\", \"max_connections\": 0}",
          "network.max_connections: expected 1..4096, got 0" },
        { "{\"mode\": \"none\", \"max_connections\": 4097}",
          "network.max_connections: expected 1..4096, got 4097" },
        { "{\"mode\": \"none\", \"max_connections\": \"8\"}",
          "network.max_connections: expected an integer 1..4096 (connections open at once), "
          "got a string" },
        { "{\"mode\": \"none\", \"max_bytes\": \"1023\"}",
          "network.max_bytes: expected a size between 1KiB and 1TiB such as \"1GiB\", or an "
          "integer number of bytes, got 1023 bytes" },
        { "{\"mode\": \"none\", \"max_bytes\": \"2TiB\"}", "1TiB such as \"1GiB\"" },
        { "{\"mode\": \"none\", \"max_bytes\": \"lots\"}", "got 'lots'" },
        { "{\"mode\": \"none\", \"max_bytes\": -1}", "got -1" },
        { "{\"mode\": \"none\", \"max_bytes\": 1.5}", "got a number" },
};

Test(parse, malformed_values_are_einval_and_say_what_was_expected)
{
        for (size_t i = 0; i < ELEMENTSOF(bad_cases); i++) {
                _cleanup_(json_decrefp) json_t *v = load(bad_cases[i].network);
                struct airlock_error err = { "" };
                struct egress_policy *p = NULL;
                int r = egress_policy_parse(v, "profile 'etl' (etl.json)", &p, &err);

                cr_expect_eq(r, -EINVAL, "case %zu (%s): returned %d", i, bad_cases[i].network, r);
                cr_expect_null(p, "case %zu: output written on failure", i);
                cr_expect(strncmp(err.msg, SOURCE_KEY, strlen(SOURCE_KEY)) == 0,
                          "case %zu (%s): message does not start with the source and key: %s", i,
                          bad_cases[i].network, err.msg);
                cr_expect(strstr(err.msg, bad_cases[i].expect) != NULL,
                          "case %zu (%s):\n  message: %s\n  expected: %s", i, bad_cases[i].network,
                          err.msg, bad_cases[i].expect);
                egress_policy_free(p);
        }
}

/* {"mode": "allow", "allow": [n rules]}: names "hI.corp:443", or addresses "10.0.X.Y:443". */
static json_t *numbered_rules(unsigned n, bool names)
{
        json_t *a = json_array();

        for (unsigned i = 0; i < n; i++) {
                char rule[32];

                if (names)
                        (void) snprintf(rule, sizeof(rule), "h%u.corp:443", i);
                else
                        (void) snprintf(rule, sizeof(rule), "10.0.%u.%u:443", i / 256, i % 256);
                json_array_append_new(a, json_string(rule));
        }
        return json_pack("{s:s, s:o}", "mode", "allow", "allow", a);
}

Test(parse, too_many_rules_and_names)
{
        struct airlock_error err = { "" };
        struct egress_policy *p = NULL;
        json_t *v, *a;
        int r;

        /* 257 rules: one too many. */
        v = numbered_rules(EGRESS_RULES_MAX + 1, false);
        r = egress_policy_parse(v, "src", &p, &err);
        cr_expect_eq(r, -EINVAL);
        cr_expect(strstr(err.msg, "src: network.allow: 257 rules, more than the 256 allowed"), "%s",
                  err.msg);
        json_decref(v);

        /* 255 different names: each needs a forwarder address 127.0.1.N, N <= 254. */
        v = numbered_rules(255, true);
        a = json_object_get(v, "allow");
        r = egress_policy_parse(v, "src", &p, &err);
        cr_expect_eq(r, -EINVAL);
        cr_expect(strstr(err.msg, "src: network.allow[254]: more than 254 different names"), "%s",
                  err.msg);

        /* 254 of them are fine, and the same name on other ports does not count again. */
        json_array_remove(a, 254);
        json_array_append_new(a, json_string("h0.corp:5432"));
        r = egress_policy_parse(v, "src", &p, &err);
        cr_expect_eq(r, 0, "%s", err.msg);
        if (p) {
                struct egress_forward fw[EGRESS_RULES_MAX];
                size_t n = egress_policy_forwards(p, EGRESS_FORWARD_LOOPBACK, fw);
                char a253[INET_ADDRSTRLEN], a254[INET_ADDRSTRLEN];

                cr_assert_eq(n, 255);
                inet_ntop(AF_INET, &fw[253].listen.sin_addr, a253, sizeof(a253));
                inet_ntop(AF_INET, &fw[254].listen.sin_addr, a254, sizeof(a254));
                cr_expect_str_eq(a253, "127.0.1.254");
                cr_expect_str_eq(a254, "127.0.1.1");
        }
        egress_policy_free(p);
        json_decref(v);
}

Test(parse, null_err_and_null_source_are_allowed)
{
        _cleanup_(json_decrefp) json_t *v = load(RULE("\"x\""));
        struct airlock_error err = { "" };
        struct egress_policy *p = NULL;

        cr_expect_eq(egress_policy_parse(v, NULL, &p, NULL), -EINVAL);
        cr_expect_eq(egress_policy_parse(v, NULL, &p, &err), -EINVAL);
        cr_expect(strncmp(err.msg, "network.allow[0]: 'x': missing ':PORT'", 38) == 0, "%s",
                  err.msg);
        cr_expect_null(p);
}

/* ---- what parses, and to what ---- */

Test(parse, absent_and_none_are_mode_none_with_defaults)
{
        static const char *const texts[] = { "\"none\"", "{\"mode\": \"none\"}",
                                             "{\"mode\": \"none\", \"allow\": []}" };
        struct airlock_error err = { "" };
        struct egress_policy *p = NULL;

        cr_assert_eq(egress_policy_parse(NULL, "src", &p, &err), 0);
        cr_expect_eq(p->mode, EGRESS_MODE_NONE);
        cr_expect_eq(p->n_rules, 0);
        cr_expect_eq(p->max_connections, EGRESS_DEFAULT_MAX_CONNECTIONS);
        cr_expect_eq(p->max_bytes, EGRESS_DEFAULT_MAX_BYTES);
        egress_policy_free(p);
        for (size_t i = 0; i < ELEMENTSOF(texts); i++) {
                _cleanup_policy_ struct egress_policy *q = parse_ok(texts[i]);
                cr_expect_eq(q->mode, EGRESS_MODE_NONE, "%s", texts[i]);
                cr_expect_eq(q->n_rules, 0, "%s", texts[i]);
        }
        cr_expect_null(egress_policy_free(NULL));
}

struct rule_case {
        const char *rule;
        enum egress_rule_kind kind;
        const char *text;
        const char *name;
        int family;
        const char *addr;
        unsigned prefix;
        uint16_t port;
};

static const struct rule_case rule_cases[] = {
        { "pypi.internal:443", EGRESS_RULE_NAME, "pypi.internal:443", "pypi.internal", 0, NULL, 0,
          443 },
        { "PyPI.Internal.:443", EGRESS_RULE_NAME, "pypi.internal:443", "pypi.internal", 0, NULL, 0,
          443 },
        { "db:5432", EGRESS_RULE_NAME, "db:5432", "db", 0, NULL, 0, 5432 },
        { "_ldap._tcp.dc.corp:389", EGRESS_RULE_NAME, "_ldap._tcp.dc.corp:389",
          "_ldap._tcp.dc.corp", 0, NULL, 0, 389 },
        { "1e100.net:65535", EGRESS_RULE_NAME, "1e100.net:65535", "1e100.net", 0, NULL, 0, 65535 },
        { "*.Corp.Internal:443", EGRESS_RULE_WILDCARD, "*.corp.internal:443", "corp.internal", 0,
          NULL, 0, 443 },
        { "*.internal:1", EGRESS_RULE_WILDCARD, "*.internal:1", "internal", 0, NULL, 0, 1 },
        { "10.1.2.7:5432", EGRESS_RULE_ADDR, "10.1.2.7:5432", NULL, AF_INET, "10.1.2.7", 32, 5432 },
        { "10.1.2.7/32:5432", EGRESS_RULE_ADDR, "10.1.2.7:5432", NULL, AF_INET, "10.1.2.7", 32,
          5432 },
        { "10.1.2.0/24:443", EGRESS_RULE_ADDR, "10.1.2.0/24:443", NULL, AF_INET, "10.1.2.0", 24,
          443 },
        { "0.0.0.0/0:443", EGRESS_RULE_ADDR, "0.0.0.0/0:443", NULL, AF_INET, "0.0.0.0", 0, 443 },
        { "127.0.0.1:5432", EGRESS_RULE_ADDR, "127.0.0.1:5432", NULL, AF_INET, "127.0.0.1", 32,
          5432 },
        { "[FD00::7]:5432", EGRESS_RULE_ADDR, "[fd00::7]:5432", NULL, AF_INET6, "fd00::7", 128,
          5432 },
        { "[fd00:0:0::/64]:443", EGRESS_RULE_ADDR, "[fd00::/64]:443", NULL, AF_INET6, "fd00::", 64,
          443 },
        { "[fd00::]/64:443", EGRESS_RULE_ADDR, "[fd00::/64]:443", NULL, AF_INET6, "fd00::", 64,
          443 },
        { "[::/0]:443", EGRESS_RULE_ADDR, "[::/0]:443", NULL, AF_INET6, "::", 0, 443 },
        { "[::1]:5432", EGRESS_RULE_ADDR, "[::1]:5432", NULL, AF_INET6, "::1", 128, 5432 },
        { "[::ffff:10.1.2.7]:5432", EGRESS_RULE_ADDR, "10.1.2.7:5432", NULL, AF_INET, "10.1.2.7",
          32, 5432 },
        { "[::ffff:10.1.2.0/120]:443", EGRESS_RULE_ADDR, "10.1.2.0/24:443", NULL, AF_INET,
          "10.1.2.0", 24, 443 },
};

Test(parse, every_rule_kind_and_its_canonical_form)
{
        for (size_t i = 0; i < ELEMENTSOF(rule_cases); i++) {
                const struct rule_case *c = &rule_cases[i];
                _cleanup_(json_decrefp) json_t *v =
                        json_pack("{s:s, s:[s]}", "mode", "allow", "allow", c->rule);
                _cleanup_policy_ struct egress_policy *p = NULL;
                struct airlock_error err = { "" };
                const struct egress_rule *r;

                cr_assert_eq(egress_policy_parse(v, "src", &p, &err), 0, "%s: %s", c->rule,
                             err.msg);
                cr_assert_eq(p->n_rules, 1);
                r = &p->rules[0];
                cr_expect_eq(r->kind, c->kind, "%s", c->rule);
                cr_expect_str_eq(r->text, c->text, "%s", c->rule);
                cr_expect_eq(r->port, c->port, "%s", c->rule);
                if (c->name) {
                        cr_expect_str_eq(r->name, c->name, "%s", c->rule);
                } else {
                        uint8_t want[16] = { 0 };
                        cr_expect_null(r->name, "%s", c->rule);
                        cr_expect_eq(r->family, c->family, "%s", c->rule);
                        cr_assert_eq(inet_pton(c->family, c->addr, want), 1);
                        cr_expect_arr_eq(r->addr, want, 16, "%s", c->rule);
                        cr_expect_eq(r->prefix, c->prefix, "%s", c->rule);
                }
        }
}

Test(parse, caps_at_their_edges)
{
        _cleanup_policy_ struct egress_policy *lo =
                parse_ok("{\"mode\": \"none\", \"max_connections\": 1, \"max_bytes\": 1024}");
        _cleanup_policy_ struct egress_policy *hi = parse_ok(
                "{\"mode\": \"none\", \"max_connections\": 4096, \"max_bytes\": \"1TiB\"}");
        _cleanup_policy_ struct egress_policy *mid =
                parse_ok("{\"mode\": \"none\", \"max_bytes\": \"1 KiB\"}");

        cr_expect_eq(lo->max_connections, 1);
        cr_expect_eq(lo->max_bytes, 1024);
        cr_expect_eq(hi->max_connections, 4096);
        cr_expect_eq(hi->max_bytes, UINT64_C(1) << 40);
        cr_expect_eq(mid->max_bytes, 1024);
}

Test(json, round_trip_and_shape)
{
        _cleanup_policy_ struct egress_policy *p =
                parse_ok("{\"mode\": \"allow\", \"allow\": [\"DB.internal:5432\", \"*.c.d:443\","
                         " \"[fd00::]/64:443\"], \"max_connections\": 8, \"max_bytes\": \"1MiB\"}");
        _cleanup_policy_ struct egress_policy *none = parse_ok("\"none\"");
        _cleanup_policy_ struct egress_policy *back = NULL;
        _cleanup_(json_decrefp) json_t *j = egress_policy_to_json(p);
        _cleanup_(json_decrefp) json_t *jn = egress_policy_to_json(none);
        _cleanup_(json_decrefp) json_t *want = NULL;
        _cleanup_(json_decrefp) json_t *want_none = NULL;
        struct airlock_error err = { "" };

        want = json_pack("{s:s, s:[s,s,s], s:i, s:i}", "mode", "allow", "allow", "db.internal:5432",
                         "*.c.d:443", "[fd00::/64]:443", "max_connections", 8, "max_bytes",
                         1048576);
        want_none = json_pack("{s:s, s:[], s:i, s:I}", "mode", "none", "allow", "max_connections",
                              64, "max_bytes", (json_int_t) 1 << 30);
        cr_expect(json_equal(j, want), "%s", json_dumps(j, 0));
        cr_expect(json_equal(jn, want_none), "%s", json_dumps(jn, 0));
        cr_assert_eq(egress_policy_parse(j, "src", &back, &err), 0, "%s", err.msg);
        cr_expect_eq(back->n_rules, 3);
        cr_expect_str_eq(back->rules[2].text, "[fd00::/64]:443");
        egress_policy_free(back);
        back = NULL;
        cr_assert_eq(egress_policy_parse(jn, "src", &back, &err), 0, "%s", err.msg);
        cr_expect_eq(back->mode, EGRESS_MODE_NONE);
}

Test(copy, deep_and_independent)
{
        struct egress_policy *p = allow_ok("\"db.internal:5432\", \"10.1.0.0/16:5432\"");
        _cleanup_policy_ struct egress_policy *c = egress_policy_copy(p);

        cr_assert_not_null(c);
        cr_expect_null(egress_policy_copy(NULL));
        cr_expect_neq(c->rules, p->rules);
        cr_expect_neq(c->rules[0].name, p->rules[0].name);
        egress_policy_free(p);
        cr_assert_eq(c->n_rules, 2);
        cr_expect_str_eq(c->rules[0].text, "db.internal:5432");
        cr_expect_str_eq(c->rules[0].name, "db.internal");
        cr_expect_str_eq(c->rules[1].text, "10.1.0.0/16:5432");
        cr_expect_eq(c->rules[1].prefix, 16);
        cr_expect_eq(c->mode, EGRESS_MODE_ALLOW);
}

/* ---- matching ---- */

Test(match, names)
{
        _cleanup_policy_ struct egress_policy *p =
                allow_ok("\"db.internal:5432\", \"*.corp.internal:443\", \"10.0.0.0/8:443\"");
        _cleanup_policy_ struct egress_policy *none = parse_ok("\"none\"");

        cr_expect(egress_policy_allows_name(p, "db.internal", 5432));
        cr_expect_not(egress_policy_allows_name(p, "db.internal", 5433));
        cr_expect_not(egress_policy_allows_name(p, "x.db.internal", 5432));
        cr_expect_not(egress_policy_allows_name(p, "db.internal.evil", 5432));
        cr_expect(egress_policy_allows_name(p, "a.corp.internal", 443));
        cr_expect(egress_policy_allows_name(p, "b.a.corp.internal", 443));
        cr_expect_not(egress_policy_allows_name(p, "corp.internal", 443));
        cr_expect_not(egress_policy_allows_name(p, "xcorp.internal", 443));
        cr_expect_not(egress_policy_allows_name(p, "a.corp.internal", 80));
        /* Not a name as rules know them: refused rather than guessed at. */
        cr_expect_not(egress_policy_allows_name(p, "a..corp.internal", 443));
        cr_expect_not(egress_policy_allows_name(p, ".corp.internal", 443));
        cr_expect_not(egress_policy_allows_name(p, "A.corp.internal", 443));
        cr_expect_not(egress_policy_allows_name(p, "a b.corp.internal", 443));
        cr_expect_not(egress_policy_allows_name(p, "", 443));
        cr_expect_not(egress_policy_allows_name(p, NULL, 443));
        /* An address spelled as a name matches no name rule. */
        cr_expect_not(egress_policy_allows_name(p, "10.1.2.3", 443));
        cr_expect_not(egress_policy_allows_name(none, "db.internal", 5432));
        cr_expect_not(egress_policy_allows_name(NULL, "db.internal", 5432));
}

Test(match, addresses)
{
        _cleanup_policy_ struct egress_policy *p =
                allow_ok("\"10.1.2.7:5432\", \"10.1.2.0/24:443\", \"[fd00::7]:5432\", "
                         "\"[fd00:1::/64]:443\", \"db.internal:5432\"");
        _cleanup_policy_ struct egress_policy *all4 = allow_ok("\"0.0.0.0/0:443\"");
        _cleanup_policy_ struct egress_policy *all6 = allow_ok("\"[::/0]:443\"");
        struct sockaddr_storage a;

#define ALLOWS(pol, text, port)                                                                    \
        (a = addr(text), egress_policy_allows_addr(pol, (struct sockaddr *) &a, port))

        cr_expect(ALLOWS(p, "10.1.2.7", 5432));
        cr_expect_not(ALLOWS(p, "10.1.2.8", 5432));
        cr_expect_not(ALLOWS(p, "10.1.2.7", 5433));
        cr_expect(ALLOWS(p, "10.1.2.0", 443));
        cr_expect(ALLOWS(p, "10.1.2.255", 443));
        cr_expect_not(ALLOWS(p, "10.1.3.0", 443));
        cr_expect_not(ALLOWS(p, "10.1.1.255", 443));
        cr_expect(ALLOWS(p, "::ffff:10.1.2.7", 5432));
        cr_expect(ALLOWS(p, "::ffff:10.1.2.200", 443));
        cr_expect_not(ALLOWS(p, "64:ff9b::a01:207", 5432));
        cr_expect(ALLOWS(p, "fd00::7", 5432));
        cr_expect_not(ALLOWS(p, "fd00::8", 5432));
        cr_expect(ALLOWS(p, "fd00:1::", 443));
        cr_expect(ALLOWS(p, "fd00:1::ffff:ffff:ffff:ffff", 443));
        cr_expect_not(ALLOWS(p, "fd00:1:0:1::", 443));
        /* The port of the sockaddr is ignored: the port argument counts. */
        a = addr_port("10.1.2.7", 443);
        cr_expect(egress_policy_allows_addr(p, (struct sockaddr *) &a, 5432));
        /* /0 covers its whole family, and only it. */
        cr_expect(ALLOWS(all4, "1.2.3.4", 443));
        cr_expect(ALLOWS(all4, "::ffff:1.2.3.4", 443));
        cr_expect_not(ALLOWS(all4, "2001:db8::1", 443));
        cr_expect_not(ALLOWS(all4, "1.2.3.4", 80));
        cr_expect(ALLOWS(all6, "2001:db8::1", 443));
        cr_expect_not(ALLOWS(all6, "1.2.3.4", 443));
        cr_expect_not(ALLOWS(all6, "::ffff:1.2.3.4", 443));
        /* A name rule allows no address; mode none and bad input allow nothing. */
        {
                _cleanup_policy_ struct egress_policy *names = allow_ok("\"db.internal:5432\"");
                _cleanup_policy_ struct egress_policy *none = parse_ok("\"none\"");
                struct sockaddr bad = { .sa_family = AF_UNIX };

                cr_expect_not(ALLOWS(names, "10.1.2.7", 5432));
                cr_expect_not(ALLOWS(none, "10.1.2.7", 5432));
                cr_expect_not(egress_policy_allows_addr(p, &bad, 5432));
                cr_expect_not(egress_policy_allows_addr(p, NULL, 5432));
        }
#undef ALLOWS
}

/* ---- always forbidden ---- */

struct forbidden_case {
        const char *addr;
        uint16_t port;
        const char *why; /* NULL: not forbidden */
};

static const struct forbidden_case forbidden_cases[] = {
        { "169.254.169.254", 80, "169.254.169.254 is the cloud metadata address" },
        { "169.254.1.1", 80, "169.254.1.1 is link-local (169.254.0.0/16)" },
        { "0.0.0.0", 80, "0.0.0.0 is the unspecified address" },
        { "0.1.2.3", 80, "0.1.2.3 is in 0.0.0.0/8" },
        { "224.0.0.1", 80, "224.0.0.1 is multicast (224.0.0.0/4)" },
        { "239.255.255.250", 1900, "239.255.255.250 is multicast (224.0.0.0/4)" },
        { "255.255.255.255", 9, "255.255.255.255 is the broadcast address" },
        { "240.0.0.1", 80, "240.0.0.1 is reserved (240.0.0.0/4)" },
        { "::", 80, ":: is the unspecified address" },
        { "fe80::1", 22, "fe80::1 is link-local (fe80::/10)" },
        { "febf::1", 22, "febf::1 is link-local (fe80::/10)" },
        { "ff02::1", 22, "ff02::1 is multicast (ff00::/8)" },
        { "fd00:ec2::254", 80, "fd00:ec2::254 is the cloud metadata address (IPv6)" },
        { "::ffff:169.254.169.254", 80, "169.254.169.254 is the cloud metadata address" },
        { "::ffff:0.0.0.0", 80, "0.0.0.0 is the unspecified address" },
        { "::169.254.169.254", 80,
          "::169.254.169.254 maps to 169.254.169.254, the cloud metadata" },
        { "64:ff9b::169.254.169.254", 80,
          "64:ff9b::a9fe:a9fe maps to 169.254.169.254, the cloud metadata address" },
        { "64:ff9b::e000:1", 80, "maps to 224.0.0.1, multicast" },
        { "2002:a9fe:a9fe::1", 80, "2002:a9fe:a9fe::1 maps to 169.254.169.254" },
        { "10.1.2.7", 5432, NULL },
        { "127.0.0.1", 5432, NULL },
        { "8.8.8.8", 53, NULL },
        { "169.253.255.255", 80, NULL },
        { "169.255.0.0", 80, NULL },
        { "223.255.255.255", 80, NULL },
        { "::1", 5432, NULL },
        { "fec0::1", 80, NULL },
        { "2001:db8::1", 443, NULL },
        { "fd00:ec2::253", 80, NULL },
        { "64:ff9b::a01:207", 5432, NULL },
        { "::ffff:10.1.2.7", 5432, NULL },
};

Test(forbidden, every_category)
{
        for (size_t i = 0; i < ELEMENTSOF(forbidden_cases); i++) {
                const struct forbidden_case *c = &forbidden_cases[i];
                struct sockaddr_storage a = addr(c->addr);
                char why[256] = "";
                bool f = egress_addr_forbidden(NULL, (struct sockaddr *) &a, c->port, why,
                                               sizeof(why));

                if (!c->why) {
                        cr_expect_not(f, "%s:%u forbidden: %s", c->addr, c->port, why);
                        continue;
                }
                cr_expect(f, "%s:%u not forbidden", c->addr, c->port);
                cr_expect(strstr(why, c->why) != NULL, "%s: %s (expected %s)", c->addr, why,
                          c->why);
        }
}

Test(forbidden, why_may_be_null_or_short)
{
        struct sockaddr_storage a = addr("169.254.169.254");
        struct sockaddr bad = { .sa_family = AF_UNIX };
        char why[8] = "xxxxxxx";

        cr_expect(egress_addr_forbidden(NULL, (struct sockaddr *) &a, 80, NULL, 0));
        cr_expect(egress_addr_forbidden(NULL, (struct sockaddr *) &a, 80, why, sizeof(why)));
        cr_expect_str_eq(why, "169.254");
        cr_expect(egress_addr_forbidden(NULL, &bad, 80, NULL, 0));
}

struct listen_case {
        const char *dest;
        uint16_t port;
        bool forbidden;
};

static void check_listen(const char *listen, uint16_t listen_port, const struct listen_case *cases,
                         size_t n, const char *why_part)
{
        struct sockaddr_storage l = addr_port(listen, listen_port);
        struct egress_denylist deny = { .listen = &l, .n_listen = 1 };

        for (size_t i = 0; i < n; i++) {
                struct sockaddr_storage a = addr(cases[i].dest);
                char why[256] = "";
                bool f = egress_addr_forbidden(&deny, (struct sockaddr *) &a, cases[i].port, why,
                                               sizeof(why));

                cr_expect_eq(f, cases[i].forbidden, "listen %s:%u, dest %s:%u: %d %s", listen,
                             listen_port, cases[i].dest, cases[i].port, f, why);
                if (f)
                        cr_expect(strstr(why, why_part) != NULL, "%s", why);
        }
}

Test(forbidden, daemon_listening_on_loopback)
{
        static const struct listen_case cases[] = {
                { "127.0.0.1", 8080, true },    { "127.5.5.5", 8080, true },
                { "::1", 8080, true },          { "::ffff:127.0.0.1", 8080, true },
                { "127.0.0.1", 8081, false },   { "10.1.2.7", 8080, false },
                { "2001:db8::1", 8080, false },
        };
        check_listen("127.0.0.1", 8080, cases, ELEMENTSOF(cases),
                     "is the daemon's own listening socket (127.0.0.1:8080)");
        check_listen("::1", 8080, cases, ELEMENTSOF(cases),
                     "is the daemon's own listening socket ([::1]:8080)");
}

Test(forbidden, daemon_listening_on_a_wildcard)
{
        static const struct listen_case cases[] = {
                { "127.0.0.1", 9090, true }, { "10.1.2.7", 9090, true },
                { "fd00::7", 9090, true },   { "::ffff:192.168.1.1", 9090, true },
                { "10.1.2.7", 9091, false },
        };
        check_listen("0.0.0.0", 9090, cases, ELEMENTSOF(cases), "(0.0.0.0:9090)");
        check_listen("::", 9090, cases, ELEMENTSOF(cases), "([::]:9090)");
}

Test(forbidden, daemon_listening_on_one_address)
{
        static const struct listen_case cases[] = {
                { "10.0.0.5", 8443, true },       { "::ffff:10.0.0.5", 8443, true },
                { "64:ff9b::a00:5", 8443, true }, { "10.0.0.6", 8443, false },
                { "127.0.0.1", 8443, false },     { "10.0.0.5", 8444, false },
        };
        check_listen("10.0.0.5", 8443, cases, ELEMENTSOF(cases), "(10.0.0.5:8443)");
}

Test(forbidden, daemon_message_names_the_destination)
{
        struct sockaddr_storage l[2] = { addr_port("127.0.0.1", 8080), addr_port("::", 9100) };
        struct egress_denylist deny = { .listen = l, .n_listen = 2 };
        struct sockaddr_storage a = addr("127.0.0.2");
        char why[256];

        cr_assert(egress_addr_forbidden(&deny, (struct sockaddr *) &a, 8080, why, sizeof(why)));
        cr_expect_str_eq(why, "127.0.0.2:8080 is the daemon's own listening socket "
                              "(127.0.0.1:8080)");
        a = addr("fd00::1");
        cr_assert(egress_addr_forbidden(&deny, (struct sockaddr *) &a, 9100, why, sizeof(why)));
        cr_expect_str_eq(why, "[fd00::1]:9100 is the daemon's own listening socket ([::]:9100)");
        a = addr("fd00::1");
        cr_expect_not(egress_addr_forbidden(&deny, (struct sockaddr *) &a, 8080, why, sizeof(why)));
}

/* ---- narrowing ---- */

#define BASE_RULES                                                                                 \
        "\"db.internal:5432\", \"*.corp.internal:443\", \"10.1.0.0/16:5432\", "                    \
        "\"[fd00::/64]:443\", \"pypi.internal:443\""

static struct egress_policy *base_policy(void)
{
        return parse_ok("{\"mode\": \"allow\", \"allow\": [" BASE_RULES "],"
                        " \"max_connections\": 16, \"max_bytes\": \"1GiB\"}");
}

static int narrow(const struct egress_policy *base, const char *request, struct egress_policy **ret,
                  struct airlock_error *err)
{
        _cleanup_(json_decrefp) json_t *v = request ? load(request) : NULL;

        return egress_policy_narrow(base, v, "etl", ret, err);
}

struct narrow_yes {
        const char *request;
        enum egress_mode mode;
        const char *rules; /* the resulting rule texts joined by " " */
        uint32_t max_connections;
        uint64_t max_bytes;
};

static const struct narrow_yes narrow_yes[] = {
        { NULL, EGRESS_MODE_ALLOW,
          "db.internal:5432 *.corp.internal:443 10.1.0.0/16:5432 [fd00::/64]:443 "
          "pypi.internal:443",
          16, 1u << 30 },
        { "\"none\"", EGRESS_MODE_NONE, "", 16, 1u << 30 },
        { "{\"mode\": \"none\"}", EGRESS_MODE_NONE, "", 16, 1u << 30 },
        { "{\"allow\": [\"db.internal:5432\"]}", EGRESS_MODE_ALLOW, "db.internal:5432", 16,
          1u << 30 },
        { "{\"mode\": \"allow\", \"allow\": [\"A.corp.internal:443\"]}", EGRESS_MODE_ALLOW,
          "a.corp.internal:443", 16, 1u << 30 },
        { "{\"allow\": [\"*.corp.internal:443\", \"*.x.corp.internal:443\"]}", EGRESS_MODE_ALLOW,
          "*.corp.internal:443 *.x.corp.internal:443", 16, 1u << 30 },
        { "{\"allow\": [\"10.1.2.0/24:5432\", \"10.1.2.7:5432\", \"10.1.0.0/16:5432\"]}",
          EGRESS_MODE_ALLOW, "10.1.2.0/24:5432 10.1.2.7:5432 10.1.0.0/16:5432", 16, 1u << 30 },
        { "{\"allow\": [\"[::ffff:10.1.255.255]:5432\"]}", EGRESS_MODE_ALLOW, "10.1.255.255:5432",
          16, 1u << 30 },
        { "{\"allow\": [\"[fd00::7]:443\", \"[fd00::/96]:443\"]}", EGRESS_MODE_ALLOW,
          "[fd00::7]:443 [fd00::/96]:443", 16, 1u << 30 },
        { "{\"max_connections\": 8}", EGRESS_MODE_ALLOW,
          "db.internal:5432 *.corp.internal:443 10.1.0.0/16:5432 [fd00::/64]:443 "
          "pypi.internal:443",
          8, 1u << 30 },
        { "{\"mode\": \"allow\", \"max_connections\": 16, \"max_bytes\": \"1MiB\"}",
          EGRESS_MODE_ALLOW,
          "db.internal:5432 *.corp.internal:443 10.1.0.0/16:5432 [fd00::/64]:443 "
          "pypi.internal:443",
          16, 1u << 20 },
        /* An empty list without a mode asks for no destinations: no network. */
        { "{\"allow\": [], \"max_connections\": 1}", EGRESS_MODE_NONE, "", 1, 1u << 30 },
        { "{\"allow\": [\"pypi.internal:443\"], \"max_bytes\": 1073741824}", EGRESS_MODE_ALLOW,
          "pypi.internal:443", 16, 1u << 30 },
};

Test(narrow, allowed_requests)
{
        _cleanup_policy_ struct egress_policy *base = base_policy();

        for (size_t i = 0; i < ELEMENTSOF(narrow_yes); i++) {
                const struct narrow_yes *c = &narrow_yes[i];
                _cleanup_policy_ struct egress_policy *p = NULL;
                struct airlock_error err = { "" };
                char rules[1024] = "";
                int r = narrow(base, c->request, &p, &err);

                cr_assert_eq(r, 0, "case %zu (%s): %d %s", i, c->request, r, err.msg);
                cr_expect_eq(p->mode, c->mode, "case %zu", i);
                for (size_t j = 0; j < p->n_rules; j++) {
                        if (j > 0)
                                strcat(rules, " ");
                        strcat(rules, p->rules[j].text);
                }
                cr_expect_str_eq(rules, c->rules, "case %zu (%s)", i, c->request);
                cr_expect_eq(p->max_connections, c->max_connections, "case %zu", i);
                cr_expect_eq(p->max_bytes, c->max_bytes, "case %zu", i);
        }
}

struct narrow_no {
        const char *request;
        int r;
        const char *msg; /* the whole message */
};

static const struct narrow_no narrow_no[] = {
        { "{\"allow\": [\"db.internal:5433\"]}", -EPERM,
          "network.allow[0]: 'db.internal:5433' is not in profile 'etl''s allow-list; a session "
          "can only narrow its profile's network" },
        { "{\"allow\": [\"db.internal:5432\", \"other.internal:5432\"]}", -EPERM,
          "network.allow[1]: 'other.internal:5432' is not in profile 'etl''s allow-list; a "
          "session can only narrow its profile's network" },
        { "{\"allow\": [\"corp.internal:443\"]}", -EPERM,
          "network.allow[0]: 'corp.internal:443' is not in profile 'etl''s allow-list; a session "
          "can only narrow its profile's network" },
        { "{\"allow\": [\"*.internal:443\"]}", -EPERM,
          "network.allow[0]: '*.internal:443' is not in profile 'etl''s allow-list; a session "
          "can only narrow its profile's network" },
        { "{\"allow\": [\"*.db.internal:5432\"]}", -EPERM,
          "network.allow[0]: '*.db.internal:5432' is not in profile 'etl''s allow-list; a "
          "session can only narrow its profile's network" },
        { "{\"allow\": [\"x.corp.internal:80\"]}", -EPERM,
          "network.allow[0]: 'x.corp.internal:80' is not in profile 'etl''s allow-list; a "
          "session can only narrow its profile's network" },
        { "{\"allow\": [\"10.0.0.0/8:5432\"]}", -EPERM,
          "network.allow[0]: '10.0.0.0/8:5432' is not in profile 'etl''s allow-list; a session "
          "can only narrow its profile's network" },
        { "{\"allow\": [\"10.2.0.0/16:5432\"]}", -EPERM,
          "network.allow[0]: '10.2.0.0/16:5432' is not in profile 'etl''s allow-list; a session "
          "can only narrow its profile's network" },
        { "{\"allow\": [\"10.1.2.7:443\"]}", -EPERM,
          "network.allow[0]: '10.1.2.7:443' is not in profile 'etl''s allow-list; a session can "
          "only narrow its profile's network" },
        { "{\"allow\": [\"[fd00::/48]:443\"]}", -EPERM,
          "network.allow[0]: '[fd00::/48]:443' is not in profile 'etl''s allow-list; a session "
          "can only narrow its profile's network" },
        { "{\"allow\": [\"[::ffff:10.0.0.0/104]:5432\"]}", -EPERM,
          "network.allow[0]: '10.0.0.0/8:5432' is not in profile 'etl''s allow-list; a session "
          "can only narrow its profile's network" },
        { "{\"allow\": [\"[fd00::a01:207]:5432\"]}", -EPERM,
          "network.allow[0]: '[fd00::a01:207]:5432' is not in profile 'etl''s allow-list; a "
          "session can only narrow its profile's network" },
        { "{\"max_connections\": 17}", -EPERM,
          "network.max_connections: 17 is more than profile 'etl''s 16; a session can only "
          "narrow its profile's network" },
        { "{\"allow\": [\"db.internal:5432\"], \"max_bytes\": \"2GiB\"}", -EPERM,
          "network.max_bytes: 2147483648 bytes is more than profile 'etl''s 1073741824; a "
          "session can only narrow its profile's network" },
        { "{\"allow\": [\"x\"]}", -EINVAL,
          "network.allow[0]: 'x': missing ':PORT'; every rule names a port (1..65535), e.g. "
          "'pypi.internal:443'" },
        { "{\"mode\": \"allow\", \"allow\": []}", -EINVAL,
          "network.allow: mode \"allow\" needs at least one rule 'host:port'; for no network say "
          "\"network\": \"none\"" },
        { "\"allow\"", -EINVAL,
          "network: expected \"none\" or an object such as {\"mode\": \"allow\", \"allow\": "
          "[\"pypi.internal:443\"]}, got 'allow'" },
        { "{\"mode\": \"none\", \"max_connections\": 0}", -EINVAL,
          "network.max_connections: expected 1..4096, got 0" },
        { "{\"hosts\": []}", -EINVAL,
          "network: unknown key 'hosts'; expected mode, allow, max_connections, max_bytes" },
};

Test(narrow, refused_requests_say_why)
{
        _cleanup_policy_ struct egress_policy *base = base_policy();

        for (size_t i = 0; i < ELEMENTSOF(narrow_no); i++) {
                const struct narrow_no *c = &narrow_no[i];
                struct egress_policy *p = NULL;
                struct airlock_error err = { "" };
                int r = narrow(base, c->request, &p, &err);

                cr_expect_eq(r, c->r, "case %zu (%s): %d %s", i, c->request, r, err.msg);
                cr_expect_null(p, "case %zu: output written on failure", i);
                cr_expect_str_eq(err.msg, c->msg, "case %zu (%s)", i, c->request);
                egress_policy_free(p);
        }
}

Test(narrow, a_none_profile_allows_only_none)
{
        _cleanup_policy_ struct egress_policy *base = parse_ok("\"none\"");
        static const char *const refused[] = {
                "{\"mode\": \"allow\", \"allow\": [\"a.b:1\"]}",
                "{\"allow\": [\"a.b:1\"]}",
                "{\"mode\": \"allow\"}",
        };
        static const char *const allowed[] = { NULL, "\"none\"", "{\"mode\": \"none\"}",
                                               "{\"max_connections\": 1}", "{}" };

        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                struct egress_policy *p = NULL;
                struct airlock_error err = { "" };

                cr_expect_eq(narrow(base, refused[i], &p, &err), -EPERM, "%s", refused[i]);
                cr_expect_str_eq(err.msg,
                                 "network: profile 'etl' has no network (\"none\"); a session "
                                 "can only narrow its profile's network",
                                 "%s", refused[i]);
                cr_expect_null(p);
        }
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
                _cleanup_policy_ struct egress_policy *p = NULL;
                struct airlock_error err = { "" };

                cr_assert_eq(narrow(base, allowed[i], &p, &err), 0, "%s: %s", allowed[i], err.msg);
                cr_expect_eq(p->mode, EGRESS_MODE_NONE);
                cr_expect_eq(p->n_rules, 0);
        }
}

/* ---- the sandbox's side: forwarders, /etc/hosts, Landlock ports ---- */

static const char *listen_text(const struct egress_forward *f, char *buf, size_t size)
{
        char a[INET_ADDRSTRLEN];

        inet_ntop(AF_INET, &f->listen.sin_addr, a, sizeof(a));
        (void) snprintf(buf, size, "%s:%u", a, ntohs(f->listen.sin_port));
        return buf;
}

Test(sandbox, forwards_hosts_and_ports)
{
        _cleanup_policy_ struct egress_policy *p =
                allow_ok("\"db.internal:5432\", \"*.corp:443\", \"pypi.internal:443\", "
                         "\"db.internal:5433\", \"10.1.2.7:5432\", \"10.1.0.0/16:5432\", "
                         "\"[fd00::7]:5432\", \"127.0.0.1:3128\", \"127.0.1.1:5432\", "
                         "\"cache.internal:6379\"");
        static const char *const want[][2] = {
                { "db.internal:5432", "127.0.1.1:5432" },
                { "pypi.internal:443", "127.0.1.2:443" },
                { "db.internal:5433", "127.0.1.1:5433" },
                { "10.1.2.7:5432", "10.1.2.7:5432" },
                { "cache.internal:6379", "127.0.1.3:6379" },
        };
        static const uint16_t want_ports[] = { 443, 1080, 3128, 5432, 5433, 6379 };
        struct egress_forward fw[EGRESS_RULES_MAX];
        uint16_t ports[EGRESS_RULES_MAX + 2];
        _cleanup_free_ char *hosts = NULL;
        char buf[64];
        size_t n;

        n = egress_policy_forwards(p, EGRESS_FORWARD_LOOPBACK, fw);
        cr_assert_eq(n, ELEMENTSOF(want));
        for (size_t i = 0; i < n; i++) {
                cr_expect_str_eq(fw[i].rule->text, want[i][0], "forward %zu", i);
                cr_expect_str_eq(listen_text(&fw[i], buf, sizeof(buf)), want[i][1], "forward %zu",
                                 i);
                cr_expect_eq(fw[i].listen.sin_family, AF_INET);
                cr_expect(fw[i].rule >= p->rules && fw[i].rule < p->rules + p->n_rules,
                          "the rule is borrowed from the policy");
        }
        hosts = egress_policy_hosts_text(p, EGRESS_FORWARD_LOOPBACK);
        cr_assert_not_null(hosts);
        cr_expect_str_eq(hosts, "127.0.1.1\tdb.internal\n127.0.1.2\tpypi.internal\n"
                                "127.0.1.3\tcache.internal\n");
        n = egress_policy_sandbox_ports(p, ports);
        cr_assert_eq(n, ELEMENTSOF(want_ports));
        cr_expect_arr_eq(ports, want_ports, sizeof(want_ports));
}

/* A microVM guest's forwarders: the names at 10.0.3.N (its own 127/8 never leaves it), the
 * numbering the same as on the loopback; addresses at themselves; the same ports. */
Test(sandbox, guest_forwards_use_their_own_net)
{
        _cleanup_policy_ struct egress_policy *p =
                allow_ok("\"db.internal:5432\", \"pypi.internal:443\", \"10.1.2.7:5432\", "
                         "\"db.internal:5433\"");
        static const char *const want[] = { "10.0.3.1:5432", "10.0.3.2:443", "10.1.2.7:5432",
                                            "10.0.3.1:5433" };
        struct egress_forward fw[EGRESS_RULES_MAX], lo[EGRESS_RULES_MAX];
        _cleanup_free_ char *hosts = egress_policy_hosts_text(p, EGRESS_FORWARD_GUEST);
        char buf[64];
        size_t n = egress_policy_forwards(p, EGRESS_FORWARD_GUEST, fw);

        cr_assert_eq(n, ELEMENTSOF(want));
        cr_assert_eq(egress_policy_forwards(p, EGRESS_FORWARD_LOOPBACK, lo), n);
        for (size_t i = 0; i < n; i++) {
                cr_expect_str_eq(listen_text(&fw[i], buf, sizeof(buf)), want[i], "forward %zu", i);
                cr_expect_eq(fw[i].rule, lo[i].rule, "forward %zu: the same rule", i);
        }
        cr_assert_not_null(hosts);
        cr_expect_str_eq(hosts, "10.0.3.1\tdb.internal\n10.0.3.2\tpypi.internal\n");
}

Test(sandbox, mode_none_has_nothing)
{
        _cleanup_policy_ struct egress_policy *p = parse_ok("\"none\"");
        struct egress_forward fw[EGRESS_RULES_MAX];
        uint16_t ports[EGRESS_RULES_MAX + 2];
        _cleanup_free_ char *hosts = egress_policy_hosts_text(p, EGRESS_FORWARD_LOOPBACK);

        cr_expect_eq(egress_policy_forwards(p, EGRESS_FORWARD_LOOPBACK, fw), 0);
        cr_expect_eq(egress_policy_sandbox_ports(p, ports), 0);
        cr_assert_not_null(hosts);
        cr_expect_str_eq(hosts, "");
}

Test(sandbox, wildcards_and_blocks_use_the_proxy_only)
{
        _cleanup_policy_ struct egress_policy *p =
                allow_ok("\"*.corp:443\", \"10.0.0.0/8:443\", \"[fd00::7]:5432\"");
        struct egress_forward fw[EGRESS_RULES_MAX];
        uint16_t ports[EGRESS_RULES_MAX + 2];
        static const uint16_t want_ports[] = { 1080, 3128 };
        _cleanup_free_ char *hosts = egress_policy_hosts_text(p, EGRESS_FORWARD_LOOPBACK);

        cr_expect_eq(egress_policy_forwards(p, EGRESS_FORWARD_LOOPBACK, fw), 0);
        cr_assert_eq(egress_policy_sandbox_ports(p, ports), 2);
        cr_expect_arr_eq(ports, want_ports, sizeof(want_ports));
        cr_expect_str_eq(hosts, "");
}
