/* See sandbox.h. The driver multiplexes four fds of a sandbox with poll(): the control socket
 * (frames from the runner), stdout and stderr (captured up to the profile's output cap and
 * streamed to a sink), and the pidfd (the sandbox died). Deadlines and caps are enforced here,
 * outside the sandbox, so a cell that hangs or floods ends with a clear status. */
#include "sandbox.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/wire.h"
#include "config.h"
#include "session-internal.h"
#include "vm/files.h"
#include "vm/snapshot.h"
#include "vm/vm.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long a runner may take to start Python and import the profile's preload modules. */
#define INIT_TIMEOUT_MS 120000
/* A microVM's boot and its runner's preload: seconds under KVM, minutes under TCG on a busy
 * machine (importing pandas and matplotlib in software emulation). */
#define VM_INIT_TIMEOUT_MS 600000
/* The control-socket buffer a sandbox keeps between frames; a larger one is freed. */
#define RBUF_KEEP (64u << 10)

/* A result frame carries the repr, rich outputs and the files manifest, which the runner
 * keeps within the output cap; this much more covers the manifest and the JSON around them. */
#define FRAME_OVERHEAD_MAX (2u * 1024u * 1024u)
/* An interrupted cell starved of CPU by a loaded host gets its grace extended this much at a
 * time, until it had a quarter of its grace in CPU time, and at most this many graces in all
 * (grace_was_starved): on 2 cores under a load average above 100, two dozen cells interrupted
 * together got 20-40 ms of CPU each per 2 s grace, too little to run their `finally`. */
#define GRACE_EXTEND_MS 250
#define GRACE_MAX_FACTOR 15

enum drive_outcome {
        DRIVE_FRAME,        /* a complete frame arrived */
        DRIVE_FRAME_LIMIT,  /* the runner announced a frame over the limit */
        DRIVE_TIMEOUT,      /* the deadline passed */
        DRIVE_EXITED,       /* the sandbox's first process is gone (or closed the socket) */
        DRIVE_OUTPUT_LIMIT, /* stdout + stderr passed the cap */
        DRIVE_PROTOCOL,     /* the runner sent something that is not a valid frame */
        DRIVE_TOOL,         /* the running cell's code asks for a tool (Code Mode) */
        DRIVE_DISPLAY,      /* the running cell made a display (streamed as it is made) */
};

struct capture {
        char *buf[3]; /* index 1 = stdout, 2 = stderr */
        size_t len[3];
        size_t total;
        size_t limit;
        bool truncated[3];
        bool discard; /* past the cap: drain the pipes, keep nothing */
};

static void capture_done(struct capture *c)
{
        free(c->buf[1]);
        free(c->buf[2]);
        memset(c, 0, sizeof(*c));
}

/* Appends what fits under the cap; returns false once the cap is passed. */
static bool capture_add(struct capture *c, int stream, const char *data, size_t n)
{
        size_t room = c->limit > c->total ? c->limit - c->total : 0;

        if (c->discard)
                return true;
        size_t take = n < room ? n : room;
        char *p;

        if (take > 0) {
                p = realloc(c->buf[stream], c->len[stream] + take + 1);
                if (!p)
                        return false;
                memcpy(p + c->len[stream], data, take);
                c->buf[stream] = p;
                c->len[stream] += take;
                c->total += take;
        }
        if (take < n) {
                c->truncated[stream] = true;
                return false;
        }
        return true;
}

static json_t *strv_to_json(char **v);

int fcntl_nonblock(int fd)
{
        int fl = fcntl(fd, F_GETFL);

        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

/* Reads what a pipe has now. Returns >0 bytes, 0 at EOF, -EAGAIN when empty, or -errno. */
static ssize_t pipe_read(int fd, char *buf, size_t size)
{
        ssize_t n;

        do
                n = read(fd, buf, size);
        while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : n;
}

/* Moves output from one pipe into the capture and the sink. Returns 0 while open, 1 at EOF,
 * -E2BIG when the cap was passed. */
static int pump(struct sandbox *sb, struct capture *cap, const struct exec_sink *sink, int stream,
                bool drain)
{
        int fd = stream == 1 ? sb->jail->stdout_fd : sb->jail->stderr_fd;
        char buf[65536];

        for (;;) {
                ssize_t n = pipe_read(fd, buf, sizeof(buf));
                if (n == -EAGAIN)
                        return 0;
                if (n <= 0)
                        return 1;
                if (cap) {
                        size_t before = cap->len[stream];
                        bool ok = capture_add(cap, stream, buf, (size_t) n);
                        if (sink && sink->on_output && cap->len[stream] > before)
                                sink->on_output(sink->userdata, stream, cap->buf[stream] + before,
                                                cap->len[stream] - before);
                        if (!ok)
                                return -E2BIG;
                }
                if (!drain)
                        return 0;
        }
}

/* Whether frame answers the request we wait for: it repeats the request's id. The runner's
 * "fatal" (it cannot go on, and exits) may come before it read any request, so it needs none:
 * forging one only ends the forger's own sandbox. */
static bool answers_request(const struct sandbox *sb, json_t *frame)
{
        const char *id = json_string_value(json_object_get(frame, "id"));
        const char *op = json_string_value(json_object_get(frame, "op"));

        if (!sb->want_id[0])
                return false;
        if (id)
                return strcmp(id, sb->want_id) == 0;
        return op && strcmp(op, "fatal") == 0;
}

/* Whether frame is a Code Mode request of the running cell: it carries the exec's id, which
 * the runner puts on it (user code could too, and gets no more than airlock_tools gives it). */
static bool is_tool_frame(const struct sandbox *sb, json_t *frame)
{
        const char *id = json_string_value(json_object_get(frame, "id"));
        const char *op = json_string_value(json_object_get(frame, "op"));

        return sb->in_exec && sb->want_id[0] && id && strcmp(id, sb->want_id) == 0 && op &&
               (strcmp(op, "tool_call") == 0 || strcmp(op, "tool_list") == 0);
}

/* Whether frame is a display the running cell made (the runner's _display): it carries the
 * exec's id. User code could send one too, and only gets what it displays. */
static bool is_display_frame(const struct sandbox *sb, json_t *frame)
{
        const char *id = json_string_value(json_object_get(frame, "id"));
        const char *op = json_string_value(json_object_get(frame, "op"));

        return sb->in_exec && sb->want_id[0] && id && strcmp(id, sb->want_id) == 0 && op &&
               strcmp(op, "display") == 0;
}

/* Reads from the control socket into the frame buffer; returns 1 when a whole frame that
 * answers the request is ready in *ret_frame, 3 for a Code Mode request and 4 for a display (in
 * *ret_frame), 2 when a
 * whole frame answering nothing was dropped (user code owns fd 3 and may write frames of its own at
 * any time: between cells, from a process or thread that outlived its cell), 0 when more bytes are
 * needed, -EPIPE at EOF, -EBADMSG/-E2BIG on a bad frame (the stream is out of step: nothing after
 * it can be trusted to start a frame). */
static int frame_read(struct sandbox *sb, json_t **ret_frame)
{
        for (;;) {
                size_t want;
                ssize_t n;

                if (sb->rlen >= 4) {
                        uint32_t len_le;
                        memcpy(&len_le, sb->rbuf, 4);
                        sb->rwant = le32toh(len_le);
                        /* Past the protocol's maximum nothing honest was sent; past the
                         * profile's budget the cell's result was merely too large. */
                        if (sb->rwant > WIRE_FRAME_MAX)
                                return -EBADMSG;
                        if (sb->rwant > sb->frame_max)
                                return -E2BIG;
                        if (sb->rlen == 4 + sb->rwant) {
                                json_t *o = json_loadb(sb->rbuf + 4, sb->rwant, 0, NULL);
                                sb->rlen = 0;
                                /* An idle session keeps no copy of its largest answer (a plot
                                 * is up to the output limit): a thousand of them would hold
                                 * a thousand such buffers in the daemon. */
                                if (sb->rsize > RBUF_KEEP) {
                                        free(sb->rbuf);
                                        sb->rbuf = NULL;
                                        sb->rsize = 0;
                                }
                                if (!o || !json_is_object(o)) {
                                        json_decref(o);
                                        return -EBADMSG;
                                }
                                if (is_tool_frame(sb, o) || is_display_frame(sb, o)) {
                                        sb->last_frame_len = sb->rwant;
                                        *ret_frame = o;
                                        return is_tool_frame(sb, o) ? 3 : 4;
                                }
                                if (!answers_request(sb, o)) {
                                        json_decref(o);
                                        sb->dropped++;
                                        return 2;
                                }
                                sb->want_id[0] = '\0'; /* answered: a replay is dropped */
                                *ret_frame = o;
                                return 1;
                        }
                        want = 4 + sb->rwant - sb->rlen;
                } else {
                        want = 4 - sb->rlen;
                }
                if (sb->rsize < sb->rlen + want) {
                        size_t size = sb->rlen + want;
                        char *p = realloc(sb->rbuf, size);
                        if (!p)
                                return -ENOMEM;
                        sb->rbuf = p;
                        sb->rsize = size;
                }
                do
                        n = read(sb->jail->ctl_fd, sb->rbuf + sb->rlen, want);
                while (n < 0 && errno == EINTR);
                if (n < 0)
                        return errno == EAGAIN ? 0 : -errno;
                if (n == 0)
                        return -EPIPE;
                sb->rlen += (size_t) n;
        }
}

static enum drive_outcome drive(struct sandbox *sb, uint64_t deadline_ns, struct capture *cap,
                                const struct exec_sink *sink, json_t **ret_frame)
{
        bool out_open = true, err_open = true;

        for (;;) {
                struct pollfd pfd[4] = {
                        { .fd = sb->jail->ctl_fd, .events = POLLIN },
                        { .fd = out_open ? sb->jail->stdout_fd : -1, .events = POLLIN },
                        { .fd = err_open ? sb->jail->stderr_fd : -1, .events = POLLIN },
                        { .fd = sb->jail->pidfd, .events = POLLIN },
                };
                uint64_t now = now_ns();
                int timeout_ms, r;

                if (now >= deadline_ns)
                        return DRIVE_TIMEOUT;
                timeout_ms = (int) ((deadline_ns - now) / 1000000ULL) + 1;
                r = poll(pfd, 4, timeout_ms);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return DRIVE_EXITED;
                }
                for (int s = 1; s <= 2; s++) {
                        if (!pfd[s].revents)
                                continue;
                        r = pump(sb, cap, sink, s, false);
                        if (r == -E2BIG)
                                return DRIVE_OUTPUT_LIMIT;
                        if (r == 1) {
                                if (s == 1)
                                        out_open = false;
                                else
                                        err_open = false;
                        }
                }
                if (pfd[0].revents) {
                        r = frame_read(sb, ret_frame);
                        if (r == 1)
                                return DRIVE_FRAME;
                        if (r == 3)
                                return DRIVE_TOOL;
                        if (r == 4)
                                return DRIVE_DISPLAY;
                        if (r == 2)
                                continue; /* and back to poll(), which sees the deadline */
                        if (r == -EPIPE)
                                return DRIVE_EXITED;
                        if (r == -E2BIG)
                                return DRIVE_FRAME_LIMIT;
                        if (r < 0)
                                return DRIVE_PROTOCOL;
                }
                if (pfd[3].revents)
                        return DRIVE_EXITED;
        }
}

static void drain_all(struct sandbox *sb, struct capture *cap, const struct exec_sink *sink)
{
        (void) pump(sb, cap, sink, 1, true);
        (void) pump(sb, cap, sink, 2, true);
}

char *sandbox_find_runner(void)
{
        char exe[PATH_MAX], path[PATH_MAX + 64];
        const char *env = getenv("AIRLOCK_RUNNER");
        ssize_t n;
        char *slash;

        if (env && *env)
                return strdup(env);
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
                exe[n] = '\0';
                slash = strrchr(exe, '/');
                if (slash) {
                        *slash = '\0';
                        /* In the build tree the CLI lives in src/cli, benchmarks in bench
                         * and the runner in src/runner; installed, it is in libexec. */
                        (void) snprintf(path, sizeof(path), "%s/../runner/airlock-runner", exe);
                        if (access(path, X_OK) == 0)
                                return realpath(path, NULL);
                        (void) snprintf(path, sizeof(path), "%s/../src/runner/airlock-runner", exe);
                        if (access(path, X_OK) == 0)
                                return realpath(path, NULL);
                        (void) snprintf(path, sizeof(path), "%s/airlock-runner", exe);
                        if (access(path, X_OK) == 0)
                                return realpath(path, NULL);
                }
        }
        (void) snprintf(path, sizeof(path), "%s/airlock-runner", AIRLOCK_LIBEXEC_DIR);
        if (access(path, X_OK) == 0)
                return strdup(path);
        return NULL;
}

static int env_add(char ***envp, size_t *n, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int env_add(char ***envp, size_t *n, const char *fmt, ...)
{
        char **v;
        va_list ap;
        int r;

        v = realloc(*envp, (*n + 2) * sizeof(char *));
        if (!v)
                return -ENOMEM;
        *envp = v;
        va_start(ap, fmt);
        r = vasprintf(&v[*n], fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        v[++*n] = NULL;
        return 0;
}

/* pip inside the sandbox (docs/NETWORK.md, "Inside the sandbox"): installs go to the session's
 * own site directory, PYTHONUSERBASE in /work (SANDBOX_SITE_BASE), so they count against the
 * workspace limit and are saved, restored and forked with /work; the runner leaves that
 * directory out of an execution's files and puts its site-packages on sys.path as soon as it
 * appears. The index, when the profile names one, is reached through the egress proxy. */
static int env_add_pip(char ***envp, size_t *n, const struct profile *p, const char *home)
{
        const struct profile_packages *pk = &p->packages;
        int r = 0;

        /* pip installs there by itself: the image's site-packages are read-only, so it
         * defaults to a user install. PIP_USER=1 would do the same, but would also make
         * `pip list` and `pip freeze` show only the session's own packages. */
        r |= env_add(envp, n, "PYTHONUSERBASE=%s/" SANDBOX_SITE_BASE, home);
        /* Debian marks its Python externally managed (PEP 668): pip would refuse even a user
         * install, which here goes to the session's own directory, never to /usr. */
        r |= env_add(envp, n, "PIP_BREAK_SYSTEM_PACKAGES=1");
        r |= env_add(envp, n, "PIP_DISABLE_PIP_VERSION_CHECK=1");
        r |= env_add(envp, n, "PIP_NO_INPUT=1");
        r |= env_add(envp, n, "PIP_PROGRESS_BAR=off");
        /* A session's /tmp is small and lives as long as the sandbox: no wheel cache there. */
        r |= env_add(envp, n, "PIP_NO_CACHE_DIR=1");
        if (pk->index_url && p->network && p->network->mode == EGRESS_MODE_ALLOW) {
                r |= env_add(envp, n, "PIP_INDEX_URL=%s", pk->index_url);
                if (pk->trusted_hosts && pk->trusted_hosts[0]) {
                        _cleanup_free_ char *hosts = NULL;
                        size_t len = 0;
                        FILE *f = open_memstream(&hosts, &len);
                        if (!f)
                                return -ENOMEM;
                        for (char **h = pk->trusted_hosts; *h; h++)
                                fprintf(f, "%s%s", h == pk->trusted_hosts ? "" : " ", *h);
                        if (fclose(f) != 0 || !hosts)
                                return -ENOMEM;
                        r |= env_add(envp, n, "PIP_TRUSTED_HOST=%s", hosts);
                }
        } else {
                /* No index: pip must not look for one (there is no network to wait on), and the
                 * shim (/opt/airlock/bin/pip, src/jail/mount.c) says why a name did not install. */
                r |= env_add(envp, n, "PIP_NO_INDEX=1");
                if (pk->index_url)
                        r |= env_add(envp, n,
                                     "AIRLOCK_PIP_NO_INDEX=profile '%s' has no network: its "
                                     "package index is for `airlock profile build` only "
                                     "(docs/PROFILES.md); only local files install here, e.g. "
                                     "pip install /work/pkg-1.0-py3-none-any.whl",
                                     p->name);
                else
                        r |= env_add(envp, n,
                                     "AIRLOCK_PIP_NO_INDEX=profile '%s' has no package index "
                                     "(packages.index_url in the profile, docs/PROFILES.md): "
                                     "only local files install here, e.g. pip install "
                                     "/work/pkg-1.0-py3-none-any.whl",
                                     p->name);
        }
        return r;
}

int sandbox_egress_init(const struct egress_policy *network, enum egress_forward_net net,
                        struct sandbox_egress *ret)
{
        *ret = (struct sandbox_egress){ 0 };
        if (!network || network->mode != EGRESS_MODE_ALLOW)
                return 0;
        ret->hosts_extra = egress_policy_hosts_text(network, net);
        if (!ret->hosts_extra)
                return -ENOMEM;
        ret->n_ports = egress_policy_sandbox_ports(network, ret->ports);
        return 0;
}

void sandbox_egress_done(struct sandbox_egress *e)
{
        free(e->hosts_extra);
        e->hosts_extra = NULL;
        e->n_ports = 0;
}

/* The complete environment of user code: nothing of the daemon's own environment (tokens,
 * paths) is passed on. */
int sandbox_build_env(const struct profile *p, const char *workdir, const char *layer_dir,
                      bool in_vm, char ***ret_envp)
{
        const char *proxy = in_vm ? VM_GUEST_HOST : "127.0.0.1";
        unsigned threads = (p->limits.cpu_millicpus + 999) / 1000;
        const char *home = workdir ? workdir : "/work";
        _cleanup_strv_free_ char **envp = NULL;
        size_t n = 0;
        int r = 0;

        if (threads == 0)
                threads = 1;
        /* The pip shims first, then the console scripts pip installed for the session. */
        r |= env_add(&envp, &n,
                     "PATH=/opt/airlock/bin:%s/" SANDBOX_SITE_BASE
                     "/bin:/usr/local/bin:/usr/bin:/bin",
                     home);
        r |= env_add(&envp, &n, "HOME=%s", home);
        r |= env_add(&envp, &n, "USER=sandbox");
        r |= env_add(&envp, &n, "LOGNAME=sandbox");
        r |= env_add(&envp, &n, "SHELL=/bin/bash");
        r |= env_add(&envp, &n, "LANG=C.UTF-8");
        r |= env_add(&envp, &n, "TERM=dumb");
        r |= env_add(&envp, &n, "TMPDIR=/tmp");
        r |= env_add(&envp, &n, "PYTHONDONTWRITEBYTECODE=1");
        r |= env_add(&envp, &n, "PYTHONUNBUFFERED=1");
        /* Caches (fontconfig, matplotlib) go to /tmp so they never show up as files the
         * code made in /work. */
        r |= env_add(&envp, &n, "XDG_CACHE_HOME=/tmp/.cache");
        r |= env_add(&envp, &n, "MPLCONFIGDIR=/tmp/.config/matplotlib");
        /* BLAS and OpenMP pools sized to the CPU cap, not to the host's cores. */
        r |= env_add(&envp, &n, "OPENBLAS_NUM_THREADS=%u", threads);
        r |= env_add(&envp, &n, "OMP_NUM_THREADS=%u", threads);
        r |= env_add(&envp, &n, "MKL_NUM_THREADS=%u", threads);
        if (p->network && p->network->mode == EGRESS_MODE_ALLOW) {
                /* The daemon's proxy, in the sandbox's own network namespace (policy.h), or in
                 * its QEMU's, which a guest reaches at VM_GUEST_HOST (src/vm/vm.h). */
                static const char *const proxy_names[] = { "HTTP_PROXY", "HTTPS_PROXY",
                                                           "http_proxy", "https_proxy" };
                for (size_t i = 0; i < ELEMENTSOF(proxy_names); i++)
                        r |= env_add(&envp, &n, "%s=http://%s:%d", proxy_names[i], proxy,
                                     EGRESS_PROXY_PORT);
                r |= env_add(&envp, &n, "ALL_PROXY=socks5h://%s:%d", proxy, EGRESS_SOCKS_PORT);
                r |= env_add(&envp, &n, "all_proxy=socks5h://%s:%d", proxy, EGRESS_SOCKS_PORT);
                r |= env_add(&envp, &n, "NO_PROXY=localhost,127.0.0.1,::1");
                r |= env_add(&envp, &n, "no_proxy=localhost,127.0.0.1,::1");
        }
        r |= env_add_pip(&envp, &n, p, home);
        /* The runner's own Python puts the layer on sys.path itself (it ignores the
         * environment); this is for python3 started by bash cells and subprocesses. */
        if (layer_dir)
                r |= env_add(&envp, &n, "PYTHONPATH=" JAIL_LAYER_PATH "/site-packages");
        for (char **e = p->env; *e; e++)
                r |= env_add(&envp, &n, "%s", *e);
        if (r < 0)
                return -ENOMEM;
        *ret_envp = TAKE_PTR(envp);
        return 0;
}

json_t *profile_imports_json(const struct profile *p)
{
        return strv_to_json(p->imports);
}

json_t *profile_preload_json(const struct profile *p)
{
        return strv_to_json(p->preload);
}

static json_t *strv_to_json(char **v)
{
        json_t *a;

        if (!v)
                return json_null();
        a = json_array();
        for (; a && *v; v++)
                json_array_append_new(a, json_string(*v));
        return a;
}

/* Frames dropped before a request, at most: more is a writer that does not stop, whose frames
 * drive() drops as they come. */
#define DRAIN_FRAMES_MAX 256

/* Sends a request (taking ownership of req) with n_fds fds, under a new random id that its
 * answer must repeat. Whole frames already waiting answer no request and are dropped first. */
static int send_request(struct sandbox *sb, json_t *req, const int *fds, size_t n_fds)
{
        static const char hex[] = "0123456789abcdef";
        unsigned char rnd[8];
        json_t *frame = NULL;
        int r;

        if (!req)
                return -ENOMEM;
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd)) {
                json_decref(req);
                return -EIO;
        }
        for (size_t i = 0; i < sizeof(rnd); i++) {
                sb->want_id[2 * i] = hex[rnd[i] >> 4];
                sb->want_id[2 * i + 1] = hex[rnd[i] & 15];
        }
        sb->want_id[2 * sizeof(rnd)] = '\0';
        sb->dropped = 0;
        for (int i = 0; i < DRAIN_FRAMES_MAX && frame_read(sb, &frame) == 2; i++)
                ;
        json_decref(frame); /* only an answer guessing a 64-bit id could be one */
        r = json_object_set_new(req, "id", json_string(sb->want_id)) < 0 ? -ENOMEM : 0;
        /* The control socket is non-blocking for reads; a request is small enough to be sent
         * with a blocking write, which the socket buffer absorbs. */
        if (r >= 0)
                r = n_fds ? wire_send_ex(sb->jail->ctl_fd, req, fds, n_fds, false)
                          : wire_send(sb->jail->ctl_fd, req);
        json_decref(req);
        return r;
}

static int send_frame(struct sandbox *sb, json_t *frame)
{
        return send_request(sb, frame, NULL, 0);
}

/* Says, once per request, that frames answering nothing came meanwhile. */
static void note_dropped(struct sandbox *sb)
{
        if (sb->dropped > 0)
                log_info("sandbox=%d msg=\"dropped %llu frames on the control socket that "
                         "answered no request (user code writing on fd 3)\"",
                         (int) sandbox_pid(sb), sb->dropped);
        sb->dropped = 0;
}

/* What the runner is told first: the profile's policy, limits and preload. */
static json_t *init_frame(const struct profile *p, uint64_t memory_bytes, bool preload)
{
        return json_pack("{s:s, s:s, s:I, s:I, s:o, s:s, s:o, s:b}", "op", "init", "profile",
                         p->name, "output_max", (json_int_t) p->limits.output_bytes, "memory_bytes",
                         (json_int_t) memory_bytes, "imports", strv_to_json(p->imports), "policy",
                         p->policy == PROFILE_POLICY_RESTRICTED ? "restricted" : "none", "preload",
                         preload ? strv_to_json(p->preload) : json_array(), "shell", p->lang_bash);
}

/* The microVM for opts (opts->vm_image_dir set), its runner's environment envp and its
 * /etc/hosts lines hosts_extra (borrowed; NULL for none). */
static void vm_config_for(const struct sandbox_options *opts, char *const *envp,
                          const char *hosts_extra, struct vm_config *ret)
{
        const struct profile *p = opts->profile;

        *ret = (struct vm_config){
                .name = opts->name,
                .image_dir = opts->vm_image_dir,
                .memory_bytes = opts->memory_bytes ? opts->memory_bytes : p->limits.memory_bytes,
                .cpu_millicpus = p->limits.cpu_millicpus,
                .nofile = p->limits.files,
                .nproc = p->limits.pids,
                .work_bytes = p->limits.workspace_bytes,
                .tmp_bytes = p->limits.tmp_bytes,
                .envp = envp,
                .network = p->network && p->network->mode == EGRESS_MODE_ALLOW,
                .hosts_extra = hosts_extra,
                .restore = opts->vm_restore,
                .incoming_fd = opts->vm_incoming_fd,
        };
}

int sandbox_vm_key(const struct sandbox_options *opts, char **ret_key)
{
        _cleanup_free_ char *machine = NULL, *init = NULL, *key = NULL;
        _cleanup_(sandbox_egress_done) struct sandbox_egress egress = { 0 };
        char **envp = NULL;
        struct vm_config vcfg;
        json_t *frame;
        int r;

        r = sandbox_egress_init(opts->profile->network, EGRESS_FORWARD_GUEST, &egress);
        if (r < 0)
                return r;
        r = sandbox_build_env(opts->profile, NULL, opts->layer_dir, true, &envp);
        if (r < 0)
                return r;
        vm_config_for(opts, envp, egress.hosts_extra, &vcfg);
        r = vm_snapshot_key(&vcfg, &machine);
        strv_free(envp);
        if (r < 0)
                return r;
        frame = init_frame(opts->profile, vcfg.memory_bytes, opts->preload);
        init = frame ? json_dumps(frame, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(frame);
        if (!init || asprintf(&key, "%s\nrunner %s\n", machine, init) < 0)
                return -ENOMEM;
        *ret_key = TAKE_PTR(key);
        return 0;
}

bool sandbox_is_vm(const struct sandbox *sb)
{
        return sb->vm_sig_fd >= 0;
}

int sandbox_start(const struct jail_features *features, const struct sandbox_options *opts,
                  struct sandbox **ret_sb, struct airlock_error *err)
{
        _cleanup_(sandbox_freep) struct sandbox *sb = NULL;
        _cleanup_(sandbox_egress_done) struct sandbox_egress egress = { 0 };
        const struct profile *p = opts->profile;
        struct jail_config cfg = { 0 };
        struct capture cap = { .limit = 64 * 1024 };
        json_t *frame = NULL;
        char *argv[] = { "airlock-runner", NULL };
        enum drive_outcome o;
        const char *op;
        int r;

        sb = calloc(1, sizeof(*sb));
        if (!sb)
                return -ENOMEM;
        sb->profile = p;
        sb->mode = opts->mode;
        sb->runner_pidfd = -EBADF;
        sb->status_fd = -EBADF;
        sb->layer_fd = -EBADF;
        sb->vm_sig_fd = -EBADF;
        sb->vm_qmp_fd = -EBADF;
        sb->runner_path = opts->runner_path ? strdup(opts->runner_path) : sandbox_find_runner();
        if (!sb->runner_path)
                return airlock_error_set(err, -ENOENT,
                                         "cannot find airlock-runner (set AIRLOCK_RUNNER, or "
                                         "install it in %s)",
                                         AIRLOCK_LIBEXEC_DIR);
        if (opts->mode != JAIL_NAMESPACES && !opts->vm_image_dir) {
                r = workspace_make_host_dir(&sb->workdir, err);
                if (r < 0)
                        return r;
        }
        r = sandbox_build_env(p, sb->workdir, opts->layer_dir, opts->vm_image_dir != NULL,
                              &sb->envp);
        if (r < 0)
                return r;
        r = sandbox_egress_init(p->network,
                                opts->vm_image_dir ? EGRESS_FORWARD_GUEST : EGRESS_FORWARD_LOOPBACK,
                                &egress);
        if (r < 0)
                return r;

        cfg.mode = opts->mode;
        cfg.name = opts->name;
        cfg.runner_path = sb->runner_path;
        cfg.argv = argv;
        cfg.envp = sb->envp;
        cfg.rootfs = p->rootfs;
        sb->memory_bytes = opts->memory_bytes ? opts->memory_bytes : p->limits.memory_bytes;
        cfg.memory_bytes = sb->memory_bytes;
        cfg.cpu_millicpus = p->limits.cpu_millicpus;
        cfg.pids = p->limits.pids;
        cfg.workspace_bytes = p->limits.workspace_bytes;
        cfg.tmp_bytes = p->limits.tmp_bytes;
        cfg.files = p->limits.files;
        cfg.host_workdir = sb->workdir;
        cfg.hosts_extra = egress.hosts_extra;
        cfg.connect_ports = egress.ports;
        cfg.n_connect_ports = egress.n_ports;
        cfg.layer_dir = opts->layer_dir;
        if (opts->vm_image_dir) {
                /* The microVM tier: the same runner, in a guest of its own (src/vm/vm.h). */
                struct vm_config vcfg;
                int files_fd = -EBADF;
                vm_config_for(opts, sb->envp, egress.hosts_extra, &vcfg);
                r = vm_start(features, &vcfg, &sb->jail, &sb->vm_sig_fd, &files_fd, &sb->vm_qmp_fd,
                             err);
                if (r >= 0 && !(sb->vm_files = vm_files_new(files_fd)))
                        r = airlock_error_set(err, -ENOMEM, "out of memory");
        } else {
                r = jail_spawn(features, &cfg, &sb->jail, err);
        }
        if (r < 0)
                return r;
        sb->alive = true;
        sb->frame_max = p->limits.output_bytes + FRAME_OVERHEAD_MAX;
        if (sb->frame_max > WIRE_FRAME_MAX)
                sb->frame_max = WIRE_FRAME_MAX;
        (void) fcntl_nonblock(sb->jail->ctl_fd);
        (void) fcntl_nonblock(sb->jail->stdout_fd);
        (void) fcntl_nonblock(sb->jail->stderr_fd);
        if (opts->vm_image_dir && opts->vm_restore) {
                /* Its runner was set up before the save: sandbox_vm_ready() does the rest. */
                *ret_sb = TAKE_PTR(sb);
                return 0;
        }

        r = send_frame(sb, init_frame(p, sb->memory_bytes, opts->preload));
        if (r < 0)
                return airlock_error_set(err, r, "cannot talk to the runner: %s", strerror(-r));
        o = drive(sb,
                  now_ns() +
                          (opts->vm_image_dir ? VM_INIT_TIMEOUT_MS : INIT_TIMEOUT_MS) * 1000000ULL,
                  &cap, NULL, &frame);
        if (o != DRIVE_FRAME) {
                drain_all(sb, &cap, NULL);
                r = airlock_error_set(
                        err, -EIO, "the runner did not start (%s)%s%.*s",
                        o == DRIVE_TIMEOUT ? "timed out" : "it exited", cap.len[2] ? ": " : "",
                        (int) (cap.len[2] > 400 ? 400 : cap.len[2]), cap.buf[2] ? cap.buf[2] : "");
                capture_done(&cap);
                return r;
        }
        capture_done(&cap);
        op = json_string_value(json_object_get(frame, "op"));
        if (!op || strcmp(op, "ready") != 0) {
                const char *msg = json_string_value(json_object_get(frame, "message"));
                r = airlock_error_set(err, -EIO, "the runner failed to start: %s",
                                      msg ? msg : "unexpected answer");
                json_decref(frame);
                return r;
        }
        {
                json_t *errors = json_object_get(frame, "preload_errors");
                size_t i;
                json_t *e;
                json_array_foreach (errors, i, e) {
                        if (json_is_string(e))
                                log_warn("profile '%s': preload failed: %s", p->name,
                                         json_string_value(e));
                }
        }
        json_decref(frame);
        *ret_sb = TAKE_PTR(sb);
        return 0;
}

static const char *signal_reason(int sig)
{
        switch (sig) {
        case SIGSYS:
                return "a forbidden system call (seccomp)";
        case SIGSEGV:
                return "a segmentation fault";
        case SIGBUS:
                return "a bus error";
        case SIGABRT:
                return "an abort";
        case SIGXCPU:
                return "the CPU time limit";
        case SIGXFSZ:
                return "the file size limit";
        case SIGKILL:
                return "SIGKILL";
        default:
                return "a signal";
        }
}

static json_t *error_object(const char *name, const char *value)
{
        return json_pack("{s:s, s:s, s:s}", "name", name, "value", value, "traceback", "");
}

/* Copies a field of the runner's answer only when it has the expected type. */
static json_t *field_string_or_null(json_t *frame, const char *key)
{
        json_t *v = json_object_get(frame, key);

        return json_is_string(v) ? json_incref(v) : json_null();
}

static json_t *validated_error(json_t *frame)
{
        json_t *e = json_object_get(frame, "error");
        json_t *name, *value, *tb;

        if (!json_is_object(e))
                return json_null();
        name = json_object_get(e, "name");
        value = json_object_get(e, "value");
        tb = json_object_get(e, "traceback");
        return json_pack("{s:s, s:s, s:s}", "name",
                         json_is_string(name) ? json_string_value(name) : "Error", "value",
                         json_is_string(value) ? json_string_value(value) : "", "traceback",
                         json_is_string(tb) ? json_string_value(tb) : "");
}

/* The most entries a files manifest or an outputs list may carry (the runner's own walk stops
 * at 10,000 entries). */
#define RESULT_ENTRIES_MAX 10000

/* The files manifest, rebuilt from entries that are each {path, size, change} with a path
 * that stays inside /work (relative, no "..", no empty component), a size >= 0 and a known
 * change. User code can write its own result frame on fd 3: a client that saves "the files
 * the cell made" by these paths must never be pointed outside its own directory. */
static json_t *validated_files(json_t *frame)
{
        static const char *const changes[] = { "created", "changed", "deleted" };
        json_t *files = json_object_get(frame, "files"), *out = json_array(), *e;
        size_t i;

        json_array_foreach (files, i, e) {
                json_t *path = json_object_get(e, "path"), *size = json_object_get(e, "size");
                const char *change = json_string_value(json_object_get(e, "change"));
                bool known = false;

                if (json_array_size(out) >= RESULT_ENTRIES_MAX)
                        break;
                for (size_t k = 0; change && k < ELEMENTSOF(changes); k++)
                        known |= strcmp(change, changes[k]) == 0;
                if (!known || !json_is_string(path) ||
                    !workspace_path_is_valid(json_string_value(path), false) ||
                    !json_is_integer(size) || json_integer_value(size) < 0)
                        continue;
                json_array_append_new(out, json_pack("{s:O, s:O, s:s}", "path", path, "size", size,
                                                     "change", change));
        }
        return out;
}

/* A rich output, rebuilt from an entry that is {data: {mime: string...}, main: bool} and, for a
 * display given an id (IPython's display_id), display_id: a string of 1 to 255 bytes. NULL
 * for an entry of another shape. */
static json_t *validated_output(const json_t *e)
{
        json_t *data = json_object_get(e, "data"), *clean, *v, *id;
        const char *mime;
        bool ok = json_is_object(data) && json_object_size(data) > 0;

        json_object_foreach (data, mime, v)
                ok &= json_is_string(v) && strlen(mime) > 0 && strlen(mime) <= 255;
        if (!ok)
                return NULL;
        clean = json_pack("{s:o, s:b}", "data", json_deep_copy(data), "main",
                          json_is_true(json_object_get(e, "main")));
        id = json_object_get(e, "display_id");
        if (clean && json_is_string(id) && json_string_length(id) > 0 &&
            json_string_length(id) <= 255)
                (void) json_object_set(clean, "display_id", id);
        return clean;
}

static json_t *validated_outputs(json_t *frame)
{
        json_t *outputs = json_object_get(frame, "outputs"), *out = json_array(), *e, *clean;
        size_t i;

        json_array_foreach (outputs, i, e) {
                if (json_array_size(out) >= RESULT_ENTRIES_MAX)
                        break;
                clean = validated_output(e);
                if (clean)
                        json_array_append_new(out, clean);
        }
        return out;
}

static json_t *captured_string(struct capture *cap, int stream)
{
        _cleanup_free_ char *text = NULL;
        json_t *s;

        text = utf8_sanitize(cap->buf[stream] ? cap->buf[stream] : "", cap->len[stream]);
        if (!text)
                return json_string("");
        if (cap->truncated[stream]) {
                _cleanup_free_ char *marked = NULL;
                if (asprintf(&marked, "%s\n[airlock: output truncated at %zu bytes]\n", text,
                             cap->limit) < 0)
                        return json_string(text);
                return json_string(marked);
        }
        s = json_string(text);
        return s ? s : json_string("");
}

/* Reads the exit report of a forked session's init ({"op":"exit","status":N}), which comes
 * right after the Python ends; nothing within half a second means the Python still lives
 * (user code closed the control socket). */
static void read_exit_report(struct sandbox *sb)
{
        struct pollfd pfd = { .fd = sb->status_fd, .events = POLLIN };
        json_t *frame = NULL;
        const char *op;

        if (poll(&pfd, 1, 500) != 1 || wire_recv(sb->status_fd, 4096, &frame) < 0)
                return;
        op = json_string_value(json_object_get(frame, "op"));
        if (op && strcmp(op, "exit") == 0 && json_is_integer(json_object_get(frame, "status"))) {
                sb->jail->wait_status = (int) json_integer_value(json_object_get(frame, "status"));
                (void) jail_wait(sb->jail, false);
                sb->jail->exited = true;
        }
        json_decref(frame);
}

/* The driver's own kill (timeout, flood, broken protocol), as opposed to an owner's
 * sandbox_kill(), which marks the sandbox as destroyed. */
static void kill_internal(struct sandbox *sb)
{
        sb->alive = false;
        (void) jail_kill(sb->jail);
}

/* Why a cell was stopped by the driver rather than ending by itself. */
enum stop_reason {
        STOP_NONE,
        STOP_TIMEOUT,
        STOP_OUTPUT,
};

/* Why the driver stopped the cell. "Preserved" only where a session lives on after it: a
 * one-shot sandbox ends with its cell whatever happened. broken: the cell also corrupted its
 * control channel, so the sandbox was killed. */
static json_t *stop_error(const struct sandbox *sb, const struct exec_request *req,
                          enum stop_reason why, uint64_t timeout_ms, const struct capture *cap,
                          bool broken)
{
        const char *how = broken ? "stopped; it had corrupted its control channel (fd 3), so "
                                   "the sandbox was killed"
                          : sb->alive && !req->one_shot
                                  ? "interrupted; the session's state is preserved"
                          : sb->alive ? "interrupted"
                                      : "stopped";
        char msg[256];

        if (why == STOP_TIMEOUT)
                (void) snprintf(msg, sizeof(msg), "the cell ran longer than %.3g s and was %s",
                                timeout_ms / 1000.0, how);
        else
                (void) snprintf(msg, sizeof(msg),
                                "the output passed the limit of %zu bytes and the cell was %s",
                                cap->limit, how);
        return error_object(why == STOP_TIMEOUT ? "TimeoutError" : "OutputLimitError", msg);
}

/* The sandbox died (or broke the protocol) before answering: say what happened. */
static void classify_death(struct sandbox *sb, enum drive_outcome o, const struct cgroup_usage *u0,
                           const struct cgroup_usage *u1, const char **ret_status,
                           int *ret_exit_code, json_t **ret_error)
{
        /* A microVM's "process" is its QEMU: the runner's own status is its init's report. */
        int status = sb->vm_sig_fd >= 0 && sb->vm_exit_known ? sb->vm_exit.wait_status
                                                             : sb->jail->wait_status;
        char msg[256];

        if (u1->oom_kills > u0->oom_kills) {
                *ret_status = "oom";
                *ret_exit_code = 137;
                (void) snprintf(msg, sizeof(msg),
                                "the sandbox ran out of memory (limit %llu MiB) and was killed",
                                (unsigned long long) (sb->memory_bytes / 1048576));
                *ret_error = error_object("MemoryError", msg);
        } else if (sb->killed) {
                *ret_status = "killed";
                *ret_exit_code = 137;
                *ret_error = error_object("Killed", "the session was destroyed while the cell ran");
        } else if (sb->vm_sig_fd >= 0 && sb->vm_exit_known && sb->vm_exit.oom) {
                *ret_status = "oom";
                *ret_exit_code = 137;
                (void) snprintf(msg, sizeof(msg),
                                "the microVM ran out of memory (%llu MiB) and its kernel killed "
                                "the interpreter",
                                (unsigned long long) (sb->memory_bytes / 1048576));
                *ret_error = error_object("MemoryError", msg);
        } else if (sb->vm_sig_fd >= 0 && !sb->vm_exit_known && o != DRIVE_PROTOCOL) {
                *ret_status = "killed";
                *ret_exit_code = 137;
                *ret_error =
                        error_object("Killed", "the microVM ended without its init's word on the "
                                               "interpreter (its QEMU died or was killed, or the "
                                               "guest's kernel panicked)");
        } else if ((o == DRIVE_PROTOCOL || !sb->jail->exited) &&
                   !(sb->vm_sig_fd >= 0 && sb->vm_exit_known)) {
                *ret_status = "killed";
                *ret_exit_code = 137;
                *ret_error = error_object("RunnerError",
                                          "the runner's control channel was corrupted or closed "
                                          "(user code used fd 3?); the sandbox was killed");
        } else if (WIFSIGNALED(status)) {
                int sig = WTERMSIG(status);
                *ret_status = "killed";
                *ret_exit_code = 128 + sig;
                (void) snprintf(msg, sizeof(msg),
                                "the interpreter was killed by signal %d (%s): %s", sig,
                                strsignal(sig), signal_reason(sig));
                *ret_error = error_object("Killed", msg);
        } else {
                int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
                *ret_status = code == 0 ? "ok" : "error";
                *ret_exit_code = code;
                (void) snprintf(msg, sizeof(msg), "the interpreter exited with status %d", code);
                *ret_error = code == 0 ? json_null() : error_object("SystemExit", msg);
        }
}

/* Writes one frame to the runner, waiting for room until deadline_ns: a Code Mode reply may be
 * larger than the socket buffer, and the runner reads it while we write. */
static int ctl_send(struct sandbox *sb, json_t *frame, uint64_t deadline_ns)
{
        _cleanup_free_ char *text = json_dump_text(frame, JSON_COMPACT, NULL);
        _cleanup_free_ char *buf = NULL;
        size_t len, off = 0;
        uint32_t len_le;

        if (!text)
                return -ENOMEM;
        len = strlen(text);
        if (len > WIRE_FRAME_MAX)
                return -E2BIG;
        buf = malloc(len + 4);
        if (!buf)
                return -ENOMEM;
        len_le = htole32((uint32_t) len);
        memcpy(buf, &len_le, 4);
        memcpy(buf + 4, text, len);
        len += 4;
        while (off < len) {
                struct pollfd pfd[2] = { { .fd = sb->jail->ctl_fd, .events = POLLOUT },
                                         { .fd = sb->jail->pidfd, .events = POLLIN } };
                uint64_t now = now_ns();
                ssize_t n = write(sb->jail->ctl_fd, buf + off, len - off);

                if (n > 0) {
                        off += (size_t) n;
                        continue;
                }
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (now >= deadline_ns)
                        return -ETIMEDOUT;
                if (poll(pfd, 2, (int) ((deadline_ns - now) / 1000000u) + 1) > 0 && pfd[1].revents)
                        return -EPIPE;
        }
        return 0;
}

/* Code Mode in one cell. limits.tool_calls caps the tool calls a cell asks for (every one,
 * refused ones too, so that a flood of bad calls meets it as well); the tool list, which
 * airlock_tools asks once per cell, has a cap of the same size of its own, so that it does not
 * eat into the calls. */
struct tool_counts {
        unsigned asked; /* tool_call frames, for the cap */
        unsigned lists; /* tool_list frames, for theirs */
        unsigned calls; /* calls that went to the policy and the server, for usage */
        uint64_t ns;    /* time spent answering them */
};

static json_t *tool_error(const char *kind, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static json_t *tool_error(const char *kind, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return json_pack("{s:s, s:s}", "error", msg, "kind", kind);
}

/* Answers one Code Mode frame of the running cell (a list or a call), within the cell's
 * deadline. Returns 0, or -errno when the runner did not take the reply in time: the channel is
 * out of step then (the runner waits for one reply at a time, so only frames written by user
 * code leave replies unread), and the sandbox has been killed. */
static int answer_tool(struct sandbox *sb, const struct exec_request *req, json_t *frame,
                       uint64_t deadline_ns, struct tool_counts *tc)
{
        const struct exec_tools *t = req->tools;
        const char *op = json_string_value(json_object_get(frame, "op"));
        const char *name = json_string_value(json_object_get(frame, "name"));
        json_t *args = json_object_get(frame, "arguments"), *call = json_object_get(frame, "call");
        unsigned max_calls = t && t->max_calls ? t->max_calls : EXEC_TOOLS_MAX_CALLS;
        size_t max_bytes =
                t && t->max_request_bytes ? t->max_request_bytes : EXEC_TOOLS_REQUEST_MAX;
        bool is_list = strcmp(op, "tool_list") == 0;
        unsigned asked = is_list ? ++tc->lists : ++tc->asked;
        uint64_t t0 = now_ns();
        json_t *reply = NULL;
        int r;

        if (!t)
                reply = tool_error("disabled",
                                   "Code Mode is off in this session: its code may call no tool "
                                   "(the daemon needs MCP servers, --mcp-config, and the session "
                                   "or its profile a code_tools list; docs/TOOLS.md)");
        else if (asked > max_calls && is_list)
                reply = tool_error("limit",
                                   "this cell asked for the tool list more than %u times, the "
                                   "limit per cell",
                                   max_calls);
        else if (asked > max_calls)
                reply = tool_error("limit",
                                   "this cell made more than %u tool calls, the limit per cell "
                                   "(limits.tool_calls of its profile); make the rest in another "
                                   "cell",
                                   max_calls);
        else if (sb->last_frame_len > max_bytes)
                reply = tool_error("too_large",
                                   "the tool call is %zu bytes, over the limit of %zu bytes per "
                                   "call",
                                   sb->last_frame_len, max_bytes);
        else if (is_list) {
                json_t *list = t->list(t->userdata);
                reply = list ? json_pack("{s:o}", "ok", list) : NULL;
        } else if (!name || !*name || strlen(name) > 128)
                reply = tool_error("invalid", "a tool call needs the tool's name (a string of at "
                                              "most 128 characters)");
        else if (args && !json_is_object(args))
                reply = tool_error("invalid", "the arguments of a tool call must be a dict");
        else if (t0 >= deadline_ns)
                reply = tool_error("timeout", "the cell's time ran out before the call to '%s'",
                                   name);
        else if (atomic_load(&sb->tools_cancel))
                reply = tool_error("interrupted",
                                   "the cell was interrupted before the call to "
                                   "'%s'",
                                   name);
        else {
                tc->calls++;
                r = t->call(t->userdata, name, args, deadline_ns, &sb->tools_cancel, &reply);
                if (r < 0)
                        reply = NULL;
        }
        if (!reply)
                reply = tool_error("internal", "airlock ran out of memory answering the call");
        tc->ns += now_ns() - t0;
        if (reply && json_is_integer(call))
                (void) json_object_set(reply, "call", call);
        r = reply ? 0 : -ENOMEM;
        if (r == 0 && (json_object_set_new(reply, "op", json_string("tool_reply")) < 0 ||
                       json_object_set_new(reply, "id", json_string(sb->want_id)) < 0))
                r = -ENOMEM;
        if (r == 0)
                r = ctl_send(sb, reply,
                             (deadline_ns > now_ns() ? deadline_ns : now_ns()) + 1000000000ull);
        if (r == -E2BIG) {
                /* Nothing was sent: the answer (a result near the 64 MiB frame cap, once
                 * escaped; a huge tool list) is refused in its place. */
                json_decref(reply);
                reply = tool_error("too_large",
                                   "the answer to this request is over the channel's limit of "
                                   "%u bytes",
                                   WIRE_FRAME_MAX);
                if (reply && json_is_integer(call))
                        (void) json_object_set(reply, "call", call);
                r = reply && json_object_set_new(reply, "op", json_string("tool_reply")) == 0 &&
                                    json_object_set_new(reply, "id", json_string(sb->want_id)) == 0
                            ? ctl_send(sb, reply, now_ns() + 1000000000ull)
                            : -ENOMEM;
        }
        json_decref(reply);
        if (r < 0) {
                log_warn("sandbox=%d msg=\"the runner did not take a tool reply: %s; the "
                         "sandbox is killed\"",
                         (int) sandbox_pid(sb), strerror(-r));
                kill_internal(sb);
        }
        return r;
}

static int request_simple_frame(struct sandbox *sb, json_t *req, const char *want_op,
                                uint64_t timeout_ms, json_t **ret_frame, struct airlock_error *err);

/* The displays a cell streamed: how many bytes of frames (they stop at the profile's output
 * limit, as the result's outputs do) and how many entries; and where each new one came among
 * the cell's stdout (its index in the outputs, the bytes of stdout captured before it). */
struct display_counts {
        size_t bytes;
        unsigned entries;
        struct display_place {
                size_t index, stdout_len;
        } * places;
        size_t n_places;
};

static void note_display_place(struct display_counts *dc, json_t *frame, size_t stdout_len)
{
        json_t *index = json_object_get(frame, "index");
        struct display_place *p;

        if (json_is_true(json_object_get(frame, "update")) || !json_is_integer(index) ||
            json_integer_value(index) < 0 || json_integer_value(index) >= RESULT_ENTRIES_MAX ||
            dc->n_places >= RESULT_ENTRIES_MAX)
                return;
        p = realloc(dc->places, (dc->n_places + 1) * sizeof(*p));
        if (!p)
                return;
        dc->places = p;
        p[dc->n_places++] =
                (struct display_place){ (size_t) json_integer_value(index), stdout_len };
}

/* Marks each output that a display streamed with "stdout_offset": how many bytes of the
 * answer's stdout (UTF-8) came before it, so that a client that shows the cell at once (MCP,
 * the Responses API's logs) can still put it in its place. */
static void place_displays(json_t *outputs, const struct display_counts *dc,
                           const struct capture *cap, const json_t *stdout_text)
{
        size_t out_len = json_string_length(stdout_text), raw_done = 0, text_done = 0;
        const char *raw = cap->buf[1] ? cap->buf[1] : "";
        bool exact = utf8_is_valid(raw, cap->len[1]);

        /* The places come in the order the cell made them, so stdout only grew between them:
         * where bad bytes became U+FFFD, each stretch is counted once, as the answer has it. */
        for (size_t i = 0; i < dc->n_places; i++) {
                json_t *o = json_array_get(outputs, dc->places[i].index);
                size_t at = dc->places[i].stdout_len;

                if (at > cap->len[1])
                        at = cap->len[1];
                if (!exact && at > raw_done) {
                        _cleanup_free_ char *stretch = utf8_sanitize(raw + raw_done, at - raw_done);
                        text_done += stretch ? strlen(stretch) : 0;
                        raw_done = at;
                }
                if (!exact)
                        at = text_done;
                if (!o || json_is_true(json_object_get(o, "main")))
                        continue;
                (void) json_object_set_new(
                        o, "stdout_offset",
                        json_integer((json_int_t) (at < out_len ? at : out_len)));
        }
}

/* Passes a display on to the sink, validated like the result's outputs. */
static void forward_display(struct sandbox *sb, const struct exec_sink *sink, json_t *frame,
                            struct display_counts *dc)
{
        json_t *index = json_object_get(frame, "index"), *entry;

        dc->bytes += sb->last_frame_len;
        if (dc->bytes > sb->profile->limits.output_bytes || ++dc->entries > RESULT_ENTRIES_MAX ||
            !json_is_integer(index) || json_integer_value(index) < 0 ||
            json_integer_value(index) >= RESULT_ENTRIES_MAX)
                return;
        entry = validated_output(frame);
        if (!entry)
                return;
        if (json_is_true(json_object_get(frame, "update")))
                (void) json_object_set_new(entry, "update", json_true());
        sink->on_display(sink->userdata, entry, (size_t) json_integer_value(index));
        json_decref(entry);
}

/* A display the running cell made. The runner waits for the acknowledgement, so what the pipes
 * hold now is exactly the output made before the display: it goes to the sink first, then the
 * display, then the runner goes on. Returns 0, -E2BIG when the output passed the cap (the
 * runner is acknowledged all the same), or -errno when the runner did not take the
 * acknowledgement by deadline_ns (the sandbox has been killed then, as for a tool reply). */
static int show_display(struct sandbox *sb, struct capture *cap, const struct exec_sink *sink,
                        json_t *frame, struct display_counts *dc, uint64_t deadline_ns)
{
        json_t *ack;
        int r = 0, sent;

        for (int s = 1; s <= 2; s++)
                if (pump(sb, cap, sink, s, true) == -E2BIG)
                        r = -E2BIG;
        note_display_place(dc, frame, cap->len[1]);
        if (r == 0 && !cap->discard && sink && sink->on_display)
                forward_display(sb, sink, frame, dc);
        ack = json_pack("{s:s, s:s}", "op", "display_ack", "id", sb->want_id);
        sent = ack ? ctl_send(sb, ack,
                              (deadline_ns > now_ns() ? deadline_ns : now_ns()) + 1000000000ull)
                   : -ENOMEM;
        json_decref(ack);
        if (sent < 0) {
                log_warn("sandbox=%d msg=\"the runner did not take a display's acknowledgement: "
                         "%s; the sandbox is killed\"",
                         (int) sandbox_pid(sb), strerror(-sent));
                kill_internal(sb);
                return sent;
        }
        return r;
}

/* An execute's cwd as the runner sees it: absolute paths as they are in the namespaces mode
 * (the sandbox is all the runner sees), relative ones below /work. In the process and none
 * modes /work is a host directory and the runner sees the host, so only paths below /work are
 * taken there, mapped onto that directory. Sets *ret_path to a new string. */
static int exec_cwd_resolve(const struct sandbox *sb, const char *cwd, char **ret_path,
                            struct airlock_error *err)
{
        const char *work = sb->workdir ? sb->workdir : "/work";
        const char *rest = cwd;
        int n;

        if (cwd[0] == '/') {
                if (!sb->workdir) {
                        *ret_path = strdup(cwd);
                        return *ret_path ? 0 : -ENOMEM;
                }
                /* /home/user is /work's other name (a bind mount in the namespaces mode). */
                size_t prefix = strncmp(cwd, "/home/user", 10) == 0 ? 10 : 5;
                if ((prefix == 5 && strncmp(cwd, "/work", 5) != 0) ||
                    (cwd[prefix] != '\0' && cwd[prefix] != '/'))
                        return airlock_error_set(err, -EINVAL,
                                                 "cwd: in the %s isolation mode only directories "
                                                 "below /work or /home/user may be given",
                                                 jail_isolation_to_string(sb->mode));
                rest = cwd[prefix] == '/' ? cwd + prefix + 1 : cwd + prefix;
                /* Mapped onto a host directory: a ".." would lead out of it, to the common
                 * parent of every session's /work. (A relative cwd has none: the API refused
                 * it.) */
                for (const char *p = rest; *p;) {
                        size_t len = strcspn(p, "/");
                        if (len == 2 && p[0] == '.' && p[1] == '.')
                                return airlock_error_set(
                                        err, -EINVAL,
                                        "cwd: in the %s isolation mode only directories below "
                                        "/work may be given, named without '..'",
                                        jail_isolation_to_string(sb->mode));
                        p += len;
                        p += *p == '/';
                }
        }
        n = *rest ? asprintf(ret_path, "%s/%s", work, rest) : asprintf(ret_path, "%s", work);
        return n < 0 ? -ENOMEM : 0;
}

/* Checks that the call's cwd is a directory the runner can enter, before the cell goes out. */
static int exec_cwd_check(struct sandbox *sb, const char *cwd, const char *path,
                          struct airlock_error *err)
{
        json_t *frame = NULL;
        const char *why;
        int r;

        r = request_simple_frame(sb, json_pack("{s:s, s:s}", "op", "check_dir", "path", path), "ok",
                                 10000, &frame, err);
        if (r < 0)
                return r;
        if (json_is_true(json_object_get(frame, "dir"))) {
                json_decref(frame);
                return 0;
        }
        why = json_string_value(json_object_get(frame, "error"));
        r = airlock_error_set(err, -EINVAL,
                              "cwd: '%.200s' is not a directory in the sandbox (%.100s); give an "
                              "existing one, absolute or relative to /work",
                              cwd, why ? why : "unknown");
        json_decref(frame);
        return r;
}

/* The exec request for the runner, with the call's stdin, env and cwd when given. */
static int exec_frame(struct sandbox *sb, const struct exec_request *req, json_t **ret_frame,
                      struct airlock_error *err)
{
        _cleanup_free_ char *cwd = NULL;
        json_t *frame;
        int r;

        if (req->cwd) {
                r = exec_cwd_resolve(sb, req->cwd, &cwd, err);
                if (r >= 0)
                        r = exec_cwd_check(sb, req->cwd, cwd, err);
                if (r < 0)
                        return r;
        }
        frame = json_pack("{s:s, s:s, s:s}", "op", "exec", "language",
                          req->language ? req->language : "python", "code", req->code);
        r = frame ? 0 : -ENOMEM;
        if (r >= 0 && req->stdin_text)
                r = json_object_set_new(frame, "stdin", json_string(req->stdin_text));
        if (r >= 0 && json_object_size(req->env) > 0)
                r = json_object_set_new(frame, "env", json_deep_copy(req->env));
        if (r >= 0 && cwd)
                r = json_object_set_new(frame, "cwd", json_string(cwd));
        if (r >= 0 && req->context)
                r = json_object_set_new(frame, "context", json_string(req->context));
        if (r >= 0 && req->context && req->context_create)
                r = json_object_set_new(frame, "context_create", json_true());
        if (r < 0) {
                json_decref(frame);
                return airlock_error_set(err, -ENOMEM, "out of memory");
        }
        *ret_frame = frame;
        return 0;
}

/* An interrupted cell's grace (sandbox_exec): when it began, and its cgroup's CPU time then. */
struct grace {
        uint64_t start_ns;
        uint64_t start_cpu_usec;
        bool has_cpu;
        bool logged;
};

/* Whether the grace of an interrupted cell ran out before the cell had the CPU to stop: it used
 * less than a quarter of the grace in CPU time while some thread of it waited, runnable, for a
 * CPU that other work held (a loaded host). The cell then gets more time, GRACE_EXTEND_MS at a
 * time, up to GRACE_MAX_FACTOR graces in all (30 s with the default 2 s): a cell that ignores
 * the interrupt while it burns the CPU it is given, or sleeps through it, is still killed after
 * one grace. */
static bool grace_was_starved(struct sandbox *sb, const struct exec_request *req, struct grace *g)
{
        uint64_t now = now_ns(), cpu_usec, grace_us = req->interrupt_grace_ms * 1000ULL;
        int runnable;

        if (!g->has_cpu || !sb->jail || !sb->jail->cgroup)
                return false;
        if (now - g->start_ns >= GRACE_MAX_FACTOR * grace_us * 1000ULL)
                return false;
        if (sandbox_cpu_usec(sb, &cpu_usec) < 0 || cpu_usec < g->start_cpu_usec)
                return false;
        if (cpu_usec - g->start_cpu_usec >= grace_us / 4)
                return false;
        runnable = cgroup_runnable_tasks(sb->jail->cgroup);
        if (runnable <= 0)
                return false;
        if (!g->logged) {
                g->logged = true;
                log_info("msg=\"an interrupted cell had %.1f ms of CPU in its %" PRIu64
                         " ms grace, %d of its threads waiting for a CPU: the host is loaded, "
                         "so it gets up to %d graces to stop\"",
                         (double) (cpu_usec - g->start_cpu_usec) / 1000.0, req->interrupt_grace_ms,
                         runnable, GRACE_MAX_FACTOR);
        }
        return true;
}

int sandbox_exec(struct sandbox *sb, const struct exec_request *req, json_t **ret_result,
                 struct airlock_error *err)
{
        struct tool_counts tc = { 0 };
        struct display_counts dc = { 0 };
        const struct profile *p = sb->profile;
        uint64_t timeout_ms = req->timeout_ms ? req->timeout_ms : p->limits.timeout_ms;
        struct capture cap = { .limit = p->limits.output_bytes };
        struct cgroup_usage u0 = { 0 }, u1 = { 0 };
        enum stop_reason why = STOP_NONE;
        const char *status = NULL;
        json_t *frame = NULL, *error = NULL, *result, *stdout_text, *outputs;
        enum drive_outcome o;
        uint64_t t0, wall_ns, deadline;
        struct grace grace = { 0 };
        bool interrupted = false, reply_lost = false;
        int exit_code = 0, r;
        double cpu_ms = 0;
        uint64_t peak = 0;

        if (!sb->alive)
                return airlock_error_set(err, -ESRCH, "the sandbox is no longer running");
        if (sb->jail->cgroup) {
                (void) cgroup_reset_peak(sb->jail->cgroup);
                (void) cgroup_read_counters(sb->jail->cgroup, &u0);
        }

        if (!req->stdin_text && !req->env && !req->cwd && !req->context)
                frame = json_pack("{s:s, s:s, s:s}", "op", "exec", "language",
                                  req->language ? req->language : "python", "code", req->code);
        else if ((r = exec_frame(sb, req, &frame, err)) < 0)
                return r;
        if (frame && !sb->cgroup_usage)
                (void) json_object_set_new(frame, "rusage", json_true());
        atomic_store(&sb->interrupted, false);
        atomic_store(&sb->tools_cancel, false);
        t0 = now_ns();
        r = send_frame(sb, TAKE_PTR(frame));
        if (r < 0) {
                /* The other end is gone: the runner died between cells. */
                if (r == -EPIPE || r == -ECONNRESET)
                        kill_internal(sb);
                return airlock_error_set(err, r, "cannot send the code to the runner: %s",
                                         strerror(-r));
        }
        deadline = t0 + timeout_ms * 1000000ULL;
        sb->in_exec = true;
        for (;;) {
                o = drive(sb, deadline, &cap, req->sink, &frame);
                if (o == DRIVE_DISPLAY) {
                        r = show_display(sb, &cap, req->sink, frame, &dc, deadline);
                        json_decref(frame);
                        frame = NULL;
                        if (r == -EPIPE || r == -ECONNRESET) {
                                o = DRIVE_EXITED;
                                break;
                        }
                        if (r < 0 && r != -E2BIG) {
                                reply_lost = true;
                                o = DRIVE_PROTOCOL;
                                break;
                        }
                        if (r == 0)
                                continue;
                        o = DRIVE_OUTPUT_LIMIT;
                }
                if (o == DRIVE_TOOL) {
                        r = answer_tool(sb, req, frame, deadline, &tc);
                        json_decref(frame);
                        frame = NULL;
                        if (r == -EPIPE || r == -ECONNRESET) {
                                /* The runner is gone (killed by its owner or the OOM killer
                                 * while the tool ran, or dead): what happened to it is the
                                 * story, not the reply. */
                                o = DRIVE_EXITED;
                                break;
                        }
                        if (r < 0) {
                                /* Nothing more is answered: the frames still queued are the
                                 * flood that broke the channel. */
                                reply_lost = true;
                                o = DRIVE_PROTOCOL;
                                break;
                        }
                        continue;
                }
                if (o != DRIVE_TIMEOUT && o != DRIVE_OUTPUT_LIMIT)
                        break;
                if (why == STOP_NONE)
                        why = o == DRIVE_TIMEOUT ? STOP_TIMEOUT : STOP_OUTPUT;
                if (o == DRIVE_OUTPUT_LIMIT)
                        cap.discard = true; /* keep the pipes flowing, keep nothing */
                if (req->interrupt_grace_ms > 0 && !interrupted) {
                        interrupted = true;
                        (void) sandbox_interrupt(sb);
                        grace.start_ns = now_ns();
                        grace.has_cpu = sandbox_cpu_usec(sb, &grace.start_cpu_usec) >= 0;
                        deadline = grace.start_ns + req->interrupt_grace_ms * 1000000ULL;
                        continue;
                }
                if (o == DRIVE_OUTPUT_LIMIT && interrupted && now_ns() < deadline)
                        continue;
                if (interrupted && grace_was_starved(sb, req, &grace)) {
                        deadline = now_ns() + GRACE_EXTEND_MS * 1000000ULL;
                        continue;
                }
                /* Not stopped in time (or no grace at all): the sandbox goes. */
                kill_internal(sb);
                drain_all(sb, &cap, req->sink);
                break;
        }
        sb->in_exec = false;
        if (atomic_exchange(&sb->weight_boosted, false)) {
                /* The cell stopped (or was killed): no more than the default weight now; the
                 * fairness thread sets the right one within a second. */
                if (sb->jail && sb->jail->cgroup)
                        (void) cgroup_set_cpu_weight(sb->jail->cgroup, CGROUP_WEIGHT_DEFAULT);
                atomic_store(&sb->weight_restored, true);
        }
        wall_ns = now_ns() - t0;
        note_dropped(sb);

        if (o == DRIVE_FRAME) {
                const char *op = json_string_value(json_object_get(frame, "op"));
                drain_all(sb, &cap, req->sink);
                if (!op || strcmp(op, "result") != 0) {
                        const char *msg = json_string_value(json_object_get(frame, "message"));
                        status = "killed";
                        exit_code = 1;
                        error = error_object("RunnerError",
                                             msg ? msg : "the runner sent an unexpected answer");
                        kill_internal(sb);
                } else if (why != STOP_NONE) {
                        status = why == STOP_TIMEOUT ? "timeout" : "output_limit";
                        exit_code = why == STOP_TIMEOUT ? 124 : 125;
                        error = stop_error(sb, req, why, timeout_ms, &cap, false);
                } else {
                        status = json_string_value(json_object_get(frame, "status"));
                        status = status && strcmp(status, "ok") == 0 ? "ok" : "error";
                        exit_code = json_is_integer(json_object_get(frame, "exit_code"))
                                            ? (int) json_integer_value(
                                                      json_object_get(frame, "exit_code"))
                                            : (strcmp(status, "ok") == 0 ? 0 : 1);
                        error = validated_error(frame);
                }
        } else if (o == DRIVE_FRAME_LIMIT && why != STOP_NONE) {
                /* Stopped for a timeout or a flood, and then the frame that came was nonsense
                 * (user code left half a header on fd 3): the stop is what happened. */
                kill_internal(sb);
                drain_all(sb, &cap, req->sink);
                status = why == STOP_TIMEOUT ? "timeout" : "output_limit";
                exit_code = why == STOP_TIMEOUT ? 124 : 125;
                error = stop_error(sb, req, why, timeout_ms, &cap, true);
        } else if (o == DRIVE_FRAME_LIMIT) {
                char msg[160];
                kill_internal(sb);
                drain_all(sb, &cap, req->sink);
                status = "output_limit";
                exit_code = 125;
                (void) snprintf(msg, sizeof(msg),
                                "the cell's result was larger than %zu bytes and the cell was "
                                "stopped",
                                sb->frame_max);
                error = error_object("OutputLimitError", msg);
        } else if (why != STOP_NONE) {
                status = why == STOP_TIMEOUT ? "timeout" : "output_limit";
                exit_code = why == STOP_TIMEOUT ? 124 : 125;
                error = stop_error(sb, req, why, timeout_ms, &cap, o == DRIVE_PROTOCOL);
        } else if (reply_lost) {
                status = "killed";
                exit_code = 137;
                error = error_object("RunnerError",
                                     "the cell did not take airlock's reply to a tool request "
                                     "(code that writes Code Mode requests of its own on fd 3 "
                                     "leaves replies nobody reads); the sandbox was killed");
        }

        if (o == DRIVE_EXITED || o == DRIVE_PROTOCOL) {
                drain_all(sb, &cap, req->sink);
                /* The control socket closed while the process lives (user code closed fd 3),
                 * or the protocol broke: the sandbox cannot be driven any more. */
                /* A forked session's init says how the Python ended, on its own channel. */
                if (o == DRIVE_EXITED && sb->status_fd >= 0)
                        read_exit_report(sb);
                /* A microVM's init says how the runner ended on the signal port, just before
                 * it ends the VM: QEMU's own exit status says nothing of it. */
                if (o == DRIVE_EXITED && sb->vm_sig_fd >= 0)
                        sb->vm_exit_known = vm_exit_report(sb->vm_sig_fd, 500, &sb->vm_exit) >= 0;
                /* EOF on the socket comes a moment before the exit is reapable. */
                if (o == DRIVE_EXITED && sb->jail->pidfd >= 0) {
                        struct pollfd pfd = { .fd = sb->jail->pidfd, .events = POLLIN };
                        (void) poll(&pfd, 1, 500);
                }
                if (o == DRIVE_PROTOCOL || jail_wait(sb->jail, true) == -EAGAIN) {
                        kill_internal(sb);
                        if (o == DRIVE_EXITED)
                                o = DRIVE_PROTOCOL;
                }
                sb->alive = false;
        }
        if (!sb->alive) {
                (void) jail_wait(sb->jail, false);
                if (sb->jail->cgroup)
                        (void) cgroup_read_usage(sb->jail->cgroup, &u1);
                if (!status)
                        classify_death(sb, o, &u0, &u1, &status, &exit_code, &error);
        } else if (sb->jail->cgroup) {
                (void) cgroup_read_usage(sb->jail->cgroup, &u1);
                /* The OOM killer took one process of the cell while the runner lived on
                 * (cgroup v1 kills a process, not the group): a JavaScript REPL or a bash
                 * cell's command ran out of memory, and the cell failed because of it. */
                if (status && strcmp(status, "error") == 0 && u1.oom_kills > u0.oom_kills) {
                        char msg[256];
                        (void) snprintf(msg, sizeof(msg),
                                        "a process of the cell ran out of memory (limit %llu "
                                        "MiB) and was killed; the session lives on",
                                        (unsigned long long) (sb->memory_bytes / 1048576));
                        json_decref(error);
                        error = error_object("MemoryError", msg);
                        status = "oom";
                        exit_code = 137;
                }
        }
        if (!status) {
                status = "killed";
                exit_code = 137;
                error = error_object("RunnerError", "the runner stopped answering");
        }

        sb->cgroup_usage = u1.has_cpu && u1.has_peak;
        if (u1.has_cpu)
                cpu_ms = (double) (u1.cpu_usec - u0.cpu_usec) / 1000.0;
        else if (frame && json_is_number(json_object_get(frame, "cpu_ms")))
                cpu_ms = json_number_value(json_object_get(frame, "cpu_ms"));
        if (u1.has_peak)
                peak = u1.memory_peak;
        else if (frame && json_is_integer(json_object_get(frame, "max_rss_bytes")))
                peak = (uint64_t) json_integer_value(json_object_get(frame, "max_rss_bytes"));

        sb->exec_count++;
        stdout_text = captured_string(&cap, 1);
        outputs = frame ? validated_outputs(frame) : json_array();
        if (outputs && stdout_text && dc.n_places > 0)
                place_displays(outputs, &dc, &cap, stdout_text);
        free(dc.places);
        result = json_pack(
                "{s:s, s:o, s:o, s:o, s:o, s:o, s:i, s:b, s:i, s:s, s:o, s:{s:f, s:f, s:I, s:i, "
                "s:f}}",
                "status", status, "stdout", stdout_text, "stderr", captured_string(&cap, 2),
                "result",
                frame && why == STOP_NONE ? field_string_or_null(frame, "result") : json_null(),
                "outputs", outputs, "error", error ? error : json_null(), "exit_code", exit_code,
                "timed_out", why == STOP_TIMEOUT, "execution_count", sb->exec_count, "state",
                sb->alive ? "preserved" : "lost", "files",
                frame ? validated_files(frame) : json_array(), "usage", "wall_ms", wall_ns / 1e6,
                "cpu_ms", cpu_ms, "peak_memory_bytes", (json_int_t) peak, "tool_calls",
                (int) tc.calls, "tool_ms", tc.ns / 1e6);
        capture_done(&cap);
        json_decref(frame);
        if (!result)
                return airlock_error_set(err, -ENOMEM, "out of memory building the result");
        if (sb->egress)
                (void) json_object_set_new(json_object_get(result, "usage"), "network",
                                           egress_session_take_usage(sb->egress));
        *ret_result = result;
        return 0;
}

int sandbox_interrupt(struct sandbox *sb)
{
        int pidfd;

        if (!sb->alive || !sb->jail)
                return -ESRCH;
        /* A Code Mode call under way is cancelled too: the driver waits for it, not for
         * the runner, and a slow tool must not hold an interrupted cell. */
        atomic_store(&sb->tools_cancel, true);
        /* One SIGINT per cell: a second one could land while the runner is still turning the
         * first into a result, outside the user's code, and end the interpreter. */
        if (atomic_exchange(&sb->interrupted, true))
                return 0;
        /* The cell needs the CPU to stop: a busy session's lowered weight (fair.h) would keep
         * it waiting behind the others while its grace runs out, and under a storm even the
         * default weight got two dozen cells interrupted together 20-40 ms each per grace. It
         * outweighs the other sessions until the cell ends (sandbox_exec() puts the default
         * back); one that ignores the interrupt while it burns the CPU is killed after one
         * grace anyway. */
        /* Marked before it is written: the fairness thread, which may be writing a weight of
         * its own at this moment, looks at the mark after its write and writes this one again
         * (sandbox_set_cpu_weight()), so the boost cannot be overwritten. */
        if (sb->jail->cgroup) {
                atomic_store(&sb->weight_boosted, true);
                if (cgroup_set_cpu_weight(sb->jail->cgroup, CGROUP_WEIGHT_INTERRUPTED) >= 0)
                        atomic_store(&sb->weight_restored, true);
                else
                        atomic_store(&sb->weight_boosted, false);
        }
        if (sb->vm_sig_fd >= 0)
                return vm_interrupt(sb->vm_sig_fd);
        pidfd = sb->runner_pidfd >= 0 ? sb->runner_pidfd : sb->jail->pidfd;
        if (pidfd >= 0) {
                if (syscall(SYS_pidfd_send_signal, pidfd, SIGINT, NULL, 0) < 0)
                        return -errno;
                return 0;
        }
        return kill(sb->jail->pid, SIGINT) < 0 ? -errno : 0;
}

void sandbox_kill(struct sandbox *sb)
{
        if (!sb->jail)
                return;
        sb->killed = true;
        atomic_store(&sb->tools_cancel, true); /* the driver may be waiting for a tool */
        kill_internal(sb);
}

/* Sends a request with no fds and waits (up to timeout_ms) for its answer frame, whose op must
 * be want_op. Output printed meanwhile is dropped. */
/* Sends req, waits for an answer with op want_op; the answer goes to *ret_frame if given. */
static int request_simple_frame(struct sandbox *sb, json_t *req, const char *want_op,
                                uint64_t timeout_ms, json_t **ret_frame, struct airlock_error *err)
{
        struct capture cap = { .limit = 64 * 1024 };
        json_t *frame = NULL;
        enum drive_outcome o;
        const char *op;
        int r;

        r = send_frame(sb, req);
        if (r < 0)
                return airlock_error_set(err, r, "cannot talk to the runner: %s", strerror(-r));
        o = drive(sb, now_ns() + timeout_ms * 1000000ULL, &cap, NULL, &frame);
        capture_done(&cap);
        op = o == DRIVE_FRAME ? json_string_value(json_object_get(frame, "op")) : NULL;
        r = op && strcmp(op, want_op) == 0 ? 0 : -EIO;
        if (r == 0 && ret_frame)
                *ret_frame = TAKE_PTR(frame);
        json_decref(frame);
        if (r < 0)
                return airlock_error_set(err, r, "the runner did not answer as expected");
        return 0;
}

static int request_simple(struct sandbox *sb, json_t *req, const char *want_op, uint64_t timeout_ms,
                          struct airlock_error *err)
{
        return request_simple_frame(sb, req, want_op, timeout_ms, NULL, err);
}

int sandbox_warmup(struct sandbox *sb, unsigned *ret_cells, uint64_t *ret_faults,
                   struct airlock_error *err)
{
        json_t *frame = NULL;
        int r = request_simple_frame(sb, json_pack("{s:s}", "op", "warmup"), "ok", 30000, &frame,
                                     err);

        if (r == 0) {
                json_t *cells = json_object_get(frame, "cells"),
                       *faults = json_object_get(frame, "faults");
                *ret_cells = json_is_integer(cells) ? (unsigned) json_integer_value(cells) : 0;
                *ret_faults = json_is_integer(faults) ? (uint64_t) json_integer_value(faults) : 0;
        }
        json_decref(frame);
        return r;
}

int sandbox_context(struct sandbox *sb, const char *op, const char *id, json_t **ret_ids,
                    struct airlock_error *err)
{
        json_t *req = json_pack("{s:s}", "op", op), *frame = NULL;
        const char *why;
        int r;

        if (!req || (id && json_object_set_new(req, "context", json_string(id)) < 0)) {
                json_decref(req);
                return airlock_error_set(err, -ENOMEM, "out of memory");
        }
        r = request_simple_frame(sb, req, "ok", 10000, &frame, err);
        if (r < 0)
                return r;
        why = json_string_value(json_object_get(frame, "error"));
        if (why) {
                r = strstr(why, "no such") ? -ENOENT : strstr(why, "at most") ? -EUSERS : -EINVAL;
                r = airlock_error_set(err, r, "%.200s", why);
        } else if (ret_ids) {
                *ret_ids = json_incref(json_object_get(frame, "contexts"));
        }
        json_decref(frame);
        return r;
}

int sandbox_setenv(struct sandbox *sb, char *const *env, const char *home,
                   struct airlock_error *err)
{
        _cleanup_free_ char *dir = NULL;
        json_t *obj = NULL;
        int r;

        if (home) {
                r = exec_cwd_resolve(sb, home, &dir, err);
                if (r < 0)
                        return r;
        }
        obj = json_object();
        if (!obj)
                return -ENOMEM;
        for (char *const *e = env; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                char name[256];
                if (!eq || (size_t) (eq - *e) >= sizeof(name))
                        continue;
                memcpy(name, *e, (size_t) (eq - *e));
                name[eq - *e] = '\0';
                json_object_set_new(obj, name, json_string(eq + 1));
        }
        r = request_simple(sb,
                           json_pack("{s:s, s:o, s:s?}", "op", "setenv", "env", obj, "home", dir),
                           "ok", 10000, err);
        if (r < 0)
                return airlock_error_set(err, r, "the runner did not accept the environment");
        return 0;
}

int sandbox_pidfd(const struct sandbox *sb)
{
        return sb->jail ? sb->jail->pidfd : -EBADF;
}

int sandbox_egress_open(struct sandbox *sb, struct egress *egress, const char *id,
                        struct airlock_error *err)
{
        const struct profile *p = sb->profile;
        struct egress_session *es = NULL;
        int r;

        /* A microVM's pidfd is its QEMU's, in a network namespace of its own (src/vm/vmm.h),
         * whose user network its guest reaches the listeners through. */
        r = egress_session_open(
                egress, sandbox_pidfd(sb), p->network,
                sandbox_is_vm(sb) ? EGRESS_FORWARD_GUEST : EGRESS_FORWARD_LOOPBACK, p->network,
                &(struct egress_session_info){ .session = id, .profile = p->name }, &es, err);
        if (r < 0)
                return r;
        sandbox_set_egress(sb, es);
        return 0;
}

void sandbox_set_egress(struct sandbox *sb, struct egress_session *es)
{
        egress_session_close(sb->egress);
        sb->egress = es;
}

struct egress_session *sandbox_egress(const struct sandbox *sb)
{
        return sb->egress;
}

pid_t sandbox_pid(const struct sandbox *sb)
{
        return sb->jail ? sb->jail->pid : -1;
}

uid_t sandbox_host_uid(const struct sandbox *sb)
{
        return sb->jail ? sb->jail->host_uid : (uid_t) -1;
}

int sandbox_usage(struct sandbox *sb, struct cgroup_usage *ret_usage)
{
        if (!sb->jail || !sb->jail->cgroup)
                return -ENODATA;
        return cgroup_read_usage(sb->jail->cgroup, ret_usage);
}

int sandbox_cpu_usec(struct sandbox *sb, uint64_t *ret_usec)
{
        int r;

        if (!sb->jail || !sb->jail->cgroup)
                return -ENODATA;
        r = cgroup_read_cpu_usec(sb->jail->cgroup, ret_usec);
        return r == -ENOENT ? -ENODATA : r;
}

int sandbox_set_cpu_weight(struct sandbox *sb, uint32_t weight)
{
        int r;

        if (!sb->jail || !sb->jail->cgroup)
                return -ENODATA;
        r = cgroup_set_cpu_weight(sb->jail->cgroup, weight);
        /* An interrupt that came while we wrote marked its boost before writing it: whichever
         * write landed last, the boost is what the cgroup keeps until the cell ends. */
        if (r >= 0 && weight != CGROUP_WEIGHT_INTERRUPTED && atomic_load(&sb->weight_boosted))
                r = cgroup_set_cpu_weight(sb->jail->cgroup, CGROUP_WEIGHT_INTERRUPTED);
        return r == -ENOENT ? -ENODATA : r;
}

bool sandbox_weight_was_restored(struct sandbox *sb)
{
        return atomic_exchange(&sb->weight_restored, false);
}

bool sandbox_weight_is_boosted(struct sandbox *sb)
{
        return atomic_load(&sb->weight_boosted);
}

int sandbox_adopt(const struct profile *p, struct jail *jail, struct zygote *z, unsigned slot,
                  int runner_pidfd, int status_fd, struct sandbox **ret_sb,
                  struct airlock_error *err)
{
        struct sandbox *sb = calloc(1, sizeof(*sb));

        if (!sb) {
                (void) close(runner_pidfd);
                (void) close(status_fd);
                jail_free(jail);
                zygote_release_slot(z, slot);
                zygote_unref(z);
                return airlock_error_set(err, -ENOMEM, "out of memory");
        }
        sb->profile = p;
        sb->mode = JAIL_NAMESPACES;
        sb->jail = jail;
        sb->zygote = z;
        sb->slot = slot;
        sb->runner_pidfd = runner_pidfd;
        sb->status_fd = status_fd;
        sb->vm_sig_fd = -EBADF;
        sb->vm_qmp_fd = -EBADF;
        sb->layer_fd = -EBADF;
        sb->memory_bytes = p->limits.memory_bytes;
        sb->alive = true;
        sb->frame_max = p->limits.output_bytes + FRAME_OVERHEAD_MAX;
        if (sb->frame_max > WIRE_FRAME_MAX)
                sb->frame_max = WIRE_FRAME_MAX;
        (void) fcntl_nonblock(jail->ctl_fd);
        (void) fcntl_nonblock(jail->stdout_fd);
        (void) fcntl_nonblock(jail->stderr_fd);
        *ret_sb = sb;
        return 0;
}

unsigned sandbox_zygote_generation(const struct sandbox *sb)
{
        return sb->zygote ? zygote_generation(sb->zygote) : 0;
}

bool sandbox_is_alive(struct sandbox *sb)
{
        struct pollfd pfd[2] = {
                { .fd = sb->jail ? sb->jail->pidfd : -1, .events = POLLIN },
                { .fd = sb->runner_pidfd, .events = POLLIN },
        };

        /* Killed from outside while idle (nothing was reading its pipes): the pidfds say so.
         * A sandbox found dead is finished off, so that nothing of it lingers. */
        if (sb->alive && poll(pfd, 2, 0) > 0 && (pfd[0].revents || pfd[1].revents))
                kill_internal(sb);
        return sb->alive;
}

uint64_t sandbox_setup_ns(const struct sandbox *sb)
{
        return sb->jail ? sb->jail->setup_ns : 0;
}

struct sandbox *sandbox_free(struct sandbox *sb)
{
        if (!sb)
                return NULL;
        if (sb->jail && sb->alive && !sb->jail->adopted) {
                /* Let the runner finish cleanly (atexit handlers, flushes) for a moment: EOF on
                 * its control socket makes it exit; the pidfd says when it did. */
                struct pollfd pfd = { .fd = sb->jail->pidfd, .events = POLLIN };
                (void) shutdown(sb->jail->ctl_fd, SHUT_WR);
                if (pfd.fd >= 0)
                        (void) poll(&pfd, 1, 100);
        }
        /* Its proxy listeners first: no connection outlives the sandbox. */
        sb->egress = egress_session_close(sb->egress);
        sb->jail = jail_free(sb->jail);
        if (sb->zygote) {
                zygote_release_slot(sb->zygote, sb->slot);
                zygote_unref(sb->zygote);
        }
        if (sb->runner_pidfd >= 0)
                (void) close(sb->runner_pidfd);
        if (sb->status_fd >= 0)
                (void) close(sb->status_fd);
        if (sb->vm_sig_fd >= 0)
                (void) close(sb->vm_sig_fd);
        sb->vm_files = vm_files_free(sb->vm_files);
        if (sb->vm_qmp_fd >= 0)
                (void) close(sb->vm_qmp_fd);
        if (sb->layer_fd >= 0)
                (void) close(sb->layer_fd); /* after the jail: nothing has the layer mounted */
        if (sb->workdir)
                (void) workspace_remove_host_dir(sb->workdir);
        free(sb->workdir);
        free(sb->runner_path);
        strv_free(sb->envp);
        free(sb->rbuf);
        free(sb);
        return NULL;
}

/* How long a runner may take to write or load a saved state: pickling is bounded by the
 * session's memory, so this only catches a runner that stopped answering. */
#define SNAPSHOT_TIMEOUT_MS 120000
#define SNAPSHOT_NAMES_MAX 4096
#define SNAPSHOT_NAME_LEN_MAX 512
#define SNAPSHOT_BASH_MAX (1u << 20)

/* Keeps only an array of short strings, at most SNAPSHOT_NAMES_MAX of them. */
static json_t *validated_names(json_t *v)
{
        json_t *out = json_array(), *e;
        size_t i;

        json_array_foreach (v, i, e) {
                if (json_array_size(out) >= SNAPSHOT_NAMES_MAX)
                        break;
                if (json_is_string(e) && json_string_length(e) > 0 &&
                    json_string_length(e) <= SNAPSHOT_NAME_LEN_MAX)
                        json_array_append(out, e);
        }
        return out;
}

/* The facts of a snapshot answer, each checked: the daemon stores them and hands them back to
 * a later runner, it never acts on them itself. */
static json_t *validated_snapshot(json_t *frame, uint64_t written, struct airlock_error *err)
{
        json_t *offset = json_object_get(frame, "offset"), *size = json_object_get(frame, "size");
        json_t *modules = json_object_get(frame, "modules"), *bash = json_object_get(frame, "bash");
        json_t *count = json_object_get(frame, "count"), *mods, *v;
        const char *k;

        if (!json_is_integer(offset) || !json_is_integer(size) || json_integer_value(offset) < 0 ||
            json_integer_value(size) < 0 ||
            (uint64_t) json_integer_value(offset) + (uint64_t) json_integer_value(size) > written) {
                airlock_error_set(err, -EIO,
                                  "the runner's account of the saved state does not "
                                  "match what it wrote");
                return NULL;
        }
        mods = json_object();
        json_object_foreach (modules, k, v) {
                if (json_object_size(mods) >= SNAPSHOT_NAMES_MAX)
                        break;
                if (strlen(k) <= SNAPSHOT_NAME_LEN_MAX && json_is_string(v) &&
                    json_string_length(v) <= SNAPSHOT_NAME_LEN_MAX)
                        json_object_set(mods, k, v);
        }
        return json_pack("{s:O, s:O, s:o, s:o, s:I, s:o}", "offset", offset, "size", size,
                         "lost_names", validated_names(json_object_get(frame, "lost_names")),
                         "modules", mods, "count",
                         (json_int_t) (json_is_integer(count) && json_integer_value(count) >= 0
                                               ? json_integer_value(count)
                                               : 0),
                         "bash",
                         json_is_string(bash) && json_string_length(bash) <= SNAPSHOT_BASH_MAX
                                 ? json_incref(bash)
                                 : json_null());
}

/* Polls the five fds of a side exchange ([2] and [3] the sandbox's stdout and stderr, whose
 * bytes are read and dropped) for at most left_ns. Returns the number of ready fds, 0, or
 * -errno. */
static int poll_dropping_output(struct sandbox *sb, struct pollfd pfd[5], uint64_t left_ns)
{
        int n = poll(pfd, 5, (int) (left_ns / 1000000ULL) + 1);

        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        for (int i = 2; i <= 3; i++)
                if (pfd[i].revents)
                        (void) pump(sb, NULL, NULL, i - 1, true);
        return n;
}

/* Moves what the pipe holds into out_fd: splice where the kernel can, read/write where not.
 * Returns bytes moved (0 at EOF), -EAGAIN when empty, or -errno. */
static ssize_t pipe_to_file(int pipe_fd, int out_fd)
{
        static const size_t chunk = 1u << 20;
        char buf[65536];
        ssize_t n;

        n = splice(pipe_fd, NULL, out_fd, NULL, chunk, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n >= 0)
                return n;
        if (errno == EAGAIN || errno == EINTR)
                return -EAGAIN;
        if (errno != EINVAL)
                return -errno;
        n = read(pipe_fd, buf, sizeof(buf));
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
        if (n > 0) {
                int r = write_full(out_fd, buf, (size_t) n);
                if (r < 0)
                        return r;
        }
        return n;
}

/* sandbox_snapshot (out_fd: a file of the daemon's, the state crosses a pipe) and
 * sandbox_snapshot_shared (file_fd: a memfd the runner writes itself, at most room bytes). */
static int snapshot_exchange(struct sandbox *sb, int out_fd, int file_fd, uint64_t room,
                             uint64_t max_bytes, json_t **ret_meta, uint64_t *ret_bytes,
                             struct airlock_error *err)
{
        _cleanup_close_ int rd = -EBADF, wr = -EBADF;
        json_t *frame = NULL, *meta;
        uint64_t written = 0, deadline;
        bool pipe_open = file_fd < 0, interrupted = false, over = false;
        int p[2], r, write_error = 0;

        if (!sb->alive)
                return airlock_error_set(err, -ESRCH, "the sandbox is no longer running");
        if (file_fd >= 0) {
                r = send_request(
                        sb, json_pack("{s:s, s:I}", "op", "snapshot", "room", (json_int_t) room),
                        &file_fd, 1);
                if (r < 0)
                        return airlock_error_set(err, r, "cannot talk to the runner: %s",
                                                 strerror(-r));
                written = room; /* the memfd's size, sealed against growing */
        } else {
                if (pipe2(p, O_CLOEXEC) < 0)
                        return airlock_error_set(err, -errno, "cannot make a pipe: %m");
                rd = p[0], wr = p[1];
                (void) fcntl_nonblock(rd); /* the runner's end stays blocking */
                /* A large state crosses in 1 MiB steps rather than 64 KiB ones: fewer wake-ups
                 * of both sides (the most an unprivileged pipe may hold by default; best
                 * effort). */
                (void) fcntl(rd, F_SETPIPE_SZ, 1 << 20);
                r = send_request(sb, json_pack("{s:s}", "op", "snapshot"), &wr, 1);
                if (r < 0)
                        return airlock_error_set(err, r, "cannot talk to the runner: %s",
                                                 strerror(-r));
                safe_close_fd(TAKE_FD(wr));
        }

        deadline = now_ns() + SNAPSHOT_TIMEOUT_MS * 1000000ULL;
        while (!frame || pipe_open) {
                struct pollfd pfd[5] = {
                        { .fd = pipe_open ? rd : -1, .events = POLLIN },
                        { .fd = frame ? -1 : sb->jail->ctl_fd, .events = POLLIN },
                        { .fd = sb->jail->stdout_fd, .events = POLLIN },
                        { .fd = sb->jail->stderr_fd, .events = POLLIN },
                        { .fd = sb->jail->pidfd, .events = POLLIN },
                };
                uint64_t now = now_ns();
                int n;

                if (now >= deadline) {
                        if (interrupted) {
                                kill_internal(sb);
                                json_decref(frame);
                                return airlock_error_set(err, -ETIMEDOUT,
                                                         "the runner did not finish saving "
                                                         "the session and was killed");
                        }
                        /* __reduce__ of user objects is user code: it may hang. */
                        (void) sandbox_interrupt(sb);
                        interrupted = true;
                        deadline = now + 2000ULL * 1000000ULL;
                        continue;
                }
                /* Whatever user code printed while it was pickled is not a cell's output. */
                n = poll_dropping_output(sb, pfd, deadline - now);
                if (n < 0)
                        return airlock_error_set(err, n, "poll: %s", strerror(-n));
                if (n == 0)
                        continue;
                if (pfd[0].revents) {
                        ssize_t got = pipe_to_file(rd, out_fd);
                        if (got == 0 || (got < 0 && got != -EAGAIN)) {
                                if (got < 0)
                                        write_error = (int) got;
                                pipe_open = false;
                                safe_close_fd(TAKE_FD(rd)); /* the runner gets EPIPE */
                        } else if (got > 0) {
                                written += (uint64_t) got;
                                if (written > max_bytes) {
                                        over = true;
                                        pipe_open = false;
                                        safe_close_fd(TAKE_FD(rd));
                                }
                        }
                }
                if (pfd[1].revents) {
                        r = frame_read(sb, &frame); /* 2: dropped, as in drive() */
                        if (r < 0 && r != -E2BIG) {
                                kill_internal(sb);
                                return airlock_error_set(err, -EIO,
                                                         "the runner broke the protocol while "
                                                         "saving the session");
                        }
                        if (r == -E2BIG) {
                                kill_internal(sb);
                                return airlock_error_set(err, -EIO,
                                                         "the runner's answer to a "
                                                         "save was too large");
                        }
                }
                if (pfd[4].revents && !frame) {
                        sb->alive = false;
                        return airlock_error_set(err, -EIO,
                                                 "the interpreter died while saving the session");
                }
        }

        if (over) {
                json_decref(frame);
                return airlock_error_set(err, -EFBIG,
                                         "the session's Python state is larger than %llu bytes, "
                                         "the most a stopped session may keep",
                                         (unsigned long long) max_bytes);
        }
        if (write_error) {
                json_decref(frame);
                return airlock_error_set(err, write_error, "cannot write the saved state: %s",
                                         strerror(-write_error));
        }
        if (file_fd >= 0 && json_is_true(json_object_get(frame, "no_room"))) {
                json_decref(frame);
                return airlock_error_set(err, -ENOSPC,
                                         "the session's Python state does not fit in the %llu "
                                         "bytes it may still take in its memory",
                                         (unsigned long long) room);
        }
        {
                const char *op = json_string_value(json_object_get(frame, "op"));
                const char *why = json_string_value(json_object_get(frame, "error"));
                if (!op || strcmp(op, "snapshot_done") != 0 || why) {
                        r = airlock_error_set(err, -EIO,
                                              "the runner could not save the "
                                              "session's variables: %.300s",
                                              why ? why : "unexpected answer");
                        json_decref(frame);
                        return r;
                }
        }
        meta = validated_snapshot(frame, written, err);
        json_decref(frame);
        if (!meta)
                return -EIO;
        if (file_fd >= 0) /* where the state ends in the memfd */
                written = (uint64_t) json_integer_value(json_object_get(meta, "offset")) +
                          (uint64_t) json_integer_value(json_object_get(meta, "size"));
        *ret_meta = meta;
        *ret_bytes = written;
        return 0;
}

int sandbox_snapshot(struct sandbox *sb, int out_fd, uint64_t max_bytes, json_t **ret_meta,
                     uint64_t *ret_bytes, struct airlock_error *err)
{
        return snapshot_exchange(sb, out_fd, -1, 0, max_bytes, ret_meta, ret_bytes, err);
}

int sandbox_snapshot_shared(struct sandbox *sb, int memfd, uint64_t room, json_t **ret_meta,
                            uint64_t *ret_end, struct airlock_error *err)
{
        return snapshot_exchange(sb, -1, memfd, room, room, ret_meta, ret_end, err);
}

int sandbox_share_room(struct sandbox *sb, uint64_t *ret_room)
{
        struct cgroup_usage u;
        uint64_t limit = sb->memory_bytes, margin;
        int r;

        if (!limit)
                return -ENODATA; /* no limit: nothing would bound the shared pages */
        r = sandbox_usage(sb, &u);
        if (r < 0)
                return r;
        margin = SHARE_MARGIN_MIN + limit / 32;
        *ret_room = u.memory_current + margin < limit ? limit - u.memory_current - margin : 0;
        return 0;
}

/* The errnos a put may honestly end with; anything else a runner says becomes EIO. */
static int put_errno(json_int_t e)
{
        static const int known[] = { ENOENT, ENOTDIR, EISDIR, EINVAL, ENOSPC, EDQUOT,
                                     EFBIG,  EACCES,  EPERM,  ELOOP,  EXDEV,  ENAMETOOLONG,
                                     EROFS,  EMFILE,  ENFILE, ENOMEM };

        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                if (e == known[i])
                        return -known[i];
        return -EIO;
}

int sandbox_put(struct sandbox *sb, const char *path, const void *data, size_t len,
                int *ret_write_errno, struct airlock_error *err)
{
        _cleanup_close_ int rd = -EBADF, wr = -EBADF;
        json_t *frame = NULL;
        json_int_t e;
        uint64_t deadline;
        size_t off = 0;
        int p[2], r;

        if (!sb->alive)
                return airlock_error_set(err, -ESRCH, "the sandbox is no longer running");
        if (pipe2(p, O_CLOEXEC) < 0)
                return airlock_error_set(err, -errno, "cannot make a pipe: %m");
        rd = p[0], wr = p[1];
        (void) fcntl_nonblock(wr); /* the runner's end stays blocking */
        (void) fcntl(wr, F_SETPIPE_SZ, 1 << 20);
        r = send_request(sb,
                         json_pack("{s:s, s:s, s:s}", "op", "put", "root",
                                   sb->workdir ? sb->workdir : "/work", "path", path),
                         &rd, 1);
        if (r < 0)
                return airlock_error_set(err, r, "cannot talk to the runner: %s", strerror(-r));
        safe_close_fd(TAKE_FD(rd));
        if (len == 0)
                safe_close_fd(TAKE_FD(wr));

        /* A runner reads at memory speed; this allows a slow machine 1 s per MiB beyond 30 s. */
        deadline = now_ns() + (30000ULL + (len >> 20) * 1000ULL) * 1000000ULL;
        while (!frame) {
                struct pollfd pfd[5] = {
                        { .fd = wr, .events = POLLOUT },
                        { .fd = sb->jail->ctl_fd, .events = POLLIN },
                        { .fd = sb->jail->stdout_fd, .events = POLLIN },
                        { .fd = sb->jail->stderr_fd, .events = POLLIN },
                        { .fd = sb->jail->pidfd, .events = POLLIN },
                };
                uint64_t now = now_ns();
                int n;

                if (now >= deadline) {
                        /* An idle runner that does not take a file has been tampered with. */
                        kill_internal(sb);
                        return airlock_error_set(err, -ETIMEDOUT,
                                                 "the session did not take the file in time and "
                                                 "was ended");
                }
                /* Whatever a background thread of the session prints is no cell's output. */
                n = poll_dropping_output(sb, pfd, deadline - now);
                if (n < 0)
                        return airlock_error_set(err, n, "poll: %s", strerror(-n));
                if (n == 0)
                        continue;
                if (pfd[0].revents & (POLLERR | POLLHUP)) {
                        /* The runner stopped reading: its answer says why. */
                        safe_close_fd(TAKE_FD(wr));
                } else if (pfd[0].revents) {
                        ssize_t w = write(wr, (const char *) data + off, len - off);
                        if (w < 0 && errno != EAGAIN && errno != EINTR)
                                safe_close_fd(TAKE_FD(wr));
                        if (w > 0)
                                off += (size_t) w;
                        if (off == len)
                                safe_close_fd(TAKE_FD(wr));
                }
                if (pfd[1].revents) {
                        r = frame_read(sb, &frame); /* 2: dropped, as in drive() */
                        if (r < 0) {
                                kill_internal(sb);
                                return airlock_error_set(err, -EIO,
                                                         "the runner broke the protocol while "
                                                         "writing a file");
                        }
                }
                if (pfd[4].revents && !frame) {
                        sb->alive = false;
                        return airlock_error_set(err, -EIO,
                                                 "the session's process died while writing the "
                                                 "file (out of memory?)");
                }
        }
        {
                const char *op = json_string_value(json_object_get(frame, "op"));
                json_t *je = json_object_get(frame, "errno");
                json_t *jb = json_object_get(frame, "bytes");

                if (!op || strcmp(op, "put_done") != 0) {
                        json_decref(frame);
                        kill_internal(sb);
                        return airlock_error_set(err, -EIO,
                                                 "the runner gave a wrong answer to "
                                                 "a file write");
                }
                e = json_is_integer(je) ? json_integer_value(je) : 0;
                r = je ? put_errno(e) : 0;
                /* A success must account for every byte sent. */
                if (r == 0 && (!json_is_integer(jb) || (uint64_t) json_integer_value(jb) != len ||
                               off != len))
                        r = -EIO;
                json_decref(frame);
        }
        *ret_write_errno = r;
        return 0;
}

int sandbox_restore_send(struct sandbox *sb, int in_fd, const json_t *meta, bool reseed,
                         struct airlock_error *err)
{
        _cleanup_close_ int fd = in_fd;
        json_t *req;
        int r;

        if (!sb->alive)
                return airlock_error_set(err, -ESRCH, "the sandbox is no longer running");
        /* Parts a saved state may lack (a crash before the first checkpoint) go as null. */
        req = json_pack("{s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:b}", "op", "restore", "offset",
                        json_object_get(meta, "offset"), "size", json_object_get(meta, "size"),
                        "modules", json_object_get(meta, "modules"), "lost_names",
                        json_object_get(meta, "lost_names"), "count",
                        json_object_get(meta, "count"), "bash", json_object_get(meta, "bash"),
                        "reseed", reseed);
        if (!req)
                return airlock_error_set(err, -EINVAL,
                                         "the saved state's description is "
                                         "incomplete");
        r = send_request(sb, req, &fd, 1);
        if (r < 0)
                return airlock_error_set(err, r, "cannot talk to the runner: %s", strerror(-r));
        return 0;
}

int sandbox_restore_wait(struct sandbox *sb, json_t **ret_report, struct airlock_error *err)
{
        struct capture cap = { .limit = 64 * 1024 };
        json_t *frame = NULL, *error;
        enum drive_outcome o;
        const char *op;

        o = drive(sb, now_ns() + SNAPSHOT_TIMEOUT_MS * 1000000ULL, &cap, NULL, &frame);
        capture_done(&cap);
        if (o != DRIVE_FRAME) {
                kill_internal(sb);
                return airlock_error_set(err, o == DRIVE_TIMEOUT ? -ETIMEDOUT : -EIO,
                                         "the new sandbox %s while loading the saved state",
                                         o == DRIVE_TIMEOUT ? "did not answer" : "died");
        }
        op = json_string_value(json_object_get(frame, "op"));
        if (!op || strcmp(op, "restored") != 0) {
                json_decref(frame);
                kill_internal(sb);
                return airlock_error_set(err, -EIO,
                                         "the runner gave an unexpected answer to a "
                                         "restore");
        }
        error = json_object_get(frame, "error");
        *ret_report = json_pack("{s:o, s:o}", "lost_names",
                                validated_names(json_object_get(frame, "lost_names")), "error",
                                json_is_string(error) ? json_string(json_string_value(error))
                                                      : json_null());
        json_decref(frame);
        return *ret_report ? 0 : -ENOMEM;
}

int sandbox_vm_ready(struct sandbox *sb, bool reseed_python, struct airlock_error *err)
{
        json_t *report = NULL, *req;
        int r;

        if (!sandbox_is_vm(sb) || !sb->alive)
                return airlock_error_set(err, -ESRCH, "the restored VM is not running");
        r = vm_continue(sb->vm_qmp_fd, VM_SNAPSHOT_TIMEOUT_MS, err);
        if (r >= 0)
                r = vm_reseed(sb->vm_sig_fd, SNAPSHOT_TIMEOUT_MS, err);
        if (r < 0) {
                kill_internal(sb);
                return r;
        }
        if (!reseed_python)
                return 0;
        /* The runner's restore of an empty state with reseed, as a fork's child gets: no fd
         * (none crosses into a guest), nothing to load, fresh seeds for random and numpy and
         * the generators bound to the session's names, from the kernel just reseeded. */
        req = json_pack("{s:s, s:i, s:i, s:{}, s:[], s:n, s:b}", "op", "restore", "offset", 0,
                        "size", 0, "modules", "lost_names", "count", "reseed", 1);
        r = req ? send_request(sb, req, NULL, 0) : -ENOMEM; /* takes req */
        if (r < 0) {
                kill_internal(sb);
                return airlock_error_set(err, r, "cannot talk to the restored runner: %s",
                                         strerror(-r));
        }
        r = sandbox_restore_wait(sb, &report, err);
        if (r < 0)
                return r;
        if (json_is_string(json_object_get(report, "error"))) {
                r = airlock_error_set(err, -EIO, "the restored runner could not reseed: %s",
                                      json_string_value(json_object_get(report, "error")));
                json_decref(report);
                kill_internal(sb);
                return r;
        }
        json_decref(report);
        return 0;
}

int sandbox_vm_save(struct sandbox *sb, int out_fd, bool keep_running, uint64_t *ret_bytes,
                    struct airlock_error *err)
{
        struct stat st;
        int r;

        if (!sandbox_is_vm(sb) || sb->vm_qmp_fd < 0)
                return airlock_error_set(err, -EOPNOTSUPP, "not a microVM session");
        if (!sb->alive)
                return airlock_error_set(err, -ESRCH, "the session's VM is no longer running");
        r = vm_save(sb->vm_qmp_fd, out_fd, keep_running, err);
        if (r < 0)
                return r;
        if (fstat(out_fd, &st) < 0)
                return airlock_error_set(err, -errno, "cannot stat the saved VM: %m");
        if (ret_bytes)
                *ret_bytes = (uint64_t) st.st_size;
        return 0;
}
