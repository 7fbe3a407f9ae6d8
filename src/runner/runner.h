/* The runner's parts, shared between runner.c (protocol loop, CPython) and shell.c (bash). */
#pragma once

#include <jansson.h>

/* Runs code with `bash -c` inside the sandbox, output going to the runner's own fds 1 and 2.
 * Returns a new result object {"status","exit_code","error"} (caller decrefs). */
json_t *shell_run(const char *code);
