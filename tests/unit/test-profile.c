/* Unit tests for src/profile: the shipped profiles carry the values docs/PROFILES.md promises,
 * every malformed input is refused with -EINVAL and a message naming the key, and the search
 * path finds profiles where profile.h says it does. */
#include "profile/profile.h"

#include "base/cleanup.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHIPPED_DIR AIRLOCK_TEST_SOURCE_DIR "/profiles"

#define KIB UINT64_C(1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)
#define TIB (GIB * 1024)

static void profile_freep(struct profile **p)
{
        (void) profile_free(*p);
}

#define _cleanup_profile_ _cleanup_(profile_freep)

static const char *const minimal_imports[] = {
        "math",        "statistics", "itertools", "functools", "re",       "datetime",
        "collections", "json",       "csv",       "string",    "textwrap", "decimal",
        "fractions",   "random",     "operator",  "typing",    NULL,
};

/* The seed's list, then the everyday standard library of a data scientist's first hour. */
#define EVERYDAY_IMPORTS                                                                           \
        "math", "statistics", "itertools", "functools", "re", "datetime", "collections", "json",   \
                "csv", "string", "textwrap", "decimal", "fractions", "random", "operator",         \
                "typing", "time", "zoneinfo", "calendar", "io", "pathlib", "copy", "dataclasses",  \
                "enum", "heapq", "bisect", "pprint", "base64", "hashlib"

/* The analysis part of the data stack (docs/PROFILES.md, "The data stack"): data-science allows
 * it, visualization too, with the plotting libraries on top. */
#define ANALYSIS_IMPORTS                                                                           \
        "numpy", "pandas", "scipy", "sklearn", "statsmodels", "sympy", "networkx", "xarray",       \
                "skimage", "PIL", "nltk", "openpyxl", "xlrd", "docx", "pypdf", "reportlab", "bs4", \
                "lxml", "tabulate", "tqdm"

static const char *const data_science_imports[] = {
        EVERYDAY_IMPORTS,
        ANALYSIS_IMPORTS,
        NULL,
};

static const char *const visualization_imports[] = {
        EVERYDAY_IMPORTS, ANALYSIS_IMPORTS, "matplotlib", "seaborn", "plotly", NULL,
};

static void expect_strv_eq(char **got, const char *const *want, const char *what)
{
        size_t i;

        cr_assert_not_null(got, "%s is NULL", what);
        for (i = 0; want[i]; i++) {
                cr_assert_not_null(got[i], "%s has %zu entries, expected more (next \"%s\")", what,
                                   i, want[i]);
                cr_expect_str_eq(got[i], want[i], "%s[%zu] is \"%s\", expected \"%s\"", what, i,
                                 got[i], want[i]);
        }
        cr_expect_null(got[i], "%s has more than %zu entries (next \"%s\")", what, i,
                       got[i] ? got[i] : "");
}

static size_t strv_length(char **v)
{
        size_t n = 0;

        while (v && v[n])
                n++;
        return n;
}

static void load_shipped(const char *name, struct profile **ret)
{
        struct airlock_error err = { "" };
        char path[4096];
        int r;

        (void) snprintf(path, sizeof(path), "%s/%s.json", SHIPPED_DIR, name);
        r = profile_load(path, ret, &err);
        cr_assert_eq(r, 0, "loading %s failed: %d %s", path, r, err.msg);
        cr_assert_str_eq((*ret)->name, name);
        cr_assert_not_null((*ret)->description);
        cr_expect_gt(strlen((*ret)->description), 10);
        cr_expect_str_eq((*ret)->rootfs, "/");
}

/* Shipped profiles */

Test(shipped, default_values)
{
        static const char *const preload[] = { "numpy", "pandas", "matplotlib", "matplotlib.pyplot",
                                               NULL };
        static const char *const env[] = { "MPLBACKEND=Agg", NULL };
        _cleanup_profile_ struct profile *p = NULL;

        load_shipped("default", &p);
        cr_expect(p->lang_python);
        cr_expect(p->lang_bash);
        cr_expect(p->lang_javascript);
        expect_strv_eq(p->preload, preload, "preload");
        cr_expect_null(p->imports, "default allows any import");
        cr_expect_eq(p->policy, PROFILE_POLICY_NONE);
        expect_strv_eq(p->env, env, "env");
        cr_expect_eq(p->limits.memory_bytes, 2 * GIB);
        cr_expect_eq(p->limits.cpu_millicpus, 1000);
        cr_expect_eq(p->limits.pids, 256);
        cr_expect_eq(p->limits.timeout_ms, 60000);
        cr_expect_eq(p->limits.output_bytes, MIB);
        cr_expect_eq(p->limits.workspace_bytes, 512 * MIB);
        cr_expect_eq(p->limits.tmp_bytes, 128 * MIB);
        cr_expect_eq(p->limits.files, 1024);
        cr_assert_not_null(p->network);
        cr_expect_eq(p->network->mode, EGRESS_MODE_NONE);
}

Test(shipped, minimal_values)
{
        static const char *const none[] = { NULL };
        _cleanup_profile_ struct profile *p = NULL;

        load_shipped("minimal", &p);
        cr_expect(p->lang_python);
        cr_expect_not(p->lang_bash);
        cr_expect_not(p->lang_javascript, "the restricted profiles are Python only");
        expect_strv_eq(p->preload, none, "preload");
        expect_strv_eq(p->imports, minimal_imports, "imports");
        cr_expect_eq(strv_length(p->imports), 16);
        cr_expect_eq(p->policy, PROFILE_POLICY_RESTRICTED);
        expect_strv_eq(p->env, none, "env");
        cr_expect_eq(p->limits.memory_bytes, 256 * MIB);
        cr_expect_eq(p->limits.cpu_millicpus, 1000);
        cr_expect_eq(p->limits.pids, 64);
        cr_expect_eq(p->limits.timeout_ms, 10000);
        cr_expect_eq(p->limits.output_bytes, 256 * KIB);
        cr_expect_eq(p->limits.workspace_bytes, 64 * MIB);
        cr_expect_eq(p->limits.tmp_bytes, 32 * MIB);
        cr_expect_eq(p->limits.files, 256);
}

Test(shipped, data_science_values)
{
        static const char *const preload[] = { "numpy", "pandas", NULL };
        static const char *const none[] = { NULL };
        _cleanup_profile_ struct profile *p = NULL;

        load_shipped("data-science", &p);
        cr_expect(p->lang_python);
        cr_expect_not(p->lang_bash);
        expect_strv_eq(p->preload, preload, "preload");
        expect_strv_eq(p->imports, data_science_imports, "imports");
        cr_expect_eq(p->policy, PROFILE_POLICY_RESTRICTED);
        expect_strv_eq(p->env, none, "env");
        cr_expect_eq(p->limits.memory_bytes, 2 * GIB);
        cr_expect_eq(p->limits.cpu_millicpus, 1000);
        cr_expect_eq(p->limits.pids, 256);
        cr_expect_eq(p->limits.timeout_ms, 60000);
        cr_expect_eq(p->limits.output_bytes, MIB);
        cr_expect_eq(p->limits.workspace_bytes, 512 * MIB);
        cr_expect_eq(p->limits.tmp_bytes, 128 * MIB);
        cr_expect_eq(p->limits.files, 1024);
}

Test(shipped, visualization_values)
{
        static const char *const preload[] = { "numpy", "pandas", "matplotlib", "matplotlib.pyplot",
                                               NULL };
        static const char *const env[] = { "MPLBACKEND=Agg", NULL };
        _cleanup_profile_ struct profile *p = NULL;

        load_shipped("visualization", &p);
        cr_expect(p->lang_python);
        cr_expect_not(p->lang_bash);
        expect_strv_eq(p->preload, preload, "preload");
        expect_strv_eq(p->imports, visualization_imports, "imports");
        cr_expect_eq(p->policy, PROFILE_POLICY_RESTRICTED);
        expect_strv_eq(p->env, env, "env");
        cr_expect_eq(p->limits.memory_bytes, 2 * GIB);
        cr_expect_eq(p->limits.cpu_millicpus, 1000);
        cr_expect_eq(p->limits.pids, 256);
        cr_expect_eq(p->limits.timeout_ms, 60000);
        cr_expect_eq(p->limits.output_bytes, 4 * MIB);
        cr_expect_eq(p->limits.workspace_bytes, 512 * MIB);
        cr_expect_eq(p->limits.tmp_bytes, 128 * MIB);
        cr_expect_eq(p->limits.files, 1024);
}

Test(shipped, load_by_name_and_list)
{
        static const char *const shipped[] = { "data-science", "default", "microvm", "minimal",
                                               "visualization" };
        _cleanup_strv_free_ char **names = NULL;
        size_t found = 0;

        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", SHIPPED_DIR, 1), 0);
        for (size_t i = 0; i < ELEMENTSOF(shipped); i++) {
                _cleanup_profile_ struct profile *p = NULL;
                struct airlock_error err = { "" };
                int r = profile_load(shipped[i], &p, &err);

                cr_expect_eq(r, 0, "profile_load(\"%s\"): %d %s", shipped[i], r, err.msg);
                if (r == 0)
                        cr_expect_str_eq(p->name, shipped[i]);
        }

        cr_assert_eq(profile_list(&names), 0);
        for (size_t i = 0; names[i]; i++) {
                if (i > 0)
                        cr_expect_lt(strcmp(names[i - 1], names[i]), 0,
                                     "list not sorted and unique at \"%s\"", names[i]);
                for (size_t j = 0; j < ELEMENTSOF(shipped); j++)
                        if (strcmp(names[i], shipped[j]) == 0)
                                found++;
        }
        cr_expect_eq(found, ELEMENTSOF(shipped));
}

Test(shipped, microvm_is_default_in_a_vm)
{
        _cleanup_profile_ struct profile *vm = NULL, *def = NULL;
        struct airlock_error err = { "" };

        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", SHIPPED_DIR, 1), 0);
        cr_assert_eq(profile_load("microvm", &vm, &err), 0, "%s", err.msg);
        cr_assert_eq(profile_load("default", &def, &err), 0, "%s", err.msg);
        cr_expect_eq(vm->isolation, PROFILE_ISOLATION_MICROVM);
        cr_expect_eq(def->isolation, PROFILE_ISOLATION_NAMESPACES);
        cr_expect_eq(memcmp(&vm->limits, &def->limits, sizeof(vm->limits)), 0);
        expect_strv_eq(vm->preload, (const char *const *) def->preload, "preload");
        cr_expect(vm->lang_python && vm->lang_bash);
        cr_expect_eq(vm->network->mode, EGRESS_MODE_NONE);
}

/* Parsing valid input */

static int parse(const char *text, struct profile **ret, struct airlock_error *err)
{
        return profile_parse("test", "test.json", text, strlen(text), ret, err);
}

Test(parse, javascript_language)
{
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };
        char buf[64];

        cr_assert_eq(parse("{\"description\": \"d\", \"languages\": [\"javascript\", \"bash\"]}",
                           &p, &err),
                     0, "%s", err.msg);
        cr_expect(p->lang_javascript && p->lang_bash && !p->lang_python);
        cr_expect(profile_allows_language(p, "javascript"));
        cr_expect(profile_allows_language(p, "typescript"), "typescript comes with javascript");
        cr_expect(profile_allows_language(p, "bash"));
        cr_expect_not(profile_allows_language(p, NULL), "NULL is python");
        cr_expect_not(profile_allows_language(p, "ruby"));
        cr_expect_str_eq(profile_languages_text(p, buf, sizeof(buf)),
                         "bash, javascript, typescript");
        p = profile_free(p);
        cr_assert_eq(parse("{\"description\": \"d\", \"languages\": [\"typescript\"]}", &p, &err),
                     0, "%s", err.msg);
        cr_expect(profile_allows_language(p, "typescript"));
        cr_expect(profile_allows_language(p, "javascript"), "javascript comes with typescript");
        p = profile_free(p);
        cr_assert_eq(parse("{\"description\": \"d\", \"languages\": [\"javascript\", "
                           "\"typescript\"]}",
                           &p, &err),
                     0, "%s", err.msg);
        p = profile_free(p);
        cr_expect_neq(parse("{\"description\": \"d\", \"languages\": [\"typescript\", "
                            "\"typescript\"]}",
                            &p, &err),
                      0);
        cr_expect(strstr(err.msg, "listed twice"), "%s", err.msg);
        cr_assert_eq(parse("{\"description\": \"d\", \"languages\": [\"python\"]}", &p, &err), 0,
                     "%s", err.msg);
        cr_expect_not(profile_allows_language(p, "javascript"));
        cr_expect_not(profile_allows_language(p, "typescript"));
        cr_expect_str_eq(profile_languages_text(p, buf, sizeof(buf)), "python");
}

Test(parse, r_language)
{
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };
        char buf[64];

        cr_assert_eq(
                parse("{\"description\": \"d\", \"languages\": [\"python\", \"r\"]}", &p, &err), 0,
                "%s", err.msg);
        cr_expect(p->lang_r && p->lang_python && !p->lang_bash);
        cr_expect(profile_allows_language(p, "r"));
        cr_expect_not(profile_allows_language(p, "R"), "names are lower case");
        cr_expect_str_eq(profile_languages_text(p, buf, sizeof(buf)), "python, r");
        p = profile_free(p);
        cr_assert_eq(parse("{\"description\": \"d\", \"languages\": [\"r\", \"r\"]}", &p, &err),
                     -EINVAL);
        cr_expect(strstr(err.msg, "listed twice"), "%s", err.msg);
        cr_assert_eq(parse("{\"description\": \"d\", \"languages\": [\"python\"]}", &p, &err), 0,
                     "%s", err.msg);
        cr_expect_not(profile_allows_language(p, "r"));
}

Test(parse, defaults)
{
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };
        struct profile_limits def;

        cr_assert_eq(parse("{\"description\": \"d\", \"languages\": [\"bash\"]}", &p, &err), 0,
                     "%s", err.msg);
        profile_limits_default(&def);
        cr_expect_eq(def.memory_bytes, GIB);
        cr_expect_eq(def.cpu_millicpus, 1000);
        cr_expect_eq(def.pids, 256);
        cr_expect_eq(def.timeout_ms, 30000);
        cr_expect_eq(def.output_bytes, MIB);
        cr_expect_eq(def.workspace_bytes, 256 * MIB);
        cr_expect_eq(def.tmp_bytes, 64 * MIB);
        cr_expect_eq(def.files, 1024);
        /* Field by field: memcmp() would compare the struct's tail padding too. */
        cr_expect_eq(p->limits.memory_bytes, def.memory_bytes);
        cr_expect_eq(p->limits.cpu_millicpus, def.cpu_millicpus);
        cr_expect_eq(p->limits.pids, def.pids);
        cr_expect_eq(p->limits.timeout_ms, def.timeout_ms);
        cr_expect_eq(p->limits.output_bytes, def.output_bytes);
        cr_expect_eq(p->limits.workspace_bytes, def.workspace_bytes);
        cr_expect_eq(p->limits.tmp_bytes, def.tmp_bytes);
        cr_expect_eq(p->limits.files, def.files);

        cr_expect_str_eq(p->name, "test");
        cr_expect_str_eq(p->description, "d");
        cr_expect_not(p->lang_python);
        cr_expect(p->lang_bash);
        cr_assert_not_null(p->preload);
        cr_expect_null(p->preload[0]);
        cr_expect_null(p->imports);
        cr_expect_eq(p->policy, PROFILE_POLICY_NONE);
        cr_expect_eq(p->start, PROFILE_START_ZYGOTE);
        cr_expect_eq(p->isolation, PROFILE_ISOLATION_NAMESPACES);
        cr_expect_str_eq(p->rootfs, "/");
        cr_assert_not_null(p->env);
        cr_expect_null(p->env[0]);
        cr_assert_not_null(p->network);
        cr_expect_eq(p->network->mode, EGRESS_MODE_NONE);
        cr_expect_eq(p->network->n_rules, 0);
}

Test(parse, network_allow)
{
        static const char text[] =
                "{\"description\": \"d\", \"languages\": [\"python\"], \"network\": "
                "{\"mode\": \"allow\", \"allow\": [\"PyPI.Internal:443\", \"10.1.2.0/24:5432\"],"
                " \"max_connections\": 8, \"max_bytes\": \"10MiB\"}}";
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };

        cr_assert_eq(parse(text, &p, &err), 0, "%s", err.msg);
        cr_assert_not_null(p->network);
        cr_expect_eq(p->network->mode, EGRESS_MODE_ALLOW);
        cr_assert_eq(p->network->n_rules, 2);
        cr_expect_str_eq(p->network->rules[0].text, "pypi.internal:443");
        cr_expect_str_eq(p->network->rules[1].text, "10.1.2.0/24:5432");
        cr_expect_eq(p->network->max_connections, 8);
        cr_expect_eq(p->network->max_bytes, 10 * MIB);
}

Test(parse, network_none_string_and_object)
{
        static const char *const texts[] = {
                "{\"description\": \"d\", \"languages\": [\"python\"], \"network\": \"none\"}",
                "{\"description\": \"d\", \"languages\": [\"python\"], \"network\": {\"mode\": "
                "\"none\"}}",
        };

        for (size_t i = 0; i < ELEMENTSOF(texts); i++) {
                _cleanup_profile_ struct profile *p = NULL;
                struct airlock_error err = { "" };

                cr_assert_eq(parse(texts[i], &p, &err), 0, "%s: %s", texts[i], err.msg);
                cr_assert_not_null(p->network);
                cr_expect_eq(p->network->mode, EGRESS_MODE_NONE);
        }
}

Test(parse, alternative_value_forms)
{
        static const char text[] =
                "{\"description\": \"d\", \"languages\": [\"python\"], \"imports\": [],"
                " \"preload\": [\"a.b_c.D9\"], \"policy\": \"restricted\", \"network\": \"none\","
                " \"rootfs\": \"/srv/rootfs\", \"env\": {\"_X1\": \"\", \"LANG\": \"C.UTF-8\"},"
                " \"start\": \"cold\", \"isolation\": \"microvm\","
                " \"limits\": {\"memory\": 16777216, \"cpus\": 0.5, \"pids\": 8,"
                " \"timeout\": 1.5, \"output\": \"2 kb\", \"workspace\": \"1MiB\","
                " \"tmp\": \"1T\", \"files\": 65536}}";
        static const char *const preload[] = { "a.b_c.D9", NULL };
        static const char *const env[] = { "_X1=", "LANG=C.UTF-8", NULL };
        static const char *const none[] = { NULL };
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };

        cr_assert_eq(parse(text, &p, &err), 0, "%s", err.msg);
        expect_strv_eq(p->imports, none, "imports");
        expect_strv_eq(p->preload, preload, "preload");
        expect_strv_eq(p->env, env, "env");
        cr_expect_eq(p->policy, PROFILE_POLICY_RESTRICTED);
        cr_expect_eq(p->start, PROFILE_START_COLD);
        cr_expect_eq(p->isolation, PROFILE_ISOLATION_MICROVM);
        cr_expect_str_eq(p->rootfs, "/srv/rootfs");
        cr_expect_eq(p->limits.memory_bytes, 16 * MIB);
        cr_expect_eq(p->limits.cpu_millicpus, 500);
        cr_expect_eq(p->limits.pids, 8);
        cr_expect_eq(p->limits.timeout_ms, 1500);
        cr_expect_eq(p->limits.output_bytes, 2000);
        cr_expect_eq(p->limits.workspace_bytes, MIB);
        cr_expect_eq(p->limits.tmp_bytes, TIB);
        cr_expect_eq(p->limits.files, 65536);
}

Test(parse, range_edges_are_inclusive)
{
        static const char text[] =
                "{\"description\": \"d\", \"languages\": [\"python\"], \"limits\": {"
                "\"memory\": \"1TiB\", \"cpus\": 0.01, \"pids\": 65536, \"timeout\": \"86400s\","
                " \"output\": \"1GiB\", \"workspace\": \"1TiB\", \"tmp\": \"1MiB\", \"files\": "
                "64}}";
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };

        cr_assert_eq(parse(text, &p, &err), 0, "%s", err.msg);
        cr_expect_eq(p->limits.memory_bytes, TIB);
        cr_expect_eq(p->limits.cpu_millicpus, 10);
        cr_expect_eq(p->limits.pids, 65536);
        cr_expect_eq(p->limits.timeout_ms, 86400000);
        cr_expect_eq(p->limits.output_bytes, GIB);
        cr_expect_eq(p->limits.files, 64);
}

/* Malformed input: each row must fail with -EINVAL and a message that names test.json and
 * contains `expect` (the key, or the offending value where the key alone would be ambiguous). */

struct bad_case {
        const char *text;
        const char *expect;
};

#define OK_HEAD "\"description\": \"d\", \"languages\": [\"python\"]"
#define WITH(extra) "{" OK_HEAD ", " extra "}"
#define LIMIT(body) WITH("\"limits\": {" body "}")

static const struct bad_case bad_cases[] = {
        /* Not JSON, or not an object. */
        { "", "test.json:1:0: invalid JSON" },
        { "   \n  ", "invalid JSON" },
        { "{\n  \"description\": \"d\",\n  \"languages\": [\"python\",]\n}", "test.json:3:" },
        { "{" OK_HEAD "} trailing", "invalid JSON" },
        { "{\"description\": \"a\\u0000b\", \"languages\": [\"python\"]}", "invalid JSON" },
        { "[1, 2]", "JSON object" },
        { "\"profile\"", "JSON object" },
        { "42", "JSON object" },
        { "null", "JSON object" },
        /* Duplicate keys, which jansson names when they are short. */
        { "{" OK_HEAD ", \"description\": \"e\"}", "description" },
        { LIMIT("\"memory\": \"1GiB\", \"memory\": \"2GiB\""), "memory" },
        { WITH("\"env\": {\"A\": \"1\", \"A\": \"2\"}"), "duplicate" },
        /* Unknown keys. */
        { WITH("\"memroy\": \"1GiB\""), "memroy" },
        { WITH("\"Description\": \"x\""), "Description" },
        { LIMIT("\"memroy\": \"1GiB\""), "memroy" },
        { LIMIT("\"cpu\": 1"), "limits" },
        /* Missing required keys. */
        { "{\"languages\": [\"python\"]}", "description" },
        { "{\"description\": \"d\"}", "languages" },
        /* Wrong types and values, field by field. */
        { "{\"description\": 5, \"languages\": [\"python\"]}", "description" },
        { "{\"description\": \"\", \"languages\": [\"python\"]}", "description" },
        { "{\"description\": null, \"languages\": [\"python\"]}", "description" },
        { "{\"description\": \"d\", \"languages\": \"python\"}", "languages" },
        { "{\"description\": \"d\", \"languages\": []}", "languages" },
        { "{\"description\": \"d\", \"languages\": [1]}", "languages[0]" },
        { "{\"description\": \"d\", \"languages\": [\"ruby\"]}", "languages[0]" },
        { "{\"description\": \"d\", \"languages\": [\"python\", \"Python\"]}", "languages[1]" },
        { "{\"description\": \"d\", \"languages\": [\"python\", \"python\"]}", "languages[1]" },
        { "{\"description\": \"d\", \"languages\": [\"javascript\", \"javascript\"]}",
          "languages[1]" },
        { "{\"description\": \"d\", \"languages\": [\"node\"]}", "languages[0]" },
        { WITH("\"preload\": \"numpy\""), "preload" },
        { WITH("\"preload\": null"), "preload" },
        { WITH("\"preload\": [1]"), "preload[0]" },
        { WITH("\"preload\": [\"..x\"]"), "preload[0]" },
        { WITH("\"preload\": [\"numpy\", \"x.\"]"), "preload[1]" },
        { WITH("\"imports\": \"math\""), "imports" },
        { WITH("\"imports\": {}"), "imports" },
        { WITH("\"imports\": [\"os;rm\"]"), "imports[0]" },
        { WITH("\"imports\": [\"math\", \"\"]"), "imports[1]" },
        { WITH("\"imports\": [\"1abc\"]"), "imports[0]" },
        { WITH("\"imports\": [\"a..b\"]"), "imports[0]" },
        { WITH("\"imports\": [\"a b\"]"), "imports[0]" },
        { WITH("\"imports\": [\"os/path\"]"), "imports[0]" },
        { WITH("\"imports\": [\"caf\\u00e9\"]"), "imports[0]" },
        { WITH("\"policy\": 1"), "policy" },
        { WITH("\"policy\": \"strict\""), "policy" },
        { WITH("\"policy\": null"), "policy" },
        { WITH("\"start\": \"warm\""), "start" },
        { WITH("\"start\": false"), "start" },
        { WITH("\"start\": null"), "start" },
        { WITH("\"isolation\": \"kvm\""), "isolation" },
        { WITH("\"isolation\": true"), "isolation" },
        { WITH("\"isolation\": null"), "isolation" },
        { WITH("\"network\": 0"), "network" },
        { WITH("\"network\": \"host\""), "network" },
        { WITH("\"network\": {\"mode\": \"allow\"}"), "network.allow" },
        { WITH("\"network\": {\"mode\": \"allow\", \"allow\": [\"db:5432\", \"x\"]}"),
          "network.allow[1]" },
        { WITH("\"network\": {\"mode\": \"open\"}"), "network.mode" },
        { WITH("\"network\": {\"mode\": \"none\", \"proxy\": 1}"), "'proxy'" },
        { WITH("\"rootfs\": 1"), "rootfs" },
        { WITH("\"rootfs\": \"\""), "rootfs" },
        { WITH("\"rootfs\": \"relative/dir\""), "rootfs" },
        { WITH("\"rootfs\": \"/srv/../etc\""), "rootfs" },
        { WITH("\"env\": []"), "env" },
        { WITH("\"env\": {\"A\": 1}"), "env.A" },
        { WITH("\"env\": {\"A\": null}"), "env.A" },
        { WITH("\"env\": {\"1X\": \"v\"}"), "\"1X\"" },
        { WITH("\"env\": {\"A-B\": \"v\"}"), "\"A-B\"" },
        { WITH("\"env\": {\"\": \"v\"}"), "env" },
        { WITH("\"env\": {\"A=B\": \"v\"}"), "\"A=B\"" },
        { WITH("\"env\": {\"LD_PRELOAD\": \"/tmp/x.so\"}"), "LD_PRELOAD" },
        { WITH("\"env\": {\"LD_LIBRARY_PATH\": \"/tmp\"}"), "LD_LIBRARY_PATH" },
        { WITH("\"env\": {\"LD_AUDIT\": \"/tmp/x.so\"}"), "LD_AUDIT" },
        { WITH("\"env\": {\"PYTHONPATH\": \"/tmp\"}"), "PYTHONPATH" },
        { WITH("\"env\": {\"PYTHONHOME\": \"/tmp\"}"), "PYTHONHOME" },
        { WITH("\"env\": {\"PYTHONSTARTUP\": \"/tmp/x.py\"}"), "PYTHONSTARTUP" },
        { WITH("\"limits\": []"), "limits" },
        { WITH("\"limits\": null"), "limits" },
        { LIMIT("\"memory\": true"), "limits.memory" },
        { LIMIT("\"memory\": 1.5"), "limits.memory" },
        { LIMIT("\"memory\": \"12 parsecs\""), "limits.memory" },
        { LIMIT("\"memory\": \"-1MiB\""), "limits.memory" },
        { LIMIT("\"memory\": -1"), "limits.memory" },
        { LIMIT("\"memory\": 0"), "limits.memory" },
        { LIMIT("\"memory\": \"8MiB\""), "limits.memory" },
        { LIMIT("\"memory\": \"2TiB\""), "limits.memory" },
        { LIMIT("\"memory\": \"99999999999TiB\""), "limits.memory" },
        { LIMIT("\"cpus\": \"1\""), "limits.cpus" },
        { LIMIT("\"cpus\": 0"), "limits.cpus" },
        { LIMIT("\"cpus\": 0.001"), "limits.cpus" },
        { LIMIT("\"cpus\": -1"), "limits.cpus" },
        { LIMIT("\"cpus\": 2000"), "limits.cpus" },
        { LIMIT("\"cpus\": 1e308"), "limits.cpus" },
        { LIMIT("\"pids\": \"256\""), "limits.pids" },
        { LIMIT("\"pids\": 1.5"), "limits.pids" },
        { LIMIT("\"pids\": 7"), "limits.pids" },
        { LIMIT("\"pids\": 65537"), "limits.pids" },
        { LIMIT("\"pids\": -1"), "limits.pids" },
        { LIMIT("\"timeout\": true"), "limits.timeout" },
        { LIMIT("\"timeout\": \"30 parsecs\""), "limits.timeout" },
        { LIMIT("\"timeout\": \"0s\""), "limits.timeout" },
        { LIMIT("\"timeout\": 0"), "limits.timeout" },
        { LIMIT("\"timeout\": -1"), "limits.timeout" },
        { LIMIT("\"timeout\": \"25h\""), "limits.timeout" },
        { LIMIT("\"timeout\": \"86401s\""), "limits.timeout" },
        { LIMIT("\"timeout\": \"99999999999999999m\""), "limits.timeout" },
        { LIMIT("\"output\": []"), "limits.output" },
        { LIMIT("\"output\": \"512\""), "limits.output" },
        { LIMIT("\"output\": \"2GiB\""), "limits.output" },
        { LIMIT("\"workspace\": null"), "limits.workspace" },
        { LIMIT("\"workspace\": \"1KiB\""), "limits.workspace" },
        { LIMIT("\"tmp\": {}"), "limits.tmp" },
        { LIMIT("\"tmp\": \"1.5\""), "limits.tmp" },
        { LIMIT("\"files\": \"1024\""), "limits.files" },
        { LIMIT("\"files\": 10"), "limits.files" },
        { LIMIT("\"files\": 100000"), "limits.files" },
};

/* Each row must fail with -EINVAL, write nothing, and say the file and the row's words. */
static void expect_bad_cases(const struct bad_case *cases, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                _cleanup_profile_ struct profile *p = NULL;
                struct airlock_error err = { "" };
                int r = parse(cases[i].text, &p, &err);

                cr_expect_eq(r, -EINVAL, "case %zu (%s): returned %d, expected -EINVAL", i,
                             cases[i].text, r);
                cr_expect_null(p, "case %zu: output written on failure", i);
                cr_expect(strstr(err.msg, "test.json") != NULL,
                          "case %zu (%s): message does not name the file: %s", i, cases[i].text,
                          err.msg);
                cr_expect(strstr(err.msg, cases[i].expect) != NULL,
                          "case %zu (%s): message does not contain '%s': %s", i, cases[i].text,
                          cases[i].expect, err.msg);
        }
}

Test(parse, malformed_inputs_are_einval_and_name_the_key)
{
        expect_bad_cases(bad_cases, ELEMENTSOF(bad_cases));
}

Test(parse, null_err_is_allowed)
{
        struct profile *p = NULL;

        cr_expect_eq(parse("{}", &p, NULL), -EINVAL);
        cr_expect_null(p);
}

Test(parse, bad_profile_name_is_einval)
{
        struct airlock_error err = { "" };
        struct profile *p = NULL;
        static const char text[] = "{" OK_HEAD "}";

        cr_expect_eq(profile_parse("Bad Name", "x.json", text, sizeof(text) - 1, &p, &err),
                     -EINVAL);
        cr_expect(strstr(err.msg, "Bad Name") != NULL, "%s", err.msg);
        cr_expect_eq(profile_parse(NULL, "x.json", text, sizeof(text) - 1, &p, &err), -EINVAL);
        cr_expect_null(p);
}

Test(parse, text_over_1mib_is_einval)
{
        _cleanup_free_ char *text = NULL;
        struct airlock_error err = { "" };
        struct profile *p = NULL;
        size_t len = 2 * 1024 * 1024;

        /* Valid JSON, padded with whitespace, so that only the size can be the reason. */
        text = malloc(len);
        cr_assert_not_null(text);
        memset(text, ' ', len);
        memcpy(text, "{" OK_HEAD "}", strlen("{" OK_HEAD "}"));
        cr_expect_eq(profile_parse("big", "big.json", text, len, &p, &err), -EINVAL);
        cr_expect(strstr(err.msg, "big.json") != NULL, "%s", err.msg);
        cr_expect(strstr(err.msg, "limit") != NULL, "%s", err.msg);
        cr_expect_null(p);
}

Test(names, profile_name_is_valid)
{
        static const char *const good[] = {
                "default", "data-science",
                "a",       "0",
                "x_y-z9",  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        };
        static const char *const bad[] = {
                "",
                "-x",
                "_x",
                "Default",
                "a b",
                "a.b",
                "a/b",
                "..",
                ".",
                "x\n",
                "caf\xc3\xa9",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        };

        cr_expect_eq(strlen(good[5]), 64);
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                cr_expect(profile_name_is_valid(good[i]), "\"%s\" should be valid", good[i]);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                cr_expect_not(profile_name_is_valid(bad[i]), "\"%s\" should be invalid", bad[i]);
        cr_expect_not(profile_name_is_valid(NULL));
}

/* Loading from disk, with a scratch directory per test. */

static char scratch[] = "/tmp/airlock-test-profile-XXXXXX";

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void) st;
        (void) ftw;
        return type == FTW_DP ? rmdir(path) : unlink(path);
}

static void scratch_setup(void)
{
        cr_assert_not_null(mkdtemp(scratch), "mkdtemp: %s", strerror(errno));
}

static void scratch_teardown(void)
{
        (void) nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_scratch(const char *name, const char *text, size_t len)
{
        _cleanup_close_ int fd = -EBADF;
        char path[4096];

        (void) snprintf(path, sizeof(path), "%s/%s", scratch, name);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
        cr_assert_eq(write(fd, text, len), (ssize_t) len);
}

#define PROFILE_TEXT(desc) "{\"description\": \"" desc "\", \"languages\": [\"python\"]}"

TestSuite(load, .init = scratch_setup, .fini = scratch_teardown);

Test(load, unknown_name_is_enoent_naming_the_directories)
{
        struct airlock_error err = { "" };
        struct profile *p = NULL;

        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", scratch, 1), 0);
        cr_expect_eq(profile_load("no-such-profile", &p, &err), -ENOENT);
        cr_expect_null(p);
        cr_expect(strstr(err.msg, "no-such-profile") != NULL, "%s", err.msg);
        cr_expect(strstr(err.msg, scratch) != NULL, "%s", err.msg);
        cr_expect(strstr(err.msg, AIRLOCK_TEST_SOURCE_DIR "/profiles") != NULL, "%s", err.msg);
}

Test(load, unknown_name_without_env_names_the_directories)
{
        struct airlock_error err = { "" };
        struct profile *p = NULL;

        cr_assert_eq(unsetenv("AIRLOCK_PROFILES_DIR"), 0);
        cr_expect_eq(profile_load("no-such-profile", &p, &err), -ENOENT);
        cr_expect(strstr(err.msg, AIRLOCK_TEST_SOURCE_DIR "/profiles") != NULL, "%s", err.msg);
        cr_expect(strstr(err.msg, "AIRLOCK_PROFILES_DIR") != NULL, "%s", err.msg);
}

Test(load, bad_names_are_einval)
{
        static const char *const bad[] = {
                "",
                "..",
                "Default",
                "a b",
                "-x",
                "x\n",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        };

        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", scratch, 1), 0);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct airlock_error err = { "" };
                struct profile *p = NULL;

                cr_expect_eq(profile_load(bad[i], &p, &err), -EINVAL, "\"%s\"", bad[i]);
                cr_expect(strstr(err.msg, "invalid profile name") != NULL, "%s", err.msg);
                cr_expect_null(p);
        }
        cr_expect_eq(profile_load(NULL, &(struct profile *){ NULL }, NULL), -EINVAL);
}

Test(load, paths_are_read_directly_not_searched)
{
        struct airlock_error err = { "" };
        struct profile *p = NULL;
        char path[4096];
        int r;

        /* A name with a slash is a path, so it never reaches the search path; what it
         * resolves to depends on the working directory, but it never loads. */
        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", scratch, 1), 0);
        write_scratch("passwd.json", PROFILE_TEXT("scratch"), strlen(PROFILE_TEXT("scratch")));
        r = profile_load("../etc/passwd", &p, &err);
        cr_expect(r == -ENOENT || r == -EINVAL, "got %d: %s", r, err.msg);
        cr_expect_null(p);

        /* A real file that is not a profile is refused as invalid JSON, naming the file. */
        cr_expect_eq(profile_load("/etc/passwd", &p, &err), -EINVAL);
        cr_expect(strstr(err.msg, "/etc/passwd") != NULL, "%s", err.msg);

        /* Ending in .json makes it a path too: relative to the working directory. */
        cr_expect_eq(profile_load("passwd.json", &p, &err), -ENOENT);
        cr_expect(strstr(err.msg, "passwd.json") != NULL, "%s", err.msg);

        (void) snprintf(path, sizeof(path), "%s/passwd.json", scratch);
        cr_expect_eq(profile_load(path, &p, &err), 0, "%s", err.msg);
        cr_assert_not_null(p);
        cr_expect_str_eq(p->name, "passwd");
        cr_expect_str_eq(p->description, "scratch");
        p = profile_free(p);
        cr_expect_null(p);
}

Test(load, path_with_invalid_file_name_is_einval)
{
        struct airlock_error err = { "" };
        struct profile *p = NULL;
        char path[4096];

        write_scratch("My Profile.json", PROFILE_TEXT("x"), strlen(PROFILE_TEXT("x")));
        (void) snprintf(path, sizeof(path), "%s/My Profile.json", scratch);
        cr_expect_eq(profile_load(path, &p, &err), -EINVAL);
        cr_expect(strstr(err.msg, "My Profile") != NULL, "%s", err.msg);
}

Test(load, env_dir_overrides_and_extends_the_search_path)
{
        _cleanup_profile_ struct profile *custom = NULL, *def = NULL;
        _cleanup_strv_free_ char **names = NULL;
        struct airlock_error err = { "" };
        bool seen_custom = false;
        size_t n_default = 0;

        write_scratch("custom.json", PROFILE_TEXT("custom"), strlen(PROFILE_TEXT("custom")));
        write_scratch("default.json", PROFILE_TEXT("override"), strlen(PROFILE_TEXT("override")));
        /* Files that are not profiles are left out of the list. */
        write_scratch("Upper.json", PROFILE_TEXT("x"), strlen(PROFILE_TEXT("x")));
        write_scratch("notes.txt", "x", 1);
        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", scratch, 1), 0);

        cr_assert_eq(profile_load("custom", &custom, &err), 0, "%s", err.msg);
        cr_expect_str_eq(custom->name, "custom");
        cr_expect_str_eq(custom->description, "custom");

        /* The environment's directory comes first, so it shadows the shipped default. */
        cr_assert_eq(profile_load("default", &def, &err), 0, "%s", err.msg);
        cr_expect_str_eq(def->description, "override");

        cr_assert_eq(profile_list(&names), 0);
        for (size_t i = 0; names[i]; i++) {
                cr_expect(profile_name_is_valid(names[i]), "listed \"%s\"", names[i]);
                if (strcmp(names[i], "custom") == 0)
                        seen_custom = true;
                if (strcmp(names[i], "default") == 0)
                        n_default++;
                if (i > 0)
                        cr_expect_lt(strcmp(names[i - 1], names[i]), 0, "unsorted at \"%s\"",
                                     names[i]);
        }
        cr_expect(seen_custom);
        cr_expect_eq(n_default, 1);
}

Test(load, file_over_1mib_is_einval)
{
        _cleanup_free_ char *text = NULL;
        struct airlock_error err = { "" };
        struct profile *p = NULL;
        size_t len = 2 * 1024 * 1024;

        text = malloc(len);
        cr_assert_not_null(text);
        memset(text, ' ', len);
        memcpy(text, PROFILE_TEXT("big"), strlen(PROFILE_TEXT("big")));
        write_scratch("big.json", text, len);
        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", scratch, 1), 0);

        cr_expect_eq(profile_load("big", &p, &err), -EINVAL);
        cr_expect(strstr(err.msg, "big.json") != NULL, "%s", err.msg);
        cr_expect(strstr(err.msg, "limit") != NULL, "%s", err.msg);
        cr_expect_null(p);
}

Test(load, empty_file_is_einval_with_position)
{
        struct airlock_error err = { "" };
        struct profile *p = NULL;

        write_scratch("empty.json", "", 0);
        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", scratch, 1), 0);
        cr_expect_eq(profile_load("empty", &p, &err), -EINVAL);
        cr_expect(strstr(err.msg, "empty.json:1:0: invalid JSON") != NULL, "%s", err.msg);
        cr_expect_null(p);
}

Test(load, malformed_file_names_file_and_key)
{
        struct airlock_error err = { "" };
        struct profile *p = NULL;
        static const char text[] = "{\"description\": \"d\", \"languages\": [\"python\"],\n"
                                   " \"limits\": {\"memory\": \"12 parsecs\"}}";

        write_scratch("bad.json", text, sizeof(text) - 1);
        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", scratch, 1), 0);
        cr_expect_eq(profile_load("bad", &p, &err), -EINVAL);
        cr_expect(strstr(err.msg, "/bad.json: limits.memory:") != NULL, "%s", err.msg);
        cr_expect(strstr(err.msg, "12 parsecs") != NULL, "%s", err.msg);
}

Test(load, directory_and_fifo_are_refused)
{
        struct airlock_error err = { "" };
        struct profile *p = NULL;
        char path[4096];

        cr_assert_eq(setenv("AIRLOCK_PROFILES_DIR", scratch, 1), 0);
        (void) snprintf(path, sizeof(path), "%s/dir.json", scratch);
        cr_assert_eq(mkdir(path, 0755), 0);
        cr_expect_eq(profile_load("dir", &p, &err), -EINVAL);
        cr_expect(strstr(err.msg, "regular file") != NULL, "%s", err.msg);

        /* Opening a FIFO for reading would block until a writer came; it must not. */
        (void) snprintf(path, sizeof(path), "%s/fifo.json", scratch);
        cr_assert_eq(mkfifo(path, 0644), 0);
        cr_expect_eq(profile_load("fifo", &p, &err), -EINVAL);
        cr_expect(strstr(err.msg, "regular file") != NULL, "%s", err.msg);
        cr_expect_null(p);
}

/* Code Mode: which internal tools the sessions' code may call. */
Test(parse, code_tools)
{
        _cleanup_profile_ struct profile *p = NULL, *none = NULL, *bad = NULL, *bad2 = NULL;
        struct airlock_error err = { "" };

        cr_assert_eq(parse("{\"description\": \"d\", \"languages\": [\"python\"],"
                           " \"code_tools\": [\"get_user\", \"crm/*\", \"*\"],"
                           " \"limits\": {\"tool_calls\": 50}}",
                           &p, &err),
                     0, "%s", err.msg);
        cr_expect_str_eq(p->code_tools[0], "get_user");
        cr_expect_str_eq(p->code_tools[1], "crm/*");
        cr_expect_str_eq(p->code_tools[2], "*");
        cr_expect_null(p->code_tools[3]);
        cr_expect_eq(p->limits.tool_calls, 50);

        cr_assert_eq(parse("{\"description\": \"d\", \"languages\": [\"python\"]}", &none, &err),
                     0);
        cr_assert_not_null(none->code_tools);
        cr_expect_null(none->code_tools[0]);
        cr_expect_eq(none->limits.tool_calls, 1000);

        cr_expect_eq(parse("{\"description\": \"d\", \"languages\": [\"python\"],"
                           " \"code_tools\": [\"has space\"]}",
                           &bad, &err),
                     -EINVAL);
        cr_expect(strstr(err.msg, "code_tools[0]"), "%s", err.msg);
        cr_expect_eq(parse("{\"description\": \"d\", \"languages\": [\"python\"],"
                           " \"code_tools\": \"*\"}",
                           &bad2, &err),
                     -EINVAL);
        cr_expect(strstr(err.msg, "code_tools"), "%s", err.msg);
        cr_expect(profile_tool_pattern_is_valid("crm.v2/*"));
        cr_expect_not(profile_tool_pattern_is_valid("crm/x"));
        cr_expect_not(profile_tool_pattern_is_valid("/*"));
        cr_expect_not(profile_tool_pattern_is_valid(""));
}

/* "packages": pip's index (reachable through the profile's network, or the profile is
 * invalid), trusted hosts, the layer's requirements and wheels directory. */

#define NET(rules) "\"network\": {\"mode\": \"allow\", \"allow\": [" rules "]}"
#define PKG(net, body) WITH(net ", \"packages\": {" body "}")

Test(packages, all_keys)
{
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };
        static const char *const install[] = { "rdkit==2024.3",
                                               "pandas[excel,xml]>=2,<3",
                                               "numpy",
                                               "scipy~=1.10",
                                               "torch==2.1.0+cpu",
                                               "pkg!=1.*",
                                               NULL };

        cr_assert_eq(parse(PKG(NET("\"pypi.internal:443\""),
                               "\"index_url\": \"https://PyPI.internal/simple\","
                               " \"trusted_host\": \"pypi.internal\","
                               " \"install\": [\"rdkit==2024.3\", \"pandas[excel,xml]>=2,<3\","
                               " \"numpy\", \"scipy~=1.10\", \"torch==2.1.0+cpu\","
                               " \"pkg!=1.*\"],"
                               " \"wheels\": \"/srv/wheels\""),
                           &p, &err),
                     0, "%s", err.msg);
        cr_expect_str_eq(p->packages.index_url, "https://PyPI.internal/simple");
        expect_strv_eq(p->packages.trusted_hosts, (const char *const[]){ "pypi.internal", NULL },
                       "trusted_hosts");
        expect_strv_eq(p->packages.install, install, "install");
        cr_expect_str_eq(p->packages.wheels_dir, "/srv/wheels");
}

Test(packages, absent_is_all_null)
{
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };

        cr_assert_eq(parse(WITH("\"packages\": {}"), &p, &err), 0, "%s", err.msg);
        cr_expect_null(p->packages.index_url);
        cr_expect_null(p->packages.trusted_hosts);
        cr_expect_null(p->packages.install);
        cr_expect_null(p->packages.wheels_dir);
}

/* The index's host and port (the scheme's default when absent) against the network's rules:
 * names by name rules, literals by address rules. */
Test(packages, index_url_must_be_reachable)
{
        static const struct {
                const char *rules, *url;
                bool ok;
        } cases[] = {
                { "\"pypi.internal:443\"", "https://pypi.internal/simple", true },
                { "\"pypi.internal:443\"", "https://pypi.internal:443/simple/", true },
                { "\"pypi.internal:443\"", "https://pypi.internal./simple", true },
                { "\"pypi.internal:443\"", "http://pypi.internal/simple", false },
                { "\"pypi.internal:8080\"", "http://pypi.internal:8080", true },
                { "\"*.corp.internal:443\"", "https://pypi.corp.internal/simple", true },
                { "\"*.corp.internal:443\"", "https://corp.internal/simple", false },
                { "\"10.1.2.0/24:80\"", "http://10.1.2.9/simple", true },
                { "\"10.1.2.0/24:80\"", "http://10.1.3.9/simple", false },
                { "\"10.1.2.7:8080\"", "http://10.1.2.7:8080/simple", true },
                { "\"[fd00::7]:8443\"", "https://[fd00::7]:8443/simple", true },
                { "\"[fd00::7]:8443\"", "https://[fd00::8]:8443/simple", false },
                /* A name that resolves to an allowed address is still only a name. */
                { "\"10.1.2.7:443\"", "https://pypi.internal/simple", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_profile_ struct profile *p = NULL;
                struct airlock_error err = { "" };
                char text[1024];
                int r;

                (void) snprintf(text, sizeof(text),
                                "{" OK_HEAD
                                ", " NET("%s") ", \"packages\": {\"index_url\": \"%s\"}}",
                                cases[i].rules, cases[i].url);
                r = parse(text, &p, &err);
                if (cases[i].ok) {
                        cr_expect_eq(r, 0, "case %zu (%s): %s", i, cases[i].url, err.msg);
                } else {
                        cr_expect_eq(r, -EINVAL, "case %zu (%s) was accepted", i, cases[i].url);
                        cr_expect(strstr(err.msg, "packages.index_url") &&
                                          strstr(err.msg, "network.allow"),
                                  "case %zu: %s", i, err.msg);
                }
        }
}

Test(packages, index_url_names_the_rule_to_add)
{
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };

        cr_expect_eq(parse(PKG(NET("\"other.internal:443\""),
                               "\"index_url\": \"https://pypi.internal/simple\""),
                           &p, &err),
                     -EINVAL);
        cr_expect(strstr(err.msg, "test.json: packages.index_url:") != NULL, "%s", err.msg);
        cr_expect(strstr(err.msg, "add \"pypi.internal:443\" to network.allow") != NULL, "%s",
                  err.msg);
}

/* Without network the index serves `airlock profile build` alone: no rule is needed. */
Test(packages, index_url_without_network_is_for_builds)
{
        _cleanup_profile_ struct profile *p = NULL;
        struct airlock_error err = { "" };

        cr_assert_eq(parse(WITH("\"packages\": {\"index_url\": \"https://pypi.internal/simple\"}"),
                           &p, &err),
                     0, "%s", err.msg);
        cr_expect_str_eq(p->packages.index_url, "https://pypi.internal/simple");
        cr_expect_eq(p->network->mode, EGRESS_MODE_NONE);
}

static const struct bad_case bad_packages[] = {
        { WITH("\"packages\": []"), "packages" },
        { WITH("\"packages\": {\"index\": \"x\"}"), "unknown key \"index\"" },
        { PKG(NET("\"p:443\""), "\"index_url\": 1"), "packages.index_url" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"ftp://p/simple\""), "http:// or https://" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"p/simple\""), "http:// or https://" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"https://user:pw@p/simple\""), "credentials" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"https://p/a b\""), "without spaces" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"https://p/\\u00e9\""), "non-ASCII" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"https:///simple\""), "valid host" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"https://p:0/simple\""), "valid host" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"https://p:99999/simple\""), "valid host" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"https://fd00::7/simple\""), "valid host" },
        { PKG(NET("\"p:443\""), "\"index_url\": \"https://p..q/simple\""), "valid host" },
        { WITH("\"packages\": {\"trusted_host\": 5}"), "packages.trusted_host" },
        { WITH("\"packages\": {\"trusted_host\": [\"a b\"]}"), "packages.trusted_host[0]" },
        { WITH("\"packages\": {\"trusted_host\": [\"p\", \"p:x\"]}"), "packages.trusted_host[1]" },
        { WITH("\"packages\": {\"trusted_host\": \"--index-url=x\"}"), "packages.trusted_host[0]" },
        { WITH("\"packages\": {\"install\": \"numpy\"}"), "packages.install" },
        { WITH("\"packages\": {\"install\": [1]}"), "packages.install[0]" },
        { WITH("\"packages\": {\"install\": [\"-e .\"]}"), "pip options are not accepted" },
        { WITH("\"packages\": {\"install\": [\"--index-url=http://evil\"]}"), "pip options" },
        { WITH("\"packages\": {\"install\": [\"numpy\", \"pandas >=2\"]}"), "packages.install[1]" },
        { WITH("\"packages\": {\"install\": [\"x rm -rf /\"]}"), "space" },
        { WITH("\"packages\": {\"install\": [\"x;id\"]}"), "shell or marker character" },
        { WITH("\"packages\": {\"install\": [\"x$(id)\"]}"), "shell or marker character" },
        { WITH("\"packages\": {\"install\": [\"x`id`\"]}"), "shell or marker character" },
        { WITH("\"packages\": {\"install\": [\"x|id\"]}"), "shell or marker character" },
        { WITH("\"packages\": {\"install\": [\"x@https://evil/x.whl\"]}"), "direct reference" },
        { WITH("\"packages\": {\"install\": [\"./local/pkg\"]}"), "packages.install[0]" },
        { WITH("\"packages\": {\"install\": [\"numpy==\"]}"), "version is missing" },
        { WITH("\"packages\": {\"install\": [\"numpy=1\"]}"), "version specifier" },
        { WITH("\"packages\": {\"install\": [\"numpy>=1,\"]}"), "ends with a comma" },
        { WITH("\"packages\": {\"install\": [\"pandas[excel\"]}"), "[extras]" },
        { WITH("\"packages\": {\"install\": [\"pandas[]\"]}"), "[extras]" },
        { WITH("\"packages\": {\"install\": [\"_x\"]}"), "distribution name" },
        { WITH("\"packages\": {\"install\": [\"\"]}"), "distribution name" },
        { WITH("\"packages\": {\"wheels\": \"wheels\"}"), "packages.wheels" },
        { WITH("\"packages\": {\"wheels\": \"/srv/../etc\"}"), "packages.wheels" },
        { WITH("\"packages\": {\"wheels\": [\"/srv\"]}"), "packages.wheels" },
};

Test(packages, malformed_inputs_are_einval_and_say_why)
{
        expect_bad_cases(bad_packages, ELEMENTSOF(bad_packages));
}
