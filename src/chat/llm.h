/* A client of an OpenAI-compatible Chat Completions endpoint (POST {base_url}/chat/completions,
 * non-streaming) on libcurl. It knows nothing of tools or sessions: it sends one request and
 * sorts what can go wrong into the four failures a user must tell apart (cannot connect, an
 * HTTP error with the provider's message, a timeout, an answer that is not a completion). The
 * API key only ever travels in the Authorization header: it is never logged, printed or put in
 * an error message. */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

#define LLM_REPLY_MAX (64u * 1024u * 1024u)

struct llm_client;

struct llm_config {
        const char *base_url;      /* e.g. "http://127.0.0.1:8000/v1"; copied */
        const char *api_key;       /* NULL or "" = no Authorization header; copied */
        uint64_t timeout_ms;       /* the whole request, connect included; 0 = 120 s */
        const atomic_bool *cancel; /* when it turns true, a request in flight ends at once
                                    * (-ECANCELED): the daemon shutting down; may be NULL */
};

/* Why a request failed, for the caller to show or map to an exit status or HTTP status. */
struct llm_error {
        long http_status; /* the endpoint's HTTP status for -EPROTO, else 0 */
        char msg[1024];   /* one sentence naming the endpoint, without the key */
};

/* Returns 0 or -ENOMEM (-EINVAL for an empty base_url). Free with llm_client_free(). */
int llm_client_new(const struct llm_config *cfg, struct llm_client **ret_client);

/* Accepts NULL, returns NULL; wipes the key. */
struct llm_client *llm_client_free(struct llm_client *c);

/* The base URL as configured (borrowed), for messages. */
const char *llm_client_url(const struct llm_client *c);

/* Sends request (a Chat Completions request object, borrowed) and on success stores the parsed
 * answer in *ret_response (new reference): a JSON object whose "choices" is a non-empty array
 * with an object "message" in its first element. Returns 0, or with err filled:
 * -ECONNREFUSED  the endpoint could not be reached (refused, unknown host, TLS failure...);
 * -ETIMEDOUT     no complete answer within the timeout;
 * -EPROTO        an HTTP status other than 2xx (err->http_status, and the provider's message);
 * -EBADMSG       a 2xx answer that is not JSON, or has no choices / no message;
 * -ECANCELED     config.cancel turned true;
 * -E2BIG         an answer larger than LLM_REPLY_MAX; -ENOMEM. */
int llm_complete(struct llm_client *c, json_t *request, json_t **ret_response,
                 struct llm_error *err);
