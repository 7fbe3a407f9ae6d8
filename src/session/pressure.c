/* Memory pressure: measure, refuse creates, stop idle sessions (pressure.h). */
#include "pressure.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "session-table.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

static int meminfo_field(const char *text, const char *key, uint64_t *ret)
{
        size_t klen = strlen(key);

        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
                char *end;
                unsigned long long kb;

                if (strncmp(p, key, klen) != 0 || p[klen] != ':')
                        continue;
                p += klen + 1;
                while (*p == ' ' || *p == '\t')
                        p++;
                if (*p < '0' || *p > '9')
                        return -EBADMSG;
                errno = 0;
                kb = strtoull(p, &end, 10);
                if (errno || strncmp(end, " kB", 3) != 0 || kb > UINT64_MAX / 1024)
                        return -EBADMSG;
                *ret = (uint64_t) kb * 1024;
                return 0;
        }
        return -EBADMSG;
}

int pressure_parse_meminfo(const char *text, uint64_t *ret_available, uint64_t *ret_total)
{
        uint64_t avail, total;

        if (meminfo_field(text, "MemAvailable", &avail) < 0 ||
            meminfo_field(text, "MemTotal", &total) < 0)
                return -EBADMSG;
        *ret_available = avail;
        *ret_total = total;
        return 0;
}

uint64_t pressure_default_min(uint64_t total)
{
        uint64_t min = total / 20;

        return min > (1ULL << 30) ? 1ULL << 30 : min;
}

bool pressure_is_short(uint64_t free, uint64_t min, bool was)
{
        if (free < min)
                return true;
        return was && free < min + min * PRESSURE_HYSTERESIS_PCT / 100;
}

/* Free memory and the threshold: under the scope's limit when it has one, else the host's. */
static int measure(struct session_manager *mgr, uint64_t *ret_free, uint64_t *ret_min)
{
        uint64_t limit = 0, used = 0, avail, total;
        char buf[4096];
        ssize_t n;

        if (scope_memory_limit(&mgr->scope, &limit) >= 0 && limit > 0 &&
            scope_memory_usage(&mgr->scope, &used) >= 0) {
                *ret_free = used < limit ? limit - used : 0;
                total = limit;
        } else {
                n = read_small_file_at(AT_FDCWD, "/proc/meminfo", buf, sizeof(buf));
                if (n < 0)
                        return (int) n;
                if (pressure_parse_meminfo(buf, &avail, &total) < 0)
                        return -EBADMSG;
                *ret_free = avail;
        }
        *ret_min =
                mgr->cfg.min_free_memory ? mgr->cfg.min_free_memory : pressure_default_min(total);
        return 0;
}

/* The live session idle the longest (at least PRESSURE_IDLE_MIN_MS), that can be stopped. */
static struct session *longest_idle(struct session_manager *mgr, uint64_t now)
{
        struct session *best = NULL;

        for (unsigned i = 0; i < mgr->n_sessions; i++) {
                struct session *s = mgr->sessions[i];
                if (s->phase != PHASE_LIVE || s->busy || s->ephemeral || !s->sb)
                        continue;
                if (now - s->last_used_ns < PRESSURE_IDLE_MIN_MS * 1000000ULL)
                        continue;
                if (!best || s->last_used_ns < best->last_used_ns)
                        best = s;
        }
        return best ? session_ref(best) : NULL;
}

void session_pressure_step(struct session_manager *mgr)
{
        struct airlock_error err = { { 0 } };
        uint64_t free = 0, min = 0;
        struct session *s;
        bool was, now_short;

        if (mgr->cfg.min_free_memory == SESSION_MEMORY_PRESSURE_OFF)
                return;
        if (measure(mgr, &free, &min) < 0)
                return;
        was = atomic_load(&mgr->memory_short);
        now_short = pressure_is_short(free, min, was);
        atomic_store(&mgr->memory_free, free);
        atomic_store(&mgr->memory_min, min);
        atomic_store(&mgr->memory_short, now_short);
        if (now_short != was) {
                if (now_short)
                        log_warn("msg=\"memory is short: %.0f MiB free, below %.0f MiB "
                                 "(--min-free-memory): new sessions are refused and idle ones "
                                 "stopped, oldest first\"",
                                 (double) free / MIB, (double) min / MIB);
                else
                        log_info("msg=\"memory is no longer short: %.0f MiB free\"",
                                 (double) free / MIB);
        }
        if (!now_short || !mgr->store)
                return;
        pthread_mutex_lock(&mgr->lock);
        s = longest_idle(mgr, now_ns());
        pthread_mutex_unlock(&mgr->lock);
        if (!s)
                return;
        if (lifecycle_stop(s, false, &err) < 0)
                log_error("session=%s msg=\"memory is short, and the idle session could not be "
                          "stopped: %s\"",
                          s->id, err.msg);
        else
                log_warn("session=%s msg=\"stopped and saved: memory is short (%.0f MiB free, "
                         "below %.0f MiB)\"",
                         s->id, (double) free / MIB, (double) min / MIB);
        session_unref(s);
}

int session_pressure_check(struct session_manager *mgr, struct airlock_error *err)
{
        if (!atomic_load(&mgr->memory_short))
                return 0;
        return airlock_error_set(err, -EAGAIN,
                                 "memory is short on this node (%.0f MiB free, below the %.0f "
                                 "MiB it keeps free, --min-free-memory): no new session until "
                                 "sessions end or stop; idle ones are being stopped and saved. "
                                 "Try again later",
                                 (double) atomic_load(&mgr->memory_free) / MIB,
                                 (double) atomic_load(&mgr->memory_min) / MIB);
}
