/* What layer.c (finding, listing and removing layers) and layer-build.c (building one) share.
 * Nothing outside src/layer includes this. */
#pragma once

#include "base/error.h"

#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LAYER_TRASH_PREFIX ".trash-"

static inline void layer_closedirp(DIR **d)
{
        if (*d)
                (void) closedir(*d);
}

/* STATE/layers/PROFILE as a new string, after checking that profile is a profile name (it
 * becomes a path component). Returns 0 or -EINVAL with err set. */
int layer_profile_path(const char *state_dir, const char *profile, char **ret,
                       struct airlock_error *err);

/* Opens the directory path (from layer_profile_path); with create, makes it and its parent
 * first (mode 0755). Returns 0, -ENOENT (err untouched) when it does not exist, or -errno with
 * err set. */
int layer_profile_open(const char *path, bool create, int *ret_fd, struct airlock_error *err);

/* Takes the profile's .build.lock (LOCK_EX|LOCK_NB) in pdir, the directory at path. Returns 0
 * with *ret_fd (close to let go), -EBUSY when another build or removal holds it, or -errno;
 * err says which. */
int layer_profile_lock(int pdir, const char *path, const char *profile, int *ret_fd,
                       struct airlock_error *err);

/* Opens the directory name below dirfd (never through a symlink) for readdir. Returns 0 with
 * *ret (closedir it) or -errno. */
int layer_opendir_at(int dirfd, const char *name, DIR **ret);

/* What walking a tree found or removed. */
struct layer_tree_count {
        uint64_t bytes; /* of regular files */
        uint64_t files;
};

/* Adds up the regular files below parent/name (a directory) into *c, or, with remove, deletes it
 * with everything in it. Never follows a symlink; a tree deeper than 128 directories is
 * refused (-ELOOP). Returns 0 or -errno. */
int layer_tree_walk(int parent, const char *name, bool remove, struct layer_tree_count *c,
                    unsigned depth);

/* A growing NULL-terminated vector of strings (v is NULL while empty). */
struct layer_strv {
        char **v;
        size_t n, cap;
};
void layer_strv_done(struct layer_strv *b);
int layer_strv_push(struct layer_strv *b, const char *s); /* a copy of s; 0 or -ENOMEM */
int layer_cmp_str(const void *a, const void *b);          /* for qsort of char * */

/* A new report {"removed": [], "in_use": [], "bytes_freed": 0}, or NULL. */
json_t *layer_gc_report_new(void);

/* layer_gc() with the profile's build lock held, adding to report: every layer of pdir (the
 * directory at path) but keep (NULL: none) that nobody holds goes. Returns 0 or -errno with
 * err set. */
int layer_gc_locked(int pdir, const char *path, const char *keep, json_t *report,
                    struct airlock_error *err);
