/* Unit tests for the jail's small pure pieces: isolation modes, mode checks against a probed
 * feature set, and the Landlock probe. The sandbox itself is exercised end to end by the
 * hostile suite. */
#include <criterion/criterion.h>

#include "jail/jail.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

Test(jail, isolation_names_round_trip)
{
        enum jail_isolation m;

        cr_assert_eq(jail_isolation_from_string("namespaces", &m), 0);
        cr_assert_eq(m, JAIL_NAMESPACES);
        cr_assert_eq(jail_isolation_from_string("process", &m), 0);
        cr_assert_eq(m, JAIL_PROCESS);
        cr_assert_eq(jail_isolation_from_string("none", &m), 0);
        cr_assert_eq(m, JAIL_NONE);
        cr_assert_str_eq(jail_isolation_to_string(JAIL_PROCESS), "process");
        cr_assert_eq(jail_isolation_from_string("Namespaces", &m), -EINVAL);
        cr_assert_eq(jail_isolation_from_string("", &m), -EINVAL);
        cr_assert_eq(jail_isolation_from_string(NULL, &m), -EINVAL);
}

Test(jail, namespaces_mode_refused_without_root)
{
        struct jail_features f = {
                .is_root = false, .userns = true, .seccomp = true, .mount_setattr = true
        };
        struct airlock_error err = { { 0 } };

        f.cgroups.version = CGROUP_V1;
        cr_assert_eq(jail_check_mode(&f, JAIL_NAMESPACES, &err), -EOPNOTSUPP);
        cr_assert(strstr(err.msg, "root"), "message: %s", err.msg);
        /* none needs nothing; process needs cgroups only */
        cr_assert_eq(jail_check_mode(&f, JAIL_NONE, &err), 0);
        cr_assert_eq(jail_check_mode(&f, JAIL_PROCESS, &err), 0);
}

Test(jail, namespaces_mode_names_each_missing_feature)
{
        struct jail_features base = {
                .is_root = true, .userns = true, .seccomp = true, .mount_setattr = true
        };
        struct airlock_error err = { { 0 } };
        struct jail_features f;

        base.cgroups.version = CGROUP_V2;
        cr_assert_eq(jail_check_mode(&base, JAIL_NAMESPACES, &err), 0);

        f = base, f.userns = false;
        cr_assert_eq(jail_check_mode(&f, JAIL_NAMESPACES, &err), -EOPNOTSUPP);
        cr_assert(strstr(err.msg, "user namespaces"), "message: %s", err.msg);
        f = base, f.seccomp = false;
        cr_assert_eq(jail_check_mode(&f, JAIL_NAMESPACES, &err), -EOPNOTSUPP);
        cr_assert(strstr(err.msg, "seccomp"), "message: %s", err.msg);
        f = base, f.mount_setattr = false;
        cr_assert_eq(jail_check_mode(&f, JAIL_NAMESPACES, &err), -EOPNOTSUPP);
        cr_assert(strstr(err.msg, "mount_setattr"), "message: %s", err.msg);
        f = base, f.cgroups.version = CGROUP_NONE;
        (void) strcpy(f.cgroup_error, "no controllers");
        cr_assert_eq(jail_check_mode(&f, JAIL_NAMESPACES, &err), -EOPNOTSUPP);
        cr_assert(strstr(err.msg, "no controllers"), "message: %s", err.msg);
        cr_assert_eq(jail_check_mode(&f, JAIL_PROCESS, &err), -EOPNOTSUPP);
}

Test(jail, probe_matches_the_kernel)
{
        struct jail_features f;
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1 /* VERSION */);

        jail_probe(&f);
        cr_assert_eq(f.landlock_abi, abi < 0 ? 0 : (int) abi);
        cr_assert_eq(f.is_root, geteuid() == 0);
        cr_assert(strlen(f.kernel) > 0);
        jail_features_done(&f);
}
