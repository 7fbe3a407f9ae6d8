/* The tools agents call: run_python, run_shell, write_file, read_file, list_files and
 * reset_session. One module serves every way in (MCP over stdio and HTTP, GET /v1/tools,
 * `airlock chat` and the chat-completions gateway), so a tool behaves the same whichever way it
 * is reached. Each tool is one file with a const descriptor (tool-*.c).
 *
 * A toolbox is the state of one conversation or MCP connection: a backend (where sandboxes run:
 * the in-process session manager, or a daemon over HTTP) and the one airlock session its tools
 * share, created lazily by the first tool call that needs it and reused until reset_session or
 * toolbox_free(). */
#pragma once

#include "base/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub;
struct session_manager;
struct toolbox;

/* Largest file read_file returns and resources/read serves, in bytes. */
#define TOOLS_READ_MAX (8u * 1024u * 1024u)
/* Largest timeout_s a caller may ask for (the profile's own limit may be lower). */
#define TOOLS_TIMEOUT_MAX_S 3600

/* ---- declarations ---------------------------------------------------------------------- */

enum tools_format {
        TOOLS_FORMAT_MCP,       /* {name, title, description, inputSchema, annotations} */
        TOOLS_FORMAT_OPENAI,    /* {type: "function", function: {name, description, parameters}} */
        TOOLS_FORMAT_ANTHROPIC, /* {name, description, input_schema} */
};

/* Hints for MCP clients (MCP "ToolAnnotations"), set honestly: no tool reaches the network. */
struct tool_annotations {
        bool read_only;   /* readOnlyHint: changes nothing */
        bool destructive; /* destructiveHint: may delete or overwrite what exists */
        bool idempotent;  /* idempotentHint: calling twice with the same args does no more */
        bool open_world;  /* openWorldHint: talks to things outside the sandbox */
};

struct tool_result;
/* Runs a tool whose arguments passed tools_validate(). Fills res (text, images, ...) and
 * returns 0, also for a failure the caller should see as a tool error (res->is_error); returns
 * -errno only when no result could be made (-ENOMEM). */
typedef int (*tool_handler_fn)(struct toolbox *tb, json_t *args, struct tool_result *res);

struct tool {
        const char *name;
        const char *title;        /* short human name (MCP "title") */
        const char *description;  /* for the model: what it does, what it returns, limits */
        const char *input_schema; /* JSON Schema (an object schema) as JSON text */
        struct tool_annotations annotations;
        bool needs_session; /* the call starts the session when there is none yet */
        /* The call runs the model's code (its "code" or "command" argument): a chat that
         * requires approval asks before it (chat_tool_runs_code()). */
        bool runs_code;
        /* The language the tool runs, offered only where the profile allows it; NULL: any
         * profile (run_python and run_shell are offered everywhere, as before). */
        const char *language;
        tool_handler_fn handler;
};

/* Every tool, in a stable order. Borrowed, static. */
const struct tool *const *tools_all(size_t *ret_n);

/* The tool called name, or NULL. */
const struct tool *tools_find(const char *name);

/* "mcp", "openai" or "anthropic". Returns 0 or -EINVAL. */
int tools_format_from_string(const char *s, enum tools_format *ret_format);

/* The tools in one API's shape, as a new JSON array (the value of that API's "tools" request
 * field; MCP's tools/list answers {"tools": <this>}): airlock's own, then hub's internal tools
 * (hub may be NULL: none). An internal tool's description names its server and, while it
 * cannot be called, says why. NULL only on allocation failure. */
json_t *tools_declarations(enum tools_format format, struct hub *hub);

/* Whether tool t is offered to a session of profile (a name; NULL = "default"): a tool that runs
 * a language the profile does not allow (run_javascript) is not. A profile that cannot be
 * loaded offers no such tool. */
bool tools_offered(const struct tool *t, const char *profile);

/* tools_declarations() without the tools a session of profile is not offered (tools_offered). */
json_t *tools_declarations_for(enum tools_format format, struct hub *hub, const char *profile);

/* Checks args against the tool's schema: an object (NULL counts as {}), the required members
 * present, each member of the declared type and range, no unknown members. Returns 0, or
 * -EINVAL with err saying which argument is wrong and why (to show the model as a tool error). */
int tools_validate(const struct tool *t, json_t *args, struct airlock_error *err);

/* ---- results --------------------------------------------------------------------------- */

/* What one tool call produced. Every member is set (possibly empty) once toolbox_call()
 * returned 0; release with tool_result_done(). */
struct tool_result {
        bool is_error;     /* a tool error (bad arguments, code that raised, a timeout, a missing
                            * file): the model should see it and can recover */
        char *text;        /* for the model: stdout, stderr, the result, the error, the files made,
                            * or the file read; UTF-8 */
        json_t *images;    /* array of {"mime_type": "image/png", "data": "<base64>"} */
        json_t *files;     /* array of {"path", "size", "change": "created"|"changed"} that the
                            * call created or changed in /work (from the execution's "files",
                            * or the file write_file wrote) */
        json_t *execution; /* run_python/run_shell: the full execution object of DESIGN.md
                            * section 4 (new reference); other tools: their JSON answer
                            * (read_file {path, size, encoding, content}, list_files the listing,
                            * ...); NULL when the call failed before that */
        char *session_id;  /* the airlock session the call ran in, or NULL (none yet) */
};

/* Frees the members and zeroes res. Accepts a zeroed or half-filled result. */
void tool_result_done(struct tool_result *res);

/* ---- backends: where sandboxes run ------------------------------------------------------ */

/* The calls a toolbox makes. Errors are -errno with err set where it has a parameter; every
 * call on a session that no longer exists (ended, lost, reaped when idle) returns -ESRCH, so
 * the toolbox can start a new one, distinct from -ENOENT for a missing file. */
struct tools_backend_ops {
        /* Creates a session with profile (NULL = "default"); *ret_id is a new string. */
        int (*session_create)(void *userdata, const char *profile, char **ret_id,
                              struct airlock_error *err);
        /* Ends the session; -ESRCH when it was already gone. */
        int (*session_destroy)(void *userdata, const char *id);
        /* Runs one cell (language "python" or "bash", timeout_ms 0 = the profile's limit);
         * *ret_result is a new execution object. */
        int (*execute)(void *userdata, const char *id, const char *language, const char *code,
                       uint64_t timeout_ms, json_t **ret_result, struct airlock_error *err);
        /* Files in /work as in session.h; *ret_data is malloc()ed and NUL-terminated. */
        int (*file_read)(void *userdata, const char *id, const char *path, size_t max_bytes,
                         char **ret_data, size_t *ret_len, struct airlock_error *err);
        int (*file_write)(void *userdata, const char *id, const char *path, const void *data,
                          size_t len, struct airlock_error *err);
        /* *ret_listing is {"dir", "entries": [{"name", "path", "type", "size", ...}]}. */
        int (*file_list)(void *userdata, const char *id, const char *dir, json_t **ret_listing,
                         struct airlock_error *err);
        /* Code Mode: the internal tools the code of session id (NULL: of a new session of
         * profile) may call, as session_code_tools() lists them; a new array. May be NULL (a
         * daemon over HTTP): run_python's description then names none. */
        json_t *(*code_tools)(void *userdata, const char *id, const char *profile);
        /* Frees userdata. */
        void (*free)(void *userdata);
};

struct tools_backend {
        const struct tools_backend_ops *ops;
        void *userdata;
};

/* A backend on the in-process session manager mgr (borrowed: it must outlive the backend).
 * Thread-safe: one backend may serve many toolboxes at once (the daemon's MCP sessions and
 * gateway conversations). Free with tools_backend_free(). The backend for a daemon over HTTP
 * is in src/cli/tools-remote.h (it needs the CLI's HTTP client). */
int tools_backend_local_new(struct session_manager *mgr, struct tools_backend **ret_backend);

/* Calls ops->free and frees the backend. Accepts NULL, returns NULL. */
struct tools_backend *tools_backend_free(struct tools_backend *b);

/* ---- the toolbox: one conversation's tools and session -------------------------------- */

struct toolbox_options {
        const char *profile;    /* profile of the session created lazily; NULL = "default" */
        const char *session_id; /* continue this existing session instead of creating one */
        bool keep_session;      /* toolbox_free() leaves the session running (the gateway
                                 * continuing a conversation across requests) */
        struct hub *hub;        /* internal tools declared and routed beside airlock's own
                                 * (borrowed; NULL = none) */
};

/* Creates a toolbox on backend (borrowed: it must outlive the toolbox). No session is created
 * yet. Returns 0 or -ENOMEM. Free with toolbox_free(). */
int toolbox_new(struct tools_backend *backend, const struct toolbox_options *opts,
                struct toolbox **ret_tb);

/* Ends the toolbox's session (unless keep_session) and frees it. Accepts NULL, returns NULL. */
struct toolbox *toolbox_free(struct toolbox *tb);

/* tools_declarations() for the toolbox's tools (airlock's and its hub's). */
json_t *toolbox_declarations(struct toolbox *tb, enum tools_format format);

/* Whether name is a tool of the toolbox (airlock's own, or an internal tool known now). tb may
 * be NULL: airlock's own only. */
bool toolbox_has_tool(struct toolbox *tb, const char *name);

/* Whether calling name needs a person's yes first: an internal tool whose server's config
 * says require_approval "always" (airlock's own tools never do here; the gateway's approval
 * mode for code is its own). */
bool toolbox_needs_approval(struct toolbox *tb, const char *name);

/* The server of internal tool name, copied into buf; false for airlock's own or an unknown
 * name. */
bool toolbox_tool_server(struct toolbox *tb, const char *name, char *buf, size_t size);

/* Calls the tool name (airlock's own, or an internal tool of the toolbox's hub) with args (a
 * JSON object, borrowed; NULL = {}). Validates the arguments
 * first (bad ones are a tool error, res->is_error, naming the argument), starts the session if
 * the tool needs one and there is none, and starts a new one, saying so in the text, when the
 * old one ended (a timeout that could not be interrupted, OOM, idle reaping). Returns 0 with
 * *ret_res filled (release it with tool_result_done()), -ENOENT for an unknown tool (the
 * caller words it: MCP answers a tool error, as the official SDKs do), or -ENOMEM.
 * Thread-safe: concurrent calls share the one session (a second execution while one runs is a
 * tool error saying the session is busy). */
int toolbox_call(struct toolbox *tb, const char *name, json_t *args, struct tool_result *ret_res);

/* toolbox_call() for a call that must be done by deadline_ns (CLOCK_MONOTONIC; 0: no deadline),
 * such as one item of an MCP batch: a timeout_s the caller gave is cut to the time left (at
 * least 1 ms). A call without timeout_s keeps its profile's, which the caller must allow for. */
int toolbox_call_until(struct toolbox *tb, const char *name, json_t *args, uint64_t deadline_ns,
                       struct tool_result *ret_res);

/* Reads a file of the session's /work, for MCP resources/read. Returns 0 with a malloc()ed
 * buffer (NUL-terminated; caller frees), -ESRCH when there is no session (yet), -EINVAL for a
 * bad path, -ENOENT, -EISDIR, -EFBIG over max_bytes, or -errno; err says why. */
int toolbox_file_read(struct toolbox *tb, const char *path, size_t max_bytes, char **ret_data,
                      size_t *ret_len, struct airlock_error *err);

/* Copies the id of the toolbox's session into buf (of size bytes). Returns 0, -ESRCH when
 * there is no session yet, -ENOBUFS when buf is too small. */
int toolbox_session_id(struct toolbox *tb, char *buf, size_t size);

/* Ends the session now (reset_session does this); the next call that needs one starts a new
 * one. Returns 0 (also when there was none). */
int toolbox_reset(struct toolbox *tb);

/* Ends the session now, killing a call that runs in it (which then returns with the session
 * lost), and starts no session again: every later call that needs one is a tool error. For a
 * connection that went away while its calls run. Thread-safe. */
void toolbox_close(struct toolbox *tb);
