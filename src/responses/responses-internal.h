/* What the Responses API's files share: the checked request (request.c), the input
 * items turned into Chat Completions messages (input.c) and the pieces of a Response
 * object (output.c). None of them touches a session, the store or the network, so the
 * unit tests (tests/unit/test-responses.c) run them alone. */
#pragma once

#include "chat/caller-tools.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The tool the model is given for code_interpreter. */
#define RESPONSES_CODE_TOOL "run_python"

/* Longest container id, response id or model name a request may name. */
#define RESPONSES_NAME_MAX 256
/* Most input items one request may carry. */
#define RESPONSES_INPUT_MAX 4096

/* A checked POST /v1/responses request. Release with responses_plan_done(). */
struct responses_plan {
        /* The upstream request without its messages and tools: model, and max_tokens,
         * temperature, top_p, parallel_tool_calls, response_format, reasoning_effort, user when
         * the client gave them. New reference. */
        json_t *upstream;
        const char *model;    /* borrowed from upstream */
        json_t *instructions; /* a string, or NULL (borrowed from the body) */
        json_t *input;        /* a string or an array (borrowed from the body) */
        bool code_interpreter;
        char container[RESPONSES_NAME_MAX + 1]; /* the container named; "" = "auto" */
        json_t *file_ids;                       /* auto: array of strings, or NULL (borrowed) */
        const char *memory_limit;               /* auto: or NULL (borrowed) */
        char code_param[32];  /* "tools[i]" of the code_interpreter tool, for messages */
        json_t *caller_tools; /* the function tools in Chat Completions' shape, or NULL */
        json_t *tool_choice;  /* tool_choice in Chat Completions' shape, or NULL */
        const char *previous_id;
        bool store;
        bool include_outputs; /* include: ["code_interpreter_call.outputs"] */
        bool stream;
        unsigned max_tool_calls; /* 0 = not given */
        /* What the Response object echoes of the request: instructions, max_output_tokens,
         * metadata, parallel_tool_calls, previous_response_id, reasoning, store, temperature,
         * text, tool_choice, tools, top_p, truncation, user. New reference. */
        json_t *echo;
};

void responses_plan_done(struct responses_plan *p);

/* Checks body (a POST /v1/responses request; borrowed, must outlive the plan) member by member:
 * unknown members, a tool type airlock does not run, a malformed value are -EINVAL with err
 * naming the parameter ("tools[2]", "input[0].content[1]") and saying why. default_model is
 * used when the body names none (400 without either). Returns 0 or -EINVAL, -ENOMEM. */
int responses_plan_parse(json_t *body, const char *default_model, struct responses_plan *ret_plan,
                         struct caller_tools_error *err);

/* What converting the input found out. */
struct responses_input_info {
        /* The container of the last code_interpreter_call item replayed in the input, or ""
         * (a client that keeps the history itself, as the Agents SDK does). */
        char container[RESPONSES_NAME_MAX + 1];
        json_t *answered; /* the call_id of every function_call_output, an array (new ref.) */
};

void responses_input_info_done(struct responses_input_info *info);

/* Appends input (a string, or an array of input items: messages with input_text, input_image,
 * output_text or refusal content; function_call, function_call_output and code_interpreter_call
 * items, as earlier responses output them) to messages as Chat Completions messages: calls
 * become an assistant message's tool_calls (a code_interpreter_call a run_python call whose
 * tool message is its logs), developer messages system ones. items gets the input as items
 * with ids (for GET .../input_items). Returns 0, -EINVAL with err (param "input" or
 * "input[i]...") for an item airlock cannot pass on, or -ENOMEM. */
int responses_input_convert(json_t *input, json_t *messages, json_t *items,
                            struct responses_input_info *info, struct caller_tools_error *err);

/* The logs of one execution as OpenAI's code interpreter shows them: stdout with the text of
 * its displays in their places, stderr, the value of the last expression, then the error's
 * traceback (or name and value). A malloc()ed string
 * (caller frees), NULL when out of memory. */
char *responses_exec_logs(json_t *execution);

/* The container_file_citation annotations for text citing files ([{container_id, file_id,
 * filename, path}], borrowed): each file whose path ("/mnt/data/x.csv", with or without a
 * "sandbox:" prefix) or, failing that, name appears in text is cited there (start_index and
 * end_index in characters, as OpenAI counts them); the others at the end of the text. A new
 * array, NULL when out of memory. */
json_t *responses_citations(const char *text, json_t *files);

/* Response.usage ({input_tokens, input_tokens_details: {cached_tokens}, output_tokens,
 * output_tokens_details: {reasoning_tokens}, total_tokens}) from Chat Completions token counts
 * (borrowed, may be NULL: zeros). New reference. */
json_t *responses_usage(json_t *chat_usage);
