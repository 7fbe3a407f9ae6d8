/* Address ranges in CIDR notation ("10.0.0.0/8", "127.0.0.1", "fd00::/8"), for
 * --trusted-proxies. An address is 16 bytes, IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d), the
 * way the connection guard keeps its clients. Pure functions: tests/unit/test-base.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CIDR_LIST_MAX 64

struct cidr {
        uint8_t addr[16];
        unsigned prefix; /* bits of addr that must match, 0..128 */
};

/* Parses a comma-separated list of CIDR ranges (an address alone is a range of one). Returns
 * 0 with *ret_n ranges in out (room for max), -EINVAL with the bad entry named in why, or
 * -E2BIG past max. */
int cidr_list_parse(const char *spec, struct cidr *out, size_t max, size_t *ret_n, char *why,
                    size_t why_size);

/* Whether addr (16 bytes) is in one of the n ranges. */
bool cidr_list_match(const struct cidr *list, size_t n, const uint8_t addr[16]);
