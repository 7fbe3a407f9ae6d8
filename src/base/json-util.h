/* Small jansson helpers shared by the modules that validate client JSON. */
#pragma once

#include <jansson.h>

/* "an object", "a string", "a number"... for messages such as "expected a string, got
 * an array". */
const char *json_type_name(const json_t *v);

/* A new array of the strings of the NULL-terminated vector v (NULL: an empty array), or NULL
 * when out of memory. */
json_t *json_strv(char *const *v);
