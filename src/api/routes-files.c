/* Files in a session's /work: GET (download or list), PUT (upload the raw body) and DELETE.
 * Paths are checked here for a clear 400 and again by the session layer, which resolves them
 * beneath /work without following symlinks; this file never touches the filesystem itself. */
#include "api-internal.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "session/session.h"

#include <errno.h>
#include <string.h>

/* Replies for a file operation's errno. -ENOENT means the file, unless the session ended
 * meanwhile. */
static int reply_file_errno(struct api_request *req, int r, const char *path,
                            const struct airlock_error *err)
{
        _cleanup_free_ char *clean = utf8_sanitize(path, strlen(path));
        const char *msg = err->msg[0] ? err->msg : NULL;
        json_t *ended;

        if (!clean)
                return -ENOMEM;
        switch (-r) {
        case ENOENT:
                ended = session_manager_describe_ended(req->srv->mgr, req->params.id);
                if (ended) {
                        json_decref(ended);
                        return api_reply_session_gone(req, req->params.id);
                }
                return api_reply_error(req, MHD_HTTP_NOT_FOUND, "path", "%s",
                                       msg ? msg : "no such file or directory in /work");
        case EISDIR:
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "path",
                                       "'%s' is a directory (list it with GET .../files?dir=%s)",
                                       clean, clean);
        case ELOOP:
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "path",
                                       "'%s': a component is a symbolic link, not followed", clean);
        case EFBIG:
                return api_reply_error(req, MHD_HTTP_CONTENT_TOO_LARGE, "path", "%s",
                                       msg ? msg : "the file is larger than the limit");
        case EINVAL:
        case ENOTDIR:
        case ENAMETOOLONG:
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "path", "%s",
                                       msg ? msg : strerror(-r));
        default:
                return api_reply_errno(req, r, NULL, msg);
        }
}

/* Looks the session up, replying 404 (with the reason when it ended) when it is gone.
 * Returns 1 with a reference in *ret_s, 0 when a reply was queued, or -errno. */
static int lookup_session(struct api_request *req, struct session **ret_s)
{
        struct airlock_error err = { { 0 } };
        int r = session_lookup(req->srv->mgr, req->params.id, ret_s, &err);

        if (r == -ENOENT) {
                r = api_reply_session_gone(req, req->params.id);
                return r < 0 ? r : 0;
        }
        if (r < 0) {
                r = api_reply_errno(req, r, NULL, err.msg);
                return r < 0 ? r : 0;
        }
        return 1;
}

/* Checks the file path of the URL; replies 400 and returns 0 when it is bad. */
static int check_path(struct api_request *req, const char *path)
{
        const char *why = NULL;
        int r;

        if (route_check_file_path(path, false, &why) >= 0)
                return 1;
        r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "path", "bad file path: %s", why);
        return r < 0 ? r : 0;
}

static int handle_list(struct api_request *req)
{
        const char *raw = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "dir");
        struct airlock_error err = { { 0 } };
        char dir[ROUTE_PATH_MAX + 2] = "";
        struct session *s = NULL;
        json_t *listing = NULL;
        const char *why = NULL;
        int r;

        if (raw) {
                r = percent_decode(raw, strlen(raw), true, dir, sizeof(dir));
                if (r < 0)
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "dir",
                                               "bad dir: a malformed percent-escape, an "
                                               "escaped NUL byte or too long");
                /* "sub/" is an ordinary way to write a directory. */
                if (r > 1 && dir[r - 1] == '/')
                        dir[r - 1] = '\0';
                if (route_check_file_path(dir, true, &why) < 0)
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "dir", "bad dir: %s",
                                               why);
        }
        r = lookup_session(req, &s);
        if (r <= 0)
                return r;
        r = session_file_list(s, dir, &listing, &err);
        session_unref(s);
        if (r == -ENOTDIR || r == -EINVAL || r == -ELOOP)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "dir", "%s",
                                       err.msg[0] ? err.msg : strerror(-r));
        if (r < 0)
                return reply_file_errno(req, r, dir, &err);
        return api_reply_json(req, MHD_HTTP_OK, listing);
}

int api_handle_file_get(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        struct session *s = NULL;
        uint64_t size = 0;
        int r, fd = -1;

        if (req->params.path[0] == '\0')
                return handle_list(req);
        r = check_path(req, req->params.path);
        if (r <= 0)
                return r;
        r = lookup_session(req, &s);
        if (r <= 0)
                return r;
        r = session_file_open(s, req->params.path, API_FILE_BODY_MAX, &fd, &size, &err);
        session_unref(s);
        if (r == -EFBIG)
                return api_reply_error(req, MHD_HTTP_CONTENT_TOO_LARGE, "path",
                                       "the file is larger than the download limit of %u MiB",
                                       API_FILE_BODY_MAX >> 20);
        if (r < 0)
                return reply_file_errno(req, r, req->params.path, &err);
        return api_reply_fd(req, MHD_HTTP_OK, fd, size, "application/octet-stream");
}

int api_handle_file_put(struct api_request *req)
{
        struct airlock_error err = { { 0 } };
        _cleanup_free_ char *clean = NULL;
        struct session *s = NULL;
        int r;

        r = check_path(req, req->params.path);
        if (r <= 0)
                return r;
        r = lookup_session(req, &s);
        if (r <= 0)
                return r;
        r = session_file_write(s, req->params.path, req->body ? req->body : "", req->body_len,
                               &err);
        session_unref(s);
        if (r < 0)
                return reply_file_errno(req, r, req->params.path, &err);
        clean = utf8_sanitize(req->params.path, strlen(req->params.path));
        if (!clean)
                return -ENOMEM;
        return api_reply_json(
                req, MHD_HTTP_OK,
                json_pack("{s:s, s:I}", "path", clean, "size", (json_int_t) req->body_len));
}

int api_handle_file_delete(struct api_request *req)
{
        const char *timeout =
                MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "timeout_s");
        struct airlock_error err = { { 0 } };
        _cleanup_free_ char *clean = NULL;
        struct tree_removal t = { 0 };
        struct session *s = NULL;
        uint64_t timeout_ms = 0;
        int r;

        r = check_path(req, req->params.path);
        if (r <= 0)
                return r;
        if (timeout && (parse_duration_ms(timeout, &timeout_ms) < 0 || timeout_ms == 0 ||
                        timeout_ms > WORKSPACE_DELETE_TIME_MAX_MS))
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "timeout_s",
                                       "timeout_s must be a number of seconds from 0.001 to %d",
                                       WORKSPACE_DELETE_TIME_MAX_MS / 1000);
        r = lookup_session(req, &s);
        if (r <= 0)
                return r;
        r = session_file_delete(s, req->params.path, timeout_ms, &t, &err);
        session_unref(s);
        clean = utf8_sanitize(req->params.path, strlen(req->params.path));
        if (!clean)
                return -ENOMEM;
        if (r == -ENOTEMPTY)
                /* Part of a directory stayed: say so, with the counts, rather than 200. */
                return api_reply_error_extra(req, MHD_HTTP_CONFLICT, "path",
                                             json_pack("{s:s, s:b, s:b, s:I, s:I}", "path", clean,
                                                       "deleted", 0, "partial", 1, "removed",
                                                       (json_int_t) t.removed, "left",
                                                       (json_int_t) t.left),
                                             "%s", err.msg);
        if (r < 0)
                return reply_file_errno(req, r, req->params.path, &err);
        return api_reply_json(req, MHD_HTTP_OK,
                              json_pack("{s:s, s:b, s:I}", "path", clean, "deleted", 1, "removed",
                                        (json_int_t) t.removed));
}
