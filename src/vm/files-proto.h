/* The file channel of a microVM (docs/PROFILES.md, "The microvm tier"): how the daemon reads,
 * writes, lists and deletes files in a guest's /work. It is a virtio-serial port of its own,
 * "airlock.files", served inside the guest by a child of init (files-server.c) that the
 * session's code cannot reach: no device node of the port is in the runner's /dev, and the
 * server runs as the guest's root (the runner's uid cannot signal or trace it) with its
 * filesystem uid the runner's, so it may touch exactly what the session's code may. Every
 * path is resolved with openat2() beneath /work, refusing symlinks, magic links and mount
 * crossings. Neither side includes anything but libc (init is static).
 *
 * Strictly one request, then its answer; all integers little-endian.
 *   request:  struct vmf_req, then path_len bytes of path (relative to /work, no NUL; empty
 *             is /work itself, for LIST), then for WRITE arg bytes of the file's content.
 *   answer:   struct vmf_resp, then
 *             READ, status 0:  chunks, each a u32 length and that many bytes, ended by a
 *                              zero length; at most the request's arg bytes in all
 *             LIST, status 0:  len bytes of entries, each struct vmf_entry then its name
 *             otherwise:       nothing (len is 0)
 * status is 0 or a negative errno. The daemon trusts nothing of an answer beyond its bounds:
 * a wrong magic or sequence number, a length past the limits below, or a silence past the
 * deadline breaks the channel for the rest of the session (vm/files.h). */
#pragma once

#include <stdint.h>

#define VMF_PORT_NAME "airlock.files"
#define VMF_MAGIC 0x31464c41u /* "ALF1" */
#define VMF_PATH_MAX 4095u
#define VMF_NAME_MAX 255u
#define VMF_LIST_MAX 10000u
/* The largest LIST answer: VMF_LIST_MAX entries with names of VMF_NAME_MAX bytes. */
#define VMF_LIST_BYTES_MAX (VMF_LIST_MAX * (sizeof(struct vmf_entry) + VMF_NAME_MAX))
#define VMF_CHUNK_MAX (64u * 1024u)
/* The deepest directory a DELETE descends into; deeper entries are left (status -ENOTEMPTY). */
#define VMF_DELETE_DEPTH_MAX 128u

enum vmf_op {
        VMF_READ = 1,   /* arg: the most bytes the daemon takes; aux of the answer: the size */
        VMF_WRITE = 2,  /* arg: the content's length; creates the directories on the way */
        VMF_LIST = 3,   /* arg: the most entries; aux: 1 when there were more */
        VMF_DELETE = 4, /* arg: milliseconds it may take; aux: entries removed, aux2: left */
};

enum vmf_type { VMF_FILE = 1, VMF_DIR = 2, VMF_SYMLINK = 3, VMF_OTHER = 4 };

struct vmf_req {
        uint32_t magic;
        uint32_t op;
        uint32_t seq;
        uint32_t path_len;
        uint64_t arg;
};

struct vmf_resp {
        uint32_t magic;
        uint32_t seq;
        int32_t status;
        uint32_t reserved;
        uint64_t len;
        uint64_t aux;
        uint64_t aux2;
};

struct vmf_entry {
        uint8_t type;
        uint8_t reserved;
        uint16_t name_len;
        uint32_t reserved2;
        uint64_t size;
        int64_t mtime; /* seconds since the epoch */
};

_Static_assert(sizeof(struct vmf_req) == 24, "vmf_req is 24 bytes on the wire");
_Static_assert(sizeof(struct vmf_resp) == 40, "vmf_resp is 40 bytes on the wire");
_Static_assert(sizeof(struct vmf_entry) == 24, "vmf_entry is 24 bytes on the wire");

/* The guest's side (files-server.c, linked into init): serves requests on port until the host
 * closes it, then exits. Called in a child of init after it moved into the guest's root, with
 * work "/work"; uid is the runner's, the server's filesystem uid and gid. */
void vmf_serve(int port, uint32_t uid, const char *work) __attribute__((noreturn));
