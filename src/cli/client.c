/* HTTP client of `airlock exec` and `airlock sessions` (see client.h). One request at a time;
 * replies are bounded so a confused server cannot make the CLI eat the machine's memory. */
#include "client.h"

#include "base/buf.h"

#include "api/auth.h"
#include "base/cleanup.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPLY_MAX (512u * 1024u * 1024u) /* a body, or one ndjson line */

struct cli_client {
        const char *prog;
        CURL *curl;
        char *base; /* "http://host:port" without a trailing slash */
        char *unix_path;
        char *shown; /* the URL as the user gave it, for messages */
        char *token; /* NULL when none was found */
        char token_error[512];
};

struct transfer {
        struct cli_client *c;
        cli_line_fn on_line;
        void *userdata;
        struct buf b;
        bool streaming; /* decided at the first byte: a 200 ndjson reply */
        bool decided;
        bool too_big;
};

int cli_client_new(const char *prog, const char *url, const char *state_dir,
                   struct cli_client **ret_client)
{
        _cleanup_free_ char *default_dir = NULL;
        struct airlock_error err = { { 0 } };
        struct cli_client *c;
        const char *dirs[3] = { NULL };
        size_t n;
        int r;

        if (!url || !*url)
                url = getenv("AIRLOCK_URL");
        if (!url || !*url)
                url = CLI_DEFAULT_URL;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->prog = prog;
        c->shown = strdup(url);
        if (strncmp(url, "unix:", 5) == 0) {
                c->unix_path = strdup(url + 5);
                c->base = strdup("http://localhost");
        } else if (strstr(url, "://")) {
                c->base = strdup(url);
        } else {
                (void) asprintf(&c->base, "http://%s", url);
        }
        if (!c->shown || !c->base || (strncmp(url, "unix:", 5) == 0 && !c->unix_path)) {
                cli_client_free(c);
                return -ENOMEM;
        }
        n = strlen(c->base);
        while (n > 0 && c->base[n - 1] == '/')
                c->base[--n] = '\0';

        if (state_dir) {
                dirs[0] = state_dir;
        } else {
                if (api_state_dir_default(&default_dir) >= 0)
                        dirs[0] = default_dir;
                /* A daemon run by root (systemd) keeps its token there; readable only by
                 * root, and the error below says so. */
                if (geteuid() != 0)
                        dirs[dirs[0] ? 1 : 0] = "/var/lib/airlock";
        }
        r = api_token_find(dirs, &c->token, &err);
        if (r < 0 && r != -ENOENT)
                (void) snprintf(c->token_error, sizeof(c->token_error), "%s", err.msg);

        c->curl = curl_easy_init();
        if (!c->curl) {
                cli_client_free(c);
                fprintf(stderr, "airlock %s: cannot initialise libcurl\n", prog);
                return -ENOMEM;
        }
        *ret_client = c;
        return 0;
}

struct cli_client *cli_client_free(struct cli_client *c)
{
        if (!c)
                return NULL;
        if (c->curl)
                curl_easy_cleanup(c->curl);
        free(c->base);
        free(c->unix_path);
        free(c->shown);
        if (c->token) {
                explicit_bzero(c->token, strlen(c->token));
                free(c->token);
        }
        free(c);
        return NULL;
}

static bool reply_is_ndjson(CURL *curl)
{
        long status = 0;
        const char *ct = NULL;

        (void) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        (void) curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
        return status == 200 && ct && strncmp(ct, "application/x-ndjson", 20) == 0;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct transfer *t = userdata;
        size_t len = size * nmemb;
        int r;

        if (!t->decided) {
                t->streaming = t->on_line && reply_is_ndjson(t->c->curl);
                t->decided = true;
        }
        r = buf_append(&t->b, data, len, REPLY_MAX);
        if (r < 0) {
                t->too_big = r == -E2BIG;
                return 0; /* aborts the transfer */
        }

        if (t->streaming) {
                char *start = t->b.data, *nl;
                while ((nl = memchr(start, '\n', t->b.len - (size_t) (start - t->b.data)))) {
                        *nl = '\0';
                        if (nl > start)
                                t->on_line(t->userdata, start, (size_t) (nl - start));
                        start = nl + 1;
                }
                t->b.len -= (size_t) (start - t->b.data);
                memmove(t->b.data, start, t->b.len);
                t->b.data[t->b.len] = '\0';
        }
        return len;
}

int cli_client_request(struct cli_client *c, const char *method, const char *path, const char *body,
                       size_t body_len, cli_line_fn on_line, void *userdata,
                       struct cli_response *ret)
{
        _cleanup_free_ char *url = NULL, *auth = NULL;
        struct curl_slist *headers = NULL;
        struct transfer t = { .c = c, .on_line = on_line, .userdata = userdata };
        char errbuf[CURL_ERROR_SIZE] = "";
        CURLcode code;
        long status = 0;

        if (asprintf(&url, "%s%s", c->base, path) < 0)
                return -ENOMEM;
        curl_easy_reset(c->curl);
        (void) curl_easy_setopt(c->curl, CURLOPT_URL, url);
        if (c->unix_path)
                (void) curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
        (void) curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
        (void) curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
        (void) curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, 10L);
        (void) curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
        (void) curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &t);
        /* The token must never be sent to wherever a redirect points. */
        (void) curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
        if (body) {
                (void) curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
                (void) curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
                                        (curl_off_t) body_len);
                headers = curl_slist_append(headers, "Content-Type: application/json");
        }
        if (on_line)
                headers = curl_slist_append(headers, "Accept: application/x-ndjson");
        if (c->token) {
                if (asprintf(&auth, "Authorization: Bearer %s", c->token) < 0) {
                        curl_slist_free_all(headers);
                        return -ENOMEM;
                }
                headers = curl_slist_append(headers, auth);
        }
        /* No "Expect: 100-continue" round trip for large bodies. */
        headers = curl_slist_append(headers, "Expect:");
        (void) curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);

        code = curl_easy_perform(c->curl);
        curl_slist_free_all(headers);
        if (auth)
                explicit_bzero(auth, strlen(auth));
        (void) curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);

        if (code != CURLE_OK) {
                buf_done(&t.b);
                if (t.too_big) {
                        fprintf(stderr, "airlock %s: the reply from %s is larger than %u MiB\n",
                                c->prog, c->shown, REPLY_MAX >> 20);
                        return -E2BIG;
                }
                if (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST) {
                        fprintf(stderr,
                                "airlock %s: cannot connect to %s: is `airlock serve` "
                                "running?\n",
                                c->prog, c->shown);
                        return -ECONNREFUSED;
                }
                fprintf(stderr, "airlock %s: request to %s failed: %s\n", c->prog, c->shown,
                        errbuf[0] ? errbuf : curl_easy_strerror(code));
                return -EIO;
        }
        if (t.streaming && t.b.len > 0) {
                /* A last line without its newline. */
                on_line(userdata, t.b.data, t.b.len);
                t.b.len = 0;
        }
        *ret = (struct cli_response){ .status = status,
                                      .body = t.streaming ? NULL : t.b.data,
                                      .len = t.streaming ? 0 : t.b.len };
        if (t.streaming)
                buf_done(&t.b);
        return 0;
}

void cli_client_print_error(struct cli_client *c, const struct cli_response *resp)
{
        json_t *obj = resp->body ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(obj, "error"));

        if (msg)
                fprintf(stderr, "airlock %s: %s (HTTP %ld)\n", c->prog, msg, resp->status);
        else
                fprintf(stderr, "airlock %s: the daemon at %s answered HTTP %ld\n", c->prog,
                        c->shown, resp->status);
        if (resp->status == 401) {
                if (c->token_error[0])
                        fprintf(stderr, "airlock %s: %s\n", c->prog, c->token_error);
                else if (!c->token)
                        fprintf(stderr,
                                "airlock %s: no token found: set AIRLOCK_TOKEN, or --state-dir "
                                "to the daemon's state directory\n",
                                c->prog);
                else
                        fprintf(stderr,
                                "airlock %s: the token was not accepted: is it the one of the "
                                "daemon at %s?\n",
                                c->prog, c->shown);
        }
        json_decref(obj);
}
