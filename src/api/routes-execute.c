/* Running code: POST /execute (one-shot) and POST /v1/sessions/{id}/execute. Without
 * `Accept: application/x-ndjson` the handler runs the cell and answers with the execution
 * object. With it, the cell runs on exec-stream.h's worker and its output goes out as ndjson
 * events while it runs. */
#include "api-internal.h"

#include "base/cleanup.h"
#include "base/util.h"
#include "exec-stream.h"
#include "json-body.h"
#include "session/session.h"
#include "tools/base64.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What a failed execute answers, as a reply or as the stream's last event. */
struct exec_failure {
        unsigned status;
        const char *field;
        char msg[AIRLOCK_ERROR_MAX + 128];
};

static const char *field_in_message(const char *msg)
{
        static const char *const fields[] = { "timeout_s", "timeout", "language", "profile",
                                              "code",      "stdin",   "env",      "cwd",
                                              "files",     "context", NULL };

        /* "field: why" names its field first; else the first field the prose mentions. */
        for (size_t i = 0; fields[i]; i++) {
                size_t n = strlen(fields[i]);
                if (strncmp(msg, fields[i], n) == 0 && msg[n] == ':')
                        return fields[i];
        }
        for (size_t i = 0; fields[i]; i++)
                if (strstr(msg, fields[i]))
                        return fields[i];
        return NULL;
}

/* The execute request of a body: the cell and this call's stdin, env and cwd. */
static struct exec_request exec_request_of(const struct exec_body *body)
{
        return (struct exec_request){ .language = body->language,
                                      .code = body->code,
                                      .timeout_ms = body->timeout_ms,
                                      .stdin_text = body->stdin_text,
                                      .env = body->env,
                                      .cwd = body->cwd,
                                      .context = body->context };
}

/* A one-shot's output file for the answer: its content in base64, or null and why not. */
static int add_file_content(void *userdata, json_t *entry, const char *data, size_t len,
                            const char *omitted)
{
        _cleanup_free_ char *b64 = NULL;

        (void) userdata;
        if (!data)
                return json_object_set_new(entry, "content", json_null()) < 0 ||
                                       json_object_set_new(entry, "omitted", json_string(omitted)) <
                                               0
                               ? -ENOMEM
                               : 0;
        b64 = base64_encode(data, len);
        if (!b64 || json_object_set_new(entry, "content", json_string(b64)) < 0)
                return -ENOMEM;
        return 0;
}

/* The one-shot's files: the decoded inputs (owned) and the read-back hook. */
struct once_files {
        struct exec_file *in;
        size_t n_in;
        struct run_once_file *in_ref;
        struct run_once_files files;
};

static void once_files_done(struct once_files *of)
{
        exec_files_free(of->in, of->n_in);
        free(of->in_ref);
        *of = (struct once_files){ 0 };
}

static int once_files_init(const struct exec_body *body, struct once_files *of,
                           struct body_error *berr)
{
        int r;

        *of = (struct once_files){ 0 };
        if (body->files) {
                r = exec_files_decode(body->files, &of->in, &of->n_in, berr);
                if (r < 0)
                        return r;
                of->in_ref = calloc(of->n_in + 1, sizeof(*of->in_ref));
                if (!of->in_ref) {
                        once_files_done(of);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < of->n_in; i++)
                        of->in_ref[i] = (struct run_once_file){ .path = of->in[i].path,
                                                                .data = of->in[i].data,
                                                                .len = of->in[i].len };
        }
        of->files.in = of->in_ref;
        of->files.n_in = of->n_in;
        of->files.on_file = add_file_content;
        return 0;
}

static void exec_failure_of(struct api_server *srv, int r, const struct airlock_error *err,
                            const char *session_id, struct exec_failure *f)
{
        const char *msg = err->msg[0] ? err->msg : strerror(-r);
        json_t *ended;

        f->field = NULL;
        switch (-r) {
        case EBUSY:
                f->status = MHD_HTTP_CONFLICT;
                (void) snprintf(f->msg, sizeof(f->msg), "session %s is running another cell",
                                session_id ? session_id : "");
                break;
        case ENOENT:
                if (!session_id) {
                        f->status = MHD_HTTP_BAD_REQUEST;
                        f->field = "profile";
                        (void) snprintf(f->msg, sizeof(f->msg), "%s",
                                        err->msg[0] ? err->msg : "unknown profile");
                        break;
                }
                f->status = MHD_HTTP_NOT_FOUND;
                ended = session_manager_describe_ended(srv->mgr, session_id);
                (void) snprintf(f->msg, sizeof(f->msg), "session %s has ended: %s", session_id,
                                ended ? json_string_value(json_object_get(ended, "reason"))
                                      : "it was deleted");
                json_decref(ended);
                break;
        case EINVAL:
        case EOPNOTSUPP:
                f->status = MHD_HTTP_BAD_REQUEST;
                f->field = field_in_message(msg);
                (void) snprintf(f->msg, sizeof(f->msg), "%s", msg);
                break;
        case EUSERS:
        case EMFILE:
        case EAGAIN:
        case ESHUTDOWN:
                f->status = MHD_HTTP_SERVICE_UNAVAILABLE;
                (void) snprintf(f->msg, sizeof(f->msg), "%s", msg);
                break;
        case EACCES:
                /* A tenant's policy: a profile outside its list (tenant.h). */
                f->status = MHD_HTTP_FORBIDDEN;
                f->field = field_in_message(msg);
                (void) snprintf(f->msg, sizeof(f->msg), "%s", msg);
                break;
        case EXFULL:
                f->status = MHD_HTTP_TOO_MANY_REQUESTS;
                (void) snprintf(f->msg, sizeof(f->msg), "%s", msg);
                break;
        case E2BIG:
                f->status = MHD_HTTP_CONTENT_TOO_LARGE;
                (void) snprintf(f->msg, sizeof(f->msg), "%s", msg);
                break;
        default:
                f->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
                (void) snprintf(f->msg, sizeof(f->msg), "cannot run the cell: %s", msg);
                break;
        }
}

static int reply_exec_failure(struct api_request *req, int r, const struct airlock_error *err,
                              const char *session_id)
{
        struct exec_failure f;

        if (r == -ENOENT && session_id)
                return api_reply_session_gone(req, session_id);
        if (r == -EXFULL)
                return api_reply_quota(req, err->msg[0] ? err->msg : strerror(-r));
        exec_failure_of(req->srv, r, err, session_id, &f);
        if (r == -EBUSY)
                return api_reply_error_extra(req, f.status, NULL,
                                             json_pack("{s:s}", "id", session_id), "%s", f.msg);
        /* The session limit or a draining node: a front door tries the next one. */
        if (f.status == MHD_HTTP_SERVICE_UNAVAILABLE)
                return api_reply_error_header(req, f.status, "Retry-After", "5", "%s", f.msg);
        return api_reply_error(req, f.status, f.field, "%s", f.msg);
}

/* airlock's ndjson events: stdout and stderr and displays as they come, then the outputs not
 * sent yet, the error and "end" carrying the execution object (or the failure). */
static void ndjson_output(struct exec_stream *st, int stream, const char *text)
{
        exec_stream_push_line_locked(
                st,
                json_pack("{s:s, s:s}", "type", stream == 1 ? "stdout" : "stderr", "text", text));
}

/* Appends item (an object) with "type" set, as one event. */
static void push_typed(struct exec_stream *st, const json_t *item, const char *type)
{
        json_t *ev = json_is_object(item) ? json_copy((json_t *) item) : NULL;

        if (ev && json_object_set_new(ev, "type", json_string(type)) == 0)
                exec_stream_push_line_locked(st, ev);
        else
                json_decref(ev);
}

static void ndjson_end(struct exec_stream *st, int r, json_t *result,
                       const struct airlock_error *err)
{
        const char *sid = exec_stream_session_id(st);
        struct exec_failure f;
        json_t *item;
        size_t i;

        if (r < 0) {
                exec_failure_of(exec_stream_server(st), r, err, sid[0] ? sid : NULL, &f);
                exec_stream_push_line_locked(st, json_pack("{s:s, s:n, s:{s:i, s:s}}", "type",
                                                           "end", "result", "failure", "status",
                                                           (int) f.status, "error", f.msg));
                return;
        }
        json_array_foreach (json_object_get(result, "outputs"), i, item)
                if (i >= exec_stream_outputs_shown(st))
                        push_typed(st, item, "output");
        push_typed(st, json_object_get(result, "error"), "error");
        exec_stream_push_line_locked(st, json_pack("{s:s, s:O}", "type", "end", "result", result));
}

/* A display as the cell makes it: an "output" event in order with stdout and stderr (with
 * "update": true when it replaces the data of an earlier one of the same display_id). */
static void ndjson_display(struct exec_stream *st, const json_t *output)
{
        push_typed(st, output, "output");
}

static const struct exec_stream_format ndjson_format = {
        .content_type = "application/x-ndjson",
        .output = ndjson_output,
        .display = ndjson_display,
        .end = ndjson_end,
        .reply_failure = reply_exec_failure,
};

/* What a stream keeps of its request: the body (which owns the strings of the exec request
 * and the one-shot's options) and the one-shot's files. */
struct stream_data {
        struct session_manager *mgr;
        json_t *root;
        struct session_create_options opts;
        struct once_files files;
};

static void stream_data_free(void *userdata)
{
        struct stream_data *d = userdata;

        if (!d)
                return;
        once_files_done(&d->files);
        json_decref(d->root);
        free(d);
}

static int stream_run_once(void *userdata, const struct exec_request *req, json_t **ret_result,
                           struct airlock_error *err)
{
        struct stream_data *d = userdata;

        return session_run_once_files(d->mgr, &d->opts, req, &d->files.files, ret_result, err);
}

static bool wants_stream(struct api_request *req)
{
        const char *accept = api_header(req, MHD_HTTP_HEADER_ACCEPT);

        return accept && strcasestr(accept, "application/x-ndjson");
}

/* Streams the cell. Takes over session (may be NULL), root and files (one-shot, may be
 * NULL). */
static int stream_start(struct api_request *req, struct session *session, json_t *root,
                        const struct exec_body *body, struct once_files *files)
{
        struct stream_data *d;

        d = calloc(1, sizeof(*d));
        if (!d) {
                session_unref(session);
                json_decref(root);
                if (files)
                        once_files_done(files);
                return -ENOMEM;
        }
        d->mgr = req->srv->mgr;
        d->root = root;
        d->opts.profile = body->profile;
        if (files)
                d->files = *files;
        return exec_stream_start(req, &(struct exec_stream_spec){ .format = &ndjson_format,
                                                                  .session = session,
                                                                  .req = exec_request_of(body),
                                                                  .run = stream_run_once,
                                                                  .data = d,
                                                                  .data_free = stream_data_free });
}

int api_handle_execute_once(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        struct body_error berr = { { 0 } };
        struct exec_body body;
        struct once_files files;
        struct exec_request ereq;
        json_t *root = NULL, *result = NULL;
        int r;

        r = exec_body_parse(req->body, req->body_len, true, &root, &body, &berr);
        if (r >= 0) {
                r = once_files_init(&body, &files, &berr);
                if (r < 0)
                        json_decref(root);
        }
        if (r == -EINVAL)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, berr.field, "%s", berr.msg);
        if (r < 0)
                return r;
        if (wants_stream(req))
                return stream_start(req, NULL, root, &body, &files);

        ereq = exec_request_of(&body);
        r = session_run_once_files(req->srv->mgr,
                                   &(struct session_create_options){ .profile = body.profile },
                                   &ereq, &files.files, &result, &err);
        once_files_done(&files);
        json_decref(root);
        if (r < 0)
                return reply_exec_failure(req, r, &err, NULL);
        return api_reply_json(req, MHD_HTTP_OK, result);
}

int api_handle_session_execute(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        struct body_error berr = { { 0 } };
        struct exec_body body;
        struct session *s = NULL;
        struct exec_request ereq;
        json_t *root = NULL, *result = NULL, *desc;
        const char *state;
        int r;

        r = exec_body_parse(req->body, req->body_len, false, &root, &body, &berr);
        if (r == -EINVAL)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, berr.field, "%s", berr.msg);
        if (r < 0)
                return r;
        r = session_lookup(req->srv->mgr, req->params.id, &s, &err);
        if (r < 0) {
                json_decref(root);
                return r == -ENOENT ? api_reply_session_gone(req, req->params.id)
                                    : api_reply_errno(req, r, NULL, err.msg);
        }

        if (wants_stream(req)) {
                /* The common case of a busy session is answered 409 before the stream starts;
                 * the race with another request is caught by the worker's wait above. */
                desc = session_describe(s);
                state = json_string_value(json_object_get(desc, "state"));
                if (state && strcmp(state, "busy") == 0) {
                        json_decref(desc);
                        json_decref(root);
                        r = reply_exec_failure(req, -EBUSY, &err, session_id(s));
                        session_unref(s);
                        return r;
                }
                json_decref(desc);
                return stream_start(req, s, root, &body, NULL);
        }

        ereq = exec_request_of(&body);
        r = session_execute(s, &ereq, &result, &err);
        json_decref(root);
        if (r < 0) {
                char id[SESSION_ID_MAX + 1];
                (void) snprintf(id, sizeof(id), "%s", session_id(s));
                session_unref(s);
                return reply_exec_failure(req, r, &err, id);
        }
        session_unref(s);
        return api_reply_json(req, MHD_HTTP_OK, result);
}
