/* Saved sessions on disk. A session that stops (or is checkpointed) keeps, in
 * <state_dir>/sessions/<id>/:
 *   work/          a copy of its /work (see workspace_save), swapped in whole by rename
 *   python.state   the pickle its runner wrote of its variables (never read by the daemon:
 *                  a pickle is code, and only a sandbox loads it)
 * Every file is written under a temporary name, fsynced when durable, and renamed into place,
 * so a crash or a full disk never leaves half a state where a resume would read it. What the
 * runner reported about the pickle (offset, size, lost names, modules, shell state) is the
 * "meta" object the session store keeps beside the session's other facts. */
#pragma once

#include "base/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct sandbox;

/* A microVM session (sandbox_is_vm) is saved whole instead (src/vm/snapshot.h), in
 *   vm.state       QEMU's migration stream of its VM: its memory and devices, so every object,
 *                  thread and socket of the guest; 0400, never read by the daemon
 * with the same temporary name, fsync and rename; its meta is {"vm": true, "state_bytes",
 * "lost_names": []}, and snapshot_open_vm() reads it back for a restore. */

/* Saves sb's variables and files. durable: fsync everything (a stop); else the page cache is
 * enough (the daemon may crash, the machine is not expected to). At most max_bytes on disk.
 * On success *ret_meta is a new object: the runner's validated report plus "state_bytes",
 * "files_bytes". Returns 0, -EFBIG (over max_bytes), -ENOSPC, -EIO (the runner could not
 * save), or -errno, always with err set; the previous saved state is then untouched. */
int snapshot_save(const char *state_dir, const char *id, struct sandbox *sb, bool durable,
                  uint64_t max_bytes, json_t **ret_meta, struct airlock_error *err);

/* Saves only the files of /work (after a call that changed them), hard-linking what did not
 * change since the last save. Returns 0 or -errno with err set. */
int snapshot_save_files(const char *state_dir, const char *id, struct sandbox *sb,
                        uint64_t max_bytes, struct airlock_error *err);

/* Loads a saved session into the fresh sandbox sb: the files first, then (meta permitting)
 * the variables. On success *ret_report is a new object {lost_names: [...], error: string or
 * null}: a missing, truncated or corrupt state is an error in the report, not a failure.
 * Returns -errno (err set) only when the files could not be restored or the runner died. */
int snapshot_load(const char *state_dir, const char *id, struct sandbox *sb, const json_t *meta,
                  json_t **ret_report, struct airlock_error *err);

/* Opens the saved variables for reading (a new open file description each call, so that
 * several sandboxes can read at once), through a detached copy of the session directory's mount
 * so that the fd's path shows nothing of the host ("/python.state"). Returns an fd or -errno. */
int snapshot_open_state(const char *state_dir, const char *id);

/* A fork's shared state (docs/LIFECYCLE.md, "Fork"): snapshot_shared_file makes a memfd of room
 * bytes (sparse) sealed against growing, for the parent's runner to write its state into
 * (sandbox_snapshot_shared), so that the pages are charged to the parent's memory cgroup.
 * snapshot_shared_seal then seals it against every change (write, shrink, grow, more seals),
 * which fails (-EBUSY) while anyone keeps a writable shared mapping of it, and checks that the
 * state, ending at end, is still whole. The children map it copy-on-write. Return an fd / 0, or
 * -errno (with err set for the seal). */
int snapshot_shared_file(uint64_t room);
int snapshot_shared_seal(int fd, uint64_t end, struct airlock_error *err);

/* Opens a microVM session's saved VM for reading. Returns an fd or -errno. */
int snapshot_open_vm(const char *state_dir, const char *id);

/* Removes everything saved of a session. Returns 0 or -errno (-ENOENT when nothing was). */
int snapshot_remove(const char *state_dir, const char *id);
