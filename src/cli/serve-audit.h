/* The audit flags of `airlock serve` (serve-audit.c, docs/AUDIT.md). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct audit;

struct serve_audit {
        const char *path; /* --audit-log; NULL = STATE_DIR/audit.log */
        bool off;         /* --audit-log off */
        uint64_t max_bytes;
        unsigned keep;
        int syslog_facility; /* -1 = off */
        bool code;
        int fail; /* enum audit_fail_mode */
};

/* The defaults: STATE_DIR/audit.log, 100M, 5 files kept, no syslog, code on, continue. */
void serve_audit_defaults(struct serve_audit *a);

/* Takes one audit flag (flag as typed, "--audit-log"). Returns 0, -EINVAL after saying on stderr
 * what is wrong, or -ENOENT for a flag that is not an audit flag. */
int serve_audit_flag(struct serve_audit *a, const char *flag, const char *value);

/* Opens the audit log the flags describe (*ret = NULL when it is off everywhere). Returns 0 or
 * -errno after saying why on stderr. */
int serve_audit_open(const struct serve_audit *a, const char *state_dir, struct audit **ret);
