/* See error.h. */
#include "error.h"

#include <stdio.h>

int airlock_error_set(struct airlock_error *err, int r, const char *fmt, ...)
{
        va_list ap;

        if (!err)
                return r;
        va_start(ap, fmt);
        (void) vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        return r;
}
