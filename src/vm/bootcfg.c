/* See bootcfg.h. */
#include "bootcfg.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
        uint64_t v = 0;

        if (!*s)
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                if (v > (UINT64_MAX - 9) / 10)
                        return -EINVAL;
                v = v * 10 + (uint64_t) (*s - '0');
        }
        if (v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* NAME=value with NAME [A-Za-z_][A-Za-z0-9_]*. */
static bool env_is_valid(const char *s)
{
        const char *eq = strchr(s, '=');

        if (!eq || eq == s || (*s >= '0' && *s <= '9'))
                return false;
        for (const char *p = s; p < eq; p++) {
                bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                          (*p >= '0' && *p <= '9') || *p == '_';
                if (!ok)
                        return false;
        }
        return true;
}

/* The text of hosts=: host-file lines of names and addresses, nothing a parser could trip on. */
static bool hosts_is_valid(const char *s)
{
        for (; *s; s++) {
                bool ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                          (*s >= '0' && *s <= '9') || strchr(".-_: \t\n", *s);
                if (!ok)
                        return false;
        }
        return true;
}

int bootcfg_parse(const char *payload, size_t len, struct bootcfg *ret_cfg, const char **ret_why)
{
        struct bootcfg c = { 0 };
        enum { UID = 1u, NOFILE = 2u, NPROC = 4u, WORK = 8u, TMP = 16u, ALL = 31u };
        enum { NET = 32u, HOSTS = 64u };
        unsigned seen = 0;
        uint64_t net = 0;
        size_t off = 0;

        if (len > BOOTCFG_MAX) {
                *ret_why = "the boot configuration is too large";
                return -E2BIG;
        }
        while (off < len) {
                const char *s = payload + off;
                const char *end = memchr(s, '\0', len - off);
                struct {
                        const char *key;
                        unsigned bit;
                        uint64_t min, max;
                        uint64_t *dst;
                } nums[] = {
                        { "uid=", UID, 1, 65534, NULL },
                        { "nofile=", NOFILE, 16, 1048576, &c.nofile },
                        { "nproc=", NPROC, 8, 65536, &c.nproc },
                        { "work=", WORK, 1ull << 20, 1ull << 40, &c.work_bytes },
                        { "tmp=", TMP, 1ull << 20, 1ull << 40, &c.tmp_bytes },
                        { "net=", NET, 0, 1, &net },
                };
                bool known = false;

                if (!end) {
                        *ret_why = "a boot configuration string has no terminating NUL";
                        return -EINVAL;
                }
                off += (size_t) (end - s) + 1;
                if (strncmp(s, "env=", 4) == 0) {
                        if (!env_is_valid(s + 4)) {
                                *ret_why = "an env entry is not NAME=value";
                                return -EINVAL;
                        }
                        if (c.n_env >= BOOTCFG_ENV_MAX) {
                                *ret_why = "too many env entries";
                                return -E2BIG;
                        }
                        c.env[c.n_env++] = s + 4;
                        continue;
                }
                if (strncmp(s, "hosts=", 6) == 0) {
                        if (seen & HOSTS) {
                                *ret_why = "a boot configuration key is repeated";
                                return -EINVAL;
                        }
                        if (!hosts_is_valid(s + 6)) {
                                *ret_why = "the hosts entry has a character a hosts file "
                                           "line does not";
                                return -EINVAL;
                        }
                        seen |= HOSTS;
                        c.hosts = s + 6;
                        continue;
                }
                for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
                        size_t kl = strlen(nums[i].key);
                        uint64_t v;

                        if (strncmp(s, nums[i].key, kl) != 0)
                                continue;
                        known = true;
                        if (seen & nums[i].bit) {
                                *ret_why = "a boot configuration key is repeated";
                                return -EINVAL;
                        }
                        if (parse_u64(s + kl, nums[i].min, nums[i].max, &v) < 0) {
                                *ret_why = "a boot configuration number is malformed or out "
                                           "of range";
                                return -EINVAL;
                        }
                        seen |= nums[i].bit;
                        if (nums[i].dst)
                                *nums[i].dst = v;
                        else
                                c.uid = (uint32_t) v;
                        break;
                }
                if (!known) {
                        *ret_why = "an unknown boot configuration key";
                        return -EINVAL;
                }
        }
        if ((seen & ALL) != ALL) {
                *ret_why = "the boot configuration lacks one of uid, nofile, nproc, work, tmp";
                return -EINVAL;
        }
        c.net = net == 1;
        c.env[c.n_env] = NULL;
        *ret_cfg = c;
        return 0;
}

int bootcfg_add(char *buf, size_t size, size_t *pos, const char *key, const char *value)
{
        size_t kl = strlen(key), vl = strlen(value);

        if (*pos > size || size - *pos < kl + 1 + vl + 1)
                return -E2BIG;
        memcpy(buf + *pos, key, kl);
        buf[*pos + kl] = '=';
        memcpy(buf + *pos + kl + 1, value, vl);
        buf[*pos + kl + 1 + vl] = '\0';
        *pos += kl + vl + 2;
        return 0;
}
