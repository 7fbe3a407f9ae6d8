/* A human-readable reason travelling next to an errno, for callers that must tell the user more
 * than strerror() can: which file, which field, which step of a sandbox setup failed. */
#pragma once

#include <stdarg.h>

#define AIRLOCK_ERROR_MAX 512

struct airlock_error {
        char msg[AIRLOCK_ERROR_MAX];
};

/* Formats msg into err (when err is non-NULL) and returns r, which must be a -errno, so that
 * callers can write `return airlock_error_set(err, -EINVAL, "field '%s' ...", name);`. */
int airlock_error_set(struct airlock_error *err, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
