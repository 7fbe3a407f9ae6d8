/* Unit tests of src/base/jsonschema.c: every keyword passing and failing, the exact messages a
 * model or Python code will read, $ref (escapes, recursion, cycles), the bounds on depth and
 * work, and whole tool schemas in the shapes MCP servers publish (hand-written, zod-to-json-schema
 * style, pydantic style with Optional fields). */
#include "base/jsonschema.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One check: schema and instance as JSON text (NULL: pass NULL), the expected result and, for a
 * failure, the exact message. */
struct vcase {
        const char *schema;
        const char *instance;
        int r;
        const char *msg;
};

static json_t *parse(const char *text)
{
        json_error_t jerr;
        json_t *j;

        if (!text)
                return NULL;
        j = json_loads(text, JSON_DECODE_ANY, &jerr);
        cr_assert(j, "test JSON does not parse: %s: %s", text, jerr.text);
        return j;
}

static int validate_text(const char *schema_text, const char *instance_text,
                         struct airlock_error *err)
{
        json_t *schema = parse(schema_text), *instance = parse(instance_text);
        int r;

        r = jsonschema_validate(schema, instance, err);
        json_decref(schema);
        json_decref(instance);
        return r;
}

static void run_cases(const struct vcase *cases, size_t n)
{
        size_t i;

        for (i = 0; i < n; i++) {
                const struct vcase *c = &cases[i];
                struct airlock_error err = { "" };
                int r = validate_text(c->schema, c->instance, &err);

                cr_expect_eq(r, c->r, "case %zu: %s against %s: r=%d, expected %d (%s)", i,
                             c->instance, c->schema, r, c->r, err.msg);
                if (c->msg)
                        cr_expect_str_eq(err.msg, c->msg, "case %zu: %s against %s", i, c->instance,
                                         c->schema);
        }
}

#define RUN(cases) run_cases(cases, sizeof(cases) / sizeof((cases)[0]))

Test(jsonschema, type)
{
        static const struct vcase cases[] = {
                { "{\"type\":\"string\"}", "\"x\"", 0, NULL },
                { "{\"type\":\"string\"}", "5", -EINVAL, "arguments: must be a string, got 5" },
                { "{\"type\":\"integer\"}", "7", 0, NULL },
                /* A number with a zero fraction is an integer (jansson reads 1.0 as a real). */
                { "{\"type\":\"integer\"}", "1.0", 0, NULL },
                { "{\"type\":\"integer\"}", "1.5", -EINVAL,
                  "arguments: must be an integer, got 1.5" },
                { "{\"type\":\"integer\"}", "\"7\"", -EINVAL,
                  "arguments: must be an integer, got \"7\"" },
                { "{\"type\":\"number\"}", "3", 0, NULL },
                { "{\"type\":\"number\"}", "0.1", 0, NULL },
                { "{\"type\":\"number\"}", "null", -EINVAL,
                  "arguments: must be a number, got null" },
                { "{\"type\":\"boolean\"}", "false", 0, NULL },
                { "{\"type\":\"boolean\"}", "0", -EINVAL, "arguments: must be a boolean, got 0" },
                { "{\"type\":\"object\"}", "{}", 0, NULL },
                { "{\"type\":\"object\"}", "[1]", -EINVAL,
                  "arguments: must be an object, got an array" },
                { "{\"type\":\"array\"}", "{\"a\":1}", -EINVAL,
                  "arguments: must be an array, got an object" },
                { "{\"type\":\"null\"}", "null", 0, NULL },
                { "{\"type\":[\"string\",\"null\"]}", "null", 0, NULL },
                { "{\"type\":[\"string\",\"null\"]}", "\"s\"", 0, NULL },
                { "{\"type\":[\"string\",\"integer\",\"null\"]}", "true", -EINVAL,
                  "arguments: must be a string, an integer or null, got true" },
                { "{\"type\":\"any\"}", "[]", 0, NULL },
                { "{\"type\":\"text\"}", "1", -EINVAL,
                  "arguments: must be of type \"text\", got 1" },
                /* A keyword whose value has the wrong type is ignored. */
                { "{\"type\":5}", "1", 0, NULL },
        };
        RUN(cases);
}

Test(jsonschema, enum_and_const)
{
        static const struct vcase cases[] = {
                { "{\"enum\":[\"a\",\"b\"]}", "\"a\"", 0, NULL },
                { "{\"properties\":{\"mode\":{\"enum\":[\"a\",\"b\"]}}}", "{\"mode\":\"c\"}",
                  -EINVAL, "argument 'mode': must be one of \"a\", \"b\", got \"c\"" },
                { "{\"enum\":[\"only\"]}", "\"x\"", -EINVAL,
                  "arguments: must be \"only\", got \"x\"" },
                /* JSON Schema compares numbers by value: 2 and 2.0 are equal. */
                { "{\"enum\":[1,2]}", "2.0", 0, NULL },
                { "{\"enum\":[1,2,null]}", "3", -EINVAL,
                  "arguments: must be one of 1, 2, null, got 3" },
                { "{\"enum\":[{\"a\":[1,\"x\"]}]}", "{\"a\":[1.0,\"x\"]}", 0, NULL },
                { "{\"enum\":[{\"a\":[1,\"x\"]}]}", "{\"a\":[1,\"y\"]}", -EINVAL,
                  "arguments: must be {\"a\":[1,\"x\"]}, got {\"a\":[1,\"y\"]}" },
                { "{\"enum\":[\"1\"]}", "1", -EINVAL, "arguments: must be \"1\", got 1" },
                { "{\"const\":\"x\"}", "\"x\"", 0, NULL },
                { "{\"const\":\"x\"}", "\"y\"", -EINVAL, "arguments: must be \"x\", got \"y\"" },
                { "{\"const\":null}", "null", 0, NULL },
                { "{\"const\":null}", "0", -EINVAL, "arguments: must be null, got 0" },
                { "{\"const\":false}", "0", -EINVAL, "arguments: must be false, got 0" },
                { "{\"const\":[1,2]}", "[1,2]", 0, NULL },
                { "{\"const\":[1,2]}", "[2,1]", -EINVAL, "arguments: must be [1,2], got [2,1]" },
        };
        RUN(cases);
}

Test(jsonschema, objects)
{
        static const struct vcase cases[] = {
                { "{\"required\":[\"user_id\"]}", "{\"user_id\":\"u\"}", 0, NULL },
                { "{\"required\":[\"user_id\"]}", "{}", -EINVAL, "argument 'user_id' is required" },
                /* A present null satisfies required; the type decides whether null is allowed. */
                { "{\"required\":[\"a\"]}", "{\"a\":null}", 0, NULL },
                { "{\"properties\":{\"f\":{\"required\":[\"limit\"]}}}", "{\"f\":{}}", -EINVAL,
                  "argument 'f.limit' is required" },
                /* required and properties apply to objects only. */
                { "{\"required\":[\"a\"],\"properties\":{\"a\":{\"type\":\"string\"}}}", "5", 0,
                  NULL },
                { "{\"properties\":{\"user_id\":{},\"days\":{}},\"additionalProperties\":false}",
                  "{\"user_id\":1,\"foo\":2}", -EINVAL,
                  "unexpected argument 'foo' (the tool takes: user_id, days)" },
                { "{\"properties\":{\"f\":{\"properties\":{\"limit\":{}},"
                  "\"additionalProperties\":false}}}",
                  "{\"f\":{\"foo\":1}}", -EINVAL,
                  "unexpected argument 'f.foo' (allowed here: limit)" },
                { "{\"properties\":{},\"additionalProperties\":false}", "{\"x\":1}", -EINVAL,
                  "unexpected argument 'x' (the tool takes no arguments)" },
                { "{\"properties\":{\"f\":{\"additionalProperties\":false}}}", "{\"f\":{\"x\":1}}",
                  -EINVAL, "unexpected argument 'f.x' (allowed here: nothing)" },
                { "{\"properties\":{},\"additionalProperties\":false}", "{}", 0, NULL },
                { "{\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":1,\"b\":\"x\"}",
                  -EINVAL, "argument 'b': must be an integer, got \"x\"" },
                { "{\"properties\":{\"b\":{}},\"additionalProperties\":{\"type\":\"integer\"}}",
                  "{\"a\":1,\"b\":\"x\"}", 0, NULL },
                { "{\"patternProperties\":{\"^x_\":{\"type\":\"string\"}},"
                  "\"additionalProperties\":false}",
                  "{\"x_a\":\"s\"}", 0, NULL },
                { "{\"patternProperties\":{\"^x_\":{\"type\":\"string\"}},"
                  "\"additionalProperties\":false}",
                  "{\"x_a\":1}", -EINVAL, "argument 'x_a': must be a string, got 1" },
                { "{\"properties\":{\"id\":{}},\"patternProperties\":{\"^x_\":{}},"
                  "\"additionalProperties\":false}",
                  "{\"y\":1}", -EINVAL,
                  "unexpected argument 'y' (the tool takes: id, names matching '^x_')" },
                /* A member named in properties and matching a pattern must satisfy both. */
                { "{\"properties\":{\"x_n\":{\"type\":\"integer\"}},"
                  "\"patternProperties\":{\"^x_\":{\"minimum\":5}}}",
                  "{\"x_n\":3}", -EINVAL, "argument 'x_n': must be at least 5, got 3" },
                /* A pattern that does not compile is ignored: it matches no name. */
                { "{\"patternProperties\":{\"(\":{\"type\":\"string\"}}}", "{\"(\":1}", 0, NULL },
                { "{\"propertyNames\":{\"pattern\":\"^[a-z]+$\"}}", "{\"abc\":1}", 0, NULL },
                { "{\"propertyNames\":{\"pattern\":\"^[a-z]+$\"}}", "{\"Abc\":1}", -EINVAL,
                  "argument 'Abc': the name is not allowed (must match the pattern '^[a-z]+$', got "
                  "\"Abc\")" },
                { "{\"propertyNames\":{\"maxLength\":3}}", "{\"abcd\":1}", -EINVAL,
                  "argument 'abcd': the name is not allowed (must be at most 3 characters long, "
                  "got 4)" },
                { "{\"minProperties\":1}", "{}", -EINVAL,
                  "arguments: must have at least 1 member, got 0" },
                { "{\"maxProperties\":1}", "{\"a\":1,\"b\":2}", -EINVAL,
                  "arguments: must have at most 1 member, got 2" },
                { "{\"minProperties\":1,\"maxProperties\":1}", "{\"a\":1}", 0, NULL },
        };
        RUN(cases);
}

Test(jsonschema, arrays)
{
        static const struct vcase cases[] = {
                { "{\"items\":{\"type\":\"integer\"}}", "[1,2,3]", 0, NULL },
                { "{\"items\":{\"type\":\"integer\"}}", "[1,2,\"x\"]", -EINVAL,
                  "argument '[2]': must be an integer, got \"x\"" },
                { "{\"properties\":{\"rows\":{\"items\":{\"properties\":{\"name\":{\"type\":"
                  "\"string\"}}}}}}",
                  "{\"rows\":[{\"name\":\"a\"},{\"name\":3}]}", -EINVAL,
                  "argument 'rows[1].name': must be a string, got 3" },
                /* Draft 4-2019 tuples: items as an array, then additionalItems. */
                { "{\"items\":[{\"type\":\"string\"},{\"type\":\"integer\"}],"
                  "\"additionalItems\":false}",
                  "[\"a\",1]", 0, NULL },
                { "{\"items\":[{\"type\":\"string\"},{\"type\":\"integer\"}],"
                  "\"additionalItems\":false}",
                  "[\"a\",1,2]", -EINVAL, "argument '[2]' is not allowed" },
                { "{\"items\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "[\"a\",\"b\"]",
                  -EINVAL, "argument '[1]': must be an integer, got \"b\"" },
                { "{\"items\":[{\"type\":\"string\"}],\"additionalItems\":{\"type\":\"boolean\"}}",
                  "[\"a\",true,3]", -EINVAL, "argument '[2]': must be a boolean, got 3" },
                /* A tuple may be shorter than its items. */
                { "{\"items\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "[\"a\"]", 0,
                  NULL },
                /* 2020-12 tuples: prefixItems, then items for the rest. */
                { "{\"prefixItems\":[{\"type\":\"number\"},{\"type\":\"number\"}],\"items\":false}",
                  "[1,2.5]", 0, NULL },
                { "{\"prefixItems\":[{\"type\":\"number\"},{\"type\":\"number\"}],\"items\":false}",
                  "[1,2,3]", -EINVAL, "argument '[2]' is not allowed" },
                { "{\"prefixItems\":[{\"type\":\"number\"}],\"items\":{\"type\":\"string\"}}",
                  "[1,\"a\",2]", -EINVAL, "argument '[2]': must be a string, got 2" },
                { "{\"minItems\":2}", "[1]", -EINVAL,
                  "arguments: must have at least 2 items, got 1" },
                { "{\"maxItems\":1}", "[1,2]", -EINVAL,
                  "arguments: must have at most 1 item, got 2" },
                { "{\"minItems\":1,\"maxItems\":1}", "[1]", 0, NULL },
                { "{\"uniqueItems\":true}", "[1,2,[1],{\"a\":1},{\"a\":2}]", 0, NULL },
                { "{\"uniqueItems\":true}", "[1,2,1.0]", -EINVAL,
                  "arguments: must not contain duplicates (items 0 and 2 are equal)" },
                { "{\"uniqueItems\":true}", "[{\"a\":[1]},{\"a\":[1]}]", -EINVAL,
                  "arguments: must not contain duplicates (items 0 and 1 are equal)" },
                { "{\"uniqueItems\":false}", "[1,1]", 0, NULL },
                /* Array keywords apply to arrays only. */
                { "{\"minItems\":2,\"items\":{\"type\":\"string\"}}", "\"s\"", 0, NULL },
        };
        RUN(cases);
}

Test(jsonschema, numbers)
{
        static const struct vcase cases[] = {
                { "{\"minimum\":1,\"maximum\":100}", "1", 0, NULL },
                { "{\"minimum\":1,\"maximum\":100}", "100", 0, NULL },
                { "{\"minimum\":1,\"maximum\":100}", "0", -EINVAL,
                  "arguments: must be at least 1, got 0" },
                { "{\"properties\":{\"filters\":{\"properties\":{\"limit\":{\"maximum\":100}}}}}",
                  "{\"filters\":{\"limit\":500}}", -EINVAL,
                  "argument 'filters.limit': must be at most 100, got 500" },
                { "{\"maximum\":1.5}", "1.75", -EINVAL,
                  "arguments: must be at most 1.5, got 1.75" },
                /* Integers compare exactly, also beyond a double's 53 bits. */
                { "{\"minimum\":9007199254740993}", "9007199254740992", -EINVAL,
                  "arguments: must be at least 9007199254740993, got 9007199254740992" },
                { "{\"exclusiveMinimum\":0}", "0.5", 0, NULL },
                { "{\"exclusiveMinimum\":0}", "0", -EINVAL,
                  "arguments: must be greater than 0, got 0" },
                { "{\"exclusiveMaximum\":10}", "10", -EINVAL,
                  "arguments: must be less than 10, got 10" },
                { "{\"exclusiveMaximum\":10}", "9.99", 0, NULL },
                /* Draft 4: the boolean form modifies minimum and maximum. */
                { "{\"minimum\":0,\"exclusiveMinimum\":true}", "0", -EINVAL,
                  "arguments: must be greater than 0, got 0" },
                { "{\"minimum\":0,\"exclusiveMinimum\":true}", "0.1", 0, NULL },
                { "{\"maximum\":5,\"exclusiveMaximum\":true}", "5", -EINVAL,
                  "arguments: must be less than 5, got 5" },
                { "{\"maximum\":5,\"exclusiveMaximum\":false}", "5", 0, NULL },
                { "{\"multipleOf\":5}", "10", 0, NULL },
                { "{\"multipleOf\":5}", "7", -EINVAL, "arguments: must be a multiple of 5, got 7" },
                { "{\"multipleOf\":5}", "10.0", 0, NULL },
                { "{\"multipleOf\":0.1}", "0.3", 0, NULL },
                { "{\"multipleOf\":0.01}", "19.99", 0, NULL },
                { "{\"multipleOf\":0.1}", "0.35", -EINVAL,
                  "arguments: must be a multiple of 0.1, got 0.35" },
                { "{\"multipleOf\":2}", "-4", 0, NULL },
                /* multipleOf must be positive; anything else is ignored. */
                { "{\"multipleOf\":0}", "3", 0, NULL },
                /* Number keywords apply to numbers only. */
                { "{\"minimum\":5}", "\"1\"", 0, NULL },
        };
        RUN(cases);
}

Test(jsonschema, strings)
{
        static const struct vcase cases[] = {
                /* Lengths count code points: "héé" is 5 bytes but 3 characters. */
                { "{\"maxLength\":3}", "\"h\xc3\xa9\xc3\xa9\"", 0, NULL },
                { "{\"maxLength\":3}", "\"h\xc3\xa9\xc3\xa9\xc3\xa9\"", -EINVAL,
                  "arguments: must be at most 3 characters long, got 4" },
                { "{\"maxLength\":2}", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"", 0, NULL },
                { "{\"minLength\":2}", "\"\xc3\xa9\"", -EINVAL,
                  "arguments: must be at least 2 characters long, got 1" },
                { "{\"minLength\":1}", "\"\"", -EINVAL,
                  "arguments: must be at least 1 character long, got 0" },
                { "{\"minLength\":1.0}", "\"a\"", 0, NULL },
                { "{\"pattern\":\"^[a-z]+$\"}", "\"abc\"", 0, NULL },
                { "{\"pattern\":\"^[a-z]+$\"}", "\"ABC\"", -EINVAL,
                  "arguments: must match the pattern '^[a-z]+$', got \"ABC\"" },
                /* ECMA-262's $ does not match before a final newline, unlike PCRE's default. */
                { "{\"pattern\":\"^[a-z]+$\"}", "\"abc\\n\"", -EINVAL,
                  "arguments: must match the pattern '^[a-z]+$', got \"abc\\n\"" },
                /* Patterns are not anchored. */
                { "{\"pattern\":\"b\"}", "\"abc\"", 0, NULL },
                /* A pattern that does not compile is ignored. */
                { "{\"pattern\":\"(unclosed\"}", "\"x\"", 0, NULL },
                /* JavaScript's \uHHHH and one dot per code point. */
                { "{\"pattern\":\"^\\\\u0041$\"}", "\"A\"", 0, NULL },
                { "{\"pattern\":\"^.$\"}", "\"\xc3\xa9\"", 0, NULL },
                { "{\"pattern\":\"^[^]$\"}", "\"\\n\"", 0, NULL },
                { "{\"pattern\":\"^\\\\d{3}$\"}", "\"12a\"", -EINVAL,
                  "arguments: must match the pattern '^\\d{3}$', got \"12a\"" },
                /* format is an annotation here, as most validators treat it. */
                { "{\"format\":\"email\"}", "\"not an email\"", 0, NULL },
                { "{\"pattern\":\"^a\",\"minLength\":3}", "5", 0, NULL },
        };
        RUN(cases);
}

Test(jsonschema, pattern_too_costly_is_denied)
{
        struct airlock_error err = { "" };
        int r;

        /* Catastrophic backtracking: PCRE2's match limit stops it, and the value is refused
         * rather than let through unchecked. */
        r = validate_text("{\"properties\":{\"s\":{\"pattern\":\"^(a+)+$\"}}}",
                          "{\"s\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\"}", &err);
        cr_assert_eq(r, -EINVAL, "r=%d (%s)", r, err.msg);
        cr_assert_str_eq(err.msg, "argument 's': cannot be checked against the pattern '^(a+)+$' "
                                  "(matching takes too long)");

        /* The same for a name matched against patternProperties. */
        r = validate_text("{\"patternProperties\":{\"^(a+)+$\":{}}}",
                          "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\":1}", &err);
        cr_assert_eq(r, -EINVAL, "r=%d (%s)", r, err.msg);
        cr_assert_str_eq(err.msg,
                         "argument 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab': its name cannot "
                         "be checked against the pattern '^(a+)+$' (matching takes too "
                         "long)");
}

Test(jsonschema, combinators)
{
        static const struct vcase cases[] = {
                { "{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":3}]}", "3", 0, NULL },
                { "{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":3}]}", "2", -EINVAL,
                  "arguments: must be at least 3, got 2" },
                { "{\"properties\":{\"x\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]"
                  "}}}",
                  "{\"x\":3}", 0, NULL },
                { "{\"properties\":{\"x\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]"
                  "}}}",
                  "{\"x\":true}", -EINVAL,
                  "argument 'x': matches none of the 2 allowed forms (expected a string; expected "
                  "an integer)" },
                /* Two forms of the right type fail for their own reasons: both are named. */
                { "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"string\","
                  "\"pattern\":\"^a\"}]}",
                  "\"bbb\"", -EINVAL,
                  "arguments: matches none of the 2 allowed forms (must be at most 2 characters "
                  "long, got 3; must match the pattern '^a', got \"bbb\")" },
                { "{\"anyOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", "{\"c\":1}",
                  -EINVAL,
                  "arguments: matches none of the 2 allowed forms ('a' is required; 'b' is "
                  "required)" },
                /* Only one form has the value's type: its own failure, at its own path. */
                { "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"integer\"}]}",
                  "\"abc\"", -EINVAL, "arguments: must be at most 2 characters long, got 3" },
                /* A type failure inside a nested anyOf still counts as a type failure. */
                { "{\"anyOf\":[{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]},"
                  "{\"type\":\"null\"}]}",
                  "true", -EINVAL,
                  "arguments: matches none of the 2 allowed forms (expected a string or an "
                  "integer; expected null)" },
                { "{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "-1", 0, NULL },
                { "{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "1.5", 0, NULL },
                { "{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "5", -EINVAL,
                  "arguments: matches more than one of the 2 allowed forms (forms 1 and 2), but "
                  "must match exactly one" },
                { "{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "-1.5", -EINVAL,
                  "arguments: must be at least 0, got -1.5" },
                { "{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"boolean\"}]}", "1", -EINVAL,
                  "arguments: matches none of the 2 allowed forms (expected a string; expected a "
                  "boolean)" },
                { "{\"not\":{\"type\":\"null\"}}", "1", 0, NULL },
                { "{\"not\":{\"type\":\"null\"}}", "null", -EINVAL,
                  "arguments: matches a form that is not allowed here" },
                { "{\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}}},\"then\":{\"required\":"
                  "[\"x\"]},\"else\":{\"required\":[\"y\"]}}",
                  "{\"kind\":\"a\"}", -EINVAL, "argument 'x' is required" },
                { "{\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}}},\"then\":{\"required\":"
                  "[\"x\"]},\"else\":{\"required\":[\"y\"]}}",
                  "{\"kind\":\"b\"}", -EINVAL, "argument 'y' is required" },
                { "{\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}}},\"then\":{\"required\":"
                  "[\"x\"]},\"else\":{\"required\":[\"y\"]}}",
                  "{\"kind\":\"a\",\"x\":1}", 0, NULL },
                { "{\"if\":{\"type\":\"string\"},\"then\":{\"minLength\":2}}", "5", 0, NULL },
                /* Malformed combinators are ignored like unknown keywords. */
                { "{\"anyOf\":[],\"allOf\":{},\"not\":3}", "1", 0, NULL },
        };
        RUN(cases);
}

Test(jsonschema, refs)
{
        static const struct vcase cases[] = {
                { "{\"$defs\":{\"pos\":{\"type\":\"integer\",\"minimum\":0}},"
                  "\"properties\":{\"n\":{\"$ref\":\"#/$defs/pos\"}}}",
                  "{\"n\":-1}", -EINVAL, "argument 'n': must be at least 0, got -1" },
                { "{\"definitions\":{\"pos\":{\"minimum\":0}},"
                  "\"properties\":{\"n\":{\"$ref\":\"#/definitions/pos\"}}}",
                  "{\"n\":2}", 0, NULL },
                /* ~1 is '/', ~0 is '~', and the fragment is percent-decoded first. */
                { "{\"definitions\":{\"a/b\":{\"type\":\"string\"},\"c~d\":{\"type\":\"integer\"},"
                  "\"e f\":{\"type\":\"boolean\"}},\"properties\":{\"p\":{\"$ref\":"
                  "\"#/definitions/a~1b\"},\"q\":{\"$ref\":\"#/definitions/c~0d\"},\"r\":{\"$ref\":"
                  "\"#/definitions/e%20f\"}}}",
                  "{\"p\":\"s\",\"q\":1,\"r\":true}", 0, NULL },
                { "{\"definitions\":{\"a/"
                  "b\":{\"type\":\"string\"}},\"properties\":{\"p\":{\"$ref\":"
                  "\"#/definitions/a~1b\"}}}",
                  "{\"p\":1}", -EINVAL, "argument 'p': must be a string, got 1" },
                { "{\"definitions\":{\"c~d\":{\"type\":\"integer\"}},\"properties\":{\"q\":{\"$"
                  "ref\":"
                  "\"#/definitions/c~0d\"}}}",
                  "{\"q\":\"1\"}", -EINVAL, "argument 'q': must be an integer, got \"1\"" },
                { "{\"definitions\":{\"e "
                  "f\":{\"type\":\"boolean\"}},\"properties\":{\"r\":{\"$ref\":"
                  "\"#/definitions/e%20f\"}}}",
                  "{\"r\":0}", -EINVAL, "argument 'r': must be a boolean, got 0" },
                /* Pointers may go through arrays. */
                { "{\"allOf\":[{\"type\":\"object\"}],\"properties\":{\"x\":{\"$ref\":\"#/allOf/"
                  "0\"}}}",
                  "{\"x\":[]}", -EINVAL, "argument 'x': must be an object, got an array" },
                /* Siblings of $ref apply too (2019-09 and later): both must hold. */
                { "{\"$defs\":{\"s\":{\"type\":\"string\"}},\"properties\":{\"x\":{\"$ref\":"
                  "\"#/$defs/s\",\"maxLength\":2}}}",
                  "{\"x\":\"abc\"}", -EINVAL,
                  "argument 'x': must be at most 2 characters long, got 3" },
                /* What cannot be resolved cannot be checked: deny. */
                { "{\"$ref\":\"#/$defs/missing\"}", "{}", -EINVAL,
                  "arguments: cannot be checked: the tool's schema refers to \"#/$defs/missing\", "
                  "which is not a local reference that exists" },
                { "{\"properties\":{\"a\":{\"$ref\":\"https://example.com/s.json\"}}}", "{\"a\":1}",
                  -EINVAL,
                  "argument 'a': cannot be checked: the tool's schema refers to "
                  "\"https://example.com/s.json\", which is not a local reference that exists" },
                { "{\"$ref\":\"#/a~2\",\"a~2\":{}}", "1", -EINVAL, NULL },
                { "{\"$ref\":\"#/a%zz\"}", "1", -EINVAL, NULL },
                { "{\"$ref\":\"#/allOf/01\",\"allOf\":[{},{}]}", "1", -EINVAL, NULL },
                { "{\"$ref\":\"#/allOf/5\",\"allOf\":[{}]}", "1", -EINVAL, NULL },
                { "{\"$ref\":\"#anchor\"}", "1", -EINVAL, NULL },
                /* A $ref to a boolean schema. */
                { "{\"$defs\":{\"no\":false},\"properties\":{\"x\":{\"$ref\":\"#/$defs/no\"}}}",
                  "{\"x\":1}", -EINVAL, "argument 'x' is not allowed" },
        };
        RUN(cases);
}

/* A tree (children refer back to "#"): each level is a $ref, and since each one moves into the
 * instance the hop count starts again, so 40 levels pass although JSONSCHEMA_REF_MAX is 32. */
Test(jsonschema, recursive_schema_is_not_a_cycle)
{
        const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                             "\"next\":{\"$ref\":\"#\"}},\"required\":[\"name\"],"
                             "\"additionalProperties\":false}";
        char inst[2048] = "", want[256] = "argument '";
        struct airlock_error err = { "" };
        int i, r;

        for (i = 0; i < 40; i++)
                strcat(inst, "{\"name\":\"n\",\"next\":");
        strcat(inst, "{\"name\":\"last\"}");
        for (i = 0; i < 40; i++)
                strcat(inst, "}");
        r = validate_text(schema, inst, &err);
        cr_assert_eq(r, 0, "r=%d (%s)", r, err.msg);

        /* The same with the innermost name missing: the path names every level. */
        strstr(inst, "{\"name\":\"last\"}")[2] = 'x';
        r = validate_text(schema, inst, &err);
        cr_assert_eq(r, -EINVAL);
        for (i = 0; i < 3; i++)
                strcat(want, "next.");
        cr_assert(strncmp(err.msg, want, strlen(want)) == 0, "%s", err.msg);
        cr_assert(strstr(err.msg, "...") != NULL, "a long path is cut: %s", err.msg);
}

Test(jsonschema, ref_cycles)
{
        static const char *const schemas[] = {
                "{\"$ref\":\"#\"}",
                "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},"
                "\"$ref\":\"#/$defs/a\"}",
                "{\"allOf\":[{\"$ref\":\"#\"}]}",
                "{\"properties\":{\"x\":{\"anyOf\":[{\"$ref\":\"#/properties/x\"}]}}}",
        };
        size_t i;

        for (i = 0; i < sizeof(schemas) / sizeof(schemas[0]); i++) {
                struct airlock_error err = { "" };
                int r = validate_text(schemas[i], "{\"x\":1}", &err);

                cr_expect_eq(r, -ELOOP, "%s: r=%d (%s)", schemas[i], r, err.msg);
                cr_expect(strstr(err.msg, "more than 32 $ref hops") != NULL, "%s", err.msg);
                cr_expect(strstr(err.msg, "(a cycle through \"#") != NULL, "%s", err.msg);
        }
}

/* A $ref graph that fans out doubles the work at each level without a cycle: 2^30 subschemas.
 * The step bound ends it quickly. */
Test(jsonschema, ref_fanout_is_bounded)
{
        char schema[8192], *p = schema;
        struct airlock_error err = { "" };
        int i, r;

        p += sprintf(p, "{\"$ref\":\"#/$defs/d0\",\"$defs\":{");
        for (i = 0; i < 30; i++)
                p += sprintf(p,
                             "\"d%d\":{\"allOf\":[{\"$ref\":\"#/$defs/d%d\"},{\"$ref\":"
                             "\"#/$defs/d%d\"}]},",
                             i, i + 1, i + 1);
        p += sprintf(p, "\"d30\":{\"type\":\"integer\"}}}");
        r = validate_text(schema, "1", &err);
        cr_assert_eq(r, -E2BIG, "r=%d (%s)", r, err.msg);
        cr_assert_str_eq(err.msg, "checking the arguments takes too many steps, at the arguments");
}

Test(jsonschema, unique_items_work_is_bounded)
{
        json_t *schema = json_pack("{s:b}", "uniqueItems", 1), *inst = json_array();
        struct airlock_error err = { "" };
        int i, r;

        for (i = 0; i < 2000; i++)
                json_array_append_new(inst, json_integer(i));
        r = jsonschema_validate(schema, inst, &err);
        cr_assert_eq(r, -E2BIG, "r=%d (%s)", r, err.msg);
        json_decref(schema);
        json_decref(inst);
}

static json_t *nested_arrays(int depth)
{
        json_t *v = json_integer(1);

        while (depth-- > 0) {
                json_t *a = json_array();
                json_array_append_new(a, v);
                v = a;
        }
        return v;
}

Test(jsonschema, depth_bound)
{
        json_t *ok = nested_arrays(JSONSCHEMA_DEPTH_MAX);
        json_t *deep = nested_arrays(JSONSCHEMA_DEPTH_MAX + 1);
        json_t *wrapped = json_pack("{s:o}", "data", json_incref(deep));
        json_t *schema = json_pack("{s:s}", "type", "object");
        struct airlock_error err = { "" };
        const char *want;
        int r;

        cr_assert_eq(jsonschema_validate(NULL, ok, &err), 0, "%s", err.msg);
        /* Deeper than the bound fails even where the schema accepts anything. */
        r = jsonschema_validate(NULL, deep, &err);
        cr_assert_eq(r, -E2BIG);
        want = "the arguments nest deeper than 64 levels, at argument '[0][0]";
        cr_assert(strncmp(err.msg, want, strlen(want)) == 0, "%s", err.msg);
        r = jsonschema_validate(schema, wrapped, &err);
        cr_assert_eq(r, -E2BIG);
        cr_assert(strstr(err.msg, "at argument 'data[0][0]") != NULL, "%s", err.msg);
        json_decref(ok);
        json_decref(deep);
        json_decref(wrapped);
        json_decref(schema);
}

Test(jsonschema, nesting_bound)
{
        char schema[16384] = "", *p = schema;
        struct airlock_error err = { "" };
        int i, r;

        /* allOf inside allOf, 600 deep: no instance step, no $ref, still bounded. */
        for (i = 0; i < 600; i++)
                p += sprintf(p, "{\"allOf\":[");
        p += sprintf(p, "{}");
        for (i = 0; i < 600; i++)
                p += sprintf(p, "]}");
        r = validate_text(schema, "1", &err);
        cr_assert_eq(r, -E2BIG, "r=%d (%s)", r, err.msg);
        cr_assert_str_eq(err.msg, "the tool's schema nests too deeply, at the arguments");
}

Test(jsonschema, boolean_empty_and_missing_schemas)
{
        static const struct vcase cases[] = {
                { NULL, "{\"anything\":[1,{\"x\":null}]}", 0, NULL },
                { "{}", "\"s\"", 0, NULL },
                { "true", "[]", 0, NULL },
                { "false", "{}", -EINVAL, "the tool's schema accepts no arguments" },
                { "{\"properties\":{\"x\":false}}", "{\"x\":1}", -EINVAL,
                  "argument 'x' is not allowed" },
                { "{\"properties\":{\"x\":false}}", "{}", 0, NULL },
                /* No arguments at all count as {}. */
                { "{\"type\":\"object\"}", NULL, 0, NULL },
                { "{\"type\":\"object\",\"required\":[\"a\"]}", NULL, -EINVAL,
                  "argument 'a' is required" },
                /* Unknown keywords, annotations and default are ignored. */
                { "{\"x-vendor\":1,\"title\":\"T\",\"description\":\"D\",\"default\":5,"
                  "\"examples\":[1],\"unevaluatedProperties\":false,\"contains\":{}}",
                  "{\"a\":1}", 0, NULL },
                /* A schema that is neither an object nor a boolean accepts anything. */
                { "{\"properties\":{\"x\":\"string\"}}", "{\"x\":1}", 0, NULL },
        };
        RUN(cases);
}

Test(jsonschema, nullable)
{
        static const struct vcase cases[] = {
                { "{\"type\":\"string\",\"nullable\":true}", "null", 0, NULL },
                { "{\"type\":\"string\",\"nullable\":true}", "1", -EINVAL,
                  "arguments: must be a string, got 1" },
                { "{\"type\":\"string\"}", "null", -EINVAL,
                  "arguments: must be a string, got null" },
                { "{\"type\":\"string\",\"nullable\":false}", "null", -EINVAL, NULL },
                { "{\"enum\":[\"a\"],\"nullable\":true}", "null", 0, NULL },
        };
        RUN(cases);
}

/* What a caller can put in a message: quotes, control characters, long values and long or
 * multi-byte names. The message stays one short line of valid UTF-8. */
Test(jsonschema, messages_are_bounded_and_valid_utf8)
{
        static const char *const instances[] = {
                "{\"k\":\"x\\\"\\n\\u0001\"}",
                "{\"k\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
        };
        static const char *const wanted[] = {
                "argument 'k': must be \"y\", got \"x\\\"\\n\\u0001\"",
                "argument 'k': must be \"y\", got "
                "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"",
        };
        char name[1024] = "", inst[1200];
        struct airlock_error err = { "" };
        json_t *s;
        size_t i;
        int r;

        for (i = 0; i < 2; i++) {
                r = validate_text("{\"properties\":{\"k\":{\"const\":\"y\"}}}", instances[i], &err);
                cr_expect_eq(r, -EINVAL);
                cr_expect_str_eq(err.msg, wanted[i]);
        }

        /* 300 two-byte characters: the name is cut between characters. */
        for (i = 0; i < 300; i++)
                strcat(name, "\xc3\xa9");
        (void) snprintf(inst, sizeof(inst), "{\"%s\":1}", name);
        r = validate_text("{\"properties\":{\"a\":{}},\"additionalProperties\":false}", inst, &err);
        cr_assert_eq(r, -EINVAL);
        cr_assert(strncmp(err.msg, "unexpected argument '\xc3\xa9\xc3\xa9",
                          strlen("unexpected argument '\xc3\xa9\xc3\xa9")) == 0,
                  "%s", err.msg);
        cr_assert(strstr(err.msg, "...' (the tool takes: a)") != NULL, "%s", err.msg);
        s = json_string(err.msg);
        cr_assert(s, "not valid UTF-8: %s", err.msg);
        json_decref(s);

        /* Control characters in a name are shown as '?'. */
        r = validate_text("{\"additionalProperties\":false}", "{\"a\\nb\":1}", &err);
        cr_assert_eq(r, -EINVAL);
        cr_assert_str_eq(err.msg, "unexpected argument 'a?b' (the tool takes no arguments)");

        /* A long enum is cut with "..." but still says what was sent. */
        r = validate_text(
                "{\"enum\":[\"aaaaaaaaaaaaaaaaaaaa\",\"bbbbbbbbbbbbbbbbbbbb\","
                "\"cccccccccccccccccccc\",\"dddddddddddddddddddd\",\"eeeeeeeeeeeeeeeeeee\","
                "\"ffffffffffffffffffff\",\"gggggggggggggggggggg\",\"hhhhhhhhhhhhhhhhhhh\","
                "\"iiiiiiiiiiiiiiiiiiii\",\"jjjjjjjjjjjjjjjjjjjj\"]}",
                "\"zz\"", &err);
        cr_assert_eq(r, -EINVAL);
        cr_assert(strstr(err.msg, "...") && strstr(err.msg, ", got \"zz\""), "%s", err.msg);

        /* A NULL err is allowed. */
        cr_assert_eq(validate_text("{\"type\":\"string\"}", "1", NULL), -EINVAL);
}

/* ---- whole tool schemas ------------------------------------------------------------------ */

/* Hand-written, draft-07, as an internal MCP server would publish get_user_churn_metrics. */
#define CHURN_SCHEMA                                                                               \
        "{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"type\":\"object\","            \
        "\"properties\":{"                                                                         \
        "\"user_id\":{\"type\":\"string\",\"minLength\":1,\"description\":\"the user\"},"          \
        "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":365,\"default\":30},"            \
        "\"filters\":{\"type\":\"object\",\"properties\":{"                                        \
        "\"limit\":{\"type\":\"integer\",\"maximum\":100},"                                        \
        "\"segments\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"         \
        "\"name\":{\"type\":\"string\"},\"weight\":{\"type\":\"number\",\"exclusiveMinimum\":0}}," \
        "\"required\":[\"name\"],\"additionalProperties\":false}}},"                               \
        "\"additionalProperties\":false},"                                                         \
        "\"mode\":{\"type\":\"string\",\"enum\":[\"a\",\"b\"]}},"                                  \
        "\"required\":[\"user_id\"],\"additionalProperties\":false}"

Test(jsonschema, hand_written_tool_schema)
{
        static const struct vcase cases[] = {
                { CHURN_SCHEMA,
                  "{\"user_id\":\"u1\",\"days\":30,\"mode\":\"a\",\"filters\":{\"limit\":10,"
                  "\"segments\":[{\"name\":\"eu\",\"weight\":0.5},{\"name\":\"us\"}]}}",
                  0, NULL },
                { CHURN_SCHEMA, "{\"user_id\":\"u1\"}", 0, NULL },
                { CHURN_SCHEMA, "{}", -EINVAL, "argument 'user_id' is required" },
                { CHURN_SCHEMA, "[\"u1\"]", -EINVAL, "arguments: must be an object, got an array" },
                { CHURN_SCHEMA, "{\"user_id\":\"u1\",\"filters\":{\"limit\":500}}", -EINVAL,
                  "argument 'filters.limit': must be at most 100, got 500" },
                { CHURN_SCHEMA, "{\"user_id\":\"u1\",\"mode\":\"c\"}", -EINVAL,
                  "argument 'mode': must be one of \"a\", \"b\", got \"c\"" },
                { CHURN_SCHEMA, "{\"user_id\":\"u1\",\"foo\":1}", -EINVAL,
                  "unexpected argument 'foo' (the tool takes: user_id, days, filters, mode)" },
                { CHURN_SCHEMA, "{\"user_id\":\"u1\",\"days\":\"30\"}", -EINVAL,
                  "argument 'days': must be an integer, got \"30\"" },
                { CHURN_SCHEMA, "{\"user_id\":\"\"}", -EINVAL,
                  "argument 'user_id': must be at least 1 character long, got 0" },
                { CHURN_SCHEMA,
                  "{\"user_id\":\"u1\",\"filters\":{\"segments\":[{\"name\":\"x\"},{\"weight\":1}]}"
                  "}",
                  -EINVAL, "argument 'filters.segments[1].name' is required" },
                { CHURN_SCHEMA,
                  "{\"user_id\":\"u1\",\"filters\":{\"segments\":[{\"name\":\"x\",\"weight\":0}]}}",
                  -EINVAL, "argument 'filters.segments[0].weight': must be greater than 0, got 0" },
                { CHURN_SCHEMA,
                  "{\"user_id\":\"u1\",\"filters\":{\"segments\":[{\"name\":\"x\",\"w\":0}]}}",
                  -EINVAL,
                  "unexpected argument 'filters.segments[0].w' (allowed here: name, weight)" },
        };
        RUN(cases);
}

/* As zod-to-json-schema writes z.object({...}): unions of primitives become type arrays,
 * .nullable() adds "null", .optional() leaves the name out of required. */
#define ZOD_SCHEMA                                                                                 \
        "{\"type\":\"object\",\"properties\":{"                                                    \
        "\"query\":{\"type\":\"string\",\"minLength\":1},"                                         \
        "\"limit\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1000,\"default\":10},"  \
        "\"id\":{\"type\":[\"string\",\"number\"]},"                                               \
        "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":5},"            \
        "\"cursor\":{\"type\":[\"string\",\"null\"]},"                                             \
        "\"sort\":{\"type\":\"string\",\"enum\":[\"asc\",\"desc\"]},"                              \
        "\"email\":{\"type\":\"string\",\"format\":\"email\"}},"                                   \
        "\"required\":[\"query\"],\"additionalProperties\":false,"                                 \
        "\"$schema\":\"http://json-schema.org/draft-07/schema#\"}"

Test(jsonschema, zod_style_tool_schema)
{
        static const struct vcase cases[] = {
                { ZOD_SCHEMA,
                  "{\"query\":\"churn\",\"limit\":10,\"id\":7,\"tags\":[\"a\"],\"cursor\":null,"
                  "\"sort\":\"asc\",\"email\":\"a@b\"}",
                  0, NULL },
                { ZOD_SCHEMA, "{\"query\":\"q\",\"id\":\"x7\",\"cursor\":\"c\"}", 0, NULL },
                { ZOD_SCHEMA, "{\"query\":\"q\",\"id\":true}", -EINVAL,
                  "argument 'id': must be a string or a number, got true" },
                { ZOD_SCHEMA, "{\"query\":\"q\",\"limit\":0}", -EINVAL,
                  "argument 'limit': must be greater than 0, got 0" },
                { ZOD_SCHEMA, "{\"query\":\"q\",\"tags\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]}",
                  -EINVAL, "argument 'tags': must have at most 5 items, got 6" },
                { ZOD_SCHEMA, "{\"query\":\"q\",\"tags\":[\"a\",2]}", -EINVAL,
                  "argument 'tags[1]': must be a string, got 2" },
                { ZOD_SCHEMA, "{\"query\":\"q\",\"sort\":\"up\"}", -EINVAL,
                  "argument 'sort': must be one of \"asc\", \"desc\", got \"up\"" },
        };
        RUN(cases);
}

/* As pydantic v2 writes model_json_schema() for
 *   class Status(str, Enum): active = "active"; churned = "churned"
 *   class Filter(BaseModel): status: Status; limit: Optional[conint(le=100)] = None
 *   class ChurnArgs(BaseModel): user_id: str; filter: Optional[Filter] = None;
 *                               note: Optional[str] = None; ids: list[int] = []
 * Optional[X] is anyOf [X, {"type": "null"}] and nested models are $refs into $defs. */
#define PYDANTIC_SCHEMA                                                                            \
        "{\"$defs\":{"                                                                             \
        "\"Filter\":{\"properties\":{"                                                             \
        "\"status\":{\"$ref\":\"#/$defs/Status\"},"                                                \
        "\"limit\":{\"anyOf\":[{\"maximum\":100,\"type\":\"integer\"},{\"type\":\"null\"}],"       \
        "\"default\":null,\"title\":\"Limit\"}},"                                                  \
        "\"required\":[\"status\"],\"title\":\"Filter\",\"type\":\"object\"},"                     \
        "\"Status\":{\"enum\":[\"active\",\"churned\"],\"title\":\"Status\",\"type\":\"string\"}}" \
        ","                                                                                        \
        "\"properties\":{"                                                                         \
        "\"user_id\":{\"title\":\"User Id\",\"type\":\"string\"},"                                 \
        "\"filter\":{\"anyOf\":[{\"$ref\":\"#/$defs/Filter\"},{\"type\":\"null\"}],"               \
        "\"default\":null},"                                                                       \
        "\"note\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"default\":null,"        \
        "\"title\":\"Note\"},"                                                                     \
        "\"ids\":{\"default\":[],\"items\":{\"type\":\"integer\"},\"title\":\"Ids\","              \
        "\"type\":\"array\"}},"                                                                    \
        "\"required\":[\"user_id\"],\"title\":\"ChurnArgs\",\"type\":\"object\"}"

Test(jsonschema, pydantic_style_tool_schema)
{
        static const struct vcase cases[] = {
                { PYDANTIC_SCHEMA, "{\"user_id\":\"u\"}", 0, NULL },
                { PYDANTIC_SCHEMA, "{\"user_id\":\"u\",\"filter\":null,\"note\":null,\"ids\":[]}",
                  0, NULL },
                { PYDANTIC_SCHEMA,
                  "{\"user_id\":\"u\",\"filter\":{\"status\":\"churned\",\"limit\":50},"
                  "\"note\":\"n\",\"ids\":[1,2]}",
                  0, NULL },
                /* pydantic allows unknown members unless the model forbids them. */
                { PYDANTIC_SCHEMA, "{\"user_id\":\"u\",\"extra\":1}", 0, NULL },
                { PYDANTIC_SCHEMA, "{\"user_id\":\"u\",\"note\":5}", -EINVAL,
                  "argument 'note': matches none of the 2 allowed forms (expected a string; "
                  "expected null)" },
                { PYDANTIC_SCHEMA, "{\"user_id\":\"u\",\"filter\":\"active\"}", -EINVAL,
                  "argument 'filter': matches none of the 2 allowed forms (expected an object; "
                  "expected null)" },
                /* Optional[Filter] given an object: Filter's own failure, at its own path. */
                { PYDANTIC_SCHEMA, "{\"user_id\":\"u\",\"filter\":{\"status\":\"gone\"}}", -EINVAL,
                  "argument 'filter.status': must be one of \"active\", \"churned\", got "
                  "\"gone\"" },
                { PYDANTIC_SCHEMA, "{\"user_id\":\"u\",\"filter\":{}}", -EINVAL,
                  "argument 'filter.status' is required" },
                { PYDANTIC_SCHEMA,
                  "{\"user_id\":\"u\",\"filter\":{\"status\":\"active\",\"limit\":500}}", -EINVAL,
                  "argument 'filter.limit': must be at most 100, got 500" },
                { PYDANTIC_SCHEMA, "{\"user_id\":\"u\",\"ids\":[1,\"2\"]}", -EINVAL,
                  "argument 'ids[1]': must be an integer, got \"2\"" },
        };
        RUN(cases);
}

/* A tagged union (oneOf with a const discriminator), as TypeScript servers write them. */
Test(jsonschema, tagged_union)
{
        static const char *const schema =
                "{\"type\":\"object\",\"properties\":{\"shape\":{\"oneOf\":["
                "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},"
                "\"r\":{\"type\":\"number\"}},\"required\":[\"kind\",\"r\"]},"
                "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"square\"},"
                "\"side\":{\"type\":\"number\"}},\"required\":[\"kind\",\"side\"]}]}}}";
        const struct vcase cases[] = {
                { schema, "{\"shape\":{\"kind\":\"circle\",\"r\":1}}", 0, NULL },
                { schema, "{\"shape\":{\"kind\":\"square\",\"side\":2}}", 0, NULL },
                { schema, "{\"shape\":{\"kind\":\"circle\"}}", -EINVAL,
                  "argument 'shape': matches none of the 2 allowed forms ('r' is required; 'side' "
                  "is required)" },
                { schema, "{\"shape\":{\"kind\":\"circle\",\"side\":2}}", -EINVAL,
                  "argument 'shape': matches none of the 2 allowed forms ('r' is required; 'kind': "
                  "must be \"square\", got \"circle\")" },
        };
        RUN(cases);
}

/* Two threads validating at once share nothing: each call has its own patterns and state. */
struct thread_arg {
        json_t *schema;
        int failures;
};

static void *validate_many(void *p)
{
        struct thread_arg *a = p;
        json_t *good = json_pack("{s:s}", "code", "ab-12"), *bad = json_pack("{s:s}", "code", "x");
        struct airlock_error err;
        int i;

        for (i = 0; i < 300; i++) {
                if (jsonschema_validate(a->schema, good, &err) != 0)
                        a->failures++;
                if (jsonschema_validate(a->schema, bad, &err) != -EINVAL ||
                    strcmp(err.msg, "argument 'code': must match the pattern '^[a-z]+-\\d+$', got "
                                    "\"x\"") != 0)
                        a->failures++;
        }
        json_decref(good);
        json_decref(bad);
        return NULL;
}

Test(jsonschema, concurrent_calls)
{
        json_t *schema = json_loads("{\"properties\":{\"code\":{\"pattern\":\"^[a-z]+-\\\\d+$\"}}}",
                                    0, NULL);
        struct thread_arg args[4];
        pthread_t threads[4];
        int i;

        cr_assert(schema);
        for (i = 0; i < 4; i++) {
                args[i] = (struct thread_arg){ schema, 0 };
                cr_assert_eq(pthread_create(&threads[i], NULL, validate_many, &args[i]), 0);
        }
        for (i = 0; i < 4; i++) {
                cr_assert_eq(pthread_join(threads[i], NULL), 0);
                cr_expect_eq(args[i].failures, 0, "thread %d", i);
        }
        json_decref(schema);
}
