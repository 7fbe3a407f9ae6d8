/* Refuses request headers whose values hold a NUL or another control byte.
 *
 * libmicrohttpd 0.9.75 (Debian 12's) keeps header values as C strings: "Authorization: Bearer
 * <token>\0junk" reaches its users as "Bearer <token>", with the length cut at the NUL. What was
 * after the NUL is still in its buffer, though: the header block is kept in place, each line's
 * end and each colon overwritten with zero bytes, and MHD reports the block's size. So the
 * check walks the block: every header must sit exactly where the previous line ended, its
 * value right after the colon and optional spaces, and nothing but line-end zeros may lie
 * between a value's end and the next name. Anything else was hidden behind a NUL.
 *
 * One case looks the same as a clean line and passes: a NUL as the very last byte of a value on
 * a line that ends in a bare LF ("...\0\n" reads like "...\r\n"). Nothing follows such a NUL, so
 * the value seen is exactly the one sent. When the header storage does not have the layout
 * above (another libmicrohttpd version), the NUL check is skipped and said so once in the log;
 * the control-byte check always runs. */
#pragma once

#include <microhttpd.h>

/* method: the pointer libmicrohttpd passed to the access handler (the start of the header
 * block). Returns 0 when the headers are clean, else -EINVAL with *ret_header set to the
 * offending header's name (valid while the request lives) and *ret_why to the reason. */
int api_headers_check(struct MHD_Connection *conn, const char *method, const char **ret_header,
                      const char **ret_why);
