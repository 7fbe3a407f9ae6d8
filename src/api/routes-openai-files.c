/* /v1/files: OpenAI's Files API, so that "file_ids" of a container (or a Responses request)
 * name files that were uploaded before. An upload is multipart/form-data ("file" and
 * "purpose"), spooled to disk as it arrives (upload.h) and handed to the store in src/openai;
 * this file reads requests and sends answers in OpenAI's shapes. */
#include "api-internal.h"

#include "upload.h"

#include <errno.h>
#include <string.h>

int api_handle_ofile_create(struct api_request *req)
{
        static const char *const known[] = { "purpose", NULL };
        struct api_upload_file f;
        struct openai_error e = {};
        const char *unknown;
        json_t *obj = NULL;
        int r;

        r = api_openai_check(req);
        if (r <= 0)
                return r;
        if (!req->upload)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "file",
                                       "POST /v1/files takes multipart/form-data with a part "
                                       "'file' (the file) and a field 'purpose'");
        unknown = api_upload_unknown_field(req->upload, known);
        if (unknown)
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, unknown,
                                       "Unrecognized request argument supplied: %.64s (files "
                                       "are kept until they are deleted)",
                                       unknown);
        if (!api_upload_file(req->upload, &f))
                return api_reply_error(req, MHD_HTTP_BAD_REQUEST, "file",
                                       "the form has no part named 'file'");
        r = openai_file_create(req->srv->openai, f.path, f.size, f.filename,
                               api_upload_field(req->upload, "purpose"), &obj, &e);
        if (r >= 0)
                api_upload_taken(req->upload);
        return api_reply_openai_result(req, r, obj, &e);
}

int api_handle_ofile_list(struct api_request *req)
{
        return api_openai_list(req, API_OPENAI_LIST_FILES);
}

int api_handle_ofile_get(struct api_request *req)
{
        return api_openai_by_id(req, openai_file_get);
}

int api_handle_ofile_content(struct api_request *req)
{
        return api_openai_content(req, false);
}

int api_handle_ofile_delete(struct api_request *req)
{
        return api_openai_by_id(req, openai_file_delete);
}
