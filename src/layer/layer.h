/* Profile layers (docs/PROFILES.md, "Your own libraries: layers"): the packages a profile's
 * "packages" lists, installed by `airlock profile build` into a directory of the state
 * directory, which the profile's sessions get read-only at JAIL_LAYER_PATH with its
 * site-packages on sys.path.
 *
 * On disk, below STATE/layers/PROFILE/:
 *   <id>/site-packages/  what pip installed (--target); only wheels, no build code ever ran
 *   <id>/layer.json      the manifest (below), written last: a layer without it is unfinished
 *   <id>/.lock           mode 0600 (no sandbox user can open it): every process that uses the
 *                        layer holds LOCK_SH on it (the daemon, for as long as a zygote or a
 *                        sandbox of its has the layer mounted); a layer is removed only by
 *                        whoever gets LOCK_EX|LOCK_NB, and never while it is current
 *   current -> <id>      the layer new sessions get: a relative symlink, replaced by creating
 *                        current.tmp and rename(2)ing it over current
 *   .build.lock          LOCK_EX|LOCK_NB for a build or a removal of the profile's layers: one
 *                        at a time, the other is refused with -EBUSY
 * A layer id is "YYYYMMDD-HHMMSS-" (UTC) and 6 random hex digits, so ids sort by age.
 *
 * The manifest, layer.json:
 *   {"id", "profile", "created": "2026-11-25T06:17:43Z", "size": bytes of site-packages,
 *    "files": regular files in it,
 *    "packages": [{"name", "version", "size"}, ...]  (sorted by name; from each
 *                                                      *.dist-info/METADATA and RECORD),
 *    "pip": {"argv": [...], "index_url": URL or null (pip's own default), "trusted_hosts": [...],
 *            "wheels": DIR or null, "install": [...]}}
 * (URLs with their user information redacted: layer.json is readable inside the sandbox).
 *
 * Nothing here logs: callers say what happened. None of it is thread-safe against itself on one
 * profile except through the locks above, which also hold between processes. */
#pragma once

#include "base/error.h"

#include <jansson.h>
#include <stdbool.h>

struct profile;

#define LAYER_ID_LEN 22 /* "20261125-061743-3f9a1c" */

/* A copy of url with its user information ("user:token@") replaced by "***@", for what is
 * shown or stored (a manifest, `airlock profile show`); the URL itself when it has none. NULL
 * when out of memory. */
char *layer_url_redact(const char *url);

/* Whether id has the form of a layer id. */
bool layer_id_is_valid(const char *id);

/* The current layer of a profile (profile: a valid profile name).
 * Returns 1 with *ret_dir the layer's directory (realpath; caller frees), 0 when the profile
 * has no current layer (nothing was built, or it was removed), or -errno with err saying what
 * is wrong and what to do: a `current` that names no layer (-EINVAL) or a missing one
 * (-ENOENT). Costs a readlink and a realpath. */
int layer_current(const char *state_dir, const char *profile, char **ret_dir,
                  struct airlock_error *err);

/* Takes LOCK_SH on layer_dir/.lock and returns its fd (close it to let go), after checking that
 * the layer is still at layer_dir: -ESTALE when it is being or was removed meanwhile (see
 * layer_hold_current), other -errno with err set. Blocks only while a removal holds LOCK_EX,
 * which never happens to a current layer. */
int layer_hold(const char *layer_dir, struct airlock_error *err);

/* layer_current() and layer_hold() together, resolving again when the layer was swapped and
 * removed between the two. Returns 1 with *ret_dir (caller frees) and *ret_fd (the lock; caller
 * closes), 0 when there is no current layer, or -errno with err set. */
int layer_hold_current(const char *state_dir, const char *profile, char **ret_dir, int *ret_fd,
                       struct airlock_error *err);

/* Reads a layer's manifest. Returns 0 with *ret (caller decrefs), -ENOENT (an unfinished
 * layer), or -errno with err set. */
int layer_manifest_read(const char *layer_dir, json_t **ret, struct airlock_error *err);

struct layer_build_options {
        const char *python; /* NULL: Debian's /usr/bin/python3 */
        /* Each line pip prints (stdout and stderr, in order; no newline; at most 4 KiB, longer
         * ones cut), as it prints it. NULL: discarded. */
        void (*on_output)(void *userdata, const char *line);
        void *userdata;
};

/* Builds a new layer of profile p beside its current one and makes it current:
 *   python3 -I -m pip install --isolated --target NEW/site-packages --only-binary=:all:
 *           --no-input --disable-pip-version-check [--index-url URL] [--trusted-host H]...
 *           [--find-links WHEELS [--no-index]] -- REQUIREMENTS...
 * (REQUIREMENTS: packages.install, or every *.whl of packages.wheels when install is absent).
 * Only wheels are installed: no package's build code runs on the host. Then writes the
 * manifest, swaps `current` atomically and removes the profile's old layers that nobody uses
 * (layer_gc). On failure the new directory is removed and the current layer is untouched.
 * Returns 0 with *ret_manifest (caller decrefs) and *ret_gc (layer_gc's report, may be NULL
 * to discard); -EINVAL for a profile with nothing to install or a bad packages value, -EBUSY
 * when another build or removal of the profile runs, -EIO when pip failed (err: its exit
 * status and its first "ERROR:" line), or -errno; err says which, and what to check. */
int layer_build(const char *state_dir, const struct profile *p,
                const struct layer_build_options *opts, json_t **ret_manifest, json_t **ret_gc,
                struct airlock_error *err);

/* The layers of a profile, oldest first: a new array of {"id", "current": bool, "in_use":
 * bool (a process holds its lock), "complete": bool (it has a manifest), "manifest": {...} or
 * null}. No layers (or no directory): an empty array. Returns 0 or -errno with err set. */
int layer_list(const char *state_dir, const char *profile, json_t **ret, struct airlock_error *err);

/* Removes the profile's layers that are neither current nor in use, and unfinished leftovers
 * of builds that crashed. *ret_report (may be NULL) gets {"removed": [ids], "in_use": [ids],
 * "bytes_freed"}. Returns 0, -EBUSY (a build or removal runs), or -errno with err set. */
int layer_gc(const char *state_dir, const char *profile, json_t **ret_report,
             struct airlock_error *err);

/* Removes the profile's `current` link, so new sessions get no layer, then every layer that is
 * not in use (a layer mounted by live sessions stays until they end, and is removed by the next
 * layer_gc, build or removal); the profile's directory goes too once it is empty. *ret_report
 * as layer_gc's, plus "current": the id that was current or null. Returns 0, -ENOENT when the
 * profile has no layers at all, -EBUSY, or -errno with err set. */
int layer_remove(const char *state_dir, const char *profile, json_t **ret_report,
                 struct airlock_error *err);
