/* Driving one runner in one sandbox: start it with a profile, execute cells with timeouts and
 * output caps, and turn whatever happened (a result, a crash, an OOM kill, a flood, a hang) into
 * the execution object of DESIGN.md section 4. Used by `airlock run` for one-shot runs and by
 * the daemon's sessions. Nothing the runner sends is trusted: frames are bounded and the result
 * object is rebuilt from validated fields. */
#pragma once

#include "base/error.h"
#include "base/wire.h"
#include "jail/jail.h"
#include "profile/profile.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sandbox;

struct sandbox_options {
        enum jail_isolation mode;
        const struct profile *profile; /* borrowed; must outlive the sandbox */
        const char *name;              /* cgroup and log name, e.g. "airlock-run-1234" */
        const char *runner_path;       /* NULL: found next to the binary or installed */
        uint64_t memory_bytes;         /* 0: the profile's limit */
        bool preload;                  /* import the profile's preload modules at start */
        /* The profile's layer (docs/PROFILES.md): a host directory bound read-only at
         * JAIL_LAYER_PATH, its site-packages on sys.path; NULL = none. Borrowed. */
        const char *layer_dir;
        /* A microVM profile's guest image directory (src/vm/vm.h): the runner runs in a guest
         * of its own instead of a jail. NULL = the jail. Borrowed. */
        const char *vm_image_dir;
        /* With vm_image_dir: restore the VM saved in vm_incoming_fd (borrowed) instead of
         * booting one (src/vm/snapshot.h). sandbox_start() then returns as soon as QEMU runs,
         * without talking to the runner (it was set up before the save): the caller finishes
         * with sandbox_vm_ready(). */
        bool vm_restore;
        int vm_incoming_fd;
};

/* The session's own site directory for pip (PYTHONUSERBASE), relative to /work: saved and
 * restored with /work, left out of an execution's files (docs/NETWORK.md, "Inside the
 * sandbox"). */
#define SANDBOX_SITE_BASE ".local"

/* Receives output as it is captured, for streaming. stream is 1 (stdout) or 2 (stderr).
 * The data is raw bytes, possibly cut inside a UTF-8 character. */
struct exec_sink {
        void (*on_output)(void *userdata, int stream, const char *data, size_t len);
        /* Optional: a display the cell made, as it is made, after the output before it:
         * output is {data, main, display_id?, update?} (borrowed, validated), index its place
         * in the result's outputs (an update names the output it replaces). The result carries
         * every output again; one past the output limit is not streamed. */
        void (*on_display)(void *userdata, const json_t *output, size_t index);
        void *userdata;
};

/* Code Mode: what a cell's code may call through the runner's channel (`import airlock_tools`,
 * docs/TOOLS.md). The runner asks for the list or a call with a frame carrying the exec's id;
 * the driver answers it between the cell's other events, so a call counts against the cell's
 * timeout. Everything the code sends is checked here and by the callbacks: it is untrusted. */
struct exec_tools {
        /* The tools the cell's code may call: a new array of {"name", "python_name", "server",
         * "description", "inputSchema"}. NULL only when out of memory. */
        json_t *(*list)(void *userdata);
        /* Calls tool name with args (an object, borrowed), answering by deadline_ns or as soon
         * as *cancel turns true (the cell is interrupted or its sandbox killed). Sets
         * *ret_reply to a new object: {"ok": <Python data>} or {"error": "message", "kind":
         * "not_allowed"|"unavailable"|"invalid"|"timeout"|"interrupted"|"tool_error"|...}.
         * Returns 0 or -ENOMEM. */
        int (*call)(void *userdata, const char *name, json_t *args, uint64_t deadline_ns,
                    const atomic_bool *cancel, json_t **ret_reply);
        void *userdata;
        unsigned max_calls;       /* per cell; 0 = EXEC_TOOLS_MAX_CALLS */
        size_t max_request_bytes; /* one call's frame; 0 = EXEC_TOOLS_REQUEST_MAX */
};

#define EXEC_TOOLS_MAX_CALLS 1000u
#define EXEC_TOOLS_REQUEST_MAX WIRE_TOOL_REQUEST_MAX

struct exec_request {
        const char *language; /* "python", "bash", "javascript" or "typescript" */
        const char *code;
        uint64_t timeout_ms;          /* 0: the profile's limit */
        const struct exec_sink *sink; /* optional */
        /* 0: a timeout or an output flood kills the sandbox at once (one-shot runs). Else the
         * cell is interrupted (SIGINT: KeyboardInterrupt, or the shell's foreground job) and
         * given this long to stop before the sandbox is killed, so a session can survive. */
        uint64_t interrupt_grace_ms;
        bool one_shot; /* the sandbox ends after this cell: its messages promise no state */
        /* Code Mode: NULL = off (a call from code is answered with an error saying how to
         * enable it). The execution's usage counts tool_calls and tool_ms. */
        const struct exec_tools *tools;
        /* For this cell only (docs/API.md, "Executing code"), each optional: its standard
         * input (NULL: empty, EOF at once), extra environment (an object name -> string,
         * borrowed, names checked by session_execute()), and working directory
         * (absolute inside the sandbox, or relative to /work; it must be a directory there:
         * -EINVAL "cwd: ..." otherwise). The session's own ones are back after the cell. */
        const char *stdin_text;
        const json_t *env;
        const char *cwd;
        /* The code context to run in (docs/API.md, "Contexts"): NULL = the session's own
         * interpreter; else a context made by sandbox_context(), python only. */
        const char *context;
        bool context_create; /* the runner makes context, empty, when it has none by its id */
};

#define EXEC_STDIN_MAX (1u << 20)

/* Spawns the sandbox and initialises its runner. Returns 0 or -errno with err set. Caller frees
 * with sandbox_free(). */
int sandbox_start(const struct jail_features *features, const struct sandbox_options *opts,
                  struct sandbox **ret_sb, struct airlock_error *err);

/* Whether the sandbox is a microVM (src/vm/vm.h). */
bool sandbox_is_vm(const struct sandbox *sb);

/* The key of a VM saved from a sandbox started with opts (vm_snapshot_key, plus what its runner
 * was told at "init"): a saved VM may be restored for opts only while the key is the same.
 * Caller frees. Returns 0 or -errno. */
int sandbox_vm_key(const struct sandbox_options *opts, char **ret_key);

/* Finishes a sandbox restored from a saved VM (opts->vm_restore): waits for the guest to run,
 * reseeds its kernel's random generator and sets its clock (vm_reseed) and, with
 * reseed_python (a copy that must not share its template's or its siblings' sequences), has the
 * runner reseed Python's generators: random's and numpy's global ones and those bound to names
 * of the session (the runner's fork reseed). Returns 0 or -errno with err set; the sandbox is
 * then killed. */
int sandbox_vm_ready(struct sandbox *sb, bool reseed_python, struct airlock_error *err);

/* Saves the whole VM of an idle microVM sandbox into out_fd (borrowed, a new regular file),
 * resuming it afterwards when keep_running. *ret_bytes gets the file's size. Returns 0 or -errno
 * with err set (-EOPNOTSUPP: not a VM). */
int sandbox_vm_save(struct sandbox *sb, int out_fd, bool keep_running, uint64_t *ret_bytes,
                    struct airlock_error *err);

/* Executes one cell. On success *ret_result is a new execution object (caller decrefs) whose
 * status is one of ok, error, timeout, oom, killed, output_limit; the sandbox may be dead
 * afterwards (sandbox_is_alive). Returns -errno only when the request could not be made. */
int sandbox_exec(struct sandbox *sb, const struct exec_request *req, json_t **ret_result,
                 struct airlock_error *err);

/* A code context operation in the runner: op is "ctx_new", "ctx_del", "ctx_restart" (id NULL:
 * the session's own interpreter gets a new, empty __main__) or "ctx_list" (*ret_ids, may be
 * NULL, gets the created contexts' ids, new reference). Returns 0; -EINVAL with err set when
 * the runner refused (a bad or taken id, no such context: -ENOENT, the cap: -EUSERS), or
 * -errno. */
int sandbox_context(struct sandbox *sb, const char *op, const char *id, json_t **ret_ids,
                    struct airlock_error *err);

/* Whether the sandbox still runs. Also notices one killed from outside while idle (its pidfds
 * fired), and then finishes it off (kills what is left of it). */
bool sandbox_is_alive(struct sandbox *sb);

/* Sends SIGINT to the runner: the running cell gets KeyboardInterrupt (a bash cell, SIGINT to
 * its foreground job). Safe to call from another thread while sandbox_exec() runs. Returns 0
 * or -errno (-ESRCH when the sandbox is gone). */
int sandbox_interrupt(struct sandbox *sb);

/* Kills the sandbox's processes (it stays allocated until sandbox_free). Safe to call from
 * another thread while sandbox_exec() runs, which then ends with status "killed". */
void sandbox_kill(struct sandbox *sb);

/* Has the runner of a fresh sandbox run cells through its exec path until one costs no page
 * fault (handle_warmup in runner.c), so that its first real call does not pay first-time
 * costs. Sets how many cells that took and their page faults. Returns 0 or -errno (the
 * sandbox is then unusable). */
int sandbox_warmup(struct sandbox *sb, unsigned *ret_cells, uint64_t *ret_faults,
                   struct airlock_error *err);

/* Adds environment variables for code run from now on (Python's os.environ, and so bash and
 * subprocesses). env is a NULL-terminated "NAME=value" list, validated by the caller (may be
 * NULL). home (NULL = leave it): the directory that becomes the working directory, HOME and
 * PWD of the session's code, as an execute's cwd names it (in the process and none modes,
 * /work and /home/user are the session's host directory). Returns 0 or -errno with err set. */
int sandbox_setenv(struct sandbox *sb, char *const *env, const char *home,
                   struct airlock_error *err);

/* Host pid of the sandbox's first process, for reaching its root through /proc. */
pid_t sandbox_pid(const struct sandbox *sb);

/* A pidfd of the sandbox's first process (for entering its namespaces), or -EBADF. Borrowed. */
int sandbox_pidfd(const struct sandbox *sb);

struct egress;
struct egress_session;
/* Puts egress's listeners into the sandbox's network namespace, checking its profile's policy
 * (a session narrows it later: egress_session_set_policy), under the name id; the sandbox
 * owns them from then on (sandbox_set_egress). Returns 0 or -errno with err set. */
int sandbox_egress_open(struct sandbox *sb, struct egress *egress, const char *id,
                        struct airlock_error *err);
/* Gives the sandbox its egress proxy session (egress.h; ownership taken, closed with the
 * sandbox): each execution's usage then says what went through it ("network"). */
void sandbox_set_egress(struct sandbox *sb, struct egress_session *es);
/* The sandbox's egress session, or NULL. Borrowed. */
struct egress_session *sandbox_egress(const struct sandbox *sb);

/* Host uid user code runs as, for files the daemon writes into /work. */
uid_t sandbox_host_uid(const struct sandbox *sb);

/* The sandbox's cgroup usage, when it has a cgroup. Returns 0 or -errno. */
int sandbox_usage(struct sandbox *sb, struct cgroup_usage *ret_usage);
/* The CPU time its cgroup used so far (one pread). Returns 0, -ENODATA without a cgroup or
 * CPU accounting, or -errno. */
int sandbox_cpu_usec(struct sandbox *sb, uint64_t *ret_usec);
/* Sets its cgroup's CPU weight (1-10000, cgroup v2's scale; fair.h). -ENODATA: no cgroup. */
int sandbox_set_cpu_weight(struct sandbox *sb, uint32_t weight);
/* Whether the daemon wrote its cgroup's CPU weight itself since the last call (an interrupt
 * raised it, the end of the interrupted cell put the default back): the fairness thread's
 * idea of the weight is stale then (fair.h). */
bool sandbox_weight_was_restored(struct sandbox *sb);
/* Whether its cell was interrupted and has not ended yet: its cgroup weighs
 * CGROUP_WEIGHT_INTERRUPTED so that the cell gets the CPU to stop. */
bool sandbox_weight_is_boosted(struct sandbox *sb);

/* Time the jail took to build the sandbox (clone to exec of the runner). */
uint64_t sandbox_setup_ns(const struct sandbox *sb);

/* Copies the host file host_path into the sandbox's /work as `name` (one path component).
 * Returns 0, -EEXIST, -EFBIG over the workspace limit, or -errno with err set. */
int sandbox_copy_in(struct sandbox *sb, const char *host_path, const char *name,
                    struct airlock_error *err);

/* Copies every regular file of the sandbox's /work into host_dir (created if missing), keeping
 * the relative paths. Symlinks and special files are never followed or copied; they are listed
 * in *ret_skipped (a new array of {"path","reason"}). Returns 0 or -errno with err set. */
int sandbox_copy_out(struct sandbox *sb, const char *host_dir, json_t **ret_skipped,
                     struct airlock_error *err);

/* Saves the runner's Python variables: they come down a pipe, bounded by max_bytes, and are
 * written at the current offset of out_fd (a file of the daemon's). On success *ret_meta is a
 * new object with the validated facts the runner reported ({offset, size, lost_names, modules,
 * count, bash}; offset and size locate the pickle in what was written) and *ret_bytes is the
 * number of bytes written. The sandbox must be idle. Returns 0; -EFBIG over max_bytes; -EIO
 * when the runner could not save (err says why); -ETIMEDOUT; or -errno. The sandbox stays
 * alive in every case except a runner that would not answer, which is killed. */
int sandbox_snapshot(struct sandbox *sb, int out_fd, uint64_t max_bytes, json_t **ret_meta,
                     uint64_t *ret_bytes, struct airlock_error *err);

/* A fork's shared save: the runner writes its state itself into memfd (a new memfd of the
 * daemon's, at offset 0, truncated to room bytes and sealed against growing), so that its pages
 * are charged to the session's memory cgroup; the buffers of big arrays start on page
 * boundaries, for the children to map. On success *ret_meta is as for sandbox_snapshot() and
 * *ret_end is where the state ends in memfd. -ENOSPC: the state would pass room (nothing is
 * lost: the session is as it was, and the classic save may be tried). The caller seals memfd
 * before any other sandbox sees it. */
int sandbox_snapshot_shared(struct sandbox *sb, int memfd, uint64_t room, json_t **ret_meta,
                            uint64_t *ret_end, struct airlock_error *err);
/* How many bytes a shared save may put in the session's memory: its limit less what it uses now
 * and a margin for the interpreter's own allocations while it pickles (SHARE_MARGIN_MIN plus
 * 1/32 of the limit), 0 when not even that is left. -ENODATA without a memory limit or a
 * cgroup to read, or -errno. */
int sandbox_share_room(struct sandbox *sb, uint64_t *ret_room);
#define SHARE_MARGIN_MIN (16ULL << 20)

/* Loads a saved state into the runner of a fresh sandbox: in_fd (taken, also on failure) reads
 * the file sandbox_snapshot() filled, meta is its *ret_meta (borrowed). reseed gives random
 * generators found in the variables new seeds (a fork's children). The send and the wait are
 * apart so that several sandboxes can load at once. sandbox_restore_wait() puts a new object
 * {lost_names: [...], error: string|null} in *ret_report; it fails (-EIO, -ETIMEDOUT) only when
 * the runner did not answer, and a state that could not be loaded is an error in the report. */
int sandbox_restore_send(struct sandbox *sb, int in_fd, const json_t *meta, bool reseed,
                         struct airlock_error *err);
int sandbox_restore_wait(struct sandbox *sb, json_t **ret_report, struct airlock_error *err);

/* Copies the tree of a live sandbox's /work into dst_dir (a host directory of the daemon's,
 * empty), or (workspace_load) a host directory into a live sandbox's /work, or
 * (workspace_copy) one sandbox's /work into another's. Regular files, directories and symlinks
 * (as links, never followed) are copied with their modes less setuid and setgid, and their
 * modification times; other file types are skipped. Files in /work are created as the sandbox
 * user. A save with link_dir (the previous copy, or -1) hard-links files whose size and mtime
 * did not change instead of copying them; with durable, each file and directory written is
 * fsynced. Bytes copied are bounded by budget (-EFBIG past it). Return 0 or -errno with err
 * set; *ret_bytes (may be NULL) gets the bytes the tree holds. */
int workspace_save(struct sandbox *sb, int dst_dir, int link_dir, bool durable, uint64_t budget,
                   uint64_t *ret_bytes, struct airlock_error *err);
int workspace_load(struct sandbox *sb, int src_dir, struct airlock_error *err);
int workspace_copy(struct sandbox *from, struct sandbox *to, struct airlock_error *err);

/* Files in /work by relative path (see session.h for the rules and errors). sandbox_file_open
 * gives a read-only fd of a regular file and its size, for streaming. */
int sandbox_file_open(struct sandbox *sb, const char *path, size_t max_bytes, int *ret_fd,
                      uint64_t *ret_size, struct airlock_error *err);
int sandbox_file_read(struct sandbox *sb, const char *path, size_t max_bytes, char **ret_data,
                      size_t *ret_len, struct airlock_error *err);
/* Writes a file into /work: by the session's own runner when it is free (see sandbox_put), by
 * the daemon while a cell runs (runner_busy). Either way a file that would not fit in the
 * session's memory limit is refused (-ENOSPC). */
int sandbox_file_write(struct sandbox *sb, const char *path, const void *data, size_t len,
                       bool runner_busy, struct airlock_error *err);

/* Has the session's own runner write data to path (checked, relative to /work), so that the
 * file's pages are charged to the session's memory cgroup, not the daemon's. Returns 0 when
 * the runner answered, with *ret_write_errno 0 or the -errno the write failed with in the
 * sandbox (only known errnos: whatever else a runner says is -EIO); -errno with err set when
 * the exchange itself failed (the sandbox may have been killed then). */
int sandbox_put(struct sandbox *sb, const char *path, const void *data, size_t len,
                int *ret_write_errno, struct airlock_error *err);

/* What removing a tree did: entries removed (the directory itself included) and entries known
 * to be left (a lower bound when the walk stopped early); why, the first reason something
 * stayed (-errno; -ETIME when the time ran out, -ENOTEMPTY when entries kept appearing). */
struct tree_removal {
        uint64_t removed;
        uint64_t left;
        int why;
};

/* Deletes a file, a symlink (never its target) or a directory with everything in it. A
 * directory is walked without recursion and without a depth limit (see workspace_tree_remove),
 * for at most timeout_ms (0, or more than WORKSPACE_DELETE_TIME_MAX_MS: that). Returns 0 when
 * path is gone, -ENOTEMPTY when some of a directory stayed (the time ran out, or the code kept
 * writing into it: err says which, and *ret_removal, which may be NULL, has the counts), or
 * -errno as the other file calls. */
#define WORKSPACE_DELETE_TIME_MAX_MS 10000
int sandbox_file_delete(struct sandbox *sb, const char *path, uint64_t timeout_ms,
                        struct tree_removal *ret_removal, struct airlock_error *err);
int sandbox_file_list(struct sandbox *sb, const char *dir, json_t **ret_listing,
                      struct airlock_error *err);

/* Returns true when path is a valid relative path inside /work: no leading '/', no empty, "."
 * or ".." components, components under 256 bytes, under 4096 bytes in all. "" is valid only
 * when allow_empty (the workspace itself). */
bool workspace_path_is_valid(const char *path, bool allow_empty);

/* Kills the sandbox and frees everything. Accepts NULL, returns NULL. */
struct sandbox *sandbox_free(struct sandbox *sb);

/* Finds the runner binary: $AIRLOCK_RUNNER, then next to the running executable (build tree),
 * then the installed libexec directory. Returns a new string or NULL. */
char *sandbox_find_runner(void);
