/* The daemon's side of a zygote: start one per profile (a runner in zygote mode, see
 * src/runner/zygote.c), and turn a fork request into a driven sandbox. The daemon stays in
 * charge of everything privileged: it learns each session's pids from kernel-checked
 * credentials, creates and attaches the session's cgroup before the session may go on, and
 * owns the session's control socket and output pipes. */
#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "base/wire.h"
#include "layer/layer.h"
#include "session-internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ZYGOTE_SLOTS 1024u
#define ZYGOTE_INIT_TIMEOUT_MS 120000
#define FORK_TIMEOUT_MS 10000

struct zygote {
        atomic_int refs;
        pthread_mutex_t lock; /* one fork exchange at a time; guards slots and forks */
        struct jail *jail;
        const struct profile *profile;
        const struct jail_features *features;
        bool used[ZYGOTE_SLOTS];
        unsigned next_slot;
        bool broken;
        atomic_bool warned_threads; /* said once that it forks in two steps */
        unsigned generation;        /* unique in this daemon, never 0 */
        unsigned forks;             /* sandboxes forked so far */
        uint64_t ready_ns;          /* monotonic time the zygote said ready */
        /* The profile's /etc/hosts lines and connect ports, sent with every fork: each session
         * builds its own root and Landlock ruleset (src/runner/zygote.c). */
        struct sandbox_egress egress;
        /* LOCK_SH on the profile layer bound into it (layer.h), held until the zygote and every
         * session forked from it are gone, so that no removal takes the layer from under them;
         * -EBADF without a layer. */
        int layer_fd;
};

/* Every zygote started by this daemon gets the next number: pool members remember theirs, so
 * the manager can tell members of a replaced zygote from current ones. */
static atomic_uint last_generation;

static void zygote_destroy(struct zygote *z)
{
        if (z->ready_ns)
                log_info(
                        "profile=%s msg=\"zygote retired after %u forks and %.0f s\" generation=%u",
                        z->profile->name, z->forks, (double) (now_ns() - z->ready_ns) / 1e9,
                        z->generation);
        z->jail = jail_free(z->jail);
        sandbox_egress_done(&z->egress);
        if (z->layer_fd >= 0)
                (void) close(z->layer_fd);
        pthread_mutex_destroy(&z->lock);
        free(z);
}

struct zygote *zygote_ref(struct zygote *z)
{
        atomic_fetch_add(&z->refs, 1);
        return z;
}

void zygote_unref(struct zygote *z)
{
        if (z && atomic_fetch_sub(&z->refs, 1) == 1)
                zygote_destroy(z);
}

unsigned zygote_generation(const struct zygote *z)
{
        return z->generation;
}

bool zygote_is_due(struct zygote *z, unsigned max_forks, uint64_t max_age_ms)
{
        bool due;

        pthread_mutex_lock(&z->lock);
        due = (max_forks && z->forks >= max_forks) ||
              (max_age_ms && now_ns() - z->ready_ns >= max_age_ms * 1000000ULL);
        pthread_mutex_unlock(&z->lock);
        return due;
}

bool zygote_is_alive(struct zygote *z)
{
        bool alive;

        pthread_mutex_lock(&z->lock);
        alive = !z->broken && jail_wait(z->jail, true) == -EAGAIN;
        pthread_mutex_unlock(&z->lock);
        return alive;
}

/* Waits up to timeout_ms for fd to become readable. */
static int wait_readable(int fd, int timeout_ms)
{
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int n;

        do
                n = poll(&pfd, 1, timeout_ms);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return n == 0 ? -ETIMEDOUT : 0;
}

/* What the zygote printed (import warnings): logged at debug level and discarded, so a chatty
 * module can never fill the pipe and stall the zygote. */
static void drain_output(struct zygote *z)
{
        char buf[4096];
        int fds[2] = { z->jail->stdout_fd, z->jail->stderr_fd };

        for (int i = 0; i < 2; i++) {
                ssize_t n;
                while ((n = read(fds[i], buf, sizeof(buf) - 1)) > 0) {
                        buf[n] = '\0';
                        log_debug("profile=%s msg=\"zygote output: %.200s\"", z->profile->name,
                                  buf);
                }
        }
}

/* The sandbox's environment plus LD_BIND_NOW=1: the zygote resolves every symbol of the runner
 * and its libraries when it starts, so the sessions it forks do not each write the shared
 * relocation pages on their first calls (a copy-on-write fault per page; docs/PERFORMANCE.md).
 * The runner drops the variable before Python starts, so os.environ, bash and subprocesses do
 * not have it (the process's original environment block, /proc/self/environ, still shows it:
 * a loader flag, harmless). */
static char **zygote_env(char *const *envp)
{
        size_t n = 0;
        char **v;

        while (envp[n])
                n++;
        v = calloc(n + 2, sizeof(char *));
        if (!v)
                return NULL;
        memcpy(v, envp, n * sizeof(char *));
        v[n] = (char *) "LD_BIND_NOW=1";
        return v;
}

int zygote_start(const struct jail_features *features, const struct profile *p, char *const *envp,
                 const char *runner_path, const char *layer_dir, struct zygote **ret_z,
                 struct airlock_error *err)
{
        _cleanup_free_ char **zenv = NULL;
        struct zygote *z;
        struct jail_config cfg = { 0 };
        char *argv[] = { "airlock-runner", "--zygote", NULL };
        char name[96];
        unsigned char rnd[4];
        json_t *frame = NULL;
        const char *op;
        int r;

        zenv = zygote_env(envp);
        z = zenv ? calloc(1, sizeof(*z)) : NULL;
        if (!z)
                return -ENOMEM;
        atomic_init(&z->refs, 1);
        pthread_mutex_init(&z->lock, NULL);
        z->profile = p;
        z->features = features;
        z->layer_fd = -EBADF;
        r = sandbox_egress_init(p->network, EGRESS_FORWARD_LOOPBACK, &z->egress);
        if (r < 0) {
                zygote_destroy(z);
                return r;
        }
        if (layer_dir) {
                r = layer_hold(layer_dir, err);
                if (r < 0) {
                        zygote_destroy(z);
                        return r == -ESTALE ? airlock_error_set(err, r,
                                                                "the layer %s of profile '%s' "
                                                                "was removed meanwhile",
                                                                layer_dir, p->name)
                                            : r;
                }
                z->layer_fd = r;
        }

        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                memset(rnd, 0, sizeof(rnd));
        (void) snprintf(name, sizeof(name), "airlock-zygote-%s-%02x%02x%02x%02x", p->name, rnd[0],
                        rnd[1], rnd[2], rnd[3]);
        cfg.mode = JAIL_NAMESPACES;
        cfg.name = name;
        cfg.runner_path = runner_path;
        cfg.argv = argv;
        cfg.envp = zenv;
        cfg.rootfs = p->rootfs;
        /* The zygote's own cgroup counts only the zygote: sessions get cgroups of their own. */
        cfg.memory_bytes = p->limits.memory_bytes;
        cfg.pids = 64;
        cfg.workspace_bytes = 1u << 20;
        cfg.tmp_bytes = 16u << 20;
        cfg.files = 1024;
        cfg.zygote_slots = ZYGOTE_SLOTS;
        cfg.layer_dir = layer_dir;
        r = jail_spawn(features, &cfg, &z->jail, err);
        if (r < 0) {
                zygote_destroy(z);
                return r;
        }
        (void) fcntl_nonblock(z->jail->stdout_fd);
        (void) fcntl_nonblock(z->jail->stderr_fd);

        frame = json_pack("{s:s, s:s, s:I, s:I, s:o, s:s, s:o, s:{s:i, s:b, s:b}, s:b, s:b}", "op",
                          "init", "profile", p->name, "output_max",
                          (json_int_t) p->limits.output_bytes, "memory_bytes",
                          (json_int_t) p->limits.memory_bytes, "imports", profile_imports_json(p),
                          "policy", p->policy == PROFILE_POLICY_RESTRICTED ? "restricted" : "none",
                          "preload", profile_preload_json(p), "features", "landlock_abi",
                          features->landlock_abi, "mount_setattr", features->mount_setattr,
                          "proc_subset_pid", features->proc_subset_pid, "layer", layer_dir != NULL,
                          "shell", p->lang_bash);
        r = frame ? wire_send(z->jail->ctl_fd, frame) : -ENOMEM;
        json_decref(frame);
        frame = NULL;
        if (r >= 0)
                r = wait_readable(z->jail->ctl_fd, ZYGOTE_INIT_TIMEOUT_MS);
        if (r >= 0)
                r = wire_recv(z->jail->ctl_fd, 1u << 20, &frame);
        drain_output(z);
        op = frame ? json_string_value(json_object_get(frame, "op")) : NULL;
        if (r < 0 || !op || strcmp(op, "ready") != 0) {
                const char *msg =
                        frame ? json_string_value(json_object_get(frame, "message")) : NULL;
                r = airlock_error_set(err, r < 0 ? r : -EIO,
                                      "the zygote for profile '%s' did not start: %s", p->name,
                                      msg     ? msg
                                      : r < 0 ? strerror(-r)
                                              : "unexpected answer");
                json_decref(frame);
                zygote_destroy(z);
                return r;
        }
        {
                json_t *errors = json_object_get(frame, "preload_errors"), *e;
                size_t i;
                json_array_foreach (errors, i, e) {
                        if (json_is_string(e))
                                log_warn("profile=%s msg=\"preload failed: %s\"", p->name,
                                         json_string_value(e));
                }
        }
        json_decref(frame);
        z->generation = atomic_fetch_add(&last_generation, 1) + 1;
        z->ready_ns = now_ns();
        /* Tests and benchmarks wait for 'profile=NAME msg="zygote ready': keep that prefix. */
        log_info("profile=%s msg=\"zygote ready in %.1f ms\" generation=%u", p->name,
                 z->jail->setup_ns / 1e6, z->generation);
        *ret_z = z;
        return 0;
}

static int pidfd_for(pid_t pid)
{
        long fd = syscall(SYS_pidfd_open, pid, 0);

        return fd < 0 ? -errno : (int) fd;
}

static int recv_with_pid(int fd, const char *want_op, pid_t *ret_pid)
{
        json_t *frame = NULL;
        const char *op;
        pid_t pid = -1;
        int r;

        r = wait_readable(fd, FORK_TIMEOUT_MS);
        if (r < 0)
                return r;
        r = wire_recv_ex(fd, 4096, &frame, NULL, 0, NULL, &pid);
        if (r < 0)
                return r;
        op = json_string_value(json_object_get(frame, "op"));
        r = op && strcmp(op, want_op) == 0 && pid > 0 ? 0 : -EPROTO;
        json_decref(frame);
        if (r == 0)
                *ret_pid = pid;
        return r;
}

void zygote_release_slot(struct zygote *z, unsigned slot)
{
        pthread_mutex_lock(&z->lock);
        if (slot < ZYGOTE_SLOTS)
                z->used[slot] = false;
        pthread_mutex_unlock(&z->lock);
}

/* The fork request for slot: the session's limits, and the egress part of its jail. */
static json_t *fork_request(const struct zygote *z, unsigned slot)
{
        const struct profile *p = z->profile;
        json_t *frame, *ports;

        frame = json_pack("{s:s, s:i, s:I, s:I, s:i, s:i}", "op", "fork", "slot", (int) slot,
                          "workspace_bytes", (json_int_t) p->limits.workspace_bytes, "tmp_bytes",
                          (json_int_t) p->limits.tmp_bytes, "pids", (int) p->limits.pids, "files",
                          (int) p->limits.files);
        if (!frame || !z->egress.n_ports)
                return frame;
        ports = json_array();
        if (!ports || json_object_set_new(frame, "connect_ports", ports) < 0) {
                json_decref(frame);
                return NULL;
        }
        for (size_t i = 0; i < z->egress.n_ports; i++)
                if (json_array_append_new(ports, json_integer(z->egress.ports[i])) < 0) {
                        json_decref(frame);
                        return NULL;
                }
        if (z->egress.hosts_extra &&
            json_object_set_new(frame, "hosts_extra", json_string(z->egress.hosts_extra)) < 0) {
                json_decref(frame);
                return NULL;
        }
        return frame;
}

int zygote_fork(struct zygote *z, const char *name, const struct cgroup_limits *limits,
                struct sandbox **ret_sb, struct airlock_error *err)
{
        const struct profile *p = z->profile;
        _cleanup_close_ int ctl = -EBADF, out = -EBADF, errfd = -EBADF, gpidfd = -EBADF,
                            ppidfd = -EBADF, status = -EBADF;
        struct cgroup *cg = NULL;
        struct jail *j = NULL;
        json_t *frame = NULL;
        int fds[WIRE_FDS_MAX];
        size_t n_fds = 0;
        unsigned slot = ZYGOTE_SLOTS;
        pid_t gpid = -1, ppid = -1;
        const char *op;
        int r, one = 1;

        pthread_mutex_lock(&z->lock);
        for (unsigned i = 0; i < ZYGOTE_SLOTS; i++) {
                unsigned k = (z->next_slot + i) % ZYGOTE_SLOTS;
                if (!z->used[k]) {
                        slot = k;
                        break;
                }
        }
        if (z->broken || slot == ZYGOTE_SLOTS) {
                pthread_mutex_unlock(&z->lock);
                return airlock_error_set(err, z->broken ? -EIO : -EUSERS,
                                         z->broken ? "the zygote for profile '%s' failed"
                                                   : "the zygote for profile '%s' is full",
                                         p->name);
        }
        z->used[slot] = true;
        z->next_slot = slot + 1;
        drain_output(z);
        frame = fork_request(z, slot);
        r = frame ? wire_send(z->jail->ctl_fd, frame) : -ENOMEM;
        json_decref(frame);
        frame = NULL;
        if (r >= 0)
                r = wait_readable(z->jail->ctl_fd, FORK_TIMEOUT_MS);
        if (r >= 0)
                r = wire_recv_ex(z->jail->ctl_fd, 4096, &frame, fds, WIRE_FDS_MAX, &n_fds, NULL);
        if (r < 0)
                z->broken = true; /* the exchange is out of step: never reuse this zygote */
        else
                z->forks++; /* counted at the request: a failed session used the layout too */
        pthread_mutex_unlock(&z->lock);

        op = frame ? json_string_value(json_object_get(frame, "op")) : NULL;
        if (r < 0 || !op || strcmp(op, "forked") != 0 || n_fds != 4) {
                const char *msg =
                        frame ? json_string_value(json_object_get(frame, "message")) : NULL;
                /* Format before the frame (and msg with it) is freed. */
                r = airlock_error_set(err, r < 0 ? r : -EIO,
                                      "the zygote for profile '%s' could not fork: %s", p->name,
                                      msg     ? msg
                                      : r < 0 ? strerror(-r)
                                              : "bad answer");
                for (size_t i = 0; i < n_fds; i++)
                        (void) close(fds[i]);
                json_decref(frame);
                zygote_release_slot(z, slot);
                return r;
        }
        if (json_is_false(json_object_get(frame, "cloned")) &&
            !atomic_exchange(&z->warned_threads, true))
                log_warn("profile=%s msg=\"the zygote has threads (a preloaded library started "
                         "them, e.g. OpenBLAS with cpus above 1): its sessions are forked in two "
                         "steps, a few milliseconds more each (docs/PERFORMANCE.md)\"",
                         p->name);
        json_decref(frame);
        ctl = fds[0], out = fds[1], errfd = fds[2], status = fds[3];
        (void) setsockopt(ctl, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));

        /* The session's init says hello; the kernel tells us its pid. */
        r = recv_with_pid(ctl, "hello", &gpid);
        if (r < 0) {
                airlock_error_set(err, r, "the new session did not start: %s", strerror(-r));
                goto fail;
        }
        gpidfd = pidfd_for(gpid);
        if (gpidfd < 0) {
                r = airlock_error_set(err, gpidfd, "pidfd_open: %s", strerror(-gpidfd));
                goto fail;
        }
        /* Its cgroup comes before any user code can run. */
        if (z->features->cgroups.version != CGROUP_NONE) {
                r = cgroup_create(&z->features->cgroups, name, limits, &cg, err);
                if (r < 0)
                        goto fail;
                r = cgroup_attach(cg, gpid);
                if (r < 0) {
                        airlock_error_set(err, r, "cannot attach the session to its cgroup: %s",
                                          strerror(-r));
                        goto fail;
                }
        }
        frame = json_pack("{s:s}", "op", "go");
        r = frame ? wire_send(ctl, frame) : -ENOMEM;
        json_decref(frame);
        if (r >= 0)
                r = recv_with_pid(ctl, "ready", &ppid);
        if (r < 0) {
                airlock_error_set(err, r, "the new session failed while hardening itself: %s",
                                  strerror(-r));
                goto fail;
        }
        ppidfd = pidfd_for(ppid);
        if (ppidfd < 0) {
                r = airlock_error_set(err, ppidfd, "pidfd_open: %s", strerror(-ppidfd));
                goto fail;
        }

        r = jail_adopt(gpid, gpidfd, ctl, out, errfd, z->jail->zygote_uid_base + 2 * slot + 1, cg,
                       &j);
        if (r < 0)
                goto fail;
        gpidfd = ctl = out = errfd = -EBADF;
        cg = NULL;
        r = sandbox_adopt(p, j, zygote_ref(z), slot, TAKE_FD(ppidfd), TAKE_FD(status), ret_sb, err);
        if (r < 0)
                return r; /* sandbox_adopt freed the jail and released the slot */
        return 0;

fail:
        if (gpidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, gpidfd, SIGKILL, NULL, 0);
        if (cg) {
                (void) cgroup_kill_all(cg);
                (void) cgroup_destroy(cg);
                cgroup_free(cg);
        }
        zygote_release_slot(z, slot);
        return r;
}
