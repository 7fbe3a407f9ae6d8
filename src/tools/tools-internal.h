/* Shared by the tool files: the descriptors, and what a handler needs from the toolbox (the
 * session, started on demand, and the backend to reach it). */
#pragma once

#include "tools.h"

#include <stdbool.h>
#include <stdint.h>

extern const struct tool tool_run_python;
extern const struct tool tool_run_shell;
extern const struct tool tool_run_javascript;
extern const struct tool tool_run_r;
extern const struct tool tool_write_file;
extern const struct tool tool_read_file;
extern const struct tool tool_list_files;
extern const struct tool tool_reset_session;

/* The id of the toolbox's session, as a new string in *ret_id. With create, starts a session
 * when there is none (a failure becomes a tool error in res and -errno); without, returns
 * -ESRCH when there is none. A note that a new session replaced one that ended is added to
 * res the first time. */
int toolbox_session_get(struct toolbox *tb, bool create, char **ret_id, struct tool_result *res);

/* Forgets the session id when it is still the toolbox's session (it ended: lost or reaped),
 * remembering why for the note of the next session. */
void toolbox_session_forget(struct toolbox *tb, const char *id, const char *why);

const struct tools_backend *toolbox_backend(struct toolbox *tb);

/* Appends formatted text to res->text. Returns 0 or -ENOMEM. */
int tool_result_appendf(struct tool_result *res, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Makes res a tool error with the formatted message (appended to any text already there). */
int tool_result_error(struct tool_result *res, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Normalises a path argument for /work: "/work/a" and "./a" become "a" (models write both),
 * "/work" and "." become "". Returns a pointer into path, or NULL when it is absolute
 * elsewhere. Validity is then up to workspace_path_is_valid(). */
const char *tools_work_path(const char *path);

/* Runs code (language "python" or "bash") in the toolbox's session and turns the execution
 * object into res: the text, images, files and execution. timeout_ms 0 = the profile's. */
int tools_run_code(struct toolbox *tb, const char *language, const char *code, uint64_t timeout_ms,
                   struct tool_result *res);

/* The timeout_s argument in ms (0 when absent; validated by the schema). */
uint64_t tools_timeout_ms(json_t *args);

/* ---- internal tools (internal.c) -------------------------------------------------------- */

struct hub;

/* Appends hub's tools (NULL: none), in format, to list. Returns 0 or -ENOMEM. */
int tools_internal_declare(struct hub *hub, enum tools_format format, json_t *list);

/* Calls the internal tool name into res (text, images, execution {server, tool, is_error, cut,
 * content, structuredContent}); a failure (bad arguments, server down, timeout) is a tool error.
 * Returns 0, -ENOENT when hub has no such tool, or -ENOMEM. */
int tools_internal_call(struct hub *hub, const char *name, json_t *args, uint64_t deadline_ns,
                        struct tool_result *res);

/* Adds to run_python's description in list (declarations in format) how to call code (the
 * tools Code Mode lists, non-empty) from Python: `import airlock_tools` and one signature per
 * tool. Returns 0 or -ENOMEM. */
int tools_code_mode_describe(json_t *list, enum tools_format format, json_t *code);

/* Whether name is an internal tool whose config says require_approval: always. */
bool tools_internal_needs_approval(struct hub *hub, const char *name);

/* Copies the server of internal tool name into buf; false when it is not one. */
bool tools_internal_server(struct hub *hub, const char *name, char *buf, size_t size);
