/* Unit tests for the session module's pure parts: which relative paths the files API accepts
 * (everything it accepts is then resolved beneath /work with openat2, see workspace.c). */
#include <criterion/criterion.h>

#include "session/sandbox.h"

#include <string.h>

struct path_case {
        const char *path;
        bool allow_empty;
        bool valid;
};

static const struct path_case cases[] = {
        { "data.csv", false, true },
        { "dir/sub/file.txt", false, true },
        { "with space/ünïcode ☃.txt", false, true },
        { ".hidden", false, true },
        { "..dots", false, true },
        { "a..b/c", false, true },
        { "", false, false },
        { "", true, true },
        { "/etc/passwd", false, false },
        { "../etc/passwd", false, false },
        { "a/../../b", false, false },
        { "..", false, false },
        { ".", false, false },
        { "a/./b", false, false },
        { "a//b", false, false },
        { "a/", false, false },
        { "/", true, false },
};

Test(session, path_validation)
{
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct path_case *c = &cases[i];
                cr_expect_eq(workspace_path_is_valid(c->path, c->allow_empty), c->valid,
                             "path '%s' (allow_empty %d): expected %s", c->path, c->allow_empty,
                             c->valid ? "valid" : "invalid");
        }
}

Test(session, path_length_limits)
{
        char comp[300], path[5000];

        memset(comp, 'a', 255);
        comp[255] = '\0';
        cr_assert(workspace_path_is_valid(comp, false), "a 255-byte name is a valid name");
        memset(comp, 'a', 256);
        comp[256] = '\0';
        cr_assert_not(workspace_path_is_valid(comp, false), "256 bytes is over NAME_MAX");
        memset(path, 'a', sizeof(path) - 1);
        path[sizeof(path) - 1] = '\0';
        for (size_t i = 100; i < sizeof(path) - 1; i += 101)
                path[i] = '/';
        cr_assert_not(workspace_path_is_valid(path, false), "over 4095 bytes is refused");
        cr_assert_not(workspace_path_is_valid(NULL, true));
}
