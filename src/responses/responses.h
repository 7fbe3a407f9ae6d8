/* The Responses API (POST /v1/responses and its GET, DELETE and input_items), the way OpenAI's
 * hosted code interpreter is driven: a Responses request in, the tool loop run here against the
 * configured upstream Chat Completions model (chat.h) with run_python standing for the
 * code_interpreter tool, the code run in a container (openai.h: an airlock session) made when the
 * model first calls the tool, and a Response object out: code_interpreter_call items, the
 * client's function calls as function_call items, the answer as a message item citing the files
 * the code made. Responses are stored (store.h) so that previous_response_id continues
 * the conversation in the same container, also after a restart. No HTTP here: the route is
 * src/api/routes-responses.c; docs/RESPONSES.md is what a client sees. */
#pragma once

#include "base/error.h"
#include "chat/gateway.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

struct openai;
struct openai_list_query;
struct responses;
struct session_manager;

/* Where the images code made are saved in its container (under /mnt/data). */
#define RESPONSES_IMAGE_DIR ".airlock-images"

struct responses_config {
        /* The upstream (base_url NULL = off: 503), the default model, timeout, round cap,
         * approval policy and the profile of new containers; borrowed, must outlive rs. */
        const struct chat_gateway_config *chat;
        struct session_manager *mgr; /* borrowed */
        struct openai *openai;       /* containers and their files; borrowed */
        const char *state_dir;       /* where responses.db goes; NULL = memory only */
};

/* Opens the store. Returns 0 or -errno with err set. Free with responses_free(). */
int responses_new(const struct responses_config *cfg, struct responses **ret_rs,
                  struct airlock_error *err);

/* Accepts NULL, returns NULL. */
struct responses *responses_free(struct responses *rs);

/* Where a streaming request's Server-Sent Events go, in order. */
struct responses_sink {
        /* One event: its type and the event object (borrowed; "type" and "sequence_number"
         * set). */
        void (*event)(void *userdata, const char *type, json_t *event);
        /* Told once, when the upstream has answered for the first time: a failure before this
         * is answered as an ordinary error (the stream has not started), a failure after it as
         * a "response.failed" event. */
        void (*started)(void *userdata);
        void *userdata;
};

struct responses_request {
        json_t *body;              /* the client's JSON (borrowed) */
        const char *base_url;      /* "http://host:port" of this daemon, for the URLs of images;
                                    * NULL = relative URLs */
        const atomic_bool *cancel; /* turning true ends an upstream request in flight (503) */
        const struct responses_sink *sink; /* "stream": true; NULL = answer in one piece */
};

/* Whether body asks for "stream": true (the route picks the reply's shape on it). */
bool responses_wants_stream(json_t *body);

/* POST /v1/responses. Always fills *ret (a Response object with status 200, or an error in
 * OpenAI's shape; release it with chat_gateway_reply_done()) and returns 0, or -ENOMEM. With a
 * sink, the events went to the sink as well (ret->body is the final Response, or the error:
 * the route sends it as an ordinary reply when the sink was never told "started"). */
int responses_create(struct responses *rs, const struct responses_request *req,
                     struct chat_gateway_reply *ret);

/* GET /v1/responses/{id}: the stored Response; include_outputs keeps the code_interpreter_call
 * items' outputs (?include[]=code_interpreter_call.outputs). 404 when unknown. */
int responses_get(struct responses *rs, const char *id, bool include_outputs,
                  struct chat_gateway_reply *ret);

/* DELETE /v1/responses/{id}: {id, object: "response.deleted", deleted: true}, or 404. */
int responses_delete(struct responses *rs, const char *id, struct chat_gateway_reply *ret);

/* GET /v1/responses/{id}/input_items: a page of at most q->limit (1..100, 0 = 20) items after
 * q->after, newest first unless q->ascending, as {object: "list", data, first_id, last_id,
 * has_more}. 404 for an unknown response, 400 for a limit over 100 (param "limit") or an after
 * that is not one of its items (param "after"). */
int responses_input_items(struct responses *rs, const char *id, const struct openai_list_query *q,
                          struct chat_gateway_reply *ret);
