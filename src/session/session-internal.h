/* State shared by the session module's files. */
#pragma once

#include "base/error.h"
#include "jail/jail.h"
#include "profile/profile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sandbox {
        const struct profile *profile;
        enum jail_isolation mode;
        struct jail *jail;
        char *runner_path;
        char **envp;
        char *workdir; /* process/none modes: the host directory used as /work */
        uint64_t memory_bytes;
        bool alive;
        bool killed; /* killed by the driver or its owner, not dead by itself */
        int exec_count;
        /* control-socket frame being assembled */
        char *rbuf;
        size_t rlen, rsize, rwant;
        size_t frame_max; /* largest frame accepted from the runner */
};

struct sandbox *sandbox_free(struct sandbox *sb);
static inline void sandbox_freep(struct sandbox **sb)
{
        sandbox_free(*sb);
}

/* process/none modes: a fresh private directory on the host to serve as /work. */
int workspace_make_host_dir(char **ret_path, struct airlock_error *err);
int workspace_remove_host_dir(const char *path);
