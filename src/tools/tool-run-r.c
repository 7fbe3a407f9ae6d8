/* run_r: code in the session's persistent R session, in the same sandbox and /work as
 * run_python; offered only where the session's profile allows r. */
#include "tools-internal.h"

static int run_r(struct toolbox *tb, json_t *args, struct tool_result *res)
{
        return tools_run_code(tb, "r", json_string_value(json_object_get(args, "code")),
                              tools_timeout_ms(args), res);
}

const struct tool tool_run_r = {
        .name = "run_r",
        .title = "Run R",
        .description =
                "Run R in the same sandbox as run_python (same /work directory and files). "
                "Variables and functions persist between calls. Returns stdout (print, cat), "
                "stderr (message, warnings), the last visible value as R prints it, plots as "
                "PNG images, and on an error R's message. Installed R packages load with "
                "library(); there is no network access and no install.packages().",
        .input_schema = "{\"type\": \"object\","
                        " \"properties\": {"
                        "  \"code\": {\"type\": \"string\", \"minLength\": 1,"
                        "   \"description\": \"The R code to run.\"},"
                        "  \"timeout_s\": {\"type\": \"number\", \"exclusiveMinimum\": 0,"
                        " \"maximum\": 3600,"
                        "   \"description\": \"Wall-clock limit in seconds (default: the "
                        "sandbox profile's). The code is interrupted when it runs longer.\"}},"
                        " \"required\": [\"code\"], \"additionalProperties\": false}",
        .annotations = { .read_only = false,
                         .destructive = true,
                         .idempotent = false,
                         .open_world = false },
        .needs_session = true,
        .runs_code = true,
        .language = "r",
        .handler = run_r,
};
