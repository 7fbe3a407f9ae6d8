/* See json-util.h. */
#include "json-util.h"

#include "cleanup.h"

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
