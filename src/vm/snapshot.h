/* Saving and restoring whole microVMs (docs/PROFILES.md, "The microvm tier"; docs/LIFECYCLE.md).
 * A VM is saved with QEMU's own migration, written to a file of the daemon's through an fd
 * handed over QMP (`getfd`, then `migrate fd:NAME`, the VM paused), and restored by starting
 * QEMU with the same machine and `-incoming fd:N` reading that file (vm_config.incoming_fd):
 * the guest goes on where it was saved, its kernel, init, runner and every Python object,
 * thread and socket in it. QEMU's seccomp sandbox forbids it to spawn, so `exec:` migration is
 * out, and 7.2 has no `file:` URI: an fd is what is left, and it keeps QEMU from opening any
 * path of the host.
 *
 * A restored copy then gets what must not be shared between copies (vm_reseed): fresh bytes
 * for its kernel's random generator, forcibly reseeded, and the host's clock (the guest's
 * stopped when it was saved). Python's generators are the runner's to reseed, after this.
 *
 * Each VM's QMP monitor is a socketpair end (vm_start's *ret_qmp_fd), so nothing else on the
 * host can reach it. */
#pragma once

#include "base/error.h"
#include "vm.h"

#include <stdbool.h>
#include <stdint.h>

/* How long a save or a restore may take before it is given up: bounded by the guest's memory,
 * written at disk speed; under TCG, and for a large guest, tens of seconds. */
#define VM_SNAPSHOT_TIMEOUT_MS 300000

/* Saves the whole VM into out_fd (borrowed, a regular file open for writing at offset 0): the
 * VM is paused, migrated into the file, and (keep_running) resumed, else left paused for its
 * owner to kill. The guest must be quiet on its channels (its runner idle): bytes in flight in
 * the host's ends of the channels are not part of the save. Returns 0 or -errno with err set
 * (-ETIMEDOUT, -EIO when QEMU refused or failed, with its reason). */
int vm_save(int qmp_fd, int out_fd, bool keep_running, struct airlock_error *err);

/* Waits until QEMU has loaded a saved VM (vm_config.restore) and lets it run: a VM keeps the
 * run state it was saved in, and vm_save() pauses it. Returns 0, -ETIMEDOUT, -EPIPE when QEMU
 * exited (a state it could not load: its log says why), -EIO, or -errno; err is set. */
int vm_continue(int qmp_fd, uint64_t timeout_ms, struct airlock_error *err);

/* Gives a VM restored from a saved one its own randomness and the host's time through its
 * init (the signal port, sig_fd): 32 bytes of getrandom() mixed into and reseeding the guest
 * kernel's generator (RNDADDENTROPY, RNDRESEEDCRNG) and CLOCK_REALTIME set. Waits until init
 * says it is done, which also says that the restore finished and the guest runs; timeout_ms
 * bounds the wait. Returns 0, -ETIMEDOUT, -EPIPE when QEMU exited (a state it could not load:
 * its log says why), -EIO when init could not do it, or -errno; err is set. */
int vm_reseed(int sig_fd, uint64_t timeout_ms, struct airlock_error *err);

/* A text that changes whenever a VM saved from cfg could not be restored as it is, or would
 * be another guest: the QEMU binary (its name, size and mtime: an upgrade may not load what
 * the old one saved) and accelerator, the machine's command line (less the kernel's command
 * line), the image's files (size, mtime, inode) and the boot configuration. The
 * session module adds what the runner was told. Caller frees. Returns 0 or -errno. */
int vm_snapshot_key(const struct vm_config *cfg, char **ret_key);
