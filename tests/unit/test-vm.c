/* The microVM tier's boot configuration (src/vm/bootcfg.h): what the daemon sends the guest's
 * init, and what init refuses; and the key of a saved VM (src/vm/snapshot.h). */
#include "vm/bootcfg.h"
#include "vm/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Each case is refused with its errno and a reason that says cases[i].why. */
static void expect_refused(const struct bad *cases, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                struct bootcfg c;
                const char *why;
                int r = parse(cases[i].text, cases[i].len, &c, &why);
                cr_expect_eq(r, cases[i].r, "case %zu: %d", i, r);
                cr_expect(why && strstr(why, cases[i].why), "case %zu: %s", i, why ? why : "");
        }
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

        expect_refused(cases, sizeof(cases) / sizeof(cases[0]));
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

Test(bootcfg, net_and_hosts_are_optional_and_checked)
{
        static const char text[] = REQUIRED "net=1\0hosts=10.0.3.1\tdb.internal\n\0";
        static const struct bad cases[] = {
                BAD(REQUIRED "net=2\0", -EINVAL, "range"),
                BAD(REQUIRED "net=1\0net=1\0", -EINVAL, "repeated"),
                BAD(REQUIRED "hosts=a\0hosts=b\0", -EINVAL, "repeated"),
                BAD(REQUIRED "hosts=10.0.3.1 x;rm\0", -EINVAL, "hosts"),
                BAD(REQUIRED "hosts=10.0.3.1 \x01x\0", -EINVAL, "hosts"),
                BAD("net=1\0", -EINVAL, "lacks"),
        };
        struct bootcfg c;
        const char *why;

        cr_assert_eq(parse(REQUIRED, sizeof(REQUIRED) - 1, &c, &why), 0, "%s", why);
        cr_expect(!c.net);
        cr_expect_null(c.hosts);
        cr_assert_eq(parse(text, sizeof(text) - 1, &c, &why), 0, "%s", why);
        cr_expect(c.net);
        cr_expect_str_eq(c.hosts, "10.0.3.1\tdb.internal\n");
        expect_refused(cases, sizeof(cases) / sizeof(cases[0]));
}

/* An image directory with the three files a key describes. */
static void make_image(char dir[64])
{
        static const char *const names[] = { "vmlinuz", "initrd.cpio", "root.erofs" };

        strcpy(dir, "/tmp/test-vm-key-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
        for (int i = 0; i < 3; i++) {
                char path[128];
                FILE *f;
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                f = fopen(path, "we");
                cr_assert_not_null(f);
                fputs(names[i], f);
                fclose(f);
        }
}

static void remove_image(const char *dir)
{
        static const char *const names[] = { "vmlinuz", "initrd.cpio", "root.erofs" };
        char path[128];

        for (int i = 0; i < 3; i++) {
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                (void) unlink(path);
        }
        (void) rmdir(dir);
}

Test(snapshot_key, same_for_a_copy_and_changes_with_what_matters)
{
        char dir[64], path[128];
        char *env_a[] = { "PATH=/usr/bin", NULL }, *env_b[] = { "PATH=/bin", NULL };
        struct vm_config cfg = { .name = "airlock-x",
                                 .memory_bytes = 256ull << 20,
                                 .cpu_millicpus = 1000,
                                 .nofile = 1024,
                                 .nproc = 256,
                                 .work_bytes = 1 << 20,
                                 .tmp_bytes = 1 << 20,
                                 .envp = env_a,
                                 .incoming_fd = -1 };
        char *k1 = NULL, *k2 = NULL, *k3 = NULL, *k4 = NULL, *k5 = NULL, *k6 = NULL, *k7 = NULL;
        FILE *f;

        make_image(dir);
        cfg.image_dir = dir;
        cr_assert_eq(vm_snapshot_key(&cfg, &k1), 0);
        /* A restore of the same machine (another name, the incoming fd) has the same key. */
        cfg.restore = true;
        cfg.incoming_fd = 9;
        cfg.name = "airlock-y";
        cr_assert_eq(vm_snapshot_key(&cfg, &k2), 0);
        cr_expect_str_eq(k1, k2);
        /* Another guest memory size, another environment, another image: another key. */
        cfg.memory_bytes = 512ull << 20;
        cr_assert_eq(vm_snapshot_key(&cfg, &k3), 0);
        cr_expect_str_neq(k1, k3);
        cfg.memory_bytes = 256ull << 20;
        cfg.envp = env_b;
        cr_assert_eq(vm_snapshot_key(&cfg, &k4), 0);
        cr_expect_str_neq(k1, k4);
        cfg.envp = env_a;
        /* A network device (egress allowed), and other forwarded names: other keys. */
        cfg.network = true;
        cr_assert_eq(vm_snapshot_key(&cfg, &k6), 0);
        cr_expect_str_neq(k1, k6);
        cr_expect(strstr(k6, "virtio-net-device") && !strstr(k1, "virtio-net-device"));
        cfg.hosts_extra = "10.0.3.1\tdb.internal\n";
        cr_assert_eq(vm_snapshot_key(&cfg, &k7), 0);
        cr_expect_str_neq(k6, k7);
        cfg.network = false;
        cfg.hosts_extra = NULL;
        snprintf(path, sizeof(path), "%s/root.erofs", dir);
        f = fopen(path, "ae");
        cr_assert_not_null(f);
        fputs("a rebuilt image", f);
        fclose(f);
        cr_assert_eq(vm_snapshot_key(&cfg, &k5), 0);
        cr_expect_str_neq(k1, k5);
        /* No image: no key. */
        remove_image(dir);
        free(k5);
        k5 = NULL;
        cr_expect_eq(vm_snapshot_key(&cfg, &k5), -ENOENT);
        free(k1), free(k2), free(k3), free(k4), free(k5), free(k6), free(k7);
}
