/* A JSON Schema validator for the arguments of internal tools (see jsonschema.h). One recursive
 * descent applies a subschema to a value. The instance path, the first failure and the compiled
 * patterns live in a struct validation on the caller's stack, so a check allocates nothing but
 * what PCRE2 needs, and every message is cut at a UTF-8 boundary to fit struct airlock_error. */
#include "jsonschema.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP 160
#define REASON_CAP 320
#define EXPECTED_CAP 96
#define BRIEF_CAP 100
#define LIST_CAP 200
/* A string value shown in a message ("got \"...\"") is cut after this many characters. */
#define VALUE_SHOWN_MAX 40
#define PATTERN_CACHE_MAX 16
/* PCRE2 backtracks: these bound one match, so a pattern like (a+)+$ cannot stall the daemon. */
#define PATTERN_MATCH_LIMIT 1000000u
#define PATTERN_HEAP_LIMIT_KIB 16384u

/* ---- bounded text ----------------------------------------------------------------------- */

/* Text that never outgrows its buffer: an append past the end is cut at a character boundary
 * and marks the text full, so a message stays valid UTF-8 (jansson refuses anything else). */
struct text {
        char *buf;
        size_t size, len;
        bool full;
};

struct text_mark {
        size_t len;
        bool full;
};

static void text_init(struct text *t, char *buf, size_t size)
{
        *t = (struct text){ .buf = buf, .size = size };
        buf[0] = '\0';
}

static void text_cut(struct text *t, size_t len)
{
        t->len = utf8_complete_prefix(t->buf, len);
        t->buf[t->len] = '\0';
        t->full = true;
}

static void text_append(struct text *t, const char *s, size_t n)
{
        if (t->full)
                return;
        if (n < t->size - t->len) {
                memcpy(t->buf + t->len, s, n);
                t->len += n;
                t->buf[t->len] = '\0';
                return;
        }
        memcpy(t->buf + t->len, s, t->size - 1 - t->len);
        text_cut(t, t->size - 1);
}

static void text_vadd(struct text *t, const char *fmt, va_list ap)
        __attribute__((format(printf, 2, 0)));
static void text_vadd(struct text *t, const char *fmt, va_list ap)
{
        int n;

        if (t->full)
                return;
        n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
        if (n < 0)
                t->buf[t->len] = '\0';
        else if ((size_t) n < t->size - t->len)
                t->len += (size_t) n;
        else
                text_cut(t, t->size - 1);
}

static void text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(struct text *t, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        text_vadd(t, fmt, ap);
        va_end(ap);
}

/* Ends a text that was cut with "...", so the reader knows something is missing. */
static void text_end(struct text *t)
{
        if (!t->full)
                return;
        text_cut(t, t->len + 4 <= t->size ? t->len : t->size - 4);
        memcpy(t->buf + t->len, "...", 4);
        t->len += 3;
}

static struct text_mark text_mark(const struct text *t)
{
        return (struct text_mark){ t->len, t->full };
}

static void text_restore(struct text *t, struct text_mark m)
{
        t->len = m.len;
        t->full = m.full;
        t->buf[t->len] = '\0';
}

static void text_real(struct text *t, double d)
{
        char buf[32];

        /* The shortest form that reads back as the same double: 0.1, not 0.10000000000000001. */
        (void) snprintf(buf, sizeof(buf), "%.15g", d);
        if (strtod(buf, NULL) != d)
                (void) snprintf(buf, sizeof(buf), "%.17g", d);
        text_add(t, "%s", buf);
}

/* A string as a JSON literal, cut after VALUE_SHOWN_MAX characters. */
static void text_string(struct text *t, const char *s, size_t len)
{
        size_t i, chars = 0;

        text_append(t, "\"", 1);
        for (i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];

                if ((c & 0xc0) != 0x80 && chars++ == VALUE_SHOWN_MAX) {
                        text_append(t, "...", 3);
                        break;
                }
                if (c == '"' || c == '\\')
                        text_add(t, "\\%c", c);
                else if (c == '\n')
                        text_append(t, "\\n", 2);
                else if (c < 0x20 || c == 0x7f)
                        text_add(t, "\\u%04x", c);
                else
                        text_append(t, s + i, 1);
        }
        text_append(t, "\"", 1);
}

/* A value for a message: scalars as JSON; containers by their type ("an object"), or with
 * as_json as compact JSON when that is short (an enum of objects). */
static void text_value(struct text *t, const json_t *x, bool as_json)
{
        _cleanup_free_ char *dumped = NULL;
        size_t n = 0;

        switch (json_typeof(x)) {
        case JSON_STRING:
                text_string(t, json_string_value(x), json_string_length(x));
                break;
        case JSON_INTEGER:
                text_add(t, "%" JSON_INTEGER_FORMAT, json_integer_value(x));
                break;
        case JSON_REAL:
                text_real(t, json_real_value(x));
                break;
        case JSON_TRUE:
                text_add(t, "true");
                break;
        case JSON_FALSE:
                text_add(t, "false");
                break;
        case JSON_NULL:
                text_add(t, "null");
                break;
        case JSON_OBJECT:
        case JSON_ARRAY:
                dumped = as_json ? json_dump_text(x, JSON_COMPACT, &n) : NULL;
                if (dumped && n <= 64)
                        text_append(t, dumped, n);
                else
                        text_add(t, "%s", json_type_name(x));
                break;
        }
}

/* ---- the state of one call -------------------------------------------------------------- */

enum failure_kind {
        FAILURE_OTHER,      /* "argument 'p': <reason>" */
        FAILURE_TYPE,       /* the same; `expected` names the types that would do */
        FAILURE_REQUIRED,   /* "argument 'p' is required" */
        FAILURE_UNEXPECTED, /* "unexpected argument 'p' <reason>" */
        FAILURE_FORBIDDEN,  /* "argument 'p' is not allowed" (a false schema) */
        FAILURE_LIMIT,      /* a bound was hit; reason is the whole sentence */
};

struct failure {
        enum failure_kind kind;
        char at[PATH_CAP + 4]; /* the instance path, "" for the arguments themselves */
        char reason[REASON_CAP];
        char expected[EXPECTED_CAP];
};

struct pattern {
        const char *source; /* borrowed from the schema: the cache key */
        pcre2_code *code;   /* NULL when the pattern does not compile */
};

struct validation {
        const json_t *root; /* the document that "#/..." references point into */
        char path_buf[PATH_CAP];
        struct text path; /* where in the instance we are: "filters.items[2]" */
        unsigned nesting;
        unsigned ref_hops; /* $refs followed since the last step into the instance */
        unsigned long steps;
        struct failure failure; /* the last failure, valid once a check returned -EINVAL */

        struct pattern patterns[PATTERN_CACHE_MAX];
        size_t n_patterns;
        pcre2_match_data *match_data;
        pcre2_match_context *match_context;
};

static struct text failure_begin(struct validation *v, enum failure_kind kind)
{
        struct text t;

        v->failure.kind = kind;
        (void) snprintf(v->failure.at, sizeof(v->failure.at), "%s%s", v->path.buf,
                        v->path.full ? "..." : "");
        v->failure.expected[0] = '\0';
        text_init(&t, v->failure.reason, sizeof(v->failure.reason));
        return t;
}

static int failure_end(struct text *t)
{
        text_end(t);
        return -EINVAL;
}

static int fail(struct validation *v, enum failure_kind kind, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int fail(struct validation *v, enum failure_kind kind, const char *fmt, ...)
{
        struct text t = failure_begin(v, kind);
        va_list ap;

        va_start(ap, fmt);
        text_vadd(&t, fmt, ap);
        va_end(ap);
        return failure_end(&t);
}

/* "must be at most 100, got 500"; what is "" for a const. */
static int fail_value(struct validation *v, const char *what, const json_t *limit,
                      const json_t *got)
{
        struct text t = failure_begin(v, FAILURE_OTHER);

        text_add(&t, "must be %s%s", what, *what ? " " : "");
        text_value(&t, limit, true);
        text_add(&t, ", got ");
        text_value(&t, got, true);
        return failure_end(&t);
}

/* A bound was hit: returns r (-E2BIG, -ELOOP) with a sentence that names the place. */
static int fail_limit(struct validation *v, int r, const char *what)
{
        struct text t = failure_begin(v, FAILURE_LIMIT);

        if (v->path.len == 0)
                text_add(&t, "%s, at the arguments", what);
        else
                text_add(&t, "%s, at argument '%s'", what, v->failure.at);
        text_end(&t);
        return r;
}

/* Counts one unit of work (JSONSCHEMA_STEPS_MAX). */
static int take_step(struct validation *v)
{
        if (++v->steps > JSONSCHEMA_STEPS_MAX)
                return fail_limit(v, -E2BIG, "checking the arguments takes too many steps");
        return 0;
}

static struct text_mark path_push_key(struct validation *v, const char *key)
{
        struct text_mark m = text_mark(&v->path);

        if (v->path.len > 0)
                text_append(&v->path, ".", 1);
        /* Names come from the caller: control characters would garble the message. */
        for (; *key && !v->path.full; key++) {
                unsigned char c = (unsigned char) *key;
                text_append(&v->path, c < 0x20 || c == 0x7f ? "?" : key, 1);
        }
        return m;
}

static struct text_mark path_push_index(struct validation *v, size_t i)
{
        struct text_mark m = text_mark(&v->path);

        text_add(&v->path, "[%zu]", i);
        return m;
}

/* ---- values ----------------------------------------------------------------------------- */

/* Numbers compare by value whatever jansson made of them: 1 and 1.0 are equal in JSON Schema. */
static int number_cmp(const json_t *a, const json_t *b)
{
        double x, y;

        if (json_is_integer(a) && json_is_integer(b)) {
                json_int_t i = json_integer_value(a), j = json_integer_value(b);
                return (i > j) - (i < j);
        }
        x = json_number_value(a);
        y = json_number_value(b);
        return (x > y) - (x < y);
}

/* JSON Schema equality (enum, const, uniqueItems). Recursion stops at the shallower value, and
 * every instance is at most JSONSCHEMA_DEPTH_MAX deep. */
static bool values_equal(const json_t *a, const json_t *b)
{
        const char *key;
        json_t *x;
        size_t i;

        if (json_is_number(a) && json_is_number(b))
                return number_cmp(a, b) == 0;
        if (json_typeof(a) != json_typeof(b))
                return false;
        switch (json_typeof(a)) {
        case JSON_OBJECT:
                if (json_object_size(a) != json_object_size(b))
                        return false;
                /* json_object_foreach() takes a non-const object but only reads it. */
                json_object_foreach ((json_t *) a, key, x) {
                        const json_t *y = json_object_get(b, key);
                        if (!y || !values_equal(x, y))
                                return false;
                }
                return true;
        case JSON_ARRAY:
                if (json_array_size(a) != json_array_size(b))
                        return false;
                json_array_foreach (a, i, x)
                        if (!values_equal(x, json_array_get(b, i)))
                                return false;
                return true;
        case JSON_STRING:
                return json_string_length(a) == json_string_length(b) &&
                       memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) ==
                               0;
        case JSON_INTEGER:
        case JSON_REAL:
        case JSON_TRUE:
        case JSON_FALSE:
        case JSON_NULL:
                break;
        }
        return true;
}

static bool is_integer(const json_t *x)
{
        double d;

        if (json_is_integer(x))
                return true;
        if (!json_is_real(x))
                return false;
        d = json_real_value(x);
        return d == floor(d);
}

/* A non-negative integer keyword value such as minLength (3 and 3.0 both count). */
static bool get_count(const json_t *schema, const char *key, size_t *ret)
{
        const json_t *k = json_object_get(schema, key);
        double d;

        if (!json_is_number(k) || !is_integer(k))
                return false;
        d = json_number_value(k);
        if (d < 0)
                return false;
        *ret = d >= (double) SIZE_MAX ? SIZE_MAX : (size_t) d;
        return true;
}

static bool is_schema(const json_t *s)
{
        return json_is_object(s) || json_is_boolean(s);
}

/* ---- patterns --------------------------------------------------------------------------- */

static void pcre2_code_freep(pcre2_code **p)
{
        pcre2_code_free(*p);
}

/* Whether subject matches the ECMA-262 pattern source, unanchored as JSON Schema says. Returns 1
 * or 0; -ENOEXEC when the pattern does not compile (callers ignore it); -E2BIG when matching hit
 * PCRE2's limits; -EILSEQ when it failed otherwise (a subject that is not UTF-8); -ENOMEM. */
static int pattern_match(struct validation *v, const char *source, const char *subject, size_t len)
{
        _cleanup_(pcre2_code_freep) pcre2_code *uncached = NULL;
        pcre2_code *code = NULL;
        size_t i;
        int rc;

        for (i = 0; i < v->n_patterns; i++)
                if (v->patterns[i].source == source)
                        break;
        if (i < v->n_patterns) {
                code = v->patterns[i].code;
        } else {
                PCRE2_SIZE offset;
                int error;

                /* ECMA-262's $ matches only at the very end; PCRE's also before a final "\n",
                 * which would let "abc\n" through ^[a-z]+$. ALT_BSUX reads \uHHHH and \xHH
                 * and ALLOW_EMPTY_CLASS reads [] and [^] as JavaScript does; \C, which could
                 * split a character, does not exist there. */
                code = pcre2_compile((PCRE2_SPTR) source, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX |
                                             PCRE2_ALLOW_EMPTY_CLASS | PCRE2_NEVER_BACKSLASH_C,
                                     &error, &offset, NULL);
                if (v->n_patterns < PATTERN_CACHE_MAX)
                        v->patterns[v->n_patterns++] = (struct pattern){ source, code };
                else
                        uncached = code;
        }
        if (!code)
                return -ENOEXEC;

        if (!v->match_data) {
                v->match_data = pcre2_match_data_create(1, NULL);
                if (!v->match_data)
                        return -ENOMEM;
        }
        if (!v->match_context) {
                v->match_context = pcre2_match_context_create(NULL);
                if (!v->match_context)
                        return -ENOMEM;
                (void) pcre2_set_match_limit(v->match_context, PATTERN_MATCH_LIMIT);
                (void) pcre2_set_heap_limit(v->match_context, PATTERN_HEAP_LIMIT_KIB);
        }
        rc = pcre2_match(code, (PCRE2_SPTR) subject, len, 0, 0, v->match_data, v->match_context);
        if (rc >= 0)
                return 1;
        if (rc == PCRE2_ERROR_NOMATCH)
                return 0;
        if (rc == PCRE2_ERROR_NOMEMORY)
                return -ENOMEM;
        if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
            rc == PCRE2_ERROR_DEPTHLIMIT)
                return -E2BIG;
        return -EILSEQ;
}

/* Why a value could not be checked against a pattern; matching errors deny, never allow. */
static const char *pattern_trouble(int r)
{
        return r == -E2BIG ? "matching takes too long" : "matching failed";
}

/* ---- keywords --------------------------------------------------------------------------- */

static int validate(struct validation *v, const json_t *schema, const json_t *inst);
static void text_brief(struct text *t, const struct validation *v);

/* Applies schema to a member or item of the instance: the path grows by one step, and the
 * $ref hop count starts again, since moving into the instance is progress. */
static int validate_child(struct validation *v, const json_t *schema, const json_t *inst,
                          struct text_mark parent)
{
        unsigned hops = v->ref_hops;
        int r;

        v->ref_hops = 0;
        r = validate(v, schema, inst);
        v->ref_hops = hops;
        text_restore(&v->path, parent);
        return r;
}

static const char *type_phrase(const char *type)
{
        static const char *const phrases[][2] = {
                { "string", "a string" },   { "integer", "an integer" }, { "number", "a number" },
                { "boolean", "a boolean" }, { "object", "an object" },   { "array", "an array" },
                { "null", "null" },
        };
        size_t i;

        for (i = 0; i < ELEMENTSOF(phrases); i++)
                if (strcmp(type, phrases[i][0]) == 0)
                        return phrases[i][1];
        return NULL;
}

static bool type_matches(const char *type, const json_t *inst)
{
        if (strcmp(type, "integer") == 0)
                return is_integer(inst);
        if (strcmp(type, "number") == 0)
                return json_is_number(inst);
        if (strcmp(type, "string") == 0)
                return json_is_string(inst);
        if (strcmp(type, "boolean") == 0)
                return json_is_boolean(inst);
        if (strcmp(type, "object") == 0)
                return json_is_object(inst);
        if (strcmp(type, "array") == 0)
                return json_is_array(inst);
        if (strcmp(type, "null") == 0)
                return json_is_null(inst);
        /* Draft 3's "any"; any other unknown name matches nothing (deny when in doubt). */
        return strcmp(type, "any") == 0;
}

static void text_type(struct text *t, const char *type)
{
        const char *phrase = type_phrase(type);

        if (phrase) {
                text_add(t, "%s", phrase);
        } else {
                text_add(t, "of type ");
                text_string(t, type, strlen(type));
        }
}

static int check_type(struct validation *v, const json_t *type, const json_t *inst)
{
        const json_t *x;
        struct text expected, t;
        size_t i, n;

        if (json_is_string(type)) {
                if (type_matches(json_string_value(type), inst))
                        return 0;
        } else if (json_is_array(type) && json_array_size(type) > 0) {
                json_array_foreach (type, i, x)
                        if (json_is_string(x) && type_matches(json_string_value(x), inst))
                                return 0;
        } else {
                return 0;
        }

        t = failure_begin(v, FAILURE_TYPE);
        text_init(&expected, v->failure.expected, sizeof(v->failure.expected));
        if (json_is_string(type)) {
                text_type(&expected, json_string_value(type));
        } else {
                n = json_array_size(type);
                json_array_foreach (type, i, x) {
                        if (i > 0)
                                text_add(&expected, i + 1 == n ? " or " : ", ");
                        text_type(&expected, json_is_string(x) ? json_string_value(x) : "?");
                }
        }
        text_end(&expected);
        text_add(&t, "must be %s, got ", expected.buf);
        text_value(&t, inst, false);
        return failure_end(&t);
}

static int check_enum(struct validation *v, const json_t *en, const json_t *inst)
{
        char list_buf[LIST_CAP];
        struct text list, t;
        const json_t *x;
        size_t i;

        if (json_array_size(en) == 0)
                return 0;
        json_array_foreach (en, i, x)
                if (values_equal(x, inst))
                        return 0;

        text_init(&list, list_buf, sizeof(list_buf));
        json_array_foreach (en, i, x) {
                if (i > 0)
                        text_add(&list, ", ");
                text_value(&list, x, true);
        }
        text_end(&list);
        t = failure_begin(v, FAILURE_OTHER);
        text_add(&t, "must be %s%s, got ", json_array_size(en) > 1 ? "one of " : "", list.buf);
        text_value(&t, inst, true);
        return failure_end(&t);
}

static int check_number(struct validation *v, const json_t *s, const json_t *inst)
{
        const json_t *min = json_object_get(s, "minimum"), *max = json_object_get(s, "maximum");
        const json_t *xmin = json_object_get(s, "exclusiveMinimum");
        const json_t *xmax = json_object_get(s, "exclusiveMaximum");
        const json_t *m = json_object_get(s, "multipleOf");
        bool multiple;

        /* Draft 4 writes exclusiveMinimum: true next to minimum; later drafts give a number. */
        if (json_is_number(min)) {
                bool excl = json_is_true(xmin);
                int c = number_cmp(inst, min);
                if (c < 0 || (excl && c == 0))
                        return fail_value(v, excl ? "greater than" : "at least", min, inst);
        }
        if (json_is_number(max)) {
                bool excl = json_is_true(xmax);
                int c = number_cmp(inst, max);
                if (c > 0 || (excl && c == 0))
                        return fail_value(v, excl ? "less than" : "at most", max, inst);
        }
        if (json_is_number(xmin) && number_cmp(inst, xmin) <= 0)
                return fail_value(v, "greater than", xmin, inst);
        if (json_is_number(xmax) && number_cmp(inst, xmax) >= 0)
                return fail_value(v, "less than", xmax, inst);

        if (!json_is_number(m) || !(json_number_value(m) > 0))
                return 0;
        if (json_is_integer(m) && json_is_integer(inst)) {
                multiple = json_integer_value(inst) % json_integer_value(m) == 0;
        } else {
                /* Binary fractions are inexact (0.3 / 0.1 is 2.9999999999999996): allow a
                 * relative error of 1e-9 on the quotient. */
                double q = json_number_value(inst) / json_number_value(m);
                multiple = isfinite(q) && fabs(q - nearbyint(q)) <= 1e-9 * fmax(1.0, fabs(q));
        }
        if (!multiple)
                return fail_value(v, "a multiple of", m, inst);
        return 0;
}

/* A pattern's source for a message, cut to a readable length. */
static void text_pattern(struct text *t, const char *source)
{
        char buf[84];
        struct text p;

        text_init(&p, buf, sizeof(buf));
        text_add(&p, "%s", source);
        text_end(&p);
        text_add(t, "'%s'", p.buf);
}

static int check_string(struct validation *v, const json_t *s, const json_t *inst)
{
        const char *str = json_string_value(inst), *source;
        size_t len = json_string_length(inst), chars = 0, i, limit;
        const json_t *pattern = json_object_get(s, "pattern");
        struct text t;
        int r;

        for (i = 0; i < len; i++)
                chars += ((unsigned char) str[i] & 0xc0) != 0x80;
        if (get_count(s, "minLength", &limit) && chars < limit)
                return fail(v, FAILURE_OTHER, "must be at least %zu character%s long, got %zu",
                            limit, limit == 1 ? "" : "s", chars);
        if (get_count(s, "maxLength", &limit) && chars > limit)
                return fail(v, FAILURE_OTHER, "must be at most %zu character%s long, got %zu",
                            limit, limit == 1 ? "" : "s", chars);

        if (!json_is_string(pattern))
                return 0;
        r = take_step(v);
        if (r < 0)
                return r;
        source = json_string_value(pattern);
        r = pattern_match(v, source, str, len);
        if (r == 1 || r == -ENOEXEC)
                return 0;
        if (r == -ENOMEM)
                return r;
        t = failure_begin(v, FAILURE_OTHER);
        if (r < 0) {
                /* Deny rather than pass a value nobody could check. */
                text_add(&t, "cannot be checked against the pattern ");
                text_pattern(&t, source);
                text_add(&t, " (%s)", pattern_trouble(r));
        } else {
                text_add(&t, "must match the pattern ");
                text_pattern(&t, source);
                text_add(&t, ", got ");
                text_value(&t, inst, false);
        }
        return failure_end(&t);
}

/* uniqueItems compares every pair: quadratic, so each comparison is a step. */
static int check_unique(struct validation *v, const json_t *inst)
{
        size_t n = json_array_size(inst), i, j;
        int r;

        for (i = 1; i < n; i++)
                for (j = 0; j < i; j++) {
                        r = take_step(v);
                        if (r < 0)
                                return r;
                        if (values_equal(json_array_get(inst, j), json_array_get(inst, i)))
                                return fail(v, FAILURE_OTHER,
                                            "must not contain duplicates (items %zu and %zu are "
                                            "equal)",
                                            j, i);
                }
        return 0;
}

static int check_array(struct validation *v, const json_t *s, const json_t *inst)
{
        const json_t *items = json_object_get(s, "items"),
                     *prefix = json_object_get(s, "prefixItems");
        const json_t *rest, *x;
        size_t n = json_array_size(inst), limit, i, n_prefix;
        int r;

        if (get_count(s, "minItems", &limit) && n < limit)
                return fail(v, FAILURE_OTHER, "must have at least %zu item%s, got %zu", limit,
                            limit == 1 ? "" : "s", n);
        if (get_count(s, "maxItems", &limit) && n > limit)
                return fail(v, FAILURE_OTHER, "must have at most %zu item%s, got %zu", limit,
                            limit == 1 ? "" : "s", n);

        if (json_is_true(json_object_get(s, "uniqueItems"))) {
                r = check_unique(v, inst);
                if (r < 0)
                        return r;
        }

        /* Tuples: 2020-12 writes prefixItems and then items for the rest; earlier drafts write
         * items as an array and then additionalItems for the rest. */
        if (json_is_array(prefix)) {
                rest = is_schema(items) ? items : NULL;
        } else if (json_is_array(items)) {
                prefix = items;
                rest = json_object_get(s, "additionalItems");
        } else {
                prefix = NULL;
                rest = items;
        }
        n_prefix = json_array_size(prefix);
        json_array_foreach (inst, i, x) {
                const json_t *sub = i < n_prefix ? json_array_get(prefix, i) : rest;
                if (!is_schema(sub))
                        continue;
                r = validate_child(v, sub, x, path_push_index(v, i));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* "unexpected argument 'foo' (the tool takes: user_id, days)" */
static int fail_unexpected(struct validation *v, bool top, const json_t *props,
                           const json_t *patterns)
{
        struct text t;
        const char *key;
        size_t n = 0;
        json_t *x;

        t = failure_begin(v, FAILURE_UNEXPECTED);
        text_add(&t, "(%s", top ? "the tool takes" : "allowed here");
        if (json_object_size(props) == 0 && json_object_size(patterns) == 0) {
                text_add(&t, top ? " no arguments)" : ": nothing)");
                return failure_end(&t);
        }
        text_add(&t, ":");
        json_object_foreach ((json_t *) props, key, x)
                text_add(&t, "%s %s", n++ ? "," : "", key);
        json_object_foreach ((json_t *) patterns, key, x) {
                text_add(&t, "%s names matching ", n++ ? "," : "");
                text_pattern(&t, key);
        }
        text_add(&t, ")");
        return failure_end(&t);
}

/* propertyNames: the name of the member at the current path, as a string instance. */
static int check_property_name(struct validation *v, const json_t *names, const char *key)
{
        _cleanup_(json_decrefp) json_t *name = NULL;
        char brief_buf[BRIEF_CAP * 2];
        struct text brief;
        int r;

        /* Not json_string(): a name jansson took without a UTF-8 check must not read as
         * -ENOMEM; PCRE2 refuses it instead. */
        name = json_stringn_nocheck(key, strlen(key));
        if (!name)
                return -ENOMEM;
        r = validate(v, names, name);
        if (r != -EINVAL)
                return r;
        text_init(&brief, brief_buf, sizeof(brief_buf));
        text_brief(&brief, v);
        text_end(&brief);
        return fail(v, FAILURE_OTHER, "the name is not allowed (%s)", brief.buf);
}

/* One member of an object: the name, then every subschema that applies to it. */
static int check_member(struct validation *v, const json_t *s, const char *key, const json_t *x)
{
        const json_t *props = json_object_get(s, "properties");
        const json_t *patterns = json_object_get(s, "patternProperties");
        const json_t *more = json_object_get(s, "additionalProperties");
        const json_t *names = json_object_get(s, "propertyNames"), *sub;
        const char *source;
        bool known;
        json_t *p;
        int r;

        if (is_schema(names)) {
                struct text_mark m = path_push_key(v, key);
                r = check_property_name(v, names, key);
                text_restore(&v->path, m);
                if (r < 0)
                        return r;
        }
        sub = json_object_get(props, key);
        known = sub != NULL;
        if (is_schema(sub)) {
                r = validate_child(v, sub, x, path_push_key(v, key));
                if (r < 0)
                        return r;
        }
        json_object_foreach ((json_t *) patterns, source, p) {
                if (!is_schema(p))
                        continue;
                r = take_step(v);
                if (r < 0)
                        return r;
                r = pattern_match(v, source, key, strlen(key));
                if (r == 0 || r == -ENOEXEC)
                        continue;
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        struct text_mark m = path_push_key(v, key);
                        struct text t = failure_begin(v, FAILURE_OTHER);
                        text_restore(&v->path, m);
                        text_add(&t, "its name cannot be checked against the pattern ");
                        text_pattern(&t, source);
                        text_add(&t, " (%s)", pattern_trouble(r));
                        return failure_end(&t);
                }
                known = true;
                r = validate_child(v, p, x, path_push_key(v, key));
                if (r < 0)
                        return r;
        }
        if (known || !is_schema(more))
                return 0;
        if (json_is_false(more)) {
                bool top = v->path.len == 0;
                struct text_mark m = path_push_key(v, key);
                r = fail_unexpected(v, top, props, json_is_object(patterns) ? patterns : NULL);
                text_restore(&v->path, m);
                return r;
        }
        return validate_child(v, more, x, path_push_key(v, key));
}

static int check_object(struct validation *v, const json_t *s, const json_t *inst)
{
        const json_t *required = json_object_get(s, "required");
        size_t n = json_object_size(inst), limit, i;
        const char *key;
        json_t *x;
        int r;

        if (get_count(s, "minProperties", &limit) && n < limit)
                return fail(v, FAILURE_OTHER, "must have at least %zu member%s, got %zu", limit,
                            limit == 1 ? "" : "s", n);
        if (get_count(s, "maxProperties", &limit) && n > limit)
                return fail(v, FAILURE_OTHER, "must have at most %zu member%s, got %zu", limit,
                            limit == 1 ? "" : "s", n);

        json_array_foreach (required, i, x) {
                struct text_mark m;
                if (!json_is_string(x) || json_object_get(inst, json_string_value(x)))
                        continue;
                m = path_push_key(v, json_string_value(x));
                r = fail(v, FAILURE_REQUIRED, "is required");
                text_restore(&v->path, m);
                return r;
        }

        json_object_foreach ((json_t *) inst, key, x) {
                r = check_member(v, s, key, x);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* What one failed alternative of anyOf/oneOf says, relative to where the alternatives apply:
 * "expected a string", "'limit': must be at most 100, got 500", "'id' is required". */
static void text_brief(struct text *t, const struct validation *v)
{
        const struct failure *f = &v->failure;
        const char *rel = f->at;

        if (strncmp(f->at, v->path.buf, v->path.len) == 0) {
                rel += v->path.len;
                if (*rel == '.')
                        rel++;
        }
        switch (f->kind) {
        case FAILURE_REQUIRED:
                text_add(t, "'%s' is required", rel);
                break;
        case FAILURE_UNEXPECTED:
                text_add(t, "unexpected '%s'", rel);
                break;
        case FAILURE_FORBIDDEN:
                if (*rel)
                        text_add(t, "'%s' is not allowed", rel);
                else
                        text_add(t, "not allowed");
                break;
        case FAILURE_TYPE:
        case FAILURE_OTHER:
        case FAILURE_LIMIT:
                if (*rel)
                        text_add(t, "'%s': %s", rel, f->reason);
                else if (f->kind == FAILURE_TYPE)
                        text_add(t, "expected %s", f->expected);
                else
                        text_add(t, "%s", f->reason);
                break;
        }
}

static bool failure_is_type_here(const struct validation *v)
{
        return v->failure.kind == FAILURE_TYPE && strcmp(v->failure.at, v->path.buf) == 0;
}

/* anyOf (exactly_one false) and oneOf. When every form fails, and all but one of them only for
 * the instance's type, that one's own failure is the useful message: report it as it is. */
static int check_alternatives(struct validation *v, const json_t *alts, const json_t *inst,
                              bool exactly_one)
{
        char summary_buf[REASON_CAP - 48], expected_buf[EXPECTED_CAP];
        struct text summary, expected, t;
        struct failure relevant = { 0 };
        size_t n = json_array_size(alts), i, n_relevant = 0, matched = 0, first_match = 0;
        const json_t *alt;
        int r;

        if (n == 0)
                return 0;
        text_init(&summary, summary_buf, sizeof(summary_buf));
        text_init(&expected, expected_buf, sizeof(expected_buf));
        json_array_foreach (alts, i, alt) {
                char brief_buf[BRIEF_CAP];
                struct text brief;

                r = validate(v, alt, inst);
                if (r == 0) {
                        if (!exactly_one)
                                return 0;
                        if (matched++ == 0) {
                                first_match = i;
                                continue;
                        }
                        return fail(v, FAILURE_OTHER,
                                    "matches more than one of the %zu allowed forms (forms %zu "
                                    "and %zu), but must match exactly one",
                                    n, first_match + 1, i + 1);
                }
                if (r != -EINVAL)
                        return r;
                if (failure_is_type_here(v)) {
                        text_add(&expected, "%s%s", expected.len ? " or " : "",
                                 v->failure.expected);
                } else if (n_relevant++ == 0) {
                        relevant = v->failure;
                }
                text_init(&brief, brief_buf, sizeof(brief_buf));
                text_brief(&brief, v);
                text_end(&brief);
                text_add(&summary, "%s%s", summary.len ? "; " : "", brief.buf);
        }
        if (matched == 1)
                return 0;
        if (n_relevant == 1) {
                v->failure = relevant;
                return -EINVAL;
        }
        text_end(&summary);
        text_end(&expected);
        t = failure_begin(v, n_relevant == 0 ? FAILURE_TYPE : FAILURE_OTHER);
        if (n_relevant == 0)
                memcpy(v->failure.expected, expected.buf, sizeof(v->failure.expected));
        text_add(&t, "matches none of the %zu allowed forms (%s)", n, summary.buf);
        return failure_end(&t);
}

static int check_combinators(struct validation *v, const json_t *s, const json_t *inst)
{
        const json_t *all = json_object_get(s, "allOf"), *any = json_object_get(s, "anyOf");
        const json_t *one = json_object_get(s, "oneOf"), *not = json_object_get(s, "not");
        const json_t *cond = json_object_get(s, "if"), *x;
        size_t i;
        int r;

        json_array_foreach (all, i, x) {
                r = validate(v, x, inst);
                if (r < 0)
                        return r;
        }
        if (json_is_array(any)) {
                r = check_alternatives(v, any, inst, false);
                if (r < 0)
                        return r;
        }
        if (json_is_array(one)) {
                r = check_alternatives(v, one, inst, true);
                if (r < 0)
                        return r;
        }
        if (is_schema(not )) {
                r = validate(v, not, inst);
                if (r == 0)
                        return fail(v, FAILURE_OTHER, "matches a form that is not allowed here");
                if (r != -EINVAL)
                        return r;
        }
        if (is_schema(cond)) {
                r = validate(v, cond, inst);
                if (r != 0 && r != -EINVAL)
                        return r;
                x = json_object_get(s, r == 0 ? "then" : "else");
                if (is_schema(x))
                        return validate(v, x, inst);
        }
        return 0;
}

/* The subschema a local reference points to, or NULL. ref is a URI fragment holding a JSON
 * pointer: percent-decoded first (RFC 6901, section 6), then split at '/', then ~1 and ~0. */
static const json_t *resolve_ref(const json_t *root, const char *ref)
{
        char buf[512], *token, *end;
        const json_t *node = root;
        size_t n = 0;

        if (ref[0] != '#')
                return NULL;
        for (ref++; *ref; ref++) {
                char c = *ref;
                if (c == '%') {
                        char hex[3] = { ref[1], ref[1] ? ref[2] : '\0', '\0' };
                        if (!isxdigit((unsigned char) hex[0]) || !isxdigit((unsigned char) hex[1]))
                                return NULL;
                        c = (char) strtol(hex, NULL, 16);
                        if (c == '\0')
                                return NULL;
                        ref += 2;
                }
                if (n + 1 >= sizeof(buf))
                        return NULL;
                buf[n++] = c;
        }
        buf[n] = '\0';
        if (n == 0)
                return root;
        /* "#name" would be an $anchor, which tool schemas do not use. */
        if (buf[0] != '/')
                return NULL;

        for (token = buf + 1; node; token = end + 1) {
                char *in, *out;
                bool last;

                end = strchrnul(token, '/');
                last = *end == '\0';
                for (in = out = token; in < end; in++) {
                        if (*in == '~') {
                                if (in + 1 == end || (in[1] != '0' && in[1] != '1'))
                                        return NULL;
                                *out++ = in[1] == '0' ? '~' : '/';
                                in++;
                        } else {
                                *out++ = *in;
                        }
                }
                if (json_is_object(node)) {
                        node = json_object_getn(node, token, (size_t) (out - token));
                } else if (json_is_array(node)) {
                        unsigned long idx;
                        char *idx_end;
                        /* Array indexes are decimal without leading zeros (RFC 6901, 4). */
                        if (out == token || (token[0] == '0' && out - token > 1) ||
                            !isdigit((unsigned char) token[0]))
                                return NULL;
                        *out = '\0';
                        idx = strtoul(token, &idx_end, 10);
                        if (idx_end != out)
                                return NULL;
                        node = json_array_get(node, idx);
                } else {
                        return NULL;
                }
                if (last)
                        break;
        }
        return node;
}

static int check_ref(struct validation *v, const char *ref, const json_t *inst)
{
        const json_t *target;
        struct text t;
        int r;

        if (v->ref_hops >= JSONSCHEMA_REF_MAX) {
                char what_buf[192];
                struct text what;

                text_init(&what, what_buf, sizeof(what_buf));
                text_add(&what,
                         "the tool's schema follows more than %d $ref hops without progress (a "
                         "cycle through ",
                         JSONSCHEMA_REF_MAX);
                text_string(&what, ref, strlen(ref));
                text_add(&what, ")");
                return fail_limit(v, -ELOOP, what.buf);
        }
        target = resolve_ref(v->root, ref);
        if (!target) {
                t = failure_begin(v, FAILURE_OTHER);
                text_add(&t, "cannot be checked: the tool's schema refers to ");
                text_string(&t, ref, strlen(ref));
                text_add(&t, ", which is not a local reference that exists");
                return failure_end(&t);
        }
        v->ref_hops++;
        r = validate(v, target, inst);
        v->ref_hops--;
        return r;
}

static int validate_schema(struct validation *v, const json_t *s, const json_t *inst)
{
        const json_t *k;
        int r = 0;

        if (json_is_false(s))
                return fail(v, FAILURE_FORBIDDEN, "is not allowed");
        if (!json_is_object(s))
                return 0;

        /* Draft 7 ignores the siblings of $ref, 2019-09 applies them: apply them, which only
         * ever refuses more. */
        k = json_object_get(s, "$ref");
        if (json_is_string(k)) {
                r = check_ref(v, json_string_value(k), inst);
                if (r < 0)
                        return r;
        }

        /* OpenAPI's nullable: true lets null through type, enum and const. */
        if (!json_is_null(inst) || !json_is_true(json_object_get(s, "nullable"))) {
                r = check_type(v, json_object_get(s, "type"), inst);
                if (r < 0)
                        return r;
                k = json_object_get(s, "enum");
                if (json_is_array(k)) {
                        r = check_enum(v, k, inst);
                        if (r < 0)
                                return r;
                }
                k = json_object_get(s, "const");
                if (k && !values_equal(k, inst))
                        return fail_value(v, "", k, inst);
        }

        switch (json_typeof(inst)) {
        case JSON_OBJECT:
                r = check_object(v, s, inst);
                break;
        case JSON_ARRAY:
                r = check_array(v, s, inst);
                break;
        case JSON_STRING:
                r = check_string(v, s, inst);
                break;
        case JSON_INTEGER:
        case JSON_REAL:
                r = check_number(v, s, inst);
                break;
        case JSON_TRUE:
        case JSON_FALSE:
        case JSON_NULL:
                break;
        }
        if (r < 0)
                return r;
        return check_combinators(v, s, inst);
}

static int validate(struct validation *v, const json_t *schema, const json_t *inst)
{
        int r;

        r = take_step(v);
        if (r < 0)
                return r;
        if (v->nesting >= JSONSCHEMA_NESTING_MAX)
                return fail_limit(v, -E2BIG, "the tool's schema nests too deeply");
        v->nesting++;
        r = validate_schema(v, schema, inst);
        v->nesting--;
        return r;
}

/* Refuses an instance deeper than JSONSCHEMA_DEPTH_MAX before any schema looks at it, so the
 * bound holds also where the schema accepts anything. */
static int check_depth(struct validation *v, const json_t *inst, unsigned depth)
{
        const char *key;
        json_t *x;
        size_t i;
        int r;

        if (!json_is_object(inst) && !json_is_array(inst))
                return 0;
        if (depth == JSONSCHEMA_DEPTH_MAX)
                return fail_limit(v, -E2BIG, "the arguments nest deeper than 64 levels");
        if (json_is_object(inst))
                json_object_foreach ((json_t *) inst, key, x) {
                        struct text_mark m = path_push_key(v, key);
                        r = check_depth(v, x, depth + 1);
                        text_restore(&v->path, m);
                        if (r < 0)
                                return r;
                }
        else
                json_array_foreach (inst, i, x) {
                        struct text_mark m = path_push_index(v, i);
                        r = check_depth(v, x, depth + 1);
                        text_restore(&v->path, m);
                        if (r < 0)
                                return r;
                }
        return 0;
}

static void validation_done(struct validation *v)
{
        size_t i;

        for (i = 0; i < v->n_patterns; i++)
                pcre2_code_free(v->patterns[i].code);
        pcre2_match_data_free(v->match_data);
        pcre2_match_context_free(v->match_context);
}

static void failure_message(const struct failure *f, struct airlock_error *err)
{
        const char *at = f->at;

        switch (f->kind) {
        case FAILURE_REQUIRED:
                (void) airlock_error_set(err, 0, "argument '%s' is required", at);
                break;
        case FAILURE_UNEXPECTED:
                (void) airlock_error_set(err, 0, "unexpected argument '%s' %s", at, f->reason);
                break;
        case FAILURE_FORBIDDEN:
                if (*at)
                        (void) airlock_error_set(err, 0, "argument '%s' is not allowed", at);
                else
                        (void) airlock_error_set(err, 0, "the tool's schema accepts no arguments");
                break;
        case FAILURE_LIMIT:
                (void) airlock_error_set(err, 0, "%s", f->reason);
                break;
        case FAILURE_TYPE:
        case FAILURE_OTHER:
                if (*at)
                        (void) airlock_error_set(err, 0, "argument '%s': %s", at, f->reason);
                else
                        (void) airlock_error_set(err, 0, "arguments: %s", f->reason);
                break;
        }
}

int jsonschema_validate(const json_t *schema, const json_t *instance, struct airlock_error *err)
{
        _cleanup_(json_decrefp) json_t *empty = NULL;
        struct validation v = { .root = schema };
        int r;

        if (!instance) {
                instance = empty = json_object();
                if (!empty)
                        return airlock_error_set(err, -ENOMEM, "out of memory");
        }
        text_init(&v.path, v.path_buf, sizeof(v.path_buf));
        r = check_depth(&v, instance, 0);
        if (r >= 0)
                r = validate(&v, schema, instance);
        validation_done(&v);
        if (r >= 0)
                return 0;
        if (r == -EINVAL || r == -E2BIG || r == -ELOOP)
                failure_message(&v.failure, err);
        else
                (void) airlock_error_set(err, r, "cannot check the arguments: %s", strerror(-r));
        return r;
}
