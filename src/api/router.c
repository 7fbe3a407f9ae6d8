/* Route matching on the raw request path. The server installs an identity unescape callback,
 * so the path arrives here exactly as the client sent it: decoding each segment after
 * splitting on '/' is what keeps "%2F" from inventing separators in a session id and lets
 * "%00" be refused instead of silently cutting a C string short. */
#include "router.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define REST_PARAM "{path*}"
#define ID_PARAM "{id}"
#define SUB_PARAM "{sub}"

static int hex_value(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int percent_decode(const char *src, size_t len, bool plus_space, char *dst, size_t dst_size)
{
        size_t o = 0;

        for (size_t i = 0; i < len; i++) {
                char c = src[i];

                if (c == '%') {
                        int hi, lo;
                        if (i + 2 >= len)
                                return -EINVAL;
                        hi = hex_value(src[i + 1]);
                        lo = hex_value(src[i + 2]);
                        if (hi < 0 || lo < 0)
                                return -EINVAL;
                        c = (char) (hi << 4 | lo);
                        /* An escaped NUL would end the C string early: "a%00.py" must not
                         * quietly become "a". */
                        if (c == '\0')
                                return -EINVAL;
                        i += 2;
                } else if (c == '+' && plus_space) {
                        c = ' ';
                } else if (c == '\0') {
                        return -EINVAL;
                }
                if (o + 1 >= dst_size)
                        return -E2BIG;
                dst[o++] = c;
        }
        if (dst_size == 0)
                return -E2BIG;
        dst[o] = '\0';
        return (int) o;
}

int route_check_file_path(const char *path, bool allow_empty, const char **ret_why)
{
        const char *p = path;

        if (*path == '\0') {
                if (allow_empty)
                        return 0;
                *ret_why = "the path is empty";
                return -EINVAL;
        }
        if (*path == '/') {
                *ret_why = "the path must be relative to /work (no leading '/')";
                return -EINVAL;
        }
        if (strlen(path) > ROUTE_PATH_MAX) {
                *ret_why = "the path is longer than 4096 bytes";
                return -EINVAL;
        }
        for (;;) {
                const char *end = strchrnul(p, '/');
                size_t n = (size_t) (end - p);

                if (n == 0) {
                        *ret_why = "the path has an empty component ('//' or a trailing '/')";
                        return -EINVAL;
                }
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
                        *ret_why = "'.' and '..' are not allowed in a path";
                        return -EINVAL;
                }
                if (n > ROUTE_SEGMENT_MAX) {
                        *ret_why = "a path component is longer than 255 bytes";
                        return -EINVAL;
                }
                if (*end == '\0')
                        return 0;
                p = end + 1;
        }
}

int route_match(const char *pattern, const char *raw_path, struct route_params *ret_params)
{
        struct route_params out = { 0 };
        const char *pp, *rp, *rend;
        size_t rlen;
        int r;

        if (pattern[0] != '/' || raw_path[0] != '/')
                return 0;
        rlen = strlen(raw_path);
        if (!strstr(pattern, REST_PARAM) && rlen > 1 && raw_path[rlen - 1] == '/')
                rlen--;
        pp = pattern + 1;
        rp = raw_path + 1;
        rend = raw_path + rlen;

        for (;;) {
                const char *pend = strchrnul(pp, '/');
                size_t plen = (size_t) (pend - pp);
                const char *send;
                char seg[ROUTE_SEGMENT_MAX + 1];

                if (plen == strlen(REST_PARAM) && memcmp(pp, REST_PARAM, plen) == 0) {
                        r = percent_decode(rp, (size_t) (rend - rp), false, out.path,
                                           sizeof(out.path));
                        if (r < 0)
                                return r;
                        out.has_path = true;
                        break;
                }

                send = memchr(rp, '/', (size_t) (rend - rp));
                if (!send)
                        send = rend;
                r = percent_decode(rp, (size_t) (send - rp), false, seg, sizeof(seg));
                if (r < 0)
                        return r;
                if (plen == strlen(ID_PARAM) && memcmp(pp, ID_PARAM, plen) == 0) {
                        if (r == 0)
                                return 0;
                        memcpy(out.id, seg, (size_t) r + 1);
                        out.has_id = true;
                } else if (plen == strlen(SUB_PARAM) && memcmp(pp, SUB_PARAM, plen) == 0) {
                        if (r == 0)
                                return 0;
                        memcpy(out.sub, seg, (size_t) r + 1);
                        out.has_sub = true;
                } else if ((size_t) r != plen || memcmp(seg, pp, plen) != 0) {
                        return 0;
                }

                pp = pend;
                rp = send;
                if (*pp == '\0') {
                        if (rp != rend)
                                return 0;
                        break;
                }
                pp++;
                if (rp == rend) {
                        /* ".../files" matches ".../files/{path*}" with an empty rest, so the
                         * listing answers with and without the trailing slash. */
                        if (strcmp(pp, REST_PARAM) != 0)
                                return 0;
                        out.has_path = true;
                        break;
                }
                rp++;
        }
        *ret_params = out;
        return 1;
}

static void allow_add(char *allow, size_t allow_size, const char *method)
{
        size_t len = strlen(allow);
        const char *p = allow;

        /* Skip duplicates: several patterns may accept the same method. */
        while (*p) {
                size_t n = strcspn(p, ",");
                if (n == strlen(method) && memcmp(p, method, n) == 0)
                        return;
                p += n;
                while (*p == ',' || *p == ' ')
                        p++;
        }
        (void) snprintf(allow + len, allow_size - len, "%s%s", len ? ", " : "", method);
}

int route_find(const struct api_route *routes, size_t n_routes, const char *method,
               const char *raw_path, const struct api_route **ret_route,
               struct route_params *ret_params, char *allow, size_t allow_size)
{
        const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
        bool path_matched = false;

        if (allow_size > 0)
                allow[0] = '\0';
        for (size_t i = 0; i < n_routes; i++) {
                struct route_params params;
                int r = route_match(routes[i].pattern, raw_path, &params);

                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                if (strcmp(routes[i].method, m) == 0) {
                        *ret_route = &routes[i];
                        *ret_params = params;
                        return 0;
                }
                path_matched = true;
                if (allow_size > 0) {
                        allow_add(allow, allow_size, routes[i].method);
                        if (strcmp(routes[i].method, "GET") == 0)
                                allow_add(allow, allow_size, "HEAD");
                }
        }
        return path_matched ? -EOPNOTSUPP : -ENOENT;
}
