/* The agent loop over an OpenAI-compatible Chat Completions endpoint: send the conversation
 * with airlock's tools declared, run the tool calls the model makes in the conversation's
 * toolbox (one sandbox session, created by the first call that needs it), send the results
 * back as role "tool" messages, and repeat until the model answers without tool calls or the
 * round cap is reached. `airlock chat` (src/cli/chat.c) and the daemon's
 * POST /v1/chat/completions gateway (src/api/routes-chat.c) are both thin layers over this. */
#pragma once

#include "chat/llm.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct toolbox;
struct tool_result;

#define CHAT_MAX_ROUNDS_DEFAULT 10
#define CHAT_MAX_ROUNDS_MAX 1000
#define CHAT_TIMEOUT_MS_DEFAULT 120000
/* Longest tool message sent to the model; longer tool output keeps its head and tail. */
#define CHAT_TOOL_TEXT_MAX (32u * 1024u)

/* Where the endpoint is: flags first, then AIRLOCK_LLM_BASE_URL, AIRLOCK_LLM_MODEL and
 * AIRLOCK_LLM_API_KEY. Strings are owned; release with chat_config_done(). */
struct chat_config {
        char *base_url;
        char *model;
        char *api_key;
        uint64_t timeout_ms; /* one request to the endpoint; CHAT_TIMEOUT_MS_DEFAULT */
        unsigned max_rounds; /* tool rounds per answer; CHAT_MAX_ROUNDS_DEFAULT */
};

/* Fills cfg from the arguments (NULL = not given) and then the environment for what is still
 * missing. Returns 0 or -ENOMEM. Missing values stay NULL: callers decide what is required. */
int chat_config_resolve(const char *base_url, const char *model, const char *api_key,
                        struct chat_config *cfg);

/* Frees the strings (wiping the key) and zeroes cfg. */
void chat_config_done(struct chat_config *cfg);

/* What the user (the CLI's --approve) says about one call that needs approval. */
enum chat_approval {
        CHAT_RUN,
        CHAT_DECLINE, /* the model is told "the user declined to run this code" */
};

struct chat_hooks {
        /* Asked before a call that needs approval (chat_options.needs_approval) runs: code is
         * the code or the command of run_python/run_shell, NULL for other tools, whose
         * arguments (validated, borrowed) are in args. NULL = nobody to ask: the loop ends the
         * turn with CHAT_NEEDS_APPROVAL instead (the gateway). */
        enum chat_approval (*approve)(void *userdata, const char *tool, const char *code,
                                      json_t *args);
        /* Told about each answer of the endpoint (its first choice's message, borrowed) before
         * any of its tool calls runs, the final answer included. May be NULL. */
        void (*on_answer)(void *userdata, json_t *message);
        /* Told before each tool call runs (args already validated JSON, or NULL when they
         * were malformed). May be NULL. */
        void (*on_call)(void *userdata, const char *tool, json_t *args);
        /* Told about each result. May return a malloc()ed note (e.g. "saved as
         * airlock-output/plot.png") that is appended to the tool message for the model, or
         * NULL. May be NULL. */
        char *(*on_result)(void *userdata, const char *tool, json_t *args,
                           const struct tool_result *res);
        void *userdata;
};

struct chat_options {
        const char *model;              /* sets the request's "model" when not NULL */
        unsigned max_rounds;            /* 0 = CHAT_MAX_ROUNDS_DEFAULT */
        const struct chat_hooks *hooks; /* may be NULL */
        /* Whether a tool needs a person's yes before it runs. NULL = nothing does. A call
         * that needs it is put to hooks->approve, or, without that hook, ends the turn with
         * CHAT_NEEDS_APPROVAL before any call of that answer runs. */
        bool (*needs_approval)(void *userdata, const char *tool_name);
        /* The MCP server a tool comes from (its mcp_approval_request's "server_label"); NULL,
         * or a NULL answer, = "airlock". */
        const char *(*server_of)(void *userdata, const char *tool_name);
        void *policy_userdata; /* for needs_approval and server_of */
        /* The caller's own function tools (OpenAI "tools" entries, checked with
         * caller_tools_check(); borrowed; NULL = none): declared to the model after airlock's.
         * An answer that calls one ends the turn with CHAT_CALLER_TOOLS once the other calls
         * of that answer ran. */
        json_t *caller_tools;
        /* The caller's "tool_choice" (borrowed; NULL = none): sent with the first request; one
         * that forces a call (caller_tool_choice_is_free()) is not sent again after that. */
        json_t *tool_choice;
        /* Continue a suspended turn: the last message of the request's "messages" is an
         * assistant message whose tool calls have not run yet; they run first (as one round),
         * then the loop goes on. decisions is an array parallel to its tool_calls (borrowed):
         * {"approve": true|false, "reason": "..."?} for a call the person was asked about,
         * null for the others. */
        bool resume;
        json_t *decisions;
        /* The names of the toolbox's tools declared to the model, NULL-terminated (borrowed);
         * NULL = every tool of the toolbox. A call of another one is answered as a call of a
         * tool that does not exist, and never runs (the Responses API offers run_python only). */
        const char *const *only_tools;
        /* With only_tools: the internal tools of the toolbox's hub are offered too, but for
         * those that need approval (a caller without an approval flow: the Responses API). */
        bool offer_internal;
};

enum chat_outcome {
        CHAT_ANSWERED,       /* the model answered without tool calls */
        CHAT_MAX_ROUNDS,     /* it still asked for tools after max_rounds rounds */
        CHAT_NEEDS_APPROVAL, /* it called a tool that needs approval and nobody could be
                              * asked (no hooks->approve): nothing of that answer ran */
        CHAT_CALLER_TOOLS,   /* it called caller tools: the other calls of that answer ran */
};

/* One answer of the loop. Release with chat_turn_done(). */
struct chat_turn {
        enum chat_outcome outcome;
        json_t *response; /* the endpoint's last completion (new reference); NULL when the turn
                           * ended before any request (a resumed turn calling caller tools) */
        json_t *message;  /* the last assistant message: its first choice's message (borrowed
                           * from response), or the resumed one (borrowed from the request) */
        unsigned rounds;  /* rounds in which tools ran (not only the caller's) */
        json_t *calls;    /* every tool call run: [{id, name, arguments, is_error, output,
                           * files, images, declined?}] (output cut at 4 KiB) */
        json_t *pending;  /* CHAT_NEEDS_APPROVAL: the calls waiting for a yes, [{index (in the
                           * message's tool_calls), id, name, arguments (the parsed object),
                           * server_label}]; CHAT_CALLER_TOOLS: the caller tools' calls,
                           * [{index, id, type: "function", function: {name, arguments}}];
                           * else NULL */
        json_t *usage;    /* the endpoint's "usage" token counts added over every round, or
                           * NULL when it reported none */
};

void chat_turn_done(struct chat_turn *t);

/* Runs the loop for request (a Chat Completions request object with "messages", borrowed and
 * modified: "tools" is set to airlock's tools and opts->caller_tools, "model" to opts->model
 * when given, and the assistant and tool messages of each round are appended to "messages", so
 * that a caller keeping request gets the whole history; a final answer is appended too, and so
 * is the assistant message of a CHAT_NEEDS_APPROVAL turn (its calls unanswered) or of a
 * CHAT_CALLER_TOOLS turn (followed by the results of the calls that ran, the caller's calls
 * unanswered); an assistant turn stopped by the round cap is not). tb runs the tools
 * (borrowed). Returns 0 with *ret_turn filled, or an llm_complete() error (-ECONNREFUSED,
 * -ETIMEDOUT, -EPROTO, -EBADMSG, -E2BIG, -ECANCELED) with err filled, -EINVAL (no messages, or
 * opts->resume without an assistant message to resume), or -ENOMEM. A malformed tool call
 * (unknown tool, arguments that are not JSON or miss a field) is not an error: the model is told
 * in the tool message and the loop goes on. */
int chat_run(struct llm_client *llm, struct toolbox *tb, json_t *request,
             const struct chat_options *opts, struct chat_turn *ret_turn, struct llm_error *err);

/* Whether tool runs code (its descriptor's runs_code: run_python, run_shell, run_javascript,
 * run_r): what --approve and --chat-require-approval put before a person. */
bool chat_tool_runs_code(const char *tool);
