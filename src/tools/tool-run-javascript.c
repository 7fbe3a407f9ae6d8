/* run_javascript: code in the session's persistent Node REPL, in the same sandbox and /work as
 * run_python; offered only where the session's profile allows javascript (and so typescript).
 * Its "language": "typescript" has the REPL transpile the code first: one tool for the one REPL,
 * rather than a run_typescript beside it. */
#include "tools-internal.h"

#include <string.h>

static int run_javascript(struct toolbox *tb, json_t *args, struct tool_result *res)
{
        const char *language = json_string_value(json_object_get(args, "language"));

        /* The schema allows only the two names; anything else is javascript's default. */
        return tools_run_code(
                tb, language && strcmp(language, "typescript") == 0 ? "typescript" : "javascript",
                json_string_value(json_object_get(args, "code")), tools_timeout_ms(args), res);
}

const struct tool tool_run_javascript = {
        .name = "run_javascript",
        .title = "Run JavaScript",
        .description =
                "Run JavaScript (Node.js) in the same sandbox as run_python (same /work "
                "directory and files). Variables, functions and classes persist between calls "
                "and top-level await works. Returns stdout (console.log), stderr "
                "(console.error), the value of the last expression as Node's REPL shows it, "
                "and on an uncaught error its name, message and stack. require() and static "
                "import declarations find Node's built-in modules and the packages in "
                "/work/node_modules; there is no network access and no npm install. With "
                "language \"typescript\" the code is TypeScript, transpiled without a type check "
                "and run in the same REPL (variables shared with JavaScript calls).",
        .input_schema = "{\"type\": \"object\","
                        " \"properties\": {"
                        "  \"code\": {\"type\": \"string\", \"minLength\": 1,"
                        "   \"description\": \"The JavaScript (or TypeScript) to run.\"},"
                        "  \"language\": {\"type\": \"string\","
                        " \"enum\": [\"javascript\", \"typescript\"],"
                        "   \"description\": \"typescript to transpile the code first; "
                        "default: javascript.\"},"
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
        .language = "javascript",
        .handler = run_javascript,
};
