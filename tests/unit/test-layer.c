/* Profile layers on disk (src/layer/layer.h): ids, the current link, holding a layer, removal of
 * what nobody uses, and builds, with a stand-in for pip (a shell script given as the python
 * to run) so that no package index or pip is needed. pip itself is tested end to end
 * (tests/e2e/test_profile_layers.py). */
#include "layer/layer.h"

#include "base/cleanup.h"
#include "profile/profile.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static char state[PATH_MAX];

static void make_state(void)
{
        (void) snprintf(state, sizeof(state), "/tmp/airlock-test-layer-XXXXXX");
        cr_assert_not_null(mkdtemp(state));
}

static void remove_state(void)
{
        char cmd[PATH_MAX + 16];

        (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state);
        cr_assert_eq(system(cmd), 0);
}

TestSuite(layer, .init = make_state, .fini = remove_state);

static void run(const char *cmd)
{
        cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static bool exists(const char *rel)
{
        char path[2 * PATH_MAX];
        struct stat st;

        (void) snprintf(path, sizeof(path), "%s/%s", state, rel);
        return lstat(path, &st) == 0;
}

/* A finished layer of profile p with id, made by hand. */
static void make_layer(const char *p, const char *id)
{
        char dir[2 * PATH_MAX], cmd[8 * PATH_MAX];

        (void) snprintf(dir, sizeof(dir), "%s/layers/%s/%s", state, p, id);
        (void) snprintf(cmd, sizeof(cmd),
                        "mkdir -p '%s/site-packages' && : > '%s/.lock' && echo '{\"id\": \"x\"}' "
                        "> '%s/layer.json'",
                        dir, dir, dir);
        run(cmd);
}

static void set_current(const char *p, const char *target)
{
        char link[2 * PATH_MAX];

        (void) snprintf(link, sizeof(link), "%s/layers/%s/current", state, p);
        (void) unlink(link);
        cr_assert_eq(symlink(target, link), 0);
}

/* Opens and share-locks a layer's .lock, as a daemon using it does. */
static int hold_by_hand(const char *p, const char *id)
{
        char path[2 * PATH_MAX];
        int fd;

        (void) snprintf(path, sizeof(path), "%s/layers/%s/%s/.lock", state, p, id);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_SH), 0);
        return fd;
}

#define ID1 "20261125-061743-3f9a1c"
#define ID2 "20261125-061800-00aa11"
#define ID3 "20261125-061900-bbccdd"

Test(layer, ids)
{
        cr_assert(layer_id_is_valid(ID1));
        cr_assert_not(layer_id_is_valid(""));
        cr_assert_not(layer_id_is_valid("current"));
        cr_assert_not(layer_id_is_valid("20261125-061743-3F9A1C")); /* lowercase hex only */
        cr_assert_not(layer_id_is_valid("20261125-061743-3f9a1"));
        cr_assert_not(layer_id_is_valid("20261125_061743-3f9a1c"));
        cr_assert_not(layer_id_is_valid("../../../../etc/passw"));
        cr_assert_not(layer_id_is_valid(NULL));
}

Test(layer, url_redaction)
{
        static const char *const cases[][2] = {
                { "https://pypi.internal/simple", "https://pypi.internal/simple" },
                { "https://u:tok@pypi.internal/simple", "https://***@pypi.internal/simple" },
                { "http://a@b@host:8080/x", "http://***@host:8080/x" },
                { "https://host/simple/@notuser", "https://host/simple/@notuser" },
                { "not a url", "not a url" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                _cleanup_free_ char *out = layer_url_redact(cases[i][0]);
                cr_assert_str_eq(out, cases[i][1]);
        }
}

Test(layer, current_none_good_and_broken)
{
        struct airlock_error err = { { 0 } };
        _cleanup_free_ char *dir = NULL;
        char want[2 * PATH_MAX], *real;

        cr_assert_eq(layer_current(state, "p", &dir, &err), 0, "no layers directory: none");
        make_layer("p", ID1);
        cr_assert_eq(layer_current(state, "p", &dir, &err), 0, "no current link: none");
        set_current("p", ID1);
        cr_assert_eq(layer_current(state, "p", &dir, &err), 1, "%s", err.msg);
        (void) snprintf(want, sizeof(want), "%s/layers/p/" ID1, state);
        real = realpath(want, NULL);
        cr_assert_str_eq(dir, real);
        free(real);

        set_current("p", "../../etc");
        cr_assert_eq(layer_current(state, "p", &dir, &err), -EINVAL);
        cr_assert(strstr(err.msg, "not a layer id"), "%s", err.msg);
        set_current("p", ID2);
        cr_assert_eq(layer_current(state, "p", &dir, &err), -ENOENT);
        cr_assert(strstr(err.msg, "missing") && strstr(err.msg, "airlock profile build"), "%s",
                  err.msg);
        cr_assert_eq(layer_current(state, "../p", &dir, &err), -EINVAL, "a name, not a path");
}

Test(layer, gc_keeps_current_and_held_layers)
{
        struct airlock_error err = { { 0 } };
        json_t *report = NULL;
        char cmd[2 * PATH_MAX];
        int held;

        make_layer("p", ID1);
        make_layer("p", ID2);
        make_layer("p", ID3);
        set_current("p", ID3);
        held = hold_by_hand("p", ID1);
        (void) snprintf(cmd, sizeof(cmd), "mkdir -p '%s/layers/p/.trash-" ID2 "/x'", state);
        run(cmd); /* a removal that died */

        cr_assert_eq(layer_gc(state, "p", &report, &err), 0, "%s", err.msg);
        cr_assert(exists("layers/p/" ID1), "held: kept");
        cr_assert_not(exists("layers/p/" ID2), "neither current nor held: removed");
        cr_assert_not(exists("layers/p/.trash-" ID2));
        cr_assert(exists("layers/p/" ID3), "current: kept");
        cr_assert_str_eq(json_string_value(json_array_get(json_object_get(report, "removed"), 0)),
                         ID2);
        cr_assert_str_eq(json_string_value(json_array_get(json_object_get(report, "in_use"), 0)),
                         ID1);
        json_decref(report);

        (void) close(held);
        cr_assert_eq(layer_gc(state, "p", NULL, &err), 0);
        cr_assert_not(exists("layers/p/" ID1), "let go: removed");
        cr_assert(exists("layers/p/" ID3));
}

Test(layer, hold_current_and_list)
{
        struct airlock_error err = { { 0 } };
        _cleanup_free_ char *dir = NULL;
        json_t *list = NULL;
        int fd = -1;

        make_layer("p", ID1);
        make_layer("p", ID2);
        set_current("p", ID2);
        cr_assert_eq(layer_hold_current(state, "p", &dir, &fd, &err), 1, "%s", err.msg);
        cr_assert_geq(fd, 0);
        cr_assert_eq(layer_list(state, "p", &list, &err), 0, "%s", err.msg);
        cr_assert_eq(json_array_size(list), 2);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "id")), ID1);
        cr_assert(json_is_false(json_object_get(json_array_get(list, 0), "current")));
        cr_assert(json_is_false(json_object_get(json_array_get(list, 0), "in_use")));
        cr_assert(json_is_true(json_object_get(json_array_get(list, 1), "current")));
        cr_assert(json_is_true(json_object_get(json_array_get(list, 1), "in_use")));
        cr_assert(json_is_true(json_object_get(json_array_get(list, 1), "complete")));
        json_decref(list);
        (void) close(fd);
}

Test(layer, remove_keeps_what_is_held_and_says_so)
{
        struct airlock_error err = { { 0 } };
        json_t *report = NULL;
        int held;

        cr_assert_eq(layer_remove(state, "p", &report, &err), -ENOENT);
        cr_assert(strstr(err.msg, "no layers"), "%s", err.msg);

        make_layer("p", ID1);
        make_layer("p", ID2);
        set_current("p", ID2);
        held = hold_by_hand("p", ID2);
        cr_assert_eq(layer_remove(state, "p", &report, &err), 0, "%s", err.msg);
        cr_assert_not(exists("layers/p/current"), "new sessions get no layer");
        cr_assert_not(exists("layers/p/" ID1));
        cr_assert(exists("layers/p/" ID2), "held by a live session: kept");
        cr_assert_str_eq(json_string_value(json_object_get(report, "current")), ID2);
        cr_assert_str_eq(json_string_value(json_array_get(json_object_get(report, "in_use"), 0)),
                         ID2);
        json_decref(report);

        (void) close(held);
        cr_assert_eq(layer_remove(state, "p", &report, &err), 0, "%s", err.msg);
        json_decref(report);
        cr_assert_not(exists("layers/p"), "nothing left: the directory goes too");
}

Test(layer, one_build_or_removal_at_a_time)
{
        struct airlock_error err = { { 0 } };
        char path[2 * PATH_MAX];
        int fd;

        make_layer("p", ID1);
        (void) snprintf(path, sizeof(path), "%s/layers/p/.build.lock", state);
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0);
        cr_assert_eq(layer_gc(state, "p", NULL, &err), -EBUSY);
        cr_assert(strstr(err.msg, "another build or removal"), "%s", err.msg);
        cr_assert_eq(layer_remove(state, "p", NULL, &err), -EBUSY);
        cr_assert(exists("layers/p/" ID1));
        (void) close(fd);
}

static struct profile *parse(const char *json)
{
        struct airlock_error err = { { 0 } };
        struct profile *p = NULL;

        cr_assert_eq(profile_parse("p", "test", json, strlen(json), &p, &err), 0, "%s", err.msg);
        return p;
}

/* A stand-in for python3 -m pip: makes a package "demo" (version $VERSION) in the --target
 * directory, or fails like pip when $FAIL is set. */
static const char fake_pip[] =
        "#!/bin/sh\n"
        "while [ $# -gt 0 ]; do [ \"$1\" = --target ] && t=$2; shift; done\n"
        "echo 'Processing demo'\n"
        "if [ -n \"$FAIL\" ]; then echo 'ERROR: No matching distribution found for demo' >&2; "
        "exit 1; fi\n"
        "mkdir -p \"$t/demo\" \"$t/demo-$VERSION.dist-info\"\n"
        "echo \"__version__ = '$VERSION'\" > \"$t/demo/__init__.py\"\n"
        "printf 'Metadata-Version: 2.1\\nName: demo\\nVersion: %s\\n\\nlong text\\n' $VERSION "
        "> \"$t/demo-$VERSION.dist-info/METADATA\"\n"
        "printf 'demo/__init__.py,,\\n\"demo-%s.dist-info/METADATA\",,\\n../../bin/x,,\\n' "
        "$VERSION > \"$t/demo-$VERSION.dist-info/RECORD\"\n";

struct lines {
        unsigned n;
        bool saw_processing;
};

static void on_line(void *userdata, const char *line)
{
        struct lines *l = userdata;

        l->n++;
        l->saw_processing |= strcmp(line, "Processing demo") == 0;
}

static void write_fake_pip(char *path, size_t size)
{
        FILE *f;

        (void) snprintf(path, size, "%s/fake-python", state);
        f = fopen(path, "w");
        cr_assert_not_null(f);
        cr_assert_eq(fputs(fake_pip, f) >= 0, true);
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(chmod(path, 0755), 0);
}

Test(layer, build_swaps_current_and_failure_keeps_it)
{
        struct airlock_error err = { { 0 } };
        struct profile *p = parse("{\"description\": \"d\", \"languages\": [\"python\"], "
                                  "\"network\": {\"mode\": \"allow\", \"allow\": "
                                  "[\"idx.internal:443\"]}, \"packages\": {\"index_url\": "
                                  "\"https://idx.internal/simple\", \"install\": [\"demo\"]}}");
        char python[2 * PATH_MAX];
        struct lines lines = { 0 };
        struct layer_build_options opts = { .on_output = on_line, .userdata = &lines };
        _cleanup_free_ char *first = NULL, *second = NULL, *after = NULL;
        json_t *m = NULL, *gc = NULL, *pkg;
        char *text;

        write_fake_pip(python, sizeof(python));
        opts.python = python;
        cr_assert_eq(setenv("VERSION", "1.0", 1), 0);
        cr_assert_eq(layer_build(state, p, &opts, &m, &gc, &err), 0, "%s", err.msg);
        cr_assert(lines.saw_processing, "pip's output is streamed");
        pkg = json_array_get(json_object_get(m, "packages"), 0);
        cr_assert_str_eq(json_string_value(json_object_get(pkg, "name")), "demo");
        cr_assert_str_eq(json_string_value(json_object_get(pkg, "version")), "1.0");
        cr_assert_gt(json_integer_value(json_object_get(pkg, "size")), 0);
        text = json_dumps(json_object_get(json_object_get(m, "pip"), "argv"), 0);
        cr_assert(strstr(text, "\"--only-binary=:all:\""), "%s", text);
        cr_assert(strstr(text, "\"--index-url\", \"https://idx.internal/simple\""), "%s", text);
        free(text);
        cr_assert_eq(layer_current(state, "p", &first, &err), 1);
        cr_assert(strstr(first, json_string_value(json_object_get(m, "id"))));
        json_decref(m);
        json_decref(gc);

        cr_assert_eq(setenv("FAIL", "1", 1), 0);
        cr_assert_eq(layer_build(state, p, &opts, &m, &gc, &err), -EIO);
        cr_assert(strstr(err.msg, "status 1") &&
                          strstr(err.msg, "ERROR: No matching distribution found for demo"),
                  "%s", err.msg);
        cr_assert_eq(layer_current(state, "p", &after, &err), 1);
        cr_assert_str_eq(after, first, "a failed build keeps the current layer");
        cr_assert_eq(unsetenv("FAIL"), 0);

        cr_assert_eq(setenv("VERSION", "2.0", 1), 0);
        cr_assert_eq(layer_build(state, p, &opts, &m, &gc, &err), 0, "%s", err.msg);
        cr_assert_eq(layer_current(state, "p", &second, &err), 1);
        cr_assert_str_neq(second, first);
        cr_assert_eq(json_array_size(json_object_get(gc, "removed")), 1,
                     "the old layer nobody held is removed");
        cr_assert_eq(access(first, F_OK), -1);
        json_decref(m);
        json_decref(gc);
        profile_free(p);
}

Test(layer, nothing_to_install_is_refused_before_anything_is_made)
{
        struct airlock_error err = { { 0 } };
        struct profile *p = parse("{\"description\": \"d\", \"languages\": [\"python\"]}");
        json_t *m = NULL;

        cr_assert_eq(layer_build(state, p, NULL, &m, NULL, &err), -EINVAL);
        cr_assert(strstr(err.msg, "nothing to install"), "%s", err.msg);
        cr_assert_not(exists("layers"));
        profile_free(p);

        p = parse("{\"description\": \"d\", \"languages\": [\"python\"], \"packages\": "
                  "{\"wheels\": \"/nonexistent-wheels\"}}");
        cr_assert_eq(layer_build(state, p, NULL, &m, NULL, &err), -ENOENT);
        cr_assert(strstr(err.msg, "/nonexistent-wheels"), "%s", err.msg);
        profile_free(p);
}
