/* The command line: one descriptor per subcommand, reviewed together in main.c. */
#pragma once

struct cli_command {
        const char *name;
        const char *summary; /* one line for `airlock help` */
        int (*run)(int argc, char **argv);
};

/* Exit codes shared by every subcommand (the program's own status passes through as is). */
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_OUTPUT_LIMIT 125
#define EXIT_OOM 137

/* Prints "airlock CMD: <why>" and "Try 'airlock CMD --help'." on stderr (src/cli/usage.c);
 * returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int cmd_run(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_sessions(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_tools(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_tenants(int argc, char **argv);
int cmd_profile(int argc, char **argv);

/* Internal tools (src/cli/tools.c). Starts a hub on the mcpServers file path (NULL: the
 * AIRLOCK_MCP_CONFIG environment variable; neither: *ret_hub = NULL, no internal tools).
 * Prints "airlock PROG: --mcp-config: <where and why>" and returns -errno for a file that
 * cannot be used. */
struct hub;
int cli_hub_start(const char *prog, const char *path, struct hub **ret_hub);

/* Only reads and checks the file, so that a command refuses a bad one before it does any
 * other work. Same messages and returns as cli_hub_start(). */
int cli_hub_check(const char *prog, const char *path);

/* Waits (up to 30 s) for the hub's servers to finish starting, so that a model's first
 * request sees their tools; warns about the ones still starting. Accepts NULL. */
void cli_hub_wait(struct hub *h);

/* Resolves the isolation mode from --isolation, else $AIRLOCK_ISOLATION, else namespaces.
 * Prints an error and returns -EINVAL for an unknown name. */
struct jail_features;
enum jail_isolation;
int cli_isolation(const char *arg, enum jail_isolation *ret_mode);

/* Probes the kernel into *ret_features (always: release it with jail_features_done()) and
 * checks that mode can run here. Prints "airlock WHO: <why not>" and returns -errno when it
 * cannot; warns when mode is not the full sandbox. */
int cli_probe_mode(const char *who, enum jail_isolation mode, struct jail_features *ret_features);
