/* The walk of header-check.h. The headers come in the order they were received
 * (MHD_get_connection_values_n keeps insertion order), each with pointers into the block. */
#include "header-check.h"

#include "base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct walk {
        const char *start, *end; /* the header block */
        const char *pos;       /* where the next header's name must begin; NULL before the first */
        const char *value_end; /* of the last header seen */
        bool layout_known;
        const char *bad_header, *why;
};

static bool is_control(unsigned char c)
{
        return (c < 0x20 && c != '\t') || c == 0x7f;
}

/* Past a value: its terminating zero, and the line end's other zero (CRLF) if there is one. */
static const char *skip_line_end(const char *p, const char *end)
{
        for (int n = 0; n < 2 && p < end && *p == '\0'; n++)
                p++;
        return p;
}

static enum MHD_Result check_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
        struct walk *w = cls;
        const char *p;

        (void) kind;
        for (size_t i = 0; i < key_size; i++)
                if (is_control((unsigned char) key[i])) {
                        w->bad_header = key;
                        w->why = "a header name holds a control byte";
                        return MHD_NO;
                }
        for (size_t i = 0; i < value_size; i++)
                if (is_control((unsigned char) value[i])) {
                        w->bad_header = key;
                        w->why = "a header value holds a control byte";
                        return MHD_NO;
                }
        if (!w->layout_known)
                return MHD_YES;

        if (!w->pos) {
                if (key <= w->start || key >= w->end) {
                        w->layout_known = false;
                        return MHD_YES;
                }
                w->pos = key;
        }
        if (key != w->pos) {
                w->bad_header = key;
                w->why = "the header line before it holds a NUL byte";
                return MHD_NO;
        }
        /* name, the colon (now a zero), optional spaces or tabs, the value */
        p = key + key_size;
        if (p >= w->end || *p != '\0') {
                w->layout_known = false;
                return MHD_YES;
        }
        p++;
        while (p < value && (*p == ' ' || *p == '\t'))
                p++;
        if (p != value || value + value_size >= w->end) {
                w->layout_known = false;
                return MHD_YES;
        }
        w->value_end = value + value_size;
        w->pos = skip_line_end(w->value_end, w->end);
        return MHD_YES;
}

int api_headers_check(struct MHD_Connection *conn, const char *method, const char **ret_header,
                      const char **ret_why)
{
        static atomic_bool warned;
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        struct walk w = { .layout_known = ci && method };

        if (w.layout_known) {
                w.start = method;
                w.end = method + ci->header_size;
        }
        (void) MHD_get_connection_values_n(conn, MHD_HEADER_KIND, check_one, &w);
        if (!w.bad_header && w.layout_known && w.value_end) {
                /* After the last value: its line end and the empty line's, one or two zeros
                 * each, then the end of the block. */
                const char *p = w.value_end;
                while (p < w.end && *p == '\0')
                        p++;
                if (p != w.end || p - w.value_end < 2 || p - w.value_end > 4) {
                        w.bad_header = "(the last header)";
                        w.why = "the last header line holds a NUL byte";
                }
        }
        if (!w.layout_known && !atomic_exchange(&warned, true))
                log_warn("this libmicrohttpd keeps headers in an unknown layout: header values "
                         "with a NUL byte cannot be told apart and are not refused");
        if (w.bad_header) {
                *ret_header = w.bad_header;
                *ret_why = w.why;
                return -EINVAL;
        }
        return 0;
}
