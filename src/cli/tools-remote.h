/* The tools backend (src/tools/tools.h) for a running daemon over its HTTP API: the same tools
 * as in-process, with the sessions living in the daemon. Used by `airlock mcp --url`. */
#pragma once

struct cli_client;
struct tools_backend;

/* A backend talking to the daemon through client (borrowed: it must outlive the backend). Not
 * thread-safe: one toolbox, one thread (the CLI's HTTP client is one connection). Returns 0 or
 * -ENOMEM. Free with tools_backend_free(). */
int tools_backend_remote_new(struct cli_client *client, struct tools_backend **ret_backend);
