/* Building and queueing responses. Every error is a JSON object with "error", and every text
 * that came from the client (an id, a path) is made valid UTF-8 before it goes into JSON, so
 * that a reply can always be encoded. */
#include "api-internal.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "e2b/e2b.h"
#include "openai/openai.h"
#include "session/session.h"
#include "tenant/tenant.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *api_header(struct api_request *req, const char *name)
{
        return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

int api_reply_response(struct api_request *req, unsigned status, struct MHD_Response *resp)
{
        enum MHD_Result ok;

        if (!resp)
                return -ENOMEM;
        (void) MHD_add_response_header(resp, "X-Request-Id", req->id);
        (void) MHD_add_response_header(resp, "Cache-Control", "no-store");
        (void) MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        if (atomic_load(&req->srv->stopping))
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        ok = MHD_queue_response(req->conn, status, resp);
        MHD_destroy_response(resp);
        if (ok != MHD_YES)
                return -EIO;
        req->status = status;
        req->replied = true;
        return 0;
}

int api_reply_fd(struct api_request *req, unsigned status, int fd, uint64_t size,
                 const char *content_type)
{
        struct MHD_Response *resp;

        /* MHD reads the file as the client takes it (sendfile where it can): a download costs
         * the daemon a socket buffer, not the file's size. */
        resp = MHD_create_response_from_fd64(size, fd);
        if (!resp) {
                (void) close(fd);
                return -ENOMEM;
        }
        if (content_type)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        return api_reply_response(req, status, resp);
}

int api_reply_json(struct api_request *req, unsigned status, json_t *body)
{
        return api_reply_json_header(req, status, body, NULL, NULL);
}

int api_reply_json_header(struct api_request *req, unsigned status, json_t *body,
                          const char *header, const char *value)
{
        struct MHD_Response *resp;
        char *text = NULL, *grown;
        size_t len;

        if (body) {
                /* ASCII only: C1 controls (U+0080-U+009F) in output must not reach a terminal raw.
                 */
                text = json_dumps(body, JSON_COMPACT | JSON_ENSURE_ASCII);
                json_decref(body);
                if (!text)
                        return -ENOMEM;
                len = strlen(text);
                /* A newline, so that `curl` output ends cleanly. */
                grown = realloc(text, len + 2);
                if (!grown) {
                        free(text);
                        return -ENOMEM;
                }
                text = grown;
                text[len++] = '\n';
                text[len] = '\0';
        } else {
                len = 0;
        }
        resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return -ENOMEM;
        }
        if (text)
                (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                               "application/json");
        if (header)
                (void) MHD_add_response_header(resp, header, value);
        return api_reply_response(req, status, resp);
}

int api_reply_openai_error(struct api_request *req, const struct openai_error *err)
{
        json_t *body = openai_error_json(err);

        if (!body)
                return -ENOMEM;
        /* A 503 (the session limit, a draining node) may be tried again, or elsewhere. */
        return api_reply_json_header(
                req, err->status ? err->status : MHD_HTTP_INTERNAL_SERVER_ERROR, body,
                err->status == MHD_HTTP_SERVICE_UNAVAILABLE ? "Retry-After" : NULL, "5");
}

/* The same error in OpenAI's shape, for the routes that speak it: the field becomes "param",
 * extra members are left out (OpenAI's clients read "error" only). */
static int reply_openai_v(struct api_request *req, unsigned status, const char *field,
                          json_t *extra, const char *header, const char *value, const char *msg)
{
        struct openai_error e = { 0 };
        json_t *body;

        json_decref(extra);
        (void) openai_error_set(&e, -EINVAL, status, field, "%s", msg);
        if (status == MHD_HTTP_UNAUTHORIZED)
                (void) openai_error_code(&e, 0, "invalid_api_key");
        body = openai_error_json(&e);
        if (!body)
                return -ENOMEM;
        return api_reply_json_header(req, status, body, header, value);
}

static int reply_error_v(struct api_request *req, unsigned status, const char *field, json_t *extra,
                         const char *header, const char *value, const char *fmt, va_list ap)
{
        _cleanup_free_ char *clean = NULL;
        char msg[1024];
        bool connect;
        json_t *body;

        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        if (req->openai_errors)
                return reply_openai_v(req, status, field, extra, header, value, msg);
        clean = utf8_sanitize(msg, strlen(msg));
        /* Under /e2b the server's own errors (413, 401, 503, routing) are in E2B's shape, so
         * that the SDK raises its typed errors with our message: {"code": status, "message"},
         * or Connect's {"code": "name", "message"} on its RPC paths. Decided here, on the
         * error path, so that no request pays for it. */
        if (req->raw_path && e2b_path_is_e2b(req->raw_path, &connect)) {
                json_decref(extra);
                body = connect ? json_pack("{s:s, s:s?}", "code",
                                           e2b_connect_code_of_status(status), "message", clean)
                               : json_pack("{s:i, s:s?}", "code", (int) status, "message", clean);
                return body ? api_reply_json_header(req, status, body, header, value) : -ENOMEM;
        }
        body = json_object();
        if (!body || !clean) {
                json_decref(body);
                json_decref(extra);
                return -ENOMEM;
        }
        /* "error" first, so that a human reading curl output sees the sentence first. */
        json_object_set_new(body, "error", json_string(clean));
        if (field && *field) {
                _cleanup_free_ char *f = utf8_sanitize(field, strlen(field));
                if (f)
                        json_object_set_new(body, "field", json_string(f));
        }
        if (extra) {
                (void) json_object_update_missing(body, extra);
                json_decref(extra);
        }
        return api_reply_json_header(req, status, body, header, value);
}

int api_reply_error(struct api_request *req, unsigned status, const char *field, const char *fmt,
                    ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = reply_error_v(req, status, field, NULL, NULL, NULL, fmt, ap);
        va_end(ap);
        return r;
}

int api_reply_error_header(struct api_request *req, unsigned status, const char *header,
                           const char *value, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = reply_error_v(req, status, NULL, NULL, header, value, fmt, ap);
        va_end(ap);
        return r;
}

int api_reply_error_extra(struct api_request *req, unsigned status, const char *field,
                          json_t *extra, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = reply_error_v(req, status, field, extra, NULL, NULL, fmt, ap);
        va_end(ap);
        return r;
}

int api_reply_errno(struct api_request *req, int r, const char *field, const char *msg)
{
        const char *text = msg && *msg ? msg : strerror(-r);

        switch (-r) {
        case EINVAL:
        case EOPNOTSUPP:
        case ENOTDIR:
        case EISDIR:
        case ELOOP:
        case ENAMETOOLONG:
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, field, "%s", text);
        case ENOENT:
                return api_reply_error(req, MHD_HTTP_NOT_FOUND, NULL, "%s", text);
        case EBUSY:
                return api_reply_error(req, MHD_HTTP_CONFLICT, NULL, "%s", text);
        case EXFULL:
                return api_reply_quota(req, text);
        case EACCES:
                /* A tenant's policy (a profile outside its list): not a quota to wait for. */
                return api_reply_error(req, MHD_HTTP_FORBIDDEN, field, "%s", text);
        case E2BIG:
        case EFBIG:
                return api_reply_error(req, MHD_HTTP_CONTENT_TOO_LARGE, NULL, "%s", text);
        case ENOSPC:
        case EDQUOT:
                return api_reply_error(req, MHD_HTTP_INSUFFICIENT_STORAGE, NULL, "%s", text);
        case EUSERS:
        case EMFILE:
        case EAGAIN:
        case ESHUTDOWN:
                /* At the session limit, or draining: a front door tries the next node. */
                return api_reply_error_header(req, MHD_HTTP_SERVICE_UNAVAILABLE, "Retry-After", "5",
                                              "%s", text);
        default:
                return api_reply_error(req, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "%s", text);
        }
}

int api_reply_quota(struct api_request *req, const char *msg)
{
        const struct tenant_refusal *q = tenant_scope_refusal();
        json_t *extra = json_object();

        if (!extra)
                return -ENOMEM;
        if (q) {
                (void) json_object_set_new(extra, "quota", json_string(q->quota));
                (void) json_object_set_new(extra, "limit",
                                           json_loads(q->limit, JSON_DECODE_ANY, NULL));
        }
        /* The quota.refusal audit line was written where the quota was checked (session.c). */
        return api_reply_error_extra(req, MHD_HTTP_TOO_MANY_REQUESTS, NULL, extra, "%s", msg);
}

int api_reply_session_gone(struct api_request *req, const char *id)
{
        json_t *ended = session_manager_describe_ended(req->srv->mgr, id);
        _cleanup_free_ char *clean_id = utf8_sanitize(id, strnlen(id, 64));

        if (!clean_id) {
                json_decref(ended);
                return -ENOMEM;
        }
        if (ended) {
                const char *state = json_string_value(json_object_get(ended, "state"));
                const char *reason = json_string_value(json_object_get(ended, "reason"));
                bool lost = state && strcmp(state, "lost") == 0;

                return api_reply_error_extra(
                        req, MHD_HTTP_NOT_FOUND, NULL, ended, "session %s %s: %s", clean_id,
                        lost ? "was lost" : "has ended", reason ? reason : "no reason recorded");
        }
        return api_reply_error(req, MHD_HTTP_NOT_FOUND, NULL, "unknown session '%s'", clean_id);
}
