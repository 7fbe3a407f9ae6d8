/* The wire protocol between the sandbox's runner and the code that drives it (the CLI's one-shot
 * run, the daemon's sessions). A frame is a 4-byte little-endian length followed by that many
 * bytes of JSON, one object per frame. Both sides bound every frame they accept.
 *
 * Requests (driver -> runner), each an object with "op":
 *   {"op":"init", "profile":"name", "imports":[...]|null, "policy":"none"|"restricted",
 *    "preload":[...], "output_max":n, "memory_bytes":n}      -> {"op":"ready"} or {"op":"fatal"}
 *   {"op":"exec", "language":"python"|"bash"|"javascript"|"typescript", "code":"..."}
 *                                                              -> {"op":"result", ...}
 * The runner answers {"op":"fatal","message":"..."} when it cannot go on, then exits.
 * The daemon's requests to a session's runner also carry "id", 16 random hex characters, which
 * the answer repeats; a frame that does not answers nothing (user code owns the runner's end
 * and can write frames of its own) and is dropped. */
#pragma once

#include <jansson.h>
#include <stddef.h>

/* Largest frame either side sends: code, results and base64 images fit well inside. */
#define WIRE_FRAME_MAX (64u * 1024u * 1024u)

/* Code Mode (`import airlock_tools`): during an exec the runner may send
 *   {"op":"tool_list"|"tool_call", "id": the exec's id, "call": n, "name"?, "arguments"?}
 * and waits for {"op":"tool_reply", "id", "call": n, "ok": data | "error": "...", "kind"}
 * before anything else. Largest tool request either side accepts: the runner refuses a larger
 * one itself (the daemon reads a frame past its result budget as a result that was too large,
 * and ends the sandbox), the daemon refuses one over its own limit, which is at most this. */
#define WIRE_TOOL_REQUEST_MAX (1024u * 1024u)

/* Serialises obj and writes one frame. Returns 0, -E2BIG if larger than WIRE_FRAME_MAX, or
 * -errno. Borrowed: obj stays the caller's. */
int wire_send(int fd, const json_t *obj);

/* Reads one frame of at most max bytes and parses it. On success *ret_obj is a new reference
 * (caller frees with json_decref()). Returns 0, -EPIPE on a clean EOF before a frame, -E2BIG if
 * the peer announced more than max bytes, -EBADMSG if the payload is not a JSON object, or
 * -errno. */
int wire_recv(int fd, size_t max, json_t **ret_obj);

#include <stdbool.h>
#include <sys/types.h>

#define WIRE_FDS_MAX 4

/* Sends one frame carrying, as ancillary data, n_fds file descriptors (SCM_RIGHTS, at most
 * WIRE_FDS_MAX) and, with creds, the sender's own pid, uid and gid (SCM_CREDENTIALS), which
 * the kernel translates into the receiver's namespaces. Returns 0 or -errno. */
int wire_send_ex(int fd, const json_t *obj, const int *fds, size_t n_fds, bool creds);

/* Receives one frame (blocking) and its ancillary data. Received fds are close-on-exec and
 * stored in ret_fds (at most max_fds; extra ones are closed), their count in *ret_n_fds. The
 * sender's pid, as seen from our pid namespace, goes to *ret_pid (-1 if not sent; the socket
 * needs SO_PASSCRED). Returns as wire_recv(). */
int wire_recv_ex(int fd, size_t max, json_t **ret_obj, int *ret_fds, size_t max_fds,
                 size_t *ret_n_fds, pid_t *ret_pid);
