/* Shared by the daemon benchmarks: start and stop a private `airlock serve`, a minimal
 * keep-alive HTTP/1.1 client over TCP (so the figures measure the server, not a client
 * library), timing and percentile reports. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bench_daemon {
        pid_t pid;
        int port;
        char dir[64];    /* private temporary directory: state dir and daemon log */
        char token[128]; /* bearer token read from <dir>/state/token */
        char log[128];   /* the daemon's stderr */
};

/* The airlock binary: argv[1] when given (and not a number), else $AIRLOCK_BIN, else
 * build/src/cli/airlock. *next is set to the index of the first remaining argument. */
const char *bench_airlock_bin(int argc, char **argv, int *next);

/* Starts `airlock serve --listen 127.0.0.1:0 --state-dir DIR/state` plus `extra` (a NULL
 * terminated list, may be NULL), waits up to 30 s for "listening on", reads the token. On
 * failure prints why (with the tail of the daemon's log) and returns -1. */
int bench_daemon_start(struct bench_daemon *d, const char *bin, const char *const *extra);

/* Waits until the daemon's log contains `what` (e.g. "zygote ready"); 0, or -1 on timeout. */
int bench_daemon_wait_log(const struct bench_daemon *d, const char *what, unsigned timeout_ms);

/* SIGTERM by pid, waits (SIGKILL after 20 s), removes the temporary directory. Idempotent. */
void bench_daemon_stop(struct bench_daemon *d);

/* Calls handler on SIGINT, SIGTERM and SIGHUP, without SA_RESTART: a signal ends the wait in
 * progress, so the benchmark can notice it and clean up. */
void bench_catch_signals(void (*handler)(int));

/* Exits with status 1 after printing the message, stopping the daemon first. */
_Noreturn void bench_die(struct bench_daemon *d, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

#define BENCH_REQUEST_TIMEOUT_S 30 /* no answer within this: the request fails (ETIMEDOUT) */
/* The timeout connections opened from now on get; BENCH_REQUEST_TIMEOUT_S unless a benchmark
 * of slow requests (bench-microvm under TCG) sets it. */
extern unsigned bench_request_timeout_s;

struct bench_conn {
        int fd;
        int port;
        const char *token;
        char *buf;             /* response buffer; the body returned by bench_http points into it */
        size_t cap, len, used; /* bytes held, bytes of them consumed by the last response */
        char *req;
        size_t req_cap;
        char *body; /* the last response's body, NUL-terminated */
        size_t body_cap, body_len;
};

void bench_conn_init(struct bench_conn *c, const struct bench_daemon *d);
void bench_conn_close(struct bench_conn *c);

/* One request on the connection (connecting first if needed, TCP_NODELAY, keep-alive).
 * `body` may be NULL (no body). On success sets *status and *resp (NUL-terminated, valid until
 * the next call on c) and returns 0; returns -1 with errno set on a transport failure. */
int bench_http(struct bench_conn *c, const char *method, const char *path, const char *body,
               int *status, const char **resp);

/* The same with a body of `len` bytes that may hold NUL bytes (a file upload), sent with
 * `content_type` (a NULL body sends no body headers). After success c->body_len is the
 * length of *resp, which may hold NUL bytes too. */
int bench_http_raw(struct bench_conn *c, const char *method, const char *path,
                   const char *content_type, const void *body, size_t len, int *status,
                   const char **resp);

/* Copies the value of the first "key":"value" string in json into out; 0 or -1. */
int bench_json_str(const char *json, const char *key, char *out, size_t size);

uint64_t bench_now_ns(void);
void bench_sleep_ms(unsigned ms);

/* Sorts ns[0..n) and prints `name  p50 X ms  p99 Y ms  (n=N)`; returns the p50 in ns. */
uint64_t bench_report(const char *name, uint64_t *ns, size_t n);
uint64_t bench_percentile(const uint64_t *sorted, size_t n, double p);

/* Runs argv (stdin and stdout on /dev/null, stderr kept) and returns its wall time in ns, or
 * 0 if it could not run or exited non-zero. */
uint64_t bench_time_command(char *const argv[]);

/* The number after "FIELD:" in /proc/PID/NAME (e.g. "status" "VmRSS" in kB, "status"
 * "Threads"), or 0 when the process or the field is not there. */
unsigned long long bench_proc_field(pid_t pid, const char *name, const char *field);

/* Open fds of pid (entries of /proc/PID/fd), or 0. */
unsigned bench_proc_fds(pid_t pid);

/* Memory of one daemon's sandboxes, from /proc: every descendant of daemon_pid whose host uid
 * is a session's ([0x70000000, 0x90000000), the uids zygotes give their sessions) or a
 * zygote's ([0x60000000, 0x60800000)). PSS and RSS come from /proc/PID/smaps_rollup, in kB;
 * PSS splits the pages sessions still share with their zygote among all of them. Processes
 * in those uid ranges that are not the daemon's (other daemons on the machine) are counted
 * in foreign_procs and left out. */
struct bench_sandbox_memory {
        unsigned long long session_pss_kb, session_rss_kb, zygote_pss_kb, daemon_pss_kb;
        unsigned session_procs, session_uids, zygote_procs, foreign_procs;
};
int bench_sandbox_memory(pid_t daemon_pid, struct bench_sandbox_memory *ret);

/* Pins this process (and so the daemon started afterwards) to the first `ncpus` CPUs it may
 * use; writes the list into out. Returns how many CPUs are in use afterwards. */
int bench_pin_cpus(int ncpus, char *out, size_t size);
