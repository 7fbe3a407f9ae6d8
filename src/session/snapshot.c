/* See snapshot.h. The layout of a saved session and the order of the writes that keep it
 * whole: the new state and the new copy of /work are built beside the old ones, synced, and
 * swapped in by rename (renameat2 RENAME_EXCHANGE for the directory), the old ones removed
 * last. A crash at any point leaves either the old or the new version in place, plus at most
 * some "*.tmp-*" leftovers that the next save removes. */
#include "snapshot.h"

#include "base/cleanup.h"
#include "base/log.h"
#include "sandbox.h"
#include "session-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STATE_FILE "python.state"
#define VM_FILE "vm.state"
#define WORK_DIR "work"

/* Opens (creating with mode 0700 when create) <state_dir>/sessions/<id>. */
static int open_session_dir(const char *state_dir, const char *id, bool create)
{
        char path[4096];
        int fd;

        (void) snprintf(path, sizeof(path), "%s/sessions", state_dir);
        if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
                return -errno;
        (void) snprintf(path, sizeof(path), "%s/sessions/%s", state_dir, id);
        if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static void temp_name(const char *base, char buf[64])
{
        unsigned char rnd[6] = { 0 };

        (void) getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);
        (void) snprintf(buf, 64, "%s.tmp-%02x%02x%02x%02x%02x%02x", base, rnd[0], rnd[1], rnd[2],
                        rnd[3], rnd[4], rnd[5]);
}

/* The daemon's own copies: nothing else writes there, so no deadline. */
static void remove_entry(int dir, const char *name)
{
        struct tree_removal t;

        if (workspace_tree_remove(NULL, dir, name, 0, &t) < 0)
                log_warn("msg=\"cannot remove %s of a saved session: %llu entries left: %s\"", name,
                         (unsigned long long) t.left, workspace_tree_why(&t));
}

/* Removes what an interrupted save left behind. */
static void remove_leftovers(int dir)
{
        _cleanup_close_ int iter = -EBADF;
        struct dirent *de;
        DIR *d;

        iter = fcntl(dir, F_DUPFD_CLOEXEC, 3);
        if (iter < 0)
                return;
        d = fdopendir(iter);
        if (!d)
                return;
        iter = -EBADF;
        while ((de = readdir(d)))
                if (strstr(de->d_name, ".tmp-"))
                        remove_entry(dir, de->d_name);
        closedir(d);
}

/* Builds a new copy of /work beside the old one; *ret_name gets its name. */
static int save_files_beside(int dir, struct sandbox *sb, bool durable, uint64_t budget,
                             char ret_name[64], uint64_t *ret_bytes, struct airlock_error *err)
{
        _cleanup_close_ int dst = -EBADF, link = -EBADF;
        int r;

        temp_name(WORK_DIR, ret_name);
        if (mkdirat(dir, ret_name, 0700) < 0)
                return airlock_error_set(err, -errno, "cannot save the files of /work: %m");
        dst = openat(dir, ret_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dst < 0) {
                r = -errno;
                remove_entry(dir, ret_name);
                return airlock_error_set(err, r, "cannot save the files of /work: %s",
                                         strerror(-r));
        }
        link = openat(dir, WORK_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = workspace_save(sb, dst, link, durable, budget, ret_bytes, err);
        if (r < 0)
                remove_entry(dir, ret_name);
        return r;
}

/* Puts the new copy of /work in place of the old one, atomically. */
static int swap_in_files(int dir, const char *name, bool durable)
{
        if (syscall(SYS_renameat2, dir, name, dir, WORK_DIR, RENAME_EXCHANGE) == 0) {
                remove_entry(dir, name); /* the old copy, now under the temporary name */
        } else if (errno == ENOENT) {
                if (renameat(dir, name, dir, WORK_DIR) < 0)
                        return -errno;
        } else {
                return -errno;
        }
        if (durable && fsync(dir) < 0)
                return -errno;
        return 0;
}

/* The whole VM of a microVM session, beside the old one, then renamed over it. The VM goes on
 * running after the save (a checkpoint); a stop kills it afterwards. */
static int save_vm(int dir, struct sandbox *sb, bool durable, uint64_t max_bytes, json_t **ret_meta,
                   struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        char tmp[64];
        uint64_t bytes = 0;
        json_t *meta;
        int r;

        temp_name(VM_FILE, tmp);
        fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return airlock_error_set(err, -errno, "cannot save the session's VM: %m");
        r = sandbox_vm_save(sb, fd, true, &bytes, err);
        if (r >= 0 && bytes > max_bytes)
                r = airlock_error_set(err, -EFBIG,
                                      "the session's VM takes %llu bytes saved, more than the "
                                      "daemon's limit for a stopped session (%llu)",
                                      (unsigned long long) bytes, (unsigned long long) max_bytes);
        if (r >= 0 && (fchmod(fd, 0400) < 0 || (durable && fsync(fd) < 0)))
                r = airlock_error_set(err, -errno, "cannot save the session's VM: %m");
        if (r >= 0 && renameat(dir, tmp, dir, VM_FILE) < 0)
                r = airlock_error_set(err, -errno, "cannot put the saved VM in place: %m");
        if (r >= 0 && durable && fsync(dir) < 0)
                r = airlock_error_set(err, -errno, "cannot save the session's VM: %m");
        if (r < 0) {
                (void) unlinkat(dir, tmp, 0);
                return r;
        }
        meta = json_pack("{s:b, s:I, s:i, s:[]}", "vm", 1, "state_bytes", (json_int_t) bytes,
                         "files_bytes", 0, "lost_names");
        if (!meta)
                return -ENOMEM;
        *ret_meta = meta;
        return 0;
}

int snapshot_open_vm(const char *state_dir, const char *id)
{
        _cleanup_close_ int dir = open_session_dir(state_dir, id, false);
        int fd;

        if (dir < 0)
                return dir;
        fd = openat(dir, VM_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int snapshot_save(const char *state_dir, const char *id, struct sandbox *sb, bool durable,
                  uint64_t max_bytes, json_t **ret_meta, struct airlock_error *err)
{
        _cleanup_close_ int dir = -EBADF, state = -EBADF;
        char state_tmp[64], work_tmp[64];
        uint64_t state_bytes = 0, files_bytes = 0;
        json_t *meta = NULL;
        int r;

        dir = open_session_dir(state_dir, id, true);
        if (dir < 0)
                return airlock_error_set(err, dir,
                                         "cannot create the session's directory in "
                                         "%s: %s",
                                         state_dir, strerror(-dir));
        remove_leftovers(dir);
        if (sandbox_is_vm(sb))
                return save_vm(dir, sb, durable, max_bytes, ret_meta, err);
        temp_name(STATE_FILE, state_tmp);
        state = openat(dir, state_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (state < 0)
                return airlock_error_set(err, -errno, "cannot save the session's state: %m");
        r = sandbox_snapshot(sb, state, max_bytes, &meta, &state_bytes, err);
        if (r >= 0 && durable && fsync(state) < 0)
                r = airlock_error_set(err, -errno, "cannot save the session's state: %m");
        if (r < 0) {
                (void) unlinkat(dir, state_tmp, 0);
                if (r == -ENOSPC)
                        airlock_error_set(err, r,
                                          "cannot save the session's state: the disk "
                                          "is full");
                return r;
        }
        r = save_files_beside(dir, sb, durable, max_bytes - state_bytes, work_tmp, &files_bytes,
                              err);
        if (r < 0) {
                json_decref(meta);
                (void) unlinkat(dir, state_tmp, 0);
                return r;
        }
        /* Both parts are complete on disk: now swap them in. */
        if (renameat(dir, state_tmp, dir, STATE_FILE) < 0 ||
            (r = swap_in_files(dir, work_tmp, durable)) < 0) {
                r = r < 0 ? r : -errno;
                json_decref(meta);
                (void) unlinkat(dir, state_tmp, 0);
                remove_entry(dir, work_tmp);
                return airlock_error_set(err, r, "cannot put the saved session in place: %s",
                                         strerror(-r));
        }
        json_object_set_new(meta, "state_bytes", json_integer((json_int_t) state_bytes));
        json_object_set_new(meta, "files_bytes", json_integer((json_int_t) files_bytes));
        *ret_meta = meta;
        return 0;
}

int snapshot_save_files(const char *state_dir, const char *id, struct sandbox *sb,
                        uint64_t max_bytes, struct airlock_error *err)
{
        _cleanup_close_ int dir = -EBADF;
        char work_tmp[64];
        int r;

        /* A microVM's files are in its memory: saved with the VM, by a stop or checkpoint. */
        if (sandbox_is_vm(sb))
                return 0;
        dir = open_session_dir(state_dir, id, true);
        if (dir < 0)
                return airlock_error_set(err, dir, "cannot create the session's directory: %s",
                                         strerror(-dir));
        r = save_files_beside(dir, sb, false, max_bytes, work_tmp, NULL, err);
        if (r < 0)
                return r;
        r = swap_in_files(dir, work_tmp, false);
        if (r < 0) {
                remove_entry(dir, work_tmp);
                return airlock_error_set(err, r, "cannot put the files in place: %s", strerror(-r));
        }
        return 0;
}

int snapshot_open_state(const char *state_dir, const char *id)
{
        _cleanup_close_ int tree = -EBADF;
        char path[4096];
        int fd;

        /* The fd goes to a runner, whose code can read /proc/self/fd while the state loads
         * (unpickling runs the session's own __reduce__). Opened through a private, detached
         * copy of the session directory's mount, the file's path there ends at that copy's
         * root: "/python.state", and nothing of where the state directory lives. Without the
         * privilege to clone a mount (a daemon not run as root, which then only offers the
         * process and none modes, where the runner sees the host anyway) it is opened as is. */
        (void) snprintf(path, sizeof(path), "%s/sessions/%s", state_dir, id);
        tree = (int) syscall(SYS_open_tree, AT_FDCWD, path,
                             OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
        if (tree < 0 && errno != EPERM && errno != ENOSYS)
                return -errno;
        if (tree >= 0) {
                fd = openat(tree, STATE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        } else {
                (void) snprintf(path, sizeof(path), "%s/sessions/%s/" STATE_FILE, state_dir, id);
                fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        }
        return fd < 0 ? -errno : fd;
}

int snapshot_load(const char *state_dir, const char *id, struct sandbox *sb, const json_t *meta,
                  json_t **ret_report, struct airlock_error *err)
{
        _cleanup_close_ int dir = -EBADF, work = -EBADF, state = -EBADF;
        json_t *size = json_object_get(meta, "size"), *offset = json_object_get(meta, "offset");
        struct stat st;
        const char *lost = NULL;
        int r;

        dir = open_session_dir(state_dir, id, false);
        if (dir >= 0)
                work = openat(dir, WORK_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (work >= 0) {
                r = workspace_load(sb, work, err);
                if (r < 0)
                        return r;
        }

        if (!json_is_integer(size) || !json_is_integer(offset))
                lost = "the daemon stopped before the session's variables were ever saved";
        else if (json_integer_value(size) == 0)
                state = open("/dev/null", O_RDONLY | O_CLOEXEC); /* nothing was saved */
        else if ((state = snapshot_open_state(state_dir, id)) < 0)
                lost = "the file of the saved variables is missing";
        else if (fstat(state, &st) < 0 ||
                 (uint64_t) st.st_size < (uint64_t) json_integer_value(offset) +
                                                 (uint64_t) json_integer_value(size))
                lost = "the file of the saved variables is truncated";
        if (lost) {
                /* No variables to load, but the modules, the shell and the count still can. */
                json_t *empty = meta ? json_deep_copy(meta) : json_object();
                _cleanup_close_ int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
                json_t *report = NULL;
                if (!empty)
                        return -ENOMEM;
                json_object_set_new(empty, "offset", json_integer(0));
                json_object_set_new(empty, "size", json_integer(0));
                if (!json_is_integer(json_object_get(empty, "count")))
                        json_object_set_new(empty, "count", json_integer(0));
                r = sandbox_restore_send(sb, TAKE_FD(devnull), empty, false, err);
                json_decref(empty);
                if (r >= 0)
                        r = sandbox_restore_wait(sb, &report, err);
                if (r < 0)
                        return r;
                json_object_set_new(report, "error",
                                    json_sprintf("the Python variables were lost: %s", lost));
                *ret_report = report;
                return 0;
        }
        r = sandbox_restore_send(sb, TAKE_FD(state), meta, false, err);
        if (r < 0)
                return r;
        return sandbox_restore_wait(sb, ret_report, err);
}

int snapshot_remove(const char *state_dir, const char *id)
{
        char path[4096];
        _cleanup_close_ int parent = -EBADF;

        (void) snprintf(path, sizeof(path), "%s/sessions", state_dir);
        parent = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (parent < 0)
                return -errno;
        if (faccessat(parent, id, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        remove_entry(parent, id);
        return 0;
}

int snapshot_shared_file(uint64_t room)
{
        _cleanup_close_ int fd = memfd_create("airlock-fork", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        if (fd < 0)
                return -errno;
        /* A sparse file: no page exists until the runner writes it. */
        if (ftruncate(fd, (off_t) room) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_GROW) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int snapshot_shared_seal(int fd, uint64_t end, struct airlock_error *err)
{
        struct stat st;

        /* F_SEAL_WRITE fails (EBUSY) while anyone has a writable shared mapping of the file:
         * the parent's runner could change the children's arrays through it later. */
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) < 0)
                return airlock_error_set(err, errno == EBUSY ? -EBUSY : -errno,
                                         errno == EBUSY
                                                 ? "the session keeps a writable mapping of its "
                                                   "saved state, which the new sessions would "
                                                   "share: refused"
                                                 : "cannot seal the fork's state: %m");
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
                return airlock_error_set(err, -errno, "cannot seal the fork's state: %m");
        /* Sealed: nothing can change it any more. A runner that truncated it before. */
        if (fstat(fd, &st) < 0)
                return airlock_error_set(err, -errno, "cannot stat the fork's state: %m");
        if ((uint64_t) st.st_size < end)
                return airlock_error_set(err, -EIO,
                                         "the fork's state was cut short (%lld of %llu bytes)",
                                         (long long) st.st_size, (unsigned long long) end);
        return 0;
}
