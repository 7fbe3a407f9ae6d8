/* reset_session: ends the session (its variables, shell and /work); the next call that needs
 * one starts afresh. */
#include "tools-internal.h"

#include <errno.h>

static int reset_session(struct toolbox *tb, json_t *args, struct tool_result *res)
{
        (void) args;
        (void) toolbox_reset(tb);
        return tool_result_appendf(res, "The session was reset: variables, the shell and the "
                                        "files in /work are gone. The next call starts a fresh "
                                        "session.\n");
}

const struct tool tool_reset_session = {
        .name = "reset_session",
        .title = "Reset session",
        .description = "End the sandbox session: all Python variables, the shell state and every "
                       "file in /work are discarded. The next tool call starts a fresh session. "
                       "Use it to start over or to free memory.",
        .input_schema = "{\"type\": \"object\", \"properties\": {},"
                        " \"additionalProperties\": false}",
        /* It discards everything, and doing it twice leaves the same empty state. */
        .annotations = { .read_only = false,
                         .destructive = true,
                         .idempotent = true,
                         .open_world = false },
        .needs_session = false,
        .handler = reset_session,
};
