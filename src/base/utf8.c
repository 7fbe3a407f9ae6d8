/* UTF-8 validation and repair for captured output; see utf8.h. */
#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Returns the length of the valid sequence starting at s (1-4), or 0 if it is invalid. */
static size_t utf8_valid_len(const unsigned char *s, size_t len)
{
        uint32_t cp;
        size_t n;

        if (s[0] < 0x80)
                return s[0] == 0 ? 0 : 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                n = 2, cp = s[0] & 0x1f;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                n = 3, cp = s[0] & 0x0f;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                n = 4, cp = s[0] & 0x07;
        else
                return 0;
        if (len < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
                return 0;
        if (cp >= 0xd800 && cp <= 0xdfff)
                return 0;
        return n;
}

char *utf8_sanitize(const char *buf, size_t len)
{
        const unsigned char *s = (const unsigned char *) buf;
        char *out, *o;

        /* Worst case: every byte becomes the 3-byte replacement character. */
        out = malloc(len * 3 + 1);
        if (!out)
                return NULL;
        o = out;
        for (size_t i = 0; i < len;) {
                size_t n = utf8_valid_len(s + i, len - i);
                if (n == 0) {
                        memcpy(o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                        continue;
                }
                memcpy(o, s + i, n);
                o += n;
                i += n;
        }
        *o = '\0';
        return out;
}

bool utf8_is_valid(const char *buf, size_t len)
{
        const unsigned char *s = (const unsigned char *) buf;

        for (size_t i = 0, n; i < len; i += n) {
                n = utf8_valid_len(s + i, len - i);
                if (n == 0)
                        return false;
        }
        return true;
}

size_t utf8_complete_prefix(const char *buf, size_t len)
{
        const unsigned char *s = (const unsigned char *) buf;
        size_t i, need;

        /* Walk back over at most three continuation bytes to the last lead byte. */
        for (i = len; i > 0 && len - i < 4; i--) {
                unsigned char c = s[i - 1];
                if ((c & 0xc0) == 0x80)
                        continue;
                if (c < 0x80)
                        return len;
                need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
                return len - (i - 1) >= need ? len : i - 1;
        }
        return len;
}
