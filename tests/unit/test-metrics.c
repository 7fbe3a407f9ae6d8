/* The metrics registry and its Prometheus text writer (src/metrics/metrics.h): escaping, value
 * formatting, cumulative histograms, profile and route labels. */
#include "metrics/metrics.h"

#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Runs fn on a memory stream and returns what it wrote (caller frees). */
#define CAPTURE(out, ...)                                                                          \
        do {                                                                                       \
                size_t len_;                                                                       \
                FILE *f = open_memstream(&(out), &len_);                                           \
                cr_assert_not_null(f);                                                             \
                __VA_ARGS__;                                                                       \
                cr_assert_eq(fclose(f), 0);                                                        \
        } while (0)

Test(metrics, label_values_are_escaped)
{
        char *out = NULL;

        CAPTURE(out, metrics_write_sample(f, "x_total",
                                          (const char *[]){ "a", "back\\slash \"quoted\"\nnew", "b",
                                                            "plain", NULL },
                                          3));
        cr_assert_str_eq(out, "x_total{a=\"back\\\\slash \\\"quoted\\\"\\nnew\",b=\"plain\"} 3\n");
        free(out);
}

Test(metrics, help_is_escaped_and_type_follows)
{
        char *out = NULL;

        CAPTURE(out, metrics_write_family(f, "x", "gauge", "a \\ b\nc \"d\""));
        /* HELP escapes backslash and newline only; quotes stay as they are. */
        cr_assert_str_eq(out, "# HELP x a \\\\ b\\nc \"d\"\n# TYPE x gauge\n");
        free(out);
}

Test(metrics, values_are_formatted_as_prometheus_reads_them)
{
        char *out = NULL;

        CAPTURE(out, metrics_write_sample(f, "a", NULL, 0);
                metrics_write_sample(f, "b", NULL, 0.25);
                metrics_write_sample(f, "c", NULL, 1.0 / 0.0);
                metrics_write_sample(f, "d", NULL, -1.0 / 0.0);
                metrics_write_sample(f, "e", NULL, 0.0 / 0.0);
                metrics_write_sample(f, "g", NULL, 12345678901.0);
                metrics_write_sample(f, "h", NULL, 0.1));
        cr_assert_str_eq(out, "a 0\nb 0.25\nc +Inf\nd -Inf\ne NaN\ng 12345678901\nh 0.1\n");
        free(out);
}

/* The value of the exact sample line `prefix value`, or -1. */
static double sample_value(const char *text, const char *prefix)
{
        const char *p = text;
        size_t n = strlen(prefix);

        while ((p = strstr(p, prefix))) {
                if ((p == text || p[-1] == '\n') && p[n] == ' ')
                        return strtod(p + n + 1, NULL);
                p += n;
        }
        return -1;
}

Test(metrics, histogram_buckets_are_cumulative_and_match_the_count)
{
        struct metrics_profile *p;
        char *out = NULL;

        metrics_reset_for_tests();
        p = metrics_profile("unit-hist");
        metrics_execution(p, METRICS_EXEC_OK, 200000);          /* 0.2 ms */
        metrics_execution(p, METRICS_EXEC_OK, 3000000);         /* 3 ms */
        metrics_execution(p, METRICS_EXEC_OK, 3000000);         /* 3 ms */
        metrics_execution(p, METRICS_EXEC_OK, 1000000000);      /* exactly 1 s: in le="1" */
        metrics_execution(p, METRICS_EXEC_OK, 900000000000ull); /* past every bound */
        metrics_execution(p, METRICS_EXEC_TIMEOUT, 2000000000);
        CAPTURE(out, metrics_write_registry(f));

#define B(le)                                                                                      \
        sample_value(out, "airlock_execution_duration_seconds_bucket{profile=\"unit-hist\","       \
                          "status=\"ok\",le=\"" le "\"}")
        cr_assert_eq(B("0.0005"), 1);
        cr_assert_eq(B("0.0025"), 1);
        cr_assert_eq(B("0.005"), 3);
        cr_assert_eq(B("1"), 4);
        cr_assert_eq(B("300"), 4);
        cr_assert_eq(B("+Inf"), 5);
#undef B
        cr_assert_eq(sample_value(out, "airlock_execution_duration_seconds_count{profile=\"unit-"
                                       "hist\",status=\"ok\"}"),
                     5);
        cr_assert_float_eq(sample_value(out, "airlock_execution_duration_seconds_sum{profile="
                                             "\"unit-hist\",status=\"ok\"}"),
                           901.0062, 1e-9);
        cr_assert_eq(sample_value(out, "airlock_executions_total{profile=\"unit-hist\",status="
                                       "\"timeout\"}"),
                     1);
        cr_assert_eq(sample_value(out, "airlock_executions_total{profile=\"unit-hist\",status="
                                       "\"oom\"}"),
                     0);
        /* A status with no execution has no histogram series (but its counter says 0). */
        cr_assert_null(strstr(out, "status=\"oom\",le="));
        free(out);
}

Test(metrics, exec_status_strings_map_and_unknown_is_killed)
{
        cr_assert_eq(metrics_exec_status_from_string("ok"), METRICS_EXEC_OK);
        cr_assert_eq(metrics_exec_status_from_string("output_limit"), METRICS_EXEC_OUTPUT_LIMIT);
        cr_assert_eq(metrics_exec_status_from_string("oom"), METRICS_EXEC_OOM);
        cr_assert_eq(metrics_exec_status_from_string("nonsense"), METRICS_EXEC_KILLED);
        cr_assert_eq(metrics_exec_status_from_string(NULL), METRICS_EXEC_KILLED);
}

Test(metrics, profiles_past_the_limit_share_one_label)
{
        struct metrics_profile *first = metrics_profile("p-0"), *p = NULL;
        char name[32];

        cr_assert_eq(metrics_profile("p-0"), first, "a name keeps its handle");
        for (int i = 1; i < METRICS_PROFILES_MAX + 5; i++) {
                (void) snprintf(name, sizeof(name), "p-%d", i);
                p = metrics_profile(name);
        }
        cr_assert_eq(p, metrics_profile(METRICS_PROFILE_OTHER "-never-registered"));
        cr_assert_neq(p, first);
}

Test(metrics, http_requests_are_labelled_by_template_and_status)
{
        static const char *const methods[] = { "GET", "POST" };
        static const char *const patterns[] = { "/v1/sessions/{id}", "/v1/sessions/{id}/execute" };
        char *out = NULL;

        metrics_reset_for_tests();
        cr_assert_eq(metrics_http_register(methods, patterns, 2), 0);
        cr_assert_eq(metrics_http_register(methods, patterns, 2), -EALREADY);
        metrics_http_request(1, 200);
        metrics_http_request(1, 200);
        metrics_http_request(0, 404);
        metrics_http_request(0, 599);
        metrics_http_request(METRICS_HTTP_UNMATCHED, 404);
        CAPTURE(out, metrics_write_registry(f));
        cr_assert_eq(sample_value(out, "airlock_http_requests_total{method=\"POST\",route=\"/v1/"
                                       "sessions/{id}/execute\",status=\"200\"}"),
                     2);
        cr_assert_eq(sample_value(out, "airlock_http_requests_total{method=\"GET\",route=\"/v1/"
                                       "sessions/{id}\",status=\"404\"}"),
                     1);
        cr_assert_eq(sample_value(out, "airlock_http_requests_total{method=\"GET\",route=\"/v1/"
                                       "sessions/{id}\",status=\"other\"}"),
                     1);
        cr_assert_eq(sample_value(out, "airlock_http_requests_total{method=\"\",route="
                                       "\"unmatched\",status=\"404\"}"),
                     1);
        free(out);
}

Test(metrics, tool_calls_audit_failures_and_process_metrics)
{
        char *out = NULL;

        metrics_reset_for_tests();
        metrics_tool_call(METRICS_TOOL_CODEMODE, METRICS_TOOL_ERROR);
        metrics_audit_failure();
        metrics_audit_failure();
        CAPTURE(out, metrics_write_registry(f));
        cr_assert_eq(sample_value(out, "airlock_tool_calls_total{via=\"codemode\",outcome="
                                       "\"tool_error\"}"),
                     1);
        cr_assert_eq(sample_value(out, "airlock_audit_write_failures_total"), 2);
        cr_assert_gt(sample_value(out, "process_resident_memory_bytes"), 0);
        cr_assert_gt(sample_value(out, "process_open_fds"), 0);
        cr_assert_gt(sample_value(out, "process_start_time_seconds"), 1500000000);
        cr_assert_eq(sample_value(out, "airlock_build_info{version=\"" AIRLOCK_VERSION "\"}"), 1);
        free(out);
}
