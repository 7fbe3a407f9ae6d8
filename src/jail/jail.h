/* The sandbox engine's public face: probe the kernel, then spawn a process inside every layer of
 * DESIGN.md section 3, in the order of ISOLATION.md section 1, and tear it down again.
 *
 * jail_spawn() clones the child into new user, pid, mount, ipc, uts, net (and, on v2, cgroup)
 * namespaces, maps a unique pair of host ids to root (setup) and 1000 (the sandbox user),
 * attaches the cgroup, and lets the child build its root, apply Landlock, drop every
 * credential, set rlimits, close inherited fds and load seccomp before it executes the runner.
 * Any failure in the child is reported back with the step that failed; nothing runs half-
 * sandboxed. */
#pragma once

#include "base/error.h"
#include "jail/cgroup.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum jail_isolation {
        JAIL_NAMESPACES, /* every layer (default) */
        JAIL_PROCESS,    /* rlimits, timeout, cgroup and a dropped uid only; warns */
        JAIL_NONE,       /* development only: a plain child process */
};

/* What the kernel offers, found once at start (jail_probe). */
struct jail_features {
        bool is_root;         /* we can map arbitrary host ids and manage cgroups */
        bool userns;          /* user namespaces can be created */
        int landlock_abi;     /* 0 = unavailable */
        bool seccomp;         /* seccomp filters can be installed */
        bool mount_setattr;   /* recursive read-only bind mounts (5.12+) */
        bool proc_subset_pid; /* proc's subset=pid and hidepid=invisible (5.8+) */
        bool cgroup_kill;     /* v2 cgroup.kill (5.14+) */
        struct cgroup_root cgroups;
        char kernel[256];
        char cgroup_error[AIRLOCK_ERROR_MAX]; /* why cgroups are unusable, if they are */
};

/* Probes the kernel. Never fails: missing features are reported as such. Release with
 * jail_features_done(). */
void jail_probe(struct jail_features *ret_features);
void jail_features_done(struct jail_features *f);

/* Returns 0 if `mode` can run on this host, else -EOPNOTSUPP with the missing features in err
 * (e.g. "namespaces mode needs root (or CAP_SYS_ADMIN) and user namespaces"). */
int jail_check_mode(const struct jail_features *f, enum jail_isolation mode,
                    struct airlock_error *err);

/* Parses "namespaces", "process" or "none". Returns 0 or -EINVAL. */
int jail_isolation_from_string(const char *s, enum jail_isolation *ret_mode);
const char *jail_isolation_to_string(enum jail_isolation mode);

struct jail_config {
        enum jail_isolation mode;
        const char *name;         /* for the cgroup and logs, e.g. "run-1234"; [A-Za-z0-9_.-] */
        const char *runner_path;  /* host path of the binary executed inside */
        char *const *argv;        /* argv for the runner; argv[0] is shown as its name */
        char *const *envp;        /* the complete environment of the runner */
        const char *rootfs;       /* "/" to bind the host's /usr and an allow-list of /etc */
        uint64_t memory_bytes;    /* cgroup memory.max; 0 = none */
        uint32_t cpu_millicpus;   /* cgroup cpu.max; 0 = none */
        uint32_t pids;            /* cgroup pids.max and RLIMIT_NPROC; 0 = none */
        uint64_t workspace_bytes; /* size of the /work tmpfs */
        uint64_t tmp_bytes;       /* size of /tmp and /dev/shm tmpfs each */
        uint32_t files;           /* RLIMIT_NOFILE */
        uint64_t cpu_seconds;     /* RLIMIT_CPU backstop; 0 = none */
        const char *host_workdir; /* process/none modes: the directory used as /work */
        /* > 0: spawn a zygote for up to this many sessions (at most JAIL_ZYGOTE_SLOTS_MAX).
         * A zygote gets the namespaces, the root and the mapped ids, but no Landlock,
         * credential drop, rlimits or seccomp: it must create each session's namespaces, and
         * each session applies those layers itself before any user code (see
         * src/runner/zygote.c). It never runs user code. */
        unsigned zygote_slots;
        /* runner_path is already a copy private to an enclosing sandbox (a zygote's, for its
         * sessions) and is bound as it is. Otherwise the runner is copied into a tmpfs of this
         * sandbox: a bind of the host file would show its host path in /proc/self/mountinfo
         * (the mount's root is the file's path within its filesystem). */
        bool runner_is_private;
        /* Egress (src/egress/egress.h), namespaces mode: lines appended to the sandbox's
         * /etc/hosts (the forwarded names), and the TCP ports its code may connect(2) to
         * (Landlock; none when n_connect_ports is 0). A zygote passes both to its sessions. */
        const char *hosts_extra;
        const uint16_t *connect_ports;
        size_t n_connect_ports;
        /* A profile layer (docs/PROFILES.md): a host directory bound read-only at
         * JAIL_LAYER_PATH, whose site-packages is on the sandbox's sys.path; NULL = none. */
        const char *layer_dir;
};

#define JAIL_LAYER_PATH "/opt/airlock/layer"

#define JAIL_ZYGOTE_SLOTS_MAX 4096u
/* Inside a zygote, session k runs as ids JAIL_ZYGOTE_NS_BASE + 2k (its setup root) and
 * JAIL_ZYGOTE_NS_BASE + 2k + 1 (its user), mapped to unique host ids. */
#define JAIL_ZYGOTE_NS_BASE 100000u

/* A running sandbox. Fields are read-only for callers. */
struct jail {
        pid_t pid;             /* host pid of the sandbox's first process (pid 1 inside) */
        int pidfd;             /* pidfd of that process, or -EBADF where unsupported */
        int ctl_fd;            /* our end of the control socket (fd 3 inside), SOCK_STREAM */
        int stdout_fd;         /* read end of the sandbox's stdout pipe */
        int stderr_fd;         /* read end of the sandbox's stderr pipe */
        uid_t host_uid;        /* host uid that user code runs as (H1) */
        uid_t zygote_uid_base; /* zygotes: host id of JAIL_ZYGOTE_NS_BASE */
        struct cgroup *cgroup; /* NULL when cgroups are unavailable */
        uint64_t setup_ns;     /* clone to exec of the runner, as measured by the parent */
        bool exited;
        int wait_status; /* as from waitpid(), valid when exited */
        bool adopted;    /* not our child (see jail_adopt) */
        bool has_pidns;  /* pid is the init of the sandbox's own pid namespace */
};

/* Spawns the runner in a new sandbox. features comes from jail_probe(). On success the runner
 * has been executed (the child's setup is complete) and *ret_jail owns the fds; free with
 * jail_free(). Returns 0 or -errno with the failed step in err. */
int jail_spawn(const struct jail_features *features, const struct jail_config *cfg,
               struct jail **ret_jail, struct airlock_error *err);

/* Kills every process of the sandbox (SIGKILL to pid 1 tears down the pid namespace; the
 * cgroup is emptied as well). Idempotent. Returns 0 or -errno. */
int jail_kill(struct jail *j);

/* Waits for the sandbox's first process to exit (blocking, or -EAGAIN with nonblock when it
 * still runs) and records its status. Returns 0 or -errno. */
int jail_wait(struct jail *j, bool nonblock);

/* Wraps a sandbox that someone else started (a session forked inside a zygote): pid and pidfd
 * of its first process, the driver's ends of its control socket and output pipes (ownership
 * taken), its host uid and cgroup (ownership taken, may be NULL). Such a jail is not our child:
 * its exit is seen on the pidfd, and its status arrives as a frame from its init. */
int jail_adopt(pid_t pid, int pidfd, int ctl_fd, int stdout_fd, int stderr_fd, uid_t host_uid,
               struct cgroup *cgroup, struct jail **ret_jail);

/* Kills what is left, reaps, removes the cgroup and closes every fd. Accepts NULL, returns
 * NULL. */
struct jail *jail_free(struct jail *j);
