/* See json-util.h. */
#include "json-util.h"

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
