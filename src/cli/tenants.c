/* `airlock tenants`: adds, changes, revokes and rotates tenants in the state directory's
 * tenants.db (docs/TENANTS.md). It writes the file directly, so it works whether or not a
 * daemon runs there; a running daemon sees the change before it resolves its next key. A key
 * is printed once, as the last line, and never stored. */
#include "cli.h"

#include "api/auth.h"
#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/util.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char tenants_help[] =
        "usage: airlock tenants add NAME [--max-sessions N] [--max-memory SIZE]\n"
        "                            [--max-cpu CORES] [--profiles a,b]\n"
        "       airlock tenants list [--json]\n"
        "       airlock tenants show NAME\n"
        "       airlock tenants set NAME [--max-sessions N] [--max-memory SIZE]\n"
        "                            [--max-cpu CORES] [--profiles a,b|all]\n"
        "       airlock tenants revoke NAME\n"
        "       airlock tenants rotate NAME\n"
        "\n"
        "Tenants of the daemon that uses the state directory (docs/TENANTS.md): each has\n"
        "its own API key, sees only its own sessions, containers, files, responses and\n"
        "sandboxes, and is held to its quotas (HTTP 429 naming the quota). Changes take\n"
        "effect at once in a running daemon; none needs to run.\n"
        "\n"
        "subcommands:\n"
        "  add NAME        add a tenant and print its API key as the last line; the key\n"
        "                  is shown only this once (only its SHA-256 is stored)\n"
        "  list            the tenants and their quotas (no keys)\n"
        "  show NAME       one tenant, as JSON\n"
        "  set NAME        change quotas; options not given keep their value, 0 (or\n"
        "                  --profiles all) removes a quota\n"
        "  revoke NAME     the tenant's key stops working at once (its sessions stay\n"
        "                  until `rotate` gives it a new key)\n"
        "  rotate NAME     a new key, printed as the last line; the old one stops working\n"
        "\n"
        "options:\n"
        "      --max-sessions N   live sessions (idle or busy) at once; 0 = no quota\n"
        "      --max-memory SIZE  the memory limits of its live sessions together\n"
        "                         (e.g. 8GiB); 0 = no quota\n"
        "      --max-cpu CORES    the CPUs of its live sessions together (e.g. 2.5);\n"
        "                         0 = no quota\n"
        "      --profiles a,b     the only profiles it may use; a create with another is\n"
        "                         refused with 403\n"
        "      --json             list: print JSON\n"
        "      --state-dir DIR    the daemon's state directory; default: /var/lib/airlock\n"
        "                         for root, else $XDG_STATE_HOME/airlock\n"
        "\n"
        "exit status: 0 done; 1 refused (unknown or existing tenant, unusable store);\n"
        "2 bad arguments.\n";

enum {
        OPT_STATE_DIR = 256,
        OPT_MAX_SESSIONS,
        OPT_MAX_MEMORY,
        OPT_MAX_CPU,
        OPT_PROFILES,
        OPT_JSON,
};

static void print_row(const json_t *t)
{
        const json_t *profiles = json_object_get(t, "profiles");
        char mem[32] = "-", sess[16] = "-", cpu[16] = "-", prof[256] = "all";
        json_int_t ms = json_integer_value(json_object_get(t, "max_sessions"));
        json_int_t mm = json_integer_value(json_object_get(t, "max_memory_bytes"));
        double mc = json_number_value(json_object_get(t, "max_cpu"));

        if (ms)
                (void) snprintf(sess, sizeof(sess), "%lld", (long long) ms);
        if (mm)
                (void) snprintf(mem, sizeof(mem), "%lld", (long long) mm);
        if (mc > 0)
                (void) snprintf(cpu, sizeof(cpu), "%g", mc);
        if (json_is_array(profiles)) {
                size_t i, o = 0;
                json_t *p;
                prof[0] = '\0';
                json_array_foreach (profiles, i, p) {
                        int n = snprintf(prof + o, sizeof(prof) - o, "%s%s", i ? "," : "",
                                         json_string_value(p));
                        if (n < 0 || (size_t) n >= sizeof(prof) - o)
                                break;
                        o += (size_t) n;
                }
        }
        printf("%-20s %-8s %-14s %-8s %-8s %s\n", json_string_value(json_object_get(t, "name")),
               sess, mem, cpu, json_is_true(json_object_get(t, "revoked")) ? "revoked" : "active",
               prof);
}

int cmd_tenants(int argc, char **argv)
{
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "max-sessions", required_argument, NULL, OPT_MAX_SESSIONS },
                { "max-memory", required_argument, NULL, OPT_MAX_MEMORY },
                { "max-cpu", required_argument, NULL, OPT_MAX_CPU },
                { "profiles", required_argument, NULL, OPT_PROFILES },
                { "json", no_argument, NULL, OPT_JSON },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_free_ char *state_dir = NULL;
        _cleanup_(strv_freep) char **profiles = NULL;
        struct airlock_error err = { { 0 } };
        struct tenant_spec spec = {};
        struct tenant_db *db = NULL;
        const char *verb, *name = NULL, *dir_arg = NULL;
        char key[TENANT_KEY_LEN + 1];
        bool json = false, has_quota;
        json_t *list = NULL;
        int c, r;

        optind = 1;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                char *end;
                switch (c) {
                case 'h':
                        fputs(tenants_help, stdout);
                        return 0;
                case OPT_STATE_DIR:
                        dir_arg = optarg;
                        break;
                case OPT_MAX_SESSIONS: {
                        unsigned long v;
                        errno = 0;
                        v = strtoul(optarg, &end, 10);
                        if (errno || *end || !*optarg || optarg[0] == '-' || v > 1000000)
                                return cli_usage_error("tenants",
                                                       "--max-sessions '%s': expected a number "
                                                       "from 0 (no quota) to 1000000",
                                                       optarg);
                        spec.has_max_sessions = true;
                        spec.max_sessions = (unsigned) v;
                        break;
                }
                case OPT_MAX_MEMORY:
                        if (parse_size(optarg, &spec.max_memory) < 0)
                                return cli_usage_error("tenants",
                                                       "--max-memory '%s': expected a size such as "
                                                       "512MiB or 8GiB, or 0 for no quota",
                                                       optarg);
                        spec.has_max_memory = true;
                        break;
                case OPT_MAX_CPU:
                        if (tenant_cpu_parse(optarg, &spec.max_millicpus) < 0)
                                return cli_usage_error("tenants",
                                                       "--max-cpu '%s': expected a number of cores "
                                                       "from 0.01 to 1024 (e.g. 2.5), or 0 for no "
                                                       "quota",
                                                       optarg);
                        spec.has_max_cpu = true;
                        break;
                case OPT_PROFILES:
                        strv_free(TAKE_PTR(profiles));
                        spec.has_profiles = true;
                        if (strcmp(optarg, "all") == 0)
                                break;
                        if (tenant_profiles_parse(optarg, &profiles, &err) < 0) {
                                fprintf(stderr, "airlock tenants: %s\n", err.msg);
                                return EXIT_USAGE;
                        }
                        break;
                case OPT_JSON:
                        json = true;
                        break;
                default:
                        fputs("Try 'airlock tenants --help'.\n", stderr);
                        return EXIT_USAGE;
                }
        }
        spec.profiles = profiles;
        if (optind >= argc)
                return cli_usage_error("tenants", "%s",
                                       "a subcommand is needed: add, list, show, set, revoke "
                                       "or rotate");
        verb = argv[optind++];
        if (strcmp(verb, "list") != 0) {
                if (optind >= argc)
                        return cli_usage_error("tenants", "%s needs a tenant NAME", verb);
                name = argv[optind++];
        }
        if (optind < argc)
                return cli_usage_error("tenants", "unexpected argument '%s'", argv[optind]);
        has_quota = spec.has_max_sessions || spec.has_max_memory || spec.has_max_cpu ||
                    spec.has_profiles;
        if (has_quota && strcmp(verb, "add") != 0 && strcmp(verb, "set") != 0)
                return cli_usage_error("tenants", "quota options go with add or set, not %s", verb);
        if (strcmp(verb, "set") == 0 && !has_quota)
                return cli_usage_error("tenants", "%s",
                                       "set needs at least one of --max-sessions, --max-memory, "
                                       "--max-cpu, --profiles");
        if (strcmp(verb, "add") != 0 && strcmp(verb, "list") != 0 && strcmp(verb, "show") != 0 &&
            strcmp(verb, "set") != 0 && strcmp(verb, "revoke") != 0 && strcmp(verb, "rotate") != 0)
                return cli_usage_error("tenants",
                                       "unknown subcommand '%s' (add, list, show, set, revoke, "
                                       "rotate)",
                                       verb);
        if (strcmp(verb, "add") == 0 && tenant_name_check(name, &err) < 0) {
                fprintf(stderr, "airlock tenants: %s\n", err.msg);
                return EXIT_USAGE;
        }

        if (dir_arg) {
                state_dir = strdup(dir_arg);
                if (!state_dir)
                        return 1;
        } else if (api_state_dir_default(&state_dir) < 0) {
                fprintf(stderr, "airlock tenants: no state directory: set --state-dir, HOME or "
                                "XDG_STATE_HOME\n");
                return EXIT_USAGE;
        }

        r = tenant_db_open(state_dir, strcmp(verb, "add") == 0, &db, &err);
        if (r == -ENOENT && strcmp(verb, "list") == 0) {
                if (json)
                        printf("[]\n");
                else
                        printf("no tenants: the daemon's token is the only key (tenant "
                               "'default')\n");
                return 0;
        }
        if (r < 0) {
                fprintf(stderr, "airlock tenants: %s\n", err.msg);
                return 1;
        }
        if (strcmp(verb, "add") == 0)
                r = tenant_db_add(db, name, &spec, key, &err);
        else if (strcmp(verb, "rotate") == 0)
                r = tenant_db_rotate(db, name, key, &err);
        else if (strcmp(verb, "set") == 0)
                r = tenant_db_set(db, name, &spec, &err);
        else if (strcmp(verb, "revoke") == 0)
                r = tenant_db_revoke(db, name, &err);
        else
                r = tenant_db_list(db, name, &list, &err);
        db = tenant_db_close(db);
        if (r < 0) {
                fprintf(stderr, "airlock tenants: %s\n", err.msg);
                return 1;
        }

        if (strcmp(verb, "add") == 0 || strcmp(verb, "rotate") == 0) {
                fprintf(stderr,
                        "airlock tenants: %s '%s'; its key follows, shown only this once "
                        "(clients send it as \"Authorization: Bearer KEY\")\n",
                        strcmp(verb, "add") == 0 ? "added tenant" : "new key for tenant", name);
                printf("%s\n", key);
                explicit_bzero(key, sizeof(key));
        } else if (strcmp(verb, "set") == 0) {
                printf("tenant '%s' updated\n", name);
        } else if (strcmp(verb, "revoke") == 0) {
                printf("tenant '%s': key revoked (`airlock tenants rotate %s` issues a new "
                       "one)\n",
                       name, name);
        } else if (strcmp(verb, "show") == 0 || json) {
                char *text =
                        json_dump_text(strcmp(verb, "show") == 0 ? json_array_get(list, 0) : list,
                                       JSON_INDENT(2), NULL);
                printf("%s\n", text ? text : "null");
                free(text);
        } else {
                size_t i;
                json_t *t;
                printf("%-20s %-8s %-14s %-8s %-8s %s\n", "NAME", "SESSIONS", "MEMORY", "CPU",
                       "KEY", "PROFILES");
                json_array_foreach (list, i, t)
                        print_row(t);
        }
        json_decref(list);
        return 0;
}
