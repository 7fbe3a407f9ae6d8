/* The hub's parts: the parsed config (config.c), a connection to one MCP server over stdio
 * (stdio.c) or streamable HTTP (http.c) behind one interface (struct conn), and the
 * supervisor and registry (hub.c). */
#pragma once

#include "hub.h"

#include <pthread.h>
#include <sys/types.h>

/* The protocol revision we ask for; servers may answer an older one they support. */
#define HUB_PROTOCOL_VERSION "2025-06-18"
/* Longest line (stdio) or body (HTTP) accepted from a server, whatever its max_result_bytes:
 * past it the server is out of step and the connection is closed. */
#define HUB_MESSAGE_MAX (64u * 1024u * 1024u)

enum approval_mode { APPROVAL_NEVER, APPROVAL_ALWAYS };

struct server_config {
        char *name;
        /* stdio */
        char *command;
        char **args; /* NULL-terminated */
        char **env;  /* "KEY=VALUE", NULL-terminated */
        char *cwd;
        /* streamable HTTP */
        char *url;
        char **headers; /* "Name: value", NULL-terminated */
        /* policy */
        char **allowed_tools; /* NULL = every tool */
        enum approval_mode approval_default;
        char **approval_always; /* tools that need approval whatever the default */
        char **approval_never;  /* tools that do not */
        uint64_t timeout_ms;
        uint64_t startup_timeout_ms;
        size_t max_result_bytes;
        bool disabled;
};

struct hub_config {
        struct server_config *servers;
        size_t n_servers;
};

int server_config_copy(const struct server_config *from, struct server_config *to);
void server_config_done(struct server_config *s);
bool server_tool_allowed(const struct server_config *s, const char *tool);
enum approval_mode server_tool_approval(const struct server_config *s, const char *tool);

/* ---- a connection to one server ---------------------------------------------------------- */

struct conn;

/* What a connection tells its owner, from its own thread. */
struct conn_events {
        /* A notification from the server (method, params may be NULL). */
        void (*notified)(void *userdata, const char *method, json_t *params);
        /* The connection broke (process exited, protocol error); why is one sentence. Called
         * once. */
        void (*closed)(void *userdata, const char *why);
        void *userdata;
};

struct conn_ops {
        /* Sends a request and waits for its answer. *ret_result is the "result" member (new
         * reference). Errors as hub_call(); -EPROTO carries the server's error message. */
        int (*request)(struct conn *c, const char *method, json_t *params, uint64_t deadline_ns,
                       const atomic_bool *cancel, json_t **ret_result, struct airlock_error *err);
        /* Sends a notification (no answer). Steals params. */
        int (*notify)(struct conn *c, const char *method, json_t *params);
        /* The stdio server's pid, or 0. */
        pid_t (*pid)(struct conn *c);
        /* Ends every wait now and later with -EHOSTDOWN saying why (the connection is being
         * replaced or the hub stops); safe while requests are in flight. It may call
         * events.closed from the calling thread. */
        void (*abort)(struct conn *c, const char *why);
        /* Ends the connection (stops a stdio server) and frees it; no request may be in
         * flight. */
        void (*close)(struct conn *c);
};

struct conn {
        const struct conn_ops *ops;
};

/* Starts the server's process and the reader thread. Returns 0 or -errno with err saying why
 * (the command could not be executed...). */
int conn_stdio_open(const struct server_config *s, const struct conn_events *ev,
                    struct conn **ret_conn, struct airlock_error *err);

/* Prepares a streamable HTTP connection (nothing is sent until the first request). */
int conn_http_open(const struct server_config *s, const struct conn_events *ev,
                   struct conn **ret_conn, struct airlock_error *err);

/* The JSON-RPC plumbing both transports share (rpc.c): a table of requests waiting for their
 * answers, keyed by id. */
struct rpc_waiter;
struct rpc_table {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct rpc_waiter *head;
        int64_t next_id;
        char *closed; /* why the connection closed; every wait ends with -EHOSTDOWN */
};

void rpc_table_init(struct rpc_table *t);
void rpc_table_done(struct rpc_table *t);
/* Registers a new request id to wait for; returns the id (> 0) or -ENOMEM. */
int64_t rpc_table_add(struct rpc_table *t);
/* Hands an answer (a whole JSON-RPC response object, stolen) to its waiter; false when no one
 * waits for its id (a late answer after a timeout), and the message is freed. */
bool rpc_table_answer(struct rpc_table *t, json_t *msg);
/* Waits for the answer to id until deadline_ns or cancel; removes the waiter either way.
 * Returns 0 with *ret_msg (the response object), -ETIMEDOUT, -ECANCELED or -EHOSTDOWN (with
 * err saying why). */
int rpc_table_wait(struct rpc_table *t, int64_t id, uint64_t deadline_ns, const atomic_bool *cancel,
                   json_t **ret_msg, struct airlock_error *err);
/* Marks the table closed: every waiter, now and later, gets -EHOSTDOWN with why. */
void rpc_table_close(struct rpc_table *t, const char *why);

/* Turns a JSON-RPC response into its result (0, *ret_result a new reference) or its error
 * (-EPROTO, err = the server's message). */
int rpc_response_result(json_t *msg, json_t **ret_result, struct airlock_error *err);

/* The answer to a request a server sent us (ping answers {}; anything else: method not
 * found). NULL when msg needs no answer. A new object. */
json_t *rpc_answer_server_request(json_t *msg);
