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
        BODY_NETWORK, /* "none" or an object (docs/NETWORK.md) */
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

/* POST /execute (one_shot: code, language, profile, timeout, timeout_s, files) and POST
 * /v1/sessions/{id}/execute (code, language, timeout_s, timeout); both also take stdin, env
 * and cwd. Strings and objects are borrowed from *ret_root, which the caller releases with
 * json_decref(). */
#define BODY_STDIN_MAX (1u << 20)
#define BODY_CWD_MAX 4096
struct exec_body {
        const char *code;
        const char *language;   /* "python" (default), "bash", "javascript" or "typescript" */
        const char *profile;    /* one_shot only; NULL = the default profile */
        uint64_t timeout_ms;    /* 0 = the profile's (or the session's timeout_s) */
        const char *stdin_text; /* NULL = empty */
        const json_t *env;      /* NULL or an object name -> string, names checked */
        const char *cwd;        /* NULL, absolute, or relative to /work without ".." */
        const char *context;    /* session only: NULL = the session's own interpreter */
        /* one_shot only: NULL or an object "relative/path" -> base64, paths and encoding
         * checked (see exec_files_decode) */
        const json_t *files;
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
        char **code_tools;      /* NULL = the profile's */
        char **approved_tools;  /* NULL = none */
        const json_t *metadata; /* borrowed from *ret_root; NULL = none */
        uint64_t lifetime_s;    /* 0 = none */
        uint64_t timeout_ms;    /* 0 = the profile's */
        /* {"mode", "allow", "max_connections", "max_bytes"}: the profile's network narrowed
         * (docs/NETWORK.md; checked by the session layer); borrowed; NULL = the profile's */
        const json_t *network;
};

int session_body_parse(const char *buf, size_t len, json_t **ret_root, struct session_body *ret,
                       struct body_error *err);

/* PATCH /v1/sessions/{id}: stop_after_s, lifetime_s (null clears it), timeout_s, metadata
 * (an object merged in; a null value removes its key). At least one of them. The metadata
 * object is borrowed from *ret_root, which the caller releases. */
#define BODY_LIFETIME_MAX_S (30 * 86400)
struct session_patch_body {
        bool has_stop_after, has_lifetime, has_timeout;
        uint64_t stop_after_ms;
        uint64_t lifetime_s; /* 0 with has_lifetime: clear it */
        uint64_t timeout_ms;
        const json_t *metadata;
};
int session_patch_body_parse(const char *buf, size_t len, json_t **ret_root,
                             struct session_patch_body *ret, struct body_error *err);

/* The metadata filters of GET /v1/sessions: query arguments "metadata.KEY" = "VALUE", given
 * decoded. Adds key -> value to filter (a new object on the first one), refusing a key that is
 * not a metadata key or a second value for the same key. Returns 0 or -EINVAL with err. */
int body_metadata_filter_add(json_t **filter, const char *key, const char *value,
                             struct body_error *err);

/* True for a profile name as profiles are named ([a-z0-9][a-z0-9_-]{0,63}). A client never
 * gets to name a profile file by path. */
bool body_profile_name_is_valid(const char *name);

/* The cwd of an execute: non-empty, at most BODY_CWD_MAX bytes, and a relative one has no ".."
 * component (it names a place below /work). Returns 0 or -EINVAL with err filled (field
 * "cwd"). Whether it exists is the sandbox's to say. */
int body_cwd_check(const char *cwd, struct body_error *err);

/* One-shot input files: "relative/path" -> base64 (RFC 4648; whitespace skipped). */
#define BODY_FILES_MAX 1000
struct exec_file {
        const char *path; /* borrowed from the request object */
        char *data;       /* decoded, owned */
        size_t len;
};

/* Decodes the files object of a one-shot execute: each path checked as the files API checks
 * one (relative to /work, no "..", no empty component), each value a base64 string. On success
 * *ret_files is a new array of *ret_n entries (free with exec_files_free()). Returns 0,
 * -EINVAL with err naming the file (field "files"), or -ENOMEM. */
int exec_files_decode(const json_t *files, struct exec_file **ret_files, size_t *ret_n,
                      struct body_error *err);
void exec_files_free(struct exec_file *files, size_t n);
