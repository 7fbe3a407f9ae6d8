/* Validating tool arguments against the tool's JSON Schema (its MCP "inputSchema") before they
 * reach the server that runs the tool. The arguments come from a model or from sandboxed code,
 * so this is a guard on untrusted input: the work is bounded, and a failure is one short
 * sentence naming the argument, written for the model or the Python code to correct its call.
 *
 * Supported: the validation keywords of drafts 4 to 2020-12 that tool schemas use (as written
 * by zod-to-json-schema, pydantic and hand): type, enum, const, properties, required,
 * additionalProperties, patternProperties, propertyNames, minProperties, maxProperties, items
 * (schema or tuple array), prefixItems, additionalItems, minItems, maxItems, uniqueItems,
 * minimum, maximum, exclusiveMinimum and exclusiveMaximum (number and draft-4 boolean forms),
 * multipleOf, minLength and maxLength (in Unicode code points), pattern (ECMA-262 as PCRE2 reads
 * it; a pattern that does not compile is ignored), allOf, anyOf, oneOf, not, if/then/else,
 * $ref to local JSON pointers ("#", "#/$defs/x", "#/definitions/x", with ~0 ~1 escapes and
 * percent-encoding), boolean schemas and OpenAPI's "nullable". Other keywords (format, default,
 * title, description, unevaluatedProperties, contains...) are ignored, as validators do, and so
 * is a keyword whose value has the wrong type. */
#pragma once

#include "base/error.h"

#include <jansson.h>

/* An instance nested deeper than this many arrays and objects is refused (-E2BIG). */
#define JSONSCHEMA_DEPTH_MAX 64
/* At most this many $ref hops are followed without moving into the instance; more is taken for
 * a $ref cycle (-ELOOP). A recursive schema (a tree) is fine: each level resets the count. */
#define JSONSCHEMA_REF_MAX 32
/* Schema keywords nested inside each other while checking one call, e.g. allOf in allOf. */
#define JSONSCHEMA_NESTING_MAX 512
/* Subschemas applied, item pairs compared (uniqueItems) and patterns matched in one call: the
 * bound on the work a hostile schema (a $ref graph that fans out) or a huge instance can cause. */
#define JSONSCHEMA_STEPS_MAX 1000000u

/* Validates instance against schema, both borrowed. A NULL instance counts as {} (a call
 * without arguments); a NULL schema, {} or true accepts anything within the depth bound.
 *
 * Returns 0 when instance is valid. Otherwise err (when non-NULL) gets one sentence naming the
 * first failing location as an argument path ('filters.limit', 'rows[2].name'; top-level object
 * members are the arguments) and the reason:
 *   -EINVAL   the arguments do not match, e.g. "argument 'filters.limit': must be at most 100,
 *             got 500", "argument 'user_id' is required", "argument 'mode': must be one of
 *             \"a\", \"b\", got \"c\"", "unexpected argument 'foo' (the tool takes: user_id,
 *             days)", "argument 'x': matches none of the 2 allowed forms (expected a string;
 *             expected an integer)". Also when they cannot be checked: a $ref that is not a
 *             local pointer or points nowhere, a pattern too costly to match (deny, not allow).
 *             When only one of the anyOf/oneOf forms has the instance's type (pydantic's
 *             Optional[Model] is anyOf [Model, null]), its own failure is reported instead,
 *             with its deeper path.
 *   -E2BIG    the instance nests deeper than JSONSCHEMA_DEPTH_MAX, or checking it takes more
 *             than JSONSCHEMA_STEPS_MAX steps or JSONSCHEMA_NESTING_MAX nested subschemas.
 *   -ELOOP    more than JSONSCHEMA_REF_MAX $ref hops at one place of the instance.
 *   -ENOMEM   out of memory.
 * -ENOTSUP is never returned: unknown keywords are ignored. Thread-safe: nothing is shared
 * between calls (patterns are compiled once per call and freed before it returns). */
int jsonschema_validate(const json_t *schema, const json_t *instance, struct airlock_error *err);
