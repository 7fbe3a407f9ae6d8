/* Tenant keys, names, quota arguments, the store and the registry (src/tenant/tenant.h). */
#include "tenant/tenant.h"

#include "base/cleanup.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *tmpdir(void)
{
        char *d = strdup("/tmp/airlock-test-tenant-XXXXXX");

        cr_assert_not_null(mkdtemp(d));
        return d;
}

static void rmtree(const char *d)
{
        char cmd[512];

        (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
        cr_assert_eq(system(cmd), 0);
}

Test(tenant, key_has_prefix_hex_and_its_hash)
{
        char k1[TENANT_KEY_LEN + 1], k2[TENANT_KEY_LEN + 1];
        unsigned char h1[TENANT_HASH_LEN], h2[TENANT_HASH_LEN], again[TENANT_HASH_LEN];

        cr_assert_eq(tenant_key_new(k1, h1), 0);
        cr_assert_eq(tenant_key_new(k2, h2), 0);
        cr_assert_eq(strlen(k1), TENANT_KEY_LEN);
        cr_assert_eq(strncmp(k1, "alk_", 4), 0);
        cr_assert(tenant_key_is_wellformed(k1, strlen(k1)));
        cr_assert_str_neq(k1, k2);
        tenant_key_hash(k1, strlen(k1), again);
        cr_assert_eq(memcmp(h1, again, TENANT_HASH_LEN), 0);
        cr_assert_neq(memcmp(h1, h2, TENANT_HASH_LEN), 0);
}

Test(tenant, hash_is_sha256)
{
        /* FIPS 180-2's example: SHA-256("abc"). */
        static const unsigned char want[TENANT_HASH_LEN] = {
                0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
        };
        unsigned char h[TENANT_HASH_LEN];

        tenant_key_hash("abc", 3, h);
        cr_assert_eq(memcmp(h, want, sizeof(want)), 0);
}

Test(tenant, malformed_keys_are_refused)
{
        static const char *const bad[] = {
                "",
                "alk_",
                "alk_00",
                "xyz_"
                "0000000000000000000000000000000000000000000000000000000000000000",
                "alk_"
                "000000000000000000000000000000000000000000000000000000000000000G",
                "alk_"
                "00000000000000000000000000000000000000000000000000000000000000000",
                "alk_"
                "000000000000000000000000000000000000000000000000000000000000000A",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_assert_not(tenant_key_is_wellformed(bad[i], strlen(bad[i])), "%s", bad[i]);
}

Test(tenant, names)
{
        cr_assert_eq(tenant_name_check("team-a", NULL), 0);
        cr_assert_eq(tenant_name_check("a.b_c-9", NULL), 0);
        cr_assert_eq(tenant_name_check("default", NULL), -EINVAL);
        cr_assert_eq(tenant_name_check("", NULL), -EINVAL);
        cr_assert_eq(tenant_name_check("-x", NULL), -EINVAL);
        cr_assert_eq(tenant_name_check("Team", NULL), -EINVAL);
        cr_assert_eq(tenant_name_check("a b", NULL), -EINVAL);
        cr_assert_eq(tenant_name_check("a/b", NULL), -EINVAL);
        cr_assert_eq(
                tenant_name_check(
                        "0123456789012345678901234567890123456789012345678901234567890123", NULL),
                -EINVAL);
}

Test(tenant, cpu_and_profiles_arguments)
{
        uint32_t mc;
        char **v = NULL;
        struct airlock_error err = { { 0 } };

        cr_assert_eq(tenant_cpu_parse("2.5", &mc), 0);
        cr_assert_eq(mc, 2500);
        cr_assert_eq(tenant_cpu_parse("0", &mc), 0);
        cr_assert_eq(mc, 0);
        cr_assert_eq(tenant_cpu_parse("-1", &mc), -EINVAL);
        cr_assert_eq(tenant_cpu_parse("0.001", &mc), -EINVAL);
        cr_assert_eq(tenant_cpu_parse("1e9", &mc), -EINVAL);
        cr_assert_eq(tenant_cpu_parse("nan", &mc), -EINVAL);
        cr_assert_eq(tenant_cpu_parse("2x", &mc), -EINVAL);
        cr_assert_eq(tenant_profiles_parse("default,minimal", &v, &err), 0);
        cr_assert_str_eq(v[0], "default");
        cr_assert_str_eq(v[1], "minimal");
        cr_assert_null(v[2]);
        strv_free(v);
        cr_assert_eq(tenant_profiles_parse("a,,b", &v, &err), -EINVAL);
        cr_assert(strstr(err.msg, "--profiles"));
        cr_assert_eq(tenant_profiles_parse("a,b c", &v, &err), -EINVAL);
}

Test(tenant, quota_messages_name_the_quota)
{
        struct tenant t = {
                .name = "team-a", .max_sessions = 4, .max_memory = 1000, .max_millicpus = 2500
        };
        struct airlock_error err = { { 0 } };
        struct tenant_usage use = { .sessions = 4 }, one = { .sessions = 1 };

        tenant_scope_set(&t);
        cr_assert_eq(tenant_quota_check(&t, &use, &one, &err), -EXFULL);
        cr_assert_str_eq(err.msg,
                         "tenant 'team-a' has reached its quota of 4 live sessions (max_sessions)");
        cr_assert_str_eq(tenant_scope_refusal()->quota, "max_sessions");
        cr_assert_str_eq(tenant_scope_refusal()->limit, "4");
        use = (struct tenant_usage){ .sessions = 1, .millicpus = 2000 };
        one = (struct tenant_usage){ .sessions = 1, .millicpus = 1000 };
        cr_assert_eq(tenant_quota_check(&t, &use, &one, &err), -EXFULL);
        cr_assert_str_eq(tenant_scope_refusal()->quota, "max_cpu");
        cr_assert_str_eq(tenant_scope_refusal()->limit, "2.5");
        one.millicpus = 500;
        cr_assert_eq(tenant_quota_check(&t, &use, &one, &err), 0);
        cr_assert(tenant_scope_sees("team-a"));
        cr_assert_not(tenant_scope_sees("team-b"));
        cr_assert_not(tenant_scope_sees(NULL)); /* a session of "default" */
        tenant_scope_set(NULL);
        cr_assert(tenant_scope_sees("team-b"));
}

Test(tenant, store_and_registry_follow_add_revoke_rotate)
{
        _cleanup_free_ char *dir = tmpdir();
        struct airlock_error err = { { 0 } };
        struct tenant_spec spec = { .has_max_sessions = true, .max_sessions = 3 };
        struct tenant_registry *reg = NULL;
        struct tenant_db *db = NULL;
        struct tenant *t = NULL;
        char key[TENANT_KEY_LEN + 1], key2[TENANT_KEY_LEN + 1];

        cr_assert_eq(tenant_registry_new(dir, &reg, &err), 0, "%s", err.msg);
        cr_assert_eq(tenant_db_open(dir, true, &db, &err), 0, "%s", err.msg);
        cr_assert_eq(tenant_db_add(db, "team-a", &spec, key, &err), 0, "%s", err.msg);
        cr_assert_eq(tenant_db_add(db, "team-a", &spec, key2, &err), -EEXIST);
        /* The registry sees the new key at once, through its inotify watch. */
        cr_assert_eq(tenant_registry_resolve(reg, key, strlen(key), &t), 0);
        cr_assert_str_eq(t->name, "team-a");
        cr_assert_eq(t->max_sessions, 3);
        t = tenant_unref(t);
        cr_assert_eq(tenant_db_revoke(db, "team-a", &err), 0);
        cr_assert_eq(tenant_registry_resolve(reg, key, strlen(key), &t), -ENOENT);
        cr_assert_eq(tenant_db_rotate(db, "team-a", key2, &err), 0);
        cr_assert_str_neq(key, key2);
        cr_assert_eq(tenant_registry_resolve(reg, key, strlen(key), &t), -ENOENT);
        cr_assert_eq(tenant_registry_resolve(reg, key2, strlen(key2), &t), 0);
        t = tenant_unref(t);
        cr_assert_eq(tenant_db_revoke(db, "nobody", &err), -ENOENT);
        db = tenant_db_close(db);
        reg = tenant_registry_free(reg);
        rmtree(dir);
}

static int first_text(void *userdata, int n, char **values, char **names)
{
        (void) n, (void) names;
        snprintf(userdata, 64, "%s", values[0] ? values[0] : "(null)");
        return 0;
}

Test(tenant, owner_column_is_added_once_with_default_rows)
{
        sqlite3 *db = NULL;
        char *msg = NULL, owner[64] = "";

        cr_assert_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
        cr_assert_eq(sqlite3_exec(db,
                                  "CREATE TABLE \"old files\" (id TEXT);"
                                  "INSERT INTO \"old files\" VALUES ('a');",
                                  NULL, NULL, &msg),
                     SQLITE_OK, "%s", msg);
        /* A table made before tenants gains the column; its rows are "default"'s. */
        cr_assert_eq(tenant_owner_column_add(db, "old files", &msg), SQLITE_OK, "%s", msg);
        cr_assert_eq(sqlite3_exec(db, "SELECT owner FROM \"old files\"", first_text, owner, &msg),
                     SQLITE_OK, "%s", msg);
        cr_assert_str_eq(owner, "default");
        /* Once there, it is left alone (a second ALTER would fail: duplicate column). */
        cr_assert_eq(tenant_owner_column_add(db, "old files", &msg), SQLITE_OK, "%s", msg);
        /* An unknown table is an error, not a silent success. */
        cr_assert_neq(tenant_owner_column_add(db, "missing", &msg), SQLITE_OK);
        sqlite3_free(msg);
        sqlite3_close(db);
}
