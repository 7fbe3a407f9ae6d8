/* bench-soak: the daemon under a long storm of ordinary and hostile work, and with --chaos
 * under faults, while a well-behaved client measures what the storm costs it.
 *
 *   bench-soak [AIRLOCK_BINARY] [--sessions N] [--duration S] [--chaos] [--seed N]
 *              [--workers N] [--baseline S] [--progress S] [--think-ms N]
 *
 * Starts its own `airlock serve --max-sessions N+64` on a free loopback port (as root; the
 * binary also from $AIRLOCK_BIN) with a profile of its own, "soak", written to a temporary
 * AIRLOCK_PROFILES_DIR: python and bash, no preloads, memory 256 MiB, pids 64, output 256 KiB,
 * workspace 64 MiB, so that an OOM, a fork bomb or a flood reaches its limit within a second
 * of CPU and N sessions stay small; cells may run 60 s, so that on 2 busy cores the hostile
 * cells end by the limit they test and not by the wall clock (the timeout operation has its
 * own). Then:
 *
 *   1. setup: N storm sessions (default 200) of that profile, each given a marker variable,
 *      a counter `n` and a marker file, /work/marker.txt;
 *   2. baseline: the well-behaved client (a session of the default profile, one keep-alive
 *      connection) runs the hot execute of `1` every 10 ms for --baseline s (default 20);
 *   3. storm, --duration s (default 600): --workers threads (default 24, each with its own
 *      connection) cycle over the sessions, one operation at a time per session, drawn with
 *      these weights:
 *        normal  55  `n += 1` and a little compute, answering (marker, n): both checked
 *        files   12  PUT 4 MiB of random bytes, GET them back (FNV-1a compared), DELETE,
 *                    and GET marker.txt (compared)
 *        timeout 10  sleep(30) with "timeout": 0.3: status timeout, state preserved
 *        flood   10  endless stdout: status output_limit, state preserved
 *        fork     8  os.fork() until EAGAIN (the pids limit), the children exec sleep and
 *                    are killed: status ok, (k, EAGAIN) with k <= 64, state preserved
 *        oom      5  a 1 GiB string: status oom and state lost, after which the
 *                    session is recreated with new markers (expected, not a loss), or a
 *                    MemoryError with the state preserved
 *      The well-behaved client goes on meanwhile, and a sampler reads the daemon's VmRSS,
 *      thread count and open fds every 2 s. A progress line every --progress s (15);
 *   4. checks every session's marker, counter and marker file ("lost" must be 0), that the
 *      daemon still starts and runs new sessions of both profiles, deletes the sessions, and
 *      prints the latency before and during the storm (target: p99 during within 3x of the p99
 *      before; reported met or missed), the daemon's memory over time and the counts.
 *
 * --chaos adds a thread that every 3-8 s SIGKILLs at random either a zygote (30%) or one
 * process of a storm session (70%). Targets are only processes that descend from the daemon
 * started here, found through /proc by their cgroup (airlock-zygote-*, airlock-s-<id>) and
 * signalled through a pidfd after the ancestry is checked again, so no other process can be
 * hit. A zygote is killed while the workers are paused, a session while no worker uses it.
 * After each kill it checks that the daemon recovers: it stays alive; a new session of the
 * profile starts and runs `1` within 30 s, and the first one created does (else it counts a
 * dead hand-out); every killed session answers 404 with state lost/ended, or an execution
 * with state lost, or still holds its markers. Killed sessions are then deleted and
 * recreated. One line per kill says what was killed, how each check went, and how long the
 * daemon took to run a new session.
 *
 * Exit status 0 when no session lost its markers, the daemon stayed alive and healthy, and
 * every check passed: every storm operation had its expected outcome without --chaos; with
 * --chaos the checks after each kill (storm operations are not held against it). The latency
 * target is printed as met or missed and never fails the run. The daemon, its state and the
 * profile directory are removed at exit, on failure and on SIGINT/SIGTERM/SIGHUP. */
#include "bench-util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PROFILE "soak"
#define PROFILE_MEMORY_MIB 256
#define PROFILE_PIDS 64
#define PROFILE_JSON                                                                               \
        "{\n"                                                                                      \
        "  \"description\": \"bench-soak: storm sessions with small limits\",\n"                   \
        "  \"languages\": [\"python\", \"bash\"],\n"                                               \
        "  \"limits\": { \"memory\": \"256MiB\", \"pids\": 64, \"timeout\": \"60s\",\n"            \
        "              \"output\": \"256KiB\", \"workspace\": \"64MiB\", \"tmp\": \"32MiB\" }\n"   \
        "}\n"
#define FILE_BYTES (4u << 20)
#define TIMEOUT_CELL "0.3" /* seconds, the "timeout" of the timeout operation */
#define HOT_PAUSE_MS 10    /* between two requests of the well-behaved client */
#define HOT_WARMUP 50
#define SAMPLE_MS 2000 /* the daemon's VmRSS, threads, fds */
#define RECOVERY_S 30  /* after a kill, a new session must run within this */
#define CHAOS_MIN_MS 3000
#define CHAOS_MAX_MS 8000
#define NOTES_MAX 25 /* failures printed as they happen; the rest are counted */
#define S 1000000000ull

struct options {
        unsigned sessions, duration_s, workers, baseline_s, progress_s, think_ms;
        int storm_nice; /* 0-19, from storm_nice_u */
        unsigned storm_nice_u;
        bool chaos;
        uint64_t seed;
};

/* One storm session. */
struct slot {
        pthread_mutex_t lock; /* held by the one thread working on the session */
        atomic_bool claimed;  /* the chaos thread waits for it: workers leave it alone */
        unsigned index;
        bool alive; /* a session with markers; false after a failed recreation */
        char id[64];
        char marker[20]; /* 16 hex digits */
        unsigned long n; /* the value `n` has in the session */
};

static struct options opt;
static struct bench_daemon bd;
static char profile_dir[64];
static volatile sig_atomic_t got_signal;
static atomic_bool stop_storm, stop_all, daemon_died;
static uint64_t t_start; /* the program's start, for the times in notes */

/* ---- small helpers ---- */

static uint64_t splitmix(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
}

/* xorshift64*: one generator per thread, seeded from --seed. */
static uint64_t rng_next(uint64_t *s)
{
        uint64_t x = *s;

        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *s = x;
        return x * 0x2545f4914f6cdd1dull;
}

static unsigned rng_below(uint64_t *s, unsigned n)
{
        return (unsigned) (rng_next(s) % n);
}

static uint64_t rng_seed(uint64_t stream)
{
        uint64_t s = splitmix(opt.seed ^ splitmix(stream));

        return s ? s : 1;
}

static uint64_t fnv1a(const void *p, size_t n)
{
        const unsigned char *b = p;
        uint64_t h = 0xcbf29ce484222325ull;

        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * 0x100000001b3ull;
        return h;
}

static bool has(const char *resp, const char *what)
{
        return resp && strstr(resp, what);
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

static double secs(uint64_t ns)
{
        return (double) ns / 1e9;
}

static double mib(unsigned long long kb)
{
        return (double) kb / 1024.0;
}

/* A failure worth reading: the first NOTES_MAX are printed at once, the rest counted. */
static atomic_ulong notes;

static __attribute__((format(printf, 1, 2))) void note(const char *fmt, ...)
{
        char msg[700];
        va_list ap;

        if (atomic_fetch_add(&notes, 1) >= NOTES_MAX)
                return;
        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "bench-soak: [%6.1f s] %s\n", secs(bench_now_ns() - t_start), msg);
}

/* The answer of a request, trimmed for a note: BODY(resp) goes with "%.*s". */
static int trim_len(const char *resp)
{
        int n = resp ? (int) strnlen(resp, 300) : 0;

        while (n > 0 && (resp[n - 1] == '\n' || resp[n - 1] == ' '))
                n--;
        return n;
}

#define BODY(resp) trim_len(resp), (resp) ? (resp) : ""

/* Escapes s as the inside of a JSON string; -1 if out is too small. */
static int json_escape(const char *s, char *out, size_t size)
{
        size_t o = 0;

        for (; *s; s++) {
                char tmp[8];
                const char *e = tmp;

                if (*s == '"')
                        e = "\\\"";
                else if (*s == '\\')
                        e = "\\\\";
                else if (*s == '\n')
                        e = "\\n";
                else if ((unsigned char) *s < 0x20)
                        (void) snprintf(tmp, sizeof(tmp), "\\u%04x", (unsigned char) *s);
                else {
                        tmp[0] = *s;
                        tmp[1] = '\0';
                }
                if (o + strlen(e) + 1 > size)
                        return -1;
                memcpy(out + o, e, strlen(e));
                o += strlen(e);
        }
        out[o] = '\0';
        return 0;
}

/* ---- the daemon's processes, through /proc ---- */

/* Reads /proc/PID/NAME into buf (NUL-terminated); the length, or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t size)
{
        char path[64];
        ssize_t n;
        int fd;

        (void) snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        n = read(fd, buf, size - 1);
        close(fd);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        return n;
}

/* The state letter and the parent of pid, from /proc/PID/stat; 0 or -1. */
static int read_stat(pid_t pid, char *ret_state, pid_t *ret_ppid)
{
        char buf[512], *p;

        if (read_proc(pid, "stat", buf, sizeof(buf)) < 0)
                return -1;
        p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
        if (!p || strlen(p) < 5)
                return -1;
        *ret_state = p[2];
        *ret_ppid = (pid_t) atoi(p + 4); /* ") S PPID" */
        return 0;
}

static bool daemon_alive(void)
{
        char state;
        pid_t ppid;

        return read_stat(bd.pid, &state, &ppid) == 0 && state != 'Z' && state != 'X';
}

static pid_t read_ppid(pid_t pid)
{
        char state;
        pid_t ppid;

        return read_stat(pid, &state, &ppid) == 0 ? ppid : -1;
}

static bool descends_from_daemon(pid_t pid)
{
        for (int depth = 0; depth < 64 && pid > 1; depth++) {
                pid = read_ppid(pid);
                if (pid == bd.pid)
                        return true;
        }
        return false;
}

/* The airlock cgroup of pid ("airlock-zygote-default-1a2b", "airlock-s-<id>") into out. */
static int read_airlock_cgroup(pid_t pid, char *out, size_t size)
{
        char buf[4096], *p, *end;

        if (read_proc(pid, "cgroup", buf, sizeof(buf)) < 0)
                return -1;
        p = strstr(buf, "/airlock-");
        if (!p)
                return -1;
        p++;
        end = p + strcspn(p, "/\n");
        if ((size_t) (end - p) >= size)
                return -1;
        memcpy(out, p, (size_t) (end - p));
        out[end - p] = '\0';
        return 0;
}

struct proc {
        pid_t pid;
        char cgroup[64]; /* airlock-zygote-PROFILE-HEX or airlock-s-ID */
};

struct pidpair {
        pid_t pid, ppid;
        bool mine;
};

static int cmp_pid(const void *a, const void *b)
{
        pid_t x = ((const struct pidpair *) a)->pid, y = ((const struct pidpair *) b)->pid;

        return x < y ? -1 : x > y;
}

/* The daemon's descendants that sit in an airlock cgroup (zygotes and session processes).
 * Returns how many were stored into out (at most max), or -1. */
static long daemon_processes(struct proc *out, size_t max)
{
        struct pidpair *all = NULL;
        size_t n = 0, cap = 0, got = 0;
        struct dirent *e;
        bool changed = true;
        DIR *d = opendir("/proc");

        if (!d)
                return -1;
        while ((e = readdir(d))) {
                pid_t pid = (pid_t) atoi(e->d_name), ppid;

                if (pid <= 0 || (ppid = read_ppid(pid)) < 0)
                        continue;
                if (n == cap) {
                        struct pidpair *p = realloc(all, (cap ? cap * 2 : 1024) * sizeof(*all));

                        if (!p) {
                                closedir(d);
                                free(all);
                                return -1;
                        }
                        all = p;
                        cap = cap ? cap * 2 : 1024;
                }
                all[n++] = (struct pidpair){ pid, ppid, ppid == bd.pid };
        }
        closedir(d);
        if (n)
                qsort(all, n, sizeof(*all), cmp_pid);
        /* the trees under the daemon are a few levels deep: mark until nothing changes */
        while (changed) {
                changed = false;
                for (size_t i = 0; i < n; i++) {
                        struct pidpair key = { .pid = all[i].ppid }, *parent;

                        if (all[i].mine)
                                continue;
                        parent = bsearch(&key, all, n, sizeof(*all), cmp_pid);
                        if (parent && parent->mine) {
                                all[i].mine = true;
                                changed = true;
                        }
                }
        }
        for (size_t i = 0; i < n && got < max; i++)
                if (all[i].mine && read_airlock_cgroup(all[i].pid, out[got].cgroup,
                                                       sizeof(out[got].cgroup)) == 0) {
                        out[got].pid = all[i].pid;
                        got++;
                }
        free(all);
        return (long) got;
}

/* SIGKILLs pid if, and only if, it still descends from our daemon and sits in `cgroup`: the
 * pidfd pins the process, so a pid reused meanwhile is never signalled. Waits up to 5 s for
 * it to exit. 0, or -errno. */
static int kill_daemon_process(pid_t pid, const char *cgroup)
{
        struct pollfd pfd = { .events = POLLIN };
        char now[64];
        int r = 0;

        pfd.fd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pfd.fd < 0)
                return -errno;
        if (!descends_from_daemon(pid) || read_airlock_cgroup(pid, now, sizeof(now)) < 0 ||
            strcmp(now, cgroup) != 0)
                r = -ESRCH;
        else if (syscall(SYS_pidfd_send_signal, pfd.fd, SIGKILL, NULL, 0) < 0)
                r = -errno;
        else if (poll(&pfd, 1, 5000) <= 0)
                r = -ETIMEDOUT;
        close(pfd.fd);
        return r;
}

/* PSS of the storm's sessions, of the others (the well-behaved client's, the warm pools) and
 * of the zygotes. */
struct sandboxes {
        unsigned long long storm_pss_kb, other_pss_kb, zygote_pss_kb;
        unsigned storm_procs, storm, other, zygotes;
};

static int cmp_cgroup(const void *a, const void *b)
{
        return strcmp(((const struct proc *) a)->cgroup, ((const struct proc *) b)->cgroup);
}

static struct slot *slots;

static bool is_storm_session(const char *cgroup)
{
        for (unsigned i = 0; i < opt.sessions; i++)
                if (slots[i].alive && !strcmp(cgroup + 8, slots[i].id)) /* "airlock-" */
                        return true;
        return false;
}

/* Only while no worker changes the slots. */
static void measure_sandboxes(struct sandboxes *m)
{
        size_t max = 4 * (size_t) opt.sessions + 1024;
        struct proc *p = calloc(max, sizeof(*p));
        long n;

        memset(m, 0, sizeof(*m));
        if (!p)
                return;
        n = daemon_processes(p, max);
        if (n > 0)
                qsort(p, (size_t) n, sizeof(*p), cmp_cgroup);
        for (long i = 0; i < n; i++) {
                bool first = i == 0 || strcmp(p[i].cgroup, p[i - 1].cgroup) != 0;
                unsigned long long kb = bench_proc_field(p[i].pid, "smaps_rollup", "Pss");

                if (!strncmp(p[i].cgroup, "airlock-zygote-", 15)) {
                        m->zygote_pss_kb += kb;
                        m->zygotes += first;
                } else if (is_storm_session(p[i].cgroup)) {
                        m->storm_pss_kb += kb;
                        m->storm_procs++;
                        m->storm += first;
                } else {
                        m->other_pss_kb += kb;
                        m->other += first;
                }
        }
        free(p);
}

static unsigned long long mem_total_kb(void)
{
        char line[256];
        unsigned long long v = 0;
        FILE *f = fopen("/proc/meminfo", "re");

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (!strncmp(line, "MemTotal:", 9))
                        v = strtoull(line + 9, NULL, 10);
        fclose(f);
        return v;
}

/* ---- requests ---- */

static int execute(struct bench_conn *c, const char *id, const char *code, const char *timeout,
                   int *status, const char **resp)
{
        char path[96], esc[4096], body[4200];

        if (json_escape(code, esc, sizeof(esc)) < 0) {
                errno = E2BIG;
                return -1;
        }
        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);
        if (timeout)
                (void) snprintf(body, sizeof(body), "{\"code\":\"%s\",\"timeout\":%s}", esc,
                                timeout);
        else
                (void) snprintf(body, sizeof(body), "{\"code\":\"%s\"}", esc);
        return bench_http(c, "POST", path, body, status, resp);
}

static void conn_free(struct bench_conn *c)
{
        bench_conn_close(c);
        free(c->buf);
        free(c->req);
        free(c->body);
}

static void delete_session(struct bench_conn *c, const char *id)
{
        char path[96];
        const char *resp;
        int status;

        (void) snprintf(path, sizeof(path), "/v1/sessions/%s", id);
        (void) bench_http(c, "DELETE", path, NULL, &status, &resp);
}

/* POST /v1/sessions of `profile`, waiting out a 503 (the session limit) for up to 5 s. */
static int create_session(struct bench_conn *c, const char *profile, char *id, size_t size,
                          char *why, size_t why_size)
{
        char body[96];
        const char *resp;
        int status = 0;

        (void) snprintf(body, sizeof(body), "{\"profile\":\"%s\"}", profile);
        for (int i = 0; i < 25; i++) {
                if (bench_http(c, "POST", "/v1/sessions", body, &status, &resp) < 0) {
                        (void) snprintf(why, why_size, "POST /v1/sessions: %s", strerror(errno));
                        return -1;
                }
                if (status != 503)
                        break;
                bench_sleep_ms(200);
        }
        if (status != 201 || bench_json_str(resp, "id", id, size) < 0) {
                (void) snprintf(why, why_size, "POST /v1/sessions answered %d: %.*s", status,
                                BODY(resp));
                return -1;
        }
        return 0;
}

/* A new session of `profile` runs `1`. 0, or -1 with why. */
static int session_runs(struct bench_conn *c, const char *profile, char *why, size_t size)
{
        char id[64];
        const char *resp;
        int status = 0, r = 0;

        if (create_session(c, profile, id, sizeof(id), why, size) < 0)
                return -1;
        if (execute(c, id, "1", NULL, &status, &resp) < 0) {
                (void) snprintf(why, size, "execute in new session %s: %s", id, strerror(errno));
                r = -1;
        } else if (status != 200 || !has(resp, "\"result\":\"1\"")) {
                (void) snprintf(why, size, "new session %s could not run 1: %d %.*s", id, status,
                                BODY(resp));
                r = -1;
        }
        delete_session(c, id);
        return r;
}

/* ---- the storm sessions ---- */

/* Workers hold it shared around each operation; a zygote kill holds it exclusively, so it
 * never lands in the middle of an operation and the sessions it kills are checked and
 * recreated before the storm goes on. */
static pthread_rwlock_t gate;

static void marker_file(const struct slot *s, char *out, size_t size)
{
        (void) snprintf(out, size, "bench-soak marker %s of slot %u\n", s->marker, s->index);
}

/* Creates the session of slot s with new markers. 0, or -1 with why. */
static int slot_create(struct bench_conn *c, struct slot *s, uint64_t *rng, char *why, size_t size)
{
        char code[128], want[64], path[128], file[128];
        const char *resp;
        int status = 0;

        s->alive = false;
        if (create_session(c, PROFILE, s->id, sizeof(s->id), why, size) < 0)
                return -1;
        (void) snprintf(s->marker, sizeof(s->marker), "%016llx",
                        (unsigned long long) rng_next(rng));
        s->n = 0;
        (void) snprintf(code, sizeof(code), "marker = '%s'\nn = 0\nmarker", s->marker);
        (void) snprintf(want, sizeof(want), "\"result\":\"'%s'\"", s->marker);
        if (execute(c, s->id, code, NULL, &status, &resp) < 0 || status != 200 ||
            !has(resp, want)) {
                (void) snprintf(why, size, "setting the marker of %s: %d %.*s", s->id, status,
                                BODY(resp));
                delete_session(c, s->id);
                return -1;
        }
        marker_file(s, file, sizeof(file));
        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/files/marker.txt", s->id);
        if (bench_http_raw(c, "PUT", path, "application/octet-stream", file, strlen(file), &status,
                           &resp) < 0 ||
            status != 200) {
                (void) snprintf(why, size, "PUT marker.txt in %s: %d %.*s", s->id, status,
                                BODY(resp));
                delete_session(c, s->id);
                return -1;
        }
        s->alive = true;
        return 0;
}

/* Deletes what is left of the session and makes a new one (three tries). */
static int slot_recreate(struct bench_conn *c, struct slot *s, uint64_t *rng)
{
        char why[512] = "";

        if (s->id[0])
                delete_session(c, s->id);
        for (int i = 0; i < 3; i++)
                if (slot_create(c, s, rng, why, sizeof(why)) == 0)
                        return 0;
        note("slot %u: cannot recreate its session: %s", s->index, why);
        return -1;
}

enum verdict {
        INTACT,
        LOST_VARIABLE, /* the session answers, its marker or counter is wrong or gone */
        LOST_FILE,     /* marker.txt is gone or different */
        LOST_SESSION,  /* the session ended (404) */
        UNKNOWN,       /* could not tell: a transport error or an unexpected answer */
};

static const char *const verdict_names[] = { "intact", "variable lost", "file lost", "session lost",
                                             "unknown" };

/* Checks the marker variable, the counter and the marker file of slot s. */
static enum verdict slot_verify(struct bench_conn *c, struct slot *s, char *why, size_t size)
{
        char want[96], path[128], file[128];
        const char *resp;
        int status = 0;

        (void) snprintf(want, sizeof(want), "\"result\":\"('%s', %lu)\"", s->marker, s->n);
        if (execute(c, s->id, "(marker, n)", NULL, &status, &resp) < 0) {
                (void) snprintf(why, size, "%s: execute: %s", s->id, strerror(errno));
                return UNKNOWN;
        }
        if (status == 404) {
                (void) snprintf(why, size, "%s: %.*s", s->id, BODY(resp));
                return LOST_SESSION;
        }
        if (status != 200) {
                (void) snprintf(why, size, "%s: execute answered %d: %.*s", s->id, status,
                                BODY(resp));
                return UNKNOWN;
        }
        if (!has(resp, want)) {
                (void) snprintf(why, size, "%s: wanted ('%s', %lu), got %.*s", s->id, s->marker,
                                s->n, BODY(resp));
                return has(resp, "\"state\":\"lost\"") ? LOST_SESSION : LOST_VARIABLE;
        }
        marker_file(s, file, sizeof(file));
        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/files/marker.txt", s->id);
        if (bench_http(c, "GET", path, NULL, &status, &resp) < 0) {
                (void) snprintf(why, size, "%s: GET marker.txt: %s", s->id, strerror(errno));
                return UNKNOWN;
        }
        if (status != 200 || c->body_len != strlen(file) || memcmp(resp, file, c->body_len)) {
                (void) snprintf(why, size, "%s: GET marker.txt answered %d: %.*s", s->id, status,
                                BODY(resp));
                return status == 200 || status == 404 ? LOST_FILE : UNKNOWN;
        }
        return INTACT;
}

/* ---- statistics ---- */

enum op { OP_NORMAL, OP_FILES, OP_TIMEOUT, OP_FLOOD, OP_FORK, OP_OOM, OP_COUNT };

static const struct {
        const char *name;
        unsigned weight;
} ops[OP_COUNT] = {
        [OP_NORMAL] = { "normal", 55 },   [OP_FILES] = { "files", 12 },
        [OP_TIMEOUT] = { "timeout", 10 }, [OP_FLOOD] = { "flood", 10 },
        [OP_FORK] = { "fork", 8 },        [OP_OOM] = { "oom", 5 },
};

static atomic_ulong op_done[OP_COUNT], op_failed[OP_COUNT];
static atomic_ulong lost[UNKNOWN];    /* by verdict, LOST_* only */
static atomic_ulong oom_killed;       /* OOM killed the session, as it should: recreated */
static atomic_ulong oom_memory_error; /* MemoryError, the session lived */
static atomic_ulong recreate_failed, verify_unknown;

/* ---- the storm's operations ---- */

enum outcome {
        OUT_OK,
        OUT_FAILED,      /* not the expected answer; the session may be fine */
        OUT_LOST,        /* the session ended, or a marker is gone, without a reason */
        OUT_DIED,        /* the session ended, as the operation meant it to (OOM) */
        OUT_DIED_FAILED, /* the session ended, but not the way it should have */
};

struct worker {
        pthread_t thread;
        unsigned index;
        uint64_t rng;
        struct bench_conn c;
        unsigned char *file; /* FILE_BYTES of random data */
        unsigned long seq;
        enum verdict lost_how; /* set with OUT_LOST */
};

static const char normal_code[] = "n += 1\nsum(i * i for i in range(20000)) and (marker, n)";
static const char timeout_code[] = "import time\ntime.sleep(30)";
static const char flood_code[] =
        "import sys\nb = 'F' * 65536\nwhile True:\n    sys.stdout.write(b)";
/* The children exec sleep, so the pids limit stops the bomb, not the memory limit (forked
 * Python children each dirty a few MiB); `finally` kills them even when the cell is
 * interrupted. */
static const char fork_code[] = "import os, signal\n"
                                "kids = []\n"
                                "err = None\n"
                                "try:\n"
                                "    while len(kids) < 10000:\n"
                                "        try:\n"
                                "            pid = os.fork()\n"
                                "        except OSError as e:\n"
                                "            err = e.errno\n"
                                "            break\n"
                                "        if pid == 0:\n"
                                "            try:\n"
                                "                os.execv('/bin/sleep', ['sleep', '60'])\n"
                                "            finally:\n"
                                "                os._exit(127)\n"
                                "        kids.append(pid)\n"
                                "finally:\n"
                                "    for p in kids:\n"
                                "        os.kill(p, signal.SIGKILL)\n"
                                "    for p in kids:\n"
                                "        os.waitpid(p, 0)\n"
                                "(len(kids), err)";
/* One string of 1 GiB: a single memset passes the limit. (Growing by 16 MiB steps in a loop
 * took over 10 s of wall time per cell on 2 saturated cores, and ended as timeouts.) */
static const char oom_code[] = "b = 'x' * (1 << 30)";

/* An execution's answer for the ops that must keep the session: the expected status and
 * the state preserved. */
static enum outcome expect_kept(struct worker *w, struct slot *s, int rc, int status,
                                const char *resp, const char *want_status, const char *op)
{
        if (rc < 0) {
                note("%s in %s: %s", op, s->id, strerror(errno));
                return OUT_FAILED;
        }
        if (status == 404 || (status == 200 && has(resp, "\"state\":\"lost\""))) {
                note("%s in %s: the session ended: %d %.*s", op, s->id, status, BODY(resp));
                w->lost_how = LOST_SESSION;
                return OUT_LOST;
        }
        if (status != 200 || !has(resp, want_status) || !has(resp, "\"state\":\"preserved\"")) {
                note("%s in %s: wanted %s, state preserved; got %d %.*s", op, s->id, want_status,
                     status, BODY(resp));
                return OUT_FAILED;
        }
        return OUT_OK;
}

static enum outcome op_normal(struct worker *w, struct slot *s)
{
        char want[96];
        const char *resp = NULL;
        int status = 0, rc;
        enum outcome o;

        rc = execute(&w->c, s->id, normal_code, NULL, &status, &resp);
        o = expect_kept(w, s, rc, status, resp, "\"status\":\"ok\"", "normal cell");
        if (o != OUT_OK)
                return o;
        (void) snprintf(want, sizeof(want), "\"result\":\"('%s', %lu)\"", s->marker, s->n + 1);
        if (!has(resp, want)) {
                note("normal cell in %s: wanted ('%s', %lu), got %.*s", s->id, s->marker, s->n + 1,
                     BODY(resp));
                w->lost_how = LOST_VARIABLE;
                return OUT_LOST;
        }
        s->n++;
        return OUT_OK;
}

static enum outcome op_files(struct worker *w, struct slot *s)
{
        char path[160], want[64], file[128];
        const char *resp = NULL;
        uint64_t sum;
        int status = 0, rc;

        for (size_t i = 0; i + 8 <= FILE_BYTES; i += 8) {
                uint64_t x = rng_next(&w->rng);

                memcpy(w->file + i, &x, 8);
        }
        sum = fnv1a(w->file, FILE_BYTES);
        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/files/xfer-%u-%lu.bin", s->id,
                        w->index, w->seq++);
        (void) snprintf(want, sizeof(want), "\"size\":%u", FILE_BYTES);
        rc = bench_http_raw(&w->c, "PUT", path, "application/octet-stream", w->file, FILE_BYTES,
                            &status, &resp);
        if (rc < 0 || status != 200 || !has(resp, want)) {
                note("PUT %s: %d %.*s%s", path, status, BODY(resp), rc < 0 ? strerror(errno) : "");
                if (rc == 0 && status == 404) {
                        w->lost_how = LOST_SESSION;
                        return OUT_LOST;
                }
                return OUT_FAILED;
        }
        resp = NULL;
        rc = bench_http(&w->c, "GET", path, NULL, &status, &resp);
        if (rc < 0 || status != 200 || w->c.body_len != FILE_BYTES ||
            fnv1a(resp, w->c.body_len) != sum) {
                note("GET %s: %d, %zu bytes back of %u, %s", path, status,
                     rc == 0 ? w->c.body_len : 0, FILE_BYTES,
                     rc < 0                        ? strerror(errno)
                     : w->c.body_len == FILE_BYTES ? "checksum differs"
                                                   : "checksum not compared");
                return OUT_FAILED;
        }
        resp = NULL;
        if (bench_http(&w->c, "DELETE", path, NULL, &status, &resp) < 0 || status != 200) {
                note("DELETE %s: %d %.*s", path, status, BODY(resp));
                return OUT_FAILED;
        }
        marker_file(s, file, sizeof(file));
        (void) snprintf(path, sizeof(path), "/v1/sessions/%s/files/marker.txt", s->id);
        if (bench_http(&w->c, "GET", path, NULL, &status, &resp) < 0) {
                note("GET %s: %s", path, strerror(errno));
                return OUT_FAILED;
        }
        if (status != 200 || w->c.body_len != strlen(file) || memcmp(resp, file, w->c.body_len)) {
                note("GET %s: the marker file is gone or changed: %d %.*s", path, status,
                     BODY(resp));
                w->lost_how = status == 404 && has(resp, "\"state\"") ? LOST_SESSION : LOST_FILE;
                return OUT_LOST;
        }
        return OUT_OK;
}

static enum outcome op_fork(struct worker *w, struct slot *s)
{
        const char *resp = NULL, *p;
        int status = 0, rc, k;
        enum outcome o;

        rc = execute(&w->c, s->id, fork_code, NULL, &status, &resp);
        o = expect_kept(w, s, rc, status, resp, "\"status\":\"ok\"", "fork bomb");
        if (o != OUT_OK)
                return o;
        p = strstr(resp, "\"result\":\"(");
        k = p ? atoi(p + 11) : -1;
        if (!p || !strstr(p, ", 11)\"") || k <= 0 || k > PROFILE_PIDS) {
                note("fork bomb in %s: wanted (k <= %d, 11 = EAGAIN), got %.*s", s->id,
                     PROFILE_PIDS, BODY(resp));
                return OUT_FAILED;
        }
        return OUT_OK;
}

static enum outcome op_oom(struct worker *w, struct slot *s)
{
        const char *resp = NULL;
        int status = 0;

        if (execute(&w->c, s->id, oom_code, NULL, &status, &resp) < 0) {
                note("oom cell in %s: %s", s->id, strerror(errno));
                return OUT_FAILED;
        }
        if (status == 200 && has(resp, "\"status\":\"oom\"") && has(resp, "\"state\":\"lost\"")) {
                atomic_fetch_add(&oom_killed, 1);
                return OUT_DIED;
        }
        if (status == 200 && has(resp, "\"status\":\"error\"") && has(resp, "MemoryError") &&
            has(resp, "\"state\":\"preserved\"")) {
                atomic_fetch_add(&oom_memory_error, 1);
                return OUT_OK;
        }
        note("oom cell in %s: wanted status oom (or a MemoryError), got %d %.*s", s->id, status,
             BODY(resp));
        if (status == 404 || has(resp, "\"state\":\"lost\""))
                return OUT_DIED_FAILED;
        return OUT_FAILED;
}

static enum outcome run_op(struct worker *w, struct slot *s, enum op op)
{
        const char *resp = NULL;
        int status = 0, rc;

        switch (op) {
        case OP_NORMAL:
                return op_normal(w, s);
        case OP_FILES:
                return op_files(w, s);
        case OP_TIMEOUT:
                rc = execute(&w->c, s->id, timeout_code, TIMEOUT_CELL, &status, &resp);
                return expect_kept(w, s, rc, status, resp, "\"status\":\"timeout\"", "timeout");
        case OP_FLOOD:
                rc = execute(&w->c, s->id, flood_code, NULL, &status, &resp);
                return expect_kept(w, s, rc, status, resp, "\"status\":\"output_limit\"", "flood");
        case OP_FORK:
                return op_fork(w, s);
        case OP_OOM:
                return op_oom(w, s);
        case OP_COUNT:
                break;
        }
        return OUT_FAILED;
}

static enum op pick_op(uint64_t *rng)
{
        unsigned total = 0, r;

        for (int i = 0; i < OP_COUNT; i++)
                total += ops[i].weight;
        r = rng_below(rng, total);
        for (int i = 0; i < OP_COUNT; i++) {
                if (r < ops[i].weight)
                        return (enum op) i;
                r -= ops[i].weight;
        }
        return OP_NORMAL;
}

static atomic_uint next_slot;

/* Locks a free slot, starting at a rotating index; NULL if all are busy. */
static struct slot *take_slot(void)
{
        unsigned start = atomic_fetch_add(&next_slot, 1);

        for (unsigned i = 0; i < opt.sessions; i++) {
                struct slot *s = &slots[(start + i) % opt.sessions];

                if (!atomic_load(&s->claimed) && pthread_mutex_trylock(&s->lock) == 0)
                        return s;
        }
        return NULL;
}

static void *worker_main(void *arg)
{
        struct worker *w = arg;

        /* --storm-nice: the storm's clients stand for agents on other hosts; on this one their
         * own CPU (HTTP, 4 MiB checksums) competes with the daemon they load, which the
         * daemon's cgroup weights cannot rank. */
        if (opt.storm_nice &&
            setpriority(PRIO_PROCESS, (id_t) syscall(SYS_gettid), opt.storm_nice) < 0)
                fprintf(stderr, "bench-soak: setpriority(%d): %s\n", opt.storm_nice,
                        strerror(errno));

        while (!atomic_load(&stop_storm)) {
                struct slot *s;
                enum op op;
                enum outcome o;

                pthread_rwlock_rdlock(&gate);
                s = take_slot();
                if (!s) {
                        pthread_rwlock_unlock(&gate);
                        bench_sleep_ms(2);
                        continue;
                }
                if (!s->alive) {
                        if (slot_recreate(&w->c, s, &w->rng) < 0)
                                atomic_fetch_add(&recreate_failed, 1);
                        pthread_mutex_unlock(&s->lock);
                        pthread_rwlock_unlock(&gate);
                        continue;
                }
                op = pick_op(&w->rng);
                o = run_op(w, s, op);
                atomic_fetch_add(&op_done[op], 1);
                if (o == OUT_FAILED) {
                        char why[512];
                        enum verdict v = slot_verify(&w->c, s, why, sizeof(why));

                        /* after an unexpected answer: are the markers still there? */
                        if (v == UNKNOWN)
                                atomic_fetch_add(&verify_unknown, 1);
                        else if (v != INTACT) {
                                note("slot %u after a failed %s: %s: %s", s->index, ops[op].name,
                                     verdict_names[v], why);
                                w->lost_how = v;
                                o = OUT_LOST;
                        }
                }
                if (o != OUT_OK && o != OUT_DIED)
                        atomic_fetch_add(&op_failed[op], 1);
                if (o == OUT_LOST)
                        atomic_fetch_add(&lost[w->lost_how], 1);
                if ((o == OUT_LOST || o == OUT_DIED || o == OUT_DIED_FAILED) &&
                    slot_recreate(&w->c, s, &w->rng) < 0)
                        atomic_fetch_add(&recreate_failed, 1);
                pthread_mutex_unlock(&s->lock);
                pthread_rwlock_unlock(&gate);
                if (opt.think_ms)
                        bench_sleep_ms(opt.think_ms);
        }
        return NULL;
}

/* ---- the well-behaved client ---- */

struct samples {
        uint64_t *ns;
        size_t n, cap;
};

static int samples_add(struct samples *s, uint64_t v)
{
        if (s->n == s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 4096;
                uint64_t *p = realloc(s->ns, cap * sizeof(*p));

                if (!p)
                        return -1;
                s->ns = p;
                s->cap = cap;
        }
        s->ns[s->n++] = v;
        return 0;
}

static struct {
        pthread_mutex_t lock;
        struct samples before, during;
        size_t shown;      /* during-samples already summarised in a progress line */
        atomic_bool storm; /* the samples go to during */
        unsigned long failures, sessions_killed, improper, dead_handouts;
        char id[64];
} hot = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- chaos ---- */

static struct {
        atomic_ulong kills_zygote, kills_session, recovered, failed, skipped;
        /* what killed sessions answered */
        atomic_ulong reported, intact, improper;
        atomic_ulong dead_handouts, no_new_session, recreate_failed;
        atomic_ullong max_recovery_ns;
} chaos;

/* What a session that was killed answered to an execution: 404 or a lost state is right, and
 * so is its state intact (replaced by the daemon); anything else (a 500) is not. */
enum killed_answer { KILLED_REPORTED, KILLED_INTACT, KILLED_IMPROPER };

static enum killed_answer classify_killed(int rc, int status, const char *resp,
                                          const char *want_result)
{
        if (rc < 0)
                return KILLED_IMPROPER;
        if (status == 404 && has(resp, "\"reason\"") &&
            (has(resp, "\"state\":\"lost\"") || has(resp, "\"state\":\"ended\"")))
                return KILLED_REPORTED;
        if (status == 200 && has(resp, "\"state\":\"lost\""))
                return KILLED_REPORTED;
        if (status == 200 && has(resp, "\"state\":\"preserved\"") && has(resp, want_result))
                return KILLED_INTACT;
        return KILLED_IMPROPER;
}

static void hot_new_session(struct bench_conn *c)
{
        uint64_t deadline = bench_now_ns() + RECOVERY_S * S;
        char why[512];

        delete_session(c, hot.id);
        while (!atomic_load(&stop_all)) {
                const char *resp;
                int status = 0;

                if (create_session(c, "default", hot.id, sizeof(hot.id), why, sizeof(why)) == 0) {
                        if (execute(c, hot.id, "1", NULL, &status, &resp) == 0 && status == 200 &&
                            has(resp, "\"result\":\"1\""))
                                return;
                        hot.dead_handouts++;
                        delete_session(c, hot.id);
                }
                if (bench_now_ns() > deadline) {
                        note("the well-behaved client has no working session after %d s",
                             RECOVERY_S);
                        deadline = bench_now_ns() + RECOVERY_S * S;
                }
                bench_sleep_ms(100);
        }
}

static void *hot_main(void *arg)
{
        struct bench_conn *c = arg;

        while (!atomic_load(&stop_all)) {
                const char *resp = NULL;
                int status = 0, rc;
                uint64_t t0 = bench_now_ns(), t;

                rc = execute(c, hot.id, "1", NULL, &status, &resp);
                t = bench_now_ns() - t0;
                if (rc == 0 && status == 200 && has(resp, "\"result\":\"1\"")) {
                        pthread_mutex_lock(&hot.lock);
                        (void) samples_add(atomic_load(&hot.storm) ? &hot.during : &hot.before, t);
                        pthread_mutex_unlock(&hot.lock);
                        bench_sleep_ms(HOT_PAUSE_MS);
                        continue;
                }
                if (atomic_load(&stop_all))
                        break;
                /* With --chaos its session dies with the default zygote; say whether the
                 * daemon told it so. Without, any failure is one. */
                if (opt.chaos &&
                    classify_killed(rc, status, resp, "\"result\":\"1\"") == KILLED_REPORTED)
                        hot.sessions_killed++;
                else {
                        note("well-behaved client: execute 1 in %s: %d %.*s%s", hot.id, status,
                             BODY(resp), rc < 0 ? strerror(errno) : "");
                        if (opt.chaos)
                                hot.improper++;
                        else
                                hot.failures++;
                }
                hot_new_session(c);
        }
        return NULL;
}

/* One kill and its checks, printed as one line. */
struct round {
        char what[128];    /* what was killed */
        uint64_t waited;   /* ns to get hold of the target (operations in flight finishing) */
        uint64_t recovery; /* ns from the kill to a new session running `1` */
        unsigned reported, intact, improper; /* what the killed sessions answered */
        char problem[400];                   /* the first thing that went wrong */
};

static __attribute__((format(printf, 2, 3))) void round_problem(struct round *r, const char *fmt,
                                                                ...)
{
        va_list ap;

        if (r->problem[0])
                return;
        va_start(ap, fmt);
        (void) vsnprintf(r->problem, sizeof(r->problem), fmt, ap);
        va_end(ap);
}

/* A new session of `profile` runs, within RECOVERY_S; false if not, or if a session created
 * on the way could not run (a dead sandbox handed out: its client got an error). */
static bool recovers(struct bench_conn *c, const char *profile, uint64_t t_kill, struct round *r)
{
        uint64_t deadline = t_kill + RECOVERY_S * S;
        bool clean = true;
        char why[512];

        for (;;) {
                if (!daemon_alive()) {
                        round_problem(r, "the daemon died");
                        return false;
                }
                if (session_runs(c, profile, why, sizeof(why)) == 0)
                        break;
                if (strncmp(why, "POST /v1/sessions", 17) != 0) {
                        /* created, but could not run: a dead sandbox handed out */
                        atomic_fetch_add(&chaos.dead_handouts, 1);
                        round_problem(r, "a new session handed out dead: %s", why);
                        clean = false;
                }
                if (bench_now_ns() > deadline) {
                        atomic_fetch_add(&chaos.no_new_session, 1);
                        round_problem(r, "no new %s session runs %d s after the kill: %s", profile,
                                      RECOVERY_S, why);
                        return false;
                }
                bench_sleep_ms(100);
        }
        r->recovery = bench_now_ns() - t_kill;
        if (r->recovery > atomic_load(&chaos.max_recovery_ns))
                atomic_store(&chaos.max_recovery_ns, r->recovery);
        return clean;
}

/* After its session (or its zygote) was killed: what does slot s answer? Recreates it unless
 * its markers are intact. false when something was wrong. */
static bool check_killed_slot(struct bench_conn *c, struct slot *s, uint64_t *rng, struct round *r)
{
        char want[96];
        const char *resp = NULL;
        int status = 0, rc;
        bool ok = true;

        (void) snprintf(want, sizeof(want), "\"result\":\"('%s', %lu)\"", s->marker, s->n);
        rc = execute(c, s->id, "(marker, n)", NULL, &status, &resp);
        switch (classify_killed(rc, status, resp, want)) {
        case KILLED_REPORTED:
                atomic_fetch_add(&chaos.reported, 1);
                r->reported++;
                break;
        case KILLED_INTACT:
                atomic_fetch_add(&chaos.intact, 1);
                r->intact++;
                return true;
        case KILLED_IMPROPER:
                atomic_fetch_add(&chaos.improper, 1);
                r->improper++;
                round_problem(r,
                              "killed session %s answered neither 404 lost/ended nor with its "
                              "markers: %d %.*s%s",
                              s->id, status, BODY(resp), rc < 0 ? strerror(errno) : "");
                ok = false;
                break;
        }
        if (slot_recreate(c, s, rng) < 0) {
                atomic_fetch_add(&chaos.recreate_failed, 1);
                round_problem(r, "slot %u could not be recreated", s->index);
                ok = false;
        }
        return ok;
}

enum round_result { ROUND_SKIPPED, ROUND_RECOVERED, ROUND_FAILED };

static enum round_result chaos_zygote(struct bench_conn *c, uint64_t *rng, struct proc *procs,
                                      size_t max, struct round *r)
{
        char profile[64], *dash;
        struct proc *z[16], *target;
        size_t nz = 0;
        uint64_t t0 = bench_now_ns(), t_kill;
        long n;
        bool ok;

        /* every operation in flight ends first; none starts until the sessions are checked */
        pthread_rwlock_wrlock(&gate);
        r->waited = bench_now_ns() - t0;
        n = daemon_processes(procs, max);
        for (long i = 0; i < n && nz < 16; i++)
                if (!strncmp(procs[i].cgroup, "airlock-zygote-", 15))
                        z[nz++] = &procs[i];
        if (nz == 0) {
                pthread_rwlock_unlock(&gate);
                return ROUND_SKIPPED;
        }
        target = z[rng_below(rng, (unsigned) nz)];
        (void) snprintf(profile, sizeof(profile), "%s", target->cgroup + 15);
        dash = strrchr(profile, '-'); /* airlock-zygote-PROFILE-HEX */
        if (dash)
                *dash = '\0';
        (void) snprintf(r->what, sizeof(r->what), "the %s zygote (pid %d)", profile,
                        (int) target->pid);
        t_kill = bench_now_ns();
        if (kill_daemon_process(target->pid, target->cgroup) < 0) {
                pthread_rwlock_unlock(&gate);
                return ROUND_SKIPPED;
        }
        atomic_fetch_add(&chaos.kills_zygote, 1);
        ok = recovers(c, profile, t_kill, r);
        /* the storm sessions are the soak zygote's; the well-behaved client, whose session
         * is the default zygote's, checks its own */
        if (daemon_alive() && !strcmp(profile, PROFILE))
                for (unsigned i = 0; i < opt.sessions && !atomic_load(&stop_all); i++)
                        if (slots[i].alive)
                                ok = check_killed_slot(c, &slots[i], rng, r) && ok;
        pthread_rwlock_unlock(&gate);
        return ok ? ROUND_RECOVERED : ROUND_FAILED;
}

static enum round_result chaos_session(struct bench_conn *c, uint64_t *rng, struct proc *procs,
                                       size_t max, struct round *r)
{
        unsigned start = rng_below(rng, opt.sessions);
        struct slot *s = NULL;
        char cgroup[96];
        size_t mine[8], nm = 0;
        uint64_t t0 = bench_now_ns(), t_kill;
        struct proc *target;
        long n;
        bool ok;

        /* a session no worker is using, else wait for the one picked */
        for (unsigned i = 0; i < opt.sessions && !s; i++)
                if (pthread_mutex_trylock(&slots[(start + i) % opt.sessions].lock) == 0)
                        s = &slots[(start + i) % opt.sessions];
        if (!s) {
                s = &slots[start];
                atomic_store(&s->claimed, true); /* else the workers could starve us */
                pthread_mutex_lock(&s->lock);
                atomic_store(&s->claimed, false);
        }
        r->waited = bench_now_ns() - t0;
        if (!s->alive) {
                pthread_mutex_unlock(&s->lock);
                return ROUND_SKIPPED;
        }
        (void) snprintf(cgroup, sizeof(cgroup), "airlock-%s", s->id);
        n = daemon_processes(procs, max);
        for (long i = 0; i < n && nm < 8; i++)
                if (!strcmp(procs[i].cgroup, cgroup))
                        mine[nm++] = (size_t) i;
        /* none: the session is stopped (no process), which a kill cannot test */
        if (nm == 0) {
                pthread_mutex_unlock(&s->lock);
                return ROUND_SKIPPED;
        }
        target = &procs[mine[rng_below(rng, (unsigned) nm)]];
        (void) snprintf(r->what, sizeof(r->what), "session %s, pid %d of its %zu", s->id,
                        (int) target->pid, nm);
        t_kill = bench_now_ns();
        if (kill_daemon_process(target->pid, cgroup) < 0) {
                pthread_mutex_unlock(&s->lock);
                return ROUND_SKIPPED;
        }
        atomic_fetch_add(&chaos.kills_session, 1);
        bench_sleep_ms(200); /* time for the daemon to notice, should it watch */
        ok = check_killed_slot(c, s, rng, r);
        ok = recovers(c, PROFILE, t_kill, r) && ok;
        pthread_mutex_unlock(&s->lock);
        return ok ? ROUND_RECOVERED : ROUND_FAILED;
}

static void *chaos_main(void *arg)
{
        struct bench_conn *c = arg;
        size_t max = 4 * (size_t) opt.sessions + 1024;
        struct proc *procs = calloc(max, sizeof(*procs));
        uint64_t rng = rng_seed(0xc4a05);

        if (!procs)
                return NULL;
        while (!atomic_load(&stop_storm)) {
                unsigned wait = CHAOS_MIN_MS + rng_below(&rng, CHAOS_MAX_MS - CHAOS_MIN_MS);
                struct round r = { .what = "nothing" };
                enum round_result res;

                for (unsigned t = 0; t < wait && !atomic_load(&stop_storm); t += 100)
                        bench_sleep_ms(100);
                if (atomic_load(&stop_storm))
                        break;
                if (rng_below(&rng, 100) < 30)
                        res = chaos_zygote(c, &rng, procs, max, &r);
                else
                        res = chaos_session(c, &rng, procs, max, &r);
                if (!daemon_alive()) {
                        atomic_store(&daemon_died, true);
                        round_problem(&r, "the daemon died");
                        res = ROUND_FAILED;
                }
                if (res == ROUND_SKIPPED) {
                        atomic_fetch_add(&chaos.skipped, 1);
                        continue;
                }
                atomic_fetch_add(res == ROUND_RECOVERED ? &chaos.recovered : &chaos.failed, 1);
                printf("chaos [%6.1f s] killed %s (after %.1f s waiting for it); killed sessions "
                       "answered: %u lost/ended, %u intact, %u neither; a new session ran after "
                       "%.2f s: %s%s\n",
                       secs(bench_now_ns() - t_start), r.what, secs(r.waited), r.reported, r.intact,
                       r.improper, secs(r.recovery),
                       res == ROUND_RECOVERED ? "recovered" : "FAILED: ", r.problem);
        }
        free(procs);
        return NULL;
}

/* ---- the daemon's memory over time ---- */

struct sample {
        uint64_t t; /* ns since the storm started (0 before it) */
        unsigned long long rss_kb;
        unsigned threads, fds;
};

static struct {
        pthread_mutex_t lock;
        struct sample *v;
        size_t n, cap;
        atomic_ullong storm_start; /* 0 until the storm starts */
} mem = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct sample sample_now(void)
{
        uint64_t start = atomic_load(&mem.storm_start);
        struct sample x = {
                .t = start ? bench_now_ns() - start : 0,
                .rss_kb = bench_proc_field(bd.pid, "status", "VmRSS"),
                .threads = (unsigned) bench_proc_field(bd.pid, "status", "Threads"),
                .fds = bench_proc_fds(bd.pid),
        };

        return x;
}

static void *sampler_main(void *arg)
{
        (void) arg;
        while (!atomic_load(&stop_all)) {
                struct sample x;

                if (!daemon_alive()) {
                        atomic_store(&daemon_died, true);
                        atomic_store(&stop_storm, true);
                        break;
                }
                x = sample_now();
                pthread_mutex_lock(&mem.lock);
                if (atomic_load(&mem.storm_start)) {
                        if (mem.n == mem.cap) {
                                size_t cap = mem.cap ? mem.cap * 2 : 512;
                                struct sample *p = realloc(mem.v, cap * sizeof(*p));

                                if (p) {
                                        mem.v = p;
                                        mem.cap = cap;
                                }
                        }
                        if (mem.n < mem.cap)
                                mem.v[mem.n++] = x;
                }
                pthread_mutex_unlock(&mem.lock);
                for (unsigned t = 0; t < SAMPLE_MS && !atomic_load(&stop_all); t += 100)
                        bench_sleep_ms(100);
        }
        return NULL;
}

/* ---- reports ---- */

static unsigned live_sessions(struct bench_conn *c)
{
        const char *resp, *p;
        unsigned n = 0;
        int status = 0;

        if (bench_http(c, "GET", "/v1/sessions?state=live", NULL, &status, &resp) < 0 ||
            status != 200)
                return 0;
        for (p = resp; (p = strstr(p, "\"id\":\"s-")); p++)
                n++;
        return n;
}

static unsigned long sum(atomic_ulong *v, int n)
{
        unsigned long t = 0;

        for (int i = 0; i < n; i++)
                t += atomic_load(&v[i]);
        return t;
}

static void progress(struct bench_conn *c, uint64_t storm_start)
{
        struct sample x = sample_now();
        char line[1024], hotbuf[128] = "no samples";
        size_t off = 0, n;
        uint64_t *copy = NULL;

        pthread_mutex_lock(&hot.lock);
        n = hot.during.n - hot.shown;
        if (n)
                copy = malloc(n * sizeof(*copy));
        if (copy)
                memcpy(copy, hot.during.ns + hot.shown, n * sizeof(*copy));
        hot.shown = hot.during.n;
        pthread_mutex_unlock(&hot.lock);
        if (copy) {
                /* bench_report prints a line of its own; here one compact figure is wanted */
                qsort(copy, n, sizeof(*copy), cmp_u64);
                (void) snprintf(hotbuf, sizeof(hotbuf), "p50 %.2f p99 %.2f ms",
                                (double) bench_percentile(copy, n, 0.5) / 1e6,
                                (double) bench_percentile(copy, n, 0.99) / 1e6);
                free(copy);
        }
        off += (size_t) snprintf(line + off, sizeof(line) - off, "[%5.0f s] ops %lu (",
                                 secs(bench_now_ns() - storm_start), sum(op_done, OP_COUNT));
        for (int i = 0; i < OP_COUNT; i++)
                off += (size_t) snprintf(line + off, sizeof(line) - off, "%s%s %lu", i ? " " : "",
                                         ops[i].name, atomic_load(&op_done[i]));
        off += (size_t) snprintf(line + off, sizeof(line) - off,
                                 ") failed %lu lost %lu | hot %s | daemon RSS %.1f MiB, %u "
                                 "threads, %u fds | live sessions %u",
                                 sum(op_failed, OP_COUNT), sum(lost, UNKNOWN), hotbuf,
                                 mib(x.rss_kb), x.threads, x.fds, live_sessions(c));
        if (opt.chaos)
                (void) snprintf(line + off, sizeof(line) - off,
                                " | chaos kills %lu, recovered %lu, failed %lu",
                                atomic_load(&chaos.kills_zygote) +
                                        atomic_load(&chaos.kills_session),
                                atomic_load(&chaos.recovered), atomic_load(&chaos.failed));
        printf("%s\n", line);
}

/* The sample closest to `t` ns into the storm. */
static const struct sample *sample_at(uint64_t t)
{
        const struct sample *best = NULL;

        for (size_t i = 0; i < mem.n; i++)
                if (!best || (mem.v[i].t > t ? mem.v[i].t - t : t - mem.v[i].t) <
                                     (best->t > t ? best->t - t : t - best->t))
                        best = &mem.v[i];
        return best;
}

static void report_memory(unsigned long long rss_setup_kb)
{
        unsigned long long lo = ~0ull, hi = 0;
        unsigned tlo = ~0u, thi = 0, flo = ~0u, fhi = 0;
        const struct sample *first, *last, *ref;
        uint64_t warm;

        pthread_mutex_lock(&mem.lock);
        if (mem.n == 0) {
                pthread_mutex_unlock(&mem.lock);
                printf("daemon memory: no samples\n");
                return;
        }
        for (size_t i = 0; i < mem.n; i++) {
                const struct sample *x = &mem.v[i];

                lo = x->rss_kb < lo ? x->rss_kb : lo;
                hi = x->rss_kb > hi ? x->rss_kb : hi;
                tlo = x->threads < tlo ? x->threads : tlo;
                thi = x->threads > thi ? x->threads : thi;
                flo = x->fds < flo ? x->fds : flo;
                fhi = x->fds > fhi ? x->fds : fhi;
        }
        first = &mem.v[0];
        last = &mem.v[mem.n - 1];
        /* growth is counted after the first minute (or the first quarter of a shorter run):
         * buffers, pools and caches settle in that time */
        warm = last->t / 4 < 60 * S ? last->t / 4 : 60 * S;
        ref = sample_at(warm);
        printf("daemon VmRSS: %.1f MiB after setup; during the storm (%zu samples, every %d s) "
               "first %.1f, min %.1f, max %.1f, last %.1f MiB\n",
               mib(rss_setup_kb), mem.n, SAMPLE_MS / 1000, mib(first->rss_kb), mib(lo), mib(hi),
               mib(last->rss_kb));
        printf("daemon VmRSS growth from t=%.0f s (%.1f MiB) to the end (t=%.0f s): %+.1f MiB "
               "(%+.1f%%)\n",
               secs(ref->t), mib(ref->rss_kb), secs(last->t), mib(last->rss_kb) - mib(ref->rss_kb),
               ref->rss_kb ? 100.0 * ((double) last->rss_kb - (double) ref->rss_kb) /
                                     (double) ref->rss_kb
                           : 0.0);
        printf("daemon threads: first %u, min %u, max %u, last %u; open fds: first %u, min %u, "
               "max %u, last %u\n",
               first->threads, tlo, thi, last->threads, first->fds, flo, fhi, last->fds);
        pthread_mutex_unlock(&mem.lock);
}

static void report_sandboxes(const char *when, const struct sandboxes *m)
{
        printf("sandboxes %s: %u storm sessions (%u processes) PSS %.1f MiB, %.2f MiB each; "
               "%u other sessions (pools, the well-behaved client) %.1f MiB; %u zygotes %.1f "
               "MiB\n",
               when, m->storm, m->storm_procs, mib(m->storm_pss_kb),
               m->storm ? mib(m->storm_pss_kb) / m->storm : 0.0, m->other, mib(m->other_pss_kb),
               m->zygotes, mib(m->zygote_pss_kb));
}

/* What the default run (200 sessions, 24 workers) takes, from the PSS per storm session
 * measured here, against the host's memory: every worker in an OOM cell at once is the worst
 * case, plus the file each transfers (in the sandbox's /work, and in the client twice). */
static void report_fit(const struct sandboxes *m, unsigned long long rss_kb)
{
        const unsigned sessions = 200, workers = 24, per_worker = PROFILE_MEMORY_MIB + 3 * 4;
        double each = m->storm ? mib(m->storm_pss_kb) / m->storm : 0.0;
        double total = sessions * each + workers * per_worker + mib(m->other_pss_kb) +
                       mib(m->zygote_pss_kb) + mib(rss_kb);
        double host = mib(mem_total_kb());

        printf("memory of a default run: %u x %.2f MiB sessions + %u workers x %u MiB (all in an "
               "OOM cell at once, with their files) + the rest %.1f MiB = %.1f GiB of %.1f GiB: "
               "%s\n",
               sessions, each, workers, per_worker,
               mib(m->other_pss_kb) + mib(m->zygote_pss_kb) + mib(rss_kb), total / 1024,
               host / 1024, total < host * 0.75 ? "fits" : "DOES NOT FIT");
}

/* ---- main ---- */

static void on_signal(int sig)
{
        got_signal = sig;
        /* the requests in flight fail at once, and main cleans up */
        if (bd.pid > 0)
                (void) kill(bd.pid, SIGTERM);
}

static void remove_profile_dir(void)
{
        char path[128];

        if (!profile_dir[0])
                return;
        (void) snprintf(path, sizeof(path), "%s/%s.json", profile_dir, PROFILE);
        (void) unlink(path);
        (void) rmdir(profile_dir);
        profile_dir[0] = '\0';
}

static int write_profile(void)
{
        char path[128];
        FILE *f;

        (void) snprintf(profile_dir, sizeof(profile_dir), "/tmp/airlock-soak-profiles-XXXXXX");
        if (!mkdtemp(profile_dir)) {
                perror("bench-soak: mkdtemp");
                profile_dir[0] = '\0';
                return -1;
        }
        atexit(remove_profile_dir);
        (void) snprintf(path, sizeof(path), "%s/%s.json", profile_dir, PROFILE);
        f = fopen(path, "we");
        if (!f || fputs(PROFILE_JSON, f) < 0 || fclose(f) != 0) {
                perror("bench-soak: writing the soak profile");
                return -1;
        }
        return setenv("AIRLOCK_PROFILES_DIR", profile_dir, 1);
}

/* The host's load average: other work on the machine, which the daemon's CPU weights cannot
 * rank, weighs on the figures; printed so that a run can be read with it. */
static void print_loadavg(const char *when)
{
        char buf[128] = "";
        FILE *f = fopen("/proc/loadavg", "re");

        if (f) {
                if (!fgets(buf, sizeof(buf), f))
                        buf[0] = '\0';
                (void) fclose(f);
        }
        buf[strcspn(buf, "\n")] = '\0';
        printf("load average at %s: %s\n", when, buf[0] ? buf : "(unreadable)");
}

static const char usage[] =
        "usage: bench-soak [AIRLOCK_BINARY] [OPTIONS]\n"
        "  --sessions N    storm sessions (default 200)\n"
        "  --duration S    length of the storm in seconds (default 600)\n"
        "  --chaos         also SIGKILL zygotes and session processes at random, every 3-8 s,\n"
        "                  and check that the daemon recovers each time\n"
        "  --seed N        seed of the random choices (default: from the clock, printed)\n"
        "  --workers N     storm threads, each with its own connection (default 24)\n"
        "  --baseline S    seconds of the latency baseline before the storm (default 20)\n"
        "  --progress S    seconds between progress lines (default 15)\n"
        "  --think-ms N    pause of each worker between operations (default 0)\n"
        "  --storm-nice N  run the storm's client threads at nice N (0-19, default 0): they\n"
        "                  stand for agents on other hosts, and here compete with the daemon\n"
        "AIRLOCK_BINARY defaults to $AIRLOCK_BIN, else build/src/cli/airlock.\n";

static int parse_number(const char *s, unsigned long long min, unsigned long long max,
                        unsigned long long *ret)
{
        unsigned long long v;
        char *end;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (!*s || *end || errno || s[0] == '-' || v < min || v > max) {
                fprintf(stderr, "bench-soak: '%s' is not a number from %llu to %llu\n%s", s, min,
                        max, usage);
                return -1;
        }
        *ret = v;
        return 0;
}

/* The options that take a number, in the order of their getopt values from OPT_NUMBER. */
enum { OPT_NUMBER = 256 };

static const struct {
        const char *name;
        unsigned long long min, max;
        unsigned *value;
} numbers[] = {
        { "sessions", 1, 5000, &opt.sessions },
        { "duration", 1, 7 * 24 * 3600, &opt.duration_s },
        { "workers", 1, 256, &opt.workers },
        { "baseline", 1, 3600, &opt.baseline_s },
        { "progress", 1, 3600, &opt.progress_s },
        { "think-ms", 0, 60000, &opt.think_ms },
        { "storm-nice", 0, 19, &opt.storm_nice_u },
};

#define N_NUMBERS (sizeof(numbers) / sizeof(numbers[0]))

static int parse_options(int argc, char **argv, const char **ret_bin)
{
        struct option longopts[N_NUMBERS + 4] = {
                [N_NUMBERS] = { "chaos", no_argument, NULL, 'c' },
                [N_NUMBERS + 1] = { "seed", required_argument, NULL, 'r' },
                [N_NUMBERS + 2] = { "help", no_argument, NULL, 'h' },
        };
        unsigned long long v = 0;
        int c, next;

        opt = (struct options){ .sessions = 200,
                                .duration_s = 600,
                                .workers = 24,
                                .baseline_s = 20,
                                .progress_s = 15,
                                .seed = (uint64_t) time(NULL) };
        for (size_t i = 0; i < N_NUMBERS; i++)
                longopts[i] = (struct option){ numbers[i].name, required_argument, NULL,
                                               OPT_NUMBER + (int) i };
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                if (c >= OPT_NUMBER && c < OPT_NUMBER + (int) N_NUMBERS) {
                        if (parse_number(optarg, numbers[c - OPT_NUMBER].min,
                                         numbers[c - OPT_NUMBER].max, &v) < 0)
                                return -1;
                        *numbers[c - OPT_NUMBER].value = (unsigned) v;
                } else if (c == 'c') {
                        opt.chaos = true;
                } else if (c == 'r') {
                        if (parse_number(optarg, 0, UINT64_MAX, &v) < 0)
                                return -1;
                        opt.seed = v;
                } else if (c == 'h') {
                        fputs(usage, stdout);
                        exit(0);
                } else {
                        fputs(usage, stderr);
                        return -1;
                }
        }
        if (argc - optind > 1) {
                fputs(usage, stderr);
                return -1;
        }
        *ret_bin = optind < argc ? argv[optind] : bench_airlock_bin(1, argv, &next);
        if (opt.workers > opt.sessions)
                opt.workers = opt.sessions; /* one operation at a time per session */
        opt.storm_nice = (int) opt.storm_nice_u;
        return 0;
}

static pthread_t sampler_thread, hot_thread, chaos_thread;
static bool sampler_started, hot_started, chaos_started;
static struct worker *workers;
static unsigned workers_started;

/* The workers and the chaos thread, after the operation or kill each is in. */
static void stop_storm_threads(void)
{
        atomic_store(&stop_storm, true);
        for (unsigned i = 0; i < workers_started; i++)
                pthread_join(workers[i].thread, NULL);
        workers_started = 0;
        if (chaos_started)
                pthread_join(chaos_thread, NULL);
        chaos_started = false;
}

static void stop_all_threads(void)
{
        stop_storm_threads();
        atomic_store(&stop_all, true);
        if (hot_started)
                pthread_join(hot_thread, NULL);
        hot_started = false;
        if (sampler_started)
                pthread_join(sampler_thread, NULL);
        sampler_started = false;
}

/* Stops every thread that runs, then the daemon (by its pid), and exits 1. */
static _Noreturn __attribute__((format(printf, 1, 2))) void fail(const char *fmt, ...)
{
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        stop_all_threads();
        if (got_signal)
                bench_die(&bd, "interrupted by signal %d (%s)", (int) got_signal, msg);
        bench_die(&bd, "%s", msg);
}

static void setup_sessions(struct bench_conn *c, uint64_t *rng)
{
        uint64_t t0 = bench_now_ns();
        char why[512];

        for (unsigned i = 0; i < opt.sessions; i++) {
                struct slot *s = &slots[i];

                if (got_signal)
                        fail("setup interrupted");
                pthread_mutex_init(&s->lock, NULL);
                s->index = i;
                if (slot_create(c, s, rng, why, sizeof(why)) < 0 &&
                    slot_create(c, s, rng, why, sizeof(why)) < 0)
                        fail("setup of session %u of %u: %s", i + 1, opt.sessions, why);
                if ((i + 1) % 50 == 0 && i + 1 < opt.sessions)
                        printf("setup: %u/%u sessions, %.1f s\n", i + 1, opt.sessions,
                               secs(bench_now_ns() - t0));
        }
        printf("setup: %u sessions of profile %s with markers in %.1f s (%.1f ms each)\n",
               opt.sessions, PROFILE, secs(bench_now_ns() - t0),
               (double) (bench_now_ns() - t0) / 1e6 / opt.sessions);
}

/* At the end: every session's markers, then the daemon still starts new sessions. */
static unsigned long final_checks(struct bench_conn *c, unsigned long *ret_unknown,
                                  bool *ret_healthy)
{
        unsigned long bad = 0, intact = 0, dead = 0;
        char why[512];

        *ret_unknown = 0;
        for (unsigned i = 0; i < opt.sessions; i++) {
                struct slot *s = &slots[i];
                enum verdict v;

                if (!s->alive) {
                        dead++;
                        continue;
                }
                v = slot_verify(c, s, why, sizeof(why));
                if (v == INTACT)
                        intact++;
                else if (v == UNKNOWN) {
                        (*ret_unknown)++;
                        printf("final check of slot %u: could not tell: %s\n", i, why);
                } else {
                        atomic_fetch_add(&lost[v], 1);
                        bad++;
                        printf("final check of slot %u: %s: %s\n", i, verdict_names[v], why);
                }
        }
        printf("final check: %lu sessions with marker, counter and marker file intact, %lu lost, "
               "%lu could not be checked, %lu without a session (recreation failed)\n",
               intact, bad, *ret_unknown, dead);
        *ret_healthy = daemon_alive();
        if (*ret_healthy) {
                const char *resp;
                int status = 0;

                if (bench_http(c, "GET", "/healthz", NULL, &status, &resp) < 0 || status != 200) {
                        note("final check: GET /healthz answered %d", status);
                        *ret_healthy = false;
                }
                for (int i = 0; i < 2; i++) {
                        const char *profile = i ? "default" : PROFILE;

                        if (session_runs(c, profile, why, sizeof(why)) < 0) {
                                note("final check: a new %s session: %s", profile, why);
                                *ret_healthy = false;
                        }
                }
        }
        printf("final check: daemon %s\n",
               *ret_healthy ? "alive, /healthz ok, new sessions of both profiles run"
                            : "NOT healthy (see above)");
        return dead;
}

static void report_ops(void)
{
        printf("storm operations (done / unexpected outcome):");
        for (int i = 0; i < OP_COUNT; i++)
                printf(" %s %lu/%lu", ops[i].name, atomic_load(&op_done[i]),
                       atomic_load(&op_failed[i]));
        printf("\n  oom: %lu sessions OOM-killed and recreated (expected), %lu MemoryErrors "
               "survived\n",
               atomic_load(&oom_killed), atomic_load(&oom_memory_error));
        printf("  lost without a reason: %lu (variable %lu, file %lu, session %lu); recreations "
               "failed: %lu; markers not checkable after a failure: %lu\n",
               sum(lost, UNKNOWN), atomic_load(&lost[LOST_VARIABLE]), atomic_load(&lost[LOST_FILE]),
               atomic_load(&lost[LOST_SESSION]), atomic_load(&recreate_failed),
               atomic_load(&verify_unknown));
}

static void report_chaos(void)
{
        printf("chaos: %lu zygotes and %lu session processes killed (%lu picks skipped: target "
               "gone or stopped); recovered %lu, FAILED %lu\n",
               atomic_load(&chaos.kills_zygote), atomic_load(&chaos.kills_session),
               atomic_load(&chaos.skipped), atomic_load(&chaos.recovered),
               atomic_load(&chaos.failed));
        printf("  killed sessions answered: 404 or state lost %lu, intact %lu, neither "
               "(improper) %lu; recreations failed %lu\n",
               atomic_load(&chaos.reported), atomic_load(&chaos.intact),
               atomic_load(&chaos.improper), atomic_load(&chaos.recreate_failed));
        printf("  new sessions after a kill: dead hand-outs %lu, none running within %d s %lu; "
               "slowest recovery %.2f s\n",
               atomic_load(&chaos.dead_handouts), RECOVERY_S, atomic_load(&chaos.no_new_session),
               secs(atomic_load(&chaos.max_recovery_ns)));
        printf("  well-behaved client: its session killed %lu times (told so), improper "
               "answers %lu, dead hand-outs %lu\n",
               hot.sessions_killed, hot.improper, hot.dead_handouts);
}

int main(int argc, char **argv)
{
        struct bench_conn c, hot_conn, chaos_conn;
        struct sandboxes before, after;
        unsigned long long rss_setup;
        unsigned long dead = 0, unknown = 0;
        uint64_t rng, storm_start, storm_end, next_progress, p99_before = 0, p99_during = 0;
        char max_sessions[32], why[512], cpus[64];
        const char *extra[] = { "--max-sessions", max_sessions, NULL };
        const char *bin, *resp;
        bool healthy = false, pass;
        int status;

        setvbuf(stdout, NULL, _IOLBF, 0);
        t_start = bench_now_ns();
        if (parse_options(argc, argv, &bin) < 0)
                return 2;
        rng = rng_seed(0x5e7);
        slots = calloc(opt.sessions, sizeof(*slots));
        workers = calloc(opt.workers, sizeof(*workers));
        if (!slots || !workers)
                return 1;
        {
                pthread_rwlockattr_t attr;

                /* a zygote kill must not wait for the workers to run out of work */
                pthread_rwlockattr_init(&attr);
                pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
                pthread_rwlock_init(&gate, &attr);
                pthread_rwlockattr_destroy(&attr);
        }
        (void) snprintf(max_sessions, sizeof(max_sessions), "%u", opt.sessions + 64);
        if (bench_pin_cpus(2, cpus, sizeof(cpus)) < 0) {
                perror("bench-soak: sched_setaffinity");
                return 1;
        }
        if (write_profile() < 0)
                return 1;

        bench_catch_signals(on_signal); /* a signal ends the wait in progress: fail() cleans up */

        if (bench_daemon_start(&bd, bin, extra) < 0)
                return 1;
        if (got_signal)
                fail("interrupted at start");
        bench_conn_init(&c, &bd);
        bench_conn_init(&hot_conn, &bd);
        bench_conn_init(&chaos_conn, &bd);
        if (bench_daemon_wait_log(&bd, "zygote ready", 20000) < 0)
                fail("the daemon did not log 'zygote ready' within 20 s");
        printf("bench-soak: %u sessions, %u workers, storm %u s after a %u s baseline%s, seed "
               "%llu; daemon pid %d, cpus %s, state dir %s/state, profile %s in %s\n",
               opt.sessions, opt.workers, opt.duration_s, opt.baseline_s,
               opt.chaos ? ", --chaos" : "", (unsigned long long) opt.seed, (int) bd.pid, cpus,
               bd.dir, PROFILE, profile_dir);

        if (create_session(&c, "default", hot.id, sizeof(hot.id), why, sizeof(why)) < 0)
                fail("the well-behaved client's session: %s", why);
        for (int i = 0; i < HOT_WARMUP; i++)
                if (execute(&c, hot.id, "1", NULL, &status, &resp) < 0 || status != 200)
                        fail("warm-up of the well-behaved client: %d %.*s", status, BODY(resp));
        setup_sessions(&c, &rng);
        bench_sleep_ms(1000);
        measure_sandboxes(&before);
        report_sandboxes("after setup", &before);
        rss_setup = bench_proc_field(bd.pid, "status", "VmRSS");
        report_fit(&before, rss_setup);

        /* the baseline: the storm sessions sit idle */
        if (pthread_create(&sampler_thread, NULL, sampler_main, NULL) != 0)
                fail("pthread_create failed");
        sampler_started = true;
        if (pthread_create(&hot_thread, NULL, hot_main, &hot_conn) != 0)
                fail("pthread_create failed");
        hot_started = true;
        print_loadavg("baseline start");
        printf("baseline: the well-behaved client alone for %u s\n", opt.baseline_s);
        for (unsigned t = 0; t < opt.baseline_s * 10 && !got_signal; t++)
                bench_sleep_ms(100);
        if (got_signal)
                fail("interrupted in the baseline");

        /* the storm */
        storm_start = bench_now_ns();
        atomic_store(&mem.storm_start, storm_start);
        atomic_store(&hot.storm, true);
        for (unsigned i = 0; i < opt.workers; i++) {
                struct worker *w = &workers[i];

                w->index = i;
                w->rng = rng_seed(1000 + i);
                bench_conn_init(&w->c, &bd);
                w->file = malloc(FILE_BYTES);
                if (!w->file || pthread_create(&w->thread, NULL, worker_main, w) != 0)
                        fail("cannot start worker %u", i);
                workers_started++;
        }
        if (opt.chaos) {
                if (pthread_create(&chaos_thread, NULL, chaos_main, &chaos_conn) != 0)
                        fail("pthread_create failed");
                chaos_started = true;
        }
        print_loadavg("storm start");
        printf("storm: %u workers over %u sessions for %u s\n", opt.workers, opt.sessions,
               opt.duration_s);
        next_progress = storm_start + opt.progress_s * S;
        while (!got_signal && !atomic_load(&daemon_died) &&
               bench_now_ns() < storm_start + opt.duration_s * S) {
                bench_sleep_ms(100);
                if (bench_now_ns() >= next_progress) {
                        progress(&c, storm_start);
                        next_progress += opt.progress_s * S;
                }
        }
        stop_storm_threads();
        storm_end = bench_now_ns();
        stop_all_threads();
        if (got_signal)
                fail("interrupted in the storm");
        progress(&c, storm_start);
        printf("storm ended after %.1f s%s\n", secs(storm_end - storm_start),
               atomic_load(&daemon_died) ? ": THE DAEMON DIED" : "");

        /* the checks and the figures */
        if (!atomic_load(&daemon_died)) {
                measure_sandboxes(&after);
                report_sandboxes("after the storm", &after);
                report_fit(&after, bench_proc_field(bd.pid, "status", "VmRSS"));
                dead = final_checks(&c, &unknown, &healthy);
        }
        printf("\n== results ==\n");
        p99_before = 0;
        if (hot.before.n)
                (void) bench_report("hot execute 1, before the storm", hot.before.ns, hot.before.n);
        p99_before = bench_percentile(hot.before.ns, hot.before.n, 0.99);
        if (hot.during.n)
                (void) bench_report("hot execute 1, during the storm", hot.during.ns, hot.during.n);
        p99_during = bench_percentile(hot.during.ns, hot.during.n, 0.99);
        print_loadavg("the end of the storm");
        printf("p99 during / before: %.2fx  target <= 3x: %s\n",
               p99_before ? (double) p99_during / (double) p99_before : 0.0,
               p99_before && p99_during <= 3 * p99_before ? "met" : "MISSED");
        if (!opt.chaos)
                printf("well-behaved client failures: %lu\n", hot.failures);
        report_ops();
        report_memory(rss_setup);
        if (opt.chaos)
                report_chaos();
        if (atomic_load(&notes) > NOTES_MAX)
                printf("(%lu failure notes, the first %d printed on stderr)\n", atomic_load(&notes),
                       NOTES_MAX);

        for (unsigned i = 0; i < opt.sessions; i++)
                if (slots[i].alive)
                        delete_session(&c, slots[i].id);
        delete_session(&c, hot.id);

        pass = !atomic_load(&daemon_died) && healthy && sum(lost, UNKNOWN) == 0 && dead == 0 &&
               unknown == 0;
        if (opt.chaos)
                pass = pass && atomic_load(&chaos.failed) == 0 && hot.improper == 0;
        else
                pass = pass && sum(op_failed, OP_COUNT) == 0 && hot.failures == 0 &&
                       atomic_load(&recreate_failed) == 0;
        printf("result: %s\n",
               pass ? "PASS: nothing lost, the daemon stayed healthy, every check passed"
                    : "FAIL (see the counts above and the notes on stderr)");

        conn_free(&c);
        conn_free(&hot_conn);
        conn_free(&chaos_conn);
        for (unsigned i = 0; i < opt.workers; i++) {
                conn_free(&workers[i].c);
                free(workers[i].file);
        }
        free(workers);
        free(slots);
        free(hot.before.ns);
        free(hot.during.ns);
        free(mem.v);
        bench_daemon_stop(&bd);
        return pass ? 0 : 1;
}
