/* The Responses API (responses.h): one request runs chat_run() with run_python standing for the
 * code_interpreter tool. Its hooks build the Response's output items as the loop goes (and, for
 * a streaming request, send their events right away): a message item for the text of each
 * answer that also called tools, a code_interpreter_call item per run_python call, whose
 * container is made (through openai.h) when the first call comes, and at the end the answer's
 * message item citing the files the code made, or the client's calls as function_call items.
 * The Chat Completions history the model saw is stored with the response, so that
 * previous_response_id puts the model back where it was, in the same container. */
#include "responses.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "chat/chat.h"
#include "chat/llm.h"
#include "chat/suspend.h"
#include "openai/openai.h"
#include "responses-internal.h"
#include "session/session.h"
#include "store.h"
#include "tools/base64.h"
#include "tools/tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define _cleanup_json_ _cleanup_(json_decrefp)
#define reply_error chat_gateway_reply_error

#define LIST_LIMIT_DEFAULT 20
#define LIST_LIMIT_MAX 100

struct responses {
        struct responses_config cfg;
        struct responses_store *store;
        struct tools_backend *local; /* sessions on cfg.mgr */
};

int responses_new(const struct responses_config *cfg, struct responses **ret_rs,
                  struct airlock_error *err)
{
        struct responses *rs = calloc(1, sizeof(*rs));
        int r;

        if (!rs)
                return -ENOMEM;
        rs->cfg = *cfg;
        r = responses_store_open(cfg->state_dir, &rs->store, err);
        if (r >= 0)
                r = tools_backend_local_new(cfg->mgr, &rs->local);
        if (r < 0) {
                responses_free(rs);
                return r;
        }
        *ret_rs = rs;
        return 0;
}

struct responses *responses_free(struct responses *rs)
{
        if (!rs)
                return NULL;
        responses_store_free(rs->store);
        tools_backend_free(rs->local);
        free(rs);
        return NULL;
}

bool responses_wants_stream(json_t *body)
{
        return json_is_true(json_object_get(body, "stream"));
}

/* ---- one request ------------------------------------------------------------------------- */

struct run {
        struct responses *rs;
        const struct responses_request *req;
        const struct responses_plan *plan;
        struct toolbox *tb;
        char id[SUSPEND_ID_MAX]; /* resp_... */
        long long created_at;
        json_t *output;  /* the output items, outputs included */
        json_t *cited;   /* [{container_id, file_id, filename, path}] of the files code made */
        json_t *current; /* the code_interpreter_call item running (borrowed from output) */
        size_t current_index;
        unsigned seq; /* the next event's sequence_number */
        bool started;
        bool files_copied; /* file_ids were copied into a container that existed before */
        char precreated[SESSION_ID_MAX + 1];         /* a session made for the first call, handed to
                                                      * the toolbox when it asks for one */
        char container[OPENAI_CONTAINER_ID_MAX + 1]; /* the conversation's, "" = none yet */
        /* Why the container could not be made (the tool's options, the session limit): the
         * answer of the request once the loop ended, since the code it was for never ran. */
        struct openai_error create_err;
        bool create_failed;
};

static void emit(struct run *run, const char *type, json_t *ev)
{
        const struct responses_sink *sink = run->req->sink;

        if (!ev)
                return;
        if (sink && json_object_set_new(ev, "type", json_string(type)) == 0 &&
            json_object_set_new(ev, "sequence_number", json_integer(run->seq++)) == 0)
                sink->event(sink->userdata, type, ev);
        json_decref(ev);
}

/* An item as the client sees it: a code_interpreter_call's outputs only with include. */
static json_t *item_view(const struct run *run, json_t *item)
{
        const char *type = json_string_value(json_object_get(item, "type"));
        json_t *v;

        if (run->plan->include_outputs || !type || strcmp(type, "code_interpreter_call") != 0)
                return json_deep_copy(item);
        v = json_deep_copy(item);
        if (v && json_object_set_new(v, "outputs", json_null()) < 0) {
                json_decref(v);
                return NULL;
        }
        return v;
}

static json_t *output_view(const struct run *run, json_t *output)
{
        json_t *out = json_array(), *item;
        size_t i;

        json_array_foreach (output, i, item)
                if (!out || json_array_append_new(out, item_view(run, item)) < 0) {
                        json_decref(out);
                        return NULL;
                }
        return out;
}

/* The text of every output_text part of the message items, as the SDKs' output_text. */
static char *output_text(json_t *output)
{
        char *out = NULL;
        size_t len = 0, i, k;
        FILE *f = open_memstream(&out, &len);
        json_t *item, *part;

        if (!f)
                return NULL;
        json_array_foreach (output, i, item) {
                if (!json_is_string(json_object_get(item, "role")))
                        continue;
                json_array_foreach (json_object_get(item, "content"), k, part)
                        fputs(json_string_value(json_object_get(part, "text")) ?: "", f);
        }
        if (fclose(f) != 0)
                return NULL;
        return out;
}

/* A Response object as the client sees it (item_view()). New reference. */
static json_t *response_view(const struct run *run, json_t *full)
{
        _cleanup_json_ json_t *v = json_copy(full);

        if (!v ||
            json_object_set_new(v, "output", output_view(run, json_object_get(full, "output"))) < 0)
                return NULL;
        return TAKE_PTR(v);
}

/* The Response object, outputs included: the request's echoed members, then what this run
 * made. */
static json_t *response_object(const struct run *run, json_t *output, const char *status,
                               json_t *usage, json_t *incomplete, json_t *error)
{
        _cleanup_json_ json_t *r = json_copy(run->plan->echo);
        _cleanup_free_ char *text = output_text(output);
        bool done = strcmp(status, "completed") == 0;

        if (!r || !text)
                return NULL;
        if (json_object_set_new(r, "id", json_string(run->id)) < 0 ||
            json_object_set_new(r, "object", json_string("response")) < 0 ||
            json_object_set_new(r, "created_at", json_integer(run->created_at)) < 0 ||
            json_object_set_new(r, "status", json_string(status)) < 0 ||
            json_object_set_new(r, "background", json_false()) < 0 ||
            json_object_set_new(r, "completed_at",
                                done ? json_integer((json_int_t) time(NULL)) : json_null()) < 0 ||
            json_object_set(r, "error", error ? error : json_null()) < 0 ||
            json_object_set(r, "incomplete_details", incomplete ? incomplete : json_null()) < 0 ||
            json_object_set_new(r, "model", json_string(run->plan->model)) < 0 ||
            json_object_set_new(r, "output", json_deep_copy(output)) < 0 ||
            json_object_set_new(r, "output_text", json_string(text)) < 0 ||
            json_object_set(r, "usage", usage ? usage : json_null()) < 0)
                return NULL;
        return TAKE_PTR(r);
}

static int make_id(const char *prefix, char *buf, size_t size)
{
        return suspend_make_id(prefix, buf, size);
}

/* Appends item (taken) to the output; its index in *ret_index. */
static int add_item(struct run *run, json_t *item, size_t *ret_index)
{
        if (!item || json_array_append_new(run->output, item) < 0)
                return -ENOMEM;
        *ret_index = json_array_size(run->output) - 1;
        return 0;
}

/* A message item with text, its events sent as OpenAI sends them. */
static int add_message(struct run *run, const char *text, json_t *annotations)
{
        char id[SUSPEND_ID_MAX];
        json_t *item, *part;
        size_t index, i;
        json_t *a;
        int r;

        r = make_id("msg_", id, sizeof(id));
        if (r < 0)
                return r;
        part = annotations ? json_pack("{s:s, s:s, s:O, s:[]}", "type", "output_text", "text", text,
                                       "annotations", annotations, "logprobs")
                           : json_pack("{s:s, s:s, s:[], s:[]}", "type", "output_text", "text",
                                       text, "annotations", "logprobs");
        item = json_pack("{s:s, s:s, s:s, s:s, s:[o]}", "id", id, "type", "message", "status",
                         "completed", "role", "assistant", "content", part);
        r = add_item(run, item, &index);
        if (r < 0 || !run->req->sink)
                return r;
        emit(run, "response.output_item.added",
             json_pack("{s:I, s:{s:s, s:s, s:s, s:s, s:[]}}", "output_index", (json_int_t) index,
                       "item", "id", id, "type", "message", "status", "in_progress", "role",
                       "assistant", "content"));
        emit(run, "response.content_part.added",
             json_pack("{s:s, s:I, s:i, s:{s:s, s:s, s:[], s:[]}}", "item_id", id, "output_index",
                       (json_int_t) index, "content_index", 0, "part", "type", "output_text",
                       "text", "", "annotations", "logprobs"));
        if (*text)
                emit(run, "response.output_text.delta",
                     json_pack("{s:s, s:I, s:i, s:s, s:[]}", "item_id", id, "output_index",
                               (json_int_t) index, "content_index", 0, "delta", text, "logprobs"));
        emit(run, "response.output_text.done",
             json_pack("{s:s, s:I, s:i, s:s, s:[]}", "item_id", id, "output_index",
                       (json_int_t) index, "content_index", 0, "text", text, "logprobs"));
        json_array_foreach (annotations, i, a)
                emit(run, "response.output_text.annotation.added",
                     json_pack("{s:s, s:I, s:i, s:I, s:O}", "item_id", id, "output_index",
                               (json_int_t) index, "content_index", 0, "annotation_index",
                               (json_int_t) i, "annotation", a));
        emit(run, "response.content_part.done",
             json_pack("{s:s, s:I, s:i, s:O}", "item_id", id, "output_index", (json_int_t) index,
                       "content_index", 0, "part", part));
        emit(run, "response.output_item.done",
             json_pack("{s:I, s:O}", "output_index", (json_int_t) index, "item", item));
        return 0;
}

/* A function_call item for one of the client's calls ({id, function: {name, arguments}}). */
static int add_function_call(struct run *run, json_t *call)
{
        json_t *fn = json_object_get(call, "function");
        const char *call_id = json_string_value(json_object_get(call, "id"));
        const char *name = json_string_value(json_object_get(fn, "name"));
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        char id[SUSPEND_ID_MAX];
        size_t index;
        json_t *item;
        int r;

        r = make_id("fc_", id, sizeof(id));
        if (r < 0)
                return r;
        item = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "type", "function_call",
                         "status", "completed", "call_id", call_id ?: "", "name", name ?: "",
                         "arguments", args ?: "{}");
        r = add_item(run, item, &index);
        if (r < 0 || !run->req->sink)
                return r;
        emit(run, "response.output_item.added",
             json_pack("{s:I, s:{s:s, s:s, s:s, s:s, s:s, s:s}}", "output_index",
                       (json_int_t) index, "item", "id", id, "type", "function_call", "status",
                       "in_progress", "call_id", call_id ?: "", "name", name ?: "", "arguments",
                       ""));
        emit(run, "response.function_call_arguments.delta",
             json_pack("{s:s, s:I, s:s}", "item_id", id, "output_index", (json_int_t) index,
                       "delta", args ?: "{}"));
        emit(run, "response.function_call_arguments.done",
             json_pack("{s:s, s:I, s:s, s:s}", "item_id", id, "output_index", (json_int_t) index,
                       "name", name ?: "", "arguments", args ?: "{}"));
        emit(run, "response.output_item.done",
             json_pack("{s:I, s:O}", "output_index", (json_int_t) index, "item", item));
        return 0;
}

/* ---- the container ------------------------------------------------------------------------ */

/* file_ids (a checked array of strings, or NULL) as a NULL-terminated vector of borrowed
 * strings (the vector itself is malloc()ed). */
static char **file_id_vector(json_t *ids)
{
        char **v = calloc(json_array_size(ids) + 1, sizeof(*v));
        json_t *id;
        size_t i;

        if (!v)
                return NULL;
        json_array_foreach (ids, i, id)
                v[i] = (char *) json_string_value(id);
        return v;
}

/* Makes the container of an "auto" code_interpreter tool. */
static int make_container(struct run *run, struct openai_error *oerr)
{
        _cleanup_free_ char **ids = file_id_vector(run->plan->file_ids);
        char cid[OPENAI_CONTAINER_ID_MAX + 1], sid[SESSION_ID_MAX + 1];
        int r;

        if (!ids)
                return -ENOMEM;
        *oerr = (struct openai_error){};
        r = openai_container_create(
                run->rs->cfg.openai,
                &(struct openai_container_options){ .file_ids = run->plan->file_ids ? ids : NULL,
                                                    .memory_limit = run->plan->memory_limit,
                                                    .profile = run->rs->cfg.chat->profile },
                cid, oerr);
        if (r < 0) {
                if (!run->create_failed) {
                        run->create_failed = true;
                        run->create_err = *oerr;
                        if (!run->create_err.status)
                                (void) openai_error_set(&run->create_err, r, 500, NULL,
                                                        "cannot create the container: %s",
                                                        strerror(-r));
                }
                return r;
        }
        r = openai_session_id(cid, sid, sizeof(sid));
        if (r < 0)
                return r;
        memcpy(run->precreated, sid, sizeof(sid));
        memcpy(run->container, cid, sizeof(cid));
        run->files_copied = true;
        return 0;
}

/* The first call of a request needs its container: the one the conversation has (given the
 * request's file_ids, once), or a new one, made now so that the call's item can name it. */
static void ensure_container(struct run *run)
{
        char sid[SESSION_ID_MAX + 1];
        struct openai_error oerr = {};
        json_t *id;
        size_t i;

        if (toolbox_session_id(run->tb, sid, sizeof(sid)) >= 0) {
                if (openai_container_id(sid, run->container, sizeof(run->container)) < 0)
                        run->container[0] = '\0';
                if (run->files_copied || !run->container[0])
                        return;
                run->files_copied = true;
                json_array_foreach (run->plan->file_ids, i, id) {
                        json_t *f = NULL;

                        if (openai_container_file_copy(run->rs->cfg.openai, run->container,
                                                       json_string_value(id), &f, &oerr) < 0)
                                log_warn("responses: cannot copy '%s' into %s: %s",
                                         json_string_value(id), run->container, oerr.message);
                        json_decref(f);
                }
                return;
        }
        if (run->precreated[0])
                return;
        /* A failure is told to the model by the toolbox, which asks again. */
        if (make_container(run, &oerr) < 0)
                log_warn("responses: cannot create a container: %s", oerr.message);
}

/* The backend the toolbox runs on: the daemon's own, except that a new session is a new
 * container (its file_ids copied in, its memory_limit checked, its files listed by the
 * Containers API). */
static int ci_session_create(void *userdata, const char *profile, char **ret_id,
                             struct airlock_error *err)
{
        struct run *run = userdata;
        struct openai_error oerr = {};
        char *id;
        int r;

        (void) profile;
        if (!run->precreated[0]) {
                r = make_container(run, &oerr);
                if (r < 0)
                        return airlock_error_set(err, r, "cannot create the container: %s",
                                                 oerr.message[0] ? oerr.message : strerror(-r));
        }
        id = strdup(run->precreated);
        if (!id)
                return -ENOMEM;
        run->precreated[0] = '\0';
        *ret_id = id;
        return 0;
}

#define LOCAL(p) (((struct run *) (p))->rs->local)

static int ci_session_destroy(void *userdata, const char *id)
{
        return LOCAL(userdata)->ops->session_destroy(LOCAL(userdata)->userdata, id);
}

static int ci_execute(void *userdata, const char *id, const char *language, const char *code,
                      uint64_t timeout_ms, json_t **ret_result, struct airlock_error *err)
{
        return LOCAL(userdata)->ops->execute(LOCAL(userdata)->userdata, id, language, code,
                                             timeout_ms, ret_result, err);
}

static int ci_file_read(void *userdata, const char *id, const char *path, size_t max_bytes,
                        char **ret_data, size_t *ret_len, struct airlock_error *err)
{
        return LOCAL(userdata)->ops->file_read(LOCAL(userdata)->userdata, id, path, max_bytes,
                                               ret_data, ret_len, err);
}

static int ci_file_write(void *userdata, const char *id, const char *path, const void *data,
                         size_t len, struct airlock_error *err)
{
        return LOCAL(userdata)->ops->file_write(LOCAL(userdata)->userdata, id, path, data, len,
                                                err);
}

static int ci_file_list(void *userdata, const char *id, const char *dir, json_t **ret_listing,
                        struct airlock_error *err)
{
        return LOCAL(userdata)->ops->file_list(LOCAL(userdata)->userdata, id, dir, ret_listing,
                                               err);
}

static json_t *ci_code_tools(void *userdata, const char *id, const char *profile)
{
        const struct tools_backend *l = LOCAL(userdata);

        return l->ops->code_tools ? l->ops->code_tools(l->userdata, id, profile) : NULL;
}

static void ci_free(void *userdata)
{
        (void) userdata; /* the run owns itself */
}

static const struct tools_backend_ops ci_ops = {
        .session_create = ci_session_create,
        .session_destroy = ci_session_destroy,
        .execute = ci_execute,
        .file_read = ci_file_read,
        .file_write = ci_file_write,
        .file_list = ci_file_list,
        .code_tools = ci_code_tools,
        .free = ci_free,
};

/* ---- the hooks: items as the loop goes ------------------------------------------------------ */

static void on_answer(void *userdata, json_t *message)
{
        struct run *run = userdata;
        const char *text = json_string_value(json_object_get(message, "content"));
        json_t *calls = json_object_get(message, "tool_calls");

        if (!run->started) {
                run->started = true;
                if (run->req->sink && run->req->sink->started)
                        run->req->sink->started(run->req->sink->userdata);
        }
        /* The text of an answer that also calls tools; the final answer's comes at the end,
         * with its citations. */
        if (json_array_size(calls) > 0 && text && *text)
                (void) add_message(run, text, NULL);
}

/* An internal tool's call (docs/TOOLS.md) as the Responses API shows a call of an MCP
 * server's tool: an mcp_call item, whose output or error comes with the result. */
static void on_internal_call(struct run *run, const char *tool, json_t *args)
{
        _cleanup_free_ char *arguments = args ? json_dumps(args, JSON_COMPACT) : strdup("{}");
        char id[SUSPEND_ID_MAX], server[64];
        json_t *item;
        size_t index;

        if (!arguments || !toolbox_tool_server(run->tb, tool, server, sizeof(server)) ||
            make_id("mcp_", id, sizeof(id)) < 0)
                return;
        item = json_pack("{s:s, s:s, s:s, s:s, s:s, s:n, s:n, s:s}", "id", id, "type", "mcp_call",
                         "server_label", server, "name", tool, "arguments", arguments, "output",
                         "error", "status", "in_progress");
        if (add_item(run, item, &index) < 0)
                return;
        run->current = item;
        run->current_index = index;
        if (!run->req->sink)
                return;
        emit(run, "response.output_item.added",
             json_pack("{s:I, s:O}", "output_index", (json_int_t) index, "item", item));
        emit(run, "response.mcp_call.in_progress",
             json_pack("{s:s, s:I}", "item_id", id, "output_index", (json_int_t) index));
}

static void on_internal_result(struct run *run, const struct tool_result *res)
{
        json_t *item = run->current;
        const char *id = json_string_value(json_object_get(item, "id"));

        run->current = NULL;
        if (res->is_error)
                (void) json_object_set_new(item, "error", json_string(res->text ?: ""));
        else
                (void) json_object_set_new(item, "output", json_string(res->text ?: ""));
        (void) json_object_set_new(item, "status",
                                   json_string(res->is_error ? "failed" : "completed"));
        if (!run->req->sink)
                return;
        emit(run, res->is_error ? "response.mcp_call.failed" : "response.mcp_call.completed",
             json_pack("{s:s, s:I}", "item_id", id, "output_index",
                       (json_int_t) run->current_index));
        emit(run, "response.output_item.done",
             json_pack("{s:I, s:O}", "output_index", (json_int_t) run->current_index, "item",
                       item));
}

static void on_call(void *userdata, const char *tool, json_t *args)
{
        struct run *run = userdata;
        const char *code = json_string_value(json_object_get(args, "code"));
        char id[SUSPEND_ID_MAX];
        json_t *item;
        size_t index;

        run->current = NULL;
        if (strcmp(tool, RESPONSES_CODE_TOOL) != 0) {
                on_internal_call(run, tool, args);
                return;
        }
        if (!code || make_id("ci_", id, sizeof(id)) < 0)
                return;
        ensure_container(run);
        item = json_pack("{s:s, s:s, s:s, s:s, s:s, s:n}", "id", id, "type",
                         "code_interpreter_call", "status", "in_progress", "code", code,
                         "container_id", run->container, "outputs");
        if (add_item(run, item, &index) < 0)
                return;
        run->current = item;
        run->current_index = index;
        if (!run->req->sink)
                return;
        emit(run, "response.output_item.added",
             json_pack("{s:I, s:{s:s, s:s, s:s, s:s, s:s, s:n}}", "output_index",
                       (json_int_t) index, "item", "id", id, "type", "code_interpreter_call",
                       "status", "in_progress", "code", "", "container_id", run->container,
                       "outputs"));
        emit(run, "response.code_interpreter_call.in_progress",
             json_pack("{s:s, s:I}", "item_id", id, "output_index", (json_int_t) index));
        emit(run, "response.code_interpreter_call_code.delta",
             json_pack("{s:s, s:I, s:s}", "item_id", id, "output_index", (json_int_t) index,
                       "delta", code));
        emit(run, "response.code_interpreter_call_code.done",
             json_pack("{s:s, s:I, s:s}", "item_id", id, "output_index", (json_int_t) index, "code",
                       code));
        (void) json_object_set_new(item, "status", json_string("interpreting"));
        emit(run, "response.code_interpreter_call.interpreting",
             json_pack("{s:s, s:I}", "item_id", id, "output_index", (json_int_t) index));
}

/* Writes one image the code made to path in its container and records it there. Returns the
 * container file's id (caller frees), or NULL with why in err. */
static char *store_image(struct run *run, const char *sid, const char *path, const char *b64,
                         struct airlock_error *err)
{
        const struct tools_backend *l = run->rs->local;
        struct openai_error oerr = {};
        _cleanup_free_ char *data = NULL;
        _cleanup_json_ json_t *files = NULL, *registered = NULL;
        const char *fid;
        size_t len = 0;
        int r;

        r = base64_decode(b64, strlen(b64), &data, &len);
        if (r < 0) {
                (void) airlock_error_set(err, r, "not base64");
                return NULL;
        }
        r = l->ops->file_write(l->userdata, sid, path, data, len, err);
        if (r < 0)
                return NULL;
        files = json_pack("[{s:s, s:I, s:s}]", "path", path, "size", (json_int_t) len, "change",
                          "created");
        if (!files || openai_container_files_register(run->rs->cfg.openai, run->container, files,
                                                      &registered, &oerr) < 0) {
                (void) airlock_error_set(err, -EIO, "%s", oerr.message);
                return NULL;
        }
        fid = json_string_value(json_object_get(json_array_get(registered, 0), "id"));
        return fid ? strdup(fid) : NULL;
}

/* Saves one image the code made as a file of its container; its URL on this daemon, or a
 * data: URL when it cannot be saved. */
static char *save_image(struct run *run, const char *sid, const char *item_id, size_t k,
                        json_t *img)
{
        const char *mime = json_string_value(json_object_get(img, "mime_type")) ?: "image/png";
        const char *b64 = json_string_value(json_object_get(img, "data")) ?: "";
        struct airlock_error err = { { 0 } };
        _cleanup_free_ char *fid = NULL;
        char path[128], *url = NULL;

        (void) snprintf(path, sizeof(path), "%s/%s-%zu.%s", RESPONSES_IMAGE_DIR, item_id, k + 1,
                        strcmp(mime, "image/jpeg") == 0 ? "jpg" : "png");
        fid = store_image(run, sid, path, b64, &err);
        if (fid) {
                if (asprintf(&url, "%s/v1/containers/%s/files/%s/content", run->req->base_url ?: "",
                             run->container, fid) < 0)
                        return NULL;
                return url;
        }
        log_warn("responses: image %zu of %s kept as a data URL: %s", k + 1, item_id, err.msg);
        if (asprintf(&url, "data:%s;base64,%s", mime, b64) < 0)
                return NULL;
        return url;
}

/* The files a call made, recorded in its container and remembered to be cited. */
static void cite_files(struct run *run, json_t *exec)
{
        struct openai_error oerr = {};
        _cleanup_json_ json_t *files = NULL;
        json_t *f;
        size_t i;

        if (json_array_size(json_object_get(exec, "files")) == 0)
                return;
        if (openai_container_files_register(run->rs->cfg.openai, run->container,
                                            json_object_get(exec, "files"), &files, &oerr) < 0) {
                log_warn("responses: cannot record the files of %s: %s", run->container,
                         oerr.message);
                return;
        }
        json_array_foreach (files, i, f) {
                const char *path = json_string_value(json_object_get(f, "path")) ?: "";
                const char *slash = strrchr(path, '/');

                if (strstr(path, "/" RESPONSES_IMAGE_DIR "/"))
                        continue;
                (void) json_array_append_new(
                        run->cited,
                        json_pack("{s:s, s:O, s:s, s:s}", "container_id", run->container, "file_id",
                                  json_object_get(f, "id") ?: json_null(), "filename",
                                  slash ? slash + 1 : path, "path", path));
        }
}

static char *on_result(void *userdata, const char *tool, json_t *args,
                       const struct tool_result *res)
{
        struct run *run = userdata;
        json_t *item = run->current, *outputs, *img;
        const char *id = json_string_value(json_object_get(item, "id"));
        _cleanup_free_ char *logs = NULL;
        size_t i;

        (void) args;
        if (item && strcmp(tool, RESPONSES_CODE_TOOL) != 0 &&
            strcmp(json_string_value(json_object_get(item, "type")) ?: "", "mcp_call") == 0) {
                on_internal_result(run, res);
                return NULL;
        }
        run->current = NULL;
        if (!item || strcmp(tool, RESPONSES_CODE_TOOL) != 0)
                return NULL;
        /* The call may have run in a new session (the old one ended). */
        if (res->session_id &&
            openai_container_id(res->session_id, run->container, sizeof(run->container)) < 0)
                run->container[0] = '\0';
        logs = res->execution ? responses_exec_logs(res->execution) : strdup(res->text ?: "");
        outputs = json_pack("[{s:s, s:s}]", "type", "logs", "logs", logs ?: "");
        json_array_foreach (res->images, i, img) {
                _cleanup_free_ char *url =
                        res->session_id ? save_image(run, res->session_id, id, i, img) : NULL;

                if (url)
                        (void) json_array_append_new(
                                outputs, json_pack("{s:s, s:s}", "type", "image", "url", url));
        }
        if (res->execution && run->container[0])
                cite_files(run, res->execution);
        (void) json_object_set_new(item, "outputs", outputs);
        (void) json_object_set_new(item, "container_id", json_string(run->container));
        (void) json_object_set_new(item, "status",
                                   json_string(res->execution ? "completed" : "failed"));
        if (!run->req->sink)
                return NULL;
        emit(run, "response.code_interpreter_call.completed",
             json_pack("{s:s, s:I}", "item_id", id, "output_index",
                       (json_int_t) run->current_index));
        emit(run, "response.output_item.done",
             json_pack("{s:I, s:o}", "output_index", (json_int_t) run->current_index, "item",
                       item_view(run, item)));
        return NULL;
}

/* ---- create ----------------------------------------------------------------------------- */

static int reply_invalid(struct chat_gateway_reply *ret, const struct caller_tools_error *err)
{
        return reply_error(ret, 400, "invalid_request_error", err->param[0] ? err->param : NULL,
                           "%s", err->msg);
}

/* What previous_response_id continues: its history, container and unanswered calls. */
static int load_previous(struct responses *rs, const struct responses_plan *plan,
                         json_t **ret_state, struct chat_gateway_reply *ret)
{
        int r;

        *ret_state = NULL;
        if (!plan->previous_id)
                return 0;
        r = responses_store_get(rs->store, plan->previous_id, NULL, NULL, ret_state);
        if (r == -ENOENT)
                return reply_error(ret, 404, "invalid_request_error", "previous_response_id",
                                   "Previous response with id '%s' not found (never stored: "
                                   "\"store\": false; deleted; or older than %d days).",
                                   plan->previous_id, RESPONSES_KEEP_DAYS) < 0
                               ? -ENOMEM
                               : 1;
        if (r < 0)
                return r == -ENOMEM ? r
                                    : (reply_error(ret, 500, "server_error", NULL,
                                                   "cannot read the responses store: %s",
                                                   strerror(-r)) < 0
                                               ? -ENOMEM
                                               : 1);
        return 0;
}

/* Every call the previous response left to the client must be answered now, or the model
 * upstream would refuse the conversation. */
static int check_answered(json_t *state, const struct responses_input_info *info,
                          struct chat_gateway_reply *ret)
{
        json_t *id, *a;
        size_t i, k;

        json_array_foreach (json_object_get(state, "pending"), i, id) {
                bool found = false;

                json_array_foreach (info->answered, k, a)
                        if (json_equal(a, id))
                                found = true;
                if (!found)
                        return reply_error(ret, 400, "invalid_request_error", "input",
                                           "No tool output found for function call %s: send a "
                                           "function_call_output item for each function_call "
                                           "of the previous response.",
                                           json_string_value(id)) < 0
                                       ? -ENOMEM
                                       : 1;
        }
        return 0;
}

/* The files to copy into the container exist (checked now: the container is made later). */
static int check_file_ids(struct responses *rs, const struct responses_plan *plan,
                          struct chat_gateway_reply *ret)
{
        json_t *id;
        size_t i;

        json_array_foreach (plan->file_ids, i, id) {
                struct openai_error e = {};
                json_t *f = NULL;
                int r = openai_file_get(rs->cfg.openai, json_string_value(id), &f, &e);

                json_decref(f);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        (void) snprintf(e.param, sizeof(e.param), "%s.container.file_ids",
                                        plan->code_param);
                        ret->status = e.status ? e.status : 404;
                        ret->body = openai_error_json(&e);
                        return ret->body ? 1 : -ENOMEM;
                }
        }
        return 0;
}

/* The session the conversation continues in: the container named by the tool, else the
 * previous response's, else that of the last code_interpreter_call the client replayed, as
 * long as it still exists. "" = a new one, made by the first call. */
static int pick_container(struct run *run, json_t *state, const struct responses_input_info *info,
                          char sid[SESSION_ID_MAX + 1], struct chat_gateway_reply *ret)
{
        const char *candidates[2] = { json_string_value(json_object_get(state, "container")),
                                      info->container };
        json_t *desc;

        sid[0] = '\0';
        if (!run->plan->code_interpreter)
                return 0;
        if (run->plan->container[0]) {
                desc = openai_container_describe(run->rs->cfg.openai, run->plan->container);
                if (!desc || openai_session_id(run->plan->container, sid, SESSION_ID_MAX + 1) < 0) {
                        json_decref(desc);
                        return reply_error(ret, 404, "invalid_request_error", run->plan->code_param,
                                           "Container with id '%s' not found (%s.container).",
                                           run->plan->container, run->plan->code_param) < 0
                                       ? -ENOMEM
                                       : 1;
                }
                json_decref(desc);
                return openai_container_id(sid, run->container, sizeof(run->container));
        }
        for (size_t i = 0; i < ELEMENTSOF(candidates); i++) {
                if (!candidates[i] || !*candidates[i])
                        continue;
                desc = openai_container_describe(run->rs->cfg.openai, candidates[i]);
                if (desc && openai_session_id(candidates[i], sid, SESSION_ID_MAX + 1) >= 0) {
                        json_decref(desc);
                        return openai_container_id(sid, run->container, sizeof(run->container));
                }
                json_decref(desc);
        }
        sid[0] = '\0';
        return 0;
}

/* The final items, the status and the Response, once the loop ended. */
static json_t *finish(struct run *run, const struct chat_turn *turn, json_t **ret_pending)
{
        json_t *choice0 = json_array_get(json_object_get(turn->response, "choices"), 0);
        const char *finish = json_string_value(json_object_get(choice0, "finish_reason"));
        _cleanup_json_ json_t *incomplete = NULL, *usage = responses_usage(turn->usage);
        _cleanup_json_ json_t *pending = json_array();
        const char *status = "completed";
        json_t *call;
        size_t i;

        if (!usage || !pending)
                return NULL;
        switch (turn->outcome) {
        case CHAT_ANSWERED: {
                const char *text = json_string_value(json_object_get(turn->message, "content"));
                _cleanup_json_ json_t *notes = responses_citations(text ?: "", run->cited);

                if (!notes || add_message(run, text ?: "", notes) < 0)
                        return NULL;
                if (finish && strcmp(finish, "length") == 0)
                        incomplete = json_pack("{s:s}", "reason", "max_output_tokens");
                else if (finish && strcmp(finish, "content_filter") == 0)
                        incomplete = json_pack("{s:s}", "reason", "content_filter");
                break;
        }
        case CHAT_MAX_ROUNDS:
                incomplete = json_pack("{s:s}", "reason", "max_tool_rounds");
                break;
        case CHAT_CALLER_TOOLS:
                json_array_foreach (turn->pending, i, call) {
                        if (add_function_call(run, call) < 0 ||
                            json_array_append(pending, json_object_get(call, "id")) < 0)
                                return NULL;
                }
                break;
        case CHAT_NEEDS_APPROVAL:
                /* Nothing here asks for approval (responses_create refuses it up front). */
                incomplete = json_pack("{s:s}", "reason", "approval_required");
                break;
        }
        if (incomplete)
                status = "incomplete";
        *ret_pending = TAKE_PTR(pending);
        return response_object(run, run->output, status, usage, incomplete, NULL);
}

/* Keeps the response and what continuing it needs. A failure is logged: the answer is still
 * the client's, it just cannot be continued or read back. */
static void store(struct run *run, json_t *response, json_t *items, json_t *messages, size_t skip,
                  json_t *pending)
{
        _cleanup_json_ json_t *history = json_array(), *state = NULL;
        json_t *m;
        size_t i;
        int r;

        if (!history)
                return;
        json_array_foreach (messages, i, m)
                if (i >= skip && json_array_append(history, m) < 0)
                        return;
        state = json_pack("{s:O, s:s?, s:O}", "messages", history, "container",
                          run->container[0] ? run->container : NULL, "pending", pending);
        if (!state)
                return;
        r = responses_store_put(run->rs->store, run->id, run->created_at, response, items, state);
        if (r < 0)
                log_warn_errno(r, "responses: %s was not stored%s", run->id,
                               r == -E2BIG ? " (larger than the store takes)" : "");
}

/* The request failed after the loop began (ret holds the error reply): a stream that has
 * started ends with "response.failed" instead. */
static void fail_stream(struct run *run, const struct chat_gateway_reply *ret)
{
        _cleanup_json_ json_t *error = NULL, *resp = NULL;
        json_t *e = json_object_get(ret->body, "error");

        if (!run->started || !run->req->sink)
                return;
        error = json_pack("{s:O, s:O}", "code",
                          json_object_get(e, "code") && !json_is_null(json_object_get(e, "code"))
                                  ? json_object_get(e, "code")
                                  : json_object_get(e, "type") ?: json_null(),
                          "message", json_object_get(e, "message") ?: json_null());
        resp = response_object(run, run->output, "failed", NULL, NULL, error);
        if (resp)
                emit(run, "response.failed",
                     json_pack("{s:o}", "response", response_view(run, resp)));
}

/* The container the first call needed could not be made: that is the request's answer, its
 * param named as the request named it ("tools[0].container.memory_limit"). */
static int fail_container(struct run *run, struct chat_gateway_reply *ret)
{
        struct openai_error e = run->create_err;

        if (strcmp(e.param, "file_ids") == 0 || strcmp(e.param, "memory_limit") == 0)
                (void) snprintf(e.param, sizeof(e.param), "%s.container.%s", run->plan->code_param,
                                strcmp(e.param, "file_ids") == 0 ? "file_ids" : "memory_limit");
        ret->status = e.status;
        ret->body = openai_error_json(&e);
        if (!ret->body)
                return -ENOMEM;
        fail_stream(run, ret);
        return 0;
}

/* Runs the loop for a checked request whose messages are ready. */
static int run_loop(struct run *run, json_t *upstream, const char *sid, json_t *items, size_t skip,
                    struct chat_gateway_reply *ret)
{
        const struct chat_gateway_config *chat = run->rs->cfg.chat;
        static const char *const code_only[] = { RESPONSES_CODE_TOOL, NULL };
        static const char *const none[] = { NULL };
        struct tools_backend backend = { .ops = &ci_ops, .userdata = run };
        const struct chat_hooks hooks = {
                .on_answer = on_answer, .on_call = on_call, .on_result = on_result, .userdata = run
        };
        unsigned rounds = chat->max_rounds ?: CHAT_MAX_ROUNDS_DEFAULT;
        _cleanup_json_ json_t *response = NULL, *pending = NULL;
        struct llm_client *llm = NULL;
        struct chat_turn turn = {};
        struct llm_error err = {};
        int r;

        if (run->plan->max_tool_calls && run->plan->max_tool_calls < rounds)
                rounds = run->plan->max_tool_calls;
        r = llm_client_new(&(struct llm_config){ .base_url = chat->base_url,
                                                 .api_key = chat->api_key,
                                                 .timeout_ms = chat->timeout_ms,
                                                 .cancel = run->req->cancel },
                           &llm);
        if (r >= 0)
                r = toolbox_new(&backend,
                                &(struct toolbox_options){ .profile = chat->profile,
                                                           .session_id = *sid ? sid : NULL,
                                                           .keep_session = true,
                                                           .hub = chat->hub },
                                &run->tb);
        if (r < 0) {
                llm_client_free(llm);
                return r == -ENOMEM ? r
                                    : reply_error(ret, 500, "server_error", NULL,
                                                  "cannot set up the request: %s", strerror(-r));
        }
        if (run->req->sink) {
                _cleanup_json_ json_t *snap =
                        response_object(run, run->output, "in_progress", NULL, NULL, NULL);

                emit(run, "response.created", json_pack("{s:O}", "response", snap));
                emit(run, "response.in_progress", json_pack("{s:O}", "response", snap));
        }
        r = chat_run(llm, run->tb, upstream,
                     &(struct chat_options){
                             .max_rounds = rounds,
                             .hooks = &hooks,
                             .caller_tools = run->plan->caller_tools,
                             .tool_choice = run->plan->code_interpreter || run->plan->caller_tools
                                                    ? run->plan->tool_choice
                                                    : NULL,
                             .only_tools = run->plan->code_interpreter ? code_only : none,
                             .offer_internal = true },
                     &turn, &err);
        if (r < 0) {
                r = chat_gateway_reply_upstream_error(ret, r, &err);
                if (r >= 0)
                        fail_stream(run, ret);
        } else if (run->create_failed) {
                r = fail_container(run, ret);
        } else {
                response = finish(run, &turn, &pending);
                if (!response) {
                        r = -ENOMEM;
                } else {
                        if (run->plan->store)
                                store(run, response, items, json_object_get(upstream, "messages"),
                                      skip, pending);
                        ret->status = 200;
                        ret->body = response_view(run, response);
                        r = ret->body ? 0 : -ENOMEM;
                        if (r >= 0) {
                                const char *status =
                                        json_string_value(json_object_get(ret->body, "status"));

                                emit(run,
                                     strcmp(status, "completed") == 0 ? "response.completed"
                                                                      : "response.incomplete",
                                     json_pack("{s:O}", "response", ret->body));
                        }
                }
        }
        chat_turn_done(&turn);
        run->tb = toolbox_free(run->tb);
        llm_client_free(llm);
        return r;
}

int responses_create(struct responses *rs, const struct responses_request *req,
                     struct chat_gateway_reply *ret)
{
        const struct chat_gateway_config *chat = rs->cfg.chat;
        _cleanup_(responses_plan_done) struct responses_plan plan = {};
        _cleanup_(responses_input_info_done) struct responses_input_info info = {};
        _cleanup_json_ json_t *state = NULL, *messages = NULL, *items = NULL, *upstream = NULL;
        _cleanup_json_ json_t *output = json_array(), *cited = json_array();
        struct caller_tools_error cerr = {};
        struct run run = { .rs = rs, .req = req, .output = output, .cited = cited };
        char sid[SESSION_ID_MAX + 1];
        size_t skip = 0;
        json_t *m;
        size_t i;
        int r;

        *ret = (struct chat_gateway_reply){};
        if (!output || !cited)
                return -ENOMEM;
        if (!chat || !chat->base_url)
                return reply_error(ret, 503, "gateway_not_configured", NULL,
                                   "the Responses API needs an upstream model: start the daemon "
                                   "with --llm-base-url (or AIRLOCK_LLM_BASE_URL)");
        r = responses_plan_parse(req->body, chat->model, &plan, &cerr);
        if (r == -EINVAL)
                return reply_invalid(ret, &cerr);
        if (r < 0)
                return r;
        run.plan = &plan;
        if (plan.code_interpreter && chat->require_approval)
                return reply_error(ret, 400, "invalid_request_error", plan.code_param,
                                   "this daemon runs code only after a person approved it "
                                   "(--chat-require-approval), and the Responses API has no "
                                   "way to ask yet: use POST /v1/chat/completions, whose "
                                   "airlock.approvals do (docs/CHAT.md)");

        r = load_previous(rs, &plan, &state, ret);
        if (r != 0)
                return r < 0 ? r : 0;
        messages = json_array();
        items = json_array();
        if (!messages || !items)
                return -ENOMEM;
        if (plan.instructions) {
                if (json_array_append_new(messages, json_pack("{s:s, s:O}", "role", "system",
                                                              "content", plan.instructions)) < 0)
                        return -ENOMEM;
                skip = 1;
        }
        json_array_foreach (json_object_get(state, "messages"), i, m)
                if (json_array_append(messages, m) < 0)
                        return -ENOMEM;
        r = responses_input_convert(plan.input, messages, items, &info, &cerr);
        if (r == -EINVAL)
                return reply_invalid(ret, &cerr);
        if (r < 0)
                return r;
        r = check_answered(state, &info, ret);
        if (r == 0)
                r = check_file_ids(rs, &plan, ret);
        if (r == 0)
                r = pick_container(&run, state, &info, sid, ret);
        if (r != 0)
                return r < 0 ? r : 0;
        run.files_copied = !plan.file_ids;

        r = make_id("resp_", run.id, sizeof(run.id));
        if (r < 0)
                return r;
        run.created_at = (long long) time(NULL);
        upstream = json_deep_copy(plan.upstream);
        if (!upstream || json_object_set(upstream, "messages", messages) < 0)
                return -ENOMEM;
        return run_loop(&run, upstream, sid, items, skip, ret);
}

/* ---- stored responses -------------------------------------------------------------------- */

static int not_found(struct chat_gateway_reply *ret, const char *id)
{
        return reply_error(ret, 404, "invalid_request_error", "response_id",
                           "No response with id '%s' found (never stored: \"store\": false; "
                           "deleted; or older than %d days).",
                           id, RESPONSES_KEEP_DAYS);
}

static int store_failed(struct chat_gateway_reply *ret, int r)
{
        if (r == -ENOMEM)
                return r;
        return reply_error(ret, 500, "server_error", NULL, "cannot read the responses store: %s",
                           strerror(-r));
}

int responses_get(struct responses *rs, const char *id, bool include_outputs,
                  struct chat_gateway_reply *ret)
{
        _cleanup_json_ json_t *resp = NULL;
        struct responses_plan plan = { .include_outputs = include_outputs };
        struct run run = { .plan = &plan };
        int r;

        *ret = (struct chat_gateway_reply){};
        r = responses_store_get(rs->store, id, &resp, NULL, NULL);
        if (r == -ENOENT)
                return not_found(ret, id);
        if (r < 0)
                return store_failed(ret, r);
        ret->body = response_view(&run, resp);
        ret->status = 200;
        return ret->body ? 0 : -ENOMEM;
}

int responses_delete(struct responses *rs, const char *id, struct chat_gateway_reply *ret)
{
        int r;

        *ret = (struct chat_gateway_reply){};
        r = responses_store_delete(rs->store, id);
        if (r == -ENOENT)
                return not_found(ret, id);
        if (r < 0)
                return store_failed(ret, r);
        ret->status = 200;
        ret->body = json_pack("{s:s, s:s, s:b}", "id", id, "object", "response.deleted", "deleted",
                              true);
        return ret->body ? 0 : -ENOMEM;
}

int responses_input_items(struct responses *rs, const char *id, const struct openai_list_query *q,
                          struct chat_gateway_reply *ret)
{
        _cleanup_json_ json_t *items = NULL, *data = json_array();
        unsigned limit = q->limit ? q->limit : LIST_LIMIT_DEFAULT;
        size_t n, start = 0, i;
        int r;

        *ret = (struct chat_gateway_reply){};
        if (!data)
                return -ENOMEM;
        if (limit > LIST_LIMIT_MAX)
                return reply_error(ret, 400, "invalid_request_error", "limit",
                                   "limit must be from 1 to %d", LIST_LIMIT_MAX);
        r = responses_store_get(rs->store, id, NULL, &items, NULL);
        if (r == -ENOENT)
                return not_found(ret, id);
        if (r < 0)
                return store_failed(ret, r);
        n = json_array_size(items);
        /* The newest item first unless ascending: the same list walked from either end. */
#define AT(k) json_array_get(items, q->ascending ? (k) : n - 1 - (k))
        if (q->after) {
                for (start = 0; start < n; start++) {
                        const char *item_id = json_string_value(json_object_get(AT(start), "id"));

                        if (item_id && strcmp(item_id, q->after) == 0)
                                break;
                }
                if (start == n)
                        return reply_error(ret, 400, "invalid_request_error", "after",
                                           "after: '%s' is not an item of response %s", q->after,
                                           id);
                start++;
        }
        for (i = start; i < n && i < start + limit; i++)
                if (json_array_append(data, AT(i)) < 0)
                        return -ENOMEM;
        ret->body =
                json_pack("{s:s, s:O, s:O, s:O, s:b}", "object", "list", "data", data, "first_id",
                          json_object_get(json_array_get(data, 0), "id") ?: json_null(), "last_id",
                          json_object_get(json_array_get(data, json_array_size(data) - 1), "id")
                                  ?: json_null(),
                          "has_more", i < n);
#undef AT
        ret->status = 200;
        return ret->body ? 0 : -ENOMEM;
}
