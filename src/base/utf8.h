/* Turning captured program output, which is arbitrary bytes, into text a JSON string can carry. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Returns a new NUL-terminated copy of buf[0..len) in which every byte sequence that is not
 * valid UTF-8 (overlong forms, surrogates, truncated sequences) is replaced by U+FFFD, and NUL
 * bytes by U+FFFD too. Caller frees with free(). Returns NULL only on allocation failure. */
char *utf8_sanitize(const char *buf, size_t len);

/* Whether buf[0..len) is valid UTF-8 without NUL bytes: what utf8_sanitize() returns unchanged. */
bool utf8_is_valid(const char *buf, size_t len);

/* Returns the length of the longest prefix of buf[0..len) that does not end inside a multi-byte
 * sequence, so that streamed output can be cut between characters. */
size_t utf8_complete_prefix(const char *buf, size_t len);
