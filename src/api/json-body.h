/* Request bodies: parsing and validating the JSON an agent sends, before anything reaches the
 * session layer. Every refusal names the field, so a client (or a model) can fix its request.
 * Pure functions on top of jansson; unit-tested in tests/unit/test-api.c. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BODY_TIMEOUT_MAX_S 3600
#define BODY_STOP_AFTER_MAX_S 86400
#define BODY_ENV_MAX 256
#define BODY_ENV_NAME_MAX 256
#define BODY_ENV_VALUE_MAX (64 * 1024)
#define BODY_PROFILE_NAME_MAX 64

/* Why a body was refused: a sentence and the field to blame ("" when none is, e.g. bad JSON).
 * field may be a key the client sent, cut to fit. */
struct body_error {
        char field[128];
        char msg[512];
};

enum body_type {
        BODY_STRING,
        BODY_NUMBER,
        BODY_OBJECT,
        BODY_ARRAY,
};

/* A field an endpoint accepts. */
struct body_field {
        const char *name;
        enum body_type type;
        bool required;
};

/* Parses buf[0..len) as one JSON object (duplicate keys and NUL in strings refused), refuses
 * keys not in fields and values of the wrong type, and checks required fields are present. An
 * empty (or whitespace-only) body is {} when empty_ok. Returns 0 with a new reference in
 * *ret_root, or -EINVAL with err filled. */
int body_parse_object(const char *buf, size_t len, bool empty_ok, const struct body_field *fields,
                      size_t n_fields, json_t **ret_root, struct body_error *err);

/* POST /execute (one_shot: code, language, profile, timeout, timeout_s) and POST
 * /v1/sessions/{id}/execute (code, language, timeout_s, timeout). Strings are borrowed from
 * *ret_root, which the caller releases with json_decref(). */
struct exec_body {
        const char *code;
        const char *language; /* "python" (default), "bash" or "javascript" */
        const char *profile;  /* one_shot only; NULL = the default profile */
        uint64_t timeout_ms;  /* 0 = the profile's */
};

int exec_body_parse(const char *buf, size_t len, bool one_shot, json_t **ret_root,
                    struct exec_body *ret, struct body_error *err);

/* POST /v1/sessions: profile, stop_after_s (or its old name idle_timeout_s), env. ret->env is a new
 * NULL-terminated vector of "NAME=value" strings (or NULL when absent); free it with strv_free().
 */
struct session_body {
        const char *profile;    /* NULL = the default profile; borrowed from *ret_root */
        uint64_t stop_after_ms; /* 0 = the daemon's default */
        char **env;
        char **code_tools;     /* NULL = the profile's */
        char **approved_tools; /* NULL = none */
};

int session_body_parse(const char *buf, size_t len, json_t **ret_root, struct session_body *ret,
                       struct body_error *err);

/* True for a profile name as profiles are named ([a-z0-9][a-z0-9_-]{0,63}). A client never
 * gets to name a profile file by path. */
bool body_profile_name_is_valid(const char *name);
