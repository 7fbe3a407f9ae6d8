/* CIDR ranges: see cidr.h. */
#include "cidr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_one(const char *text, struct cidr *ret)
{
        char host[INET6_ADDRSTRLEN + 1];
        const char *slash = strchr(text, '/');
        size_t n = slash ? (size_t) (slash - text) : strlen(text);
        unsigned max, prefix;
        struct in_addr v4;
        char *end;

        if (n == 0 || n >= sizeof(host))
                return -EINVAL;
        memcpy(host, text, n);
        host[n] = '\0';
        memset(ret->addr, 0, sizeof(ret->addr));
        if (inet_pton(AF_INET, host, &v4) == 1) {
                ret->addr[10] = ret->addr[11] = 0xff;
                memcpy(ret->addr + 12, &v4, 4);
                max = 32;
        } else if (inet_pton(AF_INET6, host, ret->addr) == 1)
                max = 128;
        else
                return -EINVAL;
        prefix = max;
        if (slash) {
                unsigned long v;

                errno = 0;
                v = strtoul(slash + 1, &end, 10);
                if (!slash[1] || *end || errno || slash[1] == '-' || slash[1] == '+' || v > max)
                        return -EINVAL;
                prefix = (unsigned) v;
        }
        ret->prefix = max == 32 ? 96 + prefix : prefix;
        return 0;
}

int cidr_list_parse(const char *spec, struct cidr *out, size_t max, size_t *ret_n, char *why,
                    size_t why_size)
{
        size_t n = 0;

        for (const char *p = spec;;) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t) (end - p) : strlen(p);
                char entry[128];

                if (len == 0 || len >= sizeof(entry)) {
                        (void) snprintf(why, why_size,
                                        "bad entry '%.*s': expected ADDRESS or "
                                        "ADDRESS/BITS, e.g. 10.0.0.0/8 or fd00::/8",
                                        (int) (len < 100 ? len : 100), p);
                        return -EINVAL;
                }
                memcpy(entry, p, len);
                entry[len] = '\0';
                if (n >= max) {
                        (void) snprintf(why, why_size, "more than %zu ranges", max);
                        return -E2BIG;
                }
                if (parse_one(entry, &out[n]) < 0) {
                        (void) snprintf(why, why_size,
                                        "bad entry '%s': expected ADDRESS or "
                                        "ADDRESS/BITS, e.g. 10.0.0.0/8 or fd00::/8",
                                        entry);
                        return -EINVAL;
                }
                n++;
                if (!end)
                        break;
                p = end + 1;
        }
        *ret_n = n;
        return 0;
}

bool cidr_list_match(const struct cidr *list, size_t n, const uint8_t addr[16])
{
        for (size_t i = 0; i < n; i++) {
                unsigned bits = list[i].prefix, full = bits / 8, rest = bits % 8;

                if (memcmp(list[i].addr, addr, full) != 0)
                        continue;
                if (rest && ((list[i].addr[full] ^ addr[full]) & (uint8_t) (0xff << (8 - rest))))
                        continue;
                return true;
        }
        return false;
}
