/* Metrics: the daemon's counters and histograms, and the writer of the Prometheus text
 * exposition format (version 0.0.4) that GET /metrics serves (docs/METRICS.md). There is one
 * registry per process, in static storage, so that any module can count without a handle.
 *
 * Cost: recording is lock-free and allocation-free (relaxed atomics on precomputed slots), so
 * it may sit on the hot path (create, execute, every HTTP request). Only registering a new
 * profile name takes a lock, once per name. Scraping reads the atomics without stopping the
 * writers: a histogram's buckets, sum and count are each exact, but may be a few events apart
 * from one another while executions run. Metrics depends only on base. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The outcomes of an execution (DESIGN.md section 4), as its "status". */
enum metrics_exec_status {
        METRICS_EXEC_OK,
        METRICS_EXEC_ERROR,
        METRICS_EXEC_TIMEOUT,
        METRICS_EXEC_OOM,
        METRICS_EXEC_KILLED,
        METRICS_EXEC_OUTPUT_LIMIT,
        METRICS_EXEC_STATUS_COUNT,
};

/* The status for the string of an execution object; an unknown or NULL one is "killed" (the
 * sandbox stopped answering), which is what session.h reports for it. */
enum metrics_exec_status metrics_exec_status_from_string(const char *status);

enum metrics_zygote_reason {
        METRICS_ZYGOTE_DIED,    /* it was found dead and started again */
        METRICS_ZYGOTE_ROTATED, /* replaced on schedule (--zygote-max-sessions, --zygote-max-age) */
        METRICS_ZYGOTE_REASON_COUNT,
};

/* Where an internal tool was called from, and how it ended. */
enum metrics_tool_via {
        METRICS_TOOL_INTERNAL, /* /mcp, the chat gateway, /v1/responses (tools/internal.c) */
        METRICS_TOOL_CODEMODE, /* a session's code, through airlock_tools (Code Mode) */
        METRICS_TOOL_VIA_COUNT,
};
enum metrics_tool_outcome {
        METRICS_TOOL_OK,
        METRICS_TOOL_ERROR,  /* the tool ran and said isError */
        METRICS_TOOL_FAILED, /* no answer: unknown tool, bad arguments, server down, timeout */
        METRICS_TOOL_OUTCOME_COUNT,
};

/* The counters of one profile. Handles live as long as the process. */
struct metrics_profile;

/* At most this many profile names get their own label; later ones share the label "_other",
 * so a misconfigured profile directory cannot grow the scrape without bound. */
#define METRICS_PROFILES_MAX 64
#define METRICS_PROFILE_OTHER "_other"

/* The handle of profile name, registering it on first use (a lock, once per name; lookups
 * after that are lock-free). Never NULL: past METRICS_PROFILES_MAX names, or without memory,
 * the shared "_other" one. */
struct metrics_profile *metrics_profile(const char *name);

/* Recording: lock-free, no allocation, callable from any thread. p may be NULL (ignored). */
void metrics_execution(struct metrics_profile *p, enum metrics_exec_status status,
                       uint64_t duration_ns);
void metrics_session_created(struct metrics_profile *p, uint64_t duration_ns);
void metrics_zygote_restart(struct metrics_profile *p, enum metrics_zygote_reason reason);
void metrics_oom_kill(struct metrics_profile *p);
void metrics_tool_call(enum metrics_tool_via via, enum metrics_tool_outcome outcome);
/* A connection through the egress proxy ended (bytes moved) or was refused. */
void metrics_egress(struct metrics_profile *p, bool refused, uint64_t bytes_in, uint64_t bytes_out);
/* A line of the audit log could not be written (src/audit/). */
void metrics_audit_failure(void);

/* HTTP requests by route template. The server registers its route table once (methods[i] and
 * patterns[i], which must outlive the process: static strings); later calls are ignored and
 * return -EALREADY. Returns 0 or -ENOMEM. */
int metrics_http_register(const char *const *methods, const char *const *patterns, size_t n);
/* One answered request: route is the index in the registered table, or METRICS_HTTP_UNMATCHED
 * when none matched (404s, requests refused before routing); status is the HTTP status sent
 * (0 when none was). */
#define METRICS_HTTP_UNMATCHED SIZE_MAX
void metrics_http_request(size_t route, unsigned status);

/* Writing the exposition format. Each writes to f; errors show in ferror(f). */

/* "# HELP name help\n# TYPE name type\n", help escaped (backslash, newline). */
void metrics_write_family(FILE *f, const char *name, const char *type, const char *help);

/* One sample line: name{k1="v1",...} value. labels is NULL or a NULL-terminated list of
 * alternating names and values; values are escaped (backslash, double quote, newline). The
 * value is written as an integer when it is one, else with full precision; NaN as "NaN",
 * infinities as "+Inf" and "-Inf". */
void metrics_write_sample(FILE *f, const char *name, const char *const *labels, double value);

/* Escapes a label value (backslash, double quote, newline) onto f. */
void metrics_write_label_value(FILE *f, const char *value);

/* Writes every family of the registry: executions, creates, zygote restarts, OOM kills, tool
 * calls, HTTP requests, audit failures, build info and the process's own resources
 * (process_cpu_seconds_total, process_resident_memory_bytes, ...). */
void metrics_write_registry(FILE *f);

/* The histogram buckets' upper bounds, in seconds, shared by every latency histogram. */
extern const double metrics_latency_bounds[];
extern const size_t metrics_latency_n_bounds;

/* Tests only: zeroes every counter (registered names and routes stay). */
void metrics_reset_for_tests(void);
