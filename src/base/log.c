/* Structured logging for the daemon and the CLI; see log.h. */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum log_level min_level = LOG_INFO;
static int level_from_env = -1;

void log_set_level(enum log_level level)
{
        min_level = level;
        level_from_env = 0;
}

enum log_level log_get_level(void)
{
        if (level_from_env < 0) {
                const char *e = getenv("AIRLOCK_LOG");
                level_from_env = 0;
                if (e && strcmp(e, "debug") == 0)
                        min_level = LOG_DEBUG;
                else if (e && strcmp(e, "warn") == 0)
                        min_level = LOG_WARN;
                else if (e && strcmp(e, "error") == 0)
                        min_level = LOG_ERROR;
        }
        return min_level;
}

int log_msg(enum log_level level, int r, const char *fmt, ...)
{
        static const char *const names[] = { "debug", "info", "warn", "error" };
        char buf[1024];
        va_list ap;

        if (level < log_get_level())
                return r;

        va_start(ap, fmt);
        (void) vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);

        /* A message that brings its own key=value fields (session=..., msg="...") is printed
         * as it is; a plain sentence becomes msg="...". */
        if (strstr(buf, "msg=\""))
                fprintf(stderr, "level=%s %s", names[level], buf);
        else
                fprintf(stderr, "level=%s msg=\"%s\"", names[level], buf);
        if (r != 0)
                fprintf(stderr, " error=\"%s\"", strerror(r < 0 ? -r : r));
        fputc('\n', stderr);
        return r;
}
