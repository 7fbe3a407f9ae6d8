/* Usage errors, worded alike by every subcommand (cli.h). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "airlock %s: ", cmd);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nTry 'airlock %s --help'.\n", cmd);
        return EXIT_USAGE;
}
