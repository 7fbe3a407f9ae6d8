/* The pure half of E2B compatibility: ids, paths, templates, the code interpreter's events and
 * the Connect envelope codec. No state, no I/O: unit-tested in tests/unit/test-e2b.c. */
#include "e2b.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool is_lower_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

int e2b_sandbox_id(const char *session_id, char ret_id[E2B_SANDBOX_ID_MAX + 1])
{
        char node[NODE_NAME_MAX + 1];

        if (strncmp(session_id, "s-", 2) != 0 ||
            node_id_split(session_id + 2, E2B_SANDBOX_ID_LEN, node) < 0 ||
            !is_lower_hex(session_id + 2, E2B_SANDBOX_ID_LEN))
                return -EINVAL;
        memcpy(ret_id, session_id + 2, strlen(session_id + 2) + 1);
        return 0;
}

int e2b_session_id(const char *id, char ret_session[E2B_SESSION_ID_MAX + 1])
{
        char node[NODE_NAME_MAX + 1];
        size_t n;

        if (strnlen(id, E2B_SANDBOX_ID_LEN) != E2B_SANDBOX_ID_LEN ||
            !is_lower_hex(id, E2B_SANDBOX_ID_LEN) ||
            (id[E2B_SANDBOX_ID_LEN] != '\0' && id[E2B_SANDBOX_ID_LEN] != '-'))
                return -EINVAL;
        /* "<sandboxID>-<clientID>": what older API answers made of an id; the client part
         * names no session. With nodes a sandboxID is "<24 hex>-NODE": the longest run of
         * '-'-separated parts after the hex that names this node or a peer is the node, the
         * rest (or everything, when none does) the client's. */
        n = E2B_SANDBOX_ID_LEN;
        if (id[n] == '-') {
                const char *rest = id + n + 1;
                size_t k = strnlen(rest, NODE_NAME_MAX + 1);

                while (k > 0) {
                        if (k <= NODE_NAME_MAX) {
                                memcpy(node, rest, k);
                                node[k] = '\0';
                                if (node_name_is_valid(node) &&
                                    ((node_self() && node_is_self(node)) || node_peer_find(node))) {
                                        n += 1 + k;
                                        break;
                                }
                        }
                        while (k > 0 && rest[k - 1] != '-')
                                k--;
                        if (k > 0)
                                k--; /* drop the '-' too */
                }
        }
        memcpy(ret_session, "s-", 2);
        memcpy(ret_session + 2, id, n);
        ret_session[2 + n] = '\0';
        return 0;
}

/* The part of path below the directory prefix (without a trailing slash), or NULL. */
static const char *below(const char *path, const char *prefix)
{
        size_t n = strlen(prefix);

        if (strncmp(path, prefix, n) != 0)
                return NULL;
        if (path[n] == '\0')
                return path + n;
        if (path[n] == '/')
                return path + n + 1;
        return NULL;
}

int e2b_work_path(const char *path, char *ret, size_t size, const char **ret_why)
{
        const char *rest = path;
        size_t o = 0;

        if (path[0] == '/') {
                rest = below(path, "/home/user");
                if (!rest)
                        rest = below(path, "/work");
                if (!rest) {
                        *ret_why = "airlock's files are those of /home/user (the session's /work); "
                                   "this path is outside it";
                        return -EINVAL;
                }
        } else if (path[0] == '~' && (path[1] == '\0' || path[1] == '/')) {
                rest = path[1] ? path + 2 : path + 1;
        }

        /* Component by component: empty and "." ones go, ".." is refused (resolving it here
         * could walk out of /work, and the files layer refuses it anyway). */
        while (*rest) {
                const char *end = strchrnul(rest, '/');
                size_t n = (size_t) (end - rest);

                if (n == 2 && rest[0] == '.' && rest[1] == '.') {
                        *ret_why = "'..' is not allowed in a path";
                        return -EINVAL;
                }
                if (n > 0 && !(n == 1 && rest[0] == '.')) {
                        if (o + (o ? 1 : 0) + n + 1 > size)
                                return -E2BIG;
                        if (o)
                                ret[o++] = '/';
                        memcpy(ret + o, rest, n);
                        o += n;
                }
                rest = *end ? end + 1 : end;
        }
        if (size == 0)
                return -E2BIG;
        ret[o] = '\0';
        return 0;
}

const char *e2b_template_profile(const char *template_id)
{
        if (!template_id || !*template_id || strcmp(template_id, "code-interpreter-v1") == 0 ||
            strcmp(template_id, "code-interpreter") == 0 || strcmp(template_id, "base") == 0)
                return "default";
        return template_id;
}

static const char *const mime_keys[][2] = {
        { "text/plain", "text" },        { "text/html", "html" },
        { "text/markdown", "markdown" }, { "image/svg+xml", "svg" },
        { "image/png", "png" },          { "image/jpeg", "jpeg" },
        { "application/pdf", "pdf" },    { "text/latex", "latex" },
        { "application/json", "json" },  { "application/javascript", "javascript" },
};

/* A text/plain value as E2B's server gives it in "text": one in single quotes (how Python and
 * Node print a string) loses them. New reference. */
static json_t *e2b_text(json_t *value)
{
        const char *s = json_string_value(value);
        size_t n = json_string_length(value);

        if (s && n >= 2 && s[0] == '\'' && s[n - 1] == '\'')
                return json_stringn(s + 1, n - 2);
        return json_incref(value);
}

/* The runner's JSON text of a chart, a DataFrame's data or application/json as the value E2B's
 * server sends (an object, where IPython's kernel hands it one): parsed, or NULL when it is
 * not JSON (then the key is left out, or for application/json the text stays). */
static json_t *parsed(json_t *value)
{
        const char *s = json_string_value(value);

        return s ? json_loadb(s, json_string_length(value), JSON_DECODE_ANY, NULL) : NULL;
}

static int set_mime(json_t *ev, json_t *extra, const char *mime, json_t *value)
{
        const char *key = NULL;
        json_t *v;

        for (size_t i = 0; i < sizeof(mime_keys) / sizeof(mime_keys[0]); i++)
                if (strcmp(mime, mime_keys[i][0]) == 0)
                        key = mime_keys[i][1];
        if (strcmp(mime, E2B_CHART_MIME) == 0)
                key = "chart";
        else if (strcmp(mime, E2B_DATA_MIME) == 0)
                key = "data";
        if (key && (strcmp(key, "chart") == 0 || strcmp(key, "data") == 0)) {
                v = parsed(value);
                /* Not JSON: a runner bug or a user's own output under the name; left out. */
                return v ? json_object_set_new(ev, key, v) : 0;
        }
        if (key && strcmp(key, "json") == 0 && (v = parsed(value)))
                return json_object_set_new(ev, key, v);
        if (key)
                return json_object_set_new(
                        ev, key, strcmp(key, "text") == 0 ? e2b_text(value) : json_incref(value));
        /* Another MIME type: E2B's server puts it in "extra", which the Python SDK reads; the
         * JavaScript SDK makes its extra of the keys it does not know, so it is there too. */
        if (json_object_set(extra, mime, value) < 0)
                return -ENOMEM;
        return json_object_set(ev, mime, value);
}

json_t *e2b_result_event(const json_t *data, bool is_main)
{
        json_t *ev =
                json_pack("{s:s, s:b, s:{}}", "type", "result", "is_main_result", is_main, "extra");
        json_t *extra = json_object_get(ev, "extra"), *value;
        const char *mime;

        if (!ev)
                return NULL;
        json_object_foreach ((json_t *) data, mime, value) {
                if (set_mime(ev, extra, mime, value) < 0) {
                        json_decref(ev);
                        return NULL;
                }
        }
        return ev;
}

static int append(json_t *events, json_t *ev)
{
        return ev ? json_array_append_new(events, ev) : -ENOMEM;
}

json_t *e2b_execution_events(const json_t *result, size_t shown)
{
        json_t *events = json_array(), *item, *error, *count;
        const json_t *value = json_object_get(result, "result");
        bool main_sent = false;
        size_t i;
        int r = 0;

        if (!events)
                return NULL;
        json_array_foreach (json_object_get(result, "outputs"), i, item) {
                bool is_main = json_is_true(json_object_get(item, "main"));
                json_t *data = json_object_get(item, "data");

                if (!json_is_object(data))
                        continue;
                main_sent |= is_main;
                if (i < shown)
                        continue; /* sent as it was made */
                r |= append(events, e2b_result_event(data, is_main));
        }
        /* A plain value (a number, a string) has no rich output: its repr is the main result,
         * as a Jupyter kernel's execute_result with text/plain only. */
        if (!main_sent && json_is_string(value))
                r |= append(events,
                            json_pack("{s:s, s:o, s:b, s:{}}", "type", "result", "text",
                                      e2b_text((json_t *) value), "is_main_result", true, "extra"));
        error = json_object_get(result, "error");
        if (json_is_object(error))
                r |= append(
                        events,
                        json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name",
                                  json_string_value(json_object_get(error, "name")) ?: "Error",
                                  "value", json_string_value(json_object_get(error, "value")) ?: "",
                                  "traceback",
                                  json_string_value(json_object_get(error, "traceback")) ?: ""));
        count = json_object_get(result, "execution_count");
        if (json_is_integer(count))
                r |= append(events, json_pack("{s:s, s:I}", "type", "number_of_executions",
                                              "execution_count", json_integer_value(count)));
        r |= append(events, json_pack("{s:s}", "type", "end_of_execution"));
        if (r != 0) {
                json_decref(events);
                return NULL;
        }
        return events;
}

int e2b_envelope_decode(const char *buf, size_t len, unsigned *ret_flags, const char **ret_msg,
                        size_t *ret_msg_len, size_t *ret_used)
{
        const unsigned char *u = (const unsigned char *) buf;
        uint32_t n;

        if (len < 5)
                return -EAGAIN;
        n = (uint32_t) u[1] << 24 | (uint32_t) u[2] << 16 | (uint32_t) u[3] << 8 | u[4];
        if (n > E2B_ENVELOPE_MAX)
                return -E2BIG;
        if (u[0] & E2B_ENVELOPE_COMPRESSED)
                return -EOPNOTSUPP;
        if (len - 5 < n)
                return -EAGAIN;
        *ret_flags = u[0];
        *ret_msg = buf + 5;
        *ret_msg_len = n;
        *ret_used = 5 + (size_t) n;
        return 0;
}

int e2b_envelope_append(char **buf, size_t *buf_len, unsigned flags, const char *msg, size_t len)
{
        unsigned char *p;
        char *grown;

        if (len > E2B_ENVELOPE_MAX)
                return -E2BIG;
        grown = realloc(*buf, *buf_len + 5 + len + 1);
        if (!grown)
                return -ENOMEM;
        *buf = grown;
        p = (unsigned char *) grown + *buf_len;
        p[0] = (unsigned char) flags;
        p[1] = (unsigned char) (len >> 24);
        p[2] = (unsigned char) (len >> 16);
        p[3] = (unsigned char) (len >> 8);
        p[4] = (unsigned char) len;
        if (len)
                memcpy(p + 5, msg, len);
        *buf_len += 5 + len;
        grown[*buf_len] = '\0';
        return 0;
}

unsigned e2b_connect_http_status(const char *code)
{
        static const struct {
                const char *code;
                unsigned status;
        } map[] = {
                { "canceled", 499 },
                { "invalid_argument", 400 },
                { "deadline_exceeded", 504 },
                { "not_found", 404 },
                { "already_exists", 409 },
                { "permission_denied", 403 },
                { "resource_exhausted", 429 },
                { "failed_precondition", 400 },
                { "aborted", 409 },
                { "out_of_range", 400 },
                { "unimplemented", 501 },
                { "unavailable", 503 },
                { "unauthenticated", 401 },
        };

        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
                if (strcmp(code, map[i].code) == 0)
                        return map[i].status;
        return 500;
}

const char *e2b_connect_code_of_status(unsigned status)
{
        switch (status) {
        case 400:
                return "invalid_argument";
        case 401:
                return "unauthenticated";
        case 403:
                return "permission_denied";
        case 404:
                return "not_found";
        case 405:
        case 501:
                return "unimplemented";
        case 409:
                return "already_exists";
        case 413:
        case 429:
                return "resource_exhausted";
        case 503:
                return "unavailable";
        case 504:
                return "deadline_exceeded";
        default:
                return status >= 500 ? "internal" : "unknown";
        }
}

bool e2b_path_is_e2b(const char *path, bool *ret_connect)
{
        const char *p = path;

        if (strncmp(p, "/e2b/", 5) != 0)
                return false;
        if (ret_connect) {
                const char *svc = strncmp(p, "/e2b/sandbox/", 13) == 0 ? p + 13 : NULL;
                const char *slash = svc ? strchr(svc, '/') : NULL;
                const char *dot = svc ? memchr(svc, '.', slash ? (size_t) (slash - svc) : 0) : NULL;
                *ret_connect = dot && slash && slash[1];
        }
        return true;
}

const char *e2b_connect_code(int r)
{
        switch (-r) {
        case ENOENT:
                return "not_found";
        case EINVAL:
        case ENOTDIR:
        case EISDIR:
        case ELOOP:
        case ENAMETOOLONG:
                return "invalid_argument";
        case EEXIST:
                return "already_exists";
        case EBUSY:
        case EUSERS:
        case EAGAIN:
        case ESHUTDOWN:
                return "unavailable";
        case EFBIG:
        case E2BIG:
        case ENOSPC:
        case EDQUOT:
        case EXFULL: /* a tenant's quota, resuming the sandbox (docs/TENANTS.md) */
                return "resource_exhausted";
        case EACCES:
        case EPERM:
                return "permission_denied";
        case EOPNOTSUPP:
                return "unimplemented";
        default:
                return "internal";
        }
}

char *e2b_base64_encode(const void *data, size_t len)
{
        static const char alphabet[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const unsigned char *in = data;
        char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16;
                size_t left = len - i;

                if (left > 1)
                        v |= (uint32_t) in[i + 1] << 8;
                if (left > 2)
                        v |= in[i + 2];
                *o++ = alphabet[v >> 18 & 63];
                *o++ = alphabet[v >> 12 & 63];
                *o++ = left > 1 ? alphabet[v >> 6 & 63] : '=';
                *o++ = left > 2 ? alphabet[v & 63] : '=';
        }
        *o = '\0';
        return out;
}
