/* The audit flags of `airlock serve` (docs/AUDIT.md): parsed here so that serve.c only routes
 * them, and turned into the audit log the daemon writes. */
#include "serve-audit.h"

#include "audit/audit.h"
#include "base/cleanup.h"
#include "base/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

static const struct {
        const char *name;
        int facility;
} facilities[] = {
        { "auth", LOG_AUTH },     { "authpriv", LOG_AUTHPRIV }, { "daemon", LOG_DAEMON },
        { "user", LOG_USER },     { "local0", LOG_LOCAL0 },     { "local1", LOG_LOCAL1 },
        { "local2", LOG_LOCAL2 }, { "local3", LOG_LOCAL3 },     { "local4", LOG_LOCAL4 },
        { "local5", LOG_LOCAL5 }, { "local6", LOG_LOCAL6 },     { "local7", LOG_LOCAL7 },
};

void serve_audit_defaults(struct serve_audit *a)
{
        *a = (struct serve_audit){ .max_bytes = 100ULL << 20,
                                   .keep = 5,
                                   .syslog_facility = -1,
                                   .code = true,
                                   .fail = AUDIT_FAIL_CONTINUE };
}

int serve_audit_flag(struct serve_audit *a, const char *flag, const char *value)
{
        char *end;
        unsigned long n;

        if (strcmp(flag, "--audit-log") == 0) {
                if (!*value) {
                        fprintf(stderr, "airlock serve: --audit-log: a path, or 'off'\n");
                        return -EINVAL;
                }
                a->path = value;
                a->off = strcmp(value, "off") == 0;
                return 0;
        }
        if (strcmp(flag, "--audit-max-size") == 0) {
                if (strcmp(value, "0") == 0) {
                        a->max_bytes = 0;
                        return 0;
                }
                if (parse_size(value, &a->max_bytes) < 0 || a->max_bytes < 4096) {
                        fprintf(stderr,
                                "airlock serve: --audit-max-size '%s' is not 0 (never rotate) or "
                                "a size of at least 4K (e.g. 100M)\n",
                                value);
                        return -EINVAL;
                }
                return 0;
        }
        if (strcmp(flag, "--audit-keep") == 0) {
                errno = 0;
                n = strtoul(value, &end, 10);
                if (!*value || *end || errno || value[0] == '-' || n > 1000) {
                        fprintf(stderr,
                                "airlock serve: --audit-keep '%s' is not a number from 0 to "
                                "1000\n",
                                value);
                        return -EINVAL;
                }
                a->keep = (unsigned) n;
                return 0;
        }
        if (strcmp(flag, "--audit-syslog") == 0) {
                if (strcmp(value, "off") == 0) {
                        a->syslog_facility = -1;
                        return 0;
                }
                for (size_t i = 0; i < ELEMENTSOF(facilities); i++)
                        if (strcmp(value, facilities[i].name) == 0) {
                                a->syslog_facility = facilities[i].facility;
                                return 0;
                        }
                fprintf(stderr,
                        "airlock serve: --audit-syslog '%s' is not a facility: auth, authpriv, "
                        "daemon, user, local0 .. local7, or off\n",
                        value);
                return -EINVAL;
        }
        if (strcmp(flag, "--audit-code") == 0) {
                if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0) {
                        fprintf(stderr, "airlock serve: --audit-code '%s' is not on or off\n",
                                value);
                        return -EINVAL;
                }
                a->code = strcmp(value, "on") == 0;
                return 0;
        }
        if (strcmp(flag, "--audit-fail") == 0) {
                if (strcmp(value, "continue") != 0 && strcmp(value, "refuse") != 0) {
                        fprintf(stderr,
                                "airlock serve: --audit-fail '%s' is not continue or refuse\n",
                                value);
                        return -EINVAL;
                }
                a->fail = strcmp(value, "refuse") == 0 ? AUDIT_FAIL_REFUSE : AUDIT_FAIL_CONTINUE;
                return 0;
        }
        return -ENOENT;
}

int serve_audit_open(const struct serve_audit *a, const char *state_dir, struct audit **ret)
{
        struct airlock_error err = { { 0 } };
        char path[4096];
        int r;

        if (a->off && a->syslog_facility < 0) {
                *ret = NULL;
                return 0;
        }
        (void) snprintf(path, sizeof(path), "%s/audit.log", state_dir);
        r = audit_new(&(struct audit_config){ .path = a->off    ? NULL
                                                      : a->path ? a->path
                                                                : path,
                                              .max_bytes = a->max_bytes,
                                              .keep = a->keep,
                                              .syslog_facility = a->syslog_facility,
                                              .code = a->code,
                                              .fail = a->fail },
                      ret, &err);
        if (r < 0) {
                fprintf(stderr, "airlock serve: %s (--audit-log PATH, or --audit-log off)\n",
                        err.msg[0] ? err.msg : strerror(-r));
                return r;
        }
        return 0;
}
