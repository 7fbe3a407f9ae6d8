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
