/* See buf.h. */
#include "buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int buf_append(struct buf *b, const void *p, size_t n, size_t max)
{
        if (n > max || b->len > max - n)
                return -E2BIG;
        if (b->len + n + 1 > b->size) {
                size_t size = b->size ? b->size : 16384;
                char *d;

                while (size < b->len + n + 1)
                        size *= 2;
                d = realloc(b->data, size);
                if (!d)
                        return -ENOMEM;
                b->data = d;
                b->size = size;
        }
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

void buf_done(struct buf *b)
{
        free(b->data);
        b->data = NULL;
        b->len = b->size = 0;
}
