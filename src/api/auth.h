/* Who may talk to the daemon: the bearer token (from AIRLOCK_TOKEN or a 0600 file in the state
 * directory, created on first start), and the Host/Origin allow-list that stops a web page from
 * reaching a loopback daemon through DNS rebinding. Pure functions apart from the token file;
 * unit-tested in tests/unit/test-api.c. */
#pragma once

#include "base/error.h"

#include <stdbool.h>
#include <stddef.h>

#define TOKEN_FILE "token"
#define TOKEN_BYTES 32 /* random bytes, written as 64 hex characters */
#define TOKEN_MAX 4096 /* longest token accepted from a file or the environment */
#define HOST_ALLOW_MAX 64

/* The default state directory: /var/lib/airlock for root, else $XDG_STATE_HOME/airlock or
 * ~/.local/state/airlock. Returns 0 with a new string (caller frees), or -ENOENT when neither
 * XDG_STATE_HOME nor HOME is usable. */
int api_state_dir_default(char **ret_dir);

/* Creates dir and its missing parents, each mode 0700 (as `mkdir -p -m 0700`). Returns 0 or
 * -errno with err set. */
int api_state_dir_make(const char *dir, struct airlock_error *err);

/* The daemon's token: reads <state_dir>/token, or creates it (O_CREAT|O_EXCL, mode 0600, 32
 * bytes from getrandom() as hex, fsync'd) when missing, setting *ret_created. A file that is
 * not a regular file, has group or other permission bits, or is empty is refused with -EPERM
 * or -EINVAL and a message saying how to fix it. Caller frees *ret_token. */
int api_token_load_or_create(const char *state_dir, char **ret_token, bool *ret_created,
                             struct airlock_error *err);

/* The same for another secret of the daemon, <state_dir>/<file> (e.g. METRICS_TOKEN_FILE), with
 * the same checks. */
#define METRICS_TOKEN_FILE "metrics-token"
int api_token_file_load_or_create(const char *state_dir, const char *file, char **ret_token,
                                  bool *ret_created, struct airlock_error *err);

/* The client's token: $AIRLOCK_TOKEN if set and not empty, else the first readable token file
 * among dirs (NULL-terminated). Returns 0 with a new string, -ENOENT when none was found, or
 * -errno with err naming the file. */
int api_token_find(const char *const *dirs, char **ret_token, struct airlock_error *err);

/* Compares a token in time that depends only on the length of expected, never on where the
 * first difference is. */
bool api_token_equal(const char *expected, const char *given, size_t given_len);

/* Extracts the token from an Authorization header value "Bearer <token>" (scheme
 * case-insensitive, spaces around the token ignored). Returns 0 with a pointer into value,
 * -EINVAL for another scheme or an empty token. */
int api_bearer_parse(const char *value, const char **ret_token, size_t *ret_len);

/* Host values the daemon answers to. */
struct host_allow {
        char *hosts[HOST_ALLOW_MAX]; /* lowercase "host:port" or "host" */
        size_t n;
};

/* Builds the list for a TCP listener on listen_host (as written in --listen, IPv6 with or
 * without brackets) and port: the listen address, localhost, 127.0.0.1 and [::1] with port
 * (and without on port 80), plus every extra value; an extra value without a port is accepted
 * both bare and with the listening port. Returns 0,
 * -E2BIG past HOST_ALLOW_MAX, -EINVAL for an empty extra value, or -ENOMEM. */
int host_allow_init(struct host_allow *ha, const char *listen_host, unsigned port,
                    const char *const *extra);
void host_allow_done(struct host_allow *ha);

/* True when value (a Host header) is on the list, case-insensitively. */
bool host_allow_check_host(const struct host_allow *ha, const char *value);

/* True when value (an Origin header) is http:// or https:// followed by an allowed host, with
 * nothing after it but an optional '/'. */
bool host_allow_check_origin(const struct host_allow *ha, const char *value);
