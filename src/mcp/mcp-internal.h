/* Shared by the MCP core's files: the connection state and the method handlers. */
#pragma once

#include "mcp.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct toolbox;

struct mcp_conn {
        pthread_mutex_t lock; /* guards everything below but tb, which is thread-safe */
        struct toolbox *tb;
        char *name;
        char version[16];        /* negotiated at initialize; "" before */
        bool initialized;        /* initialize was answered */
        bool client_ready;       /* notifications/initialized arrived */
        json_t *resources;       /* path -> {"size", "change"}: the files tool calls made */
        char *resources_session; /* the session those files live in */
        bool closed;             /* mcp_conn_close(): nothing more runs */
        uint64_t batch_time_max_ms;
        bool tools_list_changes; /* listChanged is declared (mcp_conn_options) */
};

/* Why a request failed, as a JSON-RPC error. */
struct mcp_rpc_error {
        int code;
        char message[300];
};

/* Sets e and returns -EPROTO, for `return mcp_rpc_error_set(e, JSONRPC_INVALID_PARAMS, ...)`. */
int mcp_rpc_error_set(struct mcp_rpc_error *e, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* A request as its handler gets it. */
struct mcp_request {
        json_t *params;       /* an object (an empty one when the request had none), borrowed */
        uint64_t deadline_ns; /* when it must be done (CLOCK_MONOTONIC: its batch's), 0: never */
};

/* A method handler: 0 with a new *ret_result, -EPROTO with e set (a JSON-RPC error reply), or
 * -ENOMEM. */
typedef int (*mcp_method_fn)(struct mcp_conn *c, const struct mcp_request *req, json_t **ret_result,
                             struct mcp_rpc_error *e);

int mcp_method_tools_list(struct mcp_conn *c, const struct mcp_request *req, json_t **ret_result,
                          struct mcp_rpc_error *e);
int mcp_method_tools_call(struct mcp_conn *c, const struct mcp_request *req, json_t **ret_result,
                          struct mcp_rpc_error *e);
int mcp_method_resources_list(struct mcp_conn *c, const struct mcp_request *req,
                              json_t **ret_result, struct mcp_rpc_error *e);
int mcp_method_resources_templates_list(struct mcp_conn *c, const struct mcp_request *req,
                                        json_t **ret_result, struct mcp_rpc_error *e);
int mcp_method_resources_read(struct mcp_conn *c, const struct mcp_request *req,
                              json_t **ret_result, struct mcp_rpc_error *e);

/* The negotiated version, copied into buf (16 bytes) under the lock. */
void mcp_conn_version(struct mcp_conn *c, char buf[16]);

/* The MIME type for a file name, from its extension; NULL when unknown. */
const char *mcp_mime_type(const char *path);

/* "airlock://files/" + path with each byte outside the unreserved set and '/' percent-encoded.
 * New string, NULL on allocation failure. */
char *mcp_resource_uri(const char *path);
