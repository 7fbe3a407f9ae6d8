/* Spawning a sandbox: the parent's half (pipes, cgroup, clone, uid maps, attach, "go", and the
 * child's verdict) and the child's half (every layer, in the order of ISOLATION.md section 1,
 * ending in execve of the runner). The child reports the first failing step through a CLOEXEC
 * status pipe; EOF on that pipe means the runner was executed. */
#include "jail-internal.h"

#include "base/cleanup.h"
#include "base/util.h"
#include "jail/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* What the child writes to the status pipe when a step fails. */
struct child_status {
        int err; /* positive errno */
        char step[120];
};

struct child_args {
        const struct jail_features *features;
        const struct jail_config *cfg;
        const struct seccomp_filter *filter;
        int sync_fd;       /* read end: one byte "go" after maps and cgroup are in place */
        int status_fd;     /* write end, CLOEXEC */
        int ctl_fd;        /* becomes fd 3 */
        int out_fd;        /* becomes fd 1 */
        int err_fd;        /* becomes fd 2 */
        uid_t process_uid; /* process mode: the host uid to drop to */
};

static pthread_once_t filter_once = PTHREAD_ONCE_INIT;
static struct seccomp_filter *filter_cached;
static int filter_error;

static void filter_build(void)
{
        struct seccomp_policy_options opts = { .log_only = getenv("AIRLOCK_SECCOMP_LOG") != NULL };

        filter_error = seccomp_filter_new(&opts, &filter_cached);
}

static uid_t host_uid_base(pid_t pid)
{
        return JAIL_UID_BASE + 2u * ((uint32_t) pid % (JAIL_UID_SPAN / 2u));
}

static _Noreturn void child_fail(int status_fd, const char *step, int r)
{
        struct child_status st = { .err = r < 0 ? -r : r };
        size_t n = strlen(step);

        if (n >= sizeof(st.step))
                n = sizeof(st.step) - 1;
        memcpy(st.step, step, n);
        (void) !write(status_fd, &st, sizeof(st));
        _exit(127);
}

static _Noreturn void child_namespaces(struct child_args *a)
{
        const struct jail_config *cfg = a->cfg;
        const char *step = "wait for the parent";
        char go;
        int r;

        if (read(a->sync_fd, &go, 1) != 1)
                _exit(127); /* the parent gave up on us */
        (void) close(a->sync_fd);

        step = "set parent-death signal";
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                child_fail(a->status_fd, step, -errno);
        jail_child_reset_signals();

        /* no_new_privs first: Landlock and seccomp need it, and nothing executed from here on
         * may gain privileges through setuid bits or file capabilities. */
        step = "set no_new_privs";
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(a->status_fd, step, -errno);

        /* Become the mapped root; before the maps existed we were the overflow uid. */
        step = "become namespace root";
        if (child_setresgid(0) < 0 || child_setresuid(0) < 0)
                child_fail(a->status_fd, step, -errno);

        /* The parent attached us to the session cgroup before "go": a cgroup namespace made
         * now has that cgroup as its root. */
        step = "unshare cgroup namespace";
        if (unshare(CLONE_NEWCGROUP) < 0)
                child_fail(a->status_fd, step, -errno);

        /* A zygote must create its sessions' namespaces; each session sets its own limits. */
        if (!cfg->zygote_slots) {
                step = "limit nested namespaces";
                r = jail_child_write_ns_limits("/proc");
                if (r < 0)
                        child_fail(a->status_fd, step, r);
        }

        step = "set hostname";
        if (sethostname("sandbox", 7) < 0 || setdomainname("sandbox", 7) < 0)
                child_fail(a->status_fd, step, -errno);

        r = mount_build_root(a->features, cfg, &step);
        if (r < 0)
                child_fail(a->status_fd, step, r);

        if (cfg->zygote_slots)
                goto exec_zygote;

        r = landlock_apply(a->features->landlock_abi, cfg->connect_ports, cfg->n_connect_ports,
                           &step);
        if (r < 0)
                child_fail(a->status_fd, step, r);

        step = "setsid";
        if (setsid() < 0)
                child_fail(a->status_fd, step, -errno);

        r = jail_child_setup_fds(a->out_fd, a->err_fd, a->ctl_fd, &a->status_fd, false, &step);
        if (r < 0)
                child_fail(a->status_fd, step, r);

        r = caps_drop_to(JAIL_SANDBOX_UID, JAIL_SANDBOX_UID, &step);
        if (r < 0)
                child_fail(a->status_fd, step, r);

        r = caps_set_rlimits(cfg, &step);
        if (r < 0)
                child_fail(a->status_fd, step, r);

        step = "chdir /work";
        if (chdir("/work") < 0)
                child_fail(a->status_fd, step, -errno);
        umask(022);

        /* Seccomp last: every step above used syscalls the filter denies. */
        step = "load seccomp filter";
        r = seccomp_filter_load(a->filter);
        if (r < 0)
                child_fail(a->status_fd, step, r);

        execve(JAIL_RUNNER_PATH, cfg->argv, cfg->envp);
        child_fail(a->status_fd, "execute the runner", -errno);

exec_zygote:
        step = "setsid";
        if (setsid() < 0)
                child_fail(a->status_fd, step, -errno);
        r = jail_child_setup_fds(a->out_fd, a->err_fd, a->ctl_fd, &a->status_fd, false, &step);
        if (r < 0)
                child_fail(a->status_fd, step, r);
        step = "chdir /";
        if (chdir("/") < 0)
                child_fail(a->status_fd, step, -errno);
        execve(JAIL_RUNNER_PATH, cfg->argv, cfg->envp);
        child_fail(a->status_fd, "execute the runner", -errno);
}

static _Noreturn void child_process(struct child_args *a)
{
        const struct jail_config *cfg = a->cfg;
        const char *step = "wait for the parent";
        char go;
        int r;

        if (read(a->sync_fd, &go, 1) != 1)
                _exit(127);
        (void) close(a->sync_fd);

        step = "set parent-death signal";
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                child_fail(a->status_fd, step, -errno);
        jail_child_reset_signals();
        step = "set no_new_privs";
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(a->status_fd, step, -errno);
        step = "setsid";
        if (setsid() < 0)
                child_fail(a->status_fd, step, -errno);
        r = jail_child_setup_fds(a->out_fd, a->err_fd, a->ctl_fd, &a->status_fd, false, &step);
        if (r < 0)
                child_fail(a->status_fd, step, r);
        if (cfg->mode == JAIL_PROCESS) {
                r = caps_set_rlimits(cfg, &step);
                if (r < 0)
                        child_fail(a->status_fd, step, r);
                if (a->features->is_root) {
                        r = caps_drop_to(a->process_uid, a->process_uid, &step);
                        if (r < 0)
                                child_fail(a->status_fd, step, r);
                }
        }
        step = "chdir to the work directory";
        if (cfg->host_workdir && chdir(cfg->host_workdir) < 0)
                child_fail(a->status_fd, step, -errno);
        umask(022);
        execve(cfg->runner_path, cfg->argv, cfg->envp);
        child_fail(a->status_fd, "execute the runner", -errno);
}

/* Host ids of a zygote's sessions: a block of 2 * JAIL_ZYGOTE_SLOTS_MAX ids per possible
 * zygote pid modulo 65536, above the one-shot sandboxes' range. */
static uid_t zygote_uid_base(pid_t pid)
{
        return JAIL_ZYGOTE_UID_BASE + 2u * JAIL_ZYGOTE_SLOTS_MAX * ((uint32_t) pid % 65536u);
}

static int write_id_maps(pid_t pid, uid_t h0, unsigned zygote_slots)
{
        char path[64], map[160];
        int r;

        /* 0 -> H0 for the setup, 1000 -> H1 for user code, and for a zygote a block of ids for
         * its sessions. No "deny" in setgroups: the writer is privileged, and every sandbox
         * drops its groups itself. */
        if (zygote_slots)
                (void) snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n%u %u %u\n", h0,
                                JAIL_SANDBOX_UID, h0 + 1, JAIL_ZYGOTE_NS_BASE, zygote_uid_base(pid),
                                2u * zygote_slots);
        else
                (void) snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", h0, JAIL_SANDBOX_UID,
                                h0 + 1);
        (void) snprintf(path, sizeof(path), "/proc/%d/uid_map", (int) pid);
        r = write_file_at(AT_FDCWD, path, map);
        if (r < 0)
                return r;
        (void) snprintf(path, sizeof(path), "/proc/%d/gid_map", (int) pid);
        return write_file_at(AT_FDCWD, path, map);
}

/* Reads the child's verdict: EOF means the runner was executed. */
static int read_child_status(int status_fd, struct airlock_error *err)
{
        struct child_status st;
        ssize_t n;

        do
                n = read(status_fd, &st, sizeof(st));
        while (n < 0 && errno == EINTR);
        if (n == 0)
                return 0;
        if (n != (ssize_t) sizeof(st))
                return airlock_error_set(err, -EIO, "sandbox setup died without a report");
        st.step[sizeof(st.step) - 1] = '\0';
        return airlock_error_set(err, -st.err, "sandbox setup failed at '%s': %s", st.step,
                                 strerror(st.err));
}

static void jail_close_fds(struct jail *j)
{
        int *fds[] = { &j->pidfd, &j->ctl_fd, &j->stdout_fd, &j->stderr_fd };

        for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
                if (*fds[i] >= 0)
                        (void) close(*fds[i]);
                *fds[i] = -EBADF;
        }
}

int jail_spawn(const struct jail_features *f, const struct jail_config *cfg, struct jail **ret_jail,
               struct airlock_error *err)
{
        _cleanup_close_ int sync_rd = -EBADF, sync_wr = -EBADF, status_rd = -EBADF,
                            status_wr = -EBADF, out_rd = -EBADF, out_wr = -EBADF, err_rd = -EBADF,
                            err_wr = -EBADF, ctl_parent = -EBADF, ctl_child = -EBADF;
        struct child_args args = { 0 };
        struct cgroup_limits limits = { 0 };
        struct jail *j = NULL;
        int pipefd[2], sv[2], pidfd = -EBADF;
        unsigned long flags;
        uint64_t t0 = now_ns();
        pid_t pid;
        int r;

        r = jail_check_mode(f, cfg->mode, err);
        if (r < 0)
                return r;

        if (cfg->mode == JAIL_NAMESPACES) {
                (void) pthread_once(&filter_once, filter_build);
                if (filter_error < 0)
                        return airlock_error_set(err, filter_error,
                                                 "cannot compile the seccomp policy: %s",
                                                 strerror(-filter_error));
        }

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return airlock_error_set(err, -errno, "pipe: %m");
        sync_rd = pipefd[0], sync_wr = pipefd[1];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return airlock_error_set(err, -errno, "pipe: %m");
        status_rd = pipefd[0], status_wr = pipefd[1];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return airlock_error_set(err, -errno, "pipe: %m");
        out_rd = pipefd[0], out_wr = pipefd[1];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return airlock_error_set(err, -errno, "pipe: %m");
        err_rd = pipefd[0], err_wr = pipefd[1];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return airlock_error_set(err, -errno, "socketpair: %m");
        ctl_parent = sv[0], ctl_child = sv[1];

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->pidfd = j->ctl_fd = j->stdout_fd = j->stderr_fd = -EBADF;
        j->pid = -1;

        if (cfg->mode != JAIL_NONE && f->cgroups.version != CGROUP_NONE) {
                limits.memory_max = cfg->memory_bytes;
                limits.pids_max = cfg->pids;
                limits.cpu_millicpus = cfg->cpu_millicpus;
                r = cgroup_create(&f->cgroups, cfg->name, &limits, &j->cgroup, err);
                if (r < 0)
                        goto fail;
        }

        args = (struct child_args){
                .features = f,
                .cfg = cfg,
                .filter = filter_cached,
                .sync_fd = sync_rd,
                .status_fd = status_wr,
                .ctl_fd = ctl_child,
                .out_fd = out_wr,
                .err_fd = err_wr,
        };

        flags = SIGCHLD | CLONE_PIDFD;
        if (cfg->mode == JAIL_NAMESPACES)
                flags |= CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
                         CLONE_NEWNET;
        /* A fork-like clone (no CLONE_VM, no new stack): the child continues here with a copy
         * of our memory, so it can use args directly. */
        pid = (pid_t) syscall(SYS_clone, flags, NULL, &pidfd, NULL, 0);
        if (pid < 0) {
                r = airlock_error_set(err, -errno, "clone: %m");
                goto fail;
        }
        if (pid == 0) {
                args.process_uid = host_uid_base(getpid()) + 1;
                if (cfg->mode == JAIL_NAMESPACES)
                        child_namespaces(&args);
                child_process(&args);
        }
        j->pid = pid;
        j->pidfd = pidfd;
        j->has_pidns = cfg->mode == JAIL_NAMESPACES;
        j->host_uid = host_uid_base(pid) + 1;
        if (cfg->mode == JAIL_NONE)
                j->host_uid = geteuid();

        if (cfg->mode == JAIL_NAMESPACES) {
                if (cfg->zygote_slots > JAIL_ZYGOTE_SLOTS_MAX) {
                        r = airlock_error_set(err, -EINVAL, "at most %u sessions per zygote",
                                              JAIL_ZYGOTE_SLOTS_MAX);
                        goto fail;
                }
                r = write_id_maps(pid, host_uid_base(pid), cfg->zygote_slots);
                j->zygote_uid_base = cfg->zygote_slots ? zygote_uid_base(pid) : 0;
                if (r < 0) {
                        airlock_error_set(err, r, "cannot write the sandbox's id maps: %s",
                                          strerror(-r));
                        goto fail;
                }
        } else if (cfg->mode == JAIL_PROCESS && f->is_root && cfg->host_workdir) {
                if (chown(cfg->host_workdir, j->host_uid, j->host_uid) < 0) {
                        r = airlock_error_set(err, -errno, "chown '%s': %m", cfg->host_workdir);
                        goto fail;
                }
        }
        if (j->cgroup) {
                r = cgroup_attach(j->cgroup, pid);
                if (r < 0) {
                        airlock_error_set(err, r, "cannot attach the sandbox to its cgroup: %s",
                                          strerror(-r));
                        goto fail;
                }
        }

        sync_rd = safe_close_fd(sync_rd);
        status_wr = safe_close_fd(status_wr);
        ctl_child = safe_close_fd(ctl_child);
        out_wr = safe_close_fd(out_wr);
        err_wr = safe_close_fd(err_wr);
        if (write(sync_wr, "g", 1) != 1) {
                r = airlock_error_set(err, -errno, "cannot start the sandbox: %m");
                goto fail;
        }
        r = read_child_status(status_rd, err);
        if (r < 0)
                goto fail;

        j->setup_ns = now_ns() - t0;
        j->ctl_fd = TAKE_FD(ctl_parent);
        j->stdout_fd = TAKE_FD(out_rd);
        j->stderr_fd = TAKE_FD(err_rd);
        *ret_jail = j;
        return 0;

fail:
        (void) jail_free(j);
        return r;
}

int jail_kill(struct jail *j)
{
        if (!j || j->pid <= 0)
                return 0;
        if (!j->exited) {
                /* SIGKILL to the pid namespace's init takes every process of the namespace. */
                if (j->pidfd >= 0)
                        (void) syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
                else
                        (void) kill(j->pid, SIGKILL);
        }
        /* With a pid namespace that was everything: its init takes the rest with it. Process
         * mode has none, and the cgroup catches double-forked strays. */
        if (j->cgroup && !j->has_pidns)
                return cgroup_kill_all(j->cgroup);
        return 0;
}

int jail_adopt(pid_t pid, int pidfd, int ctl_fd, int stdout_fd, int stderr_fd, uid_t host_uid,
               struct cgroup *cgroup, struct jail **ret_jail)
{
        struct jail *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        j->pid = pid;
        j->pidfd = pidfd;
        j->ctl_fd = ctl_fd;
        j->stdout_fd = stdout_fd;
        j->stderr_fd = stderr_fd;
        j->host_uid = host_uid;
        j->cgroup = cgroup;
        j->adopted = true;
        j->has_pidns = true;
        *ret_jail = j;
        return 0;
}

int jail_wait(struct jail *j, bool nonblock)
{
        int status;
        pid_t p;

        if (j->exited)
                return 0;
        if (j->adopted) {
                /* Not our child: the pidfd turns readable when it exits; its parent (the
                 * zygote) reaps it, and its init reported the status as a frame. */
                struct pollfd pfd = { .fd = j->pidfd, .events = POLLIN };
                int n;
                do
                        n = poll(&pfd, 1, nonblock ? 0 : 5000);
                while (n < 0 && errno == EINTR);
                if (n <= 0)
                        return nonblock ? -EAGAIN : -ETIMEDOUT;
                j->exited = true;
                return 0;
        }
        do
                p = waitpid(j->pid, &status, nonblock ? WNOHANG : 0);
        while (p < 0 && errno == EINTR);
        if (p < 0)
                return -errno;
        if (p == 0)
                return -EAGAIN;
        j->exited = true;
        j->wait_status = status;
        return 0;
}

struct jail *jail_free(struct jail *j)
{
        if (!j)
                return NULL;
        if (j->pid > 0) {
                (void) jail_kill(j);
                (void) jail_wait(j, false);
        }
        if (j->cgroup) {
                (void) cgroup_destroy(j->cgroup);
                j->cgroup = cgroup_free(j->cgroup);
        }
        jail_close_fds(j);
        free(j);
        return NULL;
}
