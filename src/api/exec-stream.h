/* A cell's output sent while it runs: a worker thread runs the cell and feeds a bounded queue
 * (reply-queue.h) with the events a format makes of its output and its end; libmicrohttpd's
 * content reader sends them; a watcher thread notices a client that went away and interrupts
 * the cell. airlock's ndjson execute (routes-execute.c) and the E2B SDK's code interpreter and
 * process service (routes-e2b.c) are formats of it. Output reaches the format as text that
 * ends on a UTF-8 character boundary (a character cut between two reads waits for its rest).
 * The stream is freed by whichever of the reply, the worker and the watcher lets go of it
 * last. */
#pragma once

#include "api-internal.h"
#include "session/session.h"

#include <jansson.h>

struct exec_stream;

struct exec_stream_format {
        const char *content_type;
        /* Text of stream 1 (stdout) or 2 (stderr): queue its event(s). Called on the worker
         * thread with the stream's lock held. */
        void (*output)(struct exec_stream *st, int stream, const char *text);
        /* Optional: a display the cell made, as it is made (exec_sink's on_display: output is
         * borrowed); end() then sends only the outputs from exec_stream_outputs_shown() on.
         * Called with the lock held. */
        void (*display)(struct exec_stream *st, const json_t *output);
        /* The cell ended: r >= 0 with its execution object (borrowed), else the failure (-errno
         * with err). Queue the last events. Called with the lock held. */
        void (*end)(struct exec_stream *st, int r, json_t *result, const struct airlock_error *err);
        /* A failure met before anything was streamed, answered as an ordinary reply
         * (session_id NULL for a one-shot). */
        int (*reply_failure)(struct api_request *req, int r, const struct airlock_error *err,
                             const char *session_id);
};

struct exec_stream_spec {
        const struct exec_stream_format *format; /* static */
        struct session *session;                 /* taken over; NULL: run is called */
        struct exec_request req;                 /* its strings owned by data */
        /* Runs a one-shot cell (NULL with a session, which session_execute() runs). */
        int (*run)(void *data, const struct exec_request *req, json_t **ret_result,
                   struct airlock_error *err);
        void *data;                    /* the route's, taken over */
        void (*data_free)(void *data); /* frees data with the stream; may be NULL */
};

/* Starts the worker and answers: the format's ordinary failure reply if the cell failed at
 * once (busy, unknown profile, session limit), else a 200 that streams. Takes over
 * spec->session and spec->data, also on failure. Returns as the api_reply functions. */
int exec_stream_start(struct api_request *req, const struct exec_stream_spec *spec);

/* For the format's callbacks (lock held): queue bytes as they are; queue an event (taken) as
 * one ndjson line; the spec's data; the session id ("" for a one-shot); the server. */
void exec_stream_push_locked(struct exec_stream *st, const void *data, size_t len);
void exec_stream_push_line_locked(struct exec_stream *st, json_t *event);
void *exec_stream_data(struct exec_stream *st);
const char *exec_stream_session_id(const struct exec_stream *st);
struct api_server *exec_stream_server(struct exec_stream *st);
/* Whether the session the cell ran in ended or stopped while it ran (false for a one-shot). */
bool exec_stream_session_gone_locked(const struct exec_stream *st);
/* Ends the reply with an error once what is queued is sent: the connection is cut without
 * the stream's proper end, so the client sees the request fail, as when the server it talks
 * to goes away mid-answer. */
void exec_stream_cut_locked(struct exec_stream *st);
/* How many of the result's outputs (a prefix) display() already sent. */
size_t exec_stream_outputs_shown(const struct exec_stream *st);
