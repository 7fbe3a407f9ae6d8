/* Small jansson helpers shared by the modules that validate client JSON. */
#pragma once

#include <jansson.h>

/* "an object", "a string", "a number"... for messages such as "expected a string, got
 * an array". */
const char *json_type_name(const json_t *v);

/* A new array of the strings of the NULL-terminated vector v (NULL: an empty array), or NULL
 * when out of memory. */
json_t *json_strv(char *const *v);

/* The text of one of an execution's rich outputs (its "data": MIME type -> string, DESIGN.md
 * section 4) for a model to read: its text/plain, unless that is only an object's default repr
 * ("<IPython.core.display.HTML object>"), then its markdown, HTML, LaTeX or JSON. NULL when it
 * has no text. Borrowed. */
const char *json_output_text(const json_t *data);

/* Where one of an execution's outputs goes in its stdout (of len bytes): its "stdout_offset"
 * (a display, made after that much of stdout was printed) clamped to [from, len] and moved back
 * to the start of a UTF-8 character; len + 1 when it has none (the cell's value, figures left
 * open at its end). */
size_t json_output_stdout_at(const json_t *output, const char *stdout_text, size_t len,
                             size_t from);

/* Enough for json_real_text(): a sign, 17 digits, a point and "e-324". */
#define JSON_REAL_TEXT_MAX 32

/* Writes the shortest text that reads back (strtod) as the same double v, as Python's repr and
 * JavaScript do (0.714752, not jansson's 0.71475200000000005), NUL-terminated, into buf; returns
 * its length. The layout is jansson's: fixed for 1e-4 <= |v| < 1e17, else an exponent without
 * '+' or leading zeros (1e-7, 1e21); always a '.' or an exponent, so that it reads back as a
 * real (2.0, -0.0). v is finite, as a jansson real always is (NaN and the infinities give
 * "nan", "inf" and "-inf", which are not JSON). */
size_t json_real_text(double v, char buf[static JSON_REAL_TEXT_MAX]);

/* json_dumps(v, flags) with every real written by json_real_text(): what the daemon and the CLI
 * print. Returns a malloc'd NUL-terminated text and, if ret_len is not NULL, its length; NULL
 * when out of memory or when jansson cannot dump v (as json_dumps). */
char *json_dump_text(const json_t *v, size_t flags, size_t *ret_len);
