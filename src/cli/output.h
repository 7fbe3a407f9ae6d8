/* Reading code and printing an execution the way `airlock run` does; shared by `airlock run`
 * (sandbox in-process) and `airlock exec` (through the daemon) so both behave the same. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define CLI_CODE_MAX (16u * 1024u * 1024u)

/* Reads file ("-" = standard input) into a new NUL-terminated string. Returns 0, -E2BIG over
 * CLI_CODE_MAX, -EBADMSG when it holds NUL bytes, or -errno. */
int cli_read_code(const char *file, char **ret_code);

/* Where streamed output goes: fd 1 or 2, made safe when that fd is a terminal. */
struct cli_sink {
        bool tty[3];
        char carry[3][4];
        size_t carry_len[3];
};

void cli_sink_init(struct cli_sink *sink);

/* An exec_sink callback (userdata is a struct cli_sink): writes data for stream 1 or 2. */
void cli_sink_write(void *userdata, int stream, const char *data, size_t len);

/* Prints the result (the last expression's repr) to stdout and the error to stderr. */
void cli_print_result(json_t *result);

/* The program's exit status for an execution object (see docs/CLI.md). */
int cli_exit_code(json_t *result);
