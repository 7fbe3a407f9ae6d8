/* multipart/form-data uploads, as OpenAI's SDKs send them (a "file" part and small fields such
 * as "purpose"), parsed by libmicrohttpd's post processor while the body arrives on the event
 * thread: the file's bytes go straight to a spool file of the openai store (openai.h), never
 * to memory, and stop at the upload limit. The handler then takes the spooled file over. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct MHD_Connection;
struct openai;
struct api_upload;

#define API_UPLOAD_FIELDS_MAX 8
#define API_UPLOAD_FIELD_MAX 1024 /* bytes of a field's value */

/* Whether content_type (may be NULL) is multipart/form-data. */
bool api_upload_is_multipart(const char *content_type);

/* Starts receiving the body of conn (whose Content-Type is multipart/form-data) into a new
 * spool file of oa; a file part over max bytes is refused (413). Returns 0 with *ret_up, or
 * -errno: -EINVAL when the Content-Type has no usable boundary. Free with
 * api_upload_free(). */
int api_upload_new(struct MHD_Connection *conn, struct openai *oa, uint64_t max,
                   struct api_upload **ret_up);

/* Feeds a piece of the body. After a failure (see api_upload_failed) the rest is ignored. */
void api_upload_feed(struct api_upload *up, const char *data, size_t len);

/* Whether the upload was refused more than drain_max bytes ago: a client that goes on sending
 * that long after is not reading answers, and its connection is closed. */
bool api_upload_drained_past(const struct api_upload *up, uint64_t drain_max);

/* Ends the body: a multipart body that did not end with its closing boundary is refused. */
void api_upload_finish(struct api_upload *up);

/* Whether the upload was refused: then *ret_status (400, 413 or 507) and *ret_why (borrowed,
 * lives as long as up) say why. */
bool api_upload_failed(const struct api_upload *up, unsigned *ret_status, const char **ret_why);

/* The file part: whether there was one, and its spool file's path and fd (both borrowed),
 * size and the filename the client gave (borrowed). */
struct api_upload_file {
        const char *path;
        int fd;
        uint64_t size;
        const char *filename;
};
bool api_upload_file(const struct api_upload *up, struct api_upload_file *ret_file);

/* The spool file has been taken over (renamed): it is not removed at api_upload_free(). */
void api_upload_taken(struct api_upload *up);

/* The value of the field name (NUL-terminated, borrowed), or NULL when the form has none. */
const char *api_upload_field(const struct api_upload *up, const char *name);

/* The first field whose name is not in known (NULL-terminated), or NULL; the file part and
 * the fields named in known are what a handler reads. */
const char *api_upload_unknown_field(const struct api_upload *up, const char *const *known);

/* Closes and removes the spool file (unless it was taken). Accepts NULL, returns NULL. */
struct api_upload *api_upload_free(struct api_upload *up);
