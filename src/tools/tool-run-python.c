/* run_python: one cell in the session's persistent Python interpreter, as in a notebook. */
#include "tools-internal.h"

static int run_python(struct toolbox *tb, json_t *args, struct tool_result *res)
{
        return tools_run_code(tb, "python", json_string_value(json_object_get(args, "code")),
                              tools_timeout_ms(args), res);
}

const struct tool tool_run_python = {
        .name = "run_python",
        .title = "Run Python",
        .description =
                "Run Python code in a persistent, sandboxed interpreter, like a notebook cell. "
                "Variables, imports and files in /work (the working directory) persist between "
                "calls. Returns stdout, stderr, the repr of the last expression as the result, "
                "and the error with its traceback if the code raised. Matplotlib figures are "
                "returned as PNG images without plt.show(). numpy, pandas and matplotlib are "
                "available. There is no network access. Files written under /work are listed "
                "and can be read back with read_file.",
        .input_schema = "{\"type\": \"object\","
                        " \"properties\": {"
                        "  \"code\": {\"type\": \"string\", \"minLength\": 1,"
                        "   \"description\": \"Python source code to run. The value of the last "
                        "expression is returned as the result.\"},"
                        "  \"timeout_s\": {\"type\": \"number\", \"exclusiveMinimum\": 0,"
                        " \"maximum\": 3600,"
                        "   \"description\": \"Wall-clock limit in seconds (default: the "
                        "sandbox profile's). A cell that runs longer is interrupted.\"}},"
                        " \"required\": [\"code\"], \"additionalProperties\": false}",
        /* It runs arbitrary code that can delete or overwrite files in /work, and running
         * it twice is not the same as once (x += 1); it never reaches the network. */
        .annotations = { .read_only = false,
                         .destructive = true,
                         .idempotent = false,
                         .open_world = false },
        .needs_session = true,
        .runs_code = true,
        .handler = run_python,
};
