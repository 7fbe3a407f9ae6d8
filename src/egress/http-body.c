/* Where a plain HTTP request's body ends (http-parse.h), so that the proxy forwards one request
 * per connection and nothing after it: Content-Length counted down, or chunked framing
 * (RFC 9112 section 7.1) followed byte by byte, chunk data skipped in bulk. */
#include "http-parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

static bool is_value_char(unsigned char c)
{
        return c == '\t' || (c >= 0x20 && c != 0x7f);
}

enum {
        CHUNK_SIZE,    /* hex digits */
        CHUNK_EXT,     /* ";name=value" up to CR */
        CHUNK_SIZE_LF, /* the size line's LF */
        CHUNK_DATA,    /* left bytes */
        CHUNK_DATA_CR, /* the CRLF after the data */
        CHUNK_DATA_LF,
        CHUNK_TRAILER,     /* at the start of a trailer line, or of the final CRLF */
        CHUNK_TRAILER_MID, /* inside a trailer line */
        CHUNK_TRAILER_LF,
        CHUNK_END_LF, /* the LF of the final CRLF */
};

void http_body_init(struct http_body *b, const struct http_request *req)
{
        *b = (struct http_body){ .done = true };
        for (size_t i = 0; i < req->n_fields; i++) {
                const struct http_field *f = &req->fields[i];

                if (f->name_len == 17 && strncasecmp(f->name, "transfer-encoding", 17) == 0) {
                        b->chunked = true;
                        b->done = false;
                } else if (f->name_len == 14 && strncasecmp(f->name, "content-length", 14) == 0) {
                        b->left = strtoull(f->value, NULL, 10);
                        b->done = b->left == 0;
                }
        }
}

/* One byte of chunked framing (not of chunk data). Returns 0 or -EBADMSG. */
static int chunk_byte(struct http_body *b, char c)
{
        int v;

        switch (b->state) {
        case CHUNK_SIZE:
                v = !isxdigit((unsigned char) c) ? -1
                    : isdigit((unsigned char) c) ? c - '0'
                                                 : tolower((unsigned char) c) - 'a' + 10;
                if (v >= 0 && b->digits < 15) {
                        b->left = b->left * 16 + (uint64_t) v;
                        b->digits++;
                        return 0;
                }
                if (b->digits == 0)
                        return -EBADMSG;
                if (c == '\r') {
                        b->state = CHUNK_SIZE_LF;
                        return 0;
                }
                if (c != ';' && c != ' ' && c != '\t')
                        return -EBADMSG;
                b->state = CHUNK_EXT;
                return 0;
        case CHUNK_EXT:
                if (c == '\r')
                        b->state = CHUNK_SIZE_LF;
                else if (!is_value_char((unsigned char) c))
                        return -EBADMSG;
                return 0;
        case CHUNK_SIZE_LF:
                if (c != '\n')
                        return -EBADMSG;
                b->state = b->left ? CHUNK_DATA : CHUNK_TRAILER;
                return 0;
        case CHUNK_DATA_CR:
                if (c != '\r')
                        return -EBADMSG;
                b->state = CHUNK_DATA_LF;
                return 0;
        case CHUNK_DATA_LF:
                if (c != '\n')
                        return -EBADMSG;
                b->state = CHUNK_SIZE;
                b->digits = 0;
                b->left = 0;
                return 0;
        case CHUNK_TRAILER:
                b->state = c == '\r' ? CHUNK_END_LF : CHUNK_TRAILER_MID;
                return c == '\n' ? -EBADMSG : 0;
        case CHUNK_TRAILER_MID:
                if (c == '\r')
                        b->state = CHUNK_TRAILER_LF;
                else if (!is_value_char((unsigned char) c))
                        return -EBADMSG;
                return 0;
        case CHUNK_TRAILER_LF:
                if (c != '\n')
                        return -EBADMSG;
                b->state = CHUNK_TRAILER;
                return 0;
        case CHUNK_END_LF:
                if (c != '\n')
                        return -EBADMSG;
                b->done = true;
                return 0;
        default:
                return -EBADMSG;
        }
}

ssize_t http_body_feed(struct http_body *b, const char *data, size_t len)
{
        size_t i = 0;

        if (!b->chunked) {
                size_t n = b->left < len ? (size_t) b->left : len;

                if (b->done)
                        return 0;
                b->left -= n;
                b->done = b->left == 0;
                return (ssize_t) n;
        }
        while (i < len && !b->done) {
                if (b->state == CHUNK_DATA) {
                        size_t n = b->left < len - i ? (size_t) b->left : len - i;

                        i += n;
                        b->left -= n;
                        if (b->left == 0)
                                b->state = CHUNK_DATA_CR;
                        continue;
                }
                if (chunk_byte(b, data[i++]) < 0)
                        return -EBADMSG;
        }
        return (ssize_t) i;
}
