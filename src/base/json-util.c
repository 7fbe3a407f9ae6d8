/* See json-util.h. */
#include "json-util.h"

#include "buf.h"
#include "cleanup.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *json_type_name(const json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return "an object";
        case JSON_ARRAY:
                return "an array";
        case JSON_STRING:
                return "a string";
        case JSON_INTEGER:
        case JSON_REAL:
                return "a number";
        case JSON_TRUE:
        case JSON_FALSE:
                return "a boolean";
        case JSON_NULL:
                return "null";
        }
        return "a value";
}

json_t *json_strv(char *const *v)
{
        json_t *arr = json_array();

        for (; arr && v && *v; v++)
                if (json_array_append_new(arr, json_string(*v)) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        return arr;
}

const char *json_output_text(const json_t *data)
{
        static const char *const texts[] = { "text/markdown", "text/html", "text/latex",
                                             "application/json" };
        const char *plain = json_string_value(json_object_get(data, "text/plain"));
        size_t n = plain ? strlen(plain) : 0;

        if (plain && !(n > 9 && plain[0] == '<' && strcmp(plain + n - 8, " object>") == 0))
                return plain;
        for (size_t k = 0; k < ELEMENTSOF(texts); k++) {
                const char *t = json_string_value(json_object_get(data, texts[k]));
                if (t)
                        return t;
        }
        return plain;
}

size_t json_output_stdout_at(const json_t *output, const char *stdout_text, size_t len, size_t from)
{
        const json_t *at = json_object_get(output, "stdout_offset");
        size_t n;

        if (!json_is_integer(at) || json_integer_value(at) < 0)
                return len + 1;
        n = (size_t) json_integer_value(at);
        if (n > len)
                n = len;
        if (n < from)
                n = from;
        while (n > from && ((unsigned char) stdout_text[n] & 0xC0) == 0x80)
                n--;
        return n;
}

/* The powers of ten that are exact doubles. */
static const double exact_pow10[] = { 1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };

/* The fast way for most numbers (0.714752 ms, 1.5 s): the fewest fractional digits k for which
 * the integer r nearest v * 10^k gives back v as r / 10^k. r and 10^k are exact doubles, so the
 * division rounds the decimal r * 10^-k exactly as strtod() would. Up to 15 significant digits
 * there is at most one such decimal per double and r is it; false when v needs more digits or
 * lies outside [1e-7, 1e15), for the slow way. Writes r as its digits, returns their count. */
static bool shortest_fast(double v, char digits[static 18], int *ret_count, int *ret_exp)
{
        char rev[18];
        uint64_t n;
        double r = 0;
        int k, count, i;

        if (!(v >= 1e-7 && v < 1e15))
                return false;
        for (k = 0; k < (int) (sizeof(exact_pow10) / sizeof(exact_pow10[0])); k++) {
                double s = v * exact_pow10[k];

                if (s >= 1e15)
                        return false;
                r = nearbyint(s);
                if (r != 0 && r / exact_pow10[k] == v)
                        break;
        }
        if (k == (int) (sizeof(exact_pow10) / sizeof(exact_pow10[0])))
                return false;
        n = (uint64_t) r;
        while (n % 10 == 0) { /* only when k is 0: 100 */
                n /= 10;
                k--;
        }
        for (count = 0; n; n /= 10)
                rev[count++] = (char) ('0' + n % 10);
        for (i = 0; i < count; i++)
                digits[i] = rev[count - 1 - i];
        *ret_count = count;
        *ret_exp = count - 1 - k;
        return true;
}

/* Reads "d.ddde[+-]xx" as printed by %e into its digits without trailing zeros and its
 * exponent. */
static void read_e_text(const char *text, char digits[static 18], int *ret_count, int *ret_exp)
{
        int count = 0;
        const char *p;

        for (p = text; *p && *p != 'e'; p++)
                if (*p >= '0' && *p <= '9' && count < 17)
                        digits[count++] = *p;
        while (count > 1 && digits[count - 1] == '0')
                count--;
        *ret_count = count;
        *ret_exp = *p == 'e' ? atoi(p + 1) : 0;
}

/* The slow way: the first precision whose correctly rounded %e text reads back as v. Below
 * DBL_MIN (subnormals, 5e-324) fewer digits than 15 may do; from DBL_MIN up any decimal of 15
 * digits reads back to the double nearest it, so one of 15 or fewer digits, if there is one,
 * is what %.14e prints. At 16 digits the nearest may miss where the one on the other side of
 * v does not (v a power of two: the doubles below are closer together than those above). 17
 * always do. */
static void shortest_slow(double v, char digits[static 18], int *ret_count, int *ret_exp)
{
        char text[48];
        int p;

        for (p = v < DBL_MIN ? 1 : 15; p < 17; p++) {
                double back;

                (void) snprintf(text, sizeof(text), "%.*e", p - 1, v);
                back = strtod(text, NULL);
                if (back == v)
                        break;
                if (p == 16) {
                        char near[18], other[48];
                        int count, e;
                        uint64_t n;

                        read_e_text(text, near, &count, &e);
                        n = 0;
                        for (int i = 0; i < 16; i++)
                                n = n * 10 + (uint64_t) (i < count ? near[i] - '0' : 0);
                        n = back < v ? n + 1 : n - 1;
                        (void) snprintf(other, sizeof(other), "%llue%d", (unsigned long long) n,
                                        e - 15);
                        if (strtod(other, NULL) == v) {
                                /* As d.ddde[+-]x, for read_e_text(). */
                                char d[24];
                                int len = snprintf(d, sizeof(d), "%llu", (unsigned long long) n);

                                (void) snprintf(text, sizeof(text), "%c.%se%d", d[0], d + 1,
                                                e - 15 + len - 1);
                                break;
                        }
                }
        }
        if (p == 17)
                (void) snprintf(text, sizeof(text), "%.16e", v);
        read_e_text(text, digits, ret_count, ret_exp);
}

size_t json_real_text(double v, char buf[static JSON_REAL_TEXT_MAX])
{
        char digits[18] = { 0 };
        int count, e, i;
        char *p = buf;

        if (!isfinite(v))
                return (size_t) snprintf(buf, JSON_REAL_TEXT_MAX, "%g", v);
        if (signbit(v)) {
                *p++ = '-';
                v = -v;
        }
        if (v == 0) {
                memcpy(p, "0.0", 4);
                return (size_t) (p + 3 - buf);
        }
        if (!shortest_fast(v, digits, &count, &e))
                shortest_slow(v, digits, &count, &e);

        if (e < -4 || e >= 17) {
                *p++ = digits[0];
                if (count > 1) {
                        *p++ = '.';
                        memcpy(p, digits + 1, (size_t) count - 1);
                        p += count - 1;
                }
                p += snprintf(p, 8, "e%d", e);
        } else if (e < 0) {
                *p++ = '0';
                *p++ = '.';
                for (i = -1; i > e; i--)
                        *p++ = '0';
                memcpy(p, digits, (size_t) count);
                p += count;
        } else {
                for (i = 0; i <= e || i < count; i++) {
                        if (i == e + 1)
                                *p++ = '.';
                        *p++ = i < count ? digits[i] : '0';
                }
                if (count <= e + 1) {
                        *p++ = '.';
                        *p++ = '0';
                }
        }
        *p = '\0';
        return (size_t) (p - buf);
}

/* json_dump_callback()'s state: the text so far and whether the last chunk opened a string.
 * Jansson writes a string as a lone '"', its runs and escapes (a '"' inside is the
 * chunk "\""), and a lone '"'; every other value, a real included, as one chunk. */
struct dump_text {
        struct buf text;
        bool in_string;
};

static int dump_text_chunk(const char *p, size_t n, void *userdata)
{
        struct dump_text *d = userdata;
        char real[JSON_REAL_TEXT_MAX], text[64];
        double v;

        if (n == 1 && p[0] == '"')
                d->in_string = !d->in_string;
        else if (!d->in_string && n > 0 && n < sizeof(text) &&
                 (p[0] == '-' || (p[0] >= '0' && p[0] <= '9')) &&
                 (memchr(p, '.', n) || memchr(p, 'e', n))) {
                /* A real, as jansson wrote it ('.' whatever the locale). */
                memcpy(text, p, n);
                text[n] = '\0';
                v = strtod(text, NULL); /* "%.17g" reads back exactly (the C locale's '.') */
                n = json_real_text(v, real);
                p = real;
        }
        if (d->text.len + n < d->text.size) { /* the common case, inline: a chunk is short */
                memcpy(d->text.data + d->text.len, p, n);
                d->text.len += n;
                return 0;
        }
        return buf_append(&d->text, p, n, SIZE_MAX) < 0 ? -1 : 0;
}

/* Starts d, its text with room for a short answer (buf_append() would start at 16 KiB). */
static int dump_text_init(struct dump_text *d)
{
        *d = (struct dump_text){ .text = { .data = malloc(256), .size = 256 } };
        return d->text.data ? 0 : -ENOMEM;
}

char *json_dump_text(const json_t *v, size_t flags, size_t *ret_len)
{
        struct dump_text d;

        if (dump_text_init(&d) < 0)
                return NULL;
        /* Jansson writes each real with "%.17g" (its default precision), which reads back to the
         * same double; each is rewritten in its shortest form on its way through. */
        if (json_dump_callback(v, dump_text_chunk, &d, flags & ~JSON_REAL_PRECISION(31)) < 0) {
                buf_done(&d.text);
                return NULL;
        }
        d.text.data[d.text.len] = '\0'; /* the inline appends leave it out */
        if (ret_len)
                *ret_len = d.text.len;
        return d.text.data;
}
