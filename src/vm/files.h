/* The daemon's end of a microVM's file channel (files-proto.h): read, write, list and delete
 * files in the guest's /work. The session layer (src/session/workspace.c) calls these for a
 * microVM session where it reaches /work on the host for a namespaces one.
 *
 * Every call is one request and its answer, under a deadline (VM_FILES_TIMEOUT_MS plus one
 * second per MiB moved). What the guest answers is bounded before anything is allocated: a
 * READ by the caller's max, a LIST by VMF_LIST_BYTES_MAX. A guest that answers wrongly or not
 * in time breaks the channel for the rest of the session: later calls fail at once saying so,
 * while the session's cells still run.
 *
 * Return values: 0; the guest's errno for the file (-ENOENT, -EISDIR, -ENOSPC, ...) with err
 * untouched, for the caller to word; or, with err set, -EIO, -ETIMEDOUT or -EPIPE when the
 * channel failed. */
#pragma once

#include "base/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VM_FILES_TIMEOUT_MS 30000u

struct vm_files;

/* Takes fd, the daemon's end of the "airlock.files" port (a stream socket). */
struct vm_files *vm_files_new(int fd);
/* Closes the channel; accepts NULL, returns NULL. */
struct vm_files *vm_files_free(struct vm_files *vf);

/* The file's content when it is a regular file of at most max bytes (-EFBIG and *ret_size its
 * size when larger). *ret_data is malloc'd, NUL-terminated past *ret_len. */
int vm_files_read(struct vm_files *vf, const char *path, uint64_t max, char **ret_data,
                  size_t *ret_len, uint64_t *ret_size, struct airlock_error *err);

/* The same, the content written to out_fd as it arrives (*ret_size: the bytes written). */
int vm_files_read_to_fd(struct vm_files *vf, const char *path, uint64_t max, int out_fd,
                        uint64_t *ret_size, struct airlock_error *err);

/* Creates or replaces a regular file (and the directories on the way) with data. */
int vm_files_write(struct vm_files *vf, const char *path, const void *data, size_t len,
                   struct airlock_error *err);

/* Calls each() for every entry of the directory dir ("" is /work), at most max of them
 * (*ret_truncated when there were more). each returns 0, or -errno to stop. */
int vm_files_list(struct vm_files *vf, const char *dir, unsigned max,
                  int (*each)(void *ctx, const char *name, uint8_t type, uint64_t size,
                              int64_t mtime),
                  void *ctx, bool *ret_truncated, struct airlock_error *err);

/* Removes a file, a symlink (never its target) or a directory with everything in it, for at
 * most timeout_ms. -ENOTEMPTY when some stayed, with the counts. */
int vm_files_delete(struct vm_files *vf, const char *path, uint64_t timeout_ms,
                    uint64_t *ret_removed, uint64_t *ret_left, struct airlock_error *err);
