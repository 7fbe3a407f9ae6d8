/* The caller's own function tools on the chat-completions gateway: the checks a request's
 * "tools", "tool_choice" and "parallel_tool_calls" must pass before they go upstream beside the
 * gateway's tools, in OpenAI's terms (a function tool is {"type": "function", "function":
 * {"name", "description"?, "parameters"?, "strict"?}}). Only function tools pass through: the
 * gateway cannot run other kinds, and it cannot hand the model two tools of the same name. */
#pragma once

#include "base/error.h"

#include <jansson.h>
#include <stdbool.h>

/* Most function tools a request may declare (OpenAI's own limit). */
#define CALLER_TOOLS_MAX 128
/* Longest function name (OpenAI's rule: a-z, A-Z, 0-9, '_' and '-', 1 to 64 characters). */
#define CALLER_TOOL_NAME_MAX 64

/* Which request member is wrong ("tools[2]", "tool_choice", ...) and why, for a 400. */
struct caller_tools_error {
        char param[64];
        char msg[AIRLOCK_ERROR_MAX];
};

/* Fills err (param copied, the message formatted) and returns -EINVAL, for
 * `return caller_tools_fail(err, "tools[2]", "...", ...);`. */
int caller_tools_fail(struct caller_tools_error *err, const char *param, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Checks tools (the request's "tools": NULL or JSON null = none). declared is the gateway's own
 * tools in OpenAI's shape (borrowed), whose names the caller's may not take. Returns 0, or
 * -EINVAL with err naming tools[i] and saying why: not an object, a type other than
 * "function", no valid name, a member of the wrong type, a name the gateway's tools or another
 * entry already use, more than CALLER_TOOLS_MAX entries. */
int caller_tools_check(json_t *tools, json_t *declared, struct caller_tools_error *err);

/* Checks tool_choice ("none", "auto", "required", {"type": "function", "function": {"name"}}
 * or {"type": "allowed_tools", "allowed_tools": {"mode", "tools": [...]}}; NULL or JSON null =
 * not given) against the functions that exist: the caller's (tools, already checked) and the
 * gateway's (declared). Returns 0 or -EINVAL with err. */
int caller_tool_choice_check(json_t *tool_choice, json_t *tools, json_t *declared,
                             struct caller_tools_error *err);

/* Checks parallel_tool_calls: a boolean, or NULL / JSON null. Returns 0 or -EINVAL with err. */
int caller_parallel_check(json_t *parallel, struct caller_tools_error *err);

/* Whether name is a valid function name: 1 to CALLER_TOOL_NAME_MAX of a-z, A-Z, 0-9, '_', '-'. */
bool caller_tool_name_is_valid(const char *name);

/* Whether tools (checked, or NULL) declares a function called name. */
bool caller_tools_has(json_t *tools, const char *name);

/* Whether a tool_choice lets the model answer without a tool ("none", "auto", or not given):
 * one that forces a call is sent with the first upstream request of a client's request only,
 * or the gateway's own rounds could never end. */
bool caller_tool_choice_is_free(json_t *tool_choice);
