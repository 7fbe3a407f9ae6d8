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
