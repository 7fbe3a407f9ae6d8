/* The Chat Completions HTTP client (see llm.h). One request at a time per client; answers are
 * bounded so that a confused endpoint cannot make airlock eat the machine's memory, and
 * redirects are not followed so that the key is never sent to another host. */
#include "llm.h"

#include "base/buf.h"
#include "base/json-util.h"

#include "base/cleanup.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_MS 30000L
#define PROVIDER_MSG_MAX 400

struct llm_client {
        CURL *curl;
        char *base_url; /* without trailing slashes */
        char *url;      /* base_url + "/chat/completions" */
        char *api_key;
        uint64_t timeout_ms;
        const atomic_bool *cancel;
};

struct reply {
        struct buf b;
        bool too_big;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
        curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void llm_error_set(struct llm_error *err, long http_status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void llm_error_set(struct llm_error *err, long http_status, const char *fmt, ...)
{
        va_list ap;

        if (!err)
                return;
        err->http_status = http_status;
        va_start(ap, fmt);
        (void) vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
}

int llm_client_new(const struct llm_config *cfg, struct llm_client **ret_client)
{
        struct llm_client *c;
        size_t n;

        if (!cfg->base_url || !*cfg->base_url)
                return -EINVAL;
        (void) pthread_once(&curl_once, curl_init_once);
        if (curl_init_code != CURLE_OK)
                return -ENOMEM;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 120000;
        c->cancel = cfg->cancel;
        c->base_url = strdup(cfg->base_url);
        if (cfg->api_key && *cfg->api_key)
                c->api_key = strdup(cfg->api_key);
        if (!c->base_url || (cfg->api_key && *cfg->api_key && !c->api_key)) {
                llm_client_free(c);
                return -ENOMEM;
        }
        n = strlen(c->base_url);
        while (n > 0 && c->base_url[n - 1] == '/')
                c->base_url[--n] = '\0';
        if (asprintf(&c->url, "%s/chat/completions", c->base_url) < 0) {
                c->url = NULL;
                llm_client_free(c);
                return -ENOMEM;
        }
        c->curl = curl_easy_init();
        if (!c->curl) {
                llm_client_free(c);
                return -ENOMEM;
        }
        *ret_client = c;
        return 0;
}

struct llm_client *llm_client_free(struct llm_client *c)
{
        if (!c)
                return NULL;
        if (c->curl)
                curl_easy_cleanup(c->curl);
        if (c->api_key) {
                explicit_bzero(c->api_key, strlen(c->api_key));
                free(c->api_key);
        }
        free(c->base_url);
        free(c->url);
        free(c);
        return NULL;
}

const char *llm_client_url(const struct llm_client *c)
{
        return c->base_url;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct reply *t = userdata;
        size_t len = size * nmemb;
        int r = buf_append(&t->b, data, len, LLM_REPLY_MAX);

        if (r < 0) {
                t->too_big = r == -E2BIG;
                return 0; /* aborts the transfer */
        }
        return len;
}

/* libcurl calls this about once a second and whenever data moves; a non-zero return aborts
 * the transfer. */
static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
        const atomic_bool *cancel = userdata;

        (void) dltotal;
        (void) dlnow;
        (void) ultotal;
        (void) ulnow;
        return atomic_load(cancel) ? 1 : 0;
}

/* Copies at most PROVIDER_MSG_MAX bytes of s into dst, dropping control characters so that a
 * provider's message cannot move the cursor or forge lines on the user's terminal or in a
 * log. */
static void copy_printable(char *dst, size_t dst_size, const char *s, size_t len)
{
        size_t o = 0;

        if (len > PROVIDER_MSG_MAX)
                len = PROVIDER_MSG_MAX;
        for (size_t i = 0; i < len && o + 1 < dst_size; i++) {
                unsigned char ch = (unsigned char) s[i];

                if (ch == '\n' || ch == '\t' || ch == '\r')
                        dst[o++] = ' ';
                else if (ch >= 0x20 && ch != 0x7f)
                        dst[o++] = (char) ch;
        }
        while (o > 0 && dst[o - 1] == ' ')
                o--;
        dst[o] = '\0';
}

/* The provider's own explanation of an error answer: OpenAI's {"error": {"message"}}, a bare
 * {"error": "..."} or {"message": "..."}, else the start of the body. */
static void provider_message(const char *body, size_t len, char *dst, size_t dst_size)
{
        json_t *obj = body ? json_loadb(body, len, 0, NULL) : NULL;
        json_t *e = json_object_get(obj, "error");
        const char *msg = NULL;

        if (json_is_string(e))
                msg = json_string_value(e);
        else if (json_is_object(e))
                msg = json_string_value(json_object_get(e, "message"));
        if (!msg)
                msg = json_string_value(json_object_get(obj, "message"));
        if (!msg)
                msg = json_string_value(json_object_get(obj, "detail"));
        if (msg)
                copy_printable(dst, dst_size, msg, strlen(msg));
        else if (body && len > 0)
                copy_printable(dst, dst_size, body, len);
        else
                dst[0] = '\0';
        json_decref(obj);
}

static int check_completion(json_t *resp, const char *url, struct llm_error *err)
{
        json_t *choices = json_object_get(resp, "choices"), *msg;

        if (!json_is_object(resp)) {
                llm_error_set(err, 0, "the answer of %s is not a JSON object", url);
                return -EBADMSG;
        }
        if (!json_is_array(choices) || json_array_size(choices) == 0) {
                _cleanup_free_ char *text = NULL;
                char pm[PROVIDER_MSG_MAX + 1] = "";

                /* Some providers answer 200 with an error object: show its message. */
                if (json_object_get(resp, "error"))
                        text = json_dump_text(resp, JSON_COMPACT, NULL);
                if (text)
                        provider_message(text, strlen(text), pm, sizeof(pm));
                if (pm[0])
                        llm_error_set(err, 0, "the answer of %s has no choices: %s", url, pm);
                else
                        llm_error_set(err, 0, "the answer of %s has no choices", url);
                return -EBADMSG;
        }
        msg = json_object_get(json_array_get(choices, 0), "message");
        if (!json_is_object(msg)) {
                llm_error_set(err, 0, "the answer of %s has no message in its first choice", url);
                return -EBADMSG;
        }
        return 0;
}

int llm_complete(struct llm_client *c, json_t *request, json_t **ret_response,
                 struct llm_error *err)
{
        _cleanup_free_ char *body = NULL, *auth = NULL;
        struct curl_slist *headers = NULL;
        struct reply t = {};
        char errbuf[CURL_ERROR_SIZE] = "";
        json_error_t jerr;
        json_t *resp;
        CURLcode code;
        long status = 0;
        int r;

        if (c->cancel && atomic_load(c->cancel)) {
                llm_error_set(err, 0, "cancelled: airlock is shutting down");
                return -ECANCELED;
        }
        body = json_dump_text(request, JSON_COMPACT, NULL);
        if (!body) {
                llm_error_set(err, 0, "cannot encode the request");
                return -ENOMEM;
        }

        curl_easy_reset(c->curl);
        (void) curl_easy_setopt(c->curl, CURLOPT_URL, c->url);
        (void) curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
        (void) curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
        (void) curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) strlen(body));
        (void) curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
        (void) curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long) c->timeout_ms);
        (void) curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS,
                                (long) c->timeout_ms < CONNECT_TIMEOUT_MS ? (long) c->timeout_ms
                                                                          : CONNECT_TIMEOUT_MS);
        /* Threads (the daemon's handlers) must not get SIGALRM from name resolution. */
        (void) curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_data);
        (void) curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &t);
        /* The key must never be sent to wherever a redirect points. */
        (void) curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
        (void) curl_easy_setopt(c->curl, CURLOPT_ACCEPT_ENCODING, "");
        if (c->cancel) {
                (void) curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
                (void) curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, (void *) c->cancel);
                (void) curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
        }
        headers = curl_slist_append(headers, "Content-Type: application/json");
        headers = curl_slist_append(headers, "Accept: application/json");
        headers = curl_slist_append(headers, "Expect:");
        if (c->api_key) {
                if (asprintf(&auth, "Authorization: Bearer %s", c->api_key) < 0) {
                        auth = NULL;
                        curl_slist_free_all(headers);
                        llm_error_set(err, 0, "out of memory");
                        return -ENOMEM;
                }
                headers = curl_slist_append(headers, auth);
        }
        (void) curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);

        code = curl_easy_perform(c->curl);
        curl_slist_free_all(headers);
        if (auth)
                explicit_bzero(auth, strlen(auth));
        (void) curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);

        if (code != CURLE_OK) {
                buf_done(&t.b);
                if (t.too_big) {
                        llm_error_set(err, 0, "the answer of %s is larger than %u MiB", c->base_url,
                                      LLM_REPLY_MAX >> 20);
                        return -E2BIG;
                }
                if (code == CURLE_ABORTED_BY_CALLBACK) {
                        llm_error_set(err, 0, "cancelled: airlock is shutting down");
                        return -ECANCELED;
                }
                if (code == CURLE_OPERATION_TIMEDOUT) {
                        llm_error_set(err, 0, "%s did not answer within %.3g s", c->base_url,
                                      (double) c->timeout_ms / 1000.0);
                        return -ETIMEDOUT;
                }
                if (code == CURLE_OUT_OF_MEMORY || code == CURLE_WRITE_ERROR) {
                        llm_error_set(err, 0, "out of memory reading the answer of %s",
                                      c->base_url);
                        return -ENOMEM;
                }
                llm_error_set(err, 0, "cannot reach %s: %s", c->base_url,
                              errbuf[0] ? errbuf : curl_easy_strerror(code));
                return -ECONNREFUSED;
        }

        if (status < 200 || status > 299) {
                char pm[PROVIDER_MSG_MAX + 1];

                provider_message(t.b.data, t.b.len, pm, sizeof(pm));
                buf_done(&t.b);
                if (pm[0])
                        llm_error_set(err, status, "%s answered HTTP %ld: %s", c->base_url, status,
                                      pm);
                else
                        llm_error_set(err, status, "%s answered HTTP %ld", c->base_url, status);
                return -EPROTO;
        }

        resp = t.b.data ? json_loadb(t.b.data, t.b.len, 0, &jerr) : NULL;
        buf_done(&t.b);
        if (!resp) {
                llm_error_set(err, 0, "the answer of %s is not JSON", c->base_url);
                return -EBADMSG;
        }
        r = check_completion(resp, c->base_url, err);
        if (r < 0) {
                json_decref(resp);
                return r;
        }
        *ret_response = resp;
        return 0;
}
