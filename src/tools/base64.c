/* Base64 codec (see base64.h). Small and strict: a stray character is an error, not skipped,
 * so a model that sends text where base64 was declared learns it. */
#include "base64.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const void *data, size_t len)
{
        const unsigned char *in = data;
        size_t n = 4 * ((len + 2) / 3), o = 0;
        char *out;

        if (len > (SIZE_MAX / 4) * 3 - 3)
                return NULL;
        out = malloc(n + 1);
        if (!out)
                return NULL;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16;
                if (i + 1 < len)
                        v |= (uint32_t) in[i + 1] << 8;
                if (i + 2 < len)
                        v |= in[i + 2];
                out[o++] = alphabet[(v >> 18) & 63];
                out[o++] = alphabet[(v >> 12) & 63];
                out[o++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
                out[o++] = i + 2 < len ? alphabet[v & 63] : '=';
        }
        out[o] = '\0';
        return out;
}

static int sextet(char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int base64_decode(const char *text, size_t text_len, char **ret_data, size_t *ret_len)
{
        unsigned char *out = malloc(text_len / 4 * 3 + 4);
        uint32_t acc = 0;
        size_t o = 0, pad = 0;
        int bits = 0;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < text_len; i++) {
                char c = text[i];
                int v;

                if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
                        continue;
                if (c == '=') {
                        pad++;
                        continue;
                }
                v = sextet(c);
                /* Data after padding, or a character outside the alphabet. */
                if (v < 0 || pad > 0) {
                        free(out);
                        return -EINVAL;
                }
                acc = (acc << 6) | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[o++] = (unsigned char) (acc >> bits);
                        acc &= (1u << bits) - 1;
                }
        }
        /* 6 leftover bits cannot be the end of any byte sequence (a lone final character). */
        if (bits >= 6 || pad > 2) {
                free(out);
                return -EINVAL;
        }
        out[o] = '\0';
        *ret_data = (char *) out;
        *ret_len = o;
        return 0;
}
