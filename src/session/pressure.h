/* Memory pressure (docs/PERFORMANCE.md, "Fairness under load"): the manager's fairness thread
 * checks once a second how much memory is left, on the host (MemAvailable) or, with
 * --max-session-memory, under the sessions' common limit. Below --min-free-memory the daemon
 * refuses new sessions (503, Retry-After) and stops, saving them to disk, the sessions idle the
 * longest, one a second, until enough is free again: the kernel's OOM killer, which would kill
 * a busy session and lose its state, is left nothing to pick. The arithmetic is here, apart
 * from the thread, so that unit tests can check it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A session must have been idle this long to be stopped for memory. */
#define PRESSURE_IDLE_MIN_MS 10000
/* Pressure ends once free memory is this much above the threshold (no flapping). */
#define PRESSURE_HYSTERESIS_PCT 25

/* Reads MemAvailable and MemTotal (bytes) out of the text of /proc/meminfo. Returns 0 or
 * -EBADMSG. */
int pressure_parse_meminfo(const char *text, uint64_t *ret_available, uint64_t *ret_total);

/* The threshold when the operator gave none: 5% of total, at most 1 GiB. */
uint64_t pressure_default_min(uint64_t total);

/* Whether memory is short: free below min, or, when it was short already (was), not yet
 * PRESSURE_HYSTERESIS_PCT above it. */
bool pressure_is_short(uint64_t free, uint64_t min, bool was);

struct session_manager;
/* The fairness thread's step: measures, sets the manager's pressure flag (logging each change), and
 * under pressure stops the longest-idle session. */
void session_pressure_step(struct session_manager *mgr);
/* 0, or -EAGAIN with err saying that memory is short, for a create. */
struct airlock_error;
int session_pressure_check(struct session_manager *mgr, struct airlock_error *err);
