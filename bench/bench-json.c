/* bench-json: what writing an execute answer's JSON costs, jansson's json_dumps() against
 * json_dump_text() (the shortest reals, issue 28), in one process.
 *
 *   bench-json [SAMPLES]   (default 4000)
 *
 * Each sample times BATCH dumps of the same answer, with the flags of the daemon's replies
 * (JSON_COMPACT | JSON_ENSURE_ASCII); the two ways alternate sample by sample so that the
 * machine's drift falls on both. Prints p50 and p99 per dump in microseconds for a typical
 * answer (print(1): usage floats, no outputs) and one with 4 KiB of stdout and a display. */
#include "base/json-util.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 64

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *ns, size_t n, size_t bytes)
{
        qsort(ns, n, sizeof(ns[0]), cmp_u64);
        printf("%-34s p50 %7.3f us  p99 %7.3f us  (%zu bytes, n=%zu x %d)\n", name,
               (double) ns[n / 2] / BATCH / 1000, (double) ns[n * 99 / 100] / BATCH / 1000, bytes,
               n, BATCH);
}

static json_t *answer(size_t stdout_bytes)
{
        char *out = malloc(stdout_bytes + 1);
        json_t *a;

        for (size_t i = 0; i < stdout_bytes; i++)
                out[i] = i % 64 == 63 ? '\n' : (char) ('a' + i % 26);
        out[stdout_bytes] = '\0';
        if (stdout_bytes <= 2)
                strcpy(out, "1\n");
        a = json_pack("{s:s, s:s, s:s, s:n, s:[], s:n, s:i, s:b, s:i, s:s, s:[], "
                      "s:{s:f, s:f, s:I, s:i, s:f}}",
                      "status", "ok", "stdout", out, "stderr", "", "result", "outputs", "error",
                      "exit_code", 0, "timed_out", 0, "execution_count", 3, "state", "preserved",
                      "files", "usage", "wall_ms", 0.714752, "cpu_ms", 0.641, "peak_memory_bytes",
                      (json_int_t) 41943040, "tool_calls", 0, "tool_ms", 0.0);
        if (a && stdout_bytes > 2)
                json_array_append_new(json_object_get(a, "outputs"),
                                      json_pack("{s:{s:s}, s:b, s:i}", "data", "text/plain",
                                                "<Figure size 640x480 with 1 Axes>", "main", 0,
                                                "stdout_offset", 1024));
        free(out);
        return a;
}

static void run(const char *label, json_t *a, size_t samples)
{
        const size_t flags = JSON_COMPACT | JSON_ENSURE_ASCII;
        uint64_t *old_ns = calloc(samples, sizeof(uint64_t));
        uint64_t *new_ns = calloc(samples, sizeof(uint64_t));
        size_t old_len = 0, new_len = 0;
        char name[64];

        for (size_t i = 0; i < samples; i++) {
                uint64_t t = now_ns();

                for (int j = 0; j < BATCH; j++) {
                        char *text = json_dumps(a, flags);

                        old_len = strlen(text);
                        free(text);
                }
                old_ns[i] = now_ns() - t;
                t = now_ns();
                for (int j = 0; j < BATCH; j++)
                        free(json_dump_text(a, flags, &new_len));
                new_ns[i] = now_ns() - t;
        }
        (void) snprintf(name, sizeof(name), "%s json_dumps", label);
        report(name, old_ns, samples, old_len);
        (void) snprintf(name, sizeof(name), "%s json_dump_text", label);
        report(name, new_ns, samples, new_len);
        free(old_ns);
        free(new_ns);
}

int main(int argc, char **argv)
{
        size_t samples = argc > 1 ? strtoul(argv[1], NULL, 10) : 4000;
        json_t *small = answer(2), *large = answer(4096);
        char *text = json_dump_text(small, JSON_COMPACT, NULL);

        if (!small || !large || !text || samples == 0)
                return 1;
        printf("answer: %s\n", text);
        free(text);
        run("print(1) answer", small, samples);
        run("4 KiB stdout answer", large, samples);
        json_decref(small);
        json_decref(large);
        return 0;
}
