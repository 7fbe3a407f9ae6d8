/* Sessions of microVM profiles started from a saved VM (docs/PROFILES.md, "The microvm tier").
 * Once per profile the daemon boots its guest, has the runner import the profile's preload and
 * run its warm-up cells, and saves the whole VM (src/vm/snapshot.h) into
 *   <state_dir>/vm-snapshots/<profile>.state   the saved VM, 0400, the daemon's
 *   <state_dir>/vm-snapshots/<profile>.key     what it was saved from (sandbox_vm_key)
 * Every session (and warm pool member) of the profile is then a restored copy, reseeded. The
 * key is checked before each restore: a new image (a runner or init built since), another QEMU
 * command line or another profile makes a new save. Both files are written under a temporary
 * name, fsynced and renamed, the state before the key, so a crash leaves either a matching
 * pair or a key that does not match (and a rebuild). Without a state directory each session
 * boots its own guest. $AIRLOCK_VM_SNAPSHOTS names another directory for them. */
#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "sandbox.h"
#include "session-internal.h"
#include "session-table.h"
#include "vm/vm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAP_DIR "vm-snapshots"
#define KEY_MAX (256u * 1024u)

/* The profile's guest image directory, into buf. */
static int image_dir(struct session_manager *mgr, const struct profile *p, char *buf, size_t size,
                     struct airlock_error *err)
{
        if (vm_image_dir(mgr->cfg.state_dir, p->name, buf, size) < 0)
                return airlock_error_set(err, -EOPNOTSUPP,
                                         "profile '%s' needs its microVM image, and the "
                                         "daemon has no state directory to find it in "
                                         "(set --state-dir or AIRLOCK_VM_IMAGES)",
                                         p->name);
        return 0;
}

static struct sandbox_options vm_options(struct session_manager *mgr, const struct profile *p,
                                         const char *name, const char *dir)
{
        return (struct sandbox_options){ .mode = mgr->cfg.mode,
                                         .profile = p,
                                         .name = name,
                                         .runner_path = mgr->runner_path,
                                         .preload = true,
                                         .vm_image_dir = dir,
                                         .vm_incoming_fd = -EBADF };
}

/* Reads the saved key of the profile (NULL when there is none). */
static char *read_key(int dir, const char *file)
{
        _cleanup_close_ int fd = openat(dir, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        char *buf;
        size_t len = 0;

        if (fd < 0)
                return NULL;
        buf = malloc(KEY_MAX + 1);
        if (!buf)
                return NULL;
        for (;;) {
                ssize_t n = read(fd, buf + len, KEY_MAX - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        free(buf);
                        return NULL;
                }
                if (n == 0 || len + (size_t) n == KEY_MAX) {
                        len += (size_t) n;
                        break;
                }
                len += (size_t) n;
        }
        buf[len] = '\0';
        return buf;
}

static int write_all(int fd, const char *data, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, data, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                data += n;
                len -= (size_t) n;
        }
        return 0;
}

static void temp_name(const char *base, char buf[340])
{
        unsigned char rnd[6] = { 0 };

        (void) getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);
        (void) snprintf(buf, 340, "%s.tmp-%02x%02x%02x%02x%02x%02x", base, rnd[0], rnd[1], rnd[2],
                        rnd[3], rnd[4], rnd[5]);
}

/* Boots the profile's guest, sets its runner up, and saves it as <profile>.state with its key.
 * vmlock held. */
static int build_snapshot(struct session_manager *mgr, struct profile_slot *slot, int dir,
                          const char *image, const char *key, struct airlock_error *err)
{
        const struct profile *p = slot->profile;
        _cleanup_close_ int state = -EBADF, kfd = -EBADF;
        char name[80], id[SESSION_ID_MAX + 1], state_file[300], key_file[300];
        char state_tmp[340], key_tmp[340];
        struct sandbox *sb = NULL;
        struct sandbox_options opts;
        uint64_t t0 = now_ns(), t1, bytes = 0;
        unsigned cells = 0;
        uint64_t faults = 0;
        int r;

        session_make_id(id);
        (void) snprintf(name, sizeof(name), "airlock-%s", id);
        (void) snprintf(state_file, sizeof(state_file), "%s.state", p->name);
        (void) snprintf(key_file, sizeof(key_file), "%s.key", p->name);
        opts = vm_options(mgr, p, name, image);
        log_info("profile=%s msg=\"booting the profile's microVM to save it: its sessions will "
                 "be copies of it\"",
                 p->name);
        r = sandbox_start(mgr->cfg.features, &opts, &sb, err);
        if (r < 0)
                return r;
        t1 = now_ns();
        /* Its first cells' costs paid once, here, rather than by every copy. */
        r = sandbox_warmup(sb, &cells, &faults, err);
        temp_name(state_file, state_tmp);
        if (r >= 0) {
                state = openat(dir, state_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                               0600);
                if (state < 0)
                        r = airlock_error_set(err, -errno, "cannot save the profile's VM: %m");
        }
        if (r >= 0)
                r = sandbox_vm_save(sb, state, false, &bytes, err);
        sandbox_kill(sb);
        sandbox_free(sb);
        if (r >= 0 && (fchmod(state, 0400) < 0 || fsync(state) < 0))
                r = airlock_error_set(err, -errno, "cannot save the profile's VM: %m");
        if (r >= 0 && renameat(dir, state_tmp, dir, state_file) < 0)
                r = airlock_error_set(err, -errno,
                                      "cannot put the profile's saved VM in place: %m");
        if (r < 0) {
                (void) unlinkat(dir, state_tmp, 0);
                return r;
        }
        /* The key last: until it is in place, the state just renamed is not used. */
        temp_name(key_file, key_tmp);
        kfd = openat(dir, key_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
        if (kfd < 0)
                return airlock_error_set(err, -errno, "cannot save the profile's VM key: %m");
        r = write_all(kfd, key, strlen(key));
        if (r >= 0 && fsync(kfd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dir, key_tmp, dir, key_file) < 0)
                r = -errno;
        if (r >= 0 && fsync(dir) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dir, key_tmp, 0);
                return airlock_error_set(err, r, "cannot save the profile's VM key: %s",
                                         strerror(-r));
        }
        log_info("profile=%s msg=\"microVM saved: sessions start from it\" boot_ms=%.0f "
                 "save_ms=%.0f bytes=%llu warmup_cells=%u",
                 p->name, (t1 - t0) / 1e6, (now_ns() - t1) / 1e6, (unsigned long long) bytes,
                 cells);
        return 0;
}

/* Opens <state_dir>/vm-snapshots ($AIRLOCK_VM_SNAPSHOTS when set: development and tests, so
 * that daemons on new state directories share one save), creating it (0700). */
static int open_snap_dir(struct session_manager *mgr, struct airlock_error *err)
{
        const char *env = getenv("AIRLOCK_VM_SNAPSHOTS");
        char path[4096];
        int fd;

        if (env && *env)
                (void) snprintf(path, sizeof(path), "%s", env);
        else
                (void) snprintf(path, sizeof(path), "%s/" SNAP_DIR, mgr->cfg.state_dir);
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return airlock_error_set(err, -errno, "cannot create %s: %m", path);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return airlock_error_set(err, -errno, "cannot open %s: %m", path);
        return fd;
}

/* An fd reading the profile's saved VM, saving it first when it is missing or stale. */
static int open_snapshot(struct session_manager *mgr, struct profile_slot *slot, const char *image,
                         struct airlock_error *err)
{
        const struct profile *p = slot->profile;
        _cleanup_free_ char *key = NULL, *saved = NULL;
        _cleanup_close_ int dir = -EBADF;
        char file[300];
        struct sandbox_options opts = vm_options(mgr, p, "", image);
        int r, fd = -EBADF;

        r = sandbox_vm_key(&opts, &key);
        if (r < 0)
                return airlock_error_set(err, r,
                                         "cannot describe the microVM of profile '%s' (is its "
                                         "image complete?): %s",
                                         p->name, strerror(-r));
        dir = open_snap_dir(mgr, err);
        if (dir < 0)
                return dir;
        (void) snprintf(file, sizeof(file), "%s.key", p->name);
        pthread_mutex_lock(&slot->vmlock);
        saved = read_key(dir, file);
        if (!saved || strcmp(saved, key) != 0) {
                if (saved)
                        log_info("profile=%s msg=\"its saved microVM is stale (a new image, "
                                 "QEMU or command line, or profile): saving it again\"",
                                 p->name);
                (void) unlinkat(dir, file, 0);
                r = build_snapshot(mgr, slot, dir, image, key, err);
        }
        if (r >= 0) {
                (void) snprintf(file, sizeof(file), "%s.state", p->name);
                fd = openat(dir, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        r = airlock_error_set(err, -errno, "cannot open the saved microVM: %m");
        }
        pthread_mutex_unlock(&slot->vmlock);
        return r < 0 ? r : fd;
}

/* Forgets the profile's saved VM (a copy of it could not start): the next start saves anew. */
static void drop_snapshot(struct session_manager *mgr, struct profile_slot *slot)
{
        struct airlock_error err = { { 0 } };
        _cleanup_close_ int dir = open_snap_dir(mgr, &err);
        char file[300];

        if (dir < 0)
                return;
        (void) snprintf(file, sizeof(file), "%s.key", slot->profile->name);
        pthread_mutex_lock(&slot->vmlock);
        (void) unlinkat(dir, file, 0);
        pthread_mutex_unlock(&slot->vmlock);
}

/* A session's VM (booted, or restored when opts says so) with its egress proxy, in its QEMU's
 * network namespace, when the profile allows network (network.c). The profile's saved VM
 * itself (build_snapshot) gets none: it runs only the warm-up. */
static int start_with_network(struct session_manager *mgr, const struct profile *p,
                              const struct sandbox_options *opts, const char *id,
                              struct sandbox **ret_sb, struct airlock_error *err)
{
        int r = sandbox_start(mgr->cfg.features, opts, ret_sb, err);

        if (r == -ENOENT)
                return -EOPNOTSUPP;
        if (r < 0)
                return r;
        r = session_network_open(mgr, p, *ret_sb, id, err);
        if (r < 0)
                *ret_sb = sandbox_free(*ret_sb);
        return r;
}

int session_vm_spawn(struct session_manager *mgr, struct profile_slot *slot, const char *id,
                     int state_fd, struct sandbox **ret_sb, struct airlock_error *err)
{
        char dir[4096], name[80];
        struct sandbox_options opts;
        int r;

        r = image_dir(mgr, slot->profile, dir, sizeof(dir), err);
        if (r < 0)
                return r;
        (void) snprintf(name, sizeof(name), "airlock-%s", id);
        opts = vm_options(mgr, slot->profile, name, dir);
        opts.vm_restore = true;
        opts.vm_incoming_fd = state_fd;
        return start_with_network(mgr, slot->profile, &opts, id, ret_sb, err);
}

int session_vm_start(struct session_manager *mgr, struct profile_slot *slot, const char *id,
                     struct sandbox **ret_sb, struct airlock_error *err)
{
        struct sandbox *sb = NULL;
        char dir[4096], name[80];
        struct sandbox_options opts;
        int r, fd;

        r = image_dir(mgr, slot->profile, dir, sizeof(dir), err);
        if (r < 0)
                return r;
        if (!mgr->cfg.state_dir || slot->profile->start == PROFILE_START_COLD) {
                /* Nowhere to keep a saved VM, or a profile whose sessions must not share
                 * their memory layout (docs/SECURITY.md): a boot of its own. */
                (void) snprintf(name, sizeof(name), "airlock-%s", id);
                opts = vm_options(mgr, slot->profile, name, dir);
                return start_with_network(mgr, slot->profile, &opts, id, ret_sb, err);
        }
        {
                /* The image's own message when it is missing (how to build it). */
                char path[4200];
                (void) snprintf(path, sizeof(path), "%s/root.erofs", dir);
                if (access(path, R_OK) < 0) {
                        (void) snprintf(name, sizeof(name), "airlock-%s", id);
                        opts = vm_options(mgr, slot->profile, name, dir);
                        r = sandbox_start(mgr->cfg.features, &opts, ret_sb, err);
                        return r == -ENOENT ? -EOPNOTSUPP : r;
                }
        }
        fd = open_snapshot(mgr, slot, dir, err);
        if (fd < 0)
                return fd == -ENOENT ? -EOPNOTSUPP : fd;
        r = session_vm_spawn(mgr, slot, id, fd, &sb, err);
        (void) close(fd);
        if (r < 0)
                return r;
        r = sandbox_vm_ready(sb, true, err);
        if (r < 0) {
                sandbox_free(sb);
                if (r == -EPIPE) {
                        log_warn("profile=%s msg=\"a copy of its saved microVM did not start: "
                                 "it is saved again for the next one\"",
                                 slot->profile->name);
                        drop_snapshot(mgr, slot);
                }
                return r;
        }
        *ret_sb = sb;
        return 0;
}
