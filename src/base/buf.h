/* Growing byte buffers with a hard limit, for data whose size another party decides (HTTP
 * replies, captured output). The data is always NUL-terminated past len, so text can be used
 * as a string; it may contain NULs itself. */
#pragma once

#include <stddef.h>

struct buf {
        char *data; /* NULL until the first append */
        size_t len;
        size_t size; /* allocated, including the terminator */
};

/* Appends n bytes of p. Returns 0; -E2BIG when len + n would pass max (nothing is appended,
 * so the caller can say the reply was too large); -ENOMEM. */
int buf_append(struct buf *b, const void *p, size_t n, size_t max);

/* Frees the data and empties b. */
void buf_done(struct buf *b);
