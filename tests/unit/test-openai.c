/* Unit tests of src/openai's parts that need no sandbox: ids, filenames, purposes, the error
 * shape, list pages, and the store (the Files API's records and pages, container files' ids)
 * on an openai object built here around a temporary directory, with no session manager. */
#include "openai/openai-internal.h"

#include "base/cleanup.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

Test(openai, container_and_session_ids_map_both_ways)
{
        char cid[OPENAI_CONTAINER_ID_LEN + 1], sid[32];

        cr_assert_eq(openai_container_id("s-0123456789abcdef01234567", cid, sizeof(cid)), 0);
        cr_expect_str_eq(cid, "cntr_0123456789abcdef01234567");
        cr_assert_eq(openai_session_id(cid, sid, sizeof(sid)), 0);
        cr_expect_str_eq(sid, "s-0123456789abcdef01234567");
        cr_expect_eq(openai_container_id("s-0123456789abcdef01234567", cid, 10), -ENOBUFS);
        cr_expect_eq(openai_session_id(cid, sid, 5), -ENOBUFS);
}

Test(openai, malformed_ids_are_refused)
{
        static const char *const bad_containers[] = {
                "",
                "cntr_",
                "cntr_0123456789abcdef0123456",   /* 23 hex */
                "cntr_0123456789abcdef012345678", /* 25 hex */
                "cntr_0123456789ABCDEF01234567",  /* upper case */
                "cntr_0123456789abcdef0123456g",
                "s-0123456789abcdef01234567",
                "CNTR_0123456789abcdef01234567",
                "cntr_../../0123456789abcdef0",
        };
        char buf[64];

        for (size_t i = 0; i < ELEMENTSOF(bad_containers); i++)
                cr_expect_eq(openai_session_id(bad_containers[i], buf, sizeof(buf)), -EINVAL,
                             "'%s'", bad_containers[i]);
        cr_expect_eq(openai_container_id("s-0123", buf, sizeof(buf)), -EINVAL);
        cr_expect_eq(openai_container_id("cntr_0123456789abcdef01234567", buf, sizeof(buf)),
                     -EINVAL);
}

Test(openai, made_ids_have_the_prefix_and_differ)
{
        char a[OPENAI_CFILE_ID_LEN + 1] = "", b[OPENAI_CFILE_ID_LEN + 1] = "";

        openai_make_id(OPENAI_CFILE_PREFIX, a);
        openai_make_id(OPENAI_CFILE_PREFIX, b);
        a[OPENAI_CFILE_ID_LEN] = b[OPENAI_CFILE_ID_LEN] = '\0';
        cr_expect(openai_id_is_valid(a, OPENAI_CFILE_PREFIX), "'%s'", a);
        cr_expect(openai_id_is_valid(b, OPENAI_CFILE_PREFIX), "'%s'", b);
        cr_expect_str_neq(a, b);
        cr_expect_not(openai_id_is_valid(a, OPENAI_FILE_PREFIX));
}

Test(openai, filenames)
{
        static const struct {
                const char *name;
                bool ok;
        } cases[] = {
                { "data.csv", true },
                { ".env", true },
                { "with space.txt", true },
                { "r\xc3\xa9sum\xc3\xa9.pdf", true },
                { "", false },
                { ".", false },
                { "..", false },
                { "../etc/passwd", false },
                { "a/b", false },
                { "/etc/passwd", false },
                { "tab\there", false },
                { "new\nline", false },
                { "del\x7f", false },
                { "bad\xff utf8", false },
        };
        char longname[300];
        const char *why;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                why = NULL;
                cr_expect_eq(openai_filename_check(cases[i].name, &why) == 0, cases[i].ok,
                             "'%s': %s", cases[i].name, why ? why : "accepted");
                if (!cases[i].ok)
                        cr_expect_not_null(why);
        }
        memset(longname, 'a', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        cr_expect_eq(openai_filename_check(longname, &why), -EINVAL);
        longname[OPENAI_FILENAME_MAX] = '\0';
        cr_expect_eq(openai_filename_check(longname, &why), 0);
}

Test(openai, purposes)
{
        cr_expect(openai_file_purpose_is_valid("assistants"));
        cr_expect(openai_file_purpose_is_valid("user_data"));
        cr_expect_not(openai_file_purpose_is_valid("Assistants"));
        cr_expect_not(openai_file_purpose_is_valid(""));
        cr_expect_not(openai_file_purpose_is_valid(NULL));
}

Test(openai, error_json_has_openai_shape)
{
        struct openai_error e = {};
        json_t *j, *inner;

        cr_assert_eq(openai_error_set(&e, -EINVAL, 400, "memory_limit", "bad %s", "\xff"), -EINVAL);
        j = openai_error_json(&e);
        cr_assert_not_null(j);
        inner = json_object_get(j, "error");
        cr_assert(json_is_object(inner));
        cr_expect_str_eq(json_string_value(json_object_get(inner, "type")),
                         "invalid_request_error");
        cr_expect_str_eq(json_string_value(json_object_get(inner, "param")), "memory_limit");
        cr_expect(json_is_null(json_object_get(inner, "code")));
        /* Not UTF-8 in, valid JSON text out. */
        cr_expect_str_eq(json_string_value(json_object_get(inner, "message")), "bad \xef\xbf\xbd");
        json_decref(j);

        cr_assert_eq(
                openai_error_code(&e, openai_error_set(&e, -ENOSPC, 507, NULL, "full"), "no_room"),
                -ENOSPC);
        j = openai_error_json(&e);
        inner = json_object_get(j, "error");
        cr_expect_str_eq(json_string_value(json_object_get(inner, "type")), "server_error");
        cr_expect(json_is_null(json_object_get(inner, "param")));
        cr_expect_str_eq(json_string_value(json_object_get(inner, "code")), "no_room");
        json_decref(j);
}

Test(openai, times_parse_as_the_session_layer_writes_them)
{
        cr_expect_eq(openai_parse_time("1970-01-02T00:00:00Z"), 86400);
        cr_expect_eq(openai_parse_time("2024-02-29T12:34:56Z"), 1709210096);
        cr_expect_eq(openai_parse_time("2024-02-29T12:34:56Zjunk"), 0);
        cr_expect_eq(openai_parse_time("yesterday"), 0);
        cr_expect_eq(openai_parse_time(NULL), 0);
}

static json_t *items(void)
{
        /* Two share a created_at: the id breaks the tie. */
        return json_pack("[{s:s, s:i}, {s:s, s:i}, {s:s, s:i}, {s:s, s:i}]", "id", "c",
                         "created_at", 30, "id", "a", "created_at", 10, "id", "b2", "created_at",
                         20, "id", "b1", "created_at", 20);
}

static char *ids(json_t *list)
{
        static char buf[64];
        size_t i;
        json_t *o;

        buf[0] = '\0';
        json_array_foreach (json_object_get(list, "data"), i, o) {
                strcat(buf, json_string_value(json_object_get(o, "id")));
                strcat(buf, " ");
        }
        return buf;
}

Test(openai, pages_follow_the_cursor_in_both_orders)
{
        json_t *all = items(), *list = NULL;
        struct openai_error e = {};

        cr_assert_eq(openai_page(all, &(struct openai_list_query){}, 20, 100, "x", &list, &e), 0);
        cr_expect_str_eq(ids(list), "c b2 b1 a ");
        cr_expect_str_eq(json_string_value(json_object_get(list, "first_id")), "c");
        cr_expect_str_eq(json_string_value(json_object_get(list, "last_id")), "a");
        cr_expect(json_is_false(json_object_get(list, "has_more")));
        json_decref(list);

        cr_assert_eq(openai_page(all, &(struct openai_list_query){ .limit = 2 }, 20, 100, "x",
                                 &list, &e),
                     0);
        cr_expect_str_eq(ids(list), "c b2 ");
        cr_expect(json_is_true(json_object_get(list, "has_more")));
        json_decref(list);

        cr_assert_eq(openai_page(all, &(struct openai_list_query){ .limit = 2, .after = "b2" }, 20,
                                 100, "x", &list, &e),
                     0);
        cr_expect_str_eq(ids(list), "b1 a ");
        cr_expect(json_is_false(json_object_get(list, "has_more")));
        json_decref(list);

        cr_assert_eq(openai_page(all,
                                 &(struct openai_list_query){ .ascending = true, .after = "b1" },
                                 20, 100, "x", &list, &e),
                     0);
        cr_expect_str_eq(ids(list), "b2 c ");
        json_decref(list);

        cr_assert_eq(openai_page(all, &(struct openai_list_query){ .after = "a" }, 20, 100, "x",
                                 &list, &e),
                     0);
        cr_expect_str_eq(ids(list), "");
        cr_expect(json_is_null(json_object_get(list, "first_id")));
        json_decref(list);

        cr_expect_eq(openai_page(all, &(struct openai_list_query){ .after = "zz" }, 20, 100, "x",
                                 &list, &e),
                     -EINVAL);
        cr_expect_str_eq(e.param, "after");
        cr_expect_eq(openai_page(all, &(struct openai_list_query){ .limit = 101 }, 20, 100, "x",
                                 &list, &e),
                     -EINVAL);
        cr_expect_str_eq(e.param, "limit");
        json_decref(all);
}

/* An openai object on a temporary directory, with its store and no session manager: enough
 * for the Files API and for container files' records. */
static char tmpdir[64];
static struct openai oa;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void) st;
        (void) flag;
        (void) ftw;
        return remove(path);
}

static void store_setup(void)
{
        struct airlock_error err = { { 0 } };

        strcpy(tmpdir, "/tmp/airlock-test-openai-XXXXXX");
        cr_assert_not_null(mkdtemp(tmpdir));
        memset(&oa, 0, sizeof(oa));
        pthread_mutex_init(&oa.db_lock, NULL);
        oa.upload_max = 1000;
        cr_assert(asprintf(&oa.dir, "%s", tmpdir) > 0);
        cr_assert(asprintf(&oa.files_dir, "%s/files", tmpdir) > 0);
        cr_assert(asprintf(&oa.spool_dir, "%s/spool", tmpdir) > 0);
        cr_assert_eq(mkdir(oa.files_dir, 0700), 0);
        cr_assert_eq(mkdir(oa.spool_dir, 0700), 0);
        cr_assert_eq(db_open(&oa, &err), 0, "%s", err.msg);
}

static void store_teardown(void)
{
        db_close(&oa);
        free(oa.dir);
        free(oa.files_dir);
        free(oa.spool_dir);
        (void) nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Uploads text as a file the way the upload route does: spool, then create. */
static json_t *upload(const char *text, const char *filename, const char *purpose,
                      struct openai_error *e)
{
        _cleanup_free_ char *path = NULL;
        json_t *file = NULL;
        int fd = -1, r;

        cr_assert_eq(openai_spool_new(&oa, &fd, &path), 0);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        close(fd);
        r = openai_file_create(&oa, path, strlen(text), filename, purpose, &file, e);
        if (r < 0) {
                cr_expect_eq(access(path, F_OK), 0, "a refused upload stays the caller's");
                (void) unlink(path);
                return NULL;
        }
        cr_expect_neq(access(path, F_OK), 0, "a stored upload leaves the spool");
        return file;
}

Test(openai, files_are_stored_read_back_and_deleted, .init = store_setup, .fini = store_teardown)
{
        struct openai_error e = {};
        json_t *file, *got = NULL, *deleted = NULL;
        const char *id;
        uint64_t size = 0;
        char buf[16] = "";
        int fd = -1;

        file = upload("a,b\n1,2\n", "data.csv", "assistants", &e);
        cr_assert_not_null(file, "%s", e.message);
        id = json_string_value(json_object_get(file, "id"));
        cr_expect(openai_id_is_valid(id, OPENAI_FILE_PREFIX), "'%s'", id);
        cr_expect_str_eq(json_string_value(json_object_get(file, "object")), "file");
        cr_expect_eq(json_integer_value(json_object_get(file, "bytes")), 8);
        cr_expect_str_eq(json_string_value(json_object_get(file, "filename")), "data.csv");

        cr_assert_eq(openai_file_get(&oa, id, &got, &e), 0);
        cr_expect(json_equal(got, file));
        json_decref(got);
        cr_assert_eq(openai_file_open(&oa, id, &fd, &size, NULL, &e), 0);
        cr_expect_eq(size, 8);
        cr_expect_eq(read(fd, buf, sizeof(buf)), 8);
        cr_expect_str_eq(buf, "a,b\n1,2\n");
        close(fd);

        cr_assert_eq(openai_file_delete(&oa, id, &deleted, &e), 0);
        cr_expect(json_is_true(json_object_get(deleted, "deleted")));
        json_decref(deleted);
        cr_expect_eq(openai_file_get(&oa, id, &got, &e), -ENOENT);
        cr_expect_eq(e.status, 404);
        cr_expect_eq(openai_file_delete(&oa, id, NULL, &e), -ENOENT);
        json_decref(file);
}

Test(openai, bad_uploads_are_refused_and_left_to_the_caller, .init = store_setup,
     .fini = store_teardown)
{
        struct openai_error e = {};
        char big[1200];

        cr_expect_null(upload("x", "data.csv", "nonsense", &e));
        cr_expect_eq(e.status, 400);
        cr_expect_str_eq(e.param, "purpose");
        cr_expect_null(upload("x", "data.csv", NULL, &e));
        cr_expect_str_eq(e.param, "purpose");
        cr_expect_null(upload("x", "../x", "assistants", &e));
        cr_expect_str_eq(e.param, "file");
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        cr_expect_null(upload(big, "big.txt", "assistants", &e));
        cr_expect_eq(e.status, 413);
        cr_expect_str_eq(e.code, "file_too_large");
}

Test(openai, file_lists_page_in_sql, .init = store_setup, .fini = store_teardown)
{
        struct openai_error e = {};
        json_t *list = NULL, *f;
        char seen[5][OPENAI_FILE_ID_LEN + 1];

        for (int i = 0; i < 5; i++) {
                f = upload("x", "f.txt", i == 2 ? "vision" : "assistants", &e);
                cr_assert_not_null(f);
                strcpy(seen[i], json_string_value(json_object_get(f, "id")));
                json_decref(f);
        }
        cr_assert_eq(openai_file_list(&oa, &(struct openai_list_query){ .limit = 2 }, &list, &e),
                     0);
        cr_expect_eq(json_array_size(json_object_get(list, "data")), 2);
        cr_expect(json_is_true(json_object_get(list, "has_more")));
        {
                /* Walk the rest with the cursor: every file once, in one order. */
                char after[OPENAI_FILE_ID_LEN + 1];
                size_t total = 2;
                json_t *next = NULL;

                strcpy(after, json_string_value(json_object_get(list, "last_id")));
                for (;;) {
                        cr_assert_eq(openai_file_list(&oa,
                                                      &(struct openai_list_query){ .limit = 2,
                                                                                   .after = after },
                                                      &next, &e),
                                     0);
                        total += json_array_size(json_object_get(next, "data"));
                        if (!json_is_true(json_object_get(next, "has_more"))) {
                                json_decref(next);
                                break;
                        }
                        strcpy(after, json_string_value(json_object_get(next, "last_id")));
                        json_decref(next);
                }
                cr_expect_eq(total, 5);
        }
        json_decref(list);
        cr_assert_eq(openai_file_list(&oa, &(struct openai_list_query){ .purpose = "vision" },
                                      &list, &e),
                     0);
        cr_expect_eq(json_array_size(json_object_get(list, "data")), 1);
        cr_expect_str_eq(json_string_value(json_object_get(
                                 json_array_get(json_object_get(list, "data"), 0), "id")),
                         seen[2]);
        json_decref(list);
        cr_expect_eq(openai_file_list(&oa, &(struct openai_list_query){ .after = "file-nope" },
                                      &list, &e),
                     -EINVAL);
        cr_expect_str_eq(e.param, "after");
        cr_expect_eq(
                openai_file_list(&oa, &(struct openai_list_query){ .limit = 10001 }, &list, &e),
                -EINVAL);
        cr_expect_str_eq(e.param, "limit");
}

Test(openai, a_container_file_keeps_its_id, .init = store_setup, .fini = store_teardown)
{
        const char *sid = "s-0123456789abcdef01234567";
        json_t *a, *b, *c, *obj;

        a = cfile_record(&oa, sid, "out.csv", "assistant", 100);
        cr_assert_not_null(a);
        cr_expect(openai_id_is_valid(json_string_value(json_object_get(a, "id")),
                                     OPENAI_CFILE_PREFIX));
        /* Seen again by the code: same id, same source, same time. */
        b = cfile_record(&oa, sid, "out.csv", "assistant", 200);
        cr_expect(json_equal(a, b));
        /* Uploaded over: same id, now the user's. */
        c = cfile_record(&oa, sid, "out.csv", "user", 300);
        cr_expect_str_eq(json_string_value(json_object_get(c, "id")),
                         json_string_value(json_object_get(a, "id")));
        cr_expect_str_eq(json_string_value(json_object_get(c, "source")), "user");
        obj = cfile_object("cntr_0123456789abcdef01234567", c, 42);
        cr_expect_str_eq(json_string_value(json_object_get(obj, "path")), "/mnt/data/out.csv");
        cr_expect_str_eq(json_string_value(json_object_get(obj, "object")), "container.file");
        cr_expect_eq(json_integer_value(json_object_get(obj, "bytes")), 42);
        cr_expect_eq(json_integer_value(json_object_get(obj, "created_at")), 100);
        json_decref(obj);
        json_decref(a);
        json_decref(b);
        json_decref(c);
        /* Another container's file of the same path is another file. */
        a = cfile_record(&oa, "s-ffffffffffffffffffffffff", "out.csv", "assistant", 100);
        b = cfile_record(&oa, sid, "out.csv", "assistant", 100);
        cr_expect_str_neq(json_string_value(json_object_get(a, "id")),
                          json_string_value(json_object_get(b, "id")));
        json_decref(a);
        json_decref(b);
}

Test(openai, a_cells_files_are_registered_for_citations, .init = store_setup,
     .fini = store_teardown)
{
        const char *cid = "cntr_0123456789abcdef01234567", *sid = "s-0123456789abcdef01234567";
        struct openai_error e = {};
        json_t *known, *files, *out = NULL, *again = NULL;

        known = cfile_record(&oa, sid, "data.csv", "user", 50);
        files = json_pack("[{s:s, s:i, s:s}, {s:s, s:i, s:s}, {s:s, s:s}, {s:s}]", "path",
                          "plot.png", "size", 10, "change", "created", "path", "data.csv", "size",
                          7, "change", "modified", "path", "old.txt", "change", "deleted", "path",
                          "no-change.txt");
        json_decref(cfile_record(&oa, sid, "old.txt", "assistant", 40));

        cr_assert_eq(openai_container_files_register(&oa, cid, files, &out, &e), 0, "%s",
                     e.message);
        /* Created and modified files, in order; the deleted and the malformed are not. */
        cr_assert_eq(json_array_size(out), 2);
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(out, 0), "path")),
                         "/mnt/data/plot.png");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(out, 0), "source")),
                         "assistant");
        cr_expect_eq(json_integer_value(json_object_get(json_array_get(out, 0), "bytes")), 10);
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(out, 0), "container_id")),
                         cid);
        /* A file the user uploaded and the code changed keeps its id and source. */
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(out, 1), "id")),
                         json_string_value(json_object_get(known, "id")));
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(out, 1), "source")),
                         "user");
        /* Registered twice (a later cell): the same ids, so citations stay valid. */
        cr_assert_eq(openai_container_files_register(&oa, cid, files, &again, &e), 0);
        cr_expect(json_equal(json_array_get(out, 0), json_array_get(again, 0)));
        /* The deleted path lost its id. */
        cr_expect_null(db_query_one(&oa,
                                    "SELECT id FROM container_files WHERE session_id = ?1 AND "
                                    "path = 'old.txt'",
                                    "s", sid));
        cr_expect_eq(openai_container_files_register(&oa, "cntr_nope", files, &again, &e), -ENOENT);
        json_decref(known);
        json_decref(files);
        json_decref(out);
        json_decref(again);
}
