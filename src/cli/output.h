/* Reading code and printing an execution the way `airlock run` does; shared by `airlock run`
 * (sandbox in-process) and `airlock exec` (through the daemon) so both behave the same. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define CLI_CODE_MAX (16u * 1024u * 1024u)

/* Reads file ("-" = standard input) into a new buffer, NUL-terminated past its len bytes.
 * Returns 0, -E2BIG past max bytes, or -errno. */
int cli_read_file(const char *file, size_t max, char **ret_data, size_t *ret_len);

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

/* An exec_sink on_display callback (userdata is a struct cli_sink): a display the cell made,
 * as text on stdout in its place among the output (json_output_text: a DataFrame's table, a
 * Markdown display...). Figures and HTML are left to cli_outputs_save(), and so is the cell's
 * value (main) and an update of an earlier display. */
void cli_sink_display(void *userdata, const json_t *output, size_t index);

/* Prints the result (the last expression's repr) to stdout and the error to stderr. */
void cli_print_result(json_t *result);

/* The program's exit status for an execution object (see docs/CLI.md). */
int cli_exit_code(json_t *result);

/* Creates path and its missing parents (mode 0755); an existing directory is fine. Returns 0
 * or -errno. */
int cli_mkdir_p(const char *path);

/* The directory rich outputs go to when --output is not given. */
#define CLI_OUTPUT_DIR_DEFAULT "airlock-output"

/* Checks, before any code runs, that dir can take the outputs: an existing writable directory,
 * or a missing one whose closest existing ancestor is a writable directory (it is created when
 * the first output is saved). Prints "airlock PROG: --output 'DIR': <why>" and returns -errno
 * otherwise (-ENOTDIR for a file, -EACCES or -EROFS for one that cannot be written). */
int cli_output_dir_check(const char *prog, const char *dir);

/* Saves the rich outputs of an execution object (PNG, JPEG, SVG, HTML) into dir, created when
 * needed, as PREFIX-figure-N.png / .jpg / .svg and PREFIX-html-N.html (N the output's position,
 * from 1), never replacing a file: a taken name gets "-2", "-3"... before its extension. Says
 * on stderr where each went ("airlock PROG: saved figure to DIR/NAME"), and why one could not
 * be saved. Returns how many were saved. */
size_t cli_outputs_save(const char *prog, const char *dir, const char *prefix, json_t *result);
