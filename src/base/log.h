/* One line per event as key=value pairs on stderr. Library modules stay quiet (debug at most);
 * the code that decides what to do about an error logs it once. */
#pragma once

#include <stdarg.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Sets the lowest level that is printed; LOG_INFO by default, AIRLOCK_LOG=debug lowers it. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Prints `level=<level> msg="<formatted>"` and, with r != 0, `error="<strerror(-r)>"`.
 * Returns r so that callers can `return log_error_errno(r, ...)`. */
int log_msg(enum log_level level, int r, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#define log_debug(...) log_msg(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, 0, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, 0, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, 0, __VA_ARGS__)
#define log_warn_errno(r, ...) log_msg(LOG_WARN, (r), __VA_ARGS__)
#define log_error_errno(r, ...) log_msg(LOG_ERROR, (r), __VA_ARGS__)
