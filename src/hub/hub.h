/* Internal tools: the MCP servers a team runs behind airlock. `--mcp-config FILE` names them in
 * the `mcpServers` JSON that MCP clients already read (a stdio server is a command the daemon
 * starts; a streamable HTTP server is a URL). The hub connects to each, lists its tools, keeps
 * the list fresh (notifications/tools/list_changed), supervises stdio servers (restarted with
 * backoff when they die or do not start) and routes calls. Everything that shows internal tools
 * to a model (the chat gateway, `airlock chat`, /mcp, GET /v1/tools) and Code Mode (the
 * sandbox's `airlock_tools`) asks the hub. Thread-safe: one hub serves every request.
 *
 * The hub knows nothing of sessions or models: policy that depends on who calls (which tools a
 * session's code may call, approval by a person) is decided by its callers from what it reports
 * (each tool's require_approval). It enforces what the config says of a server itself:
 * allowed_tools (other tools are neither listed nor callable), the call timeout and the result
 * size, and it validates arguments against the tool's input schema before they are sent. */
#pragma once

#include "base/error.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub;
struct hub_config;

#define HUB_CALL_TIMEOUT_MS_DEFAULT 60000u
#define HUB_STARTUP_TIMEOUT_MS_DEFAULT 30000u
#define HUB_RESULT_MAX_DEFAULT (1024u * 1024u)
/* Longest tool name a model API accepts (OpenAI: ^[a-zA-Z0-9_-]{1,64}$). */
#define HUB_NAME_MAX 64

/* ---- configuration ---------------------------------------------------------------------- */

/* Reads and checks an mcpServers file (docs/TOOLS.md): {"mcpServers": {NAME: {...}}}. A file
 * that does not parse, a member that is not known or has the wrong type, a server with neither
 * or both of command and url: -EINVAL with err naming the file, the line or the member
 * ("FILE: mcpServers.crm.comand: unknown member (a stdio server has command, args, env, cwd;
 * ...)"). Other errors are -errno (the file cannot be read). Free with hub_config_free(). */
int hub_config_load(const char *path, struct hub_config **ret_cfg, struct airlock_error *err);

/* The same for a parsed document; origin names it in messages. root is borrowed. */
int hub_config_parse(const json_t *root, const char *origin, struct hub_config **ret_cfg,
                     struct airlock_error *err);

/* Accepts NULL, returns NULL. */
struct hub_config *hub_config_free(struct hub_config *cfg);

/* ---- the hub ---------------------------------------------------------------------------- */

struct hub_options {
        /* Names the hub must not give internal tools (airlock's own tools): a server tool of
         * that name is exposed as SERVER__NAME. NULL-terminated, borrowed during hub_new(). */
        const char *const *reserved;
};

/* Starts connecting to every server in the background (cfg is copied; it may be freed after).
 * Sets SIGPIPE to be ignored (a server that closed its stdin is an EPIPE, not the process's
 * end). Returns 0 or -ENOMEM. Free with hub_free(), which stops the servers it started. */
int hub_new(const struct hub_config *cfg, const struct hub_options *opts, struct hub **ret_hub);

/* Closes every connection: a stdio server gets its stdin closed, then SIGTERM, then SIGKILL
 * (its whole process group) within about 3 s. Calls in flight fail. Accepts NULL. */
struct hub *hub_free(struct hub *h);

/* Waits until every server has finished its first attempt to start (ready or failed), at
 * most timeout_ms. Returns true when all did. */
bool hub_wait_started(struct hub *h, uint64_t timeout_ms);

/* Bumped whenever the set of tools or their availability changes, so that a caller can tell
 * whether a listing it holds is stale. */
uint64_t hub_generation(struct hub *h);

/* The tools, as a new array of objects, in config order of the servers then the servers' own
 * order:
 *   {"name": exposed name (unique, [A-Za-z0-9_-]{1,64}), "server": config name, "tool": the
 *    server's own name, "title"?, "description", "inputSchema", "outputSchema"?,
 *    "annotations"?, "require_approval": "always"|"never", "available": bool, "reason"?: why
 *    not}
 * A server that went away keeps its last list, marked unavailable with the reason. NULL only
 * when out of memory. */
json_t *hub_tools(struct hub *h);

/* One tool of hub_tools() by exposed name (a new reference), or NULL. */
json_t *hub_tool(struct hub *h, const char *name);

/* Whether the internal tool name needs a person's yes before it runs (its server's
 * require_approval). False for a name the hub does not know. h may be NULL. */
bool hub_tool_needs_approval(struct hub *h, const char *name);

/* The config name of the server of the internal tool name, valid as long as the hub; NULL for
 * a name the hub does not know. h may be NULL. */
const char *hub_tool_server(struct hub *h, const char *name);

/* The servers, as a new array: {"name", "transport": "stdio"|"http", "state": "starting"|
 * "ready"|"unavailable", "reason"?, "tools": n, "restarts": n, "pid"?: a stdio server's}. */
json_t *hub_servers(struct hub *h);

/* What one call returned, converted from MCP's CallToolResult. Release with
 * hub_result_done(). */
struct hub_result {
        bool is_error;      /* the server said isError: the tool ran and failed */
        bool cut;           /* the result was over the server's max_result_bytes and was cut */
        char *text;         /* the text items joined by newlines (also resources' text, and a
                             * note per item that is not text); never NULL */
        json_t *structured; /* structuredContent, or NULL (dropped when cut) */
        json_t *images;     /* [{"mime_type", "data" (base64)}], never NULL */
        json_t *content;    /* the content array as the server sent it (NULL when cut) */
};

void hub_result_done(struct hub_result *res);

/* Calls tool name (the exposed name) with args (an object, borrowed; NULL = {}). expect (may
 * be NULL) is the entry of hub_tool() the caller checked its policy against: when name now
 * names another tool (another server, another approval), the call is refused (-ENOENT). Waits
 * until
 * the answer, the server's timeout_ms, deadline_ns (CLOCK_MONOTONIC, 0 = none) or *cancel
 * (may be NULL) turning true. Returns 0 with *ret_res filled (a tool error is res->is_error),
 * or with err saying why for the caller to show:
 *   -ENOENT     no such tool (err names the tools that exist, or says there are none);
 *   -EINVAL     args do not match the tool's input schema (err names the argument);
 *   -EHOSTDOWN  the server is not available, or died during the call (err says why);
 *   -ETIMEDOUT  no answer in time (the server is told the call is cancelled);
 *   -ECANCELED  *cancel turned true;
 *   -EPROTO     the server answered a JSON-RPC error (err holds its message) or nonsense;
 *   -ENOMEM. */
int hub_call(struct hub *h, const char *name, const json_t *expect, json_t *args,
             uint64_t deadline_ns, const atomic_bool *cancel, struct hub_result *ret_res,
             struct airlock_error *err);

/* Turns a tool name into a Python identifier the way Code Mode does ("get-user" ->
 * "get_user", "2fa" -> "_2fa", "class" -> "class_"), for descriptions shown to a model.
 * Writes at most size bytes (NUL included). */
void hub_python_name(const char *name, char *buf, size_t size);
