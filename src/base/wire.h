/* The wire protocol between the sandbox's runner and the code that drives it (the CLI's one-shot
 * run, the daemon's sessions). A frame is a 4-byte little-endian length followed by that many
 * bytes of JSON, one object per frame. Both sides bound every frame they accept.
 *
 * Requests (driver -> runner), each an object with "op":
 *   {"op":"init", "profile":"name", "imports":[...]|null, "policy":"none"|"restricted",
 *    "preload":[...]}                                          -> {"op":"ready"} or {"op":"fatal"}
 *   {"op":"exec", "language":"python"|"bash", "code":"..."}   -> {"op":"result", ...}
 * The runner answers {"op":"fatal","message":"..."} when it cannot go on, then exits. */
#pragma once

#include <jansson.h>
#include <stddef.h>

/* Largest frame either side sends: code, results and base64 images fit well inside. */
#define WIRE_FRAME_MAX (64u * 1024u * 1024u)

/* Serialises obj and writes one frame. Returns 0, -E2BIG if larger than WIRE_FRAME_MAX, or
 * -errno. Borrowed: obj stays the caller's. */
int wire_send(int fd, const json_t *obj);

/* Reads one frame of at most max bytes and parses it. On success *ret_obj is a new reference
 * (caller frees with json_decref()). Returns 0, -EPIPE on a clean EOF before a frame, -E2BIG if
 * the peer announced more than max bytes, -EBADMSG if the payload is not a JSON object, or
 * -errno. */
int wire_recv(int fd, size_t max, json_t **ret_obj);
