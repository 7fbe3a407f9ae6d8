/* Profile layers on disk (see layer.h): finding a profile's current one and holding it,
 * listing them, and removing the ones nobody uses any more (layer-build.c builds them).
 * Everything below STATE/layers/PROFILE is addressed relative to that directory's fd, so a
 * layer's name is only ever a checked layer id; the locks in layer.h decide who may remove
 * what. */
#include "layer.h"

#include "layer-internal.h"

#include "base/cleanup.h"
#include "base/util.h"
#include "profile/profile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define LAYER_TREE_DEPTH_MAX 128

bool layer_id_is_valid(const char *id)
{
        /* YYYYMMDD-HHMMSS-xxxxxx */
        if (!id || strlen(id) != LAYER_ID_LEN)
                return false;
        for (size_t i = 0; i < LAYER_ID_LEN; i++) {
                char c = id[i];
                bool ok = i == 8 || i == 15 ? c == '-'
                          : i > 15          ? (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
                                            : c >= '0' && c <= '9';
                if (!ok)
                        return false;
        }
        return true;
}

/* STATE/layers/PROFILE, after checking the name (it becomes a path component). */
int layer_profile_path(const char *state_dir, const char *profile, char **ret,
                       struct airlock_error *err)
{
        if (!profile_name_is_valid(profile))
                return airlock_error_set(err, -EINVAL,
                                         "'%s' is not a valid profile name (lowercase letters, "
                                         "digits, '_' and '-', at most 64, starting with a "
                                         "letter or digit)",
                                         profile);
        if (!state_dir || !state_dir[0])
                return airlock_error_set(err, -EINVAL, "no state directory");
        if (asprintf(ret, "%s/layers/%s", state_dir, profile) < 0)
                return -ENOMEM;
        return 0;
}

/* Opens STATE/layers/PROFILE; with create, makes it (and STATE/layers) first. -ENOENT without
 * touching err when it does not exist. */
int layer_profile_open(const char *path, bool create, int *ret_fd, struct airlock_error *err)
{
        int fd;

        if (create) {
                _cleanup_free_ char *parent = strdup(path);
                char *slash = parent ? strrchr(parent, '/') : NULL;
                if (!slash)
                        return -ENOMEM;
                *slash = '\0';
                /* 0755: the state directory above stays 0700; a sandbox reaches its layer only
                 * through its bind mount, which does not walk these. */
                if (mkdir(parent, 0755) < 0 && errno != EEXIST)
                        return airlock_error_set(err, -errno, "cannot create %s: %s", parent,
                                                 strerror(errno));
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        return airlock_error_set(err, -errno, "cannot create %s: %s", path,
                                                 strerror(errno));
        }
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                if (errno == ENOENT)
                        return -ENOENT;
                return airlock_error_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
        }
        *ret_fd = fd;
        return 0;
}

/* One build or removal per profile at a time (between processes too). */
int layer_profile_lock(int pdir, const char *path, const char *profile, int *ret_fd,
                       struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;

        fd = openat(pdir, ".build.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return airlock_error_set(err, -errno, "cannot open %s/.build.lock: %s", path,
                                         strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        return airlock_error_set(err, -EBUSY,
                                                 "another build or removal of the layers of "
                                                 "profile '%s' is running (it holds "
                                                 "%s/.build.lock); try again when it is done",
                                                 profile, path);
                return airlock_error_set(err, -errno, "cannot lock %s/.build.lock: %s", path,
                                         strerror(errno));
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* layer_profile_path() and layer_profile_open() (without create) in one: -ENOENT, err
 * untouched, when the profile has no layers directory. */
static int open_layers(const char *state_dir, const char *profile, char **ret_path, int *ret_fd,
                       struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL;
        int r;

        r = layer_profile_path(state_dir, profile, &path, err);
        if (r < 0)
                return r;
        r = layer_profile_open(path, false, ret_fd, err);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(path);
        return 0;
}

/* The id `current` names in the profile directory: 1 with id filled, 0 when there is none. */
static int read_current(int pdir, const char *path, char id[static LAYER_ID_LEN + 1],
                        struct airlock_error *err)
{
        char buf[PATH_MAX];
        ssize_t n = readlinkat(pdir, "current", buf, sizeof(buf) - 1);

        if (n < 0) {
                if (errno == ENOENT)
                        return 0;
                return airlock_error_set(err, -errno, "cannot read %s/current: %s", path,
                                         strerror(errno));
        }
        buf[n] = '\0';
        if (!layer_id_is_valid(buf))
                return airlock_error_set(err, -EINVAL,
                                         "%s/current points at '%.80s', which is not a layer id; "
                                         "`airlock profile rm` removes it, `airlock profile "
                                         "build` makes a new one",
                                         path, buf);
        memcpy(id, buf, LAYER_ID_LEN + 1);
        return 1;
}

int layer_current(const char *state_dir, const char *profile, char **ret_dir,
                  struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL, *layer = NULL, *real = NULL;
        _cleanup_close_ int pdir = -EBADF;
        char id[LAYER_ID_LEN + 1];
        struct stat st;
        int r;

        r = open_layers(state_dir, profile, &path, &pdir, err);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        r = read_current(pdir, path, id, err);
        if (r <= 0)
                return r;
        if (asprintf(&layer, "%s/%s", path, id) < 0)
                return -ENOMEM;
        real = realpath(layer, NULL);
        if (!real || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
                return airlock_error_set(err, -ENOENT,
                                         "the current layer of profile '%s' (%s) is missing; "
                                         "`airlock profile build %s` makes a new one, `airlock "
                                         "profile rm %s` removes what is left",
                                         profile, layer, profile, profile);
        *ret_dir = TAKE_PTR(real);
        return 1;
}

int layer_hold(const char *layer_dir, struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat a, b;

        if (asprintf(&path, "%s/.lock", layer_dir) < 0)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0) {
                if (errno == ENOENT)
                        return -ESTALE; /* renamed away by a removal */
                return airlock_error_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
        }
        /* Blocks only behind a removal's LOCK_EX, which is held just while it deletes. */
        while (flock(fd, LOCK_SH) < 0)
                if (errno != EINTR)
                        return airlock_error_set(err, -errno, "cannot lock %s: %s", path,
                                                 strerror(errno));
        /* A removal renames the layer away before deleting it: if the path no longer leads to
         * the file we locked, what we hold is on its way out. */
        if (fstat(fd, &a) < 0)
                return -errno;
        if (stat(path, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
                return -ESTALE;
        return TAKE_FD(fd);
}

int layer_hold_current(const char *state_dir, const char *profile, char **ret_dir, int *ret_fd,
                       struct airlock_error *err)
{
        for (int attempt = 0; attempt < 8; attempt++) {
                _cleanup_free_ char *dir = NULL;
                int r, fd;

                r = layer_current(state_dir, profile, &dir, err);
                if (r <= 0)
                        return r;
                fd = layer_hold(dir, err);
                if (fd == -ESTALE)
                        continue; /* swapped and removed in between: resolve again */
                if (fd < 0)
                        return fd;
                *ret_dir = TAKE_PTR(dir);
                *ret_fd = fd;
                return 1;
        }
        return airlock_error_set(err, -ESTALE,
                                 "the current layer of profile '%s' kept changing while it was "
                                 "being opened; try again",
                                 profile);
}

static int read_json_at(int dirfd, const char *name, const char *shown, json_t **ret,
                        struct airlock_error *err)
{
        _cleanup_close_ int fd = -EBADF;
        json_error_t jerr;
        json_t *v;

        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0) {
                if (errno == ENOENT)
                        return -ENOENT;
                return airlock_error_set(err, -errno, "cannot open %s: %s", shown, strerror(errno));
        }
        v = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
        if (!v || !json_is_object(v)) {
                json_decref(v);
                return airlock_error_set(err, -EINVAL, "%s: not a layer manifest: %s", shown,
                                         v ? "not an object" : jerr.text);
        }
        *ret = v;
        return 0;
}

int layer_manifest_read(const char *layer_dir, json_t **ret, struct airlock_error *err)
{
        _cleanup_free_ char *shown = NULL;

        if (asprintf(&shown, "%s/layer.json", layer_dir) < 0)
                return -ENOMEM;
        return read_json_at(AT_FDCWD, shown, shown, ret, err);
}

char *layer_url_redact(const char *url)
{
        const char *rest = strstr(url, "://"), *at, *end;
        char *out = NULL;

        if (!rest)
                return strdup(url);
        rest += 3;
        end = rest + strcspn(rest, "/?#");
        at = memchr(rest, '@', (size_t) (end - rest));
        /* The last '@' of the authority ends the user information. */
        for (const char *a = at; a; a = memchr(a + 1, '@', (size_t) (end - a - 1)))
                at = a;
        if (!at)
                return strdup(url);
        if (asprintf(&out, "%.*s***%s", (int) (rest - url), url, at) < 0)
                return NULL;
        return out;
}

int layer_opendir_at(int dirfd, const char *name, DIR **ret)
{
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        DIR *d;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                (void) close(fd);
                return r;
        }
        *ret = d;
        return 0;
}

/* Adds up the regular files below dirfd/name (a directory), or removes it with everything in
 * it. Never follows a symlink; a tree deeper than LAYER_TREE_DEPTH_MAX is refused (-ELOOP). */
int layer_tree_walk(int parent, const char *name, bool remove, struct layer_tree_count *c,
                    unsigned depth)
{
        _cleanup_(layer_closedirp) DIR *d = NULL;
        struct dirent *de;
        int fd, r = 0;

        if (depth > LAYER_TREE_DEPTH_MAX)
                return -ELOOP;
        r = layer_opendir_at(parent, name, &d);
        if (r < 0)
                return r;
        fd = dirfd(d);
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISDIR(st.st_mode)) {
                        r = layer_tree_walk(fd, de->d_name, remove, c, depth + 1);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (S_ISREG(st.st_mode)) {
                        c->bytes += (uint64_t) st.st_size;
                        c->files++;
                }
                if (remove && unlinkat(fd, de->d_name, 0) < 0)
                        return -errno;
        }
        if (errno)
                return -errno;
        if (remove && unlinkat(parent, name, AT_REMOVEDIR) < 0)
                return -errno;
        return 0;
}

void layer_strv_done(struct layer_strv *b)
{
        strv_free(b->v);
        *b = (struct layer_strv){ 0 };
}

int layer_strv_push(struct layer_strv *b, const char *s)
{
        char *copy;

        if (b->n + 1 >= b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 16;
                char **v = realloc(b->v, cap * sizeof(char *));
                if (!v)
                        return -ENOMEM;
                b->v = v;
                b->cap = cap;
        }
        copy = strdup(s);
        if (!copy)
                return -ENOMEM;
        b->v[b->n++] = copy;
        b->v[b->n] = NULL;
        return 0;
}

int layer_cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The names of the entries of a directory, sorted. */
static int list_names(int dirfd, struct layer_strv *names)
{
        _cleanup_(layer_closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        r = layer_opendir_at(dirfd, ".", &d);
        if (r < 0)
                return r;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                r = layer_strv_push(names, de->d_name);
                if (r < 0)
                        return r;
        }
        if (names->n)
                qsort(names->v, names->n, sizeof(char *), layer_cmp_str);
        return 0;
}

static bool is_layer_dir(int pdir, const char *name)
{
        struct stat st;

        return layer_id_is_valid(name) && fstatat(pdir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st.st_mode);
}

/* Removes layer name of the profile directory unless someone holds its lock: it is renamed
 * away under LOCK_EX first, so a layer_hold() waiting for the lock finds it gone. Returns 1 when
 * removed, 0 when in use, or -errno. */
static int remove_layer(int pdir, const char *name, uint64_t *freed)
{
        _cleanup_free_ char *lock_path = NULL, *trash = NULL;
        _cleanup_close_ int lock = -EBADF;
        struct layer_tree_count c = { 0 };
        int r;

        if (asprintf(&lock_path, "%s/.lock", name) < 0 ||
            asprintf(&trash, LAYER_TRASH_PREFIX "%s", name) < 0)
                return -ENOMEM;
        lock = openat(pdir, lock_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (lock < 0 && errno != ENOENT)
                return -errno; /* no lock file: a build that died before making it */
        if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0)
                return errno == EWOULDBLOCK ? 0 : -errno;
        if (renameat(pdir, name, pdir, trash) < 0)
                return -errno;
        r = layer_tree_walk(pdir, trash, true, &c, 0);
        *freed += c.bytes;
        return r < 0 ? r : 1;
}

/* layer_gc() with the profile's build lock held; keep is the id that stays whatever (the
 * current one), or NULL. */
int layer_gc_locked(int pdir, const char *path, const char *keep, json_t *report,
                    struct airlock_error *err)
{
        _cleanup_(layer_strv_done) struct layer_strv names = { 0 };
        json_t *removed = json_object_get(report, "removed"),
               *in_use = json_object_get(report, "in_use");
        uint64_t freed = 0;
        int r;

        r = list_names(pdir, &names);
        if (r < 0)
                return airlock_error_set(err, r, "cannot read %s: %s", path, strerror(-r));
        for (size_t i = 0; i < names.n; i++) {
                const char *name = names.v[i];
                if (strcmp(name, "current.tmp") == 0) {
                        (void) unlinkat(pdir, name, 0);
                } else if (strncmp(name, LAYER_TRASH_PREFIX, strlen(LAYER_TRASH_PREFIX)) == 0 &&
                           layer_id_is_valid(name + strlen(LAYER_TRASH_PREFIX))) {
                        /* Renamed by a removal that died before it finished. */
                        struct layer_tree_count c = { 0 };
                        r = layer_tree_walk(pdir, name, true, &c, 0);
                        freed += c.bytes;
                        if (r < 0)
                                return airlock_error_set(err, r, "cannot remove %s/%s: %s", path,
                                                         name, strerror(-r));
                } else if (is_layer_dir(pdir, name) && !(keep && strcmp(name, keep) == 0)) {
                        r = remove_layer(pdir, name, &freed);
                        if (r < 0)
                                return airlock_error_set(err, r, "cannot remove layer %s/%s: %s",
                                                         path, name, strerror(-r));
                        json_array_append_new(r ? removed : in_use, json_string(name));
                }
        }
        json_object_set_new(report, "bytes_freed",
                            json_integer((json_int_t) (json_integer_value(json_object_get(
                                                               report, "bytes_freed")) +
                                                       freed)));
        return 0;
}

json_t *layer_gc_report_new(void)
{
        return json_pack("{s:[], s:[], s:I}", "removed", "in_use", "bytes_freed", (json_int_t) 0);
}

int layer_gc(const char *state_dir, const char *profile, json_t **ret_report,
             struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int pdir = -EBADF, lock = -EBADF;
        char id[LAYER_ID_LEN + 1];
        json_t *report;
        int r;

        r = open_layers(state_dir, profile, &path, &pdir, err);
        if (r == -ENOENT) {
                if (ret_report)
                        *ret_report = layer_gc_report_new();
                return ret_report && !*ret_report ? -ENOMEM : 0;
        }
        if (r < 0)
                return r;
        r = layer_profile_lock(pdir, path, profile, &lock, err);
        if (r < 0)
                return r;
        r = read_current(pdir, path, id, err);
        if (r < 0)
                return r;
        report = layer_gc_report_new();
        if (!report)
                return -ENOMEM;
        r = layer_gc_locked(pdir, path, r > 0 ? id : NULL, report, err);
        if (r < 0 || !ret_report)
                json_decref(report);
        else
                *ret_report = report;
        return r;
}

int layer_remove(const char *state_dir, const char *profile, json_t **ret_report,
                 struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int pdir = -EBADF, lock = -EBADF;
        _cleanup_(layer_strv_done) struct layer_strv left = { 0 };
        char id[LAYER_ID_LEN + 1];
        json_t *report = NULL;
        bool had_current;
        int r;

        r = open_layers(state_dir, profile, &path, &pdir, err);
        if (r == -ENOENT)
                return airlock_error_set(err, -ENOENT,
                                         "profile '%s' has no layers (no %s/layers/%s)", profile,
                                         state_dir, profile);
        if (r < 0)
                return r;
        r = layer_profile_lock(pdir, path, profile, &lock, err);
        if (r < 0)
                return r;
        /* A `current` that names no layer is removed all the same. */
        r = read_current(pdir, path, id, NULL);
        had_current = r > 0;
        if (unlinkat(pdir, "current", 0) < 0 && errno != ENOENT)
                return airlock_error_set(err, -errno, "cannot remove %s/current: %s", path,
                                         strerror(errno));
        report = layer_gc_report_new();
        if (!report)
                return -ENOMEM;
        json_object_set_new(report, "current", had_current ? json_string(id) : json_null());
        r = layer_gc_locked(pdir, path, NULL, report, err);
        if (r < 0) {
                json_decref(report);
                return r;
        }
        if (!had_current && json_array_size(json_object_get(report, "removed")) == 0 &&
            json_array_size(json_object_get(report, "in_use")) == 0) {
                json_decref(report);
                r = airlock_error_set(err, -ENOENT, "profile '%s' has no layers in %s", profile,
                                      path);
        } else {
                r = 0;
        }
        /* The directory goes when only the build lock is left in it. */
        if (list_names(pdir, &left) >= 0 && left.n == 1 && strcmp(left.v[0], ".build.lock") == 0 &&
            unlinkat(pdir, ".build.lock", 0) == 0)
                (void) rmdir(path);
        if (r < 0)
                return r;
        if (ret_report)
                *ret_report = report;
        else
                json_decref(report);
        return 0;
}

int layer_list(const char *state_dir, const char *profile, json_t **ret, struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int pdir = -EBADF;
        _cleanup_(layer_strv_done) struct layer_strv names = { 0 };
        char id[LAYER_ID_LEN + 1];
        json_t *arr;
        bool has_current;
        int r;

        r = open_layers(state_dir, profile, &path, &pdir, err);
        if (r == -ENOENT) {
                *ret = json_array();
                return *ret ? 0 : -ENOMEM;
        }
        if (r < 0)
                return r;
        arr = json_array();
        if (!arr)
                return -ENOMEM;
        r = read_current(pdir, path, id, err);
        has_current = r > 0;
        if (r >= 0)
                r = list_names(pdir, &names);
        if (r < 0) {
                json_decref(arr);
                return r == -ENOMEM ? r : airlock_error_set(err, r, "%s: %s", path, strerror(-r));
        }
        for (size_t i = 0; i < names.n; i++) {
                _cleanup_free_ char *lock_path = NULL;
                _cleanup_close_ int lock = -EBADF;
                json_t *manifest = NULL;
                int dir;
                bool in_use = false;
                if (!is_layer_dir(pdir, names.v[i]))
                        continue;
                if (asprintf(&lock_path, "%s/.lock", names.v[i]) < 0) {
                        json_decref(arr);
                        return -ENOMEM;
                }
                /* In use when someone holds the lock: trying for it exclusively tells, and it is
                 * let go at once. */
                lock = openat(pdir, lock_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
                if (lock >= 0) {
                        in_use = flock(lock, LOCK_EX | LOCK_NB) < 0;
                        if (!in_use)
                                (void) flock(lock, LOCK_UN);
                }
                dir = openat(pdir, names.v[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (dir >= 0) {
                        (void) read_json_at(dir, "layer.json", names.v[i], &manifest, NULL);
                        (void) close(dir);
                }
                json_array_append_new(
                        arr, json_pack("{s:s, s:b, s:b, s:b, s:o}", "id", names.v[i], "current",
                                       has_current && strcmp(names.v[i], id) == 0, "in_use", in_use,
                                       "complete", manifest != NULL, "manifest",
                                       manifest ? manifest : json_null()));
        }
        *ret = arr;
        return 0;
}
