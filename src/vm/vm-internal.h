/* Shared by the files of src/vm. */
#pragma once

#include "vm.h"

/* QEMU's command line for cfg (as a boot, less the kernel's command line) and its boot
 * configuration, as one text: what a saved VM's copies must share with it (snapshot.c's key).
 * Caller frees. Returns 0 or -errno. */
int vm_machine_text(const struct vm_config *cfg, char **ret_text);

/* The QEMU binary vm_start() runs: $AIRLOCK_QEMU or qemu-system-x86_64 on PATH. */
const char *vm_qemu_binary(void);
