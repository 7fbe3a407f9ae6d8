/* Unit tests for the session module's pure parts: which relative paths the files API accepts
 * (everything it accepts is then resolved beneath /work with openat2, see workspace.c), and the
 * removal of trees that code planted (workspace-tree.c), on a private host directory; and the
 * session table's index by id (session.c). */
#include <criterion/criterion.h>

#include "session/fair.h"
#include "session/pressure.h"
#include "session/recent.h"
#include "session/sandbox.h"
#include "session/session-internal.h"
#include "session/session-table.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- tree removal --------------------------------------------------------------------------- */

static char tree_root[64];

static void tree_setup(void)
{
        (void) snprintf(tree_root, sizeof(tree_root), "/tmp/airlock-unit-tree-XXXXXX");
        cr_assert(mkdtemp(tree_root), "mkdtemp: %m");
}

static void tree_teardown(void)
{
        char cmd[256];

        (void) snprintf(cmd, sizeof(cmd), "chattr -R -i %s 2>/dev/null; rm -rf %s", tree_root,
                        tree_root);
        (void) system(cmd);
}

static int open_dir_at(int at, const char *name)
{
        int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        cr_assert(fd >= 0, "open %s: %m", name);
        return fd;
}

static void touch_at(int at, const char *name)
{
        int fd = openat(at, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert(fd >= 0, "create %s: %m", name);
        (void) close(fd);
}

/* A chain of depth directories under at/name, each holding a file "f"; returns an fd of the
 * deepest one. Entries made: 2 * depth (the directories and the files) plus name itself. */
static int make_chain(int at, const char *name, unsigned depth)
{
        int cur;

        cr_assert(mkdirat(at, name, 0755) == 0, "mkdir %s: %m", name);
        cur = open_dir_at(at, name);
        for (unsigned i = 0; i < depth; i++) {
                int next;
                cr_assert(mkdirat(cur, "d", 0755) == 0, "mkdir at level %u: %m", i);
                touch_at(cur, "f");
                next = open_dir_at(cur, "d");
                (void) close(cur);
                cur = next;
        }
        return cur;
}

static unsigned open_fds(void)
{
        unsigned n = 0;
        DIR *d = opendir("/proc/self/fd");
        while (d && readdir(d))
                n++;
        if (d)
                closedir(d);
        return n;
}

Test(tree, removes_a_deep_chain_and_a_wide_directory_whole, .init = tree_setup,
     .fini = tree_teardown)
{
        struct tree_removal t;
        unsigned fds;
        int root = open_dir_at(AT_FDCWD, tree_root), wide, deep;
        char name[32];

        /* Outside the tree, a symlink inside points at it: it must survive. */
        touch_at(root, "canary");
        deep = make_chain(root, "chain", 2000);
        cr_assert(symlinkat("../../../../canary", deep, "up") == 0);
        (void) close(deep);
        cr_assert(mkdirat(root, "chain/wide", 0755) == 0);
        wide = open_dir_at(root, "chain/wide");
        for (int i = 0; i < 5000; i++) {
                (void) snprintf(name, sizeof(name), "%05d", i);
                touch_at(wide, name);
        }
        cr_assert(symlinkat(tree_root, wide, "root-link") == 0);
        (void) close(wide);
        /* A directory without any permission still goes. */
        cr_assert(mkdirat(root, "chain/locked", 0) == 0);

        fds = open_fds();
        cr_assert_eq(workspace_tree_remove(NULL, root, "chain", 0, &t), 0, "why %d", t.why);
        cr_assert_eq(open_fds(), fds, "the walk left fds open");
        /* chain + 2000 dirs + 2000 files + up + wide + 5000 + root-link + locked */
        cr_assert_eq(t.removed, 1 + 4000 + 1 + 1 + 5000 + 1 + 1, "removed %llu",
                     (unsigned long long) t.removed);
        cr_assert_eq(t.left, 0);
        cr_assert(faccessat(root, "chain", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
        cr_assert(faccessat(root, "canary", F_OK, AT_SYMLINK_NOFOLLOW) == 0,
                  "the walk followed a symlink out of the tree");
        /* Nothing of ours is left beside it either (the temporary names moved up). */
        cr_assert(faccessat(AT_FDCWD, tree_root, F_OK, 0) == 0);
        cr_assert_eq(workspace_tree_remove(NULL, root, "chain", 0, &t), 0, "gone is gone");
        (void) close(root);
}

Test(tree, a_file_that_cannot_go_makes_a_partial_removal, .init = tree_setup, .fini = tree_teardown)
{
        struct tree_removal t;
        int root = open_dir_at(AT_FDCWD, tree_root), deep, fd, flags = FS_IMMUTABLE_FL;

        deep = make_chain(root, "chain", 300);
        touch_at(deep, "stuck");
        fd = openat(deep, "stuck", O_RDONLY | O_CLOEXEC);
        cr_assert(fd >= 0);
        if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0) {
                int e = errno;
                (void) close(fd);
                (void) close(deep);
                cr_skip_test("cannot make a file immutable here (%s): the filesystem of /tmp or "
                             "the missing CAP_LINUX_IMMUTABLE",
                             strerror(e));
        }
        (void) close(fd);
        (void) close(deep);

        cr_assert_eq(workspace_tree_remove(NULL, root, "chain", 0, &t), -ENOTEMPTY);
        cr_assert_eq(t.why, -EPERM, "why %d", t.why);
        /* What stayed: the file and the directories holding it, down from "chain". The
         * deepest ones were moved up into "chain" to be reached, so their count is what is
         * left in chain's last pass and below, at least the file and chain itself. */
        cr_assert(t.left >= 2, "left %llu", (unsigned long long) t.left);
        cr_assert(t.removed >= 300, "removed %llu", (unsigned long long) t.removed);
        cr_assert(faccessat(root, "chain", F_OK, AT_SYMLINK_NOFOLLOW) == 0);

        /* Time up before it starts: partial, and said so. */
        tree_teardown();
        tree_setup();
        (void) close(root);
        root = open_dir_at(AT_FDCWD, tree_root);
        (void) close(make_chain(root, "chain", 100));
        cr_assert_eq(workspace_tree_remove(NULL, root, "chain", 1, &t), -ENOTEMPTY);
        cr_assert_eq(t.why, -ETIME);
        cr_assert(t.left >= 1 && t.removed + t.left <= 201, "removed %llu left %llu",
                  (unsigned long long) t.removed, (unsigned long long) t.left);
        cr_assert_eq(workspace_tree_remove(NULL, root, "chain", 0, &t), 0);
        (void) close(root);
}

/* The session table (session.c): the array every scan walks and the index by id that every
 * request's lookup uses. Thousands of sessions come and go in random order; after each step
 * every id still in the table is found at the place the array says, and no removed one is. */

static void check_table(struct session_manager *mgr, struct session **all, const bool *in,
                        unsigned n)
{
        unsigned live = 0;

        for (unsigned i = 0; i < n; i++) {
                struct session *found = session_table_find(mgr, all[i]->id);

                if (!in[i]) {
                        cr_assert_null(found, "%s was removed but is still found", all[i]->id);
                        continue;
                }
                live++;
                cr_assert_eq(found, all[i], "%s is not found", all[i]->id);
                cr_assert_lt(found->table_pos, mgr->n_sessions);
                cr_assert_eq(mgr->sessions[found->table_pos], found);
        }
        cr_assert_eq(mgr->n_sessions, live);
}

Test(session_table, finds_every_session_among_thousands_that_come_and_go)
{
        enum { N = 5000 };
        struct session_manager *mgr = calloc(1, sizeof(*mgr));
        struct session **all = calloc(N, sizeof(*all));
        bool *in = calloc(N, sizeof(*in));
        unsigned seed = 7;

        cr_assert(mgr && all && in);
        mgr->cfg.default_stop_after_ms = 1000;
        for (unsigned i = 0; i < N; i++) {
                char id[SESSION_ID_MAX + 1];

                session_make_id(id);
                all[i] = session_new_object(mgr, id, NULL);
                cr_assert_not_null(all[i]);
                cr_assert_eq(session_table_add(mgr, all[i]), 0);
                in[i] = true;
        }
        check_table(mgr, all, in, N);
        cr_assert_null(session_table_find(mgr, "s-000000000000000000000000"));
        cr_assert_null(session_table_find(mgr, "not an id at all"));
        cr_assert_null(session_table_find(mgr, ""));

        /* Remove two thirds in random order, checking as we go, then add some back. */
        for (unsigned k = 0; k < 2 * N / 3; k++) {
                unsigned i = (unsigned) rand_r(&seed) % N;

                if (!in[i])
                        continue;
                session_table_remove(mgr, all[i]);
                session_table_remove(mgr, all[i]); /* a second time does nothing */
                in[i] = false;
                session_unref(all[i]); /* the table's reference */
                if (k % 500 == 0)
                        check_table(mgr, all, in, N);
        }
        check_table(mgr, all, in, N);
        for (unsigned i = 0; i < N; i += 3)
                if (!in[i]) {
                        cr_assert_eq(session_table_add(mgr, all[i]), 0);
                        in[i] = true;
                }
        check_table(mgr, all, in, N);

        for (unsigned i = 0; i < N; i++) {
                if (in[i]) {
                        session_table_remove(mgr, all[i]);
                        session_unref(all[i]);
                }
                session_unref(all[i]);
        }
        cr_assert_eq(mgr->n_sessions, 0u);
        free(mgr->sessions);
        free(mgr->by_id);
        free(mgr);
        free(all);
        free(in);
}

/* The ring of recent executions (recent.c): bounded, newest first, strings cut between
 * characters. */
static void add_exec(struct recent *r, const char *sid, const char *code, const char *out)
{
        json_t *res = json_pack("{s:s, s:s, s:s, s:{s:f, s:f, s:I}, s:i, s:[{s:s}]}", "status",
                                "ok", "stdout", out, "stderr", "", "usage", "wall_ms", 1.5,
                                "cpu_ms", 1.0, "peak_memory_bytes", (json_int_t) 4096,
                                "execution_count", 1, "files", "path", "a.txt");

        recent_add(r,
                   &(struct recent_exec){
                           .session_id = sid, .profile = "default", .code = code, .result = res });
        json_decref(res);
}

Test(recent, keeps_the_newest_and_cuts_between_characters)
{
        struct recent *r = NULL;
        char code[RECENT_CODE_MAX + 64];
        json_t *list, *x;

        cr_assert_eq(recent_new(0, &r), -EINVAL);
        cr_assert_eq(recent_new(3, &r), 0);
        for (int i = 0; i < 5; i++) {
                char c[16];
                (void) snprintf(c, sizeof(c), "print(%d)", i);
                add_exec(r, i % 2 ? "s-odd" : "s-even", c, "out");
        }
        cr_assert_eq(recent_count(r), 5);
        list = recent_list(r, 100, NULL);
        cr_assert_eq(json_array_size(list), 3);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "code")),
                         "print(4)");
        cr_assert_eq(json_integer_value(json_object_get(json_array_get(list, 2), "seq")), 3);
        json_decref(list);
        list = recent_list(r, 100, "s-odd");
        cr_assert_eq(json_array_size(list), 1);
        json_decref(list);
        list = recent_list(r, 1, NULL);
        cr_assert_eq(json_array_size(list), 1);
        json_decref(list);

        /* "é" is two bytes: a cut at RECENT_CODE_MAX must not split one. */
        code[0] = 'x';
        for (size_t i = 1; i + 1 < sizeof(code); i += 2)
                memcpy(code + i, "\xc3\xa9", 2);
        code[sizeof(code) - 1] = '\0';
        add_exec(r, "s-big", code, "");
        list = recent_list(r, 1, NULL);
        x = json_array_get(list, 0);
        cr_assert(json_is_true(json_object_get(x, "code_truncated")));
        cr_assert_eq(json_integer_value(json_object_get(x, "code_bytes")),
                     (json_int_t) strlen(code));
        cr_assert_leq(strlen(json_string_value(json_object_get(x, "code"))), RECENT_CODE_MAX);
        cr_assert_null(strstr(json_string_value(json_object_get(x, "code")), "\xef\xbf\xbd"));
        cr_assert_str_eq(json_string_value(json_object_get(x, "files")), "a.txt");
        json_decref(list);
        recent_free(r);
}

/* A profile layer (sandbox_options.layer_dir) in a sandbox of its own exec: bound read-only,
 * nosuid and nodev at JAIL_LAYER_PATH, its site-packages importable by the runner's Python and,
 * through PYTHONPATH, by a python3 the code starts. Needs what `airlock run` needs. */
#define LAYER_CHECK                                                                                \
        "import os, subprocess, sys\n"                                                             \
        "import fakelayer\n"                                                                       \
        "print(fakelayer.__file__)\n"                                                              \
        "print(os.environ.get('PYTHONPATH'))\n"                                                    \
        "try:\n"                                                                                   \
        "    open('/opt/airlock/layer/site-packages/new.py', 'w')\n"                               \
        "except OSError as e:\n"                                                                   \
        "    print(e.errno == 30)\n"                                                               \
        "m = [l.split() for l in open('/proc/self/mountinfo')]\n"                                  \
        "opts = [f[5].split(',') for f in m if f[4] == '/opt/airlock/layer']\n"                    \
        "print(len(opts) == 1 and {'ro', 'nosuid', 'nodev'} <= set(opts[0]))\n"                    \
        "print(subprocess.run(['python3', '-c', 'import fakelayer; print(fakelayer.WHERE)'],\n"    \
        "                     capture_output=True, text=True).stdout, end='')\n"

static char layer_dir[] = "/tmp/airlock-unit-layer-XXXXXX";

static void layer_teardown(void)
{
        char path[4096];

        (void) snprintf(path, sizeof(path), "%s/site-packages/fakelayer/__init__.py", layer_dir);
        (void) unlink(path);
        (void) snprintf(path, sizeof(path), "%s/site-packages/fakelayer", layer_dir);
        (void) rmdir(path);
        (void) snprintf(path, sizeof(path), "%s/site-packages", layer_dir);
        (void) rmdir(path);
        (void) rmdir(layer_dir);
}

Test(sandbox, layer_is_bound_read_only_and_importable, .fini = layer_teardown)
{
        static const char want[] = "/opt/airlock/layer/site-packages/fakelayer/__init__.py\n"
                                   "/opt/airlock/layer/site-packages\nTrue\nTrue\nlayer\n";
        static const char profile_text[] = "{\"description\": \"d\", \"languages\": [\"python\"]}";
        struct airlock_error err = { "" };
        struct jail_features f;
        struct profile *p = NULL;
        struct sandbox *sb = NULL;
        json_t *result = NULL;
        char path[4096];
        FILE *file;
        int r;

        jail_probe(&f);
        if (jail_check_mode(&f, JAIL_NAMESPACES, &err) < 0) {
                jail_features_done(&f);
                cr_skip_test("no namespaces isolation here: %s", err.msg);
        }
        cr_assert_not_null(mkdtemp(layer_dir));
        (void) snprintf(path, sizeof(path), "%s/site-packages", layer_dir);
        cr_assert_eq(mkdir(path, 0755), 0);
        (void) snprintf(path, sizeof(path), "%s/site-packages/fakelayer", layer_dir);
        cr_assert_eq(mkdir(path, 0755), 0);
        (void) snprintf(path, sizeof(path), "%s/site-packages/fakelayer/__init__.py", layer_dir);
        file = fopen(path, "w");
        cr_assert_not_null(file);
        fputs("WHERE = 'layer'\n", file);
        cr_assert_eq(fclose(file), 0);
        /* The sandbox's user reads the layer through the bind. */
        cr_assert_eq(chmod(layer_dir, 0755), 0);

        r = profile_parse("unit-layer", "unit-layer.json", profile_text, strlen(profile_text), &p,
                          &err);
        cr_assert_eq(r, 0, "%s", err.msg);
        r = sandbox_start(
                &f,
                &(struct sandbox_options){
                        .mode = JAIL_NAMESPACES,
                        .profile = p,
                        .name = "airlock-run-unit-layer",
                        .runner_path = AIRLOCK_TEST_BUILD_DIR "/src/runner/airlock-runner",
                        .layer_dir = layer_dir,
                },
                &sb, &err);
        cr_assert_eq(r, 0, "%s", err.msg);
        r = sandbox_exec(sb, &(struct exec_request){ .language = "python", .code = LAYER_CHECK },
                         &result, &err);
        cr_assert_eq(r, 0, "%s", err.msg);
        cr_expect_str_eq(json_string_value(json_object_get(result, "stdout")), want, "%s",
                         json_dumps(result, JSON_INDENT(1)));
        json_decref(result);
        sandbox_free(sb);
        profile_free(p);
        jail_features_done(&f);
}

/* ---- fairness (fair.h) and memory pressure (pressure.h) ---- */

#define SEC 1000000000ULL

Test(fair, a_busy_session_weighs_less_and_gets_its_weight_back_when_quiet)
{
        struct fair_state st = { 0 };
        uint64_t t = 5 * SEC, usec = 123456;
        uint32_t w, w_busy;

        cr_assert_eq(fair_sample(&st, usec, t), 0, "the first sample only starts");
        cr_assert_eq(fair_weight(st.avg_cpus, 1), CGROUP_WEIGHT_DEFAULT);
        /* 20 s at one full CPU. */
        for (int i = 0; i < 20; i++) {
                t += SEC;
                usec += 1000000;
                cr_assert_float_eq(fair_sample(&st, usec, t), 1.0, 1e-9);
        }
        cr_assert_gt(st.avg_cpus, 0.8);
        w_busy = fair_weight(st.avg_cpus, 1);
        cr_assert_lt(w_busy, 15, "a session that burnt a CPU for 20 s weighs %u", w_busy);
        cr_assert(fair_is_busy(st.avg_cpus));
        /* Then quiet: the weight climbs back, all of it within a minute. */
        for (int i = 0; i < 10; i++) {
                t += SEC;
                (void) fair_sample(&st, usec, t);
        }
        w = fair_weight(st.avg_cpus, 1);
        cr_assert(w > w_busy && w < CGROUP_WEIGHT_DEFAULT, "after 10 s quiet: %u", w);
        for (int i = 0; i < 50; i++) {
                t += SEC;
                (void) fair_sample(&st, usec, t);
        }
        cr_assert_eq(fair_weight(st.avg_cpus, 1), CGROUP_WEIGHT_DEFAULT);
        cr_assert_not(fair_is_busy(st.avg_cpus));
}

Test(fair, a_tenant_with_many_busy_sessions_shares_one_weight)
{
        uint32_t one = fair_weight(0.5, 1), of_ten = fair_weight(0.5, 10);

        cr_assert_eq(one, 17);
        cr_assert_eq(of_ten, 2);
        /* A quiet session is not divided, whatever its tenant runs. */
        cr_assert_eq(fair_weight(0.0, 50), CGROUP_WEIGHT_DEFAULT);
        cr_assert_eq(fair_weight(1000.0, 1000), CGROUP_WEIGHT_MIN, "never below the minimum");
}

Test(fair, a_counter_that_goes_back_starts_over)
{
        struct fair_state st = { 0 };

        (void) fair_sample(&st, 5000000, SEC);
        (void) fair_sample(&st, 6000000, 2 * SEC);
        cr_assert_gt(st.avg_cpus, 0);
        cr_assert_eq(fair_sample(&st, 1000, 3 * SEC), 0, "a new cgroup: no negative use");
        cr_assert_eq(st.last_usec, 1000);
}

Test(pressure, meminfo_and_thresholds)
{
        uint64_t avail = 0, total = 0;
        const char *text = "MemTotal:       24576000 kB\nMemFree:          100000 kB\n"
                           "MemAvailable:    1000000 kB\nBuffers:  1 kB\n";

        cr_assert_eq(pressure_parse_meminfo(text, &avail, &total), 0);
        cr_assert_eq(total, 24576000ULL * 1024);
        cr_assert_eq(avail, 1000000ULL * 1024);
        cr_assert_eq(pressure_parse_meminfo("MemTotal: 5 kB\n", &avail, &total), -EBADMSG);
        cr_assert_eq(pressure_parse_meminfo("MemTotal: x kB\nMemAvailable: 1 kB\n", &avail, &total),
                     -EBADMSG);
        cr_assert_eq(pressure_default_min(2ULL << 30), (2ULL << 30) / 20);
        cr_assert_eq(pressure_default_min(64ULL << 30), 1ULL << 30, "at most 1 GiB");
        cr_assert(pressure_is_short(99, 100, false));
        cr_assert_not(pressure_is_short(100, 100, false));
        cr_assert(pressure_is_short(110, 100, true), "it stays short until 25%% above");
        cr_assert_not(pressure_is_short(125, 100, true));
}
