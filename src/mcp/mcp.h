/* The Model Context Protocol server core: JSON-RPC 2.0 messages in, JSON-RPC messages out, for
 * one MCP connection (stdio: the process; streamable HTTP: one Mcp-Session-Id). It speaks
 * protocol versions 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05, and serves the tools of
 * src/tools/ (tools/list, tools/call) and the files those calls made (resources/list,
 * resources/read, as airlock://files/<path>). Transports: src/cli/mcp.c (stdio) and http.h
 * (the daemon's /mcp). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MCP_PROTOCOL_LATEST "2025-11-25"
#define MCP_RESOURCE_PREFIX "airlock://files/"

/* JSON-RPC 2.0 error codes (jsonrpc.org/specification) and MCP's own. */
#define JSONRPC_PARSE_ERROR (-32700)
#define JSONRPC_INVALID_REQUEST (-32600)
#define JSONRPC_METHOD_NOT_FOUND (-32601)
#define JSONRPC_INVALID_PARAMS (-32602)
#define JSONRPC_INTERNAL_ERROR (-32603)
#define MCP_RESOURCE_NOT_FOUND (-32002)
#define MCP_SESSION_NOT_FOUND (-32001) /* the MCP session ended (or never existed) */
#define MCP_SERVER_ERROR (-32000)      /* e.g. a batch out of time */

/* A JSON-RPC batch holds at most this many messages (a longer one is refused whole), and
 * starts no item after running this long; an item's timeout_s is cut to the time left. */
#define MCP_BATCH_MAX 64
#define MCP_BATCH_TIME_MAX_MS (300ULL * 1000)

struct mcp_conn;
struct hub;
struct tools_backend;

/* True when version is one this server speaks. */
bool mcp_version_is_supported(const char *version);

/* The version to answer a client that asked for requested (NULL when it sent none): requested
 * when supported, else MCP_PROTOCOL_LATEST. Static string. */
const char *mcp_version_negotiate(const char *requested);

/* True when the protocol version carries JSON-RPC batches: 2025-03-26 (and 2024-11-05, which
 * inherits them from JSON-RPC 2.0); 2025-06-18 removed them. */
bool mcp_version_allows_batch(const char *version);

struct mcp_conn_options {
        struct tools_backend *backend; /* borrowed: must outlive the connection */
        const char *profile;           /* profile of the session its tools start; NULL default */
        const char *name;              /* for log lines, e.g. "stdio" or the MCP session id */
        uint64_t batch_time_max_ms;    /* 0: MCP_BATCH_TIME_MAX_MS */
        struct hub *hub;               /* internal tools offered beside airlock's (borrowed;
                                        * NULL = none) */
        bool tools_list_changes;       /* the transport sends notifications/tools/list_changed
                                        * when hub's tools change (stdio): declared at
                                        * initialize as tools.listChanged */
};

/* Creates the state of one MCP connection. No sandbox session exists until a tool needs one.
 * Returns 0 or -ENOMEM. Free with mcp_conn_free(). */
int mcp_conn_new(const struct mcp_conn_options *opts, struct mcp_conn **ret_conn);

/* Ends the connection's sandbox session and frees it. Accepts NULL, returns NULL. */
struct mcp_conn *mcp_conn_free(struct mcp_conn *c);

/* Closes the connection while other threads may still be in mcp_conn_handle_json() with it
 * (the client deleted its MCP session): its sandbox session ends now, which stops a tool call
 * that runs; that call and every message not yet handled (the rest of a batch, a request of
 * another thread) are answered with a JSON-RPC error that says the session was deleted. Only
 * mcp_conn_free() may follow. */
void mcp_conn_close(struct mcp_conn *c);

/* Handles one JSON-RPC message (a request, notification, response or, where the negotiated
 * version allows, a batch), given as a parsed value (borrowed). *ret_reply is a new JSON value
 * to send back, or NULL when nothing is owed (notifications, responses, a batch of those).
 * Protocol errors (unknown method, bad params, invalid request) are JSON-RPC error replies;
 * a tool that fails is a result with isError. Returns 0, or -ENOMEM when no reply could be
 * built. Thread-safe: the HTTP transport may call it for one connection from several threads
 * (tool calls then run concurrently in the connection's one session). */
int mcp_conn_handle_json(struct mcp_conn *c, json_t *msg, json_t **ret_reply);

/* The same for message text: text that is not JSON gets a parse error reply (-32700). *ret_reply
 * is a new string of compact JSON with no newline inside (for stdio framing), or NULL. */
int mcp_conn_handle(struct mcp_conn *c, const char *text, size_t len, char **ret_reply);

/* True once initialize was answered successfully. */
bool mcp_conn_is_initialized(struct mcp_conn *c);

/* A JSON-RPC error response {jsonrpc, id, error: {code, message}} (id borrowed; NULL = null).
 * New reference, NULL on allocation failure. */
json_t *mcp_error_reply(json_t *id, int code, const char *message);
