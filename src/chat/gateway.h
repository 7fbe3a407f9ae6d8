/* The chat-completions gateway: an ordinary Chat Completions request in, airlock's tools added
 * (beside the client's own function tools), the tool loop run here against the configured
 * upstream endpoint in a sandbox session tied to the conversation, an ordinary chat completion
 * out (plus an "airlock" member summarising the tool calls). A turn that calls the client's
 * tools, or a tool that needs a person's approval, is suspended (continuation.h) and continued
 * by the client's next request. The HTTP side (auth, headers, the session's existence and
 * profile) is src/api/routes-chat.c; this file is the part that does not depend on the HTTP
 * server. */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct hub;
struct continuation;
struct llm_error;
struct suspend_store;
struct tools_backend;

#define CHAT_GATEWAY_SESSION_HEADER "X-Airlock-Session"
#define CHAT_GATEWAY_PROFILE_HEADER "X-Airlock-Profile"
/* Longest session id or profile name a request may name. */
#define CHAT_GATEWAY_NAME_MAX 64

/* The gateway's configuration (`airlock serve --llm-base-url ...` or AIRLOCK_LLM_*). */
struct chat_gateway_config {
        const char *base_url;  /* NULL = the gateway is off (503) */
        const char *model;     /* used when the request names none */
        const char *api_key;   /* NULL = none */
        uint64_t timeout_ms;   /* one upstream request; 0 = 120 s */
        unsigned max_rounds;   /* 0 = CHAT_MAX_ROUNDS_DEFAULT */
        bool require_approval; /* run_python and run_shell need the client's approval */
        const char *profile;   /* profile of the sessions it creates when the request names
                                * none; NULL = default */
        struct suspend_store *suspended; /* the suspended turns (borrowed); NULL = none are
                                          * kept, so a turn that needs one fails (500) */
        struct hub *hub;                 /* internal tools declared beside airlock's; NULL = none */
};

struct chat_gateway_reply {
        unsigned status; /* the HTTP status */
        json_t *body;    /* a chat completion, or {"error": {"message", "type", ...}} */
        char session[CHAT_GATEWAY_NAME_MAX]; /* the conversation's session id, "" when it has
                                              * none (yet) */
        bool stream; /* the client asked for "stream": true: send body as SSE events */
};

/* A checked request, ready to run once the caller has checked its session and profile. Release
 * with chat_gateway_plan_done(). */
struct chat_gateway_plan {
        json_t *req;          /* what goes upstream: the client's request without the gateway's
                               * members, a continued turn put back in its messages */
        json_t *caller_tools; /* the client's function tools, or NULL */
        json_t *tool_choice;  /* the client's tool_choice, or NULL */
        bool stream;
        /* The session to continue ("" = a new one, created by the first tool call): the
         * continued turn's, else the one the request names. */
        char session[CHAT_GATEWAY_NAME_MAX];
        /* The profile the request asks for ("" = none) and where it asked (for messages). */
        char profile[CHAT_GATEWAY_NAME_MAX];
        const char *profile_param; /* "airlock.profile" or the header's name */
        struct continuation *cont; /* the turn it continues, or NULL */
        size_t splice_start;       /* see continuation_point */
        const char *anchor;
};

void chat_gateway_plan_done(struct chat_gateway_plan *plan);

/* Checks one request. body is the client's JSON (borrowed; not modified); session_header and
 * profile_header are the X-Airlock-Session and X-Airlock-Profile headers (NULL = absent). Finds
 * the suspended turn it continues, if any. Returns 1 with *ret_plan filled, 0 with *ret an
 * error reply (release it with chat_gateway_reply_done()), or -ENOMEM. */
int chat_gateway_prepare(const struct chat_gateway_config *cfg, json_t *body,
                         const char *session_header, const char *profile_header,
                         struct chat_gateway_plan *ret_plan, struct chat_gateway_reply *ret);

/* Runs a prepared request. The caller has checked that plan->session (if any) exists and that
 * its profile is plan->profile (if given), or that plan->profile exists; profile is the profile
 * of the session (the one it runs, or the one to create; NULL = cfg->profile). backend runs the
 * tools (borrowed). cancel (may be NULL) turning true ends an upstream request in flight (503:
 * the daemon is shutting down). Always fills *ret (release it with chat_gateway_reply_done())
 * and returns 0, or -ENOMEM. */
int chat_gateway_run(const struct chat_gateway_config *cfg, struct tools_backend *backend,
                     struct chat_gateway_plan *plan, const char *profile, const atomic_bool *cancel,
                     struct chat_gateway_reply *ret);

/* Fills ret with an error in OpenAI's shape ({"error": {"message", "type", "param", "code"}}),
 * for the caller's own checks. Returns 0 or -ENOMEM. */
int chat_gateway_reply_error(struct chat_gateway_reply *ret, unsigned status, const char *type,
                             const char *param, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

/* Fills ret with the error for a failed chat_run() (r and err as it returned them): the
 * upstream unreachable 502, its timeout 504, its own refusal of the request with its status,
 * a broken upstream 502, shutdown 503 (see docs/CHAT.md "Errors"). Returns 0 or -ENOMEM. */
int chat_gateway_reply_upstream_error(struct chat_gateway_reply *ret, int r,
                                      const struct llm_error *err);

void chat_gateway_reply_done(struct chat_gateway_reply *reply);

/* The Server-Sent Events a streaming client expects for a finished completion: one chunk with
 * the whole message (content and tool calls) as its delta, one with the finish reason, then
 * "data: [DONE]". Returns a
 * malloc()ed string (caller frees) or NULL. */
char *chat_gateway_sse(json_t *completion);
