/* Unit tests of the egress policy (src/egress/policy.c). */
#include "egress/policy.h"

#include <criterion/criterion.h>

Test(egress_policy, absent_is_none)
{
        struct egress_policy *p = NULL;
        struct airlock_error err = { { 0 } };

        cr_assert_eq(egress_policy_parse(NULL, "t", &p, &err), 0);
        cr_assert_eq(p->mode, EGRESS_MODE_NONE);
        egress_policy_free(p);
}
