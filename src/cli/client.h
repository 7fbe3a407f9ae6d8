/* The CLI's HTTP client for a running daemon (libcurl): finds the URL and the token by itself,
 * streams ndjson replies line by line, and turns failures into one clear sentence. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define CLI_DEFAULT_URL "http://127.0.0.1:8080"

struct cli_client;

/* url: --url, else $AIRLOCK_URL, else CLI_DEFAULT_URL; "unix:/PATH" talks over a unix socket.
 * state_dir: where to look for the token file when $AIRLOCK_TOKEN is not set (NULL = the
 * default state directory, then /var/lib/airlock). prog names the command in messages.
 * Returns 0, or -errno after printing why. Free with cli_client_free(). */
int cli_client_new(const char *prog, const char *url, const char *state_dir,
                   struct cli_client **ret_client);
struct cli_client *cli_client_free(struct cli_client *c);

/* Called for each line of a 200 ndjson reply, without the newline (NUL-terminated). */
typedef void (*cli_line_fn)(void *userdata, const char *line, size_t len);

struct cli_response {
        long status;
        char *body; /* the reply body (not for a streamed 200), NUL-terminated; caller frees */
        size_t len;
};

/* Sends one request. With on_line, asks for application/x-ndjson and feeds a 200 reply to it
 * as it arrives. Returns 0 with *ret filled (any HTTP status), or -errno after printing why
 * the daemon could not be reached. */
int cli_client_request(struct cli_client *c, const char *method, const char *path, const char *body,
                       size_t body_len, cli_line_fn on_line, void *userdata,
                       struct cli_response *ret);

/* Prints "airlock <prog>: <the reply's error>" for a failed reply, with a hint for 401. */
void cli_client_print_error(struct cli_client *c, const struct cli_response *resp);
