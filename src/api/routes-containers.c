/* /v1/containers and /v1/containers/{id}/files: OpenAI's Containers API, answered in its
 * shapes (errors included) so that its SDKs work unchanged. This file reads requests and
 * sends answers; what a container is lives in src/openai (openai.h). A container's profile
 * may be chosen with the X-Airlock-Profile header, as for the chat gateway. */
#include "api-internal.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "chat/gateway.h"
#include "upload.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* file_ids a container may be created with at most. */
#define CONTAINER_FILE_IDS_MAX 100

/* The body as a JSON object, or NULL with a 400 queued (*ret_r: its result). */
static json_t *body_object(struct api_request *req, const char *what, int *ret_r)
{
        json_error_t jerr;
        json_t *body;

        body = json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES, &jerr);
        if (json_is_object(body))
                return body;
        json_decref(body);
        *ret_r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, NULL,
                                 "the body must be a JSON object (%s): %s", what,
                                 req->body_len ? jerr.text : "the body is empty");
        return NULL;
}

/* expires_after {anchor: "last_active_at", minutes}; 0 with *ret_minutes, or a 400 reply
 * (returns 1, *ret_r its result). */
static int parse_expires_after(struct api_request *req, json_t *v, unsigned *ret_minutes,
                               int *ret_r)
{
        json_t *anchor = json_object_get(v, "anchor"), *minutes = json_object_get(v, "minutes");
        const char *key;
        json_t *member;

        if (!json_is_object(v)) {
                *ret_r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "expires_after",
                                         "expires_after must be an object {anchor, minutes}");
                return 1;
        }
        json_object_foreach (v, key, member) {
                if (strcmp(key, "anchor") != 0 && strcmp(key, "minutes") != 0) {
                        *ret_r =
                                api_reply_error(req, MHD_HTTP_BAD_REQUEST, "expires_after",
                                                "expires_after has an unknown member '%.64s'", key);
                        return 1;
                }
        }
        if (!json_is_string(anchor) || strcmp(json_string_value(anchor), "last_active_at") != 0) {
                *ret_r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "expires_after.anchor",
                                         "expires_after.anchor must be \"last_active_at\" (the "
                                         "only anchor there is)");
                return 1;
        }
        if (!json_is_integer(minutes) || json_integer_value(minutes) < 1 ||
            json_integer_value(minutes) > 24 * 60) {
                *ret_r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "expires_after.minutes",
                                         "expires_after.minutes must be an integer from 1 to "
                                         "1440 (24 hours)");
                return 1;
        }
        *ret_minutes = (unsigned) json_integer_value(minutes);
        return 0;
}

/* Checks the members of a create request into o (strings borrowed from body, file ids in
 * *ret_ids). Returns 0, or 1 when a 400 was queued (*ret_r its result). */
static int parse_create(struct api_request *req, json_t *body, struct openai_container_options *o,
                        char ***ret_ids, int *ret_r)
{
        const char *key;
        json_t *v;

        json_object_foreach (body, key, v) {
                if (strcmp(key, "name") == 0) {
                        if (!json_is_string(v))
                                goto bad_type;
                        o->name = json_string_value(v);
                } else if (strcmp(key, "memory_limit") == 0) {
                        if (!json_is_string(v))
                                goto bad_type;
                        o->memory_limit = json_string_value(v);
                } else if (strcmp(key, "expires_after") == 0) {
                        if (parse_expires_after(req, v, &o->expires_after_minutes, ret_r))
                                return 1;
                } else if (strcmp(key, "file_ids") == 0) {
                        size_t i, n = json_array_size(v);
                        json_t *id;

                        if (!json_is_array(v) || n > CONTAINER_FILE_IDS_MAX)
                                goto bad_type;
                        *ret_ids = calloc(n + 1, sizeof(char *));
                        if (!*ret_ids)
                                return -ENOMEM;
                        json_array_foreach (v, i, id) {
                                if (!json_is_string(id))
                                        goto bad_type;
                                (*ret_ids)[i] = (char *) json_string_value(id);
                        }
                } else if (strcmp(key, "network_policy") == 0) {
                        json_t *type = json_object_get(v, "type");

                        /* The sandbox's network is its profile's (docs/PROFILES.md). */
                        if (!json_is_string(type) ||
                            strcmp(json_string_value(type), "disabled") != 0) {
                                *ret_r = api_reply_error(
                                        req, MHD_HTTP_BAD_REQUEST, "network_policy",
                                        "network_policy: only {\"type\": \"disabled\"} is "
                                        "supported; a container's network is its profile's "
                                        "(none in the shipped profiles)");
                                return 1;
                        }
                } else if (strcmp(key, "skills") == 0) {
                        if (!json_is_array(v) || json_array_size(v) > 0) {
                                *ret_r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "skills",
                                                         "skills are not supported by airlock");
                                return 1;
                        }
                } else {
                        *ret_r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, key,
                                                 "Unrecognized request argument supplied: %.64s",
                                                 key);
                        return 1;
                }
                continue;
        bad_type:
                *ret_r = api_reply_error(
                        req, MHD_HTTP_BAD_REQUEST, key, "%s must be %s, not %s", key,
                        strcmp(key, "file_ids") == 0 ? "an array of at most 100 file ids"
                                                     : "a string",
                        json_type_name(v));
                return 1;
        }
        if (!o->name) {
                *ret_r = api_reply_error(req, MHD_HTTP_BAD_REQUEST, "name",
                                         "name is required (a string)");
                return 1;
        }
        return 0;
}

int api_handle_container_create(struct api_request *req)
{
        struct openai_container_options o = {};
        _cleanup_(json_decrefp) json_t *body = NULL;
        _cleanup_free_ char **ids = NULL;
        struct openai_error e = {};
        char cid[OPENAI_CONTAINER_ID_MAX + 1];
        json_t *obj = NULL;
        int r, sent = 0;

        r = api_openai_check(req);
        if (r <= 0)
                return r;
        body = body_object(req, "a container: {name, file_ids?, expires_after?, memory_limit?}",
                           &r);
        if (!body)
                return r;
        r = parse_create(req, body, &o, &ids, &sent);
        if (r != 0)
                return r < 0 ? r : sent;
        o.file_ids = ids;
        o.profile = api_header(req, CHAT_GATEWAY_PROFILE_HEADER);
        if (o.profile && (!*o.profile || strlen(o.profile) >= CHAT_GATEWAY_NAME_MAX))
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, NULL,
                                       "%s must be a profile name of 1 to %d characters",
                                       CHAT_GATEWAY_PROFILE_HEADER, CHAT_GATEWAY_NAME_MAX - 1);
        r = openai_container_create(req->srv->openai, &o, cid, &e);
        if (r >= 0)
                r = openai_container_get(req->srv->openai, cid, &obj, &e);
        return api_reply_openai_result(req, r, obj, &e);
}

int api_handle_container_list(struct api_request *req)
{
        return api_openai_list(req, API_OPENAI_LIST_CONTAINERS);
}

int api_handle_container_get(struct api_request *req)
{
        return api_openai_by_id(req, openai_container_get);
}

int api_handle_container_delete(struct api_request *req)
{
        return api_openai_by_id(req, openai_container_delete);
}

/* POST .../files with a JSON body: {"file_id": "file-..."}. */
static int cfile_copy(struct api_request *req)
{
        _cleanup_(json_decrefp) json_t *body = NULL;
        struct openai_error e = {};
        json_t *obj = NULL, *id;
        const char *key;
        json_t *v;
        int r;

        body = body_object(req,
                           "{\"file_id\": \"file-...\"}, or send the file as multipart/form-data "
                           "in a part named 'file'",
                           &r);
        if (!body)
                return r;
        json_object_foreach (body, key, v) {
                if (strcmp(key, "file_id") != 0)
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, key,
                                               "Unrecognized request argument supplied: %.64s",
                                               key);
        }
        id = json_object_get(body, "file_id");
        if (!json_is_string(id))
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "file_id",
                                       "file_id is required (a string), or send the file as "
                                       "multipart/form-data in a part named 'file'");
        r = openai_container_file_copy(req->srv->openai, req->params.id, json_string_value(id),
                                       &obj, &e);
        return api_reply_openai_result(req, r, obj, &e);
}

int api_handle_cfile_create(struct api_request *req)
{
        static const char *const known[] = { "file_id", NULL };
        struct api_upload_file f;
        struct openai_error e = {};
        const char *unknown, *file_id;
        json_t *obj = NULL;
        int r;

        r = api_openai_check(req);
        if (r <= 0)
                return r;
        if (!req->upload)
                return cfile_copy(req);
        unknown = api_upload_unknown_field(req->upload, known);
        if (unknown)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, unknown,
                                       "Unrecognized request argument supplied: %.64s", unknown);
        file_id = api_upload_field(req->upload, "file_id");
        if (api_upload_file(req->upload, &f)) {
                if (file_id)
                        return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "file_id",
                                               "give either a file or a file_id, not both");
                r = openai_container_file_add(req->srv->openai, req->params.id, f.filename, f.fd,
                                              f.size, &obj, &e);
        } else if (file_id) {
                r = openai_container_file_copy(req->srv->openai, req->params.id, file_id, &obj, &e);
        } else {
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "file",
                                       "the form has no part named 'file' (nor a file_id)");
        }
        return api_reply_openai_result(req, r, obj, &e);
}

int api_handle_cfile_list(struct api_request *req)
{
        return api_openai_list(req, API_OPENAI_LIST_CONTAINER_FILES);
}

int api_handle_cfile_get(struct api_request *req)
{
        return api_openai_by_ids(req, openai_container_file_get);
}

int api_handle_cfile_content(struct api_request *req)
{
        return api_openai_content(req, true);
}

int api_handle_cfile_delete(struct api_request *req)
{
        return api_openai_by_ids(req, openai_container_file_delete);
}
