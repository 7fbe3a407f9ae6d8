/* Receiving a multipart/form-data upload: libmicrohttpd's post processor splits the parts as
 * the body arrives, the "file" part is appended to a spool file of the openai store and the
 * other fields are kept (a few, small). Every limit is checked as the bytes come: the file's
 * size (--max-upload), the number and size of fields, the filename's length. The first
 * problem is kept and the rest of the body is only drained, so a refused upload costs
 * neither disk nor memory. */
#include "upload.h"

#include "base/cleanup.h"
#include "base/util.h"
#include "openai/openai.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Room for the part headers libmicrohttpd buffers (Content-Disposition with the filename). */
#define POST_BUFFER_SIZE (16u * 1024u)
#define FIELD_NAME_MAX 63

struct upload_field {
        char name[FIELD_NAME_MAX + 1];
        char value[API_UPLOAD_FIELD_MAX + 1];
        size_t len;
};

struct api_upload {
        struct MHD_PostProcessor *pp;
        int fd;
        char *path;
        uint64_t max, size;
        uint64_t fed, failed_at; /* body bytes fed, and how many when it was refused */
        bool has_file, taken;
        char filename[OPENAI_FILENAME_MAX + 1];
        unsigned status; /* 0 until something is refused */
        char why[320];
        struct upload_field fields[API_UPLOAD_FIELDS_MAX];
        unsigned n_fields;
};

static enum MHD_Result fail(struct api_upload *up, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Keeps the first refusal; the spool's bytes are dropped at once, not at the end. */
static enum MHD_Result fail(struct api_upload *up, unsigned status, const char *fmt, ...)
{
        va_list ap;

        if (up->status)
                return MHD_NO;
        up->status = status;
        up->failed_at = up->fed;
        va_start(ap, fmt);
        (void) vsnprintf(up->why, sizeof(up->why), fmt, ap);
        va_end(ap);
        if (up->fd >= 0)
                (void) ftruncate(up->fd, 0);
        return MHD_NO;
}

bool api_upload_is_multipart(const char *content_type)
{
        static const char mt[] = "multipart/form-data";

        if (!content_type)
                return false;
        while (*content_type == ' ' || *content_type == '\t')
                content_type++;
        return strncasecmp(content_type, mt, sizeof(mt) - 1) == 0 &&
               strchr("; \t", content_type[sizeof(mt) - 1]);
}

static enum MHD_Result on_file_data(struct api_upload *up, const char *filename, const char *data,
                                    uint64_t off, size_t size)
{
        int r;

        if (off == 0 && !up->has_file) {
                if (!filename)
                        return fail(up, 400,
                                    "the 'file' part has no filename (send it as a file, e.g. "
                                    "curl -F file=@data.csv)");
                if (strlen(filename) > OPENAI_FILENAME_MAX)
                        return fail(up, 400, "the file's name is longer than %d bytes",
                                    OPENAI_FILENAME_MAX);
                memcpy(up->filename, filename, strlen(filename) + 1);
                up->has_file = true;
        } else if (off == 0 && size > 0 && up->size > 0) {
                return fail(up, 400, "the form has more than one 'file' part");
        }
        if (size == 0)
                return MHD_YES;
        if (size > up->max - up->size)
                return fail(up, 413,
                            "the file is larger than the upload limit of %llu bytes (airlock "
                            "serve --max-upload)",
                            (unsigned long long) up->max);
        r = write_full(up->fd, data, size);
        if (r == -ENOSPC || r == -EDQUOT)
                return fail(up, 507, "no room on the daemon's disk for the upload");
        if (r < 0)
                return fail(up, 500, "cannot store the upload: %s", strerror(-r));
        up->size += size;
        return MHD_YES;
}

static enum MHD_Result on_field_data(struct api_upload *up, const char *key, const char *data,
                                     uint64_t off, size_t size)
{
        struct upload_field *f = NULL;

        if (strlen(key) > FIELD_NAME_MAX)
                return fail(up, 400, "a form field's name is longer than %d bytes", FIELD_NAME_MAX);
        for (unsigned i = 0; i < up->n_fields; i++)
                if (strcmp(up->fields[i].name, key) == 0)
                        f = &up->fields[i];
        if (f && off == 0 && f->len > 0)
                return fail(up, 400, "the form field '%s' is given twice", key);
        if (!f) {
                if (up->n_fields >= API_UPLOAD_FIELDS_MAX)
                        return fail(up, 400, "the form has more than %d fields",
                                    API_UPLOAD_FIELDS_MAX);
                f = &up->fields[up->n_fields++];
                memcpy(f->name, key, strlen(key) + 1);
        }
        if (size > API_UPLOAD_FIELD_MAX - f->len)
                return fail(up, 400, "the form field '%s' is longer than %d bytes", key,
                            API_UPLOAD_FIELD_MAX);
        memcpy(f->value + f->len, data, size);
        f->len += size;
        f->value[f->len] = '\0';
        return MHD_YES;
}

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *content_type,
                               const char *transfer_encoding, const char *data, uint64_t off,
                               size_t size)
{
        struct api_upload *up = cls;

        (void) kind;
        (void) content_type;
        (void) transfer_encoding;
        if (up->status)
                return MHD_NO;
        if (!key)
                return fail(up, 400, "a form part has no name");
        if (strcmp(key, "file") == 0)
                return on_file_data(up, filename, data, off, size);
        if (filename)
                return fail(up, 400,
                            "unexpected file part '%.64s': the file goes in the part "
                            "named 'file'",
                            key);
        return on_field_data(up, key, data, off, size);
}

int api_upload_new(struct MHD_Connection *conn, struct openai *oa, uint64_t max,
                   struct api_upload **ret_up)
{
        struct api_upload *up;
        int r;

        up = calloc(1, sizeof(*up));
        if (!up)
                return -ENOMEM;
        up->fd = -EBADF;
        up->max = max;
        r = openai_spool_new(oa, &up->fd, &up->path);
        if (r < 0) {
                api_upload_free(up);
                return r;
        }
        /* It reads the boundary from the request's Content-Type itself. */
        up->pp = MHD_create_post_processor(conn, POST_BUFFER_SIZE, on_part, up);
        if (!up->pp) {
                api_upload_free(up);
                return -EINVAL;
        }
        *ret_up = up;
        return 0;
}

void api_upload_feed(struct api_upload *up, const char *data, size_t len)
{
        up->fed += len;
        if (up->status || !up->pp)
                return;
        if (MHD_post_process(up->pp, data, len) != MHD_YES)
                (void) fail(up, 400, "the multipart/form-data body is malformed");
}

bool api_upload_drained_past(const struct api_upload *up, uint64_t drain_max)
{
        return up->status && up->fed - up->failed_at > drain_max;
}

void api_upload_finish(struct api_upload *up)
{
        enum MHD_Result ok;

        if (!up->pp)
                return;
        ok = MHD_destroy_post_processor(up->pp);
        up->pp = NULL;
        if (ok != MHD_YES)
                (void) fail(up, 400,
                            "the multipart/form-data body is malformed or does not end with its "
                            "closing boundary");
}

bool api_upload_failed(const struct api_upload *up, unsigned *ret_status, const char **ret_why)
{
        if (!up->status)
                return false;
        *ret_status = up->status;
        *ret_why = up->why;
        return true;
}

bool api_upload_file(const struct api_upload *up, struct api_upload_file *ret_file)
{
        if (!up->has_file)
                return false;
        *ret_file = (struct api_upload_file){
                .path = up->path, .fd = up->fd, .size = up->size, .filename = up->filename
        };
        return true;
}

void api_upload_taken(struct api_upload *up)
{
        up->taken = true;
}

const char *api_upload_field(const struct api_upload *up, const char *name)
{
        for (unsigned i = 0; i < up->n_fields; i++)
                if (strcmp(up->fields[i].name, name) == 0)
                        return up->fields[i].value;
        return NULL;
}

const char *api_upload_unknown_field(const struct api_upload *up, const char *const *known)
{
        for (unsigned i = 0; i < up->n_fields; i++) {
                bool found = false;

                for (const char *const *k = known; *k && !found; k++)
                        found = strcmp(up->fields[i].name, *k) == 0;
                if (!found)
                        return up->fields[i].name;
        }
        return NULL;
}

struct api_upload *api_upload_free(struct api_upload *up)
{
        if (!up)
                return NULL;
        if (up->pp)
                (void) MHD_destroy_post_processor(up->pp);
        up->fd = safe_close_fd(up->fd);
        if (up->path && !up->taken)
                (void) unlink(up->path);
        free(up->path);
        free(up);
        return NULL;
}
