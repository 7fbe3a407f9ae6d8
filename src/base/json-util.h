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
