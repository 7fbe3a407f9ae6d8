/* Base64 (RFC 4648, standard alphabet, padded) for file contents: write_file's "base64"
 * encoding, binary files read back, MCP blob resources. */
#pragma once

#include <stddef.h>

/* Encodes len bytes. Returns a new NUL-terminated string (caller frees), NULL on allocation
 * failure. */
char *base64_encode(const void *data, size_t len);

/* Decodes text (whitespace such as line breaks is skipped; padding is optional). Returns 0
 * with a new buffer (NUL-terminated for convenience; caller frees) and its length, -EINVAL for
 * a character outside the alphabet or a malformed end, -ENOMEM. */
int base64_decode(const char *text, size_t text_len, char **ret_data, size_t *ret_len);
