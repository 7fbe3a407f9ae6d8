/* The metrics registry (metrics.h): static slots of relaxed atomics that the hot path bumps,
 * and the scrape that turns them into the Prometheus text format. Histograms keep one counter
 * per bucket (not cumulative) and the scrape sums them, so recording costs one bucket search
 * and two atomic adds, and a scrape's +Inf bucket always equals its _count. */
#include "metrics.h"

#include "config.h"

#include "base/json-util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef atomic_uint_fast64_t counter_t;

/* Seconds; chosen around DESIGN.md's targets (a hot execute under 1 ms, a create under
 * 10 ms) up to the longest cell a profile allows by default. */
const double metrics_latency_bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                          0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                          5,      10,    30,     60,    120,  300 };
#define N_BOUNDS (sizeof(metrics_latency_bounds) / sizeof(metrics_latency_bounds[0]))
const size_t metrics_latency_n_bounds = N_BOUNDS;

/* The same bounds in nanoseconds, so that recording compares integers. */
static const uint64_t bounds_ns[N_BOUNDS] = {
        500000ull,      1000000ull,      2500000ull,      5000000ull,     10000000ull,
        25000000ull,    50000000ull,     100000000ull,    250000000ull,   500000000ull,
        1000000000ull,  2500000000ull,   5000000000ull,   10000000000ull, 30000000000ull,
        60000000000ull, 120000000000ull, 300000000000ull,
};

struct histogram {
        counter_t buckets[N_BOUNDS + 1]; /* the last one is past every bound (+Inf only) */
        counter_t sum_ns;
};

#define PROFILE_NAME_MAX 64

struct metrics_profile {
        char name[PROFILE_NAME_MAX];
        struct histogram exec[METRICS_EXEC_STATUS_COUNT];
        struct histogram create;
        counter_t zygote_restarts[METRICS_ZYGOTE_REASON_COUNT];
        counter_t oom_kills;
        counter_t egress[2];       /* connections: [0] made, [1] refused */
        counter_t egress_bytes[2]; /* [0] in (to the sandbox), [1] out */
};

static const char *const exec_status_names[METRICS_EXEC_STATUS_COUNT] = {
        [METRICS_EXEC_OK] = "ok",           [METRICS_EXEC_ERROR] = "error",
        [METRICS_EXEC_TIMEOUT] = "timeout", [METRICS_EXEC_OOM] = "oom",
        [METRICS_EXEC_KILLED] = "killed",   [METRICS_EXEC_OUTPUT_LIMIT] = "output_limit",
};
static const char *const zygote_reason_names[METRICS_ZYGOTE_REASON_COUNT] = {
        [METRICS_ZYGOTE_DIED] = "died",
        [METRICS_ZYGOTE_ROTATED] = "rotated",
};
static const char *const tool_via_names[METRICS_TOOL_VIA_COUNT] = {
        [METRICS_TOOL_INTERNAL] = "internal",
        [METRICS_TOOL_CODEMODE] = "codemode",
};
static const char *const tool_outcome_names[METRICS_TOOL_OUTCOME_COUNT] = {
        [METRICS_TOOL_OK] = "ok",
        [METRICS_TOOL_ERROR] = "tool_error",
        [METRICS_TOOL_FAILED] = "failed",
};

/* HTTP statuses that get their own label value; any other is counted as "other". */
static const unsigned http_statuses[] = { 200, 201, 202, 204, 206, 301, 302, 304, 307, 308, 400,
                                          401, 403, 404, 405, 406, 408, 409, 410, 411, 412, 413,
                                          414, 415, 416, 422, 429, 431, 500, 501, 502, 503, 504 };
#define N_HTTP_STATUSES (sizeof(http_statuses) / sizeof(http_statuses[0]))
#define HTTP_SLOTS (N_HTTP_STATUSES + 1) /* + "other" */

static struct {
        pthread_mutex_t lock; /* registering a profile or the route table */
        struct metrics_profile profiles[METRICS_PROFILES_MAX];
        atomic_size_t n_profiles; /* published after the slot's name is written */
        struct metrics_profile other;
        counter_t tool_calls[METRICS_TOOL_VIA_COUNT][METRICS_TOOL_OUTCOME_COUNT];
        counter_t audit_failures;
        /* (n_routes + 1) * HTTP_SLOTS counters, the last row for unmatched requests; NULL
         * until the server registers its table. */
        counter_t *_Atomic http;
        const char *const *http_methods, *const *http_patterns;
        size_t n_routes;
} reg = {
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .other = { .name = METRICS_PROFILE_OTHER },
};

enum metrics_exec_status metrics_exec_status_from_string(const char *status)
{
        for (size_t i = 0; status && i < METRICS_EXEC_STATUS_COUNT; i++)
                if (strcmp(status, exec_status_names[i]) == 0)
                        return (enum metrics_exec_status) i;
        return METRICS_EXEC_KILLED;
}

static struct metrics_profile *profile_find(const char *name, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(reg.profiles[i].name, name) == 0)
                        return &reg.profiles[i];
        return NULL;
}

struct metrics_profile *metrics_profile(const char *name)
{
        struct metrics_profile *p;
        size_t n;

        if (!name || strlen(name) >= PROFILE_NAME_MAX)
                return &reg.other;
        p = profile_find(name, atomic_load_explicit(&reg.n_profiles, memory_order_acquire));
        if (p)
                return p;
        pthread_mutex_lock(&reg.lock);
        n = atomic_load_explicit(&reg.n_profiles, memory_order_relaxed);
        p = profile_find(name, n);
        if (!p && n < METRICS_PROFILES_MAX) {
                p = &reg.profiles[n];
                strcpy(p->name, name);
                atomic_store_explicit(&reg.n_profiles, n + 1, memory_order_release);
        }
        pthread_mutex_unlock(&reg.lock);
        return p ? p : &reg.other;
}

static inline void count(counter_t *c)
{
        atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static void histogram_observe(struct histogram *h, uint64_t ns)
{
        size_t i = 0;

        while (i < N_BOUNDS && ns > bounds_ns[i])
                i++;
        count(&h->buckets[i]);
        atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void metrics_execution(struct metrics_profile *p, enum metrics_exec_status status,
                       uint64_t duration_ns)
{
        if (p && status < METRICS_EXEC_STATUS_COUNT)
                histogram_observe(&p->exec[status], duration_ns);
}

void metrics_session_created(struct metrics_profile *p, uint64_t duration_ns)
{
        if (p)
                histogram_observe(&p->create, duration_ns);
}

void metrics_zygote_restart(struct metrics_profile *p, enum metrics_zygote_reason reason)
{
        if (p && reason < METRICS_ZYGOTE_REASON_COUNT)
                count(&p->zygote_restarts[reason]);
}

void metrics_oom_kill(struct metrics_profile *p)
{
        if (p)
                count(&p->oom_kills);
}

void metrics_egress(struct metrics_profile *p, bool refused, uint64_t bytes_in, uint64_t bytes_out)
{
        if (!p)
                return;
        count(&p->egress[refused]);
        atomic_fetch_add_explicit(&p->egress_bytes[0], bytes_in, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->egress_bytes[1], bytes_out, memory_order_relaxed);
}

void metrics_tool_call(enum metrics_tool_via via, enum metrics_tool_outcome outcome)
{
        if (via < METRICS_TOOL_VIA_COUNT && outcome < METRICS_TOOL_OUTCOME_COUNT)
                count(&reg.tool_calls[via][outcome]);
}

void metrics_audit_failure(void)
{
        count(&reg.audit_failures);
}

int metrics_http_register(const char *const *methods, const char *const *patterns, size_t n)
{
        counter_t *http;
        int r = 0;

        pthread_mutex_lock(&reg.lock);
        if (atomic_load(&reg.http)) {
                r = -EALREADY;
        } else {
                http = calloc((n + 1) * HTTP_SLOTS, sizeof(*http));
                if (!http) {
                        r = -ENOMEM;
                } else {
                        reg.http_methods = methods;
                        reg.http_patterns = patterns;
                        reg.n_routes = n;
                        atomic_store_explicit(&reg.http, http, memory_order_release);
                }
        }
        pthread_mutex_unlock(&reg.lock);
        return r;
}

static size_t http_slot(unsigned status)
{
        for (size_t i = 0; i < N_HTTP_STATUSES; i++)
                if (http_statuses[i] == status)
                        return i;
        return N_HTTP_STATUSES;
}

void metrics_http_request(size_t route, unsigned status)
{
        counter_t *http = atomic_load_explicit(&reg.http, memory_order_acquire);

        if (!http)
                return;
        if (route > reg.n_routes)
                route = reg.n_routes;
        count(&http[route * HTTP_SLOTS + http_slot(status)]);
}

/* Writing. */

void metrics_write_label_value(FILE *f, const char *value)
{
        for (const char *p = value; *p; p++) {
                if (*p == '\\')
                        fputs("\\\\", f);
                else if (*p == '"')
                        fputs("\\\"", f);
                else if (*p == '\n')
                        fputs("\\n", f);
                else
                        fputc(*p, f);
        }
}

void metrics_write_family(FILE *f, const char *name, const char *type, const char *help)
{
        fprintf(f, "# HELP %s ", name);
        for (const char *p = help; *p; p++) {
                if (*p == '\\')
                        fputs("\\\\", f);
                else if (*p == '\n')
                        fputs("\\n", f);
                else
                        fputc(*p, f);
        }
        fprintf(f, "\n# TYPE %s %s\n", name, type);
}

static void write_value(FILE *f, double v)
{
        if (isnan(v))
                fputs("NaN", f);
        else if (isinf(v))
                fputs(v > 0 ? "+Inf" : "-Inf", f);
        else if (v == floor(v) && fabs(v) < 9007199254740992.0) /* 2^53: exact */
                fprintf(f, "%.0f", v);
        else {
                /* The shortest text that reads back as the same double, as in the JSON. */
                char buf[JSON_REAL_TEXT_MAX];

                (void) json_real_text(v, buf);
                fputs(buf, f);
        }
}

void metrics_write_sample(FILE *f, const char *name, const char *const *labels, double value)
{
        fputs(name, f);
        if (labels && labels[0]) {
                fputc('{', f);
                for (size_t i = 0; labels[i] && labels[i + 1]; i += 2) {
                        fprintf(f, "%s%s=\"", i ? "," : "", labels[i]);
                        metrics_write_label_value(f, labels[i + 1]);
                        fputc('"', f);
                }
                fputc('}', f);
        }
        fputc(' ', f);
        write_value(f, value);
        fputc('\n', f);
}

static uint64_t load(const counter_t *c)
{
        return atomic_load_explicit(c, memory_order_relaxed);
}

static uint64_t histogram_count(const struct histogram *h)
{
        uint64_t n = 0;

        for (size_t i = 0; i <= N_BOUNDS; i++)
                n += load(&h->buckets[i]);
        return n;
}

/* name_bucket{labels...,le="..."}, name_sum, name_count. labels: up to 2 pairs. */
static void write_histogram(FILE *f, const char *name, const char *const *labels,
                            const struct histogram *h)
{
        const char *l[8];
        char series[128], le[32];
        uint64_t cum = 0;
        size_t n = 0;

        while (labels && labels[n] && n < 4)
                n++;
        memcpy(l, labels, n * sizeof(*l));
        (void) snprintf(series, sizeof(series), "%s_bucket", name);
        for (size_t i = 0; i <= N_BOUNDS; i++) {
                cum += load(&h->buckets[i]);
                if (i < N_BOUNDS)
                        (void) snprintf(le, sizeof(le), "%g", metrics_latency_bounds[i]);
                else
                        strcpy(le, "+Inf");
                l[n] = "le";
                l[n + 1] = le;
                l[n + 2] = NULL;
                metrics_write_sample(f, series, l, (double) cum);
        }
        l[n] = NULL;
        (void) snprintf(series, sizeof(series), "%s_sum", name);
        metrics_write_sample(f, series, l, (double) load(&h->sum_ns) / 1e9);
        (void) snprintf(series, sizeof(series), "%s_count", name);
        metrics_write_sample(f, series, l, (double) cum);
}

/* The registered profiles, and "_other" when it was used. */
static size_t profiles_snapshot(struct metrics_profile **out)
{
        size_t n = atomic_load_explicit(&reg.n_profiles, memory_order_acquire), k = 0;

        for (size_t i = 0; i < n; i++)
                out[k++] = &reg.profiles[i];
        out[k++] = &reg.other;
        return k;
}

static bool profile_used(const struct metrics_profile *p)
{
        if (p != &reg.other)
                return true;
        for (size_t s = 0; s < METRICS_EXEC_STATUS_COUNT; s++)
                if (histogram_count(&p->exec[s]))
                        return true;
        return histogram_count(&p->create) || load(&p->oom_kills) || load(&p->zygote_restarts[0]) ||
               load(&p->zygote_restarts[1]);
}

static void write_profiles(FILE *f)
{
        struct metrics_profile *ps[METRICS_PROFILES_MAX + 1];
        size_t n = profiles_snapshot(ps);

        metrics_write_family(f, "airlock_executions_total", "counter",
                             "Executions (cells) run, by profile and outcome.");
        for (size_t i = 0; i < n; i++)
                for (size_t s = 0; s < METRICS_EXEC_STATUS_COUNT && profile_used(ps[i]); s++)
                        metrics_write_sample(f, "airlock_executions_total",
                                             (const char *[]){ "profile", ps[i]->name, "status",
                                                               exec_status_names[s], NULL },
                                             (double) histogram_count(&ps[i]->exec[s]));

        metrics_write_family(f, "airlock_execution_duration_seconds", "histogram",
                             "Wall time of an execution in its sandbox, by profile and outcome.");
        for (size_t i = 0; i < n; i++)
                for (size_t s = 0; s < METRICS_EXEC_STATUS_COUNT; s++)
                        if (histogram_count(&ps[i]->exec[s]))
                                write_histogram(f, "airlock_execution_duration_seconds",
                                                (const char *[]){ "profile", ps[i]->name, "status",
                                                                  exec_status_names[s], NULL },
                                                &ps[i]->exec[s]);

        metrics_write_family(f, "airlock_session_create_duration_seconds", "histogram",
                             "Time to create a session (a warm pool hand-over or a fresh "
                             "sandbox), by profile.");
        for (size_t i = 0; i < n; i++)
                if (histogram_count(&ps[i]->create))
                        write_histogram(f, "airlock_session_create_duration_seconds",
                                        (const char *[]){ "profile", ps[i]->name, NULL },
                                        &ps[i]->create);

        metrics_write_family(f, "airlock_zygote_restarts_total", "counter",
                             "Zygotes started again, by profile and reason: died (found dead) "
                             "or rotated (replaced on schedule).");
        for (size_t i = 0; i < n; i++)
                for (size_t z = 0; z < METRICS_ZYGOTE_REASON_COUNT && profile_used(ps[i]); z++)
                        metrics_write_sample(f, "airlock_zygote_restarts_total",
                                             (const char *[]){ "profile", ps[i]->name, "reason",
                                                               zygote_reason_names[z], NULL },
                                             (double) load(&ps[i]->zygote_restarts[z]));

        metrics_write_family(f, "airlock_sandbox_oom_kills_total", "counter",
                             "Executions ended by the out-of-memory killer in their sandbox, "
                             "by profile.");
        for (size_t i = 0; i < n; i++)
                if (profile_used(ps[i]))
                        metrics_write_sample(f, "airlock_sandbox_oom_kills_total",
                                             (const char *[]){ "profile", ps[i]->name, NULL },
                                             (double) load(&ps[i]->oom_kills));

        /* Only profiles whose sessions used the network: most have none. */
        metrics_write_family(f, "airlock_egress_connections_total", "counter",
                             "Connections of sandboxes through the egress proxy, by profile and "
                             "result: allowed (made) or refused.");
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < 2 && (load(&ps[i]->egress[0]) || load(&ps[i]->egress[1]));
                     k++)
                        metrics_write_sample(f, "airlock_egress_connections_total",
                                             (const char *[]){ "profile", ps[i]->name, "result",
                                                               k ? "refused" : "allowed", NULL },
                                             (double) load(&ps[i]->egress[k]));
        metrics_write_family(f, "airlock_egress_bytes_total", "counter",
                             "Bytes through the egress proxy, by profile and direction: in (to "
                             "the sandbox) or out.");
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < 2 && load(&ps[i]->egress[0]); k++)
                        metrics_write_sample(f, "airlock_egress_bytes_total",
                                             (const char *[]){ "profile", ps[i]->name, "direction",
                                                               k ? "out" : "in", NULL },
                                             (double) load(&ps[i]->egress_bytes[k]));
}

static void write_http(FILE *f)
{
        counter_t *http = atomic_load_explicit(&reg.http, memory_order_acquire);
        char status[16];

        metrics_write_family(f, "airlock_http_requests_total", "counter",
                             "HTTP requests answered, by method, route template (never the raw "
                             "path) and status.");
        if (!http)
                return;
        for (size_t r = 0; r <= reg.n_routes; r++) {
                for (size_t s = 0; s < HTTP_SLOTS; s++) {
                        uint64_t v = load(&http[r * HTTP_SLOTS + s]);

                        if (!v)
                                continue;
                        if (s < N_HTTP_STATUSES)
                                (void) snprintf(status, sizeof(status), "%u", http_statuses[s]);
                        else
                                strcpy(status, "other");
                        metrics_write_sample(
                                f, "airlock_http_requests_total",
                                (const char *[]){
                                        "method", r < reg.n_routes ? reg.http_methods[r] : "",
                                        "route",
                                        r < reg.n_routes ? reg.http_patterns[r] : "unmatched",
                                        "status", status, NULL },
                                (double) v);
                }
        }
}

/* Fields of /proc/self/stat after the command name (which may hold spaces and parentheses). */
struct proc_stat {
        unsigned long long utime, stime, starttime, vsize;
        long long rss;
};

static int read_proc_stat(struct proc_stat *ret)
{
        char buf[1024], *p;
        FILE *f = fopen("/proc/self/stat", "re");
        size_t n;

        if (!f)
                return -errno;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        p = strrchr(buf, ')');
        /* Fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
         * utime(14) stime(15) cutime cstime priority nice num_threads itrealvalue
         * starttime(22) vsize(23) rss(24): proc(5). */
        if (!p || sscanf(p + 2,
                         "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                         "%*d %*d %llu %llu %lld",
                         &ret->utime, &ret->stime, &ret->starttime, &ret->vsize, &ret->rss) != 5)
                return -EINVAL;
        return 0;
}

static long long boot_time(void)
{
        char line[256];
        long long btime = -1;
        FILE *f = fopen("/proc/stat", "re");

        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "btime %lld", &btime) == 1)
                        break;
        fclose(f);
        return btime;
}

static long open_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        long n = 0;

        if (!d)
                return -1;
        while ((e = readdir(d)))
                if (e->d_name[0] != '.')
                        n++;
        closedir(d);
        return n - 1; /* the directory's own fd */
}

static void write_process(FILE *f)
{
        long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE), fds = open_fds();
        long long btime = boot_time();
        struct proc_stat st;
        struct rlimit rl;

        if (read_proc_stat(&st) == 0 && ticks > 0) {
                metrics_write_family(f, "process_cpu_seconds_total", "counter",
                                     "Total user and system CPU time spent in seconds.");
                metrics_write_sample(f, "process_cpu_seconds_total", NULL,
                                     (double) (st.utime + st.stime) / (double) ticks);
                metrics_write_family(f, "process_resident_memory_bytes", "gauge",
                                     "Resident memory size in bytes.");
                metrics_write_sample(f, "process_resident_memory_bytes", NULL,
                                     (double) st.rss * (double) page);
                metrics_write_family(f, "process_virtual_memory_bytes", "gauge",
                                     "Virtual memory size in bytes.");
                metrics_write_sample(f, "process_virtual_memory_bytes", NULL, (double) st.vsize);
                if (btime > 0) {
                        metrics_write_family(f, "process_start_time_seconds", "gauge",
                                             "Start time of the process since unix epoch in "
                                             "seconds.");
                        metrics_write_sample(f, "process_start_time_seconds", NULL,
                                             (double) btime +
                                                     (double) st.starttime / (double) ticks);
                }
        }
        if (fds >= 0) {
                metrics_write_family(f, "process_open_fds", "gauge",
                                     "Number of open file descriptors.");
                metrics_write_sample(f, "process_open_fds", NULL, (double) fds);
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                metrics_write_family(f, "process_max_fds", "gauge",
                                     "Maximum number of open file descriptors.");
                metrics_write_sample(f, "process_max_fds", NULL,
                                     rl.rlim_cur == RLIM_INFINITY ? INFINITY
                                                                  : (double) rl.rlim_cur);
        }
}

void metrics_write_registry(FILE *f)
{
        metrics_write_family(f, "airlock_build_info", "gauge",
                             "Always 1; the labels say which airlock this is.");
        metrics_write_sample(f, "airlock_build_info",
                             (const char *[]){ "version", AIRLOCK_VERSION, NULL }, 1);
        write_profiles(f);

        metrics_write_family(f, "airlock_tool_calls_total", "counter",
                             "Calls of internal tools (MCP servers behind airlock), by where "
                             "they came from (internal: /mcp, the chat gateway, /v1/responses; "
                             "codemode: a session's code) and outcome.");
        for (size_t v = 0; v < METRICS_TOOL_VIA_COUNT; v++)
                for (size_t o = 0; o < METRICS_TOOL_OUTCOME_COUNT; o++)
                        metrics_write_sample(f, "airlock_tool_calls_total",
                                             (const char *[]){ "via", tool_via_names[v], "outcome",
                                                               tool_outcome_names[o], NULL },
                                             (double) load(&reg.tool_calls[v][o]));

        write_http(f);

        metrics_write_family(f, "airlock_audit_write_failures_total", "counter",
                             "Audit log lines that could not be written.");
        metrics_write_sample(f, "airlock_audit_write_failures_total", NULL,
                             (double) load(&reg.audit_failures));

        write_process(f);
}

static void histogram_zero(struct histogram *h)
{
        for (size_t i = 0; i <= N_BOUNDS; i++)
                atomic_store(&h->buckets[i], 0);
        atomic_store(&h->sum_ns, 0);
}

static void profile_zero(struct metrics_profile *p)
{
        for (size_t s = 0; s < METRICS_EXEC_STATUS_COUNT; s++)
                histogram_zero(&p->exec[s]);
        histogram_zero(&p->create);
        for (size_t z = 0; z < METRICS_ZYGOTE_REASON_COUNT; z++)
                atomic_store(&p->zygote_restarts[z], 0);
        atomic_store(&p->oom_kills, 0);
        for (size_t k = 0; k < 2; k++) {
                atomic_store(&p->egress[k], 0);
                atomic_store(&p->egress_bytes[k], 0);
        }
}

void metrics_reset_for_tests(void)
{
        counter_t *http = atomic_load(&reg.http);

        for (size_t i = 0; i < METRICS_PROFILES_MAX; i++)
                profile_zero(&reg.profiles[i]);
        profile_zero(&reg.other);
        for (size_t v = 0; v < METRICS_TOOL_VIA_COUNT; v++)
                for (size_t o = 0; o < METRICS_TOOL_OUTCOME_COUNT; o++)
                        atomic_store(&reg.tool_calls[v][o], 0);
        atomic_store(&reg.audit_failures, 0);
        for (size_t i = 0; http && i < (reg.n_routes + 1) * HTTP_SLOTS; i++)
                atomic_store(&http[i], 0);
}
