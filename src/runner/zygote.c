/* The zygote: a runner with Python initialised and the profile's modules imported, that never
 * runs user code and forks sessions on request. It lives in its own user, mount, pid and net
 * namespaces with the sandbox's root (see jail_config.zygote_slots) but keeps its capabilities
 * there, because each session needs new namespaces of its own:
 *
 *   zygote Z --clone--> G: new user, mount, pid, ipc, uts and net namespaces in one step (the
 *                         user namespace comes first and owns the others); Z maps 0 and 1000 in
 *                         it to the session's unique ids. G is pid 1 of the session: it says
 *                         hello with its pid (SCM_CREDENTIALS), waits while the daemon attaches
 *                         its cgroup, then builds the session's own root, applies Landlock, drops
 *                         every credential, sets rlimits, closes every fd and loads seccomp;
 *                         forks P and stays as init, reporting P's exit
 *              P: finishes Python's own after-fork work, reseeds the random generators and
 *                         serves cells on fd 3.
 *
 * So a session costs two forks of the zygote's image and the setup steps instead of an
 * interpreter start, and every layer of the one-shot sandbox holds per session. Each fork of
 * the image is costly (its page tables are copied, and torn down at exit; docs/PERFORMANCE.md),
 * which is why G is cloned straight into its namespaces rather than forked and unshared. A
 * zygote with threads (a preloaded library's, e.g. OpenBLAS's) needs the fork handlers a raw
 * clone skips: it forks C with glibc, and C unshares the namespaces and forks G, as before. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "runner.h"

#include "base/cleanup.h"
#include "base/util.h"
#include "base/wire.h"
#include "egress/policy.h"
#include "jail/jail-internal.h"
#include "jail/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CTL_FD 3

static struct seccomp_filter *filter;
static struct jail_features features;
/* The init request said the zygote's root has the profile's layer at JAIL_LAYER_PATH: each
 * session binds it from there into its own root. */
static bool has_layer;

/* The egress ports a session may connect to: at most the policy's forwarders plus the proxy
 * and SOCKS ports (egress_policy_sandbox_ports). */
#define CONNECT_PORTS_MAX (EGRESS_RULES_MAX + 2u)

static uint64_t json_u64(json_t *o, const char *key, uint64_t dflt)
{
        json_t *v = json_object_get(o, key);

        return json_is_integer(v) && json_integer_value(v) >= 0 ? (uint64_t) json_integer_value(v)
                                                                : dflt;
}

int zygote_prepare(json_t *init)
{
        json_t *f = json_object_get(init, "features");

        features.landlock_abi = (int) json_u64(f, "landlock_abi", 0);
        features.mount_setattr = json_is_true(json_object_get(f, "mount_setattr"));
        features.proc_subset_pid = json_is_true(json_object_get(f, "proc_subset_pid"));
        has_layer = json_is_true(json_object_get(init, "layer"));
        /* Compiled once here, loaded by every session as its last step. */
        return seccomp_filter_new(&(struct seccomp_policy_options){ 0 }, &filter);
}

static _Noreturn void die(const char *step, int r)
{
        /* Nothing to report to: the daemon sees the session fail to say hello or ready. */
        (void) step;
        (void) r;
        _exit(127);
}

#define STATUS_FD 4

/* G's life after P is started: reap everything, report P's status on G's own channel (not the
 * control socket, which only P holds: when user code closes it, the daemon sees it at once). */
static _Noreturn void session_init_loop(pid_t p)
{
        for (;;) {
                int status;
                pid_t w = waitpid(-1, &status, 0);
                if (w == p) {
                        json_t *o = json_pack("{s:s, s:i}", "op", "exit", "status", status);
                        if (o)
                                (void) wire_send(STATUS_FD, o);
                        _exit(0);
                }
                if (w < 0 && errno == ECHILD)
                        _exit(0);
        }
}

/* The fork request's "connect_ports" (an array of TCP ports, from the daemon) into ports.
 * Returns the count, or -EINVAL for anything but an array of at most CONNECT_PORTS_MAX ports
 * in 1..65535: a session never starts with rules other than the daemon meant. */
static int connect_ports_from(json_t *req, uint16_t ports[CONNECT_PORTS_MAX])
{
        json_t *a = json_object_get(req, "connect_ports"), *v;
        size_t i;

        if (!a)
                return 0;
        if (!json_is_array(a) || json_array_size(a) > CONNECT_PORTS_MAX)
                return -EINVAL;
        json_array_foreach (a, i, v) {
                if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                    json_integer_value(v) > 65535)
                        return -EINVAL;
                ports[i] = (uint16_t) json_integer_value(v);
        }
        return (int) json_array_size(a);
}

/* Runs in the zygote's child. Returns only in P, the session's Python. With `cloned`, the
 * child is G already, in its namespaces (the zygote's raw clone); otherwise it is C, a glibc
 * fork of a zygote that has threads, which makes the namespaces itself and forks G. */
static void session_child(json_t *req, const uint16_t *ports, size_t n_ports, int ctl, int out,
                          int err, int status, int sync_rd, int sync_wr, bool cloned)
{
        struct jail_config cfg = {
                .rootfs = "/",
                .runner_path = JAIL_RUNNER_PATH,
                .runner_is_private = true,
                .workspace_bytes = json_u64(req, "workspace_bytes", 256u << 20),
                .tmp_bytes = json_u64(req, "tmp_bytes", 64u << 20),
                .pids = (uint32_t) json_u64(req, "pids", 256),
                .files = (uint32_t) json_u64(req, "files", 1024),
                /* Borrowed from req, which outlives the setup. */
                .hosts_extra = json_string_value(json_object_get(req, "hosts_extra")),
                .layer_dir = has_layer ? JAIL_LAYER_PATH : NULL,
                .connect_ports = ports,
                .n_connect_ports = n_ports,
        };
        const char *step = "";
        json_t *go = NULL;
        char byte;
        pid_t pid;
        int r;

        /* Nothing of the zygote's may reach the session: not its control socket, not its
         * SIGCHLD handler. */
        (void) close(CTL_FD);
        (void) signal(SIGCHLD, SIG_DFL);

        /* The zygote maps our user namespace's ids, then lets us go on. */
        if (!cloned && unshare(CLONE_NEWUSER) < 0)
                die("unshare user", -errno);
        if ((!cloned && write(sync_wr, "u", 1) != 1) || read(sync_rd, &byte, 1) != 1)
                _exit(127); /* the zygote gave up on us */
        (void) close(sync_rd);
        (void) close(sync_wr);
        if (child_setresgid(0) < 0 || child_setresuid(0) < 0)
                die("become namespace root", -errno);
        if (!cloned) {
                if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                            CLONE_NEWNET) < 0)
                        die("unshare", -errno);
                pid = fork();
                if (pid < 0)
                        die("fork", -errno);
                if (pid > 0)
                        _exit(0); /* G lives on under the zygote, which reaps it */
        }

        if (wire_send_ex(ctl, json_pack("{s:s}", "op", "hello"), NULL, 0, true) < 0)
                _exit(127);
        if (wire_recv(ctl, 4096, &go) < 0)
                _exit(127); /* the daemon gave up on us */
        json_decref(go);

        /* The daemon attached us to the session's cgroup: make it our cgroup root. */
        if (unshare(CLONE_NEWCGROUP) < 0)
                die("unshare cgroup", -errno);
        if (sethostname("sandbox", 7) < 0 || setdomainname("sandbox", 7) < 0)
                die("hostname", -errno);
        r = mount_build_root(&features, &cfg, &step);
        if (r < 0)
                die(step, r);

        /* No namespace of any kind below this one. This needs a proc that shows /proc/sys,
         * mounted for the moment in the session's own /tmp; where a kernel refuses that, the
         * seccomp policy still denies every way to make a namespace. */
        if (mkdir("/tmp/.airlock-proc", 0700) == 0) {
                if (mount("proc", "/tmp/.airlock-proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          NULL) == 0) {
                        (void) jail_child_write_ns_limits("/tmp/.airlock-proc");
                        (void) umount2("/tmp/.airlock-proc", MNT_DETACH);
                }
                (void) rmdir("/tmp/.airlock-proc");
        }

        r = landlock_apply(features.landlock_abi, cfg.connect_ports, cfg.n_connect_ports, &step);
        if (r < 0)
                die(step, r);
        if (setsid() < 0)
                die("setsid", -errno);
        r = jail_child_setup_fds(out, err, ctl, &status, true, &step);
        if (r < 0)
                die(step, r);
        r = caps_drop_to(JAIL_SANDBOX_UID, JAIL_SANDBOX_UID, &step);
        if (r < 0)
                die(step, r);
        r = caps_set_rlimits(&cfg, &step);
        if (r < 0)
                die(step, r);
        if (chdir("/work") < 0)
                die("chdir", -errno);
        umask(022);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                die("no_new_privs", -errno);
        r = seccomp_filter_load(filter);
        if (r < 0)
                die("seccomp", r);

        pid = fork();
        if (pid < 0)
                die("fork", -errno);
        if (pid > 0) {
                (void) close(CTL_FD);
                session_init_loop(pid);
        }
        /* P: the session's Python; the caller goes on to serve cells. Python's own after-fork
         * work (its locks, thread states and os.register_at_fork hooks) is done here, in the one
         * process of the session that runs Python. Its uid changed without
         * an execve, which left it non-dumpable and its /proc files unreadable to itself; an
         * executed program would be dumpable again, and so is P. */
        (void) close(STATUS_FD);
        (void) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        if (cloned)
                PyOS_AfterFork_Child(); /* C did it otherwise, right after glibc's fork */
}

/* Whether this process has one thread: then a raw clone, which runs none of glibc's or the
 * libraries' fork handlers, is safe. A preloaded library may have started threads (OpenBLAS
 * does, with OPENBLAS_NUM_THREADS above 1) and registered a handler that stops them before a
 * fork; a clone would leave their state in the child with no threads behind it. */
static bool single_threaded(void)
{
        char buf[1024], *p;
        ssize_t n = read_small_file_at(AT_FDCWD, "/proc/self/stat", buf, sizeof(buf));
        long threads = 0;

        /* Field 20, num_threads; fields after the command (which may hold spaces) from 3 on. */
        p = n > 0 ? strrchr(buf, ')') : NULL;
        for (int field = 2; p && field < 20; field++)
                p = strchr(p + 1, ' ');
        if (p)
                threads = strtol(p + 1, NULL, 10);
        return threads == 1;
}

static int write_nested_maps(pid_t pid, unsigned slot)
{
        char path[64], map[96];
        int r;

        (void) snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", JAIL_ZYGOTE_NS_BASE + 2 * slot,
                        JAIL_SANDBOX_UID, JAIL_ZYGOTE_NS_BASE + 2 * slot + 1);
        (void) snprintf(path, sizeof(path), "/proc/%d/uid_map", (int) pid);
        r = write_file_at(AT_FDCWD, path, map);
        if (r < 0)
                return r;
        (void) snprintf(path, sizeof(path), "/proc/%d/gid_map", (int) pid);
        return write_file_at(AT_FDCWD, path, map);
}

int zygote_fork(json_t *req)
{
        unsigned slot = (unsigned) json_u64(req, "slot", 0);
        int sv[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, up[2] = { -1, -1 },
            down[2] = { -1, -1 }, st[2] = { -1, -1 };
        bool cloned = single_threaded();
        uint16_t ports[CONNECT_PORTS_MAX];
        int n_ports;
        struct pollfd pfd;
        char byte;
        pid_t pid;
        ssize_t got;
        int r = 0, one = 1, n, saved;

        if (slot >= JAIL_ZYGOTE_SLOTS_MAX)
                return -EINVAL;
        n_ports = connect_ports_from(req, ports);
        if (n_ports < 0)
                return n_ports;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
            pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(up, O_CLOEXEC) < 0 ||
            pipe2(down, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0) {
                r = -errno;
                goto out;
        }
        /* The daemon learns the session's pids from credentials sent on this socket. */
        (void) setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));

        /* G in its own namespaces straight away: a raw clone, since glibc has no fork with
         * flags. With one thread no lock of glibc's can be held across it; G runs no Python,
         * and P, forked by G with glibc's fork, finishes Python's after-fork work. A zygote
         * with threads forks with glibc instead, and the child makes the namespaces. */
        PyOS_BeforeFork();
        if (cloned)
                pid = (pid_t) syscall(SYS_clone,
                                      CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
                                              CLONE_NEWUTS | CLONE_NEWNET | SIGCHLD,
                                      NULL, NULL, NULL, 0);
        else
                pid = fork();
        saved = errno;
        if (pid == 0) {
                if (!cloned)
                        PyOS_AfterFork_Child();
                (void) close(sv[0]), (void) close(out[0]), (void) close(err[0]);
                (void) close(up[0]), (void) close(down[1]), (void) close(st[0]);
                session_child(req, ports, (size_t) n_ports, sv[1], out[1], err[1], st[1], down[0],
                              up[1], cloned);
                return 1; /* P */
        }
        PyOS_AfterFork_Parent();
        if (pid < 0) {
                r = -saved;
                goto out;
        }

        if (!cloned) {
                /* Map the child's new user namespace once it has made it. A finished
                 * session's SIGCHLD may interrupt these waits: retry on EINTR. */
                pfd = (struct pollfd){ .fd = up[0], .events = POLLIN };
                do
                        n = poll(&pfd, 1, 5000);
                while (n < 0 && errno == EINTR);
                do
                        got = n == 1 ? read(up[0], &byte, 1) : -1;
                while (got < 0 && errno == EINTR);
                if (got != 1) {
                        r = -ETIMEDOUT;
                        (void) kill(pid, SIGKILL);
                        goto out;
                }
        }
        /* Map the child's new user namespace, then let it go on. */
        r = write_nested_maps(pid, slot);
        if (r < 0 || write(down[1], "g", 1) != 1) {
                (void) kill(pid, SIGKILL);
                r = r < 0 ? r : -EPIPE;
                goto out;
        }
        {
                int fds[4] = { sv[0], out[0], err[0], st[0] };
                json_t *o = json_pack("{s:s, s:i, s:b}", "op", "forked", "slot", (int) slot,
                                      "cloned", cloned);
                r = o ? wire_send_ex(CTL_FD, o, fds, 4, false) : -ENOMEM;
                json_decref(o);
        }
out:
        for (int i = 0; i < 2; i++) {
                int *fds[] = { &sv[i], &out[i], &err[i], &up[i], &down[i], &st[i] };
                for (size_t k = 0; k < ELEMENTSOF(fds); k++)
                        if (*fds[k] >= 0)
                                (void) close(*fds[k]);
        }
        return r;
}

void zygote_reap(void)
{
        while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
}
