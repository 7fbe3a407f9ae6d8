/* airlock's entry point: dispatches to one subcommand. Only main() exits. */
#include "cli.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "config.h"
#include "jail/jail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_command commands[] = {
        { "run", "run code once in a fresh sandbox and print its output (or --json)", cmd_run },
        { "doctor", "report what the kernel offers and which isolation mode will be used",
          cmd_doctor },
        { "serve", "run the daemon: the HTTP API with persistent sessions (docs/API.md)",
          cmd_serve },
        { "exec", "run code through a running daemon, in a session (-s) or once", cmd_exec },
        { "sessions", "list, create, stop, resume, fork and delete sessions", cmd_sessions },
        { "cp", "copy files into and out of a session (ID:PATH), like docker cp", cmd_cp },
        { "chat", "talk to a model (any OpenAI-compatible endpoint) that runs code here",
          cmd_chat },
        { "mcp", "serve the tools over MCP on stdio, for MCP clients (docs/MCP.md)", cmd_mcp },
        { "tools", "list the tools a model gets, internal MCP servers' included (docs/TOOLS.md)",
          cmd_tools },
        { "tenants", "add, list, change, revoke and rotate tenants' keys and quotas", cmd_tenants },
        { "profile", "list and show profiles; build and remove their layers of packages",
          cmd_profile },
};

static void usage(FILE *f)
{
        fprintf(f, "usage: airlock COMMAND [OPTIONS]\n\ncommands:\n");
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
        fprintf(f, "\n`airlock COMMAND --help` describes a command's options.\n");
}

int cli_isolation(const char *arg, enum jail_isolation *ret_mode)
{
        const char *s = arg ? arg : getenv("AIRLOCK_ISOLATION");

        if (!s || !*s) {
                *ret_mode = JAIL_NAMESPACES;
                return 0;
        }
        if (jail_isolation_from_string(s, ret_mode) < 0) {
                fprintf(stderr,
                        "airlock: unknown isolation mode '%s' (expected namespaces, process or "
                        "none)\n",
                        s);
                return -EINVAL;
        }
        return 0;
}

int cli_probe_mode(const char *who, enum jail_isolation mode, struct jail_features *ret_features)
{
        struct airlock_error err = { { 0 } };
        int r;

        jail_probe(ret_features);
        r = jail_check_mode(ret_features, mode, &err);
        if (r < 0) {
                fprintf(stderr, "airlock %s: %s\n", who, err.msg);
                return r;
        }
        if (mode != JAIL_NAMESPACES)
                log_warn("isolation '%s' is not a security boundary; use it for development only",
                         jail_isolation_to_string(mode));
        return 0;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
                printf("airlock %s\n", AIRLOCK_VERSION);
                return 0;
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0 ||
            strcmp(argv[1], "-h") == 0) {
                usage(stdout);
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(argv[1], commands[i].name) == 0)
                        return commands[i].run(argc - 1, argv + 1);
        fprintf(stderr, "airlock: unknown command '%s'\n\n", argv[1]);
        usage(stderr);
        return EXIT_USAGE;
}
