/* The microVM tier's boot configuration (src/vm/bootcfg.h): what the daemon sends the guest's
 * init, and what init refuses. */
#include "vm/bootcfg.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#define REQUIRED "uid=1000\0nofile=1024\0nproc=256\0work=1048576\0tmp=2097152\0"

static int parse(const char *payload, size_t len, struct bootcfg *cfg, const char **why)
{
        *why = NULL;
        return bootcfg_parse(payload, len, cfg, why);
}

Test(bootcfg, parses_every_key_and_env)
{
        static const char text[] = REQUIRED "env=PATH=/usr/bin:/bin\0env=LANG=C.UTF-8\0env=_X=\0";
        struct bootcfg c;
        const char *why;

        cr_assert_eq(parse(text, sizeof(text) - 1, &c, &why), 0, "%s", why);
        cr_expect_eq(c.uid, 1000);
        cr_expect_eq(c.nofile, 1024);
        cr_expect_eq(c.nproc, 256);
        cr_expect_eq(c.work_bytes, 1048576);
        cr_expect_eq(c.tmp_bytes, 2097152);
        cr_assert_eq(c.n_env, 3);
        cr_expect_str_eq(c.env[0], "PATH=/usr/bin:/bin");
        cr_expect_str_eq(c.env[1], "LANG=C.UTF-8");
        cr_expect_str_eq(c.env[2], "_X=");
        cr_expect_null(c.env[3]);
}

Test(bootcfg, add_round_trips)
{
        char buf[256];
        size_t pos = 0;
        struct bootcfg c;
        const char *why;

        cr_assert_eq(bootcfg_add(buf, sizeof(buf), &pos, "uid", "7"), 0);
        cr_assert_eq(bootcfg_add(buf, sizeof(buf), &pos, "nofile", "64"), 0);
        cr_assert_eq(bootcfg_add(buf, sizeof(buf), &pos, "nproc", "8"), 0);
        cr_assert_eq(bootcfg_add(buf, sizeof(buf), &pos, "work", "1048576"), 0);
        cr_assert_eq(bootcfg_add(buf, sizeof(buf), &pos, "tmp", "1048576"), 0);
        cr_assert_eq(bootcfg_add(buf, sizeof(buf), &pos, "env", "A=b=c"), 0);
        cr_assert_eq(parse(buf, pos, &c, &why), 0, "%s", why);
        cr_expect_eq(c.uid, 7);
        cr_expect_str_eq(c.env[0], "A=b=c");
        pos = sizeof(buf) - 4;
        cr_expect_eq(bootcfg_add(buf, sizeof(buf), &pos, "uid", "1"), -E2BIG);
}

Test(bootcfg, empty_payload_lacks_keys)
{
        struct bootcfg c;
        const char *why;

        cr_expect_eq(parse("", 0, &c, &why), -EINVAL);
        cr_expect_not_null(strstr(why, "lacks"));
}

struct bad {
        const char *text;
        size_t len;
        int r;
        const char *why;
};
#define BAD(s, r, why)                                                                             \
        {                                                                                          \
                s, sizeof(s) - 1, r, why                                                           \
        }

Test(bootcfg, refuses_what_is_wrong)
{
        static const struct bad cases[] = {
                BAD(REQUIRED "uid=5", -EINVAL, "NUL"), /* the last string unterminated */
                BAD("uid=0\0nofile=1024\0nproc=256\0work=1048576\0tmp=1048576\0", -EINVAL,
                    "range"), /* root is never the runner's uid */
                BAD("uid=65535\0nofile=1024\0nproc=256\0work=1048576\0tmp=1048576\0", -EINVAL,
                    "range"),
                BAD(REQUIRED "uid=1000\0", -EINVAL, "repeated"),
                BAD(REQUIRED "memory=1\0", -EINVAL, "unknown"),
                BAD(REQUIRED "env=1A=b\0", -EINVAL, "NAME=value"),
                BAD(REQUIRED "env=A-B=c\0", -EINVAL, "NAME=value"),
                BAD(REQUIRED "env=NOEQUALS\0", -EINVAL, "NAME=value"),
                BAD(REQUIRED "env==x\0", -EINVAL, "NAME=value"),
                BAD("uid=1000\0nofile=1024\0nproc=256\0work=1048576\0", -EINVAL, "lacks"),
                BAD("uid=1000\0nofile=15\0nproc=256\0work=1048576\0tmp=1048576\0", -EINVAL,
                    "range"),
                BAD("uid=1000\0nofile=1024\0nproc=256\0work=1048575\0tmp=1048576\0", -EINVAL,
                    "range"),
                BAD("uid=1000\0nofile=1024\0nproc=256\0work=99999999999999999999999\0"
                    "tmp=1048576\0",
                    -EINVAL, "range"),
                BAD("uid=+5\0nofile=1024\0nproc=256\0work=1048576\0tmp=1048576\0", -EINVAL,
                    "range"),
                BAD("uid=\0nofile=1024\0nproc=256\0work=1048576\0tmp=1048576\0", -EINVAL, "range"),
                BAD("uid\0", -EINVAL, "unknown"),
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct bootcfg c;
                const char *why;
                int r = parse(cases[i].text, cases[i].len, &c, &why);
                cr_expect_eq(r, cases[i].r, "case %zu: %d", i, r);
                cr_expect(why && strstr(why, cases[i].why), "case %zu: %s", i, why ? why : "");
        }
}

Test(bootcfg, refuses_too_many_env_and_too_large)
{
        static char buf[BOOTCFG_MAX + 16];
        size_t pos = 0;
        struct bootcfg c;
        const char *why;

        memcpy(buf, REQUIRED, sizeof(REQUIRED) - 1);
        pos = sizeof(REQUIRED) - 1;
        for (int i = 0; i <= BOOTCFG_ENV_MAX; i++)
                cr_assert_eq(bootcfg_add(buf, sizeof(buf), &pos, "env", "A=1"), 0);
        cr_expect_eq(parse(buf, pos, &c, &why), -E2BIG);
        cr_expect_not_null(strstr(why, "too many"));
        cr_expect_eq(parse(buf, BOOTCFG_MAX + 1, &c, &why), -E2BIG);
}
