/* GET /ui and its two assets: the operator's dashboard (docs/DASHBOARD.md), static HTML, JS
 * and CSS compiled into the binary (src/api/ui/, embedded by embed.py at build time), so nothing on
 * disk can be swapped and no asset comes from elsewhere. The page needs no token to load (it
 * holds no data); it asks for one and sends it on each API call it makes. Every answer carries
 * a Content-Security-Policy that lets the page run only its own script and talk only to this
 * daemon, so that output a cell printed can neither run nor send anything anywhere even if the
 * page's own escaping failed. */
#include "api-internal.h"

#include "base/cleanup.h"

#include "ui-css.h"
#include "ui-html.h"
#include "ui-js.h"

#include <errno.h>
#include <string.h>

/* No inline script or style, no eval, no plugins, no frames of it elsewhere (clickjacking
 * the stop and delete buttons), no <base> or form redirects; images only from here or data:
 * (the sparklines are drawn on canvas, nothing else loads). */
#define UI_CSP                                                                                     \
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "            \
        "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

struct ui_asset {
        const char *name; /* below /ui/; "" is /ui itself */
        const char *content_type;
        const unsigned char *data;
        size_t size;
};

static const struct ui_asset assets[] = {
        { "", "text/html; charset=utf-8", ui_html_source, sizeof(ui_html_source) - 1 },
        { "dashboard.js", "text/javascript; charset=utf-8", ui_js_source,
          sizeof(ui_js_source) - 1 },
        { "dashboard.css", "text/css; charset=utf-8", ui_css_source, sizeof(ui_css_source) - 1 },
};

static int reply_asset(struct api_request *req, const struct ui_asset *a)
{
        struct MHD_Response *resp;

        resp = MHD_create_response_from_buffer(a->size, (void *) a->data, MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return -ENOMEM;
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->content_type);
        (void) MHD_add_response_header(resp, "Content-Security-Policy", UI_CSP);
        (void) MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
        (void) MHD_add_response_header(resp, "X-Frame-Options", "DENY");
        (void) MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
        (void) MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "same-origin");
        return api_reply_response(req, MHD_HTTP_OK, resp);
}

int api_handle_ui(struct api_request *req)
{
        return reply_asset(req, &assets[0]);
}

int api_handle_ui_asset(struct api_request *req)
{
        for (size_t i = 1; i < ELEMENTSOF(assets); i++)
                if (strcmp(req->params.id, assets[i].name) == 0)
                        return reply_asset(req, &assets[i]);
        return api_reply_error(req, MHD_HTTP_NOT_FOUND, NULL,
                               "no such dashboard file: /ui/%.64s (the dashboard is /ui)",
                               req->params.id);
}
