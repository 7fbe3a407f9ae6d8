/* The tools backend on a running daemon (see tools-remote.h): each backend call is one request
 * of docs/API.md. A 404 naming a session that ended becomes -ESRCH, so the toolbox starts a new
 * session as it does in-process. */
#include "tools-remote.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "client.h"
#include "tools/tools.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct remote {
        struct cli_client *client; /* borrowed */
};

/* Percent-encodes s for a URL path (keep_slash) or a query value. */
static char *url_encode(const char *s, bool keep_slash)
{
        static const char hex[] = "0123456789ABCDEF";
        char *out = malloc(strlen(s) * 3 + 1), *o = out;

        if (!out)
                return NULL;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~", *p) || (keep_slash && *p == '/')) {
                        *o++ = (char) *p;
                } else {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 15];
                }
        }
        *o = '\0';
        return out;
}

/* Turns a failed reply into -errno with err set from its "error" member. */
static int reply_errno(const struct cli_response *resp, struct airlock_error *err)
{
        _cleanup_(json_decrefp) json_t *obj =
                resp->body ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(obj, "error"));
        int r;

        switch (resp->status) {
        case 400:
                r = -EINVAL;
                break;
        case 404:
                /* A session that ended is answered with its id and state; an unknown one with
                 * "unknown session". Anything else is a missing file or directory. */
                r = json_object_get(obj, "state") ||
                                    (msg && strncmp(msg, "unknown session", 15) == 0)
                            ? -ESRCH
                            : -ENOENT;
                break;
        case 409:
                r = -EBUSY;
                break;
        case 413:
                r = -EFBIG;
                break;
        case 401:
        case 403:
                r = -EACCES;
                break;
        case 503:
                r = -EUSERS;
                break;
        default:
                r = -EIO;
                break;
        }
        return airlock_error_set(err, r, "%s (HTTP %ld)", msg ? msg : "the daemon refused",
                                 resp->status);
}

static int request(struct remote *rm, const char *method, const char *path, const char *body,
                   size_t len, struct cli_response *ret, struct airlock_error *err)
{
        int r = cli_client_request(rm->client, method, path, body, len, NULL, NULL, ret);

        if (r < 0)
                return airlock_error_set(err, r, "cannot reach the daemon: %s", strerror(-r));
        return 0;
}

static int remote_session_create(void *userdata, const char *profile, char **ret_id,
                                 struct airlock_error *err)
{
        struct remote *rm = userdata;
        _cleanup_free_ char *body = NULL;
        _cleanup_(json_decrefp) json_t *obj = NULL, *req = NULL;
        struct cli_response resp = { 0 };
        const char *id;
        int r;

        req = profile ? json_pack("{s:s}", "profile", profile) : json_object();
        body = req ? json_dump_text(req, JSON_COMPACT, NULL) : NULL;
        if (!body)
                return -ENOMEM;
        r = request(rm, "POST", "/v1/sessions", body, strlen(body), &resp, err);
        if (r < 0)
                return r;
        if (resp.status != 201) {
                r = reply_errno(&resp, err);
                free(resp.body);
                return r == -ESRCH ? -EIO : r;
        }
        obj = json_loadb(resp.body, resp.len, 0, NULL);
        free(resp.body);
        id = json_string_value(json_object_get(obj, "id"));
        if (!id)
                return airlock_error_set(err, -EBADMSG, "the daemon answered without a session id");
        *ret_id = strdup(id);
        return *ret_id ? 0 : -ENOMEM;
}

static int remote_session_destroy(void *userdata, const char *id)
{
        struct remote *rm = userdata;
        struct airlock_error err = { { 0 } };
        _cleanup_free_ char *path = NULL, *eid = url_encode(id, false);
        struct cli_response resp = { 0 };
        int r;

        if (!eid || asprintf(&path, "/v1/sessions/%s", eid) < 0)
                return -ENOMEM;
        r = request(rm, "DELETE", path, NULL, 0, &resp, &err);
        if (r < 0)
                return r;
        r = resp.status == 200 ? 0 : reply_errno(&resp, &err);
        free(resp.body);
        return r;
}

static int remote_execute(void *userdata, const char *id, const char *language, const char *code,
                          uint64_t timeout_ms, json_t **ret_result, struct airlock_error *err)
{
        struct remote *rm = userdata;
        _cleanup_free_ char *path = NULL, *body = NULL, *eid = url_encode(id, false);
        _cleanup_(json_decrefp) json_t *req = NULL;
        struct cli_response resp = { 0 };
        json_t *result;
        int r;

        req = json_pack("{s:s, s:s}", "code", code, "language", language);
        if (!req || !eid || asprintf(&path, "/v1/sessions/%s/execute", eid) < 0)
                return -ENOMEM;
        if (timeout_ms > 0 &&
            json_object_set_new(req, "timeout_s", json_real((double) timeout_ms / 1000.0)) < 0)
                return -ENOMEM;
        body = json_dump_text(req, JSON_COMPACT, NULL);
        if (!body)
                return -ENOMEM;
        r = request(rm, "POST", path, body, strlen(body), &resp, err);
        if (r < 0)
                return r;
        if (resp.status != 200) {
                r = reply_errno(&resp, err);
                free(resp.body);
                return r;
        }
        result = json_loadb(resp.body, resp.len, 0, NULL);
        free(resp.body);
        if (!json_is_object(result)) {
                json_decref(result);
                return airlock_error_set(err, -EBADMSG,
                                         "the daemon's execution reply is not "
                                         "a JSON object");
        }
        *ret_result = result;
        return 0;
}

static int remote_file_read(void *userdata, const char *id, const char *fpath, size_t max_bytes,
                            char **ret_data, size_t *ret_len, struct airlock_error *err)
{
        struct remote *rm = userdata;
        _cleanup_free_ char *path = NULL, *eid = url_encode(id, false),
                            *epath = url_encode(fpath, true);
        struct cli_response resp = { 0 };
        int r;

        if (!eid || !epath || asprintf(&path, "/v1/sessions/%s/files/%s", eid, epath) < 0)
                return -ENOMEM;
        r = request(rm, "GET", path, NULL, 0, &resp, err);
        if (r < 0)
                return r;
        if (resp.status != 200) {
                r = reply_errno(&resp, err);
                free(resp.body);
                /* The daemon answers 400 for a directory. */
                return r;
        }
        if (resp.len > max_bytes) {
                free(resp.body);
                return airlock_error_set(err, -EFBIG, "'%s' is larger than %zu bytes", fpath,
                                         max_bytes);
        }
        if (!resp.body) {
                resp.body = strdup("");
                if (!resp.body)
                        return -ENOMEM;
        }
        *ret_data = resp.body;
        *ret_len = resp.len;
        return 0;
}

static int remote_file_write(void *userdata, const char *id, const char *fpath, const void *data,
                             size_t len, struct airlock_error *err)
{
        struct remote *rm = userdata;
        _cleanup_free_ char *path = NULL, *eid = url_encode(id, false),
                            *epath = url_encode(fpath, true);
        struct cli_response resp = { 0 };
        int r;

        if (!eid || !epath || asprintf(&path, "/v1/sessions/%s/files/%s", eid, epath) < 0)
                return -ENOMEM;
        /* An empty file still needs a body, or curl would send no PUT payload at all. */
        r = request(rm, "PUT", path, len ? data : "", len, &resp, err);
        if (r < 0)
                return r;
        r = resp.status == 200 ? 0 : reply_errno(&resp, err);
        free(resp.body);
        return r;
}

static int remote_file_list(void *userdata, const char *id, const char *dir, json_t **ret_listing,
                            struct airlock_error *err)
{
        struct remote *rm = userdata;
        _cleanup_free_ char *path = NULL, *eid = url_encode(id, false),
                            *edir = url_encode(dir ? dir : "", false);
        struct cli_response resp = { 0 };
        json_t *listing;
        int r;

        if (!eid || !edir || asprintf(&path, "/v1/sessions/%s/files?dir=%s", eid, edir) < 0)
                return -ENOMEM;
        r = request(rm, "GET", path, NULL, 0, &resp, err);
        if (r < 0)
                return r;
        if (resp.status != 200) {
                r = reply_errno(&resp, err);
                free(resp.body);
                /* The daemon answers 400 when dir is not a directory. */
                return r == -EINVAL ? -ENOTDIR : r;
        }
        listing = json_loadb(resp.body, resp.len, 0, NULL);
        free(resp.body);
        if (!json_is_object(listing)) {
                json_decref(listing);
                return airlock_error_set(err, -EBADMSG, "the daemon's listing is not JSON");
        }
        *ret_listing = listing;
        return 0;
}

static void remote_free(void *userdata)
{
        free(userdata);
}

/* Code Mode's list, from GET /v1/tools?session=ID (or ?profile=NAME): the daemon's hub is the
 * one the session's code calls. Nothing (NULL) when the daemon cannot say. */
static json_t *remote_code_tools(void *userdata, const char *id, const char *profile)
{
        struct remote *rm = userdata;
        _cleanup_free_ char *path = NULL, *value = url_encode(id        ? id
                                                              : profile ? profile
                                                                        : "default",
                                                              false);
        _cleanup_(json_decrefp) json_t *answer = NULL;
        struct cli_response resp = { 0 };

        if (!value || asprintf(&path, "/v1/tools?%s=%s", id ? "session" : "profile", value) < 0)
                return NULL;
        if (request(rm, "GET", path, NULL, 0, &resp, NULL) < 0)
                return NULL;
        if (resp.status == 200)
                answer = json_loadb(resp.body, resp.len, 0, NULL);
        free(resp.body);
        return json_is_array(json_object_get(answer, "code_tools"))
                       ? json_incref(json_object_get(answer, "code_tools"))
                       : NULL;
}

static const struct tools_backend_ops remote_ops = {
        .code_tools = remote_code_tools,
        .session_create = remote_session_create,
        .session_destroy = remote_session_destroy,
        .execute = remote_execute,
        .file_read = remote_file_read,
        .file_write = remote_file_write,
        .file_list = remote_file_list,
        .free = remote_free,
};

int tools_backend_remote_new(struct cli_client *client, struct tools_backend **ret_backend)
{
        struct tools_backend *b = calloc(1, sizeof(*b));
        struct remote *rm = calloc(1, sizeof(*rm));

        if (!b || !rm) {
                free(b);
                free(rm);
                return -ENOMEM;
        }
        rm->client = client;
        b->ops = &remote_ops;
        b->userdata = rm;
        *ret_backend = b;
        return 0;
}
