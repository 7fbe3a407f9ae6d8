/* The chat-completions gateway: an ordinary Chat Completions request in, airlock's tools added,
 * the tool loop run here against the configured upstream endpoint in a sandbox session tied to
 * the conversation, an ordinary chat completion out (plus an "airlock" member summarising the
 * tool calls). The HTTP side (auth, the session header) is src/api/routes-chat.c; this file
 * is the part that does not depend on the HTTP server. */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct hub;
struct tools_backend;

#define CHAT_GATEWAY_SESSION_HEADER "X-Airlock-Session"

/* The gateway's configuration (`airlock serve --llm-base-url ...` or AIRLOCK_LLM_*). */
struct chat_gateway_config {
        const char *base_url;  /* NULL = the gateway is off (503) */
        const char *model;     /* used when the request names none */
        const char *api_key;   /* NULL = none */
        uint64_t timeout_ms;   /* one upstream request; 0 = 120 s */
        unsigned max_rounds;   /* 0 = CHAT_MAX_ROUNDS_DEFAULT */
        bool require_approval; /* never run code: return the proposed code to the client */
        const char *profile;   /* profile of the sessions it creates; NULL = default */
        struct hub *hub;       /* internal tools declared beside airlock's; NULL = none */
};

struct chat_gateway_reply {
        unsigned status;  /* the HTTP status */
        json_t *body;     /* a chat completion, or {"error": {"message", "type", ...}} */
        char session[64]; /* the conversation's session id, "" when it has none (yet) */
        bool stream;      /* the client asked for "stream": true: send body as SSE events */
};

/* Runs one request. body is the client's JSON (borrowed; not modified). session_id continues
 * that session (the caller checked it exists), NULL = a new one is created lazily by the first
 * tool call; either way the session is kept after the request, for the next one. backend runs
 * the tools (borrowed). cancel (may be NULL) turning true ends an upstream request in flight
 * (503: the daemon is shutting down). Always fills *ret (release it with
 * chat_gateway_reply_done()) and returns 0, or -ENOMEM. */
int chat_gateway_complete(const struct chat_gateway_config *cfg, struct tools_backend *backend,
                          json_t *body, const char *session_id, const atomic_bool *cancel,
                          struct chat_gateway_reply *ret);

void chat_gateway_reply_done(struct chat_gateway_reply *reply);

/* The Server-Sent Events a streaming client expects for a finished completion: one chunk with
 * the whole message as its delta, one with the finish reason, then "data: [DONE]". Returns a
 * malloc()ed string (caller frees) or NULL. */
char *chat_gateway_sse(json_t *completion);
