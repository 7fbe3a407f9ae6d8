/* Profiles: what a sandbox may run and with which limits, as data files (profiles/NAME.json).
 *
 * A profile file is one JSON object:
 *   {
 *     "description": "text",                              (required)
 *     "languages":   ["python", "bash"],                  (required, non-empty)
 *     "preload":     ["numpy", "pandas"],                 (modules a zygote imports; default [])
 *     "imports":     ["math", ...] or null,               (top-level import allow-list; null = any)
 *     "policy":      "none" | "restricted",               (restricted: refuse escape dunders and
 *                                                          private attributes in user code)
 *     "limits": {                                         (every key optional; defaults below)
 *        "memory": "1GiB", "cpus": 1.0, "pids": 256, "timeout": "30s", "output": "1MiB",
 *        "workspace": "256MiB", "tmp": "64MiB", "files": 1024
 *     },
 *     "network": "none" | {"mode": "allow", "allow": ["pypi.internal:443", ...], ...},
 *                                                         (egress through the daemon's proxy;
 *                                                          src/egress/policy.h, docs/NETWORK.md)
 *     "packages": {"index_url": "https://pypi.internal/simple",  (pip's index inside sessions
 *                  "trusted_host": ["pypi.internal"],              and for `airlock profile
 *                  "install": ["rdkit==2024.3", ...],               build`; docs/PROFILES.md)
 *                  "wheels": "/srv/wheels"},
 *     "rootfs": "/",                                      (directory bound read-only as the
 *                                                          sandbox's /usr, /etc source; "/" = host)
 *     "env": { "NAME": "value" },                         (extra environment for user code)
 *     "code_tools": ["get_user", "crm/" "*"],             (Code Mode: internal tools the code
 *                                                          may call: names, all of one server
 *                                                          ("crm/" then "*"), or "*";
 *                                                          default [] = none)
 *     "start": "zygote" | "cold"                          (zygote: sessions fork from a warm
 *                                                          zygote (default); cold: each session
 *                                                          is a fresh exec of the runner, with
 *                                                          its own address-space layout and hash
 *                                                          secret, at the cost of the imports)
 *     "isolation": "namespaces" | "microvm"               (namespaces: the kernel sandbox
 *                                                          (default); microvm: each session in
 *                                                          its own KVM guest (src/vm/vm.h), whose
 *                                                          image `airlock profile build` makes)
 *   }
 * Unknown keys, wrong types, out-of-range limits and bad sizes are errors that name the file,
 * the key and what was expected. Profile names are [a-z0-9][a-z0-9_-]{0,63}. */
#pragma once

#include "base/error.h"
#include "egress/policy.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum profile_policy {
        PROFILE_POLICY_NONE,
        PROFILE_POLICY_RESTRICTED,
};

enum profile_isolation {
        PROFILE_ISOLATION_NAMESPACES, /* namespaces, seccomp, Landlock, cgroups (src/jail) */
        PROFILE_ISOLATION_MICROVM,    /* a KVM guest per session, the runner inside (src/vm) */
};

enum profile_start {
        PROFILE_START_ZYGOTE, /* forked from the profile's zygote: milliseconds, shared layout */
        PROFILE_START_COLD,   /* a fresh exec per session: own layout and secret, slow */
};

struct profile_limits {
        uint64_t memory_bytes;    /* default 1 GiB; 16 MiB .. 1 TiB */
        uint32_t cpu_millicpus;   /* default 1000; 10 .. 1024000 */
        uint32_t pids;            /* default 256; 8 .. 65536 */
        uint64_t timeout_ms;      /* default 30 s; 1 ms .. 24 h */
        uint64_t output_bytes;    /* default 1 MiB; 1 KiB .. 1 GiB */
        uint64_t workspace_bytes; /* default 256 MiB; 1 MiB .. 1 TiB */
        uint64_t tmp_bytes;       /* default 64 MiB; 1 MiB .. 1 TiB */
        uint32_t files;           /* RLIMIT_NOFILE; default 1024; 64 .. 65536 */
        uint32_t tool_calls;      /* Code Mode requests per cell; default 1000; 1 .. 100000 */
};

/* "packages": where pip finds packages, and what `airlock profile build` puts in the
 * profile's layer. Every member may be NULL (absent). */
struct profile_packages {
        char *index_url;      /* pip's index (PIP_INDEX_URL in sessions, --index-url at build) */
        char **trusted_hosts; /* NULL-terminated; pip's --trusted-host */
        char **install;       /* NULL-terminated requirement specifiers for the layer */
        char *wheels_dir;     /* a host directory of wheels for the layer (--find-links) */
};

struct profile {
        char *name;
        char *description;
        bool lang_python;
        bool lang_bash;
        bool lang_javascript; /* a Node REPL (/usr/bin/node in the rootfs), also typescript */
        bool lang_r;          /* an R session (/usr/lib/R/lib/libR.so in the rootfs) */
        char **preload;       /* NULL-terminated, never NULL */
        char **imports;       /* NULL-terminated, or NULL when any import is allowed */
        enum profile_policy policy;
        struct profile_limits limits;
        char *rootfs;
        char **env; /* NULL-terminated "NAME=value" strings, never NULL */
        enum profile_start start;
        enum profile_isolation isolation;
        /* Code Mode: the internal tools the sessions' code may call: tool names as GET
         * /v1/tools names them, a server name and "/" then "*" (all its tools), or "*";
         * NULL-terminated, never NULL (empty: none). */
        char **code_tools;
        /* Egress (src/egress/policy.h); never NULL after profile_parse(): "none" when absent. */
        struct egress_policy *network;
        struct profile_packages packages;
};

/* Fills *ret_limits with the defaults documented above. */
void profile_limits_default(struct profile_limits *ret_limits);

/* Whether the profile runs cells of language ("python", "bash", "javascript" or "typescript",
 * which come together, or "r"; NULL is python). An unknown language is not allowed. */
bool profile_allows_language(const struct profile *p, const char *language);

/* The profile's languages as text for messages, e.g. "python, bash". Writes into buf (at least
 * 48 bytes) and returns it. */
const char *profile_languages_text(const struct profile *p, char *buf, size_t size);

/* Parses a profile from JSON text; name is the profile's name, source names the file in error
 * messages. Returns 0, or -EINVAL with a message in err naming source and key. Caller frees
 * with profile_free(). */
int profile_parse(const char *name, const char *source, const char *text, size_t len,
                  struct profile **ret_profile, struct airlock_error *err);

/* Loads profile `name_or_path`: a path (contains '/' or ends in ".json") is read directly;
 * a name is looked up as NAME.json in, in order: $AIRLOCK_PROFILES_DIR, the installed
 * profiles directory, and the source tree's profiles/ (for running from a build directory).
 * Returns 0, -ENOENT (err names the directories searched), -EINVAL for a bad name or file. */
int profile_load(const char *name_or_path, struct profile **ret_profile, struct airlock_error *err);

/* Lists the names of available profiles (sorted, unique across the search path).
 * Caller frees with strv_free(). Returns 0 or -errno. */
int profile_list(char ***ret_names);

/* Accepts NULL, returns NULL. */
struct profile *profile_free(struct profile *p);

/* The profile as GET /v1/profiles and `airlock profile show` give it: {name, description,
 * languages, preload, imports, policy, network, start, isolation, limits: {memory_bytes, cpus,
 * pids, timeout_s, output_bytes, workspace_bytes, tmp_bytes}}. Not "packages" or "env", which may
 * hold credentials. A new object, or NULL when out of memory. */
json_t *profile_to_json(const struct profile *p);

/* Whether s can be an entry of code_tools: a tool name ([A-Za-z0-9_-]{1,64}), a server name
 * of the mcpServers file followed by "/" and "*" (all its tools), or "*". */
bool profile_tool_pattern_is_valid(const char *s);

/* Returns true when name is a valid profile name. */
bool profile_name_is_valid(const char *name);
