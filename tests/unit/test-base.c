/* Unit tests for src/base: size and duration parsing, UTF-8 repair of captured output, and the
 * length-prefixed JSON wire protocol. These helpers sit under every other module, so their
 * edge cases (overflow, malformed bytes, truncated frames) are pinned down here. */
#include "base/buf.h"
#include "base/cidr.h"
#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/node-id.h"
#include "base/utf8.h"
#include "base/util.h"
#include "base/wire.h"

#include <criterion/criterion.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define FFFD "\xef\xbf\xbd"

/* parse_size */

struct size_case {
        const char *in;
        int r;
        uint64_t bytes;
};

Test(parse_size, table)
{
        static const struct size_case cases[] = {
                { "1024", 0, 1024 },
                { "1K", 0, 1024 },
                { "1KiB", 0, 1024 },
                { "1kib", 0, 1024 },
                { "1kb", 0, 1000 },
                { "1KB", 0, 1000 },
                { "1.5GiB", 0, UINT64_C(1610612736) },
                { "2 MiB", 0, UINT64_C(2097152) },
                { "0", 0, 0 },
                { "0.5K", 0, 512 },
                { "3GB", 0, UINT64_C(3000000000) },
                { "1T", 0, UINT64_C(1099511627776) },
                { "7b", 0, 7 },
                { "", -EINVAL, 0 },
                { " ", -EINVAL, 0 },
                { "abc", -EINVAL, 0 },
                { "K", -EINVAL, 0 },
                { "1XB", -EINVAL, 0 },
                { "-5", -EINVAL, 0 },
                { "+5", -EINVAL, 0 },
                { "1.5", -EINVAL, 0 },
                { "1.5b", -EINVAL, 0 },
                { "12 parsecs", -EINVAL, 0 },
                { "0x10", -EINVAL, 0 },
                { "1e3", -EINVAL, 0 },
                { "inf", -EINVAL, 0 },
                { "nan", -EINVAL, 0 },
                { "99999999999TiB", -ERANGE, 0 },
                { "18446744073709551616", -ERANGE, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint64_t bytes = UINT64_C(0xdeadbeef);
                int r = parse_size(cases[i].in, &bytes);

                cr_expect_eq(r, cases[i].r, "parse_size(\"%s\") returned %d, expected %d",
                             cases[i].in, r, cases[i].r);
                if (cases[i].r == 0)
                        cr_expect_eq(bytes, cases[i].bytes,
                                     "parse_size(\"%s\") gave %llu, expected %llu", cases[i].in,
                                     (unsigned long long) bytes,
                                     (unsigned long long) cases[i].bytes);
                else
                        cr_expect_eq(bytes, UINT64_C(0xdeadbeef),
                                     "parse_size(\"%s\") wrote its output on failure", cases[i].in);
        }
}

Test(parse_size, null_is_einval)
{
        uint64_t bytes;

        cr_assert_eq(parse_size(NULL, &bytes), -EINVAL);
}

/* parse_duration_ms */

Test(parse_duration_ms, table)
{
        static const struct size_case cases[] = {
                { "30", 0, 30000 },
                { "30s", 0, 30000 },
                { "30S", 0, 30000 },
                { "1.5s", 0, 1500 },
                { "0.5", 0, 500 },
                { "250ms", 0, 250 },
                { "2m", 0, 120000 },
                { "2h", 0, 7200000 },
                { "5d", 0, 432000000 },
                { "0", 0, 0 },
                { "", -EINVAL, 0 },
                { "abc", -EINVAL, 0 },
                { "s", -EINVAL, 0 },
                { "-1", -EINVAL, 0 },
                { "-1s", -EINVAL, 0 },
                { "5x", -EINVAL, 0 },
                { "30 parsecs", -EINVAL, 0 },
                { "1e3", -EINVAL, 0 },
                { "99999999999999999m", -ERANGE, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint64_t ms = UINT64_C(0xdeadbeef);
                int r = parse_duration_ms(cases[i].in, &ms);

                cr_expect_eq(r, cases[i].r, "parse_duration_ms(\"%s\") returned %d, expected %d",
                             cases[i].in, r, cases[i].r);
                if (cases[i].r == 0)
                        cr_expect_eq(ms, cases[i].bytes,
                                     "parse_duration_ms(\"%s\") gave %llu, expected %llu",
                                     cases[i].in, (unsigned long long) ms,
                                     (unsigned long long) cases[i].bytes);
        }
}

/* utf8_sanitize, utf8_is_valid and utf8_complete_prefix */

struct utf8_case {
        const char *in;
        size_t len;
        const char *out;
};

#define U(in, out)                                                                                 \
        {                                                                                          \
                in, sizeof(in) - 1, out                                                            \
        }

Test(utf8, sanitize_table)
{
        static const struct utf8_case cases[] = {
                U("", ""),
                U("hello, world\n", "hello, world\n"),
                /* Two-, three- and four-byte sequences pass unchanged. */
                U("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80",
                  "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"),
                U("a\xff"
                  "b",
                  "a" FFFD "b"),
                U("\xfe", FFFD),
                /* Overlong encodings of NUL and '/'. */
                U("\xc0\x80", FFFD FFFD),
                U("\xe0\x80\xaf", FFFD FFFD FFFD),
                /* A UTF-16 surrogate, U+D800. */
                U("\xed\xa0\x80", FFFD FFFD FFFD),
                /* Above U+10FFFF. */
                U("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD),
                /* A sequence cut short at the end, and one interrupted by ASCII. */
                U("ab\xe2\x82", "ab" FFFD FFFD),
                U("\xe2\x82"
                  "A",
                  FFFD FFFD "A"),
                /* A lone continuation byte. */
                U("\x80", FFFD),
                /* NUL would end a C string early, so it is replaced too. */
                U("a\0b", "a" FFFD "b"),
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *out = utf8_sanitize(cases[i].in, cases[i].len);

                cr_assert_not_null(out);
                cr_expect_str_eq(out, cases[i].out, "case %zu: got \"%s\"", i, out);
                /* Valid exactly when sanitizing changes nothing. */
                cr_expect_eq(utf8_is_valid(cases[i].in, cases[i].len),
                             strlen(cases[i].out) == cases[i].len &&
                                     memcmp(cases[i].out, cases[i].in, cases[i].len) == 0,
                             "case %zu", i);
        }
}

Test(utf8, complete_prefix_table)
{
        static const struct {
                const char *in;
                size_t len;
                size_t prefix;
        } cases[] = {
                { "", 0, 0 },
                { "abc", 3, 3 },
                { "a\xc3", 2, 1 },
                { "a\xc3\xa9", 3, 3 },
                { "ab\xe2\x82", 4, 2 },
                { "ab\xe2\x82\xac", 5, 5 },
                { "a\xf0\x9f\x98", 4, 1 },
                { "a\xf0\x9f\x98\x80", 5, 5 },
                { "\xf0", 1, 0 },
                /* No lead byte within reach: nothing to wait for, so nothing is held back. */
                { "\x80\x80\x80\x80", 4, 4 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t n = utf8_complete_prefix(cases[i].in, cases[i].len);

                cr_expect_eq(n, cases[i].prefix, "case %zu: got %zu, expected %zu", i, n,
                             cases[i].prefix);
        }
}

/* wire_send and wire_recv */

struct wire_pair {
        int fd[2];
};

static void wire_pair_open(struct wire_pair *p)
{
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p->fd), 0, "socketpair: %s",
                     strerror(errno));
}

static void wire_pair_close(struct wire_pair *p)
{
        for (size_t i = 0; i < 2; i++)
                if (p->fd[i] >= 0)
                        (void) close(p->fd[i]);
}

static void write_raw_frame(int fd, uint32_t announced, const char *payload, size_t len)
{
        uint32_t le = htole32(announced);

        cr_assert_eq(write_full(fd, &le, sizeof(le)), 0);
        if (len > 0)
                cr_assert_eq(write_full(fd, payload, len), 0);
}

Test(wire, round_trip)
{
        _cleanup_(json_decrefp) json_t *sent = NULL, *got = NULL, *got2 = NULL;
        struct wire_pair p;

        wire_pair_open(&p);
        sent = json_pack("{s:s, s:s, s:i, s:[s,s]}", "op", "exec", "code",
                         "print('h\xc3\xa9llo')\n", "n", 3, "list", "a", "b");
        cr_assert_not_null(sent);

        cr_assert_eq(wire_send(p.fd[0], sent), 0);
        cr_assert_eq(wire_send(p.fd[0], sent), 0);
        cr_assert_eq(wire_recv(p.fd[1], 1024 * 1024, &got), 0);
        cr_assert(json_equal(sent, got));
        cr_assert_eq(wire_recv(p.fd[1], 1024 * 1024, &got2), 0);
        cr_assert(json_equal(sent, got2));
        wire_pair_close(&p);
}

Test(wire, frame_format_is_le32_length_then_json)
{
        _cleanup_(json_decrefp) json_t *obj = json_pack("{s:s}", "op", "ready");
        struct wire_pair p;
        char buf[64];
        uint32_t le;

        wire_pair_open(&p);
        cr_assert_eq(wire_send(p.fd[0], obj), 0);
        cr_assert_eq(read_full(p.fd[1], &le, sizeof(le)), 0);
        cr_assert_eq(le32toh(le), strlen("{\"op\":\"ready\"}"));
        cr_assert_eq(read_full(p.fd[1], buf, le32toh(le)), 0);
        buf[le32toh(le)] = '\0';
        cr_assert_str_eq(buf, "{\"op\":\"ready\"}");
        wire_pair_close(&p);
}

Test(wire, frame_over_max_is_e2big)
{
        _cleanup_(json_decrefp) json_t *obj = NULL, *got = NULL;
        struct wire_pair p;

        wire_pair_open(&p);
        obj = json_pack("{s:s}", "code", "0123456789012345678901234567890123456789");
        cr_assert_eq(wire_send(p.fd[0], obj), 0);
        cr_assert_eq(wire_recv(p.fd[1], 16, &got), -E2BIG);
        cr_assert_null(got);
        wire_pair_close(&p);
}

Test(wire, announced_length_over_frame_max_is_e2big)
{
        _cleanup_(json_decrefp) json_t *got = NULL;
        struct wire_pair p;

        wire_pair_open(&p);
        write_raw_frame(p.fd[0], WIRE_FRAME_MAX + 1, NULL, 0);
        cr_assert_eq(wire_recv(p.fd[1], SIZE_MAX, &got), -E2BIG);
        wire_pair_close(&p);
}

Test(wire, send_over_frame_max_is_e2big)
{
        _cleanup_(json_decrefp) json_t *obj = NULL;
        _cleanup_free_ char *big = NULL;
        struct wire_pair p;

        big = malloc(WIRE_FRAME_MAX + 1);
        cr_assert_not_null(big);
        memset(big, 'a', WIRE_FRAME_MAX + 1);
        obj = json_object();
        cr_assert_eq(json_object_set_new(obj, "code", json_stringn(big, WIRE_FRAME_MAX + 1)), 0);

        wire_pair_open(&p);
        cr_assert_eq(wire_send(p.fd[0], obj), -E2BIG);
        /* Nothing was written: the peer sees a clean EOF. */
        (void) close(p.fd[0]);
        p.fd[0] = -1;
        {
                _cleanup_(json_decrefp) json_t *got = NULL;
                cr_assert_eq(wire_recv(p.fd[1], SIZE_MAX, &got), -EPIPE);
        }
        wire_pair_close(&p);
}

Test(wire, truncated_payload_is_ebadmsg)
{
        _cleanup_(json_decrefp) json_t *got = NULL;
        struct wire_pair p;

        wire_pair_open(&p);
        write_raw_frame(p.fd[0], 100, "{\"op\":\"re", 9);
        (void) close(p.fd[0]);
        p.fd[0] = -1;
        cr_assert_eq(wire_recv(p.fd[1], 1024, &got), -EBADMSG);
        wire_pair_close(&p);
}

Test(wire, truncated_length_prefix_is_ebadmsg)
{
        _cleanup_(json_decrefp) json_t *got = NULL;
        struct wire_pair p;

        wire_pair_open(&p);
        cr_assert_eq(write_full(p.fd[0], "\x10\x00", 2), 0);
        (void) close(p.fd[0]);
        p.fd[0] = -1;
        cr_assert_eq(wire_recv(p.fd[1], 1024, &got), -EBADMSG);
        wire_pair_close(&p);
}

Test(wire, non_object_payload_is_ebadmsg)
{
        static const char *const payloads[] = { "[1,2,3]",  "\"op\"",   "42", "null",
                                                "not json", "{\"op\":", "" };
        struct wire_pair p;

        wire_pair_open(&p);
        for (size_t i = 0; i < ELEMENTSOF(payloads); i++) {
                _cleanup_(json_decrefp) json_t *got = NULL;
                size_t len = strlen(payloads[i]);

                write_raw_frame(p.fd[0], (uint32_t) len, payloads[i], len);
                cr_expect_eq(wire_recv(p.fd[1], 1024, &got), -EBADMSG, "payload \"%s\"",
                             payloads[i]);
                cr_expect_null(got);
        }
        wire_pair_close(&p);
}

Test(wire, duplicate_keys_are_ebadmsg)
{
        static const char payload[] = "{\"op\":\"exec\",\"op\":\"init\"}";
        _cleanup_(json_decrefp) json_t *got = NULL;
        struct wire_pair p;

        wire_pair_open(&p);
        write_raw_frame(p.fd[0], sizeof(payload) - 1, payload, sizeof(payload) - 1);
        cr_assert_eq(wire_recv(p.fd[1], 1024, &got), -EBADMSG);
        wire_pair_close(&p);
}

Test(wire, clean_eof_is_epipe)
{
        _cleanup_(json_decrefp) json_t *got = NULL;
        struct wire_pair p;

        wire_pair_open(&p);
        (void) close(p.fd[0]);
        p.fd[0] = -1;
        cr_assert_eq(wire_recv(p.fd[1], 1024, &got), -EPIPE);
        wire_pair_close(&p);
}

Test(buf, appends_terminates_and_stops_at_the_limit)
{
        struct buf b = { 0 };
        char big[40000];

        cr_assert_eq(buf_append(&b, "abc", 3, 10), 0);
        cr_assert_eq(buf_append(&b, "de", 2, 10), 0);
        cr_assert_eq(b.len, 5);
        cr_assert_str_eq(b.data, "abcde");
        /* Past the limit nothing is appended, so what was there stays whole. */
        cr_assert_eq(buf_append(&b, "123456", 6, 10), -E2BIG);
        cr_assert_eq(b.len, 5);
        cr_assert_str_eq(b.data, "abcde");
        cr_assert_eq(buf_append(&b, "12345", 5, 10), 0, "exactly at the limit is fine");
        cr_assert_eq(b.len, 10);
        cr_assert_eq(buf_append(&b, "x", 1, SIZE_MAX), 0, "no overflow at the top of size_t");
        /* Growth past the first allocation keeps the data and the terminator. */
        memset(big, 'z', sizeof(big));
        cr_assert_eq(buf_append(&b, big, sizeof(big), SIZE_MAX), 0);
        cr_assert_eq(b.len, 11 + sizeof(big));
        cr_assert_eq(b.data[b.len], '\0');
        cr_assert_eq(memcmp(b.data, "abcde12345x", 11), 0);
        buf_done(&b);
        cr_assert_null(b.data);
        cr_assert_eq(b.len, 0);
}

Test(json_util, names_every_type)
{
        json_t *v[] = { json_object(),  json_array(), json_string("s"), json_integer(1),
                        json_real(1.5), json_true(),  json_null() };
        const char *want[] = { "an object", "an array",  "a string", "a number",
                               "a number",  "a boolean", "null" };

        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
                cr_assert_str_eq(json_type_name(v[i]), want[i]);
                json_decref(v[i]);
        }
}

/* fd_room() under a soft limit of 256, in this test's own process (Criterion forks one per
 * test): room while the top of the range is free; the exact count once a high fd holds the
 * top (holes below it still count); -EMFILE once fewer than asked are left. */
Test(fd_room, counts_what_the_limit_leaves)
{
        struct rlimit rl;
        int fds[256], n = 0, high;

        cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
        rl.rlim_cur = 256;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        cr_assert_eq(fd_room(0), 0);
        cr_assert_eq(fd_room(100), 0);
        cr_assert_eq(fd_room(257), -EMFILE);

        /* The top number taken: the quick check fails, the count still finds room. */
        high = fcntl(0, F_DUPFD_CLOEXEC, 255);
        cr_assert_eq(high, 255);
        cr_assert_eq(fd_room(100), 0);

        /* Fill up to 50 free numbers. */
        while (true) {
                int fd = fcntl(0, F_DUPFD_CLOEXEC, 0);

                cr_assert_geq(fd, 0);
                fds[n++] = fd;
                if (fd == 255 - 50 - 1)
                        break;
        }
        cr_assert_eq(fd_room(50), 0);
        cr_assert_eq(fd_room(51), -EMFILE);
        /* and the probe left nothing open behind it */
        cr_assert_eq(fcntl(0, F_DUPFD_CLOEXEC, 0), 255 - 50);
        cr_assert_eq(fd_room(51), -EMFILE);
        cr_assert_eq(fd_room(49), 0);
        while (n > 0)
                close(fds[--n]);
        close(high);
}

/* ---- node names and ids (node-id.h) --------------------------------------------------------- */

Test(node_id, names)
{
        cr_assert(node_name_is_valid("n1"));
        cr_assert(node_name_is_valid("a"));
        cr_assert(node_name_is_valid("airlock-15"));
        cr_assert(node_name_is_valid("0123456789abcdef0123456789abcdef"));
        cr_assert(!node_name_is_valid("0123456789abcdef0123456789abcdef0"));
        cr_assert(!node_name_is_valid(""));
        cr_assert(!node_name_is_valid("-a"));
        cr_assert(!node_name_is_valid("a-"));
        cr_assert(!node_name_is_valid("A"));
        cr_assert(!node_name_is_valid("a.b"));
        cr_assert(!node_name_is_valid("a_b"));
        cr_assert(!node_name_is_valid(NULL));
        cr_assert_eq(node_set_self("Bad"), -EINVAL);
        cr_assert_null(node_self());
}

Test(node_id, split_and_append)
{
        char node[NODE_NAME_MAX + 1], id[64] = "s-0123456789abcdef01234567";

        cr_assert_eq(node_id_split(id, 26, node), 0);
        cr_assert_str_eq(node, "");
        cr_assert(node_is_self(node));
        /* Without a node, ids stay exactly as they are. */
        cr_assert_eq(node_id_append(id, sizeof(id)), 0);
        cr_assert_str_eq(id, "s-0123456789abcdef01234567");

        cr_assert_eq(node_set_self("n1"), 0);
        cr_assert_str_eq(node_self(), "n1");
        cr_assert_eq(node_id_append(id, 28), -ENOBUFS);
        cr_assert_eq(node_id_append(id, sizeof(id)), 0);
        cr_assert_str_eq(id, "s-0123456789abcdef01234567-n1");
        cr_assert_eq(node_id_split(id, 26, node), 1);
        cr_assert_str_eq(node, "n1");
        cr_assert(node_is_self(node));
        cr_assert(!node_is_self("n2"));

        cr_assert_eq(node_id_split("s-0123456789abcdef01234567-", 26, node), -EINVAL);
        cr_assert_eq(node_id_split("s-0123456789abcdef01234567x", 26, node), -EINVAL);
        cr_assert_eq(node_id_split("s-0123456789abcdef01234567-N1", 26, node), -EINVAL);
        cr_assert_eq(node_id_split("s-0123456789abcdef01234567--", 26, node), -EINVAL);
        cr_assert_eq(node_id_split("s-0123456789abcdef0123456", 26, node), -EINVAL);
        cr_assert_eq(node_id_split("s-0123456789abcdef01234567-0123456789abcdef0123456789abcdef0",
                                   26, node),
                     -EINVAL);
        cr_assert_eq(node_set_self(NULL), 0);
}

Test(node_id, peers_ranges_and_node)
{
        struct node_peer p[NODE_PEERS_MAX];
        char why[256];
        size_t n = 0;

        cr_assert_eq(node_peers_parse("airlock-[0-15]={node}.airlock-peers:8080", "airlock-3", p,
                                      NODE_PEERS_MAX, &n, why, sizeof(why)),
                     0, "%s", why);
        cr_assert_eq(n, 15); /* itself left out */
        cr_assert_str_eq(p[0].name, "airlock-0");
        cr_assert_str_eq(p[0].addr, "airlock-0.airlock-peers:8080");
        cr_assert_str_eq(p[3].name, "airlock-4");
        cr_assert_str_eq(p[14].addr, "airlock-15.airlock-peers:8080");

        cr_assert_eq(node_peers_parse("n0=10.1.2.2:8080,n1=10.1.2.3:8080,n2=[::1]:80", NULL, p,
                                      NODE_PEERS_MAX, &n, why, sizeof(why)),
                     0, "%s", why);
        cr_assert_eq(n, 3);
        cr_assert_str_eq(p[1].name, "n1");
        cr_assert_str_eq(p[1].addr, "10.1.2.3:8080");
        cr_assert_str_eq(p[2].addr, "[::1]:80");

        char self[NODE_HOST_MAX + 1];
        cr_assert_eq(node_peers_self_addr("airlock-[0-3]={node}.peers:8080", "airlock-2", self), 0);
        cr_assert_str_eq(self, "airlock-2.peers:8080");
        cr_assert_eq(node_peers_self_addr("n0=h:1", "n9", self), -ENOENT);

        cr_assert_eq(node_set_peers(p, n), 0);
        cr_assert_not_null(node_peer_find("n2"));
        cr_assert_null(node_peer_find("n3"));
        cr_assert_eq(node_set_peers(NULL, 0), 0);
        cr_assert_null(node_peer_find("n2"));
}

Test(node_id, peers_bad_specs)
{
        static const char *const bad[] = {
                "",
                "n1",
                "n1=",
                "=h:1",
                "n1=h",
                "n1=h:0",
                "n1=h:65536",
                "n1=h:x",
                "N1=h:1",
                "n1=h/x:1",
                "n1=h:1,",
                ",n1=h:1",
                "n1=h:1,,n2=h:2",
                "n1=h:1,n1=h:2",
                "n[3-1]=h:1",
                "n[1-x]=h:1",
                "n[1-]=h:1",
                "n[0-999]=h:1",
                "-n[0-1]=h:1",
                "n1=[::1:80",
                "0123456789abcdef0123456789abcdef0=h:1",
        };
        struct node_peer p[NODE_PEERS_MAX];
        char why[256];
        size_t n;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                why[0] = '\0';
                cr_assert_lt(
                        node_peers_parse(bad[i], NULL, p, NODE_PEERS_MAX, &n, why, sizeof(why)), 0,
                        "%s", bad[i]);
                cr_assert(strstr(why, "--peers"), "%s: %s", bad[i], why);
        }
        /* The message names the bad entry. */
        cr_assert_eq(node_peers_parse("n1=h:1,n2=h:99999", NULL, p, NODE_PEERS_MAX, &n, why,
                                      sizeof(why)),
                     -EINVAL);
        cr_assert(strstr(why, "'n2=h:99999'"), "%s", why);
}

/* ---- --trusted-proxies (cidr.h) -------------------------------------------------------------- */

static void v4(uint8_t ip[16], unsigned a, unsigned b, unsigned c, unsigned d)
{
        memset(ip, 0, 16);
        ip[10] = ip[11] = 0xff;
        ip[12] = (uint8_t) a, ip[13] = (uint8_t) b, ip[14] = (uint8_t) c, ip[15] = (uint8_t) d;
}

Test(cidr, parse_and_match)
{
        struct cidr l[CIDR_LIST_MAX];
        uint8_t ip[16];
        char why[256];
        size_t n;

        cr_assert_eq(cidr_list_parse("10.0.0.0/8,127.0.0.1,fd00::/8", l, CIDR_LIST_MAX, &n, why,
                                     sizeof(why)),
                     0, "%s", why);
        cr_assert_eq(n, 3);
        v4(ip, 10, 1, 2, 3);
        cr_assert(cidr_list_match(l, n, ip));
        v4(ip, 11, 1, 2, 3);
        cr_assert(!cidr_list_match(l, n, ip));
        v4(ip, 127, 0, 0, 1);
        cr_assert(cidr_list_match(l, n, ip));
        v4(ip, 127, 0, 0, 2);
        cr_assert(!cidr_list_match(l, n, ip));
        memset(ip, 0, 16);
        ip[0] = 0xfd, ip[15] = 1;
        cr_assert(cidr_list_match(l, n, ip));
        ip[0] = 0xfe;
        cr_assert(!cidr_list_match(l, n, ip));

        cr_assert_eq(cidr_list_parse("10.1.0.0/12", l, CIDR_LIST_MAX, &n, why, sizeof(why)), 0);
        v4(ip, 10, 15, 255, 1);
        cr_assert(cidr_list_match(l, n, ip));
        v4(ip, 10, 16, 0, 1);
        cr_assert(!cidr_list_match(l, n, ip));
        cr_assert_eq(cidr_list_parse("0.0.0.0/0", l, CIDR_LIST_MAX, &n, why, sizeof(why)), 0);
        cr_assert(cidr_list_match(l, n, ip));

        static const char *const bad[] = { "",       "10.0.0.0/33", "10.0.0.0/", "x", "10.0.0.0/8,",
                                           "::/129", "10.0.0.0/-1", "1.2.3.4/8x" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_assert_eq(cidr_list_parse(bad[i], l, CIDR_LIST_MAX, &n, why, sizeof(why)),
                             -EINVAL, "%s", bad[i]);
                cr_assert(strstr(why, "bad entry"), "%s", why);
        }
}
