/* The audit log's writer (src/audit/audit.h): lines made by the writer thread as they were
 * emitted, whole and in order under concurrent emitters (past the queue's bound too), every
 * queued line written by audit_free() and by audit_flush(), rotation between lines, reopening,
 * and a device that refuses writes (counted, and refused executions with --audit-fail=refuse). */
#include "audit/audit.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static char path[128];

static void make_dir(void)
{
        snprintf(dir, sizeof(dir), "/tmp/airlock-test-audit-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/audit.log", dir);
}

static void remove_dir(void)
{
        DIR *d = opendir(dir);
        struct dirent *de;
        char p[512];

        if (!d)
                return;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.') {
                        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
                        (void) unlink(p);
                }
        closedir(d);
        (void) rmdir(dir);
}

/* Every test gets a directory of its own, removed also when an assertion failed. */
TestSuite(audit, .init = make_dir, .fini = remove_dir);

static struct audit *open_audit(const char *file, uint64_t max_bytes, enum audit_fail_mode fail)
{
        struct airlock_error err = { { 0 } };
        struct audit *a = NULL;
        int r;

        r = audit_new(&(struct audit_config){ .path = file,
                                              .max_bytes = max_bytes,
                                              .keep = 500,
                                              .syslog_facility = -1,
                                              .code = true,
                                              .fail = fail },
                      &a, &err);
        cr_assert_eq(r, 0, "audit_new: %s", err.msg);
        return a;
}

/* Every line of file as a JSON array; a line that is cut or does not parse fails the test. */
static json_t *read_lines(const char *file)
{
        json_t *lines = json_array();
        char *text = NULL, *line, *save = NULL;
        size_t size = 0;
        FILE *f = fopen(file, "r");

        cr_assert_not_null(f, "%s: %s", file, strerror(errno));
        if (getdelim(&text, &size, '\0', f) < 0) {
                cr_assert(feof(f), "%s: %s", file, strerror(errno));
                text[0] = '\0'; /* an empty file */
        }
        fclose(f);
        cr_assert(text[0] == '\0' || text[strlen(text) - 1] == '\n', "%s: the last line is cut",
                  file);
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                json_error_t jerr;
                json_t *v = json_loads(line, JSON_ALLOW_NUL, &jerr);

                cr_assert_not_null(v, "not a JSON line: %s (%s)", line, jerr.text);
                json_array_append_new(lines, v);
        }
        free(text);
        return lines;
}

/* The line of each event, byte for byte as json_dump_text(JSON_COMPACT) writes the object of
 * the common members followed by the fields: the escapes, the number formats (the shortest that
 * reads back), the order. */
Test(audit, lines_are_what_jansson_writes_for_every_kind_of_field)
{
        json_t *fields, *want, *lines, *e, *expect;
        char *text = NULL, *line, *save = NULL;
        size_t size = 0;
        struct audit *a;
        FILE *f;

        a = open_audit(path, 0, AUDIT_FAIL_CONTINUE);
        fields = json_pack("{s:s, s:s%, s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b, "
                           "s:b, s:n, s:{}, s:[], s:{s:[i, s, {s:s}], s:f}}",
                           "text", "quote \" back\\slash / \b\f\n\r\t \x01\x1f\x7f é € 😀 \u2028",
                           "nul", "a\0b", (size_t) 3, "empty", "", "int",
                           (json_int_t) -9007199254740993LL, "zero", (json_int_t) 0, "tenth", 0.1,
                           "big", 1e300, "small", 1e-7, "tiny", 5e-324, "whole", 3.0, "negzero",
                           -0.0, "large", 123456789012345678.0, "yes", 1, "no", 0, "nothing", "obj",
                           "arr", "nested", "list", 1, "two", "deep", "value", "ms", 2.5);
        cr_assert_not_null(fields);
        want = json_deep_copy(fields);
        audit_emit(a, "test.event", "tenant-a", "s-1", "0123456789abcdef", fields);
        audit_emit(a, "test.bare", NULL, NULL, NULL, NULL);
        /* A tenant name that is not UTF-8 is repaired, not a reason to lose the line. */
        audit_emit(a, "test.repaired", "bad\xff", NULL, NULL, NULL);
        a = audit_free(a);

        lines = read_lines(path);
        cr_assert_eq(json_array_size(lines), 3);
        f = fopen(path, "r");
        cr_assert_not_null(f);
        cr_assert_geq(getdelim(&text, &size, '\0', f), 0);
        fclose(f);
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *dumped = NULL;

                line = strtok_r(i == 0 ? text : NULL, "\n", &save);
                e = json_array_get(lines, i);
                expect = json_pack("{s:O, s:O, s:O, s:O, s:O}", "time", json_object_get(e, "time"),
                                   "event", json_object_get(e, "event"), "tenant",
                                   json_object_get(e, "tenant"), "session",
                                   json_object_get(e, "session"), "request_id",
                                   json_object_get(e, "request_id"));
                if (i == 0)
                        json_object_update(expect, want);
                dumped = json_dump_text(expect, JSON_COMPACT, NULL);
                cr_assert_str_eq(line, dumped);
                if (i == 0)
                        cr_assert_not_null(strstr(line,
                                                  "\"tenth\":0.1,\"big\":1e300,\"small\":1e-7,"
                                                  "\"tiny\":5e-324,\"whole\":3.0,"
                                                  "\"negzero\":-0.0,"
                                                  "\"large\":1.2345678901234568e17"),
                                           "%s", line);
                json_decref(expect);
        }
        e = json_array_get(lines, 0);
        cr_assert_str_eq(json_string_value(json_object_get(e, "tenant")), "tenant-a");
        cr_assert(json_equal(json_object_get(e, "nested"), json_object_get(want, "nested")));
        /* Reals stay reals: 3.0 is not written as the integer 3. */
        cr_assert(json_is_real(json_object_get(e, "whole")));
        e = json_array_get(lines, 1);
        cr_assert(json_is_null(json_object_get(e, "tenant")));
        cr_assert(json_is_null(json_object_get(e, "request_id")));
        e = json_array_get(lines, 2);
        cr_assert_str_eq(json_string_value(json_object_get(e, "tenant")), "bad\xef\xbf\xbd");
        free(text);
        json_decref(want);
        json_decref(lines);
}

Test(audit, flush_returns_once_the_lines_emitted_before_it_are_in_the_file)
{
        struct audit *a;
        json_t *lines;

        a = open_audit(path, 0, AUDIT_FAIL_CONTINUE);
        for (int i = 0; i < 3; i++)
                audit_emit(a, "test.flush", NULL, NULL, NULL, json_pack("{s:i}", "i", i));
        audit_flush(a);
        lines = read_lines(path);
        cr_assert_eq(json_array_size(lines), 3);
        cr_assert_eq(json_integer_value(json_object_get(json_array_get(lines, 2), "i")), 2);
        json_decref(lines);
        audit_flush(a); /* nothing queued: returns at once */
        a = audit_free(a);
}

#define EMITTERS 4
#define PER_EMITTER 3000

struct emitter {
        struct audit *a;
        int id;
        int count;
};

static void *emit_many(void *userdata)
{
        const struct emitter *em = userdata;
        char pad[2048];

        for (int i = 0; i < em->count; i++) {
                size_t n = (size_t) (i % 40) * 50;

                memset(pad, 'a' + em->id, n);
                pad[n] = '\0';
                audit_emit(em->a, "test.burst", NULL, NULL, NULL,
                           json_pack("{s:i, s:i, s:s}", "emitter", em->id, "seq", i, "pad", pad));
        }
        return NULL;
}

/* 12,000 lines from 4 threads, far past the queue's 1024: emitters wait for room, and no line
 * is lost, cut, mixed with another or out of its thread's order; audit_free() writes the
 * rest. */
Test(audit, concurrent_emitters_never_interleave_and_free_writes_every_queued_line)
{
        struct emitter em[EMITTERS];
        pthread_t t[EMITTERS];
        int next[EMITTERS] = { 0 };
        struct audit *a;
        json_t *lines, *e;
        size_t i;

        a = open_audit(path, 0, AUDIT_FAIL_CONTINUE);
        for (int k = 0; k < EMITTERS; k++) {
                em[k] = (struct emitter){ a, k, PER_EMITTER };
                cr_assert_eq(pthread_create(&t[k], NULL, emit_many, &em[k]), 0);
        }
        for (int k = 0; k < EMITTERS; k++)
                pthread_join(t[k], NULL);
        a = audit_free(a);

        lines = read_lines(path);
        cr_assert_eq(json_array_size(lines), (size_t) EMITTERS * PER_EMITTER);
        json_array_foreach (lines, i, e) {
                int k = (int) json_integer_value(json_object_get(e, "emitter"));
                int seq = (int) json_integer_value(json_object_get(e, "seq"));
                const char *pad = json_string_value(json_object_get(e, "pad"));

                cr_assert(k >= 0 && k < EMITTERS);
                cr_assert_eq(seq, next[k], "emitter %d: line %d after %d", k, seq, next[k] - 1);
                next[k]++;
                cr_assert_eq(strlen(pad), (size_t) (seq % 40) * 50);
                cr_assert(strspn(pad, (char[]){ (char) ('a' + k), 0 }) == strlen(pad));
        }
        json_decref(lines);
}

/* With a 4 KiB limit, a batch of many lines crosses several rotations: each file but the
 * current one stays within the limit, and each line is whole in exactly one file. */
Test(audit, rotation_cuts_a_batch_between_lines)
{
        struct emitter em[2];
        pthread_t t[2];
        unsigned files = 0;
        size_t total = 0;
        struct audit *a;
        char p[160];
        struct stat st;

        a = open_audit(path, 4096, AUDIT_FAIL_CONTINUE);
        for (int k = 0; k < 2; k++) {
                em[k] = (struct emitter){ a, k, 300 };
                cr_assert_eq(pthread_create(&t[k], NULL, emit_many, &em[k]), 0);
        }
        for (int k = 0; k < 2; k++)
                pthread_join(t[k], NULL);
        a = audit_free(a);

        for (unsigned n = 0;; n++) {
                json_t *lines;

                if (n == 0)
                        snprintf(p, sizeof(p), "%s", path);
                else
                        snprintf(p, sizeof(p), "%s.%u", path, n);
                if (stat(p, &st) < 0)
                        break;
                /* Every line is shorter than the limit (2.1 KiB at most): no file may pass
                 * it. */
                cr_assert_leq(st.st_size, 4096, "%s holds %lld bytes", p, (long long) st.st_size);
                cr_assert_eq(st.st_mode & 0777, 0600);
                lines = read_lines(p);
                total += json_array_size(lines);
                json_decref(lines);
                files++;
        }
        cr_assert_gt(files, 50);
        cr_assert_lt(files, 500, "no file was dropped");
        cr_assert_eq(total, 600u);
}

/* logrotate without copytruncate: lines emitted before audit_reopen() go to the renamed file
 * the daemon still had open, the later ones to the new file at the path. */
Test(audit, reopen_writes_the_queued_lines_into_the_old_file_first)
{
        char rotated[160];
        struct audit *a;
        json_t *old, *cur;

        snprintf(rotated, sizeof(rotated), "%s.old", path);
        a = open_audit(path, 0, AUDIT_FAIL_CONTINUE);
        audit_emit(a, "test.first", NULL, NULL, NULL, NULL);
        audit_flush(a);
        cr_assert_eq(rename(path, rotated), 0);
        audit_emit(a, "test.before", NULL, NULL, NULL, NULL);
        cr_assert_eq(audit_reopen(a), 0);
        audit_emit(a, "test.after", NULL, NULL, NULL, NULL);
        a = audit_free(a);
        old = read_lines(rotated);
        cur = read_lines(path);
        cr_assert_eq(json_array_size(old), 2);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(old, 1), "event")),
                         "test.before");
        cr_assert_eq(json_array_size(cur), 1);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(cur, 0), "event")),
                         "test.after");
        json_decref(old);
        json_decref(cur);
}

/* /dev/full takes no byte (ENOSPC): every line is counted as lost; with refuse, executions
 * are refused, naming the log, the reason and the flag; with continue they go on. */
Test(audit, a_device_that_takes_no_line_counts_them_and_refuse_stops_executions)
{
        struct airlock_error err = { { 0 } };
        struct audit *a;

        if (access("/dev/full", W_OK) < 0)
                cr_skip_test("no writable /dev/full here: %s", strerror(errno));
        a = open_audit("/dev/full", 0, AUDIT_FAIL_REFUSE);
        cr_assert_eq(audit_check(a, &err), 0, "nothing failed yet");
        for (int i = 0; i < 3; i++)
                audit_emit(a, "test.lost", NULL, NULL, NULL, NULL);
        audit_flush(a);
        cr_assert_eq(audit_write_failures(a), 3);
        cr_assert_eq(audit_check(a, &err), -ESHUTDOWN);
        cr_assert(strstr(err.msg, "/dev/full") && strstr(err.msg, "--audit-fail=refuse"), "%s",
                  err.msg);
        cr_assert(strstr(err.msg, strerror(ENOSPC)), "%s", err.msg);
        a = audit_free(a);

        a = open_audit("/dev/full", 0, AUDIT_FAIL_CONTINUE);
        audit_emit(a, "test.lost", NULL, NULL, NULL, NULL);
        audit_flush(a);
        cr_assert_eq(audit_write_failures(a), 1);
        cr_assert_eq(audit_check(a, &err), 0);
        a = audit_free(a);
}

Test(audit, code_is_hashed_whole_and_its_text_cut_at_the_limit)
{
        size_t len = AUDIT_CODE_MAX + 10;
        char *code = malloc(len);
        json_t *f = json_object();
        struct audit *a;

        a = open_audit(path, 0, AUDIT_FAIL_CONTINUE);
        cr_assert_eq(audit_add_code(a, f, "abc", 3), 0);
        /* FIPS 180-2, appendix B.1 */
        cr_assert_str_eq(json_string_value(json_object_get(f, "code_sha256")),
                         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        cr_assert_str_eq(json_string_value(json_object_get(f, "code")), "abc");
        memset(code, 'x', len);
        cr_assert_eq(audit_add_code(a, f, code, len), 0);
        cr_assert_eq(json_string_length(json_object_get(f, "code")), AUDIT_CODE_MAX);
        cr_assert(json_is_true(json_object_get(f, "code_truncated")));
        /* Without a log (a NULL audit), the hash is the same. */
        cr_assert_eq(audit_add_code(NULL, f, "abc", 3), 0);
        cr_assert_str_eq(json_string_value(json_object_get(f, "code_sha256")),
                         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        json_decref(f);
        free(code);
        a = audit_free(a);
}
