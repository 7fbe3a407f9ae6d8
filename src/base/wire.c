/* Length-prefixed JSON frames; see wire.h. */
#include "wire.h"

#include "cleanup.h"
#include "util.h"

#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

int wire_send(int fd, const json_t *obj)
{
        _cleanup_free_ char *text = NULL;
        uint32_t len_le;
        size_t len;
        int r;

        text = json_dumps(obj, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        len = strlen(text);
        if (len > WIRE_FRAME_MAX)
                return -E2BIG;
        len_le = htole32((uint32_t) len);
        r = write_full(fd, &len_le, sizeof(len_le));
        if (r < 0)
                return r;
        return write_full(fd, text, len);
}

int wire_recv(int fd, size_t max, json_t **ret_obj)
{
        _cleanup_free_ char *buf = NULL;
        json_error_t jerr;
        uint32_t len_le;
        size_t len;
        json_t *obj;
        int r;

        /* EOF before the first byte is the peer closing between frames; EOF inside the length
         * prefix is a truncated frame. */
        r = read_full(fd, &len_le, 1);
        if (r < 0)
                return r;
        r = read_full(fd, (char *) &len_le + 1, sizeof(len_le) - 1);
        if (r < 0)
                return r == -EPIPE ? -EBADMSG : r;
        len = le32toh(len_le);
        if (len > max || len > WIRE_FRAME_MAX)
                return -E2BIG;
        buf = malloc(len + 1);
        if (!buf)
                return -ENOMEM;
        r = read_full(fd, buf, len);
        if (r < 0)
                return r == -EPIPE ? -EBADMSG : r;
        obj = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!obj)
                return -EBADMSG;
        if (!json_is_object(obj)) {
                json_decref(obj);
                return -EBADMSG;
        }
        *ret_obj = obj;
        return 0;
}
