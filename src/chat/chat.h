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

/* What the user (the CLI's --approve) says about one piece of code. */
enum chat_approval {
        CHAT_RUN,
        CHAT_DECLINE, /* the model is told "the user declined to run this code" */
};

struct chat_hooks {
        /* Asked before run_python or run_shell runs code (code is the code or the command).
         * NULL = always run. */
        enum chat_approval (*approve)(void *userdata, const char *tool, const char *code);
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
        const char *model;   /* sets the request's "model" when not NULL */
        unsigned max_rounds; /* 0 = CHAT_MAX_ROUNDS_DEFAULT */
        bool refuse_code;    /* the gateway's approval mode: a turn that would run code ends
                              * with CHAT_NEEDS_APPROVAL and runs nothing of that turn */
        const struct chat_hooks *hooks; /* may be NULL */
};

enum chat_outcome {
        CHAT_ANSWERED,       /* the model answered without tool calls */
        CHAT_MAX_ROUNDS,     /* it still asked for tools after max_rounds rounds */
        CHAT_NEEDS_APPROVAL, /* refuse_code: it asked to run code; nothing of it ran */
};

/* One answer of the loop. Release with chat_turn_done(). */
struct chat_turn {
        enum chat_outcome outcome;
        json_t *response; /* the endpoint's last completion (new reference) */
        json_t *message;  /* its first choice's message (borrowed from response) */
        unsigned rounds;  /* tool rounds run */
        json_t *calls;    /* every tool call run: [{id, name, arguments, is_error, output,
                           * files, images, declined?}] (output cut at 4 KiB) */
        json_t *pending;  /* CHAT_NEEDS_APPROVAL: the proposed calls [{id, name, arguments}] */
        json_t *usage;    /* the endpoint's "usage" token counts added over every round, or
                           * NULL when it reported none */
};

void chat_turn_done(struct chat_turn *t);

/* Runs the loop for request (a Chat Completions request object with "messages", borrowed and
 * modified: "tools" is set to airlock's tools, "model" to opts->model when given, and the
 * assistant and tool messages of each round are appended to "messages", so that a caller
 * keeping request gets the whole history; a final answer is appended too, an assistant turn
 * that was not run (max rounds, approval) is not). tb runs the tools (borrowed).
 * Returns 0 with *ret_turn filled, or an llm_complete() error (-ECONNREFUSED, -ETIMEDOUT,
 * -EPROTO, -EBADMSG, -E2BIG, -ECANCELED) with err filled, or -ENOMEM. A malformed tool call
 * (unknown tool, arguments that are not JSON or miss a field) is not an error: the model is told in
 * the tool message and the loop goes on. */
int chat_run(struct llm_client *llm, struct toolbox *tb, json_t *request,
             const struct chat_options *opts, struct chat_turn *ret_turn, struct llm_error *err);
