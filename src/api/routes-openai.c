/* What the OpenAI-compatible routes (routes-containers.c, routes-openai-files.c) share: the
 * check that the daemon has the openai layer, their list parameters, and handlers that are a
 * call to openai.h by id and an answer in OpenAI's shapes. */
#include "api-internal.h"
#include "cluster-list.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int api_openai_check(struct api_request *req)
{
        int r;

        if (req->srv->openai)
                return 1;
        r = api_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, NULL,
                            "the Files and Containers APIs are off in this daemon");
        return r < 0 ? r : 0;
}

/* One query argument, percent-decoded into buf; NULL when absent, "" with *ret_bad when it
 * is malformed or longer than size. */
static const char *query_arg(struct api_request *req, const char *name, char *buf, size_t size,
                             bool *ret_bad)
{
        const char *raw = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);

        if (!raw)
                return NULL;
        if (percent_decode(raw, strlen(raw), true, buf, size) < 0) {
                *ret_bad = true;
                return "";
        }
        return buf;
}

int api_openai_list_query(struct api_request *req, bool with_name, bool with_purpose,
                          struct api_list_args *ret)
{
        char limit[16], order[8];
        const char *v;
        bool bad = false;
        int r;

        *ret = (struct api_list_args){};
        v = query_arg(req, "limit", limit, sizeof(limit), &bad);
        if (v) {
                char *end;
                unsigned long n;

                errno = 0;
                n = strtoul(v, &end, 10);
                if (bad || !*v || *end || errno || v[0] == '-' || n == 0 || n > 100000) {
                        r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "limit",
                                            "limit must be a positive integer");
                        return r < 0 ? r : 0;
                }
                ret->q.limit = (unsigned) n;
        }
        v = query_arg(req, "order", order, sizeof(order), &bad);
        if (v && strcmp(v, "asc") != 0 && strcmp(v, "desc") != 0) {
                r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "order",
                                    "order must be 'asc' or 'desc'");
                return r < 0 ? r : 0;
        }
        ret->q.ascending = v && strcmp(v, "asc") == 0;
        ret->q.after = query_arg(req, "after", ret->after, sizeof(ret->after), &bad);
        if (with_name)
                ret->q.name = query_arg(req, "name", ret->name, sizeof(ret->name), &bad);
        if (with_purpose)
                ret->q.purpose =
                        query_arg(req, "purpose", ret->purpose, sizeof(ret->purpose), &bad);
        if (bad) {
                r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, NULL,
                                    "a query parameter is too long or has a malformed "
                                    "percent-escape");
                return r < 0 ? r : 0;
        }
        return 1;
}

int api_openai_list(struct api_request *req, enum api_openai_list what)
{
        struct openai_error e = {};
        struct api_list_args a;
        json_t *list = NULL;
        int r;

        r = api_openai_check(req);
        if (r > 0)
                r = api_openai_list_query(req, what == API_OPENAI_LIST_CONTAINERS,
                                          what == API_OPENAI_LIST_FILES, &a);
        if (r <= 0)
                return r;
        switch (what) {
        case API_OPENAI_LIST_CONTAINERS:
                r = openai_container_list(req->srv->openai, &a.q, &list, &e);
                break;
        case API_OPENAI_LIST_CONTAINER_FILES:
                r = openai_container_files(req->srv->openai, req->params.id, &a.q, &list, &e);
                break;
        case API_OPENAI_LIST_FILES:
                r = openai_file_list(req->srv->openai, &a.q, &list, &e);
                break;
        }
        if (r >= 0 && what != API_OPENAI_LIST_CONTAINER_FILES)
                return api_reply_cluster_list(req, list, CLUSTER_LIST_OPENAI);
        return api_reply_openai_result(req, r, list, &e);
}

int api_reply_openai_result(struct api_request *req, int r, json_t *obj,
                            const struct openai_error *err)
{
        if (r < 0 && err->status)
                return api_reply_openai_error(req, err);
        if (r < 0)
                return r;
        return api_reply_json(req, MHD_HTTP_OK, obj);
}

int api_openai_by_id(struct api_request *req, api_openai_by_id_fn fn)
{
        struct openai_error e = {};
        json_t *obj = NULL;
        int r;

        r = api_openai_check(req);
        if (r <= 0)
                return r;
        r = fn(req->srv->openai, req->params.id, &obj, &e);
        return api_reply_openai_result(req, r, obj, &e);
}

int api_openai_by_ids(struct api_request *req, api_openai_by_ids_fn fn)
{
        struct openai_error e = {};
        json_t *obj = NULL;
        int r;

        r = api_openai_check(req);
        if (r <= 0)
                return r;
        r = fn(req->srv->openai, req->params.id, req->params.sub, &obj, &e);
        return api_reply_openai_result(req, r, obj, &e);
}

int api_openai_content(struct api_request *req, bool container_file)
{
        struct openai_error e = {};
        uint64_t size = 0;
        int r, fd = -EBADF;

        r = api_openai_check(req);
        if (r <= 0)
                return r;
        r = container_file
                    ? openai_container_file_open(req->srv->openai, req->params.id, req->params.sub,
                                                 &fd, &size, &e)
                    : openai_file_open(req->srv->openai, req->params.id, &fd, &size, NULL, &e);
        if (r < 0)
                return api_reply_openai_result(req, r, NULL, &e);
        return api_reply_fd(req, MHD_HTTP_OK, fd, size, "application/octet-stream");
}
